"""Scenario kinds of the transaction layer: workloads ``txn`` and ``rpc``, the protocols.

Imported lazily by :mod:`rnicsim.scenario` (its ``PLUGINS`` list). ``txn`` runs
SmallBank, TPC-C New-Order, TPC-E Customer-Position or YCSB over a concurrency-control
protocol (:mod:`protocols.txn.bench`); ``rpc`` is the RPC-transport benchmark of
:mod:`protocols.rpc`. Protocols: ``occ`` picks a DrTM+H system preset
(:mod:`protocols.txn.systems`) and optionally overrides its per-phase primitives, or,
with ``verbs``, runs RCC's OCC; ``nowait``, ``waitdie``, ``mvcc``, ``sundial`` and
``calvin`` are RCC's other protocols. RCC's protocols take ``verbs``: ``rpc``,
``one_sided`` or ``hybrid`` with a per-stage choice (``stages``, or RCC's bit mask
``hybrid_code``; :mod:`protocols.txn.cc`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rnicsim.scenario import Duration, Size, register_protocol, register_workload

from ..rpc import RpcConfig
from .cc import FRAMEWORKS, ONE, resolve_stages
from .occ import OccConfig, OccSystem
from .registry import register_protocol as register_cc
from .store import OCC_LAYOUT

_STRICT = ConfigDict(extra="forbid", frozen=True)
Mode = Literal["one_sided", "two_sided", "hybrid"]
Side = Literal["one_sided", "two_sided"]
Verbs = Literal["rpc", "one_sided", "hybrid"]
StageVerbs = Literal["rpc", "one_sided"]
# Whose framework code runs the transactions: what its own code adds
# (protocols.txn.cc.FRAMEWORKS); "none" charges the model's steps alone.
Framework = Literal[tuple(FRAMEWORKS)]

# The stages of each of RCC's protocols (protocols.txn.cc.STAGE_BITS): what
# ``protocol.stages`` may name and which ``hybrid_code`` bits are read.
STAGES = {
    "occ": ("read", "lock", "validate", "log", "commit", "release"),
    "nowait": ("lock", "read", "log", "release", "commit"),
    "waitdie": ("lock", "read", "log", "release", "commit"),
    "mvcc": ("lock", "read", "log", "release", "commit"),
    "sundial": ("lock", "read", "log", "release", "commit", "renew"),
    "calvin": ("read", "log", "release", "commit", "txn_broadcast_input",
               "value_forwarding"),
}


class TxnWorkload(BaseModel):
    """A transaction benchmark; keys of the other benchmarks keep their defaults."""

    model_config = _STRICT
    kind: Literal["txn"]
    benchmark: Literal["smallbank", "tpcc", "tpce", "ycsb"]
    coroutines: int = Field(10, ge=1, le=256)
    # Record every committed transaction (ids, read and written keys with versions); the
    # point's row gets ``serializable`` (1 or 0) and ``history_txns``, and the history is
    # written as JSON lines to ``points/NNN/history.jsonl`` in the output directory, the
    # format ``rnicsim check-history`` reads. Costs memory (~24 B per access).
    history: bool = False
    # Stretch the measured window so that the cluster's threads could commit at least
    # this many transactions (each holding its thread for its estimated CPU and sleeps,
    # none aborting: protocols/txn/bench.py stretch_window); 0 keeps the run's window.
    # A sweep over cluster sizes then measures its small clusters as precisely as its
    # large ones.
    min_txns: int = Field(0, ge=0)
    # SmallBank
    accounts_per_thread: int = Field(100_000, ge=1)
    hot_fraction: float = Field(0.04, gt=0, le=1)
    hot_probability: float = Field(0.9, ge=0, le=1)
    # Percent per transaction type (send_payment, deposit_checking, balance,
    # transact_saving, write_check, amalgamate); default DrTM+H's 25/15/15/15/15/15. RCC's
    # runs use 17/17/17/16/17/16 (co2.bank).
    smallbank_mix: Optional[dict[Literal["send_payment", "deposit_checking", "balance",
                                         "transact_saving", "write_check", "amalgamate"],
                                 float]] = None
    # TPC-C New-Order
    warehouses_per_node: Optional[int] = Field(None, ge=1)
    remote_item_pct: float = Field(100.0, ge=0, le=100)
    tpcc_logic: Duration = 4000.0
    tpcc_logic_per_item: Duration = 4000.0
    # Districts per warehouse; default max(10, coroutines): one per coroutine, the
    # conflict-free regime DrTM+H measured under NO_ABORT (workloads/tpcc.py). 10 is the
    # strict TPC-C schema.
    tpcc_districts: Optional[int] = Field(None, ge=1)
    # Which district a New-Order uses: its coroutine's (coroutine mod districts) or one
    # drawn at random per transaction, as DrTM+H's tpcc_worker_new.cc does.
    tpcc_district: Literal["coroutine", "random"] = "coroutine"
    # false: RCC's New-Order, without the warehouse and customer reads
    tpcc_read_warehouse_customer: bool = True
    # Home warehouses per thread, one drawn per transaction from a range starting at the
    # thread's own (RCC's tpcc_main.cc: scale_factor / threads); 1: the thread's own.
    tpcc_warehouses_per_thread: int = Field(1, ge=1)
    # false: each stock read when its order line is processed, as RCC's New-Order does;
    # true: all stock reads out together first under a protocol with outstanding requests
    # (DrTM+H's speculative execution)
    tpcc_prefetch_stocks: bool = True
    # TPC-E Customer-Position
    customers_per_thread: int = Field(1000, ge=1)
    securities_per_node: int = Field(685, ge=1)
    # 0: held securities from EGen's initial trades, as DrTM+H loads them; n: n per account
    holdings_per_account: int = Field(0, ge=0)
    # Share of transactions that also read one account's trade history (EGen default 50)
    tpce_history_pct: float = Field(50.0, ge=0, le=100)
    tpce_logic: Duration = 1000.0
    tpce_per_row: Duration = 1300.0     # fitted (workloads/tpce.py TpceSpec.per_row)
    # YCSB as RCC configures it (workloads/ycsb.py): records and hot records per thread
    # of a node (RCC sizes both by its scale factor, its config's scale times the
    # threads: bench_runner.cc), the share of picks forced into the hot area, operations
    # per transaction, the probability that one is a write, the computation before
    # commit, whether it is a usleep (RCC's; the thread blocks it plus the timer slack) or
    # CPU work, the value size.
    ycsb_records_per_thread: int = Field(300_000, ge=1)
    ycsb_hot_records_per_thread: int = Field(300, ge=1)
    ycsb_hot_probability: float = Field(0.1, ge=0, le=1)
    ycsb_ops: int = Field(10, ge=1, le=64)
    ycsb_write_probability: float = Field(0.2, ge=0, le=1)
    ycsb_compute: Duration = 5000.0
    ycsb_sleep: bool = True
    ycsb_value_size: Size = Field(64, ge=8)

    def params(self) -> dict:
        """Constructor arguments of the benchmark's spec."""
        if self.benchmark == "smallbank":
            out = {"accounts_per_thread": self.accounts_per_thread,
                   "hot_fraction": self.hot_fraction,
                   "hot_probability": self.hot_probability}
            if self.smallbank_mix is not None:
                out["mix"] = tuple(self.smallbank_mix.items())
            return out
        if self.benchmark == "ycsb":
            return {"records_per_thread": self.ycsb_records_per_thread,
                    "hot_records_per_thread": self.ycsb_hot_records_per_thread,
                    "hot_probability": self.ycsb_hot_probability,
                    "ops": self.ycsb_ops, "write_probability": self.ycsb_write_probability,
                    "compute": self.ycsb_compute, "sleep": self.ycsb_sleep,
                    "value_size": self.ycsb_value_size}
        if self.benchmark == "tpcc":
            return {"warehouses_per_node": self.warehouses_per_node,
                    "remote_item_pct": self.remote_item_pct, "logic": self.tpcc_logic,
                    "logic_per_item": self.tpcc_logic_per_item,
                    "districts": self.tpcc_districts, "district": self.tpcc_district,
                    "read_warehouse_customer": self.tpcc_read_warehouse_customer,
                    "warehouses_per_thread": self.tpcc_warehouses_per_thread,
                    "prefetch_stocks": self.tpcc_prefetch_stocks}
        return {"customers_per_thread": self.customers_per_thread,
                "securities_per_node": self.securities_per_node,
                "holdings_per_account": self.holdings_per_account,
                "history_pct": self.tpce_history_pct,
                "logic": self.tpce_logic, "per_row": self.tpce_per_row}


