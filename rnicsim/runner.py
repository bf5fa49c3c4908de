"""Runner: runs a scenario's points (in this process, on a local process pool or on a Dask
cluster, see :mod:`rnicsim.distributed`) and writes its results.

``run_scenario(sc, out_dir)`` stores each point under ``out_dir/points/`` as it finishes
(see :mod:`rnicsim.store`: an interrupted run keeps its finished points, ``--resume``
runs only the others) and writes, once every point has run: ``results.csv`` (one row per
point: swept parameters, then metrics), ``summary.json`` (scenario, points, claim
checks, rows), ``scenario.resolved.yaml`` (every default filled in), the declared plots,
``timing.json`` (wall time of the run and of each point, where each ran, and the
point runners' own wall-clock metrics) and, for points whose workload hands back files
(a point runner's ``"_files": {name: text}`` entry, e.g. a transaction history), those
files under ``points/NNN/`` (NNN = the point's index in results.csv, from 000).

Results do not depend on where or how the points ran: ``results.csv``, ``summary.json``
and the plots are byte-identical for one process, N processes, any Dask cluster, and a
run interrupted and resumed. So no wall time goes into them: metrics that measure the
simulator's wall time (names ending in one of :data:`WALL_CLOCK`) go to ``timing.json``.
Final files are staged in a temporary directory and moved into place at the end, so a
failed or interrupted run never leaves results that look complete; that directory is made
before the first point runs, so an output directory that cannot be written is refused up
front.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .claims import evaluate, selected
from .errors import InputError
from .profile import load_profile
from .results import check_out_dir
from .scenario import Scenario, points, resolved_yaml, workload_runner
from .store import POINTS, RunStore, point_key

# Metric names (last dotted part) that measure the simulator's own wall time [s].
WALL_CLOCK = ("wall_s", "setup_s", "run_s")
# Test hook: stop (KeyboardInterrupt) after this many points of a run were stored.
INTERRUPT_HOOK = "RNICSIM_TEST_INTERRUPT_AFTER"


def point_profile(sc: Scenario):
    """The NIC profile of a scenario point, with its ``cluster.nic.overrides`` applied."""
    prof = load_profile(sc.cluster.nic.profile)
    if sc.cluster.nic.overrides:
        prof = prof.with_overrides(dict(sc.cluster.nic.overrides), "cluster.nic.overrides")
    return prof


def run_point(sc: Scenario, profile=None) -> dict[str, float]:
    """Run one scenario point (one element of :func:`rnicsim.scenario.points`) and
    return its metrics by stable name, unit in the name (``throughput_mops`` [M/s],
    ``lat_p99_us`` [us], ...). Runs in the calling process; writes nothing. ``profile``
    (a loaded Profile) replaces :func:`point_profile`'s, e.g. one sent to a remote worker.

    The point's cluster is collected before returning: while simulations run the cyclic
    collector is held off (:func:`rnicsim.sim.long_lived_heap`), and a sweep must not
    keep one cluster per point alive."""
    try:
        return workload_runner(sc.workload.kind)(sc, point_profile(sc) if profile is None
                                                 else profile)
    finally:
        gc.collect()


class PointsFailed(Exception):
    """Some points raised; every other point ran (and is stored when the run has an output
    directory). ``failures``: (index, swept values, error line) in sweep order."""

    def __init__(self, failures: list[tuple[int, dict[str, Any], str]], total: int,
                 stored_in: Path | None = None) -> None:
        self.failures = failures
        lines = [f"{len(failures)} of {total} points failed"
                 + (f" (results not written; the {total - len(failures)} others are stored "
                    f"in {stored_in}/points: --resume runs only the missing ones)"
                    if stored_in is not None else "") + ":"]
        lines += [f"  point {i} ({_fmt(vals, full=True)}): {err}" for i, vals, err in failures]
        super().__init__("\n".join(lines))


def _fmt(vals: dict[str, Any], full: bool = False) -> str:
    return " ".join(f"{k if full else k.split('.')[-1]}={v}" for k, v in vals.items()) \
        or "(single point)"


def wall_clock(name: str) -> bool:
    """Whether a metric measures the simulator's own wall time (last part of its name in
    :data:`WALL_CLOCK`), not the model: such metrics go to ``timing.json``, not results."""
    return name.rsplit(".", 1)[-1] in WALL_CLOCK


def _record(i: int, key: str, vals: dict[str, Any], metrics: dict[str, Any], dt: float,
            worker: str) -> dict[str, Any]:
    """A finished point as stored (see :mod:`rnicsim.store`)."""
    m = dict(metrics)
    files = m.pop("_files", {})
    wall = {k: m.pop(k) for k in [k for k in m if wall_clock(k)]}
    return {"index": i, "key": key, "values": vals, "metrics": m, "files": files,
            "wall": {"point_s": round(dt, 3), **wall}, "worker": worker}


def run_records(sc: Scenario, pool=None, progress: bool = True, store: RunStore | None = None,
                resume: bool = False, force: bool = False,
                source: str = "") -> list[dict[str, Any]]:
    """The finished-point records of every point of ``sc`` (see :mod:`rnicsim.store`), in
    sweep order, run on ``pool`` (:func:`rnicsim.distributed.open_pool`; None: this
    process).

    Every point's profile is loaded first, so a bad one raises InputError before anything
    runs. With a ``store`` each point is stored as it finishes, and ``resume`` keeps the
    stored ones (see :meth:`RunStore.open`). A point that raises does not stop the others;
    :class:`PointsFailed` names every such point once the rest have run. ``progress``
    prints one line per finished point on stderr: points done, running and failed; and,
    when the points run in this process, every few seconds the running point's simulated
    time against the end of its measured window (:func:`rnicsim.trace.watch_progress`)."""
    from contextlib import nullcontext

    from .distributed import SerialPool, Task
    from .trace import sim_progress, watch_progress

    pool = pool or SerialPool()
    pts = points(sc)
    profs = [point_profile(p) for _v, p in pts]    # a bad profile fails before any point
    keys = [point_key(p.model_dump(mode="json"), prof.model.model_dump(mode="json"))
            for (_v, p), prof in zip(pts, profs)]
    recs: dict[int, dict[str, Any]] = {}
    if store is not None:
        recs = store.open(sc.model_dump(mode="json"), keys, resume, force)
    todo = [Task(i, p, profs[i], source) for i, (_v, p) in enumerate(pts) if i not in recs]
    if progress:
        kept = f"{len(recs)} stored, {len(todo)} to run, " if recs else ""
        print(f"rnicsim: running {sc.name} ({len(pts)} points, {kept}size {sc.run.size}) "
              f"{pool.where}", file=sys.stderr, flush=True)
    stop = int(os.environ.get(INTERRUPT_HOOK) or 0)
    failures: list[tuple[int, dict[str, Any], str]] = []
    t0 = time.perf_counter()
    done = 0
    ran = [0]               # points of `todo` finished, in the order a SerialPool runs them

    def running_point(now: float, end: float) -> str:
        if ran[0] >= len(todo):
            return ""
        i = todo[ran[0]].index
        r = pts[i][1].run
        # the window the point set (a transaction point stretches short ones), else the
        # scenario's
        return f"  point {i + 1}/{len(pts)}: {sim_progress(now, end or r.warmup + r.measure)}"

    watch = (watch_progress(running_point) if progress and type(pool) is SerialPool
             else nullcontext())
    with watch:
        for o in pool.run(todo):
            ran[0] += 1
            vals = pts[o.index][0]
            if o.error is None:
                rec = _record(o.index, keys[o.index], vals, o.metrics, o.wall_s, o.worker)
                # Rows are built from the record as stored and read back, whether or not the
                # run was resumed: both read the same JSON, so their results are identical.
                recs[o.index] = store.save(o.index, rec) if store is not None else \
                    json.loads(json.dumps(rec, default=str))
                done += 1
            else:
                failures.append((o.index, vals, o.error))
            if progress:
                left = len(todo) - done - len(failures)
                el = time.perf_counter() - t0
                what = (f"{o.wall_s:.1f}s on {o.worker}" if o.error is None
                        else f"FAILED: {o.error}")
                eta = f", left ~{el / done * left:.0f}s" if done and left else ""
                print(f"  [{len(recs)}/{len(pts)} done, {pool.running(left)} running, "
                      f"{len(failures)} failed] {_fmt(vals)}  {what}  (elapsed {el:.0f}s{eta})",
                      file=sys.stderr, flush=True)
            if stop and done == stop and store is not None:
                raise KeyboardInterrupt(f"{INTERRUPT_HOOK}={stop}")
    if failures:
        raise PointsFailed(sorted(failures), len(pts),
                           store.out if store is not None else None)
    return [recs[i] for i in range(len(pts))]


def _row(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec["values"], **rec["metrics"]}


def run_points(sc: Scenario, jobs: int = 1, progress: bool = True) -> list[dict[str, Any]]:
    """Rows (swept values + metrics, wall-clock metrics left out) of every point of ``sc``,
    in sweep order, on ``jobs`` local processes (see :func:`run_records`). Writes nothing;
    see :func:`run_scenario` for the files."""
    from .distributed import open_pool

    pool = open_pool(jobs)
    try:
        return [_row(r) for r in run_records(sc, pool, progress)]
    finally:
        pool.close()


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as CSV: columns in first-seen order."""
    import csv

    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def missing_columns(sc: Scenario, rows: list[dict[str, Any]]) -> list[str]:
    """One line per plot axis, claim metric or claim ``over`` that names a column no row
    has (a misspelt metric: the plot is not drawn, the claim measures NaN). The metric of
    a claim whose conditions select no row is not looked for: the claim is ``not
    measured`` whatever its metric, and a narrowed sweep (``--set`` on a swept key) may
    leave out the only points that have its column (e.g. SUNDIAL's
    ``lat_renew_call_us``)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    out = []
    names = [(f"plots[{i}].{a}", getattr(p, a)) for i, p in enumerate(sc.plots)
             for a in ("x", "y")]
    names += [(f"expected[{i}].{a}", getattr(c, a, None)) for i, c in enumerate(sc.expected)
              for a in (("metric", "over") if selected(c, rows) else ("over",))]
    for key, name in names:
        if name is not None and name not in cols:
            out.append(f"{key}: no result has a column {name!r}; columns: "
                       f"{', '.join(cols) or 'none'}")
    return out


# Transactions retried at once can abort each other in lockstep for ever in a simulator
# without timing noise (protocols/txn/scenario_kinds.py retry_backoff_for).
_RETRY_HINT = ("; with retries at once (protocol.retry_backoff false, the default under "
               "framework: rcc) try --set protocol.retry_backoff=true")


def _point(r: dict[str, Any]) -> str:
    """A point record named for a warning: its number, from 1 as the progress lines
    number points, and its swept values."""
    at = ", ".join(f"{k}={v}" for k, v in r["values"].items()) or "the only point"
    return f"point {r['index'] + 1} ({at})"


def empty_points(recs: list[dict[str, Any]]) -> list[str]:
    """One line per transaction point that committed nothing in its measured window
    (metric ``committed`` 0): its throughput reads 0 because the window is shorter than
    the protocol's latency at that point, not because it stalled for certain."""
    out = []
    for r in recs:
        m = r["metrics"]
        if m.get("committed") == 0:
            window = f" {m['measure_us']:g}-us" if "measure_us" in m else ""
            stalled = m.get("stalled_txns", 0)
            stall = (f"; if a longer one commits nothing either, its {stalled:g} "
                     f"transaction(s) in flight through the whole window (stalled_txns) "
                     f"are a livelock or a deadlock{_RETRY_HINT}") if stalled else ""
            out.append(f"{_point(r)}: no transaction committed in its"
                       f"{window} window; a window shorter than one transaction measures "
                       "nothing: lengthen run.measure and run.warmup (e.g. --set "
                       f"run.measure=2ms) to see its throughput{stall}")
    return out


