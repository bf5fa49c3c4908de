"""Scenario files: the YAML schema, validation with clear errors, sizes and sweep expansion.

A scenario names a ``cluster`` (nodes, NIC profile, NICs per node, threads, topology), a
``workload`` (chosen by ``kind``), an optional ``protocol``, a ``run`` block (seed, warm-up,
measured window, size), an optional ``sweep`` (lists of values swept as a cartesian
product, keys are dotted paths such as ``workload.payload``), ``sweep_exclude``
(conditions, as in ``where`` below, naming combinations not to run), ``sizes`` (named sets of
overrides, e.g. a short ``demo``), ``plots`` and ``expected`` (claim checks, see
:mod:`rnicsim.claims`). Quantities are unit strings (``64B``, ``30us``, ``100Gbps``).

Contract: :func:`load_scenario` returns a validated :class:`Scenario` or raises
:class:`~rnicsim.errors.InputError` naming the file, the key path and what was expected;
unknown or repeated keys are errors, never ignored.
"""
from __future__ import annotations

import copy
import itertools
import math
import types
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer,
                      ValidationError, field_validator, model_validator)

from .errors import InputError, did_you_mean
from .units import parse_bytes, parse_time_ns
from .yamlio import load_yaml

Duration = Annotated[float, BeforeValidator(parse_time_ns),
                     PlainSerializer(lambda v: f"{v:.17g}ns", return_type=str)]
Size = Annotated[int, BeforeValidator(parse_bytes)]

_STRICT = ConfigDict(extra="forbid", frozen=True)


class NicSpec(BaseModel):
    """Which NIC profile (name or YAML path) and how many NICs per node."""

    model_config = _STRICT
    profile: str = "cx4-edr"
    per_node: int = Field(1, ge=1, le=8)
    # {"section.param": value}; nested sections ({nic: {qp_cache_entries: 4}}) are
    # flattened to dotted keys, values are scalars (a unit string or a number) or, for a
    # mapping-valued parameter (host.idle_states), the whole mapping
    overrides: dict[str, Union[str, int, float, bool, dict]] = Field(default_factory=dict)

    @field_validator("overrides", mode="before")
    @classmethod
    def _flatten(cls, v: Any) -> Any:
        from .profile import MAPPING_PARAMS

        if not isinstance(v, dict):
            return v
        flat: dict[str, Any] = {}

        def walk(prefix: str, d: dict) -> None:
            for k, x in d.items():
                key = f"{prefix}{k}"
                if isinstance(x, dict) and key not in MAPPING_PARAMS:
                    walk(key + ".", x)
                else:
                    flat[key] = x
        walk("", v)
        return flat


class SingleSwitch(BaseModel):
    """Every NIC on one switch."""

    model_config = _STRICT
    kind: Literal["single_switch"] = "single_switch"


class LeafSpine(BaseModel):
    """Two-tier leaf-spine with an oversubscription ratio (downlink / uplink capacity)."""

    model_config = _STRICT
    kind: Literal["leaf_spine"]
    leaves: int = Field(ge=1)
    spines: int = Field(ge=1)
    oversubscription: float = Field(1.0, ge=1.0)


class ClusterSpec(BaseModel):
    """The machines and the fabric."""

    model_config = _STRICT
    nodes: int = Field(ge=1, le=4096)
    nic: NicSpec = NicSpec()
    threads: int = Field(1, ge=1, le=512)
    cores: int | None = Field(None, ge=1)
    topology: Annotated[Union[SingleSwitch, LeafSpine], Field(discriminator="kind")] = \
        SingleSwitch()


class MicrobenchWorkload(BaseModel):
    """Raw-verb microbenchmark (see :mod:`workloads.microbench`)."""

    model_config = _STRICT
    kind: Literal["microbench"]
    verb: Literal["read", "write", "cas", "faa", "send", "rpc"] = "read"
    payload: Size = 64
    transport: Literal["auto", "rc", "uc", "ud", "write_imm"] = "auto"  # auto: rc/ud
    rpc_direction: Literal["read", "write"] = "read"
    mode: Literal["all_to_all", "client_server"] = "all_to_all"
    servers: int = Field(1, ge=1)
    qps_per_peer: int = Field(1, ge=1)
    coroutines: int = Field(1, ge=1)
    outstanding: int = Field(1, ge=1)
    doorbell_batch: int = Field(1, ge=1)
    signal_every: int = Field(1, ge=1)
    inline: bool | None = None
    inline_max: Size | None = None
    shared_context: bool = False
    page_size: Size = 2 * 1024 * 1024
    region: Size = 64 * 1024 * 1024
    rpc_handler: Duration = 0.0
    qp_choice: Literal["random", "coroutine"] = "random"
    cq_layout: Literal["shared", "per_qp"] = "shared"

    @model_validator(mode="after")
    def _check(self) -> "MicrobenchWorkload":
        if self.verb in ("cas", "faa") and self.payload != 8:
            raise ValueError("atomics (cas, faa) take an 8-byte payload")
        if self.verb in ("read", "cas", "faa") and self.transport not in ("rc", "auto"):
            raise ValueError(f"{self.verb} needs transport rc")
        if self.verb in ("rpc", "send") and self.transport == "uc":
            raise ValueError("rpc/send use transport ud, rc or write_imm")
        if self.verb == "write" and self.transport not in ("rc", "uc", "auto"):
            raise ValueError("write uses transport rc or uc")
        if self.page_size not in (4096, 2 * 1024 * 1024, 1024 ** 3):
            raise ValueError("page_size must be 4KiB, 2MiB or 1GiB")
        if (self.qp_choice, self.cq_layout) != ("random", "shared") and \
                self.verb not in ("read", "write", "cas", "faa"):
            raise ValueError("qp_choice and cq_layout apply to one-sided verbs only")
        return self


WORKLOADS: dict[str, type[BaseModel]] = {"microbench": MicrobenchWorkload}
# Workload kinds run by other packages register here (see :func:`register_workload`).
_WORKLOAD_RUNNERS: dict[str, str] = {"microbench": "workloads.microbench:run_scenario_point"}


def register_workload(kind: str, model: type[BaseModel], runner: str) -> None:
    """Add a workload ``kind`` with its schema and ``"module:function"`` runner."""
    WORKLOADS[kind] = model
    _WORKLOAD_RUNNERS[kind] = runner
    _MODELS.clear()


def workload_runner(kind: str):
    """The function that runs one scenario point of workload ``kind``."""
    import importlib

    mod, fn = _WORKLOAD_RUNNERS[kind].split(":")
    return getattr(importlib.import_module(mod), fn)


def workload_check(kind: str):
    """The workload module's ``check_scenario_point(sc, profile)`` (or None).

    It raises ``ValueError("key.path: what was expected")`` for a point the profile cannot
    run (e.g. a UD payload above the MTU); the caller turns it into an InputError.
    """
    import importlib

    mod, _fn = _WORKLOAD_RUNNERS[kind].split(":")
    return getattr(importlib.import_module(mod), "check_scenario_point", None)


def check_points(sc: "Scenario", source: str) -> None:
    """Every point's NIC profile (and overrides) loads and its workload can run on it."""
    from .profile import load_profile

    seen: dict = {}
    for vals, p in points(sc):
        nic = p.cluster.nic
        key = (nic.profile, repr(sorted(nic.overrides.items())))
        if key not in seen:
            try:
                prof = load_profile(nic.profile)
            except InputError as e:
                raise InputError(source, "cluster.nic.profile",
                                 f"{e.expected}, got {nic.profile!r}") from None
            if nic.overrides:
                try:
                    prof = prof.with_overrides(dict(nic.overrides), source)
                except InputError as e:
                    raise InputError(source, f"cluster.nic.overrides.{e.key}", e.expected) \
                        from None
            seen[key] = prof
        at = ", ".join(f"{k}={v}" for k, v in vals.items())
        bad = topology_misfit(p.cluster)
        if bad:
            raise InputError(source, bad[0] + (f" (sweep point {at})" if at else ""), bad[1])
        check = workload_check(p.workload.kind)
        if check is not None:
            try:
                check(p, seen[key])
            except ValueError as e:
                msg = str(e)
                k, _, what = msg.partition(": ")
                raise InputError(source, k + (f" (sweep point {at})" if at else ""), what) \
                    from None
    _check_roles(sc, list(seen.values()), source)


def _check_roles(sc: "Scenario", profiles: list, source: str) -> None:
    """No validation check's claim or figure is cited by a parameter of a profile the
    scenario runs on (that parameter was fitted to it: the check is calibration)."""
    from .claims import role_conflict

    for i, c in enumerate(sc.expected):
        for prof in profiles:
            why = role_conflict(c, prof)
            if why:
                raise InputError(source, f"expected[{i}].role", why)


def topology_misfit(cluster: ClusterSpec) -> tuple[str, str] | None:
    """``(key path, what was expected)`` when ``cluster``'s topology cannot hold its NICs
    (:func:`rnicsim.fabric.leaf_spine_misfit`), else None."""
    t = cluster.topology
    if t.kind != "leaf_spine":
        return None
    from .fabric import leaf_spine_misfit

    bad = leaf_spine_misfit(cluster.nodes, cluster.nic.per_node, t.leaves, t.spines)
    return (f"cluster.topology.{bad[0]}", bad[1]) if bad else None


class RawVerbs(BaseModel):
    """No protocol: the workload drives verbs directly."""

    model_config = _STRICT
    kind: Literal["raw_verbs"] = "raw_verbs"


PROTOCOLS: dict[str, type[BaseModel]] = {"raw_verbs": RawVerbs}


def register_protocol(kind: str, model: type[BaseModel]) -> None:
    """Add a protocol ``kind`` (a pydantic model with ``kind: Literal[kind]``)."""
    PROTOCOLS[kind] = model
    _MODELS.clear()


class RunSpec(BaseModel):
    """Seed, warm-up and measured window, and which named size to run."""

    model_config = _STRICT
    seed: int = 1
    warmup: Duration = 30_000.0
    measure: Duration = Field(50_000.0, gt=0)
    size: str = "full"


class PublishedPoint(BaseModel):
    """A value the paper publishes at a point of a plot, drawn beside the measured ones.

    ``y`` is in the plot's ``y`` metric's unit (on a ``cdf`` plot: ``x`` is a latency
    [us] and ``y`` a fraction); ``x`` is a value of the plot's ``x`` (a number, a unit
    string or a category), ``[lo, hi]`` for a value stated over a range ("up to 64 B"),
    or absent for a level the paper gives at no particular x (a peak). ``series``
    (conditions as ``where``) names the measured series the point belongs to; ``bound``
    marks a statement "at most" (``upper``) or "at least" (``lower``); ``claim`` is the
    id of the check in ``expected`` that states it; ``source`` names the paper by
    system and figure ("DrTM+H fig. 5a") and becomes the legend entry."""

    model_config = _STRICT
    y: float
    x: Union[float, int, str, bool, list[Union[float, int, str]], None] = None
    series: dict[str, Any] = Field(default_factory=dict)
    bound: Literal["upper", "lower"] | None = None
    claim: str | None = None
    label: str = ""
    source: str = Field(min_length=1)

    @field_validator("y")
    @classmethod
    def _finite(cls, v: float) -> float:
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(f"a finite number (got {v!r})")
        return v

    @field_validator("x")
    @classmethod
    def _range(cls, v: Any) -> Any:
        if isinstance(v, list):
            lo, hi = (v + [None, None])[:2] if len(v) == 2 else (None, None)
            if not (isinstance(_num(lo), (int, float)) and isinstance(_num(hi), (int, float))
                    and _num(lo) < _num(hi)):
                raise ValueError(f"a value or a range [lo, hi] of two numbers with lo < hi "
                                 f"(got {v!r})")
        return v


class PlotSpec(BaseModel):
    """A plot of the results (see :mod:`rnicsim.plots`): ``kind: line`` draws ``y`` against
    ``x``, one line per value of ``series`` (bars when ``x`` is not all numbers);
    ``bars`` draws grouped bars; ``cdf`` draws the latency percentiles of each row as a
    CDF step (no ``x`` or ``y``). The y axis starts at zero unless ``y_from_zero`` is
    false; ``reference`` names columns drawn as dashed lines (bounds); ``published`` are
    the paper's points."""

    model_config = _STRICT
    kind: Literal["line", "bars", "cdf"] = "line"
    x: str | None = None
    y: str | None = None
    series: str | list[str] | None = None
    where: dict[str, Any] = Field(default_factory=dict)
    logx: bool = False
    logy: bool = False
    y_from_zero: bool = True
    reference: list[str] = Field(default_factory=list)
    published: list[PublishedPoint] = Field(default_factory=list)
    title: str | None = None
    file: str | None = None   # a file name inside the output directory, e.g. tput.png

    @model_validator(mode="after")
    def _axes(self) -> "PlotSpec":
        if self.kind == "cdf":
            if self.x is not None or self.y is not None or self.reference:
                raise ValueError("a cdf plot draws the lat_pNN_us columns of each row: "
                                 "leave x, y and reference out")
            if self.logy:
                raise ValueError("logy: a cdf plot's y is a fraction from 0 to 1 (leave "
                                 "logy out)")
        elif self.x is None or self.y is None:
            raise ValueError(f"x and y: the columns a {self.kind} plot draws (both are "
                             f"needed)")
        return self

    @field_validator("file")
    @classmethod
    def _file(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if PurePath(v).name != v or v in ("", ".", "..") or "\\" in v:
            raise ValueError(f"a file name without a directory part, written inside --out "
                             f"(got {v!r})")
        from matplotlib.backend_bases import FigureCanvasBase

        formats = sorted(FigureCanvasBase.get_supported_filetypes())
        if PurePath(v).suffix.lower().lstrip(".") not in formats:
            raise ValueError(f"a file name ending in a format matplotlib writes: "
                             f".{', .'.join(formats)} (got {v!r})")
        return v


class _Claim(BaseModel):
    """Fields every claim check has. ``role`` says what the published number is to the
    model: ``calibration`` (a profile or workload parameter was fitted to it, so the check
    holds by construction) or ``validation`` (nothing was fitted to it, directly or
    through a parameter copied from another profile); only validation checks count in the
    score (:func:`rnicsim.claims.score`). ``numeric``: ``published`` is a number the paper
    gives (default: true for ``value``, ``ratio`` and ``drop``, whose test is relative to
    it; false for the other kinds, whose ``published`` may be a stand-in such as 1.0 for
    an order); numeric checks are also scored by their distance to it (within 10%, 25%)."""

    model_config = _STRICT
    claim: str
    role: Literal["calibration", "validation"]
    source: str = ""
    metric: str
    published: float
    numeric: Optional[bool] = None
    tolerance: float = Field(0.15, ge=0)
    note: str = ""


class ValueClaim(_Claim):
    """The best (``agg``) value of ``metric`` over the rows matching ``where``; ``agg:
    worst`` takes the row farthest from ``published`` (relative), so the check holds only
    when every row is within ``tolerance`` (a claim about each point, not their mean)."""

    kind: Literal["value"]
    where: dict[str, Any] = Field(default_factory=dict)
    agg: Literal["max", "min", "mean", "worst"] = "max"


class RatioClaim(_Claim):
    """``agg`` over ``over`` (in ``range``) of metric(numerator) / metric(denominator);
    ``agg: peak`` compares the two series' best values instead (each at its own x: "A's
    peak throughput is 10% above B's"); ``agg: worst`` the ratio farthest from
    ``published`` (every point within ``tolerance``)."""

    kind: Literal["ratio"]
    numerator: dict[str, Any]
    denominator: dict[str, Any]
    over: str
    range: dict[str, float] = Field(default_factory=dict)
    agg: Literal["max", "min", "mean", "peak", "worst"] = "max"


class FlatClaim(_Claim):
    """Below/above a point of ``over``, ``metric`` stays within ``published`` relative spread.

    Measured: (max - min) / max of ``metric`` over the rows in ``range``; holds when it is
    at most ``published`` (e.g. 0.15: "stops growing").
    """

    kind: Literal["flat"]
    where: dict[str, Any] = Field(default_factory=dict)
    over: str
    range: dict[str, float] = Field(default_factory=dict)


class DominatesClaim(_Claim):
    """metric(a) beats metric(b) by at least ``margin`` at every value of ``over`` in
    ``range``.

    Measured: the smallest ratio a/b; holds when it is at least ``margin``. ``published``
    is the ratio the paper reports ("from 1.12x") or 1.0 when it reports only the order.
    ``margin`` defaults to ``published`` when that is above 1 (the published margin) and
    otherwise to :data:`rnicsim.claims.BEATS` (a win, not a tie).
    """

    kind: Literal["dominates"]
    a: dict[str, Any]
    b: dict[str, Any]
    over: str
    range: dict[str, float] = Field(default_factory=dict)
    margin: Optional[float] = Field(None, gt=0)


class DropClaim(_Claim):
    """Largest relative loss 1 - metric(a)/metric(b) over ``over``; ``published`` is it
    (holds within ``tolerance``, relative)."""

    kind: Literal["drop"]
    a: dict[str, Any]
    b: dict[str, Any]
    over: str
    range: dict[str, float] = Field(default_factory=dict)


class BoundClaim(_Claim):
    """The ``agg`` of ``metric`` over rows matching ``where`` lies in [``min``, ``max``].

    For findings stated as thresholds ("at least 95% of the time", "grows more than 2x");
    ``published`` is the paper's figure, shown for reference. ``agg: worst``: every row
    lies in the interval (measured: the row farthest outside it, or nearest its edge).
    """

    kind: Literal["bound"]
    where: dict[str, Any] = Field(default_factory=dict)
    agg: Literal["max", "min", "mean", "worst"] = "max"
    min: float = float("-inf")
    max: float = float("inf")


class RatioBoundClaim(_Claim):
    """``agg`` over ``over`` (in ``range``) of metric(numerator) / metric(denominator) lies
    in [``min``, ``max``]: for findings stated as "under half", "about twice", "little".
    ``agg: worst``: every ratio lies in the interval."""

    kind: Literal["ratio_bound"]
    numerator: dict[str, Any]
    denominator: dict[str, Any]
    over: str
    range: dict[str, Any] = Field(default_factory=dict)   # may name words: {ne: read_intr}
    agg: Literal["max", "min", "mean", "worst"] = "max"
    min: float = float("-inf")
    max: float = float("inf")


class FirstStepClaim(_Claim):
    """The first step of ``over`` loses the most: for the findings "the drop from A to B
    is larger than any later one".

    The rows matching ``where`` (and ``range`` on ``over``) form one series per
    combination of the ``by`` keys' values, ordered by ``over``; a step from x to the
    next x loses ``1 - metric(next) / metric(x)``. Measured: the smallest, over the series
    with at least three values of ``over`` (and none at or below 0: a point that
    measured nothing), of the first step's loss minus the largest loss of a later step;
    holds when it exceeds ``margin`` (default 0: in every series the first step is the
    largest drop). ``published`` is a stand-in (0 when the paper gives no figure).
    """

    kind: Literal["first_step"]
    where: dict[str, Any] = Field(default_factory=dict)
    over: str
    by: list[str] = Field(default_factory=list)
    range: dict[str, float] = Field(default_factory=dict)
    margin: float = 0.0


Claim = Annotated[Union[ValueClaim, RatioClaim, FlatClaim, DominatesClaim, DropClaim,
                        BoundClaim, RatioBoundClaim, FirstStepClaim],
                  Field(discriminator="kind")]


class Scenario(BaseModel):
    """A whole scenario file (see module doc)."""

    model_config = _STRICT
    version: Literal[1] = 1
    name: str
    description: str = ""
    cluster: ClusterSpec
    workload: Any  # replaced by the union of registered workload kinds in _rebuild()
    protocol: Any = None  # replaced by the union of registered protocol kinds
    run: RunSpec = RunSpec()
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    sweep_exclude: list[dict[str, Any]] = Field(default_factory=list)
    sizes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plots: list[PlotSpec] = Field(default_factory=list)
    expected: list[Claim] = Field(default_factory=list)
    # Python modules imported before the scenario is validated (see load_plugins): they
    # register workload or protocol kinds of the user's own.
    plugins: list[str] = Field(default_factory=list)


_MODELS: dict[tuple, type[BaseModel]] = {}
# Packages that add workload/protocol kinds; imported lazily (the kernel does not depend on
# them at import time). Each calls register_workload / register_protocol when imported.
PLUGINS = ["protocols.txn.scenario_kinds", "protocols.rdmc.scenario_kinds",
           "protocols.multiobj", "workloads.roce_reads", "workloads.incast",
           "workloads.smallbank", "workloads.tpcc", "workloads.tpce", "workloads.ycsb"]
_loaded = False


def _load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    for mod in PLUGINS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod and not mod.startswith(str(e.name)):
                raise


def import_builtin_plugins() -> None:
    """Import every built-in plugin module once (:data:`PLUGINS`: they register workload
    and protocol kinds)."""
    _load_plugins()


def _rebuild() -> type[BaseModel]:
    """The Scenario model with every registered workload kind (cached)."""
    _load_plugins()
    key = (tuple(WORKLOADS), tuple(PROTOCOLS))
    m = _MODELS.get(key)
    if m is not None:
        return m

    def union(models: tuple) -> Any:
        if len(models) == 1:
            return models[0]
        return Annotated[Union[models], Field(discriminator="kind")]  # type: ignore[valid-type]

    wl = union(tuple(WORKLOADS.values()))
    pr = union(tuple(PROTOCOLS.values()))

    class _S(Scenario):
        workload: wl  # type: ignore[valid-type]
        protocol: pr = RawVerbs()  # type: ignore[valid-type]

    _S.__name__ = "Scenario"
    _MODELS[key] = _S
    return _S


def _fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


#: The claim check kinds (the ``kind`` tags of :data:`Claim`).
CLAIM_KINDS = ("value", "ratio", "flat", "dominates", "drop", "bound", "ratio_bound",
               "first_step")
_TAGS = CLAIM_KINDS + ("single_switch", "leaf_spine")


def _explain(e: ValidationError, source: str, prefix: str = "") -> InputError:
    err = e.errors()[0]
    raw_loc = tuple(err["loc"])
    # Discriminated unions put the variant's tag in the location; drop it from the path.
    loc = tuple(p for p in raw_loc if not (isinstance(p, str) and
                                           (p in WORKLOADS or p in PROTOCOLS or p in _TAGS)))
    key = prefix + _fmt_loc(loc)
    typ = err["type"]
    if typ == "extra_forbidden":
        msg = "unknown key"
        allowed = _allowed_keys(raw_loc[:-1])
        if allowed:
            hint = did_you_mean(str(raw_loc[-1]), allowed)
            msg += f"{f' ({hint})' if hint else ''}; allowed keys here: {', '.join(allowed)}"
    elif typ == "missing":
        msg = "missing required key"
    elif typ in ("union_tag_invalid", "union_tag_not_found"):
        key = key + ".kind" if key else "kind"
        msg = f"one of: {', '.join(_tags(loc))}"
        if "input" in err and isinstance(err["input"], dict) and "kind" in err["input"]:
            hint = did_you_mean(str(err["input"]["kind"]), _tags(loc))
            msg += f" (got {err['input']['kind']!r}{'; ' + hint if hint else ''})"
    else:
        msg = err["msg"].replace("Value error, ", "")
        if "input" in err and typ not in ("value_error",):
            msg += f" (got {err['input']!r})"
        # A model's own check may name the key inside the section: "section.key: what"
        head, sep, rest = msg.partition(": ")
        if typ == "value_error" and sep and key and head.startswith(key + ".") \
                and " " not in head:
            key, msg = prefix + head, rest
    return InputError(source, key, msg)


def _tags(loc: tuple) -> list[str]:
    last = loc[-1] if loc else ""
    if last == "workload":
        return sorted(WORKLOADS)
    if last == "protocol":
        return sorted(PROTOCOLS)
    if last == "topology":
        return ["single_switch", "leaf_spine"]
    return list(CLAIM_KINDS)


def _allowed_keys(loc: tuple) -> list[str]:
    """Field names of the model at ``loc`` (a pydantic error location, tags included)."""
    model: Any = _rebuild()
    for part in loc:
        if isinstance(part, int):
            continue
        if isinstance(part, str) and part in WORKLOADS and model is None:
            model = WORKLOADS[part]
            continue
        if isinstance(part, str) and part in PROTOCOLS and model is None:
            model = PROTOCOLS[part]
            continue
        if model is None:
            return []
        f = model.model_fields.get(part)
        if f is None:
            return []
        ann = f.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is None and part == "topology":
            model = {"single_switch": SingleSwitch, "leaf_spine": LeafSpine}
    if isinstance(model, dict):
        return []
    return sorted(model.model_fields) if model is not None else []


def _set_path(d: dict, path: str, value: Any, source: str, where: str) -> None:
    parts = path.split(".")
    if parts[:3] == ["cluster", "nic", "overrides"] and len(parts) > 4:
        # a profile key is dotted itself: cluster.nic.overrides.nic.qp_cache_entries
        parts = parts[:3] + [".".join(parts[3:])]
    node = d
    for p in parts[:-1]:
        if p not in node or node[p] is None:
            node[p] = {}
        if not isinstance(node[p], dict):
            raise InputError(source, where, f"{path}: {p} is not a section")
        node = node[p]
    node[parts[-1]] = value


def _get_path(d: dict, path: str) -> Any:
    node: Any = d
    for p in path.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def parse_override(text: str) -> tuple[str, Any]:
    """``a.b=v`` -> ("a.b", v) with v parsed as YAML (numbers, booleans, lists)."""
    if "=" not in text:
        raise InputError("command line", "--set", f"KEY.PATH=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    k = k.strip()
    if not k or not all(k.split(".")):
        raise InputError("command line", "--set",
                         f"KEY.PATH=VALUE with a key path such as cluster.nodes, got {text!r}")
    try:
        val = yaml.safe_load(v) if v != "" else ""
    except yaml.YAMLError:
        val = v
    return k, val


def load_raw(path: str | Path) -> dict:
    """Read a scenario file as a dict (InputError on a missing, unreadable or non-UTF-8
    file, bad YAML or a key repeated in one mapping)."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "", "an existing scenario YAML file (no such file)")
    if p.is_dir():
        raise InputError(str(p), "", "a scenario YAML file (this is a directory)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(str(p), "", f"a UTF-8 text file (byte {e.start} is not UTF-8)") \
            from None
    except OSError as e:
        raise InputError(str(p), "", f"a readable scenario YAML file ({e.strerror})") \
            from None
    raw = load_yaml(text, str(p))
    if not isinstance(raw, dict):
        raise InputError(str(p), "", "a mapping with name, cluster, workload, run, ...")
    return raw


def _set_sweep(raw: dict, key: str, values: Any, source: str, where: str) -> None:
    sweep = raw.get("sweep")
    if sweep is None:
        sweep = raw["sweep"] = {}
    if not isinstance(sweep, dict):
        raise InputError(source, where, "sweep: a mapping of key paths to lists of values")
    sweep[key] = values


def resolve(raw: dict, source: str, overrides: list[tuple[str, Any]] | None = None,
            seed: int | None = None) -> Scenario:
    """Apply the selected size, then ``--set`` overrides and ``--seed``; validate; return it.

    Precedence: an override beats the size, which beats the file. ``run.size`` (from the
    file or an override) selects the size. An override of a key the sweep varies (from
    the file or the size) replaces that sweep by the single value, so sweep_exclude keeps
    its keys; ``sweep.KEY=[...]`` replaces the list. An error caused by an entry of the
    size is reported at ``sizes.<name>.<key>``. The scenario's ``plugins`` are imported
    first (:func:`load_plugins`)."""
    load_plugins(raw, source)
    raw = copy.deepcopy(raw)
    overrides = list(overrides or [])
    size = _get_path(raw, "run.size") or "full"
    for k, v in overrides:
        if k == "sizes" or k.startswith("sizes."):
            # the size is applied before the overrides: a change to it would be ignored
            raise InputError(source, f"--set {k}",
                             "a key path of the scenario (select a size with run.size=NAME)")
        if k == "run.size":
            size = v
    sizes = raw.get("sizes") or {}
    size_keys: list[str] = []
    if size != "full":
        if not isinstance(size, str) or not isinstance(sizes, dict) or size not in sizes:
            raise InputError(source, "run.size",
                             f"'full' or one of the sizes defined here "
                             f"({', '.join(map(str, sizes)) if isinstance(sizes, dict) else ''})")
        block = sizes[size] or {}
        if not isinstance(block, dict):
            raise InputError(source, f"sizes.{size}",
                             "a mapping of key paths to values, e.g. {run.measure: 20us}")
        for k, v in block.items():
            k = str(k)
            if k.startswith("sweep."):
                _set_sweep(raw, k[len("sweep."):], v, source, f"sizes.{size}.{k}")
            else:
                _set_path(raw, k, v, source, f"sizes.{size}.{k}")
        overridden = {k for k, _v in overrides}
        size_keys = [str(k) for k in block if str(k) not in overridden]
    _profiles_beside(raw, source)
    for k, v in overrides:
        if k.startswith("sweep."):
            _set_sweep(raw, k[len("sweep."):], v, source, f"--set {k}")
        else:
            _set_path(raw, k, v, source, f"--set {k}")
            if isinstance(raw.get("sweep"), dict) and k in raw["sweep"]:
                raw["sweep"][k] = [v]
    if seed is not None:
        _set_path(raw, "run.seed", seed, source, "--seed")
    try:
        sc = _validate(raw, source)
        _check_published(sc, source, as_written=size == "full" and not overrides)
        return sc
    except InputError as e:
        for k in size_keys:
            if e.key == k or e.key.startswith((k + ".", k + "[", k + " ")):
                raise InputError(e.source, f"sizes.{size}.{e.key}", e.expected) from None
        raise


def _profile_beside(v: Any, here: Path) -> Any:
    """``v`` as a path beside the scenario (``here``) when it is a relative profile path
    that exists there; otherwise ``v`` itself (a name, or a path looked up from the
    working directory)."""
    if not isinstance(v, str) or not (v.endswith((".yaml", ".yml")) or "/" in v):
        return v
    p = Path(v)
    if p.is_absolute() or not (here / p).is_file():
        return v
    return str(here / p)


def _profiles_beside(raw: dict, source: str) -> None:
    """Profile paths written in a scenario file (``cluster.nic.profile``, and the values of
    a sweep over it) are relative to the file's folder, as ``plugins`` are; a path that
    is not there is left to the working directory, as a ``--set`` value is."""
    here = Path(source).parent
    if not Path(source).is_file():
        return
    nic = (raw.get("cluster") or {}).get("nic") if isinstance(raw.get("cluster"), dict) else None
    if isinstance(nic, dict) and "profile" in nic:
        nic["profile"] = _profile_beside(nic["profile"], here)
    sweep = raw.get("sweep")
    if isinstance(sweep, dict) and isinstance(sweep.get("cluster.nic.profile"), list):
        sweep["cluster.nic.profile"] = [_profile_beside(v, here)
                                        for v in sweep["cluster.nic.profile"]]


def _validate(raw: dict, source: str) -> Scenario:
    """The validated scenario of ``raw`` (every override and the size applied)."""
    model = _rebuild()
    try:
        sc = model.model_validate(raw)
    except ValidationError as e:
        raise _explain(e, source) from None
    _check_no_bools(raw, sc, source)
    _check_conditions(sc, source)
    _check_sweep(sc, raw, source)
    check_points(sc, source)
    _check_names(sc, source)
    return sc


def _numeric(ann: Any) -> bool:
    """True for an int or float annotation (also inside Annotated or Optional)."""
    if ann in (int, float):
        return True
    origin = get_origin(ann)
    if origin is Annotated:
        return _numeric(get_args(ann)[0])
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        return bool(args) and all(_numeric(a) for a in args)
    return False


def _check_no_bools(raw: Any, obj: Any, source: str, prefix: str = "") -> None:
    """No YAML boolean stands where the schema wants a number: pydantic's lax mode reads
    ``nodes: true`` as 1, which is never what the file meant."""
    if not isinstance(raw, dict) or not isinstance(obj, BaseModel):
        return
    fields = type(obj).model_fields
    for k, v in raw.items():
        f = fields.get(k) if isinstance(k, str) else None
        if f is None:
            continue
        key = prefix + k
        if isinstance(v, bool) and _numeric(f.annotation):
            raise InputError(source, key, f"a number, not a boolean (got {v!r})")
        sub = getattr(obj, k)
        if isinstance(sub, BaseModel):
            _check_no_bools(v, sub, source, key + ".")
        elif isinstance(sub, (list, tuple)) and isinstance(v, list):
            for i, (rv, sv) in enumerate(zip(v, sub)):
                _check_no_bools(rv, sv, source, f"{key}[{i}].")


_OPS = ("le", "lt", "ge", "gt", "ne", "in")


def matches(where: dict[str, Any], values: dict[str, Any]) -> bool:
    """True when ``values`` satisfy every condition of ``where``.

    A condition is a value (equality) or a dict of ``le``, ``lt``, ``ge``, ``gt``, ``ne``,
    ``in`` tests. Sizes and durations may be written with units on either side.
    """
    for k, cond in where.items():
        if k not in values:
            return False
        v = _num(values[k])
        if isinstance(cond, dict):
            for op, ref in cond.items():
                r = [_num(x) for x in ref] if op == "in" else _num(ref)
                ok = {"le": lambda: v <= r, "lt": lambda: v < r, "ge": lambda: v >= r,
                      "gt": lambda: v > r, "ne": lambda: v != r, "in": lambda: v in r}
                if op not in ok:
                    raise ValueError(f"unknown condition {op!r} (use {', '.join(_OPS)})")
                if not ok[op]():
                    return False
        elif _num(cond) != v:
            return False
    return True


def _num(v: Any) -> Any:
    if isinstance(v, str):
        for parse in (parse_bytes, parse_time_ns):
            try:
                return parse(v)
            except ValueError:
                pass
    return v


def _combos(sc: Scenario) -> list[dict[str, Any]]:
    keys = list(sc.sweep)
    out = []
    for combo in itertools.product(*(sc.sweep[k] for k in keys)):
        vals = dict(zip(keys, combo))
        if not any(matches(ex, vals) for ex in sc.sweep_exclude):
            out.append(vals)
    return out


def _check_sweep(sc: Scenario, raw: dict, source: str) -> None:
    """Every swept key exists and every combination that will run validates."""
    model = _rebuild()
    for key, values in sc.sweep.items():
        if not values:
            raise InputError(source, f"sweep.{key}", "a non-empty list of values")
        if not _path_allowed(sc, key):
            hint = _path_hint(sc, key)
            raise InputError(source, f"sweep.{key}",
                             f"a key path of the scenario such as workload.payload"
                             f"{f' ({hint})' if hint else ''}")
    for i, ex in enumerate(sc.sweep_exclude):
        for k in ex:
            if k not in sc.sweep:
                raise InputError(source, f"sweep_exclude[{i}].{k}", "a key of sweep")
    if sc.sweep and not _combos(sc):
        raise InputError(source, "sweep_exclude", "conditions that leave at least one point "
                         "of the sweep to run (these exclude every combination)")
    base = copy.deepcopy(raw)
    base.pop("sweep", None)
    base.pop("sweep_exclude", None)
    base.pop("sizes", None)
    base.setdefault("run", {})
    base["run"] = dict(base["run"] or {}, size="full")
    for vals in _combos(sc):
        point = copy.deepcopy(base)
        for k, v in vals.items():
            _set_path(point, k, v, source, f"sweep.{k}")
        try:
            try:
                _check_no_bools(point, model.model_validate(point), source)
            except ValidationError as e:
                raise _explain(e, source) from None
        except InputError as err:
            at = ", ".join(f"{k}={v}" for k, v in vals.items())
            raise InputError(source, f"sweep ({at})", f"{err.key}: {err.expected}") from None


def _check_condition(cond: Any, source: str, key: str) -> None:
    """``cond`` (a value, or a dict of tests as :func:`matches` takes) uses only the tests
    :func:`matches` knows, and ``in`` takes a list."""
    if not isinstance(cond, dict):
        return
    for op, ref in cond.items():
        if op not in _OPS:
            raise InputError(source, key, f"a value or a test among {', '.join(_OPS)} "
                             f"(got {op!r})")
        if op == "in" and not isinstance(ref, list):
            raise InputError(source, key, f"in: a list of values (got {ref!r})")


_CONDITIONS = ("where", "numerator", "denominator", "a", "b")  # claim fields that are `where`s


def _check_conditions(sc: Scenario, source: str) -> None:
    """Every condition of sweep_exclude, plots and claims is one :func:`matches` can test
    (checked at load: the claims and plots are evaluated only after the run)."""
    for i, ex in enumerate(sc.sweep_exclude):
        for k, cond in ex.items():
            _check_condition(cond, source, f"sweep_exclude[{i}].{k}")
    for i, p in enumerate(sc.plots):
        for k, cond in p.where.items():
            _check_condition(cond, source, f"plots[{i}].where.{k}")
    for i, c in enumerate(sc.expected):
        for field in _CONDITIONS:
            for k, cond in (getattr(c, field, None) or {}).items():
                _check_condition(cond, source, f"expected[{i}].{field}.{k}")
        if getattr(c, "range", None):
            _check_condition(c.range, source, f"expected[{i}].range")


def _check_names(sc: Scenario, source: str) -> None:
    """The keys plots and claims select rows by are columns the results can have.

    A row has the swept keys and the metrics. Metric names are known only after the run
    (the runner warns about those no row has), but a dotted name is a key path: it must
    be swept or at least be a key of the scenario (then it selects no row unless swept).
    A claim's ``over`` must be a column of every row it pairs: a dotted one is swept."""
    swept = ", ".join(sc.sweep) or "none"

    def check(name: Any, key: str) -> None:
        if isinstance(name, str) and "." in name and name not in sc.sweep \
                and not _path_allowed(sc, name):
            raise InputError(source, key, f"a swept key ({swept}), a key path of the "
                             f"scenario or a metric name without a dot (got {name!r})")

    for i, p in enumerate(sc.plots):
        check(p.x, f"plots[{i}].x")
        series = [p.series] if isinstance(p.series, str) else list(p.series or [])
        for j, k in enumerate(series):
            check(k, f"plots[{i}].series" + (f"[{j}]" if not isinstance(p.series, str) else ""))
        for k in p.where:
            check(k, f"plots[{i}].where.{k}")
        for j, k in enumerate(p.reference):
            check(k, f"plots[{i}].reference[{j}]")
        for j, pt in enumerate(p.published):
            for k, cond in pt.series.items():
                check(k, f"plots[{i}].published[{j}].series.{k}")
                _check_condition(cond, source, f"plots[{i}].published[{j}].series.{k}")
    for i, c in enumerate(sc.expected):
        for field in _CONDITIONS:
            for k in getattr(c, field, None) or {}:
                check(k, f"expected[{i}].{field}.{k}")
        for j, k in enumerate(getattr(c, "by", None) or []):
            check(k, f"expected[{i}].by[{j}]")
        over = getattr(c, "over", None)
        if over is not None and "." in over and over not in sc.sweep:
            raise InputError(source, f"expected[{i}].over", f"a swept key ({swept}) or a "
                             f"metric name without a dot (got {over!r})")


def _check_published(sc: Scenario, source: str, as_written: bool) -> None:
    """Each plot's published points agree with the scenario: a ``claim`` is the id of one
    of its checks, and a point on the plot's ``y`` metric of a ``value`` or ``bound``
    check with that id on the same series has that check's published value (one number,
    written twice, must not drift apart). ``as_written`` (the file at its full size, no ``--set``):
    a point's ``x`` is a value the sweep runs (a range lies within the swept values)
    and its ``series`` select a swept combination, so the full run measures beside it."""
    ids = sorted({c.claim for c in sc.expected})
    combos = _combos(sc)
    for i, p in enumerate(sc.plots):
        for j, pt in enumerate(p.published):
            key = f"plots[{i}].published[{j}]"
            if pt.claim is not None:
                if pt.claim not in ids:
                    raise InputError(source, f"{key}.claim", f"the id of a check in this "
                                     f"scenario's expected block ({', '.join(ids) or 'none'}), "
                                     f"got {pt.claim!r}")
                same = [c.published for c in sc.expected if c.claim == pt.claim
                        and c.metric == p.y and c.kind in ("value", "bound")
                        and _compatible(c.where, pt.series)]
                if same and not any(math.isclose(pt.y, v, rel_tol=1e-9) for v in same):
                    raise InputError(source, f"{key}.y", f"the published value of claim "
                                     f"{pt.claim} on {p.y} "
                                     f"({' or '.join(f'{v:g}' for v in same)}), got {pt.y:g}")
            if not as_written:
                continue
            swept = [_num(v) for v in sc.sweep.get(p.x or "", [])]
            if swept and pt.x is not None:
                xs = [_num(v) for v in pt.x] if isinstance(pt.x, list) else [_num(pt.x)]
                nums = [v for v in swept if isinstance(v, (int, float))]
                ok = (min(nums) <= xs[0] and xs[1] <= max(nums)) if len(xs) == 2 and nums \
                    else xs[0] in swept
                if not ok:
                    raise InputError(source, f"{key}.x", f"a value of {p.x} the sweep runs "
                                     f"({', '.join(map(str, sc.sweep[p.x]))}) or a range "
                                     f"within them, got {pt.x!r}")
            sub = {k: v for k, v in pt.series.items() if k in sc.sweep}
            if sub and not any(matches(sub, c) for c in combos):
                raise InputError(source, f"{key}.series", f"conditions that select a point of "
                                 f"the sweep (swept: {', '.join(sc.sweep)}), got {pt.series}")


def _path_hint(sc: BaseModel, key: str) -> str:
    """``"did you mean 'a.b.c'?"`` for a dotted ``key`` whose last part is a misspelled
    field of the section its other parts name, else ``""``."""
    *head, last = key.split(".")
    obj: Any = sc
    for part in head:
        if not isinstance(obj, BaseModel) or part not in type(obj).model_fields:
            return ""
        obj = getattr(obj, part)
    if not isinstance(obj, BaseModel):
        return ""
    hint = did_you_mean(last, sorted(type(obj).model_fields))
    return hint.replace("'", "'" + "".join(p + "." for p in head), 1) if hint else ""


def _compatible(where: dict[str, Any], series: dict[str, Any]) -> bool:
    """False when ``where`` and ``series`` set a key they share to different conditions
    (a claim on another series than a published point's)."""
    return all(_num(where[k]) == _num(v) for k, v in series.items() if k in where)


def _path_allowed(sc: BaseModel, key: str) -> bool:
    """True when ``key`` names a field of the validated scenario (its concrete kinds), or
    a profile parameter under ``cluster.nic.overrides`` (``section.param``; whether the
    profile has it is checked with each point's profile, :func:`check_points`)."""
    parts = key.split(".")
    if parts[:3] == ["cluster", "nic", "overrides"]:
        return len(parts) >= 5 and all(parts[3:])
    obj: Any = sc
    for part in key.split("."):
        if not isinstance(obj, BaseModel) or part not in type(obj).model_fields:
            return False
        obj = getattr(obj, part)
    return True


def load_plugins(raw: dict, source: str) -> None:
    """Import the modules a scenario lists under ``plugins:`` (they call
    :func:`register_workload` / ``register_protocol`` for kinds of their own). A module
    is looked up on ``sys.path`` and then in the scenario file's folder, so one beside the
    scenario needs no installing. InputError naming ``plugins[i]`` when it cannot be
    imported."""
    mods = raw.get("plugins")
    if mods is None:
        return
    if not isinstance(mods, list) or not all(isinstance(m, str) and m for m in mods):
        raise InputError(source, "plugins", "a list of Python module names, e.g. [my_workload]")
    import importlib
    import sys

    folder = str(Path(source).resolve().parent)
    for i, mod in enumerate(mods):
        try:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name is None or not mod.startswith(e.name) or folder in sys.path:
                    raise
                sys.path.append(folder)      # kept: forked workers import from it too
                importlib.import_module(mod)
        except ModuleNotFoundError as e:
            raise InputError(source, f"plugins[{i}]",
                             f"an importable Python module (on PYTHONPATH or beside the "
                             f"scenario), got {mod!r} ({e})") from e
        except Exception as e:
            raise InputError(source, f"plugins[{i}]",
                             f"a module that imports cleanly; importing {mod!r} raised "
                             f"{type(e).__name__}: {e}") from e


def load_scenario(path: str | Path, overrides: list[str] | None = None,
                  seed: int | None = None) -> Scenario:
    """Load, override (``["a.b=v", ...]``), size-select and validate a scenario file."""
    raw = load_raw(path)
    ov = [parse_override(o) for o in overrides or []]
    return resolve(raw, str(path), ov, seed)


def points(sc: Scenario) -> list[tuple[dict[str, Any], Scenario]]:
    """The sweep's points: (swept values by key, scenario of that point), in file order."""
    if not sc.sweep:
        return [({}, sc)]
    base = sc.model_dump(mode="json")
    base.pop("sweep")
    base.pop("sweep_exclude")
    model = _rebuild()
    # A block whose ``kind`` is swept (``protocol.kind: [nowait, mvcc]``) keeps only the
    # keys the file set: another kind's defaults would be unknown keys of the new kind.
    as_set = {}
    for k in {k for c in _combos(sc) for k in c if k.endswith(".kind")}:
        obj = sc
        for part in k.split(".")[:-1]:
            obj = getattr(obj, part, None)
        if isinstance(obj, BaseModel):
            as_set[k[:-len(".kind")]] = obj.model_dump(mode="json", exclude_unset=True)
    out = []
    for vals in _combos(sc):
        d = copy.deepcopy(base)
        for k, v in vals.items():
            block = k[:-len(".kind")] if k.endswith(".kind") else None
            if block in as_set and _dict_at(d, block).get("kind") != v:
                _set_path(d, block, copy.deepcopy(as_set[block]), sc.name, block)
        for k, v in vals.items():
            _set_path(d, k, v, sc.name, k)
        try:
            out.append((vals, model.model_validate(d)))
        except ValidationError as e:
            err = _explain(e, sc.name)
            at = ", ".join(f"{k}={v}" for k, v in vals.items())
            raise InputError(sc.name, f"sweep ({at})", f"{err.key}: {err.expected}") \
                from None
    return out


def _dict_at(d: dict, path: str) -> dict:
    """The section at dotted ``path`` of nested dicts ``d``."""
    for part in path.split("."):
        d = d[part]
    return d


def resolved_yaml(sc: Scenario) -> str:
    """The scenario with every default filled in, as YAML (saved beside results)."""
    return yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False)
