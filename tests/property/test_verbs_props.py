"""Laws of the verbs layer on small simulated clusters (cx4-edr and cx3-qdr, 2-4 nodes).

Determinism (same seed, with or without a trace subscriber), monotone latency in payload,
exactly-once completions, RC ordering, READ/atomic data semantics, UD drops and limits, and
RC connection failure. Software is driven through :mod:`rnicsim.verbs` only; the single
private attribute touched is ``QueuePair._hw.timeout_ns`` (to shorten the retry timeout).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from rnicsim.cluster import Cluster
from rnicsim.hw.memory import MemoryRegion
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import (CAS, FAA, READ, RECV, SEND, SUCCESS, WRITE, CompletionQueue,
                           Context, QueuePair, WorkCompletion, WorkRequest)
from workloads.microbench import Microbench, MicrobenchSpec, run_microbench, stretch_window

PROFILES = ("cx4-edr", "cx3-qdr")
RETRY_EXC_ERR, WR_FLUSH_ERR = 3, 4            # ibv_wc_status codes (rnicsim.hw.wqe)

_BUDGET = settings().max_examples
few = settings(max_examples=max(4, _BUDGET // 2))
some = settings(max_examples=max(6, _BUDGET))

profiles = st.sampled_from(PROFILES)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


# ============================================================================ helpers
@dataclass
class Net:
    """``nodes`` nodes, one context/CQ/MR per node (thread 0), RC QPs between pairs."""

    sim: Simulation
    cluster: Cluster
    ctx: list[Context]
    cq: list[CompletionQueue]
    mr: list[MemoryRegion]
    rc: dict[tuple[int, int], list[tuple[QueuePair, QueuePair]]] = field(default_factory=dict)
    ud: list[QueuePair] = field(default_factory=list)
    wcs: list[list[WorkCompletion]] = field(default_factory=list)

    def rc_pair(self, a: int, b: int, k: int = 0) -> tuple[QueuePair, QueuePair]:
        """The k-th RC QP pair from node a to node b (created on first use)."""
        pairs = self.rc.setdefault((a, b), [])
        while len(pairs) <= k:
            qa = self.ctx[a].create_qp("RC", self.cq[a])
            qb = self.ctx[b].create_qp("RC", self.cq[b])
            qa.connect(qb)
            pairs.append((qa, qb))
        return pairs[k]

    def collect(self) -> None:
        """Start one process per node appending every completion of its CQ to ``wcs``."""
        self.wcs = [[] for _ in self.ctx]
        for i, cq in enumerate(self.cq):
            def loop(cq=cq, out=self.wcs[i]):
                while True:
                    out.extend((yield cq.wait()))
            self.sim.process(loop())


def build_net(profile_name: str, nodes: int, seed: int = 1, ud: bool = False,
              region: int = 1 << 20, page_size: int = 4096) -> Net:
    sim = Simulation(seed)
    cluster = Cluster(sim, load_profile(profile_name), nodes, 1)
    ctx = [Context(cluster, i, 0, cluster.nodes[i].thread(0)) for i in range(nodes)]
    cq = [c.create_cq() for c in ctx]
    mr = [c.reg_mr(region, page_size) for c in ctx]
    net = Net(sim, cluster, ctx, cq, mr)
    if ud:
        net.ud = [c.create_qp("UD", q) for c, q in zip(ctx, cq)]
    return net


def same_results(a: dict[str, float], b: dict[str, float]) -> bool:
    """Equal dicts, with NaN equal to NaN (empty histograms give NaN percentiles)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
        for k in a)


def one_op_latency(profile_name: str, op: int, size: int, offset: int = 0) -> float:
    """Post-to-completion time [ns] of one signaled READ/WRITE on an idle 2-node cluster."""
    net = build_net(profile_name, 2)
    q0, _q1 = net.rc_pair(0, 1)
    out: list[float] = []

    def run():
        t = net.sim.now
        yield q0.post_send([WorkRequest(op, size, 1, True, False, net.mr[0], offset,
                                        net.mr[1].rkey, offset)])
        wcs = yield net.cq[0].wait()
        assert [w.status for w in wcs] == [SUCCESS]
        out.append(net.sim.now - t)

    net.sim.process(run())
    net.sim.run(until=10e6)
    assert len(out) == 1
    return out[0]


