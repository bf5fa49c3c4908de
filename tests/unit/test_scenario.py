"""rnicsim.scenario, rnicsim.runner, rnicsim.claims and ``rnicsim run``/``validate``.

One test per rejection: each checks that the message names the file and the key path
(and, where the schema knows it, what was expected).
"""
from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

import rnicsim.runner
from rnicsim.claims import evaluate
from rnicsim.cli import main
from rnicsim.errors import InputError
from rnicsim.scenario import Claim, load_scenario, points, resolve, resolved_yaml

BASE = {
    "version": 1,
    "name": "tiny",
    "cluster": {"nodes": 2, "nic": {"profile": "cx4-edr"}, "threads": 1},
    "workload": {"kind": "microbench", "verb": "read", "payload": "64B"},
    "run": {"seed": 3, "warmup": "5us", "measure": "5us"},
}


def scenario_file(tmp_path: Path, patch=None, text: str | None = None,
                  name: str = "scn.yaml") -> Path:
    """Write BASE (changed by ``patch(raw)``) or ``text`` to a YAML file; return its path."""
    p = tmp_path / name
    if text is None:
        raw = json.loads(json.dumps(BASE))
        if patch:
            patch(raw)
        text = yaml.safe_dump(raw, sort_keys=False)
    p.write_text(text)
    return p


def rejected(path: Path, *key_and_words: str, overrides: list[str] | None = None):
    """load_scenario(path) raises InputError naming the file, then each given fragment."""
    with pytest.raises(InputError) as e:
        load_scenario(path, overrides)
    msg = str(e.value)
    assert msg.startswith(f"{path}: "), msg
    assert e.value.source == str(path)
    for w in key_and_words:
        assert w in msg, (w, msg)
    return e.value


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


# =========================================================================== rejections
def test_unknown_key_lists_the_allowed_keys(tmp_path):
    """A misspelt key gives its key path and the allowed keys at that level."""
    p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(profle="cx3-qdr"))
    e = rejected(p, "cluster.nic.profle: unknown key (did you mean 'profile'?); "
                 "allowed keys here: overrides, per_node, profile")
    assert e.key == "cluster.nic.profle"


def test_unknown_key_without_a_close_match_suggests_nothing(tmp_path):
    """A key like no allowed one gets the allowed keys and no guess."""
    p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(vendor="acme"))
    e = rejected(p)
    assert str(e) == f"{p}: cluster.nic.vendor: unknown key; allowed keys here: overrides, " \
                     f"per_node, profile"


def test_misspelt_kind_and_swept_key_get_a_guess(tmp_path):
    """A misspelt ``kind`` and a misspelt swept key path name the closest valid one."""
    p = scenario_file(tmp_path, lambda r: r["workload"].update(kind="microbnch"))
    rejected(p, "workload.kind: one of: ", "(got 'microbnch'; did you mean 'microbench'?)")
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.paylod": [8, 16]}))
    rejected(p, "sweep.workload.paylod: a key path of the scenario such as workload.payload "
             "(did you mean 'workload.payload'?)")


def test_unknown_top_level_key(tmp_path):
    """An unknown top-level block is rejected with the allowed blocks."""
    p = scenario_file(tmp_path, lambda r: r.update(protocl={"kind": "occ"}))
    rejected(p, "protocl: unknown key", "cluster", "workload", "sweep")


def test_unknown_key_in_a_workload_variant(tmp_path):
    """Unknown keys inside the workload (a union variant) list that variant's keys."""
    p = scenario_file(tmp_path, lambda r: r["workload"].update(payloda=8))
    rejected(p, "workload.payloda: unknown key", "payload", "doorbell_batch")


def test_missing_required_key(tmp_path):
    """A missing required key is named."""
    p = scenario_file(tmp_path, lambda r: r["cluster"].pop("nodes"))
    e = rejected(p, "cluster.nodes: missing required key")
    assert e.key == "cluster.nodes"


def test_missing_name(tmp_path):
    """The scenario name is required."""
    p = scenario_file(tmp_path, lambda r: r.pop("name"))
    rejected(p, "name: missing required key")


@pytest.mark.parametrize("key, value, words", [
    (("cluster", "nodes"), "many", ["cluster.nodes", "valid integer", "'many'"]),
    (("cluster", "threads"), [1, 2], ["cluster.threads", "valid integer"]),
    (("workload", "inline"), "sometimes", ["workload.inline", "boolean"]),
    (("run", "seed"), 1.5, ["run.seed", "integer"]),
])
def test_wrong_type(tmp_path, key, value, words):
    """A value of the wrong type gives the key path, the expected type and the input."""
    p = scenario_file(tmp_path, lambda r: r[key[0]].update({key[1]: value}))
    rejected(p, *words)


def test_workload_must_be_a_mapping(tmp_path):
    """A scalar where a block is expected is rejected at that block."""
    p = scenario_file(tmp_path, lambda r: r.update(workload="microbench"))
    rejected(p, "workload: ", "dictionary")


@pytest.mark.parametrize("patch, words", [
    (lambda r: r["cluster"].update(nodes=0), ["cluster.nodes", "greater than or equal to 1"]),
    (lambda r: r["cluster"]["nic"].update(per_node=0), ["cluster.nic.per_node"]),
    (lambda r: r["workload"].update(verb="cas", payload=64), ["workload: ", "8-byte"]),
    (lambda r: r["workload"].update(verb="faa", payload="64B"), ["workload: ", "8-byte"]),
    (lambda r: r["workload"].update(verb="read", transport="ud"), ["workload: ", "rc"]),
    (lambda r: r["workload"].update(page_size="8KiB"), ["workload: ", "page_size"]),
    (lambda r: r["workload"].update(coroutines=0), ["workload.coroutines"]),
    (lambda r: r["run"].update(warmup=-5000), ["run.warmup", "non-negative"]),
    (lambda r: r["run"].update(measure="-5us"), ["run.measure", "duration"]),
    (lambda r: r["cluster"].update(topology={"kind": "leaf_spine", "leaves": 0,
                                             "spines": 1}), ["cluster.topology.leaves"]),
])
def test_impossible_values(tmp_path, patch, words):
    """Values that cannot describe a cluster or workload are rejected with their key path."""
    rejected(scenario_file(tmp_path, patch), *words)


def test_unknown_workload_kind(tmp_path):
    """An unknown workload kind names workload.kind and the known kinds."""
    p = scenario_file(tmp_path, lambda r: r["workload"].update(kind="tpcc"))
    rejected(p, "workload.kind", "microbench", "'tpcc'")


def test_unknown_topology_kind(tmp_path):
    """An unknown topology kind lists the known kinds."""
    p = scenario_file(tmp_path, lambda r: r["cluster"].update(topology={"kind": "torus"}))
    rejected(p, "cluster.topology.kind: one of: single_switch, leaf_spine (got 'torus')")


@pytest.mark.parametrize("nodes, leaves, spines, per_node, key, expected", [
    (80, 100, 2, 1, "cluster.topology.leaves",
     "a leaf count whose leaves all get a node: 80 nodes go 1 to a leaf in order and fill "
     "only 80 leaves (leaves: 80 fits), got 100"),
    (10, 6, 2, 1, "cluster.topology.leaves",
     "a leaf count whose leaves all get a node: 10 nodes go 2 to a leaf in order and fill "
     "only 5 leaves (leaves: 5 fits), got 6"),
    (4, 2, 9, 2, "cluster.topology.spines",
     "at most the NIC count (8: spine s carries the traffic to NICs s, s + spines, ...), "
     "got 9"),
])
def test_leaf_spine_that_does_not_fit_its_nodes(tmp_path, nodes, leaves, spines, per_node,
                                                key, expected):
    """A leaf_spine with a leaf no node lands on (nodes go ceil(nodes/leaves) to a leaf, in
    order) or a spine no route crosses (more spines than NICs) is refused at validation."""
    p = scenario_file(tmp_path, lambda r: r["cluster"].update(
        nodes=nodes, nic={"profile": "cx4-edr", "per_node": per_node},
        topology={"kind": "leaf_spine", "leaves": leaves, "spines": spines}))
    e = rejected(p)
    assert (e.key, e.expected) == (key, expected)


def test_leaf_spine_fits_every_swept_node_count(tmp_path, capsys):
    """The fit is checked at every sweep point: the point that does not fit is named, and
    ``rnicsim validate`` exits 2 with the message."""
    p = scenario_file(tmp_path, lambda r: (
        r["cluster"].update(topology={"kind": "leaf_spine", "leaves": 4, "spines": 2}),
        r.update(sweep={"cluster.nodes": [8, 3]})))
    code, out, err = cli(["validate", str(p)], capsys)
    assert code == 2 and out == ""
    assert err == (f"rnicsim validate: error: {p}: cluster.topology.leaves (sweep point "
                   f"cluster.nodes=3): a leaf count whose leaves all get a node: 3 nodes go 1 "
                   f"to a leaf in order and fill only 3 leaves (leaves: 3 fits), got 4\n")
    p = scenario_file(tmp_path, lambda r: (
        r["cluster"].update(topology={"kind": "leaf_spine", "leaves": 4, "spines": 2}),
        r.update(sweep={"cluster.nodes": [8, 4, 13]})))
    assert load_scenario(p).cluster.topology.leaves == 4


