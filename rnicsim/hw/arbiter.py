"""Transmit arbiters: which of an RNIC's ready messages takes its egress wire next.

Scope
    A strategy object chosen once per NIC from ``nic.tx_arbitration`` (:data:`ARBITERS`):

    - ``message`` (:class:`PerMessageRoundRobin`, ConnectX): messages (requests,
      READ/atomic responses) wait in per-flow queues while another message is on the
      egress wire, and the wire takes them round robin between flows (a QP for its
      requests, its qpn for its responses), one whole message per turn, booking each on
      the fabric only when it starts. A segmented message keeps the wire for its QP while
      its next segment is ready as the previous one ends.
    - ``fifo`` (:class:`Fifo`): each message goes as soon as it is ready, in that order,
      booked ahead on the calendars whatever its QP.
    - ``packet`` (:class:`PerPacket`): as ``fifo`` at the NIC; the egress link itself
      interleaves the packets of different QPs (the fabric sets
      ``LinkDir.interleave``, see ``hw/calendar.py``).

    ACKs and CNPs never go through an arbiter: they go at once in every mode.

    The interface is :meth:`TxArbiter.submit` (a message is ready; the arbiter calls
    ``emit(t, *args)`` when it goes on the wire, not before ``t``), which is
    :meth:`TxArbiter.goes_now` (may it go at once? the caller then puts it on the wire
    itself, with no callback) and else :meth:`TxArbiter.wait`, both given the length of
    the message's first packet (where on the wire it fits), and
    :meth:`TxArbiter.hold_wire` / :meth:`TxArbiter.release_wire` (a segmented message
    holds the wire between its segments).

Ports
    The owning :class:`~rnicsim.hw.rnic.Rnic`: its clock (``nic.sim``) and its egress
    (``nic.fabric.egress[nic.id]``).

Params: ``nic.tx_arbitration`` (profile).
"""
from __future__ import annotations

from collections import deque
from heapq import heapify, heappop, heappush

_INF = float("inf")


class TxArbiter:
    """Interface of a transmit arbiter (see module doc)."""

    __slots__ = ()

    def submit(self, flow, eg, ready: float, prio: int, first_bytes: int, emit,
               args: tuple) -> None:
        """A message of ``flow`` with priority ``prio`` is ready at ``ready`` [ns] for the
        egress ``eg``; its first packet is ``first_bytes`` [B] on the wire. The arbiter
        calls ``emit(t, *args)`` once it commits the message, not before ``t`` [ns]."""
        if self.goes_now(flow, eg, ready, prio, first_bytes):
            emit(ready, *args)
        else:
            self.wait(flow, eg, ready, prio, first_bytes, emit, args)

    def goes_now(self, flow, eg, ready: float, prio: int, first_bytes: int) -> bool:
        """Whether a message of ``flow`` ready at ``ready`` [ns] goes on the wire at once
        (the caller then puts it there, not before ``ready``: the per-verb path needs no
        callback); if not, the caller hands it to :meth:`wait` (arguments as
        :meth:`submit`)."""
        raise NotImplementedError

    def wait(self, flow, eg, ready: float, prio: int, first_bytes: int, emit,
             args: tuple) -> None:
        """Queue a message :meth:`goes_now` refused (arguments as :meth:`submit`)."""
        raise NotImplementedError

    def hold_wire(self, seg) -> None:
        """Segmented message ``seg`` (a :class:`~rnicsim.hw.qp.Seg`) has more segments to
        send: its QP keeps the wire if the arbiter gives turns."""

    def release_wire(self, seg) -> None:
        """``seg`` has sent its last segment."""


class Fifo(TxArbiter):
    """``tx_arbitration: fifo``: every message goes when it is ready, in that order."""

    __slots__ = ()

    def goes_now(self, flow, eg, ready: float, prio: int, first_bytes: int) -> bool:
        return True

    def wait(self, flow, eg, ready: float, prio: int, first_bytes: int, emit,
             args: tuple) -> None:
        emit(ready, *args)


