/* net.h - TCP bootstrap channel with timeouts (device-free, unit tested).
 * Every blocking call has a deadline so that the probe never hangs on a dead peer. */
#ifndef RNP_NET_H
#define RNP_NET_H

#include <stddef.h>
#include <stdint.h>

enum { NET_OK = 0, NET_ERR = -1, NET_TIMEOUT = -2, NET_CLOSED = -3 };

/* Listen on all addresses (IPv6 dual-stack when available, else IPv4). Returns fd or -1. */
int net_listen(int port, char *err, size_t errlen);
/* Wait up to timeout_s (< 0: forever) for a connection. Returns fd, or -1 (err) / -2 (timeout). */
int net_accept(int lfd, double timeout_s, char *peer, size_t peerlen);
/* Connect, retrying refused connections until timeout_s has passed. Returns fd, or -1 with
 * a one-line reason in err. */
int net_connect(const char *host, int port, double timeout_s, char *err, size_t errlen);

int net_send_all(int fd, const void *p, size_t n, double timeout_s);
int net_recv_all(int fd, void *p, size_t n, double timeout_s);
/* 1 if data (or EOF) is ready to read now, 0 if not, -1 on error */
int net_readable(int fd);

/* Framed messages (wire.h header + payload). net_recv_msg mallocs *payload (free it;
 * NULL when len is 0). */
int net_send_msg(int fd, uint32_t type, const void *payload, size_t len, double timeout_s);
int net_recv_msg(int fd, uint32_t *type, uint8_t **payload, uint32_t *len, double timeout_s);

const char *net_strerror(int rc);

#endif
