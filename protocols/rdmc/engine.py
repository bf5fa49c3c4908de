"""RDMC multicast engine on simulated RC queue pairs (Behrens et al.; issue 4).

Scope
    Turns a block schedule (:mod:`protocols.rdmc.schedules`) into RDMA operations on the
    simulated NICs, the way RDMC's ``group_send.cpp`` does:

    * **Groups are created ahead.** ``Rdmc.create_group(members, block_size, algorithm)``
      takes node ids, member 0 being the root (the only node that may send). It creates one
      RC queue pair per pair of members the schedule ever uses (the union over message
      sizes; the first sender of every member does not depend on the block count) and
      registers, per member, a first-block buffer of one block and a message area. The keys
      are "exchanged out of band" (known to the peers from creation on).
    * **Ready for block.** A member receives its blocks in schedule order and tells the
      node feeding its next block that it is ready with a *zero-length RDMA WRITE with
      immediate* (a one-sided write whose only payload is the 32-bit immediate: message
      sequence and receive index). It also raises a completion at the sender, which is how
      the sender's completion thread learns of the credit. A node sends a block only after
      holding it *and* holding the target's credit; each node has at most one block send
      outstanding and one block receive readied (paper section 4.2-4.3).
    * **Two RC QPs per pair of members**, as RDMC's ``queue_pairs`` and
      ``rfb_queue_pairs`` (``src/rdmc/group_send.h``): blocks on one; ready_for_block
      credits, close messages and watchdog probes (zero-length WRITE-with-IMM) on the
      other, so a credit never waits behind a block going the other way. It can still
      wait behind a block its own node is sending to another member: with per-message
      transmit arbitration (the profile's ``nic.tx_arbitration``, ``message`` on the
      ConnectX profiles) the NIC's egress finishes a 1 MiB block before the credit goes,
      about 260 us on EDR (docs/model.md, RDMC at 512 nodes).
    * **Blocks** travel as one RC WRITE-with-IMM each (one NIC message, a handful of
      simulator events, not one per packet); the immediate carries ``block << 16 | k``.
      The receiver learns the block count from its first block, takes the message buffer
      from its pre-registered area (``message_setup_ns``: malloc + the incoming-message
      upcall), readies its next receive, relays what it can and *then* copies the first
      block from the first-block buffer into place (CPU time ``block / copy_rate``,
      paper section 4.2 and table 1 "copy time"). The exact size comes with the last block.
    * **Asynchronous steps.** There is no barrier: a node waits only for the block it has
      to send next and for its target's credit.
    * **One completion thread per node** (``thread_index``) polls a CQ shared by every
      group on that node. ``completion="hybrid"`` polls for ``poll_window_ns`` (50 ms)
      after each completion and then sleeps on interrupts until the next one (RDMC's
      policy); ``"polling"`` always spins; ``"interrupt"`` never does (figure 11). CPU
      use is the thread's booked work plus the time it spins (``cpu_snapshot``).
    * **Delays.** ``inject_delay(node, at, ns)`` stalls a node's completion thread;
      ``sched_delay_prob``/``sched_delay_ns`` stall it at random after a completion (named
      stream ``rdmc.sched_delay.n<node>``). A slow link between two nodes
      (``slow_pairs``) is emulated by sending, with every block on that pair, padding of
      ``(factor - 1)`` times the block length in the same doorbell: sender egress and
      receiver ingress are busy ``factor`` times longer, as on a path of ``1/factor`` the
      rate. ``(node, None, factor)`` slows every block to or from ``node`` (a slow cable;
      a true per-cable rate needs a kernel API; global rates come from the profile).
    * **Failures.** ``fail_node`` / ``fail_link`` act on the cluster. RC connections to a
      dead peer break after the retry timeout (``retry_timeout_ns`` sets the QP attribute;
      default the kernel's ~537 ms). A member learning of a failure from its NIC relays it
      to every member over RDMC's out-of-band TCP mesh (not modelled by rnicsim: one
      message costs ``oob_latency_ns`` and ``oob_cpu_ns``); the group stops sending; the
      failure callback gets the suspected node. A member stuck in a transfer probes the
      peer it waits for every ``watchdog_ns`` (a zero-length write), so a cut cable is
      found even by a member that sends nothing. ``Group.close()`` runs a request / ack /
      ok wave over the first-sender tree on the group's RC connections: it succeeds only
      if every member completed every message, and reports the failure otherwise.

    * **CORE-Direct** (``core_direct=True``, chain only; paper sections 2 and 5.3). Each
      member's incoming QP gets a receive CQ of its own, so that CQ's completion count
      says exactly which blocks arrived. When a relay's first block arrives (it then knows
      ``k``) and it holds its successor's credit, it posts its whole send sequence at once:
      block 0 in one doorbell, then ``[WAIT(in_cq, count of block j), WRITE_WITH_IMM
      block j]`` for every later block; the NIC forwards each block as it lands, with no
      poll, bookkeeping or doorbell on the path. The root posts all its blocks likewise
      (no WAITs). Only the last send is signaled. Credits: a receiver's ready_for_block
      for receive 0 (sent at group creation and at each completion) grants the *whole*
      message; no per-block credits are sent. Receivers pre-post receives for the whole
      message when its first block arrives (16 stay posted between messages). The last
      block is relayed by software on arrival, since its exact length (which tells the
      receivers the message size) comes with it.

    Not modelled: CORE-Direct for other schedules (RDMC's "partially ordered graph"), the
    small-message SST path of Derecho, RDMC's TCP bootstrap (group creation costs no
    simulated time), the hybrid algorithm's topology discovery (racks are rank runs).

Ports
    Uses only :mod:`rnicsim.verbs` (``Context``, ``CompletionQueue``, ``QueuePair``,
    ``WorkRequest``) and the cluster's ``fail_node`` / ``fabric.fail_link``.

Params (:class:`EngineOptions`, every time in [ns])
    see the field comments; CPU costs not in the NIC profile are stated with a source.

Usage::

    eng = Rdmc(cluster)
    g = eng.create_group([0, 1, 2, 3], block_size=1 << 20)
    msg = g.send(256 << 20)            # root only; a busy group raises
    sim.run()
    msg.completion_ns                  # submit -> last member's completion upcall
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import Callable, Iterable, Sequence

from rnicsim.verbs import (RECV, RECV_RDMA_WITH_IMM, SUCCESS, WRITE, WRITE_WITH_IMM,
                           Context, WorkRequest)

from . import schedules as S

__all__ = ["EngineOptions", "Rdmc", "Group", "Message", "Plan", "MAX_BLOCKS",
           "rdmc_plan"]

MAX_BLOCKS = 65535
"""Largest block count of one message (16 bits of the immediate, as RDMC)."""

# Control immediates (zero-length WRITE-with-IMM): kind in bits 30-31.
_READY, _PROBE, _CLOSE = 0, 1, 2
_CLOSE_REQ, _CLOSE_UP, _CLOSE_OK = 0, 1, 2
# wr_id of signaled sends.
_WR_BLOCK, _WR_CTRL = 1, 2
_RECV_WR = WorkRequest(RECV, 0)


@dataclass(frozen=True)
class EngineOptions:
    """Configuration of an :class:`Rdmc` engine (all times [ns])."""

    completion: str = "hybrid"          # hybrid | polling | interrupt
    poll_window_ns: float = 50e6        # RDMC polls 50 ms after a completion (sec. 4.2)
    thread_index: int = 0               # the completion thread of every node
    nic: int = 0                        # NIC of every node used by RDMC
    retry_timeout_ns: float | None = None  # RC retry timeout (QP attribute); None: kernel
    carry_data: bool = False            # move real bytes (tests); off for big studies
    record: bool = False                # keep a log of every block transfer (tests, M1/M5)
    completion_cpu_ns: float = 150.0    # RDMC bookkeeping per completion handled; assumed
                                        # (~300 cycles: schedule lookup + state update)
    message_setup_ns: float = 4_000.0   # per message and member: buffer allocation and the
                                        # incoming-message upcall (paper table 1 "local setup")
    copy_rate: float = 4.9e9            # first-block copy [B/s]: single-core memcpy of a cold
                                        # MiB on Xeon E5 (~5 GB/s); cf. table 1 copy time
    recv_batch: int = 16                # receives posted at once per QP (RDMC posts few)
    oob_latency_ns: float = 20_000.0    # one relay message over the TCP mesh; assumed
    oob_cpu_ns: float = 2_000.0         # CPU per relay message sent (a send syscall); assumed
    watchdog_ns: float = 2e6            # probe the awaited peer after this long without progress
    watchdog_max_idle: int = 1000       # stop probing after this many idle periods
    sched_delay_prob: float = 0.0       # chance of a scheduling delay after a completion
    sched_delay_ns: float = 0.0         # its length
    slow_pairs: tuple = ()              # ((node_a, node_b, factor), ...): slow overlay links;
                                        # node_b None: every link of node_a (a slow cable)
    core_direct: bool = False           # CORE-Direct relaying (chain only): the NIC forwards
                                        # each block on arrival (cross-channel WAIT requests)

    def __post_init__(self) -> None:
        if self.completion not in ("hybrid", "polling", "interrupt"):
            raise ValueError("completion must be hybrid, polling or interrupt, "
                             f"not {self.completion!r}")
        for name in ("carry_data", "record", "core_direct"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name, lo in (("thread_index", 0), ("nic", 0), ("recv_batch", 2),
                         ("watchdog_max_idle", 0)):
            _whole(name, getattr(self, name), lo)
        for name in ("poll_window_ns", "completion_cpu_ns", "message_setup_ns",
                     "oob_latency_ns", "oob_cpu_ns", "watchdog_ns", "sched_delay_ns"):
            _number(name, getattr(self, name), 0.0, "[ns]")
        _number("copy_rate", self.copy_rate, 0.0, "[B/s]", strict=True)
        if self.retry_timeout_ns is not None:
            _number("retry_timeout_ns", self.retry_timeout_ns, 0.0, "[ns] (or None)",
                    strict=True)
        _number("sched_delay_prob", self.sched_delay_prob, 0.0, "")
        if self.sched_delay_prob > 1.0:
            raise ValueError(f"sched_delay_prob must be a probability in 0..1, got "
                             f"{self.sched_delay_prob!r}")
        try:
            pairs = tuple(tuple(p) for p in self.slow_pairs)
        except TypeError:
            pairs = ((),)
        for p in pairs:
            if len(p) != 3:
                raise ValueError("slow_pairs must be a sequence of (node_a, node_b or None, "
                                 f"factor) triples, got {self.slow_pairs!r}")
            a, b, f = p
            _whole("slow_pairs node", a, 0)
            if b is not None:
                _whole("slow_pairs node", b, 0)
                if b == a:
                    raise ValueError(f"slow pair ({a}, {b}): two different nodes expected "
                                     "(use (node, None, factor) for every link of a node)")
            if isinstance(f, bool) or not isinstance(f, Real) or not f >= 1.0:
                raise ValueError(f"slow pair ({a}, {b}): factor must be >= 1, got {f!r}")
        object.__setattr__(self, "slow_pairs", pairs)


def _whole(name: str, value: object, lo: int) -> int:
    """``value`` as an int >= ``lo``; TypeError / ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer >= {lo}, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def _number(name: str, value: object, lo: float, unit: str, strict: bool = False) -> float:
    """``value`` as a float >= ``lo`` (> ``lo`` if ``strict``), finite; errors name ``name``."""
    what = f"a number {'>' if strict else '>='} {lo:g}{' ' + unit if unit else ''}"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    v = float(value)
    if not (v > lo if strict else v >= lo) or v != v or v == float("inf"):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return v


