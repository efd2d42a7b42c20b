/* gemm_cpu.c - see gemm_cpu.h.
 *
 * Inputs are chosen so the product is exact in fp32 whatever the summation
 * order: every a and b is a multiple of 1/8 in [-1, 1], so every product is
 * a multiple of 1/64 of magnitude <= 1, and every partial sum of k <= 65536
 * of them is a multiple of 1/64 below 2^16 in magnitude, which fp32 (24-bit
 * significand: all n/64 with |n| < 2^24) represents exactly. The check after
 * timing therefore asks for equality with a double reference, no tolerance:
 * any difference is a wrong result. */
#define _POSIX_C_SOURCE 200809L
#include "gemm_cpu.h"
#include "engine_stats.h"

#include "gb_util.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float a_val(int64_t i) {
    return (float)((i * 7 + 3) % 17 - 8) / 8.0f;
}
static float b_val(int64_t i) {
    return (float)((i * 5 + 1) % 13 - 6) / 8.0f;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int gb_gemm_cpu(int m, int n, int k, int warmup, int reps, gb_gemm_out_t *out, char *err,
                size_t errlen) {
    memset(out, 0, sizeof *out);
    float *A = NULL, *B = NULL, *C = NULL;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    if (posix_memalign((void **)&A, 64, na * sizeof *A) ||
        posix_memalign((void **)&B, 64, nb * sizeof *B) ||
        posix_memalign((void **)&C, 64, nc * sizeof *C)) {
        gb_fmt(err, errlen, "cannot allocate %.1f MiB for a %dx%dx%d gemm",
               (double)(na + nb + nc) * 4 / (1 << 20), m, n, k);
        goto fail;
    }
    out->ms = calloc((size_t)reps, sizeof *out->ms);
    if (!out->ms) {
        gb_fmt(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < na; i++)
        A[i] = a_val((int64_t)i);
    for (size_t i = 0; i < nb; i++)
        B[i] = b_val((int64_t)i);
    memset(C, 0, nc * sizeof *C);
    out->threads = omp_get_max_threads();
    for (int r = 0; r < warmup + reps; r++) {
        if (r == warmup) out->window_ms[0] = gb_wall_ms();
        double t0 = now_ms();
        dnnl_status_t st = dnnl_sgemm('N', 'N', m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
        double t1 = now_ms();
        if (st != dnnl_success) {
            gb_fmt(err, errlen, "dnnl_sgemm failed with status %d", (int)st);
            goto fail;
        }
        if (r >= warmup) out->ms[r - warmup] = t1 - t0;
    }
    out->window_ms[1] = gb_wall_ms();
    /* Verify after timing: corners plus a spread of entries. */
    int checked = 0;
    for (int s = 0; s < 64 + 4; s++) {
        int64_t i, j;
        if (s < 4) {
            i = (s & 1) ? m - 1 : 0;
            j = (s & 2) ? n - 1 : 0;
        } else {
            i = ((int64_t)s * 2654435761u) % m;
            j = ((int64_t)s * 40503u + 7) % n;
        }
        double ref = 0;
        for (int64_t p = 0; p < k; p++)
            ref += (double)a_val(i * k + p) * (double)b_val(p * n + j);
        float got = C[i * n + j];
        if ((double)got != ref) {
            gb_fmt(err, errlen, "gemm result wrong at (%lld, %lld): %.9g, expected %.9g",
                   (long long)i, (long long)j, (double)got, ref);
            goto fail;
        }
        checked++;
    }
    out->checked = checked;
    gb_step_stats_t st;
    if (gb_step_stats(out->ms, NULL, reps, &st) != 0) {
        gb_fmt(err, errlen, "gemm timing: no valid samples");
        goto fail;
    }
    out->ms_median = st.median;
    out->ms_p90 = st.p90;
    out->ms_min = st.min;
    out->ms_max = st.max;
    out->gflops = out->ms_median > 0 ? 2.0 * m * (double)n * k / (out->ms_median * 1e6) : 0;
    free(A);
    free(B);
    free(C);
    return 0;
fail:
    free(A);
    free(B);
    free(C);
    free(out->ms);
    out->ms = NULL;
    return -1;
}
