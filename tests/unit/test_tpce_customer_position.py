"""TPC-E Customer-Position as DrTM+H ran it: EGen's accounts per customer and the
history branch (workloads/tpce.py)."""
from __future__ import annotations

import numpy as np

from workloads.tpce import (ACCOUNT, HISTORY, HISTORY_TRADES, LAST_TRADE, CustomerPosition,
                            TpceSpec, accounts_of)


def test_accounts_per_customer_follow_egen_tiers():
    """Per load unit of 1,000 customers: 200 of tier 1 with 1-4 accounts, 600 of tier 2
    with 2-8, 200 of tier 3 with 5-10 (EGen CustomerAccountsAndPermissionsTable.h);
    5.0 accounts on average, not the 5.5 of a uniform 1-10."""
    n = [accounts_of(c) for c in range(1000)]
    assert set(n[:200]) == {1, 2, 3, 4}
    assert set(n[200:800]) == set(range(2, 9))
    assert set(n[800:]) == set(range(5, 11))
    assert abs(sum(n) / 1000 - 5.0) < 0.02
    assert [accounts_of(c) for c in range(1000, 2000)] == n


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


def _reads(spec: TpceSpec, n: int = 4000, nodes: int = 4):
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


def test_history_branch_reads_local_trade_rows_half_the_time():
    """EGen's get_history 50%: up to 10 trades of one account, each with its 2 or 3
    TRADE_HISTORY rows plus the next row the scan reads before it stops; all local."""
    runs = _reads(TpceSpec())
    hist = [sum(1 for t, _ in r if t == HISTORY) for r in runs]
    share = sum(1 for h in hist if h) / len(hist)
    assert 0.45 < share < 0.55, share
    assert max(hist) <= HISTORY_TRADES * 5
    assert min(h for h in hist if h) >= 4
    for r in runs:
        assert all(k[0] == 1 for t, k in r if t in (HISTORY, ACCOUNT))
    assert not any(h for h in (sum(1 for t, _ in r if t == HISTORY)
                               for r in _reads(TpceSpec(history_pct=0.0), 500)))


def test_remote_reads_are_last_trade_rows_of_held_securities():
    """Holdings per account x accounts distinct LAST_TRADE rows (10 x 5.0 on average)."""
    runs = _reads(TpceSpec(history_pct=0.0), 2000)
    lt = [sum(1 for t, _ in r if t == LAST_TRADE) for r in runs]
    acc = [sum(1 for t, _ in r if t == ACCOUNT) for r in runs]
    assert all(a * 10 == n for a, n in zip(acc, lt))
    assert abs(np.mean(acc) - 5.0) < 0.15
