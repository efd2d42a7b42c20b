/* test_cpu_ops.c - every oneDNN op of the CPU backend, run alone on given
 * inputs, against finite differences (double-precision central differences
 * of L = sum(r * op(x)), with r random) and, for forward values and running
 * statistics, against direct double-precision formulas.
 *
 * Shapes cover what ResNet-50 uses and its edges: 1x1, 3x3 stride 1
 * (direct and Winograd), 3x3 stride 2 on odd and even inputs (the right
 * padding differs), 1x1 stride 2 (negative right padding on even inputs),
 * the 7x7/2 stem on 3 channels, odd spatial sizes, batch 1. Every checker is
 * also shown to fail: one element of the analytic gradient is moved by 10% of
 * the gradient's largest magnitude and the comparison must reject it.
 *
 * Tolerances: the ops run in f32 (unit roundoff u = 2^-24 ~ 6e-8). L is
 * accumulated in double from f32 outputs; a central difference with step h
 * has a rounding error of about sqrt(n_out) * u * |y| * sqrt(K) / h (n_out
 * outputs touched by the perturbed input, K-term f32 reductions inside the
 * op) plus a truncation error of h^2 |f'''| / 6. With h = 1e-2 (linear ops,
 * where truncation is zero) or 4e-3 (batch norm) and the O(1) scales used
 * here, that is below 1e-3 of the largest gradient; we allow
 * |fd - an| <= 2e-3 * max|an| + 1e-2 * |an|. A planted 10% error is 50x that.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "wino.h"
#include "cpu_ops.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gb_cpu_ctx_t *ctx;
static char err[512];
static gb_rng_t rng;

#define OK(x) CHECKF((x) == 0, "%s", err)

#define FD_ATOL 2e-3 /* of max |analytic|: see the header */
#define FD_RTOL 1e-2

/* A tensor the test owns: a plain f32 NCHW copy and the op's memory, with
 * reorders both ways created once (they run thousands of times). */
typedef struct tensor {
    size_t n;
    float *plain;
    dnnl_memory_t mem, pmem;
    gb_cpu_prim_t to, from;
} tensor_t;

static tensor_t *tensor_new(const dnnl_memory_desc_t *md) {
    tensor_t *t = calloc(1, sizeof(*t));
    CHECK(t);
    t->n = 1;
    for (int i = 0; i < md->ndims; i++)
        t->n *= (size_t)md->dims[i];
    t->plain = calloc(t->n, sizeof(float));
    CHECK(t->plain);
    dnnl_memory_desc_t pmd;
    dnnl_format_tag_t tag = md->ndims == 1 ? dnnl_a : md->ndims == 2 ? dnnl_ab : dnnl_abcd;
    gb_cpu_md(&pmd, md->ndims, md->dims, dnnl_f32, tag);
    t->mem = gb_cpu_ctx_mem(ctx, md, NULL, err, sizeof(err));
    CHECKF(t->mem, "%s", err);
    t->pmem = gb_cpu_ctx_mem(ctx, &pmd, t->plain, err, sizeof(err));
    CHECKF(t->pmem, "%s", err);
    OK(gb_cpu_reorder_init(ctx, &t->to, &pmd, md, "test", err, sizeof(err)));
    OK(gb_cpu_reorder_init(ctx, &t->from, md, &pmd, "test", err, sizeof(err)));
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    return t;
}

static void tensor_free(tensor_t *t) {
    free(t->plain);
    free(t);
}

static void put(tensor_t *t) {
    OK(gb_cpu_reorder(ctx, &t->to, t->pmem, t->mem, err, sizeof(err)));
}

static void get(tensor_t *t) {
    OK(gb_cpu_reorder(ctx, &t->from, t->mem, t->pmem, err, sizeof(err)));
}

/* The activation layout oneDNN 2.6 runs fast on this CPU, as the backend's
 * convolutions pick it: nChw16c with AVX-512, nChw8c with AVX2. Winograd is
 * oneDNN's on AVX-512 and ours (wino.h) on AVX2; bf16 needs avx512_bf16:
 * those cases are skipped, with a line saying so, on CPUs without them. */
static dnnl_format_tag_t blk_tag = dnnl_aBcd16b;
static int blk_c = 16, have_wino = 1, have_bf16 = 1;

static void probe_isa(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (isa < dnnl_cpu_isa_avx512_core) {
        blk_tag = dnnl_aBcd8b;
        blk_c = 8;
        have_wino = gb_wino_cpu_ok();
    }
    have_bf16 = isa >= dnnl_cpu_isa_avx512_core_bf16;
    if (!have_wino) printf("skip: Winograd cases (neither AVX-512 nor AVX2 with FMA)\n");
    if (!have_bf16) printf("skip: bf16 cases (this CPU lacks avx512_bf16)\n");
}

/* One context per case: it owns the primitives inside the case's op structs
 * and tensors, so it is destroyed before they go. */
static void new_ctx(void) {
    ctx = gb_cpu_ctx_new(2, GB_CPU_STRICT_GEMM, err, sizeof(err));
    CHECKF(ctx, "%s", err);
}

static void end_ctx(void) {
    gb_cpu_ctx_destroy(&ctx);
    CHECK(ctx == NULL);
}

static void randn(float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * gb_rng_normal(&rng));
}

static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* ------------------------------------------------------ the FD machinery */

typedef double (*eval_fn)(void *arg);

/* Central differences of f with respect to x[i] for the checked indices
 * (every element when n <= limit, else an even spread of `limit`). */
static void fd_grad(eval_fn f, void *arg, float *x, size_t n, double h, double *fd, size_t limit) {
    size_t step = n <= limit ? 1 : n / limit;
    for (size_t i = 0; i < n; i++)
        fd[i] = NAN;
    for (size_t i = 0; i < n; i += step) {
        float x0 = x[i];
        x[i] = (float)(x0 + h);
        double hp = (double)x[i] - x0; /* the step actually taken in f32 */
        double lp = f(arg);
        x[i] = (float)(x0 - h);
        double hm = x0 - (double)x[i];
        double lm = f(arg);
        x[i] = x0;
        fd[i] = (lp - lm) / (hp + hm);
    }
}

/* Number of elements where analytic and FD disagree beyond the tolerance;
 * NaN fd entries (not checked) and skip[i] != 0 are left out. */
