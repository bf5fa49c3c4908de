"""hw/cq.py: when a waiting thread sees a completion and what CPU it books, by hand."""
import pytest

from rnicsim.hw.cq import Cq
from rnicsim.hw.host import Core, CpuThread
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation


def _setup(mode):
    sim = Simulation(1)
    host = load_profile("cx3-roce-10g").host
    th = CpuThread(sim, "n0/t0", Core("n0/core0"), host, 0)
    th.sleeps = mode == "interrupt"
    cq = Cq(sim, "cq", host)
    cq.mode = mode
    got = []

    def waiter():
        wcs = yield cq.wait(th)
        got.append((sim.now, len(wcs)))

    sim.process(waiter())
    sim.call_at(1000.0, cq.push, "wc", 1000.0)
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