class RpcWorkload(BaseModel):
    """RPC transports: every thread's coroutines call random peers (fig. 3b)."""

    model_config = _STRICT
    kind: Literal["rpc"]
    transport: Literal["ud", "rc", "write_imm", "tcp"] = "ud"
    request: Size = 64
    reply: Size = 64
    coroutines: int = Field(8, ge=1)
    outstanding: int = Field(1, ge=1)
    doorbell_batch: int = Field(16, ge=1)
    handler: Duration = 0.0
    coalesce: bool = False

    @model_validator(mode="after")
    def _check(self) -> "RpcWorkload":
        if self.transport == "ud" and max(self.request, self.reply) > 4096 - 8:
            raise ValueError("UD messages must fit one MTU (request and reply <= 4088 B)")
        return self


class OccProtocol(BaseModel):
    """OCC with a system preset; any field set here overrides the preset.

    ``execution`` also sets ``ro_read`` unless that is given; ``validation`` is the
    read-set check of the validation phase and ``lock`` the write-set locking (setting
    only ``lock`` sets both).
    """

    model_config = _STRICT
    kind: Literal["occ"]
    # DrTM+H's system preset (default drtmh unless ``verbs`` asks for RCC's OCC)
    preset: Optional[Literal["drtmh", "drtmh-rpc-lock", "farm", "drtmr", "fasst",
                             "hybrid-fasst"]] = None
    execution: Optional[Mode] = None
    index_cache: Optional[bool] = None
    lock: Optional[Side] = None
    validation: Optional[Side] = None      # OccConfig.validate (the read-set check)
    log: Optional[Side] = None
    commit: Optional[Side] = None
    ro_read: Optional[Mode] = None
    ro_validate: Optional[Side] = None
    passive_ack: Optional[bool] = None
    outstanding: Optional[bool] = None
    lock_in_execution: Optional[bool] = None
    log_to: Optional[Literal["participants", "coordinator"]] = None
    rep_factor: Optional[int] = Field(None, ge=0, le=2)
    # The released DrTM+H code's NO_ABORT (protocols/txn/occ.py): failed locks and
    # validations do not abort; histories are then not serializable.
    no_abort: Optional[bool] = None
    # true: an execution read that finds the record locked aborts at once (a what-if);
    # default: it reads on and the lock and validation stages catch the conflict, as
    # DrTM+H's and RCC's code does (protocols/txn/occ.py).
    locked_read_aborts: Optional[bool] = None
    # false: retry an aborted transaction at once, as DrTM+H's BenchWorker::worker_routine
    # (protocols/txn/occ.py); true: after a random back-off. Unset: the framework's
    # rule (retry_backoff_for).
    retry_backoff: Optional[bool] = None
    # true: transactions end after their execution phase (the released code's
    # TX_ONLY_EXE build switch, protocols/txn/occ.py).
    only_execution: Optional[bool] = None
    doorbell_batch: int = Field(16, ge=1)
    coalesce: Optional[bool] = None
    rpc_transport: Literal["ud", "rc", "write_imm", "tcp"] = "ud"
    qps_per_peer: int = Field(1, ge=1)
    # RCC's OCC instead of a DrTM+H design: every stage over RPC or one-sided verbs, or
    # a hybrid (stages / hybrid_code). Excludes the preset and per-phase keys above.
    verbs: Optional[Verbs] = None
    stages: Optional[dict[str, StageVerbs]] = None
    hybrid_code: Optional[int] = None
    framework: Framework = "none"

    @model_validator(mode="after")
    def _rcc(self) -> "OccProtocol":
        if self.verbs is None:
            for k in ("stages", "hybrid_code"):
                if getattr(self, k) is not None:
                    raise ValueError(f"protocol.{k}: only with protocol.verbs: hybrid "
                                     "(RCC's OCC)")
            return self
        drtmh = ("preset", "execution", "index_cache", "lock", "validation", "log",
                 "commit", "ro_read", "ro_validate", "lock_in_execution", "log_to",
                 "no_abort", "only_execution")
        for k in drtmh:
            if getattr(self, k) is not None:
                raise ValueError(f"protocol.{k}: a DrTM+H design key; with protocol.verbs "
                                 f"(RCC's OCC) choose the verbs per stage with "
                                 f"protocol.stages or protocol.hybrid_code instead")
        resolve_stages(STAGES["occ"], self.verbs, self.stages, self.hybrid_code)
        return self

    def overrides(self) -> dict:
        """The OccConfig fields this block sets."""
        names = ("execution", "index_cache", "lock", "log", "commit", "ro_read",
                 "ro_validate", "passive_ack", "outstanding", "lock_in_execution", "log_to",
                 "rep_factor", "no_abort", "retry_backoff", "only_execution",
                 "locked_read_aborts")
        out = {k: getattr(self, k) for k in names if getattr(self, k) is not None}
        if self.execution is not None and self.ro_read is None:
            out["ro_read"] = self.execution      # read-only reads follow the execution phase
        if self.lock is not None and self.validation is None:
            out["validate"] = self.lock          # one primitive for the validation phase
        if self.validation is not None:
            out["validate"] = self.validation
        return out


