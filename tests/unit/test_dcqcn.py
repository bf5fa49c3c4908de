"""DCQCN reaction point: rate cut on CNPs, recovery once they stop; and end to end on a
RoCE incast (marks -> CNPs -> slower senders)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    a time (per-QP round robin); in ready order (``tx_arbitration: fifo``) it would wait
    for every incast WRITE its NIC had queued, whatever DCQCN did (99x slower either
    way)."""
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


def _one_op(size, cnp_at=None, op="WRITE"):
    """One RC WRITE (or READ) of ``size`` B between two cx3-roce-10g nodes with DCQCN on;
    with ``cnp_at`` [ns] a CNP arrives then for the QP that sends the data (the writer's,
    or for a READ the responder's). Returns (completion [ns], that QP's hardware)."""
    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation
    from rnicsim.verbs import READ, WRITE, Context, WorkRequest

    prof = load_profile("cx3-roce-10g").with_overrides({"nic.dcqcn": True})
    sim = Simulation(3)
    cl = Cluster(sim, prof, 2, 1)
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(2)}
    mr = ctx[0].reg_mr(2 * size)
    out = {}

    def requester():
        cq = ctx[1].create_cq()
        qp = ctx[1].create_qp("RC", cq)
        peer = ctx[0].create_qp("RC", ctx[0].create_cq())
        qp.connect(peer)
        data_qp = (qp if op == "WRITE" else peer)._hw
        out["qp"] = data_qp
        if cnp_at is not None:
            sim.call_at(cnp_at, data_qp.nic._rx_cnp, data_qp)
        code = WRITE if op == "WRITE" else READ
        qp.post_send([WorkRequest(code, size, 0, True, False, None, 0, mr.rkey, 0)],
                     event=False)
        yield cq.wait()
        out["done"] = sim.now

    sim.process(requester())
    sim.run(until=20_000_000)
    return out["done"], out["qp"]


@pytest.mark.parametrize("op", ["WRITE", "READ"])
def test_a_cnp_during_a_long_message_slows_the_rest_of_it(op):
    """A 1 MiB WRITE (READ response) takes ~0.9 ms at 10 Gb/s. A CNP at 100 us halves
    the sending QP's rate (alpha = 1 on the first CNP); each rate-timer period without
    CNPs then halves the gap to line rate (fast recovery: Rc <- (Rt + Rc)/2), so the
    message loses T (1/2 + 1/4 + 1/8 + ...) ~ T of wire time, T = dcqcn_timer = 55 us.
    The model applies the rate segment by segment (at most cnp_interval / 4 of line-rate
    time each), so the delay is T within two segments. Paced whole when it was sent, the
    message would not be slowed by the CNP at all."""
    nic = load_profile("cx3-roce-10g").nic
    base, _ = _one_op(1 << 20, op=op)
    late, qp = _one_op(1 << 20, cnp_at=100_000, op=op)
    seg = nic.cnp_interval / 4
    assert abs((late - base) - nic.dcqcn_timer) <= 2 * seg
    assert qp.cc.cnps == 1
    # a CNP after the message has gone changes nothing for it
    after, _ = _one_op(1 << 20, cnp_at=base + 1_000, op=op)
    assert after == base


