/* test_ref_ops.c - every reference op: forward against hand-computed values,
 * backward against central finite differences of L = <dy, op(x)> on small
 * shapes (stride 2, 1x1, padding edges, odd sizes, batch 1 and > 1), and for
 * every checker a planted wrong gradient that it must reject.
 *
 * Tolerances: the gradchecks use op_opts() (ref_test.h), i.e. gradcheck.h's
 * defaults h = 1e-5, atol 1e-8, rtol 1e-6, whose origin is stated there.
 * Forward checks against hand values use rtol 1e-14: the hand values are
 * exact decimals and the ops round a handful of times (eps = 1.1e-16 each).
 */
#define _POSIX_C_SOURCE 200809L
#include "ref_ops.h"
#include "ref_test.h"

#include <stdio.h>
#include <string.h>

/* Tolerance for hand-computed forward values: a few roundings of 1.1e-16. */
#define HAND_RTOL 1e-14

/* Planted-fault checks run quietly: their failure is the expected outcome. */
static gb_gc_opts_t quiet_opts(void) {
    gb_gc_opts_t o = op_opts();
    o.quiet = 1;
    return o;
}

static void check_hand(const double *got, const double *want, size_t n, const char *what) {
    gb_cmp_t c;
    if (gb_cmp_f64(got, want, n, 1e-300, HAND_RTOL, &c) != 0) {
        gb_cmp_print(stderr, what, &c);
        CHECKF(0, "%s differs from the hand-computed values", what);
    }
}

/* ---- output sizes ------------------------------------------------------- */

static void test_out_size(void) {
    /* PyTorch: floor((in + 2p - k) / s) + 1 */
    CHECK(gb_ref_out_size(224, 7, 2, 3) == 112);
    CHECK(gb_ref_out_size(112, 3, 2, 1) == 56);
    CHECK(gb_ref_out_size(33, 7, 2, 3) == 17);
    CHECK(gb_ref_out_size(17, 3, 2, 1) == 9);
    CHECK(gb_ref_out_size(9, 1, 2, 0) == 5);
    CHECK(gb_ref_out_size(8, 3, 3, 0) == 2); /* the last two rows are never read */
    CHECK(gb_ref_out_size(1, 3, 2, 1) == 1);
    CHECK(gb_ref_out_size(2, 5, 1, 1) == -1); /* padded input smaller than the kernel */
    CHECK(gb_ref_out_size(0, 1, 1, 0) == -1);
    CHECK(gb_ref_out_size(4, 0, 1, 0) == -1);
    CHECK(gb_ref_out_size(4, 1, 0, 0) == -1);
    CHECK(gb_ref_out_size(4, 1, 1, -1) == -1);
    gb_ref_conv_t cv;
    CHECK(gb_ref_conv_init(&cv, 2, 3, 7, 5, 4, 3, 3, 2, 1) == 0 && cv.p == 4 && cv.q == 3);
    CHECK(gb_ref_conv_init(&cv, 0, 3, 7, 5, 4, 3, 3, 2, 1) == -1);
    CHECK(gb_ref_conv_init(&cv, 1, 0, 7, 5, 4, 3, 3, 2, 1) == -1);
    CHECK(gb_ref_conv_init(&cv, 1, 3, 7, 5, 0, 3, 3, 2, 1) == -1);
    CHECK(gb_ref_conv_init(&cv, 1, 3, 2, 2, 1, 5, 5, 1, 1) == -1);
    CHECK(gb_ref_conv_init2(&cv, 1, 1, 6, 6, 1, 2, 3, 2, 1, 0, 1) == 0 && cv.p == 3 && cv.q == 6);
    gb_ref_pool_t pl;
    CHECK(gb_ref_pool_init(&pl, 1, 1, 112, 112, 3, 3, 2, 1) == 0 && pl.p == 56 && pl.q == 56);
    CHECK(gb_ref_pool_init(&pl, 1, 1, 7, 7, 3, 3, 2, 2) == -1); /* pad > kernel / 2 */
    CHECK(gb_ref_pool_init(&pl, 1, 1, 7, 7, 2, 2, 2, 1) == 0);  /* pad == kernel / 2 */
    CHECK(gb_ref_pool_init(&pl, 1, 1, 7, 7, 3, 3, 0, 1) == -1);
    CHECK(gb_ref_pool_init(&pl, 0, 1, 7, 7, 3, 3, 2, 1) == -1);
    CHECK(gb_ref_pool_init(&pl, 1, 1, 1, 1, 3, 3, 1, 0) == -1); /* window larger than input */
}

/* ---- convolution -------------------------------------------------------- */

