/* host_exec.c - see host_exec.h. Obviously-correct loops over NHWC doubles;
 * speed is not a goal (tiny models only). */
#include "host_exec.h"
#include "cuda_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_EPS      1e-5
#define BN_MOMENTUM 0.1

typedef struct host_exec {
    gb_exec_t base;
    double lr, mom, wd;
    double *w, *buf, *grad;      /* [A | B] */
    double *buffers;             /* canonical running stats */
    double *mean, *var, *invstd; /* per BN channel, at stat_off / 2 indexing via bn */
    int *pool_arg;               /* per pooled output: flat index of the winning input */
    double *logits;
    double loss;
    int *labels;
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
    free(h->invstd);
    free(h->pool_arg);
    free(h->logits);
    free(h->labels);
    free(h);
    *self_p = NULL;
}

static size_t nparam(const host_exec_t *h) {
    return h->base.plan->n_a + h->base.plan->n_b;
}

static int hx_load_params(gb_exec_t *ex, const float *master, const float *buffers) {
    host_exec_t *h = (host_exec_t *)ex;
    for (size_t i = 0; i < nparam(h); i++)
        h->w[i] = master[i];
    for (size_t i = 0; i < ex->plan->m->n_buffers; i++)
        h->buffers[i] = buffers[i];
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
    const double *x = xv, *w = h->w + cv->w_off;
    double *y = yv;
    int C = cv->c_int, N = ex->plan->n;
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int k = 0; k < g->k; k++) {
                    double acc = 0.0;
                    for (int r = 0; r < g->kh; r++) {
                        int iy = oy * g->stride - g->pad + r;
                        if (iy < 0 || iy >= g->ih) continue;
                        for (int s = 0; s < g->kw; s++) {
                            int ix = ox * g->stride - g->pad + s;
                            if (ix < 0 || ix >= g->iw) continue;
                            const double *xp = x + (((size_t)n * g->ih + iy) * g->iw + ix) * C;
                            const double *wp = w + (((size_t)k * g->kh + r) * g->kw + s) * C;
                            for (int c = 0; c < C; c++)
                                acc += xp[c] * wp[c];
                        }
                    }
                    y[(((size_t)n * g->oh + oy) * g->ow + ox) * g->k + k] = acc;
                }
    return 0;
}

static int hx_conv_bwd_data(gb_exec_t *ex, int ci, const void *dyv, void *dxv, int accumulate) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_conv_t *cv = &ex->plan->convs[ci];
    const gb_conv_t *g = &cv->g;
    const double *dy = dyv, *w = h->w + cv->w_off;
    double *dx = dxv;
    int C = cv->c_int, N = ex->plan->n;
    if (!accumulate) memset(dx, 0, (size_t)N * g->ih * g->iw * C * sizeof(double));
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int k = 0; k < g->k; k++) {
                    double d = dy[(((size_t)n * g->oh + oy) * g->ow + ox) * g->k + k];
                    for (int r = 0; r < g->kh; r++) {
                        int iy = oy * g->stride - g->pad + r;
                        if (iy < 0 || iy >= g->ih) continue;
                        for (int s = 0; s < g->kw; s++) {
                            int ix = ox * g->stride - g->pad + s;
                            if (ix < 0 || ix >= g->iw) continue;
                            double *xp = dx + (((size_t)n * g->ih + iy) * g->iw + ix) * C;
                            const double *wp = w + (((size_t)k * g->kh + r) * g->kw + s) * C;
                            for (int c = 0; c < C; c++)
                                xp[c] += d * wp[c];
                        }
                    }
                }
    return 0;
}

static int hx_conv_bwd_filter(gb_exec_t *ex, int ci, const void *xv, const void *dyv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_conv_t *cv = &ex->plan->convs[ci];
    const gb_conv_t *g = &cv->g;
    const double *x = xv, *dy = dyv;
    double *dw = h->grad + cv->w_off;
    int C = cv->c_int, N = ex->plan->n;
    memset(dw, 0, cv->w_numel * sizeof(double));
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int k = 0; k < g->k; k++) {
                    double d = dy[(((size_t)n * g->oh + oy) * g->ow + ox) * g->k + k];
                    for (int r = 0; r < g->kh; r++) {
                        int iy = oy * g->stride - g->pad + r;
                        if (iy < 0 || iy >= g->ih) continue;
                        for (int s = 0; s < g->kw; s++) {
                            int ix = ox * g->stride - g->pad + s;
                            if (ix < 0 || ix >= g->iw) continue;
                            const double *xp = x + (((size_t)n * g->ih + iy) * g->iw + ix) * C;
                            double *wp = dw + (((size_t)k * g->kh + r) * g->kw + s) * C;
                            for (int c = 0; c < C; c++)
                                wp[c] += d * xp[c];
                        }
                    }
                }
    return 0;
}

