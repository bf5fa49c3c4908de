"""Plots declared in a scenario's ``plots:`` block (matplotlib's Agg backend; PNG unless a
plot's ``file`` names another format)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .scenario import Scenario, _num, matches


def make_plots(sc: Scenario, rows: list[dict[str, Any]], out: Path) -> list[str]:
    """Draw every plot of ``sc`` from ``rows`` into ``out``; return the file names.

    A plot whose ``where`` matches no row (e.g. a series a ``--size`` leaves out of the
    sweep) is not drawn: an empty figure would read as a result. A ``logx``/``logy`` axis
    whose values are all zero, negative or NaN (e.g. no operation completed in a short
    window) is drawn linear, with a warning on stderr: matplotlib cannot place log ticks
    there, and one plot must not lose the run's results. Swept values written with units
    (``64KiB``, ``30us``) are placed and ordered by their number of bytes or ns; an x
    column that is not all numbers (names, booleans, None, or a mix) is drawn as
    categories named by its values, in their text order. A plot that fails all the same
    is left out with a warning on stderr: the results matter more than a figure."""
    if not sc.plots:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for i, p in enumerate(sc.plots):
        sel = [r for r in rows if matches(p.where, r) and p.x in r and p.y in r]
        if not sel:
            continue
        try:
            files.append(_draw(plt, sc, i, p, sel, out))
        except Exception as e:  # noqa: BLE001 - a plot must never cost a run its results
            plt.close("all")
            print(f"rnicsim: warning: plots[{i}] not drawn ({type(e).__name__}: {e}); "
                  f"the results are written", file=sys.stderr, flush=True)
    return files


def _draw(plt, sc: Scenario, i: int, p, sel: list[dict[str, Any]], out: Path) -> str:
    """Draw plot ``p`` (``sc.plots[i]``) of the rows ``sel`` into ``out``; return its
    file name."""
    groups: dict[Any, list] = {}
    keys = [p.series] if isinstance(p.series, str) else list(p.series or [])
    for r in sel:
        label = "/".join(str(r.get(k)) for k in keys) if keys else p.y
        groups.setdefault(label, []).append(r)
    # x: numbers (unit strings by their value) when every value is one, else
    # categories named by the values as written (None, booleans, names, or a mix)
    numeric = all(_is_number(_num(r[p.x])) for r in sel)

    def xv(r):
        return _num(r[p.x]) if numeric else str(r[p.x])

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    try:
        for name, rs in groups.items():
            rs = sorted(rs, key=xv)
            ax.plot([xv(r) for r in rs], [r[p.y] for r in rs], marker="o", label=str(name))
        if p.logx and _log_ok([xv(r) for r in sel], p.x, i, "x"):
            ax.set_xscale("log", base=2)
        if p.logy and _log_ok([r[p.y] for r in sel], p.y, i, "y"):
            ax.set_yscale("log")
        ax.set_xlabel(p.x)
        ax.set_ylabel(p.y)
        ax.set_title(p.title or f"{sc.name}: {p.y}")
        ax.grid(True, alpha=0.3)
        if len(groups) > 1 or p.series:
            ax.legend(title="/".join(k.split(".")[-1] for k in keys) if keys else None)
        fig.tight_layout()
        name = p.file or f"{p.y}_vs_{p.x.split('.')[-1]}_{i}.png"
        fig.savefig(out / name, dpi=110)
    finally:
        plt.close(fig)
    return name


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _log_ok(values: list[Any], col: str, i: int, axis: str) -> bool:
    """False, with a warning that ``plots[i]`` draws that axis linear, when the values
    (of column ``col``) are not all numbers (categories have no log scale) or none is
    positive (zero, negative or NaN: nothing a log axis can show)."""
    if not all(_is_number(v) for v in values):
        why = "values that are not numbers"
    elif not any(v > 0 for v in values):
        why = "no positive value"
    else:
        return True
    print(f"rnicsim: warning: plots[{i}].log{axis}: {why} of {col!r} to show on a log "
          f"axis; drawn linear", file=sys.stderr, flush=True)
    return False
