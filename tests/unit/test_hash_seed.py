"""Results do not depend on the Python hash seed.

Sets and dicts of strings (and of objects without their own ``__hash__``) iterate in an
order that changes from one process to the next (``PYTHONHASHSEED``, memory addresses).
Code that lets such an order decide what the simulation does next gives results that
change between runs of the same scenario and seed, which ``test_run_is_deterministic``
(one process) cannot see. Each scenario here runs in two processes with different hash
seeds; every result column but wall-clock ones must be identical.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Small runs that go through the transaction layer (every OCC preset, SmallBank and
# TPC-C, the RPC layer, the store) and through RoCE's PFC, ECN and DCQCN on a leaf-spine.
CASES = {
    "txn presets": ["scenarios/drtmh/fig14_end_to_end.yaml", "--set", "run.size=smoke"],
    "roce leaf-spine": ["scenarios/roce/whatif_leafspine_dcqcn.yaml"],
}


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if not k.endswith("wall_s")} for r in rows]


def _run(args: list[str], out: Path, hash_seed: str) -> list[dict[str, str]]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    r = subprocess.run([sys.executable, "-m", "rnicsim", "run", *args, "--out", str(out),
                        "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return _rows(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_do_not_depend_on_the_python_hash_seed(tmp_path, case):
    args = CASES[case]
    a = _run(args, tmp_path / "a", "1")
    b = _run(args, tmp_path / "b", "2")
    assert a and a == b
