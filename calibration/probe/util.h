/* util.h - small device-free helpers: clocks, InfiniBand enum conversions, RNG. */
#ifndef RNP_UTIL_H
#define RNP_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic clock in nanoseconds / seconds. */
uint64_t now_ns(void);
double now_s(void);

/* ibv_port_attr.active_mtu (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5) to bytes; -1 if unknown. */
int ib_mtu_enum_to_bytes(int mtu_enum);
/* Inverse; 0 if bytes is not an InfiniBand MTU. */
int ib_mtu_bytes_to_enum(int bytes);
/* ibv_port_attr.active_width (1, 2, 4, 8, 16) to lanes (1, 4, 8, 12, 2); 0 if unknown. */
int ib_width_to_lanes(int width);
/* ibv_port_attr.active_speed code to a name ("QDR", "FDR10", ...); "unknown" if unknown. */
const char *ib_speed_name(int speed);
/* Nominal per-lane rate as ibstat prints it (QDR 10, FDR10 10, FDR 14, EDR 25 ...); 0 if unknown. */
double ib_speed_nominal_gbps(int speed);
/* Per-lane data rate after line encoding (QDR 8, FDR10 10, FDR 13.64, EDR 25 ...); 0 if unknown. */
double ib_speed_data_gbps(int speed);

/* xorshift64* pseudo-random numbers (deterministic for a seed; never returns the zero state). */
struct rng {
    uint64_t s;
};
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
/* Uniform in [0, n); n must be > 0. */
uint64_t rng_below(struct rng *r, uint64_t n);

size_t round_up(size_t v, size_t align);
/* Copy src into dst (size dstlen > 0), truncating; always NUL-terminates. */
void copy_str(char *dst, size_t dstlen, const char *src);

#endif
