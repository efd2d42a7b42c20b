/* cpu_ops.h - the oneDNN building blocks of the CPU backend, one op at a time.
 *
 * Each op (convolution, batch norm, binary add with optional ReLU, pooling,
 * inner product, softmax cross-entropy, SGD) is a small struct that holds its
 * oneDNN primitives and the memory descriptors oneDNN chose; it is created
 * once from shapes and the producer's memory descriptor, and executed with
 * dnnl_memory_t arguments that the caller owns. The backend (cpu_backend.c)
 * chains ops into ResNet-50 with memories in one arena; tests run every op
 * alone on given inputs (gb_cpu_ctx_mem + gb_cpu_write/read_plain).
 *
 * Invariants:
 *  - All primitives are made through a gb_cpu_ctx_t: user scratchpad mode, one
 *    shared scratchpad (ops of one context never run concurrently), and the
 *    context owns every primitive and memory it made (gb_cpu_ctx_destroy frees
 *    them all; op structs need no destroy). The context keeps pointers to
 *    the gb_cpu_prim_t inside op structs: those must stay where they are
 *    until the context is destroyed.
 *  - The OpenMP thread count is set by gb_cpu_ctx_new on the calling thread,
 *    before any primitive exists; create every op of a context on that thread.
 *  - Strictness (ctx->strict): GB_CPU_STRICT_GEMM refuses a gemm-based
 *    convolution (a layout mistake of ours: the blocked formats oneDNN picks
 *    always have jit kernels); GB_CPU_STRICT_ALL also refuses `ref`
 *    implementations. The backend runs GB_CPU_STRICT_GEMM: on an AVX2 CPU
 *    oneDNN 2.6 has no jit kernel for a few small shapes (the 2x2 maps of
 *    layer3/4 at a 32x32 input, say) and uses `ref`; those are counted
 *    (gb_cpu_ctx_t.n_ref), reported in the record's details and warned
 *    about, never hidden.
 *  - Weights: the "master" layout of a weight is the f32 layout of its
 *    gradient (conv/ip backward-weights diff_weights). Parameters, gradients
 *    and momentum all live in master layout, so SGD is one elementwise loop.
 *    Compute copies (forward, backward-data, bf16) are reordered from master
 *    once per step when their layout or type differs.
 *
 * Errors: every function returning int returns 0 on success and -1 with a
 * one-line reason in err (errlen bytes). These structs are internal to the
 * backend and its tests; fields are documented where they are set.
 */
#ifndef GB_CPU_OPS_H
#define GB_CPU_OPS_H

#include <oneapi/dnnl/dnnl.h>

#include <stddef.h>
#include <stdint.h>

/* One primitive with its scratchpad binding. */
typedef struct gb_cpu_prim {
    dnnl_primitive_t p;       /* NULL when the op does not need this primitive */
    dnnl_primitive_desc_t pd; /* kept for hints and queries; owned by the context */
    dnnl_memory_desc_t scratch_md;
    dnnl_memory_t scratch; /* into the context's shared scratchpad; NULL when empty */
    char what[64];         /* "layer1.0.conv2 bwd_w" */
    char impl[64];         /* oneDNN implementation, e.g. "jit:avx512_core" */
    int ref;               /* impl is a `ref` one */
    int slow;              /* ref, or a gemm convolution */
} gb_cpu_prim_t;

enum {
    GB_CPU_STRICT_NONE = 0, /* take what oneDNN picks */
    GB_CPU_STRICT_GEMM = 1, /* refuse gemm convolutions */
    GB_CPU_STRICT_ALL = 2   /* refuse gemm convolutions and ref implementations */
};

typedef struct gb_cpu_ctx {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    int threads; /* OpenMP threads the primitives were created for */
    int strict;  /* GB_CPU_STRICT_* */
    int n_ref;   /* primitives running a `ref` implementation (allowed below STRICT_ALL) */
    gb_cpu_prim_t **prims;
    int n_prims, cap_prims;
    dnnl_memory_t *mems; /* memories made by gb_cpu_ctx_mem */
    int n_mems, cap_mems;
    void **bufs; /* buffers gb_cpu_ctx_mem allocated */
    int n_bufs, cap_bufs;
    void *scratch;        /* shared scratchpad */
    size_t scratch_bytes; /* its size */
} gb_cpu_ctx_t;

