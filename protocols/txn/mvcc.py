"""MVCC (multi-version timestamp ordering), as RCC runs it (``src/rtx/mvcc_rdma.*``).

Scope
    Every attempt takes a timestamp ``ts``. A read returns the newest version whose
    write timestamp (wts) is below ``ts`` and raises the record's read timestamp (rts)
    to ``ts``; a write locks the record, refuses to write behind a later read or write
    (rts > ts or a wts > ts), and at commit installs its value as a new version with
    wts = ``ts`` in the slot holding the oldest version. A lock found held aborts at once
    (RCC's ``MVCC_NOWAIT``). Reads take no lock, so nothing is released for them.

    Record (:func:`layout`, ``V`` = scenario key ``protocol.versions``, RCC's
    ``MVCC_VERSION_NUM`` 4)::

        lock (8 B) | rts (8 B) | wts[0..V-1] (8 B each) | V x [count (8 B) | value]

    The lock word is the holder's timestamp (0: free). ``count`` is the number of
    committed writes of the slot's version, kept in-band for the history checker
    (:mod:`protocols.txn.history`): 8 B per slot more than RCC's record, which READs and
    the commit WRITE carry. A slot whose wts is 0 is empty, except slot 0: zeroed memory
    is the loaded state, one version (the initial value, count 0) at wts 0, below every
    timestamp (RCC's loader writes its headers instead).

    Timestamp: a logical counter per coroutine, ``(++counter << 26) | owner`` with
    ``owner = node << 16 | thread << 10 | coroutine + 1`` (unique for up to 1,024 nodes;
    RCC's ``(++cnt_timer << 10) + node x 80 + thread x 10 + coroutine + 1`` collides
    beyond 12 nodes). A write that aborts on a later timestamp (a later rts, wts or lock
    holder) sets the counter to that timestamp's, so the retry's timestamp passes it, as
    RCC's ``cnt_timer = ts >> 10``; a read abort leaves it alone, as in RCC.

    ===========  ===========================================  ============================
    stage        one-sided                                    RPC
    ===========  ===========================================  ============================
    ``read``     READ header + all slots; CAS rts up to ts    a read RPC: the owner checks,
                 (repeated while the CAS finds another rts    raises rts, replies count +
                 below ts) + READ header in one doorbell: 2    value: 1 round trip
                 round trips
    ``lock``     READ header (check rts, wts); CAS lock       a lock-read RPC: the owner
                 (0 -> ts) + READ the rest in one doorbell,   checks, locks, re-checks and
                 re-check rts, wts: 2 round trips             replies the newest version
                                                              (the whole record when commit
                                                              or release is one-sided)
    ``log``      WRITE the log to each backup's ring          a log RPC per backup
    ``commit``   per written record WRITE wts array + slots,  one update RPC per node
                 WRITE 0 to the lock, one doorbell, only the  (install, unlock)
                 last signaled
    ``release``  WRITE 0 to each lock                         one release RPC per node
    ===========  ===========================================  ============================

    Read checks (RCC ``check_read``): abort (cause ``lock``) if an older writer holds the
    lock, (``version_slot``) if no version is below ``ts``, (``validation``) if the
    confirming header READ shows another version below ``ts``, the chosen slot rewritten
    or an older writer holding the lock. Write checks (``check_write``): abort
    (``timestamp``) on rts > ts or a wts > ts, before and after locking; (``lock``) if
    the lock is held. A record read for update takes the lock path (RCC's ``write``); a
    record read and later written, or written without a read, is locked at commit.
    Records of the coordinator's node are read, locked, installed and released by its
    CPU (unless the framework sends them through the NIC:
    :meth:`~protocols.txn.driver.TxnSystem.by_cpu`), and the owner of an RPC does the
    same work (:class:`_Owner`).

Deviations from RCC's code, and why
    - One-sided read: RCC READs the header again and then CASes rts, but never posts
      that CAS (``lock_req_->set_lock_meta`` without ``post_reqs``; rts stays unchanged
      and the read costs 2 round trips). Here the CAS goes out with the confirming READ
      in one doorbell: rts must be raised before the confirmation, or a writer older
      than ``ts`` that locks between the two sees the old rts and installs a version the
      read should have returned (not serializable). Round trips stay RCC's 2.
    - RCC's code reaches its own node's records through the NIC too (loopback QPs, RPCs
      to itself); here that takes ``framework: rcc`` (``SoftwareCosts.loopback``),
      without which the coordinator's CPU does them.
    - A record read for update and not written is unlocked at commit (``release``
      stage); RCC installs its unchanged value as a new version.
    - An aborted attempt waits for its release as RCC's ``release_writes`` does.
    - RCC's log is a log WRITE then a log-ack message with a wait, as the shared
      :mod:`.replication` does (without ``passive_ack``).

Stages timed as RCC's timers time them (``mvcc_rdma.cc``; metrics ``lat_<stage>_us`` per
committed transaction and ``lat_<stage>_call_us`` per call): ``read`` and ``lock`` one
call per record (each remote or local read or lock-read, in the body or at commit, with
its READs before), ``log`` for a transaction that writes (its acknowledgement in no
timer), ``commit``, ``release``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..rpc import Endpoint
from .access import Access
from .api import Abort, Rec, Txn
from .driver import TxnSystem
from .replication import KEY_BYTES, VER_BYTES, Replication
from .store import Layout, pack_u64

H_READ, H_LOCK, H_UPDATE, H_RELEASE = 21, 22, 23, 24
ZERO8 = bytes(8)
TS_SHIFT = 26        # timestamp = counter << TS_SHIFT | owner id
RTS = 8              # offset of rts in the record
WTS = 16             # offset of wts[0]
OK = "ok"            # status of an owner-side operation that succeeded
_U64 = struct.Struct("<Q")


def layout(cfg) -> Layout:
    """The record layout for ``cfg.option("versions")`` slots (see module doc)."""
    v = cfg.option("versions", 4)
    return Layout("mvcc", WTS + 8 * v, v, 8, current=current_value)


# ==================================================================== pure rules
def parse_header(raw: bytes, versions: int) -> tuple[int, int, tuple[int, ...]]:
    """(lock, rts, wts tuple) from a record's first ``16 + 8 x versions`` bytes."""
    words = struct.unpack_from(f"<{2 + versions}Q", raw)
    return words[0], words[1], words[2:]