def retry_backoff_for(proto) -> bool:
    """Whether an aborted transaction waits a random back-off before its retry: the
    block's ``retry_backoff`` if set, else the framework's rule. ``framework: rcc`` is
    RCC's code as it ran, and its BenchWorker retries at once (behind the thread's ready
    coroutines); any other framework backs off. The back-off departs from the published
    code on purpose: a deterministic simulator has none of the timing noise that breaks
    the symmetry of two transactions retrying in lockstep on real machines, and with
    immediate retry two symmetric SmallBank amalgamates under a no-wait protocol were
    seen to abort each other for ever (one coroutine per thread, every record written).
    With RCC's several coroutines per thread a retry queues behind the ready ones, which
    breaks the lockstep; ``retry_backoff: true`` keeps the back-off as a what-if."""
    if proto.retry_backoff is not None:
        return proto.retry_backoff
    return proto.framework != "rcc"


def occ_config(proto: OccProtocol) -> OccConfig:
    """The :class:`OccConfig` of a scenario's ``occ`` protocol block: a DrTM+H preset
    with overrides, or RCC's OCC when ``verbs`` is given (RCC's build: location cache,
    no passive ACK, aborts real, retry at once; lock and validation timed as stages of
    their own; one-sided reads one at a time, as ``OR`` 0 builds ``occ_rdma.h``'s
    ``remote_read``, and RPC reads together, as ``occ.h``'s ``remote_read`` only adds
    the record to a batch of read RPCs that the first ``load_read`` sends)."""
    from .systems import preset

    if proto.verbs is not None:
        ch = resolve_stages(STAGES["occ"], proto.verbs, proto.stages, proto.hybrid_code)
        side = {s: ("one_sided" if v == ONE else "two_sided") for s, v in ch.items()}
        cfg = OccConfig(execution=side["read"], index_cache=True, lock=side["lock"],
                        validate=side["validate"], log=side["log"], commit=side["commit"],
                        release=side["release"], ro_read=side["read"],
                        ro_validate=side["validate"], passive_ack=False,
                        outstanding=side["read"] == "two_sided",
                        retry_backoff=retry_backoff_for(proto), rcc_stages=True)
        over = {k: getattr(proto, k) for k in ("passive_ack", "outstanding", "rep_factor",
                                               "locked_read_aborts")
                if getattr(proto, k) is not None}
        cfg = replace(cfg, **over)
    else:
        over = proto.overrides()
        over["retry_backoff"] = retry_backoff_for(proto)
        cfg = preset(proto.preset or "drtmh", **over)
    # Passive ACK piggybacks RPC replies on requests unless told otherwise.
    coalesce = cfg.passive_ack if proto.coalesce is None else proto.coalesce
    rpc = RpcConfig(transport=proto.rpc_transport, doorbell_batch=proto.doorbell_batch,
                    coalesce=coalesce)
    return replace(cfg, rpc=rpc)


