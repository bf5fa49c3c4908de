"""Verb microbenchmarks: raw one-sided verbs and two-sided RPC, perftest-like.

Covers
    all-to-all (every node issues to every other) or client/server (the last ``servers``
    nodes only serve); verb (``read``, ``write``, ``cas``, ``faa``, ``send`` one-way
    messages, ``rpc`` request/reply); payload; QPs per peer; threads per node; coroutines
    per thread; outstanding requests per coroutine; doorbell batch; signaled every k;
    inline (up to ``inline_max`` bytes); dedicated or shared verbs context; page size.

Scenario
    Each thread uses NIC ``thread mod nics_per_node`` and runs an event loop: its
    coroutines each post ``outstanding`` requests (a request is ``signal_every`` WRs on one
    random QP, the last one signaled; ``doorbell_batch`` consecutive WRs share a doorbell),
    then wait for their completions; a coroutine switch costs the host's
    ``coroutine_switch``. One-sided requests go to a random QP, or with ``qp_choice:
    coroutine`` coroutine c always to QP c mod (QPs of the thread), as a coroutine that owns
    its connection. ``cq_layout: per_qp`` gives every QP its own CQ, polled as DrTM+H's
    ``RDMA_sched::poll_comps`` and RLib's scheduler do: each pass of the loop calls
    ``ibv_poll_cq`` once on the CQ of every coroutine with a request pending, so a pass
    that finds completions costs one ``poll_cq`` per pending coroutine (the shared layout:
    one ``poll_cq`` per pass), plus ``cqe_handle`` per completion. RPCs go to the same thread index on a random peer node over one
    UD QP per thread (or RC QPs, or RC WRITE-with-IMM); the peer's event loop runs the
    handler (``rpc_handler``) and posts the reply; the 4-byte immediate carries the header,
    so the payload is all user data. Over UD, all sends one loop iteration produces
    (replies and new requests) share doorbells of up to ``doorbell_batch`` WQEs, as in
    FaSST and DrTM+H (one UD QP per thread makes that possible).

Metrics
    ``throughput_mops`` (operations completed per issuing machine [M/s]),
    ``throughput_mops_total``, ``bandwidth_gbps`` (payload per issuing machine),
    ``lat_p50_us``/``lat_p90_us``/``lat_p99_us``/``lat_p999_us`` (posting to completion of
    signaled requests), ``qpc_miss_rate``, ``cpu_util`` (issuing threads' cores: mean busy
    share of the measured window), the NIC-side shares of :meth:`rnicsim.cluster.Cluster.utilization_meter` (``nic_pu_util``,
    ``nic_pu_util_max``, ``pcie_util_max``, ``wire_util_max``).

This module uses only :mod:`rnicsim.verbs` and the cluster builder, never ``rnicsim.hw``.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation, long_lived_heap
from rnicsim.verbs import (CAS, FAA, READ, RECV, RECV_RDMA_WITH_IMM, SEND_WITH_IMM, UD_GRH, WRITE,
                           WRITE_WITH_IMM, Context, WorkRequest)

VERBS = ("read", "write", "cas", "faa", "send", "rpc")
_OP = {"read": READ, "write": WRITE, "cas": CAS, "faa": FAA}


@dataclass
class MicrobenchSpec:
    """One microbenchmark point. Sizes in bytes, times in ns."""

    verb: str = "read"
    payload: int = 64
    transport: str = "rc"          # rpc/send: ud | rc | write_imm ; write also: uc
    rpc_direction: str = "read"    # rpc: which leg carries the payload (read: the reply)
    mode: str = "all_to_all"       # or client_server
    servers: int = 1
    qps_per_peer: int = 1
    threads: int = 1
    coroutines: int = 1
    outstanding: int = 1
    doorbell_batch: int = 1
    signal_every: int = 1
    inline: bool | None = None     # None: inline when the payload fits inline_max
    inline_max: int | None = None  # largest payload inlined [B]; None: the NIC's max_inline
    shared_context: bool = False
    page_size: int = 2 * 1024 * 1024
    region: int = 64 * 1024 * 1024
    rpc_handler: float = 0.0
    recv_depth: int = 256
    qp_choice: str = "random"      # one-sided: random | coroutine (coroutine c on QP c mod n)
    cq_layout: str = "shared"      # one-sided: shared | per_qp (see the module doc)

    def check(self) -> None:
        """Raise ValueError naming the field when the spec is impossible."""
        if self.verb not in VERBS:
            raise ValueError(f"verb: expected one of {', '.join(VERBS)}, got {self.verb!r}")
        if self.verb in ("rpc", "send") and self.transport not in ("ud", "rc", "write_imm"):
            raise ValueError("transport: rpc/send use ud, rc or write_imm")
        if self.verb in ("read", "cas", "faa") and self.transport != "rc":
            raise ValueError(f"transport: {self.verb} needs rc")
        if self.verb == "write" and self.transport not in ("rc", "uc"):
            raise ValueError("transport: write uses rc or uc")
        if self.mode not in ("all_to_all", "client_server"):
            raise ValueError("mode: expected all_to_all or client_server")
        for k in ("qps_per_peer", "threads", "coroutines", "outstanding", "doorbell_batch",
                  "signal_every", "servers"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k}: expected a whole number >= 1")
        if self.payload < 0:
            raise ValueError("payload: expected >= 0 bytes")
        if self.verb in ("cas", "faa") and self.payload != 8:
            raise ValueError("payload: atomics are 8 bytes")
        if self.payload > self.region:
            raise ValueError(f"payload: at most the size of the registered region "
                             f"(region: {self.region} B), got {self.payload} B")
        if self.qp_choice not in ("random", "coroutine"):
            raise ValueError("qp_choice: expected random or coroutine")
        if self.cq_layout not in ("shared", "per_qp"):
            raise ValueError("cq_layout: expected shared or per_qp")
        if (self.qp_choice, self.cq_layout) != ("random", "shared") and self.verb not in _OP:
            raise ValueError("qp_choice, cq_layout: only for one-sided verbs "
                             "(read, write, cas, faa)")


@dataclass
class _ThreadState:
    node: int
    index: int
    ctx: Any
    cq: Any
    thread: Any
    targets: list = field(default_factory=list)    # [(qp, rkey, region_len)]
    ud: Any = None
    rpc_qps: dict = field(default_factory=dict)    # peer node -> qp (RC rpc)
    unsig: dict = field(default_factory=dict)


class Microbench:
    """Builds the cluster's QPs for ``spec`` and runs the measured window."""

    def __init__(self, sim: Simulation, cluster: Cluster, spec: MicrobenchSpec) -> None:
        spec.check()
        self.sim = sim
        self.cluster = cluster
        self.spec = spec
        self.n = len(cluster.nodes)
        if spec.mode == "client_server" and spec.servers >= self.n:
            raise ValueError("servers: must leave at least one client node")
        self.servers = set(range(self.n - spec.servers, self.n)) \
            if spec.mode == "client_server" else set()
        self.clients = [n for n in range(self.n) if n not in self.servers]
        self.nics = len(cluster.nodes[0].nics)
        self.ops = 0
        self.bytes = 0
        self.threads: dict[tuple[int, int], _ThreadState] = {}
        # threads x nodes^2 QPs in all-to-all mode: built with the cyclic collector held
        # off, whose full collections would rescan every QP built so far (set-up grew
        # faster than the QPs); results do not depend on it (rnicsim.sim).
        with long_lived_heap():
            self._build()
        cluster.setup_done()

    # ------------------------------------------------------------------ set-up
    def _ctx(self, node: int, idx: int, shared: dict) -> Context:
        nic = idx % self.nics
        th = self.cluster.nodes[node].thread(idx)
        if self.spec.shared_context:
            key = (node, nic)
            if key not in shared:
                shared[key] = Context(self.cluster, node, nic, th)
            return shared[key]
        return Context(self.cluster, node, nic, th)

    def _build(self) -> None:
        sp, cl = self.spec, self.cluster
        shared: dict = {}
        mrs = {}
        for node in range(self.n):
            ctx0 = Context(cl, node, 0)
            mrs[node] = ctx0.reg_mr(sp.region, sp.page_size, name="microbench")
        self.mrs = mrs
        for node in range(self.n):
            for i in range(sp.threads):
                ctx = self._ctx(node, i, shared)
                th = cl.nodes[node].thread(i)
                cq = ctx.create_cq(th)
                self.threads[(node, i)] = _ThreadState(node, i, ctx, cq, th)
        one_sided = sp.verb in _OP
        ud = sp.verb in ("rpc", "send") and sp.transport == "ud"
        # A UD receive queue must hold every request peers can have in flight towards this
        # thread plus its own replies; otherwise messages are dropped (UD has no RNR).
        in_flight = sp.coroutines * sp.outstanding
        depth = max(sp.recv_depth, 2 * in_flight * self.n)
        for (node, i), ts in self.threads.items():
            if ud:
                ts.ud = ts.ctx.create_qp("UD", ts.cq, thread=ts.thread)
                self._post_recvs(ts.ud, depth)
        if ud:
            return
        qtype = "UC" if sp.transport == "uc" else "RC"
        for node in self.clients if sp.mode == "client_server" else range(self.n):
            peers = sorted(self.servers) if sp.mode == "client_server" else \
                [m for m in range(self.n) if m != node]
            for i in range(sp.threads):
                ts = self.threads[(node, i)]
                for m in peers:
                    rs = self.threads[(m, i)]
                    for _ in range(sp.qps_per_peer):
                        a = ts.ctx.create_qp(qtype, ts.cq, thread=ts.thread)
                        b = rs.ctx.create_qp(qtype, rs.cq, thread=rs.thread)
                        a.connect(b)
                        if one_sided:
                            ts.targets.append((a, mrs[m].rkey))
                        else:
                            ts.targets.append((a, m))
                            self._post_recvs(a, 2 * in_flight)
                            self._post_recvs(b, 2 * in_flight)
                            rs.rpc_qps.setdefault((node, "srv"), []).append(b)

    def _recv_len(self, qp) -> int:
        """Receive buffer [B] for this point's messages on ``qp`` (UD: plus the GRH space)."""
        return self.spec.payload + (UD_GRH if qp.type == "UD" else 0)

    def _post_recvs(self, qp, n: int) -> None:
        qp.post_recv([WorkRequest(RECV, self._recv_len(qp)) for _ in range(n)])

    # ------------------------------------------------------------------ run
    def start(self) -> None:
        """Start every thread's event loop (call after ``sim.measure`` and before running
        the simulation)."""
        sp = self.spec
        # cpu_util: the issuing threads' cores over the measured window.
        self._cpu = self.sim.cpu_meter(self.cluster.nodes[n].thread(i).core
                                       for n in self.clients for i in range(sp.threads))
        self._util = self.cluster.utilization_meter()
        for (node, i), ts in self.threads.items():
            issuing = node in self.clients
            if sp.verb in _OP:
                if issuing:
                    self.sim.process(self._one_sided_loop(ts))
            else:
                self.sim.process(self._rpc_loop(ts, issuing))

    def _inline_limit(self, ctx) -> int:
        sp = self.spec
        if sp.inline is False:
            return -1
        lim = ctx.max_inline if sp.inline_max is None else min(sp.inline_max, ctx.max_inline)
        return lim

    def _inline(self, ctx) -> bool:
        return self.spec.verb in ("write", "send", "rpc") and \
            self.spec.payload <= self._inline_limit(ctx)

    def _one_sided_loop(self, ts: _ThreadState):
        sp, sim = self.spec, self.sim
        op = _OP[sp.verb]
        rng = sim.rng(f"microbench/n{ts.node}/t{ts.index}")
        ntg = len(ts.targets)
        slots = max(1, (sp.region - sp.payload) // max(sp.payload, 64))
        inline = self._inline(ts.ctx) and op == WRITE
        k = sp.signal_every if op == WRITE else 1
        remaining = [0] * sp.coroutines
        host = ts.thread.host
        switch = host.coroutine_switch
        # per_qp: the poll_cq of the CQs a pass scans beyond the one CQ the wait charges
        scan = host.poll_cq if sp.cq_layout == "per_qp" else 0.0
        by_coroutine = sp.qp_choice == "coroutine"
        pending = [0]                      # coroutines with a request outstanding
        # Draws are made 4096 at a time and kept in int64 arrays of the standard library
        # (as compact as NumPy's, cheaper to index one at a time).
        buf_t = array("q", rng.integers(0, ntg, 4096, dtype=np.int64).tobytes())
        buf_o = array("q", rng.integers(0, slots, 4096, dtype=np.int64).tobytes())
        pos = [0]
        stride = max(sp.payload, 64)
        payload, outstanding, batch = sp.payload, sp.outstanding, sp.doorbell_batch
        targets = ts.targets

        def draw():
            p = pos[0]
            if p >= 4096:
                buf_t[:] = array("q", rng.integers(0, ntg, 4096, dtype=np.int64).tobytes())
                buf_o[:] = array("q", rng.integers(0, slots, 4096, dtype=np.int64).tobytes())
                p = 0
            pos[0] = p + 1
            return buf_t[p], buf_o[p] * stride

        def issue(c: int) -> None:
            remaining[c] = outstanding
            pending[0] += 1
            for _ in range(outstanding):
                ti, off = draw()
                if by_coroutine:
                    ti = c % ntg
                qp, rkey = targets[ti]
                if k == 1:
                    # One signaled WR: one doorbell (the common case, no list slicing).
                    qp.post_send([WorkRequest(op, payload, (c, 1), True, inline, None, 0,
                                              rkey, off, None, 0, 1)], event=False)
                    continue
                wrs = [WorkRequest(op, payload, (c, k), j == k - 1, inline, None, 0, rkey,
                                   off, None, 0, 1) for j in range(k)]
                for s in range(0, k, batch):
                    qp.post_send(wrs[s:s + batch], event=False)

        for c in range(sp.coroutines):
            issue(c)
        stats = sim.stats
        lat = None      # the latency histogram, created by the first measured sample
        cq = ts.cq
        while True:
            wcs = yield cq.wait()
            now = sim.now
            measuring = sim.measuring
            if scan and pending[0] > 1:
                # the pass that found these polled every pending coroutine's CQ once
                ts.thread.reserve(now, (pending[0] - 1) * scan)
            for wc in wcs:
                c, covered = wc.wr_id
                if measuring:
                    self.ops += covered
                    if lat is None:
                        lat = stats.hist("lat")
                    lat.add(now - wc.t_post)
                remaining[c] -= 1
                if remaining[c] == 0:
                    pending[0] -= 1
                    ts.thread.reserve(now, switch)
                    issue(c)

    def _rpc_loop(self, ts: _ThreadState, issuing: bool):
        """Event loop of a thread that issues RPCs (clients) and serves them (everyone)."""
        sp, sim = self.spec, self.sim
        rng = sim.rng(f"microbench/n{ts.node}/t{ts.index}")
        send_verb = sp.verb == "send"
        req_len = sp.payload if (sp.rpc_direction == "write" or send_verb) else 0
        rep_len = sp.payload if (sp.rpc_direction == "read" and not send_verb) else 0
        peers = sorted(self.servers) if sp.mode == "client_server" else \
            [m for m in range(self.n) if m != ts.node]
        op = WRITE_WITH_IMM if sp.transport == "write_imm" else SEND_WITH_IMM
        max_inl = self._inline_limit(ts.ctx)
        remaining = [0] * sp.coroutines
        switch = ts.thread.host.coroutine_switch
        consumed = {}
        # Re-post receive buffers in batches, but well before a QP's queue (2 x in-flight
        # buffers per RC QP) could run dry.
        repost_at = max(1, min(8, sp.coroutines * sp.outstanding))
        sends = [0]
        by_peer = {}
        for qp, m in ts.targets:
            by_peer.setdefault(m, []).append(qp)

        def sigbit() -> bool:
            sends[0] += 1
            return sends[0] % 16 == 0

        out: list = []   # UD sends of this loop iteration: one doorbell per batch

        def flush() -> None:
            b = sp.doorbell_batch
            for s0 in range(0, len(out), b):
                ts.ud.post_send(out[s0:s0 + b], event=False)
            out.clear()

        t_issue = [0.0] * sp.coroutines

        def issue(c: int) -> None:
            remaining[c] = sp.outstanding
            t_issue[c] = sim.now
            for j in range(sp.outstanding):
                m = peers[int(rng.integers(0, len(peers)))]
                imm = (c << 1)  # request: low bit 0
                if send_verb:
                    # One-way message: the coroutine's request is done when the send
                    # completes locally (UD) or is acknowledged (RC).
                    wr = WorkRequest(op, req_len, ("c", c), True, req_len <= max_inl,
                                     None, 0, None, 0, imm)
                else:
                    wr = WorkRequest(op, req_len, ("s", 0), sigbit(), req_len <= max_inl,
                                     None, 0, None, 0, imm)
                if ts.ud is not None:
                    wr.dest = self.threads[(m, ts.index)].ud.address
                    out.append(wr)
                else:
                    qps = by_peer[m]
                    qps[int(rng.integers(0, len(qps)))].post_send([wr], event=False)

        if issuing:
            for c in range(sp.coroutines):
                issue(c)
            if out:
                flush()
        handler = sp.rpc_handler
        while True:
            wcs = yield ts.cq.wait()
            now = sim.now
            for wc in wcs:
                if wc.opcode != RECV and wc.opcode != RECV_RDMA_WITH_IMM:
                    tag = wc.wr_id
                    if send_verb and tag[0] == "c":
                        c = tag[1]
                        if sim.measuring:
                            sim.stats.hist("lat").add(now - wc.t_post)
                        remaining[c] -= 1
                        if remaining[c] == 0:
                            ts.thread.reserve(now, switch)
                            issue(c)
                    continue  # otherwise a signaled send completing: its slot is reclaimed
                qpn = wc.qp_num
                consumed[qpn] = consumed.get(qpn, 0) + 1
                imm = wc.imm
                if send_verb or not imm & 1:
                    # A request (or a one-way message): serve it.
                    if send_verb:
                        if sim.measuring:
                            self.ops += 1
                        continue
                    if handler:
                        ts.thread.reserve(now, handler)
                    rep = WorkRequest(op, rep_len, ("s", 0), sigbit(), rep_len <= max_inl,
                                      None, 0, None, 0, imm | 1)
                    if ts.ud is not None:
                        rep.dest = wc.src
                        out.append(rep)
                    else:
                        self._reply_qp(ts, wc).post_send([rep], event=False)
                else:
                    c = imm >> 1
                    if sim.measuring:
                        self.ops += 1
                        sim.stats.hist("lat").add(now - t_issue[c])
                    remaining[c] -= 1
                    if remaining[c] == 0:
                        ts.thread.reserve(now, switch)
                        issue(c)
            if out:
                flush()
            for qpn, n in list(consumed.items()):
                if n >= repost_at:
                    qp = self._qp_by_num(ts, qpn)
                    qp.post_recv([WorkRequest(RECV, self._recv_len(qp)) for _ in range(n)],
                                 event=False)
                    consumed[qpn] = 0

    def _qp_by_num(self, ts: _ThreadState, qpn: int):
        cache = ts.unsig
        qp = cache.get(qpn)
        if qp is None:
            if ts.ud is not None and ts.ud.qp_num == qpn:
                qp = ts.ud
            else:
                for qps in ts.rpc_qps.values():
                    for q in qps:
                        cache[q.qp_num] = q
                for q, _m in ts.targets:
                    cache[q.qp_num] = q
                qp = cache[qpn]
            cache[qpn] = qp
        return qp

    def _reply_qp(self, ts: _ThreadState, wc):
        return self._qp_by_num(ts, wc.qp_num)

    # ------------------------------------------------------------------ results
    def results(self, window_ns: float) -> dict[str, float]:
        """Metrics of the measured window (see module doc)."""
        sp = self.spec
        issuing = len(self.clients)
        h = self.sim.stats.hist("lat").summary()
        total = self.ops / window_ns * 1e3  # ops/ns -> M ops/s
        acc, miss = self.cluster.qpc_counts()
        return {
            "throughput_mops": total / issuing,
            "throughput_mops_total": total,
            "bandwidth_gbps": total / issuing * sp.payload * 8 / 1e3,
            "lat_p50_us": h["p50"] / 1e3,
            "lat_p90_us": h["p90"] / 1e3,
            "lat_p99_us": h["p99"] / 1e3,
            "lat_p999_us": h["p999"] / 1e3,
            "qpc_miss_rate": miss / acc if acc else 0.0,
            "cpu_util": self._cpu(),
            **self._util(),
        }


def run_microbench(profile, spec: MicrobenchSpec, nodes: int = 2, nics_per_node: int = 1,
                   topology: dict | None = None, seed: int = 1, warmup_ns: float = 20_000,
                   measure_ns: float = 50_000) -> dict[str, float]:
    """Build a cluster, run ``spec`` for ``warmup_ns`` + ``measure_ns`` and return metrics.

    The window is stretched for large payloads as :func:`stretch_window` says.
    """
    warmup_ns, measure_ns = stretch_window(spec, profile, nodes, nics_per_node, warmup_ns,
                                           measure_ns)
    sim = Simulation(seed)
    cluster = Cluster(sim, profile, nodes, nics_per_node, topology=topology)
    mb = Microbench(sim, cluster, spec)
    sim.measure(warmup_ns, measure_ns)
    mb.start()
    sim.run(until=warmup_ns + measure_ns)
    return mb.results(measure_ns)


def spec_of(sc) -> MicrobenchSpec:
    """The :class:`MicrobenchSpec` of a scenario point (``transport: auto`` resolved:
    ``ud`` for rpc/send, ``rc`` otherwise; ``threads`` from ``cluster.threads``)."""
    w = sc.workload
    transport = w.transport
    if transport == "auto":
        transport = "ud" if w.verb in ("rpc", "send") else "rc"
    return MicrobenchSpec(
        verb=w.verb, payload=w.payload, transport=transport,
        rpc_direction=w.rpc_direction, mode=w.mode, servers=w.servers,
        qps_per_peer=w.qps_per_peer, threads=sc.cluster.threads, coroutines=w.coroutines,
        outstanding=w.outstanding, doorbell_batch=w.doorbell_batch,
        signal_every=w.signal_every, inline=w.inline, inline_max=w.inline_max,
        shared_context=w.shared_context,
        page_size=w.page_size, region=w.region, rpc_handler=w.rpc_handler,
        qp_choice=w.qp_choice, cq_layout=w.cq_layout)


def _key_path(field: str) -> str:
    """The scenario key path of a :class:`MicrobenchSpec` field."""
    return "cluster.threads" if field == "threads" else f"workload.{field}"


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when ``profile`` cannot run this point.

    Besides the cluster and profile checks below, the point's :class:`MicrobenchSpec`
    must pass :meth:`MicrobenchSpec.check` (its field names become key paths), so that
    nothing the scenario says can fail once the point runs."""
    w = sc.workload
    if sc.cluster.nodes < 2:
        raise ValueError(f"cluster.nodes: at least 2 (every issuing node needs a peer), "
                         f"got {sc.cluster.nodes}")
    if w.mode == "client_server" and w.servers >= sc.cluster.nodes:
        raise ValueError(f"workload.servers: fewer than cluster.nodes ({sc.cluster.nodes}), "
                         f"leaving a client node, got {w.servers}")
    ud = w.verb in ("rpc", "send") and w.transport in ("ud", "auto")
    if ud and w.payload > profile.link.mtu:
        raise ValueError(f"workload.payload: at most the MTU of {profile.name} "
                         f"({profile.link.mtu} B) for UD messages, got {w.payload} B")
    try:
        spec_of(sc).check()
    except ValueError as e:
        fields, _, what = str(e).partition(": ")
        keys = ", ".join(_key_path(f.strip()) for f in fields.split(","))
        raise ValueError(f"{keys}: {what}") from None


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Run one point of a scenario whose workload kind is ``microbench``."""
    spec = spec_of(sc)
    warmup, measure = stretch_window(spec, profile, sc.cluster.nodes, sc.cluster.nic.per_node,
                                     sc.run.warmup, sc.run.measure)
    sim = Simulation(sc.run.seed)
    cluster = Cluster(sim, profile, sc.cluster.nodes, sc.cluster.nic.per_node,
                      cores=sc.cluster.cores, topology=sc.cluster.topology.model_dump())
    mb = Microbench(sim, cluster, spec)
    sim.measure(warmup, measure)
    # RoCE: the window's PFC/ECN counters (pause_frames, pause_time_us, ...) as metrics.
    pfc = cluster.fabric.pfc_window(sim, warmup) if profile.link.kind == "roce" else None
    mb.start()
    sim.run(until=warmup + measure)
    out = mb.results(measure)
    out["measure_us"] = measure / 1e3
    if pfc is not None:
        out.update(pfc())
    return out


def stretch_window(spec: MicrobenchSpec, profile, nodes: int, nics_per_node: int,
                   warmup: float, measure: float) -> tuple[float, float]:
    """Warm-up and measured window [ns], stretched for large payloads.

    Throughput counts completions, so the window must outlast the queueing of everything
    in flight: the warm-up is at least twice, and the window four times, the time one
    node's whole request window takes to cross its links at line rate.
    """
    issuing = nodes if spec.mode == "all_to_all" else max(1, nodes - spec.servers)
    window_bytes = spec.threads * spec.coroutines * spec.outstanding * \
        (spec.payload + 64) * max(1, issuing // max(1, nodes - issuing or nodes))
    drain = window_bytes * 8e9 / (profile.link.rate * nics_per_node)
    return max(warmup, 2 * drain), max(measure, 4 * drain)