def filled(wts: tuple[int, ...], i: int) -> bool:
    """Whether slot ``i`` holds a version (slot 0 always does: the loaded value)."""
    return i == 0 or wts[i] != 0


def read_slot(lock: int, wts: tuple[int, ...], ts: int) -> int:
    """RCC's ``check_read``: the slot of the newest version below ``ts``; -1 if an
    older writer holds the lock, -2 if no version is below ``ts``."""
    if lock != 0 and lock < ts:
        return -1
    pos, best = -2, -1
    for i, w in enumerate(wts):
        if w < ts and w > best and filled(wts, i):
            pos, best = i, w
    return pos


def write_conflict(rts: int, wts: tuple[int, ...], ts: int) -> int:
    """RCC's ``check_write``: the largest of rts and the wts above ``ts`` (0: none, the
    write may go on)."""
    return max([x for x in (rts, *wts) if x > ts], default=0)


def write_slots(wts: tuple[int, ...]) -> tuple[int, int]:
    """(newest, victim): the slot of the newest version and the slot a write overwrites
    (an empty one, else the oldest version's)."""
    newest = max((i for i in range(len(wts)) if filled(wts, i)), key=lambda i: wts[i])
    victim = min(range(len(wts)), key=lambda i: wts[i] if filled(wts, i) else -1)
    return newest, victim


def current_value(raw: bytes, value_size: int) -> bytes:
    """The newest committed value in a record's bytes (checks after a run)."""
    versions = (len(raw) - WTS) // (8 + 8 + -(-value_size // 8) * 8)
    _, _, wts = parse_header(raw, versions)
    newest, _ = write_slots(wts)
    return _slot(raw, versions, value_size, newest)[1]


