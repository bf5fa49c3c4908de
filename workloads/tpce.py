"""TPC-E Customer-Position: a distributed read-only transaction (seed 000 sec. 5.5).

Covers
    DrTM+H ``tpce_worker_new.cc``: read the customer, its accounts (1-10, uniform) and
    their holding summaries (local), then the LAST_TRADE row of every security held,
    which lives on the machine owning the security's company: the only remote reads.
    The transaction history branch (local reads) is left out.

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

CUSTOMER, ACCOUNT, LAST_TRADE = 0, 1, 2
MAX_ACCOUNTS = 10


@dataclass(frozen=True)
class TpceSpec:
    """Scale and CPU of the logic [ns]."""

    customers_per_thread: int = 1000
    securities_per_node: int = 685
    holdings_per_account: int = 10
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
        ]
        self.phase_ns = (0.0, 0.0, 0.0, 0.0)

    def cpu_estimate_ns(self) -> float:
        """CPU of one transaction on its coordinator [ns], for sizing run windows."""
        sp = self.spec
        return sp.logic + sp.per_row * (12 + 5.5 * sp.holdings_per_account) + 3_000.0

    def next_txn(self, rng, node: int, thread: int, co: int) -> TxnSpec:
        """The next Customer-Position of a coroutine."""
        sp = self.spec
        cust = thread * sp.customers_per_thread + int(rng.integers(0, sp.customers_per_thread))
        nacc = int(rng.integers(1, MAX_ACCOUNTS + 1))
        secs: list[int] = []
        want = min(self.S, nacc * sp.holdings_per_account)
        while len(secs) < want:
            s = int(rng.integers(0, self.S))
            if s not in secs:
                secs.append(s)
        cpu = sp.logic + sp.per_row * (1 + 2 * nacc + len(secs))

        def body(tx):
            yield from tx.read_many([(CUSTOMER, (node, cust))] +
                                    [(ACCOUNT, (node, cust, a)) for a in range(nacc)])
            yield from tx.read_many([(LAST_TRADE, s) for s in secs])
            yield tx.compute(cpu)

        return TxnSpec("customer_position", body, True, self.phase_ns)
