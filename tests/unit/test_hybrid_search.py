"""``rnicsim hybrid-search`` (protocols/txn/hybrid_search.py): the codes it enumerates, its
ranking, its greedy rounds, its files, and the input it refuses (through the dispatcher)."""
from __future__ import annotations

import contextlib
import csv
import io
import math
from pathlib import Path

import pytest

from protocols.txn import hybrid_search as hs
from rnicsim import cli
from rnicsim.scenario import points

TINY = """\
version: 1
name: tiny_hybrid
cluster: {{nodes: 3, nic: {{profile: cx4-edr, per_node: 1}}, threads: 1}}
workload: {{kind: txn, benchmark: ycsb, coroutines: 2, ycsb_records_per_thread: 3000,
           ycsb_compute: 1us}}
protocol: {{kind: nowait, verbs: one_sided}}
run: {{seed: 1, warmup: 5us, measure: 20us}}
sizes:
  wide: {{cluster.threads: 2, sweep.protocol.kind: [nowait, mvcc]}}
{extra}
"""


def tiny(tmp_path: Path, extra: str = "") -> str:
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY.format(extra=extra))
    return str(f)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["hybrid-search", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- enumeration
@pytest.mark.parametrize("kind,stages", [("nowait", 5), ("waitdie", 5), ("mvcc", 5),
                                         ("sundial", 6), ("occ", 6), ("calvin", 6)])
def test_a_protocol_has_two_to_the_stages_codes(kind: str, stages: int) -> None:
    """Every subset of a protocol's stage bits, once: 2**stages distinct codes."""
    codes = hs.stage_codes(kind)
    assert len(codes) == 2 ** stages == len(set(codes))
    assert codes[0] == 0 and codes[-1] == sum(hs.stage_bits(kind))


def test_codes_are_the_subset_sums_of_the_stage_bits() -> None:
    """NOWAIT's codes are 0..31 (bits 1..16); CALVIN's use bits 2, 4, 8, 16, 128, 256."""
    assert hs.stage_codes("nowait") == list(range(32))
    calvin = hs.stage_codes("calvin")
    assert hs.stage_bits("calvin") == [2, 4, 8, 16, 128, 256]
    assert calvin[:4] == [0, 2, 4, 6] and calvin[-2:] == [412, 414]
    assert all(c & ~414 == 0 for c in calvin)


def test_stage_names_of_a_code() -> None:
    """A code names its one-sided stages in bit order; the two ends have words."""
    assert hs.stages_text("occ", 62) == "read+log+release+commit+validate"
    assert hs.stages_text("nowait", 0) == "none (all RPC)"
    assert hs.stages_text("nowait", 31) == "all"
    assert hs.stages_text("sundial", 31) == "lock+read+log+release+commit"


def test_rcc_code_keeps_only_the_protocols_bits() -> None:
    """RCC's codes per benchmark, bits of absent stages cleared; none for CALVIN."""
    assert hs.rcc_code("smallbank", "occ") == 62
    assert hs.rcc_code("ycsb", "sundial") == 31
    assert hs.rcc_code("tpcc", "occ") == 30
    assert hs.rcc_code("ycsb", "calvin") is None
    assert hs.rcc_code("tpce", "nowait") is None


# ----------------------------------------------------------------------------- ranking
def row(code: int, tput: float, p99: float, kind: str = "nowait") -> dict:
    return {hs.KIND: kind, hs.CODE: code, hs.TPUT: tput, hs.P99: p99}


def test_ranking_is_throughput_then_p99_then_code() -> None:
    """Higher throughput first; a tie goes to the lower p99, then to the lower code; a
    point that committed nothing (NaN) is last."""
    rows = [row(3, 1.0, 9.0), row(0, math.nan, math.nan), row(5, 2.0, 4.0),
            row(1, 1.0, 7.0), row(2, 1.0, 7.0)]
    assert [r[hs.CODE] for r in hs.rank(rows)] == [5, 1, 2, 3, 0]


def test_ranking_rows_rank_each_protocol_and_mark_rccs_code() -> None:
    """ranking.csv's rows: per protocol, ranks from 1; RCC's code flagged."""
    rows = [row(31, 1.0, 5.0), row(28, 2.0, 5.0), row(62, 3.0, 5.0, "occ"),
            row(0, 4.0, 5.0, "occ")]
    got = [(r["protocol"], r["rank"], r["code"], r["rcc_code"])
           for r in hs.ranking_rows(rows, "smallbank")]
    assert got == [("nowait", 1, 28, 1), ("nowait", 2, 31, 0),
                   ("occ", 1, 0, 0), ("occ", 2, 62, 1)]


def test_inert_stages_are_those_whose_flip_never_changed_a_row() -> None:
    """A stage is inert when every pair of codes run that differ in its bit alone has
    equal rows; one differing pair, or no pair run at all, keeps it out."""
    def rows(*spec):
        return [dict(row(c, t, 5.0), committed=n) for c, t, n in spec]

    # read pairs (0, 2) and (1, 3) equal; lock pairs (0, 1), (2, 3) differ; no log pair
    some = rows((0, 1.0, 10), (2, 1.0, 10), (1, 2.0, 20), (3, 2.0, 20))
    assert hs.inert_stages("nowait", some) == ["read"]
    # read pair (4, 6) and log pair (2, 6) differ in committed transactions
    assert hs.inert_stages("nowait", some + rows((4, 1.0, 10), (6, 1.0, 11))) == []


def test_greedy_flips_one_stage_of_the_best_code_not_yet_run() -> None:
    """First all-RPC and all-one-sided; then the unseen one-flip neighbours of the best;
    nothing once they have all run."""
    assert hs.greedy_next("nowait", [], None) == [0, 31]
    assert hs.greedy_next("nowait", [0, 31], 31) == [15, 23, 27, 29, 30]
    assert hs.greedy_next("nowait", [0, 31, 15, 23, 27, 29, 30], 31) == []


def test_search_overrides_exclude_codes_a_protocol_does_not_run() -> None:
    """One sweep over kind x the union of codes, each kind's other codes excluded."""
    ov = dict(hs.search_overrides({"nowait": [0, 1], "occ": [0, 32]}))
    assert ov["sweep.protocol.kind"] == ["nowait", "occ"]
    assert ov["sweep.protocol.hybrid_code"] == [0, 1, 32]
    assert ov["sweep_exclude"] == [
        {"protocol.kind": "nowait", "protocol.hybrid_code": {"in": [32]}},
        {"protocol.kind": "occ", "protocol.hybrid_code": {"in": [1]}}]


def test_two_protocols_are_one_sweep_of_their_own_codes(tmp_path) -> None:
    """--protocol nowait,occ on a size sweeping protocol.kind: one sweep of 32 + 64
    points, each kind with exactly its codes, verbs hybrid; the size's sweep is gone."""
    search = hs.Search(tiny(tmp_path), [], "wide", ["nowait", "occ", "nowait"])
    assert search.kinds == ["nowait", "occ"]
    sc = search.scenario({k: hs.stage_codes(k) for k in search.kinds})
    assert list(sc.sweep) == ["protocol.kind", "protocol.hybrid_code"]
    pts = points(sc)
    got = {k: [p.protocol.hybrid_code for _v, p in pts if p.protocol.kind == k]
           for k in search.kinds}
    assert got == {"nowait": list(range(32)), "occ": list(range(64))}
    assert {p.protocol.verbs for _v, p in pts} == {"hybrid"}
    assert {p.cluster.threads for _v, p in pts} == {2}


# ----------------------------------------------------------------------------- a search
@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str, str]:
    """NOWAIT's 32 codes on the tiny scenario, searched once for the tests below: the
    output folder, the scenario file and the printed text."""
    tmp = tmp_path_factory.mktemp("hybrid")
    f = tiny(tmp)
    out = tmp / "out"
    buf = io.StringIO()     # a module-scoped fixture cannot take capsys
    with contextlib.redirect_stdout(buf):
        code = cli.main(["hybrid-search", f, "--out", str(out), "--quiet"])
    assert code == 0
    return out, f, buf.getvalue()


