"""RCC's study (R1-R14): ``rnicsim reproduce rcc``'s scenarios, ``scenarios/rcc/``.

The default run loads every scenario (each declares claim checks, all of them validation
but the ten that RCC's framework CPU was fitted to: SmallBank's logged throughputs in
``fig15_logs_edr``) and runs a few at ``smoke`` size (3 nodes x 2 threads, seconds each)
for the orderings that size shows. Marked ``repro`` (``make test-all``):
every claim check of each scenario at ``demo`` size, split into the findings the model
reproduces (asserted to hold) and those it does not (``KNOWN_GAPS``: asserted to fail, so
a gap that closes makes the test fail until the list is updated; each gap's measured cause
is in docs/model.md, "RCC gaps").
"""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rnicsim.reproduce import available, scenario_files
from rnicsim.scenario import load_scenario
from scenario_points import check_findings, one_row, scenario_rows

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "rcc"
SCENARIOS = ["fig15_logs_edr", "fig15_logs_tpcc", "fig15_overall_edr", "fig15_overall_fdr",
             "fig17_coroutines", "fig17_logs_coroutines", "fig19_contention",
             "fig19_logs_contention", "fig20_computation", "fig20_logs_computation",
             "fig21_latency_breakdown", "fig21_logs_latency", "fig22_logs_emulated",
             "fig22_scale", "r13_mvcc_slots", "r14_nowait_batching",
             "table1_2_threads_msg_rate", "table2_msg_rate_no_sleep", "table3_tcp"]

