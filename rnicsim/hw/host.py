"""Host CPU: cores as FIFO servers that software threads charge their work to.

Scope: a core serves CPU work in FIFO order (``busy_until``); a software thread is pinned
to one core and several threads on one core share it. ``compute`` returns a SimPy timeout
that fires when the work is done; ``reserve`` books work without an event (used where
hardware and software hand over at a known time, e.g. a completion being polled).
Not modelled here: time slicing between threads of one core (see the RoCE issue), SMT,
caches.

Params (profile ``host``): clock [Hz], cores, and the per-operation CPU costs [ns].
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sim import Simulation


class Core:
    """One CPU core: a FIFO server of CPU time."""

    __slots__ = ("name", "busy_until", "busy_ns")

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy_until = 0.0
        self.busy_ns = 0.0


class CpuThread:
    """A software thread pinned to a core; all its CPU work goes through here."""

    __slots__ = ("sim", "name", "core", "host", "node")

    def __init__(self, sim: "Simulation", name: str, core: Core, host, node: int) -> None:
        self.sim = sim
        self.name = name
        self.core = core
        self.host = host          # profile host view: CPU costs [ns]
        self.node = node

    def reserve(self, t: float, ns: float) -> float:
        """Book ``ns`` of CPU starting no earlier than ``t``; return when it ends [ns]."""
        c = self.core
        start = t if t > c.busy_until else c.busy_until
        end = start + ns
        c.busy_until = end
        c.busy_ns += ns
        return end

    def compute(self, ns: float):
        """A timeout firing when ``ns`` of CPU work, queued behind earlier work, is done."""
        env = self.sim.env
        end = self.reserve(env._now, ns)
        return env.timeout(end - env._now)

    @property
    def busy_ns(self) -> float:
        """CPU time [ns] booked so far on this thread's core (shared by its threads)."""
        return self.core.busy_ns

    @property
    def idle_at(self) -> float:
        """When the core finishes the work booked so far [ns]."""
        return self.core.busy_until
