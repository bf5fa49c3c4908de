/* wire.h - big-endian encoding of the TCP bootstrap messages (device-free, unit tested).
 *
 * A message is a 12-byte header (magic "RNP1", type, payload length, all u32 big-endian)
 * followed by the payload. Writers grow a buffer; readers check every bound and set err
 * instead of reading past the end. */
#ifndef RNP_WIRE_H
#define RNP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x524E5031u /* "RNP1" */
#define WIRE_MAX_PAYLOAD (16u << 20)

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
};

struct rbuf {
    const uint8_t *p;
    size_t len, pos;
    int err;
};

void wb_init(struct wbuf *b);
void wb_free(struct wbuf *b);
void wb_u8(struct wbuf *b, uint8_t v);
void wb_u16(struct wbuf *b, uint16_t v);
void wb_u32(struct wbuf *b, uint32_t v);
void wb_u64(struct wbuf *b, uint64_t v);
void wb_bytes(struct wbuf *b, const void *p, size_t n);
/* u32 length then bytes (no NUL) */
void wb_str(struct wbuf *b, const char *s);

void rb_init(struct rbuf *b, const void *p, size_t len);
uint8_t rb_u8(struct rbuf *b);
uint16_t rb_u16(struct rbuf *b);
uint32_t rb_u32(struct rbuf *b);
uint64_t rb_u64(struct rbuf *b);
void rb_bytes(struct rbuf *b, void *out, size_t n);
/* Reads a wb_str into a malloc'd NUL-terminated string (NULL and err on failure). */
char *rb_str(struct rbuf *b, size_t max_len);

void wire_header(uint8_t out[12], uint32_t type, uint32_t len);
/* 0 if the header is valid (magic, length <= WIRE_MAX_PAYLOAD), else -1 */
int wire_parse_header(const uint8_t in[12], uint32_t *type, uint32_t *len);

#endif
