/* plan.h - the memory plan of one ResNet training replica, NHWC, shared by
 * the CUDA executor and its host twin (tests/cuda), pure C.
 *
 * From the model description it derives: every forward activation (NHWC,
 * batch n) at a byte offset into one arena, five gradient scratch buffers
 * sized to the largest activation, the convolutions and batch norms with the
 * activations they read and write, and the internal parameter layout:
 *
 *   group A: conv weights as KRSC (the stem's C padded from 3 to stem_c, 4 or
 *            8, with zeros)
 *            and fc.weight (classes, features): the compute dtype's tensors;
 *   group B: BN gamma and beta, fc.bias: always fp32.
 *
 * The fp32 master slab is [A | B] (n_a + n_b floats); the gradient slab is
 * one allocation, A in the compute dtype then B in fp32 at grad_b_byte_off,
 * so the data-parallel all-reduce can slice it. Each tensor starts on a
 * GB_PLAN_ALIGN-element boundary; padding stays zero. Running statistics keep
 * the canonical buffer slab as is.
 */
#ifndef GB_CUDA_PLAN_H
#define GB_CUDA_PLAN_H

#include "engine.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

#define GB_PLAN_ALIGN     64 /* elements: 128 B of fp16, 256 B of fp32 */
#define GB_PLAN_STEM_C    4  /* stem input channels as stored by default (3 + one zero) */
#define GB_PLAN_NGRAD     5  /* gradient scratch buffers */
#define GB_PLAN_MAX_CONVS (1 + 4 * GB_MAX_BLOCKS)
#define GB_PLAN_MAX_BNS   (1 + 4 * GB_MAX_BLOCKS)

typedef struct gb_plan_act {
    int n, h, w, c; /* NHWC */
    size_t numel;
    size_t off; /* bytes into the arena */
} gb_plan_act_t;

typedef struct gb_plan_conv {
    gb_conv_t g;            /* model geometry (g.c is the model's input channel count) */
    int c_int;              /* input channels as stored: the plan's stem_c for the stem */
    int tensor;             /* model tensor index of the weight */
    size_t w_off;           /* elements into group A */
    size_t w_numel;         /* k * kh * kw * c_int */
    int x, y;               /* activation ids */
    int dgrad;              /* 0 for the stem: the image needs no gradient */
    char name[GB_NAME_LEN]; /* "layer1.0.conv1" */
} gb_plan_conv_t;

typedef struct gb_plan_bn {
    gb_bn_t g;
    size_t gamma_off, beta_off; /* elements into group B (offsets include n_a) */
    size_t rmean_off, rvar_off; /* elements into the canonical buffer slab */
    size_t stat_off;            /* elements into the saved-statistics area: mean[c], invstd[c] */
    int x, y, z;                /* activations; z: the residual added before the ReLU, or -1 */
    int relu;
    long count; /* n * h * w values per channel */
    char name[GB_NAME_LEN];
} gb_plan_bn_t;

typedef struct gb_plan_block {
    int conv1, conv2, conv3, down;        /* conv ids; down -1 without projection */
    int bn1, bn2, bn3, bnd;               /* bn ids; bnd -1 without projection */
    int x, t1, u1, t2, u2, t3, td, sd, y; /* activations (td, sd -1 without projection) */
} gb_plan_block_t;

typedef enum { GB_PLAN_KRSC = 0, GB_PLAN_PLAIN = 1 } gb_plan_layout_t;

typedef struct gb_plan_param {
    int group;  /* 0: A, 1: B */
    size_t off; /* elements into the master slab [A | B] */
    gb_plan_layout_t layout;
    int c_int; /* KRSC: stored channels */
} gb_plan_param_t;

typedef struct gb_plan {
    const gb_model_t *m; /* borrowed; outlives the plan */
    int n;               /* batch */
    size_t esize;        /* bytes per activation element (2, 4 or 8) */
    gb_plan_act_t *acts;
    int n_acts;
    int x0, c0, a0, p0,
        feat; /* stem input, stem conv out, after BN+ReLU, after pool, pooled features */
    gb_plan_conv_t convs[GB_PLAN_MAX_CONVS];
    int n_convs;
    gb_plan_bn_t bns[GB_PLAN_MAX_BNS];
    int n_bns;
    gb_plan_block_t blocks[GB_MAX_BLOCKS];
    int n_blocks;
    int stem_conv, stem_bn;
    int stem_c;                     /* the image's channels as stored: 3 + zeros, 4 or 8 */
    size_t grad_numel;              /* elements of each gradient scratch buffer */
    size_t grad_off[GB_PLAN_NGRAD]; /* bytes into the arena */
    size_t arena_bytes;
    size_t max_act_numel;
    gb_plan_param_t *params;   /* per model tensor (is_param ones; others zeroed) */
    size_t n_a, n_b;           /* elements of group A and B, aligned */
    size_t fc_w_off, fc_b_off; /* elements into the master slab */
    size_t n_stats;            /* floats of saved mean + invstd, all BNs */
    int max_bn_c;
} gb_plan_t;

