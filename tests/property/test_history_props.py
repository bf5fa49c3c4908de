"""Property tests of the serializability history checker (protocols/txn/history.py).

A tiny reference key-value model executes transactions one at a time and assigns the
versions, so its histories are serializable by construction. Anomalies are injected into
such histories, and small arbitrary histories are compared against a brute-force search
over every serial order.
"""
from __future__ import annotations

from itertools import permutations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.txn.history import History, format_key

KEY_POOL = ["x", "y", 7, ("acct", 3), ("acct", "hot", 0), "z"]

fast = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

ops_strategy = st.lists(st.tuples(st.sampled_from("rw"), st.integers(0, len(KEY_POOL) - 1)),
                        max_size=6)


class SerialModel:
    """A key-value store that runs one transaction at a time and counts versions."""

    def __init__(self, keys: list) -> None:
        self.version = {k: 0 for k in keys}
        self.txns: list[tuple] = []   # (id, reads, writes), in execution order
        self.aborted: list = []

    def run(self, txn_id, ops, keys, commit=True) -> None:
        """Execute ``ops`` (("r"|"w", key index)) serially; a txn reads its own writes."""
        local: dict = {}
        reads, writes = [], []
        for op, ki in ops:
            k = keys[ki % len(keys)]
            if op == "r":
                reads.append((k, local.get(k, self.version[k])))
            else:  # every write installs a version; several per key are allowed
                local[k] = local.get(k, self.version[k]) + 1
                writes.append((k, local[k]))
        if commit:
            self.version.update(local)
            self.txns.append((txn_id, reads, writes))
        else:
            self.aborted.append(txn_id)

    def history(self, order=None) -> History:
        h = History()
        for txn_id, reads, writes in (self.txns if order is None else order):
            h.commit(txn_id, reads, writes)
        for txn_id in self.aborted:
            h.abort(txn_id)
        return h


@st.composite
def serial_runs(draw, max_txns=25):
    """A SerialModel after running random transactions (some aborted) serially."""
    keys = KEY_POOL[:draw(st.integers(1, len(KEY_POOL)))]
    model = SerialModel(keys)
    id_style = draw(st.sampled_from(["int", "str"]))
    for t in range(draw(st.integers(0, max_txns))):
        txn_id = t if id_style == "int" else f"c{t % 3}-{t}"
        model.run(txn_id, draw(ops_strategy), keys, commit=draw(st.integers(0, 9)) > 0)
    return model


def shuffled_reload(h: History, data) -> History:
    lines = list(h.jsonl_lines())
    return History.from_lines(data.draw(st.permutations(lines)), "shuffled.jsonl")


def verdict(h: History):
    """What must not depend on line order: the verdict, a structural kind, the counts."""
    r = h.check()
    kind = r.kind if r.kind in ("serializable", "lost-update", "aborted-read",
                                "intermediate-read", "gap") else "cycle"
    return (r.serializable, kind, r.problem_counts, r.txns, r.aborted, r.keys, r.reads,
            r.writes, r.ww, r.wr, r.rw)


@fast
@given(serial_runs())
def test_serial_execution_is_serializable(model):
    """Any history produced by executing transactions serially is serializable."""
    r = model.history().check()
    assert r.serializable, r.render()
    assert r.txns == len(model.txns) and r.aborted == len(model.aborted)


@fast
@given(serial_runs(), st.data())
def test_line_order_does_not_change_a_serial_verdict(model, data):
    """Shuffling the lines of a serial history keeps it serializable with equal counts."""
    h = model.history()
    assert verdict(shuffled_reload(h, data)) == verdict(h)


@st.composite
def lost_updates(draw):
    """A serial run into which two transactions both read key k at v and install v+1."""
    model = draw(serial_runs(max_txns=12))
    keys = list(model.version)
    k = draw(st.sampled_from(keys))
    v = model.version[k]
    # Ta then Tb run their other operations serially, but both read k@v and install
    # k@v+1: the store keeps one of the two writes.
    for txn_id in ("lost-a", "lost-b"):
        ops = [op for op in draw(ops_strategy) if keys[op[1] % len(keys)] != k]
        model.run(txn_id, ops, keys)
        _, reads, writes = model.txns[-1]
        model.txns[-1] = (txn_id, [(k, v), *reads], [(k, v + 1), *writes])
    model.version[k] = v + 1
    for t in range(draw(st.integers(0, 8))):
        model.run(f"after-{t}", draw(ops_strategy), keys)
    return model, k