# ============================================================================ determinism
mb_specs = st.builds(
    dict,
    verb=st.sampled_from(["read", "write", "cas", "faa", "rpc"]),
    transport=st.sampled_from(["rc", "ud", "write_imm"]),
    payload=st.sampled_from([8, 64, 512, 4096]),
    threads=st.integers(1, 4),
    coroutines=st.integers(1, 2),
    outstanding=st.integers(1, 2),
    doorbell_batch=st.sampled_from([1, 4]),
)


def _spec(d: dict[str, Any], profile=None) -> MicrobenchSpec:
    """The spec of a drawn dict (UD RPCs above the profile's MTU are not drawn: they are
    rejected at post time, see test_scenario's UD-payload test)."""
    d = dict(d)
    if profile is not None:
        assume(not (d["verb"] == "rpc" and d["transport"] == "ud"
                    and d["payload"] > profile.link.mtu))
    if d["verb"] in ("cas", "faa"):
        d["payload"] = 8
    if d["verb"] != "rpc":
        d["transport"] = "rc"
    return MicrobenchSpec(**d)


@few
@given(profiles, mb_specs, st.integers(2, 4), seeds)
def test_microbench_same_seed_same_results(profile_name, spec, nodes, seed):
    """Two runs of the same microbenchmark with the same seed give identical results."""
    prof = load_profile(profile_name)
    kw = dict(nodes=nodes, seed=seed, warmup_ns=10_000, measure_ns=10_000)
    a = run_microbench(prof, _spec(spec, prof), **kw)
    b = run_microbench(prof, _spec(spec, prof), **kw)
    assert same_results(a, b), (a, b)
    assert a["cpu_util"] > 0


@few
@given(profiles, mb_specs, st.integers(2, 4), seeds)
def test_tracing_does_not_change_results(profile_name, spec, nodes, seed):
    """A run with a trace subscriber attached gives the same results as one without."""
    prof = load_profile(profile_name)
    sp = _spec(spec, prof)
    plain = run_microbench(prof, _spec(spec, prof), nodes=nodes, seed=seed, warmup_ns=10_000,
                           measure_ns=10_000)
    warmup, measure = stretch_window(sp, prof, nodes, 1, 10_000, 10_000)
    sim = Simulation(seed)
    events: list[tuple[float, str]] = []
    sim.trace.subscribe(lambda t, name, scope, data: events.append((t, name)))
    cluster = Cluster(sim, prof, nodes, 1)
    mb = Microbench(sim, cluster, sp)
    sim.measure(warmup, measure)
    mb.start()
    sim.run(until=warmup + measure)
    traced = mb.results(measure)
    assert events, "the subscriber saw no event: the comparison would be vacuous"
    assert same_results(plain, traced), (plain, traced)


def test_different_seeds_can_differ(cx4):
    """The seed matters: some pair of seeds gives different results (the determinism tests
    above would pass trivially if results ignored the random streams)."""
    spec = MicrobenchSpec(verb="read", payload=64, threads=2, coroutines=2, outstanding=2)
    runs = [run_microbench(cx4, spec, nodes=4, seed=s, warmup_ns=10_000, measure_ns=10_000)
            for s in (1, 2, 3)]
    assert not all(same_results(runs[0], r) for r in runs[1:])


@pytest.mark.parametrize("verb, transport", [
    ("read", "rc"), ("write", "rc"), ("write", "uc"), ("cas", "rc"), ("faa", "rc"),
    ("rpc", "ud"),
    ("rpc", "rc"),
    ("rpc", "write_imm"),
    ("send", "ud"),
])
def test_every_microbench_verb_makes_progress(cx4, verb, transport):
    """With one coroutine and one request in flight, every verb and transport keeps
    completing operations in a measured window after the warm-up."""
    spec = MicrobenchSpec(verb=verb, payload=8, transport=transport, coroutines=1,
                          outstanding=1)
    r = run_microbench(cx4, spec, nodes=2, seed=1, warmup_ns=10_000, measure_ns=10_000)
    assert r["throughput_mops"] > 0