static int hx_bn_fwd(gb_exec_t *ex, int bi, const void *xv, const void *zv, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    const double *x = xv, *z = zv;
    double *y = yv;
    int C = b->g.c;
    long M = b->count;
    const double *gamma = h->w + b->gamma_off, *beta = h->w + b->beta_off;
    size_t so = b->stat_off / 2;
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (long i = 0; i < M; i++)
            s += x[(size_t)i * C + c];
        double mean = s / (double)M, q = 0.0;
        for (long i = 0; i < M; i++) {
            double d = x[(size_t)i * C + c] - mean;
            q += d * d;
        }
        double var = q / (double)M, inv = 1.0 / sqrt(var + BN_EPS);
        h->mean[so + c] = mean;
        h->var[so + c] = var;
        h->invstd[so + c] = inv;
        for (long i = 0; i < M; i++) {
            size_t k = (size_t)i * C + c;
            double v = gamma[c] * (x[k] - mean) * inv + beta[c] + (z ? z[k] : 0.0);
            y[k] = (b->relu && v < 0.0) ? 0.0 : v;
        }
    }
    return 0;
}

static int hx_bn_bwd(gb_exec_t *ex, int bi, const void *xv, const void *yv, const void *dyv,
                     void *dxv, void *dzv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_bn_t *b = &ex->plan->bns[bi];
    const double *x = xv, *y = yv, *dy = dyv;
    double *dx = dxv, *dz = dzv;
    int C = b->g.c;
    long M = b->count;
    const double *gamma = h->w + b->gamma_off;
    size_t so = b->stat_off / 2;
    for (int c = 0; c < C; c++) {
        double mean = h->mean[so + c], inv = h->invstd[so + c], sg = 0.0, sgx = 0.0;
        for (long i = 0; i < M; i++) {
            size_t k = (size_t)i * C + c;
            double g = (b->relu && !(y[k] > 0.0)) ? 0.0 : dy[k];
            if (dz) dz[k] = g;
            sg += g;
            sgx += g * (x[k] - mean) * inv;
        }
        h->grad[b->beta_off + c] = sg;
        h->grad[b->gamma_off + c] = sgx;
        for (long i = 0; i < M; i++) {
            size_t k = (size_t)i * C + c;
            double g = (b->relu && !(y[k] > 0.0)) ? 0.0 : dy[k];
            double xh = (x[k] - mean) * inv;
            dx[k] = gamma[c] * inv * (g - sg / (double)M - xh * sgx / (double)M);
        }
    }
    return 0;
}

static int hx_maxpool_fwd(gb_exec_t *ex, const void *xv, void *yv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_model_t *m = ex->plan->m;
    const double *x = xv;
    double *y = yv;
    int C = m->stem.k, N = ex->plan->n;
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < m->pool_oh; oy++)
            for (int ox = 0; ox < m->pool_ow; ox++)
                for (int c = 0; c < C; c++) {
                    double best = -INFINITY;
                    int arg = -1;
                    for (int r = 0; r < m->pool_k; r++) {
                        int iy = oy * m->pool_stride - m->pool_pad + r;
                        if (iy < 0 || iy >= m->pool_ih) continue;
                        for (int s = 0; s < m->pool_k; s++) {
                            int ix = ox * m->pool_stride - m->pool_pad + s;
                            if (ix < 0 || ix >= m->pool_iw) continue;
                            int idx = ((n * m->pool_ih + iy) * m->pool_iw + ix) * C + c;
                            if (arg < 0 || x[idx] > best) {
                                best = x[idx];
                                arg = idx;
                            }
                        }
                    }
                    size_t o = (((size_t)n * m->pool_oh + oy) * m->pool_ow + ox) * C + c;
                    y[o] = best;
                    h->pool_arg[o] = arg;
                }
    return 0;
}

static int hx_maxpool_bwd(gb_exec_t *ex, const void *dyv, void *dxv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    const double *dy = dyv;
    double *dx = dxv;
    memset(dx, 0, p->acts[p->a0].numel * sizeof(double));
    for (size_t o = 0; o < p->acts[p->p0].numel; o++)
        dx[h->pool_arg[o]] += dy[o];
    return 0;
}

static int hx_avgpool_fwd(gb_exec_t *ex, const void *xv, void *yv) {
    const gb_model_t *m = ex->plan->m;
    const double *x = xv;
    double *y = yv;
    int C = m->feat_c, HW = m->feat_h * m->feat_w;
    for (int n = 0; n < ex->plan->n; n++)
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int i = 0; i < HW; i++)
                s += x[((size_t)n * HW + i) * C + c];
            y[(size_t)n * C + c] = s / HW;
        }
    return 0;
}

