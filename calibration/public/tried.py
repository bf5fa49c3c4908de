"""Run the profiles on the set-ups of the public measurements in this folder.

Usage (from the repository root): ``python -m calibration.public.tried [--profile cx4-edr]``

Each row prints the public number, the simulated one and their ratio; README.md says which
model parameter and which open gap each row informs. The set-ups map onto the
microbenchmark (``workloads.microbench``) as the rows' ``setup`` fields describe them:

- rc-swarm (``rdma_bench_rc_swarm_connectib.csv``): 6 machines x 14 threads, all-to-all
  32-B READs, window 24 per thread; rc-swarm's machines x VMs QPs per thread are the
  simulated 5 peers x ``qps_per_peer`` (as ``tests/reproduction/test_rc_swarm_cx3.py``).
- DC incast (``fasst_dct_bench_connectib.yaml``): 10 clients x 14 threads READ 32 B from
  one server, 1 or 16 QPs per thread; the simulated QPs are RC (the model has no DC
  transport), about 3 READs outstanding per thread (32 per machine).
- UD posting (``rdma_bench_doorbell_batching.yaml``, ``fasst_dct_bench_connectib.yaml``'s
  ud-sender remark): one thread sends 32-B UD SENDs, 64 outstanding, one doorbell per SEND
  or per list of 16.

The public NICs are Connect-IB (mlx5, the generation before ConnectX-4), so a ratio far
from 1 is evidence about the mechanism (how a context miss costs), not a number to fit
``cx4-edr`` to.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

from rnicsim.profile import load_profile
from workloads.microbench import MicrobenchSpec, run_microbench

HERE = Path(__file__).resolve().parent


def _swarm_measured() -> dict[int, float]:
    """{VMs per machine: mean per-machine M READs/s} of the 6-machine 32-B sweep, window 24."""
    rows = (line for line in (HERE / "rdma_bench_rc_swarm_connectib.csv").read_text().splitlines()
            if not line.startswith("#"))
    out = {}
    for r in csv.DictReader(rows):
        if (r["file"] == "netapp-allsig-32b_reads-6_machines-varnum_vms"
                and r["window"] == "24"):
            out[int(r["vms_per_machine"])] = float(r["read_rate_mops_mean"])
    return out


def _row(name: str, measured: float, simulated: float) -> None:
    print(f"{name:58s} {measured:8.2f} {simulated:8.2f} {simulated / measured:6.2f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cx4-edr")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="profile override, e.g. nic.qpc_miss_stall=true")
    args = ap.parse_args(argv)
    prof = load_profile(args.profile)
    if args.set:
        import yaml
        prof = prof.with_overrides({k: yaml.safe_load(v) for k, v in
                                    (s.split("=", 1) for s in args.set)})
    print(f"{'set-up (public source)':58s} {'public':>8s} {'model':>8s} {'ratio':>6s}")

    swarm = _swarm_measured()
    for vm in (1, 3, 9, 15):
        spec = MicrobenchSpec(verb="read", payload=32, threads=14, outstanding=24,
                              qps_per_peer=vm)
        sim = run_microbench(prof, spec, nodes=6, nics_per_node=1)["throughput_mops"]
        _row(f"rc-swarm CIB 32-B READ, {84 * vm} QPs/NIC [M/s per machine]", swarm[vm], sim)

    for qps, measured in ((1, 94.6), (16, 20.1)):
        spec = MicrobenchSpec(verb="read", payload=32, mode="client_server", servers=1,
                              threads=14, outstanding=3, qps_per_peer=qps)
        sim = run_microbench(prof, spec, nodes=11, nics_per_node=1)["throughput_mops_total"]
        _row(f"DC incast CIB, {140 * qps} contexts at the target [M/s]", measured, sim)

    for batch, measured, what in ((1, 10.0, "ud-sender, no batching (> 10)"),
                                  (16, 17.6, "ws-sequencer 1 core, batching")):
        spec = MicrobenchSpec(verb="send", transport="ud", payload=32, mode="client_server",
                              servers=1, threads=1, outstanding=64, doorbell_batch=batch,
                              signal_every=batch)
        sim = run_microbench(prof, spec, nodes=2, nics_per_node=1)["throughput_mops_total"]
        _row(f"UD SENDs of one thread, {what} [M/s]", measured, sim)


if __name__ == "__main__":
    main()
