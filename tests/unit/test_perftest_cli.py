"""``rnicsim perftest``: perftest's table format, flags, and agreement with the reference
measurements of a ConnectX-3 QDR pair (../shared/reference-data/perftest).

The simulated output is parsed with the same parser as the real files
(:func:`calibration.parsers.parse_perftest`), so the two tables are compared like for like.
Tests that read the reference data skip when it is absent.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from calibration.parsers import BwRow, LatRow, parse_perftest_runs
from rnicsim.cli import main

REPO = Path(__file__).resolve().parents[2]
PERFTEST = REPO.parent / "shared" / "reference-data" / "perftest"
TOLERANCE = 0.15

needs_ref = pytest.mark.skipif(not PERFTEST.is_dir(),
                               reason=f"perftest reference data not found at {PERFTEST}")


def perftest(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["perftest", *args])
    out, err = capsys.readouterr()
    return code, out, err


def reference_row(filename: str, tool: str, size: int):
    """The row of ``size`` bytes of the ``tool`` run in a reference file."""
    runs = [r for r in parse_perftest_runs((PERFTEST / filename).read_text(), filename)
            if r.tool == tool]
    assert runs, f"no {tool} run in {filename}"
    rows = [row for row in runs[0].rows if row.bytes == size]
    assert rows, f"no {size} B row in {filename}"
    return rows[0]


def simulated_run(capsys, tool: str, *flags: str, nic: str = "cx3-qdr"):
    code, out, err = perftest(capsys, tool, "--nic", nic, *flags)
    assert code == 0, err
    [run] = parse_perftest_runs(out, f"rnicsim perftest {tool}")
    return run, out


# =========================================================================== format
def test_read_lat_prints_perftest_table(capsys):
    """ib_read_lat prints perftest's title, header lines, column header and one row."""
    code, out, err = perftest(capsys, "ib_read_lat", "--nic", "cx3-qdr", "-n", "50")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert any(line.strip() == "RDMA_Read Latency Test" for line in lines)
    assert re.search(r"^ Dual-port\s+: OFF\s+Device\s+: mlx4_0$", out, re.M)
    assert re.search(r"^ Mtu\s+: 2048\[B\]$", out, re.M)
    assert re.search(r"^ Link type\s+: IB$", out, re.M)
    assert re.search(r"^ Outstand reads\s+: 16$", out, re.M)
    header = [i for i, line in enumerate(lines) if line.lstrip().startswith("#bytes")]
    assert len(header) == 1
    assert re.match(r"^ #bytes #iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+"
                    r"t_typical\[usec\]\s+t_avg\[usec\]\s+t_stdev\[usec\]\s+"
                    r"99% percentile\[usec\]\s+99\.9% percentile\[usec\]", lines[header[0]])
    rows = [line for line in lines[header[0] + 1:] if re.match(r"^\s*\d", line)]
    assert len(rows) == 1
    cols = rows[0].split()
    assert cols[:2] == ["2", "50"] and len(cols) == 9
    t_min, t_max, t_typ = map(float, cols[2:5])
    assert 0 < t_min <= t_typ <= t_max
    assert lines[-1].startswith("-" * 80)


def test_parsed_simulated_header_matches_the_profile(capsys):
    """The perftest parser reads the simulated header as a ConnectX-3 QDR run."""
    run, _ = simulated_run(capsys, "ib_read_lat", "-n", "20")
    assert (run.tool, run.kind, run.device, run.mtu, run.link_type) == \
        ("ib_read_lat", "lat", "mlx4_0", 2048, "IB")
    assert len(run.rows) == 1 and isinstance(run.rows[0], LatRow)
    assert run.rows[0].iterations == 20


def test_bw_prints_perftest_table(capsys):
    """ib_write_bw prints the BW column header and one row with a message rate."""
    run, out = simulated_run(capsys, "ib_write_bw", "-s", "2", "-n", "500")
    assert "RDMA_Write BW Test" in out
    assert re.search(r"#bytes\s+#iterations\s+BW peak\[MB/sec\]\s+BW average\[MB/sec\]\s+"
                     r"MsgRate\[Mpps\]", out)
    assert re.search(r"^ CQ Moderation\s+: 100$", out, re.M)
    [row] = run.rows
    assert isinstance(row, BwRow) and row.bytes == 2 and row.iterations == 500
    # perftest's identity: BW average [MB/s] * 2^20 == MsgRate * 1e6 * bytes
    assert row.bw_avg_gbps == pytest.approx(row.msg_rate_mpps * 1e6 * 2 * 8 / 1e9, rel=0.01)


