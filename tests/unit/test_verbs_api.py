"""rnicsim.verbs and protocols.runtime used by hand: plain user mistakes get a clear
TypeError/ValueError at the call, never a traceback from inside the hardware model, and
nothing a user passes is silently rewritten or ignored."""
from __future__ import annotations

import pytest

from protocols.runtime import Worker
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import CAS, FAA, READ, RECV, SEND, WRITE, Context, WorkRequest


def _pair(cx4):
    """(sim, cluster, worker on node 0, worker on node 1, connected RC QPs a-b,
    a 4 KiB region on node 1)."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    w0, w1 = Worker(cl, 0, 0), Worker(cl, 1, 0)
    a, b = w0.create_qp("RC"), w1.create_qp("RC")
    a.connect(b)
    return sim, cl, w0, w1, a, b, w1.ctx.reg_mr(4096, 4096)


@pytest.mark.parametrize("wr, match", [
    (dict(opcode=READ, length=-64), "length must be a whole number of bytes >= 0, got -64"),
    (dict(opcode=READ, length=64.5), "length must be .* got 64.5"),
    (dict(opcode=READ, length="64"), "length must be .* got '64'"),
    (dict(opcode="READ", length=64), "opcode must be SEND, .* got 'READ'"),
    (dict(opcode=99, length=64), "opcode must be .* got 99"),
    (dict(opcode=RECV, length=64), "got RECV .*post_recv"),
    (dict(opcode=CAS, length=64), "CAS: atomics operate on 8 bytes; length must be 8, got 64"),
    (dict(opcode=FAA, length=8, remote_offset=3), "FAA: remote_offset must be 8-byte aligned"),
    (dict(opcode=WRITE, length=4, data=b"12345678"), "data holds 8 B, more than length 4 B"),
])
def test_post_send_rejects_a_malformed_work_request_at_the_call(cx4, wr, match):
    """Negative, fractional or non-numeric lengths, unknown opcodes, atomics that are not
    8 aligned bytes and data longer than the length raise ValueError when posted."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    with pytest.raises(ValueError, match=match):
        a.post_send([WorkRequest(rkey=mr.rkey, **wr)])


def test_post_send_takes_a_list_of_work_requests(cx4):
    """A bare WorkRequest (or a list of something else) is a TypeError naming the call."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    with pytest.raises(TypeError, match="post_send takes a list of WorkRequests"):
        a.post_send(WorkRequest(READ, 8, rkey=mr.rkey))
    with pytest.raises(TypeError, match="every element must be a WorkRequest, got tuple"):
        a.post_send([(READ, 8)])
    with pytest.raises(TypeError, match="post_send takes a list of WorkRequests"):
        w0.post(a, WorkRequest(READ, 8, rkey=mr.rkey))


@pytest.mark.parametrize("delay", [-1.0, "700", float("nan"), True])
def test_create_cq_refuses_a_loop_delay_that_is_not_a_time(cx4, delay):
    """An event loop's delay is a number of ns >= 0: anything else is a ValueError naming
    the call and the value."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    with pytest.raises(ValueError, match="create_cq: loop_delay must be a number of ns"):
        w0.ctx.create_cq(w0.thread, delay)


def test_posting_on_an_unconnected_rc_qp_says_connect_first(cx4):
    """An RC QP that was never connected cannot send: ValueError, not a TypeError from the
    NIC model when it looks up the peer."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    lone = w0.create_qp("RC")
    with pytest.raises(ValueError, match="not connected; call connect"):
        lone.post_send([WorkRequest(READ, 8, rkey=mr.rkey)])


def test_ud_dest_must_name_a_nic_of_the_cluster(cx4):
    """A UD destination that is not a (nic_id, qpn) pair of this cluster is a ValueError."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    u = w0.create_qp("UD")
    for dest in [(7, 1), 5, (0,)]:
        with pytest.raises(ValueError, match="dest must be a \\(nic_id, qpn\\) address"):
            u.post_send([WorkRequest(SEND, 8, dest=dest)])


