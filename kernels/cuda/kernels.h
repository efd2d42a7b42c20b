/* kernels.h - launchers of the CUDA backend's own kernels (kernels.cu),
 * callable from C. Each enqueues on `stream`, never synchronizes, and returns
 * the launch status (cudaGetLastError), which callers check with CK_CUDA.
 * Element math lives in cuda_math.h; here are indexing and reductions.
 * Activations are NHWC in the compute dtype `dt`; statistics and BN/FC
 * parameters are fp32.
 */
#ifndef GB_CUDA_KERNELS_H
#define GB_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GB_KDT_F32 = 0, GB_KDT_F16 = 1, GB_KDT_BF16 = 2 } gb_kdtype_t;

/* Per-step scalars in device memory; copied to the host once per step. */
typedef struct gb_scaler_state {
    float scale;      /* current loss scale (1 without loss scaling) */
    int tracker;      /* clean steps since the last change */
    int found_inf;    /* this step's gradients had an inf/NaN */
    float used_scale; /* the scale this step's gradients carry */
    float loss;       /* this step's mean loss (unscaled) */
    /* sticky: the fused step's prologue coefficients of some batch norm
     * (a, b of bn(x) = a x + b, in the compute type) were finite in fp32 and
     * not in fp16 (|b| = |beta - mean gamma / std| > 65504: a channel whose
     * std is 65504 times smaller than its mean) */
    int coef_range;
    int pad[2];
} gb_scaler_state_t;

/* One batch norm's running-statistics update (all pointers device). */
typedef struct gb_bn_run_entry {
    const float *mean, *invstd; /* saved by the forward pass */
    float *rm, *rv;             /* running mean and variance */
    int c;
    float count; /* values per channel, n*h*w */
} gb_bn_run_entry_t;

/* The allreduce kind's known inputs (comm.h, gb_allreduce_input):
 * buf[i] = ((7i + 3 rank) mod 11) - 5, plus 1 at fault_index (a planted
 * fault for tests; -1: none). */
cudaError_t gb_k_ar_fill(cudaStream_t s, float *buf, size_t n, int rank, long long fault_index);
/* The check after timing: element i must equal want.v[i mod 11] (the exact
 * sum); *bad (device) grows by the count of those that do not. */
typedef struct gb_ar_want {
    float v[11];
} gb_ar_want_t;
cudaError_t gb_k_ar_check(cudaStream_t s, const float *buf, size_t n, gb_ar_want_t want,
                          unsigned int *bad);

cudaError_t gb_k_image_to_nhwc(cudaStream_t s, gb_kdtype_t dt, const float *src, void *dst, int n,
                               int h, int w, int c_int);
cudaError_t gb_k_synth(cudaStream_t s, float *images, int32_t *labels, int n, int h, int w,
                       int classes, uint64_t seed);
/* n values scale * N(0, 1) of cuda_math.h's generator, in dt */
cudaError_t gb_k_fill_normal(cudaStream_t s, gb_kdtype_t dt, void *dst, size_t n, uint64_t seed,
                             float scale);
cudaError_t gb_k_cast_from_f32(cudaStream_t s, gb_kdtype_t dt, const float *src, void *dst,
                               size_t n);
cudaError_t gb_k_cast_to_f32(cudaStream_t s, gb_kdtype_t dt, const void *src, float *dst, size_t n);
cudaError_t gb_k_maxpool_fwd(cudaStream_t s, gb_kdtype_t dt, const void *x, void *y, uint8_t *arg,
                             int n, int ih, int iw, int c, int oh, int ow, int k, int st, int p);
cudaError_t gb_k_maxpool_bwd(cudaStream_t s, gb_kdtype_t dt, const void *dy, const uint8_t *arg,
                             void *dx, int n, int ih, int iw, int c, int oh, int ow, int k, int st,
                             int p);
cudaError_t gb_k_avgpool_fwd(cudaStream_t s, gb_kdtype_t dt, const void *x, void *y, int n, int hw,
                             int c);
cudaError_t gb_k_avgpool_bwd(cudaStream_t s, gb_kdtype_t dt, const void *dy, void *dx, int n,
                             int hw, int c);
/* softmax cross-entropy on logits (n, k) fp32 + bias: row losses and
 * dlogits = (softmax - onehot) * scale / (n * replicas) in fp32 and in dt;
 * scaler NULL means scale 1. replicas > 1: the gradient of the mean over
 * every replica's batch, so that a sum of the replicas' gradients (NCCL's
 * ncclSum, which NVLS takes; ncclAvg is off NVLS) is their average */