def test_search_runs_every_code_once(searched) -> None:
    """results.csv holds one row per code, hybrid verbs, in sweep (code) order."""
    rows = read_csv(searched[0] / "results.csv")
    assert [int(r["protocol.hybrid_code"]) for r in rows] == list(range(32))
    assert {r["protocol.kind"] for r in rows} == {"nowait"}


def test_ranking_file_is_best_first_and_matches_results(searched) -> None:
    """ranking.csv ranks 1..32 by falling throughput, each code with its results' numbers."""
    ranked = read_csv(searched[0] / "ranking.csv")
    results = {r["protocol.hybrid_code"]: r for r in read_csv(searched[0] / "results.csv")}
    assert [int(r["rank"]) for r in ranked] == list(range(1, 33))
    tput = [float(r["throughput_mtxns"]) for r in ranked]
    assert tput == sorted(tput, reverse=True) and tput[0] > 0
    for r in ranked:
        assert r["throughput_mtxns"] == results[r["code"]]["throughput_mtxns"]
    assert [r["code"] for r in ranked if r["rcc_code"] == "1"] == ["31"]


def test_printed_ranking_names_rccs_code_and_the_inert_read_stage(searched) -> None:
    """The printed block: header with RCC's code, a line per code with RCC's marked, and
    NOWAIT's read stage named as changing nothing (it reads by locking)."""
    lines = searched[2].splitlines()
    assert lines[0] == "nowait on ycsb: 32 of 32 codes run; RCC's code 31 (all)"
    assert len([ln for ln in lines if ln.endswith("<- RCC")]) == 1
    assert [ln.split()[1] for ln in lines if ln.endswith("<- RCC")] == ["31"]
    assert lines[34] == ("stages whose verbs changed no result here: read (codes "
                         "differing only in them tie)")
    assert lines[-1] == f"results: {searched[0]}/results.csv, ranking.csv, hybrid_space.png"