static void test_conv_hand(void) {
    /* x = 1..9 (3x3), w = [[1,2],[3,4]], stride 2, pad 1 -> 2x2:
     *   (0,0): x00*w11 = 4                    (0,1): x01*w10 + x02*w11 = 6 + 12 = 18
     *   (1,0): x10*w01 + x20*w11 = 8 + 28 = 36 (1,1): 5 + 12 + 24 + 36 = 77 */
    double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 2, 3, 4}, y[4];
    double want[4] = {4, 18, 36, 77};
    gb_ref_conv_t cv;
    CHECK(gb_ref_conv_init(&cv, 1, 1, 3, 3, 1, 2, 2, 2, 1) == 0 && cv.p == 2 && cv.q == 2);
    gb_ref_conv2d_fwd(&cv, x, w, y);
    check_hand(y, want, 4, "conv 2x2/2 pad 1");
    /* dy = 1 everywhere: dw[r][s] sums the inputs each tap saw.
     *   w00 saw only x[1][1] = 5 (output (1,1)); w01 saw x10 and x11... spelled out:
     *   w00: (1,1)->x11=5                       w01: (1,0)->x10=4, (1,1)->x12=6
     *   w10: (0,1)->x01=2, (1,1)->x21=8         w11: x00 + x02 + x20 + x22 = 1+3+7+9 */
    double dy[4] = {1, 1, 1, 1}, dw[4], dw_want[4] = {5, 10, 10, 20};
    gb_ref_conv2d_bwd_weights(&cv, x, dy, dw);
    check_hand(dw, dw_want, 4, "conv bwd weights");
    /* dx[i][j] = sum of the weights that touched it: x00 only via w11 (4), x01
     * via w10 (3), x02 via w11 (4), x10 via w01 (2), x11 via w00 (1), x12 via w01
     * (2), x20 via w11 (4), x21 via w10 (3), x22 via w11 (4). */
    double dx[9], dx_want[9] = {4, 3, 4, 2, 1, 2, 4, 3, 4};
    gb_ref_conv2d_bwd_data(&cv, dy, w, dx);
    check_hand(dx, dx_want, 9, "conv bwd data");
}

typedef struct conv_ctx {
    proj_t pr;
    gb_ref_conv_t cv;
    double *x, *w, *y;
} conv_ctx_t;

static void conv_fwd(void *self) {
    conv_ctx_t *c = self;
    gb_ref_conv2d_fwd(&c->cv, c->x, c->w, c->y);
}

/* A conv bwd-data that forgets the padding edge: output positions whose
 * window reaches into the padding contribute nothing (a typical bounds bug). */
static void conv_bwd_data_drop_edge(const gb_ref_conv_t *cv, const double *dy, const double *w,
                                    double *dx) {
    memset(dx, 0, sizeof(double) * (size_t)cv->n * cv->c * cv->h * cv->w);
    for (int n = 0; n < cv->n; n++)
        for (int k = 0; k < cv->k; k++)
            for (int p = 0; p < cv->p; p++)
                for (int q = 0; q < cv->q; q++) {
                    int h0 = p * cv->stride_h - cv->pad_h, w0 = q * cv->stride_w - cv->pad_w;
                    if (h0 < 0 || w0 < 0 || h0 + cv->r > cv->h || w0 + cv->s > cv->w) continue;
                    double g = dy[(((size_t)n * cv->k + k) * cv->p + p) * cv->q + q];
                    for (int c = 0; c < cv->c; c++)
                        for (int r = 0; r < cv->r; r++)
                            for (int s = 0; s < cv->s; s++)
                                dx[(((size_t)n * cv->c + c) * cv->h + h0 + r) * cv->w + w0 + s] +=
                                    g * w[(((size_t)k * cv->c + c) * cv->r + r) * cv->s + s];
                }
}

/* One convolution shape: gradcheck of dx and dw over every element, and, when
 * the shape has padding, the planted "dropped edge" bwd-data must fail. */
static void conv_case(const char *name, int n, int c, int h, int w, int k, int r, int s, int sh,
                      int sw, int ph, int pw, uint64_t seed) {
    conv_ctx_t cx = {0};
    CHECKF(gb_ref_conv_init2(&cx.cv, n, c, h, w, k, r, s, sh, sw, ph, pw) == 0, "%s", name);
    size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * s;
    size_t ny = (size_t)n * k * cx.cv.p * cx.cv.q;
    gb_rng_t rng;
    gb_rng_seed(&rng, seed);
    cx.x = dalloc(nx);
    cx.w = dalloc(nw);
    cx.y = dalloc(ny);
    double *dy = dalloc(ny), *dx = dalloc(nx), *dw = dalloc(nw);
    fill_uniform(&rng, cx.x, nx, -1, 1);
    fill_uniform(&rng, cx.w, nw, -1, 1);
    fill_uniform(&rng, dy, ny, -1, 1);
    cx.pr = (proj_t){.fwd = conv_fwd, .out = cx.y, .dy = dy, .n = ny};
    gb_ref_conv2d_bwd_data(&cx.cv, dy, cx.w, dx);
    gb_ref_conv2d_bwd_weights(&cx.cv, cx.x, dy, dw);
    gb_gc_opts_t o = op_opts();
    char what[96];
    snprintf(what, sizeof(what), "%s dx", name);
    CHECK(gb_gradcheck(proj_eval, &cx, cx.x, nx, dx, NULL, 0, &o, what, NULL) == 0);
    snprintf(what, sizeof(what), "%s dw", name);
    CHECK(gb_gradcheck(proj_eval, &cx, cx.w, nw, dw, NULL, 0, &o, what, NULL) == 0);

    /* Planted: the largest weight gradient 1% off must be caught. (Some taps
     * have an exactly zero gradient: on a 1x1 input with pad 1 only the centre
     * of a 3x3 kernel ever sees data.) */
    gb_gc_opts_t q = quiet_opts();
    gb_gc_report_t rep;
    size_t big = 0;
    for (size_t i = 1; i < nw; i++)
        if (fabs(dw[i]) > fabs(dw[big])) big = i;
    CHECK(dw[big] != 0);
    dw[big] *= 1.01;
    CHECK(gb_gradcheck(proj_eval, &cx, cx.w, nw, dw, NULL, 0, &q, name, &rep) == -1);
    CHECK(rep.cmp.n_bad == 1 && rep.cmp.worst[0].index == big);
    if (ph > 0 || pw > 0) {
        conv_bwd_data_drop_edge(&cx.cv, dy, cx.w, dx);
        CHECK(gb_gradcheck(proj_eval, &cx, cx.x, nx, dx, NULL, 0, &q, name, &rep) == -1);
        CHECK(rep.cmp.n_bad >= 1);
    }
    free(cx.x);
    free(cx.w);
    free(cx.y);
    free(dy);
    free(dx);
    free(dw);
}

