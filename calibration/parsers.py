"""Parsers for calibration inputs (Python standard library only).

Two sources of measurements feed the NIC-profile fitting:

- perftest text output (``ib_{read,write,send,atomic}_{lat,bw}``), as people paste it:
  several perftest versions, tab- or space-aligned columns, shell prompts and wrapped
  command lines, warnings such as ``Conflicting CPU frequency values detected`` in the
  middle of the table, several runs in one file. :func:`parse_perftest`.
- the JSON lines of ``rnicsim-probe`` (``calibration/probe/SCHEMA.md``).
  :func:`parse_probe_jsonl`.

Both map into one normalised record, :class:`Measurement` (one metric of one
configuration), through :func:`load_measurements`, so that the fitting step consumes
either without caring where the numbers came from.

Units after parsing: latency in microseconds, bandwidth in Gb/s (10^9 bit/s), message
rates in Mops (10^6 messages/s). perftest's ``MB/sec`` (and newer ``MiB/sec``) means
2^20 bytes per second: ``BW average[MB/sec] * 2**20 == MsgRate[Mpps] * 1e6 * #bytes``
in every reference file (e.g. 2 B at 5.467546 Mpps is printed as 10.43 MB/sec).
perftest prints ``BW peak`` as 0.00 when it did not measure it; that becomes ``None``.

Latency conventions: ``ib_send_lat`` and ``ib_write_lat`` report half a ping-pong round
trip, ``ib_read_lat`` and ``ib_atomic_lat`` the full round trip (``t_typical`` is the
median); the probe always reports full round trips. Each latency :class:`Measurement`
says which in ``latency_convention`` (``"half_rtt"`` or ``"rtt"``).

Malformed input raises :class:`rnicsim.errors.InputError` whose ``source`` is
``file:line`` and whose ``key`` names the field (``Mtu``, ``t_typical``,
``lat_us.median`` ...).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from rnicsim.errors import InputError

__all__ = [
    "LatRow",
    "BwRow",
    "PerftestRun",
    "ProbeRun",
    "Measurement",
    "parse_perftest",
    "parse_perftest_runs",
    "parse_probe_jsonl",
    "perftest_measurements",
    "probe_measurements",
    "load_measurements",
    "PERFTEST_TOOLS",
    "MB",
]

#: perftest's "MB" (and "MiB"): 2^20 bytes.
MB = 1 << 20

PERFTEST_TOOLS = tuple(
    f"ib_{verb}_{kind}" for verb in ("read", "write", "send", "atomic") for kind in ("lat", "bw")
)

# ---------------------------------------------------------------------------------------
# perftest
# ---------------------------------------------------------------------------------------

# "RDMA_Read Latency Test", "Send BW Test", "Atomic FETCH_AND_ADD BW Test",
# "RDMA_Write Bidirectional BW Test" (older perftest with -b)
_TITLE = re.compile(
    r"^\s*(?P<op>RDMA_Read|RDMA_Write|Send|Atomic\s+(?P<atomic>FETCH_AND_ADD|CMP_AND_SWAP))"
    r"\s+(?P<bidir>Bidirectional\s+)?(?P<kind>Latency|BW)\s+Test\s*$"
)
_TOOL = re.compile(r"\b(ib_(?:read|write|send|atomic)_(?:lat|bw))\b")
_TABLE = re.compile(r"^\s*#bytes\s+#iterations\s+(?P<cols>.*\S)\s*$")
# a result row: #bytes #iterations, then the columns. Any line that starts so is parsed as
# a row, so a malformed number in it is an error naming the line, not a skipped line.
_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S")
_SEPARATOR = re.compile(r"^\s*-{10,}\s*$")
_HEADER_SKIP = re.compile(r"^\s*(?:local address|remote address|GID)\s*:", re.I)
# "Key words : value", several per line, separated by tabs or runs of spaces
_KEY = r"[A-Za-z][A-Za-z0-9_*.()/\-]*(?: [A-Za-z0-9_*.()/\-]+)*"
_PAIR = re.compile(
    rf"(?P<key>{_KEY})\s*:(?:\s+|$)(?P<val>.*?)(?=\s+{_KEY}\s*:(?:\s|$)|\t|$)"
)

_VERB_OF_TITLE = {"RDMA_Read": "READ", "RDMA_Write": "WRITE", "Send": "SEND"}
_TOOL_VERB = {"READ": "read", "WRITE": "write", "SEND": "send", "CAS": "atomic", "FAA": "atomic"}

# latency table columns, in perftest's order; the later ones are missing in old versions
_LAT_COLUMNS = [
    ("t_min", r"t_min"),
    ("t_max", r"t_max"),
    ("t_typical", r"t_typical"),
    ("t_avg", r"t_avg"),
    ("t_stdev", r"t_stdev"),
    ("p99", r"99%\s*percentile"),
    ("p999", r"99\.9%\s*percentile"),
]


@dataclass(frozen=True)
class LatRow:
    """One row of a latency table; times in microseconds (None: column absent)."""

    bytes: int
    iterations: int
    t_min: float
    t_max: float
    t_typical: float
    t_avg: float | None
    t_stdev: float | None
    p99: float | None
    p999: float | None
    line: int


@dataclass(frozen=True)
class BwRow:
    """One row of a bandwidth table, converted to Gb/s; ``bw_peak_gbps`` is None when
    perftest printed 0.00 (peak not measured); ``msg_rate_mpps`` None when absent."""

    bytes: int
    iterations: int
    bw_peak_gbps: float | None
    bw_avg_gbps: float
    msg_rate_mpps: float | None
    line: int


@dataclass
class PerftestRun:
    """One perftest run (title, header, table)."""

    source: str
    tool: str  # "ib_read_lat", derived from the title
    kind: str  # "lat" | "bw"
    verb: str  # READ WRITE SEND CAS FAA
    title: str
    line: int  # line of the title
    command: str | None = None  # the command line shown before the run, if any
    command_tool: str | None = None  # the tool named by that command line
    header: dict[str, str] = field(default_factory=dict)  # raw "Key : value" pairs
    device: str | None = None
    mtu: int | None = None  # bytes
    link_type: str | None = None  # "IB" | "Ethernet"
    transport_type: str | None = None  # perftest's "Transport type" (IB for RoCE too)
    connection_type: str = "RC"  # RC UC UD XRC DC
    qps: int = 1
    tx_depth: int | None = None
    outstanding_reads: int | None = None
    cq_moderation: int | None = None
    inline_size: int | None = None  # "Max inline data" bytes
    rdma_cm: bool | None = None
    bidirectional: bool = False
    bw_unit: str | None = None  # as printed: "MB/sec", "MiB/sec", "Gb/sec"
    rows: list[Any] = field(default_factory=list)  # LatRow or BwRow
    notes: list[str] = field(default_factory=list)

    @property
    def latency_convention(self) -> str | None:
        """``half_rtt`` for ib_send_lat/ib_write_lat, ``rtt`` for read/atomic, None for bw."""
        if self.kind != "lat":
            return None
        return "half_rtt" if self.verb in ("SEND", "WRITE") else "rtt"

    def row(self, nbytes: int) -> Any:
        """The row for a message size (KeyError if absent)."""
        for r in self.rows:
            if r.bytes == nbytes:
                return r
        raise KeyError(nbytes)


def _err(source: str, line: int | None, key: str, expected: str) -> InputError:
    where = f"{source}:{line}" if line else source
    return InputError(where, key, expected)


def _find_title(lines: list[str]) -> list[int]:
    return [i for i, ln in enumerate(lines) if _TITLE.match(ln)]


def _command_before(lines: list[str], start: int, end: int) -> tuple[str | None, str | None]:
    """The last command line naming a perftest tool in lines[start:end] (comments skipped).
    A command wrapped over two lines is joined."""
    found = None
    for i in range(start, end):
        ln = lines[i]
        if ln.lstrip().startswith("#"):
            continue
        m = _TOOL.search(ln)
        if m:
            found = (i, m)
    if not found:
        return None, None
    i, m = found
    text = lines[i][m.start():]
    # A command wrapped by the terminal continues on the next line, split anywhere (even
    # inside a word: "ib_send_bw -" / "a --iter ..."), so join without adding a space.
    if i + 1 < end:
        nxt = lines[i + 1]
        if (nxt.strip() and not _SEPARATOR.match(nxt) and not _TITLE.match(nxt)
                and not _TABLE.match(nxt) and ":" not in nxt):
            text += nxt
    return m.group(1), re.sub(r"\s+", " ", text).strip()


def _header_pairs(line: str) -> list[tuple[str, str]]:
    if _HEADER_SKIP.match(line):
        return []
    return [(m.group("key").strip(), m.group("val").strip())
            for m in _PAIR.finditer(line.strip())]


def _int_field(source: str, line: int, key: str, raw: str, expected: str,
               minimum: int = 0) -> int:
    m = re.match(r"\s*(\d+)", raw)
    if not m or int(m.group(1)) < minimum:
        raise _err(source, line, key, f"{expected}, got {raw!r}")
    return int(m.group(1))


#: The path MTUs InfiniBand (and RoCE, which uses the same enum) can have, bytes.
IB_MTUS = (256, 512, 1024, 2048, 4096)
#: The largest message an InfiniBand/RoCE operation can carry (IBA: 2^31 bytes).
MAX_MESSAGE = 1 << 31


def _onoff(raw: str) -> bool | None:
    v = raw.split()[0].upper() if raw.split() else ""
    return True if v == "ON" else False if v == "OFF" else None


def _apply_header(run: PerftestRun, key: str, raw: str, line: int) -> None:
    src = run.source
    k = re.sub(r"\s+", " ", key).strip().lower()
    first = raw.split()[0] if raw.split() else ""
    if k == "device":
        if not first:
            raise _err(src, line, key, "a device name such as mlx4_0")
        run.device = first
    elif k == "number of qps":
        run.qps = _int_field(src, line, key, raw, "a number of QPs >= 1", minimum=1)
    elif k == "transport type":
        run.transport_type = first or None
    elif k == "connection type":
        if first.upper() not in ("RC", "UC", "UD", "XRC", "DC", "SRD"):
            raise _err(src, line, key, f"a connection type such as RC or UD, got {raw!r}")
        run.connection_type = first.upper()
    elif k == "tx depth":
        run.tx_depth = _int_field(src, line, key, raw, "a TX depth")
    elif k == "cq moderation":
        run.cq_moderation = _int_field(src, line, key, raw, "a CQ moderation count")
    elif k == "mtu":
        if not re.match(r"\s*\d+\s*(\[B\])?\s*$", raw):
            raise _err(src, line, key, f"an MTU in bytes such as 4096[B], got {raw!r}")
        run.mtu = _int_field(src, line, key, raw, "an MTU in bytes such as 4096[B]")
        if run.mtu not in IB_MTUS:
            raise _err(src, line, key, f"an MTU of {', '.join(map(str, IB_MTUS))} bytes, "
                       f"got {raw!r}")
    elif k == "link type":
        v = first.lower()
        if v in ("ib", "infiniband"):
            run.link_type = "IB"
        elif v in ("ethernet", "eth", "roce"):
            run.link_type = "Ethernet"
        else:
            raise _err(src, line, key, f"IB or Ethernet, got {raw!r}")
    elif k == "outstand reads":
        run.outstanding_reads = _int_field(src, line, key, raw, "a number of outstanding reads")
    elif k == "max inline data":
        run.inline_size = _int_field(src, line, key, raw, "an inline size such as 220[B]")
    elif k == "rdma_cm qps":
        run.rdma_cm = _onoff(raw)


def _parse_float(source: str, line: int, key: str, tok: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise _err(source, line, key, f"a number, got {tok!r}") from None
    if not math.isfinite(v) or v < 0:
        raise _err(source, line, key, f"a finite non-negative number, got {tok!r}")
    return v


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _lat_columns(source: str, line: int, cols: str) -> list[str]:
    names = []
    pos = 0
    for name, pat in _LAT_COLUMNS:
        m = re.compile(pat).search(cols, pos)
        if m:
            names.append(name)
            pos = m.end()
    if names[:3] != ["t_min", "t_max", "t_typical"]:
        raise _err(source, line, "#bytes", "a latency table with t_min, t_max and t_typical "
                   f"columns, got {cols!r}")
    return names


def _bw_columns(source: str, line: int, cols: str) -> tuple[str, bool]:
    m = re.search(r"BW peak\s*\[\s*(MB|MiB|Gb)/sec\s*\]", cols)
    a = re.search(r"BW average\s*\[\s*(MB|MiB|Gb)/sec\s*\]", cols)
    if not m or not a or m.group(1) != a.group(1):
        raise _err(source, line, "#bytes", "a bandwidth table with 'BW peak[MB/sec]' and "
                   f"'BW average[MB/sec]' (or Gb/sec) columns, got {cols!r}")
    return m.group(1) + "/sec", "MsgRate" in cols


def _to_gbps(value: float, unit: str) -> float:
    if unit == "Gb/sec":
        return value
    return value * MB * 8 / 1e9  # MB/sec and MiB/sec are both 2^20 bytes/s


def _parse_run(lines: list[str], source: str, t: int, end: int, prev_end: int) -> PerftestRun:
    m = _TITLE.match(lines[t])
    assert m
    kind = "lat" if m.group("kind") == "Latency" else "bw"
    if m.group("atomic"):
        verb = "FAA" if m.group("atomic") == "FETCH_AND_ADD" else "CAS"
    else:
        verb = _VERB_OF_TITLE[m.group("op")]
    tool = f"ib_{_TOOL_VERB[verb]}_{kind}"
    run = PerftestRun(source=source, tool=tool, kind=kind, verb=verb,
                      title=re.sub(r"\s+", " ", lines[t].strip()), line=t + 1,
                      bidirectional=bool(m.group("bidir")))
    cmd_tool, cmd = _command_before(lines, prev_end, t)
    run.command, run.command_tool = cmd, cmd_tool
    if cmd_tool and cmd_tool != tool:
        run.notes.append(f"the command line names {cmd_tool} but the output is a {run.title}; "
                         f"the title wins")

    # header: from the title to the table header
    table_at = None
    for i in range(t + 1, end):
        if _TABLE.match(lines[i]):
            table_at = i
            break
        for key, val in _header_pairs(lines[i]):
            # perftest prints each key once per run; a second, different value (two
            # pasted headers) would silently win in the run's settings
            if key in run.header and run.header[key] != val:
                raise _err(source, i + 1, key, f"one value per run; it was {run.header[key]!r} "
                           f"before, here {val!r}")
            run.header.setdefault(key, val)
            _apply_header(run, key, val, i + 1)
    if table_at is None:
        raise _err(source, t + 1, "#bytes",
                   f"a '#bytes #iterations ...' table after the {run.title!r} title")
    cols = _TABLE.match(lines[table_at]).group("cols")  # type: ignore[union-attr]
    is_lat_table = "t_min" in cols
    if is_lat_table != (kind == "lat"):
        raise _err(source, table_at + 1, "#bytes",
                   f"a {'latency' if kind == 'lat' else 'bandwidth'} table for {run.title!r}")
    if kind == "lat":
        names = _lat_columns(source, table_at + 1, cols)
        has_rate = False
    else:
        run.bw_unit, has_rate = _bw_columns(source, table_at + 1, cols)
        names = ["bw_peak", "bw_avg"] + (["msg_rate"] if has_rate else [])

    for i in range(table_at + 1, end):
        ln = lines[i]
        if not _ROW.match(ln):
            # separators, warnings, prompts, blank lines; but a line of a row's width whose
            # values are numbers is a row with a garbled #bytes or #iterations, not noise
            toks = ln.split()
            if len(toks) == 2 + len(names) and sum(map(_is_number, toks[2:])) == len(names):
                key = "#bytes" if not toks[0].isdigit() else "#iterations"
                bad = toks[0] if key == "#bytes" else toks[1]
                raise _err(source, i + 1, key, f"a whole number, got {bad!r}")
            continue
        toks = ln.split()
        if len(toks) != 2 + len(names):
            raise _err(source, i + 1, "row",
                       f"{2 + len(names)} numbers (#bytes #iterations {' '.join(names)}), "
                       f"got {len(toks)}")
        nbytes, iters = int(toks[0]), int(toks[1])
        if nbytes <= 0 or iters <= 0:
            raise _err(source, i + 1, "#bytes", "positive #bytes and #iterations")
        if nbytes > MAX_MESSAGE:
            raise _err(source, i + 1, "#bytes", f"a message size of at most 2^31 bytes "
                       f"(the largest RDMA message), got {nbytes}")
        vals = {n: _parse_float(source, i + 1, n, tok) for n, tok in zip(names, toks[2:])}
        if kind == "lat":
            run.rows.append(LatRow(
                bytes=nbytes, iterations=iters, t_min=vals["t_min"], t_max=vals["t_max"],
                t_typical=vals["t_typical"], t_avg=vals.get("t_avg"),
                t_stdev=vals.get("t_stdev"), p99=vals.get("p99"), p999=vals.get("p999"),
                line=i + 1))
        else:
            unit = run.bw_unit or "MB/sec"
            peak = vals["bw_peak"]
            run.rows.append(BwRow(
                bytes=nbytes, iterations=iters,
                bw_peak_gbps=_to_gbps(peak, unit) if peak > 0 else None,
                bw_avg_gbps=_to_gbps(vals["bw_avg"], unit),
                msg_rate_mpps=vals.get("msg_rate"), line=i + 1))
    if not run.rows:
        raise _err(source, table_at + 1, "#bytes", "at least one result row under the table header")
    return run


def parse_perftest_runs(text: str, source: str = "<perftest>") -> list[PerftestRun]:
    """Every perftest run in ``text`` (the output of one or more ``ib_*_{lat,bw}`` runs),
    in file order. Row times are microseconds, bandwidths Gb/s (10^9 bit/s), message
    rates Mpps; ``source`` names the text in errors. Raises :class:`InputError`
    (``source:line``, the column or header key) for malformed or impossible output."""
    if not isinstance(text, str):
        raise InputError(source, "", "perftest output as text")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    titles = _find_title(lines)
    if not titles:
        raise InputError(source, "", "perftest output with a test title line such as "
                         "'RDMA_Read Latency Test' or 'Send BW Test'")
    runs = []
    prev_end = 0
    for n, t in enumerate(titles):
        end = titles[n + 1] if n + 1 < len(titles) else len(lines)
        run = _parse_run(lines, source, t, end, prev_end)
        runs.append(run)
        prev_end = run.rows[-1].line  # the next run's command comes after our last row
    return runs


def parse_perftest(text: str, source: str = "<perftest>") -> PerftestRun | list[PerftestRun]:
    """Parse perftest output: one :class:`PerftestRun`, or a list when the text holds
    several runs (use :func:`parse_perftest_runs` to always get a list)."""
    runs = parse_perftest_runs(text, source)
    return runs[0] if len(runs) == 1 else runs


# ---------------------------------------------------------------------------------------
# rnicsim-probe JSON lines
# ---------------------------------------------------------------------------------------

PROBE_SCHEMA = 1
_TYPES = ("probe", "device", "link", "host", "measurement", "skip", "switch", "end")
_SWEEPS = ("lat", "bw", "qps", "threads", "depth", "batch", "signal", "inline", "atomics",
           "pages", "coro", "rpc", "arb")
_CQ_LAYOUTS = ("shared", "per_qp")
_SWITCH_IMPLS = ("asm", "ucontext")
_VERBS = ("READ", "WRITE", "SEND", "CAS", "FAA")
_TRANSPORTS = ("RC", "UC", "UD")
_METHODS = ("post_to_cqe", "pingpong", "throughput")
_LAT_KEYS = ("min", "median", "avg", "stdev", "p99", "p999", "max")


@dataclass
class ProbeRun:
    """A parsed probe file: header, per-role device/link/host, points, end."""

    source: str
    header: dict[str, Any]
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> fields
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    measurements: list[dict[str, Any]] = field(default_factory=list)  # with "_line"
    skips: list[dict[str, Any]] = field(default_factory=list)
    switches: list[dict[str, Any]] = field(default_factory=list)  # bare coroutine switches
    end: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        """True when the file ends with an ``end`` line of status ``ok`` (the run finished)."""
        return self.end is not None and self.end.get("status") == "ok"


class _Pairs(dict):
    """A JSON object that remembers the keys given more than once (``object_pairs_hook``)."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        seen: set[str] = set()
        self.repeated = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]


