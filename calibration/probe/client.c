/* client.c - the active side: runs the sweeps against a server and writes JSON lines
 * (schema: SCHEMA.md). Every sweep point gets fresh QPs and memory on both sides:
 * SETUP -> CONNECT -> measure -> TEARDOWN over the TCP bootstrap channel. */
#include "coro.h"
#include "net.h"
#include "plan.h"
#include "probe.h"
#include "stats.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000ull
#define OP_TIMEOUT_NS (5ull * NS_PER_S)          /* no completion for this long: give up */
#define UD_REPLY_TIMEOUT_NS (200ull * 1000000ull) /* a UD echo this late counts as lost */
#define RPC_EXPIRE_EVERY_NS 1000000ull            /* rpc: look for overdue echoes this often */
#define MAX_BATCH 64
#define HUGE_2M (2u << 20)
#define MAX_INLINE_PROBED 256u /* the inline sweep's largest payload: inline points up to it */

enum verb { V_READ, V_WRITE, V_SEND, V_CAS, V_FAA };
static const char *const VERB_NAMES[] = {"READ", "WRITE", "SEND", "CAS", "FAA"};
enum method { M_CQE, M_PINGPONG, M_BW };
static const char *const METHOD_NAMES[] = {"post_to_cqe", "pingpong", "throughput"};

enum { POINT_OK = 0, POINT_SKIP = 1, POINT_FATAL = -1 };

struct point {
    int sweep;
    int verb;
    int transport;
    int method;
    uint32_t payload;
    int nqps;
    int threads;
    int depth;        /* outstanding WRs per QP */
    int batch;        /* WRs per ibv_post_send */
    int signal_every; /* one signaled WR every N */
    int inline_;
    uint32_t page_size;
    uint64_t region_bytes; /* remote region; 0: just large enough */
    int addresses;         /* distinct remote 64-byte-apart targets, cycled */
    int random_offsets;    /* uniformly random targets over the region */
    long iters;            /* samples (latency) or operations (throughput) */
    int coroutines;        /* coro sweep: READs posted from this many coroutines, one QP
                            * each (nqps == coroutines); 0: any other point */
    int cq_per_qp;         /* coro sweep: every QP its own send CQ (cq_layout "per_qp");
                            * 0: all on one ("shared") */
    uint32_t behind;       /* arb sweep: bytes of the WRITE posted on QP 0 right before
                            * the timed 64-B WRITE on QP 1; 0: the 64-B WRITE alone */
};

struct result {
    char reason[256];
    long done;
    double elapsed_s;
    int truncated;
    long lost;
    struct lat_stats lat;
    double mops, gbps;
    char backing[16];
    uint64_t region_bytes;
    const char *switch_impl;    /* coro: "asm" or "ucontext" */
    double polls_per_op;        /* coro: ibv_poll_cq calls per timed completion */
    double empty_poll_fraction; /* coro: of those calls, the share that returned 0 */
    double gap_us;              /* arb: median time from the large WRITE's post to the
                                 * 64-B WRITE's over the timed iterations; 0: none */
};

struct client {
    const struct probe_args *a;
    struct rdev *d;
    int fd;
    FILE *out;
    struct jw w;
    struct port_info peer;
    enum ibv_mtu mtu;
    int init_rd; /* max_rd_atomic of our QPs */
    int dest_rd; /* max_dest_rd_atomic of our QPs */
    int points, skipped;
    int header_written;
    uint32_t seed;
    char fatal[512];
};

struct target {
    uint64_t addr;
    uint32_t rkey;
    uint64_t len;
};

static int is_atomic(int verb)
{
    return verb == V_CAS || verb == V_FAA;
}

static uint32_t op_bytes(const struct point *pt)
{
    return is_atomic(pt->verb) ? 8u : pt->payload;
}

/* an rpc-sweep point: SENDs with immediate data the server echoes, a window in flight */
static int is_rpc(const struct point *pt)
{
    return pt->sweep == SW_RPC;
}

/* an arb-sweep point: a 64-B WRITE on QP 1 timed 2 us after a large WRITE on QP 0 */
static int is_arb(const struct point *pt)
{
    return pt->sweep == SW_ARB;
}

/* ---- completions ------------------------------------------------------------------ */

/* 1: got one; 0: nothing within timeout_ns; -1: poll error */
static int wait_cq(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t timeout_ns)
{
    uint64_t start = 0;
    unsigned spins = 0;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n != 0)
            return n < 0 ? -1 : 1;
        if ((++spins & 0xFF) == 0) {
            uint64_t t = now_ns();
            if (!start)
                start = t;
            else if (t - start > timeout_ns)
                return 0;
        }
    }
}

static void fill_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct point *pt,
                    const struct mem *lm, uint64_t raddr, uint32_t rkey, int signaled)
{
    memset(wr, 0, sizeof *wr);
    sge->addr = (uintptr_t)lm->buf;
    sge->length = op_bytes(pt);
    sge->lkey = lm->mr->lkey;
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    if (pt->inline_ && (pt->verb == V_WRITE || pt->verb == V_SEND))
        wr->send_flags |= IBV_SEND_INLINE;
    switch (pt->verb) {
    case V_READ:
        wr->opcode = IBV_WR_RDMA_READ;
        wr->wr.rdma.remote_addr = raddr;
        wr->wr.rdma.rkey = rkey;
        break;
    case V_WRITE:
        wr->opcode = IBV_WR_RDMA_WRITE;
        wr->wr.rdma.remote_addr = raddr;
        wr->wr.rdma.rkey = rkey;
        break;
    case V_SEND:
        wr->opcode = IBV_WR_SEND;
        break;
    case V_CAS:
        wr->opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        wr->wr.atomic.remote_addr = raddr;
        wr->wr.atomic.compare_add = 0;
        wr->wr.atomic.swap = 1;
        wr->wr.atomic.rkey = rkey;
        break;
    case V_FAA:
        wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr->wr.atomic.remote_addr = raddr;
        wr->wr.atomic.compare_add = 1;
        wr->wr.atomic.rkey = rkey;
        break;
    }
}

/* ---- latency: post one signaled WR, spin until its completion ---------------------- */

static long warmup_of(long iters)
{
    long w = iters / 10 + 1;
    return w > 100 ? 100 : w;
}

/* End of a latency point: elapsed time, statistics of the k samples (or a skip with
 * `empty_reason` when there are none); frees `samples`; returns the point's status. */
static int finish_lat(struct result *res, double *samples, long k, int status,
                      uint64_t start, const char *empty_reason)
{
    res->elapsed_s = (double)(now_ns() - start) * 1e-9;
    if (status == POINT_OK && k == 0) {
        snprintf(res->reason, sizeof res->reason, "%s", empty_reason);
        status = POINT_SKIP;
    }
    if (status == POINT_OK) {
        stats_compute(samples, (size_t)k, &res->lat);
        res->done = k;
    }
    free(samples);
    return status;
}

/* With several QPs (qps sweep) they take turns round robin, all on one CQ, after a
 * warm-up that uses every QP at least once: with more QPs than the NIC caches contexts
 * of, every operation fetches its QP's context (the latency step of the qps sweep). */
static int lat_cqe(struct client *c, const struct point *pt, struct qpset *qs,
                   const struct mem *lm, const struct target *tgt, struct result *res)
{
    struct ibv_cq *cq = qs->scq[0];
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad = NULL;
    fill_wr(&wr, &sge, pt, lm, tgt->addr, tgt->rkey, 1);
    long warm = warmup_of(pt->iters), k = 0;
    if (warm < qs->n)
        warm = qs->n;
    double *samples = malloc((size_t)pt->iters * sizeof *samples);
    if (!samples) {
        snprintf(res->reason, sizeof res->reason, "out of memory for %ld samples", pt->iters);
        return POINT_SKIP;
    }
    uint64_t start = now_ns();
    uint64_t deadline = start + (uint64_t)(c->a->time_limit * 1e9);
    int status = POINT_OK;
    for (long i = 0; i < warm + pt->iters; i++) {
        uint64_t t0 = now_ns();
        if (t0 >= deadline || g_stop) {
            res->truncated = 1;
            break;
        }
        int rc = ibv_post_send(qs->qp[i % qs->n], &wr, &bad);
        if (rc) {
            snprintf(res->reason, sizeof res->reason, "ibv_post_send failed: %s", strerror(rc));
            status = POINT_SKIP;
            break;
        }
        struct ibv_wc wc;
        int got = wait_cq(cq, &wc, OP_TIMEOUT_NS);
        uint64_t t1 = now_ns();
        if (got <= 0 || wc.status != IBV_WC_SUCCESS) {
            snprintf(res->reason, sizeof res->reason, "%s",
                     got < 0   ? "ibv_poll_cq failed"
                     : got == 0 ? "no completion within 5 s"
                                : ibv_wc_status_str(wc.status));
            status = POINT_SKIP;
            break;
        }
        if (i >= warm)
            samples[k++] = (double)(t1 - t0) / 1000.0;
    }
    return finish_lat(res, samples, k, status, start,
                      "time limit reached before the first sample");
}

/* ---- latency behind a large WRITE: the NIC's transmit arbitration ------------------- */

#define ARB_WR_BIG 0u   /* wr_id of the large WRITE, on QP 0 */
#define ARB_WR_SMALL 1u /* wr_id of the timed 64-B WRITE, on QP 1 */

/* One iteration: a signaled WRITE of `behind` bytes on QP 0 (none when behind is 0), at
 * once a signaled 64-B WRITE on QP 1; both QPs complete on the one send CQ. The clock
 * runs from just before the second post to the 64-B WRITE's completion (told from the
 * large one's by its wr_id, whichever comes first); the large WRITE's completion is
 * awaited too, so that every iteration starts with nothing in flight. A NIC that
 * arbitrates between its send queues per packet sends the 64 B between the large
 * message's packets; one that arbitrates per message sends them after all of it.
 * Warm-up (at least one iteration per QP) and statistics as lat_cqe. The gap between the
 * two posts (from just before the first to just before the second: the large WRITE's
 * ibv_post_send and a clock read) is timed too; res->gap_us is its median over the timed
 * iterations (0 without a large WRITE or a timed iteration). */
