"""The RNIC's responder: requests arriving, one handler per opcode family, responses.

Scope
    A request arriving (:meth:`Responder._rx_request`) is served on its QP's PU and
    handed to the handler of its opcode family: SEND (consumes a posted RECV; RC answers
    an RNR NAK when none is posted, UD and UC drop the message), WRITE (placed in the
    target region; WRITE_WITH_IMM also consumes a RECV), READ (a response carrying the
    data, its packets leaving as the data comes over PCIe) and atomics (a response
    carrying the old value, after the atomic unit). RC requests are acknowledged
    (``ack_coalesce`` unsignaled ones per ACK); a bad rkey or range is NAKed
    (REM_ACCESS_ERR). Responses leave in request order through the transmit arbiter.
    The receive queue keeps up to ``recv_prefetch`` posted RECV descriptors per QP on
    board, reading them from host memory (``recv_wqe_size`` each, one DMA read per
    fetch) when RECVs are posted and again whenever consumption leaves half of that or
    less; a SEND's payload is placed only once the descriptor of the RECV it consumes is
    on the NIC.

Traces
    ``nic.responder`` (:mod:`rnicsim.hw.pu`), ``nic.atomic``, ``nic.tx`` (responses,
    ACKs, NAKs), ``nic.ud_drop``.

Params (profile ``nic``): ``responder`` [ns per opcode category], ``ack_coalesce``,
``recv_prefetch``, ``recv_wqe_size`` [B].
"""
from __future__ import annotations

from collections import deque

from .link import transmit
from .requester import Requester
from .qp import (ACK, ERR, NAK, RC, RESPONSE, RNR_TIMER_NS, UC, UD, Msg, QpHw, Seg, track)
from .wqe import (AETH, ATOMIC_ACK_ETH, CAS, GRH, LOC_LEN_ERR, READ, RECV,
                  RECV_RDMA_WITH_IMM, REM_ACCESS_ERR, REM_INV_REQ_ERR, SUCCESS, WRITE,
                  WR_FLUSH_ERR, WRITE_WITH_IMM, WorkCompletion, WorkRequest)


