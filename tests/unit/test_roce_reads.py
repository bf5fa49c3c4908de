"""workloads/roce_reads.py: the RoCE cluster configuration paper's remote-read methods,
small and fast."""
from pathlib import Path

import pytest

from rnicsim.errors import InputError
from rnicsim.profile import load_profile
from rnicsim.scenario import load_scenario
from workloads.roce_reads import METHODS, RemoteReadSpec, run_remote_reads

ROCE = Path(__file__).resolve().parents[2] / "scenarios" / "roce"


@pytest.fixture(scope="module")
def roce():
    return load_profile("cx3-roce-10g").with_overrides({"link.mtu": 4096})


def _lat(prof, method, payload=64, hogs=0, measure=200_000.0):
    r = run_remote_reads(prof, RemoteReadSpec(method=method, payload=payload, clients=1,
                                              server_procs=1, window=1,
                                              cpu_hogs_per_core=hogs),
                         warmup_ns=20_000, measure_ns=measure)
    assert r["throughput_mops"] > 0, method
    return r


@pytest.mark.parametrize("method", METHODS)
def test_every_method_completes_objects(roce, method):
    """Each method fetches objects, small and beyond the inline limit."""
    for payload in (64, 1024):
        r = _lat(roce, method, payload)
        assert r["lat_mean_us"] > 0


def test_pointer_chasing_costs_one_round_trip_per_read(roce):
    """READ-Intr-k takes k dependent READs: k times the single READ's latency (+-5%)."""
    one = _lat(roce, "read_intr")["lat_mean_us"]
    for k in (2, 3, 4):
        assert _lat(roce, f"read_intr_{k}")["lat_mean_us"] / one == pytest.approx(k, rel=0.05)


def test_interrupts_add_their_latency_to_a_read(roce):
    """READ-Intr minus READ-Poll is the interrupt path the profile says (+-5%)."""
    h = roce.host
    diff = _lat(roce, "read_intr")["lat_mean_us"] - _lat(roce, "read_poll")["lat_mean_us"]
    # ... plus the CQ re-arm doorbell (ibv_req_notify_cq) before the poll
    expect = (h.interrupt_latency - h.poll_detect + h.interrupt_cpu + h.mmio) / 1e3
    assert diff == pytest.approx(expect, rel=0.05)


def test_a_hog_doubles_the_mean_latency_of_a_busy_poller(roce):
    """Sharing the core round robin, a poller waits one hog slice per own slice: mean ~2x."""
    base = _lat(roce, "read_poll")["lat_mean_us"]
    hog = _lat(roce, "read_poll", hogs=1, measure=200e6)
    assert hog["lat_mean_us"] / base == pytest.approx(2.0, rel=0.15)
    assert hog["lat_p50_us"] == pytest.approx(base, rel=0.05)   # most finish in a slice
    assert hog["cpu_client"] == 0.5


def test_a_hog_costs_a_woken_reader_the_wakeup_latency(roce):
    """READ-Intr with a hog on every core is slower by the wake-up latency exactly."""
    base = _lat(roce, "read_intr")["lat_mean_us"]
    hog = _lat(roce, "read_intr", hogs=1, measure=2e6)["lat_mean_us"]
    assert hog - base == pytest.approx(roce.host.wakeup_latency / 1e3, rel=0.02)


def test_background_flow_starves_reads_on_the_same_nic(roce):
    """A 4 MiB WRITE flow from the server holds its egress: READ throughput collapses."""
    def mops(bg):
        return run_remote_reads(roce, RemoteReadSpec(method="read_intr", clients=4,
                                                     server_procs=2, window=4,
                                                     background_flows=bg),
                                warmup_ns=200e3, measure_ns=4e6)["throughput_mops"]
    assert mops(1) < 0.5 * mops(0)


def test_per_packet_arbitration_shares_the_egress_round_robin(roce):
    """With per-packet arbitration (the what-if of scenarios/roce/whatif_fair_share.yaml)
    the same 4 MiB flow no longer starves the reads (bound by their 16 outstanding, 1.59
    M/s alone; each round adds one 4 KiB bulk packet, 3.3 us, to their wait: 0.98 M/s,
    against 0.004 with per-message arbitration) and takes most of the wire left to it,
    and the two together never carry more than the link (the bulk goodput counts whole
    messages: 4 of 4 MiB in the 16 ms window)."""
    pkt = roce.with_overrides({"nic.tx_arbitration": "packet"})
    spec = dict(method="read_intr", clients=4, server_procs=2, window=4)
    window = 16e6
    alone = run_remote_reads(pkt, RemoteReadSpec(**spec), warmup_ns=200e3,
                             measure_ns=window)
    both = run_remote_reads(pkt, RemoteReadSpec(**spec, background_flows=1),
                            warmup_ns=200e3, measure_ns=window)
    rate = roce.link.rate / 1e9                                   # [Gb/s]
    reads_gbps = both["throughput_mops"] * 1e6 * (64 + 86) * 8 / 1e9  # RoCEv2 framing
    assert both["throughput_mops"] > 0.5 * alone["throughput_mops"]
    assert both["background_gbps"] > 0.5 * rate
    assert reads_gbps + both["background_gbps"] <= rate * 1.02


def test_same_seed_same_results(roce):
    """Two runs with one seed agree exactly, hogs included."""
    spec = dict(method="write_send_poll", clients=2, server_procs=2, window=2,
                cpu_hogs_per_core=1)
    a = run_remote_reads(roce, RemoteReadSpec(**spec), warmup_ns=1e4, measure_ns=3e6)
    b = run_remote_reads(roce, RemoteReadSpec(**spec), warmup_ns=1e4, measure_ns=3e6)
    assert a == b


def test_unknown_method_is_an_input_error():
    """A misspelt method names the key path and the allowed methods."""
    with pytest.raises(InputError, match=r"workload\.method.*read_intr"):
        load_scenario(ROCE / "fig1_latency.yaml", ["workload.method=read_int"])


def test_more_clients_than_nodes_is_an_input_error():
    """clients must leave a node for the server."""
    with pytest.raises(InputError, match=r"workload\.clients.*at most cluster\.nodes - 1"):
        load_scenario(ROCE / "fig2_throughput.yaml", ["workload.clients=17"])


def test_bad_rdma_mtu_is_an_input_error():
    """The RDMA MTU is one of the IB path MTUs."""
    with pytest.raises(InputError, match=r"workload\.rdma_mtu"):
        load_scenario(ROCE / "jumbo_frames.yaml", ["workload.rdma_mtu=9000"])
