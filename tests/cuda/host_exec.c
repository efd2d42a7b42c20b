/* host_exec.c - see host_exec.h. The twin keeps the GPU executor's layouts
 * (NHWC activations, KRSC weights with the stem padded to 4 channels, the
 * plan's arena and [A | B] slabs) and its sequence of ops, and computes each
 * op with the reference ops of kernels/ref (ref_ops.h: double, NCHW/OIHW,
 * each backward proven by finite differences and against PyTorch), moving
 * data between the two layouts around every call. What is its own here is
 * only layout: the math is the reference's. Speed is not a goal (tiny models
 * only). */
#include "host_exec.h"
#include "cuda_math.h"
#include "ref_ops.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_EPS      GB_REF_BN_EPS
#define BN_MOMENTUM GB_REF_BN_MOMENTUM

typedef struct host_exec {
    gb_exec_t base;
    double lr, mom, wd;
    double *w, *buf, *grad; /* [A | B] */
    double *buffers;        /* canonical running stats */
    double *mean, *var;     /* per BN channel, at stat_off / 2 (biased batch variance) */
    double *pool_x;         /* the max pool's last input, NCHW (its backward re-finds the max) */
    double *logits, *dlogits;
    double loss;
    int32_t *labels;
    long updates; /* SGD steps taken: torch's first step sets the momentum buffer */
    /* the fused step: the last conv_stats' sums, for batch norm sums_bn */
    double *sum, *sqsum;
    int sums_bn;
} host_exec_t;

static void hx_destroy(gb_exec_t **self_p) {
    if (!self_p || !*self_p) return;
    host_exec_t *h = (host_exec_t *)*self_p;
    free(h->base.arena);
    free(h->w);
    free(h->buf);
    free(h->grad);
    free(h->buffers);
    free(h->mean);
    free(h->var);
    free(h->pool_x);
    free(h->logits);
    free(h->dlogits);
    free(h->labels);
    free(h->sum);
    free(h->sqsum);
    free(h);
    *self_p = NULL;
}

static size_t nparam(const host_exec_t *h) {
    return h->base.plan->n_a + h->base.plan->n_b;
}

static int oom(gb_exec_t *ex) {
    snprintf(ex->err, sizeof(ex->err), "host twin: out of memory");
    return -1;
}

/* ---- layouts: the GPU's NHWC / KRSC <-> the reference's NCHW / KCRS ---- */

static void nhwc_to_nchw(const double *src, int n, int h, int w, int c, double *dst) {
    for (int b = 0; b < n; b++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int k = 0; k < c; k++)
                    dst[(((size_t)b * c + k) * h + y) * w + x] =
                        src[(((size_t)b * h + y) * w + x) * c + k];
}

/* accumulate: add into dst instead of overwriting it */
static void nchw_to_nhwc(const double *src, int n, int h, int w, int c, double *dst,
                         int accumulate) {
    for (int b = 0; b < n; b++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int k = 0; k < c; k++) {
                    double v = src[(((size_t)b * c + k) * h + y) * w + x];
                    double *d = &dst[(((size_t)b * h + y) * w + x) * c + k];
                    *d = accumulate ? *d + v : v;
                }
}

/* (K, R, S, C) <-> (K, C, R, S): NHWC of the filter with R, S as H, W */
static void krsc_to_kcrs(const double *src, int k, int r, int s, int c, double *dst) {
    nhwc_to_nchw(src, k, r, s, c, dst);
}
static void kcrs_to_krsc(const double *src, int k, int r, int s, int c, double *dst) {
    nchw_to_nhwc(src, k, r, s, c, dst, 0);
}

static int conv_geom(gb_exec_t *ex, const gb_plan_conv_t *cv, gb_ref_conv_t *rc) {
    const gb_conv_t *g = &cv->g;
    if (gb_ref_conv_init(rc, ex->plan->n, cv->c_int, g->ih, g->iw, g->k, g->kh, g->kw, g->stride,
                         g->pad) != 0 ||
        rc->p != g->oh || rc->q != g->ow) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s: the reference refuses its geometry",
                 cv->name);
        return -1;
    }
    return 0;
}

