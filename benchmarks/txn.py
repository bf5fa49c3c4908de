"""Speed of the transaction layer: simulated transactions per wall second, peak memory.

Runs one point of DrTM+H's end-to-end setting (DrTM+H preset, 2 ConnectX-4 EDR per node,
24 threads, 8 coroutines) for TPC-C New-Order and SmallBank and prints one JSON line per
benchmark: ``txns_per_wall_s`` (transactions committed in the measured window per wall
second of the whole run, warm-up included), ``measure_us`` (the window, stretched as the
scenarios stretch it so that it is in steady state and holds enough commits), ``simpy_timeouts_per_s`` (bare SimPy in the same process) and their ratio,
``throughput_mtxns`` (simulated), ``peak_rss_mb``.

Usage: ``python benchmarks/txn.py [--nodes 16] [--measure-us US] [--bench tpcc smallbank]``.

``--protocols [KIND ...]`` instead runs RCC's six protocols (default all), each over RPC
and over one-sided verbs, on one YCSB point as RCC's EDR runs configure it (8 nodes of
ConnectX-4 EDR, 10 threads x 10 coroutines, 10 keys, 20 % writes, 5 us of computation),
each point in a child process of its own so that ``peak_rss_mb`` is that point's peak
(the child starts from the parent's few tens of MB of imports). ``--verbs``,
``--coroutines``, ``--write-probability`` and ``--warmup-us`` change that point; RCC's
fig. 22 point at 396 nodes as ``scenarios/rcc/fig22_scale.yaml``'s demo size runs it::

    python benchmarks/txn.py --protocols mvcc --verbs one_sided --nodes 396 \
        --coroutines 2 --write-probability 0.1 --warmup-us 1000 --measure-us 1000
"""
from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.engine import bare_simpy  # noqa: E402
from protocols.txn.bench import build, make_workload, run_txn_bench, stretch_window  # noqa: E402
from protocols.txn.systems import preset  # noqa: E402
from rnicsim.profile import load_profile  # noqa: E402


def one(bench: str, nodes: int, measure_us: float) -> dict:
    """Build and run one point; return its speed numbers."""
    prof = load_profile("cx4-edr")
    t0 = time.perf_counter()
    wl = make_workload(bench, {}, nodes, 24, prof.host.clock, 8)
    b = build(prof, nodes, 24, wl, preset("drtmh"), 8, nics_per_node=2)
    t1 = time.perf_counter()
    # The scenarios' own stretch: the warm-up and window outlast the transactions in
    # flight, so the window is in steady state (a CPU-bound TPC-C transaction takes
    # ~0.5 ms at 8 coroutines).
    warm, measure = stretch_window(wl, 8, 100_000.0, measure_us * 1e3)
    m = run_txn_bench(b, warm, measure, settle=True)
    wall = time.perf_counter() - t1
    return {"benchmark": bench, "nodes": nodes, "setup_s": round(t1 - t0, 2),
            "run_s": round(wall, 2), "measure_us": round(m["measure_us"], 1),
            "committed": m.get("committed"),
            "txns_per_wall_s": round((m.get("committed") or 0) / wall, 1),
            "throughput_mtxns": round(m["throughput_mtxns"], 3)}


PROTOCOLS = ("nowait", "waitdie", "occ", "mvcc", "sundial", "calvin")


def one_protocol(kind: str, verbs: str, nodes: int, measure_us: float, out,
                 coros: int = 10, write_probability: float = 0.2,
                 warmup_us: float = 100.0) -> None:
    """Build and run one YCSB point of protocol ``kind``; put its speed numbers on
    ``out`` (a queue: this runs in a child process)."""
    from protocols.txn import scenario_kinds as sk
    from protocols.txn.registry import protocol

    prof = load_profile("cx4-edr")
    threads = 10
    t0 = time.perf_counter()
    wl = make_workload("ycsb", {"write_probability": write_probability}, nodes, threads,
                       prof.host.clock, coros)
    block = (sk.OccProtocol if kind == "occ" else
             {"nowait": sk.NowaitProtocol, "waitdie": sk.WaitdieProtocol,
              "mvcc": sk.MvccProtocol, "sundial": sk.SundialProtocol,
              "calvin": sk.CalvinProtocol}[kind])(kind=kind, verbs=verbs)
    cfg = protocol(kind).config_of(block)
    b = build(prof, nodes, threads, wl, cfg, coros, kind=kind)
    t1 = time.perf_counter()
    warm, measure = stretch_window(wl, coros, warmup_us * 1e3, measure_us * 1e3,
                                   prof.host.timer_slack)
    m = run_txn_bench(b, warm, measure, settle=True)
    wall = time.perf_counter() - t1
    out.put({"protocol": kind, "verbs": verbs, "nodes": nodes, "coroutines": coros,
             "warmup_us": round(m["warmup_us"], 1),
             "setup_s": round(t1 - t0, 2), "run_s": round(wall, 2),
             "measure_us": round(m["measure_us"], 1), "committed": m.get("committed"),
             "txns_per_wall_s": round((m.get("committed") or 0) / wall, 1),
             "throughput_mtxns": round(m["throughput_mtxns"], 3),
             "events": b.sim.events_scheduled,
             "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                  1)})


def protocols_main(kinds: list[str], nodes: int, measure_us: float,
                   forms: tuple[str, ...] = ("rpc", "one_sided"), **point) -> int:
    """Print one JSON line per protocol and form, with bare SimPy of the same run.
    ``point``: ``coros``, ``write_probability``, ``warmup_us`` of :func:`one_protocol`."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    simpy_rate = bare_simpy()
    for kind in kinds:
        for verbs in forms:
            q = ctx.Queue()
            p = ctx.Process(target=one_protocol, args=(kind, verbs, nodes, measure_us, q),
                            kwargs=point)
            p.start()
            r = q.get()
            p.join()
            r["simpy_timeouts_per_s"] = round(simpy_rate)
            r["efficiency"] = round(r["txns_per_wall_s"] / simpy_rate, 6)
            print(json.dumps(r), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--measure-us", type=float, default=None,
                    help="measured window (default: 400 for tpcc, 50 for smallbank)")
    ap.add_argument("--bench", nargs="+", default=["tpcc", "smallbank"])
    ap.add_argument("--protocols", nargs="*", choices=PROTOCOLS, default=None,
                    help="RCC's protocols on a YCSB point instead (none named: all six)")
    ap.add_argument("--verbs", nargs="+", choices=("rpc", "one_sided"),
                    default=["rpc", "one_sided"], help="with --protocols: the forms run")
    ap.add_argument("--coroutines", type=int, default=10, help="with --protocols")
    ap.add_argument("--write-probability", type=float, default=0.2,
                    help="with --protocols (RCC fig. 22: 0.1)")
    ap.add_argument("--warmup-us", type=float, default=100.0, help="with --protocols")
    a = ap.parse_args(argv)
    if a.protocols is not None:
        return protocols_main(a.protocols or list(PROTOCOLS), a.nodes if a.nodes != 16
                              else 8, a.measure_us or 100.0, tuple(a.verbs),
                              coros=a.coroutines, write_probability=a.write_probability,
                              warmup_us=a.warmup_us)
    simpy_rate = bare_simpy()
    for bench in a.bench:
        gc.collect()     # the previous benchmark's cluster (the simulator holds the GC off)
        r = one(bench, a.nodes, a.measure_us or (400.0 if bench == "tpcc" else 50.0))
        r["simpy_timeouts_per_s"] = round(simpy_rate)
        r["efficiency"] = round(r["txns_per_wall_s"] / simpy_rate, 5)
        r["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
