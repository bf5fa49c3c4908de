"""SmallBank: six banking transactions over savings and checking accounts.

Covers
    The standard mix (FaSST ``sb_defs.h`` and DrTM+H ``config.xml``): SendPayment 25 %,
    DepositChecking, Balance, TransactSaving, WriteCheck, Amalgamate 15 % each. Balances
    are 8-byte integers of cents; amounts as in DrTM+H (5.00, 1.30, 20.20, 5.00).

Scenario
    ``accounts_per_thread`` x threads x nodes accounts (DrTM+H: 100,000 per thread),
    placed by hashing the id (account ``a`` on node ``a mod N``), so with N nodes a
    transaction's records are remote with probability (N - 1) / N (no locality, as seed
    000 sec. 5 says). Skew as "4 % of records are accessed by 90 % of transactions": each
    transaction draws its accounts from the hot set (the lowest ``hot_fraction`` of ids)
    with probability ``hot_probability``, else from all accounts (FaSST's reading of
    ``TX_HOT``; DrTM+H's code reads the knob the other way, PROTOCOL-FACTS 2.1).
    Two-account transactions draw two distinct accounts from the same range.

    Coordinator CPU per phase: DrTM+H Table 3 (E 678, V 185, L 134, C 87 cycles)
    at the host clock.

Conservation: every transaction sets ``tx.delta`` to the money it adds (deposits,
TransactSaving) or removes (WriteCheck); the sum of all balances changes by exactly the
committed deltas (a property test checks it).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from protocols.txn.api import TxnSpec
from protocols.txn.registry import register_benchmark
from protocols.txn.store import Table

SAVINGS, CHECKING = 0, 1
INITIAL = 10_000_00          # cents in every account at start (stored as 0)
MIX = (("send_payment", 25), ("deposit_checking", 15), ("balance", 15),
       ("transact_saving", 15), ("write_check", 15), ("amalgamate", 15))
TABLE3_CYCLES = (678, 185, 134, 87)   # DrTM+H Table 3, SmallBank: E, V, L, C
_I64 = struct.Struct("<q")
# The records each transaction touches, (table, key, for_update), as its body reads them.
_KEYS = {
    "send_payment": lambda a, b: ((CHECKING, a, True), (CHECKING, b, True)),
    "deposit_checking": lambda a, b: ((CHECKING, a, True),),
    "balance": lambda a, b: ((CHECKING, a, False), (SAVINGS, a, False)),
    "transact_saving": lambda a, b: ((SAVINGS, a, True),),
    "write_check": lambda a, b: ((SAVINGS, a, False), (CHECKING, a, True)),
    "amalgamate": lambda a, b: ((SAVINGS, a, True), (CHECKING, a, True), (CHECKING, b, True)),
}


def enc(balance: int) -> bytes:
    """Stored bytes of a balance [cents]."""
    return _I64.pack(balance - INITIAL)


def dec(raw: bytes) -> int:
    """Balance [cents] of stored bytes."""
    return _I64.unpack(raw)[0] + INITIAL


@dataclass(frozen=True)
class SmallBankSpec:
    """Size and skew; ``mix`` as (name, percent) pairs."""

    accounts_per_thread: int = 100_000
    hot_fraction: float = 0.04
    hot_probability: float = 0.9
    mix: tuple = MIX


class SmallBank:
    """The workload object the transaction framework asks for transactions."""

    def __init__(self, spec: SmallBankSpec, nodes: int, threads: int, clock_hz: float) -> None:
        self.spec = spec
        self.nodes = nodes
        self.accounts = max(2, spec.accounts_per_thread * threads * nodes)
        self.hot = max(2, int(self.accounts * spec.hot_fraction))
        per_node = -(-self.accounts // nodes)
        place = self.place
        self.tables = [Table(SAVINGS, "savings", 8, per_node, place),
                       Table(CHECKING, "checking", 8, per_node, place)]
        self.phase_ns = tuple(c / clock_hz * 1e9 for c in TABLE3_CYCLES)
        names = [m[0] for m in spec.mix]
        w = [m[1] for m in spec.mix]
        tot = float(sum(w))
        self._names = names
        self._cum = []
        acc = 0.0
        for x in w:
            acc += x / tot
            self._cum.append(acc)
        self._bodies = {n: getattr(self, "_" + n) for n in names}

    def place(self, key: int) -> tuple[int, int]:
        """(node, slot) of account ``key``."""
        return key % self.nodes, key // self.nodes

    def cpu_estimate_ns(self) -> float:
        """CPU of one transaction on its coordinator [ns], for sizing run windows."""
        return sum(self.phase_ns) + 2_000.0

    # ------------------------------------------------------------------ drawing
    def _range(self, rng) -> int:
        return self.hot if rng.random() < self.spec.hot_probability else self.accounts

    def next_txn(self, rng, node: int, thread: int, co: int) -> TxnSpec:
        """The next transaction of a coroutine."""
        u = rng.random()
        i = 0
        while i < len(self._cum) - 1 and u >= self._cum[i]:
            i += 1
        name = self._names[i]
        hi = self._range(rng)
        a = int(rng.integers(0, hi))
        b = a
        if name in ("send_payment", "amalgamate"):
            while b == a:
                b = int(rng.integers(0, hi))
        body = self._bodies[name]
        return TxnSpec(name, lambda tx: body(tx, a, b), name == "balance", self.phase_ns,
                       _KEYS[name](a, b))

    # ------------------------------------------------------------------ transactions
    @staticmethod
    def _send_payment(tx, a, b):
        ca, cb = yield from tx.read_many([(CHECKING, a), (CHECKING, b)], True)
        x, y = dec(ca), dec(cb)
        if x >= 500:
            x, y = x - 500, y + 500
        tx.write(CHECKING, a, enc(x))
        tx.write(CHECKING, b, enc(y))

    @staticmethod
    def _deposit_checking(tx, a, b):
        c = yield from tx.read(CHECKING, a, True)
        tx.write(CHECKING, a, enc(dec(c) + 130))
        tx.delta = 130

    @staticmethod
    def _balance(tx, a, b):
        yield from tx.read_many([(CHECKING, a), (SAVINGS, a)])
        # RCC's bodies load_read each record read after their accesses
        yield from tx.load_read(CHECKING, a)
        yield from tx.load_read(SAVINGS, a)

    @staticmethod
    def _transact_saving(tx, a, b):
        s = yield from tx.read(SAVINGS, a, True)
        tx.write(SAVINGS, a, enc(dec(s) + 2020))
        tx.delta = 2020

    @staticmethod
    def _write_check(tx, a, b):
        s, c = yield from tx.read_many([(SAVINGS, a, False), (CHECKING, a, True)])
        yield from tx.load_read(SAVINGS, a)
        amount = 500 if dec(s) + dec(c) >= 500 else 600
        tx.write(CHECKING, a, enc(dec(c) - amount))
        tx.delta = -amount

    @staticmethod
    def _amalgamate(tx, a, b):
        sa, ca, cb = yield from tx.read_many([(SAVINGS, a), (CHECKING, a), (CHECKING, b)],
                                             True)
        total = dec(sa) + dec(ca)
        tx.write(SAVINGS, a, enc(0))
        tx.write(CHECKING, a, enc(0))
        tx.write(CHECKING, b, enc(dec(cb) + total))

    # ------------------------------------------------------------------ checks
    def total_balance(self, store) -> int:
        """Sum of every balance [cents] (reads every record: small runs only)."""
        tot = 0
        for a in range(self.accounts):
            n, s = self.place(a)
            tot += dec(store.value_local(n, SAVINGS, s)) + dec(store.value_local(n, CHECKING, s))
        return tot

    def initial_total(self) -> int:
        """Sum of every balance at start [cents]."""
        return 2 * INITIAL * self.accounts


def _make(params: dict, nodes: int, threads: int, clock_hz: float, coroutines: int):
    return SmallBank(SmallBankSpec(**params), nodes, threads, clock_hz)


register_benchmark("smallbank", _make)
