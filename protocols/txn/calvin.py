"""CALVIN: deterministic execution of sequenced epochs, as RCC runs it
(``fix-calvin-hybrid``: ``src/framework/sequencer.cc``, ``scheduler.cc``,
``src/rtx/calvin_rdma.*``, ``global_vars.h``; PROTOCOL-FACTS 3.6).

Scope
    Every node runs a sequencer and a scheduler (SimPy coroutines on its worker thread 0,
    their CPU booked there). The transaction coroutines of the driver are the clients:
    each submits its transaction, with its declared records (``TxnSpec.keys``), to its
    node's sequencer and waits until the transaction has run. CALVIN never aborts.

    - Sequencer, one epoch at a time: close a batch of at most ``epoch_batch`` requests
      (``MAX_CALVIN_REQ_CNTS`` 10), replicate it to every other node without waiting
      (``Sequencer::logging``: RPC chunks, no reply), broadcast it to every scheduler
      (``txn_broadcast_input``), wait until its own scheduler has run the epoch, then the
      epoch sync: tell every node DONE and wait until every node has told it.
    - Epoch trigger: RCC's sequencer generates its own ten requests and never waits (its
      "or ~10 ms" comment is not implemented). Here requests come from closed-loop
      clients, so a batch closes when it holds ``epoch_batch`` requests, when every
      client coroutine of the node is waiting for a submitted request (no more can come,
      which is RCC's never-waiting case), or ``epoch_timeout`` after the epoch began
      (default 10 ms, the epoch of the Calvin paper and RCC's comment); the timeout only
      matters while clients are starting or idle.
    - Scheduler: wait for the batch of the epoch from every node, merge them into one
      plan ordered by timestamp (node, then position: RCC's ``(node_id << 4 + cor) << 32 |
      count`` order), take the local locks of each transaction in plan order (lock word
      ``(request id << 1) | 1``; a lock still held by an earlier transaction of the plan
      is waited for), hand it to a worker thread (plan position modulo threads, as
      ``req_seq % nthreads``), and close the epoch when every local one has run.
    - Execution at each node holding a declared record (``CALVIN::sync_reads``): read the
      local records; nodes holding a record the transaction writes are active
      participants, the others passive; every participant sends its local values to the
      active participants (``value_forwarding``); a passive one then releases its locks;
      an active one waits for every value, runs the body, logs its local writes to their
      backups, writes them back and releases its locks. Uninvolved nodes skip it. A
      read-only transaction has no active participant: its participants read and release
      (RCC executes no logic for it either).

    =======================  ===================================  ========================
    stage                    one-sided                            RPC
    =======================  ===================================  ========================
    ``txn_broadcast_input``  to each peer WRITE the requests +    per 2048-B chunk (48-B
                             WRITE the header into its request    header + 2000 B) a call
                             buffer, one doorbell; wait once      to every peer; wait for
                                                                  every reply before the
                                                                  next chunk
    ``value_forwarding``     per local record, to each active     to each active peer a
                             peer WRITE the value + WRITE its     call with the local
                             4-B length; wait (one round trip     read-set values, wait;
                             per local record)                    then one with the local
                                                                  write-set values, wait
    ``log``                  WRITE the log to each backup's ring  a log RPC per backup
    ``read``                 local (values travel by forwarding)  local
    ``commit``, ``release``  local write-back and unlock at each  local
                             participant (RCC's ``write_back``,
                             ``release_*`` touch local records)
    =======================  ===================================  ========================

    The sequencer's input replication travels by RPC in every form (RCC's one-sided
    ``logging_rdma`` asserts false).

    The epoch sync has no bit of the issue's 9-bit mask (RCC's
    ``RCC_USE_ONE_SIDED_EPOCH_SYNC`` is 512): it is one-sided (WRITE the 1-B DONE status
    into each peer's request buffer header) when every stage is one-sided, as RCC's
    ``ONE_SIDED_READ 1`` build, else an RPC to every peer with replies.

    Sizes (RCC's structs): a request is 1,568 B (``det_request``: 32 B of ids and
    timestamp plus ``rwsets_t``, 32 ``ReadSetItem`` of 48 B, sent whole), the batch
    header 48 B, a forwarded RPC value 144 B (``read_val_t``, 128-B value buffer).

History: a transaction is recorded once, at its commit point, the first active
participant's execution before it installs anything (that participant holds every
version, local or forwarded): its declared records read at those versions, its writes
installing the next. A read-only one is recorded when its last participant has read.
A run cut off mid-epoch therefore never shows a version whose writer is missing.

Round trips of a transaction (``round_trips_per_txn``): those its node's sequencer
waited for in the epoch that carried it (broadcast and epoch sync) plus those every
participant's execution waited for (forwarding, log).

Stages timed (metric ``lat_<stage>_us``, from the submitting client's view and the
first active participant's execution): ``txn_broadcast_input`` (submission until the
batch is broadcast), ``read`` (until that participant has read its local records: the
plan, lock waits), ``value_forwarding``, ``log``, ``commit``, ``release``.

Not modelled: the input replication's backup buffers being used for recovery, the
scheduler's own thread (RCC gives sequencer and scheduler threads of their own; here they
share worker thread 0 with its coroutines), the log-ack message RCC's ``log_remote``
waits for (the shared :mod:`.replication` sends its reclaim message without waiting),
two-phase commit (RCC forces it off).
"""
from __future__ import annotations

