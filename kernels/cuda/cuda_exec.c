/* cuda_exec.c - the CUDA executor: the ops of exec.h with cuDNN (convolutions,
 * batch norm with fused ReLU / add+ReLU, NHWC), cuBLAS (the classifier, fp32
 * accumulate) and our kernels (kernels.cu), on one stream of one device.
 *
 * Everything is allocated and every choice made in gb_cuda_exec_new: the
 * arena of the plan, the parameter slabs, cuDNN algorithms found once per
 * conv shape with cudnnFind*Ex on the real buffers (cached per shape), one
 * workspace sized to the largest choice, batch-norm reserve spaces. A step
 * then only enqueues work, so it can be captured in a CUDA graph.
 *
 * Precisions: fp32 (FMA math, no TF32 anywhere: conv math CUDNN_FMA_MATH and
 * only FMA results of cudnnFind accepted, no FFT/Winograd; cuBLAS
 * CUBLAS_COMPUTE_32F_PEDANTIC), tf32 (CUDNN_DEFAULT_MATH, CUBLAS_COMPUTE_32F_
 * FAST_TF32), fp16 and bf16 (16-bit activations and weight copies, fp32
 * master weights, fp32 accumulation; fp16 with dynamic loss scaling).
 *
 * Batch norm: cuDNN's Ex calls (CUDNN_BATCHNORM_SPATIAL_PERSISTENT, with
 * BN_ACTIVATION / BN_ADD_ACTIVATION fusions), tried once at creation per
 * layer, in every precision; a layer cuDNN refuses runs on our NHWC kernels
 * (GB_CUDA_BN=own|cudnn overrides, for tests and benchmarks;
 * GB_CUDA_LOSS_SCALE=2^k sets fp16's initial loss scale, for tests).
 * cuDNN is given no running statistics: one kernel updates every layer's
 * from the saved batch mean / inverse std with torch's unbiased variance, so
 * both implementations follow torch exactly.
 */
#include "cuda_exec.h"

#include "cuda_check.h"
#include "cuda_dp.h"
#include "cuda_math.h"
#include "fuse.h"
#include "kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BN_EPS        1e-5
#define BN_MOMENTUM   0.1f
#define BN_MODE       CUDNN_BATCHNORM_SPATIAL_PERSISTENT
#define SEARCH_WS_MAX ((size_t)2 << 30)
#define BLAS_WS_BYTES ((size_t)32 << 20)
#define MAX_ALLOCS    256

typedef struct cconv {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cfwd, cbd, cbf;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bd;
    cudnnConvolutionBwdFilterAlgo_t bf;
    cudnnMathType_t mfwd, mbd, mbf;
    size_t wsfwd, wsbd, wsbf;
    float tfwd, tbd, tbf; /* ms measured by cudnnFind */
    int same_as;          /* earlier conv of the same shape whose choice was reused, or -1 */
    /* the fused step (GB_CUDA_FUSE=1): this conv's forward graph (conv +
     * statistics, with the prologue when its input is a batch norm's) and
     * its wgrad with the prologue, or NULL; shared by convs of one shape
     * (the owner is in cuda_exec_t.fgraphs) */
    gb_fuse_t *ffwd, *fwg;
    float tffwd, tfwg; /* ms of the chosen plans, as timed at creation */
} cconv_t;

typedef struct cbn {
    cudnnTensorDescriptor_t xd, pd;
    cudnnBatchNormOps_t ops;
    int own; /* 1: our kernels */
    char why_own[96];
    void *reserve;
    size_t reserve_bytes, wsfwd, wsbwd;
    int rchunks; /* own kernels: row chunks of the reductions */
} cbn_t;

typedef struct cuda_exec {
    gb_exec_t base;
    gb_precision_t prec;
    gb_kdtype_t dt;
    cudnnDataType_t cdt;
    cudaDataType_t blas_t;
    cublasComputeType_t blas_compute;
    size_t esz; /* bytes per activation / group-A element */
    int device, sms;
    char device_name[128];
    float lr, mom, wd;
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    cudnnActivationDescriptor_t relu;
    cconv_t *convs;
    cbn_t *bns;
    /* device memory */
    float *master, *momentum; /* [A | B] fp32 */
    void *wcopy;              /* group A in dt (== master for fp32/tf32) */
    void *grads;              /* A in dt, then B fp32 at grad_b */
    size_t grad_b;
    float *buffers, *stats, *coef, *partials;
    void *ws;
    size_t ws_bytes;
    void *blas_ws;
    float *img;
    int32_t *labels;
    uint8_t *pool_arg;
    float *logits, *dlogits, *row_loss;
    void *dlogits_dt;
    gb_scaler_state_t *scaler;
    gb_bn_run_entry_t *run_table;
    gb_scaler_state_t *host_out; /* pinned */
    cudaEvent_t ev0, ev1;
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    int graph_used;
    char graph_note[256];
    long steps_done;
    /* cuDNN's persistent batch norm may flag a numerical problem only
     * through cudnnQueryRuntimeError: the first one seen, or "" */
    char bn_runtime[128];
    int n_cudnn_bns; /* layers on cuDNN's batch norm, counted after probe_bns */
    void *allocs[MAX_ALLOCS];
    int n_allocs;
    size_t bytes_now, bytes_peak, dev_used_peak;
    int bn_force;     /* 0 default, 1 own, 2 cudnn */
    int fp32_any;     /* GB_CUDA_FP32_ALGOS=any: fp32 takes FFT/Winograd too */
    gb_cuda_dp_t *dp; /* data parallel: NCCL and the gradient buckets, or NULL */
    /* the fused step (exec.h, fuse.h): asked for with GB_CUDA_FUSE=1; on
     * (base.fused) when every graph has a plan; fuse_note says why not */
    int fuse_asked;
    char fuse_note[256];
    gb_fuse_t **fgraphs; /* owned graphs, 2 per conv at most */
    int n_fgraphs;
    float *sums;  /* the last conv's statistics: sum[c], sum of squares[c] */
    float *fcoef; /* per batch norm, at stat_off: a[c], b[c] of bn(x) = a x + b */
    void *pre;    /* the same in the compute type, for the convs' prologues */
} cuda_exec_t;

#define ERR    X->base.err
#define ERRLEN sizeof(X->base.err)

static const char *prec_name(gb_precision_t p) {
    static const char *n[] = {"fp32", "tf32", "fp16", "bf16"};
    return (int)p >= 0 && (int)p < 4 ? n[p] : "?";
}

static int dalloc(cuda_exec_t *X, void *pp, size_t bytes) {
    void **p = pp;
    *p = NULL;
    if (bytes == 0) bytes = 256;
    if (X->n_allocs >= MAX_ALLOCS) {
        snprintf(ERR, ERRLEN, "internal: more than %d device allocations", MAX_ALLOCS);
        return -1;
    }
    CK_CUDA(cudaMalloc(p, bytes));
    /* recorded before anything else can fail, so destroy frees it */
    X->allocs[X->n_allocs++] = *p;
    X->bytes_now += bytes;
    if (X->bytes_now > X->bytes_peak) X->bytes_peak = X->bytes_now;
    CK_CUDA(cudaMemsetAsync(*p, 0, bytes, X->stream));
    return 0;
fail:
    snprintf(ERR + strlen(ERR), ERRLEN - strlen(ERR), " (%zu bytes; %zu allocated so far)", bytes,
             X->bytes_now);
    return -1;
}

static void sample_device_use(cuda_exec_t *X) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > X->dev_used_peak)
        X->dev_used_peak = tot - fr;
}

static void *conv_w(cuda_exec_t *X, const gb_plan_conv_t *c) {
    return (char *)X->wcopy + c->w_off * X->esz;
}
static void *conv_dw(cuda_exec_t *X, const gb_plan_conv_t *c) {
    return (char *)X->grads + c->w_off * X->esz;
}
static float *grad_b(cuda_exec_t *X, size_t off) {
    return (float *)((char *)X->grads + X->grad_b) + (off - X->base.plan->n_a);
}
static float *save_mean(cuda_exec_t *X, const gb_plan_bn_t *b) {
    return X->stats + b->stat_off;
}
static float *save_invstd(cuda_exec_t *X, const gb_plan_bn_t *b) {
    return X->stats + b->stat_off + b->g.c;
}

/* ---- ops ---- */

/* the fused step's prologue coefficients of batch norm b (scale, or bias),
 * in the compute type */
static void *pre_of(cuda_exec_t *X, const gb_plan_bn_t *b, int bias) {
    return (char *)X->pre + (b->stat_off + (bias ? (size_t)b->g.c : 0)) * X->esz;
}

static int cx_conv_fwd(gb_exec_t *ex, int ci, const void *x, void *y) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_conv_t *pc = &ex->plan->convs[ci];
    cconv_t *c = &X->convs[ci];
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnConvolutionForward(X->dnn, &one, c->xd, x, c->wd, conv_w(X, pc), c->cfwd, c->fwd,
                                   X->ws, X->ws_bytes, &zero, c->yd, y));
    return 0;
fail:
    return -1;
}

static int cx_conv_bwd_data(gb_exec_t *ex, int ci, const void *dy, void *dx, int accumulate) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_conv_t *pc = &ex->plan->convs[ci];
    cconv_t *c = &X->convs[ci];
    const float one = 1.0f, zero = 0.0f;
    if (!pc->dgrad) {
        snprintf(ERR, ERRLEN, "%s has no data gradient", pc->name);
        return -1;
    }
    CK_DNN(cudnnConvolutionBackwardData(X->dnn, &one, c->wd, conv_w(X, pc), c->yd, dy, c->cbd,
                                        c->bd, X->ws, X->ws_bytes, accumulate ? &one : &zero, c->xd,
                                        dx));
    return 0;
fail:
    return -1;
}

static int cx_conv_bwd_filter(gb_exec_t *ex, int ci, const void *x, const void *dy) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_conv_t *pc = &ex->plan->convs[ci];
    cconv_t *c = &X->convs[ci];
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnConvolutionBackwardFilter(X->dnn, &one, c->xd, x, c->yd, dy, c->cbf, c->bf, X->ws,
                                          X->ws_bytes, &zero, c->wd, conv_dw(X, pc)));
    return 0;
fail:
    return -1;
}

