"""NO_WAIT two-phase locking, as RCC runs it (``src/rtx/nowait_rdma.*``).

Scope
    Strict two-phase locking with exclusive locks only (RCC's read locks are exclusive
    like its write locks: "currently READ lock is implemented the same as WRITE lock"):
    a transaction locks every record as its body first touches it, one record at a
    time, and keeps every lock until it has committed. A lock found held aborts the
    transaction at once (NO_WAIT); :mod:`.waitdie` waits instead when it may.

    Record (:data:`protocols.txn.store.OCC_LAYOUT`): lock word (8 B), seq (8 B: the
    number of committed writes, RCC's ``RdmaValHeader``), value. Lock word: the
    attempt's timestamp shifted left 9 bits, plus 1 for a write lock (RCC ``rwlock.hpp``
    ``R_LEASE(ts)`` + 1); 0 is free. Timestamp: the microsecond clock shifted left 26
    bits, plus the coroutine's owner id (node << 16 | thread << 10 | coroutine + 1), unique
    for up to 1,024 nodes (RCC's ``(us << 10) + node x 80 + thread x 10 + coroutine + 1``
    collides beyond 12 nodes).

    ===========  ==========================================  ==============================
    stage        one-sided                                   RPC
    ===========  ==========================================  ==============================
    ``lock``     CAS(0 -> word) + READ of the record in one  a lock RPC per record whose
                 doorbell (``lock_read_batch``; otherwise    reply carries status, seq and
                 CAS, then READ: two round trips)            value
    ``log``      WRITE the log to each backup's ring         a log RPC per backup
    ``commit``   per written record WRITE seq + value and    one commit RPC per node
                 WRITE 0 to the lock, one doorbell, only the (install, unlock)
                 last signaled
    ``release``  WRITE 0 to each read-locked record, before  one release RPC per node,
                 ``commit``                                  after ``commit``
    ===========  ==========================================  ==============================

    The read is the lock's (RCC fuses them): the ``read`` stage's bit is accepted, as
    RCC's scripts set it, and changes nothing.
    A record written without being read is locked (and its header read) at commit, in
    the ``lock`` stage's verbs. Local records are locked and read by the coordinator's
    CPU (unless the framework sends them through the NIC:
    :meth:`~protocols.txn.driver.TxnSystem.by_cpu`). An aborted attempt unlocks what it
    holds and waits for the unlocks, first the records it locked for reading, then those
    it locked for writing (RCC's ``release_reads`` and ``release_writes``: up to two
    round trips, in no timer).

Stages timed as RCC's timers time them (``nowait_rdma.cc``; metrics ``lat_<stage>_us``
per committed transaction and ``lat_<stage>_call_us`` per call): ``lock``, one call per
record locked (the lock RPC whose reply carries the record, or the CAS + READ with its
WAIT-DIE re-spins; the one-sided READ before it is in no timer), ``log`` (the log's
round trip; its acknowledgement is in no timer), ``commit``, ``release``. ``read`` is
never timed: RCC reads every record with its lock. The body's and the commit's CPU are
in no timer.
"""
from __future__ import annotations

from ..rpc import Endpoint
from .access import Access
from .api import Abort, Rec, Txn
from .driver import TxnSystem
from .replication import KEY_BYTES, VER_BYTES, Replication
from .store import HEADER, OCC_LAYOUT, pack_u64, parse_record

H_LOCK, H_COMMIT, H_RELEASE = 11, 12, 13
ZERO8 = bytes(8)
TS_SHIFT = 26        # timestamp = us << TS_SHIFT | owner id
LOCK_SHIFT = 9       # lock word = ts << LOCK_SHIFT | write bit


def layout(cfg):
    """The record layout: lock word, seq, value."""
    return OCC_LAYOUT


