"""RDMC paper findings (CLAIMS.md M1-M11) at reduced size, through protocols/rdmc/study.py.

The ``repro``-marked tests run ``study.claims("demo")`` one claim at a time (``make
test-all``); the unmarked ones are fast orderings that guard the engine in every run.
"""
from __future__ import annotations

import pytest

from protocols.rdmc import study

MiB = 1 << 20


@pytest.mark.repro
@pytest.mark.parametrize("claim", [f"M{i}" for i in range(1, 12)])
def test_claim_holds_at_demo_size(claim):
    """The qualitative finding of each claim holds at demo size."""
    (row,) = study.claims("demo", only=[claim])
    assert row["claim"] == claim
    assert row["holds"] is True, row["measured"]


@pytest.mark.repro
def test_core_direct_chain_is_faster():
    """M11: chain send with CORE-Direct relaying beats software relaying (~1.05 published)."""
    (row,) = study.claims("demo", only=["M11"])
    assert row["holds"] is True, row["measured"]
    assert 1.0 < row["measured"]["speedup"] < 1.3
    assert row["measured"]["relay_cpu_core_direct"] < row["measured"]["relay_cpu_software"]


def test_binomial_pipeline_beats_sequential_and_tree_at_8_nodes():
    """8 nodes, 8 MiB, QDR: pipeline < binomial tree < sequential (M4, M7)."""
    t = {a: study.run_multicast(8, 8 * MiB, a)["completion_ms"]
         for a in ("binomial-pipeline", "binomial-tree", "sequential")}
    assert t["binomial-pipeline"] < t["binomial-tree"] < t["sequential"]
    assert t["sequential"] / t["binomial-pipeline"] > 3


def test_mpi_broadcast_slower_than_binomial_pipeline_for_large_messages():
    """64 MiB to 8 nodes: MPI's scatter + allgather takes 1.03x-3x the pipeline (M4)."""
    mpi = study.run_multicast(8, 64 * MiB, "mpi")["completion_ms"]
    bp = study.run_multicast(8, 64 * MiB, "binomial-pipeline")["completion_ms"]
    assert 1.03 < mpi / bp < 3.0


def test_steady_slack_matches_the_formula():
    """The schedule's steady-step slack equals 2(1 - (l-1)/(n-2)) (M2)."""
    r = study.slack_and_slow_links("demo")
    for row in r["slack"]:
        assert row["measured"] == pytest.approx(row["predicted"], rel=1e-12)
