/* fakeverbs.c - a tiny stand-in for libibverbs, for testing rnicsim-probe end to end on
 * a machine without RDMA hardware (`make rnicsim-probe-fake`; tests/unit/test_probe.py
 * runs a client and a server built with it over loopback). It is NOT a NIC model and
 * its timings mean nothing; it checks the probe's use of the verbs API:
 *
 *  - one device "fake0", port 1 ACTIVE, InfiniBand, 4x QDR, MTU 4096, LID from the pid;
 *  - QP state machine RESET -> INIT -> RTR -> RTS with the attribute masks the spec
 *    requires for RC and UD; posting in a wrong state fails with EINVAL;
 *  - send-queue accounting as on hardware: a WR occupies a slot until a *signaled*
 *    completion at or after it is polled; posting into a full send queue fails with
 *    ENOMEM; a completion queue overrun is reported and fails every later poll;
 *  - READ/WRITE/atomics complete at once without moving data (there is no remote
 *    memory); the rkey and the 8-byte alignment of atomics are checked;
 *  - SEND (RC and UD) travels to the peer process in a Unix datagram carrying the QPN,
 *    length and immediate data; the peer completes it against a posted receive, so the
 *    server's sink and echo loops and the client's ping-pong and RPCs really run. A
 *    full peer socket holds the sender back (no loss, on UD either) while it takes in
 *    its own arrivals; FAKEVERBS_UD_DROP_EVERY=N makes the wire lose every Nth UD SEND;
 *  - FAKEVERBS_LATE_WRITE_BYTES=N: a signaled RDMA WRITE of N bytes or more completes
 *    late: its CQE is held back until a poll finds its CQ otherwise empty, so a WR posted
 *    after it on another QP of the same CQ completes first (as a NIC that interleaves the
 *    QPs' packets completes a small message before a large one); a later signaled WR of
 *    the same QP releases it first (RC completes a QP's WRs in order).
 * QP numbers are (pid % 2048) << 13 | index: the receiving process is found from them.
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FAKE_MAX_QPS 8192
#define FAKE_RKEY_BASE 0x5000u

struct fake_msg {
    uint32_t dest_qpn, src_qpn, len, imm, has_imm;
};

struct pending {
    struct fake_msg m;
    struct pending *next;
};

struct fake_cqe {
    struct ibv_wc wc;
    struct fake_qp *qp;
    uint32_t retire; /* send-queue slots freed when this CQE is polled */
};

struct fake_cq {
    struct ibv_cq cq;
    int cap, head, count, overrun;
    struct fake_cqe *ring;
    struct fake_cqe *late; /* FAKEVERBS_LATE_WRITE_BYTES: CQEs held back, in order */
    int nlate;
    struct fake_qp **rqps; /* QPs whose receive CQ this is */
    int nrqps, caprqps;
};

struct fake_rwr {
    uint64_t wr_id;
    uint32_t len;
};

struct fake_qp {
    struct ibv_qp qp;
    uint32_t max_send, max_recv, max_inline;
    uint32_t outstanding;    /* send slots in use */
    uint32_t late;           /* its CQEs held back in its send CQ's late list */
    uint32_t since_signaled; /* unsignaled WRs since the last signaled one */
    uint32_t dest_qpn;
    uint32_t attr_mask_seen;
    struct fake_rwr *rq;
    uint32_t rq_head, rq_count;
    struct pending *msgs, *msgs_tail; /* arrived, waiting for a receive */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_qp *g_qps[FAKE_MAX_QPS];
static int g_sock = -1;
static uint32_t g_next_rkey = FAKE_RKEY_BASE;
static struct ibv_mr *g_mrs[4096];

static int g_proc = -1; /* 11-bit id of this process: its socket name and QPN prefix */
static unsigned long g_ud_sends; /* UD SENDs this process posted */

/* A count from the environment variable `name`, read once into *cache (-1: not yet);
 * unset or negative: 0. */
static unsigned long env_count(const char *name, long *cache)
{
    if (*cache < 0) {
        const char *v = getenv(name);
        long n = v ? strtol(v, NULL, 10) : 0;
        *cache = n < 0 ? 0 : n;
    }
    return (unsigned long)*cache;
}

/* FAKEVERBS_UD_DROP_EVERY=N: the wire loses every Nth UD SEND this process posts (tests
 * of the probe's lost-echo accounting); unset or 0: UD loses nothing */
static unsigned long ud_drop_every(void)
{
    static long every = -1;
    return env_count("FAKEVERBS_UD_DROP_EVERY", &every);
}

/* FAKEVERBS_LATE_WRITE_BYTES=N: signaled WRITEs of N bytes or more complete late (see
 * the top); unset or 0: every WR completes as it is posted */
static unsigned long late_write_bytes(void)
{
    static long bytes = -1;
    return env_count("FAKEVERBS_LATE_WRITE_BYTES", &bytes);
}

static uint32_t proc_id(void)
{
    return g_proc >= 0 ? (uint32_t)g_proc : (uint32_t)getpid() % 2048u;
}

static void sock_addr(uint32_t proc, struct sockaddr_un *a, socklen_t *len)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "fakeverbs-%u", proc);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int ensure_socket(void)
{
    if (g_sock >= 0)
        return 0;
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    /* start from the pid and take the first free name (parallel test runs) */
    uint32_t first = (uint32_t)getpid() % 2048u;
    for (uint32_t k = 0; k < 2048; k++) {
        struct sockaddr_un a;
        socklen_t len;
        uint32_t id = (first + k) % 2048u;
        sock_addr(id, &a, &len);
        if (bind(s, (struct sockaddr *)&a, len) == 0) {
            g_proc = (int)id;
            g_sock = s;
            return 0;
        }
    }
    close(s);
    return -1;
}

