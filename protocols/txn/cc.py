"""What every concurrency-control protocol shares: stages, their verbs, costs, config.

Scope
    RCC runs each protocol in three forms: every stage over RPC, every stage over
    one-sided verbs, or a hybrid that picks per stage. Its build switch ``HYBRID_CODE``
    is a bit mask, one bit per stage, a set bit meaning "one-sided"
    (PROTOCOL-FACTS 1.2, RCC ``src/tx_config.h.in``):

    =====================  ====  =======================================================
    stage                  bit   what travels
    =====================  ====  =======================================================
    ``lock``               1     lock a record (CAS + READ, or a lock RPC)
    ``read``               2     read a record (READ, or a read RPC)
    ``log``                4     the log to the backups (WRITE, or a log RPC)
    ``release``            8     unlock after an abort or for read locks (WRITE 0, RPC)
    ``commit``             16    install values and unlock (WRITEs, or a commit RPC)
    ``validate``           32    re-read headers of the read set (READ, or an RPC)
    ``renew``              64    SUNDIAL's lease renewal
    ``txn_broadcast_input`` 128  CALVIN: the sequencer's batch to every scheduler
    ``value_forwarding``   256   CALVIN: values of local reads to active participants
    =====================  ====  =======================================================

    :func:`resolve_stages` turns a scenario's ``verbs`` / ``stages`` / ``hybrid_code``
    into one choice per stage of a protocol and refuses a stage the protocol does not
    have, naming it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

ONE, RPC = "one_sided", "rpc"
STAGE_BITS: dict[str, int] = {"lock": 1, "read": 2, "log": 4, "release": 8, "commit": 16,
                              "validate": 32, "renew": 64, "txn_broadcast_input": 128,
                              "value_forwarding": 256}


@dataclass(frozen=True)
class SoftwareCosts:
    """CPU of the transaction layer's own work [ns] (not the workload's)."""

    local_access: float = 60.0      # read/lock/install a record in local memory
    record_op: float = 80.0         # a handler's index lookup + operation, per record
    copy_per_byte: float = 0.1      # memcpy of a log (about 10 GB/s)
    log_apply: float = 60.0         # the log cleaner installing one logged write
    cache_lookup: float = 20.0      # a location-cache probe
    backoff: float = 1000.0         # base of the random back-off after an abort [ns]
    # An event loop with parked lock waiters re-checks their locks this often [ns]: RCC's
    # worker calls GlobalLockManager::check_to_notify on every turn of its loop
    # (src/core/rworker.h), which also sees locks released by one-sided WRITEs.
    waiter_poll: float = 1000.0
    # What the framework's own code adds (:data:`FRAMEWORKS`, scenario key
    # ``protocol.framework``): CPU per transaction attempt on its coordinator's thread
    # [ns], and whether one-sided locks (and MVCC's one-sided reads) READ the record
    # first (:meth:`protocols.txn.access.Access.index_read`), whether the
    # coordinator reaches its own node's records through the NIC as well
    # (:meth:`protocols.txn.driver.TxnSystem.by_cpu`), and what its event loop adds, on
    # an idle thread, before it polls a completion [ns] (:class:`protocols.runtime.Worker`).
    txn_cpu: float = 0.0
    index_read: bool = False
    loopback: bool = False
    loop_delay: float = 0.0


@dataclass(frozen=True)
class FrameworkCosts:
    """What a transaction framework's own code adds to the steps the model charges
    (protocol, verbs, records, the workload's logic): ``txn_cycles`` of CPU per attempt
    on the coordinator's thread [cycles], charged before the attempt (outside every
    stage, as RCC's stage timers leave begin, input generation, read/write-set
    bookkeeping, timers and statistics out), in cycles so that one framework costs its
    time at each profile's host clock; ``index_read``: its one-sided locks (and MVCC's
    one-sided reads) READ the record whole first; ``loopback``: the coordinator's own
    node's records go through the NIC as every other node's do (one-sided verbs on an RC
    QP to itself, RPCs to itself) instead of its CPU touching them; ``loop_cycles``: what
    its event loop adds, on an idle thread, between a completion (or an RPC message)
    becoming visible and its poll [cycles] (:class:`protocols.runtime.Worker`)."""

    txn_cycles: float
    index_read: bool
    loopback: bool
    loop_cycles: float = 0.0


FRAMEWORKS: dict[str, FrameworkCosts] = {
    # The model's steps alone (DrTM+H's per-phase cycles are the workload's).
    "none": FrameworkCosts(0.0, False, False),
    # RCC's code as it ran for its paper (Alchem-Lab/drtmh; logs on hybrid-cc at
    # 64bf7c64, made by the code of deeede4e with the round-trip counters of 612aeb05).
    # Two constants are calibration, each fitted to one set of RCC's logs (geometric
    # mean of the ratios 1 at the fit; 0.98 and 1.01 with RPC OCC's batched reads and
    # SUNDIAL's renewal as RCC's verbs):
    # - loop_cycles, to the 42 stage means per call of fig. 21's one-coroutine runs
    #   (docs/data/rcc_stage_logs.csv; 4 EDR nodes, SmallBank): RCC's worker polls in a
    #   master routine between its coroutines (src/core/rworker.cc new_master_routine:
    #   events_handler in src/core/rworker.h polls the UD messages and flushes the
    #   pending replies, checks the lock manager's waiters, polls the CQ of every
    #   pending one-sided request and scans every coroutine's timeout with rdtsc, then
    #   switches to the next ready routine), so an idle thread notices a completion or
    #   an RPC message about 0.7 us after it lands, where the model's 20-ns switch and
    #   30-ns poll give stage waits 0.54-0.91x RCC's (0.2-1.6 us short in every kind
    #   of wait, one-sided and RPC alike, two waits per RPC round trip). A busy thread
    #   polls when its work ends, so CPU-bound runs barely move. (r2, the successor of
    #   the RLib that DrTM+H's and RCC's code build on, measures about 0.85 us per
    #   yield and resume through its scheduler; docs/model.md, "Host".)
    # - txn_cycles, to RCC's logged SmallBank throughput at 10 threads x 10 coroutines
    #   on 4 EDR nodes (docs/data/rcc_logs.csv, dir overall/edr; RCC fig. 15), where the
    #   coordinators are CPU-bound: RCC spends 5.7-8.6 us of thread time per
    #   transaction there, the model's steps alone 2.3-3.8 us; one constant, as the ten
    #   differences do not grow with round trips.
    # Checks on those runs are calibration; every other RCC log and figure validates
    # them. index_read and loopback are read off the code, not fitted: index_read is
    # Access.index_read; loopback, as every protocol object of RCC's workers is built
    # with response_node -1 (src/app/smallbank/bank_worker.cc, tpcc_worker.cc), which
    # TXOpBase keeps as its node_id_ (src/rtx/txn_interface.h, tx_operator.hpp), so no
    # record ever takes a `pid == node_id_` local branch (nowait_rdma.cc's local lock
    # path is assert(false)).
    "rcc": FrameworkCosts(7_500.0, True, True, 1_500.0),
}


def framework_costs(framework: str, clock_hz: float, costs: SoftwareCosts) -> SoftwareCosts:
    """``costs`` with framework ``framework``'s own work on a host of ``clock_hz`` [Hz]
    (:data:`FRAMEWORKS`); ``ValueError`` naming the known ones."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"protocol.framework: one of {', '.join(FRAMEWORKS)}, "
                         f"got {framework!r}")
    f = FRAMEWORKS[framework]
    return replace(costs, txn_cpu=f.txn_cycles / clock_hz * 1e9, index_read=f.index_read,
                   loopback=f.loopback, loop_delay=f.loop_cycles / clock_hz * 1e9)


