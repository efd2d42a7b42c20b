/* test_ref_gradcheck.c - the two checkers themselves: gb_cmp_* computes its
 * figures right and fails on what it must (values off, NaN, Inf, zero
 * tolerance), and gb_gradcheck passes a right gradient, fails a planted wrong
 * one and says where, restores its input, honours the sample, reports a
 * failing function, and tells a kink from a wrong gradient. */
#define _POSIX_C_SOURCE 200809L
#include "ref_test.h"

#include <stdio.h>
#include <string.h>

/* Failure text goes into memory so the tests can read what was printed. */
typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
} capture_t;

static void capture_open(capture_t *c) {
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    CHECK(c->f != NULL);
}

static void capture_close(capture_t *c) {
    fclose(c->f);
    free(c->buf);
}

static void test_cmp_figures(void) {
    double ref[4] = {1.0, 2.0, -3.0, 0.0};
    double got[4] = {1.0, 2.002, -3.0, 0.0};
    gb_cmp_t c;
    /* |2.002 - 2| = 0.002 <= 0 + 1e-3 * 2 (with a hair of rounding: 2.002 is not exact) */
    CHECK(gb_cmp_f64(got, ref, 4, 1e-12, 1.0001e-3, &c) == 0);
    CHECK(c.n == 4 && c.n_bad == 0 && c.n_nonfinite == 0);
    /* The figures below are checked to 1e-15: 2.002 - 2 is 0.002 only to the
     * ulp of 2.002 (4.4e-16), and one division or sqrt adds an ulp more. */
    CHECKF(fabs(c.max_abs - 0.002) < 1e-15, "max_abs %g", c.max_abs);
    CHECKF(fabs(c.max_rel - 0.001) < 1e-15, "max_rel %g", c.max_rel);
    /* ||d|| / ||ref|| = 0.002 / sqrt(1 + 4 + 9) */
    CHECKF(fabs(c.rel_l2 - 0.002 / sqrt(14.0)) < 1e-15, "rel_l2 %g", c.rel_l2);
    CHECK(c.worst[0].index == 1 && c.worst[0].ref == 2.0 && c.worst[0].got == 2.002);

    CHECK(gb_cmp_f64(got, ref, 4, 0.0, 1e-4, &c) == -1);
    CHECK(c.n_bad == 1 && c.worst[0].index == 1);
    /* 0.002 / (1e-4 * 2) = 10, off by the 4.4e-16 of 2.002 over 2e-4: ~2e-12 */
    CHECKF(fabs(c.worst[0].ratio - 10.0) < 1e-9, "ratio %g", c.worst[0].ratio);

    /* Zero tolerance: exact equality passes, the smallest difference fails. */
    CHECK(gb_cmp_f64(ref, ref, 4, 0.0, 0.0, &c) == 0 && c.max_ratio == 0.0);
    got[1] = nextafter(2.0, 3.0);
    CHECK(gb_cmp_f64(got, ref, 4, 0.0, 0.0, &c) == -1 && c.n_bad == 1);

    /* All-zero reference: rel L2 is 0 for a match and Inf for a mismatch. */
    double z[2] = {0, 0}, nz[2] = {0, 1e-20};
    CHECK(gb_cmp_f64(z, z, 2, 0, 0, &c) == 0 && c.rel_l2 == 0.0);
    CHECK(gb_cmp_f64(nz, z, 2, 1e-19, 0, &c) == 0 && isinf(c.rel_l2));
}

static void test_cmp_nonfinite(void) {
    double ref[3] = {1, 2, 3};
    double got[3] = {1, NAN, 3};
    gb_cmp_t c;
    /* No tolerance is wide enough for a NaN. */
    CHECK(gb_cmp_f64(got, ref, 3, 1e300, 1e300, &c) == -1);
    CHECK(c.n_bad == 1 && c.n_nonfinite == 1 && c.worst[0].index == 1 && isinf(c.max_ratio));
    got[1] = INFINITY;
    CHECK(gb_cmp_f64(got, ref, 3, 1e300, 1e300, &c) == -1 && c.n_nonfinite == 1);
    /* A non-finite reference fails too: the reference is never allowed to be broken. */
    double ref_bad[3] = {1, 2, NAN}, ok[3] = {1, 2, 3};
    CHECK(gb_cmp_f64(ok, ref_bad, 3, 1, 1, &c) == -1 && c.worst[0].index == 2);
    float gotf[3] = {1.0f, 2.0f, NAN};
    CHECK(gb_cmp_f32(gotf, ref, 3, 1e300, 1e300, &c) == -1 && c.n_nonfinite == 1);
}

