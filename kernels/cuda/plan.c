/* plan.c - see plan.h. Pure C: no CUDA, so the host twin and CPU tests use
 * the very same layouts as the GPU executor. */
#include "plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 256

static size_t align_up(size_t x, size_t a) {
    return (x + a - 1) / a * a;
}

static int add_act(gb_plan_t *p, int cap, int h, int w, int c) {
    if (p->n_acts >= cap) return -1;
    gb_plan_act_t *a = &p->acts[p->n_acts];
    a->n = p->n;
    a->h = h;
    a->w = w;
    a->c = c;
    a->numel = (size_t)p->n * (size_t)h * (size_t)w * (size_t)c;
    a->off = p->arena_bytes;
    p->arena_bytes = align_up(p->arena_bytes + a->numel * p->esize, ARENA_ALIGN);
    if (a->numel > p->max_act_numel) p->max_act_numel = a->numel;
    return p->n_acts++;
}

static int add_conv(gb_plan_t *p, const gb_conv_t *g, const char *name, int x, int y, int c_int,
                    int dgrad) {
    gb_plan_conv_t *cv = &p->convs[p->n_convs];
    memset(cv, 0, sizeof(*cv));
    cv->g = *g;
    cv->c_int = c_int;
    cv->tensor = g->w;
    cv->w_numel = (size_t)g->k * g->kh * g->kw * c_int;
    cv->x = x;
    cv->y = y;
    cv->dgrad = dgrad;
    snprintf(cv->name, sizeof(cv->name), "%s", name);
    return p->n_convs++;
}

static int add_bn(gb_plan_t *p, const gb_bn_t *g, const char *name, int x, int y, int z, int relu) {
    gb_plan_bn_t *b = &p->bns[p->n_bns];
    memset(b, 0, sizeof(*b));
    b->g = *g;
    b->x = x;
    b->y = y;
    b->z = z;
    b->relu = relu;
    b->count = (long)p->n * g->h * g->w;
    b->stat_off = p->n_stats;
    p->n_stats += 2 * (size_t)g->c;
    if (g->c > p->max_bn_c) p->max_bn_c = g->c;
    snprintf(b->name, sizeof(b->name), "%s", name);
    return p->n_bns++;
}

int gb_plan_stem_c(gb_precision_t prec, const char *env, char *err, size_t errlen) {
    if (!env) return prec == GB_PREC_BF16 ? 8 : GB_PLAN_STEM_C;
    if (strcmp(env, "4") == 0) return 4;
    if (strcmp(env, "8") == 0) return 8;
    snprintf(err, errlen, "GB_CUDA_STEM_C=%s: 4 or 8 (unset: 8 for bf16, 4 otherwise)", env);
    return -1;
}

int gb_plan_fuse(const char *env, char *err, size_t errlen) {
    if (!env || strcmp(env, "0") == 0) return 0;
    if (strcmp(env, "1") == 0) return 1;
    snprintf(err, errlen, "GB_CUDA_FUSE=%s: 0 or 1 (1: the fused step, fp16 only)", env);
    return -1;
}

int gb_plan_fused_role(const gb_plan_t *p, int ci, int *pre_bn) {
    if (pre_bn) *pre_bn = -1;
    for (int i = 0; i < p->n_blocks; i++) {
        const gb_plan_block_t *b = &p->blocks[i];
        if (ci == b->conv2 || ci == b->conv3) {
            if (pre_bn) *pre_bn = ci == b->conv2 ? b->bn1 : b->bn2;
            return 1;
        }
        if (ci == b->conv1 || ci == b->down) return 0;
    }
    return -1;
}