/* ---- ops ---- */

static int hx_load_params(gb_exec_t *ex, const float *master, const float *buffers) {
    host_exec_t *h = (host_exec_t *)ex;
    for (size_t i = 0; i < nparam(h); i++)
        h->w[i] = master[i];
    for (size_t i = 0; i < ex->plan->m->n_buffers; i++)
        h->buffers[i] = buffers[i];
    h->updates = 0; /* new parameters restart the momentum, as in the CPU engine */
    return 0;
}

static int hx_store_params(gb_exec_t *ex, float *master, float *buffers) {
    host_exec_t *h = (host_exec_t *)ex;
    for (size_t i = 0; i < nparam(h); i++)
        master[i] = (float)h->w[i];
    for (size_t i = 0; i < ex->plan->m->n_buffers; i++)
        buffers[i] = (float)h->buffers[i];
    return 0;
}

static int hx_store_grads(gb_exec_t *ex, float *grads, float *scale) {
    host_exec_t *h = (host_exec_t *)ex;
    for (size_t i = 0; i < nparam(h); i++)
        grads[i] = (float)h->grad[i];
    *scale = 1.0f;
    return 0;
}

/* The GPU's layout step (NCHW images to NHWC with the zero 4th channel) and
 * its counter-based synthetic draw, element for element. */
static int hx_load_batch(gb_exec_t *ex, const float *images, const int32_t *labels, uint64_t seed) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    const gb_plan_act_t *a = &p->acts[p->x0];
    double *x = gb_exec_act(ex, p->x0);
    for (int n = 0; n < a->n; n++)
        for (int y = 0; y < a->h; y++)
            for (int xx = 0; xx < a->w; xx++)
                for (int c = 0; c < a->c; c++) {
                    size_t src = (((size_t)n * 3 + c) * a->h + y) * a->w + xx;
                    double v = 0.0;
                    if (c < 3) v = images ? images[src] : gb_synth_normal(seed, src);
                    x[(((size_t)n * a->h + y) * a->w + xx) * a->c + c] = v;
                }
    for (int n = 0; n < a->n; n++)
        h->labels[n] = labels ? labels[n] : gb_synth_label(seed, (uint64_t)n, p->m->cfg.n_classes);
    return 0;
}

static int hx_nop(gb_exec_t *ex) {
    (void)ex;
    return 0;
}

static int hx_conv_fwd(gb_exec_t *ex, int ci, const void *xv, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_conv_t *cv = &ex->plan->convs[ci];
    const gb_conv_t *g = &cv->g;
    gb_ref_conv_t rc;
    if (conv_geom(ex, cv, &rc)) return -1;
    int N = rc.n, C = rc.c;
    double *x = malloc((size_t)N * C * g->ih * g->iw * sizeof(double));
    double *w = malloc(cv->w_numel * sizeof(double));
    double *y = malloc((size_t)N * g->k * g->oh * g->ow * sizeof(double));
    int rc_ = 0;
    if (!x || !w || !y) {
        rc_ = oom(ex);
    } else {
        nhwc_to_nchw(xv, N, g->ih, g->iw, C, x);
        krsc_to_kcrs(h->w + cv->w_off, g->k, g->kh, g->kw, C, w);
        gb_ref_conv2d_fwd(&rc, x, w, y);
        nchw_to_nhwc(y, N, g->oh, g->ow, g->k, yv, 0);
    }
    free(x);
    free(w);
    free(y);
    return rc_;
}

