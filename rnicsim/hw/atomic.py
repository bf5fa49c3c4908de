"""The RNIC's atomic unit.

Scope
    ``atomic_units`` atomics in flight, per-address order, each doing a PCIe
    read-modify-write (the unit is held for the 8-B read and ``atomic_service``; the
    response waits for the write-back to land); ``stall_nic`` mode (ConnectX-3) also
    holds every PU while the unit works.

Params (profile ``nic``): ``atomic_units``, ``atomic_service`` [ns], ``atomic_mode``.
"""
from __future__ import annotations

from .pu import ProcessingUnits


class AtomicUnit(ProcessingUnits):
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc)."""

    __slots__ = ()

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
            now = self.env._now
            for i in range(len(pb)):
                if pb[i] < done:
                    b = pb[i]
                    w = done - (b if b > now else now)
                    if w > 0:
                        self._pu_logged(i, now, b, w)
                    pb[i] = done
        return landed