/* A context on the CPU engine with `threads` OpenMP threads (>= 1). Sets the
 * calling thread's OpenMP thread count. NULL on failure. */
gb_cpu_ctx_t *gb_cpu_ctx_new(int threads, int strict, char *err, size_t errlen);

/* Destroy every primitive, memory and buffer the context made; no-op on NULL;
 * sets *self_p to NULL. */
void gb_cpu_ctx_destroy(gb_cpu_ctx_t **self_p);

/* Size the shared scratchpad to the largest one any primitive made so far
 * needs, allocate and touch it, and bind every primitive to it. Call after
 * creating ops and before executing them; may be called again after making
 * more ops. */
int gb_cpu_ctx_bind_scratch(gb_cpu_ctx_t *ctx, char *err, size_t errlen);
/* The largest scratchpad any primitive made so far needs. */
size_t gb_cpu_ctx_scratch_need(const gb_cpu_ctx_t *ctx);
/* Bind every primitive to a caller-owned scratchpad of `bytes` (>= the need;
 * it must outlive the context). */
int gb_cpu_ctx_bind_scratch_at(gb_cpu_ctx_t *ctx, void *buf, size_t bytes, char *err,
                               size_t errlen);

/* A memory for `md` on `ptr` (not owned), or on a zeroed, 64-byte aligned
 * buffer owned by the context when ptr is NULL. The context owns the memory
 * object. NULL on failure. */
dnnl_memory_t gb_cpu_ctx_mem(gb_cpu_ctx_t *ctx, const dnnl_memory_desc_t *md, void *ptr, char *err,
                             size_t errlen);

/* Run a primitive; NULL memories in args are left out; the scratchpad is
 * added. */
int gb_cpu_exec(gb_cpu_ctx_t *ctx, const gb_cpu_prim_t *pr, int nargs, const dnnl_exec_arg_t *args,
                char *err, size_t errlen);

/* Create, run and free a reorder from (src_md, src) to (dst_md, dst): for
 * loading, saving and tests, never inside a step. */
int gb_cpu_reorder_once(gb_cpu_ctx_t *ctx, const dnnl_memory_desc_t *src_md, const void *src,
                        const dnnl_memory_desc_t *dst_md, void *dst, char *err, size_t errlen);

/* Copy a plain row-major f32 array (NCHW for 4D, NC for 2D, C for 1D, with
 * the dims of mem's descriptor) into mem, converting layout and type; and the
 * reverse. */
int gb_cpu_write_plain(gb_cpu_ctx_t *ctx, dnnl_memory_t mem, const float *src, char *err,
                       size_t errlen);
int gb_cpu_read_plain(gb_cpu_ctx_t *ctx, dnnl_memory_t mem, float *dst, char *err, size_t errlen);

/* md helpers */
void gb_cpu_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_data_type_t dt,
               dnnl_format_tag_t tag);
size_t gb_cpu_md_bytes(const dnnl_memory_desc_t *md);
/* "f32:aBcd16b" style text of a memory descriptor. */
void gb_cpu_md_str(const dnnl_memory_desc_t *md, char *buf, size_t len);

/* ---- convolution (no bias), with its backward passes and weight copies ---- */
typedef struct gb_cpu_conv_shape {
    int n, c, ih, iw; /* input */
    int k, kh, kw;    /* output channels, kernel */
    int stride,
        pad; /* symmetric left/top padding; the right is what PyTorch's floor rule implies */
} gb_cpu_conv_shape_t;