static int hx_conv_bwd_data(gb_exec_t *ex, int ci, const void *dyv, void *dxv, int accumulate) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_conv_t *cv = &ex->plan->convs[ci];
    const gb_conv_t *g = &cv->g;
    gb_ref_conv_t rc;
    if (conv_geom(ex, cv, &rc)) return -1;
    int N = rc.n, C = rc.c;
    double *dy = malloc((size_t)N * g->k * g->oh * g->ow * sizeof(double));
    double *w = malloc(cv->w_numel * sizeof(double));
    double *dx = malloc((size_t)N * C * g->ih * g->iw * sizeof(double));
    int rc_ = 0;
    if (!dy || !w || !dx) {
        rc_ = oom(ex);
    } else {
        nhwc_to_nchw(dyv, N, g->oh, g->ow, g->k, dy);
        krsc_to_kcrs(h->w + cv->w_off, g->k, g->kh, g->kw, C, w);
        gb_ref_conv2d_bwd_data(&rc, dy, w, dx);
        nchw_to_nhwc(dx, N, g->ih, g->iw, C, dxv, accumulate);
    }
    free(dy);
    free(w);
    free(dx);
    return rc_;
}

static int hx_conv_bwd_filter(gb_exec_t *ex, int ci, const void *xv, const void *dyv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_conv_t *cv = &ex->plan->convs[ci];
    const gb_conv_t *g = &cv->g;
    gb_ref_conv_t rc;
    if (conv_geom(ex, cv, &rc)) return -1;
    int N = rc.n, C = rc.c;
    double *x = malloc((size_t)N * C * g->ih * g->iw * sizeof(double));
    double *dy = malloc((size_t)N * g->k * g->oh * g->ow * sizeof(double));
    double *dw = malloc(cv->w_numel * sizeof(double));
    int rc_ = 0;
    if (!x || !dy || !dw) {
        rc_ = oom(ex);
    } else {
        nhwc_to_nchw(xv, N, g->ih, g->iw, C, x);
        nhwc_to_nchw(dyv, N, g->oh, g->ow, g->k, dy);
        gb_ref_conv2d_bwd_weights(&rc, x, dy, dw);
        kcrs_to_krsc(dw, g->k, g->kh, g->kw, C, h->grad + cv->w_off);
    }
    free(x);
    free(dy);
    free(dw);
    return rc_;
}

/* An NHWC activation is the reference's (N, C, HW) layout with N = n*h*w
 * rows of one value per channel, so batch norm needs no transposition. */
static int bn_rows(gb_exec_t *ex, const gb_plan_bn_t *b) {
    if (b->count < 2 || b->count > INT_MAX) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s over %ld values per channel", b->name,
                 b->count);
        return -1;
    }
    return (int)b->count;
}

static int hx_bn_fwd(gb_exec_t *ex, int bi, const void *xv, const void *zv, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    int rows = bn_rows(ex, b);
    if (rows < 0) return -1;
    size_t so = b->stat_off / 2, n = (size_t)rows * b->g.c;
    double *y = yv;
    gb_ref_bn_fwd(rows, b->g.c, 1, xv, h->w + b->gamma_off, h->w + b->beta_off, BN_EPS, y,
                  h->mean + so, h->var + so);
    if (zv && b->relu)
        gb_ref_add_relu_fwd(n, y, zv, y);
    else if (zv)
        gb_ref_add_fwd(n, y, zv, y);
    else if (b->relu)
        gb_ref_relu_fwd(n, y, y);
    return 0;
}

static double *bn_relu_copy(gb_exec_t *ex, int bi, const double *x);

static int hx_bn_bwd(gb_exec_t *ex, int bi, const void *xv, const void *yv, const void *dyv,
                     void *dxv, void *dzv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    int rows = bn_rows(ex, b);
    if (rows < 0) return -1;
    size_t so = b->stat_off / 2, n = (size_t)rows * b->g.c;
    const double *g = dyv;
    double *tmp = NULL, *yrec = NULL;
    if (b->relu && !yv) {
        /* the fused step stores no output: the mask from bn(x) recomputed */
        if (dzv) {
            snprintf(ex->err, sizeof(ex->err), "host twin: %s: no output to take the mask from",
                     b->name);
            return -1;
        }
        if (!(yrec = bn_relu_copy(ex, bi, xv))) return oom(ex);
        yv = yrec;
    }
    if (b->relu) {
        /* the gradient through the ReLU (of the residual join when there is
         * one: it is also the residual's gradient dz) */
        double *gb = dzv ? (double *)dzv : (tmp = malloc(n * sizeof(double)));
        if (!gb) return oom(ex);
        if (dzv)
            gb_ref_add_relu_bwd(n, yv, dyv, gb);
        else
            gb_ref_relu_bwd(n, yv, dyv, gb);
        g = gb;
    } else if (dzv) {
        memcpy(dzv, dyv, n * sizeof(double));
    }
    gb_ref_bn_bwd(rows, b->g.c, 1, xv, g, h->w + b->gamma_off, h->mean + so, h->var + so, BN_EPS,
                  dxv, h->grad + b->gamma_off, h->grad + b->beta_off);
    free(tmp);
    free(yrec);
    return 0;
}

