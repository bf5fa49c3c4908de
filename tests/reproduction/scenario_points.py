"""Helpers of the paper reproduction tests: run a scenario's points at a size, pick one
row, and check its claims against a list of known gaps."""
from __future__ import annotations

from pathlib import Path

from rnicsim.claims import evaluate
from rnicsim.runner import run_points
from rnicsim.scenario import load_scenario


def scenario_rows(root: Path, name: str, size: str, extra: list[str] | None = None):
    """(scenario, rows) of ``root/name.yaml`` run at ``size`` (``full``: as written) with
    the ``extra`` overrides, in one process."""
    ov = [f"run.size={size}"] if size != "full" else []
    sc = load_scenario(root / f"{name}.yaml", ov + (extra or []))
    return sc, run_points(sc, jobs=1, progress=False)


def one_row(rows, **where):
    """The only row whose values equal ``where`` (asserts there is exactly one)."""
    hit = [r for r in rows if all(r.get(k) == v for k, v in where.items())]
    assert len(hit) == 1, (where, len(hit))
    return hit[0]


def check_findings(root: Path, name: str, size: str, gaps: set[str]) -> None:
    """Every claim check of scenario ``name`` at ``size`` holds unless its note is in
    ``gaps``, and every check in ``gaps`` fails (:func:`assert_claims`)."""
    sc, rows = scenario_rows(root, name, size)
    claims = evaluate(sc.expected, rows)
    assert claims, f"{name} declares no claims"
    assert_claims(claims, gaps)


def assert_claims(claims: list[dict], gaps: set[str]) -> None:
    """Every evaluated claim check holds unless its note is in ``gaps``, and every check in
    ``gaps`` fails (a gap that closes must be struck off); both messages give the measured
    values. A check no point selects (``not measured``, e.g. a protocol the demo size
    leaves out) neither holds nor fails."""
    bad = [f"{c['claim']} ({c['note']}): published {c['published']}, measured "
           f"{c['measured']:.3g}" for c in claims if c["holds"] is False and c["note"] not in gaps]
    closed = [f"{c['claim']} ({c['note']}): published {c['published']}, measured "
              f"{c['measured']:.3g}" for c in claims if c["holds"] and c["note"] in gaps]
    assert not bad, "findings that do not hold:\n" + "\n".join(bad)
    assert not closed, "known gaps now hold (update KNOWN_GAPS):\n" + "\n".join(closed)
