"""A framework's own CPU per attempt (``protocol.framework``, protocols/txn/cc.py)."""
from __future__ import annotations

import pytest

from protocols.txn.bench import build, run_txn_bench
from protocols.txn.cc import FRAMEWORKS, SoftwareCosts, framework_costs
from protocols.txn.api import TxnSpec
from protocols.txn.store import Table
from protocols.txn.systems import preset
from rnicsim.runner import run_point
from rnicsim.errors import InputError
from rnicsim.scenario import resolve


class _Empty:
    """One transaction type that touches no record and computes 1 us."""

    tables = [Table(0, "t", 8, 4, lambda k: (0, k))]

    @staticmethod
    def _body(tx):
        yield tx.compute(1_000.0)

    def next_txn(self, rng, node, thread, co):
        return TxnSpec("empty", self._body, True)


def _latency_us(cx4, txn_cpu: float) -> tuple[float, float]:
    cfg = preset("drtmh", costs=SoftwareCosts(txn_cpu=txn_cpu))
    b = build(cx4, 1, 1, _Empty(), cfg, 1)
    m = run_txn_bench(b, 0.0, 50_000.0)
    return m["lat_txn_empty_us"], m["committed"]


def test_each_attempt_pays_the_framework_cpu_once(cx4):
    """One coroutine on one thread, a transaction with no record: every transaction
    takes exactly ``txn_cpu`` longer, and the window commits accordingly fewer."""
    base, n0 = _latency_us(cx4, 0.0)
    slow, n1 = _latency_us(cx4, 2_000.0)
    assert slow - base == pytest.approx(2.0, abs=1e-9)
    assert n1 == pytest.approx(50.0 / slow, abs=1.0)
    assert n0 > n1


def test_cycles_become_time_at_the_host_clock():
    base = SoftwareCosts()
    assert framework_costs("none", 2.2e9, base) == base
    rcc = framework_costs("rcc", 2.2e9, base)
    assert rcc.txn_cpu == pytest.approx(FRAMEWORKS["rcc"].txn_cycles / 2.2)
    assert rcc.index_read and rcc.loopback and rcc.local_access == base.local_access
    with pytest.raises(ValueError, match=r"protocol.framework: one of none, rcc"):
        framework_costs("farm", 2.2e9, base)


_SC = {"version": 1, "name": "fw", "cluster": {"nodes": 2, "nic": {"profile": "cx4-edr"},
                                               "threads": 1},
       "workload": {"kind": "txn", "benchmark": "smallbank", "coroutines": 1},
       "protocol": {"kind": "occ", "verbs": "one_sided"},
       "run": {"seed": 1, "warmup": "5us", "measure": "300us"}}


def test_scenario_key_slows_a_cpu_bound_point_and_bad_values_name_the_key():
    """``protocol.framework: rcc`` costs its cycles per attempt: a one-sided OCC
    Balance (reads and a validation, no log, no remote CPU), one coroutine per thread,
    takes longer on average, and the window commits fewer; an unknown name is refused
    naming the key."""
    none = run_point(resolve(_SC, "<fw>"))
    rcc = run_point(resolve({**_SC, "protocol": {**_SC["protocol"], "framework": "rcc"}},
                            "<fw>"))
    assert rcc["committed"] < none["committed"]
    # (the local and remote accounts drawn differ between the runs: not exact)
    assert rcc["lat_txn_balance_us"] - none["lat_txn_balance_us"] > \
        0.5 * FRAMEWORKS["rcc"].txn_cycles / 2.2e3
    with pytest.raises(InputError, match="protocol.framework"):
        resolve({**_SC, "protocol": {**_SC["protocol"], "framework": "farm"}}, "<fw>")


def _nowait_rts(framework: str, passive_ack: bool = False) -> dict:
    sc = {**_SC, "workload": {**_SC["workload"], "smallbank_mix": {"deposit_checking": 100}},
          "protocol": {"kind": "nowait", "verbs": "one_sided", "framework": framework,
                       "passive_ack": passive_ack}}
    return run_point(resolve(sc, "<fw>"))


def test_log_ack_and_index_read_add_their_waits():
    """DepositChecking (one write) under one-sided NOWAIT: without passive ACK the log is
    followed by the cleaners' acknowledgement, one more round trip per transaction (every
    commit logs to a remote backup; passive ACK also spares the commit's own wait for
    remote records, hence at least one); RCC's framework READs each record before
    locking it (its own node's too, through the NIC), a round trip counted as RCC's
    counter counted it in its logged runs, which with the framework CPU makes its
    transactions longer still."""
    pa, ack = _nowait_rts("none", True), _nowait_rts("none")
    assert ack["round_trips_per_txn"] - pa["round_trips_per_txn"] >= 1.0
    assert ack["lat_txn_deposit_checking_us"] > pa["lat_txn_deposit_checking_us"]
    rcc = _nowait_rts("rcc")
    # one index READ, one lock, one log, one acknowledgement and one commit per
    # DepositChecking (every record through the NIC, so every wait goes out)
    assert rcc["round_trips_per_txn"] == pytest.approx(5.0, abs=0.05)
    assert rcc["lat_txn_deposit_checking_us"] > ack["lat_txn_deposit_checking_us"] + \
        FRAMEWORKS["rcc"].txn_cycles / 2.2e3


