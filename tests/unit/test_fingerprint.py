"""Results fingerprint: one tiny point of every scenario kind gives exactly the stored rows.

Each case runs one short point (a workload kind, a protocol, a NIC profile or transmit
arbitration the hardware model treats differently) and hashes its results row: every
recorded metric's ``repr`` (the exact float), sorted by name (``COLUMNS``: metrics added
later are not covered, a metric removed fails the case; wall-clock columns never count). A
refactoring of the hardware model, the verbs facade or a protocol that keeps the same float
operations in the same order and the same event order keeps every hash; anything else
changes one. When a change of the model is meant to change results, record the new hashes
with ``python tests/unit/test_fingerprint.py`` and say in the commit why they moved.

The same hashes are the contract of the compiled core (``rnicsim.hw.COMPILED``): when this
process runs it, every case runs again in a child process with ``RNICSIM_PURE_PYTHON=1``
and must give the stored hash there too, so both builds give byte-identical results.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

# Keys of a results row that measure the simulator's own wall-clock time, not the model.
WALL_CLOCK = ("wall_s", "setup_s", "run_s")

_CX4_2 = {"nodes": 2, "nic": {"profile": "cx4-edr"}, "threads": 2}
_RUN = {"seed": 3, "warmup": "5us", "measure": "30us"}


def _scenario(cluster: dict, workload: dict, protocol: dict | None = None,
              run: dict | None = None) -> dict:
    raw: dict[str, Any] = {"version": 1, "name": "fingerprint", "cluster": cluster,
                           "workload": workload, "run": _RUN if run is None else run}
    if protocol is not None:
        raw["protocol"] = protocol
    return raw


def _with_nic(profile: str, **overrides: Any) -> dict:
    nic: dict[str, Any] = {"profile": profile}
    if overrides:
        nic["overrides"] = overrides
    return {**_CX4_2, "nic": nic}


def _mb(**kw: Any) -> dict:
    return {"kind": "microbench", "coroutines": 2, "outstanding": 2, **kw}


def _txn(bench: str, **kw: Any) -> dict:
    return {"kind": "txn", "benchmark": bench, "coroutines": 2, **kw}


_TXN_CLUSTER = {"nodes": 3, "nic": {"profile": "cx4-edr"}, "threads": 2}
_TXN_RUN = {"seed": 3, "warmup": "10us", "measure": "20us"}

# name -> raw scenario (one point; every kind, protocol family and arbitration the model
# treats differently)
SCENARIOS: dict[str, dict] = {
    "microbench_read": _scenario(_CX4_2, _mb(verb="read")),
    "microbench_write_inline_batch": _scenario(
        _CX4_2, _mb(verb="write", payload="32B", inline_max="63B", signal_every=2,
                    doorbell_batch=2)),
    "microbench_cas": _scenario(_CX4_2, _mb(verb="cas", payload="8B")),
    "microbench_faa_cx3_serial_atomics": _scenario(
        _with_nic("cx3-fdr"), _mb(verb="faa", payload="8B")),
    "microbench_rpc_ud": _scenario(_CX4_2, _mb(verb="rpc", doorbell_batch=4)),
    "microbench_send_rc": _scenario(_CX4_2, _mb(verb="send", transport="rc")),
    "microbench_rpc_write_imm": _scenario(_CX4_2, _mb(verb="rpc", transport="write_imm")),
    "microbench_write_uc_4k_pages": _scenario(
        _CX4_2, _mb(verb="write", transport="uc", payload="8KiB", page_size="4KiB")),
    "microbench_read_qpc_misses": _scenario(
        _with_nic("cx4-edr", **{"nic.qp_cache_entries": 2}),
        _mb(verb="read", qps_per_peer=3, payload="256B")),
    "microbench_read_shared_context_per_qp_cq": _scenario(
        _CX4_2, _mb(verb="read", shared_context=True, cq_layout="per_qp",
                    qp_choice="coroutine")),
    "microbench_read_large_packet_arbitration": _scenario(
        _with_nic("cx4-edr", **{"nic.tx_arbitration": "packet"}),
        _mb(verb="read", payload="16KiB")),
    "microbench_write_large_fifo_arbitration": _scenario(
        _with_nic("cx4-edr", **{"nic.tx_arbitration": "fifo"}),
        _mb(verb="write", payload="16KiB")),
    "microbench_write_large_message_arbitration": _scenario(
        _CX4_2, _mb(verb="write", payload="16KiB")),
    "microbench_read_roce_leaf_spine": _scenario(
        {"nodes": 4, "nic": {"profile": "cx4-roce-100g"}, "threads": 1,
         "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1}},
        _mb(verb="write", payload="4KiB")),
    "rpc_rc_handler": _scenario(
        _CX4_2, {"kind": "rpc", "transport": "rc", "coroutines": 2, "handler": "100ns"}),
    "rpc_ud_coalesce": _scenario(
        _CX4_2, {"kind": "rpc", "transport": "ud", "coroutines": 2, "coalesce": True}),
    "multiobj_read_one_sided": _scenario(
        _CX4_2, {"kind": "multiobj", "op": "read", "primitive": "one_sided",
                 "coroutines": 2, "outstanding": True}),
    "multiobj_write_two_sided_passive_ack": _scenario(
        _CX4_2, {"kind": "multiobj", "op": "write", "primitive": "two_sided",
                 "coroutines": 2, "outstanding": True, "doorbell": True,
                 "passive_ack": True}),
    "txn_smallbank_occ_drtmh": _scenario(
        _TXN_CLUSTER, _txn("smallbank", accounts_per_thread=200),
        {"kind": "occ", "preset": "drtmh"}, _TXN_RUN),
    "txn_smallbank_occ_fasst": _scenario(
        _TXN_CLUSTER, _txn("smallbank", accounts_per_thread=200),
        {"kind": "occ", "preset": "fasst"}, _TXN_RUN),
    "txn_tpcc_occ_farm": _scenario(
        _TXN_CLUSTER, _txn("tpcc"), {"kind": "occ", "preset": "farm"}, _TXN_RUN),
    "txn_tpce_occ_drtmr": _scenario(
        _TXN_CLUSTER, _txn("tpce", customers_per_thread=50, securities_per_node=40),
        {"kind": "occ", "preset": "drtmr"}, _TXN_RUN),
    # RCC's protocols: YCSB's usleep (the sleeping thread, its C-state exit), an RPC form,
    # CALVIN's sequencer and scheduler
    "txn_ycsb_mvcc_one_sided_sleep": _scenario(
        _TXN_CLUSTER, _txn("ycsb", ycsb_records_per_thread=1000,
                            ycsb_hot_records_per_thread=150),
        {"kind": "mvcc", "verbs": "one_sided"}, _TXN_RUN),
    "txn_smallbank_sundial_rpc": _scenario(
        _TXN_CLUSTER, _txn("smallbank", accounts_per_thread=200),
        {"kind": "sundial", "verbs": "rpc"}, _TXN_RUN),
    "txn_ycsb_calvin_rpc": _scenario(
        _TXN_CLUSTER, _txn("ycsb", ycsb_records_per_thread=1000,
                            ycsb_hot_records_per_thread=150),
        {"kind": "calvin", "verbs": "rpc"}, _TXN_RUN),
    "remote_read_intr_background": _scenario(
        {"nodes": 3, "nic": {"profile": "cx3-roce-10g"}},
        {"kind": "remote_read", "method": "read_intr", "clients": 1, "server_procs": 1,
         "window": 2, "background_flows": 1, "background_size": "64KiB"},
        run={"seed": 3, "warmup": "10us", "measure": "300us"}),
    "remote_read_send_send": _scenario(
        {"nodes": 2, "nic": {"profile": "cx3-roce-10g"}},
        {"kind": "remote_read", "method": "send_send_intr", "clients": 1,
         "server_procs": 1, "window": 2},
        run={"seed": 3, "warmup": "10us", "measure": "40us"}),
    "incast_dcqcn": _scenario(
        {"nodes": 6, "nic": {"profile": "cx4-roce-100g"}},
        {"kind": "incast", "senders": 4, "payload": "64KiB", "outstanding": 4,
         "dcqcn": True},
        run={"seed": 3, "warmup": "20us", "measure": "200us"}),
    "rdmc_binomial_pipeline": _scenario(
        {"nodes": 4, "nic": {"profile": "cx4-edr"}},
        {"kind": "rdmc", "group_size": 4, "message": "256KiB", "block": "64KiB"},
        run={"seed": 3}),
    "rdmc_sequential_interrupt": _scenario(
        {"nodes": 3, "nic": {"profile": "cx4-edr"}},
        {"kind": "rdmc", "algorithm": "sequential", "group_size": 3, "message": "128KiB",
         "block": "32KiB", "completion": "interrupt"},
        run={"seed": 3}),
}


def _perftest(argv: list[str]) -> Callable[[], dict[str, float]]:
    def run() -> dict[str, float]:
        from rnicsim.profile import load_profile
        from workloads.perftest import parse_args, run_bw, run_lat

        a, _ = parse_args(argv)
        prof = load_profile(a.nic)
        f = run_lat if a.tool.endswith("_lat") else run_bw
        return f(a, prof, a.size, a.iters)
    return run


def _behind() -> dict[str, float]:
    from rnicsim.profile import load_profile
    from workloads.perftest import run_behind

    return {"lat_p50_us": run_behind(load_profile("cx4-edr"), 64 * 1024, 20)}


# name -> a function returning a results row (perftest's tools are not scenario kinds)
PERFTEST: dict[str, Callable[[], dict[str, float]]] = {
    "perftest_read_lat": _perftest(["ib_read_lat", "-s", "64", "-n", "50"]),
    "perftest_send_lat_ud": _perftest(["ib_send_lat", "-c", "UD", "-s", "32", "-n", "50"]),
    "perftest_write_bw": _perftest(["ib_write_bw", "-s", "4096", "-n", "200", "-q", "2"]),
    "perftest_atomic_bw_cx3": _perftest(["ib_atomic_bw", "-n", "100", "--nic", "cx3-fdr"]),
    "perftest_behind_64k": _behind,
}

# Metric columns each case's fingerprint covers, by kind of results row: the columns the
# model had when the hashes were recorded. A column added later is not covered (it
# cannot change an existing one); a column that goes away fails the case.
COLUMNS: dict[str, tuple[str, ...]] = {
    "incast": ("cnps", "ecn_marks", "headroom_overflow", "incast_gbps", "pause_frames",
               "pause_time_us", "victim_alone_us", "victim_lat_p99_us", "victim_lat_us",
               "victim_slowdown"),
    "microbench": ("bandwidth_gbps", "cpu_util", "lat_p50_us", "lat_p90_us", "lat_p999_us",
                   "lat_p99_us", "measure_us", "nic_pu_util", "nic_pu_util_max",
                   "pcie_util_max", "qpc_miss_rate", "throughput_mops",
                   "throughput_mops_total", "wire_util_max"),
    "microbench_roce": ("bandwidth_gbps", "cnps", "cpu_util", "ecn_marks",
                        "headroom_overflow", "lat_p50_us", "lat_p90_us", "lat_p999_us",
                        "lat_p99_us", "measure_us", "nic_pu_util", "nic_pu_util_max",
                        "pause_frames", "pause_time_us", "pcie_util_max", "qpc_miss_rate",
                        "throughput_mops", "throughput_mops_total", "wire_util_max"),
    "multiobj": ("cpu_util", "lat_p50_us", "lat_p90_us", "lat_p99_us", "measure_us",
                 "nic_pu_util", "nic_pu_util_max", "pcie_util_max", "step",
                 "throughput_mops_per_node", "throughput_mtxns",
                 "throughput_mtxns_per_node", "wire_util_max"),
    "perftest_behind": ("lat_p50_us",),
    "perftest_bw": ("bw_avg", "bw_peak", "msg_rate_mpps"),
    "perftest_lat": ("p99", "p999", "t_avg", "t_max", "t_min", "t_stdev", "t_typical"),
    "rdmc": ("bandwidth_gbps", "completion_ms", "cpu", "cpu_root", "skew_ms", "total_ms"),
    "remote_read": ("background_gbps", "bandwidth_gbps", "cnps", "cpu_client",
                    "cpu_server", "ecn_marks", "headroom_overflow", "lat_excess_us",
                    "lat_mean_us", "lat_p50_us", "lat_p90_us", "lat_p99_us", "nic_pu_util",
                    "nic_pu_util_max", "pause_frames", "pause_time_us", "pcie_util_max",
                    "throughput_mops", "wire_util_max"),
    "rpc": ("cpu_util", "lat_p50_us", "lat_p90_us", "lat_p99_us", "measure_us",
            "nic_pu_util", "nic_pu_util_max", "pcie_util_max", "throughput_mops",
            "throughput_mops_total", "wire_util_max"),
    # the metrics every protocol reports (stages differ by protocol)
    "txn_cc": ("abort_rate", "committed", "cpu_util", "lat_commit_us", "lat_p50_us",
               "lat_p90_us", "lat_p99_us", "measure_us", "msg_rate_mpps", "nic_pu_util",
               "nic_pu_util_max", "pcie_util_max", "qpc_miss_rate", "round_trips_per_txn",
               "throughput_mtxns", "throughput_mtxns_per_node", "wire_util_max"),
    "txn": ("abort_rate", "committed", "cpu_util", "lat_commit_us", "lat_exec_us",
            "lat_log_us", "lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_validate_us",
            "measure_us", "nic_pu_util", "nic_pu_util_max", "pcie_util_max",
            "qpc_miss_rate", "round_trips_per_txn", "throughput_mtxns",
            "throughput_mtxns_per_node", "wire_util_max"),
}

# name -> (its COLUMNS key, the hash of those columns). Recorded from the model as it is;
# see the module doc.
EXPECTED: dict[str, tuple[str, str]] = {
    "incast_dcqcn": ("incast", "17fb288b87b59fa1"),
    "microbench_cas": ("microbench", "b1cbd7c2eddbe6f0"),
    "microbench_faa_cx3_serial_atomics": ("microbench", "2a7fdecc873b5348"),
    "microbench_read": ("microbench", "39108b9e34020acf"),
    "microbench_read_large_packet_arbitration": ("microbench", "f52996733ae68d95"),
    "microbench_read_qpc_misses": ("microbench", "e34a73c3ce568e50"),
    "microbench_read_roce_leaf_spine": ("microbench_roce", "1f623682d8fd4c05"),
    "microbench_read_shared_context_per_qp_cq": ("microbench", "51826bb87b4b456a"),
    "microbench_rpc_ud": ("microbench", "f9963c3d1bb33e90"),
    "microbench_rpc_write_imm": ("microbench", "bb99a19b62e87008"),
    "microbench_send_rc": ("microbench", "83008dc4dc876767"),
    "microbench_write_inline_batch": ("microbench", "44241fe60a699d1f"),
    "microbench_write_large_fifo_arbitration": ("microbench", "ae062b3c04efd5b5"),
    "microbench_write_large_message_arbitration": ("microbench", "3751bea2ac363394"),
    "microbench_write_uc_4k_pages": ("microbench", "98eeaedbf12d7d78"),
    "multiobj_read_one_sided": ("multiobj", "bd28e65a80425e52"),
    "multiobj_write_two_sided_passive_ack": ("multiobj", "ee6ae7a2f3eba42d"),
    "rdmc_binomial_pipeline": ("rdmc", "7f1f33a5e32b9ede"),
    "rdmc_sequential_interrupt": ("rdmc", "8a177f0c49d20d5f"),
    "remote_read_intr_background": ("remote_read", "035f5a8ae80be06d"),
    "remote_read_send_send": ("remote_read", "2b6c7cb59d4bc344"),
    "rpc_rc_handler": ("rpc", "af28ed550b8089d5"),
    "rpc_ud_coalesce": ("rpc", "f5f3b15127967390"),
    "txn_smallbank_occ_drtmh": ("txn", "ae70e981bcd6de55"),
    "txn_smallbank_occ_fasst": ("txn", "84421daa4c59d76f"),
    "txn_tpcc_occ_farm": ("txn", "a494b8ca8e2ad461"),
    "txn_tpce_occ_drtmr": ("txn", "8db8620ab75998ea"),
    "txn_ycsb_mvcc_one_sided_sleep": ("txn_cc", "82a6ef7246ce66b5"),
    "txn_smallbank_sundial_rpc": ("txn_cc", "1eb2a05a9dd3b46b"),
    "txn_ycsb_calvin_rpc": ("txn_cc", "da23bb3051986301"),
    "perftest_atomic_bw_cx3": ("perftest_bw", "c7d697a145513e4e"),
    "perftest_behind_64k": ("perftest_behind", "f67717c21de2ab0d"),
    "perftest_read_lat": ("perftest_lat", "33af0b05ea79bd35"),
    "perftest_send_lat_ud": ("perftest_lat", "4de197e88bfb600a"),
    "perftest_write_bw": ("perftest_bw", "7c4a3d985d577caa"),
}


def fingerprint(row: dict[str, Any], columns: tuple[str, ...] | None = None) -> str:
    """SHA-256 (first 16 hex digits) of a results row: ``name=repr(value)`` lines in name
    order over ``columns`` (default: every column but the wall-clock ones). ``repr`` of a
    float is exact, so any change of the last bit of any metric changes the hash.
    KeyError for a column the row lacks."""
    if columns is None:
        columns = tuple(k for k in row if k not in WALL_CLOCK and not k.startswith("_"))
    lines = [f"{k}={row[k]!r}" for k in sorted(columns)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def run_case(name: str) -> dict[str, Any]:
    """The results row of case ``name``."""
    if name in PERFTEST:
        return PERFTEST[name]()
    from rnicsim.runner import run_point
    from rnicsim.scenario import resolve

    return run_point(resolve(SCENARIOS[name], f"<fingerprint {name}>"))


CASES = sorted(SCENARIOS) + sorted(PERFTEST)


def test_every_workload_kind_has_a_case():
    """Every workload kind rnicsim ships has at least one fingerprint case (rdmc_study
    runs the rdmc engine, which the rdmc cases cover). Kinds a scenario's own plugin
    registered in this process (other tests do) are not rnicsim's."""
    from rnicsim.scenario import _WORKLOAD_RUNNERS, _load_plugins

    _load_plugins()
    shipped = {k for k, runner in _WORKLOAD_RUNNERS.items()
               if runner.split(".")[0] in ("rnicsim", "protocols", "workloads")}
    kinds = {raw["workload"]["kind"] for raw in SCENARIOS.values()}
    assert shipped - {"rdmc_study"} <= kinds