/* ---- the fused step's ops (exec.h), in double ---- */

/* batch norm bi's finalized scale and bias of channel ch: bn(x) = x * a + b */
static void bn_coef(host_exec_t *h, const gb_plan_bn_t *b, int ch, double *a, double *bb) {
    size_t so = b->stat_off / 2;
    *a = h->w[b->gamma_off + ch] / sqrt(h->var[so + ch] + BN_EPS);
    *bb = h->w[b->beta_off + ch] - h->mean[so + ch] * *a;
}

/* relu(bn(x)) of an activation of batch norm bi, into a new buffer */
static double *bn_relu_copy(gb_exec_t *ex, int bi, const double *x) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    size_t n = (size_t)b->count * b->g.c;
    double *out = malloc(n * sizeof(double));
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        double a, bb;
        bn_coef(h, b, (int)(i % (size_t)b->g.c), &a, &bb);
        double v = x[i] * a + bb;
        out[i] = v > 0.0 ? v : 0.0;
    }
    return out;
}

static int pre_bn_ok(gb_exec_t *ex, int ci, int pre_bn) {
    const gb_plan_t *p = ex->plan;
    if (pre_bn < -1 || pre_bn >= p->n_bns ||
        (pre_bn >= 0 && p->bns[pre_bn].g.c != p->convs[ci].g.c)) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s: prologue batch norm %d does not fit",
                 p->convs[ci].name, pre_bn);
        return 0;
    }
    return 1;
}

static int hx_conv_stats(gb_exec_t *ex, int ci, const void *xv, int pre_bn, void *yv,
                         int stats_bn) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    const gb_conv_t *g = &p->convs[ci].g;
    if (!pre_bn_ok(ex, ci, pre_bn)) return -1;
    if (stats_bn < 0 || stats_bn >= p->n_bns || p->bns[stats_bn].g.c != g->k) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s: statistics for batch norm %d",
                 p->convs[ci].name, stats_bn);
        return -1;
    }
    double *a = NULL;
    if (pre_bn >= 0 && !(a = bn_relu_copy(ex, pre_bn, xv))) return oom(ex);
    int rc = hx_conv_fwd(ex, ci, a ? a : xv, yv);
    free(a);
    if (rc) return -1;
    const double *y = yv;
    size_t n = (size_t)p->n * g->oh * g->ow * g->k;
    for (int k = 0; k < g->k; k++)
        h->sum[k] = h->sqsum[k] = 0.0;
    for (size_t i = 0; i < n; i++) {
        h->sum[i % (size_t)g->k] += y[i];
        h->sqsum[i % (size_t)g->k] += y[i] * y[i];
    }
    h->sums_bn = stats_bn;
    return 0;
}

static int hx_bn_finalize(gb_exec_t *ex, int bi) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    int rows = bn_rows(ex, b);
    if (rows < 0) return -1;
    if (h->sums_bn != bi) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s finalized without its conv's sums",
                 b->name);
        return -1;
    }
    size_t so = b->stat_off / 2;
    for (int ch = 0; ch < b->g.c; ch++) {
        double mean = h->sum[ch] / rows, var = h->sqsum[ch] / rows - mean * mean;
        h->mean[so + ch] = mean;
        h->var[so + ch] = var > 0.0 ? var : 0.0;
    }
    h->sums_bn = -1;
    return 0;
}

