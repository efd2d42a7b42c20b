/* net.c - see net.h. The order of the ops below is the ResNet training step;
 * gradient buffers G0..G4 of the plan are reused as scratch:
 *   Gy: gradient of the current block's output, Gx: of its input (the two
 *   swap per block), Ga/Gb: inside a block, Gd: the projection branch.
 * A block's input gradient gets the residual's share first (bn3's dz, or the
 * projection conv's data gradient) and the conv1 data gradient accumulated
 * on top (accumulate = 1). */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GY = 0, GX = 1, GA = 2, GB = 3, GD = 4 };

struct gb_net {
    gb_plan_t *plan;
    gb_exec_t *ex;
    int want_graph;
    int graph_state; /* 0 not tried, 1 ready, -1 failed or unavailable */
    long steps;
    int64_t nbt;
    uint64_t seed;
    float *stage; /* n_a + n_b floats */
};

gb_net_t *gb_net_new(gb_plan_t **plan_p, gb_exec_t **ex_p, int want_graph, uint64_t seed, char *err,
                     size_t errlen) {
    gb_net_t *net = calloc(1, sizeof(*net));
    if (!net) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    net->plan = *plan_p;
    net->ex = *ex_p;
    *plan_p = NULL;
    *ex_p = NULL;
    net->want_graph = want_graph;
    net->seed = seed;
    net->stage = malloc((net->plan->n_a + net->plan->n_b) * sizeof(float));
    if (!net->stage) {
        snprintf(err, errlen, "out of memory (%zu parameters)", net->plan->n_a + net->plan->n_b);
        gb_net_destroy(&net);
        return NULL;
    }
    return net;
fail:
    if (*ex_p) (*ex_p)->ops->destroy(ex_p);
    gb_plan_destroy(plan_p);
    return NULL;
}

void gb_net_destroy(gb_net_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_net_t *net = *self_p;
    if (net->ex) net->ex->ops->destroy(&net->ex);
    gb_plan_destroy(&net->plan);
    free(net->stage);
    free(net);
    *self_p = NULL;
}

gb_exec_t *gb_net_exec(gb_net_t *net) {
    return net->ex;
}

const gb_plan_t *gb_net_plan(const gb_net_t *net) {
    return net->plan;
}

static int fail_from_exec(gb_net_t *net, char *err, size_t errlen) {
    snprintf(err, errlen, "%s", net->ex->err[0] ? net->ex->err : "executor failed");
    return -1;
}

int gb_net_set_state(gb_net_t *net, const float *params, const float *buffers, int64_t nbt,
                     char *err, size_t errlen) {
    gb_plan_params_to_internal(net->plan, params, net->stage);
    if (net->ex->ops->load_params(net->ex, net->stage, buffers))
        return fail_from_exec(net, err, errlen);
    net->nbt = nbt;
    return 0;
}

int gb_net_get_state(gb_net_t *net, float *params, float *buffers, int64_t *nbt, char *err,
                     size_t errlen) {
    if (net->ex->ops->store_params(net->ex, net->stage, buffers))
        return fail_from_exec(net, err, errlen);
    gb_plan_params_from_internal(net->plan, net->stage, params, 1.0f);
    *nbt = net->nbt;
    return 0;
}

int gb_net_get_grads(gb_net_t *net, float *grads, char *err, size_t errlen) {
    float scale = 1.0f;
    if (net->ex->ops->store_grads(net->ex, net->stage, &scale))
        return fail_from_exec(net, err, errlen);
    if (!(scale > 0.0f)) {
        snprintf(err, errlen, "loss scale %g is not positive", (double)scale);
        return -1;
    }
    /* the scale is a power of two, so 1/scale is exact */
    gb_plan_params_from_internal(net->plan, net->stage, grads, 1.0f / scale);
    return 0;
}

int gb_net_set_batch(gb_net_t *net, const float *images, const int32_t *labels, char *err,
                     size_t errlen) {
    if ((images == NULL) != (labels == NULL)) {
        snprintf(err, errlen, "images and labels must both be given or both be NULL");
        return -1;
    }
    if (labels) {
        int classes = net->plan->m->cfg.n_classes;
        for (int i = 0; i < net->plan->n; i++)
            if (labels[i] < 0 || labels[i] >= classes) {
                snprintf(err, errlen, "label %d of image %d outside [0, %d)", (int)labels[i], i,
                         classes);
                return -1;
            }
    }
    if (net->ex->ops->load_batch(net->ex, images, labels, net->seed))
        return fail_from_exec(net, err, errlen);
    return 0;
}

#define RUN(call)                                                                                  \
    do {                                                                                           \
        if (call) return -1;                                                                       \
    } while (0)

/* a parameter's gradient is enqueued: data parallel executors start its
 * bucket's all-reduce once the bucket is complete */
#define DONE(t)                                                                                    \
    do {                                                                                           \
        if (o->grad_done) RUN(o->grad_done(ex, (t)));                                              \
    } while (0)
