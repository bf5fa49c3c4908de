"""protocols.rpc: transports, handler CPU on the serving thread, doorbell batching,
passive ACK (no reply) and piggybacking."""
from __future__ import annotations

import gc

import pytest

from protocols.rpc import Mesh, RpcBenchSpec, RpcConfig, Waiter, run_rpc_bench
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import READ, WorkCompletion, WorkRequest


def _mesh(cx4, transport: str, nodes: int = 2, threads: int = 2, **kw):
    sim = Simulation(1)
    cl = Cluster(sim, cx4, nodes, 1)
    mesh = Mesh(cl, threads, RpcConfig(transport=transport, **kw), rc=transport != "ud")
    cl.setup_done()
    return sim, cl, mesh


@pytest.mark.parametrize("transport", ["ud", "rc", "write_imm"])
def test_request_reaches_same_thread_of_peer_and_reply_returns(cx4, transport):
    """A call runs the handler on the peer's thread of the same index; the reply comes back."""
    sim, cl, mesh = _mesh(cx4, transport)
    seen = []
    for ep in mesh.endpoints.values():
        ep.register(7, lambda src, p, ep=ep: (seen.append((ep.node, ep.index, src, p)) or
                                              (("pong", p), 16, 0.0)))
    out = {}

    def client(ep):
        w = ep.call(1, 7, "ping", 32)
        yield w.arm()
        out["reply"] = w.replies[0]
        out["t"] = sim.now

    mesh.endpoint(0, 1).spawn(client)
    sim.run(until=50_000)
    assert seen == [(1, 1, 0, "ping")]
    assert out["reply"] == ("pong", "ping")
    assert 1_000 < out["t"] < 10_000


def test_handler_cpu_is_booked_on_the_serving_thread(cx4):
    """A 5 us handler delays the reply by 5 us and keeps the server's core busy."""
    lat = {}
    for cpu in (0.0, 5_000.0):
        sim, cl, mesh = _mesh(cx4, "ud")
        srv = mesh.endpoint(1, 0)
        srv.register(1, lambda src, p, cpu=cpu: (None, 8, cpu))

        def client(ep):
            w = ep.call(1, 1, None, 8)
            yield w.arm()
            lat[cpu] = sim.now

        mesh.endpoint(0, 0).spawn(client)
        sim.run(until=100_000)
        if cpu:
            assert srv.thread.core.busy_ns >= cpu
    assert lat[5_000.0] - lat[0.0] == pytest.approx(5_000.0, abs=50.0)


def test_no_reply_call_returns_at_once_and_still_runs_the_handler(cx4):
    """Passive ACK: a call without reply does not wait; the handler runs anyway."""
    sim, cl, mesh = _mesh(cx4, "ud")
    ran = []
    mesh.endpoint(1, 0).register(3, lambda src, p: (ran.append(p) or (None, 0, 0.0)))
    t = {}

    def client(ep):
        w = ep.call(1, 3, "commit", 24, reply=False)
        yield w.arm()
        t["back"] = sim.now

    mesh.endpoint(0, 0).spawn(client)
    sim.run(until=50_000)
    assert ran == ["commit"]
    assert t["back"] < 100.0


def _posting_cpu(cx4, batch: int) -> float:
    sim, cl, mesh = _mesh(cx4, "ud", nodes=4, threads=1, doorbell_batch=batch)
    for ep in mesh.endpoints.values():
        ep.register(1, lambda src, p: (None, 8, 0.0))

    def client(ep):
        w = Waiter(ep)
        for i in range(12):
            ep.call(1 + i % 3, 1, None, 32, True, w, i)
        yield w.arm()

    c = mesh.endpoint(0, 0)
    c.spawn(client)
    sim.run(until=100_000)
    return c.thread.core.busy_ns


def test_doorbell_batching_saves_posting_cpu(cx4):
    """Twelve UD requests of one loop pass share doorbells: less CPU than one each."""
    assert _posting_cpu(cx4, 16) < _posting_cpu(cx4, 1) - 12 * 60.0


