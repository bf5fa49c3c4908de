/* stats.h - latency statistics from raw samples (device-free, unit tested). */
#ifndef RNP_STATS_H
#define RNP_STATS_H

#include <stddef.h>

struct lat_stats {
    size_t n;
    double min, max, median, avg, stdev, p99, p999;
};

/* Sorts samples in place (ascending) and fills out. Definitions (see SCHEMA.md):
 *   median: middle sample, or the mean of the two middle samples when n is even;
 *   avg:    arithmetic mean;
 *   stdev:  population standard deviation (divide by n, as perftest does);
 *   p99, p999: nearest-rank percentiles, the sample of rank ceil(p * n) (1-based).
 * Returns 0, or -1 when n == 0, samples is NULL or a sample is not finite. */
int stats_compute(double *samples, size_t n, struct lat_stats *out);

/* Nearest-rank percentile (0 < p <= 1) of an ascending array of n > 0 values. */
double stats_percentile_sorted(const double *sorted, size_t n, double p);

#endif
