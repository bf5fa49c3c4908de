/* plan.c - see plan.h. */
#include "plan.h"

int qps_threads_default(long cpus)
{
    if (cpus < 1)
        cpus = 1;
    return cpus < QPS_THREADS_DEFAULT ? (int)cpus : QPS_THREADS_DEFAULT;
}

int qps_sweep_depth(long nqps)
{
    long d = nqps > 0 ? 256 / nqps : 16;
    return d < 2 ? 2 : d > 16 ? 16 : (int)d;
}

long qps_threaded_count(long n, int threads)
{
    if (threads < 2 || n < threads)
        return 0;
    return n / threads * threads;
}

static int block_size(int n, int nblocks)
{
    return nblocks > 0 ? (n + nblocks - 1) / nblocks : n;
}

void qp_block_range(int n, int nblocks, int b, int *first, int *count)
{
    int per = block_size(n, nblocks);
    long lo = (long)b * per, hi = lo + per;
    if (lo > n)
        lo = n;
    if (hi > n)
        hi = n;
    *first = (int)lo;
    *count = (int)(hi - lo);
}

int qp_block_of(int n, int nblocks, int i)
{
    int per = block_size(n, nblocks);
    return per > 0 ? i / per : 0;
}

long coro_warmup(long ops, int coroutines)
{
    long w = ops / 10;
    if (w > 10000)
        w = 10000;
    return w < coroutines ? coroutines : w;
}