# ============================================================================ latency
@some
@given(profiles, st.sampled_from([READ, WRITE]),
       st.lists(st.integers(0, 20_000), min_size=2, max_size=2, unique=True),
       st.integers(0, 16).map(lambda k: k * 4096))
def test_larger_payload_is_never_faster(profile_name, op, pair, offset):
    """On an idle cluster a single READ/WRITE of more bytes never completes sooner."""
    small, large = sorted(pair)
    t_small = one_op_latency(profile_name, op, small, offset)
    t_large = one_op_latency(profile_name, op, large, offset)
    assert t_small <= t_large or t_small == pytest.approx(t_large, rel=1e-12)


def test_latency_grows_with_payload_on_the_wire(cx4):
    """A 64 KiB READ takes longer than an 8 B one by at least its serialisation at line rate."""
    d = one_op_latency("cx4-edr", READ, 65536) - one_op_latency("cx4-edr", READ, 8)
    assert d >= 65536 * 8 / cx4.link.rate * 1e9 * 0.99


# ============================================================================ completions
wr_ops = st.sampled_from([READ, WRITE, CAS, FAA, SEND, "UD"])
wr_specs = st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(0, 1), wr_ops,
                     st.integers(0, 3000), st.booleans(), st.integers(1, 3))


@some
@given(profiles, st.integers(2, 4), st.lists(wr_specs, min_size=1, max_size=25))
def test_every_signaled_wr_completes_exactly_once(profile_name, nodes, specs):
    """Signaled WRs (RC READ/WRITE/CAS/FAA/SEND, UD SEND) on random QPs each complete once,
    successfully; unsignaled ones never complete; every SEND consumes one RECV, which
    completes once at the receiver."""
    net = build_net(profile_name, nodes, ud=True)
    mtu = net.ctx[0].mtu
    plan: dict[int, list[tuple[QueuePair, list[WorkRequest]]]] = {n: [] for n in range(nodes)}
    recvs_needed: Counter = Counter()
    signaled, sent = [], 0
    wr_id = 0
    for src, hop, k, op, length, sig, batch in specs:
        src %= nodes
        dst = (src + hop) % nodes
        if dst == src:
            dst = (src + 1) % nodes
        wrs = []
        for _ in range(batch):
            wr_id += 1
            if op == "UD":
                qp, peer = net.ud[src], net.ud[dst]
                wr = WorkRequest(SEND, min(length, mtu), ("s", wr_id), sig, dest=peer.address)
            else:
                qp, peer = net.rc_pair(src, dst, k)
                n = 8 if op in (CAS, FAA) else length
                wr = WorkRequest(op, n, ("s", wr_id), sig, False, net.mr[src], 64,
                                 None if op == SEND else net.mr[dst].rkey, 128, None, 0, 1)
            if op in (SEND, "UD"):
                recvs_needed[peer] += 1
                sent += 1
            if sig:
                signaled.append(("s", wr_id))
            wrs.append(wr)
        plan[src].append((qp, wrs))
    recv_ids = []
    for peer, n in recvs_needed.items():
        ids = [("r", peer.qp_num, peer.ctx.nic_id, j) for j in range(n)]
        recv_ids += ids
        peer.post_recv([WorkRequest(RECV, 4096, i) for i in ids])
    net.collect()

    def poster(src):
        for qp, wrs in plan[src]:
            yield qp.post_send(wrs)

    for src in range(nodes):
        net.sim.process(poster(src))
    net.sim.run(until=5e6)
    wcs = [w for per_node in net.wcs for w in per_node]
    assert all(w.status == SUCCESS for w in wcs), [w for w in wcs if w.status != SUCCESS]
    sends = [w.wr_id for w in wcs if w.opcode != RECV]
    recvs = [w.wr_id for w in wcs if w.opcode == RECV]
    assert Counter(sends) == Counter(signaled)
    assert len(recvs) == sent and len(set(recvs)) == sent and set(recvs) <= set(recv_ids)
    assert all(cq.pending == 0 for cq in net.cq)


