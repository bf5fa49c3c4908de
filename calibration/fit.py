"""``rnicsim calibrate``: fit a NIC profile's physical parameters to measurements.

    rnicsim calibrate INPUT... --base PROFILE --out NEW.yaml --report DIR
                      [--params a,b,c] [--bootstrap N] [--seed S] [--iterations N]
                      [--weights points|series] [--quiet]

INPUT are perftest text outputs and/or ``rnicsim-probe`` JSON lines (files or
directories, read by :func:`calibration.parsers.load_measurements`).

Method (see ``calibration/README.md``, "Fit a profile"):

1. **Mapping.** Every measurement is mapped to the simulator experiment that reproduces it:
   a perftest row to ``workloads.perftest.run_lat``/``run_bw`` with the same tool, size,
   connection, QPs, TX depth, CQ moderation, inline, MTU and (for perftest bandwidth rows)
   the same number of iterations; a probe point to the perftest-like run it matches,
   with ``workloads.perftest``'s probe knobs where perftest has none: ``post_to_cqe``
   READ/WRITE/CAS/FAA -> ``ib_read_lat``/``ib_write_lat``/``ib_atomic_lat`` timing one
   signaled WR from post to CQE (``post_to_cqe``; with several QPs, the qps sweep's
   latency points, they take turns after a warm-up that uses each once); ``pingpong``
   SEND -> ``ib_send_lat`` x 2, since the probe reports full round trips; ``throughput``
   -> ``ib_*_bw`` with the point's QPs, depth, batch (post list), signalling, posting
   threads (``threads``: the QPs split over them, one CQ each, one device context),
   atomic targets (``addresses``, 64 B apart, cycled) and, for random offsets,
   the remote region and its page size (``region``/``page_size``), at steady state -
   except random offsets, which run the probe's own warm-up and measured operations (the
   translation cache warms over them); the ``coro`` sweep -> the microbenchmark loop of
   one thread's coroutines (``simulate_coro``); the ``rpc`` sweep (SEND echoes with a
   window of requests outstanding) -> ``workloads.perftest.run_echo`` at steady state,
   a point that lost UD echoes skipped; the ``arb`` sweep (a small WRITE posted behind a
   large one on another QP) -> ``workloads.perftest.run_behind``. What cannot be mapped
   (SEND ping-pong over several QPs, latency with a batch or several threads - the probe
   measures neither -,
   bidirectional perftest runs, another link layer) is skipped and listed. The fitted
   quantity is the median latency (``t_typical``) of a latency row and the message rate
   (bandwidth when no rate is printed) of a bandwidth row; other statistics (min, tails,
   peak bandwidth) are not fitted: the simulator has no run-to-run noise.
2. **Residuals.** Relative: (simulated - measured) / measured, one per mapped point, all
   weighted alike (``--weights series``: every series the same total weight).
3. **Parameters** (``DEFAULT_PARAMS``, or ``--params``) are searched as x, a relative
   offset for times (value = base x (1 + x): latencies are sums of times) and a logarithm
   for rates (value = base x e^x), within bounds (times /10..x10, rates /4..x2). A weak
   ridge (RIDGE x^2) keeps directions the data cannot see near the base value.
   Whole-number parameters (QP-cache entries, QP-context size, atomic units, ...) are
   chosen by a search over base x 2^k, k = -3..3, the others fixed; for counts, the
   whole numbers next to the best grid values that fit as well are found by bisection
   and reported in the CI (a cache step lies anywhere between two sweep points). By
   default (``SWEEP_PARAMS``) the QP cache, QP-context size and atomic units are added
   when the data hold several-QP experiments, and (``PAGES_PARAMS``) the translation
   cache and entry size when they hold random-offset ones. The QP cache shows in the
   latency of the probe's qps sweep (a step once the QPs outnumber the cache: every
   operation then fetches its context), alike whether a miss holds the PU
   (``nic.qpc_miss_stall``) or not. Its one-thread throughput points stay CPU-bound on
   the shipped profiles either way; its ``--qps-threads`` points (several posting
   threads, each owning a block of the QPs, mapped with the same ``threads``) fall
   once the QPs outnumber the cache when a miss stalls, by the fetch time (context size
   and PCIe latency), and the fit uses them as any other point (the
   bandwidth shortcut below is then a few % high: the cache's hit pattern settles over
   hundreds of operations per QP).
   ``nic.qpc_miss_stall`` itself is taken from the base profile, not fitted.
4. **Identifiability.** At the start point the Jacobian of the residuals is taken by
   finite differences. A parameter is *not identified by the data* when moving it anywhere
   within its bounds would change no point by SENS_TOL (2%, linearised), or when its
   column lies within COLLINEAR_TOL (sine 0.02, about 1 degree) of the span of the more
   influential identified columns: it stays at its base value, keeps its base source and
   is listed with the reason. The check is repeated at the fitted point (central
   differences: a fitted point often sits on a kink where one bottleneck takes over from
   another); if the identified set changes, the parameters that dropped out go back to
   their base values and the fit is repeated once.
5. **Fit.** ``scipy.optimize.least_squares`` (trust region reflective, bounds) with a
   forward-difference Jacobian, at most ``--iterations`` evaluations per round; every
   simulator run is cached.
6. **Uncertainty.** Bootstrap over measurements: resample the points with replacement,
   refit from the best point with a few evaluations (BOOT_NFEV, Jacobian of the best
   point), and take the 2.5-97.5 percentiles of each parameter as its 95% confidence
   interval (for whole numbers: together with the values that fit equally well).

Shortcuts, each checked against the simulator in ``tests/unit/test_calibrate.py``:
latency medians are taken over 7 operations (the simulator is deterministic, every
operation of an unloaded latency run takes the same time, after the post-to-CQE warm-up
also with QPs taking turns); a bandwidth row over more
iterations than the simulation budget is extrapolated from two shorter runs (the duration
is linear in the number of operations once the pipeline is full); a per-opcode service
time (``nic.responder.read`` ...) only moves experiments of that opcode class, the atomic
unit only atomic experiments, the QP-cache size only experiments with several QPs, so
other experiments are not re-simulated for their Jacobian columns. Reported predictions
(base and fitted) are always complete simulations.

Outputs: NEW.yaml (a full profile, same schema as the shipped ones, ``name`` from the
file stem; fitted parameters say where they come from and their confidence interval),
written atomically with the usual mode (0o666 less the umask); both paths are checked
before the fit; DIR (``calibration.report``): plots of every series, residuals,
``report.md`` and ``fit.json``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml

from rnicsim.results import atomic_write, check_out_dir, check_out_file
from pydantic import BaseModel, ValidationError
from scipy.optimize import least_squares

from calibration.parsers import Measurement, load_measurements, parse_perftest_runs
from rnicsim.errors import ArgumentParser, InputError
from rnicsim.profile import (CountP, IdleStatesP, OpTimes, Profile, ProfileModel, RateP, SizeP,
                             TimeP, load_profile)
from workloads.microbench import MicrobenchSpec, run_microbench
from workloads.perftest import TOOLS, PerftestArgs, run_behind, run_bw, run_echo, run_lat

__all__ = [
    "DEFAULT_PARAMS", "SWEEP_PARAMS", "PAGES_PARAMS", "CORO_PARAMS", "RPC_PARAMS", "Param",
    "Experiment", "Point", "Unmapped",
    "ParamResult", "FitResult", "resolve_params", "map_measurements", "Simulator",
    "calibrate", "nic_mismatch_notes", "arb_check", "main",
]

#: Continuous parameters fitted by default (physical, from the profile).
DEFAULT_PARAMS = (
    "pcie.latency", "pcie.mmio_latency", "pcie.rate", "host.mmio", "host.wqe_build",
    "nic.requester.read", "nic.responder.read", "nic.completer.read",
    "nic.requester.write", "nic.responder.write", "nic.requester.send",
    "nic.responder.send", "nic.requester.atomic", "nic.atomic_service",
    "nic.completer.atomic", "link.signal_rate",
)
#: Whole-number parameters added by default when the data hold several-QP experiments.
SWEEP_PARAMS = ("nic.qp_cache_entries", "nic.qp_context_size", "nic.atomic_units")
#: Added by default when the data hold the probe's coro sweep or bare switches.
CORO_PARAMS = ("host.coroutine_switch", "host.poll_cq", "host.cqe_handle")
#: Added by default when the data hold the probe's rpc sweep (the echo server's thread
#: polls and handles a CQE per request and per echo sent).
RPC_PARAMS = ("host.poll_cq", "host.cqe_handle")
#: Added by default when the data hold random-offset (pages sweep) experiments.
PAGES_PARAMS = ("nic.mtt_cache_entries", "nic.mtt_entry_size")

SENS_TOL = 0.02        # smallest relative change a parameter must cause within its bounds
COLLINEAR_TOL = 0.02   # sine of the angle to the span of stronger columns
FD_STEP = 0.03         # finite-difference step in x (3 % of the base value, or of a rate)
DISCRETE_TOL = 0.005   # relative change of a prediction that counts as a response
LAT_ITERS = 7          # operations per simulated latency row (deterministic medians)
BW_OPS = 400           # iterations per QP of a simulated bandwidth run before extrapolating
BW_BYTES = 64 << 20    # payload bytes per simulated bandwidth run before extrapolating
RIDGE = 1e-3           # weak pull of every fitted x towards the base value (0)
BOOT_NFEV = 4          # evaluations per bootstrap refit (the first is the best point)
BOUNDS = {"time": (0.1, 10.0), "rate": (0.25, 2.0), "size": (0.125, 8.0),
          "count": (0.125, 8.0)}
#: Wider bounds for parameters whose base is a lower bound, not an estimate: the shipped
#: coroutine_switch is Boost's bare 20-ns switch (DrTM+H sec. 4.1), while a scheduler's
#: bookkeeping per yield can cost tens of times that (r2's co_bench suggests ~0.85 us).
KEY_BOUNDS = {"host.coroutine_switch": (0.1, 100.0)}


# ---------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One profile parameter to fit, in base units (ns, bit/s, B, count)."""

    key: str
    kind: str            # time | rate | size | count
    base: float
    lo: float
    hi: float
    scope: str           # all | send | write | read | atomic | multi_qp | coro
    base_source: str
    log: bool = False    # fit coordinate logarithmic (rates; times with KEY_BOUNDS)

    @property
    def discrete(self) -> bool:
        return self.kind in ("size", "count")

    # The fit works on x: relative offsets for times (value = base x (1 + x): latencies are
    # sums of times, so the simulator is close to linear in them) and logarithms for rates
    # (value = base x e^x: transfer times go as 1 / rate) and for times whose bounds span
    # two decades (KEY_BOUNDS: the ridge on a relative offset would hold them near the base).
    def to_x(self, v: float) -> float:
        """Fit coordinate of value ``v`` [base units] (inverse of :meth:`from_x`)."""
        return math.log(v / self.base) if self.log else v / self.base - 1.0

    def from_x(self, x: float) -> float:
        """Value [base units] at fit coordinate ``x`` (0 is the base value)."""
        return self.base * math.exp(x) if self.log else self.base * (1.0 + x)

    def dlog_dx(self, x: float) -> float:
        """d ln(value) / dx."""
        return 1.0 if self.log else 1.0 / (1.0 + x)

    def fmt(self, v: float) -> str:
        """Human-readable value with unit (reports, CI text)."""
        if self.kind == "rate":
            return f"{_sig(v / 1e9)} Gb/s"
        if self.kind == "time":
            return f"{_sig(v)} ns"
        if self.kind == "size":
            return f"{int(round(v))} B"
        return f"{int(round(v))}"

    def yaml_value(self, v: float) -> Any:
        """The value as written into a profile file."""
        if self.kind == "rate":
            return f"{_sig(v / 1e9)}Gbps"
        if self.kind == "time":
            return f"{_sig(v)}ns"
        if self.kind == "size":
            return f"{int(round(v))}B"
        return int(round(v))

    def ci_text(self, lo: float, hi: float) -> str:
        if self.kind == "rate":
            return f"{_sig(lo / 1e9)}-{_sig(hi / 1e9)} Gb/s"
        if self.kind == "time":
            return f"{_sig(lo)}-{_sig(hi)} ns"
        unit = " B" if self.kind == "size" else ""
        return f"{int(round(lo))}-{int(round(hi))}{unit}"

    def grid(self) -> list[int]:
        """Candidate values of a whole-number parameter: base x 2^k, k = -3..3."""
        b = max(1, int(round(self.base)))
        return sorted({max(1, int(round(b * 2.0 ** k))) for k in range(-3, 4)})


