"""PCIe link between an RNIC and its host's root complex and memory.

Scope: per-direction serialisation of TLPs at the link's rate after encoding, a fixed
per-TLP overhead, MPS-sized splitting of writes and read completions, and a fixed one-way
latency that includes the root complex and memory. DMA writes are posted; a DMA read pays
the round trip. Not modelled: flow-control credits, replays, relaxed ordering, IOMMU.

    host ──down (MMIO, read completions)──► rnic
    host ◄──up (DMA writes, read requests)─── rnic

Both directions are :class:`~rnicsim.hw.calendar.Calendar` pipes; every method books its
direction ahead (no scheduled event) and returns the time the data lands.

Traces (through ``tap``, set by :meth:`rnicsim.sim.Trace.attach`; scope
``<nic>/pcie/up`` or ``<nic>/pcie/down``; each from the first TLP's start to the last
TLP's end on that direction [ns], ``lands`` = end + latency [ns], ``bytes`` of payload):

    ``pcie.mmio``            CPU stores to the NIC (doorbell, BlueFlame WQE)
    ``pcie.dma_write``       NIC writes host memory (payload, CQE)
    ``pcie.read_request``    NIC asks host memory for data (header-only TLP)
    ``pcie.read_completion`` the data of a DMA read coming to the NIC

Params (profile ``pcie``): rate [bit/s], tlp_overhead [B], max_payload [B], latency [ns],
mmio_latency [ns].
"""
from __future__ import annotations

from ..units import tx_time_ns
from .calendar import Calendar

READ_REQUEST_BYTES = 0  # a read request TLP is header only: tlp_overhead covers it


class Pcie:
    """One NIC's PCIe attachment (see module doc)."""

    __slots__ = ("rate", "ovh", "mps", "lat", "mmio_lat", "up", "down",
                 "bytes_up", "bytes_down", "npb", "req_dur", "tlp_dur", "tap")

    TRACES = {"pcie.mmio": "CPU stores (doorbell, BlueFlame) cross to the NIC",
              "pcie.dma_write": "the NIC writes host memory (payload, CQE)",
              "pcie.read_request": "the NIC's DMA read request goes up",
              "pcie.read_completion": "a DMA read's data comes down to the NIC"}

    def __init__(self, p, env=None) -> None:
        self.rate = p.rate
        self.ovh = p.tlp_overhead
        self.mps = p.max_payload
        self.lat = p.latency
        self.mmio_lat = p.mmio_latency
        self.up = Calendar(env)
        self.down = Calendar(env)
        self.bytes_up = 0
        self.bytes_down = 0
        self.npb = 8e9 / self.rate                           # ns per byte
        self.req_dur = (self.ovh + READ_REQUEST_BYTES) * self.npb
        self.tlp_dur = (self.mps + self.ovh) * self.npb      # one full TLP
        self.tap = None          # trace hook (rnicsim.sim.Trace.attach); None: untraced

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes on the PCIe wire for ``nbytes`` of payload split in MPS-sized TLPs."""
        tlps = max(1, -(-nbytes // self.mps))
        return nbytes + tlps * self.ovh

    def dma_write(self, t: float, nbytes: int, tail: float | None = None) -> float:
        """NIC writes ``nbytes`` to host memory from time ``t``; returns when it is visible.

        With ``tail``, the data arrives progressively until ``tail`` (a message streaming in
        from the wire): the write starts at ``t`` but cannot end before ``tail`` plus the
        last TLP's serialisation.
        """
        mps = self.mps
        npb = self.npb
        if nbytes <= mps:
            # One TLP: it interleaves with the TLPs of a bulk write booked earlier.
            wb = nbytes + self.ovh
            dur = wb * npb
            start = self.up.reserve_packet(t, dur, self.tlp_dur)
            end = start + dur
        else:
            wb = nbytes + (-(-nbytes // mps)) * self.ovh
            start, end = self.up.reserve_split(t, wb * npb, self.tlp_dur)
        if tail is not None:
            last = tail + ((nbytes if nbytes < mps else mps) + self.ovh) * npb
            if last > end:
                end = last
        self.bytes_up += wb
        if self.tap is not None:
            self.tap("pcie.dma_write", start, end, "/up", lands=end + self.lat, bytes=nbytes)
        return end + self.lat

    def dma_read(self, t: float, nbytes: int) -> float:
        """NIC reads ``nbytes`` of host memory from time ``t``; returns when the data is in.

        The request TLP goes up, the memory answers after the one-way latency, and the
        completions serialise on the down direction and travel back.
        """
        rdur = self.req_dur
        rstart = self.up.reserve_packet(t, rdur, self.tlp_dur)
        at_host = rstart + rdur + self.lat
        self.bytes_up += self.ovh
        mps = self.mps
        if nbytes <= mps:
            # One completion TLP: it interleaves with a bulk read's completions.
            wb = nbytes + self.ovh
            dur = wb * self.npb
            cstart = self.down.reserve_packet(at_host, dur, self.tlp_dur)
            cend = cstart + dur
        else:
            # Completions are TLPs that interleave with other traffic.
            wb = nbytes + (-(-nbytes // mps)) * self.ovh
            cstart, cend = self.down.reserve_split(at_host, wb * self.npb, self.tlp_dur)
        self.bytes_down += wb
        if self.tap is not None:
            self.tap("pcie.read_request", rstart, rstart + rdur, "/up", lands=at_host,
                     bytes=nbytes)
            self.tap("pcie.read_completion", cstart, cend, "/down", lands=cend + self.lat,
                     bytes=nbytes)
        return cend + self.lat

    def dma_read_span(self, t: float, nbytes: int, chunk: int) -> tuple[float, float]:
        """Like :meth:`dma_read`, returning when the first ``chunk`` bytes and all bytes are in.

        Lets a NIC start sending the first packet of a large message before the rest of its
        payload has crossed PCIe.
        """
        last = self.dma_read(t, nbytes)
        if nbytes <= chunk:
            return last, last
        first = last - tx_time_ns(self.wire_bytes(nbytes) - self.wire_bytes(chunk), self.rate)
        return first, last

    def mmio(self, t: float, nbytes: int) -> float:
        """CPU stores ``nbytes`` to the NIC (doorbell/BlueFlame) at ``t``; returns arrival."""
        wb = nbytes + self.ovh
        dur = wb * self.npb
        # MMIO TLPs interleave with read completions of bulk DMA booked earlier.
        start = self.down.reserve_packet(t, dur, self.tlp_dur)
        end = start + dur
        self.bytes_down += wb
        if self.tap is not None:
            self.tap("pcie.mmio", start, end, "/down", lands=end + self.mmio_lat, bytes=nbytes)
        return end + self.mmio_lat
