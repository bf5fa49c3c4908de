"""protocols.txn.occ: round trips and phase latencies of one transaction per preset."""
from __future__ import annotations

import struct

import pytest

from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.api import Abort, TxnSpec
from protocols.txn.store import Table
from protocols.txn.systems import preset

_Q = struct.Struct("<q")


class _Counter:
    """Node 0's single thread increments record 1 (on node 1) forever."""

    def __init__(self, nodes: int = 3, read_only: bool = False) -> None:
        self.tables = [Table(0, "counter", 8, 4, lambda k: (k % nodes, k // nodes))]
        self.read_only = read_only

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, 1, True)
            if not self.read_only:
                tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc", body, self.read_only)


def _node0(cx4, wl, cfg, coroutines=1, history=None):
    """3 nodes of one thread each, built with ``cfg``; only node 0 runs transactions."""
    b = build(cx4, 3, 1, wl, cfg, coroutines, history=history)
    for key in [(1, 0), (2, 0)]:
        b.cc.coords.pop(key)
    return b


def _one(cx4, name, read_only=False, coroutines=1, **over):
    hist = History()
    b = _node0(cx4, _Counter(read_only=read_only), preset(name, **over), coroutines, hist)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    return m, b, hist


# E + V(lock) + L + C round trips of one remote read-modify-write (DrTM+H Table 4)
@pytest.mark.parametrize("name,rts", [("drtmh", 3), ("farm", 5), ("drtmr", 4), ("fasst", 3),
                                      ("hybrid-fasst", 3)])
def test_round_trips_per_transaction(cx4, name, rts):
    """DrTM+H: 1 READ (cached), CAS+READ, log WRITEs, passive commit = 3; FaRM: lookup +
    READ, lock RPC, log, commit RPC = 5; DrTM+R: 4; FaSST: read-lock, log, commit = 3."""
    m, b, hist = _one(cx4, name)
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["abort_rate"] == 0.0
    assert hist.check().serializable
    # every commit incremented the counter once
    assert b.store.header_local(1, 0, 0)[1] == len(hist)


@pytest.mark.parametrize("name", ["drtmh", "fasst"])
def test_only_execution_ends_after_the_execution_phase(cx4, name):
    """TX_ONLY_EXE: one round trip (the read, or FaSST's read-lock), nothing validated,
    logged or written back, and every lock taken in execution released."""
    m, b, hist = _one(cx4, name, only_execution=True)
    assert m["round_trips_per_txn"] == pytest.approx(1.0)
    assert m["lat_validate_us"] == m["lat_log_us"] == m["lat_commit_us"] == 0.0
    assert b.store.header_local(1, 0, 0) == (0, 0)      # unlocked, never written
    assert len(hist) == 0 and b.cc.stats.committed > 0


def test_unloaded_phase_latencies_are_round_trips(cx4):
    """Unloaded, each phase takes about one network round trip (1-4 us); passive ACK
    takes the commit off the critical path."""
    m, _, _ = _one(cx4, "drtmh")
    for k in ("lat_exec_us", "lat_validate_us", "lat_log_us"):
        assert 1.0 < m[k] < 4.0, k
    assert m["lat_commit_us"] < 0.5
    m2, _, _ = _one(cx4, "drtmr")
    assert m2["lat_commit_us"] > 1.0


def test_one_sided_execution_beats_rpc_unloaded(cx4):
    """A cached one-sided READ is faster than an RPC, which beats READ-lookup + READ."""
    cached = _one(cx4, "drtmr")[0]["lat_exec_us"]
    rpc = _one(cx4, "drtmh", execution="two_sided")[0]["lat_exec_us"]
    uncached = _one(cx4, "farm")[0]["lat_exec_us"]
    assert cached < rpc < uncached


def test_read_only_single_read_skips_validation(cx4):
    """A read-only transaction with one read needs no validation round trip."""
    m, _, hist = _one(cx4, "drtmh", read_only=True)
    assert m["round_trips_per_txn"] == pytest.approx(1.0)
    assert all(not w for _, _, w in hist.transactions())


@pytest.mark.parametrize("locked_read_aborts", [True, False])
def test_conflicting_coroutines_abort_and_stay_serializable(cx4, locked_read_aborts):
    """Four coroutines incrementing one counter conflict, abort, retry and lose nothing,
    whether a read that finds the record locked aborts at once or reads on (as DrTM+H's
    and RCC's code: the lock stage's version check then catches the conflict)."""
    wl = _Counter()
    hist = History()
    b = _node0(cx4, wl, preset("drtmh", locked_read_aborts=locked_read_aborts), 4, hist)
    occ = b.cc
    real_attempt, real_lock = occ.attempt, occ._lock
    n = {"attempts": 0, "locks": 0}

    def attempt(tx, owner):
        n["attempts"] += 1
        yield from real_attempt(tx, owner)

    def lock(tx, writes, owner):
        n["locks"] += 1
        yield from real_lock(tx, writes, owner)

    occ.attempt, occ._lock = attempt, lock
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    if locked_read_aborts:
        assert n["locks"] < n["attempts"]      # some attempts end at their read
    else:
        assert n["locks"] == n["attempts"]     # every attempt reaches the lock stage
    assert m["abort_rate"] > 0.05
    assert hist.check().serializable
    assert b.store.header_local(1, 0, 0)[1] == len(hist)
    assert _Q.unpack(b.store.value_local(1, 0, 0))[0] == len(hist)


@pytest.mark.parametrize("name", ["drtmh", "farm", "drtmr"])
def test_no_abort_loses_updates_as_the_released_code_does(cx4, name):
    """With ``no_abort`` (DrTM+H's NO_ABORT) the same four coroutines never abort, one-
    sided or RPC locks alike: increments overwrite each other and the checker says so."""
    m, b, hist = _one(cx4, name, coroutines=4, no_abort=True)
    assert m["abort_rate"] == 0.0
    assert not hist.check().serializable
    assert _Q.unpack(b.store.value_local(1, 0, 0))[0] < len(hist)


def test_no_abort_keeps_fasst_read_lock_aborts(cx4):
    """FaSST's read-lock in execution aborts even under NO_ABORT (OCCFast has no guard),
    and its histories stay serializable."""
    m, b, hist = _one(cx4, "fasst", coroutines=4, no_abort=True)
    assert m["abort_rate"] > 0.05
    assert hist.check().serializable
    assert _Q.unpack(b.store.value_local(1, 0, 0))[0] == len(hist)


class _SlowCounter(_Counter):
    """As _Counter, with 5 us of logic after the read; counts bodies run to the end."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = 0

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            v = yield from tx.read(0, 1, True)
            yield tx.compute(5_000.0)
            tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
            self.finished += 1
        return TxnSpec("inc", body)


@pytest.mark.parametrize("no_abort", [False, True])
def test_fasst_read_lock_failure_aborts_at_commit_as_released(cx4, no_abort):
    """FaSST's failed read-lock aborts the attempt at once; with ``no_abort`` (the
    released OCCFast) the body runs to the end first and the attempt aborts at commit."""
    wl = _SlowCounter()
    b = _node0(cx4, wl, preset("fasst", no_abort=no_abort), 4, History())
    run_txn_bench(b, 10_000.0, 200_000.0, drain=True)
    st = b.cc.stats
    assert st.aborted > 0
    if no_abort:
        assert wl.finished > b.store.header_local(1, 0, 0)[1]   # aborted bodies ran too
    else:
        assert wl.finished == b.store.header_local(1, 0, 0)[1]  # only committed ones


@pytest.mark.parametrize("backoff", [True, False])
def test_retry_without_backoff_restarts_at_once(cx4, backoff):
    """An aborted attempt is retried with the same inputs; after a random back-off by
    default, and at once (after yielding to ready coroutines, none here) with
    ``retry_backoff=False``, as DrTM+H's BenchWorker::worker_routine retries."""
    b = _node0(cx4, _Counter(), preset("drtmh", retry_backoff=backoff), 1)
    occ = b.cc
    real = occ.attempt
    starts = []

    def attempt(tx, owner):
        starts.append((occ.sim.env.now, tx.spec))
        if len(starts) == 1:
            raise Abort             # the first attempt conflicts before doing anything
        yield from real(tx, owner)

    occ.attempt = attempt
    run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    (t0, spec0), (t1, spec1) = starts[:2]
    assert spec1 is spec0           # same inputs
    if backoff:
        assert t1 > t0
    else:
        assert t1 == t0
    assert b.store.header_local(1, 0, 0)[1] == len(starts) - 1   # the rest committed


def test_scenario_history_option_writes_checkable_histories(tmp_path):
    """``workload.history: true`` adds ``serializable``/``history_txns`` to every row and
    writes each point's history where ``rnicsim check-history`` can read it; a later run
    without histories leaves none behind."""
    from pathlib import Path

    from protocols.txn.history import History
    from rnicsim.runner import run_scenario
    from rnicsim.scenario import load_scenario

    f = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh" / "fig13_factors.yaml"
    sc = load_scenario(f, ["run.size=smoke", "workload.history=true"])
    summary = run_scenario(sc, tmp_path, progress=False)
    rows = summary["rows"]
    assert len(rows) == 2 and all(r["serializable"] == 1.0 for r in rows)
    for i, r in enumerate(rows):
        h = History.from_jsonl(str(tmp_path / "points" / f"{i:03d}" / "history.jsonl"))
        assert len(h) == r["history_txns"] > 0
        assert h.check().serializable
    run_scenario(load_scenario(f, ["run.size=smoke"]), tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "points").iterdir()) == [
        "000.json", "001.json", "run.json"]       # the stored points, no histories


