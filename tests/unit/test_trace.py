"""Trace sources, one verb's timeline, Perfetto files and run capture (rnicsim.trace)."""
import json
import re

import pytest

from rnicsim.cli import main
from rnicsim.profile import load_profile
from rnicsim.trace import Recorder, capture, parse_window, perfetto, table, timeline


def ser(nbytes, rate):
    return nbytes * 8e9 / rate


def test_a_warm_read_timeline_is_every_stage_at_its_hand_computed_time():
    """A warm 8-B READ on cx4-edr, stage by stage (times from the post [ns]): the CPU
    builds the 64-B WQE and pushes it by BlueFlame; the TLP crosses PCIe; the requester
    PU (context cached) works; the 42-B request (headers + RETH) serialises on the
    egress, then, cut-through, on the switch port a propagation and the switch latency
    later; the responder PU works; it DMA-reads 8 B (request TLP up, completion down,
    each a one-way latency); the 38-B response (+ AETH) crosses both hops; the completer
    PU works; the data and the CQE are written (the CQE issued once the data TLP is);
    the CQE lands a latency later; the polling thread notices it ``poll_detect`` later
    and spends ``poll_cq + cqe_handle``."""
    p = load_profile("cx4-edr")
    h, pc, n, l, sw = p.host, p.pcie, p.nic, p.link, p.switch
    events, t0 = timeline(p, "read", 8)
    got = sorted(((t - t0, name, scope, None if "end" not in d else d["end"] - t0)
                  for t, name, scope, d in events), key=lambda e: (round(e[0], 6), e[1]))

    exp = []

    def span(name, scope, start, dur):
        exp.append((start, name, scope, start + dur))
        return start + dur

    def instant(name, scope, at):
        exp.append((at, name, scope, None))

    t = span("cpu.wqe_build", "n0/t0", 0.0, h.wqe_build)
    t = span("cpu.mmio", "n0/t0", t, h.mmio)                    # one 64-B store
    t = span("pcie.mmio", "n0/nic0/pcie/down", t, ser(64 + pc.tlp_overhead, pc.rate))
    t += pc.mmio_latency
    instant("nic.doorbell", "n0/nic0", t)
    instant("nic.qpc_hit", "n0/nic0/qpc", t)
    t = span("nic.requester", "n0/nic0/pu1", t, n.requester["read"])
    req = l.packet_overhead + 16
    span("link.tx", "nic0->sw0", t, ser(req, l.rate))
    t = span("link.tx", "sw0->nic1", t + l.propagation + sw.latency, ser(req, l.rate))
    t += l.propagation
    instant("nic.qpc_hit", "n1/nic0/qpc", t)
    t = span("nic.responder", "n1/nic0/pu1", t, n.responder["read"])
    instant("nic.mtt_lookup", "n1/nic0/mtt", t)               # the page is cached
    t = span("pcie.read_request", "n1/nic0/pcie/up", t, ser(pc.tlp_overhead, pc.rate))
    t = span("pcie.read_completion", "n1/nic0/pcie/down", t + pc.latency,
             ser(8 + pc.tlp_overhead, pc.rate)) + pc.latency
    resp = 8 + l.packet_overhead + 4
    span("link.tx", "nic1->sw0", t, ser(resp, l.rate))
    t = span("link.tx", "sw0->nic0", t + l.propagation + sw.latency, ser(resp, l.rate))
    t += l.propagation
    instant("nic.qpc_hit", "n0/nic0/qpc", t)
    t = span("nic.completer", "n0/nic0/pu1", t, n.completer["read"])
    t = span("pcie.dma_write", "n0/nic0/pcie/up", t, ser(8 + pc.tlp_overhead, pc.rate))
    t = span("pcie.dma_write", "n0/nic0/pcie/up", t,
             ser(n.cqe_size + pc.tlp_overhead, pc.rate)) + pc.latency
    instant("nic.cqe", "n0/nic0/cq", t)
    span("cpu.poll", "n0/t0", t + h.poll_detect, h.poll_cq + h.cqe_handle)
    exp.sort(key=lambda e: (round(e[0], 6), e[1]))

    assert [(g[1], g[2]) for g in got] == [(x[1], x[2]) for x in exp]
    for g, x in zip(got, exp):
        assert g[0] == pytest.approx(x[0], rel=1e-9), g
        assert (g[3] is None) == (x[3] is None) and (
            g[3] is None or g[3] == pytest.approx(x[3], rel=1e-9)), g


def test_a_cold_read_fetches_the_context_and_the_translation_over_pcie():
    """The first READ of a QP misses the QP-context cache on both NICs and the
    responder's translation cache: each miss is a span lasting a PCIe read, and the
    translation is ready when its entry is in."""
    p = load_profile("cx4-edr")
    events, _ = timeline(p, "read", 8, cold=True)
    names = [(name, scope) for _t, name, scope, _d in events]
    assert ("nic.qpc_miss", "n0/nic0/qpc") in names
    assert ("nic.qpc_miss", "n1/nic0/qpc") in names
    assert ("nic.mtt_miss", "n1/nic0/mtt") in names
    miss = next(d for _t, name, _s, d in events if name == "nic.qpc_miss")
    assert miss["end"] > _t_of(events, "nic.qpc_miss")
    mtt = next(d for _t, name, _s, d in events if name == "nic.mtt_miss")
    lookup = next(d for _t, name, _s, d in events if name == "nic.mtt_lookup")
    assert lookup["ready"] == mtt["end"] and lookup["pages"] == 1