static void test_conv_grad(void) {
    /*        name                       n  c  h  w  k  r  s  sh sw ph pw */
    conv_case("1x1 s1", 2, 3, 5, 5, 4, 1, 1, 1, 1, 0, 0, 1);
    conv_case("1x1 s2 odd (downsample)", 2, 3, 7, 7, 4, 1, 1, 2, 2, 0, 0, 2);
    conv_case("3x3 s1 p1 batch 1", 1, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 3);
    conv_case("3x3 s2 p1 odd", 2, 3, 7, 5, 2, 3, 3, 2, 2, 1, 1, 4);
    conv_case("3x3 s2 p1 even", 1, 2, 6, 8, 2, 3, 3, 2, 2, 1, 1, 5);
    conv_case("7x7 s2 p3 (stem)", 1, 3, 9, 9, 2, 7, 7, 2, 2, 3, 3, 6);
    conv_case("2x3 s(2,1) p(0,1)", 2, 2, 6, 5, 2, 2, 3, 2, 1, 0, 1, 7);
    conv_case("3x3 s3 unread rows", 1, 2, 8, 8, 2, 3, 3, 3, 3, 0, 0, 8);
    conv_case("3x3 p1 on 2x2", 3, 1, 2, 2, 2, 3, 3, 1, 1, 1, 1, 9);
    conv_case("3x3 s2 p1 on 1x1", 2, 2, 1, 1, 3, 3, 3, 2, 2, 1, 1, 10);
}

/* ---- batch norm --------------------------------------------------------- */

static void test_bn_hand(void) {
    /* (N=2, C=2, HW=2). Channel 0 holds 1,2 | 3,6: mean 3, biased var
     * (4+1+0+9)/4 = 3.5, unbiased 14/3. Channel 1 holds 0,0 | 0,4: mean 1,
     * biased var (1+1+1+9)/4 = 3, unbiased 4. */
    double x[8] = {1, 2, 0, 0, 3, 6, 0, 4};
    double gamma[2] = {1, 2}, beta[2] = {0, 0.5}, y[8], mean[2], var[2];
    CHECK(gb_ref_bn_fwd(2, 2, 2, x, gamma, beta, 1e-5, y, mean, var) == 0);
    double mean_want[2] = {3, 1}, var_want[2] = {3.5, 3};
    check_hand(mean, mean_want, 2, "bn mean");
    check_hand(var, var_want, 2, "bn var (biased)");
    double s0 = sqrt(3.5 + 1e-5), s1 = sqrt(3 + 1e-5);
    double y_want[8] = {-2 / s0, -1 / s0, 2 * -1 / s1 + 0.5, 2 * -1 / s1 + 0.5,
                        0 / s0,  3 / s0,  2 * -1 / s1 + 0.5, 2 * 3 / s1 + 0.5};
    check_hand(y, y_want, 8, "bn y");

    /* Running statistics, momentum 0.1, from rm = (0.5, -1), rv = (1, 2):
     *   rm0 = 0.9*0.5 + 0.1*3 = 0.75      rv0 = 0.9*1 + 0.1*14/3 = 1.3666...
     *   rm1 = 0.9*-1  + 0.1*1 = -0.8      rv1 = 0.9*2 + 0.1*4    = 2.2 */
    double rm[2] = {0.5, -1}, rv[2] = {1, 2};
    CHECK(gb_ref_bn_update_running(2, 4, 0.1, mean, var, rm, rv) == 0);
    double rm_want[2] = {0.75, -0.8}, rv_want[2] = {0.9 + 1.4 / 3.0, 2.2};
    check_hand(rm, rm_want, 2, "running mean");
    check_hand(rv, rv_want, 2, "running var");

    /* Planted: the biased variance in the running update (a common slip)
     * must fail the same comparison. */
    double rv_b[2] = {1, 2};
    for (int c = 0; c < 2; c++)
        rv_b[c] = 0.9 * rv_b[c] + 0.1 * var[c];
    gb_cmp_t cmp;
    CHECK(gb_cmp_f64(rv_b, rv_want, 2, 1e-300, HAND_RTOL, &cmp) == -1 && cmp.n_bad == 2);

    /* One value per channel: torch refuses, and so do we (nothing written). */
    double one[2] = {1, 2}, out1[2] = {7, 7}, m1[2] = {7, 7}, v1[2] = {7, 7};
    CHECK(gb_ref_bn_fwd(1, 2, 1, one, gamma, beta, 1e-5, out1, m1, v1) == -1);
    CHECK(out1[0] == 7 && m1[0] == 7 && v1[1] == 7);
    CHECK(gb_ref_bn_update_running(2, 1, 0.1, mean, var, rm, rv) == -1);
    CHECK(rm[0] == 0.75);
}

typedef struct bn_ctx {
    proj_t pr;
    int n, c, hw;
    double *x, *gamma, *beta, *y, *mean, *var;
} bn_ctx_t;

static void bn_fwd(void *self) {
    bn_ctx_t *b = self;
    CHECK(gb_ref_bn_fwd(b->n, b->c, b->hw, b->x, b->gamma, b->beta, GB_REF_BN_EPS, b->y, b->mean,
                        b->var) == 0);
}

