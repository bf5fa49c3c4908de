/* args.c - see args.h. A small hand-written parser (no getopt global state) so that it
 * can be unit tested: accepts "--opt value" and "--opt=value". */
#include "args.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const SWEEP_NAMES[SW_COUNT] = {
    "lat", "bw", "qps", "threads", "depth", "batch", "signal", "inline", "atomics", "pages",
    "coro", "rpc", "arb",
};

const char *sweep_name(int id)
{
    return (id >= 0 && id < SW_COUNT) ? SWEEP_NAMES[id] : "?";
}

int sweep_from_name(const char *name, size_t len)
{
    for (int i = 0; i < SW_COUNT; i++)
        if (strlen(SWEEP_NAMES[i]) == len && strncmp(SWEEP_NAMES[i], name, len) == 0)
            return i;
    return -1;
}

void probe_args_defaults(struct probe_args *a)
{
    memset(a, 0, sizeof *a);
    a->role = ROLE_NONE;
    a->port = PROBE_DEFAULT_PORT;
    a->ib_port = 1;
    a->gid_index = -1;
    a->sweeps = SWEEPS_ALL;
    a->iters = 1000;
    a->bw_iters = 20000;
    a->time_limit = 5.0;
    a->connect_timeout = 5.0;
    a->max_qps = 4096;
    a->max_threads = 0;
    a->region_mb = 1024;
}