class Responder(Requester):
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc)."""

    __slots__ = ()

    def _rx_request(self, msg: Msg) -> None:
        """Request ``msg`` arrives (its last byte, now): served on its QP's PU, then
        handled by its opcode family (``_RX_BY_OPCODE``)."""
        if (msg.late or msg.qp.hold_req) and not self._arrived(msg, self._rx_request):
            return
        if not self.up:
            # A dead responder answers nothing: the requester's retries run out.
            req_qp = msg.qp
            if req_qp.type == RC:
                if msg.wr.signaled:
                    track(req_qp, msg.seq, msg.wr)
                self.sim.call_at(self.sim.now + req_qp.timeout_ns, req_qp.nic._rc_timeout,
                                 req_qp)
            return
        now = self.env._now
        qp = self.qps.get(msg.dst_qpn)
        if qp is None or qp.state is ERR:
            req_qp = msg.qp
            if req_qp.type == RC:
                self.sim.call_at(now + req_qp.timeout_ns, req_qp.nic._rc_timeout, req_qp)
            return
        op = msg.wr.opcode
        t, head = self._serve(qp, msg, self.resp_t[op], now)
        # One handler per opcode family (a test of the opcode, cheapest first for READ).
        if op == READ:
            self._rx_read(qp, msg, t, head, now)
        elif op >= CAS:
            self._rx_atomic(qp, msg, t, head, now)
        elif op >= WRITE:
            self._rx_write(qp, msg, t, head, now)
        else:
            self._rx_send(qp, msg, t, head, now)

    def _rx_send(self, qp: QpHw, msg: Msg, t: float, head: float, now: float) -> None:
        """SEND, SEND_WITH_IMM served at ``t`` [ns] (data from ``head``): consume a RECV."""
        if not qp.recvs:
            if qp.type == UD or qp.type == UC:
                self.counters["ud_drop"] += 1
                if self.trace.enabled:
                    self.trace.emit(now, "nic.ud_drop", self.name, qpn=qp.qpn)
                return
            self._rnr(msg, t)
            return
        wr = msg.wr
        req_qp = msg.qp
        length = wr.length
        recv = qp.recvs.popleft()
        desc = qp.recv_at.popleft()
        self._fetch_recvs(qp, now)
        if length + (GRH if qp.type == UD else 0) > recv.length:
            # Longer than the receive buffer (a UD buffer also holds the 40-B GRH
            # space): the RECV completes with a local length error and nothing is
            # written (IBA 9.9.3 / 11.4.1.2). RC and UC: the responder QP goes to the
            # error state; RC also NAKs, so the requester's WR completes with
            # REM_INV_REQ_ERR. UD: only this message is lost.
            self.counters["len_err"] += 1
            self._push_cqe(qp, qp.recv_cq, WorkCompletion(recv.wr_id, LOC_LEN_ERR, RECV,
                                                          0, qp.qpn), t)
            if qp.type == RC:
                self._nak(qp, msg, t, REM_INV_REQ_ERR)
            if qp.type != UD:
                self._break(qp, t)
            return
        if desc > head:
            head = desc     # the scatter address comes with the RECV descriptor
        if desc > t:
            t = desc
        nbytes = length + (self.ud_grh_write if qp.type == UD else 0)
        if recv.local is not None and msg.data is not None:
            recv.local.write(recv.local_offset + (GRH if qp.type == UD else 0), msg.data)
        t_vis = self.pcie.dma_write(head, nbytes, t) if nbytes else t
        wc = WorkCompletion(recv.wr_id, SUCCESS, RECV, length, qp.qpn, wr.imm,
                            (req_qp.nic.id, req_qp.qpn), msg.data, wr.t_post)
        self._push_cqe(qp, qp.recv_cq, wc, self._cqe_after(t, t_vis))
        if qp.type == RC:
            self._ack(qp, msg, t)

    def _rx_write(self, qp: QpHw, msg: Msg, t: float, head: float, now: float) -> None:
        """WRITE, WRITE_WITH_IMM served at ``t`` [ns] (data from ``head``): place the
        data; WRITE_WITH_IMM also consumes a RECV."""
        wr = msg.wr
        length = wr.length
        mr, t = self._target(qp, msg, length, t)
        if mr is False:
            return
        if mr is not None and msg.data is not None:
            mr.write(wr.remote_offset, msg.data)
        t_vis = self.pcie.dma_write(head, length, t) if length else t
        if mr is not None and mr.watch:
            mr.landed(wr.remote_offset, length, t_vis)
        if wr.opcode == WRITE_WITH_IMM:
            if qp.recvs:
                req_qp = msg.qp
                recv = qp.recvs.popleft()
                desc = qp.recv_at.popleft()
                self._fetch_recvs(qp, now)
                if desc > t_vis:
                    t_vis = desc
                wc = WorkCompletion(recv.wr_id, SUCCESS, RECV_RDMA_WITH_IMM, length, qp.qpn,
                                    wr.imm, (req_qp.nic.id, req_qp.qpn), None, wr.t_post)
                self._push_cqe(qp, qp.recv_cq, wc, self._cqe_after(t, t_vis))
            elif qp.type == RC:
                self._rnr(msg, t)
                return
        if qp.type == RC:
            self._ack(qp, msg, t)

    def _rx_read(self, qp: QpHw, msg: Msg, t: float, head: float, now: float) -> None:
        """READ served at ``t`` [ns]: a response carries the data back, its packets
        leaving as the data comes over PCIe."""
        wr = msg.wr
        length = wr.length
        mr, t = self._target(qp, msg, length, t)
        if mr is False:
            return
        mtu = self.mtu
        req_qp = msg.qp
        resp = Msg(RESPONSE, wr, req_qp, 0, 1 if length <= mtu else -(-length // mtu),
                   msg.seq)
        if mr is not None and wr.local is not None:
            resp.data = mr.read(wr.remote_offset, length)
        wire = length + resp.npkts * self.pkt_ovh + AETH
        resp.wire = wire
        if length > mtu:
            # Multi-packet response: packets leave as their data arrives over PCIe.
            f, l = self.pcie.dma_read_span(t, length, mtu)
            self._reply(qp, req_qp, resp, f, wire, l, mtu + self.pkt_ovh)
        elif length:
            self._reply(qp, req_qp, resp, self.pcie.dma_read(t, length), wire)
        else:
            self._reply(qp, req_qp, resp, t, wire)

    def _rx_atomic(self, qp: QpHw, msg: Msg, t: float, head: float, now: float) -> None:
        """CAS, FAA served at ``t`` [ns]: the atomic unit, then a response carrying the
        old value."""
        wr = msg.wr
        mr, t = self._target(qp, msg, 8, t)
        if mr is False:
            return
        resp = Msg(RESPONSE, wr, msg.qp, 0, 1, msg.seq)
        ready = self._atomic(t, (wr.rkey, wr.remote_offset))
        if self.trace.enabled:
            self.trace.emit(t, "nic.atomic", f"{self.name}/atomic", end=ready,
                                qpn=qp.qpn, op=wr.opcode)
        if mr is not None:
            resp.old = (mr.cas(wr.remote_offset, wr.compare_add, wr.swap) if wr.opcode == CAS
                        else mr.faa(wr.remote_offset, wr.compare_add))
        self._reply(qp, msg.qp, resp, ready, self.pkt_ovh + AETH + ATOMIC_ACK_ETH)

    def _target(self, qp: QpHw, msg: Msg, n: int, t: float) -> tuple:
        """(region, time [ns]) of request ``msg`` served at ``t``: the memory region it
        reaches and when its ``n`` [B] there are translated (MTT) for the data access;
        (None, t) without an rkey (a request that only costs time); (False, t) when the
        rkey or the ``n`` bytes at the remote offset are not in a registered region: the
        request is then NAKed (REM_ACCESS_ERR) at ``t``."""
        wr = msg.wr
        if wr.rkey is None:
            return None, t
        mr = self.memory.get(wr.rkey)
        if mr is None or not mr.check(wr.remote_offset, n):
            self._nak(qp, msg, t, REM_ACCESS_ERR)
            return False, t
        return mr, self._translate(mr, wr.remote_offset, n, t)

    def _rnr(self, msg: Msg, t: float) -> None:
        """RC receiver not ready (no RECV posted) at ``t`` [ns]: an RNR NAK; the
        requester sends ``msg`` again after the RNR timer."""
        self.counters["rnr"] += 1
        self.sim.call_at(t + RNR_TIMER_NS, self._rx_request, msg)

    def _reply(self, qp: QpHw, req_qp: QpHw, resp: Msg, ready: float, wire: int,
               tail: float | None = None, last_pkt: int = 0) -> None:
        if qp.rseg is not None:
            # A segmented READ response of this QP is still going out: this one follows.
            qp.rseg_wait.append((req_qp, resp, ready, wire, tail, last_pkt))
            return
        path = qp.path
        if path is None:
            path = qp.path = self.fabric.route(self.id, req_qp.nic.id)
        if ready < qp.resp_ready:          # responses leave in request order
            ready = qp.resp_ready
        if tail is not None and tail < ready:
            tail = ready
        if resp.npkts > self.seg_pkts and self.seg_on:
            qp.rseg = Seg(qp, req_qp, resp.wr, resp, path, req_qp.nic, ready,
                           ready if tail is None else tail, resp.npkts, resp.wr.length, AETH)
            qp.rseg_wait = []
            self._next_segment(qp.rseg)
            return
        cc = qp.cc
        if cc is not None and resp.kind == RESPONSE:
            npk = resp.npkts
            ready, t2 = self._pace(cc, ready, ready if tail is None else tail, wire, npk,
                                   resp.wr.length)
            if tail is not None or npk > 1:
                tail = t2
        if resp.kind < ACK:
            first = last_pkt if last_pkt else wire      # its first packet [B]
            if not self.tx.goes_now(qp.qpn, path[0], ready, qp.prio, first):
                self.tx.wait(qp.qpn, path[0], ready, qp.prio, first, self._emit_reply,
                             (qp, req_qp, resp, path, ready, wire, tail, last_pkt))
                return
        # A response the arbiter lets go at once, or an ACK or NAK: those come from the
        # responder's pipeline, not a send queue, and go at once, behind what is on the
        # wire, in every arbitration.
        self._emit_reply(ready, qp, req_qp, resp, path, ready, wire, tail, last_pkt)

    def _emit_reply(self, t: float, qp: QpHw, req_qp: QpHw, resp: "Msg", path,
                    ready: float, wire: int, tail: float | None, last_pkt: int) -> None:
        """Put response ``resp`` on the wire, not before ``t`` [ns], and schedule its arrival."""
        if ready < t:
            ready = t
            if tail is not None and tail < ready:
                tail = ready
        arrive = transmit(path, ready, wire, tail, last_pkt, qp.prio,
                          resp if self.dcqcn else None, resp if last_pkt else None, qp)
        if self.trace.enabled:
            self._trace_tx(resp.kind, resp.wr, resp.seq, qp.qpn, req_qp.nic.id, req_qp.qpn,
                           path, 0, resp.npkts, resp.npkts,
                           resp.wr.length if resp.kind == RESPONSE else 0,
                           status=resp.old if resp.kind == NAK else 0)
        if resp.ecn:
            # Marked READ response packets: the requester's NIC notifies the responder's QP.
            req_qp.nic._marks_arrive(resp.ecn, qp)
            resp.ecn = False
        self._after_reply(qp, req_qp, resp, path, ready, tail, arrive)

    def _after_reply(self, qp: QpHw, req_qp: QpHw, resp: "Msg", path, ready: float,
                     tail: float | None, arrive: float) -> None:
        """Response ``resp`` is booked to arrive at ``arrive`` [ns]: order and delivery."""
        qp.resp_ready = tail if tail is not None and tail > ready else ready
        if arrive < req_qp.resp_arrive_last:
            arrive = req_qp.resp_arrive_last
        req_qp.resp_arrive_last = arrive
        if req_qp.nic.up and (not self.fabric.down or self.fabric.path_up(path)):
            self.sim.call_at(arrive, req_qp.nic._rx_response, resp)

    def _ack(self, qp: QpHw, msg: Msg, t: float) -> None:
        qp.ack_count += 1
        if msg.wr.signaled or qp.ack_count % self.p.ack_coalesce == 0:
            resp = Msg(ACK, msg.wr, msg.qp, 0, 1, msg.seq)
            if msg.wr.signaled:
                self._reply(qp, msg.qp, resp, t, self.ack_bytes)
            else:
                # A coalesced ACK for unsignaled work: wire time only, nothing to complete.
                path = qp.path
                if path is None:
                    path = qp.path = self.fabric.route(self.id, msg.qp.nic.id)
                if t < qp.resp_ready:
                    t = qp.resp_ready
                transmit(path, t, self.ack_bytes, None, 0, qp.prio, None, None, qp)
                qp.resp_ready = t
                if self.trace.enabled:
                    self._trace_tx(ACK, msg.wr, msg.seq, qp.qpn, msg.qp.nic.id, msg.qp.qpn,
                                   path, 0, 1, 1, 0)

    def _nak(self, qp: QpHw, msg: Msg, t: float, status: int) -> None:
        resp = Msg(NAK, msg.wr, msg.qp, 0, 1, msg.seq)
        resp.old = status
        self._reply(qp, msg.qp, resp, t, self.ack_bytes)

    # ----------------------------------------------------------------- receive queue
    def post_recv(self, qp: QpHw, wrs: list[WorkRequest]) -> None:
        """Make RECV buffers available (they were posted by the verbs layer)."""
        if qp.state is ERR:
            for wr in wrs:
                self._push_cqe(qp, qp.recv_cq, WorkCompletion(wr.wr_id, WR_FLUSH_ERR, RECV, 0,
                                                              qp.qpn), self.sim.now)
            return
        # The NIC reads the new descriptors from the receive queue in host memory with one
        # DMA read per post (they are contiguous in the ring); a SEND that consumes a RECV
        # cannot place its payload before that RECV's descriptor is on the NIC.
        if not wrs:
            return
        if type(qp.recvs) is tuple:
            qp.recvs = deque()
            qp.recv_at = deque()
        qp.recvs.extend(wrs)
        self._fetch_recvs(qp, self.env._now)

    def _fetch_recvs(self, qp: QpHw, t: float) -> None:
        """Read posted RECV descriptors ahead of use (from time ``t``) up to the prefetch
        depth, once at most half of it is left on the NIC: one DMA read per fetch."""
        have = len(qp.recv_at)
        depth = self.p.recv_prefetch
        if 2 * have > depth:
            return
        k = min(len(qp.recvs) - have, depth - have)
        if k > 0:
            r = self.pcie.dma_read(t, k * self.p.recv_wqe_size)
            qp.recv_at.extend([r] * k)

