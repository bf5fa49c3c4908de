"""DCQCN reaction point: rate cut on CNPs, recovery once they stop; and end to end on a
RoCE incast (marks -> CNPs -> slower senders)."""
import pytest

from rnicsim.hw.dcqcn import Dcqcn
from rnicsim.profile import load_profile

LINE = 10e9


def _rp():
    return Dcqcn(load_profile("cx3-roce-10g").nic, LINE)


def test_inactive_until_first_cnp_costs_nothing():
    rp = _rp()
    assert rp.pace(1000.0, 4096) == (1000.0, 1000.0)
    assert not rp.active and rp.rc == LINE


def test_rate_cut_by_alpha_and_alpha_update():
    """First CNP: alpha = 1, so Rc halves; alpha <- (1-g) + g = 1. Second CNP right after:
    Rc halves again. After one timer period without CNP alpha decays by (1-g)."""
    p = load_profile("cx3-roce-10g").nic
    rp = _rp()
    rp.on_cnp(0.0)
    assert rp.rc == pytest.approx(LINE / 2) and rp.rt == LINE
    assert rp.alpha == pytest.approx(1.0)
    rp.on_cnp(10_000.0)
    assert rp.rc == pytest.approx(LINE / 4) and rp.rt == pytest.approx(LINE / 2)
    rp.advance(10_000.0 + p.dcqcn_timer)
    assert rp.alpha == pytest.approx(1.0 - p.dcqcn_g)
    # one timer expiry: fast recovery towards the target
    assert rp.rc == pytest.approx((LINE / 2 + LINE / 4) / 2)


def test_pacing_spaces_messages_at_the_limited_rate():
    rp = _rp()
    rp.on_cnp(0.0)                                   # Rc = 5 Gb/s
    s1, t1 = rp.pace(0.0, 10_000)
    s2, t2 = rp.pace(0.0, 10_000)
    assert (s1, t1) == (0.0, pytest.approx(10_000 * 8 / 5))
    assert s2 == pytest.approx(t1) and t2 == pytest.approx(2 * t1)


def test_rate_recovers_after_cnps_stop():
    """Under a CNP every 50 us the rate stays low; once they stop, fast recovery,
    additive and hyper increase bring it back to line rate and the limiter turns off."""
    p = load_profile("cx3-roce-10g").nic
    rp = _rp()
    t = 0.0
    for _ in range(20):
        rp.on_cnp(t)
        rp.pace(t, 4096)
        t += p.cnp_interval
    low = rp.rc
    assert low < 0.05 * LINE
    rates = []
    for k in range(1, 400):
        rp.advance(t + k * p.dcqcn_timer)
        rates.append(rp.rc)
    assert all(b >= a for a, b in zip(rates, rates[1:]))     # monotone recovery
    assert rates[p.dcqcn_f + 1] > low          # additive increase after F timer periods
    assert rp.rc == LINE and not rp.active


def test_incast_marks_and_cnps_slow_the_senders():
    """Four senders, each with a window of four 64 KiB WRITEs, into one 10 GbE port:
    with DCQCN on, ports mark, receivers send CNPs and senders' rates drop below line."""
    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation
    from rnicsim.verbs import WRITE, Context, WorkRequest

    prof = load_profile("cx3-roce-10g").with_overrides({"nic.dcqcn": True})
    sim = Simulation(2)
    cl = Cluster(sim, prof, 5, 1)
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(5)}
    mr = ctx[0].reg_mr(1 << 22)
    qps = []

    def sender(n):
        cq = ctx[n].create_cq()
        qp = ctx[n].create_qp("RC", cq)
        qp.connect(ctx[0].create_qp("RC", ctx[0].create_cq()))
        qps.append(qp)
        window = [WorkRequest(WRITE, 65536, i, True, False, None, 0, mr.rkey, 0)
                  for i in range(4)]
        qp.post_send(window, event=False)
        while True:
            wcs = yield cq.wait()
            qp.post_send([WorkRequest(WRITE, 65536, 0, True, False, None, 0, mr.rkey, 0)
                          for _ in wcs], event=False)

    for n in range(1, 5):
        sim.process(sender(n))
    sim.run(until=1_000_000)
    st = cl.fabric.pfc_stats()
    assert st["ecn_marks"] > 0 and st["cnps"] > 0 and st["cnps_received"] > 0
    rates = [q._hw.cc.rc for q in qps]
    assert min(rates) < LINE


def test_dcqcn_spares_the_victim_of_an_incast_on_a_leaf_spine():
    """The leaf-spine what-if, shortened: a victim flow sharing links (and its source NIC)
    with a 12:1 incast is slowed down far less with DCQCN than with PFC alone, and
    DCQCN cuts the pause time. The victim's own NIC keeps it behind one incast message at
    a time (per-QP round robin); until 2026-11-25 it waited for every incast WRITE its NIC
    had queued, whatever DCQCN did (99x slower either way)."""
    from pathlib import Path

    from rnicsim.runner import run_point
    from rnicsim.scenario import load_scenario, points

    path = Path(__file__).resolve().parents[2] / "scenarios/roce/whatif_leafspine_dcqcn.yaml"
    sc = load_scenario(path, ["run.measure=2ms"])
    res = {v["workload.dcqcn"]: run_point(p) for v, p in points(sc)}
    off, on = res[False], res[True]
    assert off["victim_slowdown"] > 10          # PFC alone: head-of-line blocking
    assert on["victim_slowdown"] < off["victim_slowdown"] / 5
    assert on["pause_time_us"] < off["pause_time_us"] / 2
    assert on["cnps"] > 0 and off["cnps"] == 0
