/* cuda_backend.c - gb_cuda_backend_ops, the one symbol libgpubench_cuda.so
 * exports (kernels/engine.h): probe, one replica per GPU through net.c and
 * the CUDA executor, and the cuBLAS SGEMM throughput probe.
 *
 * Loading this library needs only the CUDA libraries on disk; a machine
 * without a driver or GPU gets -1 and "no CUDA driver/GPU" from probe and
 * create, never a crash. */
#include "comm.h"
#include "cuda_check.h"
#include "cuda_dp.h"
#include "cuda_exec.h"
#include "cuda_math.h"
#include "engine.h"
#include "engine_stats.h"
#include "net.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR    err
#define ERRLEN errlen

/* Usable devices, or -1 with the reason. */
static int device_count(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    int rt = 0, drv = 0;
    if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0 &&
        cudaRuntimeGetVersion(&rt) == cudaSuccess) {
        /* a driver, but one too old for this runtime: say so, it is not "no
         * GPU" (CUDA 13 needs driver 580 or newer). Without any driver the
         * runtime gives the same error, with driver version 0. */
        snprintf(err, errlen,
                 "NVIDIA driver too old: it supports CUDA %d.%d, this backend was built with the "
                 "CUDA %d.%d runtime (CUDA 13 needs driver 580 or newer); update the driver or "
                 "build with the toolkit it supports (-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.x/"
                 "bin/nvcc, docs/engine-cuda.md)",
                 drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
        (void)cudaGetLastError();
        return -1;
    }
    if (e == cudaErrorInsufficientDriver) {
        /* driver version 0: none at all (the runtime's own text, "driver
         * version is insufficient", sent people to upgrade one) */
        snprintf(err, errlen,
                 "no CUDA driver/GPU: no NVIDIA driver is installed here (libcuda.so.1 not "
                 "found)");
        (void)cudaGetLastError();
        return -1;
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "no CUDA driver/GPU: cudaGetDeviceCount: %s (%s)",
                 cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        return -1;
    }
    if (n < 1) {
        snprintf(err, errlen, "no CUDA driver/GPU: no CUDA device found");
        return -1;
    }
    return n;
}

static void version_str(char *dst, size_t n, int v, int major_div, int minor_div) {
    snprintf(dst, n, "%d.%d", v / major_div, (v % major_div) / minor_div);
}

static int cuda_probe(gb_backend_info_t *info, char *err, size_t errlen) {
    memset(info, 0, sizeof(*info));
    int rt = 0, drv = 0, nccl = 0, bmaj = 0, bmin = 0, bpat = 0;
    char srt[32] = "?", sdrv[32] = "none", snccl[32] = "?", scap[32] = "?";
    size_t dnn = cudnnGetVersion();
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess) version_str(srt, sizeof(srt), rt, 1000, 10);
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
        version_str(sdrv, sizeof(sdrv), drv, 1000, 10);
    if (ncclGetVersion(&nccl) == ncclSuccess)
        snprintf(snccl, sizeof(snccl), "%d.%d.%d", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
    cublasGetProperty(MAJOR_VERSION, &bmaj);
    cublasGetProperty(MINOR_VERSION, &bmin);
    cublasGetProperty(PATCH_LEVEL, &bpat);
    int n = device_count(err, errlen);
    if (n > 0) {
        struct cudaDeviceProp prop;
        cudaError_t e = cudaGetDeviceProperties(&prop, 0);
        if (e != cudaSuccess) {
            snprintf(err, errlen, "cudaGetDeviceProperties(0): %s", cudaGetErrorString(e));
            return -1;
        }
        snprintf(info->device_model, sizeof(info->device_model), "%.127s", prop.name);
        snprintf(scap, sizeof(scap), "%d.%d", prop.major, prop.minor);
        info->device_count = n;
    }
    snprintf(info->versions, sizeof(info->versions),
             "{\"cuda\":\"%s\",\"driver\":\"%s\",\"cudnn\":\"%zu.%zu.%zu\",\"cublas\":\"%d.%d.%d\","
             "\"nccl\":\"%s\",\"compute_capability\":\"%s\"}",
             srt, sdrv, dnn / 10000, (dnn % 10000) / 100, dnn % 100, bmaj, bmin, bpat, snccl, scap);
    return n > 0 ? 0 : -1;
}