static int hx_avgpool_bwd(gb_exec_t *ex, const void *dyv, void *dxv) {
    const gb_model_t *m = ex->plan->m;
    const double *dy = dyv;
    double *dx = dxv;
    int C = m->feat_c, HW = m->feat_h * m->feat_w;
    for (int n = 0; n < ex->plan->n; n++)
        for (int i = 0; i < HW; i++)
            for (int c = 0; c < C; c++)
                dx[((size_t)n * HW + i) * C + c] = dy[(size_t)n * C + c] / HW;
    return 0;
}

static int hx_head(gb_exec_t *ex, const void *featv, void *dfeatv) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    const double *f = featv, *W = h->w + p->fc_w_off, *bias = h->w + p->fc_b_off;
    double *df = dfeatv, *dW = h->grad + p->fc_w_off, *db = h->grad + p->fc_b_off;
    int N = p->n, K = p->m->cfg.n_classes, F = p->m->feat_c;
    double *z = h->logits, loss = 0.0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double acc = bias[k];
            for (int i = 0; i < F; i++)
                acc += f[(size_t)n * F + i] * W[(size_t)k * F + i];
            z[(size_t)n * K + k] = acc;
        }
    for (int n = 0; n < N; n++) {
        double *zr = z + (size_t)n * K, mx = zr[0], s = 0.0;
        for (int k = 1; k < K; k++)
            mx = zr[k] > mx ? zr[k] : mx;
        for (int k = 0; k < K; k++)
            s += exp(zr[k] - mx);
        loss += mx + log(s) - zr[h->labels[n]];
        /* logits become dloss/dlogits in place */
        for (int k = 0; k < K; k++)
            zr[k] = (exp(zr[k] - mx) / s - (k == h->labels[n] ? 1.0 : 0.0)) / N;
    }
    h->loss = loss / N;
    for (int k = 0; k < K; k++) {
        double sb = 0.0;
        for (int n = 0; n < N; n++)
            sb += z[(size_t)n * K + k];
        db[k] = sb;
        for (int i = 0; i < F; i++) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += z[(size_t)n * K + k] * f[(size_t)n * F + i];
            dW[(size_t)k * F + i] = s;
        }
    }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            double s = 0.0;
            for (int k = 0; k < K; k++)
                s += z[(size_t)n * K + k] * W[(size_t)k * F + i];
            df[(size_t)n * F + i] = s;
        }
    return 0;
}

static int hx_bn_running(gb_exec_t *ex) {
    host_exec_t *h = (host_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    for (int i = 0; i < p->n_bns; i++) {
        const gb_plan_bn_t *b = &p->bns[i];
        size_t so = b->stat_off / 2;
        double M = (double)b->count;
        for (int c = 0; c < b->g.c; c++) {
            double *rm = h->buffers + b->rmean_off + c, *rv = h->buffers + b->rvar_off + c;
            *rm = (1.0 - BN_MOMENTUM) * *rm + BN_MOMENTUM * h->mean[so + c];
            *rv = (1.0 - BN_MOMENTUM) * *rv + BN_MOMENTUM * h->var[so + c] * M / (M - 1.0);
        }
    }
    return 0;
}

static int hx_update(gb_exec_t *ex) {
    host_exec_t *h = (host_exec_t *)ex;
    for (size_t i = 0; i < nparam(h); i++) {
        double d = h->grad[i] + h->wd * h->w[i];
        h->buf[i] = h->mom * h->buf[i] + d;
        h->w[i] -= h->lr * h->buf[i];
    }
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
    h->base.arena = calloc(1, p->arena_bytes);
    h->w = calloc(np, sizeof(double));
    h->buf = calloc(np, sizeof(double));
    h->grad = calloc(np, sizeof(double));
    h->buffers = calloc(p->m->n_buffers, sizeof(double));
    h->mean = calloc(ns, sizeof(double));
    h->var = calloc(ns, sizeof(double));
    h->invstd = calloc(ns, sizeof(double));
    h->pool_arg = calloc(p->acts[p->p0].numel, sizeof(int));
    h->logits = calloc((size_t)p->n * p->m->cfg.n_classes, sizeof(double));
    h->labels = calloc((size_t)p->n, sizeof(int));
    if (!h->base.arena || !h->w || !h->buf || !h->grad || !h->buffers || !h->mean || !h->var ||
        !h->invstd || !h->pool_arg || !h->logits || !h->labels)
        goto oom;
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
    gb_plan_t *p = gb_plan_new(m, cfg->batch, sizeof(double), err, errlen);
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
