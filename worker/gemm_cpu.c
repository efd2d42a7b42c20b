/* gemm_cpu.c - see gemm_cpu.h.
 *
 * Inputs are chosen so the product is exact in fp32 whatever the summation
 * order: every a and b is a multiple of 1/8 in [-1, 1], so every product is
 * a multiple of 1/64 of magnitude <= 1, and every partial sum of k <= 65536
 * of them is a multiple of 1/64 below 2^16 in magnitude, which fp32 (24-bit
 * significand: all n/64 with |n| < 2^24) represents exactly. The check after
 * timing therefore asks for equality with a double reference, no tolerance:
 * any difference is a wrong result. bf16 (8-bit significand) holds every
 * such input exactly too, and its products accumulate in fp32: the same
 * check, equality, holds for the bf16 matmul. */
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

/* A and B in bf16 (the upper half of the fp32 bits: exact for these
 * inputs), C in fp32, through oneDNN's matmul primitive; the implementation
 * oneDNN chose is named in impl. */
typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[3];
} bf16_mm_t;

static void bf16_mm_free(bf16_mm_t *b) {
    for (int i = 0; i < 3; i++)
        if (b->mem[i]) dnnl_memory_destroy(b->mem[i]);
    if (b->prim) dnnl_primitive_destroy(b->prim);
    if (b->pd) dnnl_primitive_desc_destroy(b->pd);
    if (b->strm) dnnl_stream_destroy(b->strm);
    if (b->eng) dnnl_engine_destroy(b->eng);
    memset(b, 0, sizeof *b);
}

static int bf16_mm_init(bf16_mm_t *b, int m, int n, int k, void *A, void *B, float *C, char *impl,
                        size_t impllen, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    dnnl_memory_desc_t md[3];
    dnnl_dims_t dims[3] = {{m, k}, {k, n}, {m, n}};
    dnnl_data_type_t dt[3] = {dnnl_bf16, dnnl_bf16, dnnl_f32};
    dnnl_matmul_desc_t desc;
    const char *name = NULL;
    dnnl_status_t st = dnnl_engine_create(&b->eng, dnnl_cpu, 0);
    if (st == dnnl_success) st = dnnl_stream_create(&b->strm, b->eng, dnnl_stream_default_flags);
    for (int i = 0; i < 3 && st == dnnl_success; i++)
        st = dnnl_memory_desc_init_by_tag(&md[i], 2, dims[i], dt[i], dnnl_ab);
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2]);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&b->pd, &desc, NULL, b->eng, NULL);
    if (st == dnnl_unimplemented) { /* an AVX2 CPU: no bf16 matmul at all */
        gb_fmt(err, errlen,
               "gemm in bf16: oneDNN has no bf16 matmul for this CPU (it needs avx512_bf16 or "
               "AMX)");
        bf16_mm_free(b);
        return -1;
    }
    if (st != dnnl_success) {
        gb_fmt(err, errlen, "oneDNN cannot make a bf16 matmul of %dx%dx%d (status %d)", m, n, k,
               (int)st);
        bf16_mm_free(b);
        return -1;
    }
    if (dnnl_primitive_desc_query(b->pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
        !name)
        name = "?";
    gb_fmt(impl, impllen, "dnnl matmul bf16 (%s)", name);
    if (strncmp(name, "ref", 3) == 0) {
        /* its reference loop: a figure of that loop, not of the CPU */
        gb_fmt(err, errlen,
               "gemm in bf16: oneDNN has only its reference implementation of it on this CPU "
               "(%s; a fast one needs avx512_bf16 or AMX): not measured",
               name);
        bf16_mm_free(b);
        return -1;
    }
    void *ptr[3] = {A, B, C};
    for (int i = 0; i < 3 && st == dnnl_success; i++)
        st = dnnl_memory_create(&b->mem[i], &md[i], b->eng, ptr[i]);
    if (st == dnnl_success) st = dnnl_primitive_create(&b->prim, b->pd);
    if (st != dnnl_success) {
        gb_fmt(err, errlen, "oneDNN bf16 matmul: status %d", (int)st);
        bf16_mm_free(b);
        return -1;
    }
    return 0;
}

static dnnl_status_t bf16_mm_run(bf16_mm_t *b) {
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, b->mem[0]}, {DNNL_ARG_WEIGHTS, b->mem[1]}, {DNNL_ARG_DST, b->mem[2]}};
    dnnl_status_t st = dnnl_primitive_execute(b->prim, b->strm, 3, args);
    return st == dnnl_success ? dnnl_stream_wait(b->strm) : st;
}