def test_all_sizes_gives_23_rows(capsys):
    """``-a`` runs every power of two from 2 B to 8 MiB: 23 rows, latency non-decreasing."""
    run, _ = simulated_run(capsys, "ib_write_lat", "-a", "-n", "5")
    assert [r.bytes for r in run.rows] == [2 ** k for k in range(1, 24)]
    typical = [r.t_typical for r in run.rows]
    assert all(a <= b + 1e-9 for a, b in zip(typical, typical[1:]))


def test_output_file_matches_stdout(capsys, tmp_path):
    """``--out FILE`` writes exactly what was printed."""
    target = tmp_path / "sub" / "lat.txt"
    code, out, _ = perftest(capsys, "ib_send_lat", "--nic", "cx3-qdr", "-n", "10",
                            "--out", str(target))
    assert code == 0 and target.read_text() == out
    assert not list(tmp_path.rglob("*.partial"))


@pytest.mark.parametrize("tool, size", [("ib_write_bw", 65536), ("ib_read_bw", 65536),
                                        ("ib_send_bw", 65536), ("ib_atomic_bw", 8),
                                        ("ib_read_lat", 2), ("ib_send_lat", 2),
                                        ("ib_atomic_lat", 8)])
def test_default_size_is_perftests(capsys, tool, size):
    """Without -s, perftest's defaults (perftest_parameters.h: DEF_SIZE_BW 65536 for the
    bandwidth tools, DEF_SIZE_LAT 2 for the latency tools, DEF_SIZE_ATOMIC 8)."""
    run, _ = simulated_run(capsys, tool, "-n", "20")
    assert [r.bytes for r in run.rows] == [size]


