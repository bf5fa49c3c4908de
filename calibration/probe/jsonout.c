/* jsonout.c - see jsonout.h. */
#include "jsonout.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void jw_init(struct jw *w)
{
    memset(w, 0, sizeof *w);
}

void jw_free(struct jw *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

void jw_reset(struct jw *w)
{
    char *b = w->buf;
    size_t cap = w->cap;
    memset(w, 0, sizeof *w);
    w->buf = b;
    w->cap = cap;
    if (b)
        b[0] = '\0';
}

static void put(struct jw *w, const char *s, size_t n)
{
    if (w->err)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) {
            w->err = 1;
            return;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void puts_(struct jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* Called before every value: writes a comma between array elements, checks that a
 * value inside an object follows a key. */
static void before_value(struct jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth == 0) {
        if (w->len != 0)
            w->err = 1; /* a second top-level value */
        return;
    }
    /* inside an array (objects require keys, tracked by jw_key) */
    if (w->count[w->depth] > 0)
        puts_(w, ",");
    w->count[w->depth]++;
}

/* Length of a valid UTF-8 sequence starting at p (at most avail bytes), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
    unsigned c = p[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

struct qout {
    char *out;
    size_t outlen;
    size_t need;    /* bytes the full result needs */
    size_t written; /* bytes actually stored (a prefix made of whole pieces) */
    int full;
};

static void q_emit(struct qout *q, const char *s, size_t n)
{
    if (q->out && !q->full) {
        if (q->written + n < q->outlen) {
            memcpy(q->out + q->written, s, n);
            q->written += n;
        } else {
            q->full = 1;
        }
    }
    q->need += n;
}

size_t json_quote(const char *s, char *out, size_t outlen)
{
    struct qout q = {out, outlen, 0, 0, out == NULL || outlen == 0};
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)p);
    q_emit(&q, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned c = p[i];
        char esc[16];
        if (c == '"') {
            q_emit(&q, "\\\"", 2);
            i++;
        } else if (c == '\\') {
            q_emit(&q, "\\\\", 2);
            i++;
        } else if (c == '\n') {
            q_emit(&q, "\\n", 2);
            i++;
        } else if (c == '\r') {
            q_emit(&q, "\\r", 2);
            i++;
        } else if (c == '\t') {
            q_emit(&q, "\\t", 2);
            i++;
        } else if (c == '\b') {
            q_emit(&q, "\\b", 2);
            i++;
        } else if (c == '\f') {
            q_emit(&q, "\\f", 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            q_emit(&q, esc, 6);
            i++;
        } else if (c < 0x80) {
            q_emit(&q, (const char *)p + i, 1);
            i++;
        } else {
            size_t n = utf8_seq(p + i, len - i);
            if (n == 0) {
                q_emit(&q, "\\ufffd", 6);
                i++;
            } else {
                q_emit(&q, (const char *)p + i, n);
                i += n;
            }
        }
    }
    q_emit(&q, "\"", 1);
    if (out && outlen)
        out[q.written] = '\0';
    return q.need;
}

static void put_quoted(struct jw *w, const char *s)
{
    char small[256];
    size_t n = json_quote(s, small, sizeof small);
    if (n < sizeof small) {
        put(w, small, n);
        return;
    }
    char *big = malloc(n + 1);
    if (!big) {
        w->err = 1;
        return;
    }
    json_quote(s, big, n + 1);
    put(w, big, n);
    free(big);
}

void jw_obj_begin(struct jw *w)
{
    before_value(w);
    if (w->depth + 1 >= JW_MAX_DEPTH) {
        w->err = 1;
        return;
    }
    puts_(w, "{");
    w->depth++;
    w->count[w->depth] = 0;
}

void jw_obj_end(struct jw *w)
{
    if (w->depth == 0 || w->after_key) {
        w->err = 1;
        return;
    }
    puts_(w, "}");
    w->depth--;
}

void jw_arr_begin(struct jw *w)
{
    jw_obj_begin(w); /* same bookkeeping */
    if (!w->err)
        w->buf[w->len - 1] = '[';
}

void jw_arr_end(struct jw *w)
{
    if (w->depth == 0 || w->after_key) {
        w->err = 1;
        return;
    }
    puts_(w, "]");
    w->depth--;
}

void jw_key(struct jw *w, const char *key)
{
    if (w->depth == 0 || w->after_key) {
        w->err = 1;
        return;
    }
    if (w->count[w->depth] > 0)
        puts_(w, ",");
    w->count[w->depth]++;
    put_quoted(w, key);
    puts_(w, ":");
    w->after_key = 1;
}

void jw_str(struct jw *w, const char *s)
{
    if (!s) {
        jw_null(w);
        return;
    }
    before_value(w);
    put_quoted(w, s);
}

void jw_int(struct jw *w, long long v)
{
    char b[32];
    before_value(w);
    snprintf(b, sizeof b, "%lld", v);
    puts_(w, b);
}

void jw_uint(struct jw *w, unsigned long long v)
{
    char b[32];
    before_value(w);
    snprintf(b, sizeof b, "%llu", v);
    puts_(w, b);
}

void jw_double(struct jw *w, double v)
{
    char b[40];
    if (!isfinite(v)) {
        jw_null(w);
        return;
    }
    before_value(w);
    /* shortest of %.15g / %.17g that reads back exactly */
    snprintf(b, sizeof b, "%.15g", v);
    if (strtod(b, NULL) != v)
        snprintf(b, sizeof b, "%.17g", v);
    puts_(w, b);
}

void jw_bool(struct jw *w, int v)
{
    before_value(w);
    puts_(w, v ? "true" : "false");
}

void jw_null(struct jw *w)
{
    before_value(w);
    puts_(w, "null");
}

void jw_raw(struct jw *w, const char *json)
{
    before_value(w);
    puts_(w, json);
}

void jw_kv_str(struct jw *w, const char *k, const char *s)
{
    jw_key(w, k);
    jw_str(w, s);
}

void jw_kv_int(struct jw *w, const char *k, long long v)
{
    jw_key(w, k);
    jw_int(w, v);
}

void jw_kv_uint(struct jw *w, const char *k, unsigned long long v)
{
    jw_key(w, k);
    jw_uint(w, v);
}

void jw_kv_double(struct jw *w, const char *k, double v)
{
    jw_key(w, k);
    jw_double(w, v);
}

void jw_kv_bool(struct jw *w, const char *k, int v)
{
    jw_key(w, k);
    jw_bool(w, v);
}

void jw_kv_null(struct jw *w, const char *k)
{
    jw_key(w, k);
    jw_null(w);
}

const char *jw_cstr(const struct jw *w)
{
    return w->buf ? w->buf : "";
}

int jw_complete(const struct jw *w)
{
    return !w->err && w->depth == 0 && !w->after_key && w->len > 0;
}

int jw_write_line(struct jw *w, FILE *f)
{
    int rc = 0;
    if (!jw_complete(w)) {
        rc = -1;
    } else if (fwrite(w->buf, 1, w->len, f) != w->len || fputc('\n', f) == EOF ||
               fflush(f) != 0) {
        rc = -1;
    }
    jw_reset(w);
    return rc;
}
