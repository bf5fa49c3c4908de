"""PCIe link between an RNIC and its host's root complex and memory.

Scope: per-direction serialisation of TLPs at the link's rate after encoding, a fixed
per-TLP overhead, MPS-sized splitting of writes and read completions, and a fixed one-way
latency that includes the root complex and memory. DMA writes are posted; a DMA read pays
the round trip. Not modelled: flow-control credits, replays, relaxed ordering, IOMMU.

    host ──down (MMIO, read completions)──► rnic
    host ◄──up (DMA writes, read requests)─── rnic

Both directions are FIFO servers kept as ``busy_until`` times; every method reserves its
direction ahead (no scheduled event) and returns the time the data lands.

Params (profile ``pcie``): rate [bit/s], tlp_overhead [B], max_payload [B], latency [ns],
mmio_latency [ns].
"""
from __future__ import annotations

from ..units import tx_time_ns

READ_REQUEST_BYTES = 0  # a read request TLP is header only: tlp_overhead covers it


class Pcie:
    """One NIC's PCIe attachment (see module doc)."""

    __slots__ = ("rate", "ovh", "mps", "lat", "mmio_lat", "up_busy", "down_busy",
                 "bytes_up", "bytes_down")

    def __init__(self, p) -> None:
        self.rate = p.rate
        self.ovh = p.tlp_overhead
        self.mps = p.max_payload
        self.lat = p.latency
        self.mmio_lat = p.mmio_latency
        self.up_busy = 0.0
        self.down_busy = 0.0
        self.bytes_up = 0
        self.bytes_down = 0

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes on the PCIe wire for ``nbytes`` of payload split in MPS-sized TLPs."""
        tlps = max(1, -(-nbytes // self.mps))
        return nbytes + tlps * self.ovh

    def dma_write(self, t: float, nbytes: int) -> float:
        """NIC writes ``nbytes`` to host memory from time ``t``; returns when it is visible."""
        wb = self.wire_bytes(nbytes)
        start = t if t > self.up_busy else self.up_busy
        end = start + tx_time_ns(wb, self.rate)
        self.up_busy = end
        self.bytes_up += wb
        return end + self.lat

    def dma_read(self, t: float, nbytes: int) -> float:
        """NIC reads ``nbytes`` of host memory from time ``t``; returns when the data is in.

        The request TLP goes up, the memory answers after the one-way latency, and the
        completions serialise on the down direction and travel back.
        """
        req = self.ovh + READ_REQUEST_BYTES
        start = t if t > self.up_busy else self.up_busy
        self.up_busy = start + tx_time_ns(req, self.rate)
        self.bytes_up += req
        at_host = self.up_busy + self.lat
        wb = self.wire_bytes(nbytes)
        cstart = at_host if at_host > self.down_busy else self.down_busy
        cend = cstart + tx_time_ns(wb, self.rate)
        self.down_busy = cend
        self.bytes_down += wb
        return cend + self.lat

    def mmio(self, t: float, nbytes: int) -> float:
        """CPU stores ``nbytes`` to the NIC (doorbell/BlueFlame) at ``t``; returns arrival."""
        wb = nbytes + self.ovh
        start = t if t > self.down_busy else self.down_busy
        end = start + tx_time_ns(wb, self.rate)
        self.down_busy = end
        self.bytes_down += wb
        return end + self.mmio_lat
