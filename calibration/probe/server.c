/* server.c - the passive side: creates QPs and memory on request, keeps receives posted
 * (sink) or answers every message (echo) while the client measures. */
#include "net.h"
#include "probe.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct srv_point {
    int active;
    struct msg_setup req;
    struct mem mem;
    struct qpset qs;
    struct ibv_ah *ah;     /* UD: address of the client's port */
    uint32_t *remote_qpn;  /* UD: the client's QP numbers */
    uint64_t count;        /* receives completed */
    int failed;
    char fail_msg[256];
};

struct srv {
    const struct probe_args *a;
    struct rdev *d;
    int fd;
    struct port_info peer;
    double idle_timeout;
    struct srv_point p;
};

static void point_free(struct srv_point *p)
{
    if (p->ah)
        ibv_destroy_ah(p->ah);
    qpset_destroy(&p->qs);
    mem_free(&p->mem);
    free(p->remote_qpn);
    memset(p, 0, sizeof *p);
}

static uint32_t recv_len(const struct srv_point *p)
{
    return p->req.max_payload + (p->req.transport == TP_UD ? UD_GRH_BYTES : 0);
}

static int post_recv(struct srv_point *p, int qi)
{
    struct ibv_sge sge = {(uintptr_t)p->mem.buf, recv_len(p), p->mem.mr->lkey};
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = (uint64_t)qi;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(p->qs.qp[qi], &wr, &bad);
}

static int send_status(struct srv *s, uint32_t type, uint32_t status, uint64_t count,
                       const char *msg)
{
    struct wbuf b;
    wb_init(&b);
    struct msg_status m = {status, count, (char *)msg};
    msg_status_put(&b, &m);
    int rc = b.err ? NET_ERR : net_send_msg(s->fd, type, b.p, b.len, IO_TIMEOUT_S);
    wb_free(&b);
    return rc;
}

static int handle_setup(struct srv *s, const uint8_t *pl, uint32_t len)
{
    struct srv_point *p = &s->p;
    struct msg_setup req;
    char err[256] = "";
    struct msg_setup_reply rep;
    memset(&rep, 0, sizeof rep);
    if (p->active)
        point_free(p); /* the client skipped TEARDOWN; start afresh */
    if (msg_setup_get(pl, len, &req) != 0) {
        snprintf(err, sizeof err, "malformed SETUP message");
        goto fail;
    }
    p->req = req;
    uint64_t region = req.region_bytes;
    uint64_t need = (uint64_t)req.max_payload + UD_GRH_BYTES + 64;
    if (region < need)
        region = need;
    if (region < 4096)
        region = 4096;
    if (region > ((uint64_t)1 << 40)) {
        snprintf(err, sizeof err, "region of %llu bytes is too large",
                 (unsigned long long)region);
        goto fail;
    }
    if (mem_alloc(s->d, &p->mem, (size_t)region, req.page_size, err, sizeof err) != 0)
        goto fail;
    uint32_t rq = req.mode == MODE_PASSIVE ? 1 : (req.recv_depth ? req.recv_depth : 1);
    if (rq > (uint32_t)s->d->attr.max_qp_wr)
        rq = (uint32_t)s->d->attr.max_qp_wr; /* as qpset_create would: no overflow below */
    /* echo: one signaled send per receive; room for two receive queues' worth of echoes
     * not yet reaped (the loop also waits for completions when the queue is full) */
    uint32_t sq = req.mode == MODE_ECHO ? 2 * rq + 64 : 1;
    if (qpset_create(s->d, &p->qs, (int)req.nqps, (int)req.transport, 1, sq, rq, 0,
                     (uint32_t)(now_ns() ^ (uint64_t)getpid()), err, sizeof err) != 0)
        goto fail;
    if (qpset_to_init(s->d, &p->qs, err, sizeof err) != 0)
        goto fail;
    p->active = 1;

    rep.status = 0;
    rep.addr = (uint64_t)(uintptr_t)p->mem.buf;
    rep.rkey = p->mem.mr->rkey;
    rep.region_bytes = p->mem.len;
    rep.page_size = (uint32_t)p->mem.page_size;
    copy_str(rep.backing, sizeof rep.backing, p->mem.backing);
    if (msg_qps_alloc(&rep.qps, req.nqps) != 0) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < req.nqps; i++) {
        rep.qps.qpn[i] = p->qs.qp[i]->qp_num;
        rep.qps.psn[i] = p->qs.psn[i];
    }
    goto send;