class PerPacket(Fifo):
    """``tx_arbitration: packet``: as :class:`Fifo` at the NIC; the egress link
    interleaves packets of different QPs (``LinkDir.interleave``, set by the fabric)."""

    __slots__ = ()


class PerMessageRoundRobin(TxArbiter):
    """``tx_arbitration: message``: per-flow queues served round robin, one whole message
    per turn (see module doc).

    State: ``txq`` flow -> deque of (ready [ns], first-packet time [ns], emit, args) of
    the messages waiting; ``ring`` the flows with any, in round-robin order;
    ``pull_at`` the time of the next pull of the wire (None: none scheduled); ``heads`` a
    heap of (ready [ns], seq, flow, head) of every waiting flow's head message (an entry
    whose head has gone is stale, dropped when it comes to the top) and ``durs`` the
    first-packet times [ns] of the heads with how many heads have each, for a pull to
    see at once that none can go; ``last``/``last_at`` the flow whose message is last on
    the wire and when it starts [ns] (a message committed ahead for a later time may go
    after one committed later for an earlier time: round robin goes by the wire's order,
    not commits'); ``hold`` the Seg whose message holds the wire.
    """

    __slots__ = ("nic", "sim", "txq", "ring", "pull_at", "heads", "durs", "seq", "last",
                 "last_at", "hold")

    def __init__(self, nic) -> None:
        self.nic = nic
        self.sim = nic.sim
        self.txq: dict = {}
        self.ring: deque = deque()
        self.pull_at = None
        self.heads: list = []
        self.durs: dict = {}
        self.seq = 0
        self.last = None
        self.last_at = -_INF
        self.hold = None

    def goes_now(self, flow, eg, ready: float, prio: int, first_bytes: int) -> bool:
        # The message goes at once when no other waits, no segmented message holds the
        # wire and the wire is free within one packet's time of ``ready``. Free here is
        # free at that instant: a gap shorter than the first packet before a message
        # booked ahead lets it through, and the fabric books it after that one. Checking
        # the fit for the decision sent many of fig. 5a's READ responses through the
        # scheduler: 5.4 instead of 3.8 events per verb and 4x the wall time
        # (benchmarks/engine.py); the scheduler's own pulls do check it (_commit_head).
        # Round robin goes by where the message starts on the wire, the first fit of its
        # first packet from that instant, as ``transmit`` books it (``_sent``, written out
        # here as this runs for every request and response): the instant would leave the
        # flow of a message booked ahead as the last sender while this one follows it on
        # the wire, and that flow would lose its turn at the next pull.
        hold = self.hold
        if self.txq or (hold is not None and hold.live):
            return False
        start = self._free_at(eg, ready, prio)
        if start - ready > eg.quantum:
            return False
        start = self._free_at(eg, start, prio, first_bytes * eg.ns_per_byte)
        if start >= self.last_at:
            self.last = flow
            self.last_at = start
        return True

    def wait(self, flow, eg, ready: float, prio: int, first_bytes: int, emit,
             args: tuple) -> None:
        self._wait_wire(flow, ready, prio, first_bytes * eg.ns_per_byte, emit, args)

    def hold_wire(self, seg) -> None:
        self.hold = seg

    def release_wire(self, seg) -> None:
        if self.hold is seg:
            self.hold = None

    # The scheduler commits a message to the wire (books it on the fabric) at most one
    # MTU packet's wire time (LinkDir.quantum) before the wire frees for it: the next
    # packet is prepared while the current one is serialised, and a message that becomes
    # ready later waits for the next turn. Within that window the order is round robin.
    def _free_at(self, eg, t: float, prio: int, dur: float = 0.0) -> float:
        """The first time from ``t`` [ns] on when the egress ``eg`` is not paused for
        ``prio`` and free for ``dur`` [ns] (a message's first packet: a shorter gap
        between messages booked ahead cannot take it)."""
        ps = eg.pstate.get(prio) if eg.pstate else None
        while True:
            t2 = eg.cal.start_if_booked(t, dur)
            if ps is not None:
                t2 = ps.paused.start_if_booked(t2, 0.0)
            if t2 == t:
                return t
            t = t2

    def _sent(self, flow, start: float) -> None:
        """``flow`` committed a message that starts on the wire at ``start`` [ns]."""
        if start >= self.last_at:
            self.last = flow
            self.last_at = start

    def _wait_wire(self, flow, ready: float, prio: int, dur: float, emit,
                   args: tuple) -> None:
        """Queue a message of ``flow`` and priority ``prio``, ready at ``ready`` [ns],
        whose first packet takes ``dur`` [ns] on the wire, for the send scheduler;
        ``emit(t, *args)`` puts it on the wire not before ``t``."""
        q = self.txq.get(flow)
        msg = (ready, dur, emit, args)
        if q is None:
            q = self.txq[flow] = deque()
            self.ring.append(flow)
            q.append(msg)
            self._head_in(flow, msg)
        else:
            q.append(msg)
        eg = self.nic.fabric.egress[self.nic.id]
        self._pull(prio, self._free_at(eg, ready, prio, dur) - eg.quantum)

    def _head_in(self, flow, msg: tuple) -> None:
        """``msg`` became the head message of ``flow`` (see ``heads``)."""
        self.seq += 1
        heads = self.heads
        heappush(heads, (msg[0], self.seq, flow, msg))
        d = self.durs
        d[msg[1]] = d.get(msg[1], 0) + 1
        txq = self.txq
        if len(heads) > 4 * len(txq) + 64:
            # Stale entries only leave from the top: keep memory bounded on long runs.
            heads[:] = [e for e in heads if e[2] in txq and txq[e[2]][0] is e[3]]
            heapify(heads)

    def _pull(self, prio: int, at: float) -> None:
        """Have the scheduler run at ``at`` [ns] (the earliest pull wins)."""
        now = self.sim.env._now
        if at < now:
            at = now
        if self.pull_at is None or at < self.pull_at:
            self.pull_at = at
            self.sim.call_at(at, self._on_pull, prio)

    def _on_pull(self, prio: int) -> None:
        """Commit waiting messages, taking the QPs round robin (a QP whose head message is
        not ready by the time the wire frees loses its turn; the QP that sent last goes
        after the others), while the wire frees within one packet's time."""
        now = self.sim.env._now
        if self.pull_at != now:
            return                  # superseded by an earlier pull
        self.pull_at = None
        eg = self.nic.fabric.egress[self.nic.id]
        w = eg.quantum
        ring, txq = self.ring, self.txq
        while txq:
            free = self._free_at(eg, now, prio)
            if free - now > w + 1e-6:     # (a pull at free - w rounds either way)
                self._pull(prio, free - w)
                return
            hold = self.hold
            if hold is not None:
                # A segmented message keeps the wire while its next segment is ready as
                # the previous one ends; held back by its limiter, it loses it.
                flow = hold.flow
                if flow in txq:
                    if self._commit_head(flow, eg, prio, free, now, False, None) is None:
                        continue
                elif hold.live and hold.prep_at <= now + 1e-6:
                    # Its next segment is prepared at this very time (an event not run
                    # yet; its time may differ from now in the last bits): pull again
                    # right after it.
                    self.pull_at = None
                    self._pull(prio, hold.prep_at)
                    return
                self.hold = None
            # Round robin from the ring's front (flows that joined go to its back); the
            # flow that sent last goes after every other, even one skipped in front of it.
            last = self.last
            first = _INF
            # Until a message is committed the wire's bookings do not change, so where a
            # first packet of a given length fits is the same for every flow of the pass:
            # its time on the wire [ns] -> that fit. (Computing it per flow was a third of
            # the wall time of fig. 5a's READ points, ~170 flows waiting per pull.)
            fits: dict = {}
            # No flow can go when every head is ready only after the wire has room for the
            # longest first packet among them (the fit only grows with the length): the
            # scan below would find none, leave the ring as it was and come back at the
            # earliest head. Done here without the scan (fig. 5a READ responses: ~110
            # flows waiting, most pulls find none ready).
            heads = self.heads
            # Drop stale entries from the top; it ends: every waiting flow (txq is not
            # empty here) has its current head in the heap.
            while True:
                _, _, fl, hd = heads[0]
                q = txq.get(fl)
                if q is not None and q[0] is hd:
                    break
                heappop(heads)
            dmax = max(self.durs)
            if dmax <= 0.0:
                fmax = free
            else:
                fmax = fits[dmax] = self._free_at(eg, free, prio, dmax)
            if heads[0][0] > fmax:
                if len(ring) > 1 and last in txq:
                    ring.rotate(-(ring.index(last) + 1))
                self._pull(prio, heads[0][0])
                return
            # The scan: the first flow in ring order whose head can go is committed, and
            # the ring turns to just after it. The not-ready test of _commit_head is
            # written out here (most flows of a busy NIC are not ready: ~78 per pull on
            # fig. 5a's READ points, where the call alone was a fifth of the wall time);
            # the ring is not turned flow by flow but once, so after a pass that commits
            # nothing (a whole turn) it is as it was.
            n = len(ring)
            wq = w + 1e-6
            i = 0
            for flow in ring:
                i += 1
                if flow == last and n > 1:
                    continue
                ready, dur = txq[flow][0][:2]
                if dur <= 0.0:
                    f = free
                else:
                    known = fits.get(dur)
                    if known is None:
                        f = fits[dur] = self._free_at(eg, free, prio, dur)
                    else:
                        f = known
                if ready <= f and f - now <= wq:
                    break
                t_ok = ready if ready > f else f - w
                if t_ok < first:
                    first = t_ok
            else:
                i = 0
            if i:
                ring.rotate(-i)
                self._commit_head(flow, eg, prio, free, now, True, fits)
            else:
                if len(ring) > 1 and last in txq:
                    # No other flow can go: the last sender again, if it can; the ring
                    # goes on after it.
                    ring.rotate(-(ring.index(last) + 1))
                    t_last = self._commit_head(last, eg, prio, free, now, True, fits)
                    if t_last is None:
                        continue
                    if t_last < first:
                        first = t_last
                # None is ready by the time the wire frees for it: come back when one is
                # (later than now).
                self._pull(prio, first)
                return

    def _commit_head(self, flow, eg, prio: int, free: float, now: float,
                     at_end: bool, fits: dict | None) -> float | None:
        """Commit the head message of ``flow`` if it is ready by the time the wire frees
        for its first packet and that is within one packet's time of ``now`` [ns]; return
        None when committed, else the time [ns] to look at it again. ``free``: when the
        wire frees; ``at_end``: ``flow`` is last in the ring (removed with a pop); ``fits``:
        where first packets fit, by their time on the wire [ns], found since the wire's
        bookings last changed (read and filled in here; None: not kept)."""
        txq = self.txq
        q = txq[flow]
        ready, dur, emit, args = q[0]
        # a gap shorter than the first packet does not count
        if dur <= 0.0:
            f = free
        elif fits is None:
            f = self._free_at(eg, free, prio, dur)
        else:
            f = fits.get(dur)
            if f is None:
                f = fits[dur] = self._free_at(eg, free, prio, dur)
        if ready <= f and f - now <= eg.quantum + 1e-6:
            d = self.durs
            n = d[dur] - 1
            if n:
                d[dur] = n
            else:
                del d[dur]
            q.popleft()
            if q:
                self._head_in(flow, q[0])
            else:
                del txq[flow]
                if at_end:
                    self.ring.pop()
                else:
                    self.ring.remove(flow)
            self._sent(flow, f)
            emit(now, *args)
            return None
        return ready if ready > f else f - eg.quantum


# nic.tx_arbitration -> arbiter class (constructed with the Rnic)
ARBITERS = {"message": PerMessageRoundRobin, "fifo": Fifo, "packet": PerPacket}


def make_arbiter(name: str, nic) -> TxArbiter:
    """The arbiter ``nic.tx_arbitration`` ``name`` names, for ``nic``."""
    cls = ARBITERS[name]
    return cls(nic) if cls is PerMessageRoundRobin else cls()
