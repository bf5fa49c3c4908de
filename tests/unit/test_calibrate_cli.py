"""Bad calibration inputs a first-time user gives ``rnicsim calibrate`` and the
``calibration`` API: each is refused with a one-line message naming the file, key and
what was expected (exit 2 on the command line, TypeError/ValueError naming the argument
in the API), never a traceback and never a silently ignored or misread value."""
from __future__ import annotations

import json

import pytest

from calibration.fit import calibrate
from calibration.parsers import parse_perftest_runs, parse_probe_jsonl
from rnicsim.cli import main as cli
from rnicsim.errors import InputError

READ_LAT = """\
                    RDMA_Read Latency Test
 Dual-port       : OFF    Device         : mlx4_0
 Number of qps   : 1    Transport type : IB
 Connection type : RC   Using SRQ      : OFF
 TX depth        : 1
 Mtu             : 4096[B]
 Link type       : IB
 Outstand reads  : 16
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       1000          1.70           7.97         1.74              1.76         0.05           1.91                 7.97
 64      1000          1.70           6.53         1.76              1.77         0.04           1.93                 6.53
 1024    1000          2.56           6.27         2.59              2.60         0.05           2.74                 6.27
---------------------------------------------------------------------------------------
"""

HEADER = {"type": "probe", "schema": 1, "probe_version": "0.1.0", "path_mtu": 4096}
LINK = {"type": "link", "role": "client", "device": "mlx4_0", "port": 1,
        "link_layer": "IB", "active_mtu": 4096}
POINT = {"type": "measurement", "sweep": "lat", "verb": "READ", "transport": "RC",
         "method": "post_to_cqe", "payload": 64, "qps": 1, "threads": 1, "depth": 1,
         "batch": 1, "signal_every": 1, "inline": False, "page_size": 4096,
         "page_backing": "base", "region_bytes": 4096, "addresses": 1,
         "random_offsets": False, "iters": 1000, "elapsed_s": 0.0021, "truncated": False,
         "lat_us": {"min": 1.7, "median": 1.74, "avg": 1.76, "stdev": 0.05, "p99": 1.91,
                    "p999": 7.9, "max": 7.97}, "lat_convention": "rtt"}
END = {"type": "end", "status": "ok", "points": 1, "skipped": 0, "elapsed_s": 1.0}


def _probe(*lines) -> str:
    return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"


def _refused(text: str, parse, where: str, key: str) -> str:
    with pytest.raises(InputError) as e:
        parse(text, "m.txt")
    assert e.value.source == f"m.txt:{where}" and e.value.key == key, str(e.value)
    return e.value.expected


def test_probe_repeated_key_is_refused_with_its_path():
    """json.loads keeps the last of two equal keys; the reader must not (project rule:
    a repeated key exits 2), at the top level or inside lat_us."""
    line = json.dumps(POINT).replace('"payload": 64', '"payload": 64, "payload": 128')
    assert "once" in _refused(_probe(HEADER, LINK, line, END), parse_probe_jsonl, "3",
                              "payload")
    line = json.dumps(POINT).replace('"median": 1.74', '"median": 1.74, "median": 9')
    _refused(_probe(HEADER, LINK, line, END), parse_probe_jsonl, "3", "lat_us.median")
    head = json.dumps(HEADER).replace('"schema": 1', '"schema": 1, "schema": 2')
    _refused(_probe(head, LINK, POINT, END), parse_probe_jsonl, "1", "schema")


def test_probe_schema_must_be_the_number_1_not_true():
    """``True == 1`` in Python: a boolean schema is a wrong type, not schema 1."""
    _refused(_probe({**HEADER, "schema": True}, LINK, POINT, END), parse_probe_jsonl, "1",
             "schema")


def test_probe_method_must_fit_the_verb():
    """The fit maps a READ latency to post-to-CQE and a SEND latency to a ping-pong
    whatever ``method`` says, so a mismatched method would be fitted as the other one."""
    _refused(_probe(HEADER, LINK, {**POINT, "method": "pingpong"}, END), parse_probe_jsonl,
             "3", "method")
    _refused(_probe(HEADER, LINK, {**POINT, "verb": "SEND"}, END), parse_probe_jsonl,
             "3", "method")
    ok = parse_probe_jsonl(_probe(HEADER, LINK, {**POINT, "verb": "SEND",
                                                 "method": "pingpong"}, END))
    assert len(ok.measurements) == 1


@pytest.mark.parametrize("where,line,key", [
    ("1", {**HEADER, "path_mtu": 1000}, "path_mtu"),
    ("2", {**LINK, "active_mtu": 1500}, "active_mtu"),
    ("3", {**POINT, "payload": 1 << 40}, "payload"),
])
def test_probe_impossible_mtu_or_payload_is_refused(where, line, key):
    """An MTU that is no InfiniBand MTU was simulated as given; a payload beyond 2^31
    bytes (no RDMA message is larger) made the fit simulate for hours."""
    lines = {"1": HEADER, "2": LINK, "3": POINT}
    lines[where] = line
    _refused(_probe(lines["1"], lines["2"], lines["3"], END), parse_probe_jsonl, where, key)


