"""``rnicsim hybrid-search``: the best per-stage verbs of an RCC protocol, found by running
every choice the protocol allows.

Scope
    RCC builds each protocol as a hybrid with ``HYBRID_CODE``, one bit per stage, a set
    bit meaning "this stage uses one-sided verbs" (:mod:`protocols.txn.cc`). A protocol
    with ``s`` stages has ``2**s`` codes: every subset sum of its stages' bits, from 0
    (every stage over RPC) to the sum of them all (every stage one-sided); RCC's
    ``hybrid_code_gen.py`` enumerates the same set. The search runs them as the points
    of one sweep of the scenario (``protocol.verbs: hybrid``, ``protocol.hybrid_code``
    swept, one ``protocol.kind`` per protocol searched) through :mod:`rnicsim.runner`,
    so ``--jobs`` and ``--scheduler`` spread the points as for ``rnicsim run``, and
    ranks them by throughput.

    ``--greedy`` prunes the space: it runs all-RPC and all-one-sided, then, round after
    round, every code one stage-flip away from the best code run so far that has not run
    yet, and stops when the best code's neighbours have all run (a local optimum:
    ``1 + s`` to ``2**s`` points; CALVIN's 6 stages have 64 codes).

Ranking
    Best first by ``throughput_mtxns`` [M txns/s], then the lower ``lat_p99_us`` [us],
    then the lower code: a total order, so equal results rank the same on every run. A
    point that committed nothing (throughput NaN) ranks last.

Output (``--out DIR``)
    The exhaustive search writes what ``rnicsim run`` writes (``results.csv``, one row
    per code, ``summary.json``, ...; ``--resume`` continues an interrupted search);
    ``--greedy`` runs each round into ``DIR/greedy/round-NN`` and writes every round's
    rows to ``DIR/results.csv`` with a ``round`` column. Both then write
    ``ranking.csv`` (rank, protocol, code, one-sided stages, throughput, latencies, abort
    rate, whether it is RCC's code) and ``hybrid_space.png``: per protocol, throughput
    per code as bars in rank order, above a grid marking each code's one-sided stages,
    with RCC's own code for the benchmark (:data:`RCC_CODES`) drawn in another colour.

RCC's measured sweep (``--rcc-sweep``)
    RCC measured every code itself on 4 EDR nodes x 10 threads, at 10 coroutines (YCSB,
    SmallBank, TPC-C) and at one (SmallBank): ``docs/data/rcc_hybrid_logs.csv`` (made by
    ``docs/data/rcc_logs.py --hybrid``, with the code of RCC's ``hybrid-cc`` head, which
    differs from the code of its other logs: docs/model.md, "RCC gaps"). With the flag a
    search of a scenario at that set-up prints and writes, per code, RCC's measured
    throughput per node [M txns/s] and rank, and per protocol the Spearman rank
    correlation over the codes both ran; any other set-up, or a protocol and benchmark
    RCC did not sweep, exits 2.
"""
from __future__ import annotations

import copy
import math
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from rnicsim.commands import SET_HELP, add_run_options, open_run_pool
from rnicsim.errors import ArgumentParser, InputError, did_you_mean
from rnicsim.scenario import PROTOCOLS, load_raw, parse_override, resolve

from .cc import STAGE_BITS
from .scenario_kinds import STAGES

# RCC's HYBRID_CODE per (benchmark, protocol) in its run scripts (PROTOCOL-FACTS 1.2,
# scripts/data_for_asplos21/run_coroutines.sh); CALVIN ran no hybrid there.
RCC_CODES: dict[tuple[str, str], int] = {
    ("smallbank", "nowait"): 28, ("smallbank", "waitdie"): 28, ("smallbank", "mvcc"): 28,
    ("smallbank", "sundial"): 20, ("smallbank", "occ"): 62,
    ("ycsb", "nowait"): 31, ("ycsb", "waitdie"): 31, ("ycsb", "mvcc"): 31,
    ("ycsb", "sundial"): 31, ("ycsb", "occ"): 63,
    ("tpcc", "nowait"): 28, ("tpcc", "waitdie"): 28, ("tpcc", "mvcc"): 28,
    ("tpcc", "sundial"): 31, ("tpcc", "occ"): 30,
}
KIND, CODE = "protocol.kind", "protocol.hybrid_code"
TPUT, P50, P99 = "throughput_mtxns", "lat_p50_us", "lat_p99_us"
# RCC's measured sweep (see the module doc) and the set-up it ran
RCC_SWEEP = Path(__file__).resolve().parents[2] / "docs" / "data" / "rcc_hybrid_logs.csv"
RCC_SWEEP_SETUP = {"nodes": 4, "threads": 10}
_BENCH = {"smallbank": "bank", "ycsb": "ycsb", "tpcc": "tpcc"}


