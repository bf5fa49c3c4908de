"""fig15_logs_edr's stage checks are what docs/data/rcc_stage_checks.py derives from the
CSV of RCC's loaded stage logs, line for line, so they cannot drift from the data."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _data_script(name: str):
    """The module of script ``docs/data/NAME.py``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "data" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_scenario_stage_checks_are_the_generated_ones(tmp_path):
    """The 84 checks in the scenario equal the generator's output; a CSV with one run's
    value changed gives different lines (the comparison can fail)."""
    gen = _data_script("rcc_stage_checks")
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


def test_round_trip_checks_are_the_logged_counts():
    """fig15_logs_edr's twenty R2 checks give, per benchmark, protocol and verbs, the
    round trips per commit of docs/data/rcc_round_trips.csv (to 0.01)."""
    import csv

    from rnicsim.scenario import load_scenario

    with open(ROOT / "docs" / "data" / "rcc_round_trips.csv") as f:
        logged = {("smallbank" if r["benchmark"] == "bank" else r["benchmark"], r["protocol"],
                   r["verbs"]): round(float(r["round_trips_per_txn"]), 2)
                  for r in csv.DictReader(line for line in f if not line.startswith("#"))}
    sc = load_scenario(ROOT / "scenarios" / "rcc" / "fig15_logs_edr.yaml")
    checks = {(c.where["workload.benchmark"], c.where["protocol.kind"],
               c.where["protocol.verbs"]): c.published
              for c in sc.expected if c.metric == "waits_per_txn"}
    assert len(checks) == 20
    assert checks == {k: v for k, v in logged.items() if k[0] in ("smallbank", "ycsb")}


def test_round_trip_row_reads_the_counter_over_every_types_commits():
    """A master log's counter 18 over the sum of its types' executed, a report line that
    begins with the colour reset included; no counter, no row."""
    mod = _data_script("rcc_logs")
    path = mod.OUT + "overall/edr/drtmh-noccnowait-bank-4-onesided.log_0"
    text = ("SendPayment executed 30, latency: 0.05, rw_size -nan, m 0.05, 90 0.06, 99 0.07\n"
            "\x1b[0mWrite check executed 10, latency: 0.06, rw_size -nan, m 0.06, 90 0.06\n"
            "[bench_worker.cc:388] 17: 5\n[bench_worker.cc:388] 18: 100\n"
            "[bench_worker.cc:388] 19: 7\n")
    row = mod.round_trip_row(path, text)
    assert (row["benchmark"], row["protocol"], row["verbs"]) == ("bank", "nowait", "one_sided")
    assert (row["waits"], row["commits"], row["round_trips_per_txn"]) == (100, 40, "2.500")
    assert mod.round_trip_row(path, text.replace(" 18: 100", " 20: 100")) is None
