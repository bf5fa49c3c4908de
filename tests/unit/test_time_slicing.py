"""Time slicing with CPU hogs (hw/host.py, hw/cq.py) against hand-computed timelines."""
import pytest

from rnicsim.cluster import Cluster
from rnicsim.hw.cq import Cq
from rnicsim.hw.host import Core, CpuThread, Hogs
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation

Q = 1000.0


class _FixedRng:
    """Phase 0 and every slice exactly one quantum long."""

    def uniform(self, a, b):
        return 0.0

    def random(self):
        return 0.5


def _thread(sim, k=1, wakeup=700.0):
    prof = load_profile("cx3-roce-10g")
    core = Core("n0/core0")
    core.hogs = Hogs(k, Q, wakeup, _FixedRng())
    return CpuThread(sim, "n0/t0", core, prof.host, 0), prof.host


def test_hog_schedule_alternates_application_and_hog_slices():
    """With one hog the application runs in [0,1000), [2000,3000), ...; work skips hog slices."""
    h = Hogs(1, Q, 0.0, _FixedRng())
    assert h.next_run(500.0) == 500.0
    assert h.next_run(1000.0) == 2000.0
    assert h.next_run(1500.0) == 2000.0
    assert h.run(900.0, 300.0) == pytest.approx(2200.0, rel=1e-12)     # 100 now, 200 later
    assert h.run(1200.0, 2500.0) == pytest.approx(6500.0, rel=1e-12)   # 1000+1000+500
    h2 = Hogs(2, Q, 0.0, _FixedRng())                                   # two hogs: 2 slices
    assert h2.next_run(1500.0) == 3000.0


def test_polling_thread_sees_a_completion_only_in_its_slice():
    """A completion visible in the hog's slice is polled at the start of the next own slice."""
    sim = Simulation(1)
    th, host = _thread(sim)
    cq = Cq(sim, "cq", host)
    got = []

    def waiter():
        wcs = yield cq.wait(th)
        got.append((sim.now, wcs))

    sim.process(waiter())
    sim.call_at(1200.0, cq.push, "wc", 1200.0)
    sim.run()
    assert got == [(2000.0, ["wc"])]
    assert th.core.busy_until == pytest.approx(2000.0 + host.poll_cq + host.cqe_handle,
                                               rel=1e-12)


def test_polling_thread_in_its_slice_is_not_delayed():
    """Inside its own slice a poller notices a completion poll_detect after it is visible."""
    sim = Simulation(1)
    th, host = _thread(sim)
    cq = Cq(sim, "cq", host)
    got = []

    def waiter():
        got.append((yield cq.wait(th)) and sim.now)

    sim.process(waiter())
    sim.call_at(300.0, cq.push, "wc", 300.0)
    sim.run()
    assert got == [pytest.approx(300.0 + host.poll_detect, rel=1e-12)]


def test_interrupt_wakes_the_sleeping_thread_after_the_wakeup_latency():
    """A sleeper woken in the hog's slice preempts the hog: interrupt latency + wake-up latency."""
    sim = Simulation(1)
    th, host = _thread(sim, wakeup=700.0)
    th.sleeps = True
    cq = Cq(sim, "cq", host)
    cq.mode = "interrupt"
    got = []

    def waiter():
        yield cq.wait(th)
        got.append(sim.now)

    sim.process(waiter())
    sim.call_at(1200.0, cq.push, "wc", 1200.0)
    sim.run()
    woke = 1200.0 + host.interrupt_latency + 700.0
    assert got == [pytest.approx(woke, rel=1e-12)]
    # The woken thread keeps the core for its work: no hog slice is skipped.
    assert th.core.busy_until == pytest.approx(
        woke + host.poll_cq + host.cqe_handle + host.interrupt_cpu + host.mmio, rel=1e-12)


def test_cpu_work_of_a_poller_is_split_around_hog_slices():
    """compute() of a poller that crosses its slice end resumes after the hog's slice."""
    sim = Simulation(1)
    th, _host = _thread(sim)
    done = []

    def proc():
        yield sim.timeout(800.0)
        yield th.compute(500.0)
        done.append(sim.now)

    sim.process(proc())
    sim.run()
    assert done == [pytest.approx(2300.0, rel=1e-12)]
    assert th.core.busy_ns == 500.0


def test_no_hogs_leaves_a_core_a_plain_fifo_server():
    """Without hogs reserve and wake_at are exactly the FIFO server of before."""
    sim = Simulation(1)
    prof = load_profile("cx3-roce-10g")
    cl = Cluster(sim, prof, 1, 1)
    th = cl.nodes[0].thread(0)
    assert th.core.hogs is None
    assert th.reserve(100.0, 50.0) == 150.0
    assert th.reserve(120.0, 50.0) == 200.0
    assert th.wake_at(1234.5, True) == 1234.5
    assert th.wake_at(1234.5, False) == 1234.5


def test_hog_schedule_is_seeded():
    """The same seed gives the same slices; another seed other ones."""
    def slices(seed):
        sim = Simulation(seed)
        h = Hogs(1, 12e6, 5e3, sim.rng("sched/n0/core0"))
        h.next_run(1e9)
        return h.starts[:20], h.ends[:20]

    assert slices(1) == slices(1)
    assert slices(1) != slices(2)