/* ---- device ------------------------------------------------------------------------ */

static struct ibv_device g_dev;
static struct ibv_device *g_list[2];

struct ibv_device **ibv_get_device_list(int *num_devices)
{
    if (getenv("FAKEVERBS_NO_DEVICE")) {
        if (num_devices)
            *num_devices = 0;
        errno = ENOSYS;
        return NULL;
    }
    memset(&g_dev, 0, sizeof g_dev);
    snprintf(g_dev.name, sizeof g_dev.name, "fake0");
    snprintf(g_dev.dev_name, sizeof g_dev.dev_name, "uverbs0");
    g_dev.node_type = IBV_NODE_CA;
    g_dev.transport_type = IBV_TRANSPORT_IB;
    g_list[0] = &g_dev;
    g_list[1] = NULL;
    if (num_devices)
        *num_devices = 1;
    struct ibv_device **l = malloc(sizeof g_list);
    if (l)
        memcpy(l, g_list, sizeof g_list);
    return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    return device->name;
}

static int fake_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    pthread_mutex_lock(&g_lock);
    int rc = ensure_socket();
    pthread_mutex_unlock(&g_lock);
    if (rc != 0)
        return NULL;
    struct ibv_context *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->device = device;
    c->cmd_fd = -1;
    c->async_fd = -1;
    c->abi_compat = NULL; /* not an extended context: ibv_query_port takes the compat path */
    c->ops.poll_cq = fake_poll_cq;
    c->ops.post_send = fake_post_send;
    c->ops.post_recv = fake_post_recv;
    pthread_mutex_init(&c->mutex, NULL);
    return c;
}

int ibv_close_device(struct ibv_context *context)
{
    free(context);
    return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
    (void)context;
    memset(a, 0, sizeof *a);
    snprintf(a->fw_ver, sizeof a->fw_ver, "0.0.0-fake");
    a->vendor_id = 0x02c9;
    a->vendor_part_id = 4099;
    a->max_mr_size = ~0ull;
    a->page_size_cap = 0xfffff000u;
    a->max_qp = 6000;
    a->max_qp_wr = 16351;
    a->max_sge = 32;
    a->max_cq = 65536;
    a->max_cqe = 4194303;
    a->max_mr = 524272;
    a->max_pd = 32764;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 128;
    a->max_res_rd_atom = 1000000;
    a->atomic_cap = IBV_ATOMIC_HCA;
    a->max_pkeys = 128;
    a->phys_port_cnt = 1;
    return 0;
}

int(ibv_query_port)(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr)
{
    (void)context;
    if (port_num != 1)
        return EINVAL;
    struct ibv_port_attr *p = (struct ibv_port_attr *)port_attr;
    p->state = IBV_PORT_ACTIVE;
    p->max_mtu = IBV_MTU_4096;
    p->active_mtu = IBV_MTU_4096;
    p->gid_tbl_len = 1;
    p->max_msg_sz = 1u << 30;
    p->lid = (uint16_t)(1 + proc_id());
    p->sm_lid = 1;
    p->active_width = 2; /* 4x */
    p->active_speed = 4; /* QDR */
    p->phys_state = 5;
    p->link_layer = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
    (void)context;
    if (port_num != 1 || index != 0)
        return EINVAL;
    memset(gid, 0, sizeof *gid);
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[15] = (uint8_t)proc_id();
    return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    return status == IBV_WC_SUCCESS ? "success" : "fake error";
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
    return node_type == IBV_NODE_CA ? "InfiniBand channel adapter" : "unknown";
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
    return port_state == IBV_PORT_ACTIVE ? "PORT_ACTIVE" : "PORT_DOWN";
}

