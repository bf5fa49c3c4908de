"""Shared fixtures and Hypothesis profiles of the test suite (see tests/README.md).

Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``dev``, or ``ci`` when the
environment has ``CI=true``):

- ``dev``: few examples, random, for the edit-test loop;
- ``ci``: the same budget, ``derandomize=True`` so a CI run is reproducible;
- ``nightly``: many more examples and longer stateful runs.

Tests that need fewer examples than the profile's budget scale it with
``settings().max_examples`` rather than hard-coding a number, so ``nightly`` scales them too.

Fixtures: ``sim`` (a fresh ``Simulation(1)``), ``log`` (trace events of ``sim`` as
``(t, name, scope, data)``), ``cx4``/``cx3`` (loaded profiles), ``make_rc_pair`` (a builder of
two-node clusters with one connected RC QP pair), ``rc_pair`` (one such pair on cx4-edr)
and ``write_incast`` (senders each WRITE one message at once into node 0).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from rnicsim.cluster import Cluster
from rnicsim.profile import Profile, load_profile
from rnicsim.sim import Simulation
from rnicsim.verbs import CompletionQueue, Context, MemoryRegion, QueuePair, Thread

# ----------------------------------------------------------------------------- hypothesis
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, **_COMMON)
settings.register_profile("ci", max_examples=30, derandomize=True, print_blob=True,
                          **_COMMON)
settings.register_profile("nightly", max_examples=400, stateful_step_count=100, **_COMMON)

_default_profile = "ci" if os.environ.get("CI", "").lower() == "true" else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default_profile))


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture
def sim() -> Simulation:
    """A fresh simulation with seed 1."""
    return Simulation(1)


@pytest.fixture
def log(sim: Simulation) -> list[tuple[float, str, str, dict]]:
    """Every trace event ``sim`` emits, as ``(t, name, scope, data)``, in emission order."""
    events: list[tuple[float, str, str, dict]] = []
    sim.trace.subscribe(lambda t, name, scope, data: events.append((t, name, scope, data)))
    return events


@pytest.fixture(scope="session")
def cx4() -> Profile:
    """The shipped ConnectX-4 EDR profile."""
    return load_profile("cx4-edr")


@pytest.fixture(scope="session")
def cx3() -> Profile:
    """The shipped ConnectX-3 QDR profile (fitted to the perftest reference files)."""
    return load_profile("cx3-qdr")


@dataclass
class RcPair:
    """Two nodes, one thread/context/CQ/MR each, and one connected RC QP pair.

    Index 0 is the requester side, index 1 the responder side.
    """

    sim: Simulation
    cluster: Cluster
    threads: list[Thread]
    ctx: list[Context]
    cq: list[CompletionQueue]
    mr: list[MemoryRegion]
    qp: list[QueuePair]

    def collect(self, side: int, into: list[Any]) -> None:
        """Start a process that appends every completion of ``cq[side]`` to ``into``."""
        cq = self.cq[side]

        def loop():
            while True:
                into.extend((yield cq.wait()))

        self.sim.process(loop())


def build_rc_pair(profile: Profile, sim: Simulation | None = None, region: int = 1 << 20,
                  page_size: int = 4096) -> RcPair:
    """A two-node cluster of ``profile`` with one connected RC QP pair, CQs and MRs."""
    sim = sim or Simulation(1)
    cluster = Cluster(sim, profile, 2, 1)
    threads = [cluster.nodes[i].thread(0) for i in range(2)]
    ctx = [Context(cluster, i, 0, threads[i]) for i in range(2)]
    cq = [c.create_cq() for c in ctx]
    mr = [c.reg_mr(region, page_size) for c in ctx]
    qp = [ctx[i].create_qp("RC", cq[i]) for i in range(2)]
    qp[0].connect(qp[1])
    return RcPair(sim, cluster, threads, ctx, cq, mr, qp)


@pytest.fixture(scope="session")
def make_rc_pair():
    """``make_rc_pair(profile, sim=None, region=1 MiB, page_size=4 KiB) -> RcPair``.

    Session-scoped so Hypothesis tests can build a fresh pair per example.
    """
    return build_rc_pair


@pytest.fixture
def rc_pair(sim: Simulation, cx4: Profile) -> RcPair:
    """A fresh cx4-edr RC pair on the ``sim`` fixture."""
    return build_rc_pair(cx4, sim)


def run_write_incast(profile: Profile, senders: int = 8, size: int = 1 << 20, seed: int = 3,
                     on_qp=None) -> tuple[Cluster, dict[int, float]]:
    """Nodes 1..``senders`` each post one signaled WRITE of ``size`` [B] at time 0 into
    node 0 (one RC QP each); run to the end. ``on_qp(n, qp)`` sees each sender's QP before
    it posts. Returns the cluster and each sender's completion time [ns]."""
    from rnicsim.verbs import WRITE, WorkRequest

    sim = Simulation(seed)
    cl = Cluster(sim, profile, senders + 1, 1)
    ctx = {n: Context(cl, n, 0, cl.nodes[n].thread(0)) for n in range(senders + 1)}
    mr = ctx[0].reg_mr(max(size, 4096))
    done: dict[int, float] = {}

    def sender(n):
        cq = ctx[n].create_cq()
        qp = ctx[n].create_qp("RC", cq)
        qp.connect(ctx[0].create_qp("RC", ctx[0].create_cq()))
        if on_qp is not None:
            on_qp(n, qp)
        qp.post_send([WorkRequest(WRITE, size, 0, True, False, None, 0, mr.rkey, 0)],
                     event=False)
        yield cq.wait()
        done[n] = sim.now

    for n in range(1, senders + 1):
        sim.process(sender(n))
    sim.run()
    return cl, done


@pytest.fixture(scope="session")
def write_incast():
    """``write_incast(profile, senders=8, size=1 MiB, seed=3, on_qp=None) -> (cluster,
    {sender: completion [ns]})``: see :func:`run_write_incast`."""
    return run_write_incast
