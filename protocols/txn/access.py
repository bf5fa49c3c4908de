"""Record access shared by RCC's protocols: one-sided work requests, RPC calls, round trips.

Scope
    Every remote access of RCC's runs first resolves its record's offset from a warm
    location cache (``RDMA_CACHE 1``: no network, :attr:`SoftwareCosts.cache_lookup` of
    CPU) and then travels as one-sided verbs on the RC QP to the record's node, or as an
    RPC to the same thread index there (:mod:`protocols.rpc`). A round trip is what the
    coordinator waits for once: every work request and call of one
    :meth:`Access.round_trip` goes out together (one doorbell per QP list) and the
    coroutine resumes when the last signaled completion and reply are in.

    Work requests read into and CAS into the thread's scratch region; a CAS's old value
    comes back in its completion (``wc.data``), a READ's bytes likewise.

This module uses only :mod:`rnicsim.verbs` and the RPC layer.
"""
from __future__ import annotations

from rnicsim.verbs import CAS, READ, WRITE, WorkRequest

from ..rpc import Waiter


class Access:
    """One-sided and RPC record access of one transaction system (``system``: its store,
    simulation and costs)."""

    def __init__(self, system) -> None:
        self.system = system
        self.store = system.store
        self.sim = system.sim
        self.costs = system.costs

    # ------------------------------------------------------------ work requests
    def read_wr(self, tx, r, offset: int, length: int, tag) -> WorkRequest:
        """A signaled READ of ``length`` [B] at ``offset`` inside record ``r`` (into the
        thread's scratch region; the bytes come back in the completion)."""
        st = self.store
        return WorkRequest(READ, length, tag, True, False, tx.ep.scratch, 0,
                           st.rkeys[r.node], st.offset(r.table, r.slot) + offset)

    def cas_wr(self, tx, r, offset: int, compare: int, swap: int, tag) -> WorkRequest:
        """A signaled CAS of the word at ``offset`` inside record ``r`` (the old word
        comes back in the completion)."""
        st = self.store
        return WorkRequest(CAS, 8, tag, True, False, tx.ep.scratch, 8, st.rkeys[r.node],
                           st.offset(r.table, r.slot) + offset, None, compare, swap)

    def write_wr(self, r, offset: int, data: bytes, signaled: bool, tag=None) -> WorkRequest:
        """A WRITE of ``data`` at ``offset`` inside record ``r`` (inline under 64 B, as
        rlib posts it)."""
        st = self.store
        wr = WorkRequest(WRITE, len(data), tag, signaled, len(data) < 64, None, 0,
                         st.rkeys[r.node], st.offset(r.table, r.slot) + offset)
        wr.data = data
        return wr

    # ------------------------------------------------------------ travel
    def round_trip(self, tx, posts=(), calls=(), count: bool = True):
        """Post ``posts`` (``[(node, [wr, ...])]``, one doorbell per list) and issue
        ``calls`` (``[(node, handler, payload, length)]``, reply ``i`` at
        ``waiter.replies[i]``) together, wait for all (one round trip counted in
        ``tx.rts`` if anything went out and ``count``) and return the
        :class:`protocols.rpc.Waiter` (use ``yield from``): completions by tag in
        ``waiter.results``."""
        ep = tx.ep
        w = Waiter(ep)
        if posts:
            ep.post_group([(ep.rc_qp(n), wrs) for n, wrs in posts], w)
        for i, (n, hid, payload, length) in enumerate(calls):
            ep.call(n, hid, payload, length, True, w, i)
        if count and (posts or calls):
            tx.rts += 1
        yield w.arm()
        return w

    def post_nowait(self, tx, node: int, wrs: list) -> None:
        """Post ``wrs`` to ``node`` without waiting (unsignaled, fire and forget)."""
        ep = tx.ep
        for wr in wrs:
            wr.signaled = False
        ep.post_nowait(ep.rc_qp(node), wrs)

    def send_nowait(self, tx, node: int, hid: int, payload, length: int) -> None:
        """An RPC without a reply (passive ACK, releases)."""
        tx.ep.call(node, hid, payload, length, False)

    def lookup(self, tx) -> None:
        """Resolve a remote record's location from the warm cache (CPU only)."""
        tx.ep.thread.reserve(self.sim.now, self.costs.cache_lookup)

    def index_read(self, tx, r):
        """With the framework's ``index_read`` (use ``yield from``): a signaled READ
        of remote record ``r`` whole, waited for, before the access proper. RCC's code
        of its published runs (Alchem-Lab/drtmh at deeede4e; removed by 82fad9c2,
        "fixed indexing issues ... long latency for the one-sided implementation")
        resolved a one-sided lock's or read's offset with ``rdma_read_val``, which drops
        its ``need_all_msg=false`` and so READs header and value even when the location
        cache holds the offset. Counted in ``tx.rts``, as RCC's round-trip counter
        (``abort_cnt[18]``, the source of its round-trip figures) counted it in the runs
        it logged: its commit 612aeb05 made ``rdma_read_val`` count its wait, and the
        logs were committed after it (3f0d9b96)."""
        if not self.costs.index_read:
            return
        wr = self.read_wr(tx, r, 0, self.store.rsize[r.table], ("index", r))
        yield from self.round_trip(tx, [(r.node, [wr])])

    def local_cpu(self, tx, n: int = 1) -> None:
        """Book ``n`` local record operations on the coordinator's thread."""
        tx.ep.thread.reserve(self.sim.now, self.costs.local_access * n)

    def lock_local(self, tx, r, word: int, conflict):
        """Lock record ``r`` of the coordinator's own node by its CPU (use ``yield
        from``): CAS the lock word (offset 0) from 0 to ``word``, ``local_access`` of CPU
        per try; a held lock calls ``conflict(tx, held)``, which raises to abort or
        returns to wait, and the coordinator polls the word again after
        ``waiter_poll``."""
        ep = tx.ep
        store = self.store
        while True:
            yield ep.compute(self.costs.local_access)
            old = store.lock_local(r.node, r.table, r.slot, word)
            if old == 0:
                return
            conflict(tx, old)
            yield self.sim.timeout(self.costs.waiter_poll)

    def unlock_local(self, tx, recs: list, unlock) -> list:
        """Mark ``recs`` unlocked, call ``unlock(r)`` for those the coordinator's CPU
        releases (:meth:`TxnSystem.by_cpu`) and return the others, in order."""
        remote = []
        for r in recs:
            r.locked = False
            if self.system.by_cpu(tx, r.node):
                unlock(r)
            else:
                remote.append(r)
        return remote
