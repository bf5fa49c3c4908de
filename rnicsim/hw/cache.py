"""On-NIC caches (QP contexts, address translations) with LRU replacement.

Scope: a fully associative LRU set of keys with a fixed number of entries; a miss inserts
the key (evicting the least recently used). The cost of a miss (a PCIe fetch) is charged
by the owner, which knows its PCIe link. Invariant: hits + misses == accesses, and the
cache never holds more than ``entries`` keys.

:class:`LruCache` holds any hashable keys; :class:`QpLru`, the QP-context cache, holds
QPs (:class:`~rnicsim.hw.qp.QpHw`, one NIC's, so a QP stands for its qpn) in a recency
list threaded through the QPs themselves: a hit is a few pointer moves, no hashing. Both
follow the same hit, miss and eviction sequence for the same accesses.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Hashable

if TYPE_CHECKING:
    from .qp import QpHw


class LruCache:
    """LRU cache of ``entries`` keys; ``access(key)`` returns True on a hit."""

    __slots__ = ("entries", "_d", "hits", "misses")

    def __init__(self, entries: int) -> None:
        self.entries = int(entries)
        self._d: OrderedDict[Hashable, None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def access(self, key: Hashable) -> bool:
        """Touch ``key``; True if it was cached, False if it had to be fetched."""
        d = self._d
        if key in d:
            d.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        if self.entries <= 0:
            return False
        d[key] = None
        if len(d) > self.entries:
            d.popitem(last=False)
        return False

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._d


class QpLru:
    """LRU cache of ``entries`` QP contexts; ``access(qp)`` returns True on a hit.

    The recency list runs through the QPs' ``lru_prev``/``lru_next`` (``lru_in``: the QP
    is cached), from ``head`` (least recently used, evicted first) to ``tail`` (the last
    one used). A QP belongs to one NIC, so to one such cache.
    """

    __slots__ = ("entries", "n", "head", "tail", "hits", "misses")

    def __init__(self, entries: int) -> None:
        self.entries = int(entries)
        self.n = 0
        self.head: QpHw | None = None
        self.tail: QpHw | None = None
        self.hits = 0
        self.misses = 0

    def access(self, qp: QpHw) -> bool:
        """Touch ``qp``'s context; True if it was cached, False if it had to be fetched."""
        if qp.lru_in:
            self.hits += 1
            if qp is not self.tail:
                # Unlink (qp has a successor: it is not the tail), then append.
                nxt = qp.lru_next
                prev = qp.lru_prev
                nxt.lru_prev = prev
                if prev is None:
                    self.head = nxt
                else:
                    prev.lru_next = nxt
                self._append(qp)
            return True
        self.misses += 1
        if self.entries <= 0:
            return False
        qp.lru_in = True
        self._append(qp)
        self.n += 1
        if self.n > self.entries:
            old = self.head
            self.head = old.lru_next
            self.head.lru_prev = None     # entries >= 1: qp itself is after old
            old.lru_next = None
            old.lru_in = False
            self.n -= 1
        return False

    def _append(self, qp: QpHw) -> None:
        """Put ``qp`` (not in the list) at its tail, as the last one used."""
        tail = self.tail
        qp.lru_prev = tail
        qp.lru_next = None
        if tail is None:
            self.head = qp
        else:
            tail.lru_next = qp
        self.tail = qp

    def __len__(self) -> int:
        return self.n
