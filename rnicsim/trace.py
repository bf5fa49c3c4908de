"""See a run: record trace events, print one verb's timeline, write Perfetto traces.

Contract:
- :class:`Recorder` subscribes to a :class:`~rnicsim.sim.Simulation`'s trace hub and
  keeps the events that start inside a window of simulated time [ns], at most ``limit``
  of them (the rest are counted in ``dropped``). Recording only observes: results are
  identical with and without it (``tests/unit/test_trace.py``).
- :func:`timeline` runs one uncontended verb between two hosts of a NIC profile and
  returns its events; :func:`table` prints them as rows of start, end and duration [ns];
  :func:`perfetto` turns events into a Chrome / Perfetto trace-event JSON object (one
  process per node plus one for the fabric, one track per host thread, PCIe direction,
  NIC unit and link direction), which ui.perfetto.dev opens.
- :func:`watch_progress` prints, every few wall seconds while a long simulation runs in
  this process, how far its simulated time has come (on stderr); it reads the clock
  from another thread and schedules nothing, so results do not depend on it.
- :func:`capture` attaches a recorder (``--trace``) and a packet writer (``--pcap``,
  :mod:`rnicsim.pcap`) to the last simulation a scenario run creates in this process:
  a single point's (pick it from a sweep with ``--set``), and of a workload that
  simulates twice (``incast``: the victim alone, then with the incast), the second.

Trace sources are declared by the components that emit them (``TRACES`` of
:class:`~rnicsim.hw.rnic.Rnic`, :class:`~rnicsim.hw.pcie.Pcie`,
:class:`~rnicsim.hw.link.LinkDir`; the host's in :mod:`rnicsim.verbs` and
:mod:`rnicsim.hw.cq`). An event with ``data["end"]`` lasts from its time to that end.
"""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import ArgumentParser, InputError

# What each event stands for in a timeline (the stages of a verb, in the order they come).
STAGES = {
    "cpu.wqe_build": "CPU builds the WQE",
    "cpu.mmio": "CPU rings the doorbell (MMIO stores)",
    "pcie.mmio": "doorbell / BlueFlame WQE crosses PCIe",
    "nic.wqe_fetch": "NIC fetches the WQEs (DMA read)",
    "nic.doorbell": "WQEs on the NIC",
    "pcie.read_request": "DMA read request (PCIe up)",
    "pcie.read_completion": "DMA read data (PCIe down)",
    "nic.qpc_hit": "QP context cached",
    "nic.qpc_miss": "QP context fetched",
    "nic.mtt_lookup": "address translation",
    "nic.mtt_miss": "translation fetched",
    "nic.requester": "requester PU processes the WQE",
    "nic.tx": "message to the wire",
    "link.tx": "packets on the link",
    "pfc.pause": "PFC pause",
    "nic.responder": "responder PU serves the request",
    "nic.atomic": "atomic unit",
    "nic.completer": "completer PU serves the response",
    "pcie.dma_write": "DMA write (PCIe up)",
    "nic.cqe": "CQE visible in host memory",
    "cpu.poll": "CPU polls the CQ and takes the CQE",
}

VERBS = ("read", "write", "send", "cas", "faa")
_KINDS = ("request", "response", "ACK", "NAK", "CNP")


class Recorder:
    """Events of ``sim`` starting in ``[start, end)`` [ns], at most ``limit`` of them.

    ``events``: list of ``(time [ns], name, scope, data)`` in emission order;
    ``dropped``: events in the window beyond the limit. ``start``/``end`` may be moved
    while the simulation runs (:func:`timeline` opens the window when it posts).
    A message's ``link.tx`` events (emitted as it is booked along its path) are labelled
    with the message (``msg``) from the ``nic.tx`` event that follows them; ``nic.tx``
    itself is not kept (the links show when its packets go)."""

    def __init__(self, sim, start: float = 0.0, end: float = float("inf"),
                 limit: int = 200_000) -> None:
        self.start, self.end, self.limit = start, end, limit
        self.events: list[tuple[float, str, str, dict]] = []
        self.dropped = 0
        self._hops: list[dict] = []
        sim.trace.subscribe(self._on)

    def _on(self, t: float, name: str, scope: str, data: dict) -> None:
        if name == "nic.tx":
            msg = _detail(name, data)
            for d in self._hops:
                d["msg"] = msg
            self._hops = []
            return
        if not self.start <= t < self.end:
            return
        if name == "link.tx":
            data = dict(data)
            self._hops.append(data)
        if len(self.events) >= self.limit:
            self.dropped += 1
            return
        self.events.append((t, name, scope, data))


