"""Speed of the simulation engine on the fig. 5a workload, against bare SimPy.

Prints one JSON object:
- ``verbs_per_s``: simulated verbs completed per wall second on the fig. 5a workload
  (16 nodes x 2 ConnectX-4, 24 threads, 8 coroutines x 4 outstanding, 32 B READs),
- ``simpy_timeouts_per_s``: bare SimPy timeouts per wall second (one process yielding
  ``env.timeout(1)`` in a loop) measured in the same process,
- ``efficiency``: their ratio, which is meaningful on a shared, noisy machine where the
  absolute numbers are not,
- ``efficiency_cpu``: the same ratio over the process's CPU time instead of wall time
  (less sensitive to other processes on a loaded machine),
- ``build``: ``compiled`` or ``pure-python`` (:mod:`rnicsim.hw`; ``RNICSIM_PURE_PYTHON=1``
  forces the latter),
- ``events_per_verb``: heap entries processed per completed verb,
- ``peak_rss_mb``: peak resident memory of the process.

With ``--calls`` it instead runs the measured window under ``cProfile`` and prints
``python_calls_per_verb`` (Python and C function calls per completed verb, the
profiler's total): the same on every machine and load, so two versions of the model can
be compared where wall-clock rates are too noisy.

Usage: ``python benchmarks/engine.py [--verb read] [--payload 32] [--measure-us 200]
[--calls]``.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import simpy  # noqa: E402

from rnicsim.cluster import Cluster  # noqa: E402
from rnicsim.profile import load_profile  # noqa: E402
from rnicsim.sim import Simulation  # noqa: E402
from workloads.microbench import Microbench, MicrobenchSpec  # noqa: E402


def bare_simpy(n: int = 300_000) -> float:
    """Timeouts per wall second of the simplest SimPy process."""
    return bare_simpy_rates(n)[0]


def bare_simpy_rates(n: int = 300_000) -> tuple[float, float]:
    """Timeouts per wall second and per CPU second of the simplest SimPy process."""
    env = simpy.Environment()

    def proc():
        for _ in range(n):
            yield env.timeout(1)

    env.process(proc())
    t, c = time.perf_counter(), time.process_time()
    env.run()
    return n / (time.perf_counter() - t), n / (time.process_time() - c)


def engine(verb: str, payload: int, measure_us: float,
           calls: bool = False) -> tuple[float, float, float]:
    """(verbs per wall second, verbs per CPU second, heap events per verb) on the fig. 5a
    workload; with ``calls``, (function calls per verb, 0, heap events per verb) under
    cProfile."""
    prof = load_profile("cx4-edr")
    sim = Simulation(1)
    cluster = Cluster(sim, prof, 16, 2)
    spec = MicrobenchSpec(verb=verb, payload=payload, threads=24, coroutines=8,
                          outstanding=4, transport="ud" if verb == "rpc" else "rc",
                          doorbell_batch=16 if verb == "rpc" else 1)
    mb = Microbench(sim, cluster, spec)
    warm = 20_000.0
    sim.measure(0.0, warm + measure_us * 1e3)
    mb.start()
    sim.run(until=warm)  # set-up transients (cold caches) are not timed
    ops0 = mb.ops
    eid0 = sim.events_scheduled
    if calls:
        prof = cProfile.Profile()
        prof.enable()
    t, c = time.perf_counter(), time.process_time()
    sim.run(until=warm + measure_us * 1e3)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    ops = mb.ops - ops0
    events = sim.events_scheduled - eid0
    if calls:
        prof.disable()
        return pstats.Stats(prof).total_calls / max(1, ops), 0.0, events / max(1, ops)
    return ops / wall, ops / cpu, events / max(1, ops)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verb", default="read")
    ap.add_argument("--payload", type=int, default=32)
    ap.add_argument("--measure-us", type=float, default=200.0)
    ap.add_argument("--calls", action="store_true",
                    help="count function calls per verb under cProfile instead of timing")
    a = ap.parse_args(argv)
    workload = f"fig5a {a.verb} {a.payload}B, 16 nodes x 2 NICs, 24 threads, 8x4 window"
    import rnicsim.hw

    build = "pure-python" if rnicsim.hw.PURE_PYTHON else "compiled"
    if a.calls:
        per_verb, _, ev_per_verb = engine(a.verb, a.payload, a.measure_us, calls=True)
        print(json.dumps({"workload": workload, "build": build,
                          "python_calls_per_verb": round(per_verb, 2),
                          "events_per_verb": round(ev_per_verb, 2)}))
        return 0
    s0, c0 = bare_simpy_rates()
    verbs_rate, verbs_cpu, ev_per_verb = engine(a.verb, a.payload, a.measure_us)
    s1, c1 = bare_simpy_rates()
    simpy_rate, simpy_cpu = (s0 + s1) / 2, (c0 + c1) / 2  # bracket the engine run
    out = {
        "workload": workload,
        "build": build,
        "verbs_per_s": round(verbs_rate),
        "simpy_timeouts_per_s": round(simpy_rate),
        "efficiency": round(verbs_rate / simpy_rate, 4),
        "efficiency_cpu": round(verbs_cpu / simpy_cpu, 4),
        "events_per_verb": round(ev_per_verb, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
