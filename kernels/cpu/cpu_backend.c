/* cpu_backend.c - ResNet training step on oneDNN (see cpu_backend.h).
 *
 * create() builds, in order: the oneDNN context (thread count first), every
 * op from the model description with formats flowing producer to consumer
 * (nChw16c throughout on AVX-512), the internal slab layout, then one arena
 * (mmap, transparent huge pages asked for) holding the slabs, what backward
 * reads, a small pool of buffers shared by all blocks, the weight-copy buffer
 * and the scratchpad. set_state and set_batch write every page once; a step
 * allocates and first-touches nothing.
 *
 * Per bottleneck block (x: input, y: output), forward keeps what backward
 * reads: t1 = conv1(x), t2 = conv2(a1), t3 = conv3(a2), y = relu(bn3(t3) + s)
 * with s = x or bn_d(td), td = down(x), plus BN statistics and ReLU masks;
 * a1 = bnrelu1(t1) and a2 = bnrelu2(t2) are forward temporaries (in D3, D2),
 * rebuilt in backward just before the weight gradient that reads them.
 * Backward, with dy in buffer DY:
 *   DY <- relu'(y) DY; [projection: D1 = bn_d'(DY); dWd; DX = down'(D1)];
 *   D1 = bn3'(DY); D3 = a2; dW3; D2 = conv3'(D1); D2 <- bnrelu2'(D2);
 *   D1 = a1; dW2; D3 = conv2'(D2); D3 <- bnrelu1'(D3); dW1;
 *   identity: DX = conv1'(D3); DX += DY
 *   projection: DY' = conv1'(D3) (DY's buffer, free by then and as large as
 *   any block's input); DX += DY'.
 * DY and DX swap roles from block to block.
 *
 * The no-BN model (bn = 0): each conv is followed by its ReLU in place (or
 * nothing), its output kept; backward takes the ReLU's gradient from it.
 *
 * Data parallel (a gb_comm_t in create): the gradient slab is cut into
 * buckets (buckets.h); cbn_bwd reports each weight gradient as oneDNN has
 * written it, a reducer thread (reducer.h) averages every complete bucket
 * over the replicas while backward goes on, and the update waits for it.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#include "cpu_backend.h"
#include "buckets.h"
#include "comm.h"
#include "cpu_ops.h"
#include "engine_stats.h"
#include "reducer.h"

#include <oneapi/dnnl/dnnl.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN 64

/* the shared buffers: activation gradients A, B (ping-pong), D1..D3, and W
 * for the weight copies */
enum { GA = 0, GB_ = 1, D1 = 2, D2 = 3, D3 = 4, W = 5, NBUF = 6 };

/* conv + batch norm (+ fused ReLU) with their memories */
typedef struct cbn {
    const gb_conv_t *mc;
    const gb_bn_t *mb;
    gb_cpu_conv_t conv;
    gb_cpu_bn_t bn;
    int has_bn;
    int relu;                        /* a ReLU follows (fused into bn, or `rl` without BN) */
    gb_cpu_relu_t rl;                /* no-BN model: conv -> ReLU in place (a == t) */
    dnnl_memory_t w, gw, wfwd, wbwd; /* master (param slab), gradient, compute copies */
    dnnl_memory_t t;                 /* conv output = bn input (kept for backward) */
    dnnl_memory_t a;                 /* bn output (kept; for bn3 it is the block output) */
    dnnl_memory_t ws, mean, var;     /* relu mask, batch statistics */
    dnnl_memory_t scale, shift, dscale, dshift; /* into the param and grad slabs */
    float *mean_p, *var_p;
} cbn_t;

typedef struct blk {
    const gb_block_t *mb;
    cbn_t c1, c2, c3, cd;
    gb_cpu_add_t join; /* y = relu(bn3 + shortcut) */
    gb_cpu_add_t acc;  /* DX += shortcut gradient */
    dnnl_memory_t x;   /* block input (the previous block's y, or the pool output) */
    /* views of the shared gradient buffers with this block's shapes */
    dnnl_memory_t dy, dx, d1, d2, d3, d4;
    dnnl_memory_t a1r, a2r; /* bn1/bn2 outputs rebuilt in backward (in D1, D3) */
} blk_t;

typedef struct cpu_state {
    const gb_model_t *m;
    gb_train_config_t cfg;
    int n, threads;
    dnnl_data_type_t dt;
    gb_cpu_ctx_t *ctx;
    char err_ctx[64];

    cbn_t stem;
    gb_cpu_pool_t maxpool, avgpool;
    gb_cpu_fc_t fc;
    blk_t *blocks;
    int n_blocks;
    int fc_2d;                                 /* the pooled tensor is byte-identical to (N, C) */
    gb_cpu_prim_t pool_to_f32, dpool_from_f32; /* bf16 <-> f32 around the classifier */

    /* internal slabs: parameters, gradients, momentum in master layouts */
    size_t *p_off; /* per model tensor: byte offset in the internal slab (params only) */
    const dnnl_memory_desc_t **p_md;
    size_t slab_bytes;
    float *p, *g, *mom;
    float *rbuf; /* running statistics, canonical layout (model buffer slab) */
    int64_t nbt;
    int mom_init;
    int diverged; /* an update left a parameter that is not finite */
    /* steps taken, and the reducer's figures when the timed ones began
     * (after cfg.warmup): the record's per-step all-reduce figures are the
     * timed steps' */
    long steps_done;
    gb_reducer_stats_t red_base;

    /* arena */
    void *arena;
    size_t arena_bytes, arena_used;
    int pass; /* 0: measure, 1: bind */
    size_t gbuf_bytes[NBUF];
    char *gbuf[NBUF]; /* gradient buffers A, B (ping-pong), D1..D3; W: weight copies */
    void *scratch;    /* oneDNN scratchpad, in the arena */
    size_t scratch_bytes;
    int touched;  /* the arena has been written once (set_batch) */
    int reserved; /* arena_bytes counted against the machine's memory */

    dnnl_memory_t img, pool_out, pool_ws, pooled, pooled_f32, fc_src, logits_m, dlogits_m,
        dpooled_f32, dpooled, fc_src_diff, fcw, fcwf, fcwb, fcgw, fcb, fcgb, stem_diff;
    float *logits, *dlogits;
    int32_t *labels;
    int n_reorders;

    /* data parallel (comm != NULL): the gradient slab averaged in buckets */
    gb_comm_t *comm;
    gb_buckets_t *bk;
    gb_reducer_t *red;
} cpu_state_t;

static size_t align_up(size_t x, size_t a) {
    return (x + a - 1) / a * a;
}

/* ------------------------------------------------------------ op building */

static int cbn_init(cpu_state_t *st, cbn_t *c, const gb_conv_t *mc, const gb_bn_t *mb,
                    const dnnl_memory_desc_t *src_md, int relu, int bwd_data, const char *name,
                    char *err, size_t errlen) {
    memset(c, 0, sizeof(*c));
    c->mc = mc;
    c->mb = mb;
    gb_cpu_conv_shape_t s = {st->n,  mc->c,  mc->ih,     mc->iw, mc->k,
                             mc->kh, mc->kw, mc->stride, mc->pad};
    /* Winograd (jit_wino_4x3) for every 3x3 stride-1 f32 convolution: about
     * 2x direct here at ~1e-6 relative error (docs/engine-cpu.md);
     * GB_CPU_CONV_ALGO=direct turns it off for A/B runs. */
    const char *algo = getenv("GB_CPU_CONV_ALGO");
    if (algo && algo[0] && strcmp(algo, "direct") != 0 && strcmp(algo, "auto") != 0) {
        /* a typo must not quietly measure the default */
        snprintf(err, errlen, "GB_CPU_CONV_ALGO=%.40s: 'direct', or 'auto' (the default)", algo);
        return -1;
    }
    if (gb_cpu_wino_env(err, errlen)) return -1;
    int wino = st->dt == dnnl_f32 && mc->kh == 3 && mc->kw == 3 && mc->stride == 1 &&
               !(algo && strcmp(algo, "direct") == 0);
    if (gb_cpu_conv_init(st->ctx, &c->conv, &s, src_md, st->dt, bwd_data, wino, name, err, errlen))
        return -1;
    c->has_bn = mb->weight >= 0;
    c->relu = relu;
    if (c->has_bn && gb_cpu_bn_init(st->ctx, &c->bn, &c->conv.dst_md, relu, name, err, errlen))
        return -1;
    if (!c->has_bn && relu && gb_cpu_relu_init(st->ctx, &c->rl, &c->conv.dst_md, name, err, errlen))
        return -1;
    if (c->has_bn && c->bn.count <= 1.0) {
        snprintf(err, errlen,
                 "%s: batch norm over one value per channel (batch %d, %dx%d); torch refuses it "
                 "in training too: use a batch of 2 or more, or images of at least 33x33",
                 name, st->n, mc->oh, mc->ow);
        return -1;
    }
    return 0;
}

