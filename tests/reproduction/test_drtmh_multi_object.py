"""DrTM+H fig. 6 multi-object micro-benchmark: the qualitative D9 findings.

The default run checks the write workload of ``fig6_multi_object.yaml`` at its ``demo``
size (4 nodes) with 20 us windows; ``make test-all`` (marker ``repro``) runs the whole demo
sweep. Asserted are the findings the model reproduces at that size (see the scenario's
``expected:`` block for every D9 check, including those the model misses at this size):

- coroutines multiply the throughput of both primitives (published 7x and 6.46x);
- passive ACK helps two-sided writes more than one-sided ones, and one-sided ones by
  1.13x within 10% (the completer's share of a signaled WRITE, ``nic.completer.write``,
  is fitted to that gain; fig. 5a fixes only the sum of a WRITE's NIC work);
- without passive ACK one-sided writes beat two-sided at every step; with it two-sided
  wins (the only case, sec. 4.2).

Known gap, asserted as a gap (it fails when it closes, to update this note): passive
ACK gives two-sided writes about 1.7x, not 1.96x. The model's UD RPC of a 64-B object is
PCIe-bound there (about 60 M requests/s per NIC: a 128-B UD WQE and the 80-B payload read by DMA, the
payload write and a CQE, about 265 B of TLPs down and 225 B up per request). A PCIe
that let a TLP queued more than one TLP behind others pass unbooked would carry more
than its rate and give 2.19x (docs/model.md, PCIe).
"""
import os
from pathlib import Path

import pytest

from rnicsim.runner import run_points
from rnicsim.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "drtmh" / "fig6_multi_object.yaml"


def _rows(overrides: list[str]) -> dict[tuple[str, str, int], float]:
    sc = load_scenario(SCENARIO, ["run.size=demo", *overrides])
    rows = run_points(sc, jobs=min(2, os.cpu_count() or 1), progress=False)
    return {(r["workload.op"], r["workload.primitive"], int(r["step"])):
            r["throughput_mtxns_per_node"] for r in rows}


def _check_writes(t: dict) -> None:
    one = {s: t[("write", "one_sided", s)] for s in range(5)}
    two = {s: t[("write", "two_sided", s)] for s in range(5)}
    assert one[1] / one[0] > 3 and two[1] / two[0] > 3, (one, two)      # coroutines
    pa_two, pa_one = two[4] / two[3], one[4] / one[3]
    assert pa_two > pa_one >= 1.0, (pa_two, pa_one)
    assert pa_one == pytest.approx(1.13, rel=0.1), pa_one             # D9: 1.13x
    for s in range(4):
        assert one[s] > two[s], (s, one[s], two[s])                   # one-sided wins
    assert two[4] > one[4], (two[4], one[4])                          # D9: two wins with PA
    # Known gap (module doc): PCIe caps the two-sided passive-ACK step.
    assert pa_two < 1.96 * 0.9, pa_two                                # D9: 1.96x


def test_fig6_writes_qualitative_findings():
    """The write half of fig. 6 at demo size (4 nodes, 2 NICs, 24 threads)."""
    _check_writes(_rows(["sweep.workload.op=[write]", "run.warmup=20us",
                         "run.measure=20us"]))


@pytest.mark.repro
def test_fig6_demo_qualitative_findings():
    """The whole fig. 6 sweep at demo size: the write findings, and coroutines multiply
    one-sided READ throughput."""
    t = _rows([])
    _check_writes(t)
    assert t[("read", "one_sided", 1)] / t[("read", "one_sided", 0)] > 3
    assert t[("read", "one_sided", 0)] > t[("read", "two_sided", 0)]
