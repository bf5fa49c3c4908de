"""The coordinator driver every concurrency-control protocol runs on.

Scope
    :class:`TxnSystem` runs transaction coroutines on the worker threads of a
    :class:`protocols.rpc.Mesh` over a :class:`protocols.txn.store.Store`: each coroutine
    draws a transaction from the workload, runs attempts of it until one commits (an
    attempt that raises :class:`protocols.txn.api.Abort` is cleaned up, counted by cause
    and retried with the same inputs, after a random back-off or, as DrTM+H's and RCC's
    ``BenchWorker::worker_routine``, at once behind the thread's ready coroutines), and
    keeps the statistics and the history.

    A protocol is a subclass that states its rules through the hooks below (one file per
    protocol: :mod:`.occ`, :mod:`.nowait`, :mod:`.waitdie`, :mod:`.mvcc`, :mod:`.sundial`,
    :mod:`.calvin`); record access, the location cache and log replication are shared
    parts (:mod:`.access`, :mod:`.replication`).

    ===================  ====================================================================
    hook                 contract
    ===================  ====================================================================
    ``STAGES``           stage names, in order; metrics ``lat_<stage>_us`` (per committed
                         transaction) and ``lat_<stage>_call_us`` (per call of
                         :meth:`TxnSystem.timed`) per stage
    ``setup()``          build shared parts (before handlers are registered)
    ``layout``           the record layout in the store (:class:`.store.Layout`)
    ``attempt(tx, o)``   one attempt: run the body (``tx.spec.body(tx)``) and commit,
                         timing each stage into ``tx.phases``; raise ``Abort`` on conflict
    ``settle(tx)``       after an abort, wait for requests still in flight (default none)
    ``release(tx)``      after an abort: release what the attempt holds
    ``read_records``     read records the body asked for (``Txn.read_many``)
    ``prepare(tx)``      work the body asks for before its computation (``Txn.prepare``;
                         default none)
    ``load_read(tx, r)`` work when the body takes up the value of record ``r`` it read
                         (``Txn.load_read``; default none)
    ``fetch_post/wait``  prefetch support (``prefetches()`` says whether it is on)
    ``write_unread``     a write of a record not read first (a new :class:`.api.Rec` or
                         ``ValueError``)
    ``register(ep)``     the protocol's RPC handlers on one endpoint
    ===================  ====================================================================

Statistics (:class:`TxnStats`), of the measured window: committed transactions, aborted
attempts by cause, round trips, committed per transaction type, per-stage time of
committing attempts, money added (SmallBank, whole run).
"""
from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from .api import CAUSES, Abort, Txn


def check_coroutines(coroutines) -> None:
    """``ValueError``/``TypeError`` unless ``coroutines`` (per worker thread) is a
    positive integer: zero would run no transaction and report zero throughput."""
    if isinstance(coroutines, bool) or not isinstance(coroutines, int):
        raise TypeError(f"coroutines: a positive integer (per worker thread), got "
                        f"{coroutines!r}")
    if coroutines < 1:
        raise ValueError(f"coroutines: a positive integer (per worker thread), got "
                         f"{coroutines}")


@dataclass
class TxnStats:
    """Counters of the measured window."""

    committed: int = 0
    aborted: int = 0
    round_trips: int = 0
    empty_waits: int = 0       # wait calls with nothing pending (TxnSystem.empty_wait)
    by_type: dict = field(default_factory=dict)
    lat_ns_by_type: dict = field(default_factory=dict)  # type -> summed latency [ns]
    phase_ns: dict = field(default_factory=dict)    # stage -> ns of committing attempts
    phase_calls: dict = field(default_factory=dict)  # stage -> their timed calls
    causes: dict = field(default_factory=dict)      # abort cause -> aborted attempts
    deposits: int = 0          # money committed transactions added, whole run (SmallBank)
    committed_run: int = 0     # committed transactions, whole run (sizes the window)


class Coordinator:
    """The transaction coroutines of one worker thread: its endpoint and the protocol's
    per-thread state (``reclaim``: log entries not yet applied, per backup)."""

    def __init__(self, cc: "TxnSystem", ep) -> None:
        self.cc = cc
        self.ep = ep
        self.node = ep.node
        self.reclaim: dict[int, list] = {}