@pytest.mark.parametrize("profile_name", PROFILES)
def test_rc_pair_fixture_is_connected(make_rc_pair, profile_name):
    """The conftest pair is connected both ways and serves a READ of registered memory."""
    p = make_rc_pair(load_profile(profile_name))
    assert [q.state for q in p.qp] == ["RTS", "RTS"]
    assert p.qp[0].address == (0, p.qp[0].qp_num) and p.qp[1].address[0] == 1
    p.mr[1].write(100, b"hello")
    got: list[WorkCompletion] = []
    p.collect(0, got)
    p.qp[0].post_send([WorkRequest(READ, 5, "r", True, False, p.mr[0], 7, p.mr[1].rkey, 100)])
    p.sim.run(until=1e6)
    assert [(w.wr_id, w.ok, w.data) for w in got] == [("r", True, b"hello")]
    assert p.mr[0].read(7, 5) == b"hello"


def test_unsignaled_writes_produce_no_completion(rc_pair):
    """Unsignaled WRITEs write no CQE; a signaled one after them completes alone."""
    p = rc_pair
    got: list[WorkCompletion] = []
    p.collect(0, got)
    wrs = [WorkRequest(WRITE, 64, i, i == 4, rkey=p.mr[1].rkey, data=bytes([i]) * 64)
           for i in range(5)]
    p.qp[0].post_send(wrs)
    p.sim.run(until=1e6)
    assert [w.wr_id for w in got] == [4]
    assert p.mr[1].read(0, 1) == bytes([4])


def test_rc_completions_of_one_qp_arrive_in_posting_order(rc_pair):
    """Signaled WRs of one RC QP complete in the order they were posted."""
    p = rc_pair
    got: list[WorkCompletion] = []
    p.collect(0, got)
    p.qp[0].post_send([WorkRequest(WRITE, 64, i, rkey=p.mr[1].rkey, data=bytes(64))
                       for i in range(4)])
    p.sim.run(until=1e6)
    assert [w.wr_id for w in got] == [0, 1, 2, 3]


