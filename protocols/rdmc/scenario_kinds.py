"""Scenario kinds of RDMC: ``rdmc`` (one multicast) and ``rdmc_study`` (a paper study).

Imported lazily by :mod:`rnicsim.scenario` (its ``PLUGINS`` list).

- ``rdmc``: multicast ``messages`` messages of ``message`` bytes from member 0 to a group of
  ``group_size`` nodes (nodes ``0 .. group_size-1`` of the scenario's ``cluster.nodes``,
  with its profile, ``cores`` and topology) with ``algorithm`` and ``block`` size (at most
  65,535 blocks per message); ``rack_size`` only with ``hybrid``. ``algorithm: mpi`` is the
  MPI broadcast baseline, which cuts the message into chunks of its own: ``block`` does not
  apply to it. RDMC uses one NIC and one completion thread per node, so
  ``cluster.nic.per_node`` and ``cluster.threads`` must stay 1, and ``run.warmup`` /
  ``run.measure`` are not used (each message is measured whole). Metrics:
  ``completion_ms``, ``bandwidth_gbps``, ``skew_ms``, ``cpu`` (mean CPU share of the
  members), ``cpu_root``, ``total_ms``, ``pipeline_bound_gbps`` (the binomial pipeline's
  schedule on ideal links, :func:`pipeline_bound_gbps`: no schedule of such blocks is
  faster).
- ``rdmc_study``: one of the paper-reproduction studies of :mod:`protocols.rdmc.study`
  (their testbeds are built from the scenario's NIC profile and overrides with the link and
  fabric of the paper's cluster, so ``cluster.nodes`` is not used and ``cluster.topology``,
  ``cores``, ``threads`` and ``nic.per_node`` must keep their defaults); its scalar results
  become the row's metrics (nested results are flattened with dots, e.g.
  ``cpu_interrupt.1048576``).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rnicsim.scenario import Size, register_workload

from .schedules import ALGORITHMS

_STRICT = ConfigDict(extra="forbid", frozen=True)
STUDIES = ("fig4_algorithms", "table1_breakdown", "fig6_block_size", "fig8_scale",
           "fig9_replication_trace", "fig10_overlap", "fig11_interrupts", "m1_steps",
           "slack_and_slow_links", "m11_core_direct")


class RdmcWorkload(BaseModel):
    """One RDMC multicast (see module doc)."""

    model_config = _STRICT
    kind: Literal["rdmc"]
    algorithm: Literal[ALGORITHMS + ("mpi",)] = "binomial-pipeline"  # type: ignore[valid-type]
    group_size: int = Field(4, ge=2, le=4096)
    message: Size = Field(64 * 1024 * 1024, ge=1)
    block: Size = Field(1024 * 1024, ge=1)
    messages: int = Field(1, ge=1)
    rack_size: int | None = Field(None, ge=1)
    completion: Literal["hybrid", "polling", "interrupt"] = "hybrid"


class RdmcStudy(BaseModel):
    """A study of :mod:`protocols.rdmc.study` at ``scale`` demo or full."""

    model_config = _STRICT
    kind: Literal["rdmc_study"]
    study: Literal[STUDIES]  # type: ignore[valid-type]
    scale: Literal["demo", "full"] = "full"


def _flatten(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            out[key] = float(v)
        elif isinstance(v, (int, float)):
            out[key] = float(v)
        elif isinstance(v, dict):
            out.update(_flatten(v, key + "."))
    return out


def run_multicast_point(sc, profile) -> dict[str, float]:
    """Runner of workload kind ``rdmc``."""
    from .study import run_multicast

    check_scenario_point(sc, profile)
    w = sc.workload
    block = None if w.algorithm == "mpi" else w.block   # mpi chooses its chunks (doc)
    r = run_multicast(w.group_size, w.message, w.algorithm, block, testbed="qdr",
                      profile=profile, link={}, topology=sc.cluster.topology.model_dump(),
                      seed=sc.run.seed, messages=w.messages, rack_size=w.rack_size,
                      completion=w.completion, nodes=sc.cluster.nodes,
                      cores=sc.cluster.cores)
    out = {k: float(r[k]) for k in ("completion_ms", "total_ms", "bandwidth_gbps",
                                    "skew_ms", "cpu", "cpu_root")}
    out["pipeline_bound_gbps"] = pipeline_bound_gbps(r["link_gbps"], w.group_size, w.message,
                                                     w.block)
    return out


def pipeline_bound_gbps(link_gbps: float, n: int, message: int, block: int) -> float:
    """The bandwidth [Gb/s] of the binomial pipeline's schedule on ideal links: ``message``
    [B] in k blocks of ``block`` [B] to ``n`` nodes takes its schedule's step count (l + k
    - 1 for n = 2^l) of block times at ``link_gbps`` (the link's data rate; per-packet
    headers and per-block latency are left out, so no multicast of such blocks is
    faster). A block larger than the message is the message; a partial last block is
    counted whole (the bound is exact when ``block`` divides ``message``)."""
    from .schedules import step_count

    k = -(-message // block)
    return link_gbps * message / (step_count("binomial-pipeline", n, k) * min(block, message))


def check_scenario_point(sc, profile) -> None:
    """Raise ValueError("key: expected") for points the cluster cannot run."""
    w = sc.workload
    c = sc.cluster
    if c.nic.per_node != 1:
        raise ValueError(f"cluster.nic.per_node: 1 (RDMC uses one NIC per node), got "
                         f"{c.nic.per_node}")
    if c.threads != 1:
        raise ValueError(f"cluster.threads: 1 (RDMC runs one completion thread per node), "
                         f"got {c.threads}")
    for key in ("warmup", "measure"):
        default = type(sc.run).model_fields[key].default
        if getattr(sc.run, key) != default:
            raise ValueError(f"run.{key}: not used by {w.kind} (every message runs to "
                             f"completion and is measured whole); leave it out")
    if w.kind == "rdmc_study":
        if c.topology.kind != "single_switch":
            raise ValueError("cluster.topology: not used by rdmc_study (each study builds the "
                             "paper's fabric); leave it out")
        if c.cores is not None:
            raise ValueError("cluster.cores: not used by rdmc_study (the profile's cores); "
                             "leave it out")
        return
    if w.group_size > c.nodes:
        raise ValueError(f"workload.group_size: at most cluster.nodes ({c.nodes}), got "
                         f"{w.group_size}")
    if w.rack_size is not None and w.algorithm != "hybrid":
        raise ValueError(f"workload.rack_size: only with algorithm hybrid (not "
                         f"{w.algorithm}); leave it out")
    if w.algorithm != "mpi":
        from .engine import MAX_BLOCKS

        k = -(-w.message // w.block)
        if k > MAX_BLOCKS:
            raise ValueError(f"workload.block: at least {-(-w.message // MAX_BLOCKS)} B (a "
                             f"message has at most {MAX_BLOCKS} blocks; {w.message} B in "
                             f"blocks of {w.block} B are {k})")


MiB = 1024 * 1024


def _derived(name: str, r: dict) -> dict[str, float]:
    """Metrics the paper's statements are about, computed from a study's results."""
    d: dict[str, float] = {}
    if name == "m1_steps":
        d["schedule_over_formula"] = r["schedule_steps"] / r["formula_steps"]
        d["effective_over_formula"] = r["effective_steps"] / r["formula_steps"]
    elif name == "slack_and_slow_links":
        d["slack_max_abs_error"] = max(abs(x["measured"] - x["predicted"]) for x in r["slack"])
        f = r["binomial-pipeline"]["fraction"]
        d["pipeline_fraction_over_bound"] = f / r["bound"]
        d["pipeline_over_chain_fraction"] = f / r["chain"]["fraction"]
    elif name == "fig4_algorithms":
        d["tree_over_pipeline_growth"] = r["tree_growth"] / r["pipeline_growth"]
        d["mpi_vs_pipeline_large_max"] = max(r["mpi_vs_pipeline_large"])
    elif name == "fig6_block_size":
        big = max(r["peaks"])
        d["largest_message_interior_peak"] = float(r["peaks"][big]["interior_peak"])
    elif name == "fig11_interrupts":
        ci = r["cpu_interrupt"]
        d["cpu_interrupt_100MiB"] = ci[100 * MiB]
        d["cpu_interrupt_1MiB"] = ci[MiB]
        d["cpu_interrupt_1MiB_over_100MiB"] = ci[MiB] / ci[100 * MiB]
        d["bandwidth_ratio_min"] = min(r["bandwidth_ratio"][s] for s in (MiB, 100 * MiB))
        d["cpu_hybrid_min"] = min(r["cpu_hybrid"].values())
    elif name == "m11_core_direct":
        sw = r["software_cpu_relays"]
        d["relay_cpu_core_direct_over_software"] = r["core_direct_cpu_relays"] / sw if sw else 1.0
    return d


def run_study_point(sc, profile) -> dict[str, float]:
    """Runner of workload kind ``rdmc_study``."""
    from . import study

    name = sc.workload.study
    r = getattr(study, name)(sc.workload.scale, profile=profile, seed=sc.run.seed)
    out = _flatten(r)
    out.update(_derived(name, r))
    return out


register_workload("rdmc", RdmcWorkload, "protocols.rdmc.scenario_kinds:run_multicast_point")
register_workload("rdmc_study", RdmcStudy, "protocols.rdmc.scenario_kinds:run_study_point")