static int cuda_create(const gb_model_t *m, const gb_train_config_t *cfg, int replica,
                       gb_comm_t *comm, void **state, char *err, size_t errlen) {
    *state = NULL;
    gb_plan_t *p = NULL;
    gb_exec_t *ex = NULL;
    if (comm && replica != comm->local_rank) {
        snprintf(err, errlen, "replica %d given comm member %d", replica, comm->local_rank);
        goto fail;
    }
    /* the settings first: a wrong one is said before any GPU is touched */
    int stem_c = gb_plan_stem_c(cfg->precision, getenv("GB_CUDA_STEM_C"), err, errlen);
    if (stem_c < 0) goto fail;
    if (gb_plan_fuse(getenv("GB_CUDA_FUSE"), err, errlen) < 0) goto fail;
    int n = device_count(err, errlen);
    if (n < 0) goto fail;
    /* a replica process (kernels/launch.h) drives GPU first_device */
    int device = cfg->first_device + replica;
    if (replica < 0 || device >= n) {
        snprintf(err, errlen, "GPU %d requested, %d present", device, n);
        goto fail;
    }
    size_t esize = (cfg->precision == GB_PREC_FP16 || cfg->precision == GB_PREC_BF16) ? 2 : 4;
    p = gb_plan_new(m, cfg->batch, esize, stem_c, err, errlen);
    if (!p) goto fail;
    ex = gb_cuda_exec_new(p, cfg, device, err, errlen);
    if (!ex) goto fail;
    /* data parallel: the job's communicator, after every allocation and
     * algorithm search (it includes the job's start barrier); CUDA graphs
     * only with one GPU in this process */
    int graph = cfg->cuda_graph;
    if (comm) {
        if (gb_cuda_exec_attach_comm(ex, comm, cfg, err, errlen)) goto fail;
        if (comm->local_size > 1) graph = 0;
    }
    gb_net_t *net = gb_net_new(&p, &ex, graph, cfg->seed, err, errlen);
    if (!net) {
        if (comm) gb_comm_abort(comm, err);
        return -1;
    }
    *state = net;
    return 0;
fail:
    if (comm) gb_comm_abort(comm, err);
    if (ex) ex->ops->destroy(&ex);
    gb_plan_destroy(&p);
    return -1;
}

static int cuda_set_state(void *s, const float *params, const float *buffers, int64_t nbt,
                          char *err, size_t errlen) {
    return gb_net_set_state(s, params, buffers, nbt, err, errlen);
}
static int cuda_get_state(void *s, float *params, float *buffers, int64_t *nbt, char *err,
                          size_t errlen) {
    return gb_net_get_state(s, params, buffers, nbt, err, errlen);
}
static int cuda_get_grads(void *s, float *grads, char *err, size_t errlen) {
    return gb_net_get_grads(s, grads, err, errlen);
}
/* images and labels NULL: a synthetic batch generated on the device */
static int cuda_set_batch(void *s, const float *images, const int32_t *labels, char *err,
                          size_t errlen) {
    return gb_net_set_batch(s, images, labels, err, errlen);
}
static int cuda_step(void *s, gb_step_out_t *out, char *err, size_t errlen) {
    return gb_net_step(s, out, err, errlen);
}
static int cuda_report(void *s, gb_replica_report_t *rep, char *err, size_t errlen) {
    return gb_net_report(s, rep, err, errlen);
}
static void cuda_destroy(void **s) {
    gb_net_destroy((gb_net_t **)s);
}

static int cuda_allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                          gb_allreduce_size_t *sizes, int n, char **details, char *err,
                          size_t errlen) {
    int cnt = device_count(err, errlen);
    if (cnt < 0 || replica >= cnt) {
        if (cnt >= 0) snprintf(err, errlen, "GPU %d requested, %d present", replica, cnt);
        if (comm) gb_comm_abort(comm, err);
        return -1;
    }
    return gb_cuda_allreduce(replica, comm, cfg, sizes, n, details, err, errlen);
}