from collections import deque

from rnicsim.verbs import WRITE, WorkRequest

from ..rpc import Waiter
from .access import Access
from .api import Txn
from .driver import Coordinator, TxnSystem
from .replication import Replication
from .store import OCC_LAYOUT

H_SEQ, H_BACKUP, H_SYNC, H_FWD = 21, 22, 23, 24
REQ_BYTES = 1568          # det_request with a 32-entry rwsets_t (global_vars.h)
HDR_BYTES = 48            # calvin_header
CHUNK = 2048              # Sequencer::broadcast's max_chunk_size [B]
FWD_ITEM = 144            # read_val_t: req_seq, read_or_write, index, len, value[128]
LEN_BYTES = 4             # read_compact_val_t's length word
EPOCH_TIMEOUT = 10e6      # [ns]


def layout(cfg):
    """The record layout: lock word, seq, value (locks are taken by the scheduler)."""
    return OCC_LAYOUT


class _Request:
    """One sequenced transaction: its declared records by node, the versions the
    participants read, the values forwarded to each active participant."""

    __slots__ = ("rid", "spec", "tx", "keys", "nodes", "actives", "versions", "written",
                 "fwd", "fwd_ev", "left", "done", "rts", "timed", "t0")

    def __init__(self, rid: int, tx: Txn, place) -> None:
        self.rid = rid
        self.spec = tx.spec
        self.tx = tx
        # (table, key) -> (node, slot, write): a record declared for update anywhere is
        # in the write set
        self.keys: dict = {}
        for k in tx.spec.keys:
            write = bool(k[2]) if len(k) > 2 else False
            old = self.keys.get((k[0], k[1]))
            if old is None:
                n, s = place(k[0], k[1])
                self.keys[(k[0], k[1])] = (n, s, write)
            elif write:
                self.keys[(k[0], k[1])] = (old[0], old[1], True)
        self.nodes = sorted({v[0] for v in self.keys.values()})
        self.actives = sorted({v[0] for v in self.keys.values() if v[2]})
        self.versions: dict = {}
        self.written: list | None = None
        self.fwd: dict = {n: {} for n in self.actives}
        self.fwd_ev: dict = {}
        self.left = len(self.nodes)
        self.done = None
        self.rts = 0
        self.timed = False
        self.t0 = 0.0


class _Node:
    """A node's sequencer and scheduler state."""

    def __init__(self, sim) -> None:
        self.pending: deque = deque()       # submitted requests not yet batched
        self.clients = 0                    # client coroutines on this node
        self.waiting = 0                    # of them, waiting for a submitted request
        self.wake = None                    # the sequencer waits for a submission
        self.inbox: dict = {}               # epoch -> {source node: [requests]}
        self.inbox_ev = None
        self.synced: dict = {}              # epoch -> nodes that said DONE
        self.sync_ev = None
        self.epoch_done: dict = {}          # epoch -> event: the scheduler ran it
        self.running = 0                    # local executions of the epoch not finished
        self.run_ev = None
        self.released = None                # the scheduler waits for a lock
        self.applied: list[int] = []        # request ids in the order locks were granted
        self.batch_sizes: dict[int, int] = {}   # requests in a batch -> epochs


class _LogSide:
    """What :class:`.replication.Replication` needs of a system: its store, simulation,
    costs and the coordinator of every worker thread (``coords``)."""

    def __init__(self, system, coords: dict) -> None:
        self.store = system.store
        self.sim = system.sim
        self.costs = system.costs
        self.coords = coords