static int hx_bn_apply(gb_exec_t *ex, int bi, const void *xv, const void *zv, int zbn, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    const gb_plan_bn_t *b = &p->bns[bi];
    if (zbn < -1 || zbn >= p->n_bns || (zbn >= 0 && p->bns[zbn].g.c != b->g.c) || !zv) {
        snprintf(ex->err, sizeof(ex->err), "host twin: %s: residual batch norm %d", b->name, zbn);
        return -1;
    }
    const double *x = xv, *z = zv;
    double *y = yv;
    size_t n = (size_t)b->count * b->g.c;
    for (size_t i = 0; i < n; i++) {
        int ch = (int)(i % (size_t)b->g.c);
        double a, bb, r = z[i];
        bn_coef(h, b, ch, &a, &bb);
        if (zbn >= 0) {
            double za, zb;
            bn_coef(h, &p->bns[zbn], ch, &za, &zb);
            r = z[i] * za + zb;
        }
        double v = x[i] * a + bb + r;
        y[i] = b->relu && v < 0.0 ? 0.0 : v;
    }
    return 0;
}

static int hx_conv_bwd_filter_pre(gb_exec_t *ex, int ci, const void *xv, int pre_bn,
                                  const void *dyv) {
    if (!pre_bn_ok(ex, ci, pre_bn)) return -1;
    if (pre_bn < 0) return hx_conv_bwd_filter(ex, ci, xv, dyv);
    double *a = bn_relu_copy(ex, pre_bn, xv);
    if (!a) return oom(ex);
    int rc = hx_conv_bwd_filter(ex, ci, a, dyv);
    free(a);
    return rc;
}

static int pool_geom(gb_exec_t *ex, gb_ref_pool_t *pl) {
    const gb_model_t *m = ex->plan->m;
    if (gb_ref_pool_init(pl, ex->plan->n, m->stem.k, m->pool_ih, m->pool_iw, m->pool_k, m->pool_k,
                         m->pool_stride, m->pool_pad) != 0 ||
        pl->p != m->pool_oh || pl->q != m->pool_ow) {
        snprintf(ex->err, sizeof(ex->err), "host twin: the reference refuses the max pool");
        return -1;
    }
    return 0;
}

static int hx_maxpool_fwd(gb_exec_t *ex, const void *xv, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    gb_ref_pool_t pl;
    if (pool_geom(ex, &pl)) return -1;
    double *y = malloc((size_t)pl.n * pl.c * pl.p * pl.q * sizeof(double));
    if (!y) return oom(ex);
    nhwc_to_nchw(xv, pl.n, pl.h, pl.w, pl.c, h->pool_x);
    gb_ref_maxpool_fwd(&pl, h->pool_x, y);
    nchw_to_nhwc(y, pl.n, pl.p, pl.q, pl.c, yv, 0);
    free(y);
    return 0;
}

static int hx_maxpool_bwd(gb_exec_t *ex, const void *dyv, void *dxv) {
    host_exec_t *h = (host_exec_t *)ex;
    gb_ref_pool_t pl;
    if (pool_geom(ex, &pl)) return -1;
    double *dy = malloc((size_t)pl.n * pl.c * pl.p * pl.q * sizeof(double));
    double *dx = malloc((size_t)pl.n * pl.c * pl.h * pl.w * sizeof(double));
    int rc = 0;
    if (!dy || !dx) {
        rc = oom(ex);
    } else {
        nhwc_to_nchw(dyv, pl.n, pl.p, pl.q, pl.c, dy);
        gb_ref_maxpool_bwd(&pl, h->pool_x, dy, dx);
        nchw_to_nhwc(dx, pl.n, pl.h, pl.w, pl.c, dxv, 0);
    }
    free(dy);
    free(dx);
    return rc;
}