static int arb_cqe(struct client *c, const struct point *pt, struct qpset *qs,
                   const struct mem *lm, const struct target *tgt, struct result *res)
{
    struct ibv_cq *cq = qs->scq[0];
    struct ibv_sge small_sge, big_sge;
    struct ibv_send_wr small, big, *bad = NULL;
    fill_wr(&small, &small_sge, pt, lm, tgt->addr, tgt->rkey, 1);
    small.wr_id = ARB_WR_SMALL;
    fill_wr(&big, &big_sge, pt, lm, tgt->addr + ARB_BIG_OFFSET, tgt->rkey, 1);
    big_sge.addr = (uintptr_t)lm->buf + ARB_BIG_OFFSET;
    big_sge.length = pt->behind;
    big.wr_id = ARB_WR_BIG;
    long warm = warmup_of(pt->iters), k = 0;
    if (warm < qs->n)
        warm = qs->n;
    double *samples = malloc((size_t)pt->iters * sizeof *samples);
    double *gaps = malloc((size_t)pt->iters * sizeof *gaps);
    if (!samples || !gaps) {
        free(samples);
        free(gaps);
        snprintf(res->reason, sizeof res->reason, "out of memory for %ld samples", pt->iters);
        return POINT_SKIP;
    }
    uint64_t start = now_ns();
    uint64_t deadline = start + (uint64_t)(c->a->time_limit * 1e9);
    int status = POINT_OK;
    for (long i = 0; i < warm + pt->iters && status == POINT_OK; i++) {
        if (now_ns() >= deadline || g_stop) {
            res->truncated = 1;
            break;
        }
        int rc = 0;
        uint64_t tb = now_ns();
        if (pt->behind > 0)
            rc = ibv_post_send(qs->qp[0], &big, &bad);
        /* the small WRITE goes ARB_GAP_NS after the large one's post began: by then the
         * large one is on the wire (posted at once, the small one's one-TLP payload would
         * cross PCIe first and win the wire whatever the arbitration); the same wait
         * when it goes alone */
        uint64_t t0 = now_ns(), t1 = 0;
        while (t0 - tb < ARB_GAP_NS)
            t0 = now_ns();
        if (rc == 0)
            rc = ibv_post_send(qs->qp[1], &small, &bad);
        if (rc) {
            snprintf(res->reason, sizeof res->reason, "ibv_post_send failed: %s", strerror(rc));
            status = POINT_SKIP;
            break;
        }
        int big_left = pt->behind > 0, small_left = 1;
        while (big_left || small_left) {
            struct ibv_wc wc;
            int got = wait_cq(cq, &wc, OP_TIMEOUT_NS);
            if (got > 0 && wc.status == IBV_WC_SUCCESS && wc.wr_id == ARB_WR_SMALL &&
                small_left) {
                t1 = now_ns(); /* the clock first: nothing else is timed */
                small_left = 0;
                continue;
            }
            if (got < 0) {
                snprintf(res->reason, sizeof res->reason, "ibv_poll_cq failed");
            } else if (got == 0) {
                if (big_left && small_left)
                    snprintf(res->reason, sizeof res->reason, "no completion within 5 s");
                else
                    snprintf(res->reason, sizeof res->reason,
                             "no completion of the %u-B WRITE within 5 s",
                             small_left ? ARB_SMALL_BYTES : pt->behind);
            } else if (wc.status != IBV_WC_SUCCESS) {
                snprintf(res->reason, sizeof res->reason,
                         "completion error: %s (vendor error 0x%x) on the %u-B WRITE",
                         ibv_wc_status_str(wc.status), wc.vendor_err,
                         wc.wr_id == ARB_WR_SMALL ? ARB_SMALL_BYTES : pt->behind);
            } else if (wc.wr_id == ARB_WR_BIG && big_left) {
                big_left = 0;
                continue;
            } else {
                snprintf(res->reason, sizeof res->reason,
                         "a completion of no WRITE in flight (wr_id %llu)",
                         (unsigned long long)wc.wr_id);
            }
            status = POINT_SKIP;
            break;
        }
        if (status == POINT_OK && i >= warm) {
            gaps[k] = (double)(t0 - tb) / 1000.0;
            samples[k++] = (double)(t1 - t0) / 1000.0;
        }
    }
    struct lat_stats g;
    if (k > 0 && stats_compute(gaps, (size_t)k, &g) == 0)
        res->gap_us = g.median;
    free(gaps);
    return finish_lat(res, samples, k, status, start,
                      "time limit reached before the first sample");
}

/* ---- latency: SEND ping-pong against the server's echo ---------------------------- */

struct pingpong_bufs {
    uint64_t send_off, recv_off;
    uint32_t recv_len;
};

static int post_client_recv(struct ibv_qp *qp, const struct mem *lm, const struct pingpong_bufs *pb)
{
    struct ibv_sge sge = {(uintptr_t)lm->buf + pb->recv_off, pb->recv_len, lm->mr->lkey};
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp, &wr, &bad);
}

