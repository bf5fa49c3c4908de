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

Scheduling: coroutines are not preempted. The event loop (which resumes coroutines whose
completions arrived and runs RPC handlers) only runs when the running coroutine yields to
wait for something; back-to-back ``compute`` calls of a coroutine are one CPU burst, and a
completion or request arriving during it is handled when the burst ends.
Only verbs, the clock and this runtime are used (never ``rnicsim.hw``).
"""
from __future__ import annotations

from typing import Callable, Generator, Sequence

from rnicsim.verbs import RECV, RECV_RDMA_WITH_IMM, Context, QueuePair, WorkCompletion, WorkRequest


class Worker:
    """One worker thread of a node (see module doc).

    ``worker.thread`` is the CPU thread; ``worker.ctx`` its verbs context; ``worker.cq``
    the completion queue every QP created through :meth:`create_qp` reports to.
    """

    def __init__(self, cluster, node: int, index: int, nic: int | None = None,
                 context: Context | None = None) -> None:
        self.cluster = cluster
        self.sim = cluster.sim
        self.node = node
        self.index = index
        self.thread = cluster.nodes[node].thread(index)
        n_nics = len(cluster.nodes[node].nics)
        nic = index % n_nics if nic is None else nic
        self.ctx = context or Context(cluster, node, nic, self.thread)
        self.cq = self.ctx.create_cq(self.thread)
        self.switch_ns = cluster.profile.host.coroutine_switch
        self._next_id = 0
        self._waiting: dict[int, list] = {}        # wr id -> [event, remaining, wcs]
        self._recv_handlers: dict[int, Callable[[WorkCompletion], None]] = {}
        self._errors: list[WorkCompletion] = []
        self.completions = 0
        self._burst_gen = 0          # counts compute() calls (the latest burst's id)
        self._burst_on = False       # a coroutine is in a CPU burst
        self._burst_ev = None        # the event loop waiting for the burst to end
        self._loop = self.sim.process(self._poll_loop())

    # ------------------------------------------------------------------ resources
    def create_qp(self, qtype: str) -> QueuePair:
        """A QP on this worker's context and completion queue, posted from its thread."""
        return self.ctx.create_qp(qtype, self.cq, thread=self.thread)

    def spawn(self, fn: Callable[..., Generator], *args):
        """Start coroutine ``fn(self, *args)``; returns its SimPy process."""
        return self.sim.process(fn(self, *args))

    # ------------------------------------------------------------------ calls
    def compute(self, ns: float):
        """CPU work of ``ns`` nanoseconds on this worker's thread.

        A burst: the event loop waits until the calling coroutine has finished it and
        yielded for something other than more CPU (see the module doc)."""
        ev = self.thread.compute(ns)
        self._burst_gen += 1
        self._burst_on = True
        # Runs after the coroutine has resumed at the end of its work (same time, later
        # in the heap): if it started no further compute, the burst is over.
        self.sim.call_at(self.sim.env._now + ev._delay, self._burst_check, self._burst_gen)
        return ev

    def _burst_check(self, gen: int) -> None:
        if gen != self._burst_gen:
            return                   # the burst went on with another compute()
        self._burst_on = False
        ev = self._burst_ev
        if ev is not None:
            self._burst_ev = None
            ev.succeed()

    def _after_burst(self):
        """An event fired when the running coroutine's CPU burst ends (None if none)."""
        if not self._burst_on:
            return None
        if self._burst_ev is None:
            self._burst_ev = self.sim.env.event()
        return self._burst_ev

    def post(self, qp: QueuePair, wrs: Sequence[WorkRequest], wait: bool = True):
        """Post ``wrs`` with one doorbell.

        With ``wait`` (default), returns an event whose value is the list of completions
        of the signaled WRs, fired when all of them completed (plus a coroutine switch).
        Without, returns the posting CPU event (fire and forget; unsignaled WRs).
        """
        signaled = [wr for wr in wrs if wr.signaled]
        if not wait or not signaled:
            return qp.post_send(wrs)
        ev = self.sim.event()
        self._next_id += 1
        rid = self._next_id
        for wr in signaled:
            wr.wr_id = rid
        self._waiting[rid] = [ev, len(signaled), []]
        qp.post_send(wrs)
        return ev

    def post_recv(self, qp: QueuePair, n: int, length: int = 4096) -> None:
        """Make ``n`` receive buffers of ``length`` bytes available on ``qp``."""
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
                w = self._waiting.get(wc.wr_id)
                if w is None:
                    continue
                w[2].append(wc)
                w[1] -= 1
                if w[1] == 0:
                    del self._waiting[wc.wr_id]
                    end = self.thread.reserve(sim.env._now, self.switch_ns)
                    ev = w[0]
                    ev._ok = True
                    ev._value = w[2]
                    sim.env.schedule(ev, delay=end - sim.env._now)
