"""``rnicsim rdmc-schedule``: print an RDMC block schedule.

    rnicsim rdmc-schedule --algorithm NAME -n NODES -k BLOCKS [--json] [--rack-size R]

Text output: a header line, then one line per step, ``step 2: 0->1 b1, 2->3 b1, 3->2 b0``
(sender->receiver and block). ``--json`` prints one object instead, exactly
``{"algorithm": A, "nodes": n, "blocks": k, "steps": [[[sender, receiver, block], ...], ...]}``.
Bad arguments raise :class:`rnicsim.errors.InputError` naming the flag (the dispatcher in
:mod:`rnicsim.cli` prints it and exits 2); ``--help`` prints the usage and returns 0.

Size limit: a schedule has (n - 1) x k block transfers (every receiver gets every block
once) and at most that many steps; the command refuses more than :data:`MAX_TRANSFERS`
(1,000,000: about 200 MB of memory, 17 MB of JSON and a second) instead of being killed for
lack of memory. The Python API (:func:`protocols.rdmc.schedules.schedule`) has no limit.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import NoReturn, Sequence

from rnicsim.errors import InputError

from . import schedules

_SOURCE = "command line"
MAX_TRANSFERS = 1_000_000
"""Largest schedule the command prints, in block transfers ((n - 1) x k)."""
_SHOWN_FLAGS = ("--algorithm", "-n", "-k", "--rack-size", "--json", "--help")
"""How errors name each option: as the usage line spells it."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are :class:`InputError` instead of ``SystemExit(2)``."""

    def error(self, message: str) -> NoReturn:
        m = re.match(r"argument (\S+): (.*)", message)
        if m:
            flags = m.group(1).split("/")
            flag = next((f for f in flags if f in _SHOWN_FLAGS), flags[0])
            raise InputError(_SOURCE, flag, m.group(2))
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            raise InputError(_SOURCE, m.group(1), "no such argument (see 'rnicsim rdmc-schedule --help')")
        raise InputError(_SOURCE, "", message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:  # pragma: no cover
        raise InputError(_SOURCE, "", (message or "invalid arguments").strip())


class _Once(argparse.Action):
    """Store an option's value; refuse the option a second time (the first value would be
    silently dropped otherwise)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        if getattr(namespace, self.dest) is not None:
            flag = next((f for f in self.option_strings if f in _SHOWN_FLAGS),
                        self.option_strings[0])
            raise InputError(_SOURCE, flag, f"given once, got {getattr(namespace, self.dest)!r} "
                             f"and then {values!r}")
        setattr(namespace, self.dest, values)


def _parser() -> _Parser:
    p = _Parser(
        prog="rnicsim rdmc-schedule",
        description="Print the block schedule of an RDMC multicast: per step, which node "
        "sends which block to whom. Node 0 is the root and holds every block at the start. "
        f"At most {MAX_TRANSFERS:,} block transfers ((n-1) x k).",
        add_help=False,
    )
    p.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    p.add_argument("-a", "--algorithm", metavar="NAME", action=_Once, help="one of " + ", ".join(schedules.ALGORITHMS))
    p.add_argument("-n", "--nodes", metavar="NODES", action=_Once, help="group size including the root (>= 1)")
    p.add_argument("-k", "--blocks", metavar="BLOCKS", action=_Once, help="number of blocks (>= 1)")
    p.add_argument("--rack-size", metavar="R", action=_Once, help=f"nodes per rack, hybrid only (default {schedules.DEFAULT_RACK_SIZE})")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def _positive_int(value: str | None, flag: str, what: str) -> int:
    if value is None:
        raise InputError(_SOURCE, flag, f"a value: {what} (required)")
    # Plain ASCII digits only: int() would also take "1_000", " 3" and non-ASCII digits.
    number = int(value) if re.fullmatch(r"[0-9]+", value) else 0
    if number < 1:
        raise InputError(_SOURCE, flag, f"an integer >= 1 ({what}), got {value!r}")
    return number


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def format_steps(steps: schedules.Schedule) -> list[str]:
    """Text lines for a schedule: ``step j: s->r bB, ...`` (``-`` for an idle step)."""
    return [
        f"step {j}: " + (", ".join(f"{s}->{r} b{b}" for s, r, b in step) or "-")
        for j, step in enumerate(steps)
    ]


def main(argv: Sequence[str]) -> int:
    """Run the command; return the exit code (0). Bad arguments raise :class:`InputError`."""
    parser = _parser()
    args = parser.parse_args(list(argv))
    if args.help:
        parser.print_help()
        return 0
    names = ", ".join(schedules.ALGORITHMS)
    if args.algorithm is None:
        raise InputError(_SOURCE, "--algorithm", f"one of {names} (required)")
    if args.algorithm not in schedules.ALGORITHMS:
        raise InputError(_SOURCE, "--algorithm", f"one of {names}, got {args.algorithm!r}")
    nodes = _positive_int(args.nodes, "-n", "group size including the root")
    blocks = _positive_int(args.blocks, "-k", "number of blocks")
    if (nodes - 1) * blocks > MAX_TRANSFERS:
        raise InputError(_SOURCE, "-n/-k", f"a schedule of at most {MAX_TRANSFERS:,} block "
                         f"transfers ((n-1) x k); -n {nodes} -k {blocks} has "
                         f"{(nodes - 1) * blocks:,}")
    opts: dict[str, int] = {}
    if args.rack_size is not None:
        if args.algorithm != "hybrid":
            raise InputError(_SOURCE, "--rack-size", "only with --algorithm hybrid")
        opts["rack_size"] = _positive_int(args.rack_size, "--rack-size", "nodes per rack")

    try:
        steps = schedules.schedule(args.algorithm, nodes, blocks, **opts)
    except ValueError as e:  # pragma: no cover - the checks above come first
        raise InputError(_SOURCE, "", str(e)) from e

    out = sys.stdout
    if args.json:
        doc = {"algorithm": args.algorithm, "nodes": nodes, "blocks": blocks, "steps": steps}
        out.write(json.dumps(doc) + "\n")
        return 0
    header = f"{args.algorithm}: {_plural(nodes, 'node')}, {_plural(blocks, 'block')}"
    if args.algorithm == "hybrid":
        header += f", rack size {opts.get('rack_size', schedules.DEFAULT_RACK_SIZE)}"
    out.write(f"{header}, {_plural(len(steps), 'step')}\n")
    for line in format_steps(steps):
        out.write(line + "\n")
    return 0
