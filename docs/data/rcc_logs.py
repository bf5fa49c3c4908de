"""Extract RCC's own run logs into one CSV row per run.

RCC's authors committed the logs of their runs to Alchem-Lab/drtmh (branch ``hybrid-cc``,
``scripts/data_for_osdi20/out/``): one file per node (``.log_0`` is the master, which
merges every node's throughput each epoch and prints "System throughput"). This reads the
master logs of the runs named below from a local clone and writes, per run, what RCC's
own plotting scripts read (``qps_scalability.py`` averages the "System throughput" lines
of ``.log_0``) and the set-up the log prints.

    python docs/data/rcc_logs.py /path/to/drtmh [--ref hybrid-cc] > docs/data/rcc_logs.csv
    python docs/data/rcc_logs.py --types /path/to/drtmh > docs/data/rcc_txn_types.csv
    python docs/data/rcc_logs.py --stages /path/to/drtmh > docs/data/rcc_stage_logs.csv
    python docs/data/rcc_logs.py --loaded-stages /path/to/drtmh > docs/data/rcc_loaded_stage_logs.csv
    python docs/data/rcc_logs.py --hybrid /path/to/drtmh > docs/data/rcc_hybrid_logs.csv
    python docs/data/rcc_logs.py --round-trips /path/to/drtmh > docs/data/rcc_round_trips.csv

Columns: ``dir`` (under ``scripts/data_for_osdi20/out/``), ``benchmark``, ``protocol``,
``verbs`` (rpc or one_sided), ``nodes``, ``threads``, ``coroutines`` (from the results
file name the log prints), ``scale_factor``, YCSB's ``tx_hot`` (percent of picks drawn
from all records; the rest from the hot area), ``num_hot``, ``write_num`` (of
``set_len``), ``epochs`` (System throughput lines averaged), ``throughput_mtxns_per_node``
(their mean / nodes), ``abort_rate`` (mean of the same lines' abort ratio), ``lat_p50_us``,
``lat_p90_us``, ``lat_p99_us`` (the master's "Medium/90th/99th latency" line).

With ``--types``: one row per transaction type of the one-coroutine runs
(``lat-breakdown``), from the master's worker-0 report: ``protocol``, ``verbs``, ``type``
(SmallBank's, in the model's names), ``executed`` (transactions drawn), ``lat_mean_us`` and
``lat_p50_us``, ``lat_p90_us``, ``lat_p99_us`` (RCC times coroutine 1's committed
transactions, from the start of the first attempt).

With ``--stages``: one row per one-coroutine run (``lat-breakdown``, fig. 21), the stage
timers its master log prints at exit (``src/rtx/occ_statistics.h``): ``protocol``,
``verbs`` and ``read_us``, ``lock_us``, ``log_us``, ``release_us``, ``commit_us``,
``renew_us`` (RCC's ``read_lat``, ``lock``, ``log``, ``release_write``, ``commit``,
``renew_lease``; what its ``figure_lat_breakdown.py`` plots). Each is RCC's mean time
per ``END()`` of that timer (``src/core/utils/latency_profier.h``), not a sum per
transaction, for coroutine 1 of worker thread 0 of node 0, averaged over the run's
epochs; which work each timer holds differs by protocol (docs/model.md, "RCC gaps",
R10).

With ``--loaded-stages``: the same timers of the EDR overall runs (``overall/edr*``, 10
threads x 10 coroutines, the runs of fig. 15), one row per run with ``dir``,
``benchmark``, ``protocol``, ``verbs`` and the stage columns: each timer's mean per
``END()`` under load, where a stage's time includes the waits for the thread behind the
other coroutines.

With ``--round-trips``: one row per run of ``overall/edr`` (the EDR overall runs of figs.
15 and 16 in the directory RCC's plotting scripts name without a date; the three dated
directories beside it count fewer waits per commit in most runs, e.g. one-sided MVCC on
SmallBank 4.0-6.2 against 8.0, so their counter did not count the same calls) with
``dir``, ``benchmark``, ``protocol``, ``verbs``, ``waits`` (the counter ``abort_cnt[18]``
summed over worker 0's coroutines, which its report prints as ``18: N`` and RCC's
``figure1_with_network-trips.py`` plots as fig. 16's network round trips: one count per
wait call, over the run, aborted attempts' included, and also the calls with nothing
pending, which return at once), ``commits`` (the same report's ``executed``, summed over
transaction types) and ``round_trips_per_txn`` (their ratio).

With ``--hybrid``: one row per run of RCC's hybrid sweep
(``scripts/data_for_asplos21/out/hybrid/cor_C/BENCH/PROTOCOL/hc_CODE/``, 4 EDR nodes, 10
threads, C coroutines, every ``HYBRID_CODE`` of a protocol on YCSB, SmallBank and TPC-C),
with the columns above but ``dir`` and ``verbs`` replaced by ``hybrid_code``. These runs
were made in December 2020 with the code of ``hybrid-cc``'s head (64bf7c64), not the code
of the runs above (deeede4e): SUNDIAL, for one, renews its leases in one batch at
``prepare`` there, where deeede4e renews each due read in ``load_read``.
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys

OUT = "scripts/data_for_osdi20/out/"
# Runs read: the EDR overall runs (the 2020-05-25 19:29 directory ran another YCSB
# setting, tx_hot 10 with num_hot 1000, and is listed too), the emulated-scale runs of
# fig. 22 (qp_N: N QPs per thread and peer on 4 machines), the contention runs of fig. 19
# (hotrate_H: tx_hot = 100 - H, so H % of picks go to the hot area) and the one-coroutine
# runs of fig. 21 (lat-breakdown), the computation runs of fig. 20 (sleep_curve/sleepN:
# usleep(N) before commit) and the coroutine runs of fig. 17 (eval_coroutines/corN). The FDR overall logs print no epoch (no "System throughput"
# line) and give no row.
DIRS = (["overall/edr", "overall/edr_2020-05-2519:29:18", "overall/edr_2020-05-2521:45:16",
         "overall/edr_2020-05-2601:31:12", "overall/fdr"]
        + [f"scalability/qp_{n}" for n in (1, 10, 20, 30, 40)]
        + [f"contention/hotrate_{h}" for h in (0, 25, 50, 60, 70, 80, 90, 95, 99)]
        + ["lat-breakdown"]
        + [f"sleep_curve/sleep{n}" for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
        + [f"eval_coroutines/cor{n}" for n in range(1, 20, 2)])
COLUMNS = ["dir", "benchmark", "protocol", "verbs", "nodes", "threads", "coroutines",
           "scale_factor", "tx_hot", "num_hot", "write_num", "epochs",
           "throughput_mtxns_per_node", "abort_rate", "lat_p50_us", "lat_p90_us",
           "lat_p99_us"]
_NAME = re.compile(r"drtmh-nocc(\w+?)-(bank|ycsb|tpcc)-(\d+)-(rpc|onesided|hybrid)\.log_0$")
HYBRID_OUT = "scripts/data_for_asplos21/out/hybrid/"
_HYBRID_DIR = re.compile(r"cor_(\d+)/\w+/\w+/hc_(\d+)/")
HYBRID_COLUMNS = ["hybrid_code" if c == "verbs" else c for c in COLUMNS if c != "dir"]
_SYS = re.compile(r"System throughput ([\d.]+) ([KM]), abort ([\d.e+-]+)")
_LAT = re.compile(r"Medium latency ([\d.]+)ms, 90th latency ([\d.]+)ms, "
                  r"99th latency ([\d.]+)ms")
_RESULTS = re.compile(r"results//\S+?_(\d+)_(\d+)_(\d+)_\d+\.log")
_YCSB = re.compile(r"write num=(\d+)tx hot(\d+)num_hot(\d+)")
_SCALE = re.compile(r"use scale factor: (\d+)")
_TYPE = re.compile(r"^(SendPayment|DepositChecking|Balance|Transact saving|Write check|"
                   r"Txn amal) executed (\d+), latency: ([\d.]+), rw_size \S+, m ([\d.]+), "
                   r"90 ([\d.]+), 99 ([\d.]+)", re.M)
TYPES = {"SendPayment": "send_payment", "DepositChecking": "deposit_checking",
         "Balance": "balance", "Transact saving": "transact_saving",
         "Write check": "write_check", "Txn amal": "amalgamate"}
TYPE_COLUMNS = ["protocol", "verbs", "type", "executed", "lat_mean_us", "lat_p50_us",
                "lat_p90_us", "lat_p99_us"]
# RCC's exit report prints each timer's mean in ms ("log" without the unit).
_STAGE = re.compile(r"occ_statistics\.h:\d+\] (read_lat|lock|log|release_write|commit|"
                    r"renew_lease) time: ([\d.e+-]+)")
STAGES = {"read_lat": "read_us", "lock": "lock_us", "log": "log_us",
          "release_write": "release_us", "commit": "commit_us", "renew_lease": "renew_us"}
STAGE_COLUMNS = ["protocol", "verbs", *STAGES.values()]
LOADED_STAGE_COLUMNS = ["dir", "benchmark", *STAGE_COLUMNS]
# (a report line may begin with the colour reset "ESC[0m" of the line before it)
_EXECUTED = re.compile(r"[A-Za-z ]+ executed (\d+), latency")
_WAITS = re.compile(r"bench_worker\.cc:\d+\] 18: (\d+)")
ROUND_TRIP_COLUMNS = ["dir", "benchmark", "protocol", "verbs", "waits", "commits",
                      "round_trips_per_txn"]


def _git(repo: str, *args: str) -> str:
    return subprocess.check_output(["git", "-C", repo, *args], text=True, errors="replace")


def _verbs(m: re.Match) -> str:
    """The verbs of a log's file name (``onesided`` -> ``one_sided``)."""
    return "one_sided" if m.group(4) == "onesided" else "rpc"