def _slot_offset(versions: int, value_size: int, i: int) -> int:
    return WTS + 8 * versions + i * (8 + -(-value_size // 8) * 8)


def _slot(raw, versions: int, value_size: int, i: int) -> tuple[int, bytes]:
    """(count, value) of slot ``i`` in a record's bytes."""
    o = _slot_offset(versions, value_size, i)
    return _U64.unpack_from(raw, o)[0], bytes(raw[o + 8:o + 8 + value_size])


@dataclass
class _Held:
    """A record this attempt holds the lock of: the slot it will overwrite, the count
    it installs, and (for a one-sided commit) the record's bytes read under the lock."""

    victim: int
    install: int
    raw: bytearray | None = None


class _Owner:
    """The operations a record's node does with its CPU, atomically: the coordinator's
    own records and every RPC handler (RCC's local branches and ``*_rpc_handler``)."""

    def __init__(self, store, versions: int) -> None:
        self.store = store
        self.v = versions

    def header(self, node: int, table: int, slot: int):
        return parse_header(self.store.mrs[node].read(self.store.offset(table, slot),
                                                      WTS + 8 * self.v), self.v)

    def read(self, node: int, table: int, slot: int, ts: int) -> tuple:
        """(status, count, value): check, raise rts to ``ts``, read the version."""
        st = self.store
        lock, rts, wts = self.header(node, table, slot)
        pos = read_slot(lock, wts, ts)
        if pos < 0:
            return ("lock" if pos == -1 else "version_slot"), 0, b""
        off = st.offset(table, slot)
        if rts < ts:
            st.mrs[node].write_u64(off + RTS, ts)
        vs = st.tables[table].value_size
        raw = st.mrs[node].read(off, st.rsize[table])
        return (OK, *_slot(raw, self.v, vs, pos))

    def lock(self, node: int, table: int, slot: int, ts: int, whole: bool) -> tuple:
        """(status, jump, count, value, held): check, lock, check again; ``jump`` is the
        later timestamp a refused write passes; ``held.raw`` is the record if
        ``whole``."""
        st = self.store
        mr = st.mrs[node]
        off = st.offset(table, slot)
        lock, rts, wts = self.header(node, table, slot)
        later = write_conflict(rts, wts, ts)
        if later:
            return "timestamp", later, 0, b"", None
        if lock > ts:
            return "lock", lock, 0, b"", None
        if mr.cas(off, 0, ts) != 0:
            return "lock", 0, 0, b"", None
        # Nothing interleaves with the CPU: the checks above still hold under the lock.
        raw = mr.read(off, st.rsize[table])
        newest, victim = write_slots(wts)
        count, value = _slot(raw, self.v, st.tables[table].value_size, newest)
        return OK, 0, count, value, _Held(victim, count + 1,
                                          bytearray(raw) if whole else None)

    def install(self, node: int, table: int, slot: int, victim: int, count: int,
                ts: int, value: bytes) -> None:
        """Write the version (wts, count, value) into slot ``victim`` and unlock."""
        st = self.store
        mr = st.mrs[node]
        off = st.offset(table, slot)
        mr.write_u64(off + WTS + 8 * victim, ts)
        mr.write(off + _slot_offset(self.v, st.tables[table].value_size, victim),
                 pack_u64(count) + value)
        mr.write_u64(off, 0)

    def unlock(self, node: int, table: int, slot: int) -> None:
        self.store.mrs[node].write_u64(self.store.offset(table, slot), 0)


class System(TxnSystem):
    """MVCC over the driver (see module doc).

    With a history, ``installed[(table, key, count)]`` is the timestamp of the committed
    transaction that installed version ``count`` of a record, and ``reads`` lists
    ``(ts, table, key, count)`` of every committed read: a read never returns a version
    installed at a later timestamp."""

    STAGES = ("read", "lock", "log", "commit", "release")

    def setup(self) -> None:
        cfg = self.cfg
        self.v = cfg.option("versions", 4)
        self.access = Access(self)
        self.repl = Replication(self, cfg.log_to, cfg.reclaim_every,
                                ack=not cfg.passive_ack)
        self.owner = _Owner(self.store, self.v)
        self._clock: dict[int, int] = {}     # owner -> logical counter
        # the lock-read returns the whole record when a one-sided WRITE installs or
        # releases it (RCC's process_received_data_hybrid)
        self._whole = self.how("commit") == "one_sided" or \
            self.how("release") == "one_sided"
        self.installed: dict | None = {} if self.history is not None else None
        self.reads: list | None = [] if self.history is not None else None

    # ================================================================ timestamps
    def timestamp(self, owner: int) -> int:
        """The next timestamp of coroutine ``owner`` (one per attempt)."""
        c = self._clock.get(owner, 0) + 1
        self._clock[owner] = c
        return (c << TS_SHIFT) | owner

    def refuse(self, tx: Txn, cause: str, later: int = 0):
        """Abort with ``cause``; a write refused by a ``later`` timestamp moves the
        coroutine's counter to it first (its retry passes it)."""
        if later:
            self._clock[tx.owner] = max(self._clock[tx.owner], later >> TS_SHIFT)
        raise Abort(cause)

    # ================================================================ one attempt
    def attempt(self, tx: Txn, owner: int):
        spec = tx.spec
        tx.owner = owner
        tx.ts = self.timestamp(owner)
        ep = tx.ep
        yield from self.run_body(tx)
        recs, writes = yield from self.commit_sets(tx)
        for r in writes:
            if not r.locked:
                yield from self.lock_record(tx, r, read=False)
        if writes:
            yield from self.timed(tx, "log", self.log(tx, writes))
        self.record(tx)
        if spec.phase_ns[3]:
            yield ep.compute(spec.phase_ns[3])
        yield from self.timed(tx, "commit", self.commit_writes(tx, writes))
        yield from self.timed(tx, "release",
                              self.unlock(tx, [r for r in recs if r.locked]))

    def log(self, tx: Txn, writes: list[Rec]):
        """Replicate the log of ``writes`` with the counts they install."""
        if tx.spec.phase_ns[2]:
            yield tx.ep.compute(tx.spec.phase_ns[2])
        yield from self.repl.log(tx, writes, self.how("log"), [r.aux.install for r in writes])

    def record(self, tx: Txn) -> None:
        """The history entry: reads with the count of the version read, writes with the
        count they install (the newest version's + 1, whether read or not)."""
        if self.history is None:
            return
        self._next_tid += 1
        reads = [((r.table, r.key), r.version) for r in tx.recs.values() if r.version >= 0]
        writes = [((r.table, r.key), r.aux.install) for r in tx.recs.values()
                  if r.new is not None]
        self.history.commit(self._next_tid, reads, writes)
        for (table, key), count in reads:
            self.reads.append((tx.ts, table, key, count))
        for (table, key), count in writes:
            self.installed[(table, key, count)] = tx.ts

    def read_records(self, tx: Txn, todo: list[Rec]):
        # RCC reads and locks records one at a time, as the transaction touches them.
        for r in todo:
            if r.for_update:
                yield from self.lock_record(tx, r, read=True)
            else:
                yield from self.read_record(tx, r)

    def release(self, tx: Txn):
        yield from self.unlock(tx, [r for r in tx.recs.values() if r.locked])

    # ================================================================ read
    def read_record(self, tx: Txn, r: Rec):
        """Read the newest version of ``r`` below ``tx.ts`` (count and value into ``r``)
        and raise its rts to ``tx.ts``."""
        status, count, value = yield from self.timed(tx, "read", self._read(tx, r))
        if status != OK:
            raise Abort(status)
        r.version, r.value = count, value

    def _read(self, tx: Txn, r: Rec):
        """(status, count, value) of the read of ``r`` in the ``read`` stage's verbs."""
        ep = tx.ep
        if self.by_cpu(tx, r.node):
            yield ep.compute(self.costs.local_access)
            return self.owner.read(r.node, r.table, r.slot, tx.ts)
        A = self.access
        A.lookup(tx)
        if self.how("read") == "rpc":
            w = yield from A.round_trip(
                tx, calls=[(r.node, H_READ, (r.table, r.slot, tx.ts), KEY_BYTES + 8)])
            return w.replies[0]
        st = self.store
        ts = tx.ts
        hl = WTS + 8 * self.v
        yield from A.index_read(tx, r)
        w = yield from A.round_trip(tx, [(r.node, [A.read_wr(tx, r, 0, st.rsize[r.table],
                                                             r)])])
        raw = w.results[r].data
        lock, rts, wts = parse_header(raw, self.v)
        pos = read_slot(lock, wts, ts)
        if pos < 0:
            return ("lock" if pos == -1 else "version_slot"), 0, b""
        # rts up to ts, then confirm: the READ follows the CAS in the doorbell, so it
        # sees any writer that locked before rts reached ts (see module doc)
        while True:
            wrs = [A.read_wr(tx, r, 0, hl, ("hdr", r))]
            if rts < ts:
                wrs.insert(0, A.cas_wr(tx, r, RTS, rts, ts, ("cas", r)))
            w = yield from A.round_trip(tx, [(r.node, wrs)])
            if rts < ts:
                old = w.results[("cas", r)].data
                if old != rts and old < ts:
                    rts = old
                    continue
            break
        lock2, _, wts2 = parse_header(w.results[("hdr", r)].data, self.v)
        if read_slot(lock2, wts2, ts) != pos or wts2[pos] != wts[pos]:
            return "validation", 0, b""
        return (OK, *_slot(raw, self.v, st.tables[r.table].value_size, pos))

    # ================================================================ lock
    def lock_record(self, tx: Txn, r: Rec, read: bool):
        """Lock ``r`` for a write and read its newest version (into ``r`` if ``read``:
        the body reads it); ``r.aux`` gets the slot and count to install."""
        status, later, count, value, held = yield from self.timed(tx, "lock",
                                                                  self._lock(tx, r))
        if status == "locked":
            r.locked = True       # the owner's re-check failed while holding the lock
            status = "timestamp"
        if status != OK:
            self.refuse(tx, status, later)
        r.locked = True
        r.aux = held
        if read:
            r.version, r.value = count, value

    def _lock(self, tx: Txn, r: Rec):
        """(status, later, count, value, held) of the lock-read of ``r`` in the ``lock``
        stage's verbs (status ``locked``: refused after locking, the lock is held)."""
        ep = tx.ep
        if self.by_cpu(tx, r.node):
            yield ep.compute(self.costs.local_access)
            return self.owner.lock(r.node, r.table, r.slot, tx.ts, False)
        A = self.access
        A.lookup(tx)
        if self.how("lock") == "rpc":
            w = yield from A.round_trip(
                tx, calls=[(r.node, H_LOCK, (r.table, r.slot, tx.ts, self._whole),
                            KEY_BYTES + 8)])
            return w.replies[0]
        st = self.store
        ts = tx.ts
        yield from A.index_read(tx, r)
        w = yield from A.round_trip(tx, [(r.node, [A.read_wr(tx, r, 0, WTS + 8 * self.v,
                                                             r)])])
        _, rts, wts = parse_header(w.results[r].data, self.v)
        later = write_conflict(rts, wts, ts)
        if later:
            return "timestamp", later, 0, b"", None
        cas = A.cas_wr(tx, r, 0, 0, ts, ("cas", r))
        rest = A.read_wr(tx, r, 8, st.rsize[r.table] - 8, r)
        w = yield from A.round_trip(tx, [(r.node, [cas, rest])])
        old = w.results[("cas", r)].data
        if old != 0:
            return "lock", (old if old > ts else 0), 0, b"", None
        raw = bytearray(pack_u64(ts)) + w.results[r].data
        _, rts, wts = parse_header(raw, self.v)
        later = write_conflict(rts, wts, ts)
        if later:
            return "locked", later, 0, b"", None
        newest, victim = write_slots(wts)
        count, value = _slot(raw, self.v, st.tables[r.table].value_size, newest)
        return OK, 0, count, value, _Held(victim, count + 1, raw)

    # ================================================================ commit, release
    def commit_writes(self, tx: Txn, writes: list[Rec]):
        """Install every written record as a new version and unlock it."""
        remote = []
        for r in writes:
            r.locked = False
            h = r.aux
            if self.by_cpu(tx, r.node):
                self.owner.install(r.node, r.table, r.slot, h.victim, h.install, tx.ts,
                                   r.new)
                self.access.local_cpu(tx)
            else:
                remote.append(r)
        if not remote:
            return
        A = self.access
        posts, calls = [], []
        if self.how("commit") == "one_sided":
            vs = self.store.tables
            for r in remote:
                h = r.aux
                raw = h.raw
                raw[WTS + 8 * h.victim:WTS + 8 * h.victim + 8] = pack_u64(tx.ts)
                o = _slot_offset(self.v, vs[r.table].value_size, h.victim)
                raw[o:o + 8 + len(r.new)] = pack_u64(h.install) + r.new
                posts.append((r.node, [A.write_wr(r, WTS, bytes(raw[WTS:]), False),
                                       A.write_wr(r, 0, ZERO8, True, r)]))
        else:
            for n, rs in self.group(remote).items():
                items = [(r.table, r.slot, r.aux.victim, r.aux.install, tx.ts, r.new)
                         for r in rs]
                ln = sum(KEY_BYTES + 2 + 8 + VER_BYTES + len(r.new) for r in rs)
                calls.append((n, H_UPDATE, items, ln))
        yield from self.send(tx, posts, calls)

    def unlock(self, tx: Txn, recs: list[Rec]):
        """Unlock ``recs`` (``release`` stage verbs) and wait for the acknowledgements,
        as RCC's ``release_writes``, unless passive ACK is on."""
        remote = self.access.unlock_local(
            tx, recs, lambda r: self.owner.unlock(r.node, r.table, r.slot))
        if not remote:
            return
        A = self.access
        if self.how("release") == "one_sided":
            posts = [(r.node, [A.write_wr(r, 0, ZERO8, True, r)]) for r in remote]
            yield from self.send(tx, posts, [])
        else:
            yield from self.send(tx, [], [
                (n, H_RELEASE, [(r.table, r.slot) for r in rs], len(rs) * (KEY_BYTES + 8))
                for n, rs in self.group(remote).items()])

    def send(self, tx: Txn, posts: list, calls: list):
        """Post ``posts`` and call ``calls`` (as :meth:`Access.round_trip`) and wait for
        them in one round trip; with passive ACK, send them without waiting."""
        A = self.access
        if not self.cfg.passive_ack:
            if posts or calls:
                yield from A.round_trip(tx, posts, calls)
            return
        for n, wrs in posts:
            A.post_nowait(tx, n, wrs)
        for c in calls:
            A.send_nowait(tx, *c)

    # ================================================================ owner side
    def register(self, ep: Endpoint) -> None:
        self.repl.register(ep)
        node = ep.node
        op = self.costs.record_op
        own = self.owner
        store = self.store
        whole_len = {t: store.rsize[t] for t in store.tables}
        vs = {t.id: t.value_size for t in store.tables.values()}

        def read(src, payload):
            table, slot, ts = payload
            res = own.read(node, table, slot, ts)
            return res, 1 + 8 + VER_BYTES + vs[table] if res[0] == OK else 1, op

        def lock(src, payload):
            table, slot, ts, whole = payload
            res = own.lock(node, table, slot, ts, whole)
            if res[0] != OK:
                return res, 1 + 8, op
            # status, the slot to overwrite and the newest version, or the whole record
            return res, 1 + (whole_len[table] if whole else 8 + VER_BYTES + vs[table]), op

        def update(src, items):
            for table, slot, victim, count, ts, value in items:
                own.install(node, table, slot, victim, count, ts, value)
            return True, 1, op * len(items)

        def release(src, items):
            for table, slot in items:
                own.unlock(node, table, slot)
            return True, 1, op * len(items)

        ep.register(H_READ, read)
        ep.register(H_LOCK, lock)
        ep.register(H_UPDATE, update)
        ep.register(H_RELEASE, release)