#define CONV_DONE(ci) DONE(p->convs[ci].tensor)
#define BN_DONE(bi)                                                                                \
    do {                                                                                           \
        DONE(p->bns[bi].g.weight);                                                                 \
        DONE(p->bns[bi].g.bias);                                                                   \
    } while (0)

#define ACT(id) gb_exec_act(ex, (id))
#define GRAD(g) gb_exec_grad(ex, (g))

/* With ex->fused (the fused step), inside a block no batch norm is a pass of
 * its own: conv1 and the projection write their output and its per-channel
 * sums (conv_stats); bn1, bn2 finalize from those and are applied (with the
 * ReLU) in the prologue of conv2 and conv3, so u1 and u2 are never stored;
 * bn3 (and the projection's bnd) are applied with the residual and ReLU by
 * bn_apply, which writes the block's output (sd is never stored either).
 * Backward: bn3 as in the plain step (its mask from the stored y); conv3's
 * and conv2's weight gradients recompute their input in the prologue; bn2,
 * bn1 and bnd take no stored output (y NULL: the mask recomputed, or none).
 * The stem and the head are the same in both steps. */
static int block_fwd(gb_exec_t *ex, const gb_plan_block_t *b) {
    const gb_exec_ops_t *o = ex->ops;
    if (ex->fused) {
        RUN(o->conv_stats(ex, b->conv1, ACT(b->x), -1, ACT(b->t1), b->bn1));
        RUN(o->bn_finalize(ex, b->bn1));
        RUN(o->conv_stats(ex, b->conv2, ACT(b->t1), b->bn1, ACT(b->t2), b->bn2));
        RUN(o->bn_finalize(ex, b->bn2));
        RUN(o->conv_stats(ex, b->conv3, ACT(b->t2), b->bn2, ACT(b->t3), b->bn3));
        RUN(o->bn_finalize(ex, b->bn3));
        if (b->down < 0) return o->bn_apply(ex, b->bn3, ACT(b->t3), ACT(b->x), -1, ACT(b->y));
        RUN(o->conv_stats(ex, b->down, ACT(b->x), -1, ACT(b->td), b->bnd));
        RUN(o->bn_finalize(ex, b->bnd));
        return o->bn_apply(ex, b->bn3, ACT(b->t3), ACT(b->td), b->bnd, ACT(b->y));
    }
    RUN(o->conv_fwd(ex, b->conv1, ACT(b->x), ACT(b->t1)));
    RUN(o->bn_fwd(ex, b->bn1, ACT(b->t1), NULL, ACT(b->u1)));
    RUN(o->conv_fwd(ex, b->conv2, ACT(b->u1), ACT(b->t2)));
    RUN(o->bn_fwd(ex, b->bn2, ACT(b->t2), NULL, ACT(b->u2)));
    RUN(o->conv_fwd(ex, b->conv3, ACT(b->u2), ACT(b->t3)));
    int z = b->x;
    if (b->down >= 0) {
        RUN(o->conv_fwd(ex, b->down, ACT(b->x), ACT(b->td)));
        RUN(o->bn_fwd(ex, b->bnd, ACT(b->td), NULL, ACT(b->sd)));
        z = b->sd;
    }
    return o->bn_fwd(ex, b->bn3, ACT(b->t3), ACT(z), ACT(b->y));
}

/* the weight gradient of conv ci, whose input is the output of batch norm
 * bn (stored as act in the plain step; recomputed from t in the fused one) */
static int wgrad_after_bn(gb_exec_t *ex, int ci, int bn, int t, int act, void *dy) {
    if (ex->fused) return ex->ops->conv_bwd_filter_pre(ex, ci, ACT(t), bn, dy);
    return ex->ops->conv_bwd_filter(ex, ci, ACT(act), dy);
}