def _sig(v: float, digits: int = 4) -> str:
    """``v`` with ``digits`` significant digits, positional (no exponent)."""
    return np.format_float_positional(float(v), precision=digits, unique=False,
                                      fractional=False, trim="-")


_KINDS = ((TimeP, "time"), (RateP, "rate"), (SizeP, "size"), (CountP, "count"))


def _param_node(model: ProfileModel, key: str) -> Any:
    node: Any = model
    for part in key.split("."):
        if not isinstance(node, BaseModel) or part not in type(node).model_fields:
            return None
        node = getattr(node, part)
    return node


def fittable_keys(model: ProfileModel) -> list[str]:
    """Every numeric parameter of a profile (``section.param`` or ``nic.role.op``)."""
    out = []
    for sec in ("link", "switch", "pcie", "nic", "host"):
        s = getattr(model, sec)
        for k in type(s).model_fields:
            p = getattr(s, k)
            if isinstance(p, OpTimes):
                out += [f"{sec}.{k}.{op}" for op in type(p).model_fields]
            elif any(isinstance(p, cls) for cls, _ in _KINDS):
                out.append(f"{sec}.{k}")
    return out


def _scope(key: str) -> str:
    parts = key.split(".")
    if len(parts) == 3 and parts[1] in ("requester", "responder", "completer"):
        return parts[2]
    if key in ("nic.atomic_service", "nic.atomic_units"):
        return "atomic"
    if key == "nic.qp_cache_entries":    # one QP per NIC hits after its first use
        return "multi_qp"
    if key == "host.coroutine_switch":   # only coroutine loops switch
        return "coro"
    return "all"


def resolve_params(profile: Profile, names: Sequence[str]) -> list[Param]:
    """Parameters named ``names`` in ``profile``; InputError for unknown or non-numeric ones."""
    out: list[Param] = []
    valid = fittable_keys(profile.model)
    for name in names:
        node = _param_node(profile.model, name)
        kind = next((k for cls, k in _KINDS if isinstance(node, cls)), None)
        if kind is None:
            what = ("a numeric profile parameter (this one is a word, not a quantity)"
                    if node is not None else "a numeric profile parameter")
            raise InputError("command line", "--params",
                             f"{what}; {name!r} is not one. Parameters: {', '.join(valid)}")
        base = float(node.value)
        if base <= 0:
            raise InputError(profile.path, name, "a value > 0 in the base profile to fit "
                             f"it relative to (it is {node.value!r})")
        lo, hi = KEY_BOUNDS.get(name, BOUNDS[kind])
        lo_v, hi_v = base * lo, base * hi
        if kind in ("size", "count"):
            lo_v, hi_v = max(1.0, math.floor(lo_v)), math.ceil(hi_v)
        if name in [p.key for p in out]:
            raise InputError("command line", "--params", f"each parameter once; {name!r} repeats")
        out.append(Param(name, kind, base, lo_v, hi_v, _scope(name), node.source,
                         log=kind == "rate" or name in KEY_BOUNDS))
    return out


# ---------------------------------------------------------------------------------------
# measurements -> simulator experiments
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Experiment:
    """One simulated perftest row (hashable: the cache key with the parameter values)."""

    tool: str
    size: int
    conn: str = "RC"
    qps: int = 1
    tx_depth: int | None = None
    cq_mod: int = 100
    post_list: int = 1
    inline: int | None = 0          # perftest -I: inlined if size <= this (None: the
                                    # tool's default, the profile's max_inline)
    mtu: int | None = None
    outstanding: int | None = None  # -o: nic.max_rd_atomic
    max_inline: int | None = None   # the run inlined more than the profile's max_inline
    atomic: str = "FETCH_AND_ADD"
    iters: int = 0                  # operations per QP averaged over (0: steady state)
    # rnicsim-probe experiments (workloads.perftest knobs without a perftest flag)
    cqe: bool = False               # *_lat: post to CQE, QPs cycled (the probe's post_to_cqe)
    threads: int = 1                # *_bw: posting threads, the QPs split over them
    addresses: int = 1              # targets 64 B apart, cycled
    region: int = 0                 # targets uniformly random over this many bytes
    page_size: int = 4096           # pages of the remote region
    warmup: int = 0                 # operations per QP before the ``iters`` averaged over
    # the probe's coro sweep (tool ``coro_read``: workloads.microbench, one thread whose
    # ``coroutines`` each own a QP) and bare switches (tool ``coro_switch``); its rpc
    # sweep is tool ``rpc_echo`` (workloads.perftest.run_echo: window ``tx_depth``, lists
    # of ``post_list``)
    coroutines: int = 0
    cq_layout: str = "shared"
    # the probe's arb sweep (tool ``arb_lat``: workloads.perftest.run_behind): a WRITE of
    # ``size`` B posted ``gap_ns`` after one of ``behind`` B on another QP
    behind: int = 0
    gap_ns: float = 0.0

    @property
    def kind(self) -> str:
        if self.tool == "coro_switch":
            return "switch"
        return "lat" if self.tool.endswith("_lat") else "bw"

    @property
    def op_class(self) -> str:
        if self.tool == "rpc_echo":
            return "send"
        if self.tool == "arb_lat":
            return "write"
        return self.tool.split("_")[1]          # read write send atomic

    def label(self) -> str:
        if self.tool == "coro_switch":
            return f"coroutine switch ({self.coroutines} coroutines)"
        if self.tool == "coro_read":
            return (f"READ {self.size} B, {self.coroutines} coroutines on one thread, "
                    f"{'one CQ per QP' if self.cq_layout == 'per_qp' else 'one CQ'}")
        if self.tool == "arb_lat":
            return (f"WRITE {self.size} B {self.gap_ns / 1e3:g} us behind a WRITE of "
                    f"{self.behind} B on another QP")
        if self.tool == "rpc_echo":
            return (f"SEND echo {self.size} B {self.conn}, window {self.tx_depth}"
                    + (f" list {self.post_list}" if self.post_list > 1 else "")
                    + (" inline" if self.inline and self.size <= self.inline else ""))
        bits = [self.tool, f"{self.size} B"]
        if self.conn != "RC":
            bits.append(self.conn)
        if self.qps > 1:
            bits.append(f"{self.qps} QPs")
        if self.threads > 1:
            bits.append(f"{self.threads} threads")
        if self.cqe:
            bits.append("post-to-CQE")
        if self.addresses > 1:
            bits.append(f"{self.addresses} addresses")
        if self.region:
            bits.append(f"random over {_bytes(self.region)}")
        if self.page_size != 4096:
            bits.append(f"{_bytes(self.page_size)} pages")
        if self.kind == "bw":
            bits.append(f"depth {self.tx_depth or 128}")
            if self.post_list > 1:
                bits.append(f"list {self.post_list}")
        if self.inline and self.size <= self.inline:
            bits.append("inline")
        return " ".join(bits)


