/* args.h - command line of rnicsim-probe (device-free, unit tested by test_probe.c). */
#ifndef RNP_ARGS_H
#define RNP_ARGS_H

#include <stddef.h>
#include <stdio.h>

#define PROBE_NAME "rnicsim-probe"
#define PROBE_VERSION "0.1.0"
#define PROBE_SCHEMA 1
#define PROBE_DEFAULT_PORT 18777

enum probe_role { ROLE_NONE = 0, ROLE_SERVER, ROLE_CLIENT };

enum sweep_id {
    SW_LAT = 0,
    SW_BW,
    SW_QPS,
    SW_THREADS,
    SW_DEPTH,
    SW_BATCH,
    SW_SIGNAL,
    SW_INLINE,
    SW_ATOMICS,
    SW_PAGES,
    SW_CORO,
    SW_RPC,
    SW_ARB,
    SW_COUNT
};

#define SWEEPS_ALL ((1u << SW_COUNT) - 1u)

struct probe_args {
    enum probe_role role;
    char host[256];          /* --client HOST */
    int port;                /* --port */
    char dev[64];            /* --dev; empty: first device */
    int ib_port;             /* --ib-port */
    int gid_index;           /* --gid-index; -1: automatic */
    char out[1024];          /* --out; empty: stdout */
    unsigned sweeps;         /* bit mask of enum sweep_id, in run order */
    long iters;              /* --iters: samples per latency point */
    long bw_iters;           /* --bw-iters: operations per throughput point */
    double time_limit;       /* --time-limit: seconds per sweep point */
    double connect_timeout;  /* --connect-timeout: seconds */
    int max_qps;             /* --max-qps */
    int max_threads;         /* --max-threads; 0: online CPUs capped at 16 */
    int qps_threads;         /* --qps-threads: posting threads of the qps sweep's second
                              * throughput point; 0: qps_threads_default(online CPUs);
                              * 1: no such point (one thread only, as before) */
    long region_mb;          /* --region-mb: largest region of the pages sweep */
    int once;                /* --once (server) */
    int quiet;               /* --quiet */
};

enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_ERROR = -1 };

void probe_args_defaults(struct probe_args *a);
/* Parse argv[1..argc-1]. Returns ARGS_OK, ARGS_HELP (-h/--help seen) or ARGS_ERROR with a
 * one-line reason in err. Does not print and does not exit. */
int probe_parse_args(int argc, char *const argv[], struct probe_args *a, char *err, size_t errlen);
/* Parse "lat,bw" or "all" into a mask. Returns 0 or -1 with a reason in err. */
int parse_sweep_list(const char *s, unsigned *mask, char *err, size_t errlen);
const char *sweep_name(int id);
/* -1 if unknown */
int sweep_from_name(const char *name, size_t len);
void probe_usage(FILE *f);

#endif