class Plan:
    """What every rank does for one message: ``sends[r]`` and ``recvs[r]`` in order.

    ``sends[r]`` holds ``(peer, lo, hi, peer_recv_index, step)``: blocks ``lo .. hi-1`` go
    to ``peer`` as one write, which is the ``peer_recv_index``-th receive of ``peer``.
    ``recvs[r]`` holds ``(peer, lo, hi, step)``. ``k`` blocks in all.
    """

    __slots__ = ("n", "k", "sends", "recvs")

    def __init__(self, n: int, k: int, sends: list, recvs: list) -> None:
        self.n = n
        self.k = k
        self.sends = sends
        self.recvs = recvs


def rdmc_plan(algorithm: str, n: int, k: int, rack_size: int | None = None) -> Plan:
    """The :class:`Plan` of an RDMC schedule (one block per transfer)."""
    opts = {"rack_size": rack_size} if algorithm == "hybrid" else {}
    plans = S.node_plans(algorithm, n, k, **opts)
    recvs = [[(t[1], t[2], t[2] + 1, t[0]) for t in p.receives] for p in plans]
    index = [{t[0]: j for j, t in enumerate(p.receives)} for p in plans]
    sends = [[(t[1], t[2], t[2] + 1, index[t[1]][t[0]], t[0]) for t in p.sends]
             for p in plans]
    return Plan(n, k, sends, recvs)


class Message:
    """One multicast: submit time, per-rank completion times, failure flag.

    ``done`` is a SimPy event fired when every member has completed or failed (value:
    this message). ``completion_ns`` is submit to the last completion upcall.
    Attributes: ``seq`` (0, 1, ... per group), ``size`` [B], ``blocks`` (k),
    ``t_submit`` [ns], ``done_at[rank]`` [ns] (None until that member completes; stays
    None for a member that failed), ``failed`` (some member gave the message up).
    """

    def __init__(self, group: "Group", seq: int, size: int, k: int, t_submit: float) -> None:
        self.group = group
        self.seq = seq
        self.size = size
        self.blocks = k
        self.t_submit = t_submit
        self.done_at: list[float | None] = [None] * group.n
        self.failed = False
        self.outstanding = group.n
        self.done = group.engine.sim.event()

    @property
    def completion_ns(self) -> float:
        """Submit to the last member's completion [ns] (NaN if someone never completed)."""
        if any(t is None for t in self.done_at):
            return float("nan")
        return max(self.done_at) - self.t_submit

    def skew_ns(self) -> float:
        """First to last receiver completion [ns] (0 for a group of two), over the
        receivers that completed (NaN if none did)."""
        ts = [t for t in self.done_at[1:] if t is not None]
        return max(ts) - min(ts) if ts else float("nan")

    def _settle(self) -> None:
        self.outstanding -= 1
        if self.outstanding == 0 and not self.done.triggered:
            self.done.succeed(self)


