"""Seed 004 (RDMC) findings M1-M11 through the scenario files and `rnicsim reproduce rdmc`.

The default run checks the demo size of every scenario in scenarios/rdmc; the full size
is `rnicsim reproduce rdmc` (and tests/reproduction/test_rdmc_claims.py under `repro`).
"""
import json
from pathlib import Path

import pytest

from rnicsim.cli import main

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "rdmc"


def test_reproduce_rdmc_demo_all_claims_hold(tmp_path, capsys):
    """Every claim check of scenarios/rdmc holds at demo size, and M1-M11 are covered."""
    code = main(["reproduce", "rdmc", "--size", "demo", "--json", "--quiet",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)
    assert {r["claim"] for r in rows} == {f"M{i}" for i in range(1, 12)}
    bad = [r for r in rows if not r["holds"]]
    assert not bad, bad


@pytest.mark.parametrize("path", sorted(ROOT.glob("*.yaml")), ids=lambda p: p.stem)
def test_rdmc_scenarios_validate(path, capsys):
    """Every RDMC scenario file validates."""
    assert main(["validate", str(path)]) == 0
