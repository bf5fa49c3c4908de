"""Host memory regions registered with a NIC.

Scope: a region is a range of bytes with a page size (4 KiB or 2 MiB, which decides the
NIC's translation-cache footprint) and keys. Contents are stored sparsely in chunks
(``chunk`` bytes, 4 KiB by default; smaller for many scattered small records, such as a
store's tuples) allocated on first write (reads of untouched memory return zeros), so a
region of many GiB costs nothing until used. The chunk size is storage only: it never
changes timing. Atomics operate on 8-byte little-endian words.
"""
from __future__ import annotations

CHUNK = 4096


class MemoryRegion:
    """A registered region: ``length`` [B], ``page_size`` [B], ``rkey``/``lkey``."""

    __slots__ = ("node", "length", "page_size", "rkey", "lkey", "_chunks", "name", "watch",
                 "chunk")

    def __init__(self, node: int, length: int, page_size: int, key: int, name: str = "",
                 chunk: int = CHUNK) -> None:
        if length <= 0:
            raise ValueError("a memory region needs a positive length")
        if chunk < 8 or chunk & (chunk - 1):
            raise ValueError("chunk must be a power of two >= 8 bytes")
        self.chunk = chunk
        if page_size not in (4096, 2 * 1024 * 1024, 1024 ** 3):
            raise ValueError("page_size must be 4KiB, 2MiB or 1GiB")
        self.node = node
        self.length = length
        self.page_size = page_size
        self.rkey = key
        self.lkey = key
        self.name = name
        self._chunks: dict[int, bytearray] = {}
        self.watch: dict[int, list] = {}    # offset -> callbacks(t_landed) (memory polling)

    def landed(self, offset: int, n: int, t: float) -> None:
        """A DMA write of ``[offset, offset+n)`` becomes visible at ``t``: tell watchers."""
        hit = [o for o in self.watch if offset <= o < offset + max(n, 1)]
        for o in hit:
            for cb in self.watch.pop(o):
                cb(t)

    def check(self, offset: int, n: int) -> bool:
        """True when ``[offset, offset+n)`` lies inside the region."""
        return 0 <= offset and offset + n <= self.length

    def read(self, offset: int, n: int) -> bytes:
        """Bytes ``[offset, offset+n)``."""
        size = self.chunk
        c, o = divmod(offset, size)
        if o + n <= size:
            # Within one chunk (the common case): no assembly.
            chunk = self._chunks.get(c)
            return bytes(chunk[o:o + n]) if chunk is not None else bytes(n)
        out = bytearray()
        while n > 0:
            c, o = divmod(offset, size)
            k = min(n, size - o)
            chunk = self._chunks.get(c)
            out += chunk[o:o + k] if chunk is not None else bytes(k)
            offset += k
            n -= k
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        """Store ``data`` at ``offset``."""
        n = len(data)
        size = self.chunk
        c, o = divmod(offset, size)
        if 0 < n and o + n <= size:
            # Within one chunk (the common case).
            chunk = self._chunks.get(c)
            if chunk is None:
                chunk = self._chunks[c] = bytearray(size)
            chunk[o:o + n] = data
            return
        i = 0
        while i < n:
            c, o = divmod(offset + i, size)
            k = min(n - i, size - o)
            chunk = self._chunks.get(c)
            if chunk is None:
                chunk = self._chunks[c] = bytearray(size)
            chunk[o:o + k] = data[i:i + k]
            i += k

    def read_u64(self, offset: int) -> int:
        """The 8-byte little-endian word at ``offset``."""
        return int.from_bytes(self.read(offset, 8), "little")

    def write_u64(self, offset: int, value: int) -> None:
        """Store an 8-byte little-endian word at ``offset``."""
        self.write(offset, (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))

    def cas(self, offset: int, compare: int, swap: int) -> int:
        """Compare-and-swap the word at ``offset``; return the old value."""
        old = self.read_u64(offset)
        if old == compare:
            self.write_u64(offset, swap)
        return old

    def faa(self, offset: int, add: int) -> int:
        """Fetch-and-add on the word at ``offset``; return the old value."""
        old = self.read_u64(offset)
        self.write_u64(offset, old + add)
        return old