static void test_cmp_f32_and_worst_order(void) {
    enum { N = 20 };
    double ref[N];
    float got[N];
    for (int i = 0; i < N; i++) {
        ref[i] = 1.0 + i;
        got[i] = (float)ref[i];
    }
    gb_cmp_t c;
    CHECK(gb_cmp_f32(got, ref, N, 0, 0, &c) == 0); /* small integers are exact in float */
    /* Errors growing with the index: the worst list is the last 8, largest first. */
    for (int i = 0; i < N; i++)
        got[i] = (float)(ref[i] + 1e-3 * i);
    CHECK(gb_cmp_f32(got, ref, N, 1e-6, 0, &c) == -1);
    CHECK(c.n_bad == N - 1 && c.n_worst == GB_CMP_WORST);
    for (int w = 0; w < GB_CMP_WORST; w++)
        CHECK(c.worst[w].index == (size_t)(N - 1 - w));
    /* float's own rounding, |got - ref| <= 2^-24 |ref|, passes rtol 2^-24 */
    for (int i = 0; i < N; i++) {
        ref[i] = 1.0 / (3.0 + i);
        got[i] = (float)ref[i];
    }
    CHECK(gb_cmp_f32(got, ref, N, 0, ldexp(1.0, -24), &c) == 0);
    CHECK(gb_cmp_f32(got, ref, N, 0, ldexp(1.0, -30), &c) == -1);
}

static void test_cmp_print(void) {
    double ref[3] = {1, 2, 3}, got[3] = {1, 2.5, 3};
    gb_cmp_t c;
    CHECK(gb_cmp_f64(got, ref, 3, 0, 1e-3, &c) == -1);
    capture_t cap;
    capture_open(&cap);
    gb_cmp_print(cap.f, "fc.weight", &c);
    fflush(cap.f);
    CHECKF(strstr(cap.buf, "fc.weight: 1 of 3") && strstr(cap.buf, "[1] got 2.5 ref 2"), "%s",
           cap.buf);
    capture_close(&cap);
}

/* ---- gradcheck ---------------------------------------------------------- */

/* f(x) = sum_i (i + 1) x_i^3 + sin(x_0 x_1), a smooth function with a known
 * gradient, and a count of calls. */
typedef struct smooth {
    const double *x;
    size_t n;
    int calls;
    int fail_at; /* the call that returns -1 (0: never) */
} smooth_t;

static int smooth_eval(void *ctx, double *value) {
    smooth_t *s = ctx;
    if (++s->calls == s->fail_at) return -1;
    double v = sin(s->x[0] * s->x[1]);
    for (size_t i = 0; i < s->n; i++)
        v += (double)(i + 1) * s->x[i] * s->x[i] * s->x[i];
    *value = v;
    return 0;
}

static void smooth_grad(const double *x, size_t n, double *g) {
    for (size_t i = 0; i < n; i++)
        g[i] = 3.0 * (double)(i + 1) * x[i] * x[i];
    g[0] += cos(x[0] * x[1]) * x[1];
    g[1] += cos(x[0] * x[1]) * x[0];
}

static void test_gradcheck_smooth(void) {
    enum { N = 12 };
    gb_rng_t r;
    gb_rng_seed(&r, 11);
    double x[N], keep[N], g[N];
    fill_uniform(&r, x, N, -1.5, 1.5);
    memcpy(keep, x, sizeof(x));
    smooth_grad(x, N, g);
    smooth_t s = {.x = x, .n = N};
    gb_gc_report_t rep;
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, NULL, 0, NULL, "smooth", &rep) == 0);
    CHECK(rep.checked == N && rep.skipped == 0 && !rep.fn_failed && rep.cmp.n == N);
    CHECK(s.calls == 2 * N);
    CHECK(memcmp(x, keep, sizeof(x)) == 0); /* restored bit for bit */
    /* The method's own error here: f''' <= 6 * 12 + 1, h = 1e-5 -> truncation
     * ~1e-9 at worst; the tolerance is rtol 1e-6 on gradients of size ~1..80. */
    CHECKF(rep.cmp.max_ratio < 0.1, "max err/tol %g", rep.cmp.max_ratio);
}

static void test_gradcheck_planted(void) {
    enum { N = 12 };
    gb_rng_t r;
    gb_rng_seed(&r, 12);
    double x[N], g[N];
    fill_uniform(&r, x, N, -1.5, 1.5);
    smooth_grad(x, N, g);
    g[7] *= 1.001; /* a 0.1% error in one element */
    smooth_t s = {.x = x, .n = N};
    gb_gc_opts_t o;
    gb_gc_opts_default(&o);
    capture_t cap;
    capture_open(&cap);
    o.log = cap.f;
    gb_gc_report_t rep;
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, NULL, 0, &o, "planted", &rep) == -1);
    CHECK(!rep.fn_failed && rep.cmp.n_bad == 1 && rep.cmp.worst[0].index == 7);
    fflush(cap.f);
    CHECKF(strstr(cap.buf, "gradcheck planted failed") && strstr(cap.buf, "[7] got"), "%s",
           cap.buf);
    capture_close(&cap);

    /* quiet prints nothing, and the result is the same */
    capture_open(&cap);
    o.log = cap.f;
    o.quiet = 1;
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, NULL, 0, &o, "planted", &rep) == -1);
    fflush(cap.f);
    CHECK(cap.len == 0);
    capture_close(&cap);

    /* A sample that leaves out element 7 passes; one that includes it fails,
     * and the reported index is the element's, not its place in the sample. */
    size_t without[3] = {0, 3, 11}, with[3] = {2, 7, 9};
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, without, 3, &o, "sample", &rep) == 0);
    CHECK(rep.checked == 3);
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, with, 3, &o, "sample", &rep) == -1);
    CHECK(rep.cmp.worst[0].index == 7);
}

