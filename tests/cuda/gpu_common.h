/* gpu_common.h - shared by the GPU tests: skip cleanly (exit 77, CTest's
 * SKIP_RETURN_CODE) when no CUDA device is usable; the tiny model, the
 * configurations, tolerances and the whole-step rule are step_rule.h's
 * (CUDA-free, so a CPU test holds the CPU engine to the same rule). */
#ifndef GB_TESTS_GPU_COMMON_H
#define GB_TESTS_GPU_COMMON_H

#include "step_rule.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

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

/* 1 when cuDNN's graph-API guide documents the fused step's patterns
 * (ConvBNfprop, ConvBNwgrad) for device 0's architecture, sm_80 and
 * sm_90: there the fp16 fused step must come on; elsewhere it may not.
 * The architecture is written into *major, *minor. */
static inline int gb_fused_documented(int *major, int *minor) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "cudaGetDeviceProperties failed\n");
        exit(1);
    }
    *major = prop.major;
    *minor = prop.minor;
    return (prop.major == 8 && prop.minor == 0) || prop.major == 9;
}

#endif
