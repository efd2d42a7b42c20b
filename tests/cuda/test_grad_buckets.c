/* test_grad_buckets.c - the CUDA backend's gradient buckets against the
 * step that fills them (kernels/cuda/net.c), on the CPU with the host twin.
 *
 * On a GPU a bucket's ncclAllReduce goes as soon as backward has enqueued
 * the last gradient of the bucket (gb_cuda_dp_grad_done). A gradient
 * written after its bucket went, or a parameter never reported, corrupts
 * the average only with two or more ranks: with one rank the in-place
 * average is the value itself, so the one-GPU runs cannot see it. Held here,
 * for the real ResNet-50 plan (3-4-6-3 blocks, narrow) and bucket sizes from
 * one tensor a bucket to one bucket a group:
 *   - the spans the buckets are cut from (gb_plan_grad_spans, as
 *     gb_cuda_dp_new uses them) hold every parameter exactly once, in its
 *     group (A: conv and fc weights; B: BN parameters and the fc bias),
 *     inside the group's slab, at its place in the master slab;
 *   - every parameter's gradient is written once per step (the ops that
 *     write them: conv_bwd_filter(_pre), bn_bwd, head; GB_CUDA_FUSE=1: the
 *     fused step's) before it is reported, and
 *     is reported once; nothing changes a reported gradient before the
 *     update (its values at the report equal those the update reads);
 *   - every bucket of both groups is complete during backward (none waits
 *     for the step's end), and they complete in the same order in every
 *     step (the order the ranks launch their collectives in).
 */
#include "buckets.h"
#include "check.h"
#include "host_exec.h"
#include "model.h"
#include "net.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 1024
#define MAXB 1024

static struct {
    const gb_exec_ops_t *real;
    const gb_plan_t *p;
    gb_buckets_t *bk[2];
    int *pend[2];
    size_t *off[2], *cnt[2];
    int written[MAXT], reported[MAXT];
    float *at_report; /* each reported tensor's gradient as it was when reported */
    float *now;
    int order[2 * MAXB][2]; /* (group, bucket) in the order they became complete */
    int n_order;
    int first_order[2 * MAXB][2];
    int n_first;
    int updates;
    char why[256]; /* the first violation */
} S;

static void violation(const char *fmt, int t) {
    if (!S.why[0]) snprintf(S.why, sizeof(S.why), fmt, t);
}

static void wrote(int t) {
    if (t < 0 || t >= MAXT) return;
    if (S.reported[t]) violation("tensor %d written after it was reported", t);
    S.written[t]++;
}

/* the element range of tensor t in the master slab [A | B] */
static void span_of(int t, size_t *lo, size_t *n) {
    int gi = S.cnt[0][t] ? 0 : 1;
    *lo = S.off[gi][t] + (gi ? S.p->n_a : 0);
    *n = S.cnt[gi][t];
}

static int t_conv_bwd_filter(gb_exec_t *ex, int ci, const void *x, const void *dy) {
    wrote(S.p->convs[ci].tensor);
    return S.real->conv_bwd_filter(ex, ci, x, dy);
}

static int t_conv_bwd_filter_pre(gb_exec_t *ex, int ci, const void *x, int pre_bn, const void *dy) {
    wrote(S.p->convs[ci].tensor);
    return S.real->conv_bwd_filter_pre(ex, ci, x, pre_bn, dy);
}

static int t_bn_bwd(gb_exec_t *ex, int bi, const void *x, const void *y, const void *dy, void *dx,
                    void *dz) {
    wrote(S.p->bns[bi].g.weight);
    wrote(S.p->bns[bi].g.bias);
    return S.real->bn_bwd(ex, bi, x, y, dy, dx, dz);
}

static int t_head(gb_exec_t *ex, const void *feat, void *dfeat) {
    wrote(S.p->m->fc_w);
    wrote(S.p->m->fc_b);
    return S.real->head(ex, feat, dfeat);
}

static int t_step_begin(gb_exec_t *ex) {
    memset(S.written, 0, sizeof(S.written));
    memset(S.reported, 0, sizeof(S.reported));
    for (int gi = 0; gi < 2; gi++)
        gb_buckets_reset(S.bk[gi], S.pend[gi]);
    S.n_order = 0;
    return S.real->step_begin(ex);
}