# (scenario, size) -> notes of the claim checks the model does not reproduce (measured
# values and causes: docs/model.md, "RCC gaps"). 84 of the 451 validation checks at
# demo size, and 1 of the 52 calibration checks. Most come from three causes: the
# New-Order logic CPU fitted to DrTM+H, which makes the coordinators of RCC's logged
# TPC-C CPU-bound (its 20 throughput and latency checks); YCSB's usleep (each attempt holds its thread ~67 us, so at demo size every protocol's thread
# is sleep-bound and the differences RCC sees in network work shrink to ties);
# SmallBank's CPU-bound coordinators and one-sided NOWAIT's batched lock+read (one round
# trip, as cheap as OCC's read), where OCC's extra waits each last a round of the
# thread's other coroutines (RCC's own 4-node logs put one-sided OCC below the other
# one-sided forms on SmallBank).
KNOWN_GAPS: dict[tuple[str, str], set[str]] = {
    ("fig15_logs_edr", "demo"): {
        # YCSB RPC MVCC aborts 0.5% (RCC 3.6%): RCC's are timestamp refusals (2.5-2.7% of
        # attempts in its abort counters), inferred to come from per-coroutine counters
        # drifting apart over a run of seconds (its rate grows from epoch to epoch with
        # no contention); the model's symmetric threads and millisecond windows do not
        # drift (docs/model.md, RCC gaps)
        "YCSB RPC MVCC: 3.6% of attempts abort",
        # one-sided MVCC aborts 0.58% of YCSB attempts (RCC 1.4%, 0.71% needed) and RPC
        # SUNDIAL 0.43% (RCC 0.86%, 0.43% needed) at seed 1: a few dozen aborts in the
        # demo's window, sampling noise (seeds 2 and 3: 1.12% and 1.85%, 0.94% and 0.57%,
        # all holding)
        "YCSB one-sided MVCC: 1.4% of attempts abort",
        "YCSB RPC SUNDIAL: 0.9% of attempts abort",
        # stage means under load, 74 of 84 within 25%: one-sided OCC's YCSB log 0.53x
        # (0.72x with one coroutine, fig. 21), read 0.74x and lock 1.30x, its SmallBank
        # log 0.73x (a wait behind a round of the thread's other coroutines, fewer since
        # Balance validates as RCC's OCC does), one-sided MVCC's YCSB log 1.33x, one-sided
        # MVCC's and SUNDIAL's SmallBank commit 1.32x and 1.41x (5.2 us in RCC's logs, one
        # WRITE round trip behind a round of the other coroutines); one-sided NOWAIT's and
        # WAITDIE's SmallBank commit 1.25x (6.8-7.1 us
        # over seeds 1-3, 6.9 allowed) and WAITDIE's YCSB release 0.71x (28-31 us, 29.6
        # needed), both at the edge since the commit releases the read locks before the
        # write-back as RCC's one-sided commit does (with the write-back first, 6.3-6.8
        # and 30-35 us)
        "YCSB one-sided OCC: read stage 30.6 us per call under load (runs within 5%)",
        "YCSB one-sided OCC: lock stage 102.0 us per call under load (runs within 8%)",
        "YCSB one-sided OCC: log stage 19.8 us per call under load (runs within 3%)",
        "YCSB one-sided MVCC: log stage 29.1 us per call under load (runs within 6%)",
        "SmallBank one-sided OCC: log stage 8.9 us per call under load (runs within 5%)",
        "SmallBank one-sided MVCC: commit stage 5.2 us per call under load (runs within 3%)",
        "SmallBank one-sided SUNDIAL: commit stage 5.2 us per call under load (runs within 2%)",
        "SmallBank one-sided NOWAIT: commit stage 5.5 us per call under load (runs within 2%)",
        "SmallBank one-sided WAITDIE: commit stage 5.5 us per call under load (runs within 5%)",
        "YCSB one-sided WAITDIE: release stage 39.4 us per call under load (runs within 14%)",
    },
    ("fig15_logs_tpcc", "demo"): {
        # RCC's contended TPC-C (30 warehouses per node, districts shared by the
        # coroutines of neighbouring workers): the model's coordinators are CPU-bound
        # (cpu_util 0.997-1.000) on the New-Order logic fitted to DrTM+H (4 us + 4 us per
        # item), and commit 0.45-0.55x RCC's at 2.0-2.6x its median latency; with 1 us +
        # 1 us per item (a what-if) they commit 0.80-1.21x RCC's at 1.0-1.47x its latency
        # (RCC's protocols never insert the order lines, whose inserts DrTM+H's fit pays
        # for). Abort rates (within 10%) and wait calls per commit hold but for RPC
        # WAITDIE's, 0.90x: it aborts 85.7% of its attempts against 90.3%
        "TPC-C RPC NOWAIT: 224.4 K txns/s per node (runs within 7%)",
        "TPC-C one-sided NOWAIT: 256.8 K txns/s per node (runs within 6%)",
        "TPC-C RPC WAITDIE: 222.0 K txns/s per node (runs within 13%)",
        "TPC-C one-sided WAITDIE: 257.5 K txns/s per node (runs within 6%)",
        "TPC-C RPC OCC: 159.9 K txns/s per node (runs within 12%)",
        "TPC-C one-sided OCC: 209.3 K txns/s per node (runs within 9%)",
        "TPC-C RPC MVCC: 212.0 K txns/s per node (runs within 6%)",
        "TPC-C one-sided MVCC: 205.7 K txns/s per node (runs within 7%)",
        "TPC-C RPC SUNDIAL: 214.2 K txns/s per node (runs within 14%)",
        "TPC-C one-sided SUNDIAL: 263.2 K txns/s per node (runs within 8%)",
        "TPC-C RPC NOWAIT: median latency 294 us (runs within 1%)",
        "TPC-C one-sided NOWAIT: median latency 274 us (runs within 2%)",
        "TPC-C RPC WAITDIE: median latency 289 us (runs within 2%)",
        "TPC-C one-sided WAITDIE: median latency 275 us (runs within 2%)",
        "TPC-C RPC OCC: median latency 339 us (runs within 3%)",
        "TPC-C one-sided OCC: median latency 276 us (runs within 1%)",
        "TPC-C RPC MVCC: median latency 324 us (runs within 2%)",
        "TPC-C one-sided MVCC: median latency 350 us (runs within 2%)",
        "TPC-C RPC SUNDIAL: median latency 316 us (runs within 2%)",
        "TPC-C one-sided SUNDIAL: median latency 267 us (runs within 4%)",
        "TPC-C RPC WAITDIE: 35.42 round trips per commit (RCC's counter)",
    },
    ("fig15_overall_edr", "demo"): {
        "EDR: RPC MVCC above one-sided on SmallBank and TPC-C (the two exceptions)",
        # R2 (wait calls, RCC's counter): one-sided SUNDIAL waits 1.49x RPC's per commit
        # (RCC's own logs: 1.48x) and NOWAIT and WAITDIE 1.34x (1.34x), the READ before
        # each one-sided lock included
        "SmallBank: one-sided NOWAIT, WAITDIE, OCC, SUNDIAL 6-34% more round trips than RPC",
        # YCSB's one-sided forms are all sleep-bound: one-sided MVCC 0.98-1.01x the others
        "YCSB best: one-sided MVCC above one-sided OCC",
        "YCSB best: one-sided MVCC above one-sided SUNDIAL",
        "YCSB best: one-sided MVCC above one-sided NOWAIT",
        "YCSB best: one-sided MVCC above one-sided WAITDIE",
        # SmallBank, CPU-bound: one-sided OCC ties NOWAIT and WAITDIE (1.001x; one round
        # trip each for lock+read, OCC's validation a wait more); RCC's own 4-node logs have
        # one-sided OCC below every other one-sided form (1.45 M against 1.53-1.76 M)
        "SmallBank best: one-sided OCC above one-sided NOWAIT",
        "SmallBank best: one-sided OCC above one-sided WAITDIE",
    },
    ("fig17_coroutines", "demo"): {
        "SmallBank, 9+ coroutines: one-sided OCC above one-sided NOWAIT",
        "SmallBank, 9+ coroutines: one-sided OCC above one-sided WAITDIE",
        "YCSB: RPC NOWAIT, WAITDIE, OCC fall past their peak (17 below 9 coroutines)",
    },
    ("fig19_contention", "demo"): {
        # sleep-bound ties (docs/model.md): one-sided MVCC 0.992x SUNDIAL at one
        # contention level; at 1% hot picks one-sided OCC 1.014x MVCC and 1.006x SUNDIAL
        "one-sided: MVCC above SUNDIAL at every contention level",
        "least contention: one-sided OCC above one-sided MVCC",
        "least contention: one-sided OCC above one-sided SUNDIAL",
    },
    ("fig19_logs_contention", "demo"): {
        # RPC WAITDIE falls 1.74x by 99% hot picks (RCC 1.43x)
        "RPC WAITDIE: no hot picks / 99% hot picks = 1.43",
    },
    ("fig20_computation", "demo"): {
        "CALVIN: RPC and one-sided equal (within 5%) at every computation",
        # one-sided OCC ties WAITDIE at 64+ us (not the 2% below asked)
        "64+ us of computation: one-sided OCC below WAITDIE",
    },
    ("fig21_latency_breakdown", "demo"): {
        # stage means per call, timed as RCC's timers (docs/model.md, R10). RCC's own logs
        # (docs/data/rcc_stage_logs.csv) put RPC MVCC's read below OCC's and its lock
        # within 0.2 us of the others' (3.43-3.64 us); the model's RPC MVCC read 1.001x
        # SUNDIAL's, its lock 1.003x NOWAIT's and 1.013x SUNDIAL's (RCC's logs: 0.98x and
        # 1.01x)
        "RPC: MVCC read latency above OCC",
        "RPC: MVCC read latency above SUNDIAL",
        "RPC: MVCC lock latency above NOWAIT",
        "RPC: MVCC lock latency above WAITDIE",
        "RPC: MVCC lock latency above SUNDIAL",
    },
    ("fig22_logs_emulated", "demo"): {
        # the QP walk moves one-sided by 0.97x or more from 1 to 10 QPs (misses add
        # latency ten coroutines overlap), and up to 1.052x from 10 to 40
        "one-sided: per node drops from 1 to 10 QPs per peer (RCC: 1.023-1.093x)",
        "one-sided: from 10 to 40 QPs per peer under 5% more (RCC: 1.002-1.028x)",
    },
    ("fig22_scale", "demo"): {
        # MVCC leads SUNDIAL by 24-26% over RPC, by 2.7-2.9% one-sided (SUNDIAL renews
        # with RCC's READ and WRITE); RPC OCC drops 5.4% from 4 to 36 nodes (its reads
        # wait once per transaction, not once per peer; MVCC and SUNDIAL 12-13%)
        "RPC: MVCC above SUNDIAL by 9-12% at every size",
        "one-sided: MVCC above SUNDIAL by 9-12% at every size",
        "RPC: a large drop from 4 to 36 nodes (per node, 10% or more)",
        # one-sided OCC drops 3.2% from 4 to 36 nodes and 4.3% from 36 to 76, where its
        # NICs' QP contexts start to miss (MVCC and SUNDIAL: 7.2-7.3% first, 2.8-3.1% next)
        "one-sided: the drop from 4 to 36 nodes is each protocol's largest (per node)",
    },
    ("r14_nowait_batching", "demo"): {
        "one-sided NOWAIT, SmallBank: lock+read doorbell batching -22.7% latency (median)",
        # CPU-bound with RCC's framework CPU: batching saves a wait, not CPU
        "one-sided NOWAIT, SmallBank: lock+read doorbell batching +25.1% throughput",
    },
    ("table1_2_threads_msg_rate", "demo"): {
        # 1.95-2.06x: the model's threads scale linearly, RCC's 1.6-1.98x
        "RPC NOWAIT: 10 threads 1.69x 5 threads",
        "RPC WAITDIE: 10 threads 1.79x 5 threads",
        "one-sided WAITDIE: 10 threads 1.78x 5 threads",
        "one-sided OCC: 10 threads 1.76x 5 threads",
        "RPC OCC: 10 threads 1.75x 5 threads",
        "RPC MVCC: 10 threads 1.76x 5 threads",
        "RPC SUNDIAL: 10 threads 1.6x 5 threads",
        "RPC NOWAIT, 10 threads: 67.9 K txns/s per node",
        "RPC WAITDIE, 10 threads: 71.69 K txns/s per node",
        "RPC OCC, 10 threads: 48.09 K txns/s per node",
        "one-sided OCC, 10 threads: 84.53 K txns/s per node",
    },
    ("table2_msg_rate_no_sleep", "demo"): {
        # CPU-bound RPC threads post 1.9-2.7x table 2's rate (requests and replies; the
        # requests alone are about half): RCC's RPC path costs more CPU per message
        "RPC NOWAIT: 9.49 Mpps per node",
        "RPC WAITDIE: 9.25 Mpps per node",
        "RPC OCC: 9.75 Mpps per node",
        "RPC MVCC: 10.7 Mpps per node",
        "RPC SUNDIAL: 9.91 Mpps per node",
    },
    ("table3_tcp", "demo"): {
        "two-sided RDMA about an order of magnitude above TCP (RCC: 5.2-10.0x) for every protocol",
    },
    ("fig21_logs_latency", "demo"): {
        # calibration (the event-loop delay was fitted to the 42 stage means): one-sided
        # OCC's log 0.72x
        "one-sided OCC: log stage 3.07 us per call",
        # median latencies 1.26-1.28x RCC's: RPC NOWAIT 25.1 us, RPC MVCC 23.8 us and
        # one-sided MVCC 28.2 us (its latencies at one coroutine spread from 20 to 43 us; a
        # window of 290 commits put its median at 22.9, one of 520 at 28.2)
        "RPC NOWAIT: median latency 19.7 us with one coroutine",
        "RPC MVCC: median latency 18.9 us with one coroutine",
        "one-sided MVCC: median latency 22 us with one coroutine",
    },
}


