"""The RNIC's processing units (PUs): FIFO servers that run every message's NIC work.

Scope
    ``processing_units`` FIFO servers (``Rnic.pu_busy``: busy-until [ns] per PU); a QP is
    served by one PU (``qpn mod PUs``), which keeps its work in order and bounds one QP's
    message rate. Per-opcode service times for the requester, responder and completer
    roles, plus ``per_packet`` for each extra MTU packet of a message. A multi-packet
    message arriving is served as its packets came in (:meth:`ProcessingUnits._serve`),
    which needs the PU's recent bookings (``Rnic.pu_log``).

Traces
    ``nic.responder``, ``nic.completer``: a PU serves an arriving request or response
    (scope ``<nic>/pu<k>``, from the start of its work to its end [ns]).

Params (profile ``nic``): ``processing_units``, ``requester``, ``responder``,
``completer`` [ns per opcode category], ``per_packet`` [ns].
"""
from __future__ import annotations

from struct import Struct

from .qp import REQUEST, Msg, QpHw
from .qpc import ContextCaches

# One booking of Rnic.pu_log (three doubles) as the bytes array("d") holds: frombytes
# copies them, where extend or append converts each float through PyArg_Parse (the
# per-verb path logs three bookings).
_BOOKING = Struct("@3d").pack


class ProcessingUnits(ContextCaches):
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc): serving an arriving
    message on its QP's PU, and the log of PU bookings."""

    __slots__ = ()

    def _serve(self, qp: QpHw, msg: Msg, svc: float, now: float) -> tuple[float, float]:
        """Run an arriving message through its QP's PU; return (done, head-of-data) [ns].

        ``now`` is the arrival of the message's last byte; a multi-packet message started
        arriving earlier, and its packets were processed as they came in: its first packet
        starts from the PU's backlog as it was when that packet arrived (work booked
        later does not push the whole message after it), and work the PU took on while
        the message came in (``pu_log``) is interleaved with its packets, so it delays the
        last packet, which is done no earlier than one packet time after the PU's other
        work and its own arrival. The PU's work is conserved: busy-until grows by the
        message's own work plus what was taken meanwhile.
        """
        pu = qp.pu
        busy = self.pu_busy[pu]
        if msg.npkts > 1:
            first = now - (msg.wire - self.mtu) * self.ns_per_byte_in
            # Walk back over the bookings taken after the first packet arrived.
            log = self.pu_log[pu]
            b0 = busy
            meanwhile = 0.0
            i = len(log) - 3
            while i >= 0 and log[i] > first:
                b0 = log[i + 1]
                meanwhile += log[i + 2]
                i -= 3
            t = b0 if b0 > first else first
            s0 = t
            ctx = self._qpc_lookup(qp, t)
            if ctx > t and self.qpc_stall:
                t = ctx
            t += svc
            head = t if t > ctx + svc else ctx + svc
            rest = (msg.npkts - 1) * self.per_pkt
            t += rest
            own = t - s0
            t += meanwhile
            last = busy + self.per_pkt
            if t < last:
                t = last
            self.pu_busy[pu] = t
            done = head + rest + meanwhile
            if done < last:
                done = last
            last = now + self.per_pkt
            if done < last:
                done = last
            self._pu_logged(pu, now, busy, own)
        else:
            t = busy
            if t < now:
                t = now
            s0 = t
            ctx = self._qpc_lookup(qp, t)
            if ctx > t and self.qpc_stall:
                t = ctx
            t += svc
            self.pu_busy[pu] = t
            head = done = t if t > ctx + svc else ctx + svc
            own = t - s0
            self._pu_logged(pu, now, busy, own)
        if self.trace.enabled:
            self.trace.emit(s0, "nic.responder" if msg.kind == REQUEST else "nic.completer",
                                f"{self.name}/pu{pu}", end=s0 + own, qpn=qp.qpn,
                                kind=msg.kind, npkts=msg.npkts)
        return done, head

    def _pu_logged(self, pu: int, now: float, before: float, work: float) -> None:
        """Record a booking of ``work`` [ns] on PU ``pu`` taken at ``now`` (``before`` =
        its busy-until before) for `_serve`; keeps the recent ones (a message's arrival
        spans a few dozen bookings at most; older ones are forgotten, which serves a
        message from a later backlog than it met, as before this log existed)."""
        self.pu_work_ns += work
        log = self.pu_log[pu]
        log.frombytes(_BOOKING(now, before, work))
        if len(log) > 192:
            del log[:96]
