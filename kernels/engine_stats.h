/* engine_stats.h - the driver's step-time statistics and validity rule
 * (docs/result-record.md), separate so tests can feed them known samples. */
#ifndef GB_ENGINE_STATS_H
#define GB_ENGINE_STATS_H

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

#endif