def test_unknown_claim_kind(tmp_path):
    """An unknown claim check kind lists the known kinds."""
    p = scenario_file(tmp_path, lambda r: r.update(expected=[
        {"claim": "D1", "role": "validation", "kind": "bigger", "metric": "throughput_mops", "published": 1}]))
    rejected(p, "expected[0].kind: one of: value, ratio, flat, dominates, drop, bound, ratio_bound, first_step (got 'bigger')")


@pytest.mark.parametrize("key, value, words", [
    (("run", "warmup"), "30 fortnights", ["run.warmup", "unknown unit 'fortnights'", "us"]),
    (("workload", "payload"), "64 parsecs", ["workload.payload", "unknown unit", "KiB"]),
    (("workload", "rpc_handler"), "fast", ["workload.rpc_handler", "duration"]),
])
def test_bad_unit_string(tmp_path, key, value, words):
    """A quantity with an unknown unit names the key and the units allowed."""
    p = scenario_file(tmp_path, lambda r: r[key[0]].update({key[1]: value}))
    rejected(p, *words)


def test_infinite_payload_is_an_input_error(tmp_path):
    """``payload: .inf`` is rejected like any other impossible size."""
    p = scenario_file(tmp_path, text=yaml.safe_dump(BASE).replace("payload: 64B",
                                                                  "payload: .inf"))
    rejected(p, "workload.payload")


def test_nan_duration_is_rejected(tmp_path):
    """``warmup: .nan`` is not a duration."""
    p = scenario_file(tmp_path, text=yaml.safe_dump(BASE).replace("warmup: 5us",
                                                                  "warmup: .nan"))
    rejected(p, "run.warmup")


def test_ud_payload_above_the_mtu_is_an_input_error(tmp_path, capsys):
    """``rnicsim run`` rejects a UD RPC payload the NIC's MTU cannot carry, exit 2."""
    p = scenario_file(tmp_path, lambda r: (r["cluster"]["nic"].update(profile="cx3-qdr"),
                                           r["workload"].update(verb="rpc", payload="4KiB")))
    code, _out, err = cli(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2
    assert str(p) in err and "workload.payload" in err


def test_sweep_over_a_non_existent_key(tmp_path):
    """A sweep over a key the schema does not have is rejected at sweep.<key>."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.paylod": [8, 16]}))
    rejected(p, "sweep.workload.paylod", "key path")


def test_sweep_value_that_fails_validation(tmp_path):
    """A swept value that does not validate names the point and the key."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.payload": [8, "big"]}))
    rejected(p, "sweep (workload.payload=big)", "workload.payload", "size")


def test_sweep_combination_that_fails_a_cross_field_check(tmp_path):
    """A sweep point that is impossible only in combination (cas with 64 B) is rejected."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.verb": ["read", "cas"]}))
    rejected(p, "sweep (workload.verb=cas)", "8-byte")


def test_sweep_with_an_empty_list(tmp_path):
    """A swept key needs at least one value."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.payload": []}))
    rejected(p, "sweep.workload.payload", "non-empty")


def test_sweep_exclude_names_only_swept_keys(tmp_path):
    """sweep_exclude may only name keys of the sweep."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 16]}, sweep_exclude=[{"cluster.threads": 2}]))
    rejected(p, "sweep_exclude[0].cluster.threads", "a key of sweep")


def test_unknown_size_in_set_run_size(tmp_path):
    """``--set run.size=NAME`` with an undefined size lists the sizes defined."""
    p = scenario_file(tmp_path, lambda r: r.update(sizes={"demo": {"run.measure": "2us"}}))
    rejected(p, "run.size", "demo", overrides=["run.size=huge"])


def test_unknown_size_via_the_cli(tmp_path, capsys):
    """``rnicsim validate FILE --set run.size=huge`` exits 2 naming file and run.size."""
    p = scenario_file(tmp_path)
    code, out, err = cli(["validate", str(p), "--set", "run.size=huge"], capsys)
    assert code == 2 and out == ""
    assert f"{p}: run.size" in err and "Traceback" not in err


def test_unknown_profile_name_exits_2_listing_profiles(tmp_path, capsys):
    """An unknown NIC profile makes ``rnicsim validate`` exit 2, listing the profiles."""
    p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(profile="cx9-xdr"))
    code, _out, err = cli(["validate", str(p)], capsys)
    assert code == 2
    assert "cx9-xdr" in err and "cx4-edr" in err and "cx3-qdr" in err


def test_unknown_profile_name_names_file_and_key_path(tmp_path, capsys):
    """The unknown-profile error names the scenario file and cluster.nic.profile."""
    p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(profile="cx9-xdr"))
    code, _out, err = cli(["validate", str(p)], capsys)
    assert code == 2
    assert str(p) in err and "cluster.nic.profile" in err


def test_bad_profile_override_names_the_file(tmp_path, capsys):
    """A misspelt profile override is rejected naming the file and the override's key."""
    p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(
        overrides={"pcie.latncy": "300ns"}))
    code, _out, err = cli(["validate", str(p)], capsys)
    assert code == 2
    assert str(p) in err and "pcie.latncy" in err


def test_missing_file(tmp_path, capsys):
    """A missing scenario file is named; the CLI exits 2 without a traceback."""
    p = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match=re.escape(f"{p}: an existing scenario YAML")):
        load_scenario(p)
    code, _out, err = cli(["validate", str(p)], capsys)
    assert code == 2 and str(p) in err and "Traceback" not in err


def test_invalid_yaml(tmp_path, capsys):
    """Invalid YAML names the file and the line."""
    p = scenario_file(tmp_path, text="name: x\ncluster: {nodes: 2\nworkload: {}\n")
    e = rejected(p, "valid YAML")
    assert e.key.startswith("line ")
    code, _out, err = cli(["run", str(p), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and f"{p}: line" in err


def test_a_yaml_list_is_not_a_scenario(tmp_path):
    """A file whose top level is not a mapping is rejected."""
    rejected(scenario_file(tmp_path, text="- 1\n- 2\n"), "a mapping")


def test_cli_run_needs_out(tmp_path, capsys):
    """``rnicsim run FILE`` without --out exits 2 with argparse's message."""
    code, _out, err = cli(["run", str(scenario_file(tmp_path))], capsys)
    assert code == 2 and "--out" in err


def test_a_directory_is_not_a_scenario_file(tmp_path, capsys):
    """A directory given as the scenario exits 2 naming it, for validate and run."""
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(InputError, match="directory"):
        load_scenario(d)
    for args in (["validate", str(d)], ["run", str(d), "--out", str(tmp_path / "o")]):
        code, _out, err = cli(args, capsys)
        assert code == 2 and f"{d}: " in err and "Traceback" not in err


def test_a_binary_file_is_not_a_scenario_file(tmp_path):
    """A file that is not UTF-8 text is refused naming the file."""
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00name: x\n")
    rejected(p, "UTF-8")


@pytest.mark.parametrize("text, line, words", [
    ("name: a\nname: b\n", 2, ["'name' is repeated", "first at line 1"]),
    ("name: a\ncluster: {nodes: 2, nodes: 3}\n", 2, ["'nodes' is repeated", "column 11"]),
])
def test_a_repeated_key_is_rejected(tmp_path, text, line, words):
    """A key given twice in one mapping is refused with its line (YAML keeps the last)."""
    e = rejected(scenario_file(tmp_path, text=text), *words)
    assert e.key.startswith(f"line {line}")


def test_a_merge_key_may_be_overridden():
    """``<<: *anchor`` followed by one of the anchor's keys is not a repeated key."""
    from rnicsim.yamlio import load_yaml

    assert load_yaml("a: &x {n: 1, m: 1}\nb: {<<: *x, n: 2}\n", "f.yaml") == \
        {"a": {"n": 1, "m": 1}, "b": {"n": 2, "m": 1}}


@pytest.mark.parametrize("patch, key", [
    (lambda r: r.update(expected=[{"claim": "C", "role": "validation", "kind": "value", "metric": "m",
                                   "published": 1, "where": {"workload.payload": {"lte": 64}}}]),
     "expected[0].where.workload.payload"),
    (lambda r: r.update(sweep={"workload.payload": [8, 64]}, expected=[
        {"claim": "C", "role": "validation", "kind": "flat", "metric": "m", "published": 1,
         "over": "workload.payload", "range": {"lte": 64}}]), "expected[0].range"),
    (lambda r: r.update(sweep={"workload.payload": [8, 64]}, expected=[
        {"claim": "C", "role": "validation", "kind": "ratio", "metric": "m", "published": 1,
         "over": "workload.payload", "numerator": {"workload.payload": {"eq": 8}},
         "denominator": {}}]), "expected[0].numerator.workload.payload"),
    (lambda r: r.update(sweep={"workload.payload": [8, 64]},
                        sweep_exclude=[{"workload.payload": {"nq": 8}}]),
     "sweep_exclude[0].workload.payload"),
    (lambda r: r.update(plots=[{"x": "workload.payload", "y": "m",
                                "where": {"workload.payload": {"lte": 64}}}]),
     "plots[0].where.workload.payload"),
])
def test_an_unknown_condition_test_is_rejected_at_load(tmp_path, patch, key):
    """A condition test other than le, lt, ge, gt, ne, in is refused at its key path before
    anything runs (it used to pass validate and crash after the run)."""
    e = rejected(scenario_file(tmp_path, patch), key, "le, lt, ge, gt, ne, in")
    assert e.key == key


def test_an_in_test_needs_a_list(tmp_path):
    """``{in: 8}`` is refused: ``in`` takes a list of values."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64]}, sweep_exclude=[{"workload.payload": {"in": 8}}]))
    rejected(p, "sweep_exclude[0].workload.payload", "a list")


def test_a_claim_over_a_key_that_is_not_swept(tmp_path):
    """A claim's dotted ``over`` must be a swept key (it used to raise KeyError after every
    point ran); a name without a dot may be a metric such as ``step``."""
    def claim(over):
        return lambda r: r.update(sweep={"workload.payload": [8, 64]}, expected=[
            {"claim": "C", "role": "validation", "kind": "ratio", "metric": "m", "published": 1, "over": over,
             "numerator": {}, "denominator": {}}])
    rejected(scenario_file(tmp_path, claim("workload.paylod")), "expected[0].over",
             "workload.payload", "'workload.paylod'")
    rejected(scenario_file(tmp_path, claim("cluster.threads"), name="t.yaml"),
             "expected[0].over")
    assert load_scenario(scenario_file(tmp_path, claim("step"), name="s.yaml")).expected


@pytest.mark.parametrize("plot, key", [
    ({"x": "workload.paylod", "y": "throughput_mops"}, "plots[0].x"),
    ({"x": "workload.payload", "y": "m", "series": "workload.vrb"}, "plots[0].series"),
    ({"x": "workload.payload", "y": "m", "series": ["workload.verb", "cluster.nodez"]},
     "plots[0].series[1]"),
    ({"x": "workload.payload", "y": "m", "where": {"workload.vrb": "read"}},
     "plots[0].where.workload.vrb"),
])
def test_a_plot_naming_an_unknown_key_path(tmp_path, plot, key):
    """Dotted names in a plot are key paths: a misspelt one is refused at load."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.payload": [8, 64]},
                                                   plots=[plot]))
    e = rejected(p, key, "a swept key (workload.payload)")
    assert e.key == key


