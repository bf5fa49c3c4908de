"""Multi-object micro-benchmark of DrTM+H: one-sided vs two-sided under the optimizations.

Scope
    DrTM+H (OSDI'18) sec. 4.2 "Micro-benchmarks" (fig. 6) and sec. 7 (fig. 16,
    18, 20): every transaction touches ``objects`` records of ``payload`` bytes, each on a
    remote node drawn uniformly among the other nodes; ``op: read`` models the execution
    phase (fetch the records), ``op: write`` the commit phase (write the updates back).
    Every worker thread of every node runs ``coroutines`` transactions at a time
    (all to all, symmetric).

    - ``one_sided``: a READ (or WRITE) per object on the RC QP of the issuing thread to
      the same thread index of the target node (:class:`protocols.rpc.Mesh`); the record
      sits at a random offset of a region registered on every node. A WRITE payload under
      64 B is inlined (DrTM+H sec. 4.1), as in :mod:`protocols.txn.occ`.
    - ``two_sided``: an RPC per object over the thread's UD QP
      (:class:`protocols.rpc.Endpoint`): the request names the object (``key`` bytes, plus
      the payload for a write), the handler runs on the target thread's core (the RPC
      layer's dispatch cost plus ``handler``), the reply carries the payload (read) or
      nothing (write: an acknowledgement).

    The optimizations of fig. 6's x-axis, applied cumulatively in the paper:

    ======================  ================================  ==============================
    option                  one-sided                         two-sided
    ======================  ================================  ==============================
    baseline                1 coroutine, one object at a time (post, wait, post, ...)
    ``coroutines`` > 1      other transactions run while one waits (coroutine switch)
    ``outstanding``         all objects posted, then one wait for all of them
    ``doorbell``            one doorbell per QP for the WRs   requests of a step share
                            to the same node (RC: batching    doorbells of up to
                            only per destination QP)          ``doorbell_batch`` (one UD QP)
    ``passive_ack``         only the last WRITE posted is     requests sent with no reply;
    (writes only)           signaled; the coroutine waits     the coroutine does not wait
                            for that one completion           (see flow control below)
    ======================  ================================  ==============================

    Two-sided replies are batched at every step: the replies the handlers of one poll of
    the event loop produce leave together, up to 16 per doorbell, whatever the requests do
    (rlib's ``UDMsg::poll_comps`` flushes the replies its callbacks queued; see
    :mod:`protocols.rpc`). The ``doorbell`` option is the requests' side: DrTM+H's
    multi-object RPC benchmark (``src/app/micro_benches/micro_rpc.cc``,
    ``micro_rpc_write_multi``) sends a request alone with ``RRpc::append_req`` (one WR per
    ``ibv_post_send``, steps 0-2) or queues the 10 with ``append_pending_req`` and posts
    them with one ``flush_pending`` (step 3).

    Two-sided passive ACK, flow control: a thread may have at most ``coroutines x
    objects`` requests that no handler has consumed yet (what its coroutines hold in flight
    without passive ACK, and what the receive queues are sized for: UD drops a message
    that finds no RECV). A handler consuming a request returns its credit at once, with no
    message of its own: in this symmetric workload the acknowledgement rides on traffic
    going the other way (DrTM+H fig. 4). A transaction with passive ACK is done, for
    throughput and latency, when the last of its requests has been handled.

    Not modelled: the bookkeeping of posted requests that doorbell batching adds to
    one-sided code (DrTM+H sec. 4.2) -- no cost is invented for it; record contents and
    conflicts (no locking: a pure primitive benchmark); local objects (every object is
    remote).

Ports
    :class:`MultiObjWorkload` (scenario workload kind ``multiobj``, registered on import),
    :func:`run_multiobj` (one point), :func:`run_scenario_point`,
    :func:`check_scenario_point`, :class:`MultiObjBench` (build, start, results).

Params
    See the fields of :class:`MultiObjWorkload`; sizes [B], times [ns].

Metrics
    ``throughput_mtxns`` (transactions completed by the cluster [M/s]: objects finished
    in the window / ``objects``, which stays unbiased when a transaction lasts a good part
    of the window; a transaction with ``coroutines`` x 10 round trips can),
    ``throughput_mtxns_per_node``, ``throughput_mops_per_node`` (objects x transactions
    per node [M/s]), ``lat_p50_us``/``lat_p90_us``/``lat_p99_us`` (transaction start to
    done [us], over the transactions that finish inside the window: NaN when none does),
    ``cpu_util`` (worker cores' mean busy share of the measured window), ``step`` (position on fig. 6's x-axis:
    0 baseline, 1 +coroutines, 2 +outstanding, 3 +doorbell, 4 +passive ACK; -1 when the
    options are not a cumulative prefix), ``measure_us``, the NIC-side shares of :meth:`rnicsim.cluster.Cluster.utilization_meter` (``nic_pu_util``,
    ``nic_pu_util_max``, ``pcie_util_max``, ``wire_util_max``).

This module uses only :mod:`rnicsim.verbs`, the cluster builder, the RPC layer and the
runtime (never ``rnicsim.hw``).
"""
from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rnicsim.scenario import Duration, Size, register_workload
from rnicsim.verbs import READ, WRITE, Context, WorkRequest