static int cx_bn_fwd(gb_exec_t *ex, int bi, const void *x, const void *z, void *y) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_bn_t *pb = &ex->plan->bns[bi];
    cbn_t *b = &X->bns[bi];
    const float *gamma = X->master + pb->gamma_off, *beta = X->master + pb->beta_off;
    if ((z != NULL) != (pb->z >= 0)) {
        snprintf(ERR, ERRLEN, "%s: residual input %s", pb->name, z ? "unexpected" : "missing");
        return -1;
    }
    if (b->own) {
        CK_CUDA(
            gb_k_bn_fwd_stats(X->stream, X->dt, x, pb->count, pb->g.c, b->rchunks, X->partials));
        CK_CUDA(gb_k_bn_fwd_finalize(X->stream, X->partials, b->rchunks, pb->g.c, gamma, beta,
                                     (float)BN_EPS, save_mean(X, pb), save_invstd(X, pb), X->coef));
        CK_CUDA(
            gb_k_bn_fwd_apply(X->stream, X->dt, x, z, y, pb->count, pb->g.c, X->coef, pb->relu));
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnBatchNormalizationForwardTrainingEx(
        X->dnn, BN_MODE, b->ops, &one, &zero, b->xd, x, z ? b->xd : NULL, z, b->xd, y, b->pd, gamma,
        beta, 0.0, NULL, NULL, BN_EPS, save_mean(X, pb), save_invstd(X, pb),
        pb->relu ? X->relu : NULL, X->ws, X->ws_bytes, b->reserve, b->reserve_bytes));
    return 0;
fail:
    return -1;
}

static int cx_bn_bwd(gb_exec_t *ex, int bi, const void *x, const void *y, const void *dy, void *dx,
                     void *dz) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_bn_t *pb = &ex->plan->bns[bi];
    cbn_t *b = &X->bns[bi];
    const float *gamma = X->master + pb->gamma_off, *beta = X->master + pb->beta_off;
    float *dgamma = grad_b(X, pb->gamma_off), *dbeta = grad_b(X, pb->beta_off);
    if ((dz != NULL) != (pb->z >= 0)) {
        snprintf(ERR, ERRLEN, "%s: residual gradient %s", pb->name, dz ? "unexpected" : "missing");
        return -1;
    }
    /* the fused step stored no output: our kernels recompute the ReLU's mask
     * from x with the prologue's coefficients (without a ReLU none is read) */
    const void *pre = NULL;
    if (!y) {
        if (!X->base.fused || !b->own || dz) {
            snprintf(ERR, ERRLEN, "%s: no output given outside the fused step", pb->name);
            return -1;
        }
        if (pb->relu) pre = pre_of(X, pb, 0);
        y = x;
    }
    if (b->own) {
        CK_CUDA(gb_k_bn_bwd_reduce(X->stream, X->dt, x, pre ? NULL : y, dy, pb->count, pb->g.c,
                                   pb->relu, pre, save_mean(X, pb), b->rchunks, X->partials));
        CK_CUDA(gb_k_bn_bwd_finalize(X->stream, X->partials, b->rchunks, pb->g.c, pb->count, gamma,
                                     save_invstd(X, pb), dgamma, dbeta, X->coef));
        CK_CUDA(gb_k_bn_bwd_apply(X->stream, X->dt, x, pre ? NULL : y, dy, dx, dz, pb->count,
                                  pb->g.c, pb->relu, pre, save_mean(X, pb), X->coef));
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnBatchNormalizationBackwardEx(
        X->dnn, BN_MODE, b->ops, &one, &zero, &one, &zero, b->xd, x, pb->relu ? b->xd : NULL,
        pb->relu ? y : NULL, b->xd, dy, dz ? b->xd : NULL, dz, b->xd, dx, b->pd, gamma,
        pb->relu ? beta : NULL, dgamma, dbeta, BN_EPS, save_mean(X, pb), save_invstd(X, pb),
        pb->relu ? X->relu : NULL, X->ws, X->ws_bytes, b->reserve, b->reserve_bytes));
    return 0;
fail:
    return -1;
}

/* ---- the fused step ---- */

/* the variant pack's pointers of conv ci: input x, prologue of pre_bn */
static void fuse_ptrs(cuda_exec_t *X, int ci, const void *x, int pre_bn,
                      void *ptr[GB_FUSE_NSLOTS]) {
    const gb_plan_t *p = X->base.plan;
    const gb_plan_conv_t *pc = &p->convs[ci];
    memset(ptr, 0, GB_FUSE_NSLOTS * sizeof(ptr[0]));
    ptr[GB_FUSE_X] = (void *)x;
    ptr[GB_FUSE_W] = conv_w(X, pc);
    ptr[GB_FUSE_DW] = conv_dw(X, pc);
    ptr[GB_FUSE_SUM] = X->sums;
    ptr[GB_FUSE_SQSUM] = X->sums + pc->g.k;
    if (pre_bn >= 0) {
        ptr[GB_FUSE_SCALE] = pre_of(X, &p->bns[pre_bn], 0);
        ptr[GB_FUSE_BIAS] = pre_of(X, &p->bns[pre_bn], 1);
    }
}

static int cx_conv_stats(gb_exec_t *ex, int ci, const void *x, int pre_bn, void *y, int stats_bn) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_conv_t *pc = &ex->plan->convs[ci];
    cconv_t *c = &X->convs[ci];
    void *ptr[GB_FUSE_NSLOTS];
    if (!c->ffwd || (pre_bn >= 0) != (gb_fuse_kind(c->ffwd) == GB_FUSE_SBR_CONV_STATS) ||
        stats_bn < 0 || ex->plan->bns[stats_bn].g.c != pc->g.k) {
        snprintf(ERR, ERRLEN,
                 "%s: no fused forward graph for this use (prologue %d, statistics %d)", pc->name,
                 pre_bn, stats_bn);
        return -1;
    }
    fuse_ptrs(X, ci, x, pre_bn, ptr);
    ptr[GB_FUSE_Y] = y;
    /* zeroed first: whether GenStats overwrites or adds to its sums is not
     * documented (test_cuda_fuse checks which on a GPU) */
    CK_CUDA(cudaMemsetAsync(X->sums, 0, 2 * (size_t)pc->g.k * sizeof(float), X->stream));
    return gb_fuse_run(c->ffwd, X->dnn, ptr, X->ws, ERR, ERRLEN);
fail:
    return -1;
}

static int cx_bn_finalize(gb_exec_t *ex, int bi) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_bn_t *pb = &ex->plan->bns[bi];
    CK_CUDA(gb_k_bn_fin_sums(X->stream, X->dt, X->sums, pb->count, pb->g.c,
                             X->master + pb->gamma_off, X->master + pb->beta_off, (float)BN_EPS,
                             save_mean(X, pb), save_invstd(X, pb), X->fcoef + pb->stat_off,
                             pre_of(X, pb, 0), &X->scaler->coef_range));
    return 0;
fail:
    return -1;
}

static int cx_bn_apply(gb_exec_t *ex, int bi, const void *x, const void *z, int zbn, void *y) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_bn_t *pb = &ex->plan->bns[bi];
    const float *zc = zbn >= 0 ? X->fcoef + ex->plan->bns[zbn].stat_off : NULL;
    CK_CUDA(gb_k_bn_apply2(X->stream, X->dt, x, z, y, pb->count, pb->g.c, X->fcoef + pb->stat_off,
                           zc, pb->relu));
    return 0;
fail:
    return -1;
}

static int cx_conv_bwd_filter(gb_exec_t *ex, int ci, const void *x, const void *dy);

static int cx_conv_bwd_filter_pre(gb_exec_t *ex, int ci, const void *x, int pre_bn,
                                  const void *dy) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    cconv_t *c = &X->convs[ci];
    void *ptr[GB_FUSE_NSLOTS];
    if (pre_bn < 0) return cx_conv_bwd_filter(ex, ci, x, dy);
    if (!c->fwg) {
        snprintf(ERR, ERRLEN, "%s: no fused wgrad graph", ex->plan->convs[ci].name);
        return -1;
    }
    fuse_ptrs(X, ci, x, pre_bn, ptr);
    ptr[GB_FUSE_DY] = (void *)dy;
    return gb_fuse_run(c->fwg, X->dnn, ptr, X->ws, ERR, ERRLEN);
}

static int cx_maxpool_fwd(gb_exec_t *ex, const void *x, void *y) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_model_t *m = ex->plan->m;
    CK_CUDA(gb_k_maxpool_fwd(X->stream, X->dt, x, y, X->pool_arg, ex->plan->n, m->pool_ih,
                             m->pool_iw, m->stem.k, m->pool_oh, m->pool_ow, m->pool_k,
                             m->pool_stride, m->pool_pad));
    return 0;
fail:
    return -1;
}

static int cx_maxpool_bwd(gb_exec_t *ex, const void *dy, void *dx) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_model_t *m = ex->plan->m;
    CK_CUDA(gb_k_maxpool_bwd(X->stream, X->dt, dy, X->pool_arg, dx, ex->plan->n, m->pool_ih,
                             m->pool_iw, m->stem.k, m->pool_oh, m->pool_ow, m->pool_k,
                             m->pool_stride, m->pool_pad));
    return 0;
fail:
    return -1;
}

static int cx_avgpool_fwd(gb_exec_t *ex, const void *x, void *y) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_model_t *m = ex->plan->m;
    CK_CUDA(
        gb_k_avgpool_fwd(X->stream, X->dt, x, y, ex->plan->n, m->feat_h * m->feat_w, m->feat_c));
    return 0;
fail:
    return -1;
}

static int cx_avgpool_bwd(gb_exec_t *ex, const void *dy, void *dx) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_model_t *m = ex->plan->m;
    CK_CUDA(
        gb_k_avgpool_bwd(X->stream, X->dt, dy, dx, ex->plan->n, m->feat_h * m->feat_w, m->feat_c));
    return 0;
fail:
    return -1;
}

static gb_scaler_state_t *loss_scaler(cuda_exec_t *X) {
    return X->prec == GB_PREC_FP16 ? X->scaler : NULL;
}

/* logits (N,K) = feat (N,F) W^T + b; loss; dW, db, dfeat. Row-major
 * matrices are column-major transposes, hence the operand order. */