def test_plot_and_claim_names_that_may_be_metrics_or_keys_load(tmp_path):
    """Undotted names (metrics) and key paths of the scenario, swept or not, are accepted."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64]},
        plots=[{"x": "step", "y": "m", "series": ["workload.verb", "workload.payload"],
                "where": {"cluster.threads": 1}}],
        expected=[{"claim": "C", "role": "validation", "kind": "value", "metric": "m", "published": 1,
                   "where": {"workload.verb": "read", "step": 0}}]))
    assert len(load_scenario(p).plots) == 1


def test_a_claim_naming_an_unknown_key_path(tmp_path):
    """A misspelt key path in a claim's condition is refused at load."""
    p = scenario_file(tmp_path, lambda r: r.update(expected=[
        {"claim": "C", "role": "validation", "kind": "value", "metric": "m", "published": 1,
         "where": {"workload.vrb": "read"}}]))
    rejected(p, "expected[0].where.workload.vrb")


@pytest.mark.parametrize("file, words", [
    ("plot.txt", [".png", ".pdf", ".svg", "'plot.txt'"]),
    ("plot", [".png"]),
    ("../../escape.png", ["directory"]),
    ("/tmp/abs.png", ["directory"]),
    ("sub/plot.png", ["directory"]),
])
def test_a_plot_file_must_be_an_image_inside_out(tmp_path, file, words):
    """A plot file needs an extension matplotlib writes and no directory part (it used to
    fail in matplotlib after the run, or write outside --out)."""
    p = scenario_file(tmp_path, lambda r: r.update(
        plots=[{"x": "workload.payload", "y": "m", "file": file}]))
    rejected(p, "plots[0].file", *words)


def test_plot_files_in_other_formats_load(tmp_path):
    """pdf and svg are plot formats too."""
    p = scenario_file(tmp_path, lambda r: r.update(plots=[
        {"x": "workload.payload", "y": "m", "file": "a.pdf"},
        {"x": "workload.payload", "y": "m", "file": "b.SVG"}]))
    assert [pl.file for pl in load_scenario(p).plots] == ["a.pdf", "b.SVG"]


@pytest.mark.parametrize("patch, words", [
    (lambda r: r["cluster"].update(nodes=1), ["cluster.nodes", "at least 2"]),
    (lambda r: r["workload"].update(mode="client_server", servers=2),
     ["workload.servers", "fewer than cluster.nodes (2)"]),
])
def test_a_microbench_needs_a_peer(tmp_path, capsys, patch, words):
    """A microbench on one node (or with no client left) is refused before running (it
    used to crash in the workload with ``high <= 0``)."""
    p = scenario_file(tmp_path, patch)
    rejected(p, *words)
    code, _out, err = cli(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and "Traceback" not in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("patch, key, words", [
    pytest.param(lambda r: r["workload"].update(payload="1GiB"), "workload.payload",
                 ["registered region", "67108864 B", "got 1073741824 B"],
                 id="microbench payload above the region"),
    pytest.param(lambda r: r.update(workload={"kind": "txn", "benchmark": "smallbank"}),
                 "protocol.kind", ["occ", "got 'raw_verbs'"], id="txn without occ"),
    pytest.param(lambda r: (r["cluster"].update(nodes=1), r.update(workload={"kind": "rpc"})),
                 "cluster.nodes", ["at least 2", "got 1"], id="rpc on one node"),
    pytest.param(lambda r: r.update(workload={"kind": "rpc", "transport": "rc",
                                              "reply": "5000B"}),
                 "workload.reply", ["at most 4128 B", "transport rc", "got 5000 B"],
                 id="rpc rc reply above the receive buffer"),
    pytest.param(lambda r: r.update(workload={"kind": "rpc", "transport": "write_imm",
                                              "request": "2MiB"}),
                 "workload.request", ["at most 1048568 B", "write_imm"],
                 id="rpc write_imm request above the ring"),
    pytest.param(lambda r: r.update(workload={"kind": "remote_read", "clients": 1,
                                              "server_procs": 1, "method": "send_send_poll",
                                              "payload": "64KiB"}),
                 "workload.payload", ["at most 4136 B", "send_send_poll", "got 65536 B"],
                 id="remote_read reply above the receive buffer"),
    pytest.param(lambda r: r.update(workload={"kind": "remote_read", "clients": 1,
                                              "server_procs": 1, "method": "send_send_intr",
                                              "request": "8KiB"}),
                 "workload.request", ["at most 4136 B", "send_send_intr", "got 8192 B"],
                 id="remote_read request above the receive buffer"),
])
def test_a_point_that_would_fail_while_running_is_refused_first(tmp_path, capsys, patch, key,
                                                                 words):
    """Settings the point runner used to reject only once the point was built or run
    (a traceback, exit 1) are refused before any point runs: exit 2 naming the file and
    key path, and no output directory."""
    p = scenario_file(tmp_path, patch)
    e = rejected(p, key, *words)
    assert e.key.startswith(key)
    out = tmp_path / "o"
    code, _out, err = cli(["run", str(p), "--out", str(out), "--quiet"], capsys)
    assert code == 2, err
    assert f"{p}: {key}" in err and "Traceback" not in err
    assert not out.exists() and _leftovers(tmp_path) == []


def _run_plotted(tmp_path, capsys, text: str) -> tuple[list[dict], str]:
    """Run ``text`` (a TINY variant with its plot) with a 1-ns window; it must succeed and
    draw the plot. Returns the result rows and stderr."""
    text = text.replace("measure: 5us", "measure: 1ns")
    out = tmp_path / "out"
    code, _out, err = cli(["run", str(scenario_file(tmp_path, text=text)), "--out",
                           str(out), "--quiet"], capsys)
    assert code == 0, err
    assert (out / "tput.png").exists()
    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f)), err


def test_a_log_axis_with_nothing_positive_is_drawn_linear(tmp_path, capsys):
    """A ``logy`` plot whose values are all 0 (a window too short for any operation to
    complete) no longer makes matplotlib fail the run after every point ran: the axis is
    drawn linear with a warning and the results are written."""
    text = TINY.replace("y: throughput_mops, file: tput.png}",
                        "y: throughput_mops, logy: true, file: tput.png}")
    rows, err = _run_plotted(tmp_path, capsys, text)
    assert [float(r["throughput_mops"]) for r in rows] == [0.0, 0.0]
    assert "plots[0].logy" in err and "drawn linear" in err


def test_a_log_x_axis_of_unit_strings_is_drawn_by_their_value(tmp_path, capsys):
    """A swept key written with units (``64B``) is placed on a ``logx`` axis by its
    number of bytes; it used to be a category at position 0, which made matplotlib fail
    the run after every point ran (here with nothing on the y axis to widen the view)."""
    text = TINY.replace("sweep: {workload.payload: [8, 64]}", "sweep: {workload.payload: [64B]}")
    text = text.replace("y: throughput_mops, file: tput.png}",
                        "y: lat_p50_us, logx: true, file: tput.png}")
    rows, err = _run_plotted(tmp_path, capsys, text)
    assert [r["lat_p50_us"] for r in rows] == ["nan"]
    assert "warning" not in err


