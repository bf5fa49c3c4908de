"""The RNIC's QP-context cache and address-translation (MTT) cache.

Scope
    - QP-context cache (LRU, ``qp_cache_entries``): every use of a QP by a PU looks its
      context up; a miss fetches ``qp_context_size`` bytes over PCIe. The PU goes on with
      other work meanwhile (the NIC keeps many contexts in flight), but the operation, and
      every later one of that QP, waits for the context: misses cost latency and PCIe
      bandwidth. With ``qpc_miss_stall`` (ConnectX-3) the PU itself waits for the
      context (the caller's choice), so misses cost message rate too.
    - Translation (MTT) cache (LRU, ``mtt_cache_entries``) keyed by (rkey, page): a miss
      delays the data access by a PCIe read of ``mtt_entry_size``; 2 MiB pages need 512x
      fewer entries.

Traces
    ``nic.qpc_hit`` (instant), ``nic.qpc_miss`` (scope ``<nic>/qpc``, until the context
    is in [ns]), ``nic.mtt_lookup`` (scope ``<nic>/mtt``: a buffer's pages translated,
    ``ready`` [ns] when all are), ``nic.mtt_miss`` (until that page's translation is in).

Params (profile ``nic``): ``qp_cache_entries``, ``qp_context_size`` [B],
``mtt_cache_entries``, ``mtt_entry_size`` [B].
"""
from __future__ import annotations

from .memory import MemoryRegion
from .qp import QpHw


class ContextCaches:
    """Part of :class:`~rnicsim.hw.rnic.Rnic` (see module doc): the time a QP's context
    and a buffer's translations are on the NIC."""

    __slots__ = ()

    def _qpc_lookup(self, qp: QpHw, t: float) -> float:
        """Time [ns] the context of ``qp`` is on the NIC for work starting at ``t``."""
        if self.qpc.access(qp):
            r = qp.ctx_ready
            if self.trace.enabled:
                self.trace.emit(t, "nic.qpc_hit", f"{self.name}/qpc", qpn=qp.qpn)
            return t if t > r else r
        self.counters["qpc_miss"] += 1
        r = self.pcie.dma_read(t, self.p.qp_context_size)
        qp.ctx_ready = r
        if self.trace.enabled:
            self.trace.emit(t, "nic.qpc_miss", f"{self.name}/qpc", end=r, qpn=qp.qpn)
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
                # A hit: LruCache.access inlined (it is this, for a key already cached).
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
                if self.trace.enabled:
                    self.trace.emit(t0, "nic.mtt_miss", f"{self.name}/mtt", end=r,
                                        rkey=rkey, page=page)
                if r > t:
                    t = r
        if self.trace.enabled:
            self.trace.emit(t0, "nic.mtt_lookup", f"{self.name}/mtt", rkey=rkey,
                                pages=last - first + 1, ready=t)
        if len(ready) > self._mtt_ready_max:
            now = self.sim.now
            for k in [k for k, v in ready.items() if v <= now]:
                del ready[k]
        return t