def row(path: str, text: str, out_dir: str = OUT) -> dict | None:
    """One run's row from its master log (under ``out_dir``), or None when it printed no
    epoch. A hybrid run's row has its ``hybrid_code`` instead of ``dir`` and ``verbs``."""
    m = _NAME.search(path)
    sys_lines = [(float(v) * (1e-3 if u == "K" else 1.0), float(a))
                 for v, u, a in _SYS.findall(text)]
    if m is None or not sys_lines:
        return None
    res = _RESULTS.search(text)
    nodes = int(res.group(1)) if res else int(m.group(3))
    y = _YCSB.search(text)
    scale = _SCALE.search(text)
    lat = _LAT.search(text)
    n = len(sys_lines)
    out = {"dir": path[len(out_dir):].rsplit("/", 1)[0], "benchmark": m.group(2),
           "protocol": m.group(1), "verbs": _verbs(m),
           "nodes": nodes, "threads": res.group(2) if res else "",
           "coroutines": res.group(3) if res else "",
           "scale_factor": scale.group(1) if scale else "",
           "write_num": y.group(1) if y else "", "tx_hot": y.group(2) if y else "",
           "num_hot": y.group(3) if y else "", "epochs": n,
           "throughput_mtxns_per_node": f"{sum(t for t, _ in sys_lines) / n / nodes:.5f}",
           "abort_rate": f"{sum(a for _, a in sys_lines) / n:.5f}"}
    for i, k in enumerate(("lat_p50_us", "lat_p90_us", "lat_p99_us")):
        out[k] = f"{float(lat.group(i + 1)) * 1000:.1f}" if lat else ""
    if m.group(4) == "hybrid":
        h = _HYBRID_DIR.search(path)
        del out["dir"], out["verbs"]
        out["hybrid_code"] = int(h.group(2))
        out["coroutines"] = out["coroutines"] or h.group(1)
    return out