/* ---- PD, MR, AH ------------------------------------------------------------------------ */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    struct ibv_pd *pd = calloc(1, sizeof *pd);
    if (pd)
        pd->context = context;
    return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
    free(pd);
    return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                unsigned int access)
{
    (void)iova;
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL; /* as the spec requires */
        return NULL;
    }
    struct ibv_mr *mr = calloc(1, sizeof *mr);
    if (!mr)
        return NULL;
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    pthread_mutex_lock(&g_lock);
    mr->lkey = mr->rkey = g_next_rkey++;
    g_mrs[mr->rkey % 4096] = mr;
    pthread_mutex_unlock(&g_lock);
    return mr;
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    pthread_mutex_lock(&g_lock);
    if (g_mrs[mr->rkey % 4096] == mr)
        g_mrs[mr->rkey % 4096] = NULL;
    pthread_mutex_unlock(&g_lock);
    free(mr);
    return 0;
}

/* caller holds g_lock */
static int local_sge_ok(const struct ibv_sge *s)
{
    struct ibv_mr *mr = g_mrs[s->lkey % 4096];
    return mr && mr->lkey == s->lkey && s->addr >= (uintptr_t)mr->addr &&
           s->addr + s->length <= (uintptr_t)mr->addr + mr->length;
}

static int local_sge_ok_unlocked(const struct ibv_sge *s)
{
    pthread_mutex_lock(&g_lock);
    int ok = local_sge_ok(s);
    pthread_mutex_unlock(&g_lock);
    return ok;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    if (attr->port_num != 1 || (!attr->is_global && attr->dlid == 0)) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_ah *ah = calloc(1, sizeof *ah);
    if (ah) {
        ah->context = pd->context;
        ah->pd = pd;
    }
    return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    free(ah);
    return 0;
}

/* ---- CQ -------------------------------------------------------------------------------- */

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector)
{
    (void)cq_context;
    (void)channel;
    (void)comp_vector;
    if (cqe < 1 || cqe > 4194303) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_cq *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = cqe;
    c->ring = calloc((size_t)cqe, sizeof *c->ring);
    c->late = calloc((size_t)cqe, sizeof *c->late);
    if (!c->ring || !c->late) {
        free(c->ring);
        free(c->late);
        free(c);
        return NULL;
    }
    c->cq.context = context;
    c->cq.cqe = cqe;
    return &c->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct fake_cq *c = (struct fake_cq *)cq;
    if (c->nrqps)
        return EBUSY; /* QPs still use it */
    free(c->rqps);
    free(c->ring);
    free(c->late);
    free(c);
    return 0;
}

static void cq_push(struct fake_cq *c, const struct ibv_wc *wc, struct fake_qp *qp, uint32_t retire)
{
    if (c->count + c->nlate == c->cap) {
        if (!c->overrun)
            fprintf(stderr, "fakeverbs: CQ overrun (%d entries)\n", c->cap);
        c->overrun = 1;
        return;
    }
    struct fake_cqe *e = &c->ring[(c->head + c->count) % c->cap];
    e->wc = *wc;
    e->qp = qp;
    e->retire = retire;
    c->count++;
}

/* Hold a CQE back (FAKEVERBS_LATE_WRITE_BYTES); it counts against the CQ's size. */
static void cq_push_late(struct fake_cq *c, const struct ibv_wc *wc, struct fake_qp *qp,
                         uint32_t retire)
{
    if (c->count + c->nlate == c->cap) {
        cq_push(c, wc, qp, retire); /* reports the overrun */
        return;
    }
    struct fake_cqe *e = &c->late[c->nlate++];
    e->wc = *wc;
    e->qp = qp;
    e->retire = retire;
    qp->late++;
}

/* The held-back CQEs join the CQ, in the order they were held. */
static void cq_release_late(struct fake_cq *c)
{
    int n = c->nlate;
    c->nlate = 0;
    for (int i = 0; i < n; i++) {
        c->late[i].qp->late--;
        cq_push(c, &c->late[i].wc, c->late[i].qp, c->late[i].retire);
    }
}

