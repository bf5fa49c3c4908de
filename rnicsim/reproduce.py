"""``rnicsim reproduce NAME``: run a paper's scenarios and print measured against published.

Runs every scenario in ``scenarios/NAME/`` that has an ``expected:`` block (sorted by file
name), writes each one's results under ``--out`` (default ``out/reproduce/NAME``), and
prints one line per claim check (:func:`rnicsim.claims.claim_table`): id, role, scenario,
kind, what is compared, the test (tolerance or bound), published and measured with units,
and ``holds``, ``FAILS`` or ``not measured`` (no point of the run selects the check, e.g.
after a ``--set`` that narrows a sweep: not counted as failing); validation checks in one
table, calibration checks (numbers a parameter was fitted to) in another, then the score
(:func:`rnicsim.claims.score_line`: validation checks only). It writes ``report.md`` in
``--out`` (the score, the two tables and, per scenario, its checks beside its plots,
relative links) and ``summary.json`` (``{"paper", "size", "score", "score_line",
"claims"}``). With ``--json`` it prints a list of ``{"claim", "role", "published",
"measured", "holds", ...}`` (:func:`rnicsim.claims.evaluate`'s records; ``holds`` null
when not measured).
``--profile NAME=FILE`` (repeatable) runs every scenario written for profile NAME on the
profile in FILE instead, e.g. one ``rnicsim calibrate`` fitted to your own NICs.
``--set KEY=VALUE`` (repeatable) sets a scenario key in every selected scenario, as
``rnicsim run --set`` does, e.g. ``cluster.nic.overrides.pcie.rate=252Gbps`` to ask which
findings depend on a parameter (a sensitivity study); a key some scenario cannot take
exits 2 naming that scenario.
Points run as ``rnicsim run`` runs them: ``--jobs N`` local processes or a Dask cluster
(``--scheduler tcp://HOST:PORT`` or ``local:N``, one cluster for every scenario), each
point stored under its scenario's folder as it finishes (``--resume`` runs only the
missing ones; see :mod:`rnicsim.store`).
Exit code 0 whether or not the findings hold (the table says); 1 when points of a
scenario raised (each named on stderr; the other scenarios still run); 2 on bad input,
checked before anything runs: a NAME that is not a paper folder, a ``--size`` no scenario
defines, an ``--only`` that matches no scenario, ``--jobs`` < 1, a ``--profile NAME`` no
selected scenario uses, an ``--out`` that cannot be a writable directory or holds an
unfinished run (without ``--resume`` or ``--force``), a scheduler that cannot be reached.
"""
from __future__ import annotations

import json
import math
import sys
from contextlib import closing
from pathlib import Path

from .claims import claim_cells, claim_markdown, claim_table, score, score_line
from .commands import add_run_options, check_run_options, open_run_pool
from .errors import ArgumentParser, InputError
from .results import check_out_dir
from .store import RunStore
from .scenario import load_raw, load_scenario

SCENARIO_ROOT = Path(__file__).resolve().parents[1] / "scenarios"


def available() -> list[str]:
    """Names of the paper folders under ``scenarios/``."""
    if not SCENARIO_ROOT.exists():
        return []
    return sorted(p.name for p in SCENARIO_ROOT.iterdir() if p.is_dir() and
                  any(p.glob("*.yaml")))


def scenario_files(name: str) -> list[Path]:
    """The scenario files of paper ``name`` that carry claim checks."""
    if name not in available():     # a folder name, not a path that leads to one
        raise InputError("command line", "reproduce",
                         f"a paper: one of {', '.join(available())}, got {name!r}")
    d = SCENARIO_ROOT / name
    return [f for f in sorted(d.glob("*.yaml")) if load_raw(f).get("expected")]


def _nic_profile(raw: dict) -> str:
    """The profile a raw scenario names (``cluster.nic.profile``, default cx4-edr)."""
    return ((raw.get("cluster") or {}).get("nic") or {}).get("profile", "cx4-edr")