def resolve_stages(stages_of: tuple[str, ...], verbs: str,
                   stages: Mapping[str, str] | None = None,
                   hybrid_code: int | None = None) -> dict[str, str]:
    """The verbs (``one_sided`` or ``rpc``) of each stage in ``stages_of``.

    ``verbs``: ``rpc`` or ``one_sided`` (every stage), or ``hybrid`` with a per-stage
    ``stages`` mapping (stages it leaves out use RPC) and/or RCC's ``hybrid_code``
    (bits of :data:`STAGE_BITS`). A code's bits of stages the protocol lacks are ignored,
    as RCC's own protocols read only their stages' bits (its scripts pass 28 to SUNDIAL
    and 31 to NOWAIT alike); a ``stages`` mapping that names a stage the protocol lacks
    is refused. ``ValueError("key: expected")`` for an unknown form, an absent stage, or
    a code and a mapping that disagree.
    """
    if verbs in (ONE, RPC):
        if stages:
            raise ValueError(f"protocol.stages: only with verbs: hybrid (verbs is "
                             f"{verbs!r})")
        if hybrid_code is not None:
            raise ValueError(f"protocol.hybrid_code: only with verbs: hybrid (verbs is "
                             f"{verbs!r})")
        return {s: verbs for s in stages_of}
    if verbs != "hybrid":
        raise ValueError(f"protocol.verbs: rpc, one_sided or hybrid, got {verbs!r}")
    if not stages and hybrid_code is None:
        raise ValueError("protocol.stages: verbs: hybrid needs a choice per stage "
                         "(protocol.stages: {lock: one_sided, ...}) or RCC's "
                         "protocol.hybrid_code")
    out = {s: RPC for s in stages_of}
    if hybrid_code is not None:
        if isinstance(hybrid_code, bool) or not isinstance(hybrid_code, int) or \
                not 0 <= hybrid_code < 512:
            raise ValueError(f"protocol.hybrid_code: an integer 0..511 (a bit per stage: "
                             f"{', '.join(f'{k} {v}' for k, v in STAGE_BITS.items())}), "
                             f"got {hybrid_code!r}")
        for s in stages_of:
            out[s] = ONE if hybrid_code & STAGE_BITS[s] else RPC
    for s, v in (stages or {}).items():
        if s not in stages_of:
            raise ValueError(f"protocol.stages.{s}: this protocol has no stage {s!r}; its "
                             f"stages are {', '.join(stages_of)}")
        if v not in (ONE, RPC):
            raise ValueError(f"protocol.stages.{s}: one_sided or rpc, got {v!r}")
        if hybrid_code is not None and out[s] != v:
            raise ValueError(f"protocol.stages.{s}: {v}, but protocol.hybrid_code "
                             f"{hybrid_code} says {out[s]} (give one of the two, or make "
                             "them agree)")
        out[s] = v
    return out


