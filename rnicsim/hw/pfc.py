"""PFC and ECN on RoCE switch ports: ingress accounting, PAUSE/resume, RED-like marking.

Scope
    Priority flow control (IEEE 802.1Qbb) modelled on switch *ingress* accounting, within
    the fabric's reservation-ahead calendars (:mod:`rnicsim.hw.link`):

        upstream dir ──data──► [ingress (dir, prio): queued bytes] ──► output port l
             ▲                         │ > XOFF: PAUSE(prio)
             └──── PAUSE / resume ─────┘ <= XON: resume

    - The bytes a switch holds for one ingress and priority are a fluid: each message adds
      its bytes linearly while it arrives (head to tail at the upstream rate) and removes
      them linearly while it leaves its output port (booked start to end); the occupancy is
      their difference, summed over the ingress's messages still in the switch.
    - When a message makes the occupancy cross ``xoff`` (at time ``tx``), the switch sends
      a PAUSE frame upstream; the upstream direction stops that priority one frame time
      plus propagation later. With the upstream stopped, the occupancy falls as the queued
      bytes leave; when it reaches ``xon`` (``tr``) the switch sends the resume frame and the
      upstream restarts one frame time plus propagation after ``tr``. The paused interval
      is booked on the upstream direction's pause calendar for that priority, so every
      later message of that priority on it (to any destination: head-of-line blocking)
      waits, while other priorities keep the wire.
    - The message that crossed XOFF is itself stopped: its bytes still to be sent when the
      pause takes effect are moved after the resume (and may pause again, up to
      ``MAX_CYCLES`` times). Bytes arriving between ``tx`` and the upstream stopping (in
      flight) fill the headroom; occupancy above ``xoff + headroom`` is counted as
      ``headroom_overflow`` (a drop on real hardware; here it only flags a bad setting).
    - ECN: an output port marks each packet whose queue ahead exceeds ``kmin`` with
      probability rising linearly to ``pmax`` at ``kmax`` (all above ``kmax``), drawn from
      the named stream ``ecn`` (:meth:`EcnConfig.marked`); the queue ahead of a message's
      packets is interpolated from its first packet's to its last's.

Simplifications (see docs/model.md)
    Messages booked on the upstream before a pause was decided keep their booking (except
    the one that triggered it); pause takes effect at once, not at the next packet
    boundary; PAUSE frames do not occupy the reverse wire; a pause decision is taken when
    a message is booked, with the departures known then.

Counters (per upstream direction and priority, :class:`PrioState`): ``pause_frames``,
``resume_frames``, ``paused_ns``, ``headroom_overflow``, ``max_occupancy`` [B]; per output
port: ``LinkDir.ecn_marks``.
"""
from __future__ import annotations

from bisect import bisect_right

import numpy as np

from .calendar import Calendar

PAUSE_FRAME_BYTES = 84     # 64-B MAC control frame + preamble/SFD 8 + IFG 12 [B]
MAX_CYCLES = 32            # pause/resume cycles computed for one message at one hop


class PfcConfig:
    """PFC thresholds of a switch (applied to its ingress ports)."""

    __slots__ = ("xoff", "xon", "headroom")

    def __init__(self, xoff: int, xon: int, headroom: int) -> None:
        if xon > xoff:
            raise ValueError("pfc_xon must not exceed pfc_xoff")
        self.xoff = xoff
        self.xon = xon
        self.headroom = headroom


class EcnConfig:
    """RED-like ECN marking of an output port; ``rng`` is a numpy Generator."""

    __slots__ = ("kmin", "kmax", "pmax", "rng")

    def __init__(self, kmin: int, kmax: int, pmax: float, rng) -> None:
        self.kmin = kmin
        self.kmax = kmax
        self.pmax = pmax
        self.rng = rng

    def marked(self, q_first: float, q_last: float, npkts: int) -> list[int]:
        """Indices (0 .. ``npkts``-1) of the packets of one message this port marks.

        Packet ``i`` sees a queue ahead of it interpolated linearly from ``q_first`` [B]
        (the first packet) to ``q_last`` [B] (the last); each is marked independently with
        probability 0 up to ``kmin``, rising linearly to ``pmax`` at ``kmax``, 1 beyond.
        Draws from ``rng`` only for packets whose probability lies strictly between 0 and 1
        (a single packet takes one draw, as it always did)."""
        kmin, kmax = self.kmin, self.kmax
        if q_first <= kmin and q_last <= kmin:
            return []
        if q_first >= kmax and q_last >= kmax:
            return list(range(npkts))
        if npkts == 1:
            q = q_first if q_first > q_last else q_last
            if q >= kmax:
                return [0]
            p = self.pmax * (q - kmin) / (kmax - kmin)
            return [0] if float(self.rng.random()) < p else []
        q = np.linspace(q_first, q_last, npkts)
        p = np.clip(self.pmax * (q - kmin) / (kmax - kmin), 0.0, self.pmax)
        p[q >= kmax] = 1.0
        return np.flatnonzero(self.rng.random(npkts) < p).tolist()


