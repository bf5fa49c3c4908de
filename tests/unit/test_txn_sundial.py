"""protocols.txn.sundial: verbs and round trips of one transaction per form, leases."""
from __future__ import annotations

import struct

import pytest

from protocols.txn import scenario_kinds as sk
from protocols.txn.api import TxnSpec
from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.registry import make_workload
from protocols.txn.store import Table
from protocols.txn.sundial import lease
from rnicsim.profile import load_profile

_PROFILE = load_profile("cx4-edr")
_Q = struct.Struct("<q")
X, Y = 1, 2            # record 1 lives on node 1, record 2 on node 2 (key % 3)


def _table(nodes: int = 3) -> list[Table]:
    return [Table(0, "counter", 8, 4, lambda k: (k % nodes, k // nodes))]


def _cfg(verbs: str, code: int | None = None, renew_lock: bool = True):
    extra = {"hybrid_code": code} if code is not None else {}
    return sk.rcc_config(sk.SundialProtocol(kind="sundial", verbs=verbs,
                                            renew_lock=renew_lock, **extra))


def _header(b, key: int) -> tuple[int, int, int]:
    """(lock, lease word, committed-write count) of a record of table 0."""
    mr = b.store.mrs[key % 3]
    off = b.store.offset(0, key // 3)
    return mr.read_u64(off), mr.read_u64(off + 8), mr.read_u64(off + 16)


class _Increment:
    """Node 0's thread increments X and reads Y, forever."""

    tables = _table()

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, X, True)
            yield from tx.read(0, Y)
            tx.write(0, X, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc", body)


def _one(verbs: str, code: int | None, renew_lock: bool):
    hist = History()
    b = build(_PROFILE, 3, 1, _Increment(), _cfg(verbs, code, renew_lock), 1,
              history=hist, kind="sundial")
    for key in [(1, 0), (2, 0)]:      # only node 0 runs transactions
        b.cc.coords.pop(key)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    return m, b, hist


# Hand count from PROTOCOL-FACTS 3.6 (SUNDIAL), per uncontended transaction that locks
# and writes X and reads Y (the lease of Y needs renewing every time: cts = commits so
# far + 1 > Y's rts), rep_factor 2 on 3 nodes (the log goes to nodes 1 and 2):
#   stage    one-sided                              RPC
#   lock     CAS + READ, one doorbell: 1 (2 WRs)    lock RPC: 1
#   read     READ record, READ header: 2 (2 WRs)    read RPC: 1
#   renew    READ header: 1 (1 WR), then            renew RPC: 1
#            CAS + READ: 1 (2 WRs) and WRITE lease
#            + WRITE 0 unsignaled: 0 (2 WRs)
#            (renew_lock false, RCC: WRITE: 1 (1 WR))
#   log      WRITE to each backup's ring: 1 (2)     log RPC to each backup: 1 (2)
#   ack      the log's acknowledgement RPC to each backup, replies waited for (no
#            passive ACK): 1 (2 SENDs) in every form
#   commit   WRITE lease+count+value, WRITE 0: 1 (2) update RPC: 1
# Work requests node 0 posts per transaction: one-sided 2 + 2 + 5 + 2 + 2 = 13 (RCC's
# renewal: 10), RPC 1 + 1 + 1 + 2 + 1 = 6, plus the 2 acknowledgement SENDs.
@pytest.mark.parametrize("verbs,code,renew_lock,rts,wrs", [
    ("one_sided", None, True, 8, 15),
    ("one_sided", None, False, 8, 12),
    ("rpc", None, True, 6, 8),
    ("hybrid", 31, True, 7, 11),     # RCC's YCSB and TPC-C code: renew by RPC
    ("hybrid", 20, True, 6, 9),      # RCC's SmallBank code: log and commit one-sided
    ("hybrid", 64, True, 7, 12),     # renew alone one-sided
])
def test_round_trips_and_verbs_of_one_transaction(verbs, code, renew_lock, rts, wrs):
    """One remote read-modify-write and one remote read take the hand-counted round
    trips and work requests; every commit installs wts = rts = cts = its rank and
    extends the lease of the record read to it."""
    m, b, hist = _one(verbs, code, renew_lock)
    n = len(hist)
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["abort_rate"] == 0.0
    assert b.mesh.endpoints[(0, 0)].tx_wrs == wrs * n
    assert hist.check().serializable
    assert _header(b, X) == (0, lease(n, n), n)
    assert _header(b, Y) == (0, lease(0, n), 0)


class _Script:
    """Each node in ``bodies`` runs its one transaction (``node -> body``), then every
    thread idles (waits without CPU)."""

    tables = _table()

    def __init__(self, bodies: dict) -> None:
        self.bodies = dict(bodies)

    def next_txn(self, rng, node, thread, co):
        body = self.bodies.pop(node, None)
        if body is not None:
            return TxnSpec(f"n{node}", body)

        def idle(tx):
            yield tx.cc.sim.timeout(1e9)
        return TxnSpec("idle", idle, True)


def _add_to(key: int, amount: int, before_ns: float = 0.0, hold_ns: float = 0.0):
    """A body that waits ``before_ns``, locks ``key`` and keeps it ``hold_ns`` (waiting
    without CPU), then adds ``amount`` to it."""
    def body(tx):
        if before_ns:
            yield tx.cc.sim.timeout(before_ns)
        v = yield from tx.read(0, key, True)
        if hold_ns:
            yield tx.cc.sim.timeout(hold_ns)
        tx.write(0, key, _Q.pack(_Q.unpack(v)[0] + amount))
    return body


def _read_x_write_y(tx):
    """Reads X, computes 20 us, writes X's value to Y (so cts = Y's rts + 1 exceeds X's
    lease)."""
    v = yield from tx.read(0, X)
    yield tx.compute(20_000.0)
    yield from tx.read(0, Y, True)
    tx.write(0, Y, v)


def _script(verbs: str, bodies: dict):
    hist = History()
    b = build(_PROFILE, 3, 1, _Script(bodies), _cfg(verbs), 1, history=hist,
              kind="sundial")
    run_txn_bench(b, 0.0, 200_000.0)
    return b, hist


def _renew(verbs: str, writer: bool, hold_ns: float = 5_000.0):
    """Node 0 reads X and writes Y; node 1, if ``writer``, locks X at once, keeps it
    ``hold_ns`` and writes it."""
    bodies = {0: _read_x_write_y}
    if writer:
        bodies[1] = _add_to(X, 7, hold_ns=hold_ns)
    return _script(verbs, bodies)


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_an_unchallenged_lease_is_extended_and_commits(verbs):
    """With no writer, the reader's cts (1, from Y's rts 0 + 1) lies beyond X's lease
    [0, 0]: renewal extends X's rts to 1 and the transaction commits at once."""
    b, hist = _renew(verbs, writer=False)
    assert b.cc.stats.causes == {}
    assert list(hist.transactions()) == [(1, [((0, X), 0), ((0, Y), 0)], [((0, Y), 1)])]
    assert _header(b, X) == (0, lease(0, 1), 0)
    assert _header(b, Y) == (0, lease(1, 1), 1)


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_a_lease_invalidated_by_a_commit_aborts_the_reader(verbs):
    """The writer commits X (wts 1) after the reader read version 0 and before it
    renews: the renewal finds wts changed and aborts (validation) once; the retry reads
    X's new version and commits after the writer."""
    b, hist = _renew(verbs, writer=True)
    assert b.cc.stats.causes == {"validation": 1}
    assert list(hist.transactions()) == [
        (1, [((0, X), 0)], [((0, X), 1)]),
        (2, [((0, X), 1), ((0, Y), 0)], [((0, Y), 1)])]
    assert hist.check().serializable


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_a_lease_beyond_rts_of_a_locked_record_cannot_be_renewed(verbs):
    """While a writer holds X's lock (1 ms), a reader whose cts (1) lies beyond X's
    lease [0, 0] cannot renew it: every attempt aborts with validation, nothing of the
    reader commits, and X keeps its lease."""
    b, hist = _renew(verbs, writer=True, hold_ns=1e6)
    causes = b.cc.stats.causes
    assert set(causes) == {"validation"} and causes["validation"] >= 2
    assert len(hist) == 0
    assert _header(b, X)[1:] == (lease(0, 0), 0)


def _read_x_write_y_then_compute(prepare: bool):
    """Reads X, locks and writes Y (cts 1, beyond X's lease), calls ``tx.load_read`` of
    X and ``tx.prepare()`` if ``prepare``, then computes 60 us (RCC's YCSB order:
    accesses, load_read, prepare, usleep)."""
    def body(tx):
        v = yield from tx.read(0, X)
        yield from tx.read(0, Y, True)
        tx.write(0, Y, v)
        if prepare:
            yield from tx.load_read(0, X)
            yield from tx.prepare()
        yield tx.compute(60_000.0)
    return body


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
@pytest.mark.parametrize("prepare,causes", [(True, {}), (False, {"validation": 1})])
def test_prepare_renews_before_the_computation(verbs, prepare, causes):
    """A writer commits X 20 us in, while the reader computes. Renewed in
    ``load_read`` (RPC) or ``prepare()`` (one-sided) before the computation (RCC's
    YCSB), the reader's lease on X already
    covers its cts, the writer commits above it and the reader commits without renewing
    again, ordered first; renewed at commit, after the computation, the reader finds X
    rewritten and aborts once."""
    b, hist = _script(verbs, {0: _read_x_write_y_then_compute(prepare),
                              1: _add_to(X, 7, before_ns=20_000.0)})
    assert b.cc.stats.causes == causes
    assert hist.check().serializable
    if prepare:
        assert list(hist.transactions()) == [
            (1, [((0, X), 0)], [((0, X), 1)]),
            (2, [((0, X), 0), ((0, Y), 0)], [((0, Y), 1)])]


@pytest.mark.parametrize("renew_lock,serializable", [(True, True), (False, False)])
def test_one_sided_renewal_under_a_lock_keeps_a_racy_point_serializable(renew_lock,
                                                                        serializable):
    """A contended YCSB point (2 nodes, 2 threads, seed 5625) where a writer locks a
    record between a renewer's header READ and its lease WRITE: with RCC's plain WRITE
    the writer commits below the extended lease and the history has a write-skew
    cycle; renewing under a brief lock keeps it serializable."""
    wl = make_workload("ycsb", {"records_per_node": 13, "hot_records_per_node": 1,
                                "hot_probability": 0.9, "ops": 4,
                                "write_probability": 0.2, "compute": 0.0},
                       2, 2, _PROFILE.host.clock, 1)
    cfg = sk.rcc_config(sk.SundialProtocol(kind="sundial", verbs="one_sided",
                                           retry_backoff=True, renew_lock=renew_lock))
    hist = History()
    b = build(_PROFILE, 2, 2, wl, cfg, 1, seed=5625, history=hist, kind="sundial")
    run_txn_bench(b, 0.0, 60_000.0, drain=True)
    assert hist.check().serializable == serializable
    assert len(hist) > 5


@pytest.mark.parametrize("framework,renew_lock,expected", [
    ("none", None, True), ("rcc", None, False), ("rcc", True, True),
    ("none", False, False)])
def test_renewal_follows_the_framework_unless_set(framework, renew_lock, expected):
    """Unset, ``renew_lock`` is the framework's code: RCC's plain WRITE under ``rcc``
    (its code as it ran), the brief lock otherwise; a value set wins."""
    extra = {} if renew_lock is None else {"renew_lock": renew_lock}
    block = sk.SundialProtocol(kind="sundial", verbs="one_sided", framework=framework,
                               **extra)
    assert sk.rcc_config(block).option("renew_lock") is expected


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_an_older_writer_waits_for_a_younger_holder(verbs):
    """Both start in the same microsecond, so node 0's transaction is the older. Node 2
    locks X and keeps it 10 us; node 0 asks for X 3 us in, waits (one-sided: spins;
    RPC: parked at node 1) instead of dying, and commits right after node 2."""
    b, hist = _script(verbs, {2: _add_to(X, 1, hold_ns=10_000.0),
                              0: _add_to(X, 10, before_ns=3_000.0)})
    assert b.cc.stats.causes == {}
    assert list(hist.transactions()) == [(1, [((0, X), 0)], [((0, X), 1)]),
                                         (2, [((0, X), 1)], [((0, X), 2)])]
    assert _Q.unpack(b.store.value_local(1, 0, 0))[0] == 11
    assert max(b.sim.stats.hist("txn_lat").samples) > 10_000.0


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_a_younger_writer_dies_at_an_older_holder(verbs):
    """Node 0 (the older) locks X and keeps it 10 us; node 2, younger, finds it held
    and aborts with cause lock (again on each retry while it is held), then commits."""
    b, hist = _script(verbs, {0: _add_to(X, 10, hold_ns=10_000.0),
                              2: _add_to(X, 1, before_ns=3_000.0)})
    assert set(b.cc.stats.causes) == {"lock"}
    assert list(hist.transactions()) == [(1, [((0, X), 0)], [((0, X), 1)]),
                                         (2, [((0, X), 1)], [((0, X), 2)])]