static int lat_pingpong(struct client *c, const struct point *pt, struct qpset *qs,
                        const struct mem *lm, const struct pingpong_bufs *pb, struct ibv_ah *ah,
                        uint32_t remote_qpn, struct result *res)
{
    int ud = pt->transport == TP_UD;
    struct ibv_qp *qp = qs->qp[0];
    struct ibv_sge sge = {(uintptr_t)lm->buf + pb->send_off, pt->payload, lm->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED | (pt->inline_ ? IBV_SEND_INLINE : 0);
    if (ud) {
        /* the sequence number in the immediate data tells late echoes from current ones */
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = remote_qpn;
        wr.wr.ud.remote_qkey = UD_QKEY;
    } else {
        wr.opcode = IBV_WR_SEND;
    }
    long warm = warmup_of(pt->iters), k = 0;
    double *samples = malloc((size_t)pt->iters * sizeof *samples);
    if (!samples) {
        snprintf(res->reason, sizeof res->reason, "out of memory for %ld samples", pt->iters);
        return POINT_SKIP;
    }
    uint64_t start = now_ns();
    uint64_t deadline = start + (uint64_t)(c->a->time_limit * 1e9);
    int status = POINT_OK;
    for (long i = 0; i < warm + pt->iters && status == POINT_OK; i++) {
        uint64_t t0 = now_ns();
        if (t0 >= deadline || g_stop) {
            res->truncated = 1;
            break;
        }
        wr.imm_data = htonl((uint32_t)i);
        int rc = ibv_post_send(qp, &wr, &bad);
        if (rc) {
            snprintf(res->reason, sizeof res->reason, "ibv_post_send failed: %s", strerror(rc));
            status = POINT_SKIP;
            break;
        }
        int matched = 0;
        uint64_t t1 = 0;
        for (;;) {
            struct ibv_wc wc;
            int got = wait_cq(qs->rcq[0], &wc, ud ? UD_REPLY_TIMEOUT_NS : OP_TIMEOUT_NS);
            t1 = now_ns();
            if (got == 0 && ud) {
                res->lost++;
                break;
            }
            if (got <= 0 || wc.status != IBV_WC_SUCCESS) {
                snprintf(res->reason, sizeof res->reason, "echo: %s",
                         got < 0   ? "ibv_poll_cq failed"
                         : got == 0 ? "no reply within 5 s"
                                    : ibv_wc_status_str(wc.status));
                status = POINT_SKIP;
                break;
            }
            rc = post_client_recv(qp, lm, pb);
            if (rc) {
                snprintf(res->reason, sizeof res->reason, "ibv_post_recv failed: %s",
                         strerror(rc));
                status = POINT_SKIP;
                break;
            }
            if (!ud || ((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == (uint32_t)i)) {
                matched = 1;
                break;
            }
            /* a late echo of an earlier (lost-counted) ping: keep waiting for ours */
        }
        if (status != POINT_OK)
            break;
        struct ibv_wc swc;
        int got = wait_cq(qs->scq[0], &swc, OP_TIMEOUT_NS);
        if (got <= 0 || swc.status != IBV_WC_SUCCESS) {
            snprintf(res->reason, sizeof res->reason, "send: %s",
                     got <= 0 ? "no send completion" : ibv_wc_status_str(swc.status));
            status = POINT_SKIP;
            break;
        }
        if (matched && i >= warm)
            samples[k++] = (double)(t1 - t0) / 1000.0;
    }
    return finish_lat(res, samples, k, status, start,
                      "no echo came back before the time limit");
}

/* ---- throughput engine ------------------------------------------------------------- */

struct bw_job {
    struct ibv_qp **qps;
    int nqps;
    struct ibv_cq *cq;
    const struct point *pt;
    const struct mem *lm;
    struct target tgt;
    struct rng rng;
    uint64_t opseq;
    long warmup_ops, ops;
    uint64_t warm_deadline, deadline;
    pthread_barrier_t *barrier;
    int rc;
    long done;
    uint64_t t_start, t_end;
    int truncated;
    char err[200];
};

static uint64_t remote_offset(struct bw_job *j)
{
    const struct point *pt = j->pt;
    uint64_t seq = j->opseq++;
    if (pt->random_offsets) {
        uint64_t align = round_up(op_bytes(pt), 64);
        uint64_t slots = j->tgt.len / align;
        return slots > 1 ? rng_below(&j->rng, slots) * align : 0;
    }
    if (pt->addresses > 1)
        return (seq % (uint64_t)pt->addresses) * 64u;
    return 0;
}

/* Keep up to depth WRs outstanding on every QP (posted in batches of `batch`, one in
 * `signal_every` signaled) until `target` operations completed or the deadline passed.
 * QPs with room for a batch wait in a FIFO ring, so the cost per operation does not
 * grow with the number of QPs (the qps sweep goes to thousands). */
static int bw_phase(struct bw_job *j, long target, uint64_t deadline, int measured)
{
    const struct point *pt = j->pt;
    int n = j->nqps, B = pt->batch, S = pt->signal_every, D = pt->depth;
    long unit = B > S ? B : S;
    long per_qp = (target + n - 1) / n;
    per_qp = per_qp < unit ? unit : (per_qp + unit - 1) / unit * unit;
    long *posted = calloc((size_t)n, sizeof *posted);
    long *completed = calloc((size_t)n, sizeof *completed);
    int *ring = calloc((size_t)n, sizeof *ring);
    unsigned char *queued = calloc((size_t)n, 1);
    if (!posted || !completed || !ring || !queued) {
        free(posted);
        free(completed);
        free(ring);
        free(queued);
        snprintf(j->err, sizeof j->err, "out of memory");
        return -1;
    }
    int head = 0, tail = 0, count = 0;
#define HAS_ROOM(q) (posted[q] < per_qp && posted[q] - completed[q] + B <= D)
#define PUSH(q)                                                                               \
    do {                                                                                      \
        if (!queued[q]) {                                                                     \
            ring[tail] = (q);                                                                 \
            tail = tail + 1 == n ? 0 : tail + 1;                                              \
            count++;                                                                          \
            queued[q] = 1;                                                                    \
        }                                                                                     \
    } while (0)
    for (int q = 0; q < n; q++)
        PUSH(q);

    struct ibv_send_wr wr[MAX_BATCH];
    struct ibv_sge sge[MAX_BATCH];
    struct ibv_wc wc[64];
    long tot_posted = 0, tot_done = 0, expected = per_qp * n;
    int stop = 0, rc = 0;
    unsigned loops = 0;
    uint64_t t_start = now_ns(), t_last = t_start, t_progress = t_start;
    for (;;) {
        /* fill the window of every QP that has room, oldest first */
        while (!stop && count > 0) {
            int qi = ring[head];
            head = head + 1 == n ? 0 : head + 1;
            count--;
            queued[qi] = 0;
            while (HAS_ROOM(qi)) {
                for (int b = 0; b < B; b++) {
                    long idx = posted[qi] + b;
                    fill_wr(&wr[b], &sge[b], pt, j->lm, j->tgt.addr + remote_offset(j),
                            j->tgt.rkey, (idx + 1) % S == 0);
                    wr[b].wr_id = (uint64_t)qi;
                    wr[b].next = b + 1 < B ? &wr[b + 1] : NULL;
                }
                struct ibv_send_wr *bad = NULL;
                int e = ibv_post_send(j->qps[qi], wr, &bad);
                if (e) {
                    snprintf(j->err, sizeof j->err, "ibv_post_send failed: %s", strerror(e));
                    rc = -1;
                    break;
                }
                posted[qi] += B;
                tot_posted += B;
            }
            if (rc)
                break;
        }
        if (rc)
            break;
        int got = ibv_poll_cq(j->cq, 64, wc);
        if (got < 0) {
            snprintf(j->err, sizeof j->err, "ibv_poll_cq failed");
            rc = -1;
            break;
        }
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                snprintf(j->err, sizeof j->err, "completion error: %s (vendor error 0x%x)",
                         ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
                rc = -1;
                break;
            }
            int qi = (int)wc[i].wr_id;
            completed[qi] += S; /* RC completes in order: covers the unsignaled before it */
            tot_done += S;
            if (HAS_ROOM(qi))
                PUSH(qi);
        }
        if (rc)
            break;
        if (got > 0)
            t_last = t_progress = now_ns();
        if (tot_done >= expected && (stop || tot_posted >= expected))
            break;
        if (got == 0 || (++loops & 0x3F) == 0) {
            uint64_t t = got > 0 ? t_last : now_ns();
            if (!stop && (t >= deadline || g_stop)) {
                /* stop posting; wait only for WRs a signaled completion will account for */
                stop = 1;
                expected = 0;
                for (int q = 0; q < n; q++)
                    expected += posted[q] / S * S;
                if (tot_done >= expected)
                    break;
            }
            if (t - t_progress > OP_TIMEOUT_NS) {
                snprintf(j->err, sizeof j->err, "no completion within 5 s");
                rc = -1;
                break;
            }
        }
    }
#undef HAS_ROOM
#undef PUSH
    if (measured) {
        j->done = tot_done;
        j->t_start = t_start;
        j->t_end = t_last;
        j->truncated = stop;
    }
    free(posted);
    free(completed);
    free(ring);
    free(queued);
    return rc;
}

static void bw_job_run(struct bw_job *j)
{
    j->rc = bw_phase(j, j->warmup_ops, j->warm_deadline, 0);
    if (j->barrier)
        pthread_barrier_wait(j->barrier);
    if (j->rc == 0)
        j->rc = bw_phase(j, j->ops, j->deadline, 1);
}

static void *bw_thread(void *arg)
{
    bw_job_run(arg);
    return NULL;
}

static int bw_measure(struct client *c, const struct point *pt, struct qpset *qs,
                      const struct mem *lm, const struct target *tgt, struct result *res)
{
    int T = pt->threads;
    struct bw_job *jobs = calloc((size_t)T, sizeof *jobs);
    pthread_t *tids = calloc((size_t)T, sizeof *tids);
    pthread_barrier_t barrier;
    if (!jobs || !tids) {
        free(jobs);
        free(tids);
        snprintf(res->reason, sizeof res->reason, "out of memory");
        return POINT_SKIP;
    }
    uint64_t start = now_ns();
    uint64_t tl = (uint64_t)(c->a->time_limit * 1e9);
    /* thread t owns block t of the QPs and polls CQ t, which holds exactly their
     * completions (qpset_create put them there with the same split, plan.h); run_point
     * checked that the threads divide the QPs, so every block has qs->n / T QPs */
    for (int t = 0; t < T; t++) {
        struct bw_job *j = &jobs[t];
        int first, qps_per_job;
        qp_block_range(qs->n, T, t, &first, &qps_per_job);
        j->qps = &qs->qp[first];
        j->nqps = qps_per_job;
        j->cq = qs->scq[t];
        j->pt = pt;
        j->lm = lm;
        j->tgt = *tgt;
        rng_seed(&j->rng, c->seed + (uint32_t)t * 7919u);
        j->ops = pt->iters;
        long unit = pt->batch > pt->signal_every ? pt->batch : pt->signal_every;
        long warm = pt->iters / 10;
        if (warm > 10000)
            warm = 10000;
        if (warm < (long)qps_per_job * unit)
            warm = (long)qps_per_job * unit; /* touch every QP at least once */
        j->warmup_ops = warm;
        j->warm_deadline = start + tl * 3 / 10;
        j->deadline = start + tl;
        j->barrier = T > 1 ? &barrier : NULL;
    }
    if (T > 1) {
        pthread_barrier_init(&barrier, NULL, (unsigned)T);
        for (int t = 0; t < T; t++) {
            int e = pthread_create(&tids[t], NULL, bw_thread, &jobs[t]);
            if (e != 0) {
                /* the threads already started wait on the barrier forever: give up */
                fprintf(stderr, PROBE_NAME ": pthread_create failed: %s\n", strerror(e));
                exit(1);
            }
        }
        for (int t = 0; t < T; t++)
            pthread_join(tids[t], NULL);
        pthread_barrier_destroy(&barrier);
    } else {
        bw_job_run(&jobs[0]);
    }
    int status = POINT_OK;
    long done = 0;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int t = 0; t < T; t++) {
        if (jobs[t].rc) {
            snprintf(res->reason, sizeof res->reason, "%s", jobs[t].err);
            status = POINT_SKIP;
            break;
        }
        done += jobs[t].done;
        if (jobs[t].t_start < t0)
            t0 = jobs[t].t_start;
        if (jobs[t].t_end > t1)
            t1 = jobs[t].t_end;
        res->truncated |= jobs[t].truncated;
    }
    if (status == POINT_OK && (done == 0 || t1 <= t0)) {
        snprintf(res->reason, sizeof res->reason, "time limit reached before any completion");
        status = POINT_SKIP;
    }
    if (status == POINT_OK) {
        double ns = (double)(t1 - t0);
        res->done = done;
        res->elapsed_s = ns * 1e-9;
        res->mops = (double)done / ns * 1e3;
        res->gbps = (double)done * (double)op_bytes(pt) * 8.0 / ns;
    }
    free(jobs);
    free(tids);
    return status;
}

/* ---- two-sided RPCs: a window of SENDs against the server's echo ------------------- */

/* One client thread, one QP: at most `depth` (W) requests in flight, posted in linked
 * lists of exactly `batch` (B) SEND_WITH_IMMs whenever B window slots are free, the last
 * WR of each list signaled. The immediate data is the request's sequence number
 * (plan.h, rpc_window); the server's echo carries it back, so an echo names the request
 * it answers (UD: a late echo of a request already counted lost is told apart and
 * ignored). Every echo re-posts one receive (W were posted before the point) before any
 * new request goes out. UD: a request whose echo has not come back 200 ms after its post
 * counts as lost and frees its window slot; the others flow on meanwhile. */
struct rpc_run {
    const struct point *pt;
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
    const struct mem *lm;
    const struct pingpong_bufs *pb;
    int ud;
    struct ibv_send_wr wr[MAX_BATCH];
    struct ibv_sge sge;
    struct rpc_window win;
    uint32_t sq_used, sq_cap; /* send-queue slots taken by WRs not yet reaped, and all */
    char err[200];
};

struct rpc_phase_out {
    long received;            /* echoes of this phase's requests */
    long lost;                /* UD: this phase's requests given up on after 200 ms */
    uint64_t t_first, t_last; /* first post; receipt of the last echo */
    int stopped;              /* the deadline (or an interrupt) stopped the posting */
};

/* Post lists while `target` echoes are not yet received or in flight, until they are all
 * back (or given up on); at the deadline stop posting and drain. The window is empty
 * when it returns 0. */
static int rpc_phase(struct rpc_run *r, long target, uint64_t deadline,
                     struct rpc_phase_out *o)
{
    const struct point *pt = r->pt;
    int B = pt->batch;
    struct ibv_wc wc[64], swc[16];
    uint64_t t_now = now_ns(), t_progress = t_now, t_expired = t_now;
    unsigned loops = 0;
    memset(o, 0, sizeof *o);
    for (;;) {
        /* new requests: whole lists, while the window and the send queue have room */
        while (!o->stopped && o->received + r->win.outstanding < target &&
               rpc_window_room(&r->win, B) && r->sq_used + (uint32_t)B <= r->sq_cap) {
            if (!o->t_first)
                o->t_first = t_now = now_ns();
            for (int b = 0; b < B; b++)
                r->wr[b].imm_data = htonl(rpc_window_post(&r->win, t_now));
            struct ibv_send_wr *bad = NULL;
            int e = ibv_post_send(r->qp, r->wr, &bad);
            if (e) {
                snprintf(r->err, sizeof r->err, "ibv_post_send failed: %s", strerror(e));
                return -1;
            }
            r->sq_used += (uint32_t)B;
        }
        /* echoes: re-post a receive for each, then match it to its request */
        int got = ibv_poll_cq(r->rcq, 64, wc);
        if (got < 0) {
            snprintf(r->err, sizeof r->err, "ibv_poll_cq failed");
            return -1;
        }
        int matched = 0;
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                snprintf(r->err, sizeof r->err, "echo: completion error: %s (vendor error 0x%x)",
                         ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
                return -1;
            }
            int e = post_client_recv(r->qp, r->lm, r->pb);
            if (e) {
                snprintf(r->err, sizeof r->err, "ibv_post_recv failed: %s", strerror(e));
                return -1;
            }
            if ((wc[i].wc_flags & IBV_WC_WITH_IMM) &&
                rpc_window_echo(&r->win, ntohl(wc[i].imm_data))) {
                o->received++;
                matched = 1;
            } else if (!r->ud) {
                snprintf(r->err, sizeof r->err, "an echo that answers no request in flight");
                return -1;
            }
            /* UD: a late echo of a request already counted lost */
        }
        if (got > 0) {
            t_now = t_progress = now_ns();
            if (matched)
                o->t_last = t_now;
        }
        /* send completions: one per list, it frees the list's B slots */
        int m = ibv_poll_cq(r->scq, 16, swc);
        if (m < 0) {
            snprintf(r->err, sizeof r->err, "ibv_poll_cq failed");
            return -1;
        }
        for (int i = 0; i < m; i++) {
            if (swc[i].status != IBV_WC_SUCCESS) {
                snprintf(r->err, sizeof r->err, "completion error: %s (vendor error 0x%x)",
                         ibv_wc_status_str(swc[i].status), swc[i].vendor_err);
                return -1;
            }
            r->sq_used = r->sq_used >= (uint32_t)B ? r->sq_used - (uint32_t)B : 0;
        }
        if (r->win.outstanding == 0 && (o->received >= target || o->stopped))
            return 0;
        if (got == 0 || (++loops & 0x3F) == 0) {
            if (got == 0)
                t_now = now_ns();
            if (!o->stopped && (t_now >= deadline || g_stop))
                o->stopped = 1; /* the requests in flight still come back and count */
            if (r->ud && t_now - t_expired >= RPC_EXPIRE_EVERY_NS) {
                /* overdue echoes (a scan of the window's slots, once a millisecond) */
                t_expired = t_now;
                long lost = rpc_window_expire(&r->win, t_now, UD_REPLY_TIMEOUT_NS);
                if (lost > 0) {
                    o->lost += lost;
                    t_progress = t_now;
                }
            }
            if (t_now - t_progress > OP_TIMEOUT_NS) {
                snprintf(r->err, sizeof r->err, "no echo within 5 s");
                return -1;
            }
        }
    }
}

