"""Where points run, and runs that survive losing a worker or being stopped: a local Dask
cluster, a worker killed mid-point, an interrupted run resumed, a resume refused for
another scenario, a point that raises, a scheduler that cannot be reached, and a reused
``--out`` that keeps nothing of the previous run but the user's own files.

Every run here is the six-point ``tests/data/tiny_sweep.yaml`` (about 0.1 s a point)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import rnicsim.distributed
import rnicsim.runner
from rnicsim.cli import main

TINY = str(Path(__file__).parents[1] / "data" / "tiny_sweep.yaml")
# The files whose bytes must not depend on where or how the points ran.
RESULTS = ("results.csv", "summary.json", "tput.png")


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _results(d: Path) -> dict[str, bytes]:
    return {f: (d / f).read_bytes() for f in RESULTS}


def _stored(d: Path) -> list[str]:
    return sorted(p.name for p in (d / "points").glob("[0-9]*.json"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The results of the tiny sweep run in one process (``--jobs 1``)."""
    out = tmp_path_factory.mktemp("ref") / "out"
    assert main(["run", TINY, "--out", str(out), "--quiet"]) == 0
    return _results(out)


def test_a_two_worker_local_dask_cluster_gives_byte_identical_results(tmp_path, capsys,
                                                                      reference):
    """--scheduler local:2 writes the same results.csv, summary.json and plot bytes as one
    process, and progress names the cluster and counts done, running and failed points."""
    out = tmp_path / "out"
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--scheduler", "local:2"], capsys)
    assert code == 0, err
    assert _results(out) == reference
    assert "on a local Dask cluster of 2 worker processes" in err
    assert "[6/6 done, 0 running, 0 failed]" in err


def test_a_worker_killed_mid_point_costs_nothing(tmp_path, capsys, monkeypatch, reference):
    """The first worker to finish a point is killed before handing it back (the test hook):
    the scheduler runs that point again on the other worker, and every point is stored
    exactly once with results identical to one process's."""
    marker = tmp_path / "killed"
    monkeypatch.setenv(rnicsim.distributed.KILL_HOOK, str(marker))
    out = tmp_path / "out"
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--scheduler", "local:2",
                          "--quiet"], capsys)
    assert code == 0, err
    assert marker.exists()                   # a worker did die mid-point
    assert _results(out) == reference
    assert _stored(out) == [f"{i:03d}.json" for i in range(6)]
    timing = json.loads((out / "timing.json").read_text())
    assert sorted(p["index"] for p in timing["points"]) == list(range(6))


def test_an_interrupted_run_resumes_to_identical_results(tmp_path, capsys, monkeypatch,
                                                         reference):
    """A run stopped after 2 points keeps them and writes no results; a new run into that
    --out is refused without --resume or --force; --resume runs only the 4 others and
    gives results identical to an uninterrupted run."""
    out = tmp_path / "out"
    monkeypatch.setenv(rnicsim.runner.INTERRUPT_HOOK, "2")
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--quiet"], capsys)
    assert code == 130, err
    assert _stored(out) == ["000.json", "001.json"] and not (out / "results.csv").exists()
    monkeypatch.delenv(rnicsim.runner.INTERRUPT_HOOK)

    code, _o, err = _cli(["run", TINY, "--out", str(out), "--quiet"], capsys)
    assert code == 2
    assert f"holds 2 stored points of a run that did not complete; add --resume" in err

    ran = []
    real = rnicsim.runner.run_point
    monkeypatch.setattr(rnicsim.runner, "run_point", lambda sc: ran.append(sc) or real(sc))
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--resume"], capsys)
    assert code == 0, err
    assert len(ran) == 4 and "(6 points, 2 stored, 4 to run, size full)" in err
    assert _results(out) == reference


def test_a_resume_against_another_scenario_is_refused_naming_the_keys(tmp_path, capsys):
    """--resume into an --out holding points of a changed scenario exits 2 naming each
    differing key; nothing is run or deleted."""
    out = tmp_path / "out"
    assert _cli(["run", TINY, "--out", str(out), "--quiet"], capsys)[0] == 0
    before = _results(out)
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--quiet", "--resume",
                          "--set", "cluster.threads=2", "--seed", "4"], capsys)
    assert code == 2
    assert "--resume: the scenario of the points stored in" in err
    assert "these keys differ: cluster.threads, run.seed (" in err
    assert _results(out) == before and len(_stored(out)) == 6