def test_marked_packets_of_long_messages_notify_while_they_arrive(write_incast):
    """ECN marks are per packet, and each CNP leaves when its marked packet arrives:
    eight senders each WRITE one 1 MiB message at once into one 10 GbE port. Each sender
    gets CNPs all along its message's arrival, at most one per ``cnp_interval``, not one
    CNP after the whole message. With the rate applied segment by segment the port is
    shared: the eight finish within 2x of each other, and the port carried the 8 MiB at
    no more than its rate."""
    prof = load_profile("cx3-roce-10g").with_overrides({"nic.dcqcn": True})
    senders = range(1, 9)
    cnp_at = {n: [] for n in senders}

    def hook(n, qp):
        nic = qp._hw.nic
        rx_cnp = nic._rx_cnp
        sim = nic.sim
        nic._rx_cnp = lambda q, n=n: (cnp_at[n].append(sim.now), rx_cnp(q))

    cl, done = write_incast(prof, on_qp=hook)
    gap = prof.nic.cnp_interval
    for n in senders:
        times = cnp_at[n]
        assert len(times) >= 5                       # many CNPs for one message
        assert times[-1] < done[n]                   # ... while it still arrived
        assert all(b - a >= gap for a, b in zip(times, times[1:]))
    assert max(done.values()) < 2 * min(done.values())
    assert min(done.values()) > 4 * (1 << 20) * 8 / 10e9 * 1e9   # shared, not one by one
    assert max(done.values()) > 8 * (1 << 20) * 8 / 10e9 * 1e9   # the port's rate
    assert cl.fabric.pfc_stats()["ecn_marks"] > 100   # counted per packet


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 3),
                          st.lists(st.sampled_from([64, 4096, 65536, 262144, 1 << 20]),
                                   min_size=1, max_size=3)),
                min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 400_000), st.integers(0, 3)), max_size=6),
       st.sampled_from(["cx3-roce-10g", "cx4-roce-100g"]))
