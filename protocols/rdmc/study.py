"""The RDMC paper's experiments (section 5) as plain functions returning metrics.

Every function builds fresh simulations, takes ``size="demo"`` (reduced, seconds) or
``"full"`` (the paper's scale, minutes), a ``profile`` (name or :class:`Profile`) with an
optional ``link`` override dict, and a ``seed``; it returns a dict with the rows it
measured and the summary numbers a claim check needs. :func:`claims` turns them into one
row per claim M1-M11 of ``CLAIMS.md``: published value, measured value, whether the
finding holds.

Clusters (the paper's testbeds, section 5.1), built from one NIC profile by overriding
only the link rate (no per-experiment tuning):

    ==========  ================================  ==========================================
    name        link                              fabric
    ==========  ================================  ==========================================
    fractus     100 Gb/s (the profile's EDR)      one switch (full bisection, "100 Gb/s")
    qdr         QDR 4x: 40 Gb/s, 8b/10b (32 data)  one switch (the brief's "QDR-class")
    sierra      QDR 40 Gb/s                        two-stage fat tree: leaves of 16 nodes
    stampede    FDR 56.25 Gb/s, 64b/66b            one switch
    apt         FDR                               two group members per leaf, ToR
                                                  uplink ~16 Gb/s per node
    ==========  ================================  ==========================================

The fat tree is ``leaf_spine`` with one spine whose uplinks carry a leaf's whole downlink
capacity: a non-blocking two-stage tree with perfect load balance, as InfiniBand's
destination-based (D-mod-K) routing gives for these patterns. (With 16 spines the
kernel's ECMP hash ``(src*2654435761 + dst*40503) % spines`` sees only the low bits of the
node ids and puts every hypercube flow of a leaf on 2 spines; see the module README.)

Metrics: ``completion_ms`` (submit to the last member's completion upcall, mean over
messages), ``bandwidth_gbps`` (bytes sent by the roots / elapsed time, the paper's
definition), ``skew_ms`` (first to last receiver completion), ``cpu`` (fraction of one
core used by the RDMC completion thread, spinning included).
"""
from __future__ import annotations

import functools
import math
import time
from typing import Any, Iterable, Sequence

from rnicsim.cluster import Cluster
from rnicsim.profile import Profile, load_profile
from rnicsim.sim import Simulation

from . import schedules as S
from .baselines import mpi_bcast_group
from .engine import EngineOptions, Rdmc

__all__ = ["QDR_LINK", "FDR_LINK", "TESTBEDS", "run_multicast", "fig4_algorithms",
           "table1_breakdown", "fig6_block_size", "fig8_scale", "fig9_replication_trace",
           "fig10_overlap", "fig11_interrupts", "slack_and_slow_links", "m1_steps",
           "m11_core_direct", "speed", "claims", "PUBLISHED"]

MiB = 1 << 20
KiB = 1 << 10
QDR_LINK = {"link.signal_rate": "40Gbps", "link.encoding": "8b/10b"}
FDR_LINK = {"link.signal_rate": "56.25Gbps", "link.encoding": "64b/66b"}

TESTBEDS: dict[str, dict[str, Any]] = {
    "fractus": {"link": None, "topology": "single_switch"},
    "qdr": {"link": QDR_LINK, "topology": "single_switch"},
    "sierra": {"link": QDR_LINK, "topology": "fat_tree"},
    "stampede": {"link": FDR_LINK, "topology": "single_switch"},
    "apt": {"link": FDR_LINK, "topology": "apt"},
}

PUBLISHED = {
    "M1": "l + k - 1 steps for n = 2^l; at most one send and one receive per node per step",
    "M2": "average steady-step slack 2(1 - (l-1)/(n-2))",
    "M3": ">= l T'/(T + (l-1) T') of the bandwidth with one link at T' = T/2: 85.6% at n = 64",
    "M4": "sequential and binomial tree degrade with n; chain competitive except small "
          "transfers to many nodes; MPI 1.03x-3x the binomial pipeline time",
    "M5": "256 MB, 1 MB blocks, group of 4: ~99% of 62 ms in block transfers",
    "M6": "bandwidth rises with block size to a peak, then falls",
    "M7": "256 MB to 127, 255, 511 receivers: almost the same time; sequential linear",
    "M8": "binomial pipeline ~2x faster than binomial tree, ~3x sequential, ~93 Gb/s",
    "M9": "overlapping groups near full bisection (100 Gb/s); ~16 Gb/s on the "
          "oversubscribed ToR",
    "M10": "pure interrupts: CPU ~10% (100 MB) and ~50% (1 MB), bandwidth nearly unchanged",
    "M11": "CORE-Direct relaying ~5% faster on chain send",
}

_PROFILES: dict[tuple, Profile] = {}


def _profile(profile: str | Profile, link: dict | None) -> Profile:
    key = (profile if isinstance(profile, str) else id(profile),
           tuple(sorted((link or {}).items())))
    p = _PROFILES.get(key)
    if p is None:
        base = load_profile(profile) if isinstance(profile, str) else profile
        p = base.with_overrides(link, source="rdmc testbed") if link else base
        _PROFILES[key] = p
    return p


