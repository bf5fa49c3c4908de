"""``rnicsim compare MEASURED.txt [--nic PROFILE] [--set section.param=v]``: a perftest
output file beside the same test on a simulated NIC.

Reads real perftest output (``ib_{read,write,send,atomic}_{lat,bw}``, one or several runs
per file, pasted as people paste it: :func:`calibration.parsers.parse_perftest_runs`),
maps each measured row to the experiment that reproduces it with the flags the run
records in its header (connection type, QPs, TX depth, CQ moderation, inline size, MTU,
outstanding reads: :func:`calibration.fit.map_measurements`), runs it on the profile
(:func:`calibration.fit.simulate`, the ``rnicsim perftest`` model) and prints one row per
measured row: the test, the payload [B], the quantity (perftest's ``t_typical`` [us], the
median, for latency tests; ``MsgRate`` [Mpps] for bandwidth tests), measured, simulated
and the error, simulated / measured - 1. Rows it cannot reproduce (another link layer
than the profile's, a metric perftest did not print) are listed below with the reason.
A last line gives the mean and largest absolute error.

``--nic`` defaults to the ConnectX-3 profile of the file's link type (``cx3-qdr`` for
InfiniBand, ``cx3-roce-10g`` for Ethernet: the generation of the public perftest files
in ``reference-data/``). ``--set section.param=value`` (repeatable) overrides a profile
parameter, as ``rnicsim perftest --set`` does. Exit 0 when at least one row was compared,
2 on bad input (an unreadable file, no perftest run in it, an unknown profile or key).
"""
from __future__ import annotations

import sys
from pathlib import Path

from rnicsim.errors import ArgumentParser, InputError

from .fit import map_measurements, simulate
from .parsers import load_measurements

#: Default profile by the link type perftest prints.
DEFAULT_NIC = {"IB": "cx3-qdr", "Ethernet": "cx3-roce-10g"}


def compare(path: str, nic: str | None = None, overrides: dict | None = None
            ) -> tuple[str, list[dict], list[tuple[int, str, str]]]:
    """(profile name, compared rows, rows not compared) of perftest file ``path``.

    Each compared row is ``{"line", "test", "bytes", "quantity", "unit", "measured",
    "simulated", "error"}`` (``error`` = simulated / measured - 1), in file order; each
    row not compared is ``(line, what, reason)``. Raises :class:`InputError` for a file
    that holds no perftest run or an unknown profile."""
    from rnicsim.profile import load_profile

    ms = [m for m in load_measurements([path]) if m.tool.startswith("ib_")]
    if not ms:
        raise InputError(path, "", "perftest output (ib_read_lat, ib_write_bw, ...): "
                                   "no perftest run found")
    if nic is None:
        link = next((m.link_layer for m in ms if m.link_layer), "IB")
        nic = DEFAULT_NIC.get(link, "cx3-qdr")
    profile = load_profile(nic)
    if overrides:
        profile = profile.with_overrides(overrides, "command line --set")
    points, unmapped = map_measurements(ms, profile)
    rows = []
    for p in sorted(points, key=lambda p: p.line):
        sim = simulate(p.exp, profile) * p.factor
        rows.append({"line": p.line, "test": p.exp.label(), "bytes": p.exp.size,
                     "quantity": "t_typical" if p.quantity == "lat_us" else "MsgRate",
                     "unit": "us" if p.quantity == "lat_us" else "Mpps",
                     "measured": p.measured, "simulated": sim,
                     "error": sim / p.measured - 1 if p.measured else float("nan")})
    skipped = sorted((u.line, u.what, u.reason) for u in unmapped)
    return profile.name, rows, skipped


def table(name: str, path: str, rows: list[dict], skipped: list[tuple[int, str, str]]
          ) -> list[str]:
    """The lines ``rnicsim compare`` prints (see the module doc)."""
    head = ["line", "test", "quantity", "measured", "simulated", "error"]
    body = [[str(r["line"]), r["test"], f"{r['quantity']} [{r['unit']}]",
             f"{r['measured']:.4g}", f"{r['simulated']:.4g}", f"{r['error']:+.1%}"]
            for r in rows]
    width = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = [f"{Path(path).name} against profile {name}: simulated / measured - 1 per row"]
    lines += ["  ".join(c.rjust(w) if i in (0, 3, 4, 5) else c.ljust(w)
                        for i, (c, w) in enumerate(zip(x, width))).rstrip()
              for x in [head] + body]
    for line, what, reason in skipped:
        lines.append(f"not compared: line {line}: {what}: {reason}")
    errs = [abs(r["error"]) for r in rows]
    if errs:
        lines.append(f"{len(rows)} row{'s' if len(rows) != 1 else ''}: mean |error| {sum(errs) / len(errs):.1%}, "
                     f"largest {max(errs):.1%}")
    return lines


def main(argv: list[str]) -> int:
    """Entry point of ``rnicsim compare``."""
    ap = ArgumentParser(prog="rnicsim compare",
                        description="Run the perftest runs of a file of real perftest output "
                                    "on a simulated NIC and print measured against "
                                    "simulated with the error per row.")
    ap.add_argument("measured", metavar="MEASURED.txt", help="perftest output file")
    ap.add_argument("--nic", metavar="PROFILE", help="profile name or file (default: "
                    "cx3-qdr for InfiniBand output, cx3-roce-10g for Ethernet)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.PARAM=VALUE",
                    help="override a profile parameter (repeatable), e.g. "
                         "link.signal_rate=40Gbps")
    a = ap.parse_args(argv)
    overrides = {}
    for item in a.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("command line", "--set", f"SECTION.PARAM=VALUE, got {item!r}")
        overrides[key] = value
    if not Path(a.measured).is_file():
        raise InputError("command line", "MEASURED.txt",
                         f"a readable perftest output file, got {a.measured!r}")
    name, rows, skipped = compare(a.measured, a.nic, overrides)
    for line in table(name, a.measured, rows, skipped):
        print(line)
    if not rows:
        print(f"rnicsim compare: error: {a.measured}: no row could be compared on {name} "
              "(reasons above)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