class _NodeRt:
    """The RDMC runtime of one node: context, shared CQ, completion thread, accounting."""

    def __init__(self, eng: "Rdmc", node: int) -> None:
        o = eng.opts
        self.eng = eng
        self.node = node
        self.sim = eng.sim
        self.thread = eng.cluster.nodes[node].thread(o.thread_index)
        self.ctx = Context(eng.cluster, node, o.nic, self.thread)
        self.cq = self.ctx.create_cq(self.thread)
        self.dispatch: dict[int, tuple] = {}      # qp_num -> (member, peer rank, control QP)
        self.dead = False
        self.mode = o.completion
        self.window = o.poll_window_ns
        self.poll_ns = 0.0
        self.idle_since = self.sim.now
        self.last_wc = self.sim.now
        self.timer = False
        self.watch = False
        # Members with a message in progress, in the order they became active: a dict, not
        # a set, because the watchdog probes them in this order, and a set of objects
        # iterates by memory address (results would change with unrelated allocations).
        self.active: dict = {}
        self.cpu0 = self.thread.core.busy_ns
        h = eng.cluster.profile.host
        self.switch_ns = h.coroutine_switch
        if o.sched_delay_prob > 0:
            self.delay_rng = self.sim.rng(f"rdmc.sched_delay.n{node}")
        else:
            self.delay_rng = None
        self.cqs = [self.cq]
        self.cq.use_interrupts(self.mode == "interrupt")
        self.sim.process(self._loop(self.cq))

    def add_cq(self):
        """A further CQ the completion thread polls (CORE-Direct receive counting)."""
        cq = self.ctx.create_cq(self.thread)
        cq.use_interrupts(self.mode == "interrupt" or
                          (self.mode == "hybrid" and not self.timer
                           and self.cq.mode == "interrupt"))
        self.cqs.append(cq)
        self.sim.process(self._loop(cq))
        return cq

    # ---------------------------------------------------------------- completion thread
    def _loop(self, cq):
        th = self.thread
        sim = self.sim
        o = self.eng.opts
        cpu = o.completion_cpu_ns
        while True:
            wcs = yield cq.wait()
            if self.dead:
                return
            now = sim.now
            if self.mode != "interrupt":
                spin_end = now if self.mode == "polling" else min(now, self.last_wc + self.window)
                if spin_end > self.idle_since:
                    self.poll_ns += spin_end - self.idle_since
            self.last_wc = now
            disp = self.dispatch
            for wc in wcs:
                ent = disp.get(wc.qp_num)
                if ent is not None:
                    th.reserve(now, cpu)
                    ent[0].on_wc(wc, ent[1], ent[2])
            if self.delay_rng is not None and self.delay_rng.random() < o.sched_delay_prob:
                th.reserve(now, o.sched_delay_ns)
            busy = th.core.busy_until
            self.idle_since = busy if busy > now else now
            if self.mode == "hybrid":
                for c in self.cqs:
                    c.use_interrupts(False)
                if not self.timer:
                    self.timer = True
                    self.sim.call_at(self.last_wc + self.window, self._window_end)

    def _window_end(self) -> None:
        # Hybrid mode: 50 ms without a completion -> sleep on interrupts.
        if self.dead:
            return
        now = self.sim.now
        if now - self.last_wc >= self.window * (1 - 1e-12):
            for c in self.cqs:
                c.use_interrupts(True)
            self.timer = False
        else:
            self.sim.call_at(self.last_wc + self.window, self._window_end)

    def cpu_ns(self) -> float:
        """CPU time [ns] of the completion thread so far: booked work plus spinning."""
        now = self.sim.now
        spin = self.poll_ns
        if self.mode != "interrupt" and not self.dead:
            end = now if self.mode == "polling" else min(now, self.last_wc + self.window)
            if end > self.idle_since:
                spin += end - self.idle_since
        return (self.thread.core.busy_ns - self.cpu0) + spin

    # ---------------------------------------------------------------- watchdog
    def activate(self, member) -> None:
        self.active[member] = None
        if not self.watch and self.eng.opts.watchdog_ns > 0:
            self.watch = True
            self.sim.call_in(self.eng.opts.watchdog_ns, self._watchdog)

    def _watchdog(self) -> None:
        if self.dead or not self.active:
            self.watch = False
            return
        for m in list(self.active):
            if not m.watchdog():
                del self.active[m]
        if not self.active:
            self.watch = False
            return
        self.sim.call_in(self.eng.opts.watchdog_ns, self._watchdog)


