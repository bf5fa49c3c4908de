"""Two-sided RPC over RDMA (UD SEND/RECV, RC SEND/RECV, RC WRITE-with-IMM) and kernel TCP.

Scope
    One :class:`Endpoint` per worker thread: the thread's verbs context and completion
    queue (a :class:`protocols.runtime.Worker`), one UD QP (UD transport) and one RC QP
    pair per peer node (``qps_per_peer`` pairs with the 80-node emulation) connecting
    thread ``i`` of node ``n`` with thread ``i`` of node ``m``, as DrTM+H and FaSST pair
    their threads. A :class:`Mesh` builds the endpoints of a cluster; the RC QPs serve
    one-sided verbs as well as RC RPCs. With ``loopback``, each thread also gets an RC QP
    pair to itself (``rc_qp(own node)``), for software that reaches its own node's
    memory through the NIC (the NIC turns those messages around inside:
    :mod:`rnicsim.fabric`); a UD message to the own node needs no extra QP.

    - Requests go to the same thread index on the destination node; handlers run in the
      destination thread's event loop and their CPU (``dispatch`` per message plus what
      the handler returns) is booked on that thread's core, delaying its coroutines.
    - Doorbell batching: the messages of one step of the thread (the requests a coroutine
      issues before it yields, the replies of the handlers of one poll) are posted
      together at the end of the step, ``doorbell_batch`` WQEs per doorbell on one QP. Over UD every message uses the thread's single QP, so they all
      share doorbells; over RC each destination is its own QP (batches only per peer).
    - UD replies are always batched, whatever ``doorbell_batch`` the requests use: the
      replies of the handlers of one poll go out at the end of the poll, ``reply_batch``
      WQEs per doorbell, in lists of their own (a coroutine's requests never share their
      doorbell). DrTM+H's rlib does this in ``UDMsg::poll_comps``
      (third_party/libRDMA/src/ud_msg.cc and third_party/rdma_lib/src/ud_msg.cc): it polls
      the receive CQ, runs every callback, whose ``RRpc::send_reply`` (src/core/rrpc.h)
      queues the reply with ``post_pending``, then posts the queue with one
      ``flush_pending`` (a linked list, one ``ibv_post_send``; a full queue of
      ``UD_MAX_DOORBELL_SIZE`` = 16 is flushed early); rlib's later ``UDAdapter::poll_comps``
      (wxdwfc/rlib ud_adapter.hpp) keeps it ("the reply messages are batched in this
      call"). A request sent with ``RRpc::append_req`` instead goes alone at once
      (``UDMsg::send_to``: one WR per ``ibv_post_send``). With ``coalesce`` replies stay
      in the requests' queue, so that they can ride on requests.
    - Passive ACK: a call with ``reply=False`` asks for no reply (commit, log reclaim);
      with ``coalesce`` (piggybacking), messages of one batch for the same destination
      thread travel in one SEND (a reply rides on a request going the same way).
    - UD: one packet per SEND (at most the MTU); a longer message is sent as MTU-sized
      fragments, its content on the last; RECVs are replenished in batches of 8 as they
      are consumed; the queue is sized so that no message is dropped.
    - WRITE-with-IMM: the message is written into a ring on the peer (real RC WRITE of the
      message length), the 4-byte immediate announces it; the ring's content is passed to
      the receiver in posting order (RC delivers in order).
    - TCP (``tcp``): a kernel TCP connection per pair of same-index threads, modelled as
      RC SENDs (the NIC, PCIe and wire move the bytes as frames of at most the MTU; RC is
      reliable and in order, as a TCP stream) plus the kernel's work on the CPUs: one send
      syscall (``host.tcp_send_cpu``) per destination per flush (a writev of every message
      of the step for that peer: Nagle off, messages of one flush share segments) and the
      user-to-kernel copy (``host.memcpy_rate``); per received segment
      ``host.tcp_recv_cpu`` (softirq, TCP receive, epoll wake-up, recv syscall) and the
      kernel-to-user copy, ``host.tcp_stack_latency`` (interrupt moderation and
      delivery) after the event loop sees the NIC's completion (so after a running
      coroutine's burst). The receiving thread polls epoll from its event loop (it never
      sleeps); the softirq runs on its core (IRQ affinity / aRFS). Not modelled: TCP ACKs,
      congestion and flow control, Nagle, a dedicated receiving thread (RCC's rocc
      ``tcp_adapter`` passes ZeroMQ messages through one poller thread per node).

    Signaled sends: every ``signal_every``-th send (to reclaim send-queue slots).
    Inline: a message shorter than ``inline_below`` (64 B, as rlib) is copied into the WQE
    (BlueFlame pushes it); a longer one is DMA-read by the NIC from host memory.

Ports
    :meth:`Endpoint.call` (issue RPCs, returns a :class:`Waiter`), :meth:`Endpoint.register`
    (handler per id), :meth:`Endpoint.post_group` (one-sided verbs on several QPs with one
    wait), :meth:`Endpoint.rc_qp` (the RC QP to a peer).

Params
    :class:`RpcConfig`: transport, doorbell batch [WQEs], reply batch [WQEs] (UD),
    coalesce, header [B], dispatch [ns], signal_every, recv batch, inline bound [B].

This module uses only :mod:`rnicsim.verbs`, the cluster builder and the runtime.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from rnicsim.sim import long_lived_heap
from rnicsim.units import tx_time_ns
from rnicsim.verbs import (RECV, RECV_RDMA_WITH_IMM, SEND_WITH_IMM, UD_GRH, WRITE_WITH_IMM, Context,
                           WorkRequest)

from .runtime import Worker

TRANSPORTS = ("ud", "rc", "write_imm", "tcp")

# Message kinds inside a SEND (several may be coalesced into one).
_REQ, _REP = 0, 1

# Bytes of every receive buffer: a whole message (up to 4 KiB: one UD packet at the largest
# MTU) plus the GRH space of a UD buffer. An RC SEND longer than this fails.
RECV_BYTES = 4096 + UD_GRH


@dataclass(frozen=True)
class RpcConfig:
    """How RPCs travel. Sizes [B], times [ns]."""

    transport: str = "ud"
    doorbell_batch: int = 16          # WQEs per doorbell (FaSST postlist 16)
    # UD replies of one poll: WQEs per doorbell, independent of doorbell_batch (rlib
    # UDMsg::poll_comps flushes the replies its callbacks queued; UD_MAX_DOORBELL_SIZE 16).
    reply_batch: int = 16
    coalesce: bool = False            # piggyback messages to one destination in one SEND
    header: int = 8                   # per message header (type, id, length)
    dispatch: float = 40.0            # CPU per received message: parse + dispatch [ns]
    signal_every: int = 16
    recv_batch: int = 8               # RECVs reposted per batch
    ring: int = 1 << 20               # WRITE_IMM ring per sender thread [B]
    # Messages (header included) shorter than this are inlined in the WQE, longer ones are
    # DMA-read by the NIC: rlib's UDMsg posts `len < 64 ? IBV_SEND_INLINE : 0` (DrTM+H
    # third_party rlib ud_msg.cc, post_pending_helper / send_to), the same bound DrTM+H
    # uses for one-sided WRITEs. Never above the profile's max_inline.
    inline_below: int = 64

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport: one of {', '.join(TRANSPORTS)}, "
                             f"not {self.transport!r}")
        if (self.doorbell_batch < 1 or self.reply_batch < 1 or self.signal_every < 1
                or self.recv_batch < 1):
            raise ValueError("doorbell_batch, reply_batch, signal_every, recv_batch: >= 1")
        if self.inline_below < 0:
            raise ValueError("inline_below: >= 0 bytes")


class Waiter:
    """A join of several completions and RPC replies; ``event`` fires when all are in.

    ``results`` maps the tag of each signaled one-sided WR to its completion (posted with
    ``wr_id`` ``(waiter, tag)``; the completion's ``wr_id`` is the tag once it is here),
    and ``replies`` the RPC reply payloads by call index. Resuming the waiting coroutine
    costs one coroutine switch on its thread; ``event`` fires with no value.

    A Waiter references nothing that references it back (not its completions, not its
    event), so reference counting frees it as soon as its coroutine is done: a cycle per
    round trip would leave millions of objects a run to Python's cyclic collector.
    """

    __slots__ = ("event", "remaining", "results", "replies", "ep")

    def __init__(self, ep: "Endpoint") -> None:
        self.ep = ep
        self.event = ep.sim.event()
        self.remaining = 0
        self.results: dict = {}
        self.replies: dict[int, Any] = {}

    def _done_one(self) -> None:
        self.remaining -= 1
        if self.remaining == 0:
            ep = self.ep
            now = ep.sim.now
            end = ep.thread.reserve(now, ep.switch_ns)
            ep.sim.succeed_in(self.event, end - now)

    def arm(self):
        """The event to yield. With nothing pending the coroutine does not wait: the event
        is a zero-CPU step of its burst (it keeps the thread, no switch)."""
        if self.remaining == 0:
            return self.ep.compute(0.0)
        return self.event


class Endpoint(Worker):
    """A worker thread with RPC and grouped one-sided waits (see module doc)."""

    def __init__(self, mesh: "Mesh", node: int, index: int) -> None:
        super().__init__(mesh.cluster, node, index, loop_delay=mesh.loop_delay)
        self.mesh = mesh
        self.cfg = mesh.cfg
        self.ud = None
        self.rc: dict[int, list] = {}         # peer node -> [QueuePair]
        self._rc_rr: dict[int, int] = {}
        self._handlers: dict[int, Callable] = {}
        self._calls: dict[int, tuple[Waiter, int]] = {}
        self._next_call = 0
        # (QP, replies apart) -> [(dest key, item, length)]; see _enqueue
        self._out: dict[tuple, list] = {}
        self._flush_at = -1.0
        self._sends = 0
        self._consumed: dict[int, int] = {}
        self._qp_by_num: dict[int, Any] = {}
        self._ring_in: dict[int, deque] = {}   # WRITE_IMM: qpn of the receiving QP -> items
        self._ring_pos: dict[int, int] = {}
        self.ring_mr = None
        self.scratch = self.ctx.reg_mr(1 << 16, name=f"scratch n{node} t{index}")
        self.rx_msgs = 0
        self.tx_wrs = 0          # work requests posted: one-sided verbs and SENDs
        self._current: tuple = ((node, index), -1, None)   # the request being handled
        self._deferred: tuple | None = None
        # The host's kernel TCP costs (profile host section) with the tcp transport.
        self._tcp = mesh.cluster.profile.host if mesh.cfg.transport == "tcp" else None

    # ------------------------------------------------------------------ set-up
    def _add_qp(self, qp) -> None:
        self._qp_by_num[qp.qp_num] = qp
        self.on_recv(qp, self._on_message)

    def rc_qp(self, peer: int):
        """The RC QP towards node ``peer`` (round robin over its QPs)."""
        qps = self.rc[peer]
        if len(qps) == 1:
            return qps[0]
        i = self._rc_rr.get(peer, 0)
        self._rc_rr[peer] = i + 1
        return qps[i % len(qps)]

    def register(self, hid: int, fn: Callable) -> None:
        """Handler ``fn(src_node, payload) -> (reply, reply_len, cpu_ns)`` for id ``hid``.

        ``reply`` is ignored when the caller asked for none; ``cpu_ns`` is the handler's
        work, booked on this thread before the reply is posted. A handler that cannot
        answer yet (a lock request parked behind the holder) calls :meth:`defer` and
        answers later with :meth:`reply_later`; what it returns then is not sent.
        """
        self._handlers[hid] = fn

    def defer(self) -> tuple:
        """Inside a handler: keep the request being handled for a later reply; returns
        the token :meth:`reply_later` takes (None when the caller asked for no reply)."""
        src, cid, qp = self._current
        if cid < 0:
            return None
        self._deferred = self._current
        return self._current

    def reply_later(self, token: tuple | None, reply: Any, length: int,
                    cpu_ns: float = 0.0) -> None:
        """Answer a deferred request (``length`` bytes of user data) after ``cpu_ns`` of
        this thread's CPU; the reply goes out with this step's other messages."""
        if token is None:
            return
        src, cid, qp = token
        if cpu_ns:
            self.thread.reserve(self.sim.now, cpu_ns)
        self._enqueue(src[0], src[1], (_REP, cid, 0, reply), length,
                      via=None if self.cfg.transport == "ud" else qp)

    # ------------------------------------------------------------------ one-sided
    def post_group(self, posts, waiter: Waiter | None = None) -> Waiter:
        """Post each ``(qp, [wr, ...])`` (one doorbell per QP list); the returned waiter
        counts their signaled WRs and files each completion under the WR's ``wr_id``
        (its tag). Unsignaled WRs are fire and forget."""
        w = waiter or Waiter(self)
        for qp, wrs in posts:
            self.tx_wrs += len(wrs)
            for wr in wrs:
                if wr.signaled:
                    wr.wr_id = (w, wr.wr_id)
                    w.remaining += 1
            qp.post_send(wrs)
        return w

    def post_nowait(self, qp, wrs) -> None:
        """Post without waiting; every ``signal_every``-th post is signaled (ignored)."""
        self.tx_wrs += len(wrs)
        self._sends += 1
        if self._sends % self.cfg.signal_every == 0:
            wrs[-1].signaled = True
            wrs[-1].wr_id = None
        qp.post_send(wrs)

    # ------------------------------------------------------------------ RPC
    def call(self, dst: int, hid: int, payload: Any, length: int, reply: bool = True,
             waiter: Waiter | None = None, index: int = 0) -> Waiter:
        """Send request ``payload`` (``length`` bytes of user data) to handler ``hid`` on
        node ``dst`` (same thread index). With ``reply``, the waiter counts the reply and
        stores it at ``waiter.replies[index]``."""
        w = waiter or Waiter(self)
        cid = -1
        if reply:
            self._next_call += 1
            cid = self._next_call
            self._calls[cid] = (w, index)
            w.remaining += 1
        self._enqueue(dst, self.index, (_REQ, cid, hid, payload), length)
        return w

    def _enqueue(self, dst_node: int, dst_thread: int, item: tuple, length: int,
                 via=None) -> None:
        cfg = self.cfg
        if cfg.transport == "ud":
            # Replies go in lists of their own, flushed reply_batch at a time (rlib
            # UDMsg::poll_comps, module doc), unless they may ride on requests (coalesce).
            key = (self.ud, item[0] == _REP and not cfg.coalesce)
        else:
            key = (via if via is not None else self.rc_qp(dst_node), False)
        q = self._out.get(key)
        if q is None:
            q = self._out[key] = []
        q.append(((dst_node, dst_thread), item, length + cfg.header))
        if self._flush_at < 0:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        # After the current step: a coroutine's requests up to its yield, or the replies
        # of the handlers of one poll, share doorbells (FaSST's and DrTM+H's batching).
        self._flush_at = self.sim.now
        self.sim.call_at(self._flush_at, self._flush)

    def _flush(self) -> None:
        self._flush_at = -1.0
        cfg = self.cfg
        mtu = self.ctx.mtu
        out = self._out
        self._out = {}
        tcp = self._tcp is not None
        for (key, replies), msgs in out.items():
            # TCP: one writev per peer carries every message of the step (a byte stream).
            if cfg.coalesce or tcp:
                merged: dict = {}
                order = []
                for dest, item, ln in msgs:
                    m = merged.get(dest)
                    if m is None or m[1] + ln > mtu:
                        m = merged[dest] = [[], 0]
                        order.append((dest, m))
                    m[0].append(item)
                    m[1] += ln
                sends = [(dest, m[0], m[1]) for dest, m in order]
            else:
                sends = [(dest, [item], ln) for dest, item, ln in msgs]
            wrs = []
            ud = cfg.transport == "ud"
            if tcp:
                self._tcp_send(sum(ln for _dest, _items, ln in sends))
            for dest, items, ln in sends:
                if (ud or tcp) and ln > mtu:
                    # A UD SEND is one packet: a longer message goes as MTU-sized fragments
                    # (as eRPC does); the items ride on the last one, so the handler runs
                    # once the whole message is in. TCP: one segment per MTU, likewise.
                    while ln > mtu:
                        wrs.append(self._wr(key, dest, [], mtu))
                        ln -= mtu
                wrs.append(self._wr(key, dest, items, ln))
            b = cfg.reply_batch if replies else cfg.doorbell_batch
            self.tx_wrs += len(wrs)
            for s in range(0, len(wrs), b):
                key.post_send(wrs[s:s + b])

    def _tcp_send(self, nbytes: int) -> None:
        """Book the kernel send path of one flush to one peer on this thread: one send
        syscall (``host.tcp_send_cpu`` [ns]) and the copy of ``nbytes`` [B] into the
        socket buffer at ``host.memcpy_rate``."""
        h = self._tcp
        self.thread.reserve(self.sim.now, h.tcp_send_cpu + tx_time_ns(nbytes, h.memcpy_rate))

    def _wr(self, qp, dest, items, ln):
        cfg = self.cfg
        self._sends += 1
        sig = self._sends % cfg.signal_every == 0
        inline = ln < cfg.inline_below and ln <= self.ctx.max_inline
        if cfg.transport == "write_imm":
            peer = self.mesh.endpoints[dest]
            rq = self.mesh.peer_qp[qp]
            peer._ring_in.setdefault(rq.qp_num, deque()).append(items)
            pos = self._ring_pos.get(qp.qp_num, 0)
            if pos + ln > cfg.ring:
                pos = 0
            self._ring_pos[qp.qp_num] = pos + ln
            return WorkRequest(WRITE_WITH_IMM, ln, None, sig, inline, None, 0,
                               peer.ring_mr.rkey, self.mesh.ring_base(self, peer) + pos, 1)
        wr = WorkRequest(SEND_WITH_IMM, ln, None, sig, inline, None, 0, None, 0, 1)
        wr.data = items
        if cfg.transport == "ud":
            wr.dest = self.mesh.endpoints[dest].ud.address
        return wr

    def _on_message(self, wc) -> None:
        """Event-loop handler of a received SEND / WRITE-with-IMM (one or more items)."""
        qpn = wc.qp_num
        qp = self._qp_by_num[qpn]
        if wc.opcode == RECV_RDMA_WITH_IMM:
            items = self._ring_in[qpn].popleft()
        else:
            items = wc.data
        self.rx_msgs += 1
        c = self._consumed.get(qpn, 0) + 1
        if c >= self.cfg.recv_batch:
            qp.post_recv([self.mesh.recv_wr] * c)
            c = 0
        self._consumed[qpn] = c
        if self._tcp is not None:
            # The kernel sees the segment after interrupt moderation and delivery, then
            # the thread's core runs the receive path.
            self.sim.call_in(self._tcp.tcp_stack_latency, self._tcp_deliver, wc, qp, items)
            return
        self._dispatch(wc, qp, items)

    def _tcp_deliver(self, wc, qp, items) -> None:
        """One TCP segment reaches the socket: once the thread's round of ready
        coroutines has ended (the event loop's rule, runtime doc), book
        ``host.tcp_recv_cpu`` [ns] and the copy of its ``wc.byte_len`` [B] to user memory,
        then run its messages."""
        burst = self._after_burst()
        if burst is not None:
            burst.callbacks.append(lambda _ev: self._tcp_deliver(wc, qp, items))
            return
        h = self._tcp
        self.thread.reserve(self.sim.now,
                            h.tcp_recv_cpu + tx_time_ns(wc.byte_len, h.memcpy_rate))
        self._dispatch(wc, qp, items)

    def _dispatch(self, wc, qp, items) -> None:
        """Run the handlers of the requests and resume the waiters of the replies in
        ``items`` (``dispatch`` [ns] of CPU each, then the handler's own)."""
        sim = self.sim
        th = self.thread
        dispatch = self.cfg.dispatch
        for item in items:
            th.reserve(sim.now, dispatch)
            kind, cid, a, b = item
            if kind == _REQ:
                fn = self._handlers[a]
                src = self._src_of(wc, qp)
                self._current = (src, cid, qp)
                reply, rlen, cpu = fn(src[0], b)
                if cpu:
                    th.reserve(sim.now, cpu)
                if cid >= 0:
                    if self._deferred is not None:
                        self._deferred = None      # the handler replies later
                    else:
                        self._enqueue(src[0], src[1], (_REP, cid, 0, reply), rlen,
                                      via=None if self.cfg.transport == "ud" else qp)
            else:
                w, index = self._calls.pop(cid)
                w.replies[index] = b
                w._done_one()

    def _src_of(self, wc, qp) -> tuple[int, int]:
        if self.cfg.transport == "ud":
            return self.mesh.by_address[wc.src]
        return self.mesh.qp_owner[qp]

    # ------------------------------------------------------------------ event loop
    def _poll_loop(self):
        """Completions carry ``(Waiter, tag)`` as wr_id (or None: ignored); receives go
        to the message handler of their QP."""
        handlers = self._recv_handlers
        while True:
            wcs = yield self.cq.wait()
            burst = self._after_burst()
            if burst is not None:
                yield burst              # coroutines are not preempted (runtime doc)
            self.completions += len(wcs)
            for wc in wcs:
                op = wc.opcode
                if op == RECV or op == RECV_RDMA_WITH_IMM:
                    h = handlers.get(wc.qp_num)
                    if h is not None:
                        h(wc)
                    continue
                wid = wc.wr_id
                if wid is None:
                    continue
                if wc.status:
                    raise RuntimeError(f"n{self.node}/t{self.index}: work request failed: "
                                       f"{wc!r}")
                w, tag = wid
                wc.wr_id = tag          # no cycle back to the Waiter (see Waiter)
                w.results[tag] = wc
                w._done_one()


class Mesh:
    """Endpoints of every (node, thread) of a cluster, wired for RPC and one-sided verbs.

    ``rc`` builds one RC QP pair per (node, peer, thread index) (``qps_per_peer`` pairs
    with the 80-node emulation); ``ud`` one UD QP per thread. RECV queues are deep enough
    for every message peers can have in flight (``in_flight`` messages per peer thread).
    ``loopback``: every thread also has an RC QP pair (``qps_per_peer`` pairs) to itself.
    ``loop_delay`` [ns]: each endpoint's event-loop delay (:class:`protocols.runtime.Worker`).
    """

    def __init__(self, cluster, threads: int, cfg: RpcConfig, rc: bool = True,
                 qps_per_peer: int = 1, in_flight: int = 16, loopback: bool = False,
                 loop_delay: float = 0.0) -> None:
        self.cluster = cluster
        self.loop_delay = loop_delay
        self.sim = cluster.sim
        self.cfg = cfg
        self.threads = threads
        n = len(cluster.nodes)
        self.nodes = n
        # Receive buffers hold a whole message (up to 4 KiB: one UD packet at the largest
        # MTU; RC messages of this layer are as small) plus the GRH space of a UD buffer.
        self.recv_wr = WorkRequest(RECV, RECV_BYTES)
        self.endpoints: dict[tuple[int, int], Endpoint] = {}
        self.by_address: dict[tuple[int, int], tuple[int, int]] = {}
        # RC QP (the QueuePair object) -> (node, thread) owning its far end; -> the far
        # end's QueuePair. Keyed by the object, not by (qpn, nic id): no key tuple per QP
        # (threads x nodes^2 of them), and only identity is used (no order depends on it).
        self.qp_owner: dict[Any, tuple[int, int]] = {}
        self.peer_qp: dict[Any, Any] = {}
        for node in range(n):
            for i in range(threads):
                self.endpoints[(node, i)] = Endpoint(self, node, i)
        depth = 2 * in_flight * n + 4 * cfg.recv_batch
        if cfg.transport == "ud":
            for (node, i), ep in self.endpoints.items():
                ep.ud = ep.create_qp("UD")
                ep._add_qp(ep.ud)
                # Messages above the MTU take several RECVs (fragments of <= 4 KiB ones).
                ep.ud.post_recv([self.recv_wr] * (depth * -(-4096 // ep.ctx.mtu)))
                self.by_address[ep.ud.address] = (node, i)
        if cfg.transport == "write_imm":
            for (node, i), ep in self.endpoints.items():
                ep.ring_mr = Context(cluster, node, 0).reg_mr(max(1, n * threads) * cfg.ring,
                                                             name=f"rpc ring n{node}")
        if rc or cfg.transport != "ud":
            # threads x n^2 QPs: built with the collector held off (rnicsim.sim)
            with long_lived_heap():
                self._connect_rc(n, threads, qps_per_peer, cfg.transport != "ud",
                                 2 * in_flight + 4 * cfg.recv_batch, loopback)

    def _connect_rc(self, n: int, threads: int, qps_per_peer: int, two_sided: bool,
                    per: int, loopback: bool) -> None:
        """One RC QP pair per (node, peer, thread index), ``qps_per_peer`` times, and
        with ``loopback`` per (node, thread index) with itself; with two-sided RC RPC
        each end gets ``per`` RECVs."""
        # Memory per QP matters here (threads x nodes^2 of them): the owners are the
        # endpoints' own key tuples, not new ones per QP.
        keys = {k: k for k in self.endpoints}
        owner, peer_qp = self.qp_owner, self.peer_qp
        for node in range(n):
            for m in range(node if loopback else node + 1, n):
                for i in range(threads):
                    a, b = self.endpoints[(node, i)], self.endpoints[(m, i)]
                    ka, kb = keys[(node, i)], keys[(m, i)]
                    for _ in range(qps_per_peer):
                        qa, qb = a.create_qp("RC"), b.create_qp("RC")
                        qa.connect(qb)
                        a.rc.setdefault(m, []).append(qa)
                        if m != node:
                            # (with itself, qb is reached through qa: rc_qp gives qa)
                            b.rc.setdefault(node, []).append(qb)
                        # the owner of the far end, as seen from each end
                        owner[qa] = kb
                        owner[qb] = ka
                        peer_qp[qa] = qb
                        peer_qp[qb] = qa
                        if two_sided:
                            a._add_qp(qa)
                            b._add_qp(qb)
                            qa.post_recv([self.recv_wr] * per)
                            qb.post_recv([self.recv_wr] * per)

    def ring_base(self, sender: Endpoint, receiver: Endpoint) -> int:
        """Offset of ``sender``'s WRITE-with-IMM ring in ``receiver``'s ring region."""
        return (sender.node * self.threads + sender.index) * self.cfg.ring

    def endpoint(self, node: int, thread: int) -> Endpoint:
        """The endpoint of thread ``thread`` of node ``node``."""
        return self.endpoints[(node, thread)]


# ---------------------------------------------------------------------- RPC benchmark
@dataclass
class RpcBenchSpec:
    """An RPC throughput point: every thread's coroutines call random peers.

    Each coroutine issues ``outstanding`` RPCs (request ``req`` [B], reply ``rep`` [B],
    handler CPU ``handler`` [ns]) to random peers and waits for all their replies before
    the next batch. ``ValueError`` for an unknown transport, a count below 1 or a
    negative size or handler time.
    """

    transport: str = "ud"
    req: int = 64
    rep: int = 64
    threads: int = 24
    coroutines: int = 8
    outstanding: int = 4
    doorbell_batch: int = 16
    handler: float = 0.0
    coalesce: bool = False

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport: one of {', '.join(TRANSPORTS)}, not "
                             f"{self.transport!r}")
        # outstanding=0 would spin for ever at one instant (an empty batch completes at
        # once); zero threads or coroutines would silently measure nothing.
        for k in ("threads", "coroutines", "outstanding", "doorbell_batch"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k}: a positive integer, got {v!r}")
        for k in ("req", "rep"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{k}: a size >= 0 [B], got {v!r}")
        if not self.handler >= 0:
            raise ValueError(f"handler: a CPU time >= 0 [ns], got {self.handler!r}")


def run_rpc_bench(profile, spec: RpcBenchSpec, nodes: int, nics_per_node: int = 1,
                  seed: int = 1, warmup_ns: float = 30_000.0, measure_ns: float = 30_000.0,
                  topology: dict | None = None, cores: int | None = None) -> dict[str, float]:
    """Run an RPC throughput point and return its metrics (per machine):
    ``throughput_mops`` [M/s], ``throughput_mops_total``, ``lat_p50_us``/``p90``/``p99``,
    ``cpu_util``, ``measure_us`` and the NIC-side shares of
    :meth:`rnicsim.cluster.Cluster.utilization_meter`.

    Completions are counted, so the warm-up is at least twice, and the window four
    times, the time one node's whole window of requests and replies takes to cross its
    links (as :func:`workloads.microbench.stretch_window` does for raw verbs).
    """
    from rnicsim.cluster import Cluster
    from rnicsim.sim import Simulation

    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2:
        raise ValueError(f"nodes: at least 2 (every RPC goes to a peer), got {nodes!r}")
    window = spec.threads * spec.coroutines * spec.outstanding * (spec.req + spec.rep + 128)
    drain = window * 8e9 / (profile.link.rate * nics_per_node)
    warmup_ns, measure_ns = max(warmup_ns, 2 * drain), max(measure_ns, 4 * drain)

    sim = Simulation(seed)
    cluster = Cluster(sim, profile, nodes, nics_per_node, cores=cores, topology=topology)
    cfg = RpcConfig(transport=spec.transport, doorbell_batch=spec.doorbell_batch,
                    coalesce=spec.coalesce)
    mesh = Mesh(cluster, spec.threads, cfg, rc=spec.transport != "ud",
                in_flight=spec.coroutines * spec.outstanding)
    cluster.setup_done()
    done = [0]
    handler = spec.handler
    rep = spec.rep

    def echo(src, payload):
        return None, rep, handler

    for ep in mesh.endpoints.values():
        ep.register(1, echo)

    def coroutine(ep: Endpoint, c: int):
        rng = sim.rng(f"rpcbench/n{ep.node}/t{ep.index}/c{c}")
        peers = [m for m in range(nodes) if m != ep.node]
        while True:
            t0 = sim.now
            w = Waiter(ep)
            for k in range(spec.outstanding):
                m = peers[int(rng.integers(0, len(peers)))]
                ep.call(m, 1, None, spec.req, True, w, k)
            yield w.arm()
            if sim.measuring:
                done[0] += spec.outstanding
                sim.stats.hist("lat").add(sim.now - t0)

    for ep in mesh.endpoints.values():
        for c in range(spec.coroutines):
            ep.spawn(coroutine, c)
    sim.measure(warmup_ns, measure_ns)
    cpu = sim.cpu_meter(n.thread(i).core for n in cluster.nodes for i in range(spec.threads))
    util = cluster.utilization_meter()
    sim.run(until=warmup_ns + measure_ns)
    h = sim.stats.hist("lat").summary()
    total = done[0] / measure_ns * 1e3
    return {"throughput_mops": total / nodes, "throughput_mops_total": total,
            "lat_p50_us": h["p50"] / 1e3, "lat_p90_us": h["p90"] / 1e3,
            "lat_p99_us": h["p99"] / 1e3, "cpu_util": cpu(),
            "measure_us": measure_ns / 1e3, **util()}


def spec_of(sc) -> RpcBenchSpec:
    """The :class:`RpcBenchSpec` of a scenario point (``threads`` from ``cluster.threads``)."""
    w = sc.workload
    return RpcBenchSpec(transport=w.transport, req=w.request, rep=w.reply,
                        threads=sc.cluster.threads, coroutines=w.coroutines,
                        outstanding=w.outstanding, doorbell_batch=w.doorbell_batch,
                        handler=w.handler, coalesce=w.coalesce)


# RpcBenchSpec field -> scenario key path (the others are workload.<field>)
_KEY_PATHS = {"threads": "cluster.threads", "req": "workload.request",
              "rep": "workload.reply"}


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when this point of workload kind ``rpc`` cannot
    run: the cluster needs a peer for every node, the point's :class:`RpcBenchSpec` must
    be valid (its field names become key paths), and a message with its header must fit
    where it lands: an RC receive buffer (``RECV_BYTES``) or, with ``write_imm``, the
    sender's ring (``RpcConfig.ring``). UD messages are checked by the schema."""
    if sc.cluster.nodes < 2:
        raise ValueError(f"cluster.nodes: at least 2 (every RPC goes to a peer), got "
                         f"{sc.cluster.nodes}")
    try:
        spec = spec_of(sc)
    except ValueError as e:
        field, _, what = str(e).partition(": ")
        raise ValueError(f"{_KEY_PATHS.get(field, 'workload.' + field)}: {what}") from None
    cfg = RpcConfig()
    where = {"rc": (RECV_BYTES, f"one {RECV_BYTES}-B receive buffer"),
             "write_imm": (cfg.ring, f"the sender's {cfg.ring}-B ring")}.get(spec.transport)
    if where is not None:
        room, what = where
        for field, n in (("req", spec.req), ("rep", spec.rep)):
            if n + cfg.header > room:
                raise ValueError(f"{_KEY_PATHS[field]}: at most {room - cfg.header} B over "
                                 f"transport {spec.transport} (a message and its "
                                 f"{cfg.header}-B header fill {what}), got {n} B")


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Run one point of a scenario whose workload kind is ``rpc``."""
    return run_rpc_bench(profile, spec_of(sc), sc.cluster.nodes, sc.cluster.nic.per_node,
                         sc.run.seed, sc.run.warmup, sc.run.measure,
                         sc.cluster.topology.model_dump(), sc.cluster.cores)
