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
import re
from typing import Any, Iterable

from .scenario import matches


def _vals(rows: Iterable[dict], where: dict, metric: str) -> list[float]:
    return [r[metric] for r in rows if matches(where, r) and _finite(r.get(metric))]


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _agg(xs: list[float], how: str, far: Any = None) -> float:
    """max, min or mean of ``xs``; ``worst``: the x with the largest ``far(x)`` (how far
    it lies from what the check asks: every point must pass, the worst one is shown)."""
    if not xs:
        return float("nan")
    if how == "worst":
        return max(xs, key=far)
    return max(xs) if how == "max" else min(xs) if how == "min" else sum(xs) / len(xs)


def _off(published: float):
    """Relative distance of a value from ``published`` (the key of ``agg: worst`` for
    checks within a tolerance)."""
    return lambda x: abs(x / published - 1)


def _outside(lo: float, hi: float):
    """How far a value lies outside [lo, hi] relative to the edge it passes (negative
    inside: the value nearest an edge is the worst)."""
    def far(x: float) -> float:
        below = (lo - x) / abs(lo) if math.isfinite(lo) and lo else \
            (lo - x if math.isfinite(lo) else -math.inf)
        above = (x - hi) / abs(hi) if math.isfinite(hi) and hi else \
            (x - hi if math.isfinite(hi) else -math.inf)
        return max(below, above)
    return far


#: The smallest ratio a ``dominates`` check accepts when the paper says only that one
#: design beats another: 2% (a win, not a tie; the demo-size runs differ by less than a
#: percent between seeds on the steady metrics the checks compare).
BEATS = 1.02


def margin(c) -> float:
    """The ratio a ``dominates`` check ``c`` must reach: its ``margin``, else the
    published ratio when the paper gives one (above 1), else :data:`BEATS`."""
    if c.margin is not None:
        return c.margin
    return c.published if c.published > 1 else BEATS


def numeric(c) -> bool:
    """Whether check ``c``'s ``published`` is a number the paper gives (its ``numeric``;
    by default the kinds tested relative to it: value, ratio, drop)."""
    return c.numeric if c.numeric is not None else c.kind in ("value", "ratio", "drop")


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


def _where_in_range(c) -> dict:
    """Check ``c``'s ``where`` with its ``over`` limited to its ``range`` (if any)."""
    return dict(c.where, **({c.over: c.range} if c.range else {}))


def _steps(rows: list[dict], c) -> list[tuple[float, float]]:
    """(first step's loss, largest later loss) of each series of first-step check ``c``
    with at least three values of ``c.over`` and its ``metric`` finite at each (see
    :class:`rnicsim.scenario.FirstStepClaim`); a series with a value not above 0 (a point
    that measured nothing, e.g. no commit in its window) is left out."""
    series: dict[tuple, dict] = {}
    where = _where_in_range(c)
    for r in rows:
        if c.over in r and matches(where, r) and _finite(r.get(c.metric)):
            key = tuple(repr(r.get(k)) for k in c.by)
            series.setdefault(key, {})[r[c.over]] = r[c.metric]
    out = []
    for pts in series.values():
        ys = [pts[x] for x in sorted(pts)]
        if len(ys) < 3 or any(y <= 0 for y in ys):
            continue
        losses = [1 - b / a for a, b in zip(ys, ys[1:])]
        out.append((losses[0], max(losses[1:])))
    return out


