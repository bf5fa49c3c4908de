"""The NIC's send scheduler (nic.tx_arbitration: message): per-QP round robin, a whole
message per turn, against hand-computed egress timelines and as laws over random loads."""
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rnicsim.cluster import Cluster
from rnicsim.hw import rnic as rnic_mod
from rnicsim.hw.calendar import Calendar
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import WRITE, Context, WorkRequest


def _run(arbitration, posts, nqps, profile="cx4-edr"):
    """Run ``posts`` = [(time ns, qp index, [lengths])] of signaled WRITEs from node 0 to
    node 1 on ``nqps`` RC QPs; return the egress log of node 0's NIC: one
    (qp index, wire bytes, start ns, end ns, ready ns, committed ns, known ns) per request,
    in the order they start on the wire (ready: when the NIC has it, payload fetched;
    committed: when the scheduler booked it on the wire; known: when the NIC's processing
    unit handed it to the scheduler), and the egress (its ns_per_byte, and quantum, one MTU
    packet's time: how far ahead of the wire the scheduler commits)."""
    p = load_profile(profile).with_overrides({"nic.tx_arbitration": arbitration})
    sim = Simulation(1)
    cl = Cluster(sim, p, 2, 1)
    c0 = Context(cl, 0, 0, cl.nodes[0].thread(0))
    c1 = Context(cl, 1, 0, cl.nodes[1].thread(0))
    cq = c0.create_cq()
    qps = []
    for _ in range(nqps):
        q = c0.create_qp("RC", cq)
        q.connect(c1.create_qp("RC", c1.create_cq()))
        qps.append(q)
    mr = c1.reg_mr(1 << 20)
    eg = cl.fabric.egress[0]
    index = {q._hw: i for i, q in enumerate(qps)}
    log = []
    emit = rnic_mod.Rnic._emit_request
    send = rnic_mod.Rnic._send_request
    known = {}
    booked = []

    class EgressSpy(Calendar):
        """Node 0's egress calendar, logging its bookings (a subclass: the compiled
        Calendar's methods cannot be replaced on the class)."""

        def reserve_packet(self, t, dur, *a):
            s = super().reserve_packet(t, dur, *a)
            booked.append((s, s + dur))
            return s

        def reserve_split(self, t, dur, chunk):
            s, e = super().reserve_split(t, dur, chunk)
            booked.append((s, e))
            return s, e

    eg.cal = EgressSpy(eg.cal.env)

    def spy(self, t, qp, wr, msg, path, dst_id, ready, tail, wire, npk, length):
        booked.clear()
        emit(self, t, qp, wr, msg, path, dst_id, ready, tail, wire, npk, length)
        if self is cl.nodes[0].nics[0]:
            s, e = booked[-1]      # (reserve_split may book through reserve_packet)
            log.append((index[qp], wire, s, e, ready, sim.now, known[id(wr)]))

    def spy_send(self, qp, wr, *a):
        known[id(wr)] = sim.now
        send(self, qp, wr, *a)

    def poster(t, i, lengths):
        yield sim.timeout(t)
        qps[i].post_send([WorkRequest(WRITE, n, k, True, False, None, 0, mr.rkey, 0)
                          for k, n in enumerate(lengths)], event=False)

    rnic_mod.Rnic._emit_request = spy
    rnic_mod.Rnic._send_request = spy_send
    try:
        for t, i, lengths in posts:
            sim.process(poster(t, i, lengths))
        sim.run()
    finally:
        rnic_mod.Rnic._emit_request = emit
        rnic_mod.Rnic._send_request = send
    log.sort(key=lambda r: r[2])        # in the order they start on the wire
    return log, eg


def test_round_robin_lets_a_small_message_go_after_the_message_on_the_wire():
    """QP 0 posts four 64 KiB WRITEs at once; QP 1 one 64-B WRITE 1 us later, while the
    first is on the wire (64 KiB at 100 Gb/s: ~5.3 us). Round robin: QP 1 goes right after
    QP 0's first message, back to back, and QP 0's second right after it. In ready order
    (fifo) it waits for all four."""
    posts = [(0, 0, [64 << 10] * 4), (1_000, 1, [64])]
    log, _ = _run("message", posts, 2)
    assert [q for q, *_ in log] == [0, 1, 0, 0, 0]
    (_, _, s0, e0, *_), (_, _, s1, e1, *_), (_, _, s2, *_) = log[:3]
    assert s1 == pytest.approx(e0, abs=1e-6)   # no gap, no overlap
    assert s2 == pytest.approx(e1, abs=1e-6)
    fifo, _ = _run("fifo", posts, 2)
    assert [q for q, *_ in fifo] == [0, 0, 0, 0, 1]
    # The big messages go back to back in both modes: the wire is never idle.
    for lg in (log, fifo):
        for a, b in zip(lg, lg[1:]):
            assert b[2] == pytest.approx(a[3], abs=1e-6)