static int fd_compare(const char *what, const double *fd, const float *an, size_t n,
                      const unsigned char *skip, int verbose) {
    double amax = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(an[i]) > amax) amax = fabs(an[i]);
    int bad = 0, checked = 0;
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(fd[i]) || (skip && skip[i])) continue;
        checked++;
        double d = fabs(fd[i] - an[i]), tol = FD_ATOL * amax + FD_RTOL * fabs(an[i]);
        if (d > tol) bad++;
        if (d / (tol > 0 ? tol : 1) > worst) {
            worst = d / (tol > 0 ? tol : 1);
            wi = i;
        }
    }
    if (verbose && (bad || getenv("GB_TEST_VERBOSE")))
        fprintf(stderr, "  %s: %d of %d checked elements off; worst [%zu] fd %.6g analytic %.6g\n",
                what, bad, checked, wi, fd[wi], (double)an[wi]);
    CHECKF(checked > 0 && amax > 0, "%s: nothing to check", what);
    return bad;
}

/* The check passes, and a planted error in one element is caught. */
static void fd_assert(const char *what, const double *fd, const float *an, size_t n,
                      const unsigned char *skip) {
    CHECKF(fd_compare(what, fd, an, n, skip, 1) == 0,
           "%s gradient disagrees with finite differences", what);
    float *wrong = malloc(n * sizeof(float));
    CHECK(wrong);
    memcpy(wrong, an, n * sizeof(float));
    double amax = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(an[i]) > amax) amax = fabs(an[i]);
        if (!isnan(fd[i]) && !(skip && skip[i])) k = i; /* the last checked element */
    }
    wrong[k] += (float)(0.1 * amax);
    CHECKF(fd_compare(what, fd, wrong, n, skip, 0) > 0, "%s: a planted error went unseen", what);
    free(wrong);
}

/* --------------------------------------------------------- convolution */

typedef struct conv_case {
    gb_cpu_conv_t cv;
    tensor_t *x, *w, *y, *dx, *dw, *r;
    dnnl_memory_t wfwd, wbwd;
} conv_case_t;

static double conv_eval(void *arg) {
    conv_case_t *c = arg;
    put(c->x);
    put(c->w);
    OK(gb_cpu_conv_weights(ctx, &c->cv, c->w->mem, c->wfwd, c->wbwd, err, sizeof(err)));
    OK(gb_cpu_conv_fwd(ctx, &c->cv, c->x->mem, c->wfwd, c->y->mem, err, sizeof(err)));
    get(c->y);
    return dot(c->y->plain, c->r->plain, c->y->n);
}

static void test_conv(int n, int cin, int k, int h, int w, int ks, int stride, int pad, int wino,
                      int bwd_data) {
    char name[96];
    snprintf(name, sizeof(name), "conv n%d c%d k%d %dx%d %dx%d/%d p%d%s", n, cin, k, h, w, ks, ks,
             stride, pad, wino ? " winograd" : "");
    conv_case_t c;
    new_ctx();
    gb_cpu_conv_shape_t s = {n, cin, h, w, k, ks, ks, stride, pad};
    int64_t sd[4] = {n, cin, h, w};
    dnnl_memory_desc_t in;
    /* as in the network: nChw16c between layers, plain NCHW for the image */
    gb_cpu_md(&in, 4, sd, dnnl_f32, cin % blk_c == 0 ? blk_tag : dnnl_abcd);
    OK(gb_cpu_conv_init(ctx, &c.cv, &s, &in, dnnl_f32, bwd_data, wino, name, err, sizeof(err)));
    /* oneDNN's Winograd (AVX-512) or ours for every pass (AVX2) */
    int took = c.cv.winograd || (c.cv.own_fwd && c.cv.own_bwd_w && (c.cv.own_bwd_d || !bwd_data));
    CHECKF(took == wino, "%s: Winograd %d, wanted %d", name, took, wino);
    CHECK(c.cv.oh == (h + 2 * pad - ks) / stride + 1 && c.cv.ow == (w + 2 * pad - ks) / stride + 1);
    c.x = tensor_new(&c.cv.src_md);
    c.w = tensor_new(&c.cv.w_md);
    c.y = tensor_new(&c.cv.dst_md);
    c.r = tensor_new(&c.cv.dst_md);
    c.dx = tensor_new(&c.cv.src_md);
    c.dw = tensor_new(&c.cv.w_md);
    c.wfwd = c.cv.wfwd_is_master ? c.w->mem : gb_cpu_ctx_mem(ctx, &c.cv.wfwd_md, NULL, err, 512);
    c.wbwd = !bwd_data             ? NULL
             : c.cv.wbwd_is_master ? c.w->mem
             : c.cv.wbwd_is_fwd    ? c.wfwd
                                   : gb_cpu_ctx_mem(ctx, &c.cv.wbwd_md, NULL, err, 512);
    CHECK(c.wfwd && (c.wbwd || !bwd_data));
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    randn(c.x->plain, c.x->n, 1.0);
    randn(c.w->plain, c.w->n, 1.0 / sqrt((double)cin * ks * ks));
    randn(c.r->plain, c.r->n, 1.0);

    /* forward against a direct double-precision convolution */
    conv_eval(&c);
    double e2 = 0, n2 = 0;
    for (int b = 0; b < n; b++)
        for (int o = 0; o < k; o++)
            for (int p = 0; p < c.cv.oh; p++)
                for (int q = 0; q < c.cv.ow; q++) {
                    double acc = 0;
                    for (int i = 0; i < cin; i++)
                        for (int u = 0; u < ks; u++)
                            for (int v = 0; v < ks; v++) {
                                int yy = p * stride - pad + u, xx = q * stride - pad + v;
                                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                                acc +=
                                    (double)c.x->plain[((size_t)(b * cin + i) * h + yy) * w + xx] *
                                    c.w->plain[((size_t)(o * cin + i) * ks + u) * ks + v];
                            }
                    double got = c.y->plain[((size_t)(b * k + o) * c.cv.oh + p) * c.cv.ow + q];
                    e2 += (got - acc) * (got - acc);
                    n2 += acc * acc;
                }
    /* f32 with K = C*R*S term sums: ~sqrt(K) u relative; Winograd adds its
     * transforms (measured ~1e-6); 1e-5 leaves a wide margin */
    CHECKF(sqrt(e2 / n2) < 1e-5, "%s forward: relative L2 %.3g", name, sqrt(e2 / n2));

    /* analytic gradients of L = sum(r * y) */
    put(c.r);
    if (bwd_data) {
        OK(gb_cpu_conv_bwd_data(ctx, &c.cv, c.r->mem, c.wbwd, c.dx->mem, err, sizeof(err)));
        get(c.dx);
    }
    OK(gb_cpu_conv_bwd_weights(ctx, &c.cv, c.x->mem, c.r->mem, c.dw->mem, err, sizeof(err)));
    get(c.dw);
    double *fd = malloc((c.x->n > c.w->n ? c.x->n : c.w->n) * sizeof(double));
    CHECK(fd);
    char what[128];
    if (bwd_data) {
        fd_grad(conv_eval, &c, c.x->plain, c.x->n, 1e-2, fd, 1500);
        snprintf(what, sizeof(what), "%s d/dx", name);
        fd_assert(what, fd, c.dx->plain, c.x->n, NULL);
    }
    fd_grad(conv_eval, &c, c.w->plain, c.w->n, 1e-2, fd, 1500);
    snprintf(what, sizeof(what), "%s d/dw", name);
    fd_assert(what, fd, c.dw->plain, c.w->n, NULL);
    free(fd);
    end_ctx();
    tensor_free(c.x);
    tensor_free(c.w);
    tensor_free(c.y);
    tensor_free(c.r);
    tensor_free(c.dx);
    tensor_free(c.dw);
}

