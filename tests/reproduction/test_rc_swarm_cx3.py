"""``cx3-fdr`` against rdma_bench's rc-swarm sweep on ConnectX-3 FDR (CloudLab apt).

``../shared/reference-data/rdma_bench_rc_swarm/osdi__apt-allsig-32b_reads-6_machines-
varnum_vms.txt``: 6 machines, 8 workers each, every worker READs 32 B over one RC QP to
each of the 6 x ``VM_PER_MACHINE`` (virtual) machines, so a NIC holds 48 x VM QPs. The
per-machine rate falls from ~11 M/s (1 VM, the ``varsize`` file) to ~3 M/s at 3 VMs: the
QP contexts no longer fit the NIC's cache, and a miss holds the processing unit that
needs it (``nic.qpc_miss_stall``). The simulated swarm is the microbenchmark's all-to-all
READ mode on 6 nodes x 8 threads with 16 outstanding per thread; its 5 peers per thread
x ``qps_per_peer`` QPs stand for the 6 x VM of rc-swarm.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rnicsim.profile import load_profile
from workloads.microbench import MicrobenchSpec, run_microbench

REF = (Path(__file__).resolve().parents[2].parent / "shared" / "reference-data"
       / "rdma_bench_rc_swarm")


def _swarm(name: str) -> dict[tuple[int, int, int], float]:
    """{(size, VMs per machine, window): mean per-machine M ops/s} of an rc-swarm file."""
    out: dict[tuple[int, int, int], list[float]] = {}
    cfg: dict[str, int] = {}
    for line in (REF / name).read_text().splitlines():
        m = re.match(r"#define (\w+) (\d+)", line)
        if m:
            cfg[m.group(1)] = int(m.group(2))
            continue
        m = re.match(r"Machine \d+ average: ([\d.]+) M/s", line)
        if m:
            key = (cfg["SIZE"], cfg["VM_PER_MACHINE"], cfg["WINDOW_SIZE"])
            out.setdefault(key, []).append(float(m.group(1)))
    return {k: sum(v) / len(v) for k, v in out.items()}


@pytest.mark.skipif(not REF.is_dir(), reason="needs ../shared/reference-data")
def test_cx3_read_rate_collapses_past_the_qp_cache_as_rc_swarm_measured():
    """Tripling the QPs per NIC (48 -> 144 measured, 40 -> 120 simulated) cuts the READ
    rate by more than half on the real NIC; the model must lose at least half of it too,
    and start within 15% of the measured rate with few QPs."""
    few = _swarm("osdi__apt-allsig-varsize_reads-6_machines-1_vm.txt")[(40, 1, 16)]
    many = _swarm("osdi__apt-allsig-32b_reads-6_machines-varnum_vms.txt")[(32, 3, 16)]
    assert few == pytest.approx(10.98, abs=0.01) and many == pytest.approx(3.11, abs=0.01)
    prof = load_profile("cx3-fdr")
    rate = {}
    for v in (1, 3):
        spec = MicrobenchSpec(verb="read", payload=32, threads=8, outstanding=16,
                              qps_per_peer=v)
        rate[v] = run_microbench(prof, spec, nodes=6, nics_per_node=1)["throughput_mops"]
    assert rate[1] == pytest.approx(few, rel=0.15)
    assert rate[3] < 0.5 * rate[1], rate
