"""Laws of the Calendar pipe (reserve, reserve_split, block, pruning) and of LruCache.

Times are whole numbers of ns here so the reference models compare exactly; one test uses
arbitrary floats for the laws that must hold up to rounding.
"""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rnicsim.hw.cache import LruCache
from rnicsim.hw.calendar import Calendar

ticks = st.integers(min_value=0, max_value=200).map(float)
durs = st.integers(min_value=1, max_value=40).map(float)
chunks = st.integers(min_value=1, max_value=12).map(float)

reserve_op = st.tuples(st.just("reserve"), ticks, durs)
split_op = st.tuples(st.just("split"), ticks, durs, chunks)
block_op = st.tuples(st.just("block"), ticks, durs)


def union(c: Calendar) -> list[tuple[float, float]]:
    return list(zip(c.starts, c.ends))


def length(ivs) -> float:
    return sum(b - a for a, b in ivs)


def check_invariants(c: Calendar) -> None:
    """Intervals are sorted, non-empty, disjoint and non-adjacent."""
    assert len(c.starts) == len(c.ends)
    for i, (a, b) in enumerate(union(c)):
        assert a < b
        if i:
            assert c.ends[i - 1] < a, union(c)


def covered(ivs, x: float) -> bool:
    return any(a <= x < b for a, b in ivs)


def first_fit(ivs, t: float, d: float) -> float:
    """Reference: the earliest start >= t whose [start, start + d) overlaps no interval."""
    for cand in sorted({t} | {b for _a, b in ivs if b >= t}):
        if all(cand + d <= a or cand >= b for a, b in ivs):
            return cand
    raise AssertionError("unreachable: after the last interval everything is free")


def clone(c: Calendar) -> Calendar:
    d = Calendar()
    d.starts, d.ends, d.busy_ns = list(c.starts), list(c.ends), c.busy_ns
    return d


# --------------------------------------------------------------------------- reserve
@given(st.lists(reserve_op, min_size=1, max_size=30))
def test_reserve_is_first_fit_and_conserves_booked_time(ops):
    """reserve books the earliest gap at or after the ready time that fits; bookings never
    overlap and the busy time equals the sum of durations."""
    c = Calendar()
    booked: list[tuple[float, float]] = []
    total = 0.0
    for _k, t, d in ops:
        expected = first_fit(union(c), t, d)
        s = c.reserve(t, d)
        assert s >= t
        assert s == expected
        assert all(s + d <= a or s >= b for a, b in booked)     # no overlap
        booked.append((s, s + d))
        total += d
        check_invariants(c)
        assert length(union(c)) == total == c.busy_ns
        assert c.busy_until == max(b for _a, b in booked)


@given(st.lists(st.tuples(st.integers(0, 50).map(float), durs), min_size=1, max_size=30))
def test_requests_in_time_order_are_fifo_back_to_back(reqs):
    """Requests arriving in time order start at max(ready, end of the previous one)."""
    c = Calendar()
    t = 0.0
    prev_end = 0.0
    for dt, d in reqs:
        t += dt
        s = c.reserve(t, d)
        assert s == max(t, prev_end)
        prev_end = s + d


@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False),
                          st.floats(1e-3, 1e4, allow_nan=False)), min_size=1, max_size=30))
def test_reserve_laws_hold_for_arbitrary_floats(reqs):
    """With float times: never before ready, no overlaps, booked time conserved."""
    c = Calendar()
    booked = []
    for t, d in reqs:
        s = c.reserve(t, d)
        assert s >= t
        booked.append((s, s + d))
    booked.sort()
    for (a0, b0), (a1, _b1) in zip(booked, booked[1:]):
        assert a1 >= b0 - 1e-9 * max(1.0, b0)
    ulps = 4e-16 * c.busy_until * (len(reqs) + 1)    # (t + d) - t rounds at t's scale
    assert length(union(c)) == pytest.approx(sum(d for _t, d in reqs), rel=1e-9, abs=ulps)


@given(st.lists(st.tuples(st.sampled_from(["packet", "reserve", "split"]), ticks, durs,
                          st.integers(0, 60).map(float)), min_size=1, max_size=40))
def test_reserve_packet_overtakes_bulk_by_one_quantum_but_never_a_packet(ops):
    """A packet whose first fit starts within one quantum of its ready time books exactly
    what reserve would. Otherwise it starts at the first time from ready + quantum that no
    packet holds, if that is earlier than the first fit. Packets never overlap each other,
    every request starts no earlier than it is ready, and the busy intervals cover exactly
    the booked time (a pipe never carries more than its rate)."""
    c = Calendar()
    packets: list[tuple[float, float]] = []
    total = 0.0
    for kind, t, d, q in ops:
        fit = first_fit(union(c), t, d)
        if kind == "reserve":
            assert c.reserve(t, d) == fit
        elif kind == "split":
            assert c.reserve_split(t, d, max(1.0, q / 8))[0] >= t
        else:
            expected = fit if fit <= t + q else min(fit, first_fit(packets, t + q, d))
            s = c.reserve_packet(t, d, q)
            assert s == expected >= t
            assert all(s + d <= a or s >= b for a, b in packets)
            packets.append((s, s + d))
        total += d
        check_invariants(c)
        assert length(union(c)) == total == c.busy_ns
        ivs = union(c)
        for a, b in packets:            # every packet lies inside the busy intervals
            assert any(x <= a and b <= y for x, y in ivs)


@given(st.lists(st.tuples(st.integers(0, 50).map(float), durs), min_size=1, max_size=30),
       st.integers(0, 60).map(float))
