"""rnicsim.sim.long_lived_heap: the cyclic collector is held off while a simulation is
built and run, and left as it was afterwards."""
from __future__ import annotations

import gc
import weakref

import pytest

from rnicsim.sim import Simulation, long_lived_heap


def test_collector_restored_after_nested_use():
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with long_lived_heap():
        kept = [object() for _ in range(10)]      # alive on the inner entry: frozen there
        outer = gc.get_freeze_count()
        assert outer > 0 and gc.get_threshold() != before
        with long_lived_heap():
            assert gc.get_freeze_count() >= outer
        assert gc.get_threshold() != before       # the inner exit leaves the outer state
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert len(kept) == 10


def test_run_restores_the_collector_and_cyclic_garbage_is_still_collected():
    """A run leaves the thresholds and the frozen set as they were, also when it raises,
    and cycles made during it are collected afterwards."""
    before = gc.get_threshold()
    sim = Simulation(1)
    refs = []

    class Node:
        pass

    def make_cycles():
        for _ in range(1000):
            a = Node()
            a.me = a
            refs.append(weakref.ref(a))
        yield sim.env.timeout(1.0)

    sim.process(make_cycles())
    sim.run(until=10.0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.collect()
    assert all(r() is None for r in refs)

    def fail():
        yield sim.env.timeout(1.0)
        raise RuntimeError("boom")

    sim.process(fail())
    with pytest.raises(RuntimeError, match="boom"):   # the run must raise, or the
        sim.run(until=100.0)                           # "also when it raises" goes unchecked
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