static int cx_head(gb_exec_t *ex, const void *feat, void *dfeat) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    int N = p->n, K = p->m->cfg.n_classes, F = p->m->feat_c;
    const float one = 1.0f, zero = 0.0f;
    const void *W = (char *)X->wcopy + p->fc_w_off * X->esz;
    void *dW = (char *)X->grads + p->fc_w_off * X->esz;
    CK_BLAS(cublasGemmEx(X->blas, CUBLAS_OP_T, CUBLAS_OP_N, K, N, F, &one, W, X->blas_t, F, feat,
                         X->blas_t, F, &zero, X->logits, CUDA_R_32F, K, X->blas_compute,
                         CUBLAS_GEMM_DEFAULT));
    /* with replicas, the gradient of the mean over all of them: NCCL sums */
    CK_CUDA(gb_k_softmax_ce(X->stream, X->dt, X->logits, X->master + p->fc_b_off, X->labels, N, K,
                            X->dp ? gb_cuda_dp_world(X->dp) : 1, loss_scaler(X), X->dlogits,
                            X->dlogits_dt, X->row_loss));
    CK_CUDA(gb_k_loss_mean(X->stream, X->row_loss, N, &X->scaler->loss));
    CK_CUDA(gb_k_colsum(X->stream, X->dlogits, N, K, grad_b(X, p->fc_b_off)));
    /* dW (K,F) = dlogits^T (K,N) feat (N,F) */
    CK_BLAS(cublasGemmEx(X->blas, CUBLAS_OP_N, CUBLAS_OP_T, F, K, N, &one, feat, X->blas_t, F,
                         X->dlogits_dt, X->blas_t, K, &zero, dW, X->blas_t, F, X->blas_compute,
                         CUBLAS_GEMM_DEFAULT));
    /* dfeat (N,F) = dlogits (N,K) W (K,F) */
    CK_BLAS(cublasGemmEx(X->blas, CUBLAS_OP_N, CUBLAS_OP_N, F, N, K, &one, W, X->blas_t, F,
                         X->dlogits_dt, X->blas_t, K, &zero, dfeat, X->blas_t, F, X->blas_compute,
                         CUBLAS_GEMM_DEFAULT));
    return 0;
fail:
    return -1;
}

static int cx_bn_running(gb_exec_t *ex) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    CK_CUDA(gb_k_bn_running(X->stream, X->run_table, ex->plan->n_bns, ex->plan->max_bn_c,
                            (float)BN_EPS, BN_MOMENTUM));
    return 0;
fail:
    return -1;
}

static int cx_grad_done(gb_exec_t *ex, int tensor) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    return X->dp ? gb_cuda_dp_grad_done(X->dp, X->stream, tensor, ERR, ERRLEN) : 0;
}

static int cx_update(gb_exec_t *ex) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    gb_scaler_state_t *sc = loss_scaler(X);
    void *gb = (char *)X->grads + X->grad_b;
    /* the averaged gradients first: the overflow check and the update then
     * see the same values on every replica */
    if (X->dp && gb_cuda_dp_finish(X->dp, X->stream, ERR, ERRLEN)) return -1;
    if (sc) {
        CK_CUDA(cudaMemsetAsync(&X->scaler->found_inf, 0, sizeof(int), X->stream));
        CK_CUDA(gb_k_finite_check(X->stream, X->dt, X->grads, p->n_a, &X->scaler->found_inf));
        CK_CUDA(gb_k_finite_check(X->stream, GB_KDT_F32, gb, p->n_b, &X->scaler->found_inf));
    }
    void *copy = (X->wcopy == (void *)X->master) ? NULL : X->wcopy;
    CK_CUDA(gb_k_sgd(X->stream, X->dt, X->master, X->momentum, X->grads, copy, X->dt, p->n_a, X->lr,
                     X->mom, X->wd, sc));
    CK_CUDA(gb_k_sgd(X->stream, GB_KDT_F32, X->master + p->n_a, X->momentum + p->n_a, gb, NULL,
                     GB_KDT_F32, p->n_b, X->lr, X->mom, X->wd, sc));
    if (sc) CK_CUDA(gb_k_scaler_update(X->stream, X->scaler));
    CK_CUDA(cudaMemcpyAsync(X->host_out, X->scaler, sizeof(*X->host_out), cudaMemcpyDeviceToHost,
                            X->stream));
    return 0;
fail:
    return -1;
}

static int cx_step_begin(gb_exec_t *ex) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    if (X->dp) gb_cuda_dp_begin(X->dp);
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaEventRecord(X->ev0, X->stream));
    return 0;
fail:
    return -1;
}

/* After a finished step (the stream is idle): has cuDNN flagged a runtime
 * error (CUDNN_BATCHNORM_SPATIAL_PERSISTENT documents range limits that it
 * reports only this way)? The first one is kept for the report. */
static void check_bn_runtime(cuda_exec_t *X) {
    if (X->bn_runtime[0] || !X->n_cudnn_bns) return;
    cudnnStatus_t rs = CUDNN_STATUS_SUCCESS;
    cudnnStatus_t q = cudnnQueryRuntimeError(X->dnn, &rs, CUDNN_ERRQUERY_NONBLOCKING, NULL);
    if (q != CUDNN_STATUS_SUCCESS)
        snprintf(X->bn_runtime, sizeof(X->bn_runtime), "query failed: %s", cudnnGetErrorString(q));
    else if (rs != CUDNN_STATUS_SUCCESS)
        snprintf(X->bn_runtime, sizeof(X->bn_runtime), "%s, first seen after step %ld",
                 cudnnGetErrorString(rs), X->steps_done);
    if (X->bn_runtime[0]) fprintf(stderr, "cuda backend: cuDNN runtime error: %s\n", X->bn_runtime);
}

static int finish_step(cuda_exec_t *X, gb_step_out_t *out) {
    float ms = 0.0f;
    CK_CUDA(cudaEventRecord(X->ev1, X->stream));
    if (X->dp) {
        /* polled: a collective whose peer failed must not hang the step */
        if (gb_cuda_dp_wait(X->dp, X->ev1, ERR, ERRLEN)) return -1;
    } else {
        CK_CUDA(cudaEventSynchronize(X->ev1));
    }
    CK_CUDA(cudaEventElapsedTime(&ms, X->ev0, X->ev1));
    CK_CUDA(cudaGetLastError());
    out->ms = ms;
    out->loss = X->host_out->loss;
    out->skipped = X->prec == GB_PREC_FP16 ? X->host_out->found_inf != 0 : 0;
    /* not checked on the GPU yet (the CPU's SGD does: gb_cpu_sgd); a
     * diverged GPU run is caught by its loss only */
    out->nonfinite = 0;
    if (X->host_out->coef_range) {
        /* the fused forward fed inf to a conv: every number after it is
         * wrong, and the unfused step (fp32 coefficients) is not */
        snprintf(ERR, ERRLEN,
                 "step %ld: a batch norm's coefficient for the fused step's conv prologue is "
                 "past fp16's range (a channel whose mean is over 65504 times its standard "
                 "deviation); the unfused step (without GB_CUDA_FUSE=1) keeps it in fp32",
                 X->steps_done + 1);
        return -1;
    }
    X->steps_done++;
    check_bn_runtime(X);
    sample_device_use(X);
    return 0;
fail:
    return -1;
}

static int cx_step_end(gb_exec_t *ex, gb_step_out_t *out) {
    return finish_step((cuda_exec_t *)ex, out);
}

static int cx_capture_begin(gb_exec_t *ex) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    if (X->dp) gb_cuda_dp_begin(X->dp);
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaStreamBeginCapture(X->stream, cudaStreamCaptureModeThreadLocal));
    return 0;
fail:
    snprintf(X->graph_note, sizeof(X->graph_note), "capture did not start: %.200s", ERR);
    /* the step then runs eagerly: its first kernel launcher returns
     * cudaGetLastError, which must not find this (non-sticky) error */
    (void)cudaGetLastError();
    return -1;
}

static int cx_capture_end(gb_exec_t *ex, int ok) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    cudaGraph_t g = NULL;
    /* a comm stream forked into the capture and not joined back makes the
     * end fail: said, beside the op's own reason */
    int unjoined = !ok && X->dp && gb_cuda_dp_join_capture(X->dp, X->stream) != 0;
    cudaError_t e = cudaStreamEndCapture(X->stream, &g);
    if (!ok) {
        snprintf(X->graph_note, sizeof(X->graph_note), "capture failed, eager steps: %.150s%s",
                 ERR[0] ? ERR : "an op failed under capture",
                 unjoined ? " (and the comm stream could not be joined back)" : "");
        goto fail;
    }
    if (e != cudaSuccess || !g) {
        snprintf(X->graph_note, sizeof(X->graph_note), "capture failed, eager steps: %s",
                 cudaGetErrorString(e));
        goto fail;
    }
    e = cudaGraphInstantiate(&X->gexec, g, 0);
    if (e != cudaSuccess) {
        snprintf(X->graph_note, sizeof(X->graph_note), "graph instantiation failed, eager: %s",
                 cudaGetErrorString(e));
        X->gexec = NULL;
        goto fail;
    }
    X->graph = g;
    X->graph_used = 1;
    snprintf(X->graph_note, sizeof(X->graph_note), "whole step captured");
    return 0;
fail:
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError(); /* capture errors are not sticky; clear them */
    return -1;
}

static int cx_graph_agree(gb_exec_t *ex, int have_graph) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    if (!X->dp) return have_graph;
    int all = gb_cuda_dp_agree(X->dp, have_graph, ERR, ERRLEN);
    if (all < 0) return -1;
    if (!all && have_graph) {
        cudaGraphExecDestroy(X->gexec);
        cudaGraphDestroy(X->graph);
        X->gexec = NULL;
        X->graph = NULL;
        X->graph_used = 0;
        snprintf(X->graph_note, sizeof(X->graph_note),
                 "captured, but another rank's capture failed: eager steps on every rank");
    }
    return all;
}

static int cx_replay(gb_exec_t *ex, gb_step_out_t *out) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaEventRecord(X->ev0, X->stream));
    CK_CUDA(cudaGraphLaunch(X->gexec, X->stream));
    return finish_step(X, out);
fail:
    return -1;
}

/* ---- state in and out ---- */