from .rpc import Endpoint, Mesh, RpcConfig, Waiter

H_OBJECT = 1          # RPC handler id of an object access


class MultiObjWorkload(BaseModel):
    """Multi-object reads or writes per transaction (DrTM+H fig. 6, 16, 18, 20)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["multiobj"] = "multiobj"
    op: Literal["read", "write"] = Field(
        "read", description="read: fetch the objects (execution phase); write: write "
        "updates back (commit phase)")
    primitive: Literal["one_sided", "two_sided"] = Field(
        "one_sided", description="one_sided: RC READ/WRITE per object; two_sided: UD "
        "SEND/RECV RPC per object (request, handler on the target thread, reply)")
    objects: int = Field(10, ge=1, le=256, description="objects per transaction")
    payload: Size = Field(64, description="bytes per object [B]")
    coroutines: int = Field(1, ge=1, le=256, description="coroutines per worker thread")
    outstanding: bool = Field(False, description="post all objects of a transaction "
                              "before waiting (else one object per round trip)")
    doorbell: bool = Field(False, description="doorbell batching: the WRs of one step share "
                           "doorbells (one-sided: per destination QP; two-sided: the "
                           "requests on the UD QP; replies of one poll always share them)")
    doorbell_batch: int = Field(16, ge=1, description="most WQEs per doorbell with "
                                "doorbell batching [WQEs] (FaSST postlist 16); two-sided "
                                "replies use the RPC layer's reply_batch (16) at every step")
    passive_ack: bool = Field(False, description="writes only: acknowledgement off the "
                              "critical path (one-sided: only the last WRITE signaled; "
                              "two-sided: no replies)")
    handler: Duration = Field(0.0, description="two-sided: CPU of the RPC handler per "
                              "request beyond the RPC layer's dispatch cost [ns]")
    key: Size = Field(8, description="two-sided: bytes naming the object in a request [B]")
    region: Size = Field(64 * 1024 * 1024, description="one-sided: registered region "
                         "per node the objects are drawn from [B]")

    @model_validator(mode="after")
    def _check(self) -> "MultiObjWorkload":
        if self.passive_ack and self.op != "write":
            raise ValueError("passive_ack applies to op write only (a READ must see its "
                             "completion to return the data)")
        if self.doorbell and not self.outstanding:
            raise ValueError("doorbell batching needs outstanding requests (one request "
                             "per post leaves nothing to batch)")
        if self.payload < 1:
            raise ValueError("payload: at least 1 byte")
        if self.payload > self.region:
            raise ValueError("payload: larger than the registered region")
        return self

    def step(self) -> int:
        """Position on fig. 6's cumulative x-axis (0 baseline .. 4 +PA), -1 if none."""
        flags = (self.coroutines > 1, self.outstanding, self.doorbell, self.passive_ack)
        n = 0
        while n < 4 and flags[n]:
            n += 1
        return n if not any(flags[n:]) else -1

    def request_reply(self) -> tuple[int, int]:
        """Two-sided user bytes of a request and of its reply [B]."""
        if self.op == "read":
            return self.key, self.payload
        return self.key + self.payload, 0


class _ThreadCredits:
    """Two-sided passive ACK: requests of one thread not yet consumed by a handler."""

    __slots__ = ("pending", "window", "waiting")

    def __init__(self, window: int) -> None:
        self.pending = 0
        self.window = window
        self.waiting: deque = deque()     # (event, credits) in arrival order

    def release(self, n: int) -> None:
        self.pending -= n
        while self.waiting and self.pending + self.waiting[0][1] <= self.window:
            ev, need = self.waiting.popleft()
            self.pending += need           # reserved for the woken coroutine
            ev.succeed()


class _Txn:
    """A transaction with passive ACK: done when its last request is handled."""

    __slots__ = ("t0", "left", "credits")

    def __init__(self, t0: float, left: int, credits: _ThreadCredits) -> None:
        self.t0 = t0
        self.left = left
        self.credits = credits


