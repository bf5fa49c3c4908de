"""The RNIC's parts (rnicsim/hw/rnic.py and the modules it is made of): the transmit
arbiter chosen once from the profile, and the receiver-not-ready retry shared by SEND and
WRITE_WITH_IMM."""
from __future__ import annotations

import pytest

from rnicsim.cluster import Cluster
from rnicsim.hw.arbiter import Fifo, PerMessageRoundRobin, PerPacket
from rnicsim.hw.qp import RNR_TIMER_NS
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import SEND, WRITE_WITH_IMM, Context, WorkRequest


@pytest.mark.parametrize("arb, cls, interleave", [
    ("message", PerMessageRoundRobin, False),
    ("fifo", Fifo, False),
    ("packet", PerPacket, True),
])
def test_tx_arbitration_names_the_arbiter_every_nic_gets(arb, cls, interleave):
    """nic.tx_arbitration picks the arbiter class of every NIC, once; only ``packet``
    makes the egress link interleave packets."""
    p = load_profile("cx4-edr").with_overrides({"nic.tx_arbitration": arb})
    cl = Cluster(Simulation(1), p, 2, 1)
    assert [type(n.tx) for n in cl.nics] == [cls, cls]
    assert [cl.fabric.egress[n.id].interleave for n in cl.nics] == [interleave] * 2


def _recv_completion(opcode: int, recv_at: float) -> tuple[float, int]:
    """An RC ``opcode`` (64 B, signaled) from node 0 at time 0 whose RECV is posted on
    node 1 at ``recv_at`` [ns]: (when node 1 sees the RECV's completion [ns], RNR NAKs the
    responder counted)."""
    sim = Simulation(1)
    cl = Cluster(sim, load_profile("cx4-edr"), 2, 1)
    ctx = [Context(cl, i, 0, cl.nodes[i].thread(0)) for i in range(2)]
    cq = [c.create_cq() for c in ctx]
    qa, qb = ctx[0].create_qp("RC", cq[0]), ctx[1].create_qp("RC", cq[1])
    qa.connect(qb)
    mr = ctx[1].reg_mr(4096, 4096)
    seen = []

    def receiver():
        if recv_at:
            yield sim.timeout(recv_at)
        qb.post_recv([WorkRequest(SEND, 64, "r", True, False, mr, 0)])
        for wc in (yield cq[1].wait()):
            seen.append(sim.now)

    sim.process(receiver())
    wr = (WorkRequest(SEND, 64, "s", True, True) if opcode == SEND else
          WorkRequest(WRITE_WITH_IMM, 64, "s", True, True, None, 0, mr.rkey, 0, imm=7))
    qa.post_send([wr])
    sim.run()
    return seen[0], cl.nics[1].counters["rnr"]


@pytest.mark.parametrize("opcode, responder_ns", [(SEND, 80.0), (WRITE_WITH_IMM, 100.0)])
def test_a_request_without_a_posted_recv_is_taken_again_after_the_rnr_timer(opcode,
                                                                            responder_ns):
    """With the RECV posted 10 us late (after the request arrived), the RECV completes
    one RNR timer (20.48 us) plus the responder's second service (cx4-edr: 80 ns for a
    SEND, 100 ns for a WRITE) later than with the RECV posted first."""
    t_on_time, rnr0 = _recv_completion(opcode, 0.0)
    t_late, rnr1 = _recv_completion(opcode, 10_000.0)
    assert (rnr0, rnr1) == (0, 1)
    assert t_on_time < 10_000.0
    assert t_late - t_on_time == pytest.approx(20_480.0 + responder_ns, rel=1e-12)
    assert RNR_TIMER_NS == 20_480.0
