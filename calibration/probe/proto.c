/* proto.c - see proto.h. Every *_get returns 0, or -1 for a truncated/invalid message. */
#include "proto.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

void port_info_put(struct wbuf *b, const struct port_info *p)
{
    wb_u16(b, p->lid);
    wb_bytes(b, p->gid, 16);
    wb_u32(b, p->gid_index);
    wb_u32(b, p->use_grh);
    wb_u32(b, p->mtu);
    wb_u32(b, p->link_layer);
    wb_u32(b, p->max_qp_rd_atom);
    wb_u32(b, p->max_qp_init_rd_atom);
    wb_u32(b, p->max_qp);
    wb_u32(b, p->max_qp_wr);
    wb_u32(b, p->max_cqe);
}

void port_info_get(struct rbuf *b, struct port_info *p)
{
    p->lid = rb_u16(b);
    rb_bytes(b, p->gid, 16);
    p->gid_index = rb_u32(b);
    p->use_grh = rb_u32(b);
    p->mtu = rb_u32(b);
    p->link_layer = rb_u32(b);
    p->max_qp_rd_atom = rb_u32(b);
    p->max_qp_init_rd_atom = rb_u32(b);
    p->max_qp = rb_u32(b);
    p->max_qp_wr = rb_u32(b);
    p->max_cqe = rb_u32(b);
}

void msg_hello_put(struct wbuf *b, const struct msg_hello *m)
{
    wb_u32(b, m->version);
    port_info_put(b, &m->port);
    wb_u32(b, m->idle_timeout_s);
    wb_str(b, m->info ? m->info : "");
}

int msg_hello_get(const void *p, uint32_t len, struct msg_hello *m)
{
    struct rbuf r;
    rb_init(&r, p, len);
    memset(m, 0, sizeof *m);
    m->version = rb_u32(&r);
    port_info_get(&r, &m->port);
    m->idle_timeout_s = rb_u32(&r);
    m->info = rb_str(&r, WIRE_MAX_PAYLOAD);
    if (r.err || m->port.mtu < 1 || m->port.mtu > 5) {
        free(m->info);
        m->info = NULL;
        return -1;
    }
    return 0;
}

void msg_setup_put(struct wbuf *b, const struct msg_setup *m)
{
    wb_u32(b, m->transport);
    wb_u32(b, m->nqps);
    wb_u32(b, m->mode);
    wb_u32(b, m->recv_depth);
    wb_u32(b, m->max_payload);
    wb_u32(b, m->page_size);
    wb_u64(b, m->region_bytes);
}

int msg_setup_get(const void *p, uint32_t len, struct msg_setup *m)
{
    struct rbuf r;
    rb_init(&r, p, len);
    m->transport = rb_u32(&r);
    m->nqps = rb_u32(&r);
    m->mode = rb_u32(&r);
    m->recv_depth = rb_u32(&r);
    m->max_payload = rb_u32(&r);
    m->page_size = rb_u32(&r);
    m->region_bytes = rb_u64(&r);
    if (r.err || m->transport > TP_UD || m->nqps == 0 || m->nqps > PROTO_MAX_QPS ||
        m->mode > MODE_ECHO || (m->page_size != 4096u && m->page_size != (2u << 20)))
        return -1;
    return 0;
}

int msg_qps_alloc(struct msg_qps *m, uint32_t n)
{
    m->nqps = n;
    m->qpn = calloc(n ? n : 1, sizeof *m->qpn);
    m->psn = calloc(n ? n : 1, sizeof *m->psn);
    if (!m->qpn || !m->psn) {
        msg_qps_free(m);
        return -1;
    }
    return 0;
}

void msg_qps_free(struct msg_qps *m)
{
    free(m->qpn);
    free(m->psn);
    m->qpn = m->psn = NULL;
    m->nqps = 0;
}

void msg_qps_put(struct wbuf *b, const struct msg_qps *m)
{
    wb_u32(b, m->nqps);
    for (uint32_t i = 0; i < m->nqps; i++) {
        wb_u32(b, m->qpn[i]);
        wb_u32(b, m->psn[i]);
    }
}

int msg_qps_get(struct rbuf *r, struct msg_qps *m)
{
    uint32_t n = rb_u32(r);
    m->qpn = m->psn = NULL;
    m->nqps = 0;
    if (r->err || n > PROTO_MAX_QPS || (size_t)n * 8 > r->len - r->pos)
        return -1;
    if (msg_qps_alloc(m, n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        m->qpn[i] = rb_u32(r) & 0xFFFFFFu;
        m->psn[i] = rb_u32(r) & 0xFFFFFFu;
    }
    if (r->err) {
        msg_qps_free(m);
        return -1;
    }
    return 0;
}

void msg_setup_reply_put(struct wbuf *b, const struct msg_setup_reply *m)
{
    wb_u32(b, m->status);
    wb_str(b, m->message ? m->message : "");
    wb_u64(b, m->addr);
    wb_u32(b, m->rkey);
    wb_u64(b, m->region_bytes);
    wb_u32(b, m->page_size);
    wb_str(b, m->backing);
    msg_qps_put(b, &m->qps);
}

int msg_setup_reply_get(const void *p, uint32_t len, struct msg_setup_reply *m)
{
    struct rbuf r;
    rb_init(&r, p, len);
    memset(m, 0, sizeof *m);
    m->status = rb_u32(&r);
    m->message = rb_str(&r, 4096);
    m->addr = rb_u64(&r);
    m->rkey = rb_u32(&r);
    m->region_bytes = rb_u64(&r);
    m->page_size = rb_u32(&r);
    char *backing = rb_str(&r, sizeof m->backing - 1);
    copy_str(m->backing, sizeof m->backing, backing ? backing : "");
    free(backing);
    if (r.err || msg_qps_get(&r, &m->qps) != 0) {
        msg_setup_reply_free(m);
        return -1;
    }
    return 0;
}

void msg_setup_reply_free(struct msg_setup_reply *m)
{
    free(m->message);
    m->message = NULL;
    msg_qps_free(&m->qps);
}

void msg_status_put(struct wbuf *b, const struct msg_status *m)
{
    wb_u32(b, m->status);
    wb_u64(b, m->count);
    wb_str(b, m->message ? m->message : "");
}

int msg_status_get(const void *p, uint32_t len, struct msg_status *m)
{
    struct rbuf r;
    rb_init(&r, p, len);
    m->status = rb_u32(&r);
    m->count = rb_u64(&r);
    m->message = rb_str(&r, 4096);
    if (r.err) {
        free(m->message);
        m->message = NULL;
        return -1;
    }
    return 0;
}
