"""Stage timers as RCC's START/END pairs: what each holds, and one call per pair."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import simpy

from protocols.txn.driver import TxnSystem
from rnicsim.runner import run_point
from rnicsim.scenario import resolve

_SC = {"version": 1, "name": "timers",
       "cluster": {"nodes": 2, "nic": {"profile": "cx4-edr", "per_node": 1}, "threads": 1},
       "workload": {"kind": "txn", "benchmark": "ycsb", "coroutines": 1, "ycsb_ops": 3,
                    "ycsb_write_probability": 1.0, "ycsb_compute": "0us",
                    "ycsb_records_per_thread": 100000, "ycsb_hot_records_per_thread": 10,
                    "ycsb_hot_probability": 0.0},
       "protocol": {"kind": "nowait", "verbs": "one_sided", "framework": "rcc"},
       "run": {"seed": 1, "warmup": "20us", "measure": "400us"}}


def _run(**protocol) -> dict:
    return run_point(resolve({**_SC, "protocol": {**_SC["protocol"], **protocol}}, "<t>"))


def test_timed_leaves_untimed_work_out_and_counts_one_call():
    """A timer holds its steps' time less the untimed work inside them [ns]."""
    env = simpy.Environment()
    owner = SimpleNamespace(sim=env)
    tx = SimpleNamespace(phases={}, calls={}, untimed=0.0)

    def pre_read():
        yield env.timeout(300)

    def lock():
        yield env.timeout(100)
        yield from TxnSystem.untimed(owner, tx, pre_read())
        yield env.timeout(50)
        return "held"

    def run():
        out = yield from TxnSystem.timed(owner, tx, "lock", lock())
        assert out == "held"
        yield from TxnSystem.timed(owner, tx, "lock", lock())

    env.process(run())
    env.run()
    assert env.now == 900
    assert tx.phases == {"lock": 300.0} and tx.calls == {"lock": 2}
    assert tx.untimed == 600.0


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_nowait_times_each_records_lock_call_and_never_read(verbs):
    """RCC's NOWAIT times every record's lock call (the record comes with it) and never
    starts its read timer: three records a transaction, three lock calls."""
    m = _run(verbs=verbs)
    assert m["committed"] > 20
    assert m["lat_read_us"] == 0.0 and m["lat_read_call_us"] == 0.0
    assert m["lat_lock_us"] / m["lat_lock_call_us"] == pytest.approx(3.0)
    assert 1.0 < m["lat_lock_call_us"] < m["lat_p50_us"] / 3
    if verbs == "one_sided":
        # one round trip (CAS + READ in one doorbell), as the log's WRITE is: the READ
        # of the record before the lock is in no timer
        assert m["lat_lock_call_us"] < 2 * m["lat_log_call_us"]


def test_sundial_lock_timer_leaves_the_read_before_the_lock_out():
    """SUNDIAL's one-sided lock call is its CAS + READ: the READ of the record before it
    (RCC's remote_write) is in no timer."""
    m = _run(kind="sundial")
    assert m["committed"] > 20
    assert m["lat_lock_us"] / m["lat_lock_call_us"] == pytest.approx(3.0)
    assert m["lat_lock_call_us"] < 2 * m["lat_log_call_us"]


def test_log_timer_stops_before_the_acknowledgement():
    """The log's acknowledgement (an RPC round trip after the log's WRITE) is in no
    timer: the log stage per call is the same with and without it."""
    with_ack = _run()
    without = _run(passive_ack=True)
    assert with_ack["lat_log_call_us"] == pytest.approx(without["lat_log_call_us"],
                                                        rel=0.15)
    assert with_ack["round_trips_per_txn"] > without["round_trips_per_txn"]


def test_occ_commit_is_rccs_two_nested_timers():
    """RCC's OCC times its commit twice per transaction: once around lock, validation,
    log and write-back, once around the write-back."""
    m = _run(kind="occ")
    assert m["committed"] > 20
    assert m["lat_commit_us"] / m["lat_commit_call_us"] == pytest.approx(2.0)
    # the outer call holds the lock and the log, so the two exceed them
    assert m["lat_commit_us"] > m["lat_lock_us"] + m["lat_log_us"]


def test_rcc_occ_reads_one_at_a_time_one_sided_and_in_one_batch_over_rpc():
    """RCC's OCC: one-sided, each record is its own READ and its own read call
    (``occ_rdma.h`` ``remote_read``); over RPC the three reads go out as one batch with
    one wait, one read call (``occ.h``: ``remote_read`` adds to the batch that the first
    ``load_read`` sends), whose wait is about one round trip, not three."""
    one = _run(kind="occ", verbs="one_sided")
    rpc = _run(kind="occ", verbs="rpc")
    assert one["committed"] > 20 and rpc["committed"] > 20
    assert one["lat_read_us"] / one["lat_read_call_us"] == pytest.approx(3.0)
    assert rpc["lat_read_us"] / rpc["lat_read_call_us"] == pytest.approx(1.0)
    assert rpc["lat_read_call_us"] < 1.5 * rpc["lat_lock_call_us"]
    assert rpc["round_trips_per_txn"] <= one["round_trips_per_txn"] - 2 + 1e-9
