"""SUNDIAL as RCC runs it (``src/rtx/sundial_rdma.*``): leases, WAIT-DIE write locks.

Scope
    Every record version carries a logical lease ``[wts, rts]``: it was written at
    ``wts`` and may be read by any transaction whose commit timestamp lies in the lease.
    A transaction reads records without locking them, write-locks the records it will
    write as its body first touches them (one at a time), and computes its commit
    timestamp ``cts = max(wts of every version read, rts + 1 of every record locked)``.
    Before committing it renews the lease of each record it read but did not lock: one
    record at a time when the body takes up its value (:meth:`System.load_read`, as
    RCC's SmallBank and YCSB bodies call ``load_read`` after their accesses: only a
    record whose ``rts`` seen at the read lies below ``cts``), then all of them again
    in :meth:`System.prepare` when a stage is one-sided and the body calls
    ``Txn.prepare`` (RCC's YCSB, before its ``usleep``), and at commit those not covered
    at the final ``cts``: the version must still be current (same ``wts``) and, when
    ``cts`` lies beyond its lease, not locked by a writer; the lease is then extended to
    ``cts``. Written records get
    ``wts = rts = cts``. The history is serializable in ``cts`` order.

    Record (:data:`SUNDIAL_LAYOUT`, 24-B header): lock word (8 B: the attempt's timestamp,
    0 = free), lease word (8 B: ``wts`` in bits 32-62, ``rts`` in bits 0-30, RCC
    ``rwlock.hpp`` ``WTS``/``RTS``), committed-write count (8 B: the simulator's addition,
    the version number :mod:`protocols.txn.history` needs; it travels with the lease
    word and the value), value. Lock timestamp: the microsecond clock shifted left 26
    bits plus the coroutine's owner id, as :mod:`.nowait` (RCC's ``(us << 11) + node x
    200 + thread x 20 + coroutine + 1`` collides beyond 10 nodes); a retry keeps its
    transaction's first timestamp (see below). ``cts`` is RCC's ``commit_id_``: a 31-bit logical
    counter per coroutine that RCC never resets, so it carries over to the coroutine's
    next transaction (its leases only grow).

    A lock found held (RCC's default, ``SUNDIAL_NOWAIT`` off): a requester older than the
    holder (smaller timestamp) waits, a younger one aborts (cause ``lock``). One-sided:
    it yields to the ready coroutines and posts CAS + READ again (remote spinning); RPC:
    the owner parks the request (RCC's ``SUNDIAL_REQ_LOCK_READ`` waiter of the global
    lock manager) and re-checks it as :mod:`.waitdie` does; local: the coordinator polls
    the lock every ``waiter_poll`` [ns]. Waits go only from older to younger: no cycle.

    ===========  ==============================================  ========================
    stage        one-sided                                       RPC
    ===========  ==============================================  ========================
    ``read``     READ lock + lease + count + value, then READ    a read RPC per record
                 lock + lease (16 B) to confirm ``wts`` (abort   (lease, count, value)
                 ``validation`` if it changed): two round trips
    ``lock``     CAS(0 -> ts) + READ lease + count + value in    a lock RPC per record
                 one doorbell                                    (parked while it waits)
    ``renew``    READ lock + lease of the records renewed        one renew RPC per node
                 (one round trip: one record in ``load_read``,   for the records whose
                 all of them in ``prepare``); then, one record   ``rts < cts`` at read
                 after the other, per record whose ``rts <       time (others are
                 cts``: CAS(0 -> RENEWING | ts) + READ lease in  covered); one round trip
                 one doorbell (one round trip), then WRITE       (one record in
                 lease + WRITE 0 unsignaled (see ``renew_lock``  ``load_read``)
                 below; RCC: a plain WRITE of the lease word,
                 one round trip)
    ``log``      WRITE the log to each backup's ring             a log RPC per backup
    ``commit``   per locked record WRITE lease + count + value   one update RPC per node
                 and WRITE 0 to the lock, one doorbell, only     (install, unlock)
                 the last signaled; one round trip for all
    ``release``  after an abort, WRITE 0 to each lock held       one release RPC per node
    ===========  ==============================================  ========================

    Local records are read, locked, renewed and installed by the coordinator's CPU
    (unless the framework sends them through the NIC:
    :meth:`~protocols.txn.driver.TxnSystem.by_cpu`). A record the body read without
    ``for_update`` and then wrote is locked at commit (the ``lock`` stage's verbs) and
    aborts with ``validation`` if its ``wts`` changed since the read; a record written
    without a read is locked (and read) at commit. A record locked but not written keeps
    its value and version; its lease is extended to ``cts`` at commit (RCC writes every
    write-set record back with ``wts = rts = cts``; without a new value this simulator
    keeps the version, so the history shows no write).

Deviations from RCC's code, and why
    - A retry keeps its transaction's first lock timestamp (RCC's ``begin`` takes a
      new one per attempt): an aborted transaction grows older and is not starved by
      WAIT-DIE, as in :mod:`.waitdie`.
    - Stage latencies: ``read`` and ``lock`` are the time of the body's remote reads and
      locks (RCC's ``read_lat`` and ``lock`` timers around each access); SUNDIAL holds
      no read locks, so ``release`` only runs after an abort and a committing
      transaction spends nothing in it.
    - One-sided renewal (``renew_lock``, on unless the framework is RCC's): RCC's
      code (branch ``hybrid-cc``) READs the header and then WRITEs the new lease word.
      A writer whose CAS + READ lands between the two sees the old ``rts``, commits
      below the extended lease, and the history can have a write-skew cycle (the
      checker finds one on small YCSB runs; RCC's branch ``fix_sundial_atomic`` swaps
      the WRITE for a CAS on the lease word, which has the same window, since the lock
      is another word). So the extension is made under a brief lock whose word has the
      ``RENEWING`` bit: a writer finds it held and waits (the bit makes it younger than
      any requester), a renewer finding another renewer's lock tries again, one finding
      a writer's lock applies RCC's rule. The round trips are RCC's (the WRITE and the
      unlock go unsignaled); three more work requests per renewed record.
      ``renew_lock: false`` keeps RCC's plain WRITE, and so does ``framework: rcc``
      unless ``renew_lock`` is set: that framework is RCC's code as it ran for its
      paper, so its reproductions measure RCC's verbs.

Not modelled: two-phase commit (RCC forces ``TX_TWO_PHASE_COMMIT_STYLE`` 0), the
record-offset lookup (a warm location cache: RCC's scripts build with ``RDMA_CACHE 1``).

Stages timed as RCC's timers time them (``sundial_rdma.*``; metrics ``lat_<stage>_us`` per
committed transaction and ``lat_<stage>_call_us`` per call): ``read`` and ``lock`` one
call per record (the one-sided READ before a lock is in no timer), ``renew`` one call
per record renewed in ``load_read`` and one per ``prepare`` or commit that renews any,
``log`` for a transaction that writes (its acknowledgement in no timer), ``commit``,
``release`` (after an abort).
"""
from __future__ import annotations

