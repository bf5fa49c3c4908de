"""Packets on the wire as a pcap file that Wireshark and tshark decode.

Contract:
- :class:`PcapWriter` subscribes to a simulation's ``nic.tx``, ``link.tx`` and
  ``pfc.pause`` trace events and writes each packet a NIC sends, stamped with the
  simulated time [ns] its first bit leaves the sender's egress (the packets of a message
  spread evenly over its time on that egress), in time order, in a nanosecond pcap file
  (magic ``a1b23c4d``).
- RoCE profiles (``link.kind: roce``): Ethernet II / IPv4 / UDP to port 4791 (RoCEv2),
  then the InfiniBand transport headers; link type 1 (Ethernet). PFC PAUSE frames
  (MAC control, opcode 0x0101) are written on the direction they pause, sent by the
  switch. InfiniBand profiles: LRH (local, no GRH) then the same transport headers,
  ending in ICRC and VCRC (link type: see below).
- Transport headers follow the IBA: BTH (opcode, destination QP, PSN, AckReq on the last
  packet of a signaled request), then RETH (WRITE first/only, READ request), ImmDt
  (``*_WITH_IMM`` last/only), AtomicETH (CAS, FAA), AETH (ACK, NAK, READ response
  first/last/only, atomic ACK), AtomicAckETH, DETH (UD); CNPs (RoCE only) carry 16
  reserved bytes. PSNs are numbered per sending QP from 0, as the IBA counts them: one
  per request packet, and a READ takes one per response packet; responses and ACKs
  carry the PSNs of the request they answer. The model keeps no PSNs; these are derived
  from the message order, which is what the model's RC transport guarantees.
- QP numbers are the model's plus :data:`QPN_BASE` (0x100): QPs 0 and 1 are the IBA's
  management QPs (SMI, GSI), which Wireshark decodes as management datagrams, and the
  model numbers its QPs from 1.
- Payload bytes are zeros, cut to ``snap`` bytes per packet (the pcap record keeps the
  packet's full length, and Wireshark marks it as cut short); CRCs are zeros.
- InfiniBand: pcap link type 197 (``LINKTYPE_ERF``), each packet behind an ERF record
  header of type 21 (InfiniBand), as Mellanox's ``ibdump`` writes them; Wireshark 4.0
  does not read link type 247 (``LINKTYPE_INFINIBAND``).
- Writing only observes the simulation (results are identical with and without it).
"""
from __future__ import annotations

import struct
from pathlib import Path

from .errors import InputError
from .hw.qp import ACK, CNP, NAK, REQUEST, RESPONSE, UC, UD
from .hw.wqe import (CAS, FAA, READ, REM_ACCESS_ERR, REM_INV_REQ_ERR, SEND_WITH_IMM,
                     WRITE, WRITE_WITH_IMM)

LINKTYPE_ETHERNET = 1
LINKTYPE_ERF = 197
ERF_TYPE_INFINIBAND = 21
QPN_BASE = 0x100
ROCEV2_PORT = 4791
_MAGIC_NS = 0xA1B23C4D
_QKEY = 0x11111111
_PENDING_MAX = 4096        # requests per QP whose PSN is kept for their answer
_PKEY = 0xFFFF

# IBA opcodes (vol. 1, table 38) within a transport's block: RC 0x00, UC 0x20, UD 0x60.
_SEND = (0x00, 0x01, 0x02, 0x04)         # first, middle, last, only
_SEND_IMM = (0x00, 0x01, 0x03, 0x05)
_WRITE = (0x06, 0x07, 0x08, 0x0A)
_WRITE_IMM = (0x06, 0x07, 0x09, 0x0B)
_READ_RESP = (0x0D, 0x0E, 0x0F, 0x10)
READ_REQUEST, ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE = 0x0C, 0x11, 0x12
COMPARE_SWAP, FETCH_ADD, ROCE_CNP = 0x13, 0x14, 0x81
_TRANSPORT = {"RC": 0x00, UC: 0x20, UD: 0x60}
# AETH syndromes: ACK with an invalid credit count, NAKs by completion status.
_AETH_ACK = 0x1F
_AETH_NAK = {REM_INV_REQ_ERR: 0x61, REM_ACCESS_ERR: 0x62}


