"""RDMC used as a first-time user would, wrongly: every misuse found in the audit of
2026-11-25 is refused with an error naming the argument (or key), and never corrupts a
group, goes back in time or is silently ignored."""
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