def _repeated_key(obj: Any, prefix: str = "") -> str | None:
    """The dotted path of the first repeated key in ``obj`` or its nested objects."""
    if isinstance(obj, _Pairs) and obj.repeated:
        return prefix + obj.repeated[0]
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) \
        else ()
    for k, v in items:
        found = _repeated_key(v, f"{prefix}{k}.")
        if found:
            return found
    return None


class _Checker:
    def __init__(self, source: str, line: int, obj: dict[str, Any]):
        self.where = f"{source}:{line}"
        self.obj = obj

    def fail(self, key: str, expected: str) -> InputError:
        return InputError(self.where, key, expected)

    def get(self, key: str, obj: dict[str, Any] | None = None, prefix: str = "") -> Any:
        o = self.obj if obj is None else obj
        if key not in o:
            raise self.fail(prefix + key, "this key is required")
        return o[key]

    def str_in(self, key: str, choices: Sequence[str], obj=None, prefix: str = "") -> str:
        v = self.get(key, obj, prefix)
        if not isinstance(v, str) or v not in choices:
            raise self.fail(prefix + key, f"one of {', '.join(choices)}; got {v!r}")
        return v

    def string(self, key: str, obj=None, prefix: str = "", nullable: bool = False) -> str | None:
        v = self.get(key, obj, prefix)
        if v is None and nullable:
            return None
        if not isinstance(v, str):
            raise self.fail(prefix + key, f"a string; got {v!r}")
        return v

    def int_(self, key: str, minimum: int = 0, obj=None, prefix: str = "") -> int:
        v = self.get(key, obj, prefix)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.fail(prefix + key, f"an integer >= {minimum}; got {v!r}")
        return v

    def num(self, key: str, obj=None, prefix: str = "") -> float:
        v = self.get(key, obj, prefix)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self.fail(prefix + key, f"a finite number >= 0; got {v!r}")
        return float(v)

    def boolean(self, key: str, obj=None, prefix: str = "") -> bool:
        v = self.get(key, obj, prefix)
        if not isinstance(v, bool):
            raise self.fail(prefix + key, f"true or false; got {v!r}")
        return v