static int cx_load_params(gb_exec_t *ex, const float *master, const float *buffers) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaMemcpyAsync(X->master, master, (p->n_a + p->n_b) * sizeof(float),
                            cudaMemcpyHostToDevice, X->stream));
    if (X->wcopy != (void *)X->master)
        CK_CUDA(gb_k_cast_from_f32(X->stream, X->dt, X->master, X->wcopy, p->n_a));
    /* new parameters restart the momentum, as the CPU engine's set_state */
    CK_CUDA(cudaMemsetAsync(X->momentum, 0, (p->n_a + p->n_b) * sizeof(float), X->stream));
    CK_CUDA(cudaMemcpyAsync(X->buffers, buffers, p->m->n_buffers * sizeof(float),
                            cudaMemcpyHostToDevice, X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    return 0;
fail:
    return -1;
}

static int cx_store_params(gb_exec_t *ex, float *master, float *buffers) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaMemcpyAsync(master, X->master, (p->n_a + p->n_b) * sizeof(float),
                            cudaMemcpyDeviceToHost, X->stream));
    CK_CUDA(cudaMemcpyAsync(buffers, X->buffers, p->m->n_buffers * sizeof(float),
                            cudaMemcpyDeviceToHost, X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    return 0;
fail:
    return -1;
}

static void to_float(gb_kdtype_t dt, const void *src, float *dst, size_t n) {
    const uint16_t *h = src;
    if (dt == GB_KDT_F32)
        memcpy(dst, src, n * sizeof(float));
    else if (dt == GB_KDT_F16)
        for (size_t i = 0; i < n; i++)
            dst[i] = gb_half_to_float(h[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = gb_bf16_to_float(h[i]);
}

static int cx_store_grads(gb_exec_t *ex, float *grads, float *scale) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    void *tmp = malloc(p->n_a * X->esz + 1);
    if (!tmp) {
        snprintf(ERR, ERRLEN, "out of host memory for gradients");
        return -1;
    }
    CK_CUDA(cudaSetDevice(X->device));
    CK_CUDA(cudaMemcpyAsync(tmp, X->grads, p->n_a * X->esz, cudaMemcpyDeviceToHost, X->stream));
    CK_CUDA(cudaMemcpyAsync(grads + p->n_a, (char *)X->grads + X->grad_b, p->n_b * sizeof(float),
                            cudaMemcpyDeviceToHost, X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    to_float(X->dt, tmp, grads, p->n_a);
    free(tmp);
    *scale = X->prec == GB_PREC_FP16 ? X->host_out->used_scale : 1.0f;
    return 0;
fail:
    free(tmp);
    return -1;
}

static int cx_load_batch(gb_exec_t *ex, const float *images, const int32_t *labels, uint64_t seed) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    int h = p->m->cfg.image_h, w = p->m->cfg.image_w;
    CK_CUDA(cudaSetDevice(X->device));
    if (images) {
        CK_CUDA(cudaMemcpyAsync(X->img, images, (size_t)p->n * 3 * h * w * sizeof(float),
                                cudaMemcpyHostToDevice, X->stream));
        CK_CUDA(cudaMemcpyAsync(X->labels, labels, (size_t)p->n * sizeof(int32_t),
                                cudaMemcpyHostToDevice, X->stream));
    } else {
        CK_CUDA(gb_k_synth(X->stream, X->img, X->labels, p->n, h, w, p->m->cfg.n_classes, seed));
    }
    CK_CUDA(gb_k_image_to_nhwc(X->stream, X->dt, X->img, gb_exec_act(ex, p->x0), p->n, h, w,
                               p->stem_c));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    return 0;
fail:
    return -1;
}

static int cx_act_write(gb_exec_t *ex, void *dst, const double *src, size_t n) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    void *tmp = malloc(n * X->esz + 1);
    if (!tmp) {
        snprintf(ERR, ERRLEN, "out of host memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (X->dt == GB_KDT_F32)
            ((float *)tmp)[i] = (float)src[i];
        else if (X->dt == GB_KDT_F16)
            ((uint16_t *)tmp)[i] = gb_float_to_half((float)src[i]);
        else
            ((uint16_t *)tmp)[i] = gb_float_to_bf16((float)src[i]);
    }
    CK_CUDA(cudaMemcpyAsync(dst, tmp, n * X->esz, cudaMemcpyHostToDevice, X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    free(tmp);
    return 0;
fail:
    free(tmp);
    return -1;
}

static int cx_act_read(gb_exec_t *ex, const void *src, double *dst, size_t n) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    float *f = malloc(n * sizeof(float) + 1);
    void *tmp = malloc(n * X->esz + 1);
    if (!f || !tmp) {
        free(f);
        free(tmp);
        snprintf(ERR, ERRLEN, "out of host memory");
        return -1;
    }
    CK_CUDA(cudaMemcpyAsync(tmp, src, n * X->esz, cudaMemcpyDeviceToHost, X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    to_float(X->dt, tmp, f, n);
    for (size_t i = 0; i < n; i++)
        dst[i] = f[i];
    free(f);
    free(tmp);
    return 0;
fail:
    free(f);
    free(tmp);
    return -1;
}

/* ---- report: a JSON object of the choices made ---- */

typedef struct jbuf {
    char *s;
    size_t len, cap;
    int oom;
} jbuf_t;

static void jputf(jbuf_t *j, const char *fmt, ...) {
    if (j->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(j->s ? j->s + j->len : NULL, j->s ? j->cap - j->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            j->oom = 1;
            return;
        }
        if (j->s && j->len + (size_t)n < j->cap) {
            j->len += (size_t)n;
            return;
        }
        size_t cap = (j->cap ? j->cap * 2 : 4096) + (size_t)n;
        char *s = realloc(j->s, cap);
        if (!s) {
            j->oom = 1;
            return;
        }
        j->s = s;
        j->cap = cap;
    }
}

/* A JSON string body: quotes, backslashes and control bytes escaped. */
static void jstr(jbuf_t *j, const char *s) {
    jputf(j, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            jputf(j, "\\%c", c);
        else if (c < 0x20)
            jputf(j, "\\u%04x", c);
        else
            jputf(j, "%c", c);
    }
    jputf(j, "\"");
}

static const char *fwd_name(int a) {
    static const char *n[] = {
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
        "WINOGRAD",      "WINOGRAD_NONFUSED"};
    return a >= 0 && a < 8 ? n[a] : "?";
}
static const char *bd_name(int a) {
    static const char *n[] = {"ALGO_0",     "ALGO_1",   "FFT",
                              "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    return a >= 0 && a < 6 ? n[a] : "?";
}
static const char *bf_name(int a) {
    static const char *n[] = {
        "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    return a >= 0 && a < 7 ? n[a] : "?";
}
static const char *math_name(cudnnMathType_t m) {
    switch (m) {
    case CUDNN_DEFAULT_MATH:
        return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH:
        return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
        return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
        return "FMA";
    }
    return "?";
}

static int cx_report(gb_exec_t *ex, gb_replica_report_t *rep) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    const gb_plan_t *p = ex->plan;
    sample_device_use(X);
    jbuf_t j = {0};
    int own = 0;
    for (int i = 0; i < p->n_bns; i++)
        own += X->bns[i].own;
    jputf(&j, "{\"device\":");
    jstr(&j, X->device_name);
    jputf(&j, ",\"precision\":\"%s\",\"stem_channels\":%d,\"cuda_graph\":%s,\"cuda_graph_note\":",
          prec_name(X->prec), p->stem_c, X->graph_used ? "true" : "false");
    jstr(&j, X->graph_note);
    jputf(&j, ",\"workspace_bytes\":%zu,\"allocated_bytes\":%zu,\"device_used_peak_bytes\":%zu",
          X->ws_bytes, X->bytes_peak, X->dev_used_peak);
    if (X->prec == GB_PREC_FP32)
        jputf(&j, ",\"fp32_algorithms\":\"%s\"", X->fp32_any ? "any" : "fma");
    jputf(&j, ",\"fused_step\":%s,\"fused_note\":", X->base.fused ? "true" : "false");
    jstr(&j, X->fuse_note);
    jputf(&j, ",\"loss_scale\":%g,\"cudnn_runtime_error\":", (double)X->host_out->scale);
    if (X->bn_runtime[0])
        jstr(&j, X->bn_runtime);
    else
        jputf(&j, "null");
    jputf(&j, ",\"batchnorm\":{\"cudnn\":%d,\"own\":%d,\"layers\":[", p->n_bns - own, own);
    for (int i = 0; i < p->n_bns; i++) {
        jputf(&j, "%s{\"name\":", i ? "," : "");
        jstr(&j, p->bns[i].name);
        jputf(&j, ",\"impl\":\"%s\"", X->bns[i].own ? "own" : "cudnn");
        if (X->bns[i].own) {
            jputf(&j, ",\"why\":");
            jstr(&j, X->bns[i].why_own);
        }
        jputf(&j, "}");
    }
    jputf(&j, "]},\"convs\":[");
    for (int i = 0; i < p->n_convs; i++) {
        const cconv_t *c = &X->convs[i];
        const gb_plan_conv_t *pc = &p->convs[i];
        jputf(&j, "%s{\"name\":", i ? "," : "");
        jstr(&j, pc->name);
        jputf(&j,
              ",\"shape\":\"%dx%dx%dx%d k%d %dx%d s%d p%d\",\"fwd\":{\"algo\":\"%s\",\"math\":"
              "\"%s\",\"ws\":%zu,\"ms\":%.4f}",
              p->n, pc->g.ih, pc->g.iw, pc->c_int, pc->g.k, pc->g.kh, pc->g.kw, pc->g.stride,
              pc->g.pad, fwd_name(c->fwd), math_name(c->mfwd), c->wsfwd, (double)c->tfwd);
        if (pc->dgrad)
            jputf(&j, ",\"bwd_data\":{\"algo\":\"%s\",\"math\":\"%s\",\"ws\":%zu,\"ms\":%.4f}",
                  bd_name(c->bd), math_name(c->mbd), c->wsbd, (double)c->tbd);
        jputf(&j, ",\"bwd_filter\":{\"algo\":\"%s\",\"math\":\"%s\",\"ws\":%zu,\"ms\":%.4f}",
              bf_name(c->bf), math_name(c->mbf), c->wsbf, (double)c->tbf);
        if (c->same_as >= 0) jputf(&j, ",\"same_as\":\"%s\"", p->convs[c->same_as].name);
        if (X->base.fused && c->ffwd)
            jputf(&j, ",\"fused_fwd\":{\"graph\":\"%s\",\"engine\":\"%s\",\"ws\":%zu,\"ms\":%.4f}",
                  gb_fuse_kind_name(gb_fuse_kind(c->ffwd)),
                  gb_fuse_engine(c->ffwd, gb_fuse_chosen(c->ffwd)),
                  gb_fuse_workspace(c->ffwd, gb_fuse_chosen(c->ffwd)), (double)c->tffwd);
        if (X->base.fused && c->fwg)
            jputf(&j, ",\"fused_wgrad\":{\"engine\":\"%s\",\"ws\":%zu,\"ms\":%.4f}",
                  gb_fuse_engine(c->fwg, gb_fuse_chosen(c->fwg)),
                  gb_fuse_workspace(c->fwg, gb_fuse_chosen(c->fwg)), (double)c->tfwg);
        jputf(&j, "}");
    }
    jputf(&j, "]");
    if (X->dp) {
        char *d = gb_cuda_dp_report(X->dp);
        if (d)
            jputf(&j, ",%s", d);
        else
            j.oom = 1;
        free(d);
    }
    jputf(&j, "}");
    if (j.oom) {
        free(j.s);
        snprintf(ERR, ERRLEN, "out of memory writing the report");
        return -1;
    }
    rep->peak_mem_bytes = X->bytes_peak;
    rep->details_json = j.s;
    return 0;
}

/* ---- creation ---- */

static void cx_destroy(gb_exec_t **self_p) {
    if (!self_p || !*self_p) return;
    cuda_exec_t *X = (cuda_exec_t *)*self_p;
    cudaSetDevice(X->device);
    /* The graphs first: ncclCommAbort and ncclCommDestroy both wait until
     * every CUDA graph that captured the communicator's collectives is gone
     * (NCCL 2.28 commDestroySync: "keep polling until all graphs referencing
     * us die"), so an abort with the step's graph alive never returned: a
     * replica that failed after its step was captured hung in its teardown.
     * A launch still in flight is freed when it ends (CUDA defers it), which
     * the abort's flag brings about when a collective cannot end. */
    if (X->gexec) cudaGraphExecDestroy(X->gexec);
    if (X->graph) cudaGraphDestroy(X->graph);
    X->gexec = NULL;
    X->graph = NULL;
    /* a group that failed may have left collectives that never end on this
     * stream: abort the communicator before waiting on it (no-op otherwise) */
    if (X->dp) gb_cuda_dp_stop_if_failed(X->dp);
    if (X->stream) cudaStreamSynchronize(X->stream);
    gb_cuda_dp_destroy(&X->dp);
    if (X->convs) {
        for (int i = 0; i < X->base.plan->n_convs; i++) {
            cconv_t *c = &X->convs[i];
            if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
            if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
            if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
            if (c->cfwd) cudnnDestroyConvolutionDescriptor(c->cfwd);
            if (c->cbd) cudnnDestroyConvolutionDescriptor(c->cbd);
            if (c->cbf) cudnnDestroyConvolutionDescriptor(c->cbf);
        }
        free(X->convs);
    }
    if (X->bns) {
        for (int i = 0; i < X->base.plan->n_bns; i++) {
            if (X->bns[i].xd) cudnnDestroyTensorDescriptor(X->bns[i].xd);
            if (X->bns[i].pd) cudnnDestroyTensorDescriptor(X->bns[i].pd);
        }
        free(X->bns);
    }
    for (int i = 0; i < X->n_fgraphs; i++)
        gb_fuse_destroy(&X->fgraphs[i]);
    free(X->fgraphs);
    if (X->relu) cudnnDestroyActivationDescriptor(X->relu);
    if (X->blas) cublasDestroy(X->blas);
    if (X->dnn) cudnnDestroy(X->dnn);
    for (int i = 0; i < X->n_allocs; i++)
        cudaFree(X->allocs[i]);
    if (X->host_out) cudaFreeHost(X->host_out);
    if (X->ev0) cudaEventDestroy(X->ev0);
    if (X->ev1) cudaEventDestroy(X->ev1);
    if (X->stream) cudaStreamDestroy(X->stream);
    free(X);
    *self_p = NULL;
}

static const gb_exec_ops_t cuda_ops = {
    .name = "cuda",
    .destroy = cx_destroy,
    .load_params = cx_load_params,
    .store_params = cx_store_params,
    .store_grads = cx_store_grads,
    .load_batch = cx_load_batch,
    .step_begin = cx_step_begin,
    .conv_fwd = cx_conv_fwd,
    .conv_bwd_data = cx_conv_bwd_data,
    .conv_bwd_filter = cx_conv_bwd_filter,
    .bn_fwd = cx_bn_fwd,
    .bn_bwd = cx_bn_bwd,
    .conv_stats = cx_conv_stats,
    .bn_finalize = cx_bn_finalize,
    .bn_apply = cx_bn_apply,
    .conv_bwd_filter_pre = cx_conv_bwd_filter_pre,
    .maxpool_fwd = cx_maxpool_fwd,
    .maxpool_bwd = cx_maxpool_bwd,
    .avgpool_fwd = cx_avgpool_fwd,
    .avgpool_bwd = cx_avgpool_bwd,
    .head = cx_head,
    .bn_running = cx_bn_running,
    .grad_done = cx_grad_done,
    .update = cx_update,
    .step_end = cx_step_end,
    .capture_begin = cx_capture_begin,
    .capture_end = cx_capture_end,
    .replay = cx_replay,
    .graph_agree = cx_graph_agree,
    .report = cx_report,
    .act_write = cx_act_write,
    .act_read = cx_act_read,
};

static int same_shape(const gb_plan_conv_t *a, const gb_plan_conv_t *b) {
    return a->c_int == b->c_int && a->g.k == b->g.k && a->g.kh == b->g.kh && a->g.kw == b->g.kw &&
           a->g.stride == b->g.stride && a->g.pad == b->g.pad && a->g.ih == b->g.ih &&
           a->g.iw == b->g.iw && a->dgrad == b->dgrad;
}

/* fp32 keeps to FMA math and leaves out the reduced-accuracy algorithms, so
 * "fp32" means fp32 arithmetic throughout. GB_CUDA_FP32_ALGOS=any lets it
 * take FFT and Winograd too (still FMA math), as PyTorch's fp32 with TF32
 * off does: on the H200 ours ran at 0.78x PyTorch's fp32, and this says
 * whether the restriction is why (an experiment: not the default until a
 * GPU run shows its accuracy). Find may return results under
 * another math type than the descriptor's; fp32 data (tf32) never takes
 * CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which would run it in fp16. */
static int other_ok(const cuda_exec_t *X, cudnnMathType_t m) {
    return !(X->cdt == CUDNN_DATA_FLOAT && m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}
static int fwd_ok(const cuda_exec_t *X, const cudnnConvolutionFwdAlgoPerf_t *r, size_t lim) {
    if (r->status != CUDNN_STATUS_SUCCESS || r->memory > lim) return 0;
    if (X->prec != GB_PREC_FP32) return other_ok(X, r->mathType);
    if (X->fp32_any) return r->mathType == CUDNN_FMA_MATH;
    return r->mathType == CUDNN_FMA_MATH && r->algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT &&
           r->algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
           r->algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
           r->algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
static int bd_ok(const cuda_exec_t *X, const cudnnConvolutionBwdDataAlgoPerf_t *r, size_t lim) {
    if (r->status != CUDNN_STATUS_SUCCESS || r->memory > lim) return 0;
    if (X->prec != GB_PREC_FP32) return other_ok(X, r->mathType);
    if (X->fp32_any) return r->mathType == CUDNN_FMA_MATH;
    return r->mathType == CUDNN_FMA_MATH && (r->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 ||
                                             r->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
}
static int bf_ok(const cuda_exec_t *X, const cudnnConvolutionBwdFilterAlgoPerf_t *r, size_t lim) {
    if (r->status != CUDNN_STATUS_SUCCESS || r->memory > lim) return 0;
    if (X->prec != GB_PREC_FP32) return other_ok(X, r->mathType);
    if (X->fp32_any) return r->mathType == CUDNN_FMA_MATH;
    return r->mathType == CUDNN_FMA_MATH && (r->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
                                             r->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
                                             r->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3);
}

static int setup_conv(cuda_exec_t *X, int i, cudnnMathType_t math) {
    const gb_plan_conv_t *pc = &X->base.plan->convs[i];
    cconv_t *c = &X->convs[i];
    int n = X->base.plan->n, on, oc, oh, ow;
    c->same_as = -1;
    CK_DNN(cudnnCreateTensorDescriptor(&c->xd));
    CK_DNN(cudnnCreateTensorDescriptor(&c->yd));
    CK_DNN(cudnnCreateFilterDescriptor(&c->wd));
    CK_DNN(cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, X->cdt, n, pc->c_int, pc->g.ih,
                                      pc->g.iw));
    CK_DNN(cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, X->cdt, n, pc->g.k, pc->g.oh,
                                      pc->g.ow));
    CK_DNN(cudnnSetFilter4dDescriptor(c->wd, X->cdt, CUDNN_TENSOR_NHWC, pc->g.k, pc->c_int,
                                      pc->g.kh, pc->g.kw));
    cudnnConvolutionDescriptor_t *cds[3] = {&c->cfwd, &c->cbd, &c->cbf};
    for (int d = 0; d < 3; d++) {
        CK_DNN(cudnnCreateConvolutionDescriptor(cds[d]));
        CK_DNN(cudnnSetConvolution2dDescriptor(*cds[d], pc->g.pad, pc->g.pad, pc->g.stride,
                                               pc->g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));
        CK_DNN(cudnnSetConvolutionMathType(*cds[d], math));
    }
    CK_DNN(cudnnGetConvolution2dForwardOutputDim(c->cfwd, c->xd, c->wd, &on, &oc, &oh, &ow));
    if (on != n || oc != pc->g.k || oh != pc->g.oh || ow != pc->g.ow) {
        snprintf(ERR, ERRLEN, "%s: cuDNN output %dx%dx%dx%d, model says %dx%dx%dx%d", pc->name, on,
                 oc, oh, ow, n, pc->g.k, pc->g.oh, pc->g.ow);
        return -1;
    }
    return 0;
fail:
    return -1;
}

/* Find returns up to ...AlgorithmMaxCount results, sorted by time: each
 * algorithm under the descriptor's math type and under CUDNN_DEFAULT_MATH,
 * which it also tries. Asked for only ..._ALGO_COUNT, the fast TF32
 * (DEFAULT_MATH) results of an fp32 convolution could fill the list and
 * leave no FMA one to take. FIND_MAX bounds the arrays on the stack. */
#define FIND_MAX 64
static int find_max(int n) {
    return n < 1 ? 1 : n > FIND_MAX ? FIND_MAX : n;
}

static int find_conv(cuda_exec_t *X, int i, void *sws, size_t sws_bytes) {
    const gb_plan_conv_t *pc = &X->base.plan->convs[i];
    cconv_t *c = &X->convs[i];
    for (int j = 0; j < i; j++)
        if (same_shape(&X->base.plan->convs[j], pc)) {
            cconv_t *o = &X->convs[j];
            c->fwd = o->fwd;
            c->bd = o->bd;
            c->bf = o->bf;
            c->mfwd = o->mfwd;
            c->mbd = o->mbd;
            c->mbf = o->mbf;
            c->wsfwd = o->wsfwd;
            c->wsbd = o->wsbd;
            c->wsbf = o->wsbf;
            c->tfwd = o->tfwd;
            c->tbd = o->tbd;
            c->tbf = o->tbf;
            c->same_as = o->same_as >= 0 ? o->same_as : j;
            goto set_math;
        }
    {
        void *x = gb_exec_act(&X->base, pc->x), *y = gb_exec_act(&X->base, pc->y);
        void *w = conv_w(X, pc), *dw = conv_dw(X, pc);
        int got = 0, k, nf = 0, nd = 0, nw = 0;
        CK_DNN(cudnnGetConvolutionForwardAlgorithmMaxCount(X->dnn, &nf));
        CK_DNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(X->dnn, &nd));
        CK_DNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(X->dnn, &nw));
        cudnnConvolutionFwdAlgoPerf_t rf[FIND_MAX];
        CK_DNN(cudnnFindConvolutionForwardAlgorithmEx(X->dnn, c->xd, x, c->wd, w, c->cfwd, c->yd, y,
                                                      find_max(nf), &got, rf, sws, sws_bytes));
        for (k = 0; k < got && !fwd_ok(X, &rf[k], sws_bytes); k++) {
        }
        if (k == got) {
            snprintf(ERR, ERRLEN, "%s: no usable forward algorithm (%d tried, precision %s)",
                     pc->name, got, prec_name(X->prec));
            return -1;
        }
        c->fwd = rf[k].algo;
        c->mfwd = rf[k].mathType;
        c->wsfwd = rf[k].memory;
        c->tfwd = rf[k].time;
        if (pc->dgrad) {
            cudnnConvolutionBwdDataAlgoPerf_t rd[FIND_MAX];
            /* dx is written into a gradient scratch buffer (y's gradient is
             * the y buffer itself here: only timing matters during Find) */
            void *dx = gb_exec_grad(&X->base, 0);
            CK_DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(X->dnn, c->wd, w, c->yd, y, c->cbd,
                                                               c->xd, dx, find_max(nd), &got, rd,
                                                               sws, sws_bytes));
            for (k = 0; k < got && !bd_ok(X, &rd[k], sws_bytes); k++) {
            }
            if (k == got) {
                snprintf(ERR, ERRLEN, "%s: no usable backward-data algorithm (%d tried)", pc->name,
                         got);
                return -1;
            }
            c->bd = rd[k].algo;
            c->mbd = rd[k].mathType;
            c->wsbd = rd[k].memory;
            c->tbd = rd[k].time;
        }
        cudnnConvolutionBwdFilterAlgoPerf_t rw[FIND_MAX];
        CK_DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            X->dnn, c->xd, x, c->yd, y, c->cbf, c->wd, dw, find_max(nw), &got, rw, sws, sws_bytes));
        for (k = 0; k < got && !bf_ok(X, &rw[k], sws_bytes); k++) {
        }
        if (k == got) {
            snprintf(ERR, ERRLEN, "%s: no usable backward-filter algorithm (%d tried)", pc->name,
                     got);
            return -1;
        }
        c->bf = rw[k].algo;
        c->mbf = rw[k].mathType;
        c->wsbf = rw[k].memory;
        c->tbf = rw[k].time;
    }
set_math:
    /* execution uses the math type the chosen algorithm was timed with. The
     * workspace is asked for again under it (Find ran under the descriptor's
     * math type, which may differ) and the larger size kept; a query cuDNN
     * cannot answer leaves Find's figure. */
    CK_DNN(cudnnSetConvolutionMathType(c->cfwd, c->mfwd));
    if (pc->dgrad) CK_DNN(cudnnSetConvolutionMathType(c->cbd, c->mbd));
    CK_DNN(cudnnSetConvolutionMathType(c->cbf, c->mbf));
    {
        size_t ws = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(X->dnn, c->xd, c->wd, c->cfwd, c->yd, c->fwd,
                                                    &ws) == CUDNN_STATUS_SUCCESS &&
            ws > c->wsfwd)
            c->wsfwd = ws;
        ws = 0;
        if (pc->dgrad &&
            cudnnGetConvolutionBackwardDataWorkspaceSize(X->dnn, c->wd, c->yd, c->cbd, c->xd, c->bd,
                                                         &ws) == CUDNN_STATUS_SUCCESS &&
            ws > c->wsbd)
            c->wsbd = ws;
        ws = 0;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(X->dnn, c->xd, c->yd, c->cbf, c->wd,
                                                           c->bf, &ws) == CUDNN_STATUS_SUCCESS &&
            ws > c->wsbf)
            c->wsbf = ws;
    }
    return 0;
fail:
    return -1;
}

static void bn_own(cbn_t *b, const char *fmt, ...) {
    b->own = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why_own, sizeof(b->why_own), fmt, ap);
    va_end(ap);
}