import struct

from ..rpc import Endpoint
from . import nowait, waitdie
from .access import Access
from .api import Abort, Rec, Txn
from .driver import TxnSystem
from .replication import KEY_BYTES, Replication
from .store import Layout

H_READ, H_LOCK, H_RENEW, H_UPDATE, H_RELEASE = 21, 22, 23, 24, 25
MASK31 = 0x7FFFFFFF
RENEWING = 1 << 63                     # lock-word flag of a renewer's brief lock
LOCK_HDR = 16                          # lock + lease: what RCC's header READs fetch


def _current(raw: bytes, value_size: int) -> bytes:
    """The committed value in a record's bytes (after the 24-B header)."""
    return raw[24:24 + value_size]


SUNDIAL_LAYOUT = Layout("sundial", header=24, current=_current)
_U64 = struct.Struct("<Q")
_HDR = struct.Struct("<QQQ")
ZERO8 = bytes(8)


def layout(cfg):
    """The record layout: lock word, lease word, committed-write count, value."""
    return SUNDIAL_LAYOUT


def lease(wts: int, rts: int) -> int:
    """The lease word of ``[wts, rts]`` (31 bits each)."""
    return ((wts & MASK31) << 32) | (rts & MASK31)


def wts_of(word: int) -> int:
    """``wts`` of a lease word (RCC ``WTS``)."""
    return (word >> 32) & MASK31


def rts_of(word: int) -> int:
    """``rts`` of a lease word (RCC ``RTS``)."""
    return word & MASK31