def _check_point(c: _Checker) -> None:
    c.str_in("sweep", _SWEEPS)
    c.str_in("verb", _VERBS)
    c.str_in("transport", _TRANSPORTS)
    c.str_in("method", _METHODS)
    if c.int_("payload", 1) > MAX_MESSAGE:
        raise c.fail("payload", f"at most 2^31 bytes (the largest RDMA message); "
                     f"got {c.obj['payload']!r}")
    for k in ("qps", "threads", "depth", "batch", "signal_every", "addresses"):
        c.int_(k, 1)
    c.boolean("inline")
    if c.int_("page_size", 1) not in (4096, 2 * 1024 * 1024):
        raise c.fail("page_size", f"4096 or 2097152 (bytes); got {c.obj['page_size']!r}")
    if c.obj["qps"] % c.obj["threads"]:
        raise c.fail("qps", f"a multiple of threads ({c.obj['threads']}: each posting "
                     f"thread has its own QPs); got {c.obj['qps']!r}")
    c.string("page_backing", nullable=True)
    c.int_("region_bytes", 0)
    c.boolean("random_offsets")
    if c.obj["sweep"] == "coro":
        # one posting thread, coroutine k on QP k, one signaled WR in flight per coroutine
        k = c.int_("coroutines", 1)
        c.str_in("cq_layout", _CQ_LAYOUTS)
        c.str_in("switch_impl", _SWITCH_IMPLS)
        for key, want in (("qps", k), ("threads", 1), ("depth", 1), ("batch", 1),
                          ("signal_every", 1)):
            if c.obj[key] != want:
                raise c.fail(key, f"{want} in a coro point (coroutine k posts one signaled WR "
                             f"at a time on QP k, from one thread); got {c.obj[key]!r}")
    elif c.obj["sweep"] == "rpc":
        # one client thread on one QP keeps `depth` SENDs outstanding against the server's
        # echo, posted in lists of `batch`, the last WR of each list signaled
        for key, want in (("verb", "SEND"), ("method", "throughput"), ("qps", 1),
                          ("threads", 1)):
            if c.obj[key] != want:
                raise c.fail(key, f"{want} in an rpc point (one thread echoes SENDs on one "
                             f"QP); got {c.obj[key]!r}")
        if c.obj["transport"] not in ("RC", "UD"):
            raise c.fail("transport", f"RC or UD in an rpc point; got {c.obj['transport']!r}")
        if c.obj["depth"] % c.obj["batch"]:
            raise c.fail("batch", f"a divisor of depth ({c.obj['depth']}: requests are posted "
                         f"in lists of batch as window slots free); got {c.obj['batch']!r}")
        if c.obj["signal_every"] != c.obj["batch"]:
            raise c.fail("signal_every", f"batch ({c.obj['batch']}: the last WR of every list "
                         f"is signaled) in an rpc point; got {c.obj['signal_every']!r}")
    elif c.obj["sweep"] == "arb":
        # a 64-B WRITE timed from its post to its CQE, posted on QP 1 `gap_us` after a
        # WRITE of `behind` bytes on QP 0, one thread, both signaled
        c.int_("behind", 0)
        c.num("gap_us")
        for key, want in (("verb", "WRITE"), ("transport", "RC"), ("method", "post_to_cqe"),
                          ("qps", 2), ("threads", 1)):
            if c.obj[key] != want:
                raise c.fail(key, f"{want} in an arb point (a small WRITE on one QP right "
                             f"behind a large one on another); got {c.obj[key]!r}")