/* ---------------------------------------------------------- batch norm */

typedef struct bn_case {
    gb_cpu_bn_t bn;
    tensor_t *x, *y, *r, *dx;
    float *g, *b, *mean, *var, *dg, *db;
    dnnl_memory_t mg, mb, mmean, mvar, mdg, mdb, ws;
} bn_case_t;

static double bn_eval(void *arg) {
    bn_case_t *c = arg;
    put(c->x);
    OK(gb_cpu_bn_fwd(ctx, &c->bn, c->x->mem, c->y->mem, c->mg, c->mb, c->mmean, c->mvar, c->ws, err,
                     sizeof(err)));
    get(c->y);
    return dot(c->y->plain, c->r->plain, c->y->n);
}

static void test_bn(int n, int ch, int h, int w, int relu, int in_place) {
    char name[96];
    snprintf(name, sizeof(name), "bn n%d c%d %dx%d%s%s", n, ch, h, w, relu ? " relu" : "",
             in_place ? " in-place" : "");
    bn_case_t c;
    new_ctx();
    int64_t d[4] = {n, ch, h, w}, cd[1] = {ch};
    dnnl_memory_desc_t md, sm;
    gb_cpu_md(&md, 4, d, dnnl_f32, blk_tag);
    gb_cpu_md(&sm, 1, cd, dnnl_f32, dnnl_a);
    OK(gb_cpu_bn_init(ctx, &c.bn, &md, relu, name, err, sizeof(err)));
    c.x = tensor_new(&md);
    c.y = tensor_new(&md);
    c.r = tensor_new(&md);
    c.dx = in_place ? c.r : tensor_new(&md);
    float *stat = calloc(6 * (size_t)ch, sizeof(float));
    CHECK(stat);
    c.g = stat;
    c.b = stat + ch;
    c.mean = stat + 2 * ch;
    c.var = stat + 3 * ch;
    c.dg = stat + 4 * ch;
    c.db = stat + 5 * ch;
    c.mg = gb_cpu_ctx_mem(ctx, &sm, c.g, err, 512);
    c.mb = gb_cpu_ctx_mem(ctx, &sm, c.b, err, 512);
    c.mmean = gb_cpu_ctx_mem(ctx, &sm, c.mean, err, 512);
    c.mvar = gb_cpu_ctx_mem(ctx, &sm, c.var, err, 512);
    c.mdg = gb_cpu_ctx_mem(ctx, &sm, c.dg, err, 512);
    c.mdb = gb_cpu_ctx_mem(ctx, &sm, c.db, err, 512);
    c.ws = relu ? gb_cpu_ctx_mem(ctx, &c.bn.ws_md, NULL, err, 512) : NULL;
    CHECK(c.mg && c.mb && c.mmean && c.mvar && c.mdg && c.mdb && (c.ws || !relu));
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    /* channels with different means and spreads, as after a convolution */
    size_t hw = (size_t)h * w;
    for (int b = 0; b < n; b++)
        for (int i = 0; i < ch; i++)
            for (size_t p = 0; p < hw; p++)
                c.x->plain[((size_t)b * ch + i) * hw + p] =
                    (float)(0.3 * i - 1.0 + (0.5 + 0.1 * i) * gb_rng_normal(&rng));
    for (int i = 0; i < ch; i++) {
        c.g[i] = (float)(0.5 + gb_rng_uniform(&rng));
        c.b[i] = (float)(0.3 * gb_rng_normal(&rng));
    }
    randn(c.r->plain, c.r->n, 1.0);

    /* forward, batch statistics and running statistics against double */
    bn_eval(&c);
    double count = (double)n * hw, e2 = 0, n2 = 0;
    unsigned char *skip = calloc(c.x->n, 1), cskip[64] = {0};
    CHECK(skip && ch <= 64);
    for (int i = 0; i < ch; i++) {
        double mu = 0, var = 0;
        for (int b = 0; b < n; b++)
            for (size_t p = 0; p < hw; p++)
                mu += c.x->plain[((size_t)b * ch + i) * hw + p];
        mu /= count;
        for (int b = 0; b < n; b++)
            for (size_t p = 0; p < hw; p++) {
                double v = c.x->plain[((size_t)b * ch + i) * hw + p] - mu;
                var += v * v;
            }
        var /= count;
        /* single f32 statistics over ~50 values: 1e-5 relative is generous */
        CHECKF(fabs(c.mean[i] - mu) < 1e-5 * (1 + fabs(mu)), "%s mean[%d] %g vs %g", name, i,
               c.mean[i], mu);
        CHECKF(fabs(c.var[i] - var) < 1e-5 * var, "%s var[%d] %g vs %g", name, i, c.var[i], var);
        double is = 1.0 / sqrt(var + GB_CPU_BN_EPS);
        for (int b = 0; b < n; b++)
            for (size_t p = 0; p < hw; p++) {
                size_t j = ((size_t)b * ch + i) * hw + p;
                double pre = c.g[i] * (c.x->plain[j] - mu) * is + c.b[i];
                double want = relu && pre < 0 ? 0 : pre;
                e2 += (c.y->plain[j] - want) * (c.y->plain[j] - want);
                n2 += want * want;
                /* FD across the ReLU kink is meaningless: leave out inputs
                 * whose output is within reach of it (4 steps of h / sigma) */
                if (relu && fabs(pre) < 4 * 4e-3 * c.g[i] * is) skip[j] = 1;
                /* gamma and beta move every output of the channel */
                double xh = (c.x->plain[j] - mu) * is;
                if (relu && fabs(pre) < 4 * 4e-3 * (1 + fabs(xh))) cskip[i] = 1;
            }
        float rm = 0.5f, rv = 2.0f;
        gb_cpu_bn_running_update(&c.mean[i], &c.var[i], &rm, &rv, 1, count, 0.1f);
        CHECKF(fabs(rm - (0.9 * 0.5 + 0.1 * mu)) < 1e-6, "%s running_mean", name);
        CHECKF(fabs(rv - (0.9 * 2.0 + 0.1 * var * count / (count - 1))) < 1e-5,
               "%s running_var (unbiased)", name);
    }
    CHECKF(sqrt(e2 / n2) < 1e-6, "%s forward: relative L2 %.3g", name, sqrt(e2 / n2));
    tensor_t *z = NULL; /* freed after the context, which holds its reorders */
    if (relu) {
        /* backward rebuilds this output from the saved statistics: it must
         * be the forward's, bit for bit, or the weight gradient would read
         * different inputs than the forward did */
        z = tensor_new(&md);
        OK(gb_cpu_bn_apply(ctx, &c.bn, c.x->mem, z->mem, c.mg, c.mb, c.mmean, c.mvar, err,
                           sizeof(err)));
        get(z);
        CHECKF(memcmp(z->plain, c.y->plain, z->n * sizeof(float)) == 0,
               "%s: rebuilt output differs from the forward's", name);
    }

    /* in place, dx overwrites r: keep r's values for the FD loss */
    float *r0 = malloc(c.x->n * sizeof(float)), *dx = malloc(c.x->n * sizeof(float));
    CHECK(r0 && dx);
    memcpy(r0, c.r->plain, c.x->n * sizeof(float));
    put(c.r);
    OK(gb_cpu_bn_bwd(ctx, &c.bn, c.x->mem, c.r->mem, c.dx->mem, c.mg, c.mb, c.mmean, c.mvar, c.ws,
                     c.mdg, c.mdb, err, sizeof(err)));
    get(c.dx);
    memcpy(dx, c.dx->plain, c.x->n * sizeof(float));
    memcpy(c.r->plain, r0, c.x->n * sizeof(float));
    free(r0);
    double *fd = malloc(c.x->n * sizeof(double));
    double fdg[64], fdb[64];
    CHECK(fd && ch <= 64);
    char what[128];
    fd_grad(bn_eval, &c, c.x->plain, c.x->n, 4e-3, fd, 2000);
    snprintf(what, sizeof(what), "%s d/dx", name);
    fd_assert(what, fd, dx, c.x->n, skip);
    fd_grad(bn_eval, &c, c.g, (size_t)ch, 4e-3, fdg, 64);
    snprintf(what, sizeof(what), "%s d/dgamma", name);
    fd_assert(what, fdg, c.dg, (size_t)ch, cskip);
    fd_grad(bn_eval, &c, c.b, (size_t)ch, 4e-3, fdb, 64);
    snprintf(what, sizeof(what), "%s d/dbeta", name);
    fd_assert(what, fdb, c.db, (size_t)ch, cskip);
    free(fd);
    free(dx);
    free(skip);
    free(stat);
    end_ctx();
    if (z) tensor_free(z);
    tensor_free(c.x);
    tensor_free(c.y);
    tensor_free(c.r);
    if (!in_place) tensor_free(c.dx);
}