class PrioState:
    """One upstream link direction and priority: the switch ingress queue and pauses."""

    __slots__ = ("entries", "paused", "pause_frames", "resume_frames", "headroom_overflow",
                 "max_occupancy")

    def __init__(self, env=None) -> None:
        # entries: [arrival segments [(t0, t1, bytes)], depart start, depart end, bytes]
        self.entries: list = []
        self.paused = Calendar(env)      # intervals this priority may not send upstream
        self.pause_frames = 0
        self.resume_frames = 0
        self.headroom_overflow = 0
        self.max_occupancy = 0.0

    @property
    def paused_ns(self) -> float:
        """Total paused time booked so far [ns] (overlapping pauses counted once)."""
        return self.paused.busy_ns

    def paused_until(self, t: float) -> float:
        """Paused time [ns] before ``t`` (pauses are booked ahead; later parts excluded)."""
        cal = self.paused
        i = bisect_right(cal.ends, t)
        ahead = 0.0
        for s, e in zip(cal.starts[i:], cal.ends[i:]):
            ahead += e - (s if s > t else t)
        return cal.busy_ns - ahead


def _occ(entries, t: float) -> float:
    """Bytes held for the ingress at time ``t`` (arrived minus departed, per message)."""
    total = 0.0
    for segs, d0, d1, n in entries:
        arr = 0.0
        for a0, a1, b in segs:
            if t >= a1:
                arr += b
            elif t > a0:
                arr += b * (t - a0) / (a1 - a0)
        if arr <= 0.0:
            continue
        if t >= d1:
            dep = n
        elif t > d0:
            dep = n * (t - d0) / (d1 - d0)
        else:
            dep = 0.0
        if arr > dep:
            total += arr - dep
    return total


def _breakpoints(entries, lo: float, hi: float) -> list[float]:
    pts = {lo, hi}
    for segs, d0, d1, _n in entries:
        for a0, a1, _b in segs:
            if lo < a0 < hi:
                pts.add(a0)
            if lo < a1 < hi:
                pts.add(a1)
        if lo < d0 < hi:
            pts.add(d0)
        if lo < d1 < hi:
            pts.add(d1)
    return sorted(pts)


def _cross_up(entries, lo: float, hi: float, thr: float) -> float | None:
    """First time in [lo, hi] the occupancy exceeds ``thr`` (None if it never does)."""
    prev_t = lo
    prev_o = _occ(entries, lo)
    if prev_o > thr:
        return lo
    for t in _breakpoints(entries, lo, hi)[1:]:
        o = _occ(entries, t)
        if o > thr:
            return _bisect(entries, prev_t, t, thr, True)
        prev_t, prev_o = t, o
    return None


def _bisect(entries, lo: float, hi: float, thr: float, up: bool) -> float:
    """The crossing of ``thr`` in [lo, hi] (occupancy is piecewise linear with kinks where a
    message's queued bytes reach zero, so bisect rather than interpolate)."""
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        o = _occ(entries, mid)
        if (o > thr) if up else (o <= thr):
            hi = mid
        else:
            lo = mid
    return hi


def _cross_down(entries, lo: float, thr: float) -> float:
    """First time from ``lo`` on that the occupancy is at most ``thr``."""
    hi = lo
    for segs, _d0, d1, _n in entries:
        if d1 > hi:
            hi = d1
        for _a0, a1, _b in segs:
            if a1 > hi:
                hi = a1
    prev_t = lo
    prev_o = _occ(entries, lo)
    if prev_o <= thr:
        return lo
    for t in _breakpoints(entries, lo, hi)[1:]:
        o = _occ(entries, t)
        if o <= thr:
            return _bisect(entries, prev_t, t, thr, False)
        prev_t, prev_o = t, o
    return hi