static int t_grad_done(gb_exec_t *ex, int t) {
    const gb_model_t *m = S.p->m;
    if (t < 0 || t >= m->n_tensors || !m->tensors[t].is_param) {
        violation("tensor %d reported, not a parameter", t);
        return 0;
    }
    if (S.reported[t]++) violation("tensor %d reported twice in a step", t);
    if (S.written[t] != 1) violation("tensor %d reported before its gradient was written once", t);
    float scale;
    if (S.real->store_grads(ex, S.now, &scale)) return -1;
    size_t lo, n;
    span_of(t, &lo, &n);
    memcpy(S.at_report + lo, S.now + lo, n * sizeof(float));
    for (int gi = 0; gi < 2; gi++) {
        int b = gb_buckets_done(S.bk[gi], S.pend[gi], t);
        if (b >= 0 && S.n_order < 2 * MAXB) {
            S.order[S.n_order][0] = gi;
            S.order[S.n_order][1] = b;
            S.n_order++;
        }
    }
    return 0;
}

static int t_update(gb_exec_t *ex) {
    const gb_model_t *m = S.p->m;
    for (int t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].is_param && S.reported[t] != 1)
            violation("tensor %d not reported before the update", t);
    float scale;
    if (S.real->store_grads(ex, S.now, &scale)) return -1;
    for (int t = 0; t < m->n_tensors; t++) {
        if (!m->tensors[t].is_param) continue;
        size_t lo, n;
        span_of(t, &lo, &n);
        if (memcmp(S.at_report + lo, S.now + lo, n * sizeof(float)) != 0)
            violation("tensor %d's gradient changed after it was reported", t);
    }
    if (S.n_order != S.bk[0]->n + S.bk[1]->n)
        violation("%d bucket(s) not complete during backward", S.bk[0]->n + S.bk[1]->n - S.n_order);
    if (S.updates++ == 0) {
        memcpy(S.first_order, S.order, sizeof(S.order));
        S.n_first = S.n_order;
    } else if (S.n_first != S.n_order ||
               memcmp(S.first_order, S.order, (size_t)S.n_order * sizeof(S.order[0])) != 0) {
        violation("the buckets completed in another order in step %d", S.updates);
    }
    return S.real->update(ex);
}

/* the spans: every parameter once, in its group, inside the group's slab */
static void check_spans(const gb_plan_t *p) {
    const gb_model_t *m = p->m;
    size_t total[2] = {p->n_a, p->n_b};
    for (int t = 0; t < m->n_tensors; t++) {
        int in0 = S.cnt[0][t] > 0, in1 = S.cnt[1][t] > 0;
        if (!m->tensors[t].is_param) {
            CHECKF(!in0 && !in1, "tensor %d is no parameter but has a span", t);
            continue;
        }
        CHECKF(in0 + in1 == 1, "parameter %d in %d groups", t, in0 + in1);
        int gi = in1;
        CHECKF(gi == p->params[t].group, "parameter %d in group %d, the plan says %d", t, gi,
               p->params[t].group);
        CHECKF(S.cnt[gi][t] >= m->tensors[t].numel, "parameter %d: %zu elements for %zu", t,
               S.cnt[gi][t], m->tensors[t].numel);
        CHECKF(S.off[gi][t] + S.cnt[gi][t] <= total[gi], "parameter %d past its group's end", t);
        CHECKF(S.off[gi][t] + (gi ? p->n_a : 0) == p->params[t].off,
               "parameter %d at %zu of group %d, the master slab's %zu", t, S.off[gi][t], gi,
               p->params[t].off);
    }
}