/* ------------------------------------- residual join: relu(a + b), and a + b */

typedef struct join_case {
    gb_cpu_add_t op;
    tensor_t *a, *b, *y, *r;
} join_case_t;

static double join_eval(void *arg) {
    join_case_t *c = arg;
    put(c->a);
    put(c->b);
    OK(gb_cpu_add_fwd(ctx, &c->op, c->a->mem, c->b->mem, c->y->mem, err, sizeof(err)));
    get(c->y);
    return dot(c->y->plain, c->r->plain, c->y->n);
}

static void test_join(int n, int ch, int h, int w) {
    join_case_t c;
    new_ctx();
    int64_t d[4] = {n, ch, h, w};
    dnnl_memory_desc_t md;
    gb_cpu_md(&md, 4, d, dnnl_f32, blk_tag);
    OK(gb_cpu_add_init(ctx, &c.op, &md, 1, "join", err, sizeof(err)));
    c.a = tensor_new(&md);
    c.b = tensor_new(&md);
    c.y = tensor_new(&md);
    c.r = tensor_new(&md);
    randn(c.a->plain, c.a->n, 1.0);
    randn(c.b->plain, c.b->n, 1.0);
    randn(c.r->plain, c.r->n, 1.0);
    join_eval(&c);
    unsigned char *skip = calloc(c.a->n, 1);
    float *g = malloc(c.a->n * sizeof(float));
    double *fd = malloc(c.a->n * sizeof(double));
    CHECK(skip && g && fd);
    for (size_t i = 0; i < c.a->n; i++) {
        double s = (double)c.a->plain[i] + c.b->plain[i];
        CHECKF(c.y->plain[i] == (float)(s > 0 ? s : 0) || fabs(c.y->plain[i] - s) < 1e-6,
               "join forward [%zu]", i);
        if (fabs(s) < 4e-2) skip[i] = 1; /* within 4 steps of the kink */
    }
    /* backward from the output, in place, as the backend runs it */
    put(c.r);
    OK(gb_cpu_add_relu_bwd(ctx, &c.op, c.y->mem, c.r->mem, err, sizeof(err)));
    dnnl_memory_t keep = c.r->pmem;
    (void)keep;
    float *r0 = malloc(c.a->n * sizeof(float));
    CHECK(r0);
    memcpy(r0, c.r->plain, c.a->n * sizeof(float));
    get(c.r);
    memcpy(g, c.r->plain, c.a->n * sizeof(float));
    memcpy(c.r->plain, r0, c.a->n * sizeof(float));
    fd_grad(join_eval, &c, c.a->plain, c.a->n, 1e-2, fd, 2000);
    fd_assert("relu(a + b) d/da", fd, g, c.a->n, skip);
    fd_grad(join_eval, &c, c.b->plain, c.b->n, 1e-2, fd, 2000);
    fd_assert("relu(a + b) d/db", fd, g, c.b->n, skip);

    /* plain add, in place (dst = a), used for the block-input gradient */
    gb_cpu_add_t add;
    OK(gb_cpu_add_init(ctx, &add, &md, 0, "add", err, sizeof(err)));
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    put(c.a);
    put(c.b);
    OK(gb_cpu_add_fwd(ctx, &add, c.a->mem, c.b->mem, c.a->mem, err, sizeof(err)));
    CHECK(gb_cpu_add_relu_bwd(ctx, &add, c.a->mem, c.b->mem, err, sizeof(err)) == -1);
    memcpy(r0, c.a->plain, c.a->n * sizeof(float));
    get(c.a);
    for (size_t i = 0; i < c.a->n; i++)
        CHECKF(c.a->plain[i] == r0[i] + c.b->plain[i], "a + b [%zu]", i); /* one f32 rounding */
    free(r0);
    free(skip);
    free(g);
    free(fd);
    end_ctx();
    tensor_free(c.a);
    tensor_free(c.b);
    tensor_free(c.y);
    tensor_free(c.r);
}