/* The slip of forgetting that mean and var depend on x: dx = gamma istd dy. */
static void bn_bwd_no_stats(int n, int c, int hw, const double *dy, const double *gamma,
                            const double *var, double *dx) {
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < hw; i++) {
                size_t j = ((size_t)b * c + ch) * hw + i;
                dx[j] = gamma[ch] * dy[j] / sqrt(var[ch] + GB_REF_BN_EPS);
            }
}

static void bn_case(const char *name, int n, int c, int hw, uint64_t seed) {
    bn_ctx_t b = {.n = n, .c = c, .hw = hw};
    size_t nx = (size_t)n * c * hw;
    gb_rng_t rng;
    gb_rng_seed(&rng, seed);
    b.x = dalloc(nx);
    b.y = dalloc(nx);
    b.gamma = dalloc(c);
    b.beta = dalloc(c);
    b.mean = dalloc(c);
    b.var = dalloc(c);
    double *dy = dalloc(nx), *dx = dalloc(nx), *dg = dalloc(c), *db = dalloc(c);
    /* Each channel with its own offset and scale, as real activations. */
    for (int ch = 0; ch < c; ch++) {
        double off = 4 * gb_rng_uniform(&rng) - 2, sc = 0.5 + 2 * gb_rng_uniform(&rng);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                b.x[((size_t)i * c + ch) * hw + j] = off + sc * (2 * gb_rng_uniform(&rng) - 1);
    }
    fill_uniform(&rng, b.gamma, c, 0.5, 1.5);
    fill_uniform(&rng, b.beta, c, -0.5, 0.5);
    fill_uniform(&rng, dy, nx, -1, 1);
    b.pr = (proj_t){.fwd = bn_fwd, .out = b.y, .dy = dy, .n = nx};
    bn_fwd(&b);
    gb_ref_bn_bwd(n, c, hw, b.x, dy, b.gamma, b.mean, b.var, GB_REF_BN_EPS, dx, dg, db);
    gb_gc_opts_t o = op_opts();
    char what[96];
    snprintf(what, sizeof(what), "%s dx", name);
    CHECK(gb_gradcheck(proj_eval, &b, b.x, nx, dx, NULL, 0, &o, what, NULL) == 0);
    snprintf(what, sizeof(what), "%s dgamma", name);
    CHECK(gb_gradcheck(proj_eval, &b, b.gamma, c, dg, NULL, 0, &o, what, NULL) == 0);
    snprintf(what, sizeof(what), "%s dbeta", name);
    CHECK(gb_gradcheck(proj_eval, &b, b.beta, c, db, NULL, 0, &o, what, NULL) == 0);
    /* dgamma and dbeta may be NULL: dx alone is the same. */
    double *dx2 = dalloc(nx);
    gb_ref_bn_bwd(n, c, hw, b.x, dy, b.gamma, b.mean, b.var, GB_REF_BN_EPS, dx2, NULL, NULL);
    CHECK(memcmp(dx, dx2, sizeof(double) * nx) == 0);

    /* Planted: dx without the batch-statistics terms must fail. */
    gb_gc_opts_t q = quiet_opts();
    gb_gc_report_t rep;
    bn_bwd_no_stats(n, c, hw, dy, b.gamma, b.var, dx2);
    CHECK(gb_gradcheck(proj_eval, &b, b.x, nx, dx2, NULL, 0, &q, name, &rep) == -1);
    CHECK(rep.cmp.n_bad >= 1);
    /* Planted: dgamma with one channel 0.1% off. */
    dg[c - 1] *= 1.001;
    CHECK(gb_gradcheck(proj_eval, &b, b.gamma, c, dg, NULL, 0, &q, name, &rep) == -1);
    CHECK(rep.cmp.worst[0].index == (size_t)(c - 1));
    free(b.x);
    free(b.y);
    free(b.gamma);
    free(b.beta);
    free(b.mean);
    free(b.var);
    free(dy);
    free(dx);
    free(dx2);
    free(dg);
    free(db);
}

static void test_bn_grad(void) {
    bn_case("bn 2x3x(5x5) odd", 2, 3, 25, 21);
    bn_case("bn batch 1 3x(3x4)", 1, 3, 12, 22);
    bn_case("bn 4x2x(1x1)", 4, 2, 1, 23);
    bn_case("bn M = 2", 2, 2, 1, 24);
    bn_case("bn 3x4x(2x3)", 3, 4, 6, 25);
}

/* ---- ReLU and residual add ---------------------------------------------- */

static void test_relu_hand(void) {
    double x[5] = {-2, -0.0, 0.0, 1e-300, 3}, y[5], dy[5] = {1, 2, 3, 4, 5}, dx[5];
    gb_ref_relu_fwd(5, x, y);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == 1e-300 && y[4] == 3);
    gb_ref_relu_bwd(5, y, dy, dx);
    /* torch's threshold_backward: gradient only where the output is > 0 */
    CHECK(dx[0] == 0 && dx[1] == 0 && dx[2] == 0 && dx[3] == 4 && dx[4] == 5);
    gb_ref_relu_fwd(5, x, x); /* in place */
    CHECK(x[0] == 0 && x[4] == 3);
    double a[3] = {1, -2, 0.5}, b[3] = {-3, 1, 0.25}, s[3];
    gb_ref_add_fwd(3, a, b, s);
    CHECK(s[0] == -2 && s[1] == -1 && s[2] == 0.75);
    gb_ref_add_relu_fwd(3, a, b, s);
    CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0.75);
}

