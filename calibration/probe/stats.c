/* stats.c - see stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double stats_percentile_sorted(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    if (p <= 0.0)
        return sorted[0];
    /* rank = ceil(p*n), computed with a small tolerance so that 0.99*100 is rank 99,
     * not 100 because of binary rounding */
    double r = ceil(p * (double)n - 1e-9);
    size_t rank = r < 1.0 ? 1 : (size_t)r;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

int stats_compute(double *samples, size_t n, struct lat_stats *out)
{
    if (!samples || n == 0 || !out)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(samples[i]))
            return -1;
    qsort(samples, n, sizeof *samples, cmp_double);

    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += samples[i];
    double avg = sum / (double)n;
    /* The exact mean lies in [min, max]; the rounded sum can put it an ulp outside
     * (50 equal samples of 0.05 average 0.04999999999999998). */
    if (avg < samples[0])
        avg = samples[0];
    if (avg > samples[n - 1])
        avg = samples[n - 1];
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = samples[i] - avg;
        ss += d * d;
    }
    out->n = n;
    out->min = samples[0];
    out->max = samples[n - 1];
    out->median = (n % 2) ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    out->avg = avg;
    out->stdev = sqrt(ss / (double)n);
    out->p99 = stats_percentile_sorted(samples, n, 0.99);
    out->p999 = stats_percentile_sorted(samples, n, 0.999);
    return 0;
}