def test_a_plain_doorbell_makes_the_nic_fetch_the_wqe():
    """Without BlueFlame the CPU stores an 8-B doorbell and the NIC reads the 64-B WQE:
    the fetch lasts a PCIe read round trip from the doorbell's landing, and the WQEs are
    on the NIC when it ends."""
    p = load_profile("cx4-edr").with_overrides({"nic.blueflame_size": 0})
    pc = p.pcie
    events, t0 = timeline(p, "read", 8)
    mmio = next(d for t, name, _s, d in events if name == "pcie.mmio")
    assert mmio["bytes"] == 8
    fetch = next((t, d) for t, name, _s, d in events if name == "nic.wqe_fetch")
    assert fetch[0] == pytest.approx(mmio["lands"])
    assert fetch[1]["end"] - fetch[0] == pytest.approx(
        ser(pc.tlp_overhead, pc.rate) + 2 * pc.latency + ser(64 + pc.tlp_overhead, pc.rate))
    assert _t_of(events, "nic.doorbell") == pytest.approx(fetch[1]["end"])


def _t_of(events, name):
    return next(t for t, nm, _s, _d in events if nm == name)


def test_link_events_name_the_message_they_carry():
    """Each link.tx event of a traced WRITE is labelled with its message: the request
    (3 packets of 4 KiB MTU for 9000 B) and the ACK."""
    events, _ = timeline(load_profile("cx4-edr"), "write", 9000)
    msgs = [d["msg"] for _t, name, _s, d in events if name == "link.tx"]
    assert msgs == ["WRITE request, 3 pkt, to nic1 qp1"] * 2 + ["WRITE ACK, 1 pkt, to nic0 qp1"] * 2


def test_perfetto_has_one_track_per_unit_and_spans_in_microseconds():
    """Spans become complete events (ts and dur in us), instants thread-scoped instants;
    tracks are named per node (host thread, PCIe direction, NIC unit) and the fabric
    holds the links."""
    events, _ = timeline(load_profile("cx4-edr"), "read", 8)
    doc = perfetto(events)
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    procs = {e["args"]["name"] for e in meta if e["name"] == "process_name"}
    tracks = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert procs == {"node n0", "node n1", "fabric"}
    assert {"t0", "nic0/pcie/down", "nic0/pcie/up", "nic0/pu1", "nic0/qpc", "nic0/mtt", "nic0",
            "nic0->sw0", "sw0->nic1", "nic1->sw0", "sw0->nic0", "nic0/cq"} == tracks
    build = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu.wqe_build")
    assert build["ph"] == "X" and build["dur"] == pytest.approx(0.025)
    cqe = next(e for e in doc["traceEvents"] if e.get("cat") == "nic.cqe")
    assert cqe["ph"] == "i" and cqe["args"]["op"] == "READ"
    json.dumps(doc)                          # serialisable as it is


def test_the_table_lists_stages_relative_to_the_post():
    events, t0 = timeline(load_profile("cx4-edr"), "read", 8)
    lines = table(events, t0).splitlines()
    assert lines[0].split()[:6] == ["start", "ns", "end", "ns", "dur", "ns"]
    assert lines[1].split()[:3] == ["0.0", "25.0", "25.0"]
    assert "CPU builds the WQE" in lines[1]
    assert "CPU polls the CQ and takes the CQE" in lines[-1]


_INCAST = {"version": 1, "name": "traced",
           "cluster": {"nodes": 6, "nic": {"profile": "cx4-roce-100g"}},
           "workload": {"kind": "incast", "senders": 4, "payload": "64KiB",
                        "outstanding": 4, "dcqcn": True},
           "run": {"seed": 3, "warmup": "20us", "measure": "60us"}}


def test_tracing_and_pcap_leave_results_identical(tmp_path):
    """The same RoCE incast point (PFC pauses, ECN, DCQCN) with a recorder and a pcap
    writer attached gives exactly the same metrics as without, and they did see it."""
    from rnicsim.runner import run_point
    from rnicsim.scenario import resolve

    sc = resolve(_INCAST, "<test>")
    plain = run_point(sc)
    with capture(str(tmp_path / "t.json"), str(tmp_path / "t.pcap"), 20_000.0,
                 40_000.0) as info:
        traced = run_point(sc)
    drop = ("wall_s", "setup_s", "run_s")
    assert {k: v for k, v in plain.items() if k not in drop} == \
        {k: v for k, v in traced.items() if k not in drop}
    assert info["events"] > 50 and info["packets"] > 10 and info["simulations"] == 2
    names = {e.get("cat") for e in json.loads((tmp_path / "t.json").read_text())
             ["traceEvents"]}
    assert {"link.tx", "nic.requester", "pcie.dma_write"} <= names


