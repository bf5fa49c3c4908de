"""DrTM+H raw-verb findings D1-D7 from mechanism (all but D5 above 64 B are calibration
checks: the NIC profile was fitted to fig. 5a, 5b and 3a).

The default run checks fig. 3a's claims at its ``demo`` size; fig. 5a's and 5b's demo
sizes take minutes each and their checks are calibration targets but one, so they run
with ``make test-all`` (marker ``slow``), as every full size does (marker ``repro``).
What the default run keeps of them is ``tests/unit/test_fingerprint.py``: any change to
the raw-verb results of the model fails it. Every check holds but the known gaps
(KNOWN_GAPS), which must fail.
"""
import os
from pathlib import Path

import pytest

from rnicsim.claims import evaluate
from rnicsim.runner import run_points
from rnicsim.scenario import load_scenario
from scenario_points import assert_claims

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh"
SCENARIOS = ["fig5a_raw_verbs", "fig5b_80node_connections", "fig3a_shared_context"]


def _check(name: str, size: str) -> list[dict]:
    ov = [f"run.size={size}"] if size != "full" else []
    sc = load_scenario(ROOT / f"{name}.yaml", ov)
    rows = run_points(sc, jobs=min(2, os.cpu_count() or 1), progress=False)
    return evaluate(sc.expected, rows)


# (scenario, size) -> notes of the checks the model does not reproduce there.
KNOWN_GAPS = {
    # At 4 nodes the 5 QPs per peer exceed the QP-context cache by little: 1 QP per peer
    # gives small READs 1.018x, short of the 2% a win needs (the 80-node emulation of
    # the full size misses far more).
    ("fig5b_80node_connections", "demo"): {"QP-cache misses cost small-payload READs "
                                           "(mechanism check)"},
    # At full size too: 1 QP per peer gives small READs 1.013x the 80-node emulation.
    ("fig5b_80node_connections", "full"): {"QP-cache misses cost small-payload READs "
                                           "(mechanism check)"},
}


@pytest.mark.parametrize("name", [
    pytest.param("fig5a_raw_verbs", marks=pytest.mark.slow),
    pytest.param("fig5b_80node_connections", marks=pytest.mark.slow),
    "fig3a_shared_context"])
def test_findings_hold_at_demo_size(name):
    """Every claim check of the scenario holds on its reduced (demo) sweep but the known
    gaps, which fail."""
    claims = _check(name, "demo")
    assert claims, "the scenario declares claim checks"
    assert_claims(claims, KNOWN_GAPS.get((name, "demo"), set()))


@pytest.mark.repro
@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_hold_at_full_size(name):
    """Every claim check of the scenario holds on its full sweep but the known gaps."""
    assert_claims(_check(name, "full"), KNOWN_GAPS.get((name, "full"), set()))
