"""The RNIC's requester: send queue, request transmission, segmentation and pacing.

Scope
    A doorbell hands the NIC the WQEs of one ``post_send``; the QP's PU processes them in
    order (:meth:`Requester._run_sq`), fetching non-inline payloads over PCIe, and each
    request goes to the transmit arbiter (:mod:`rnicsim.hw.arbiter`) and then to the
    wire. ``max_rd_atomic`` READ/atomics may be outstanding per QP; more, and CORE-Direct
    WAITs, hold the rest of the send queue back. A request or READ response longer than
    ``Rnic.seg_pkts`` packets goes to the wire segment by segment
    (:meth:`Requester._next_segment`), paced by the QP's DCQCN limiter when there is one.
    UD and UC requests complete locally once sent; RC ones when acknowledged.

Params (profile ``nic``, ``link``): ``requester`` [ns per opcode category],
``per_packet`` [ns], ``max_rd_atomic``, ``cqe_size`` [B], ``mtu`` [B].
"""
from __future__ import annotations

from functools import partial

from .completer import Completer
from .dcqcn import Dcqcn
from .link import transmit
from .qp import (_HAS_IMM, _HAS_PAYLOAD, _REQ_EXT, ERR, RC, REQUEST, UD, Msg, QpHw, Seg,
                 hold_back, track)
from .wqe import DETH, IMMDT, READ, SUCCESS, WAIT, WorkRequest


