/* compare.h - array comparison for the CUDA backend's tests: relative L2
 * error ||a - ref|| / ||ref|| per tensor plus the worst element, printed on
 * failure. Header-only helpers (static functions, no globals). */
#ifndef GB_TESTS_CUDA_COMPARE_H
#define GB_TESTS_CUDA_COMPARE_H

#include <math.h>
#include <stdio.h>
#include <stddef.h>

/* Relative L2 error of a against ref over n elements (absolute when ||ref||
 * is 0). *worst gets the index of the largest |a - ref|. NaN anywhere gives
 * INFINITY. */
static inline double gb_rel_l2(const double *a, const double *ref, size_t n, size_t *worst) {
    double num = 0.0, den = 0.0, wd = -1.0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - ref[i];
        if (d != d) {
            if (worst) *worst = i;
            return INFINITY;
        }
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > wd) {
            wd = fabs(d);
            wi = i;
        }
    }
    if (worst) *worst = wi;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* 1 when the relative L2 error is within tol; prints name, error and the
 * worst pair either way when verbose or on failure. */
static inline int gb_close(const char *name, const double *a, const double *ref, size_t n,
                           double tol, int verbose) {
    size_t w = 0;
    double e = gb_rel_l2(a, ref, n, &w);
    int ok = e <= tol;
    if (!ok || verbose)
        fprintf(stderr, "%s %-40s rel_l2 %.3e (tol %.1e) worst [%zu] %.9g vs %.9g\n",
                ok ? "  ok  " : "  FAIL", name, e, tol, w, n ? a[w] : 0.0, n ? ref[w] : 0.0);
    return ok;
}

#endif