class MultiObjBench:
    """Builds the endpoints for workload ``w`` on ``cluster`` and runs its coroutines."""

    def __init__(self, sim, cluster, w: MultiObjWorkload, threads: int) -> None:
        nodes = len(cluster.nodes)
        if nodes < 2:
            raise ValueError("cluster.nodes: at least 2 (every object is remote)")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads: a positive integer (worker threads per node), "
                             f"got {threads!r}")
        self.sim = sim
        self.cluster = cluster
        self.w = w
        self.threads = threads
        self.nodes = nodes
        self.two_sided = w.primitive == "two_sided"
        per_txn = w.objects if w.outstanding else 1
        self.in_flight = w.coroutines * per_txn
        cfg = RpcConfig(transport="ud", doorbell_batch=w.doorbell_batch if w.doorbell else 1)
        self.mesh = Mesh(cluster, threads, cfg, rc=not self.two_sided,
                         in_flight=self.in_flight)
        self.rkeys: dict[int, int] = {}
        if not self.two_sided:
            for n in range(nodes):
                mr = Context(cluster, n, 0).reg_mr(w.region, name=f"multiobj n{n}")
                self.rkeys[n] = mr.rkey
        self.credits = {key: _ThreadCredits(self.in_flight) for key in self.mesh.endpoints}
        self.done = 0              # transactions finished in the window
        self.objects_done = 0      # objects finished in the window (throughput)
        self.issued = 0
        _req, rep = w.request_reply()
        handler = w.handler

        def serve(src: int, txn):
            if txn is not None:               # passive ACK: the request is consumed
                txn.credits.release(1)
                txn.left -= 1
                self._progress(1)
                if txn.left == 0:
                    self._finish(txn.t0)
            return None, rep, handler

        for ep in self.mesh.endpoints.values():
            ep.register(H_OBJECT, serve)
        cluster.setup_done()

    # ------------------------------------------------------------------ run
    def start(self) -> None:
        """Spawn every thread's coroutines (call after ``sim.measure`` and before running
        the simulation)."""
        self._cpu = self.sim.cpu_meter(ep.thread.core for ep in self.mesh.endpoints.values())
        self._util = self.cluster.utilization_meter()
        body = self._two_sided if self.two_sided else self._one_sided
        for ep in self.mesh.endpoints.values():
            for c in range(self.w.coroutines):
                ep.spawn(body, c)

    def _progress(self, n: int) -> None:
        """``n`` objects of some transaction are done (read, written or handled)."""
        if self.sim.measuring:
            self.objects_done += n

    def _finish(self, t0: float) -> None:
        sim = self.sim
        if sim.measuring:
            self.done += 1
            sim.stats.hist("txn_lat").add(sim.now - t0)

    def _targets(self, ep: Endpoint, rng) -> list[int]:
        n = self.nodes
        draws = rng.integers(0, n - 1, self.w.objects)
        return [int(d) + (1 if d >= ep.node else 0) for d in draws]

    def _one_sided(self, ep: Endpoint, c: int):
        w, sim = self.w, self.sim
        rng = sim.rng(f"multiobj/n{ep.node}/t{ep.index}/c{c}")
        op = READ if w.op == "read" else WRITE
        inline = op == WRITE and w.payload < 64 and w.payload <= ep.ctx.max_inline
        local = ep.scratch if w.payload <= ep.scratch.length and not inline else None
        slot = max(w.payload, 64)
        slots = max(1, (w.region - w.payload) // slot)
        pa = w.passive_ack
        while True:
            t0 = sim.now
            self.issued += 1
            targets = self._targets(ep, rng)
            offs = rng.integers(0, slots, w.objects)
            wrs = [(m, WorkRequest(op, w.payload, k, not pa, inline, local, 0,
                                   self.rkeys[m], int(offs[k]) * slot))
                   for k, m in enumerate(targets)]
            if not w.outstanding:
                for m, wr in wrs:
                    yield ep.post_group([(ep.rc_qp(m), [wr])]).arm()
                    self._progress(1)
            else:
                if w.doorbell:
                    by_qp: dict = {}
                    for m, wr in wrs:
                        by_qp.setdefault(m, []).append(wr)
                    b = w.doorbell_batch
                    posts = [(ep.rc_qp(m), lst[s:s + b]) for m, lst in by_qp.items()
                             for s in range(0, len(lst), b)]
                else:
                    posts = [(ep.rc_qp(m), [wr]) for m, wr in wrs]
                if pa:
                    posts[-1][1][-1].signaled = True      # the last WR posted
                yield ep.post_group(posts).arm()
                self._progress(w.objects)
            self._finish(t0)

    def _two_sided(self, ep: Endpoint, c: int):
        w, sim = self.w, self.sim
        rng = sim.rng(f"multiobj/n{ep.node}/t{ep.index}/c{c}")
        req, _rep = w.request_reply()
        credits = self.credits[(ep.node, ep.index)]
        switch = ep.switch_ns
        per_step = w.objects if w.outstanding else 1
        while True:
            t0 = sim.now
            self.issued += 1
            targets = self._targets(ep, rng)
            if w.passive_ack:
                txn = _Txn(t0, w.objects, credits)
                for s in range(0, w.objects, per_step):
                    if credits.waiting or credits.pending + per_step > credits.window:
                        ev = sim.event()
                        credits.waiting.append((ev, per_step))
                        yield ev
                        ep.thread.reserve(sim.now, switch)   # resumed
                    else:
                        credits.pending += per_step
                    for m in targets[s:s + per_step]:
                        ep.call(m, H_OBJECT, txn, req, reply=False)
                    # Back to the event loop (a real yield: the thread is free for the
                    # loop and the other coroutines), then resumed after a switch.
                    ep.thread.reserve(sim.now, switch)
                    yield sim.timeout(0)
                continue                       # done when the handlers consumed it all
            for s in range(0, w.objects, per_step):
                wt = Waiter(ep)
                for k, m in enumerate(targets[s:s + per_step]):
                    ep.call(m, H_OBJECT, None, req, True, wt, k)
                yield wt.arm()
                self._progress(per_step)
            self._finish(t0)

    # ------------------------------------------------------------------ results
    def results(self, measure_ns: float) -> dict[str, float]:
        """Metrics of the measured window (see module doc)."""
        sim = self.sim
        h = sim.stats.hist("txn_lat").summary()
        # Objects finished / objects per transaction: unbiased in steady state even when
        # a transaction takes a good part of the window (few would finish inside it).
        total = self.objects_done / self.w.objects / measure_ns * 1e3   # M txns/s
        per_node = total / self.nodes
        return {"throughput_mtxns": total, "throughput_mtxns_per_node": per_node,
                "throughput_mops_per_node": per_node * self.w.objects,
                "lat_p50_us": h["p50"] / 1e3, "lat_p90_us": h["p90"] / 1e3,
                "lat_p99_us": h["p99"] / 1e3, "cpu_util": self._cpu(),
                "step": float(self.w.step()), **self._util()}


def stretch_window(w: MultiObjWorkload, profile, threads: int, nics_per_node: int,
                   warmup: float, measure: float) -> tuple[float, float]:
    """Warm-up and window [ns], stretched as :func:`workloads.microbench.stretch_window`:
    at least twice (warm-up) and four times (window) the time one node's whole window of
    objects takes to cross its links at line rate."""
    per_txn = w.objects if w.outstanding else 1
    window = threads * w.coroutines * per_txn * (w.payload + w.key + 128)
    drain = window * 8e9 / (profile.link.rate * nics_per_node)
    return max(warmup, 2 * drain), max(measure, 4 * drain)


def run_multiobj(profile, w: MultiObjWorkload, nodes: int, nics_per_node: int = 1,
                 threads: int = 24, seed: int = 1, warmup_ns: float = 30_000.0,
                 measure_ns: float = 30_000.0, topology: dict | None = None,
                 cores: int | None = None) -> dict[str, float]:
    """Run one point of the multi-object benchmark; returns its metrics (module doc).

    ``nodes`` x ``nics_per_node`` NICs, ``threads`` worker threads per node on ``cores``
    cores (default: the profile's); ``warmup_ns`` and ``measure_ns`` [ns] are stretched
    by :func:`stretch_window` for large payloads, and the window used is returned as
    ``measure_us`` [us]. Throughputs are in M/s (``throughput_mtxns``), latencies in us."""
    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation

    warmup_ns, measure_ns = stretch_window(w, profile, threads, nics_per_node, warmup_ns,
                                           measure_ns)
    sim = Simulation(seed)
    cluster = Cluster(sim, profile, nodes, nics_per_node, cores=cores, topology=topology)
    bench = MultiObjBench(sim, cluster, w, threads)
    sim.measure(warmup_ns, measure_ns)
    bench.start()
    sim.run(until=warmup_ns + measure_ns)
    out = bench.results(measure_ns)
    out["measure_us"] = measure_ns / 1e3
    return out


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when ``profile`` cannot run this point."""
    w = sc.workload
    if sc.cluster.nodes < 2:
        raise ValueError("cluster.nodes: at least 2 for multiobj (every object is remote)")
    if w.primitive == "two_sided":
        req, rep = w.request_reply()
        header = RpcConfig().header
        if max(req, rep) + header > profile.link.mtu:
            raise ValueError(f"workload.payload: a two-sided message (payload + key + "
                             f"{header} B header) must fit the MTU of {profile.name} "
                             f"({profile.link.mtu} B), got {max(req, rep) + header} B")


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Run one point of a scenario whose workload kind is ``multiobj``."""
    return run_multiobj(profile, sc.workload, sc.cluster.nodes, sc.cluster.nic.per_node,
                        sc.cluster.threads, sc.run.seed, sc.run.warmup, sc.run.measure,
                        sc.cluster.topology.model_dump(), sc.cluster.cores)


register_workload("multiobj", MultiObjWorkload, "protocols.multiobj:run_scenario_point")