def evaluate(expected: list, rows: list[dict]) -> list[dict[str, Any]]:
    """Evaluate every claim check of ``expected`` (a scenario's ``expected:`` entries) on
    ``rows`` (dicts of swept values and metrics, as :func:`rnicsim.runner.run_points`
    returns); one dict ``{"claim", "kind", "metric", "published", "measured", "holds",
    "note", "source"}`` per entry, in order. ``measured`` is NaN when no row matches."""
    out = []
    for c in expected:
        measured = float("nan")
        if c.kind == "value":
            measured = _agg(_vals(rows, c.where, c.metric), c.agg, _off(c.published))
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "ratio":
            pairs = _paired(rows, c.numerator, c.denominator, c.over, c.range, c.metric)
            if c.agg == "peak":     # best of each series, wherever it is
                top = max((y for _, _, y in pairs), default=0.0)
                measured = max(x for _, x, _ in pairs) / top if top else float("nan")
            else:
                measured = _agg([x / y for _, x, y in pairs if y], c.agg, _off(c.published))
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "flat":
            xs = _vals(rows, _where_in_range(c), c.metric)
            measured = (max(xs) - min(xs)) / max(xs) if xs and max(xs) > 0 else float("nan")
            holds = _finite(measured) and measured <= c.published
        elif c.kind == "dominates":
            pairs = _paired(rows, c.a, c.b, c.over, c.range, c.metric)
            # b exactly 0 under a positive a: a is above it by any margin (a stage one
            # protocol never times, say); two zeros say nothing
            measured = min((x / y if y else math.inf for _, x, y in pairs if y or x > 0),
                           default=float("nan"))
            holds = not math.isnan(measured) and measured >= margin(c)
        elif c.kind == "drop":
            pairs = _paired(rows, c.a, c.b, c.over, c.range, c.metric)
            measured = max((1 - x / y for _, x, y in pairs if y), default=float("nan"))
            holds = _finite(measured) and abs(measured / c.published - 1) <= c.tolerance
        elif c.kind == "bound":
            measured = _agg(_vals(rows, c.where, c.metric), c.agg, _outside(c.min, c.max))
            holds = _finite(measured) and c.min <= measured <= c.max
        elif c.kind == "ratio_bound":
            pairs = _paired(rows, c.numerator, c.denominator, c.over, c.range, c.metric)
            measured = _agg([x / y for _, x, y in pairs if y], c.agg, _outside(c.min, c.max))
            holds = _finite(measured) and c.min <= measured <= c.max
        elif c.kind == "first_step":
            measured = min((first - later for first, later in _steps(rows, c)),
                           default=float("nan"))
            holds = _finite(measured) and measured > c.margin
        else:  # pragma: no cover - the schema admits no other kind
            raise ValueError(c.kind)
        status = ("not measured" if not selected(c, rows) else
                  "holds" if holds else "fails")
        compared, test = _compared(c)
        bounded = c.kind in ("bound", "ratio_bound")
        out.append({"claim": c.claim, "role": c.role, "numeric": numeric(c),
                    "kind": c.kind, "metric": c.metric,
                    "published": c.published, "measured": measured,
                    "holds": None if status == "not measured" else bool(holds),
                    "note": c.note, "source": c.source, "status": status,
                    "compared": compared, "test": test,
                    "unit": "" if c.kind in _RATIO_KINDS else metric_unit(c.metric),
                    "tolerance": None if bounded or c.kind in ("flat", "dominates",
                                                               "first_step")
                    else c.tolerance,
                    "min": c.min if bounded else None, "max": c.max if bounded else None})
    return out


def selected(c, rows: list[dict]) -> bool:
    """Whether any row is selected by check ``c``'s conditions, whatever its metric (no
    row selected: the check is not measured, rather than failing)."""
    if c.kind in ("value", "bound"):
        return any(matches(c.where, r) for r in rows)
    if c.kind == "flat":
        return any(matches(_where_in_range(c), r) for r in rows)
    if c.kind == "first_step":
        return bool(_steps(rows, c))
    a, b = (c.numerator, c.denominator) if c.kind in ("ratio", "ratio_bound") else (c.a, c.b)
    return bool(_paired(rows, a, b, c.over, c.range, None))


# Papers as every source (profile parameter or scenario check) names them: by system. A
# figure matches only when both sources name its paper the same way.
_PAPER = re.compile(r"DrTM\+H|RCC|RoCE cluster configuration|RDMC")
_FIG = re.compile(r"fig\. (\d+)([a-z]?)")
# Claim ids a source cites: "(D9)", "(E8)", a range "(D1-D4)".
_IDS = re.compile(r"\(([A-Z])(\d+)(?:-\1(\d+))?\)")


def _paper(text: str) -> str | None:
    m = _PAPER.search(text)
    return None if m is None else m.group(0)


def _figures(text: str) -> set[tuple[str, str, str]]:
    """(paper, figure number, panel letter or "") of every figure ``text`` cites, the
    paper being the first one it names (none named: no figures)."""
    paper = _paper(text)
    return {(paper, n, sub) for n, sub in _FIG.findall(text)} if paper else set()


def _param_sources(node: Any, prefix: str = ""):
    """(key path, source) of every parameter of a profile model (sections, op tables)."""
    for k in type(node).model_fields:
        v = getattr(node, k)
        if hasattr(v, "source"):
            yield prefix + k, v.source
        elif hasattr(type(v), "model_fields"):
            yield from _param_sources(v, f"{prefix}{k}.")


def citations(profile) -> list[tuple[str, str, set[str], set[tuple[str, str, str]]]]:
    """(parameter key, its source, claim ids it cites, figures it cites) of every
    parameter of ``profile`` (a :class:`rnicsim.profile.Profile`) that cites any: what
    the parameter's value was fitted to or chosen from, directly or (a value copied from
    another profile, whose source is copied with it) through that profile."""
    out = []
    for key, src in _param_sources(profile.model):
        ids = {f"{m.group(1)}{i}" for m in _IDS.finditer(src)
               for i in range(int(m.group(2)), int(m.group(3) or m.group(2)) + 1)}
        figs = _figures(src)
        if ids or figs:
            out.append((key, src, ids, figs))
    return out