def _check_measurement(c: _Checker) -> None:
    _check_point(c)
    c.int_("iters", 1)
    c.num("elapsed_s")
    c.boolean("truncated")
    method = c.obj["method"]
    # the probe times SENDs as a ping-pong against the server's echo and every other verb
    # post to CQE; the fit maps each method to its own experiment, so a mismatch would be
    # fitted as the wrong one
    if method != "throughput" and (method == "pingpong") != (c.obj["verb"] == "SEND"):
        raise c.fail("method", f"{'pingpong' if c.obj['verb'] == 'SEND' else 'post_to_cqe'} "
                     f"or throughput for a {c.obj['verb']} point; got {method!r}")
    if method == "throughput":
        c.num("mops")
        c.num("gbps")
        if c.obj["sweep"] == "coro":
            c.num("polls_per_op")
            c.num("empty_poll_fraction")
        elif c.obj["sweep"] == "rpc":
            c.int_("lost", 0)
    else:
        lat = c.get("lat_us")
        if not isinstance(lat, dict):
            raise c.fail("lat_us", f"an object with {', '.join(_LAT_KEYS)}; got {lat!r}")
        v = {k: c.num(k, lat, "lat_us.") for k in _LAT_KEYS}
        order = ("min", "median", "max"), ("min", "p99", "p999", "max"), ("min", "avg", "max")
        for chain in order:
            for a, b in zip(chain, chain[1:]):
                if v[a] > v[b] * (1 + 1e-9):
                    raise c.fail(f"lat_us.{b}", f"a value >= lat_us.{a} ({v[a]}); got {v[b]}")
        c.str_in("lat_convention", ("rtt", "half_rtt"))
        if method == "pingpong" and "lost" in c.obj:
            c.int_("lost", 0)


