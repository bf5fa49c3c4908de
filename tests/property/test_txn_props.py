"""Laws of the transaction layer beyond SmallBank and TPC-C (test_txn_serializability):
a generic read-modify-write workload written on the Txn API, determinism, phase
accounting and the metrics' definitions.

The workload (:class:`_Rmw`) draws a few distinct keys per transaction from a tunable
hot set, reads them together or one by one, declares ``for_update`` or not, increments
some of them (some twice, reading their own write in between), and is read-only with
some probability. Every committed increment adds 1 to a counter and to ``tx.delta``, so
the counters' sum must equal the committed deltas.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.api import TxnSpec
from protocols.txn.store import Table
from protocols.txn.systems import PRESETS, preset
from rnicsim.profile import load_profile
# The per-phase configurations of the SmallBank/TPC-C properties (one strategy). They
# keep the default random back-off on retry: without it (retry_backoff=False, DrTM+H's
# immediate retry) a hot mix of conflicting writes can livelock, committing nothing.
from test_txn_serializability import configs

PROFILE = load_profile("cx4-edr")
_Q = struct.Struct("<q")



class _Rmw:
    """YCSB-like read-modify-write mix over one table of ``keys`` counters."""

    def __init__(self, nodes: int, keys: int, hot: int, hot_p: float, ops: int,
                 write_p: float, ro_p: float, declare: bool, one_by_one: bool,
                 twice_p: float) -> None:
        self.nodes, self.keys, self.hot, self.hot_p = nodes, keys, hot, hot_p
        self.ops, self.write_p, self.ro_p = min(ops, keys), write_p, ro_p
        self.declare, self.one_by_one, self.twice_p = declare, one_by_one, twice_p
        self.tables = [Table(0, "counters", 8, -(-keys // nodes), self.place)]

    def place(self, k: int) -> tuple[int, int]:
        return k % self.nodes, k // self.nodes

    def cpu_estimate_ns(self) -> float:
        return 1500.0

    def next_txn(self, rng, node, thread, co) -> TxnSpec:
        ks: list[int] = []
        while len(ks) < self.ops:
            k = int(rng.integers(0, self.hot if rng.random() < self.hot_p else self.keys))
            if k not in ks:
                ks.append(k)
        ro = rng.random() < self.ro_p
        ws = set() if ro else {k for k in ks if rng.random() < self.write_p}
        twice = {k for k in ws if rng.random() < self.twice_p}
        declare, one_by_one = self.declare, self.one_by_one

        def body(tx):
            if one_by_one:
                vals = []
                for k in ks:
                    vals.append((yield from tx.read(0, k, declare and k in ws)))
                    yield tx.compute(200)
            else:
                vals = yield from tx.read_many([(0, k, declare and k in ws) for k in ks])
            delta = 0
            for k, v in zip(ks, vals):
                if k in ws:
                    tx.write(0, k, _Q.pack(_Q.unpack(v)[0] + 1))
                    delta += 1
                    if k in twice:          # read own write, increment again
                        v2 = yield from tx.read(0, k)
                        tx.write(0, k, _Q.pack(_Q.unpack(v2)[0] + 1))
                        delta += 1
            tx.delta = delta
        return TxnSpec("ro" if ro else "rmw", body, ro, (100.0, 50.0, 50.0, 50.0))


def _total(wl: _Rmw, store) -> int:
    tot = 0
    for k in range(wl.keys):
        n, s = wl.place(k)
        tot += _Q.unpack(store.value_local(n, 0, s))[0]
    return tot


def _no_locks_left(store, wl: _Rmw) -> bool:
    for k in range(wl.keys):
        n, s = wl.place(k)
        if store.header_local(n, 0, s)[0]:
            return False
    return True


@settings(max_examples=settings().max_examples)
@given(cfg=configs(), seed=st.integers(0, 10_000), nodes=st.integers(1, 3),
       threads=st.integers(1, 2), coroutines=st.integers(1, 6),
       keys=st.integers(2, 40), hot=st.integers(1, 8), hot_p=st.sampled_from([0.0, 0.9]),
       ops=st.integers(1, 4), write_p=st.sampled_from([0.3, 1.0]),
       ro_p=st.sampled_from([0.0, 0.3]), declare=st.booleans(), one_by_one=st.booleans(),
       twice_p=st.sampled_from([0.0, 0.5]))
def test_rmw_mix_serializable_counters_conserved(cfg, seed, nodes, threads, coroutines,
                                                 keys, hot, hot_p, ops, write_p, ro_p,
                                                 declare, one_by_one, twice_p):
    """Any configuration, any contention: committed transactions form a serializable
    history, the counters hold exactly the committed increments (reading one's own
    writes included), and no lock is left once running transactions finish."""
    wl = _Rmw(nodes, keys, min(hot, keys), hot_p, ops, write_p, ro_p, declare,
              one_by_one, twice_p)
    hist = History()
    b = build(PROFILE, nodes, threads, wl, cfg, coroutines, seed=seed, history=hist)
    run_txn_bench(b, 0.0, 15_000.0)
    # Drain, bounded (a leaked lock would make its transactions retry for ever): 5 ms
    # is far more than any transaction here needs, back-offs included.
    b.cc.stop()
    b.sim.run(until=b.sim.now + 5_000_000.0)
    res = hist.check()
    assert res.serializable, res.render()
    assert len(hist) > 0
    assert _total(wl, b.store) == b.cc.stats.deposits
    assert _no_locks_left(b.store, wl)


def _run(name: str, seed: int, warmup: float = 2_000.0, window: float = 20_000.0):
    wl = _Rmw(3, 30, 6, 0.5, 3, 0.5, 0.2, True, False, 0.0)
    hist = History()
    b = build(PROFILE, 3, 2, wl, preset(name), 3, seed=seed, history=hist)
    m = run_txn_bench(b, warmup, window)
    return m, list(hist.jsonl_lines()), b


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_same_seed_same_metrics_and_history_other_seed_differs(name):
    """The same seed gives identical metrics and history; another seed another history."""
    m1, h1, _ = _run(name, 11)
    m2, h2, _ = _run(name, 11)
    m3, h3, _ = _run(name, 12)
    assert m1 == m2 and h1 == h2
    assert h1 != h3


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("over", [{}, {"only_execution": True}])
def test_phases_add_up_to_the_latency_without_aborts(name, over):
    """Without aborts the mean per-phase latencies add up to the mean latency (the
    release that ends an execution-only FaSST transaction included)."""
    wl = _Rmw(3, 100_000, 100_000, 0.0, 3, 0.5, 0.2, True, True, 0.0)
    b = build(PROFILE, 3, 2, wl, preset(name, **over), 3, seed=2)
    m = run_txn_bench(b, 2_000.0, 20_000.0)
    assert m["abort_rate"] == 0.0 and m["committed"] > 10
    mean = b.sim.stats.hist("txn_lat").summary()["mean"] / 1e3
    phases = m["lat_exec_us"] + m["lat_validate_us"] + m["lat_log_us"] + m["lat_commit_us"]
    assert phases == pytest.approx(mean, rel=1e-9)


@pytest.mark.parametrize("name", ["drtmh", "fasst"])
def test_metrics_follow_their_definitions_over_the_window(name):
    """throughput_mtxns = committed in the window / window; abort_rate = aborted
    attempts / all attempts in the window; percentiles are ordered; draining the running
    transactions after the window changes no metric (cpu_util included)."""
    window = 20_000.0
    wl = _Rmw(3, 60, 12, 0.9, 3, 1.0, 0.0, True, False, 0.0)
    out = []
    for drain in (False, True):
        b = build(PROFILE, 3, 2, wl, preset(name), 4, seed=4)
        out.append(run_txn_bench(b, 5_000.0, window, drain=drain))
        st_ = b.cc.stats
    m = out[0]
    assert out[0] == out[1]
    assert m["committed"] == st_.committed > 0
    assert m["throughput_mtxns"] == pytest.approx(st_.committed / window * 1e3)
    assert 0 < m["abort_rate"] == pytest.approx(st_.aborted / (st_.aborted + st_.committed))
    assert m["lat_p50_us"] <= m["lat_p90_us"] <= m["lat_p99_us"]
    assert b.sim.stats.hist("txn_lat").summary()["count"] == st_.committed
    assert 0 < m["cpu_util"] <= 1.0