class TxnSystem:
    """The driver (see module doc); subclasses are protocols.

    ``history``: a :class:`protocols.txn.history.History` that records every committed
    transaction (reads with the version seen, writes with the version installed) and
    counts every aborted attempt (ids ``"a1"``, ``"a2"``, ... in the order they abort;
    committed ones are numbered 1, 2, ... in commit order), warm-up included.
    """

    STAGES: tuple[str, ...] = ()

    def __init__(self, mesh, store, cfg, history=None) -> None:
        self.mesh = mesh
        self.sim = mesh.sim
        self.store = store
        self.cfg = cfg
        self.history = history
        self.stats = TxnStats()
        self.costs = cfg.costs
        self.retry_backoff = cfg.retry_backoff
        self._next_tid = 0
        self._next_aid = 0
        self._stopped = False
        # coroutine owner id -> start [ns] of its transaction in flight (first attempt)
        self._begun: dict[int, float] = {}
        self.coords = {k: Coordinator(self, ep) for k, ep in mesh.endpoints.items()}
        self.setup()
        for ep in mesh.endpoints.values():
            self.register(ep)

    def by_cpu(self, tx: Txn, node: int) -> bool:
        """Whether the coordinator of ``tx`` reaches the records of ``node`` with its own
        CPU: those of its own node, unless the framework sends them through the NIC
        like every other node's (``SoftwareCosts.loopback``: loopback one-sided verbs
        on an RC QP to itself, RPCs to itself)."""
        return node == tx.ep.node and not self.costs.loopback

    # ================================================================ hooks
    def setup(self) -> None:
        """Build the protocol's shared parts (before any handler is registered)."""

    def register(self, ep) -> None:
        """Register the protocol's RPC handlers on ``ep``."""

    def attempt(self, tx: Txn, owner: int):
        """One attempt (see module doc)."""
        raise NotImplementedError

    def settle(self, tx: Txn):
        """After an abort: wait for what the attempt still has in flight."""
        return
        yield

    def release(self, tx: Txn):
        """After an abort: release what the attempt holds."""
        raise NotImplementedError

    def read_records(self, tx: Txn, recs: list):
        """Read ``recs`` (registered, not yet read) for the body."""
        raise NotImplementedError

    def prepare(self, tx: Txn):
        """The body's :meth:`Txn.prepare` (use ``yield from``): default nothing."""
        return
        yield

    def load_read(self, tx: Txn, r):
        """The body's :meth:`Txn.load_read` of record ``r`` (use ``yield from``): default
        nothing."""
        return
        yield

    def prefetches(self) -> bool:
        """Whether ``Txn.prefetch`` posts reads ahead (default: no)."""
        return False

    def fetch_post(self, tx: Txn, recs: list):
        """Post reads of ``recs`` without waiting; return a state for :meth:`fetch_wait`."""
        raise NotImplementedError

    def fetch_wait(self, tx: Txn, st):
        """Wait for a :meth:`fetch_post` and parse its replies."""
        raise NotImplementedError

    def write_unread(self, tx: Txn, table: int, key):
        """A write of a record the attempt has not read: register it (default)."""
        return tx.blind(table, key)

    # ================================================================ coroutines
    def start(self, workload, coroutines: int, stagger_ns: float = 0.0) -> None:
        """Run ``coroutines`` transaction coroutines on every worker thread; each starts
        after a random delay in ``[0, stagger_ns)`` (0: all at once). ``ValueError``
        unless ``coroutines`` is a positive integer."""
        check_coroutines(coroutines)
        for (node, i), co in self.coords.items():
            for c in range(coroutines):
                co.ep.spawn(self._coroutine, co, c, workload, stagger_ns)

    @property
    def in_flight(self) -> int:
        """Transactions started and not yet committed."""
        return len(self._begun)

    def stalled(self, since_ns: float, min_age_ns: float) -> int:
        """Transactions in flight now whose first attempt began before ``since_ns`` [ns]
        and more than ``min_age_ns`` [ns] ago: at the end of a window that opened at
        ``since_ns``, those that retried or waited through all of it and far longer than
        the transactions that committed (a livelock or a deadlock)."""
        now = self.sim.now
        return sum(1 for t in self._begun.values()
                   if t < since_ns and now - t > min_age_ns)

    def stop(self) -> None:
        """Start no new transaction (running ones finish)."""
        self._stopped = True

    def _coroutine(self, ep, co: Coordinator, c: int, workload, stagger_ns: float = 0.0):
        sim = self.sim
        rng = sim.rng(f"txn/n{ep.node}/t{ep.index}/c{c}")
        if stagger_ns > 0:
            yield sim.timeout(float(sim.rng(f"txn-start/n{ep.node}/t{ep.index}/c{c}").random())
                              * stagger_ns)
        owner = (ep.node << 16) | (ep.index << 10) | (c + 1)
        st = self.stats
        while not self._stopped:
            spec = workload.next_txn(rng, ep.node, ep.index, c)
            t0 = sim.now
            self._begun[owner] = t0
            tries = 0
            rts = 0
            empty = 0
            while True:
                tx = Txn(co, spec)
                if self.costs.txn_cpu:
                    yield ep.compute(self.costs.txn_cpu)    # the framework's own code
                try:
                    yield from self.attempt(tx, owner)
                    break
                except Abort as a:
                    yield from self.settle(tx)
                    tries += 1
                    if sim.measuring:
                        st.aborted += 1
                        st.causes[a.cause] = st.causes.get(a.cause, 0) + 1
                    if self.history is not None:
                        self._next_aid += 1
                        self.history.abort(f"a{self._next_aid}")
                    yield from self.release(tx)
                    rts += tx.rts        # the attempt's round trips, its releases' too
                    empty += tx.empty_waits
                    if self.retry_backoff:
                        # Uniform in [0, backoff x 2^tries), doubling up to 2^10: a cap
                        # below an attempt's length can leave two coordinators whose
                        # lock requests each wait out the other's usleep failing in
                        # lockstep for ever (1 coroutine each, every record written).
                        hi = self.costs.backoff * (1 << min(tries, 10))
                        yield sim.timeout(float(rng.random()) * hi)
                    else:
                        # yield_next: give the thread to the coroutines ready now, then
                        # retry (bench_worker.cc, see the module doc)
                        yield sim.timeout(0.0)
            del self._begun[owner]
            st.deposits += tx.delta
            st.committed_run += 1
            if sim.measuring:
                st.round_trips += rts + tx.rts
                st.empty_waits += empty + tx.empty_waits
                st.committed += 1
                st.by_type[spec.name] = st.by_type.get(spec.name, 0) + 1
                st.lat_ns_by_type[spec.name] = st.lat_ns_by_type.get(spec.name, 0.0) + \
                    (sim.now - t0)
                sim.stats.hist("txn_lat").add(sim.now - t0)
                ph = st.phase_ns
                pc = st.phase_calls
                calls = tx.calls
                for k, v in tx.phases.items():
                    ph[k] = ph.get(k, 0.0) + v
                    # a stage set once per attempt, not through timed(), is one call
                    pc[k] = pc.get(k, 0) + calls.get(k, 1)

    # ================================================================ shared steps
    @staticmethod
    def empty_wait(tx: Txn) -> None:
        """A stage that RCC's code ends with a wait whatever it sent found nothing to
        send: ``indirect_yield`` returns at once, no time passes, and RCC's round-trip
        counter (``abort_cnt[18]``, the source of its fig. 16) counts the call all the
        same (``src/rtx/nowait_rdma.cc`` release_reads, release_writes, write_back;
        ``occ.cc`` lock_writes, validate_reads, write_back_oneshot, release_writes).
        Counted in ``tx.empty_waits``, apart from the round trips."""
        tx.empty_waits += 1

    def timed(self, tx: Txn, stage: str, steps):
        """Run ``steps`` (a generator) as one call of stage timer ``stage``: add its time
        [ns], less what :meth:`untimed` spent inside it, to ``tx.phases[stage]`` and one
        call to ``tx.calls[stage]``; returns what ``steps`` returns. A timer is one of
        RCC's ``START``/``END`` pairs (``src/core/utils/latency_profier.h``)."""
        t = self.sim.now
        u = tx.untimed
        out = yield from steps
        tx.phases[stage] = tx.phases.get(stage, 0.0) + self.sim.now - t - (tx.untimed - u)
        tx.calls[stage] = tx.calls.get(stage, 0) + 1
        return out

    def untimed(self, tx: Txn, steps):
        """Run ``steps`` (a generator) outside every stage timer: a :meth:`timed` call
        around it leaves its time out (work RCC's timers do not hold, such as the READ
        before a one-sided lock or the log's acknowledgement); returns what ``steps``
        returns."""
        t = self.sim.now
        out = yield from steps
        tx.untimed += self.sim.now - t
        return out

    def how(self, stage: str) -> str:
        """``one_sided`` or ``rpc`` for ``stage`` (protocols configured stage by stage,
        :class:`protocols.txn.cc.CcConfig`)."""
        return self.cfg.stages[stage]

    def commit_sets(self, tx: Txn):
        """After the body: the attempt's records in access order and those it writes,
        returned once the commit's own coordinator CPU (``phase_ns[1]``) is spent."""
        recs = list(tx.recs.values())
        writes = [r for r in recs if r.new is not None]
        if tx.spec.phase_ns[1]:
            yield tx.ep.compute(tx.spec.phase_ns[1])
        return recs, writes

    def log_writes(self, tx: Txn, writes: list):
        """Log ``writes`` to the backups through the protocol's ``self.repl``
        (:class:`protocols.txn.replication.Replication`) over the log stage's verbs, the
        attempt's log-phase CPU (``phase_ns[2]``) first, as one call of the ``log`` stage
        (RCC's log timer runs only for a transaction that writes); then add the attempt
        to the history."""
        if writes:
            yield from self.timed(tx, "log", self._replicate(tx, writes))
        self.record(tx)

    def _replicate(self, tx: Txn, writes: list):
        if tx.spec.phase_ns[2]:
            yield tx.ep.compute(tx.spec.phase_ns[2])
        yield from self.repl.log(tx, writes, self.how("log"))

    def run_body(self, tx: Txn, ep=None):
        """The execution phase: the coordinator's CPU of it (``phase_ns[0]``, on ``ep``,
        default the attempt's thread), the transaction body, then a wait for its
        prefetches still in flight."""
        if tx.spec.phase_ns[0]:
            yield (ep or tx.ep).compute(tx.spec.phase_ns[0])
        body = tx.spec.body(tx)
        if not isinstance(body, Generator):
            raise TypeError(f"transaction {tx.spec.name!r}: TxnSpec.body(tx) must return "
                            "a generator (a def that yields, e.g. 'v = yield from "
                            f"tx.read(table, key)'), got {type(body).__name__}")
        yield from body
        while tx.pending:
            yield from self.fetch_wait(tx, tx.pending[0])

    def record(self, tx: Txn) -> None:
        """Add a committing attempt to the history: every record read with the version
        seen (a record written without a read is not a read), every written one with the
        version it installs (the one read + 1)."""
        if self.history is None:
            return
        self._next_tid += 1
        reads = [((r.table, r.key), r.version) for r in tx.recs.values()
                 if r.version >= 0]
        writes = [((r.table, r.key), r.version + 1) for r in tx.recs.values()
                  if r.new is not None]
        self.history.commit(self._next_tid, reads, writes)

    @staticmethod
    def group(recs: list) -> dict[int, list]:
        """``recs`` by node, in first-seen order."""
        out: dict[int, list] = {}
        for r in recs:
            out.setdefault(r.node, []).append(r)
        return out


