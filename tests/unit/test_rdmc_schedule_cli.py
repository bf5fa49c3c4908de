"""``rnicsim rdmc-schedule`` through the real dispatcher (protocols/rdmc/schedule_cli.py)."""
from __future__ import annotations

import json

import pytest

from protocols.rdmc import schedule_cli, schedules
from rnicsim import cli
from rnicsim.errors import InputError


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["rdmc-schedule", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_exactly_the_documented_shape(capsys) -> None:
    """--json prints one object: algorithm, nodes, blocks and steps of [sender, receiver, block]."""
    code, out, err = run(capsys, "--algorithm", "chain", "-n", "3", "-k", "2", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "algorithm": "chain",
        "nodes": 3,
        "blocks": 2,
        "steps": [[[0, 1, 0]], [[0, 1, 1], [1, 2, 0]], [[1, 2, 1]]],
    }
    assert list(json.loads(out)) == ["algorithm", "nodes", "blocks", "steps"]


@pytest.mark.parametrize("algorithm", schedules.ALGORITHMS)
def test_json_steps_equal_the_python_api(capsys, algorithm: str) -> None:
    """The JSON steps are schedules.schedule() with tuples as lists."""
    code, out, _ = run(capsys, "--algorithm", algorithm, "--nodes", "7", "--blocks", "3", "--json")
    assert code == 0
    expected = [[list(t) for t in step] for step in schedules.schedule(algorithm, 7, 3)]
    assert json.loads(out)["steps"] == expected


def test_text_output_lists_every_step(capsys) -> None:
    """Text output: a header, then 'step j: s->r bB' per step."""
    code, out, err = run(capsys, "--algorithm", "binomial-pipeline", "-n", "4", "-k", "2")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "binomial-pipeline: 4 nodes, 2 blocks, 3 steps",
        "step 0: 0->1 b0",
        "step 1: 0->2 b1, 1->3 b0",
        "step 2: 0->1 b1, 2->3 b1, 3->2 b0",
    ]


def test_hybrid_takes_a_rack_size(capsys) -> None:
    """--rack-size sets the hybrid racks and shows in the header."""
    code, out, _ = run(capsys, "-a", "hybrid", "-n", "6", "-k", "1", "--rack-size", "3")
    assert code == 0
    assert out.splitlines() == [
        "hybrid: 6 nodes, 1 block, rack size 3, 3 steps",
        "step 0: 0->3 b0",
        "step 1: 0->1 b0, 3->4 b0",
        "step 2: 0->2 b0, 3->5 b0",
    ]


def test_help_prints_usage_and_returns_zero(capsys) -> None:
    """--help is not an error."""
    code, out, err = run(capsys, "--help")
    assert (code, err) == (0, "")
    assert "usage: rnicsim rdmc-schedule" in out
    assert "--algorithm" in out and "--rack-size" in out


@pytest.mark.parametrize(
    ("argv", "flag", "expected"),
    [
        (["--algorithm", "binomial", "-n", "4", "-k", "2"], "--algorithm", "one of sequential, chain, binomial-tree"),
        (["-n", "4", "-k", "2"], "--algorithm", "(required)"),
        (["--algorithm", "chain", "-n", "-3", "-k", "2"], "-n", "an integer >= 1"),
        (["--algorithm", "chain", "-n", "0", "-k", "2"], "-n", "an integer >= 1"),
        (["--algorithm", "chain", "-n", "four", "-k", "2"], "-n", "an integer >= 1"),
        (["--algorithm", "chain", "-n", "4", "-k", "0"], "-k", "an integer >= 1"),
        (["--algorithm", "chain", "-n", "4"], "-k", "(required)"),
        (["--algorithm", "chain", "-n"], "-n", "expected one argument"),
        (["--algorithm", "chain", "-n", "4", "-k", "2", "--fast"], "--fast", "no such argument"),
        (["--algorithm", "chain", "-n", "4", "-k", "2", "--rack-size", "2"], "--rack-size", "only with --algorithm hybrid"),
        (["--algorithm", "hybrid", "-n", "4", "-k", "2", "--rack-size", "0"], "--rack-size", "an integer >= 1"),
    ],
)
def test_bad_arguments_exit_2_naming_the_flag(capsys, argv: list[str], flag: str, expected: str) -> None:
    """Bad arguments never raise SystemExit: the dispatcher exits 2 and stderr names the flag."""
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith(f"rnicsim rdmc-schedule: error: command line: {flag}: ")
    assert expected in err


def test_main_raises_input_error_directly() -> None:
    """Called without the dispatcher, main raises InputError with source, key and expectation."""
    with pytest.raises(InputError) as info:
        schedule_cli.main(["--algorithm", "nope", "-n", "2", "-k", "1"])
    assert info.value.source == "command line"
    assert info.value.key == "--algorithm"
    assert info.value.expected.startswith("one of " + ", ".join(schedules.ALGORITHMS))


def test_oversized_schedules_exit_2_before_anything_is_built(capsys, monkeypatch) -> None:
    """(n-1) x k above MAX_TRANSFERS (1,000,000) exits 2 naming -n/-k without building the
    schedule (``-a chain -n 100000 -k 100000`` was killed for memory at 24 GB); the limit
    itself is accepted."""
    assert schedule_cli.MAX_TRANSFERS == 1_000_000
    built = []
    monkeypatch.setattr(schedules, "schedule", lambda *a, **k: built.append(a) or [])
    code, out, err = run(capsys, "-a", "chain", "-n", "100000", "-k", "100000")
    assert code == 2 and out == "" and built == []
    assert "-n/-k" in err and "1,000,000" in err and "9,999,900,000" in err
    code, _, _ = run(capsys, "-a", "sequential", "-n", "1001", "-k", "1000")
    assert code == 0 and built == [("sequential", 1001, 1000)]
