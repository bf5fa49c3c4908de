"""NO_WAIT and WAIT-DIE (protocols/txn/nowait.py, waitdie.py): the verbs and round trips
of one uncontended transaction per form, against a hand count (PROTOCOL-FACTS 3.6)."""
from __future__ import annotations

import struct

import pytest

from protocols.txn import scenario_kinds as sk
from protocols.txn.api import TxnSpec
from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.store import Table

_Q = struct.Struct("<q")


class _Counter:
    """Node 0's single thread reads (and unless read-only increments) record 1, which
    lives on node 1 of 3."""

    def __init__(self, read_only: bool = False) -> None:
        self.tables = [Table(0, "counter", 8, 4, lambda k: (k % 3, k // 3))]
        self.read_only = read_only

    def cpu_estimate_ns(self) -> float:
        return 1000.0

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, 1, not self.read_only)
            if not self.read_only:
                tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc", body, self.read_only)


def _one(cx4, kind, verbs, read_only=False, **opts):
    model = {"nowait": sk.NowaitProtocol, "waitdie": sk.WaitdieProtocol}[kind]
    cfg = sk.rcc_config(model(kind=kind, verbs=verbs, **opts))
    hist = History()
    wl = _Counter(read_only)
    b = build(cx4, 3, 1, wl, cfg, 1, history=hist, kind=kind)
    for key in [(1, 0), (2, 0)]:      # only node 0 runs transactions
        b.cc.coords.pop(key)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    return m, b, hist


# One remote read-modify-write on 3 nodes with 2 backups per primary. The log goes to
# the coordinator's backups (1, 2) and the written node's (2, 0): two remote backups.
# Without passive ACK (RCC's PA 0) the log is followed by the acknowledgement RPCs to
# the remote backups, whose replies are waited for (1).
#   one-sided: CAS + READ in one doorbell (1), log WRITEs (1), acknowledgement (1),
#              value WRITE + unlock WRITE in one doorbell (1)                    = 4
#   rpc:       lock RPC with the value in its reply (1), log RPCs (1),
#              acknowledgement (1), commit RPC (1)                               = 4
#   one-sided without lock_read_batch: CAS (1), READ (1), log, ack, commit       = 5
# One remote read-only read: the lock (1) and the release of the read lock (1)  = 2.
# RCC's commit calls the read-lock release and the write-back whatever the sets hold, and
# its counter counts a call with nothing to wait for too: one such call each (the
# read-modify-write has no read lock to release, the read-only read nothing to write).
@pytest.mark.parametrize("kind", ["nowait", "waitdie"])
@pytest.mark.parametrize("verbs,opts,read_only,rts", [
    ("one_sided", {}, False, 4), ("rpc", {}, False, 4),
    ("one_sided", {"lock_read_batch": False}, False, 5),
    ("one_sided", {}, True, 2), ("rpc", {}, True, 2),
])
def test_round_trips_of_one_uncontended_transaction(cx4, kind, verbs, opts, read_only,
                                                    rts):
    """Round trips per committed transaction as hand-counted above, and one wait call
    more; nothing aborts; every commit incremented the counter once; the history is
    serializable."""
    m, b, hist = _one(cx4, kind, verbs, read_only, **opts)
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["waits_per_txn"] == pytest.approx(rts + 1)
    assert m["abort_rate"] == 0.0 and m["committed"] > 0
    assert hist.check().serializable
    seq = b.store.read_local(1, 0, 0)[1]
    assert seq == (0 if read_only else len(hist))
    assert b.store.header_local(1, 0, 0)[0] == 0      # unlocked


def test_one_sided_work_requests_of_one_transaction(cx4):
    """One-sided read-modify-write: CAS + READ, 2 log WRITEs, value + unlock WRITEs, and
    2 reclaim SENDs to the backups' log cleaners = 8 work requests per transaction."""
    m, b, hist = _one(cx4, "nowait", "one_sided")
    ep = b.mesh.endpoint(0, 0)
    assert ep.tx_wrs == 8 * len(hist)


def test_lock_word_holds_the_timestamp_and_the_write_bit(cx4):
    """While a transaction holds its write lock, the record's lock word is its timestamp
    shifted left 9 bits, plus 1 (RCC rwlock.hpp)."""
    from protocols.txn.nowait import System

    seen = []
    real = System.commit_writes

    def spy(self, tx, writes):
        for r in writes:
            seen.append((self.store.mrs[r.node].read_u64(self.store.offset(r.table, r.slot)),
                         tx.ts))
        yield from real(self, tx, writes)

    System.commit_writes = spy
    try:
        _one(cx4, "nowait", "one_sided")
    finally:
        System.commit_writes = real
    assert seen and all(word == (ts << 9) | 1 for word, ts in seen)


@pytest.mark.parametrize("kind", ["nowait", "waitdie"])
@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_an_aborted_attempt_waits_for_its_releases_reads_then_writes(cx4, kind, verbs):
    """After an abort, RCC's release_reads then release_writes: an attempt holding a
    record locked for reading (key 1, node 1) and one locked for writing (key 2, node 2)
    waits for two round trips, one per release, each as long as a lone unlock's round
    trip; both locks are free afterwards."""
    from protocols.txn.api import Txn

    _, b, _ = _one(cx4, kind, verbs, read_only=True)
    sim, sys_ = b.cluster.sim, b.cc
    co = sys_.coords[(0, 0)]
    spec = TxnSpec("two", None, False)
    seen = {}

    def attempt(ep, keys):
        tx = Txn(co, spec)
        tx.owner = 1
        tx.ts = sys_.timestamp(tx, 1)
        for key, write in keys:
            yield from tx.read(0, key, write)
        rts, t = tx.rts, sim.now
        yield from sys_.release(tx)
        seen[tuple(keys)] = (tx.rts - rts, sim.now - t)

    for keys in ([(1, False)], [(2, True)], [(1, False), (2, True)]):
        co.ep.spawn(attempt, keys)
        sim.run()
    one_r, t_r = seen[((1, False),)]
    one_w, t_w = seen[((2, True),)]
    both, t_both = seen[((1, False), (2, True))]
    assert (one_r, one_w, both) == (1, 1, 2)
    assert t_r > 0 and t_w > 0
    assert t_both == pytest.approx(t_r + t_w, rel=0.05)
    assert b.store.header_local(1, 0, 0)[0] == 0 and b.store.header_local(2, 0, 0)[0] == 0


class _ReadOneWriteOther(_Counter):
    """Node 0's thread reads record 1 (node 1) and increments record 2 (node 2)."""

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            yield from tx.read(0, 1)
            v = yield from tx.read(0, 2, True)
            tx.write(0, 2, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("rw", body, False)


@pytest.mark.parametrize("verbs,order", [("one_sided", ["release", "commit"]),
                                         ("rpc", ["commit", "release"])])
def test_commit_releases_read_locks_before_or_after_the_write_back(cx4, monkeypatch, verbs,
                                                                   order):
    """RCC's one-sided commit releases the read locks, then writes back
    (release_reads_w_rdma, write_back_w_rdma); its RPC commit writes back, then releases
    the read locks (write_back, release_reads)."""
    from protocols.txn import nowait

    seen = []
    real_commit, real_unlock = nowait.System.commit_writes, nowait.System.unlock

    def commit(self, tx, writes):
        seen.append("commit")
        yield from real_commit(self, tx, writes)

    def unlock(self, tx, recs, wait):
        if recs:
            seen.append("release")
        yield from real_unlock(self, tx, recs, wait)

    monkeypatch.setattr(nowait.System, "commit_writes", commit)
    monkeypatch.setattr(nowait.System, "unlock", unlock)
    cfg = sk.rcc_config(sk.NowaitProtocol(kind="nowait", verbs=verbs))
    b = build(cx4, 3, 1, _ReadOneWriteOther(), cfg, 1, kind="nowait")
    for key in [(1, 0), (2, 0)]:
        b.cc.coords.pop(key)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    assert m["committed"] > 0 and m["abort_rate"] == 0.0
    assert seen[:2] == order and seen == order * (len(seen) // 2)
