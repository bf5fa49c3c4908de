"""PFC on RoCE switch ports against hand-computed timelines, head-of-line blocking of a
victim flow, and the InfiniBand path left as it was."""
import pytest

from rnicsim.cluster import Cluster
from rnicsim.hw.link import LinkDir, transmit
from rnicsim.hw.pfc import PAUSE_FRAME_BYTES, PfcConfig
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import WRITE, Context, WorkRequest

RATE = 10e9            # [bit/s]
C = 8e9 / RATE         # [ns/B]
P = 100.0              # propagation [ns]
L = 500.0              # switch latency [ns]
X, Y, H = 20_000, 10_000, 20_000   # XOFF, XON, headroom [B]
MTU = 1000


def _fabric():
    cfg = PfcConfig(X, Y, H)
    eg_a = LinkDir("a->sw", RATE, P)
    eg_b = LinkDir("b->sw", RATE, P)
    out = LinkDir("sw->dst", RATE, P, L)       # the congested output port
    out2 = LinkDir("sw->other", RATE, P, L)    # an idle output port
    out.pfc = out2.pfc = cfg
    return eg_a, eg_b, out, out2


def test_pause_stops_and_resumes_upstream_at_thresholds():
    """B's 100 kB message holds the output port; A's 30 kB message queues behind it. A's
    ingress queue grows at line rate from A's head arrival (P): it passes XOFF at
    tx = P + X c; the PAUSE frame (84 B) and the propagation later A stops (t_off); what A
    sent until then arrives (Q bytes, in headroom). The queue drains from D0 (B done) at
    line rate and reaches XON at tr = D0 + (Q - Y) c; A restarts one frame + propagation
    later (t_on) and sends the rest of its message."""
    eg_a, eg_b, out, _ = _fabric()
    nb, na = 100_000, 30_000
    transmit([eg_b, out], 0.0, nb, None, MTU)
    arrive = transmit([eg_a, out], 0.0, na, None, MTU)
    delay = PAUSE_FRAME_BYTES * C + P
    tx = P + X * C
    t_off = tx + delay
    stop_in = t_off + P
    q = (stop_in - P) / C                    # bytes of A at the switch when A stops
    d0 = P + L + nb * C                      # A starts leaving when B is done
    tr = d0 + (q - Y) * C
    t_on = tr + delay
    st = eg_a.pstate[3]
    assert st.pause_frames == 1 and st.resume_frames == 1
    assert st.paused.starts == [pytest.approx(t_off, rel=1e-9)]
    assert st.paused.ends == [pytest.approx(t_on, rel=1e-9)]
    assert st.paused_ns == pytest.approx(t_on - t_off, rel=1e-9)
    assert st.max_occupancy == pytest.approx(q, rel=1e-9)
    assert st.headroom_overflow == 0 and q <= X + H
    # A's egress: sent [0, t_off), paused, the rest (na - q bytes... minus those in flight)
    rest = na * C - (t_off - 0.0)
    assert eg_a.cal.starts == [0.0, pytest.approx(t_on)]
    assert eg_a.cal.ends[-1] == pytest.approx(t_on + rest, rel=1e-9)
    # Tail at the destination: the output port cannot finish before A's tail arrived.
    tail_in = t_on + rest + P
    assert arrive == pytest.approx(max(d0 + na * C, tail_in + L) + P, rel=1e-9)
    # B was never paused: its queue stayed at the cut-through minimum.
    assert eg_b.pstate[3].pause_frames == 0


def test_victim_flow_is_held_by_the_pause():
    """Head-of-line blocking: a packet from A to an idle port, posted while A is paused,
    leaves A only after the resume and after the paused message's rest."""
    eg_a, eg_b, out, out2 = _fabric()
    transmit([eg_b, out], 0.0, 100_000, None, MTU)
    transmit([eg_a, out], 0.0, 30_000, None, MTU)
    st = eg_a.pstate[3]
    t_off, t_on = st.paused.starts[0], st.paused.ends[0]
    rest_end = eg_a.cal.ends[-1]
    arrive = transmit([eg_a, out2], t_off + 10.0, MTU)
    assert arrive == pytest.approx(rest_end + MTU * C + P + L + P, rel=1e-9)
    # Unpaused, the same packet would have taken one hop time.
    alone = transmit([LinkDir("x", RATE, P), out2], t_off + 10.0, MTU)
    assert arrive - (t_off + 10.0) > 10 * (alone - (t_off + 10.0))
    # Another priority is not paused: it uses the wire right away (after what is booked).
    eg_a2, eg_b2, out_2, out2_2 = _fabric()
    transmit([eg_b2, out_2], 0.0, 100_000, None, MTU)
    transmit([eg_a2, out_2], 0.0, 30_000, None, MTU)
    t_off2 = eg_a2.pstate[3].paused.starts[0]
    other = transmit([eg_a2, out2_2], t_off2 + 10.0, MTU, None, 0, prio=5)
    assert other < arrive