def test_backlogged_qps_take_turns_one_message_each():
    """Three QPs each post three 16 KiB WRITEs at the same instant on a 10 Gb/s NIC (the
    wire, not PCIe, is the bottleneck, so all nine are fetched long before they can go):
    after the first message they go one per QP in turn, 0, 1, 2, 0, 1, 2, 0, 1, 2."""
    posts = [(0, i, [16 << 10] * 3) for i in range(3)]
    log, _ = _run("message", posts, 3, "cx3-roce-10g")
    assert [q for q, *_ in log] == [0, 1, 2] * 3
    fifo, _ = _run("fifo", posts, 3, "cx3-roce-10g")
    assert [q for q, *_ in fifo] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_round_robin_counts_a_message_where_it_starts_on_the_wire():
    """On a 10 Gb/s NIC, QP 0's 4,440-B WRITE is booked ahead (from 2598 ns to 6150 ns)
    when QP 1's 64-B WRITE is ready at 2570 ns, in the 28-ns gap before it: the wire is
    free at that instant, so the message goes at once, but its 162-B packet does not fit
    there and starts at 6150 ns, behind QP 0's. QP 1 is then the last sender, so at the
    next pull QP 0's waiting 64-B WRITE (ready at 3025 ns) goes before QP 1's second one
    (ready at 2692 ns): 1, 0, 0, 1, 0, 1 on the wire, QP 1 never twice in a row."""
    posts = [(0, 1, [64]), (0, 0, [64, 4096]), (1, 0, [64]), (0, 1, [64, 64])]
    log, eg = _run("message", posts, 4, "cx3-roce-10g")
    assert [q for q, *_ in log] == [1, 0, 0, 1, 0, 1]
    (_, _, _, e2, *_), (_, _, s3, _, r3, c3, _) = log[2:4]
    assert c3 < r3 < log[2][2]     # let go, and ready, before QP 0's message starts
    assert s3 == pytest.approx(e2, abs=1e-6)     # and on the wire right behind it
    for a, b in zip(log[2:], log[3:]):
        assert b[2] == pytest.approx(a[3], abs=1e-6)  # back to back from 2598 ns on


@settings(max_examples=settings().max_examples * 4 // 3, deadline=None)
@example(posts=[(0, 1, [64]), (0, 0, [64, 4096]), (1, 0, [64]), (0, 1, [64, 64])])
@given(st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 3),
                          st.lists(st.sampled_from([64, 1024, 4096, 16384, 65536]),
                                   min_size=1, max_size=4)),
                min_size=1, max_size=8))
def test_send_scheduler_laws(posts):
    """Over random posts on four QPs of a 10 Gb/s NIC: every message goes out once and
    whole at line rate, one at a time, a QP's messages in posting order, and round robin
    holds: a QP sends two messages in a row on the wire only when no other QP had a
    message that the NIC knew of when the second was committed and that was ready by the
    time the wire freed for it. (A message whose payload is still being fetched is
    committed when its processing unit hands it over, for the time its payload will be
    there, if the wire is free then: the QP was picked when its work request was
    processed.)"""
    log, eg = _run("message", posts, 4, "cx3-roce-10g")
    nspb = eg.ns_per_byte
    assert len(log) == sum(len(ls) for _, _, ls in posts)
    for a, b in zip(log, log[1:]):
        assert b[2] >= a[3] - 1e-6                  # one at a time
    for _, w, s, e, *_ in log:
        assert e - s == pytest.approx(w * nspb)    # whole message, at line rate
    want = {}
    for t, i, ls in sorted(posts, key=lambda p: p[0]):   # stable: ties keep list order
        want.setdefault(i, []).extend(ls)
    got = {}
    for q, w, *_ in log:
        got.setdefault(q, []).append(w)
    # Wire bytes grow with the payload: the order of lengths is the order of posts.
    assert {q: [sorted(v).index(x) for x in v] for q, v in got.items()} == \
        {q: [sorted(v).index(x) for x in v] for q, v in want.items()}
    for k in range(len(log) - 1):
        q = log[k][0]
        nq, _, start, _, _, committed, _ = log[k + 1]
        if nq != q:
            continue
        heads = {}
        for o, w, _, _, ready, o_committed, o_known in log:   # each QP's in its order
            if o != q and o not in heads and o_committed > committed + 1e-6:
                heads[o] = (ready, o_known)
        for ready, o_known in heads.values():
            if o_known <= committed - 1e-6:
                # the next message of another QP was waiting when the second was
                # committed: it was not ready by the time the wire freed
                assert ready > start - eg.quantum - 1e-6, (k, log)