@pytest.mark.parametrize("old,new,where,key", [
    ("Number of qps   : 1", "Number of qps   : 0", "3", "Number of qps"),   # was IndexError
    ("4096[B]", "0[B]", "6", "Mtu"),              # was silently the profile's MTU
    ("4096[B]", "1000[B]", "6", "Mtu"),           # was simulated with a 1000-B MTU
    (" Link type       : IB", " Link type       : IB\n Mtu             : 2048[B]", "8",
     "Mtu"),                                      # a second value silently won
    (" 64      1000", " 99999999999      1000", "12", "#bytes"),
])
def test_perftest_impossible_header_or_size_is_refused(old, new, where, key):
    assert old in READ_LAT
    _refused(READ_LAT.replace(old, new, 1), parse_perftest_runs, where, key)


def test_perftest_zero_qps_exits_2_not_a_traceback(capsys, tmp_path):
    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT.replace("Number of qps   : 1", "Number of qps   : 0"))
    code = cli(["calibrate", str(f), "--base", "cx3-qdr", "--out", str(tmp_path / "o.yaml"),
                "--report", str(tmp_path / "r"), "--params", "pcie.latency",
                "--bootstrap", "0", "--iterations", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{f}:3: Number of qps: a number of QPs >= 1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["read_lat.txt"]


def test_negative_seed_exits_2_before_the_fit(capsys, tmp_path):
    """numpy refuses a negative seed; it used to be a traceback after the whole fit."""
    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT)
    code = cli(["calibrate", str(f), "--base", "cx3-qdr", "--out", str(tmp_path / "o.yaml"),
                "--report", str(tmp_path / "r"), "--seed", "-1", "--quiet"])
    assert code == 2 and "--seed: a whole number >= 0" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["read_lat.txt"]


def test_no_arguments_is_a_usage_error(capsys):
    """Like ``rnicsim`` and ``rnicsim reproduce``: nothing to do is exit 2, not 0."""
    assert cli(["calibrate"]) == 2
    assert "--base" in capsys.readouterr().err
    assert cli(["calibrate", "--help"]) == 0
    capsys.readouterr()
    # after other arguments too (it said "the following arguments are required", exit 2)
    assert cli(["calibrate", "probe.jsonl", "--help"]) == 0
    assert "--base PROFILE" in capsys.readouterr().out


@pytest.mark.parametrize("kw,exc,match", [
    (dict(bootstrap=-1), ValueError, "bootstrap must be a whole number >= 0, got -1"),
    (dict(bootstrap=2.5), TypeError, "bootstrap must be a whole number, got 2.5"),
    (dict(iterations=0), ValueError, "iterations must be a whole number >= 1, got 0"),
    (dict(seed="x"), TypeError, "seed must be a whole number, got 'x'"),
    (dict(seed=-1), ValueError, "seed must be a whole number >= 0, got -1"),
    (dict(weighting="foo"), ValueError, "weighting must be 'points' or 'series', got 'foo'"),
    (dict(param_names="pcie.latency"), TypeError, "param_names must be a list"),
    (dict(param_names=[]), ValueError, "param_names must hold at least one"),
])
def test_calibrate_api_checks_its_arguments(tmp_path, kw, exc, match):
    """Before: -1 bootstraps and an unknown weighting ran silently, a string of
    parameters was split into letters, 0 iterations or a str seed failed deep in scipy
    or numpy."""
    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT)
    with pytest.raises(exc, match=match):
        calibrate([str(f)], "cx3-qdr", **{"param_names": ["pcie.latency"], **kw})


def test_calibrate_api_takes_one_path_and_is_deterministic(tmp_path):
    """A single path is one input (it was iterated letter by letter); the same seed gives
    the same values and intervals."""
    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT)
    runs = [calibrate(str(f), "cx3-qdr", ["pcie.latency"], bootstrap=3, seed=7,
                      iterations=3) for _ in range(2)]
    assert [(r.fitted, r.ci) for r in runs[0].params] == \
        [(r.fitted, r.ci) for r in runs[1].params]
    assert runs[0].inputs == [str(f)]
    with pytest.raises(ValueError, match="inputs must name at least one"):
        calibrate([], "cx3-qdr")


def test_measurements_of_another_nic_than_the_base_are_noted(capsys, tmp_path):
    """ConnectX-3 (mlx4_0) data fitted from --base cx5-edr ran without a word; the fit
    goes on (a neighbouring base may be chosen on purpose) but says so on stderr, in the
    summary and in the report's notes. A matching base gives no note."""
    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT)
    common = [str(f), "--params", "pcie.latency", "--bootstrap", "0", "--iterations", "1"]
    assert cli(["calibrate", *common, "--base", "cx5-edr", "--out", str(tmp_path / "a.yaml"),
                "--report", str(tmp_path / "ra")]) == 0
    out, err = capsys.readouterr()
    want = "mlx4_0 (read_lat.txt) is a ConnectX-3, the base profile cx5-edr a ConnectX-5"
    assert want in err and f"note: {want}" in out
    assert want in (tmp_path / "ra" / "report.md").read_text()
    assert cli(["calibrate", *common, "--base", "cx3-fdr", "--out", str(tmp_path / "b.yaml"),
                "--report", str(tmp_path / "rb"), "--quiet"]) == 0
    assert "ConnectX" not in capsys.readouterr().out
    assert "## Notes" not in (tmp_path / "rb" / "report.md").read_text()


