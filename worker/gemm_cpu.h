/* gemm_cpu.h - the CPU half of the `gemm` job kind: single-precision
 * C = A * B through oneDNN's dnnl_sgemm, timed after warm-up, verified after
 * timing. */
#ifndef GB_WORKER_GEMM_CPU_H
#define GB_WORKER_GEMM_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_gemm_out {
    double ms_median, ms_p90, ms_min, ms_max;
    double gflops; /* 2 m n k / median */
    int threads;   /* OpenMP threads oneDNN used */
    int checked;   /* entries compared with the double reference */
    double *ms;    /* reps timings in order (malloc'd; caller frees) */

    int64_t window_ms[2]; /* CLOCK_REALTIME ms: start and end of the timed products */
} gb_gemm_out_t;

/* Run `warmup` untimed then `reps` timed products of (m x k) by (k x n).
 * Returns 0, or -1 with the reason in err (allocation, oneDNN, or a product
 * that does not match the reference). */
int gb_gemm_cpu(int m, int n, int k, int warmup, int reps, gb_gemm_out_t *out, char *err,
                size_t errlen);

#endif