typedef struct ew_ctx {
    proj_t pr;
    size_t n;
    int kind; /* 0 relu(a), 1 a + b, 2 relu(a + b) */
    double *a, *b, *y;
} ew_ctx_t;

static void ew_fwd(void *self) {
    ew_ctx_t *e = self;
    if (e->kind == 0) gb_ref_relu_fwd(e->n, e->a, e->y);
    if (e->kind == 1) gb_ref_add_fwd(e->n, e->a, e->b, e->y);
    if (e->kind == 2) gb_ref_add_relu_fwd(e->n, e->a, e->b, e->y);
}

static void test_elementwise_grad(void) {
    enum { N = 3 * 2 * 5 * 3 };
    gb_rng_t rng;
    gb_rng_seed(&rng, 31);
    double a[N], b[N], y[N], dy[N], g[N];
    fill_uniform(&rng, a, N, -1, 1);
    fill_uniform(&rng, b, N, -1, 1);
    fill_uniform(&rng, dy, N, -1, 1);
    /* Keep every ReLU input 1e-3 away from 0, 100x the step: no kink is crossed. */
    push_from_zero(a, N, 1e-3);
    for (int i = 0; i < N; i++)
        if (fabs(a[i] + b[i]) < 1e-3) b[i] += 2e-3;
    ew_ctx_t e = {.n = N, .a = a, .b = b, .y = y};
    e.pr = (proj_t){.fwd = ew_fwd, .out = y, .dy = dy, .n = N};
    gb_gc_opts_t o = op_opts(), q = quiet_opts();

    e.kind = 0;
    ew_fwd(&e);
    gb_ref_relu_bwd(N, y, dy, g);
    CHECK(gb_gradcheck(proj_eval, &e, a, N, g, NULL, 0, &o, "relu", NULL) == 0);
    memcpy(g, dy, sizeof(g)); /* planted: gradient passed through where y == 0 */
    CHECK(gb_gradcheck(proj_eval, &e, a, N, g, NULL, 0, &q, "relu", NULL) == -1);

    e.kind = 1;
    memcpy(g, dy, sizeof(g)); /* the add's gradient is dy to both inputs */
    CHECK(gb_gradcheck(proj_eval, &e, a, N, g, NULL, 0, &o, "add da", NULL) == 0);
    CHECK(gb_gradcheck(proj_eval, &e, b, N, g, NULL, 0, &o, "add db", NULL) == 0);
    g[N - 1] = -g[N - 1]; /* planted: one sign flipped */
    CHECK(gb_gradcheck(proj_eval, &e, b, N, g, NULL, 0, &q, "add db", NULL) == -1);

    e.kind = 2;
    ew_fwd(&e);
    gb_ref_add_relu_bwd(N, y, dy, g);
    CHECK(gb_gradcheck(proj_eval, &e, a, N, g, NULL, 0, &o, "add+relu da", NULL) == 0);
    CHECK(gb_gradcheck(proj_eval, &e, b, N, g, NULL, 0, &o, "add+relu db", NULL) == 0);
    gb_ref_relu_bwd(N, a, dy, g); /* planted: mask taken from a alone, not a + b */
    CHECK(gb_gradcheck(proj_eval, &e, b, N, g, NULL, 0, &q, "add+relu db", NULL) == -1);
}

/* ---- max pool ----------------------------------------------------------- */

static void test_maxpool_hand(void) {
    /* 3x3 plane with ties, kernel 3, stride 2, pad 1 -> 2x2. Each window's
     * first maximum in row-major order takes the gradient; PyTorch 1.13 gives
     * this dx for dy = 1 (checked with torch.nn.functional.max_pool2d):
     *   [[0, 2, 0], [1, 0, 0], [0, 1, 0]] */
    double x[9] = {1, 3, 3, 3, 2, 1, 0, 3, 1}, y[4], dy[4] = {1, 1, 1, 1}, dx[9];
    gb_ref_pool_t pl;
    CHECK(gb_ref_pool_init(&pl, 1, 1, 3, 3, 3, 3, 2, 1) == 0 && pl.p == 2 && pl.q == 2);
    gb_ref_maxpool_fwd(&pl, x, y);
    CHECK(y[0] == 3 && y[1] == 3 && y[2] == 3 && y[3] == 3);
    gb_ref_maxpool_bwd(&pl, x, dy, dx);
    double want[9] = {0, 2, 0, 1, 0, 0, 0, 1, 0};
    CHECK(memcmp(dx, want, sizeof(want)) == 0);

    /* All values negative: padded cells never win (a zero pad would give 0). */
    double neg[9] = {-5, -4, -3, -6, -1, -7, -9, -8, -2};
    gb_ref_maxpool_fwd(&pl, neg, y);
    CHECK(y[0] == -1 && y[1] == -1 && y[2] == -1 && y[3] == -1);
    /* Window (0,0) covers rows 0..1, cols 0..1 of the input: {-5,-4,-6,-1}. */
    double neg2[9] = {-5, -4, -3, -6, -10, -7, -9, -8, -2};
    gb_ref_maxpool_fwd(&pl, neg2, y);
    CHECK(y[0] == -4 && y[1] == -3 && y[2] == -6 && y[3] == -2);
}

typedef struct pool_ctx {
    proj_t pr;
    gb_ref_pool_t pl;
    double *x, *y;
} pool_ctx_t;

static void pool_fwd(void *self) {
    pool_ctx_t *p = self;
    gb_ref_maxpool_fwd(&p->pl, p->x, p->y);
}

