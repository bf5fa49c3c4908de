"""TPC-E Customer-Position: a distributed read-only transaction (seed 000 sec. 5.5).

Covers
    DrTM+H ``tpce_worker_new.cc`` (``TpceWorker::txn_cp_new``): read the customer, its
    accounts and their holding summaries (local), then the LAST_TRADE row of every
    security held, which lives on the machine owning the security's company
    (``companyToPartition``): the only remote reads. Accounts per customer follow
    TPC-E's EGen, which DrTM+H's loader and input generator use
    (``CustomerAccountsAndPermissionsTable.h``, ``GetNumberOfAccounts``): by position in
    its load unit of 1,000 customers a customer is tier 1 (first 200: 1-4 accounts),
    tier 2 (next 600: 2-8) or tier 3 (last 200: 5-10), cycling through the range, 5.0
    on average. History: with ``history_pct`` (EGen's ``CP_settings`` default
    ``get_history`` 50, which DrTM+H keeps) the transaction also reads, locally, up to
    10 TRADE rows of one of the accounts and, per trade, its TRADE_HISTORY rows (EGen's
    ``CTradeGen::GenerateTradeHistoryRow``: 2 for market trades, 3 for limit and
    stop-loss ones, 40% of initial trades by ``GenerateTradeType``) plus one more: the
    code reads the row its iterator stands on before checking that it belongs to the
    trade, so each trade's scan also reads the next trade's first row. The trades in an
    account: EGen generates ``hours x 3600 x 1000 / scale_factor`` initial trades per
    load unit (``CTradeGen``, ``m_iTotalTrades``), with DrTM+H's ``tradeDays`` 1 (8 h)
    and ``scaleFactor`` 500 (``tpce_main.cc``) 57.6 per customer; they are taken as
    spread evenly over its accounts (Poisson count; how ``GenerateRandomAccountSecurity``
    picks the account was not read). These rows are mapped onto a small pool of local
    rows per thread (read-only and never written, so only their number matters: each
    costs a local read and a local validation). Not modelled: the tax-id lookup of half
    the inputs (a local secondary-index seek, CPU only).

Scenario
    ``customers_per_thread`` customers per thread, local to the coordinator;
    ``securities_per_node`` securities per machine, each account holding
    ``holdings_per_account`` distinct securities drawn uniformly over all machines'
    (10 by default: TPC-E's EGen draws an account's securities uniformly within
    tier- and account-count-dependent ranges, ``iMin/iMaxSecuritiesPerAccountRange`` in
    ``HoldingsAndTradesTable.h``, every one of which averages 10; the per-account spread
    is not modelled).
    The remote reads are independent and go out together. CPU: ``logic`` + ``per_row`` x
    rows read [ns] (seed 000 gives no per-phase costs for TPC-E; assumed).
"""
from __future__ import annotations

from dataclasses import dataclass

from protocols.txn.occ import TxnSpec
from protocols.txn.store import Table

CUSTOMER, ACCOUNT, LAST_TRADE, HISTORY = 0, 1, 2, 3
MAX_ACCOUNTS = 10
HISTORY_TRADES = 10         # tpce_worker_new.cc: the history scan stops at 10 trades
HISTORY_POOL = 64           # local history rows per thread (>= 10 x (1 + 3 + 1))
LIMIT_TRADE_PCT = 40        # EGen CTradeGen::GenerateTradeType: limit buy/sell, stop-loss


def accounts_of(cust: int) -> int:
    """Accounts of customer ``cust`` by EGen's rule (see module doc)."""
    c = cust % 1000
    if c < 200:
        return 1 + c % 4
    if c < 800:
        return 2 + (c - 200 + 1) % 7
    return 5 + (c - 800 + 1) % 6


@dataclass(frozen=True)
class TpceSpec:
    """Scale and CPU of the logic [ns]."""

    customers_per_thread: int = 1000
    securities_per_node: int = 685
    holdings_per_account: int = 10
    history_pct: float = 50.0
    trades_per_customer: float = 57.6
    logic: float = 1000.0
    per_row: float = 100.0


class CustomerPosition:
    """The Customer-Position workload object (see module doc)."""

    def __init__(self, spec: TpceSpec, nodes: int, threads: int, clock_hz: float) -> None:
        self.spec = spec
        self.nodes = nodes
        self.threads = threads
        cpn = spec.customers_per_thread * threads
        self.cpn = cpn
        self.S = spec.securities_per_node * nodes
        self.tables = [
            Table(CUSTOMER, "customer", 128, cpn, lambda k: (k[0], k[1])),
            Table(ACCOUNT, "customer_account", 64, cpn * MAX_ACCOUNTS,
                  lambda k: (k[0], k[1] * MAX_ACCOUNTS + k[2])),
            Table(LAST_TRADE, "last_trade", 40, spec.securities_per_node,
                  lambda s: (s % nodes, s // nodes)),
            Table(HISTORY, "trade_and_history", 64, HISTORY_POOL * threads,
                  lambda k: (k[0], k[1] * HISTORY_POOL + k[2])),
        ]
        self.phase_ns = (0.0, 0.0, 0.0, 0.0)

    def cpu_estimate_ns(self) -> float:
        """CPU of one transaction on its coordinator [ns], for sizing run windows."""
        sp = self.spec
        return sp.logic + sp.per_row * (11 + 5.0 * sp.holdings_per_account
                                         + sp.history_pct / 100 * 40) + 3_000.0

    def next_txn(self, rng, node: int, thread: int, co: int) -> TxnSpec:
        """The next Customer-Position of a coroutine."""
        sp = self.spec
        cust = thread * sp.customers_per_thread + int(rng.integers(0, sp.customers_per_thread))
        nacc = accounts_of(cust)
        secs: list[int] = []
        want = min(self.S, nacc * sp.holdings_per_account)
        while len(secs) < want:
            s = int(rng.integers(0, self.S))
            if s not in secs:
                secs.append(s)
        hist = 0
        if float(rng.random()) * 100 < sp.history_pct:
            trades = min(HISTORY_TRADES, int(rng.poisson(sp.trades_per_customer / nacc)))
            for _ in range(trades):
                th = 3 if float(rng.random()) * 100 < LIMIT_TRADE_PCT else 2
                hist += 1 + th + 1
        cpu = sp.logic + sp.per_row * (1 + 2 * nacc + len(secs) + hist)

        def body(tx):
            yield from tx.read_many([(CUSTOMER, (node, cust))] +
                                    [(ACCOUNT, (node, cust, a)) for a in range(nacc)])
            yield from tx.read_many([(LAST_TRADE, s) for s in secs])
            if hist:
                yield from tx.read_many([(HISTORY, (node, thread, i)) for i in range(hist)])
            yield tx.compute(cpu)

        return TxnSpec("customer_position", body, True, self.phase_ns)
