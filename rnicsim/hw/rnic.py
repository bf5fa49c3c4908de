"""RNIC: the NIC composed of its parts, and its congestion-notification glue.

Scope
    A callback-driven model of an RDMA NIC (no SimPy processes). Work flows as:

        doorbell ──► requester (QP's PU) ──► egress link ─► fabric ─► responder (QP's PU)
           ▲  (MMIO, or DMA read of WQEs)       │                         │
           │                                    │      READ/atomic response, ACK
        CPU posts                         CQE ◄─┴── completer (QP's PU) ◄─┘

    Each part has its own module of ``rnicsim/hw``:

    ============================  ==============================================
    :mod:`~rnicsim.hw.qp`         QP state (:class:`QpHw`), messages, kinds
    :mod:`~rnicsim.hw.pu`         processing units (FIFO servers, per-opcode work)
    :mod:`~rnicsim.hw.qpc`        QP-context cache and translation (MTT) cache
    :mod:`~rnicsim.hw.atomic`     atomic unit
    :mod:`~rnicsim.hw.requester`  send queue, requests, segmentation, pacing
    :mod:`~rnicsim.hw.arbiter`    transmit arbiter strategies (``nic.tx_arbitration``)
    :mod:`~rnicsim.hw.responder`  requests arriving (per opcode family), responses, RECVs
    :mod:`~rnicsim.hw.completer`  responses arriving, CQEs, broken QPs
    ============================  ==============================================

    The parts other than the arbiter are one chain of classes without state of their
    own, each adding its methods to the one before (ContextCaches <- ProcessingUnits <-
    AtomicUnit <- Completer <- Requester <- Responder), and :class:`Rnic` inherits the
    last: the per-verb path calls across them as plain methods of one object (no
    indirection through child objects), and their state is the Rnic's, set up in
    :meth:`Rnic.__init__` (in the compiled build the chain is C classes and
    ``rnicsim/hw/qpc.pxd`` declares that state). The arbiter is a strategy object
    (``Rnic.tx``) chosen once.

    - Inline payloads travel in the WQE; others are fetched by a DMA read. CQEs are written
      only for signaled WQEs.
    - Transports: RC (responses/ACKs, in-order completion, a dead peer breaks the QP after
      the retry timeout and flushes it), UC (no ACKs), UD (one packet of at most the MTU;
      dropped when no RECV is posted).
    - RoCE congestion control (``nic.dcqcn``, off by default): each packet an ECN-marking
      switch port marked makes the receiving NIC, when it arrives, send a CNP to the
      sending QP (at most one per QP per ``cnp_interval``); each QP has a DCQCN reaction point
      (:class:`~rnicsim.hw.dcqcn.Dcqcn`) that paces its requests and READ responses.
      ``QpHw.prio`` is the priority its messages carry (3, PFC class of RDMA traffic).
    - Packets overtaking a message on the way make it late (``Msg.late``); a later message
      of the same QP is then as late (:meth:`Rnic._arrived`).

Ports
    ``pcie`` (:class:`~rnicsim.hw.pcie.Pcie`), ``egress`` (first :class:`LinkDir` of every
    route, wired by the fabric), ``fabric.route(src_id, dst_id)`` and ``fabric.nics``.

Traces
    Scope ``<nic>`` or ``<nic>/<unit>`` (``pu<k>``, ``qpc``, ``mtt``, ``atomic``); those
    with an end time last from their time to ``end`` [ns] (see :data:`Rnic.TRACES`):
    ``nic.doorbell``, ``nic.requester``, ``nic.responder``, ``nic.completer``,
    ``nic.wqe_fetch``, ``nic.qpc_hit``, ``nic.qpc_miss``, ``nic.mtt_lookup``,
    ``nic.mtt_miss``, ``nic.atomic``, ``nic.tx``,
    ``nic.cqe``, ``nic.ud_drop``, ``nic.qp_error``. Its PCIe attachment and the links
    emit their own (:mod:`rnicsim.hw.pcie`, :mod:`rnicsim.hw.link`).

Params (profile ``nic``, ``link``, ``pcie``): see :mod:`rnicsim.profile`.
"""
from __future__ import annotations

