"""Calendar: a shared pipe (PCIe direction, link direction) booked ahead of time.

Hardware components reserve a pipe at the time their data will be ready, which is often
later than the event computing it (a DMA completes in 500 ns, a PU has a backlog). A single
``busy_until`` would make an early request queue behind a later one booked first and
leave the pipe idle in between. The calendar instead keeps the busy intervals and puts a
request into the first gap at or after its ready time that is long enough; requests that
arrive in time order are served exactly FIFO.

Invariants: intervals are sorted, disjoint and non-adjacent (touching ones are merged);
intervals that ended before the current time are pruned and never needed again, because
no reservation starts in the past.
"""
from __future__ import annotations

from bisect import bisect_right

_INF = float("inf")


class Calendar:
    """Busy intervals of one pipe; :meth:`reserve` books the first gap that fits."""

    __slots__ = ("starts", "ends", "busy_ns", "env", "_prune_at")

    def __init__(self, env=None) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.busy_ns = 0.0
        self.env = env          # the SimPy environment, for pruning (optional)
        # Prune when the interval list grows past this (never without an environment).
        self._prune_at = 64 if env is not None else _INF

    @property
    def busy_until(self) -> float:
        """End of the last booked interval (0 when idle)."""
        return self.ends[-1] if self.ends else 0.0

    def reserve(self, t: float, dur: float) -> float:
        """Book ``dur`` [ns] starting no earlier than ``t`` in the first gap that fits;
        return the start time."""
        return self.reserve_packet(t, dur, _INF)

    def start_if_booked(self, t: float, dur: float) -> float:
        """Where :meth:`reserve` would start ``dur`` from ``t`` (books nothing)."""
        starts, ends = self.starts, self.ends
        n = len(ends)
        if n == 0 or t >= ends[-1]:
            return t
        i = bisect_right(ends, t)
        cand = t
        while i < n and starts[i] < cand + dur:
            if ends[i] > cand:
                cand = ends[i]
            i += 1
        return cand

    def reserve_packet(self, t: float, dur: float, quantum: float) -> float:
        """Book one small packet that may slip between the packets of bulk transfers.

        A switch port or PCIe link interleaves packets of different transfers, so a packet
        never waits more than one ``quantum`` (one MTU packet / one TLP) behind a long
        transfer booked as a single interval. When the first gap is further away than that,
        the packet starts one quantum after ``t`` and its time is counted as busy but not
        booked: the bulk transfer is stretched by a packet, which this calendar does not
        move (already scheduled arrivals stay valid); the overlap is at most one packet.
        With an infinite ``quantum`` this is :meth:`reserve` (the one implementation of
        booking, in one frame for the hot callers).
        """
        ends = self.ends
        n = len(ends)
        if n > self._prune_at:
            # Keep memory bounded on long runs (the list only needs the future).
            # _prune_at is infinite without an environment: nothing is ever pruned then.
            self.prune(self.env._now)
            n = len(ends)
            self._prune_at = max(64, 2 * n)
        if n == 0 or t >= ends[-1]:
            # Fast path: after everything booked so far.
            self.busy_ns += dur
            if n and t == ends[-1]:
                ends[-1] = t + dur
            else:
                self.starts.append(t)
                ends.append(t + dur)
            return t
        starts = self.starts
        i = bisect_right(ends, t)
        cand = t
        end = t + dur           # always cand + dur
        while i < n and starts[i] < end:
            e = ends[i]
            if e > cand:
                cand = e
                end = e + dur
            i += 1
        if cand > t + quantum:
            # Too far: the packet slips in one quantum after t (see above), unbooked.
            self.busy_ns += dur
            return t + quantum
        self.busy_ns += dur
        # Insert [cand, end) before index i, merging with touching neighbours.
        if i > 0 and ends[i - 1] >= cand:
            ends[i - 1] = end
            if i < n and starts[i] <= end:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
        elif i < n and starts[i] <= end:
            starts[i] = cand
        else:
            starts.insert(i, cand)
            ends.insert(i, end)
        return cand

    def reserve_split(self, t: float, dur: float, chunk: float) -> tuple[float, float]:
        """Book ``dur`` [ns] from ``t`` on, split over gaps of at least ``chunk`` [ns].

        For transfers made of packets or TLPs that may interleave with others: the pieces
        fill the earliest gaps. Returns (start of the first piece, end of the last one).
        """
        ends = self.ends
        if not ends or t >= ends[-1] or dur <= chunk:
            s0 = self.reserve(t, dur)
            return s0, s0 + dur
        if len(ends) > self._prune_at:
            self.prune(self.env._now)
            self._prune_at = max(64, 2 * len(ends))
        starts = self.starts
        self.busy_ns += dur
        i = bisect_right(ends, t)
        cand = t
        left = dur
        first = None
        pieces = []
        n = len(starts)
        while left > 0:
            if i < n:
                gap = starts[i] - cand
                if gap >= chunk or gap >= left:
                    take = gap if gap < left else left
                    # only whole chunks, except the final piece
                    if take < left:
                        take = (take // chunk) * chunk
                    if take > 0:
                        pieces.append((cand, cand + take))
                        if first is None:
                            first = cand
                        left -= take
                        if left <= 0:
                            break
                cand = ends[i] if ends[i] > cand else cand
                i += 1
            else:
                pieces.append((cand, cand + left))
                if first is None:
                    first = cand
                left = 0
        busy = self.busy_ns
        for a, b in pieces:
            self._insert(a, b)
        self.busy_ns = busy
        return first, pieces[-1][1]

    def _insert(self, a: float, b: float) -> None:
        starts, ends = self.starts, self.ends
        i = bisect_right(ends, a)
        if i > 0 and ends[i - 1] >= a:
            ends[i - 1] = b
            if i < len(starts) and starts[i] <= b:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
        elif i < len(starts) and starts[i] <= b:
            starts[i] = a
        else:
            starts.insert(i, a)
            ends.insert(i, b)

    def block(self, t0: float, t1: float) -> None:
        """Mark ``[t0, t1)`` busy whatever was booked (a pause imposed from outside)."""
        if t1 <= t0:
            return
        starts, ends = self.starts, self.ends
        # Intervals [i, j) overlap or touch [t0, t1]; replace them by their union.
        i = bisect_right(ends, t0)
        if i > 0 and ends[i - 1] >= t0:
            i -= 1
        j = i
        lo, hi = t0, t1
        while j < len(starts) and starts[j] <= hi:
            if starts[j] < lo:
                lo = starts[j]
            if ends[j] > hi:
                hi = ends[j]
            j += 1
        # Only the time that was not booked already becomes busy.
        self.busy_ns += (hi - lo) - sum(e - b for b, e in zip(starts[i:j], ends[i:j]))
        starts[i:j] = [lo]
        ends[i:j] = [hi]

    def prune(self, now: float) -> None:
        """Forget intervals that ended before ``now``."""
        i = bisect_right(self.ends, now)
        if i:
            del self.starts[:i], self.ends[:i]
