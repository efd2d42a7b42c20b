/* model.c - builds the ResNet description of model.h: shapes, the tensor
 * table with torchvision names, slab offsets and FLOP counts. Pure C, no
 * backend, so the CPU engine, the CUDA engine and the tests share it. */
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builder state: grows the tensor table and the two slabs. */
typedef struct builder {
    gb_model_t *m;
    int cap;
    int failed;
} builder_t;

static int add_tensor(builder_t *b, gb_role_t role, int ndim, const int *shape, const char *fmt,
                      ...) {
    gb_model_t *m = b->m;
    if (m->n_tensors == b->cap) {
        int cap = b->cap ? b->cap * 2 : 64;
        gb_tensor_info_t *t = realloc(m->tensors, (size_t)cap * sizeof(*t));
        if (!t) {
            b->failed = 1;
            return -1;
        }
        m->tensors = t;
        b->cap = cap;
    }
    gb_tensor_info_t *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof(*t));
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(t->name)) {
        b->failed = 1;
        return -1;
    }
    t->role = role;
    t->is_param = role != GB_ROLE_BN_RMEAN && role != GB_ROLE_BN_RVAR;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    if (t->is_param) {
        t->offset = m->n_params;
        m->n_params += t->numel;
    } else {
        t->offset = m->n_buffers;
        m->n_buffers += t->numel;
    }
    return m->n_tensors++;
}

static int out_size(int in, int k, int s, int p) {
    return (in + 2 * p - k) / s + 1;
}

static gb_conv_t make_conv(builder_t *b, const char *name, int c, int k, int ks, int stride,
                           int pad, int ih, int iw) {
    gb_conv_t cv = {.c = c, .k = k, .kh = ks, .kw = ks, .stride = stride, .pad = pad};
    cv.ih = ih;
    cv.iw = iw;
    cv.oh = out_size(ih, ks, stride, pad);
    cv.ow = out_size(iw, ks, stride, pad);
    int shape[4] = {k, c, ks, ks};
    cv.w = add_tensor(b, GB_ROLE_CONV_W, 4, shape, "%s.weight", name);
    double macs = (double)k * cv.oh * cv.ow * c * ks * ks;
    b->m->fwd_flops += 2.0 * macs;
    return cv;
}

static gb_bn_t make_bn(builder_t *b, const char *name, int c, int h, int w) {
    gb_bn_t bn = {.c = c, .h = h, .w = w, .weight = -1, .bias = -1, .rmean = -1, .rvar = -1};
    if (!b->m->cfg.bn) return bn;
    int shape[1] = {c};
    bn.weight = add_tensor(b, GB_ROLE_BN_W, 1, shape, "%s.weight", name);
    bn.bias = add_tensor(b, GB_ROLE_BN_B, 1, shape, "%s.bias", name);
    bn.rmean = add_tensor(b, GB_ROLE_BN_RMEAN, 1, shape, "%s.running_mean", name);
    bn.rvar = add_tensor(b, GB_ROLE_BN_RVAR, 1, shape, "%s.running_var", name);
    return bn;
}

void gb_model_config_resnet50(gb_model_config_t *cfg, int image_size) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->image_h = cfg->image_w = image_size;
    cfg->n_classes = 1000;
    cfg->layers[0] = 3;
    cfg->layers[1] = 4;
    cfg->layers[2] = 6;
    cfg->layers[3] = 3;
    cfg->base_width = 64;
    cfg->bn = 1;
}