void probe_usage(FILE *f)
{
    fprintf(f,
        "usage: " PROBE_NAME " --server [--port P] [--dev NAME] [options]\n"
        "       " PROBE_NAME " --client HOST [--port P] [--out FILE.jsonl] [--sweeps LIST]\n"
        "                     [--iters N] [--time-limit SEC] [options]\n"
        "\n"
        "Measures an RDMA NIC for rnicsim calibration. Start --server on one host and\n"
        "--client on another; the client drives every sweep and writes JSON lines\n"
        "(schema: calibration/probe/SCHEMA.md). QP attributes are exchanged over TCP.\n"
        "\n"
        "common options:\n"
        "  --port P              TCP port of the bootstrap connection (default %d)\n"
        "  --dev NAME            RDMA device (default: the first one found)\n"
        "  --ib-port N           device port number (default 1)\n"
        "  --gid-index N         GID index (default: LID routing on InfiniBand, the first\n"
        "                        RoCE v2 IPv4-mapped GID on Ethernet)\n"
        "  --connect-timeout S   seconds to wait for the peer (default 5)\n"
        "  -q, --quiet           no progress lines on stderr\n"
        "  -h, --help            print this help and exit\n"
        "server options:\n"
        "  --once                exit after serving one client\n"
        "client options:\n"
        "  --out FILE            write JSON lines to FILE (default: stdout)\n"
        "  --sweeps LIST         comma-separated sweeps, or 'all' (default all):\n"
        "                        lat,bw,qps,threads,depth,batch,signal,inline,atomics,pages,\n"
        "                        coro (READs posted from coroutines, and the bare switch),\n"
        "                        rpc (two-sided RPCs: SENDs the server echoes, a window of\n"
        "                        them outstanding, posted in batches; RC and UD),\n"
        "                        arb (a 64-B WRITE posted 2 us after a large WRITE on another QP: "
        "transmit arbitration)\n"
        "  --iters N             samples per latency point (default 1000)\n"
        "  --bw-iters N          operations per throughput point (default 20000)\n"
        "  --time-limit SEC      upper bound on one sweep point, warm-up included (default 5)\n"
        "  --max-qps N           largest QP count of the qps sweep (default 4096)\n"
        "  --max-threads N       largest thread count of the threads sweep\n"
        "                        (default: online CPUs, at most 16)\n"
        "  --qps-threads N       the qps and batch sweeps also measure throughput with N\n"
        "                        posting threads, each owning QPs/N of the QPs (batch: one\n"
        "                        QP each) (default: 4, at most the CPUs the probe may\n"
        "                        run on, its affinity mask as numactl or taskset set it;\n"
        "                        1: one thread only)\n"
        "  --region-mb N         largest registered region of the pages sweep (default 1024)\n"
        "\n"
        "exit status: 0 success; 1 runtime failure; 2 bad flags, no RDMA device, or peer\n"
        "unreachable\n",
        PROBE_DEFAULT_PORT);
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out, char *err,
                      size_t errlen)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || end == v || *end != '\0' || errno == ERANGE) {
        seterr(err, errlen, "%s: expected an integer, got '%s'", opt, v);
        return -1;
    }
    if (x < lo || x > hi) {
        seterr(err, errlen, "%s: expected an integer in %ld..%ld, got %ld", opt, lo, hi, x);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *opt, const char *v, double lo, double hi, double *out,
                        char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (*v == '\0' || end == v || *end != '\0' || errno == ERANGE || !isfinite(x)) {
        seterr(err, errlen, "%s: expected a number of seconds, got '%s'", opt, v);
        return -1;
    }
    if (x < lo || x > hi) {
        seterr(err, errlen, "%s: expected a number in %g..%g, got '%s'", opt, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int parse_sweep_list(const char *s, unsigned *mask, char *err, size_t errlen)
{
    unsigned m = 0;
    const char *p = s;
    if (!s || !*s) {
        seterr(err, errlen, "--sweeps: expected a comma-separated list of sweeps");
        return -1;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) {
            seterr(err, errlen, "--sweeps: empty name in '%s'", s);
            return -1;
        }
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            m |= SWEEPS_ALL;
        } else {
            int id = sweep_from_name(p, len);
            if (id < 0) {
                seterr(err, errlen,
                       "--sweeps: unknown sweep '%.*s' (expected all or lat, bw, qps, threads, "
                       "depth, batch, signal, inline, atomics, pages, coro, rpc, arb)",
                       (int)(len > 64 ? 64 : len), p);
                return -1;
            }
            m |= 1u << id;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *mask = m;
    return 0;
}

enum opt_scope { SCOPE_ANY, SCOPE_CLIENT, SCOPE_SERVER };

struct opt_seen {
    const char *name;
    enum opt_scope scope;
};

int probe_parse_args(int argc, char *const argv[], struct probe_args *a, char *err, size_t errlen)
{
    probe_args_defaults(a);
    if (err && errlen)
        err[0] = '\0';
    /* help wins over everything else, wherever it is */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return ARGS_HELP;

    const char *client_only = NULL, *server_only = NULL;
    int roles = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char name[64];
        const char *val = NULL;
        int has_inline_val = 0;

        if (strncmp(arg, "--", 2) != 0) {
            if (strcmp(arg, "-q") == 0) {
                a->quiet = 1;
                continue;
            }
            if (arg[0] == '-')
                seterr(err, errlen, "unknown option '%s'", arg);
            else
                seterr(err, errlen, "unexpected argument '%s'", arg);
            return ARGS_ERROR;
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) {
            seterr(err, errlen, "unknown option '%.40s...'", arg);
            return ARGS_ERROR;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        if (eq) {
            val = eq + 1;
            has_inline_val = 1;
        }

        /* flags without a value */
        if (strcmp(name, "--server") == 0 || strcmp(name, "--once") == 0 ||
            strcmp(name, "--quiet") == 0) {
            if (has_inline_val) {
                seterr(err, errlen, "%s takes no value", name);
                return ARGS_ERROR;
            }
            if (strcmp(name, "--server") == 0) {
                if (a->role == ROLE_SERVER) {
                    seterr(err, errlen, "--server given twice");
                    return ARGS_ERROR;
                }
                roles++;
                a->role = ROLE_SERVER;
            } else if (strcmp(name, "--once") == 0) {
                a->once = 1;
                server_only = "--once";
            } else {
                a->quiet = 1;
            }
            continue;
        }

        static const char *const WITH_VALUE[] = {
            "--client", "--port", "--dev", "--ib-port", "--gid-index", "--out", "--sweeps",
            "--iters", "--bw-iters", "--time-limit", "--connect-timeout", "--max-qps",
            "--max-threads", "--qps-threads", "--region-mb",
        };
        int known = 0;
        for (size_t k = 0; k < sizeof WITH_VALUE / sizeof WITH_VALUE[0]; k++)
            if (strcmp(name, WITH_VALUE[k]) == 0)
                known = 1;
        if (!known) {
            seterr(err, errlen, "unknown option '%s'", name);
            return ARGS_ERROR;
        }
        if (!has_inline_val) {
            if (i + 1 >= argc) {
                seterr(err, errlen, "%s needs a value", name);
                return ARGS_ERROR;
            }
            val = argv[++i];
        }

        long lv = 0;
        if (strcmp(name, "--client") == 0) {
            if (!*val || val[0] == '-') {
                seterr(err, errlen, "--client needs a host name or address, got '%s'", val);
                return ARGS_ERROR;
            }
            if (strlen(val) >= sizeof a->host) {
                seterr(err, errlen, "--client: host name too long");
                return ARGS_ERROR;
            }
            if (a->role == ROLE_CLIENT) {
                seterr(err, errlen, "--client given twice");
                return ARGS_ERROR;
            }
            roles++;
            a->role = ROLE_CLIENT;
            copy_str(a->host, sizeof a->host, val);
        } else if (strcmp(name, "--port") == 0) {
            if (parse_long(name, val, 1, 65535, &lv, err, errlen))
                return ARGS_ERROR;
            a->port = (int)lv;
        } else if (strcmp(name, "--dev") == 0) {
            if (!*val || strlen(val) >= sizeof a->dev) {
                seterr(err, errlen, "--dev: expected a device name such as mlx5_0");
                return ARGS_ERROR;
            }
            copy_str(a->dev, sizeof a->dev, val);
        } else if (strcmp(name, "--ib-port") == 0) {
            if (parse_long(name, val, 1, 255, &lv, err, errlen))
                return ARGS_ERROR;
            a->ib_port = (int)lv;
        } else if (strcmp(name, "--gid-index") == 0) {
            if (parse_long(name, val, 0, 65535, &lv, err, errlen))
                return ARGS_ERROR;
            a->gid_index = (int)lv;
        } else if (strcmp(name, "--out") == 0) {
            if (!*val || strlen(val) >= sizeof a->out) {
                seterr(err, errlen, "--out: expected a file name");
                return ARGS_ERROR;
            }
            copy_str(a->out, sizeof a->out, val);
            client_only = "--out";
        } else if (strcmp(name, "--sweeps") == 0) {
            if (parse_sweep_list(val, &a->sweeps, err, errlen))
                return ARGS_ERROR;
            client_only = "--sweeps";
        } else if (strcmp(name, "--iters") == 0) {
            if (parse_long(name, val, 1, 100000000L, &a->iters, err, errlen))
                return ARGS_ERROR;
            client_only = "--iters";
        } else if (strcmp(name, "--bw-iters") == 0) {
            if (parse_long(name, val, 1, 1000000000L, &a->bw_iters, err, errlen))
                return ARGS_ERROR;
            client_only = "--bw-iters";
        } else if (strcmp(name, "--time-limit") == 0) {
            if (parse_double(name, val, 0.001, 86400.0, &a->time_limit, err, errlen))
                return ARGS_ERROR;
            client_only = "--time-limit";
        } else if (strcmp(name, "--connect-timeout") == 0) {
            if (parse_double(name, val, 0.001, 3600.0, &a->connect_timeout, err, errlen))
                return ARGS_ERROR;
        } else if (strcmp(name, "--max-qps") == 0) {
            if (parse_long(name, val, 1, 1 << 20, &lv, err, errlen))
                return ARGS_ERROR;
            a->max_qps = (int)lv;
            client_only = "--max-qps";
        } else if (strcmp(name, "--max-threads") == 0) {
            if (parse_long(name, val, 1, 1024, &lv, err, errlen))
                return ARGS_ERROR;
            a->max_threads = (int)lv;
            client_only = "--max-threads";
        } else if (strcmp(name, "--qps-threads") == 0) {
            /* a thread per QP at most: 1024 threads already need --max-qps >= 1024 */
            if (parse_long(name, val, 1, 1024, &lv, err, errlen))
                return ARGS_ERROR;
            a->qps_threads = (int)lv;
            client_only = "--qps-threads";
        } else if (strcmp(name, "--region-mb") == 0) {
            if (parse_long(name, val, 2, 1L << 20, &a->region_mb, err, errlen))
                return ARGS_ERROR;
            client_only = "--region-mb";
        }
    }
    if (roles > 1) {
        seterr(err, errlen, "choose one of --server or --client HOST");
        return ARGS_ERROR;
    }
    if (a->role == ROLE_NONE) {
        seterr(err, errlen, "one of --server or --client HOST is required");
        return ARGS_ERROR;
    }
    if (a->role == ROLE_SERVER && client_only) {
        seterr(err, errlen, "%s is a client option", client_only);
        return ARGS_ERROR;
    }
    if (a->role == ROLE_CLIENT && server_only) {
        seterr(err, errlen, "%s is a server option", server_only);
        return ARGS_ERROR;
    }
    /* every posting thread owns at least one QP: N threads need N QPs (checked after the
     * loop, so that the order of --qps-threads and --max-qps does not matter) */
    if (a->qps_threads > a->max_qps) {
        seterr(err, errlen, "--qps-threads %d needs at least %d QPs, but --max-qps is %d",
               a->qps_threads, a->qps_threads, a->max_qps);
        return ARGS_ERROR;
    }
    return ARGS_OK;
}
