"""protocols.txn.mvcc: verbs and round trips of one transaction per form, version choice,
slot overflow, timestamp order of reads."""
from __future__ import annotations

import struct

import pytest

from protocols.txn import mvcc
from protocols.txn import scenario_kinds as sk
from protocols.txn.api import TxnSpec
from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.registry import make_workload
from protocols.txn.replication import H_ACK, H_LOG
from protocols.txn.store import Table
from rnicsim.verbs import CAS, READ, WRITE

_Q = struct.Struct("<q")
_OP = {READ: "READ", WRITE: "WRITE", CAS: "CAS"}


class _RmwRead:
    """Node 0's coroutine increments record 1 (node 1) and reads record 2 (node 2)."""

    def __init__(self) -> None:
        self.tables = [Table(0, "counter", 8, 4, lambda k: (k % 3, k // 3))]

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, 1, True)
            yield from tx.read(0, 2)
            tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("rmw_read", body)


def _cfg(verbs, code=None, versions=4):
    extra = {"hybrid_code": code} if code is not None else {}
    return sk.rcc_config(sk.MvccProtocol(kind="mvcc", verbs=verbs, versions=versions,
                                         **extra))


def _build(cx4, cfg):
    """3 nodes, one thread, one coroutine; only node 0 runs transactions; node 0's
    posts and calls are logged as ``(kind, node, what)``."""
    hist = History()
    b = build(cx4, 3, 1, _RmwRead(), cfg, 1, history=hist, kind="mvcc")
    for key in [(1, 0), (2, 0)]:
        b.cc.coords.pop(key)
    ep = b.mesh.endpoint(0, 0)
    peer = {qp: n for n, qps in ep.rc.items() for qp in qps}
    log = []
    post_group, call = ep.post_group, ep.call

    def spy_post(posts, waiter=None):
        log.append(("post", tuple((peer[qp], tuple((_OP[w.opcode], w.length) for w in wrs))
                                  for qp, wrs in posts)))
        return post_group(posts, waiter)

    def spy_call(dst, hid, payload, length, reply=True, waiter=None, index=0):
        log.append(("call", dst, hid, reply))
        return call(dst, hid, payload, length, reply, waiter, index)

    ep.post_group, ep.call = spy_post, spy_call
    return b, hist, log


# Verbs of one transaction (record = 48-B header + 4 x (8-B count + 8-B value) = 112 B;
# log entry = 16 + 12 + 4 + 8 + 8 = 48 B; rep_factor 2: backups 1 and 2).
_LOCK_1S = [("post", ((1, (("READ", 48),)),)),                        # header
            ("post", ((1, (("CAS", 8), ("READ", 104))),))]            # lock + the rest
_READ_1S = [("post", ((2, (("READ", 112),)),)),                       # header + slots
            ("post", ((2, (("CAS", 8), ("READ", 48))),))]             # rts + confirm
_LOG_1S = [("post", ((1, (("WRITE", 48),)), (2, (("WRITE", 48),))))]
_LOG_RPC = [("call", 1, H_LOG, True), ("call", 2, H_LOG, True)]
_ACK = [("call", 1, H_ACK, True), ("call", 2, H_ACK, True)]         # log acknowledged
_COMMIT_1S = [("post", ((1, (("WRITE", 96), ("WRITE", 8))),))]       # wts + slots, unlock
_LOCK_RPC = [("call", 1, mvcc.H_LOCK, True)]
_READ_RPC = [("call", 2, mvcc.H_READ, True)]
_COMMIT_RPC = [("call", 1, mvcc.H_UPDATE, True)]


@pytest.mark.parametrize("verbs,code,verbs_per_txn,rts", [
    ("one_sided", None, _LOCK_1S + _READ_1S + _LOG_1S + _ACK + _COMMIT_1S, 7),
    ("rpc", None, _LOCK_RPC + _READ_RPC + _LOG_RPC + _ACK + _COMMIT_RPC, 5),
    ("hybrid", 28, _LOCK_RPC + _READ_RPC + _LOG_1S + _ACK + _COMMIT_1S, 5),
    ("hybrid", 3, _LOCK_1S + _READ_1S + _LOG_RPC + _ACK + _COMMIT_RPC, 7),
])
def test_verbs_and_round_trips_of_one_transaction(cx4, verbs, code, verbs_per_txn, rts):
    """PROTOCOL-FACTS 3.6, one remote read-modify-write + one remote read. One-sided:
    lock = READ header, then CAS lock + READ rest (2); read = READ header + slots, then
    CAS rts + READ header (2); log WRITEs (1); the log's acknowledgement RPCs, answered
    once the backups installed it (1, no passive ACK); commit WRITE wts + slots and
    WRITE unlock in one doorbell (1): 7 round trips. RPC: lock-read, read, log,
    acknowledgement, update: 5. Hybrid 28 (log, release, commit one-sided): 5; hybrid 3
    (lock, read one-sided): 7."""
    b, hist, log = _build(cx4, _cfg(verbs, code))
    m = run_txn_bench(b, 0.0, 100_000.0, drain=True)
    n = len(hist)              # the window's commits and the one drained after it
    assert n - 1 <= b.cc.stats.committed <= n and n > 5
    assert log == verbs_per_txn * n
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["abort_rate"] == 0.0
    assert hist.check().serializable
    assert _Q.unpack(b.store.value_local(1, 0, 0))[0] == n
    assert b.store.mrs[1].read_u64(b.store.offset(0, 0)) == 0       # unlocked


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_slot_overflow_aborts_as_version_slot_until_the_timestamp_passes(cx4, verbs):
    """With one version slot written at a timestamp above the coroutine's first three
    ((1..3) << 26 | owner 1), the read of record 2 finds no version below its timestamp
    three times (cause version_slot, the counter is not moved), then reads it."""
    b, hist, _ = _build(cx4, _cfg(verbs, versions=1))
    st = b.store
    wts0 = (3 << mvcc.TS_SHIFT) | 0xFFFF
    st.mrs[2].write_u64(st.offset(0, 0) + mvcc.WTS, wts0)
    run_txn_bench(b, 0.0, 60_000.0, drain=True)
    assert b.cc.stats.causes == {"version_slot": 3}
    assert hist.check().serializable
    ts = (4 << mvcc.TS_SHIFT) | 1              # the first commit is the 4th attempt
    assert b.cc.reads[:2] == [(ts, 0, 1, 0), (ts, 0, 2, 0)]


def test_read_rules_by_hand():
    """check_read picks the newest filled slot below ts (slot 0 at wts 0 is the loaded
    version); an older lock holder or no such slot refuses; a write is refused by the
    largest later rts or wts and overwrites an empty slot, else the oldest version."""
    assert mvcc.read_slot(0, (0, 0, 0, 0), 5) == 0
    assert mvcc.read_slot(0, (7, 3, 9, 0), 8) == 0
    assert mvcc.read_slot(0, (7, 3, 9, 0), 5) == 1
    assert mvcc.read_slot(0, (7, 3, 9, 4), 3) == -2
    assert mvcc.read_slot(4, (7, 3, 9, 0), 8) == -1
    assert mvcc.read_slot(12, (7, 3, 9, 0), 8) == 0
    assert mvcc.write_conflict(6, (7, 3, 9, 0), 8) == 9
    assert mvcc.write_conflict(10, (7, 3, 9, 0), 8) == 10
    assert mvcc.write_conflict(8, (7, 3, 8, 0), 8) == 0
    assert mvcc.write_slots((0, 0, 0, 0)) == (0, 1)
    assert mvcc.write_slots((7, 3, 9, 0)) == (2, 3)
    assert mvcc.write_slots((7, 3, 9, 4)) == (2, 1)


@pytest.mark.parametrize("verbs,code", [("one_sided", None), ("rpc", None), ("hybrid", 9)])
def test_reads_return_the_newest_version_below_their_timestamp(cx4, verbs, code):
    """Contended YCSB on 3 nodes: every committed read returns the version installed at
    the largest timestamp below its own (never a newer one), the history is
    serializable and no lock is left once the run drains."""
    wl = make_workload("ycsb", {"records_per_node": 30, "hot_records_per_node": 3}, 3, 2,
                       cx4.host.clock, 3)
    cfg = sk.rcc_config(sk.MvccProtocol(kind="mvcc", verbs=verbs, retry_backoff=True,
                                        **({"hybrid_code": code} if code else {})))
    hist = History()
    b = build(cx4, 3, 2, wl, cfg, 3, seed=4, history=hist, kind="mvcc")
    run_txn_bench(b, 0.0, 400_000.0, drain=True)
    cc = b.cc
    assert cc.stats.aborted > 0
    older = 0
    for ts, table, key, count in cc.reads:
        assert count == 0 or cc.installed[(table, key, count)] < ts
        nxt = cc.installed.get((table, key, count + 1))
        assert nxt is None or nxt >= ts         # == ts: the reader's own write
        older += nxt is not None and nxt > ts
    assert older > 0           # some reads returned a version a later writer replaced
    assert hist.check().serializable
    st = b.store
    for _, reads, writes in hist.transactions():
        for (table, key), _ in list(reads) + list(writes):
            node, slot = st.place(table, key)
            assert st.mrs[node].read_u64(st.offset(table, slot)) == 0