def _fire(obj, name: str) -> None:
    """Succeed the event in ``obj.name`` if one is waited for, and clear it."""
    ev = getattr(obj, name)
    if ev is not None:
        setattr(obj, name, None)
        ev.succeed()


class System(TxnSystem):
    """CALVIN over the driver (see module doc)."""

    STAGES = ("txn_broadcast_input", "read", "value_forwarding", "log", "commit",
              "release")

    def setup(self) -> None:
        cfg = self.cfg
        self.access = Access(self)
        self.workers = {k: Coordinator(self, ep) for k, ep in self.mesh.endpoints.items()}
        # Executors log from every worker thread, clients or not: the log rings' state
        # lives in these per-thread coordinators, not in the clients' ``coords``.
        self.repl = Replication(_LogSide(self, self.workers), cfg.log_to,
                                cfg.reclaim_every)
        self.batch = int(cfg.option("epoch_batch", 10))
        self.timeout = float(cfg.option("epoch_timeout", EPOCH_TIMEOUT))
        self.sync_one_sided = all(v == "one_sided" for v in cfg.stages.values())
        self.n = self.store.nodes
        self.threads = self.store.threads
        self.nodes = [_Node(self.sim) for _ in range(self.n)]
        self._rid = 0
        self._outstanding = 0
        self._workload = None

    # ================================================================ clients
    def start(self, workload, coroutines: int, stagger_ns: float = 0.0) -> None:
        self._workload = workload
        for (node, _i) in self.coords:
            self.nodes[node].clients += coroutines
        super().start(workload, coroutines, stagger_ns)
        for n in range(self.n):
            ep = self.mesh.endpoints[(n, 0)]
            ep.spawn(self._sequencer, self.nodes[n])
            ep.spawn(self._scheduler, self.nodes[n])

    def stop(self) -> None:
        super().stop()
        for nd in self.nodes:         # a sequencer waiting for clients closes its batch
            _fire(nd, "wake")

    def attempt(self, tx: Txn, owner: int):
        spec = tx.spec
        if not spec.keys:
            wl = self._workload
            name = getattr(wl, "name", type(wl).__name__)
            raise ValueError(f"protocol.kind calvin: workload {name}: transaction "
                             f"{spec.name!r} declares no records (TxnSpec.keys); CALVIN's "
                             "sequencer needs every transaction's read and write sets "
                             "before it runs")
        tx.owner = owner
        self._rid += 1
        r = _Request(self._rid, tx, self.store.place)
        r.done = self.sim.event()
        r.t0 = self.sim.now
        nd = self.nodes[tx.ep.node]
        nd.pending.append(r)
        nd.waiting += 1
        self._outstanding += 1
        _fire(nd, "wake")
        yield r.done
        nd.waiting -= 1
        self._outstanding -= 1
        tx.rts = r.rts

    def release(self, tx: Txn):
        return
        yield

    def read_records(self, tx: Txn, todo: list):
        # The body runs at an active participant once every value is there.
        vals = tx.state
        for r in todo:
            got = vals.get((r.table, r.key))
            if got is None:
                raise ValueError(f"protocol.kind calvin: transaction {tx.spec.name!r} "
                                 f"reads table {r.table} key {r.key!r}, which it did not "
                                 "declare in TxnSpec.keys")
            r.version, r.value = got
        return
        yield

    def write_unread(self, tx: Txn, table: int, key):
        r = tx.blind(table, key)
        got = (tx.state or {}).get((table, key))
        if got is None:
            raise ValueError(f"protocol.kind calvin: transaction {tx.spec.name!r} writes "
                             f"table {table} key {key!r}, which it did not declare in "
                             "TxnSpec.keys")
        r.version = got[0]
        return r

    # ================================================================ sequencer
    def _sequencer(self, ep, nd: _Node):
        """One epoch at a time: close a batch, replicate and broadcast it, wait until
        the local scheduler has run the epoch, then the epoch sync."""
        me = ep.node
        peers = [p for p in range(self.n) if p != me]
        epoch = 0
        while True:
            yield from self._close(nd)
            if self._stopped and self._outstanding == 0:
                return
            batch = [nd.pending.popleft() for _ in range(min(self.batch, len(nd.pending)))]
            nd.batch_sizes[len(batch)] = nd.batch_sizes.get(len(batch), 0) + 1
            size = len(batch) * REQ_BYTES
            # building the batch and copying it out: one memcpy of its bytes
            yield ep.compute(self.costs.copy_per_byte * (HDR_BYTES + size))
            rts = yield from self._broadcast(ep, epoch, batch, peers)
            self._deliver(me, epoch, me, batch)
            rts += 1 if peers else 0           # the epoch sync below
            for r in batch:
                r.rts += rts
                r.tx.phases["txn_broadcast_input"] = self.sim.now - r.t0
            yield self._epoch_done(nd, epoch)
            del nd.epoch_done[epoch]
            yield from self._epoch_sync(ep, nd, epoch, peers)
            epoch += 1

    def _close(self, nd: _Node):
        """Wait until the batch may close: ``epoch_batch`` requests, every client of
        the node waiting, the run stopping, or the epoch timeout."""
        sim = self.sim
        deadline = sim.now + self.timeout
        armed = False
        while not (len(nd.pending) >= self.batch or nd.waiting >= nd.clients
                   or self._stopped or sim.now >= deadline):
            nd.wake = sim.event()
            if not armed:
                sim.call_at(deadline, _fire, nd, "wake")
                armed = True
            yield nd.wake

    def _broadcast(self, ep, epoch: int, batch: list, peers: list):
        """Replicate ``batch`` to every peer (RPC chunks, no reply) and broadcast it to
        their schedulers (``txn_broadcast_input``); returns the round trips waited."""
        size = len(batch) * REQ_BYTES
        nchunks = max(1, -(-size // (CHUNK - HDR_BYTES)))
        for p in peers:
            for c in range(nchunks):
                ep.call(p, H_BACKUP, None, self._chunk(size, c), False)
        if not peers:
            return 0
        if self.how("txn_broadcast_input") == "one_sided":
            # the requests, then the header (all of it but the epoch status byte)
            w = Waiter(ep)
            ep.post_group([(ep.rc_qp(p), [self._buf_write(ep, p, max(size, 8)),
                                          self._buf_write(ep, p, HDR_BYTES - 1)])
                           for p in peers], w)
            yield w.arm()
            for p in peers:
                self._deliver(p, epoch, ep.node, batch)
            return 1
        for c in range(nchunks):
            # each chunk waits for every peer's reply before the next goes out
            w = Waiter(ep)
            last = c == nchunks - 1
            for i, p in enumerate(peers):
                ep.call(p, H_SEQ, (epoch, batch) if last else None, self._chunk(size, c),
                        True, w, i)
            yield w.arm()
        return nchunks

    def _epoch_done(self, nd: _Node, epoch: int):
        """The event of ``nd``'s scheduler having run ``epoch`` (made by whichever side
        asks first)."""
        ev = nd.epoch_done.get(epoch)
        if ev is None:
            ev = nd.epoch_done[epoch] = self.sim.event()
        return ev

    @staticmethod
    def _chunk(size: int, c: int) -> int:
        """Bytes of chunk ``c`` of a batch of ``size`` [B] of requests (header first)."""
        return HDR_BYTES + min(CHUNK - HDR_BYTES, max(0, size - c * (CHUNK - HDR_BYTES)))

    def _buf_write(self, ep, peer: int, length: int) -> WorkRequest:
        """A signaled WRITE of ``length`` [B] from ``ep`` into ``peer``'s Calvin request
        or forward buffer. The bytes are not materialised (the request objects and
        values travel beside the WRITE, handed over at its completion); the WRITE lands
        in the sender thread's log ring there, whose content is not materialised
        either."""
        st = self.store
        return WorkRequest(WRITE, length, None, True, length < 64, None, 0, st.rkeys[peer],
                           st.ring_offset(ep.node, ep.index))

    def _epoch_sync(self, ep, nd: _Node, epoch: int, peers: list):
        """Tell every peer that this node has run ``epoch`` (``CALVIN_EPOCH_DONE``), then
        wait until every peer has told this node."""
        if peers:
            w = Waiter(ep)
            if self.sync_one_sided:
                ep.post_group([(ep.rc_qp(p), [self._buf_write(ep, p, 1)]) for p in peers],
                              w)
                yield w.arm()
                for p in peers:
                    self._synced(p, epoch, ep.node)
            else:
                for i, p in enumerate(peers):
                    ep.call(p, H_SYNC, epoch, 1, True, w, i)
                yield w.arm()
        while len(nd.synced.get(epoch, ())) < len(peers):
            nd.sync_ev = self.sim.event()
            yield nd.sync_ev
        nd.synced.pop(epoch, None)

    def _synced(self, node: int, epoch: int, src: int) -> None:
        """``src``'s DONE for ``epoch`` is in ``node``'s memory."""
        nd = self.nodes[node]
        nd.synced.setdefault(epoch, set()).add(src)
        _fire(nd, "sync_ev")

    def _deliver(self, node: int, epoch: int, src: int, batch: list) -> None:
        """The batch of ``src`` for ``epoch`` is in ``node``'s request buffer."""
        nd = self.nodes[node]
        nd.inbox.setdefault(epoch, {})[src] = batch
        _fire(nd, "inbox_ev")

    # ================================================================ scheduler
    def _scheduler(self, ep, nd: _Node):
        """Per epoch: merge every node's batch into the plan, lock the local records of
        each transaction in plan order, dispatch it, and report the epoch run."""
        sim = self.sim
        me = ep.node
        store = self.store
        c = self.costs
        epoch = 0
        while True:
            while len(nd.inbox.get(epoch, ())) < self.n:
                nd.inbox_ev = sim.event()
                yield nd.inbox_ev
            got = nd.inbox.pop(epoch)
            plan = [r for src in range(self.n) for r in got[src]]
            yield ep.compute(c.record_op * len(plan))      # merge the batches
            for pos, r in enumerate(plan):
                if me not in r.nodes:
                    continue
                word = (r.rid << 1) | 1
                for (table, key), (n, slot, _w) in r.keys.items():
                    if n != me:
                        continue
                    while True:
                        yield ep.compute(c.local_access)
                        if store.lock_local(me, table, slot, word) == 0:
                            break
                        nd.released = sim.event()
                        yield nd.released
                nd.applied.append(r.rid)
                nd.running += 1
                w = self.mesh.endpoints[(me, pos % self.threads)]   # req_seq % nthreads
                w.spawn(self._execute, r, nd)
            while nd.running:
                nd.run_ev = sim.event()
                yield nd.run_ev
            self._epoch_done(nd, epoch).succeed()
            epoch += 1

    # ================================================================ execution
    def _execute(self, ep, r: _Request, nd: _Node):
        """Run ``r`` at this node (``CALVIN::sync_reads`` and ``commit``): read the local
        records, forward them to the other active participants; a passive participant
        then releases, an active one collects every value and applies the body."""
        me = ep.node
        store = self.store
        tx = Txn(self.workers[(me, ep.index)], r.spec)
        # the first active participant's stages are the client's (see module doc)
        timed = (me in r.actives and not r.timed) or (not r.actives and me == r.nodes[0])
        r.timed = r.timed or timed
        local = {}
        for k, (n, slot, _w) in r.keys.items():
            if n == me:
                _, ver, val = store.read_local(me, k[0], slot)
                local[k] = (ver, val)
                r.versions[k] = ver
        yield ep.compute(self.costs.local_access * len(local))
        bcast = r.tx.phases.get("txn_broadcast_input", 0.0)
        t = self._stage(r, timed, "read", r.t0 + bcast)
        targets = [p for p in r.actives if p != me]
        if targets:
            yield from self._forward(ep, tx, r, local, targets)
        if me in r.actives:
            vals = r.fwd[me]
            vals.update(local)
            while len(vals) < len(r.keys):
                r.fwd_ev[me] = self.sim.event()
                yield r.fwd_ev[me]
            t = self._stage(r, timed, "value_forwarding", t)
            tx.state = vals
            yield from self._apply(ep, tx, r, timed, t)
            t = self.sim.now
        self._unlock(nd, me, r)
        self._stage(r, timed, "release", t)
        self._finish(r, tx)

    def _apply(self, ep, tx: Txn, r: _Request, timed: bool, t: float):
        """An active participant runs the body on the collected values, logs its local
        writes to their backups and installs them."""
        me = ep.node
        spec = r.spec
        yield from self.run_body(tx, ep)
        if r.written is None:
            r.written = [k for k, x in tx.recs.items() if x.new is not None]
            for k in r.written:
                if not r.keys[k][2]:
                    raise ValueError(f"protocol.kind calvin: transaction {spec.name!r} "
                                     f"writes table {k[0]} key {k[1]!r}, which it declared "
                                     "read-only in TxnSpec.keys (for_update False)")
            r.tx.delta = tx.delta
            # The commit point: no write of this transaction is visible before this first
            # install, and this participant knows every version (local or forwarded).
            self._record(r, {k: v[0] for k, v in tx.state.items()})
        mine = [x for x in tx.recs.values() if x.new is not None and x.node == me]
        if me != r.actives[0]:
            tx.inserted = 0        # inserts are logged once, by the first active node
        if mine or tx.inserted:
            if spec.phase_ns[2]:
                yield ep.compute(spec.phase_ns[2])
            yield from self.repl.log(tx, mine, self.how("log"))
        t = self._stage(r, timed, "log", t)
        if spec.phase_ns[3]:
            yield ep.compute(spec.phase_ns[3])
        for x in mine:
            self.store.install_local(me, x.table, x.slot, x.version + 1, x.new)
        self.access.local_cpu(tx, len(mine))
        self._stage(r, timed, "commit", t)

    def _stage(self, r: _Request, timed: bool, name: str, since: float) -> float:
        """Book the time since ``since`` [ns] as stage ``name`` of ``r``'s client (when
        this execution is the ``timed`` one); returns now."""
        now = self.sim.now
        if timed:
            r.tx.phases[name] = now - since
        return now

    def _forward(self, ep, tx: Txn, r: _Request, local: dict, targets: list):
        """Send this node's values of ``r`` to the active participants ``targets``."""
        if self.how("value_forwarding") == "one_sided":
            for k, (ver, val) in local.items():
                w = Waiter(ep)
                ep.post_group([(ep.rc_qp(p), [self._buf_write(ep, p, max(len(val), 8)),
                                              self._buf_write(ep, p, LEN_BYTES)])
                               for p in targets], w)
                tx.rts += 1
                yield w.arm()
                for p in targets:
                    self._put(p, r, {k: (ver, val)})
            return
        for want_write in (False, True):
            items = {k: v for k, v in local.items() if r.keys[k][2] == want_write}
            w = Waiter(ep)
            for i, p in enumerate(targets):
                ep.call(p, H_FWD, (r, items), max(1, len(items)) * FWD_ITEM, True, w, i)
            tx.rts += 1
            yield w.arm()

    def _put(self, node: int, r: _Request, items: dict) -> None:
        r.fwd[node].update(items)
        ev = r.fwd_ev.pop(node, None)
        if ev is not None:
            ev.succeed()

    def _unlock(self, nd: _Node, me: int, r: _Request) -> None:
        for (table, _key), (n, slot, _w) in r.keys.items():
            if n == me:
                self.store.unlock_local(me, table, slot)
        _fire(nd, "released")

    def _finish(self, r: _Request, tx: Txn) -> None:
        """A participant has run ``r``; the last one completes it."""
        r.rts += tx.rts
        nd = self.nodes[tx.ep.node]
        nd.running -= 1
        if nd.running == 0:
            _fire(nd, "run_ev")
        r.left -= 1
        if r.left:
            return
        if not r.actives:
            self._record(r, r.versions)
        r.done.succeed()

    def _record(self, r: _Request, versions: dict) -> None:
        """Add ``r`` to the history: every declared record read at the version in
        ``versions``, every written one installing the next."""
        if self.history is None:
            return
        self._next_tid += 1
        writes = [(k, versions[k] + 1) for k in sorted(r.written or (), key=repr)]
        self.history.commit(self._next_tid, sorted(versions.items(), key=repr), writes)

    # ================================================================ handlers
    def register(self, ep) -> None:
        self.repl.register(ep)
        node = ep.node
        c = self.costs

        def seq(src, payload):
            # a chunk of a batch: copied into the request buffer; the last one completes it
            if payload is not None:
                epoch, batch = payload
                self._deliver(node, epoch, src, batch)
            return None, 0, c.copy_per_byte * CHUNK

        def backup(src, payload):
            return None, 0, c.copy_per_byte * CHUNK

        def sync(src, epoch):
            self._synced(node, epoch, src)
            return None, 0, 0.0

        def fwd(src, payload):
            r, items = payload
            self._put(node, r, items)
            return None, 0, c.copy_per_byte * FWD_ITEM * max(1, len(items))

        ep.register(H_SEQ, seq)
        ep.register(H_BACKUP, backup)
        ep.register(H_SYNC, sync)
        ep.register(H_FWD, fwd)