class _RccProtocol(BaseModel):
    """Keys every RCC protocol has: the verbs per stage and how RPCs travel.

    ``retry_backoff``: true retries an aborted transaction after a random back-off;
    false retries it at once behind the thread's ready coroutines, as RCC's BenchWorker
    does; unset, the framework decides (:func:`retry_backoff_for`: at once under
    ``framework: rcc``). ``passive_ack`` sends commit and release messages without
    replies (RCC runs with PA 0)."""

    model_config = _STRICT
    verbs: Verbs = "one_sided"
    stages: Optional[dict[str, StageVerbs]] = None
    hybrid_code: Optional[int] = None
    rpc_transport: Literal["ud", "rc", "write_imm", "tcp"] = "ud"
    doorbell_batch: int = Field(16, ge=1)
    coalesce: bool = False
    qps_per_peer: int = Field(1, ge=1)
    rep_factor: int = Field(2, ge=0, le=2)
    retry_backoff: Optional[bool] = None
    passive_ack: bool = False
    framework: Framework = "none"

    @model_validator(mode="after")
    def _stages(self):
        resolve_stages(STAGES[self.kind], self.verbs, self.stages, self.hybrid_code)
        return self

    def options(self) -> dict:
        """The protocol's own keys."""
        return {}


class NowaitProtocol(_RccProtocol):
    """NO_WAIT two-phase locking: a lock found held aborts at once.

    ``lock_read_batch``: a one-sided lock posts CAS and READ in one doorbell (RCC's
    ``RDMALockReq``); false: CAS, wait, then READ (RCC's R14 compares the two)."""

    kind: Literal["nowait"]
    lock_read_batch: bool = True

    def options(self) -> dict:
        return {"lock_read_batch": self.lock_read_batch}


