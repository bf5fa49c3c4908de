/* net.c - see net.h. */
#include "net.h"
#include "util.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

const char *net_strerror(int rc)
{
    switch (rc) {
    case NET_OK: return "ok";
    case NET_TIMEOUT: return "timed out";
    case NET_CLOSED: return "connection closed by peer";
    default: return "connection error";
    }
}

/* poll timeout in ms for a deadline (deadline < 0: infinite) */
static int ms_left(double deadline)
{
    if (deadline < 0)
        return -1;
    double left = deadline - now_s();
    if (left <= 0)
        return 0;
    double ms = left * 1000.0 + 1.0;
    return ms > 2e9 ? 2000000000 : (int)ms;
}

static double deadline_of(double timeout_s)
{
    return timeout_s < 0 ? -1.0 : now_s() + timeout_s;
}

/* timeout left until deadline (-1: infinite); never 0 or negative for a finite deadline,
 * so that a nearly expired deadline still gets one non-blocking try */
static double remaining(double deadline)
{
    if (deadline < 0)
        return -1.0;
    double left = deadline - now_s();
    return left > 0.001 ? left : 0.001;
}

int net_listen(int port, char *err, size_t errlen)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1, zero = 0;
    if (fd >= 0) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof a6);
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)port);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(fd, 4) == 0)
            return fd;
        close(fd);
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in a4;
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons((uint16_t)port);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a4, sizeof a4) != 0 || listen(fd, 4) != 0) {
        snprintf(err, errlen, "cannot listen on TCP port %d: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int net_accept(int lfd, double timeout_s, char *peer, size_t peerlen)
{
    double deadline = deadline_of(timeout_s);
    for (;;) {
        struct pollfd p = {lfd, POLLIN, 0};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0) {
            if (errno == EINTR)
                return NET_ERR; /* let the caller look at its stop flag */
            return NET_ERR;
        }
        if (r == 0)
            return NET_TIMEOUT;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept(lfd, (struct sockaddr *)&ss, &sl);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            return NET_ERR;
        }
        set_nodelay(fd);
        if (peer && peerlen) {
            char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
            getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                        NI_NUMERICHOST | NI_NUMERICSERV);
            snprintf(peer, peerlen, "%s:%s", host, serv);
        }
        return fd;
    }
}

/* One non-blocking connect attempt bounded by deadline. Returns fd, or -1 with errno. */
static int connect_one(const struct addrinfo *ai, double deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return -1;
    int fl = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (r != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (r != 0) {
        struct pollfd p = {fd, POLLOUT, 0};
        int pr;
        do {
            pr = poll(&p, 1, ms_left(deadline));
        } while (pr < 0 && errno == EINTR);
        if (pr <= 0) {
            close(fd);
            errno = pr == 0 ? ETIMEDOUT : errno;
            return -1;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            errno = soerr ? soerr : EIO;
            return -1;
        }
    }
    fcntl(fd, F_SETFL, fl);
    set_nodelay(fd);
    return fd;
}

int net_connect(const char *host, int port, double timeout_s, char *err, size_t errlen)
{
    double start = now_s();
    double deadline = start + timeout_s;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gr = getaddrinfo(host, portstr, &hints, &res);
    if (gr != 0) {
        snprintf(err, errlen, "cannot resolve peer '%s': %s", host, gai_strerror(gr));
        return -1;
    }
    int last_errno = ETIMEDOUT;
    for (;;) {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fd = connect_one(ai, deadline);
            if (fd >= 0) {
                freeaddrinfo(res);
                return fd;
            }
            last_errno = errno;
            if (now_s() >= deadline)
                break;
        }
        /* the server may not be up yet: retry refused/unreachable until the deadline */
        if (now_s() + 0.2 >= deadline)
            break;
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(res);
    snprintf(err, errlen, "cannot connect to %s:%d: %s (gave up after %.1f s)", host, port,
             strerror(last_errno), now_s() - start);
    return -1;
}

int net_send_all(int fd, const void *p, size_t n, double timeout_s)
{
    double deadline = deadline_of(timeout_s);
    const uint8_t *q = p;
    while (n > 0) {
        struct pollfd pf = {fd, POLLOUT, 0};
        int r = poll(&pf, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NET_ERR;
        if (r == 0)
            return NET_TIMEOUT;
        ssize_t s = send(fd, q, n, MSG_NOSIGNAL);
        if (s < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return (errno == EPIPE || errno == ECONNRESET) ? NET_CLOSED : NET_ERR;
        }
        q += s;
        n -= (size_t)s;
    }
    return NET_OK;
}

int net_recv_all(int fd, void *p, size_t n, double timeout_s)
{
    double deadline = deadline_of(timeout_s);
    uint8_t *q = p;
    while (n > 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NET_ERR;
        if (r == 0)
            return NET_TIMEOUT;
        ssize_t s = recv(fd, q, n, 0);
        if (s == 0)
            return NET_CLOSED;
        if (s < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return errno == ECONNRESET ? NET_CLOSED : NET_ERR;
        }
        q += s;
        n -= (size_t)s;
    }
    return NET_OK;
}

int net_readable(int fd)
{
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, 0);
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    return r > 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR)) ? 1 : 0;
}

int net_send_msg(int fd, uint32_t type, const void *payload, size_t len, double timeout_s)
{
    if (len > WIRE_MAX_PAYLOAD)
        return NET_ERR;
    uint8_t h[12];
    wire_header(h, type, (uint32_t)len);
    double deadline = deadline_of(timeout_s);
    int rc = net_send_all(fd, h, sizeof h, timeout_s);
    if (rc == NET_OK && len)
        rc = net_send_all(fd, payload, len, remaining(deadline));
    return rc;
}

int net_recv_msg(int fd, uint32_t *type, uint8_t **payload, uint32_t *len, double timeout_s)
{
    uint8_t h[12];
    double deadline = deadline_of(timeout_s);
    *payload = NULL;
    *len = 0;
    int rc = net_recv_all(fd, h, sizeof h, timeout_s);
    if (rc != NET_OK)
        return rc;
    uint32_t n;
    if (wire_parse_header(h, type, &n) != 0)
        return NET_ERR;
    if (n) {
        uint8_t *b = malloc(n);
        if (!b)
            return NET_ERR;
        rc = net_recv_all(fd, b, n, remaining(deadline));
        if (rc != NET_OK) {
            free(b);
            return rc;
        }
        *payload = b;
    }
    *len = n;
    return NET_OK;
}