@pytest.mark.parametrize("name", CASES)
def test_results_fingerprint(name):
    """The case's results row has every recorded column, and they hash to the stored
    value."""
    group, expected = EXPECTED[name]
    row = run_case(name)
    assert [c for c in COLUMNS[group] if c not in row] == [], name
    assert fingerprint(row, COLUMNS[group]) == expected, name


def _pure_python_hashes(names: list[str]) -> tuple[str, dict[str, str]]:
    """(build, {case: hash}) of cases ``names`` computed by this file run as a script in a
    child process with ``RNICSIM_PURE_PYTHON=1``."""
    env = {**os.environ, "RNICSIM_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, __file__, *names], env=env, capture_output=True,
                         text=True, timeout=600, check=True).stdout
    build = re.search(r"^# build: (\S+)$", out, re.M)
    assert build, out
    return build.group(1), dict(re.findall(r'^    "(\w+)": \("\w+", "([0-9a-f]+)"\)', out,
                                           re.M))


# The differential test runs the cases in a few child processes (one start-up each).
_PURE_GROUPS = [CASES[i::4] for i in range(4)]


@pytest.mark.parametrize("names", _PURE_GROUPS, ids=[f"group{i}" for i in range(4)])
def test_pure_python_build_gives_the_same_hashes(names):
    """Under the compiled core, the pure-Python build gives every case's stored hash too
    (the differential test; skipped when this process runs pure Python already, which
    test_results_fingerprint then checks)."""
    import rnicsim.hw

    if rnicsim.hw.PURE_PYTHON:
        pytest.skip("this process runs the pure-Python model already")
    assert _pure_python_hashes(names) == ("pure-python", {n: EXPECTED[n][1] for n in names})