def test_a_point_that_raises_is_named_and_the_others_are_stored(tmp_path, capsys,
                                                                monkeypatch, reference):
    """One raising point: the five others run and are stored, no results are written, the
    run exits 1 naming the point's parameters and error; --resume then runs just it."""
    real = rnicsim.runner.run_point

    def flaky(sc):
        if sc.workload.verb == "send" and sc.workload.payload == 8:
            raise RuntimeError("stand-in failure")
        return real(sc)

    monkeypatch.setattr(rnicsim.runner, "run_point", flaky)
    out = tmp_path / "out"
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--quiet"], capsys)
    assert code == 1
    assert "1 of 6 points failed (results not written; the 5 others are stored in" in err
    assert ("  point 4 (workload.verb=send workload.payload=8): RuntimeError: stand-in "
            "failure") in err
    assert not (out / "results.csv").exists()
    assert _stored(out) == ["000.json", "001.json", "002.json", "003.json", "005.json"]
    monkeypatch.setattr(rnicsim.runner, "run_point", real)
    assert _cli(["run", TINY, "--out", str(out), "--quiet", "--resume"], capsys)[0] == 0
    assert _results(out) == reference


def test_a_scheduler_that_cannot_be_reached_exits_2_before_anything_runs(tmp_path, capsys,
                                                                         monkeypatch):
    """An address nothing listens on, or one that is not an address, exits 2 naming
    --scheduler; the output directory is not made."""
    monkeypatch.setattr(rnicsim.distributed, "CONNECT_TIMEOUT_S", 0.5)
    out = tmp_path / "out"
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--scheduler",
                          "tcp://127.0.0.1:1"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "--scheduler: the address of a reachable Dask scheduler such as tcp://HOST:8786" \
        in err and "tcp://127.0.0.1:1" in err
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--scheduler", "nowhere"], capsys)
    assert code == 2 and "tcp://HOST:PORT (a Dask scheduler) or local:N" in err
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--scheduler", "local:2",
                          "--jobs", "2"], capsys)
    assert code == 2 and "--jobs: no --jobs with --scheduler" in err
    assert not out.exists()


def test_a_reused_out_keeps_only_this_runs_files_and_the_users(tmp_path, capsys):
    """A second run into an --out removes the first run's plot that it no longer draws and
    rewrites the rest; a file the user put there stays, and so does a user file in
    points/."""
    src = tmp_path / "tiny.yaml"
    shutil.copy(TINY, src)
    out = tmp_path / "out"
    assert _cli(["run", str(src), "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    (out / "points" / "mine.txt").write_text("mine too")
    src.write_text(src.read_text().replace("file: tput.png", "file: other.png"))
    assert _cli(["run", str(src), "--out", str(out), "--quiet"], capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "notes.txt", "other.png", "points", "results.csv", "rnicsim-manifest.json",
        "scenario.resolved.yaml", "summary.json", "timing.json"]
    assert (out / "points" / "mine.txt").read_text() == "mine too"
    manifest = json.loads((out / "rnicsim-manifest.json").read_text())
    assert manifest["complete"] is True and "other.png" in manifest["written"]
    assert "tput.png" not in manifest["written"] and "notes.txt" not in manifest["written"]


def test_force_discards_an_unfinished_run(tmp_path, capsys, monkeypatch):
    """--force starts over in an --out holding an unfinished run: its stored points are
    deleted and every point runs again."""
    out = tmp_path / "out"
    monkeypatch.setenv(rnicsim.runner.INTERRUPT_HOOK, "3")
    assert _cli(["run", TINY, "--out", str(out), "--quiet"], capsys)[0] == 130
    monkeypatch.delenv(rnicsim.runner.INTERRUPT_HOOK)
    code, _o, err = _cli(["run", TINY, "--out", str(out), "--force"], capsys)
    assert code == 0, err
    assert "(6 points, size full)" in err and len(_stored(out)) == 6
