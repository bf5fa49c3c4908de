"""The event heap: SimPy's schedule as a priority queue of ``(t, priority, id)`` keys.

Every entry is a SimPy event (processed exactly as ``simpy.Environment.step`` does) or a
hardware callback ``fn(*args)`` (:meth:`EventHeap.call_at`, the cheapest thing to
schedule: no event object). Entries are taken in ascending ``(t, priority, id)`` order,
``t`` the time [ns], ``priority`` SimPy's (``URGENT`` 0 before ``NORMAL`` 1; callbacks are
``NORMAL``), ``id`` one counter over every entry scheduled: SimPy's own order, so a run
gives the same results on this heap as on SimPy's list of tuples.

This file is the reference implementation (heapq on tuples), run in the pure-Python
build; ``heap.pyx`` is the compiled one (a binary heap of C structs compared on C
doubles and integers), and both give the same order: ``tests/unit/test_heap.py`` compares
them, ``tests/unit/test_fingerprint.py`` compares whole runs. The time handed in is kept
as given (an int stays an int) and becomes ``env._now`` when its entry is taken.
"""
from __future__ import annotations

from heapq import heappop, heappush
from itertools import count
from typing import Any, Callable

from simpy.core import EmptySchedule, Infinity, StopSimulation
from simpy.events import NORMAL


def fire(env, ev) -> None:
    """Process the SimPy event ``ev`` taken from the heap: exactly
    ``simpy.Environment.step`` after its pop (``schedule`` re-queues it when a callback
    stops the simulation)."""
    callbacks, ev.callbacks = ev.callbacks, None
    try:
        for cb in callbacks:
            cb(ev)
    except StopSimulation:
        ev.callbacks = callbacks[callbacks.index(cb) + 1:]
        env.schedule(ev, -1)
        raise
    if not ev._ok and not hasattr(ev, "_defused"):
        exc = type(ev._value)(*ev._value.args)
        exc.__cause__ = ev._value
        raise exc


class EventHeap:
    """The scheduled entries of the environment ``env`` (whose ``_now`` it reads and
    sets)."""

    __slots__ = ("_env", "_q", "_eid")

    def __init__(self, env) -> None:
        self._env = env
        # (t, priority, id, event) or (t, 1, id, fn, args): ids are unique, so tuples
        # are never compared past the id.
        self._q: list = []
        self._eid = count()

    def __len__(self) -> int:
        return len(self._q)

    @property
    def scheduled(self) -> int:
        """Entries scheduled so far (the next id)."""
        return int(repr(self._eid)[6:-1])     # itertools.count's repr is "count(N)"

    def schedule(self, event, priority: int = NORMAL, delay: Any = 0) -> None:
        """``simpy.Environment.schedule``: ``event`` at ``env._now + delay``."""
        heappush(self._q, (self._env._now + delay, priority, next(self._eid), event))

    def schedule_at(self, event, t: Any, priority: int = NORMAL) -> None:
        """``event`` at the absolute time ``t`` [ns] (>= now)."""
        heappush(self._q, (t, priority, next(self._eid), event))

    def call_at(self, t: Any, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` at the absolute time ``t`` [ns] (>= now), priority NORMAL."""
        heappush(self._q, (t, NORMAL, next(self._eid), fn, args))

    def call_in(self, delay: Any, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` ``delay`` [ns] from now."""
        heappush(self._q, (self._env._now + delay, NORMAL, next(self._eid), fn, args))

    def peek(self) -> Any:
        """``simpy.Environment.peek``: the time of the next entry, or Infinity."""
        return self._q[0][0] if self._q else Infinity

    def step(self) -> None:
        """``simpy.Environment.step``: take and process the next entry (EmptySchedule
        when there is none)."""
        if not self._q:
            raise EmptySchedule
        e = heappop(self._q)
        self._env._now = e[0]
        if len(e) == 5:
            e[3](*e[4])
        else:
            fire(self._env, e[3])

    def run(self) -> None:
        """Take and process entries until none is left (or one raises, e.g.
        StopSimulation)."""
        q = self._q
        env = self._env
        pop = heappop
        while q:
            e = pop(q)
            env._now = e[0]
            if len(e) == 5:
                e[3](*e[4])
            else:
                fire(env, e[3])
