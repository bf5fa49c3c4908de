"""MemoryRegion contents against a flat bytearray model.

Reads and writes within one storage chunk take a fast path; those crossing chunks walk
them. Both must store and return exactly what a flat array would, whatever the chunk size.
"""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rnicsim.hw.memory import MemoryRegion

LENGTH = 256

ops = st.lists(st.tuples(st.booleans(), st.integers(0, LENGTH - 1), st.integers(0, 40),
                         st.integers(0, 255)), max_size=40)


@given(st.sampled_from([8, 16, 64, 4096]), ops)
def test_reads_and_writes_match_a_flat_array(chunk, steps):
    """Every read returns the model's bytes (zeros where never written), as ``bytes``;
    an empty write allocates nothing."""
    mr = MemoryRegion(0, LENGTH, 4096, 1, chunk=chunk)
    model = bytearray(LENGTH)
    for is_write, off, n, fill in steps:
        n = min(n, LENGTH - off)
        if is_write:
            data = bytes((fill + k) % 256 for k in range(n))
            before = len(mr._chunks)
            mr.write(off, data)
            model[off:off + n] = data
            if n == 0:
                assert len(mr._chunks) == before
        else:
            got = mr.read(off, n)
            assert type(got) is bytes
            assert got == bytes(model[off:off + n])
    assert mr.read(0, LENGTH) == bytes(model)