def test_infiniband_keeps_credit_backpressure():
    """Without a PFC config the generic buffer backpressure applies and no PFC state."""
    eg_a = LinkDir("a", RATE, P)
    eg_b = LinkDir("b", RATE, P)
    out = LinkDir("o", RATE, P, L, buffer=20_000)
    transmit([eg_b, out], 0.0, 100_000, None, MTU)
    transmit([eg_a, out], 0.0, 30_000, None, MTU)
    assert not eg_a.pstate
    # A's egress is held after A's message until the bytes ahead of A at the port have
    # drained to the buffer size: A's start there minus one buffer's serialisation.
    assert eg_a.cal.ends[-1] == pytest.approx(P + L + 100_000 * C - 20_000 * C)


def _roce_pair_cluster(profile, nodes):
    sim = Simulation(3)
    cl = Cluster(sim, profile, nodes, 1)
    return sim, cl


def test_cluster_incast_pauses_and_victim_slows():
    """RoCE cluster: 4 senders write 64 KiB messages to node 0 (incast); node 1 also sends
    1 KiB writes to idle node 5. Its writes are slowed by the pauses of its egress
    (victim flow), compared with the same writes without the incast."""
    prof = load_profile("cx3-roce-10g")

    def run(incast: bool):
        sim = Simulation(3)
        cl = Cluster(sim, prof, 6, 1)
        ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(6)}
        mr0 = ctx[0].reg_mr(1 << 22)
        mr5 = ctx[5].reg_mr(1 << 22)
        lat = []

        def sender(n, dst_ctx, mr, size, count, out):
            cq = ctx[n].create_cq()
            qp = ctx[n].create_qp("RC", cq)
            rq = dst_ctx.create_qp("RC", dst_ctx.create_cq())
            qp.connect(rq)
            for _ in range(count):
                t = sim.now
                yield qp.post_send([WorkRequest(WRITE, size, 1, True, False, None, 0,
                                                mr.rkey, 0)])
                yield cq.wait()
                if out is not None:
                    out.append(sim.now - t)

        if incast:
            for n in (1, 2, 3, 4):
                sim.process(sender(n, ctx[0], mr0, 65536, 6, None))
        sim.process(sender(1, ctx[5], mr5, 1024, 20, lat))
        sim.run(until=2_000_000)
        return cl, lat

    cl, lat_incast = run(True)
    _, lat_alone = run(False)
    st = cl.fabric.pfc_stats()
    assert st["pause_frames"] > 0 and st["pause_time_us"] > 0
    assert st["headroom_overflow"] == 0
    assert len(lat_incast) == len(lat_alone) == 20
    assert max(lat_incast) > 2 * max(lat_alone)


def test_roce_microbench_reports_the_window_pfc_counters():
    """A RoCE microbenchmark point reports the window's PFC counters; many clients
    writing 64 KiB messages into one server make its switch pause them; InfiniBand points
    carry no such columns."""
    from rnicsim.runner import run_point
    from rnicsim.scenario import resolve

    raw = {"version": 1, "name": "incast_mb",
           "cluster": {"nodes": 9, "nic": {"profile": "cx3-roce-10g"}, "threads": 1},
           "workload": {"kind": "microbench", "verb": "write", "payload": "64KiB",
                        "mode": "client_server", "servers": 1, "outstanding": 4},
           "run": {"seed": 1, "warmup": "200us", "measure": "400us"}}
    m = run_point(resolve(raw, "test"))
    assert m["pause_frames"] > 0 and m["pause_time_us"] > 0
    assert m["headroom_overflow"] == 0
    raw["cluster"]["nic"]["profile"] = "cx4-edr"
    assert "pause_frames" not in run_point(resolve(raw, "test"))


def test_qp_priority_through_verbs():
    """A QP's priority is set through verbs (0-7) and is what its messages carry."""
    import pytest

    from rnicsim.cluster import Cluster
    from rnicsim.profile import load_profile
    from rnicsim.sim import Simulation
    from rnicsim.verbs import Context

    sim = Simulation(1)
    cl = Cluster(sim, load_profile("cx3-roce-10g"), 2, 1)
    ctx = Context(cl, 0, 0, cl.nodes[0].thread(0))
    qp = ctx.create_qp("RC", ctx.create_cq())
    assert qp.priority == 3
    qp.priority = 5
    assert qp.priority == 5 and qp._hw.prio == 5
    with pytest.raises(ValueError):
        qp.priority = 8


@pytest.mark.parametrize("segment", ["128KiB", "0B"])
def test_long_messages_from_different_senders_share_a_switch_port(segment, write_incast):
    """Eight senders each WRITE one 1 MiB message at once into one 10 GbE port (PFC only,
    no DCQCN). A switch interleaves the packets of its ingresses, so the eight share the
    port and all finish near 8 MiB / 10 Gb/s; the model does it at the resolution of
    ``switch.interleave_segment`` (NICs send long messages in segments). With 0 (whole
    messages) the port serves them one after the other: the first finishes after about
    one message time."""
    prof = load_profile("cx3-roce-10g").with_overrides({"switch.interleave_segment": segment})
    _cl, done = write_incast(prof)
    one = (1 << 20) * 8 / (prof.link.rate / 1e9)          # one message's payload time [ns]
    assert len(done) == 8
    assert max(done.values()) > 8 * one                    # never above the port's rate
    assert max(done.values()) < 8 * one * 1.1
    if segment == "0B":
        assert min(done.values()) < 1.2 * one              # served whole, one by one
    else:
        assert min(done.values()) > 7 * one                # shared