class _Member:
    """State of one member (rank) of one group on its node."""

    __slots__ = ("g", "rank", "node", "rt", "qps", "recv_avail", "ctl_qps", "ctl_avail",
                 "first_mr", "msg_mr",
                 "next_seq", "credits", "failed", "dead", "suspect",
                 "m_seq", "m_k", "m_sends", "m_recvs", "m_si", "m_ri", "m_held", "m_nheld",
                 "m_sending", "m_msg", "m_last_len", "m_size", "progress", "seen",
                 "idle_periods", "closing", "close_count", "close_ups", "close_sent",
                 "close_result", "cd_in", "cd_in_cq", "cd_count", "m_cbase", "m_cd_posted")

    def __init__(self, g: "Group", rank: int, rt: _NodeRt) -> None:
        self.g = g
        self.rank = rank
        self.node = g.members[rank]
        self.rt = rt
        self.qps: dict[int, object] = {}
        self.recv_avail: dict[int, int] = {}
        # ready_for_block and close messages go on a second RC QP per peer, as RDMC's
        # rfb_queue_pairs (src/rdmc/group_send.h): on the block QP a credit would wait
        # behind a whole block going the other way (RC keeps a QP's messages in order).
        self.ctl_qps: dict[int, object] = {}
        self.ctl_avail: dict[int, int] = {}
        ctx = rt.ctx
        self.first_mr = ctx.reg_mr(g.block_size, name=f"rdmc.g{g.id}.first")
        self.msg_mr = ctx.reg_mr(g.max_message, name=f"rdmc.g{g.id}.area")
        self.next_seq = 0
        self.credits: set = set()
        self.failed = False
        self.dead = False
        self.suspect = None
        self.m_recvs = None
        self.m_sends = ()
        self.m_seq = -1
        self.m_k = 0
        self.m_held = b""
        self.m_nheld = 0
        self.m_si = self.m_ri = 0
        self.m_sending = False
        self.m_msg = None
        self.m_last_len = 0
        self.m_size = 0
        self.progress = 0
        self.seen = -1
        self.idle_periods = 0
        self.closing = False
        self.close_count = None
        self.close_ups: set = set()
        self.close_sent = False
        self.close_result = None
        # CORE-Direct: the rank feeding this member, the dedicated receive CQ of that QP
        # and how many completions software took from it; per message the count at which
        # receive 0 arrived and whether the send chain is posted.
        self.cd_in = -1
        self.cd_in_cq = None
        self.cd_count = 0
        self.m_cbase = 0
        self.m_cd_posted = 0

    # ---------------------------------------------------------------- helpers
    def _post_ctl(self, peer: int, imm: int, signaled: bool = False) -> None:
        qp = self.ctl_qps[peer]
        if qp.state != "RTS":
            return
        qp.post_send([WorkRequest(WRITE_WITH_IMM, 0, wr_id=_WR_CTRL, signaled=signaled,
                                  imm=imm)])

    def _consume_recv(self, peer: int, ctl: bool = False) -> None:
        """One receive of the block QP (``ctl``: the control QP) from ``peer`` was used;
        post another batch when few are left."""
        avail = self.ctl_avail if ctl else self.recv_avail
        n = avail[peer] - 1
        if n < 4:
            qp = (self.ctl_qps if ctl else self.qps)[peer]
            if qp.state == "RTS":
                b = self.g.engine.opts.recv_batch
                # Receives carry no buffer (WRITE-with-IMM places data by rkey), so one
                # request object can be posted many times.
                qp.post_recv([_RECV_WR] * b)
                n += b
        avail[peer] = n

    # ---------------------------------------------------------------- completions
    def on_wc(self, wc, peer: int, ctl: bool = False) -> None:
        """A completion of this member's QP to rank ``peer`` (``ctl``: its control QP)."""
        if self.dead or self.failed:
            return          # a failed group stops: late blocks and credits are dropped
        if wc.status != SUCCESS:
            if wc.opcode != RECV:
                self.learn_failure(self.g.members[peer], True)
            return
        if wc.opcode == RECV_RDMA_WITH_IMM:
            if ctl:
                self._consume_recv(peer, True)
                self._on_control(wc.imm, peer)
                return
            if peer == self.cd_in:
                self.cd_count += 1
            self._consume_recv(peer)
            self._on_block(wc, peer)        # sizes are >= 1 B: a block is never empty
        elif wc.wr_id == _WR_BLOCK:
            if self.g.send_log is not None:
                self.g.send_log.append((self.m_seq, self.rank, peer, wc.t_post,
                                        self.rt.sim.now))
            if self.g.cd:
                # Only the last block of the offloaded chain is signaled (RC completes in
                # order, so every earlier one is done too).
                self.m_si = len(self.m_sends) - 1
            self._on_sent()

    def _on_control(self, imm: int, peer: int) -> None:
        kind = imm >> 30
        if kind == _READY:
            seq14 = (imm >> 16) & 0x3FFF
            base = self.m_seq if self.m_recvs is not None else self.next_seq
            seq = base + ((seq14 - base) & 0x3FFF)
            self.credits.add((seq, peer, imm & 0xFFFF))
            if self.m_recvs is not None and seq == self.m_seq:
                self._pump()
        elif kind == _CLOSE:
            phase = (imm >> 28) & 3
            if phase == _CLOSE_REQ:
                self._close_req(imm & 0x0FFFFFFF)
            elif phase == _CLOSE_UP:
                self.close_ups.add(peer)
                self.progress += 1
                self._close_try_up()
            else:
                self._close_ok()

    def _begin(self, seq: int, k: int, root: bool) -> None:
        g = self.g
        plan = g.plan(k)
        r = self.rank
        self.m_seq = seq
        self.m_k = k
        self.m_sends = plan.sends[r]
        self.m_recvs = plan.recvs[r]
        self.m_si = self.m_ri = 0
        self.m_sending = False
        self.m_cd_posted = 0
        if root:
            self.m_held = b"\x01" * k
            self.m_nheld = k
        else:
            self.m_held = bytearray(k)
            self.m_nheld = 0
        self.m_msg = g.messages[seq] if seq < len(g.messages) else None
        rt = self.rt
        rt.thread.reserve(rt.sim.now, g.engine.opts.message_setup_ns)
        rt.activate(self)

    def _on_block(self, wc, peer: int) -> None:
        g = self.g
        imm = wc.imm
        lo = imm >> 16
        if self.m_recvs is None:
            if not g.announce:
                raise RuntimeError(f"group {g.id} rank {self.rank}: block before the message")
            self._begin(self.next_seq, (imm & 0xFFFF) or 65536, False)
            if g.on_incoming is not None:
                g.on_incoming(self.rank, self.m_k * g.block_size)
        ri = self.m_ri
        exp_peer, exp_lo, hi, _step = self.m_recvs[ri]
        if exp_peer != peer or exp_lo != lo:
            raise RuntimeError(f"group {g.id} rank {self.rank}: got block {lo} from rank "
                               f"{peer}, expected block {exp_lo} from rank {exp_peer}")
        held = self.m_held
        if hi - lo == 1:
            if not held[lo]:
                held[lo] = 1
                self.m_nheld += 1
        else:
            fresh = hi - lo - held.count(1, lo, hi)
            held[lo:hi] = b"\x01" * (hi - lo)
            self.m_nheld += fresh
        self.m_ri = ri + 1
        self.progress += 1
        k = self.m_k
        bs = g.block_size
        if hi == k:
            self.m_last_len = wc.byte_len - (k - 1 - lo) * bs
            self.m_size = (k - 1) * bs + self.m_last_len
        rt = self.rt
        if g.log is not None:
            g.log.append((self.m_seq, peer, self.rank, lo, hi, _step, wc.t_post,
                          rt.sim.now))
        if g.cd:
            if ri == 0 or hi == k:
                if ri == 0:
                    self.m_cbase = self.cd_count  # receive ri arrives as completion base + ri
                self._pump()
            if ri == 0:
                # Receive buffers for the whole message (the credit granted all of them).
                need = len(self.m_recvs) - 1 + 4 - self.recv_avail[peer]
                qp = self.qps[peer]
                if need > 0 and qp.state == "RTS":
                    qp.post_recv([_RECV_WR] * need, event=False)
                    self.recv_avail[peer] += need
        else:
            if ri + 1 < len(self.m_recvs):
                self._ready(ri + 1)
            self._pump()
        if ri == 0 and g.announce:
            # Copy the first block from the first-block buffer into the message area.
            n = wc.byte_len
            if g.engine.opts.carry_data:
                self.msg_mr.write(lo * bs, self.first_mr.read(0, n))
            rt.thread.reserve(rt.sim.now, n * 1e9 / g.engine.opts.copy_rate)
        self._check_done()

    def _ready(self, ri: int) -> None:
        """Tell the sender of receive ``ri`` that its block may come (ready_for_block)."""
        peer, lo, hi, _step = self.m_recvs[ri]
        g = self.g
        if g.cd and ri:
            return          # CORE-Direct: receive 0's credit covers the whole message
        if g.eager_limit:
            k = self.m_k
            bs = g.block_size
            length = (hi - lo) * bs if hi < k else (hi - 1 - lo) * bs + self.m_last_len
            if length <= g.eager_limit:
                return          # eager transfer: no credit needed
        self._post_ctl(peer, ((self.m_seq & 0x3FFF) << 16) | ri)

    def _pump_cd(self) -> None:
        """CORE-Direct: post the member's whole send sequence of the message at once.

        A block this member already holds goes right away; every other one is preceded by
        a WAIT on the receive CQ of the incoming QP for the completion count at which the
        block will have arrived, so the NIC relays it by itself. One credit (receive 0's
        ready_for_block) covers the message: the receiver pre-posts its receives.
        """
        sends = self.m_sends
        start = self.m_cd_posted
        if self.failed or self.m_recvs is None or start >= len(sends):
            return
        g = self.g
        peer = sends[0][0]
        if (self.m_seq, peer, 0) not in self.credits:
            return
        qp = self.qps[peer]
        if qp.state != "RTS":
            return
        self.m_sending = True
        eng = g.engine
        carry = eng.opts.carry_data
        bs = g.block_size
        k = self.m_k
        slow = eng.slow.get((self.node, g.members[peer]))
        if eng.slow_nodes:
            slow = max(slow or 0.0, eng.slow_nodes.get(self.node, 0.0),
                       eng.slow_nodes.get(g.members[peer], 0.0))
        arrive = {}
        for ri, (_p, lo_, hi_, _s) in enumerate(self.m_recvs):
            for b in range(lo_, hi_):
                arrive[b] = ri
        held = self.m_held
        last = len(sends) - 1
        wrs: list = []
        first: list | None = None
        for si in range(start, len(sends)):
            p, lo, hi, pri, _step = sends[si]
            if p != peer:
                raise RuntimeError("CORE-Direct relaying supports one send target")
            length = (hi - lo) * bs if hi < k else (hi - 1 - lo) * bs + self.m_last_len
            if pri == 0 and g.announce:
                rkey, roff = g.first_rkeys[peer], 0
            else:
                rkey, roff = g.area_rkeys[peer], lo * bs
            if held.find(0, lo, hi) != -1:
                if hi == k:
                    # The exact size comes with the last block: software relays that one
                    # on arrival (its length is unknown before).
                    break
                wrs.append(qp.wait_request(self.cd_in_cq,
                                           self.m_cbase + max(arrive[b] for b in range(lo, hi))))
            if slow and slow > 1.0:
                wrs.append(WorkRequest(WRITE, int(length * (slow - 1)), signaled=False))
            wrs.append(WorkRequest(WRITE_WITH_IMM, length, wr_id=_WR_BLOCK,
                                   signaled=si == last,
                                   imm=(lo << 16) | (k & 0xFFFF), rkey=rkey,
                                   remote_offset=roff,
                                   local=self.msg_mr if carry else None, local_offset=lo * bs))
            self.m_cd_posted = si + 1
            if first is None:
                first, wrs = wrs, []
        if first:
            qp.post_send(first, event=False)   # the first block goes with its own doorbell
        if wrs:
            qp.post_send(wrs, event=False)

    def _pump(self) -> None:
        if self.g.cd:
            self._pump_cd()
            return
        if self.m_sending or self.failed:
            return
        sends = self.m_sends
        si = self.m_si
        if si >= len(sends):
            return
        peer, lo, hi, pri, _step = sends[si]
        held = self.m_held
        if hi - lo == 1:
            if not held[lo]:
                return
        elif held.find(0, lo, hi) != -1:
            return
        g = self.g
        bs = g.block_size
        off = lo * bs
        length = (hi - lo) * bs if hi < self.m_k else (hi - 1 - lo) * bs + self.m_last_len
        if not (g.eager_limit and length <= g.eager_limit):
            key = (self.m_seq, peer, pri)
            cr = self.credits
            if key not in cr:
                return
            cr.remove(key)
        qp = self.qps[peer]
        if qp.state != "RTS":
            return
        if pri == 0 and g.announce:
            rkey, roff = g.first_rkeys[peer], 0
        else:
            rkey, roff = g.area_rkeys[peer], off
        carry = g.engine.opts.carry_data
        wr = WorkRequest(WRITE_WITH_IMM, length, wr_id=_WR_BLOCK,
                         imm=(lo << 16) | (self.m_k & 0xFFFF), rkey=rkey, remote_offset=roff,
                         local=self.msg_mr if carry else None, local_offset=off)
        self.m_sending = True
        eng = g.engine
        slow = eng.slow.get((self.node, g.members[peer]))
        if eng.slow_nodes:
            slow = max(slow or 0.0, eng.slow_nodes.get(self.node, 0.0),
                       eng.slow_nodes.get(g.members[peer], 0.0))
        if slow and slow > 1.0:
            qp.post_send([WorkRequest(WRITE, int(length * (slow - 1)), signaled=False), wr])
        else:
            qp.post_send([wr])

    def _on_sent(self) -> None:
        self.m_sending = False
        self.m_si += 1
        self.progress += 1
        self._pump()
        self._check_done()

    def _check_done(self) -> None:
        if (self.m_nheld != self.m_k or self.m_sending or self.m_si != len(self.m_sends)
                or self.m_recvs is None or self.m_ri != len(self.m_recvs)):
            return
        g = self.g
        rt = self.rt
        now = rt.sim.now
        t_done = rt.thread.reserve(now, 0.0)
        seq = self.m_seq
        msg = self.m_msg
        self.m_recvs = None
        self.m_sends = ()
        self.m_held = b""
        self.next_seq = seq + 1
        if self.credits:
            self.credits = {c for c in self.credits if c[0] > seq}
        if self.rank != 0 and not self.failed:
            self._post_ctl(g.first_sender[self.rank], ((self.next_seq & 0x3FFF) << 16) | 0)
        if msg is not None:
            msg.done_at[self.rank] = t_done
        rt.sim.call_at(t_done, self._deliver, msg, seq)

    def _deliver(self, msg: Message | None, seq: int) -> None:
        g = self.g
        if msg is not None:
            msg._settle()
        if self.dead:
            return
        if g.on_complete is not None:
            g.on_complete(self.rank, seq)
        if self.close_count is not None:
            self._close_try_up()

    def abandon(self) -> None:
        """Settle, as failed, every submitted message this member has not completed."""
        self.m_recvs = None
        for msg in self.g.messages[self.next_seq:]:
            if msg.done_at[self.rank] is None:
                msg.failed = True
                msg._settle()
        self.next_seq = max(self.next_seq, len(self.g.messages))

    # ---------------------------------------------------------------- failures
    def learn_failure(self, suspect: int | None, local: bool) -> None:
        """Learn that the group failed (suspect: a node id or None); relay if ``local``."""
        if self.failed or self.dead:
            return
        g = self.g
        rt = self.rt
        self.failed = True
        self.suspect = suspect
        now = rt.sim.now
        g.failures[self.rank] = (now, suspect)
        self.abandon()
        if g.on_failure is not None:
            g.on_failure(self.rank, suspect)
        if local:
            o = g.engine.opts
            for r, other in enumerate(g.ms):
                if r == self.rank:
                    continue
                t = rt.thread.reserve(rt.sim.now, o.oob_cpu_ns)
                g.engine._oob(self.node, other.node, t + o.oob_latency_ns,
                              other.learn_failure, suspect, False)
        if self.closing and self.close_result is None:
            self._close_finish(False)

    def watchdog(self) -> bool:
        """Called every ``watchdog_ns``; False when there is nothing left to watch."""
        if self.dead or self.failed:
            return False
        busy = self.m_recvs is not None
        waiting_close = self.closing and self.close_result is None
        if not busy and not waiting_close:
            return False
        if self.progress != self.seen:
            self.seen = self.progress
            self.idle_periods = 0
            return True
        self.idle_periods += 1
        if self.idle_periods > self.g.engine.opts.watchdog_max_idle:
            return False        # give up watching (a stuck, not a broken, group)
        # No progress for a whole period: probe the peers this member waits for (a
        # zero-length write; a dead peer or a cut cable breaks the connection).
        if busy:
            if self.m_ri < len(self.m_recvs):
                self._post_ctl(self.m_recvs[self.m_ri][0], _PROBE << 30)
            # (Probes go on the control QP, so they never shift CORE-Direct WAIT counts,
            # which count completions of the block QP.)
            if self.m_si < len(self.m_sends):
                self._post_ctl(self.m_sends[self.m_si][0], _PROBE << 30)
        else:
            peers = [self.g.parent[self.rank]] if self.rank else []
            for peer in peers + self.g.children[self.rank]:
                self._post_ctl(peer, _PROBE << 30)
        return True

    # ---------------------------------------------------------------- close
    def _close_req(self, count: int) -> None:
        if self.close_count is not None:
            return
        self.close_count = count
        self.progress += 1
        for c in self.g.children[self.rank]:
            self._post_ctl(c, (_CLOSE << 30) | (_CLOSE_REQ << 28) | count, signaled=True)
        if self.failed:
            self._close_finish(False)
        else:
            self._close_try_up()

    def _close_try_up(self) -> None:
        if (self.close_result is not None or self.close_sent or self.failed
                or self.close_count is None or self.m_recvs is not None
                or self.next_seq < self.close_count
                or len(self.close_ups) < len(self.g.children[self.rank])):
            return
        if self.rank == 0:
            self._close_ok()
        else:
            self.close_sent = True
            self._post_ctl(self.g.parent[self.rank], (_CLOSE << 30) | (_CLOSE_UP << 28),
                           signaled=True)

    def _close_ok(self) -> None:
        if self.close_result is not None or self.failed:
            return
        for c in self.g.children[self.rank]:
            self._post_ctl(c, (_CLOSE << 30) | (_CLOSE_OK << 28), signaled=True)
        self._close_finish(True)

    def _close_finish(self, ok: bool) -> None:
        g = self.g
        self.close_result = ok
        g.close_results[self.rank] = (ok, self.suspect)
        g._close_settle()


