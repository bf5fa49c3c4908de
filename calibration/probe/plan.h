/* plan.h - device-free arithmetic of the sweeps: which points the qps sweep measures, how
 * a point's QPs are split over its posting threads, the coro sweep's warm-up, the rpc
 * sweep's points and its window of outstanding requests, the arb sweep's points and
 * buffer layout (unit tested by test_probe.c). */
#ifndef RNP_PLAN_H
#define RNP_PLAN_H

#include <stdint.h>

/* Default of --qps-threads: 4 posting threads (a ConnectX-3 has 4 processing units; 4
 * cores post faster than they fetch QP contexts when a miss stalls), never more than the
 * `cpus` the probe may run on (spinning threads sharing a core would measure the
 * scheduler). `cpus` < 1 counts as 1. */
#define QPS_THREADS_DEFAULT 4
int qps_threads_default(long cpus);

/* Outstanding WRs per QP at a qps-sweep point of `nqps` QPs: max(2, min(16, 256 / nqps)),
 * so about 256 operations are in flight in total once there are 16 QPs or more. */
int qps_sweep_depth(long nqps);

/* QPs of the several-thread throughput point at the qps sweep's step `n` (1, 2, 4 ..):
 * n rounded down to a multiple of `threads` (every thread owns the same number of QPs),
 * or 0 when there is no such point (threads < 2, or fewer QPs than threads: each thread
 * needs a QP of its own). */
long qps_threaded_count(long n, int threads);

/* The QPs of a point are split into `nblocks` contiguous blocks, one per posting thread
 * and CQ: block b holds QPs [first, first + count). Blocks have ceil(n / nblocks) QPs, the
 * last ones fewer (or none) when nblocks does not divide n; the probe's points always
 * have n a multiple of their thread count, so every thread gets n / threads QPs. This is
 * the split of the simulator's experiment (workloads/perftest.py: QP i belongs to thread
 * i // (qps / threads)). qp_block_of(i) is the block of QP i; both agree for every i. */
void qp_block_range(int n, int nblocks, int b, int *first, int *count);
int qp_block_of(int n, int nblocks, int i);

/* Untimed completions at the start of a coro-sweep point of `ops` timed operations and
 * `coroutines` coroutines: min(10000, ops / 10), as the throughput points' warm-up, but
 * at least one per coroutine, so that every coroutine (and its QP) has run before the
 * clock starts. */
long coro_warmup(long ops, int coroutines);

/* ---- the rpc sweep (two-sided SEND echo RPCs) ---- */

/* One rpc point: `window` requests outstanding at most, posted in lists of `batch`
 * (batch divides window), each a SEND of `payload` bytes. */
struct rpc_shape {
    int window;
    int batch;
    uint32_t payload;
};

#define RPC_MAX_POINTS 14

/* The rpc sweep's points of one transport, in run order: payload 64, batch 1, window 1,
 * 2, 4 .. 64; payload 64, batch = window for window 4, 16, 64; window 16, batch 1,
 * payload 16, 256, 1024, 4096. Points whose payload exceeds `max_payload` (UD: the path
 * MTU) are left out. Writes at most RPC_MAX_POINTS shapes to `out`; returns how many. */
int rpc_points(uint32_t max_payload, struct rpc_shape *out);

/* Echoes received before the clock starts at an rpc point of `ops` timed echoes and a
 * window of `window`: min(10000, ops / 10) as the throughput points' warm-up, but at
 * least a full window. */
long rpc_warmup(long ops, int window);

/* Timed echoes of an rpc point: `ops` rounded up to a multiple of `batch` (requests go
 * out in lists of exactly `batch`, as the throughput points round theirs). */
long rpc_timed_ops(long ops, int batch);

/* The requests of an rpc point in flight. Each request gets a slot of a table of `ring`
 * slots (the smallest power of two >= 2 x window) and a sequence number, the SEND's
 * 32-bit immediate data that the server's echo copies back: the next number above the
 * last one given out whose slot (number & (ring - 1)) is free. While echoes come back in
 * order the numbers are consecutive; a request whose echo is overdue keeps its slot and
 * the numbers skip over it, so the other requests go on flowing around it. An echo
 * matches the request in flight in slot imm & (ring - 1) if that one's number is imm. */
struct rpc_window {
    int window;          /* W: requests in flight at most */
    uint32_t ring;       /* slots */
    uint32_t next;       /* sequence number to try next */
    uint32_t *seq;       /* per slot: the sequence number of its request */
    uint64_t *posted_ns; /* per slot: when its request was posted */
    unsigned char *busy; /* per slot: its request is in flight */
    int outstanding;     /* in flight */
};

/* 0, or -1 when out of memory. */
int rpc_window_init(struct rpc_window *w, int window);
void rpc_window_free(struct rpc_window *w);
/* 1 if `n` more requests may be posted now (at most `window` in flight). */
int rpc_window_room(const struct rpc_window *w, int n);
/* Record a request posted at now_ns (the caller checked the room); its sequence number. */
uint32_t rpc_window_post(struct rpc_window *w, uint64_t now_ns);
/* An echo carrying sequence number `imm` arrived: 1 if it answers a request in flight
 * (which leaves the window), 0 if not (a late echo of a request already given up on, or
 * an unknown one). */
int rpc_window_echo(struct rpc_window *w, uint32_t imm);
/* Give up on every request in flight posted more than timeout_ns before now_ns: they
 * leave the window. Returns how many (the point's lost echoes). Scans every slot. */
long rpc_window_expire(struct rpc_window *w, uint64_t now_ns, uint64_t timeout_ns);

/* ---- the arb sweep (a 64-B WRITE posted 2 us after a large WRITE on another QP) ---- */

#define ARB_POINTS 4
#define ARB_GAP_NS 2000u /* from the large WRITE's post to the small one's [ns] */
#define ARB_SMALL_BYTES 64u /* the timed WRITE, on QP 1, at offset 0 of both regions */
/* The large WRITE (on QP 0) reads and writes `behind` bytes from this offset of both
 * regions on: the next page, so that the two WRITEs share no page. */
#define ARB_BIG_OFFSET 4096u

/* The arb sweep's `behind` sizes (bytes of the large WRITE), in run order: 0 (the 64-B
 * WRITE alone), 65536, 262144, 1048576. Writes ARB_POINTS sizes to `out`; returns how many. */
int arb_points(uint32_t *out);

/* Bytes of the regions of an arb point (the server's, written, and the client's, read):
 * ARB_BIG_OFFSET + behind rounded up to whole 4 KiB pages, one page when behind is 0. */
uint64_t arb_region_bytes(uint32_t behind);

#endif
