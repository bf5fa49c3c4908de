"""Log replication to backups and the lazy log cleaner, shared by every protocol.

Scope
    A committing transaction logs its writes before installing them (DrTM+H's and RCC's
    3-way primary-backup): to the backups of every node it writes and of its coordinator
    (``log_to: participants``, DrTM+H's ``OCC::log_remote``) or to the coordinator's
    backups alone (``coordinator``, FaSST). One-sided: a WRITE of the entry into the
    writer thread's log ring on each backup; RPC: a log call whose handler copies the
    entry. The transaction waits for every backup (one round trip).

    Backups apply entries lazily: every ``reclaim_every`` entries a coordinator sends one
    reclaim message (no reply) to a backup, whose handler installs them in its backup
    copies (DrTM+H's log cleaner, ``default_log_cleaner_impl.hpp``). With ``ack`` the
    coordinator instead follows the log with an acknowledgement RPC to every remote
    backup, which carries the entries; the backup's cleaner installs them and replies,
    and the transaction waits for every reply (a second round trip): RCC's
    ``Logger::log_ack`` after ``log_remote`` when passive ACK is off (``PA 0``,
    ``src/rtx/nowait_rdma.cc`` and ``occ.cc`` at hybrid-cc), whose reply the cleaner
    skips under ``PA 1``.

    Entry size: 16 B of header, the inserted bytes, and per written record its key
    (12 B), table and length (4 B), version (8 B) and value.

Handler ids 5 (log), 8 (reclaim) and 9 (acknowledged log) belong to this module;
protocols use the others.
"""
from __future__ import annotations

from rnicsim.verbs import WRITE, WorkRequest

from ..rpc import Waiter

H_LOG, H_RECLAIM, H_ACK = 5, 8, 9
ACK_REPLY = 8           # the cleaner's reply [B] (a uint64_t)
KEY_BYTES = 12          # table id + key in a request
VER_BYTES = 8


class Replication:
    """Logging of one transaction system (``system``: its store, coordinators, costs).

    ``how`` per call: ``one_sided`` or ``two_sided``; ``log_to``: ``participants`` or
    ``coordinator``; ``reclaim_every`` [entries]; ``ack``: wait for the backups' cleaners
    to install each log (module doc) instead of reclaiming lazily."""

    def __init__(self, system, log_to: str = "participants", reclaim_every: int = 1,
                 ack: bool = False) -> None:
        self.system = system
        self.store = system.store
        self.sim = system.sim
        self.costs = system.costs
        self.log_to = log_to
        self.reclaim_every = reclaim_every
        self.ack = ack

    def register(self, ep) -> None:
        """The log and reclaim handlers on ``ep``."""
        node = ep.node
        c = self.costs

        def log(src, size):
            return True, 1, c.copy_per_byte * size

        def reclaim(src, entries):
            self.apply(node, entries)
            return None, 0, c.log_apply * len(entries)

        def ack(src, entries):
            self.apply(node, entries)
            return True, ACK_REPLY, c.log_apply * len(entries)

        ep.register(H_LOG, log)
        ep.register(H_RECLAIM, reclaim)
        ep.register(H_ACK, ack)

    def targets(self, me: int, writes: list) -> list[int]:
        """The nodes the log of coordinator ``me`` writing ``writes`` goes to."""
        store = self.store
        targets = set(store.backups(me))
        if self.log_to == "participants":
            for n in {r.node for r in writes}:
                targets.update(store.backups(n))
        return sorted(targets)

    def log(self, tx, writes: list, how: str, versions: list | None = None):
        """Replicate the log of ``writes`` (records with ``new``) and wait for every
        backup (and, with ``ack``, for every remote backup's cleaner to install it);
        ``versions``: the version each installs (default: the one read + 1)."""
        store = self.store
        if store.rep == 0:
            return
        ep = tx.ep
        me = ep.node
        size = 16 + tx.inserted + sum(KEY_BYTES + 4 + VER_BYTES + len(r.new) for r in writes)
        if versions is None:
            entries = [(r.node, r.table, r.slot, r.version + 1, r.new) for r in writes]
        else:
            entries = [(r.node, r.table, r.slot, v, r.new) for r, v in zip(writes, versions)]
        targets = self.targets(me, writes)
        w = Waiter(ep)
        posts = []
        remote = 0
        for n in targets:
            if n == me:
                ep.thread.reserve(self.sim.now, self.costs.copy_per_byte * size)
                self.apply(me, entries)
                continue
            remote += 1
            if how == "one_sided":
                co = self.system.coords[(me, ep.index)]
                off = store.ring_offset(me, ep.index) + co.reclaim.setdefault(n, [0])[0]
                wr = WorkRequest(WRITE, size, None, True, size <= ep.ctx.max_inline and
                                 size < 64, None, 0, store.rkeys[n], off)
                posts.append((ep.rc_qp(n), [wr]))
            else:
                ep.call(n, H_LOG, size, size, True, w, n)
        if posts:
            ep.post_group(posts, w)
        if remote:
            tx.rts += 1
        yield w.arm()
        if self.ack and remote:
            # the acknowledgement carries the entries again (RCC copies the write batch
            # into an RPC buffer); the cleaners install them before replying. RCC's log
            # timer stops before it (its log_remote), so no stage timer holds it.
            t = self.sim.now
            ep.thread.reserve(t, self.costs.copy_per_byte * size)
            w = Waiter(ep)
            for n in targets:
                if n != me:
                    ep.call(n, H_ACK, entries, size, True, w, n)
            tx.rts += 1
            yield w.arm()
            tx.untimed += self.sim.now - t
            return
        for n in targets:
            if n != me:
                self._reclaim_later(ep, n, entries, size)

    def _reclaim_later(self, ep, n: int, entries: list, size: int) -> None:
        co = self.system.coords[(ep.node, ep.index)]
        st = co.reclaim.setdefault(n, [0])
        st[0] = (st[0] + size) % max(1, self.store.log_ring - 4096)
        st.extend(entries)
        if len(st) - 1 >= self.reclaim_every:
            batch = st[1:]
            del st[1:]
            ep.call(n, H_RECLAIM, batch, 8, False)

    def apply(self, node: int, entries: list) -> None:
        """The log cleaner of ``node`` installs ``entries`` in its backup copies."""
        store = self.store
        for primary, table, slot, ver, val in entries:
            store.apply_backup(node, primary, table, slot, ver, val)
