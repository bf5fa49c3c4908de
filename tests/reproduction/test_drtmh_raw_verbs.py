"""DrTM+H raw-verb findings D1-D7 from mechanism.

The default run checks every claim of the three scenarios at their ``demo`` size (fewer
payloads, shorter windows); ``make test-all`` (marker ``repro``) checks them at full size.
"""
import os
from pathlib import Path

import pytest

from rnicsim.claims import evaluate
from rnicsim.runner import run_points
from rnicsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh"
SCENARIOS = ["fig5a_raw_verbs", "fig5b_80node_connections", "fig3a_shared_context"]


def _check(name: str, size: str) -> list[dict]:
    ov = [f"run.size={size}"] if size != "full" else []
    sc = load_scenario(ROOT / f"{name}.yaml", ov)
    rows = run_points(sc, jobs=min(2, os.cpu_count() or 1), progress=False)
    return evaluate(sc.expected, rows)


def _assert_all_hold(claims: list[dict]) -> None:
    bad = [f"{c['claim']} ({c['kind']}, {c['note']}): published {c['published']}, "
           f"measured {c['measured']:.3g}" for c in claims if not c["holds"]]
    assert not bad, "findings that do not hold:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_hold_at_demo_size(name):
    """Every claim check of the scenario holds on its reduced (demo) sweep."""
    claims = _check(name, "demo")
    assert claims, "the scenario declares claim checks"
    _assert_all_hold(claims)


@pytest.mark.repro
@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_hold_at_full_size(name):
    """Every claim check of the scenario holds on its full sweep."""
    _assert_all_hold(_check(name, "full"))