def test_fingerprint_sees_the_last_bit_and_ignores_wall_clock():
    """One ulp in one metric changes the hash; the wall-clock columns do not count, nor
    do columns outside the ones given."""
    row = {"throughput_mops": 1.0, "lat_p50_us": 2.5, "wall_s": 0.3}
    same = {"lat_p50_us": 2.5, "throughput_mops": 1.0, "wall_s": 9.9}
    ulp = {"throughput_mops": 1.0000000000000002, "lat_p50_us": 2.5, "wall_s": 0.3}
    assert fingerprint(row) == fingerprint(same)
    assert fingerprint(row) != fingerprint(ulp)
    wider = {**row, "abort_rate_lock": 0.5}
    assert fingerprint(wider, ("lat_p50_us", "throughput_mops")) == fingerprint(row)


def test_every_case_has_a_stored_hash_over_known_columns():
    """Each case has an entry in EXPECTED naming a COLUMNS key, and nothing else does."""
    assert sorted(EXPECTED) == sorted(CASES)
    assert {g for g, _ in EXPECTED.values()} <= set(COLUMNS)


if __name__ == "__main__":   # print the hashes of the model as it is, to paste above
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import time

    import rnicsim.hw

    print(f"# build: {'pure-python' if rnicsim.hw.PURE_PYTHON else 'compiled'}", flush=True)
    for case in (sys.argv[1:] or CASES):
        t = time.perf_counter()
        group = EXPECTED[case][0] if case in EXPECTED else "?"
        row = run_case(case)
        h = fingerprint(row, COLUMNS.get(group))
        print(f'    "{case}": ("{group}", "{h}"),   # {time.perf_counter() - t:.2f} s',
              flush=True)