static int build_ops(cpu_state_t *st, char *err, size_t errlen) {
    const gb_model_t *m = st->m;
    int64_t id[4] = {st->n, m->in_c, m->cfg.image_h, m->cfg.image_w};
    dnnl_memory_desc_t img_md;
    gb_cpu_md(&img_md, 4, id, st->dt, dnnl_abcd);
    if (cbn_init(st, &st->stem, &m->stem, &m->stem_bn, &img_md, 1, 0, "conv1", err, errlen))
        return -1;
    if (gb_cpu_pool_init(st->ctx, &st->maxpool, &st->stem.conv.dst_md, 1, m->pool_k, m->pool_k,
                         m->pool_stride, m->pool_pad, "maxpool", err, errlen))
        return -1;
    const dnnl_memory_desc_t *x_md = &st->maxpool.dst_md;
    char nm[64];
    for (int i = 0; i < st->n_blocks; i++) {
        blk_t *b = &st->blocks[i];
        const gb_block_t *mb = &m->blocks[i];
        b->mb = mb;
        snprintf(nm, sizeof(nm), "%s.conv1", mb->prefix);
        if (cbn_init(st, &b->c1, &mb->conv1, &mb->bn1, x_md, 1, 1, nm, err, errlen)) return -1;
        snprintf(nm, sizeof(nm), "%s.conv2", mb->prefix);
        if (cbn_init(st, &b->c2, &mb->conv2, &mb->bn2, &b->c1.conv.dst_md, 1, 1, nm, err, errlen))
            return -1;
        snprintf(nm, sizeof(nm), "%s.conv3", mb->prefix);
        if (cbn_init(st, &b->c3, &mb->conv3, &mb->bn3, &b->c2.conv.dst_md, 0, 1, nm, err, errlen))
            return -1;
        if (mb->has_down) {
            snprintf(nm, sizeof(nm), "%s.downsample", mb->prefix);
            if (cbn_init(st, &b->cd, &mb->down, &mb->down_bn, x_md, 0, 1, nm, err, errlen))
                return -1;
            if (!dnnl_memory_desc_equal(&b->cd.conv.dst_md, &b->c3.conv.dst_md)) {
                snprintf(err, errlen, "%s: shortcut and main path formats differ", mb->prefix);
                return -1;
            }
        } else if (!dnnl_memory_desc_equal(x_md, &b->c3.conv.dst_md)) {
            snprintf(err, errlen, "%s: identity shortcut format differs", mb->prefix);
            return -1;
        }
        snprintf(nm, sizeof(nm), "%s.join", mb->prefix);
        if (gb_cpu_add_init(st->ctx, &b->join, &b->c3.conv.dst_md, 1, nm, err, errlen)) return -1;
        snprintf(nm, sizeof(nm), "%s.dx", mb->prefix);
        if (gb_cpu_add_init(st->ctx, &b->acc, x_md, 0, nm, err, errlen)) return -1;
        x_md = &b->c3.conv.dst_md;
    }
    if (gb_cpu_pool_init(st->ctx, &st->avgpool, x_md, 0, m->feat_h, m->feat_w, 1, 0, "avgpool", err,
                         errlen))
        return -1;
    /* classifier input: f32 (N, C); a (N, C, 1, 1) nChw16c (AVX-512) or
     * nChw8c (AVX2) tensor with C a multiple of the block, or a plain one,
     * has exactly the bytes of (N, C) row-major */
    const dnnl_memory_desc_t *pmd = &st->avgpool.dst_md;
    int64_t pd4[4] = {st->n, m->feat_c, 1, 1}, pd2[2] = {st->n, m->feat_c};
    dnnl_memory_desc_t plain4, blk4, blk4_8, nc;
    gb_cpu_md(&plain4, 4, pd4, dnnl_f32, dnnl_abcd);
    gb_cpu_md(&blk4, 4, pd4, dnnl_f32, dnnl_aBcd16b);
    gb_cpu_md(&blk4_8, 4, pd4, dnnl_f32, dnnl_aBcd8b);
    gb_cpu_md(&nc, 2, pd2, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_t fc_src = *pmd;
    if (st->dt != dnnl_f32) {
        if (gb_cpu_reorder_init(st->ctx, &st->pool_to_f32, pmd, &plain4, "pooled", err, errlen) ||
            gb_cpu_reorder_init(st->ctx, &st->dpool_from_f32, &plain4, pmd, "dpooled", err, errlen))
            return -1;
        st->n_reorders += 2;
        fc_src = nc;
        st->fc_2d = 1;
    } else if (dnnl_memory_desc_equal(pmd, &plain4) ||
               (dnnl_memory_desc_equal(pmd, &blk4) && m->feat_c % 16 == 0) ||
               (dnnl_memory_desc_equal(pmd, &blk4_8) && m->feat_c % 8 == 0)) {
        fc_src = nc;
        st->fc_2d = 1;
    }
    if (gb_cpu_fc_init(st->ctx, &st->fc, &fc_src, m->cfg.n_classes, "fc", err, errlen)) return -1;
    return 0;
}

/* ---------------------------------------------------------- memory binding */

/* Pass 0 measures, pass 1 creates the memory at the same offset. */
static dnnl_memory_t arena_mem(cpu_state_t *st, const dnnl_memory_desc_t *md, char *err,
                               size_t errlen) {
    size_t bytes = align_up(gb_cpu_md_bytes(md), ALIGN);
    size_t off = st->arena_used;
    st->arena_used += bytes;
    if (st->pass == 0 || bytes == 0) return NULL;
    return gb_cpu_ctx_mem(st->ctx, md, (char *)st->arena + off, err, errlen);
}

static void *arena_raw(cpu_state_t *st, size_t bytes) {
    size_t off = st->arena_used;
    st->arena_used += align_up(bytes, ALIGN);
    return st->pass == 0 ? NULL : (char *)st->arena + off;
}

/* A view with descriptor md on gradient buffer `which`; pass 0 grows it. */
static dnnl_memory_t gbuf_mem(cpu_state_t *st, int which, const dnnl_memory_desc_t *md, char *err,
                              size_t errlen) {
    size_t bytes = gb_cpu_md_bytes(md);
    if (st->pass == 0) {
        if (bytes > st->gbuf_bytes[which]) st->gbuf_bytes[which] = bytes;
        return NULL;
    }
    return gb_cpu_ctx_mem(st->ctx, md, st->gbuf[which], err, errlen);
}

static dnnl_memory_t slab_mem(cpu_state_t *st, float *slab, int tensor,
                              const dnnl_memory_desc_t *md, char *err, size_t errlen) {
    if (st->pass == 0) return NULL;
    return gb_cpu_ctx_mem(st->ctx, md, (char *)slab + st->p_off[tensor], err, errlen);
}

#define MEM(dst, expr)                                                                             \
    do {                                                                                           \
        dst = (expr);                                                                              \
        if (st->pass == 1 && !dst && err[0]) return -1;                                            \
    } while (0)

/* view_out: the bn output is a view on a shared buffer (out_view; NULL in
 * pass 0) instead of its own arena space */
static int cbn_bind_v(cpu_state_t *st, cbn_t *c, int view_out, dnnl_memory_t out_view, char *err,
                      size_t errlen) {
    gb_cpu_conv_t *cv = &c->conv;
    MEM(c->w, slab_mem(st, st->p, c->mc->w, &cv->w_md, err, errlen));
    MEM(c->gw, slab_mem(st, st->g, c->mc->w, &cv->w_md, err, errlen));
    /* compute copies are made just before use, all in one shared buffer */
    if (cv->wfwd_is_master)
        c->wfwd = c->w;
    else
        MEM(c->wfwd, gbuf_mem(st, W, &cv->wfwd_md, err, errlen));
    if (cv->has_bwd_data) {
        if (cv->wbwd_is_master)
            c->wbwd = c->w;
        else
            MEM(c->wbwd, gbuf_mem(st, W, &cv->wbwd_md, err, errlen));
    }
    MEM(c->t, arena_mem(st, &cv->dst_md, err, errlen));
    if (!c->has_bn) {
        /* no BN: the ReLU (if any) runs in place, so the output is the
         * conv's, kept for backward (the next conv's input, the ReLU's mask) */
        c->a = c->t;
        return 0;
    }
    if (view_out)
        c->a = out_view;
    else
        MEM(c->a, arena_mem(st, &cv->dst_md, err, errlen));
    gb_cpu_bn_t *bn = &c->bn;
    if (bn->relu) MEM(c->ws, arena_mem(st, &bn->ws_md, err, errlen));
    c->mean_p = arena_raw(st, (size_t)bn->c * sizeof(float));
    c->var_p = arena_raw(st, (size_t)bn->c * sizeof(float));
    if (st->pass == 1) {
        MEM(c->mean, gb_cpu_ctx_mem(st->ctx, &bn->stat_md, c->mean_p, err, errlen));
        MEM(c->var, gb_cpu_ctx_mem(st->ctx, &bn->stat_md, c->var_p, err, errlen));
    }
    MEM(c->scale, slab_mem(st, st->p, c->mb->weight, &bn->stat_md, err, errlen));
    MEM(c->shift, slab_mem(st, st->p, c->mb->bias, &bn->stat_md, err, errlen));
    MEM(c->dscale, slab_mem(st, st->g, c->mb->weight, &bn->stat_md, err, errlen));
    MEM(c->dshift, slab_mem(st, st->g, c->mb->bias, &bn->stat_md, err, errlen));
    return 0;
}

static int bind(cpu_state_t *st, char *err, size_t errlen) {
    err[0] = 0;
    st->arena_used = 0;
    /* slabs first: contiguous parameter, gradient and momentum blocks */
    if (st->pass == 1) {
        st->p = (float *)st->arena;
        st->g = (float *)((char *)st->arena + st->slab_bytes);
        st->mom = (float *)((char *)st->arena + 2 * st->slab_bytes);
    }
    st->arena_used = 3 * st->slab_bytes;
    /* gradient buffers (sizes known after pass 0) */
    for (int i = 0; i < NBUF; i++) {
        char *p = arena_raw(st, st->gbuf_bytes[i]);
        if (st->pass == 1) st->gbuf[i] = p;
    }
    st->scratch = arena_raw(st, st->scratch_bytes);
    const gb_model_t *m = st->m;
    MEM(st->img, arena_mem(st, &st->stem.conv.src_md, err, errlen));
    /* the stem's BN+ReLU output feeds only the max pool, whose backward
     * needs just its indices: a forward temporary in A */
    dnnl_memory_t a0v;
    MEM(a0v, gbuf_mem(st, GA, &st->stem.conv.dst_md, err, errlen));
    if (cbn_bind_v(st, &st->stem, 1, a0v, err, errlen)) return -1;
    MEM(st->pool_out, arena_mem(st, &st->maxpool.dst_md, err, errlen));
    MEM(st->pool_ws, arena_mem(st, &st->maxpool.ws_md, err, errlen));
    dnnl_memory_t x = st->pool_out;
    /* A/B alternate: the last block's dy is in A */
    for (int i = 0; i < st->n_blocks; i++) {
        blk_t *b = &st->blocks[i];
        int dyb = ((st->n_blocks - 1 - i) % 2 == 0) ? GA : GB_, dxb = dyb == GA ? GB_ : GA;
        const dnnl_memory_desc_t *x_md =
            i == 0 ? &st->maxpool.dst_md : &st->blocks[i - 1].c3.conv.dst_md;
        b->x = x;
        /* bn1 and bn2 outputs live only while forward needs them (in D3 and
         * D2, free then); backward rebuilds them from t1, t2 and the saved
         * statistics into D1 and D3 */
        dnnl_memory_t a1v, a2v;
        MEM(a1v, gbuf_mem(st, D3, &b->c1.conv.dst_md, err, errlen));
        MEM(a2v, gbuf_mem(st, D2, &b->c2.conv.dst_md, err, errlen));
        MEM(b->a1r, gbuf_mem(st, D1, &b->c1.conv.dst_md, err, errlen));
        MEM(b->a2r, gbuf_mem(st, D3, &b->c2.conv.dst_md, err, errlen));
        if (cbn_bind_v(st, &b->c1, 1, a1v, err, errlen) ||
            cbn_bind_v(st, &b->c2, 1, a2v, err, errlen) ||
            cbn_bind_v(st, &b->c3, 0, NULL, err, errlen))
            return -1;
        MEM(b->dy, gbuf_mem(st, dyb, &b->c3.conv.dst_md, err, errlen));
        MEM(b->dx, gbuf_mem(st, dxb, x_md, err, errlen));
        MEM(b->d1, gbuf_mem(st, D1, &b->c3.conv.dst_md, err, errlen));
        MEM(b->d2, gbuf_mem(st, D2, &b->c3.conv.src_md, err, errlen));
        MEM(b->d3, gbuf_mem(st, D3, &b->c2.conv.src_md, err, errlen));
        if (b->mb->has_down) {
            /* the shortcut's bn output is a forward temporary: it lives in D1 */
            if (cbn_bind_v(st, &b->cd, 1, b->d1, err, errlen)) return -1;
            MEM(b->d4, gbuf_mem(st, dyb, x_md, err, errlen)); /* DY's buffer, input-sized */
        }
        x = b->c3.a;
    }
    /* the stem's gradient goes to whichever of A/B block 0 did not write */
    {
        int dxb0 = ((st->n_blocks - 1) % 2 == 0) ? GB_ : GA;
        MEM(st->stem_diff, gbuf_mem(st, dxb0 == GA ? GB_ : GA, &st->stem.conv.dst_md, err, errlen));
    }
    MEM(st->pooled, arena_mem(st, &st->avgpool.dst_md, err, errlen));
    int64_t pd2[2] = {st->n, m->feat_c}, pd4[4] = {st->n, m->feat_c, 1, 1};
    dnnl_memory_desc_t nc, plain4;
    gb_cpu_md(&nc, 2, pd2, dnnl_f32, dnnl_ab);
    gb_cpu_md(&plain4, 4, pd4, dnnl_f32, dnnl_abcd);
    if (st->dt != dnnl_f32) {
        char *pf = arena_raw(st, gb_cpu_md_bytes(&nc));
        char *dpf = arena_raw(st, gb_cpu_md_bytes(&nc));
        MEM(st->dpooled, arena_mem(st, &st->avgpool.dst_md, err, errlen));
        if (st->pass == 1) {
            MEM(st->pooled_f32, gb_cpu_ctx_mem(st->ctx, &plain4, pf, err, errlen));
            MEM(st->fc_src, gb_cpu_ctx_mem(st->ctx, &nc, pf, err, errlen));
            MEM(st->dpooled_f32, gb_cpu_ctx_mem(st->ctx, &plain4, dpf, err, errlen));
            MEM(st->fc_src_diff, gb_cpu_ctx_mem(st->ctx, &nc, dpf, err, errlen));
        }
    } else {
        MEM(st->dpooled, arena_mem(st, &st->avgpool.dst_md, err, errlen));
        if (st->pass == 1) {
            void *pp = NULL, *dp = NULL;
            if (dnnl_memory_get_data_handle(st->pooled, &pp) != dnnl_success ||
                dnnl_memory_get_data_handle(st->dpooled, &dp) != dnnl_success) {
                snprintf(err, errlen, "pooled memory handle");
                return -1;
            }
            MEM(st->fc_src, st->fc_2d ? gb_cpu_ctx_mem(st->ctx, &nc, pp, err, errlen) : st->pooled);
            MEM(st->fc_src_diff,
                st->fc_2d ? gb_cpu_ctx_mem(st->ctx, &nc, dp, err, errlen) : st->dpooled);
        }
    }
    gb_cpu_fc_t *fc = &st->fc;
    MEM(st->fcw, slab_mem(st, st->p, m->fc_w, &fc->w_md, err, errlen));
    MEM(st->fcgw, slab_mem(st, st->g, m->fc_w, &fc->w_md, err, errlen));
    MEM(st->fcb, slab_mem(st, st->p, m->fc_b, &fc->bias_md, err, errlen));
    MEM(st->fcgb, slab_mem(st, st->g, m->fc_b, &fc->bias_md, err, errlen));
    if (fc->wfwd_is_master)
        st->fcwf = st->fcw;
    else
        MEM(st->fcwf, arena_mem(st, &fc->wfwd_md, err, errlen));
    if (fc->wbwd_is_master)
        st->fcwb = st->fcw;
    else if (fc->wbwd_is_fwd)
        st->fcwb = st->fcwf;
    else
        MEM(st->fcwb, arena_mem(st, &fc->wbwd_md, err, errlen));
    st->logits = arena_raw(st, gb_cpu_md_bytes(&fc->dst_md));
    st->dlogits = arena_raw(st, gb_cpu_md_bytes(&fc->dst_md));
    st->labels = arena_raw(st, (size_t)st->n * sizeof(int32_t));
    if (st->pass == 1) {
        MEM(st->logits_m, gb_cpu_ctx_mem(st->ctx, &fc->dst_md, st->logits, err, errlen));
        MEM(st->dlogits_m, gb_cpu_ctx_mem(st->ctx, &fc->dst_md, st->dlogits, err, errlen));
    }
    return 0;
}

/* Internal slab layout: model tensors in order, master layouts, aligned. */
static int plan_slab(cpu_state_t *st, char *err, size_t errlen) {
    const gb_model_t *m = st->m;
    st->p_off = calloc((size_t)m->n_tensors, sizeof(*st->p_off));
    st->p_md = calloc((size_t)m->n_tensors, sizeof(*st->p_md));
    if (!st->p_off || !st->p_md) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    cbn_t *all[3 * GB_MAX_BLOCKS + GB_MAX_BLOCKS + 1];
    int na = 0;
    all[na++] = &st->stem;
    for (int i = 0; i < st->n_blocks; i++) {
        all[na++] = &st->blocks[i].c1;
        all[na++] = &st->blocks[i].c2;
        all[na++] = &st->blocks[i].c3;
        if (st->blocks[i].mb->has_down) all[na++] = &st->blocks[i].cd;
    }
    for (int k = 0; k < na; k++) {
        st->p_md[all[k]->mc->w] = &all[k]->conv.w_md;
        if (!all[k]->has_bn) continue;
        st->p_md[all[k]->mb->weight] = &all[k]->bn.stat_md;
        st->p_md[all[k]->mb->bias] = &all[k]->bn.stat_md;
    }
    st->p_md[m->fc_w] = &st->fc.w_md;
    st->p_md[m->fc_b] = &st->fc.bias_md;
    size_t off = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (!m->tensors[i].is_param) continue;
        if (!st->p_md[i]) {
            snprintf(err, errlen, "no layout for %s", m->tensors[i].name);
            return -1;
        }
        st->p_off[i] = off;
        off += align_up(gb_cpu_md_bytes(st->p_md[i]), ALIGN);
    }
    st->slab_bytes = align_up(off, 4096);
    return 0;
}