def _rows(name: str, size: str, extra: list[str] | None = None):
    return scenario_rows(ROOT, name, size, extra)


def test_rcc_scenarios_declare_validation_checks_and_gaps_name_them():
    """``rnicsim reproduce rcc`` finds exactly the study's scenarios, each running RCC's
    framework (``protocol.framework: rcc``); the checks are validation but those of RCC's
    logs that the framework's two constants were fitted to (calibration): the ten
    SmallBank throughputs (CPU per attempt) and the 42 one-coroutine stage means per call
    (event-loop delay); every R1-R14 claim has a validation check; every KNOWN_GAPS note
    is the note of a check of its scenario. Loads only."""
    assert "rcc" in available()
    assert [f.stem for f in scenario_files("rcc")] == sorted(SCENARIOS)
    claims = set()
    calibration = []
    for name in SCENARIOS:
        sc = load_scenario(ROOT / f"{name}.yaml")
        assert sc.expected, name
        assert sc.protocol.framework == "rcc", name
        assert {c.role for c in sc.expected} <= {"validation", "calibration"}, name
        calibration += [(name, c.metric, c.where.get("workload.benchmark"))
                        for c in sc.expected if c.role == "calibration"]
        claims |= {c.claim for c in sc.expected if c.role == "validation"}
    assert calibration[:10] == [("fig15_logs_edr", "throughput_mtxns_per_node", "smallbank")] * 10
    assert len(calibration) == 52
    assert all(n == "fig21_logs_latency" and m.startswith("lat_") and m.endswith("_call_us")
               for n, m, _ in calibration[10:])
    assert claims == {f"R{i}" for i in range(1, 15)}
    for (name, size), notes in KNOWN_GAPS.items():
        sc = load_scenario(ROOT / f"{name}.yaml", [f"run.size={size}"])
        assert notes <= {c.note for c in sc.expected}, (name, notes - {c.note for c in sc.expected})