def test_coalescing_puts_messages_to_one_peer_in_one_send(cx4):
    """With piggybacking, four requests to one peer travel as one SEND."""
    counts = {}
    for coalesce in (False, True):
        sim, cl, mesh = _mesh(cx4, "ud", coalesce=coalesce)
        srv = mesh.endpoint(1, 0)
        srv.register(1, lambda src, p: (p, 8, 0.0))
        got = {}

        def client(ep):
            w = Waiter(ep)
            for i in range(4):
                ep.call(1, 1, i, 16, True, w, i)
            yield w.arm()
            got.update(w.replies)

        mesh.endpoint(0, 0).spawn(client)
        sim.run(until=50_000)
        assert got == {0: 0, 1: 1, 2: 2, 3: 3}
        counts[coalesce] = srv.rx_msgs
    assert counts == {False: 4, True: 1}


def test_rpc_bench_runs_every_transport(cx4):
    """The fig. 3b benchmark completes RPCs over each transport."""
    for tr in ("ud", "rc", "write_imm"):
        m = run_rpc_bench(cx4, RpcBenchSpec(transport=tr, threads=2, coroutines=2), nodes=3,
                          warmup_ns=5_000.0, measure_ns=10_000.0)
        assert m["throughput_mops"] > 0.5


def test_ud_message_above_the_mtu_goes_as_fragments(cx4):
    """A 3000-B request over UD with a 1 KiB MTU travels as 3 SENDs; the handler runs once,
    with the payload, after the last fragment is in."""
    prof = cx4.with_overrides({"link.mtu": "1KiB"})
    sim, cl, mesh = _mesh(prof, "ud")
    seen = []
    srv = mesh.endpoint(1, 0)
    srv.register(3, lambda src, p: (seen.append((sim.now, p)) or (None, 8, 0.0)))
    cli = mesh.endpoint(0, 0)

    def client(ep):
        w = ep.call(1, 3, "big", 3000)
        yield w.arm()

    cli.spawn(client)
    sim.run(until=100_000)
    assert [p for _, p in seen] == ["big"]
    assert srv.rx_msgs == 3              # two empty fragments, then the one with the items


@pytest.mark.parametrize("transport", ["ud", "rc"])
def test_only_messages_under_64_bytes_are_inlined(cx4, transport, monkeypatch):
    """As rlib posts them: a message (header included) under 64 B goes inline in the WQE,
    a longer one is DMA-read by the NIC, even when it would fit ``max_inline``."""
    sim, cl, mesh = _mesh(cx4, transport)
    ep = mesh.endpoint(0, 0)
    mesh.endpoint(1, 0).register(1, lambda src, p: (None, 8, 0.0))
    qp = ep.ud if transport == "ud" else ep.rc_qp(1)
    posted = []
    real = type(qp).post_send

    def spy(self, wrs, event=True):
        if self is qp:
            posted.extend((wr.length, wr.inline) for wr in wrs)
        return real(self, wrs, event)

    monkeypatch.setattr(type(qp), "post_send", spy)
    hdr = RpcConfig().header
    assert 100 + hdr <= ep.ctx.max_inline

    def client(ep):
        for ln in (40, 100):
            w = ep.call(1, 1, None, ln)
            yield w.arm()

    ep.spawn(client)
    sim.run(until=100_000)
    assert posted == [(40 + hdr, True), (100 + hdr, False)]


def _replies_of_one_poll(cx4, monkeypatch, **kw):
    """Four requests (one doorbell each) reach a server thread busy with a 5 us burst, so
    its event loop finds all four in one poll. Returns the lists of SENDs each endpoint
    posted ([[item kinds]] per doorbell) and the server core's busy time."""
    sim, cl, mesh = _mesh(cx4, "ud", threads=1, doorbell_batch=1, **kw)
    cli, srv = mesh.endpoint(0, 0), mesh.endpoint(1, 0)
    srv.register(1, lambda src, p: (None, 8, 0.0))
    lists = ([], [])             # client's, server's
    real = type(cli.ud).post_send

    def spy(self, wrs, event=True):
        if self is cli.ud or self is srv.ud:
            lists[self is srv.ud].append([it[0] for wr in wrs for it in wr.data])
        return real(self, wrs, event)

    monkeypatch.setattr(type(cli.ud), "post_send", spy)

    def busy(ep):
        yield ep.compute(5_000.0)

    def client(ep):
        w = Waiter(ep)
        for i in range(4):
            ep.call(1, 1, None, 8, True, w, i)
        yield w.arm()

    srv.spawn(busy)
    cli.spawn(client)
    sim.run(until=50_000)
    return lists[0], lists[1], srv.thread.core.busy_ns


