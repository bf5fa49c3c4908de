"""The report of ``rnicsim calibrate``: plots, residuals and a markdown summary.

``write_report(result, DIR, profile_path)`` writes into DIR:

- ``series_NN_<name>.png``, one per swept series (a tool, or a probe sweep, of one input
  file over message size, QPs, depth ...): measured points, the base profile's and the
  fitted profile's simulation, and below them the relative residuals of both;
- ``residuals.png``: every point's relative error before and after, series side by side;
- ``report.md``: parameters (base, fitted, 95 % CI, identified or why not), per-series
  max and median |relative error| before and after, measurements that were not used;
- ``fit.json``: the same numbers for programs (tests, notebooks).

Every file is written whole or not at all (temporary file + rename).
"""
from __future__ import annotations

import io
import json
import math
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from rnicsim.results import atomic_write  # noqa: E402

__all__ = ["write_report", "summary_lines", "series_table"]




def _series(result) -> "OrderedDict[str, list[int]]":
    groups: OrderedDict[str, list[int]] = OrderedDict()
    for i, p in enumerate(result.points):
        groups.setdefault(p.series, []).append(i)
    for k in groups:
        groups[k].sort(key=lambda i: (result.points[i].x, i))
    return groups


def series_table(result) -> list[dict[str, Any]]:
    """Per series: title, quantity, points, max/median |relative error| before and after."""
    out = []
    for sid, idx in _series(result).items():
        meas = np.array([result.points[i].measured for i in idx])
        eb = np.abs(result.base_pred[idx] / meas - 1)
        ef = np.abs(result.fit_pred[idx] / meas - 1)
        p0 = result.points[idx[0]]
        out.append({"series": sid, "title": p0.series_title, "quantity": p0.quantity,
                    "points": len(idx), "max_err_base": float(eb.max()),
                    "median_err_base": float(np.median(eb)), "max_err_fit": float(ef.max()),
                    "median_err_fit": float(np.median(ef))})
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ci(r) -> str:
    if not r.identified:
        return "-"
    if r.ci is None:
        return "(no bootstrap)"
    lo, hi = r.ci
    return r.param.ci_text(lo, hi)


def summary_lines(result) -> list[str]:
    """The parameter table printed by ``rnicsim calibrate``."""
    w = max(len(r.key) for r in result.params) if result.params else 10
    lines = [f"{'parameter':<{w}}  {'base':>12}  {'fitted':>12}  95% CI"]
    for r in result.params:
        if r.identified:
            lines.append(f"{r.key:<{w}}  {r.param.fmt(r.param.base):>12}  "
                         f"{r.param.fmt(r.fitted):>12}  {_ci(r)}"
                         + ("  AT BOUND" if r.at_bound else ""))
        else:
            lines.append(f"{r.key:<{w}}  {r.param.fmt(r.param.base):>12}  {'(base)':>12}  "
                         "not identified by the data")
    n = max(1, len(result.points))
    lines.append(f"{len(result.points)} points fitted, {len(result.unmapped)} measurements not "
                 f"mapped; rms relative error {math.sqrt(result.cost_base / n):.3f} (base) -> "
                 f"{math.sqrt(result.cost_fit / n):.3f} (fitted); {result.sim_runs} simulator "
                 f"runs, {result.elapsed_s:.0f} s")
    lines += [f"note: {n}" for n in result.notes]
    return lines


#: Point quantity -> (name in the report, unit).
_QUANTITY = {"lat_us": ("median latency", "us"), "rate_mops": ("message rate", "Mops"),
             "switch_ns": ("coroutine switch", "ns")}


