"""``rnicsim compare``: real perftest output beside the same test on a simulated NIC.

The files in ``tests/data/perftest/`` are copies of ``reference-data/perftest/`` files that
no profile cites (held-out ConnectX-3 measurements; the first line of each names its
public source). Each compared row must be the measured value of the file, the value
``rnicsim perftest`` gives for the same tool and flags, and their relative difference.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from calibration.compare import compare
from rnicsim.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


def simulated_t_typical(capsys, *flags: str) -> float:
    """t_typical [us] that ``rnicsim perftest`` prints for one size (2 decimals)."""
    assert main(["perftest", *flags, "--quiet"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if re.match(r"\s*\d+\s+\d+\s+\d", line)]
    assert len(row) == 1, out
    return float(row[0].split()[4])          # #bytes #iter t_min t_max t_typical


def test_read_lat_row_is_measured_beside_rnicsim_perftest(capsys):
    """cx3_ib_read_lat_3.txt: one ib_read_lat row (2 B, MTU 2048, InfiniBand: cx3-qdr by
    default), t_typical 1.79 us measured; simulated as ``rnicsim perftest ib_read_lat -s 2
    -m 2048`` gives it; error = simulated / measured - 1."""
    code, out, err = run(capsys, str(DATA / "cx3_ib_read_lat_3.txt"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("cx3_ib_read_lat_3.txt against profile cx3-qdr: simulated / measured"
                        " - 1 per row")
    assert lines[1].split() == ["line", "test", "quantity", "measured", "simulated", "error"]
    cells = re.split(r"\s{2,}", lines[2].strip())
    assert cells[:4] == ["22", "ib_read_lat 2 B", "t_typical [us]", "1.79"]
    sim = simulated_t_typical(capsys, "ib_read_lat", "-s", "2", "-m", "2048",
                              "--nic", "cx3-qdr")
    assert float(cells[4]) == pytest.approx(sim, abs=0.005)
    assert cells[5] == f"{float(cells[4]) / 1.79 - 1:+.1%}"
    assert lines[3] == f"1 row: mean |error| {abs(float(cells[4]) / 1.79 - 1):.1%}, " \
                       f"largest {abs(float(cells[4]) / 1.79 - 1):.1%}"
    assert len(lines) == 4


def test_compare_returns_every_row_with_its_error():
    """The function behind the command: the FDR10 inline WRITE latency (0.98 us, 2 B,
    inline as the file's Max inline data allows) and the QDR atomic rate (2.220735 Mpps at a
    TX depth of 1000); error = simulated / measured - 1 exactly."""
    name, rows, skipped = compare(str(DATA / "cx3-fdr10_ib_write_lat_2.txt"))
    assert name == "cx3-qdr" and not skipped
    [r] = rows
    assert (r["test"], r["bytes"], r["quantity"], r["unit"], r["measured"]) == \
        ("ib_write_lat 2 B inline", 2, "t_typical", "us", 0.98)
    assert r["error"] == r["simulated"] / 0.98 - 1
    _name, [a], _ = compare(str(DATA / "cx3-qdr40_ib_atomic_bw_1.txt"))
    assert (a["test"], a["quantity"], a["unit"], a["measured"]) == \
        ("ib_atomic_bw 8 B depth 1000", "MsgRate", "Mpps", 2.220735)
    assert a["error"] == a["simulated"] / 2.220735 - 1


def test_ethernet_output_defaults_to_the_roce_profile_and_an_ib_profile_compares_nothing(
        capsys):
    """The RoCE 40 GbE file runs on cx3-roce-10g by default; on an InfiniBand profile its
    row is listed as not compared, with the reason, and the command exits 2."""
    f = str(DATA / "cx3-roce40_ib_send_bw_1.txt")
    code, out, _err = run(capsys, f)
    assert code == 0
    assert out.splitlines()[0].startswith("cx3-roce40_ib_send_bw_1.txt against profile "
                                          "cx3-roce-10g")
    code, out, err = run(capsys, f, "--nic", "cx3-qdr")
    assert code == 2
    assert out.splitlines()[-1] == ("not compared: line 23: ib_send_bw SEND RC bw 65536 B: "
                                    "measured on Ethernet, the base profile is ib")
    assert err.strip() == (f"rnicsim compare: error: {f}: no row could be compared on "
                           "cx3-qdr (reasons above)")


@pytest.mark.parametrize("args, expected", [
    (["nofile.txt"], "command line: MEASURED.txt: a readable perftest output file, got "
                     "'nofile.txt'"),
    ([str(DATA / "cx3_ib_read_lat_3.txt"), "--nic", "cx9"], "cx9"),
    ([str(DATA / "cx3_ib_read_lat_3.txt"), "--set", "nic.processing_units"],
     "command line: --set: SECTION.PARAM=VALUE, got 'nic.processing_units'"),
    ([str(DATA / "cx3_ib_read_lat_3.txt"), "--set", "nic.nope=3"], "nic.nope"),
])
def test_bad_input_exits_2_naming_what_was_expected(capsys, args, expected):
    """A missing file, an unknown profile, a --set without a value or naming no
    parameter: exit 2, a message naming it, no traceback."""
    code, _out, err = run(capsys, *args)
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_file_without_perftest_output_exits_2(tmp_path, capsys):
    """A text file holding no perftest run is refused naming the file and what a
    perftest run starts with."""
    f = tmp_path / "notes.txt"
    f.write_text("ib_read_lat was run on both hosts\n")
    code, _out, err = run(capsys, str(f))
    assert code == 2
    assert err == (f"rnicsim compare: error: {f}: perftest output with a test title line "
                   "such as 'RDMA_Read Latency Test' or 'Send BW Test'\n")
