/* probe.c - rnicsim-probe: measures an RDMA NIC for rnicsim calibration.
 *
 *   server:  rnicsim-probe --server [--port P] [--dev NAME]
 *   client:  rnicsim-probe --client HOST [--out FILE.jsonl] [--sweeps LIST] ...
 *
 * Exit status: 0 success, 1 runtime failure, 2 bad flags / no usable RDMA device / peer
 * unreachable, 130 interrupted. See SCHEMA.md for the output. */
#include "hostinfo.h"
#include "jsonout.h"
#include "net.h"
#include "probe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t g_stop = 0;
static int g_quiet = 0;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

void note(const struct probe_args *a, const char *fmt, ...)
{
    if ((a && a->quiet) || g_quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(PROBE_NAME ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void append_line(struct jw *w, char **acc, size_t *acclen)
{
    const char *s = jw_cstr(w);
    size_t n = strlen(s);
    char *nb = jw_complete(w) ? realloc(*acc, *acclen + n + 2) : NULL;
    if (nb) {
        memcpy(nb + *acclen, s, n);
        nb[*acclen + n] = '\n';
        nb[*acclen + n + 1] = '\0';
        *acc = nb;
        *acclen += n + 1;
    }
    jw_reset(w);
}

char *info_lines(const struct rdev *d, const char *role)
{
    struct jw w;
    char *acc = NULL;
    size_t acclen = 0;
    jw_init(&w);

    jw_obj_begin(&w);
    jw_kv_str(&w, "type", "device");
    jw_kv_str(&w, "role", role);
    rdev_write_device_fields(d, &w);
    jw_obj_end(&w);
    append_line(&w, &acc, &acclen);

    jw_obj_begin(&w);
    jw_kv_str(&w, "type", "link");
    jw_kv_str(&w, "role", role);
    rdev_write_link_fields(d, &w);
    jw_obj_end(&w);
    append_line(&w, &acc, &acclen);

    jw_obj_begin(&w);
    jw_kv_str(&w, "type", "host");
    jw_kv_str(&w, "role", role);
    hostinfo_write_fields(&w);
    jw_obj_end(&w);
    append_line(&w, &acc, &acclen);

    jw_free(&w);
    return acc;
}

int main(int argc, char **argv)
{
    struct probe_args a;
    char err[512];
    int pr = probe_parse_args(argc, argv, &a, err, sizeof err);
    if (pr == ARGS_HELP) {
        probe_usage(stdout);
        return 0;
    }
    if (pr != ARGS_OK) {
        fprintf(stderr, PROBE_NAME ": %s\n\n", err);
        probe_usage(stderr);
        return 2;
    }
    g_quiet = a.quiet;

    /* The client winds down on SIGINT/SIGTERM (finishes the point, writes the "end"
     * line); a second signal kills it. The server holds nothing worth saving and just
     * dies. */
    if (a.role == ROLE_CLIENT) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    signal(SIGPIPE, SIG_IGN);

    struct rdev d;
    int rc = rdev_open(&d, a.dev, a.ib_port, a.gid_index, err, sizeof err);
    if (rc != RDEV_OK) {
        fprintf(stderr, PROBE_NAME ": %s\n", err);
        return 2;
    }

    int status;
    if (a.role == ROLE_SERVER) {
        status = run_server(&a, &d);
    } else {
        int fd = net_connect(a.host, a.port, a.connect_timeout, err, sizeof err);
        if (fd < 0) {
            fprintf(stderr, PROBE_NAME ": %s\n", err);
            rdev_close(&d);
            return 2;
        }
        status = run_client(&a, &d, fd);
        close(fd);
    }
    rdev_close(&d);
    return status;
}
