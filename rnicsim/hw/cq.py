"""Completion queue: where the NIC writes CQEs and a software thread finds them.

Scope: the NIC pushes a completion with the time it becomes visible in host memory; a
thread either takes what is visible now (``take``) or waits (``wait``). A waiting thread
notices a completion after ``poll_detect`` (busy polling; plus the queue's
``loop_delay``, what the polling thread's event loop adds between two polls of this
queue) or ``interrupt_latency`` (interrupt mode), or when the work it booked earlier ends
if that is later, and then pays CPU for the poll call, each CQE and, with interrupts, the
interrupt and wake-up (``interrupt_cpu``) plus re-arming the CQ for the next event
(``ibv_req_notify_cq``: one ``mmio`` doorbell store). Several completions visible at once are taken by one wake-up.
On a core with CPU hogs the thread notices the completion later, as
:meth:`~rnicsim.hw.host.CpuThread.wake_at` says (its next slice, or a wake-up preemption).
One scheduled event per wake-up: the waiting thread is idle, so its core is free from the
wake time on and the poll's CPU is booked then.
Invariant: each pushed completion is returned by ``take``/``wait`` exactly once.

Traces: ``cpu.poll``, a waiting thread takes its completions (scope the thread, from the
poll's start to the end of its CPU work [ns]; ``cqes`` taken).
"""
from __future__ import annotations

from heapq import heappop, heappush
from simpy.events import NORMAL


class Cq:
    """A completion queue of one NIC; ``mode`` is ``"poll"`` or ``"interrupt"``."""

    __slots__ = ("sim", "name", "host", "_heap", "_seq", "_waiter", "mode", "pushed", "taken",
                 "_nic_waits", "loop_delay")

    def __init__(self, sim, name: str, host, loop_delay: float = 0.0) -> None:
        self.sim = sim
        self.name = name
        self.host = host
        self._heap: list = []
        self._seq = 0
        self._waiter = None      # (event, thread, max_n, armed)
        self.mode = "poll"
        self.pushed = 0
        self.taken = 0
        self._nic_waits: list = []   # (count, callback): CORE-Direct WAITs of send queues
        # Mean delay [ns] a busy-polling thread's event loop adds, when idle, between a
        # completion becoming visible and its poll of this queue (the loop's other polls
        # and scans between two polls of this one); a thread still busy with earlier work
        # polls when that work ends if that is later.
        self.loop_delay = loop_delay

    def push(self, wc, t_visible: float) -> None:
        """NIC side: completion ``wc`` becomes visible to software at ``t_visible`` [ns]."""
        self._seq += 1
        heappush(self._heap, (t_visible, self._seq, wc))
        self.pushed += 1
        if self._nic_waits:
            self._release_nic_waits()
        w = self._waiter
        if w is not None and not w[3]:
            self._arm(t_visible)

    def nic_wait(self, count: int, callback) -> None:
        """NIC side: call ``callback()`` once ``count`` completions have been pushed here.

        The NIC generated those completions itself, so it learns of them when it writes
        them (now), without going through host memory.
        """
        if self.pushed >= count:
            callback()
        else:
            self._nic_waits.append((count, callback))

    def _release_nic_waits(self) -> None:
        ready = [w for w in self._nic_waits if w[0] <= self.pushed]
        if ready:
            self._nic_waits = [w for w in self._nic_waits if w[0] > self.pushed]
            for _count, cb in ready:
                cb()

    def _arm(self, t_visible: float) -> None:
        # The waiter's own event goes on the heap at the wake-up time; its first callback
        # (_fill) takes the completions then. One heap entry per wake-up.
        ev, thread, max_n, _ = self._waiter
        self._waiter = (ev, thread, max_n, True)
        h = self.host
        t = t_visible + (h.interrupt_latency if self.mode == "interrupt"
                         else h.poll_detect + self.loop_delay)
        if thread.core.hogs is not None:   # time slicing with CPU hogs (hw/host.py)
            t = thread.wake_at(t, self.mode == "interrupt")
        busy = thread.core.busy_until
        if t < busy:
            t = busy        # the thread finishes the work it booked before it polls again
        env = self.sim.env
        if t < env._now:
            t = env._now
        ev._ok = True
        ev._value = None
        ev.callbacks.insert(0, self._fill)   # before the waiting process resumes
        env._queue.schedule_at(ev, t, NORMAL)

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

        The calling ``thread`` is charged the poll (and interrupt) CPU when it takes them.
        """
        if self._waiter is not None:
            raise RuntimeError(f"{self.name}: two waiters on one completion queue")
        ev = self.sim.env.event()
        self._waiter = (ev, thread, max_n, False)
        if self._heap:
            self._arm(self._heap[0][0])
        return ev

    def _fill(self, ev) -> None:
        _, thread, max_n, _ = self._waiter
        self._waiter = None
        wcs = self.take(max_n)
        # Armed at the earliest visible time, so at least one completion is visible.
        h = self.host
        cpu = h.poll_cq + len(wcs) * h.cqe_handle
        if self.mode == "interrupt":
            # The handler and wake-up, then ibv_req_notify_cq re-arms the CQ for the next
            # event before the poll: libmlx4 mlx4_arm_cq writes the arm doorbell record and
            # rings the CQ doorbell with one MMIO store (mlx5_arm_cq likewise).
            cpu += h.interrupt_cpu + h.mmio
        t = thread.reserve(self.sim.env._now, cpu)
        if self.sim.trace.enabled:
            self.sim.trace.emit(t - cpu, "cpu.poll", thread.name, end=t, cqes=len(wcs))
        ev._value = wcs
