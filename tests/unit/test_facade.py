"""What the verbs facade and the clock offer software so it never reaches into hardware
state: ``QueuePair.modify(timeout_ns=...)``, ``CompletionQueue.mode``,
``Simulation.succeed_in`` and ``Simulation.events_scheduled``."""
from __future__ import annotations

import pytest

from rnicsim.verbs import RETRY_EXC_ERR, WRITE, WorkRequest


def _write_to_dead_peer(pair, timeout_ns=None):
    """Post one signaled WRITE from side 0 at time 0 after node 1 failed; its completions
    as (time seen [ns], wr_id, status)."""
    if timeout_ns is not None:
        pair.qp[0].modify(timeout_ns=timeout_ns)
    pair.cluster.fail_node(1)
    seen: list = []

    def poller():
        for wc in (yield pair.cq[0].wait()):
            seen.append((pair.sim.now, wc.wr_id, wc.status))

    pair.sim.process(poller())
    pair.qp[0].post_send([WorkRequest(WRITE, 64, "w", True, True, None, 0,
                                      pair.mr[1].rkey, 0)])
    pair.sim.run()
    return seen


def test_modify_sets_the_retry_timeout_a_dead_peer_breaks_the_qp_after(rc_pair):
    """With a 50 us retry timeout a WRITE to a failed node completes with RETRY_EXC_ERR
    50 us after it leaves (not after the default ~537 ms)."""
    (t, wr_id, status), = _write_to_dead_peer(rc_pair, 50_000.0)
    assert (wr_id, status) == ("w", RETRY_EXC_ERR)
    # the timer starts when the WRITE leaves the NIC (< 1 us after the post at 0)
    assert 50_000.0 < t < 51_000.0


def test_the_default_retry_timeout_is_ibv_timeout_14_with_7_retries(make_rc_pair, cx4):
    """Without modify the same WRITE fails after 4.096 us x 2^14 x 8 = 536.870912 ms."""
    (t, _, status), = _write_to_dead_peer(make_rc_pair(cx4))
    assert status == RETRY_EXC_ERR
    assert 536_870_912.0 < t < 536_871_912.0


@pytest.mark.parametrize("bad", [0, -5.0, float("inf"), float("nan"), "50us", True])
def test_modify_rejects_a_timeout_that_is_not_a_positive_number(rc_pair, bad):
    """A zero, negative, infinite or non-numeric timeout is a ValueError naming it."""
    with pytest.raises(ValueError, match=r"modify: timeout_ns must be a positive number "
                                         r"of ns, got "):
        rc_pair.qp[0].modify(timeout_ns=bad)


def test_completion_queue_mode_follows_use_interrupts(rc_pair):
    """A CQ polls by default and reports "interrupt" after use_interrupts(), "poll" after
    use_interrupts(False)."""
    cq = rc_pair.cq[0]
    assert cq.mode == "poll"
    cq.use_interrupts()
    assert cq.mode == "interrupt"
    cq.use_interrupts(False)
    assert cq.mode == "poll"


def test_succeed_in_resumes_the_waiter_later_with_the_value(sim):
    """A process waiting on an event that succeed_in(ev, 250, "v") triggers at t=100
    resumes at t=350 with "v"."""
    ev = sim.event()
    seen = []

    def waiter():
        v = yield ev
        seen.append((sim.now, v))

    sim.process(waiter())
    sim.call_at(100.0, sim.succeed_in, ev, 250.0, "v")
    sim.run()
    assert seen == [(350.0, "v")]


def test_events_scheduled_counts_heap_entries_without_taking_one(sim):
    """Each call_at adds one; reading the count twice gives the same value."""
    n0 = sim.events_scheduled
    sim.call_at(5.0, lambda: None)
    sim.call_at(6.0, lambda: None)
    assert sim.events_scheduled == n0 + 2
    assert sim.events_scheduled == n0 + 2