def stage_metrics(stats: TxnStats, stages: tuple[str, ...], n: int) -> dict[str, float]:
    """``lat_<stage>_us``: mean time per committed transaction in each stage [us];
    ``lat_<stage>_call_us``: mean time per timed call of the stage [us] (what RCC's
    stage timers report: per record where a protocol times each record's read or lock;
    0 for a stage no committed transaction timed)."""
    out = {}
    for s in stages:
        ns = stats.phase_ns.get(s, 0.0)
        calls = stats.phase_calls.get(s, 0)
        out[f"lat_{s}_us"] = ns / n / 1e3
        out[f"lat_{s}_call_us"] = ns / calls / 1e3 if calls else 0.0
    return out


def type_metrics(stats: TxnStats) -> dict[str, float]:
    """``lat_txn_<type>_us``: mean latency of the committed transactions of each type,
    first attempt to commit [us] (RCC's logs print the same per type)."""
    return {f"lat_txn_{t}_us": ns / stats.by_type[t] / 1e3
            for t, ns in sorted(stats.lat_ns_by_type.items())}


def abort_metrics(stats: TxnStats) -> dict[str, float]:
    """``abort_rate_<cause>``: aborted attempts of each cause over all attempts."""
    tot = max(1, stats.aborted + stats.committed)
    return {f"abort_rate_{c}": stats.causes.get(c, 0) / tot for c in CAUSES}