def test_a_recorder_keeps_only_its_window_and_its_limit():
    from rnicsim.sim import Simulation

    sim = Simulation(1)
    rec = Recorder(sim, 10.0, 20.0, limit=2)
    for t in (5.0, 10.0, 15.0, 19.0, 20.0):
        sim.trace.emit(t, "x", "s")
    assert [e[0] for e in rec.events] == [10.0, 15.0]
    assert rec.dropped == 1


def test_trace_window_parsing():
    assert parse_window("30us:50us", 0.0) == (30_000.0, 50_000.0)
    assert parse_window(None, 5_000.0) == (5_000.0, 25_000.0)


@pytest.mark.parametrize("argv,msg", [
    (["trace", "--verb", "cas", "--payload", "64"],
     "rnicsim trace: error: command line: --payload: 8 B for cas (atomics work on 8 "
     "bytes), got 64\n"),
    (["trace", "--payload", "lots"],
     "rnicsim trace: error: command line: --payload: a size in bytes such as 64 or 4KiB, "
     "got 'lots'\n"),
])
def test_trace_refuses_bad_arguments(argv, msg, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == msg


def test_run_refuses_a_backwards_trace_window(tmp_path, capsys):
    assert main(["run", "scenarios/roce/fig1_latency.yaml", "--out", str(tmp_path / "o"),
                 "--trace", str(tmp_path / "t.json"), "--trace-window", "5us:3us"]) == 2
    assert capsys.readouterr().err == ("rnicsim run: error: command line: --trace-window: a "
                                       "START before END, both >= 0, got '5us:3us'\n")


def test_trace_command_writes_a_perfetto_file(tmp_path, capsys):
    out = tmp_path / "read.json"
    assert main(["trace", "--nic", "cx4-edr", "--verb", "read", "--payload", "8",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("READ of 8 B, cx4-edr, node n0 -> n1, warm caches")
    doc = json.loads(out.read_text())
    assert any(e.get("cat") == "cpu.poll" for e in doc["traceEvents"])


def test_progress_reports_simulated_time_without_changing_results():
    """While a simulation runs, the watcher prints its simulated time against the target
    from another thread; the results are those of a run without it."""
    import io

    from rnicsim.runner import run_point
    from rnicsim.scenario import resolve
    from rnicsim.trace import sim_progress, watch_progress

    sc = resolve(_INCAST, "<test>")
    plain = run_point(sc)
    out = io.StringIO()
    ends = set()

    def describe(now, end):
        ends.add(end)
        return "p: " + sim_progress(now, 80_000.0)

    with watch_progress(describe, 0.001, out):
        watched = run_point(sc)
    # the end of the window the running point set with Simulation.measure
    assert ends == {sc.run.warmup + sc.run.measure}, ends
    drop = ("wall_s", "setup_s", "run_s")
    assert {k: v for k, v in plain.items() if k not in drop} == \
        {k: v for k, v in watched.items() if k not in drop}
    lines = out.getvalue().splitlines()
    assert lines and all(re.fullmatch(r"p: simulated [\d.]+[num]?s of 80us \(\d+%\) \(\d+s\)",
                                      line) for line in lines), lines[:3]


def test_sim_progress_line():
    from rnicsim.trace import sim_progress

    assert sim_progress(35_200.0, 80_000.0) == "simulated 35.2us of 80us (44%)"
    assert sim_progress(1_500.0, None) == "simulated 1.5us"
    assert sim_progress(80_000.0, 80_000.0) == "simulated 80us of 80us (100%)"
    assert sim_progress(3_650_000.0, 120_000.0) == "simulated 3.65ms, past the planned 120us"


def test_run_quiet_prints_no_progress(tmp_path, capsys):
    """--quiet: nothing on stderr, whatever the run's length."""
    assert main(["run", "tests/data/tiny_sweep.yaml", "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_run_writes_a_trace_and_a_pcap_of_one_point(tmp_path, capsys):
    """run --trace/--pcap over one point of a sweep (chosen with --set): a Perfetto file
    with the point's WRITEs on the links, a pcap with as many packets as the line says."""
    t, p = tmp_path / "t.json", tmp_path / "t.pcap"
    assert main(["run", "tests/data/tiny_sweep.yaml", "--out", str(tmp_path / "o"),
                 "--quiet", "--set", "workload.verb=write", "--set", "workload.payload=8",
                 "--trace", str(t), "--pcap", str(p), "--trace-window", "5us:10us"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    m = re.fullmatch(rf"traced 5us\.\.10us: {t} \((\d+) events; ui\.perfetto\.dev\), "
                     rf"{p} \((\d+) packets; Wireshark\)", line)
    assert m, line
    events = json.loads(t.read_text())["traceEvents"]
    assert len([e for e in events if e["ph"] != "M"]) == int(m.group(1))
    assert any(e.get("cat") == "link.tx" and e["args"]["msg"].startswith("WRITE request")
               for e in events)
    assert all(5.0 <= e["ts"] < 10.0 for e in events if e["ph"] != "M")
    assert p.stat().st_size > 24 and int(m.group(2)) > 0
