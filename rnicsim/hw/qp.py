"""Queue-pair state and the messages the RNIC puts on the wire.

Scope
    :class:`QpHw` is the hardware state of one queue pair, created lazily through
    :mod:`rnicsim.verbs` and kept small (most of a 400-node cluster's QPs never send or
    receive). :class:`Msg` is one message in flight (a request, a READ/atomic response,
    an ACK or a NAK: ``Msg.kind``); :class:`Seg` is a long message going to the wire
    segment by segment. The transport constants (``RC``/``UC``/``UD``, ``RTS``/``ERR``)
    and the per-opcode tables the RNIC's parts share live here too.

Params: none (state only); see :mod:`rnicsim.hw.rnic` for the model.
"""
from __future__ import annotations

from collections import deque

from typing import TYPE_CHECKING

from .wqe import ATOMIC_ETH, IMMDT, RETH, WorkRequest

if TYPE_CHECKING:
    from .cq import Cq
    from .rnic import Rnic

RC, UC, UD = "RC", "UC", "UD"
RTS, ERR = "RTS", "ERR"
_IS_ATOMIC = (False, False, False, False, False, True, True, False)
_HAS_PAYLOAD = (True, True, True, True, False, False, False, False)
_HAS_IMM = (False, True, False, True, False, False, False, False)
_REQ_EXT = (0, IMMDT, RETH, RETH + IMMDT, RETH, ATOMIC_ETH, ATOMIC_ETH, 0)

# Msg.kind: plain ints (not an Enum) so a test on the per-verb path is one int compare.
# The order matters: ``kind < ACK`` is "a request or a response" (what the send scheduler
# arbitrates; ACKs and NAKs go at once).
REQUEST, RESPONSE, ACK, NAK = 0, 1, 2, 3
# A congestion notification packet: never a Msg, only a kind in the ``nic.tx`` trace.
CNP = 4

# Delay [ns] before a request refused for want of a posted RECV (an RNR NAK) is taken
# again: one ~20 us timer, for SEND and WRITE_WITH_IMM alike.
RNR_TIMER_NS = 2 * 655360.0 / 64

_INF = float("inf")


def hold_back(qp: "QpHw", wrs) -> None:
    """Append ``wrs`` to the WRs ``qp`` holds back (``qp.pending``)."""
    if qp.pending:
        qp.pending.extend(wrs)
    else:
        qp.pending = list(wrs)


def track(qp: "QpHw", seq: int, wr) -> None:
    """``wr`` (request ``seq`` of RC ``qp``) awaits its completion (``qp.inflight``)."""
    inf = qp.inflight
    if inf is None:
        qp.inflight = {seq: wr}
    else:
        inf[seq] = wr


