"""What a scale-out run costs: build time, memory and wall time per simulated microsecond
of SmallBank on DrTM+H (2 ConnectX-4 EDR per node, 24 threads, 8 coroutines) at several
cluster sizes, each in a fresh process so that its peak RSS is its own.

One JSON line per size: ``nodes``, ``rc_qps`` (RC QPs in the cluster: threads x nodes x
(nodes - 1)), ``build_s``, ``build_rss_mb``, ``wall_s_per_sim_us`` (the run, warm-up
included), ``peak_rss_mb``, ``events_per_s`` (simulation events per wall second),
``simpy_timeouts_per_s`` (bare SimPy, same process) and ``efficiency`` (their ratio:
comparable across machines; it falls with the size as the working set outgrows the CPU
caches).

Usage: ``python benchmarks/scale.py [--nodes 16 80] [--sim-us 20]``. 400 nodes need about
6 GB and ten minutes.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(nodes: int, sim_us: float) -> dict:
    """Build and run SmallBank on ``nodes`` nodes for ``sim_us`` simulated us."""
    from benchmarks.engine import bare_simpy
    from protocols.txn.bench import build, make_workload, run_txn_bench
    from protocols.txn.systems import preset
    from rnicsim.profile import load_profile

    simpy_rate = bare_simpy()
    prof = load_profile("cx4-edr")
    t0 = time.perf_counter()
    wl = make_workload("smallbank", {}, nodes, 24, prof.host.clock, 8)
    b = build(prof, nodes, 24, wl, preset("drtmh"), 8, nics_per_node=2)
    t1 = time.perf_counter()
    build_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    half = sim_us * 1e3 / 2
    eid0 = next(b.sim.env._eid)
    run_txn_bench(b, half, half)
    wall = time.perf_counter() - t1
    rate = (next(b.sim.env._eid) - eid0) / wall
    return {"nodes": nodes, "rc_qps": 24 * nodes * (nodes - 1),
            "build_s": round(t1 - t0, 2), "build_rss_mb": round(build_rss, 1),
            "wall_s_per_sim_us": round(wall / sim_us, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "events_per_s": round(rate), "simpy_timeouts_per_s": round(simpy_rate),
            "efficiency": round(rate / simpy_rate, 4)}


def main(argv: list[str] | None = None) -> int:
    """Run each size in its own process and print its JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 80])
    ap.add_argument("--sim-us", type=float, default=20.0,
                    help="simulated time per size, half warm-up [us] (default 20)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)   # child process
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(one(a.one, a.sim_us)), flush=True)
        return 0
    for n in a.nodes:
        r = subprocess.run([sys.executable, __file__, "--one", str(n), "--sim-us",
                            str(a.sim_us)], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        print(r.stdout.strip(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
