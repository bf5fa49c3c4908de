"""rnicsim.hw.calendar.Calendar and rnicsim.hw.cache.LruCache, against hand-computed bookings."""
from __future__ import annotations

import random

import pytest

from rnicsim.hw.cache import LruCache, QpLru
from rnicsim.hw.qp import QpHw
from rnicsim.hw.calendar import Calendar


def intervals(c: Calendar) -> list[tuple[float, float]]:
    return list(zip(c.starts, c.ends))


# --------------------------------------------------------------------------- reserve
def test_empty_calendar_books_at_the_ready_time():
    """On an idle pipe a request starts when it is ready."""
    c = Calendar()
    assert c.busy_until == 0.0
    assert c.reserve(100.0, 10.0) == 100.0
    assert intervals(c) == [(100.0, 110.0)] and c.busy_until == 110.0


def test_requests_in_time_order_are_served_fifo_back_to_back():
    """Requests arriving in time order while busy start when the previous one ends."""
    c = Calendar()
    starts = [c.reserve(t, 10.0) for t in (0.0, 1.0, 2.0, 35.0, 36.0)]
    assert starts == [0.0, 10.0, 20.0, 35.0, 45.0]
    assert intervals(c) == [(0.0, 30.0), (35.0, 55.0)]   # touching bookings merge
    assert c.busy_ns == 50.0


def test_an_early_request_fills_a_gap_before_a_later_booking():
    """A request ready before a later booking goes into the gap if it fits."""
    c = Calendar()
    c.reserve(100.0, 10.0)
    assert c.reserve(20.0, 30.0) == 20.0            # [20, 50) fits before 100
    assert c.reserve(40.0, 60.0) == 110.0           # [50, 100) is 50 long: too short
    assert c.reserve(40.0, 50.0) == 50.0            # exactly fills [50, 100)
    assert intervals(c) == [(20.0, 170.0)]
    assert c.busy_ns == 150.0


def test_a_request_never_starts_before_it_is_ready():
    """A request ready inside a gap starts at its ready time, not at the gap's start."""
    c = Calendar()
    c.reserve(0.0, 10.0)
    c.reserve(100.0, 10.0)
    assert c.reserve(30.0, 5.0) == 30.0
    assert intervals(c) == [(0.0, 10.0), (30.0, 35.0), (100.0, 110.0)]


def test_a_request_ready_inside_a_booking_waits_for_its_end():
    """Ready in the middle of a booking: start at its end (or the next gap that fits)."""
    c = Calendar()
    c.reserve(0.0, 50.0)
    c.reserve(60.0, 10.0)
    assert c.reserve(20.0, 10.0) == 50.0            # [50, 60) fits exactly
    assert c.reserve(20.0, 1.0) == 70.0
    assert intervals(c) == [(0.0, 71.0)]


# --------------------------------------------------------------------------- reserve_split
def test_split_on_an_idle_pipe_is_one_piece():
    """Without bookings ahead, a split reservation is one contiguous piece."""
    c = Calendar()
    assert c.reserve_split(10.0, 40.0, 8.0) == (10.0, 50.0)
    assert intervals(c) == [(10.0, 50.0)]


def test_split_fills_gaps_with_whole_chunks():
    """Pieces fill earlier gaps in whole chunks; the rest goes after the last booking."""
    c = Calendar()
    c.reserve(10.0, 5.0)            # [10, 15)
    c.reserve(27.0, 3.0)            # [27, 30)
    # 20 ns in chunks of 4: [0,8) (the 10-wide gap holds two whole chunks), [15,27)
    # (12 wide: three chunks), then the 0 left... 8 + 12 = 20.
    assert c.reserve_split(0.0, 20.0, 4.0) == (0.0, 27.0)
    assert intervals(c) == [(0.0, 8.0), (10.0, 30.0)]
    assert c.busy_ns == 28.0


