"""TPC-E Customer-Position as DrTM+H ran it on EGen's data (workloads/tpce.py)."""
from __future__ import annotations

import numpy as np

from workloads.tpce import (ACCOUNT, HISTORY, HISTORY_TRADES, LAST_TRADE, CustomerPosition,
                            TpceSpec, draw_customer)


def test_customer_draw_follows_egen_tiers_and_weights():
    """EGen's GenerateRandomCustomer: tiers 1/2/3 for 10/60/30% of the draws (20/60/20% of
    the customers), weights 0.3-0.7, 0.7-1.3, 1.3-1.7 around a mean of 1 per customer."""
    rng = np.random.default_rng(3)
    draws = [draw_customer(rng) for _ in range(20000)]
    share = [sum(1 for t, _ in draws if t == k) / len(draws) for k in range(3)]
    assert abs(share[0] - 0.1) < 0.01 and abs(share[1] - 0.6) < 0.015
    for k, (lo, hi) in enumerate(((0.3, 0.7), (0.7, 1.3), (1.3, 1.7))):
        ws = [w for t, w in draws if t == k]
        assert lo - 0.01 <= min(ws) and max(ws) <= hi + 0.01


class _Tx:
    """Collects the reads of a transaction body."""

    def __init__(self) -> None:
        self.reads: list = []

    def read_many(self, items, for_update=False):
        self.reads.extend(items)
        return [b""] * len(items)
        yield  # pragma: no cover

    def compute(self, ns):
        return ns


def _reads(spec: TpceSpec, n: int = 3000, nodes: int = 4):
    wl = CustomerPosition(spec, nodes, 2, 2.5e9)
    rng = np.random.default_rng(7)
    out = []
    for _ in range(n):
        t = wl.next_txn(rng, 1, 1, 0)
        tx = _Tx()
        for _ in t.body(tx):
            pass
        out.append(tx.reads)
    return out


def _count(r, table):
    return sum(1 for t, _ in r if t == table)


def test_holdings_come_from_one_day_of_initial_trades():
    """5.5 accounts per customer drawn; the securities with a non-zero net position after
    EGen's 57.6 initial trades per customer (8 hours at scale factor 500): about 33
    LAST_TRADE reads per transaction, where a full basket of 10 per account gives 55."""
    runs = _reads(TpceSpec(history_pct=0.0))
    acc = np.mean([_count(r, ACCOUNT) for r in runs])
    lt = np.mean([_count(r, LAST_TRADE) for r in runs])
    assert abs(acc - 5.5) < 0.15, acc
    assert 30 < lt < 36, lt
    fixed = _reads(TpceSpec(history_pct=0.0, holdings_per_account=10), 500)
    assert all(_count(r, LAST_TRADE) == 10 * _count(r, ACCOUNT) for r in fixed)


def test_history_branch_reads_local_trade_rows_half_the_time():
    """EGen's get_history 50%: up to 10 trades of one account, each with its 2 or 3
    TRADE_HISTORY rows plus the next row the scan reads before it stops; all local."""
    runs = _reads(TpceSpec())
    hist = [_count(r, HISTORY) for r in runs]
    share = sum(1 for h in hist if h) / len(hist)
    assert 0.42 < share < 0.55, share
    assert max(hist) <= HISTORY_TRADES * 5
    for r in runs:
        assert all(k[0] == 1 for t, k in r if t in (HISTORY, ACCOUNT))
    assert not any(_count(r, HISTORY) for r in _reads(TpceSpec(history_pct=0.0), 300))


class _OrderTx:
    """Records the body's steps in order: ("cpu", ns) and ("read", table) per record."""

    def __init__(self) -> None:
        self.steps: list = []

    def read_many(self, items, for_update=False):
        self.steps.extend(("read", it[0]) for it in items)
        return [b""] * len(items)
        yield  # pragma: no cover

    def compute(self, ns):
        self.steps.append(("cpu", ns))
        return ns


def test_row_cpu_is_spent_between_the_gets_as_txn_cp_new_runs():
    """txn_cp_new gets every LAST_TRADE row synchronously right after the holding-summary
    step that names it, so each remote read follows that row's CPU (``per_row``), and no
    CPU is left for one burst after the last read; the total is logic + per_row x (the
    customer, 2 per account, every security, every history row)."""
    sp = TpceSpec(logic=1000.0, per_row=700.0)
    wl = CustomerPosition(sp, 4, 2, 2.5e9)
    rng = np.random.default_rng(11)
    for _ in range(200):
        tx = _OrderTx()
        for _ in wl.next_txn(rng, 1, 1, 0).body(tx):
            pass
        steps = tx.steps
        lt = [i for i, s in enumerate(steps) if s == ("read", LAST_TRADE)]
        assert all(steps[i - 1] == ("cpu", 700.0) for i in lt), steps
        assert steps[-1][0] == "read"
        nacc = sum(1 for s in steps if s == ("read", ACCOUNT))
        hist = sum(1 for s in steps if s == ("read", HISTORY))
        cpu = sum(ns for kind, ns in steps if kind == "cpu")
        assert cpu == 1000.0 + 700.0 * (1 + 2 * nacc + len(lt) + hist)