def _detail(name: str, d: dict, t0: float = 0.0) -> str:
    from .hw.wqe import OPCODE_NAMES

    parts = [d["msg"]] if "msg" in d else []
    if "op" in d and d["op"] is not None and 0 <= d["op"] < len(OPCODE_NAMES):
        parts.append(OPCODE_NAMES[d["op"]])
    if name == "nic.tx":
        parts = [f"{OPCODE_NAMES[d['op']] if d['op'] >= 0 else ''} {_KINDS[d['kind']]}"
                 .strip(), f"{d['npkts']} pkt", f"to nic{d['dst']} qp{d['dst_qpn']}"]
    elif name in ("nic.responder", "nic.completer"):
        parts.append(_KINDS[d["kind"]])
    for k in ("qpn", "bytes", "wqes", "pages", "cqes", "wait", "lands", "ready", "prio"):
        if k in d and d[k] is not None:
            v = d[k]
            if k in ("wait", "lands", "ready"):
                if k == "wait" and v <= 0:
                    continue
                parts.append(f"{k} {v if k == 'wait' else v - t0:.1f} ns")
            else:
                parts.append(f"{k} {v}")
    return ", ".join(parts)


def table(events: list[tuple[float, str, str, dict]], origin: float | None = None) -> str:
    """The events as a table sorted by start: start, end, duration [ns] relative to
    ``origin`` (default the first event), the track (scope), the stage and details."""
    if not events:
        return "(no events)"
    rows = sorted(events, key=lambda e: (e[0], e[3].get("end", e[0])))
    t0 = rows[0][0] if origin is None else origin
    out = [f"{'start ns':>10} {'end ns':>10} {'dur ns':>8}  {'track':<18} {'stage':<36} "
           f"details"]
    for t, name, scope, d in rows:
        end = d.get("end")
        e = f"{end - t0:10.1f}" if end is not None else " " * 10
        dur = f"{end - t:8.1f}" if end is not None else " " * 8
        out.append(f"{t - t0:10.1f} {e} {dur}  {scope:<18} {STAGES.get(name, name):<36} "
                   f"{_detail(name, d, t0)}".rstrip())
    return "\n".join(out)


def _track(scope: str) -> tuple[str, str]:
    """(process, track) of a scope: ``n3/nic0/pu1`` -> (``node n3``, ``nic0/pu1``);
    a link direction such as ``sw0->nic1`` -> (``fabric``, itself)."""
    m = re.match(r"(n\d+)/(.+)$", scope)
    if m:
        return f"node {m.group(1)}", m.group(2)
    return "fabric", scope


def perfetto(events: list[tuple[float, str, str, dict]]) -> dict[str, Any]:
    """A Chrome / Perfetto trace-event JSON object (``{"traceEvents": [...]}``): spans as
    complete events (``ph: X``), the rest as instants; times in microseconds as the
    format wants, so 1 ns is 0.001."""
    from .hw.wqe import OPCODE_NAMES

    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    out: list[dict[str, Any]] = []
    for t, name, scope, d in sorted(events, key=lambda e: e[0]):
        proc, track = _track(scope)
        if proc not in pids:
            pids[proc] = len(pids) + 1
            out.append({"ph": "M", "name": "process_name", "pid": pids[proc], "tid": 0,
                        "args": {"name": proc}})
        if (proc, track) not in tids:
            tids[proc, track] = len(tids) + 1
            out.append({"ph": "M", "name": "thread_name", "pid": pids[proc],
                        "tid": tids[proc, track], "args": {"name": track}})
        args = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v))
                for k, v in d.items() if k != "end"}
        if isinstance(d.get("op"), int) and 0 <= d["op"] < len(OPCODE_NAMES):
            args["op"] = OPCODE_NAMES[d["op"]]
        label = STAGES.get(name, name)
        ev = {"name": label, "cat": name, "pid": pids[proc], "tid": tids[proc, track],
              "ts": t / 1000.0, "args": args}
        if "end" in d:
            ev["ph"] = "X"
            ev["dur"] = (d["end"] - t) / 1000.0
        else:
            ev["ph"] = "i"
            ev["s"] = "t"
        out.append(ev)
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"source": "rnicsim", "time": "simulated"}}


def write_perfetto(path: str | Path, events) -> None:
    """Write :func:`perfetto` of ``events`` to ``path`` (InputError when it cannot)."""
    try:
        Path(path).write_text(json.dumps(perfetto(events), separators=(",", ":")) + "\n")
    except OSError as e:
        raise InputError("command line", "--out/--trace",
                         f"a file that can be written ({path}: {e.strerror})") from None