def test_plot_is_written(searched) -> None:
    """hybrid_space.png is a PNG file."""
    assert (searched[0] / "hybrid_space.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_greedy_rounds_flip_one_stage_from_the_best_so_far(searched, tmp_path, capsys) -> None:
    """Round 1 runs codes 0 and 31; each later round the unseen one-flip neighbours of the
    best code of the rounds before; the last best's neighbours have all run; the printed
    ranking says how many of the 32 codes ran."""
    out = tmp_path / "g"
    code, text, _ = run(capsys, searched[1], "--greedy", "--out", str(out), "--quiet")
    assert code == 0
    rows = read_csv(out / "results.csv")
    rounds: dict[int, list[int]] = {}
    for r in rows:
        rounds.setdefault(int(r["round"]), []).append(int(r["protocol.hybrid_code"]))
    assert rounds[1] == [0, 31]
    seen = [dict(r, **{hs.KIND: "nowait", hs.CODE: int(r["protocol.hybrid_code"]),
                       hs.TPUT: float(r[hs.TPUT]), hs.P99: float(r[hs.P99])})
            for r in rows]
    for n in sorted(rounds)[1:]:
        best = hs.rank([r for r in seen if r["round"] < str(n)])[0][hs.CODE]
        assert rounds[n] == hs.greedy_next("nowait", [r[hs.CODE] for r in seen
                                                      if r["round"] < str(n)], best)
    best = hs.rank(seen)[0][hs.CODE]
    assert hs.greedy_next("nowait", [r[hs.CODE] for r in seen], best) == []
    assert f"nowait on ycsb: {len(rows)} of 32 codes run; RCC's code 31 (all)" in text
    assert (out / "hybrid_space.png").exists()


# ----------------------------------------------------------------------------- refusals
MICROBENCH = ("version: 1\nname: mb\ncluster: {nodes: 2, nic: {profile: cx4-edr}, "
              "threads: 1}\nworkload: {kind: microbench}\n")
REFUSALS = {
    # a microbench scenario
    "non-txn": (MICROBENCH, [], "{f}: workload.kind: a transaction workload (kind: txn) "
                "for a hybrid search, got 'microbench'"),
    # a misspelt protocol: the protocols listed, the near miss named
    "unknown protocol": (None, ["--protocol", "nowiat"],
                         "command line: --protocol: one of the protocols calvin, mvcc, "
                         "nowait, occ, raw_verbs, sundial, waitdie, got 'nowiat' (did you "
                         "mean 'nowait'?)"),
    # raw_verbs, a protocol kind without stages
    "no stages": (None, ["--protocol", "raw_verbs"],
                  "command line: --protocol: a protocol with hybrid stages (occ, nowait, "
                  "waitdie, mvcc, sundial, calvin); 'raw_verbs' has none"),
    # a size sweeping protocol.kind, and no --protocol
    "which protocol": (None, ["--size", "wide"],
                       "command line: --protocol: the protocol to search: the scenario "
                       "sweeps protocol.kind over nowait, mvcc (name one or more with "
                       "--protocol)"),
    # RCC's measured sweep asked for on another set-up
    "rcc sweep set-up": (None, ["--rcc-sweep"],
                         "command line: --rcc-sweep: a scenario at the set-up of RCC's "
                         "sweep (cluster.nodes 4, cluster.threads 10); {f} has "
                         "cluster.nodes 3 and cluster.threads 1"),
    # a swept cluster key
    "other sweep": (TINY.format(extra="sweep: {cluster.threads: [1, 2]}"), [],
                    "{f}: sweep.cluster.threads: no sweep but the protocol's: the search "
                    "runs one configuration (pin the key with --set cluster.threads=VALUE)"),
}


def test_rccs_measured_sweep_is_read_per_protocol_and_coroutines() -> None:
    """RCC's sweep file: NOWAIT on YCSB at 10 coroutines has RCC's 16 codes (its read
    travels with the lock: bit 2 never set), SUNDIAL on SmallBank at one coroutine its 64
    and RCC's scripted 20 among them; a protocol RCC did not sweep is refused."""
    got = hs.rcc_sweep("ycsb", ["nowait"], 10)["nowait"]
    assert len(got) == 16 and not any(c & 2 for c in got)
    assert all(0.05 < v < 0.2 for v in got.values())
    bank = hs.rcc_sweep("smallbank", ["sundial"], 1)["sundial"]
    assert len(bank) >= 64 and 20 in bank
    with pytest.raises(hs.InputError, match="did not sweep calvin on ycsb"):
        hs.rcc_sweep("ycsb", ["calvin"], 10)


def test_rcc_comparison_ranks_and_correlates() -> None:
    """Spearman over the codes both ran (a code only one side ran is left out), RCC's
    ranks best first, and RCC's best code among the common ones."""
    rows = [{hs.KIND: "nowait", hs.CODE: c, hs.TPUT: t}
            for c, t in [(0, 1.0), (1, 2.0), (4, 3.0), (5, 4.0)]]
    same = hs.rcc_comparison(rows, {0: 0.1, 1: 0.2, 4: 0.3, 5: 0.4, 8: 0.9})
    assert same["rho"] == pytest.approx(1.0) and same["n"] == 4
    assert same["rcc_rank"] == {8: 1, 5: 2, 4: 3, 1: 4, 0: 5} and same["rcc_best"] == 5
    flipped = hs.rcc_comparison(rows, {0: 0.4, 1: 0.3, 4: 0.2, 5: 0.1})
    assert flipped["rho"] == pytest.approx(-1.0) and flipped["rcc_best"] == 0


def test_a_swept_key_pinned_with_set_is_one_configuration(tmp_path) -> None:
    """--set on a swept key leaves it one value, as ``run`` does: the search takes it
    (the refusal above names this remedy); the points run at the pinned value."""
    f = tiny(tmp_path, "sweep: {cluster.threads: [1, 2]}")
    search = hs.Search(f, ["cluster.threads=2"], None, ["nowait"])
    pts = points(search.scenario({"nowait": [0, 31]}))
    assert len(pts) == 2
    assert {p.cluster.threads for _, p in pts} == {2}


@pytest.mark.parametrize("case", REFUSALS)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, case: str) -> None:
    """Each refusal: exit 2 and one error line naming the file or flag, nothing run."""
    text, args, message = REFUSALS[case]
    f = tmp_path / "s.yaml"
    f.write_text(TINY.format(extra="") if text is None else text)
    code, out, err = run(capsys, str(f), "--out", str(tmp_path / "out"), *args)
    assert (code, out) == (2, "")
    assert err == f"rnicsim hybrid-search: error: {message.format(f=f)}\n"
    assert not (tmp_path / "out").exists()