/* ----------------------------------------------------------- the backend */

/* oneDNN's instruction set here, as the record names it */
static const char *isa_name(void) {
    const char *isa;
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
        isa = "sse41";
        break;
    case dnnl_cpu_isa_avx:
        isa = "avx";
        break;
    case dnnl_cpu_isa_avx2:
        isa = "avx2";
        break;
    case dnnl_cpu_isa_avx2_vnni:
        isa = "avx2_vnni";
        break;
    case dnnl_cpu_isa_avx512_core:
        isa = "avx512_core";
        break;
    case dnnl_cpu_isa_avx512_core_vnni:
        isa = "avx512_core_vnni";
        break;
    case dnnl_cpu_isa_avx512_core_bf16:
        isa = "avx512_core_bf16";
        break;
    case dnnl_cpu_isa_avx512_core_amx:
        isa = "avx512_core_amx";
        break;
    default:
        isa = "other";
        break;
    }
    return isa;
}

static int cpu_probe(gb_backend_info_t *info, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    memset(info, 0, sizeof(*info));
    snprintf(info->device_model, sizeof(info->device_model), "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ')
                        v++;
                    v[strcspn(v, "\n")] = 0;
                    snprintf(info->device_model, sizeof(info->device_model), "%s", v);
                }
                break;
            }
        }
        fclose(f);
    }
    info->device_count = 1;
    const dnnl_version_t *v = dnnl_version();
    const char *isa = isa_name();
    snprintf(info->versions, sizeof(info->versions),
             "{\"onednn\":\"%d.%d.%d\",\"onednn_runtime\":\"%s\",\"isa\":\"%s\"}", v->major,
             v->minor, v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "openmp" : "other", isa);
    return 0;
}