# ============================================================================ RC ordering / data
def _writes_in_order(profile_name, sizes, background, batch):
    """Run WRITEs of values 1..n to address 0 of node 1 on one RC QP (``batch`` WRs per
    doorbell) while other QPs between the same nodes write elsewhere; return the (wr_id,
    value at address 0) seen at each completion and the final value."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1, 0)
    mr = net.mr[1]
    seen: list[tuple[int, int]] = []

    def requester():
        wrs = [WorkRequest(WRITE, n, i, True, rkey=mr.rkey, remote_offset=0,
                           data=i.to_bytes(8, "little") + bytes(n - 8))
               for i, n in enumerate(sizes, 1)]
        for s in range(0, len(wrs), batch):
            yield q.post_send(wrs[s:s + batch])

    def noise():
        for j, (k, n) in enumerate(background):
            bq, _ = net.rc_pair(0, 1, k + 1)
            yield bq.post_send([WorkRequest(WRITE, n, ("bg", j), False, rkey=mr.rkey,
                                            remote_offset=65536, data=bytes(n))])

    def poll():
        while True:
            for w in (yield net.cq[0].wait()):
                assert w.status == SUCCESS
                seen.append((w.wr_id, mr.read_u64(0)))

    net.sim.process(requester())
    net.sim.process(noise())
    net.sim.process(poll())
    net.sim.run(until=5e6)
    return seen, mr.read_u64(0)


write_sizes = st.lists(st.integers(8, 12_000), min_size=1, max_size=12)
noise_writes = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 12_000)), max_size=12)


@some
@given(profiles, write_sizes)
def test_rc_delivers_writes_in_order(profile_name, sizes):
    """WRITEs of increasing values to one address on one RC QP, one WQE per doorbell, land in
    order: when WRITE i completes memory holds a value >= i, and at the end the last one."""
    seen, final = _writes_in_order(profile_name, sizes, [], 1)
    assert sorted(i for i, _ in seen) == list(range(1, len(sizes) + 1))
    assert all(value >= i for i, value in seen), seen
    assert final == len(sizes)


@some
@example(profile_name="cx4-edr", sizes=[8, 8, 8], background=[], batch=2)
@example(profile_name="cx4-edr", sizes=[8, 534, 8], background=[(0, 1)], batch=1)
@given(profiles, write_sizes, noise_writes, st.integers(1, 3))
def test_rc_delivers_writes_in_order_under_load(profile_name, sizes, background, batch):
    """The same in-order law with several WQEs per doorbell and other QPs between the same
    nodes writing elsewhere meanwhile."""
    seen, final = _writes_in_order(profile_name, sizes, background, batch)
    assert sorted(i for i, _ in seen) == list(range(1, len(sizes) + 1))
    assert all(value >= i for i, value in seen), seen
    assert final == len(sizes)


@some
@given(profiles, st.binary(min_size=1, max_size=9000), st.integers(0, 8192), st.booleans())
def test_read_returns_the_bytes_written(profile_name, data, offset, from_region):
    """After a WRITE has completed, a READ of the same range returns exactly the written
    bytes, both in the local buffer and in the completion."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1)
    n = len(data)
    if from_region:           # payload DMA-read from a registered buffer
        net.mr[0].write(0, data)
        write = WorkRequest(WRITE, n, "w", True, False, net.mr[0], 0, net.mr[1].rkey, offset)
    else:                     # payload given as bytes
        write = WorkRequest(WRITE, n, "w", True, rkey=net.mr[1].rkey, remote_offset=offset,
                            data=data)
    read = WorkRequest(READ, n, "r", True, False, net.mr[0], 16384, net.mr[1].rkey, offset)
    got: list[WorkCompletion] = []

    def run():
        yield q.post_send([write])
        got.extend((yield net.cq[0].wait()))
        yield q.post_send([read])
        got.extend((yield net.cq[0].wait()))

    net.sim.process(run())
    net.sim.run(until=5e6)
    assert [w.wr_id for w in got] == ["w", "r"] and all(w.ok for w in got)
    assert net.mr[1].read(offset, n) == data
    assert net.mr[0].read(16384, n) == data
    assert got[1].data == data and got[1].byte_len == n


_OVERTAKE = ("BUG: requests of one RC QP can overtake each other on the wire: Rnic._run_sq "
             "computes each WR's ready time independently and hands it to transmit(), so a "
             "WR without a payload DMA (READ, atomic, inline WRITE) leaves before an earlier "
             "non-inline WRITE whose payload is still being fetched over PCIe; the responder "
             "then serves them out of order")


@pytest.mark.parametrize("profile_name", PROFILES)
def test_read_posted_right_after_a_write_sees_it(profile_name):
    """RC executes a QP's requests in order: a READ posted right behind a WRITE to the same
    range returns the written bytes."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1)
    net.collect()
    q.post_send([WorkRequest(WRITE, 1, "w", False, rkey=net.mr[1].rkey, data=b"\x01"),
                 WorkRequest(READ, 1, "r", True, False, net.mr[0], 0, net.mr[1].rkey, 0)])
    net.sim.run(until=1e6)
    assert [w.wr_id for w in net.wcs[0]] == ["r"]
    assert net.wcs[0][0].data == b"\x01"


@pytest.mark.parametrize("profile_name", PROFILES)
def test_inline_write_after_a_dma_write_lands_last(profile_name):
    """RC delivers in order: an inline WRITE posted after a non-inline WRITE to the same
    address leaves its value in memory."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1)
    mr = net.mr[1]
    q.post_send([WorkRequest(WRITE, 64, 1, rkey=mr.rkey, data=(1).to_bytes(8, "little") +
                             bytes(56)),
                 WorkRequest(WRITE, 8, 2, inline=True, rkey=mr.rkey,
                             data=(2).to_bytes(8, "little"))])
    net.sim.run(until=1e6)
    assert mr.read_u64(0) == 2


