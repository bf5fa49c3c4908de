"""protocols.runtime: coroutines are not preempted by the event loop, which polls once per round."""
from __future__ import annotations

import pytest

from protocols.runtime import Worker
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation
from rnicsim.verbs import READ, SEND, WorkRequest


def _pair(cx4):
    """(sim, worker on node 0, its RC QP to node 1, a 4 KiB region on node 1)."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    w = Worker(cl, 0, 0)
    peer = Worker(cl, 1, 0)
    qp, pq = w.create_qp("RC"), peer.create_qp("RC")
    qp.connect(pq)
    return sim, w, qp, peer.ctx.reg_mr(4096)


def _resume_time(cx4, bursts, sleep: bool = False, worker: list | None = None):
    """When coroutine B resumes after an 8-B READ issued at t=0 while coroutine A runs
    ``bursts`` (a list of CPU chunks [ns], back to back; with ``sleep``, usleeps) from
    t=0. ``worker``, if given, receives A's and B's worker."""
    sim, w, qp, mr = _pair(cx4)
    out = {}
    if worker is not None:
        worker.append(w)

    def a(w):
        for ns in bursts:
            yield (w.sleep if sleep else w.compute)(ns)
        out["a_done"] = sim.now

    def b(w):
        yield w.post(qp, [WorkRequest(READ, 8, None, True, False, None, 0, mr.rkey, 0)])
        out["b"] = sim.now

    w.spawn(b)
    w.spawn(a)
    sim.run(until=200_000)
    return out


def test_completion_waits_for_the_running_burst(cx4):
    """A READ completes in a few microseconds; with A computing 4 x 10 us back to back, B
    resumes only after A's whole burst, not between its chunks."""
    alone = _resume_time(cx4, [])["b"]
    assert alone < 10_000
    out = _resume_time(cx4, [10_000.0] * 4)
    assert out["b"] >= out["a_done"] >= 40_000.0


def test_ready_coroutines_run_one_at_a_time(cx4):
    """Two coroutines whose READs complete during a third one's burst are resumed in the
    same poll; each then runs its 3 x 10 us burst to the end before the other starts
    (without the run queue their chunks interleaved and both finished late)."""
    sim, w, qp, mr = _pair(cx4)
    log: dict[str, list[float]] = {"A": [], "B": []}

    def co(w, name):
        yield w.post(qp, [WorkRequest(READ, 8, None, True, False, None, 0, mr.rkey, 0)])
        for _ in range(3):
            yield w.compute(10_000.0)
            log[name].append(sim.now)

    def hog(w):
        yield w.compute(5_000.0)       # both READs complete meanwhile

    w.spawn(co, "A")
    w.spawn(co, "B")
    w.spawn(hog)
    sim.run(until=200_000)
    first, second = sorted(log.values(), key=lambda t: t[0])
    assert first[-1] <= second[0]
    assert first[-1] < 40_000.0        # 5 us + 3 x 10 us, not interleaved with the other


def _handled_at(cx4, ready: int) -> tuple[float, float]:
    """(when node 1's event loop handles a 64-B SEND that node 0 posts at t=0, when the
    last of node 1's ``ready`` coroutines ends; each is ready at t=0 and runs a 5-us
    ``usleep``, about 65 us with the timer slack and the C-state exit, then 1 us of
    CPU)."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    w0, w1 = Worker(cl, 0, 0), Worker(cl, 1, 0)
    q0, q1 = w0.create_qp("RC"), w1.create_qp("RC")
    q0.connect(q1)
    w1.post_recv(q1, 1)
    out = {"ends": []}
    w1.on_recv(q1, lambda wc: out.setdefault("handled", sim.now))

    def busy(w):
        yield w.sleep(5_000.0)
        yield w.compute(1_000.0)
        out["ends"].append(sim.now)

    def send(w):
        yield w.post(q0, [WorkRequest(SEND, 64, None, True, False)])

    for _ in range(ready):
        w1.spawn(busy)
    w0.spawn(send)
    sim.run(until=300_000)
    return out["handled"], max(out["ends"])


def test_the_event_loop_polls_once_per_round_of_ready_coroutines(cx4):
    """DrTM+H's and RCC's master routine polls, then runs every ready coroutine in turn
    (each until it yields) before it polls again (``new_master_routine``,
    ``indirect_must_yield`` in their ``src/core``). A SEND that lands during the first of
    two ready coroutines' bursts is handled after the second one's too, not between
    them (a poll there would handle it at about 68 us); with one coroutine, right after
    its burst."""
    handled, end = _handled_at(cx4, 1)
    assert 60_000.0 < end < 70_000.0
    assert end <= handled < end + 1_000.0
    handled, end = _handled_at(cx4, 2)
    assert 120_000.0 < end < 140_000.0
    assert end <= handled < end + 1_000.0


def test_cpu_meter_gives_the_busy_share_of_the_measured_window_only(cx4):
    """A worker busy 300 ns of every 1000 ns, and busy all the time before 2000 ns (a
    warm-up burst): over the window [2000, 6000) the meter gives 0.3 (the warm-up does
    not count), and the same after running past the window (a drain does not either); two
    threads on one core count it once. The window's share is what multiobj, microbench
    and the RPC benchmark report, not the whole run's CPU over the whole run."""
    sim = Simulation(1)
    cl = Cluster(sim, cx4, 2, 1)
    w = Worker(cl, 0, 0)

    def body(w):
        yield w.compute(2000)
        while True:
            yield w.compute(300)
            yield sim.timeout(700)

    sim.measure(2000, 4000)
    meter = sim.cpu_meter([w.thread.core, cl.nodes[0].thread(0).core])
    w.spawn(body)
    sim.run(until=1000)
    assert meter() == 0.0
    sim.run(until=6000)
    assert meter() == pytest.approx(0.3, rel=0.02)
    sim.run(until=9000)
    assert meter() == pytest.approx(0.3, rel=0.02)


