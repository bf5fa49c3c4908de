"""Incast with a victim flow: PFC congestion spreading and what DCQCN does about it.

Covers
    ``senders`` nodes each keep ``outstanding`` RC WRITEs of ``payload`` bytes in flight to
    one ``target`` node (closed loop: a completion posts the next WRITE). A victim flow
    keeps one ``victim_payload`` WRITE in flight from ``victim_src`` to ``victim_dst``, a
    node that is *not* congested; on a leaf-spine it shares links with the incast (by
    default it starts on the last leaf and ends on the target's leaf, through the same
    spine as the incast under destination-mod-k routing). ``dcqcn`` switches the NICs'
    DCQCN on (profile override ``nic.dcqcn``); otherwise the profile decides.

Scenario
    Each point runs twice: the victim flow alone (its unloaded latency), then victim and
    incast together over the same warm-up and measured window.

Metrics
    ``victim_lat_us`` (mean latency of the victim's WRITEs in the window),
    ``victim_lat_p99_us``, ``victim_alone_us`` (mean without the incast),
    ``victim_slowdown`` (= victim_lat_us / victim_alone_us), ``incast_gbps`` (payload
    delivered to the target [Gb/s]), ``pause_frames``, ``pause_time_us`` (summed over link
    directions and priorities, in the window), ``headroom_overflow``, ``ecn_marks``,
    ``cnps`` (in the window).

This module uses only :mod:`rnicsim.verbs`, the cluster builder and the fabric's
counters, never ``rnicsim.hw``.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rnicsim.cluster import Cluster
from rnicsim.scenario import Size, register_workload
from rnicsim.sim import Simulation
from rnicsim.verbs import WRITE, Context, WorkRequest

_STRICT = ConfigDict(extra="forbid", frozen=True)


class IncastWorkload(BaseModel):
    """Incast plus victim flow (see module doc)."""

    model_config = _STRICT
    kind: Literal["incast"]
    senders: int = Field(8, ge=1)
    target: int = Field(0, ge=0)
    payload: Size = 64 * 1024
    outstanding: int = Field(4, ge=1)
    victim_src: int | None = Field(None, ge=0)   # default: the last node
    victim_dst: int | None = Field(None, ge=0)   # default: node `spines` (or 1)
    victim_payload: Size = 1024
    dcqcn: bool | None = None                     # None: as the profile says


def _nodes(sc) -> tuple[int, int, int, list[int]]:
    """(target, victim src, victim dst, incast senders) of a scenario point."""
    w, n = sc.workload, sc.cluster.nodes
    topo = sc.cluster.topology
    spines = getattr(topo, "spines", 1)
    tgt = w.target
    vs = n - 1 if w.victim_src is None else w.victim_src
    vd = (spines if spines < n else 1) if w.victim_dst is None else w.victim_dst
    for key, v in (("target", tgt), ("victim_src", vs), ("victim_dst", vd)):
        if v >= n:
            raise ValueError(f"workload.{key}: a node below cluster.nodes ({n}), got {v}")
    if len({tgt, vs, vd}) < 3:
        raise ValueError("workload.victim_dst: target, victim_src and victim_dst must be "
                         "three different nodes")
    others = [m for m in range(n - 1, -1, -1) if m not in (tgt, vd)]
    if w.senders > len(others):
        raise ValueError(f"workload.senders: at most {len(others)} on {n} nodes "
                         f"(the target and the victim's destination do not send)")
    return tgt, vs, vd, others[:w.senders]


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when the point cannot run."""
    _nodes(sc)
    if sc.workload.dcqcn and profile.link.kind != "roce":
        raise ValueError("workload.dcqcn: DCQCN needs a RoCE profile (link.kind roce)")


def _run(sc, profile, with_incast: bool) -> dict[str, float]:
    w = sc.workload
    tgt, vs, vd, senders = _nodes(sc)
    sim = Simulation(sc.run.seed)
    cl = Cluster(sim, profile, sc.cluster.nodes, 1, cores=sc.cluster.cores,
                 topology=sc.cluster.topology.model_dump())
    ctx = {}

    def c(node):
        if node not in ctx:
            ctx[node] = Context(cl, node, 0, cl.nodes[node].thread(0))
        return ctx[node]

    region = max(w.payload, w.victim_payload, 4096)
    mrs = {tgt: c(tgt).reg_mr(region), vd: c(vd).reg_mr(region)}
    lat = sim.stats.hist("victim_lat")
    delivered = [0]

    def flow(src, dst, size, window, record):
        cq = c(src).create_cq()
        qp = c(src).create_qp("RC", cq)
        qp.connect(c(dst).create_qp("RC", c(dst).create_cq()))
        rkey = mrs[dst].rkey

        def wr():
            return WorkRequest(WRITE, size, 0, True, False, None, 0, rkey, 0)

        qp.post_send([wr() for _ in range(window)], event=False)
        while True:
            wcs = yield cq.wait()
            now = sim.now
            if sim.measuring:
                for wc in wcs:
                    if record:
                        lat.add(now - wc.t_post)
                    else:
                        delivered[0] += size
            qp.post_send([wr() for _ in wcs], event=False)

    warm, meas = sc.run.warmup, sc.run.measure
    sim.measure(warm, meas)
    pfc = cl.fabric.pfc_window(sim, warm)
    if with_incast:
        for s in senders:
            sim.process(flow(s, tgt, w.payload, w.outstanding, False))
    sim.process(flow(vs, vd, w.victim_payload, 1, True))
    cl.setup_done()
    sim.run(until=warm + meas)
    h = lat.summary()
    out = {"victim_lat_us": h["mean"] / 1e3, "victim_lat_p99_us": h["p99"] / 1e3,
           "incast_gbps": delivered[0] * 8 / meas}
    out.update(pfc())
    return out


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Runner of workload kind ``incast``."""
    if sc.workload.dcqcn is not None:
        profile = profile.with_overrides({"nic.dcqcn": sc.workload.dcqcn}, "workload.dcqcn")
    alone = _run(sc, profile, False)
    out = _run(sc, profile, True)
    out["victim_alone_us"] = alone["victim_lat_us"]
    out["victim_slowdown"] = out["victim_lat_us"] / alone["victim_lat_us"]
    return out


register_workload("incast", IncastWorkload, "workloads.incast:run_scenario_point")
