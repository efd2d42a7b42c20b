/* gpu_common.h - shared by the GPU tests: skip cleanly (exit 77, CTest's
 * SKIP_RETURN_CODE) when no CUDA device is usable, tiny models, tolerances.
 *
 * Tolerances (relative L2 error per tensor against the double host twin),
 * from the unit roundoff u of the arithmetic each precision uses:
 *   fp32: u = 2^-24 = 6e-8; sums of up to ~5000 products grow it by about
 *         sqrt(5000) = 70 at worst in relative L2: 4e-6 -> 1e-5.
 *   tf32: operands rounded to 10 mantissa bits, u = 2^-11 = 4.9e-4 each,
 *         products carry ~2u = 1e-3 uncorrelated: 3e-3.
 *   fp16: operands and outputs stored in fp16 (u = 4.9e-4), weights rounded
 *         from fp32 masters, fp32 accumulation: a few u: 3e-3.
 *   bf16: u = 2^-8 = 3.9e-3, same count: 2.5e-2.
 * A whole step compounds these over ~3 layers per block through BN (which
 * renormalizes, so errors do not grow geometrically): whole-step gradients
 * get 10x the op tolerance, tf32 and fp16 (the same 11-bit significands)
 * 5e-2 and bf16 2e-1; in reduced precision a few tensors may be off by more
 * (a ReLU mask flipped by rounding), so there the median tensor is held to
 * it and every tensor to 4x (test_cuda_step.c's compare()).
 */
#ifndef GB_TESTS_GPU_COMMON_H
#define GB_TESTS_GPU_COMMON_H

#include "check.h"
#include "engine.h"
#include "model.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB_SKIP 77

static inline void gb_skip_without_gpu(const char *test) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        printf("SKIP %s: no usable CUDA device (%s)\n", test,
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        exit(GB_SKIP);
    }
}

static inline double gb_op_tol(gb_precision_t p) {
    switch (p) {
    case GB_PREC_FP32:
        return 1e-5;
    case GB_PREC_TF32:
        return 3e-3;
    case GB_PREC_FP16:
        return 3e-3;
    case GB_PREC_BF16:
        return 2.5e-2;
    }
    return 0.0;
}

static inline double gb_step_tol(gb_precision_t p) {
    switch (p) {
    case GB_PREC_FP32:
        return 1e-4;
    case GB_PREC_TF32:
        return 5e-2;
    case GB_PREC_FP16:
        return 5e-2;
    case GB_PREC_BF16:
        return 2e-1;
    }
    return 0.0;
}

static inline const char *gb_prec_str(gb_precision_t p) {
    static const char *n[] = {"fp32", "tf32", "fp16", "bf16"};
    return n[p];
}

/* layers 2,1,1,1 (an identity block and four projections), base width 8
 * (channel counts multiples of 4 as cuDNN's fused NHWC BN wants) */
static inline gb_model_t *gb_gpu_tiny_model(int image, int classes) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, image);
    mc.layers[0] = 2;
    mc.layers[1] = mc.layers[2] = mc.layers[3] = 1;
    mc.base_width = 8;
    mc.n_classes = classes;
    char err[256];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    return m;
}

static inline void gb_gpu_cfg(gb_train_config_t *cfg, const gb_model_t *m, gb_precision_t p,
                              int batch) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->backend, sizeof(cfg->backend), "cuda");
    cfg->precision = p;
    cfg->model = m->cfg;
    cfg->batch = batch;
    cfg->devices = 1;
    cfg->steps = 3;
    cfg->lr = 0.1f;
    cfg->momentum = 0.9f;
    cfg->weight_decay = 1e-4f;
    cfg->seed = 5;
    cfg->bucket_mb = 25.0;
    cfg->cuda_graph = 1;
    /* as the engine's default: a process's NCCL mode is set by its first
     * communicator, and an empty one would refuse every later "auto" */
    snprintf(cfg->interconnect, sizeof(cfg->interconnect), "auto");
}

/* Whole steps compared across engines: lr 1e-3 with weight decay 1 (as
 * tests/engine/torch_match.py), so the update is large against rounding
 * (lr (g + w): ~1e-3 |w|) while the weights move too little between steps
 * for rounding-level differences to grow; at lr 0.1 on 4 images training is
 * chaotic (docs/engine-cpu.md) and 3 steps amplify them. */
static inline void gb_gpu_step_cfg(gb_train_config_t *cfg, const gb_model_t *m, gb_precision_t p,
                                   int batch) {
    gb_gpu_cfg(cfg, m, p, batch);
    cfg->lr = 1e-3f;
    cfg->weight_decay = 1.0f;
}

/* GB_TEST_QUICK set and not "0" (compute-sanitizer runs) */
static inline int gb_test_quick(void) {
    const char *q = getenv("GB_TEST_QUICK");
    return q && q[0] && strcmp(q, "0") != 0;
}

#endif
