"""Claim checks: compare a scenario's results with the published findings it reproduces.

Each ``expected:`` entry of a scenario (see :mod:`rnicsim.scenario`) names a claim id of
CLAIMS.md, a metric, the published value and a check kind; :func:`evaluate` returns, per
entry, ``{"claim", "kind", "metric", "published", "measured", "holds", "note", "source",
"status", "compared", "test", "unit", "tolerance", "min", "max"}``. Rows are dicts of
swept values and metrics (one per scenario point).

A check whose selection matches no row (its points were filtered out, e.g. by a ``--set``
that narrows the sweep) is ``not measured``: ``holds`` None, never counted as failing.
:func:`claim_cells` turns a record into the cells every claim table prints (the terminal
tables of ``rnicsim run`` and ``rnicsim reproduce`` and the markdown of ``report.md``),
so a column is added in one place: :data:`COLUMNS`.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from .scenario import matches


def _vals(rows: Iterable[dict], where: dict, metric: str) -> list[float]:
    return [r[metric] for r in rows if matches(where, r) and _finite(r.get(metric))]


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _agg(xs: list[float], how: str) -> float:
    if not xs:
        return float("nan")
    return max(xs) if how == "max" else min(xs) if how == "min" else sum(xs) / len(xs)


def _paired(rows: list[dict], a: dict, b: dict, over: str, rng: dict, metric: str | None):
    """(x, metric at a, metric at b) for every x of ``over`` in ``rng`` present in both;
    ``metric`` None pairs the rows whatever their metrics (values None)."""
    def by_x(where):
        out = {}
        for r in rows:
            if over in r and matches(where, r) and matches({over: rng} if rng else {}, r) \
                    and (metric is None or _finite(r.get(metric))):
                out[r[over]] = r.get(metric) if metric else None
        return out
    xa, xb = by_x(a), by_x(b)
    return [(x, xa[x], xb[x]) for x in xa if x in xb]


def evaluate(expected: list, rows: list[dict]) -> list[dict[str, Any]]:
    """Evaluate every claim check of ``expected`` (a scenario's ``expected:`` entries) on
    ``rows`` (dicts of swept values and metrics, as :func:`rnicsim.runner.run_points`
    returns); one dict ``{"claim", "kind", "metric", "published", "measured", "holds",
    "note", "source"}`` per entry, in order. ``measured`` is NaN when no row matches."""
    out = []
    for c in expected:
        measured = float("nan")
        if c.kind == "value":
            measured = _agg(_vals(rows, c.where, c.metric), c.agg)
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "ratio":
            pairs = _paired(rows, c.numerator, c.denominator, c.over, c.range, c.metric)
            if c.agg == "peak":     # best of each series, wherever it is
                top = max((y for _, _, y in pairs), default=0.0)
                measured = max(x for _, x, _ in pairs) / top if top else float("nan")
            else:
                measured = _agg([x / y for _, x, y in pairs if y], c.agg)
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "flat":
            where = dict(c.where)
            if c.range:
                where[c.over] = c.range
            xs = _vals(rows, where, c.metric)
            measured = (max(xs) - min(xs)) / max(xs) if xs and max(xs) > 0 else float("nan")
            holds = _finite(measured) and measured <= c.published
        elif c.kind == "dominates":
            pairs = _paired(rows, c.a, c.b, c.over, c.range, c.metric)
            measured = min((x / y for _, x, y in pairs if y), default=float("nan"))
            holds = _finite(measured) and measured > 1.0
        elif c.kind == "drop":
            pairs = _paired(rows, c.a, c.b, c.over, c.range, c.metric)
            measured = max((1 - x / y for _, x, y in pairs if y), default=float("nan"))
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "bound":
            measured = _agg(_vals(rows, c.where, c.metric), c.agg)
            holds = _finite(measured) and c.min <= measured <= c.max
        elif c.kind == "ratio_bound":
            pairs = _paired(rows, c.numerator, c.denominator, c.over, c.range, c.metric)
            measured = _agg([x / y for _, x, y in pairs if y], c.agg)
            holds = _finite(measured) and c.min <= measured <= c.max
        else:  # pragma: no cover - the schema admits no other kind
            raise ValueError(c.kind)
        status = ("not measured" if not _selected(c, rows) else
                  "holds" if holds else "fails")
        compared, test = _compared(c)
        bounded = c.kind in ("bound", "ratio_bound")
        out.append({"claim": c.claim, "kind": c.kind, "metric": c.metric,
                    "published": c.published, "measured": measured,
                    "holds": None if status == "not measured" else bool(holds),
                    "note": c.note, "source": c.source, "status": status,
                    "compared": compared, "test": test,
                    "unit": "" if c.kind in _RATIO_KINDS else metric_unit(c.metric),
                    "tolerance": None if bounded or c.kind in ("flat", "dominates")
                    else c.tolerance,
                    "min": c.min if bounded else None, "max": c.max if bounded else None})
    return out


def _selected(c, rows: list[dict]) -> bool:
    """Whether any row is selected by check ``c``'s conditions, whatever its metric (no
    row selected: the check is not measured, rather than failing)."""
    if c.kind in ("value", "bound"):
        return any(matches(c.where, r) for r in rows)
    if c.kind == "flat":
        where = dict(c.where, **({c.over: c.range} if c.range else {}))
        return any(matches(where, r) for r in rows)
    a, b = (c.numerator, c.denominator) if c.kind in ("ratio", "ratio_bound") else (c.a, c.b)
    return bool(_paired(rows, a, b, c.over, c.range, None))


# Units by metric-name suffix (metric names carry their unit; see ARCHITECTURE.md).
_UNITS = (("_mtxns_per_node", "Mtxn/s per node"), ("_mtxns", "Mtxn/s"), ("_mops", "Mops/s"),
          ("_mpps", "Mpps"), ("_gbps", "Gb/s"), ("_us", "us"), ("_ms", "ms"), ("_ns", "ns"))
# Kinds whose published and measured values are ratios or fractions (no unit).
_RATIO_KINDS = ("ratio", "flat", "dominates", "drop", "ratio_bound")


def metric_unit(metric: str) -> str:
    """The unit a metric's name carries (``throughput_mops`` -> ``Mops/s``; a dotted name
    by its last part that has one), ``""`` when it names none."""
    for part in reversed(metric.split(".")):
        for suffix, unit in _UNITS:
            if part.endswith(suffix):
                return unit
    return ""


def _interval(lo: float, hi: float) -> str:
    if math.isinf(lo):
        return f"<= {hi:g}"
    if math.isinf(hi):
        return f">= {lo:g}"
    return f"in [{lo:g}, {hi:g}]"


def _sel(where: dict) -> str:
    """A selection in words: ``{workload.verb: read, workload.payload: {le: 64}}`` ->
    ``verb=read, payload le 64`` (keys by their last part)."""
    def one(k: str, v: Any) -> str:
        k = k.split(".")[-1]
        if isinstance(v, dict):
            return ", ".join(f"{k} {op} {x}" for op, x in v.items())
        return f"{k}={v}"
    return ", ".join(one(k, v) for k, v in where.items()) or "all"


def _compared(c) -> tuple[str, str]:
    """(what check ``c`` measures, the test the measured value must pass), in words."""
    rel = f"within {c.tolerance:.0%} of published"
    over = f" over {c.over.split('.')[-1]}" if getattr(c, "over", None) else ""
    if c.kind in ("ratio", "ratio_bound"):
        pair = f"{c.metric} ({_sel(c.numerator)}) / ({_sel(c.denominator)})"
    elif c.kind in ("dominates", "drop"):
        pair = f"{c.metric} ({_sel(c.a)}) / ({_sel(c.b)})"
    where = f" at {_sel(c.where)}" if getattr(c, "where", None) else ""
    if c.kind == "value":
        return f"{c.agg} of {c.metric}{where}", rel
    if c.kind == "ratio":
        if c.agg == "peak":
            return f"peak/peak{over} of {pair}", rel
        return f"{c.agg}{over} of {pair}", rel
    if c.kind == "flat":
        return f"spread (max-min)/max{over} of {c.metric}{where}", "<= published"
    if c.kind == "dominates":
        return f"min{over} of {pair}", "> 1"
    if c.kind == "drop":
        return f"max{over} of 1 - {pair}", rel
    if c.kind == "bound":
        return f"{c.agg} of {c.metric}{where}", _interval(c.min, c.max)
    return f"{c.agg}{over} of {pair}", _interval(c.min, c.max)


# The columns of every claim table: (header, cell of claim_cells). A column added here
# (a check's role, say) appears in rnicsim run, rnicsim reproduce and report.md alike.
COLUMNS = (("claim", "claim"), ("scenario", "scenario"), ("kind", "kind"),
           ("compared", "compared"), ("test", "test"), ("published", "published"),
           ("measured", "measured"), ("result", "result"), ("note", "note"))


def _value(v: Any, unit: str) -> str:
    if not _finite(v):
        return "n/a"
    return f"{v:.4g}" + (f" {unit}" if unit else "")


def claim_cells(r: dict[str, Any]) -> dict[str, str]:
    """The display cells of one :func:`evaluate` record (plus ``scenario`` when present):
    values with their unit, ``measured`` and ``result`` ``not measured`` when no row was
    selected, ``result`` ``holds`` or ``FAILS``."""
    status = r.get("status") or ("holds" if r["holds"] else "fails")
    unit = r.get("unit", "")
    return {"claim": str(r["claim"]), "scenario": str(r.get("scenario", "")),
            "kind": r["kind"], "compared": r.get("compared", r["metric"]),
            "test": r.get("test", ""), "published": _value(r["published"], unit),
            "measured": "not measured" if status == "not measured"
            else _value(r["measured"], unit),
            "result": {"holds": "holds", "fails": "FAILS"}.get(status, status),
            "note": r.get("note") or ""}


def _columns(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """:data:`COLUMNS` less ``scenario`` and ``note`` when no row has one."""
    cells = [claim_cells(r) for r in results]
    return [(h, k) for h, k in COLUMNS
            if k not in ("scenario", "note") or any(c[k] for c in cells)]


def claim_table(results: list[dict[str, Any]]) -> list[str]:
    """Text lines of a claim table: a header, then one aligned line per check."""
    cols = _columns(results)
    rows = [[h for h, _k in cols]] + [[claim_cells(r)[k] for _h, k in cols]
                                      for r in results]
    width = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, width)).rstrip() for row in rows]


def claim_markdown(results: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of a claim table (``|`` in cells escaped)."""
    cols = _columns(results)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return [line([h for h, _k in cols]), line(["---"] * len(cols))] + \
        [line([claim_cells(r)[k] for _h, k in cols]) for r in results]


def tally(results: list[dict[str, Any]]) -> str:
    """``"3 of 4 measured claim checks hold; 1 not measured"``."""
    measured = [r for r in results if r.get("holds") is not None]
    n = sum(bool(r["holds"]) for r in measured)
    left = len(results) - len(measured)
    return (f"{n} of {len(measured)} measured claim checks hold"
            + (f"; {left} not measured (no point of the run selects them)" if left else ""))
