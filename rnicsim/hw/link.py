"""Links: one direction of a wire, and the cut-through walk of a message along a route.

Scope: each direction is a :class:`~rnicsim.hw.calendar.Calendar` pipe serialising whole
messages at the link's data rate, plus a propagation delay. A message crossing switches is forwarded
cut-through: a switch output port may start once the head has arrived and the switch
latency has passed, and cannot finish before the tail has arrived.
Flow control: InfiniBand (credit-based) is modelled as buffer backpressure: when more than
the port's buffer is queued in front of an output port, the upstream direction is held, so
its later messages wait (head-of-line blocking). RoCE ports (``LinkDir.pfc`` set) use
priority flow control instead: per (upstream direction, priority) ingress accounting, PAUSE
above XOFF, resume below XON, and optional ECN marking (``LinkDir.ecn``), see
:mod:`rnicsim.hw.pfc`; a message carries a priority (``prio``, 3 for RDMA by default) and a
pause stops only that priority on the upstream direction.
Not modelled here: per-packet interleaving of two messages on one port (a message holds
the port for its whole serialisation), priority scheduling between classes on a wire (the
calendar serves by booking order), PFC frames occupying the reverse wire.

Traces (through ``LinkDir.tap``, set by :meth:`rnicsim.sim.Trace.attach`, scope the
direction's name such as ``nic0->sw0`` or ``sw0->nic1``): ``link.tx``, a message's
packets occupying the direction from its first bit's start to its last bit's end [ns]
(``bytes`` on the wire; ``wait`` [ns] it queued at the port before starting);
``pfc.pause`` (RoCE), the switch this direction feeds sends a PAUSE for ``prio`` up it
(from the frame's sending to its landing [ns]; ``resume`` [ns] when the resume is sent).

Params: rate [bit/s], propagation [ns], switch latency of the switch feeding this
direction [ns] (0 for a NIC's egress), buffer [B] of that switch port; for RoCE the
PFC thresholds and ECN marking of the switch owning the port.
"""
from __future__ import annotations

from typing import Sequence

from .calendar import Calendar
from .pfc import PrioState, ingress, reserve_avoiding

_INF = float("inf")


class LinkDir:
    """One direction of a link (see module doc)."""

    __slots__ = ("name", "rate", "prop", "sw_lat", "buffer", "cal", "bytes", "msgs",
                 "ns_per_byte", "quantum", "mtu_bytes", "interleave", "pfc", "ecn", "pstate",
                 "ecn_marks", "tap")

    TRACES = {"link.tx": "a message's packets serialise on this direction (egress or "
                         "switch output port)",
              "pfc.pause": "the switch fed by this direction pauses one priority on it"}

    def __init__(self, name: str, rate: float, prop: float, sw_lat: float = 0.0,
                 buffer: int = 1 << 30, env=None, mtu_bytes: int = 4096 + 64) -> None:
        self.name = name
        self.rate = rate
        self.ns_per_byte = 8e9 / rate
        self.prop = prop
        self.sw_lat = sw_lat
        self.buffer = buffer
        self.cal = Calendar(env)
        self.mtu_bytes = mtu_bytes      # on-wire size of a full packet [B]
        # Switch ports interleave packets of different messages; a NIC egress does so only
        # with per-packet arbitration (the profile's nic.tx_arbitration).
        self.interleave = True
        self.quantum = mtu_bytes * self.ns_per_byte
        self.bytes = 0
        self.msgs = 0
        self.pfc = None          # PfcConfig of the switch owning this port (RoCE), else None
        self.ecn = None          # EcnConfig when the port marks ECN
        # Per priority: the ingress queue this direction feeds at the downstream switch
        # and the pauses that switch imposed on this direction (RoCE only).
        self.pstate: dict[int, PrioState] = {}
        self.ecn_marks = 0
        self.tap = None          # trace hook (rnicsim.sim.Trace.attach); None: untraced


def set_rate(l: LinkDir, rate: float) -> None:
    """Change a link direction's data rate [bit/s] (a degraded or slower cable)."""
    l.rate = rate
    l.ns_per_byte = 8e9 / rate
    l.quantum = l.mtu_bytes * l.ns_per_byte