/* The arenas of this process's replicas, reserved against what the machine
 * had available when the first was sized: a run whose replicas cannot all
 * fit is refused before any arena is touched (else the kernel kills the
 * process part way through the first touches, after minutes of swapping).
 * GB_CPU_MEM_CHECK=0 turns the check off (gb_mem_available). */
#define REPLICA_OVERHEAD (128u << 20) /* oneDNN's kernels, stacks, copies: ~90 MB measured */
static pthread_mutex_t reserve_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t reserved_bytes, reserved_avail;
static int reserved_n;

static int reserve_arena(size_t bytes, char *err, size_t errlen) {
    const char *what = "";
    pthread_mutex_lock(&reserve_mu);
    if (reserved_n == 0) reserved_avail = gb_mem_available(&what);
    int rc = 0;
    if (reserved_avail != UINT64_MAX && reserved_bytes + bytes > reserved_avail) {
        const double gib = 1024.0 * 1024.0 * 1024.0;
        if (reserved_n == 0)
            snprintf(
                err, errlen,
                "cpu backend: the model, its gradients, momentum and the activations of "
                "this batch need about %.2f GiB, more than the %.2f GiB this machine has available "
                "(%s): use a smaller --batch or --image-size (GB_CPU_MEM_CHECK=0 to try "
                "anyway)",
                (double)bytes / gib, (double)reserved_avail / gib,
                what[0] ? what : "when the first replica was sized");
        else
            snprintf(
                err, errlen,
                "cpu backend: %d replicas need about %.2f GiB each (model, gradients, momentum, "
                "activations), %.2f GiB together, more than the %.2f GiB this machine had "
                "available: use fewer --devices or a smaller --batch (GB_CPU_MEM_CHECK=0 to "
                "try anyway)",
                reserved_n + 1, (double)bytes / gib, (double)(reserved_bytes + bytes) / gib,
                (double)reserved_avail / gib);
        rc = -1;
    } else {
        reserved_bytes += bytes;
        reserved_n++;
    }
    pthread_mutex_unlock(&reserve_mu);
    return rc;
}

static void release_arena(size_t bytes) {
    pthread_mutex_lock(&reserve_mu);
    if (reserved_n > 0) {
        reserved_n--;
        reserved_bytes = reserved_bytes > bytes ? reserved_bytes - bytes : 0;
    }
    pthread_mutex_unlock(&reserve_mu);
}

static void cpu_destroy(void **state) {
    if (!state || !*state) return;
    cpu_state_t *st = *state;
    gb_reducer_destroy(&st->red); /* before the slab it reads goes */
    gb_buckets_destroy(&st->bk);
    gb_cpu_ctx_destroy(&st->ctx);
    if (st->arena) munmap(st->arena, st->arena_bytes);
    if (st->reserved) release_arena(st->arena_bytes + REPLICA_OVERHEAD);
    free(st->blocks);
    free(st->p_off);
    free(st->p_md);
    free(st->rbuf);
    free(st);
    *state = NULL;
}

