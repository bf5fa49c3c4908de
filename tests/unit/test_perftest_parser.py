"""calibration.parsers: perftest outputs (the shared reference files) and probe JSON lines.

The reference data lives beside the repository, in ``../shared/reference-data``; tests
that read it skip (with the path in the reason) when it is absent.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.parsers import (
    MB,
    PERFTEST_TOOLS,
    BwRow,
    LatRow,
    Measurement,
    PerftestRun,
    ProbeRun,
    load_measurements,
    parse_perftest,
    parse_perftest_runs,
    parse_probe_jsonl,
    probe_measurements,
)
from rnicsim.errors import InputError

REPO = Path(__file__).resolve().parents[2]
REF = REPO.parent / "shared" / "reference-data"
PERFTEST = REF / "perftest"
SCHEMA_MD = REPO / "calibration" / "probe" / "SCHEMA.md"

needs_ref = pytest.mark.skipif(
    not PERFTEST.is_dir(),
    reason=f"perftest reference data not found at {PERFTEST} "
    "(expected the shared/ directory beside the repository root)",
)


def ref_files() -> list[Path]:
    return sorted(PERFTEST.glob("*.txt")) if PERFTEST.is_dir() else []


def gbps_from_mb(v: float) -> float:
    return v * MB * 8 / 1e9


def runs_of(name: str) -> list[PerftestRun]:
    path = PERFTEST / name
    return parse_perftest_runs(path.read_text(encoding="utf-8"), name)


# ---- every reference file --------------------------------------------------------------


@needs_ref
def test_reference_directory_is_not_empty():
    assert len(ref_files()) >= 10


@needs_ref
@pytest.mark.parametrize("path", ref_files(), ids=lambda p: p.name)
def test_every_reference_file_parses(path: Path):
    runs = parse_perftest_runs(path.read_text(encoding="utf-8"), path.name)
    assert runs
    for run in runs:
        assert run.tool in PERFTEST_TOOLS
        assert run.source == path.name
        assert run.kind in ("lat", "bw") and run.tool.endswith("_" + run.kind)
        assert run.verb in ("READ", "WRITE", "SEND", "CAS", "FAA")
        assert run.mtu in (256, 512, 1024, 2048, 4096)
        assert run.link_type in ("IB", "Ethernet")
        assert run.connection_type == "RC"
        assert run.qps == 1
        assert run.device
        assert run.rows
        sizes = [r.bytes for r in run.rows]
        assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
        for r in run.rows:
            if run.kind == "lat":
                assert isinstance(r, LatRow)
                assert r.t_min <= r.t_typical <= r.t_max and r.t_min <= r.t_avg
                assert r.p99 is not None and r.p999 is not None
                assert r.t_min <= r.p99 <= r.p999 <= r.t_max
            else:
                assert isinstance(r, BwRow)
                assert r.bw_avg_gbps > 0 and r.msg_rate_mpps and r.msg_rate_mpps > 0
        # the tool told by the title agrees with the command line when there is one
        # (cx3-qdr40_ib_write_lat_1's note mentions ib_write_bw, but its command is lat)
        if run.command_tool:
            assert run.command_tool == run.tool, (run.command, run.title)


# ---- exact numbers, several rows per file ----------------------------------------------

LAT_FIELDS = ("iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p999")

# file -> list of runs: (tool, mtu, link type, header checks, {bytes: row values})
# lat row values: iterations, t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9% (usec)
# bw row values: iterations, BW peak, BW average (as printed, in the file's unit), MsgRate
EXPECTED = {
    "cx3-fdr10_ib_write_bw_3.txt": [
        ("ib_write_bw", 2048, "IB", dict(tx_depth=128, cq_moderation=1, inline_size=0,
                                         bw_unit="MB/sec", device="mlx4_0"),
         {65536: (5000, 4508.97, 4508.79, 0.072141)}),
    ],
    "cx3-fdr10_ib_write_lat_2.txt": [
        ("ib_write_lat", 2048, "IB", dict(tx_depth=1, inline_size=220),
         {2: (1000, 0.96, 1.02, 0.98, 0.98, 0.01, 1.00, 1.02)}),
    ],
    "cx3-qdr40_ib_atomic_bw_1.txt": [
        ("ib_atomic_bw", 4096, "IB", dict(tx_depth=1000, cq_moderation=100,
                                          outstanding_reads=16, verb="FAA"),
         {8: (1000, 17.01, 16.94, 2.220735)}),
    ],
    "cx3-qdr40_ib_atomic_lat_1.txt": [  # two runs: an ib_atomic_bw, then ib_atomic_lat
        ("ib_atomic_bw", 2048, "IB", dict(tx_depth=128, verb="FAA"),
         {8: (20000, 18.79, 18.67, 2.446776)}),
        ("ib_atomic_lat", 2048, "IB", dict(tx_depth=1, outstanding_reads=16),
         {8: (20000, 2.27, 14.36, 2.34, 2.37, 0.31, 2.56, 10.20)}),
    ],
    "cx3-qdr40_ib_read_bw_1.txt": [
        ("ib_read_bw", 4096, "IB", dict(bw_unit="Gb/sec", outstanding_reads=16),
         {2: (1000, 0.068083, 0.064915, 4.057164),
          2048: (1000, 23.57, 23.57, 1.438318),
          8388608: (1000, 24.30, 24.26, 0.000362)}),
    ],
    "cx3-qdr40_ib_read_bw_2.txt": [
        ("ib_read_bw", 2048, "IB", dict(bw_unit="MB/sec"),
         {2: (50000, 0.00, 9.08, 4.757918),
          65536: (50000, 0.00, 3691.07, 0.059057),
          8388608: (50000, 0.00, 3666.47, 0.000458)}),
    ],
    "cx3-qdr40_ib_read_lat_1.txt": [
        ("ib_read_lat", 4096, "IB", dict(outstanding_reads=16),
         {2: (1000, 1.70, 7.97, 1.74, 1.76, 0.05, 1.91, 7.97),
          4096: (1000, 5.13, 21.15, 5.18, 5.22, 0.36, 5.37, 21.15),
          8388608: (1000, 2438.00, 2797.60, 2439.22, 2472.09, 98.03, 2785.84, 2797.60)}),
    ],
    "cx3-qdr40_ib_read_lat_2.txt": [
        ("ib_read_lat", 2048, "IB", dict(),
         {2: (20000, 1.91, 13.87, 1.99, 2.01, 0.32, 2.13, 9.95),
          32: (20000, 1.93, 61.18, 2.00, 2.02, 0.31, 2.14, 10.00),
          8388608: (20000, 2177.92, 2240.08, 2184.09, 2184.33, 2.24, 2192.22, 2202.42)}),
    ],
    "cx3-qdr40_ib_send_bw_1.txt": [
        ("ib_send_bw", 4096, "IB", dict(bw_unit="Gb/sec", rdma_cm=False, inline_size=0),
         {4: (1000, 0.29, 0.27, 8.351176),
          16384: (1000, 26.81, 26.71, 0.203778),
          8388608: (1000, 27.33, 27.33, 0.000407)}),
    ],
    "cx3-qdr40_ib_send_bw_2.txt": [  # truncated at 1024 B in the source
        ("ib_send_bw", 2048, "IB", dict(bw_unit="MB/sec"),
         {2: (20000, 10.17, 9.90, 5.189724),
          1024: (20000, 3191.34, 3039.98, 3.112943)}),
    ],
    "cx3-qdr40_ib_send_lat_1.txt": [
        ("ib_send_lat", 4096, "IB", dict(inline_size=236),
         {2: (1000, 0.92, 4.89, 0.97, 1.01, 0.25, 1.92, 4.89),
          256: (1000, 1.85, 5.54, 1.92, 1.96, 0.22, 2.50, 5.54),
          8388608: (1000, 2569.32, 2609.54, 2576.83, 2576.92, 1.85, 2579.82, 2609.54)}),
    ],
    "cx3-qdr40_ib_write_bw_1.txt": [
        ("ib_write_bw", 4096, "IB", dict(bw_unit="Gb/sec", tx_depth=128, cq_moderation=100),
         {2: (5000, 0.072576, 0.071111, 4.444451),
          32: (5000, 2.27, 2.27, 8.853746),
          8388608: (5000, 25.16, 25.16, 0.000375)}),
    ],
    "cx3-qdr40_ib_write_bw_2.txt": [
        ("ib_write_bw", 2048, "IB", dict(bw_unit="MB/sec"),
         {2: (50000, 0.00, 10.43, 5.467546),
          512: (50000, 0.00, 2607.23, 5.339612),
          8388608: (50000, 0.00, 3662.02, 0.000458)}),
    ],
    "cx3-qdr40_ib_write_lat_1.txt": [
        ("ib_write_lat", 4096, "IB", dict(inline_size=220),
         {2: (1000, 0.87, 4.70, 0.89, 0.90, 0.08, 0.95, 4.70),
          128: (1000, 1.09, 2.41, 1.10, 1.10, 0.05, 1.17, 2.41),
          8388608: (1000, 2569.25, 2581.90, 2572.40, 2572.44, 0.96, 2574.77, 2581.90)}),
    ],
    "cx3-qdr40_ib_write_lat_3.txt": [
        ("ib_write_lat", 2048, "IB", dict(),
         {2: (20000, 0.88, 6.84, 0.98, 1.03, 0.20, 1.21, 5.42),
          4096: (20000, 3.56, 49.03, 3.74, 3.80, 0.29, 4.16, 8.70),
          8388608: (20000, 2296.01, 2345.48, 2302.01, 2304.98, 6.43, 2327.01, 2335.48)}),
    ],
    "cx3-roce40_ib_send_bw_1.txt": [
        ("ib_send_bw", 1024, "Ethernet", dict(device="rocep68s0", transport_type="IB",
                                              rdma_cm=True, bw_unit="Gb/sec", cq_moderation=1),
         {65536: (1000, 36.43, 36.07, 0.068798)}),
    ],
    "cx3_ib_read_lat_3.txt": [
        ("ib_read_lat", 2048, "IB", dict(device="mlx4_0"),
         {2: (1000, 1.76, 6.12, 1.79, 1.80, 0.06, 1.88, 6.12)}),
    ],
}

ROW_COUNTS = {
    "cx3-qdr40_ib_read_bw_1.txt": 23, "cx3-qdr40_ib_read_bw_2.txt": 23,
    "cx3-qdr40_ib_read_lat_1.txt": 23, "cx3-qdr40_ib_read_lat_2.txt": 23,
    "cx3-qdr40_ib_send_bw_1.txt": 23, "cx3-qdr40_ib_send_bw_2.txt": 10,
    "cx3-qdr40_ib_send_lat_1.txt": 23, "cx3-qdr40_ib_write_bw_1.txt": 23,
    "cx3-qdr40_ib_write_bw_2.txt": 23, "cx3-qdr40_ib_write_lat_1.txt": 23,
    "cx3-qdr40_ib_write_lat_3.txt": 23,
}


@needs_ref
def test_expected_table_covers_every_reference_file():
    assert sorted(EXPECTED) == [p.name for p in ref_files()]


@needs_ref
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_numbers_match_the_file(name: str):
    runs = runs_of(name)
    assert len(runs) == len(EXPECTED[name])
    for run, (tool, mtu, link, header, rows) in zip(runs, EXPECTED[name]):
        assert run.tool == tool
        assert run.mtu == mtu
        assert run.link_type == link
        for attr, want in header.items():
            assert getattr(run, attr) == want, attr
        if name in ROW_COUNTS:
            assert len(run.rows) == ROW_COUNTS[name]
        for nbytes, values in rows.items():
            r = run.row(nbytes)
            if run.kind == "lat":
                got = tuple(getattr(r, f) for f in LAT_FIELDS)
                assert got == values  # exact: the parser keeps the printed numbers
            else:
                iters, peak, avg, rate = values
                assert r.iterations == iters
                assert r.msg_rate_mpps == rate
                conv = (lambda v: v) if run.bw_unit == "Gb/sec" else gbps_from_mb
                assert r.bw_avg_gbps == pytest.approx(conv(avg), rel=1e-12)
                if peak == 0.0:
                    assert r.bw_peak_gbps is None  # perftest's 0.00: not measured
                else:
                    assert r.bw_peak_gbps == pytest.approx(conv(peak), rel=1e-12)


@needs_ref
def test_brief_examples():
    assert runs_of("cx3-qdr40_ib_read_lat_1.txt")[0].row(2).t_typical == 1.74
    assert runs_of("cx3-qdr40_ib_write_bw_2.txt")[0].row(2).msg_rate_mpps == 5.467546


@needs_ref
def test_mb_per_sec_is_mebibytes_per_second():
    """perftest's MB/sec is 2^20 B/s: BW average == MsgRate x #bytes / 2^20 in every
    MB/sec row, within print rounding; a 10^6 reading does not fit."""
    checked = 0
    for path in ref_files():
        for run in parse_perftest_runs(path.read_text(encoding="utf-8"), path.name):
            if run.kind != "bw":
                continue
            for r in run.rows:
                # rounding: BW printed to 0.01, MsgRate to 1e-6 Mpps
                if run.bw_unit == "Gb/sec":
                    pred, printed = r.msg_rate_mpps * r.bytes * 8 / 1e3, r.bw_avg_gbps
                    tol = 0.0051 + 0.5e-6 * r.bytes * 8 / 1e3
                else:
                    pred = r.msg_rate_mpps * 1e6 * r.bytes / MB
                    printed = r.bw_avg_gbps * 1e9 / 8 / MB
                    tol = 0.0051 + 0.5 * r.bytes / MB
                assert abs(pred - printed) <= tol, (path.name, r.bytes, printed, pred)
                checked += 1
    assert checked > 100
    # the decimal reading is 4.9 % off on a row where rounding cannot explain it
    r = runs_of("cx3-qdr40_ib_write_bw_2.txt")[0].row(2)
    assert 5.467546 * 2 == pytest.approx(10.935, abs=1e-3)  # MB of 10^6 bytes
    assert r.bw_avg_gbps * 1e9 / 8 / MB == pytest.approx(10.43, abs=1e-9)
    assert r.msg_rate_mpps * 1e6 * r.bytes / MB == pytest.approx(10.43, abs=0.005)


@needs_ref
def test_two_runs_in_one_file_and_single_run_api():
    text = (PERFTEST / "cx3-qdr40_ib_atomic_lat_1.txt").read_text(encoding="utf-8")
    both = parse_perftest(text, "two.txt")
    assert isinstance(both, list) and [r.tool for r in both] == ["ib_atomic_bw", "ib_atomic_lat"]
    assert both[0].command.startswith("ib_atomic_bw -a --iter 20000 192.168.1.60")
    assert both[1].command == "ib_atomic_lat -a --iter 20000 192.168.1.60"  # wrapped line
    one = parse_perftest((PERFTEST / "cx3_ib_read_lat_3.txt").read_text(encoding="utf-8"))
    assert isinstance(one, PerftestRun) and one.source == "<perftest>"


@needs_ref
def test_wrapped_and_prompted_command_lines():
    assert runs_of("cx3-qdr40_ib_send_bw_2.txt")[0].command == \
        "ib_send_bw -a --iter 20000 192.168.1.60"
    assert runs_of("cx3-qdr40_ib_read_lat_2.txt")[0].command == \
        "ib_read_lat -a --iter 20000 192.168.1.60"
    assert runs_of("cx3-roce40_ib_send_bw_1.txt")[0].command is None


@needs_ref
def test_title_wins_over_a_wrong_command_line():
    text = (PERFTEST / "cx3-qdr40_ib_read_lat_1.txt").read_text(encoding="utf-8")
    text = text.replace("$ ib_read_lat -a", "$ ib_write_bw -a")
    run = parse_perftest(text, "mislabelled.txt")
    assert run.tool == "ib_read_lat" and run.command_tool == "ib_write_bw"
    assert run.notes and "title wins" in run.notes[0]


@needs_ref
def test_latency_conventions_and_normalised_measurements():
    ms = load_measurements([PERFTEST])
    assert ms and all(isinstance(m, Measurement) for m in ms)
    assert {m.unit for m in ms} == {"us", "Gbps", "Mops"}
    by = {(Path(m.source).name, m.payload, m.metric): m for m in ms}

    m = by[("cx3-qdr40_ib_read_lat_1.txt", 2, "lat_median")]
    assert (m.verb, m.transport, m.kind, m.value, m.unit) == ("READ", "RC", "lat", 1.74, "us")
    assert m.latency_convention == "rtt" and m.depth == 1 and m.tool == "ib_read_lat"
    assert m.mtu == 4096 and m.link_layer == "IB" and m.device == "mlx4_0"
    assert m.iterations == 1000 and m.line == 18

    s = by[("cx3-qdr40_ib_send_lat_1.txt", 2, "lat_median")]
    assert s.latency_convention == "half_rtt" and s.inline  # 2 B <= 236 B inline
    assert not by[("cx3-qdr40_ib_send_lat_1.txt", 256, "lat_median")].inline
    assert by[("cx3-qdr40_ib_write_lat_1.txt", 2, "lat_p999")].value == 4.70

    rate = by[("cx3-qdr40_ib_write_bw_2.txt", 2, "msg_rate")]
    assert (rate.value, rate.unit, rate.kind, rate.depth, rate.signal_every) == \
        (5.467546, "Mops", "bw", 128, 100)
    assert ("cx3-qdr40_ib_write_bw_2.txt", 2, "bw_peak") not in by  # not measured
    bw = by[("cx3-roce40_ib_send_bw_1.txt", 65536, "bw_avg")]
    assert bw.value == 36.07 and bw.link_layer == "Ethernet" and bw.mtu == 1024
    atom = by[("cx3-qdr40_ib_atomic_bw_1.txt", 8, "msg_rate")]
    assert atom.verb == "FAA" and atom.value == 2.220735
    # every row of every file became measurements
    n_rows = sum(len(r.rows) for p in ref_files()
                 for r in parse_perftest_runs(p.read_text(encoding="utf-8"), p.name))
    assert len({(m.source, m.line) for m in ms}) == n_rows


# ---- malformed perftest input ------------------------------------------------------------

GOOD_LAT = """\
$ ib_read_lat -a 10.0.0.2
                    RDMA_Read Latency Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 TX depth        : 1
 Mtu             : 4096[B]
 Link type       : IB
 Outstand reads  : 16
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
Conflicting CPU frequency values detected: 1200.000000 != 2400.000000. CPU Frequency is not max.
 2       1000          1.70           7.97         1.74              1.76         0.05           1.91                 7.97
 4       1000          1.73           3.56         1.76              1.77         0.04           1.89                 3.56