def transmit(path: Sequence[LinkDir], t: float, nbytes: int, tail_ready: float | None = None,
             last_pkt: int = 0, prio: int = 3, pkt=None, track=None, flow=None) -> float:
    """Send ``nbytes`` (on-wire size) along ``path`` from time ``t``; return tail arrival [ns].

    ``path[0]`` is the sender's egress; every later element is a switch output port.
    With ``tail_ready``, the sender has the first packet at ``t`` and the last one (of
    ``last_pkt`` bytes) at ``tail_ready`` (payload still streaming in over PCIe).
    ``prio`` is the message's priority (RoCE PFC); when ports mark packets of it (ECN),
    ``pkt.ecn`` is set to the list of times [ns] at which the marked packets have arrived
    at the receiver, in order (left untouched when none is marked). Reserves each
    direction ahead (no events are scheduled).
    ``track`` (an object with a float ``late`` [ns]): a multi-packet message whose
    packets others may overtake on an interleaving direction (a switch port, a NIC egress
    with per-packet arbitration); each overtaking packet adds its serialisation time to
    ``track.late``, which the receiver adds to the returned arrival. ``flow`` (the
    sending QP): on a NIC egress with per-packet arbitration, single packets and the
    multi-packet message they overtake share it round robin per flow
    (:meth:`~rnicsim.hw.calendar.Calendar.reserve_packet`).
    """
    first = path[0]
    ser = nbytes * first.ns_per_byte
    split = last_pkt and nbytes > last_pkt
    ps = first.pstate.get(prio) if first.pstate else None
    if ps is not None and ps.paused.busy_until > t:
        # This priority is paused on the egress at some time ahead: book around the pauses.
        start, end = reserve_avoiding(first.cal, ps.paused, t, ser,
                                      last_pkt * first.ns_per_byte if split else 0.0)
    elif split:
        # A multi-packet message: its packets fill the gaps other messages left.
        start, end = first.cal.reserve_split(t, ser, last_pkt * first.ns_per_byte)
    else:
        # With per-packet arbitration a packet slips in at most one MTU packet behind a
        # bulk message; per-message arbitration makes it wait for every message booked
        # before it (an infinite quantum: reserve_packet is then plain reserve).
        start = (first.cal.reserve_packet(t, ser, first.quantum, None, flow) if first.interleave
                 else first.cal.reserve_packet(t, ser, _INF))
        end = start + ser
    if track is not None and first.interleave:
        first.cal.hold(start, end, track)
    contiguous = end - start <= ser * (1 + 1e-12)
    if tail_ready is not None:
        t_last = tail_ready + last_pkt * first.ns_per_byte
        if t_last > end:
            end = t_last
            contiguous = False
    first.bytes += nbytes
    first.msgs += 1
    if first.tap is not None:
        first.tap("link.tx", start, end, bytes=nbytes, wait=start - t)
    head = start + first.prop
    tail = end + first.prop
    prev = first
    prev_end = end
    marks = None              # indices of the packets some port marked (ECN)
    npk = 1
    for l in path[1:]:
        ready = head + l.sw_lat
        ser = nbytes * l.ns_per_byte
        ps = l.pstate.get(prio) if l.pstate else None
        if ps is not None and ps.paused.busy_until > ready:
            start, end = reserve_avoiding(l.cal, ps.paused, ready, ser,
                                          last_pkt * l.ns_per_byte if split else 0.0)
        elif split:
            start, end = l.cal.reserve_split(ready, ser, last_pkt * l.ns_per_byte)
        else:
            # A switch port interleaves packets: a single packet waits at most one MTU
            # packet behind a bulk message booked as one interval.
            start = l.cal.reserve_packet(ready, ser, l.quantum, prev)
            end = start + ser
        if track is not None:
            l.cal.hold(start, end, track, prev, ready if split else None, tail - head, ser)
        pfc = l.pfc
        if pfc is None:
            if start > ready:
                # Lossless (InfiniBand credits): at most `buffer` bytes may wait in front
                # of this port; beyond that the upstream direction is paused until the
                # queue drains to the buffer size.
                hold = start - l.buffer * l.ns_per_byte
                if hold > prev_end:
                    prev.cal.block(prev_end, hold)
        elif l.ecn is not None and pkt is not None:
            # ECN, per packet: the bytes queued ahead of the first packet at the port, and
            # ahead of the last (for a message split over gaps, those interleaved before
            # it); the packets between see a queue in between.
            w1 = end - ready - ser
            if start > ready or w1 > 0:
                n = -(-nbytes // last_pkt) if split else 1
                idx = l.ecn.marked((start - ready) / l.ns_per_byte,
                                   (w1 if w1 > 0 else 0.0) / l.ns_per_byte, n)
                if idx:
                    l.ecn_marks += len(idx)
                    if marks is None:
                        marks = set(idx)
                        npk = n
                    else:
                        marks.update(idx)
        t_tail = tail + l.sw_lat
        if end < t_tail:
            end = t_tail
        if pfc is not None:
            st = prev.pstate.get(prio)
            if st is None:
                st = prev.pstate[prio] = PrioState(prev.cal.env)
            env = l.cal.env
            new_tail = ingress(st, pfc, prev, env._now if env is not None else 0.0, head,
                               tail, start, end, nbytes, contiguous, l.sw_lat,
                               last_pkt * prev.ns_per_byte if split else 0.0)
            if new_tail > tail:
                tail = new_tail
                t_tail = tail + l.sw_lat
                if end < t_tail:
                    end = t_tail
        contiguous = end - start <= ser * (1 + 1e-12)
        l.bytes += nbytes
        l.msgs += 1
        if l.tap is not None:
            l.tap("link.tx", start, end, bytes=nbytes, wait=start - ready)
        head = start + l.prop
        tail = end + l.prop
        prev = l
        prev_end = end
    if marks is not None:
        # Packet i of n has fully arrived at ~head + (tail - head)(i+1)/n.
        span = (tail - head) / npk
        pkt.ecn = [head + span * (i + 1) for i in sorted(marks)]
    return tail