# ============================================================================ atomics
U64 = 1 << 64
atomic_ops = st.lists(st.tuples(st.sampled_from(["cas", "faa"]), st.integers(0, 3),
                                st.integers(0, U64 - 1), st.integers(0, U64 - 1)),
                      max_size=40)


@given(st.integers(0, U64 - 1), atomic_ops)
def test_memory_region_cas_faa_match_a_model(initial, ops):
    """MemoryRegion.cas/faa are 64-bit little-endian compare-and-swap / fetch-and-add with
    wrap-around, returning the old value, and touch only their own word."""
    mr = MemoryRegion(0, 64, 4096, 1)
    model = {0: 0, 8: initial, 16: 0, 24: 0}
    mr.write_u64(8, initial)
    for kind, word, a, b in ops:
        off = 8 * word
        if kind == "cas":
            compare = model[off] if a % 2 else a       # half the CASes are meant to succeed
            old = mr.cas(off, compare, b)
            assert old == model[off]
            if old == compare:
                model[off] = b
        else:
            assert mr.faa(off, a) == model[off]
            model[off] = (model[off] + a) % U64
        for o, v in model.items():
            assert mr.read_u64(o) == v
            assert mr.read(o, 8) == v.to_bytes(8, "little")


@some
@given(profiles, st.integers(2, 4),
       st.lists(st.tuples(st.integers(0, 7), st.integers(1, 1000)), min_size=1, max_size=24),
       st.integers(0, 10**9))
def test_concurrent_faa_is_atomic(profile_name, nodes, ops, initial):
    """FAAs from several nodes and QPs on one word: the final value is the initial plus every
    add, and the old values returned chain up (each op saw all earlier ones)."""
    net = build_net(profile_name, nodes)
    target = net.mr[0]
    target.write_u64(256, initial)
    adds = {}
    plan = []
    for j, (who, add) in enumerate(ops):
        src = 1 + who % (nodes - 1)
        q, _ = net.rc_pair(src, 0, who % 2)
        adds[j] = add
        plan.append((src, q, WorkRequest(FAA, 8, j, True, False, net.mr[src], 8 * j,
                                         target.rkey, 256, None, add)))
    net.collect()
    for src in range(1, nodes):
        mine = [(q, wr) for s, q, wr in plan if s == src]

        def post(mine=mine):
            for q, wr in mine:
                yield q.post_send([wr])
        net.sim.process(post())
    net.sim.run(until=5e6)
    wcs = [w for per_node in net.wcs for w in per_node]
    assert sorted(w.wr_id for w in wcs) == list(range(len(ops)))
    assert all(w.ok for w in wcs)
    olds = {w.wr_id: w.data for w in wcs}
    assert target.read_u64(256) == initial + sum(adds.values())
    chain = sorted(olds, key=olds.get)
    expect = initial
    for j in chain:
        assert olds[j] == expect
        expect += adds[j]
    for s, _q, wr in plan:                 # the old value is also written to the local buffer
        assert net.mr[s].read_u64(wr.local_offset) == olds[wr.wr_id]


@few
@given(profiles, st.integers(2, 4), st.integers(2, 10))
def test_concurrent_cas_has_exactly_one_winner(profile_name, nodes, n):
    """n CAS(0 -> id) racing on a zero word: exactly one returns 0, the others return the
    winner's id, and memory holds it."""
    net = build_net(profile_name, nodes)
    target = net.mr[0]
    net.collect()
    for j in range(n):
        src = 1 + j % (nodes - 1)
        q, _ = net.rc_pair(src, 0, j % 2)
        q.post_send([WorkRequest(CAS, 8, j + 1, True, rkey=target.rkey, remote_offset=512,
                                 compare_add=0, swap=j + 1)])
    net.sim.run(until=5e6)
    olds = {w.wr_id: w.data for per_node in net.wcs for w in per_node}
    assert sorted(olds) == list(range(1, n + 1))
    winners = [j for j, old in olds.items() if old == 0]
    assert len(winners) == 1
    assert target.read_u64(512) == winners[0]
    assert all(old == winners[0] for j, old in olds.items() if j != winners[0])


