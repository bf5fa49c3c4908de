"""Laws every concurrency-control protocol keeps, in every form (RCC's six protocols).

For each protocol kind x form (``rpc``, ``one_sided``, or a random hybrid bit mask) on
small random YCSB, SmallBank and TPC-C New-Order runs (2-3 nodes, 1-2 threads, 1-4
coroutines, few records so that transactions conflict), drained after the window:

- the recorded history is serializable (``protocols.txn.history``);
- SmallBank's money is conserved (committed deposits and withdrawals only);
- every started transaction ends (no deadlock, no lock left behind);
- WAIT-DIE waits only for a younger lock holder, and a younger requester dies.

The runs keep the random back-off on retry (``retry_backoff: true``): RCC's immediate
retry can livelock a hot mix of conflicting writes under NO_WAIT, committing nothing.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.txn import scenario_kinds as sk
from protocols.txn.bench import build, run_txn_bench, thread_ns_per_txn
from protocols.txn.cc import STAGE_BITS
from protocols.txn.history import History
from protocols.txn.registry import make_workload
from rnicsim.profile import load_profile

PROFILE = load_profile("cx4-edr")
MODELS = {"occ": sk.OccProtocol, "nowait": sk.NowaitProtocol,
          "waitdie": sk.WaitdieProtocol, "mvcc": sk.MvccProtocol,
          "sundial": sk.SundialProtocol, "calvin": sk.CalvinProtocol}


KINDS = list(MODELS)


def config(kind: str, verbs: str, code: int | None):
    """The protocol config of ``kind`` in form ``verbs`` (hybrid: RCC bit mask)."""
    extra = {"hybrid_code": code} if verbs == "hybrid" else {}
    block = MODELS[kind](kind=kind, verbs=verbs, retry_backoff=True, **extra)
    return sk.occ_config(block) if kind == "occ" else sk.rcc_config(block)


@st.composite
def forms(draw, kind: str):
    """``(verbs, hybrid_code)``: every stage one way, or a random subset of the
    protocol's stage bits one-sided."""
    verbs = draw(st.sampled_from(["rpc", "one_sided", "hybrid"]))
    code = None
    if verbs == "hybrid":
        bits = [STAGE_BITS[s] for s in sk.STAGES[kind]]
        code = sum(b for b in bits if draw(st.booleans()))
    return verbs, code


@st.composite
def workloads(draw):
    """A small benchmark with contention: ``(name, params)``."""
    name = draw(st.sampled_from(["ycsb", "smallbank", "tpcc"]))
    if name == "ycsb":
        recs = draw(st.integers(4, 30))
        return name, {"records_per_node": recs,
                      "hot_records_per_node": draw(st.integers(1, min(3, recs))),
                      "hot_probability": draw(st.sampled_from([0.1, 0.5, 0.9])),
                      "ops": draw(st.integers(1, 4)),
                      "write_probability": draw(st.sampled_from([0.0, 0.2, 0.5, 1.0])),
                      "compute": draw(st.sampled_from([0.0, 1000.0])),
                      "sleep": draw(st.booleans())}
    if name == "smallbank":
        return name, {"accounts_per_thread": draw(st.integers(2, 8)),
                      "hot_fraction": draw(st.sampled_from([0.25, 1.0])),
                      "hot_probability": draw(st.sampled_from([0.1, 0.9]))}
    return name, {"warehouses_per_node": 1, "logic": 200.0, "logic_per_item": 20.0,
                  "items": 12, "uniform_items": True,
                  "read_warehouse_customer": draw(st.booleans())}


