"""Speed of a large RDMC multicast: 256 MiB to 512 nodes in 1 MiB blocks (issue 4's target).

Prints one JSON object with wall and CPU seconds, heap events and the simulated completion
time, for the binomial pipeline on the ``sierra`` testbed's topology (``--topology
single_switch`` or ``fat_tree`` to choose). ``--set section.param=value`` overrides a
parameter of the cx4-edr profile (e.g. ``switch.interleave_segment=0`` for whole
messages at switch ports). Usage: ``python benchmarks/rdmc_scale.py [--nodes 512]
[--mib 256] [--set KEY=VALUE]...``.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocols.rdmc.study import MiB, speed  # noqa: E402
from rnicsim.profile import load_profile  # noqa: E402
from rnicsim.scenario import parse_override  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--block-kib", type=int, default=1024)
    ap.add_argument("--topology", default=None,
                    help="single_switch or fat_tree (default: the sierra testbed's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile parameter, e.g. switch.interleave_segment=0")
    a = ap.parse_args(argv)
    prof = load_profile("cx4-edr")
    if a.set:
        prof = prof.with_overrides(dict(parse_override(x) for x in a.set), "--set")
    r = speed(a.nodes, a.mib * MiB, a.block_kib * 1024, topology=a.topology, profile=prof)
    r.pop("profile", None)
    r["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