# ============================================================================ UD
@some
@given(profiles, st.integers(1, 12), st.integers(0, 12), st.integers(0, 2048))
def test_ud_send_without_recv_is_dropped(profile_name, n, posted, size):
    """UD SENDs beyond the posted RECVs are dropped (counted and traced) and never complete
    at the receiver; the sender still completes every signaled SEND."""
    posted = min(posted, n)
    net = build_net(profile_name, 2, ud=True)
    drops: list[str] = []
    net.sim.trace.subscribe(lambda t, name, scope, data: drops.append(scope), "nic.ud_drop")
    a, b = net.ud
    if posted:
        b.post_recv([WorkRequest(RECV, 4096, ("r", j)) for j in range(posted)])
    net.collect()

    def send():
        for j in range(n):
            yield a.post_send([WorkRequest(SEND, size, ("s", j), True, dest=b.address,
                                           data=bytes([j % 256]) * size)])

    net.sim.process(send())
    net.sim.run(until=5e6)
    rx = [w for w in net.wcs[1] if w.opcode == RECV]
    assert len(rx) == posted and all(w.ok for w in rx)
    assert sorted(w.wr_id for w in net.wcs[0]) == [("s", j) for j in range(n)]
    nic1 = net.cluster.nodes[1].nics[0]
    assert nic1.counters["ud_drop"] == n - posted
    assert len(drops) == n - posted and set(drops) <= {nic1.name}
    # a RECV posted afterwards does not resurrect a dropped message
    b.post_recv([WorkRequest(RECV, 4096, "late")])
    net.sim.run(until=net.sim.now + 1e6)
    assert all(w.wr_id != "late" for w in net.wcs[1])


@some
@given(profiles, st.integers(1, 3 * 4096))
def test_ud_larger_than_mtu_raises(profile_name, extra):
    """Posting a UD SEND above the path MTU raises ValueError; exactly the MTU is accepted."""
    net = build_net(profile_name, 2, ud=True)
    a, b = net.ud
    mtu = net.ctx[0].mtu
    with pytest.raises(ValueError, match="MTU"):
        a.post_send([WorkRequest(SEND, mtu + extra, 1, dest=b.address)])
    a.post_send([WorkRequest(SEND, mtu, 2, dest=b.address)])


# ============================================================================ failures
fail_ops = st.lists(st.tuples(st.sampled_from([READ, WRITE, FAA]), st.integers(0, 4096),
                              st.booleans()), min_size=1, max_size=12)


