"""Loopback: a NIC turns messages between its own QPs around inside (rnicsim/fabric.py),
and an RPC mesh built with ``loopback`` reaches its own node through the NIC
(protocols/rpc.py)."""
from __future__ import annotations

import pytest

from protocols.rpc import Mesh, RpcConfig
from protocols.runtime import Worker
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import READ, WorkRequest


def _read_latency(cx4, loop: bool, fail_cable: bool = False):
    """(latency [ns] of a warm 64-B READ from thread 0 of node 0, the cluster): to a QP
    of node 0 itself with ``loop``, else of node 1."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    w = Worker(cl, 0, 0)
    peer = Worker(cl, 0 if loop else 1, 1)
    qp, pq = w.create_qp("RC"), peer.create_qp("RC")
    qp.connect(pq)
    mr = peer.ctx.reg_mr(4096)
    if fail_cable:
        cl.fabric.fail_link(0)
    lat = []

    def client(w):
        for _ in range(3):          # the first READ warms the NIC's caches
            t = sim.now
            wcs = yield w.post(qp, [WorkRequest(READ, 64, 1, True, False, None, 0,
                                                mr.rkey, 0)])
            assert wcs[0].status == 0
            lat.append(sim.now - t)

    w.spawn(client)
    sim.run(until=100_000)
    assert len(lat) == 3 and lat[1] == pytest.approx(lat[2])
    return lat[2], cl


def test_loopback_read_skips_the_cable_and_the_switch(cx4):
    """A READ between two QPs of one NIC takes what a READ to another node takes minus
    the cable and switch both ways: 2 x (2 x propagation + switch latency); the port's
    cable and the switch carry none of it, the NIC's loopback direction carries the
    request and the response."""
    remote, _ = _read_latency(cx4, False)
    loop, cl = _read_latency(cx4, True)
    hops = 2 * (2 * cx4.link.propagation + cx4.switch.latency)
    assert hops == pytest.approx(220.0)            # cx4-edr: 10 ns cable, 90 ns switch
    assert remote - loop == pytest.approx(hops, abs=1e-6)
    fab = cl.fabric
    assert fab.egress[0].msgs == 0
    assert all(p.msgs == 0 for s in fab.switches.values() for p in s.ports.values())
    assert fab.loopback[0].msgs == 6               # 3 requests, 3 responses
    assert fab.route(0, 0) == [fab.loopback[0]]


def test_loopback_does_not_need_the_cable(cx4):
    """A cut cable stops a node's traffic to others, not to itself."""
    healthy, _ = _read_latency(cx4, True)
    cut, _ = _read_latency(cx4, True, fail_cable=True)
    assert cut == pytest.approx(healthy)


@pytest.mark.parametrize("transport", ["ud", "rc", "write_imm"])
def test_a_mesh_with_loopback_calls_its_own_node_through_the_nic(cx4, transport):
    """With ``loopback`` a thread has an RC QP to itself (``rc_qp(own node)``), and an
    RPC to its own node runs its own handler after a trip through the NIC (a few
    microseconds, not zero) and returns the reply; without it there is no such QP."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    mesh = Mesh(cl, 2, RpcConfig(transport=transport), rc=True, loopback=True)
    cl.setup_done()
    seen, out = [], {}
    for ep in mesh.endpoints.values():
        ep.register(7, lambda src, p, ep=ep: (seen.append((ep.node, ep.index, src)) or
                                              (("pong", p), 16, 0.0)))
    me = mesh.endpoint(1, 1)
    assert me.rc_qp(1) is not me.rc_qp(0)

    def client(ep):
        w = ep.call(1, 7, "ping", 32)
        yield w.arm()
        out["reply"], out["t"] = w.replies[0], sim.now

    me.spawn(client)
    sim.run(until=50_000)
    assert seen == [(1, 1, 1)]
    assert out["reply"] == ("pong", "ping")
    assert 1_000 < out["t"] < 10_000
    assert cl.fabric.loopback[1].msgs >= 2 and cl.fabric.egress[1].msgs == 0
    plain = Mesh(Cluster(Simulation(1), cx4, 2, 1), 1, RpcConfig(transport=transport))
    assert 0 not in plain.endpoint(0, 0).rc