/* The gradient slab's layout, agreed with the other processes of the job
 * (nodes, replica processes) before a bucket is reduced: oneDNN lays each
 * weight out for the instruction set (blocked by 8 on AVX2, 16 on
 * AVX-512), and our Winograd, GB_CPU_WINO and GB_CPU_CONV_ALGO choose too.
 * Slabs laid out differently added one weight's gradients to another's in
 * silence (or, with other bucket counts, desynchronised the ring until its
 * timeout blamed a peer). The digest: the buckets, and each parameter's
 * offset, size and format. */
static int same_layout(cpu_state_t *st, gb_comm_t *comm, char *err, size_t errlen) {
    const gb_model_t *m = st->m;
    uint32_t h = gb_buckets_digest(st->bk, 2166136261u);
    char fmt[96];
    for (int i = 0; i < m->n_tensors; i++) {
        if (!m->tensors[i].is_param) continue;
        gb_cpu_md_str(st->p_md[i], fmt, sizeof fmt);
        char line[160];
        int n = snprintf(line, sizeof line, "%d %zu %zu %s;", i, st->p_off[i],
                         gb_cpu_md_bytes(st->p_md[i]), fmt);
        for (int k = 0; k < n && k < (int)sizeof line; k++)
            h = (h ^ (unsigned char)line[k]) * 16777619u;
    }
    int same = gb_comm_same(comm, h, err, errlen);
    if (same < 0) return -1;
    if (same) return 0;
    const char *wino = getenv("GB_CPU_WINO"), *algo = getenv("GB_CPU_CONV_ALGO");
    snprintf(err, errlen,
             "cpu backend: the job's processes lay the gradients out differently (oneDNN lays "
             "each weight out for the instruction set; here %s, GB_CPU_WINO=%s, "
             "GB_CPU_CONV_ALGO=%s): their buckets would add one weight's gradients to "
             "another's. Run a multi-node CPU job on nodes of one instruction set, with the "
             "same settings",
             isa_name(), wino && *wino ? wino : "(unset)", algo && *algo ? algo : "(unset)");
    return -1;
}

/* Data parallel: buckets over the internal gradient slab (tensors in model
 * order, so backward fills it from the end), the reducer thread, and the
 * ring to other nodes (which includes the job's start barrier). */
static int dp_setup(cpu_state_t *st, gb_comm_t *comm, char *err, size_t errlen) {
    const gb_model_t *m = st->m;
    size_t *off = calloc((size_t)m->n_tensors, sizeof(size_t));
    size_t *cnt = calloc((size_t)m->n_tensors, sizeof(size_t));
    int rc = -1;
    if (!off || !cnt) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        if (!m->tensors[i].is_param) continue;
        off[i] = st->p_off[i] / sizeof(float);
        cnt[i] = gb_cpu_md_bytes(st->p_md[i]) / sizeof(float);
    }
    st->comm = comm;
    st->bk = gb_buckets_new(off, cnt, m->n_tensors, st->slab_bytes / sizeof(float),
                            gb_buckets_elems(st->cfg.bucket_mb, sizeof(float)), err, errlen);
    if (!st->bk) goto done;
    st->red = gb_reducer_new(comm, st->bk, st->g, err, errlen);
    if (!st->red) goto done;
    rc = gb_comm_connect(comm, err, errlen);
    if (rc == 0 && comm->world > comm->local_size) rc = same_layout(st, comm, err, errlen);
done:
    free(off);
    free(cnt);
    return rc;
}

static void warn_ref(const gb_cpu_ctx_t *ctx);

static int cpu_create_inner(const gb_model_t *m, const gb_train_config_t *cfg, int replica,
                            gb_comm_t *comm, void **state, char *err, size_t errlen) {
    *state = NULL;
    if (comm && (replica != comm->local_rank || !(cfg->bucket_mb > 0))) {
        snprintf(err, errlen, "cpu backend: replica %d with comm member %d, bucket %g MB", replica,
                 comm->local_rank, cfg->bucket_mb);
        return -1;
    }
    int has_bf16 = dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    if (cfg->precision != GB_PREC_FP32 && cfg->precision != GB_PREC_BF16) {
        snprintf(err, errlen,
                 "cpu backend: precision %s is a GPU precision; the CPU runs fp32, and bf16 "
                 "where it has avx512_bf16 (this one %s)",
                 gb_precision_name(cfg->precision), has_bf16 ? "has" : "does not");
        return -1;
    }
    if (m->cfg.image_h < 5 || m->cfg.image_w < 5) {
        /* the stem's output would be 2x2 or less, which oneDNN runs only with
         * its gemm convolution, which this engine refuses as a slow path */
        snprintf(err, errlen,
                 "cpu backend: images of at least 5x5 (this run: %dx%d); below that oneDNN has "
                 "only its slow gemm convolution for the stem",
                 m->cfg.image_h, m->cfg.image_w);
        return -1;
    }
    if (cfg->precision == GB_PREC_BF16 && !has_bf16) {
        snprintf(err, errlen, "cpu backend: bf16 needs avx512_bf16, which this CPU lacks");
        return -1;
    }
    if (cfg->batch < 1) {
        snprintf(err, errlen, "cpu backend: batch %d", cfg->batch);
        return -1;
    }
    cpu_state_t *st = calloc(1, sizeof(*st));
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st->m = m;
    st->cfg = *cfg;
    st->n = cfg->batch;
    st->threads = cfg->threads > 0 ? cfg->threads : gb_cpus_usable();
    if (st->threads < 1) st->threads = 1;
    st->dt = cfg->precision == GB_PREC_BF16 ? dnnl_bf16 : dnnl_f32;
    st->n_blocks = m->n_blocks;
    st->blocks = calloc((size_t)m->n_blocks, sizeof(*st->blocks));
    st->rbuf = calloc(m->n_buffers ? m->n_buffers : 1, sizeof(float));
    if (!st->blocks || !st->rbuf) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    st->ctx = gb_cpu_ctx_new(st->threads, GB_CPU_STRICT_GEMM, err, errlen);
    if (!st->ctx) goto fail;
    if (build_ops(st, err, errlen) || plan_slab(st, err, errlen)) goto fail;
    if (st->ctx->n_ref > 0 && replica == 0) warn_ref(st->ctx);
    st->scratch_bytes = gb_cpu_ctx_scratch_need(st->ctx);
    /* pass 0 twice: the first sizes the shared gradient buffers, the second
     * measures the arena with them in place */
    st->pass = 0;
    if (bind(st, err, errlen) || bind(st, err, errlen)) goto fail;
    st->arena_bytes = align_up(st->arena_used, 2u << 20);
    if (reserve_arena(st->arena_bytes + REPLICA_OVERHEAD, err, errlen)) goto fail;
    st->reserved = 1;
    st->arena =
        mmap(NULL, st->arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (st->arena == MAP_FAILED) {
        st->arena = NULL;
        snprintf(err, errlen, "cannot map %zu bytes for the arena", st->arena_bytes);
        goto fail;
    }
    /* 2 MiB pages where the kernel allows: fewer first touches and TLB misses */
    (void)madvise(st->arena, st->arena_bytes, MADV_HUGEPAGE);
    /* every page is touched once, in set_state and set_batch, before the
     * first step: not here, so the driver's canonical copies can be freed
     * before the arena fills in (lower peak memory) */
    st->pass = 1;
    if (bind(st, err, errlen)) goto fail;
    if (gb_cpu_ctx_bind_scratch_at(st->ctx, st->scratch, st->scratch_bytes, err, errlen)) goto fail;
    /* weight copies run every step */
    for (int i = 0; i < st->ctx->n_prims; i++)
        if (strstr(st->ctx->prims[i]->what, " reorder") &&
            strstr(st->ctx->prims[i]->what, "weights->"))
            st->n_reorders++;
    if (comm && dp_setup(st, comm, err, errlen)) goto fail;
    *state = st;
    return 0;
fail:
    cpu_destroy((void **)&st);
    return -1;
}

static int cpu_create(const gb_model_t *m, const gb_train_config_t *cfg, int replica,
                      gb_comm_t *comm, void **state, char *err, size_t errlen) {
    int rc = cpu_create_inner(m, cfg, replica, comm, state, err, errlen);
    if (rc && comm) gb_comm_abort(comm, err); /* nobody waits for a replica that is not coming */
    return rc;
}

/* canonical <-> internal for one parameter tensor */
static int param_io(cpu_state_t *st, int t, float *canon, float *slab, int to_internal, char *err,
                    size_t errlen) {
    const dnnl_memory_desc_t *md = st->p_md[t];
    dnnl_memory_desc_t plain;
    dnnl_format_tag_t tag = md->ndims == 1 ? dnnl_a : md->ndims == 2 ? dnnl_ab : dnnl_abcd;
    gb_cpu_md(&plain, md->ndims, md->dims, dnnl_f32, tag);
    char *ip = (char *)slab + st->p_off[t];
    if (to_internal) return gb_cpu_reorder_once(st->ctx, &plain, canon, md, ip, err, errlen);
    return gb_cpu_reorder_once(st->ctx, md, ip, &plain, canon, err, errlen);
}

static int cpu_set_state(void *state, const float *params, const float *buffers, int64_t nbt,
                         char *err, size_t errlen) {
    cpu_state_t *st = state;
    const gb_model_t *m = st->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (!t->is_param) continue;
        if (param_io(st, i, (float *)params + t->offset, st->p, 1, err, errlen)) return -1;
    }
    memcpy(st->rbuf, buffers, m->n_buffers * sizeof(float));
    st->mom_init = 0; /* the momentum buffer restarts as torch's does */
    st->nbt = nbt;
    return 0;
}

