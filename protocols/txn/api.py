"""The transaction API a workload writes against, whatever the concurrency control.

Scope
    A workload describes a transaction as a :class:`TxnSpec`: a name, a generator
    ``body(tx)`` that uses :class:`Txn` (``read``, ``read_many``, ``prefetch``,
    ``write``, ``insert``, ``compute``), whether it is read-only, the coordinator's CPU per
    DrTM+H phase, and, where the workload knows them before running the body, its
    declared records (``keys``: what CALVIN's sequencer needs to schedule it).

    :class:`Txn` is one attempt of one transaction. It keeps the records the attempt
    touched (:class:`Rec`) and hands every access to the concurrency-control protocol
    it runs under (``tx.cc``, a :class:`protocols.txn.driver.TxnSystem`): how a read
    travels, what a write locks and when, what a commit does are the protocol's rules,
    never the workload's. A protocol signals a conflict by raising :class:`Abort` with
    its cause; the driver retries the transaction with the same inputs.

    Semantics every protocol keeps: a read returns the value this transaction wrote to the
    record if it did, else a committed value; ``write`` buffers a new value (installed at
    commit); ``insert`` is a local insert of a number of bytes (logged, CPU only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# Abort causes (metric ``abort_rate_<cause>``): a lock found held (NOWAIT, OCC's lock
# stage, a WAIT-DIE requester younger than the holder), a read-set check that failed (OCC
# validation, SUNDIAL's lease renewal, MVCC's re-read), a timestamp-order violation (MVCC
# write behind a later read or write), an MVCC read for which no version slot qualifies.
CAUSES = ("lock", "validation", "timestamp", "version_slot")


class Abort(Exception):
    """A conflict: the transaction aborts and is retried. ``cause`` is one of
    :data:`CAUSES`."""

    def __init__(self, cause: str = "lock") -> None:
        super().__init__(cause)
        self.cause = cause


class Rec:
    """A record one attempt touched. ``version`` is the number of committed writes of the
    version read (-1: not read), ``value`` its bytes, ``new`` the value to install
    (None: not written); ``aux`` belongs to the protocol (lock word, timestamps, slot)."""

    __slots__ = ("table", "key", "node", "slot", "version", "value", "locked", "new",
                 "unit", "for_update", "pending", "aux")

    def __init__(self, table: int, key, node: int, slot: int) -> None:
        self.table = table
        self.key = key
        self.node = node
        self.slot = slot
        self.version = -1
        self.value = b""
        self.locked = False
        self.new: bytes | None = None
        self.unit = 0
        self.for_update = False
        self.pending: Any = None   # a prefetch whose reply is not parsed yet
        self.aux: Any = None


@dataclass
class TxnSpec:
    """One transaction of a workload: ``body(tx)`` is a generator using the :class:`Txn`
    API; ``phase_ns`` the coordinator CPU per DrTM+H phase (E, V, L, C) [ns]; ``keys``
    the records it will touch as ``(table, key, for_update)`` when the workload knows
    them before the body runs (None: unknown)."""

    name: str
    body: Callable[["Txn"], Any]
    read_only: bool = False
    phase_ns: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    keys: tuple | None = None


class Txn:
    """The API a workload's transaction body sees (one attempt)."""

    __slots__ = ("co", "ep", "cc", "spec", "recs", "units", "inserted", "read_only",
                 "phases", "calls", "untimed", "owner", "delta", "local", "rts",
                 "empty_waits", "pending", "doomed", "ts", "state")

    def __init__(self, co, spec: TxnSpec) -> None:
        self.co = co
        self.ep = co.ep
        self.cc = co.cc
        self.spec = spec
        self.recs: dict[tuple[int, Any], Rec] = {}
        self.units = 0
        self.inserted = 0
        self.read_only = spec.read_only
        self.phases: dict[str, float] = {}   # stage name -> ns spent in it (this attempt)
        self.calls: dict[str, int] = {}      # stage name -> timed calls (TxnSystem.timed)
        self.untimed = 0.0      # ns of work no stage timer holds (TxnSystem.untimed)
        self.owner = 0
        self.delta = 0          # money the transaction adds (SmallBank conservation)
        self.local = 0          # local read batches (each one atomic: no yield inside)
        self.rts = 0            # network round trips waited for
        # wait calls with nothing pending (RCC's round-trip counter counts them too:
        # TxnSystem.empty_wait)
        self.empty_waits = 0
        self.pending: list = []  # prefetches posted and not waited for yet
        self.doomed = False     # a read-lock failed; abort at commit (``no_abort``)
        self.ts = 0             # the protocol's timestamp of this attempt (0: none)
        self.state: Any = None  # the protocol's per-attempt state

    # ---------------------------------------------------------------- workload API
    def compute(self, ns: float):
        """CPU work of the transaction logic [ns] (yield it)."""
        return self.ep.compute(ns)

    def sleep(self, ns: float):
        """``usleep(ns)`` in the transaction logic (yield it): the coordinator's thread
        blocks ``ns`` plus the host's timer slack and C-state exit (see
        ``Worker.sleep``)."""
        return self.ep.sleep(ns)

    def prepare(self):
        """The protocol's pre-commit work that RCC's benchmark does between a
        transaction's accesses and its computation (use ``yield from``): RCC's YCSB
        (``ycsb_func`` in ``src/app/smallbank/bank_worker_new_api.cc``) loads its reads
        and, one-sided, calls ``prepare()`` after its reads and writes and before its
        ``usleep``, so SUNDIAL renews its read leases here, before the sleep, and its
        commit renews only what the body read afterwards or what a commit-time lock made
        due. The other protocols do nothing here."""
        yield from self.cc.prepare(self)

    def load_read(self, table: int, key):
        """The body takes up the value of a record it read (use ``yield from``), as RCC's
        benchmarks call ``load_read`` after their accesses (SmallBank's and YCSB's in
        ``src/app/smallbank/bank_worker_new_api.cc``): SUNDIAL renews that record's lease
        here if it lies below the commit timestamp, one record at a time; the other
        protocols do nothing. KeyError for a record this transaction did not read."""
        yield from self.cc.load_read(self, self.recs[(table, key)])

    def read(self, table: int, key, for_update: bool = False):
        """Read one record; returns its value bytes (use ``yield from``): the value this
        transaction wrote to it, if it did, else the committed value it read."""
        vals = yield from self.read_many([(table, key)], for_update)
        return vals[0]

    def read_many(self, items, for_update: bool = False):
        """Read records ``[(table, key), ...]``; returns their values in order (a record
        this transaction wrote gives the value it wrote).

        ``for_update`` (or a third item ``(table, key, for_update)``) marks them as going
        to be written: a locking protocol takes the write lock now, FaSST's OCC locks them
        during execution. Whether the remote reads go out together or one by one is the
        protocol's choice. A record prefetched earlier is waited for here (with its whole
        prefetch). Only a record's first read decides its ``for_update``.
        ``ValueError`` for a table the workload does not have or a key its ``place``
        puts outside the table.
        """
        cc = self.cc
        recs, todo = self._register(items, for_update)
        for r in recs:
            if r.pending is not None:
                yield from cc.fetch_wait(self, r.pending)
        if todo:
            yield from cc.read_records(self, todo)
        return [r.value if r.new is None else r.new for r in recs]

    def _register(self, items, for_update: bool):
        store = self.cc.store
        recs = []
        todo = []
        for it in items:
            table, key = it[0], it[1]
            r = self.recs.get((table, key))
            if r is None:
                node, slot = store.place(table, key)
                r = self.recs[(table, key)] = Rec(table, key, node, slot)
                r.for_update = it[2] if len(it) > 2 else for_update
                todo.append(r)
            recs.append(r)
        return recs, todo

    def prefetch(self, items, for_update: bool = False):
        """Speculative execution (DrTM+H sec. 6.1: the transaction "can still
        speculatively execute until the involved value is really used"): under a
        protocol that issues outstanding requests, post the reads of ``items`` together
        now and return without waiting; the body goes on (its CPU overlaps the round
        trip) and waits for them when it first reads one of them. Local records are read
        at once. Otherwise do nothing (each record is read when the body asks for it)."""
        if not self.cc.prefetches():
            return
        _, todo = self._register(items, for_update)
        if todo:
            st = yield from self.cc.fetch_post(self, todo)
            if st is not None:
                self.pending.append(st)

    def write(self, table: int, key, value: bytes) -> None:
        """Buffer a new value (bytes of the table's ``value_size``) of a record. Whether a
        record not read first may be written is the protocol's rule (OCC installs
        versions of records it read: ``ValueError`` there)."""
        r = self.recs.get((table, key))
        if r is None:
            r = self.cc.write_unread(self, table, key)
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"Txn.write(table={table!r}, key={key!r}): value must be "
                            f"bytes, got {type(value).__name__}")
        if len(value) != self.cc.store.tables[table].value_size:
            raise ValueError(f"table {table}: value of {len(value)} B, expected "
                             f"{self.cc.store.tables[table].value_size}")
        r.new = bytes(value)
        self.read_only = False

    def insert(self, nbytes: int) -> None:
        """A local insert of ``nbytes`` (logged; costs the workload's CPU)."""
        self.inserted += nbytes
        self.read_only = False

    # ---------------------------------------------------------------- protocol side
    def blind(self, table: int, key) -> Rec:
        """Register a record written without a read (a protocol's ``write_unread``)."""
        node, slot = self.cc.store.place(table, key)
        r = self.recs[(table, key)] = Rec(table, key, node, slot)
        r.for_update = True
        return r
