"""YCSB's table is sized per thread of a node, as RCC sizes it (its scale factor is the
config's scale times the threads)."""
from __future__ import annotations

import pytest

import protocols.txn.scenario_kinds as sk
from protocols.txn.registry import make_workload


def test_per_thread_sizes_multiply_by_the_threads_of_a_node():
    wl = make_workload("ycsb", {"records_per_thread": 5, "hot_records_per_thread": 2},
                       3, 4, 2.2e9)
    assert wl.records == 5 * 4 * 3
    assert wl.hot == 2 * 4 * 3
    assert wl.tables[0].slots_per_node == 20


def test_per_node_sizes_are_taken_as_given():
    wl = make_workload("ycsb", {"records_per_node": 13, "hot_records_per_node": 1},
                       2, 4, 2.2e9)
    assert (wl.records, wl.hot) == (26, 2)


def test_one_size_per_quantity():
    with pytest.raises(ValueError, match="records_per_thread and records_per_node"):
        make_workload("ycsb", {"records_per_thread": 5, "records_per_node": 20}, 2, 4,
                      2.2e9)


def test_scenario_defaults_are_rccs_sizes_at_ten_threads():
    """RCC at 10 threads (its logs: "use scale factor: 30"): 100,000 x 30 = 3 M records
    and 100 x 30 = 3,000 hot records per node."""
    w = sk.TxnWorkload(kind="txn", benchmark="ycsb")
    wl = make_workload("ycsb", w.params(), 4, 10, 2.2e9)
    assert wl.records == 3_000_000 * 4
    assert wl.hot == 3_000 * 4