@pytest.mark.parametrize("verbs", ["one_sided", "rpc"])
def test_rcc_reaches_its_own_records_through_the_nic(verbs):
    """On one node with no backups every record is the coordinator's own. Without a
    framework its CPU locks, reads and installs them: no round trip. RCC's framework
    sends them through the NIC as any other node's (loopback QP, RPC to itself): a
    DepositChecking then waits for its lock and its commit, two round trips (one-sided,
    a third for the READ before the lock), and takes microseconds more than the
    framework's CPU alone adds."""
    sc = {**_SC, "cluster": {**_SC["cluster"], "nodes": 1},
          "workload": {**_SC["workload"], "smallbank_mix": {"deposit_checking": 100}},
          "protocol": {"kind": "nowait", "verbs": verbs, "rep_factor": 0}}
    none = run_point(resolve(sc, "<fw>"))
    rcc = run_point(resolve({**sc, "protocol": {**sc["protocol"], "framework": "rcc"}},
                            "<fw>"))
    assert none["round_trips_per_txn"] == 0.0
    assert rcc["round_trips_per_txn"] == (3.0 if verbs == "one_sided" else 2.0)
    assert rcc["lat_txn_deposit_checking_us"] - none["lat_txn_deposit_checking_us"] > \
        FRAMEWORKS["rcc"].txn_cycles / 2.2e3 + 2 * 1.0


@pytest.mark.parametrize("block, at_once", [
    ({"kind": "nowait", "verbs": "rpc", "framework": "rcc"}, True),
    ({"kind": "nowait", "verbs": "rpc"}, False),
    ({"kind": "nowait", "verbs": "rpc", "framework": "rcc", "retry_backoff": True}, False),
    ({"kind": "mvcc", "verbs": "one_sided", "retry_backoff": False}, True),
    ({"kind": "occ", "verbs": "one_sided", "framework": "rcc"}, True),
    ({"kind": "occ", "verbs": "one_sided"}, False),
    ({"kind": "occ", "preset": "drtmh", "framework": "rcc"}, True),
    ({"kind": "occ", "preset": "drtmh"}, False),
    ({"kind": "occ", "preset": "drtmh", "retry_backoff": False}, True),
])
def test_rcc_framework_retries_at_once_unless_told(block, at_once):
    """``retry_backoff`` unset follows the framework: RCC's BenchWorker retries at once,
    the model's own framework backs off; a set key wins either way."""
    from protocols.txn.registry import PROTOCOLS, _load

    _load()
    sc = resolve({**_SC, "protocol": block}, "<fw>")
    assert PROTOCOLS[block["kind"]].config_of(sc.protocol).retry_backoff is not at_once


# Two nodes, one thread and one coroutine each, YCSB with one hot record per node that
# 90% of the operations hit, every operation a write, a usleep before commit.
_HOT = {"records_per_node": 4, "hot_records_per_node": 1, "hot_probability": 0.9,
        "ops": 4, "write_probability": 1.0, "compute": 0.0, "sleep": True}


@pytest.mark.parametrize("backoff", [False, True])
def test_lockstep_retries_at_once_stall_and_the_metric_counts_them(cx4, backoff):
    """With retries at once the two NO_WAIT coordinators lock the hot records in
    lockstep, each finds the other's lock and aborts, and neither ever commits: both
    transactions are in flight from before the window to its end (``stalled_txns`` 2).
    With the random back-off they commit and nothing stalls."""
    from protocols.txn import scenario_kinds as sk
    from protocols.txn.registry import make_workload

    wl = make_workload("ycsb", _HOT, 2, 1, cx4.host.clock, 1)
    cfg = sk.rcc_config(sk.NowaitProtocol(kind="nowait", verbs="rpc",
                                          retry_backoff=backoff))
    b = build(cx4, 2, 1, wl, cfg, 1, seed=1, kind="nowait")
    m = run_txn_bench(b, 200_000.0, 2_000_000.0)
    if backoff:
        assert m["committed"] > 0 and m["stalled_txns"] == 0
    else:
        assert m["committed"] == 0 and m["stalled_txns"] == 2
        assert b.cc.stats.aborted > 100


def test_stalled_counts_those_older_than_the_window_and_the_age_bound(cx4):
    """At 10 us: of transactions begun at 0, 6 and 9.5 us, with the window opened at
    8 us and an age bound of 5 us, only the first counts (the second is younger than
    the bound, the third began inside the window)."""
    b = build(cx4, 1, 1, _Empty(), preset("drtmh"), 1)
    b.sim.run(until=10_000.0)
    b.cc._begun.update({1: 0.0, 2: 6_000.0, 3: 9_500.0})
    assert b.cc.stalled(8_000.0, 5_000.0) == 1
    assert b.cc.stalled(8_000.0, 0.0) == 2
    assert b.cc.stalled(10_000.0, 0.0) == 3
