"""The ``rnicsim`` command line.

Subcommands: ``run``, ``trace``, ``validate``, ``profiles``, ``perftest``, ``compare``,
``reproduce``, ``rdmc-schedule``, ``check-history``, ``hybrid-search``, ``calibrate``. Bad
input exits 2 with a message naming the file, key path and what was expected (see
:mod:`rnicsim.errors`).

Commands that belong to protocol or calibration packages are imported lazily, inside
their handler, so the kernel never imports the layers below it at import time.
"""
from __future__ import annotations

import sys
from typing import Callable, Sequence

from .errors import InputError, did_you_mean

USAGE = """usage: rnicsim COMMAND [ARGS]     rnicsim --version

commands:
  run FILE --out DIR [--set a.b=v]... [--seed N] [--jobs N | --scheduler tcp://H:P|local:N]
      [--resume | --force] [--quiet]
                                   run a scenario, write results and plots
  trace [--nic PROFILE] [--verb read|write|send|cas|faa] [--payload SIZE] [--out F.json]
      [--pcap F.pcap] [--cold]     one verb's timeline: a table [ns], a Perfetto trace
  validate FILE... [--set a.b=v]   check scenario files
  profiles [NAME|PATH] [--json]    list NIC profiles or show one with its sources
  perftest TOOL [perftest flags] [--nic PROFILE] [--set section.param=v]
                                   perftest on two simulated hosts
  compare MEASURED.txt [--nic PROFILE] [--set section.param=v]
                                   real perftest output beside the same test simulated
  reproduce NAME [--size S] [--only SCENARIO]... [--jobs N | --scheduler S] [--out DIR]
                 [--resume | --force] [--json] [--profile NAME=FILE]... [--set a.b=v]...
                 [--quiet]
                                   reproduce a paper's claims (drtmh, roce, rdmc, rcc)
  rdmc-schedule --algorithm A -n N -k K [--rack-size R] [--json]
                                   print an RDMC block schedule
  check-history FILE               check a history for serializability
  hybrid-search SCENARIO [--protocol P]... [--greedy] [--size S] [--set a.b=v]...
      [--out DIR] [--jobs N | --scheduler S] [--resume | --force] [--quiet]
                                   rank every per-stage verbs choice of an RCC protocol
  calibrate INPUT... --base P --out F --report D
                                   fit a profile to measurements

'rnicsim COMMAND --help' describes one command.
"""


def _lazy(module: str, func: str = "main") -> Callable[[Sequence[str]], int]:
    def run(argv: Sequence[str]) -> int:
        import importlib

        return importlib.import_module(module).__dict__[func](list(argv))

    return run


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "run": _lazy("rnicsim.commands", "cmd_run"),
    "validate": _lazy("rnicsim.commands", "cmd_validate"),
    "trace": _lazy("rnicsim.trace", "cmd_trace"),
    "profiles": _lazy("rnicsim.commands", "cmd_profiles"),
    "perftest": _lazy("workloads.perftest", "main"),
    "compare": _lazy("calibration.compare", "main"),
    "reproduce": _lazy("rnicsim.reproduce", "main"),
    "rdmc-schedule": _lazy("protocols.rdmc.schedule_cli", "main"),
    "check-history": _lazy("protocols.txn.history", "main"),
    "hybrid-search": _lazy("protocols.txn.hybrid_search", "main"),
    "calibrate": _lazy("calibration.fit", "main"),
}


def version() -> str:
    """The installed package's version (its metadata, set in pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("rnicsim")
    except PackageNotFoundError:      # run from a source tree that was never installed
        return "unknown (not installed; pip install -e .)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rnicsim`` console script; returns the exit code."""
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # output piped into head & co.
        try:
            sys.stdout = open("/dev/null", "w")
        except OSError:
            pass
        return 0


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"rnicsim {version()}")
        return 0
    cmd, rest = args[0], args[1:]
    if cmd not in COMMANDS:
        hint = did_you_mean(cmd, list(COMMANDS))
        print(f"rnicsim: unknown command {cmd!r}{f' ({hint})' if hint else ''}\n\n{USAGE}",
              file=sys.stderr)
        return 2
    try:
        code = COMMANDS[cmd](rest)
    except InputError as e:
        print(f"rnicsim {cmd}: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        print(f"rnicsim {cmd}: this command is not available yet ({e.name})", file=sys.stderr)
        return 2
    except SystemExit as e:     # argparse's --help (0); a command's own sys.exit
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 1
        return int(e.code or 0)
    except KeyboardInterrupt:
        print(f"rnicsim {cmd}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