---------------------------------------------------------------------------------------
"""


def test_inline_sample_parses():
    run = parse_perftest(GOOD_LAT, "good.txt")
    assert run.tool == "ib_read_lat" and run.mtu == 4096 and run.device == "mlx5_0"
    assert [r.bytes for r in run.rows] == [2, 4] and run.rows[1].t_max == 3.56


def _raises(text: str, source: str = "bad.txt") -> InputError:
    with pytest.raises(InputError) as ei:
        parse_perftest(text, source)
    assert source in str(ei.value)
    return ei.value


@pytest.mark.parametrize("text", ["", "   \n\n", "hello world\n", "#bytes #iterations\n 2 1000 1.0\n"])
def test_no_title_is_an_input_error(text):
    e = _raises(text)
    assert e.source == "bad.txt" and "title" in e.expected


def test_title_without_table():
    e = _raises("RDMA_Read Latency Test\n Mtu : 4096[B]\n", "notable.txt")
    assert e.source == "notable.txt:1" and e.key == "#bytes"


def test_table_without_rows():
    e = _raises(GOOD_LAT.split(" 2       1000")[0])
    assert e.key == "#bytes" and "at least one" in e.expected


def test_short_row_names_the_line():
    text = GOOD_LAT.replace("1.91                 7.97\n", "\n", 1)
    e = _raises(text)
    assert e.source == "bad.txt:13" and e.key == "row" and "9 numbers" in e.expected


@pytest.mark.parametrize("bad", ["abc", "1.7.4", "1,74", "nan", "n/a"])
def test_malformed_number_in_a_row_names_the_line_and_column(bad):
    """A data row whose number is malformed is an error naming file:line and the column,
    not a line skipped like a warning (which silently dropped a measurement)."""
    text = GOOD_LAT.replace(" 7.97         1.74 ", f" 7.97         {bad} ", 1)
    assert text != GOOD_LAT
    e = _raises(text)
    assert e.source == "bad.txt:13" and e.key == "t_typical" and repr(bad) in e.expected


@needs_ref
def test_malformed_number_in_a_reference_file_is_not_dropped(tmp_path):
    """cx3-qdr40_ib_read_lat_2.txt with its 8-byte t_typical spoiled: loading it fails on
    that line instead of yielding one measurement fewer."""
    src = PERFTEST / "cx3-qdr40_ib_read_lat_2.txt"
    lines = src.read_text().splitlines(keepends=True)
    [i] = [n for n, ln in enumerate(lines) if ln.split()[:2] == ["8", "20000"]]
    toks = lines[i].split()
    lines[i] = lines[i].replace(f" {toks[4]} ", " abc ", 1)
    bad = tmp_path / "badrow.txt"
    bad.write_text("".join(lines))
    with pytest.raises(InputError) as ei:
        load_measurements([bad])
    assert ei.value.source == f"{bad}:{i + 1}" and ei.value.key == "t_typical"


def test_negative_value_names_the_column():
    e = _raises(GOOD_LAT.replace("0.05", "-0.05", 1))
    assert e.source == "bad.txt:13" and e.key == "t_stdev"


@pytest.mark.parametrize("line,key", [
    (" Mtu             : 4096[B]", " Mtu             : big[B]"),
    (" Link type       : IB", " Link type       : Token-Ring"),
    (" Connection type : RC", " Connection type : XYZ"),
    (" TX depth        : 1", " TX depth        : deep"),
])
def test_bad_header_value_names_the_key(line, key):
    e = _raises(GOOD_LAT.replace(line, key, 1))
    assert e.key == key.split(":")[0].strip()
    assert re.fullmatch(r"bad\.txt:\d+", e.source)


def test_latency_title_with_bandwidth_table():
    text = GOOD_LAT.replace(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
        "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]",
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
    e = _raises(text)
    assert e.key == "#bytes" and "latency table" in e.expected


def test_non_text_and_missing_paths(tmp_path):
    with pytest.raises(InputError):
        parse_perftest(b"bytes", "b.txt")  # type: ignore[arg-type]
    missing = tmp_path / "nope.txt"
    with pytest.raises(InputError) as ei:
        load_measurements([missing])
    assert str(missing) in str(ei.value)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(InputError):
        load_measurements([empty_dir])


# round trip: any table rendered the way perftest versions do, with junk interleaved
_cell = st.floats(min_value=0.01, max_value=99999, allow_nan=False).map(lambda v: round(v, 2))


@settings(deadline=None)  # example budget from the Hypothesis profile (tests/conftest.py)
@given(
    rows=st.lists(st.tuples(st.integers(1, 1 << 23), st.integers(1, 10**6), _cell, _cell, _cell),
                  min_size=1, max_size=8, unique_by=lambda r: r[0]),
    sep=st.sampled_from([" ", "   ", "\t", "\t\t ", "      "]),
    unit=st.sampled_from(["MB", "MiB", "Gb"]),
    junk=st.booleans(),
)
def test_rendered_bw_tables_round_trip(rows, sep, unit, junk):
    lines = ["root@host:~# ib_write_bw -a peer", "                    RDMA_Write BW Test",
             f" Number of qps   : 3{sep}Transport type : IB", " Mtu             : 2048[B]",
             " Link type       : Ethernet", "-" * 60,
             f" #bytes     #iterations    BW peak[{unit}/sec]    BW average[{unit}/sec]   MsgRate[Mpps]"]
    for b, it, peak, avg, rate in sorted(rows):
        if junk:
            lines.append("Conflicting CPU frequency values detected: 1.0 != 2.0. CPU Frequency is not max.")
        lines.append(f" {b}{sep}{it}{sep}{peak:.2f}{sep}{avg:.2f}{sep}{rate:.6f}")
    run = parse_perftest("\n".join(lines), "gen.txt")
    assert run.tool == "ib_write_bw" and run.qps == 3 and run.link_type == "Ethernet"
    assert len(run.rows) == len(rows)
    for r, (b, it, peak, avg, rate) in zip(run.rows, sorted(rows)):
        assert (r.bytes, r.iterations, r.msg_rate_mpps) == (b, it, float(f"{rate:.6f}"))
        want = avg if unit == "Gb" else avg * MB * 8 / 1e9
        assert r.bw_avg_gbps == pytest.approx(want, rel=1e-12)


# ---- probe JSON lines ----------------------------------------------------------------------

HEADER = {"type": "probe", "schema": 1, "probe_version": "0.1.0", "started": "2024-01-01T00:00:00Z",
          "peer": "h2", "port": 18777, "path_mtu": 4096, "max_rd_atomic": 16,
          "args": {"sweeps": ["lat", "bw"], "iters": 1000}}
POINT = {"sweep": "lat", "verb": "READ", "transport": "RC", "method": "post_to_cqe",
         "payload": 64, "qps": 1, "threads": 1, "depth": 1, "batch": 1, "signal_every": 1,
         "inline": False, "page_size": 4096, "page_backing": "base", "region_bytes": 4096,
         "addresses": 1, "random_offsets": False}
LAT = {"type": "measurement", **POINT, "iters": 1000, "elapsed_s": 0.002, "truncated": False,
       "lat_us": {"min": 1.7, "median": 1.74, "avg": 1.76, "stdev": 0.05, "p99": 1.91,
                  "p999": 7.9, "max": 7.97}, "lat_convention": "rtt"}
BW = {"type": "measurement", **POINT, "sweep": "qps", "method": "throughput", "payload": 32,
      "qps": 256, "depth": 2, "iters": 20000, "elapsed_s": 0.005, "truncated": True,
      "mops": 3.92, "gbps": 1.00352}


def probe_text(*objs) -> str:
    base = [HEADER,
            {"type": "device", "role": "client", "name": "mlx4_0", "vendor_part_id": 4099},
            {"type": "link", "role": "client", "device": "mlx4_0", "link_layer": "IB",
             "active_mtu": 4096, "active_speed": "QDR", "active_width": 4},
            {"type": "host", "role": "client", "hostname": "h1", "cpu_model": "Xeon"},
            {"type": "device", "role": "server", "name": "mlx4_0"},
            {"type": "link", "role": "server", "device": "mlx4_0", "link_layer": "IB",
             "active_mtu": 4096},
            {"type": "host", "role": "server", "hostname": "h2"}]
    return "\n".join(json.dumps(o) for o in [*base, *objs]) + "\n"


def test_probe_file_parses_and_normalises():
    skip = {"type": "skip", **POINT, "sweep": "pages", "page_size": 2097152,
            "page_backing": None, "reason": "server: cannot map"}
    end = {"type": "end", "status": "ok", "points": 2, "skipped": 1, "elapsed_s": 3.0}
    run = parse_probe_jsonl(probe_text(LAT, BW, skip, end), "p.jsonl")
    assert isinstance(run, ProbeRun) and run.complete
    assert run.devices["client"]["vendor_part_id"] == 4099 and run.links["server"]["active_mtu"] == 4096
    assert len(run.measurements) == 2 and len(run.skips) == 1
    ms = probe_measurements(run)
    lat = {m.metric: m for m in ms if m.kind == "lat"}
    assert set(lat) == {"lat_min", "lat_median", "lat_avg", "lat_stdev", "lat_p99", "lat_p999", "lat_max"}
    med = lat["lat_median"]
    assert (med.verb, med.transport, med.payload, med.value, med.unit) == ("READ", "RC", 64, 1.74, "us")
    assert med.latency_convention == "rtt" and med.tool == "rnicsim-probe" and med.sweep == "lat"
    assert med.source == "p.jsonl" and med.line == 8 and med.mtu == 4096
    assert med.link_layer == "IB" and med.device == "mlx4_0"
    bw = {m.metric: m for m in ms if m.kind == "bw"}
    assert bw["msg_rate"].value == 3.92 and bw["msg_rate"].unit == "Mops"
    assert bw["bw_avg"].value == 1.00352 and bw["bw_avg"].qps == 256 and bw["bw_avg"].depth == 2
    assert bw["bw_avg"].truncated


def test_probe_file_without_end_is_incomplete_but_valid():
    run = parse_probe_jsonl(probe_text(LAT), "p.jsonl")
    assert not run.complete and len(run.measurements) == 1


def _probe_error(text: str) -> InputError:
    with pytest.raises(InputError) as ei:
        parse_probe_jsonl(text, "p.jsonl")
    return ei.value


def _without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


@pytest.mark.parametrize("obj,key", [
    (_without(LAT, "payload"), "payload"),
    ({**LAT, "payload": 0}, "payload"),
    ({**LAT, "payload": True}, "payload"),
    ({**LAT, "payload": "64"}, "payload"),
    ({**LAT, "verb": "RECV"}, "verb"),
    ({**LAT, "sweep": "nope"}, "sweep"),
    ({**LAT, "inline": 0}, "inline"),
    ({**LAT, "lat_us": {**LAT["lat_us"], "median": "1.7"}}, "lat_us.median"),
    ({**LAT, "lat_us": {**LAT["lat_us"], "median": 9.0}}, "lat_us.max"),
    ({**LAT, "lat_us": _without(LAT["lat_us"], "p999")}, "lat_us.p999"),
    ({**LAT, "lat_us": [1, 2]}, "lat_us"),
    ({**LAT, "lat_convention": "one-way"}, "lat_convention"),
    (_without(BW, "mops"), "mops"),
    ({**BW, "gbps": float("nan")}, "gbps"),
    ({**BW, "gbps": -1}, "gbps"),
    ({"type": "bogus"}, "type"),
    ({"type": "end", "status": "fine"}, "status"),
    ({"type": "link", "role": "client", "link_layer": "IB", "active_mtu": 4096}, "role"),
    ({"type": "probe", "schema": 1, "probe_version": "x"}, "type"),
])
def test_probe_errors_name_line_and_key(obj, key):
    text = probe_text(obj)
    e = _probe_error(text)
    assert e.source == "p.jsonl:8", str(e)
    assert e.key == key, str(e)
    assert str(e).startswith("p.jsonl:8: " + key + ": ")


def test_probe_structural_errors():
    e = _probe_error('{"type": "probe", "schema": 1, "probe_version": "0.1.0"}\n{not json}\n')
    assert e.source == "p.jsonl:2" and "JSON" in e.expected
    e = _probe_error(json.dumps(LAT) + "\n")
    assert e.source == "p.jsonl:1" and e.key == "type"
    e = _probe_error(json.dumps({**HEADER, "schema": 2}) + "\n")
    assert e.key == "schema"
    e = _probe_error("\n\n")
    assert e.source == "p.jsonl"
    e = _probe_error(json.dumps(HEADER) + "\n[1, 2]\n")
    assert e.source == "p.jsonl:2"
    e = _probe_error(probe_text({"type": "end", "status": "ok"}, LAT))
    assert e.source == "p.jsonl:9" and e.key == "type"


def test_load_measurements_tells_formats_apart(tmp_path):
    (tmp_path / "probe.jsonl").write_text(probe_text(LAT, BW), encoding="utf-8")
    (tmp_path / "lat.txt").write_text(GOOD_LAT, encoding="utf-8")
    ms = load_measurements([tmp_path / "probe.jsonl", tmp_path / "lat.txt"])
    tools = {m.tool for m in ms}
    assert tools == {"rnicsim-probe", "ib_read_lat"}
    assert load_measurements(tmp_path) == load_measurements([tmp_path / "lat.txt",
                                                             tmp_path / "probe.jsonl"])
    (tmp_path / "broken.jsonl").write_text(json.dumps(HEADER) + "\n{\n", encoding="utf-8")
    with pytest.raises(InputError) as ei:
        load_measurements([tmp_path / "broken.jsonl"])
    assert str(tmp_path / "broken.jsonl") + ":2" in str(ei.value)


def test_schema_md_examples_parse():
    """The measurement and switch examples of SCHEMA.md are valid for the parser."""
    text = SCHEMA_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    lines = [ln for b in blocks for ln in b.splitlines()
             if ln.startswith('{"type":"measurement"')]
    assert sum('"sweep":"coro"' in ln for ln in lines) == 1
    lines += [ln for b in blocks for ln in b.splitlines() if ln.startswith('{"type":"switch"')]
    assert len(lines) >= 2
    run = parse_probe_jsonl(json.dumps(HEADER) + "\n" + "\n".join(lines) + "\n", "SCHEMA.md")
    assert {m["method"] for m in run.measurements} == {"post_to_cqe", "throughput"}
    assert len(run.switches) == 1 and any(m["sweep"] == "coro" for m in run.measurements)
    # and the documented sweep names are the ones the parser accepts
    for sweep in ("lat", "bw", "qps", "threads", "depth", "batch", "signal", "inline",
                  "atomics", "pages", "coro"):
        assert f"`{sweep}`" in text
    assert math.isclose(MB, 1048576)
