/* rdma.h - libibverbs helpers: device, memory regions, QP state transitions. */
#ifndef RNP_RDMA_H
#define RNP_RDMA_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "jsonout.h"
#include "proto.h"

enum { RDEV_OK = 0, RDEV_ERR = -1, RDEV_NODEV = -2 };

struct rdev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr attr;
    struct ibv_port_attr port_attr;
    char name[64];
    char node_type[32];
    int ib_port;
    struct port_info local;
    char gid_type[32]; /* from sysfs: "IB/RoCE v1", "RoCE v2", or "" */
};

/* Open the device (name NULL/"" = first), query it and its port, pick the GID.
 * Returns RDEV_OK, RDEV_NODEV ("no RDMA device found") or RDEV_ERR (reason in err). */
int rdev_open(struct rdev *d, const char *name, int ib_port, int gid_index, char *err,
              size_t errlen);
void rdev_close(struct rdev *d);
/* Append device / link fields to an open JSON object. */
void rdev_write_device_fields(const struct rdev *d, struct jw *w);
void rdev_write_link_fields(const struct rdev *d, struct jw *w);
void gid_to_str(const uint8_t gid[16], char *out, size_t outlen);

struct mem {
    void *buf;
    size_t len;
    size_t page_size;
    char backing[16]; /* "base" (4 KiB, THP disabled), "hugetlb", "thp" */
    void *map;        /* what to munmap */
    size_t map_len;
    struct ibv_mr *mr;
};

/* Allocate len bytes backed by page_size pages (4096 or 2 MiB) and register them.
 * 2 MiB first tries hugetlbfs, then transparent huge pages (backing "thp"). */
int mem_alloc(struct rdev *d, struct mem *m, size_t len, size_t page_size, char *err,
              size_t errlen);
void mem_free(struct mem *m);

struct qpset {
    int n;
    int transport; /* TP_RC / TP_UD */
    int ncq;       /* QP i uses scq[b] and rcq[b], b = qp_block_of(n, ncq, i) (plan.h):
                    * contiguous blocks, the same QPs a posting thread owns; ncq == n
                    * gives every QP its own CQs (the coro sweep's per_qp points) */
    struct ibv_qp **qp;
    uint32_t *psn;
    struct ibv_cq **scq, **rcq;
    uint32_t sq_depth, rq_depth;
    uint32_t max_inline;  /* as granted by the provider */
    uint32_t scq_size;    /* entries of each send CQ */
};

int qpset_create(struct rdev *d, struct qpset *s, int n, int transport, int ncq,
                 uint32_t sq_depth, uint32_t rq_depth, uint32_t max_inline, uint32_t seed,
                 char *err, size_t errlen);
int qpset_to_init(struct rdev *d, struct qpset *s, char *err, size_t errlen);
/* RC: RTR then RTS to (remote_qpn, remote_psn). UD: RTR then RTS. */
int qp_connect(struct rdev *d, struct ibv_qp *qp, int transport, uint32_t my_psn,
               uint32_t remote_qpn, uint32_t remote_psn, const struct port_info *remote,
               enum ibv_mtu mtu, int max_rd_atomic, int max_dest_rd_atomic, char *err,
               size_t errlen);
struct ibv_ah *ah_create(struct rdev *d, const struct port_info *remote);
void qpset_destroy(struct qpset *s);

/* Path MTU both sides can use. */
enum ibv_mtu path_mtu(const struct port_info *a, const struct port_info *b);

#endif
