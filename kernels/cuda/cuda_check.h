/* cuda_check.h - status checks for CUDA, cuDNN, cuBLAS and NCCL calls: on
 * failure, write "file:line: call: reason" into (ERR, ERRLEN) and goto fail.
 * Each function using them defines ERR/ERRLEN (a buffer and its size) in
 * scope and a `fail:` label that releases what it holds and returns -1. */
#ifndef GB_CUDA_CHECK_H
#define GB_CUDA_CHECK_H

#include "gb_peer.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline void gb_cuda_errf(char *err, size_t errlen, const char *file, int line,
                                const char *call, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s:%d: %s: %s", base, line, call, why);
}

#define CK_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            gb_cuda_errf(ERR, ERRLEN, __FILE__, __LINE__, #call, "%s (%s)",                        \
                         cudaGetErrorString(e_), cudaGetErrorName(e_));                            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#define CK_DNN(call)                                                                               \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                          \
            char d_[256];                                                                          \
            cudnnGetLastErrorString(d_, sizeof(d_));                                               \
            gb_cuda_errf(ERR, ERRLEN, __FILE__, __LINE__, #call, "%s%s%s",                         \
                         cudnnGetErrorString(s_), d_[0] ? ": " : "", d_);                          \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#define CK_BLAS(call)                                                                              \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            gb_cuda_errf(ERR, ERRLEN, __FILE__, __LINE__, #call, "%s (%s)",                        \
                         cublasGetStatusString(s_), cublasGetStatusName(s_));                      \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#define CK_NCCL(call)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            const char *l_ = ncclGetLastError(NULL); /* NCCL's detail, or "" */                    \
            int d_ = l_ != NULL && l_[0] != 0;                                                     \
            gb_cuda_errf(ERR, ERRLEN, __FILE__, __LINE__, #call, "%s%s%s%s",                       \
                         r_ == ncclRemoteError ? GB_PEER_GONE : "", ncclGetErrorString(r_),        \
                         d_ ? ": " : "", d_ ? l_ : "");                                            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#endif
