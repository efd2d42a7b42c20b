/* ref_test.h - small helpers shared by the tests of tests/ref/: random fills
 * from the project's deterministic generator, checked allocation, and the
 * "random projection" adapter that turns an op into a scalar for gradcheck. */
#ifndef GB_REF_TEST_H
#define GB_REF_TEST_H

#include "check.h"
#include "gradcheck.h"
#include "rng.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* calloc that fails the test instead of returning NULL. */
static inline double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    CHECK(p != NULL);
    return p;
}

/* x[i] ~ U(lo, hi). */
static inline void fill_uniform(gb_rng_t *r, double *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * gb_rng_uniform(r);
}

/* Move every |x[i]| < margin out to +-margin: inputs of ReLU-like ops then sit
 * at least `margin` away from the kink, far beyond the differencing step. */
static inline void push_from_zero(double *x, size_t n, double margin) {
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) < margin) x[i] = x[i] < 0 ? -margin : margin;
}

/* Up to k distinct indices into an array of numel elements: all of them when
 * numel <= k, else the first, the last and k - 2 others drawn at random.
 * Returns how many were written. k >= 2. */
static inline size_t sample_indices(gb_rng_t *r, size_t numel, size_t *idx, size_t k) {
    if (numel <= k) {
        for (size_t i = 0; i < numel; i++)
            idx[i] = i;
        return numel;
    }
    idx[0] = 0;
    idx[1] = numel - 1;
    for (size_t i = 2; i < k; i++) {
        size_t j, pick;
        do {
            pick = (size_t)(gb_rng_next(r) % numel);
            for (j = 0; j < i && idx[j] != pick; j++) {
            }
        } while (j < i);
        idx[i] = pick;
    }
    return k;
}

/* The projection L = <dy, out> where out is what fwd(self) computes from the
 * inputs the gradcheck perturbs. Test contexts embed proj_t as their first
 * member and pass themselves to gb_gradcheck with proj_eval. */
typedef struct proj {
    void (*fwd)(void *self);
    const double *out; /* written by fwd */
    const double *dy;  /* fixed random weights */
    size_t n;
} proj_t;

static inline int proj_eval(void *ctx, double *value) {
    proj_t *p = ctx;
    p->fwd(ctx);
    *value = gb_gc_dot(p->dy, p->out, p->n);
    return 0;
}

/* Gradcheck options for the per-op tests: the defaults of gradcheck.h, whose
 * origin is spelled out there (h = 1e-5: truncation h^2/6 |f'''| and rounding
 * eps |f| / h both near 1e-11 for the O(1) projections used here; tolerances
 * atol 1e-8 + rtol 1e-6 about 100x above that). quiet: planted-fault tests
 * print into their own stream. */
static inline gb_gc_opts_t op_opts(void) {
    gb_gc_opts_t o;
    gb_gc_opts_default(&o);
    return o;
}

#endif
