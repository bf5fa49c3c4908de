"""OCC over RDMA with a primitive choice per phase (DrTM+H's execution framework).

Scope
    Coordinator coroutines on worker threads run transactions written against a small
    API (:class:`Txn`: ``read``/``read_many``/``write``/``insert``/``compute``) that hides
    the protocol. A read-write transaction goes through four phases (DrTM+H sec. 2.2):

    ====  ==========================  ===========================  ========================
    E     one-sided: READ the record  two-sided: one RPC per       hybrid: READ on a
          (index cache hit) or READ   destination (reads batched)  location-cache hit,
          the index bucket, then the                               RPC on a miss (the
          record                                                   reply refills the cache)
    V     lock: CAS(0 -> owner) +     lock RPC (lock and read the  -
          READ version, one doorbell  version at the primary)
          validate: READ lock+version validate RPC
    L     WRITE the log into a ring   log RPC (the handler copies  -
          on every backup             it)
    C     WRITE version+value, WRITE  commit RPC per record        -
          0 to the lock, one doorbell (install, unlock), all in one
          (only the second signaled)  doorbell flush
    ====  ==========================  ===========================  ========================

    Read-only transactions read (as E, with ``ro_read``) and validate (``ro_validate``)
    unless they made a single read (one READ, one RPC, or one batch of local records). Validation of the read set follows locking (two round
    trips when a transaction has both), which OCC needs for serializability.
    FaSST's OCC (``lock_in_execution``) reads and locks write-set records during
    execution (read-lock RPC, or CAS + READ), validates the rest, logs to the
    coordinator's backups and commits. The write set is what the body declares with
    ``for_update``: a record written without it is locked in the validation phase, and
    one locked but not written is unlocked after the commit.

    Options: ``outstanding`` (the reads of one ``read_many`` and the requests of a phase
    go out together; otherwise one at a time), ``passive_ack`` (commit acknowledgements
    off the critical path: one-sided WRITEs unsignaled, commit RPCs without reply),
    doorbell batching of RPCs (:class:`protocols.rpc.RpcConfig`), the location cache.

    Conflicts: a read that finds the record locked (only with ``locked_read_aborts``;
    DrTM+H's and RCC's code reads on), a lock that finds it locked, or a version changed
    since it was read abort the transaction; its locks are released
    (signaled WRITE 0 / release RPC with an empty reply, waited for, as DrTM+H's and
    RCC's ``release_writes``) and it is retried, with the same inputs, after a
    random back-off. ``retry_backoff=False`` retries as DrTM+H's framework does
    (``BenchWorker::worker_routine`` in ``src/framework/bench_worker.cc``: on an abort it
    counts it, calls ``yield_next`` once, restores the coroutine's random seed so the
    same inputs are drawn again, and jumps back to run the transaction; a
    ``backoff_shifts`` variable is declared and never used): the retry waits behind the
    thread's other ready coroutines and nothing else. Every design fig. 14 compares runs
    in that framework, the FaSST emulation included.

    ``only_execution`` is the released code's ``TX_ONLY_EXE`` build switch ("run only the
    execution phase", PROTOCOL-FACTS 1.1): ``RtxOCC::commit`` and ``OCCR::commit`` return
    at once (``dummy_commit``), so a transaction is its execution phase alone, the
    set-up for studying that phase by itself (DrTM+H fig. 7). No history is recorded.

    ``no_abort`` reproduces the released DrTM+H code as its paper measured it (build
    switch ``NO_ABORT`` fixed at 1): ``RtxOCC::commit`` (``src/rtx/occ.cc``) and
    ``OCCR::lock_writes_w_rdma`` / ``validate_reads_w_rdma`` (``src/rtx/occ_rdma.cc``)
    ignore every failed lock, changed version and failed validation, RPC or one-sided,
    and go on to log and write back (the write-back clears the lock word whoever holds
    it). Execution reads do not check the lock either. The FaSST emulation's read-lock
    during execution still aborts (``OCCFast::parse_batch_result`` in
    ``src/rtx/occ_variants.hpp`` sets ``abort_`` with no ``NO_ABORT`` guard), so with
    ``lock_in_execution`` those conflicts abort as before. Transactions then lose
    updates: histories are not serializable (``protocols.txn.history`` says so), and
    SmallBank's money is not conserved. Off by default.

    CPU: per phase the workload's cost (DrTM+H Table 3, cycles at the host clock) on
    the coordinator; handlers book ``rpc.dispatch`` + ``record_op`` per record (+ copy per
    log byte) on the serving thread; local records cost ``local_access`` (unless the
    framework sends them through the NIC: :meth:`~protocols.txn.driver.TxnSystem.by_cpu`).

    Logging: the log goes to the backups of every node written plus the coordinator's
    (DrTM+H) or to the coordinator's backups (FaSST). Backups apply entries lazily: every
    ``reclaim_every`` entries a coordinator sends one reclaim message (no reply) to a
    backup, whose handler installs them in its backup copies.

Metrics (see :class:`TxnStats`): committed transactions, aborts, latency from the first
attempt to commit, per-phase latency of the committing attempt, round trips. A phase
runs from the end of the previous one to the moment its coroutine runs again after its
last wait, so it includes the wait for the thread behind the other ready coroutines, as
DrTM+H's ``START``/``END`` timers do (``src/core/utils/latency_profier.h``, rdtsc around
posting and ``indirect_yield``; ``OCC::log_remote`` in ``src/rtx/occ.cc`` times the log
post and its wait for both the RPC and the one-sided logger, not the log-ack RPC sent
after it; reported for coroutine 1 of worker thread 0 through ``rtx_hook_``). That
log-ack expects replies unless ``PA`` is set; one stored version of ``occ.cc`` waits for
them with a yield of its own (untimed), another sends it without yielding, so its
replies are awaited inside the next timed wait, the commit's. The model sends a log-ack
only with ``rcc_stages`` and no ``passive_ack`` (RCC's framework); otherwise backups get
reclaim messages that need no reply. With ``rcc_stages`` the stages are RCC's timers
(``occ.cc``, ``occ_rdma.*``; ``lat_<stage>_call_us`` their means per call): ``read``
one call per READ one-sided and one per transaction over RPC (RCC batches its reads),
``lock`` and ``log`` one call each (the log-ack in no timer), ``commit`` two calls, RCC's
nested timers (one from the lock to the end of the write-back, one around the
write-back), and ``validate``, which RCC does not time apart, the validation alone.
Here every
committed transaction of every coroutine is averaged, and the L phase holds all of the
phase's CPU (``phase_ns[2]``), part of which (building the log entry,
``prepare_write_contents``) DrTM+H spends before its timer starts.
"""
from __future__ import annotations