static uint16_t to_bf16(float f) { /* exact for the inputs here */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static int gemm_once(int bf16, bf16_mm_t *mm, int m, int n, int k, const float *A, const float *B,
                     float *C, char *err, size_t errlen) {
    dnnl_status_t st =
        bf16 ? bf16_mm_run(mm) : dnnl_sgemm('N', 'N', m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
    if (st == dnnl_success) return 0;
    gb_fmt(err, errlen, "%s failed with status %d", bf16 ? "oneDNN's bf16 matmul" : "dnnl_sgemm",
           (int)st);
    return -1;
}

int gb_gemm_cpu(int m, int n, int k, int bf16, int warmup, int reps, gb_gemm_out_t *out, char *err,
                size_t errlen) {
    memset(out, 0, sizeof *out);
    float *A = NULL, *B = NULL, *C = NULL;
    bf16_mm_t mm;
    memset(&mm, 0, sizeof mm);
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    size_t ab = bf16 ? sizeof(uint16_t) : sizeof(float); /* bytes of an input */
    if (posix_memalign((void **)&A, 64, na * ab) || posix_memalign((void **)&B, 64, nb * ab) ||
        posix_memalign((void **)&C, 64, nc * sizeof *C)) {
        gb_fmt(err, errlen, "cannot allocate %.1f MiB for a %dx%dx%d gemm",
               (double)((na + nb) * ab + nc * 4) / (1 << 20), m, n, k);
        goto fail;
    }
    out->ms = calloc((size_t)reps, sizeof *out->ms);
    if (!out->ms) {
        gb_fmt(err, errlen, "out of memory");
        goto fail;
    }
    if (bf16) {
        uint16_t *a16 = (uint16_t *)A, *b16 = (uint16_t *)B;
        for (size_t i = 0; i < na; i++)
            a16[i] = to_bf16(a_val((int64_t)i));
        for (size_t i = 0; i < nb; i++)
            b16[i] = to_bf16(b_val((int64_t)i));
    } else {
        for (size_t i = 0; i < na; i++)
            A[i] = a_val((int64_t)i);
        for (size_t i = 0; i < nb; i++)
            B[i] = b_val((int64_t)i);
    }
    memset(C, 0, nc * sizeof *C);
    if (bf16) {
        if (bf16_mm_init(&mm, m, n, k, A, B, C, out->impl, sizeof out->impl, err, errlen) != 0)
            goto fail;
    } else {
        gb_fmt(out->impl, sizeof out->impl, "dnnl_sgemm");
    }
    out->threads = omp_get_max_threads();
    /* Warm-up: at least `warmup` products, and on until GB_GEMM_SETTLE or
     * GB_GEMM_SETTLE_MS have gone by. dnnl_sgemm allocates its packing
     * buffers at every call, and the allocator's heaps reach their size only
     * after several calls: until then each call touches new pages (here 11
     * us each): 1024^3 took 9.3 ms for its first 8 calls on 2 cores, 5.3
     * after (seen: 235 GFLOP/s as the median of 10 after 2 warm-ups, 390
     * after 8). A training loop calls it for ever: the settled rate is the
     * one a gemm figure stands for. */
    double w0 = now_ms();
    int done = 0;
    for (;; done++) {
        if (done >= warmup && (done >= GB_GEMM_SETTLE || now_ms() - w0 >= GB_GEMM_SETTLE_MS)) break;
        if (gemm_once(bf16, &mm, m, n, k, A, B, C, err, errlen) != 0) goto fail;
    }
    out->warmup = done;
    out->window_ms[0] = gb_wall_ms();
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (gemm_once(bf16, &mm, m, n, k, A, B, C, err, errlen) != 0) goto fail;
        out->ms[r] = now_ms() - t0;
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
            gb_fmt(err, errlen, "gemm%s result wrong at (%lld, %lld): %.9g, expected %.9g",
                   bf16 ? " (bf16)" : "", (long long)i, (long long)j, (double)got, ref);
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
    bf16_mm_free(&mm);
    free(A);
    free(B);
    free(C);
    return 0;
fail:
    bf16_mm_free(&mm);
    free(A);
    free(B);
    free(C);
    free(out->ms);
    out->ms = NULL;
    return -1;
}
