"""Calendar: a shared pipe (PCIe direction, link direction) booked ahead of time.

Hardware components reserve a pipe at the time their data will be ready, which is often
later than the event computing it (a DMA completes in 500 ns, a PU has a backlog). A single
``busy_until`` would make an early request queue behind a later one booked first and
leave the pipe idle in between. The calendar instead keeps the busy intervals and puts a
request into the first gap at or after its ready time that is long enough; requests that
arrive in time order are served exactly FIFO.

Packets (TLPs) interleave with bulk transfers: a single packet booked with a finite
quantum (:meth:`Calendar.reserve_packet`) waits at most one quantum behind a long transfer
booked as one interval, but never overtakes another packet. The packets' own intervals
are kept in a second list (the packet lane) for that; an overtaking packet's time is added
where it runs and, as far as that was already booked, at the end of that busy run (the
transfer it overtook is stretched: later bookings see it, its arrival already computed
does not move). So the pipe never carries more than its rate over a busy run.

Invariants: intervals are sorted, disjoint and non-adjacent (touching ones are merged);
the union of the intervals is exactly the booked time (``busy_ns``, blocks aside); every
packet-lane interval lies inside the main intervals; intervals that ended before the
current time are pruned and never needed again, because no reservation starts in the past.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from types import SimpleNamespace

try:
    import cython
except ImportError:     # pure Python without Cython installed: ``cython.compiled`` False
    # (set through globals(): Cython reserves the name ``cython`` in compiled code)
    globals()["cython"] = SimpleNamespace(compiled=False)

_INF = float("inf")


class Doubles:
    """A growable array of floats [ns]: ``v[0:n]`` are the items. In the compiled build
    ``v`` is a C array of doubles (calendar.pxd), searched and compared without a Python
    float object per item; in pure Python it is a list. The calendar reads ``v[i]`` and
    changes the array only through these methods, so both builds hold the same values."""

    __slots__ = ("v", "n", "cap")

    def __init__(self) -> None:
        self.n = 0
        self.cap = 0
        if cython.compiled:
            self.v = cython.NULL
        else:
            self.v = []

    def __dealloc__(self) -> None:
        if cython.compiled:
            PyMem_Free(self.v)

    def _room(self, n: int) -> None:
        """Capacity for ``n`` items (compiled build)."""
        if n > self.cap:
            cap = 2 * self.cap if 2 * self.cap >= n else n + 8
            p = PyMem_Realloc(self.v, cap * cython.sizeof(cython.double))
            if p == cython.NULL:
                raise MemoryError()
            self.v = cython.cast(cython.p_double, p)
            self.cap = cap

    def append(self, x: float) -> None:
        """Add ``x`` at the end."""
        if cython.compiled:
            self._room(self.n + 1)
            self.v[self.n] = x
        else:
            self.v.append(x)
        self.n += 1

    def insert(self, i: int, x: float) -> None:
        """Put ``x`` before item ``i``."""
        if cython.compiled:
            self._room(self.n + 1)
            memmove(cython.address(self.v[i + 1]), cython.address(self.v[i]),
                    (self.n - i) * cython.sizeof(cython.double))
            self.v[i] = x
        else:
            self.v.insert(i, x)
        self.n += 1

    def delete(self, i: int, j: int) -> None:
        """Remove items ``i`` to ``j - 1``."""
        if cython.compiled:
            memmove(cython.address(self.v[i]), cython.address(self.v[j]),
                    (self.n - j) * cython.sizeof(cython.double))
        else:
            del self.v[i:j]
        self.n -= j - i

    def tail(self, i: int) -> "Doubles":
        """A new array of items ``i`` to the end."""
        out = Doubles()
        if cython.compiled:
            out._room(self.n - i)
            memcpy(out.v, cython.address(self.v[i]), (self.n - i) * cython.sizeof(cython.double))
        else:
            out.v = self.v[i:]
        out.n = self.n - i
        return out

    def tolist(self) -> list:
        """The items as a list of floats."""
        if cython.compiled:
            out = [self.v[k] for k in range(self.n)]
        else:
            out = list(self.v)
        return out


def doubles(items) -> Doubles:
    """A :class:`Doubles` holding ``items`` (floats) in their order."""
    out = Doubles()
    for x in items:
        out.append(x)
    return out


def _after(a: Doubles, x: float) -> int:
    """``bisect_right(a, x)``: the index of the first item of ``a`` (ascending) above
    ``x``, searched on C doubles in the compiled build (calendar.pxd; Python's bisect
    compares float objects). Pure Python uses bisect_right itself (below)."""
    lo = 0
    hi = a.n
    while lo < hi:
        mid = (lo + hi) >> 1
        x_mid = a.v[mid]
        if x < x_mid:
            hi = mid
        else:
            lo = mid + 1
    return lo


if not cython.compiled:
    def _after(a: Doubles, x: float) -> int:  # noqa: F811
        return bisect_right(a.v, x)


def _first_fit(starts: Doubles, ends: Doubles, t: float, dur: float) -> float:
    """The earliest start >= ``t`` where ``dur`` overlaps none of the intervals."""
    n = ends.n
    if n == 0 or t >= ends.v[n - 1]:
        return t
    i = _after(ends, t)
    cand = t
    end = t + dur
    while i < n and starts.v[i] < end:
        e = ends.v[i]
        if e > cand:
            cand = e
            end = e + dur
        i += 1
    return cand


def _before(a: Doubles, x: float) -> int:
    """``bisect_left(a, x)``: the index of the first item of ``a`` (ascending) at or above
    ``x`` (on C doubles in the compiled build, as :func:`_after`)."""
    lo = 0
    hi = a.n
    while lo < hi:
        mid = (lo + hi) >> 1
        x_mid = a.v[mid]
        if x_mid < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


if not cython.compiled:
    def _before(a: Doubles, x: float) -> int:  # noqa: F811
        return bisect_left(a.v, x)


def _insert(starts: Doubles, ends: Doubles, a: float, b: float) -> float:
    """Add ``[a, b)`` to sorted, disjoint, non-adjacent intervals, merging what it overlaps
    or touches; return the time it newly covers [ns]."""
    i = _before(ends, a)        # the first interval ending at or after a
    n = starts.n
    if i == n or starts.v[i] > b:
        starts.insert(i, a)
        ends.insert(i, b)
        return b - a
    j = i
    lo, hi = a, b
    covered = 0.0
    while j < n and starts.v[j] <= b:
        s, e = starts.v[j], ends.v[j]
        if s < lo:
            lo = s
        if e > hi:
            hi = e
        ov = (e if e < b else b) - (s if s > a else a)
        if ov > 0.0:
            covered += ov
        j += 1
    # [i, j) becomes the one interval [lo, hi) (j > i: starts[i] <= b above)
    starts.v[i] = lo
    ends.v[i] = hi
    starts.delete(i + 1, j)
    ends.delete(i + 1, j)
    return (b - a) - covered


def _remove(starts: Doubles, ends: Doubles, a: float, b: float) -> float:
    """Take ``[a, b)`` out of the intervals; return the time that was covered [ns]."""
    i = _after(ends, a)
    removed = 0.0
    while i < starts.n and starts.v[i] < b:
        s, e = starts.v[i], ends.v[i]
        removed += (e if e < b else b) - (s if s > a else a)
        if s < a and e > b:          # split in two
            ends.v[i] = a
            starts.insert(i + 1, b)
            ends.insert(i + 1, e)
            break
        if s < a:
            ends.v[i] = a
            i += 1
        elif e > b:
            starts.v[i] = b
            break
        else:
            starts.delete(i, i + 1)
            ends.delete(i, i + 1)
    return removed


class _RoundRobin:
    """Per-flow round robin between packets that overtake a transfer and that transfer.

    With packets booked ahead in arrival order, a round cannot be laid out exactly (a
    flow's packet booked earlier cannot be moved behind one booked later), so rounds are
    counted: the overtaken transfer gets one quantum after every D overtaking packets, D
    being the number of distinct flows with a packet booked and not yet sent (each
    backlogged flow sends one packet per round, as per-QP round robin does). A quantum
    the transfer had anyway (the packets left a gap of one) starts a new round.
    """

    __slots__ = ("backlog", "count", "since", "end")

    def __init__(self) -> None:
        self.backlog: deque = deque()     # (end [ns], flow) of booked overtaking packets
        self.count: dict = {}             # flow -> its packets in the backlog
        self.since = 0                    # packets since the transfer's last quantum
        self.end = -_INF                  # end of the last overtaking packet [ns]

    def turn(self, now: float, s0: float, quantum: float, flow) -> float:
        """Start [ns] of the quantum the transfer takes before this packet, or -inf."""
        backlog, count = self.backlog, self.count
        while backlog and backlog[0][0] <= now:
            f = backlog.popleft()[1]
            n = count[f] - 1
            if n:
                count[f] = n
            else:
                del count[f]
        if self.end + quantum <= s0:
            self.since = 0                # the transfer had a quantum since
            return -_INF
        flows = len(count) + (flow not in count)
        return self.end if self.since >= flows else -_INF

    def sent(self, end: float, flow, after_turn: bool) -> None:
        """The packet of ``flow`` ending at ``end`` [ns] was booked."""
        self.since = 1 if after_turn else self.since + 1
        if end > self.end:
            self.end = end
        self.backlog.append((end, flow))
        self.count[flow] = self.count.get(flow, 0) + 1


class Calendar:
    """Busy intervals of one pipe; :meth:`reserve` books the first gap that fits."""

    __slots__ = ("_starts", "_ends", "busy_ns", "env", "_prune_at", "pstarts", "pends",
                 "lane_on", "mixed", "held", "rr")

    def __init__(self, env=None) -> None:
        # The busy intervals [_starts[k], _ends[k]) (read them as ``starts``/``ends``).
        self._starts = Doubles()
        self._ends = Doubles()
        # The packet lane: intervals of packets booked with a finite quantum (and blocks),
        # each inside a main interval; an overtaking packet may not overlap them. It is
        # kept only while something else (a bulk transfer, a debt, a block) is booked
        # ahead: when only packets are ahead, the lane would equal the main intervals
        # there and nothing can overtake, so the lane is dropped (``lane_on`` False) and
        # rebuilt from the main intervals when the next other booking comes.
        self.pstarts = Doubles()
        self.pends = Doubles()
        self.lane_on = False
        self.mixed = 0.0        # end of the last booking that is not a lane packet [ns]
        self.busy_ns = 0.0
        # Transfers whose arrival follows from their booking and that packets may
        # overtake: [start, end, item, src, ready, span, dur] (see hold); an overtaking
        # packet makes each one it pushes back later (item.late) by its own duration.
        self.held: list = []
        self.rr = None          # _RoundRobin of overtaking flows (reserve_packet's flow)
        self.env = env          # the SimPy environment, for pruning (optional)
        # Prune when the interval list grows past this (never without an environment).
        self._prune_at = 64 if env is not None else _INF

    @property
    def starts(self) -> list:
        """Starts of the busy intervals [ns], ascending (a copy; setting it replaces
        them, for tests and tools that lay out bookings)."""
        return self._starts.tolist()

    @starts.setter
    def starts(self, items) -> None:
        self._starts = doubles(items)

    @property
    def ends(self) -> list:
        """Ends of the busy intervals [ns], ascending (a copy; settable as ``starts``)."""
        return self._ends.tolist()

    @ends.setter
    def ends(self, items) -> None:
        self._ends = doubles(items)

    @property
    def busy_until(self) -> float:
        """End of the last booked interval (0 when idle)."""
        n = self._ends.n
        return self._ends.v[n - 1] if n else 0.0

    def reserve(self, t: float, dur: float) -> float:
        """Book ``dur`` [ns] starting no earlier than ``t`` in the first gap that fits;
        return the start time."""
        return self.reserve_packet(t, dur, _INF)

    def start_if_booked(self, t: float, dur: float) -> float:
        """Where :meth:`reserve` would start ``dur`` from ``t`` (books nothing)."""
        return _first_fit(self._starts, self._ends, t, dur)

    def reserve_packet(self, t: float, dur: float, quantum: float, src=None,
                       flow=None) -> float:
        """Book one packet that may slip between the packets of bulk transfers; return its
        start [ns].

        A switch port or PCIe link interleaves packets of different transfers, so a packet
        never waits more than one ``quantum`` (one MTU packet / one TLP) behind a long
        transfer booked as a single interval. When the first gap that fits is further away
        than that, the packet starts at the first time from ``t + quantum`` on that no
        other packet holds (packets keep their order among themselves) and, if that is
        before the gap, runs there: its time is added to the busy intervals where it runs
        and, for the part that was booked already, at the end of that busy run (the bulk
        transfer is stretched by a packet for later bookings; arrivals already computed
        stay valid). With an infinite ``quantum`` this is :meth:`reserve` and the packet
        lane is not used (the one implementation of booking). ``src``: where the packet
        came from (the upstream pipe), for held transfers (:meth:`hold`). ``flow`` (any
        hashable, e.g. the sending QP): overtaking packets and the transfer they overtake
        share the pipe round robin (:class:`_RoundRobin`); without it packets go first.
        """
        ends = self._ends
        n = ends.n
        if n > self._prune_at:
            # Keep memory bounded on long runs (the list only needs the future).
            # _prune_at is infinite without an environment: nothing is ever pruned then.
            self.prune(self.env._now)
            n = ends.n
            self._prune_at = max(64, 2 * n)
        lane = quantum != _INF
        if lane:
            if self.lane_on and self.env is not None and self.mixed <= self.env._now:
                # Only packets are booked ahead now: drop the lane (see __init__).
                self.lane_on = False
                self.pstarts = Doubles()
                self.pends = Doubles()
            lane = self.lane_on
        elif not self.lane_on:
            self._lane_start()
        if n == 0 or t >= ends.v[n - 1]:
            # Fast path: after everything booked so far.
            self.busy_ns += dur
            if n and t == ends.v[n - 1]:
                ends.v[n - 1] = t + dur
            else:
                self._starts.append(t)
                ends.append(t + dur)
            if lane:
                pends = self.pends
                if pends.n and t == pends.v[pends.n - 1]:
                    pends.v[pends.n - 1] = t + dur
                else:
                    self.pstarts.append(t)
                    pends.append(t + dur)
            elif quantum == _INF and t + dur > self.mixed:
                self.mixed = t + dur
            return t
        # The first fit and the insertion are written out here rather than calling
        # _first_fit and _insert: nearly every booking of a busy link or PCIe direction
        # comes here (out of time order), and the two calls cost the fig. 5a benchmark
        # (benchmarks/engine.py) a fifth of its speed.
        starts = self._starts
        i = _after(ends, t)
        cand = t
        end = t + dur           # always cand + dur
        while i < n and starts.v[i] < end:
            e = ends.v[i]
            if e > cand:
                cand = e
                end = e + dur
            i += 1
        self.busy_ns += dur
        if lane and cand > t + quantum:
            s0 = t + quantum
            rr = None
            turn = -_INF
            if flow is not None:
                rr = self.rr
                if rr is None:
                    rr = self.rr = _RoundRobin()
                turn = rr.turn(self.env._now if self.env is not None else -_INF, s0, quantum,
                               flow)
                if turn + quantum > s0:
                    s0 = turn + quantum
            elif src is not None and self.held:
                # A switch port is first come, first served: the packet goes after the
                # bytes of held transfers that reached the port before it.
                q = self._queued(t)
                if q > quantum:
                    s0 = t + q
            s = _first_fit(self.pstarts, self.pends, s0, dur)
            if s < cand:
                if rr is not None:
                    if turn > -_INF:
                        # The overtaken transfer's packet of this round: a lane slot for it.
                        _insert(self.pstarts, self.pends, turn, turn + quantum)
                    rr.sent(s + dur, flow, turn > -_INF)
                # Overtake: run at s, inside a busy run; what of [s, s + dur) was booked
                # already is booked again after that run.
                debt = dur - _insert(starts, ends, s, s + dur)
                if debt > 0.0:
                    d0 = _first_fit(starts, ends, s, debt)
                    _insert(starts, ends, d0, d0 + debt)
                    if d0 + debt > self.mixed:
                        self.mixed = d0 + debt
                _insert(self.pstarts, self.pends, s, s + dur)
                if self.held:
                    # Everything booked from s to where the debt went now runs dur later.
                    self._push_back(s, d0 + debt if debt > 0.0 else s + dur, dur, src)
                return s
        # Insert [cand, end) before index i, merging with touching neighbours.
        if i > 0 and ends.v[i - 1] >= cand:
            ends.v[i - 1] = end
            if i < n and starts.v[i] <= end:
                ends.v[i - 1] = ends.v[i]
                starts.delete(i, i + 1)
                ends.delete(i, i + 1)
        elif i < n and starts.v[i] <= end:
            starts.v[i] = cand
        else:
            starts.insert(i, cand)
            ends.insert(i, end)
        if lane:
            _insert(self.pstarts, self.pends, cand, end)
        elif quantum == _INF and end > self.mixed:
            self.mixed = end
        return cand

    def hold(self, start: float, end: float, item, src=None, ready=None, span: float = 0.0,
             dur: float = 0.0) -> None:
        """Track a transfer booked over ``[start, end)`` (not as a packet) whose arrival the
        caller has computed from that booking: packets that later overtake it push it
        back, and each adds its duration [ns] to ``item.late`` (a float attribute the
        caller reads when the transfer arrives). ``src``: the pipe it came from; a packet
        from the same pipe that overtakes it here overtook it there already (it fills
        the hole it made upstream), so it does not make it later twice. ``ready``: when
        its first byte reached this pipe, its bytes arriving evenly over ``span`` [ns]
        (a multi-packet message at a switch port; None elsewhere), ``dur`` its wire time
        here [ns]: a packet arriving later queues behind what of it has arrived and not
        left (:meth:`_queued`)."""
        held = self.held
        if len(held) >= 32 and self.env is not None:
            # Bounded on long runs: transfers that ended before now are never pushed back.
            now = self.env._now
            held = self.held = [r for r in held if r[1] > now]
        held.append([start, end, item, src, ready, span, dur])

    def _queued(self, t: float) -> float:
        """Wire time [ns] of the bytes of held transfers that reached this pipe before
        ``t`` and leave it after ``t``: arrivals even over each one's span from its ready
        time, departures even over its (stretched) booking."""
        q = 0.0
        for r in self.held:
            a = r[4]
            if a is None or a >= t or r[1] <= t:
                continue
            d, span, s, e = r[6], r[5], r[0], r[1]
            got = d if span <= 0.0 or t - a >= span else d * (t - a) / span
            gone = 0.0 if t <= s else d * (t - s) / (e - s)
            if got > gone:
                q += got - gone
        return q

    def _push_back(self, s: float, e: float, dur: float, src) -> None:
        """A packet of ``dur`` [ns] from ``src`` ran at ``s`` inside a busy run; what was
        booked in ``[s, e)`` runs ``dur`` later: held transfers overlapping it are ``dur``
        late, unless they came from ``src`` too (see :meth:`hold`). Transfers that ended
        before now are forgotten (nothing can overtake them)."""
        now = self.env._now if self.env is not None else -_INF
        keep = []
        for r in self.held:
            if r[1] <= now:
                continue
            if r[1] > s and r[0] < e:
                r[1] += dur
                if src is None or r[3] is not src:
                    r[2].late += dur
            keep.append(r)
        self.held = keep

    def _lane_start(self) -> None:
        """Start the packet lane before a booking that is not a packet: only packets are
        booked ahead, so the lane is the main intervals from now on."""
        self.lane_on = True
        if self.env is not None:
            i = _after(self._ends, self.env._now)
            self.pstarts = self._starts.tail(i)
            self.pends = self._ends.tail(i)
        else:
            self.pstarts = self._starts.tail(0)
            self.pends = self._ends.tail(0)

    def reserve_split(self, t: float, dur: float, chunk: float) -> tuple[float, float]:
        """Book ``dur`` [ns] from ``t`` on, split over gaps of at least ``chunk`` [ns].

        For transfers made of packets or TLPs that may interleave with others: the pieces
        fill the earliest gaps. Returns (start of the first piece, end of the last one).
        """
        ends = self._ends
        if not ends.n or t >= ends.v[ends.n - 1] or dur <= chunk:
            s0 = self.reserve(t, dur)
            return s0, s0 + dur
        if ends.n > self._prune_at:
            self.prune(self.env._now)
            self._prune_at = max(64, 2 * ends.n)
        if not self.lane_on:
            self._lane_start()
        starts = self._starts
        self.busy_ns += dur
        i = _after(ends, t)
        cand = t
        left = dur
        first = None
        pieces = []
        n = starts.n
        while left > 0:
            if i < n:
                gap = starts.v[i] - cand
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
                cand = ends.v[i] if ends.v[i] > cand else cand
                i += 1
            else:
                pieces.append((cand, cand + left))
                if first is None:
                    first = cand
                left = 0
        busy = self.busy_ns
        for a, b in pieces:
            _insert(starts, ends, a, b)
        self.busy_ns = busy
        end = pieces[-1][1]
        if end > self.mixed:
            self.mixed = end
        return first, end

    def book_piece(self, a: float, b: float) -> None:
        """Add ``[a, b)``, a free gap of the main intervals, as a piece of a transfer that
        is not a packet (packets may overtake it)."""
        if not self.lane_on:
            self._lane_start()
        _insert(self._starts, self._ends, a, b)
        if b > self.mixed:
            self.mixed = b

    def book_packet(self, a: float, b: float) -> None:
        """Add the packet ``[a, b)``, already in a free gap, to the main intervals and the
        packet lane (for callers that find the gap themselves, e.g. around PFC pauses)."""
        _insert(self._starts, self._ends, a, b)
        if self.lane_on:
            _insert(self.pstarts, self.pends, a, b)

    def block(self, t0: float, t1: float) -> None:
        """Mark ``[t0, t1)`` busy whatever was booked (a pause imposed from outside)."""
        if t1 <= t0:
            return
        if not self.lane_on:
            self._lane_start()
        # Only the time that was not booked already becomes busy. Packets may not overtake
        # into a pause either.
        self.busy_ns += _insert(self._starts, self._ends, t0, t1)
        _insert(self.pstarts, self.pends, t0, t1)
        if t1 > self.mixed:
            self.mixed = t1

    def free(self, a: float, b: float) -> None:
        """Free ``[a, b)`` (the unsent part of a transfer that was paused)."""
        if b > a:
            self.busy_ns -= _remove(self._starts, self._ends, a, b)
            if self.lane_on:
                _remove(self.pstarts, self.pends, a, b)

    def prune(self, now: float) -> None:
        """Forget intervals that ended before ``now``."""
        i = _after(self._ends, now)
        if i:
            self._starts.delete(0, i)
            self._ends.delete(0, i)
        i = _after(self.pends, now)
        if i:
            self.pstarts.delete(0, i)
            self.pends.delete(0, i)
        if self.held:
            self.held = [r for r in self.held if r[1] > now]