static void pool_case(const char *name, int n, int c, int h, int w, int k, int s, int pad,
                      uint64_t seed) {
    pool_ctx_t p = {0};
    CHECKF(gb_ref_pool_init(&p.pl, n, c, h, w, k, k, s, pad) == 0, "%s", name);
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * p.pl.p * p.pl.q;
    gb_rng_t rng;
    gb_rng_seed(&rng, seed);
    p.x = dalloc(nx);
    p.y = dalloc(ny);
    double *dy = dalloc(ny), *dx = dalloc(nx);
    /* Distinct values at least 1e-3 apart (a shuffled ramp), so no window has
     * a tie within the step and the max is differentiable everywhere. */
    for (size_t i = 0; i < nx; i++)
        p.x[i] = -1.0 + 2e-3 * (double)i;
    for (size_t i = nx - 1; i > 0; i--) {
        size_t j = (size_t)(gb_rng_next(&rng) % (i + 1));
        double t = p.x[i];
        p.x[i] = p.x[j];
        p.x[j] = t;
    }
    fill_uniform(&rng, dy, ny, -1, 1);
    p.pr = (proj_t){.fwd = pool_fwd, .out = p.y, .dy = dy, .n = ny};
    gb_ref_maxpool_bwd(&p.pl, p.x, dy, dx);
    gb_gc_opts_t o = op_opts();
    CHECK(gb_gradcheck(proj_eval, &p, p.x, nx, dx, NULL, 0, &o, name, NULL) == 0);
    /* Planted: each window's gradient sent to its top-left real cell instead of
     * its maximum. */
    memset(dx, 0, sizeof(double) * nx);
    for (size_t nc = 0; nc < (size_t)n * c; nc++)
        for (int i = 0; i < p.pl.p; i++)
            for (int j = 0; j < p.pl.q; j++) {
                int hi = i * s - pad < 0 ? 0 : i * s - pad, wi = j * s - pad < 0 ? 0 : j * s - pad;
                dx[nc * h * w + (size_t)hi * w + wi] += dy[(nc * p.pl.p + i) * p.pl.q + j];
            }
    /* With a 1x1 window, or a 1x1 input, the top-left real cell is the only
     * one, so the "wrong" routing is right and must pass. */
    int can_differ = k > 1 && h * w > 1;
    gb_gc_opts_t q = quiet_opts();
    CHECK(gb_gradcheck(proj_eval, &p, p.x, nx, dx, NULL, 0, &q, name, NULL) ==
          (can_differ ? -1 : 0));
    free(p.x);
    free(p.y);
    free(dy);
    free(dx);
}

static void test_maxpool_grad(void) {
    pool_case("pool 3/2/1 odd (ResNet)", 2, 2, 7, 7, 3, 2, 1, 41);
    pool_case("pool 3/2/1 even batch 1", 1, 2, 6, 8, 3, 2, 1, 42);
    pool_case("pool 2/2/0", 1, 2, 5, 4, 2, 2, 0, 43);
    pool_case("pool 3/1/1 overlapping", 2, 1, 5, 5, 3, 1, 1, 44);
    pool_case("pool 1/2/0", 1, 1, 5, 4, 1, 2, 0, 45);
    pool_case("pool 3/2/1 on 1x1", 3, 2, 1, 1, 3, 2, 1, 46);
}

/* ---- global average pool ------------------------------------------------ */

typedef struct gap_ctx {
    proj_t pr;
    int n, c, hw;
    double *x, *y;
} gap_ctx_t;

static void gap_fwd(void *self) {
    gap_ctx_t *g = self;
    gb_ref_gap_fwd(g->n, g->c, g->hw, g->x, g->y);
}

static void test_gap(void) {
    double x[6] = {1, 2, 3, 4, 5, 9}, y[2], want[2] = {2, 6};
    gb_ref_gap_fwd(1, 2, 3, x, y);
    check_hand(y, want, 2, "gap");

    int cases[3][3] = {{2, 3, 7 * 7}, {1, 4, 3 * 5}, {3, 2, 1}};
    for (int t = 0; t < 3; t++) {
        gap_ctx_t g = {.n = cases[t][0], .c = cases[t][1], .hw = cases[t][2]};
        size_t nx = (size_t)g.n * g.c * g.hw, ny = (size_t)g.n * g.c;
        gb_rng_t rng;
        gb_rng_seed(&rng, 51 + t);
        g.x = dalloc(nx);
        g.y = dalloc(ny);
        double *dy = dalloc(ny), *dx = dalloc(nx);
        fill_uniform(&rng, g.x, nx, -1, 1);
        fill_uniform(&rng, dy, ny, -1, 1);
        g.pr = (proj_t){.fwd = gap_fwd, .out = g.y, .dy = dy, .n = ny};
        gb_ref_gap_bwd(g.n, g.c, g.hw, dy, dx);
        gb_gc_opts_t o = op_opts(), q = quiet_opts();
        CHECK(gb_gradcheck(proj_eval, &g, g.x, nx, dx, NULL, 0, &o, "gap", NULL) == 0);
        if (g.hw > 1) {
            /* Planted: the 1/HW forgotten. */
            for (size_t i = 0; i < nx; i++)
                dx[i] = dy[i / g.hw];
            CHECK(gb_gradcheck(proj_eval, &g, g.x, nx, dx, NULL, 0, &q, "gap", NULL) == -1);
        }
        free(g.x);
        free(g.y);
        free(dy);
        free(dx);
    }
}

/* ---- fully connected ---------------------------------------------------- */

