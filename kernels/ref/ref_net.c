/* ref_net.c - the reference ResNet of ref_net.h.
 *
 * The graph is torchvision's, unrolled by hand:
 *   stem:  conv1 -> bn1 -> relu -> maxpool 3/2/1
 *   block: u1 = relu(bn1(conv1(x)))  u2 = relu(bn2(conv2(u1)))  u3 = bn3(conv3(u2))
 *          s = downsample.1(downsample.0(x)) or x;  y = relu(u3 + s)
 *   head:  global average pool -> fc -> softmax cross-entropy (mean)
 * A "unit" is conv -> BN -> optional ReLU; without BN (cfg.bn == 0) its BN
 * output is its conv output (same arrays), without ReLU its output is its BN
 * output. Every tensor keeps a gradient array of its own shape, so backward is
 * the forward read bottom-up with no buffer juggling.
 */
#include "ref_net.h"
#include "ref_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tensor {
    double *v; /* value */
    double *g; /* gradient of the loss, same shape */
    size_t numel;
} tensor_t;

typedef struct unit {
    const gb_conv_t *conv;
    const gb_bn_t *bn; /* NULL when the model has no BN */
    int relu;
    gb_ref_conv_t shape;
    tensor_t z;         /* conv output (N, K, P, Q) */
    tensor_t u;         /* BN output; aliases z without BN */
    tensor_t a;         /* unit output; aliases u without ReLU */
    double *mean, *var; /* (K) batch statistics of the last forward; NULL without BN */
} unit_t;

typedef struct block {
    const gb_block_t *desc;
    unit_t c1, c2, c3, down; /* down only when desc->has_down */
    tensor_t out;            /* relu(c3 + shortcut), (N, out_c, oh, ow) */
    double *dx_short;        /* gradient reaching the block input through down, (N, in_c, ih, iw) */
} block_t;

struct gb_ref_net {
    const gb_model_t *m;
    int batch;
    unit_t stem;
    gb_ref_pool_t pool;
    tensor_t pooled; /* (N, w0, pool_oh, pool_ow) */
    block_t blocks[GB_MAX_BLOCKS];
    tensor_t feat;   /* (N, feat_c) after global average pool */
    tensor_t logits; /* (N, classes) */
    double **allocs; /* every array above, for destroy */
    int n_allocs, cap_allocs;
};

/* ---- allocation --------------------------------------------------------- */

static double *net_alloc(gb_ref_net_t *net, size_t count) {
    if (net->n_allocs == net->cap_allocs) {
        int cap = net->cap_allocs ? 2 * net->cap_allocs : 64;
        double **a = realloc(net->allocs, sizeof(*a) * (size_t)cap);
        if (!a) return NULL;
        net->allocs = a;
        net->cap_allocs = cap;
    }
    double *p = calloc(count ? count : 1, sizeof(double));
    if (p) net->allocs[net->n_allocs++] = p;
    return p;
}

static int tensor_alloc(gb_ref_net_t *net, tensor_t *t, size_t numel) {
    t->numel = numel;
    t->v = net_alloc(net, numel);
    t->g = net_alloc(net, numel);
    return t->v && t->g ? 0 : -1;
}