def rcc_sweep(benchmark: str, kinds: list[str], coroutines: int,
              path: Path = RCC_SWEEP) -> dict[str, dict[int, float]]:
    """RCC's measured throughput per node [M txns/s] by code, per protocol of ``kinds``,
    on ``benchmark`` at ``coroutines`` coroutines (:data:`RCC_SWEEP`); InputError naming
    what RCC did not sweep."""
    import csv

    if not path.is_file():
        raise InputError("command line", "--rcc-sweep",
                         f"RCC's measured sweep at {path} (a clone of this repository "
                         "has it)")
    want = _BENCH.get(benchmark)
    out: dict[str, dict[int, float]] = {k: {} for k in kinds}
    with path.open() as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if (r["benchmark"] == want and r["protocol"] in out
                    and int(r["coroutines"]) == coroutines):
                out[r["protocol"]][int(r["hybrid_code"])] = float(
                    r["throughput_mtxns_per_node"])
    missing = [k for k, v in out.items() if len(v) < 3]
    if missing:
        raise InputError("command line", "--rcc-sweep",
                         f"a protocol and benchmark RCC swept at {coroutines} coroutines; "
                         f"it did not sweep {', '.join(missing)} on {benchmark}")
    return out


def rcc_comparison(rows: list[dict[str, Any]], measured: dict[int, float]) -> dict:
    """Compare one protocol's ``rows`` with RCC's ``measured`` throughput by code:
    ``rho`` (Spearman, over the codes both ran, the model's ``throughput_mtxns`` against
    RCC's), ``n`` (those codes), ``rcc_rank`` (code -> its rank in RCC's sweep, best
    first), ``rcc_best`` (RCC's best code among them) and ``measured`` itself."""
    from scipy.stats import spearmanr

    model = {r[CODE]: r.get(TPUT, math.nan) for r in rows}
    common = sorted(c for c in model if c in measured and model[c] == model[c])
    order = sorted(measured, key=lambda c: (-measured[c], c))
    ranks = {c: i + 1 for i, c in enumerate(order)}
    rho = (float(spearmanr([model[c] for c in common], [measured[c] for c in common])
                 .correlation) if len(common) >= 3 else math.nan)
    best = max(common, key=lambda c: (measured[c], -c)) if common else None
    return {"rho": rho, "n": len(common), "rcc_rank": ranks, "rcc_best": best,
            "measured": measured}


def stage_bits(kind: str) -> list[int]:
    """The ``HYBRID_CODE`` bits of protocol ``kind``'s stages, lowest first."""
    return sorted(STAGE_BITS[s] for s in STAGES[kind])


def stage_codes(kind: str) -> list[int]:
    """Every hybrid code of protocol ``kind``, ascending: all subset sums of its stage
    bits (``2**stages`` codes, 0 = all RPC, the last = all one-sided)."""
    codes = [0]
    for b in stage_bits(kind):
        codes += [c | b for c in codes]
    return sorted(codes)


def one_sided_stages(kind: str, code: int) -> list[str]:
    """The stages of ``kind`` that ``code`` makes one-sided, in bit order."""
    return [s for s in sorted(STAGES[kind], key=STAGE_BITS.get) if code & STAGE_BITS[s]]


def stages_text(kind: str, code: int) -> str:
    """``code``'s one-sided stages as ``log+release+commit``; ``none (all RPC)`` or
    ``all`` at the ends."""
    one = one_sided_stages(kind, code)
    if not one:
        return "none (all RPC)"
    return "all" if len(one) == len(STAGES[kind]) else "+".join(one)


def rcc_code(benchmark: str, kind: str) -> int | None:
    """RCC's code for ``kind`` on ``benchmark`` with the bits of stages ``kind`` lacks
    cleared (RCC's protocols read only their own bits), or None when RCC ran none."""
    code = RCC_CODES.get((benchmark, kind))
    return None if code is None else code & sum(stage_bits(kind))


