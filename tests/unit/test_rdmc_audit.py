"""RDMC used as a first-time user would, wrongly: every misuse an audit of the RDMC API
found is refused with an error naming the argument (or key), and never corrupts a group,
goes back in time or is silently ignored."""
from __future__ import annotations

import os

import pytest

from protocols.rdmc.engine import EngineOptions, Rdmc
from rnicsim.cluster import Cluster
from rnicsim.profile import load_profile
from rnicsim.sim import Simulation

KiB, MiB = 1 << 10, 1 << 20


def _engine(n: int = 4, **opts) -> tuple[Simulation, Rdmc]:
    sim = Simulation(1)
    return sim, Rdmc(Cluster(sim, load_profile("cx4-edr"), n), **opts)


# ------------------------------------------------------------------ Group.send

@pytest.mark.parametrize("size", [1.5e5, 65536.0, "1MiB", True, None])
def test_send_refuses_a_size_that_is_not_a_whole_number_and_leaves_the_group_usable(size):
    """A float size used to crash half-way (TypeError inside the engine) and leave the
    root 'busy' for ever; True was sent as 1 byte."""
    sim, eng = _engine()
    g = eng.create_group([0, 1, 2, 3], 64 * KiB)
    with pytest.raises(TypeError, match="size"):
        g.send(size)
    assert g.messages == []
    msg = g.send(100 * KiB)            # the group still works
    sim.run()
    assert msg.done.triggered and not msg.failed


def test_send_with_data_of_the_wrong_length_leaves_no_phantom_message():
    """The length check came after the message was recorded: close() then waited for a
    message nobody sent and never fired."""
    sim, eng = _engine(carry_data=True)
    g = eng.create_group([0, 1, 2, 3], 64 * KiB)
    with pytest.raises(ValueError, match="data"):
        g.send(10, b"abc")
    assert g.messages == []
    g.send(10, b"0123456789")
    sim.run()
    ev = g.close()
    sim.run()
    assert ev.triggered and all(ok for ok, _ in ev.value.values())


def test_send_with_data_needs_carry_data():
    """Without carry_data the bytes were accepted and silently not delivered."""
    sim, eng = _engine()
    g = eng.create_group([0, 1], 64 * KiB)
    with pytest.raises(ValueError, match="carry_data"):
        g.send(100, os.urandom(100))
    with pytest.raises(TypeError, match="data"):
        _engine(carry_data=True)[1].create_group([0, 1], 64).send(3, [1, 2, 3])


def test_send_after_close_raises():
    sim, eng = _engine()
    g = eng.create_group([0, 1, 2], 64 * KiB)
    g.send(1000)
    g.close()
    sim.run()
    with pytest.raises(RuntimeError, match="closed"):
        g.send(1000)


# ------------------------------------------------------------------ create_group

@pytest.mark.parametrize("kw, match", [
    ({"block_size": 1.5}, "block_size"),            # was truncated to 1 B
    ({"block_size": "1MiB"}, "block_size"),         # was a TypeError from '<'
    ({"block_size": None}, "block_size"),
    ({"max_message": 1e6}, "max_message"),          # was accepted as a float
    ({"max_message": 0}, "max_message"),            # was reg_mr's message
    ({"algorithm": "chain", "rack_size": 2}, "rack_size"),   # was ignored
    ({"algorithm": "hybrid", "rack_size": 0}, "rack_size"),
])
def test_create_group_refuses_bad_values_naming_the_argument(kw, match):
    _sim, eng = _engine()
    kw = {"block_size": 64 * KiB, **kw}
    with pytest.raises(ValueError, match=match):
        eng.create_group([0, 1, 2], **kw)


def test_create_group_refuses_callbacks_that_cannot_be_called_and_non_sequences():
    _sim, eng = _engine()
    with pytest.raises(TypeError, match="on_complete"):
        eng.create_group([0, 1], 64, on_complete=5)
    with pytest.raises(TypeError, match="members"):
        eng.create_group(3, 64)
    with pytest.raises(ValueError, match="distinct"):
        eng.create_group([0, 1, 1], 64)


# ------------------------------------------------------------------ engine options

