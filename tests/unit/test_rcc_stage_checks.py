"""fig15_logs_edr's stage checks are what docs/data/rcc_stage_checks.py derives from the
CSV of RCC's loaded stage logs, line for line, so they cannot drift from the data."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "rcc_stage_checks", ROOT / "docs" / "data" / "rcc_stage_checks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_scenario_stage_checks_are_the_generated_ones(tmp_path):
    """The 84 checks in the scenario equal the generator's output; a CSV with one run's
    value changed gives different lines (the comparison can fail)."""
    gen = _generator()
    lines = gen.stage_checks()
    scenario = (ROOT / "scenarios" / "rcc" / "fig15_logs_edr.yaml").read_text()
    held = [ln for ln in scenario.splitlines()
            if ln.startswith("  - ") and "per call under load" in ln]
    assert len(lines) == 84
    assert held == lines
    csv_text = gen.CSV.read_text().replace("overall/edr,bank,nowait,rpc,0.00,12.81",
                                           "overall/edr,bank,nowait,rpc,0.00,14.81")
    changed = tmp_path / "stages.csv"
    changed.write_text(csv_text)
    assert gen.stage_checks(changed) != lines
