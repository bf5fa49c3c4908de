"""Lossless RoCE: whatever the traffic matrix, PFC (and DCQCN) never lose a message.

Every RC WRITE completes successfully, every byte a NIC put on its egress reaches a NIC
(the last hops carry exactly what the first hops carried), and the same seed gives the
same pause counters.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rnicsim.cluster import Cluster
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import SUCCESS, WRITE, Context, WorkRequest

SIZES = st.sampled_from([64, 1024, 4096, 30_000, 131_072])
flows = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), SIZES,
                           st.integers(1, 6)), min_size=1, max_size=10)


def _run(nodes, topo, dcqcn, traffic):
    prof = load_profile("cx3-roce-10g")
    if dcqcn:
        prof = prof.with_overrides({"nic.dcqcn": True})
    sim = Simulation(5)
    cl = Cluster(sim, prof, nodes, 1, topology=topo)
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(nodes)}
    mrs = {n: ctx[n].reg_mr(1 << 20) for n in range(nodes)}
    done = []
    seen = []           # (time the drain saw it [ns], flow, wr_id) of every completion
    posted = 0
    for flow, (src, dst, size, count) in enumerate(traffic):
        src, dst = src % nodes, dst % nodes
        if src == dst:
            dst = (dst + 1) % nodes
        cq = ctx[src].create_cq()
        qp = ctx[src].create_qp("RC", cq)
        qp.connect(ctx[dst].create_qp("RC", ctx[dst].create_cq()))
        wrs = [WorkRequest(WRITE, size, i, True, False, None, 0, mrs[dst].rkey, 0)
               for i in range(count)]
        posted += count

        def drain(cq=cq, n=count, flow=flow):
            got = 0
            while got < n:
                wcs = yield cq.wait()
                done.extend(wcs)
                seen.extend((sim.now, flow, wc.wr_id) for wc in wcs)
                got += len(wcs)

        qp.post_send(wrs, event=False)
        sim.process(drain())
    sim.run(until=200_000_000)
    return cl, done, posted, seen


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(3, 6), leaf_spine=st.booleans(), dcqcn=st.booleans(),
       traffic=flows)
def test_no_message_lost_on_lossless_priority(nodes, leaf_spine, dcqcn, traffic):
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 2} if leaf_spine else None
    cl, done, posted, seen = _run(nodes, topo, dcqcn, traffic)
    assert len(done) == posted
    assert all(wc.status == SUCCESS for wc in done)
    fab = cl.fabric
    sent = sum(l.bytes for l in fab.egress.values())
    delivered = sum(sw.ports[f"nic{n}"].bytes for sw in fab.switches.values()
                    for n in range(len(cl.nics)) if f"nic{n}" in sw.ports)
    assert sent == delivered
    st_ = fab.pfc_stats()
    assert st_["pause_frames"] >= 0 and st_["pause_time_us"] >= 0
    # Same seed, same result: the same pause counters and every completion at the same
    # time (t_post would not do: every WR here is posted at time 0).
    cl2, _, _, seen2 = _run(nodes, topo, dcqcn, traffic)
    assert cl2.fabric.pfc_stats() == st_
    assert seen2 == seen
