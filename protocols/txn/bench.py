"""Transaction benchmark runner: builds a cluster, store and protocol, runs a workload.

:func:`build` wires everything for one point (used by tests too); :func:`run_txn_bench`
runs the measured window and returns the metrics; :func:`run_scenario_point` is the
runner of the ``txn`` workload kind (see :mod:`protocols.txn.scenario_kinds`).

Metrics
    ``throughput_mtxns`` (committed transactions per second in the cluster [M/s]),
    ``throughput_mtxns_per_node``, ``lat_p50_us``/``lat_p90_us``/``lat_p99_us`` (first
    attempt to commit, retries included), ``abort_rate`` (aborted attempts / all
    attempts), ``abort_rate_<cause>`` (the share of attempts aborted by each cause of
    :data:`protocols.txn.api.CAUSES`), ``round_trips_per_txn`` (network round trips a
    committed transaction's attempts waited for), ``waits_per_txn`` (their wait calls as
    RCC's round-trip counter counts them: the round trips and the calls of RCC's stages
    that had nothing to wait for, :meth:`.driver.TxnSystem.empty_wait`),
    ``lat_<stage>_us`` (mean time of committing attempts in each of the protocol's
    stages: DrTM+H's ``exec``, ``validate``, ``log``, ``commit``; RCC's ``read``,
    ``lock``, ``validate``, ``renew``, ``log``, ``commit``, ``release`` as the protocol
    has them),
    ``msg_rate_mpps`` (work requests the transaction layer posted, one-sided verbs and
    RPC SENDs, per node and second [M/s]), ``cpu_util``
    (worker cores' busy share of the window), ``qpc_miss_rate`` (QP-context cache misses
    per lookup on all NICs in the window), ``committed`` (count in the window),
    ``stalled_txns`` (transactions in flight when the window closed that began before it
    opened and more than :data:`STALL_LONGEST` times the longest latency the window
    committed ago, any time ago if it committed nothing: a livelock or a deadlock), and
    the NIC-side shares of :meth:`rnicsim.cluster.Cluster.utilization_meter`
    (``nic_pu_util``, ``nic_pu_util_max``, ``pcie_util_max``, ``wire_util_max``): with
    ``cpu_util`` they say which resource bounds the run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation, long_lived_heap

from ..rpc import Mesh
from .cc import framework_costs
from .driver import (TxnSystem, abort_metrics, check_coroutines, stage_metrics,
                     type_metrics)
from .registry import make_workload, protocol
from .store import Store

# A transaction in flight for more than this many times the longest latency of the
# window's commits counts as stalled (metric stalled_txns).
STALL_LONGEST = 2.0


@dataclass
class Bench:
    """Everything of one built point (:func:`build`): the simulation, cluster, RPC mesh,
    store, protocol (``cc``) and workload, with ``threads`` per node and ``coroutines``
    per thread. Run it once with :func:`run_txn_bench`."""

    sim: Simulation
    cluster: Cluster
    mesh: Mesh
    store: Store
    cc: TxnSystem
    workload: Any
    threads: int
    coroutines: int


def build(profile, nodes: int, threads: int, workload, cfg, coroutines: int,
          nics_per_node: int = 1, seed: int = 1, qps_per_peer: int = 1,
          topology: dict | None = None, cores: int | None = None, history=None,
          kind: str = "occ") -> Bench:
    """Cluster, endpoints, store and protocol ``kind`` (configured by ``cfg``, e.g. an
    :class:`protocols.txn.occ.OccConfig`) for one point (set-up CPU not charged).

    ``workload`` has ``tables`` (a list of :class:`protocols.txn.store.Table`) and
    ``next_txn(rng, node, thread, coroutine) -> TxnSpec``; ``cpu_estimate_ns()`` [ns] is
    optional (used to stagger coroutine starts and by :func:`stretch_window`).
    ``threads`` per node and ``coroutines`` per thread must be positive integers."""
    check_coroutines(coroutines)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: a positive integer (worker threads per node), got "
                         f"{threads!r}")
    sim = Simulation(seed)
    # The whole build runs with the cyclic collector held off (rnicsim.sim): after the
    # mesh's threads x nodes^2 QPs exist, a full collection triggered by the store's or
    # the protocol's allocations rescans all of them. Results do not depend on it.
    entry = protocol(kind)
    with long_lived_heap():
        cluster = Cluster(sim, profile, nodes, nics_per_node, cores=cores,
                          topology=topology)
        mesh = Mesh(cluster, threads, cfg.rpc, rc=True, qps_per_peer=qps_per_peer,
                    in_flight=2 * coroutines + 8, loopback=cfg.costs.loopback,
                    loop_delay=cfg.costs.loop_delay)
        store = Store(cluster, workload.tables, threads, cfg.rep_factor,
                      cache_warm=getattr(cfg, "index_cache", True),
                      layout=entry.layout_of(cfg))
        cc = entry.system(mesh, store, cfg, history)
    cluster.setup_done()
    return Bench(sim, cluster, mesh, store, cc, workload, threads, coroutines)


def run_txn_bench(b: Bench, warmup_ns: float, measure_ns: float,
                  drain: bool = False, settle: bool = False,
                  min_txns: int = 0) -> dict[str, float]:
    """Run ``b`` for the warm-up and window [ns]; return the metrics (see module doc) and
    ``warmup_us`` and ``measure_us``, the warm-up and window run [us].

    With ``settle``, ``warmup_ns`` and ``measure_ns`` are lower bounds, stretched until
    the run has committed what :class:`SettleRule` asks (the window also ``min_txns``
    commits). With ``drain``, no transaction starts after the window and the run
    continues until every started one has finished (for checks on the final state).
    """
    sim = b.sim
    # Coroutines start spread over one thread-bound transaction latency (CPU and sleeps):
    # started together, a thread-bound thread's coroutines stay in lockstep for many
    # transactions and the throughput oscillates with the period of a transaction (see
    # stretch_window).
    stagger = start_stagger(b.workload, b.coroutines, b.cluster.profile.host.timer_slack)
    b.cc.start(b.workload, b.coroutines, stagger)
    rule = SettleRule.of(b, stagger, min_txns) if settle else None
    if rule is not None:
        warmup_ns = rule.warm_up(b, warmup_ns)
    sim.measure(warmup_ns, measure_ns)
    cpu = sim.cpu_meter(_cores(b))
    util = b.cluster.utilization_meter()
    at_window = {"qpc": (0, 0), "wrs": 0}   # counts when the window opens

    def posted() -> int:
        return sum(ep.tx_wrs for ep in b.mesh.endpoints.values())

    def window_opens() -> None:
        at_window["qpc"] = b.cluster.qpc_counts()
        at_window["wrs"] = posted()

    if warmup_ns <= sim.now:
        window_opens()
    else:
        sim.call_at(warmup_ns, window_opens)
    sim.run(until=warmup_ns + measure_ns)
    if rule is not None:
        measure_ns = rule.fill_window(b, warmup_ns, measure_ns)
    end = sim.now
    (l1, m1), (l0, m0) = b.cluster.qpc_counts(), at_window["qpc"]
    lookups, misses = l1 - l0, m1 - m0
    # Every metric is taken before the drain, which must not count (CPU included).
    out = metrics(b, measure_ns, end, cpu())
    out["qpc_miss_rate"] = misses / lookups if lookups else 0.0
    # A contended point's latencies have a long tail (YCSB at 99% hot picks under NO_WAIT:
    # p99 7x p50, some transactions in flight for 10x p50 and more at a demo window's
    # end, all committing in a longer one): a transaction in that tail is as old as the
    # longest ones that committed; one that never commits outgrows them as the run goes.
    lat = b.sim.stats.hist("txn_lat").samples
    longest = max(lat) if len(lat) else 0.0
    out["stalled_txns"] = float(b.cc.stalled(warmup_ns, STALL_LONGEST * longest))
    out["msg_rate_mpps"] = (posted() - at_window["wrs"]) / measure_ns * 1e3 / \
        len(b.cluster.nodes)
    out.update(util())
    out["warmup_us"] = warmup_ns / 1e3
    out["measure_us"] = measure_ns / 1e3
    if drain:
        b.cc.stop()
        sim.run()
    return out


def _cores(b: Bench) -> list:
    """The worker threads' cores (a core shared by threads listed once)."""
    return list({id(c): c for nd in b.cluster.nodes
                 for c in (nd.thread(i).core for i in range(b.threads))}.values())