def _rank_key(row: dict[str, Any]) -> tuple:
    t, p99 = row.get(TPUT, math.nan), row.get(P99, math.nan)
    return (-t if t == t else math.inf, p99 if p99 == p99 else math.inf, row[KIND],
            row[CODE])


def rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (each with ``protocol.kind``, ``protocol.hybrid_code`` and metrics) best
    first, by the order of the module doc."""
    return sorted(rows, key=_rank_key)


def inert_stages(kind: str, rows: list[dict[str, Any]]) -> list[str]:
    """The stages of ``kind`` whose bit changed nothing: every pair of codes run that
    differ in that bit alone gave identical rows (every metric), and at least one such
    pair ran. E.g. NOWAIT's ``read``: it reads every record by locking it."""
    by_code = {r[CODE]: {k: v for k, v in r.items() if k not in (CODE, "round")}
               for r in rows if r[KIND] == kind}
    out = []
    for s in sorted(STAGES[kind], key=STAGE_BITS.get):
        b = STAGE_BITS[s]
        pairs = [(c, c | b) for c in by_code if not c & b and c | b in by_code]
        if pairs and all(by_code[x] == by_code[y] for x, y in pairs):
            out.append(s)
    return out


def greedy_next(kind: str, codes_run: list[int], best: int | None) -> list[int]:
    """The codes the greedy search runs next for ``kind``, ascending: all-RPC and
    all-one-sided first (``best`` None), then the codes one stage-flip from ``best`` not
    in ``codes_run``; [] when the search is over."""
    if best is None:
        return [0, sum(stage_bits(kind))]
    return sorted({best ^ b for b in stage_bits(kind)} - set(codes_run))


def search_overrides(codes: dict[str, list[int]]) -> list[tuple[str, Any]]:
    """``--set`` overrides that make a scenario one sweep over ``codes`` (protocol kind ->
    hybrid codes to run): ``protocol.kind`` x ``protocol.hybrid_code`` over the union of
    the codes, with ``sweep_exclude`` leaving out each kind's codes not asked for."""
    union = sorted({c for cs in codes.values() for c in cs})
    excl = [{KIND: k, CODE: {"in": [c for c in union if c not in cs]}}
            for k, cs in codes.items() if len(cs) < len(union)]
    return [("protocol.verbs", "hybrid"), ("protocol.stages", None), (CODE, union[0]),
            (f"sweep.{KIND}", list(codes)), (f"sweep.{CODE}", union),
            ("sweep_exclude", excl), ("plots", []), ("expected", [])]


def _drop(block: Any, prefix: str) -> None:
    """Delete the keys of mapping ``block`` that start with ``prefix`` (no mapping: no-op)."""
    if isinstance(block, dict):
        for k in [k for k in block if str(k).startswith(prefix)]:
            del block[k]


class Search:
    """A scenario file made ready for the search: checked, its protocol sweep removed.

    ``kinds``: the protocols searched; ``benchmark``: the txn workload's benchmark;
    :meth:`scenario` builds the sweep over given codes. InputError (exit 2) for a
    scenario that is not a transaction workload, an unknown protocol, one without hybrid
    stages, or a sweep over anything but the protocol."""

    def __init__(self, file: str, sets: list[str], size: str | None,
                 protocols: list[str]) -> None:
        self.file = file
        raw = load_raw(file)
        self.overrides = [parse_override(s) for s in sets]
        if size is not None:
            self.overrides.insert(0, ("run.size", size))
        sc = resolve(raw, file, self.overrides)
        if sc.workload.kind != "txn":
            raise InputError(file, "workload.kind", f"a transaction workload (kind: txn) "
                             f"for a hybrid search, got {sc.workload.kind!r}")
        self.benchmark = sc.workload.benchmark
        self.kinds = self._kinds(sc, protocols)
        # A swept key pinned by --set is left with one value: a configuration, not a sweep.
        other = [k for k, vs in sc.sweep.items()
                 if not k.startswith("protocol.") and len(vs) > 1]
        if other:
            raise InputError(file, f"sweep.{other[0]}", "no sweep but the protocol's: the "
                             "search runs one configuration (pin the key with --set "
                             f"{other[0]}=VALUE)")
        # The search sweeps the protocol itself: the file's and the size's sweeps over
        # protocol keys are dropped, so none of their values leak into the points.
        self.raw = copy.deepcopy(raw)
        _drop(self.raw.get("sweep"), "protocol.")
        for block in (self.raw.get("sizes") or {}).values():
            _drop(block, "sweep.protocol.")
        self.overrides = [(k, v) for k, v in self.overrides
                          if not k.startswith("sweep.protocol.")]
        self.base = sc

    def _kinds(self, sc, protocols: list[str]) -> list[str]:
        if not protocols:
            swept = sc.sweep.get(KIND, [])
            if len(swept) > 1:
                raise InputError("command line", "--protocol",
                                 f"the protocol to search: the scenario sweeps "
                                 f"protocol.kind over {', '.join(map(str, swept))} (name "
                                 f"one or more with --protocol)")
            protocols = [swept[0] if swept else sc.protocol.kind]
        kinds: list[str] = []
        for p in protocols:
            if p in kinds:
                continue
            if p not in PROTOCOLS:
                hint = did_you_mean(p, sorted(PROTOCOLS))
                raise InputError("command line", "--protocol",
                                 f"one of the protocols {', '.join(sorted(PROTOCOLS))}, got "
                                 f"{p!r}{f' ({hint})' if hint else ''}")
            if p not in STAGES:
                raise InputError("command line", "--protocol",
                                 f"a protocol with hybrid stages "
                                 f"({', '.join(STAGES)}); {p!r} has none")
            kinds.append(p)
        return kinds

    def scenario(self, codes: dict[str, list[int]]):
        """The scenario whose sweep runs ``codes`` (protocol kind -> hybrid codes)."""
        return resolve(self.raw, self.file, self.overrides + search_overrides(codes))