static void test_gradcheck_errors(void) {
    enum { N = 4 };
    double x[N] = {0.1, 0.2, 0.3, 0.4}, keep[N], g[N];
    memcpy(keep, x, sizeof(x));
    smooth_grad(x, N, g);
    gb_gc_opts_t o;
    gb_gc_opts_default(&o);
    o.quiet = 1;
    gb_gc_report_t rep;
    /* The function fails on its 4th call (the second element's minus side). */
    smooth_t s = {.x = x, .n = N, .fail_at = 4};
    CHECK(gb_gradcheck(smooth_eval, &s, x, N, g, NULL, 0, &o, "failing", &rep) == -1);
    CHECK(rep.fn_failed == 1);
    CHECK(memcmp(x, keep, sizeof(x)) == 0);
    /* An index past the end is refused before anything is evaluated. */
    size_t bad[1] = {N};
    smooth_t s2 = {.x = x, .n = N};
    CHECK(gb_gradcheck(smooth_eval, &s2, x, N, g, bad, 1, &o, "index", &rep) == -1);
    CHECK(rep.fn_failed == 1 && s2.calls == 0);
}

/* f(x) = sum relu(x_i): piecewise linear, with a kink at 0. */
typedef struct kinky {
    const double *x;
    size_t n;
} kinky_t;

static int kinky_eval(void *ctx, double *value) {
    kinky_t *k = ctx;
    double v = 0;
    for (size_t i = 0; i < k->n; i++)
        v += k->x[i] > 0 ? k->x[i] : 0;
    *value = v;
    return 0;
}

static void test_gradcheck_nonsmooth(void) {
    /* x[1] = 3e-6 lies within h = 1e-5 of the kink: the central difference
     * there is (3e-6 + 1e-5) / 2e-5 = 0.65, not the true slope 1. */
    double x[4] = {0.5, 3e-6, -0.7, 1.2};
    double g[4] = {1, 1, 0, 1};
    kinky_t k = {.x = x, .n = 4};
    gb_gc_opts_t o;
    gb_gc_opts_default(&o);
    o.quiet = 1;
    gb_gc_report_t rep;
    CHECK(gb_gradcheck(kinky_eval, &k, x, 4, g, NULL, 0, &o, "kink", &rep) == -1);
    CHECK(rep.cmp.n_bad == 1 && rep.cmp.worst[0].index == 1);
    /* f is summed to ~eps * 2.4 = 5e-16, over a step of 2e-5: the difference
     * quotient carries ~1e-11, checked to 1e-9 */
    CHECKF(fabs(rep.cmp.worst[0].ref - 0.65) < 1e-9, "numeric %g", rep.cmp.worst[0].ref);
    /* With nonsmooth on, the step h/2 gives 0.8 != 0.65: the element is
     * skipped as a kink, allowed up to max_skip. */
    o.nonsmooth = 1;
    CHECK(gb_gradcheck(kinky_eval, &k, x, 4, g, NULL, 0, &o, "kink", &rep) == -1);
    CHECK(rep.skipped == 1 && rep.cmp.n_bad == 0);
    o.max_skip = 1;
    CHECK(gb_gradcheck(kinky_eval, &k, x, 4, g, NULL, 0, &o, "kink", &rep) == 0);
    CHECK(rep.checked == 4 && rep.skipped == 1 && rep.cmp.n == 3);
    /* Skipping never hides a wrong gradient at a smooth point. */
    g[3] = 0.999;
    CHECK(gb_gradcheck(kinky_eval, &k, x, 4, g, NULL, 0, &o, "kink", &rep) == -1);
    CHECK(rep.cmp.n_bad == 1 && rep.cmp.worst[0].index == 3);
}

int main(void) {
    test_cmp_figures();
    test_cmp_nonfinite();
    test_cmp_f32_and_worst_order();
    test_cmp_print();
    test_gradcheck_smooth();
    test_gradcheck_planted();
    test_gradcheck_errors();
    test_gradcheck_nonsmooth();
    return 0;
}