@pytest.mark.repro
@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_at_demo_size(name):
    """Every claim check outside KNOWN_GAPS holds at demo size; every gap still fails."""
    check_findings(ROOT, name, "demo", KNOWN_GAPS.get((name, "demo"), set()))


def test_every_rcc_scenario_file_loads_at_every_size():
    """The files beside the checked ones (RCC's emulation of fig. 22, the hybrid search's
    six protocols) load at each of their sizes; loads only."""
    whatif = sorted(p.stem for p in ROOT.glob("*.yaml") if p.stem not in SCENARIOS)
    assert whatif == ["fig22_emulated", "six_protocols"]
    for stem in whatif:
        p = ROOT / f"{stem}.yaml"
        for size in ("full", "demo", "smoke"):
            sc = load_scenario(p, [f"run.size={size}"])
            assert sc.workload.kind == "txn" and sc.run.size == size, p


# RCC's own hybrid sweep (docs/data/rcc_hybrid_logs.csv: every HYBRID_CODE of a protocol
# measured on its 4 EDR nodes x 10 threads, with the code of hybrid-cc's head) against
# ``rnicsim hybrid-search`` in the same set-up: (scenario, protocol, benchmark of the
# sweep, coroutines, least Spearman rank correlation of the throughputs over the codes
# both ran, whether RCC's scripted code must be within 1% of the model's best).
HYBRID = [
    # one coroutine, SmallBank: RCC's scripts' codes (28, 28, 28, 20) come out best or
    # tied for best (codes that differ in stages no committed transaction runs tie)
    ("fig21_logs_latency", "nowait", "bank", 1, 0.5, True),
    ("fig21_logs_latency", "waitdie", "bank", 1, 0.5, True),
    ("fig21_logs_latency", "mvcc", "bank", 1, 0.8, True),
    ("fig21_logs_latency", "sundial", "bank", 1, 0.6, True),
    # ten coroutines, YCSB: the codes rank as RCC measured them (rho 0.99 and 0.95)
    ("fig15_logs_edr", "nowait", "ycsb", 10, 0.9, False),
    ("fig15_logs_edr", "mvcc", "ycsb", 10, 0.85, False),
]


