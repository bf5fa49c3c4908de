/* hostinfo.c - see hostinfo.h. */
#include "hostinfo.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Value after "key<spaces/tabs>:" on a line starting with key; NULL if not that key. */
static const char *line_value(const char *line, size_t linelen, const char *key, size_t *vlen)
{
    size_t kl = strlen(key);
    if (linelen < kl || strncmp(line, key, kl) != 0)
        return NULL;
    size_t i = kl;
    while (i < linelen && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i >= linelen || line[i] != ':')
        return NULL;
    i++;
    while (i < linelen && (line[i] == ' ' || line[i] == '\t'))
        i++;
    size_t end = linelen;
    while (end > i && isspace((unsigned char)line[end - 1]))
        end--;
    *vlen = end - i;
    return line + i;
}

int cpuinfo_parse(const char *text, struct cpuinfo_summary *out)
{
    memset(out, 0, sizeof *out);
    char fallback[128] = "";
    const char *p = text ? text : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        size_t vl = 0;
        const char *v;
        if ((v = line_value(p, ll, "processor", &vl)) != NULL) {
            out->processors++;
        } else if ((v = line_value(p, ll, "model name", &vl)) != NULL) {
            if (!out->model[0] && vl) {
                size_t n = vl < sizeof out->model - 1 ? vl : sizeof out->model - 1;
                memcpy(out->model, v, n);
                out->model[n] = '\0';
            }
        } else if ((v = line_value(p, ll, "cpu MHz", &vl)) != NULL) {
            if (out->mhz == 0.0 && vl) {
                char num[32];
                size_t n = vl < sizeof num - 1 ? vl : sizeof num - 1;
                memcpy(num, v, n);
                num[n] = '\0';
                out->mhz = strtod(num, NULL);
            }
        } else if ((v = line_value(p, ll, "Model", &vl)) != NULL ||
                   (v = line_value(p, ll, "cpu model", &vl)) != NULL ||
                   (v = line_value(p, ll, "CPU part", &vl)) != NULL) {
            if (!fallback[0] && vl) {
                size_t n = vl < sizeof fallback - 1 ? vl : sizeof fallback - 1;
                memcpy(fallback, v, n);
                fallback[n] = '\0';
            }
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    if (!out->model[0])
        copy_str(out->model, sizeof out->model, fallback);
    return 0;
}

long meminfo_value(const char *text, const char *key)
{
    const char *p = text ? text : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        size_t vl = 0;
        const char *v = line_value(p, ll, key, &vl);
        if (v && vl && isdigit((unsigned char)v[0]))
            return strtol(v, NULL, 10);
        if (!nl)
            break;
        p = nl + 1;
    }
    return -1;
}

char *read_text_file(const char *path, size_t max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        return NULL;
    }
    size_t n = fread(buf, 1, max, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

int read_first_line(const char *path, char *out, size_t outlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(out, (int)outlen, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    size_t n = strlen(out);
    while (n && isspace((unsigned char)out[n - 1]))
        out[--n] = '\0';
    return 0;
}

void hostinfo_write_fields(struct jw *w)
{
    char buf[256];
    if (gethostname(buf, sizeof buf) == 0) {
        buf[sizeof buf - 1] = '\0';
        jw_kv_str(w, "hostname", buf);
    } else {
        jw_kv_null(w, "hostname");
    }
    struct utsname u;
    if (uname(&u) == 0) {
        jw_kv_str(w, "os", u.sysname);
        jw_kv_str(w, "kernel", u.release);
        jw_kv_str(w, "kernel_version", u.version);
        jw_kv_str(w, "machine", u.machine);
    }
    char *ci = read_text_file("/proc/cpuinfo", 1 << 20);
    struct cpuinfo_summary cs;
    cpuinfo_parse(ci, &cs);
    free(ci);
    jw_kv_str(w, "cpu_model", cs.model[0] ? cs.model : NULL);
    if (cs.mhz > 0)
        jw_kv_double(w, "cpu_mhz", cs.mhz);
    else
        jw_kv_null(w, "cpu_mhz");
    if (read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", buf,
                        sizeof buf) == 0)
        jw_kv_double(w, "cpu_max_mhz", strtod(buf, NULL) / 1000.0);
    else
        jw_kv_null(w, "cpu_max_mhz");
    if (read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", buf,
                        sizeof buf) == 0)
        jw_kv_str(w, "cpu_governor", buf);
    else
        jw_kv_null(w, "cpu_governor");
    jw_kv_int(w, "cpus_online", sysconf(_SC_NPROCESSORS_ONLN));
    char *mi = read_text_file("/proc/meminfo", 1 << 16);
    long v = meminfo_value(mi, "MemTotal");
    if (v >= 0)
        jw_kv_int(w, "mem_total_kb", v);
    else
        jw_kv_null(w, "mem_total_kb");
    v = meminfo_value(mi, "HugePages_Free");
    if (v >= 0)
        jw_kv_int(w, "hugepages_free", v);
    else
        jw_kv_null(w, "hugepages_free");
    v = meminfo_value(mi, "Hugepagesize");
    if (v >= 0)
        jw_kv_int(w, "hugepage_size_kb", v);
    else
        jw_kv_null(w, "hugepage_size_kb");
    free(mi);
    if (read_first_line("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) == 0)
        jw_kv_str(w, "thp", buf);
    else
        jw_kv_null(w, "thp");
}