def _position(i: int, n: int) -> int:
    """Index into a (first, middle, last, only) opcode tuple of packet ``i`` of ``n``."""
    if n == 1:
        return 3
    return 0 if i == 0 else 2 if i == n - 1 else 1


def opcode(kind: int, op: int, qtype: str, i: int, n: int) -> int:
    """The BTH opcode of packet ``i`` of ``n`` of a message of ``kind`` (REQUEST,
    RESPONSE, ACK, NAK, CNP) for a WR of opcode ``op`` on a ``qtype`` QP."""
    if kind == CNP:
        return ROCE_CNP
    if kind == ACK or kind == NAK:
        return ACKNOWLEDGE
    if kind == RESPONSE:
        return _READ_RESP[_position(i, n)] if op == READ else ATOMIC_ACKNOWLEDGE
    base = _TRANSPORT[qtype]
    if op == READ:
        return base + READ_REQUEST
    if op == CAS:
        return base + COMPARE_SWAP
    if op == FAA:
        return base + FETCH_ADD
    table = (_SEND, _SEND_IMM, _WRITE, _WRITE_IMM)[op]
    return base + table[_position(i, n)]


def _bth(opc: int, pad: int, dst_qpn: int, ack_req: bool, psn: int) -> bytes:
    return struct.pack(">BBHII", opc, (pad & 3) << 4, _PKEY, (dst_qpn + QPN_BASE) & 0xFFFFFF,
                       (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))