/* Build the plan for batch n and activation element size esize (2, 4 or 8),
 * the image stored with stem_c channels (4 or 8: 3 and zeros).
 * NULL with a reason in err when the model cannot be run (no BN, batch < 1,
 * a batch norm over a single value per channel as torch refuses too, an
 * activation of 2^31 elements or more, which cuDNN cannot describe). */
gb_plan_t *gb_plan_new(const gb_model_t *m, int n, size_t esize, int stem_c, char *err,
                       size_t errlen);

/* The stem's stored channel count for a precision: `env` (GB_CUDA_STEM_C's
 * value, NULL when unset) "4" or "8" when given; else 8 for bf16, whose
 * cuDNN kernels for 4 channels were 4x slower than fp16's on an H200, and 4
 * otherwise. -1 with a reason in err for any other value. */
int gb_plan_stem_c(gb_precision_t prec, const char *env, char *err, size_t errlen);
/* GB_CUDA_FUSE's value (NULL when unset): 1 asks for the fused step (batch
 * norm in the convs' epilogues and prologues: exec.h, net.c), 0 or unset
 * not; -1 with a reason in err for any other value. */
int gb_plan_fuse(const char *env, char *err, size_t errlen);

/* Conv ci's place in the fused step: 1 for a block's conv2 or conv3 (its
 * input is batch norm *pre_bn's output, applied in the conv's prologue), 0
 * for conv1 or the projection (the block's input: no prologue, *pre_bn -1),
 * -1 for the stem (never fused). pre_bn may be NULL. */
int gb_plan_fused_role(const gb_plan_t *p, int ci, int *pre_bn);
void gb_plan_destroy(gb_plan_t **self_p);

/* Byte offset of group B inside a gradient slab whose group A elements are
 * a_esize bytes each (aligned to 256 bytes), and the slab's total bytes. */
size_t gb_plan_grad_b_byte_off(const gb_plan_t *p, size_t a_esize);
size_t gb_plan_grad_bytes(const gb_plan_t *p, size_t a_esize);

/* Where each parameter's gradient lies in its group of the gradient slab
 * (group 0: A, conv and fc weights in the compute dtype; 1: B, BN weights
 * and biases and the fc bias in fp32): off[t] elements from the group's
 * start and cnt[t] elements (KRSC tensors with their stored channels), for
 * every model tensor t (m->n_tensors entries each); cnt[t] 0 where t is no
 * parameter of that group. The data-parallel buckets are cut from these. */
void gb_plan_grad_spans(const gb_plan_t *p, int group, size_t *off, size_t *cnt);

/* What every rank of a data-parallel job must have alike for its
 * collectives to match (the gradient groups' sizes, the stem's channels,
 * the element size, the batch, every parameter's place) and for its
 * average to mean anything (`extra`: the caller's, e.g. the initial loss
 * scale's bits), as a number in [0, 2^30): ranks compare it once at set-up
 * (GB_CUDA_STEM_C and GB_CUDA_LOSS_SCALE are read per process). */
uint32_t gb_plan_fingerprint(const gb_plan_t *p, uint32_t extra);

/* Canonical slab (model.h order, OIHW) <-> internal master slab [A | B].
 * to_internal zeroes padding. from_internal multiplies by `scale`
 * (used to unscale fp16 gradients; 1 otherwise). */
void gb_plan_params_to_internal(const gb_plan_t *p, const float *canon, float *internal);
void gb_plan_params_from_internal(const gb_plan_t *p, const float *internal, float *canon,
                                  float scale);

/* One tensor: OIHW (k, c, r, s) <-> KRSC with c_int >= c stored channels. */
void gb_oihw_to_krsc(const float *src, int k, int c, int r, int s, int c_int, float *dst);
void gb_krsc_to_oihw(const float *src, int k, int c, int r, int s, int c_int, float *dst,
                     float scale);

#endif