/* Descriptors and sizes of one BN; cuDNN declining is not an error. */
static int setup_bn(cuda_exec_t *X, int i) {
    const gb_plan_bn_t *pb = &X->base.plan->bns[i];
    cbn_t *b = &X->bns[i];
    CK_DNN(cudnnCreateTensorDescriptor(&b->xd));
    CK_DNN(cudnnCreateTensorDescriptor(&b->pd));
    CK_DNN(cudnnSetTensor4dDescriptor(b->xd, CUDNN_TENSOR_NHWC, X->cdt, X->base.plan->n, pb->g.c,
                                      pb->g.h, pb->g.w));
    b->ops = pb->z >= 0 ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
             : pb->relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                        : CUDNN_BATCHNORM_OPS_BN;
    /* our kernels' reduction split (kernels.cu: one wave of blocks); the
     * partials buffer is sized from it below */
    b->rchunks = gb_k_bn_rchunks(X->dt, pb->count, pb->g.c, X->sms);
    if (X->bn_force == 1) {
        bn_own(b, "GB_CUDA_BN=own");
        return 0;
    }
    /* gamma, beta, the saved mean and inverse std are fp32 (group B and the
     * statistics area). cuDNN says which type it wants through the derived
     * descriptor: FLOAT for HALF and FLOAT data; for other data types it may
     * keep the data type, and handing fp32 arrays to a layer that reads them
     * as bf16 would be silently wrong, so such a layer runs on our kernels. */
    cudnnStatus_t s = cudnnDeriveBNTensorDescriptor(b->pd, b->xd, BN_MODE);
    if (s != CUDNN_STATUS_SUCCESS) {
        bn_own(b, "cudnnDeriveBNTensorDescriptor: %s", cudnnGetErrorString(s));
        return 0;
    }
    {
        cudnnDataType_t pt;
        int dn, dc, dh, dw, sn, sc, sh, sw;
        CK_DNN(cudnnGetTensor4dDescriptor(b->pd, &pt, &dn, &dc, &dh, &dw, &sn, &sc, &sh, &sw));
        if (pt != CUDNN_DATA_FLOAT || dn != 1 || dc != pb->g.c || dh != 1 || dw != 1) {
            bn_own(b,
                   "cuDNN wants BN parameters of type %d, shape %dx%dx%dx%d (ours: fp32 1x%dx1x1)",
                   (int)pt, dn, dc, dh, dw, pb->g.c);
            return 0;
        }
    }
    cudnnActivationDescriptor_t act = pb->relu ? X->relu : NULL;
    /* yDesc is given to the size query even without an activation, as
     * PyTorch, XLA and Paddle do; the call itself gets NULL then */
    cudnnTensorDescriptor_t zd = pb->z >= 0 ? b->xd : NULL, yd = b->xd;
    s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(X->dnn, BN_MODE, b->ops, b->xd, zd,
                                                                 b->xd, b->pd, act, &b->wsfwd);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
            X->dnn, BN_MODE, b->ops, b->xd, yd, b->xd, zd, b->xd, b->pd, act, &b->wsbwd);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(X->dnn, BN_MODE, b->ops, act,
                                                                 b->xd, &b->reserve_bytes);
    if (s != CUDNN_STATUS_SUCCESS) bn_own(b, "cuDNN sizes: %s", cudnnGetErrorString(s));
    return 0;
