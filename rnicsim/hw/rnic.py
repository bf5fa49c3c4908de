"""RNIC: processing units, QP-context and translation caches, atomic unit, transports.

Scope
    A callback-driven model of an RDMA NIC (no SimPy processes). Work flows as:

        doorbell ──► requester (QP's PU) ──► egress link ─► fabric ─► responder (QP's PU)
           ▲  (MMIO, or DMA read of WQEs)       │                         │
           │                                    │      READ/atomic response, ACK
        CPU posts                         CQE ◄─┴── completer (QP's PU) ◄─┘

    - Processing units (PUs): ``processing_units`` FIFO servers; a QP is served by one PU
      (``qpn mod PUs``), which keeps its work in order and bounds one QP's message rate.
      Per-opcode service times for the requester, responder and completer roles, plus
      ``per_packet`` for each extra MTU packet of a message.
    - QP-context cache (LRU, ``qp_cache_entries``): every use of a QP by a PU looks its
      context up; a miss fetches ``qp_context_size`` bytes over PCIe. The PU goes on with
      other work meanwhile (the NIC keeps many contexts in flight), but the operation, and
      every later one of that QP, waits for the context: misses cost latency and PCIe
      bandwidth. With ``qpc_miss_stall`` (ConnectX-3) the PU itself waits for the
      context, so misses cost message rate too.
    - Translation (MTT) cache (LRU, ``mtt_cache_entries``) keyed by page: a miss delays the
      data access by a PCIe read of ``mtt_entry_size``; 2 MiB pages need 512x fewer entries.
    - Atomic unit: ``atomic_units`` in flight, per-address order, each doing a PCIe
      read-modify-write (the unit is held for the read and ``atomic_service``; the
      response waits for the write-back to land); ``stall_nic`` mode (ConnectX-3) also
      holds every PU while the unit works.
    - Inline payloads travel in the WQE; others are fetched by a DMA read. CQEs are written
      only for signaled WQEs. ``max_rd_atomic`` READ/atomics may be outstanding per QP.
    - Transports: RC (responses/ACKs, in-order completion, a dead peer breaks the QP after
      the retry timeout and flushes it), UC (no ACKs), UD (one packet of at most the MTU;
      dropped when no RECV is posted).
    - Send scheduler (``nic.tx_arbitration`` ``message``, ConnectX): messages (requests,
      READ/atomic responses) wait in per-QP queues while another message is on the
      egress wire, and the wire takes them round robin between QPs, one whole message per
      turn (:meth:`Rnic._on_pull`), booking each on the fabric only when it starts. ``fifo``
      sends each message as soon as it is ready, in that order (booked ahead on the
      calendars, whatever its QP); ``packet`` interleaves packets (``hw/calendar.py``).
      ACKs and CNPs go at once in every mode.
    - Receive queue: the NIC keeps up to ``recv_prefetch`` posted RECV descriptors per QP
      on board, reading them from host memory (``recv_wqe_size`` each, one DMA read per
      fetch) when RECVs are posted and again whenever consumption leaves half of that or
      less; a SEND's payload is placed only once the descriptor of the RECV it consumes is
      on the NIC. Every received SEND thus costs PCIe read bandwidth that a WRITE does not,
      and a deep receive queue posted at once is not read all at once.

Ports
    ``pcie`` (:class:`~rnicsim.hw.pcie.Pcie`), ``egress`` (first :class:`LinkDir` of every
    route, wired by the fabric), ``fabric.route(src_id, dst_id)`` and ``fabric.nics``.

    - RoCE congestion control (``nic.dcqcn``, off by default): each packet an ECN-marking
      switch port marked makes the receiving NIC, when it arrives, send a CNP to the
      sending QP (at most one per QP per ``cnp_interval``); each QP has a DCQCN reaction point
      (:class:`~rnicsim.hw.dcqcn.Dcqcn`) that paces its requests and READ responses.
      ``QpHw.prio`` is the priority its messages carry (3, PFC class of RDMA traffic).

Traces
    ``nic.qpc_miss``, ``nic.ud_drop``, ``nic.rnr``, ``nic.qp_error``.

Params (profile ``nic``, ``link``, ``pcie``): see :mod:`rnicsim.profile`.
"""
from __future__ import annotations

from array import array
from collections import deque
from heapq import heapify, heappop, heappush

from .cache import LruCache
from .cq import Cq
from .dcqcn import Dcqcn
from .link import transmit
from .memory import MemoryRegion
from .pcie import Pcie
from .wqe import (AETH, ATOMIC_ACK_ETH, ATOMIC_ETH, CAS, CATEGORY, DETH, FAA, GRH, IMMDT,
                  LOC_LEN_ERR, READ, RECV, RECV_RDMA_WITH_IMM, REM_ACCESS_ERR, REM_INV_REQ_ERR, WAIT,
                  RETH, RETRY_EXC_ERR, SEND, SEND_WITH_IMM,
                  SUCCESS, WR_FLUSH_ERR, WRITE, WRITE_WITH_IMM, WorkCompletion, WorkRequest)

