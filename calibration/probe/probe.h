/* probe.h - declarations shared by probe.c (main), server.c and client.c. */
#ifndef RNP_PROBE_H
#define RNP_PROBE_H

#include <signal.h>

#include "args.h"
#include "rdma.h"

/* Set by SIGINT/SIGTERM; long loops check it and wind down cleanly. */
extern volatile sig_atomic_t g_stop;

/* Seconds to wait for a bootstrap reply before declaring the peer dead. */
#define IO_TIMEOUT_S 60.0

/* Progress line on stderr ("rnicsim-probe: ..."), unless --quiet. */
void note(const struct probe_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The "device", "link" and "host" JSON lines of this side (malloc'd, '\n'-terminated). */
char *info_lines(const struct rdev *d, const char *role);

/* Both return the process exit status. run_client opens --out (or uses stdout) only
 * after the handshake with the server succeeded, so a failed start clobbers nothing. */
int run_server(const struct probe_args *a, struct rdev *d);
int run_client(const struct probe_args *a, struct rdev *d, int fd);

#endif
