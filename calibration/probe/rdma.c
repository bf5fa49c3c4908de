/* rdma.c - see rdma.h. */
#include "rdma.h"
#include "hostinfo.h"
#include "plan.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void gid_to_str(const uint8_t gid[16], char *out, size_t outlen)
{
    snprintf(out, outlen,
             "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
             gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10],
             gid[11], gid[12], gid[13], gid[14], gid[15]);
}

static int gid_is_zero(const uint8_t g[16])
{
    for (int i = 0; i < 16; i++)
        if (g[i])
            return 0;
    return 1;
}

static int gid_is_ipv4_mapped(const uint8_t g[16])
{
    for (int i = 0; i < 10; i++)
        if (g[i])
            return 0;
    return g[10] == 0xff && g[11] == 0xff;
}

static void gid_type_of(const struct rdev *d, int index, char *out, size_t outlen)
{
    char path[256];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", d->name,
             d->ib_port, index);
    if (read_first_line(path, out, outlen) != 0)
        out[0] = '\0';
}

/* RoCE: the first RoCE v2 IPv4-mapped GID, else the first RoCE v2 GID, else the first
 * non-zero GID, else 0. */
static int pick_roce_gid(struct rdev *d)
{
    int best = -1, best_rank = 0;
    int len = d->port_attr.gid_tbl_len > 256 ? 256 : d->port_attr.gid_tbl_len;
    for (int i = 0; i < len; i++) {
        union ibv_gid g;
        if (ibv_query_gid(d->ctx, (uint8_t)d->ib_port, i, &g) != 0 || gid_is_zero(g.raw))
            continue;
        char type[32];
        gid_type_of(d, i, type, sizeof type);
        int v2 = strstr(type, "v2") != NULL;
        int rank = v2 && gid_is_ipv4_mapped(g.raw) ? 3 : v2 ? 2 : 1;
        if (rank > best_rank) {
            best_rank = rank;
            best = i;
        }
        if (rank == 3)
            break;
    }
    return best < 0 ? 0 : best;
}