@pytest.mark.parametrize("kw, exc, match", [
    ({"foo": 1}, TypeError, "unknown option 'foo'"),
    ({"poll_window_ns": -1}, ValueError, "poll_window_ns"),
    ({"recv_batch": 2.5}, TypeError, "recv_batch"),
    ({"sched_delay_prob": 2}, ValueError, "sched_delay_prob"),
    ({"sched_delay_ns": -5.0}, ValueError, "sched_delay_ns"),
    ({"watchdog_ns": -1}, ValueError, "watchdog_ns"),
    ({"copy_rate": 0}, ValueError, "copy_rate"),
    ({"retry_timeout_ns": -1}, ValueError, "retry_timeout_ns"),
    ({"core_direct": "yes"}, TypeError, "core_direct"),
    ({"message_setup_ns": float("nan")}, ValueError, "message_setup_ns"),
    ({"thread_index": -1}, ValueError, "thread_index"),
    ({"slow_pairs": (0, 1, 2.0)}, ValueError, "slow_pairs"),
    ({"slow_pairs": ((0, 0, 2.0),)}, ValueError, "slow pair"),
    ({"slow_pairs": ((0, 1, 0.5),)}, ValueError, "factor"),
    ({"slow_pairs": ((0, 99, 2.0),)}, ValueError, "slow_pairs: node ids"),
])
def test_engine_options_are_checked(kw, exc, match):
    with pytest.raises(exc, match=match):
        _engine(**kw)


def test_slow_pairs_given_as_a_list_work_like_a_tuple():
    assert EngineOptions(slow_pairs=[[0, 1, 2.0]]).slow_pairs == ((0, 1, 2.0),)


# ------------------------------------------------------------------ faults and delays

@pytest.mark.parametrize("call", [
    lambda e: e.fail_link(99),          # was IndexError
    lambda e: e.inject_delay(99, 0, 10),  # was IndexError
    lambda e: e.fail_node(-1),
    lambda e: e.inject_delay(1, 0, -10),  # a negative stall
])
def test_fault_injection_names_the_bad_argument(call):
    _sim, eng = _engine()
    eng.create_group([0, 1, 2, 3], 64 * KiB)
    with pytest.raises(ValueError, match="node|ns"):
        call(eng)


def test_inject_delay_in_the_past_is_refused_rather_than_running_time_backwards():
    sim, eng = _engine()
    eng.create_group([0, 1], 64 * KiB)
    sim.run(until=1000.0)
    with pytest.raises(ValueError, match="at_ns"):
        eng.inject_delay(1, 500.0, 100.0)


# ------------------------------------------------------------------ scenario kinds

_SCENARIO = """version: 1
name: audit
description: rdmc audit
cluster: {cluster}
workload: {workload}
run: {run}
"""


def _scenario(tmp_path, workload: str, cluster: str = "{nodes: 8, nic: {profile: cx4-edr}}",
              run: str = "{seed: 1}"):
    path = tmp_path / "s.yaml"
    path.write_text(_SCENARIO.format(cluster=cluster, workload=workload, run=run))
    return path


@pytest.mark.parametrize("workload, cluster, key", [
    # rack_size was ignored by every algorithm but hybrid
    ("{kind: rdmc, algorithm: chain, rack_size: 2}", None, "workload.rack_size"),
    ("{kind: rdmc, algorithm: mpi, rack_size: 2}", None, "workload.rack_size"),
    # validated, then a traceback at run time (more than 65,535 blocks)
    ("{kind: rdmc, message: 100MiB, block: 1KiB}", None, "workload.block"),
    # ignored: RDMC uses NIC 0 and completion thread 0 of every node
    ("{kind: rdmc}", "{nodes: 8, nic: {per_node: 2}}", "cluster.nic.per_node"),
    ("{kind: rdmc}", "{nodes: 8, threads: 4}", "cluster.threads"),
    # ignored: the studies build the paper's testbeds
    ("{kind: rdmc_study, study: m1_steps}",
     "{nodes: 8, topology: {kind: leaf_spine, leaves: 2, spines: 1}}", "cluster.topology"),
    ("{kind: rdmc_study, study: m1_steps}", "{nodes: 8, cores: 2}", "cluster.cores"),
])
def test_validate_names_keys_the_rdmc_kinds_cannot_honour(tmp_path, capsys, workload,
                                                           cluster, key):
    from rnicsim.cli import main

    path = _scenario(tmp_path, workload, cluster or "{nodes: 8, nic: {profile: cx4-edr}}")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {key}:" in err and "Traceback" not in err


