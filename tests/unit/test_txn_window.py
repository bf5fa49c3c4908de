"""The transaction window: estimated latencies, then commits counted (``workload.min_txns``)."""
from __future__ import annotations

import pytest

from protocols.txn.bench import (CPU_BOUND_LATENCIES, SETTLE_MAX_STRETCH,
                                 SETTLE_MIN_COMMITS, SLEEP_WARMUP_LATENCIES,
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


def test_window_settles_on_commits_and_bad_values_name_the_key():
    """At one coroutine the transactions wait on the network far longer than the
    estimate: the warm-up runs until the cluster has committed SLEEP_WARMUP_LATENCIES
    transactions per coroutine, the window until it holds SLEEP_WINDOW_LATENCIES per
    coroutine, ``workload.min_txns`` and SETTLE_MIN_COMMITS, each stretched at most
    SETTLE_MAX_STRETCH times (``warmup_us`` and ``measure_us`` are what ran); a negative
    count is refused naming the key."""
    prof = load_profile("cx4-edr")
    wl = make_workload("ycsb", {"records_per_thread": 1000, "hot_records_per_thread": 10},
                       2, 2, prof.host.clock, 1)
    w0, m0 = stretch_window(wl, 1, 5e3, 50e3, prof.host.timer_slack)
    plain = run_point(resolve(_SC, "<w>"))
    assert plain["warmup_us"] > w0 / 1e3 and plain["measure_us"] > m0 / 1e3
    assert plain["measure_us"] <= SETTLE_MAX_STRETCH * m0 / 1e3 + 1e-9
    # the window ends on the commit that completes the count, or at the cap
    assert (plain["committed"] >= SETTLE_MIN_COMMITS
            or plain["measure_us"] == pytest.approx(SETTLE_MAX_STRETCH * m0 / 1e3))
    sc = {**_SC, "workload": {**_SC["workload"], "min_txns": 800},
          "run": {**_SC["run"], "measure": "400us"}}
    out = run_point(resolve(sc, "<w>"))
    assert 800 <= out["committed"] < 1.1 * 800
    assert out["measure_us"] > 400
    with pytest.raises(InputError, match="workload.min_txns"):
        resolve({**_SC, "workload": {**_SC["workload"], "min_txns": -1}}, "<w>")