from dataclasses import dataclass

from rnicsim.verbs import CAS, READ, WRITE, WorkRequest

from ..rpc import Endpoint, RpcConfig, Waiter
from .api import Abort, Rec, Txn
from .cc import SoftwareCosts
from .driver import TxnSystem
from .replication import KEY_BYTES, VER_BYTES, Replication
from .store import BUCKET, HEADER, Store, pack_u64, parse_header, parse_record

MODES = ("one_sided", "two_sided", "hybrid")
TWO = ("one_sided", "two_sided")

H_READ, H_READ_LOCK, H_LOCK, H_VALIDATE, H_COMMIT, H_RELEASE = 1, 2, 3, 4, 6, 7
ZERO8 = bytes(8)

@dataclass(frozen=True)
class OccConfig:
    """Primitive per phase and options (see module doc)."""

    execution: str = "hybrid"
    index_cache: bool = True
    lock: str = "one_sided"
    validate: str = "one_sided"
    log: str = "one_sided"
    commit: str = "one_sided"
    ro_read: str = "hybrid"
    ro_validate: str = "one_sided"
    passive_ack: bool = True
    outstanding: bool = True
    lock_in_execution: bool = False
    log_to: str = "participants"
    rep_factor: int = 2
    reclaim_every: int = 1
    no_abort: bool = False
    # False: an execution read that finds the record locked reads on, as DrTM+H's and
    # RCC's code does (``remote_read`` and the read handler keep the version and leave the
    # lock word unchecked), leaving the conflict to the lock stage's version check and the
    # read set's validation. True aborts the attempt at that read (a what-if).
    locked_read_aborts: bool = False
    retry_backoff: bool = True
    only_execution: bool = False
    # How an aborted attempt releases its locks; None: one-sided if locking or commit is
    # one-sided, else a release RPC (DrTM+H). RCC's RELEASE stage sets it.
    release: str | None = None
    # Metric names of the phases: DrTM+H's four (E, V, L, C) or RCC's stages, which time
    # locking and validation apart (read, lock, validate, log, commit).
    rcc_stages: bool = False
    rpc: RpcConfig = RpcConfig()
    costs: SoftwareCosts = SoftwareCosts()

    @property
    def phase_keys(self) -> tuple[str, str, str, str]:
        """The stage names of execution, locking, logging and commit."""
        return ("read", "lock", "log", "commit") if self.rcc_stages else \
            ("exec", "validate", "log", "commit")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Every stage name, in order (metric ``lat_<stage>_us``)."""
        if self.rcc_stages:
            return ("read", "lock", "validate", "log", "commit")
        return ("exec", "validate", "log", "commit")

    def __post_init__(self) -> None:
        for k in ("execution", "ro_read"):
            if getattr(self, k) not in MODES:
                raise ValueError(f"{k}: one of {', '.join(MODES)}, not {getattr(self, k)!r}")
        if self.release is not None and self.release not in TWO:
            raise ValueError(f"release: one of {', '.join(TWO)}, not {self.release!r}")
        for k in ("lock", "validate", "log", "commit", "ro_validate"):
            if getattr(self, k) not in TWO:
                raise ValueError(f"{k}: one of {', '.join(TWO)}, not {getattr(self, k)!r}")
        if self.log_to not in ("participants", "coordinator"):
            raise ValueError(f"log_to: participants or coordinator, not {self.log_to!r}")
        if isinstance(self.rep_factor, bool) or not isinstance(self.rep_factor, int) \
                or self.rep_factor < 0:
            raise ValueError(f"rep_factor: an integer >= 0 (backups per primary), not "
                             f"{self.rep_factor!r}")


class OccSystem(TxnSystem):
    """OCC over a :class:`protocols.rpc.Mesh` and a :class:`Store` (see module doc)."""

    def __init__(self, mesh, store: Store, cfg: OccConfig, history=None) -> None:
        self.repl = None
        self.STAGES = cfg.stage_names
        self.phase_keys = cfg.phase_keys
        super().__init__(mesh, store, cfg, history)

    def register(self, ep: Endpoint) -> None:
        if self.repl is None:
            # RCC's OCC waits for the log's acknowledgement without passive ACK
            # (replication module doc); DrTM+H's presets reclaim lazily
            self.repl = Replication(self, self.cfg.log_to, self.cfg.reclaim_every,
                                    ack=self.cfg.rcc_stages and not self.cfg.passive_ack)
        self.repl.register(ep)
        self._register(ep)

    # ================================================================ driver hooks
    def prefetches(self) -> bool:
        return self.cfg.outstanding

    def read_records(self, tx: Txn, todo: list[Rec]):
        if self.cfg.outstanding:
            yield from self.fetch(tx, todo)
        else:
            for r in todo:
                yield from self.fetch(tx, [r])

    def write_unread(self, tx: Txn, table: int, key):
        raise ValueError(f"Txn.write(table={table!r}, key={key!r}): the transaction "
                         "has not read this record; read it first (read or read_many, "
                         "with for_update=True under FaSST's OCC)")

    def settle(self, tx: Txn):
        if self.cfg.lock_in_execution:
            # Prefetches still in flight may win locks: parse them first, so that every
            # lock won is released.
            while tx.pending:
                try:
                    yield from self.fetch_wait(tx, tx.pending[0])
                except Abort:
                    pass

    def attempt(self, tx: Txn, owner: int):
        sim = self.sim
        spec = tx.spec
        E, V, L, C = self.phase_keys
        t = sim.now
        tx.owner = owner
        yield from self.run_body(tx)
        if tx.doomed:
            raise Abort("lock")
        now = sim.now
        if not self.cfg.rcc_stages:
            tx.phases[E] = now - t    # RCC's read timer is per wait (fetch_wait)
        if self.cfg.only_execution:
            # TX_ONLY_EXE: the transaction ends with its execution phase (locks taken in
            # execution are released, nothing is validated, logged, written or recorded).
            yield from self.release(tx, wait=False)
            tx.phases[E] = sim.now - t     # the phases add up to the latency
            return
        t = now
        recs = list(tx.recs.values())
        # RCC's OCC::commit has no read-only path: a read-only transaction locks its
        # (empty) write set, validates its reads and writes nothing back, each a wait.
        if tx.read_only and not self.cfg.rcc_stages and not any(r.locked for r in recs):
            if spec.phase_ns[1]:
                yield tx.ep.compute(spec.phase_ns[1])
            # One read unit (one READ, one RPC, or one batch of local records read
            # without a yield in between) is a consistent snapshot; two or more may
            # straddle another transaction's commit and need validation.
            if tx.units + tx.local > 1:
                yield from self._validate(tx, recs, self.cfg.ro_validate)
            tx.phases["validate"] = sim.now - t
            if self.cfg.rcc_stages:
                self._rcc_commit(tx, sim.now - t, 0.0)
            self.record(tx)
            return
        t_outer = t
        writes = [r for r in recs if r.new is not None]
        reads = [r for r in recs if r.new is None and not r.locked]
        # V: lock the write set (one round trip: lock + version), then validate reads.
        if spec.phase_ns[1]:
            yield tx.ep.compute(spec.phase_ns[1])
        if not self.cfg.lock_in_execution:
            yield from self._lock(tx, writes, owner)
        else:
            # FaSST locked the records read for update; a record written without being
            # read for update is locked now, else its write would not be isolated.
            late = [r for r in writes if not r.locked]
            if late:
                yield from self._lock(tx, late, owner)
        if V != "validate":
            # RCC's stages: the lock stage and the validation stage timed apart
            now = sim.now
            tx.phases[V] = now - t
            t = now
        if reads:
            yield from self._validate(tx, reads, self.cfg.validate)
        elif self.cfg.rcc_stages:
            self.empty_wait(tx)      # RCC's validate_reads of an empty read set
        now = sim.now
        tx.phases["validate"] = now - t
        t = now
        # L: replicate the log; the transaction commits when every backup has it. RCC's
        # log_remote does nothing, its timer included, for an empty write set (as
        # TxnSystem.log_writes).
        if writes or not self.cfg.rcc_stages:
            if spec.phase_ns[2]:
                yield tx.ep.compute(spec.phase_ns[2])
            u = tx.untimed
            yield from self.repl.log(tx, writes, self.cfg.log)
            tx.phases[L] = sim.now - t - (tx.untimed - u)    # the log's ack left out
        self.record(tx)
        t = sim.now
        # C: install and unlock.
        if spec.phase_ns[3]:
            yield tx.ep.compute(spec.phase_ns[3])
        yield from self._commit(tx, writes)
        if any(r.locked for r in recs):
            # Records locked for update (FaSST's read-lock) but not written: unlock them.
            yield from self.release(tx, wait=False)
        tx.phases[C] = sim.now - t
        if self.cfg.rcc_stages:
            self._rcc_commit(tx, sim.now - t_outer, tx.phases[C])

    @staticmethod
    def _rcc_commit(tx: Txn, outer: float, inner: float) -> None:
        """RCC's two nested commit timers (``OCC::commit`` around lock, validation, log,
        acknowledgement and write-back; ``write_back_oneshot`` around the write-back),
        two calls of the ``commit`` stage: ``outer`` and ``inner`` [ns]."""
        tx.phases["commit"] = outer + inner
        tx.calls["commit"] = 2

    # ================================================================ execution
    def fetch(self, tx: Txn, recs: list[Rec]):
        """Read ``recs`` (not yet read) as the execution configuration says."""
        st = yield from self.fetch_post(tx, recs)
        if st is not None:
            yield from self.fetch_wait(tx, st)

    def fetch_post(self, tx: Txn, recs: list[Rec]):
        """Read the local records of ``recs`` and post the requests for the remote ones;
        returns the state :meth:`fetch_wait` finishes (None when all are local)."""
        ep = tx.ep
        cfg = self.cfg
        store = self.store
        node = ep.node
        mode = cfg.ro_read if tx.spec.read_only else cfg.execution
        lock_now = cfg.lock_in_execution
        owner = tx.owner
        local, remote = [], []
        for r in recs:
            (local if self.by_cpu(tx, r.node) else remote).append(r)
        if local:
            tx.local += 1
        for r in local:
            if lock_now and r.for_update:
                if store.lock_local(node, r.table, r.slot, owner) != 0:
                    self._lock_failed(tx)
                else:
                    r.locked = True
            lock, r.version, r.value = store.read_local(node, r.table, r.slot)
            if lock and not r.locked and cfg.locked_read_aborts and not cfg.no_abort:
                raise Abort("lock")
        if local:
            yield ep.compute(self.costs.local_access * len(local))
        if not remote:
            return
        cache = store.caches[node]
        one, rpc, two_step = [], [], []
        for r in remote:
            if mode == "two_sided":
                rpc.append(r)
                continue
            hit = cfg.index_cache and cache.lookup(r.table, r.key)
            if cfg.index_cache:
                ep.thread.reserve(self.sim.now, self.costs.cache_lookup)
            if hit:
                one.append(r)
            elif mode == "hybrid":
                rpc.append(r)
            else:
                two_step.append(r)
        w = Waiter(ep)
        posts = []
        if two_step:
            # One-sided without a cached location: READ the index bucket first.
            for r in two_step:
                wr = WorkRequest(READ, BUCKET, r, True, False, ep.scratch, 0,
                                 store.rkeys[r.node], store.bucket_offset(r.table, r.slot))
                posts.append((ep.rc_qp(r.node), [wr]))
        self._post_reads(tx, one, posts, lock_now)
        by_node = self.group(rpc)
        calls = []
        for i, (n, rs) in enumerate(by_node.items()):
            hid = H_READ
            items = [(r.table, r.slot, lock_now and r.for_update) for r in rs]
            if lock_now and any(r.for_update for r in rs):
                hid = H_READ_LOCK
            ln = len(rs) * KEY_BYTES + (8 if hid == H_READ_LOCK else 0)
            ep.call(n, hid, (items, owner), ln, True, w, i)
            calls.append(rs)
        ep.post_group(posts, w)
        tx.units += len(posts) + len(calls)
        st = [w, one, two_step, calls, mode, lock_now]
        for r in remote:
            r.pending = st
        return st

    def fetch_wait(self, tx: Txn, st: list):
        """Wait for the requests :meth:`fetch_post` posted and parse the replies; with
        ``rcc_stages`` one call of the ``read`` stage, as RCC's read timer is around
        each wait for reads (``occ_rdma.h`` ``remote_read``: one READ; ``occ.h``
        ``load_read``: one batch of read RPCs), not around the body's own CPU."""
        if self.cfg.rcc_stages:
            yield from self.timed(tx, "read", self._fetch_wait(tx, st))
        else:
            yield from self._fetch_wait(tx, st)

    def _fetch_wait(self, tx: Txn, st: list):
        w, one, two_step, calls, mode, lock_now = st
        ep = tx.ep
        cfg = self.cfg
        store = self.store
        cache = store.caches[ep.node]
        tx.pending = [p for p in tx.pending if p is not st]
        for r in one + two_step:
            r.pending = None
        for rs in calls:
            for r in rs:
                r.pending = None
        self._rt(tx)
        yield w.arm()
        if two_step:
            w2 = Waiter(ep)
            posts2 = []
            self._post_reads(tx, two_step, posts2, lock_now)
            ep.post_group(posts2, w2)
            self._rt(tx)
            yield w2.arm()
            for r in two_step:
                if cfg.index_cache:
                    cache.fill(r.table, r.key)
        # Every result is parsed before aborting, so that every lock won is released.
        failed = False
        if two_step:
            failed |= self._parse_reads(two_step, w2.results, lock_now)
        failed |= self._parse_reads(one, w.results, lock_now)
        for i, rs in enumerate(calls):
            rep = w.replies[i]
            for r, (ok, lock, ver, val) in zip(rs, rep):
                r.version, r.value = ver, val
                if lock_now and r.for_update:
                    r.locked = ok
                    failed |= not ok
                elif lock and cfg.locked_read_aborts and not cfg.no_abort:
                    failed = True
                if cfg.index_cache and mode == "hybrid":
                    cache.fill(r.table, r.key)
        if failed:
            self._lock_failed(tx)

    def _lock_failed(self, tx: Txn) -> None:
        """A read found a record locked, or a read-lock in execution failed: abort now,
        or with ``no_abort`` go on and abort at commit, as the released FaSST emulation
        does (``OCCFast::parse_batch_result`` only sets ``abort_``; ``commit`` checks it
        after the transaction body has run)."""
        if not self.cfg.no_abort:
            raise Abort("lock")
        tx.doomed = True

    def _post_reads(self, tx: Txn, recs: list[Rec], posts: list, lock_now: bool) -> None:
        ep = tx.ep
        store = self.store
        for r in recs:
            t = store.tables[r.table]
            off = store.offset(r.table, r.slot)
            rk = store.rkeys[r.node]
            read = WorkRequest(READ, t.record_size, r, True, False, ep.scratch, 0, rk, off)
            if lock_now and r.for_update:
                cas = WorkRequest(CAS, 8, ("cas", r), True, False, ep.scratch, 8, rk, off,
                                  None, 0, tx.owner)
                posts.append((ep.rc_qp(r.node), [cas, read]))
            else:
                posts.append((ep.rc_qp(r.node), [read]))

    def _parse_reads(self, recs: list[Rec], results: dict, lock_now: bool) -> bool:
        """Fill ``recs`` from their READ (and CAS) completions; True on a conflict."""
        failed = False
        for r in recs:
            wc = results[r]
            lock, r.version, r.value = parse_record(wc.data, self.store.tables[r.table].value_size)
            if lock_now and r.for_update:
                old = results[("cas", r)].data
                r.locked = old == 0
                failed |= not r.locked
            elif lock and self.cfg.locked_read_aborts and not self.cfg.no_abort:
                failed = True
        return failed

    @staticmethod
    def _rt(tx: Txn, n: int = 1) -> None:
        tx.rts += n

    # ================================================================ validation
    def _lock(self, tx: Txn, writes: list[Rec], owner: int):
        """Lock the write set and check each version (one round trip)."""
        ep = tx.ep
        store = self.store
        node = ep.node
        failed = False
        remote = []
        for r in writes:
            if self.by_cpu(tx, r.node):
                ep.thread.reserve(self.sim.now, self.costs.local_access)
                if store.lock_local(node, r.table, r.slot, owner) != 0:
                    failed = True
                    continue
                r.locked = True
                if store.header_local(node, r.table, r.slot)[1] != r.version:
                    failed = True
            else:
                remote.append(r)
        if failed:
            self._conflict("lock")
        if not remote:
            if self.cfg.rcc_stages:
                self.empty_wait(tx)
            return
        w = Waiter(ep)
        groups = None
        if self.cfg.lock == "one_sided":
            posts = []
            for r in remote:
                off = store.offset(r.table, r.slot)
                rk = store.rkeys[r.node]
                cas = WorkRequest(CAS, 8, ("cas", r), True, False, ep.scratch, 8, rk, off,
                                  None, 0, owner)
                ver = WorkRequest(READ, 8, r, True, False, ep.scratch, 0, rk, off + 8)
                posts.append((ep.rc_qp(r.node), [cas, ver]))
            ep.post_group(posts, w)
        else:
            groups = self.group(remote)
            for i, (n, rs) in enumerate(groups.items()):
                items = [(r.table, r.slot, r.version) for r in rs]
                ep.call(n, H_LOCK, (items, owner), len(rs) * (KEY_BYTES + VER_BYTES) + 8,
                        True, w, i)
        self._rt(tx)
        yield w.arm()
        if groups is None:
            for r in remote:
                old = w.results[("cas", r)].data
                r.locked = old == 0
                ver = int.from_bytes(w.results[r].data, "little")
                failed |= (not r.locked) or ver != r.version
        else:
            for i, rs in enumerate(groups.values()):
                for r, (acq, ok) in zip(rs, w.replies[i]):
                    r.locked = acq
                    failed |= not ok
        if failed:
            self._conflict("lock")

    def _validate(self, tx: Txn, reads: list[Rec], how: str):
        """Check that no record of ``reads`` changed or is locked since it was read."""
        ep = tx.ep
        store = self.store
        node = ep.node
        failed = False
        remote = []
        for r in reads:
            if self.by_cpu(tx, r.node):
                ep.thread.reserve(self.sim.now, self.costs.local_access)
                lock, ver = store.header_local(node, r.table, r.slot)
                failed |= bool(lock and not r.locked) or ver != r.version
            else:
                remote.append(r)
        if failed:
            self._conflict("validation")
        if not remote:
            if self.cfg.rcc_stages:
                self.empty_wait(tx)
            return
        w = Waiter(ep)
        groups = None
        if how == "one_sided":
            posts = []
            for r in remote:
                wr = WorkRequest(READ, HEADER, r, True, False, ep.scratch, 0,
                                 store.rkeys[r.node], store.offset(r.table, r.slot))
                posts.append((ep.rc_qp(r.node), [wr]))
            ep.post_group(posts, w)
        else:
            groups = self.group(remote)
            for i, (n, rs) in enumerate(groups.items()):
                items = [(r.table, r.slot, r.version) for r in rs]
                ep.call(n, H_VALIDATE, items, len(rs) * (KEY_BYTES + VER_BYTES), True, w, i)
        self._rt(tx)
        yield w.arm()
        if groups is None:
            for r in remote:
                lock, ver = parse_header(w.results[r].data)
                failed |= bool(lock) or ver != r.version
        else:
            for i, rs in enumerate(groups.values()):
                failed |= not all(w.replies[i])
        if failed:
            self._conflict("validation")

    def _conflict(self, cause: str) -> None:
        """A failed lock or validation: abort, unless ``no_abort`` (the released DrTM+H
        code goes on, see the module doc)."""
        if not self.cfg.no_abort:
            raise Abort(cause)

    # ================================================================ logging
    def _commit(self, tx: Txn, writes: list[Rec]):
        ep = tx.ep
        store = self.store
        node = ep.node
        cfg = self.cfg
        pa = cfg.passive_ack
        remote = []
        for r in writes:
            if self.by_cpu(tx, r.node):
                ep.thread.reserve(self.sim.now, self.costs.local_access)
                store.install_local(node, r.table, r.slot, r.version + 1, r.new)
                store.unlock_local(node, r.table, r.slot)
                r.locked = False
            else:
                remote.append(r)
        if not remote:
            if cfg.rcc_stages and not pa:
                self.empty_wait(tx)
            return
        w = Waiter(ep)
        if cfg.commit == "one_sided":
            posts = []
            for r in remote:
                off = store.offset(r.table, r.slot)
                rk = store.rkeys[r.node]
                data = pack_u64(r.version + 1) + r.new
                inl = len(data) < 64
                # Only the unlock WRITE is signaled (RC completes the pair in order), as
                # DrTM+H's one-sided commit posts the pair (rdma_req_helper.hpp).
                wv = WorkRequest(WRITE, len(data), None, False, inl, None, 0, rk, off + 8)
                wv.data = data
                wu = WorkRequest(WRITE, 8, r, not pa, True, None, 0, rk, off)
                wu.data = ZERO8
                r.locked = False
                if pa:
                    ep.post_nowait(ep.rc_qp(r.node), [wv, wu])
                else:
                    posts.append((ep.rc_qp(r.node), [wv, wu]))
            if posts:
                ep.post_group(posts, w)
        else:
            # One commit RPC per remote record, all flushed in one doorbell batch: DrTM+H's
            # OCC::write_back_oneshot (src/rtx/occ.cc; the batched commit handler is
            # commented out), which its FaSST emulation (OCCFast) uses too.
            for i, r in enumerate(remote):
                ln = KEY_BYTES + VER_BYTES + len(r.new)
                ep.call(r.node, H_COMMIT, [(r.table, r.slot, r.version + 1, r.new)], ln,
                        not pa, w, i)
                r.locked = False
        if not pa:
            self._rt(tx)
        yield w.arm()

    def release(self, tx: Txn, wait: bool = True):
        """Unlock what ``tx`` holds. After an abort (``wait``) the attempt waits for the
        unlocks' completions; the unlocks of ``only_execution`` and of records locked for
        update but not written go out unsignaled, without reply."""
        ep = tx.ep
        store = self.store
        node = ep.node
        remote = []
        for r in tx.recs.values():
            if not r.locked:
                continue
            r.locked = False
            if self.by_cpu(tx, r.node):
                store.unlock_local(node, r.table, r.slot)
            else:
                remote.append(r)
        if not remote:
            if wait and self.cfg.rcc_stages:
                self.empty_wait(tx)      # RCC's release_writes after an abort
            return
        how = self.cfg.release
        if how is None:
            how = "one_sided" if "one_sided" in (self.cfg.commit, self.cfg.lock) else \
                "two_sided"
        # The attempt waits for the releases before it retries, as DrTM+H's and RCC's
        # ``release_writes`` (``src/rtx/occ.cc``, ``occ_rdma.cc``) yield after posting
        # signaled WRITEs or the release batch, whose handler sends an empty reply;
        # passive ACK does not cover them.
        w = Waiter(ep) if wait else None
        if how == "one_sided":
            posts = []
            for r in remote:
                wu = WorkRequest(WRITE, 8, r if wait else None, wait, True, None, 0,
                                 store.rkeys[r.node], store.offset(r.table, r.slot))
                wu.data = ZERO8
                if wait:
                    posts.append((ep.rc_qp(r.node), [wu]))
                else:
                    ep.post_nowait(ep.rc_qp(r.node), [wu])
            if posts:
                ep.post_group(posts, w)
        else:
            for i, (n, rs) in enumerate(self.group(remote).items()):
                ep.call(n, H_RELEASE, [(r.table, r.slot) for r in rs], len(rs) * KEY_BYTES,
                        wait, w, i)
        if not wait:
            yield ep.compute(0.0)
            return
        self._rt(tx)
        yield w.arm()

    # ================================================================ handlers
    def _register(self, ep: Endpoint) -> None:
        store = self.store
        node = ep.node
        c = self.costs
        op = c.record_op
        vs = {t.id: t.value_size for t in store.tables.values()}

        def read(src, payload):
            items, owner = payload
            out = []
            size = 0
            for table, slot, _ in items:
                lock, ver, val = store.read_local(node, table, slot)
                out.append((True, lock, ver, val))
                size += HEADER + vs[table] + 8
            return out, size, op * len(items)

        def read_lock(src, payload):
            items, owner = payload
            out = []
            size = 0
            for table, slot, lock_it in items:
                ok = True
                if lock_it:
                    ok = store.lock_local(node, table, slot, owner) == 0
                lock, ver, val = store.read_local(node, table, slot)
                out.append((ok, lock if not lock_it else 0, ver, val))
                size += HEADER + vs[table] + 1
            return out, size, op * len(items)

        def lock(src, payload):
            items, owner = payload
            out = []
            for table, slot, ver in items:
                acq = store.lock_local(node, table, slot, owner) == 0
                ok = acq and store.header_local(node, table, slot)[1] == ver
                out.append((acq, ok))
            return out, len(items), op * len(items)

        def validate(src, items):
            out = []
            for table, slot, ver in items:
                lk, v = store.header_local(node, table, slot)
                out.append(lk == 0 and v == ver)
            return out, len(items), op * len(items)

        def commit(src, items):
            for table, slot, ver, val in items:
                store.install_local(node, table, slot, ver, val)
                store.unlock_local(node, table, slot)
            return True, 1, op * len(items)

        def release(src, items):
            for table, slot in items:
                store.unlock_local(node, table, slot)
            return True, 0, op * len(items)

        for hid, fn in ((H_READ, read), (H_READ_LOCK, read_lock), (H_LOCK, lock),
                        (H_VALIDATE, validate), (H_COMMIT, commit),
                        (H_RELEASE, release)):
            ep.register(hid, fn)
