"""The event heap (rnicsim/hw/heap.py, the reference, and heap.pyx, compiled): entries are
taken in SimPy's (t, priority, id) order, whichever implementation runs."""
from __future__ import annotations

import gc
import random
import weakref
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import pytest
import simpy

import rnicsim.hw.heap as loaded
from rnicsim.sim import Simulation


def _reference():
    path = Path(loaded.__file__).with_name("heap.py")
    spec = spec_from_file_location("heap_reference", path)
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


IMPLEMENTATIONS = {"reference": _reference().EventHeap, "loaded": loaded.EventHeap}


class _Env:
    def __init__(self) -> None:
        self._now = 0.0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_ties_go_by_priority_then_by_scheduling_order(impl):
    """At equal times URGENT (0) entries go before NORMAL (1) ones, and among equals the
    one scheduled first goes first; an int time stays an int when it becomes _now."""
    env = _Env()
    h = IMPLEMENTATIONS[impl](env)
    seen = []

    def note(name):
        seen.append((name, env._now))

    h.call_at(5.0, note, "a")
    h.call_at(2, note, "b")
    h.call_at(5.0, note, "c")
    ev = simpy.Event(simpy.Environment())
    ev.callbacks = [lambda e: note("urgent")]
    ev._ok = True
    h.schedule_at(ev, 5.0, 0)
    h.call_in(1.5, note, "d")
    assert (len(h), h.scheduled, h.peek()) == (5, 5, 1.5)
    h.run()
    assert seen == [("d", 1.5), ("b", 2), ("urgent", 5.0), ("a", 5.0), ("c", 5.0)]
    assert type(seen[1][1]) is int
    assert (len(h), h.scheduled, h.peek()) == (0, 5, float("inf"))


def test_the_compiled_heap_takes_entries_in_the_reference_order():
    """5,000 entries at random times from a few values (many ties), random priorities,
    scheduled while others are taken: both heaps call back in the same order, which is
    the order of the sorted keys."""
    orders = []
    for impl in IMPLEMENTATIONS.values():
        rng = random.Random(7)
        env = _Env()
        h = impl(env)
        order = []

        def hit(k, h=h, rng=rng, order=order, env=env):
            order.append((env._now, k))
            if k < 4000 and rng.random() < 0.5:
                for j in range(rng.randrange(1, 4)):
                    h.call_at(env._now + rng.choice((0.0, 0.5, 1.0, 3.0)), hit, k * 4 + j + 5000)

        for k in range(2000):
            ev = simpy.Event(simpy.Environment())
            ev._ok = True
            ev.callbacks = [lambda e, k=k: hit(k)]
            if rng.random() < 0.3:
                h.schedule_at(ev, float(rng.randrange(40)), rng.choice((0, 1)))
            else:
                h.call_at(float(rng.randrange(40)), hit, k)
        h.run()
        orders.append(order)
    assert orders[0] == orders[1]
    assert [t for t, _ in orders[0]] == sorted(t for t, _ in orders[0])
    assert len(orders[0]) > 2000


def test_simpy_processes_run_on_the_heap_with_env_step_and_env_run():
    """SimPy's own run loop (env.run, env.step, env.peek) works on the simulation's
    environment, interleaved with hardware callbacks in scheduling order."""
    sim = Simulation(1)
    env = sim.env
    log = []

    def proc():
        yield env.timeout(10.0)
        log.append(("proc", env.now))

    env.process(proc())
    sim.call_at(10.0, lambda: log.append(("call", env.now)))
    assert env.peek() == 0      # the process's Initialize event, URGENT at 0
    env.step()
    env.run(until=20.0)
    # the timeout was scheduled when the process first ran (env.step), after the call
    assert log == [("call", 10.0), ("proc", 10.0)]
    assert env.now == 20.0
    env.step()      # SimPy leaves the until event queued (its callbacks after the stop)
    with pytest.raises(simpy.core.EmptySchedule):
        env.step()


def test_a_simulation_dropped_with_events_scheduled_is_freed():
    """A run stopped at ``until`` leaves events on the heap that lead back to the
    simulation (a process waiting on a timeout, a callback bound to a component): the
    garbage collector still frees the simulation once it is dropped (the compiled heap
    shows it the entries it holds)."""
    def point():
        sim = Simulation(1)

        def proc():
            while True:
                yield sim.timeout(10.0)

        class Part:
            def tick(self):
                sim.call_in(7.0, self.tick)

        part = Part()
        sim.process(proc())
        sim.call_at(1.0, part.tick)
        sim.run(until=100.0)
        assert len(sim.env._queue) >= 2
        return weakref.ref(sim), weakref.ref(part)

    refs = point()
    gc.collect()
    assert [r() for r in refs] == [None, None]