/* Move arrived SENDs from the socket into the queues of their QPs (caller holds g_lock). */
static void drain_socket(void)
{
    if (g_sock < 0)
        return;
    struct fake_msg m;
    while (recv(g_sock, &m, sizeof m, MSG_DONTWAIT) == (ssize_t)sizeof m) {
        uint32_t idx = m.dest_qpn & 0x1FFFu;
        struct fake_qp *q = (m.dest_qpn >> 13) == proc_id() ? g_qps[idx] : NULL;
        if (!q || q->qp.state < IBV_QPS_RTR)
            continue; /* no such QP (any more): the wire drops it */
        struct pending *p = malloc(sizeof *p);
        if (!p)
            continue;
        p->m = m;
        p->next = NULL;
        if (q->msgs_tail)
            q->msgs_tail->next = p;
        else
            q->msgs = p;
        q->msgs_tail = p;
    }
}

/* Move arrived SENDs into the queues of their QPs, then complete those that meet a
 * posted receive on a QP whose receive CQ is c. */
static void deliver(struct fake_cq *c)
{
    if (c->nrqps == 0)
        return; /* a send-only CQ */
    pthread_mutex_lock(&g_lock);
    drain_socket();
    for (int i = 0; i < c->nrqps; i++) {
        struct fake_qp *q = c->rqps[i];
        while (q->msgs && q->rq_count > 0) {
            struct pending *p = q->msgs;
            q->msgs = p->next;
            if (!q->msgs)
                q->msgs_tail = NULL;
            struct fake_rwr *r = &q->rq[q->rq_head];
            q->rq_head = (q->rq_head + 1) % q->max_recv;
            q->rq_count--;
            uint32_t grh = q->qp.qp_type == IBV_QPT_UD ? 40u : 0u;
            struct ibv_wc wc;
            memset(&wc, 0, sizeof wc);
            wc.wr_id = r->wr_id;
            wc.opcode = IBV_WC_RECV;
            wc.qp_num = q->qp.qp_num;
            wc.src_qp = p->m.src_qpn;
            wc.byte_len = p->m.len + grh;
            if (p->m.len + grh > r->len)
                wc.status = IBV_WC_LOC_LEN_ERR;
            if (p->m.has_imm) {
                wc.wc_flags = IBV_WC_WITH_IMM;
                wc.imm_data = p->m.imm;
            }
            cq_push(c, &wc, q, 0);
            free(p);
        }
    }
    pthread_mutex_unlock(&g_lock);
}

static int fake_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    struct fake_cq *c = (struct fake_cq *)cq;
    deliver(c);
    if (c->count == 0 && c->nlate > 0)
        cq_release_late(c);
    if (c->overrun)
        return -1;
    int n = 0;
    while (n < num_entries && c->count > 0) {
        struct fake_cqe *e = &c->ring[c->head];
        c->head = (c->head + 1) % c->cap;
        c->count--;
        if (e->qp && e->retire) {
            if (e->retire > e->qp->outstanding) {
                fprintf(stderr, "fakeverbs: send queue accounting underflow\n");
                return -1;
            }
            e->qp->outstanding -= e->retire;
        }
        wc[n++] = e->wc;
    }
    if (n == 0 && c->nrqps > 0)
        sched_yield(); /* waiting for the other process: let it run on a busy machine */
    return n;
}