def _row_of(row: dict[str, Any], rcc: dict[str, int | None]) -> dict[str, Any]:
    k, c = row[KIND], row[CODE]
    return {"protocol": k, "code": c, "one_sided": stages_text(k, c),
            TPUT: row.get(TPUT), P50: row.get(P50), P99: row.get(P99),
            "abort_rate": row.get("abort_rate"), "rcc_code": int(rcc[k] == c)}


def ranking_rows(rows: list[dict[str, Any]], benchmark: str,
                 compared: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """``ranking.csv``'s rows: per protocol, its codes best first with their rank; with
    ``compared`` (each protocol's :func:`rcc_comparison`) also the model's throughput per
    node and RCC's measured one and rank."""
    rcc = {k: rcc_code(benchmark, k) for k in {r[KIND] for r in rows}}
    out = []
    for kind in dict.fromkeys(r[KIND] for r in rows):
        ranked = rank([r for r in rows if r[KIND] == kind])
        mine = [{"rank": i + 1, **_row_of(r, rcc)} for i, r in enumerate(ranked)]
        if compared is not None:
            c = compared[kind]
            for r, raw in zip(mine, ranked):
                r["throughput_mtxns_per_node"] = raw.get("throughput_mtxns_per_node")
                r["rcc_measured_mtxns_per_node"] = c["measured"].get(r["code"], "")
                r["rcc_measured_rank"] = c["rcc_rank"].get(r["code"], "")
        out += mine
    return out


def ranking_lines(ranked: list[dict[str, Any]], benchmark: str, total: dict[str, int],
                  inert: dict[str, list[str]], compared: dict[str, dict] | None = None
                  ) -> list[str]:
    """The printed ranking of :func:`ranking_rows`' rows, one block per protocol;
    ``total``: each protocol's number of codes (the greedy search runs fewer);
    ``inert``: each protocol's :func:`inert_stages`; ``compared``: each protocol's
    :func:`rcc_comparison` (the rows then carry RCC's measured columns)."""
    lines = []
    for kind in dict.fromkeys(r["protocol"] for r in ranked):
        mine = [r for r in ranked if r["protocol"] == kind]
        rcc = rcc_code(benchmark, kind)
        head = f"{kind} on {benchmark}: {len(mine)} of {total[kind]} codes run"
        if rcc is not None:
            head += f"; RCC's code {rcc} ({stages_text(kind, rcc)})"
        extra = (f" {'per node':>8} {'RCC, per node':>13} {'RCC rank':>8}" if compared
                 else "")
        lines += [head, f"{'rank':>4}  {'code':>4}  {'one-sided stages':34s} "
                        f"{'Mtxn/s':>8} {'p50 us':>8} {'p99 us':>8} {'aborts':>7}{extra}"]
        for r in mine:
            mark = "  <- RCC" if r["rcc_code"] else ""
            cols = ""
            if compared:
                cols = (f" {_num(r['throughput_mtxns_per_node'], 8, 4)} "
                        f"{_num(r['rcc_measured_mtxns_per_node'], 13, 4)} "
                        f"{r['rcc_measured_rank'] if r['rcc_measured_rank'] != '' else '-':>8}")
            lines.append(f"{r['rank']:4d}  {r['code']:4d}  {r['one_sided']:34s} "
                         f"{_num(r[TPUT], 8, 4)} {_num(r[P50], 8, 2)} {_num(r[P99], 8, 2)} "
                         f"{_num(r['abort_rate'], 7, 3)}{cols}{mark}")
        if compared:
            c = compared[kind]
            where = next((r["rank"] for r in mine if r["code"] == c["rcc_best"]), None)
            lines.append(f"against RCC's measured sweep: Spearman rho {c['rho']:.2f} over "
                         f"the {c['n']} codes both ran; RCC's best of them, code "
                         f"{c['rcc_best']}, ranks {where} here")
        if inert.get(kind):
            lines.append(f"stages whose verbs changed no result here: "
                         f"{', '.join(inert[kind])} (codes differing only in them tie)")
        lines.append("")
    return lines


def _num(v: Any, width: int, digits: int) -> str:
    return f"{v:{width}.{digits}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def plot_space(path: Path, ranked: list[dict[str, Any]], benchmark: str, title: str) -> None:
    """Draw ``hybrid_space.png`` (see module doc) from :func:`ranking_rows`' rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["protocol"] for r in ranked))
    heights = []
    for k in kinds:
        heights += [3.0, 0.35 * len(STAGES[k]) + 0.4]
    widest = max(sum(r["protocol"] == k for r in ranked) for k in kinds)
    fig, axes = plt.subplots(2 * len(kinds), 1, figsize=(max(6.0, 0.22 * widest + 2.5),
                                                         sum(heights) + 0.8),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for i, k in enumerate(kinds):
        mine = [r for r in ranked if r["protocol"] == k]
        top, grid = axes[2 * i][0], axes[2 * i + 1][0]
        xs = range(len(mine))
        tput = [r[TPUT] if isinstance(r[TPUT], (int, float)) else 0.0 for r in mine]
        colours = ["tab:red" if r["rcc_code"] else "tab:blue" for r in mine]
        top.bar(xs, tput, color=colours)
        top.set_ylabel("throughput [M txns/s]")
        top.set_ylim(bottom=0)
        top.set_xlim(-0.6, len(mine) - 0.4)
        top.set_xticks(list(xs), [str(r["code"]) for r in mine], fontsize=7, rotation=90)
        rcc = rcc_code(benchmark, k)
        note = (f"RCC's code {rcc} in red" if any(r["rcc_code"] for r in mine)
                else "RCC ran no hybrid of it here" if rcc is None
                else f"RCC's code {rcc} not run")
        top.set_title(f"{k} on {benchmark}: every hybrid code run, best first ({note})",
                      fontsize=9)
        stages = sorted(STAGES[k], key=STAGE_BITS.get)
        for x, r in zip(xs, mine):
            for y, s in enumerate(stages):
                on = bool(r["code"] & STAGE_BITS[s])
                grid.plot(x, y, "s" if on else ".", color="black" if on else "lightgrey",
                          markersize=5 if on else 3)
        grid.set_yticks(range(len(stages)), stages, fontsize=7)
        grid.set_ylim(-0.6, len(stages) - 0.4)
        grid.set_xlim(-0.6, len(mine) - 0.4)
        grid.set_xticks([])
        grid.set_xlabel("hybrid code (rank order); filled square: stage one-sided",
                        fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_search(search: Search, out: Path, pool, progress: bool, greedy: bool,
               resume: bool = False, force: bool = False) -> list[dict[str, Any]]:
    """Run the search on ``pool`` into ``out`` (see module doc) and return the rows of
    every code run (swept values + metrics). Raises the runner's ``PointsFailed``."""
    from rnicsim.runner import run_scenario, write_csv

    if not greedy:
        codes = {k: stage_codes(k) for k in search.kinds}
        return run_scenario(search.scenario(codes), out, progress=progress,
                            source=search.file, pool=pool, resume=resume,
                            force=force)["rows"]
    rows: list[dict[str, Any]] = []
    best: dict[str, int | None] = dict.fromkeys(search.kinds)
    for n in range(1, 1 + 2 ** max(len(STAGES[k]) for k in search.kinds)):
        codes = {}
        for k in search.kinds:
            nxt = greedy_next(k, [r[CODE] for r in rows if r[KIND] == k], best[k])
            if nxt:
                codes[k] = nxt
        if not codes:
            break
        got = run_scenario(search.scenario(codes), out / "greedy" / f"round-{n:02d}",
                           progress=progress, source=search.file, pool=pool,
                           resume=resume, force=force)["rows"]
        rows += [{"round": n, **r} for r in got]
        for k in codes:
            best[k] = rank([r for r in rows if r[KIND] == k])[0][CODE]
    write_csv(out / "results.csv", rows)
    return rows


def main(argv: list[str]) -> int:
    """``rnicsim hybrid-search SCENARIO [--protocol P]... [--greedy] [--size S]
    [--set k=v]... [--out DIR] [--jobs N | --scheduler S] [--resume | --force]
    [--quiet]``. Exit 1 when points failed (each named on stderr)."""
    ap = ArgumentParser(prog="rnicsim hybrid-search",
                        description="Run every per-stage verbs choice (hybrid code) of an "
                                    "RCC protocol on a transaction scenario and rank them.")
    ap.add_argument("file", metavar="SCENARIO", help="scenario YAML file (a txn workload)")
    ap.add_argument("--protocol", action="append", default=[], metavar="P",
                    help="protocol to search (repeatable or comma-separated; default the "
                         "scenario's protocol.kind)")
    ap.add_argument("--greedy", action="store_true",
                    help="pruned search: flip one stage at a time from the best code so far")
    ap.add_argument("--size", help="a size the scenario defines, such as demo or smoke")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help=SET_HELP)
    ap.add_argument("--out", metavar="DIR", help="directory for results.csv, ranking.csv "
                    "and hybrid_space.png (default out/hybrid-search/NAME)")
    ap.add_argument("--rcc-sweep", action="store_true",
                    help="compare with the sweep RCC measured (scenarios at its set-up: "
                         "4 nodes x 10 threads, e.g. scenarios/rcc/fig15_logs_edr.yaml)")
    add_run_options(ap)
    a = ap.parse_args(argv)
    from rnicsim.results import check_out_dir
    from rnicsim.runner import PointsFailed

    protocols = [p.strip() for arg in a.protocol for p in arg.split(",") if p.strip()]
    search = Search(a.file, a.set, a.size, protocols)
    search.scenario({k: stage_codes(k) for k in search.kinds})   # every code validates
    measured = None
    if a.rcc_sweep:
        c = search.base.cluster
        got = {"nodes": c.nodes, "threads": c.threads}
        if got != RCC_SWEEP_SETUP:
            raise InputError("command line", "--rcc-sweep",
                             f"a scenario at the set-up of RCC's sweep (cluster.nodes 4, "
                             f"cluster.threads 10); {a.file} has cluster.nodes {c.nodes} "
                             f"and cluster.threads {c.threads}")
        measured = rcc_sweep(search.benchmark, search.kinds,
                             search.base.workload.coroutines)
    out = check_out_dir(a.out or f"out/hybrid-search/{search.base.name}")
    with closing(open_run_pool(a)) as pool:
        try:
            rows = run_search(search, out, pool, not a.quiet, a.greedy, a.resume, a.force)
        except PointsFailed as e:
            print(f"rnicsim hybrid-search: error: {e}", file=sys.stderr)
            return 1
    from rnicsim.runner import write_csv

    compared = None if measured is None else {
        k: rcc_comparison([r for r in rows if r[KIND] == k], measured[k])
        for k in search.kinds}
    ranked = ranking_rows(rows, search.benchmark, compared)
    write_csv(out / "ranking.csv", ranked)
    c = search.base.cluster
    title = (f"{search.base.name}: {c.nodes} nodes, {c.nic.profile}, {c.threads} threads x "
             f"{search.base.workload.coroutines} coroutines, size {search.base.run.size}")
    plot_space(out / "hybrid_space.png", ranked, search.benchmark, title)
    for line in ranking_lines(ranked, search.benchmark,
                              {k: len(stage_codes(k)) for k in search.kinds},
                              {k: inert_stages(k, rows) for k in search.kinds},
                              compared):
        print(line)
    print(f"results: {out}/results.csv, ranking.csv, hybrid_space.png")
    return 0
