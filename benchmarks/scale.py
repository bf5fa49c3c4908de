"""How the simulator scales with the cluster: set-up and run cost per node count.

Each point (workload x topology x node count) runs in a fresh process, so that its peak
memory is its own, and reports:

- ``setup_s``: wall time to build the cluster, QPs, receive buffers and stores [s],
- ``run_s``: wall time of the run, warm-up included [s]; ``sim_us``: simulated time [us],
- ``events_per_s``: SimPy heap entries processed per wall second of the run,
- ``work_per_s``: verbs (microbench) or committed transactions (SmallBank) of the measured
  window per wall second of that window,
- ``simpy_timeouts_per_s``: bare SimPy timeouts per wall second, measured in the same
  process before and after the point (:func:`benchmarks.engine.bare_simpy`, mean of both),
- ``efficiency``: ``events_per_s / simpy_timeouts_per_s`` (comparable across machines
  and on a loaded one where the absolute rates are not), ``work_eff``: ``work_per_s`` over
  the same rate,
- ``qps``: QPs created on all NICs (both ends of every connection), ``setup_rss_mb``
  and ``peak_rss_mb`` (``ru_maxrss`` after set-up and at the end, [MB]),
- ``work``: verbs or transactions completed in the window.

Workloads (fixed per node, so the simulated work grows linearly with the nodes):

- ``read``: the ``microbench`` kind, all-to-all 64 B RC READs, ``--threads`` (2) per node
  (one RC QP pair per thread and ordered pair of nodes: 2 x threads x N x (N - 1) QPs),
  ``--coroutines`` (4) x 2 outstanding, cx4-edr, one NIC per node; 10 us warm-up, 20 us
  window.
- ``smallbank``: the ``txn`` kind, SmallBank on the DrTM+H preset, ``--threads`` (2) x
  ``--coroutines`` (4), 2 cx4-edr NICs per node; 10 us warm-up, 30 us window. (Seed
  000's setting is ``--threads 24 --coroutines 8``: 3.8 M RC QPs and several GB at 400
  nodes.)

Topologies: ``single`` (one switch) and ``leafspine`` (``leaf_spine`` with ``max(2, N //
16)`` leaves and half as many spines, at least 2, non-oversubscribed).

Usage::

    python benchmarks/scale.py [--quick] [--nodes 16 80 160 320] [--workloads read smallbank]
                               [--topologies single leafspine] [--threads 2]
                               [--coroutines 4] [--out scale.json]

``--quick`` runs 16 and 80 nodes on the single switch only (under a minute). Wall times
are of a shared machine: compare the ``efficiency`` columns, not the seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOADS = ("read", "smallbank")
TOPOLOGIES = ("single", "leafspine")


def topology(kind: str, nodes: int) -> dict:
    """The scenario topology dict of ``kind`` for ``nodes`` nodes."""
    if kind == "single":
        return {"kind": "single_switch"}
    leaves = max(2, nodes // 16)
    return {"kind": "leaf_spine", "leaves": leaves, "spines": max(2, leaves // 2),
            "oversubscription": 1.0}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _setup_read(nodes: int, topo: dict, threads: int = 2, coros: int = 4):
    """(sim, cluster, start(), work(), warm_ns, measure_ns) of the READ microbenchmark."""
    from rnicsim.cluster import Cluster
    from rnicsim.profile import load_profile
    from rnicsim.sim import Simulation
    from workloads.microbench import Microbench, MicrobenchSpec

    prof = load_profile("cx4-edr")
    spec = MicrobenchSpec(verb="read", payload=64, threads=threads, coroutines=coros,
                          outstanding=2)
    sim = Simulation(1)
    cluster = Cluster(sim, prof, nodes, 1, topology=topo)
    mb = Microbench(sim, cluster, spec)
    warm, meas = 10_000.0, 20_000.0
    sim.measure(warm, meas)
    return sim, cluster, mb.start, (lambda: mb.ops), warm, meas


def _setup_smallbank(nodes: int, topo: dict, threads: int = 2, coros: int = 4):
    """(sim, cluster, start(), work(), warm_ns, measure_ns) of SmallBank on DrTM+H."""
    from protocols.txn.bench import build, make_workload
    from protocols.txn.systems import preset
    from rnicsim.profile import load_profile

    prof = load_profile("cx4-edr")
    wl = make_workload("smallbank", {}, nodes, threads, prof.host.clock, coros)
    b = build(prof, nodes, threads, wl, preset("drtmh"), coros, nics_per_node=2,
              topology=topo)
    warm, meas = 10_000.0, 30_000.0
    # As protocols.txn.bench.run_txn_bench starts it (staggered over one CPU-bound
    # transaction latency).
    est = wl.cpu_estimate_ns()
    b.sim.measure(warm, meas)
    return (b.sim, b.cluster, lambda: b.cc.start(wl, coros, coros * est),
            (lambda: b.cc.stats.committed), warm, meas)


def one(workload: str, topo_kind: str, nodes: int, threads: int = 2, coros: int = 4) -> dict:
    """Build and run one point in this process; return its numbers (see module doc)."""
    from benchmarks.engine import bare_simpy

    # Imported before the clock starts: set-up time is building, not importing.
    import protocols.txn.bench  # noqa: F401
    import protocols.txn.systems  # noqa: F401
    import rnicsim.cluster  # noqa: F401
    import workloads.microbench  # noqa: F401
    from rnicsim.profile import load_profile

    load_profile("cx4-edr")
    simpy0 = bare_simpy()
    topo = topology(topo_kind, nodes)
    t0 = time.perf_counter()
    setup = _setup_read if workload == "read" else _setup_smallbank
    sim, cluster, start, work, warm, meas = setup(nodes, topo, threads, coros)
    t1 = time.perf_counter()
    setup_rss = _rss_mb()
    qps = sum(len(nic.qps) for nic in cluster.nics)
    start()
    eid0 = sim.events_scheduled
    t2 = time.perf_counter()
    sim.run(until=warm)
    t3 = time.perf_counter()
    w0 = work()
    sim.run(until=warm + meas)
    t4 = time.perf_counter()
    events = sim.events_scheduled - eid0
    done = work() - w0
    simpy_rate = (simpy0 + bare_simpy()) / 2   # bracket the point
    run_s = t4 - t2
    ev_rate = events / run_s
    work_rate = done / (t4 - t3)
    return {"workload": workload, "topology": topo_kind, "nodes": nodes,
            "threads": threads, "coroutines": coros,
            "leaves": topo.get("leaves", 1), "qps": qps,
            "setup_s": round(t1 - t0, 3), "run_s": round(run_s, 3),
            "sim_us": (warm + meas) / 1e3, "events": events, "work": int(done),
            "events_per_s": round(ev_rate), "work_per_s": round(work_rate),
            "simpy_timeouts_per_s": round(simpy_rate),
            "efficiency": round(ev_rate / simpy_rate, 4),
            "work_eff": round(work_rate / simpy_rate, 5),
            "setup_rss_mb": round(setup_rss, 1), "peak_rss_mb": round(_rss_mb(), 1)}


COLUMNS = [("workload", "{:<9}"), ("topology", "{:<9}"), ("nodes", "{:>5}"),
           ("qps", "{:>8}"), ("setup_s", "{:>8.2f}"), ("run_s", "{:>7.2f}"),
           ("sim_us", "{:>6.0f}"), ("events_per_s", "{:>9}"), ("work_per_s", "{:>8}"),
           ("simpy_timeouts_per_s", "{:>9}"), ("efficiency", "{:>7.4f}"),
           ("work_eff", "{:>8.5f}"), ("setup_rss_mb", "{:>8.0f}"),
           ("peak_rss_mb", "{:>7.0f}")]
HEADERS = ["workload", "topology", "nodes", "qps", "setup_s", "run_s", "sim_us", "ev/s",
           "work/s", "simpy/s", "eff", "work_eff", "setupMB", "peakMB"]


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table."""
    lines = []
    cells = [[f.format(r[k]) for k, f in COLUMNS] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(HEADERS)]
    lines.append("  ".join(h.rjust(w) for h, w in zip(HEADERS, widths)))
    for c in cells:
        lines.append("  ".join(x.rjust(w) for x, w in zip(c, widths)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run each point in its own process; print the table, write JSON to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 80, 160, 320])
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument("--topologies", nargs="+", choices=TOPOLOGIES, default=list(TOPOLOGIES))
    ap.add_argument("--threads", type=int, default=2, help="threads per node (default 2)")
    ap.add_argument("--coroutines", type=int, default=4,
                    help="coroutines per thread (default 4)")
    ap.add_argument("--quick", action="store_true",
                    help="16 and 80 nodes, single switch (under a minute)")
    ap.add_argument("--out", type=Path, help="write the rows as a JSON list here")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)   # child: workload topo nodes
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(one(a.one[0], a.one[1], int(a.one[2]), a.threads, a.coroutines)),
              flush=True)
        # The point is measured; freeing millions of QPs one by one at exit would take
        # as long as building them (~30 s at 400 nodes x 24 threads) and measures nothing.
        os._exit(0)
    if a.quick:
        a.nodes, a.topologies = [16, 80], ["single"]
    rows = []
    for wl in a.workloads:
        for topo in a.topologies:
            for n in a.nodes:
                r = subprocess.run([sys.executable, __file__, "--one", wl, topo, str(n),
                                    "--threads", str(a.threads),
                                    "--coroutines", str(a.coroutines)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print(r.stderr, file=sys.stderr)
                    return r.returncode
                rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    if a.out is not None:
        a.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
