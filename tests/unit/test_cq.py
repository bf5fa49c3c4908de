"""hw/cq.py: when a waiting thread sees a completion and what CPU it books, by hand."""
import pytest

from rnicsim.hw.cq import Cq
from rnicsim.hw.host import Core, CpuThread
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation


def _setup(mode, loop_delay=0.0, busy_until=0.0):
    sim = Simulation(1)
    host = load_profile("cx3-roce-10g").host
    th = CpuThread(sim, "n0/t0", Core("n0/core0"), host, 0)
    th.sleeps = mode == "interrupt"
    if busy_until:
        th.reserve(0.0, busy_until)       # earlier work the thread finishes first
    cq = Cq(sim, "cq", host, loop_delay)
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


def test_an_event_loop_adds_its_delay_on_an_idle_thread_only():
    """loop_delay 700 ns: an idle poller resumes poll_detect + 700 ns after the CQE; one
    still busy until 2,500 ns (later than both) resumes when its work ends; interrupt
    mode ignores the loop."""
    th, h, got = _setup("poll", loop_delay=700.0)
    assert got == [(pytest.approx(1000.0 + h.poll_detect + 700.0, rel=1e-12), 1)]
    th, h, got = _setup("poll", loop_delay=700.0, busy_until=2500.0)
    assert got == [(pytest.approx(2500.0, rel=1e-12), 1)]
    th, h, got = _setup("interrupt", loop_delay=700.0)
    assert got == [(pytest.approx(1000.0 + h.interrupt_latency, rel=1e-12), 1)]


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