/* A warm-up of rpc_warmup(iters, W) echoes (by 30% of the time limit at most), drained,
 * then the timed phase: `iters` echoes (rounded up to a multiple of B), the clock from its
 * first post to the receipt of its last echo. */
static int rpc_measure(struct client *c, const struct point *pt, struct qpset *qs,
                       const struct mem *lm, const struct pingpong_bufs *pb,
                       struct ibv_ah *ah, uint32_t remote_qpn, struct result *res)
{
    struct rpc_run *r = calloc(1, sizeof *r);
    if (!r || rpc_window_init(&r->win, pt->depth) != 0) {
        free(r);
        snprintf(res->reason, sizeof res->reason, "out of memory");
        return POINT_SKIP;
    }
    int B = pt->batch;
    r->pt = pt;
    r->qp = qs->qp[0];
    r->scq = qs->scq[0];
    r->rcq = qs->rcq[0];
    r->lm = lm;
    r->pb = pb;
    r->ud = pt->transport == TP_UD;
    r->sq_cap = qs->sq_depth;
    r->sge.addr = (uintptr_t)lm->buf + pb->send_off;
    r->sge.length = pt->payload;
    r->sge.lkey = lm->mr->lkey;
    for (int b = 0; b < B; b++) {
        struct ibv_send_wr *w = &r->wr[b];
        w->sg_list = &r->sge; /* every request sends the same bytes */
        w->num_sge = 1;
        w->opcode = IBV_WR_SEND_WITH_IMM;
        w->send_flags = (b == B - 1 ? IBV_SEND_SIGNALED : 0) |
                        (pt->inline_ ? IBV_SEND_INLINE : 0);
        w->next = b + 1 < B ? &r->wr[b + 1] : NULL;
        if (r->ud) {
            w->wr.ud.ah = ah;
            w->wr.ud.remote_qpn = remote_qpn;
            w->wr.ud.remote_qkey = UD_QKEY;
        }
    }
    int status = POINT_OK;
    uint64_t start = now_ns();
    uint64_t tl = (uint64_t)(c->a->time_limit * 1e9);
    struct rpc_phase_out warm, timed;
    if (rpc_phase(r, rpc_warmup(pt->iters, pt->depth), start + tl * 3 / 10, &warm) != 0 ||
        rpc_phase(r, rpc_timed_ops(pt->iters, B), start + tl, &timed) != 0) {
        snprintf(res->reason, sizeof res->reason, "%s", r->err);
        status = POINT_SKIP;
    } else if (timed.received == 0 || timed.t_last <= timed.t_first) {
        snprintf(res->reason, sizeof res->reason, "no echo came back before the time limit");
        status = POINT_SKIP;
    } else {
        double ns = (double)(timed.t_last - timed.t_first);
        res->done = timed.received;
        res->lost = timed.lost;
        res->truncated = timed.stopped;
        res->elapsed_s = ns * 1e-9;
        res->mops = (double)timed.received / ns * 1e3;
        res->gbps = (double)timed.received * (double)pt->payload * 8.0 / ns;
    }
    rpc_window_free(&r->win);
    free(r);
    return status;
}

/* ---- coroutines: the DrTM+H worker loop ---------------------------------------------- */

/* One thread, K coroutines; coroutine k owns QP k and the 64-B slot k of both regions
 * (offset 64 x k). Its body posts one signaled READ and yields, until the run says stop;
 * the scheduler resumes it when that READ's completion arrives. So a suspended coroutine
 * always has exactly one READ in flight, and once every posted READ has completed every
 * coroutine has returned. */
struct coro_run {
    long posted; /* READs posted by all coroutines */
    long cap;    /* no coroutine posts once posted == cap */
    int stop;    /* time limit or interrupt: coroutines return instead of posting */
    int err;     /* errno of a failed ibv_post_send (then stop is set) */
};

struct coro_reader {
    struct coro co;
    struct coro_run *run;
    struct ibv_qp *qp;
    struct ibv_send_wr wr; /* READ of slot k, wr_id k, signaled */
    struct ibv_sge sge;
    int pending;           /* its READ is in flight (it is suspended) */
};

static void coro_reader_body(struct coro *co, void *arg)
{
    struct coro_reader *r = arg;
    struct coro_run *run = r->run;
    while (!run->stop && run->posted < run->cap) {
        struct ibv_send_wr *bad = NULL;
        int e = ibv_post_send(r->qp, &r->wr, &bad);
        if (e) {
            run->err = e;
            run->stop = 1;
            break;
        }
        run->posted++;
        r->pending = 1;
        coro_yield(co);
    }
}

/* The scheduler. shared (qs has one send CQ): each pass is one ibv_poll_cq(cq, 16) and
 * resumes, in CQE order, the coroutine each wr_id names. per_qp (qs has a send CQ per QP,
 * as RLib/DrTM+H create them): each pass walks the coroutines that have a READ pending, in
 * index order, with ibv_poll_cq(cq_k, 1) each, and resumes every one whose CQE it found
 * (DrTM+H's RDMA_sched::poll_comps walking its pending list). The pipeline is not drained
 * between warm-up and timed phase: the clock starts at the first pass after the warm-up's
 * completions (or at 30% of the time limit if they are not in by then) with every
 * coroutine's READ in flight, and stops when the last READ completed. The timed phase
 * posts `iters` more READs (fewer when the time limit stops it). Polls are counted from
 * the clock's start: polls_per_op = polls / timed completions. */
static int coro_measure(struct client *c, const struct point *pt, struct qpset *qs,
                        const struct mem *lm, const struct target *tgt, struct result *res)
{
    int K = pt->coroutines, shared = !pt->cq_per_qp;
    if (K != qs->n || qs->ncq != (shared ? 1 : K)) {
        snprintf(res->reason, sizeof res->reason, "inconsistent point parameters");
        return POINT_SKIP;
    }
    struct coro_reader *rd = calloc((size_t)K, sizeof *rd);
    if (!rd) {
        snprintf(res->reason, sizeof res->reason, "out of memory");
        return POINT_SKIP;
    }
    int impl = coro_default_impl();
    struct coro_run run;
    memset(&run, 0, sizeof run);
    long warm = coro_warmup(pt->iters, K);
    run.cap = warm + pt->iters;
    int made = 0, status = POINT_OK;
    for (; made < K; made++) {
        struct coro_reader *r = &rd[made];
        r->run = &run;
        r->qp = qs->qp[made];
        fill_wr(&r->wr, &r->sge, pt, lm, tgt->addr + 64u * (uint64_t)made, tgt->rkey, 1);
        r->sge.addr = (uintptr_t)lm->buf + 64u * (uintptr_t)made;
        r->wr.wr_id = (uint64_t)made;
        if (coro_init(&r->co, impl, coro_reader_body, r) != 0)
            break;
    }
    if (made < K) {
        snprintf(res->reason, sizeof res->reason,
                 "out of memory for %d coroutine stacks of %u B", K, CORO_STACK_BYTES);
        status = POINT_SKIP;
        goto out;
    }

    uint64_t start = now_ns();
    uint64_t tl = (uint64_t)(c->a->time_limit * 1e9);
    uint64_t warm_deadline = start + tl * 3 / 10, deadline = start + tl;
    /* start: every coroutine posts its first READ and yields */
    for (int k = 0; k < K && !run.err; k++)
        coro_resume(&rd[k].co);
    struct ibv_wc wc[16];
    long done = 0, done_t0 = 0, polls = 0, empty = 0;
    int timed = 0, progressed = 0;
    unsigned passes = 0;
    uint64_t t0 = 0, t_progress = start;
    char err[200] = "";
    for (;;) {
        if (run.err) {
            snprintf(err, sizeof err, "ibv_post_send failed: %s", strerror(run.err));
            break;
        }
        if (!timed && done >= warm) {
            timed = 1;
            t0 = now_ns();
            done_t0 = done;
            polls = empty = 0;
            /* `iters` timed READs; never below what is already posted */
            run.cap = done + pt->iters > run.posted ? done + pt->iters : run.posted;
        }
        if (done == run.posted)
            break; /* nothing in flight: every coroutine has returned */
        if (shared) {
            int n = ibv_poll_cq(qs->scq[0], 16, wc);
            polls++;
            if (n == 0)
                empty++;
            if (n < 0) {
                snprintf(err, sizeof err, "ibv_poll_cq failed");
                break;
            }
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IBV_WC_SUCCESS) {
                    snprintf(err, sizeof err, "completion error: %s (vendor error 0x%x)",
                             ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
                    break;
                }
                struct coro_reader *r = &rd[wc[i].wr_id];
                r->pending = 0;
                done++;
                coro_resume(&r->co);
            }
            if (err[0])
                break;
            progressed |= n > 0;
        } else {
            for (int k = 0; k < K; k++) {
                struct coro_reader *r = &rd[k];
                if (!r->pending)
                    continue;
                int n = ibv_poll_cq(qs->scq[k], 1, wc);
                polls++;
                if (n == 0) {
                    empty++;
                    continue;
                }
                if (n < 0 || wc[0].status != IBV_WC_SUCCESS) {
                    if (n < 0)
                        snprintf(err, sizeof err, "ibv_poll_cq failed");
                    else
                        snprintf(err, sizeof err, "completion error: %s (vendor error 0x%x)",
                                 ibv_wc_status_str(wc[0].status), wc[0].vendor_err);
                    break;
                }
                r->pending = 0;
                done++;
                progressed = 1;
                coro_resume(&r->co);
            }
            if (err[0])
                break;
        }
        /* the clock is read every 64 passes only: its cost would be part of the loop */
        if ((++passes & 0x3F) == 0) {
            uint64_t t = now_ns();
            if (progressed)
                t_progress = t;
            progressed = 0;
            if (!run.stop && (t >= deadline || g_stop)) {
                run.stop = 1; /* the READs in flight still complete and are counted */
                res->truncated = 1;
            }
            if (!timed && t >= warm_deadline)
                warm = done; /* the warm-up ran out of time: start the clock now */
            if (t - t_progress > OP_TIMEOUT_NS) {
                snprintf(err, sizeof err, "no completion within 5 s");
                break;
            }
        }
    }
    uint64_t t1 = now_ns();
    if (err[0]) {
        snprintf(res->reason, sizeof res->reason, "%s", err);
        status = POINT_SKIP;
    } else if (!timed || done == done_t0 || t1 <= t0) {
        snprintf(res->reason, sizeof res->reason, "time limit reached before any completion");
        status = POINT_SKIP;
    } else {
        long n = done - done_t0;
        double ns = (double)(t1 - t0);
        res->done = n;
        res->elapsed_s = ns * 1e-9;
        res->mops = (double)n / ns * 1e3;
        res->gbps = (double)n * (double)op_bytes(pt) * 8.0 / ns;
        res->switch_impl = coro_impl_name(impl);
        res->polls_per_op = (double)polls / (double)n;
        res->empty_poll_fraction = polls > 0 ? (double)empty / (double)polls : 0.0;
    }