def type_rows(path: str, text: str) -> list[dict]:
    """The per-type rows of one run's master log (see the module doc)."""
    m = _NAME.search(path)
    if m is None:
        return []
    return [{"protocol": m.group(1), "verbs": _verbs(m), "type": TYPES[t], "executed": n,
             **{k: f"{float(v) * 1000:.1f}" for k, v in
                zip(("lat_mean_us", "lat_p50_us", "lat_p90_us", "lat_p99_us"),
                    (mean, p50, p90, p99))}}
            for t, n, mean, p50, p90, p99 in _TYPE.findall(text)]


def stage_row(path: str, text: str) -> dict | None:
    """The stage timers of one one-coroutine run's master log (see the module doc), or
    None when the log is not a run's or prints no timer."""
    m = _NAME.search(path)
    found = dict(_STAGE.findall(text)) if m else {}
    if not found:
        return None
    return {"protocol": m.group(1), "verbs": _verbs(m),
            **{col: f"{float(found.get(k, 0.0)) * 1000:.2f}" for k, col in STAGES.items()}}


def round_trip_row(path: str, text: str) -> dict | None:
    """Waits and commits of worker 0 of one run's node 0 (see the module doc), or None when
    the log is not a run's or prints no counter or no commit."""
    m = _NAME.search(path)
    waits = _WAITS.search(text) if m else None
    commits = sum(int(n) for n in _EXECUTED.findall(text)) if m else 0
    if waits is None or commits == 0:
        return None
    return {"benchmark": m.group(2), "protocol": m.group(1), "verbs": _verbs(m),
            "waits": int(waits.group(1)), "commits": commits,
            "round_trips_per_txn": f"{int(waits.group(1)) / commits:.3f}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", help="a clone of Alchem-Lab/drtmh")
    ap.add_argument("--ref", default="hybrid-cc")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--types", action="store_true",
                      help="per-type latencies of the one-coroutine runs instead")
    what.add_argument("--stages", action="store_true",
                      help="the stage timers of the one-coroutine runs instead")
    what.add_argument("--loaded-stages", action="store_true",
                      help="the stage timers of the EDR overall runs (10 x 10) instead")
    what.add_argument("--round-trips", action="store_true",
                      help="fig. 16's round-trip counter of the EDR overall runs instead")
    what.add_argument("--hybrid", action="store_true",
                      help="the runs of RCC's hybrid sweep instead")
    a = ap.parse_args(argv)
    commit = _git(a.repo, "rev-parse", a.ref).strip()
    w = csv.DictWriter(sys.stdout, TYPE_COLUMNS if a.types else
                       STAGE_COLUMNS if a.stages else
                       LOADED_STAGE_COLUMNS if a.loaded_stages else
                       ROUND_TRIP_COLUMNS if a.round_trips else
                       HYBRID_COLUMNS if a.hybrid else COLUMNS, lineterminator="\n")
    sys.stdout.write(f"# Alchem-Lab/drtmh {a.ref} at {commit}, "
                     f"{HYBRID_OUT if a.hybrid else OUT}\n")
    w.writeheader()
    if a.hybrid:
        # the sweep's runs only (cor_C/BENCH/PROTOCOL/hc_CODE/), not the rpc_onesided
        # directories beside them
        paths = [p for p in _git(a.repo, "ls-tree", "-r", "--name-only", a.ref,
                                 HYBRID_OUT).split("\n")
                 if p.endswith(".log_0") and _HYBRID_DIR.search(p)]
        rows = []
        for p in paths:
            try:
                text = _git(a.repo, "show", f"{a.ref}:{p}")
            except subprocess.CalledProcessError:
                continue     # a log whose blob the clone lacks
            if (r := row(p, text, HYBRID_OUT)) is not None:
                rows.append(r)
        rows.sort(key=lambda r: (int(r["coroutines"]), r["benchmark"], r["protocol"],
                                 r["hybrid_code"]))
        w.writerows(rows)
        return 0
    dirs = (["lat-breakdown"] if a.types or a.stages else
            ["overall/edr"] if a.round_trips else
            [d for d in DIRS if d.startswith("overall/edr")] if a.loaded_stages else DIRS)
    for d in dirs:
        paths = [p for p in _git(a.repo, "ls-tree", "-r", "--name-only", a.ref,
                                 OUT + d + "/").split("\n") if p.endswith(".log_0")]
        for p in sorted(paths):
            text = _git(a.repo, "show", f"{a.ref}:{p}")
            if a.types:
                w.writerows(type_rows(p, text))
            elif a.stages:
                if (r := stage_row(p, text)) is not None:
                    w.writerow(r)
            elif a.loaded_stages:
                if (r := stage_row(p, text)) is not None:
                    w.writerow({"dir": d, "benchmark": _NAME.search(p).group(2), **r})
            elif a.round_trips:
                if (r := round_trip_row(p, text)) is not None:
                    w.writerow({"dir": d, **r})
            elif (r := row(p, text)) is not None:
                w.writerow(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