static void run(size_t bucket_elems) {
    memset(&S, 0, sizeof(S));
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, 16); /* the real depth: 3-4-6-3 blocks */
    mc.base_width = 2;
    mc.n_classes = 5;
    char err[GB_ERR_LEN];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    CHECK(m->n_tensors <= MAXT);
    gb_train_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.precision = GB_PREC_FP32;
    cfg.model = mc;
    cfg.batch = 2;
    cfg.devices = 1;
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    gb_plan_t *p = gb_plan_new(m, 2, sizeof(double), GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    S.p = p;
    size_t total[2] = {p->n_a, p->n_b};
    for (int gi = 0; gi < 2; gi++) {
        S.off[gi] = calloc((size_t)m->n_tensors, sizeof(size_t));
        S.cnt[gi] = calloc((size_t)m->n_tensors, sizeof(size_t));
        CHECK(S.off[gi] && S.cnt[gi]);
        gb_plan_grad_spans(p, gi, S.off[gi], S.cnt[gi]);
        S.bk[gi] = gb_buckets_new(S.off[gi], S.cnt[gi], m->n_tensors, total[gi], bucket_elems, err,
                                  sizeof(err));
        CHECKF(S.bk[gi], "%s", err);
        CHECK(S.bk[gi]->n <= MAXB);
        S.pend[gi] = calloc(gb_buckets_pending_len(S.bk[gi]), sizeof(int));
        CHECK(S.pend[gi]);
    }
    check_spans(p);
    S.at_report = calloc(p->n_a + p->n_b, sizeof(float));
    S.now = calloc(p->n_a + p->n_b, sizeof(float));
    CHECK(S.at_report && S.now);
    gb_exec_t *ex = gb_host_exec_new(p, &cfg, err, sizeof(err));
    CHECKF(ex, "%s", err);
    const char *fe = getenv("GB_CUDA_FUSE");
    CHECK(ex->fused == (fe && !strcmp(fe, "1"))); /* the step asked for is the one checked */
    static gb_exec_ops_t ops;
    S.real = ex->ops;
    ops = *ex->ops;
    ops.conv_bwd_filter = t_conv_bwd_filter;
    ops.conv_bwd_filter_pre = t_conv_bwd_filter_pre;
    ops.bn_bwd = t_bn_bwd;
    ops.head = t_head;
    ops.step_begin = t_step_begin;
    ops.grad_done = t_grad_done;
    ops.update = t_update;
    ex->ops = &ops;
    int nb[2] = {S.bk[0]->n, S.bk[1]->n};
    gb_buckets_t *bk[2] = {S.bk[0], S.bk[1]};
    gb_net_t *net = gb_net_new(&p, &ex, 0, 1, err, sizeof(err));
    CHECKF(net, "%s", err);
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc(m->n_buffers * sizeof(float));
    CHECK(params && buffers);
    gb_model_init(m, params, buffers, 3);
    CHECKF(gb_net_set_state(net, params, buffers, 0, err, sizeof(err)) == 0, "%s", err);
    CHECKF(gb_net_set_batch(net, NULL, NULL, err, sizeof(err)) == 0, "%s", err);
    for (int s = 0; s < 2; s++) {
        gb_step_out_t out;
        CHECKF(gb_net_step(net, &out, err, sizeof(err)) == 0, "step %d: %s", s, err);
    }
    CHECKF(S.updates == 2, "%d updates", S.updates);
    CHECKF(!S.why[0], "buckets of %zu elements (%d + %d buckets): %s", bucket_elems, nb[0], nb[1],
           S.why);
    printf("buckets of %zu elements: %d (group A) + %d (group B), all complete during backward, "
           "in one order; first: %c%d, last: %c%d\n",
           bucket_elems, nb[0], nb[1], S.first_order[0][0] ? 'B' : 'A', S.first_order[0][1],
           S.first_order[S.n_first - 1][0] ? 'B' : 'A', S.first_order[S.n_first - 1][1]);
    gb_net_destroy(&net);
    for (int gi = 0; gi < 2; gi++) {
        gb_buckets_destroy(&bk[gi]);
        free(S.pend[gi]);
        free(S.off[gi]);
        free(S.cnt[gi]);
    }
    free(S.at_report);
    free(S.now);
    free(params);
    free(buffers);
    gb_model_destroy(&m);
}

int main(void) {
    run(1);               /* one tensor a bucket */
    run(300);             /* a few tensors a bucket */
    run((size_t)1 << 40); /* one bucket a group */
    printf("test_grad_buckets: ok\n");
    return 0;
}