gb_plan_t *gb_plan_new(const gb_model_t *m, int n, size_t esize, int stem_c, char *err,
                       size_t errlen) {
    if (!m->cfg.bn) {
        snprintf(err, errlen,
                 "the CUDA backend needs batch norm: the no-BN variant (bn = 0) runs on the CPU "
                 "backend only");
        return NULL;
    }
    if (n < 1) {
        snprintf(err, errlen, "batch %d < 1", n);
        return NULL;
    }
    if (esize != 2 && esize != 4 && esize != 8) {
        snprintf(err, errlen, "activation element size %zu (2, 4 or 8)", esize);
        return NULL;
    }
    if (stem_c != 4 && stem_c != 8) {
        snprintf(err, errlen, "stem channels %d (4 or 8)", stem_c);
        return NULL;
    }
    gb_plan_t *p = calloc(1, sizeof(*p));
    int cap = 8 + 9 * m->n_blocks;
    if (p) p->acts = calloc((size_t)cap, sizeof(*p->acts));
    if (p) p->params = calloc((size_t)m->n_tensors, sizeof(*p->params));
    if (!p || !p->acts || !p->params) {
        snprintf(err, errlen, "out of memory");
        gb_plan_destroy(&p);
        return NULL;
    }
    p->m = m;
    p->n = n;
    p->esize = esize;
    p->stem_c = stem_c;

    /* activations and layers, in forward order */
    p->x0 = add_act(p, cap, m->cfg.image_h, m->cfg.image_w, p->stem_c);
    p->c0 = add_act(p, cap, m->stem.oh, m->stem.ow, m->stem.k);
    p->a0 = add_act(p, cap, m->stem.oh, m->stem.ow, m->stem.k);
    p->p0 = add_act(p, cap, m->pool_oh, m->pool_ow, m->stem.k);
    p->stem_conv = add_conv(p, &m->stem, "conv1", p->x0, p->c0, p->stem_c, 0);
    p->stem_bn = add_bn(p, &m->stem_bn, "bn1", p->c0, p->a0, -1, 1);
    int x = p->p0;
    char nm[GB_NAME_LEN]; /* prefix (< 16) + ".downsample.0" always fits */
    for (int i = 0; i < m->n_blocks; i++) {
        const gb_block_t *b = &m->blocks[i];
        gb_plan_block_t *pb = &p->blocks[i];
        pb->x = x;
        pb->t1 = add_act(p, cap, b->ih, b->iw, b->mid_c);
        pb->u1 = add_act(p, cap, b->ih, b->iw, b->mid_c);
        pb->t2 = add_act(p, cap, b->oh, b->ow, b->mid_c);
        pb->u2 = add_act(p, cap, b->oh, b->ow, b->mid_c);
        pb->t3 = add_act(p, cap, b->oh, b->ow, b->out_c);
        pb->td = pb->sd = -1;
        if (b->has_down) {
            pb->td = add_act(p, cap, b->oh, b->ow, b->out_c);
            pb->sd = add_act(p, cap, b->oh, b->ow, b->out_c);
        }
        pb->y = add_act(p, cap, b->oh, b->ow, b->out_c);
        snprintf(nm, sizeof(nm), "%s.conv1", b->prefix);
        pb->conv1 = add_conv(p, &b->conv1, nm, x, pb->t1, b->in_c, 1);
        snprintf(nm, sizeof(nm), "%s.bn1", b->prefix);
        pb->bn1 = add_bn(p, &b->bn1, nm, pb->t1, pb->u1, -1, 1);
        snprintf(nm, sizeof(nm), "%s.conv2", b->prefix);
        pb->conv2 = add_conv(p, &b->conv2, nm, pb->u1, pb->t2, b->mid_c, 1);
        snprintf(nm, sizeof(nm), "%s.bn2", b->prefix);
        pb->bn2 = add_bn(p, &b->bn2, nm, pb->t2, pb->u2, -1, 1);
        snprintf(nm, sizeof(nm), "%s.conv3", b->prefix);
        pb->conv3 = add_conv(p, &b->conv3, nm, pb->u2, pb->t3, b->mid_c, 1);
        pb->down = pb->bnd = -1;
        if (b->has_down) {
            snprintf(nm, sizeof(nm), "%s.downsample.0", b->prefix);
            pb->down = add_conv(p, &b->down, nm, x, pb->td, b->in_c, 1);
            snprintf(nm, sizeof(nm), "%s.downsample.1", b->prefix);
            pb->bnd = add_bn(p, &b->down_bn, nm, pb->td, pb->sd, -1, 0);
        }
        snprintf(nm, sizeof(nm), "%s.bn3", b->prefix);
        pb->bn3 = add_bn(p, &b->bn3, nm, pb->t3, pb->y, b->has_down ? pb->sd : x, 1);
        x = pb->y;
    }
    p->n_blocks = m->n_blocks;
    p->feat = add_act(p, cap, 1, 1, m->feat_c);
    if (p->feat < 0) {
        snprintf(err, errlen, "internal: activation table overflow");
        gb_plan_destroy(&p);
        return NULL;
    }
    /* cuDNN's legacy tensor descriptors hold sizes and strides in int: a
     * tensor of 2^31 elements or more cannot be described (ResNet-50 at 224
     * reaches it at batch 2675, in the stem's output) */
    for (int i = 0; i < p->n_acts; i++) {
        if (p->acts[i].numel > (size_t)INT_MAX) {
            snprintf(err, errlen,
                     "an activation of %zu elements (batch %d, %dx%dx%d) exceeds 2^31 - 1, the "
                     "limit of cuDNN's tensor descriptors: use a smaller batch",
                     p->acts[i].numel, n, p->acts[i].h, p->acts[i].w, p->acts[i].c);
            gb_plan_destroy(&p);
            return NULL;
        }
    }
    for (int i = 0; i < p->n_bns; i++) {
        if (p->bns[i].count < 2) {
            snprintf(err, errlen,
                     "%s normalizes over %ld value(s) per channel (batch %d, %dx%d): training "
                     "batch norm needs at least 2, as in torch",
                     p->bns[i].name, p->bns[i].count, n, p->bns[i].g.h, p->bns[i].g.w);
            gb_plan_destroy(&p);
            return NULL;
        }
    }
    /* gradient scratch buffers: the largest activation each */
    p->grad_numel = p->max_act_numel;
    for (int i = 0; i < GB_PLAN_NGRAD; i++) {
        p->grad_off[i] = p->arena_bytes;
        p->arena_bytes = align_up(p->arena_bytes + p->grad_numel * esize, ARENA_ALIGN);
    }

    /* parameters: group A then group B, model order inside each */
    size_t off = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        if (ti->role != GB_ROLE_CONV_W && ti->role != GB_ROLE_FC_W) continue;
        gb_plan_param_t *pp = &p->params[t];
        pp->group = 0;
        pp->off = off;
        if (ti->role == GB_ROLE_CONV_W) {
            pp->layout = GB_PLAN_KRSC;
            pp->c_int = (t == m->stem.w) ? p->stem_c : ti->shape[1];
            off += align_up((size_t)ti->shape[0] * ti->shape[2] * ti->shape[3] * pp->c_int,
                            GB_PLAN_ALIGN);
        } else {
            pp->layout = GB_PLAN_PLAIN;
            off += align_up(ti->numel, GB_PLAN_ALIGN);
        }
    }
    p->n_a = off;
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        if (ti->role == GB_ROLE_CONV_W || ti->role == GB_ROLE_FC_W) continue;
        gb_plan_param_t *pp = &p->params[t];
        pp->group = 1;
        pp->off = off;
        pp->layout = GB_PLAN_PLAIN;
        off += align_up(ti->numel, GB_PLAN_ALIGN);
    }
    p->n_b = off - p->n_a;
    for (int i = 0; i < p->n_convs; i++)
        p->convs[i].w_off = p->params[p->convs[i].tensor].off;
    for (int i = 0; i < p->n_bns; i++) {
        gb_plan_bn_t *b = &p->bns[i];
        b->gamma_off = p->params[b->g.weight].off;
        b->beta_off = p->params[b->g.bias].off;
        b->rmean_off = m->tensors[b->g.rmean].offset;
        b->rvar_off = m->tensors[b->g.rvar].offset;
    }
    p->fc_w_off = p->params[m->fc_w].off;
    p->fc_b_off = p->params[m->fc_b].off;
    return p;
}

