"""The transaction window: ``workload.min_txns`` stretches it to a number of commits."""
from __future__ import annotations

import pytest

from protocols.txn.bench import (CPU_BOUND_LATENCIES, SLEEP_WARMUP_LATENCIES,
                                 SLEEP_WINDOW_LATENCIES, make_workload, start_stagger,
                                 stretch_window, thread_ns_per_txn)
from rnicsim.errors import InputError
from rnicsim.profile import load_profile
from rnicsim.runner import run_point
from rnicsim.scenario import resolve

_SC = {"version": 1, "name": "window",
       "cluster": {"nodes": 2, "nic": {"profile": "cx4-edr", "per_node": 1}, "threads": 2},
       "workload": {"kind": "txn", "benchmark": "ycsb", "coroutines": 1,
                    "ycsb_records_per_thread": 1000, "ycsb_hot_records_per_thread": 10},
       "protocol": {"kind": "nowait", "verbs": "one_sided"},
       "run": {"seed": 1, "warmup": "5us", "measure": "50us"}}


def test_window_covers_the_start_and_transaction_latencies():
    """With sleeps the warm-up covers the coroutines' staggered start and
    SLEEP_WARMUP_LATENCIES transaction latencies (coroutines x thread time per
    transaction + 20 us), the window SLEEP_WINDOW_LATENCIES; CPU-bound, each covers
    CPU_BOUND_LATENCIES; a scenario's longer warm-up or window is kept."""
    prof = load_profile("cx4-edr")
    slack = prof.host.timer_slack
    wl = make_workload("ycsb", {}, 4, 10, prof.host.clock, 10)
    assert wl.sleeps_per_txn == 1
    per = thread_ns_per_txn(wl, slack)
    lat = 10 * per + 20e3
    assert start_stagger(wl, 10, slack) == pytest.approx(10 * per)
    assert start_stagger(wl, 1, slack) == 0.0
    w, m = stretch_window(wl, 10, 50e3, 200e3, slack)
    assert w == pytest.approx(10 * per + SLEEP_WARMUP_LATENCIES * lat)
    assert m == pytest.approx(SLEEP_WINDOW_LATENCIES * lat)
    assert stretch_window(wl, 10, 20e6, 30e6, slack) == (20e6, 30e6)
    busy = make_workload("ycsb", {"sleep": False}, 4, 10, prof.host.clock, 10)
    assert busy.sleeps_per_txn == 0
    lat = 10 * thread_ns_per_txn(busy, slack) + 20e3
    w, m = stretch_window(busy, 10, 1e3, 1e3, slack)
    assert (w, m) == (pytest.approx(CPU_BOUND_LATENCIES * lat),
                      pytest.approx(CPU_BOUND_LATENCIES * lat))


def test_min_txns_stretches_the_window_to_the_commits_asked():
    """The window holds ``min_txns`` transactions of the cluster's threads at one per
    thread-bound transaction time (CPU plus the usleep's timer slack), and never shrinks
    the window the transaction latencies ask for."""
    prof = load_profile("cx4-edr")
    wl = make_workload("ycsb", {}, 4, 10, prof.host.clock, 2)
    per = thread_ns_per_txn(wl, prof.host.timer_slack)
    assert per == pytest.approx(wl.cpu_estimate_ns() + prof.host.timer_slack)
    base = stretch_window(wl, 2, 300e3, 600e3, prof.host.timer_slack)
    w, m = stretch_window(wl, 2, 300e3, 600e3, prof.host.timer_slack, 4000, 40)
    assert (w, m) == (base[0], pytest.approx(4000 * per / 40))
    # 3600 threads need a shorter window than the latencies: it is kept
    assert stretch_window(wl, 2, 300e3, 600e3, prof.host.timer_slack, 4000, 3600) == base


def test_scenario_key_sets_the_window_and_bad_values_name_the_key():
    """``workload.min_txns`` reaches the point (its ``measure_us`` is the stretched
    window and the point commits on that order); a negative count is refused naming
    the key."""
    plain = run_point(resolve(_SC, "<w>"))
    sc = {**_SC, "workload": {**_SC["workload"], "min_txns": 100}}
    out = run_point(resolve(sc, "<w>"))
    prof = load_profile("cx4-edr")
    wl = make_workload("ycsb", {"records_per_thread": 1000, "hot_records_per_thread": 10},
                       2, 2, prof.host.clock, 1)
    per = thread_ns_per_txn(wl, prof.host.timer_slack)
    assert out["measure_us"] == pytest.approx(100 * per / 4 / 1e3)
    assert out["measure_us"] > plain["measure_us"]
    # an upper bound on the commits: aborts and network waits make them fewer
    assert 0.3 * 100 < out["committed"] <= 100
    with pytest.raises(InputError, match="workload.min_txns"):
        resolve({**_SC, "workload": {**_SC["workload"], "min_txns": -1}}, "<w>")