def _bytes(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


@dataclass
class Point:
    """A measurement the fit uses, with the experiment that reproduces it."""

    exp: Experiment
    quantity: str          # lat_us | rate_mops
    measured: float        # us or Mops
    factor: float          # measured ~ factor x simulated (2: probe round trip vs half)
    series: str            # series id (file: tool / sweep ...)
    series_title: str
    x: float               # abscissa in the series
    xlabel: str
    source: str
    line: int
    metric: str            # the Measurement metric fitted (lat_median, msg_rate, bw_avg)
    bw_gbps: float | None = None  # measured bandwidth, for plots

    @property
    def file(self) -> str:
        return Path(self.source).name


@dataclass
class Unmapped:
    """A measurement the fit could not use, and why."""

    source: str
    line: int
    what: str
    reason: str


def _perftest_runs(sources: set[str]) -> dict[tuple[str, int], Any]:
    """Row line -> PerftestRun, for header facts ``Measurement`` does not carry."""
    out: dict[tuple[str, int], Any] = {}
    for src in sources:
        try:
            text = Path(src).read_text(encoding="utf-8", errors="replace")
            runs = parse_perftest_runs(text, src)
        except (OSError, InputError):
            continue
        for run in runs:
            for r in run.rows:
                out[(src, r.line)] = run
    return out


def _group(ms: list[Measurement]) -> dict[tuple[str, int, str, int], dict[str, Measurement]]:
    """Metrics of one configuration (file, line, verb, payload), in input order."""
    groups: dict[tuple[str, int, str, int], dict[str, Measurement]] = {}
    for m in ms:
        key = (m.source, m.line, m.verb, m.payload)
        groups.setdefault(key, {})[m.metric] = m
    return groups


_SWEEP_X = {"lat": ("payload", "payload [B]"), "bw": ("payload", "payload [B]"),
            "inline": ("payload", "payload [B]"), "qps": ("qps", "QPs"),
            "depth": ("depth", "outstanding WRs per QP"),
            "batch": ("batch", "WRs per doorbell"), "signal": ("signal_every", "signal every"),
            "atomics": ("addresses", "addresses"), "threads": ("threads", "threads"),
            "pages": ("region_bytes", "region [B]"),
            "coro": ("coroutines", "coroutines per thread")}


def _positive(metrics: dict[str, Measurement], key: str) -> Measurement | None:
    """The measurement of metric ``key`` when there is one with a finite value > 0."""
    pm = metrics.get(key)
    return pm if pm is not None and pm.value > 0 and math.isfinite(pm.value) else None


def _ceil64(n: int) -> int:
    return max(64, -(-n // 64) * 64)


def map_measurements(ms: list[Measurement], base: Profile
                     ) -> tuple[list[Point], list[Unmapped]]:
    """Map measurements to simulator experiments; the rest is returned with a reason."""
    points: list[Point] = []
    unmapped: list[Unmapped] = []
    runs = _perftest_runs({m.source for m in ms if m.tool.startswith("ib_")})
    kind_of_link = "IB" if base.link.kind == "ib" else "Ethernet"
    for (src, line, verb, payload), metrics in _group(ms).items():
        m = next(iter(metrics.values()))
        what = (f"{m.tool or 'probe'} {verb} {m.transport} {m.kind} {payload} B"
                + (f" ({m.sweep} sweep)" if m.tool == "rnicsim-probe" else ""))

        def skip(reason: str) -> None:
            unmapped.append(Unmapped(src, line, what, reason))

        if m.link_layer and m.link_layer != kind_of_link:
            skip(f"measured on {m.link_layer}, the base profile is {base.link.kind}")
            continue
        if m.kind == "switch":
            # one resume+yield pair; the simulator charges coroutine_switch once per resume
            # and nothing for the yield back, so the pair is that parameter
            pm = metrics["switch_ns"]
            exp = Experiment(tool="coro_switch", size=0, coroutines=m.coroutines)
            points.append(Point(exp, "switch_ns", pm.value, 1.0,
                                f"{Path(src).name}|switch", f"probe: bare coroutine switch "
                                f"({Path(src).name})", float(m.coroutines), "coroutines",
                                src, line, "switch_ns"))
            continue
        if m.sweep == "coro":
            pm = _positive(metrics, "msg_rate")
            if pm is None:
                skip("no message rate to fit")
                continue
            if verb != "READ" or m.transport != "RC":
                skip("coro points are simulated for RC READs only")
                continue
            exp = Experiment(tool="coro_read", size=payload, qps=m.qps,
                             coroutines=m.coroutines, cq_layout=m.cq_layout or "shared",
                             inline=0, mtu=m.mtu)
            points.append(Point(
                exp, "rate_mops", pm.value, 1.0,
                f"{Path(src).name}|coro|{m.cq_layout}|payload={payload}",
                f"probe coro: READ {payload} B from coroutines, "
                f"{'one CQ per QP' if m.cq_layout == 'per_qp' else 'one shared CQ'} "
                f"({Path(src).name})", float(m.coroutines), "coroutines per thread", src,
                line, "msg_rate",
                metrics["bw_avg"].value if "bw_avg" in metrics else None))
            continue
        if m.sweep == "rpc":
            pm = _positive(metrics, "msg_rate")
            if pm is None:
                skip("no message rate to fit")
                continue
            if m.lost:
                skip(f"{m.lost} UD echoes were lost: each stalled its window slot for the "
                     f"probe's 200-ms timeout, which the rate includes")
                continue
            exp = Experiment(tool="rpc_echo", size=payload, conn=m.transport,
                             tx_depth=m.depth, post_list=m.batch,
                             inline=payload if m.inline else 0, mtu=m.mtu,
                             max_inline=payload if m.inline and payload > base.nic.max_inline
                             else None)
            lists = "lists of the window" if m.batch == m.depth > 1 else f"lists of {m.batch}"
            points.append(Point(
                exp, "rate_mops", pm.value, 1.0,
                f"{Path(src).name}|rpc|{m.transport}|payload={payload}|inline={m.inline}|"
                f"{lists}",
                f"probe rpc: SEND echo {m.transport} {payload} B, {lists} "
                f"({Path(src).name})", float(m.depth), "requests outstanding (window)", src,
                line, "msg_rate", metrics["bw_avg"].value if "bw_avg" in metrics else None))
            continue
        if m.sweep == "arb":
            pm = _positive(metrics, "lat_median")
            if pm is None:
                skip("no median latency (t_typical) to fit")
                continue
            exp = Experiment(tool="arb_lat", size=payload, conn="RC", qps=2, inline=0,
                             mtu=m.mtu, cqe=True, behind=m.behind, gap_ns=m.gap_us * 1e3)
            points.append(Point(
                exp, "lat_us", pm.value, 1.0, f"{Path(src).name}|arb|payload={payload}",
                f"probe arb: WRITE {payload} B behind a large WRITE on another QP "
                f"({Path(src).name})", float(m.behind), "bytes of the WRITE ahead [B]", src,
                line, "lat_median", None))
            continue
        if m.kind == "lat":
            pm = metrics.get("lat_median")
            if pm is None:
                skip("no median latency (t_typical) to fit")
                continue
            quantity, measured, metric, bw = "lat_us", pm.value, "lat_median", None
        else:
            pm = metrics.get("msg_rate") or metrics.get("bw_avg")
            if pm is None:
                skip("no message rate or average bandwidth to fit")
                continue
            bw = metrics["bw_avg"].value if "bw_avg" in metrics else None
            if pm.metric == "msg_rate":
                quantity, measured, metric = "rate_mops", pm.value, "msg_rate"
            else:  # Gb/s of payload -> Mops
                quantity, measured, metric = "rate_mops", pm.value * 1e3 / (8 * payload), "bw_avg"
        if not (measured > 0 and math.isfinite(measured)):
            skip(f"{metric} is {measured}: nothing to fit")
            continue
        atomic = "CMP_AND_SWAP" if verb == "CAS" else "FETCH_AND_ADD"
        inline = payload if m.inline else 0
        max_inline = payload if m.inline and payload > base.nic.max_inline else None
        factor = 1.0
        if m.tool in TOOLS:
            run = runs.get((src, line))
            # perftest's -I: what the header says ("Max inline data"), else the tool's
            # default (the simulator's perftest inlines up to the profile's max_inline)
            inline = getattr(run, "inline_size", None)
            max_inline = inline if inline and inline > base.nic.max_inline and \
                payload <= inline else None
            if run is not None and run.bidirectional:
                skip("bidirectional perftest run (the simulator runs one direction)")
                continue
            if m.transport not in ("RC", "UC", "UD"):
                skip(f"{m.transport} connections are not simulated")
                continue
            exp = Experiment(
                tool=m.tool, size=payload, conn=m.transport, qps=m.qps,
                tx_depth=m.depth if m.kind == "bw" else None,
                cq_mod=m.signal_every if m.kind == "bw" else 100,
                inline=inline, mtu=m.mtu, max_inline=max_inline, atomic=atomic,
                outstanding=getattr(run, "outstanding_reads", None),
                iters=m.iterations if m.kind == "bw" else 0)
            series = f"{Path(src).name}|{m.tool}|{m.transport}|{m.qps}|{m.depth}|{m.signal_every}"
            title = f"{m.tool}" + (f" -c {m.transport}" if m.transport != "RC" else "") \
                + (f" -q {m.qps}" if m.qps > 1 else "") + f" ({Path(src).name})"
            x, xlabel = float(payload), "payload [B]"
        elif m.tool == "rnicsim-probe":
            # the remote region: random offsets over region_bytes (pages sweep), or
            # ``addresses`` targets 64 B apart (atomics sweep), with its page size
            region = m.region_bytes if m.random_offsets else 0
            if m.random_offsets and region < _ceil64(payload):
                skip(f"random offsets over a region of {m.region_bytes} B: region_bytes "
                     f"must hold at least one {_ceil64(payload)} B slot")
                continue
            remote = dict(addresses=m.addresses, region=region, page_size=m.page_size)
            if m.kind == "lat":
                if m.batch > 1 or m.threads > 1:
                    skip("latency with a batch or several threads: the probe measures none")
                    continue
                cqe = True
                if verb == "READ":
                    tool = "ib_read_lat"
                elif verb in ("CAS", "FAA"):
                    tool = "ib_atomic_lat"
                elif verb == "WRITE":
                    tool = "ib_write_lat"
                elif m.qps == 1:     # SEND ping-pong against the server's echo
                    tool, factor, cqe = "ib_send_lat", 2.0, False
                else:
                    skip("SEND ping-pong latency over several QPs: the probe measures none")
                    continue
                if m.latency_convention == "half_rtt":
                    factor = 1.0
                exp = Experiment(tool=tool, size=payload, conn=m.transport, qps=m.qps,
                                 inline=inline, mtu=m.mtu, max_inline=max_inline,
                                 atomic=atomic, cqe=cqe, **remote)
            else:
                tool = {"READ": "ib_read_bw", "WRITE": "ib_write_bw", "SEND": "ib_send_bw",
                        "CAS": "ib_atomic_bw", "FAA": "ib_atomic_bw"}[verb]
                iters = warmup = 0              # steady state
                if region:
                    # Random targets warm the translation cache over many operations:
                    # the probe's own warm-up and measured operations, per QP.
                    # (each posting thread: a warm-up of a tenth of its operations, at
                    # most 10000, at least one doorbell/signal unit per QP)
                    unit = max(m.batch, m.signal_every)
                    per_thread = max(1, m.iterations // m.threads)
                    qpt = max(1, m.qps // m.threads)
                    warm = max(min(per_thread // 10, 10000), qpt * unit)
                    iters, warmup = -(-per_thread // qpt), -(-warm // qpt)
                exp = Experiment(tool=tool, size=payload, conn=m.transport, qps=m.qps,
                                 tx_depth=m.depth, cq_mod=m.signal_every, post_list=m.batch,
                                 inline=inline, mtu=m.mtu, max_inline=max_inline,
                                 atomic=atomic, iters=iters, threads=m.threads,
                                 warmup=warmup, **remote)
            xattr, xlabel = _SWEEP_X.get(m.sweep, ("payload", "payload [B]"))
            x = float(getattr(m, xattr, payload))
            # a series: the points of one sweep that differ only in its x. The qps sweep's
            # depth per QP follows the QP count (max(2, min(16, 256 / QPs))), so it is part
            # of x there, not of the series; its one-thread and several-thread throughput
            # points are two series.
            fixed = {k: getattr(m, k) for k in ("qps", "threads", "depth", "batch",
                                                 "signal_every", "inline")
                     if k != xattr and not (m.sweep == "qps" and k == "depth")}
            if xattr != "payload":
                fixed["payload"] = payload
            series = f"{Path(src).name}|{m.sweep}|{verb}|{m.transport}|{m.kind}|" + \
                "|".join(f"{k}={v}" for k, v in sorted(fixed.items()))
            title = (f"probe {m.sweep}: {verb} {m.transport} "
                     f"{'latency' if m.kind == 'lat' else 'throughput'}"
                     + (" inline" if m.inline and xattr != "inline" else "")
                     + (f" {payload} B" if xattr != "payload" else "")
                     + (f" {m.threads} threads" if m.threads > 1 and xattr != "threads"
                        else "")
                     + f" ({Path(src).name})")
        else:
            skip(f"unknown tool {m.tool!r}")
            continue
        points.append(Point(exp, quantity, measured, factor, series, title, x, xlabel, src,
                            line, metric, bw))
    return points, unmapped


# ---------------------------------------------------------------------------------------
# the simulator, cached
# ---------------------------------------------------------------------------------------


def bw_plan(exp: Experiment) -> tuple[int, ...]:
    """Iterations per QP to simulate for a bandwidth row: the measured count when it fits
    the budget, else two shorter runs (n, 2n) whose durations are extrapolated linearly.
    With a warm-up (random targets: caches that warm over many operations), the runs are
    the warm-up alone and the warm-up with the measured operations, never shortened."""
    if exp.warmup > 0:
        return (exp.warmup, exp.warmup + exp.iters)
    per_run = max(8, min(max(32, min(BW_OPS, 4000 // exp.qps)),
                         BW_BYTES // max(1, exp.size * exp.qps)))
    if 0 < exp.iters <= per_run:
        return (exp.iters,)
    return (per_run // 2, per_run)


def _args(exp: Experiment, profile: Profile) -> PerftestArgs:
    return PerftestArgs(tool=exp.tool, size=exp.size, qps=exp.qps, tx_depth=exp.tx_depth,
                        post_list=exp.post_list, conn=exp.conn, inline=exp.inline,
                        mtu=exp.mtu, cq_mod=exp.cq_mod, outstanding=exp.outstanding,
                        atomic=exp.atomic, nic=profile.name, post_to_cqe=exp.cqe,
                        threads=exp.threads, addresses=exp.addresses, region=exp.region,
                        page_size=exp.page_size)


def simulate(exp: Experiment, profile: Profile) -> float:
    """The experiment's fitted quantity: median latency [us], message rate [Mops], or for
    a bare coroutine switch the host's ``coroutine_switch`` [ns]."""
    if exp.tool == "coro_switch":
        return float(profile.host.coroutine_switch)
    if exp.tool == "coro_read":
        return simulate_coro(exp, profile)
    if exp.tool == "arb_lat":
        # every iteration starts idle and the simulator has no noise: a few suffice
        return run_behind(profile, exp.behind, 5, exp.size, exp.gap_ns)
    if exp.tool == "rpc_echo":
        # steady state: a warm-up that fills every queue and sets the loops in step, then
        # a span long enough that the loops' periodic patterns average out (to about 0.5%)
        w = exp.tx_depth or 1
        return run_echo(profile, exp.conn, exp.size, w, exp.post_list,
                        bool(exp.inline) and exp.size <= exp.inline, max(16 * w, 512),
                        max(32 * w, 2048))
    a = _args(exp, profile)
    if exp.kind == "lat":
        return run_lat(a, profile, exp.size, LAT_ITERS)["t_typical"]
    plan = bw_plan(exp)
    if len(plan) == 1:
        return run_bw(a, profile, exp.size, plan[0])["msg_rate_mpps"]
    n1, n2 = plan
    t1 = n1 * exp.qps / run_bw(a, profile, exp.size, n1)["msg_rate_mpps"]   # us
    t2 = n2 * exp.qps / run_bw(a, profile, exp.size, n2)["msg_rate_mpps"]
    per_round = (t2 - t1) / (n2 - n1)       # us per operation on every QP
    fill = t1 - n1 * per_round              # pipeline fill and drain [us]
    if per_round <= 0:
        return n2 * exp.qps / t2
    if exp.iters <= 0 or exp.warmup > 0:    # steady state, or the operations after warm-up
        return exp.qps / per_round
    return exp.iters * exp.qps / (fill + exp.iters * per_round)


def simulate_coro(exp: Experiment, profile: Profile) -> float:
    """Message rate [Mops] of the probe's coro loop: one client thread whose
    ``exp.coroutines`` coroutines each post one signaled READ of ``exp.size`` B on their
    own QP to one server and yield until it completes (``workloads.microbench`` with
    ``qp_choice: coroutine`` and the point's ``cq_layout``), in steady state."""
    spec = MicrobenchSpec(verb="read", payload=exp.size, mode="client_server", servers=1,
                          threads=1, coroutines=exp.coroutines, outstanding=1,
                          qps_per_peer=exp.coroutines, qp_choice="coroutine",
                          cq_layout=exp.cq_layout, inline=False)
    # 20 us of warm-up fetch every QP context and set the loop in step; the simulator has
    # no noise; a 200-us window resolves the rate to 0.5% at 1 M/s (whole operations)
    return run_microbench(profile, spec, nodes=2, warmup_ns=20_000,
                          measure_ns=200_000)["throughput_mops"]


class Simulator:
    """Predictions of the points for parameter values, with every run cached."""

    def __init__(self, base: Profile, params: list[Param], points: list[Point]) -> None:
        self.base = base
        self.params = params
        self.points = points
        self.measured = np.array([p.measured for p in points])
        self.cache: dict[tuple, float] = {}
        self._profiles: "OrderedDict[tuple, Profile]" = OrderedDict()
        self.runs = 0
        self.sim_seconds = 0.0
        self.weights = np.ones(len(points))

    def profile(self, values: tuple, exp: Experiment | None = None) -> Profile:
        """The base profile with ``values`` (one per fitted param) and ``exp``'s MTU,
        outstanding-read and inline overrides; the 256 most recent are cached."""
        extra = (exp.mtu, exp.outstanding, exp.max_inline) if exp else (None, None, None)
        key = (values, extra)
        prof = self._profiles.get(key)
        if prof is not None:
            self._profiles.move_to_end(key)
            return prof
        over: dict[str, Any] = {}
        for p, v in zip(self.params, values):
            over[p.key] = int(round(v)) if p.discrete else float(v)
        if exp is not None:
            if exp.mtu:
                over["link.mtu"] = int(exp.mtu)
            if exp.outstanding:
                over["nic.max_rd_atomic"] = int(exp.outstanding)
            if exp.max_inline:
                over["nic.max_inline"] = int(exp.max_inline)
        prof = self.base.with_overrides(over, "rnicsim calibrate") if over else self.base
        self._profiles[key] = prof
        if len(self._profiles) > 256:
            self._profiles.popitem(last=False)
        return prof

    def key(self, values: Sequence[float]) -> tuple:
        """Cache key of ``values``: whole-number params rounded, so values that round
        alike share one simulator run."""
        return tuple(int(round(v)) if p.discrete else float(v)
                     for p, v in zip(self.params, values))

    def run(self, exp: Experiment, values: tuple) -> float:
        """:func:`simulate` ``exp`` at ``values`` (a :meth:`key`), cached: median
        latency [us] or message rate [Mops], before the point's ``factor``."""
        k = (exp, values)
        v = self.cache.get(k)
        if v is None:
            t = time.perf_counter()
            v = simulate(exp, self.profile(values, exp))
            self.sim_seconds += time.perf_counter() - t
            self.runs += 1
            self.cache[k] = v
        return v

    def predict(self, values: Sequence[float], rows: Sequence[int] | None = None) -> np.ndarray:
        """Simulated values (in the measured quantity) of ``rows`` (all points if None)."""
        vk = self.key(values)
        idx = range(len(self.points)) if rows is None else rows
        return np.array([self.points[i].factor * self.run(self.points[i].exp, vk) for i in idx])

    def residuals(self, values: Sequence[float], rows: Sequence[int] | None = None) -> np.ndarray:
        """Relative residuals simulated / measured - 1 of ``rows`` (all if None), unweighted."""
        meas = self.measured if rows is None else self.measured[list(rows)]
        return self.predict(values, rows) / meas - 1.0

    def set_weights(self, how: str) -> None:
        """Per-point weights of the squared residuals, mean 1: ``series`` gives every
        series the same total weight (a 1-point atomic series counts as much as a
        23-size sweep), ``points`` every point the same."""
        n = len(self.points)
        if how == "points" or n == 0:
            self.weights = np.ones(n)
            return
        size: dict[str, int] = {}
        for p in self.points:
            size[p.series] = size.get(p.series, 0) + 1
        self.weights = np.array([n / (len(size) * size[p.series]) for p in self.points])

    def in_scope(self, param: Param) -> list[int]:
        """Rows whose experiment the parameter can move (see the module docstring)."""
        out = []
        for i, pt in enumerate(self.points):
            e = pt.exp
            s = param.scope
            if (s == "all" or s == e.op_class or (s == "multi_qp" and e.qps > 1)
                    or (s == "coro" and e.coroutines > 0)):
                out.append(i)
        return out


# ---------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------


@dataclass
class ParamResult:
    """Outcome for one parameter."""

    param: Param
    fitted: float
    identified: bool
    reason: str = ""              # why not identified (or a caveat)
    ci: tuple[float, float] | None = None
    sensitivity: float = 0.0      # largest |elasticity| at the fitted point
    at_bound: bool = False
    files: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.param.key


@dataclass
class FitResult:
    """Everything the profile writer and the report need."""

    base: Profile
    params: list[ParamResult]
    points: list[Point]
    unmapped: list[Unmapped]
    base_pred: np.ndarray
    fit_pred: np.ndarray
    inputs: list[str]
    bootstrap: int
    seed: int
    elapsed_s: float
    sim_runs: int
    sim_seconds: float
    cost_base: float
    cost_fit: float
    unused_metrics: int = 0
    notes: list[str] = field(default_factory=list)
    boot_samples: np.ndarray | None = None

    def values(self) -> dict[str, float]:
        return {r.key: r.fitted for r in self.params}


class _Log:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"calibrate [{time.perf_counter() - self.t0:6.1f}s] {msg}", file=sys.stderr,
                  flush=True)


def _jacobian(sim: Simulator, values: np.ndarray, cols: list[int], lb: np.ndarray,
              ub: np.ndarray, rows: Sequence[int] | None = None,
              central: bool = False) -> np.ndarray:
    """d residual / dx for the continuous params ``cols`` by finite differences
    (forward, or central; one-sided at a bound); rows outside a parameter's scope are 0
    without running the simulator."""
    rows = list(range(len(sim.points))) if rows is None else list(rows)
    pos = {r: k for k, r in enumerate(rows)}
    r0 = sim.residuals(values, rows)
    J = np.zeros((len(rows), len(cols)))
    for c, j in enumerate(cols):
        p = sim.params[j]
        scope = [r for r in sim.in_scope(p) if r in pos]
        if not scope:
            continue
        idx = [pos[r] for r in scope]
        x = p.to_x(values[j])
        up = x + FD_STEP <= ub[j]
        down = x - FD_STEP >= lb[j]

        def at(h: float) -> np.ndarray:
            v2 = values.copy()
            v2[j] = p.from_x(x + h)
            return sim.residuals(v2, scope)

        if central and up and down:
            J[idx, c] = (at(FD_STEP) - at(-FD_STEP)) / (2 * FD_STEP)
        else:
            h = FD_STEP if up else -FD_STEP
            J[idx, c] = (at(h) - r0[idx]) / h
    return J


def _elasticities(J: np.ndarray, cols: list[int], params: list[Param], values: np.ndarray,
                  measured: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """d ln(simulated) / d ln(param) from the residual Jacobian in x."""
    E = J * (measured / np.maximum(pred, 1e-300))[:, None]
    for c, j in enumerate(cols):
        p = params[j]
        E[:, c] /= p.dlog_dx(p.to_x(values[j]))
    return E


def _reach(p: Param, value: float) -> float:
    """How far (as a factor - 1) the parameter may move from ``value`` within its bounds."""
    return max(p.hi / value - 1.0, 1.0 - p.lo / value)


def _identify(J: np.ndarray, cols: list[int], params: list[Param], values: np.ndarray,
              measured: np.ndarray, pred: np.ndarray, weights: np.ndarray,
              prefer: Sequence[int] = ()) -> tuple[list[int], dict[int, str]]:
    """Split ``cols`` into identified ones and {col: reason} for the others.

    Not identified: no point would move by SENS_TOL (relative, linearised) anywhere within
    the parameter's bounds, or the column is within COLLINEAR_TOL (sine) of the span of
    the more influential identified columns (columns in ``prefer`` are taken first)."""
    E = _elasticities(J, cols, params, values, measured, pred)
    sens = np.abs(E).max(axis=0) if len(E) else np.zeros(len(cols))
    reach = np.array([sens[c] * _reach(params[j], values[j]) for c, j in enumerate(cols)])
    reasons: dict[int, str] = {}
    J = J * np.sqrt(weights)[:, None]      # the columns as the fit sees them
    order = sorted(range(len(cols)),
                   key=lambda c: (cols[c] not in prefer, -np.linalg.norm(J[:, c])))
    chosen: list[int] = []
    basis = np.zeros((J.shape[0], 0))
    for c in order:
        j = cols[c]
        if reach[c] < SENS_TOL:
            p = params[j]
            reasons[j] = (f"no mapped measurement responds to it: anywhere in "
                          f"{p.fmt(p.lo)}-{p.fmt(p.hi)} it would move none by more than "
                          f"{100 * reach[c]:.1f}% (elasticity {sens[c]:.4f})")
            continue
        v = J[:, c]
        n = np.linalg.norm(v)
        if basis.shape[1]:
            coef = basis.T @ v
            rest = v - basis @ coef
            sine = np.linalg.norm(rest) / n
            if sine < COLLINEAR_TOL:
                # name the identified parameters it is confounded with
                sol, *_ = np.linalg.lstsq(J[:, chosen], v, rcond=None)
                w = np.abs(sol)
                names = [params[cols[chosen[k]]].key for k in np.argsort(-w)[:3]
                         if w[k] > 0.05 * w.max()]
                reasons[j] = (f"its effect cannot be told apart from {', '.join(names)} "
                              f"(sine {sine:.3f} < {COLLINEAR_TOL})")
                continue
            rest = rest / np.linalg.norm(rest)
        else:
            rest = v / n
        basis = np.column_stack([basis, rest])
        chosen.append(c)
    return [cols[c] for c in sorted(chosen)], reasons


def _lsq(sim: Simulator, values: np.ndarray, free: list[int], lb: np.ndarray, ub: np.ndarray,
         max_nfev: int, rows: list[int] | None = None, weights: np.ndarray | None = None,
         fixed_jac: np.ndarray | None = None, step: float = 0.3, central: bool = False
         ) -> tuple[np.ndarray, np.ndarray | None]:
    """Least squares over the x of the parameters ``free`` (offsets from ``values``, so the
    first trust region is about ``step`` in x); returns the new values and the Jacobian
    of the residuals of ``rows`` at them (unweighted)."""
    if not free:
        return values.copy(), None
    ps = [sim.params[j] for j in free]
    sw = np.sqrt(weights) if weights is not None else None
    start = np.array([p.to_x(values[j]) for p, j in zip(ps, free)])

    def full(d: np.ndarray) -> np.ndarray:
        v = values.copy()
        for k, (p, j) in enumerate(zip(ps, free)):
            v[j] = p.from_x(start[k] + d[k])
        return v

    ridge = math.sqrt(RIDGE)

    def fun(x: np.ndarray) -> np.ndarray:
        r = sim.residuals(full(x), rows)
        r = r * sw if sw is not None else r
        return np.concatenate([r, ridge * (start + x)])

    def jac(x: np.ndarray) -> np.ndarray:
        if fixed_jac is not None:
            J = fixed_jac
        else:
            J = _jacobian(sim, full(x), free, lb, ub, rows, central=central)
        J = J * sw[:, None] if sw is not None else J
        return np.vstack([J, ridge * np.eye(len(free))])

    lo = lb[free] - start - 1e-12
    hi = ub[free] - start + 1e-12
    res = least_squares(fun, np.zeros(len(free)), jac=jac, bounds=(lo, hi), method="trf",
                        x_scale=step, max_nfev=max_nfev, ftol=1e-5, xtol=1e-5, gtol=1e-8)
    J = np.asarray(res.jac)[: -len(free)]
    J = J / sw[:, None] if sw is not None else J
    return full(res.x), J


def _rms(sim: Simulator, values: np.ndarray) -> float:
    return float(math.sqrt(np.mean(sim.residuals(values) ** 2)))


def _cost_of(sim: Simulator, values: np.ndarray, j: int, g: int, scope: list[int],
             weights: np.ndarray | None) -> tuple[float, np.ndarray]:
    """(weighted cost, predictions) of the rows ``scope`` with parameter j at ``g``."""
    v = values.copy()
    v[j] = g
    pred = sim.predict(v, scope) if scope else np.zeros(0)
    r = pred / sim.measured[scope] - 1.0 if scope else np.zeros(0)
    w = weights[scope] if weights is not None else sim.weights[scope]
    return float(np.sum(w * r * r)), pred


def _grid_search(sim: Simulator, values: np.ndarray, j: int, rows: list[int] | None = None,
                 weights: np.ndarray | None = None
                 ) -> tuple[int, bool, list[int], list[int]]:
    """Best value of the whole-number parameter j on its grid, others fixed.

    Returns (best, responds, values that fit equally well, rows that respond); among equal
    fits the value nearest the base one is taken."""
    p = sim.params[j]
    scope = sim.in_scope(p)
    if rows is not None:
        scope = [r for r in scope if r in set(rows)]
    costs: dict[int, float] = {}
    preds: dict[int, np.ndarray] = {}
    for g in p.grid():
        costs[g], preds[g] = _cost_of(sim, values, j, g, scope, weights)
    ref = preds[min(preds, key=lambda g: abs(math.log(g / p.base)))]
    moved = set()
    for g, pr in preds.items():
        if len(pr):
            rel = np.abs(pr / np.maximum(ref, 1e-300) - 1.0)
            moved |= {scope[i] for i in np.nonzero(rel > DISCRETE_TOL)[0]}
    responds = bool(moved)
    cmin = min(costs.values())
    ties = [g for g, c in costs.items() if c <= cmin * (1 + 1e-9) + 1e-15]
    best = min(ties, key=lambda g: (abs(math.log(g / p.base)), g))
    return best, responds, sorted(ties), sorted(moved)


def _equal_fit_range(sim: Simulator, values: np.ndarray, j: int, ties: list[int]
                     ) -> tuple[int, int]:
    """The whole numbers next to the grid values ``ties`` that fit at least as well.

    The grid (base x 2^k) skips values, and a step in the data, such as a cache the QPs
    outgrow, lies anywhere between two sweep points: the data bound a count to a range
    that can reach past the grid values, or lie between them and the base. Bisection on
    each side, between the outermost equal fit and the next grid value, which fits worse
    (the cost is taken to step once there)."""
    p = sim.params[j]
    scope = sim.in_scope(p)
    cmin = _cost_of(sim, values, j, ties[0], scope, None)[0]

    def good(g: int) -> bool:
        return _cost_of(sim, values, j, g, scope, None)[0] <= cmin * (1 + 1e-9) + 1e-15

    grid = p.grid()
    below = [g for g in grid if g < ties[0]]
    above = [g for g in grid if g > ties[-1]]
    lo, hi = ties[0], ties[-1]
    if below:
        bad, ok = below[-1], lo
        while ok - bad > 1:
            mid = (ok + bad) // 2
            bad, ok = (bad, mid) if good(mid) else (mid, ok)
        lo = ok
    if above:
        ok, bad = hi, above[0]
        while bad - ok > 1:
            mid = (ok + bad) // 2
            ok, bad = (mid, bad) if good(mid) else (ok, mid)
        hi = ok
    return lo, hi


#: NIC models a Mellanox driver's devices can be: mlx4_N is a ConnectX-3 (or older),
#: mlx5_N a ConnectX-4 or later; other names (RoCE soft devices, other vendors) say nothing.
_DRIVER_MODELS = {"mlx4": ("ConnectX-3",), "mlx5": ("ConnectX-4", "ConnectX-5")}


def nic_mismatch_notes(ms: Sequence[Measurement], base: Profile) -> list[str]:
    """One note per measured device (perftest ``Device``, the probe client's ``name``)
    whose driver never drives the base profile's ``nic.model``: the fit then moves only
    the chosen parameters of another NIC's profile. Not an error, since a user may start
    from a neighbouring model on purpose, but said in the report and on stderr."""
    files: dict[str, set[str]] = {}
    for m in ms:
        if m.device:
            files.setdefault(m.device, set()).add(Path(m.source).name)
    notes = []
    for dev in sorted(files):
        models = _DRIVER_MODELS.get(dev.split("_")[0])
        if models and base.nic.model not in models:
            notes.append(f"{dev} ({_files_text(sorted(files[dev]))}) is a "
                         f"{' or '.join(models)}, the base profile {base.name} a "
                         f"{base.nic.model}: parameters not fitted keep that NIC's values; "
                         f"a base profile of the measured NIC fits better")
    return notes


def arb_check(points: list[Point], base: Profile
              ) -> tuple[list[Point], list[Unmapped], list[str]]:
    """The probe's arb points fit only under the transmit arbitration they show: when the
    median behind the largest WRITE is nearer what the other choice (``message`` <->
    ``packet``) simulates than what ``base``'s does, every arb point is left out (a fit
    would bend the link rate and PCIe to explain a whole message's wire time) with a
    note to set ``nic.tx_arbitration`` in the base profile; ``nic.tx_arbitration`` is a
    choice, not a number, and is never fitted. Returns (points kept, left out, notes)."""
    arb = [p for p in points if p.exp.tool == "arb_lat" and p.exp.behind > 0]
    mode = base.nic.tx_arbitration
    if not arb or mode not in ("message", "packet"):
        return points, [], []
    other = "packet" if mode == "message" else "message"
    probe = max(arb, key=lambda p: p.exp.behind)
    alt = base.with_overrides({"nic.tx_arbitration": other}, "arb check")
    err = {m: abs(math.log(simulate(probe.exp, prof) / probe.measured))
           for m, prof in ((mode, base), (other, alt))}
    if err[other] >= err[mode]:
        return points, [], []
    note = (f"{Path(probe.source).name}: a 64-B WRITE behind a {probe.exp.behind}-B one "
            f"took {probe.measured:.3g} us, nearer nic.tx_arbitration: {other} than the base "
            f"profile's {mode}; the arb points are left out: set nic.tx_arbitration: {other} "
            f"in the base profile and fit again")
    gone = [Unmapped(p.source, p.line, p.exp.label(),
                     f"the NIC's arbitration looks like {other}, the base profile's is {mode}")
            for p in points if p.exp.tool == "arb_lat"]
    return [p for p in points if p.exp.tool != "arb_lat"], gone, [note]


def calibrate(inputs: Sequence[str], base_name: str, param_names: Sequence[str] | None = None,
              bootstrap: int = 20, seed: int = 1, iterations: int = 20,
              quiet: bool = True, weighting: str = "points") -> FitResult:
    """Fit ``base_name``'s parameters to the measurements in ``inputs`` (see module doc).

    ``inputs`` are perftest outputs and probe JSON-lines files or directories;
    ``base_name`` a profile name or YAML path; ``param_names`` dotted profile keys
    (default: ``DEFAULT_PARAMS`` plus ``SWEEP_PARAMS``/``PAGES_PARAMS``/``CORO_PARAMS``/
    ``RPC_PARAMS`` when the data hold several-QP, random-offset, coro or rpc
    experiments); ``bootstrap`` resamples for the 95%
    intervals (0: none); ``iterations`` simulator evaluations per least-squares round;
    ``weighting`` ``"points"`` or ``"series"``. Returns the :class:`FitResult`
    (:func:`write_profile` and :mod:`calibration.report` turn it into files); raises
    :class:`InputError` when no measurement can be read, :class:`TypeError` or
    :class:`ValueError` naming the argument for arguments of the wrong type or range
    (``inputs`` may be one path; ``param_names`` must be a list, not a comma string)."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    inputs = [str(i) for i in inputs]
    if not inputs:
        raise ValueError("calibrate: inputs must name at least one file or directory")
    if isinstance(param_names, str):
        raise TypeError("calibrate: param_names must be a list of profile keys such as "
                        f"['pcie.latency', 'host.mmio'] (or None), got the string {param_names!r}")
    if param_names is not None and not list(param_names):
        raise ValueError("calibrate: param_names must hold at least one profile key "
                         "(None: the defaults)")
    for arg, v, least in (("bootstrap", bootstrap, 0), ("iterations", iterations, 1),
                          ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"calibrate: {arg} must be a whole number, got {v!r}")
        if v < least:
            raise ValueError(f"calibrate: {arg} must be a whole number >= {least}, got {v!r}")
    if weighting not in ("points", "series"):
        raise ValueError(f"calibrate: weighting must be 'points' or 'series', got {weighting!r}")
    log = _Log(quiet)
    t_start = time.perf_counter()
    base = load_profile(base_name)
    ms = load_measurements(list(inputs))
    if not ms:
        raise InputError(", ".join(inputs), "", "at least one measurement (perftest rows or "
                         "probe measurement lines)")
    points, unmapped = map_measurements(ms, base)
    points, gone, arb_notes = arb_check(points, base)
    unmapped += gone
    for note in nic_mismatch_notes(ms, base) + arb_notes:
        log(f"warning: {note}")
    auto = param_names is None
    if auto:
        names = list(DEFAULT_PARAMS)
        if any(p.exp.qps > 1 for p in points):
            names += [k for k in SWEEP_PARAMS if _param_node(base.model, k) is not None]
        if any(p.exp.region for p in points):
            names += [k for k in PAGES_PARAMS if _param_node(base.model, k) is not None]
        if any(p.exp.coroutines for p in points):
            names += [k for k in CORO_PARAMS if _param_node(base.model, k) is not None]
        if any(p.exp.tool == "rpc_echo" for p in points):
            names += [k for k in RPC_PARAMS
                      if k not in names and _param_node(base.model, k) is not None]
    else:
        names = list(param_names)
    params = resolve_params(base, names)
    log(f"{len(ms)} measurements, {len(points)} mapped points, {len(unmapped)} unmapped; "
        f"{len(params)} parameters")

    # Base predictions; experiments the simulator refuses are unmapped.
    values0 = np.array([p.base for p in params], dtype=float)
    sim = Simulator(base, params, points)
    keep: list[Point] = []
    for pt in points:
        try:
            sim.run(pt.exp, sim.key(values0))
            keep.append(pt)
        except (ValueError, InputError) as e:
            unmapped.append(Unmapped(pt.source, pt.line, pt.exp.label(),
                                     f"the simulator refused the experiment: {e}"))
    if not keep:
        listing = "; ".join(f"{Path(u.source).name}:{u.line} {u.reason}" for u in unmapped[:5])
        raise InputError(", ".join(inputs), "", "at least one measurement that maps onto a "
                         f"simulator experiment (none did: {listing})")
    points = keep
    cache = sim.cache
    sim = Simulator(base, params, points)
    sim.cache = cache
    sim.set_weights(weighting)
    base_pred = sim.predict(values0)
    cost_base = float(np.sum((base_pred / sim.measured - 1) ** 2))
    log(f"base: rms relative error {math.sqrt(cost_base / len(points)):.3f}")

    lb = np.array([p.to_x(p.lo) for p in params])
    ub = np.array([p.to_x(p.hi) for p in params])
    cont = [j for j, p in enumerate(params) if not p.discrete]
    disc = [j for j, p in enumerate(params) if p.discrete]
    values = values0.copy()
    reasons: dict[int, str] = {}
    disc_ok: dict[int, bool] = {}
    disc_rows: dict[int, list[int]] = {}
    disc_ties: dict[int, list[int]] = {}

    def search_discrete() -> bool:
        changed = False
        for j in disc:
            best, responds, ties, moved = _grid_search(sim, values, j)
            disc_ok[j] = responds
            disc_rows[j] = moved
            disc_ties[j] = ties
            if not responds:
                reasons[j] = "no mapped measurement responds to it over " + \
                    f"{params[j].grid()[0]}-{params[j].grid()[-1]}"
                if values[j] != params[j].base:
                    values[j] = params[j].base
                    changed = True
                continue
            reasons.pop(j, None)
            if best != values[j]:
                values[j] = best
                changed = True
        return changed

    if disc:
        search_discrete()
        log("whole-number parameters: " + ", ".join(
            f"{params[j].key}={int(values[j])}" for j in disc))

    # Continuous: identify at the start point and fit; identify again at the fitted point
    # (central differences: a fitted point often sits on a kink, where one bottleneck
    # takes over from another); refit when that changes what is identified.
    free: list[int] = []
    Jf = np.zeros((len(points), 0))
    if cont:
        J0 = _jacobian(sim, values, cont, lb, ub)
        free, why = _identify(J0, cont, params, values, sim.measured, sim.predict(values),
                              sim.weights)
        reasons.update(why)
        log(f"identified at the base point: {', '.join(params[j].key for j in free) or 'none'}")
        for rnd in range(2):
            values, _ = _lsq(sim, values, free, lb, ub, iterations if rnd == 0 else
                             max(4, iterations // 2), weights=sim.weights)
            log(f"fit: rms relative error {_rms(sim, values):.4f} ({sim.runs} runs)")
            if disc and search_discrete():
                log("whole-number parameters moved: " + ", ".join(
                    f"{params[j].key}={int(values[j])}" for j in disc))
            Jf = _jacobian(sim, values, cont, lb, ub, central=True)
            if rnd == 1:
                break
            free2, why2 = _identify(Jf, cont, params, values, sim.measured,
                                    sim.predict(values), sim.weights, prefer=free)
            for j in set(cont) - set(free2):
                reasons[j] = why2.get(j, reasons.get(j, ""))
                if j in free:
                    reasons[j] = "identified at the base point but not at the fitted " \
                        "point: " + reasons[j]
            for j in set(free2):
                reasons.pop(j, None)
            if set(free2) == set(free):
                break
            log("identified at the fitted point: "
                f"{', '.join(params[j].key for j in free2) or 'none'}; refitting")
            for j in set(free) - set(free2):
                values[j] = params[j].base
            free = free2
    fit_values = values.copy()
    for j in disc:
        if disc_ok.get(j) and params[j].kind == "count":
            lo, hi = _equal_fit_range(sim, fit_values, j, disc_ties[j])
            disc_ties[j] = sorted(set(disc_ties[j]) | {lo, hi})
    fit_pred = sim.predict(fit_values)
    cost_fit = float(np.sum((fit_pred / sim.measured - 1) ** 2))
    log(f"fitted: rms relative error {math.sqrt(cost_fit / len(points)):.4f}")

    # Bootstrap over measurements.
    samples = np.tile(fit_values, (0, 1))
    # One point resamples to itself: every refit would land on the fitted value and give
    # a zero-width interval that looks like a perfectly pinned parameter.
    one_point = bootstrap > 0 and len(points) < 2
    if one_point:
        log("bootstrap skipped: one fitted point gives no confidence interval")
    if bootstrap > 0 and not one_point and (free or any(disc_ok.values())):
        rng = np.random.default_rng(seed)
        Jfree = Jf[:, [cont.index(j) for j in free]] if free else np.zeros((len(points), 0))
        rows_all = []
        n = len(points)
        for b in range(bootstrap):
            w = np.bincount(rng.integers(0, n, n), minlength=n) * sim.weights
            rows = [i for i in range(n) if w[i] > 0]
            v = fit_values.copy()
            for j in disc:
                if disc_ok.get(j):
                    v[j] = _grid_search(sim, fit_values, j, rows, w)[0]
            if free:
                v, _ = _lsq(sim, v, free, lb, ub, BOOT_NFEV, rows, w[rows], Jfree[rows],
                            step=0.05)
            rows_all.append(v)
            if (b + 1) % max(1, bootstrap // 5) == 0:
                log(f"bootstrap {b + 1}/{bootstrap} ({sim.runs} runs)")
        samples = np.array(rows_all)

    # Results per parameter.
    E = _elasticities(Jf, cont, params, fit_values, sim.measured, fit_pred) if cont else None
    results: list[ParamResult] = []
    for j, p in enumerate(params):
        identified = (j in free) or (p.discrete and disc_ok.get(j, False))
        r = ParamResult(p, float(fit_values[j]) if identified else p.base, identified,
                        reasons.get(j, "") if not identified else "")
        if p.discrete:
            rows = disc_rows.get(j, [])
        else:
            col = np.abs(E[:, cont.index(j)]) if E is not None and len(E) else np.zeros(0)
            r.sensitivity = float(col.max()) if len(col) else 0.0
            rows = [i for i in range(len(points)) if len(col) and col[i] >= SENS_TOL / 2]
        r.files = sorted({points[i].file for i in rows})
        if identified:
            if len(samples) >= 2:
                lo, hi = np.percentile(samples[:, j], [2.5, 97.5])
                r.ci = (float(min(lo, r.fitted)), float(max(hi, r.fitted)))
            ties = disc_ties.get(j, [])
            if p.discrete and len(ties) > 1:
                lo, hi = r.ci or (r.fitted, r.fitted)
                r.ci = (float(min(lo, ties[0])), float(max(hi, ties[-1])))
                r.reason = (f"the data only bound it: {ties[0]}-{ties[-1]} fit equally well; "
                            "the grid value nearest the base one is kept")
            x = p.to_x(r.fitted)
            if not p.discrete and (x <= lb[j] + 1e-3 or x >= ub[j] - 1e-3):
                r.at_bound = True
                r.reason = (f"at the bound of the search ({p.fmt(p.lo)}-{p.fmt(p.hi)}): "
                            "the data ask for a value outside it; check the model or inputs")
            if p.discrete:
                g = p.grid()
                if (r.fitted == g[0] and g[0] > 1) or (r.fitted == g[-1] and len(ties) < 2):
                    r.at_bound = True
                    r.reason = f"at the end of the searched grid {g}"
        results.append(r)
    mapped = {(p.source, p.line) for p in points}
    unused = sum(1 for m in ms if (m.source, m.line) in mapped) - len(points)
    notes = nic_mismatch_notes(ms, base) + arb_notes
    if one_point:
        notes.append(f"no confidence intervals: the {bootstrap} bootstrap resamples of one "
                     "fitted point would all be that point; measure more points")
    return FitResult(base, results, points, unmapped, base_pred, fit_pred,
                     [str(i) for i in inputs], bootstrap, seed,
                     time.perf_counter() - t_start, sim.runs, sim.sim_seconds, cost_base,
                     cost_fit, max(0, unused), notes, samples if len(samples) else None)


# ---------------------------------------------------------------------------------------
# the fitted profile
# ---------------------------------------------------------------------------------------


def _scalar(v: Any) -> str:
    """A YAML scalar, plain when that reads back unchanged, else double-quoted."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):         # a mapping-valued parameter (host.idle_states)
        return "{" + ", ".join(f"{_scalar(k)}: {_scalar(x)}" for k, x in v.items()) + "}"
    s = str(v)
    try:
        if s and s.strip() == s and yaml.safe_load(f"k: {s}") == {"k": s} and \
                not any(c in s for c in ",{}[]#&*!|>'\"%@`"):
            return s
    except yaml.YAMLError:
        pass
    return json.dumps(s)


def _flow(p: dict[str, Any]) -> str:
    return "{value: " + _scalar(p["value"]) + ", source: " + json.dumps(str(p["source"])) + "}"


def _files_text(files: list[str]) -> str:
    if len(files) > 6:
        return ", ".join(files[:6]) + f" and {len(files) - 6} more"
    return ", ".join(files)


def fitted_source(r: ParamResult, all_files: list[str]) -> str:
    """The ``source`` written for a fitted parameter."""
    files = _files_text(r.files or all_files)
    ci = (f" (95% CI {r.param.ci_text(*r.ci)})" if r.ci
          else " (no confidence interval: no bootstrap)")
    return f"fitted by rnicsim calibrate: {files}{ci}"


def profile_text(result: FitResult, name: str) -> str:
    """The fitted profile as YAML, laid out like the shipped ones."""
    base = result.base
    raw = None
    path = Path(base.path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        try:
            raw = yaml.safe_load(path.read_text())
            ProfileModel.model_validate(raw)
        except Exception:  # noqa: BLE001 - fall back to the validated model below
            raw = None
    if raw is None:
        raw = _dump_with_units(base.model)
    files = sorted({p.file for p in result.points})
    for r in result.params:
        if not r.identified:
            continue
        node = raw
        parts = r.key.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = {"value": r.param.yaml_value(r.fitted),
                           "source": fitted_source(r, files)}
    fitted = [r.key for r in result.params if r.identified]
    desc = (f"{str(raw.get('description', '')).strip()} Calibrated by rnicsim calibrate from "
            f"base profile {base.name} on {_files_text(files)}; fitted: "
            f"{', '.join(fitted) or 'nothing'}.")
    lines = [f"name: {_scalar(name)}", "description: >-"]
    lines += textwrap.wrap(" ".join(desc.split()), 88, initial_indent="  ",
                           subsequent_indent="  ", break_on_hyphens=False) or ["  -"]
    for sec in ("link", "switch", "pcie", "nic", "host"):
        lines.append(f"{sec}:")
        for k, p in raw[sec].items():
            if isinstance(p, dict) and "value" in p:
                lines.append(f"  {k}: {_flow(p)}")
            else:
                lines.append(f"  {k}:")
                for op, q in p.items():
                    lines.append(f"    {op}: {_flow(q)}")
    return "\n".join(lines) + "\n"


def _dump_with_units(model: ProfileModel) -> dict[str, Any]:
    raw = model.model_dump(mode="python")
    for sec in ("link", "switch", "pcie", "nic", "host"):
        s = getattr(model, sec)
        for k in type(s).model_fields:
            p = getattr(s, k)
            subs = [(raw[sec][k], p)] if not isinstance(p, OpTimes) else \
                [(raw[sec][k][op], getattr(p, op)) for op in type(p).model_fields]
            for d, q in subs:
                if isinstance(q, TimeP):
                    d["value"] = f"{_sig(q.value, 6)}ns"
                elif isinstance(q, RateP):
                    d["value"] = f"{_sig(q.value / 1e9, 6)}Gbps"
                elif isinstance(q, SizeP):
                    d["value"] = f"{q.value}B"
                elif isinstance(q, IdleStatesP):
                    d["value"] = {n: f"{_sig(e, 6)}ns/{_sig(r, 6)}ns"
                                  for n, (e, r) in q.value.items()}
    return raw


def write_profile(result: FitResult, out: str | Path) -> None:
    """Write the fitted profile atomically (validated before it replaces ``out``, a path
    or str; the profile's ``name`` is its file stem)."""
    out = Path(out)
    text = profile_text(result, out.stem)
    try:
        ProfileModel.model_validate(yaml.safe_load(text))
    except (ValidationError, yaml.YAMLError) as e:  # a bug here, not the user's input
        raise RuntimeError(f"the fitted profile does not validate: {e}") from e
    atomic_write(out, text)




# ---------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = ArgumentParser(
        prog="rnicsim calibrate",
        description="Fit a NIC profile's physical parameters to perftest / rnicsim-probe "
                    "measurements: each measurement is simulated with the same experiment, "
                    "the parameters are searched to minimise the relative residuals, and "
                    "a report gives the fit, confidence intervals and what the data cannot "
                    "identify (method: calibration/README.md).")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="perftest text outputs and/or rnicsim-probe JSON lines (files or "
                         "directories)")
    ap.add_argument("--base", required=True, metavar="PROFILE",
                    help="profile to start from: a name from 'rnicsim profiles' or a YAML path")
    ap.add_argument("--out", required=True, metavar="NEW.yaml",
                    help="the fitted profile (.yaml, checked before the fit)")
    ap.add_argument("--report", required=True, metavar="DIR",
                    help="directory for report.md and its plots")
    ap.add_argument("--params", metavar="a,b,c",
                    help="profile parameters to fit, e.g. pcie.latency,host.mmio (default: "
                         "the defaults of the method, and those the data's sweeps show)")
    ap.add_argument("--bootstrap", type=int, default=20, metavar="N",
                    help="bootstrap resamples for the confidence intervals (default 20; 0: "
                         "none)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the bootstrap (default 1)")
    ap.add_argument("--iterations", type=int, default=20, metavar="N",
                    help="at most N evaluations per round of the least-squares fit "
                         "(default 20)")
    ap.add_argument("--weights", choices=["series", "points"], default="points",
                    help="points: every point alike (default); series: every series the "
                         "same total weight")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a = ap.parse_args(list(argv))
    if a.bootstrap < 0:
        raise InputError("command line", "--bootstrap", "a whole number >= 0")
    if a.iterations < 1:
        raise InputError("command line", "--iterations", "a whole number >= 1")
    if a.seed < 0:      # numpy's generators take no negative seed
        raise InputError("command line", "--seed", "a whole number >= 0")
    if Path(a.out).suffix not in (".yaml", ".yml"):
        raise InputError("command line", "--out", f"a .yaml file name, got {a.out!r}")
    check_out_file(a.out, "--out")          # before the fit, not after it
    check_out_dir(a.report, "--report")
    if a.params is not None:
        a.params = [s.strip() for s in a.params.split(",") if s.strip()]
        if not a.params:
            raise InputError("command line", "--params", "a comma-separated list of profile "
                             "parameters such as pcie.latency,host.mmio")
    return a


def main(argv: Sequence[str]) -> int:
    """Entry point of ``rnicsim calibrate``."""
    argv = list(argv)
    if not argv:     # like the other commands: missing arguments are a usage error
        raise InputError("command line", "calibrate", "INPUT... --base P --out F.yaml "
                         "--report DIR ('rnicsim calibrate --help' describes them)")
    a = parse_args(argv)
    result = calibrate(a.inputs, a.base, a.params, a.bootstrap, a.seed, a.iterations,
                       quiet=a.quiet, weighting=a.weights)
    from calibration.report import write_report, summary_lines

    write_report(result, Path(a.report), Path(a.out))
    write_profile(result, Path(a.out))
    for line in summary_lines(result):
        print(line)
    print(f"profile: {a.out}   report: {Path(a.report) / 'report.md'}")
    return 0