def _plot_series(result, idx: list[int], title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [result.points[i] for i in idx]
    x = np.array([p.x for p in pts])
    meas = np.array([p.measured for p in pts])
    base = result.base_pred[idx]
    fit = result.fit_pred[idx]
    is_bw = pts[0].quantity == "rate_mops"
    sizes = np.array([p.exp.size for p in pts], dtype=float)
    panels = 3 if is_bw else 2
    fig, axes = plt.subplots(panels, 1, figsize=(7, 2.6 * panels + 0.6), sharex=True,
                             gridspec_kw={"height_ratios": [3] * (panels - 1) + [2]})
    ylabel0 = {"rate_mops": "message rate [Mops]", "switch_ns": "coroutine switch [ns]"}
    tops = [(axes[0], meas, base, fit, ylabel0.get(pts[0].quantity, "median latency [us]"))]
    if is_bw:
        g = lambda r: r * sizes * 8 / 1e3  # Mops -> Gb/s of payload  # noqa: E731
        tops.append((axes[1], g(meas), g(base), g(fit), "bandwidth [Gb/s]"))
    logx = len(x) > 1 and x.min() > 0 and x.max() / x.min() >= 8
    for ax, m, b, f, ylabel in tops:
        ax.plot(x, m, "ko", ms=4, label="measured")
        ax.plot(x, b, "--", color="0.55", marker="x", ms=4, label="base profile")
        ax.plot(x, f, "-", color="tab:blue", marker=".", ms=5, label="fitted profile")
        ax.set_ylabel(ylabel)
        if np.all(m > 0) and m.max() / m.min() > 20:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[0].set_title(title, fontsize=10)
    ax = axes[-1]
    ax.axhline(0, color="k", lw=0.6)
    ax.plot(x, 100 * (base / meas - 1), "--", color="0.55", marker="x", ms=4, label="base")
    ax.plot(x, 100 * (fit / meas - 1), "-", color="tab:blue", marker=".", ms=5, label="fitted")
    ax.axhspan(-10, 10, color="tab:green", alpha=0.07)
    ax.set_ylabel("(sim - meas) / meas [%]")
    ax.set_xlabel(pts[0].xlabel)
    ax.grid(True, alpha=0.3)
    if logx:
        ax.set_xscale("log", base=2)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _plot_residuals(result, groups) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(7, 0.09 * len(result.points) + 3), 4))
    pos = 0
    ticks, labels = [], []
    for k, (sid, idx) in enumerate(groups.items()):
        meas = np.array([result.points[i].measured for i in idx])
        xs = np.arange(pos, pos + len(idx))
        ax.plot(xs, 100 * (result.base_pred[idx] / meas - 1), "x", color="0.55",
                label="base" if k == 0 else None)
        ax.plot(xs, 100 * (result.fit_pred[idx] / meas - 1), ".", color="tab:blue",
                label="fitted" if k == 0 else None)
        ticks.append(pos + (len(idx) - 1) / 2)
        labels.append(result.points[idx[0]].series_title)
        pos += len(idx) + 1
        ax.axvline(pos - 1, color="0.85", lw=0.8)
    ax.axhline(0, color="k", lw=0.6)
    ax.axhspan(-10, 10, color="tab:green", alpha=0.07)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("(sim - meas) / meas [%]")
    ax.set_title("relative residuals of every fitted point, by series", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _json(result, table, profile_path: Path | None) -> dict[str, Any]:
    return {
        "base": result.base.name, "profile": str(profile_path) if profile_path else None,
        "inputs": result.inputs, "bootstrap": result.bootstrap, "seed": result.seed,
        "elapsed_s": result.elapsed_s, "sim_runs": result.sim_runs,
        "rms_rel_err_base": math.sqrt(result.cost_base / max(1, len(result.points))),
        "rms_rel_err_fit": math.sqrt(result.cost_fit / max(1, len(result.points))),
        "params": [{"key": r.key, "kind": r.param.kind, "base": r.param.base,
                    "fitted": r.fitted, "identified": r.identified,
                    "ci": list(r.ci) if r.ci else None, "at_bound": r.at_bound,
                    "reason": r.reason, "sensitivity": r.sensitivity, "files": r.files}
                   for r in result.params],
        "series": table,
        "points": [{"source": p.source, "line": p.line, "series": p.series_title,
                    "experiment": p.exp.label(), "x": p.x, "quantity": p.quantity,
                    "measured": p.measured, "base": float(b), "fitted": float(f)}
                   for p, b, f in zip(result.points, result.base_pred, result.fit_pred)],
        "unmapped": [{"source": u.source, "line": u.line, "what": u.what, "reason": u.reason}
                     for u in result.unmapped],
    }


def write_report(result, out_dir: str | Path, profile_path: str | Path | None = None) -> None:
    """Write the plots, ``report.md`` and ``fit.json`` of a fit into ``out_dir`` (a path or
    str, created if missing); ``profile_path`` is the fitted profile the report names."""
    out_dir = Path(out_dir)
    profile_path = Path(profile_path) if profile_path is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("series_*.png"):   # plots of an earlier fit into the same DIR
        old.unlink()
    groups = _series(result)
    table = series_table(result)
    names = []
    for k, ((sid, idx), row) in enumerate(zip(groups.items(), table), start=1):
        name = f"series_{k:02d}_{_slug(row['title'])}.png"
        atomic_write(out_dir / name, _plot_series(result, idx, row["title"]))
        names.append(name)
    if result.points:
        atomic_write(out_dir / "residuals.png", _plot_residuals(result, groups))
    atomic_write(out_dir / "fit.json", json.dumps(_json(result, table, profile_path), indent=1))
    atomic_write(out_dir / "report.md", _markdown(result, table, names, profile_path))


def _markdown(result, table, names, profile_path) -> str:
    n = max(1, len(result.points))
    files = sorted({p.file for p in result.points})
    L = [f"# Calibration report: {profile_path.stem if profile_path else 'fit'} "
         f"(base {result.base.name})", ""]
    L += [f"- inputs: {', '.join(result.inputs)}",
          f"- fitted points: {len(result.points)} from {len(files)} file(s); "
          f"other statistics of those rows not fitted: {result.unused_metrics}; "
          f"measurements not mapped: {len(result.unmapped)}",
          f"- rms relative error: {math.sqrt(result.cost_base / n):.4f} with the base "
          f"profile, {math.sqrt(result.cost_fit / n):.4f} fitted",
          f"- bootstrap: {result.bootstrap} resamples (seed {result.seed}); "
          f"{result.sim_runs} simulator runs ({result.sim_seconds:.0f} s), "
          f"{result.elapsed_s:.0f} s in all"]
    if profile_path:
        L.append(f"- fitted profile: `{profile_path}`")
    L += ["", "## Parameters", "",
          "| parameter | base | fitted | 95% CI | identified | sensitivity | note |",
          "|---|---|---|---|---|---|---|"]
    for r in result.params:
        fitted = r.param.fmt(r.fitted) if r.identified else "(base)"
        sens = f"{r.sensitivity:.2f}" if not r.param.discrete else "-"
        note = r.reason.replace("|", "/")
        L.append(f"| `{r.key}` | {r.param.fmt(r.param.base)} | {fitted} | {_ci(r)} | "
                 f"{'yes' if r.identified else '**no**'} | {sens} | {note} |")
    L += ["",
          "*sensitivity*: the largest |d ln(simulated) / d ln(parameter)| over the fitted "
          "points (1: a 10% change of the parameter moves some point by 10%). A parameter "
          "the data do not respond to, or whose effect cannot be told apart from others', "
          "is **not identified by the data**: it keeps its base value and base source in "
          "the profile. The 95% CI is the 2.5-97.5 percentile range of bootstrap refits "
          "over resampled measurements; it measures how well the data pin the value down "
          "*given the model*, not model error.", "",
          "## Series", "",
          "| series | quantity | points | max err base | median err base | "
          "max err fitted | median err fitted | plot |",
          "|---|---|---|---|---|---|---|---|"]
    for row, name in zip(table, names):
        q = _QUANTITY[row["quantity"]][0]
        L.append(f"| {row['title']} | {q} | {row['points']} | {_pct(row['max_err_base'])} | "
                 f"{_pct(row['median_err_base'])} | {_pct(row['max_err_fit'])} | "
                 f"{_pct(row['median_err_fit'])} | [{name}]({name}) |")
    L += ["", "All residuals: [residuals.png](residuals.png)", ""]
    worst = sorted(range(len(result.points)),
                   key=lambda i: -abs(result.fit_pred[i] / result.points[i].measured - 1))[:10]
    if worst:
        L += ["### Largest residuals after the fit", "",
              "| point | measured | base | fitted | error |", "|---|---|---|---|---|"]
        for i in worst:
            p = result.points[i]
            unit = _QUANTITY[p.quantity][1]
            L.append(f"| {p.file}:{p.line} {p.exp.label()} | {p.measured:.4g} {unit} | "
                     f"{result.base_pred[i]:.4g} | {result.fit_pred[i]:.4g} | "
                     f"{_pct(result.fit_pred[i] / p.measured - 1)} |")
        L.append("")
    L += ["## Measurements not used", ""]
    if not result.unmapped:
        L.append("None: every measurement was mapped onto a simulator experiment.")
    else:
        L += ["| measurement | why |", "|---|---|"]
        for u in result.unmapped:
            L.append(f"| {Path(u.source).name}:{u.line} {u.what} | {u.reason} |")
    if result.notes:
        L += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    return "\n".join(L) + "\n"