def timeline(profile, verb: str, payload: int, cold: bool = False, seed: int = 1,
             pcap: str | None = None) -> tuple[list, float]:
    """(events, post time [ns]) of one ``verb`` (read, write, send, cas, faa) of
    ``payload`` [B] from node 0 to node 1 of a two-node cluster of ``profile``, posted
    on an idle cluster: after a first one that warms the NIC caches (QP context,
    translation), unless ``cold``. With ``pcap``, its packets go there too."""
    from .cluster import Cluster
    from .sim import Simulation
    from .verbs import CAS, FAA, READ, RECV, SEND, WRITE, Context, WorkRequest

    op = {"read": READ, "write": WRITE, "send": SEND, "cas": CAS, "faa": FAA}[verb]
    sim = Simulation(seed)
    rec = Recorder(sim, float("inf"))
    writer = None
    if pcap is not None:
        from .pcap import PcapWriter

        writer = PcapWriter(sim, pcap, profile.link.kind, float("inf"))
    cl = Cluster(sim, profile, 2, 1)
    ctx = [Context(cl, i, 0, cl.nodes[i].thread(0)) for i in range(2)]
    cq = [c.create_cq() for c in ctx]
    a, b = ctx[0].create_qp("RC", cq[0]), ctx[1].create_qp("RC", cq[1])
    a.connect(b)
    mr = ctx[1].reg_mr(1 << 20)
    rounds = 1 if cold else 2
    if op == SEND:
        buf = ctx[1].reg_mr(max(payload, 1))
        b.post_recv([WorkRequest(RECV, max(payload, 1), k, local=buf, local_offset=0)
                     for k in range(rounds)], event=False)
    posted = []

    def proc():
        yield sim.timeout(10_000)           # the RECV descriptors are on the NIC
        for k in range(rounds):
            if k == rounds - 1:
                rec.start = sim.now         # the traced verb starts here
                if writer is not None:
                    writer.start = sim.now
                posted.append(sim.now)
            yield a.post_send([WorkRequest(op, payload, k, True, False, None, 0, mr.rkey, 0)])
            yield cq[0].wait()
            yield sim.timeout(10_000)       # let every pipe drain: the next is unloaded
        rec.end = sim.now
    sim.process(proc())
    sim.run()
    if writer is not None:
        writer.close()
    return rec.events, posted[0]


@contextmanager
def capture(trace: str | None, pcap: str | None, start: float, end: float,
            limit: int = 200_000) -> Iterator[dict[str, Any]]:
    """Attach a :class:`Recorder` (``trace``: a Perfetto JSON file) and a
    :class:`~rnicsim.pcap.PcapWriter` (``pcap``) to each Simulation created inside the
    context, keeping what starts in ``[start, end)`` [ns]; when the context exits, the
    files are written from the last one. Yields a dict that then holds ``events``,
    ``dropped`` and ``packets`` counts and ``simulations`` (how many were created)."""
    from .sim import observe_simulations

    for path, flag in ((trace, "--trace"), (pcap, "--pcap")):
        if path:
            try:       # refuse an unwritable file before anything runs
                Path(path).write_bytes(b"")
            except OSError as e:
                raise InputError("command line", flag,
                                 f"a file that can be written ({path}: {e.strerror})"
                                 ) from None
    got: dict[str, Any] = {"simulations": 0}

    def attach(sim) -> None:
        got["simulations"] += 1
        got.pop("rec", None)         # an earlier simulation's events are not kept
        got.pop("pcap", None)
        if trace:
            got["rec"] = Recorder(sim, start, end, limit)
        if pcap:
            from .pcap import PcapWriter

            got["pcap"] = PcapWriter(sim, pcap, None, start, end)

    info: dict[str, Any] = {}
    with observe_simulations(attach):
        yield info
    if "rec" in got:
        write_perfetto(trace, got["rec"].events)
        info["events"] = len(got["rec"].events)
        info["dropped"] = got["rec"].dropped
    if "pcap" in got:
        got["pcap"].close()
        info["packets"] = got["pcap"].written
        info["dropped_packets"] = got["pcap"].dropped
    info["simulations"] = got["simulations"]


