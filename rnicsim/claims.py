"""Claim checks: compare a scenario's results with the published findings it reproduces.

Each ``expected:`` entry of a scenario (see :mod:`rnicsim.scenario`) names a claim id of
CLAIMS.md, a metric, the published value and a check kind; :func:`evaluate` returns, per
entry, ``{"claim", "kind", "metric", "published", "measured", "holds", "note", "source"}``.
Rows are dicts of swept values and metrics (one per scenario point).
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


def _paired(rows: list[dict], a: dict, b: dict, over: str, rng: dict, metric: str):
    """(x, metric at a, metric at b) for every x of ``over`` in ``rng`` present in both."""
    def by_x(where):
        out = {}
        for r in rows:
            if over in r and matches(where, r) and matches({over: rng} if rng else {}, r) \
                    and _finite(r.get(metric)):
                out[r[over]] = r[metric]
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
        out.append({"claim": c.claim, "kind": c.kind, "metric": c.metric,
                    "published": c.published, "measured": measured, "holds": bool(holds),
                    "note": c.note, "source": c.source})
    return out