from array import array

from .arbiter import make_arbiter
from .cache import LruCache, QpLru
from .cq import Cq
from .dcqcn import Dcqcn
from .link import transmit
from .memory import MemoryRegion
from .pcie import Pcie
from .qp import CNP, ERR, RC, REQUEST, RTS, UC, UD, Msg, QpHw, Seg  # noqa: F401 (re-exported)
from .responder import Responder
from .wqe import AETH, CATEGORY, GRH

__all__ = ["Rnic", "QpHw", "Msg", "Seg", "RC", "UC", "UD", "RTS", "ERR"]


class Rnic(Responder):
    """One RDMA NIC (see module doc). ``nic_id`` is unique in the cluster."""

    TRACES = {
        "nic.doorbell": "a doorbell's WQEs are on the NIC (qpn, wqes)",
        "nic.requester": "a PU processes a WQE (span on <nic>/pu<k>; qpn, op, bytes)",
        "nic.responder": "a PU serves an arriving request (span; qpn, op, kind)",
        "nic.completer": "a PU serves an arriving response, ACK or NAK (span)",
        "nic.qpc_hit": "a QP's context is in the NIC's cache (qpn)",
        "nic.qpc_miss": "a QP's context is fetched over PCIe (span on <nic>/qpc; qpn)",
        "nic.wqe_fetch": "after a plain doorbell, the NIC reads the WQEs over PCIe (span)",
        "nic.mtt_lookup": "a buffer's pages are translated (on <nic>/mtt; ready [ns])",
        "nic.mtt_miss": "a page translation is fetched over PCIe (span on <nic>/mtt)",
        "nic.atomic": "the atomic unit executes a CAS or FAA (span on <nic>/atomic)",
        "nic.tx": "a message (or a segment of one) goes to the wire: its headers' fields",
        "nic.cqe": "a completion becomes visible in host memory (scope: the CQ)",
        "nic.ud_drop": "a UD/UC SEND finds no RECV and is dropped (qpn)",
        "nic.qp_error": "a QP moves to the error state (qpn)",
    }

    def __init__(self, sim, nic_id: int, node: int, profile, memory: dict[int, MemoryRegion],
                 name: str) -> None:
        self.sim = sim
        # The clock and the trace hub, read on every verb (sim.env and sim.trace, which a
        # Simulation never replaces).
        self.env = sim.env
        self.trace = sim.trace
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
        self.qpc = QpLru(n.qp_cache_entries)
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
        # Bytes of GRH a UD receive writes before the payload: a RoCE packet always carries
        # one; an InfiniBand packet inside one subnet has none, and then the first 40 B of
        # the receive buffer are left undefined, not written (IBA vol. 1 rel. 1.4,
        # 11.4.1.2), though the payload still starts at offset 40.
        self.ud_grh_write = GRH if l.kind == "roce" else 0
        self.line_rate = l.rate
        self._cnp_last: dict = {}       # (nic id, qpn) of a sender -> time of its last CNP
        # The transmit arbiter, chosen once (hw/arbiter.py); it reads self.sim.
        self.tx = make_arbiter(n.tx_arbitration, self)

    # ----------------------------------------------------------------- resources
    def create_qp(self, qtype: str, send_cq: Cq, recv_cq: Cq) -> QpHw:
        """Allocate a QP context (lazily cached on first use)."""
        self._next_qpn += 1
        qp = QpHw(self, self._next_qpn, qtype, send_cq, recv_cq)
        if self.dcqcn:
            qp.cc = Dcqcn(self.p, self.line_rate)
        self.qps[qp.qpn] = qp
        return qp

    def _npkts(self, length: int) -> int:
        return 1 if length <= self.mtu else -(-length // self.mtu)

    def wire_bytes(self, length: int, ext_first: int) -> int:
        """On-wire bytes of a message of ``length`` payload bytes."""
        return length + self._npkts(length) * self.pkt_ovh + ext_first

    # ----------------------------------------------------------------- arrival order
    def _arrived(self, msg: Msg, fn) -> bool:
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
        now = self.env._now
        q = msg.qp
        late = msg.late
        if late:
            msg.late = 0.0
            t = now + late
            if msg.kind == REQUEST:
                if t > q.hold_req:
                    q.hold_req = t
                    q.shift_req = late
            elif t > q.hold_resp:
                q.hold_resp = t
                q.shift_resp = late
            held.add(msg)
            self.sim.call_at(t, fn, msg)
            return False
        if msg.kind == REQUEST:
            if q.hold_req >= now:
                held.add(msg)
                self.sim.call_at(now + q.shift_req, fn, msg)
                return False
        elif q.hold_resp >= now:
            held.add(msg)
            self.sim.call_at(now + q.shift_resp, fn, msg)
            return False
        return True

    # ----------------------------------------------------------------- DCQCN glue
    def _marks_arrive(self, times: list, src_qp: QpHw) -> None:
        """Notification point: packets of ``src_qp`` that switch ports marked reach this
        NIC at ``times`` [ns] (ascending, booked ahead by the sender). One event per mark
        that could yield a CNP: marks closer than ``cnp_interval`` to the last one kept
        would be refused by :meth:`_send_cnp` anyway."""
        gap = self.p.cnp_interval
        call_at = self.sim.call_at
        now = self.env._now
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
        now = self.env._now
        key = (src_qp.nic.id, src_qp.qpn)
        last = self._cnp_last.get(key)
        if last is not None and now - last < self.p.cnp_interval:
            return
        self._cnp_last[key] = now
        self.counters["cnp_sent"] += 1
        path = self.fabric.route(self.id, src_qp.nic.id)
        arrive = transmit(path, now, self.pkt_ovh + 16, None, 0, src_qp.prio)
        if self.trace.enabled:
            self._trace_tx(CNP, None, 0, 0, src_qp.nic.id, src_qp.qpn, path, 0, 1, 1, 0)
        if src_qp.nic.up and self.fabric.path_up(path):
            self.sim.call_at(arrive, src_qp.nic._rx_cnp, src_qp)

    def _rx_cnp(self, qp: QpHw) -> None:
        """Reaction point: a CNP for ``qp`` arrived."""
        self.counters["cnp_received"] += 1
        if qp.cc is not None:
            qp.cc.on_cnp(self.env._now)

    # ----------------------------------------------------------------- tracing
    def _trace_tx(self, kind: int, wr, seq: int, src_qpn: int, dst: int, dst_qpn: int,
                  path, first: int, npkts: int, total: int, payload: int,
                  qtype: str = RC, status: int = 0) -> None:
        """Emit ``nic.tx`` (only while tracing): packets ``first .. first + npkts - 1`` of
        a message of ``total`` packets and ``payload`` [B] of kind ``kind`` (REQUEST,
        RESPONSE, ACK, NAK, or CNP) for WR ``wr`` (its opcode, keys, immediate), sequence
        number ``seq`` of its requester QP, from this NIC's QP ``src_qpn`` to QP
        ``dst_qpn`` of NIC ``dst`` over ``path``, just booked on ``path[0]``."""
        self.trace.emit(
            self.env._now, "nic.tx", self.name, kind=kind,
            op=-1 if wr is None else wr.opcode, qtype=qtype, src=self.id, src_qpn=src_qpn,
            dst=dst, dst_qpn=dst_qpn, seq=seq, first=first, npkts=npkts, total=total,
            payload=payload, length=0 if wr is None else wr.length,
            rkey=None if wr is None else wr.rkey,
            remote_offset=0 if wr is None else wr.remote_offset,
            imm=None if wr is None else wr.imm, status=status, link=path[0].name,
            mtu=self.mtu, wire="roce" if self.ud_grh_write else "ib")

    # ----------------------------------------------------------------- failures
    def fail(self) -> None:
        """The NIC (or its node) goes down: it sends and receives nothing from now on."""
        self.up = False
