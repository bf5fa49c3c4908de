"""Worker-thread runtime: coroutines on simulated threads, as DrTM+H's and FaSST's schedulers.

A :class:`Worker` owns one software thread, one verbs context on one NIC and one
completion queue. It runs an event loop that polls the queue and hands completions to the
coroutines waiting for them; receives go to the handler registered for their QP. A
coroutine is a generator that yields the events of the worker's calls::

    def txn(w: Worker):
        yield w.compute(300)                       # CPU work on the worker's thread [ns]
        wcs = yield w.post(qp, [WorkRequest(READ, 64, rkey=k, remote_offset=o)])
        ...

    w.spawn(txn)

Costs: ``compute`` and every post book the thread's core; resuming a coroutine costs the
host's ``coroutine_switch``; polling costs what :mod:`rnicsim.verbs` charges.

Scheduling: coroutines are not preempted, and one coroutine runs at a time. A coroutine
holds the thread from the moment it resumes until it yields to wait for something other
than its own ``compute`` (a completion, a reply, a timeout): back-to-back ``compute``
calls are one CPU burst. Coroutines made ready (their completions arrived, a timeout
fired) wait in a FIFO run queue and resume one after another, each after the previous one
has yielded: two ready coroutines never interleave their CPU. The event loop (which
handles completions and runs RPC handlers) runs in rounds: it polls, the coroutines ready
then run in turn, and it polls again only when none holds the thread and none waits for
it, so a completion or request arriving meanwhile is handled after the last of them has
yielded. This is DrTM+H's and RCC's scheduler (``new_master_routine`` and
``indirect_must_yield`` in their ``src/core``): the master routine polls, then switches
to the first ready coroutine, and each yields to the next ready one in a ring in which the
master comes after the last.
Only verbs, the clock and this runtime are used (never ``rnicsim.hw``).
"""
from __future__ import annotations

import inspect
from collections import deque
from types import GeneratorType
from numbers import Integral, Real
from typing import Callable, Generator, Sequence

from rnicsim.verbs import RECV, RECV_RDMA_WITH_IMM, Context, QueuePair, WorkCompletion, WorkRequest


class _Tag:
    """The ``wr_id`` :meth:`Worker.post` gives a signaled WR: the post it belongs to and
    the caller's own ``wr_id``, which the completion gets back."""

    __slots__ = ("rid", "user")

    def __init__(self, rid: int, user: object) -> None:
        self.rid = rid
        self.user = user