def test_split_skips_gaps_smaller_than_a_chunk():
    """A gap narrower than one chunk is left alone (unless it holds the whole rest)."""
    c = Calendar()
    c.reserve(3.0, 7.0)             # [3, 10): the gap [0, 3) is narrower than a chunk
    assert c.reserve_split(0.0, 12.0, 4.0) == (10.0, 22.0)
    assert intervals(c) == [(3.0, 22.0)]


def test_split_final_piece_may_be_shorter_than_a_chunk():
    """The last piece fits in a gap shorter than a chunk when it is all that is left."""
    c = Calendar()
    c.reserve(8.0, 2.0)             # [8, 10)
    c.reserve(13.0, 7.0)            # [13, 20)
    assert c.reserve_split(0.0, 11.0, 4.0) == (0.0, 13.0)  # [0,8) two chunks, [10,13) 3
    assert intervals(c) == [(0.0, 20.0)]


# --------------------------------------------------------------------------- reserve_packet
def test_a_packet_overtakes_a_bulk_transfer_by_one_quantum_and_stretches_it():
    """Behind a 100-ns bulk booking a 5-ns packet (quantum 8) starts 8 ns after it is ready,
    not at the bulk's end; its time is added after the bulk run. A second packet queues
    behind the first (packets never overtake packets), and the bulk run grows again."""
    c = Calendar()
    assert c.reserve(0.0, 100.0) == 0.0
    assert c.reserve_packet(10.0, 5.0, 8.0) == 18.0
    assert intervals(c) == [(0.0, 105.0)] and c.busy_ns == 105.0
    assert c.reserve_packet(11.0, 5.0, 8.0) == 23.0      # not 19: the first holds [18, 23)
    assert intervals(c) == [(0.0, 110.0)] and c.busy_ns == 110.0
    assert c.reserve(50.0, 10.0) == 110.0                # later bookings see the stretch
    assert c.reserve_packet(200.0, 5.0, 8.0) == 200.0


def test_a_packet_within_a_quantum_of_a_gap_takes_the_gap():
    """When the first gap that fits starts within one quantum, the packet is booked there."""
    c = Calendar()
    c.reserve(0.0, 20.0)
    assert c.reserve_packet(15.0, 5.0, 8.0) == 20.0
    assert intervals(c) == [(0.0, 25.0)]


def test_packets_queued_behind_packets_do_not_overtake():
    """A queue of packets is served in order, however far beyond a quantum it reaches."""
    c = Calendar()
    starts = [c.reserve_packet(0.0, 10.0, 8.0) for _ in range(5)]
    assert starts == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert c.busy_ns == 50.0 and intervals(c) == [(0.0, 50.0)]


def test_a_packet_does_not_overtake_into_a_pause():
    """A blocked interval (a pause imposed from outside) holds packets as well."""
    c = Calendar()
    c.reserve(0.0, 100.0)
    c.block(10.0, 40.0)
    assert c.reserve_packet(10.0, 5.0, 8.0) == 40.0


# --------------------------------------------------------------------------- block / prune
def test_block_marks_busy_and_merges_overlaps():
    """block makes [t0, t1) busy, merged with the bookings it overlaps or touches."""
    c = Calendar()
    c.reserve(0.0, 10.0)
    c.reserve(30.0, 10.0)
    c.reserve(60.0, 10.0)
    c.block(5.0, 30.0)
    assert intervals(c) == [(0.0, 40.0), (60.0, 70.0)]
    assert c.reserve(0.0, 5.0) == 40.0              # nothing fits before 40 any more
    c.block(80.0, 80.0)                            # empty: no effect
    assert intervals(c) == [(0.0, 45.0), (60.0, 70.0)]


def test_block_on_an_idle_pipe_delays_the_next_request():
    """A pause imposed from outside delays a request that would have started in it."""
    c = Calendar()
    c.block(10.0, 20.0)
    assert c.reserve(12.0, 3.0) == 20.0
    assert c.reserve(0.0, 10.0) == 0.0


class _Env:
    def __init__(self, now: float) -> None:
        self._now = now