/* GEMM C = A B (m x k times k x n, column-major) in `prec`: fp32 (pedantic
 * math, TF32 off), tf32 (fp32 data, CUBLAS_COMPUTE_32F_FAST_TF32), fp16 or
 * bf16 (A and B stored in 16 bits, C in fp32, fp32 accumulation: the tensor
 * cores' rate the buying guides quote); inputs drawn with cuda_math.h's
 * generator on the host (rounded to 16 bits there for fp16/bf16, so the
 * reference sees what the GPU multiplies), median of `reps` event-timed
 * runs after 3 warm-up runs, then a check of 16 elements against double dot
 * products. The bound is the fp32 accumulation's, 2 k 2^-24 sum|a b| in
 * fp32 (pedantic: round to nearest); twice that where tensor cores add (they
 * may truncate instead of rounding), and for tf32 2^-9 sum|a b| more (its
 * inputs keep 10 of fp32's 23 mantissa bits; products of 16-bit inputs are
 * exact in fp32). */
static int cuda_gemm(int device, gb_precision_t prec, int m, int n, int k, int reps,
                     double *ms_median, double *ms_p90, double *gflops, int64_t window_ms[2],
                     char *err, size_t errlen) {
    float *hA = NULL, *hB = NULL, *dC = NULL;
    uint16_t *h16 = NULL;
    void *dA = NULL, *dB = NULL;
    double *times = NULL;
    cublasHandle_t h = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (m < 1 || n < 1 || k < 1 || reps < 1 || m > 65536 || n > 65536 || k > 65536) {
        snprintf(err, errlen, "gemm sizes %dx%dx%d reps %d out of range", m, n, k, reps);
        return -1;
    }
    if (prec != GB_PREC_FP32 && prec != GB_PREC_TF32 && prec != GB_PREC_FP16 &&
        prec != GB_PREC_BF16) {
        snprintf(err, errlen, "gemm: unknown precision %d", (int)prec);
        return -1;
    }
    int half = prec == GB_PREC_FP16 || prec == GB_PREC_BF16;
    cudaDataType_t ab_type = prec == GB_PREC_FP16   ? CUDA_R_16F
                             : prec == GB_PREC_BF16 ? CUDA_R_16BF
                                                    : CUDA_R_32F;
    cublasComputeType_t compute = prec == GB_PREC_FP32   ? CUBLAS_COMPUTE_32F_PEDANTIC
                                  : prec == GB_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                         : CUBLAS_COMPUTE_32F;
    size_t esz = half ? sizeof(uint16_t) : sizeof(float);
    int cnt = device_count(err, errlen);
    if (cnt < 0) return -1;
    if (device < 0 || device >= cnt) {
        snprintf(err, errlen, "GPU %d requested, %d present", device, cnt);
        return -1;
    }
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    hA = malloc(na * sizeof(float));
    hB = malloc(nb * sizeof(float));
    h16 = half ? malloc((na > nb ? na : nb) * sizeof(uint16_t)) : NULL;
    times = malloc((size_t)reps * sizeof(double));
    if (!hA || !hB || !times || (half && !h16)) {
        snprintf(err, errlen, "out of host memory");
        goto fail;
    }
    for (size_t i = 0; i < na; i++)
        hA[i] = (float)(gb_synth_uniform(7, 3, i) * 2.0 - 1.0);
    for (size_t i = 0; i < nb; i++)
        hB[i] = (float)(gb_synth_uniform(7, 4, i) * 2.0 - 1.0);
    CK_CUDA(cudaSetDevice(device));
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK_CUDA(cudaEventCreate(&e0));
    CK_CUDA(cudaEventCreate(&e1));
    CK_CUDA(cudaMalloc(&dA, na * esz));
    CK_CUDA(cudaMalloc(&dB, nb * esz));
    CK_CUDA(cudaMalloc((void **)&dC, nc * sizeof(float)));
    /* on the timing stream and waited for: a plain cudaMemcpy goes through the
     * legacy default stream, which a non-blocking stream does not wait on, and
     * returns from pageable memory before the DMA has landed. 16-bit inputs
     * go through h16, one matrix at a time, and hA/hB keep their rounded
     * values for the check. */
    for (int which = 0; which < 2; which++) {
        float *hx = which ? hB : hA;
        size_t nx = which ? nb : na;
        void *dx = which ? dB : dA;
        if (half) {
            for (size_t i = 0; i < nx; i++) {
                if (prec == GB_PREC_FP16) {
                    h16[i] = gb_float_to_half(hx[i]);
                    hx[i] = gb_half_to_float(h16[i]);
                } else {
                    h16[i] = gb_float_to_bf16(hx[i]);
                    hx[i] = gb_bf16_to_float(h16[i]);
                }
            }
            CK_CUDA(cudaMemcpyAsync(dx, h16, nx * esz, cudaMemcpyHostToDevice, st));
        } else {
            CK_CUDA(cudaMemcpyAsync(dx, hx, nx * esz, cudaMemcpyHostToDevice, st));
        }
        CK_CUDA(cudaStreamSynchronize(st));
    }
    CK_BLAS(cublasCreate(&h));
    CK_BLAS(cublasSetStream(h, st));
    CK_BLAS(
        cublasSetMathMode(h, prec == GB_PREC_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
    const float one = 1.0f, zero = 0.0f;
    for (int r = -3; r < reps; r++) {
        if (r == 0 && window_ms)
            window_ms[0] = gb_engine_wall_ms(); /* the GPU is warm and busy now */
        CK_CUDA(cudaEventRecord(e0, st));
        CK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, ab_type, m, dB,
                             ab_type, k, &zero, dC, CUDA_R_32F, m, compute, CUBLAS_GEMM_DEFAULT));
        CK_CUDA(cudaEventRecord(e1, st));
        CK_CUDA(cudaEventSynchronize(e1));
        float ms = 0.0f;
        CK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) times[r] = ms;
    }
    if (window_ms) window_ms[1] = gb_engine_wall_ms();
    gb_step_stats_t ss;
    if (gb_step_stats(times, NULL, reps, &ss) != 0) {
        snprintf(err, errlen, "gemm: a timing was not finite");
        goto fail;
    }
    *ms_median = ss.median;
    if (ms_p90) *ms_p90 = ss.p90;
    *gflops = 2.0 * m * n * (double)k / (*ms_median * 1e6);
    /* verify after timing */
    const double u32 = 5.960464477539063e-8; /* 2^-24 */
    double acc = (prec == GB_PREC_FP32 ? 2.0 : 4.0) * k * u32;
    double in = prec == GB_PREC_TF32 ? 1.953125e-3 /* 2^-9 */ : 0.0;
    for (int t = 0; t < 16; t++) {
        int i = (int)(gb_synth_uniform(9, 5, (uint64_t)t) * m);
        int j = (int)(gb_synth_uniform(9, 6, (uint64_t)t) * n);
        float got = 0.0f;
        CK_CUDA(cudaMemcpyAsync(&got, dC + (size_t)j * m + i, sizeof(float), cudaMemcpyDeviceToHost,
                                st));
        CK_CUDA(cudaStreamSynchronize(st));
        double ref = 0.0, mag = 0.0;
        for (int l = 0; l < k; l++) {
            double p = (double)hA[(size_t)l * m + i] * hB[(size_t)j * k + l];
            ref += p;
            mag += p < 0 ? -p : p;
        }
        double bound = (acc + in) * mag + 1e-30;
        if (!(got - ref <= bound && ref - got <= bound)) {
            snprintf(err, errlen, "gemm %s check failed at C[%d,%d]: %.9g vs %.9g (bound %.3g)",
                     gb_precision_name(prec), i, j, (double)got, ref, bound);
            goto fail;
        }
    }
    cublasDestroy(h);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(st);
    free(hA);
    free(hB);
    free(h16);
    free(times);
    return 0;
fail:
    if (h) cublasDestroy(h);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    free(hA);
    free(hB);
    free(h16);
    free(times);
    return -1;
}

__attribute__((visibility("default"))) const gb_backend_ops_t gb_cuda_backend_ops = {
    .abi = GB_BACKEND_ABI,
    .name = "cuda",
    .probe = cuda_probe,
    .create = cuda_create,
    .set_state = cuda_set_state,
    .get_state = cuda_get_state,
    .get_grads = cuda_get_grads,
    .set_batch = cuda_set_batch,
    .step = cuda_step,
    .report = cuda_report,
    .destroy = cuda_destroy,
    .gemm = cuda_gemm,
    .allreduce = cuda_allreduce,
};
