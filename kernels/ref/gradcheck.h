/* gradcheck.h - finite-difference gradient checks and array comparison.
 *
 * Two checkers the whole project uses to decide that numbers are right:
 *
 * gb_cmp_*: compares an array (double, or float from an f32/bf16/fp16 backend)
 * with a double reference element by element, passing when every element has
 * |got - ref| <= atol + rtol * |ref|, and reports max abs, max rel and relative
 * L2 error and the worst pairs. NaN or Inf in either array always fails.
 *
 * gb_gradcheck: checks an analytic gradient of a scalar function against
 * central differences in double, (f(x + h e_i) - f(x - h e_i)) / 2h, on all
 * elements or a chosen sample, with the same per-element rule (ref = the
 * numeric value). Any op becomes scalar through a fixed random projection:
 * L(x) = <dy, op(x)>, whose gradient is exactly what op's backward computes
 * from dy.
 *
 * Choosing h (GB_GC_H_DEFAULT = 1e-5, for inputs and outputs of order 1): the
 * central difference has truncation error h^2/6 * |f'''| ~ 2e-11 |f'''| and
 * rounding error about eps * |f| / h ~ 1e-16 * |f| / 1e-5 = 1e-11 |f|; both
 * are near 1e-11..1e-10 for f, f''' of order 1..10, so the default tolerances
 * (atol 1e-8, rtol 1e-6) sit two orders above the method's own error and far
 * below any real mistake (a missing term moves a gradient by its own size).
 *
 * Neither checker exits or aborts: both return -1 on failure and fill a report;
 * failures are printed (the worst pairs) unless told to be quiet.
 */
#ifndef GB_REF_GRADCHECK_H
#define GB_REF_GRADCHECK_H

#include <stddef.h>
#include <stdio.h>

#define GB_CMP_WORST 8 /* worst pairs kept in a report */

typedef struct gb_cmp_pair {
    size_t index; /* element index in the compared arrays */
    double got;   /* value under test (analytic gradient in gb_gradcheck) */
    double ref;   /* reference value (numeric gradient in gb_gradcheck) */
    double err;   /* |got - ref| (Inf when either is not finite) */
    double ratio; /* err / (atol + rtol * |ref|): > 1 is a failure */
} gb_cmp_pair_t;

typedef struct gb_cmp {
    size_t n;           /* elements compared */
    size_t n_bad;       /* elements over the tolerance (non-finite ones included) */
    size_t n_nonfinite; /* elements where got or ref is NaN or Inf */
    double atol, rtol;  /* the tolerance used */
    double max_abs;     /* max |got - ref| over finite pairs */
    double max_rel;     /* max |got - ref| / |ref| over finite pairs with ref != 0 */
    double rel_l2;      /* ||got - ref||_2 / ||ref||_2 (0 when both are 0, Inf when only
                           ref is; finite pairs) */
    double max_ratio;   /* max err / (atol + rtol |ref|); Inf with non-finite pairs */
    int n_worst;        /* valid entries in worst[] */
    gb_cmp_pair_t worst[GB_CMP_WORST]; /* largest ratio first */
} gb_cmp_t;

/* Compare got with ref over n elements. Fills *out (always, also on failure).
 * Returns 0 when every element is within atol + rtol * |ref|, else -1. */
int gb_cmp_f64(const double *got, const double *ref, size_t n, double atol, double rtol,
               gb_cmp_t *out);

/* Same for a float array under test (the f32 engines; bf16/fp16 results are
 * compared after widening to float). */
int gb_cmp_f32(const float *got, const double *ref, size_t n, double atol, double rtol,
               gb_cmp_t *out);

/* One summary line and the worst pairs, prefixed by `what`, to f. */
void gb_cmp_print(FILE *f, const char *what, const gb_cmp_t *c);

/* ---- finite differences ------------------------------------------------- */

#define GB_GC_H_DEFAULT    1e-5
#define GB_GC_ATOL_DEFAULT 1e-8
#define GB_GC_RTOL_DEFAULT 1e-6

/* The scalar function under test: evaluate it at the current inputs (which the
 * checker perturbs in place, see gb_gradcheck) and store it in *value.
 * Returns 0, or -1 on failure (the check then fails). */
typedef int (*gb_gc_fn_t)(void *ctx, double *value);

typedef struct gb_gc_opts {
    double h;          /* step, GB_GC_H_DEFAULT */
    double atol, rtol; /* per element: |analytic - numeric| <= atol + rtol * |numeric| */
    /* Non-smooth functions (ReLU, max pool) have kinks; a central difference
     * whose step straddles one is wrong, not the gradient. With nonsmooth = 1
     * each element that would fail is differenced again with step h/2, and
     * if the two estimates disagree by more than the tolerance it is skipped
     * as "kink within h" and counted. Whether to skip depends on f only (the
     * estimates agree at a smooth point), so a wrong analytic gradient cannot
     * hide behind it. More than max_skip skipped elements fail. */
    int nonsmooth;
    size_t max_skip;
    int quiet; /* 1: print nothing on failure */
    FILE *log; /* where failures print; NULL: stderr */
} gb_gc_opts_t;

typedef struct gb_gc_report {
    size_t checked; /* elements differenced */
    size_t skipped; /* of those, skipped as kinks (nonsmooth only) */
    int fn_failed;  /* 1: the function returned -1 (or malloc failed) */
    gb_cmp_t cmp;   /* analytic (got) vs numeric (ref) over the kept elements;
                       indices in cmp.worst are indices into x */
} gb_gc_report_t;

/* Defaults as above, nonsmooth 0, max_skip 0, printing to stderr. */
void gb_gc_opts_default(gb_gc_opts_t *o);

/* Check analytic (n elements, d f / d x) against central differences of f at
 * x. x is the array f reads (through ctx): the checker changes x[i] to
 * x[i] +- h, calls f, and restores x[i] bit for bit before returning. When idx
 * is NULL every element is checked, else the n_idx elements idx[] (each < n).
 * `name` labels printed failures. Returns 0 when all kept elements pass and no
 * more than max_skip were skipped, else -1 (report says why). rep may be NULL. */
int gb_gradcheck(gb_gc_fn_t f, void *ctx, double *x, size_t n, const double *analytic,
                 const size_t *idx, size_t n_idx, const gb_gc_opts_t *opts, const char *name,
                 gb_gc_report_t *rep);

/* <a, b> in double, summed in index order: the random projection that makes
 * an op scalar. */
double gb_gc_dot(const double *a, const double *b, size_t n);

#endif