int gb_net_enqueue(gb_net_t *net) {
    gb_exec_t *ex = net->ex;
    const gb_exec_ops_t *o = ex->ops;
    const gb_plan_t *p = net->plan;
    int fz = ex->fused;
#define STORED(id) (fz ? NULL : ACT(id)) /* an output the fused step does not store */

    /* forward */
    RUN(o->conv_fwd(ex, p->stem_conv, ACT(p->x0), ACT(p->c0)));
    RUN(o->bn_fwd(ex, p->stem_bn, ACT(p->c0), NULL, ACT(p->a0)));
    RUN(o->maxpool_fwd(ex, ACT(p->a0), ACT(p->p0)));
    for (int i = 0; i < p->n_blocks; i++)
        RUN(block_fwd(ex, &p->blocks[i]));
    int last = p->blocks[p->n_blocks - 1].y;
    RUN(o->avgpool_fwd(ex, ACT(last), ACT(p->feat)));
    RUN(o->bn_running(ex));

    /* loss and backward */
    int gy = GY, gx = GX;
    RUN(o->head(ex, ACT(p->feat), GRAD(GA)));
    DONE(p->m->fc_w);
    DONE(p->m->fc_b);
    RUN(o->avgpool_bwd(ex, GRAD(GA), GRAD(gy)));
    for (int i = p->n_blocks - 1; i >= 0; i--) {
        const gb_plan_block_t *b = &p->blocks[i];
        void *dy = GRAD(gy), *dx = GRAD(gx);
        RUN(o->bn_bwd(ex, b->bn3, ACT(b->t3), ACT(b->y), dy, GRAD(GA),
                      b->down >= 0 ? GRAD(GD) : dx));
        BN_DONE(b->bn3);
        RUN(wgrad_after_bn(ex, b->conv3, b->bn2, b->t2, b->u2, GRAD(GA)));
        CONV_DONE(b->conv3);
        RUN(o->conv_bwd_data(ex, b->conv3, GRAD(GA), GRAD(GB), 0));
        RUN(o->bn_bwd(ex, b->bn2, ACT(b->t2), STORED(b->u2), GRAD(GB), GRAD(GA), NULL));
        BN_DONE(b->bn2);
        RUN(wgrad_after_bn(ex, b->conv2, b->bn1, b->t1, b->u1, GRAD(GA)));
        CONV_DONE(b->conv2);
        RUN(o->conv_bwd_data(ex, b->conv2, GRAD(GA), GRAD(GB), 0));
        RUN(o->bn_bwd(ex, b->bn1, ACT(b->t1), STORED(b->u1), GRAD(GB), GRAD(GA), NULL));
        BN_DONE(b->bn1);
        RUN(o->conv_bwd_filter(ex, b->conv1, ACT(b->x), GRAD(GA)));
        CONV_DONE(b->conv1);
        if (b->down >= 0) {
            /* bnd has no ReLU of its own: its gradient is bn3's dz */
            RUN(o->bn_bwd(ex, b->bnd, ACT(b->td), STORED(b->sd), GRAD(GD), GRAD(GB), NULL));
            BN_DONE(b->bnd);
            RUN(o->conv_bwd_filter(ex, b->down, ACT(b->x), GRAD(GB)));
            CONV_DONE(b->down);
            RUN(o->conv_bwd_data(ex, b->down, GRAD(GB), dx, 0));
        }
        /* dx already holds the residual's share: accumulate conv1's on top */
        RUN(o->conv_bwd_data(ex, b->conv1, GRAD(GA), dx, 1));
        int t = gy;
        gy = gx;
        gx = t;
    }
    RUN(o->maxpool_bwd(ex, GRAD(gy), GRAD(GA)));
    RUN(o->bn_bwd(ex, p->stem_bn, ACT(p->c0), ACT(p->a0), GRAD(GA), GRAD(GB), NULL));
    BN_DONE(p->stem_bn);
    RUN(o->conv_bwd_filter(ex, p->stem_conv, ACT(p->x0), GRAD(GB)));
    CONV_DONE(p->stem_conv);

    /* optimizer */
    RUN(o->update(ex));
#undef STORED
    return 0;
}
#undef ACT
#undef GRAD

int gb_net_step(gb_net_t *net, gb_step_out_t *out, char *err, size_t errlen) {
    gb_exec_t *ex = net->ex;
    const gb_exec_ops_t *o = ex->ops;
    memset(out, 0, sizeof(*out));
    ex->err[0] = 0;
    int done = 0;
    if (net->graph_state == 0 && net->steps >= 1) {
        /* the first step ran eagerly: lazy loading and library allocations
         * have happened, so the next one can be captured */
        net->graph_state = -1;
        if (net->want_graph) {
            int have = 0;
            if (o->capture_begin && o->capture_begin(ex) == 0) {
                int rc = gb_net_enqueue(net);
                have = o->capture_end(ex, rc == 0) == 0;
            }
            ex->err[0] = 0; /* a failed capture is recorded by the executor, not fatal */
            /* every rank graphs, or none does (one replaying its graph while
             * a peer runs eagerly would wait in NCCL for ever) */
            if (o->graph_agree) {
                have = o->graph_agree(ex, have);
                if (have < 0) return fail_from_exec(net, err, errlen);
            }
            if (have) net->graph_state = 1;
        }
    }
    if (net->graph_state == 1) {
        if (o->replay(ex, out)) return fail_from_exec(net, err, errlen);
        done = 1;
    }
    if (!done) {
        if (o->step_begin(ex) || gb_net_enqueue(net) || o->step_end(ex, out))
            return fail_from_exec(net, err, errlen);
    }
    net->steps++;
    net->nbt++;
    return 0;
}

int gb_net_report(gb_net_t *net, gb_replica_report_t *rep, char *err, size_t errlen) {
    memset(rep, 0, sizeof(*rep));
    if (net->ex->ops->report(net->ex, rep)) return fail_from_exec(net, err, errlen);
    return 0;
}