class Group:
    """An RDMC group: ``members`` (node ids, member 0 the root), ``block_size`` [B],
    ``algorithm``; ``n`` members, ``messages`` (every :class:`Message` sent), ``failed``,
    ``failures`` (``{rank: (time [ns], suspected node)}``). Made by :meth:`Rdmc.create_group`.

    Callbacks (all optional): ``on_incoming(rank, rounded_size)`` when a member's first
    block of a message arrives; ``on_complete(rank, seq)`` at each member's local
    completion; ``on_failure(rank, suspected_node)`` when a member learns of a failure.
    """

    def __init__(self, engine: "Rdmc", gid: int, members: Sequence[int], block_size: int,
                 algorithm: str, rack_size: int | None, max_message: int,
                 on_incoming: Callable | None, on_complete: Callable | None,
                 on_failure: Callable | None, plan_fn: Callable[[int], Plan] | None = None,
                 announce: bool = True, eager_limit: int = 0,
                 pairs: Iterable[tuple[int, int]] | None = None,
                 parent: Sequence[int] | None = None, fixed_size: int | None = None) -> None:
        if isinstance(members, (str, bytes)) or not isinstance(members, Iterable):
            raise TypeError(f"members must be a sequence of node ids, got {members!r}")
        members = list(members)
        nodes = len(engine.cluster.nodes)
        for m in members:
            if isinstance(m, bool) or not isinstance(m, Integral) or not 0 <= m < nodes:
                raise ValueError(f"members: node ids 0..{nodes - 1} of the cluster, got {m!r}")
        members = [int(m) for m in members]
        if len(members) < 2 or len(set(members)) != len(members):
            raise ValueError(f"members: at least two distinct node ids expected, got {members!r}")
        if isinstance(block_size, bool) or not isinstance(block_size, Integral) or block_size < 1:
            raise ValueError(f"block_size must be a whole number of bytes >= 1, got {block_size!r}")
        if (isinstance(max_message, bool) or not isinstance(max_message, Integral)
                or max_message < 1):
            raise ValueError(f"max_message must be a whole number of bytes >= 1, got "
                             f"{max_message!r}")
        self.engine = engine
        self.id = gid
        self.members = members
        self.n = len(members)
        self.block_size = int(block_size)
        self.algorithm = algorithm
        self.rack_size = rack_size
        self.max_message = int(max_message)
        self.on_incoming = on_incoming
        self.on_complete = on_complete
        self.on_failure = on_failure
        self.announce = announce
        self.eager_limit = eager_limit
        self.fixed_size = fixed_size    # the only message size the plan is for (MPI), or None
        self.cd = engine.opts.core_direct
        if self.cd and (algorithm != "chain" or not announce):
            raise ValueError("core_direct supports the chain algorithm only")
        self.messages: list[Message] = []
        self.failures: dict[int, tuple[float, int | None]] = {}
        self.close_results: dict[int, tuple[bool, int | None]] = {}
        self._close_ev = None
        # record=True: receives (seq, sender, receiver, lo, hi, step, t_post, t_seen) and
        # sends (seq, sender, receiver, t_post, t_seen), ranks and [ns].
        self.log: list | None = [] if engine.opts.record else None
        self.send_log: list | None = [] if engine.opts.record else None
        self._plans: dict[int, Plan] = {}
        self._plan_fn = plan_fn or (lambda k: engine.plan(algorithm, self.n, k, rack_size))
        n = self.n
        if pairs is None:
            L = n.bit_length()
            pairs = set()
            for k in range(1, 2 * L + 6):
                p = self._plan_fn(k)
                for r in range(n):
                    for t in p.sends[r]:
                        pairs.add((min(r, t[0]), max(r, t[0])))
        if parent is None:
            p1 = self._plan_fn(1)
            parent = [-1] + [p1.recvs[r][0][0] for r in range(1, n)]
        self.first_sender = list(parent)
        self.parent = list(parent)
        self.children: list[list[int]] = [[] for _ in range(n)]
        for r in range(1, n):
            self.children[parent[r]].append(r)
        rts = [engine._rt(m) for m in members]
        self.ms = [_Member(self, r, rts[r]) for r in range(n)]
        for m in self.ms:
            if m.node in engine.dead_nodes:
                m.dead = True           # created on a node that has crashed: never acts
        self.first_rkeys = [m.first_mr.rkey for m in self.ms]
        self.area_rkeys = [m.msg_mr.rkey for m in self.ms]
        o = engine.opts
        for a, b in sorted(pairs):
            ma, mb = self.ms[a], self.ms[b]
            cqs = []
            for m, peer in ((ma, b), (mb, a)):
                if self.cd and m.rank and parent[m.rank] == peer:
                    # CORE-Direct: the incoming QP's receives get a CQ of their own, so its
                    # completion count says exactly which blocks have arrived.
                    m.cd_in = peer
                    m.cd_in_cq = m.rt.add_cq()
                    cqs.append(m.cd_in_cq)
                else:
                    cqs.append(m.rt.cq)
            qa = ma.rt.ctx.create_qp("RC", ma.rt.cq, cqs[0])
            qb = mb.rt.ctx.create_qp("RC", mb.rt.cq, cqs[1])
            qa.connect(qb)
            # The control QPs complete on the members' main CQs (never the CORE-Direct
            # block CQ, whose count says which blocks are in).
            ca = ma.rt.ctx.create_qp("RC", ma.rt.cq, ma.rt.cq)
            cb = mb.rt.ctx.create_qp("RC", mb.rt.cq, mb.rt.cq)
            ca.connect(cb)
            for q, m, peer, ctl in ((qa, ma, b, False), (qb, mb, a, False),
                                    (ca, ma, b, True), (cb, mb, a, True)):
                if o.retry_timeout_ns is not None:
                    q.modify(timeout_ns=o.retry_timeout_ns)
                (m.ctl_qps if ctl else m.qps)[peer] = q
                (m.ctl_avail if ctl else m.recv_avail)[peer] = o.recv_batch
                q.post_recv([_RECV_WR] * o.recv_batch)
                m.rt.dispatch[q.qp_num] = (m, peer, ctl)
                q.on_error(lambda _q, m=m, peer=peer: m.learn_failure(m.g.members[peer], True))
        if announce:
            # Every receiver readies its first block of message 0 at its first sender.
            for r in range(1, n):
                if not self.ms[r].dead:
                    self.ms[r]._post_ctl(self.first_sender[r], 0)

    @property
    def root(self) -> int:
        """Node id of the root (member 0)."""
        return self.members[0]

    def plan(self, k: int) -> Plan:
        """The plan for a message of ``k`` blocks (cached per group)."""
        p = self._plans.get(k)
        if p is None:
            p = self._plans[k] = self._plan_fn(k)
        return p

    @property
    def failed(self) -> bool:
        """True once some member learned of a failure."""
        return bool(self.failures)

    def send(self, size: int, data: bytes | None = None) -> Message:
        """Multicast ``size`` [B] from the root (member 0) now; returns the :class:`Message`.

        ``data`` (exactly ``size`` bytes, only with ``carry_data=True``) is what the root
        sends; without it the bytes are not modelled. The message goes in
        ``ceil(size / block_size)`` blocks (at most :data:`MAX_BLOCKS`), the last one
        shorter if ``size`` is not a multiple of the block size.
        Raises RuntimeError when the root is still sending an earlier message (RDMC does
        not queue sends; send the next one from ``on_complete`` or after ``done``), the
        group failed or was closed; TypeError / ValueError naming the argument for a size
        that is not a whole number in ``1 .. max_message`` or needs too many blocks, or
        for bad ``data``. Nothing is changed when it raises.
        """
        root = self.ms[0]
        if isinstance(size, bool) or not isinstance(size, Integral):
            raise TypeError(f"size must be a whole number of bytes, got {size!r}")
        size = int(size)
        if self.fixed_size is not None and size != self.fixed_size:
            raise ValueError(f"size: this group was set up for messages of exactly "
                             f"{self.fixed_size} B, got {size}")
        if not 1 <= size <= self.max_message:
            raise ValueError(f"size must be in 1..{self.max_message} B (max_message), got {size}")
        k = -(-size // self.block_size)
        if k > MAX_BLOCKS:
            raise ValueError(f"size: {k} blocks of {self.block_size} B exceed the limit of "
                             f"{MAX_BLOCKS}; use larger blocks")
        if data is not None:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"data must be bytes, got {type(data).__name__}")
            if len(data) != size:
                raise ValueError(f"data must have exactly size ({size}) bytes, got {len(data)}")
            if not self.engine.opts.carry_data:
                raise ValueError("data: the engine moves no bytes; create it with "
                                 "carry_data=True to send data")
        if self._close_ev is not None:
            raise RuntimeError(f"group {self.id} is closed")
        if root.m_recvs is not None:
            raise RuntimeError(f"group {self.id} is busy: the root is still sending")
        if self.failed or root.dead:
            raise RuntimeError(f"group {self.id} has failed")
        sim = self.engine.sim
        seq = root.next_seq
        msg = Message(self, seq, size, k, sim.now)
        self.messages.append(msg)
        if data is not None:
            root.msg_mr.write(0, bytes(data))
        root._begin(seq, k, True)
        root.m_last_len = size - (k - 1) * self.block_size
        root.m_size = size
        for m in self.ms[1:]:
            if not self.announce and not m.dead and not m.failed:
                m._begin(seq, k, False)     # the size is known to every member (MPI)
                m.m_msg = msg
                m.m_last_len = root.m_last_len = size - (k - 1) * self.block_size
                m.m_size = size
                if m.m_recvs:
                    m._ready(0)
                else:
                    m._check_done()
            elif m.dead:
                m.abandon()
        for m in self.ms[1:]:
            if m.failed and not m.dead:
                m.abandon()
        if not self.announce and root.m_recvs:
            root._ready(0)          # MPI's ring also passes chunks back to the root
        root._pump()
        root._check_done()
        return msg

    def received(self, rank: int, size: int) -> bytes:
        """The first ``size`` bytes of member ``rank``'s message area: the last message it
        received (needs ``carry_data=True``; ValueError otherwise, or for a rank outside
        ``0 .. n-1`` or a size outside ``1 .. max_message``)."""
        if not self.engine.opts.carry_data:
            raise ValueError("received: the engine moves no bytes; create it with "
                             "carry_data=True")
        if isinstance(rank, bool) or not isinstance(rank, Integral) or not 0 <= rank < self.n:
            raise ValueError(f"rank must be a member rank 0..{self.n - 1}, got {rank!r}")
        if (isinstance(size, bool) or not isinstance(size, Integral)
                or not 1 <= size <= self.max_message):
            raise ValueError(f"size must be a whole number of bytes in 1..{self.max_message}, "
                             f"got {size!r}")
        return self.ms[rank].msg_mr.read(0, size)

    def close(self):
        """Close the group (all members); returns an event whose value is
        ``{rank: (ok, suspected_node)}`` once every live member has a result. ``ok`` is True
        only if every member completed every message sent; ``suspected_node`` is the node
        id a failed member blamed (or None). Calling it again returns the same event; a
        closed group takes no more :meth:`send`."""
        if self._close_ev is None:
            self._close_ev = self.engine.sim.event()
            for m in self.ms:          # every member's application calls close
                if m.dead:
                    continue
                m.closing = True
                if m.failed:
                    m._close_finish(False)
                else:
                    m.rt.activate(m)
            root = self.ms[0]
            if not root.dead and not root.failed:
                root._close_req(len(self.messages))
            self._close_settle()
        return self._close_ev

    def _close_settle(self) -> None:
        ev = self._close_ev
        if ev is None or ev.triggered:
            return
        live = [r for r, m in enumerate(self.ms) if not m.dead]
        if all(r in self.close_results for r in live):
            ev.succeed(dict(self.close_results))