def test_a_single_point_gives_no_confidence_interval(capsys, tmp_path):
    """Resampling one point gives that point every time: the bootstrap reported a
    zero-width '121-121 ns' interval, as if the data pinned the value exactly."""
    f = tmp_path / "one.txt"
    f.write_text("\n".join(READ_LAT.splitlines()[:11]) + "\n")
    r = calibrate(str(f), "cx3-qdr", ["pcie.latency"], bootstrap=5, iterations=3)
    assert len(r.points) == 1 and r.params[0].identified and r.params[0].ci is None
    assert any("no confidence intervals" in n for n in r.notes)


def test_report_into_the_input_directory_does_not_break_the_next_run(capsys, tmp_path):
    """Directories expand to their .txt/.log/.out/.jsonl files, as documented; .json was
    read too, so the fit.json of a --report written into the input directory made the
    next run over that directory exit 2 on fit.json:1."""
    (tmp_path / "read_lat.txt").write_text(READ_LAT)
    argv = ["calibrate", str(tmp_path), "--base", "cx3-qdr", "--out", str(tmp_path / "a.yaml"),
            "--report", str(tmp_path), "--params", "pcie.latency", "--bootstrap", "0",
            "--iterations", "1", "--quiet"]
    assert cli(argv) == 0 and (tmp_path / "fit.json").is_file()
    assert cli(argv) == 0, capsys.readouterr().err


@pytest.mark.parametrize("new,key,bad", [(" 6a4      1000 ", "#bytes", "6a4"),
                                         (" 64      1O00 ", "#iterations", "1O00")])
def test_perftest_row_with_a_garbled_size_is_refused_not_skipped(new, key, bad):
    """A table line that starts with no whole number was skipped as if it were a
    warning, silently dropping the row; a line of a row's width whose values are numbers
    is a row."""
    assert _refused(READ_LAT.replace(" 64      1000 ", new, 1), parse_perftest_runs, "12",
                    key) == f"a whole number, got {bad!r}"


def test_probe_file_that_is_not_utf8_is_refused(tmp_path):
    """A damaged byte in a probe file was replaced by U+FFFD and the line accepted."""
    from calibration.parsers import load_measurements

    f = tmp_path / "probe.jsonl"
    point = json.dumps({**POINT, "page_backing": "b\u00e4se"}, ensure_ascii=False)
    text = _probe(HEADER, LINK, point, END)
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=r"probe.jsonl:3: UTF-8 text \(byte 0xe4"):
        load_measurements(f)
    f.write_text(text, encoding="utf-8")
    assert len(load_measurements(f)) == 7


def test_writers_take_str_paths(tmp_path):
    """The README's ``write_profile(result, out)`` failed with AttributeError on a str."""
    from calibration.fit import write_profile
    from calibration.report import write_report
    from rnicsim.profile import load_profile

    f = tmp_path / "read_lat.txt"
    f.write_text(READ_LAT)
    r = calibrate(str(f), "cx3-qdr", ["pcie.latency"], bootstrap=0, iterations=2)
    write_profile(r, str(tmp_path / "mine.yaml"))
    write_report(r, str(tmp_path / "rep"), str(tmp_path / "mine.yaml"))
    assert load_profile(str(tmp_path / "mine.yaml")).name == "mine"
    assert "mine.yaml" in (tmp_path / "rep" / "report.md").read_text()


def test_probe_switch_impl_is_one_of_the_schemas():
    """SCHEMA.md: ``switch_impl`` is ``asm`` or ``ucontext``; any string was accepted."""
    sw = {"type": "switch", "switch_impl": "asm", "coroutines": 2, "iters": 1000000,
          "elapsed_s": 0.0231, "ns_per_switch": 23.1}
    end = {**END, "points": 0}       # switch lines are not points
    assert len(parse_probe_jsonl(_probe(HEADER, LINK, sw, end)).switches) == 1
    assert "asm, ucontext" in _refused(_probe(HEADER, LINK, {**sw, "switch_impl": "boost"},
                                              end), parse_probe_jsonl, "3", "switch_impl")


def test_probe_end_line_counts_must_match_the_lines():
    """The end line counts the measurement and skip lines the probe wrote; a file with
    lines lost (edited, partly copied) was read without a word."""
    _refused(_probe(HEADER, LINK, POINT, {**END, "points": 2}), parse_probe_jsonl, "4",
             "points")
    _refused(_probe(HEADER, LINK, POINT, {**END, "skipped": 1}), parse_probe_jsonl, "4",
             "skipped")