def test_prune_forgets_only_the_past():
    """prune drops intervals that ended before now and keeps the rest."""
    c = Calendar()
    for t in (0.0, 20.0, 40.0):
        c.reserve(t, 10.0)
    c.prune(25.0)
    assert intervals(c) == [(20.0, 30.0), (40.0, 50.0)]
    c.prune(100.0)
    assert intervals(c) == [] and c.busy_until == 0.0


def test_automatic_pruning_bounds_memory_and_keeps_answers():
    """With an environment, bookings that ended before now are eventually forgotten (the
    list stays bounded on a long run) and requests from now on are answered as before."""
    env = _Env(0.0)
    c = Calendar(env)
    for i in range(300):
        env._now = 100.0 * i
        assert c.reserve(100.0 * i + 50.0, 10.0) == 100.0 * i + 50.0
    assert len(c.starts) <= 130                      # not 300: the past was pruned
    assert c.ends[-1] == 29_960.0 and c.starts[-1] == 29_950.0
    assert c.reserve(29_900.0, 95.0) == 29_960.0     # no 95-ns gap from now on
    assert c.reserve(29_900.0, 40.0) == 29_900.0     # [29900, 29940) is free
    assert c.reserve(29_900.0, 10.0) == 29_940.0     # exactly fills up to 29950


# --------------------------------------------------------------------------- LruCache
def test_lru_cache_counts_and_evicts_least_recently_used():
    """Hits and misses are counted; the least recently used key is evicted."""
    c = LruCache(2)
    assert [c.access(k) for k in "abab"] == [False, False, True, True]
    assert c.access("c") is False                  # evicts a (b was used last)
    assert "a" not in c and "b" in c and "c" in c
    assert c.access("b") is True
    assert c.access("a") is False                  # evicts c
    assert ("c" in c, len(c)) == (False, 2)
    assert (c.hits, c.misses) == (3, 4)


def test_lru_cache_with_no_entries_always_misses():
    """A zero-entry cache never holds anything."""
    c = LruCache(0)
    assert [c.access(1) for _ in range(3)] == [False] * 3
    assert (len(c), c.hits, c.misses) == (0, 0, 3)


@pytest.mark.parametrize("entries", [1, 3])
def test_lru_cache_never_exceeds_its_size(entries):
    """Filling with many keys keeps exactly ``entries`` keys, the last ones used."""
    c = LruCache(entries)
    for k in range(10):
        c.access(k)
    assert len(c) == entries
    assert all(k in c for k in range(10 - entries, 10))


class _Nic:
    pu_busy = [0.0]


def test_qp_lru_follows_lru_cache_access_for_access():
    """The QP-context cache (a recency list through the QPs) gives the same hit or miss
    as LruCache on the qpns for 3,000 random accesses of 12 QPs, for sizes 1, 2 and 5,
    and holds the same QPs, least recently used first."""
    qps = [QpHw(_Nic(), n, "RC", None, None) for n in range(12)]
    rng = random.Random(3)
    for entries in (1, 2, 5):
        ref, lru = LruCache(entries), QpLru(entries)
        seq = [rng.randrange(12) if rng.random() < 0.5 else rng.randrange(4)
               for _ in range(3000)]
        assert [lru.access(qps[k]) for k in seq] == [ref.access(k) for k in seq]
        held, qp = [], lru.head
        while qp is not None:
            held.append(qp.qpn)
            qp = qp.lru_next
        assert held == list(ref._d) and len(lru) == len(ref) == entries
        assert (lru.hits, lru.misses) == (ref.hits, ref.misses)
        assert sorted(q.qpn for q in qps if q.lru_in) == sorted(held)
        for q in qps:       # the next size starts with no QP cached
            q.lru_in, q.lru_prev, q.lru_next = False, None, None


def test_qp_lru_with_no_entries_always_misses():
    """A zero-entry QP-context cache never holds a QP."""
    c = QpLru(0)
    qp = QpHw(_Nic(), 7, "RC", None, None)
    assert [c.access(qp) for _ in range(3)] == [False] * 3
    assert (len(c), c.hits, c.misses, qp.lru_in) == (0, 0, 3, False)
