"""protocols.txn.calvin: the verbs and round trips of one transaction per form, and the
same plan order at every participant."""
from __future__ import annotations

import struct

import pytest

from protocols.txn import scenario_kinds as sk
from protocols.txn.api import TxnSpec
from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.registry import make_workload
from protocols.txn.store import Table

_Q = struct.Struct("<q")


class _ReadModifyWrite:
    """Node 0's single thread increments record 1 (node 1) after reading record 2
    (node 2), forever; ``keys=None`` declares nothing."""

    def __init__(self, declare: bool = True) -> None:
        self.tables = [Table(0, "counter", 8, 4, lambda k: (k % 3, k // 3))]
        self.keys = ((0, 1, True), (0, 2, False)) if declare else None

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, 1, True)
            yield from tx.read(0, 2)
            tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc", body, False, keys=self.keys)


def _cfg(verbs: str, code: int | None = None, **kw):
    extra = {} if code is None else {"hybrid_code": code}
    return sk.rcc_config(sk.CalvinProtocol(kind="calvin", verbs=verbs, **extra, **kw))


def _one(cx4, verbs, code=None):
    hist = History()
    b = build(cx4, 3, 1, _ReadModifyWrite(), _cfg(verbs, code), 1, history=hist,
              kind="calvin")
    for key in [(1, 0), (2, 0)]:       # only node 0 runs a client
        b.cc.coords.pop(key)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    return m, b, hist


# (verbs, hybrid code, round trips, work requests) per transaction
@pytest.mark.parametrize("verbs,code,rts,wrs", [("one_sided", None, 4, 30),
                                                ("rpc", None, 5, 40),
                                                ("hybrid", 128, 5, 40),
                                                ("hybrid", 256, 4, 38)])
def test_one_transaction_round_trips_and_verbs(cx4, verbs, code, rts, wrs):
    """One client on node 0 writes a record of node 1 and reads one of node 2; each epoch
    carries its one request (node 0's batch; nodes 1 and 2 send empty ones). Round trips:
    node 0's broadcast (one 1,616-B RPC chunk, or WRITE requests + WRITE header to each
    peer) 1, epoch sync 1, node 2 (passive) forwards its value to node 1 (active): one
    round trip per local record one-sided, a read-set and a write-set RPC otherwise, node
    1 logs to its backups (nodes 2 and 0) 1: 4 one-sided, 5 RPC. Work requests per epoch:
    every node sends its batch to the 2 peers as input replication (2 SENDs), broadcast
    (4 WRITEs, or 2 calls + 2 replies), epoch sync (2 WRITEs one-sided; 2 calls + 2
    replies) = 8 or 10 per node, 24 or 30 in all; forwarding 2 (WRITE value + length)
    or 4 (2 calls, 2 replies); log 2 WRITEs or 4; log reclaim 2 SENDs. One-sided
    24 + 2 + 2 + 2 = 30; RPC 30 + 4 + 4 + 2 = 40; code 128 (broadcast one-sided, sync
    RPC) 40; code 256 (forwarding one-sided) 38."""
    m, b, hist = _one(cx4, verbs, code)
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["abort_rate"] == 0.0
    posted = sum(ep.tx_wrs for ep in b.mesh.endpoints.values())
    assert posted == wrs * len(hist)
    assert hist.check().serializable
    # every commit incremented the counter once, the read record was never written,
    # and no lock is left behind
    assert b.store.header_local(1, 0, 0) == (0, len(hist))
    assert b.store.header_local(2, 0, 0) == (0, 0)


def _contended(cx4, verbs, bench, params, code=None):
    wl = make_workload(bench, params, 3, 2, cx4.host.clock, 3)
    hist = History()
    b = build(cx4, 3, 2, wl, _cfg(verbs, code, retry_backoff=True), 3, history=hist,
              kind="calvin", seed=3)
    m = run_txn_bench(b, 0.0, 300_000.0, drain=True)
    return m, b, wl, hist


_YCSB = {"records_per_node": 300, "hot_records_per_node": 5}
# two-account transactions mostly, so that every pair of nodes shares some
_BANK = {"accounts_per_thread": 5, "hot_probability": 0.0,
         "mix": (("send_payment", 40), ("amalgamate", 30), ("deposit_checking", 15),
                 ("balance", 15))}


@pytest.mark.parametrize("verbs,code,bench,params", [
    ("one_sided", None, "ycsb", _YCSB), ("rpc", None, "smallbank", _BANK),
    ("hybrid", 384, "smallbank", _BANK), ("hybrid", 132, "ycsb", _YCSB)])
def test_every_participant_applies_the_same_order(cx4, verbs, code, bench, params):
    """Contended runs on 3 nodes: every pair of nodes grants locks to the transactions
    they share in the same order; the history is serializable, SmallBank's money is
    conserved, nothing aborts and no lock is left."""
    m, b, wl, hist = _contended(cx4, verbs, bench, params, code)
    orders = [nd.applied for nd in b.cc.nodes]
    assert len(hist) > 20 and m["abort_rate"] == 0.0
    for i in range(3):
        for j in range(i + 1, 3):
            common = set(orders[i]) & set(orders[j])
            assert len(common) > 5
            assert [t for t in orders[i] if t in common] == \
                [t for t in orders[j] if t in common]
    assert hist.check().serializable
    if bench == "smallbank":
        assert wl.total_balance(b.store) - wl.initial_total() == b.cc.stats.deposits
    for t in wl.tables:
        for n in range(3):
            for s in range(t.slots_per_node):
                assert b.store.header_local(n, t.id, s)[0] == 0


def test_a_batch_closes_at_epoch_batch_requests(cx4):
    """Four clients on node 0 and ``epoch_batch: 2``: every batch of node 0 carries two
    requests (the other two wait for the next epoch), nodes 1 and 2 send empty ones in
    the same epochs."""
    hist = History()
    b = build(cx4, 3, 1, _ReadModifyWrite(), _cfg("one_sided", epoch_batch=2), 4,
              history=hist, kind="calvin")
    for key in [(1, 0), (2, 0)]:
        b.cc.coords.pop(key)
    run_txn_bench(b, 0.0, 40_000.0)
    sizes = [nd.batch_sizes for nd in b.cc.nodes]
    epochs = sizes[0].get(2, 0)
    assert epochs > 3
    assert sizes == [{2: epochs}, {0: epochs}, {0: epochs}]
    assert hist.check().serializable


def test_a_transaction_without_declared_records_is_refused(cx4):
    """CALVIN schedules by declared records: a transaction without them is a
    ValueError naming the workload and the transaction."""
    b = build(cx4, 3, 1, _ReadModifyWrite(declare=False), _cfg("rpc"), 1, kind="calvin")
    with pytest.raises(ValueError, match=r"workload _ReadModifyWrite: transaction 'inc' "
                                         r"declares no records \(TxnSpec.keys\)"):
        run_txn_bench(b, 0.0, 10_000.0)