gb_model_t *gb_model_new(const gb_model_config_t *cfg, char *err, size_t errlen) {
    int total = 0;
    for (int i = 0; i < GB_MAX_STAGES; i++) {
        if (cfg->layers[i] < 1 || cfg->layers[i] > 32) {
            snprintf(err, errlen, "stage %d has %d blocks (1..32 allowed)", i + 1, cfg->layers[i]);
            return NULL;
        }
        total += cfg->layers[i];
    }
    if (total > GB_MAX_BLOCKS) {
        snprintf(err, errlen, "%d blocks, at most %d", total, GB_MAX_BLOCKS);
        return NULL;
    }
    if (cfg->image_h < 1 || cfg->image_w < 1 || cfg->image_h > 4096 || cfg->image_w > 4096) {
        snprintf(err, errlen, "image size %dx%d out of range (1..4096)", cfg->image_h,
                 cfg->image_w);
        return NULL;
    }
    if (cfg->n_classes < 1 || cfg->n_classes > 100000) {
        snprintf(err, errlen, "class count %d out of range (1..100000)", cfg->n_classes);
        return NULL;
    }
    if (cfg->base_width < 1 || cfg->base_width > 1024) {
        snprintf(err, errlen, "base width %d out of range (1..1024)", cfg->base_width);
        return NULL;
    }
    gb_model_t *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    m->in_c = 3;
    builder_t b = {.m = m};

    int w0 = cfg->base_width;
    m->stem = make_conv(&b, "conv1", 3, w0, 7, 2, 3, cfg->image_h, cfg->image_w);
    m->stem_bn = make_bn(&b, "bn1", w0, m->stem.oh, m->stem.ow);
    m->pool_k = 3;
    m->pool_stride = 2;
    m->pool_pad = 1;
    m->pool_ih = m->stem.oh;
    m->pool_iw = m->stem.ow;
    m->pool_oh = out_size(m->pool_ih, 3, 2, 1);
    m->pool_ow = out_size(m->pool_iw, 3, 2, 1);

    int c = w0, h = m->pool_oh, w = m->pool_ow;
    for (int s = 0; s < GB_MAX_STAGES; s++) {
        int planes = w0 << s;   /* 64, 128, 256, 512 */
        int out_c = planes * 4; /* Bottleneck.expansion */
        for (int i = 0; i < cfg->layers[s]; i++) {
            gb_block_t *blk = &m->blocks[m->n_blocks];
            memset(blk, 0, sizeof(*blk));
            int pn = snprintf(blk->prefix, sizeof(blk->prefix), "layer%d.%d", s + 1, i);
            if (pn < 0 || (size_t)pn >= sizeof(blk->prefix)) b.failed = 1;
            blk->stage = s;
            blk->index = i;
            blk->stride = (i == 0 && s > 0) ? 2 : 1;
            blk->in_c = c;
            blk->mid_c = planes;
            blk->out_c = out_c;
            blk->ih = h;
            blk->iw = w;
            char nm[GB_NAME_LEN];
            snprintf(nm, sizeof(nm), "%s.conv1", blk->prefix);
            blk->conv1 = make_conv(&b, nm, c, planes, 1, 1, 0, h, w);
            snprintf(nm, sizeof(nm), "%s.bn1", blk->prefix);
            blk->bn1 = make_bn(&b, nm, planes, h, w);
            snprintf(nm, sizeof(nm), "%s.conv2", blk->prefix);
            blk->conv2 = make_conv(&b, nm, planes, planes, 3, blk->stride, 1, h, w);
            int oh = blk->conv2.oh, ow = blk->conv2.ow;
            snprintf(nm, sizeof(nm), "%s.bn2", blk->prefix);
            blk->bn2 = make_bn(&b, nm, planes, oh, ow);
            snprintf(nm, sizeof(nm), "%s.conv3", blk->prefix);
            blk->conv3 = make_conv(&b, nm, planes, out_c, 1, 1, 0, oh, ow);
            snprintf(nm, sizeof(nm), "%s.bn3", blk->prefix);
            blk->bn3 = make_bn(&b, nm, out_c, oh, ow);
            blk->has_down = (i == 0); /* stride != 1 or in_c != out_c: true for every first block */
            if (blk->has_down) {
                snprintf(nm, sizeof(nm), "%s.downsample.0", blk->prefix);
                blk->down = make_conv(&b, nm, c, out_c, 1, blk->stride, 0, h, w);
                snprintf(nm, sizeof(nm), "%s.downsample.1", blk->prefix);
                blk->down_bn = make_bn(&b, nm, out_c, blk->down.oh, blk->down.ow);
            }
            blk->oh = oh;
            blk->ow = ow;
            c = out_c;
            h = oh;
            w = ow;
            m->n_blocks++;
        }
    }
    m->feat_c = c;
    m->feat_h = h;
    m->feat_w = w;
    int fw[2] = {cfg->n_classes, c}, fb[1] = {cfg->n_classes};
    m->fc_w = add_tensor(&b, GB_ROLE_FC_W, 2, fw, "fc.weight");
    m->fc_b = add_tensor(&b, GB_ROLE_FC_B, 1, fb, "fc.bias");
    m->fwd_flops += 2.0 * cfg->n_classes * (double)c;
    /* Backward: data gradient and weight gradient each cost one forward,
     * except the stem, whose input needs no gradient. */
    double stem_flops = 2.0 * w0 * m->stem.oh * m->stem.ow * 3.0 * 49.0;
    m->train_flops = 3.0 * m->fwd_flops - stem_flops;
    m->conv_out = (size_t)m->stem.k * (size_t)(m->stem.oh * m->stem.ow);
    for (int i = 0; i < m->n_blocks; i++) {
        const gb_block_t *k = &m->blocks[i];
        const gb_conv_t *cv[4] = {&k->conv1, &k->conv2, &k->conv3, &k->down};
        for (int j = 0; j < (k->has_down ? 4 : 3); j++)
            m->conv_out += (size_t)cv[j]->k * (size_t)(cv[j]->oh * cv[j]->ow);
    }

    if (b.failed) {
        snprintf(err, errlen, "out of memory or name too long building the model");
        gb_model_destroy(&m);
        return NULL;
    }
    return m;
}