/* ---- QP -------------------------------------------------------------------------------- */

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
    if ((ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UD) || !ia->send_cq ||
        !ia->recv_cq || ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > 16351 ||
        ia->cap.max_recv_wr < 1 || ia->cap.max_recv_wr > 16351 || ia->cap.max_send_sge < 1 ||
        ia->cap.max_inline_data > 512) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_qp *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->rq = calloc(ia->cap.max_recv_wr, sizeof *q->rq);
    if (!q->rq) {
        free(q);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    int idx = -1;
    for (int i = 1; i < FAKE_MAX_QPS; i++)
        if (!g_qps[i]) {
            idx = i;
            break;
        }
    if (idx < 0 || ensure_socket() != 0) {
        pthread_mutex_unlock(&g_lock);
        free(q->rq);
        free(q);
        errno = ENOMEM;
        return NULL;
    }
    struct fake_cq *rc = (struct fake_cq *)ia->recv_cq;
    if (rc->nrqps == rc->caprqps) {
        int cap = rc->caprqps ? 2 * rc->caprqps : 16;
        struct fake_qp **n = realloc(rc->rqps, (size_t)cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_lock);
            free(q->rq);
            free(q);
            errno = ENOMEM;
            return NULL;
        }
        rc->rqps = n;
        rc->caprqps = cap;
    }
    rc->rqps[rc->nrqps++] = q;
    g_qps[idx] = q;
    pthread_mutex_unlock(&g_lock);
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_type = ia->qp_type;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_num = (proc_id() << 13) | (uint32_t)idx;
    q->max_send = ia->cap.max_send_wr;
    q->max_recv = ia->cap.max_recv_wr;
    if (ia->cap.max_inline_data > 0 && ia->cap.max_inline_data < 64)
        ia->cap.max_inline_data = 64; /* providers may round up */
    q->max_inline = ia->cap.max_inline_data;
    return &q->qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    int rc = qp->qp_type == IBV_QPT_RC;
    int need;
    if (!(mask & IBV_QP_STATE))
        return EINVAL;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        if (qp->state != IBV_QPS_RESET)
            return EINVAL;
        need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (rc ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY);
        if ((mask & need) != need || attr->port_num != 1)
            return EINVAL;
        if (!rc && attr->qkey == 0)
            return EINVAL;
        break;
    case IBV_QPS_RTR:
        if (qp->state != IBV_QPS_INIT)
            return EINVAL;
        need = rc ? IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER
                  : 0;
        if ((mask & need) != need)
            return EINVAL;
        if (rc) {
            if (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096 ||
                attr->dest_qp_num == 0 || attr->dest_qp_num > 0xFFFFFF ||
                attr->rq_psn > 0xFFFFFF || attr->max_dest_rd_atomic > 16 ||
                attr->ah_attr.port_num != 1 || attr->ah_attr.dlid == 0)
                return EINVAL;
            q->dest_qpn = attr->dest_qp_num;
        }
        break;
    case IBV_QPS_RTS:
        if (qp->state != IBV_QPS_RTR)
            return EINVAL;
        need = IBV_QP_SQ_PSN | (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                         IBV_QP_MAX_QP_RD_ATOMIC
                                   : 0);
        if ((mask & need) != need || attr->sq_psn > 0xFFFFFF ||
            (rc && (attr->retry_cnt > 7 || attr->rnr_retry > 7 || attr->max_rd_atomic > 128)))
            return EINVAL;
        break;
    default:
        return EINVAL;
    }
    qp->state = attr->qp_state;
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    pthread_mutex_lock(&g_lock);
    g_qps[qp->qp_num & 0x1FFFu] = NULL;
    struct fake_cq *rc = (struct fake_cq *)qp->recv_cq;
    for (int i = 0; i < rc->nrqps; i++)
        if (rc->rqps[i] == q) {
            rc->rqps[i] = rc->rqps[--rc->nrqps];
            break;
        }
    while (q->msgs) {
        struct pending *p = q->msgs;
        q->msgs = p->next;
        free(p);
    }
    pthread_mutex_unlock(&g_lock);
    free(q->rq);
    free(q);
    return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    pthread_mutex_lock(&g_lock);
    for (; wr; wr = wr->next) {
        if (qp->state < IBV_QPS_INIT || q->rq_count == q->max_recv || wr->num_sge != 1 ||
            !local_sge_ok(wr->sg_list)) {
            pthread_mutex_unlock(&g_lock);
            *bad = wr;
            return q->rq_count == q->max_recv ? ENOMEM : EINVAL;
        }
        struct fake_rwr *r = &q->rq[(q->rq_head + q->rq_count) % q->max_recv];
        r->wr_id = wr->wr_id;
        r->len = wr->sg_list->length;
        q->rq_count++;
    }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static int remote_ok(uint64_t addr, uint32_t rkey, uint32_t len)
{
    /* the region lives in the other process: only the key shape can be checked */
    (void)addr;
    (void)len;
    return rkey >= FAKE_RKEY_BASE;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    struct fake_cq *scq = (struct fake_cq *)qp->send_cq;
    for (; wr; wr = wr->next) {
        int err = 0;
        if (qp->state != IBV_QPS_RTS || wr->num_sge != 1)
            err = EINVAL;
        else if (q->outstanding == q->max_send)
            err = ENOMEM; /* send queue full: the caller's accounting is wrong */
        else if ((wr->send_flags & IBV_SEND_INLINE) && wr->sg_list->length > q->max_inline)
            err = EINVAL;
        else if (!(wr->send_flags & IBV_SEND_INLINE) && !local_sge_ok_unlocked(wr->sg_list))
            err = EINVAL;
        if (!err) {
            switch (wr->opcode) {
            case IBV_WR_RDMA_READ:
            case IBV_WR_RDMA_WRITE:
                if (qp->qp_type != IBV_QPT_RC ||
                    !remote_ok(wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, wr->sg_list->length) ||
                    (wr->opcode == IBV_WR_RDMA_READ && (wr->send_flags & IBV_SEND_INLINE)))
                    err = EINVAL;
                break;
            case IBV_WR_ATOMIC_CMP_AND_SWP:
            case IBV_WR_ATOMIC_FETCH_AND_ADD:
                if (qp->qp_type != IBV_QPT_RC || wr->sg_list->length != 8 ||
                    (wr->wr.atomic.remote_addr & 7) || (wr->sg_list->addr & 7) ||
                    !remote_ok(wr->wr.atomic.remote_addr, wr->wr.atomic.rkey, 8))
                    err = EINVAL;
                break;
            case IBV_WR_SEND:
            case IBV_WR_SEND_WITH_IMM: {
                if (qp->qp_type == IBV_QPT_UD &&
                    (!wr->wr.ud.ah || wr->wr.ud.remote_qkey == 0 || wr->sg_list->length > 4096)) {
                    err = EINVAL;
                    break;
                }
                struct fake_msg m;
                memset(&m, 0, sizeof m);
                m.dest_qpn = qp->qp_type == IBV_QPT_UD ? wr->wr.ud.remote_qpn : q->dest_qpn;
                m.src_qpn = qp->qp_num;
                m.len = wr->sg_list->length;
                m.has_imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
                m.imm = wr->imm_data;
                struct sockaddr_un a;
                socklen_t alen;
                sock_addr(m.dest_qpn >> 13, &a, &alen);
                pthread_mutex_lock(&g_lock);
                if (qp->qp_type == IBV_QPT_UD && ud_drop_every() > 0 &&
                    ++g_ud_sends % ud_drop_every() == 0) {
                    pthread_mutex_unlock(&g_lock); /* lost on the wire; it still completes */
                    break;
                }
                /* a full peer queue (a few datagrams: net.unix.max_dgram_qlen) holds the
                 * sender back, as link-level flow control does, while this process takes
                 * in what arrives for it (two processes sending to each other must not
                 * wait on each other); a peer that takes nothing for a second, or is gone,
                 * loses the message like a broken wire */
                struct timespec t0 = {0, 0};
                for (unsigned spins = 0;; spins++) {
                    if (sendto(g_sock, &m, sizeof m, MSG_DONTWAIT, (struct sockaddr *)&a,
                               alen) >= 0 ||
                        (errno != EAGAIN && errno != EWOULDBLOCK))
                        break;
                    struct timespec t;
                    clock_gettime(CLOCK_MONOTONIC, &t);
                    if (spins == 0)
                        t0 = t;
                    else if ((long long)(t.tv_sec - t0.tv_sec) * 1000000000LL +
                                 (t.tv_nsec - t0.tv_nsec) > 1000000000LL)
                        break;
                    drain_socket();
                    pthread_mutex_unlock(&g_lock);
                    sched_yield();
                    pthread_mutex_lock(&g_lock);
                }
                pthread_mutex_unlock(&g_lock);
                break;
            }
            default:
                err = EINVAL;
            }
        }
        if (err) {
            *bad = wr;
            return err;
        }
        q->outstanding++;
        if (wr->send_flags & IBV_SEND_SIGNALED) {
            struct ibv_wc wc;
            memset(&wc, 0, sizeof wc);
            wc.wr_id = wr->wr_id;
            wc.status = IBV_WC_SUCCESS;
            wc.qp_num = qp->qp_num;
            wc.opcode = wr->opcode == IBV_WR_RDMA_READ           ? IBV_WC_RDMA_READ
                        : wr->opcode == IBV_WR_RDMA_WRITE         ? IBV_WC_RDMA_WRITE
                        : wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP
                        : wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD
                                                                    : IBV_WC_SEND;
            wc.byte_len = wr->sg_list->length;
            if (q->late)
                cq_release_late(scq); /* this QP's earlier completions come first */
            if (wr->opcode == IBV_WR_RDMA_WRITE && late_write_bytes() > 0 &&
                wr->sg_list->length >= late_write_bytes())
                cq_push_late(scq, &wc, q, q->since_signaled + 1);
            else
                cq_push(scq, &wc, q, q->since_signaled + 1);
            q->since_signaled = 0;
        } else {
            q->since_signaled++;
        }
    }
    return 0;
}