class WaitdieProtocol(NowaitProtocol):
    """WAIT_DIE two-phase locking: an older requester waits, a younger one dies."""

    kind: Literal["waitdie"]


class MvccProtocol(_RccProtocol):
    """Multi-version timestamp ordering with ``versions`` slots per record (RCC: 4)."""

    kind: Literal["mvcc"]
    versions: int = Field(4, ge=1, le=16)

    def options(self) -> dict:
        return {"versions": self.versions}


class SundialProtocol(_RccProtocol):
    """SUNDIAL: logical leases on read records, renewed before commit.

    ``renew_lock``: true, a one-sided renewal extends a lease under a brief lock (CAS +
    READ, then WRITE lease + unlock); false, RCC's plain WRITE after the header READ,
    which lets a writer locking in between commit below the new lease (not
    serializable). Unset, the framework's code decides: ``framework: rcc`` runs RCC's
    code as it ran, the plain WRITE; any other framework renews under the lock."""

    kind: Literal["sundial"]
    renew_lock: Optional[bool] = None

    def options(self) -> dict:
        lock = self.renew_lock if self.renew_lock is not None else self.framework != "rcc"
        return {"renew_lock": lock}


class CalvinProtocol(_RccProtocol):
    """CALVIN: deterministic scheduling of epochs of sequenced transactions.

    ``epoch_batch``: requests a sequencer puts in one epoch (RCC:
    ``MAX_CALVIN_REQ_CNTS`` 10); ``epoch_timeout``: a sequencer whose batch is not full
    and whose clients are not all waiting closes it this long after the epoch began
    (the Calvin paper's 10-ms epoch, RCC's "~10 ms" comment; protocols/txn/calvin.py)."""

    kind: Literal["calvin"]
    epoch_batch: int = Field(10, ge=1, le=64)
    epoch_timeout: Duration = Field(10e6, gt=0)

    def options(self) -> dict:
        return {"epoch_batch": self.epoch_batch, "epoch_timeout": self.epoch_timeout}


def rcc_config(proto: _RccProtocol):
    """The :class:`protocols.txn.cc.CcConfig` of an RCC protocol block."""
    from .cc import CcConfig

    ch = resolve_stages(STAGES[proto.kind], proto.verbs, proto.stages, proto.hybrid_code)
    rpc = RpcConfig(transport=proto.rpc_transport, doorbell_batch=proto.doorbell_batch,
                    coalesce=proto.coalesce)
    return CcConfig(stages=ch, rpc=rpc, rep_factor=proto.rep_factor,
                    retry_backoff=retry_backoff_for(proto), passive_ack=proto.passive_ack,
                    options=proto.options())


def _lazy(kind: str):
    """The protocol module's system class and layout, imported when first used."""
    import importlib

    def system(*a):
        return importlib.import_module(f"protocols.txn.{kind}").System(*a)

    def layout(cfg):
        return importlib.import_module(f"protocols.txn.{kind}").layout(cfg)

    return system, layout


register_workload("txn", TxnWorkload, "protocols.txn.bench:run_scenario_point")
register_workload("rpc", RpcWorkload, "protocols.rpc:run_scenario_point")
register_protocol("occ", OccProtocol)
register_cc("occ", OccSystem, occ_config, lambda cfg: OCC_LAYOUT)
for _m in (NowaitProtocol, WaitdieProtocol, MvccProtocol, SundialProtocol, CalvinProtocol):
    _k = _m.model_fields["kind"].annotation.__args__[0]
    _system, _layout = _lazy(_k)
    register_protocol(_k, _m)
    register_cc(_k, _system, rcc_config, _layout)