int rdev_open(struct rdev *d, const char *name, int ib_port, int gid_index, char *err,
              size_t errlen)
{
    memset(d, 0, sizeof *d);
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (!list || num <= 0) {
        if (list)
            ibv_free_device_list(list);
        snprintf(err, errlen, "no RDMA device found");
        return RDEV_NODEV;
    }
    struct ibv_device *dev = NULL;
    if (name && *name) {
        for (int i = 0; i < num; i++)
            if (strcmp(ibv_get_device_name(list[i]), name) == 0)
                dev = list[i];
        if (!dev) {
            char avail[256] = "";
            for (int i = 0; i < num; i++) {
                size_t l = strlen(avail);
                snprintf(avail + l, sizeof avail - l, "%s%s", i ? ", " : "",
                         ibv_get_device_name(list[i]));
            }
            snprintf(err, errlen, "RDMA device '%s' not found (available: %s)", name, avail);
            ibv_free_device_list(list);
            return RDEV_NODEV;
        }
    } else {
        dev = list[0];
    }
    copy_str(d->name, sizeof d->name, ibv_get_device_name(dev));
    copy_str(d->node_type, sizeof d->node_type, ibv_node_type_str(dev->node_type));
    d->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!d->ctx) {
        snprintf(err, errlen, "cannot open RDMA device %s: %s", d->name, strerror(errno));
        return RDEV_ERR;
    }
    d->ib_port = ib_port;
    if (ibv_query_device(d->ctx, &d->attr) != 0) {
        snprintf(err, errlen, "ibv_query_device(%s) failed: %s", d->name, strerror(errno));
        rdev_close(d);
        return RDEV_ERR;
    }
    if (ib_port < 1 || ib_port > d->attr.phys_port_cnt) {
        snprintf(err, errlen, "device %s has %d port(s); --ib-port %d does not exist", d->name,
                 d->attr.phys_port_cnt, ib_port);
        rdev_close(d);
        return RDEV_ERR;
    }
    if (ibv_query_port(d->ctx, (uint8_t)ib_port, &d->port_attr) != 0) {
        snprintf(err, errlen, "ibv_query_port(%s, %d) failed: %s", d->name, ib_port,
                 strerror(errno));
        rdev_close(d);
        return RDEV_ERR;
    }
    if (d->port_attr.state != IBV_PORT_ACTIVE) {
        snprintf(err, errlen, "port %d of %s is not active (state %s)", ib_port, d->name,
                 ibv_port_state_str(d->port_attr.state));
        rdev_close(d);
        return RDEV_ERR;
    }
    d->pd = ibv_alloc_pd(d->ctx);
    if (!d->pd) {
        snprintf(err, errlen, "ibv_alloc_pd(%s) failed: %s", d->name, strerror(errno));
        rdev_close(d);
        return RDEV_ERR;
    }

    struct port_info *p = &d->local;
    p->lid = d->port_attr.lid;
    p->mtu = (uint32_t)d->port_attr.active_mtu;
    p->link_layer = d->port_attr.link_layer;
    int is_eth = d->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (gid_index >= 0) {
        if (gid_index >= d->port_attr.gid_tbl_len) {
            snprintf(err, errlen, "--gid-index %d is out of range (the GID table has %d entries)",
                     gid_index, d->port_attr.gid_tbl_len);
            rdev_close(d);
            return RDEV_ERR;
        }
        p->gid_index = (uint32_t)gid_index;
        p->use_grh = 1;
    } else {
        p->gid_index = is_eth ? (uint32_t)pick_roce_gid(d) : 0;
        p->use_grh = is_eth ? 1 : 0;
    }
    union ibv_gid g;
    memset(&g, 0, sizeof g);
    if (ibv_query_gid(d->ctx, (uint8_t)ib_port, (int)p->gid_index, &g) != 0 && p->use_grh) {
        snprintf(err, errlen, "ibv_query_gid(%s, index %u) failed: %s", d->name, p->gid_index,
                 strerror(errno));
        rdev_close(d);
        return RDEV_ERR;
    }
    memcpy(p->gid, g.raw, 16);
    if (p->use_grh && gid_is_zero(p->gid)) {
        snprintf(err, errlen, "GID index %u of %s port %d is empty; choose one with --gid-index",
                 p->gid_index, d->name, ib_port);
        rdev_close(d);
        return RDEV_ERR;
    }
    gid_type_of(d, (int)p->gid_index, d->gid_type, sizeof d->gid_type);
    p->max_qp_rd_atom = (uint32_t)d->attr.max_qp_rd_atom;
    p->max_qp_init_rd_atom = (uint32_t)d->attr.max_qp_init_rd_atom;
    p->max_qp = (uint32_t)d->attr.max_qp;
    p->max_qp_wr = (uint32_t)d->attr.max_qp_wr;
    p->max_cqe = (uint32_t)d->attr.max_cqe;
    return RDEV_OK;
}

void rdev_close(struct rdev *d)
{
    if (d->pd)
        ibv_dealloc_pd(d->pd);
    if (d->ctx)
        ibv_close_device(d->ctx);
    d->pd = NULL;
    d->ctx = NULL;
}

static void guid_str(uint64_t be_guid, char *out, size_t outlen)
{
    uint8_t b[8];
    memcpy(b, &be_guid, 8); /* stored in network byte order */
    snprintf(out, outlen, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4],
             b[5], b[6], b[7]);
}

static const char *atomic_cap_str(enum ibv_atomic_cap c)
{
    switch (c) {
    case IBV_ATOMIC_NONE: return "NONE";
    case IBV_ATOMIC_HCA: return "HCA";
    case IBV_ATOMIC_GLOB: return "GLOB";
    default: return "unknown";
    }
}

