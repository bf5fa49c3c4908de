"""Simulation: the SimPy environment, seeded random streams, statistics and trace hooks.

Contract:
- Time is float nanoseconds (:mod:`rnicsim.units`).
- Hardware schedules plain callbacks with :meth:`Simulation.call_at` (one heap entry, no
  SimPy process); software runs as SimPy generator processes on the same clock.
- Every random draw comes from :meth:`Simulation.rng` streams named by the caller and
  seeded from the scenario seed, so the same seed gives identical results whatever else
  draws random numbers.
- Statistics are collected only inside the measured window (:meth:`Simulation.measure`).
- Trace subscribers observe; they never change what happens. A run with tracing on gives
  the same results as the same run with tracing off.
"""
from __future__ import annotations

import fnmatch
import gc
import hashlib
from numbers import Integral
from contextlib import contextmanager
from array import array
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import simpy
from simpy.core import StopSimulation
from simpy.events import URGENT, Event

from rnicsim.hw.heap import EventHeap


class Environment(simpy.Environment):
    """SimPy's environment on the event heap of :mod:`rnicsim.hw.heap`: ``schedule``,
    ``peek`` and ``step`` (and so ``run``) take and give entries in SimPy's
    ``(t, priority, id)`` order, which also holds hardware callbacks without an event
    object (:meth:`Simulation.call_at`). ``_queue`` is that heap (not a list); SimPy's
    ``_eid`` counter is gone (the heap numbers entries: ``_queue.scheduled``)."""

    def __init__(self) -> None:
        super().__init__()
        del self._eid
        self._queue = EventHeap(self)
        # The heap's methods as instance attributes: SimPy's events call env.schedule,
        # and a bound method of the compiled heap costs no Python frame.
        self.schedule = self._queue.schedule
        self.peek = self._queue.peek
        self.step = self._queue.step


class Histogram:
    """Samples of one quantity (e.g. latency [ns]) with exact percentiles."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples = array("d")

    def add(self, value: float) -> None:
        """Record one sample."""
        self.samples.append(value)

    def __len__(self) -> int:
        return len(self.samples)

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of the samples, NaN when empty."""
        if not self.samples:
            return float("nan")
        return float(np.percentile(np.frombuffer(self.samples, dtype=float), q))

    def mean(self) -> float:
        """Arithmetic mean of the samples, NaN when empty."""
        if not self.samples:
            return float("nan")
        return float(np.mean(np.frombuffer(self.samples, dtype=float)))

    def summary(self) -> dict[str, float]:
        """count, mean, p50, p90, p99, p99.9 of the samples."""
        if not self.samples:
            nan = float("nan")
            return {"count": 0, "mean": nan, "p50": nan, "p90": nan, "p99": nan, "p999": nan}
        a = np.frombuffer(self.samples, dtype=float)
        p = np.percentile(a, [50, 90, 99, 99.9])
        return {"count": len(a), "mean": float(a.mean()), "p50": float(p[0]),
                "p90": float(p[1]), "p99": float(p[2]), "p999": float(p[3])}


