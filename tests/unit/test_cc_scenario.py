"""Scenario keys of the concurrency-control protocols: each impossible combination is
refused by `rnicsim validate` with the key path and what was expected (exit 2), and a
sweep over protocol.kind runs every protocol in every form."""
from __future__ import annotations

from pathlib import Path

import pytest

from rnicsim.cli import main

SIX = Path(__file__).resolve().parents[2] / "scenarios" / "rcc" / "six_protocols.yaml"


def _validate(capsys, *sets: str) -> tuple[int, str]:
    argv = ["validate", str(SIX)]
    for s in sets:
        argv += ["--set", s]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_six_protocols_scenario_validates(capsys):
    """Six protocols x two forms: 12 points."""
    code, out = _validate(capsys)
    assert code == 0 and "12 points" in out


@pytest.mark.parametrize("sets,key,expected", [
    (["sweep.protocol.kind=[sundial]", "protocol.verbs=hybrid",
      "protocol.stages={validate: one_sided}"],
     "protocol.stages.validate", "this protocol has no stage 'validate'; its stages are "
                                 "lock, read, log, release, commit, renew"),
    (["protocol.verbs=hybrid", "protocol.stages={renew: one_sided}"],
     "protocol.stages.renew", "this protocol has no stage 'renew'"),
    (["protocol.verbs=hybrid"], "protocol.stages",
     "verbs: hybrid needs a choice per stage"),
    (["protocol.stages={lock: one_sided}"], "protocol.stages",
     "only with verbs: hybrid"),
    (["protocol.verbs=hybrid", "protocol.hybrid_code=1",
      "protocol.stages={lock: rpc}"], "protocol.stages.lock",
     "rpc, but protocol.hybrid_code 1 says one_sided"),
    (["protocol.verbs=hybrid", "protocol.hybrid_code=600"], "protocol.hybrid_code",
     "an integer 0..511"),
    (["sweep.protocol.kind=[occ]", "protocol.preset=farm"], "protocol.preset",
     "a DrTM+H design key; with protocol.verbs (RCC's OCC)"),
    (["workload.benchmark=tpce"], "workload.benchmark",
     "one whose transactions declare their keys (smallbank, tpcc, ycsb): CALVIN"),
    (["protocol.kind=mvcc", "sweep.protocol.kind=[mvcc]", "protocol.versions=0"], "protocol.versions",
     "greater than or equal to 1"),
])
def test_impossible_combinations_are_refused_by_name(capsys, sets, key, expected):
    """The message names the file, the key path and what was expected; exit 2."""
    code, out = _validate(capsys, *sets)
    assert code == 2, out
    assert f"{SIX}" in out or "six_protocols.yaml" in out
    assert key in out and expected in out, out


def test_hybrid_code_bits_of_absent_stages_are_ignored(capsys):
    """RCC's scripts pass 31 (LOCK+READ+LOG+RELEASE+COMMIT) to every protocol; a protocol
    reads only its own stages' bits."""
    code, out = _validate(capsys, "protocol.verbs=hybrid", "protocol.hybrid_code=511")
    assert code == 0, out