RC, UC, UD = "RC", "UC", "UD"
RTS, ERR = "RTS", "ERR"
_IS_ATOMIC = (False, False, False, False, False, True, True, False)
_HAS_PAYLOAD = (True, True, True, True, False, False, False, False)
_HAS_IMM = (False, True, False, True, False, False, False, False)
_REQ_EXT = (0, IMMDT, RETH, RETH + IMMDT, RETH, ATOMIC_ETH, ATOMIC_ETH, 0)

_INF = float("inf")


def _hold_back(qp: "QpHw", wrs) -> None:
    """Append ``wrs`` to the WRs ``qp`` holds back (``qp.pending``)."""
    if qp.pending:
        qp.pending.extend(wrs)
    else:
        qp.pending = list(wrs)


def _track(qp: "QpHw", seq: int, wr) -> None:
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
                 "seg_wait", "rseg", "rseg_wait")

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


class _Msg:
    __slots__ = ("kind", "wr", "qp", "dst_qpn", "npkts", "src", "seq", "data", "old", "wire",
                 "ecn", "late")

    def __init__(self, kind, wr, qp, dst_qpn, npkts, seq) -> None:
        self.kind = kind      # 0 request, 1 response (READ/atomic), 2 ACK
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


class _Seg:
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


class Rnic:
    """One RDMA NIC (see module doc). ``nic_id`` is unique in the cluster."""

    def __init__(self, sim, nic_id: int, node: int, profile, memory: dict[int, MemoryRegion],
                 name: str) -> None:
        self.sim = sim
        self.id = nic_id
        self.node = node
        self.name = name
        self.memory = memory            # rkey -> region of this NIC's host
        n, l = profile.nic, profile.link
        self.p = n
        self.mtu = l.mtu
        self.pkt_ovh = l.packet_overhead
        self.pcie = Pcie(profile.pcie, sim.env)
        self.pu_busy = [0.0] * max(1, n.processing_units)
        # Per PU, the recent bookings as flat triples (event time [ns], busy-until before
        # it [ns], work [ns]) in an array of doubles (24 B a booking, no objects: 800 NICs
        # x 16 PUs keep ~20 MB at most): a multi-packet message is served when its last
        # byte is in, but its packets were processed as they came, so work the PU took on
        # meanwhile (an ACK a few ns before the last byte) must not push the whole message
        # after it (`_serve`).
        self.pu_log = [array("d") for _ in self.pu_busy]
        # Work booked on the PUs so far [ns], all PUs together (every booking goes through
        # `_pu_logged`), for utilization meters (Cluster.utilization_meter).
        self.pu_work_ns = 0.0
        # Messages put off by `_arrived` (taken when called again): a set, not a QP field,
        # since few messages are ever put off and there are millions of QPs.
        self._held: set = set()
        self.qpc_stall = n.qpc_miss_stall
        # PU service time [ns] of each role, indexed by opcode (the profile gives them per
        # CATEGORY of opcode).
        self.req_t = tuple(n.requester[c] for c in CATEGORY)
        self.resp_t = tuple(n.responder[c] for c in CATEGORY)
        self.comp_t = tuple(n.completer[c] for c in CATEGORY)
        self.per_pkt = n.per_packet
        self.qpc = LruCache(n.qp_cache_entries)
        self.mtt = LruCache(n.mtt_cache_entries)
        self.mtt_ready: dict = {}       # page -> when its translation arrives (misses)
        self._mtt_ready_max = 2 * n.mtt_cache_entries + 64   # forget past arrivals beyond
        self.atomic_busy = [0.0] * max(1, n.atomic_units)
        self.atomic_addr: dict = {}
        self.stall_nic = n.atomic_mode == "stall_nic"
        self.max_rd = n.max_rd_atomic
        self.qps: dict[int, QpHw] = {}
        self.fabric = None              # set by the fabric
        self.up = True
        self._next_qpn = 0
        self.ack_bytes = self.pkt_ovh + AETH
        self.ns_per_byte_in = 8e9 / l.rate
        self.counters = {"ud_drop": 0, "rnr": 0, "len_err": 0, "qpc_miss": 0, "mtt_miss": 0,
                         "cnp_sent": 0, "cnp_received": 0}
        self.dcqcn = l.kind == "roce" and n.dcqcn
        # A request or READ response longer than ``seg_pkts`` MTU packets goes to the wire
        # segment by segment (`_next_segment`), so that (1) switch ports share themselves
        # between long messages of different senders (profile switch.interleave_segment,
        # the model's resolution of packet interleaving; 0 = whole messages) and (2) with
        # DCQCN, CNPs that come while a long message is sent slow down the rest of it: each
        # segment is paced at the rate its QP has when it is sent, and a segment takes at
        # most a quarter of cnp_interval at line rate (CNPs and rate-timer events are at
        # least cnp_interval / dcqcn_timer apart). At least one packet. The NIC's own
        # arbitration stays per message: a segmented message keeps the wire for its QP.
        seg = []
        if self.dcqcn:
            seg.append(int(n.cnp_interval / 4 // ((self.mtu + self.pkt_ovh) * 8e9 / l.rate)))
        il = profile.switch.interleave_segment
        if il > 0:
            seg.append(il // self.mtu)
        self.seg_on = bool(seg)
        self.seg_pkts = max(1, min(seg)) if seg else 1 << 62
        self._tx_hold = None            # the _Seg whose message holds the wire
        # Bytes of GRH a UD receive writes before the payload: a RoCE packet always carries
        # one; an InfiniBand packet inside one subnet has none, and then the first 40 B of
        # the receive buffer are left undefined, not written (IBA vol. 1 rel. 1.4,
        # 11.4.1.2), though the payload still starts at offset 40.
        self.ud_grh_write = GRH if l.kind == "roce" else 0
        self.line_rate = l.rate
        self._cnp_last: dict = {}       # (nic id, qpn) of a sender -> time of its last CNP
        # Send scheduler (tx_arbitration message): flow (a QP for its requests, its qpn
        # for its responses) -> deque of (ready, emit, args) of the messages waiting for
        # the wire; the flows with any, in round-robin order; the time of the next pull of
        # the wire (None: none scheduled).
        self.tx_rr = n.tx_arbitration == "message"
        self._txq: dict = {}
        self._ring: deque = deque()
        self._pull_at = None
        # The head message of every waiting flow, for a pull to see at once that none can
        # go (`_on_pull`): a heap of (ready [ns], seq, flow, head); an entry whose head has
        # gone is stale and dropped when it comes to the top. And the first-packet times
        # [ns] of the heads, with how many heads have each.
        self._tx_heads: list = []
        self._tx_durs: dict = {}
        self._tx_seq = 0
        # The flow whose message is last on the wire, and when that message starts [ns]:
        # a message committed ahead for a later time may go after one committed later
        # for an earlier time (round robin goes by the wire's order, not commits').
        self._tx_last = None
        self._tx_last_at = -_INF

    # ----------------------------------------------------------------- resources
    def create_qp(self, qtype: str, send_cq: Cq, recv_cq: Cq) -> QpHw:
        """Allocate a QP context (lazily cached on first use)."""
        self._next_qpn += 1
        qp = QpHw(self, self._next_qpn, qtype, send_cq, recv_cq)
        if self.dcqcn:
            qp.cc = Dcqcn(self.p, self.line_rate)
        self.qps[qp.qpn] = qp
        return qp

    def _qpc_lookup(self, qp: QpHw, t: float) -> float:
        """Time [ns] the context of ``qp`` is on the NIC for work starting at ``t``."""
        qpc = self.qpc
        d = qpc._d
        qpn = qp.qpn
        if qpn in d:
            # A hit: LruCache.access inlined (it is this, for a key already cached).
            d.move_to_end(qpn)
            qpc.hits += 1
            r = qp.ctx_ready
            return t if t > r else r
        qpc.access(qpn)     # the miss: counted and inserted by the cache
        self.counters["qpc_miss"] += 1
        if self.sim.trace.enabled:
            self.sim.trace.emit(t, "nic.qpc_miss", self.name, qpn=qp.qpn)
        r = self.pcie.dma_read(t, self.p.qp_context_size)
        qp.ctx_ready = r
        return r

    def _translate(self, mr: MemoryRegion, offset: int, n: int, t: float) -> float:
        """Time the data access can start after translating ``[offset, offset+n)``."""
        ps = mr.page_size
        first, last = offset // ps, (offset + max(n, 1) - 1) // ps
        ready = self.mtt_ready
        mtt = self.mtt
        cached = mtt._d
        rkey = mr.rkey
        t0 = t
        for page in range(first, last + 1):
            key = (rkey, page)
            if key in cached:
                # A hit: LruCache.access inlined (see _qpc_lookup).
                cached.move_to_end(key)
                mtt.hits += 1
                r = ready.get(key, 0.0)     # a miss may still be on its way
                if r > t:
                    t = r
            else:
                mtt.access(key)             # the miss: counted and inserted by the cache
                self.counters["mtt_miss"] += 1
                r = self.pcie.dma_read(t0, self.p.mtt_entry_size)
                ready[key] = r
                if r > t:
                    t = r
        if len(ready) > self._mtt_ready_max:
            now = self.sim.now
            for k in [k for k, v in ready.items() if v <= now]:
                del ready[k]
        return t

    def _npkts(self, length: int) -> int:
        return 1 if length <= self.mtu else -(-length // self.mtu)

    def wire_bytes(self, length: int, ext_first: int) -> int:
        """On-wire bytes of a message of ``length`` payload bytes."""
        return length + self._npkts(length) * self.pkt_ovh + ext_first

    # ----------------------------------------------------------------- send queue
    def doorbell(self, qp: QpHw, wrs: list[WorkRequest]) -> None:
        """The NIC has the WQEs of one doorbell (called at that time by the verbs layer)."""
        if qp.state is ERR:
            self._flush(qp, wrs)
            return
        if qp.pending or qp.waiting:
            _hold_back(qp, wrs)
            return
        self._run_sq(qp, wrs, 0)

    def _run_sq(self, qp: QpHw, wrs, start: int) -> None:
        sim = self.sim
        now = sim.env._now
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
                    _hold_back(qp, wrs[i + 1:])
                    qp.waiting = True
                    pu_busy[pu] = t
                    self._pu_logged(pu, now, before, t - t0)
                    cq.nic_wait(wr.wait_count, lambda q=qp: self._resume_wait(q))
                    return
                continue
            if op >= READ:  # READ, CAS, FAA need a slot (WAIT was handled above)
                if qp.rd_out >= self.max_rd:
                    _hold_back(qp, wrs[i:])
                    break
                qp.rd_out += 1
            ctx = self._qpc_lookup(qp, t)
            if ctx > t and self.qpc_stall:
                t = ctx         # the PU waits for the context (nic.qpc_miss_stall)
            length = wr.length if _HAS_PAYLOAD[op] else 0
            svc = req_t[op]
            t += svc
            head = t if t > ctx + svc else ctx + svc
            if length <= mtu:
                npk = 1
                tail = head
            else:
                npk = -(-length // mtu)
                t += (npk - 1) * self.per_pkt
                tail = head + (npk - 1) * self.per_pkt
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
        msg = _Msg(0, wr, qp, dst_qpn, npk, qp.seq)
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
            qp.seg = _Seg(qp, None, wr, msg, path, fab.nics[dst_id], ready, tail, npk,
                          length, ext)
            qp.seg_wait = []
            self._next_segment(qp.seg)
            return
        cc = qp.cc
        if cc is not None:
            ready, tail = self._pace(cc, ready, tail, wire, npk, length)
        if self.tx_rr:
            eg = path[0]
            start = self._direct(eg, ready, qp.prio)
            if start is None:
                dur = (wire if npk == 1 else self.mtu + self.pkt_ovh) * eg.ns_per_byte
                self._wait_wire(qp, ready, qp.prio, dur, self._emit_request,
                                (qp, wr, msg, path, dst_id, ready, tail, wire, npk, length))
                return
            self._sent(qp, start)
        self._emit_request(ready, qp, wr, msg, path, dst_id, ready, tail, wire, npk, length)

    def _next_segment(self, st: _Seg) -> None:
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
        if self.tx_rr:
            eg = st.path[0]
            start = self._direct(eg, ready, qp.prio)
            if start is None:
                dur = (wire if n == 1 else self.mtu + self.pkt_ovh) * eg.ns_per_byte
                self._wait_wire(st.flow, ready, qp.prio, dur, self._emit_segment,
                                (st, ready, tail, wire, n, payload))
                return
            self._sent(st.flow, start)
        self._emit_segment(ready, st, ready, tail, wire, n, payload)

    def _emit_segment(self, t: float, st: _Seg, ready: float, tail: float, wire: int,
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
        if msg.ecn:
            st.dst._marks_arrive(msg.ecn, qp)
            msg.ecn = False
        st.next += n
        if st.next < st.npk:
            # The next segment is prepared one packet's time before this one has left
            # (the scheduler's window), at the limiter's rate of that moment; meanwhile
            # the QP holds the wire (Rnic._on_pull).
            eg = path[0]
            st.t_free = tail + (min(payload, self.mtu) + self.pkt_ovh) * eg.ns_per_byte
            t_free2 = ready + wire * eg.ns_per_byte
            if t_free2 > st.t_free:
                st.t_free = t_free2
            now = self.sim.env._now
            at = st.t_free - eg.quantum
            st.prep_at = at = at if at > now else now
            self.sim.call_at(at, self._next_segment, st)
            if self.tx_rr:
                self._tx_hold = st
            return
        st.live = False
        if self._tx_hold is st:
            self._tx_hold = None
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

    def _emit_request(self, t: float, qp: QpHw, wr: WorkRequest, msg: "_Msg", path,
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
        if pkt is not None and msg.ecn:
            fab.nics[dst_id]._marks_arrive(msg.ecn, qp)
            msg.ecn = False
        self._after_request(qp, wr, msg, path, dst_id, ready, tail, wire, length, arrive)

    def _after_request(self, qp: QpHw, wr: WorkRequest, msg: "_Msg", path, dst_id: int,
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
        if not dst.up or not fab.path_up(path):
            if qtype == RC:
                if wr.signaled:
                    _track(qp, msg.seq, wr)
                self.sim.call_at(self.sim.now + qp.timeout_ns, self._rc_timeout, qp)
            return
        self.sim.call_at(arrive, dst._rx_request, msg)
        if qtype == RC:
            if wr.signaled:
                _track(qp, msg.seq, wr)
        elif wr.signaled:
            # UD/UC complete locally once the message has left the NIC.
            t_sent = (ready if ready > tail else tail) + wire * self.ns_per_byte_in
            t_cqe = self.pcie.dma_write(t_sent, self.p.cqe_size)
            self._complete(qp, wr, SUCCESS, t_cqe, length)

    # ----------------------------------------------------------------- send scheduler
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
        if start >= self._tx_last_at:
            self._tx_last = flow
            self._tx_last_at = start

    def _direct(self, eg, ready: float, prio: int) -> float | None:
        """When a message ready at ``ready`` [ns] starts if it goes at once; None when it
        goes to the send scheduler instead: other messages wait, or the wire is not free
        within one packet's time of ``ready``. (Free here is free at that instant: a gap
        shorter than the message before a message booked ahead lets it through, to be
        booked after that one. Checking the fit here sent many of fig. 5a's READ responses
        through the scheduler: 5.4 instead of 3.8 events per verb and 4x the wall time
        (benchmarks/engine.py); the scheduler's own pulls do check it, `_commit_head`.)"""
        if self._txq:
            return None
        hold = self._tx_hold
        if hold is not None and hold.live:
            return None        # a segmented message holds the wire (Rnic._on_pull)
        f = self._free_at(eg, ready, prio)
        return None if f - ready > eg.quantum else f

    def _wait_wire(self, flow, ready: float, prio: int, dur: float, emit,
                   args: tuple) -> None:
        """Queue a message of ``flow`` and priority ``prio``, ready at ``ready`` [ns],
        whose first packet takes ``dur`` [ns] on the wire, for the send scheduler;
        ``emit(t, *args)`` puts it on the wire not before ``t``."""
        q = self._txq.get(flow)
        msg = (ready, dur, emit, args)
        if q is None:
            q = self._txq[flow] = deque()
            self._ring.append(flow)
            q.append(msg)
            self._head_in(flow, msg)
        else:
            q.append(msg)
        eg = self.fabric.egress[self.id]
        self._pull(prio, self._free_at(eg, ready, prio, dur) - eg.quantum)

    def _head_in(self, flow, msg: tuple) -> None:
        """``msg`` became the head message of ``flow`` (see ``_tx_heads``)."""
        self._tx_seq += 1
        heads = self._tx_heads
        heappush(heads, (msg[0], self._tx_seq, flow, msg))
        d = self._tx_durs
        d[msg[1]] = d.get(msg[1], 0) + 1
        txq = self._txq
        if len(heads) > 4 * len(txq) + 64:
            # Stale entries only leave from the top: keep memory bounded on long runs.
            heads[:] = [e for e in heads if e[2] in txq and txq[e[2]][0] is e[3]]
            heapify(heads)

    def _pull(self, prio: int, at: float) -> None:
        """Have the scheduler run at ``at`` [ns] (the earliest pull wins)."""
        now = self.sim.env._now
        if at < now:
            at = now
        if self._pull_at is None or at < self._pull_at:
            self._pull_at = at
            self.sim.call_at(at, self._on_pull, prio)

    def _on_pull(self, prio: int) -> None:
        """Commit waiting messages, taking the QPs round robin (a QP whose head message is
        not ready by the time the wire frees loses its turn; the QP that sent last goes
        after the others), while the wire frees within one packet's time."""
        now = self.sim.env._now
        if self._pull_at != now:
            return                  # superseded by an earlier pull
        self._pull_at = None
        eg = self.fabric.egress[self.id]
        w = eg.quantum
        ring, txq = self._ring, self._txq
        while txq:
            free = self._free_at(eg, now, prio)
            if free - now > w + 1e-6:     # (a pull at free - w rounds either way)
                self._pull(prio, free - w)
                return
            hold = self._tx_hold
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
                    self._pull_at = None
                    self._pull(prio, hold.prep_at)
                    return
                self._tx_hold = None
            # Round robin from the ring's front (flows that joined go to its back); the
            # flow that sent last goes after every other, even one skipped in front of it.
            last = self._tx_last
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
            heads = self._tx_heads
            # Drop stale entries from the top; it ends: every waiting flow (txq is not
            # empty here) has its current head in the heap.
            while True:
                _, _, fl, hd = heads[0]
                q = txq.get(fl)
                if q is not None and q[0] is hd:
                    break
                heappop(heads)
            dmax = max(self._tx_durs)
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
                    f = fits.get(dur)
                    if f is None:
                        f = fits[dur] = self._free_at(eg, free, prio, dur)
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
                    t_ok = self._commit_head(last, eg, prio, free, now, True, fits)
                    if t_ok is None:
                        continue
                    if t_ok < first:
                        first = t_ok
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
        txq = self._txq
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
            d = self._tx_durs
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
                    self._ring.pop()
                else:
                    self._ring.remove(flow)
            self._sent(flow, f)
            emit(now, *args)
            return None
        return ready if ready > f else f - eg.quantum

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

    def _marks_arrive(self, times: list, src_qp: QpHw) -> None:
        """Notification point: packets of ``src_qp`` that switch ports marked reach this
        NIC at ``times`` [ns] (ascending, booked ahead by the sender). One event per mark
        that could yield a CNP: marks closer than ``cnp_interval`` to the last one kept
        would be refused by :meth:`_send_cnp` anyway."""
        gap = self.p.cnp_interval
        call_at = self.sim.call_at
        now = self.sim.env._now
        last = None
        for t in times:
            if last is None or t - last >= gap:
                call_at(t if t > now else now, self._on_mark, src_qp)
                last = t

    def _on_mark(self, src_qp: QpHw) -> None:
        if self.up:
            self._send_cnp(src_qp)

    def _send_cnp(self, src_qp: QpHw) -> None:
        """Notification point: a marked packet of ``src_qp`` arrived now; CNP unless one
        was sent to that QP less than ``cnp_interval`` ago."""
        now = self.sim.env._now
        key = (src_qp.nic.id, src_qp.qpn)
        last = self._cnp_last.get(key)
        if last is not None and now - last < self.p.cnp_interval:
            return
        self._cnp_last[key] = now
        self.counters["cnp_sent"] += 1
        path = self.fabric.route(self.id, src_qp.nic.id)
        arrive = transmit(path, now, self.pkt_ovh + 16, None, 0, src_qp.prio)
        if src_qp.nic.up and self.fabric.path_up(path):
            self.sim.call_at(arrive, src_qp.nic._rx_cnp, src_qp)

    def _rx_cnp(self, qp: QpHw) -> None:
        """Reaction point: a CNP for ``qp`` arrived."""
        self.counters["cnp_received"] += 1
        if qp.cc is not None:
            qp.cc.on_cnp(self.sim.env._now)

    # ----------------------------------------------------------------- responder
    def _arrived(self, msg: _Msg, fn) -> bool:
        """Whether ``msg`` may be taken now; if not, ``fn(msg)`` is called again when it
        may: after the time packets overtaking it on the way added (``msg.late``); and a
        later message of the same QP that would arrive no later than such a late one is
        as late as that one (it was behind it on the wire; RC keeps them in order). A
        message called again is taken then; same-time calls run in the order they were
        made, which is the QP's order."""
        held = self._held
        if held and msg in held:
            held.discard(msg)
            return True
        now = self.sim.env._now
        q = msg.qp
        late = msg.late
        if late:
            msg.late = 0.0
            t = now + late
            if msg.kind == 0:
                if t > q.hold_req:
                    q.hold_req = t
                    q.shift_req = late
            elif t > q.hold_resp:
                q.hold_resp = t
                q.shift_resp = late
            held.add(msg)
            self.sim.call_at(t, fn, msg)
            return False
        if msg.kind == 0:
            if q.hold_req >= now:
                held.add(msg)
                self.sim.call_at(now + q.shift_req, fn, msg)
                return False
        elif q.hold_resp >= now:
            held.add(msg)
            self.sim.call_at(now + q.shift_resp, fn, msg)
            return False
        return True

    def _rx_request(self, msg: _Msg) -> None:
        if (msg.late or msg.qp.hold_req) and not self._arrived(msg, self._rx_request):
            return
        if not self.up:
            # A dead responder answers nothing: the requester's retries run out.
            req_qp = msg.qp
            if req_qp.type == RC:
                if msg.wr.signaled:
                    _track(req_qp, msg.seq, msg.wr)
                self.sim.call_at(self.sim.now + req_qp.timeout_ns, req_qp.nic._rc_timeout,
                                 req_qp)
            return
        sim = self.sim
        now = sim.env._now
        qp = self.qps.get(msg.dst_qpn)
        req_qp = msg.qp
        if qp is None or qp.state is ERR:
            if req_qp.type == RC:
                sim.call_at(now + req_qp.timeout_ns, req_qp.nic._rc_timeout, req_qp)
            return
        wr = msg.wr
        op = wr.opcode
        t, head = self._serve(qp, msg, self.resp_t[op], now)
        length = wr.length
        if op == SEND or op == SEND_WITH_IMM:
            if not qp.recvs:
                if qp.type == UD or qp.type == UC:
                    self.counters["ud_drop"] += 1
                    if sim.trace.enabled:
                        sim.trace.emit(now, "nic.ud_drop", self.name, qpn=qp.qpn)
                    return
                # RC: receiver not ready -> RNR NAK; the requester retries after the timer.
                self.counters["rnr"] += 1
                sim.call_at(t + 2 * 655360.0 / 64, self._rx_request, msg)  # ~20 us RNR timer
                return
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
            return
        if op == WRITE or op == WRITE_WITH_IMM:
            mr = self.memory.get(wr.rkey) if wr.rkey is not None else None
            if wr.rkey is not None and (mr is None or not mr.check(wr.remote_offset, length)):
                self._nak(qp, msg, t, REM_ACCESS_ERR)
                return
            if mr is not None:
                t = self._translate(mr, wr.remote_offset, length, t)
                if msg.data is not None:
                    mr.write(wr.remote_offset, msg.data)
            t_vis = self.pcie.dma_write(head, length, t) if length else t
            if mr is not None and mr.watch:
                mr.landed(wr.remote_offset, length, t_vis)
            if op == WRITE_WITH_IMM:
                if qp.recvs:
                    recv = qp.recvs.popleft()
                    desc = qp.recv_at.popleft()
                    self._fetch_recvs(qp, now)
                    if desc > t_vis:
                        t_vis = desc
                    wc = WorkCompletion(recv.wr_id, SUCCESS, RECV_RDMA_WITH_IMM, length, qp.qpn,
                                        wr.imm, (req_qp.nic.id, req_qp.qpn), None, wr.t_post)
                    self._push_cqe(qp, qp.recv_cq, wc, self._cqe_after(t, t_vis))
                elif qp.type == RC:
                    self.counters["rnr"] += 1
                    sim.call_at(t + 20480.0, self._rx_request, msg)
                    return
            if qp.type == RC:
                self._ack(qp, msg, t)
            return
        # READ or atomic: a response carries data back.
        mr = self.memory.get(wr.rkey) if wr.rkey is not None else None
        n = length if op == READ else 8
        if wr.rkey is not None and (mr is None or not mr.check(wr.remote_offset, n)):
            self._nak(qp, msg, t, REM_ACCESS_ERR)
            return
        if mr is not None:
            t = self._translate(mr, wr.remote_offset, n, t)
        mtu = self.mtu
        resp = _Msg(1, wr, req_qp, 0,
                    (1 if length <= mtu else -(-length // mtu)) if op == READ else 1, msg.seq)
        if op == READ:
            if mr is not None and wr.local is not None:
                resp.data = mr.read(wr.remote_offset, length)
            wire = length + resp.npkts * self.pkt_ovh + AETH
            resp.wire = wire
            if length > self.mtu:
                # Multi-packet response: packets leave as their data arrives over PCIe.
                f, l = self.pcie.dma_read_span(t, length, self.mtu)
                self._reply(qp, req_qp, resp, f, wire, l, self.mtu + self.pkt_ovh)
            elif length:
                self._reply(qp, req_qp, resp, self.pcie.dma_read(t, length), wire)
            else:
                self._reply(qp, req_qp, resp, t, wire)
            return
        else:
            ready = self._atomic(t, (wr.rkey, wr.remote_offset))
            if mr is not None:
                resp.old = (mr.cas(wr.remote_offset, wr.compare_add, wr.swap) if op == CAS
                            else mr.faa(wr.remote_offset, wr.compare_add))
            wire = self.pkt_ovh + AETH + ATOMIC_ACK_ETH
        self._reply(qp, req_qp, resp, ready, wire)

    def _serve(self, qp: QpHw, msg: _Msg, svc: float, now: float) -> tuple[float, float]:
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
            self._pu_logged(pu, now, busy, t - s0)
        return done, head

    def _pu_logged(self, pu: int, now: float, before: float, work: float) -> None:
        """Record a booking of ``work`` [ns] on PU ``pu`` taken at ``now`` (``before`` =
        its busy-until before) for `_serve`; keeps the recent ones (a message's arrival
        spans a few dozen bookings at most; older ones are forgotten, which serves a
        message from a later backlog than it met, as before this log existed)."""
        self.pu_work_ns += work
        log = self.pu_log[pu]
        log.append(now)
        log.append(before)
        log.append(work)
        if len(log) > 192:
            del log[:96]

    def _atomic(self, t: float, addr) -> float:
        """Run one atomic from time ``t`` on the atomic unit; return when its result is in."""
        busy = self.atomic_busy
        slot = min(range(len(busy)), key=busy.__getitem__)
        start = t if t > busy[slot] else busy[slot]
        prev = self.atomic_addr.get(addr)
        if prev is not None and prev > start:
            start = prev  # same address: strictly one after another
        done = self.pcie.dma_read(start, 8) + self.p.atomic_service
        # The unit is free once it has the old value and issued the write-back; the
        # response leaves when the write-back has landed, so the requester never learns the
        # old value before the new one is visible to others.
        landed = self.pcie.dma_write(done, 8)
        busy[slot] = done
        aa = self.atomic_addr
        aa[addr] = done
        if len(aa) > 4096:
            now = self.sim.now
            for k in [k for k, v in aa.items() if v <= now]:
                del aa[k]
        if self.stall_nic:
            pb = self.pu_busy
            now = self.sim.env._now
            for i in range(len(pb)):
                if pb[i] < done:
                    b = pb[i]
                    w = done - (b if b > now else now)
                    if w > 0:
                        self._pu_logged(i, now, b, w)
                    pb[i] = done
        return landed

    def _reply(self, qp: QpHw, req_qp: QpHw, resp: _Msg, ready: float, wire: int,
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
            qp.rseg = _Seg(qp, req_qp, resp.wr, resp, path, req_qp.nic, ready,
                           ready if tail is None else tail, resp.npkts, resp.wr.length, AETH)
            qp.rseg_wait = []
            self._next_segment(qp.rseg)
            return
        cc = qp.cc
        if cc is not None and resp.kind == 1:
            npk = resp.npkts
            ready, t2 = self._pace(cc, ready, ready if tail is None else tail, wire, npk,
                                   resp.wr.length)
            if tail is not None or npk > 1:
                tail = t2
        if self.tx_rr and resp.kind < 2:
            # (ACKs and NAKs come from the responder's pipeline, not a send queue: they
            # go at once, behind what is on the wire, in every mode.)
            eg = path[0]
            start = self._direct(eg, ready, qp.prio)
            if start is None:
                dur = (last_pkt if last_pkt else wire) * eg.ns_per_byte
                self._wait_wire(qp.qpn, ready, qp.prio, dur, self._emit_reply,
                                (qp, req_qp, resp, path, ready, wire, tail, last_pkt))
                return
            self._sent(qp.qpn, start)
        self._emit_reply(ready, qp, req_qp, resp, path, ready, wire, tail, last_pkt)

    def _emit_reply(self, t: float, qp: QpHw, req_qp: QpHw, resp: "_Msg", path,
                    ready: float, wire: int, tail: float | None, last_pkt: int) -> None:
        """Put response ``resp`` on the wire, not before ``t`` [ns], and schedule its arrival."""
        if ready < t:
            ready = t
            if tail is not None and tail < ready:
                tail = ready
        arrive = transmit(path, ready, wire, tail, last_pkt, qp.prio,
                          resp if self.dcqcn else None, resp if last_pkt else None, qp)
        if resp.ecn:
            # Marked READ response packets: the requester's NIC notifies the responder's QP.
            req_qp.nic._marks_arrive(resp.ecn, qp)
            resp.ecn = False
        self._after_reply(qp, req_qp, resp, path, ready, tail, arrive)

    def _after_reply(self, qp: QpHw, req_qp: QpHw, resp: "_Msg", path, ready: float,
                     tail: float | None, arrive: float) -> None:
        """Response ``resp`` is booked to arrive at ``arrive`` [ns]: order and delivery."""
        qp.resp_ready = tail if tail is not None and tail > ready else ready
        if arrive < req_qp.resp_arrive_last:
            arrive = req_qp.resp_arrive_last
        req_qp.resp_arrive_last = arrive
        if req_qp.nic.up and self.fabric.path_up(path):
            self.sim.call_at(arrive, req_qp.nic._rx_response, resp)

    def _ack(self, qp: QpHw, msg: _Msg, t: float) -> None:
        qp.ack_count += 1
        if msg.wr.signaled or qp.ack_count % self.p.ack_coalesce == 0:
            resp = _Msg(2, msg.wr, msg.qp, 0, 1, msg.seq)
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

    def _nak(self, qp: QpHw, msg: _Msg, t: float, status: int) -> None:
        resp = _Msg(3, msg.wr, msg.qp, 0, 1, msg.seq)
        resp.old = status
        self._reply(qp, msg.qp, resp, t, self.ack_bytes)

    # ----------------------------------------------------------------- completer
    def _rx_response(self, msg: _Msg) -> None:
        if (msg.late or msg.qp.hold_resp) and not self._arrived(msg, self._rx_response):
            return
        if not self.up:
            return
        qp = msg.qp
        if qp.state is ERR:
            return
        now = self.sim.env._now
        wr = msg.wr
        op = wr.opcode
        t, head = self._serve(qp, msg, self.comp_t[op], now)
        if msg.kind == 3:  # NAK: the QP breaks
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
        cq.push(wc, t)

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
        self._fetch_recvs(qp, self.sim.env._now)

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

    # ----------------------------------------------------------------- failures
    def _rc_timeout(self, qp: QpHw) -> None:
        if qp.state is ERR:
            return
        self._break(qp, self.sim.now, RETRY_EXC_ERR)

    def _break(self, qp: QpHw, t: float, first_status: int = WR_FLUSH_ERR) -> None:
        """Move ``qp`` to the error state and flush everything it holds."""
        qp.state = ERR
        if self.sim.trace.enabled:
            self.sim.trace.emit(t, "nic.qp_error", self.name, qpn=qp.qpn)
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

    def fail(self) -> None:
        """The NIC (or its node) goes down: it sends and receives nothing from now on."""
        self.up = False
