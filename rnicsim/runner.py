"""Runner: runs a scenario's points (serially or on a process pool) and writes its results.

``run_scenario(sc, out_dir)`` writes, only once every point has run:
``results.csv`` (one row per point: swept parameters, then metrics), ``summary.json``
(scenario, points, wall time, claim checks), ``scenario.resolved.yaml`` (every default
filled in), the declared plots and, for points whose workload hands back files (a
point runner's ``"_files": {name: text}`` entry, e.g. a transaction history), those files
under ``points/NNN/`` (NNN = the point's index in results.csv, from 000). Files are written to a temporary directory first and
moved into place at the end, so a failed or interrupted run never leaves results that
look complete; that directory is made before the first point runs, so an output
directory that cannot be written is refused up front.
"""
from __future__ import annotations

import gc
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from .claims import evaluate
from .errors import InputError
from .profile import load_profile
from .results import check_out_dir
from .scenario import Scenario, points, resolved_yaml, workload_runner


def point_profile(sc: Scenario):
    """The NIC profile of a scenario point, with its ``cluster.nic.overrides`` applied."""
    prof = load_profile(sc.cluster.nic.profile)
    if sc.cluster.nic.overrides:
        prof = prof.with_overrides(dict(sc.cluster.nic.overrides), "cluster.nic.overrides")
    return prof


def run_point(sc: Scenario) -> dict[str, float]:
    """Run one scenario point (one element of :func:`rnicsim.scenario.points`) and
    return its metrics by stable name, unit in the name (``throughput_mops`` [M/s],
    ``lat_p99_us`` [us], ...). Runs in the calling process; writes nothing.

    The point's cluster is collected before returning: while simulations run the cyclic
    collector is held off (:func:`rnicsim.sim.long_lived_heap`), and a sweep must not
    keep one cluster per point alive."""
    try:
        return workload_runner(sc.workload.kind)(sc, point_profile(sc))
    finally:
        gc.collect()


def _run_indexed(args: tuple[int, Any]) -> tuple[int, dict[str, float], float]:
    i, sc = args
    if isinstance(sc, dict):  # sent to a worker process as plain data
        from .scenario import _rebuild

        sc = _rebuild().model_validate(sc)
    t = time.perf_counter()
    m = run_point(sc)
    return i, m, time.perf_counter() - t


def _fmt(vals: dict[str, Any]) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in vals.items()) or "(single point)"


def run_points(sc: Scenario, jobs: int = 1, progress: bool = True) -> list[dict[str, Any]]:
    """Rows (swept values + metrics) of every point of ``sc``, in sweep order.

    ``jobs`` > 1 runs points on that many worker processes; ``progress`` prints one line per point on
    stderr. Every point's profile is loaded first, so a bad one raises
    :class:`~rnicsim.errors.InputError` before anything runs. Writes nothing; see
    :func:`run_scenario` for the files."""
    pts = points(sc)
    for _vals, p in pts:      # fail before running anything if a profile is bad
        point_profile(p)
    rows: list[dict[str, Any] | None] = [None] * len(pts)
    t0 = time.perf_counter()
    done = 0

    def report(i: int, dt: float) -> None:
        if progress:
            el = time.perf_counter() - t0
            eta = el / done * (len(pts) - done)
            print(f"  [{done}/{len(pts)}] {_fmt(pts[i][0])}  {dt:.1f}s  "
                  f"(elapsed {el:.0f}s, left ~{eta:.0f}s)", file=sys.stderr, flush=True)

    if jobs > 1 and len(pts) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            futs = [ex.submit(_run_indexed, (i, p.model_dump(mode="json")))
                    for i, (_v, p) in enumerate(pts)]
            for f in as_completed(futs):
                i, m, dt = f.result()
                rows[i] = {**pts[i][0], **m}
                done += 1
                report(i, dt)
    else:
        for i, (vals, p) in enumerate(pts):
            _, m, dt = _run_indexed((i, p))
            rows[i] = {**vals, **m}
            done += 1
            report(i, dt)
    return [r for r in rows if r is not None]


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
    has (a misspelt metric: the plot is not drawn, the claim measures NaN)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    out = []
    names = [(f"plots[{i}].{a}", getattr(p, a)) for i, p in enumerate(sc.plots)
             for a in ("x", "y")]
    names += [(f"expected[{i}].{a}", getattr(c, a, None)) for i, c in enumerate(sc.expected)
              for a in ("metric", "over")]
    for key, name in names:
        if name is not None and name not in cols:
            out.append(f"{key}: no result has a column {name!r}; columns: "
                       f"{', '.join(cols) or 'none'}")
    return out


def run_scenario(sc: Scenario, out_dir: str | Path, jobs: int = 1, progress: bool = True,
                 source: str = "") -> dict[str, Any]:
    """Run every point of ``sc`` and write its results into ``out_dir`` (see module doc).

    ``out_dir`` is checked before any point runs (InputError naming ``--out``): its
    parent is created and a staging directory made in it. Plot axes and claim metrics
    that name no column of the results are warned about on stderr."""
    if not str(out_dir).strip():
        raise InputError("command line", "--out", "a directory path (got an empty one)")
    out = check_out_dir(out_dir)    # a file, a path below a file, not writable: exit 2
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".rnicsim-", dir=out.parent))
    except OSError as e:
        raise InputError("command line", "--out",
                         f"a directory that can be created and written ({out}: "
                         f"{e.strerror})") from None
    try:
        t0 = time.perf_counter()
        if progress:
            print(f"rnicsim: running {sc.name} ({len(points(sc))} points, size {sc.run.size})",
                  file=sys.stderr, flush=True)
        rows = run_points(sc, jobs, progress)
        files = {i: r.pop("_files") for i, r in enumerate(rows) if "_files" in r}
        for w in missing_columns(sc, rows):
            print(f"rnicsim: warning: {w}", file=sys.stderr, flush=True)
        claims = evaluate(sc.expected, rows)
        summary = {
            "scenario": sc.name, "file": source, "size": sc.run.size, "seed": sc.run.seed,
            "points": len(rows), "wall_s": round(time.perf_counter() - t0, 2),
            "claims": claims, "rows": rows,
        }
        write_csv(tmp / "results.csv", rows)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        (tmp / "scenario.resolved.yaml").write_text(resolved_yaml(sc))
        from .plots import make_plots

        summary["plots"] = make_plots(sc, rows, tmp)
        for i, fs in files.items():
            d = tmp / "points" / f"{i:03d}"
            d.mkdir(parents=True, exist_ok=True)
            for name, text in fs.items():
                (d / name).write_text(text)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        # Per-point files of an earlier run must not pass for this run's.
        shutil.rmtree(out / "points", ignore_errors=True)
        for f in tmp.iterdir():
            shutil.move(str(f), str(out / f.name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary
