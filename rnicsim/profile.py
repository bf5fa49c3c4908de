"""NIC profiles: typed, validated physical parameters of one NIC generation and its host.

A profile is a YAML file in ``rnicsim/profiles/`` (or any path). Every parameter is written
as ``{value: <quantity with unit>, source: <where the number comes from>}``; unknown keys
are rejected, units are checked, and the loaded :class:`Profile` exposes plain floats in
the simulator's base units (ns, bytes, bit/s) through its ``.v`` views. A bare number
(``mmio: {value: 60, ...}``) is taken in the base unit of its kind (ns, B, bit/s, Hz), as
:mod:`rnicsim.units` parses it; :meth:`Profile.with_overrides` relies on that.

Sections:
- ``link``: the wire (IB or RoCE), its data rate, MTU and per-packet overhead.
- ``switch``: cut-through latency and per-port buffer of the fabric's switches.
- ``pcie``: the NIC's PCIe attachment: rate after encoding, TLP overhead, latency.
- ``nic``: processing units, per-opcode service times, caches, atomic unit, limits.
- ``host``: CPU costs of the software side of verbs (posting, polling, interrupts) and of
  the kernel TCP stack (the ``tcp`` RPC transport).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from .errors import InputError
from .yamlio import load_yaml
from .units import parse_bytes, parse_freq_hz, parse_rate_bps, parse_time_ns

PROFILE_DIR = Path(__file__).parent / "profiles"

_STRICT = ConfigDict(extra="forbid", frozen=True)


class _Param(BaseModel):
    model_config = _STRICT
    value: Any
    source: str = Field(min_length=3)
    example: ClassVar[str] = "..."          # a value of this kind, for messages


class TimeP(_Param):
    """A duration; ``.ns`` is the value in nanoseconds."""

    example = "300ns"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> float:
        return parse_time_ns(v)


class RateP(_Param):
    """A rate; the value is stored in bit/s."""

    example = "100Gbps"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> float:
        return parse_rate_bps(v)


class SizeP(_Param):
    """A size; the value is stored in bytes."""

    example = "4KiB"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> int:
        return parse_bytes(v)


class CountP(_Param):
    """A whole count (>= 0)."""

    example = "16"
    minimum: ClassVar[int] = 0

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < cls.minimum:
            raise ValueError(f"expected a whole number >= {cls.minimum}, got {v!r}")
        return v


class PosCountP(CountP):
    """A whole count of things the NIC or host needs at least one of (>= 1)."""

    minimum = 1


class FreqP(_Param):
    """A frequency; the value is stored in Hz."""

    example = "2.2GHz"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> float:
        return parse_freq_hz(v)


class RatioP(_Param):
    """A dimensionless number in (0, 1] (fractions, encodings as 'a/b' strings)."""

    example = "64b/66b"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> float:
        x = v
        m = re.fullmatch(r"\s*(\d+)b/(\d+)b\s*", v) if isinstance(v, str) else None
        if m and int(m.group(2)) > 0:  # "64b/66b"
            x = int(m.group(1)) / int(m.group(2))
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < float(x) <= 1:
            raise ValueError(f"expected a ratio in (0, 1] or an encoding like '64b/66b' "
                             f"(data bits/line bits), got {v!r}")
        return float(x)


class ChoiceP(_Param):
    """One word out of a fixed set (checked by the section)."""

    example = "<word>"


class FlagP(_Param):
    """A yes/no switch."""

    example = "true"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"expected true or false, got {v!r}")
        return v


class IdleStatesP(_Param):
    """A core's idle states (C-states): a mapping of state name to
    ``"<exit latency>/<target residency>"`` (e.g. ``C1E: 10us/20us``), the empty mapping
    for a core that never leaves C0 (``idle=poll``) or whose states are not modelled.
    The value is stored as ``{name: (exit_ns, residency_ns)}`` ordered by residency."""

    example = "{C1: 2us/2us, C1E: 10us/20us}"

    @field_validator("value")
    @classmethod
    def _v(cls, v: Any) -> dict:
        if not isinstance(v, dict):
            raise ValueError(f"expected a mapping of idle state names to "
                             f"'<exit latency>/<target residency>' such as "
                             f"{cls.example}, got {v!r}")
        out = {}
        for name, pair in v.items():
            if isinstance(pair, str) and pair.count("/") == 1:
                pair = pair.split("/")
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"idle state {name!r}: expected '<exit latency>/<target "
                                 f"residency>' such as '10us/20us', got {pair!r}")
            try:
                ex, res = (parse_time_ns(x.strip() if isinstance(x, str) else x)
                           for x in pair)
            except ValueError as e:
                raise ValueError(f"idle state {name!r}: {e}") from None
            out[str(name)] = (ex, res)
        return dict(sorted(out.items(), key=lambda kv: kv[1][1]))


class OpTimes(BaseModel):
    """Per-opcode service times [ns] of a NIC processing unit."""

    model_config = _STRICT
    send: TimeP
    write: TimeP
    read: TimeP
    atomic: TimeP


class LinkSection(BaseModel):
    """The wire between a NIC port and a switch port."""

    model_config = _STRICT
    kind: ChoiceP                   # ib | roce
    signal_rate: RateP              # raw lane rate x width [bit/s]
    encoding: RatioP                # 8b/10b, 64b/66b
    mtu: SizeP                      # RDMA (path) MTU [B]
    packet_overhead: SizeP          # bytes on the wire per packet besides payload and
                                    # transport extension headers (LRH/BTH/CRCs or
                                    # Ethernet/IP/UDP/BTH/CRCs + preamble + IFG)
    propagation: TimeP              # cable delay one way [ns]

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: ChoiceP) -> ChoiceP:
        if v.value not in ("ib", "roce"):
            raise ValueError("link.kind.value must be 'ib' or 'roce'")
        return v


class SwitchSection(BaseModel):
    """A switch of the fabric (cut-through, output-queued, lossless)."""

    model_config = _STRICT
    latency: TimeP                  # port-to-port cut-through latency [ns]
    buffer_per_port: SizeP          # output buffer before backpressure [B] (InfiniBand
                                    # credits; RoCE uses the PFC thresholds below)
    pfc_xoff: SizeP                 # RoCE: bytes queued from one ingress (per priority)
                                    # above which the switch sends PAUSE upstream [B]
    pfc_xon: SizeP                  # RoCE: the ingress queue drained to this -> resume [B]
    pfc_headroom: SizeP             # RoCE: buffer past XOFF for bytes still in flight [B]
    ecn_kmin: SizeP                 # RoCE + DCQCN: queue above which ECN marking starts [B]
    ecn_kmax: SizeP                 # queue at which the marking probability is ecn_pmax [B]
    ecn_pmax: RatioP                # marking probability at ecn_kmax (all marked above)
    interleave_segment: SizeP       # model resolution, not a switch register: ports
                                    # interleave the packets of messages from different
                                    # ingresses; NICs send a message longer than this in
                                    # segments of at most this size so that ports can
                                    # share themselves between long messages [B];
                                    # 0 = whole messages (fewer events, FIFO per port)

    @model_validator(mode="after")
    def _thresholds(self) -> "SwitchSection":
        if self.pfc_xon.value > self.pfc_xoff.value:
            raise ValueError("pfc_xon must not exceed pfc_xoff")
        if self.ecn_kmin.value > self.ecn_kmax.value:
            raise ValueError("ecn_kmin must not exceed ecn_kmax")
        return self


class PcieSection(BaseModel):
    """The NIC's PCIe attachment."""

    model_config = _STRICT
    rate: RateP                     # per direction after line encoding [bit/s]
    tlp_overhead: SizeP             # header + framing + LCRC + DLLP share per TLP [B]
    max_payload: SizeP              # MPS [B]: DMA writes and read completions split at this
    latency: TimeP                  # one-way NIC <-> host memory latency [ns]
    mmio_latency: TimeP             # CPU store reaching the NIC (doorbell, BlueFlame) [ns]


class NicSection(BaseModel):
    """The RNIC's internals."""

    model_config = _STRICT
    model: ChoiceP
    processing_units: PosCountP     # parallel engines; a QP is served by one of them
    requester: OpTimes              # PU time to issue one WQE of the opcode [ns]
    responder: OpTimes              # PU time to serve one incoming request [ns]
    completer: OpTimes              # PU time to take one ACK / response at the requester [ns]
    per_packet: TimeP               # PU time per extra MTU packet of a message [ns]
    cqe_size: SizeP                 # bytes of one CQE written to the host [B]
    recv_wqe_size: SizeP            # bytes of one RECV descriptor the NIC DMA-reads [B]
    recv_prefetch: PosCountP        # RECV descriptors per QP the NIC reads ahead of use
    blueflame_size: SizeP           # largest WQE the CPU can push with the doorbell [B]
    blueflame_inline_only: FlagP    # the driver pushes only inline WQEs (libmlx4); others
                                    # ring a doorbell and the NIC fetches the WQE by DMA
    max_inline: SizeP               # largest inline payload [B]
    qp_cache_entries: CountP        # QP contexts held on the NIC
    qp_context_size: SizeP          # bytes fetched over PCIe on a QP-context miss [B]
    qpc_miss_stall: FlagP           # a QP-context miss holds the PU until the context is in
                                    # (else the PU serves other QPs meanwhile)
    mtt_cache_entries: CountP       # address translations held on the NIC
    mtt_entry_size: SizeP           # bytes fetched over PCIe on a translation miss [B]
    atomic_units: PosCountP         # atomics in flight at once on the NIC
    atomic_mode: ChoiceP            # concurrent | stall_nic (ConnectX-3: NIC waits)
    atomic_service: TimeP           # atomic unit time besides the PCIe read-modify-write [ns]
    max_rd_atomic: PosCountP        # outstanding READ/atomic per QP
    uar_dedicated: CountP           # dedicated doorbell (BlueFlame) registers per context
    uar_shared: PosCountP           # lock-protected registers the other QPs share (>= 1)
    ack_coalesce: PosCountP         # RC responder sends one ACK per this many WRITE/SEND
    tx_arbitration: ChoiceP         # message: per-QP round robin, a message whole per turn
                                    # (ConnectX); packet: per-QP round robin packet by
                                    # packet (what-if); fifo: messages in the order they
                                    # are ready, whatever their QP (what-if)
    dcqcn: FlagP                    # RoCE congestion control (ECN marks -> CNPs -> per-QP
                                    # rate limiter); off: no marking, no pacing
    dcqcn_g: RatioP                 # alpha gain g
    dcqcn_timer: TimeP              # alpha-update period K and rate-increase timer T [ns]
    dcqcn_byte_counter: SizeP       # bytes sent per byte-counter rate-increase event [B]
    dcqcn_f: CountP                 # fast-recovery steps F
    dcqcn_rate_ai: RateP            # additive increase step R_AI [bit/s]
    dcqcn_rate_hai: RateP           # hyper increase step R_HAI [bit/s]
    dcqcn_min_rate: RateP           # floor of the limited rate [bit/s]
    cnp_interval: TimeP             # at most one CNP per QP per this interval [ns]

    @field_validator("atomic_mode")
    @classmethod
    def _mode(cls, v: ChoiceP) -> ChoiceP:
        if v.value not in ("concurrent", "stall_nic"):
            raise ValueError("atomic_mode.value must be 'concurrent' or 'stall_nic'")
        return v

    @field_validator("tx_arbitration")
    @classmethod
    def _arb(cls, v: ChoiceP) -> ChoiceP:
        if v.value not in ("message", "packet", "fifo"):
            raise ValueError("tx_arbitration.value must be 'message', 'packet' or 'fifo'")
        return v


class HostSection(BaseModel):
    """The host CPU side of verbs."""

    model_config = _STRICT
    cpu: ChoiceP
    clock: FreqP
    cores: PosCountP
    wqe_build: TimeP                # CPU time to build one WQE [ns]
    mmio: TimeP                     # CPU time of one doorbell / BlueFlame store [ns]
    uar_lock: TimeP                 # extra CPU time to take a shared doorbell register [ns]
    qp_state_cache: PosCountP       # QPs whose posting state (send and completion rings,
                                    # driver state) a core's private cache keeps [count]
    qp_state_miss: TimeP            # extra CPU time of a post to a QP outside them [ns]
    poll_cq: TimeP                  # CPU time of one ibv_poll_cq call [ns]
    cqe_handle: TimeP               # CPU time per completion taken [ns]
    poll_detect: TimeP              # mean delay from a memory/CQ write to a spinning poller
                                    # seeing it [ns]
    coroutine_switch: TimeP         # user-level context switch [ns]
    memcpy_rate: RateP              # one core copying memory [bit/s]
    interrupt_latency: TimeP        # completion to handler start with interrupts [ns]
    interrupt_cpu: TimeP            # CPU time of an interrupt + wakeup [ns]
    sched_quantum: TimeP            # time slice of each of two CPU-bound tasks sharing a
                                    # core (CFS sched_slice) [ns]; used with CPU hogs
    wakeup_latency: TimeP           # what preempting a running CPU hog adds to a woken
                                    # thread's interrupt path (the switch itself is in
                                    # interrupt_cpu) [ns]
    timer_slack: TimeP              # how late a sleeping thread's timer may fire (Linux
                                    # per-thread timer slack); usleep(d) blocks d + this [ns]
    idle_states: IdleStatesP        # C-states an idle core enters: a thread woken from a
                                    # sleep waits the exit latency of the deepest state
                                    # whose target residency fits the sleep [ns]
    # Kernel TCP (the ``tcp`` RPC transport, protocols/rpc.py); the NIC's own work (WQE,
    # doorbell, CQE) and the copies (memcpy_rate) are charged apart.
    tcp_send_cpu: TimeP             # one send syscall (writev of one flush to one peer):
                                    # entry/exit, tcp_sendmsg, IP, qdisc, driver [ns]
    tcp_recv_cpu: TimeP             # one received segment: IRQ/NAPI softirq, IP + TCP
                                    # receive, socket wake-up, epoll_wait + recv [ns]
    tcp_stack_latency: TimeP        # one-way delay the kernel adds beyond those CPU
                                    # costs: interrupt moderation and IRQ delivery [ns]


class ProfileModel(BaseModel):
    """The whole profile file."""

    model_config = _STRICT
    name: str
    description: str
    link: LinkSection
    switch: SwitchSection
    pcie: PcieSection
    nic: NicSection
    host: HostSection


class _View:
    """Attribute view of a section with plain values (units already applied)."""

    def __init__(self, section: BaseModel) -> None:
        for k in type(section).model_fields:
            p = getattr(section, k)
            if isinstance(p, OpTimes):
                setattr(self, k, {op: getattr(p, op).value for op in type(p).model_fields})
            else:
                setattr(self, k, p.value)


class Profile:
    """A loaded NIC profile.

    ``profile.link``, ``.switch``, ``.pcie``, ``.nic``, ``.host`` are views with plain
    numbers in base units (ns, bytes, bit/s, Hz). ``profile.model`` is the validated
    pydantic model (with the ``source`` of every parameter).
    """

    def __init__(self, model: ProfileModel, path: str) -> None:
        self.model = model
        self.path = path
        self.name = model.name
        self.link = _View(model.link)
        self.switch = _View(model.switch)
        self.pcie = _View(model.pcie)
        self.nic = _View(model.nic)
        self.host = _View(model.host)
        self.link.rate = self.link.signal_rate * self.link.encoding  # data rate [bit/s]

    def with_overrides(self, overrides: dict[str, Any], source: str = "override") -> "Profile":
        """A copy with ``{"section.param": value}`` replaced (validated like the file).

        A value is a unit string (``"80ns"``, ``"100Gbps"``, ``"4KiB"``) or a number in
        base units (ns, bit/s, B, Hz); each replaced parameter's ``source`` becomes
        ``"<source>: key=value"``. Raises :class:`InputError` naming ``source`` and the
        key for an unknown key or an invalid value; ``self`` is unchanged."""
        # model_dump gives values in base units (ns, B, bit/s), which validate unchanged.
        raw = self.model.model_dump(mode="python")
        for key, value in overrides.items():
            parts = key.split(".")
            node = raw
            for p in parts[:-1]:
                if not isinstance(node, dict) or p not in node:
                    raise InputError(source, key, f"a profile parameter; no {p!r} here")
                node = node[p]
            leaf = parts[-1]
            if not isinstance(node, dict) or leaf not in node:
                raise InputError(source, key, "a profile parameter such as pcie.latency")
            if isinstance(node[leaf], dict) and "value" in node[leaf]:
                node[leaf] = {"value": value, "source": f"{source}: {key}={value}"}
            else:
                node[leaf] = value
        return Profile(_validate(raw, source), source)


def _validate(raw: Any, source: str) -> ProfileModel:
    try:
        return ProfileModel.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].replace("Value error, ", "")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not a profile parameter)"
        elif err["type"] == "missing":
            msg = "missing required key"
        elif err["type"] == "model_type":
            msg = f"{_expected_mapping(err['ctx']['class_name'])}, got {err['input']!r}"
        raise InputError(source, loc, msg) from None


def _expected_mapping(class_name: str) -> str:
    """What a key whose value must be a mapping of ``class_name`` expects, in YAML terms."""
    cls = _PARAM_KINDS.get(class_name)
    if cls is not None:
        return (f"a parameter written as {{value: {cls.example}, source: \"where the number "
                f"comes from\"}}")
    if class_name == "OpTimes":
        return ("a mapping of send, write, read and atomic, each {value: 80ns, source: "
                "\"...\"}")
    return "a mapping of the section's parameters, each {value: ..., source: \"...\"}"


_PARAM_KINDS = {c.__name__: c for c in (TimeP, RateP, SizeP, CountP, PosCountP, FreqP, RatioP,
                                        ChoiceP, FlagP, IdleStatesP)}

# Parameters whose value is itself a mapping ("section.param"): an override of one is the
# whole mapping, never flattened into dotted keys.
MAPPING_PARAMS = frozenset(
    f"{sec}.{name}" for sec, sf in ProfileModel.model_fields.items()
    for name, f in getattr(sf.annotation, "model_fields", {}).items()
    if f.annotation is IdleStatesP)


def available_profiles() -> list[str]:
    """Names of the profiles shipped in ``rnicsim/profiles``."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


_CACHE: dict[str, Profile] = {}


def load_profile(name_or_path: str) -> Profile:
    """Load a profile by name (``cx4-edr``) or by path to a YAML file.

    Raises :class:`InputError` naming the file, the key path and what was expected.
    """
    if name_or_path in _CACHE:
        return _CACHE[name_or_path]
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        path = p
    else:
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise InputError("profile", name_or_path,
                             f"a profile name ({', '.join(available_profiles())}) "
                             "or a path to a profile YAML")
    if not path.exists():
        raise InputError(str(path), "", "an existing profile YAML file")
    if not path.is_file():
        raise InputError(str(path), "", "a profile YAML file (this is a directory)"
                         if path.is_dir() else "a profile YAML file")
    try:
        # Refuses a key given twice in one mapping (PyYAML would keep the last silently).
        raw = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except UnicodeDecodeError as e:
        raise InputError(str(path), "", f"a profile YAML file in UTF-8 (byte {e.start} is "
                         "not UTF-8)") from None
    except OSError as e:
        raise InputError(str(path), "", f"a readable profile YAML file ({e.strerror})") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "", "a mapping with name, description, link, switch, "
                         "pcie, nic, host")
    prof = Profile(_validate(raw, str(path)), str(path))
    _CACHE[name_or_path] = prof
    return prof