/* global average pool: the (N, C) result is NHWC (N, 1, 1, C) as it is */
static int hx_avgpool_fwd(gb_exec_t *ex, const void *xv, void *yv) {
    const gb_model_t *m = ex->plan->m;
    int N = ex->plan->n, C = m->feat_c;
    double *x = malloc((size_t)N * C * m->feat_h * m->feat_w * sizeof(double));
    if (!x) return oom(ex);
    nhwc_to_nchw(xv, N, m->feat_h, m->feat_w, C, x);
    gb_ref_gap_fwd(N, C, m->feat_h * m->feat_w, x, yv);
    free(x);
    return 0;
}

static int hx_avgpool_bwd(gb_exec_t *ex, const void *dyv, void *dxv) {
    const gb_model_t *m = ex->plan->m;
    int N = ex->plan->n, C = m->feat_c;
    double *dx = malloc((size_t)N * C * m->feat_h * m->feat_w * sizeof(double));
    if (!dx) return oom(ex);
    gb_ref_gap_bwd(N, C, m->feat_h * m->feat_w, dyv, dx);
    nchw_to_nhwc(dx, N, m->feat_h, m->feat_w, C, dxv, 0);
    free(dx);
    return 0;
}

static int hx_head(gb_exec_t *ex, const void *featv, void *dfeatv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    int N = p->n, K = p->m->cfg.n_classes, F = p->m->feat_c;
    const double *W = h->w + p->fc_w_off;
    gb_ref_fc_fwd(N, F, K, featv, W, h->w + p->fc_b_off, h->logits);
    if (gb_ref_softmax_xent(N, K, h->logits, h->labels, &h->loss, h->dlogits) != 0) {
        snprintf(ex->err, sizeof(ex->err), "host twin: a label is outside [0, %d)", K);
        return -1;
    }
    gb_ref_fc_bwd(N, F, K, featv, W, h->dlogits, dfeatv, h->grad + p->fc_w_off,
                  h->grad + p->fc_b_off);
    return 0;
}

static int hx_bn_running(gb_exec_t *ex) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    for (int i = 0; i < p->n_bns; i++) {
        const gb_plan_bn_t *b = &p->bns[i];
        size_t so = b->stat_off / 2;
        if (gb_ref_bn_update_running(b->g.c, b->count, BN_MOMENTUM, h->mean + so, h->var + so,
                                     h->buffers + b->rmean_off, h->buffers + b->rvar_off) != 0) {
            snprintf(ex->err, sizeof(ex->err), "host twin: %s: running statistics over %ld values",
                     b->name, b->count);
            return -1;
        }
    }
    return 0;
}

static int hx_update(gb_exec_t *ex) {
    host_exec_t *h = (host_exec_t *)ex;
    /* the GPU's buffers start at zero, so its mom * 0 + d equals this first
     * step's buf = d exactly */
    gb_ref_sgd_step(nparam(h), h->w, h->grad, h->buf, h->lr, h->mom, h->wd, h->updates == 0);
    h->updates++;
    return 0;
}

static int hx_step_end(gb_exec_t *ex, gb_step_out_t *out) {
    host_exec_t *h = (host_exec_t *)ex;
    out->loss = (float)h->loss;
    out->ms = -1.0;
    out->skipped = 0;
    return 0;
}

static int hx_report(gb_exec_t *ex, gb_replica_report_t *rep) {
    const gb_plan_t *p = ex->plan;
    rep->peak_mem_bytes = p->arena_bytes + 3 * (p->n_a + p->n_b) * sizeof(double);
    rep->details_json = NULL;
    return 0;
}

static int hx_act_write(gb_exec_t *ex, void *dst, const double *src, size_t n) {
    (void)ex;
    memcpy(dst, src, n * sizeof(double));
    return 0;
}

static int hx_act_read(gb_exec_t *ex, const void *src, double *dst, size_t n) {
    (void)ex;
    memcpy(dst, src, n * sizeof(double));
    return 0;
}