def role_conflict(c, profile) -> str | None:
    """Why validation check ``c`` is in fact calibration on ``profile`` (a parameter
    cites its claim id, or a figure of the same paper its source cites; a figure without
    a panel letter covers every panel), or None."""
    if c.role != "validation":
        return None
    mine = _figures(c.source)
    for key, src, ids, figs in citations(profile):
        same = sorted(f"{q} fig. {m}{b}" for p, n, a in figs for q, m, b in mine
                      if p == q and n == m and (a == b or not a or not b))
        if c.claim in ids or same:
            what = f"claim {c.claim}" if c.claim in ids else same[0]
            return (f"role calibration: parameter {key} of profile {profile.name} cites "
                    f"{what} (its source: {src[:80]}{'...' if len(src) > 80 else ''})")
    return None


# Units by metric-name suffix (metric names carry their unit; see ARCHITECTURE.md).
_UNITS = (("_mtxns_per_node", "Mtxn/s per node"), ("_mtxns", "Mtxn/s"), ("_mops", "Mops/s"),
          ("_mpps", "Mpps"), ("_gbps", "Gb/s"), ("_us", "us"), ("_ms", "ms"), ("_ns", "ns"))
# Kinds whose published and measured values are ratios or fractions (no unit).
_RATIO_KINDS = ("ratio", "flat", "dominates", "drop", "ratio_bound", "first_step")


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
        return f"min{over} of {pair}", f">= {margin(c):g}"
    if c.kind == "drop":
        return f"max{over} of 1 - {pair}", rel
    if c.kind == "bound":
        return f"{c.agg} of {c.metric}{where}", _interval(c.min, c.max)
    if c.kind == "first_step":
        by = f" per {', '.join(k.split('.')[-1] for k in c.by)}" if c.by else ""
        return (f"min{by} of first loss - largest later loss{over} of {c.metric}{where}",
                f"> {c.margin:g}")
    return f"{c.agg}{over} of {pair}", _interval(c.min, c.max)


# The columns of every claim table: (header, cell of claim_cells). A column added here
# (a check's role, say) appears in rnicsim run, rnicsim reproduce and report.md alike.
COLUMNS = (("claim", "claim"), ("role", "role"), ("scenario", "scenario"), ("kind", "kind"),
           ("compared", "compared"), ("test", "test"), ("published", "published"),
           ("measured", "measured"), ("result", "result"), ("note", "note"))


def _value(v: Any, unit: str) -> str:
    if v == math.inf:
        return "inf"        # a dominates check over an exact 0
    if not _finite(v):
        return "n/a"
    return f"{v:.4g}" + (f" {unit}" if unit else "")


def claim_cells(r: dict[str, Any]) -> dict[str, str]:
    """The display cells of one :func:`evaluate` record (plus ``scenario`` when present):
    values with their unit, ``measured`` and ``result`` ``not measured`` when no row was
    selected, ``result`` ``holds`` or ``FAILS``."""
    status = r.get("status") or ("holds" if r["holds"] else "fails")
    unit = r.get("unit", "")
    return {"claim": str(r["claim"]), "role": r.get("role", ""),
            "scenario": str(r.get("scenario", "")),
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


def score(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The score of :func:`evaluate` records: only ``validation`` checks count.
    ``validation``: how many hold of those measured (``total``: with the not measured);
    ``numeric``: of the measured validation checks whose ``published`` is the paper's
    number, how many have ``measured`` within 10% and within 25% of it (relative);
    ``calibration``: how many calibration checks hold, reported apart, never summed in."""
    def measured(role: str) -> list[dict]:
        return [r for r in results if r.get("role") == role and r.get("holds") is not None]
    val, cal = measured("validation"), measured("calibration")
    num = [r for r in val if r.get("numeric")]

    def within(f: float) -> int:
        return sum(1 for r in num if _finite(r["measured"]) and r["published"]
                   and abs(r["measured"] / r["published"] - 1) <= f + 1e-12)
    return {"validation": {"hold": sum(bool(r["holds"]) for r in val), "measured": len(val),
                           "total": sum(1 for r in results if r.get("role") == "validation")},
            "numeric": {"measured": len(num), "within_10pct": within(0.10),
                        "within_25pct": within(0.25)},
            "calibration": {"hold": sum(bool(r["holds"]) for r in cal), "measured": len(cal)}}


def score_line(s: dict[str, Any]) -> str:
    """:func:`score` in one line: ``validation score: 12 of 20 checks hold; numeric: 3 and
    5 of 8 within 10% and 25% of the paper (calibration, not counted: 4 of 4 hold)``."""
    v, n, c = s["validation"], s["numeric"], s["calibration"]
    left = v["total"] - v["measured"]
    return (f"validation score: {v['hold']} of {v['measured']} checks hold"
            + (f" ({left} not measured)" if left else "")
            + f"; numeric: {n['within_10pct']} and {n['within_25pct']} of {n['measured']} "
              f"within 10% and 25% of the paper"
            + f" (calibration, not counted: {c['hold']} of {c['measured']} hold)")