out:
    /* after an error some coroutines are still suspended: their stacks hold nothing else */
    for (int k = 0; k < made; k++)
        coro_free(&rd[k].co);
    free(rd);
    return status;
}

/* ---- one sweep point ---------------------------------------------------------------- */

static int fatal(struct client *c, const char *what, int rc)
{
    snprintf(c->fatal, sizeof c->fatal, "%s: %s", what, net_strerror(rc));
    return POINT_FATAL;
}

static int recv_reply(struct client *c, uint32_t want, uint8_t **pl, uint32_t *len)
{
    uint32_t type;
    int rc = net_recv_msg(c->fd, &type, pl, len, IO_TIMEOUT_S);
    if (rc != NET_OK)
        return fatal(c, "lost the server", rc);
    if (type != want) {
        free(*pl);
        *pl = NULL;
        snprintf(c->fatal, sizeof c->fatal, "protocol error: message %u instead of %u", type,
                 want);
        return POINT_FATAL;
    }
    return 0;
}

static uint64_t default_region(const struct point *pt)
{
    uint64_t r = op_bytes(pt) + 64u;
    if ((uint64_t)pt->addresses * 64u > r)
        r = (uint64_t)pt->addresses * 64u;
    return round_up(r, 4096);
}

static int run_point(struct client *c, const struct point *pt, struct result *res)
{
    memset(res, 0, sizeof *res);
    if (pt->batch < 1 || pt->batch > MAX_BATCH || pt->signal_every < 1 ||
        pt->depth < pt->batch || pt->depth < 1 || pt->threads < 1 ||
        pt->nqps % pt->threads != 0 ||
        (pt->signal_every % pt->batch != 0 && pt->batch % pt->signal_every != 0) ||
        (pt->coroutines > 0 && (pt->coroutines != pt->nqps || pt->threads != 1)) ||
        (is_rpc(pt) && (pt->nqps != 1 || pt->threads != 1 || pt->verb != V_SEND ||
                        pt->depth % pt->batch != 0 || pt->signal_every != pt->batch)) ||
        (is_arb(pt) && (pt->nqps != 2 || pt->threads != 1 || pt->verb != V_WRITE ||
                        pt->transport != TP_RC || pt->method != M_CQE || pt->depth != 1 ||
                        pt->payload != ARB_SMALL_BYTES || pt->inline_ ||
                        pt->region_bytes < arb_region_bytes(pt->behind)))) {
        snprintf(res->reason, sizeof res->reason, "inconsistent point parameters");
        return POINT_SKIP;
    }
    int mode = pt->method == M_PINGPONG || is_rpc(pt) ? MODE_ECHO
               : pt->verb == V_SEND                   ? MODE_SINK
                                                      : MODE_PASSIVE;
    struct msg_setup su;
    su.transport = (uint32_t)pt->transport;
    su.nqps = (uint32_t)pt->nqps;
    su.mode = (uint32_t)mode;
    /* rpc: a window's requests at most wait for the server's receives; twice that, so
     * that stragglers never find its queue empty */
    su.recv_depth = is_rpc(pt)            ? 2u * (uint32_t)pt->depth
                    : mode == MODE_SINK ? 512u
                    : mode == MODE_ECHO ? 16u
                                        : 1u;
    su.max_payload = op_bytes(pt);
    su.page_size = pt->page_size;
    su.region_bytes = pt->region_bytes ? pt->region_bytes : default_region(pt);

    struct wbuf b;
    wb_init(&b);
    msg_setup_put(&b, &su);
    int rc = b.err ? NET_ERR : net_send_msg(c->fd, MSG_SETUP, b.p, b.len, IO_TIMEOUT_S);
    wb_free(&b);
    if (rc != NET_OK)
        return fatal(c, "cannot send SETUP", rc);
    uint8_t *pl = NULL;
    uint32_t len = 0;
    if (recv_reply(c, MSG_SETUP_REPLY, &pl, &len))
        return POINT_FATAL;
    struct msg_setup_reply rep;
    rc = msg_setup_reply_get(pl, len, &rep);
    free(pl);
    if (rc != 0) {
        snprintf(c->fatal, sizeof c->fatal, "malformed SETUP_REPLY from the server");
        return POINT_FATAL;
    }
    if (rep.status != 0) {
        snprintf(res->reason, sizeof res->reason, "server: %s",
                 rep.message && *rep.message ? rep.message : "setup failed");
        msg_setup_reply_free(&rep);
        return POINT_SKIP;
    }
    copy_str(res->backing, sizeof res->backing, rep.backing);
    res->region_bytes = rep.region_bytes;
    struct target tgt = {rep.addr, rep.rkey, rep.region_bytes};

    int status = POINT_OK;
    char err[256] = "";
    struct mem lm;
    struct qpset qs;
    struct ibv_ah *ah = NULL;
    memset(&lm, 0, sizeof lm);
    memset(&qs, 0, sizeof qs);
    struct pingpong_bufs pb;
    pb.send_off = 0;
    pb.recv_off = round_up(pt->payload + 64u, 64);
    pb.recv_len = pt->payload + (pt->transport == TP_UD ? UD_GRH_BYTES : 0u);
    size_t llen = (size_t)(pb.recv_off + pb.recv_len + 64u);
    if (pt->coroutines > 0 && llen < 64u * (size_t)pt->coroutines)
        llen = 64u * (size_t)pt->coroutines; /* coroutine k READs into its own slot k */
    if (is_arb(pt) && llen < arb_region_bytes(pt->behind))
        llen = (size_t)arb_region_bytes(pt->behind); /* the large WRITE's source, too */

    uint32_t sq = (uint32_t)(pt->depth + pt->signal_every + pt->batch);
    uint32_t rq = mode == MODE_ECHO ? 4u : 1u;
    if (is_rpc(pt)) {
        /* a request's send slot outlives its window slot until its list's completion is
         * reaped (its echo may come first): room for two windows and two lists */
        sq = 2u * (uint32_t)(pt->depth + pt->batch);
        rq = (uint32_t)pt->depth; /* one receive per request in flight */
    }
    /* one CQ per posting thread, or one per QP for the coro sweep's per_qp points */
    int ncq = pt->cq_per_qp ? pt->nqps : pt->threads;
    if (mem_alloc(c->d, &lm, llen, 4096, err, sizeof err) != 0 ||
        qpset_create(c->d, &qs, pt->nqps, pt->transport, ncq, sq, rq,
                     pt->inline_ ? pt->payload : 0u, c->seed++, err, sizeof err) != 0) {
        snprintf(res->reason, sizeof res->reason, "%s", err);
        status = POINT_SKIP;
        goto teardown;
    }
    if (pt->inline_ && qs.max_inline < pt->payload) {
        snprintf(res->reason, sizeof res->reason,
                 "the provider grants %u B of inline data, fewer than %u B", qs.max_inline,
                 pt->payload);
        status = POINT_SKIP;
        goto teardown;
    }
    if (qpset_to_init(c->d, &qs, err, sizeof err) != 0) {
        snprintf(res->reason, sizeof res->reason, "%s", err);
        status = POINT_SKIP;
        goto teardown;
    }
    for (int i = 0; i < qs.n; i++)
        if (qp_connect(c->d, qs.qp[i], pt->transport, qs.psn[i], rep.qps.qpn[i], rep.qps.psn[i],
                       &c->peer, c->mtu, c->init_rd, c->dest_rd, err, sizeof err) != 0) {
            snprintf(res->reason, sizeof res->reason, "%s", err);
            status = POINT_SKIP;
            goto teardown;
        }
    if (pt->transport == TP_UD) {
        ah = ah_create(c->d, &c->peer);
        if (!ah) {
            snprintf(res->reason, sizeof res->reason, "ibv_create_ah failed: %s",
                     strerror(errno));
            status = POINT_SKIP;
            goto teardown;
        }
    }
    /* the echoes' receives (rpc: one per request in flight), before the server's RTR */
    for (uint32_t k = 0; mode == MODE_ECHO && k < (is_rpc(pt) ? qs.rq_depth : 1u); k++)
        if ((rc = post_client_recv(qs.qp[0], &lm, &pb)) != 0) {
            snprintf(res->reason, sizeof res->reason, "ibv_post_recv failed: %s",
                     strerror(rc));
            status = POINT_SKIP;
            goto teardown;
        }

    /* CONNECT: our QP numbers to the server, which then goes to RTR/RTS */
    {
        struct msg_qps mq;
        if (msg_qps_alloc(&mq, (uint32_t)qs.n) != 0) {
            snprintf(res->reason, sizeof res->reason, "out of memory");
            status = POINT_SKIP;
            goto teardown;
        }
        for (int i = 0; i < qs.n; i++) {
            mq.qpn[i] = qs.qp[i]->qp_num;
            mq.psn[i] = qs.psn[i];
        }
        wb_init(&b);
        msg_qps_put(&b, &mq);
        msg_qps_free(&mq);
        rc = b.err ? NET_ERR : net_send_msg(c->fd, MSG_CONNECT, b.p, b.len, IO_TIMEOUT_S);
        wb_free(&b);
        if (rc != NET_OK) {
            status = fatal(c, "cannot send CONNECT", rc);
            goto cleanup;
        }
        if (recv_reply(c, MSG_CONNECT_REPLY, &pl, &len)) {
            status = POINT_FATAL;
            goto cleanup;
        }
        struct msg_status st;
        rc = msg_status_get(pl, len, &st);
        free(pl);
        if (rc != 0) {
            snprintf(c->fatal, sizeof c->fatal, "malformed CONNECT_REPLY from the server");
            status = POINT_FATAL;
            goto cleanup;
        }
        if (st.status != 0) {
            snprintf(res->reason, sizeof res->reason, "server: %s",
                     st.message && *st.message ? st.message : "connect failed");
            free(st.message);
            status = POINT_SKIP;
            goto teardown;
        }
        free(st.message);
    }

    switch (pt->method) {
    case M_CQE:
        if (is_arb(pt))
            status = arb_cqe(c, pt, &qs, &lm, &tgt, res);
        else
            status = lat_cqe(c, pt, &qs, &lm, &tgt, res);
        break;
    case M_PINGPONG:
        status = lat_pingpong(c, pt, &qs, &lm, &pb, ah, rep.qps.qpn[0], res);
        break;
    default:
        if (is_rpc(pt))
            status = rpc_measure(c, pt, &qs, &lm, &pb, ah, rep.qps.qpn[0], res);
        else if (pt->coroutines > 0)
            status = coro_measure(c, pt, &qs, &lm, &tgt, res);
        else
            status = bw_measure(c, pt, &qs, &lm, &tgt, res);
        break;
    }

teardown:
    /* always: the server holds memory and QPs for this point */
    rc = net_send_msg(c->fd, MSG_TEARDOWN, NULL, 0, IO_TIMEOUT_S);
    if (rc != NET_OK) {
        status = fatal(c, "cannot send TEARDOWN", rc);
        goto cleanup;
    }
    if (recv_reply(c, MSG_TEARDOWN_REPLY, &pl, &len)) {
        status = POINT_FATAL;
        goto cleanup;
    }
    {
        struct msg_status st;
        if (msg_status_get(pl, len, &st) == 0) {
            if (st.status != 0 && status == POINT_OK) {
                snprintf(res->reason, sizeof res->reason, "server: %s",
                         st.message && *st.message ? st.message : "failed");
                status = POINT_SKIP;
            }
            free(st.message);
        }
        free(pl);
    }
cleanup:
    if (ah)
        ibv_destroy_ah(ah);
    qpset_destroy(&qs);
    mem_free(&lm);
    msg_setup_reply_free(&rep);
    return status;
}