def hybrid_code_of(choice: Mapping[str, str]) -> int:
    """RCC's ``HYBRID_CODE`` of a per-stage choice."""
    return sum(STAGE_BITS[s] for s, v in choice.items() if v == ONE)


@dataclass(frozen=True)
class CcConfig:
    """The configuration of one of RCC's protocols (everything but DrTM+H's OCC presets).

    ``stages``: the verbs of each stage (:func:`resolve_stages`); ``rpc``: how RPCs
    travel; ``rep_factor``: backups per primary; ``retry_backoff``: a random back-off
    before a retry (False: at once behind the ready coroutines, as RCC's
    ``BenchWorker``); ``passive_ack``: commit and release messages without replies
    (RCC runs with ``PA 0``); ``options``: the protocol's own keys (e.g. MVCC's
    ``versions``). Every remote access resolves its record's location from a warm cache
    (RCC's scripts build with ``RDMA_CACHE 1``)."""

    stages: Mapping[str, str]
    rpc: "object" = None
    costs: SoftwareCosts = SoftwareCosts()
    rep_factor: int = 2
    log_to: str = "participants"
    reclaim_every: int = 1
    retry_backoff: bool = True
    passive_ack: bool = False
    index_cache: bool = True
    options: Mapping[str, object] = None

    def one_sided(self, stage: str) -> bool:
        """Whether ``stage`` uses one-sided verbs."""
        return self.stages[stage] == ONE

    def option(self, name: str, default=None):
        """The protocol's own option ``name``."""
        return (self.options or {}).get(name, default)