/* Set up a unit for conv (and bn when the model has one) on batch n. */
static int unit_init(gb_ref_net_t *net, unit_t *u, const gb_conv_t *conv, const gb_bn_t *bn,
                     int relu, char *err, size_t errlen) {
    const gb_model_t *m = net->m;
    u->conv = conv;
    u->bn = m->cfg.bn ? bn : NULL;
    u->relu = relu;
    if (gb_ref_conv_init(&u->shape, net->batch, conv->c, conv->ih, conv->iw, conv->k, conv->kh,
                         conv->kw, conv->stride, conv->pad) != 0 ||
        u->shape.p != conv->oh || u->shape.q != conv->ow) {
        snprintf(err, errlen, "conv %s: inconsistent shape", m->tensors[conv->w].name);
        return -1;
    }
    size_t numel = (size_t)net->batch * conv->k * conv->oh * conv->ow;
    if (tensor_alloc(net, &u->z, numel) != 0) goto oom;
    u->u = u->z;
    if (u->bn) {
        if ((long)net->batch * conv->oh * conv->ow < 2) {
            snprintf(err, errlen,
                     "%s: batch %d x %dx%d gives one value per channel; batch norm needs at "
                     "least 2 in training",
                     m->tensors[u->bn->weight].name, net->batch, conv->oh, conv->ow);
            return -1;
        }
        if (tensor_alloc(net, &u->u, numel) != 0) goto oom;
        u->mean = net_alloc(net, (size_t)conv->k);
        u->var = net_alloc(net, (size_t)conv->k);
        if (!u->mean || !u->var) goto oom;
    }
    u->a = u->u;
    if (relu && tensor_alloc(net, &u->a, numel) != 0) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

gb_ref_net_t *gb_ref_net_new(const gb_model_t *m, int batch, char *err, size_t errlen) {
    if (batch < 1) {
        snprintf(err, errlen, "batch %d < 1", batch);
        return NULL;
    }
    gb_ref_net_t *net = calloc(1, sizeof(*net));
    if (!net) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    net->m = m;
    net->batch = batch;
    if (unit_init(net, &net->stem, &m->stem, &m->stem_bn, 1, err, errlen) != 0) goto err;
    if (gb_ref_pool_init(&net->pool, batch, m->stem.k, m->pool_ih, m->pool_iw, m->pool_k, m->pool_k,
                         m->pool_stride, m->pool_pad) != 0 ||
        net->pool.p != m->pool_oh || net->pool.q != m->pool_ow) {
        snprintf(err, errlen, "max pool: inconsistent shape");
        goto err;
    }
    if (tensor_alloc(net, &net->pooled, (size_t)batch * m->stem.k * m->pool_oh * m->pool_ow) != 0)
        goto oom;
    for (int i = 0; i < m->n_blocks; i++) {
        const gb_block_t *d = &m->blocks[i];
        block_t *b = &net->blocks[i];
        b->desc = d;
        if (unit_init(net, &b->c1, &d->conv1, &d->bn1, 1, err, errlen) != 0 ||
            unit_init(net, &b->c2, &d->conv2, &d->bn2, 1, err, errlen) != 0 ||
            unit_init(net, &b->c3, &d->conv3, &d->bn3, 0, err, errlen) != 0)
            goto err;
        if (d->has_down) {
            if (unit_init(net, &b->down, &d->down, &d->down_bn, 0, err, errlen) != 0) goto err;
            b->dx_short = net_alloc(net, (size_t)batch * d->in_c * d->ih * d->iw);
            if (!b->dx_short) goto oom;
        }
        if (tensor_alloc(net, &b->out, (size_t)batch * d->out_c * d->oh * d->ow) != 0) goto oom;
    }
    if (tensor_alloc(net, &net->feat, (size_t)batch * m->feat_c) != 0 ||
        tensor_alloc(net, &net->logits, (size_t)batch * m->cfg.n_classes) != 0)
        goto oom;
    return net;
oom:
    snprintf(err, errlen, "out of memory");
err:
    gb_ref_net_destroy(&net);
    return NULL;
}

void gb_ref_net_destroy(gb_ref_net_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_ref_net_t *net = *self_p;
    for (int i = 0; i < net->n_allocs; i++)
        free(net->allocs[i]);
    free(net->allocs);
    free(net);
    *self_p = NULL;
}

void gb_ref_widen(const float *src, double *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = (double)src[i];
}

/* ---- forward and backward of the pieces --------------------------------- */

/* Parameter or buffer tensor `idx` inside its slab. */
static const double *param(const gb_ref_net_t *net, const double *params, int idx) {
    return params + net->m->tensors[idx].offset;
}
static double *slot(const gb_ref_net_t *net, double *slab, int idx) {
    return slab + net->m->tensors[idx].offset;
}

static void unit_fwd(const gb_ref_net_t *net, unit_t *u, const double *in, const double *params,
                     double *buffers) {
    gb_ref_conv2d_fwd(&u->shape, in, param(net, params, u->conv->w), u->z.v);
    if (u->bn) {
        int hw = u->shape.p * u->shape.q;
        /* unit_init made sure that batch * hw >= 2, the only failure of both calls */
        (void)gb_ref_bn_fwd(u->shape.n, u->shape.k, hw, u->z.v, param(net, params, u->bn->weight),
                            param(net, params, u->bn->bias), GB_REF_BN_EPS, u->u.v, u->mean,
                            u->var);
        if (buffers)
            (void)gb_ref_bn_update_running(u->shape.k, (long)u->shape.n * hw, GB_REF_BN_MOMENTUM,
                                           u->mean, u->var, slot(net, buffers, u->bn->rmean),
                                           slot(net, buffers, u->bn->rvar));
    }
    if (u->relu) gb_ref_relu_fwd(u->a.numel, u->u.v, u->a.v);
}

/* From u->a.g: the unit's parameter gradients into grads, and the gradient of
 * its input into din when din is not NULL. */
static void unit_bwd(const gb_ref_net_t *net, unit_t *u, const double *in, const double *params,
                     double *grads, double *din) {
    if (u->relu) gb_ref_relu_bwd(u->a.numel, u->a.v, u->a.g, u->u.g);
    if (u->bn)
        gb_ref_bn_bwd(u->shape.n, u->shape.k, u->shape.p * u->shape.q, u->z.v, u->u.g,
                      param(net, params, u->bn->weight), u->mean, u->var, GB_REF_BN_EPS, u->z.g,
                      slot(net, grads, u->bn->weight), slot(net, grads, u->bn->bias));
    gb_ref_conv2d_bwd_weights(&u->shape, in, u->z.g, slot(net, grads, u->conv->w));
    if (din) gb_ref_conv2d_bwd_data(&u->shape, u->z.g, param(net, params, u->conv->w), din);
}

static void block_fwd(const gb_ref_net_t *net, block_t *b, const double *x, const double *params,
                      double *buffers) {
    unit_fwd(net, &b->c1, x, params, buffers);
    unit_fwd(net, &b->c2, b->c1.a.v, params, buffers);
    unit_fwd(net, &b->c3, b->c2.a.v, params, buffers);
    const double *shortcut = x;
    if (b->desc->has_down) {
        unit_fwd(net, &b->down, x, params, buffers);
        shortcut = b->down.a.v;
    }
    gb_ref_add_relu_fwd(b->out.numel, b->c3.a.v, shortcut, b->out.v);
}

/* From b->out.g: parameter gradients, and the block input's gradient into dx. */
static void block_bwd(const gb_ref_net_t *net, block_t *b, const double *x, const double *params,
                      double *grads, double *dx) {
    /* Both summands of the join receive the same gradient. */
    gb_ref_add_relu_bwd(b->out.numel, b->out.v, b->out.g, b->c3.a.g);
    unit_bwd(net, &b->c3, b->c2.a.v, params, grads, b->c2.a.g);
    unit_bwd(net, &b->c2, b->c1.a.v, params, grads, b->c1.a.g);
    unit_bwd(net, &b->c1, x, params, grads, dx);
    size_t in_numel = (size_t)net->batch * b->desc->in_c * b->desc->ih * b->desc->iw;
    if (b->desc->has_down) {
        memcpy(b->down.a.g, b->c3.a.g, sizeof(double) * b->down.a.numel);
        unit_bwd(net, &b->down, x, params, grads, b->dx_short);
        gb_ref_add_fwd(in_numel, dx, b->dx_short, dx);
    } else {
        gb_ref_add_fwd(in_numel, dx, b->c3.a.g, dx); /* identity shortcut: same shape */
    }
}

/* ---- the whole network -------------------------------------------------- */

int gb_ref_net_loss(gb_ref_net_t *net, const double *params, double *buffers, const double *images,
                    const int32_t *labels, double *loss, double *grads, double *dimages, char *err,
                    size_t errlen) {
    const gb_model_t *m = net->m;
    int n = net->batch, classes = m->cfg.n_classes;
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes) {
            snprintf(err, errlen, "label %d of image %d is outside [0, %d)", labels[i], i, classes);
            return -1;
        }

    unit_fwd(net, &net->stem, images, params, buffers);
    gb_ref_maxpool_fwd(&net->pool, net->stem.a.v, net->pooled.v);
    const double *x = net->pooled.v;
    for (int i = 0; i < m->n_blocks; i++) {
        block_fwd(net, &net->blocks[i], x, params, buffers);
        x = net->blocks[i].out.v;
    }
    int hw = m->feat_h * m->feat_w;
    gb_ref_gap_fwd(n, m->feat_c, hw, x, net->feat.v);
    gb_ref_fc_fwd(n, m->feat_c, classes, net->feat.v, param(net, params, m->fc_w),
                  param(net, params, m->fc_b), net->logits.v);
    /* Its one failure, a label out of range, was ruled out above. */
    (void)gb_ref_softmax_xent(n, classes, net->logits.v, labels, loss,
                              grads ? net->logits.g : NULL);
    if (!grads) return 0;

    gb_ref_fc_bwd(n, m->feat_c, classes, net->feat.v, param(net, params, m->fc_w), net->logits.g,
                  net->feat.g, slot(net, grads, m->fc_w), slot(net, grads, m->fc_b));
    block_t *last = &net->blocks[m->n_blocks - 1];
    gb_ref_gap_bwd(n, m->feat_c, hw, net->feat.g, last->out.g);
    for (int i = m->n_blocks - 1; i >= 0; i--) {
        tensor_t *in = i > 0 ? &net->blocks[i - 1].out : &net->pooled;
        block_bwd(net, &net->blocks[i], in->v, params, grads, in->g);
    }
    gb_ref_maxpool_bwd(&net->pool, net->stem.a.v, net->pooled.g, net->stem.a.g);
    unit_bwd(net, &net->stem, images, params, grads, dimages);
    return 0;
}

int gb_ref_net_train_step(gb_ref_net_t *net, double *params, double *buffers, double *mom,
                          int64_t *step, const double *images, const int32_t *labels, double lr,
                          double momentum, double weight_decay, double *loss, double *grads,
                          char *err, size_t errlen) {
    size_t np = net->m->n_params;
    double *g = grads ? grads : malloc(sizeof(double) * (np ? np : 1));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    /* Labels are checked before anything is written, so a failure leaves the
     * running statistics untouched. */
    if (gb_ref_net_loss(net, params, buffers, images, labels, loss, g, NULL, err, errlen) != 0)
        goto done;
    gb_ref_sgd_step(np, params, g, mom, lr, momentum, weight_decay, *step == 0);
    (*step)++;
    rc = 0;
done:
    if (g != grads) free(g);
    return rc;
}