class QpHw:
    """Hardware state of one queue pair (created through :mod:`rnicsim.verbs`)."""

    __slots__ = ("qpn", "type", "nic", "pu", "send_cq", "recv_cq", "state", "rd_out",
                 "pending", "recvs", "last_cqe", "peer", "path", "ack_count", "inflight",
                 "seq", "timeout_ns", "on_error", "ctx_ready", "db_ready", "tx_ready",
                 "arrive_last", "resp_ready", "resp_arrive_last", "waiting", "recv_at",
                 "prio", "cc", "hold_req", "hold_resp", "shift_req", "shift_resp", "seg",
                 "seg_wait", "rseg", "rseg_wait", "lru_in", "lru_prev", "lru_next")

    def __init__(self, nic: "Rnic", qpn: int, qtype: str, send_cq: Cq, recv_cq: Cq) -> None:
        self.qpn = qpn
        self.type = qtype
        self.nic = nic
        self.pu = qpn % len(nic.pu_busy)
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.state = RTS
        self.rd_out = 0
        # WRs held back (read credits, a stalled context); only extended and drained whole.
        # A shared empty tuple until first needed, as ``recvs``: at 80-400 nodes most of
        # the millions of QPs never hold any (an empty list is 56 B each).
        self.pending: list | tuple = ()
        # Posted RECVs and when each one's descriptor is on the NIC: shared empty tuples
        # until the first post_recv (most RC QPs of a one-sided mesh never receive; two
        # deques are ~760 B, which at 80+ nodes is most of a QP's memory).
        self.recvs: deque | tuple = ()
        self.recv_at: deque | tuple = ()
        self.last_cqe = 0.0
        self.peer: tuple[int, int] | None = None      # (nic id, qpn) for RC/UC
        self.path = None
        self.ack_count = 0
        # signaled RC WRs awaiting completion, by sequence number; None until the first
        # (an empty dict is 64 B per QP)
        self.inflight: dict[int, WorkRequest] | None = None
        self.seq = 0
        self.timeout_ns = 4096.0 * (1 << 14) * 8       # ibv timeout=14, retry_cnt=7
        self.on_error = None
        self.ctx_ready = 0.0       # when the context fetched on the last miss arrives
        # Place in the NIC's QP-context cache (hw/cache.py, QpLru): cached, and the QPs
        # used before and after it.
        self.lru_in = False
        self.lru_prev = None
        self.lru_next = None
        # RC/UC keep a QP's work in order end to end: doorbells reach the NIC in posting
        # order, requests leave and arrive in order, responses/ACKs likewise.
        self.db_ready = 0.0
        self.tx_ready = 0.0
        self.arrive_last = 0.0
        self.resp_ready = 0.0
        self.resp_arrive_last = 0.0
        self.waiting = False       # stopped at a CORE-Direct WAIT
        self.prio = 3              # priority (PFC class) of this QP's messages
        self.cc = None             # DCQCN reaction point (RoCE with nic.dcqcn)
        # A request being sent segment by segment (DCQCN, Rnic._next_segment), and the
        # requests posted meanwhile, sent after it in order: _send_request arguments.
        self.seg = None
        self.seg_wait = None
        # The same for a multi-packet READ response of this QP and the responses behind it
        # (_reply arguments).
        self.rseg = None
        self.rseg_wait = None
        # When a request of this QP (a response to it) arrived late, by ``shift_*``
        # [ns], because packets overtook it on the way: until ``hold_*``, when it is
        # taken, the QP's later requests (responses) are as late (see Rnic._arrived).
        self.hold_req = 0.0
        self.hold_resp = 0.0
        self.shift_req = 0.0
        self.shift_resp = 0.0


class Msg:
    __slots__ = ("kind", "wr", "qp", "dst_qpn", "npkts", "src", "seq", "data", "old", "wire",
                 "ecn", "late")

    def __init__(self, kind, wr, qp, dst_qpn, npkts, seq) -> None:
        self.kind = kind      # REQUEST, RESPONSE (READ/atomic), ACK or NAK
        self.wr = wr
        self.qp = qp
        self.dst_qpn = dst_qpn
        self.npkts = npkts
        self.seq = seq
        self.data = None
        self.old = 0
        self.wire = 0
        # Set by link.transmit when switch ports mark packets of it (ECN): the times [ns]
        # the marked packets reach the receiver; consumed (reset) right after booking.
        self.ecn = False
        self.late = 0.0       # [ns] packets that overtook it after its arrival was booked


class Seg:
    """A multi-packet message on its way to the wire, one segment of
    ``Rnic.seg_pkts`` packets at a time (see :meth:`Rnic._next_segment`): a request of
    ``qp`` (``req_qp`` None) or a READ response of ``qp`` to ``req_qp``."""

    __slots__ = ("qp", "req_qp", "flow", "wr", "msg", "path", "dst", "head", "tail", "npk",
                 "length", "ext", "next", "t_free", "prep_at", "live", "late")

    def __init__(self, qp, req_qp, wr, msg, path, dst, head, tail, npk, length,
                 ext) -> None:
        self.qp = qp
        self.req_qp = req_qp
        self.flow = qp if req_qp is None else qp.qpn     # its send-scheduler flow
        self.wr = wr
        self.msg = msg
        self.path = path
        self.dst = dst            # the receiving Rnic
        self.head = head          # [ns] first packet's payload on the NIC (PCIe)
        self.tail = tail          # [ns] last packet's payload on the NIC
        self.npk = npk
        self.length = length      # [B] payload of the whole message
        self.ext = ext            # [B] extension headers of the first packet
        self.next = 0             # index of the next packet to send
        self.t_free = 0.0         # [ns] when the segment sent last has left at line rate
        self.prep_at = 0.0        # [ns] when the next segment is prepared (its event)
        self.live = True          # False once sent whole or flushed
        # [ns] what packets overtaking a segment before the last added: not the message's
        # delay (see Rnic._emit_segment), never read.
        self.late = 0.0
