"""The RNIC's completer: responses arriving, completions (CQEs) and broken QPs.

Scope
    A READ/atomic response, ACK or NAK arriving (:meth:`Completer._rx_response`) is
    served on its QP's PU; READ data and atomic results are written to host memory over
    PCIe, then the CQE of a signaled WR (posted writes stay in order on PCIe, so the CQE
    follows the data). Completions of one QP become visible in posting order. A NAK,
    or an RC request unanswered for the QP's retry timeout, moves the QP to the error
    state and flushes everything it holds.

Traces
    ``nic.completer`` (:mod:`rnicsim.hw.pu`), ``nic.cqe`` (a completion is visible in
    host memory; scope the CQ), ``nic.qp_error``.

Params (profile ``nic``): ``completer`` [ns per opcode category], ``cqe_size`` [B].
"""
from __future__ import annotations

from .atomic import AtomicUnit
from .cq import Cq
from .qp import ERR, NAK, QpHw, Msg
from .wqe import (CAS, FAA, READ, RECV, RETRY_EXC_ERR, SUCCESS, WR_FLUSH_ERR,
                  WorkCompletion, WorkRequest)


class Completer(AtomicUnit):
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc)."""

    __slots__ = ()

    def _rx_response(self, msg: Msg) -> None:
        if (msg.late or msg.qp.hold_resp) and not self._arrived(msg, self._rx_response):
            return
        if not self.up:
            return
        qp = msg.qp
        if qp.state is ERR:
            return
        now = self.env._now
        wr = msg.wr
        op = wr.opcode
        t, head = self._serve(qp, msg, self.comp_t[op], now)
        if msg.kind == NAK:  # the QP breaks
            if qp.inflight:
                qp.inflight.pop(msg.seq, None)
            self._complete(qp, wr, msg.old, self.pcie.dma_write(t, self.p.cqe_size), 0)
            self._break(qp, t)
            return
        t_vis = t
        data = None
        if op == READ:
            if wr.length:
                if wr.local is not None:
                    t = self._translate(wr.local, wr.local_offset, wr.length, t)
                    if msg.data is not None:
                        wr.local.write(wr.local_offset, msg.data)
                t_vis = self.pcie.dma_write(head, wr.length, t)
            data = msg.data
        elif op == CAS or op == FAA:
            if wr.local is not None:
                wr.local.write_u64(wr.local_offset, msg.old)
            t_vis = self.pcie.dma_write(t, 8)
            data = msg.old
        if op >= READ:
            qp.rd_out -= 1
        if wr.signaled and qp.inflight:
            qp.inflight.pop(msg.seq, None)
        if wr.signaled:
            self._complete(qp, wr, SUCCESS, self._cqe_after(t, t_vis), wr.length, data)
        if qp.pending and qp.rd_out < self.max_rd and not qp.waiting:
            pend = qp.pending
            qp.pending = ()
            self._run_sq(qp, pend, 0)

    def _cqe_after(self, t_nic: float, t_vis: float) -> float:
        """Visible time of a CQE the NIC writes right after data that lands at ``t_vis``.

        Posted writes stay in order on PCIe, so the CQE is issued once the data write has
        been issued (``t_vis`` minus the one-way latency), not once it has landed.
        """
        t = t_vis - self.pcie.lat
        return self.pcie.dma_write(t if t > t_nic else t_nic, self.p.cqe_size)

    def _complete(self, qp: QpHw, wr: WorkRequest, status: int, t_cqe: float, nbytes: int,
                  data=None) -> None:
        wc = WorkCompletion(wr.wr_id, status, wr.opcode, nbytes, qp.qpn, None, None, data,
                            wr.t_post)
        self._push_cqe(qp, qp.send_cq, wc, t_cqe)

    def _push_cqe(self, qp: QpHw, cq: Cq, wc: WorkCompletion, t: float) -> None:
        # Completions of one QP become visible in posting order.
        if t < qp.last_cqe:
            t = qp.last_cqe
        qp.last_cqe = t
        if self.trace.enabled:
            self.trace.emit(t, "nic.cqe", cq.name, qpn=qp.qpn, op=wc.opcode,
                                status=wc.status)
        cq.push(wc, t)

    # ----------------------------------------------------------------- failures
    def _rc_timeout(self, qp: QpHw) -> None:
        if qp.state is ERR:
            return
        self._break(qp, self.sim.now, RETRY_EXC_ERR)

    def _break(self, qp: QpHw, t: float, first_status: int = WR_FLUSH_ERR) -> None:
        """Move ``qp`` to the error state and flush everything it holds."""
        qp.state = ERR
        if self.trace.enabled:
            self.trace.emit(t, "nic.qp_error", self.name, qpn=qp.qpn)
        status = first_status
        if qp.inflight:
            for seq in sorted(qp.inflight):
                self._complete(qp, qp.inflight[seq], status, t, 0)
                status = WR_FLUSH_ERR
        qp.inflight = None
        if qp.seg is not None:
            # A segmented request and those waiting behind it never went (whole).
            qp.seg.live = False
            self._flush(qp, [qp.seg.wr] + [a[0] for a in qp.seg_wait], t)
            qp.seg = qp.seg_wait = None
        if qp.rseg is not None:
            qp.rseg.live = False            # the requester's retries run out
            qp.rseg = qp.rseg_wait = None
        self._flush(qp, qp.pending, t)
        qp.pending = ()
        for wr in qp.recvs:
            self._push_cqe(qp, qp.recv_cq, WorkCompletion(wr.wr_id, WR_FLUSH_ERR, RECV, 0,
                                                          qp.qpn), t)
        qp.recvs = ()
        qp.recv_at = ()
        if qp.on_error is not None:
            qp.on_error(qp)

    def _flush(self, qp: QpHw, wrs, t: float | None = None) -> None:
        t = self.sim.now if t is None else t
        for wr in wrs:
            if wr.signaled:
                self._complete(qp, wr, WR_FLUSH_ERR, t, 0)