class Stats:
    """Counters and histograms keyed by name, recorded only while measuring."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self.hists: dict[str, Histogram] = {}

    def hist(self, name: str) -> Histogram:
        """The histogram called ``name`` (created on first use)."""
        h = self.hists.get(name)
        if h is None:
            h = self.hists[name] = Histogram()
        return h

    def count(self, name: str) -> float:
        """Current value of counter ``name`` (0 when never incremented)."""
        return self.counters.get(name, 0)


class Trace:
    """Trace hub: components emit named events; subscribers select them by glob.

    ``emit`` costs one attribute test when nobody subscribed (callers test
    ``trace.enabled`` first). Subscribers receive ``(time_ns, name, scope, data)`` and
    must not act on the simulation. An event that lasts (a PU's work, a TLP, a packet on
    a link) carries its end time [ns] as ``data["end"]``; the model books work ahead, so
    an event's time may lie after the current time.

    Components with a ``tap`` slot (PCIe attachments, link directions) are registered
    with :meth:`attach`; while someone subscribes, their ``tap`` is
    ``tap(name, start, end, track="", **data)``, emitting here at ``start`` [ns] under the
    component's scope + ``track`` (e.g. ``"/up"``), else None (one attribute test on
    their path).
    """

    def __init__(self) -> None:
        self._subs: list[tuple[str, str, Callable[..., None]]] = []
        self._taps: list[tuple[Any, str]] = []
        # (name, scope) -> the subscribers matching it: globs are matched once per pair.
        self._route: dict[tuple[str, str], list[Callable[..., None]]] = {}
        self.enabled = False

    def subscribe(self, fn: Callable[[float, str, str, dict], None], name: str = "*",
                  scope: str = "*") -> None:
        """Call ``fn(t, name, scope, data)`` for every event whose name and scope match
        the ``fnmatch`` globs ``name`` and ``scope`` (e.g. ``"nic.*"``, ``"n3/*"``);
        ``t`` is the event time [ns]. ``fn`` must only observe: results are the same with
        or without subscribers."""
        self._subs.append((name, scope, fn))
        self._route.clear()
        if not self.enabled:
            self.enabled = True
            for obj, sc in self._taps:
                obj.tap = self._tap_for(sc)

    def attach(self, obj: Any, scope: str) -> None:
        """Register a component with a ``tap`` slot that emits under ``scope``; its
        ``tap`` is set while anyone subscribes (see class doc)."""
        self._taps.append((obj, scope))
        obj.tap = self._tap_for(scope) if self.enabled else None

    def _tap_for(self, scope: str) -> Callable[..., None]:
        emit = self.emit

        def tap(name: str, start: float, end: float, track: str = "", **data: Any) -> None:
            emit(start, name, scope + track, end=end, **data)
        return tap

    def emit(self, now: float, name: str, scope: str, **data: Any) -> None:
        """Deliver an event at ``now`` [ns] to the matching subscribers."""
        fns = self._route.get((name, scope))
        if fns is None:
            fns = self._route[name, scope] = [
                fn for pat_n, pat_s, fn in self._subs
                if fnmatch.fnmatchcase(name, pat_n) and fnmatch.fnmatchcase(scope, pat_s)]
        for fn in fns:
            fn(now, name, scope, data)


# Functions called with every new Simulation (see `observe_simulations`).
_NEW_SIM_HOOKS: list[Callable[["Simulation"], None]] = []


@contextmanager
def observe_simulations(fn: Callable[["Simulation"], None]):
    """Within this context, call ``fn(sim)`` for every :class:`Simulation` created (at the
    end of its constructor): how ``rnicsim run --trace`` reaches the simulation a
    workload builds. ``fn`` may only subscribe observers."""
    _NEW_SIM_HOOKS.append(fn)
    try:
        yield
    finally:
        _NEW_SIM_HOOKS.remove(fn)


# Python's cyclic garbage collector scans every tracked object in each full collection,
# and a cluster of 80 nodes holds millions (QPs, tables, endpoints) that live for the
# whole run; with the default thresholds those scans took 30-60% of a run's time at 40-80
# nodes, and 60% of building a 120-node mesh, growing with the cluster. The simulator's
# own garbage is nearly all freed by reference counting (a full collection during an
# 80-node SmallBank run finds ~30 cyclic objects), so while building and running,
# collections are made rarer and the objects alive on entry are frozen out of them; the
# outermost exit restores the thresholds and returns frozen objects to the oldest
# generation. Results do not depend on it: nothing in the simulation uses finalizers,
# weak references or object addresses for order.
_GC_THRESHOLD = (50_000, 20, 20)
_gc_depth = 0
_gc_saved: tuple[int, ...] = ()


@contextmanager
def long_lived_heap():
    """Context for building or running a large simulation: objects alive on entry are
    frozen out of the cyclic garbage collector and collections are rarer; nested uses
    freeze again on entry, the outermost exit restores the collector (see above)."""
    global _gc_depth, _gc_saved
    gc.freeze()
    if _gc_depth == 0:
        _gc_saved = gc.get_threshold()
        gc.set_threshold(*_GC_THRESHOLD)
    _gc_depth += 1
    try:
        yield
    finally:
        _gc_depth -= 1
        if _gc_depth == 0:
            gc.set_threshold(*_gc_saved)
            gc.unfreeze()


class Simulation:
    """The simulation clock and its services.

    Params: ``seed`` [int] seeds every named random stream.
    """

    def __init__(self, seed: int = 1) -> None:
        if isinstance(seed, bool) or not isinstance(seed, Integral):
            raise TypeError(f"Simulation: seed must be a whole number, got {seed!r}")
        self.env = Environment()
        self.seed = int(seed)
        self._rngs: dict[str, np.random.Generator] = {}
        self.stats = Stats()
        self.trace = Trace()
        self.measuring = False
        self.window: tuple[float, float] = (0.0, 0.0)
        self._window_closed = True      # no window to extend until measure()
        self._heap = self.env._queue
        # The heap's own methods (no Python frame in the compiled build): see call_at.
        self.call_at = self._heap.call_at
        self.call_in = self._heap.call_in
        for fn in list(_NEW_SIM_HOOKS):
            fn(self)

    @property
    def now(self) -> float:
        """Current time [ns]."""
        return self.env._now

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` at absolute time ``t`` [ns] (>= now): one heap entry at
        SimPy's NORMAL priority, no event object. (Each instance replaces this method by
        its heap's ``call_at``, which is the same.)"""
        self._heap.call_at(t, fn, *args)

    def call_in(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` after ``delay`` [ns]."""
        self._heap.call_in(delay, fn, *args)

    def succeed_in(self, event: Event, delay: float, value: Any = None) -> None:
        """Make the untriggered SimPy ``event`` succeed with ``value`` after ``delay``
        [ns]: one heap entry at now + ``delay``, no new event object (what a coroutine
        waiting on ``event`` resumes with; ``Event.succeed`` but later)."""
        event._ok = True
        event._value = value
        self.env.schedule(event, delay=delay)

    @property
    def events_scheduled(self) -> int:
        """Heap entries scheduled so far (hardware callbacks and SimPy events alike),
        a measure of the simulator's work."""
        return self._heap.scheduled

    def timeout(self, delay: float, value: Any = None) -> simpy.events.Timeout:
        """A SimPy timeout firing ``delay`` [ns] from now with ``value``, for software
        processes (hardware uses :meth:`call_in`)."""
        return self.env.timeout(delay, value)

    def event(self) -> simpy.events.Event:
        """A fresh SimPy event."""
        return self.env.event()

    def process(self, gen: Iterable) -> simpy.events.Process:
        """Start a software process (a generator yielding SimPy events); returns it."""
        return self.env.process(gen)

    def rng(self, name: str) -> np.random.Generator:
        """The random stream called ``name``, seeded from the simulation seed and the name."""
        g = self._rngs.get(name)
        if g is None:
            digest = hashlib.sha256(f"{self.seed}:{name}".encode()).digest()
            g = self._rngs[name] = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        return g

    def measure(self, warmup_ns: float, window_ns: float) -> None:
        """Collect statistics only during [warmup, warmup + window) [ns] (absolute times;
        ValueError for a negative or NaN warm-up or window)."""
        if not warmup_ns >= 0 or not window_ns >= 0:
            raise ValueError(f"measure: warmup_ns and window_ns must be >= 0 [ns], got "
                             f"{warmup_ns!r} and {window_ns!r}")
        self.window = (warmup_ns, warmup_ns + window_ns)
        if warmup_ns <= self.now:
            self.measuring = True
        else:
            self.call_at(warmup_ns, self._set_measuring, True)
        self._window_closed = False
        self.at_window_end(self._close_window)

    def _close_window(self) -> None:
        self.measuring = False
        self._window_closed = True

    def extend_window(self, end_ns: float) -> None:
        """Move the end of the measured window to ``end_ns`` [ns], while it is open or
        at its end (``now`` up to the end, the window's closing not yet run). Everything
        that closes with the window (statistics, :meth:`busy_meter`) closes then instead.
        ValueError for an end before the present one or a window already closed."""
        w0, w1 = self.window
        if not end_ns >= w1:
            raise ValueError(f"extend_window: the end must not move earlier than {w1!r} "
                             f"[ns], got {end_ns!r}")
        if self.now > w1 or self._window_closed:
            raise ValueError(f"extend_window: no window open (the last ended at {w1!r} "
                             f"[ns], now {self.now!r})")
        self.window = (w0, end_ns)

    def at_window_end(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` when the measured window ends, following
        :meth:`extend_window` (a call scheduled at the old end schedules itself again at
        the new one)."""
        def fire() -> None:
            if self.now < self.window[1]:
                self.call_at(self.window[1], fire)
            else:
                fn(*args)

        self.call_at(self.window[1], fire)

    def cpu_meter(self, cores: Iterable) -> Callable[[], float]:
        """A function giving the mean busy share [0-1] of ``cores`` (objects with a
        ``busy_ns`` [ns] of booked CPU, such as ``cluster.nodes[i].thread(j).core``; one
        listed twice counts once) over the measured window: booked CPU between the
        window's opening and its end (or now, while it is open) over that time; what runs
        after the window (a drain) does not count. Call after :meth:`measure`; before the
        window opens it gives 0."""
        uniq = list({id(c): c for c in cores}.values())
        if not uniq:
            raise ValueError("cpu_meter: no cores given")
        shares = self.busy_meter([lambda c=c: c.busy_ns for c in uniq])
        return lambda: min(1.0, sum(shares()) / len(uniq))

    def busy_meter(self, sources: Sequence[Callable[[], float]]) -> Callable[[], list[float]]:
        """A function giving, for each of ``sources`` (functions returning the busy time
        [ns] booked so far on one resource: a core, a NIC's processing unit, a pipe), its
        busy share over the measured window, as :meth:`cpu_meter` defines it (time booked
        between the window's opening and its end, or now while it is open, over that span;
        0 before the window opens). A share is not capped: work booked at the end of the
        window for later (a backlog) can take it past 1. Call after :meth:`measure`."""
        srcs = list(sources)
        w0, w1 = self.window
        at = [w0, None, None, None]   # opened at [ns], busy then, busy at the end, end [ns]

        def open_window() -> None:
            at[0] = self.now
            at[1] = [f() for f in srcs]

        def close_window() -> None:
            at[2] = [f() for f in srcs]
            at[3] = self.now

        if w0 <= self.now:
            open_window()
        else:
            self.call_at(w0, open_window)
        self.at_window_end(close_window)

        def shares() -> list[float]:
            if self.now < w0 or at[1] is None:
                return [0.0] * len(srcs)
            end = at[3] if at[2] is not None else self.now
            span = end - at[0]
            if span <= 0:
                return [0.0] * len(srcs)
            b = at[2] if at[2] is not None else [f() for f in srcs]
            return [(x - x0) / span for x, x0 in zip(b, at[1])]

        return shares

    def _set_measuring(self, on: bool) -> None:
        self.measuring = on

    def run(self, until: float | Event | None = None) -> Any:
        """Run until time ``until`` [ns], until the event ``until`` is processed (returning
        its value), or until no events remain.

        Same semantics and event order as SimPy's ``Environment.run``; scheduled hardware
        callbacks are dispatched directly rather than through ``Environment.step``. The
        objects built before the run (cluster, QPs, tables) are kept out of Python's cyclic
        garbage collector while it runs (:func:`long_lived_heap`).
        """
        with long_lived_heap():
            return self._run(until)

    def _run(self, until: float | Event | None) -> Any:
        env = self.env
        if until is not None:
            if not isinstance(until, Event):
                at = float(until)
                if at <= env._now:
                    raise ValueError(f"until ({at}) must be greater than the current "
                                     "simulation time")
                until = Event(env)
                until._ok = True
                until._value = None
                env.schedule(until, URGENT, at - env._now)
            elif until.callbacks is None:
                return until.value
            until.callbacks.append(StopSimulation.callback)
        try:
            self._heap.run()
        except StopSimulation as exc:
            return exc.args[0]
        if until is not None:
            raise RuntimeError(f'No scheduled events left but "until" event was not '
                               f"triggered: {until}")
        return None

    # Convenience recorders (no-ops outside the measured window).
    def add(self, name: str, amount: float = 1) -> None:
        """Add ``amount`` to counter ``name`` of ``sim.stats`` while measuring (no-op
        outside the :meth:`measure` window)."""
        if self.measuring:
            c = self.stats.counters
            c[name] = c.get(name, 0) + amount

    def record(self, name: str, value: float) -> None:
        """Add ``value`` to histogram ``name`` of ``sim.stats`` while measuring (no-op
        outside the :meth:`measure` window; the unit is the caller's, ns by convention)."""
        if self.measuring:
            self.stats.hist(name).add(value)
