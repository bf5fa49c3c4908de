"""TPC-C New-Order districts: one per coroutine by default, the regime DrTM+H measured."""
from __future__ import annotations

import pytest

from protocols.txn.bench import build, make_workload, run_txn_bench
from protocols.txn.systems import preset
from rnicsim.profile import load_profile

PROFILE = load_profile("cx4-edr")


def _abort_rate(districts, coroutines: int = 16) -> tuple[float, int]:
    params = {"warehouses_per_node": 1, "logic": 2_000.0, "logic_per_item": 1_000.0,
              "districts": districts}
    wl = make_workload("tpcc", params, 2, 1, PROFILE.host.clock, coroutines)
    b = build(PROFILE, 2, 1, wl, preset("drtmh"), coroutines)
    m = run_txn_bench(b, 100_000.0, 1_500_000.0)
    return m["abort_rate"], wl.districts


def test_every_coroutine_has_its_own_district_by_default():
    """16 coroutines on one CPU-bound thread: with a district each (the default, 16
    districts) New-Orders abort only on stock conflicts; on TPC-C's 10, six pairs of
    coroutines share a district and about three times as many abort on ``d_next_o_id``."""
    own, nd = _abort_rate(None)
    shared, nd10 = _abort_rate(10)
    assert (nd, nd10) == (16, 10)
    assert own < 0.3, own
    assert shared > 0.4 and shared > 2 * own, (shared, own)


def test_default_is_tpcc_schema_up_to_ten_coroutines():
    wl = make_workload("tpcc", {}, 2, 4, PROFILE.host.clock, 8)
    assert wl.districts == 10
    with pytest.raises(ValueError):
        make_workload("tpcc", {"districts": 0}, 2, 4, PROFILE.host.clock, 8)


def test_random_district_is_drawn_per_transaction():
    """``district: random`` draws each New-Order's district uniformly (DrTM+H's
    ``RandomNumber(1, 10)``); the default keeps a coroutine on its own district."""
    import numpy as np

    from workloads.tpcc import DISTRICT

    def districts(choice):
        wl = make_workload("tpcc", {"district": choice}, 2, 1, PROFILE.host.clock, 4)
        rng = np.random.default_rng(7)
        seen = set()
        for _ in range(200):
            spec = wl.next_txn(rng, 0, 0, 3)
            seen.add(_district_of(spec, DISTRICT))
        return seen

    assert districts("coroutine") == {3}
    assert districts("random") == set(range(10))
    with pytest.raises(ValueError):
        make_workload("tpcc", {"district": "round_robin"}, 2, 1, PROFILE.host.clock, 4)


class _Found(Exception):
    pass


def _district_of(spec, district_table):
    """The district of a New-Order (its number within its warehouse)."""
    return _district_key(spec, district_table)[1]


def _district_key(spec, district_table):
    """(warehouse, district): the key of the district a New-Order's body reads first."""
    class _Stub:
        def read_many(self, items, for_update=False):
            raise _Found(next(k for t, k, *_ in items if t == district_table))
            yield  # pragma: no cover - makes this a generator, as the API's

    with pytest.raises(_Found) as found:
        next(spec.body(_Stub()))
    return found.value.args[0]


def test_a_thread_draws_its_warehouse_from_its_range():
    """``warehouses_per_thread: 3`` with 30 warehouses per node (RCC's tpcc_main.cc:
    worker t picks from warehouses t .. t + 2): thread 9 of node 1 draws warehouses 39,
    40 and 41 and no other; thread 29 of 30 wraps to 59, 30 and 31; the default keeps a
    thread on its own; more than the node's warehouses is refused."""
    import numpy as np

    from workloads.tpcc import DISTRICT

    def warehouses(k, node, thread, threads=10):
        wl = make_workload("tpcc", {"warehouses_per_node": 30, "warehouses_per_thread": k},
                           2, threads, PROFILE.host.clock, 4)
        rng = np.random.default_rng(7)
        return {_district_key(wl.next_txn(rng, node, thread, 0), DISTRICT)[0]
                for _ in range(200)}

    assert warehouses(3, 1, 9) == {39, 40, 41}
    assert warehouses(3, 1, 29, threads=30) == {59, 30, 31}
    assert warehouses(1, 1, 9) == {39}
    with pytest.raises(ValueError):
        make_workload("tpcc", {"warehouses_per_node": 30, "warehouses_per_thread": 31}, 2,
                      10, PROFILE.host.clock, 4)


def test_too_many_warehouses_per_thread_is_an_input_error():
    """A scenario whose threads would draw from more warehouses than a node has is
    refused when it loads, naming the key (not when its points run)."""
    from pathlib import Path

    from rnicsim.errors import InputError
    from rnicsim.scenario import load_scenario

    f = Path(__file__).resolve().parents[2] / "scenarios" / "rcc" / "fig15_logs_tpcc.yaml"
    load_scenario(f, ["workload.tpcc_warehouses_per_thread=30"])
    with pytest.raises(InputError) as e:
        load_scenario(f, ["workload.tpcc_warehouses_per_thread=31"])
    assert e.value.key.startswith("workload.tpcc_warehouses_per_thread")
    assert "at most the warehouses per node (30)" in e.value.expected


@pytest.mark.parametrize("verbs", ["rpc", "one_sided"])
def test_stock_reads_together_or_one_by_one(verbs):
    """Node 0's one coroutine runs New-Orders whose stocks all live on the other two
    nodes (no contention, nothing aborts), under RCC's OCC. Over RPC its reads are
    outstanding requests: with ``prefetch_stocks`` the 5-15 stocks (10 on average) go
    out together, one wait; without it, as RCC's New-Order reads them, one wait each, so
    a commit waits about 9 times more. One-sided, RCC's OCC reads one at a time either
    way."""
    from protocols.txn.scenario_kinds import OccProtocol, occ_config

    def rts(prefetch: bool) -> float:
        params = {"warehouses_per_node": 1, "logic": 1_000.0, "logic_per_item": 100.0,
                  "remote_item_pct": 100.0, "prefetch_stocks": prefetch}
        wl = make_workload("tpcc", params, 3, 1, PROFILE.host.clock, 1)
        b = build(PROFILE, 3, 1, wl, occ_config(OccProtocol(kind="occ", verbs=verbs)), 1)
        for key in [(1, 0), (2, 0)]:
            b.cc.coords.pop(key)
        m = run_txn_bench(b, 10_000.0, 4_000_000.0)
        assert m["abort_rate"] == 0.0 and m["committed"] > 50
        return m["round_trips_per_txn"]

    gap = rts(False) - rts(True)
    if verbs == "rpc":
        assert 8.0 < gap < 10.0, gap
    else:
        assert gap == 0.0
