"""workloads.microbench: coroutines that own their QP (``qp_choice: coroutine``) and one CQ
per QP scanned by the scheduler (``cq_layout: per_qp``), the loop the probe's ``coro``
sweep measures on real hardware."""
from __future__ import annotations

import pytest

from rnicsim.profile import load_profile
from workloads.microbench import MicrobenchSpec, run_microbench


def _run(prof, k: int, layout: str, choice: str = "coroutine") -> dict:
    sp = MicrobenchSpec(verb="read", payload=64, mode="client_server", servers=1, threads=1,
                        coroutines=k, outstanding=1, qps_per_peer=k, qp_choice=choice,
                        cq_layout=layout, inline=False)
    return run_microbench(prof, sp, nodes=2, warmup_ns=10_000, measure_ns=30_000)


@pytest.fixture(scope="module")
def cx4():
    return load_profile("cx4-edr")


def test_one_coroutine_scans_one_cq_either_way(cx4):
    """With one coroutine only its own CQ is ever pending: the layouts are the same loop."""
    assert _run(cx4, 1, "per_qp") == _run(cx4, 1, "shared")


def test_the_scan_costs_one_poll_per_pending_coroutine(cx4):
    """Eight coroutines, CPU-bound: each pass of the per-QP scan polls the CQs of the
    pending coroutines, so it is slower than one poll of a shared CQ and its core busier
    per operation; with a free ``poll_cq`` the two layouts are the same run (the scan is
    the only difference)."""
    shared, per_qp = _run(cx4, 8, "shared"), _run(cx4, 8, "per_qp")
    assert per_qp["throughput_mops"] < 0.95 * shared["throughput_mops"]
    free = cx4.with_overrides({"host.poll_cq": "0ns"}, "test")
    assert _run(free, 8, "per_qp") == _run(free, 8, "shared")


def test_coroutines_owning_their_qp_take_turns_on_the_qp_cache(cx4):
    """Coroutine c always on QP c: completions come back in posting order, so the eight
    QPs are used round robin and an LRU context cache of four misses every time; QPs
    drawn at random hit whenever the last four draws repeat one."""
    small = cx4.with_overrides({"nic.qp_cache_entries": 4}, "test")
    owned = _run(small, 8, "shared", "coroutine")["qpc_miss_rate"]
    drawn = _run(small, 8, "shared", "random")["qpc_miss_rate"]
    assert owned > 0.95 and drawn < 0.8, (owned, drawn)


def test_layout_options_are_for_one_sided_verbs():
    with pytest.raises(ValueError, match="cq_layout"):
        MicrobenchSpec(verb="rpc", transport="ud", cq_layout="per_qp").check()
    with pytest.raises(ValueError, match="qp_choice"):
        MicrobenchSpec(qp_choice="sticky").check()
