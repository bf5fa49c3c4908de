/* plan.c - see plan.h. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

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

int rpc_points(uint32_t max_payload, struct rpc_shape *out)
{
    static const struct rpc_shape ALL[RPC_MAX_POINTS] = {
        {1, 1, 64},   {2, 1, 64},    {4, 1, 64},    {8, 1, 64},   {16, 1, 64},
        {32, 1, 64},  {64, 1, 64},   {4, 4, 64},    {16, 16, 64}, {64, 64, 64},
        {16, 1, 16},  {16, 1, 256},  {16, 1, 1024}, {16, 1, 4096},
    };
    int n = 0;
    for (int i = 0; i < RPC_MAX_POINTS; i++)
        if (ALL[i].payload <= max_payload)
            out[n++] = ALL[i];
    return n;
}

long rpc_warmup(long ops, int window)
{
    long w = ops / 10;
    if (w > 10000)
        w = 10000;
    return w < window ? window : w;
}

long rpc_timed_ops(long ops, int batch)
{
    if (batch < 1)
        batch = 1;
    if (ops < 1)
        ops = 1;
    return (ops + batch - 1) / batch * batch;
}

int rpc_window_init(struct rpc_window *w, int window)
{
    memset(w, 0, sizeof *w);
    if (window < 1)
        window = 1;
    uint32_t ring = 2;
    while (ring < 2u * (uint32_t)window)
        ring *= 2;
    w->window = window;
    w->ring = ring;
    w->seq = calloc(ring, sizeof *w->seq);
    w->posted_ns = calloc(ring, sizeof *w->posted_ns);
    w->busy = calloc(ring, 1);
    if (!w->seq || !w->posted_ns || !w->busy) {
        rpc_window_free(w);
        return -1;
    }
    return 0;
}

void rpc_window_free(struct rpc_window *w)
{
    free(w->seq);
    free(w->posted_ns);
    free(w->busy);
    memset(w, 0, sizeof *w);
}

int rpc_window_room(const struct rpc_window *w, int n)
{
    return n >= 0 && w->outstanding + n <= w->window;
}

uint32_t rpc_window_post(struct rpc_window *w, uint64_t now_ns)
{
    /* at most window of the ring >= 2 x window slots are busy: a free one is near */
    while (w->busy[w->next & (w->ring - 1)])
        w->next++;
    uint32_t seq = w->next++, k = seq & (w->ring - 1);
    w->seq[k] = seq;
    w->posted_ns[k] = now_ns;
    w->busy[k] = 1;
    w->outstanding++;
    return seq;
}

int rpc_window_echo(struct rpc_window *w, uint32_t imm)
{
    uint32_t k = imm & (w->ring - 1);
    if (!w->busy[k] || w->seq[k] != imm)
        return 0;
    w->busy[k] = 0;
    w->outstanding--;
    return 1;
}

long rpc_window_expire(struct rpc_window *w, uint64_t now_ns, uint64_t timeout_ns)
{
    long n = 0;
    for (uint32_t k = 0; k < w->ring; k++)
        if (w->busy[k] && now_ns > w->posted_ns[k] && now_ns - w->posted_ns[k] > timeout_ns) {
            w->busy[k] = 0;
            w->outstanding--;
            n++;
        }
    return n;
}

int arb_points(uint32_t *out)
{
    static const uint32_t BEHIND[ARB_POINTS] = {0, 65536, 262144, 1048576};
    for (int i = 0; i < ARB_POINTS; i++)
        out[i] = BEHIND[i];
    return ARB_POINTS;
}

uint64_t arb_region_bytes(uint32_t behind)
{
    if (behind == 0)
        return ARB_BIG_OFFSET; /* the 64-B WRITE's page only */
    return ((uint64_t)ARB_BIG_OFFSET + behind + 4095u) / 4096u * 4096u;
}