void gb_plan_destroy(gb_plan_t **self_p) {
    if (!self_p || !*self_p) return;
    free((*self_p)->acts);
    free((*self_p)->params);
    free(*self_p);
    *self_p = NULL;
}

size_t gb_plan_grad_b_byte_off(const gb_plan_t *p, size_t a_esize) {
    return align_up(p->n_a * a_esize, 256);
}

size_t gb_plan_grad_bytes(const gb_plan_t *p, size_t a_esize) {
    return gb_plan_grad_b_byte_off(p, a_esize) + p->n_b * sizeof(float);
}

void gb_oihw_to_krsc(const float *src, int k, int c, int r, int s, int c_int, float *dst) {
    for (int ik = 0; ik < k; ik++)
        for (int ir = 0; ir < r; ir++)
            for (int is = 0; is < s; is++)
                for (int ic = 0; ic < c_int; ic++) {
                    size_t d = (((size_t)ik * r + ir) * s + is) * c_int + ic;
                    dst[d] = ic < c ? src[(((size_t)ik * c + ic) * r + ir) * s + is] : 0.0f;
                }
}

void gb_krsc_to_oihw(const float *src, int k, int c, int r, int s, int c_int, float *dst,
                     float scale) {
    for (int ik = 0; ik < k; ik++)
        for (int ic = 0; ic < c; ic++)
            for (int ir = 0; ir < r; ir++)
                for (int is = 0; is < s; is++)
                    dst[(((size_t)ik * c + ic) * r + ir) * s + is] =
                        src[(((size_t)ik * r + ir) * s + is) * c_int + ic] * scale;
}

