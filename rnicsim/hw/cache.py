"""On-NIC caches (QP contexts, address translations) with LRU replacement.

Scope: a fully associative LRU set of keys with a fixed number of entries; a miss inserts
the key (evicting the least recently used). The cost of a miss (a PCIe fetch) is charged
by the owner, which knows its PCIe link. Invariant: hits + misses == accesses, and the
cache never holds more than ``entries`` keys.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Hashable


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