typedef struct gb_cpu_conv {
    gb_cpu_conv_shape_t s;
    int oh, ow;
    dnnl_data_type_t dt;               /* activation and compute-weight type: f32 or bf16 */
    int winograd;                      /* 1: fwd/bwd use jit Winograd (3x3 s1 f32 only) */
    int has_bwd_data;                  /* 0 for the stem: the image needs no gradient */
    dnnl_memory_desc_t src_md, dst_md; /* activations (dt); diff tensors use the same */
    dnnl_memory_desc_t w_md;           /* master f32 weight layout = diff_weights layout */
    dnnl_memory_desc_t wfwd_md;        /* forward weights (dt) */
    dnnl_memory_desc_t wbwd_md;        /* backward-data weights (dt) */
    int wfwd_is_master;                /* forward reads the master weights directly */
    int wbwd_is_master;                /* backward-data reads the master weights directly */
    int wbwd_is_fwd;                   /* backward-data reads the forward copy */
    gb_cpu_prim_t fwd, bwd_d, bwd_w, to_fwd, to_bwd; /* to_*: master -> copy reorders */
    /* Passes run by our AVX2 Winograd (wino.h) instead of oneDNN: its
     * transformed weights are the wfwd/wbwd copies (1-D, 36*c*k floats), and
     * `wino` (no primitive) holds its scratchpad in the context's list. */
    int own_fwd, own_bwd_d, own_bwd_w;
    gb_cpu_prim_t wino;
} gb_cpu_conv_t;

/* Output spatial size by PyTorch's rule floor((i + 2p - k) / s) + 1. */
int gb_cpu_out_size(int in, int k, int stride, int pad);

/* 0 when GB_CPU_WINO is unset, empty or a valid list of passes; -1 (err
 * says which word) otherwise. Checked on every CPU, also where our
 * Winograd does not run (AVX-512) and the variable changes nothing: a typo
 * is never a silent A/B run of the default. */
int gb_cpu_wino_env(char *err, size_t errlen);
/* src_md: the producer's descriptor (NULL: let oneDNN choose). winograd:
 * oneDNN's Winograd where it has one (AVX-512), else ours (AVX2, 3x3/1 pad 1
 * f32 with nChw8c activations) for the passes GB_CPU_WINO lists
 * ("fwd,bwd_data,bwd_weights" by default; "none"). */
int gb_cpu_conv_init(gb_cpu_ctx_t *ctx, gb_cpu_conv_t *cv, const gb_cpu_conv_shape_t *s,
                     const dnnl_memory_desc_t *src_md, dnnl_data_type_t dt, int bwd_data,
                     int winograd, const char *name, char *err, size_t errlen);
/* Refresh the forward or the backward-data copy from the master weights
 * (no-op when that pass reads the master directly). The backward one remakes
 * the copy even when it has the forward layout, so both may share a buffer. */
int gb_cpu_conv_weights_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                            dnnl_memory_t wfwd, char *err, size_t errlen);
int gb_cpu_conv_weights_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                            dnnl_memory_t wbwd, char *err, size_t errlen);
/* Both of the above, into separate copies (wbwd unused when wbwd_is_fwd). */
int gb_cpu_conv_weights(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                        dnnl_memory_t wfwd, dnnl_memory_t wbwd, char *err, size_t errlen);
int gb_cpu_conv_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t src,
                    dnnl_memory_t wfwd, dnnl_memory_t dst, char *err, size_t errlen);
int gb_cpu_conv_bwd_data(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t diff_dst,
                         dnnl_memory_t wbwd, dnnl_memory_t diff_src, char *err, size_t errlen);
/* diff_w in master layout (f32), overwritten. */
int gb_cpu_conv_bwd_weights(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t src,
                            dnnl_memory_t diff_dst, dnnl_memory_t diff_w, char *err, size_t errlen);

/* ---- batch norm, training mode, optional fused ReLU ---- */
#define GB_CPU_BN_EPS 1e-5f /* torch.nn.BatchNorm2d default */

