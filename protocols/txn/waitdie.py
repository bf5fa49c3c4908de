"""WAIT_DIE two-phase locking, as RCC runs it (``src/rtx/waitdie_rdma.*``).

Scope
    NO_WAIT's locking (:mod:`.nowait`: exclusive locks, timestamps in the lock word,
    the same verbs per stage) with WAIT-DIE's rule for a lock found held: a requester
    older than the holder (smaller timestamp) waits, a younger one dies (aborts). A
    transaction keeps its first attempt's timestamp when it retries, so it only grows
    older. Waiting never closes a cycle: a transaction waits only for younger ones, so
    every run ends.

    How a requester waits depends on the lock stage's verbs:

    - one-sided: it gives its thread to the ready coroutines and posts CAS + READ again
      (remote spinning, RCC ``WAITDIE::try_lock_write_w_rdma``);
    - RPC: the lock's owner parks the request (the handler answers later,
      :meth:`protocols.rpc.Endpoint.defer`) and re-checks its parked requests whenever
      its CPU releases a lock and every ``waiter_poll`` [ns] while any is parked (RCC
      ``GlobalLockManager::check_to_notify``, called on every turn of the worker's
      loop, which also sees locks released by one-sided WRITEs). A re-check grants the
      lock when it is free, keeps waiting while the holder is younger, and refuses
      once an older transaction holds it;
    - local records: the coordinator polls the lock word every ``waiter_poll`` [ns].
"""
from __future__ import annotations

from . import nowait
from .store import HEADER

layout = nowait.layout
LOCK_SHIFT = nowait.LOCK_SHIFT


class System(nowait.System):
    """WAIT-DIE over NO_WAIT's locking (see module doc)."""

    def may_wait(self, ts: int, held: int) -> bool:
        """WAIT-DIE's rule: a requester waits only for a younger holder (a larger
        timestamp); an older or equal holder makes it die."""
        return held != 0 and ts < (held >> LOCK_SHIFT)

    def park(self, ep, token, table: int, slot: int, word: int) -> None:
        """Keep a lock request of ``word`` on (table, slot) until it can be answered."""
        node = ep.node
        waiting = self._waiters.setdefault(node, [])
        waiting.append((ep, token, table, slot, word))
        if len(waiting) == 1:
            self.sim.call_at(self.sim.now + self.costs.waiter_poll, self._tick, node)

    def _tick(self, node: int) -> None:
        if self._waiters.get(node):
            self.check_waiters(node)
        if self._waiters.get(node):
            self.sim.call_at(self.sim.now + self.costs.waiter_poll, self._tick, node)

    def check_waiters(self, node: int) -> None:
        """Re-check every parked request of ``node`` in arrival order: grant, keep, or
        refuse (see module doc); each check costs the serving thread one record op."""
        store = self.store
        op = self.costs.record_op
        keep = []
        for ep, token, table, slot, word in self._waiters.get(node, ()):
            ep.thread.reserve(self.sim.now, self.costs.local_access)
            old = store.lock_local(node, table, slot, word)
            if old == 0:
                _, ver, val = store.read_local(node, table, slot)
                vs = store.tables[table].value_size
                ep.reply_later(token, (True, 0, ver, val), 1 + HEADER + vs, op)
            elif self.may_wait(word >> LOCK_SHIFT, old):
                keep.append((ep, token, table, slot, word))
            else:
                ep.reply_later(token, (False, old, 0, b""), 1, op)
        self._waiters[node] = keep