def _topology(kind: str | dict, n: int, prof: Profile) -> dict:
    if isinstance(kind, dict):
        return kind
    if kind == "single_switch" or (kind == "fat_tree" and n <= 16):
        return {"kind": "single_switch"}
    if kind == "fat_tree":
        return {"kind": "leaf_spine", "leaves": -(-n // 16), "spines": 1,
                "oversubscription": 1.0}
    if kind == "apt":
        # Batch-scheduled placement: group members scattered, two per rack; the loaded
        # ToR uplink leaves ~16 Gb/s per node (paper section 5.1).
        return {"kind": "leaf_spine", "leaves": max(2, -(-n // 2)), "spines": 1,
                "oversubscription": prof.link.rate / 16e9}
    raise ValueError(f"unknown topology {kind!r}")


def _testbed(name: str, profile: str | Profile, link: dict | None, topology: Any) -> tuple:
    tb = TESTBEDS[name]
    return (_profile(profile, tb["link"] if link is None else link),
            tb["topology"] if topology is None else topology)


def _build(n_nodes: int, prof: Profile, topology: Any, seed: int,
           cores: int | None = None, **opts) -> tuple:
    sim = Simulation(seed)
    cl = Cluster(sim, prof, n_nodes, cores=cores, topology=_topology(topology, n_nodes, prof))
    return sim, cl, Rdmc(cl, EngineOptions(**opts))


def _cpu(eng: Rdmc, before: dict[int, float], t0: float, t1: float,
         nodes: Iterable[int]) -> dict[int, float]:
    after = eng.cpu_snapshot()
    dt = max(t1 - t0, 1e-9)
    return {n: min(1.0, (after[n] - before.get(n, 0.0)) / dt) for n in nodes}


def run_multicast(n: int, size: int, algorithm: str = "binomial-pipeline",
                  block_size: int | None = None, *, testbed: str = "qdr",
                  profile: str | Profile = "cx4-edr", link: dict | None = None,
                  topology: Any = None, seed: int = 1, messages: int = 1,
                  rack_size: int | None = None, nodes: int | None = None,
                  cores: int | None = None, **opts) -> dict:
    """Multicast ``messages`` messages of ``size`` B to a group of ``n`` (root included).

    ``algorithm`` is a name of :data:`schedules.ALGORITHMS` (``block_size`` [B], default
    1 MiB) or ``"mpi"`` (the :mod:`baselines` broadcast, which cuts the message into chunks
    of its own and takes no ``block_size`` or ``rack_size``). Messages go back to back: the root submits the next
    one at its local completion. The cluster has ``nodes`` nodes (default ``n``; the group
    is nodes ``0 .. n-1``) with ``cores`` cores each (default: the profile's). ``opts``
    are :class:`EngineOptions` fields.
    """
    if testbed not in TESTBEDS:
        raise ValueError(f"testbed must be one of {', '.join(TESTBEDS)}, got {testbed!r}")
    if isinstance(messages, bool) or not isinstance(messages, int) or messages < 1:
        raise ValueError(f"messages must be an integer >= 1, got {messages!r}")
    if algorithm == "mpi" and rack_size is not None:
        raise ValueError("rack_size applies only to the hybrid algorithm, not 'mpi'")
    if algorithm == "mpi" and block_size is not None:
        raise ValueError("block_size: the mpi broadcast chooses its own chunks "
                         "(ceil(size / n) B); leave it out")
    if nodes is not None and nodes < n:
        raise ValueError(f"nodes must be >= the group size {n}, got {nodes!r}")
    prof, topo = _testbed(testbed, profile, link, topology)
    sim, cl, eng = _build(n if nodes is None else nodes, prof, topo, seed, cores, **opts)
    members = list(range(n))
    if algorithm == "mpi":
        g = mpi_bcast_group(eng, members, size)
    else:
        g = eng.create_group(members, MiB if block_size is None else block_size, algorithm,
                             rack_size=rack_size,
                             max_message=max(1 << 31, size))
    start = 10_000.0          # let the group's first ready_for_block writes land
    sim.run(until=start)
    cpu0 = eng.cpu_snapshot()
    msgs: list = []
    finished = sim.event()
    settled = [0]

    def on_done(_ev) -> None:
        settled[0] += 1
        if settled[0] == messages or g.failed:
            if not finished.triggered:
                finished.succeed()

    def next_msg(rank: int = 0, seq: int = -1) -> None:
        if rank == 0 and len(msgs) < messages and not g.failed:
            m = g.send(size)
            msgs.append(m)
            m.done.callbacks.append(on_done)

    if messages > 1:
        g.on_complete = next_msg
    next_msg()
    wall = time.perf_counter()
    try:
        sim.run(until=finished)
    except RuntimeError:
        pass                       # nothing left to simulate: a stuck or failed group
    wall = time.perf_counter() - wall
    t_end = max((max(t for t in m.done_at if t is not None) for m in msgs), default=start)
    cpu = _cpu(eng, cpu0, start, t_end, members)
    comp = [m.completion_ns for m in msgs]
    return {
        "n": n, "size": size, "algorithm": algorithm, "block_size": g.block_size,
        "messages": len(msgs),
        "completion_ms": sum(comp) / len(comp) / 1e6,
        "total_ms": (t_end - start) / 1e6,
        "bandwidth_gbps": size * len(msgs) * 8 / (t_end - start),
        "skew_ms": sum(m.skew_ns() for m in msgs) / len(msgs) / 1e6,
        "cpu": sum(cpu.values()) / len(cpu),
        "cpu_root": cpu[0],
        "failed": any(m.failed for m in msgs),
        "wall_s": wall,
        "group": g,
        "link_gbps": prof.link.rate / 1e9,
    }


def _sized(fn):
    """Refuse a ``size`` other than "demo" or "full" (it used to run the demo size)."""
    @functools.wraps(fn)
    def checked(size: str = "demo", *args, **kw):
        if size not in ("demo", "full"):
            raise ValueError(f"{fn.__name__}: size must be 'demo' or 'full', got {size!r}")
        return fn(size, *args, **kw)
    return checked


def _strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "group"}


# --------------------------------------------------------------------------- figure 4
@_sized
def fig4_algorithms(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                    link: dict | None = None, seed: int = 1) -> dict:
    """Figure 4 / M4: every algorithm and MPI over group sizes and message sizes (QDR)."""
    if size == "full":
        ns, sizes = list(range(2, 17)), [256 * KiB, 8 * MiB, 64 * MiB, 256 * MiB]
    else:
        ns, sizes = [2, 4, 8, 16], [256 * KiB, 128 * MiB]
    algs = list(S.ALGORITHMS) + ["mpi"]
    rows = []
    for sz in sizes:
        for n in ns:
            for a in algs:
                rows.append(_strip(run_multicast(n, sz, a, testbed="qdr", profile=profile,
                                                 link=link, seed=seed)))
    t = {(r["algorithm"], r["n"], r["size"]): r["completion_ms"] for r in rows}
    big, small, n0, n1 = sizes[-1], sizes[0], ns[0], ns[-1]
    mpi_ratio = [t[("mpi", n, s)] / t[("binomial-pipeline", n, s)] for n in ns for s in sizes]
    return {
        "rows": rows,
        "sequential_growth": t[("sequential", n1, big)] / t[("sequential", n0, big)],
        "tree_growth": t[("binomial-tree", n1, big)] / t[("binomial-tree", n0, big)],
        "pipeline_growth": t[("binomial-pipeline", n1, big)] / t[("binomial-pipeline", n0, big)],
        "chain_vs_pipeline_large": t[("chain", n1, big)] / t[("binomial-pipeline", n1, big)],
        "chain_vs_pipeline_small": t[("chain", n1, small)] / t[("binomial-pipeline", n1, small)],
        "mpi_vs_pipeline_min": min(mpi_ratio),
        "mpi_vs_pipeline_max": max(mpi_ratio),
        "mpi_vs_pipeline_large": [t[("mpi", n, big)] / t[("binomial-pipeline", n, big)]
                                  for n in ns],
    }


# --------------------------------------------------------------------------- table 1
@_sized
def table1_breakdown(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                     link: dict | None = None, seed: int = 1) -> dict:
    """Table 1 / M5: where the time of a 256 MB, 1 MB-block transfer to 4 nodes goes.

    Measured at the member farthest from the root (rank 3), as the paper: *remote* is
    submit to its first block; *block transfers* the union of the intervals in which one
    of its own block transfers is in flight (posted to completed); *copy* the first-block
    copy; *local setup* the buffer allocation; *waiting* the rest.
    """
    msg_size = 256 * MiB if size == "full" else 64 * MiB
    r = run_multicast(4, msg_size, "binomial-pipeline", MiB, testbed="stampede",
                      profile=profile, link=link, seed=seed, record=True)
    g = r["group"]
    msg = g.messages[0]
    rank = 3
    t0, t_end = msg.t_submit, msg.done_at[rank]
    recvs = sorted((e[6], e[7]) for e in g.log if e[2] == rank)
    sends = sorted((e[3], e[4]) for e in g.send_log if e[1] == rank)
    t_first = recvs[0][1]
    spans = sorted(recvs[1:] + sends)
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        s = max(s, t_first)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    o = g.engine.opts
    copy = min(msg_size, g.block_size) * 1e9 / o.copy_rate
    total = t_end - t0
    remote = t_first - t0
    waiting = max(0.0, total - remote - busy - copy - o.message_setup_ns)
    return {
        "total_ms": total / 1e6,
        "remote_us": remote / 1e3,
        "block_transfers_us": busy / 1e3,
        "local_setup_us": o.message_setup_ns / 1e3,
        "copy_us": copy / 1e3,
        "waiting_us": waiting / 1e3,
        "fraction_in_transfers": (remote + busy) / total,
        "message_mib": msg_size / MiB,
        "bandwidth_gbps": r["bandwidth_gbps"],
    }


# --------------------------------------------------------------------------- figure 6
@_sized
def fig6_block_size(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                    link: dict | None = None, seed: int = 1) -> dict:
    """Figure 6 / M6: bandwidth of a group of 4 against block size, per message size."""
    if size == "full":
        sizes = [1 * MiB, 16 * MiB, 128 * MiB]
        blocks = [16 * KiB << (2 * i) for i in range(6)]           # 16 KiB .. 16 MiB
    else:
        sizes = [16 * MiB]
        blocks = [16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB]
    rows = []
    for sz in sizes:
        for b in blocks:
            if b > sz * 4:
                continue
            rows.append(_strip(run_multicast(4, sz, "binomial-pipeline", b, testbed="qdr",
                                             profile=profile, link=link, seed=seed)))
    peaks = {}
    for sz in sizes:
        pts = [(r["block_size"], r["bandwidth_gbps"]) for r in rows if r["size"] == sz]
        best = max(pts, key=lambda p: p[1])
        peaks[sz] = {"peak_block": best[0], "peak_gbps": best[1],
                     "first_gbps": pts[0][1], "last_gbps": pts[-1][1],
                     "interior_peak": pts[0][0] < best[0] < pts[-1][0]}
    return {"rows": rows, "peaks": peaks}


# --------------------------------------------------------------------------- figure 8
@_sized
def fig8_scale(size: str = "demo", *, profile: str | Profile = "cx4-edr",
               link: dict | None = None, topology: Any = None, seed: int = 1) -> dict:
    """Figure 8 / M7: 256 MB to up to 512 nodes on a 40 Gb/s fat tree; sequential send.

    Sequential send is run up to 64 nodes and extrapolated linearly beyond, as the paper
    extrapolated its 512-node point.
    """
    if size == "full":
        msg, ns_bp = 256 * MiB, [2, 4, 8, 16, 32, 64, 128, 256, 512]
        ns_seq = [2, 4, 8, 16, 32, 64]
    else:
        msg, ns_bp = 32 * MiB, [8, 32, 64, 128]
        ns_seq = [2, 4, 8]
    rows = []
    for n in ns_bp:
        rows.append(_strip(run_multicast(n, msg, "binomial-pipeline", MiB, testbed="sierra",
                                         profile=profile, link=link, topology=topology,
                                         seed=seed)))
    for n in ns_seq:
        rows.append(_strip(run_multicast(n, msg, "sequential", MiB, testbed="sierra",
                                         profile=profile, link=link, topology=topology,
                                         seed=seed)))
    bp = {r["n"]: r["completion_ms"] for r in rows if r["algorithm"] == "binomial-pipeline"}
    seq = {r["n"]: r["completion_ms"] for r in rows if r["algorithm"] == "sequential"}
    # Least-squares line of sequential time against receivers.
    xs = [n - 1 for n in seq]
    ys = list(seq.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    icpt = my - slope * mx
    ss_res = sum((y - (icpt + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-30
    top = ns_bp[-3:]
    return {
        "rows": rows, "message_mib": msg / MiB,
        "pipeline_ms": bp, "sequential_ms": seq,
        "sequential_fit_ms_per_receiver": slope,
        "sequential_r2": 1 - ss_res / ss_tot,
        "sequential_extrapolated_ms": {n: icpt + slope * (n - 1) for n in ns_bp},
        "flat_nodes": top,
        "flat_ratio": max(bp[n] for n in top) / min(bp[n] for n in top),
        "skew_ms": {r["n"]: r["skew_ms"] for r in rows if r["algorithm"] == "binomial-pipeline"},
    }


# --------------------------------------------------------------------------- figure 9
def _lognormal_params(median: float, mean: float) -> tuple[float, float]:
    """(mu, sigma) of a lognormal with the given median and mean."""
    return math.log(median), math.sqrt(2 * math.log(mean / median))


@_sized
def fig9_replication_trace(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                           link: dict | None = None, seed: int = 1,
                           algorithms: Sequence[str] = ("binomial-pipeline", "binomial-tree",
                                                        "sequential"),
                           concurrency: int = 1) -> dict:
    """Figure 9 / M8: a Cosmos-like 3-replica write trace from one node to 15 storage nodes.

    Object sizes are lognormal with median 12 MB and mean 29 MB (clipped to 256 B..512 MB),
    drawn from the stream ``rdmc.trace``; each goes to a random one of the 455 three-node
    groups (all created beforehand). The generator keeps ``concurrency`` objects in flight.
    ``throughput_gbps`` counts object bytes; ``replica_gbps`` counts every replica.
    """
    objects = 400 if size == "full" else 30
    mu, sigma = _lognormal_params(12e6, 29e6)
    out: dict[str, Any] = {"objects": objects, "lognormal_mu": mu, "lognormal_sigma": sigma}
    from itertools import combinations
    triples = list(combinations(range(1, 16), 3))
    for alg in algorithms:
        prof, topo = _testbed("fractus", profile, link, None)
        sim, cl, eng = _build(16, prof, topo, seed)
        groups = [eng.create_group([0, *t], MiB, alg, max_message=1 << 30) for t in triples]
        rng = sim.rng("rdmc.trace")
        sizes = [int(min(512e6, max(256, x))) for x in rng.lognormal(mu, sigma, objects)]
        picks = [int(i) for i in rng.integers(0, len(groups), objects)]
        start = 50_000.0
        sim.run(until=start)
        lat: list[float] = []
        nxt = [0]
        inflight: set[int] = set()

        def issue() -> None:
            while nxt[0] < objects and len(inflight) < concurrency:
                i = nxt[0]
                g = groups[picks[i]]
                if g.ms[0].m_recvs is not None:
                    break          # that group is busy; wait for a completion
                nxt[0] += 1
                inflight.add(picks[i])
                m = g.send(sizes[i])
                m.done.callbacks.append(lambda ev, gi=picks[i]: done(ev.value, gi))

        def done(m, gi) -> None:
            lat.append(m.completion_ns)
            inflight.discard(gi)
            issue()

        issue()
        t_wall = time.perf_counter()
        sim.run()
        t_wall = time.perf_counter() - t_wall
        t_end = max(max(t for t in g.messages[-1].done_at) for g in groups if g.messages)
        total = sum(sizes[: len(lat)])
        lat_sorted = sorted(lat)
        out[alg] = {
            "latency_ms_mean": sum(lat) / len(lat) / 1e6,
            "latency_ms_p50": lat_sorted[len(lat) // 2] / 1e6,
            "latency_ms_p90": lat_sorted[int(len(lat) * 0.9)] / 1e6,
            "throughput_gbps": total * 8 / (t_end - start),
            "replica_gbps": 3 * total * 8 / (t_end - start),
            "completed": len(lat), "wall_s": t_wall,
        }
        out["size_median_mb"] = sorted(sizes)[objects // 2] / 1e6
        out["size_mean_mb"] = sum(sizes) / objects / 1e6
    bp = out["binomial-pipeline"]["latency_ms_mean"]
    if "binomial-tree" in out:
        out["tree_vs_pipeline"] = out["binomial-tree"]["latency_ms_mean"] / bp
    if "sequential" in out:
        out["sequential_vs_pipeline"] = out["sequential"]["latency_ms_mean"] / bp
    return out


# --------------------------------------------------------------------------- figure 10
@_sized
def fig10_overlap(size: str = "demo", *, profile: str | Profile = "cx4-edr", seed: int = 1,
                  testbeds: Sequence[str] = ("fractus", "apt")) -> dict:
    """Figure 10 / M9: k overlapping groups with identical members and different roots.

    For each group size n: all members send, half send, or one sends; every sender runs
    a group whose member list is rotated so it is the root, and sends ``messages``
    messages back to back. Bandwidth = bytes sent by all roots / time until all are done.
    """
    if size == "full":
        ns, msg, messages = [2, 4, 8, 16], 64 * MiB, 3
    else:
        ns, msg, messages = [4, 8], 16 * MiB, 2
    rows = []
    for tb in testbeds:
        prof, topo = _testbed(tb, profile, None, None)
        for n in ns:
            for label, senders in (("all", n), ("half", max(1, n // 2)), ("one", 1)):
                sim, cl, eng = _build(n, prof, topo, seed)
                groups = [eng.create_group([(s + i) % n for i in range(n)], MiB)
                          for s in range(senders)]
                start = 20_000.0
                sim.run(until=start)
                msgs: list = []
                for g in groups:
                    def more(rank, seq, g=g):
                        if rank == 0 and len(g.messages) < messages:
                            msgs.append(g.send(msg))
                    g.on_complete = more
                    msgs.append(g.send(msg))
                sim.run()
                t_end = max(max(m.done_at) for m in msgs)
                # Bound: every node's ingress carries every message but its own.
                bound = prof.link.rate / 1e9 * (senders / (senders - 1) if senders == n else 1.0)
                bw = msg * len(msgs) * 8 / (t_end - start)
                rows.append({"testbed": tb, "n": n, "senders": label, "groups": senders,
                             "bandwidth_gbps": bw, "link_gbps": prof.link.rate / 1e9,
                             "bound_gbps": bound, "fraction_of_bound": bw / bound})
    best = {tb: max(r["bandwidth_gbps"] for r in rows if r["testbed"] == tb) for tb in testbeds}
    big = ns[-1]
    res = {"rows": rows, "peak_gbps": best}
    if "fractus" in testbeds:
        res["fractus_best_fraction_of_bound"] = max(
            r["fraction_of_bound"] for r in rows if r["testbed"] == "fractus")
        res["fractus_largest_fraction_of_bound"] = {
            r["senders"]: r["fraction_of_bound"] for r in rows
            if r["testbed"] == "fractus" and r["n"] == big}
    if "apt" in testbeds:
        res["apt_largest_gbps"] = {r["senders"]: r["bandwidth_gbps"] for r in rows
                                   if r["testbed"] == "apt" and r["n"] == big}
    return res


# --------------------------------------------------------------------------- figure 11
@_sized
def fig11_interrupts(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                     link: dict | None = None, seed: int = 1) -> dict:
    """Figure 11 / M10: hybrid polling/interrupts against pure interrupts: bandwidth, CPU."""
    if size == "full":
        ns = [2, 4, 8, 16]
        cases = [(10 * KiB, 100), (MiB, 30), (100 * MiB, 3)]
    else:
        ns = [4]
        cases = [(10 * KiB, 40), (MiB, 10), (100 * MiB, 1)]
    rows = []
    for n in ns:
        for sz, count in cases:
            for mode in ("hybrid", "interrupt"):
                r = run_multicast(n, sz, "binomial-pipeline", MiB, testbed="qdr",
                                  profile=profile, link=link, seed=seed, messages=count,
                                  completion=mode)
                rows.append({"n": n, "size": sz, "mode": mode,
                             "bandwidth_gbps": r["bandwidth_gbps"], "cpu": r["cpu"]})
    def get(n, sz, mode, key):
        return next(r[key] for r in rows if r["n"] == n and r["size"] == sz and r["mode"] == mode)
    n = ns[-1] if len(ns) == 1 else 4
    return {
        "rows": rows,
        "cpu_interrupt": {sz: get(n, sz, "interrupt", "cpu") for sz, _ in cases},
        "cpu_hybrid": {sz: get(n, sz, "hybrid", "cpu") for sz, _ in cases},
        "bandwidth_ratio": {sz: get(n, sz, "interrupt", "bandwidth_gbps")
                            / get(n, sz, "hybrid", "bandwidth_gbps") for sz, _ in cases},
    }


# --------------------------------------------------------------------------- M1-M3
@_sized
def m1_steps(size: str = "demo", *, profile: str | Profile = "cx4-edr",
             link: dict | None = None, seed: int = 1) -> dict:
    """M1 in the engine: completion time in units of one block time, and per-node overlap.

    ``effective_steps`` = pipeline completion / (a 2-node transfer of the same message /
    k); the schedule's ``l + k - 1`` should match it closely. ``max_parallel_*`` is the
    largest number of one node's block receives (sends) in flight at once.
    """
    n, k = (64, 128) if size == "full" else (16, 32)
    L = n.bit_length() - 1
    r = run_multicast(n, k * MiB, "binomial-pipeline", MiB, testbed="qdr", profile=profile,
                      link=link, seed=seed, record=True)
    r2 = run_multicast(2, k * MiB, "binomial-pipeline", MiB, testbed="qdr", profile=profile,
                       link=link, seed=seed)
    step = r2["completion_ms"] / k
    g = r["group"]

    def max_parallel(intervals):
        ev = sorted([(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals])
        cur = best = 0
        for _, d in ev:
            cur += d
            best = max(best, cur)
        return best
    rx = max(max_parallel([(e[6], e[7]) for e in g.log if e[2] == node]) for node in range(1, n))
    tx = max(max_parallel([(e[3], e[4]) for e in g.send_log if e[1] == node])
             for node in range(n))
    return {"n": n, "k": k, "schedule_steps": S.step_count("binomial-pipeline", n, k),
            "formula_steps": L + k - 1, "effective_steps": r["completion_ms"] / step,
            "max_parallel_receives": rx, "max_parallel_sends": tx}


@_sized
def slack_and_slow_links(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                         link: dict | None = None, seed: int = 1) -> dict:
    """M2 (steady-step slack of the schedule) and M3 (one overlay link at half rate).

    M3: a binomial pipeline of n nodes with the link between two non-root hypercube
    neighbours (1 and 1 + n/2) at half its rate keeps ``fraction`` of the bandwidth it
    has without; the paper's bound is ``l T' / (T + (l - 1) T')``. Chain send over the
    same slow link is shown for contrast (bounded by the slow link).
    """
    slack_rows = []
    for n in (4, 8, 16, 32, 64, 128):
        k = 64
        prof_ = S.slack_profile(S.schedule("binomial-pipeline", n, k))
        steady = [prof_[j] for j in S.steady_steps(n, k)]
        slack_rows.append({"n": n, "measured": sum(steady) / len(steady),
                           "min": min(steady), "max": max(steady),
                           "predicted": S.predicted_average_slack(n)})
    n, k = (64, 128) if size == "full" else (16, 48)
    L = n.bit_length() - 1
    pair = (1, 1 + n // 2)
    res: dict[str, Any] = {"slack": slack_rows, "n": n, "k": k, "slow_pair": pair}
    for alg in ("binomial-pipeline", "chain"):
        a = alg if alg != "chain" else "chain"
        slow_pair = pair if alg == "binomial-pipeline" else (1, 2)
        base = run_multicast(n, k * MiB, a, MiB, testbed="qdr", profile=profile, link=link,
                             seed=seed)
        slow = run_multicast(n, k * MiB, a, MiB, testbed="qdr", profile=profile, link=link,
                             seed=seed, slow_pairs=((slow_pair[0], slow_pair[1], 2.0),))
        res[alg] = {"fraction": base["completion_ms"] / slow["completion_ms"],
                    "base_ms": base["completion_ms"], "slow_ms": slow["completion_ms"]}
    res["bound"] = L * 0.5 / (1 + (L - 1) * 0.5)
    return res


@_sized
def m11_core_direct(size: str = "demo", *, profile: str | Profile = "cx4-edr",
                    link: dict | None = None, seed: int = 1) -> dict:
    """Chain send with and without CORE-Direct relaying (paper figure 12, on Fractus).

    With ``core_direct`` every relay pre-posts, when a message's first block arrives, its
    whole send sequence: ``[WAIT(incoming receive CQ reaches the count of block j),
    WRITE_WITH_IMM block j]``, so the NIC forwards each block on arrival with no CPU; one
    ready_for_block per message grants credit for all blocks (receives pre-posted). The
    last block, whose exact length comes with it, is relayed by software. ``speedup`` is
    completion time without / with, in RDMC's hybrid polling mode (figure 12 left);
    ``speedup_interrupt`` the same with pure interrupts (right).
    """
    n, k = (8, 100) if size == "full" else (4, 32)
    res: dict[str, Any] = {"n": n, "k": k}
    for mode in ("hybrid", "interrupt"):
        t = {}
        for cd in (False, True):
            r = run_multicast(n, k * MiB, "chain", MiB, testbed="fractus", profile=profile,
                              link=link, seed=seed, completion=mode, core_direct=cd)
            t[cd] = r["completion_ms"]
            sfx = "" if mode == "hybrid" else "_interrupt"
            res[f"{'core_direct' if cd else 'software'}_ms{sfx}"] = r["completion_ms"]
            if mode == "interrupt":
                res[f"{'core_direct' if cd else 'software'}_cpu_relays"] = (
                    sum(_relay_cpu(r, n)) / (n - 2) if n > 2 else 0.0)
        res["speedup" if mode == "hybrid" else "speedup_interrupt"] = t[False] / t[True]
    return res


def _relay_cpu(r: dict, n: int) -> list[float]:
    """CPU share of the relays (ranks 1 .. n-2) over the run (booked work + spinning)."""
    g = r["group"]
    eng = g.engine
    snap = eng.cpu_snapshot()
    dt = r["total_ms"] * 1e6
    return [snap[g.members[i]] / dt for i in range(1, n - 1)]


# --------------------------------------------------------------------------- speed
def speed(n: int = 512, size: int = 256 * MiB, block_size: int = MiB, *,
          topology: Any = None, profile: str | Profile = "cx4-edr", seed: int = 1,
          profile_run: bool = False) -> dict:
    """Wall and CPU time to simulate one multicast (the issue's 512-node, 256 MiB case).

    ``cpu_s`` (process CPU time) is the steadier number on a shared machine.
    """
    t0 = time.perf_counter()
    c0 = time.process_time()
    prof, topo = _testbed("sierra", profile, None, topology)
    sim, cl, eng = _build(n, prof, topo, seed)
    g = eng.create_group(list(range(n)), block_size)
    t1 = time.perf_counter()
    m = g.send(size)
    if profile_run:
        import cProfile
        import io
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        sim.run()
        pr.disable()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(20)
        prof_text = buf.getvalue()
    else:
        sim.run()
        prof_text = ""
    t2 = time.perf_counter()
    return {"n": n, "size": size, "setup_s": t1 - t0, "run_s": t2 - t1, "wall_s": t2 - t0,
            "cpu_s": time.process_time() - c0,
            "events": sim.events_scheduled, "completion_ms": m.completion_ns / 1e6,
            "profile": prof_text}


# --------------------------------------------------------------------------- claims
@_sized
def claims(size: str = "demo", *, profile: str | Profile = "cx4-edr", seed: int = 1,
           only: Iterable[str] | None = None) -> list[dict]:
    """One row per claim: ``{"claim", "published", "measured", "holds"}`` (+ ``note``)."""
    want = set(only) if only else {f"M{i}" for i in range(1, 12)}
    rows = []
    kw = {"profile": profile, "seed": seed}

    def add(cid: str, measured: Any, holds: bool | None, note: str = "") -> None:
        rows.append({"claim": cid, "published": PUBLISHED[cid], "measured": measured,
                     "holds": holds, "note": note})

    if "M1" in want:
        r = m1_steps(size, **kw)
        ok = (r["schedule_steps"] == r["formula_steps"]
              and abs(r["effective_steps"] - r["formula_steps"]) / r["formula_steps"] < 0.1
              and r["max_parallel_receives"] == 1 and r["max_parallel_sends"] == 1)
        add("M1", {k: r[k] for k in ("n", "k", "schedule_steps", "formula_steps",
                                    "effective_steps", "max_parallel_receives",
                                    "max_parallel_sends")}, ok)
    if "M2" in want or "M3" in want:
        r = slack_and_slow_links(size, **kw)
        if "M2" in want:
            ok = all(abs(s["measured"] - s["predicted"]) < 1e-9 for s in r["slack"])
            add("M2", {s["n"]: round(s["measured"], 4) for s in r["slack"]}, ok,
                "schedule slack over the steady steps, k = 64")
        if "M3" in want:
            f = r["binomial-pipeline"]["fraction"]
            add("M3", {"n": r["n"], "fraction": round(f, 3), "bound": round(r["bound"], 3),
                       "chain_fraction": round(r["chain"]["fraction"], 3)},
                f >= r["bound"] - 0.03 and f > r["chain"]["fraction"])
    if "M4" in want:
        r = fig4_algorithms(size, **kw)
        ok = (r["sequential_growth"] > 2 and r["tree_growth"] > 1.5
              and r["pipeline_growth"] < r["tree_growth"]
              and r["chain_vs_pipeline_large"] < 1.2 and r["chain_vs_pipeline_small"] > 1.3
              and max(r["mpi_vs_pipeline_large"]) > 1.03)
        add("M4", {k: (round(v, 3) if isinstance(v, float) else
                       [round(x, 3) for x in v]) for k, v in r.items() if k != "rows"}, ok,
            "MPI range over every size; the large-message ratios decide the finding")
    if "M5" in want:
        r = table1_breakdown(size, **kw)
        add("M5", {k: round(v, 3) for k, v in r.items()}, r["fraction_in_transfers"] >= 0.95)
    if "M6" in want:
        r = fig6_block_size(size, **kw)
        pk = r["peaks"]
        big = max(pk)
        add("M6", {f"{s // MiB}MiB": {"peak_block_kib": v["peak_block"] // KiB,
                                      "peak_gbps": round(v["peak_gbps"], 2),
                                      "smallest_block_gbps": round(v["first_gbps"], 2),
                                      "largest_block_gbps": round(v["last_gbps"], 2)}
                   for s, v in pk.items()}, pk[big]["interior_peak"])
    if "M7" in want:
        r = fig8_scale(size, **kw)
        ok = r["flat_ratio"] < 1.25 and r["sequential_r2"] > 0.99
        add("M7", {"pipeline_ms": {n: round(v, 2) for n, v in r["pipeline_ms"].items()},
                   "sequential_ms": {n: round(v, 2) for n, v in r["sequential_ms"].items()},
                   "flat_ratio": round(r["flat_ratio"], 3),
                   "sequential_r2": round(r["sequential_r2"], 5)}, ok,
            f"{r['message_mib']:.0f} MiB messages")
    if "M8" in want:
        r = fig9_replication_trace(size, **kw)
        tvp, svp = r["tree_vs_pipeline"], r["sequential_vs_pipeline"]
        gbps = r["binomial-pipeline"]["throughput_gbps"]
        add("M8", {"tree_vs_pipeline": round(tvp, 2), "sequential_vs_pipeline": round(svp, 2),
                   "pipeline_gbps": round(gbps, 1),
                   "pipeline_replica_gbps": round(r["binomial-pipeline"]["replica_gbps"], 1),
                   "size_median_mb": round(r["size_median_mb"], 1),
                   "size_mean_mb": round(r["size_mean_mb"], 1)},
            1.5 <= tvp <= 2.6 and 2.2 <= svp <= 3.8 and 75 <= gbps <= 100)
    if "M9" in want:
        r = fig10_overlap(size, **kw)
        frac = r["fractus_best_fraction_of_bound"]
        apt = r["apt_largest_gbps"]["all"]
        add("M9", {"fractus_peak_gbps": round(r["peak_gbps"]["fractus"], 1),
                   "fractus_best_fraction_of_bound": round(frac, 3),
                   "fractus_largest_group": {k: round(v, 3) for k, v in
                                             r["fractus_largest_fraction_of_bound"].items()},
                   "apt_largest_group_gbps": {k: round(v, 1) for k, v in
                                              r["apt_largest_gbps"].items()}},
            frac >= 0.85 and 11 <= apt <= 22)
    if "M10" in want:
        r = fig11_interrupts(size, **kw)
        ci, bw = r["cpu_interrupt"], r["bandwidth_ratio"]
        ok = (ci[100 * MiB] <= 0.25 and ci[MiB] > 2 * ci[100 * MiB]
              and bw[100 * MiB] >= 0.9 and bw[MiB] >= 0.9
              and min(r["cpu_hybrid"].values()) > 0.95)
        add("M10", {"cpu_interrupt": {f"{s // KiB}KiB": round(v, 3) for s, v in ci.items()},
                    "cpu_hybrid": {f"{s // KiB}KiB": round(v, 3)
                                   for s, v in r["cpu_hybrid"].items()},
                    "bandwidth_interrupt_over_hybrid": {f"{s // KiB}KiB": round(v, 3)
                                                        for s, v in bw.items()}}, ok)
    if "M11" in want:
        r = m11_core_direct(size, **kw)
        add("M11", {"speedup": round(r["speedup"], 3),
                    "speedup_interrupt": round(r["speedup_interrupt"], 3),
                    "software_ms": round(r["software_ms"], 3),
                    "core_direct_ms": round(r["core_direct_ms"], 3),
                    "relay_cpu_software": round(r["software_cpu_relays"], 4),
                    "relay_cpu_core_direct": round(r["core_direct_cpu_relays"], 4)},
            r["speedup"] > 1.0,
            f"chain send, n = {r['n']}, {r['k']} x 1 MiB, Fractus; speedup = time without "
            "/ with CORE-Direct relaying (hybrid polling; published ~1.05)")
    return rows