typedef struct fc_ctx {
    proj_t pr;
    int n, in, out;
    double *x, *w, *b, *y;
} fc_ctx_t;

static void fc_fwd(void *self) {
    fc_ctx_t *f = self;
    gb_ref_fc_fwd(f->n, f->in, f->out, f->x, f->w, f->b, f->y);
}

static void test_fc(void) {
    /* x = [1 2], W = [[1 0], [2 -1], [0 3]], b = [0.5 0 -1]: y = [1.5, 0, 5] */
    double x0[2] = {1, 2}, w0[6] = {1, 0, 2, -1, 0, 3}, b0[3] = {0.5, 0, -1}, y0[3];
    double want[3] = {1.5, 0, 5};
    gb_ref_fc_fwd(1, 2, 3, x0, w0, b0, y0);
    check_hand(y0, want, 3, "fc");
    gb_ref_fc_fwd(1, 2, 3, x0, w0, NULL, y0); /* no bias */
    CHECK(y0[0] == 1 && y0[1] == 0 && y0[2] == 6);

    int cases[2][3] = {{3, 5, 4}, {1, 6, 3}};
    for (int t = 0; t < 2; t++) {
        fc_ctx_t f = {.n = cases[t][0], .in = cases[t][1], .out = cases[t][2]};
        size_t nx = (size_t)f.n * f.in, nw = (size_t)f.out * f.in, ny = (size_t)f.n * f.out;
        gb_rng_t rng;
        gb_rng_seed(&rng, 61 + t);
        f.x = dalloc(nx);
        f.w = dalloc(nw);
        f.b = dalloc(f.out);
        f.y = dalloc(ny);
        double *dy = dalloc(ny), *dx = dalloc(nx), *dw = dalloc(nw), *db = dalloc(f.out);
        fill_uniform(&rng, f.x, nx, -1, 1);
        fill_uniform(&rng, f.w, nw, -1, 1);
        fill_uniform(&rng, f.b, f.out, -1, 1);
        fill_uniform(&rng, dy, ny, -1, 1);
        f.pr = (proj_t){.fwd = fc_fwd, .out = f.y, .dy = dy, .n = ny};
        gb_ref_fc_bwd(f.n, f.in, f.out, f.x, f.w, dy, dx, dw, db);
        gb_gc_opts_t o = op_opts(), q = quiet_opts();
        CHECK(gb_gradcheck(proj_eval, &f, f.x, nx, dx, NULL, 0, &o, "fc dx", NULL) == 0);
        CHECK(gb_gradcheck(proj_eval, &f, f.w, nw, dw, NULL, 0, &o, "fc dw", NULL) == 0);
        CHECK(gb_gradcheck(proj_eval, &f, f.b, f.out, db, NULL, 0, &o, "fc db", NULL) == 0);
        /* NULL outputs are skipped; the others are unchanged. */
        double *dw2 = dalloc(nw);
        gb_ref_fc_bwd(f.n, f.in, f.out, f.x, f.w, dy, NULL, dw2, NULL);
        CHECK(memcmp(dw, dw2, sizeof(double) * nw) == 0);
        /* Planted: dw laid out (in, out) instead of torch's (out, in). */
        for (int o2 = 0; o2 < f.out; o2++)
            for (int j = 0; j < f.in; j++)
                dw2[(size_t)j * f.out + o2] = dw[(size_t)o2 * f.in + j];
        CHECK(gb_gradcheck(proj_eval, &f, f.w, nw, dw2, NULL, 0, &q, "fc dw", NULL) == -1);
        /* Planted: db from the first sample only (batch sum forgotten); with a
         * batch of 1 the two agree, which is right. */
        for (int o2 = 0; o2 < f.out; o2++)
            db[o2] = dy[o2];
        CHECK(gb_gradcheck(proj_eval, &f, f.b, f.out, db, NULL, 0, &q, "fc db", NULL) ==
              (f.n > 1 ? -1 : 0));
        free(f.x);
        free(f.w);
        free(f.b);
        free(f.y);
        free(dy);
        free(dx);
        free(dw);
        free(dw2);
        free(db);
    }
}

/* ---- softmax cross-entropy ---------------------------------------------- */

typedef struct xent_ctx {
    int n, k;
    double *z;
    const int32_t *labels;
} xent_ctx_t;

static int xent_eval(void *ctx, double *value) {
    xent_ctx_t *x = ctx;
    return gb_ref_softmax_xent(x->n, x->k, x->z, x->labels, value, NULL);
}