void gb_plan_params_to_internal(const gb_plan_t *p, const float *canon, float *internal) {
    const gb_model_t *m = p->m;
    memset(internal, 0, (p->n_a + p->n_b) * sizeof(float));
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        const gb_plan_param_t *pp = &p->params[t];
        if (pp->layout == GB_PLAN_KRSC)
            gb_oihw_to_krsc(canon + ti->offset, ti->shape[0], ti->shape[1], ti->shape[2],
                            ti->shape[3], pp->c_int, internal + pp->off);
        else
            memcpy(internal + pp->off, canon + ti->offset, ti->numel * sizeof(float));
    }
}

void gb_plan_params_from_internal(const gb_plan_t *p, const float *internal, float *canon,
                                  float scale) {
    const gb_model_t *m = p->m;
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        const gb_plan_param_t *pp = &p->params[t];
        if (pp->layout == GB_PLAN_KRSC)
            gb_krsc_to_oihw(internal + pp->off, ti->shape[0], ti->shape[1], ti->shape[2],
                            ti->shape[3], pp->c_int, canon + ti->offset, scale);
        else
            for (size_t i = 0; i < ti->numel; i++)
                canon[ti->offset + i] = internal[pp->off + i] * scale;
    }
}

void gb_plan_grad_spans(const gb_plan_t *p, int group, size_t *off, size_t *cnt) {
    const gb_model_t *m = p->m;
    for (int t = 0; t < m->n_tensors; t++)
        off[t] = cnt[t] = 0;
    if (group == 0) {
        for (int i = 0; i < p->n_convs; i++) {
            off[p->convs[i].tensor] = p->convs[i].w_off;
            cnt[p->convs[i].tensor] = p->convs[i].w_numel;
        }
        off[m->fc_w] = p->fc_w_off;
        cnt[m->fc_w] = (size_t)m->cfg.n_classes * m->feat_c;
        return;
    }
    for (int i = 0; i < p->n_bns; i++) {
        const gb_plan_bn_t *b = &p->bns[i];
        off[b->g.weight] = b->gamma_off - p->n_a;
        cnt[b->g.weight] = (size_t)b->g.c;
        off[b->g.bias] = b->beta_off - p->n_a;
        cnt[b->g.bias] = (size_t)b->g.c;
    }
    off[m->fc_b] = p->fc_b_off - p->n_a;
    cnt[m->fc_b] = (size_t)m->cfg.n_classes;
}

uint32_t gb_plan_fingerprint(const gb_plan_t *p, uint32_t extra) {
    uint32_t h = 2166136261u;
    const uint64_t v[] = {p->n_a,
                          p->n_b,
                          (uint64_t)p->stem_c,
                          p->esize,
                          (uint64_t)p->n,
                          (uint64_t)p->n_convs,
                          (uint64_t)p->n_bns,
                          extra};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        h = gb_fnv1a32_u64(h, v[i]);
    for (int t = 0; t < p->m->n_tensors; t++)
        if (p->m->tensors[t].is_param) {
            h = gb_fnv1a32_u64(h, p->params[t].off);
            h = gb_fnv1a32_u64(h, (uint64_t)p->params[t].group);
        }
    return h & 0x3fffffffu;
}