def test_local_region_must_be_of_this_node_and_hold_the_bytes(cx4):
    """The local buffer of a WR must be registered on the posting node and contain
    [local_offset, local_offset + length); otherwise the NIC would write outside it."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    mine = w0.ctx.reg_mr(4096, 4096)
    with pytest.raises(ValueError, match="registered on node 1, not on this QP's node 0"):
        a.post_send([WorkRequest(READ, 64, rkey=mr.rkey, local=mr)])
    with pytest.raises(ValueError, match="local bytes \\[4090, \\+64\\) lie outside"):
        a.post_send([WorkRequest(READ, 64, rkey=mr.rkey, local=mine, local_offset=4090)])
    with pytest.raises(TypeError, match="local must be a MemoryRegion"):
        a.post_send([WorkRequest(READ, 64, rkey=mr.rkey, local=b"buffer")])
    with pytest.raises(ValueError, match="post_recv: local bytes"):
        a.post_recv([WorkRequest(RECV, 64, local=mine, local_offset=4090)])


def test_post_recv_rejects_negative_lengths_and_counts(cx4):
    """Receive buffers of negative size, a negative buffer count or a bare WorkRequest
    are refused at the call."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    with pytest.raises(ValueError, match="post_recv: length must be .* got -1"):
        a.post_recv([WorkRequest(RECV, -1)])
    with pytest.raises(ValueError, match="n must be a number of buffers >= 0, got -1"):
        w0.post_recv(a, -1)
    with pytest.raises(TypeError, match="post_recv takes a list"):
        a.post_recv(WorkRequest(RECV, 64))


def test_post_recv_of_one_descriptor_repeated_is_checked_and_posted_as_a_list(cx4):
    """post_recv checks a list holding one WorkRequest repeated ([wr] * n, as the RPC
    mesh posts its receive queues) once; it must still refuse what it refuses element by
    element: a bad repeated buffer, and anything that is not a WorkRequest among them,
    even an object claiming equality with everything (mock.ANY), and it posts n RECVs."""
    from unittest import mock

    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    with pytest.raises(ValueError, match="post_recv: length must be .* got -1"):
        a.post_recv([WorkRequest(RECV, -1)] * 5)
    wr = WorkRequest(SEND, 64)
    with pytest.raises(TypeError, match="every element must be a WorkRequest"):
        a.post_recv([wr, wr, mock.ANY, wr])

    class EqualsOnlyWorkRequests:
        def __eq__(self, other):
            return isinstance(other, WorkRequest)

    class Ambiguous:                         # like a numpy array: == gives no bool
        def __eq__(self, other):
            raise ValueError("ambiguous")

    for odd in (EqualsOnlyWorkRequests(), Ambiguous(), None, 7):
        with pytest.raises(TypeError, match="every element must be a WorkRequest"):
            a.post_recv([wr, odd, wr])
    with pytest.raises(TypeError, match="every element must be a WorkRequest"):
        a.post_recv((wr, wr, "RECV"))
    assert wr.opcode == SEND                 # nothing relabelled on a refused post
    b.post_recv([wr] * 7, event=False)
    assert wr.opcode == RECV
    assert len(b._hw.recvs) == 7 and all(r is wr for r in b._hw.recvs)


def test_connect_refuses_a_second_peer(cx4):
    """Reconnecting a connected QP to another QP would leave the first peer pointing at
    it; it raises, while repeating the same connection is harmless."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 3, 1)
    w = [Worker(cl, n, 0) for n in range(3)]
    a, b, c = (x.create_qp("RC") for x in w)
    a.connect(b)
    b.connect(a)
    with pytest.raises(ValueError, match="already connected to"):
        a.connect(c)
    with pytest.raises(TypeError, match="connect\\(\\) takes a QueuePair"):
        a.connect(c.address)


def test_node_and_nic_indices_are_checked(cx4):
    """Out-of-range nodes or NICs name the valid range instead of an IndexError."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    with pytest.raises(ValueError, match="node must be a node index 0..1, got 5"):
        Worker(cl, 5, 0)
    with pytest.raises(ValueError, match="nic must be a NIC index 0..0 of node 0, got 3"):
        Context(cl, 0, 3)
    with pytest.raises(ValueError, match="node must be a node index 0..1, got 2"):
        Context(cl, 2, 0)


def test_spawn_and_compute_reject_plain_mistakes(cx4):
    """spawn needs a generator function; compute a CPU time >= 0 [ns]."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)

    def not_a_coroutine(w):
        return 1

    with pytest.raises(TypeError, match="must be a generator function"):
        w0.spawn(not_a_coroutine)
    with pytest.raises(ValueError, match="compute: ns must be a CPU time >= 0 \\[ns\\], got -5"):
        w0.compute(-5)


def test_worker_post_returns_completions_with_the_callers_wr_id(cx4):
    """Worker.post hands back each completion with the wr_id its WR was posted with, and a
    WR posted directly with qp.post_send whose wr_id equals the worker's internal
    counter is not mistaken for one of the worker's posts."""
    sim, cl, w0, w1, a, b, mr = _pair(cx4)
    out = {}

    def co(w):
        # An unrelated signaled WR with wr_id 1 on the same CQ (a value an internal post
        # counter could take): it must not complete the worker's post early.
        a.post_send([WorkRequest(READ, 8, wr_id=1, rkey=mr.rkey)], event=False)
        wcs = yield w.post(a, [WorkRequest(READ, 8, wr_id="x", rkey=mr.rkey),
                               WorkRequest(WRITE, 8, wr_id=("y", 2), rkey=mr.rkey)])
        out["ids"] = [wc.wr_id for wc in wcs]

    w0.spawn(co)
    sim.run(until=100_000)
    assert out["ids"] == ["x", ("y", 2)]


