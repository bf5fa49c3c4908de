"""Host CPU: cores as FIFO servers that software threads charge their work to.

Scope: a core serves CPU work in FIFO order (``busy_until``); a software thread is pinned
to one core and several threads on one core share it. ``compute`` returns a SimPy timeout
that fires when the work is done; ``reserve`` books work without an event (used where
hardware and software hand over at a known time, e.g. a completion being polled).

Time slicing (only on a core with CPU hogs, see :class:`Hogs`): ``k`` colocated CPU-bound
processes share the core with the application threads under a CFS-like scheduler.

- A busy-polling thread is always runnable, so it and the hogs take turns round robin:
  an application slice of about ``sched_quantum``, then ``k`` hog slices. Its CPU work and
  the moment it notices a completion (or a memory write) fall in its own slices only.
- A thread that sleeps (interrupt mode) runs far less than the hogs, so its virtual
  runtime lags theirs and CFS lets it preempt the running hog on wake-up (no wait for the
  rest of the hog's slice): it runs ``wakeup_latency`` after the wake-up, then keeps the
  core for the work it books.

Slice lengths vary around ``sched_quantum`` (uniformly in [0.5, 1.5] x): the scheduler ends
a slice at a tick once the runtimes cross, and interrupts and kernel work on the core
shift the ticks, so the slices of two cores drift against each other. The phase and the
lengths come from the simulation's random stream ``sched/<core>``.
Not modelled: SMT, caches (a hog's cache footprint), a sleeper that uses more than its
fair share (it would lose wake-up preemption), migration between cores.

Idle states: a core with nothing to run enters a C-state, and the thread woken on it runs
only after the state's exit latency. Linux's menu governor picks the deepest state whose
target residency fits the idle time it predicts (drivers/cpuidle/governors/menu.c: the
next timer, corrected by recent wake-ups). For a sleep the prediction is exact (the
sleep's own timer is the next event), so the model takes the deepest state whose
residency fits the sleep (:func:`idle_exit_ns`); a core shared with CPU hogs never idles.
The exit is not busy CPU. A thread woken by a completion interrupt pays no exit: the
governor's prediction from recent interrupts is not modelled, and RDMC's fig. 11 (pure
interrupts leave its bandwidth almost unchanged on Fractus, Ubuntu 16.04 with Linux's
default idle driver) shows no cost of the size an exit at every wake-up would give
(docs/model.md, "Sleeping threads").

Params (profile ``host``): clock [Hz], cores, the per-operation CPU costs [ns],
``sched_quantum`` [ns], ``wakeup_latency`` [ns], ``timer_slack`` [ns], ``idle_states``
({name: (exit latency, target residency)} [ns]).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sim import Simulation


def idle_exit_ns(states: dict, idle_ns: float) -> float:
    """Exit latency [ns] of the deepest of ``states`` (``{name: (exit_ns,
    residency_ns)}`` ordered by residency, the profile's ``host.idle_states``) whose target
    residency is at most ``idle_ns`` [ns], the time the core stays idle; 0 when none
    fits (or the core has no idle states)."""
    exit_ns = 0.0
    for ex, res in states.values():
        if res > idle_ns:
            break
        exit_ns = ex
    return exit_ns


class Hogs:
    """``k`` CPU-bound processes on one core: when the application may run [ns].

    The application's slices are ``[starts[i], ends[i])``; the hogs run in between
    (``k`` slices of about ``quantum`` each). Slices are drawn lazily as time advances.
    """

    __slots__ = ("k", "quantum", "wakeup", "rng", "starts", "ends")

    def __init__(self, k: int, quantum: float, wakeup: float, rng) -> None:
        if k < 1 or quantum <= 0:
            raise ValueError("hogs need k >= 1 and a positive quantum")
        self.k = k
        self.quantum = quantum
        self.wakeup = wakeup
        self.rng = rng
        # Random phase: the schedule started somewhere inside one whole round.
        t = -float(rng.uniform(0.0, (k + 1) * quantum))
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._extend_from(t)

    def _slice(self) -> float:
        return self.quantum * (0.5 + float(self.rng.random()))

    def _extend_from(self, t: float) -> None:
        a = t
        e = a + self._slice()
        self.starts.append(a)
        self.ends.append(e)

    def _index(self, t: float) -> int:
        """Index of the first application slice that ends after ``t``."""
        ends = self.ends
        while ends[-1] <= t:
            gap = sum(self._slice() for _ in range(self.k))
            self._extend_from(ends[-1] + gap)
        return bisect_right(ends, t)

    def next_run(self, t: float) -> float:
        """The first time at or after ``t`` in an application slice [ns]."""
        i = self._index(t)
        s = self.starts[i]
        return t if t > s else s

    def run(self, t: float, ns: float) -> float:
        """When ``ns`` of application CPU started at ``t`` ends, slices skipped [ns]."""
        i = self._index(t)
        s = self.starts[i]
        cur = t if t > s else s
        while True:
            e = self.ends[i]
            if cur + ns <= e:
                return cur + ns
            ns -= e - cur
            i = self._index(e)
            cur = self.starts[i]


class Core:
    """One CPU core: a FIFO server of CPU time (time-sliced with ``hogs`` when set)."""

    __slots__ = ("name", "busy_until", "busy_ns", "hogs")

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy_until = 0.0
        self.busy_ns = 0.0
        self.hogs: Hogs | None = None


def add_hogs(sim: "Simulation", core: Core, k: int, host) -> None:
    """Colocate ``k`` CPU-bound processes with the threads of ``core`` (see module doc)."""
    core.hogs = Hogs(k, host.sched_quantum, host.wakeup_latency,
                     sim.rng(f"sched/{core.name}"))


class CpuThread:
    """A software thread pinned to a core; all its CPU work goes through here.

    ``sleeps`` is True for a thread that blocks for its completions (interrupt mode) and
    False for a busy-polling thread; it matters only on a core with hogs.
    """

    __slots__ = ("sim", "name", "core", "host", "node", "sleeps")

    def __init__(self, sim: "Simulation", name: str, core: Core, host, node: int) -> None:
        self.sim = sim
        self.name = name
        self.core = core
        self.host = host          # profile host view: CPU costs [ns]
        self.node = node
        self.sleeps = False

    def reserve(self, t: float, ns: float) -> float:
        """Book ``ns`` of CPU starting no earlier than ``t``; return when it ends [ns]."""
        c = self.core
        start = t if t > c.busy_until else c.busy_until
        hogs = c.hogs
        if hogs is None or self.sleeps:
            end = start + ns
        else:
            end = hogs.run(start, ns)      # a poller runs only in its own slices
        c.busy_until = end
        c.busy_ns += ns
        return end

    def wake_at(self, t: float, interrupt: bool) -> float:
        """When this thread acts on something it would notice at ``t`` without hogs [ns].

        With hogs: a sleeping thread woken by an interrupt preempts the hog after
        ``wakeup_latency``; a busy poller notices it in its next slice.
        """
        hogs = self.core.hogs
        if hogs is None:
            return t
        if interrupt:
            return t + hogs.wakeup
        return hogs.next_run(t)

    def compute(self, ns: float):
        """A timeout firing when ``ns`` of CPU work, queued behind earlier work, is done."""
        env = self.sim.env
        end = self.reserve(env._now, ns)
        return env.timeout(end - env._now)

    def sleep(self, ns: float):
        """A timeout firing when a ``usleep``/``nanosleep`` of ``ns`` [ns] returns.

        The thread blocks in the kernel: nothing else it runs (its other coroutines, its
        event loop and the RPC handlers on it) runs meanwhile, and the sleep starts after
        the CPU work booked before it. Its timer fires ``timer_slack`` late (the end of
        the range Linux allows; the core is idle meanwhile, so no earlier timer interrupt
        runs it sooner), the idle core leaves its C-state (:func:`idle_exit_ns` of the
        sleep's length; none on a core with hogs), and waking costs ``interrupt_cpu`` of
        CPU (timer interrupt, wake-up, context switch). Only that wake-up counts as busy
        CPU. Not modelled: another thread on the same core running during the sleep (the
        core is held).
        """
        env = self.sim.env
        c = self.core
        now = env._now
        start = now if now > c.busy_until else c.busy_until
        h = self.host
        idle = ns + h.timer_slack
        if c.hogs is None:
            idle += idle_exit_ns(h.idle_states, idle)
        end = self.reserve(self.wake_at(start + idle, True), h.interrupt_cpu)
        return env.timeout(end - now)

    @property
    def busy_ns(self) -> float:
        """CPU time [ns] booked so far on this thread's core (shared by its threads)."""
        return self.core.busy_ns

    @property
    def idle_at(self) -> float:
        """When the core finishes the work booked so far [ns]."""
        return self.core.busy_until