def test_packets_in_time_order_are_fifo_whatever_the_quantum(reqs, q):
    """Packets alone, ready in time order, are served back to back: however long the
    queue, none overtakes another (an incast of small packets is held to the line rate)."""
    c = Calendar()
    t = 0.0
    prev_end = 0.0
    for dt, d in reqs:
        t += dt
        s = c.reserve_packet(t, d, q)
        assert s == max(t, prev_end)
        prev_end = s + d


# --------------------------------------------------------------------------- reserve_split
@given(st.lists(st.one_of(reserve_op, split_op), min_size=1, max_size=30))
def test_split_never_overlaps_and_never_ends_later_than_contiguous(ops):
    """reserve_split starts no earlier than ready, covers exactly its duration in gaps
    (booked time conserved, so no piece overlaps a booking) and finishes no later than a
    contiguous booking of the same request would."""
    c = Calendar()
    total = 0.0
    for op in ops:
        if op[0] == "reserve":
            _k, t, d = op
            c.reserve(t, d)
        else:
            _k, t, d, ch = op
            contiguous = clone(c).reserve(t, d) + d
            before = union(c)
            first, end = c.reserve_split(t, d, ch)
            assert first >= t
            assert end - first >= d
            assert end <= contiguous
            after = union(c)
            for a, b in before:                    # old bookings are still there
                assert covered(after, a) and covered(after, b - 0.5)
            assert covered(after, first) and covered(after, end - 0.5)
        total += d
        check_invariants(c)
        assert length(union(c)) == total == c.busy_ns


@given(st.lists(st.tuples(st.integers(0, 30).map(float), durs, chunks), min_size=1,
                max_size=30))
def test_split_requests_in_time_order_are_fifo(reqs):
    """Split requests arriving in time order are also served back to back, in one piece."""
    c = Calendar()
    t = 0.0
    prev_end = 0.0
    for dt, d, ch in reqs:
        t += dt
        assert c.reserve_split(t, d, ch) == (max(t, prev_end), max(t, prev_end) + d)
        prev_end = max(t, prev_end) + d


# --------------------------------------------------------------------------- block
@given(st.lists(st.one_of(reserve_op, split_op), max_size=20), ticks, durs, ticks)
def test_block_marks_busy_and_keeps_bookings(ops, t0, width, t):
    """After block(t0, t1) the whole pause is busy, earlier bookings stay busy, and a request
    ready inside the pause starts no earlier than its end."""
    c = Calendar()
    for op in ops:
        if op[0] == "reserve":
            c.reserve(op[1], op[2])
        else:
            c.reserve_split(op[1], op[2], op[3])
    before = union(c)
    t1 = t0 + width
    c.block(t0, t1)
    check_invariants(c)
    after = union(c)
    for x in range(int(t0), int(t1)):
        assert covered(after, float(x)) and covered(after, x + 0.5)
    for a, b in before:
        assert covered(after, a) and covered(after, b - 0.5)
    assert max(length(before), width) <= length(after) <= length(before) + width
    if t0 <= t < t1:
        assert c.reserve(t, 1.0) >= t1


# --------------------------------------------------------------------------- pruning
class _Env:
    _now = 0.0


# The random lists rarely hold more than 64 disjoint intervals, so they rarely prune at all.
# This example books 65 gaps-apart intervals [10k, 10k + 5) at time 0, then moves to 300:
# the next request prunes (ends <= 300 go, [300, 305) stays) and must still see the
# interval that straddles now, the gaps after it and the later bookings.
_PRUNE_EXAMPLE = [(0.0, 10.0 * k, 5.0, "reserve") for k in range(65)] + [
    (300.0, 0.0, 5.0, "reserve"), (0.0, 0.0, 12.0, "split"), (0.0, 1.0, 3.0, "packet"),
    (1.0, 0.0, 4.0, "reserve")]


@settings(max_examples=max(5, settings().max_examples // 2))
@example(reqs=_PRUNE_EXAMPLE)
@given(st.lists(st.tuples(st.integers(0, 20).map(float), st.integers(0, 300).map(float),
                          durs, st.sampled_from(["reserve", "split", "packet"])),
                min_size=70, max_size=160))
def test_pruning_never_changes_answers_for_requests_from_now_on(reqs):
    """A calendar that prunes the past (env given) answers every request made at or after
    the current time exactly like one that keeps everything."""
    env = _Env()
    pruned, full = Calendar(env), Calendar()
    now = 0.0
    for step, ahead, d, kind in reqs:
        now += step
        env._now = now
        t = now + ahead
        if kind == "split":
            assert pruned.reserve_split(t, d, 4.0) == full.reserve_split(t, d, 4.0)
        elif kind == "packet":
            assert pruned.reserve_packet(t, d, 6.0) == full.reserve_packet(t, d, 6.0)
        else:
            assert pruned.reserve(t, d) == full.reserve(t, d)
        check_invariants(pruned)
    assert pruned.busy_until == full.busy_until


# --------------------------------------------------------------------------- LruCache
@given(st.integers(min_value=0, max_value=5),
       st.lists(st.integers(min_value=0, max_value=8), max_size=60))
def test_lru_cache_matches_a_list_model(entries, keys):
    """LruCache agrees with a list kept in recency order: same hit/miss for every access,
    same contents after it; hits + misses == accesses; never more than ``entries`` keys."""
    cache = LruCache(entries)
    model: list[int] = []              # least recently used first
    hits = 0
    for n, k in enumerate(keys, 1):
        hit = k in model
        hits += hit
        if hit:
            model.remove(k)
            model.append(k)
        elif entries > 0:
            model.append(k)
            if len(model) > entries:
                model.pop(0)
        assert cache.access(k) is hit
        assert cache.hits + cache.misses == n
        assert (cache.hits, cache.misses) == (hits, n - hits)
        assert len(cache) == len(model) <= entries
        assert {x for x in range(9) if x in cache} == set(model)
