/* gemm_cpu.h - the CPU half of the `gemm` job kind: C = A * B timed after
 * warm-up, verified after timing. fp32: oneDNN's dnnl_sgemm; bf16: oneDNN's
 * matmul primitive with A and B in bf16, C in fp32 (fp32 accumulation: the
 * avx512_bf16 / AMX rate), refused where oneDNN has only its reference
 * implementation of it (a CPU without those instructions). */
#ifndef GB_WORKER_GEMM_CPU_H
#define GB_WORKER_GEMM_CPU_H

#include <stddef.h>
#include <stdint.h>

enum { GB_GEMM_SETTLE = 8, GB_GEMM_SETTLE_MS = 1000 };

typedef struct gb_gemm_out {
    double ms_median, ms_p90, ms_min, ms_max;
    double gflops; /* 2 m n k / median */
    int threads;   /* OpenMP threads oneDNN used */
    int checked;   /* entries compared with the double reference */
    int warmup;    /* untimed products run first (see gb_gemm_cpu) */
    char impl[96]; /* "dnnl_sgemm", or oneDNN's name of the matmul implementation */
    double *ms;    /* reps timings in order (malloc'd; caller frees) */

    int64_t window_ms[2]; /* CLOCK_REALTIME ms: start and end of the timed products */
} gb_gemm_out_t;

/* Untimed products until the rate settles: at least `warmup`, and on to
 * GB_GEMM_SETTLE of them unless GB_GEMM_SETTLE_MS went by first; then `reps`
 * timed products of (m x k) by (k x n), A and B in bf16 when bf16, else fp32. Returns 0, or -1 with
 * the reason in err (allocation, oneDNN, no fast bf16 path, or a product that does not match the
 * reference). */
int gb_gemm_cpu(int m, int n, int k, int bf16, int warmup, int reps, gb_gemm_out_t *out, char *err,
                size_t errlen);

#endif