def parse_probe_jsonl(text: str, source: str = "<probe>") -> ProbeRun:
    """Parse and validate rnicsim-probe JSON lines (``calibration/probe/SCHEMA.md``) into
    a :class:`ProbeRun`; values keep the schema's units (``lat_us`` microseconds, ``mops``
    10^6 operations/s, ``gbps`` 10^9 bit/s, ``elapsed_s`` seconds, sizes bytes). Unknown
    keys are ignored (the schema's rule); a missing, repeated, wrongly typed or impossible
    one raises :class:`InputError` naming ``source:line`` and the key path."""
    if not isinstance(text, str):
        raise InputError(source, "", "probe JSON lines as text")
    run: ProbeRun | None = None
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{source}:{n}"
        try:
            obj = json.loads(raw, object_pairs_hook=_Pairs)
        except json.JSONDecodeError as e:
            raise InputError(where, "", f"one JSON object per line ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(where, "", f"a JSON object; got {type(obj).__name__}")
        repeated = _repeated_key(obj)
        if repeated:
            raise InputError(where, repeated, "each key once per object (it repeats; "
                             "json.loads would silently keep the last value)")
        c = _Checker(source, n, obj)
        typ = c.str_in("type", _TYPES)
        if run is None:
            if typ != "probe":
                raise c.fail("type", f"the 'probe' header as the first line; got {typ!r}")
            schema = c.get("schema")
            if isinstance(schema, bool) or schema != PROBE_SCHEMA:   # True == 1 in Python
                raise c.fail("schema", f"schema {PROBE_SCHEMA} (this reader); got {schema!r}")
            c.string("probe_version")
            if "path_mtu" in obj and c.int_("path_mtu", 1) not in IB_MTUS:
                raise c.fail("path_mtu", f"one of {', '.join(map(str, IB_MTUS))} (bytes); "
                             f"got {obj['path_mtu']!r}")
            run = ProbeRun(source=source, header=obj)
            continue
        if run.end is not None:
            raise c.fail("type", "nothing after the 'end' line")
        if typ == "probe":
            raise c.fail("type", "a single 'probe' header (is this two files concatenated?)")
        if typ in ("device", "link", "host"):
            role = c.str_in("role", ("client", "server"))
            table = {"device": run.devices, "link": run.links, "host": run.hosts}[typ]
            if role in table:
                raise c.fail("role", f"one {typ} line per role; {role!r} repeats")
            if typ == "device":
                c.string("name")
            elif typ == "link":
                c.str_in("link_layer", ("IB", "Ethernet"))
                if c.int_("active_mtu", 1) not in IB_MTUS:
                    raise c.fail("active_mtu", f"one of {', '.join(map(str, IB_MTUS))} "
                                 f"(bytes); got {obj['active_mtu']!r}")
            table[role] = obj
        elif typ == "measurement":
            _check_measurement(c)
            run.measurements.append({**obj, "_line": n})
        elif typ == "skip":
            _check_point(c)
            c.string("reason")
            run.skips.append({**obj, "_line": n})
        elif typ == "switch":
            c.str_in("switch_impl", _SWITCH_IMPLS)
            c.int_("coroutines", 1)
            c.int_("iters", 1)
            c.num("elapsed_s")
            if c.num("ns_per_switch") <= 0:
                raise c.fail("ns_per_switch", "a time > 0 (ns)")
            run.switches.append({**obj, "_line": n})
        else:  # end
            c.str_in("status", ("ok", "interrupted", "error"))
            # the probe counts the lines it wrote; fewer here means lines were lost (an
            # edited or partly copied file), which would otherwise go unnoticed
            for key, have in (("points", len(run.measurements)), ("skipped", len(run.skips))):
                if key in obj and c.int_(key, 0) != have:
                    raise c.fail(key, f"the number of {'measurement' if key == 'points' else 'skip'}"
                                 f" lines before it ({have}); got {obj[key]!r}")
            run.end = obj
    if run is None:
        raise InputError(source, "", "rnicsim-probe JSON lines starting with a 'probe' header")
    return run


# ---------------------------------------------------------------------------------------
# normalised measurements
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """One metric of one configuration, from perftest or from the probe.

    ``kind`` is ``lat``, ``bw`` (throughput) or ``switch`` (a probe's bare coroutine
    switch: metric ``switch_ns``, unit ``ns``, no verb). Metrics: ``lat_min``, ``lat_median``,
    ``lat_avg``, ``lat_stdev``, ``lat_p99``, ``lat_p999``, ``lat_max`` (unit ``us``);
    ``bw_avg``, ``bw_peak`` (unit ``Gbps``); ``msg_rate`` (unit ``Mops``).
    ``depth`` is the number of outstanding WRs per QP (1 for latency tests, perftest's
    TX depth for its bw tests); ``signal_every`` is perftest's CQ moderation.
    """

    verb: str
    transport: str
    kind: str
    payload: int
    qps: int
    depth: int
    metric: str
    value: float
    unit: str
    source: str
    line: int = 0
    tool: str = ""
    sweep: str = ""
    threads: int = 1
    batch: int = 1
    signal_every: int = 1
    inline: bool = False
    page_size: int = 4096
    addresses: int = 1
    random_offsets: bool = False
    region_bytes: int = 0
    iterations: int = 0
    latency_convention: str | None = None
    mtu: int | None = None
    link_layer: str | None = None
    device: str | None = None
    truncated: bool = False
    coroutines: int = 0            # coro sweep and switch lines: coroutines on the thread
    cq_layout: str = ""            # coro sweep: shared | per_qp
    lost: int = 0                  # pingpong and rpc: UD echoes that never came back (200 ms)
    behind: int = 0                # arb sweep: bytes of the WRITE posted just before [B]
    gap_us: float = 0.0            # arb sweep: from that WRITE's post to this one's [us]


_LAT_METRICS = (("t_min", "lat_min"), ("t_typical", "lat_median"), ("t_avg", "lat_avg"),
                ("t_stdev", "lat_stdev"), ("p99", "lat_p99"), ("p999", "lat_p999"),
                ("t_max", "lat_max"))


def perftest_measurements(run: PerftestRun) -> list[Measurement]:
    """Normalise one perftest run."""
    out: list[Measurement] = []
    for r in run.rows:
        payload = r.bytes
        inline = bool(run.kind == "lat" and run.verb in ("WRITE", "SEND") and run.inline_size
                      and payload <= run.inline_size)
        common = dict(
            verb=run.verb, transport=run.connection_type, kind=run.kind, payload=payload,
            qps=run.qps, depth=1 if run.kind == "lat" else (run.tx_depth or 1),
            source=run.source, line=r.line, tool=run.tool, sweep="perftest",
            signal_every=1 if run.kind == "lat" else (run.cq_moderation or 1),
            inline=inline, iterations=r.iterations, mtu=run.mtu, link_layer=run.link_type,
            device=run.device,
        )
        if run.kind == "lat":
            for attr, metric in _LAT_METRICS:
                v = getattr(r, attr)
                if v is not None:
                    out.append(Measurement(metric=metric, value=v, unit="us",
                                           latency_convention=run.latency_convention,
                                           **common))  # type: ignore[arg-type]
        else:
            out.append(Measurement(metric="bw_avg", value=r.bw_avg_gbps, unit="Gbps",
                                   **common))  # type: ignore[arg-type]
            if r.bw_peak_gbps is not None:
                out.append(Measurement(metric="bw_peak", value=r.bw_peak_gbps, unit="Gbps",
                                       **common))  # type: ignore[arg-type]
            if r.msg_rate_mpps is not None:
                out.append(Measurement(metric="msg_rate", value=r.msg_rate_mpps, unit="Mops",
                                       **common))  # type: ignore[arg-type]
    return out


def probe_measurements(run: ProbeRun) -> list[Measurement]:
    """Normalise a parsed probe file (skips are left out)."""
    link = run.links.get("client", {})
    dev = run.devices.get("client", {})
    mtu = run.header.get("path_mtu") or link.get("active_mtu")
    out: list[Measurement] = []
    for m in run.measurements:
        is_lat = m["method"] != "throughput"
        common = dict(
            verb=m["verb"], transport=m["transport"], kind="lat" if is_lat else "bw",
            payload=m["payload"], qps=m["qps"], depth=m["depth"], source=run.source,
            line=m["_line"], tool="rnicsim-probe", sweep=m["sweep"], threads=m["threads"],
            batch=m["batch"], signal_every=m["signal_every"], inline=m["inline"],
            page_size=m["page_size"], addresses=m["addresses"],
            random_offsets=m["random_offsets"], region_bytes=m["region_bytes"],
            iterations=m["iters"], mtu=mtu,
            link_layer=link.get("link_layer"), device=dev.get("name"),
            truncated=m["truncated"], coroutines=m.get("coroutines", 0),
            cq_layout=m.get("cq_layout", ""), lost=m.get("lost", 0),
            behind=m.get("behind", 0), gap_us=float(m.get("gap_us", 0.0)),
        )
        if is_lat:
            for key in _LAT_KEYS:
                out.append(Measurement(metric=f"lat_{key}", value=float(m["lat_us"][key]),
                                       unit="us", latency_convention=m["lat_convention"],
                                       **common))  # type: ignore[arg-type]
        else:
            out.append(Measurement(metric="bw_avg", value=float(m["gbps"]), unit="Gbps",
                                   **common))  # type: ignore[arg-type]
            out.append(Measurement(metric="msg_rate", value=float(m["mops"]), unit="Mops",
                                   **common))  # type: ignore[arg-type]
    for w in run.switches:
        # a bare coroutine switch (resume + yield, no verbs): the host's coroutine_switch
        out.append(Measurement(
            verb="", transport="", kind="switch", payload=0, qps=0, depth=0,
            metric="switch_ns", value=float(w["ns_per_switch"]), unit="ns",
            source=run.source, line=w["_line"], tool="rnicsim-probe", sweep="switch",
            iterations=w["iters"], link_layer=link.get("link_layer"), device=dev.get("name"),
            coroutines=w["coroutines"]))
    return out


# What a directory contributes: perftest text and probe JSON lines. Not ".json": a
# report's fit.json (``--report`` into the input directory) or any other JSON document
# is no probe output and would fail the run that reads the directory next.
_TEXT_SUFFIXES = (".txt", ".log", ".out", ".jsonl")


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if f.is_file() and f.suffix in _TEXT_SUFFIXES)
            if not found:
                raise InputError(str(path), "", "a directory holding perftest (.txt) or probe "
                                 "(.jsonl) files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(str(path), "", "an existing file (perftest output or probe JSON lines)")
    return files


def load_measurements(paths: Iterable[str | Path]) -> list[Measurement]:
    """Read perftest outputs and probe JSON-lines files (directories are expanded to their
    .txt/.log/.out/.jsonl files; one path may be given alone) into one list of
    :class:`Measurement` (latency in us, bandwidth in Gb/s, message rate in Mops, sizes in
    bytes). The format is told by content: a first non-blank line starting with '{' is
    probe output. Raises :class:`InputError` naming the file (and line and key)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Measurement] = []
    for path in _expand(paths):
        try:
            data = path.read_bytes()
        except OSError as e:
            raise InputError(str(path), "", f"a readable file ({e.strerror})") from None
        bad = None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            # perftest pastes may carry another encoding in prompts and comments, which
            # the parser skips; a probe file is UTF-8 (SCHEMA.md), so a bad byte there is
            # a damaged file, not a character to replace inside a value
            text, bad = data.decode("utf-8", errors="replace"), e
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        if first.lstrip().startswith("{"):
            if bad is not None:
                line = data[:bad.start].count(b"\n") + 1
                raise InputError(f"{path}:{line}", "", f"UTF-8 text (byte 0x{data[bad.start]:02x} "
                                 "is not; rnicsim-probe writes UTF-8)")
            out.extend(probe_measurements(parse_probe_jsonl(text, str(path))))
        else:
            for run in parse_perftest_runs(text, str(path)):
                out.extend(perftest_measurements(run))
    return out