def stalled_points(recs: list[dict[str, Any]]) -> list[str]:
    """One line per transaction point with transactions that stalled (metric
    ``stalled_txns`` above 0: in flight through the whole window and more than twice as
    long as any that committed) that committed others (one that committed nothing is
    :func:`empty_points`'s)."""
    out = []
    for r in recs:
        n = r["metrics"].get("stalled_txns", 0)
        if n > 0 and r["metrics"].get("committed") != 0:
            out.append(f"{_point(r)}: {n:g} transaction(s) retried or waited through "
                       "the whole measured window, more than twice as long as any that "
                       f"committed (stalled_txns): a livelock or a deadlock{_RETRY_HINT}")
    return out


def run_scenario(sc: Scenario, out_dir: str | Path, jobs: int = 1, progress: bool = True,
                 source: str = "", *, pool=None, resume: bool = False,
                 force: bool = False) -> dict[str, Any]:
    """Run every point of ``sc`` and write its results into ``out_dir`` (see module doc).

    Points run on ``pool`` (:func:`rnicsim.distributed.open_pool`), else on ``jobs``
    local processes. ``out_dir`` is checked before any point runs (InputError naming
    ``--out``): its parent is created and a staging directory made in it, and it may not
    hold an unfinished run unless ``resume`` (keep its stored points) or ``force``
    (discard them). Raises :class:`PointsFailed` when points raised (the others are
    stored, no results are written). Plot axes and claim metrics that name no column of
    the results, and transaction points that committed nothing in their window or whose
    transactions stalled, are warned about on stderr."""
    from .distributed import open_pool

    if not str(out_dir).strip():
        raise InputError("command line", "--out", "a directory path (got an empty one)")
    out = check_out_dir(out_dir)    # a file, a path below a file, not writable: exit 2
    store = RunStore(out)
    store.check(resume, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".rnicsim-", dir=out.parent))
    except OSError as e:
        raise InputError("command line", "--out",
                         f"a directory that can be created and written ({out}: "
                         f"{e.strerror})") from None
    own = pool is None
    pool = pool or open_pool(jobs)
    try:
        t0 = time.perf_counter()
        recs = run_records(sc, pool, progress, store, resume, force, source)
        rows = [_row(r) for r in recs]
        for w in missing_columns(sc, rows) + empty_points(recs) + stalled_points(recs):
            print(f"rnicsim: warning: {w}", file=sys.stderr, flush=True)
        claims = evaluate(sc.expected, rows)
        # No wall time here: results.csv, summary.json and the plots depend only on the
        # scenario, not on the machine, the workers or an interruption (timing.json has it).
        summary = {
            "scenario": sc.name, "file": source, "size": sc.run.size, "seed": sc.run.seed,
            "points": len(rows), "claims": claims, "rows": rows,
        }
        write_csv(tmp / "results.csv", rows)
        (tmp / "scenario.resolved.yaml").write_text(resolved_yaml(sc))
        from .plots import make_plots

        summary["plots"] = make_plots(sc, rows, tmp)
        written = ["results.csv", "summary.json", "scenario.resolved.yaml", "timing.json",
                   *summary["plots"]]
        for r in recs:
            for name, text in r["files"].items():
                rel = f"{POINTS}/{r['index']:03d}/{name}"
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_text(text)
                written.append(rel)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        timing = {"wall_s": round(time.perf_counter() - t0, 2), "where": pool.where,
                  "points": [{"index": r["index"], "worker": r["worker"], **r["wall"]}
                             for r in recs]}
        (tmp / "timing.json").write_text(json.dumps(timing, indent=1) + "\n")
        for rel in written:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / rel, out / rel)
        store.finish(written)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if own:
            pool.close()
    return summary
