"""protocols.multiobj: the multi-object micro-benchmark (DrTM+H fig. 6) on tiny clusters.

What is posted per transaction under each optimization (counted where software meets the
verbs facade), passive ACK with no replies, option checks with clear errors, same seed same
result.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from protocols.multiobj import MultiObjBench, MultiObjWorkload, run_multiobj
from rnicsim.cluster import Cluster
from rnicsim.errors import InputError
from rnicsim.scenario import load_scenario
from rnicsim.sim import Simulation
from rnicsim.verbs import READ, SEND_WITH_IMM, WRITE, QueuePair

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh"


@pytest.fixture
def posts(monkeypatch):
    """Every ``post_send`` call as the list of its work requests (one list per doorbell)."""
    seen: list[list] = []
    orig = QueuePair.post_send

    def spy(self, wrs, event=True):
        seen.append(list(wrs))
        return orig(self, wrs, event)

    monkeypatch.setattr(QueuePair, "post_send", spy)
    return seen


def _run(cx4, until: float = 30_000.0, nodes: int = 2, threads: int = 1, **kw):
    sim = Simulation(1)
    cl = Cluster(sim, cx4, nodes, 1)
    bench = MultiObjBench(sim, cl, MultiObjWorkload(**kw), threads)
    sim.measure(0.0, until)
    bench.start()
    sim.run(until=until)
    return bench


def test_one_sided_read_outstanding_posts_ten_reads_per_transaction(cx4, posts):
    """With outstanding requests, each transaction posts exactly 10 signaled READs, one
    doorbell each (no doorbell batching), then waits once for all of them."""
    b = _run(cx4, op="read", primitive="one_sided", outstanding=True)
    reads = [wr for p in posts for wr in p if wr.opcode == READ]
    assert b.issued > 5
    assert len(reads) == 10 * b.issued
    assert all(len(p) == 1 for p in posts)
    assert all(wr.signaled for wr in reads)
    assert b.done >= b.issued - 2        # two threads (one per node), one coroutine each


def test_one_sided_doorbell_batching_is_per_destination_qp(cx4, posts):
    """With 2 nodes every object is on the one peer: one doorbell carries all 10 READs;
    with 3 nodes a doorbell never mixes destinations."""
    b = _run(cx4, op="read", primitive="one_sided", outstanding=True, doorbell=True)
    assert [len(p) for p in posts] == [10] * b.issued
    posts.clear()
    b = _run(cx4, nodes=3, op="read", primitive="one_sided", outstanding=True, doorbell=True)
    assert sum(len(p) for p in posts) == 10 * b.issued
    assert all(len({wr.rkey for wr in p}) == 1 for p in posts)
    assert len(posts) > b.issued                      # several destinations per transaction


def test_one_sided_passive_ack_signals_only_the_last_write(cx4, posts):
    """Passive ACK: of the 10 WRITEs of a transaction only the last one posted is signaled."""
    b = _run(cx4, nodes=3, op="write", primitive="one_sided", outstanding=True, doorbell=True,
             passive_ack=True)
    writes = [wr for p in posts for wr in p if wr.opcode == WRITE]
    assert len(writes) == 10 * b.issued
    assert sum(wr.signaled for wr in writes) == b.issued
    assert posts[-1][-1].signaled


def test_baseline_is_one_object_per_round_trip(cx4):
    """Without outstanding requests a transaction takes 10 round trips one after the other;
    with them the 10 READs overlap (on one QP here, so the NIC still serialises them)."""
    seq = _run(cx4, op="read", primitive="one_sided", until=60_000.0)
    par = _run(cx4, op="read", primitive="one_sided", outstanding=True, until=60_000.0)
    lat_seq = seq.sim.stats.hist("txn_lat").summary()["p50"]
    lat_par = par.sim.stats.hist("txn_lat").summary()["p50"]
    assert lat_seq > 3 * lat_par


def _items(posts):
    """RPC items (kind, call id, handler id, payload) of every SEND posted."""
    return [it for p in posts for wr in p if wr.opcode == SEND_WITH_IMM for it in wr.data]


def test_two_sided_passive_ack_sends_no_replies(cx4, posts):
    """Two-sided writes: without passive ACK every request gets a reply; with it none does,
    and every transaction is done once its 10 requests have been handled."""
    b = _run(cx4, op="write", primitive="two_sided", coroutines=2, outstanding=True,
             doorbell=True)
    kinds = [it[0] for it in _items(posts)]
    # Requests still unanswered when the run stops: at most 10 per coroutine, 2 coroutines
    # on each of the 2 nodes' threads.
    assert kinds.count(1) > 0 and 0 <= kinds.count(0) - kinds.count(1) <= 2 * 2 * 10
    posts.clear()
    b = _run(cx4, op="write", primitive="two_sided", coroutines=2, outstanding=True,
             doorbell=True, passive_ack=True)
    items = _items(posts)
    assert items and all(it[0] == 0 for it in items)       # requests only
    assert all(it[1] == -1 for it in items)                # no reply asked for
    # issued counts transactions still waiting for credits or for their flush
    assert 10 * (b.issued - 2 * 2) <= len(items) <= 10 * b.issued
    # per thread at most 2 transactions unhandled (the 20-request window) and 2 issued
    # coroutines waiting for credits
    assert b.done >= b.issued - 2 * (2 + 2)
    assert b.objects_done == pytest.approx(10 * b.done, abs=10 * 2 * 2)


def test_two_sided_passive_ack_is_flow_controlled(cx4):
    """Unconsumed requests of a thread stay within coroutines x objects (the RECV window)."""
    b = _run(cx4, op="write", primitive="two_sided", coroutines=4, outstanding=True,
             doorbell=True, passive_ack=True, until=20_000.0)
    for cr in b.credits.values():
        assert 0 <= cr.pending <= cr.window == 40


@pytest.mark.parametrize("kw, fragment", [
    (dict(op="read", passive_ack=True), "passive_ack applies to op write only"),
    (dict(doorbell=True), "doorbell batching needs outstanding requests"),
    (dict(objects=0), "objects"),
    (dict(primitive="rdma"), "primitive"),
])
def test_invalid_options_raise_clear_errors(kw, fragment):
    with pytest.raises(ValidationError, match=fragment):
        MultiObjWorkload(**kw)


def test_scenario_errors_name_file_and_key(tmp_path):
    """A bad option in a scenario file is an InputError naming the file and the key."""
    raw = yaml.safe_load((ROOT / "fig6_multi_object.yaml").read_text())
    raw["sweep"] = {}
    raw["sweep_exclude"] = []
    raw["workload"]["passive_ack"] = True
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match=r"bad\.yaml: workload: passive_ack applies to op "
                                         r"write only"):
        load_scenario(p)
    raw["workload"].update(passive_ack=False, primitive="two_sided", payload=4096)
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match=r"bad\.yaml: workload\.payload: .*MTU"):
        load_scenario(p)
    raw["workload"].update(payload=64, handler="fast")
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match=r"bad\.yaml: workload\.handler"):
        load_scenario(p)


def test_step_column_follows_the_cumulative_x_axis():
    assert MultiObjWorkload().step() == 0
    assert MultiObjWorkload(coroutines=8).step() == 1
    assert MultiObjWorkload(coroutines=8, outstanding=True).step() == 2
    assert MultiObjWorkload(coroutines=8, outstanding=True, doorbell=True).step() == 3
    assert MultiObjWorkload(op="write", coroutines=8, outstanding=True, doorbell=True,
                            passive_ack=True).step() == 4
    assert MultiObjWorkload(outstanding=True).step() == -1     # not on the axis


def test_same_seed_same_results(cx4):
    w = MultiObjWorkload(op="write", primitive="two_sided", coroutines=2, outstanding=True)
    a = run_multiobj(cx4, w, 3, 1, threads=2, seed=7, warmup_ns=5_000, measure_ns=10_000)
    b = run_multiobj(cx4, w, 3, 1, threads=2, seed=7, warmup_ns=5_000, measure_ns=10_000)
    assert a == b
    assert a["throughput_mtxns"] > 0


def test_two_sided_replies_of_one_poll_share_a_doorbell_at_every_step(cx4, posts):
    """Without doorbell batching (fig. 6 step 1) each request still goes alone, but the
    replies the handlers of one poll produce leave in one doorbell list, as rlib's
    UDMsg::poll_comps flushes them (protocols.rpc module doc)."""
    b = _run(cx4, op="read", primitive="two_sided", coroutines=8)
    kinds = [[it[0] for wr in p for it in wr.data] for p in posts]
    requests = [k for k in kinds if 0 in k]
    replies = [k for k in kinds if 1 in k]
    assert b.issued > 10
    assert len(requests) + len(replies) == len(kinds)       # never mixed in one list
    assert all(len(k) == 1 for k in requests)
    assert max(len(k) for k in replies) > 1
    assert sum(len(k) for k in replies) >= len(requests) - 2 * 8   # all but those in flight


def test_zero_threads_is_refused(cx4):
    """Zero worker threads is a ValueError (was a run reporting 0 Mtxn/s)."""
    with pytest.raises(ValueError, match=r"threads: a positive integer"):
        run_multiobj(cx4, MultiObjWorkload(), 2, threads=0)