class Requester(Completer):
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc)."""

    __slots__ = ()

    # ----------------------------------------------------------------- send queue
    def doorbell(self, qp: QpHw, wrs: list[WorkRequest]) -> None:
        """The NIC has the WQEs of one doorbell (called at that time by the verbs layer)."""
        if self.trace.enabled:
            self.trace.emit(self.env._now, "nic.doorbell", self.name, qpn=qp.qpn,
                                wqes=len(wrs))
        if qp.state is ERR:
            self._flush(qp, wrs)
            return
        if qp.pending or qp.waiting:
            hold_back(qp, wrs)
            return
        self._run_sq(qp, wrs, 0)

    def _run_sq(self, qp: QpHw, wrs, start: int) -> None:
        now = self.env._now
        pu = qp.pu
        pu_busy = self.pu_busy
        before = t = pu_busy[pu]
        if t < now:
            t = now
        t0 = t
        mtu = self.mtu
        req_t = self.req_t
        for i in range(start, len(wrs)):
            wr = wrs[i]
            op = wr.opcode
            if op == WAIT:
                cq = wr.wait_cq
                if cq.pushed < wr.wait_count:
                    # CORE-Direct: the send queue stops here until the CQ has enough
                    # completions; the NIC resumes it itself.
                    hold_back(qp, wrs[i + 1:])
                    qp.waiting = True
                    pu_busy[pu] = t
                    self._pu_logged(pu, now, before, t - t0)
                    cq.nic_wait(wr.wait_count, partial(self._resume_wait, qp))
                    return
                continue
            if op >= READ:  # READ, CAS, FAA need a slot (WAIT was handled above)
                if qp.rd_out >= self.max_rd:
                    hold_back(qp, wrs[i:])
                    break
                qp.rd_out += 1
            ctx = self._qpc_lookup(qp, t)
            if ctx > t and self.qpc_stall:
                t = ctx         # the PU waits for the context (nic.qpc_miss_stall)
            length = wr.length if _HAS_PAYLOAD[op] else 0
            svc = req_t[op]
            s = t
            t += svc
            head = t if t > ctx + svc else ctx + svc
            if length <= mtu:
                npk = 1
                tail = head
            else:
                npk = -(-length // mtu)
                t += (npk - 1) * self.per_pkt
                tail = head + (npk - 1) * self.per_pkt
            if self.trace.enabled:
                self.trace.emit(s, "nic.requester", f"{self.name}/pu{pu}", end=t, qpn=qp.qpn,
                               op=op, bytes=length)
            if length and not wr.inline:
                if wr.local is not None:
                    head = self._translate(wr.local, wr.local_offset, length, head)
                f, l = self.pcie.dma_read_span(head, length, mtu)
                head = f if f > head else head
                tail = l if l > tail else tail
            self._send_request(qp, wr, op, length, npk, head, tail)
        pu_busy[pu] = t
        if t > t0:
            self._pu_logged(pu, now, before, t - t0)

    def _resume_wait(self, qp: QpHw) -> None:
        """A CORE-Direct WAIT of ``qp`` is satisfied: run the rest of its send queue."""
        qp.waiting = False
        pend = qp.pending
        qp.pending = ()
        if qp.state is not ERR:
            self._run_sq(qp, pend, 0)

    def _send_request(self, qp: QpHw, wr: WorkRequest, op: int, length: int, npk: int,
                      ready: float, tail: float) -> None:
        if qp.seg is not None:
            # A segmented request of this QP is still going out: this one follows it.
            qp.seg_wait.append((wr, op, length, npk, ready, tail))
            return
        fab = self.fabric
        qtype = qp.type
        if qtype == UD:
            dst_id, dst_qpn = wr.dest
            path = fab.route(self.id, dst_id)
            ext = DETH + (IMMDT if _HAS_IMM[op] else 0)
        else:
            dst_id, dst_qpn = qp.peer
            path = qp.path
            if path is None:
                path = qp.path = fab.route(self.id, dst_id)
            ext = _REQ_EXT[op]
        wire = length + npk * self.pkt_ovh + ext
        qp.seq += 1
        msg = Msg(REQUEST, wr, qp, dst_qpn, npk, qp.seq)
        msg.wire = wire
        if _HAS_PAYLOAD[op]:
            local = wr.local
            if local is not None:
                msg.data = local.read(wr.local_offset, length)
            elif wr.data is not None:
                msg.data = wr.data
        if qtype != UD:
            # In order on the wire: never leave before the QP's previous request.
            if ready < qp.tx_ready:
                ready = qp.tx_ready
            if tail < ready:
                tail = ready
        if npk > self.seg_pkts and self.seg_on and qtype != UD:
            qp.seg = Seg(qp, None, wr, msg, path, fab.nics[dst_id], ready, tail, npk,
                          length, ext)
            qp.seg_wait = []
            self._next_segment(qp.seg)
            return
        cc = qp.cc
        if cc is not None:
            ready, tail = self._pace(cc, ready, tail, wire, npk, length)
        first = wire if npk == 1 else self.mtu + self.pkt_ovh    # its first packet [B]
        if self.tx.goes_now(qp, path[0], ready, qp.prio, first):
            self._emit_request(ready, qp, wr, msg, path, dst_id, ready, tail, wire, npk,
                               length)
        else:
            self.tx.wait(qp, path[0], ready, qp.prio, first, self._emit_request,
                         (qp, wr, msg, path, dst_id, ready, tail, wire, npk, length))

    def _next_segment(self, st: Seg) -> None:
        """Prepare the next segment of a segmented message: its packets' payload times,
        paced by the QP's DCQCN limiter now, then on to the send scheduler. A segment
        after the first keeps the wire for its QP when it is ready as the previous one
        ends (the message goes whole, as without DCQCN); when the limiter holds it back,
        other QPs' messages may go in the gap."""
        if not st.live:
            return                   # the QP broke meanwhile (flushed in _break)
        qp = st.qp
        mtu = self.mtu
        i0 = st.next
        i1 = i0 + self.seg_pkts
        if i1 > st.npk:
            i1 = st.npk
        n = i1 - i0
        payload = n * mtu if i1 < st.npk else st.length - i0 * mtu
        wire = payload + n * self.pkt_ovh + (st.ext if i0 == 0 else 0)
        # Packet i's payload is on the NIC at head + (tail - head) i / (npk - 1).
        step = (st.tail - st.head) / (st.npk - 1)
        ready = st.head + step * i0
        tail = st.head + step * (i1 - 1)
        if ready < st.t_free:
            ready = st.t_free
        if tail < ready:
            tail = ready
        if qp.cc is not None:
            ready, tail = self._pace(qp.cc, ready, tail, wire, n, payload)
        self.tx.submit(st.flow, st.path[0], ready, qp.prio,
                       wire if n == 1 else self.mtu + self.pkt_ovh, self._emit_segment,
                       (st, ready, tail, wire, n, payload))

    def _emit_segment(self, t: float, st: Seg, ready: float, tail: float, wire: int,
                      n: int, payload: int) -> None:
        """Put one segment (``n`` packets, ``wire`` bytes) of ``st`` on the wire, not
        before ``t`` [ns]; the last one completes the message as :meth:`_emit_request`
        or :meth:`_emit_reply` would."""
        if not st.live:
            return
        qp = st.qp
        if ready < t:
            ready = t
        if tail < ready:
            tail = ready
        msg = st.msg
        path = st.path
        if n > 1:
            # Only the last segment's delays are the message's (its arrival): a packet that
            # overtakes an earlier segment at a port pushes back what is booked behind it
            # there, so a later segment booked afterwards starts that much later, and one
            # booked already is pushed back and made late through its own hold. Adding
            # the earlier segments' overtakes to msg.late counted them twice.
            arrive = transmit(path, ready, wire, tail, min(payload, self.mtu) + self.pkt_ovh,
                              qp.prio, msg, msg if st.next + n >= st.npk else st)
        else:
            arrive = transmit(path, tail, wire, None, 0, qp.prio, msg, None, qp)
        if self.trace.enabled:
            self._trace_tx(msg.kind, st.wr, msg.seq, qp.qpn, st.dst.id,
                           msg.dst_qpn if st.req_qp is None else st.req_qp.qpn, path,
                           st.next, n, st.npk, payload, qp.type)
        if msg.ecn:
            st.dst._marks_arrive(msg.ecn, qp)
            msg.ecn = False
        st.next += n
        if st.next < st.npk:
            # The next segment is prepared one packet's time before this one has left
            # (the scheduler's window), at the limiter's rate of that moment; meanwhile
            # the QP holds the wire (PerMessageRoundRobin._on_pull).
            eg = path[0]
            st.t_free = tail + (min(payload, self.mtu) + self.pkt_ovh) * eg.ns_per_byte
            t_free2 = ready + wire * eg.ns_per_byte
            if t_free2 > st.t_free:
                st.t_free = t_free2
            now = self.env._now
            at = st.t_free - eg.quantum
            st.prep_at = at = at if at > now else now
            self.sim.call_at(at, self._next_segment, st)
            self.tx.hold_wire(st)
            return
        st.live = False
        self.tx.release_wire(st)
        if st.req_qp is None:
            qp.seg = None
            self._after_request(qp, st.wr, msg, path, st.dst.id, ready, tail, wire,
                                st.length, arrive)
            self._replay(qp, "seg", self._send_request)
        else:
            qp.rseg = None
            self._after_reply(qp, st.req_qp, msg, path, ready, tail, arrive)
            self._replay(qp, "rseg", self._reply)

    @staticmethod
    def _replay(qp: QpHw, slot: str, send) -> None:
        """Send, in order, what waited behind ``qp``'s segmented message (``qp.<slot>``
        done), until one of them is segmented in turn: the rest waits behind that one."""
        wait = getattr(qp, slot + "_wait")
        setattr(qp, slot + "_wait", None)
        for i, args in enumerate(wait):
            if getattr(qp, slot) is not None:
                getattr(qp, slot + "_wait").extend(wait[i:])
                break
            send(qp, *args)

    def _emit_request(self, t: float, qp: QpHw, wr: WorkRequest, msg: "Msg", path,
                      dst_id: int, ready: float, tail: float, wire: int, npk: int,
                      length: int) -> None:
        """Put request ``msg`` on the wire, not before ``t`` [ns], and schedule its arrival."""
        fab = self.fabric
        if ready < t:
            ready = t
        if tail < ready:
            tail = ready
        pkt = msg if self.dcqcn else None
        if npk > 1:
            arrive = transmit(path, ready, wire, tail, min(length, self.mtu) + self.pkt_ovh,
                              qp.prio, pkt, msg)
        else:
            arrive = transmit(path, ready if ready > tail else tail, wire, None, 0, qp.prio,
                              pkt, None, qp)
        if self.trace.enabled:
            self._trace_tx(REQUEST, wr, msg.seq, qp.qpn, dst_id, msg.dst_qpn, path, 0, npk,
                           npk, length, qp.type)
        if pkt is not None and msg.ecn:
            fab.nics[dst_id]._marks_arrive(msg.ecn, qp)
            msg.ecn = False
        self._after_request(qp, wr, msg, path, dst_id, ready, tail, wire, length, arrive)

    def _after_request(self, qp: QpHw, wr: WorkRequest, msg: "Msg", path, dst_id: int,
                       ready: float, tail: float, wire: int, length: int,
                       arrive: float) -> None:
        """Request ``msg`` is booked to arrive at ``arrive`` [ns] (its last packet having
        been ready at ``tail``): order, delivery, and what completes it."""
        fab = self.fabric
        qtype = qp.type
        if qtype != UD:
            qp.tx_ready = tail if tail > ready else ready
            if arrive < qp.arrive_last:
                arrive = qp.arrive_last
            qp.arrive_last = arrive
        dst = fab.nics[dst_id]
        if not dst.up or fab.down and not fab.path_up(path):
            if qtype == RC:
                if wr.signaled:
                    track(qp, msg.seq, wr)
                self.sim.call_at(self.sim.now + qp.timeout_ns, self._rc_timeout, qp)
            return
        self.sim.call_at(arrive, dst._rx_request, msg)
        if qtype == RC:
            if wr.signaled:
                track(qp, msg.seq, wr)
        elif wr.signaled:
            # UD/UC complete locally once the message has left the NIC.
            t_sent = (ready if ready > tail else tail) + wire * self.ns_per_byte_in
            t_cqe = self.pcie.dma_write(t_sent, self.p.cqe_size)
            self._complete(qp, wr, SUCCESS, t_cqe, length)

    def _pace(self, cc: Dcqcn, ready: float, tail: float, wire: int, npk: int,
              length: int) -> tuple[float, float]:
        """(ready, tail) of a message after the QP's DCQCN rate limiter."""
        start, t_min = cc.pace(ready, wire)
        if start > ready:
            ready = start
        if tail < ready:
            tail = ready
        if npk > 1:
            lim = t_min - (min(length, self.mtu) + self.pkt_ovh) * self.ns_per_byte_in
            if tail < lim:
                tail = lim
        return ready, tail