/* --------------------------------------------------------------- pooling */

typedef struct pool_case {
    gb_cpu_pool_t pl;
    tensor_t *x, *y, *r, *dx;
    dnnl_memory_t ws;
} pool_case_t;

static double pool_eval(void *arg) {
    pool_case_t *c = arg;
    put(c->x);
    OK(gb_cpu_pool_fwd(ctx, &c->pl, c->x->mem, c->y->mem, c->ws, err, sizeof(err)));
    get(c->y);
    return dot(c->y->plain, c->r->plain, c->y->n);
}

static void test_pool(int max, int n, int ch, int h, int w, int kh, int kw, int stride, int pad) {
    char name[96];
    snprintf(name, sizeof(name), "%s pool %dx%d %dx%d/%d p%d", max ? "max" : "avg", h, w, kh, kw,
             stride, pad);
    pool_case_t c;
    new_ctx();
    int64_t d[4] = {n, ch, h, w};
    dnnl_memory_desc_t md;
    gb_cpu_md(&md, 4, d, dnnl_f32, blk_tag);
    OK(gb_cpu_pool_init(ctx, &c.pl, &md, max, kh, kw, stride, pad, name, err, sizeof(err)));
    CHECK(c.pl.oh == (h + 2 * pad - kh) / stride + 1 && c.pl.ow == (w + 2 * pad - kw) / stride + 1);
    c.x = tensor_new(&md);
    c.dx = tensor_new(&md);
    c.y = tensor_new(&c.pl.dst_md);
    c.r = tensor_new(&c.pl.dst_md);
    c.ws = max ? gb_cpu_ctx_mem(ctx, &c.pl.ws_md, NULL, err, sizeof(err)) : NULL;
    CHECK(c.ws || !max);
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    /* distinct values 0.05 apart in random order: a step of 1e-2 never
     * changes which element is the maximum */
    for (size_t i = 0; i < c.x->n; i++)
        c.x->plain[i] = (float)(0.05 * ((double)i - c.x->n / 2.0));
    for (size_t i = c.x->n - 1; i > 0; i--) {
        size_t j = gb_rng_next(&rng) % (i + 1);
        float t = c.x->plain[i];
        c.x->plain[i] = c.x->plain[j];
        c.x->plain[j] = t;
    }
    randn(c.r->plain, c.r->n, 1.0);
    pool_eval(&c);
    /* forward against the definition (PyTorch: max ignores padding, avg
     * divides by the window inside the image) */
    for (int b = 0; b < n * ch; b++)
        for (int p = 0; p < c.pl.oh; p++)
            for (int q = 0; q < c.pl.ow; q++) {
                double acc = max ? -INFINITY : 0;
                int cnt = 0;
                for (int u = 0; u < kh; u++)
                    for (int v = 0; v < kw; v++) {
                        int yy = p * stride - pad + u, xx = q * stride - pad + v;
                        if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                        double val = c.x->plain[((size_t)b * h + yy) * w + xx];
                        acc = max ? (val > acc ? val : acc) : acc + val;
                        cnt++;
                    }
                if (!max) acc /= cnt;
                double got = c.y->plain[((size_t)b * c.pl.oh + p) * c.pl.ow + q];
                CHECKF(fabs(got - acc) < 1e-5 * (1 + fabs(acc)), "%s forward", name);
            }
    put(c.r);
    OK(gb_cpu_pool_bwd(ctx, &c.pl, c.r->mem, c.dx->mem, c.ws, err, sizeof(err)));
    get(c.dx);
    double *fd = malloc(c.x->n * sizeof(double));
    CHECK(fd);
    fd_grad(pool_eval, &c, c.x->plain, c.x->n, 1e-2, fd, 2000);
    fd_assert(name, fd, c.dx->plain, c.x->n, NULL);
    free(fd);
    end_ctx();
    tensor_free(c.x);
    tensor_free(c.dx);
    tensor_free(c.y);
    tensor_free(c.r);
}

/* ------------------------------------------------------ fully connected */

typedef struct fc_case {
    gb_cpu_fc_t fc;
    tensor_t *x, *w, *b, *y, *r, *dx, *dw, *db;
    dnnl_memory_t wf, wb;
} fc_case_t;

static double fc_eval(void *arg) {
    fc_case_t *c = arg;
    put(c->x);
    put(c->w);
    put(c->b);
    OK(gb_cpu_fc_weights(ctx, &c->fc, c->w->mem, c->wf, c->wb, err, sizeof(err)));
    OK(gb_cpu_fc_fwd(ctx, &c->fc, c->x->mem, c->wf, c->b->mem, c->y->mem, err, sizeof(err)));
    get(c->y);
    return dot(c->y->plain, c->r->plain, c->y->n);
}

