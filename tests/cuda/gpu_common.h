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

#endif
