"""``rnicsim run``, ``rnicsim validate`` and ``rnicsim profiles``."""
from __future__ import annotations

import json
import sys
from contextlib import closing

from .errors import ArgumentParser, InputError
from .profile import ProfileModel, available_profiles, load_profile
from .scenario import load_raw, load_scenario, parse_override, points, resolve

SET_HELP = ("override a scenario key (e.g. run.size=demo, cluster.nodes=8); wins over the "
            "size's value, and on a swept key runs that single value")


def add_run_options(ap) -> None:
    """``--jobs``, ``--scheduler``, ``--resume``, ``--force`` and ``--quiet``, shared by
    ``rnicsim run`` and ``rnicsim reproduce``."""
    ap.add_argument("--jobs", type=int, help="points run in parallel on this machine "
                    "(processes; default 1)")
    ap.add_argument("--scheduler", metavar="tcp://HOST:PORT|local:N",
                    help="run the points on a Dask cluster: the scheduler's address, or "
                         "local:N for N local worker processes")
    ap.add_argument("--resume", action="store_true",
                    help="keep the points an earlier run of the same scenario stored in "
                         "--out and run only the others")
    ap.add_argument("--force", action="store_true",
                    help="discard the stored points of an unfinished run in --out")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")


def check_run_options(a) -> None:
    """InputError naming the flag for --jobs < 1, --jobs with --scheduler, or --resume with
    --force (cheap: called before anything else is checked)."""
    if a.jobs is not None and a.jobs < 1:
        raise InputError("command line", "--jobs", "a whole number >= 1")
    if a.jobs is not None and a.scheduler:
        raise InputError("command line", "--jobs", "no --jobs with --scheduler (the "
                         "cluster's workers run the points; local:N sets their number)")
    if a.resume and a.force:
        raise InputError("command line", "--force", "either --resume (keep the stored "
                         "points) or --force (discard them), not both")


def open_run_pool(a):
    """The point pool of parsed run options; InputError naming the flag, before any point
    runs, for the mistakes :func:`check_run_options` finds and a scheduler that cannot be
    reached."""
    from .distributed import open_pool

    check_run_options(a)
    return open_pool(a.jobs or 1, a.scheduler)


def cmd_run(argv: list[str]) -> int:
    """``rnicsim run FILE --out DIR [--set a.b=v]... [--seed N] [--jobs N | --scheduler S]
    [--resume | --force] [--quiet]``. Exit 1 when points failed (each named on stderr)."""
    ap = ArgumentParser(prog="rnicsim run", description="Run a scenario and write its results.")
    ap.add_argument("file", help="scenario YAML file")
    ap.add_argument("--out", required=True, help="directory for results.csv, summary.json, "
                    "scenario.resolved.yaml, plots and the stored points")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help=SET_HELP)
    ap.add_argument("--seed", type=int, help="run.seed of every point (default the "
                    "scenario's)")
    add_run_options(ap)
    ap.add_argument("--trace", metavar="FILE.json",
                    help="write a Perfetto / Chrome trace of the run's last simulation "
                         "(one point: pick it with --set) over --trace-window; open it in "
                         "ui.perfetto.dev")
    ap.add_argument("--pcap", metavar="FILE.pcap",
                    help="write the packets of the run's last simulation over "
                         "--trace-window as a pcap file for Wireshark")
    ap.add_argument("--trace-window", metavar="START:END",
                    help="simulated time traced, e.g. 30us:50us (default: the first 20 us "
                         "of the measured window)")
    a = ap.parse_args(argv)
    check_run_options(a)
    observe = a.trace or a.pcap
    if observe and ((a.jobs or 1) > 1 or a.scheduler):
        raise InputError("command line", "--trace/--pcap",
                         "points run in this process (no --jobs above 1, no --scheduler)")
    if a.trace_window is not None and not observe:
        raise InputError("command line", "--trace-window", "--trace or --pcap with it")
    sc = load_scenario(a.file, a.set, a.seed)
    from .runner import PointsFailed, run_scenario
    from .trace import capture, parse_window

    start, end = parse_window(a.trace_window, sc.run.warmup)
    with closing(open_run_pool(a)) as pool:
        try:
            with capture(a.trace, a.pcap, start, end) as seen:
                summary = run_scenario(sc, a.out, progress=not a.quiet, source=a.file,
                                       pool=pool, resume=a.resume, force=a.force)
        except PointsFailed as e:
            print(f"rnicsim run: error: {e}", file=sys.stderr)
            return 1
    if observe:
        print(_captured(seen, a.trace, a.pcap, start, end))
    if summary["claims"]:
        from .claims import claim_table, tally

        for line in claim_table(summary["claims"]):
            print(line)
        print(tally(summary["claims"]))
    print(f"results: {a.out}/results.csv, summary.json, scenario.resolved.yaml"
          + (", " + ", ".join(summary.get("plots", [])) if summary.get("plots") else ""))
    return 0