static void test_xent(void) {
    /* Two equal logits: loss log 2, gradient (0.5 - 1, 0.5) / 1. Huge logits
     * stay finite thanks to the max shift. */
    double z[2] = {1000, 1000}, dz[2], loss;
    int32_t lab0[1] = {0};
    CHECK(gb_ref_softmax_xent(1, 2, z, lab0, &loss, dz) == 0);
    /* log(1 + 1) and a subtraction of equal logits: within an ulp of log 2 */
    CHECKF(fabs(loss - log(2.0)) < 1e-15, "loss %.17g", loss);
    CHECK(dz[0] == -0.5 && dz[1] == 0.5);
    double z3[6] = {0, 0, 0, -1000, 0, 1000};
    int32_t lab3[2] = {2, 2};
    /* row 0: log 3; row 1: label holds the max, loss log(1 + e^-1000 + e^-1000) = 0 */
    CHECK(gb_ref_softmax_xent(2, 3, z3, lab3, &loss, NULL) == 0);
    CHECKF(fabs(loss - log(3.0) / 2) < 1e-15, "loss %.17g", loss);
    /* Labels out of range are refused, nothing written. */
    int32_t bad[2] = {2, 3};
    loss = 42;
    CHECK(gb_ref_softmax_xent(2, 3, z3, bad, &loss, dz) == -1 && loss == 42);
    bad[1] = -1;
    CHECK(gb_ref_softmax_xent(2, 3, z3, bad, &loss, dz) == -1);

    enum { N = 4, K = 5 };
    gb_rng_t rng;
    gb_rng_seed(&rng, 71);
    double zz[N * K], g[N * K];
    int32_t labels[N] = {0, 4, 2, 2};
    fill_uniform(&rng, zz, N * K, -3, 3);
    CHECK(gb_ref_softmax_xent(N, K, zz, labels, &loss, g) == 0);
    xent_ctx_t x = {.n = N, .k = K, .z = zz, .labels = labels};
    gb_gc_opts_t o = op_opts(), q = quiet_opts();
    CHECK(gb_gradcheck(xent_eval, &x, zz, N * K, g, NULL, 0, &o, "xent", NULL) == 0);
    /* Every row of the gradient sums to 0 (softmax sums to 1, onehot too), up
     * to rounding: K terms below 1/N, each rounded by eps = 1.1e-16 or so. */
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < K; j++)
            s += g[i * K + j];
        CHECKF(fabs(s) < 4 * K * 1.1e-16, "row %d sums to %g", i, s);
    }
    /* Planted: the 1/N of the batch mean forgotten. */
    for (int i = 0; i < N * K; i++)
        g[i] *= N;
    CHECK(gb_gradcheck(xent_eval, &x, zz, N * K, g, NULL, 0, &q, "xent", NULL) == -1);
    /* A failing function makes the check fail, not pass. */
    int32_t broken[N] = {0, 9, 2, 2};
    x.labels = broken;
    gb_gc_report_t rep;
    CHECK(gb_gradcheck(xent_eval, &x, zz, N * K, g, NULL, 0, &q, "xent", &rep) == -1);
    CHECK(rep.fn_failed);
}

/* ---- SGD ---------------------------------------------------------------- */

static void test_sgd(void) {
    /* lr 0.1, momentum 0.9, weight decay 0.01, theta0 = 1, gradient 0.5 at
     * every step, worked by hand:
     *   1: d = 0.5 + 0.01*1        = 0.51        buf = 0.51
     *      theta = 1 - 0.051        = 0.949
     *   2: d = 0.5 + 0.00949       = 0.50949     buf = 0.459 + 0.50949 = 0.96849
     *      theta = 0.949 - 0.096849 = 0.852151
     *   3: d = 0.5 + 0.00852151    = 0.50852151  buf = 0.871641 + 0.50852151 = 1.38016251
     *      theta = 0.852151 - 0.138016251 = 0.714134749
     * The second element starts at theta0 = 0 with gradient -2 (weight decay
     * joins once theta has moved):
     *   1: d = -2, buf = -2, theta = 0.2
     *   2: d = -2 + 0.002 = -1.998, buf = -1.8 - 1.998 = -3.798, theta = 0.5798
     *   3: d = -2 + 0.005798 = -1.994202, buf = -3.4182 - 1.994202 = -5.412402,
     *      theta = 0.5798 + 0.5412402 = 1.1210402 */
    double theta[2] = {1, 0}, buf[2] = {123, 456}, grad[2] = {0.5, -2};
    double want_theta[3][2] = {{0.949, 0.2}, {0.852151, 0.5798}, {0.714134749, 1.1210402}};
    double want_buf[3][2] = {{0.51, -2}, {0.96849, -3.798}, {1.38016251, -5.412402}};
    for (int s = 0; s < 3; s++) {
        gb_ref_sgd_step(2, theta, grad, buf, 0.1, 0.9, 0.01, s == 0);
        check_hand(theta, want_theta[s], 2, "sgd theta");
        check_hand(buf, want_buf[s], 2, "sgd momentum");
    }
    CHECK(grad[0] == 0.5 && grad[1] == -2); /* not modified */

    /* Planted: decoupled weight decay (theta -= lr * (buf + wd * theta), buf
     * without the decay) must fail the same hand values. */
    double th2[2] = {1, 0}, b2[2];
    gb_cmp_t cmp;
    int failed = 0;
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 2; i++) {
            b2[i] = s == 0 ? grad[i] : 0.9 * b2[i] + grad[i];
            th2[i] -= 0.1 * (b2[i] + 0.01 * th2[i]);
        }
        failed += gb_cmp_f64(th2, want_theta[s], 2, 1e-300, HAND_RTOL, &cmp) != 0;
    }
    CHECK(failed >= 2);

    /* Momentum 0: plain SGD with weight decay, no buffer touched. */
    double t0[1] = {2}, g0[1] = {1};
    gb_ref_sgd_step(1, t0, g0, NULL, 0.5, 0.0, 0.1, 1);
    /* 2 - 0.5 * (1 + 0.1 * 2) = 1.4, within an ulp or two (0.1 is inexact) */
    CHECKF(fabs(t0[0] - (2 - 0.5 * 1.2)) < 1e-15, "theta %.17g", t0[0]);
}

int main(void) {
    test_out_size();
    test_conv_hand();
    test_conv_grad();
    test_bn_hand();
    test_bn_grad();
    test_relu_hand();
    test_elementwise_grad();
    test_maxpool_hand();
    test_maxpool_grad();
    test_gap();
    test_fc();
    test_xent();
    test_sgd();
    return 0;
}
