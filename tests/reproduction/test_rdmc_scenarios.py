"""RDMC findings M1-M11 through the scenario files and `rnicsim reproduce rdmc`.

The default run checks the demo size of every scenario in scenarios/rdmc; the full size
is `rnicsim reproduce rdmc` (and tests/reproduction/test_rdmc_claims.py under `repro`).
"""
import json
from pathlib import Path

import pytest

from rnicsim.cli import main

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "rdmc"


# (scenario, note) of the checks the model does not reproduce (docs/model.md, "RDMC gaps"):
# pure-interrupt CPU for 100 MB is 2.1% at demo size, where the paper has ~10%.
KNOWN_GAPS = {("fig11_interrupts", "pure interrupts: CPU ~10% for 100 MB (within 2x)")}


def test_reproduce_rdmc_demo_claims_hold_but_the_known_gaps(tmp_path, capsys):
    """Every claim check of scenarios/rdmc holds at demo size but the known gaps, which
    fail; M1-M11 are covered, every check is validation (no RDMC number was fitted), and
    the score line counts them."""
    code = main(["reproduce", "rdmc", "--size", "demo", "--json", "--quiet",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)
    assert {r["claim"] for r in rows} == {f"M{i}" for i in range(1, 12)}
    assert {r["role"] for r in rows} == {"validation"}
    gaps = [r for r in rows if (r["scenario"], r["note"]) in KNOWN_GAPS]
    assert len(gaps) == len(KNOWN_GAPS) and not any(r["holds"] for r in gaps), gaps
    bad = [r for r in rows if r not in gaps and not r["holds"]]
    assert not bad, bad
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["score"]["validation"] == {"hold": len(rows) - len(gaps),
                                              "measured": len(rows), "total": len(rows)}


@pytest.mark.parametrize("path", sorted(ROOT.glob("*.yaml")), ids=lambda p: p.stem)
def test_rdmc_scenarios_validate(path, capsys):
    """Every RDMC scenario file validates."""
    assert main(["validate", str(path)]) == 0
