"""Remote reads on a RoCE cluster: the verb choices of the RoCE cluster configuration
paper (APNet'19), from mechanism.

Covers
    Ways to fetch an object of ``payload`` bytes from a server's memory (RoCE cluster
    configuration sec. 2.2, 4.1), each named ``<request>/<reply>-<completion>`` as the
    paper does:

    ``read_intr``        one-sided READ; the client sleeps on its completion queue
                         (interrupts).
    ``read_poll``        one-sided READ; the client spins until the data is there. The
                         paper polls the destination buffer; the model busy-polls the
                         completion queue instead: the NIC writes the CQE one PCIe TLP
                         after the data (posted writes stay in order), so the two differ
                         by tens of ns.
    ``read_intr_2/3/4``  pointer chasing: 1, 2 or 3 dependent ``pointer``-byte READs,
                         then the READ of the object, each waited for with interrupts.
    ``write_send_poll``  compound read as HERD: the client WRITEs a ``request``-byte
                         request (UC, inline) into a slot of the server's memory; a
                         server process spinning on its request slots sees it and SENDs
                         the object back (UD; RC beyond the MTU); the client busy-polls
                         its receive queue.
    ``send_send_intr``   request and reply are SENDs (UD; RC beyond the MTU); both sides
                         sleep on interrupts.
    ``send_send_poll``   as ``send_send_intr`` with busy polling on both sides.

    Unreliable transports and inlining are used whenever possible (sec. 3: only WRITEs
    and SENDs may be unreliable; at most ``max_inline`` bytes inline).

Scenario
    Node 0 is the server with ``server_procs`` processes (process ``p`` pinned to core
    ``p``); nodes ``1..clients`` are clients, one thread each, each connected to
    ``conns_per_client`` server processes (client ``c`` to processes ``c, c+1, ...`` mod
    ``server_procs``) and keeping ``window`` requests outstanding on every connection.
    ``cpu_hogs_per_core`` CPU-bound processes run on every core of every node (time
    slicing, :func:`rnicsim.verbs.add_cpu_hogs`). ``background_flows`` bulk flows of
    another application on the server each WRITE ``background_size`` bytes to a client
    (one outstanding per flow, back to back) through the same NIC. ``rdma_mtu`` is the
    path MTU the application sets on its QPs (``ibv_mtu``, at most 4096 on the
    ConnectX-3); the Ethernet frames follow from it (1024 fits a 1500-B frame, 4096 needs
    jumbo frames). Unset, the profile's ``link.mtu`` applies.

Metrics
    ``throughput_mops`` (objects fetched by all clients [M/s]), ``bandwidth_gbps``
    (object bytes [Gb/s]), ``lat_mean_us``, ``lat_p50_us``, ``lat_p90_us``,
    ``lat_p99_us`` (first post to the object in hand [us]), ``lat_excess_us`` (mean
    latency minus the object's serialisation time at the link's data rate [us]: what
    grows faster than the wire), ``cpu_client`` (cores busy over the measured window
    per client node), ``cpu_server`` (cores busy on the server for this application: a
    spinning thread counts for the share of the core the scheduler gives it),
    ``background_gbps`` (bulk flows' goodput [Gb/s]), the NIC-side shares of :meth:`rnicsim.cluster.Cluster.utilization_meter` (``nic_pu_util``,
    ``nic_pu_util_max``, ``pcie_util_max``, ``wire_util_max``).

This module uses only :mod:`rnicsim.verbs`, the cluster builder and the clock, never
``rnicsim.hw``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import (READ, RECV, SEND_WITH_IMM, UD_GRH, WRITE, Context, WorkRequest,
                           add_cpu_hogs)

METHODS = ("read_intr", "read_poll", "read_intr_2", "read_intr_3", "read_intr_4",
           "write_send_poll", "send_send_intr", "send_send_poll")
MiB = 1024 * 1024
# Bytes of every receive buffer (clients' and server processes'): a 4 KiB message plus the
# 40-B GRH space of a UD buffer. A SEND longer than this (over RC) fails.
RECV_BYTES = 4096 + UD_GRH


@dataclass
class RemoteReadSpec:
    """One point. Sizes in bytes."""

    method: str = "read_intr"
    payload: int = 64                # object size [B]
    clients: int = 16
    server_procs: int = 8
    conns_per_client: int = 1
    window: int = 16                 # outstanding requests per connection
    request: int = 32                # request message of compound reads [B]
    pointer: int = 8                 # each pointer READ of read_intr_k [B]
    cpu_hogs_per_core: int = 0
    background_flows: int = 0
    background_size: int = 4 * MiB   # [B]
    region: int = 64 * MiB           # server object region [B]

    def check(self) -> None:
        """Raise ValueError("field: expected ...") when the spec is impossible."""
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {', '.join(METHODS)}, "
                             f"got {self.method!r}")
        for k in ("clients", "server_procs", "conns_per_client", "window", "request",
                  "pointer", "background_size"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k}: expected a whole number >= 1")
        for k in ("payload", "cpu_hogs_per_core", "background_flows"):
            if getattr(self, k) < 0:
                raise ValueError(f"{k}: expected a whole number >= 0")
        if self.conns_per_client > self.server_procs:
            raise ValueError("conns_per_client: at most server_procs")
        if self.window * max(self.payload, 64) * self.clients * self.conns_per_client \
                > self.region:
            raise ValueError("region: too small for every outstanding object")
        if not self.one_sided and self.payload > RECV_BYTES:
            raise ValueError(f"payload: at most {RECV_BYTES} B with method {self.method} "
                             f"(the reply SEND lands in a {RECV_BYTES}-B receive buffer), "
                             f"got {self.payload} B")
        if self.method.startswith("send_send") and self.request > RECV_BYTES:
            raise ValueError(f"request: at most {RECV_BYTES} B with method {self.method} "
                             f"(the request SEND lands in a {RECV_BYTES}-B receive buffer), "
                             f"got {self.request} B")

    @property
    def depth(self) -> int:
        """READs per object (1, or 2-4 for pointer chasing)."""
        return int(self.method[-1]) if self.method.startswith("read_intr_") else 1

    @property
    def one_sided(self) -> bool:
        """True for the READ methods (served by the server's NIC, no server thread)."""
        return self.method.startswith("read")


@dataclass
class _Conn:
    idx: int                 # index among the client's connections
    proc: int                # server process
    qp: Any = None           # client side: READ (RC), request WRITE (UC) or SEND (RC)
    srv_qp: Any = None       # server side of qp
    base: int = 0            # first object/request slot offset of this connection
    t0: list = field(default_factory=list)   # start of each slot's object [ns]
    step: list = field(default_factory=list)
    rep_qp: Any = None       # write_send_poll beyond the MTU: server side of the reply RC QP
    rep_cli: Any = None      # ... and its client side


@dataclass
class _Client:
    node: int
    ctx: Any
    cq: Any
    thread: Any
    ud: Any = None
    conns: list = field(default_factory=list)
    recv_qps: dict = field(default_factory=dict)   # qpn -> QP that takes replies


@dataclass
class _Proc:
    index: int
    ctx: Any
    cq: Any
    thread: Any
    mr: Any
    ud: Any = None


class RemoteReads:
    """Builds the server, clients and background flows of ``spec`` (see module doc)."""

    def __init__(self, sim: Simulation, cluster: Cluster, spec: RemoteReadSpec) -> None:
        spec.check()
        if len(cluster.nodes) < spec.clients + 1:
            raise ValueError(f"clients: at most cluster.nodes - 1 "
                             f"({len(cluster.nodes) - 1})")
        self.sim, self.cluster, self.spec = sim, cluster, spec
        self.ops = 0
        self.bg_bytes = 0
        self.lat = sim.stats.hist("roce_reads/lat")
        self._build()
        if spec.cpu_hogs_per_core:
            add_cpu_hogs(cluster, spec.cpu_hogs_per_core)
        cluster.setup_done()

    # ------------------------------------------------------------------ set-up
    def _build(self) -> None:
        sp, cl = self.spec, self.cluster
        m = sp.method
        intr_client = m in ("read_intr", "read_intr_2", "read_intr_3", "read_intr_4",
                            "send_send_intr")
        self.procs: list[_Proc] = []
        for p in range(sp.server_procs):
            th = cl.nodes[0].thread(p)
            ctx = Context(cl, 0, 0, th)
            cq = ctx.create_cq()
            if m == "send_send_intr":
                cq.use_interrupts()
            self.procs.append(_Proc(p, ctx, cq, th, ctx.reg_mr(sp.region, name="objects")))
        mtu = self.procs[0].ctx.mtu
        self.max_inline = self.procs[0].ctx.max_inline
        # Unreliable datagrams when the message fits one packet, else a connection.
        self.ud = sp.payload <= mtu and sp.request <= mtu
        two_sided = not sp.one_sided
        if two_sided and self.ud:
            for pr in self.procs:
                pr.ud = pr.ctx.create_qp("UD", pr.cq)
        slot = max(sp.payload, 64)
        self.clients: list[_Client] = []
        nconn = 0
        for ci in range(sp.clients):
            node = ci + 1
            th = cl.nodes[node].thread(0)
            ctx = Context(cl, node, 0, th)
            cq = ctx.create_cq()
            if intr_client:
                cq.use_interrupts()
            c = _Client(node, ctx, cq, th)
            if two_sided and self.ud:
                c.ud = ctx.create_qp("UD", cq)
                self._recvs(c.ud, 2 * sp.window * sp.conns_per_client + 16)
            for k in range(sp.conns_per_client):
                pr = self.procs[(ci + k) % sp.server_procs]
                conn = _Conn(k, pr.index, base=nconn * sp.window * slot)
                conn.t0 = [0.0] * sp.window
                conn.step = [0] * sp.window
                nconn += 1
                if sp.one_sided or m == "write_send_poll" or not self.ud:
                    qtype = "UC" if m == "write_send_poll" else "RC"
                    conn.qp = ctx.create_qp(qtype, cq)
                    conn.srv_qp = pr.ctx.create_qp(qtype, pr.cq)
                    conn.qp.connect(conn.srv_qp)
                if m == "write_send_poll" and not self.ud:
                    # Replies beyond one packet go over an RC connection.
                    conn.rep_qp = pr.ctx.create_qp("RC", pr.cq)
                    conn.rep_cli = ctx.create_qp("RC", cq)
                    conn.rep_qp.connect(conn.rep_cli)
                    self._recvs(conn.rep_cli, 2 * sp.window + 16)
                elif two_sided and not self.ud:
                    self._recvs(conn.qp, 2 * sp.window + 16)
                    self._recvs(conn.srv_qp, 2 * sp.window + 16)
                c.conns.append(conn)
                rq = conn.rep_cli if conn.rep_cli is not None else conn.qp
                if rq is not None:
                    c.recv_qps[rq.qp_num] = rq
            if c.ud is not None:
                c.recv_qps[c.ud.qp_num] = c.ud
            self.clients.append(c)
        if two_sided and self.ud:
            per_proc = -(-sp.clients * sp.conns_per_client // sp.server_procs)
            for pr in self.procs:
                self._recvs(pr.ud, 2 * sp.window * per_proc + 16)
        # Background bulk flows: another application on the server's NIC.
        self.bg = []
        if sp.background_flows:
            th = cl.nodes[0].thread(sp.server_procs)
            ctx = Context(cl, 0, 0, th)
            cq = ctx.create_cq()
            for f in range(sp.background_flows):
                c = self.clients[f % sp.clients]
                dst_mr = c.ctx.reg_mr(sp.background_size, name="bulk")
                a = ctx.create_qp("RC", cq)
                b = c.ctx.create_qp("RC", c.cq)
                a.connect(b)
                self.bg.append((a, dst_mr))
            self.bg_cq = cq

    @staticmethod
    def _recvs(qp, n: int) -> None:
        # Receive buffers are re-posted 8 at a time, so every queue holds twice what can
        # be in flight towards it plus 16 (a UD message finding none is dropped).
        qp.post_recv([WorkRequest(RECV, RECV_BYTES) for _ in range(n)])

    # ------------------------------------------------------------------ run
    def start(self) -> None:
        """Start clients, server processes and background flows (after ``sim.measure``)."""
        sp, sim = self.spec, self.sim
        # CPU over the measured window: the clients' cores, the server processes' cores.
        self._cpu_clients = sim.cpu_meter(c.thread.core for c in self.clients)
        self._cpu_procs = sim.cpu_meter(p.thread.core for p in self.procs)
        self._util = self.cluster.utilization_meter()
        self._proc_cores = len({id(p.thread.core) for p in self.procs})
        for c in self.clients:
            sim.process(self._client(c))
        if sp.method == "write_send_poll":
            for c in self.clients:
                for conn in c.conns:
                    for s in range(sp.window):
                        self._watch(c, conn, s)
        elif not sp.one_sided:
            for pr in self.procs:
                sim.process(self._server(pr))
        if self.bg:
            sim.process(self._background())

    def _issue(self, c: _Client, conn: _Conn, s: int, first: bool) -> None:
        """Post the next message of slot ``s`` of ``conn``."""
        sp = self.spec
        if first:
            conn.t0[s] = self.sim.now
            conn.step[s] = 0
        off = conn.base + s * max(sp.payload, 64)
        pr = self.procs[conn.proc]
        if sp.one_sided:
            last = conn.step[s] == sp.depth - 1
            n = sp.payload if last else sp.pointer
            conn.qp.post_send([WorkRequest(READ, n, (conn.idx, s), True, False, None, 0,
                                           pr.mr.rkey, off)], event=False)
            return
        imm = conn.idx * sp.window + s
        if sp.method == "write_send_poll":
            conn.qp.post_send([WorkRequest(WRITE, sp.request, None, False,
                                           sp.request <= self.max_inline, None, 0,
                                           pr.mr.rkey, off)], event=False)
            return
        wr = WorkRequest(SEND_WITH_IMM, sp.request, None, False,
                         sp.request <= self.max_inline, imm=imm)
        if self.ud:
            wr.dest = pr.ud.address
            c.ud.post_send([wr], event=False)
        else:
            conn.qp.post_send([wr], event=False)

    def _done(self, conn: _Conn, s: int, now: float) -> None:
        if self.sim.measuring:
            self.ops += 1
            self.lat.add(now - conn.t0[s])

    def _client(self, c: _Client):
        sp, sim = self.spec, self.sim
        for conn in c.conns:
            for s in range(sp.window):
                self._issue(c, conn, s, True)
        consumed: dict = {}
        while True:
            wcs = yield c.cq.wait()
            now = sim.now
            for wc in wcs:
                if wc.opcode == RECV:
                    k, s = divmod(wc.imm, sp.window)
                    conn = c.conns[k]
                    consumed[wc.qp_num] = consumed.get(wc.qp_num, 0) + 1
                    self._done(conn, s, now)
                    self._issue(c, conn, s, True)
                    continue
                if wc.wr_id is None:
                    continue
                k, s = wc.wr_id
                conn = c.conns[k]
                if conn.step[s] < sp.depth - 1:
                    conn.step[s] += 1
                    self._issue(c, conn, s, False)
                else:
                    self._done(conn, s, now)
                    self._issue(c, conn, s, True)
            self._repost(c, consumed)

    def _repost(self, c: _Client, consumed: dict) -> None:
        for qpn, n in consumed.items():
            if n >= 8:
                qp = c.recv_qps[qpn]
                qp.post_recv([WorkRequest(RECV, RECV_BYTES) for _ in range(n)], event=False)
                consumed[qpn] = 0

    def _reply(self, pr: _Proc, c: _Client, conn: _Conn, imm: int, src=None) -> None:
        sp = self.spec
        wr = WorkRequest(SEND_WITH_IMM, sp.payload, None, False,
                         sp.payload <= self.max_inline, imm=imm)
        if self.ud:
            wr.dest = src if src is not None else c.ud.address
            pr.ud.post_send([wr], event=False)
        elif sp.method == "write_send_poll":
            conn.rep_qp.post_send([wr], event=False)
        else:
            conn.srv_qp.post_send([wr], event=False)

    def _watch(self, c: _Client, conn: _Conn, s: int) -> None:
        """write_send_poll: the server process spins on the request slot ``s``."""
        pr = self.procs[conn.proc]
        off = conn.base + s * max(self.spec.payload, 64)
        ev = pr.ctx.poll_memory(pr.mr, off, pr.thread)

        def serve(_ev) -> None:
            self._reply(pr, c, conn, conn.idx * self.spec.window + s)
            self._watch(c, conn, s)

        ev.callbacks.append(serve)

    def _server(self, pr: _Proc):
        """send_send_*: the server process answers each request SEND with a reply SEND."""
        sp = self.spec
        consumed: dict = {}
        by_qpn = {}
        for c in self.clients:
            for conn in c.conns:
                if conn.proc == pr.index:
                    if conn.srv_qp is not None:
                        by_qpn[conn.srv_qp.qp_num] = (c, conn)
        while True:
            wcs = yield pr.cq.wait()
            for wc in wcs:
                if wc.opcode != RECV:
                    continue
                consumed[wc.qp_num] = consumed.get(wc.qp_num, 0) + 1
                if self.ud:
                    self._reply(pr, None, None, wc.imm, wc.src)
                else:
                    c, conn = by_qpn[wc.qp_num]
                    self._reply(pr, c, conn, wc.imm)
            for qpn, n in consumed.items():
                if n >= 8:
                    qp = pr.ud if self.ud else by_qpn[qpn][1].srv_qp
                    qp.post_recv([WorkRequest(RECV, RECV_BYTES) for _ in range(n)],
                                 event=False)
                    consumed[qpn] = 0

    def _background(self):
        sp, sim = self.spec, self.sim
        for i, (qp, mr) in enumerate(self.bg):
            qp.post_send([WorkRequest(WRITE, sp.background_size, i, True, False, None, 0,
                                      mr.rkey, 0)], event=False)
        while True:
            wcs = yield self.bg_cq.wait()
            for wc in wcs:
                if sim.measuring:
                    self.bg_bytes += sp.background_size
                qp, mr = self.bg[wc.wr_id]
                qp.post_send([WorkRequest(WRITE, sp.background_size, wc.wr_id, True, False,
                                          None, 0, mr.rkey, 0)], event=False)

    # ------------------------------------------------------------------ results
    def results(self, window_ns: float) -> dict[str, float]:
        """Metrics of the measured window (see module doc)."""
        sp = self.spec
        h = self.lat.summary()
        mops = self.ops / window_ns * 1e3
        share = 1.0 / (1 + sp.cpu_hogs_per_core)   # a spinning thread's share of its core
        m = sp.method
        if m in ("read_poll", "write_send_poll", "send_send_poll"):
            cpu_client = share
        else:
            cpu_client = self._cpu_clients()
        if m in ("write_send_poll", "send_send_poll"):
            cpu_server = share * sp.server_procs
        elif m == "send_send_intr":
            cpu_server = self._cpu_procs() * self._proc_cores
        else:
            cpu_server = 0.0
        wire_us = sp.payload * 8 / self.cluster.profile.link.rate * 1e6
        return {
            "throughput_mops": mops,
            "bandwidth_gbps": mops * sp.payload * 8 / 1e3,
            "lat_mean_us": h["mean"] / 1e3,
            "lat_p50_us": h["p50"] / 1e3,
            "lat_p90_us": h["p90"] / 1e3,
            "lat_p99_us": h["p99"] / 1e3,
            "lat_excess_us": h["mean"] / 1e3 - wire_us,
            "cpu_client": min(1.0, cpu_client),
            "cpu_server": cpu_server,
            "background_gbps": self.bg_bytes * 8 / window_ns,
            **self._util(),
        }


def run_remote_reads(profile, spec: RemoteReadSpec, nodes: int | None = None, seed: int = 1,
                     warmup_ns: float = 50_000, measure_ns: float = 200_000,
                     topology: dict | None = None) -> dict[str, float]:
    """Build a cluster (``clients + 1`` nodes unless given), run ``spec``, return metrics.

    ``warmup_ns`` and ``measure_ns`` [ns]; metrics as in the module doc (throughput
    [M/s], bandwidths [Gb/s], latencies [us], CPU in cores)."""
    sim = Simulation(seed)
    cluster = Cluster(sim, profile, nodes or spec.clients + 1, 1, topology=topology)
    rr = RemoteReads(sim, cluster, spec)
    sim.measure(warmup_ns, measure_ns)
    rr.start()
    sim.run(until=warmup_ns + measure_ns)
    return rr.results(measure_ns)


def _spec(w) -> RemoteReadSpec:
    return RemoteReadSpec(
        method=w.method, payload=w.payload, clients=w.clients, server_procs=w.server_procs,
        conns_per_client=w.conns_per_client, window=w.window, request=w.request,
        pointer=w.pointer, cpu_hogs_per_core=w.cpu_hogs_per_core,
        background_flows=w.background_flows, background_size=w.background_size,
        region=w.region)


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when the cluster or profile cannot run the point."""
    w = sc.workload
    if sc.cluster.nodes < w.clients + 1:
        raise ValueError(f"workload.clients: at most cluster.nodes - 1 "
                         f"({sc.cluster.nodes - 1}), got {w.clients}")
    if w.server_procs > profile.host.cores:
        raise ValueError(f"workload.server_procs: at most the {profile.host.cores} cores "
                         f"of {profile.name}, got {w.server_procs}")
    try:
        _spec(w).check()
    except ValueError as e:
        raise ValueError(f"workload.{e}") from None


def _with_mtu(w, profile):
    if w.rdma_mtu is None or w.rdma_mtu == profile.link.mtu:
        return profile
    return profile.with_overrides({"link.mtu": w.rdma_mtu}, "workload.rdma_mtu")


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Run one point of a scenario whose workload kind is ``remote_read``."""
    profile = _with_mtu(sc.workload, profile)
    sim = Simulation(sc.run.seed)
    cluster = Cluster(sim, profile, sc.cluster.nodes, sc.cluster.nic.per_node,
                      cores=sc.cluster.cores, topology=sc.cluster.topology.model_dump())
    rr = RemoteReads(sim, cluster, _spec(sc.workload))
    sim.measure(sc.run.warmup, sc.run.measure)
    pfc = cluster.fabric.pfc_window(sim, sc.run.warmup) if profile.link.kind == "roce" else None
    rr.start()
    sim.run(until=sc.run.warmup + sc.run.measure)
    out = rr.results(sc.run.measure)
    if pfc is not None:
        out.update(pfc())      # the window's PFC/ECN counters
    return out


# --------------------------------------------------------------------------- scenario kind
from typing import Literal  # noqa: E402

from pydantic import BaseModel, ConfigDict, Field, field_validator  # noqa: E402

from rnicsim.scenario import Size, register_workload  # noqa: E402
from rnicsim.units import parse_bytes  # noqa: E402


class RemoteReadWorkload(BaseModel):
    """Scenario schema of workload kind ``remote_read`` (see module doc; sizes in bytes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["remote_read"]
    method: Literal[METHODS] = "read_intr"  # type: ignore[valid-type]
    payload: Size = 64
    clients: int = Field(16, ge=1)
    server_procs: int = Field(8, ge=1)
    conns_per_client: int = Field(1, ge=1)
    window: int = Field(16, ge=1)
    request: Size = Field(32, ge=1)
    pointer: Size = Field(8, ge=1)
    cpu_hogs_per_core: int = Field(0, ge=0, le=16)
    background_flows: int = Field(0, ge=0)
    background_size: Size = Field(4 * MiB, ge=1)
    region: Size = Field(64 * MiB, ge=4096)
    rdma_mtu: Literal[256, 512, 1024, 2048, 4096] | None = None

    @field_validator("rdma_mtu", mode="before")
    @classmethod
    def _mtu(cls, v):
        return parse_bytes(v) if isinstance(v, str) else v


register_workload("remote_read", RemoteReadWorkload, "workloads.roce_reads:run_scenario_point")