def test_extend_window_moves_the_end_of_statistics_and_meters():
    """A window [1000, 3000) ns extended at its end to 5000 ns keeps counting and
    metering to 5000: a counter bumped every 500 ns from 250 ns counts the 8 bumps in
    [1000, 5000), a busy source growing 1 ns per 2 ns reads 0.5 over it, and after 5000
    neither moves. Extending a closed window, or moving the end earlier, is refused."""
    sim = Simulation(1)
    busy = [0.0]

    def ticker():
        yield sim.timeout(250)
        while True:
            sim.add("ticks")
            busy[0] = sim.now / 2
            yield sim.timeout(500)

    sim.measure(1000, 2000)
    meter = sim.busy_meter([lambda: busy[0]])
    sim.process(ticker())
    sim.run(until=3000)
    with pytest.raises(ValueError, match="earlier"):
        sim.extend_window(2500)
    sim.extend_window(5000)
    sim.run(until=5000)
    sim.extend_window(5000)         # at the end, before the closing runs: allowed
    sim.run(until=9000)
    assert sim.stats.counters["ticks"] == 8
    assert meter() == [pytest.approx(0.5, abs=0.07)]
    assert not sim.measuring
    with pytest.raises(ValueError, match="no window open"):
        sim.extend_window(12000)


def test_usleep_blocks_the_thread_for_the_sleep_plus_the_timer_slack(cx4):
    """``Worker.sleep`` is a ``usleep``: A sleeping 5 us from t=0 resumes at 5 us + the
    50-us timer slack + the exit of the C-state the idle core entered (55 us idle: C1E,
    10 us, the deepest whose 20-us target residency fits) + the wake-up's CPU
    (``interrupt_cpu``), and the thread runs nothing else meanwhile: B's READ, done in a
    few microseconds, is handed to B only after A's sleep. Only the wake-up is busy CPU.
    The same 5 us as ``compute`` ends at 5 us."""
    h = cx4.host
    assert h.timer_slack == 50_000.0
    assert h.idle_states["C1E"] == (10_000.0, 20_000.0)
    assert h.idle_states["C3"][1] > 55_000.0
    ws: list = []
    out = _resume_time(cx4, [5_000.0], sleep=True, worker=ws)
    # A starts its sleep after B's post (the spawn order), so it wakes that much later.
    post_cpu = h.wqe_build + h.mmio
    woke = 5_000.0 + h.timer_slack + 10_000.0 + h.interrupt_cpu
    assert out["a_done"] == pytest.approx(post_cpu + woke, abs=h.coroutine_switch + 1.0)
    assert out["b"] >= out["a_done"]
    assert out["b"] - out["a_done"] < 2_000.0    # B is resumed right after the sleep
    assert ws[0].thread.busy_ns < 10_000.0       # the 55 us asleep are not busy CPU
    computed = _resume_time(cx4, [5_000.0])
    assert computed["a_done"] == pytest.approx(post_cpu + 5_000.0, abs=h.coroutine_switch + 1.0)
    w = ws[0]
    with pytest.raises(ValueError, match="sleep: ns must be a time >= 0"):
        w.sleep(-1.0)