def main(argv: list[str]) -> int:
    """Entry point of ``rnicsim reproduce``."""
    ap = ArgumentParser(prog="rnicsim reproduce",
                        description="Run a paper's scenarios and print each claim check: "
                                    "published against measured, and whether it holds.")
    ap.add_argument("name", help=f"paper: {', '.join(available())}")
    ap.add_argument("--json", action="store_true",
                    help="print the claim checks as a JSON list instead of a table")
    ap.add_argument("--size", default="full", help="full (default) or a size the scenarios "
                    "define, such as demo")
    ap.add_argument("--out", metavar="DIR", help="directory for report.md and each scenario's "
                    "results (default out/reproduce/NAME)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only scenarios whose file name contains this")
    ap.add_argument("--profile", action="append", default=[], metavar="NAME=FILE",
                    help="run the scenarios written for profile NAME on the profile FILE "
                         "(repeatable), e.g. cx4-edr=fitted.yaml from rnicsim calibrate")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="set a scenario key in every selected scenario (repeatable), e.g. "
                         "cluster.nic.overrides.pcie.rate=252Gbps")
    add_run_options(ap)
    a = ap.parse_args(argv)
    check_run_options(a)
    swap = _profile_swaps(a.profile)
    files = scenario_files(a.name)
    for o in a.only:
        if not any(o in f.name for f in files):
            raise InputError("command line", "--only",
                             f"part of the name of a scenario of {a.name} "
                             f"({', '.join(f.stem for f in files)}), got {o!r}")
    if a.only:
        files = [f for f in files if any(o in f.name for o in a.only)]
    raws = {f: load_raw(f) for f in files}
    sizes = sorted({s for raw in raws.values() for s in (raw.get("sizes") or {})})
    if a.size != "full" and a.size not in sizes:
        raise InputError("command line", "--size",
                         f"full or a size the scenarios define ({', '.join(sizes) or 'none'}), "
                         f"got {a.size!r}")
    if a.size != "full":
        # A scenario without that size runs at full size: say so before anything runs
        # (a full-size scenario can take many times as long as the quick look asked for).
        lacking = [f.stem for f, raw in raws.items() if a.size not in (raw.get("sizes") or {})]
        if lacking:
            print(f"rnicsim reproduce: warning: {', '.join(lacking)} define no size "
                  f"{a.size!r} and run at full size (leave them out with --only)",
                  file=sys.stderr)
    used = sorted({_nic_profile(raw) for raw in raws.values()})
    for name in swap:
        if name not in used:
            raise InputError("command line", "--profile",
                             f"no scenario of this paper{' selected by --only' if a.only else ''}"
                             f" uses profile {name!r}; they use {', '.join(used)}")
    # Every scenario is loaded and the output checked before the first one runs.
    scenarios = []
    for f, raw in raws.items():
        ov = [f"run.size={a.size}"] if a.size in (raw.get("sizes") or {}) else []
        nic = _nic_profile(raw)
        if nic in swap:
            ov.append(f"cluster.nic.profile={swap[nic]}")
        try:
            scenarios.append((f, load_scenario(f, ov + a.set)))
        except InputError as e:
            if not a.set:
                raise
            raise InputError(e.source, e.key, f"{e.expected} (with --set "
                             f"{' '.join(a.set)})") from e
    out_root = check_out_dir(a.out or f"out/reproduce/{a.name}")
    for _f, sc in scenarios:
        if (out_root / sc.name).exists() and not (out_root / sc.name).is_dir():
            raise InputError("command line", "--out",
                             f"a directory for {sc.name}/ ({out_root / sc.name} is a file)")
        RunStore(out_root / sc.name).check(a.resume, a.force)
    from .runner import PointsFailed, run_scenario

    results = []
    figures: list[tuple[str, str, list[str]]] = []
    failed = []
    with closing(open_run_pool(a)) as pool:
        for f, sc in scenarios:
            try:
                summary = run_scenario(sc, out_root / sc.name, progress=not a.quiet,
                                       source=str(f), pool=pool, resume=a.resume,
                                       force=a.force)
            except PointsFailed as e:
                # The other scenarios still run; this one's claims are left out.
                print(f"rnicsim reproduce: error: {sc.name}: {e}", file=sys.stderr)
                failed.append(sc.name)
                continue
            for c in summary["claims"]:
                c = dict(c, scenario=sc.name)
                results.append(c)
            figures.append((sc.name, str(f.relative_to(SCENARIO_ROOT.parent)),
                            summary.get("plots", [])))
    records = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in r.items()} for r in results]
    if a.json:
        print(json.dumps(records, indent=1))
    else:
        for title, group in _groups(results):
            print(f"{title}:")
            for line in claim_table(group):
                print("  " + line)
            print()
        print(f"{score_line(score(results))}\nresults in {out_root}/, "
              f"report in {out_root}/report.md")
    write_report(out_root, a.name, argv, results, figures)
    from .results import atomic_write

    atomic_write(out_root / "summary.json", json.dumps(
        {"paper": a.name, "size": a.size, "score": score(results),
         "score_line": score_line(score(results)), "claims": records}, indent=1) + "\n")
    if failed:
        print(f"rnicsim reproduce: error: points of {', '.join(failed)} failed (above); "
              "their claims are not checked", file=sys.stderr)
        return 1
    return 0


