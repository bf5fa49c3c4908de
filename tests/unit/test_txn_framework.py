"""A framework's own CPU per attempt (``protocol.framework``, protocols/txn/cc.py)."""
from __future__ import annotations

import pytest

from protocols.txn.bench import build, run_txn_bench
from protocols.txn.cc import FRAMEWORK_TXN_CYCLES, SoftwareCosts, framework_txn_ns
from protocols.txn.api import TxnSpec
from protocols.txn.store import Table
from protocols.txn.systems import preset
from rnicsim.runner import run_point
from rnicsim.errors import InputError
from rnicsim.scenario import resolve


class _Empty:
    """One transaction type that touches no record and computes 1 us."""

    tables = [Table(0, "t", 8, 4, lambda k: (0, k))]

    @staticmethod
    def _body(tx):
        yield tx.compute(1_000.0)

    def next_txn(self, rng, node, thread, co):
        return TxnSpec("empty", self._body, True)


def _latency_us(cx4, txn_cpu: float) -> tuple[float, float]:
    cfg = preset("drtmh", costs=SoftwareCosts(txn_cpu=txn_cpu))
    b = build(cx4, 1, 1, _Empty(), cfg, 1)
    m = run_txn_bench(b, 0.0, 50_000.0)
    return m["lat_txn_empty_us"], m["committed"]


def test_each_attempt_pays_the_framework_cpu_once(cx4):
    """One coroutine on one thread, a transaction with no record: every transaction
    takes exactly ``txn_cpu`` longer, and the window commits accordingly fewer."""
    base, n0 = _latency_us(cx4, 0.0)
    slow, n1 = _latency_us(cx4, 2_000.0)
    assert slow - base == pytest.approx(2.0, abs=1e-9)
    assert n1 == pytest.approx(50.0 / slow, abs=1.0)
    assert n0 > n1


def test_cycles_become_time_at_the_host_clock():
    assert framework_txn_ns("none", 2.2e9) == 0.0
    assert framework_txn_ns("rcc", 2.2e9) == pytest.approx(FRAMEWORK_TXN_CYCLES["rcc"] / 2.2)
    with pytest.raises(ValueError, match=r"protocol.framework: one of none, rcc"):
        framework_txn_ns("farm", 2.2e9)


_SC = {"version": 1, "name": "fw", "cluster": {"nodes": 2, "nic": {"profile": "cx4-edr"},
                                               "threads": 1},
       "workload": {"kind": "txn", "benchmark": "smallbank", "coroutines": 1},
       "protocol": {"kind": "nowait", "verbs": "one_sided"},
       "run": {"seed": 1, "warmup": "5us", "measure": "40us"}}


def test_scenario_key_slows_a_cpu_bound_point_and_bad_values_name_the_key():
    """``protocol.framework: rcc`` costs 9,600 cycles per attempt: fewer commits at one
    coroutine than ``none``; an unknown name is refused naming the key."""
    none = run_point(resolve(_SC, "<fw>"))
    rcc = run_point(resolve({**_SC, "protocol": {**_SC["protocol"], "framework": "rcc"}},
                            "<fw>"))
    assert rcc["committed"] < none["committed"]
    assert rcc["lat_p50_us"] - none["lat_p50_us"] == pytest.approx(
        FRAMEWORK_TXN_CYCLES["rcc"] / 2.2e3, rel=0.15)
    with pytest.raises(InputError, match="protocol.framework"):
        resolve({**_SC, "protocol": {**_SC["protocol"], "framework": "farm"}}, "<fw>")