def test_segmented_sending_keeps_every_byte_and_the_order(posts, cnps, profile):
    """With DCQCN on, over random posts of WRITEs (long ones sent segment by segment) on
    four QPs of a 10 or 100 Gb/s NIC and CNPs at random times: every WRITE completes once,
    each QP's in posting order, and the egress carries exactly the requests' wire bytes
    (each packet's headers once, the RETH once per message)."""
    from rnicsim.cluster import Cluster
    from rnicsim.hw.wqe import RETH
    from rnicsim.sim import Simulation
    from rnicsim.verbs import WRITE, Context, WorkRequest

    prof = load_profile(profile).with_overrides({"nic.dcqcn": True})
    sim = Simulation(5)
    cl = Cluster(sim, prof, 2, 1)
    c0 = Context(cl, 0, 0, cl.nodes[0].thread(0))
    c1 = Context(cl, 1, 0, cl.nodes[1].thread(0))
    cq = c0.create_cq()
    qps = []
    for _ in range(4):
        q = c0.create_qp("RC", cq)
        q.connect(c1.create_qp("RC", c1.create_cq()))
        qps.append(q)
    mr = c1.reg_mr(1 << 20)
    ids = {i: [] for i in range(4)}
    seq = iter(range(10 ** 6))

    def poster(t, i, lengths):
        yield sim.timeout(t)
        wrs = []
        for n in lengths:
            k = next(seq)
            ids[i].append(k)
            wrs.append(WorkRequest(WRITE, n, k, True, False, None, 0, mr.rkey, 0))
        qps[i].post_send(wrs, event=False)

    for t, i, lengths in posts:
        sim.process(poster(t, i, lengths))
    total = sum(len(ls) for _, _, ls in posts)
    wcs = []

    def collector():
        while len(wcs) < total:
            wcs.extend((yield cq.wait()))

    sim.process(collector())
    nic0 = cl.nodes[0].nics[0]
    for t, i in cnps:
        sim.call_at(t, nic0._rx_cnp, qps[i]._hw)
    sim.run()
    got = {i: [] for i in range(4)}
    owner = {k: i for i, ks in ids.items() for k in ks}
    for wc in wcs:
        assert wc.status == 0
        got[owner[wc.wr_id]].append(wc.wr_id)
    assert got == ids
    mtu, ovh = prof.link.mtu, prof.link.packet_overhead
    wire = sum(n + max(1, -(-n // mtu)) * ovh + RETH for _, _, ls in posts for n in ls)
    assert cl.fabric.egress[0].bytes == wire


def test_a_segmented_message_waiting_for_its_next_segment_does_not_stall_the_clock():
    """Regression: six random WRITE flows among four 10 GbE nodes with DCQCN on (the mix
    drawn with random.Random(185)). The send scheduler let a segmented message keep the
    wire by pulling again "now" until its next segment was prepared; when that event's
    time differed from now in the last bits, it pulled at the same instant forever and
    simulated time stopped. Every WRITE must complete (an alarm turns a stall into a
    failure)."""
    import random
    import signal

    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation
    from rnicsim.verbs import WRITE, Context, WorkRequest

    rnd = random.Random(185)
    prof = load_profile("cx3-roce-10g").with_overrides({"nic.dcqcn": True})
    sim = Simulation(185)
    cl = Cluster(sim, prof, 4, 1)
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(4)}
    mrs = {n: ctx[n].reg_mr(1 << 22) for n in range(4)}
    done = []

    def flow(src, dst, sizes, gap):
        cq = ctx[src].create_cq()
        qp = ctx[src].create_qp("RC", cq)
        qp.connect(ctx[dst].create_qp("RC", ctx[dst].create_cq()))
        for n in sizes:
            yield sim.timeout(gap)
            qp.post_send([WorkRequest(WRITE, n, 0, True, False, None, 0, mrs[dst].rkey, 0)],
                         event=False)
            yield cq.wait()
            done.append(n)

    for _ in range(6):
        s, d = rnd.sample(range(4), 2)
        sim.process(flow(s, d, [rnd.choice([64, 4096, 1 << 16, 1 << 20]) for _ in range(5)],
                         rnd.randint(0, 5000)))

    def stalled(*_):
        raise AssertionError("simulated time stopped advancing")

    old = signal.signal(signal.SIGALRM, stalled)
    signal.alarm(30)
    try:
        sim.run(until=50_000_000)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert len(done) == 30


def _overtaken_write(seg: bool, small_at) -> float:
    """Node 0 WRITEs 1 MiB to node 2 over one InfiniBand switch; node 1 WRITEs 64 B to node
    2 at ``small_at`` [ns] (None: not at all), its packet overtaking the long message at
    the switch port to node 2. Returns when node 2 takes the long message (its last byte
    plus what overtook it), with long messages segmented (``seg``) or sent whole."""
    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation
    from rnicsim.verbs import WRITE, Context, WorkRequest

    prof = load_profile("cx4-edr")
    sim = Simulation(1)
    cl = Cluster(sim, prof, 3, 1)
    nics = [cl.nodes[n].nics[0] for n in range(3)]
    for nic in nics:
        nic.seg_on = seg
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(3)}
    mr = ctx[2].reg_mr(1 << 21)
    taken = []
    rx = nics[2]._rx_request

    def rx_request(msg, rx=rx):
        if msg.npkts > 1 and not msg.late and msg.qp.hold_req <= sim.now:
            taken.append(sim.now)
        rx(msg)

    nics[2]._rx_request = rx_request

    def writer(n, size, at):
        cq = ctx[n].create_cq()
        qp = ctx[n].create_qp("RC", cq)
        qp.connect(ctx[2].create_qp("RC", ctx[2].create_cq()))
        yield sim.timeout(at)
        qp.post_send([WorkRequest(WRITE, size, 0, True, False, None, 0, mr.rkey, 0)],
                     event=False)
        yield cq.wait()

    sim.process(writer(0, 1 << 20, 0))
    if small_at is not None:
        sim.process(writer(1, 64, small_at))
    sim.run(until=10_000_000)
    assert len(taken) == 1
    return taken[0]


def test_a_packet_overtaking_a_segmented_message_delays_it_once():
    """A long message sent segment by segment (its segments back to back at line rate, as
    DCQCN sends it; the test turns it on for every NIC) arrives when it would whole. A 64-B WRITE that
    overtakes it at the switch port in the middle delays it by the packet's wire time,
    once: the later segments are booked behind the pushed-back one. Were each overtaken
    segment to add the packet to the message's ``late`` as well, it would be taken that
    much later again (in RDMC's binomial pipeline the few ns make a block lose the race
    with the ACK of the opposite direction on its QP)."""
    alone = _overtaken_write(False, None)
    assert _overtaken_write(True, None) == pytest.approx(alone, abs=1e-6)
    whole = _overtaken_write(False, 40_000)
    assert whole > alone + 1.0                   # the packet did overtake it
    assert _overtaken_write(True, 40_000) == pytest.approx(whole, abs=1e-6)