fail:
    point_free(p);
    msg_qps_free(&rep.qps);
    memset(&rep, 0, sizeof rep);
    rep.status = 1;
    rep.message = err;
    note(s->a, "setup failed: %s", err);
send:;
    struct wbuf b;
    wb_init(&b);
    msg_setup_reply_put(&b, &rep);
    int rc = b.err ? NET_ERR : net_send_msg(s->fd, MSG_SETUP_REPLY, b.p, b.len, IO_TIMEOUT_S);
    wb_free(&b);
    if (rep.status == 0)
        msg_qps_free(&rep.qps);
    return rc;
}

static int handle_connect(struct srv *s, const uint8_t *pl, uint32_t len)
{
    struct srv_point *p = &s->p;
    char err[256] = "";
    struct msg_qps q = {0, NULL, NULL};
    struct rbuf r;
    rb_init(&r, pl, len);
    if (!p->active) {
        snprintf(err, sizeof err, "CONNECT without a successful SETUP");
        goto fail;
    }
    if (msg_qps_get(&r, &q) != 0 || q.nqps != (uint32_t)p->qs.n) {
        snprintf(err, sizeof err, "malformed CONNECT message");
        goto fail;
    }
    enum ibv_mtu mtu = path_mtu(&s->d->local, &s->peer);
    uint32_t init_rd = s->d->local.max_qp_init_rd_atom;
    if (init_rd > s->peer.max_qp_rd_atom)
        init_rd = s->peer.max_qp_rd_atom;
    if (init_rd > 16)
        init_rd = 16;
    uint32_t dest_rd = s->d->local.max_qp_rd_atom > 16 ? 16 : s->d->local.max_qp_rd_atom;
    if (p->req.transport == TP_UD) {
        p->ah = ah_create(s->d, &s->peer);
        if (!p->ah) {
            snprintf(err, sizeof err, "ibv_create_ah failed: %s", strerror(errno));
            goto fail;
        }
        p->remote_qpn = calloc(q.nqps, sizeof *p->remote_qpn);
        if (!p->remote_qpn) {
            snprintf(err, sizeof err, "out of memory");
            goto fail;
        }
        memcpy(p->remote_qpn, q.qpn, q.nqps * sizeof *q.qpn);
    }
    /* receives go in before RTR so that no message finds an empty queue */
    if (p->req.mode != MODE_PASSIVE) {
        for (int i = 0; i < p->qs.n; i++)
            for (uint32_t k = 0; k < p->qs.rq_depth; k++) {
                int rc = post_recv(p, i);
                if (rc) {
                    snprintf(err, sizeof err, "ibv_post_recv failed: %s", strerror(rc));
                    goto fail;
                }
            }
    }
    for (int i = 0; i < p->qs.n; i++)
        if (qp_connect(s->d, p->qs.qp[i], p->req.transport, p->qs.psn[i], q.qpn[i], q.psn[i],
                       &s->peer, mtu, (int)init_rd, (int)dest_rd, err, sizeof err) != 0)
            goto fail;
    msg_qps_free(&q);
    return send_status(s, MSG_CONNECT_REPLY, 0, 0, NULL);
fail:
    msg_qps_free(&q);
    note(s->a, "connect failed: %s", err);
    return send_status(s, MSG_CONNECT_REPLY, 1, 0, err);
}

/* Reap up to 32 completions of echo sends; marks the point failed on an error. Returns
 * how many were reaped. */
static int reap_echo_sends(struct srv_point *p, struct ibv_cq *scq, uint64_t *sends_out)
{
    struct ibv_wc swc[32];
    int m = ibv_poll_cq(scq, 32, swc);
    if (m < 0) {
        p->failed = 1;
        snprintf(p->fail_msg, sizeof p->fail_msg, "ibv_poll_cq failed");
        return 0;
    }
    for (int i = 0; i < m; i++)
        if (swc[i].status != IBV_WC_SUCCESS && !p->failed) {
            p->failed = 1;
            snprintf(p->fail_msg, sizeof p->fail_msg, "echo completion error: %s",
                     ibv_wc_status_str(swc[i].status));
        }
    *sends_out -= (uint64_t)m;
    return m;
}