def test_an_x_axis_of_mixed_values_is_drawn_as_categories(tmp_path, capsys):
    """A swept key whose values are not all numbers (here ``null`` and 16) is drawn as
    categories named by the values; ordering them used to raise TypeError (None < int)
    after every point had run, which lost the results. ``logx`` on it is refused with a
    warning (categories have no log scale)."""
    text = TINY.replace("sweep: {workload.payload: [8, 64]}",
                        "sweep: {workload.inline_max: [null, 16]}")
    text = text.replace("y: throughput_mops, file: tput.png}",
                        "y: throughput_mops, logx: true, file: tput.png}")
    text = text.replace("x: workload.payload", "x: workload.inline_max")
    rows, err = _run_plotted(tmp_path, capsys, text)
    assert [r["workload.inline_max"] for r in rows] == ["", "16"]
    assert "plots[0].logx: values that are not numbers" in err


def test_a_plot_that_fails_is_left_out_and_the_results_are_written(tmp_path, capsys,
                                                                   monkeypatch):
    """Whatever makes a plot fail (here a stand-in error from inside the drawing), the run
    still writes its results and the other files, warns naming the plot and exits 0:
    plots are drawn after every point has run, and a figure must not cost the results."""
    import rnicsim.plots

    def broken(v):
        raise RuntimeError("stand-in plotting failure")

    monkeypatch.setattr(rnicsim.plots, "_is_number", broken)
    out = tmp_path / "out"
    code, _out, err = cli(["run", str(scenario_file(tmp_path, text=TINY)), "--out", str(out),
                           "--quiet"], capsys)
    assert code == 0, err
    assert sorted(f.name for f in out.iterdir()) == [
        "points", "results.csv", "rnicsim-manifest.json", "scenario.resolved.yaml",
        "summary.json", "timing.json"]
    assert "plots[0] not drawn (RuntimeError: stand-in plotting failure)" in err
    assert json.loads((out / "summary.json").read_text())["plots"] == []


@pytest.mark.parametrize("patch, key", [
    (lambda r: r["cluster"].update(nodes=True), "cluster.nodes"),
    (lambda r: r["workload"].update(coroutines=True), "workload.coroutines"),
    (lambda r: r["cluster"]["nic"].update(per_node=True), "cluster.nic.per_node"),
    (lambda r: r.update(expected=[{"claim": "C", "role": "validation", "kind": "value", "metric": "m",
                                   "published": True}]), "expected[0].published"),
])
def test_a_boolean_is_not_a_number(tmp_path, patch, key):
    """``nodes: true`` is refused (pydantic's lax mode read it as 1)."""
    e = rejected(scenario_file(tmp_path, patch), key, "not a boolean")
    assert e.key == key


def test_a_boolean_is_not_a_number_in_set_or_a_sweep(tmp_path):
    """The same holds for ``--set`` values and swept values; booleans stay booleans where
    the schema wants one."""
    p = scenario_file(tmp_path)
    rejected(p, "cluster.nodes", "not a boolean", overrides=["cluster.nodes=true"])
    rejected(scenario_file(tmp_path, lambda r: r.update(sweep={"cluster.threads": [1, True]}),
                           name="s.yaml"), "sweep (cluster.threads=True)", "not a boolean")
    assert load_scenario(p, ["workload.shared_context=true"]).workload.shared_context is True


@pytest.mark.parametrize("override, key", [
    ("workload.block=0", "workload.block"),
    ("workload.message=0", "workload.message"),
])
def test_rdmc_block_and_message_are_positive(override, key):
    """RDMC's block and message sizes are at least 1 byte (0 used to crash the run)."""
    p = Path(__file__).parents[2] / "scenarios/rdmc/example_pipeline_vs_chain.yaml"
    rejected(p, key, "greater than or equal to 1", overrides=[override])


def test_measure_must_be_positive(tmp_path):
    """An empty measured window is refused (it measured 0 operations)."""
    rejected(scenario_file(tmp_path, lambda r: r["run"].update(measure="0us")),
             "run.measure", "greater than 0")


def test_sweep_exclude_that_removes_every_point(tmp_path, capsys):
    """A sweep_exclude leaving no point is an error, not an empty run with exit 0."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64]}, sweep_exclude=[{"workload.payload": {"ge": 8}}]))
    rejected(p, "sweep_exclude", "at least one point")
    code, _out, err = cli(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and not (tmp_path / "o").exists()


def test_a_size_that_is_not_a_mapping(tmp_path):
    """``sizes: {demo: 3}`` is refused at sizes.demo when selected."""
    p = scenario_file(tmp_path, lambda r: r.update(sizes={"demo": 3}))
    rejected(p, "sizes.demo", "mapping", overrides=["run.size=demo"])


# =========================================================================== overrides
def test_set_overrides_go_through_the_schema(tmp_path):
    """``--set`` values are parsed as YAML and validated like the file."""
    p = scenario_file(tmp_path)
    sc = load_scenario(p, ["cluster.nodes=3", "workload.payload=4KiB", "run.warmup=1us"])
    assert (sc.cluster.nodes, sc.workload.payload, sc.run.warmup) == (3, 4096, 1000.0)
    rejected(p, "cluster.nodez: unknown key", "nodes", overrides=["cluster.nodez=3"])
    rejected(p, "cluster.nodes", "greater than or equal to 1",
             overrides=["cluster.nodes=-1"])
    rejected(p, "workload.payload", "unknown unit", overrides=["workload.payload=3 furlongs"])


def test_set_without_equals_is_rejected(tmp_path, capsys):
    """``--set cluster.nodes`` (no value) exits 2 naming --set."""
    code, _out, err = cli(["validate", str(scenario_file(tmp_path)), "--set",
                           "cluster.nodes"], capsys)
    assert code == 2 and "--set" in err


def test_set_can_replace_a_sweep(tmp_path):
    """``--set sweep.KEY=[...]`` replaces that sweep list."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={"workload.payload": [8, 16]}))
    sc = load_scenario(p, ["sweep.workload.payload=[32, 64, 128]"])
    assert [v["workload.payload"] for v, _ in points(sc)] == [32, 64, 128]


def test_sizes_apply_their_overrides(tmp_path):
    """A named size overrides keys and sweeps when selected, and only then."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 16, 32]},
        sizes={"demo": {"run.measure": "2us", "sweep.workload.payload": [8]}}))
    full = load_scenario(p)
    demo = load_scenario(p, ["run.size=demo"])
    assert (full.run.measure, len(points(full))) == (5000.0, 3)
    assert (demo.run.measure, len(points(demo)), demo.run.size) == (2000.0, 1, "demo")


def test_seed_override(tmp_path):
    """The seed argument replaces run.seed."""
    assert load_scenario(scenario_file(tmp_path), seed=42).run.seed == 42


def test_set_with_an_empty_key_is_rejected(tmp_path, capsys):
    """``--set =3`` and ``--set a..b=3`` name --set, not an empty key of the file."""
    for bad in ("=3", " =3", "cluster..nodes=3", "cluster.=3"):
        code, _out, err = cli(["validate", str(scenario_file(tmp_path)), "--set", bad],
                              capsys)
        assert code == 2 and "command line: --set" in err and repr(bad) in err, err


def test_set_wins_over_the_size(tmp_path):
    """An explicit ``--set`` beats the selected size's value for the same key, in either
    order on the command line; keys the size sets and --set does not keep the size's."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sizes={"smoke": {"cluster.nodes": 3, "cluster.threads": 4}}))
    for ov in (["run.size=smoke", "cluster.nodes=5"], ["cluster.nodes=5", "run.size=smoke"]):
        sc = load_scenario(p, ov)
        assert (sc.run.size, sc.cluster.nodes, sc.cluster.threads) == ("smoke", 5, 4)


def test_set_sweep_wins_over_the_size_sweep(tmp_path):
    """``--set sweep.KEY=[...]`` beats the size's list for that key."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.coroutines": [1, 4, 8]},
        sizes={"smoke": {"sweep.workload.coroutines": [1]}}))
    sc = load_scenario(p, ["run.size=smoke", "sweep.workload.coroutines=[2]"])
    assert [v["workload.coroutines"] for v, _ in points(sc)] == [2]


def test_set_of_a_swept_key_runs_that_value_only(tmp_path):
    """``--set workload.payload=16`` on a swept key replaces the sweep by [16], so every
    row carries 16 and sweep_exclude keeps its key."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64], "cluster.threads": [1, 2]},
        sweep_exclude=[{"workload.payload": 8, "cluster.threads": 2}],
        sizes={"demo": {"sweep.workload.payload": [8]}}))
    for ov in (["workload.payload=16"], ["run.size=demo", "workload.payload=16"]):
        pts = points(load_scenario(p, ov))
        assert [tuple(v.values()) for v, _ in pts] == [(16, 1), (16, 2)]
        assert all(sc.workload.payload == 16 for _, sc in pts)


def test_set_cannot_edit_a_size(tmp_path):
    """``--set sizes.demo...`` would come too late to matter: it is refused."""
    p = scenario_file(tmp_path, lambda r: r.update(sizes={"demo": {"run.measure": "2us"}}))
    rejected(p, "--set sizes.demo.run.measure", "run.size=NAME",
             overrides=["sizes.demo.run.measure=1us"])