@pytest.mark.parametrize("workload, run, key", [
    ("{kind: rdmc}", "{seed: 1, measure: 10us}", "run.measure"),
    ("{kind: rdmc_study, study: m1_steps}", "{warmup: 1us}", "run.warmup"),
])
def test_validate_refuses_a_measurement_window_the_rdmc_kinds_do_not_use(tmp_path, capsys,
                                                                         workload, run, key):
    """run.warmup / run.measure were accepted and ignored (a multicast is measured whole)."""
    from rnicsim.cli import main

    path = _scenario(tmp_path, workload, run=run)
    assert main(["validate", str(path)]) == 2
    assert f"{path}: {key}:" in capsys.readouterr().err


def test_rdmc_kind_runs_on_the_scenarios_cluster_not_one_of_group_size_nodes(tmp_path):
    """cluster.nodes was ignored: the cluster had group_size nodes, so a leaf_spine of 4
    leaves put the 4 members of a 16-node scenario on 4 leaves instead of one; the result
    must equal the single-leaf run (the members are nodes 0-3, all on leaf 0)."""
    from rnicsim.runner import run_point
    from rnicsim.scenario import load_scenario

    wl = "{kind: rdmc, message: 4MiB, block: 1MiB, group_size: 4}"
    spine = _scenario(tmp_path, wl, "{nodes: 16, topology: {kind: leaf_spine, leaves: 4, "
                                    "spines: 1, oversubscription: 4.0}}")
    spread = run_point(load_scenario(spine))["completion_ms"]
    one = _scenario(tmp_path, wl, "{nodes: 16}")
    assert spread == pytest.approx(run_point(load_scenario(one))["completion_ms"], rel=1e-9)


def test_rdmc_kind_takes_messages_above_2_gib(tmp_path):
    """The engine's default max_message (2 GiB) refused a valid scenario at run time."""
    from rnicsim.runner import run_point
    from rnicsim.scenario import load_scenario

    path = _scenario(tmp_path, "{kind: rdmc, message: 3GiB, block: 64MiB, group_size: 2}",
                     "{nodes: 2}")
    row = run_point(load_scenario(path))
    assert row["bandwidth_gbps"] > 0


# ------------------------------------------------------------------ schedules API

def test_schedule_functions_take_numpy_integers():
    """np.int64(3) was refused with 'nodes must be an integer >= 1, got np.int64(3)'."""
    np = pytest.importorskip("numpy")
    from protocols.rdmc import schedules as S

    assert S.schedule("chain", np.int64(3), np.int32(2)) == S.schedule("chain", 3, 2)
    assert S.step_count("hybrid", np.int64(9), 2, rack_size=np.int64(3)) == \
        S.step_count("hybrid", 9, 2, rack_size=3)
    assert S.transfers_for_node("chain", 3, 2, np.int64(1)) == S.transfers_for_node("chain", 3, 2, 1)
    assert S.predicted_average_slack(np.int64(8)) == S.predicted_average_slack(8)
    steps = S.schedule("binomial-pipeline", 8, 4)
    assert S.slack(steps, np.int64(4)) == S.slack(steps, 4)


def test_slack_of_an_empty_schedule_says_so():
    """Was 'step must be in 0..-1'."""
    from protocols.rdmc import schedules as S

    with pytest.raises(ValueError, match="no steps"):
        S.slack(S.schedule("chain", 1, 3), 0)


# ------------------------------------------------------------------ rdmc-schedule

