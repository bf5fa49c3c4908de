"""Verbs: the only interface software uses to reach the simulated hardware.

Mirrors libibverbs: a :class:`Context` opened on one NIC of a node (dedicated to a
thread, or shared by several), :class:`CompletionQueue`, :class:`QueuePair` (RC, UC, UD),
:class:`MemoryRegion` (with a page size), :class:`WorkRequest` and
:class:`WorkCompletion`. Software runs as SimPy generator processes on a
:class:`Thread` and yields the events these calls return::

    ctx = Context(cluster, node=0, nic=0, thread=cluster.nodes[0].thread(0))
    cq = ctx.create_cq()
    qp = ctx.create_qp("RC", cq)
    qp.connect(remote_qp)
    yield qp.post_send([WorkRequest(READ, 64, wr_id=1, rkey=mr.rkey)])  # CPU for posting
    wcs = yield cq.wait()                                              # poll until a CQE

Costs charged to the posting thread's core: ``wqe_build`` per WQE and ``mmio`` per 64-byte
write-combining chunk stored to the NIC (``post_send`` takes a list: one list is one
doorbell). A single WQE of at most ``blueflame_size`` bytes is pushed whole with the
doorbell (BlueFlame: one chunk per 64 B of WQE, so a large inline payload costs more
stores); a list is announced by an 8-byte doorbell and fetched by the NIC with one DMA
read. WQE sizes follow the mlx5 layout: control 16 B, UD address 48 B, remote address
16 B, atomic 16 B, then a 16-B data pointer or the inline payload with a 4-B header, all
rounded up to 64-B basic blocks. A context
has ``uar_dedicated`` doorbell registers; QPs beyond them are spread over ``uar_shared``
registers, each guarded by a lock that serialises the posts of its QPs; taking it after
another thread costs ``uar_lock`` (the lock's cache line moves between cores). With
``blueflame_inline_only`` (libmlx4) only BlueFlame posts take the lock. A core's cache
keeps the posting state (send queue and completion queue rings, driver state) of the
``qp_state_cache`` QPs it posted to most recently; a post to any other QP costs
``qp_state_miss`` more, the misses that bring its rings back.

Traces (scope the posting thread, e.g. ``n0/t0``): ``cpu.qp_state_miss`` (a post to a QP
outside the core's cache; ``qpn``), ``cpu.wqe_build`` (building the WQEs
of one ``post_send``; ``wqes``, ``bytes``), ``cpu.mmio`` (the doorbell or BlueFlame
stores, with a shared register's lock; ``blueflame``), each lasting until ``end`` [ns];
``nic.wqe_fetch`` (scope the NIC: after a plain doorbell, the NIC reads the WQEs over
PCIe, until they are in).
"""
from __future__ import annotations

from collections import OrderedDict
from numbers import Integral
from typing import Sequence

from .hw.calendar import Calendar
from .hw.cq import Cq
from .hw.host import CpuThread as Thread
from .hw.host import add_hogs as _add_hogs
from .hw.memory import MemoryRegion
from .hw.rnic import RC, UC, UD, QpHw
from .hw.wqe import GRH as UD_GRH
from .hw.wqe import (CAS, FAA, LOC_LEN_ERR, OPCODE_NAMES, READ, RECV, RECV_RDMA_WITH_IMM,
                     REM_ACCESS_ERR, REM_INV_REQ_ERR, RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, SEND,
                     SEND_WITH_IMM, STATUS_NAMES, SUCCESS, WAIT, WR_FLUSH_ERR, WRITE,
                     WRITE_WITH_IMM, WorkCompletion, WorkRequest)

__all__ = ["Context", "CompletionQueue", "QueuePair", "MemoryRegion", "WorkRequest",
           "WorkCompletion", "Thread", "SEND", "SEND_WITH_IMM", "WRITE", "WRITE_WITH_IMM",
           "READ", "CAS", "FAA", "RECV", "RECV_RDMA_WITH_IMM", "WAIT", "RC", "UC", "UD",
           "OPCODE_NAMES", "STATUS_NAMES", "UD_GRH", "add_cpu_hogs",
           # completion status codes (wc.status; STATUS_NAMES[wc.status] is the name)
           "SUCCESS", "LOC_LEN_ERR", "REM_ACCESS_ERR", "RETRY_EXC_ERR", "WR_FLUSH_ERR",
           "RNR_RETRY_EXC_ERR", "REM_INV_REQ_ERR"]