@some
@given(profiles, fail_ops, fail_ops, fail_ops)
def test_node_failure_breaks_rc_qp_and_flushes(profile_name, before, during, after):
    """WRs completed before a peer fails stay successful; after ``fail_node`` the signaled
    WRs posted to it complete once each with an error (the first RETRY_EXC_ERR, the rest
    WR_FLUSH_ERR), the QP moves to ERR (calling on_error once), and later posts are flushed."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1)
    q._hw.timeout_ns = 50_000.0
    broken: list[QueuePair] = []
    q.on_error(broken.append)
    net.collect()

    def wrs(specs, tag):
        return [WorkRequest(op, 8 if op == FAA else n, (tag, j), sig, False, net.mr[0], 0,
                            net.mr[1].rkey, 0) for j, (op, n, sig) in enumerate(specs)]

    def sig_ids(specs, tag):
        return [(tag, j) for j, (_op, _n, sig) in enumerate(specs) if sig]

    def phase(specs, tag):
        def run():
            yield q.post_send(wrs(specs, tag))
        net.sim.process(run())
        net.sim.run(until=net.sim.now + 200_000)

    phase(before, "before")
    ok = list(net.wcs[0])
    assert all(w.ok for w in ok)
    assert Counter(w.wr_id for w in ok) == Counter(sig_ids(before, "before"))
    assert q.state == "RTS"

    net.cluster.fail_node(1)
    phase(during, "during")
    errs = net.wcs[0][len(ok):]
    assert Counter(w.wr_id for w in errs) == Counter(sig_ids(during, "during"))
    if errs:
        assert [w.status for w in errs] == [RETRY_EXC_ERR] + [WR_FLUSH_ERR] * (len(errs) - 1)
    assert q.state == "ERR" and broken == [q]

    n0 = len(net.wcs[0])
    phase(after, "after")
    flushed = net.wcs[0][n0:]
    assert Counter(w.wr_id for w in flushed) == Counter(sig_ids(after, "after"))
    assert all(w.status == WR_FLUSH_ERR for w in flushed)
    assert broken == [q]


@some
@example(profile_name="cx4-edr", fail_at=1200.0, n=4)
@example(profile_name="cx3-qdr", fail_at=1200.0, n=4)
@given(profiles, st.integers(0, 6000).map(float), st.integers(1, 6))
def test_wrs_complete_once_whenever_the_peer_fails(profile_name, fail_at, n):
    """Whenever the peer fails, every signaled WR completes exactly once: successfully if it
    was acknowledged before, otherwise with an error after the retry timeout."""
    net = build_net(profile_name, 2)
    q, _ = net.rc_pair(0, 1)
    timeout = q._hw.timeout_ns = 50_000.0
    seen = []                       # (time the poller saw it [ns], completion)

    def poll(cq=net.cq[0]):
        while True:
            wcs = yield cq.wait()
            seen.extend((net.sim.now, w) for w in wcs)

    net.sim.process(poll())
    q.post_send([WorkRequest(WRITE, 64, j, True, rkey=net.mr[1].rkey, data=bytes(64))
                 for j in range(n)])
    net.sim.call_at(fail_at, net.cluster.fail_node, 1)
    net.sim.run(until=1e6)
    assert [w.wr_id for _, w in seen] == list(range(n))     # once each, in order (RC)
    ok = [t for t, w in seen if w.ok]
    failed = [(t, w) for t, w in seen if not w.ok]
    # The acknowledged ones come first, and each was acknowledged before the peer failed
    # (its completion is seen within a timeout of the failure, long before any retry ends).
    assert all(w.ok for _, w in seen[:len(ok)])
    assert all(t < fail_at + timeout for t in ok)
    if failed:
        # The rest fail only after the retry timeout, the first as retries exhausted and
        # the others flushed, and the QP is broken.
        assert q.state == "ERR"
        assert [w.status for _, w in failed] == \
            [RETRY_EXC_ERR] + [WR_FLUSH_ERR] * (len(failed) - 1)
        assert failed[0][0] >= timeout


# ============================================================================ tracing
def test_first_use_of_a_qp_misses_the_context_cache_once(rc_pair, log):
    """The first WRITE on a fresh QP pair misses the QP-context cache once on each NIC (seen
    through the trace); a second WRITE hits on both."""
    p = rc_pair
    got: list[WorkCompletion] = []
    p.collect(0, got)

    def run():
        for i in range(2):
            yield p.qp[0].post_send([WorkRequest(WRITE, 64, i, rkey=p.mr[1].rkey,
                                                 data=bytes(64))])
            while len(got) <= i:
                yield p.sim.timeout(100)

    p.sim.process(run())
    p.sim.run(until=1e6)
    assert [w.wr_id for w in got] == [0, 1]
    qpc = [(t, name, scope, data["qpn"]) for t, name, scope, data in log
           if name in ("nic.qpc_miss", "nic.qpc_hit")]
    misses = [(name, scope, qpn) for _t, name, scope, qpn in qpc if name == "nic.qpc_miss"]
    assert misses == [("nic.qpc_miss", "n0/nic0/qpc", p.qp[0].qp_num),
                      ("nic.qpc_miss", "n1/nic0/qpc", p.qp[1].qp_num)]
    assert qpc[0][0] < qpc[1][0]          # the requester looks its QP up before the responder
    hits = {(scope, qpn) for _t, name, scope, qpn in qpc if name == "nic.qpc_hit"}
    assert hits == {("n0/nic0/qpc", p.qp[0].qp_num), ("n1/nic0/qpc", p.qp[1].qp_num)}