def renewable(lock: int, word: int, wts: int, cts: int) -> bool:
    """RCC's renewal rule: the version read (``wts``) is still current and, if ``cts``
    lies beyond its lease, no writer holds the record."""
    return wts_of(word) == wts and not (cts > rts_of(word) and lock != 0)


def _leased(recs) -> list[Rec]:
    """The records of ``recs`` whose lease a commit renews: read and not locked."""
    return [r for r in recs if not r.locked and r.version >= 0]


class System(TxnSystem):
    """SUNDIAL over the driver (see module doc)."""

    STAGES = ("read", "lock", "renew", "log", "commit", "release")

    # Shared with NO_WAIT / WAIT-DIE: first-attempt timestamps and the
    # owner-side parking of RPC lock requests (re-checked by check_waiters below).
    timestamp = nowait.System.timestamp
    wake = nowait.System.wake
    _unlock_mine = nowait.System.unlock_mine
    release_handler = nowait.System.release_handler
    park = waitdie.System.park
    _tick = waitdie.System._tick

    def setup(self) -> None:
        cfg = self.cfg
        self.access = Access(self)
        self.repl = Replication(self, cfg.log_to, cfg.reclaim_every,
                                ack=not cfg.passive_ack)
        self._first: dict[int, tuple] = {}    # owner -> (spec, ts) of its first attempt
        self._waiters: dict[int, list] = {}    # node -> parked lock requests
        self._cts: dict[int, int] = {}         # owner -> commit_id_ (see module doc)
        self.renew_lock = cfg.option("renew_lock", True)
        # RCC builds SUNDIAL's prepare() only when a stage is one-sided
        self._prepares = any(how != "rpc" for how in cfg.stages.values())
        self.vs = {t.id: t.value_size for t in self.store.tables.values()}

    # ================================================================ record bytes
    def _off(self, r: Rec) -> int:
        return self.store.offset(r.table, r.slot)

    def _local(self, node: int, table: int, slot: int) -> tuple[int, int, int, bytes]:
        """(lock, lease, count, value) of a record, read by its node's CPU."""
        raw = self.store.mrs[node].read(self.store.offset(table, slot),
                                        self.store.rsize[table])
        return (*_HDR.unpack_from(raw), raw[24:24 + self.vs[table]])

    def _take(self, tx: Txn, r: Rec, word: int, count: int, value: bytes) -> None:
        """Keep what a read or lock returned and raise ``cts`` by it."""
        r.aux = (wts_of(word), rts_of(word))
        r.version = count
        r.value = value
        floor = r.aux[1] + 1 if r.locked else r.aux[0]
        self._cts[tx.owner] = max(self._cts.get(tx.owner, 0), floor)

    # ================================================================ one attempt
    def attempt(self, tx: Txn, owner: int):
        tx.owner = owner
        tx.ts = self.timestamp(tx, owner)
        yield from self.run_body(tx)
        recs, writes = yield from self.commit_sets(tx)
        for r in writes:
            if not r.locked:
                yield from self.timed(tx, "lock", self.lock_late(tx, r))
        reads = _leased(recs)
        if tx.state is not None and tx.state[0] == self._cts.get(owner, 0):
            # covered at this commit timestamp by load_read or prepare(): only later
            # reads left
            reads = [r for r in reads if id(r) not in tx.state[1]]
        if reads:
            yield from self.timed(tx, "renew", self.renew(tx, reads))
        yield from self.log_writes(tx, writes)
        yield from self.timed(tx, "commit", self.commit_locked(
            tx, [r for r in recs if r.locked]))

    def prepare(self, tx: Txn):
        """Renew the leases of the records read so far (not locked) to the commit
        timestamp now, before the body's computation, as RCC's YCSB does when any stage
        is one-sided (its ``prepare()``, built only then, comes after its ``load_read``
        calls and before its ``usleep``, and its commit does not renew again);
        ``tx.state`` keeps that timestamp and those records for the commit."""
        if not self._prepares:
            return
        reads = _leased(tx.recs.values())
        if reads:
            yield from self.timed(tx, "renew", self.renew(tx, reads))
        tx.state = (self._cts.get(tx.owner, 0), {id(r) for r in reads})

    def load_read(self, tx: Txn, r: Rec):
        """RCC's ``load_read``: renew the lease of ``r`` (read, not locked) to the commit
        timestamp now if the ``rts`` its read saw lies below it, this record alone (a
        renew RPC, or READ then extend one-sided); ``r`` is then covered at that
        timestamp (``tx.state``), and the commit renews it only if the timestamp moves."""
        if r.locked or r.version < 0:
            return
        cts = self._cts.get(tx.owner, 0)
        if r.aux[1] < cts:
            yield from self.timed(tx, "renew", self.renew(tx, [r]))
        if tx.state is None or tx.state[0] != cts:
            tx.state = (cts, set())
        tx.state[1].add(id(r))

    def read_records(self, tx: Txn, todo: list[Rec]):
        # RCC reads and locks records one at a time, as the transaction touches them.
        for r in todo:
            if r.for_update:
                yield from self.timed(tx, "lock", self.lock_record(tx, r))
            else:
                yield from self.timed(tx, "read", self.read_record(tx, r))

    def release(self, tx: Txn):
        yield from self.timed(tx, "release", self.unlock(
            tx, [r for r in tx.recs.values() if r.locked]))

    # ================================================================ read, lock
    def read_record(self, tx: Txn, r: Rec):
        """Read ``r`` without locking it (its lease, count and value into ``r``)."""
        ep = tx.ep
        if self.by_cpu(tx, r.node):
            yield ep.compute(self.costs.local_access)
            _, word, count, value = self._local(r.node, r.table, r.slot)
        elif self.how("read") == "one_sided":
            A = self.access
            A.lookup(tx)
            w = yield from A.round_trip(tx, [(r.node, [A.read_wr(
                tx, r, 0, self.store.rsize[r.table], r)])])
            raw = w.results[r].data
            _, word, count = _HDR.unpack_from(raw)
            value = raw[24:24 + self.vs[r.table]]
            # RCC reads the header again: the version is taken only if wts held still.
            hd = A.read_wr(tx, r, 0, LOCK_HDR, r)
            w = yield from A.round_trip(tx, [(r.node, [hd])])
            if wts_of(_U64.unpack_from(w.results[r].data, 8)[0]) != wts_of(word):
                raise Abort("validation")
        else:
            w = yield from self.access.round_trip(
                tx, calls=[(r.node, H_READ, (r.table, r.slot), KEY_BYTES)])
            word, count, value = w.replies[0]
        self._take(tx, r, word, count, value)

    def conflict(self, tx: Txn, held: int) -> None:
        """A lock found held by timestamp ``held``: an older requester waits (returns),
        a younger one aborts."""
        if tx.ts >= held:
            raise Abort("lock")

    def lock_record(self, tx: Txn, r: Rec):
        """Write-lock ``r`` and read it (lease, count and value into ``r``)."""
        store = self.store
        word = tx.ts
        if self.by_cpu(tx, r.node):
            yield from self.access.lock_local(tx, r, word, self.conflict)
            _, lw, count, value = self._local(r.node, r.table, r.slot)
        elif self.how("lock") == "one_sided":
            A = self.access
            A.lookup(tx)
            # RCC's READ before the lock is in no timer (its remote_write)
            yield from self.untimed(tx, A.index_read(tx, r))
            while True:
                cas = A.cas_wr(tx, r, 0, 0, word, ("cas", r))
                rd = A.read_wr(tx, r, 8, store.rsize[r.table] - 8, r)
                w = yield from A.round_trip(tx, [(r.node, [cas, rd])])
                old = w.results[("cas", r)].data
                if old == 0:
                    raw = w.results[r].data
                    lw, count = struct.unpack_from("<QQ", raw)
                    value = raw[16:16 + self.vs[r.table]]
                    break
                self.conflict(tx, old)
                yield self.sim.timeout(0.0)   # yield_next, then CAS again (remote spin)
        else:
            w = yield from self.access.round_trip(
                tx, calls=[(r.node, H_LOCK, (r.table, r.slot, word), KEY_BYTES + 8)])
            ok, lw, count, value = w.replies[0]
            if not ok:
                raise Abort("lock")
        r.locked = True
        self._take(tx, r, lw, count, value)

    def lock_late(self, tx: Txn, r: Rec):
        """Lock a record written but not locked by the body; a record read before must
        still hold the version read."""
        seen = r.aux[0] if r.version >= 0 else None
        yield from self.lock_record(tx, r)
        if seen is not None and r.aux[0] != seen:
            raise Abort("validation")

    # ================================================================ renew
    def renew(self, tx: Txn, reads: list[Rec]):
        """Renew the leases of ``reads`` (read, not locked) to ``cts``; ``Abort
        ("validation")`` if one cannot be (see :func:`renewable`)."""
        cts = self._cts.get(tx.owner, 0)
        mrs = self.store.mrs
        remote = []
        for r in reads:
            if not self.by_cpu(tx, r.node):
                remote.append(r)
                continue
            self.access.local_cpu(tx)
            off = self._off(r)
            mr = mrs[r.node]
            lock, word = mr.read_u64(off), mr.read_u64(off + 8)
            if not renewable(lock, word, r.aux[0], cts):
                raise Abort("validation")
            if rts_of(word) < cts:
                mrs[r.node].write_u64(off + 8, lease(wts_of(word), cts))
        if not remote:
            return
        A = self.access
        if self.how("renew") == "one_sided":
            w = yield from A.round_trip(tx, [(r.node, [A.read_wr(tx, r, 0, LOCK_HDR, r)])
                                             for r in remote])
            for r in remote:
                lock, word = struct.unpack_from("<QQ", w.results[r].data)
                if not renewable(lock, word, r.aux[0], cts):
                    raise Abort("validation")
                if rts_of(word) < cts:
                    yield from self.extend(tx, r, cts, word)
        else:
            due = [r for r in remote if r.aux[1] < cts]
            calls = [(n, H_RENEW, [(r.table, r.slot, r.aux[0], cts) for r in rs],
                      len(rs) * (KEY_BYTES + 8)) for n, rs in self.group(due).items()]
            if calls:
                w = yield from A.round_trip(tx, calls=calls)
                if not all(all(v) for v in w.replies.values()):
                    raise Abort("validation")

    def extend(self, tx: Txn, r: Rec, cts: int, word: int):
        """Extend the lease of remote ``r`` (lease word ``word`` as just READ) to
        ``cts`` with one-sided verbs.

        ``renew_lock``: under a brief lock, so that no writer can lock the
        record between the check and the extension and commit below the new ``rts``:
        CAS(0 -> RENEWING | ts) + READ of the lease word in one doorbell; then WRITE the
        lease and WRITE 0 to the lock, unsignaled (the lock keeps writers out until
        they land). A record held by another renewer is tried again after a yield; one
        held by a writer is judged by RCC's rule on the lease read. Otherwise RCC's
        plain WRITE of the lease word, waited for before the next record."""
        A = self.access
        if not self.renew_lock:
            wr = A.write_wr(r, 8, _U64.pack(lease(wts_of(word), cts)), True, r)
            yield from A.round_trip(tx, [(r.node, [wr])])
            return
        mine = RENEWING | tx.ts
        while True:
            cas = A.cas_wr(tx, r, 0, 0, mine, ("cas", r))
            rd = A.read_wr(tx, r, 8, 8, r)
            w = yield from A.round_trip(tx, [(r.node, [cas, rd])])
            old = w.results[("cas", r)].data
            word = _U64.unpack_from(w.results[r].data)[0]
            if old == 0:
                break
            if not old & RENEWING:
                if not renewable(old, word, r.aux[0], cts):
                    raise Abort("validation")
                return       # a writer holds it, but the lease already covers cts
            yield self.sim.timeout(0.0)   # yield_next, then try again
        unlock = A.write_wr(r, 0, ZERO8, False)
        if wts_of(word) != r.aux[0]:
            A.post_nowait(tx, r.node, [unlock])
            raise Abort("validation")
        new = lease(wts_of(word), max(rts_of(word), cts))
        A.post_nowait(tx, r.node, [A.write_wr(r, 8, _U64.pack(new), False), unlock])

    # ================================================================ commit, release
    def commit_locked(self, tx: Txn, locked: list[Rec]):
        """Install every locked record (written: ``wts = rts = cts``, count + 1, the new
        value; else the lease extended to ``cts``) and unlock it."""
        if tx.spec.phase_ns[3]:
            yield tx.ep.compute(tx.spec.phase_ns[3])
        cts = self._cts.get(tx.owner, 0)
        pa = self.cfg.passive_ack
        remote = []
        for r in locked:
            if r.new is not None:
                data = _HDR.pack(0, lease(cts, cts), r.version + 1)[8:] + r.new
            else:
                data = _U64.pack(lease(r.aux[0], max(r.aux[1], cts)))
            r.locked = False
            if self.by_cpu(tx, r.node):
                mr = self.store.mrs[r.node]
                mr.write(self._off(r) + 8, data)
                mr.write_u64(self._off(r), 0)
                self.access.local_cpu(tx)
                self.wake(r.node)
            else:
                remote.append((r, data))
        if not remote:
            return
        A = self.access
        if self.how("commit") == "one_sided":
            posts = []
            for r, data in remote:
                wrs = [A.write_wr(r, 8, data, False), A.write_wr(r, 0, ZERO8, not pa, r)]
                if pa:
                    A.post_nowait(tx, r.node, wrs)
                else:
                    posts.append((r.node, wrs))
            if posts:
                yield from A.round_trip(tx, posts)
        else:
            by_node: dict[int, list] = {}
            for r, data in remote:
                by_node.setdefault(r.node, []).append((r.table, r.slot, data))
            calls = [(n, H_UPDATE, items, sum(KEY_BYTES + len(d) for _, _, d in items))
                     for n, items in by_node.items()]
            if pa:
                for c in calls:
                    A.send_nowait(tx, *c)
            else:
                yield from A.round_trip(tx, calls=calls)

    def unlock(self, tx: Txn, recs: list[Rec]):
        """After an abort: unlock ``recs`` (``release`` stage verbs) and wait for the
        acknowledgements (RCC's ``release_writes`` yields for them)."""
        remote = self.access.unlock_local(tx, recs, self._unlock_mine)
        if remote:
            A = self.access
            if self.how("release") == "one_sided":
                yield from A.round_trip(tx, [(r.node, [A.write_wr(r, 0, ZERO8, True, r)])
                                             for r in remote])
            else:
                yield from A.round_trip(tx, calls=[
                    (n, H_RELEASE, [(r.table, r.slot) for r in rs], len(rs) * KEY_BYTES)
                    for n, rs in self.group(remote).items()])

    # ================================================================ owner side
    def try_lock(self, node: int, table: int, slot: int, word: int):
        """The owner's CPU tries to lock a record for the requester of ``word``:
        ``(reply, length)`` to grant or refuse it, None while it may wait (the holder
        is younger)."""
        old = self.store.lock_local(node, table, slot, word)
        if old == 0:
            _, lw, count, value = self._local(node, table, slot)
            return (True, lw, count, value), 17 + self.vs[table]
        if word < old:
            return None
        return (False, 0, 0, b""), 1

    def check_waiters(self, node: int) -> None:
        """Re-check every parked lock request of ``node`` in arrival order (RCC
        ``GlobalLockManager::check_to_notify``): grant, keep or refuse it."""
        keep = []
        for ep, token, table, slot, word in self._waiters.get(node, ()):
            ep.thread.reserve(self.sim.now, self.costs.local_access)
            answer = self.try_lock(node, table, slot, word)
            if answer is None:
                keep.append((ep, token, table, slot, word))
            else:
                ep.reply_later(token, *answer, self.costs.record_op)
        self._waiters[node] = keep

    def register(self, ep: Endpoint) -> None:
        self.repl.register(ep)
        store = self.store
        node = ep.node
        mr = store.mrs[node]
        op = self.costs.record_op
        vs = self.vs

        def read(src, payload):
            table, slot = payload
            _, word, count, value = self._local(node, table, slot)
            return (word, count, value), 17 + vs[table], op

        def lock(src, payload):
            answer = self.try_lock(node, *payload)
            if answer is None:
                self.park(ep, ep.defer(), *payload)
                return None, 0, op
            return (*answer, op)

        def renew(src, items):
            out = []
            for table, slot, wts, cts in items:
                off = store.offset(table, slot)
                lk, word = mr.read_u64(off), mr.read_u64(off + 8)
                ok = renewable(lk, word, wts, cts)
                if ok and rts_of(word) < cts:
                    mr.write_u64(off + 8, lease(wts, cts))
                out.append(ok)
            return out, len(out), op * len(items)

        def update(src, items):
            for table, slot, data in items:
                off = store.offset(table, slot)
                mr.write(off + 8, data)
                mr.write_u64(off, 0)
            self.wake(node)
            return True, 1, op * len(items)

        for hid, fn in ((H_READ, read), (H_LOCK, lock), (H_RENEW, renew),
                        (H_UPDATE, update), (H_RELEASE, self.release_handler(node))):
            ep.register(hid, fn)
