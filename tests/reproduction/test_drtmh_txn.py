"""DrTM+H transaction-layer findings (D8, D10-D22, D24) from mechanism.

The default run checks, at the scenarios' ``smoke`` size (3 nodes x 4 threads, a few
points, seconds each), the orderings that size can show. Marked ``repro`` (``make
test-all``): every claim check of each scenario at ``demo`` size (4 nodes x 24 threads,
about 1-2 minutes per scenario) and, for the scenarios in ``FULL``, at full size (16
nodes, fig. 14 about 10 minutes), split into the findings the model reproduces (asserted)
and those it does not (``KNOWN_GAPS``: asserted to fail, so a gap that closes makes the
test fail until the list is updated).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from rnicsim.scenario import load_scenario
from scenario_points import check_findings, one_row, scenario_rows

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh"
SCENARIOS = ["fig3b_rpc_transports", "fig7_execution", "fig8_validation", "fig9_commit",
             "fig10_logging", "fig11_readonly", "fig12_scaling", "fig13_factors",
             "fig14_end_to_end", "fig14_as_released", "fig15_latency_breakdown", "fig17_cx3",
             "fig19_roce", "fig21_cx5", "fig16_cx3_multi_object", "fig18_roce_multi_object",
             "fig20_cx5_multi_object"]
FULL = ["fig3b_rpc_transports", "fig6_multi_object",   # measured at full size
        "fig9_commit", "fig10_logging", "fig11_readonly", "fig14_end_to_end",
        "fig14_as_released", "fig15_latency_breakdown", "fig7_execution",
        "fig8_validation", "fig12_scaling", "fig13_factors",
        "fig17_cx3", "fig19_roce", "fig21_cx5",
        # their demo size is the full cluster (2 or 5 nodes)
        "fig16_cx3_multi_object", "fig18_roce_multi_object", "fig20_cx5_multi_object"]

_D18_UP_TO = {"TPC-C: DrTM+H up to 2.96x FaSST", "TPC-C: DrTM+H up to 1.89x DrTM+R",
              "TPC-C: DrTM+H up to 2.50x FaRM"}
_CX3_MULTI = {
    "CX3 reads: one-sided no faster than two-sided at equal round trips (two-sided above)",
    "CX3 writes without passive ACK: one-sided no faster (two-sided above)"}
_ROCE_PA = "RoCE writes with passive ACK: two-sided above one-sided"
# (scenario, size) -> notes of the claim checks the model does not reproduce (measured
# values and causes: the comments below, the scenario files and docs/model.md).
KNOWN_GAPS: dict[tuple[str, str], set[str]] = {
    # fig. 6 at 16 nodes: the READ peak holds (7.87 M txns/s per machine, published 8.43),
    # the one-sided coroutine gain (6.34x, 7x) and one-sided reads above two-sided at every
    # step (1.048; 0.983 if two-sided reads could take PCIe beyond its rate). Two-sided
    # coroutine gain 5.09x (6.46x); passive ACK 1.15x one-sided (1.13x, to which the
    # ConnectX-4 WRITE split is fitted) and 1.70x two-sided (1.96x): the UD RPCs of that
    # step are PCIe-bound (docs/model.md, PCIe), so with passive ACK two-sided writes reach
    # 0.93 of one-sided, where the paper has them ahead; at demo size (4 nodes) they are
    # ahead (1.11).
    ("fig6_multi_object", "full"): {
        "two-sided: +coroutines over baseline (mean of reads, writes)",
        "two-sided writes: +passive ACK over +doorbell (nearly 2x)",
        "writes with passive ACK: the only case two-sided wins"},
    # At 2 coroutines per thread on 16 nodes RC's single-WQE BlueFlame posts beat UD's
    # doorbell lists, whose WQEs the NIC fetches by DMA before the payload (UD 0.87x RC):
    # the fitted 280-ns PCIe latency (an assumed 200 ns let UD win) makes the extra round
    # trip count.
    ("fig3b_rpc_transports", "full"): {"UD SEND/RECV above RC SEND/RECV at every load",
                                       "UD SEND/RECV above RC WRITE-with-IMM at every load"},
    # Two-sided over uncached one-sided: TPC-C 0.97 (published 1.28x), SmallBank 1.31 (2.01x).
    ("fig7_execution", "demo"): {
        "TPC-C: two-sided up to 1.28x one-sided without cache",
        "SmallBank: two-sided up to 2.01x one-sided without cache"},
    # The same two at 16 nodes: 0.979 and 1.34; the other four hold.
    ("fig7_execution", "full"): {
        "TPC-C: two-sided up to 1.28x one-sided without cache",
        "SmallBank: two-sided up to 2.01x one-sided without cache"},
    # At 16 nodes SmallBank's one-sided CAS+READ validation reaches 0.958 of the lock RPC
    # (0.948 at demo size); TPC-C's win holds (1.036).
    ("fig8_validation", "full"): {"SmallBank: one-sided CAS+READ validation wins"},
    # One-sided CAS+READ validation 1.009 (TPC-C, a tie within the 2% a win needs) and
    # 0.948 (SmallBank) of the lock RPC.
    ("fig8_validation", "demo"): {"TPC-C: one-sided CAS+READ validation wins",
                                  "SmallBank: one-sided CAS+READ validation wins"},
    # With passive ACK two-sided commit reaches 0.962 (TPC-C) and 0.940 (SmallBank) of
    # one-sided. Without it one-sided wins SmallBank (1.121) and ties TPC-C (0.998, where
    # 1.02 is asked): an attempt that read a record its lock then finds locked runs to the
    # lock stage before it aborts, as DrTM+H's code does, and TPC-C's threads are
    # CPU-bound, so the commit handlers one-sided commit spares weigh less.
    ("fig9_commit", "demo"): {"TPC-C, passive ACK: two-sided commit wins",
                              "SmallBank, passive ACK: two-sided commit wins",
                              "TPC-C, no passive ACK: one-sided commit wins"},
    # At 16 nodes: with passive ACK two-sided commit reaches 0.968 (TPC-C) and 0.942
    # (SmallBank) of one-sided; without it one-sided wins both (1.027 and 1.105).
    ("fig9_commit", "full"): {"TPC-C, passive ACK: two-sided commit wins",
                              "SmallBank, passive ACK: two-sided commit wins"},
    # At 4 nodes a transaction logs to at most 3 machines, so the RPC handlers that
    # one-sided logging spares are few: TPC-C 1.046x, SmallBank 0.963x. At 16 nodes (full
    # size) TPC-C gains 1.109x (1.29x, within the 15% asked) and SmallBank 1.16x: both
    # hold.
    ("fig10_logging", "demo"): {"TPC-C: one-sided logging up to 1.29x",
                                "SmallBank: one-sided logging up to 1.12x"},
    # 80-node connections cost TPC-C/no 0.2% (0.998 of 1 QP per peer; within 5% of the
    # published 0.95 asks 0.9975 at most) and SmallBank nothing (1.079; published 0.91;
    # docs/model.md, RNIC, "Many QPs"), and SmallBank's p99 is 0.77 of FaSST's (0.51).
    ("fig12_scaling", "demo"): {"80-node connections cost TPC-C/no ~5%",
                                "80-node connections cost SmallBank ~9%",
                                "SmallBank p99 latency 49% below pure two-sided"},
    # At 16 nodes: SmallBank's per-node throughput falls from 2 to 16 nodes (9.9 -> 7.9
    # M, spread 0.20 from 4 nodes up): more distinct machines per transaction (log
    # targets are the union of backups); TPC-C/no's stays within the check's spread with
    # commit-counted windows. 80-node connections cost TPC-C nothing (1.009; ~5%
    # published) and SmallBank 0.3% (0.997; 9% published); DrTM+H SmallBank is 1.02x pure
    # two-sided FaSST, p99 1.01 of it.
    ("fig12_scaling", "full"): {
        "SmallBank scales linearly (per-node throughput flat from 3-4 nodes up)",
        "80-node connections cost TPC-C/no ~5%",
        "80-node connections cost SmallBank ~9%",
        "SmallBank at 80-node connections still 1.3x pure two-sided",
        "SmallBank p99 latency 49% below pure two-sided"},
    # DrTM+H over FaSST / DrTM+R / FaRM up to 1.72 / 1.25 / 1.76 (2.96 / 1.89 / 2.50),
    # FaRM/FaSST 0.976, SmallBank 9.91 M per node (5.65).
    # DrTM+H/DrTM+R from 0.945 (published from 1.12x); FaSST/FaRM on SmallBank 1.31 at one
    # coroutine, 1.01 at 8 (comparable within 20% at every count, as the paper's figure).
    ("fig14_end_to_end", "demo"): _D18_UP_TO | {
        "DrTM+H SmallBank 90.4 M txns/s on 16 nodes = 5.65 M per node",
        "TPC-C: FaRM > FaSST",
        "TPC-C: DrTM+H above DrTM+R at every coroutine count (from 1.12x)",
        "SmallBank: FaSST comparable to FaRM"},
    # At 16 nodes: DrTM+H over FaSST / DrTM+R / FaRM up to 1.54 / 1.29 / 1.77 (2.96 /
    # 1.89 / 2.50); DrTM+H/DrTM+R from 0.982 (published from 1.12x); FaRM/FaSST 0.85,
    # SmallBank 7.89 M per node (5.65), FaSST/FaRM on SmallBank 1.44 at one coroutine.
    ("fig14_end_to_end", "full"): _D18_UP_TO | {
        "DrTM+H SmallBank 90.4 M txns/s on 16 nodes = 5.65 M per node",
        "TPC-C: FaRM > FaSST",
        "TPC-C: DrTM+H above DrTM+R at every coroutine count (from 1.12x)",
        "SmallBank: FaSST comparable to FaRM"},
    # DrTM+H over FaSST up to 3.26 (published 2.96x, holds: FaSST aborts most of its
    # attempts at 16 coroutines), over DrTM+R up to 1.28 (1.89x) and over FaRM up to 1.72
    # (2.50x), both at one coroutine; DrTM+H/DrTM+R from 0.998 (from 1.12x); FaRM/FaSST
    # 1.007 at one coroutine, a tie.
    ("fig14_as_released", "demo"): {"TPC-C: DrTM+H up to 1.89x DrTM+R",
                                    "TPC-C: DrTM+H up to 2.50x FaRM",
                                    "TPC-C: DrTM+H above DrTM+R at every coroutine count",
                                    "TPC-C: FaRM > FaSST"},
    ("fig14_as_released", "full"): {"TPC-C: DrTM+H up to 1.89x DrTM+R",
                                    "TPC-C: DrTM+H up to 2.50x FaRM",
                                    "TPC-C: DrTM+H above DrTM+R at every coroutine count",
                                    "TPC-C: FaRM > FaSST"},
    # Logging latency, worst over coroutines: DrTM+R/FaSST 0.76 (published 0.31),
    # FaRM/FaSST 0.40 (0.25).
    ("fig15_latency_breakdown", "demo"): {"DrTM+R logging latency ~69% below FaSST",
                                          "FaRM logging latency ~75% below FaSST"},
    # At 16 nodes the two-sided log RPC costs FaSST little more than a WRITE:
    # DrTM+R/FaSST up to 0.94 (published 0.31), FaRM/FaSST up to 0.65 (0.25).
    ("fig15_latency_breakdown", "full"): {"DrTM+R logging latency ~69% below FaSST",
                                          "FaRM logging latency ~75% below FaSST"},
    # ConnectX-3 multi-object: one-sided 1.6x two-sided (0.62), where DrTM+H sec. 7 finds
    # one-sided no faster on ConnectX-3.
    ("fig16_cx3_multi_object", "demo"): _CX3_MULTI,
    ("fig16_cx3_multi_object", "full"): _CX3_MULTI,
    # RoCE, 256-B objects: with passive ACK both primitives run at ~92% of line rate, and
    # two-sided is 0.99 of one-sided.
    ("fig18_roce_multi_object", "demo"): {_ROCE_PA},
    ("fig18_roce_multi_object", "full"): {_ROCE_PA},
    # FaSST/FaRM 1.012 on SmallBank (a tie, not the win over FaRM the paper reports) and
    # 0.988 on TPC-C; on TPC-C DrTM+R is 0.95 of the next slowest, not the slowest.
    # DrTM+H with lock RPCs (drtmh-rpc-lock, its ConnectX-3 form) is 1.04 of FaSST on
    # TPC-C (holds).
    ("fig17_cx3", "demo"): {"CX3 TPC-C: DrTM+R slowest (atomics stall the NIC)",
                            "CX3 SmallBank: FaSST above FaRM (best prior design)",
                            "CX3 TPC-C: FaSST above FaRM (best prior design)"},
    # At full size (5 nodes x 24 threads) DrTM+R is 0.90 of the next slowest on TPC-C,
    # and on SmallBank the next slowest design reaches only 1.01x DrTM+R: a tie within
    # the 2% a win needs. FaSST/FaRM is 1.026 on TPC-C and 1.26 on SmallBank (both hold).
    # On TPC-C DrTM+H with lock RPCs is 0.982 of FaSST at 8 coroutines.
    ("fig17_cx3", "full"): {"CX3 TPC-C: DrTM+R slowest (atomics stall the NIC)",
                            "CX3 SmallBank: DrTM+R slowest (atomics stall the NIC)",
                            "CX3 TPC-C: DrTM+H still best"},
    # At full size (2 nodes x 24 threads, 1 and 8 coroutines) DrTM+H leads on TPC-C at
    # one coroutine but falls from 1 to 8 (RoCE 0.86 -> 0.81 M, ConnectX-5 0.46 -> 0.40
    # M), to 0.91 and 0.89 of DrTM+R at 8 (1.13 and 1.24 of FaSST, which hold): 0.17-0.20
    # of its attempts abort against DrTM+R's 0.09, for the cause found at demo size
    # (below).
    ("fig19_roce", "full"): {"RoCE TPC-C: DrTM+H above DrTM+R (as on CX4)"},
    ("fig21_cx5", "full"): {"CX5 TPC-C: DrTM+H above DrTM+R (as on CX4)"},
    # At demo size (2 nodes x 8 threads, 8 coroutines) DrTM+H commits 0.90 of DrTM+R on
    # RoCE and 0.94 on ConnectX-5 (1.13 and 1.11 of FaSST): 0.19 of its attempts abort
    # against DrTM+R's 0.11, at the lock stage, on stock records another transaction
    # holds. An attempt that read such a record runs its whole body before its lock meets
    # the holder, as in DrTM+H's code. Without passive ACK (protocol.passive_ack false)
    # DrTM+H aborts 0.15 and commits 0.95 of DrTM+R on RoCE; with reads that abort on a
    # locked record (protocol.locked_read_aborts true) 0.995.
    ("fig19_roce", "demo"): {"RoCE TPC-C: DrTM+H above DrTM+R (as on CX4)"},
    ("fig21_cx5", "demo"): {"CX5 TPC-C: DrTM+H above DrTM+R (as on CX4)"},
}


def _rows(name: str, size: str, extra: list[str] | None = None):
    return scenario_rows(ROOT, name, size, extra)


_value = one_row


# ------------------------------------------------------------------ default (smoke)
def test_fig14_smoke_orderings():
    """One coroutine, TPC-C/no: DrTM+H > DrTM+R > FaRM, and FaRM within 15% of FaSST
    (they tie at one coroutine: "FaRM > FaSST" is a known gap at demo size); SmallBank:
    DrTM+H > FaSST."""
    _, rows = _rows("fig14_end_to_end", "smoke")
    t = {p: _value(rows, **{"workload.benchmark": "tpcc", "protocol.preset": p})
         ["throughput_mtxns"] for p in ("drtmh", "drtmr", "farm", "fasst")}
    assert t["drtmh"] > t["drtmr"] > t["farm"], t
    assert abs(t["farm"] / t["fasst"] - 1) < 0.15, t
    s = {p: _value(rows, **{"workload.benchmark": "smallbank", "protocol.preset": p})
         ["throughput_mtxns"] for p in ("drtmh", "fasst")}
    assert s["drtmh"] > s["fasst"], s


def test_fig14_as_released_smoke_only_fasst_aborts():
    """As the released code ran (NO_ABORT, FaSST's abort deferred to commit, random
    districts): the OCC designs never abort; FaSST aborts on its thread's district and
    stock locks after running each body, and at 8 coroutines falls far behind FaRM and
    DrTM+R, which it matches at one (D18's gap over FaSST grows with coroutines)."""
    _, rows = _rows("fig14_as_released", "smoke")

    def get(p, c, m="throughput_mtxns"):
        return _value(rows, **{"protocol.preset": p, "workload.coroutines": c})[m]
    others = ("drtmh", "drtmr", "farm")
    assert all(get(p, c, "abort_rate") == 0 for p in others for c in (1, 8))
    assert get("fasst", 8, "abort_rate") > 0.2
    assert get("fasst", 8) < 0.8 * min(get(p, 8) for p in others)
    assert get("fasst", 1) > 0.8 * get("farm", 1)


def test_fig7_smoke_execution_orderings():
    """Execution phase at one coroutine: the cached READ beats the RPC and the uncached
    lookup + READ, with the lowest median latency (D10, D11); on network-bound SmallBank
    the RPC beats lookup + READ (D11)."""
    _, rows = _rows("fig7_execution", "smoke")
    for bench in ("tpcc", "smallbank"):
        def get(ex, cache, m="throughput_mtxns"):
            w = {"workload.benchmark": bench, "protocol.execution": ex}
            if ex == "one_sided":
                w["protocol.index_cache"] = cache
            return _value(rows, **w)[m]
        cached = get("one_sided", True)
        assert cached > get("two_sided", False) and cached > get("one_sided", False), bench
        assert get("one_sided", True, "lat_p50_us") < get("two_sided", False, "lat_p50_us")
        if bench == "smallbank":
            assert get("two_sided", False) > get("one_sided", False)


def test_fig9_smoke_commit_without_passive_ack():
    """Commit without passive ACK on SmallBank: one-sided WRITEs beat commit RPCs (D13)."""
    _, rows = _rows("fig9_commit", "smoke")

    def get(commit, pa):
        return _value(rows, **{"workload.benchmark": "smallbank", "protocol.commit": commit,
                               "protocol.passive_ack": pa})["throughput_mtxns"]
    assert get("one_sided", False) > get("two_sided", False)
    assert get("two_sided", True) > get("two_sided", False)


def test_fig13_smoke_hybrid_fasst_beats_fasst():
    """One-sided validation and logging make FaSST's own protocol faster (D24)."""
    _, rows = _rows("fig13_factors", "smoke")
    t = {r["protocol.preset"]: r["throughput_mtxns"] for r in rows}
    assert t["hybrid-fasst"] > t["fasst"], t


def test_fig15_smoke_one_sided_logging_latency():
    """At one coroutine, logging with one-sided WRITEs (DrTM+R, FaRM) takes well under half
    the time of FaSST's logging RPCs (D19: 69% and 75% lower)."""
    _, rows = _rows("fig15_latency_breakdown", "smoke")
    log = {r["protocol.preset"]: r["lat_log_us"] for r in rows}
    assert log["drtmr"] < 0.5 * log["fasst"] and log["farm"] < 0.5 * log["fasst"], log


@pytest.mark.parametrize("name", ["fig19_roce", "fig21_cx5"])
def test_other_nics_smoke_drtmh_best(name):
    """On ConnectX-4 RoCE and ConnectX-5 (2 nodes, 2-way replication) at one coroutine
    DrTM+H stays above FaSST and DrTM+R on TPC-C/no and above FaSST on SmallBank (D21,
    D22; at 8 coroutines its TPC-C lock-stage aborts put it below DrTM+R, a known gap).
    The window is stretched to 400 us so that TPC-C commits ~50 transactions per design
    (the smoke size's own window holds ~15, too few to order designs a few percent
    apart)."""
    _, rows = _rows(name, "smoke", ["run.measure=400us"])
    t = {(r["workload.benchmark"], r["protocol.preset"]): r["throughput_mtxns"] for r in rows}
    assert t["tpcc", "drtmh"] > max(t["tpcc", "fasst"], t["tpcc", "drtmr"]), t
    assert t["smallbank", "drtmh"] > t["smallbank", "fasst"], t


def test_whatif_scale_out_smoke_counts_connection_misses():
    """The scale-out what-if at smoke size (3 and 6 nodes, 4 threads on 2 NICs) with a
    QP-context cache of 4 entries: DrTM+H's one-sided verbs use 2 x (nodes - 1) RC QPs per
    NIC, beyond the cache at 6 nodes (10 QPs), so its lookups miss there and more than at 3
    nodes (4 QPs plus the UD ones); FaSST's 2 UD QPs per NIC fit at any size."""
    _, rows = _rows("whatif_scale_out", "smoke", ["cluster.nic.overrides.nic.qp_cache_entries=4"])
    miss = {(r["protocol.preset"], r["cluster.nodes"]): r["qpc_miss_rate"] for r in rows}
    assert miss[("drtmh", 6)] > 0.3 and miss[("drtmh", 6)] > miss[("drtmh", 3)], miss
    assert miss[("fasst", 3)] < 0.01 and miss[("fasst", 6)] < 0.01, miss
    assert all(r["throughput_mtxns"] > 0 for r in rows)


def test_fig3b_smoke_runs_every_transport():
    """The RPC benchmark completes RPCs over UD, RC and WRITE-with-IMM."""
    _, rows = _rows("fig3b_rpc_transports", "demo",
                    ["cluster.nodes=3", "cluster.threads=4", "run.warmup=10us",
                     "run.measure=10us", "sweep.workload.coroutines=[4]"])
    assert {r["workload.transport"] for r in rows} == {"ud", "rc", "write_imm"}
    assert all(r["throughput_mops"] > 1 for r in rows)


# ------------------------------------------------------------------ repro (demo / full)
def test_known_gaps_name_claims_their_scenarios_declare():
    """Every scenario the repro tests check declares claims, and every KNOWN_GAPS note is
    the note of one of its scenario's claims at that size (a gap entry naming no claim,
    e.g. after a claim's note was reworded, would excuse nothing and hide that it is
    stale). Loads the scenarios only; nothing runs."""
    for name in sorted(set(SCENARIOS) | set(FULL)):
        assert load_scenario(ROOT / f"{name}.yaml").expected, name
    for (name, size), notes in KNOWN_GAPS.items():
        sc = load_scenario(ROOT / f"{name}.yaml", [f"run.size={size}"] if size != "full"
                           else [])
        assert notes <= {c.note for c in sc.expected}, (name, size,
                                                        notes - {c.note for c in sc.expected})


def _check(name: str, size: str) -> None:
    check_findings(ROOT, name, size, KNOWN_GAPS.get((name, size), set()))


@pytest.mark.repro
@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_at_demo_size(name):
    """Every claim check outside KNOWN_GAPS holds at demo size (4 nodes x 24 threads)."""
    _check(name, "demo")


@pytest.mark.repro
@pytest.mark.parametrize("name", FULL)
def test_findings_at_full_size(name):
    """Every claim check outside KNOWN_GAPS holds at full size (16 nodes)."""
    _check(name, "full")