class Worker:
    """One worker thread of a node (see module doc).

    Params: ``node`` [index into ``cluster.nodes``], ``index`` [thread number on that
    node; it runs on core ``index mod cores``], ``nic`` [NIC index on the node; default
    ``index mod nics_per_node``], ``context`` (a shared verbs context; default a new one),
    ``loop_delay`` [ns]: what the event loop adds, on an idle thread, between a completion
    becoming visible and its poll (:meth:`rnicsim.verbs.Context.create_cq`; 0 for a loop
    that polls nothing else, as DrTM+H's and FaSST's).
    ``worker.thread`` is the CPU thread; ``worker.ctx`` its verbs context; ``worker.cq``
    the completion queue every QP created through :meth:`create_qp` reports to.
    """

    def __init__(self, cluster, node: int, index: int, nic: int | None = None,
                 context: Context | None = None, loop_delay: float = 0.0) -> None:
        if isinstance(node, bool) or not isinstance(node, Integral) or \
                not 0 <= node < len(cluster.nodes):
            raise ValueError(f"Worker: node must be a node index 0..{len(cluster.nodes) - 1}, "
                             f"got {node!r}")
        if isinstance(index, bool) or not isinstance(index, Integral) or index < 0:
            raise ValueError(f"Worker: index must be a thread number >= 0, got {index!r}")
        self.cluster = cluster
        self.sim = cluster.sim
        self.node = node
        self.index = index
        self.thread = cluster.nodes[node].thread(index)
        n_nics = len(cluster.nodes[node].nics)
        nic = index % n_nics if nic is None else nic
        self.ctx = context or Context(cluster, node, nic, self.thread)
        self.cq = self.ctx.create_cq(self.thread, loop_delay)
        self.switch_ns = cluster.profile.host.coroutine_switch
        self._next_id = 0
        self._waiting: dict[int, list] = {}        # wr id -> [event, remaining, wcs]
        self._recv_handlers: dict[int, Callable[[WorkCompletion], None]] = {}
        self._errors: list[WorkCompletion] = []
        self.completions = 0
        self._owner = None           # the coroutine (driver) holding the thread, if any
        self._runq: deque = deque()  # [driver, event] of coroutines waiting for the thread
        self._last_cpu = None        # the event of the latest compute() (a burst goes on)
        self._burst_ev = None        # the event loop waiting for the thread to be free
        self._loop = self.sim.process(self._poll_loop())

    # ------------------------------------------------------------------ resources
    def create_qp(self, qtype: str) -> QueuePair:
        """A QP on this worker's context and completion queue, posted from its thread."""
        return self.ctx.create_qp(qtype, self.cq, thread=self.thread)

    def spawn(self, fn: Callable[..., Generator], *args):
        """Start coroutine ``fn(self, *args)``; returns its SimPy process.

        ``fn`` is a generator function (its body yields the events of this worker's
        calls); TypeError otherwise."""
        gen = fn(self, *args)
        if not inspect.isgenerator(gen):
            raise TypeError(f"spawn: {getattr(fn, '__name__', fn)!r} must be a generator "
                            f"function (a def whose body yields events), but calling it "
                            f"returned {type(gen).__name__}")
        return self.sim.process(self._drive(gen))

    def _drive(self, gen: Generator):
        """Run coroutine ``gen`` under the scheduler (module doc): it holds the thread
        while it runs and through its ``compute`` bursts, and gives it up at any other
        yield; when that event fires it waits in the run queue for the thread."""
        me = object()
        yield from self._acquire(me)
        val = None
        exc = None
        while True:
            try:
                ev = gen.throw(exc) if exc is not None else gen.send(val)
            except StopIteration as stop:
                self._release(me)
                return stop.value
            except BaseException:
                self._release(me)
                raise
            exc = None
            if type(ev) is GeneratorType:
                # ``yield tx.read(...)`` instead of ``yield from``: say so at that line
                # rather than let SimPy reject the value deep inside its kernel.
                exc = TypeError(f"a coroutine yielded a generator ({ev.__qualname__}); "
                                "use 'yield from' to run a generator, 'yield' only for "
                                "events")
                ev.close()
                continue
            if ev is self._last_cpu:
                val = yield ev           # the burst goes on: keep the thread
                continue
            self._release(me)
            try:
                val = yield ev
            except Exception as e:       # a failed event: raise it inside the coroutine
                val, exc = None, e
            yield from self._acquire(me)

    def _acquire(self, me):
        if self._owner is None:
            self._owner = me
            return
        ev = self.sim.env.event()
        self._runq.append((me, ev))
        yield ev                         # granted: _owner is already ``me``

    def _release(self, me) -> None:
        if self._owner is not me:
            return
        if self._runq:
            # The round goes on: the next ready coroutine takes the thread at once, and
            # the loop polls after the last of them.
            self._owner, ev = self._runq.popleft()
            ev.succeed()
            return
        self._owner = None
        loop = self._burst_ev
        if loop is not None:
            self._burst_ev = None
            loop.succeed()

    # ------------------------------------------------------------------ calls
    def compute(self, ns: float):
        """CPU work of ``ns`` nanoseconds on this worker's thread.

        Back-to-back calls of a coroutine are one burst, during which it keeps the thread
        (see the module doc). ValueError for a negative or non-numeric ``ns``."""
        if not isinstance(ns, Real) or isinstance(ns, bool) or not ns >= 0:
            raise ValueError(f"compute: ns must be a CPU time >= 0 [ns], got {ns!r}")
        ev = self.thread.compute(ns)
        self._last_cpu = ev
        return ev

    def sleep(self, ns: float):
        """``usleep(ns)`` on this worker's thread: the thread blocks ``ns`` plus the host's
        ``timer_slack`` plus the idle core's C-state exit and then pays the wake-up (CPU
        thread ``sleep``); none of its
        coroutines, completions or RPC handlers runs meanwhile. Part of the coroutine's
        burst, as ``compute``. ValueError for a negative or non-numeric ``ns``."""
        if not isinstance(ns, Real) or isinstance(ns, bool) or not ns >= 0:
            raise ValueError(f"sleep: ns must be a time >= 0 [ns], got {ns!r}")
        ev = self.thread.sleep(ns)
        self._last_cpu = ev
        return ev

    def _after_burst(self):
        """An event fired when the round ends: no coroutine holds the thread and none waits
        in the run queue (None if so already)."""
        if self._owner is None and not self._runq:
            return None
        if self._burst_ev is None:
            self._burst_ev = self.sim.env.event()
        return self._burst_ev

    def post(self, qp: QueuePair, wrs: Sequence[WorkRequest], wait: bool = True):
        """Post ``wrs`` with one doorbell.

        With ``wait`` (default), returns an event whose value is the list of completions
        of the signaled WRs (in posting order, each with the ``wr_id`` its WR had), fired
        when all of them completed, successfully or not (plus a coroutine switch).
        Without, or when no WR is signaled, returns the posting CPU event (fire and
        forget). Errors as :meth:`rnicsim.verbs.QueuePair.post_send`.
        """
        if not isinstance(wrs, (list, tuple)):
            qp.post_send(wrs)    # raises its TypeError naming what a post takes
        signaled = [wr for wr in wrs if wr.signaled]
        if not wait or not signaled:
            return qp.post_send(wrs)
        ev = self.sim.event()
        self._next_id += 1
        rid = self._next_id
        saved = [wr.wr_id for wr in signaled]
        for wr in signaled:
            # The completion finds its post by the tag and gets the caller's id back; a
            # re-posted WR still carries its old tag, whose user id is the real one.
            user = wr.wr_id.user if wr.wr_id.__class__ is _Tag else wr.wr_id
            wr.wr_id = _Tag(rid, user)
        try:
            qp.post_send(wrs)
        except Exception:
            for wr, old in zip(signaled, saved):
                wr.wr_id = old
            raise
        self._waiting[rid] = [ev, len(signaled), []]
        return ev

    def post_recv(self, qp: QueuePair, n: int, length: int = 4096) -> None:
        """Make ``n`` (>= 0) receive buffers of ``length`` [B] available on ``qp`` (no
        memory behind them: a received message's bytes or object arrive in ``wc.data``)."""
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
            raise ValueError(f"post_recv: n must be a number of buffers >= 0, got {n!r}")
        qp.post_recv([WorkRequest(RECV, length) for _ in range(n)])

    def on_recv(self, qp: QueuePair, handler: Callable[[WorkCompletion], None]) -> None:
        """Call ``handler(wc)`` in the event loop for each message received on ``qp``."""
        self._recv_handlers[qp.qp_num] = handler

    # ------------------------------------------------------------------ loop
    def _poll_loop(self):
        sim = self.sim
        while True:
            wcs = yield self.cq.wait()
            burst = self._after_burst()
            if burst is not None:
                yield burst
            self.completions += len(wcs)
            for wc in wcs:
                if wc.opcode == RECV or wc.opcode == RECV_RDMA_WITH_IMM:
                    h = self._recv_handlers.get(wc.qp_num)
                    if h is not None:
                        h(wc)
                    continue
                tag = wc.wr_id
                if tag.__class__ is not _Tag:
                    continue     # posted with qp.post_send directly: not ours to deliver
                w = self._waiting.get(tag.rid)
                if w is None:
                    continue
                wc.wr_id = tag.user
                w[2].append(wc)
                w[1] -= 1
                if w[1] == 0:
                    del self._waiting[tag.rid]
                    end = self.thread.reserve(sim.now, self.switch_ns)
                    sim.succeed_in(w[0], end - sim.now, w[2])