fail:
    return -1;
}

/* Run each cuDNN BN once, forward and backward, on the (zeroed) real
 * buffers; a layer cuDNN declines moves to our kernels. */
static int probe_bns(cuda_exec_t *X) {
    const gb_plan_t *p = X->base.plan;
    for (int i = 0; i < p->n_bns; i++) {
        cbn_t *b = &X->bns[i];
        if (b->own) continue;
        const gb_plan_bn_t *pb = &p->bns[i];
        void *x = gb_exec_act(&X->base, pb->x), *y = gb_exec_act(&X->base, pb->y);
        void *z = pb->z >= 0 ? gb_exec_act(&X->base, pb->z) : NULL;
        void *dx = gb_exec_grad(&X->base, 0), *dz = pb->z >= 0 ? gb_exec_grad(&X->base, 1) : NULL;
        void *dy = gb_exec_grad(&X->base, 2);
        if (cx_bn_fwd(&X->base, i, x, z, y) || cx_bn_bwd(&X->base, i, x, y, dy, dx, dz)) {
            bn_own(b, "cuDNN declined: %.80s", ERR);
            ERR[0] = 0;
            (void)cudaGetLastError(); /* a failed launch inside cuDNN is not ours */
        }
    }
    CK_CUDA(cudaStreamSynchronize(X->stream));
    CK_CUDA(cudaGetLastError());
    return 0;
fail:
    return -1;
}

/* ms of one run of f's chosen plan: 2 untimed, the mean of 3 */
static float time_fuse(cuda_exec_t *X, gb_fuse_t *f, void *ptr[GB_FUSE_NSLOTS], void *ws) {
    float ms = -1.0f;
    for (int i = 0; i < 5; i++) {
        if (i == 2) CK_CUDA(cudaEventRecord(X->ev0, X->stream));
        if (gb_fuse_run(f, X->dnn, ptr, ws, ERR, ERRLEN)) return -1.0f;
    }
    CK_CUDA(cudaEventRecord(X->ev1, X->stream));
    CK_CUDA(cudaEventSynchronize(X->ev1));
    CK_CUDA(cudaEventElapsedTime(&ms, X->ev0, X->ev1));
    return ms / 3.0f;
fail:
    return -1.0f;
}

/* the fused step's graphs, each planned (up to 2 engine configurations,
 * the fastest on the real buffers kept) with the search workspace; one per
 * shape and kind. Any graph without a plan leaves the plain step, with
 * fuse_note saying why: not an error. */