static void sysfs_str(struct jw *w, const char *key, const char *dev, const char *leaf)
{
    char path[256], buf[128];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/%s", dev, leaf);
    if (read_first_line(path, buf, sizeof buf) == 0)
        jw_kv_str(w, key, buf);
    else
        jw_kv_null(w, key);
}

void rdev_write_device_fields(const struct rdev *d, struct jw *w)
{
    const struct ibv_device_attr *a = &d->attr;
    char buf[64];
    jw_kv_str(w, "name", d->name);
    jw_kv_str(w, "node_type", d->node_type);
    sysfs_str(w, "hca_type", d->name, "hca_type");
    sysfs_str(w, "board_id", d->name, "board_id");
    jw_kv_str(w, "fw_ver", a->fw_ver);
    guid_str(a->node_guid, buf, sizeof buf);
    jw_kv_str(w, "node_guid", buf);
    snprintf(buf, sizeof buf, "0x%04x", a->vendor_id);
    jw_kv_str(w, "vendor_id", buf);
    jw_kv_uint(w, "vendor_part_id", a->vendor_part_id);
    jw_kv_uint(w, "hw_ver", a->hw_ver);
    jw_kv_uint(w, "phys_port_cnt", a->phys_port_cnt);
    jw_kv_uint(w, "max_mr_size", a->max_mr_size);
    jw_kv_uint(w, "page_size_cap", a->page_size_cap);
    jw_kv_int(w, "max_qp", a->max_qp);
    jw_kv_int(w, "max_qp_wr", a->max_qp_wr);
    snprintf(buf, sizeof buf, "0x%08x", (unsigned)a->device_cap_flags);
    jw_kv_str(w, "device_cap_flags", buf);
    jw_kv_int(w, "max_sge", a->max_sge);
    jw_kv_int(w, "max_cq", a->max_cq);
    jw_kv_int(w, "max_cqe", a->max_cqe);
    jw_kv_int(w, "max_mr", a->max_mr);
    jw_kv_int(w, "max_pd", a->max_pd);
    jw_kv_int(w, "max_qp_rd_atom", a->max_qp_rd_atom);
    jw_kv_int(w, "max_qp_init_rd_atom", a->max_qp_init_rd_atom);
    jw_kv_int(w, "max_res_rd_atom", a->max_res_rd_atom);
    jw_kv_str(w, "atomic_cap", atomic_cap_str(a->atomic_cap));
    jw_kv_int(w, "max_srq", a->max_srq);
    jw_kv_int(w, "max_srq_wr", a->max_srq_wr);
    jw_kv_int(w, "max_pkeys", a->max_pkeys);
    jw_kv_int(w, "local_ca_ack_delay", a->local_ca_ack_delay);
    sysfs_str(w, "numa_node", d->name, "device/numa_node");
    sysfs_str(w, "pcie_link_speed", d->name, "device/current_link_speed");
    sysfs_str(w, "pcie_link_width", d->name, "device/current_link_width");
    sysfs_str(w, "pcie_max_link_speed", d->name, "device/max_link_speed");
    sysfs_str(w, "pcie_max_link_width", d->name, "device/max_link_width");
}