@contextmanager
def watch_progress(describe: Callable[[float, float], str], interval_s: float = 5.0,
                   stream=None) -> Iterator[None]:
    """Within this context, every ``interval_s`` wall seconds, print
    ``describe(now, end)`` (``now``: simulated time [ns] of the latest Simulation created
    in the context; ``end``: the end of its measured window [ns] once
    ``Simulation.measure`` set one, which a workload may have stretched past the
    scenario's, else 0) on ``stream`` (default stderr); nothing before the first interval
    has passed, nothing while no simulation exists, nothing when ``describe`` returns "".
    The watcher runs in a daemon thread that only reads the clock."""
    from .sim import observe_simulations

    latest: list = [None]
    stop = threading.Event()

    def watch() -> None:
        t0 = time.perf_counter()
        while not stop.wait(interval_s):
            sim = latest[0]
            if sim is None:
                continue
            line = describe(sim.now, sim.window[1])
            if line:
                print(f"{line} ({time.perf_counter() - t0:.0f}s)",
                      file=stream or sys.stderr, flush=True)

    def seen(sim) -> None:
        latest[0] = sim

    with observe_simulations(seen):
        th = threading.Thread(target=watch, name="rnicsim-progress", daemon=True)
        th.start()
        try:
            yield
        finally:
            stop.set()
            th.join()


def sim_progress(now: float, target: float | None) -> str:
    """``simulated 35.2us of 80us (44%)`` (``target`` [ns]; None: no target); past the
    target, ``simulated 3.6ms, past the planned 120us`` (a run that decides its own end,
    such as a transaction point counting commits, is not near done at 3000%)."""
    from .units import fmt_time

    if not target:
        return f"simulated {fmt_time(now)}"
    if now > target:
        return f"simulated {fmt_time(now)}, past the planned {fmt_time(target)}"
    return f"simulated {fmt_time(now)} of {fmt_time(target)} ({now / target:.0%})"


def parse_window(text: str | None, warmup: float) -> tuple[float, float]:
    """``START:END`` in simulated time (unit strings such as ``1ms:1.02ms``, or ns) ->
    (start, end) [ns]; None -> 20 us from the start of the measured window
    (``warmup`` [ns]). InputError naming ``--trace-window`` otherwise."""
    from .units import parse_time_ns

    if text is None:
        return warmup, warmup + 20_000.0
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError("one colon")
        s, e = (parse_time_ns(p.strip()) for p in parts)
    except ValueError:
        raise InputError("command line", "--trace-window",
                         f"START:END in simulated time such as 30us:50us, got {text!r}"
                         ) from None
    if not 0 <= s < e:
        raise InputError("command line", "--trace-window",
                         f"a START before END, both >= 0, got {text!r}")
    return s, e


def cmd_trace(argv: list[str]) -> int:
    """``rnicsim trace``: one verb's timeline (see module doc)."""
    from .profile import load_profile

    ap = ArgumentParser(
        prog="rnicsim trace",
        description="Timeline of one verb between two idle hosts, through every stage "
                    "the model has, printed as a table [ns] and written as a Perfetto / "
                    "Chrome trace (open it in ui.perfetto.dev).")
    ap.add_argument("--nic", default="cx4-edr", metavar="PROFILE",
                    help="NIC profile name or YAML file (default cx4-edr)")
    ap.add_argument("--verb", choices=VERBS, default="read")
    ap.add_argument("--payload", default="8", metavar="SIZE",
                    help="payload, e.g. 8, 4KiB (default 8 B; atomics: 8)")
    ap.add_argument("--out", metavar="FILE.json", help="write the Perfetto trace here")
    ap.add_argument("--pcap", metavar="FILE.pcap", help="write the verb's packets here")
    ap.add_argument("--cold", action="store_true",
                    help="trace the first verb (QP context and translation not cached)")
    a = ap.parse_args(argv)
    from .units import parse_bytes

    try:
        payload = int(parse_bytes(a.payload))
    except ValueError:
        raise InputError("command line", "--payload",
                         f"a size in bytes such as 64 or 4KiB, got {a.payload!r}") from None
    if a.verb in ("cas", "faa") and payload != 8:
        raise InputError("command line", "--payload",
                         f"8 B for {a.verb} (atomics work on 8 bytes), got {payload}")
    prof = load_profile(a.nic)
    events, t0 = timeline(prof, a.verb, payload, a.cold, pcap=a.pcap)
    print(f"{a.verb.upper()} of {payload} B, {prof.name}, node n0 -> n1, "
          f"{'cold' if a.cold else 'warm'} caches; times from the post [ns]")
    print(table(events, t0))
    if a.out:
        write_perfetto(a.out, events)
        print(f"wrote {a.out} (open it in https://ui.perfetto.dev)")
    if a.pcap:
        print(f"wrote {a.pcap} (open it in Wireshark)")
    return 0