def _rcc_hybrid(benchmark: str, protocol: str, coroutines: int) -> dict[int, float]:
    path = ROOT.parents[1] / "docs" / "data" / "rcc_hybrid_logs.csv"
    with path.open() as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {int(r["hybrid_code"]): float(r["throughput_mtxns_per_node"]) for r in rows
                if (r["benchmark"], r["protocol"], int(r["coroutines"]))
                == (benchmark, protocol, coroutines)}


@pytest.mark.repro
@pytest.mark.parametrize("name,kind,benchmark,coroutines,rho_min,script_best", HYBRID)
def test_hybrid_search_ranks_codes_as_rccs_sweep_measured(tmp_path, capsys, name, kind,
                                                          benchmark, coroutines, rho_min,
                                                          script_best):
    """The search's throughput per hybrid code rank-correlates with RCC's measured sweep
    (Spearman rho >= rho_min over the codes both ran); at one coroutine RCC's scripted
    code is within 1% of the model's best."""
    from scipy.stats import spearmanr

    from protocols.txn.hybrid_search import RCC_CODES
    from rnicsim import cli

    bench = "smallbank" if benchmark == "bank" else benchmark
    out = tmp_path / "hs"
    assert cli.main(["hybrid-search", str(ROOT / f"{name}.yaml"), "--protocol", kind,
                     "--set", f"workload.benchmark={bench}", "--out", str(out),
                     "--quiet", "--rcc-sweep"]) == 0
    printed = capsys.readouterr().out
    assert "against RCC's measured sweep: Spearman rho" in printed
    with (out / "results.csv").open() as f:
        model = {int(r["protocol.hybrid_code"]): float(r["throughput_mtxns_per_node"])
                 for r in csv.DictReader(f)}
    rcc = _rcc_hybrid(benchmark, kind, coroutines)
    common = sorted(set(model) & set(rcc))
    assert len(common) >= 16, common
    rho = spearmanr([model[c] for c in common], [rcc[c] for c in common]).correlation
    assert rho >= rho_min, rho
    if script_best:
        assert model[RCC_CODES[(bench, kind)]] >= 0.99 * max(model.values()), model