static void test_fc(int n, int cin, int k, int four_d) {
    char name[64];
    snprintf(name, sizeof(name), "fc n%d %d->%d %s", n, cin, k, four_d ? "4D" : "2D");
    fc_case_t c;
    new_ctx();
    int64_t d4[4] = {n, cin, 1, 1}, d2[2] = {n, cin};
    dnnl_memory_desc_t md;
    if (four_d)
        gb_cpu_md(&md, 4, d4, dnnl_f32, blk_tag);
    else
        gb_cpu_md(&md, 2, d2, dnnl_f32, dnnl_ab);
    OK(gb_cpu_fc_init(ctx, &c.fc, &md, k, name, err, sizeof(err)));
    c.x = tensor_new(&md);
    c.dx = tensor_new(&md);
    c.w = tensor_new(&c.fc.w_md);
    c.dw = tensor_new(&c.fc.w_md);
    c.b = tensor_new(&c.fc.bias_md);
    c.db = tensor_new(&c.fc.bias_md);
    c.y = tensor_new(&c.fc.dst_md);
    c.r = tensor_new(&c.fc.dst_md);
    c.wf = c.fc.wfwd_is_master ? c.w->mem : gb_cpu_ctx_mem(ctx, &c.fc.wfwd_md, NULL, err, 512);
    c.wb = c.fc.wbwd_is_master ? c.w->mem
           : c.fc.wbwd_is_fwd  ? c.wf
                               : gb_cpu_ctx_mem(ctx, &c.fc.wbwd_md, NULL, err, 512);
    CHECK(c.wf && c.wb);
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    randn(c.x->plain, c.x->n, 1.0);
    randn(c.w->plain, c.w->n, 1.0 / sqrt(cin));
    randn(c.b->plain, c.b->n, 1.0);
    randn(c.r->plain, c.r->n, 1.0);
    fc_eval(&c);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < k; o++) {
            double acc = c.b->plain[o];
            for (int j = 0; j < cin; j++)
                acc += (double)c.x->plain[(size_t)i * cin + j] * c.w->plain[(size_t)o * cin + j];
            CHECKF(fabs(c.y->plain[(size_t)i * k + o] - acc) < 1e-5 * (1 + fabs(acc)), "%s fwd",
                   name);
        }
    put(c.r);
    OK(gb_cpu_fc_bwd_data(ctx, &c.fc, c.r->mem, c.wb, c.dx->mem, err, sizeof(err)));
    OK(gb_cpu_fc_bwd_weights(ctx, &c.fc, c.x->mem, c.r->mem, c.dw->mem, c.db->mem, err,
                             sizeof(err)));
    get(c.dx);
    get(c.dw);
    get(c.db);
    size_t mx = c.w->n > c.x->n ? c.w->n : c.x->n;
    double *fd = malloc(mx * sizeof(double));
    CHECK(fd);
    char what[96];
    fd_grad(fc_eval, &c, c.x->plain, c.x->n, 1e-2, fd, 2000);
    snprintf(what, sizeof(what), "%s d/dx", name);
    fd_assert(what, fd, c.dx->plain, c.x->n, NULL);
    fd_grad(fc_eval, &c, c.w->plain, c.w->n, 1e-2, fd, 2000);
    snprintf(what, sizeof(what), "%s d/dw", name);
    fd_assert(what, fd, c.dw->plain, c.w->n, NULL);
    fd_grad(fc_eval, &c, c.b->plain, c.b->n, 1e-2, fd, 2000);
    snprintf(what, sizeof(what), "%s d/db", name);
    fd_assert(what, fd, c.db->plain, c.b->n, NULL);
    free(fd);
    end_ctx();
    tensor_t *all[] = {c.x, c.dx, c.w, c.dw, c.b, c.db, c.y, c.r};
    for (int i = 0; i < 8; i++)
        tensor_free(all[i]);
}

/* ------------------------------------------- softmax cross-entropy, SGD */

typedef struct xent_case {
    float *z;
    int32_t *labels;
    int n, k;
} xent_case_t;

static double xent_eval(void *arg) {
    xent_case_t *c = arg;
    return gb_cpu_softmax_xent(c->z, c->labels, c->n, c->k, NULL);
}

static void test_xent(void) {
    xent_case_t c = {.n = 3, .k = 7};
    float z[21], g[21];
    int32_t lab[3] = {0, 6, 3};
    double fd[21];
    c.z = z;
    c.labels = lab;
    randn(z, 21, 2.0);
    z[5] = 30.0f; /* a large logit: the max is subtracted, nothing overflows */
    double loss = gb_cpu_softmax_xent(z, lab, 3, 7, g);
    /* the definition, in long double */
    long double want = 0;
    for (int i = 0; i < 3; i++) {
        long double s = 0;
        for (int j = 0; j < 7; j++)
            s += expl((long double)z[i * 7 + j]);
        want += logl(s) - z[i * 7 + lab[i]];
    }
    want /= 3;
    CHECKF(fabs(loss - (double)want) < 1e-12 * (1 + fabs(loss)), "loss %.17g vs %.17Lg", loss,
           want);
    /* the loss is double throughout: steps of 2^-10 are exact in f32 for
     * these magnitudes and truncation is ~h^2 = 1e-6 of the curvature */
    fd_grad(xent_eval, &c, z, 21, 1.0 / 1024, fd, 21);
    fd_assert("softmax cross-entropy d/dlogits", fd, g, 21, NULL);
    float s = 0;
    for (int j = 0; j < 21; j++)
        s += g[j];
    CHECKF(fabs(s) < 1e-6, "softmax gradient rows sum to 0 (%g)", s);
}