def test_ud_replies_of_one_poll_share_a_doorbell_whatever_the_request_batch(cx4, monkeypatch):
    """rlib's UDMsg::poll_comps queues the replies of every handler of a poll and posts them
    with one ibv_post_send, even when requests go one per doorbell (doorbell_batch=1).
    Hand-computed server CPU saved on cx4-edr: a 16-B reply (8 B + 8-B header) is inlined,
    its UD WQE is 16 + 48 + 20 -> 128 B, so alone it costs 25 ns build + 2 x 60 ns
    BlueFlame stores; four in one list cost 4 x 25 ns + one 60-ns doorbell:
    4 x 145 - 160 = 420 ns."""
    req_lists, rep_lists, cpu = _replies_of_one_poll(cx4, monkeypatch)
    assert req_lists == [[0]] * 4                  # requests: one per doorbell
    assert rep_lists == [[1, 1, 1, 1]]             # the four replies: one doorbell
    _req, rep_alone, cpu_alone = _replies_of_one_poll(cx4, monkeypatch, reply_batch=1)
    assert rep_alone == [[1]] * 4
    assert cpu_alone - cpu == pytest.approx(4 * (25 + 2 * 60) - (4 * 25 + 60), abs=1e-6)


@pytest.mark.parametrize("kw,fragment", [
    (dict(outstanding=0), r"outstanding: a positive integer, got 0"),
    (dict(coroutines=0), r"coroutines: a positive integer, got 0"),
    (dict(threads=0), r"threads: a positive integer, got 0"),
    (dict(transport="iwarp"), r"transport: one of ud, rc, write_imm, tcp, not 'iwarp'"),
    (dict(req=-1), r"req: a size >= 0 \[B\], got -1"),
    (dict(handler=-5.0), r"handler: a CPU time >= 0 \[ns\]"),
])
def test_rpc_bench_spec_refuses_impossible_values(kw, fragment):
    """Impossible RPC benchmark settings are ValueErrors naming the field (outstanding=0
    spun for ever at one instant; zero coroutines silently measured 0 Mops)."""
    with pytest.raises(ValueError, match=fragment):
        RpcBenchSpec(**kw)


def test_rpc_bench_needs_a_peer(cx4):
    """One node has no peer to call: a ValueError saying so (was numpy's 'high <= 0')."""
    with pytest.raises(ValueError, match=r"nodes: at least 2"):
        run_rpc_bench(cx4, RpcBenchSpec(threads=1, coroutines=1), nodes=1)


def test_a_finished_round_trip_leaves_nothing_for_the_cyclic_collector(cx4):
    """A Waiter, its completions and its event hold no reference back to it, so reference
    counting frees them when its coroutine is done: one cycle per round trip would leave
    millions of objects a run to Python's cyclic collector (a fifth of a large run's
    time)."""
    sim, cl, mesh = _mesh(cx4, "rc")
    for ep in mesh.endpoints.values():
        ep.register(7, lambda src, p: (p, 16, 0.0))
    got = []

    def client(ep):
        peer = mesh.endpoint(1, 1)
        for i in range(3):
            w = ep.post_group([(ep.rc_qp(1), [WorkRequest(READ, 8, ("rd", i), True, False,
                                                          ep.scratch, 0, peer.scratch.rkey,
                                                          0)])])
            ep.call(1, 7, i, 32, True, w, 0)
            yield w.arm()
            got.append((w.results[("rd", i)].wr_id == ("rd", i), w.replies[0]))

    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        mesh.endpoint(0, 1).spawn(client)
        sim.run(until=100_000)
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage
                       if isinstance(o, (Waiter, WorkCompletion, WorkRequest))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
    assert got == [(True, i) for i in range(3)]   # each completion filed under its tag
