"""Links: one direction of a wire, and the cut-through walk of a message along a route.

Scope: each direction is a FIFO server (``busy_until``) serialising whole messages at the
link's data rate, plus a propagation delay. A message crossing switches is forwarded
cut-through: a switch output port may start once the head has arrived and the switch
latency has passed, and cannot finish before the tail has arrived. Lossless
backpressure: when more than the port's buffer is queued in front of an output port, the
upstream direction is held, so its later messages wait (head-of-line blocking).
Not modelled here: per-packet interleaving of two messages on one port (a message holds
the port for its whole serialisation), priorities, PFC frames (see the RoCE issue).

Params: rate [bit/s], propagation [ns], switch latency of the switch feeding this
direction [ns] (0 for a NIC's egress), buffer [B] of that switch port.
"""
from __future__ import annotations

from typing import Sequence


class LinkDir:
    """One direction of a link (see module doc)."""

    __slots__ = ("name", "rate", "prop", "sw_lat", "buffer", "busy_until", "bytes", "msgs",
                 "ns_per_byte")

    def __init__(self, name: str, rate: float, prop: float, sw_lat: float = 0.0,
                 buffer: int = 1 << 30) -> None:
        self.name = name
        self.rate = rate
        self.ns_per_byte = 8e9 / rate
        self.prop = prop
        self.sw_lat = sw_lat
        self.buffer = buffer
        self.busy_until = 0.0
        self.bytes = 0
        self.msgs = 0


def transmit(path: Sequence[LinkDir], t: float, nbytes: int) -> float:
    """Send ``nbytes`` (on-wire size) along ``path`` from time ``t``; return tail arrival [ns].

    ``path[0]`` is the sender's egress; every later element is a switch output port.
    Reserves each direction ahead (no events are scheduled).
    """
    first = path[0]
    start = t if t > first.busy_until else first.busy_until
    end = start + nbytes * first.ns_per_byte
    first.busy_until = end
    first.bytes += nbytes
    first.msgs += 1
    head = start + first.prop
    tail = end + first.prop
    prev = first
    for l in path[1:]:
        ready = head + l.sw_lat
        start = ready if ready > l.busy_until else l.busy_until
        if start > ready:
            # Lossless: at most `buffer` bytes may wait in front of this port; beyond that
            # the upstream direction is paused until the queue drains to the buffer size.
            hold = start - l.buffer * l.ns_per_byte
            if hold > prev.busy_until:
                prev.busy_until = hold
        end = start + nbytes * l.ns_per_byte
        t_tail = tail + l.sw_lat
        if end < t_tail:
            end = t_tail
        l.busy_until = end
        l.bytes += nbytes
        l.msgs += 1
        head = start + l.prop
        tail = end + l.prop
        prev = l
    return tail
