"""benchmarks/scale.py: one point reports what its doc says (no wall-clock assertions:
the times are of a shared machine)."""
from __future__ import annotations

import pytest

from benchmarks import scale


@pytest.mark.parametrize("workload, topo", [("read", "single"), ("smallbank", "leafspine")])
def test_one_point_reports_counts_and_rates(workload, topo):
    r = scale.one(workload, topo, 4, threads=1, coros=2)
    assert r["workload"] == workload and r["topology"] == topo and r["nodes"] == 4
    if workload == "read":
        assert r["qps"] == 2 * 1 * 4 * 3          # a QP pair per thread and ordered pair
        assert r["sim_us"] == 30.0
    else:
        assert r["leaves"] == 2
        assert r["sim_us"] == 40.0
    assert r["work"] > 0 and r["events"] > 0
    for k in ("setup_s", "run_s", "events_per_s", "work_per_s", "simpy_timeouts_per_s",
              "efficiency", "work_eff", "setup_rss_mb", "peak_rss_mb"):
        assert r[k] >= 0
    assert len(scale.table([r]).splitlines()) == 2


def test_leaf_spine_sizes():
    assert scale.topology("single", 400) == {"kind": "single_switch"}
    t = scale.topology("leafspine", 400)
    assert (t["leaves"], t["spines"]) == (25, 12)
    assert scale.topology("leafspine", 16)["leaves"] == 2