void rdev_write_link_fields(const struct rdev *d, struct jw *w)
{
    const struct ibv_port_attr *p = &d->port_attr;
    char gid[64];
    int lanes = ib_width_to_lanes(p->active_width);
    int is_eth = p->link_layer == IBV_LINK_LAYER_ETHERNET;
    jw_kv_str(w, "device", d->name);
    jw_kv_int(w, "port", d->ib_port);
    jw_kv_str(w, "state", ibv_port_state_str(p->state));
    jw_kv_str(w, "link_layer", is_eth ? "Ethernet" : "IB");
    jw_kv_int(w, "active_mtu", ib_mtu_enum_to_bytes(p->active_mtu));
    jw_kv_int(w, "max_mtu", ib_mtu_enum_to_bytes(p->max_mtu));
    jw_kv_str(w, "active_speed", ib_speed_name(p->active_speed));
    jw_kv_int(w, "active_speed_code", p->active_speed);
    jw_kv_int(w, "active_width", lanes);
    jw_kv_double(w, "rate_gbps", lanes * ib_speed_nominal_gbps(p->active_speed));
    /* On Ethernet the speed/width pair is the provider's approximation of the Ethernet
     * rate; there is no InfiniBand line coding to take off. */
    jw_kv_double(w, "data_rate_gbps", lanes * (is_eth ? ib_speed_nominal_gbps(p->active_speed)
                                                      : ib_speed_data_gbps(p->active_speed)));
    jw_kv_int(w, "lid", p->lid);
    jw_kv_int(w, "sm_lid", p->sm_lid);
    jw_kv_int(w, "lmc", p->lmc);
    jw_kv_uint(w, "max_msg_sz", p->max_msg_sz);
    jw_kv_int(w, "gid_tbl_len", p->gid_tbl_len);
    jw_kv_int(w, "gid_index", (long long)d->local.gid_index);
    gid_to_str(d->local.gid, gid, sizeof gid);
    jw_kv_str(w, "gid", gid);
    jw_kv_str(w, "gid_type", d->gid_type[0] ? d->gid_type : NULL);
    jw_kv_bool(w, "use_grh", (int)d->local.use_grh);
}

/* ---- memory ---------------------------------------------------------------------- */

#define HUGE_2M (2u << 20)

int mem_alloc(struct rdev *d, struct mem *m, size_t len, size_t page_size, char *err,
              size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (page_size != 4096 && page_size != HUGE_2M) {
        snprintf(err, errlen, "unsupported page size %zu", page_size);
        return -1;
    }
    len = round_up(len ? len : 1, page_size);
    m->len = len;
    m->page_size = page_size;
    if (page_size == HUGE_2M) {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE;
#ifdef MAP_HUGE_SHIFT
        flags |= 21 << MAP_HUGE_SHIFT;
#endif
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (p != MAP_FAILED) {
            m->map = m->buf = p;
            m->map_len = len;
            copy_str(m->backing, sizeof m->backing, "hugetlb");
        } else {
            /* transparent huge pages: over-allocate to align on 2 MiB, then advise */
            size_t ml = len + HUGE_2M;
            p = mmap(NULL, ml, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
                snprintf(err, errlen, "cannot map %zu bytes: %s", len, strerror(errno));
                return -1;
            }
            m->map = p;
            m->map_len = ml;
            m->buf = (void *)round_up((size_t)(uintptr_t)p, HUGE_2M);
#ifdef MADV_HUGEPAGE
            madvise(m->buf, len, MADV_HUGEPAGE);
#endif
            copy_str(m->backing, sizeof m->backing, "thp");
        }
    } else {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            snprintf(err, errlen, "cannot map %zu bytes: %s", len, strerror(errno));
            return -1;
        }
        m->map = m->buf = p;
        m->map_len = len;
#ifdef MADV_NOHUGEPAGE
        madvise(p, len, MADV_NOHUGEPAGE); /* keep real 4 KiB pages */
#endif
        copy_str(m->backing, sizeof m->backing, "base");
    }
    memset(m->buf, 0, len); /* fault every page in before registration */
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (d->attr.atomic_cap != IBV_ATOMIC_NONE)
        access |= IBV_ACCESS_REMOTE_ATOMIC;
    m->mr = ibv_reg_mr(d->pd, m->buf, len, access);
    if (!m->mr) {
        snprintf(err, errlen, "ibv_reg_mr(%zu bytes) failed: %s", len, strerror(errno));
        munmap(m->map, m->map_len);
        memset(m, 0, sizeof *m);
        return -1;
    }
    return 0;
}

void mem_free(struct mem *m)
{
    if (m->mr)
        ibv_dereg_mr(m->mr);
    if (m->map)
        munmap(m->map, m->map_len);
    memset(m, 0, sizeof *m);
}