static void test_sgd(void) {
    enum { N = 1000 };
    float w[N], g[N], b[N];
    double wd_[N], bd[N];
    randn(w, N, 1.0);
    for (int i = 0; i < N; i++)
        wd_[i] = w[i];
    const float lr = 0.1f, mu = 0.9f, wd = 1e-2f;
    for (int step = 0; step < 3; step++) {
        randn(g, N, 1.0);
        CHECK(gb_cpu_sgd(w, g, b, N, lr, mu, wd, step == 0, 2) == 0); /* all finite */
        for (int i = 0; i < N; i++) {
            /* torch.optim.SGD: d = g + wd w; b = d (first) or mu b + d; w -= lr b */
            double d = g[i] + (double)wd * wd_[i];
            bd[i] = step == 0 ? d : (double)mu * bd[i] + d;
            wd_[i] -= (double)lr * bd[i];
            /* a few f32 roundings per step on O(1) values */
            CHECKF(fabs(w[i] - wd_[i]) < 1e-5 && fabs(b[i] - bd[i]) < 1e-5,
                   "sgd step %d [%d]: w %g vs %g, b %g vs %g", step, i, w[i], wd_[i], b[i], bd[i]);
        }
    }
    /* a wrong rule is seen: no weight decay would be off by lr wd |w| ~ 1e-3 */
    float w2 = 1.0f, g2 = 0.0f, b2 = 0.0f;
    gb_cpu_sgd(&w2, &g2, &b2, 1, lr, mu, wd, 1, 1);
    CHECK(fabs(w2 - (1.0 - 0.1 * 0.01)) < 1e-7);
    /* an update that leaves a weight not finite is said (the run diverged:
     * ReLU hid the NaN from the loss), in either branch, wherever it is */
    for (int first = 0; first < 2; first++)
        for (int at = 0; at < N; at += N / 3) {
            randn(g, N, 1.0);
            g[at] = at % 2 ? NAN : 3e38f; /* 3e38 * lr * (1 + mu): inf */
            CHECKF(gb_cpu_sgd(w, g, b, N, 10.0f, mu, wd, first, 2) == 1, "first %d at %d", first,
                   at);
            for (int i = 0; i < N; i++) /* finite again for the next case */
                w[i] = b[i] = 0.5f;
        }
}

/* --------------------------------------------------- bf16 against f32 */

static double rel_l2(const float *a, const float *b, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(e / s);
}

/* bf16 keeps 8 significant bits: inputs and outputs round with u = 2^-9 ~
 * 2e-3 each (accumulation is f32); a result within 1e-2 relative L2 of the
 * f32 op is what bf16 can give. */
static void test_conv_bf16(int cin, int k, int hw, int ks, int stride, int pad) {
    new_ctx();
    gb_cpu_conv_shape_t s = {2, cin, hw, hw, k, ks, ks, stride, pad};
    int64_t sd[4] = {2, cin, hw, hw};
    dnnl_memory_desc_t in32, in16;
    gb_cpu_md(&in32, 4, sd, dnnl_f32, blk_tag);
    gb_cpu_md(&in16, 4, sd, dnnl_bf16, blk_tag);
    gb_cpu_conv_t c32, c16;
    OK(gb_cpu_conv_init(ctx, &c32, &s, &in32, dnnl_f32, 1, 0, "f32", err, sizeof(err)));
    OK(gb_cpu_conv_init(ctx, &c16, &s, &in16, dnnl_bf16, 1, 0, "bf16", err, sizeof(err)));
    CHECKF(strstr(c16.fwd.impl, "bf16"), "bf16 conv runs %s", c16.fwd.impl);
    tensor_t *x32 = tensor_new(&c32.src_md), *x16 = tensor_new(&c16.src_md),
             *w = tensor_new(&c32.w_md), *y32 = tensor_new(&c32.dst_md),
             *y16 = tensor_new(&c16.dst_md), *r32 = tensor_new(&c32.dst_md),
             *r16 = tensor_new(&c16.dst_md), *dx32 = tensor_new(&c32.src_md),
             *dx16 = tensor_new(&c16.src_md), *dw32 = tensor_new(&c32.w_md),
             *dw16 = tensor_new(&c16.w_md);
    dnnl_memory_t wf16 = gb_cpu_ctx_mem(ctx, &c16.wfwd_md, NULL, err, 512),
                  wb16 = gb_cpu_ctx_mem(ctx, &c16.wbwd_md, NULL, err, 512),
                  wb32 = gb_cpu_ctx_mem(ctx, &c32.wbwd_md, NULL, err, 512);
    CHECK(wf16 && wb16 && wb32);
    OK(gb_cpu_ctx_bind_scratch(ctx, err, sizeof(err)));
    randn(x32->plain, x32->n, 1.0);
    memcpy(x16->plain, x32->plain, x32->n * sizeof(float));
    randn(w->plain, w->n, 1.0 / sqrt((double)cin * ks * ks));
    randn(r32->plain, r32->n, 1.0);
    memcpy(r16->plain, r32->plain, r32->n * sizeof(float));
    put(x32);
    put(x16);
    put(w);
    put(r32);
    put(r16);
    OK(gb_cpu_conv_weights(ctx, &c32, w->mem, w->mem, wb32, err, sizeof(err)));
    OK(gb_cpu_conv_weights(ctx, &c16, w->mem, wf16, wb16, err, sizeof(err)));
    OK(gb_cpu_conv_fwd(ctx, &c32, x32->mem, w->mem, y32->mem, err, sizeof(err)));
    OK(gb_cpu_conv_fwd(ctx, &c16, x16->mem, wf16, y16->mem, err, sizeof(err)));
    OK(gb_cpu_conv_bwd_data(ctx, &c32, r32->mem, c32.wbwd_is_master ? w->mem : wb32, dx32->mem, err,
                            sizeof(err)));
    OK(gb_cpu_conv_bwd_data(ctx, &c16, r16->mem, wb16, dx16->mem, err, sizeof(err)));
    OK(gb_cpu_conv_bwd_weights(ctx, &c32, x32->mem, r32->mem, dw32->mem, err, sizeof(err)));
    OK(gb_cpu_conv_bwd_weights(ctx, &c16, x16->mem, r16->mem, dw16->mem, err, sizeof(err)));
    get(y32);
    get(y16);
    get(dx32);
    get(dx16);
    get(dw32);
    get(dw16);
    double e1 = rel_l2(y16->plain, y32->plain, y32->n),
           e2 = rel_l2(dx16->plain, dx32->plain, dx32->n),
           e3 = rel_l2(dw16->plain, dw32->plain, dw32->n);
    if (getenv("GB_TEST_VERBOSE"))
        fprintf(stderr, "  bf16 conv %d->%d %dx%d/%d: fwd %.2e bwd_data %.2e bwd_w %.2e\n", cin, k,
                ks, ks, stride, e1, e2, e3);
    CHECKF(e1 < 1e-2 && e2 < 1e-2 && e3 < 1e-2, "bf16 conv: %.3g %.3g %.3g", e1, e2, e3);
    CHECKF(e1 > 1e-5, "bf16 conv is not bf16 (error %.3g)", e1); /* it really rounds */
    end_ctx();
    tensor_t *all[] = {x32, x16, w, y32, y16, r32, r16, dx32, dx16, dw32, dw16};
    for (int i = 0; i < 11; i++)
        tensor_free(all[i]);
}