static int cpu_get_state(void *state, float *params, float *buffers, int64_t *nbt, char *err,
                         size_t errlen) {
    cpu_state_t *st = state;
    const gb_model_t *m = st->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (!t->is_param) continue;
        if (param_io(st, i, params + t->offset, st->p, 0, err, errlen)) return -1;
    }
    memcpy(buffers, st->rbuf, m->n_buffers * sizeof(float));
    *nbt = st->nbt;
    return 0;
}

static int cpu_get_grads(void *state, float *grads, char *err, size_t errlen) {
    cpu_state_t *st = state;
    const gb_model_t *m = st->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (!t->is_param) continue;
        if (param_io(st, i, grads + t->offset, st->g, 0, err, errlen)) return -1;
    }
    return 0;
}

static int cpu_set_batch(void *state, const float *images, const int32_t *labels, char *err,
                         size_t errlen) {
    cpu_state_t *st = state;
    for (int i = 0; i < st->n; i++) {
        if (labels[i] < 0 || labels[i] >= st->m->cfg.n_classes) {
            snprintf(err, errlen, "label %d of image %d is outside [0, %d)", labels[i], i,
                     st->m->cfg.n_classes);
            return -1;
        }
    }
    if (!st->touched) {
        /* first touch of everything after the parameter slab (set_state
         * wrote that): gradients, momentum, activations, scratchpad */
        size_t skip = st->slab_bytes;
        memset((char *)st->arena + skip, 0, st->arena_bytes - skip);
        st->touched = 1;
        st->mom_init = 0;
    }
    if (gb_cpu_write_plain(st->ctx, st->img, images, err, errlen)) return -1;
    memcpy(st->labels, labels, (size_t)st->n * sizeof(int32_t));
    return 0;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

static int cbn_fwd(cpu_state_t *st, cbn_t *c, dnnl_memory_t src, char *err, size_t errlen) {
    TRY(gb_cpu_conv_weights_fwd(st->ctx, &c->conv, c->w, c->wfwd, err, errlen));
    TRY(gb_cpu_conv_fwd(st->ctx, &c->conv, src, c->wfwd, c->t, err, errlen));
    if (!c->has_bn) return c->relu ? gb_cpu_relu_fwd(st->ctx, &c->rl, c->t, err, errlen) : 0;
    return gb_cpu_bn_fwd(st->ctx, &c->bn, c->t, c->a, c->scale, c->shift, c->mean, c->var, c->ws,
                         err, errlen);
}

/* diff (of the bn output) -> diff_bn_in (may be diff) -> weight gradient and,
 * with dsrc, the input gradient. With prev, the conv's input is prev's
 * BN+ReLU output, rebuilt into `src` first from prev's saved statistics.
 * Without BN the ReLU's gradient is taken in place in diff (from the kept
 * output), the conv reads diff, and prev's output is its own, kept. The
 * weight gradients are complete at the end: their bucket hears so. */
static int cbn_bwd(cpu_state_t *st, cbn_t *c, const cbn_t *prev, dnnl_memory_t src,
                   dnnl_memory_t diff, dnnl_memory_t diff_bn_in, dnnl_memory_t dsrc, char *err,
                   size_t errlen) {
    if (c->has_bn) {
        TRY(gb_cpu_bn_bwd(st->ctx, &c->bn, c->t, diff, diff_bn_in, c->scale, c->shift, c->mean,
                          c->var, c->ws, c->dscale, c->dshift, err, errlen));
    } else {
        if (c->relu) TRY(gb_cpu_relu_bwd(st->ctx, &c->rl, c->a, diff, err, errlen));
        diff_bn_in = diff;
    }
    if (prev && prev->has_bn)
        TRY(gb_cpu_bn_apply(st->ctx, &prev->bn, prev->t, src, prev->scale, prev->shift, prev->mean,
                            prev->var, err, errlen));
    else if (prev)
        src = prev->a;
    TRY(gb_cpu_conv_bwd_weights(st->ctx, &c->conv, src, diff_bn_in, c->gw, err, errlen));
    if (st->red) {
        gb_reducer_tensor_done(st->red, c->mc->w);
        if (c->has_bn) {
            gb_reducer_tensor_done(st->red, c->mb->weight);
            gb_reducer_tensor_done(st->red, c->mb->bias);
        }
    }
    if (dsrc) {
        TRY(gb_cpu_conv_weights_bwd(st->ctx, &c->conv, c->w, c->wbwd, err, errlen));
        TRY(gb_cpu_conv_bwd_data(st->ctx, &c->conv, diff_bn_in, c->wbwd, dsrc, err, errlen));
    }
    return 0;
}

static void cbn_running(cpu_state_t *st, cbn_t *c) {
    const gb_bn_t *b = c->mb;
    if (!c->has_bn) return;
    gb_cpu_bn_running_update(c->mean_p, c->var_p, st->rbuf + st->m->tensors[b->rmean].offset,
                             st->rbuf + st->m->tensors[b->rvar].offset, c->bn.c, c->bn.count, 0.1f);
}

static int cpu_step_inner(cpu_state_t *st, gb_step_out_t *out, char *err, size_t errlen) {
    gb_cpu_ctx_t *ctx = st->ctx;
    if (!st->touched) {
        snprintf(err, errlen, "cpu backend: step before set_batch");
        return -1;
    }
    TRY(gb_cpu_fc_weights(ctx, &st->fc, st->fcw, st->fcwf, st->fcwb, err, errlen));

    /* forward */
    TRY(cbn_fwd(st, &st->stem, st->img, err, errlen));
    TRY(gb_cpu_pool_fwd(ctx, &st->maxpool, st->stem.a, st->pool_out, st->pool_ws, err, errlen));
    for (int i = 0; i < st->n_blocks; i++) {
        blk_t *b = &st->blocks[i];
        TRY(cbn_fwd(st, &b->c1, b->x, err, errlen));
        TRY(cbn_fwd(st, &b->c2, b->c1.a, err, errlen));
        TRY(cbn_fwd(st, &b->c3, b->c2.a, err, errlen));
        dnnl_memory_t s = b->x;
        if (b->mb->has_down) {
            TRY(cbn_fwd(st, &b->cd, b->x, err, errlen));
            s = b->cd.a;
        }
        TRY(gb_cpu_add_fwd(ctx, &b->join, b->c3.a, s, b->c3.a, err, errlen));
    }
    blk_t *last = &st->blocks[st->n_blocks - 1];
    TRY(gb_cpu_pool_fwd(ctx, &st->avgpool, last->c3.a, st->pooled, NULL, err, errlen));
    if (st->dt != dnnl_f32)
        TRY(gb_cpu_reorder(ctx, &st->pool_to_f32, st->pooled, st->pooled_f32, err, errlen));
    TRY(gb_cpu_fc_fwd(ctx, &st->fc, st->fc_src, st->fcwf, st->fcb, st->logits_m, err, errlen));
    out->loss = (float)gb_cpu_softmax_xent(st->logits, st->labels, st->n, st->m->cfg.n_classes,
                                           st->dlogits);

    /* backward */
    if (st->red) gb_reducer_begin(st->red);
    TRY(gb_cpu_fc_bwd_weights(ctx, &st->fc, st->fc_src, st->dlogits_m, st->fcgw, st->fcgb, err,
                              errlen));
    if (st->red) {
        gb_reducer_tensor_done(st->red, st->m->fc_w);
        gb_reducer_tensor_done(st->red, st->m->fc_b);
    }
    TRY(gb_cpu_fc_bwd_data(ctx, &st->fc, st->dlogits_m, st->fcwb, st->fc_src_diff, err, errlen));
    if (st->dt != dnnl_f32)
        TRY(gb_cpu_reorder(ctx, &st->dpool_from_f32, st->dpooled_f32, st->dpooled, err, errlen));
    TRY(gb_cpu_pool_bwd(ctx, &st->avgpool, st->dpooled, last->dy, NULL, err, errlen));
    for (int i = st->n_blocks - 1; i >= 0; i--) {
        blk_t *b = &st->blocks[i];
        TRY(gb_cpu_add_relu_bwd(ctx, &b->join, b->c3.a, b->dy, err, errlen));
        int down = b->mb->has_down;
        if (down) TRY(cbn_bwd(st, &b->cd, NULL, b->x, b->dy, b->d1, b->dx, err, errlen));
        TRY(cbn_bwd(st, &b->c3, &b->c2, b->a2r, b->dy, b->d1, b->d2, err, errlen));
        TRY(cbn_bwd(st, &b->c2, &b->c1, b->a1r, b->d2, b->d2, b->d3, err, errlen));
        /* DY is consumed: a projection block's conv1 gradient goes there */
        TRY(cbn_bwd(st, &b->c1, NULL, b->x, b->d3, b->d3, down ? b->d4 : b->dx, err, errlen));
        TRY(gb_cpu_add_fwd(ctx, &b->acc, b->dx, down ? b->d4 : b->dy, b->dx, err, errlen));
    }
    TRY(gb_cpu_pool_bwd(ctx, &st->maxpool, st->blocks[0].dx, st->stem_diff, st->pool_ws, err,
                        errlen));
    TRY(cbn_bwd(st, &st->stem, NULL, st->img, st->stem_diff, st->stem_diff, NULL, err, errlen));
    if (dnnl_stream_wait(ctx->stream) != dnnl_success) {
        snprintf(err, errlen, "stream wait failed");
        return -1;
    }

    /* running statistics, as torch updates them in the forward pass */
    cbn_running(st, &st->stem);
    for (int i = 0; i < st->n_blocks; i++) {
        blk_t *b = &st->blocks[i];
        cbn_running(st, &b->c1);
        cbn_running(st, &b->c2);
        cbn_running(st, &b->c3);
        if (b->mb->has_down) cbn_running(st, &b->cd);
    }
    st->nbt++;

    /* every replica averages the same gradients in the same order, so the
     * update below leaves the weights identical on all of them */
    if (st->red && gb_reducer_finish(st->red, err, errlen)) return -1;

    /* SGD over the whole slab */
    int bad = gb_cpu_sgd(st->p, st->g, st->mom, st->slab_bytes / sizeof(float), st->cfg.lr,
                         st->cfg.momentum, st->cfg.weight_decay, !st->mom_init, st->threads);
    st->mom_init = 1;
    /* this step's loss came from parameters that were not finite: NaN, as
     * torch's (the forward pass hid them) */
    if (st->diverged) out->loss = NAN;
    st->diverged |= bad;
    out->nonfinite = bad;
    out->ms = -1.0;
    out->skipped = 0;
    return 0;
}

static int cpu_step(void *state, gb_step_out_t *out, char *err, size_t errlen) {
    cpu_state_t *st = state;
    if (st->red && st->steps_done == st->cfg.warmup) gb_reducer_stats(st->red, &st->red_base);
    st->steps_done++;
    int rc = cpu_step_inner(st, out, err, errlen);
    /* the other replicas must not wait for this one's buckets */
    if (rc && st->comm) gb_comm_abort(st->comm, err);
    return rc;
}

/* oneDNN has no jit kernel for some small shapes on some ISAs (AVX2: the
 * 2x2 maps of a 32x32 input) and runs `ref` there: allowed, but said, here
 * and in the record's details ("ref_prims"). */
static void warn_ref(const gb_cpu_ctx_t *ctx) {
    const char *first = "?";
    for (int i = 0; i < ctx->n_prims; i++) {
        if (ctx->prims[i]->ref) {
            first = ctx->prims[i]->what;
            break;
        }
    }
    fprintf(stderr,
            "cpu backend: warning: %d of %d oneDNN primitives run the slow reference "
            "implementation on this CPU for these shapes (first: %s)\n",
            ctx->n_ref, ctx->n_prims, first);
}

static int cpu_report(void *state, gb_replica_report_t *rep, char *err, size_t errlen) {
    cpu_state_t *st = state;
    gb_cpu_stats_t s;
    gb_cpu_backend_stats(state, &s);
    rep->peak_mem_bytes = s.arena_bytes + s.slab_bytes + s.scratch_bytes;
    rep->details_json = NULL;
    /* implementations, counted by name */
    size_t cap = 4096 + (size_t)st->ctx->n_prims * 80, o = 0;
    char *j = malloc(cap);
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    o += (size_t)snprintf(j + o, cap - o,
                          "{\"threads\":%d,\"arena_bytes\":%zu,\"slab_bytes\":%zu,"
                          "\"scratchpad_bytes\":%zu,\"primitives\":%d,\"ref_prims\":%d,"
                          "\"winograd_convs\":%d,"
                          "\"reorders_per_step\":%d,\"conv_algo\":\"%s\",\"impls\":{",
                          st->threads, s.arena_bytes, s.slab_bytes, s.scratch_bytes, s.n_prims,
                          st->ctx->n_ref, s.n_winograd, s.n_reorders_per_step,
                          s.n_winograd ? "winograd 3x3/1, direct elsewhere" : "direct");
    int first = 1;
    for (int i = 0; i < st->ctx->n_prims; i++) {
        const char *impl = st->ctx->prims[i]->impl;
        int seen = 0, count = 0;
        for (int k = 0; k < st->ctx->n_prims; k++) {
            if (strcmp(st->ctx->prims[k]->impl, impl) == 0) {
                if (k < i) seen = 1;
                count++;
            }
        }
        if (seen) continue;
        o += (size_t)snprintf(j + o, cap - o, "%s\"%s\":%d", first ? "" : ",", impl, count);
        first = 0;
    }
    o += (size_t)snprintf(j + o, cap - o, "}");
    if (st->red) {
        /* the timed steps' (the warm-up's first touches and skew were in
         * them), or every step's when there were no more than warm-up */
        gb_reducer_stats_t rs, b = st->red_base;
        gb_reducer_stats(st->red, &rs);
        if (rs.steps > b.steps) {
            rs.steps -= b.steps;
            rs.buckets_before -= b.buckets_before;
            rs.reduce_ms -= b.reduce_ms;
            rs.wait_ms -= b.wait_ms;
        }
        double n = rs.steps > 0 ? (double)rs.steps : 1.0;
        o += (size_t)snprintf(j + o, cap - o,
                              ",\"allreduce\":{\"transport\":\"%s\",\"buckets\":%d,"
                              "\"bucket_mb\":%g,\"steps\":%ld,\"reduce_ms_per_step\":%.3f,"
                              "\"exposed_ms_per_step\":%.3f,\"buckets_during_backward\":%.2f,"
                              "\"grad_dtype\":\"fp32\"}",
                              st->comm->transport, st->bk->n, st->cfg.bucket_mb, rs.steps,
                              rs.reduce_ms / n, rs.wait_ms / n, (double)rs.buckets_before / n);
    }
    snprintf(j + o, cap - o, "}");
    rep->details_json = j;
    return 0;
}

void gb_cpu_backend_stats(void *state, gb_cpu_stats_t *out) {
    cpu_state_t *st = state;
    memset(out, 0, sizeof(*out));
    out->n_prims = st->ctx->n_prims;
    for (int i = 0; i < st->ctx->n_prims; i++) {
        const gb_cpu_prim_t *p = st->ctx->prims[i];
        int conv = strstr(p->what, " fwd") && strstr(p->what, "conv") && !strstr(p->what, "bn");
        out->n_slow += p->slow;
        if ((conv || strncmp(p->impl, "gpubench:", 9) == 0) && strstr(p->impl, "wino"))
            out->n_winograd++;
    }
    out->n_reorders_per_step = st->n_reorders;
    out->arena_bytes = st->arena_bytes - 3 * st->slab_bytes - st->scratch_bytes;
    out->slab_bytes = 3 * st->slab_bytes;
    out->scratch_bytes = st->scratch_bytes;
}

const char *gb_cpu_backend_prim(void *state, int i, const char **impl) {
    cpu_state_t *st = state;
    if (i < 0 || i >= st->ctx->n_prims) return NULL;
    if (impl) *impl = st->ctx->prims[i]->impl;
    return st->ctx->prims[i]->what;
}

static int cpu_gemm(int device, gb_precision_t prec, int m, int n, int k, int reps,
                    double *ms_median, double *ms_p90, double *gflops, int64_t window_ms[2],
                    char *err, size_t errlen);
static int cpu_allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                         gb_allreduce_size_t *sizes, int n, char **details, char *err,
                         size_t errlen);