/* ---- queue pairs ----------------------------------------------------------------- */

static uint32_t clamp_u32(uint64_t v, uint32_t lo, uint32_t hi)
{
    return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

int qpset_create(struct rdev *d, struct qpset *s, int n, int transport, int ncq,
                 uint32_t sq_depth, uint32_t rq_depth, uint32_t max_inline, uint32_t seed,
                 char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (n < 1 || ncq < 1 || ncq > n) {
        snprintf(err, errlen, "bad QP set (%d QPs, %d CQs)", n, ncq);
        return -1;
    }
    s->n = n;
    s->transport = transport;
    s->ncq = ncq;
    s->sq_depth = clamp_u32(sq_depth, 1, (uint32_t)d->attr.max_qp_wr);
    s->rq_depth = clamp_u32(rq_depth, 1, (uint32_t)d->attr.max_qp_wr);
    s->qp = calloc((size_t)n, sizeof *s->qp);
    s->psn = calloc((size_t)n, sizeof *s->psn);
    s->scq = calloc((size_t)ncq, sizeof *s->scq);
    s->rcq = calloc((size_t)ncq, sizeof *s->rcq);
    if (!s->qp || !s->psn || !s->scq || !s->rcq) {
        snprintf(err, errlen, "out of memory");
        qpset_destroy(s);
        return -1;
    }
    int per_cq = (n + ncq - 1) / ncq;
    uint32_t max_cqe = (uint32_t)d->attr.max_cqe;
    s->scq_size = clamp_u32((uint64_t)per_cq * s->sq_depth + 16, 16, max_cqe);
    uint32_t rcq_size = clamp_u32((uint64_t)per_cq * s->rq_depth + 16, 16, max_cqe);
    for (int i = 0; i < ncq; i++) {
        s->scq[i] = ibv_create_cq(d->ctx, (int)s->scq_size, NULL, NULL, 0);
        s->rcq[i] = ibv_create_cq(d->ctx, (int)rcq_size, NULL, NULL, 0);
        if (!s->scq[i] || !s->rcq[i]) {
            snprintf(err, errlen, "ibv_create_cq(%u entries) failed: %s", s->scq_size,
                     strerror(errno));
            qpset_destroy(s);
            return -1;
        }
    }
    struct rng r;
    rng_seed(&r, seed);
    s->max_inline = max_inline;
    for (int i = 0; i < n; i++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        /* thread b of a throughput point posts to block b of the QPs and polls CQ b only:
         * every completion of its QPs must land there (its wr_id is a QP index local to
         * the thread) */
        int b = qp_block_of(n, ncq, i);
        ia.send_cq = s->scq[b];
        ia.recv_cq = s->rcq[b];
        ia.qp_type = transport == TP_UD ? IBV_QPT_UD : IBV_QPT_RC;
        ia.sq_sig_all = 0;
        ia.cap.max_send_wr = s->sq_depth;
        ia.cap.max_recv_wr = s->rq_depth;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = max_inline;
        s->qp[i] = ibv_create_qp(d->pd, &ia);
        if (!s->qp[i]) {
            snprintf(err, errlen,
                     "ibv_create_qp #%d of %d (%s, send depth %u, inline %u) failed: %s", i + 1,
                     n, transport == TP_UD ? "UD" : "RC", s->sq_depth, max_inline,
                     strerror(errno));
            qpset_destroy(s);
            return -1;
        }
        if (ia.cap.max_inline_data < s->max_inline)
            s->max_inline = ia.cap.max_inline_data;
        s->psn[i] = (uint32_t)(rng_next(&r) & 0xFFFFFFu);
    }
    return 0;
}

int qpset_to_init(struct rdev *d, struct qpset *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->n; i++) {
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof a);
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = (uint8_t)d->ib_port;
        int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (s->transport == TP_UD) {
            a.qkey = UD_QKEY;
            mask |= IBV_QP_QKEY;
        } else {
            a.qp_access_flags =
                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
            if (d->attr.atomic_cap != IBV_ATOMIC_NONE)
                a.qp_access_flags |= IBV_ACCESS_REMOTE_ATOMIC;
            mask |= IBV_QP_ACCESS_FLAGS;
        }
        int rc = ibv_modify_qp(s->qp[i], &a, mask);
        if (rc) {
            snprintf(err, errlen, "QP %u to INIT failed: %s", s->qp[i]->qp_num, strerror(rc));
            return -1;
        }
    }
    return 0;
}