/* strictness: GB_CPU_STRICT_ALL refuses gemm and ref implementations at
 * creation, GB_CPU_STRICT_GEMM (the backend's) gemm convolutions only, and
 * counts the ref ones */
static void test_strict(void) {
    ctx = gb_cpu_ctx_new(2, GB_CPU_STRICT_ALL, err, sizeof(err));
    CHECKF(ctx, "%s", err);
    gb_cpu_conv_shape_t s = {2, 64, 14, 14, 64, 3, 3, 1, 1};
    int64_t d[4] = {2, 64, 14, 14};
    dnnl_memory_desc_t nchw;
    gb_cpu_md(&nchw, 4, d, dnnl_f32, dnnl_abcd); /* plain NCHW with 64 channels: gemm */
    gb_cpu_conv_t cv;
    CHECK(gb_cpu_conv_init(ctx, &cv, &s, &nchw, dnnl_f32, 1, 0, "nchw", err, sizeof(err)) == -1);
    CHECKF(strstr(err, "slow implementation"), "%s", err);
    dnnl_memory_desc_t nhwc;
    gb_cpu_md(&nhwc, 4, d, dnnl_f32, dnnl_acdb); /* with explicit nhwc: ref */
    CHECK(gb_cpu_conv_init(ctx, &cv, &s, &nhwc, dnnl_f32, 1, 0, "nhwc", err, sizeof(err)) == -1);
    CHECKF(strstr(err, "ref"), "%s", err);
    end_ctx();
    gb_cpu_ctx_t *lax = gb_cpu_ctx_new(2, GB_CPU_STRICT_NONE, err, sizeof(err));
    CHECK(lax);
    CHECK(gb_cpu_conv_init(lax, &cv, &s, &nchw, dnnl_f32, 1, 0, "nchw", err, sizeof(err)) == 0);
    gb_cpu_ctx_destroy(&lax);
    gb_cpu_ctx_t *mid = gb_cpu_ctx_new(2, GB_CPU_STRICT_GEMM, err, sizeof(err));
    CHECK(mid);
    CHECK(gb_cpu_conv_init(mid, &cv, &s, &nchw, dnnl_f32, 1, 0, "nchw", err, sizeof(err)) == -1);
    CHECKF(strstr(err, "slow implementation"), "%s", err);
    CHECKF(gb_cpu_conv_init(mid, &cv, &s, &nhwc, dnnl_f32, 1, 0, "nhwc", err, sizeof(err)) == 0,
           "%s", err);
    CHECKF(mid->n_ref > 0, "ref primitives %d", mid->n_ref);
    gb_cpu_ctx_destroy(&mid);
    CHECK(gb_cpu_ctx_new(0, GB_CPU_STRICT_GEMM, err, sizeof(err)) == NULL);
}

int main(void) {
    gb_rng_seed(&rng, 42);
    probe_isa();

    /* convolutions of ResNet-50's kinds, small */
    test_conv(2, 16, 32, 7, 7, 1, 1, 0, 0, 1); /* 1x1 */
    test_conv(2, 16, 16, 7, 7, 3, 1, 1, 0, 1); /* 3x3/1 direct, odd size */
    if (have_wino) {
        test_conv(2, 16, 16, 7, 7, 3, 1, 1, 1, 1); /* 3x3/1 Winograd */
        test_conv(1, 32, 16, 6, 5, 3, 1, 1, 1, 1); /* Winograd, batch 1, non-square */
        /* Winograd, 3x3 tiles with edges; one and three channel blocks (8 on
         * AVX2, 16 on AVX-512: a plain input is the image only, never 3x3/1) */
        test_conv(2, blk_c, 3 * blk_c, 9, 10, 3, 1, 1, 1, 1);
    }
    test_conv(2, 16, 16, 9, 9, 3, 2, 1, 0, 1);  /* 3x3/2, odd input: right pad 1 */
    test_conv(2, 16, 16, 8, 8, 3, 2, 1, 0, 1);  /* 3x3/2, even input: right pad 0 */
    test_conv(2, 16, 32, 8, 8, 1, 2, 0, 0, 1);  /* 1x1/2, even: right pad -1 */
    test_conv(2, 32, 16, 7, 7, 1, 2, 0, 0, 1);  /* 1x1/2, odd */
    test_conv(2, 3, 16, 13, 11, 7, 2, 3, 0, 0); /* stem 7x7/2 on 3 channels, no dx */

    /* batch norm, training mode */
    test_bn(2, 16, 5, 5, 0, 0);
    test_bn(2, 16, 5, 3, 1, 0);
    test_bn(1, 32, 3, 3, 1, 1); /* in place, as the backend runs it */
    test_bn(2, 16, 5, 5, 0, 1);

    test_join(2, 16, 5, 5);
    test_pool(1, 2, 16, 9, 9, 3, 3, 2, 1); /* the ResNet max pool, odd input */
    test_pool(1, 1, 16, 8, 6, 3, 3, 2, 1); /* even, non-square */
    test_pool(0, 2, 32, 5, 3, 5, 3, 1, 0); /* global average, non-square */
    test_pool(0, 2, 16, 7, 7, 3, 3, 2, 1); /* average with padding excluded */
    test_fc(3, 32, 10, 0);
    test_fc(2, 32, 7, 1);
    test_xent();
    test_sgd();
    if (have_bf16) {
        test_conv_bf16(32, 32, 7, 3, 1, 1);
        test_conv_bf16(32, 64, 8, 1, 2, 0);
    }
    test_strict();

    return 0;
}