def test_staggered_start_spreads_the_coroutines(cx4):
    """``start(..., stagger_ns)`` starts each coroutine at a random time in [0, stagger):
    in the first 50 us of a 400 us stagger most of 4 coroutines have not started, so
    far fewer transactions commit than when all start at once."""
    def commits(stagger):
        wl = _Counter()
        hist = History()
        b = _node0(cx4, wl, preset("drtmh"), 4, hist)
        b.cc.start(wl, 4, stagger)
        b.sim.run(until=50_000.0)
        return len(hist)

    together, spread = commits(0.0), commits(400_000.0)
    assert together > 0
    assert spread < together / 2


class _Speculative(_Counter):
    """Prefetch the remote counter, compute 10 us, then use it (DrTM+H's speculative
    execution overlaps the compute with the READ)."""

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            yield from tx.prefetch([(0, 1)], True)
            yield tx.compute(10_000.0)
            v = yield from tx.read(0, 1, True)
            tx.write(0, 1, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc", body)


@pytest.mark.parametrize("name", ["drtmh", "drtmr"])
def test_speculative_execution_overlaps_the_read(cx4, name):
    """With outstanding requests (DrTM+H) the prefetched READ is in flight during the
    10 us of logic: the execution phase takes about 10 us, not 10 us + a round trip.
    Without (DrTM+R) the record is read when used: 10 us + one round trip."""
    hist = History()
    b = _node0(cx4, _Speculative(), preset(name), 1, hist)
    m = run_txn_bench(b, 10_000.0, 100_000.0, drain=True)
    assert hist.check().serializable
    assert b.store.header_local(1, 0, 0)[1] == len(hist)
    if name == "drtmh":
        assert 10.0 <= m["lat_exec_us"] < 10.5
    else:
        assert m["lat_exec_us"] > 11.5


class _TwoRecords:
    """Node 0's thread updates records 1 and 4, both on node 1."""

    tables = [Table(0, "counter", 8, 6, lambda k: (k % 3, k // 3))]

    def next_txn(self, rng, node, thread, co):
        def body(tx):
            for k in (1, 4):
                v = yield from tx.read(0, k, True)
                tx.write(0, k, _Q.pack(_Q.unpack(v)[0] + 1))
        return TxnSpec("inc2", body, False)


def _run_two(cx4, name):
    return _node0(cx4, _TwoRecords(), preset(name), 1)


def test_commit_rpcs_go_one_per_record(cx4):
    """DrTM+H's write_back_oneshot: two records on one node get two commit RPCs (flushed
    together), not one batched RPC."""
    from protocols.txn.occ import H_COMMIT
    b = _run_two(cx4, "fasst")
    ep = b.cc.mesh.endpoint(1, 0)
    real = ep._handlers[H_COMMIT]
    calls = []
    ep.register(H_COMMIT, lambda src, items: (calls.append(len(items)), real(src, items))[1])
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    assert m["committed"] > 0 and set(calls) == {1}
    assert b.store.header_local(1, 0, 1)[1] == b.store.header_local(1, 0, 0)[1] > 0


def test_one_sided_commit_signals_only_the_unlock(cx4, monkeypatch):
    """Without passive ACK a one-sided commit posts value WRITE + unlock WRITE in one
    doorbell with only the second signaled (the pair completes in order on RC)."""
    from rnicsim.verbs import WRITE, QueuePair
    pairs = []
    real = QueuePair.post_send

    def spy(self, wrs, event=True):
        if len(wrs) == 2 and all(w.opcode == WRITE for w in wrs) and wrs[1].length == 8:
            pairs.append((wrs[0].signaled, wrs[1].signaled))
        return real(self, wrs, event)

    monkeypatch.setattr(QueuePair, "post_send", spy)
    b = _run_two(cx4, "drtmr")
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    assert m["committed"] > 0 and pairs and set(pairs) == {(False, True)}


# RCC's OCC (protocol.verbs), one remote read-modify-write on 3 nodes: the read (1), the
# lock, CAS + READ of the version in one doorbell (1), the log to the two remote backups
# (1), its acknowledgement RPCs (1, no passive ACK) and the commit (1); no read set to
# validate, but RCC's OCC::commit calls validate_reads all the same (a wait call with
# nothing pending, counted by RCC's counter: 6 waits). The same count over RPC: read RPC,
# lock RPC, log RPCs, acknowledgement RPCs, commit RPC. A remote read-only read: RCC's
# OCC::commit has no read-only path: the read (1), the lock of an empty write set (a
# wait call), the validation (1), no log, the write-back of nothing (a wait call) = 2
# round trips, 4 wait calls (RCC's RPC OCC logs 6 per writing SmallBank transaction and
# 4 per Balance).
@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
@pytest.mark.parametrize("read_only,rts,waits", [(False, 5, 6), (True, 2, 4)])
def test_rcc_occ_round_trips(cx4, verbs, read_only, rts, waits):
    """RCC's OCC: round trips and wait calls per uncontended transaction as counted
    above, stages timed apart (read, lock, validate, log, commit), nothing aborted,
    serializable."""
    from protocols.txn.scenario_kinds import OccProtocol, occ_config

    wl = _Counter(read_only=read_only)
    hist = History()
    b = _node0(cx4, wl, occ_config(OccProtocol(kind="occ", verbs=verbs)), 1, hist)
    m = run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    assert m["round_trips_per_txn"] == pytest.approx(rts)
    assert m["waits_per_txn"] == pytest.approx(waits)
    assert m["abort_rate"] == 0.0 and hist.check().serializable
    if read_only:
        assert m["lat_validate_us"] > 0 and m["lat_log_us"] == 0
        return
    assert {"lat_read_us", "lat_lock_us", "lat_validate_us", "lat_log_us",
            "lat_commit_us"} <= set(m) and "lat_exec_us" not in m
    assert m["lat_lock_us"] > 0 and m["lat_read_us"] > 0


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_an_aborted_attempt_waits_for_its_releases(cx4, verbs):
    """After an abort the locks won are released (WRITE 0, or a release RPC) and the
    attempt waits for their completions before it retries, as DrTM+H's and RCC's
    ``release_writes`` yield after posting them: retried at once (no back-off), the
    second attempt finds the record unlocked, one round trip after the abort."""
    import dataclasses

    from protocols.txn.scenario_kinds import OccProtocol, occ_config

    cfg = dataclasses.replace(occ_config(OccProtocol(kind="occ", verbs=verbs)),
                              retry_backoff=False)
    b = _node0(cx4, _Counter(), cfg, 1)
    occ = b.cc
    real_log, real_attempt = occ.repl.log, occ.attempt
    aborted, starts = [], []

    def log(tx, writes, how):
        if not aborted:             # the first attempt fails after locking its write
            aborted.append((occ.sim.env.now, b.store.header_local(1, 0, 0)[0]))
            raise Abort("lock")
        yield from real_log(tx, writes, how)

    def attempt(tx, owner):
        starts.append((occ.sim.env.now, b.store.header_local(1, 0, 0)[0]))
        yield from real_attempt(tx, owner)

    occ.repl.log, occ.attempt = log, attempt
    run_txn_bench(b, 10_000.0, 40_000.0, drain=True)
    (t_abort, held), (t_retry, lock) = aborted[0], starts[1]
    assert held != 0 and lock == 0
    # the release is one network round trip (1-4 us unloaded), not an instant
    assert 1_000.0 < t_retry - t_abort < 4_000.0


def test_locked_read_aborts_reaches_both_occ_configs():
    """``protocol.locked_read_aborts`` sets the option for a DrTM+H preset and for RCC's
    OCC alike; unset, a read that finds its record locked reads on, as both codes do."""
    from protocols.txn.scenario_kinds import OccProtocol, occ_config

    assert not occ_config(OccProtocol(kind="occ")).locked_read_aborts
    assert not occ_config(OccProtocol(kind="occ", verbs="rpc")).locked_read_aborts
    for extra in ({}, {"verbs": "one_sided"}):
        proto = OccProtocol(kind="occ", locked_read_aborts=True, **extra)
        assert occ_config(proto).locked_read_aborts