static void fill_ah_attr(struct rdev *d, const struct port_info *remote, struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof *ah);
    ah->dlid = remote->lid;
    ah->sl = 0;
    ah->src_path_bits = 0;
    ah->port_num = (uint8_t)d->ib_port;
    if (d->local.use_grh || remote->use_grh) {
        ah->is_global = 1;
        memcpy(ah->grh.dgid.raw, remote->gid, 16);
        ah->grh.sgid_index = (uint8_t)d->local.gid_index;
        ah->grh.hop_limit = 64;
        ah->grh.traffic_class = 0;
        ah->grh.flow_label = 0;
    }
}

struct ibv_ah *ah_create(struct rdev *d, const struct port_info *remote)
{
    struct ibv_ah_attr ah;
    fill_ah_attr(d, remote, &ah);
    return ibv_create_ah(d->pd, &ah);
}

enum ibv_mtu path_mtu(const struct port_info *a, const struct port_info *b)
{
    uint32_t m = a->mtu < b->mtu ? a->mtu : b->mtu;
    if (m < IBV_MTU_256)
        m = IBV_MTU_256;
    if (m > IBV_MTU_4096)
        m = IBV_MTU_4096;
    return (enum ibv_mtu)m;
}

int qp_connect(struct rdev *d, struct ibv_qp *qp, int transport, uint32_t my_psn,
               uint32_t remote_qpn, uint32_t remote_psn, const struct port_info *remote,
               enum ibv_mtu mtu, int max_rd_atomic, int max_dest_rd_atomic, char *err,
               size_t errlen)
{
    struct ibv_qp_attr a;
    int rc;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    if (transport == TP_UD) {
        rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    } else {
        a.path_mtu = mtu;
        a.dest_qp_num = remote_qpn;
        a.rq_psn = remote_psn;
        a.max_dest_rd_atomic = (uint8_t)max_dest_rd_atomic;
        a.min_rnr_timer = 12; /* 0.64 ms */
        fill_ah_attr(d, remote, &a.ah_attr);
        rc = ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    }
    if (rc) {
        snprintf(err, errlen, "QP %u to RTR failed: %s", qp->qp_num, strerror(rc));
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = my_psn;
    if (transport == TP_UD) {
        rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    } else {
        a.timeout = 14;  /* 4.096 us * 2^14 = 67 ms local ACK timeout */
        a.retry_cnt = 7;
        a.rnr_retry = 7; /* retry forever on receiver-not-ready */
        a.max_rd_atomic = (uint8_t)max_rd_atomic;
        rc = ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc) {
        snprintf(err, errlen, "QP %u to RTS failed: %s", qp->qp_num, strerror(rc));
        return -1;
    }
    return 0;
}

void qpset_destroy(struct qpset *s)
{
    if (s->qp)
        for (int i = 0; i < s->n; i++)
            if (s->qp[i])
                ibv_destroy_qp(s->qp[i]);
    for (int i = 0; i < s->ncq; i++) {
        if (s->scq && s->scq[i])
            ibv_destroy_cq(s->scq[i]);
        if (s->rcq && s->rcq[i])
            ibv_destroy_cq(s->rcq[i]);
    }
    free(s->qp);
    free(s->psn);
    free(s->scq);
    free(s->rcq);
    memset(s, 0, sizeof *s);
}
