/* wire.c - see wire.h. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void wb_init(struct wbuf *b)
{
    memset(b, 0, sizeof *b);
}

void wb_free(struct wbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void wb_bytes(struct wbuf *b, const void *p, size_t n)
{
    if (b->err)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) {
            b->err = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

void wb_u8(struct wbuf *b, uint8_t v)
{
    wb_bytes(b, &v, 1);
}

void wb_u16(struct wbuf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    wb_bytes(b, x, 2);
}

void wb_u32(struct wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    wb_bytes(b, x, 4);
}

void wb_u64(struct wbuf *b, uint64_t v)
{
    wb_u32(b, (uint32_t)(v >> 32));
    wb_u32(b, (uint32_t)v);
}

void wb_str(struct wbuf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > WIRE_MAX_PAYLOAD) {
        b->err = 1;
        return;
    }
    wb_u32(b, (uint32_t)n);
    wb_bytes(b, s, n);
}

void rb_init(struct rbuf *b, const void *p, size_t len)
{
    b->p = p;
    b->len = len;
    b->pos = 0;
    b->err = 0;
}

void rb_bytes(struct rbuf *b, void *out, size_t n)
{
    if (b->err || n > b->len - b->pos) {
        b->err = 1;
        if (out && n)
            memset(out, 0, n);
        return;
    }
    if (n)
        memcpy(out, b->p + b->pos, n);
    b->pos += n;
}

uint8_t rb_u8(struct rbuf *b)
{
    uint8_t x = 0;
    rb_bytes(b, &x, 1);
    return x;
}

uint16_t rb_u16(struct rbuf *b)
{
    uint8_t x[2];
    rb_bytes(b, x, 2);
    return (uint16_t)((x[0] << 8) | x[1]);
}

uint32_t rb_u32(struct rbuf *b)
{
    uint8_t x[4];
    rb_bytes(b, x, 4);
    return ((uint32_t)x[0] << 24) | ((uint32_t)x[1] << 16) | ((uint32_t)x[2] << 8) | x[3];
}

uint64_t rb_u64(struct rbuf *b)
{
    uint64_t hi = rb_u32(b);
    return (hi << 32) | rb_u32(b);
}

char *rb_str(struct rbuf *b, size_t max_len)
{
    uint32_t n = rb_u32(b);
    if (b->err || n > max_len || n > b->len - b->pos) {
        b->err = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        b->err = 1;
        return NULL;
    }
    rb_bytes(b, s, n);
    s[n] = '\0';
    return s;
}

void wire_header(uint8_t out[12], uint32_t type, uint32_t len)
{
    uint32_t v[3] = {WIRE_MAGIC, type, len};
    for (int i = 0; i < 3; i++) {
        out[4 * i] = (uint8_t)(v[i] >> 24);
        out[4 * i + 1] = (uint8_t)(v[i] >> 16);
        out[4 * i + 2] = (uint8_t)(v[i] >> 8);
        out[4 * i + 3] = (uint8_t)v[i];
    }
}

int wire_parse_header(const uint8_t in[12], uint32_t *type, uint32_t *len)
{
    struct rbuf r;
    rb_init(&r, in, 12);
    uint32_t magic = rb_u32(&r);
    *type = rb_u32(&r);
    *len = rb_u32(&r);
    if (magic != WIRE_MAGIC || *len > WIRE_MAX_PAYLOAD)
        return -1;
    return 0;
}