def test_errors_of_a_selected_size_name_the_size(tmp_path):
    """A bad entry of the selected size is reported at sizes.<name>.<key>."""
    p = scenario_file(tmp_path, lambda r: r.update(sizes={"demo": {"run.measure": "three us"}}))
    e = rejected(p, "sizes.demo.run.measure", "duration", overrides=["run.size=demo"])
    assert e.key == "sizes.demo.run.measure"
    assert load_scenario(p, ["run.size=demo", "run.measure=3us"]).run.measure == 3000.0


# =========================================================================== sweep points
def test_points_without_sweep_is_one_point(tmp_path):
    """A scenario without a sweep has one point with no swept values."""
    sc = load_scenario(scenario_file(tmp_path))
    assert points(sc) == [({}, sc)]


def test_points_expand_a_cartesian_product_in_order(tmp_path):
    """Sweeps expand as a cartesian product, first key outermost, values in file order, and
    each point's scenario carries its values."""
    p = scenario_file(tmp_path, lambda r: r.update(sweep={
        "workload.verb": ["write", "read"], "cluster.threads": [2, 1, 4]}))
    pts = points(load_scenario(p))
    assert [tuple(v.values()) for v, _ in pts] == [
        ("write", 2), ("write", 1), ("write", 4), ("read", 2), ("read", 1), ("read", 4)]
    for vals, sc in pts:
        assert (sc.workload.verb, sc.cluster.threads) == \
            (vals["workload.verb"], vals["cluster.threads"])
        assert not sc.sweep and sc.workload.payload == 64


def test_points_honour_sweep_exclude(tmp_path):
    """Combinations matching a sweep_exclude condition are skipped, including conditions
    with units and comparison operators."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.verb": ["read", "cas"], "workload.payload": [8, 64, "4KiB"]},
        sweep_exclude=[{"workload.verb": "cas", "workload.payload": {"ne": "8B"}},
                       {"workload.verb": "read", "workload.payload": {"gt": "1KiB"}}]))
    pts = points(load_scenario(p))
    assert [tuple(v.values()) for v, _ in pts] == [("read", 8), ("read", 64), ("cas", 8)]


# =========================================================================== resolved copy
def test_resolved_yaml_round_trips_through_validation(tmp_path):
    """The resolved YAML, with every default filled in, validates to the same scenario."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64]},
        plots=[{"x": "workload.payload", "y": "throughput_mops"}],
        expected=[{"claim": "T1", "role": "validation", "kind": "value", "metric": "throughput_mops",
                   "published": 1.0}]))
    sc = load_scenario(p)
    text = resolved_yaml(sc)
    again = resolve(yaml.safe_load(text), "scenario.resolved.yaml")
    assert again == sc
    assert resolved_yaml(again) == text
    raw = yaml.safe_load(text)
    assert raw["workload"]["doorbell_batch"] == 1          # defaults are written out
    assert raw["cluster"]["topology"] == {"kind": "single_switch"}


def test_resolved_yaml_keeps_durations_exact(tmp_path):
    """A 7-digit duration survives the resolved copy exactly."""
    p = scenario_file(tmp_path, lambda r: r["run"].update(warmup="1234567ns"))
    sc = load_scenario(p)
    again = resolve(yaml.safe_load(resolved_yaml(sc)), "scenario.resolved.yaml")
    assert again.run.warmup == sc.run.warmup == 1234567.0


# =========================================================================== rnicsim run
TINY = """\
version: 1
name: tiny
cluster: {nodes: 2, nic: {profile: cx4-edr}, threads: 1}
workload: {kind: microbench, verb: read, payload: 64B}
run: {seed: 3, warmup: 5us, measure: 5us}
sweep: {workload.payload: [8, 64]}
plots:
  - {x: workload.payload, y: throughput_mops, file: tput.png}
expected:
  - {claim: T1, role: validation, kind: value, metric: throughput_mops, published: 1.0, tolerance: 1000}
"""