def _send_into(cx4, qtype, buf_len, msg_len):
    """A ``msg_len``-B SEND from node 0 into one receive buffer of ``buf_len`` B on node 1
    (then a second SEND into a second, large enough buffer); returns the completions
    (sender's, receiver's) and the receiving QP's state."""
    from rnicsim.verbs import STATUS_NAMES
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    c0 = Context(cl, 0, 0, cl.nodes[0].thread(0))
    c1 = Context(cl, 1, 0, cl.nodes[1].thread(0))
    cq0, cq1 = c0.create_cq(), c1.create_cq()
    a, b = c0.create_qp(qtype, cq0), c1.create_qp(qtype, cq1)
    if qtype != "UD":
        a.connect(b)
    buf = c1.reg_mr(8192)
    buf.write(0, bytes(8192))
    b.post_recv([WorkRequest(RECV, buf_len, "small", local=buf, local_offset=0),
                 WorkRequest(RECV, 8192 - 4096, "big", local=buf, local_offset=4096)])
    got = {0: [], 1: []}

    def run():
        for k in range(2):
            wr = WorkRequest(SEND, msg_len, ("send", k), True, data=b"\x01" * msg_len)
            if qtype == "UD":
                wr.dest = b.address
            a.post_send([wr])
            yield sim.timeout(20_000)
            for side, cq in ((0, cq0), (1, cq1)):
                got[side] += [(wc.wr_id, STATUS_NAMES[wc.status]) for wc in cq.poll(16)]

    sim.process(run())
    sim.run()
    return got, b._hw.state, buf.read(0, 4096)


def test_a_send_longer_than_the_receive_buffer_is_a_local_length_error(cx4):
    """RC: the receive completes LOC_LEN_ERR with nothing written, the responder QP breaks
    (its other receive is flushed) and the requester's SEND completes REM_INV_REQ_ERR."""
    got, state, data = _send_into(cx4, "RC", 8, 64)
    assert got[1][:2] == [("small", "LOC_LEN_ERR"), ("big", "WR_FLUSH_ERR")]
    assert got[0][0] == (("send", 0), "REM_INV_REQ_ERR")
    assert state == "ERR"
    assert data == bytes(4096)


def test_a_ud_receive_buffer_must_hold_the_grh_space(cx4):
    """UD: a buffer of exactly the message size lacks the 40 B the verbs API reserves for
    the GRH: that message is lost with LOC_LEN_ERR, the QP stays usable and the next
    message lands in a large enough buffer at offset 40."""
    from rnicsim.verbs import UD_GRH
    assert UD_GRH == 40
    got, state, _ = _send_into(cx4, "UD", 64, 64)
    assert got[1] == [("small", "LOC_LEN_ERR"), ("big", "SUCCESS")]
    assert state == "RTS"
    got, _, _ = _send_into(cx4, "UD", 64 + UD_GRH, 64)
    assert got[1] == [("small", "SUCCESS"), ("big", "SUCCESS")]


def test_status_codes_are_importable_from_verbs(cx4):
    """``wc.status`` is compared with the constants of ``rnicsim.verbs`` (a READ with a key
    the responder does not know completes REM_ACCESS_ERR); STATUS_NAMES names them all."""
    from rnicsim import verbs as V

    codes = [V.SUCCESS, V.LOC_LEN_ERR, V.REM_ACCESS_ERR, V.RETRY_EXC_ERR, V.WR_FLUSH_ERR,
             V.RNR_RETRY_EXC_ERR, V.REM_INV_REQ_ERR]
    assert [V.STATUS_NAMES[c] for c in codes] == [
        "SUCCESS", "LOC_LEN_ERR", "REM_ACCESS_ERR", "RETRY_EXC_ERR", "WR_FLUSH_ERR",
        "RNR_RETRY_EXC_ERR", "REM_INV_REQ_ERR"]
    sim, _cl, w0, _w1, a, _b, mr = _pair(cx4)
    got = []

    def co(w):
        got.extend((yield w.post(a, [WorkRequest(READ, 64, "bad", rkey=mr.rkey + 999)])))

    w0.spawn(co)
    sim.run(until=100_000)
    assert [(wc.wr_id, wc.status) for wc in got] == [("bad", V.REM_ACCESS_ERR)]