static double wall_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC); /* C11 (this file is not POSIX-defined) */
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int setup_fused(cuda_exec_t *X, void *sws, size_t sws_bytes, size_t *ws_need) {
    const gb_plan_t *p = X->base.plan;
    char why[GB_ERR_LEN];
    if (!X->fuse_asked) return 0;
    /* planning may compile each graph (runtime fusion): how long it took
     * goes into the note, on or off */
    double t0 = wall_s();
    if (X->prec != GB_PREC_FP16 && X->prec != GB_PREC_BF16) {
        snprintf(X->fuse_note, sizeof(X->fuse_note),
                 "off: GB_CUDA_FUSE=1, but cuDNN's fused patterns take fp16 (bf16 is tried), not "
                 "%s",
                 prec_name(X->prec));
        return 0;
    }
    X->fgraphs = calloc(2 * (size_t)p->n_convs, sizeof(*X->fgraphs));
    if (!X->fgraphs) {
        snprintf(ERR, ERRLEN, "out of memory");
        return -1;
    }
    size_t need = 0;
    double t_said = t0;
    for (int ci = 0; ci < p->n_convs; ci++) {
        int pre = -1, role = gb_plan_fused_role(p, ci, &pre);
        if (role < 0) continue;
        const gb_plan_conv_t *pc = &p->convs[ci];
        cconv_t *c = &X->convs[ci];
        for (int wg = 0; wg <= role; wg++) {
            gb_fuse_kind_t kind = wg     ? GB_FUSE_SBR_WGRAD
                                  : role ? GB_FUSE_SBR_CONV_STATS
                                         : GB_FUSE_CONV_STATS;
            gb_fuse_t **slot = wg ? &c->fwg : &c->ffwd;
            float *t = wg ? &c->tfwg : &c->tffwd;
            for (int cj = 0; cj < ci && !*slot; cj++) {
                cconv_t *o = &X->convs[cj];
                if (gb_plan_fused_role(p, cj, NULL) == role && same_shape(&p->convs[cj], pc)) {
                    *slot = wg ? o->fwg : o->ffwd;
                    *t = wg ? o->tfwg : o->tffwd;
                }
            }
            if (*slot) continue;
            gb_fuse_t *f =
                gb_fuse_new(kind, &pc->g, p->n, X->cdt, X->dnn, pc->name, why, sizeof(why));
            if (!f) goto off;
            X->fgraphs[X->n_fgraphs++] = f;
            *slot = f;
            int np = gb_fuse_plan(f, X->dnn, sws_bytes, 2, why, sizeof(why));
            if (np <= 0) goto off;
            void *ptr[GB_FUSE_NSLOTS];
            fuse_ptrs(X, ci, gb_exec_act(&X->base, pc->x), role ? pre : -1, ptr);
            ptr[GB_FUSE_Y] = gb_exec_act(&X->base, pc->y);
            ptr[GB_FUSE_DY] = gb_exec_grad(&X->base, 0);
            int best = -1;
            float best_ms = 0.0f;
            for (int k = 0; k < np; k++) {
                gb_fuse_choose(f, k);
                float ms = time_fuse(X, f, ptr, sws);
                if (ms < 0.0f) {
                    snprintf(why, sizeof(why), "%s", ERR);
                    ERR[0] = 0;
                    (void)cudaGetLastError();
                    continue; /* a plan that does not run is not taken */
                }
                if (best < 0 || ms < best_ms) best = k, best_ms = ms;
            }
            if (best < 0) goto off;
            gb_fuse_choose(f, best);
            *t = best_ms;
            if (gb_fuse_workspace(f, best) > need) need = gb_fuse_workspace(f, best);
            /* planning can take minutes (each graph compiled): a line every
             * 10 s, so that a run cut short says how far it got */
            if (wall_s() - t_said >= 10.0) {
                t_said = wall_s();
                fprintf(
                    stderr,
                    "cuda backend: fused step: %d graphs planned, at conv %d of %d (%s), %.0f s\n",
                    X->n_fgraphs, ci + 1, p->n_convs, pc->name, t_said - t0);
            }
        }
    }
    if (need > *ws_need) *ws_need = need;
    X->base.fused = 1;
    for (int i = 0; i < p->n_bns; i++)
        if (i != p->stem_bn && !X->bns[i].own) bn_own(&X->bns[i], "the fused step");
    snprintf(X->fuse_note, sizeof(X->fuse_note),
             "on: %d cuDNN graphs for %d convs, planned in %.1f s", X->n_fgraphs, p->n_convs - 1,
             wall_s() - t0);
    return 0;
off:
    snprintf(X->fuse_note, sizeof(X->fuse_note), "off after %.1f s: %.220s", wall_s() - t0, why);
    for (int i = 0; i < X->n_fgraphs; i++)
        gb_fuse_destroy(&X->fgraphs[i]);
    X->n_fgraphs = 0;
    for (int i = 0; i < p->n_convs; i++)
        X->convs[i].ffwd = X->convs[i].fwg = NULL;
    (void)cudaGetLastError();
    return 0;
}