typedef struct gb_cpu_bn {
    int c;
    double count;               /* N*H*W: values per channel */
    int relu;                   /* ReLU fused (dnnl_fuse_norm_relu) */
    dnnl_memory_desc_t data_md; /* src, dst, diff_src, diff_dst */
    dnnl_memory_desc_t stat_md; /* f32 (C): scale, shift, mean, variance and their diffs */
    dnnl_memory_desc_t ws_md;   /* ReLU mask; zero size without relu */
    gb_cpu_prim_t fwd, bwd;
    gb_cpu_prim_t apply; /* relu only: the forward again from saved statistics */
} gb_cpu_bn_t;

int gb_cpu_bn_init(gb_cpu_ctx_t *ctx, gb_cpu_bn_t *bn, const dnnl_memory_desc_t *data_md, int relu,
                   const char *name, char *err, size_t errlen);
/* dst = [relu](scale * (src - mean) / sqrt(var + eps) + shift) over the batch;
 * writes the batch mean and the population variance. ws may be NULL without
 * relu. dst must not be src (backward needs src). */
int gb_cpu_bn_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src, dnnl_memory_t dst,
                  dnnl_memory_t scale, dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var,
                  dnnl_memory_t ws, char *err, size_t errlen);
/* diff_src may be diff_dst (in place). Overwrites diff_scale, diff_shift. */
int gb_cpu_bn_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src,
                  dnnl_memory_t diff_dst, dnnl_memory_t diff_src, dnnl_memory_t scale,
                  dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var, dnnl_memory_t ws,
                  dnnl_memory_t diff_scale, dnnl_memory_t diff_shift, char *err, size_t errlen);
/* Recompute the forward output from the saved batch statistics (inference
 * kernel, same formula): lets backward rebuild a BN+ReLU output instead of
 * keeping it. Only for bn with relu. */
int gb_cpu_bn_apply(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src, dnnl_memory_t dst,
                    dnnl_memory_t scale, dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var,
                    char *err, size_t errlen);
/* torch's running statistics: rm = (1-m) rm + m mean; rv = (1-m) rv + m var
 * count/(count-1) (unbiased). count must be > 1. */
void gb_cpu_bn_running_update(const float *mean, const float *var, float *rm, float *rv, int c,
                              double count, float momentum);

/* ---- elementwise binary add, optional ReLU after it ---- */
typedef struct gb_cpu_add {
    int relu;
    dnnl_memory_desc_t md;
    gb_cpu_prim_t fwd; /* dst = [relu](a + b); dst may be a */
    gb_cpu_prim_t bwd; /* relu only: diff = diff * (dst > 0), in place */
} gb_cpu_add_t;

int gb_cpu_add_init(gb_cpu_ctx_t *ctx, gb_cpu_add_t *op, const dnnl_memory_desc_t *md, int relu,
                    const char *name, char *err, size_t errlen);
int gb_cpu_add_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_add_t *op, dnnl_memory_t a, dnnl_memory_t b,
                   dnnl_memory_t dst, char *err, size_t errlen);
/* ReLU backward from the forward output: diff <- diff * (dst > 0). */
int gb_cpu_add_relu_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_add_t *op, dnnl_memory_t dst,
                        dnnl_memory_t diff, char *err, size_t errlen);

/* ---- ReLU alone, in place (the no-BN model variant: conv -> ReLU) ---- */
typedef struct gb_cpu_relu {
    dnnl_memory_desc_t md;
    gb_cpu_prim_t fwd; /* x <- max(x, 0) */
    gb_cpu_prim_t bwd; /* diff <- diff * (y > 0), from the output y */
} gb_cpu_relu_t;

int gb_cpu_relu_init(gb_cpu_ctx_t *ctx, gb_cpu_relu_t *op, const dnnl_memory_desc_t *md,
                     const char *name, char *err, size_t errlen);
int gb_cpu_relu_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_relu_t *op, dnnl_memory_t x, char *err,
                    size_t errlen);
int gb_cpu_relu_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_relu_t *op, dnnl_memory_t y, dnnl_memory_t diff,
                    char *err, size_t errlen);