def metrics(b: Bench, measure_ns: float, end_ns: float,
            cpu_util: float | None = None) -> dict[str, float]:
    """Metrics of the measured window (``measure_ns`` [ns]) of a run that ended at
    ``end_ns`` [ns]: throughputs [M/s], latencies [us] (per phase: mean per committed
    transaction), ``abort_rate`` and ``cpu_util`` [0-1], ``committed`` [count].

    ``cpu_util``: as given (:func:`run_txn_bench` measures the worker cores' mean busy
    share of the window with ``Simulation.cpu_meter``), else their share of the whole run
    up to ``end_ns``."""
    st = b.cc.stats
    h = b.sim.stats.hist("txn_lat").summary()
    n = max(1, st.committed)
    nodes = len(b.cluster.nodes)
    if cpu_util is None:
        cores = _cores(b)
        cpu_util = sum(c.busy_ns for c in cores) / max(1, len(cores)) / max(1.0, end_ns)
    tput = st.committed / measure_ns * 1e3
    return {
        "throughput_mtxns": tput,
        "throughput_mtxns_per_node": tput / nodes,
        "lat_p50_us": h["p50"] / 1e3,
        "lat_p90_us": h["p90"] / 1e3,
        "lat_p99_us": h["p99"] / 1e3,
        "abort_rate": st.aborted / max(1, st.aborted + st.committed),
        "round_trips_per_txn": st.round_trips / n,
        "waits_per_txn": (st.round_trips + st.empty_waits) / n,
        **stage_metrics(st, b.cc.STAGES, n),
        "cpu_util": min(1.0, cpu_util),
        "committed": float(st.committed),
        **abort_metrics(st),
        **type_metrics(st),
    }


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") when this point of workload kind ``txn`` cannot
    run: its transactions need a concurrency-control protocol (``protocol: {kind: occ}``,
    ``nowait``, ...), whose configuration must be valid for the point."""
    from .registry import PROTOCOLS, _load

    _load()
    kind = getattr(sc.protocol, "kind", None)
    if kind not in PROTOCOLS:
        raise ValueError(f"protocol.kind: a concurrency-control protocol "
                         f"({', '.join(sorted(PROTOCOLS))}), e.g. protocol: {{kind: occ, "
                         f"preset: drtmh}} (workload kind txn runs its transactions over "
                         f"one; a file without a protocol block gets raw_verbs), got "
                         f"{kind!r}")
    PROTOCOLS[kind].config_of(sc.protocol)
    from .registry import DECLARES_KEYS

    if kind == "calvin" and sc.workload.benchmark not in DECLARES_KEYS:
        raise ValueError(f"workload.benchmark: one whose transactions declare their keys "
                         f"({', '.join(sorted(DECLARES_KEYS))}): CALVIN schedules a "
                         f"transaction before it runs, got {sc.workload.benchmark!r}")
    w = sc.workload
    if w.benchmark == "tpcc":
        wpn = w.warehouses_per_node or sc.cluster.threads
        if w.tpcc_warehouses_per_thread > wpn:
            raise ValueError(f"workload.tpcc_warehouses_per_thread: at most the warehouses "
                             f"per node ({wpn}), got {w.tpcc_warehouses_per_thread}")


def run_scenario_point(sc, profile) -> dict[str, float]:
    """Run one point of a scenario whose workload kind is ``txn``."""
    check_scenario_point(sc, profile)
    w = sc.workload
    proto = sc.protocol
    entry = protocol(proto.kind)
    cfg = entry.config_of(proto)
    if proto.framework != "none":
        cfg = replace(cfg, costs=framework_costs(proto.framework, profile.host.clock,
                                                 cfg.costs))
    wl = make_workload(w.benchmark, w.params(), sc.cluster.nodes, sc.cluster.threads,
                       profile.host.clock, w.coroutines)
    hist = None
    if w.history:
        from .history import History

        hist = History()
    b = build(profile, sc.cluster.nodes, sc.cluster.threads, wl, cfg, w.coroutines,
              sc.cluster.nic.per_node, sc.run.seed, proto.qps_per_peer,
              sc.cluster.topology.model_dump(), sc.cluster.cores, hist, proto.kind)
    warmup, measure = stretch_window(wl, w.coroutines, sc.run.warmup, sc.run.measure,
                                     profile.host.timer_slack, w.min_txns,
                                     sc.cluster.nodes * sc.cluster.threads)
    out = run_txn_bench(b, warmup, measure, settle=True, min_txns=w.min_txns)
    if hist is not None:
        res = hist.check()
        out["serializable"] = 1.0 if res.serializable else 0.0
        out["history_txns"] = float(res.txns)
        # Files a point hands to the runner: written under points/NNN/ of the output.
        out["_files"] = {"history.jsonl": "".join(f"{ln}\n" for ln in hist.jsonl_lines())}
    return out


def thread_ns_per_txn(workload, timer_slack: float) -> float | None:
    """Time one transaction of ``workload`` holds its coordinator's thread [ns]: its CPU
    (``workload.cpu_estimate_ns()``) plus the host's ``timer_slack`` [ns] for each
    ``usleep`` it makes (``workload.sleeps_per_txn``, default 0); None for a workload
    without an estimate."""
    est = getattr(workload, "cpu_estimate_ns", None)
    if est is None:
        return None
    return est() + getattr(workload, "sleeps_per_txn", 0) * timer_slack


def start_stagger(workload, coroutines: int, timer_slack: float = 0.0) -> float:
    """The span [ns] over which a thread's coroutines start: ``coroutines`` times the
    time one transaction holds the thread (:func:`thread_ns_per_txn`); 0 for one
    coroutine or a workload without an estimate."""
    per_txn = thread_ns_per_txn(workload, timer_slack)
    return coroutines * per_txn if per_txn is not None and coroutines > 1 else 0.0


# Transaction latencies (coroutines x thread time per transaction) the warm-up and the
# window cover. CPU-bound threads with staggered starts run steadily: TPC-C on 4 EDR nodes,
# 24 threads x 8 coroutines (DrTM+H's OCC) reads within 3% of the 8-ms mean in any window
# of 1.5 latencies (sd 1.9%). Threads bound by their sleeps fall into step and the
# cluster's commits come in waves with a period of about one transaction latency: RCC's
# YCSB at 10 threads x 10 coroutines on 4 EDR nodes (about 1 ms per transaction)
# overshoots by ~20% while the staggered first transactions finish, for about two
# latencies after the start, and then a 0.9-ms window reads within +-7% of the 20-ms mean
# (sd 2.4-3.5% over the forms measured), a 2.4-ms one within +-2% (sd 0.7-1.7%) and a
# 3.6-ms one within +-1.5% (sd 0.6-1.1%); so with sleeps the warm-up covers the
# staggered start as well.
CPU_BOUND_LATENCIES = 1.5
SLEEP_WARMUP_LATENCIES = 2.0
SLEEP_WINDOW_LATENCIES = 5.0


def window_latencies(workload) -> tuple[float, float]:
    """Transaction latencies the warm-up and the window cover: ``SLEEP_WARMUP_LATENCIES``
    and ``SLEEP_WINDOW_LATENCIES`` for a workload that sleeps
    (``workload.sleeps_per_txn``), else ``CPU_BOUND_LATENCIES`` each."""
    if getattr(workload, "sleeps_per_txn", 0):
        return SLEEP_WARMUP_LATENCIES, SLEEP_WINDOW_LATENCIES
    return CPU_BOUND_LATENCIES, CPU_BOUND_LATENCIES


def stretch_window(workload, coroutines: int, warmup: float, measure: float,
                   timer_slack: float = 0.0, min_txns: int = 0,
                   threads_total: int = 1) -> tuple[float, float]:
    """Warm-up and window [ns] long enough for the transactions in flight, and for
    ``min_txns`` transactions.

    A thread's coroutines share it, so a transaction takes at least ``coroutines`` times
    the time one transaction holds the thread (:func:`thread_ns_per_txn`) once threads
    are busy, plus 20 us: that latency estimate (a lower bound: it leaves out network
    waits). The warm-up and the window each cover ``CPU_BOUND_LATENCIES`` of them; for a
    workload that sleeps (``workload.sleeps_per_txn``) the warm-up covers the
    coroutines' staggered start (:func:`start_stagger`) and ``SLEEP_WARMUP_LATENCIES``,
    the window ``SLEEP_WINDOW_LATENCIES``. With ``min_txns`` > 0 the window is also long
    enough for the cluster's ``threads_total`` threads to commit that many transactions
    if each held its thread for :func:`thread_ns_per_txn` and none aborted (an upper
    bound on the commits, so the count measured is lower), which gives the points of a
    sweep over cluster sizes a comparable number of samples. A workload without an
    estimate keeps the scenario's warm-up and window.
    """
    per_txn = thread_ns_per_txn(workload, timer_slack)
    if per_txn is None:
        return warmup, measure
    lat = coroutines * per_txn + 20_000.0
    warm_lats, window_lats = window_latencies(workload)
    # threads bound by their sleeps also wait out the coroutines' staggered start
    stagger = (start_stagger(workload, coroutines, timer_slack)
               if getattr(workload, "sleeps_per_txn", 0) else 0.0)
    warmup = max(warmup, stagger + warm_lats * lat)
    measure = max(measure, window_lats * lat)
    if min_txns > 0:
        measure = max(measure, min_txns * per_txn / threads_total)
    return warmup, measure


# How far a SettleRule may stretch the warm-up and the window beyond the values it is
# given (a point that commits a handful of transactions, such as CALVIN's epochs on a
# large cluster, would otherwise run for seconds), and how many times it extends each.
SETTLE_MAX_STRETCH = 4.0
SETTLE_STEPS = 6
# Commits a window holds at the least (a scenario's min_txns may ask for more): its count
# is off by up to a transaction per coroutine at each edge, and with few coroutines
# several latencies hold few commits (RCC's YCSB at one coroutine on 4 nodes x 4
# threads: 5 latencies are 80 commits and read 0.91-1.06x a 10-ms window).
SETTLE_MIN_COMMITS = 500


@dataclass(frozen=True)
class SettleRule:
    """Warm-up and window counted in transactions rather than in estimated latencies.

    A coroutine is always inside a transaction (retries included), so when the cluster's
    ``coros`` coroutines have committed ``k x coros`` transactions, a typical coroutine
    has run ``k`` transaction latencies. The warm-up lasts until the run has committed
    ``warm_lats x coros`` since its start, after ``stagger`` [ns] (the coroutines'
    staggered start); the window until it holds ``window_lats x coros`` commits,
    ``min_txns`` and ``SETTLE_MIN_COMMITS``. The latencies are :func:`window_latencies`,
    as :func:`stretch_window` covers them; it estimates their length from the threads'
    CPU and sleeps and leaves out network waits; those
    dominate at few coroutines: RCC's
    YCSB at one coroutine per thread on 4 EDR nodes takes about 160 us per transaction
    against an estimated 26 us, and a window of 2.4 transactions read 0.74-1.29x a 10-ms
    one. Each is stretched at most ``SETTLE_MAX_STRETCH`` times, in at most
    ``SETTLE_STEPS`` steps (each aimed at the count at the rate so far); a window
    without a commit keeps its length (the runner warns about such a point)."""

    coros: int
    stagger: float
    warm_lats: float
    window_lats: float
    min_txns: int

    @classmethod
    def of(cls, b: Bench, stagger: float = 0.0, min_txns: int = 0) -> "SettleRule":
        """The rule of a built point ``b`` whose coroutines start over ``stagger`` [ns]."""
        warm, window = window_latencies(b.workload)
        return cls(len(b.cluster.nodes) * b.threads * b.coroutines, stagger, warm, window,
                   min_txns)

    def warm_up(self, b: Bench, warmup: float) -> float:
        """Run ``b`` (started, no window yet) to the end of its warm-up, at least
        ``warmup`` [ns]; return that end [ns]."""
        st = b.cc.stats
        return _run_until_count(b.sim, lambda: st.committed_run,
                                self.warm_lats * self.coros, 0.0,
                                max(warmup, self.stagger), SETTLE_MAX_STRETCH * warmup)

    def fill_window(self, b: Bench, warmup: float, measure: float) -> float:
        """With ``b`` at the end of its window [``warmup``, ``warmup + measure``) [ns],
        extend the window until it holds the commits asked; return its length [ns]."""
        sim, st = b.sim, b.cc.stats
        target = max(self.window_lats * self.coros, self.min_txns, SETTLE_MIN_COMMITS)
        end = _run_until_count(sim, lambda: st.committed, target, warmup,
                               warmup + measure, warmup + SETTLE_MAX_STRETCH * measure,
                               sim.extend_window, keep_if_none=True)
        return end - warmup


def _run_until_count(sim, count, target: float, since: float, at_least: float,
                     cap: float, before_run=None, keep_if_none: bool = False) -> float:
    """Run ``sim`` to ``at_least`` [ns] and on until ``count()`` (events counted from
    ``since`` [ns]) reaches ``target`` or time reaches ``cap`` [ns], in steps aimed at the
    target at the rate so far (doubling the span while nothing was counted, or stopping
    then with ``keep_if_none``); ``before_run(end)`` is called before each step. Return
    the time reached [ns]."""
    if sim.now < at_least:
        sim.run(until=at_least)
    for _ in range(SETTLE_STEPS):
        n = count()
        if n >= target or sim.now >= cap:
            break
        span = sim.now - since
        if n == 0:
            if keep_if_none:
                break
            end = since + 2 * span
        else:
            end = since + span * target / n
        end = min(max(end, sim.now + 0.05 * span), cap)
        if before_run is not None:
            before_run(end)
        sim.run(until=end)
    return sim.now