def _captured(seen: dict, trace: str | None, pcap: str | None, start: float,
              end: float) -> str:
    """One line saying what ``--trace``/``--pcap`` wrote over [start, end) [ns]."""
    from .units import fmt_time

    if not seen.get("simulations"):
        return "trace: nothing ran in this process (every point was stored)"
    parts = []
    if trace:
        cut = f", {seen['dropped']} more left out" if seen.get("dropped") else ""
        parts.append(f"{trace} ({seen['events']} events{cut}; ui.perfetto.dev)")
    if pcap:
        parts.append(f"{pcap} ({seen['packets']} packets; Wireshark)")
    last = " (the last of its simulations)" if seen["simulations"] > 1 else ""
    return f"traced {fmt_time(start)}..{fmt_time(end)}{last}: " + ", ".join(parts)


def cmd_validate(argv: list[str]) -> int:
    """``rnicsim validate FILE... [--set a.b=v]...``: check scenario files, run nothing.

    Each file is checked at the selected size (``full`` unless ``--set run.size=NAME``)
    and at every size it defines; one line per file, an error on stderr for each bad one;
    exit 2 when any file is bad."""
    ap = ArgumentParser(prog="rnicsim validate", description="Check scenario files.")
    ap.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help=SET_HELP)
    a = ap.parse_args(argv)
    failed = 0
    for f in a.files:
        try:
            sc, pts = _validate_file(f, a.set)
        except InputError as e:
            print(f"rnicsim validate: error: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"{f}: OK ({sc.name}, {len(pts)} point{'s' if len(pts) != 1 else ''}, "
              f"{len(sc.expected)} claim checks, sizes: full"
              f"{''.join(', ' + s for s in sc.sizes)})")
    return 2 if failed else 0


def _validate_file(f: str, overrides: list[str]):
    """The scenario of ``f`` at the selected size and its points, after checking every
    size of ``f``; an error of another size is reported under ``sizes.<name>``."""
    from .runner import point_profile

    raw = load_raw(f)
    ov = [parse_override(o) for o in overrides]
    sc = resolve(raw, f, ov)
    pts = points(sc)
    for _v, p in pts:
        point_profile(p)
    for s in sc.sizes:
        if s == sc.run.size:
            continue
        try:
            resolve(raw, f, ov + [("run.size", s)])
        except InputError as e:
            if e.key.startswith(f"sizes.{s}."):
                raise
            raise InputError(e.source, f"sizes.{s}",
                             f"{e.key}: {e.expected}" if e.key else e.expected) from None
    return sc, pts


def cmd_profiles(argv: list[str]) -> int:
    """``rnicsim profiles [NAME|PATH] [--json]``: list profiles, or show one with sources.

    Without NAME, ``--json`` prints a list of ``{"name", "link", "rate_gbps", "nic_model",
    "description"}`` (the table's columns, the description whole)."""
    ap = ArgumentParser(prog="rnicsim profiles", description="List or show NIC profiles.")
    ap.add_argument("name", nargs="?", metavar="NAME|PATH",
                    help="a profile to show with the source of each value (default: list "
                         "them all)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    if not a.name:
        rows = []
        for n in available_profiles():
            p = load_profile(n)
            rows.append({"name": n, "link": p.link.kind, "rate_gbps": p.link.rate / 1e9,
                         "nic_model": p.nic.model,
                         "description": p.model.description.strip()})
        if a.json:
            print(json.dumps(rows, indent=2))
            return 0
        for r in rows:
            print(f"{r['name']:15s} {r['link']:4s} {r['rate_gbps']:6.1f} Gb/s  "
                  f"{r['nic_model']:11s} {r['description'][:70]}")
        return 0
    p = load_profile(a.name)
    if a.json:
        print(json.dumps(p.model.model_dump(mode="json"), indent=2))
        return 0
    print(f"{p.name}: {p.model.description.strip()}")
    m = p.model
    for sec in ("link", "switch", "pcie", "nic", "host"):
        print(f"\n[{sec}]")
        s = getattr(m, sec)
        for k in type(s).model_fields:
            v = getattr(s, k)
            if hasattr(v, "source"):
                print(f"  {k:18s} {_show(k, v.value):>12s}   {v.source}")
            else:
                for op in type(v).model_fields:
                    pv = getattr(v, op)
                    print(f"  {k + '.' + op:18s} {_show(op, pv.value):>12s}   {pv.source}")
    return 0


def _show(key: str, v) -> str:
    ann = None
    for sec in ProfileModel.model_fields.values():
        ann = getattr(sec.annotation, "model_fields", {}).get(key, ann)
    name = type(v).__name__
    if isinstance(v, float) and ann is not None:
        t = ann.annotation.__name__
        if t == "RateP":
            return f"{v / 1e9:g} Gb/s"
        if t == "FreqP":
            return f"{v / 1e9:g} GHz"
        if t == "RatioP":
            return f"{v:.4g}"
        return f"{v:g} ns"
    if name == "int" and ann is not None and ann.annotation.__name__ == "SizeP":
        return f"{v} B"
    if isinstance(v, dict) and ann is not None and ann.annotation.__name__ == "IdleStatesP":
        # exit latency / target residency, as intel_idle's tables and cpupower list them
        return ", ".join(f"{k} {e / 1e3:g}/{r / 1e3:g} us" for k, (e, r) in v.items()) \
            or "none"
    return str(v)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cmd_profiles(sys.argv[1:]))