cudaError_t gb_k_softmax_ce(cudaStream_t s, gb_kdtype_t dt, const float *logits, const float *bias,
                            const int32_t *labels, int n, int k, int replicas,
                            const gb_scaler_state_t *scaler, float *dlogits, void *dlogits_dt,
                            float *row_loss);
cudaError_t gb_k_loss_mean(cudaStream_t s, const float *row_loss, int n, float *out);
cudaError_t gb_k_colsum(cudaStream_t s, const float *a, int n, int k, float *out);
cudaError_t gb_k_bn_running(cudaStream_t s, const gb_bn_run_entry_t *table, int n_entries,
                            int max_c, float eps, float momentum);
cudaError_t gb_k_finite_check(cudaStream_t s, gb_kdtype_t dt, const void *a, size_t n,
                              int *found_inf);
/* SGD over n elements: grad in gdt, fp32 master w and momentum buf, optional
 * copy of w in cdt; skipped entirely when scaler->found_inf */
cudaError_t gb_k_sgd(cudaStream_t s, gb_kdtype_t gdt, float *w, float *buf, const void *grad,
                     void *wcopy, gb_kdtype_t cdt, size_t n, float lr, float mom, float wd,
                     const gb_scaler_state_t *scaler);
cudaError_t gb_k_scaler_update(cudaStream_t s, gb_scaler_state_t *st);

/* Load every kernel above on the current device now, not at its first
 * launch (before a communicator of several GPUs in one process). */
cudaError_t gb_k_preload(void);

/* Our NHWC batch norm (GB_CUDA_BN=own, and wherever cuDNN's is unavailable).
 * The reductions split the m rows into rchunks chunks (any count from 1 to
 * 65535 is correct); partials hold rchunks * c * 3 floats. Where c is a
 * multiple of 16 bytes' worth of elements and every pointer is 16-byte
 * aligned the kernels move 16 bytes per access, else one element.
 * gb_k_bn_rchunks: the chunk count for a GPU of sms SMs (about one wave of
 * reduction blocks, at least 8 rows per thread), assuming aligned pointers. */
int gb_k_bn_rchunks(gb_kdtype_t dt, long m, int c, int sms);
cudaError_t gb_k_bn_fwd_stats(cudaStream_t s, gb_kdtype_t dt, const void *x, long m, int c,
                              int rchunks, float *partials);
cudaError_t gb_k_bn_fwd_finalize(cudaStream_t s, const float *partials, int rchunks, int c,
                                 const float *gamma, const float *beta, float eps, float *save_mean,
                                 float *save_invstd, float *coef);
cudaError_t gb_k_bn_fwd_apply(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *z, void *y,
                              long m, int c, const float *coef, int relu);
/* Backward: the ReLU's mask from y, or, with pre (the fused step's prologue
 * coefficients in dt: a[c] then b[c]; y may then be NULL), from x
 * recomputed as the next conv's prologue computed it. Without relu y is
 * not read. */
cudaError_t gb_k_bn_bwd_reduce(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *y,
                               const void *dy, long m, int c, int relu, const void *pre,
                               const float *save_mean, int rchunks, float *partials);
cudaError_t gb_k_bn_bwd_finalize(cudaStream_t s, const float *partials, int rchunks, int c, long m,
                                 const float *gamma, const float *save_invstd, float *dgamma,
                                 float *dbeta, float *coef);
cudaError_t gb_k_bn_bwd_apply(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *y,
                              const void *dy, void *dx, void *dz, long m, int c, int relu,
                              const void *pre, const float *save_mean, const float *coef);

/* The fused step (exec.h). gb_k_bn_fin_sums: a batch norm over m values
 * per channel finalized from sums (sum[c] then sum of squares[c], fp32):
 * save_mean, save_invstd, fcoef (a[c] then b[c] of bn(x) = a x + b, fp32)
 * and pre (the same in the compute type, for the next conv's prologue);
 * *range (when not NULL) set to 1 where a coefficient finite in fp32 is not
 * in the compute type. gb_k_bn_apply2: y = relu?(a x + b + (zcoef ? za z + zb : z)). */
cudaError_t gb_k_bn_fin_sums(cudaStream_t s, gb_kdtype_t dt, const float *sums, long m, int c,
                             const float *gamma, const float *beta, float eps, float *save_mean,
                             float *save_invstd, float *fcoef, void *pre, int *range);
cudaError_t gb_k_bn_apply2(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *z, void *y,
                           long m, int c, const float *fcoef, const float *zcoef, int relu);

#ifdef __cplusplus
}
#endif

#endif
