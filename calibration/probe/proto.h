/* proto.h - messages of the TCP bootstrap protocol between client and server
 * (device-free, unit tested). All integers are big-endian on the wire (wire.h).
 *
 *   client                          server
 *   HELLO(port info, limits)   ->
 *                              <-   HELLO_REPLY(port info, server JSON lines)
 *   SETUP(transport, nqps ...) ->   allocate region, create QPs (INIT)
 *                              <-   SETUP_REPLY(addr, rkey, QPNs, PSNs) or error
 *   CONNECT(client QPNs, PSNs) ->   RTR/RTS, post receives, start sink/echo loop
 *                              <-   CONNECT_REPLY
 *   ... client measures ...
 *   TEARDOWN                   ->   stop loop, destroy
 *                              <-   TEARDOWN_REPLY(receives counted)
 *   (SETUP ... TEARDOWN repeats per sweep point)
 *   BYE                        ->
 */
#ifndef RNP_PROTO_H
#define RNP_PROTO_H

#include <stdint.h>

#include "wire.h"

#define PROTO_VERSION 1u
#define PROTO_MAX_QPS 65536u
#define UD_QKEY 0x11111111u
#define UD_GRH_BYTES 40u

enum msg_type {
    MSG_HELLO = 1,
    MSG_HELLO_REPLY = 2,
    MSG_SETUP = 3,
    MSG_SETUP_REPLY = 4,
    MSG_CONNECT = 5,
    MSG_CONNECT_REPLY = 6,
    MSG_TEARDOWN = 7,
    MSG_TEARDOWN_REPLY = 8,
    MSG_BYE = 9,
};

enum transport_kind { TP_RC = 0, TP_UD = 1 };
enum server_mode { MODE_PASSIVE = 0, MODE_SINK = 1, MODE_ECHO = 2 };

/* What each side must know about the other's port to address it. */
struct port_info {
    uint16_t lid;
    uint8_t gid[16];
    uint32_t gid_index;
    uint32_t use_grh;             /* 1: address with a GRH (Ethernet/RoCE or --gid-index) */
    uint32_t mtu;                 /* active MTU as enum ibv_mtu (1..5) */
    uint32_t link_layer;          /* 1 InfiniBand, 2 Ethernet (IBV_LINK_LAYER_*) */
    uint32_t max_qp_rd_atom;      /* responder resources per QP */
    uint32_t max_qp_init_rd_atom; /* initiator depth per QP */
    uint32_t max_qp;
    uint32_t max_qp_wr;
    uint32_t max_cqe;
};

struct msg_hello {
    uint32_t version;
    struct port_info port;
    uint32_t idle_timeout_s; /* client -> server: how long the server may wait between messages */
    char *info;              /* server -> client: its device/link/host JSON lines (malloc'd) */
};

struct msg_setup {
    uint32_t transport;   /* enum transport_kind */
    uint32_t nqps;
    uint32_t mode;        /* enum server_mode */
    uint32_t recv_depth;  /* receives kept posted per QP (sink/echo) */
    uint32_t max_payload; /* largest message the server must receive or echo */
    uint32_t page_size;   /* 4096 or 2097152 */
    uint64_t region_bytes;
};

struct msg_qps {          /* SETUP_REPLY's and CONNECT's QP list */
    uint32_t nqps;
    uint32_t *qpn;        /* malloc'd arrays of nqps */
    uint32_t *psn;
};

struct msg_setup_reply {
    uint32_t status;      /* 0 ok; else message says why */
    char *message;        /* malloc'd, may be NULL */
    uint64_t addr;
    uint32_t rkey;
    uint64_t region_bytes;
    uint32_t page_size;
    char backing[16];     /* "base", "hugetlb", "thp" */
    struct msg_qps qps;
};

struct msg_status {       /* CONNECT_REPLY, TEARDOWN_REPLY */
    uint32_t status;
    uint64_t count;
    char *message;
};

void port_info_put(struct wbuf *b, const struct port_info *p);
void port_info_get(struct rbuf *b, struct port_info *p);

void msg_hello_put(struct wbuf *b, const struct msg_hello *m);
int msg_hello_get(const void *p, uint32_t len, struct msg_hello *m);
void msg_setup_put(struct wbuf *b, const struct msg_setup *m);
int msg_setup_get(const void *p, uint32_t len, struct msg_setup *m);
void msg_qps_put(struct wbuf *b, const struct msg_qps *m);
int msg_qps_get(struct rbuf *r, struct msg_qps *m);
int msg_qps_alloc(struct msg_qps *m, uint32_t n);
void msg_qps_free(struct msg_qps *m);
void msg_setup_reply_put(struct wbuf *b, const struct msg_setup_reply *m);
int msg_setup_reply_get(const void *p, uint32_t len, struct msg_setup_reply *m);
void msg_setup_reply_free(struct msg_setup_reply *m);
void msg_status_put(struct wbuf *b, const struct msg_status *m);
int msg_status_get(const void *p, uint32_t len, struct msg_status *m);

#endif