@pytest.mark.parametrize("argv, flag", [
    (["-a", "chain", "-n", "3", "-k", "2", "-n", "4"], "-n"),        # was: 4 nodes
    (["-a", "chain", "-n", "3", "-k", "2", "--blocks=5"], "-k"),
    (["-a", "chain", "-a", "hybrid", "-n", "3", "-k", "2"], "--algorithm"),
    (["-a", "hybrid", "-n", "9", "-k", "2", "--rack-size", "2", "--rack-size", "3"],
     "--rack-size"),
    (["-a", "chain", "-n", "3", "-k", "1_0"], "-k"),                 # was: 10 blocks
    (["-a", "chain", "-n", "\uff13", "-k", "2"], "-n"),              # fullwidth 3: 3 nodes
    (["-a", "chain", "-n", " 3", "-k", "2"], "-n"),
])
def test_rdmc_schedule_refuses_repeated_flags_and_non_plain_integers(capsys, argv, flag):
    from rnicsim.cli import main

    assert main(["rdmc-schedule", *argv]) == 2
    captured = capsys.readouterr()
    assert f"command line: {flag}:" in captured.err and captured.out == ""


def test_received_needs_carry_data_and_a_member_rank():
    """Without carry_data, received() returned zeros as if they had been sent."""
    sim, eng = _engine()
    g = eng.create_group([0, 1], 64 * KiB)
    g.send(100)
    sim.run()
    with pytest.raises(ValueError, match="carry_data"):
        g.received(1, 100)
    sim, eng = _engine(carry_data=True)
    g = eng.create_group([0, 1], 64 * KiB)
    with pytest.raises(ValueError, match="rank"):
        g.received(2, 100)


# ------------------------------------------------------------------ study functions

@pytest.mark.parametrize("name", ["m1_steps", "fig4_algorithms", "claims"])
def test_studies_refuse_an_unknown_size(name):
    """size='tiny' or 'Full' ran the demo size without a word."""
    from protocols.rdmc import study

    with pytest.raises(ValueError, match="size must be 'demo' or 'full'"):
        getattr(study, name)("Full")


@pytest.mark.parametrize("kw, match", [
    ({"testbed": "xx"}, "testbed"),                 # was KeyError
    ({"messages": 0}, "messages"),                  # was ZeroDivisionError
    ({"algorithm": "mpi", "block_size": 4096}, "block_size"),   # was ignored
    ({"algorithm": "mpi", "rack_size": 2}, "rack_size"),
    ({"nodes": 2}, "nodes"),
])
def test_run_multicast_names_bad_arguments(kw, match):
    from protocols.rdmc.study import run_multicast

    with pytest.raises(ValueError, match=match):
        run_multicast(4, 64 * KiB, **kw)


def test_a_member_on_a_node_that_crashed_before_the_group_was_created_never_acts():
    """fail_node before create_group left that member's RDMC state running on the dead
    node: it detected a 'failure' of its peers and reported a close result."""
    sim, eng = _engine(retry_timeout_ns=50_000.0, watchdog_ns=100_000.0)
    eng.fail_node(2)
    g = eng.create_group([0, 1, 2, 3], 64 * KiB)
    msg = g.send(1 * MiB)
    sim.run(until=1e8)
    ev = g.close()
    sim.run(until=2e8)
    assert msg.done.triggered and msg.failed
    assert ev.triggered and sorted(ev.value) == [0, 1, 3]
    assert all(not ok and suspect == 2 for ok, suspect in ev.value.values())
    assert 2 not in g.failures


# ------------------------------------------------------------------ MPI baseline

def test_mpi_communicator_refuses_a_size_it_was_not_set_up_for():
    """Its plan is for one size: another size died inside the engine with an IndexError
    (or was refused as beyond max_message)."""
    from protocols.rdmc.baselines import mpi_bcast_group

    sim, eng = _engine(carry_data=True)
    g = mpi_bcast_group(eng, [0, 1, 2, 3], 1 * MiB)
    with pytest.raises(ValueError, match="exactly 1048576 B"):
        g.send(512 * KiB)
    assert g.messages == []
    data = os.urandom(1 * MiB)
    msg = g.send(1 * MiB, data)
    sim.run()
    assert not msg.failed and all(g.received(r, 1 * MiB) == data for r in (1, 2, 3))


@pytest.mark.parametrize("kw, match", [
    ({"size": 1.5e6}, "size"),              # was reported as a bad block_size
    ({"size": 100, "small_limit": -1}, "small_limit"),
])
def test_mpi_plan_names_bad_arguments(kw, match):
    from protocols.rdmc.baselines import mpi_bcast_group

    _sim, eng = _engine()
    with pytest.raises(ValueError, match=f"^{match} must be"):
        mpi_bcast_group(eng, [0, 1, 2], **kw)