/* ---- pooling: max (with workspace) or average (padding excluded) ---- */
typedef struct gb_cpu_pool {
    int max;
    int kh, kw, stride, pad;
    int oh, ow;
    dnnl_memory_desc_t src_md, dst_md, ws_md;
    gb_cpu_prim_t fwd, bwd;
} gb_cpu_pool_t;

int gb_cpu_pool_init(gb_cpu_ctx_t *ctx, gb_cpu_pool_t *pl, const dnnl_memory_desc_t *src_md,
                     int max, int kh, int kw, int stride, int pad, const char *name, char *err,
                     size_t errlen);
int gb_cpu_pool_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_pool_t *pl, dnnl_memory_t src,
                    dnnl_memory_t dst, dnnl_memory_t ws, char *err, size_t errlen);
int gb_cpu_pool_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_pool_t *pl, dnnl_memory_t diff_dst,
                    dnnl_memory_t diff_src, dnnl_memory_t ws, char *err, size_t errlen);

/* ---- inner product (fully connected) with bias, f32 ---- */
typedef struct gb_cpu_fc {
    int n, c, k;                /* batch, input features, outputs */
    dnnl_memory_desc_t src_md;  /* as given (N, C) or (N, C, 1, 1) */
    dnnl_memory_desc_t dst_md;  /* f32 (N, K) plain */
    dnnl_memory_desc_t bias_md; /* f32 (K) */
    dnnl_memory_desc_t w_md;    /* master = diff_weights layout */
    dnnl_memory_desc_t wfwd_md, wbwd_md;
    int wfwd_is_master, wbwd_is_master, wbwd_is_fwd;
    gb_cpu_prim_t fwd, bwd_d, bwd_w, to_fwd, to_bwd;
} gb_cpu_fc_t;

int gb_cpu_fc_init(gb_cpu_ctx_t *ctx, gb_cpu_fc_t *fc, const dnnl_memory_desc_t *src_md, int k,
                   const char *name, char *err, size_t errlen);
int gb_cpu_fc_weights(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t w, dnnl_memory_t wfwd,
                      dnnl_memory_t wbwd, char *err, size_t errlen);
int gb_cpu_fc_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t src, dnnl_memory_t wfwd,
                  dnnl_memory_t bias, dnnl_memory_t dst, char *err, size_t errlen);
int gb_cpu_fc_bwd_data(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t diff_dst,
                       dnnl_memory_t wbwd, dnnl_memory_t diff_src, char *err, size_t errlen);
int gb_cpu_fc_bwd_weights(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t src,
                          dnnl_memory_t diff_dst, dnnl_memory_t diff_w, dnnl_memory_t diff_bias,
                          char *err, size_t errlen);

/* ---- a plain reorder primitive kept for every step (bf16 <-> f32 edges) ---- */
int gb_cpu_reorder_init(gb_cpu_ctx_t *ctx, gb_cpu_prim_t *pr, const dnnl_memory_desc_t *src_md,
                        const dnnl_memory_desc_t *dst_md, const char *name, char *err,
                        size_t errlen);
int gb_cpu_reorder(gb_cpu_ctx_t *ctx, const gb_cpu_prim_t *pr, dnnl_memory_t src, dnnl_memory_t dst,
                   char *err, size_t errlen);

/* ---- softmax cross-entropy (mean over the batch), plain C ----
 * logits (n, k) row-major f32; labels in [0, k). Writes dlogits = (softmax -
 * onehot) / n (may be NULL) and returns the mean loss. Accumulates in double. */
double gb_cpu_softmax_xent(const float *logits, const int32_t *labels, int n, int k,
                           float *dlogits);

/* ---- SGD with momentum and weight decay, torch.optim.SGD semantics ----
 * d = g + wd * w; b = first ? d : mu * b + d; w -= lr * b. g is not changed.
 * Elementwise, so any layout works as long as w, g and b share it. Returns
 * 1 when an updated weight is not finite (NaN or inf: the run diverged),
 * else 0. */
int gb_cpu_sgd(float *w, const float *g, float *b, size_t n, float lr, float mu, float wd,
               int first, int threads);

#endif