# UD_GRH [B]: the space at the start of every UD receive buffer the verbs API reserves for
# a GRH; a UD receive buffer must hold it plus the message.


def wqe_bytes(qtype: str, wr: WorkRequest) -> int:
    """Size [B] of the WQE for ``wr`` on a QP of type ``qtype`` (mlx5 layout, 64-B blocks)."""
    op = wr.opcode
    if op == WAIT:
        return 64
    n = 16
    if qtype == UD:
        n += 48
    if WRITE <= op <= FAA:      # WRITE, WRITE_WITH_IMM, READ, CAS, FAA: remote address
        n += 16
        if op >= CAS:           # CAS, FAA: atomic segment
            n += 16
    if wr.inline:
        n += 4 + -(-wr.length // 16) * 16
    else:
        n += 16
    return -(-n // 64) * 64


def _is_count(x) -> bool:
    """True for a whole number (Python or numpy integer), False for bool, float, str."""
    return x.__class__ is int or (isinstance(x, Integral) and not isinstance(x, bool))


def _wr_list(wrs, call: str) -> None:
    """Reject anything but a list (or tuple) of WorkRequests, naming ``call``."""
    if wrs.__class__ is not list and not isinstance(wrs, (list, tuple)):
        raise TypeError(f"{call} takes a list of WorkRequests (one list = one doorbell), "
                        f"got {type(wrs).__name__}")
    for wr in wrs:
        if wr.__class__ is not WorkRequest:
            raise TypeError(f"{call}: every element must be a WorkRequest, got "
                            f"{type(wr).__name__}")


# A WorkRequest that is never posted: no list element is it, so only an element that
# claims equality with any WorkRequest compares equal to it (see _one_repeated).
_PROBE = WorkRequest(RECV)


def _one_repeated(wrs) -> bool:
    """True when ``wrs`` is a list or tuple of n >= 2 references to one WorkRequest.

    Two C-speed counts instead of a Python pass over the elements: WorkRequest defines no
    ``__eq__``, so an element other than ``wrs[0]`` equals it only if it is an object
    whose own ``__eq__`` says so (``mock.ANY``, ...), and such an object also equals
    :data:`_PROBE`, which no genuine element does. Any doubt (a comparison raising)
    answers False, and the caller checks element by element (:func:`_wr_list`)."""
    if (wrs.__class__ is not list and wrs.__class__ is not tuple) or len(wrs) < 2:
        return False
    w0 = wrs[0]
    if w0.__class__ is not WorkRequest:
        return False
    try:
        return wrs.count(w0) == len(wrs) and wrs.count(_PROBE) == 0
    except Exception:
        return False


def _check_local(wr: WorkRequest, n: int, node: int, what: str) -> None:
    """``wr.local[local_offset, +n)`` is a registered region of this node: the NIC would
    fail the request with a local protection error otherwise."""
    mr = wr.local
    if not isinstance(mr, MemoryRegion):
        raise TypeError(f"{what}: local must be a MemoryRegion (from reg_mr) or None, got "
                        f"{type(mr).__name__}")
    if mr.node != node:
        raise ValueError(f"{what}: local region (lkey {mr.lkey}) is registered on node "
                         f"{mr.node}, not on this QP's node {node}")
    off = wr.local_offset
    if not _is_count(off) or not mr.check(off, n):
        raise ValueError(f"{what}: local bytes [{off!r}, +{n}) lie outside the local region "
                         f"of {mr.length} B")


def _bad_length(wr: WorkRequest, what: str) -> ValueError:
    return ValueError(f"{what}: length must be a whole number of bytes >= 0, got "
                      f"{wr.length!r}")


class _Uar:
    """A doorbell register of a context; shared ones serialise posts behind a lock.

    The lock is held for the MMIO store; it is booked in a calendar (a thread whose core
    is busy far ahead must not make others wait for a post it has not reached yet).
    """

    __slots__ = ("cal", "users", "last")

    def __init__(self, env) -> None:
        self.cal = Calendar(env)
        self.users = 0
        self.last = None        # thread that rang it last (owns the lock's cache line)


def _cache_qp_state(node, thread: Thread, hw: QpHw) -> bool:
    """Make ``hw``'s posting state the most recent in the cache of ``thread``'s core (which
    keeps the host's ``qp_state_cache`` most recently used QPs); True if it was there."""
    lru = node.qp_state.get(thread.core)
    if lru is None:
        lru = node.qp_state[thread.core] = OrderedDict()
    if hw in lru:
        lru.move_to_end(hw)
        return True
    lru[hw] = None
    if len(lru) > thread.host.qp_state_cache:
        lru.popitem(last=False)
    return False


class Context:
    """An opened device context (``ibv_open_device``) on NIC ``nic`` of node ``node``.

    ``thread`` is the default thread that posts on this context's QPs; a context shared by
    several threads passes ``thread=`` to :meth:`create_qp` for each QP.
    """

    def __init__(self, cluster, node: int, nic: int = 0, thread: Thread | None = None) -> None:
        if not _is_count(node) or not 0 <= node < len(cluster.nodes):
            raise ValueError(f"Context: node must be a node index 0..{len(cluster.nodes) - 1}, "
                             f"got {node!r}")
        nics = cluster.nodes[node].nics
        if not _is_count(nic) or not 0 <= nic < len(nics):
            raise ValueError(f"Context: nic must be a NIC index 0..{len(nics) - 1} of node "
                             f"{node}, got {nic!r}")
        self.cluster = cluster
        self.sim = cluster.sim
        self.node = cluster.nodes[node]
        self._nic = self.node.nics[nic]
        self.nic_id = self._nic.id
        self.thread = thread
        host = cluster.profile.host
        self.host = host
        ded = cluster.profile.nic.uar_dedicated
        env = self.sim.env
        self._uars = [_Uar(env) for _ in range(ded)]
        self._shared_uars = [_Uar(env) for _ in range(max(1, cluster.profile.nic.uar_shared))]
        self._nqp = 0

    @property
    def mtu(self) -> int:
        """The path MTU [B]."""
        return self._nic.mtu

    @property
    def max_inline(self) -> int:
        """Largest inline payload [B]."""
        return self._nic.p.max_inline

    def create_cq(self, thread: Thread | None = None,
                  loop_delay: float = 0.0) -> "CompletionQueue":
        """A completion queue polled by ``thread`` (default: the context's thread).

        ``loop_delay`` [ns, >= 0]: what the polling thread's event loop adds, when idle, to
        the host's ``poll_detect`` before it polls this queue (its other polls and scans
        between two polls of this one); 0 for a loop that polls nothing else."""
        if isinstance(loop_delay, bool) or not isinstance(loop_delay, (int, float)) \
                or not loop_delay >= 0:
            raise ValueError(f"create_cq: loop_delay must be a number of ns >= 0, got "
                             f"{loop_delay!r}")
        th = thread or self.thread
        cq = Cq(self.sim, f"{self._nic.name}/cq", self.host, float(loop_delay))
        return CompletionQueue(cq, th)

    def create_qp(self, qtype: str, send_cq: "CompletionQueue",
                  recv_cq: "CompletionQueue | None" = None,
                  thread: Thread | None = None) -> "QueuePair":
        """A queue pair of type ``"RC"``, ``"UC"`` or ``"UD"`` posting from ``thread``."""
        if qtype not in (RC, UC, UD):
            raise ValueError(f"QP type must be RC, UC or UD, not {qtype!r}")
        th = thread or self.thread
        if th is None:
            raise ValueError("create_qp needs a thread (none given and the context has none)")
        recv_cq = recv_cq or send_cq
        hw = self._nic.create_qp(qtype, send_cq._cq, recv_cq._cq)
        if self._nqp < len(self._uars):
            uar = self._uars[self._nqp]
        else:
            # Beyond the dedicated registers, QPs are spread round robin over the shared
            # ones; a register with more than one QP needs its lock.
            uar = self._shared_uars[(self._nqp - len(self._uars)) % len(self._shared_uars)]
        uar.users += 1
        self._nqp += 1
        # ibv_create_qp writes the new rings, so they start in the creating core's cache.
        _cache_qp_state(self.node, th, hw)
        return QueuePair(self, hw, th, uar)

    def poll_memory(self, mr: MemoryRegion, offset: int, thread: Thread | None = None):
        """An event fired when a remote WRITE covering ``mr[offset]`` lands and a thread
        spinning on that location sees it (``poll_detect`` later); the spin's CPU is booked
        on ``thread`` (default: the context's thread). The value is the landing time [ns].
        """
        th = thread or self.thread
        ev = self.sim.event()
        detect = self.host.poll_detect

        def landed(t: float) -> None:
            def fire() -> None:
                end = th.reserve(self.sim.now, detect)
                ev._ok = True
                ev._value = t
                self.sim.env.schedule(ev, delay=end - self.sim.now)
            self.sim.call_at(max(t, self.sim.now), fire)

        mr.watch.setdefault(offset, []).append(landed)
        return ev

    def reg_mr(self, length: int, page_size: int = 2 * 1024 * 1024,
               name: str = "", chunk: int = 4096) -> MemoryRegion:
        """Register ``length`` bytes of host memory with pages of ``page_size`` bytes.

        ``chunk`` [B] is how the simulator stores the contents (sparse chunks allocated on
        first write; a power of two): smaller chunks save memory when small records are
        scattered over a large region. It never affects timing. ValueError unless
        ``length`` is a whole number >= 1, ``page_size`` 4 KiB, 2 MiB or 1 GiB and
        ``chunk`` a power of two >= 8."""
        if not _is_count(length) or length < 1:
            raise ValueError(f"reg_mr: length must be a whole number of bytes >= 1, got "
                             f"{length!r}")
        mr = MemoryRegion(self.node.id, length, page_size, self.cluster.new_key(), name,
                          chunk)
        self.node.memory[mr.rkey] = mr
        return mr


def add_cpu_hogs(cluster, per_core: int = 1, nodes=None) -> None:
    """Colocate ``per_core`` CPU-bound processes (e.g. N-queens solvers) with the
    software threads on every core of ``nodes`` (default: every node).

    They take turns with busy-polling threads and are preempted by threads woken by
    interrupts (time slicing in :mod:`rnicsim.hw.host`). Call before running.
    """
    if per_core < 1:
        raise ValueError("per_core: expected a whole number >= 1")
    host = cluster.profile.host
    for node in (cluster.nodes if nodes is None else [cluster.nodes[n] for n in nodes]):
        for core in node.cores:
            _add_hogs(cluster.sim, core, per_core, host)


class CompletionQueue:
    """A completion queue (``ibv_cq``) polled by one thread."""

    __slots__ = ("_cq", "thread")

    def __init__(self, cq: Cq, thread: Thread | None) -> None:
        self._cq = cq
        self.thread = thread

    def poll(self, max_n: int = 16) -> list[WorkCompletion]:
        """``ibv_poll_cq``: completions visible now (CPU booked on the thread, no event)."""
        wcs = self._cq.take(max_n)
        h = self._cq.host
        if self.thread is not None:
            self.thread.reserve(self._cq.sim.now, h.poll_cq + len(wcs) * h.cqe_handle)
        return wcs

    def wait(self, max_n: int = 1 << 30):
        """An event whose value is the non-empty list of completions a poll loop finds.

        Busy polling by default; after :meth:`use_interrupts` the thread sleeps and pays the
        interrupt latency and CPU instead.
        """
        return self._cq.wait(self.thread, max_n)

    def use_interrupts(self, on: bool = True) -> None:
        """Switch between busy polling (default) and interrupt-driven completion.

        The polling thread then sleeps between completions (it matters for time slicing
        with CPU hogs, see :func:`add_cpu_hogs`).
        """
        self._cq.mode = "interrupt" if on else "poll"
        if self.thread is not None:
            self.thread.sleeps = on

    @property
    def pending(self) -> int:
        """Completions pushed by the NIC and not yet taken (visible or not)."""
        return self._cq.pushed - self._cq.taken

    @property
    def mode(self) -> str:
        """``"poll"`` (busy polling, the default) or ``"interrupt"`` (after
        :meth:`use_interrupts`)."""
        return self._cq.mode


class QueuePair:
    """A queue pair (``ibv_qp``). RC/UC must be :meth:`connect`-ed; UD takes ``dest``."""

    __slots__ = ("ctx", "_hw", "thread", "_uar", "sim")

    def __init__(self, ctx: Context, hw: QpHw, thread: Thread, uar: _Uar) -> None:
        self.ctx = ctx
        self._hw = hw
        self.thread = thread
        self._uar = uar
        self.sim = ctx.sim

    @property
    def qp_num(self) -> int:
        """The QP number."""
        return self._hw.qpn

    @property
    def type(self) -> str:
        """RC, UC or UD."""
        return self._hw.type

    @property
    def address(self) -> tuple[int, int]:
        """``(nic_id, qpn)``: what a peer needs to reach this QP (UD address handle)."""
        return (self.ctx.nic_id, self._hw.qpn)

    @property
    def state(self) -> str:
        """``"RTS"`` or ``"ERR"``."""
        return self._hw.state

    def wait_request(self, cq: "CompletionQueue", count: int) -> WorkRequest:
        """A CORE-Direct WAIT: post it before WRs the NIC should send by itself once ``cq``
        has received ``count`` completions in total (e.g. relaying a block on arrival)."""
        wr = WorkRequest(WAIT, 0, None, False)
        wr.wait_cq = cq
        wr.wait_count = count
        return wr

    def connect(self, remote: "QueuePair") -> None:
        """Connect this RC/UC QP to ``remote`` (and ``remote`` back to this one).

        A QP is connected once (RESET -> RTR -> RTS): connecting it again to the same
        peer does nothing, to another one raises ValueError."""
        if not isinstance(remote, QueuePair):
            raise TypeError(f"connect() takes a QueuePair, got {type(remote).__name__}")
        if self.type == UD or remote.type != self.type:
            raise ValueError("connect() joins two RC or two UC queue pairs")
        for a, b in ((self, remote), (remote, self)):
            peer = a._hw.peer
            if peer is not None and peer != b.address:
                raise ValueError(f"connect(): {a.type} QP {a.address} is already connected "
                                 f"to {peer}; create a new QP for another peer")
        self._hw.peer = remote.address
        remote._hw.peer = self.address

    def post_send(self, wrs: Sequence[WorkRequest], event: bool = True):
        """Post ``wrs`` with one doorbell; returns the event of the posting CPU work.

        With ``event=False`` nothing is scheduled for the caller and None is returned: the
        CPU work is still booked on the thread's core, so anything the thread does next
        queues behind it (cheaper for loops that do not need to wait for the post).

        Raises TypeError when ``wrs`` is not a list of :class:`WorkRequest`, and ValueError
        for requests the hardware would reject (UD payload above the MTU, inline above
        ``max_inline``, verbs the transport lacks, an RC/UC QP not yet connected, a UD
        ``dest`` that names no NIC, an atomic that is not 8 bytes at an 8-byte aligned
        ``remote_offset``, a negative or fractional ``length`` [B], a ``local`` region of
        another node or too small for ``local_offset + length``, bytes ``data`` longer
        than ``length``). Remote errors (unknown ``rkey``, remote range outside the
        region) are found by the responder: the WR completes with ``REM_ACCESS_ERR`` and
        the QP goes to ``ERR``.
        """
        _wr_list(wrs, "post_send")
        if not wrs:
            raise ValueError("post_send needs at least one work request")
        nic = self.ctx._nic
        qt = self._hw.type
        if qt != UD and self._hw.peer is None:
            raise ValueError(f"post_send on {qt} QP {self._hw.qpn}: not connected; call "
                             "connect(remote_qp) first")
        for wr in wrs:
            op = wr.opcode
            if op.__class__ is not int or not (SEND <= op <= FAA or op == WAIT):
                raise ValueError(
                    f"post_send: opcode must be SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, "
                    f"READ, CAS, FAA or WAIT (constants of rnicsim.verbs), got "
                    + (f"{OPCODE_NAMES[op]} (RECV work requests go to post_recv)"
                       if op.__class__ is int and 0 <= op < len(OPCODE_NAMES) else repr(op)))
            if op == WAIT:
                if not isinstance(wr.wait_cq, CompletionQueue):
                    raise ValueError("a WAIT work request needs wait_cq (a CompletionQueue)")
                continue
            n = wr.length
            if n.__class__ is not int and not _is_count(n) or n < 0:
                raise _bad_length(wr, f"post_send {OPCODE_NAMES[op]}")
            if qt == UD:
                if op > SEND_WITH_IMM or wr.dest is None:
                    raise ValueError("UD supports SEND/SEND_WITH_IMM with a dest address only")
                d = wr.dest
                if (not isinstance(d, (tuple, list)) or len(d) != 2
                        or not _is_count(d[0]) or not 0 <= d[0] < len(self.ctx.cluster.nics)):
                    raise ValueError(f"post_send: dest must be a (nic_id, qpn) address such "
                                     f"as a UD QP's .address, got {d!r}")
                if n > nic.mtu:
                    raise ValueError(f"UD message of {n} B exceeds the MTU {nic.mtu} B")
            elif qt == UC and op >= READ:
                raise ValueError("UC supports SEND and WRITE only")
            if op >= CAS:
                if n != 8:
                    raise ValueError(f"post_send {OPCODE_NAMES[op]}: atomics operate on "
                                     f"8 bytes; length must be 8, got {n}")
                if wr.remote_offset % 8:
                    raise ValueError(f"post_send {OPCODE_NAMES[op]}: remote_offset must be "
                                     f"8-byte aligned, got {wr.remote_offset}")
            if wr.inline and n > nic.p.max_inline:
                raise ValueError(f"inline payload {n} B exceeds max_inline "
                                 f"{nic.p.max_inline} B")
            if wr.local is not None:
                _check_local(wr, 8 if op >= CAS else n, self.ctx.node.id,
                             f"post_send {OPCODE_NAMES[op]}")
            d = wr.data
            if d is not None and op <= WRITE_WITH_IMM and \
                    isinstance(d, (bytes, bytearray, memoryview)) and len(d) > n:
                raise ValueError(f"post_send {OPCODE_NAMES[op]}: data holds {len(d)} B, more "
                                 f"than length {n} B")
        sim = self.sim
        now = sim.env._now
        h = self.ctx.host
        th = self.thread
        n = len(wrs)
        for wr in wrs:
            wr.t_post = now
            if wr.opcode == WAIT and isinstance(wr.wait_cq, CompletionQueue):
                wr.wait_cq = wr.wait_cq._cq   # the NIC watches the hardware queue
        hw = self._hw
        # The core's QP-state cache only matters when a miss costs something (every
        # shipped profile charges none): no bookkeeping on this path otherwise.
        miss = h.qp_state_miss
        if miss and _cache_qp_state(self.ctx.node, th, hw):
            miss = 0.0
        t = t_built = th.reserve(now, n * h.wqe_build + miss)
        p = nic.p
        if n == 1:
            wr = wrs[0]
            size = wqe_bytes(qt, wr)
            blueflame = size <= p.blueflame_size and (wr.inline or
                                                      not p.blueflame_inline_only)
        else:
            size = sum(wqe_bytes(qt, wr) for wr in wrs)
            blueflame = False
        mmio = h.mmio * (size // 64 if blueflame else 1)
        uar = self._uar
        # libmlx5 takes a shared register's lock for every doorbell; libmlx4
        # (blueflame_inline_only) only for BlueFlame copies: its plain doorbell is a single
        # 32-bit store that needs no lock.
        if uar.users > 1 and (blueflame or not p.blueflame_inline_only):
            # Shared doorbell register: posts from all its QPs go one at a time, and taking
            # the lock from another thread moves its cache line (uar_lock).
            if uar.last is None:
                uar.last = th   # the lock's cache line starts with its first user
            hold = mmio + (h.uar_lock if uar.last is not th else 0.0)
            start = uar.cal.reserve(t, hold)
            uar.last = th
            t = th.reserve(t, start + hold - t)   # spinning on the lock, then the store
        else:
            t = th.reserve(t, mmio)
        if sim.trace.enabled:
            if miss:
                sim.trace.emit(t_built - n * h.wqe_build - miss, "cpu.qp_state_miss", th.name,
                               end=t_built - n * h.wqe_build, qpn=hw.qpn)
            sim.trace.emit(t_built - n * h.wqe_build, "cpu.wqe_build", th.name, end=t_built,
                           wqes=n, bytes=size)
            sim.trace.emit(t_built, "cpu.mmio", th.name, end=t, blueflame=blueflame)
        pcie = nic.pcie
        if blueflame:
            t_nic = pcie.mmio(t, size)
        else:
            t_db = pcie.mmio(t, 8)
            t_nic = pcie.dma_read(t_db, size)
            if sim.trace.enabled:
                sim.trace.emit(t_db, "nic.wqe_fetch", nic.name, end=t_nic, wqes=n,
                               bytes=size)
        if t_nic < hw.db_ready:      # the NIC takes a QP's doorbells in posting order
            t_nic = hw.db_ready
        hw.db_ready = t_nic
        sim.call_at(t_nic, nic.doorbell, hw, list(wrs))
        return sim.env.timeout(t - now) if event else None

    def post_recv(self, wrs: Sequence[WorkRequest], event: bool = True):
        """Post receive buffers; returns the event of the posting CPU work (None with
        ``event=False``).

        A receive doorbell is a record in host memory (no MMIO), so it costs only the WQE
        build. Each WR is a ``WorkRequest(RECV, length)`` (``length`` [B] >= 0, optional
        ``local`` region of this node and ``local_offset`` where the payload lands; the
        opcode is set to RECV whatever it was); TypeError/ValueError otherwise. The NIC does not check that a SEND fits the
        buffer: size buffers for the largest message (UD: plus the 40-B GRH).
        """
        node = self.ctx.node.id
        # A receive queue is often filled with one descriptor repeated (protocols.rpc.Mesh
        # posts [wr] * depth, depth ~ peers x in-flight: threads x nodes^2 elements over a
        # cluster); checking and relabelling that one object once does it for all, with
        # the same checks, errors and result (see _one_repeated).
        if _one_repeated(wrs):
            distinct = wrs[:1]
        else:
            _wr_list(wrs, "post_recv")
            distinct = wrs
        for wr in distinct:
            n = wr.length
            if n.__class__ is not int and not _is_count(n) or n < 0:
                raise _bad_length(wr, "post_recv")
            if wr.local is not None:
                _check_local(wr, n, node, "post_recv")
        now = self.sim.env._now
        t = self.thread.reserve(now, len(wrs) * self.ctx.host.wqe_build)
        for wr in distinct:
            wr.opcode = RECV     # an ibv_recv_wr has no opcode: whatever was given is moot
        self.ctx._nic.post_recv(self._hw, list(wrs))
        return self.sim.env.timeout(t - now) if event else None

    @property
    def priority(self) -> int:
        """The priority (traffic class 0-7) this QP's messages carry; on RoCE, PFC pauses
        and lossless buffers are per priority. Default 3 (RDMA's usual lossless class)."""
        return self._hw.prio

    @priority.setter
    def priority(self, prio: int) -> None:
        if not isinstance(prio, int) or not 0 <= prio <= 7:
            raise ValueError(f"priority: an integer 0..7, got {prio!r}")
        self._hw.prio = prio

    def modify(self, *, timeout_ns: float | None = None) -> None:
        """``ibv_modify_qp`` of the attributes the model has. ``timeout_ns`` [ns]: the RC
        retry timeout, how long a request may go unanswered (a dead peer or path) before
        the QP breaks and its WRs complete with RETRY_EXC_ERR, then WR_FLUSH_ERR (default
        4.096 us x 2^14 per attempt, 8 attempts: ibv timeout 14 and retry_cnt 7, about
        537 ms).
        ValueError for a value that is not a positive finite number."""
        if timeout_ns is not None:
            if isinstance(timeout_ns, bool) or not isinstance(timeout_ns, (int, float)) \
                    or not 0 < timeout_ns < float("inf"):
                raise ValueError(f"modify: timeout_ns must be a positive number of ns, got "
                                 f"{timeout_ns!r}")
            self._hw.timeout_ns = float(timeout_ns)

    def on_error(self, callback) -> None:
        """Call ``callback(qp)`` when this QP breaks (peer failure, remote access error)."""
        self._hw.on_error = lambda _hw: callback(self)
