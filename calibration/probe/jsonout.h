/* jsonout.h - a minimal JSON-lines writer (device-free, unit tested).
 *
 * One struct jw builds one JSON value (usually an object) in memory; jw_write_line()
 * writes it followed by '\n' and resets the writer. Strings are escaped per RFC 8259;
 * bytes that are not valid UTF-8 become U+FFFD. Non-finite doubles become null.
 *
 *   struct jw w; jw_init(&w);
 *   jw_obj_begin(&w); jw_kv_str(&w, "type", "host"); jw_kv_int(&w, "cpus", 8); jw_obj_end(&w);
 *   jw_write_line(&w, stdout);   ->  {"type":"host","cpus":8}
 */
#ifndef RNP_JSONOUT_H
#define RNP_JSONOUT_H

#include <stddef.h>
#include <stdio.h>

#define JW_MAX_DEPTH 16

struct jw {
    char *buf;
    size_t len, cap;
    int depth;
    int count[JW_MAX_DEPTH]; /* values written at each nesting level */
    int after_key;           /* a key was written, its value comes next */
    int err;                 /* out of memory or misuse; jw_write_line then fails */
};

void jw_init(struct jw *w);
void jw_free(struct jw *w);
void jw_reset(struct jw *w);

void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);

void jw_str(struct jw *w, const char *s); /* NULL writes null */
void jw_int(struct jw *w, long long v);
void jw_uint(struct jw *w, unsigned long long v);
void jw_double(struct jw *w, double v);
void jw_bool(struct jw *w, int v);
void jw_null(struct jw *w);
/* Splice an already-valid JSON text as a value (used for nested objects built elsewhere). */
void jw_raw(struct jw *w, const char *json);

void jw_kv_str(struct jw *w, const char *k, const char *s);
void jw_kv_int(struct jw *w, const char *k, long long v);
void jw_kv_uint(struct jw *w, const char *k, unsigned long long v);
void jw_kv_double(struct jw *w, const char *k, double v);
void jw_kv_bool(struct jw *w, const char *k, int v);
void jw_kv_null(struct jw *w, const char *k);

/* The text so far (NUL-terminated, never NULL). */
const char *jw_cstr(const struct jw *w);
/* Complete value? (all objects/arrays closed, no error) */
int jw_complete(const struct jw *w);
/* Write the value and '\n', flush, reset. Returns 0, or -1 on error/incomplete/IO failure. */
int jw_write_line(struct jw *w, FILE *f);

/* Escape s as a JSON string literal including the quotes into out (size outlen).
 * Returns the length it needs (excluding NUL), like snprintf. */
size_t json_quote(const char *s, char *out, size_t outlen);

#endif