def test_run_writes_results_summary_resolved_and_plot(tmp_path, capsys):
    """``rnicsim run`` on a tiny 2-point scenario writes results.csv (swept parameters first,
    one row per point in sweep order), summary.json, scenario.resolved.yaml and the PNG."""
    p = scenario_file(tmp_path, text=TINY)
    out = tmp_path / "out"
    code, stdout, _err = cli(["run", str(p), "--out", str(out), "--quiet"], capsys)
    assert code == 0
    assert sorted(f.name for f in out.iterdir()) == [
        "points", "results.csv", "rnicsim-manifest.json", "scenario.resolved.yaml",
        "summary.json", "timing.json", "tput.png"]
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
        header = rows and list(rows[0])
    assert header[0] == "workload.payload"
    assert {"throughput_mops", "lat_p50_us", "measure_us"} <= set(header[1:])
    assert [r["workload.payload"] for r in rows] == ["8", "64"]
    assert all(float(r["throughput_mops"]) > 0 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points"] == 2 and summary["scenario"] == "tiny"
    assert [c["claim"] for c in summary["claims"]] == ["T1"]
    assert summary["claims"][0]["holds"] is True
    assert summary["claims"][0]["measured"] == pytest.approx(
        max(float(r["throughput_mops"]) for r in rows), rel=1e-5)
    assert summary["plots"] == ["tput.png"]
    assert (out / "tput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    resolved = load_scenario(out / "scenario.resolved.yaml")
    assert resolved == load_scenario(p)
    assert "T1" in stdout and "holds" in stdout


def test_a_plot_matching_no_row_is_not_drawn(tmp_path, capsys):
    """A plot whose ``where`` selects nothing (a series the size left out) writes no file
    and is not listed; the others are drawn."""
    text = TINY.replace("  - {x: workload.payload, y: throughput_mops, file: tput.png}\n",
                        "  - {x: workload.payload, y: throughput_mops, file: tput.png}\n"
                        "  - {x: workload.payload, y: throughput_mops, file: none.png,\n"
                        "     where: {workload.verb: write}}\n")
    assert text != TINY
    out = tmp_path / "out"
    code, _out, _err = cli(["run", str(scenario_file(tmp_path, text=text)), "--out",
                            str(out), "--quiet"], capsys)
    assert code == 0
    assert json.loads((out / "summary.json").read_text())["plots"] == ["tput.png"]
    assert not (out / "none.png").exists()


def test_run_is_deterministic(tmp_path, capsys):
    """Two runs of the same scenario write identical results.csv files."""
    p = scenario_file(tmp_path, text=TINY)
    for d in ("a", "b"):
        assert cli(["run", str(p), "--out", str(tmp_path / d), "--quiet"], capsys)[0] == 0
    assert (tmp_path / "a" / "results.csv").read_text() == \
        (tmp_path / "b" / "results.csv").read_text()


def _leftovers(parent: Path) -> list[str]:
    return [f.name for f in parent.iterdir() if f.name.startswith(".rnicsim-")]


def test_a_failing_point_leaves_no_results(tmp_path, capsys, monkeypatch):
    """When a point raises, the others still run, and the run exits 1 naming the point and
    writes neither results.csv nor temp files."""
    real = rnicsim.runner.run_point
    calls = []

    def flaky(sc):
        calls.append(sc)
        if len(calls) == 2:
            raise RuntimeError("boom in point 2")
        return real(sc)

    monkeypatch.setattr(rnicsim.runner, "run_point", flaky)
    p = scenario_file(tmp_path, text=TINY)
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--quiet"]) == 1
    assert "point 1 (workload.payload=64): RuntimeError: boom in point 2" in \
        capsys.readouterr().err
    assert len(calls) == 2
    assert not (out / "results.csv").exists() and not (out / "summary.json").exists()
    assert _leftovers(tmp_path) == []


def test_a_failure_while_writing_leaves_no_results(tmp_path, monkeypatch):
    """When plotting fails after results were staged, nothing reaches the output folder."""
    import rnicsim.plots

    def broken(*_a, **_k):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(rnicsim.plots, "make_plots", broken)
    p = scenario_file(tmp_path, text=TINY)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="plotting failed"):
        main(["run", str(p), "--out", str(out), "--quiet"])
    assert not (out / "results.csv").exists()
    assert _leftovers(tmp_path) == []


def test_run_rejects_an_out_path_that_is_a_file(tmp_path, capsys):
    """``--out`` naming an existing file exits 2."""
    f = tmp_path / "taken"
    f.write_text("x")
    code, _out, err = cli(["run", str(scenario_file(tmp_path, text=TINY)), "--out", str(f),
                           "--quiet"], capsys)
    assert code == 2 and "--out" in err


@pytest.mark.parametrize("out", ["file/sub", ""])
def test_run_refuses_an_out_that_cannot_be_made_before_running(tmp_path, capsys,
                                                                monkeypatch, out):
    """``--out`` below a file, or empty, exits 2 naming --out before any point runs (it
    used to crash after running them all, or write to /results.csv)."""
    (tmp_path / "file").write_text("x")
    calls = []
    monkeypatch.setattr(rnicsim.runner, "run_point", lambda sc: calls.append(sc) or {})
    target = str(tmp_path / out) if out else ""
    code, stdout, err = cli(["run", str(scenario_file(tmp_path, text=TINY)), "--out", target,
                             "--quiet"], capsys)
    assert code == 2 and "--out" in err and "Traceback" not in err
    assert calls == [] and stdout == ""
    assert _leftovers(tmp_path) == []


def test_run_warns_about_names_no_result_has(tmp_path, capsys):
    """A plot axis or claim metric naming no column gives a warning on stderr naming it and
    the columns; the run still succeeds (its results are valid)."""
    text = TINY.replace("y: throughput_mops, file", "y: throughput_mopz, file").replace(
        "metric: throughput_mops,", "metric: throughput_mopz,")
    assert text.count("mopz") == 2
    out = tmp_path / "out"
    code, _stdout, err = cli(["run", str(scenario_file(tmp_path, text=text)), "--out",
                              str(out), "--quiet"], capsys)
    assert code == 0 and (out / "results.csv").exists()
    lines = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(lines) == 2, err
    assert "plots[0].y" in lines[0] and "'throughput_mopz'" in lines[0]
    assert "expected[0].metric" in lines[1] and "throughput_mops," in lines[1]


def test_a_transaction_point_that_committed_nothing_is_warned_about():
    """A txn point with ``committed`` 0 (its window shorter than one transaction, e.g.
    CALVIN's epochs at 76 nodes in a demo window) is named on stderr with its swept
    values, its window and the key to lengthen; points that committed, and rows of
    other workloads (no ``committed``), are not."""
    from rnicsim.runner import empty_points

    recs = [{"index": 0, "values": {"cluster.nodes": 4, "protocol.kind": "calvin"},
             "metrics": {"committed": 12.0, "measure_us": 201.0}},
            {"index": 1, "values": {"cluster.nodes": 76, "protocol.kind": "calvin"},
             "metrics": {"committed": 0.0, "measure_us": 201.0}},
            {"index": 2, "values": {}, "metrics": {"throughput_mops": 1.0}}]
    (line,) = empty_points(recs)
    assert line.startswith("point 2 (cluster.nodes=76, protocol.kind=calvin): no "
                           "transaction committed in its 201-us window")
    assert "run.measure" in line and "stalled" not in line


def test_a_transaction_point_with_stalled_transactions_is_warned_about():
    """A txn point whose ``stalled_txns`` is above 0 is named with the count and the
    retry hint: on its own line when it committed others, inside the empty-window line
    when it committed nothing; points with 0 (or without the metric) are not."""
    from rnicsim.runner import empty_points, stalled_points

    recs = [{"index": 0, "values": {"protocol.kind": "nowait"},
             "metrics": {"committed": 12.0, "stalled_txns": 2.0, "measure_us": 201.0}},
            {"index": 1, "values": {"protocol.kind": "occ"},
             "metrics": {"committed": 0.0, "stalled_txns": 3.0, "measure_us": 201.0}},
            {"index": 2, "values": {"protocol.kind": "mvcc"},
             "metrics": {"committed": 9.0, "stalled_txns": 0.0}},
            {"index": 3, "values": {}, "metrics": {"throughput_mops": 1.0}}]
    (line,) = stalled_points(recs)
    assert line.startswith("point 1 (protocol.kind=nowait): 2 transaction(s) retried")
    assert "--set protocol.retry_backoff=true" in line
    (empty,) = empty_points(recs)
    assert empty.startswith("point 2 (protocol.kind=occ): no transaction committed")
    assert "its 3 transaction(s) in flight through the whole window" in empty


# =========================================================================== claims
def claims(*specs: dict):
    ta = TypeAdapter(Claim)
    return [ta.validate_python({"claim": f"C{i}", "role": "validation", "metric": "m", **s})
            for i, s in enumerate(specs)]


ROWS = [
    {"verb": "read", "payload": 8, "m": 80.0},
    {"verb": "read", "payload": 64, "m": 60.0},
    {"verb": "read", "payload": 512, "m": 20.0},
    {"verb": "rpc", "payload": 8, "m": 50.0},
    {"verb": "rpc", "payload": 64, "m": 40.0},
    {"verb": "rpc", "payload": 512, "m": 25.0},
    {"verb": "rpc", "payload": 4096, "m": 5.0},
    {"verb": "cas", "payload": 8, "m": float("nan")},
]


@pytest.mark.parametrize("spec, measured, holds", [
    ({"kind": "value", "where": {"verb": "read"}, "published": 80}, 80.0, True),
    ({"kind": "value", "where": {"verb": "read"}, "published": 100}, 80.0, False),
    ({"kind": "value", "where": {"verb": "read"}, "agg": "min", "published": 20}, 20.0, True),
    ({"kind": "value", "where": {"verb": "rpc", "payload": {"le": "64B"}}, "agg": "mean",
      "published": 45, "tolerance": 0.01}, 45.0, True),
    ({"kind": "value", "where": {"verb": "cas"}, "published": 1}, math.nan, False),
    ({"kind": "ratio", "numerator": {"verb": "read"}, "denominator": {"verb": "rpc"},
      "over": "payload", "published": 1.6}, 1.6, True),
    ({"kind": "ratio", "numerator": {"verb": "read"}, "denominator": {"verb": "rpc"},
      "over": "payload", "range": {"gt": 8}, "published": 1.6, "tolerance": 0.05}, 1.5, False),
    ({"kind": "ratio", "numerator": {"verb": "read"}, "denominator": {"verb": "rpc"},
      "over": "payload", "agg": "min", "published": 0.8}, 0.8, True),
    # peak: best of each series (50 at 8 B over 80 at 8 B), not the best point ratio (1.25)
    ({"kind": "ratio", "numerator": {"verb": "rpc"}, "denominator": {"verb": "read"},
      "over": "payload", "agg": "peak", "published": 0.625}, 0.625, True),
    ({"kind": "ratio", "numerator": {"verb": "rpc"}, "denominator": {"verb": "read"},
      "over": "payload", "published": 0.625}, 1.25, False),
    ({"kind": "flat", "where": {"verb": "rpc"}, "over": "payload", "range": {"le": 64},
      "published": 0.25}, 0.2, True),
    ({"kind": "flat", "where": {"verb": "rpc"}, "over": "payload", "published": 0.5},
     0.9, False),
    ({"kind": "dominates", "a": {"verb": "read"}, "b": {"verb": "rpc"}, "over": "payload",
      "range": {"le": 64}, "published": 1}, 1.5, True),
    ({"kind": "dominates", "a": {"verb": "read"}, "b": {"verb": "rpc"}, "over": "payload",
      "published": 1}, 0.8, False),
    ({"kind": "drop", "a": {"verb": "rpc"}, "b": {"verb": "read"}, "over": "payload",
      "range": {"le": 64}, "published": 0.375}, 0.375, True),
    ({"kind": "drop", "a": {"verb": "rpc"}, "b": {"verb": "read"}, "over": "payload",
      "range": {"le": 64}, "published": 0.6}, 0.375, False),
])
def test_claims_evaluate(spec, measured, holds):
    """Each claim kind measures what its doc says and holds only within its tolerance."""
    [r] = evaluate(claims(spec), ROWS)
    if math.isnan(measured):
        assert math.isnan(r["measured"])
    else:
        assert r["measured"] == pytest.approx(measured, rel=1e-12)
    assert r["holds"] is holds
    assert (r["claim"], r["kind"], r["metric"]) == ("C0", spec["kind"], "m")


def test_claims_keep_their_order_and_published_values():
    """evaluate returns one record per claim, in order, with the published value."""
    out = evaluate(claims({"kind": "value", "published": 80},
                          {"kind": "value", "where": {"verb": "rpc"}, "published": 50}), ROWS)
    assert [(c["claim"], c["published"], c["holds"]) for c in out] == \
        [("C0", 80.0, True), ("C1", 50.0, True)]


def test_run_prints_claim_lines_and_a_narrowed_sweep_is_not_measured(tmp_path, capsys):
    """``rnicsim run`` prints the claim table and tally; a --set that narrows the sweep
    leaves the check on the other value ``not measured`` (never ``nan DOES NOT HOLD``)."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [64, 4096]},
        expected=[{"claim": "T1", "role": "validation", "kind": "bound",
                   "metric": "lat_p50_us", "published": 1, "min": 0,
                   "where": {"workload.payload": 4096}}]))
    code, out, _err = cli(["run", str(p), "--out", str(tmp_path / "o"), "--quiet",
                           "--set", "workload.payload=64"], capsys)
    assert code == 0
    assert out.splitlines()[:3] == [
        "claim  role        kind   compared                           test  published  "
        "measured      result",
        "T1     validation  bound  max of lat_p50_us at payload=4096  >= 0  1 us       not measured  "
        "not measured",
        "0 of 0 measured claim checks hold; 1 not measured (no point of the run selects them)"]
    assert "nan" not in out and "DOES NOT HOLD" not in out


def test_a_missing_metric_warns_only_for_a_claim_some_point_selects(tmp_path, capsys):
    """A claim metric no row has draws a warning naming the entry (a misspelling), unless
    the claim selects no point: a narrowed sweep may leave out the only points that have
    its column, and the claim reads ``not measured`` anyway. A missing ``over`` always
    warns."""
    def claim(metric, payload, over=None):
        c = {"claim": "T1", "role": "validation", "kind": "bound", "metric": metric,
             "published": 1, "min": 0, "where": {"workload.payload": payload}}
        if over:
            c.update(kind="dominates", a={"workload.payload": payload},
                     b={"workload.payload": payload}, over=over)
            del c["where"], c["min"]
        return c
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [64, 4096]},
        expected=[claim("lat_p50_usx", 64), claim("lat_p50_usx", 4096),
                  claim("lat_p50_us", 4096, over="stepx")]))
    code, _out, err = cli(["run", str(p), "--out", str(tmp_path / "o"), "--quiet",
                           "--set", "workload.payload=64"], capsys)
    assert code == 0
    warned = [line.split(":")[2].strip() for line in err.splitlines()
              if "no result has a column" in line]
    assert warned == ["expected[0].metric", "expected[2].over"], err


def test_a_claim_over_a_missing_column_is_not_measured():
    """A claim whose ``over`` no row has is ``not measured`` (NaN, holds None): not a
    KeyError, and not a failure."""
    [r] = evaluate(claims({"kind": "ratio", "numerator": {"verb": "read"},
                           "denominator": {"verb": "rpc"}, "over": "size",
                           "published": 1}), ROWS)
    assert math.isnan(r["measured"]) and r["holds"] is None
    assert r["status"] == "not measured"


@pytest.mark.parametrize("spec, status", [
    ({"kind": "value", "where": {"verb": "write"}, "published": 1}, "not measured"),
    ({"kind": "value", "where": {"verb": "cas"}, "published": 1}, "fails"),   # NaN metric
    ({"kind": "bound", "where": {"payload": 9}, "published": 1, "max": 2}, "not measured"),
    ({"kind": "flat", "over": "payload", "range": {"gt": 4096}, "published": 0.1},
     "not measured"),
    ({"kind": "dominates", "a": {"verb": "read"}, "b": {"verb": "rpc"}, "over": "payload",
      "range": {"ge": 1024}, "published": 1}, "not measured"),
    ({"kind": "drop", "a": {"verb": "read"}, "b": {"verb": "rpc"}, "over": "payload",
      "range": {"le": 8}, "published": 0.6}, "fails"),
])
def test_not_measured_means_no_row_is_selected(spec, status):
    """A check is ``not measured`` only when its conditions select no row (its points were
    filtered out); selected rows without a finite metric make it fail."""
    [r] = evaluate(claims(spec), ROWS)
    assert r["status"] == status
    assert r["holds"] is (None if status == "not measured" else False)


def _steps_rows(series: dict[str, list[float]], xs=(4, 36, 76, 116)) -> list[dict]:
    return [{"size": x, "proto": p, "m": y} for p, ys in series.items()
            for x, y in zip(xs, ys)]


@pytest.mark.parametrize("series, measured, holds", [
    # first losses 10% and 8%, largest later ones 2% and 4.3%: the worst series is b
    ({"a": [100, 90, 88.2, 87.3], "b": [50, 46, 44, 44]}, 0.08 - 2 / 46, True),
    # b's second step loses more than its first: fails, by how much
    ({"a": [100, 90, 88.2, 87.3], "b": [100, 97, 92.15, 92]}, 0.03 - 0.05, False),
    # a rise after the first step is no loss; a first step that gains fails
    ({"a": [100, 90, 95, 99]}, 0.10 - (1 - 99 / 95), True),
    ({"a": [100, 101, 99, 98]}, -0.01 - (1 - 99 / 101), False),
])
def test_first_step_is_the_largest_drop_in_every_series(series, measured, holds):
    """``first_step``: per series of ``by``, first loss minus the largest later loss,
    the smallest over the series; holds above ``margin`` (0)."""
    [r] = evaluate(claims({"kind": "first_step", "over": "size", "by": ["proto"],
                           "published": 0}), _steps_rows(series))
    assert r["measured"] == pytest.approx(measured)
    assert r["holds"] is holds and r["status"] == ("holds" if holds else "fails")


def test_first_step_needs_three_sizes_and_honours_where_range_and_margin():
    """A series with two values of ``over`` has no later step, and one with a point that
    measured nothing (0) is left out: with no other series the check is not measured;
    ``where`` and ``range`` narrow the rows; ``margin`` raises the bar."""
    rows = _steps_rows({"a": [100, 90, 88], "b": [100, 99, 90]})
    two = [r for r in rows if r["size"] < 76]
    spec = {"kind": "first_step", "over": "size", "by": ["proto"], "published": 0}
    assert evaluate(claims(spec), two)[0]["status"] == "not measured"
    [a] = evaluate(claims(dict(spec, where={"proto": "a"})), rows)
    assert a["measured"] == pytest.approx(0.1 - (1 - 88 / 90)) and a["holds"]
    assert not evaluate(claims(dict(spec, where={"proto": "a"}, margin=0.1)), rows)[0]["holds"]
    assert evaluate(claims(dict(spec, range={"le": 36})), rows)[0]["status"] == "not measured"
    # a point that measured nothing (0) leaves its series out
    nothing = _steps_rows({"a": [100, 90, 0]})
    assert evaluate(claims(spec), nothing)[0]["status"] == "not measured"
    [b] = evaluate(claims(dict(spec, where={"proto": "b"})), rows)
    assert b["measured"] == pytest.approx(0.01 - (1 - 90 / 99)) and not b["holds"]


def test_a_first_step_claim_by_an_unknown_key_path_is_refused(tmp_path):
    """``by`` names columns as ``where`` does: a misspelt key path is refused at load."""
    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"workload.payload": [8, 64, 512]},
        expected=[{"claim": "C", "role": "validation", "kind": "first_step", "metric": "m",
                   "published": 0, "over": "workload.payload", "by": ["workload.vrb"]}]))
    rejected(p, "expected[0].by[0]")


def test_claim_table_says_what_is_compared():
    """Each line shows id, role, kind, what is compared (selections included), the test
    (tolerance or bound), published and measured with the metric's unit, and the result;
    a check no row selects reads ``not measured`` and is left out of the tally."""
    from rnicsim.claims import claim_markdown, claim_table, tally
    rows = [{"payload": 8, "verb": "read", "lat_p50_us": 2.0, "throughput_mops": 9.0},
            {"payload": 8, "verb": "rpc", "lat_p50_us": 3.0, "throughput_mops": 3.0}]
    cs = [dict(c, claim=f"K{i}", role="validation") for i, c in enumerate([
        {"kind": "value", "metric": "throughput_mops", "where": {"verb": "read"},
         "published": 10, "tolerance": 0.2},
        {"kind": "bound", "metric": "lat_p50_us", "published": 2, "min": 1, "note": "n"},
        {"kind": "ratio", "metric": "throughput_mops", "numerator": {"verb": "read"},
         "denominator": {"verb": "rpc"}, "over": "payload", "published": 1.5},
        {"kind": "dominates", "metric": "lat_p50_us", "a": {"verb": "rpc"},
         "b": {"verb": "read"}, "over": "payload", "range": {"ge": 64}, "published": 1}])]
    ta = TypeAdapter(Claim)
    out = evaluate([ta.validate_python(c) for c in cs], rows)
    pad = " " * 6
    assert claim_table(out) == [
        f"claim  role        kind       compared{pad * 9}test{pad * 3}   published  measured      "
        f"result        note",
        f"K0     validation  value      max of throughput_mops at verb=read{pad * 4}   within 20% of "
        f"published  10 Mops/s  9 Mops/s      holds",
        f"K1     validation  bound      max of lat_p50_us{pad * 7}   >= 1{pad * 3}   2 us       3 us"
        f"          holds         n",
        "K2     validation  ratio      max over payload of throughput_mops (verb=read) / (verb=rpc)  "
        "within 15% of published  1.5        3             FAILS",
        f"K3     validation  dominates  min over payload of lat_p50_us (verb=rpc) / (verb=read)"
        f"       >= 1.02{pad * 3}1          not measured  not measured"]
    assert claim_markdown(out[:1]) == [     # no note in any row: no note column
        "| claim | role | kind | compared | test | published | measured | result |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        "| K0 | validation | value | max of throughput_mops at verb=read | within 20% of published "
        "| 10 Mops/s | 9 Mops/s | holds |"]
    assert tally(out) == ("2 of 3 measured claim checks hold; 1 not measured (no point of "
                          "the run selects them)")


def test_profile_overrides_from_the_command_line_and_nested_yaml(tmp_path):
    """A profile key is dotted itself: ``--set cluster.nic.overrides.nic.qp_cache_entries=4``
    sets the key ``nic.qp_cache_entries`` (it used to nest a dict and crash with a
    traceback), as does a nested ``overrides: {nic: {qp_cache_entries: 4}}`` in a file;
    a list value is refused naming the key."""
    p = scenario_file(tmp_path)
    sc = load_scenario(p, ["cluster.nic.overrides.nic.qp_cache_entries=4"])
    assert sc.cluster.nic.overrides == {"nic.qp_cache_entries": 4}
    nested = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(
        overrides={"nic": {"qp_cache_entries": 4}, "host.mmio": "90ns"}), name="n.yaml")
    assert load_scenario(nested).cluster.nic.overrides == {"nic.qp_cache_entries": 4,
                                                           "host.mmio": "90ns"}
    rejected(scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(
        overrides={"nic.qp_cache_entries": [4, 8]}), name="l.yaml"),
        "cluster.nic.overrides")


def test_a_mapping_valued_profile_parameter_is_overridden_whole(tmp_path):
    """``host.idle_states`` is a mapping: an override (nested in the file, or with
    ``--set``) replaces it whole, the empty mapping included (a host without C-states),
    instead of being flattened into dotted keys or dropped; a scalar is refused naming
    the key."""
    states = {"C1": "2us/2us"}
    for raw in ({"host": {"idle_states": states}}, {"host.idle_states": states}):
        p = scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(overrides=raw),
                          name="m.yaml")
        assert load_scenario(p).cluster.nic.overrides == {"host.idle_states": states}
    p = scenario_file(tmp_path, name="e.yaml")
    sc = load_scenario(p, ["cluster.nic.overrides={host: {idle_states: {}}}"])
    assert sc.cluster.nic.overrides == {"host.idle_states": {}}
    rejected(scenario_file(tmp_path, lambda r: r["cluster"]["nic"].update(
        overrides={"host": {"idle_states": "10us"}}), name="s.yaml"),
        "cluster.nic.overrides.host.idle_states")


def test_a_profile_parameter_can_be_swept(tmp_path):
    """``sweep: {cluster.nic.overrides.nic.qp_cache_entries: [4, 8]}`` runs one point per
    value, each on the profile with that override; a parameter the profile does not have
    is refused naming the key, and so is a path with no parameter after ``overrides``."""
    from rnicsim.scenario import points

    p = scenario_file(tmp_path, lambda r: r.update(
        sweep={"cluster.nic.overrides.nic.qp_cache_entries": [4, 8]}))
    pts = points(load_scenario(p))
    assert [v for v, _ in pts] == [{"cluster.nic.overrides.nic.qp_cache_entries": 4},
                                   {"cluster.nic.overrides.nic.qp_cache_entries": 8}]
    assert [sc.cluster.nic.overrides for _, sc in pts] == [{"nic.qp_cache_entries": 4},
                                                          {"nic.qp_cache_entries": 8}]
    rejected(scenario_file(tmp_path, lambda r: r.update(
        sweep={"cluster.nic.overrides.nic.qp_cache_entriez": [4]}), name="u.yaml"),
        "cluster.nic.overrides.nic.qp_cache_entriez")
    rejected(scenario_file(tmp_path, lambda r: r.update(
        sweep={"cluster.nic.overrides.nic": [4]}), name="s.yaml"),
        "sweep.cluster.nic.overrides.nic")


# =========================================================================== rnicsim validate
def test_validate_reports_every_file(tmp_path, capsys):
    """``rnicsim validate missing.yaml good.yaml`` reports both and exits 2."""
    good = scenario_file(tmp_path)
    missing = tmp_path / "missing.yaml"
    code, out, err = cli(["validate", str(missing), str(good)], capsys)
    assert code == 2
    assert f"{missing}: an existing" in err and f"{good}: OK" in out


@pytest.mark.parametrize("size, key", [
    ({"run.measur": "3us"}, "sizes.demo.run.measur"),
    ({"sweep.workload.paylod": [8]}, "sizes.demo.sweep.workload.paylod"),
    ({"run.measure": "three us"}, "sizes.demo.run.measure"),
    ({"cluster.nodes": 1}, "sizes.demo.cluster.nodes"),
])
def test_validate_checks_every_size(tmp_path, capsys, size, key):
    """``rnicsim validate`` resolves every size, naming the bad entry as sizes.<name>.<key>
    without --set run.size."""
    p = scenario_file(tmp_path, lambda r: r.update(sizes={"demo": size}))
    code, out, err = cli(["validate", str(p)], capsys)
    assert code == 2 and out == "" and f"{p}: {key}" in err, err


def test_validate_names_the_size_of_an_error_it_causes(tmp_path, capsys):
    """An error a size causes elsewhere in the file is reported under sizes.<name>."""
    p = scenario_file(tmp_path, lambda r: (
        r["workload"].update(mode="client_server", servers=2), r["cluster"].update(nodes=3),
        r.update(sizes={"demo": {"cluster.nodes": 2}})))
    code, _out, err = cli(["validate", str(p)], capsys)
    assert code == 2 and f"{p}: sizes.demo: workload.servers" in err, err


@pytest.mark.parametrize("cmd", ["run", "validate", "profiles", "perftest", "reproduce",
                                 "rdmc-schedule", "check-history", "calibrate"])
def test_help_is_a_usage_line_and_an_option_list(cmd, capsys):
    """``main([cmd, '--help'])`` returns 0 (no SystemExit) and prints argparse's usage and
    options for every subcommand (check-history: its one argument), never a module
    docstring's reST markup."""
    assert main([cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: rnicsim {cmd} ")
    assert "``" not in out and ":func:" not in out and "**" not in out
    if cmd != "check-history":
        assert "options:\n  -h, --help" in out


def test_version_comes_from_the_package_metadata(capsys):
    """``rnicsim --version`` (and -V) print the installed package's version, exit 0."""
    from importlib.metadata import version
    for flag in ("--version", "-V"):
        assert main([flag]) == 0
        assert capsys.readouterr().out == f"rnicsim {version('rnicsim')}\n"


def test_a_misspelt_command_gets_a_guess(capsys):
    """An unknown command exits 2 naming it and the closest command."""
    assert main(["reprodce"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnicsim: unknown command 'reprodce' (did you mean 'reproduce'?)\n")


def test_validate_help_describes_set(capsys):
    """``rnicsim validate --help`` explains --set as run's help does."""
    main(["validate", "--help"])
    out = capsys.readouterr().out
    assert "KEY.PATH=VALUE" in out and "override a scenario key" in out


def test_every_shipped_scenario_validates_at_every_size(capsys):
    """`rnicsim validate` accepts every scenario under scenarios/ (schema, sweep, profiles
    and each size block), so a scenario a README line points to cannot rot unnoticed."""
    from rnicsim.cli import main
    files = sorted(str(p) for p in (Path(__file__).parents[2] / "scenarios").glob("*/*.yaml"))
    assert len(files) > 30
    assert main(["validate", *files]) == 0, capsys.readouterr().out


_PLUGIN = '''
from typing import Literal
from pydantic import BaseModel, ConfigDict
from rnicsim.scenario import register_workload


class Echo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["echo_{tag}"]
    x: int = 1


def run_scenario_point(sc, profile):
    return {{"twice_x": 2.0 * sc.workload.x, "nodes": float(sc.cluster.nodes)}}


register_workload("echo_{tag}", Echo, "{mod}:run_scenario_point")
'''


def test_a_scenario_brings_its_own_workload_kind_through_plugins(tmp_path, capsys):
    """`plugins: [module]` imports a module of the user's (here one beside the scenario,
    not installed) that registers a workload kind; `rnicsim run` then validates and runs
    it like a shipped one. A module that cannot be imported exits 2 naming plugins[i]."""
    from rnicsim.cli import main
    mod = "user_plugin_echo"
    (tmp_path / f"{mod}.py").write_text(_PLUGIN.format(tag="t1", mod=mod))
    f = tmp_path / "echo.yaml"
    f.write_text(f"""version: 1
name: echo
plugins: [{mod}]
cluster: {{nodes: 2, nic: {{profile: cx4-edr}}}}
workload: {{kind: echo_t1, x: 3}}
sweep: {{workload.x: [1, 4]}}
""")
    out = tmp_path / "out"
    assert main(["run", str(f), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["twice_x"]) for r in rows] == [2.0, 8.0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(f.read_text().replace(f"[{mod}]", "[no_such_plugin_module]"))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr()
    assert "plugins[0]" in err.out + err.err and "no_such_plugin_module" in err.out + err.err


def test_a_profile_path_in_a_scenario_is_found_beside_it(tmp_path, monkeypatch, capsys):
    """``cluster.nic.profile: ./my.yaml`` (and a sweep over profile paths) names a file
    beside the scenario, as ``plugins`` do, whatever the working directory; a path that
    is not there is still looked up from the working directory (as before, and as a
    ``--set`` value is); a path found nowhere exits 2 naming the key."""
    from rnicsim.profile import PROFILE_DIR

    sub = tmp_path / "study"
    sub.mkdir()
    (sub / "my.yaml").write_text((PROFILE_DIR / "cx3-qdr.yaml").read_text())
    (tmp_path / "cwd.yaml").write_text((PROFILE_DIR / "cx3-fdr.yaml").read_text())
    text = ("version: 1\nname: beside\ncluster: {nodes: 2, nic: {profile: ./my.yaml}}\n"
            "workload: {kind: microbench, verb: read, payload: 64}\n"
            "run: {warmup: 1us, measure: 2us}\n")
    sc_file = sub / "sc.yaml"
    sc_file.write_text(text)
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(sc_file)
    assert Path(sc.cluster.nic.profile) == sub / "my.yaml"
    assert main(["validate", str(sc_file)]) == 0
    swept = sub / "swept.yaml"
    swept.write_text(text + "sweep: {cluster.nic.profile: [my.yaml, cwd.yaml, cx4-edr]}\n")
    profiles = [p.cluster.nic.profile for _v, p in points(load_scenario(swept))]
    assert profiles == [str(sub / "my.yaml"), "cwd.yaml", "cx4-edr"]
    assert main(["validate", str(swept)]) == 0
    missing = sub / "missing.yaml"
    missing.write_text(text.replace("./my.yaml", "./nowhere.yaml"))
    capsys.readouterr()
    assert main(["validate", str(missing)]) == 2
    assert "cluster.nic.profile" in capsys.readouterr().err
