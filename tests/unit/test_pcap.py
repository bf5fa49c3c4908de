"""Packets written as pcap (rnicsim.pcap), decoded by Wireshark's tshark."""
import shutil
import subprocess

import pytest

from rnicsim.pcap import opcode
from rnicsim.profile import load_profile
from rnicsim.trace import capture, timeline

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (Debian: "
                                  "apt-get install tshark; .ci/run installs it)")


def decode(path, *fields, display=None):
    """Rows of the named tshark fields, one per packet (display filter ``display``)."""
    cmd = [TSHARK, "-r", str(path), "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    if display:
        cmd += ["-Y", display]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("\t")) for line in out.splitlines()]


@needs_tshark
@pytest.mark.parametrize("profile,verb,payload,expected", [
    # InfiniBand, 4 KiB MTU: the first WRITE took PSNs 0-2; the traced one takes 3-5 and
    # its ACK names the last of them.
    ("cx4-edr", "write", 9000, [("6", "3"), ("7", "4"), ("8", "5"), ("17", "5")]),
    # RoCE, 1 KiB MTU: a 3000-B READ request takes a PSN per response packet (the first
    # READ took 0-2); the response packets carry the request's PSNs.
    ("cx4-roce-100g", "read", 3000, [("12", "3"), ("13", "3"), ("14", "4"), ("15", "5")]),
    ("cx4-roce-100g", "cas", 8, [("19", "1"), ("18", "1")]),
    ("cx4-edr", "faa", 8, [("20", "1"), ("18", "1")]),
    ("cx4-edr", "send", 8, [("4", "1"), ("17", "1")]),
])
def test_wireshark_decodes_opcodes_and_psns_of_one_verb(tmp_path, profile, verb, payload,
                                                         expected):
    """tshark finds in the file exactly the traced verb's packets: BTH opcodes and PSNs
    as the IBA numbers them, to QP 0x101 (the model's QP 1 + 0x100) on both sides."""
    path = tmp_path / "verb.pcap"
    timeline(load_profile(profile), verb, payload, pcap=str(path))
    rows = decode(path, "infiniband.bth.opcode", "infiniband.bth.psn",
                  "infiniband.bth.destqp")
    assert [r[:2] for r in rows] == expected
    assert {r[2] for r in rows} == {"0x000101"}


@needs_tshark
def test_roce_packets_are_udp_4791_with_full_lengths_and_simulated_times(tmp_path):
    """A RoCE READ's request is Ethernet/IPv4/UDP to 4791 from 10.0.0.1 to 10.0.0.2:
    14 + 20 + 8 + BTH 12 + RETH 16 + ICRC 4 = 74 B; its response carries 8 B and the
    AETH: 14 + 20 + 8 + 12 + 4 + 8 + 4 = 70 B. Its timestamp is the simulated time [ns]
    the request starts on the egress link."""
    path = tmp_path / "read.pcap"
    events, _ = timeline(load_profile("cx4-roce-100g"), "read", 8, pcap=str(path))
    rows = decode(path, "udp.dstport", "ip.src", "ip.dst", "frame.len",
                  "frame.time_epoch")
    assert [r[:4] for r in rows] == [("4791", "10.0.0.1", "10.0.0.2", "74"),
                                     ("4791", "10.0.0.2", "10.0.0.1", "70")]
    egress = next(t for t, name, scope, _d in events
                  if name == "link.tx" and scope == "nic0->sw0")
    assert float(rows[0][4]) == pytest.approx(int(egress) * 1e-9, abs=1e-12)


@needs_tshark
def test_pfc_pauses_of_an_incast_are_mac_control_frames(tmp_path):
    """A RoCE incast that makes switches pause: tshark finds PFC (class-based) PAUSE
    frames for priority 3 and, with DCQCN, CNPs (opcode 0x81) besides the WRITEs."""
    from rnicsim.runner import run_point
    from rnicsim.scenario import resolve

    raw = {"version": 1, "name": "incast",
           "cluster": {"nodes": 6, "nic": {"profile": "cx4-roce-100g"}},
           "workload": {"kind": "incast", "senders": 4, "payload": "64KiB",
                        "outstanding": 4, "dcqcn": True},
           "run": {"seed": 3, "warmup": "20us", "measure": "20us"}}
    path = tmp_path / "incast.pcap"
    with capture(None, str(path), 0.0, 40_000.0):
        run_point(resolve(raw, "<test>"))
    pauses = decode(path, "macc.opcode", "macc.cbfc.enbv", display="macc")
    assert pauses and set(pauses) == {("0x0101", "0x0008")}
    ops = {r[0] for r in decode(path, "infiniband.bth.opcode", display="infiniband")}
    assert {"6", "7", "8", "17", "129"} <= ops


def test_opcode_table_follows_the_iba():
    """BTH opcodes by transport, verb and packet position (IBA vol. 1, table 38)."""
    from rnicsim.hw.qp import ACK, REQUEST, RESPONSE
    from rnicsim.hw.wqe import READ, SEND, SEND_WITH_IMM, WRITE_WITH_IMM

    assert [opcode(REQUEST, SEND, "RC", i, 3) for i in range(3)] == [0x00, 0x01, 0x02]
    assert opcode(REQUEST, SEND_WITH_IMM, "UD", 0, 1) == 0x65
    assert opcode(REQUEST, WRITE_WITH_IMM, "UC", 1, 2) == 0x29
    assert opcode(RESPONSE, READ, "RC", 0, 1) == 0x10
    assert opcode(ACK, READ, "RC", 0, 1) == 0x11
