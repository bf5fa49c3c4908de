"""protocols.txn.api: the workload-facing Txn API, its semantics and its errors for
plain user mistakes (found by writing a workload from the documentation alone)."""
from __future__ import annotations

import struct

import pytest

from protocols.txn.bench import build, run_txn_bench
from protocols.txn.history import History
from protocols.txn.api import TxnSpec
from protocols.txn.occ import OccConfig
from protocols.txn.store import Table
from protocols.txn.systems import PRESETS, preset

_Q = struct.Struct("<q")


def _val(raw: bytes) -> int:
    return _Q.unpack(raw)[0]


class _Body:
    """Every coroutine runs ``body`` (a function of tx) over a 4-key table per node."""

    def __init__(self, nodes: int, body, read_only: bool = False, slots: int = 4) -> None:
        self.tables = [Table(0, "t", 8, slots, lambda k: (k % nodes, k // nodes))]
        self.body = body
        self.read_only = read_only

    def next_txn(self, rng, node, thread, co):
        return TxnSpec("t", self.body, self.read_only)


def _run(cx4, wl, name="drtmh", nodes=2, threads=1, coroutines=1, window=5_000.0,
         drain=True, seed=1, **over):
    hist = History()
    b = build(cx4, nodes, threads, wl, preset(name, **over), coroutines, seed=seed,
              history=hist)
    m = run_txn_bench(b, 0.0, window, drain=drain)
    return m, b, hist


def _raises(cx4, body, exc, match, **kw):
    with pytest.raises(exc, match=match):
        _run(cx4, _Body(2, body), **kw)


# ------------------------------------------------------------------ user mistakes
def test_write_to_a_record_not_read_names_it(cx4):
    """Writing a record the transaction never read is a ValueError naming table and key
    (was a bare KeyError from the record map)."""
    def body(tx):
        yield tx.compute(10)
        tx.write(0, 1, _Q.pack(1))
    _raises(cx4, body, ValueError, r"table=0, key=1\): the transaction has not read")


@pytest.mark.parametrize("key", [8, 1000, -3])
def test_key_outside_the_table_is_refused(cx4, key):
    """A key whose slot lies outside the table is a ValueError (was a silent read of
    other records' bytes: another table, a backup copy or the index)."""
    def body(tx):
        yield from tx.read(0, key)
    _raises(cx4, body, ValueError, rf"key {key} is placed at node .* expected a node in "
                                   r"\[0, 2\) and a slot in \[0, 4\)")


def test_unknown_table_is_refused(cx4):
    """A table id the workload does not have is a ValueError listing its tables."""
    def body(tx):
        yield from tx.read(7, 1)
    _raises(cx4, body, ValueError, r"table 7: no such table; the workload's tables are \[0\]")


def test_value_must_be_bytes(cx4):
    """A str value is a TypeError naming the record (was 'can't concat str to bytes')."""
    def body(tx):
        yield from tx.read(0, 1)
        tx.write(0, 1, "abcdefgh")
    _raises(cx4, body, TypeError, r"key=1\): value must be bytes, got str")


def test_body_that_is_not_a_generator_is_named(cx4):
    """A body that does not yield is a TypeError naming the transaction (was
    "'NoneType' object is not iterable")."""
    def body(tx):
        tx.compute(10)
    _raises(cx4, body, TypeError, r"transaction 't': TxnSpec.body\(tx\) must return a "
                                  r"generator")


def test_yield_instead_of_yield_from_is_explained(cx4):
    """``yield tx.read(...)`` is a TypeError saying to use ``yield from``, raised at the
    body's line (was SimPy's 'Invalid yield value' from inside its kernel)."""
    def body(tx):
        yield tx.read(0, 1)
    _raises(cx4, body, TypeError, r"yielded a generator \(Txn.read\); use 'yield from'")


@pytest.mark.parametrize("coroutines", [0, -1])
def test_coroutines_must_be_positive(cx4, coroutines):
    """Zero coroutines is a ValueError (was a run with no transaction and 0 throughput)."""
    def body(tx):
        yield from tx.read(0, 1)
    _raises(cx4, body, ValueError, r"coroutines: a positive integer", coroutines=coroutines)


def test_threads_must_be_positive(cx4):
    """Zero worker threads is a ValueError (was a run with no transaction)."""
    def body(tx):
        yield from tx.read(0, 1)
    _raises(cx4, body, ValueError, r"threads: a positive integer", threads=0)


def test_config_errors_name_the_bad_value():
    """Bad per-phase choices, unknown override fields and a negative replication factor
    are ValueErrors naming what was given and what was expected."""
    with pytest.raises(ValueError, match=r"lock: one of one_sided, two_sided, not 'rdma'"):
        OccConfig(lock="rdma")
    with pytest.raises(ValueError, match=r"unknown OccConfig field\(s\) lockk; expected"):
        preset("drtmh", lockk="one_sided")
    with pytest.raises(ValueError, match=r"rep_factor: an integer >= 0"):
        preset("drtmh", rep_factor=-1)
    with pytest.raises(ValueError, match=r"preset: one of .*, not 'drtm'"):
        preset("drtm")


# ------------------------------------------------------------------ semantics
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_transaction_reads_its_own_writes(cx4, name):
    """Reading a record after writing it returns the written value: two increments in
    one transaction add 2 (the read returned the stale committed value, adding 1)."""
    seen = []

    def body(tx):
        v = yield from tx.read(0, 1, True)
        tx.write(0, 1, _Q.pack(_val(v) + 1))
        v2 = yield from tx.read(0, 1)
        seen.append(_val(v2) - _val(v))
        tx.write(0, 1, _Q.pack(_val(v2) + 1))
    m, b, hist = _run(cx4, _Body(2, body), name)
    assert seen and set(seen) == {1}
    assert _val(b.store.value_local(1, 0, 0)) == 2 * len(hist)
    assert hist.check().serializable


class _Increment:
    """Increment one of two counters (one per node); ``for_update`` as given."""

    def __init__(self, for_update: bool, write_p: float = 1.0) -> None:
        self.tables = [Table(0, "t", 8, 1, lambda k: (k, 0))]
        self.for_update = for_update
        self.write_p = write_p

    def next_txn(self, rng, node, thread, co):
        k = int(rng.integers(0, 2))
        write = rng.random() < self.write_p

        def body(tx):
            v = yield from tx.read(0, k, self.for_update)
            if write:
                tx.write(0, k, _Q.pack(_val(v) + 1))
        return TxnSpec("inc", body)


@pytest.mark.parametrize("name", ["fasst", "hybrid-fasst"])
def test_fasst_locks_a_write_not_read_for_update(cx4, name):
    """Under FaSST's OCC (locks in execution) a record written without ``for_update``
    is locked at validation: no update is lost (it was neither locked nor validated, and
    concurrent increments overwrote each other)."""
    m, b, hist = _run(cx4, _Increment(False), name, threads=2, coroutines=4,
                      window=20_000.0, seed=3)
    assert hist.check().serializable, hist.check().render()
    assert sum(_val(b.store.value_local(n, 0, 0)) for n in range(2)) == len(hist)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_record_read_for_update_and_not_written_is_unlocked(cx4, name):
    """A record locked for update in execution (FaSST) but not written is unlocked when
    the transaction commits (it stayed locked for ever: every later transaction on it
    aborted, and a drained run never ended)."""
    m, b, hist = _run(cx4, _Increment(True, write_p=0.5), name, threads=2, coroutines=4,
                      window=20_000.0, drain=False, seed=3)
    b.cc.stop()
    b.sim.run(until=b.sim.now + 500_000.0)
    assert [b.store.header_local(n, 0, 0)[0] for n in range(2)] == [0, 0]
    assert hist.check().serializable
    assert sum(_val(b.store.value_local(n, 0, 0)) for n in range(2)) == \
        sum(1 for _, _, w in hist.transactions() if w)


class _LocalSkew:
    """Two records on node 0: writers move 1 from one to the other; read-only
    transactions read them one at a time with CPU work in between."""

    def __init__(self) -> None:
        self.tables = [Table(0, "t", 8, 2, lambda k: (0, k))]

    def next_txn(self, rng, node, thread, co):
        if rng.random() < 0.5:
            def audit(tx):
                yield from tx.read(0, 0)
                yield tx.compute(500)
                yield from tx.read(0, 1)
            return TxnSpec("audit", audit, True)

        def move(tx):
            a, b = yield from tx.read_many([(0, 0, True), (0, 1, True)])
            tx.write(0, 0, _Q.pack(_val(a) - 1))
            tx.write(0, 1, _Q.pack(_val(b) + 1))
        return TxnSpec("move", move)


@pytest.mark.parametrize("name", ["drtmh", "fasst"])
def test_read_only_with_several_local_reads_is_validated(cx4, name):
    """A read-only transaction that reads local records in two steps validates them: it
    was committed unvalidated and saw one record before a transfer and one after (read
    skew, G-single)."""
    m, b, hist = _run(cx4, _LocalSkew(), name, nodes=1, threads=2, coroutines=4,
                      window=30_000.0)
    res = hist.check()
    assert res.serializable, res.render()
    assert sum(1 for t in hist.transactions() if not t[2]) > 5   # audits committed