void gb_model_destroy(gb_model_t **self_p) {
    if (!self_p || !*self_p) return;
    free((*self_p)->tensors);
    free(*self_p);
    *self_p = NULL;
}

int gb_model_find(const gb_model_t *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

void gb_rng_fill_normal(gb_rng_t *r, float *dst, size_t n, double scale) {
    enum { CHUNK = 1 << 16 }; /* pairs of uniforms: 1 MiB */
    double *u = n > CHUNK ? malloc(2 * CHUNK * sizeof(double)) : NULL;
    if (!u) {
        for (size_t j = 0; j < n; j++)
            dst[j] = (float)(scale * gb_rng_normal(r));
        return;
    }
    for (size_t j0 = 0; j0 < n; j0 += CHUNK) {
        long k = n - j0 < CHUNK ? (long)(n - j0) : CHUNK;
        for (long i = 0; i < 2 * k; i++)
            u[i] = gb_rng_uniform(r);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (long i = 0; i < k; i++)
            dst[j0 + (size_t)i] = (float)(scale * gb_normal_from(u[2 * i], u[2 * i + 1]));
    }
    free(u);
}

void gb_model_init(const gb_model_t *m, float *params, float *buffers, uint64_t seed) {
    gb_rng_t r;
    gb_rng_seed(&r, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        float *dst = (t->is_param ? params : buffers) + t->offset;
        switch (t->role) {
        case GB_ROLE_CONV_W: {
            /* kaiming_normal_(mode="fan_out", nonlinearity="relu") */
            double fan_out = (double)t->shape[0] * t->shape[2] * t->shape[3];
            double sd = sqrt(2.0 / fan_out);
            gb_rng_fill_normal(&r, dst, t->numel, sd);
            break;
        }
        case GB_ROLE_FC_W:
        case GB_ROLE_FC_B: {
            double bound = 1.0 / sqrt((double)m->feat_c);
            for (size_t j = 0; j < t->numel; j++)
                dst[j] = (float)((2.0 * gb_rng_uniform(&r) - 1.0) * bound);
            break;
        }
        case GB_ROLE_BN_W:
        case GB_ROLE_BN_RVAR:
            for (size_t j = 0; j < t->numel; j++)
                dst[j] = 1.0f;
            break;
        case GB_ROLE_BN_B:
        case GB_ROLE_BN_RMEAN:
            for (size_t j = 0; j < t->numel; j++)
                dst[j] = 0.0f;
            break;
        }
    }
}

void gb_model_synth_batch(const gb_model_t *m, int n, uint64_t seed, float *images,
                          int32_t *labels) {
    gb_rng_t r;
    gb_rng_seed(&r, seed ^ 0x5eed0da7aULL);
    size_t count = (size_t)n * 3 * m->cfg.image_h * m->cfg.image_w;
    gb_rng_fill_normal(&r, images, count, 1.0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)(gb_rng_next(&r) % (uint64_t)m->cfg.n_classes);
}
