/* engine_stats.h - step-time statistics and the validity rule
 * (docs/result-record.md), in gb_model so that the engine driver and the
 * worker's gemm probe share one copy and tests can feed them known samples. */
#ifndef GB_ENGINE_STATS_H
#define GB_ENGINE_STATS_H

#include <stddef.h>

/* p90 more than this fraction above the median makes a result invalid */
#define GB_SPREAD_LIMIT 0.10

typedef struct gb_step_stats {
    double median, p90, min, max, mean; /* quantiles interpolate as numpy's default */
    int valid;
    char invalid_reason[256];
} gb_step_stats_t;

/* Statistics of n >= 1 step times (ms) and validity: invalid when a loss is
 * not finite or p90 > (1 + GB_SPREAD_LIMIT) x median. loss may be NULL.
 * Returns 0, or -1 when n < 1 or a time is negative or not finite. */
int gb_step_stats(const double *ms, const double *loss, int n, gb_step_stats_t *out);

/* The spread rule alone: 1 when p90 <= (1 + GB_SPREAD_LIMIT) x median (or
 * the median is not positive), else 0 with "p90 <what> X ms is N% above the
 * median Y ms (limit 10%)" in why. */
int gb_spread_ok(const char *what, double median, double p90, char *why, size_t whylen);

/* Per-step samples a result record keeps: a run of more steps than
 * GB_SAMPLES_MAX gives the mean of each `stride` consecutive steps instead
 * (the statistics still take every step). A record has at most 512 KiB on
 * its way to the store (the agent's read, the wire): ~13,000 steps' two
 * arrays filled it, and such a job ended "without a result record" after
 * running in full. */
#define GB_SAMPLES_MAX 4096

/* The stride for n steps: 1 up to GB_SAMPLES_MAX, else the least that
 * leaves at most GB_SAMPLES_MAX samples. */
int gb_samples_stride(int n);
/* v[0..n) folded by stride into out (the mean of each stride consecutive
 * values; the last group may be shorter). Returns the number written. */
int gb_samples_fold(const double *v, int n, int stride, double *out);

#endif
