"""Partitioned, primary-backup replicated tables in registered memory.

Scope
    Every node registers one memory region (2 MiB pages) holding, per table, its primary
    records, its backup copies of the records of the ``rep_factor`` preceding nodes, a
    hash index, and log ring buffers that other threads WRITE their logs into::

        node n region:  [index t0][primary t0][backup-1 t0][backup-2 t0] ... [log rings]

    - A record is ``lock`` (8 B, 0 = free, else the owner id), ``version`` (8 B, the
      number of committed writes, as :mod:`protocols.txn.history` counts them) and the
      table's value, padded to 8 B. Records live in real bytes: one-sided READ/CAS/WRITE
      see and change exactly what handlers and local code do.
    - Placement: a table's ``place(key) -> (node, slot)`` (given by the workload) names
      the primary; the backups of node ``p`` are ``(p + 1) mod N`` ... ``(p + r) mod N``
      (DrTM+H's static mapping; ``r = min(rep_factor, N - 1)``).
    - Hash index: DrTM-KV cluster chaining as in DrTM+H's ``ClusterHash``: one bucket
      node per expected key (``logical_num_ = expected_data``), each holding 4 keys and 4
      cache-line-aligned 64-B ``MemNode`` entries, 384 B in all. A one-sided lookup READs
      the whole bucket node (one extra round trip of 384 B); the offset of the record it
      yields is computed here from the slot (the bucket content is not materialised).
    - Location cache (:class:`LocationCache`): per machine; ``warm`` models DrTM+H's cache
      filled by traversing the remote index before the run (every lookup hits).
    - Log rings: one ring of ``log_ring`` bytes per (writer node, writer thread) on every
      node; entries are reclaimed lazily by the log cleaner (see :mod:`protocols.txn.occ`).

Not modelled: chained bucket overflow (a lookup is always one READ; in DrTM+H a key
outside its head node costs one more 384-B READ per chain node, but with the reference's
sizing, ``ClusterHash(expected_data)`` with 1.5 head nodes per SmallBank account and 1 per
stock record, keys inserted in order, only 0.1-0.5% of the keys are there; an exact
layout was built and measured on a branch and moved D10/D11 by under 0.5%), record inserts
into the hash index (inserts are local and cost CPU only), the backup stores' use in
recovery (backups are kept up to date by the log cleaner but never read).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from numbers import Integral
from typing import Callable

from rnicsim.verbs import Context

# Bytes of one index bucket node: DrTM+H src/memstore/cluster_chaining.hpp HeaderNode =
# 4 x 8-B keys, 4 x MemNode (64 B each, aligned to the cache line, memstore.h) and an int32
# next index, laid out as 64 (keys, padded) + 256 + 64 (next, padded) B.
BUCKET = 384
SLOTS_PER_BUCKET = 4
HEADER = 16           # lock + version
_U64 = struct.Struct("<Q")
_HDR = struct.Struct("<QQ")


@dataclass(frozen=True)
class Layout:
    """How one protocol lays a record out: a ``header`` [B] of protocol words (lock word,
    timestamps, the committed-write count the history checker needs), then ``slots``
    value slots, each a ``slot_header`` [B] followed by the value padded to 8 B.

    The store only sizes and places records; what the words mean is the protocol's
    (its module documents its header). OCC's is the default: lock + version, one value.
    ``current(raw, value_size)``: the committed value in a record's bytes, for
    :meth:`Store.value_local` (None: the value right after the 16-B header).
    """

    name: str = "occ"
    header: int = HEADER
    slots: int = 1
    slot_header: int = 0
    current: Callable[[bytes, int], bytes] | None = None

    def record_size(self, value_size: int) -> int:
        """Bytes of one record of a table whose values are ``value_size`` [B]."""
        return self.header + self.slots * (self.slot_header + -(-value_size // 8) * 8)

    def slot_offset(self, value_size: int, i: int) -> int:
        """Offset of value slot ``i`` (its slot header first) inside the record."""
        return self.header + i * (self.slot_header + -(-value_size // 8) * 8)


OCC_LAYOUT = Layout()


@dataclass(frozen=True)
class Table:
    """One table: ``value_size`` [B], ``slots_per_node`` records per primary partition and
    ``place(key) -> (node, slot)``."""

    id: int
    name: str
    value_size: int
    slots_per_node: int
    place: Callable[[object], tuple[int, int]]

    @property
    def record_size(self) -> int:
        """Bytes of one record: header + value, padded to 8 B."""
        return HEADER + -(-self.value_size // 8) * 8


class LocationCache:
    """A machine's cache of remote record locations (table id, key).

    ``warm``: filled before the run (DrTM+H populates it by traversing the remote index),
    so every lookup hits. Otherwise entries are added on fills, up to ``capacity``
    (first in, first out beyond it).
    """

    def __init__(self, warm: bool, capacity: int = 1 << 24) -> None:
        self.warm = warm
        self.capacity = capacity
        self._set: dict = {}
        self.hits = 0
        self.misses = 0

    def lookup(self, table: int, key) -> bool:
        """True on a hit."""
        if self.warm or (table, key) in self._set:
            self.hits += 1
            return True
        self.misses += 1
        return False

    def fill(self, table: int, key) -> None:
        """Remember the location of ``(table, key)``."""
        if self.warm:
            return
        if len(self._set) >= self.capacity:
            self._set.pop(next(iter(self._set)))
        self._set[(table, key)] = True


class Store:
    """The tables of a cluster (see module doc).

    ``threads`` sizes the log rings (one per writer thread of every node).
    """

    def __init__(self, cluster, tables: list[Table], threads: int, rep_factor: int = 2,
                 log_ring: int = 256 * 1024, cache_warm: bool = True,
                 layout: Layout = OCC_LAYOUT) -> None:
        self.cluster = cluster
        self.layout = layout
        # bytes of one record per table id, under the protocol's layout
        self.rsize = {t.id: layout.record_size(t.value_size) for t in tables}
        self.nodes = len(cluster.nodes)
        self.tables = {t.id: t for t in tables}
        self.rep = max(0, min(rep_factor, self.nodes - 1))
        self.threads = threads
        self.log_ring = log_ring
        off = 0
        self.index_base: dict[int, int] = {}
        self.primary_base: dict[int, int] = {}
        self.backup_base: dict[tuple[int, int], int] = {}
        self.buckets: dict[int, int] = {}
        for t in tables:
            nb = max(1, t.slots_per_node)    # one bucket node per expected key
            self.buckets[t.id] = nb
            self.index_base[t.id] = off
            off += nb * BUCKET
            self.primary_base[t.id] = off
            off += t.slots_per_node * self.rsize[t.id]
            for r in range(1, self.rep + 1):
                self.backup_base[(t.id, r)] = off
                off += t.slots_per_node * self.rsize[t.id]
            off = -(-off // 4096) * 4096
        self.log_base = off
        off += self.nodes * threads * log_ring
        self.region_size = off
        self.mrs = []
        for n in range(self.nodes):
            ctx = Context(cluster, n, 0)
            # Tuples are tens to hundreds of bytes scattered over the region: 256-B
            # storage chunks keep the simulator's memory near what is touched.
            self.mrs.append(ctx.reg_mr(max(off, 4096), name=f"store n{n}", chunk=256))
        self.rkeys = [mr.rkey for mr in self.mrs]
        self.caches = [LocationCache(cache_warm) for _ in range(self.nodes)]

    # ------------------------------------------------------------------ placement
    def place(self, table: int, key) -> tuple[int, int]:
        """(node, slot) of ``key`` in ``table`` by the table's ``place``; ``ValueError``
        for an unknown table or a key placed outside the cluster or the table (a slot
        outside ``[0, slots_per_node)`` would read or overwrite other records)."""
        t = self.tables.get(table)
        if t is None:
            raise ValueError(f"table {table!r}: no such table; the workload's tables are "
                             f"{sorted(self.tables)}")
        node, slot = t.place(key)
        if not (isinstance(node, Integral) and 0 <= node < self.nodes
                and isinstance(slot, Integral) and 0 <= slot < t.slots_per_node):
            raise ValueError(f"table {table} ({t.name}): key {key!r} is placed at node "
                             f"{node!r}, slot {slot!r}; expected a node in [0, "
                             f"{self.nodes}) and a slot in [0, {t.slots_per_node}) "
                             "(a key outside the table)")
        return node, slot

    def backups(self, node: int) -> list[int]:
        """Backup nodes of primary ``node``."""
        return [(node + r) % self.nodes for r in range(1, self.rep + 1)]

    def offset(self, table: int, slot: int) -> int:
        """Offset of the primary record ``slot`` of ``table`` in its node's region."""
        return self.primary_base[table] + slot * self.rsize[table]

    def backup_offset(self, table: int, slot: int, role: int) -> int:
        """Offset of backup copy ``role`` (1..rep) of record ``slot``."""
        return self.backup_base[(table, role)] + slot * self.rsize[table]

    def bucket_offset(self, table: int, slot: int) -> int:
        """Offset of the index bucket node a lookup of ``slot`` reads."""
        h = (slot * 0x9E3779B97F4A7C15) >> 17
        return self.index_base[table] + (h % self.buckets[table]) * BUCKET

    def ring_offset(self, writer_node: int, writer_thread: int) -> int:
        """Offset of the log ring of writer (node, thread) on any node."""
        return self.log_base + (writer_node * self.threads + writer_thread) * self.log_ring

    # ------------------------------------------------------------------ local access
    def read_local(self, node: int, table: int, slot: int) -> tuple[int, int, bytes]:
        """(lock, version, value) of a record of node ``node``, read by its CPU."""
        t = self.tables[table]
        raw = self.mrs[node].read(self.offset(table, slot), self.rsize[table])
        lock, ver = _HDR.unpack_from(raw)
        return lock, ver, raw[HEADER:HEADER + t.value_size]

    def header_local(self, node: int, table: int, slot: int) -> tuple[int, int]:
        """(lock, version) of a record, read by its node's CPU."""
        return _HDR.unpack(self.mrs[node].read(self.offset(table, slot), HEADER))

    def lock_local(self, node: int, table: int, slot: int, owner: int) -> int:
        """Compare-and-swap the lock word from 0 to ``owner``; return the old word."""
        return self.mrs[node].cas(self.offset(table, slot), 0, owner)

    def unlock_local(self, node: int, table: int, slot: int) -> None:
        """Zero the lock word."""
        self.mrs[node].write_u64(self.offset(table, slot), 0)

    def install_local(self, node: int, table: int, slot: int, version: int,
                      value: bytes) -> None:
        """Write version and value (the lock word is left alone)."""
        self.mrs[node].write(self.offset(table, slot) + 8, _U64.pack(version) + value)

    def apply_backup(self, node: int, primary: int, table: int, slot: int, version: int,
                     value: bytes) -> None:
        """The log cleaner of ``node`` installs a logged write in its backup copy."""
        role = (node - primary) % self.nodes
        if 1 <= role <= self.rep:
            self.mrs[node].write(self.backup_offset(table, slot, role) + 8,
                                 _U64.pack(version) + value)

    def value_local(self, node: int, table: int, slot: int) -> bytes:
        """The committed value bytes of a record (for checks after a run)."""
        cur = self.layout.current
        if cur is not None:
            raw = self.mrs[node].read(self.offset(table, slot), self.rsize[table])
            return cur(raw, self.tables[table].value_size)
        return self.read_local(node, table, slot)[2]


def parse_record(raw: bytes, value_size: int) -> tuple[int, int, bytes]:
    """(lock, version, value) from the bytes of a record READ."""
    lock, ver = _HDR.unpack_from(raw)
    return lock, ver, raw[HEADER:HEADER + value_size]


def parse_header(raw: bytes) -> tuple[int, int]:
    """(lock, version) from 16 bytes."""
    return _HDR.unpack_from(raw)


def pack_u64(v: int) -> bytes:
    """8-byte little-endian word."""
    return _U64.pack(v)