/* Every echo is signaled, so at most sq_depth of them are unreaped: before posting one
 * into a full send queue (a burst of a whole window of requests), wait for completions.
 * 0, or -1 with the point failed. */
static int wait_echo_room(struct srv_point *p, struct ibv_cq *scq, uint64_t *sends_out)
{
    uint64_t t0 = 0;
    while (*sends_out >= p->qs.sq_depth && !p->failed)
        if (reap_echo_sends(p, scq, sends_out) == 0 && !p->failed) {
            uint64_t t = now_ns();
            if (!t0) {
                t0 = t;
            } else if (t - t0 > 5000000000ull) {
                p->failed = 1;
                snprintf(p->fail_msg, sizeof p->fail_msg,
                         "no echo send completion within 5 s (send queue full)");
            }
        }
    return p->failed ? -1 : 0;
}

/* Sink/echo loop: runs until a bootstrap message is waiting (normally TEARDOWN). */
static int serve_loop(struct srv *s)
{
    struct srv_point *p = &s->p;
    struct ibv_cq *rcq = p->qs.rcq[0], *scq = p->qs.scq[0];
    int ud = p->req.transport == TP_UD;
    uint32_t off = ud ? UD_GRH_BYTES : 0;
    uint64_t sends_out = 0;
    unsigned long iter = 0, empty = 0;
    struct ibv_wc wc[32];
    for (;;) {
        int n = p->failed ? 0 : ibv_poll_cq(rcq, 32, wc);
        if (n < 0) {
            p->failed = 1;
            snprintf(p->fail_msg, sizeof p->fail_msg, "ibv_poll_cq failed");
            n = 0;
        }
        for (int i = 0; i < n && !p->failed; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                p->failed = 1;
                snprintf(p->fail_msg, sizeof p->fail_msg, "receive completion error: %s",
                         ibv_wc_status_str(wc[i].status));
                break;
            }
            int qi = (int)wc[i].wr_id;
            p->count++;
            if (p->req.mode == MODE_ECHO) {
                uint32_t bytes = wc[i].byte_len >= off ? wc[i].byte_len - off : 0;
                struct ibv_sge sge = {(uintptr_t)p->mem.buf + off, bytes, p->mem.mr->lkey};
                struct ibv_send_wr wr, *bad = NULL;
                memset(&wr, 0, sizeof wr);
                wr.wr_id = (uint64_t)qi;
                wr.sg_list = &sge;
                wr.num_sge = 1;
                wr.send_flags = IBV_SEND_SIGNALED;
                if (wc[i].wc_flags & IBV_WC_WITH_IMM) {
                    wr.opcode = IBV_WR_SEND_WITH_IMM;
                    wr.imm_data = wc[i].imm_data; /* echo the client's sequence number */
                } else {
                    wr.opcode = IBV_WR_SEND;
                }
                if (ud) {
                    wr.wr.ud.ah = p->ah;
                    wr.wr.ud.remote_qpn = p->remote_qpn[qi];
                    wr.wr.ud.remote_qkey = UD_QKEY;
                }
                /* repost first: the client may answer our echo at once */
                int rc = post_recv(p, qi);
                if (!rc && wait_echo_room(p, scq, &sends_out) != 0)
                    break;
                if (!rc)
                    rc = ibv_post_send(p->qs.qp[qi], &wr, &bad);
                if (rc) {
                    p->failed = 1;
                    snprintf(p->fail_msg, sizeof p->fail_msg, "echo post failed: %s",
                             strerror(rc));
                    break;
                }
                sends_out++;
            } else if (post_recv(p, qi) != 0) {
                p->failed = 1;
                snprintf(p->fail_msg, sizeof p->fail_msg, "ibv_post_recv failed");
                break;
            }
        }
        if (sends_out && !p->failed)
            reap_echo_sends(p, scq, &sends_out);
        /* look at the bootstrap socket every 1024 empty polls, every 65536 loops while
         * busy, and continuously (1 ms apart) once the point has failed */
        iter++;
        if (n == 0)
            empty++;
        if (p->failed || (n == 0 && (empty & 0x3FF) == 0) || (iter & 0xFFFF) == 0) {
            int r = net_readable(s->fd);
            if (r != 0)
                return r < 0 ? -1 : 0;
            if (p->failed) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        }
    }
}

