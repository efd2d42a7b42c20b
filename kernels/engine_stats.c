/* engine_stats.c - step-time statistics and the validity rule, one copy for
 * the engine driver and the worker's gemm probe (engine_stats.h). */
#include "engine_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile by linear interpolation between order statistics (numpy's
 * default); v sorted ascending. */
static double quantile(const double *v, int n, double q) {
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1) return v[n - 1];
    double f = pos - lo;
    return v[lo] + f * (v[lo + 1] - v[lo]);
}

/* A time for a message: 2 decimals from 1 ms up, 3 significant digits
 * below (a small gemm's 0.00844 ms is not "0.01 ms"). */
static void fmt_ms(char *buf, size_t len, double ms) {
    snprintf(buf, len, ms >= 1.0 ? "%.2f" : "%.3g", ms);
}

int gb_spread_ok(const char *what, double median, double p90, char *why, size_t whylen) {
    if (!(median > 0) || p90 <= (1.0 + GB_SPREAD_LIMIT) * median) return 1;
    /* as many decimals as show it above the limit: 10.05%, not 10.0% */
    double pct = 100.0 * (p90 / median - 1.0), lim = 100.0 * GB_SPREAD_LIMIT;
    int d = 1;
    while (d < 6 && floor(pct * pow(10, d) + 0.5) <= lim * pow(10, d))
        d++;
    char a[32], b[32];
    fmt_ms(a, sizeof a, p90);
    fmt_ms(b, sizeof b, median);
    snprintf(why, whylen, "p90 %s %s ms is %.*f%% above the median %s ms (limit %.0f%%)", what, a,
             d, pct, b, lim);
    return 0;
}

int gb_step_stats(const double *ms, const double *loss, int n, gb_step_stats_t *out) {
    memset(out, 0, sizeof(*out));
    if (n < 1) return -1;
    double *v = malloc((size_t)n * sizeof(double));
    if (!v) return -1;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(ms[i]) || ms[i] < 0) {
            free(v);
            return -1;
        }
        v[i] = ms[i];
        sum += ms[i];
    }
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    out->median = quantile(v, n, 0.5);
    out->p90 = quantile(v, n, 0.9);
    out->min = v[0];
    out->max = v[n - 1];
    out->mean = sum / n;
    free(v);
    out->valid = 1;
    for (int i = 0; loss && i < n; i++) {
        if (!isfinite(loss[i])) {
            out->valid = 0;
            snprintf(out->invalid_reason, sizeof(out->invalid_reason),
                     "loss of timed step %d is not finite", i + 1);
            return 0;
        }
    }
    out->valid = gb_spread_ok("step time", out->median, out->p90, out->invalid_reason,
                              sizeof(out->invalid_reason));
    return 0;
}

int gb_samples_stride(int n) {
    return n > GB_SAMPLES_MAX ? (n + GB_SAMPLES_MAX - 1) / GB_SAMPLES_MAX : 1;
}

int gb_samples_fold(const double *v, int n, int stride, double *out) {
    int m = 0;
    if (stride < 1) stride = 1;
    for (int i = 0; i < n; i += stride) {
        double sum = 0;
        int k = 0;
        for (; k < stride && i + k < n; k++)
            sum += v[i + k];
        out[m++] = sum / k;
    }
    return m;
}
