"""``rnicsim perftest``: perftest's latency and bandwidth tools on two simulated hosts.

The same experiment a user runs on hardware, with perftest's tool names, flags and table
format, so the two outputs can be laid side by side. Two hosts, one NIC each, one switch.

Tools: ib_read_lat, ib_write_lat, ib_send_lat, ib_atomic_lat, ib_read_bw, ib_write_bw,
ib_send_bw, ib_atomic_bw. Flags: ``-s SIZE`` (default as perftest's: 65536 B for the
``*_bw`` tools, 2 B for the ``*_lat`` tools, 8 B for atomics), ``-a`` (all sizes 2..8 MiB),
``-n ITERS``, ``-q QPS``, ``-t TX_DEPTH``, ``-l POST_LIST``, ``-c RC|UC|UD``, ``-I INLINE``,
``-m MTU``, ``-Q CQ_MOD``, ``-o OUTSTANDING_READS``, ``-A CMP_AND_SWAP|FETCH_AND_ADD``,
``--report_gbits``, plus ``--nic PROFILE`` (name or YAML path, default cx4-edr),
``--set section.param=value`` (profile override), ``--seed N``, ``--out FILE`` (checked
before the run: not a directory, in a directory that can be created), ``--pcap FILE`` (the
packets of the run, of its last size with ``-a``, for Wireshark: :mod:`rnicsim.pcap`) and
``--quiet`` (no progress on stderr: a size that runs longer than a few seconds prints its
simulated time). A flag the tool does
not use (``-q``, ``-t``, ``-l``, ``-Q``, ``--report_gbits`` on ``*_lat``; ``-o`` without
READ or atomics; ``-A`` without atomics; ``-I`` on READ or atomics; ``-a`` on atomics) and
``-a`` with ``-s`` exit 2 instead of being dropped. As perftest: ``-c UD`` caps a default
size at the MTU with a note on stderr and refuses a larger ``-s``; ``-l N`` divides ``-n``,
is a multiple of ``-Q`` and, without ``-Q``, sets the CQ moderation to N.

Semantics as perftest's: ``*_lat`` of SEND and WRITE report half a ping-pong round trip
(WRITE polls the landing buffer in memory, SEND polls the receive queue); READ and ATOMIC
report the full round trip of each operation; ``t_typical`` is the median. ``*_bw`` keep
``tx_depth`` WRs in flight per QP, signal one WR in ``cq_mod``, post ``post_list`` WRs per
doorbell, and report the average over all iterations (BW peak: the best of the CQ-moderation
windows); MB is 2^20 bytes, Gb/s is 10^9 bit/s.

Knobs of ``rnicsim-probe``'s experiments (``PerftestArgs`` fields without a perftest flag,
used by ``rnicsim calibrate``; their defaults change nothing): ``post_to_cqe`` (``*_lat``
times the post of one signaled WR to its CQE, also for WRITE instead of a ping-pong; with
several QPs they take turns, after a warm-up that uses each once),
``threads`` (``*_bw``: the QPs are split evenly over that many posting threads, one CQ
each, all on one device context), ``addresses`` (targets 64 B apart, cycled by each
thread) and ``region``/``page_size`` (targets uniformly random over a remote region of
``region`` bytes, in slots of the payload rounded up to 64 B, registered with pages of
``page_size`` bytes).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from rnicsim.cluster import Cluster
from rnicsim.errors import ArgumentParser, InputError
from rnicsim.profile import load_profile
from rnicsim.scenario import parse_override
from rnicsim.sim import Simulation
from rnicsim.verbs import (CAS, FAA, READ, RECV, SEND, SEND_WITH_IMM, UD_GRH, WRITE, Context,
                           WorkRequest)

TOOLS = ("ib_read_lat", "ib_write_lat", "ib_send_lat", "ib_atomic_lat",
         "ib_read_bw", "ib_write_bw", "ib_send_bw", "ib_atomic_bw")
TITLES = {
    "ib_read_lat": "RDMA_Read Latency Test", "ib_write_lat": "RDMA_Write Latency Test",
    "ib_send_lat": "Send Latency Test", "ib_atomic_lat": "Atomic {} Latency Test",
    "ib_read_bw": "RDMA_Read BW Test", "ib_write_bw": "RDMA_Write BW Test",
    "ib_send_bw": "Send BW Test", "ib_atomic_bw": "Atomic {} BW Test",
}
SEP = "-" * 87
# perftest's default message sizes [B] (perftest_parameters.h DEF_SIZE_BW, DEF_SIZE_LAT,
# DEF_SIZE_ATOMIC; init_perftest_params picks by test type, atomics always 8)
DEF_SIZE_BW, DEF_SIZE_LAT, DEF_SIZE_ATOMIC = 65536, 2, 8


@dataclass
class PerftestArgs:
    """Parsed perftest flags (defaults as perftest's)."""

    tool: str
    size: int = DEF_SIZE_LAT        # parse_args: DEF_SIZE_BW for *_bw, as perftest
    all_sizes: bool = False
    iters: int | None = None
    qps: int = 1
    tx_depth: int | None = None
    post_list: int = 1
    conn: str = "RC"
    inline: int | None = None
    mtu: int | None = None
    cq_mod: int = 100
    outstanding: int | None = None
    atomic: str = "FETCH_AND_ADD"
    gbits: bool = False
    nic: str = "cx4-edr"
    seed: int = 1
    out: str | None = None
    pcap: str | None = None
    quiet: bool = False
    # rnicsim-probe experiments (no perftest flag; see the module doc)
    post_to_cqe: bool = False
    threads: int = 1
    addresses: int = 1
    region: int = 0
    page_size: int = 4096
    size_given: bool = False        # -s on the command line (perftest's req_size)


# Flags that only some tools use (perftest's usage() lists them for these tools only):
# given to another tool they would change nothing, so they are refused instead.
# (flag, parsed name, does the tool use it, what it is for)
_SCOPED_FLAGS = (
    ("-q", "qp", lambda t: t.endswith("_bw"), "a *_bw tool (the *_lat tools time one "
     "operation at a time on one QP)"),
    ("-t", "tx_depth", lambda t: t.endswith("_bw"), "a *_bw tool (the *_lat tools keep one "
     "WR in flight)"),
    ("-l", "post_list", lambda t: t.endswith("_bw"), "a *_bw tool (perftest: 'Post list is "
     "supported in BW tests only')"),
    ("-Q", "cq_mod", lambda t: t.endswith("_bw"), "a *_bw tool (the *_lat tools signal "
     "every WR)"),
    ("--report_gbits", "report_gbits", lambda t: t.endswith("_bw"), "a *_bw tool (the "
     "*_lat tools report microseconds)"),
    ("-o", "outs", lambda t: "read" in t or "atomic" in t, "a READ or atomic tool (only "
     "they have outstanding reads)"),
    ("-A", "atomic_type", lambda t: "atomic" in t, "an atomic tool (ib_atomic_lat, "
     "ib_atomic_bw)"),
    ("-I", "inline_size", lambda t: "write" in t or "send" in t, "a WRITE or SEND tool "
     "(READs and atomics carry no inline data)"),
    ("-a", "all", lambda t: "atomic" not in t, "a tool other than the atomic ones (their "
     "messages are always 8 B; perftest: 'Message size cannot be changed for Atomic "
     "tests')"),
)


def _parser() -> ArgumentParser:
    ap = ArgumentParser(
        prog="rnicsim perftest",
        description="perftest's latency and bandwidth tools on two simulated hosts (one NIC "
                    "each, one switch), with perftest's flags and table format.",
        epilog="*_lat: SEND and WRITE report half a ping-pong round trip, READ and atomics "
               "the full round trip; t_typical is the median. *_bw: tx-depth WRs in flight "
               "per QP, one signaled in cq-mod, post-list WRs per doorbell; MB is 2^20 B, "
               "Gb/s 10^9 bit/s. A flag the tool does not use exits 2.")
    ap.add_argument("tool", choices=TOOLS, metavar="TOOL", help=", ".join(TOOLS))
    ap.add_argument("server", nargs="?", help="ignored (perftest's server address: both "
                    "hosts are simulated)")
    ap.add_argument("-s", "--size", type=int, metavar="BYTES",
                    help=f"message size [B] (default {DEF_SIZE_BW} for *_bw, {DEF_SIZE_LAT} "
                         f"for *_lat; atomics are {DEF_SIZE_ATOMIC}); at most the MTU on UD")
    ap.add_argument("-a", "--all", action="store_true",
                    help="every size from 2 B to 8 MiB (to the MTU on UD); not with -s")
    ap.add_argument("-n", "--iters", type=int, metavar="N",
                    help="iterations (default 1000 for *_lat, 5000 for *_bw)")
    ap.add_argument("-q", "--qp", type=int, metavar="N", help="QPs (*_bw; default 1)")
    ap.add_argument("-t", "--tx-depth", type=int, metavar="N",
                    help="WRs in flight per QP (*_bw; default 128)")
    ap.add_argument("-l", "--post_list", type=int, metavar="N",
                    help="WRs per doorbell (*_bw; default 1); a multiple of -Q, dividing -n; "
                         "without -Q it sets the CQ moderation to N, as perftest")
    ap.add_argument("-c", "--connection", default="RC", choices=["RC", "UC", "UD"],
                    help="transport (default RC; UD only for SEND, UC not for READ and "
                         "atomics)")
    ap.add_argument("-I", "--inline_size", type=int, metavar="BYTES",
                    help="inline WRs up to BYTES (WRITE and SEND tools; default perftest's: "
                         "220 ib_write_lat, 236 ib_send_lat, 188 ib_send_lat -c UD, 0 *_bw)")
    ap.add_argument("-m", "--mtu", type=int, choices=[256, 512, 1024, 2048, 4096],
                    help="path MTU [B] (default the profile's)")
    ap.add_argument("-Q", "--cq-mod", type=int, metavar="N",
                    help="one signaled WR in N (*_bw; default 100, at most the TX depth)")
    ap.add_argument("-o", "--outs", type=int, metavar="N",
                    help="outstanding READs or atomics per QP (READ and atomic tools; "
                         "default the profile's max_rd_atomic)")
    ap.add_argument("-A", "--atomic_type", choices=["CMP_AND_SWAP", "FETCH_AND_ADD"],
                    help="atomic operation (atomic tools; default FETCH_AND_ADD)")
    ap.add_argument("--report_gbits", action="store_true",
                    help="bandwidth in Gb/s instead of MB/s (*_bw)")
    ap.add_argument("--nic", default="cx4-edr", metavar="PROFILE",
                    help="NIC profile: a name from 'rnicsim profiles' or a YAML path "
                         "(default cx4-edr)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.PARAM=VALUE",
                    help="override a profile parameter, e.g. pcie.latency=250ns (repeatable)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--out", metavar="FILE",
                    help="also write the output to FILE (checked before the run)")
    ap.add_argument("--pcap", metavar="FILE.pcap",
                    help="write the packets on the wire for Wireshark (with -a: of the "
                         "last size)")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return ap


def parse_args(argv: list[str]) -> tuple[PerftestArgs, dict]:
    """Parse ``rnicsim perftest`` arguments; raises InputError on bad flags, on a flag the
    tool does not use (:data:`_SCOPED_FLAGS`) and on combinations perftest refuses."""
    ns = _parser().parse_args(argv)
    for name in ("size", "iters", "qp", "tx_depth", "post_list", "cq_mod", "outs"):
        v = getattr(ns, name)
        if v is not None and v < (0 if name == "size" else 1):
            raise InputError("command line", f"--{name}", "a positive whole number")
    for flag, name, uses, what in _SCOPED_FLAGS:
        if getattr(ns, name) not in (None, False) and not uses(ns.tool):
            raise InputError("command line", flag, f"only with {what}, not {ns.tool}")
    if ns.all and ns.size is not None:
        # perftest runs every size and drops -s without a word; which one was meant?
        raise InputError("command line", "-a", f"-a (every size) or -s {ns.size} (one "
                         f"size), not both")
    overrides = {}
    for item in ns.set:
        # parsed as YAML, as a scenario's --set: 8 is a count, true a flag, 80ns a time
        k, v = parse_override(item)
        overrides[k] = v
    a = PerftestArgs(tool=ns.tool, all_sizes=ns.all, iters=ns.iters, qps=ns.qp or 1,
                     tx_depth=ns.tx_depth, post_list=ns.post_list or 1, conn=ns.connection,
                     inline=ns.inline_size, mtu=ns.mtu,
                     cq_mod=ns.cq_mod if ns.cq_mod is not None else 100,
                     outstanding=ns.outs, atomic=ns.atomic_type or "FETCH_AND_ADD",
                     gbits=ns.report_gbits, nic=ns.nic, seed=ns.seed, out=ns.out,
                     pcap=ns.pcap, quiet=ns.quiet,
                     size_given=ns.size is not None, size=ns.size if ns.size is not None else
                     DEF_SIZE_ATOMIC if "atomic" in ns.tool else
                     DEF_SIZE_BW if ns.tool.endswith("_bw") else DEF_SIZE_LAT)
    if "atomic" in a.tool and a.size != 8:
        raise InputError("command line", "-s", "8 (atomics are 8 bytes)")
    if a.tool in ("ib_read_lat", "ib_read_bw", "ib_atomic_lat", "ib_atomic_bw") \
            and a.conn != "RC":
        raise InputError("command line", "-c", f"RC ({a.tool} needs a reliable connection)")
    if "write" in a.tool and a.conn == "UD":
        raise InputError("command line", "-c", "RC or UC (UD has no RDMA WRITE)")
    if a.post_list > 1:
        _check_post_list(a, ns.cq_mod is not None)
    return a, overrides


def _check_post_list(a: PerftestArgs, cq_mod_given: bool) -> None:
    """perftest's rules for ``-l N`` > 1 (``force_dependecies``): N divides the iterations,
    and is a multiple of ``-Q`` when given, else becomes the CQ moderation (with a note on
    stderr). rnicsim adds: N at most the TX depth, or no list could ever be posted."""
    iters = a.iters or 5000
    depth = tx_depth(a, iters)
    if iters % a.post_list:
        raise InputError("command line", "-l", f"a divisor of the iterations (-n {iters}; "
                         f"perftest: 'Number of iterations must be a multiple of post list "
                         f"size'), got {a.post_list}")
    if a.post_list > depth:
        raise InputError("command line", "-l", f"at most the TX depth (-t {depth}): a list "
                         f"of {a.post_list} WRs never fits the send queue")
    if not cq_mod_given:
        a.cq_mod = a.post_list
        print(" Post List requested - CQ moderation will be the size of the post list",
              file=sys.stderr)
    elif a.post_list % a.cq_mod:
        raise InputError("command line", "-l", f"a multiple of the CQ moderation (-Q "
                         f"{a.cq_mod}; perftest: 'Post list size must be a multiple of CQ "
                         f"moderation'), got {a.post_list}")


def tx_depth(a: PerftestArgs, iters: int) -> int:
    """WRs in flight per QP of a ``*_bw`` run of ``iters`` iterations: ``-t`` (default 128),
    at most the iterations, as perftest sets it (``force_dependecies``) and prints it."""
    return min(a.tx_depth or 128, iters)


def ud_size(a: PerftestArgs, mtu: int) -> None:
    """Fit a UD run's message size to the MTU [B], as perftest's ``check_mtu`` does: a size
    perftest chose (its default, or ``-a``'s sizes) is capped at the MTU with its note on
    stderr; a ``-s`` above the MTU is refused (a UD message is one packet)."""
    if a.conn != "UD" or max(a.size, 2 ** 23 if a.all_sizes else 0) <= mtu:
        return
    if a.size_given:
        raise InputError("command line", "-s", f"at most the MTU ({mtu} B) with -c UD: a UD "
                         f"message is one packet (perftest: 'Max message size in UD cannot "
                         f"be greater than MTU'), got {a.size}")
    print(f" Max msg size in UD is MTU {mtu}\n Changing to this MTU", file=sys.stderr)
    a.size = min(a.size, mtu)


class _Pair:
    """Two hosts, one NIC each, through one switch, with connected QPs and buffers."""

    def __init__(self, a: PerftestArgs, profile, size: int) -> None:
        self.sim = Simulation(a.seed)
        self.cluster = Cluster(self.sim, profile, 2, 1)
        self.th = [self.cluster.nodes[i].thread(0) for i in range(2)]
        self.ctx = [Context(self.cluster, i, 0, self.th[i]) for i in range(2)]
        self.cq = [c.create_cq() for c in self.ctx]
        buf = max(size, 8) * 2 + 64
        self.mr = [c.reg_mr(max(buf, 4096), 4096) for c in self.ctx]
        if a.region or a.addresses > 1 or a.page_size != 4096:
            # the remote region of the probe's atomics and pages sweeps
            span = max(buf, 4096, a.region, a.addresses * 64)
            self.mr[1] = self.ctx[1].reg_mr(span, a.page_size)
        # posting threads of the client, one CQ each; QP i belongs to thread i // per
        if a.threads < 1 or a.qps % a.threads:
            raise ValueError(f"threads: a divisor of the QP count ({a.qps}), got {a.threads}")
        self.per = a.qps // a.threads
        self.cth = [self.th[0]] + [self.cluster.nodes[0].thread(t) for t in range(1, a.threads)]
        self.ccq = [self.cq[0]] + [self.ctx[0].create_cq(th) for th in self.cth[1:]]
        conn = a.conn
        self.qps: list[tuple] = []
        for i in range(a.qps):
            t = i // self.per
            q0 = self.ctx[0].create_qp(conn, self.ccq[t], thread=self.cth[t])
            q1 = self.ctx[1].create_qp(conn, self.cq[1])
            if conn != "UD":
                q0.connect(q1)
            self.qps.append((q0, q1))


def _lat_stats(samples_us: list[float]) -> dict[str, float]:
    s = np.array(samples_us)
    return {"t_min": float(s.min()), "t_max": float(s.max()),
            "t_typical": float(np.median(s)), "t_avg": float(s.mean()),
            "t_stdev": float(s.std()), "p99": float(np.percentile(s, 99)),
            "p999": float(np.percentile(s, 99.9))}


# perftest's defaults for -I (perftest_parameters.h: DEF_INLINE_WRITE 220,
# DEF_INLINE_SEND_RC_UC 236, DEF_INLINE_SEND_UD 188; ctx_set_max_inline: latency tests of
# WRITE and SEND only, 0 for bandwidth tests and other verbs).
_DEF_INLINE = {"ib_write_lat": 220, "ib_send_lat": 236}


def inline_size(a: PerftestArgs, max_inline: int) -> int:
    """The inline threshold [B] a run uses: ``-I`` if given, else perftest's default for
    the tool, never above the NIC's ``max_inline`` (what ``Max inline data`` prints)."""
    if a.tool not in ("ib_write_lat", "ib_send_lat", "ib_write_bw", "ib_send_bw"):
        return 0
    if a.inline is not None:
        return a.inline
    d = _DEF_INLINE.get(a.tool, 0)
    if a.tool == "ib_send_lat" and a.conn == "UD":
        d = 188
    return min(d, max_inline)


def run_lat(a: PerftestArgs, profile, size: int, iters: int) -> dict[str, float]:
    """One latency row: ``iters`` sequential operations of ``size`` bytes [B].

    Returns perftest's statistics in us: ``t_min``, ``t_max``, ``t_typical`` (median),
    ``t_avg``, ``t_stdev``, ``p99``, ``p999``."""
    p = _Pair(a, profile, size)
    sim = p.sim
    q0, q1 = p.qps[0]
    inline = size <= inline_size(a, p.ctx[0].max_inline)
    tool = a.tool
    samples: list[float] = []
    rkey1, rkey0 = p.mr[1].rkey, p.mr[0].rkey

    def one_sided():
        op = {"ib_read_lat": READ, "ib_write_lat": WRITE, "ib_atomic_lat":
              FAA if a.atomic == "FETCH_AND_ADD" else CAS}[tool]
        inl = inline and op == WRITE
        # post_to_cqe (the probe): QPs cycled round robin, after a warm-up that uses every
        # QP once (the probe's warm-up is at least as long), so caches are in steady state
        warm = len(p.qps) if a.post_to_cqe else 0
        for k in range(warm + iters):
            qp = p.qps[k % len(p.qps)][0] if a.post_to_cqe else q0
            t = sim.now
            yield qp.post_send([WorkRequest(op, size, 1, True, inl, None, 0, rkey1, 0)])
            wcs = yield p.cq[0].wait()
            if k >= warm:
                samples.append((sim.now - t) / 1e3)
            assert wcs[0].ok

    def write_pingpong(side: int):
        # Each side spins on its own buffer for the peer's WRITE, then writes back.
        me = q0 if side == 0 else q1
        mine = p.mr[side]
        rkey = rkey1 if side == 0 else rkey0
        for _ in range(iters):
            ev = p.ctx[side].poll_memory(mine, 0)
            if side == 1:
                yield ev
            t = sim.now
            yield me.post_send([WorkRequest(WRITE, size, None, False, inline, None, 0,
                                            rkey, 0)])
            if side == 0:
                yield ev
                samples.append((sim.now - t) / 2e3)

    def send_pingpong(side: int):
        # Each side waits for the peer's SEND on its receive queue, then sends back.
        me = q0 if side == 0 else q1
        peer_addr = (q1 if side == 0 else q0).address
        rsize = recv_size(a.conn, size)
        cq = p.cq[side]
        me.post_recv([WorkRequest(RECV, rsize) for _ in range(2)])

        def recv():
            while True:
                wcs = yield cq.wait()
                if any(wc.opcode == RECV for wc in wcs):
                    return
        for _ in range(iters):
            if side == 1:
                yield from recv()
                me.post_recv([WorkRequest(RECV, rsize)])
            t = sim.now
            wr = WorkRequest(SEND, size, None, False, inline)
            if a.conn == "UD":
                wr.dest = peer_addr
            yield me.post_send([wr])
            if side == 0:
                yield from recv()
                me.post_recv([WorkRequest(RECV, rsize)])
                samples.append((sim.now - t) / 2e3)

    if tool in ("ib_read_lat", "ib_atomic_lat") or (tool == "ib_write_lat" and a.post_to_cqe):
        sim.process(one_sided())
    elif tool == "ib_write_lat":
        sim.process(write_pingpong(0))
        sim.process(write_pingpong(1))
    else:
        sim.process(send_pingpong(0))
        sim.process(send_pingpong(1))
    sim.run()
    return _lat_stats(samples)


def recv_size(conn: str, size: int) -> int:
    """Receive buffer [B] for ``size``-B messages: UD buffers also hold the 40-B GRH
    space the verbs API reserves (perftest's ``SIZE()``: ``size + UD_ADDITION``)."""
    return size + UD_GRH if conn == "UD" else size


def run_bw(a: PerftestArgs, profile, size: int, iters: int) -> dict[str, float]:
    """One bandwidth row: ``iters`` operations per QP of ``size`` bytes [B].

    Returns ``bw_avg`` and ``bw_peak`` [B/s] and ``msg_rate_mpps`` [M/s], as perftest
    computes them (``print_report_bw``: the peak is the best rate over any run of
    operations, from the post of the first to the completion of the last, the last one
    signaled; operations counted in posting order over all QPs; with more than 5e7
    (completion, post) pairs, over completions evenly spread)."""
    p = _Pair(a, profile, size)
    sim = p.sim
    depth = tx_depth(a, iters)
    cq_mod = max(1, min(a.cq_mod, depth))
    inline = size <= inline_size(a, p.ctx[0].max_inline)
    op = {"ib_read_bw": READ, "ib_write_bw": WRITE, "ib_send_bw": SEND,
          "ib_atomic_bw": FAA if a.atomic == "FETCH_AND_ADD" else CAS}[a.tool]
    rkey = p.mr[1].rkey
    marks: list[tuple[float, int]] = []
    posts: list[float] = []         # post time of every operation, in posting order [ns]
    done = [0]
    total = iters * a.qps
    rsize = recv_size(a.conn, size)
    if op == SEND:
        for _q0, q1 in p.qps:
            q1.post_recv([WorkRequest(RECV, rsize) for _ in range(min(iters, 4096))])

    def server_recv():
        # The receiver keeps its queue full (perftest re-posts RECVs as they complete).
        posted = {q1.qp_num: min(iters, 4096) for _q0, q1 in p.qps}
        by_num = {q1.qp_num: q1 for _q0, q1 in p.qps}
        got = 0
        while got < total:
            wcs = yield p.cq[1].wait()
            for wc in wcs:
                if wc.opcode == RECV:
                    got += 1
                    if posted[wc.qp_num] < iters:
                        by_num[wc.qp_num].post_recv([WorkRequest(RECV, rsize)])
                        posted[wc.qp_num] += 1

    # Remote offsets: 0, or cycled over ``addresses`` targets 64 B apart, or uniformly
    # random slots over ``region`` bytes (each posting thread its own sequence/stream).
    align = -(-max(size, 1) // 64) * 64
    slots = a.region // align if a.region else 0

    def offsets(t: int):
        if slots > 1:
            rng = sim.rng(f"perftest/offsets/t{t}")
            while True:
                for o in rng.integers(0, slots, 4096):
                    yield int(o) * align
        seq = 0
        while True:
            yield (seq % a.addresses) * 64 if a.addresses > 1 else 0
            seq += 1

    def client(th: int):
        mine = range(th * p.per, (th + 1) * p.per)
        cq = p.ccq[th]
        left = [total_of[th]]
        offs = offsets(th)
        posted = [0] * a.qps
        inflight = [0] * a.qps
        if not marks:
            marks.append((sim.now, 0))

        def fill(i: int):
            q0, q1 = p.qps[i]
            while inflight[i] + a.post_list <= depth and posted[i] < iters:
                n = min(a.post_list, iters - posted[i])
                wrs = []
                for _ in range(n):
                    posted[i] += 1
                    sig = posted[i] % cq_mod == 0 or posted[i] == iters
                    wr = WorkRequest(op, size, (i, 0), sig, inline, None, 0,
                                     rkey if op != SEND else None,
                                     next(offs) if op != SEND else 0)
                    if a.conn == "UD":
                        wr.dest = q1.address
                    wrs.append(wr)
                # count unsignaled WRs against the signaled one that covers them
                cover = 0
                for wr in wrs:
                    cover += 1
                    if wr.signaled:
                        wr.wr_id = (i, cover_base[i] + cover)
                        cover_base[i] = 0
                        cover = 0
                cover_base[i] += cover
                inflight[i] += n
                posts.extend([sim.now] * n)
                yield q0.post_send(wrs)

        cover_base = [0] * a.qps
        for i in mine:
            yield from fill(i)
        while left[0] > 0:
            wcs = yield cq.wait()
            for wc in wcs:
                if wc.opcode == RECV:
                    continue
                i, covered = wc.wr_id
                inflight[i] -= covered
                left[0] -= covered
                done[0] += covered
                marks.append((sim.now, done[0]))
            for i in mine:
                yield from fill(i)

    total_of = [iters * p.per] * a.threads

    if op == SEND:
        sim.process(server_recv())
    for th in range(a.threads):
        sim.process(client(th))
    sim.run()
    t0, _ = marks[0]
    t1, n1 = marks[-1]
    dur_s = (t1 - t0) / 1e9
    avg = size * n1 / dur_s
    # perftest's peak: min over i <= j of (t_completed[j] - t_posted[i]) / (j - i + 1), j a
    # signaled completion (a mark: n operations done by then, so j = n - 1)
    tp = np.asarray(posts[:n1])
    peak = avg
    ends = marks[1:]
    if len(ends) * n1 > 50_000_000:
        # every completion against every post is quadratic: beyond 5e7 pairs (e.g. 8 QPs
        # x 5000 iterations, each signaled) take completions evenly spread, the last kept
        step = -(-len(ends) * n1 // 50_000_000)
        ends = ends[::-1][::step][::-1]
    for tb, nb in ends:
        span = tb - tp[:nb]
        ok = span > 0
        if ok.any():
            best = np.max((nb - np.arange(nb))[ok] / span[ok])
            peak = max(peak, size * best * 1e9)
    return {"bw_peak": peak, "bw_avg": avg, "msg_rate_mpps": n1 / dur_s / 1e6}


def run_echo(profile, conn: str, size: int, window: int, batch: int, inline: bool,
             warmup: int, count: int, seed: int = 1) -> float:
    """Steady-state rate [M echoes/s] of ``rnicsim-probe``'s ``rpc`` sweep point: two-sided
    RPCs of ``size`` bytes [B] over one ``conn`` (``"UD"`` or ``"RC"``) QP pair.

    As ``calibration/probe/client.c`` (``rpc_phase``) and ``server.c`` (``serve_loop``)
    run it: the client thread keeps ``window`` SEND_WITH_IMM requests outstanding, posted
    in lists of ``batch`` WRs (one doorbell each; only a list's last WR signaled, inlined
    when ``inline``) whenever that many slots are free; it takes up to 64 echoes per
    poll, re-posts one receive for each (one ``ibv_post_recv`` each), then reaps up to 16
    send completions, then posts. The server thread takes up to 32 requests per poll,
    for each re-posts the receive and posts one signaled, not inlined echo of the same
    size (one WR per ``ibv_post_send``), then reaps up to 32 send completions. The client
    keeps ``window`` receives posted, the server twice that. The rate is measured between
    echo ``warmup`` and echo ``warmup + count`` with the window kept full (the probe's
    20,000-echo average differs from it by the fill and drain of one window; its send
    queues never fill here). ValueError unless ``batch`` divides ``window``.
    """
    if conn not in ("UD", "RC") or window < 1 or batch < 1 or window % batch:
        raise ValueError(f"run_echo: conn UD or RC and a batch dividing the window, got "
                         f"{conn!r}, window {window}, batch {batch}")
    sim = Simulation(seed)
    cluster = Cluster(sim, profile, 2, 1)
    th = [cluster.nodes[i].thread(0) for i in range(2)]
    ctx = [Context(cluster, i, 0, th[i]) for i in range(2)]
    scq = [c.create_cq() for c in ctx]
    rcq = [c.create_cq() for c in ctx]
    q = [ctx[i].create_qp(conn, scq[i], rcq[i]) for i in range(2)]
    if conn == "RC":
        q[0].connect(q[1])
    rsize = recv_size(conn, size)
    q[0].post_recv([WorkRequest(RECV, rsize) for _ in range(window)])
    q[1].post_recv([WorkRequest(RECV, rsize) for _ in range(2 * window)])
    dest = q[1].address if conn == "UD" else None
    back = q[0].address if conn == "UD" else None
    marks: dict[int, float] = {}
    stop = sim.event()
    end = warmup + count

    def client():
        free = window
        got = 0
        while True:
            while free >= batch:
                wrs = []
                for k in range(batch):
                    wr = WorkRequest(SEND_WITH_IMM, size, None, k == batch - 1, inline)
                    wr.dest = dest
                    wrs.append(wr)
                free -= batch
                yield q[0].post_send(wrs)
            wcs = yield rcq[0].wait(64)
            for _ in wcs:
                q[0].post_recv([WorkRequest(RECV, rsize)], event=False)
            scq[0].poll(16)
            free += len(wcs)
            for _ in wcs:
                got += 1
                if got == warmup or got == end:
                    marks[got] = sim.now
            if got >= end:
                stop.succeed()
                return

    def server():
        while True:
            wcs = yield rcq[1].wait(32)
            for wc in wcs:
                q[1].post_recv([WorkRequest(RECV, rsize)], event=False)
                wr = WorkRequest(SEND_WITH_IMM, size, None, True, False)
                wr.dest = back
                q[1].post_send([wr], event=False)
            scq[1].poll(32)

    sim.process(client())
    sim.process(server())
    sim.run(until=stop)
    return count / (marks[end] - marks[warmup]) * 1e3


def run_behind(profile, behind: int, iters: int, size: int = 64, gap_ns: float = 2000.0,
               seed: int = 1) -> float:
    """Median post-to-CQE latency [us] of a ``size``-B RDMA WRITE posted ``gap_ns`` [ns]
    after a ``behind``-B WRITE on another QP: ``rnicsim-probe``'s ``arb`` sweep point.

    As ``calibration/probe/client.c`` runs it: one client thread, two RC QPs to one
    server on one CQ; each of ``iters`` iterations posts the large WRITE on QP 0 (none
    when ``behind`` is 0), spins until ``gap_ns`` after that post began (the large one is
    on the wire by then), posts the small one on QP 1 (both signaled, the small one not
    inlined), times the small one from its post to its completion and waits for both
    before the next. Per-message transmit arbitration (``nic.tx_arbitration: message``)
    makes the small WRITE wait for the rest of the large one; per-packet lets it go after
    one packet. (Posted at once, the small WRITE would win the wire whatever the
    arbitration: its one-TLP payload crosses PCIe before the large one's first packet.)
    ValueError for a negative ``behind``, ``size`` or ``gap_ns``, or ``iters`` < 1."""
    if behind < 0 or iters < 1 or size < 0 or not gap_ns >= 0:
        raise ValueError(f"run_behind: behind >= 0, iters >= 1, size >= 0 and gap_ns >= 0, "
                         f"got {behind}, {iters}, {size}, {gap_ns}")
    sim = Simulation(seed)
    cluster = Cluster(sim, profile, 2, 1)
    th = cluster.nodes[0].thread(0)
    ctx = [Context(cluster, 0, 0, th), Context(cluster, 1, 0, cluster.nodes[1].thread(0))]
    cq = ctx[0].create_cq()
    mr = ctx[1].reg_mr(max(4096, behind + size), 4096)
    qps = []
    for _ in range(2):
        a, b = ctx[0].create_qp("RC", cq), ctx[1].create_qp("RC", ctx[1].create_cq())
        a.connect(b)
        qps.append(a)
    samples: list[float] = []

    def client():
        for _ in range(iters):
            pending = {"small"}
            t0 = sim.now
            if behind:
                pending.add("big")
                yield qps[0].post_send([WorkRequest(WRITE, behind, "big", True, False, None,
                                                    0, mr.rkey, 0)])
            if sim.now < t0 + gap_ns:
                yield sim.timeout(t0 + gap_ns - sim.now)    # the probe's spin
            t = sim.now
            yield qps[1].post_send([WorkRequest(WRITE, size, "small", True, False, None, 0,
                                                mr.rkey, behind)])
            while pending:
                for wc in (yield cq.wait()):
                    pending.discard(wc.wr_id)
                    if wc.wr_id == "small":
                        samples.append((sim.now - t) / 1e3)

    sim.process(client())
    sim.run()
    return float(np.median(samples))


def _sizes(a: PerftestArgs, profile) -> list[int]:
    if "atomic" in a.tool:
        return [8]
    if not a.all_sizes:
        return [a.size]
    top = 23
    sizes = [2 ** k for k in range(1, top + 1)]
    if a.conn == "UD":
        mtu = a.mtu or profile.link.mtu
        sizes = [s for s in sizes if s <= mtu]
    return sizes


def header(a: PerftestArgs, profile) -> list[str]:
    """perftest's header block for this run."""
    title = TITLES[a.tool].format(a.atomic)
    dev = "mlx4_0" if "ConnectX-3" in str(profile.nic.model) else "mlx5_0"
    link = "IB" if profile.link.kind == "ib" else "Ethernet"
    depth = 1 if a.tool.endswith("_lat") else tx_depth(a, a.iters or 5000)
    lines = [SEP, f"                    {title}",
             f" Dual-port       : OFF\t\tDevice         : {dev}",
             f" Number of qps   : {a.qps}\t\tTransport type : IB",
             f" Connection type : {a.conn}\t\tUsing SRQ      : OFF",
             f" TX depth        : {depth}"]
    if a.post_list > 1:
        lines.append(f" Post List       : {a.post_list}")
    if a.tool.endswith("_bw"):
        lines.append(f" CQ Moderation   : {max(1, min(a.cq_mod, depth))}")   # as run_bw
    lines += [f" Mtu             : {a.mtu or profile.link.mtu}[B]",
              f" Link type       : {link}"]
    if a.tool in ("ib_write_lat", "ib_send_lat", "ib_write_bw", "ib_send_bw"):
        lines.append(f" Max inline data : {inline_size(a, profile.nic.max_inline)}[B]")
    if "read" in a.tool or "atomic" in a.tool:
        lines.append(f" Outstand reads  : {a.outstanding or profile.nic.max_rd_atomic}")
    lines += [" rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", SEP,
              f" simulated by rnicsim, NIC profile {profile.name}", SEP]
    return lines


def run(a: PerftestArgs, profile) -> list[str]:
    """Run the tool and return perftest's output lines."""
    if a.mtu:
        profile = profile.with_overrides({"link.mtu": a.mtu}, "command line -m")
    if a.outstanding:
        profile = profile.with_overrides({"nic.max_rd_atomic": a.outstanding},
                                         "command line -o")
    lines = header(a, profile)
    lat = a.tool.endswith("_lat")
    if lat:
        lines.append(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                     "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   "
                     "99.9% percentile[usec] ")
    else:
        unit = "Gb/sec" if a.gbits else "MB/sec"
        lines.append(f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   "
                     "MsgRate[Mpps]")
    iters = a.iters or (1000 if lat else 5000)
    for size in _sizes(a, profile):
        if lat:
            r = run_lat(a, profile, size, iters)
            lines.append(f" {size:<7d} {iters:<10d}     {r['t_min']:<14.2f} "
                         f"{r['t_max']:<12.2f} {r['t_typical']:<17.2f} {r['t_avg']:<12.2f} "
                         f"{r['t_stdev']:<14.2f} {r['p99']:<20.2f} {r['p999']:.2f}")
        else:
            r = run_bw(a, profile, size, iters)
            conv = (lambda b: b * 8 / 1e9) if a.gbits else (lambda b: b / 2 ** 20)
            lines.append(f" {size:<10d} {iters:<10d}       {conv(r['bw_peak']):<18.2f} "
                         f"{conv(r['bw_avg']):<18.2f}   {r['msg_rate_mpps']:.6f}")
    lines.append(SEP)
    return lines


def main(argv: list[str]) -> int:
    """Entry point of ``rnicsim perftest``."""
    a, overrides = parse_args(argv)
    if a.out:
        from rnicsim.results import check_out_file

        check_out_file(a.out)
    profile = load_profile(a.nic)
    if overrides:
        profile = profile.with_overrides(overrides, "command line --set")
    if a.inline is not None and a.inline > profile.nic.max_inline:
        # perftest fails to create the QP; say why instead.
        raise InputError("command line", "-I", f"at most the NIC's max_inline "
                         f"({profile.nic.max_inline} B on {profile.name}), got {a.inline}")
    ud_size(a, a.mtu or profile.link.mtu)
    from contextlib import nullcontext

    from rnicsim.trace import capture, sim_progress, watch_progress

    watch = nullcontext() if a.quiet else watch_progress(
        lambda now, _end: f"rnicsim perftest {a.tool}: {sim_progress(now, None)}")
    with watch, capture(None, a.pcap, 0.0, float("inf")) as seen:
        lines = run(a, profile)
    if a.pcap:
        print(f"rnicsim perftest: wrote {a.pcap} ({seen['packets']} packets"
              + (f"; {seen['dropped_packets']} more left out" if seen.get("dropped_packets")
                 else "") + ")", file=sys.stderr)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        from rnicsim.results import atomic_write

        atomic_write(a.out, text)
    return 0