static const gb_exec_ops_t host_ops = {
    .name = "host-twin",
    .destroy = hx_destroy,
    .load_params = hx_load_params,
    .store_params = hx_store_params,
    .store_grads = hx_store_grads,
    .load_batch = hx_load_batch,
    .step_begin = hx_nop,
    .conv_fwd = hx_conv_fwd,
    .conv_bwd_data = hx_conv_bwd_data,
    .conv_bwd_filter = hx_conv_bwd_filter,
    .bn_fwd = hx_bn_fwd,
    .bn_bwd = hx_bn_bwd,
    .conv_stats = hx_conv_stats,
    .bn_finalize = hx_bn_finalize,
    .bn_apply = hx_bn_apply,
    .conv_bwd_filter_pre = hx_conv_bwd_filter_pre,
    .maxpool_fwd = hx_maxpool_fwd,
    .maxpool_bwd = hx_maxpool_bwd,
    .avgpool_fwd = hx_avgpool_fwd,
    .avgpool_bwd = hx_avgpool_bwd,
    .head = hx_head,
    .bn_running = hx_bn_running,
    .update = hx_update,
    .step_end = hx_step_end,
    .report = hx_report,
    .act_write = hx_act_write,
    .act_read = hx_act_read,
};

gb_exec_t *gb_host_exec_new(const gb_plan_t *p, const gb_train_config_t *cfg, char *err,
                            size_t errlen) {
    if (p->esize != sizeof(double)) {
        snprintf(err, errlen, "host twin needs a plan with 8-byte elements");
        return NULL;
    }
    host_exec_t *h = calloc(1, sizeof(*h));
    if (!h) goto oom;
    h->base.ops = &host_ops;
    h->base.plan = p;
    h->lr = cfg->lr;
    h->mom = cfg->momentum;
    h->wd = cfg->weight_decay;
    size_t np = p->n_a + p->n_b, ns = p->n_stats / 2;
    size_t nl = (size_t)p->n * p->m->cfg.n_classes;
    h->base.arena = calloc(1, p->arena_bytes);
    h->w = calloc(np, sizeof(double));
    h->buf = calloc(np, sizeof(double));
    h->grad = calloc(np, sizeof(double));
    h->buffers = calloc(p->m->n_buffers, sizeof(double));
    h->mean = calloc(ns, sizeof(double));
    h->var = calloc(ns, sizeof(double));
    h->pool_x = calloc(p->acts[p->a0].numel, sizeof(double));
    h->logits = calloc(nl, sizeof(double));
    h->dlogits = calloc(nl, sizeof(double));
    h->labels = calloc((size_t)p->n, sizeof(int32_t));
    h->sum = calloc((size_t)p->max_bn_c, sizeof(double));
    h->sqsum = calloc((size_t)p->max_bn_c, sizeof(double));
    h->sums_bn = -1;
    if (!h->base.arena || !h->w || !h->buf || !h->grad || !h->buffers || !h->mean || !h->var ||
        !h->pool_x || !h->logits || !h->dlogits || !h->labels || !h->sum || !h->sqsum)
        goto oom;
    /* GB_CUDA_FUSE as the CUDA backend reads it: the twin runs the fused
     * step's wiring too, in every precision (its math is double) */
    int fused = gb_plan_fuse(getenv("GB_CUDA_FUSE"), err, errlen);
    if (fused < 0) {
        gb_exec_t *e = &h->base;
        hx_destroy(&e);
        return NULL;
    }
    h->base.fused = fused;
    return &h->base;
oom:
    snprintf(err, errlen, "host twin: out of memory");
    gb_exec_t *e = h ? &h->base : NULL;
    hx_destroy(&e);
    return NULL;
}

/* ---- the twin as a gb_backend_ops_t ---- */

static int tw_probe(gb_backend_info_t *info, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    memset(info, 0, sizeof(*info));
    snprintf(info->device_model, sizeof(info->device_model), "host twin (double)");
    info->device_count = 1;
    snprintf(info->versions, sizeof(info->versions), "{}");
    return 0;
}