/* ---- output -------------------------------------------------------------------------- */

static void point_fields(struct jw *w, const struct point *pt, const struct result *r)
{
    jw_kv_str(w, "sweep", sweep_name(pt->sweep));
    jw_kv_str(w, "verb", VERB_NAMES[pt->verb]);
    jw_kv_str(w, "transport", pt->transport == TP_UD ? "UD" : "RC");
    jw_kv_str(w, "method", METHOD_NAMES[pt->method]);
    jw_kv_int(w, "payload", op_bytes(pt));
    jw_kv_int(w, "qps", pt->nqps);
    jw_kv_int(w, "threads", pt->threads);
    jw_kv_int(w, "depth", pt->depth);
    jw_kv_int(w, "batch", pt->batch);
    jw_kv_int(w, "signal_every", pt->signal_every);
    jw_kv_bool(w, "inline", pt->inline_);
    jw_kv_int(w, "page_size", pt->page_size);
    jw_kv_str(w, "page_backing", r && r->backing[0] ? r->backing : NULL);
    jw_kv_uint(w, "region_bytes", r && r->region_bytes ? r->region_bytes
                                                       : (pt->region_bytes ? pt->region_bytes
                                                                           : default_region(pt)));
    jw_kv_int(w, "addresses", pt->addresses);
    jw_kv_bool(w, "random_offsets", pt->random_offsets);
    if (pt->coroutines > 0) {
        jw_kv_int(w, "coroutines", pt->coroutines);
        jw_kv_str(w, "cq_layout", pt->cq_per_qp ? "per_qp" : "shared");
    }
    if (is_arb(pt)) {
        jw_kv_uint(w, "behind", pt->behind);
        jw_kv_double(w, "gap_us", r ? r->gap_us : 0.0);
    }
}

