"""YCSB transactions as RCC configures them (PROTOCOL-FACTS 2.3).

Covers
    One table of ``value_size``-byte values (RCC: 64 B, ``YCSB_STR_LENGTH``),
    ``records_per_node`` records per node, placed by key modulo the number of nodes. RCC
    sizes the table by its scale factor, its config's ``scale`` (3) times the threads per
    node (``bench_runner.cc``; its logs print "use scale factor: 30; with total 10
    threads"): ``num_accounts`` 100,000 x 3 = 300,000 records and ``num_hot`` 100 x 3 =
    300 hot records per thread of a node, which scenarios give as
    ``ycsb_records_per_thread`` and ``ycsb_hot_records_per_thread`` (``_make`` multiplies
    by the threads). A transaction touches ``ops`` distinct keys (RCC ``set_len``
    10); each is a write with probability ``write_probability`` (RCC ``write_num`` /
    ``set_len`` = 2/10), else a read. A key comes from the hot area (the lowest
    ``hot_records_per_node`` x nodes ids) with probability
    ``hot_probability``, else uniformly from all records: RCC's code draws from all
    records when ``rand % 100 < tx_hot`` (90), so 10 % of its picks are forced into the
    hot area (PROTOCOL-FACTS 2.1 on the knob's direction).

Scenario
    The body reads its keys in order (a write reads its record for update, then writes
    it: the first 8 bytes of the value count the writes), then computes for ``compute``
    [ns] before the commit: RCC's worker calls ``usleep(sleep_time)`` (5 us) there
    (``bank_worker_new_api.cc`` ``ycsb_func``), so with ``sleep`` (default) the
    coordinator's thread blocks for ``compute`` plus the host's timer slack (50 us on
    Linux by default): none of its coroutines and none of the RPC requests it serves run
    meanwhile. ``sleep: false`` spends ``compute`` as CPU work instead (a busy loop).
    Every transaction declares its keys (what CALVIN's sequencer needs).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from protocols.txn.api import TxnSpec
from protocols.txn.registry import register_benchmark
from protocols.txn.store import Table

USERTABLE = 0
_Q = struct.Struct("<q")


@dataclass(frozen=True)
class YcsbSpec:
    """Size, skew and mix; ``compute`` [ns], ``value_size`` [B]; ``sleep``: the
    computation is a ``usleep`` (True, RCC) or CPU work (False)."""

    records_per_node: int = 300_000
    hot_records_per_node: int = 300
    hot_probability: float = 0.1
    ops: int = 10
    write_probability: float = 0.2
    compute: float = 5000.0
    value_size: int = 64
    sleep: bool = True

    def __post_init__(self) -> None:
        for k in ("records_per_node", "hot_records_per_node", "ops", "value_size"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k}: a positive integer, got {v!r}")
        if self.value_size < 8:
            raise ValueError(f"value_size: at least 8 B (the write counter), got "
                             f"{self.value_size}")
        for k in ("hot_probability", "write_probability"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{k}: a probability in [0, 1], got {v!r}")
        if not self.compute >= 0:
            raise ValueError(f"compute: a time >= 0 [ns], got {self.compute!r}")


class Ycsb:
    """The workload object the transaction framework asks for transactions."""

    def __init__(self, spec: YcsbSpec, nodes: int) -> None:
        self.spec = spec
        self.nodes = nodes
        self.records = spec.records_per_node * nodes
        self.hot = min(self.records, spec.hot_records_per_node * nodes)
        if spec.ops > self.records:
            raise ValueError(f"ops: at most the number of records ({self.records}), got "
                             f"{spec.ops}")
        self.tables = [Table(USERTABLE, "usertable", spec.value_size,
                             spec.records_per_node, self.place)]
        self._pad = bytes(spec.value_size - 8)

    def place(self, key: int) -> tuple[int, int]:
        """(node, slot) of ``key``."""
        return key % self.nodes, key // self.nodes

    def cpu_estimate_ns(self) -> float:
        """Thread time of one transaction on its coordinator without the timer slack of
        its sleep [ns], for sizing run windows."""
        return self.spec.compute + 2_000.0

    @property
    def sleeps_per_txn(self) -> int:
        """``usleep`` calls per transaction (each also blocks the host's timer slack)."""
        return int(self.spec.sleep and self.spec.compute > 0)

    def next_txn(self, rng, node: int, thread: int, co: int) -> TxnSpec:
        """The next transaction of a coroutine: ``ops`` distinct keys, each a read or a
        write."""
        sp = self.spec
        keys: list[tuple[int, int, bool]] = []
        seen = set()
        hot_seen = 0
        while len(keys) < sp.ops:
            hot = rng.random() < sp.hot_probability and hot_seen < self.hot
            k = int(rng.integers(0, self.hot if hot else self.records))
            if k in seen:
                continue
            seen.add(k)
            hot_seen += k < self.hot
            keys.append((USERTABLE, k, bool(rng.random() < sp.write_probability)))
        ro = not any(w for _, _, w in keys)
        return TxnSpec("ycsb", lambda tx: self._body(tx, keys), ro, keys=tuple(keys))

    def _body(self, tx, keys):
        # RCC's ycsb_func declares every access (rtx->read / rtx->write) before it loads
        # any value: one read_many, whose records each protocol reads as RCC's does (one
        # at a time, or, RCC's RPC OCC, in one batch of read RPCs)
        vals = yield from tx.read_many(keys)
        for (table, k, w), v in zip(keys, vals):
            if w:
                tx.write(table, k, _Q.pack(_Q.unpack_from(v)[0] + 1) + self._pad)
        # RCC's ycsb_func: load_read of every record read, then the protocol's prepare(),
        # between the accesses and the usleep
        for table, k, w in keys:
            if not w:
                yield from tx.load_read(table, k)
        yield from tx.prepare()
        if self.spec.compute:
            yield (tx.sleep if self.spec.sleep else tx.compute)(self.spec.compute)


def _make(params: dict, nodes: int, threads: int, clock_hz: float, coroutines: int):
    """The workload for ``params``: ``YcsbSpec`` fields, where ``records_per_thread`` and
    ``hot_records_per_thread`` (RCC's sizing, the scenario keys') stand for their per-node
    fields times ``threads``."""
    p = dict(params)
    for k in ("records", "hot_records"):
        per_thread = p.pop(f"{k}_per_thread", None)
        if per_thread is None:
            continue
        if f"{k}_per_node" in p:
            raise ValueError(f"{k}_per_thread and {k}_per_node: give one of them")
        p[f"{k}_per_node"] = per_thread * threads
    return Ycsb(YcsbSpec(**p), nodes)


register_benchmark("ycsb", _make)
