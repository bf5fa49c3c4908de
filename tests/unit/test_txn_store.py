"""protocols.txn.store: layout, placement of backups, record bytes seen by one-sided verbs."""
from __future__ import annotations

from protocols.txn.store import HEADER, LocationCache, Store, Table, parse_record
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import READ, Context, WorkRequest


def _store(cx4, nodes=3, rep=2):
    sim = Simulation(1)
    cl = Cluster(sim, cx4, nodes, 1)
    tables = [Table(0, "a", 8, 100, lambda k: (k % nodes, k // nodes)),
              Table(1, "b", 50, 40, lambda k: (k % nodes, k // nodes))]
    return sim, cl, Store(cl, tables, threads=2, rep_factor=rep)


def test_regions_do_not_overlap(cx4):
    """Index, primary and backup copies of every table and the log rings are disjoint."""
    _, _, st = _store(cx4)
    spans = []
    for t in st.tables.values():
        spans.append((st.index_base[t.id], st.buckets[t.id] * 64))
        spans.append((st.primary_base[t.id], t.slots_per_node * t.record_size))
        for r in (1, 2):
            spans.append((st.backup_base[(t.id, r)], t.slots_per_node * t.record_size))
    spans.append((st.log_base, st.nodes * st.threads * st.log_ring))
    spans.sort()
    for (a, n), (b, _) in zip(spans, spans[1:]):
        assert a + n <= b
    assert spans[-1][0] + spans[-1][1] <= st.region_size
    assert st.tables[1].record_size == HEADER + 56


def test_backups_follow_the_primary_and_are_capped_by_the_cluster(cx4):
    """Backups of node p are p+1 and p+2 (mod N); two nodes keep only one backup."""
    _, _, st = _store(cx4, nodes=4)
    assert st.backups(3) == [0, 1]
    _, _, st2 = _store(cx4, nodes=2)
    assert st2.rep == 1 and st2.backups(1) == [0]


def test_one_sided_read_sees_what_the_owner_wrote(cx4):
    """A remote READ of a record returns the lock, version and value installed locally."""
    sim, cl, st = _store(cx4, nodes=2, rep=1)
    st.install_local(1, 1, 7, 5, bytes(range(50)) + bytes(6))
    st.lock_local(1, 1, 7, 0xABC)
    th = cl.nodes[0].thread(0)
    ctx = Context(cl, 0, 0, th)
    cq = ctx.create_cq()
    qp = ctx.create_qp("RC", cq)
    ctx1 = Context(cl, 1, 0, cl.nodes[1].thread(0))
    qp1 = ctx1.create_qp("RC", ctx1.create_cq())
    qp.connect(qp1)
    buf = ctx.reg_mr(4096)
    out = []

    def go():
        yield qp.post_send([WorkRequest(READ, st.tables[1].record_size, 1, True, False, buf,
                                        0, st.rkeys[1], st.offset(1, 7))])
        out.extend((yield cq.wait()))

    sim.process(go())
    sim.run(until=20_000)
    lock, ver, val = parse_record(out[0].data, 50)
    assert (lock, ver, val) == (0xABC, 5, bytes(range(50)))


def test_location_cache_warm_and_filled():
    """A warm cache always hits; a cold one hits after a fill."""
    warm = LocationCache(True)
    assert warm.lookup(0, 42)
    cold = LocationCache(False, capacity=2)
    assert not cold.lookup(0, 1)
    cold.fill(0, 1)
    assert cold.lookup(0, 1)
    cold.fill(0, 2)
    cold.fill(0, 3)          # evicts the oldest
    assert not cold.lookup(0, 1)


def test_memory_region_chunk_size_is_storage_only():
    """Contents read back the same whatever the storage chunk; small chunks allocate less
    for scattered small records; bad chunk sizes are refused."""
    import pytest

    from rnicsim.hw.memory import MemoryRegion

    big, small = MemoryRegion(0, 1 << 20, 4096, 1), MemoryRegion(0, 1 << 20, 4096, 2, chunk=64)
    for mr in (big, small):
        for off in range(0, 1 << 20, 50_000):
            mr.write(off + 60, bytes(range(10)))
            mr.write_u64(off, off)
    for off in range(0, 1 << 20, 50_000):
        assert big.read(off, 80) == small.read(off, 80)
    assert len(small._chunks) * small.chunk < len(big._chunks) * big.chunk / 10
    with pytest.raises(ValueError):
        MemoryRegion(0, 4096, 4096, 3, chunk=100)