def test_out_directory_exits_2_before_running(capsys, tmp_path):
    """``--out`` naming a directory, or a path below a file, exits 2 naming --out before
    anything runs or prints (it used to print the table, then fail with IsADirectoryError)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target in (tmp_path, afile / "lat.txt"):
        code, out, err = perftest(capsys, "ib_write_lat", "-n", "5", "--out", str(target))
        assert code == 2 and out == "" and "--out" in err and "Traceback" not in err, err
    assert afile.read_text() == "x"


@pytest.mark.parametrize("umask", [0o022, 0o007])
def test_output_file_mode_follows_the_umask(capsys, tmp_path, umask):
    """``--out`` files get 0o666 less the umask, like any file a program creates (the
    temporary file behind the atomic write is 0o600)."""
    import os

    old = os.umask(umask)
    try:
        code, _, _ = perftest(capsys, "ib_send_lat", "-n", "5", "--out", str(tmp_path / "o"))
    finally:
        os.umask(old)
    assert code == 0
    assert (tmp_path / "o").stat().st_mode & 0o777 == 0o666 & ~umask


# =========================================================================== vs reference
@needs_ref
@pytest.mark.parametrize("tool, filename, size, published, nic", [
    ("ib_read_lat", "cx3-qdr40_ib_read_lat_2.txt", 2, 1.99, "cx3-qdr"),
    ("ib_write_lat", "cx3-qdr40_ib_write_lat_3.txt", 2, 0.98, "cx3-qdr"),
    ("ib_atomic_lat", "cx3-qdr40_ib_atomic_lat_1.txt", 8, 2.34, "cx3-qdr"),
    # FDR10 (40 Gb/s) file against the 56 Gb/s FDR profile: at 2 B the link rate is a few
    # nanoseconds of the latency; the same ConnectX-3 (FW 2.42.5000, MTU 2048).
    ("ib_write_lat", "cx3-fdr10_ib_write_lat_2.txt", 2, 0.98, "cx3-fdr"),
])
def test_latency_median_matches_reference(capsys, tool, filename, size, published, nic):
    """The simulated median (t_typical) is within 15 % of the measured one."""
    ref = reference_row(filename, tool, size)
    assert ref.t_typical == pytest.approx(published)
    run, _ = simulated_run(capsys, tool, "-n", "50", nic=nic)
    [row] = run.rows
    assert row.bytes == size
    assert row.t_typical == pytest.approx(ref.t_typical, rel=TOLERANCE), \
        f"{tool}: simulated {row.t_typical} us vs measured {ref.t_typical} us"


@needs_ref
@pytest.mark.parametrize("tool, filename, size, published", [
    ("ib_write_bw", "cx3-qdr40_ib_write_bw_2.txt", 2, 5.47),
    ("ib_read_bw", "cx3-qdr40_ib_read_bw_2.txt", 2, 4.76),
    ("ib_send_bw", "cx3-qdr40_ib_send_bw_2.txt", 2, 5.19),
    ("ib_atomic_bw", "cx3-qdr40_ib_atomic_lat_1.txt", 8, 2.45),
])
def test_message_rate_matches_reference(capsys, tool, filename, size, published):
    """The simulated message rate is within 15 % of the measured one."""
    ref = reference_row(filename, tool, size)
    assert ref.msg_rate_mpps == pytest.approx(published, abs=0.01)
    run, _ = simulated_run(capsys, tool, "-s", str(size), "-n", "1500")
    [row] = run.rows
    assert row.bytes == size
    assert row.msg_rate_mpps == pytest.approx(ref.msg_rate_mpps, rel=TOLERANCE), \
        f"{tool}: simulated {row.msg_rate_mpps} Mpps vs measured {ref.msg_rate_mpps} Mpps"


def test_same_seed_same_table(capsys):
    """Two runs with the same flags print the same table."""
    a = perftest(capsys, "ib_read_bw", "--nic", "cx3-qdr", "-n", "300")[1]
    b = perftest(capsys, "ib_read_bw", "--nic", "cx3-qdr", "-n", "300")[1]
    assert a == b


def test_set_takes_counts_flags_and_times_as_a_scenario_does(capsys):
    """``--set`` values are parsed as YAML, like a scenario's ``--set``: a count (8), a
    flag (true) and a time (80ns or a bare number of ns) all take, and each changes what
    it should. (Before, every value reached the profile as a string, so counts and flags
    exited 2.)"""
    def rate(*sets: str) -> float:
        flags = [x for s in sets for x in ("--set", s)]
        [row] = simulated_run(capsys, "ib_read_bw", "-s", "32", "-q", "8", "-n", "300",
                              *flags, nic="cx4-edr")[0].rows
        return row.msg_rate_mpps

    base = rate()
    assert rate("nic.processing_units=1") < 0.5 * base       # one PU serves every READ
    assert rate("nic.dcqcn=true") > 0                         # a flag takes
    lat = [simulated_run(capsys, "ib_read_lat", "-n", "50", "--set", s)[0].rows[0].t_typical
           for s in ("host.mmio=80ns", "host.mmio=80", "host.mmio=400ns")]
    assert lat[0] == lat[1] < lat[2]


@pytest.mark.parametrize("flags", [
    ["-s", "65536", "-l", "4", "-Q", "2", "-I", "0", "-m", "1024", "-n", "200"],
    ["-s", "4096", "-n", "200", "-q", "2", "-t", "64", "-l", "8", "-c", "UC", "-I", "64",
     "-m", "1024", "-Q", "4"],
])
def test_bw_peak_is_perftests_best_run_of_operations(capsys, flags):
    """BW peak is perftest's (``print_report_bw``): the best rate over any run of
    operations from the post of the first to the completion of the last, so never
    below the average, which is one such run, nor above what the link carries. It was the
    best gap between two completions: CQEs of one coalesced ACK, a few ns apart, gave
    4 Tb/s on a 100 Gb/s link."""
    run, _ = simulated_run(capsys, "ib_write_bw", *flags, "--report_gbits", nic="cx4-edr")
    [row] = run.rows
    assert row.bw_avg_gbps <= row.bw_peak_gbps <= 100.0


# =========================================================================== bad flags
@pytest.mark.parametrize("args, words", [
    (["ib_read_lat", "--bogus"], ["unrecognized arguments", "--bogus"]),
    (["ib_nothing_lat"], ["invalid choice", "ib_nothing_lat"]),
    (["ib_read_lat", "-n", "0"], ["--iters", "positive"]),
    (["ib_read_lat", "-n", "many"], ["-n", "invalid int"]),
    (["ib_write_bw", "-q", "-2"], ["--qp", "positive"]),
    (["ib_atomic_lat", "-s", "64"], ["-s", "8"]),
    (["ib_read_lat", "-c", "UD"], ["-c", "RC"]),
    (["ib_write_lat", "-c", "UD"], ["-c", "UD has no RDMA WRITE"]),
    (["ib_read_lat", "-m", "3000"], ["invalid choice", "3000"]),
    (["ib_read_lat", "--set", "pcie.latency"], ["--set", "KEY.PATH=VALUE"]),
    (["ib_read_lat", "--set", "pcie.latncy=1ns", "-n", "5"], ["pcie.latncy"]),
    (["ib_read_lat", "--nic", "cx9", "-n", "5"], ["cx9", "cx3-qdr"]),
    (["ib_send_bw", "-c", "UD", "-s", "8192", "-n", "5"],
     ["-s: at most the MTU (4096 B) with -c UD: a UD message is one packet (perftest: "
      "'Max message size in UD cannot be greater than MTU'), got 8192"]),
    (["ib_send_bw", "-c", "UD", "-m", "1024", "-s", "2048", "-n", "5"],
     ["-s: at most the MTU (1024 B) with -c UD"]),
    (["ib_send_lat", "-s", "64", "-a"], ["-a: -a (every size) or -s 64 (one size), not both"]),
    (["ib_atomic_bw", "-a"], ["-a: only with a tool other than the atomic ones", "not "
                              "ib_atomic_bw"]),
    (["ib_read_lat", "-q", "2"], ["-q: only with a *_bw tool", "not ib_read_lat"]),
    (["ib_send_lat", "-t", "4"], ["-t: only with a *_bw tool", "not ib_send_lat"]),
    (["ib_write_lat", "-l", "2"], ["-l: only with a *_bw tool", "not ib_write_lat"]),
    (["ib_atomic_lat", "-Q", "10"], ["-Q: only with a *_bw tool", "not ib_atomic_lat"]),
    (["ib_read_lat", "--report_gbits"], ["--report_gbits: only with a *_bw tool"]),
    (["ib_write_bw", "-o", "4"], ["-o: only with a READ or atomic tool", "not ib_write_bw"]),
    (["ib_read_bw", "-A", "CMP_AND_SWAP"], ["-A: only with an atomic tool", "not ib_read_bw"]),
    (["ib_read_lat", "-I", "64"], ["-I: only with a WRITE or SEND tool", "not ib_read_lat"]),
    (["ib_write_bw", "-l", "3", "-n", "10"],
     ["-l: a divisor of the iterations (-n 10;", "got 3"]),
    (["ib_write_bw", "-l", "4", "-Q", "3", "-n", "8"],
     ["-l: a multiple of the CQ moderation (-Q 3;", "got 4"]),
    (["ib_write_bw", "-l", "256", "-n", "512"],
     ["-l: at most the TX depth (-t 128): a list of 256 WRs never fits the send queue"]),
    ([], ["the following arguments are required: TOOL"]),
])
def test_bad_flags_exit_2_with_a_message(capsys, args, words):
    """Bad flags and values exit 2 with a one-line message on stderr, no traceback."""
    code, out, err = perftest(capsys, *args)
    assert code == 2, (out, err)
    assert err.startswith("rnicsim perftest: error: ")
    assert "Traceback" not in err and out == ""
    for w in words:
        assert w in err, (w, err)


def test_help_is_an_option_list(capsys):
    """``rnicsim perftest --help`` prints argparse's usage and option list (every perftest
    flag with its meaning), not the module docstring, and exits 0."""
    code, out, _ = perftest(capsys, "--help")
    assert code == 0 and out.startswith("usage: rnicsim perftest [-h] [-s BYTES] [-a]")
    for flag in ("-s BYTES, --size BYTES", "-a, --all", "-n N, --iters N", "-q N, --qp N",
                 "-t N, --tx-depth N", "-l N, --post_list N", "-c {RC,UC,UD}",
                 "-I BYTES, --inline_size BYTES", "-Q N, --cq-mod N", "-o N, --outs N",
                 "--report_gbits", "--nic PROFILE", "--out FILE", "ib_atomic_bw"):
        assert flag in out, flag
    assert "``" not in out


def test_ud_default_size_is_capped_at_the_mtu_as_perftest_does(capsys):
    """ib_send_bw -c UD without -s (default 65536 B) runs at the MTU and says so on stderr
    in perftest's words (check_mtu); -a stops at the MTU with the same note."""
    code, out, err = perftest(capsys, "ib_send_bw", "-c", "UD", "-m", "2048", "-n", "10")
    assert code == 0 and err == " Max msg size in UD is MTU 2048\n Changing to this MTU\n"
    [run] = parse_perftest_runs(out, "ud")
    assert [r.bytes for r in run.rows] == [2048]
    code, out, err = perftest(capsys, "ib_send_bw", "-c", "UD", "-a", "-m", "1024", "-n", "5")
    assert code == 0 and err == " Max msg size in UD is MTU 1024\n Changing to this MTU\n"
    [run] = parse_perftest_runs(out, "ud -a")
    assert [r.bytes for r in run.rows] == [2 ** k for k in range(1, 11)]


def test_post_list_sets_the_cq_moderation_as_perftest_does(capsys):
    """-l N without -Q makes N the CQ moderation (perftest's force_dependecies), with
    perftest's note on stderr and both in the header; with -Q the given value stays. The
    TX depth printed is perftest's: at most the iterations (8 here)."""
    code, out, err = perftest(capsys, "ib_write_bw", "-l", "4", "-n", "8", "-s", "64")
    assert code == 0
    assert err == " Post List requested - CQ moderation will be the size of the post list\n"
    assert " TX depth        : 8\n Post List       : 4\n CQ Moderation   : 4\n" in out
    code, out, err = perftest(capsys, "ib_write_bw", "-l", "4", "-Q", "2", "-n", "8",
                              "-s", "64")
    assert code == 0 and err == "" and " CQ Moderation   : 2\n" in out
