"""Every OCC configuration yields serializable histories; SmallBank conserves money.

Small random runs (2-3 nodes, 1-2 threads, 1-4 coroutines, a few dozen accounts so that
transactions conflict) are drained (no transaction starts after the window, running ones
finish) and their histories checked with :class:`protocols.txn.history.History`.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.rpc import RpcConfig
from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.occ import OccConfig
from protocols.txn.systems import PRESETS, preset
from rnicsim.profile import load_profile
from workloads.smallbank import CHECKING, SAVINGS, SmallBank, SmallBankSpec
from workloads.tpcc import TpccNewOrder, TpccSpec

PROFILE = load_profile("cx4-edr")
SIDE = st.sampled_from(["one_sided", "two_sided"])
MODE = st.sampled_from(["one_sided", "two_sided", "hybrid"])


@st.composite
def configs(draw) -> OccConfig:
    """A preset, or any combination of per-phase primitives and options."""
    if draw(st.booleans()):
        return preset(draw(st.sampled_from(sorted(PRESETS))))
    return OccConfig(
        execution=draw(MODE), index_cache=draw(st.booleans()), lock=draw(SIDE),
        validate=draw(SIDE), log=draw(SIDE), commit=draw(SIDE), ro_read=draw(MODE),
        ro_validate=draw(SIDE), passive_ack=draw(st.booleans()),
        outstanding=draw(st.booleans()), lock_in_execution=draw(st.booleans()),
        log_to=draw(st.sampled_from(["participants", "coordinator"])),
        rpc=RpcConfig(transport=draw(st.sampled_from(["ud", "rc", "write_imm"])),
                      doorbell_batch=draw(st.sampled_from([1, 16])),
                      coalesce=draw(st.booleans())))


def _no_locks_left(store, tables) -> bool:
    for t in tables:
        for slot in range(t.slots_per_node):
            for n in range(store.nodes):
                if store.header_local(n, t.id, slot)[0]:
                    return False
    return True


@settings(max_examples=settings().max_examples)
@given(cfg=configs(), seed=st.integers(0, 10_000), nodes=st.integers(2, 3),
       threads=st.integers(1, 2), coroutines=st.integers(1, 4),
       accounts=st.integers(2, 12), hot=st.sampled_from([0.1, 0.5, 1.0]),
       window=st.sampled_from([10_000.0, 25_000.0]))
def test_smallbank_serializable_and_money_conserved(cfg, seed, nodes, threads, coroutines,
                                                    accounts, hot, window):
    """Committed SmallBank transactions form a serializable history and change the total
    balance by exactly their deposits and withdrawals; no lock is left behind."""
    wl = SmallBank(SmallBankSpec(accounts_per_thread=accounts, hot_fraction=hot),
                   nodes, threads, PROFILE.host.clock)
    hist = History()
    b = build(PROFILE, nodes, threads, wl, cfg, coroutines, seed=seed, history=hist)
    run_txn_bench(b, 0.0, window, drain=True)
    res = hist.check()
    assert res.serializable, res.render()
    assert len(hist) > 0
    assert wl.total_balance(b.store) - wl.initial_total() == b.cc.stats.deposits
    assert _no_locks_left(b.store, wl.tables[:2])
    # the backups hold what the primaries hold once the log cleaner has run
    if cfg.log_to != "participants":
        return      # FaSST logs to the coordinator's backups only
    for a in range(wl.accounts):
        n, s = wl.place(a)
        for t in (SAVINGS, CHECKING):
            for r in range(1, b.store.rep + 1):
                m = (n + r) % nodes
                off = b.store.backup_offset(t, s, r)
                assert b.store.mrs[m].read(off + 8, 16) == \
                    b.store.mrs[n].read(b.store.offset(t, s) + 8, 16)


@settings(max_examples=max(5, settings().max_examples // 2))
@given(cfg=configs(), seed=st.integers(0, 10_000), nodes=st.integers(2, 3),
       coroutines=st.integers(1, 4))
def test_tpcc_new_order_serializable(cfg, seed, nodes, coroutines):
    """TPC-C New-Order over few items (heavy stock contention) stays serializable."""
    wl = TpccNewOrder(TpccSpec(warehouses_per_node=1, logic=200.0, logic_per_item=20.0,
                               items=12, uniform_items=True), nodes, 2, PROFILE.host.clock)
    hist = History()
    b = build(PROFILE, nodes, 2, wl, cfg, coroutines, seed=seed, history=hist)
    run_txn_bench(b, 0.0, 20_000.0, drain=True)
    res = hist.check()
    assert res.serializable, res.render()
    assert len(hist) > 0


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_abort_under_contention_and_recover(name):
    """Two accounts, many coroutines: conflicts abort and retry, and everything commits."""
    wl = SmallBank(SmallBankSpec(accounts_per_thread=1, hot_fraction=1.0), 2, 1,
                   PROFILE.host.clock)
    hist = History()
    b = build(PROFILE, 2, 1, wl, replace(preset(name)), 4, seed=5, history=hist)
    m = run_txn_bench(b, 0.0, 30_000.0, drain=True)
    assert m["abort_rate"] > 0
    res = hist.check()
    assert res.serializable
    # every aborted attempt is in the history (the stats count the measured window only;
    # the history also has the drain after it)
    assert res.aborted >= b.cc.stats.aborted > 0
    assert res.txns >= b.cc.stats.committed
    assert sum('"aborted":true' in ln for ln in hist.jsonl_lines()) == res.aborted