class PcapWriter:
    """Writes the packets of ``sim`` sent in ``[start, end)`` [ns] to ``path`` (see
    module doc); ``link_kind`` ``"roce"`` or ``"ib"`` (None: the one the first
    message's NIC reports). At most ``limit`` packets are kept (``dropped`` counts the rest); call
    :meth:`close` to write the file. ``written``: packets in the file."""

    def __init__(self, sim, path: str | Path, link_kind: str | None = None,
                 start: float = 0.0, end: float = float("inf"), limit: int = 50_000,
                 snap: int = 1 << 16) -> None:
        self.path = Path(path)
        self.kind = link_kind
        self.start, self.end, self.limit, self.snap = start, end, limit, snap
        self.packets: list[tuple[float, int, bytes, int]] = []   # (t, order, bytes, length)
        self.dropped = 0
        self.written = 0
        self._last: dict[str, tuple[float, float]] = {}   # link -> last booking (start, end)
        self._psn: dict[tuple[int, int], int] = {}         # (nic, qpn) -> next PSN
        # (nic, qpn) of a requester -> {seq: first PSN} of its requests still to be
        # answered (RC) or still being sent in segments, in sending order.
        self._req_psn: dict[tuple[int, int], dict[int, int]] = {}
        try:
            self.path.write_bytes(b"")   # refuse an unwritable path before the run
        except OSError as e:
            raise InputError("command line", "--pcap",
                             f"a file that can be written ({path}: {e.strerror})") from None
        sim.trace.subscribe(self._on_link, "link.tx")
        sim.trace.subscribe(self._on_tx, "nic.tx")
        sim.trace.subscribe(self._on_pause, "pfc.pause")

    # ------------------------------------------------------------------ events
    def _on_link(self, t: float, name: str, scope: str, d: dict) -> None:
        self._last[scope] = (t, d["end"])

    def _keep(self, t: float, frame: bytes, length: int, erf: bytes = b"") -> None:
        if not self.start <= t < self.end:
            return
        if len(self.packets) >= self.limit:
            self.dropped += 1
            return
        self.packets.append((t, len(self.packets), frame, length, erf))

    def _on_pause(self, t: float, name: str, scope: str, d: dict) -> None:
        if self.kind == "ib":
            return
        self.kind = "roce"            # only RoCE fabrics pause
        vec = 1 << d["prio"]
        for at, quanta in ((t, 0xFFFF), (d["resume"], 0)):
            times = [quanta if p == d["prio"] else 0 for p in range(8)]
            body = struct.pack(">HH8H", 0x0101, vec, *times)
            frame = (bytes.fromhex("0180c2000001") + _switch_mac(scope)
                     + struct.pack(">H", 0x8808) + body)
            frame += bytes(max(0, 60 - len(frame)))
            self._keep(at, frame, len(frame))

    def _on_tx(self, t: float, name: str, scope: str, d: dict) -> None:
        kind = d["kind"]
        if self.kind is None:
            self.kind = d["wire"]
        if kind == CNP and self.kind == "ib":
            return
        src, dst = d["src"], d["dst"]
        start, end = self._last.get(d["link"], (t, t))
        n, first, total = d["npkts"], d["first"], d["total"]
        if kind == REQUEST:
            key = (src, d["src_qpn"])
            pending = self._req_psn.setdefault(key, {})
            if first == 0:
                psn0 = self._psn.get(key, 0)
                uses = (-(-d["length"] // d["mtu"]) or 1) if d["op"] == READ else total
                self._psn[key] = (psn0 + uses) & 0xFFFFFF
                if d["qtype"] == "RC" or n < total:
                    pending[d["seq"]] = psn0
                    if len(pending) > _PENDING_MAX:
                        # Unsignaled requests answered by a coalesced ACK of a later one
                        # are never answered themselves: forget the oldest.
                        del pending[next(iter(pending))]
            else:
                psn0 = pending.get(d["seq"], 0)
            if d["qtype"] != "RC" and first + n >= total:
                pending.pop(d["seq"], None)       # nothing answers UC and UD
        elif kind == CNP:
            psn0 = 0
        else:
            pending = self._req_psn.get((dst, d["dst_qpn"]), {})
            psn0 = pending.get(d["seq"], 0)
            if first + n >= total:
                pending.pop(d["seq"], None)
            if kind != RESPONSE or d["op"] != READ:
                # An ACK, NAK or atomic ACK carries the PSN of the request's last packet.
                req_pkts = 1 if d["op"] >= READ else max(1, -(-d["length"] // d["mtu"]))
                psn0 = (psn0 + req_pkts - 1) & 0xFFFFFF
        mtu = d["mtu"]
        step = (end - start) / n
        for k in range(n):
            at = start + step * k
            if not self.start <= at < self.end:
                continue            # outside the window: counted (PSNs), not built
            i = first + k
            if d["payload"] and kind in (REQUEST, RESPONSE):
                size = mtu if i < total - 1 else d["length"] - (total - 1) * mtu
                size = max(0, size)
            else:
                size = 0
            erf, frame, length = self._packet(d, kind, i, total, psn0 + i, size)
            self._keep(at, frame, length, erf)

    # ------------------------------------------------------------------ packets
    def _packet(self, d: dict, kind: int, i: int, n: int, psn: int,
                size: int) -> tuple[bytes, bytes, int]:
        """(ERF header but its timestamp or b"", frame bytes as captured, full length on
        the wire) of one packet."""
        op = d["op"]
        qtype = d["qtype"] if kind == REQUEST else "RC"
        opc = opcode(kind, op, qtype, i, n)
        last = i == n - 1
        ext = b""
        if kind == CNP:
            ext = bytes(16)
        elif kind == REQUEST:
            if qtype == UD:
                ext += struct.pack(">II", _QKEY, (d["src_qpn"] + QPN_BASE) & 0xFFFFFF)
            if op == READ or (op in (WRITE, WRITE_WITH_IMM) and i == 0):
                ext += struct.pack(">QII", d["remote_offset"], d["rkey"] or 0,
                                   d["length"])
            if op in (CAS, FAA):
                ext += struct.pack(">QIQQ", d["remote_offset"], d["rkey"] or 0, 0, 0)
            if op in (SEND_WITH_IMM, WRITE_WITH_IMM) and last:
                ext += struct.pack(">I", (d["imm"] or 0) & 0xFFFFFFFF)
        elif kind == RESPONSE:
            if op == READ:
                if i == 0 or last:
                    ext += struct.pack(">I", _AETH_ACK << 24 | (d["seq"] & 0xFFFFFF))
            else:
                ext += struct.pack(">IQ", _AETH_ACK << 24 | (d["seq"] & 0xFFFFFF), 0)
        else:
            syn = _AETH_ACK if kind == ACK else _AETH_NAK.get(d["status"], 0x63)
            ext += struct.pack(">I", syn << 24 | (d["seq"] & 0xFFFFFF))
        pad = -size % 4
        ack_req = kind == REQUEST and last and d["qtype"] == "RC"
        transport = _bth(opc, pad, d["dst_qpn"], ack_req, psn) + ext
        body_len = len(transport) + size + pad + 4                    # + ICRC
        kept = min(size + pad, self.snap)
        if self.kind == "ib":
            words = (8 + body_len) // 4
            lrh = struct.pack(">BBHHH", 0x00, 0x02, d["dst"] + 1, words & 0x7FF,
                              d["src"] + 1)
            frame = lrh + transport + bytes(kept)
            full = 8 + body_len + 2                                     # + VCRC
            if kept == size + pad:
                frame += bytes(6)                                      # ICRC, VCRC
            erf = struct.pack(">BBHHH", ERF_TYPE_INFINIBAND, 0x04, 16 + len(frame), 0, full)
            return erf, frame, full
        udp_len = 8 + body_len
        ip_len = 20 + udp_len
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0x02, ip_len, 0, 0x4000, 64, 17, 0,
                         _ip(d["src"]), _ip(d["dst"]))
        ip = ip[:10] + struct.pack(">H", _checksum(ip)) + ip[12:]
        sport = 0xC000 | (d["src_qpn"] & 0x3FFF)
        udp = struct.pack(">HHHH", sport, ROCEV2_PORT, udp_len, 0)
        eth = _nic_mac(d["dst"]) + _nic_mac(d["src"]) + struct.pack(">H", 0x0800)
        frame = eth + ip + udp + transport + bytes(kept)
        if kept == size + pad:
            frame += bytes(4)                                          # ICRC
        return b"", frame, 14 + ip_len

    # ------------------------------------------------------------------ file
    def close(self) -> None:
        """Write the kept packets in time order (same-time ones in sending order)."""
        link = LINKTYPE_ERF if self.kind == "ib" else LINKTYPE_ETHERNET
        out = [struct.pack("<IHHiIII", _MAGIC_NS, 2, 4, 0, 0, 65535, link)]
        for t, _o, frame, length, erf in sorted(self.packets, key=lambda p: (p[0], p[1])):
            ns = int(t)
            sec, frac = divmod(ns, 1_000_000_000)
            if erf:
                # ERF time: seconds in the high 32 bits, the binary fraction in the low.
                erf = struct.pack("<Q", sec << 32 | (frac << 32) // 1_000_000_000) + erf
            out.append(struct.pack("<IIII", sec, frac, len(erf) + len(frame),
                                   len(erf) + length))
            out.append(erf + frame)
        try:
            self.path.write_bytes(b"".join(out))
        except OSError as e:
            raise InputError("command line", "--pcap",
                             f"a file that can be written ({self.path}: {e.strerror})"
                             ) from None
        self.written = len(self.packets)


def _nic_mac(nic: int) -> bytes:
    return bytes([0x02, 0, 0]) + (nic + 1).to_bytes(3, "big")


def _switch_mac(scope: str) -> bytes:
    return bytes([0x02, 0xFF, 0]) + (sum(scope.encode()) & 0xFFFFFF).to_bytes(3, "big")


def _ip(nic: int) -> bytes:
    return bytes([10]) + (nic + 1).to_bytes(3, "big")


def _checksum(header: bytes) -> int:
    s = sum(struct.unpack(f">{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