const gb_backend_ops_t gb_cpu_backend_ops = {
    .abi = GB_BACKEND_ABI,
    .name = "cpu",
    .probe = cpu_probe,
    .create = cpu_create,
    .set_state = cpu_set_state,
    .get_state = cpu_get_state,
    .get_grads = cpu_get_grads,
    .set_batch = cpu_set_batch,
    .step = cpu_step,
    .report = cpu_report,
    .destroy = cpu_destroy,
    .gemm = cpu_gemm,
    .allreduce = cpu_allreduce,
};

/* ------------------------------------------------------------------ gemm */

#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cpu_gemm(int device, gb_precision_t prec, int m, int n, int k, int reps,
                    double *ms_median, double *ms_p90, double *gflops, int64_t window_ms[2],
                    char *err, size_t errlen) {
    (void)device;
    if (prec != GB_PREC_FP32) {
        snprintf(err, errlen, "gemm in %s: the CPU's gemm is oneDNN's sgemm, fp32 only",
                 gb_precision_name(prec));
        return -1;
    }
    if (m < 1 || n < 1 || k < 1 || reps < 1 || reps > 100000) {
        snprintf(err, errlen, "gemm: bad sizes m=%d n=%d k=%d reps=%d", m, n, k, reps);
        return -1;
    }
    int rc = -1;
    float *a = malloc((size_t)m * k * sizeof(float)), *b = malloc((size_t)k * n * sizeof(float)),
          *c = malloc((size_t)m * n * sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double));
    if (!a || !b || !c || !t) {
        snprintf(err, errlen, "gemm: out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)((i * 7 % 13) - 6) / 8.0f;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)((i * 5 % 11) - 5) / 8.0f;
    memset(c, 0, (size_t)m * n * sizeof(float));
    /* row-major, as oneDNN's sgemm is */
    for (int r = -2; r < reps; r++) { /* two untimed warm-up runs */
        if (r == 0 && window_ms) window_ms[0] = gb_engine_wall_ms();
        double t0 = now_ms();
        dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        double t1 = now_ms();
        if (s != dnnl_success) {
            snprintf(err, errlen, "gemm: dnnl_sgemm failed (%d)", (int)s);
            goto done;
        }
        if (r >= 0) t[r] = t1 - t0;
    }
    if (window_ms) window_ms[1] = gb_engine_wall_ms();
    /* spot check one element against a double dot product */
    {
        int i = m / 2, jj = n / 3;
        double ref = 0;
        for (int q = 0; q < k; q++)
            ref += (double)a[(size_t)i * k + q] * b[(size_t)q * n + jj];
        double got = c[(size_t)i * n + jj];
        /* f32 accumulation over k terms: error grows like k * 2^-24 * sum |a b| */
        if (fabs(got - ref) > 1e-5 * k + 1e-3) {
            snprintf(err, errlen, "gemm: result check failed (%g vs %g)", got, ref);
            goto done;
        }
    }
    gb_step_stats_t ss;
    if (gb_step_stats(t, NULL, reps, &ss) != 0) {
        snprintf(err, errlen, "gemm: a timing was not finite");
        goto done;
    }
    *ms_median = ss.median;
    if (ms_p90) *ms_p90 = ss.p90;
    *gflops = 2.0 * m * n * (double)k / (*ms_median * 1e6);
    rc = 0;
done:
    free(a);
    free(b);
    free(c);
    free(t);
    return rc;
}

/* ------------------------------------------------------------- allreduce */

/* The allreduce kind on CPU replicas: the comm group's all-reduce (threads
 * through shared memory; the TCP ring across nodes) over one buffer per
 * replica, sized for the largest message and touched before timing. */
static int cpu_allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                         gb_allreduce_size_t *sizes, int n, char **details, char *err,
                         size_t errlen) {
    *details = NULL;
    if (!comm || n < 1 || replica != comm->local_rank) {
        snprintf(err, errlen, "cpu allreduce: replica %d needs its comm member", replica);
        if (comm) gb_comm_abort(comm, err);
        return -1;
    }
    size_t maxc = 1;
    for (int k = 0; k < n; k++)
        if (sizes[k].count > maxc) maxc = sizes[k].count;
    float *buf = malloc(maxc * sizeof(float));
    if (!buf) {
        snprintf(err, errlen, "cpu allreduce: out of memory for %zu bytes", maxc * sizeof(float));
        gb_comm_abort(comm, err);
        return -1;
    }
    memset(buf, 0, maxc * sizeof(float)); /* first touch before any timing */
    int rc = -1, g = comm->rank, world = comm->world;
    if (gb_comm_connect(comm, err, errlen)) goto done;
    for (int k = 0; k < n; k++) {
        size_t count = sizes[k].count;
        sizes[k].window_ms[0] = gb_engine_wall_ms();
        for (size_t i = 0; i < count; i++)
            buf[i] = gb_allreduce_input(g, i);
        for (int w = 0; w < cfg->warmup; w++)
            if (gb_comm_allreduce(comm, buf, count, GB_COMM_SUM, err, errlen)) goto done;
        if (gb_comm_barrier(comm, err, errlen)) goto done;
        double t0 = now_ms();
        for (int it = 0; it < cfg->iters; it++)
            if (gb_comm_allreduce(comm, buf, count, GB_COMM_SUM, err, errlen)) goto done;
        float us = (float)((now_ms() - t0) * 1e3 / cfg->iters);
        if (gb_comm_allreduce(comm, &us, 1, GB_COMM_MAX, err, errlen)) goto done;
        sizes[k].time_us = us;
        /* the check, after timing: known inputs, exact sums */
        for (size_t i = 0; i < count; i++)
            buf[i] = gb_allreduce_input(g, i);
        if (g == cfg->fault_rank && count > 0) buf[count / 2] += 1.0f;
        if (gb_comm_allreduce(comm, buf, count, GB_COMM_SUM, err, errlen)) goto done;
        float want[11], bad = 0; /* the input, so the sum, depends on i mod 11 only */
        for (size_t i = 0; i < 11; i++)
            want[i] = gb_allreduce_expected(world, i);
        for (size_t i = 0; i < count; i++)
            if (buf[i] != want[i % 11]) bad++;
        if (gb_comm_allreduce(comm, &bad, 1, GB_COMM_MAX, err, errlen)) goto done;
        sizes[k].ok = bad == 0;
        sizes[k].window_ms[1] = gb_engine_wall_ms();
    }
    char *j = malloc(64);
    if (j) snprintf(j, 64, "{\"transport\":\"%s\"}", comm->transport);
    *details = j;
    rc = 0;
done:
    free(buf);
    return rc;
}
