/* plan.h - device-free arithmetic of the sweeps: which points the qps sweep measures, how
 * a point's QPs are split over its posting threads, the coro sweep's warm-up (unit tested
 * by test_probe.c). */
#ifndef RNP_PLAN_H
#define RNP_PLAN_H

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

#endif