class Rdmc:
    """The RDMC library instance of a cluster: node runtimes, groups, failures."""

    def __init__(self, cluster, options: EngineOptions | None = None, **kw) -> None:
        """``options`` (an :class:`EngineOptions`) and/or its fields as keywords (they
        override ``options``). Raises TypeError for an unknown option, TypeError /
        ValueError naming the option for a bad value."""
        if options is not None and not isinstance(options, EngineOptions):
            raise TypeError(f"options must be an EngineOptions, got {options!r}")
        opts = options or EngineOptions()
        unknown = sorted(set(kw) - set(EngineOptions.__dataclass_fields__))
        if unknown:
            raise TypeError(f"unknown option {unknown[0]!r}: expected fields of "
                            f"EngineOptions ({', '.join(EngineOptions.__dataclass_fields__)})")
        if kw:
            opts = replace(opts, **kw)
        nodes = len(cluster.nodes)
        for a, b, _f in opts.slow_pairs:
            for x in (a, b):
                if x is not None and x >= nodes:
                    raise ValueError(f"slow_pairs: node ids 0..{nodes - 1} of the cluster, "
                                     f"got {x!r}")
        self.cluster = cluster
        self.sim = cluster.sim
        self.opts = opts
        self.rts: dict[int, _NodeRt] = {}
        self.groups: list[Group] = []
        self.slow: dict[tuple[int, int], float] = {}
        self.slow_nodes: dict[int, float] = {}
        for a, b, f in opts.slow_pairs:
            if b is None:
                self.slow_nodes[a] = float(f)
            else:
                self.slow[(a, b)] = self.slow[(b, a)] = float(f)
        self._plans: dict[tuple, Plan] = {}
        self.dead_nodes: set[int] = set()
        self.cut_nodes: set[int] = set()

    def _rt(self, node: int) -> _NodeRt:
        rt = self.rts.get(node)
        if rt is None:
            rt = self.rts[node] = _NodeRt(self, node)
            rt.dead = node in self.dead_nodes
        return rt

    def plan(self, algorithm: str, n: int, k: int, rack_size: int | None = None) -> Plan:
        """The (cached) plan of ``algorithm`` for ``n`` members and ``k`` blocks."""
        key = (algorithm, n, k, rack_size)
        p = self._plans.get(key)
        if p is None:
            if len(self._plans) > 256:
                self._plans.clear()
            p = self._plans[key] = rdmc_plan(algorithm, n, k, rack_size)
        return p

    def create_group(self, members: Sequence[int], block_size: int = 1 << 20,
                     algorithm: str = "binomial-pipeline", *, rack_size: int | None = None,
                     max_message: int = 1 << 31, on_incoming: Callable | None = None,
                     on_complete: Callable | None = None,
                     on_failure: Callable | None = None) -> Group:
        """Create a group over ``members`` (node ids; the first is the root) that sends
        messages of at most ``max_message`` [B] in blocks of ``block_size`` [B] along
        ``algorithm``'s schedule. Raises ValueError for an unknown algorithm, fewer than two
        distinct members or a member that is not a node of the cluster, a ``block_size`` or
        ``max_message`` that is not a whole number of bytes >= 1, a ``rack_size`` with an
        algorithm other than hybrid; TypeError for a callback that is not callable.

        The callbacks run in simulated time: ``on_incoming(rank, size_rounded_up_to_blocks)``
        when a member's first block of a message arrives, ``on_complete(rank, seq)`` at each
        member's local completion of message ``seq``, ``on_failure(rank, suspected_node)``
        when a member learns that the group failed."""
        if not isinstance(algorithm, str) or algorithm not in S.ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}: one of {', '.join(S.ALGORITHMS)}")
        if rack_size is not None:
            if algorithm != "hybrid":
                raise ValueError(f"rack_size applies only to the hybrid algorithm, not "
                                 f"{algorithm!r}")
            _whole("rack_size", rack_size, 1)
        for name, fn in (("on_incoming", on_incoming), ("on_complete", on_complete),
                         ("on_failure", on_failure)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, got {fn!r}")
        g = Group(self, len(self.groups), members, block_size, algorithm, rack_size,
                  max_message, on_incoming, on_complete, on_failure)
        self.groups.append(g)
        return g

    # ---------------------------------------------------------------- faults and delays
    def fail_node(self, node: int) -> None:
        """Node ``node`` crashes now: its NIC stops, its RDMC state stops acting."""
        self._node_arg("fail_node", node)
        self.dead_nodes.add(node)
        rt = self.rts.get(node)
        if rt is not None:
            rt.dead = True
            for g in self.groups:
                for m in g.ms:
                    if m.node == node and not m.dead:
                        m.abandon()
                        m.dead = True
                        g._close_settle()
        self.cluster.fail_node(node)

    def fail_link(self, node: int) -> None:
        """Cut the cable of node ``node``'s RDMC NIC now (both directions)."""
        self._node_arg("fail_link", node)
        self.cut_nodes.add(node)
        self.cluster.fabric.fail_link(self._rt(node).ctx.nic_id)

    def inject_delay(self, node: int, at_ns: float, ns: float) -> None:
        """Stall node ``node``'s completion thread for ``ns`` [ns] from time ``at_ns`` [ns]
        (absolute simulated time, not before now)."""
        self._node_arg("inject_delay", node)
        _number("inject_delay: at_ns", at_ns, 0.0, "[ns]")
        if at_ns < self.sim.now:
            raise ValueError(f"inject_delay: at_ns must not be in the past (now {self.sim.now} "
                             f"ns), got {at_ns!r}")
        _number("inject_delay: ns", ns, 0.0, "[ns]")
        th = self._rt(node).thread
        self.sim.call_at(at_ns, lambda: th.reserve(self.sim.now, ns))

    def _node_arg(self, what: str, node: object) -> None:
        nodes = len(self.cluster.nodes)
        if isinstance(node, bool) or not isinstance(node, Integral) or not 0 <= node < nodes:
            raise ValueError(f"{what}: node must be a node id 0..{nodes - 1} of the cluster, "
                             f"got {node!r}")

    def _oob(self, src: int, dst: int, t: float, fn: Callable, *args) -> None:
        # One message on the out-of-band TCP mesh; lost if an end is down or cut.
        if src in self.cut_nodes or dst in self.cut_nodes or dst in self.dead_nodes:
            return
        self.sim.call_at(t, self._oob_deliver, dst, fn, args)

    def _oob_deliver(self, dst: int, fn: Callable, args: tuple) -> None:
        if dst in self.dead_nodes:
            return
        fn(*args)

    # ---------------------------------------------------------------- observation
    def cpu_snapshot(self) -> dict[int, float]:
        """CPU time [ns] each node's completion thread has used so far (work + spinning)."""
        return {n: rt.cpu_ns() for n, rt in self.rts.items()}