gb_exec_t *gb_cuda_exec_new(const gb_plan_t *p, const gb_train_config_t *cfg, int device, char *err,
                            size_t errlen) {
    cuda_exec_t *X = calloc(1, sizeof(*X));
    if (!X) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    X->base.ops = &cuda_ops;
    X->base.plan = p;
    X->prec = cfg->precision;
    X->device = device;
    X->lr = cfg->lr;
    X->mom = cfg->momentum;
    X->wd = cfg->weight_decay;
    cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
    switch (X->prec) {
    case GB_PREC_FP32:
    case GB_PREC_TF32:
        X->dt = GB_KDT_F32;
        X->cdt = CUDNN_DATA_FLOAT;
        X->blas_t = CUDA_R_32F;
        X->esz = 4;
        math = X->prec == GB_PREC_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        X->blas_compute =
            X->prec == GB_PREC_FP32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F_FAST_TF32;
        break;
    case GB_PREC_FP16:
        X->dt = GB_KDT_F16;
        X->cdt = CUDNN_DATA_HALF;
        X->blas_t = CUDA_R_16F;
        X->esz = 2;
        X->blas_compute = CUBLAS_COMPUTE_32F;
        break;
    case GB_PREC_BF16:
        X->dt = GB_KDT_BF16;
        X->cdt = CUDNN_DATA_BFLOAT16;
        X->blas_t = CUDA_R_16BF;
        X->esz = 2;
        X->blas_compute = CUBLAS_COMPUTE_32F;
        break;
    default:
        snprintf(X->base.err, sizeof(X->base.err), "unknown precision %d", (int)X->prec);
        goto fail;
    }
    if (p->esize != X->esz) {
        snprintf(ERR, ERRLEN, "plan element size %zu, precision %s needs %zu", p->esize,
                 prec_name(X->prec), X->esz);
        goto fail;
    }
    const char *force = getenv("GB_CUDA_BN");
    X->bn_force = force && strcmp(force, "own") == 0     ? 1
                  : force && strcmp(force, "cudnn") == 0 ? 2
                                                         : 0;
    if (force && !X->bn_force) {
        snprintf(ERR, ERRLEN,
                 "GB_CUDA_BN=%s: own or cudnn (unset: cuDNN's where it takes the layer)", force);
        goto fail;
    }
    const char *algos = getenv("GB_CUDA_FP32_ALGOS");
    if (algos && strcmp(algos, "any") != 0 && strcmp(algos, "fma") != 0) {
        snprintf(ERR, ERRLEN, "GB_CUDA_FP32_ALGOS=%s: fma (the default) or any", algos);
        goto fail;
    }
    X->fp32_any = algos && strcmp(algos, "any") == 0;
    X->fuse_asked = gb_plan_fuse(getenv("GB_CUDA_FUSE"), ERR, ERRLEN);
    if (X->fuse_asked < 0) goto fail;
    snprintf(X->fuse_note, sizeof(X->fuse_note), "%s",
             X->fuse_asked ? "asked for, not set up" : "off (GB_CUDA_FUSE unset)");
    snprintf(X->graph_note, sizeof(X->graph_note), "%s",
             cfg->cuda_graph ? "not captured yet" : "off (cuda_graph = 0)");

    CK_CUDA(cudaSetDevice(device));
    {
        struct cudaDeviceProp prop;
        CK_CUDA(cudaGetDeviceProperties(&prop, device));
        snprintf(X->device_name, sizeof(X->device_name), "%.127s", prop.name);
        X->sms = prop.multiProcessorCount;
    }
    CK_CUDA(cudaStreamCreateWithFlags(&X->stream, cudaStreamNonBlocking));
    CK_CUDA(cudaEventCreate(&X->ev0));
    CK_CUDA(cudaEventCreate(&X->ev1));
    CK_CUDA(cudaMallocHost((void **)&X->host_out, sizeof(*X->host_out)));
    memset(X->host_out, 0, sizeof(*X->host_out));
    CK_DNN(cudnnCreate(&X->dnn));
    CK_DNN(cudnnSetStream(X->dnn, X->stream));
    CK_BLAS(cublasCreate(&X->blas));
    CK_BLAS(cublasSetStream(X->blas, X->stream));
    CK_BLAS(cublasSetMathMode(X->blas, X->prec == GB_PREC_FP32 ? CUBLAS_PEDANTIC_MATH
                                                               : CUBLAS_DEFAULT_MATH));
    CK_DNN(cudnnCreateActivationDescriptor(&X->relu));
    CK_DNN(
        cudnnSetActivationDescriptor(X->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));

    /* memory: everything a step touches */
    {
        size_t np = p->n_a + p->n_b, K = (size_t)p->m->cfg.n_classes;
        const gb_model_t *m = p->m;
        if (dalloc(X, &X->base.arena, p->arena_bytes)) goto fail;
        if (dalloc(X, &X->master, np * sizeof(float))) goto fail;
        if (dalloc(X, &X->momentum, np * sizeof(float))) goto fail;
        if (X->dt == GB_KDT_F32)
            X->wcopy = X->master;
        else if (dalloc(X, &X->wcopy, p->n_a * X->esz))
            goto fail;
        X->grad_b = gb_plan_grad_b_byte_off(p, X->esz);
        if (dalloc(X, &X->grads, gb_plan_grad_bytes(p, X->esz))) goto fail;
        if (dalloc(X, &X->buffers, m->n_buffers * sizeof(float))) goto fail;
        if (dalloc(X, &X->stats, p->n_stats * sizeof(float))) goto fail;
        if (dalloc(X, &X->coef, 3 * (size_t)p->max_bn_c * sizeof(float))) goto fail;
        if (X->fuse_asked && (X->prec == GB_PREC_FP16 || X->prec == GB_PREC_BF16)) {
            if (dalloc(X, &X->sums, 2 * (size_t)p->max_bn_c * sizeof(float))) goto fail;
            if (dalloc(X, &X->fcoef, p->n_stats * sizeof(float))) goto fail;
            if (dalloc(X, &X->pre, p->n_stats * X->esz)) goto fail;
        }
        if (dalloc(X, &X->img, (size_t)p->n * 3 * m->cfg.image_h * m->cfg.image_w * sizeof(float)))
            goto fail;
        if (dalloc(X, &X->labels, (size_t)p->n * sizeof(int32_t))) goto fail;
        if (dalloc(X, &X->pool_arg, p->acts[p->p0].numel)) goto fail;
        if (dalloc(X, &X->logits, (size_t)p->n * K * sizeof(float))) goto fail;
        if (dalloc(X, &X->dlogits, (size_t)p->n * K * sizeof(float))) goto fail;
        if (dalloc(X, &X->dlogits_dt, (size_t)p->n * K * X->esz)) goto fail;
        if (dalloc(X, &X->row_loss, (size_t)p->n * sizeof(float))) goto fail;
        if (dalloc(X, &X->scaler, sizeof(gb_scaler_state_t))) goto fail;
        if (dalloc(X, &X->blas_ws, BLAS_WS_BYTES)) goto fail;
        CK_BLAS(cublasSetWorkspace(X->blas, X->blas_ws, BLAS_WS_BYTES));
        gb_scaler_state_t init = {0};
        init.scale = X->prec == GB_PREC_FP16 ? GB_SCALER_INIT : 1.0f;
        /* tests start fp16 elsewhere: GB_CUDA_LOSS_SCALE=2^k */
        const char *ls = getenv("GB_CUDA_LOSS_SCALE");
        if (ls && X->prec == GB_PREC_FP16) {
            char *end = NULL;
            double v = strtod(ls, &end);
            int ex = 0;
            /* 2^-126..2^127: a normal float whose reciprocal is finite (2^-160
             * became 0 and every step was skipped; 2^-130, a denormal, had
             * an infinite reciprocal that made the weights NaN) */
            if (!end || *end || !(v > 0.0) || frexp(v, &ex) != 0.5 || ex - 1 < -126 ||
                ex - 1 > 127) {
                snprintf(ERR, ERRLEN,
                         "GB_CUDA_LOSS_SCALE=%s is not a power of two in 2^-126..2^127", ls);
                goto fail;
            }
            init.scale = (float)v;
        }
        init.used_scale = init.scale;
        *X->host_out = init;
        CK_CUDA(cudaMemcpyAsync(X->scaler, &init, sizeof(init), cudaMemcpyHostToDevice, X->stream));
        /* running-statistics table */
        gb_bn_run_entry_t *tab = calloc((size_t)p->n_bns, sizeof(*tab));
        if (!tab) {
            snprintf(ERR, ERRLEN, "out of memory");
            goto fail;
        }
        for (int i = 0; i < p->n_bns; i++) {
            const gb_plan_bn_t *b = &p->bns[i];
            tab[i].mean = save_mean(X, b);
            tab[i].invstd = save_invstd(X, b);
            tab[i].rm = X->buffers + b->rmean_off;
            tab[i].rv = X->buffers + b->rvar_off;
            tab[i].c = b->g.c;
            tab[i].count = (float)b->count;
        }
        if (dalloc(X, &X->run_table, (size_t)p->n_bns * sizeof(*tab))) {
            free(tab);
            goto fail;
        }
        cudaError_t e = cudaMemcpyAsync(X->run_table, tab, (size_t)p->n_bns * sizeof(*tab),
                                        cudaMemcpyHostToDevice, X->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(X->stream);
        free(tab);
        CK_CUDA(e);
    }

    /* batch norm: cuDNN where it takes the layer, our kernels elsewhere */
    X->bns = calloc((size_t)p->n_bns, sizeof(*X->bns));
    X->convs = calloc((size_t)p->n_convs, sizeof(*X->convs));
    if (!X->bns || !X->convs) {
        snprintf(ERR, ERRLEN, "out of memory");
        goto fail;
    }
    size_t ws_need = 0, partial_floats = 0;
    for (int i = 0; i < p->n_bns; i++) {
        if (setup_bn(X, i)) goto fail;
        cbn_t *b = &X->bns[i];
        if (!b->own) {
            if (b->wsfwd > ws_need) ws_need = b->wsfwd;
            if (b->wsbwd > ws_need) ws_need = b->wsbwd;
            if (dalloc(X, &b->reserve, b->reserve_bytes)) goto fail;
        }
        size_t pf = (size_t)b->rchunks * p->bns[i].g.c * 3;
        if (pf > partial_floats) partial_floats = pf;
    }
    if (dalloc(X, &X->partials, partial_floats * sizeof(float))) goto fail;
    for (int i = 0; i < p->n_convs; i++)
        if (setup_conv(X, i, math)) goto fail;

    /* algorithm search with a temporary workspace on the real buffers, which
     * first get values: cudnnFind times every algorithm on what they hold,
     * and matrix units run measurably faster on zeros than on real data,
     * which could tilt the choice. Cleared again below. */
    CK_CUDA(gb_k_fill_normal(X->stream, X->dt, X->base.arena, p->arena_bytes / X->esz, 11, 1.0f));
    CK_CUDA(gb_k_fill_normal(X->stream, X->dt, X->wcopy, p->n_a, 12, 0.05f));
    if (X->pre) CK_CUDA(gb_k_fill_normal(X->stream, X->dt, X->pre, p->n_stats, 13, 0.5f));
    {
        size_t fr = 0, tot = 0;
        CK_CUDA(cudaMemGetInfo(&fr, &tot));
        size_t sws_bytes = fr / 2 < SEARCH_WS_MAX ? fr / 2 : SEARCH_WS_MAX;
        void *sws = NULL;
        while (sws_bytes >= ((size_t)64 << 20) && cudaMalloc(&sws, sws_bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            sws = NULL;
            sws_bytes /= 2;
        }
        if (!sws) {
            snprintf(ERR, ERRLEN, "no device memory left for the cuDNN algorithm search (%zu free)",
                     fr);
            goto fail;
        }
        if (X->bytes_now + sws_bytes > X->bytes_peak) X->bytes_peak = X->bytes_now + sws_bytes;
        sample_device_use(X);
        int rc = 0;
        for (int i = 0; i < p->n_convs && rc == 0; i++)
            rc = find_conv(X, i, sws, sws_bytes);
        if (rc == 0) rc = setup_fused(X, sws, sws_bytes, &ws_need);
        cudaError_t fe = cudaFree(sws); /* where an error Find left would show */
        if (rc) goto fail;
        CK_CUDA(fe);
        for (int i = 0; i < p->n_convs; i++) {
            const cconv_t *c = &X->convs[i];
            size_t w = c->wsfwd > c->wsbd ? c->wsfwd : c->wsbd;
            if (c->wsbf > w) w = c->wsbf;
            if (w > ws_need) ws_need = w;
        }
        X->ws_bytes = ws_need;
        if (dalloc(X, &X->ws, ws_need)) goto fail;
    }
    if (probe_bns(X)) goto fail;
    for (int i = 0; i < p->n_bns; i++)
        X->n_cudnn_bns += !X->bns[i].own;
    /* the search and the probes wrote into the buffers: start clean */
    CK_CUDA(cudaMemsetAsync(X->base.arena, 0, p->arena_bytes, X->stream));
    CK_CUDA(cudaMemsetAsync(X->wcopy, 0, p->n_a * X->esz, X->stream));
    CK_CUDA(cudaMemsetAsync(X->grads, 0, gb_plan_grad_bytes(p, X->esz), X->stream));
    CK_CUDA(cudaMemsetAsync(X->stats, 0, p->n_stats * sizeof(float), X->stream));
    CK_CUDA(cudaStreamSynchronize(X->stream));
    sample_device_use(X);
    return &X->base;
fail:
    snprintf(err, errlen, "%s", X->base.err[0] ? X->base.err : "CUDA executor creation failed");
    gb_exec_t *e = &X->base;
    cx_destroy(&e);
    return NULL;
}

int gb_cuda_exec_graph_used(const gb_exec_t *ex) {
    return ((const cuda_exec_t *)ex)->graph_used;
}

int gb_cuda_exec_attach_comm(gb_exec_t *ex, gb_comm_t *comm, const gb_train_config_t *cfg,
                             char *err, size_t errlen) {
    cuda_exec_t *X = (cuda_exec_t *)ex;
    if (X->dp) {
        snprintf(err, errlen, "the executor has its communicator already");
        return -1;
    }
    X->dp =
        gb_cuda_dp_new(comm, X->device, cfg, ex->plan, X->grads, X->esz, X->grad_b, err, errlen);
    if (!X->dp) return -1;
    /* settings read per process that change the gradient layout or what
     * is averaged (GB_CUDA_STEM_C, GB_CUDA_LOSS_SCALE; a different build):
     * alike on every rank, or no rank goes on */
    uint32_t scale_bits;
    memcpy(&scale_bits, &X->host_out->scale, sizeof(scale_bits));
    /* the scale is positive: its sign bit carries whether the step is fused */
    if (ex->fused) scale_bits ^= 0x80000000u;
    /* and the buckets: ranks whose all-reduces differ in size would hang
     * in NCCL or sum the wrong spans */
    uint32_t fp = gb_cuda_dp_layout(X->dp, gb_plan_fingerprint(ex->plan, scale_bits));
    int same = gb_cuda_dp_same(X->dp, fp, err, errlen);
    if (same < 0) return -1;
    if (!same) {
        snprintf(err, errlen,
                 "the job's ranks differ in their gradient layout, all-reduce buckets, initial "
                 "loss scale or step (stem channels %d, buckets of %g MB, loss scale %g, fused "
                 "step %s here): GB_CUDA_STEM_C, GB_CUDA_LOSS_SCALE, GB_CUDA_FUSE or the "
                 "gpubench build differ between its nodes",
                 ex->plan->stem_c, cfg->bucket_mb, (double)X->host_out->scale,
                 ex->fused ? "on" : "off");
        return -1; /* the caller aborts the group, on every rank alike */
    }
    if (comm->local_size > 1 && cfg->cuda_graph)
        snprintf(X->graph_note, sizeof(X->graph_note),
                 "off: %d GPUs of one process share an NCCL communicator, and NCCL warns that "
                 "capturing several per process may deadlock",
                 comm->local_size);
    return 0;
}