# ------------------------------------------------------------------ default (smoke)
def test_r14_smoke_lock_read_batching():
    """One-sided NOWAIT on SmallBank (R14): posting the lock CAS and the record READ with
    one doorbell makes them one round trip, so a transaction needs at least one round trip
    fewer (2.86 against 4.13 at this size) and commits more."""
    _, rows = _rows("r14_nowait_batching", "smoke")
    on = one_row(rows, **{"protocol.lock_read_batch": True})
    off = one_row(rows, **{"protocol.lock_read_batch": False})
    assert on["round_trips_per_txn"] <= off["round_trips_per_txn"] - 1, (on, off)
    assert on["throughput_mtxns"] > off["throughput_mtxns"], (on, off)


def test_fig21_smoke_stage_latencies():
    """One coroutine on SmallBank (R10): one-sided MVCC's lock stage is the longest of the
    one-sided protocols (it locks and reads the whole multi-version tuple: 1.5-57x the
    others' here). RPC OCC's commit stage, 3-5% above the other RPC protocols' at demo
    size, is left to the demo-size check: at this size (about 60 commits a point) the
    order of such close stages is not settled."""
    _, rows = _rows("fig21_latency_breakdown", "smoke")

    def lat(kind, verbs, stage):
        return one_row(rows, **{"protocol.kind": kind, "protocol.verbs": verbs})[f"lat_{stage}_us"]
    others = ("nowait", "waitdie", "occ", "sundial")
    assert all(lat("mvcc", "one_sided", "lock") > 1.3 * lat(k, "one_sided", "lock")
               for k in others)


def test_table3_smoke_tcp_below_ud():
    """RPC over kernel TCP against RPC over UD (R11), OCC on YCSB: the kernel's CPU per
    message makes a TCP node commit under 0.75 of what UD's does (0.70 at smoke size,
    1/1.66 at demo size). RCC's 5-10x is a known gap (docs/model.md, "RCC gaps"): with
    YCSB's usleep, both forms' threads are bound by the ~67-us sleep plus their CPU, and
    the kernel's per-message CPU the profiles assume adds under 2x."""
    _, rows = _rows("table3_tcp", "smoke", ["sweep.protocol.kind=[occ]"])
    t = {r["protocol.rpc_transport"]: r["throughput_mtxns"] for r in rows}
    assert t["ud"] / t["tcp"] >= 1.33, t