static int emit(struct client *c)
{
    if (jw_write_line(&c->w, c->out) != 0) {
        snprintf(c->fatal, sizeof c->fatal, "cannot write the output: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static const char *point_label(const struct point *pt, char *buf, size_t len)
{
    char behind[48] = "";
    if (is_arb(pt) && pt->behind > 0)
        snprintf(behind, sizeof behind, " behind a %u-B WRITE", pt->behind);
    else if (is_arb(pt))
        snprintf(behind, sizeof behind, " alone");
    snprintf(buf, len, "[%s] %s %s %u B qps %d thr %d depth %d batch %d sig %d%s%s%s%s%s",
             sweep_name(pt->sweep), VERB_NAMES[pt->verb], pt->transport == TP_UD ? "UD" : "RC",
             op_bytes(pt), pt->nqps, pt->threads, pt->depth, pt->batch, pt->signal_every,
             pt->inline_ ? " inline" : "", pt->page_size == HUGE_2M ? " 2MiB-pages" : "",
             pt->addresses > 1 ? " many-addr" : "",
             pt->coroutines > 0 ? (pt->cq_per_qp ? " coroutines, per-QP CQs"
                                                 : " coroutines, shared CQ")
                                : "",
             behind);
    return buf;
}

/* Run a point and write its line. Returns POINT_OK, POINT_SKIP or POINT_FATAL. */
static int do_point(struct client *c, const struct point *pt)
{
    struct result r;
    char label[200];
    if (g_stop)
        return POINT_FATAL;
    int st = run_point(c, pt, &r);
    if (st == POINT_FATAL)
        return st;
    struct jw *w = &c->w;
    jw_obj_begin(w);
    if (st == POINT_OK) {
        jw_kv_str(w, "type", "measurement");
        point_fields(w, pt, &r);
        jw_kv_int(w, "iters", r.done);
        jw_kv_double(w, "elapsed_s", r.elapsed_s);
        jw_kv_bool(w, "truncated", r.truncated);
        if (pt->method == M_BW) {
            jw_kv_double(w, "mops", r.mops);
            jw_kv_double(w, "gbps", r.gbps);
            if (pt->coroutines > 0) {
                jw_kv_str(w, "switch_impl", r.switch_impl);
                jw_kv_double(w, "polls_per_op", r.polls_per_op);
                jw_kv_double(w, "empty_poll_fraction", r.empty_poll_fraction);
            }
            if (is_rpc(pt))
                jw_kv_int(w, "lost", r.lost);
        } else {
            jw_key(w, "lat_us");
            jw_obj_begin(w);
            jw_kv_double(w, "min", r.lat.min);
            jw_kv_double(w, "median", r.lat.median);
            jw_kv_double(w, "avg", r.lat.avg);
            jw_kv_double(w, "stdev", r.lat.stdev);
            jw_kv_double(w, "p99", r.lat.p99);
            jw_kv_double(w, "p999", r.lat.p999);
            jw_kv_double(w, "max", r.lat.max);
            jw_obj_end(w);
            jw_kv_str(w, "lat_convention", "rtt");
            if (pt->method == M_PINGPONG)
                jw_kv_int(w, "lost", r.lost);
        }
        c->points++;
        if (pt->coroutines > 0)
            note(c->a, "%s: %.3f Mops, %.3f polls/op, %.0f%% empty, %s switch%s",
                 point_label(pt, label, sizeof label), r.mops, r.polls_per_op,
                 r.empty_poll_fraction * 100.0, r.switch_impl,
                 r.truncated ? " (time limit)" : "");
        else if (is_rpc(pt))
            note(c->a, "%s: %.3f Mops %.2f Gb/s, %ld lost%s",
                 point_label(pt, label, sizeof label), r.mops, r.gbps, r.lost,
                 r.truncated ? " (time limit)" : "");
        else if (pt->method == M_BW)
            note(c->a, "%s: %.3f Mops %.2f Gb/s%s", point_label(pt, label, sizeof label), r.mops,
                 r.gbps, r.truncated ? " (time limit)" : "");
        else
            note(c->a, "%s: median %.2f us, p99 %.2f us (%ld samples)%s",
                 point_label(pt, label, sizeof label), r.lat.median, r.lat.p99, r.done,
                 r.truncated ? " (time limit)" : "");
    } else {
        jw_kv_str(w, "type", "skip");
        point_fields(w, pt, &r);
        jw_kv_str(w, "reason", r.reason);
        c->skipped++;
        note(c->a, "%s: skipped: %s", point_label(pt, label, sizeof label), r.reason);
    }
    jw_obj_end(w);
    return emit(c) ? POINT_FATAL : st;
}

/* ---- sweeps ---------------------------------------------------------------------------- */

static struct point mk(int sweep, int verb, int transport, int method, uint32_t payload,
                       long iters)
{
    struct point p;
    memset(&p, 0, sizeof p);
    p.sweep = sweep;
    p.verb = verb;
    p.transport = transport;
    p.method = method;
    p.payload = payload;
    p.nqps = 1;
    p.threads = 1;
    p.depth = 1;
    p.batch = 1;
    p.signal_every = 1;
    p.page_size = 4096;
    p.addresses = 1;
    p.iters = iters;
    return p;
}

#define RUN(c, pt)                                                                            \
    do {                                                                                      \
        if (do_point((c), (pt)) == POINT_FATAL)                                               \
            return -1;                                                                        \
    } while (0)

static int sweep_lat(struct client *c)
{
    long it = c->a->iters;
    int verbs[] = {V_READ, V_WRITE};
    for (int v = 0; v < 2; v++)
        for (uint32_t s = 2; s <= 65536; s *= 2) {
            struct point p = mk(SW_LAT, verbs[v], TP_RC, M_CQE, s, it);
            RUN(c, &p);
        }
    for (uint32_t s = 2; s <= 65536; s *= 2) {
        struct point p = mk(SW_LAT, V_SEND, TP_RC, M_PINGPONG, s, it);
        RUN(c, &p);
    }
    uint32_t ud_max = (uint32_t)ib_mtu_enum_to_bytes(c->mtu); /* a UD message fits one MTU */
    for (uint32_t s = 2; s <= ud_max && s <= 65536; s *= 2) {
        struct point p = mk(SW_LAT, V_SEND, TP_UD, M_PINGPONG, s, it);
        RUN(c, &p);
    }
    struct point cas = mk(SW_LAT, V_CAS, TP_RC, M_CQE, 8, it);
    RUN(c, &cas);
    struct point faa = mk(SW_LAT, V_FAA, TP_RC, M_CQE, 8, it);
    RUN(c, &faa);
    return 0;
}

static struct point mk_bw(int sweep, int verb, uint32_t payload, long iters, int depth, int sig)
{
    struct point p = mk(sweep, verb, TP_RC, M_BW, payload, iters);
    p.depth = depth;
    p.signal_every = sig;
    return p;
}

static int max_depth(const struct client *c)
{
    int m = c->d->attr.max_qp_wr - 2 * MAX_BATCH;
    return m < 1 ? 1 : m;
}

static int sweep_bw(struct client *c)
{
    int verbs[] = {V_READ, V_WRITE, V_SEND};
    int depth = max_depth(c) < 128 ? max_depth(c) : 128;
    int sig = depth < 16 ? 1 : 16;
    for (int v = 0; v < 3; v++)
        for (uint32_t s = 2; s <= (1u << 20); s *= 2) {
            struct point p = mk_bw(SW_BW, verbs[v], s, c->a->bw_iters, depth, sig);
            RUN(c, &p);
        }
    return 0;
}

/* Posting threads of the qps sweep's second throughput point: --qps-threads, or the
 * default for the CPUs this process may run on (its affinity mask, so that numactl and
 * taskset count: threads sharing a core would measure the scheduler, not the NIC). */
static int qps_threads_of(const struct probe_args *a)
{
    if (a->qps_threads > 0)
        return a->qps_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        cpus = CPU_COUNT(&set);
    return qps_threads_default(cpus);
}

/* At every QP count n: a latency point with the QPs taking turns, a throughput point from
 * one posting thread (round robin over all n QPs), and one from T = --qps-threads posting
 * threads, each owning n/T of the QPs (n rounded down to a multiple of T; none while
 * n < T). One thread stays CPU-bound at any QP count on a ConnectX-3 (its 4 processing
 * units fetch contexts faster than one core posts), so only the T-thread points show a
 * QP-context miss that holds the processing unit (the rate falls once the QPs outnumber
 * the NIC's cache). The threads own disjoint QPs as real multi-threaded clients do (a QP
 * shared between threads serialises their posts on its lock) and as the simulator's
 * experiment does; the NIC still sees every QP once in about n operations, since the
 * threads post concurrently, so the cache holds the same QPs it would for one thread. */
static int sweep_qps(struct client *c)
{
    long lim = c->a->max_qps;
    long dev_lim = (long)c->d->attr.max_qp - 64;
    long peer_lim = (long)c->peer.max_qp - 64;
    if (dev_lim < lim)
        lim = dev_lim;
    if (peer_lim < lim)
        lim = peer_lim;
    if (lim < 1)
        lim = 1;
    int T = qps_threads_of(c->a);
    for (long n = 1;; n *= 2) {
        if (n > lim)
            n = lim;
        long ops = c->a->bw_iters > n * 16 ? c->a->bw_iters : n * 16;
        /* latency with the QPs taking turns: a step where they outgrow the QP cache */
        struct point l = mk(SW_QPS, V_READ, TP_RC, M_CQE, 32, c->a->iters);
        l.nqps = (int)n;
        int st = do_point(c, &l);
        if (st == POINT_FATAL)
            return -1;
        if (st == POINT_SKIP)
            break; /* more QPs will not fit either */
        struct point p = mk_bw(SW_QPS, V_READ, 32, ops, qps_sweep_depth(n), 1);
        p.nqps = (int)n;
        st = do_point(c, &p);
        if (st == POINT_FATAL)
            return -1;
        if (st == POINT_SKIP)
            break; /* more QPs will not fit either */
        long nt = qps_threaded_count(n, T);
        if (nt > 0) {
            long opt = nt * 16 > c->a->bw_iters ? nt * 16 : c->a->bw_iters;
            /* the same depth per QP and the same total operations as the one-thread point
             * (pt.iters counts per thread; at least 16 per QP) */
            struct point q = mk_bw(SW_QPS, V_READ, 32, (opt + T - 1) / T, qps_sweep_depth(nt),
                                   1);
            q.nqps = (int)nt;
            q.threads = T;
            /* a skip here (e.g. a time limit too short for T threads) does not end the
             * sweep: the same QPs worked from one thread */
            RUN(c, &q);
        }
        if (n == lim)
            break;
    }
    return 0;
}

static int sweep_threads(struct client *c)
{
    int maxt = c->a->max_threads;
    if (maxt <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        maxt = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    }
    int verbs[] = {V_READ, V_WRITE};
    for (int v = 0; v < 2; v++)
        for (int t = 1;; t *= 2) {
            if (t > maxt)
                t = maxt;
            struct point p = mk_bw(SW_THREADS, verbs[v], 32, c->a->bw_iters, 16, 1);
            p.nqps = t;
            p.threads = t;
            RUN(c, &p);
            if (t == maxt)
                break;
        }
    return 0;
}

static int sweep_depth(struct client *c)
{
    int verbs[] = {V_READ, V_WRITE};
    for (int v = 0; v < 2; v++)
        for (int d = 1; d <= 256 && d <= max_depth(c); d *= 2) {
            struct point p = mk_bw(SW_DEPTH, verbs[v], 32, c->a->bw_iters, d, 1);
            RUN(c, &p);
        }
    return 0;
}

/* At every batch size (WRs per ibv_post_send, one doorbell) a throughput point from one
 * posting thread on one QP and, with T = --qps-threads > 1, one from T threads each
 * owning its own QP and CQ. One thread is bound by its own posting; T threads load the
 * NIC, so how their rate moves with the batch shows what a doorbell and its WQE list
 * cost the NIC (a list is fetched by DMA, a single WQE may come by BlueFlame). */
static int sweep_batch(struct client *c)
{
    int verbs[] = {V_READ, V_WRITE};
    int T = qps_threads_of(c->a);
    for (int v = 0; v < 2; v++)
        for (int bsz = 1; bsz <= MAX_BATCH; bsz *= 2) {
            /* signal every 64 throughout, so only the doorbell batching changes */
            struct point p = mk_bw(SW_BATCH, verbs[v], 32, c->a->bw_iters, 128, 64);
            p.batch = bsz;
            RUN(c, &p);
            if (T > 1) {
                /* the same operations in all (pt.iters counts per thread) */
                struct point q = mk_bw(SW_BATCH, verbs[v], 32, (c->a->bw_iters + T - 1) / T,
                                       128, 64);
                q.batch = bsz;
                q.nqps = T;
                q.threads = T;
                RUN(c, &q);
            }
        }
    return 0;
}

static int sweep_signal(struct client *c)
{
    int verbs[] = {V_READ, V_WRITE};
    for (int v = 0; v < 2; v++)
        for (int s = 1; s <= 64; s *= 2) {
            struct point p = mk_bw(SW_SIGNAL, verbs[v], 32, c->a->bw_iters, 128, s);
            RUN(c, &p);
        }
    return 0;
}

static int sweep_inline(struct client *c)
{
    for (uint32_t s = 8; s <= MAX_INLINE_PROBED; s *= 2)
        for (int inl = 0; inl <= 1; inl++) {
            struct point p = mk(SW_INLINE, V_WRITE, TP_RC, M_CQE, s, c->a->iters);
            p.inline_ = inl;
            RUN(c, &p);
            struct point q = mk_bw(SW_INLINE, V_WRITE, s, c->a->bw_iters, 128, 16);
            q.inline_ = inl;
            RUN(c, &q);
        }
    return 0;
}

static int sweep_atomics(struct client *c)
{
    static const int ADDRS[] = {1, 4, 16, 64, 256, 1024, 4096};
    int verbs[] = {V_CAS, V_FAA};
    for (int v = 0; v < 2; v++)
        for (size_t k = 0; k < sizeof ADDRS / sizeof ADDRS[0]; k++) {
            struct point p = mk_bw(SW_ATOMICS, verbs[v], 8, c->a->bw_iters, 16, 1);
            p.nqps = 4;
            p.addresses = ADDRS[k];
            RUN(c, &p);
        }
    return 0;
}

static int sweep_pages(struct client *c)
{
    uint64_t cap = (uint64_t)c->a->region_mb << 20;
    uint64_t regions[5];
    int nr = 0;
    static const uint64_t R[] = {8ull << 20, 64ull << 20, 512ull << 20};
    for (size_t i = 0; i < 3; i++)
        if (R[i] < cap)
            regions[nr++] = R[i];
    regions[nr++] = round_up((size_t)cap, HUGE_2M);
    uint32_t pages[] = {4096, HUGE_2M};
    for (int pg = 0; pg < 2; pg++)
        for (int i = 0; i < nr; i++) {
            struct point p = mk_bw(SW_PAGES, V_READ, 32, c->a->bw_iters, 16, 1);
            p.page_size = pages[pg];
            p.region_bytes = regions[i];
            p.random_offsets = 1;
            RUN(c, &p);
        }
    return 0;
}

/* The bare switch first (no RDMA: what one resume+yield pair costs on this CPU), then
 * READs posted from K coroutines on one thread, one QP each, 64 B each to its own slot,
 * the completions collected through one shared CQ or a CQ per QP (SCHEMA.md). */
#define SWITCH_WARMUP 10000L
#define SWITCH_ITERS 1000000L

static int sweep_coro(struct client *c)
{
    static const int SWITCH_K[] = {1, 2, 32};
    static const int READ_K[] = {1, 2, 4, 8, 16, 32};
    int impl = coro_default_impl();
    for (size_t i = 0; i < sizeof SWITCH_K / sizeof SWITCH_K[0]; i++) {
        if (g_stop)
            return -1;
        int k = SWITCH_K[i];
        double elapsed = 0;
        if (coro_bench_switch(k, impl, SWITCH_WARMUP, SWITCH_ITERS, &elapsed) != 0) {
            snprintf(c->fatal, sizeof c->fatal,
                     "cannot create %d coroutines (%u B stacks): out of memory", k,
                     CORO_STACK_BYTES);
            return -1;
        }
        struct jw *w = &c->w;
        jw_obj_begin(w);
        jw_kv_str(w, "type", "switch");
        jw_kv_str(w, "switch_impl", coro_impl_name(impl));
        jw_kv_int(w, "coroutines", k);
        jw_kv_int(w, "iters", SWITCH_ITERS);
        jw_kv_double(w, "elapsed_s", elapsed);
        jw_kv_double(w, "ns_per_switch", elapsed * 1e9 / (double)SWITCH_ITERS);
        jw_obj_end(w);
        if (emit(c) != 0)
            return -1;
        note(c->a, "[coro] bare %s switch, %d coroutine%s: %.1f ns per resume+yield",
             coro_impl_name(impl), k, k == 1 ? "" : "s", elapsed * 1e9 / (double)SWITCH_ITERS);
    }
    for (size_t i = 0; i < sizeof READ_K / sizeof READ_K[0]; i++)
        for (int per_qp = 0; per_qp <= 1; per_qp++) {
            struct point p = mk_bw(SW_CORO, V_READ, 64, c->a->bw_iters, 1, 1);
            p.nqps = READ_K[i];
            p.addresses = READ_K[i];
            p.coroutines = READ_K[i];
            p.cq_per_qp = per_qp;
            RUN(c, &p);
        }
    return 0;
}

/* Two-sided RPCs as DrTM+H and FaSST issue them: one thread keeps a window of W SEND
 * requests in flight to the server, which echoes each one, posting them in lists of B
 * (SCHEMA.md, rpc measurements). UD first (payloads up to the path MTU), then RC; inline
 * up to the inline sweep's largest payload. */
static int sweep_rpc(struct client *c)
{
    static const int TPS[] = {TP_UD, TP_RC};
    uint32_t ud_max = (uint32_t)ib_mtu_enum_to_bytes(c->mtu); /* a UD message fits one MTU */
    for (size_t t = 0; t < sizeof TPS / sizeof TPS[0]; t++) {
        struct rpc_shape shapes[RPC_MAX_POINTS];
        int n = rpc_points(TPS[t] == TP_UD ? ud_max : UINT32_MAX, shapes);
        for (int i = 0; i < n; i++) {
            struct point p = mk(SW_RPC, V_SEND, TPS[t], M_BW, shapes[i].payload,
                                c->a->bw_iters);
            p.depth = shapes[i].window;
            p.batch = shapes[i].batch;
            p.signal_every = shapes[i].batch;
            p.inline_ = shapes[i].payload <= MAX_INLINE_PROBED;
            RUN(c, &p);
        }
    }
    return 0;
}

/* The NIC's transmit arbitration: a 64-B WRITE on QP 1 posted 2 us after a WRITE of
 * `behind` bytes on QP 0 (none at the first point), one thread, both QPs on one send CQ,
 * timed from its post to its completion (SCHEMA.md, arb measurements). A NIC that
 * finishes the large message before it sends anything of another QP (per-message
 * arbitration, as ConnectX-3 starved small messages behind large ones) shows the large
 * WRITE's transmission time in the 64-B WRITE's latency; one that interleaves packets
 * shows about one packet's. */
static int sweep_arb(struct client *c)
{
    uint32_t behind[ARB_POINTS];
    int n = arb_points(behind);
    for (int i = 0; i < n; i++) {
        struct point p = mk(SW_ARB, V_WRITE, TP_RC, M_CQE, ARB_SMALL_BYTES, c->a->iters);
        p.nqps = 2;
        p.behind = behind[i];
        p.region_bytes = arb_region_bytes(behind[i]);
        RUN(c, &p);
    }
    return 0;
}

typedef int (*sweep_fn)(struct client *);
static const sweep_fn SWEEPS[SW_COUNT] = {
    sweep_lat, sweep_bw, sweep_qps, sweep_threads, sweep_depth,
    sweep_batch, sweep_signal, sweep_inline, sweep_atomics, sweep_pages,
    sweep_coro, sweep_rpc, sweep_arb,
};

/* ---- session ------------------------------------------------------------------------- */

static void write_header(struct client *c)
{
    const struct probe_args *a = c->a;
    struct jw *w = &c->w;
    char ts[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    jw_obj_begin(w);
    jw_kv_str(w, "type", "probe");
    jw_kv_int(w, "schema", PROBE_SCHEMA);
    jw_kv_str(w, "probe_version", PROBE_VERSION);
    jw_kv_str(w, "started", ts);
    jw_kv_str(w, "peer", a->host);
    jw_kv_int(w, "port", a->port);
    jw_kv_int(w, "path_mtu", ib_mtu_enum_to_bytes(c->mtu));
    jw_kv_int(w, "max_rd_atomic", c->init_rd);
    jw_key(w, "args");
    jw_obj_begin(w);
    jw_key(w, "sweeps");
    jw_arr_begin(w);
    for (int i = 0; i < SW_COUNT; i++)
        if (a->sweeps & (1u << i))
            jw_str(w, sweep_name(i));
    jw_arr_end(w);
    jw_kv_int(w, "iters", a->iters);
    jw_kv_int(w, "bw_iters", a->bw_iters);
    jw_kv_double(w, "time_limit_s", a->time_limit);
    jw_kv_int(w, "max_qps", a->max_qps);
    jw_kv_int(w, "max_threads", a->max_threads);
    jw_kv_int(w, "qps_threads", qps_threads_of(a));
    jw_kv_int(w, "region_mb", a->region_mb);
    jw_obj_end(w);
    jw_obj_end(w);
}

static int hello(struct client *c, char **server_info)
{
    struct msg_hello h;
    memset(&h, 0, sizeof h);
    h.version = PROTO_VERSION;
    h.port = c->d->local;
    double idle = c->a->time_limit * 4 + 120;
    h.idle_timeout_s = idle > 86400 ? 86400u : (uint32_t)idle;
    struct wbuf b;
    wb_init(&b);
    msg_hello_put(&b, &h);
    int rc = b.err ? NET_ERR : net_send_msg(c->fd, MSG_HELLO, b.p, b.len, IO_TIMEOUT_S);
    wb_free(&b);
    if (rc != NET_OK)
        return fatal(c, "cannot send HELLO", rc);
    uint8_t *pl = NULL;
    uint32_t len = 0;
    /* a short wait: a peer that is not an rnicsim-probe server must not stall us */
    uint32_t type;
    rc = net_recv_msg(c->fd, &type, &pl, &len, 15.0);
    if (rc != NET_OK) {
        snprintf(c->fatal, sizeof c->fatal,
                 "%s:%d did not answer as an " PROBE_NAME " server (%s)", c->a->host,
                 c->a->port, net_strerror(rc));
        return POINT_FATAL;
    }
    if (type != MSG_HELLO_REPLY) {
        free(pl);
        snprintf(c->fatal, sizeof c->fatal, "the peer is not an " PROBE_NAME " server");
        return POINT_FATAL;
    }
    struct msg_hello r;
    rc = msg_hello_get(pl, len, &r);
    free(pl);
    if (rc != 0) {
        snprintf(c->fatal, sizeof c->fatal, "malformed HELLO_REPLY (is the peer an "
                                            PROBE_NAME " server?)");
        return POINT_FATAL;
    }
    if (r.version != PROTO_VERSION) {
        free(r.info);
        snprintf(c->fatal, sizeof c->fatal,
                 "the server speaks protocol %u, this client %u: use the same probe build",
                 r.version, PROTO_VERSION);
        return POINT_FATAL;
    }
    if (r.port.link_layer != c->d->local.link_layer) {
        free(r.info);
        snprintf(c->fatal, sizeof c->fatal,
                 "link layers differ: this port is %s, the server's is %s",
                 c->d->local.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB",
                 r.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB");
        return POINT_FATAL;
    }
    c->peer = r.port;
    *server_info = r.info;
    return 0;
}

int run_client(const struct probe_args *a, struct rdev *d, int fd)
{
    struct client c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.d = d;
    c.fd = fd;
    c.seed = (uint32_t)(now_ns() ^ ((uint64_t)getpid() << 16));
    jw_init(&c.w);
    double t0 = now_s();
    char *server_info = NULL;
    int ok = hello(&c, &server_info) == 0;
    if (!ok && !g_stop) {
        /* the handshake failed: the peer is unreachable or not a probe server */
        fprintf(stderr, PROBE_NAME ": %s\n", c.fatal[0] ? c.fatal : "handshake failed");
        free(server_info);
        jw_free(&c.w);
        return 2;
    }
    FILE *out = stdout;
    if (ok && a->out[0]) {
        out = fopen(a->out, "w");
        if (!out) {
            fprintf(stderr, PROBE_NAME ": cannot write %s: %s\n", a->out, strerror(errno));
            free(server_info);
            net_send_msg(fd, MSG_BYE, NULL, 0, 5.0);
            jw_free(&c.w);
            return 2;
        }
    }
    c.out = out;
    if (ok) {
        c.mtu = path_mtu(&d->local, &c.peer);
        uint32_t init_rd = d->local.max_qp_init_rd_atom;
        if (init_rd > c.peer.max_qp_rd_atom)
            init_rd = c.peer.max_qp_rd_atom;
        c.init_rd = init_rd > 16 ? 16 : (int)init_rd;
        c.dest_rd = d->local.max_qp_rd_atom > 16 ? 16 : (int)d->local.max_qp_rd_atom;
        write_header(&c);
        ok = emit(&c) == 0;
        c.header_written = ok;
        char *mine = info_lines(d, "client");
        if (ok && (fputs(mine ? mine : "", out) == EOF ||
                   fputs(server_info ? server_info : "", out) == EOF || fflush(out) != 0)) {
            snprintf(c.fatal, sizeof c.fatal, "cannot write the output: %s", strerror(errno));
            ok = 0;
        }
        free(mine);
        note(a, "connected to %s:%d; path MTU %d B; sweeps follow", a->host, a->port,
             ib_mtu_enum_to_bytes(c.mtu));
    }
    free(server_info);
    for (int i = 0; ok && i < SW_COUNT; i++)
        if (a->sweeps & (1u << i))
            if (SWEEPS[i](&c) != 0)
                ok = 0;
    const char *status = g_stop ? "interrupted" : ok ? "ok" : "error";
    if (c.header_written) {
        jw_reset(&c.w);
        jw_obj_begin(&c.w);
        jw_kv_str(&c.w, "type", "end");
        jw_kv_str(&c.w, "status", status);
        jw_kv_int(&c.w, "points", c.points);
        jw_kv_int(&c.w, "skipped", c.skipped);
        jw_kv_double(&c.w, "elapsed_s", now_s() - t0);
        if (!ok && !g_stop)
            jw_kv_str(&c.w, "message", c.fatal);
        jw_obj_end(&c.w);
        jw_write_line(&c.w, out);
    }
    if (ok || g_stop)
        net_send_msg(fd, MSG_BYE, NULL, 0, 5.0);
    jw_free(&c.w);
    if (out != stdout && fclose(out) != 0 && ok) {
        snprintf(c.fatal, sizeof c.fatal, "cannot write %.400s: %s", a->out, strerror(errno));
        ok = 0;
    }
    if (g_stop) {
        note(a, "interrupted after %d points", c.points);
        return 130;
    }
    if (!ok) {
        fprintf(stderr, PROBE_NAME ": %s\n", c.fatal[0] ? c.fatal : "failed");
        return 1;
    }
    note(a, "done: %d points, %d skipped, %.1f s", c.points, c.skipped, now_s() - t0);
    return 0;
}
