"""Completion queue: where the NIC writes CQEs and a software thread finds them.

Scope: the NIC pushes a completion with the time it becomes visible in host memory; a
thread either takes what is visible now (``take``) or waits (``wait``). A waiting thread
notices a completion after ``poll_detect`` (busy polling) or ``interrupt_latency``
(interrupt mode) and then pays CPU for the poll call, each CQE and, with interrupts, the
interrupt and wake-up. Several completions visible at once are taken by one wake-up.
Invariant: each pushed completion is returned by ``take``/``wait`` exactly once.
"""
from __future__ import annotations

from heapq import heappop, heappush
from simpy.events import NORMAL


class Cq:
    """A completion queue of one NIC; ``mode`` is ``"poll"`` or ``"interrupt"``."""

    __slots__ = ("sim", "name", "host", "_heap", "_seq", "_waiter", "_gen", "mode",
                 "pushed", "taken")

    def __init__(self, sim, name: str, host) -> None:
        self.sim = sim
        self.name = name
        self.host = host
        self._heap: list = []
        self._seq = 0
        self._waiter = None
        self._gen = 0
        self.mode = "poll"
        self.pushed = 0
        self.taken = 0

    def push(self, wc, t_visible: float) -> None:
        """NIC side: completion ``wc`` becomes visible to software at ``t_visible`` [ns]."""
        self._seq += 1
        heappush(self._heap, (t_visible, self._seq, wc))
        self.pushed += 1
        if self._waiter is not None and self._heap[0][2] is wc:
            self._arm(t_visible)

    def _arm(self, t_visible: float) -> None:
        h = self.host
        delay = h.interrupt_latency if self.mode == "interrupt" else h.poll_detect
        self._gen += 1
        self.sim.call_at(max(t_visible + delay, self.sim.now), self._wake, self._gen)

    def take(self, max_n: int = 1 << 30) -> list:
        """Software side: remove and return up to ``max_n`` completions visible now."""
        heap = self._heap
        now = self.sim.env._now
        out = []
        while heap and heap[0][0] <= now and len(out) < max_n:
            out.append(heappop(heap)[2])
        self.taken += len(out)
        return out

    def visible(self) -> int:
        """How many completions are visible now (without taking them)."""
        now = self.sim.env._now
        return sum(1 for e in self._heap if e[0] <= now)

    def wait(self, thread, max_n: int = 1 << 30):
        """A SimPy event whose value is a non-empty list of completions.

        The calling ``thread`` is charged the poll (and interrupt) CPU; the event fires
        when that CPU work is done.
        """
        ev = self.sim.env.event()
        if self._waiter is not None:
            raise RuntimeError(f"{self.name}: two waiters on one completion queue")
        self._waiter = (ev, thread, max_n)
        if self._heap:
            t0 = self._heap[0][0]
            if t0 <= self.sim.now:
                self._deliver()
            else:
                self._arm(t0)
        return ev

    def _wake(self, gen: int) -> None:
        if gen != self._gen or self._waiter is None:
            return  # superseded by an earlier wake-up
        self._deliver()

    def _deliver(self) -> None:
        ev, thread, max_n = self._waiter
        wcs = self.take(max_n)
        if not wcs:
            if self._heap:
                self._arm(self._heap[0][0])
            return
        self._waiter = None
        h = self.host
        cpu = h.poll_cq + len(wcs) * h.cqe_handle
        if self.mode == "interrupt":
            cpu += h.interrupt_cpu
        env = self.sim.env
        end = thread.reserve(env._now, cpu)
        ev._ok = True
        ev._value = wcs
        env.schedule(ev, NORMAL, end - env._now)