static int tw_create(const gb_model_t *m, const gb_train_config_t *cfg, int replica,
                     gb_comm_t *comm, void **state, char *err, size_t errlen) {
    (void)replica;
    if (comm) {
        snprintf(err, errlen, "host twin: no data parallel");
        return -1;
    }
    if (cfg->precision != GB_PREC_FP32) {
        snprintf(err, errlen, "host twin: fp32 semantics only");
        return -1;
    }
    /* GB_CUDA_STEM_C as the backend reads it (fp32 here: 4 unless set) */
    int stem_c = gb_plan_stem_c(cfg->precision, getenv("GB_CUDA_STEM_C"), err, errlen);
    if (stem_c < 0) return -1;
    gb_plan_t *p = gb_plan_new(m, cfg->batch, sizeof(double), stem_c, err, errlen);
    if (!p) return -1;
    gb_exec_t *ex = gb_host_exec_new(p, cfg, err, errlen);
    if (!ex) {
        gb_plan_destroy(&p);
        return -1;
    }
    gb_net_t *net = gb_net_new(&p, &ex, 0, cfg->seed, err, errlen);
    if (!net) return -1;
    *state = net;
    return 0;
}

static int tw_set_state(void *s, const float *params, const float *buffers, int64_t nbt, char *err,
                        size_t errlen) {
    return gb_net_set_state(s, params, buffers, nbt, err, errlen);
}
static int tw_get_state(void *s, float *params, float *buffers, int64_t *nbt, char *err,
                        size_t errlen) {
    return gb_net_get_state(s, params, buffers, nbt, err, errlen);
}
static int tw_get_grads(void *s, float *grads, char *err, size_t errlen) {
    return gb_net_get_grads(s, grads, err, errlen);
}
static int tw_set_batch(void *s, const float *images, const int32_t *labels, char *err,
                        size_t errlen) {
    return gb_net_set_batch(s, images, labels, err, errlen);
}
static int tw_step(void *s, gb_step_out_t *out, char *err, size_t errlen) {
    return gb_net_step(s, out, err, errlen);
}
static int tw_report(void *s, gb_replica_report_t *rep, char *err, size_t errlen) {
    return gb_net_report(s, rep, err, errlen);
}
static void tw_destroy(void **s) {
    gb_net_destroy((gb_net_t **)s);
}

const gb_backend_ops_t gb_twin_backend_ops = {
    .abi = GB_BACKEND_ABI,
    .name = "cuda-twin",
    .probe = tw_probe,
    .create = tw_create,
    .set_state = tw_set_state,
    .get_state = tw_get_state,
    .get_grads = tw_get_grads,
    .set_batch = tw_set_batch,
    .step = tw_step,
    .report = tw_report,
    .destroy = tw_destroy,
    .gemm = NULL,
};

static int put(FILE *f, const void *p, size_t n) {
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

int gb_twin_write_input(const char *path, const gb_model_t *m, const gb_train_config_t *cfg,
                        int steps, const float *params, const float *buffers, const float *images,
                        const int32_t *labels) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int32_t hdr[10] = {
        m->cfg.image_h,   m->cfg.image_w,   m->cfg.n_classes,  m->cfg.layers[0], m->cfg.layers[1],
        m->cfg.layers[2], m->cfg.layers[3], m->cfg.base_width, cfg->batch,       steps};
    double hyper[3] = {cfg->lr, cfg->momentum, cfg->weight_decay};
    int64_t counts[2] = {(int64_t)m->n_params, (int64_t)m->n_buffers};
    size_t px = (size_t)cfg->batch * 3 * m->cfg.image_h * m->cfg.image_w;
    int rc = put(f, "GBTW", 4) | put(f, hdr, sizeof(hdr)) | put(f, hyper, sizeof(hyper)) |
             put(f, counts, sizeof(counts)) | put(f, params, m->n_params * sizeof(float)) |
             put(f, buffers, m->n_buffers * sizeof(float)) | put(f, images, px * sizeof(float)) |
             put(f, labels, (size_t)cfg->batch * sizeof(int32_t));
    return fclose(f) == 0 ? rc : -1;
}
