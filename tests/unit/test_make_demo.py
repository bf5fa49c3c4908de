"""``make demo``, the README's first command, run as a user runs it.

The target is run with ``make`` itself (the installed ``.venv`` is reused: its stamp is
newer than what it depends on, so nothing is reinstalled), writing into a temporary
``DEMO_OUT``. The test asserts what the README promises the demo leaves behind: the READ's
Perfetto trace with the stages of one verb, its pcap, RDMC's report with a score line and
RDMC's fig. 4 drawn; and that the demo says what it showed. About 20 s of CPU.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_writes_the_trace_the_pcap_and_the_rdmc_report(tmp_path):
    stamp = ROOT / ".venv" / ".installed"
    if not stamp.exists():
        pytest.skip("no installed .venv (make demo would install it)")
    # -q: would the target reinstall? (It must not here: the suite runs from this venv.)
    stale = subprocess.run(["make", "-q", "-C", str(ROOT), str(stamp.relative_to(ROOT))],
                           capture_output=True)
    if stale.returncode != 0:
        pytest.skip(".venv is older than pyproject.toml or the compiled core's sources")
    out = tmp_path / "demo"
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "demo", f"DEMO_OUT={out}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # The READ's timeline: a Perfetto trace-event file whose events name the stages.
    events = json.loads((out / "read.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = " ".join(str(e.get("name", "")) for e in events).lower()
    for stage in ("doorbell", "cqe", "poll"):
        assert stage in names, stage
    # Its packets: a pcap file with nanosecond time stamps (magic 0xa1b23c4d, little-endian).
    assert (out / "read.pcap").read_bytes()[:4] == b"\x4d\x3c\xb2\xa1"
    # RDMC's reproduction: the report with its score line; fig. 4's three plots.
    report = (out / "rdmc" / "report.md").read_text()
    assert "validation" in report.lower()
    assert len(list((out / "rdmc_fig4").glob("*.png"))) == 3
    # The demo says what it showed, and nothing was written to the repository's out/.
    assert "Shown: one 8-byte READ" in proc.stdout
    assert str(out) in proc.stdout