class System(TxnSystem):
    """NO_WAIT over the driver (see module doc)."""

    STAGES = ("read", "lock", "log", "commit", "release")

    def setup(self) -> None:
        cfg = self.cfg
        self.access = Access(self)
        self.repl = Replication(self, cfg.log_to, cfg.reclaim_every,
                                ack=not cfg.passive_ack)
        self.batch = cfg.option("lock_read_batch", True)
        self._first: dict[int, tuple] = {}    # owner -> (spec, ts) of its first attempt
        self._waiters: dict[int, list] = {}    # node -> parked lock requests

    # ================================================================ timestamps
    def timestamp(self, tx: Txn, owner: int) -> int:
        """The attempt's timestamp; a retry keeps its transaction's first one (so an
        aborted WAIT-DIE transaction grows older, never starves)."""
        first = self._first.get(owner)
        if first is not None and first[0] is tx.spec:
            return first[1]
        ts = (int(self.sim.now // 1000) << TS_SHIFT) | owner
        self._first[owner] = (tx.spec, ts)
        return ts

    def may_wait(self, ts: int, held: int) -> bool:
        """Whether a requester with timestamp ``ts`` may wait for the lock word ``held``
        (NO_WAIT: never)."""
        return False

    def conflict(self, tx: Txn, held: int) -> None:
        """A lock found held by word ``held``: return to wait, or abort."""
        if not self.may_wait(tx.ts, held):
            raise Abort("lock")

    # ================================================================ one attempt
    def attempt(self, tx: Txn, owner: int):
        # Stage timers as RCC's (module doc): each record's lock call is one ``lock``;
        # the body's CPU, the commit's CPU and the READ before a one-sided lock are in
        # no timer, and ``read`` is never timed.
        spec = tx.spec
        tx.owner = owner
        tx.ts = self.timestamp(tx, owner)
        yield from self.run_body(tx)
        recs, writes = yield from self.commit_sets(tx)
        for r in writes:
            if not r.locked:
                yield from self.timed(tx, "lock", self.lock_record(tx, r, True))
        yield from self.log_writes(tx, writes)
        if spec.phase_ns[3]:
            yield tx.ep.compute(spec.phase_ns[3])
        reads = [r for r in recs if r.locked and r.new is None]
        release = self.unlock(tx, reads, wait=not self.cfg.passive_ack)
        if self.how("release") == "one_sided":
            # RCC's one-sided commit releases the read locks before the write-back
            # (release_reads_w_rdma, then write_back_w_rdma); its RPC commit after it.
            yield from self.timed(tx, "release", release)
            yield from self.timed(tx, "commit", self.commit_writes(tx, writes))
        else:
            yield from self.timed(tx, "commit", self.commit_writes(tx, writes))
            yield from self.timed(tx, "release", release)

    def read_records(self, tx: Txn, todo: list[Rec]):
        # RCC locks records one at a time, as the transaction touches them.
        for r in todo:
            yield from self.timed(tx, "lock", self.lock_record(tx, r, r.for_update))

    def release(self, tx: Txn):
        # After an abort, RCC's release_reads then release_writes (nowait_rdma.cc,
        # waitdie_rdma.cc: the read and write sets hold the records locked for reading
        # and for writing): each posts signaled unlock WRITEs, or a release RPC whose
        # handler sends an empty reply, and yields until they complete. Passive ACK does
        # not cover them.
        held = [r for r in tx.recs.values() if r.locked]
        yield from self.unlock(tx, [r for r in held if not r.for_update], wait=True)
        yield from self.unlock(tx, [r for r in held if r.for_update], wait=True)

    # ================================================================ locking
    def lock_record(self, tx: Txn, r: Rec, write: bool):
        """Lock ``r`` exclusively and read it (seq and value into ``r``)."""
        word = (tx.ts << LOCK_SHIFT) | (1 if write else 0)
        store = self.store
        if self.by_cpu(tx, r.node):
            # the CPU's CAS on the lock word (WAIT-DIE polls it again while it waits)
            yield from self.access.lock_local(tx, r, word, self.conflict)
            r.locked = True
            _, r.version, r.value = store.read_local(r.node, r.table, r.slot)
            return
        self.access.lookup(tx)
        vs = store.tables[r.table].value_size
        if self.how("lock") == "one_sided":
            A = self.access
            yield from self.untimed(tx, A.index_read(tx, r))
            while True:
                cas = A.cas_wr(tx, r, 0, 0, word, ("cas", r))
                rd = A.read_wr(tx, r, 0, store.rsize[r.table], r)
                if self.batch:
                    w = yield from A.round_trip(tx, [(r.node, [cas, rd])])
                    old = w.results[("cas", r)].data
                    raw = w.results[r].data
                else:
                    w = yield from A.round_trip(tx, [(r.node, [cas])])
                    old = w.results[("cas", r)].data
                    if old == 0:
                        w = yield from A.round_trip(tx, [(r.node, [rd])])
                        raw = w.results[r].data
                if old == 0:
                    _, r.version, r.value = parse_record(raw, vs)
                    break
                self.conflict(tx, old)
                yield self.sim.timeout(0.0)   # yield_next, then CAS again (remote spin)
        else:
            w = yield from self.access.round_trip(
                tx, calls=[(r.node, H_LOCK, (r.table, r.slot, word), KEY_BYTES + 8)])
            ok, held, r.version, r.value = w.replies[0]
            if not ok:
                # The owner refused (NO_WAIT, or a WAIT-DIE requester younger than the
                # holder); a WAIT-DIE waiter is answered only once it holds the lock.
                self.conflict(tx, held)
                raise Abort("lock")
        r.locked = True

    def commit_writes(self, tx: Txn, writes: list[Rec]):
        """Install every written record (seq + 1, value) and unlock it."""
        store = self.store
        pa = self.cfg.passive_ack
        remote = []
        for r in writes:
            if self.by_cpu(tx, r.node):
                store.install_local(r.node, r.table, r.slot, r.version + 1, r.new)
                store.unlock_local(r.node, r.table, r.slot)
                r.locked = False
                self.access.local_cpu(tx)
                self.wake(r.node)
            else:
                remote.append(r)
        if not remote:
            if not pa:
                self.empty_wait(tx)
            return
        A = self.access
        if self.how("commit") == "one_sided":
            posts = []
            for r in remote:
                wv = A.write_wr(r, 8, pack_u64(r.version + 1) + r.new, False)
                wu = A.write_wr(r, 0, ZERO8, not pa, r)
                r.locked = False
                if pa:
                    A.post_nowait(tx, r.node, [wv, wu])
                else:
                    posts.append((r.node, [wv, wu]))
            if posts:
                yield from A.round_trip(tx, posts)
        else:
            calls = []
            for n, rs in self.group(remote).items():
                items = [(r.table, r.slot, r.version + 1, r.new) for r in rs]
                ln = sum(KEY_BYTES + VER_BYTES + len(r.new) for r in rs)
                for r in rs:
                    r.locked = False
                if pa:
                    A.send_nowait(tx, n, H_COMMIT, items, ln)
                else:
                    calls.append((n, H_COMMIT, items, ln))
            if calls:
                yield from A.round_trip(tx, calls=calls)

    def unlock(self, tx: Txn, recs: list[Rec], wait: bool):
        """Unlock ``recs`` (``release`` stage verbs); ``wait`` for the acknowledgements
        (one round trip) or post them unsignaled (no reply)."""
        remote = self.access.unlock_local(tx, recs, self.unlock_mine)
        if not remote:
            if wait:
                self.empty_wait(tx)
            return
        A = self.access
        if self.how("release") == "one_sided":
            posts = [(r.node, [A.write_wr(r, 0, ZERO8, wait, r)]) for r in remote]
            if wait:
                yield from A.round_trip(tx, posts)
            else:
                for n, wrs in posts:
                    A.post_nowait(tx, n, wrs)
        else:
            calls = [(n, H_RELEASE, [(r.table, r.slot) for r in rs], len(rs) * KEY_BYTES)
                     for n, rs in self.group(remote).items()]
            if wait:
                yield from A.round_trip(tx, calls=calls)
            else:
                for c in calls:
                    A.send_nowait(tx, *c)

    # ================================================================ owner side
    def unlock_mine(self, r: Rec) -> None:
        """The coordinator's CPU unlocks a record of its own node."""
        self.store.unlock_local(r.node, r.table, r.slot)
        self.wake(r.node)

    def wake(self, node: int) -> None:
        """A lock of ``node`` was released by its CPU: parked requests may go on."""
        if self._waiters.get(node):
            self.check_waiters(node)

    def check_waiters(self, node: int) -> None:
        """Hook of WAIT-DIE (NO_WAIT parks nothing)."""

    def register(self, ep: Endpoint) -> None:
        self.repl.register(ep)
        store = self.store
        node = ep.node
        op = self.costs.record_op
        vs = {t.id: t.value_size for t in store.tables.values()}

        def lock(src, payload):
            table, slot, word = payload
            old = store.lock_local(node, table, slot, word)
            if old == 0:
                _, ver, val = store.read_local(node, table, slot)
                return (True, 0, ver, val), 1 + HEADER + vs[table], op
            if self.may_wait(word >> LOCK_SHIFT, old):
                self.park(ep, ep.defer(), table, slot, word)
                return None, 0, op
            return (False, old, 0, b""), 1, op

        def commit(src, items):
            for table, slot, ver, val in items:
                store.install_local(node, table, slot, ver, val)
                store.unlock_local(node, table, slot)
            self.wake(node)
            return True, 1, op * len(items)

        ep.register(H_LOCK, lock)
        ep.register(H_COMMIT, commit)
        ep.register(H_RELEASE, self.release_handler(node))

    def release_handler(self, node: int):
        """The release RPC's handler on ``node``: unlock the records, let parked lock
        requests go on, acknowledge."""
        store = self.store
        op = self.costs.record_op

        def release(src, items):
            for table, slot in items:
                store.unlock_local(node, table, slot)
            self.wake(node)
            return True, 1, op * len(items)

        return release

    def park(self, ep: Endpoint, token, table: int, slot: int, word: int) -> None:
        """Hook of WAIT-DIE: keep a lock request until the lock is free."""
        raise NotImplementedError