static int serve_client(struct srv *s)
{
    uint32_t type, len;
    uint8_t *pl = NULL;
    int rc = net_recv_msg(s->fd, &type, &pl, &len, 30.0);
    struct msg_hello h;
    if (rc != NET_OK || type != MSG_HELLO || msg_hello_get(pl, len, &h) != 0) {
        free(pl);
        note(s->a, "bad or missing HELLO from the client (%s)", net_strerror(rc));
        return -1;
    }
    free(pl);
    free(h.info);
    s->peer = h.port;
    s->idle_timeout = h.idle_timeout_s < 10 ? 10.0 : (double)h.idle_timeout_s;

    struct msg_hello me;
    memset(&me, 0, sizeof me);
    me.version = PROTO_VERSION;
    me.port = s->d->local;
    me.info = info_lines(s->d, "server");
    struct wbuf b;
    wb_init(&b);
    msg_hello_put(&b, &me);
    free(me.info);
    rc = b.err ? NET_ERR : net_send_msg(s->fd, MSG_HELLO_REPLY, b.p, b.len, IO_TIMEOUT_S);
    wb_free(&b);
    if (rc != NET_OK)
        return -1;
    if (h.version != PROTO_VERSION) {
        /* the reply above carries our version, so the client can say what is wrong */
        note(s->a, "client speaks protocol %u, this server %u: use the same probe build",
             h.version, PROTO_VERSION);
        return -1;
    }

    for (;;) {
        rc = net_recv_msg(s->fd, &type, &pl, &len, s->idle_timeout);
        if (rc != NET_OK) {
            if (rc != NET_CLOSED)
                note(s->a, "client went quiet (%s); dropping it", net_strerror(rc));
            point_free(&s->p);
            return rc == NET_CLOSED ? 0 : -1;
        }
        switch (type) {
        case MSG_SETUP:
            rc = handle_setup(s, pl, len);
            break;
        case MSG_CONNECT:
            rc = handle_connect(s, pl, len);
            if (rc == NET_OK && s->p.active && s->p.req.mode != MODE_PASSIVE)
                rc = serve_loop(s) == 0 ? NET_OK : NET_ERR;
            break;
        case MSG_TEARDOWN: {
            uint64_t count = s->p.count;
            int failed = s->p.failed;
            char msg[256];
            copy_str(msg, sizeof msg, s->p.fail_msg);
            point_free(&s->p);
            rc = send_status(s, MSG_TEARDOWN_REPLY, failed ? 1 : 0, count, failed ? msg : NULL);
            break;
        }
        case MSG_BYE:
            free(pl);
            point_free(&s->p);
            return 0;
        default:
            note(s->a, "unexpected message type %u from the client", type);
            rc = NET_ERR;
        }
        free(pl);
        pl = NULL;
        if (rc != NET_OK) {
            point_free(&s->p);
            return -1;
        }
    }
}

int run_server(const struct probe_args *a, struct rdev *d)
{
    char err[256];
    int lfd = net_listen(a->port, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, PROBE_NAME ": %s\n", err);
        return 1;
    }
    note(a, "server on TCP port %d, device %s port %d (%s); waiting for a client", a->port,
         d->name, d->ib_port, d->local.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB");
    int status = 0;
    for (;;) {
        char peer[128] = "";
        int fd = net_accept(lfd, -1.0, peer, sizeof peer);
        if (fd == NET_TIMEOUT || (fd < 0 && errno == EINTR))
            continue;
        if (fd < 0) {
            fprintf(stderr, PROBE_NAME ": accept failed: %s\n", strerror(errno));
            status = 1;
            break;
        }
        note(a, "client %s connected", peer);
        struct srv s;
        memset(&s, 0, sizeof s);
        s.a = a;
        s.d = d;
        s.fd = fd;
        int rc = serve_client(&s);
        close(fd);
        note(a, "client %s %s", peer, rc == 0 ? "finished" : "dropped");
        if (a->once) {
            status = rc == 0 ? 0 : 1;
            break;
        }
    }
    close(lfd);
    return status;
}
