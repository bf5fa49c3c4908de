"""hw/cq.py: when a waiting thread sees a completion and what CPU it books, by hand."""
import pytest

from rnicsim.hw.cq import Cq
from rnicsim.hw.host import Core, CpuThread
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation


def _setup(mode, profile="cx3-roce-10g", at=1000.0):
    sim = Simulation(1)
    host = load_profile(profile).host
    th = CpuThread(sim, "n0/t0", Core("n0/core0"), host, 0)
    th.sleeps = mode == "interrupt"
    cq = Cq(sim, "cq", host)
    cq.mode = mode
    got = []

    def waiter():
        wcs = yield cq.wait(th)
        got.append((sim.now, len(wcs)))

    sim.process(waiter())
    sim.call_at(at, cq.push, "wc", at)
    sim.run()
    return th, host, got


def test_poller_sees_a_completion_after_poll_detect_and_books_the_poll():
    """Busy polling: resume poll_detect after the CQE; CPU = poll_cq + one CQE."""
    th, h, got = _setup("poll")
    woke = 1000.0 + h.poll_detect
    assert got == [(pytest.approx(woke, rel=1e-12), 1)]
    assert th.core.busy_until == pytest.approx(woke + h.poll_cq + h.cqe_handle, rel=1e-12)


def test_interrupt_wakeup_rearms_the_cq_with_one_doorbell_before_polling():
    """Interrupts: resume interrupt_latency after the CQE; CPU = interrupt + re-arm MMIO + poll."""
    th, h, got = _setup("interrupt")
    woke = 1000.0 + h.interrupt_latency
    assert got == [(pytest.approx(woke, rel=1e-12), 1)]
    # ibv_req_notify_cq (libmlx4 mlx4_arm_cq) rings the CQ doorbell: one mmio store.
    assert th.core.busy_until == pytest.approx(
        woke + h.interrupt_cpu + h.mmio + h.poll_cq + h.cqe_handle, rel=1e-12)
    assert th.core.busy_ns == pytest.approx(
        h.interrupt_cpu + h.mmio + h.poll_cq + h.cqe_handle, rel=1e-12)


@pytest.mark.parametrize("at,state", [(500.0, None), (5_000.0, "C1"), (30_000.0, "C1E"),
                                      (150_000.0, "C3"), (600_000.0, "C6")])
def test_an_interrupt_on_an_idle_core_waits_for_its_c_state_exit(at, state):
    """A core idle since t=0 gets the interrupt at ``at`` + interrupt_latency; it was in
    the deepest C-state whose target residency fits that idle time (cx4-edr's Broadwell
    table: C1 2/2, C1E 10/20, C3 40/100, C6 133/400 us) and the thread resumes that
    state's exit latency later. The exit is not busy CPU."""
    th, h, got = _setup("interrupt", "cx4-edr", at)
    idle = at + h.interrupt_latency
    exit_ns = {None: 0.0, "C1": 2_000.0, "C1E": 10_000.0, "C3": 40_000.0,
               "C6": 133_000.0}[state]
    if state is not None:
        assert h.idle_states[state][0] == exit_ns
    assert got == [(pytest.approx(idle + exit_ns, rel=1e-12), 1)]
    assert th.core.busy_ns == pytest.approx(
        h.interrupt_cpu + h.mmio + h.poll_cq + h.cqe_handle, rel=1e-12)


def test_a_poller_never_idles_into_a_c_state():
    """Busy polling keeps the core in C0: no exit latency however long it waited."""
    th, h, got = _setup("poll", "cx4-edr", 600_000.0)
    assert got == [(pytest.approx(600_000.0 + h.poll_detect, rel=1e-12), 1)]