def _union_after(a: Calendar, b: Calendar, t: float) -> tuple[list, list]:
    """Busy intervals of ``a`` or ``b`` ending after ``t``, merged and sorted."""
    iv = []
    for cal in (a, b):
        i = bisect_right(cal.ends, t)
        iv.extend(zip(cal.starts[i:], cal.ends[i:]))
    iv.sort()
    starts: list = []
    ends: list = []
    for s, e in iv:
        if ends and s <= ends[-1]:
            if e > ends[-1]:
                ends[-1] = e
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def reserve_avoiding(cal: Calendar, pause: Calendar, t: float, dur: float,
                     chunk: float = 0.0) -> tuple[float, float]:
    """Book ``dur`` on the wire ``cal`` from ``t`` on, outside the ``pause`` intervals.

    With ``chunk`` > 0 the transfer may be split over gaps of at least ``chunk`` (packets);
    otherwise it needs one gap. Returns (start of the first piece, end of the last one).
    """
    starts, ends = _union_after(cal, pause, t)
    pieces = []
    cand = t
    left = dur
    i = 0
    n = len(starts)
    while i < n and ends[i] <= cand:
        i += 1
    while left > 0:
        if i < n and starts[i] <= cand:
            cand = ends[i]
            i += 1
            continue
        gap = (starts[i] - cand) if i < n else float("inf")
        if chunk > 0 and dur > chunk:
            if gap >= left:
                pieces.append((cand, cand + left))
                left = 0
            elif gap >= chunk:
                take = (gap // chunk) * chunk
                pieces.append((cand, cand + take))
                left -= take
        elif gap >= left:
            pieces.append((cand, cand + left))
            left = 0
        if left > 0:
            cand = ends[i]
            i += 1
    if len(pieces) == 1 and not (chunk > 0 and dur > chunk):
        cal.book_packet(*pieces[0])     # a single packet: others may not overtake into it
    else:
        for a, b in pieces:
            cal.book_piece(a, b)
    cal.busy_ns += dur
    return pieces[0][0], pieces[-1][1]


def ingress(st: PrioState, cfg: PfcConfig, up, now: float, a0: float, a1: float,
            d0: float, d1: float, nbytes: int, contiguous: bool, sw_lat: float,
            chunk: float) -> float:
    """Account a message entering a switch from upstream direction ``up``; pause if needed.

    ``a0``/``a1``: head/tail arrival at the switch; ``d0``/``d1``: its departure from the
    output port; ``contiguous``: its booking on ``up`` is one interval at line rate (then
    the unsent part is freed when it is paused). Returns the (possibly later) tail arrival at the switch.
    """
    ents = st.entries
    if ents and now > 0:
        st.entries = ents = [e for e in ents if e[2] > now]
    segs = [(a0, a1, float(nbytes))]
    ent = [segs, d0, d1, nbytes]
    ents.append(ent)
    # Quick bound: everything not yet gone at the head's arrival fits below XOFF.
    total = 0.0
    for e in ents:
        if e[2] > a0:
            total += e[3]
    if total <= cfg.xoff:
        return a1
    prop = up.prop
    delay = PAUSE_FRAME_BYTES * up.ns_per_byte + prop
    cur = a0
    for _ in range(MAX_CYCLES):
        tail = segs[-1][1]
        tx = _cross_up(ents, cur, tail, cfg.xoff)
        if tx is None:
            break
        t_off = tx + delay            # upstream stops sending this priority
        stop_in = t_off + prop        # the last bytes sent before that have arrived
        x0, x1, b = segs[-1]
        sent_end = x1 - prop          # when this message's tail leaves upstream
        frac = 1.0
        if sent_end > t_off:
            frac = (stop_in - x0) / (x1 - x0) if x1 > x0 else 1.0
            frac = 0.0 if frac < 0 else frac
            segs[-1] = (x0, stop_in if stop_in > x0 else x0, b * frac)
        rem_ns = b * (1.0 - frac) * up.ns_per_byte
        peak = _occ(ents, stop_in)
        if peak > st.max_occupancy:
            st.max_occupancy = peak
        if peak > cfg.xoff + cfg.headroom:
            st.headroom_overflow += 1
        tr = _cross_down(ents, tx, cfg.xon)
        t_on = tr + delay
        if t_on <= t_off:
            t_on = t_off
        before = st.paused.busy_ns
        st.paused.block(t_off, t_on)
        if st.paused.busy_ns > before:
            st.pause_frames += 1
            st.resume_frames += 1
            if up.tap is not None:
                # The switch sends PAUSE at tx (it lands at t_off) and the resume at tr.
                up.tap("pfc.pause", tx, t_off, prio=next(k for k, v in up.pstate.items()
                                                         if v is st), resume=tr)
        if rem_ns <= 0:
            break
        # The paused message sends the rest of its bytes after the resume.
        if contiguous:
            up.cal.free(t_off if t_off > x0 - prop else x0 - prop, sent_end)
        r0, r1 = reserve_avoiding(up.cal, st.paused, t_on, rem_ns, chunk)
        segs.append((r0 + prop, r1 + prop, b * (1.0 - frac)))
        if r1 + prop + sw_lat > ent[2]:
            ent[2] = r1 + prop + sw_lat
        contiguous = r1 - r0 <= rem_ns * (1 + 1e-12)
        cur = r0 + prop
    return segs[-1][1]