def run(kind, form, wl_def, seed, nodes, threads, coroutines, window=20_000.0):
    """Build and drain one point; returns (bench, workload, history, metrics). The window
    [ns] also covers twice the coroutines' spread start (a YCSB usleep holds a thread
    for the sleep plus the host's 50-us timer slack)."""
    name, params = wl_def
    wl = make_workload(name, params, nodes, threads, PROFILE.host.clock, coroutines)
    per_txn = thread_ns_per_txn(wl, PROFILE.host.timer_slack) or 0.0
    window = max(window, 2 * coroutines * per_txn)
    hist = History()
    b = build(PROFILE, nodes, threads, wl, config(kind, *form), coroutines, seed=seed,
              history=hist, kind=kind)
    m = run_txn_bench(b, 0.0, window)
    # Drain: no transaction starts any more; those running get 10 ms of simulated time
    # to end (they need microseconds: what is still running then is stuck).
    b.cc.stop()
    b.sim.run(until=b.sim.now + 10e6)
    return b, wl, hist, m


def _no_locks_left(store, tables) -> bool:
    for t in tables:
        for slot in range(t.slots_per_node):
            for n in range(store.nodes):
                if store.mrs[n].read_u64(store.offset(t.id, slot)):
                    return False
    return True


def test_two_coordinators_in_lockstep_still_commit():
    """Found by the property below: two nodes, one coroutine each, every YCSB record
    written, a usleep before commit. Each OCC coordinator locks its own records and then
    asks the other node for its lock, which waits out the other's usleep and finds it
    locked: both abort, again and again, one attempt (about 75 us) apart. The random
    back-off, doubling with each retry, grows past an attempt's length and one of them
    commits (with the doubling capped at 64 us, below an attempt's length, neither ever
    does)."""
    b, _, hist, _ = run("occ", ("hybrid", 2),
                        ("ycsb", {"records_per_node": 4, "hot_records_per_node": 1,
                                  "hot_probability": 0.1, "ops": 3,
                                  "write_probability": 1.0, "compute": 1000.0,
                                  "sleep": True}), 0, 2, 1, 1)
    assert len(hist) > 0 and b.cc.in_flight == 0
    assert hist.check().serializable


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=max(4, settings().max_examples // 3))
@given(data=st.data(), wl_def=workloads(), seed=st.integers(0, 10_000),
       nodes=st.integers(2, 3), threads=st.integers(1, 2), coroutines=st.integers(1, 4))
def test_serializable_conserving_and_ending(kind, data, wl_def, seed, nodes, threads,
                                            coroutines):
    """Committed transactions form a serializable history, SmallBank conserves money,
    every started transaction ends and no lock is left behind."""
    form = data.draw(forms(kind))
    b, wl, hist, m = run(kind, form, wl_def, seed, nodes, threads, coroutines)
    res = hist.check()
    assert res.serializable, res.render()
    assert len(hist) > 0
    assert b.cc.in_flight == 0
    if wl_def[0] == "smallbank":
        assert wl.total_balance(b.store) - wl.initial_total() == b.cc.stats.deposits
    assert _no_locks_left(b.store, wl.tables)


@settings(max_examples=max(4, settings().max_examples // 3))
@given(data=st.data(), seed=st.integers(0, 10_000), nodes=st.integers(2, 3),
       coroutines=st.integers(2, 4), accounts=st.integers(2, 4))
def test_waitdie_waits_only_for_younger_holders(data, seed, nodes, coroutines, accounts):
    """Every WAIT-DIE decision waits only when the requester is older than the holder and
    kills it otherwise, and every run ends (no deadlock) with every lock released."""
    from protocols.txn.waitdie import System

    form = data.draw(forms("waitdie"))
    decisions = []
    rule = System.may_wait

    def spy(self, ts, held):
        waits = rule(self, ts, held)
        decisions.append((ts, held >> 9, waits))
        return waits

    System.may_wait = spy
    try:
        b, wl, hist, m = run("waitdie", form, ("smallbank", {
            "accounts_per_thread": accounts, "hot_fraction": 1.0}), seed, nodes, 2,
            coroutines)
    finally:
        System.may_wait = rule
    assert b.cc.in_flight == 0
    assert all(w == (ts < holder) for ts, holder, w in decisions)
    assert _no_locks_left(b.store, wl.tables)
    assert hist.check().serializable
