/* hostinfo.h - host description for the "host" JSON line (device-free, unit tested). */
#ifndef RNP_HOSTINFO_H
#define RNP_HOSTINFO_H

#include <stddef.h>

#include "jsonout.h"

struct cpuinfo_summary {
    char model[128];  /* "model name" (x86) or "Model"/"CPU part" fallback; "" if absent */
    double mhz;       /* first "cpu MHz" value; 0 if absent */
    int processors;   /* number of "processor" entries */
};

/* Parse the text of /proc/cpuinfo. Returns 0 (fields absent are left empty/zero). */
int cpuinfo_parse(const char *text, struct cpuinfo_summary *out);
/* Value in kB (or a plain count) of a /proc/meminfo key such as "MemTotal"; -1 if absent. */
long meminfo_value(const char *text, const char *key);
/* Read a whole small text file (at most max bytes) into a malloc'd string; NULL on error. */
char *read_text_file(const char *path, size_t max);
/* First line of a small file, trailing whitespace removed; 0 on success, -1 otherwise. */
int read_first_line(const char *path, char *out, size_t outlen);

/* Append the host fields (hostname, kernel, cpu, memory, hugepages...) to an open object. */
void hostinfo_write_fields(struct jw *w);

#endif
