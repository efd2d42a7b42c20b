/* compare.h - the acceptance rule of the CUDA backend's numerics tests: the
 * relative L2 error ||a - ref|| / ||ref|| of a whole tensor within a
 * tolerance, and no NaN or Inf anywhere. The arithmetic is kernels/ref's
 * gb_cmp_f64 (gradcheck.h), whose report also gives the worst elements,
 * printed on failure. Header-only helper (a static function, no globals). */
#ifndef GB_TESTS_CUDA_COMPARE_H
#define GB_TESTS_CUDA_COMPARE_H

#include "gradcheck.h"

#include <stddef.h>
#include <stdio.h>

/* 1 when a is within tol of ref in relative L2 (0 = 0 passes, anything
 * against an all-zero ref fails) and every element is finite; prints the
 * figures when verbose or on failure, with the worst pairs on failure.
 * The per-element bound rtol = tol only ranks the worst pairs. */
static inline int gb_close(const char *name, const double *a, const double *ref, size_t n,
                           double tol, int verbose) {
    gb_cmp_t c;
    gb_cmp_f64(a, ref, n, 0.0, tol, &c);
    int ok = c.n_nonfinite == 0 && c.rel_l2 <= tol;
    if (!ok || verbose)
        fprintf(stderr, "%s %-40s rel_l2 %.3e (tol %.1e)%s\n", ok ? "  ok  " : "  FAIL", name,
                c.rel_l2, tol, c.n_nonfinite ? ", not finite" : "");
    if (!ok) gb_cmp_print(stderr, "        ", &c);
    return ok;
}

#endif