# The claim tables, in this order: evidence first, fitted numbers apart.
_ROLES = (("validation", "Validation checks (nothing was fitted to these numbers)"),
          ("calibration", "Calibration checks (a parameter was fitted to these numbers; "
                          "they hold by construction and are not scored)"))


def _groups(results: list[dict]) -> list[tuple[str, list[dict]]]:
    """(title, records) of each role that has checks, validation first."""
    return [(title, [r for r in results if r.get("role") == role]) for role, title in _ROLES
            if any(r.get("role") == role for r in results)]


def write_report(out_root: Path, name: str, argv: list[str], results: list[dict],
                 figures: list[tuple[str, str, list[str]]]) -> None:
    """``out_root/report.md`` of paper ``name``: the command (``argv``, the arguments of
    ``rnicsim reproduce``), the tally and the claim table, then per scenario (name, file,
    plot files relative to its folder) a table with its checks beside its figures. Links
    are relative to ``out_root``, so the folder can be moved or shared whole."""
    import shlex

    from .results import atomic_write

    command = shlex.join(["rnicsim", "reproduce", *argv])
    lines = [f"# Reproduction: {name}", "", f"`{command}`", "",
             f"{score_line(score(results))}."]
    for title, group in _groups(results):
        lines += ["", f"## {title}", ""] + claim_markdown(group)
    if not results:
        lines += ["", "No claim checks ran."]
    for sc_name, src, plots in figures:
        mine = [r for r in results if r.get("scenario") == sc_name]
        cells = [claim_cells(r) for r in mine]
        checks = "<br>".join(f"**{c['claim']}** {c['result']}"
                             f"{': ' + c['measured'] if c['result'] != c['measured'] else ''}"
                             f" ({c['kind']} {c['test']})" for c in cells) or "no checks"
        figs = "<br>".join(f"[![{p}]({sc_name}/{p})]({sc_name}/{p})" for p in plots) \
            or "no plots"
        lines += ["", f"## Scenario {sc_name}", "", f"Scenario `{src}`; results in [{sc_name}/]"
                  f"({sc_name}/).", "", "| checks | figures |", "| --- | --- |",
                  f"| {checks} | {figs} |"]
    atomic_write(out_root / "report.md", "\n".join(lines) + "\n")


def _profile_swaps(items: list[str]) -> dict[str, str]:
    """``NAME=FILE`` arguments -> {NAME: FILE}; each FILE must load as a profile."""
    from .profile import load_profile

    out: dict[str, str] = {}
    for it in items:
        name, sep, path = it.partition("=")
        if not sep or not name or not path:
            raise InputError("command line", "--profile", f"NAME=FILE, got {it!r}")
        try:
            load_profile(name)
        except InputError:
            raise InputError("command line", "--profile",
                             f"NAME a shipped profile (the one the scenarios name), "
                             f"got {name!r}") from None
        load_profile(path)          # raises InputError naming the file and the key
        out[name] = str(Path(path).resolve())
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
