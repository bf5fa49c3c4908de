/* util.c - see util.h. */
#include "util.h"

#include <string.h>
#include <time.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double now_s(void)
{
    return (double)now_ns() * 1e-9;
}

int ib_mtu_enum_to_bytes(int mtu_enum)
{
    switch (mtu_enum) {
    case 1: return 256;
    case 2: return 512;
    case 3: return 1024;
    case 4: return 2048;
    case 5: return 4096;
    default: return -1;
    }
}

int ib_mtu_bytes_to_enum(int bytes)
{
    switch (bytes) {
    case 256: return 1;
    case 512: return 2;
    case 1024: return 3;
    case 2048: return 4;
    case 4096: return 5;
    default: return 0;
    }
}

int ib_width_to_lanes(int width)
{
    switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
    }
}

struct speed_row {
    int code;
    const char *name;
    double nominal; /* per lane, as ibstat's "Rate" divided by the width */
    double data;    /* per lane, after 8b/10b or 64b/66b line coding */
};

static const struct speed_row SPEEDS[] = {
    {1, "SDR", 2.5, 2.0},
    {2, "DDR", 5.0, 4.0},
    {4, "QDR", 10.0, 8.0},
    {8, "FDR10", 10.0, 10.0},          /* 10.3125 Gbaud, 64b/66b */
    {16, "FDR", 14.0, 13.636363636},   /* 14.0625 Gbaud, 64b/66b */
    {32, "EDR", 25.0, 25.0},           /* 25.78125 Gbaud, 64b/66b */
    {64, "HDR", 50.0, 50.0},
    {128, "NDR", 100.0, 100.0},
    {256, "XDR", 200.0, 200.0},
};

static const struct speed_row *speed_row(int code)
{
    for (size_t i = 0; i < sizeof SPEEDS / sizeof SPEEDS[0]; i++)
        if (SPEEDS[i].code == code)
            return &SPEEDS[i];
    return NULL;
}

const char *ib_speed_name(int speed)
{
    const struct speed_row *r = speed_row(speed);
    return r ? r->name : "unknown";
}

double ib_speed_nominal_gbps(int speed)
{
    const struct speed_row *r = speed_row(speed);
    return r ? r->nominal : 0.0;
}

double ib_speed_data_gbps(int speed)
{
    const struct speed_row *r = speed_row(speed);
    return r ? r->data : 0.0;
}

void rng_seed(struct rng *r, uint64_t seed)
{
    /* splitmix64 step so that small seeds give well-mixed states */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

uint64_t rng_next(struct rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
    /* rejection sampling: unbiased */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do {
        v = rng_next(r);
    } while (v >= limit);
    return v % n;
}

size_t round_up(size_t v, size_t align)
{
    if (align == 0)
        return v;
    return (v + align - 1) / align * align;
}

void copy_str(char *dst, size_t dstlen, const char *src)
{
    if (dstlen == 0)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= dstlen)
        n = dstlen - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}
