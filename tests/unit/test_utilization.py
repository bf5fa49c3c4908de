"""Cluster.utilization_meter: NIC processing-unit, PCIe and wire shares of the window,
against hand-computed values."""
import pytest

from rnicsim.verbs import WRITE, WorkRequest


def _one_write_in_the_window(make_rc_pair, profile, window: float, length: int = 8):
    """An RC pair; a first inline WRITE at 0 (warm-up: it brings both QP contexts into
    the caches), the measured window from 5 us for ``window`` [ns], a second inline WRITE
    at 6 us. Returns (pair, utilization at the end, egress bytes sent in the window)."""
    p = make_rc_pair(profile)
    sim, qp, cq, mr = p.sim, p.qp[0], p.cq[0], p.mr[1]
    sim.measure(5_000.0, window)
    util = p.cluster.utilization_meter()
    egress = p.cluster.fabric.egress[p.cluster.nodes[0].nics[0].id]
    sent = {}

    def proc():
        for t in (0.0, 6_000.0):
            yield sim.timeout(t - sim.now)
            if t > 0:
                sent["before"] = egress.bytes
            yield qp.post_send([WorkRequest(WRITE, length, 1, True, True, None, 0,
                                            mr.rkey, 0)])
            yield cq.wait()
        sent["after"] = egress.bytes

    sim.process(proc())
    sim.run(until=5_000.0 + window)
    return p, util(), sent["after"] - sent["before"]


def test_one_write_books_requester_completer_and_responder_work(make_rc_pair, cx4):
    """A signaled single-packet WRITE on cached contexts costs the requester NIC's PUs
    requester + completer service and the responder NIC's PUs responder service; over a
    10 us window with cx4-edr's PUs that is the share, per NIC; the wire share is the
    WRITE's bytes on the requester's egress at the link rate."""
    window = 10_000.0
    p, u, nbytes = _one_write_in_the_window(make_rc_pair, cx4, window)
    n = cx4.nic
    pus = n.processing_units
    req = (n.requester["write"] + n.completer["write"]) / pus / window
    resp = n.responder["write"] / pus / window
    assert u["nic_pu_util"] == pytest.approx((req + resp) / 2, rel=1e-9)
    assert u["nic_pu_util_max"] == pytest.approx(max(req, resp), rel=1e-9)
    assert nbytes > 0
    assert u["wire_util_max"] == pytest.approx(nbytes * 8e9 / cx4.link.rate / window,
                                               rel=1e-9)
    assert 0 < u["pcie_util_max"] < 0.01      # a doorbell, a CQE and an 8-B write


def test_nothing_counts_before_the_window_opens(make_rc_pair, cx4):
    """Asked before the window opens, every share is 0 (the warm-up WRITE is not seen)."""
    p = make_rc_pair(cx4)
    p.sim.measure(5_000.0, 10_000.0)
    util = p.cluster.utilization_meter()

    def proc():
        yield p.qp[0].post_send([WorkRequest(WRITE, 8, 1, True, True, None, 0,
                                             p.mr[1].rkey, 0)])

    p.sim.process(proc())
    p.sim.run(until=4_000.0)
    assert util() == {"nic_pu_util": 0.0, "nic_pu_util_max": 0.0, "pcie_util_max": 0.0,
                      "wire_util_max": 0.0}


def test_a_nic_bound_run_shows_a_saturated_nic_and_an_idle_cpu():
    """Two cx3-qdr nodes READing 8 B from each other, eight threads each keeping 64 in
    flight: ConnectX-3's PUs bound small READs, so the NICs' PUs are saturated while
    the CPU, the wire and PCIe are well below."""
    from rnicsim.profile import load_profile
    from workloads.microbench import MicrobenchSpec, run_microbench

    prof = load_profile("cx3-qdr")
    r = run_microbench(prof, MicrobenchSpec(verb="read", payload=8, threads=8,
                                            coroutines=8, outstanding=8, transport="rc"),
                       nodes=2, warmup_ns=20_000, measure_ns=30_000)
    assert r["nic_pu_util_max"] > 0.9
    assert r["nic_pu_util_max"] > r["wire_util_max"] + 0.3
    assert r["nic_pu_util_max"] > r["pcie_util_max"] + 0.3
    assert r["nic_pu_util"] <= r["nic_pu_util_max"]
    assert r["cpu_util"] < 0.6