@fast
@given(lost_updates(), st.data())
def test_generated_lost_update_is_always_caught(case, data):
    """Two transactions reading the same version and both installing the next one."""
    model, k = case
    order = data.draw(st.permutations(model.txns))
    r = model.history(order).check()
    assert not r.serializable
    assert r.kind == "lost-update"
    first, second = sorted(["lost-a", "lost-b"], key=[t[0] for t in order].index)
    assert f"{first} and {second} both installed {format_key(k)} version" in r.anomaly


@fast
@given(serial_runs(max_txns=12), st.data())
def test_lost_update_with_counted_versions_is_a_cycle_through_both(model, data):
    """Both read k@v; Ta installs v+1 and Tb v+2: the cycle uses Tb's anti-dependency."""
    keys = list(model.version)
    k = data.draw(st.sampled_from(keys))
    v = model.version[k]
    model.txns.append(("ta", [(k, v)], [(k, v + 1)]))
    model.txns.append(("tb", [(k, v)], [(k, v + 2)]))
    model.version[k] = v + 2
    for t in range(data.draw(st.integers(0, 6))):
        model.run(f"after-{t}", data.draw(ops_strategy), keys)
    r = model.history(data.draw(st.permutations(model.txns))).check()
    assert not r.serializable and r.kind in ("G-single", "G2-item")
    assert ("tb", "ta", "rw", k) in r.cycle


# -- arbitrary small histories against a brute-force oracle -----------------------------

SMALL_KEYS = ["x", "y"]


@st.composite
def small_histories(draw):
    """Up to 5 transactions with arbitrary versions of two keys."""
    txns = []
    for t in range(draw(st.integers(1, 5))):
        reads = draw(st.lists(st.tuples(st.sampled_from(SMALL_KEYS), st.integers(0, 3)),
                              max_size=3))
        writes = draw(st.lists(st.tuples(st.sampled_from(SMALL_KEYS), st.integers(1, 3)),
                               max_size=3, unique=True))
        txns.append((t, reads, writes))
    return txns


def serial_order_exists(txns) -> bool:
    """Whether some serial order reproduces every installed version and every read."""

    def explains(order) -> bool:
        state = dict.fromkeys(SMALL_KEYS, 0)
        for _, reads, writes in order:
            mine: dict = {}
            for k, v in writes:
                mine.setdefault(k, []).append(v)
            for k, vs in mine.items():  # own installs continue the key's count
                if sorted(vs) != list(range(state[k] + 1, state[k] + 1 + len(vs))):
                    return False
            for k, v in reads:  # the state before the txn, or one of its own writes
                if v != state[k] and v not in mine.get(k, ()):
                    return False
            for k, vs in mine.items():
                state[k] += len(vs)
        return True

    return any(explains(order) for order in permutations(txns))


@settings(max_examples=400, deadline=None)
@given(small_histories())
def test_verdict_matches_brute_force_search_over_serial_orders(txns):
    """The checker says serializable exactly when some serial order explains the history."""
    h = History()
    for txn_id, reads, writes in txns:
        h.commit(txn_id, reads, writes)
    r = h.check()
    assert r.serializable == serial_order_exists(txns), r.render()
    if not r.serializable and r.cycle:  # a reported cycle is closed and uses real txns
        assert [e.to_txn for e in r.cycle] == [e.from_txn for e in r.cycle[1:]] + \
            [r.cycle[0].from_txn]


@fast
@given(small_histories(), st.data())
def test_line_order_does_not_change_an_arbitrary_verdict(txns, data):
    """Shuffling lines keeps the verdict, the structural kind and the counts."""
    h = History()
    for txn_id, reads, writes in txns:
        h.commit(txn_id, reads, writes)
    assert verdict(shuffled_reload(h, data)) == verdict(h)
