"""Scenario kinds of the transaction layer: workloads ``txn`` and ``rpc``, protocol ``occ``.

Imported lazily by :mod:`rnicsim.scenario` (its ``PLUGINS`` list). ``txn`` runs
SmallBank, TPC-C New-Order or TPC-E Customer-Position over OCC
(:mod:`protocols.txn.bench`); ``rpc`` is the RPC-transport benchmark of
:mod:`protocols.rpc`; ``occ`` picks a system preset (:mod:`protocols.txn.systems`) and
optionally overrides its per-phase primitives and options.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rnicsim.scenario import Duration, Size, register_protocol, register_workload

_STRICT = ConfigDict(extra="forbid", frozen=True)
Mode = Literal["one_sided", "two_sided", "hybrid"]
Side = Literal["one_sided", "two_sided"]


class TxnWorkload(BaseModel):
    """A transaction benchmark; keys of the other benchmarks keep their defaults."""

    model_config = _STRICT
    kind: Literal["txn"]
    benchmark: Literal["smallbank", "tpcc", "tpce"]
    coroutines: int = Field(10, ge=1, le=256)
    # Record every committed transaction (ids, read and written keys with versions); the
    # point's row gets ``serializable`` (1 or 0) and ``history_txns``, and the history is
    # written as JSON lines to ``points/NNN/history.jsonl`` in the output directory, the
    # format ``rnicsim check-history`` reads. Costs memory (~24 B per access).
    history: bool = False
    # SmallBank
    accounts_per_thread: int = Field(100_000, ge=1)
    hot_fraction: float = Field(0.04, gt=0, le=1)
    hot_probability: float = Field(0.9, ge=0, le=1)
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
    # TPC-E Customer-Position
    customers_per_thread: int = Field(1000, ge=1)
    securities_per_node: int = Field(685, ge=1)
    # 0: held securities from EGen's initial trades, as DrTM+H loads them; n: n per account
    holdings_per_account: int = Field(0, ge=0)
    # Share of transactions that also read one account's trade history (EGen default 50)
    tpce_history_pct: float = Field(50.0, ge=0, le=100)
    tpce_logic: Duration = 1000.0
    tpce_per_row: Duration = 1300.0     # fitted (workloads/tpce.py TpceSpec.per_row)

    def params(self) -> dict:
        """Constructor arguments of the benchmark's spec."""
        if self.benchmark == "smallbank":
            return {"accounts_per_thread": self.accounts_per_thread,
                    "hot_fraction": self.hot_fraction,
                    "hot_probability": self.hot_probability}
        if self.benchmark == "tpcc":
            return {"warehouses_per_node": self.warehouses_per_node,
                    "remote_item_pct": self.remote_item_pct, "logic": self.tpcc_logic,
                    "logic_per_item": self.tpcc_logic_per_item,
                    "districts": self.tpcc_districts, "district": self.tpcc_district}
        return {"customers_per_thread": self.customers_per_thread,
                "securities_per_node": self.securities_per_node,
                "holdings_per_account": self.holdings_per_account,
                "history_pct": self.tpce_history_pct,
                "logic": self.tpce_logic, "per_row": self.tpce_per_row}


class RpcWorkload(BaseModel):
    """RPC transports: every thread's coroutines call random peers (fig. 3b)."""

    model_config = _STRICT
    kind: Literal["rpc"]
    transport: Literal["ud", "rc", "write_imm"] = "ud"
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
    preset: Literal["drtmh", "drtmh-rpc-lock", "farm", "drtmr", "fasst",
                    "hybrid-fasst"] = "drtmh"
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
    # false: retry an aborted transaction at once, as DrTM+H's BenchWorker::worker_routine
    # (protocols/txn/occ.py); default: after a random back-off.
    retry_backoff: Optional[bool] = None
    # true: transactions end after their execution phase (the released code's
    # TX_ONLY_EXE build switch, protocols/txn/occ.py).
    only_execution: Optional[bool] = None
    doorbell_batch: int = Field(16, ge=1)
    coalesce: Optional[bool] = None
    rpc_transport: Literal["ud", "rc", "write_imm"] = "ud"
    qps_per_peer: int = Field(1, ge=1)

    def overrides(self) -> dict:
        """The OccConfig fields this block sets."""
        names = ("execution", "index_cache", "lock", "log", "commit", "ro_read",
                 "ro_validate", "passive_ack", "outstanding", "lock_in_execution", "log_to",
                 "rep_factor", "no_abort", "retry_backoff", "only_execution")
        out = {k: getattr(self, k) for k in names if getattr(self, k) is not None}
        if self.execution is not None and self.ro_read is None:
            out["ro_read"] = self.execution      # read-only reads follow the execution phase
        if self.lock is not None and self.validation is None:
            out["validate"] = self.lock          # one primitive for the validation phase
        if self.validation is not None:
            out["validate"] = self.validation
        return out


register_workload("txn", TxnWorkload, "protocols.txn.bench:run_scenario_point")
register_workload("rpc", RpcWorkload, "protocols.rpc:run_scenario_point")
register_protocol("occ", OccProtocol)
