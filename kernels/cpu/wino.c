/* Winograd F(4x4, 3x3) convolutions on AVX2 (see wino.h). Built with
 * -mavx2 -mfma; callers check gb_wino_cpu_ok() first.
 *
 * Layout of the transformed tensors: [36][T][C] with T = n * th * tw tiles,
 * so the 36 products are plain row-major GEMMs with a leading dimension C. */
#include "wino.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>

typedef __m256 v8;

int gb_wino_cpu_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static inline int tiles(int x) {
    return (x + 3) / 4;
}

size_t gb_wino_u_floats(int c, int k) {
    return (size_t)36 * (size_t)c * (size_t)k;
}

size_t gb_wino_scratch_floats(int n, int c, int k, int h, int w) {
    size_t t = (size_t)n * (size_t)tiles(h) * (size_t)tiles(w);
    size_t fwd = 36 * t * ((size_t)c + (size_t)k); /* V and M, either direction */
    size_t bww = fwd + 36 * (size_t)c * (size_t)k; /* Vx, Vdy and the summed products */
    return bww;
}

/* ---- the 1-D transforms, on 8 channels at once ---- */

/* y = B^T x (6 -> 6) */
static inline void bt6(const v8 x[6], v8 y[6]) {
    const v8 c4 = _mm256_set1_ps(4.f), c5 = _mm256_set1_ps(5.f), c2 = _mm256_set1_ps(2.f);
    v8 a = _mm256_sub_ps(x[4], x[2]);        /* x4 - x2 */
    v8 b = _mm256_sub_ps(x[3], x[1]);        /* x3 - x1 */
    v8 p = _mm256_fnmadd_ps(c4, x[2], x[4]); /* x4 - 4 x2 */
    v8 q = _mm256_fnmadd_ps(c4, x[1], x[3]); /* x3 - 4 x1 */
    y[0] = _mm256_fnmadd_ps(c5, x[2], _mm256_fmadd_ps(c4, x[0], x[4]));
    y[1] = _mm256_add_ps(p, q);        /* -4x1 - 4x2 + x3 + x4 */
    y[2] = _mm256_sub_ps(p, q);        /* 4x1 - 4x2 - x3 + x4 */
    y[3] = _mm256_fmadd_ps(c2, b, a);  /* -2x1 - x2 + 2x3 + x4 */
    y[4] = _mm256_fnmadd_ps(c2, b, a); /* 2x1 - x2 - 2x3 + x4 */
    y[5] = _mm256_fnmadd_ps(c5, x[3], _mm256_fmadd_ps(c4, x[1], x[5]));
}

/* y = A^T x (6 -> 4) */
static inline void at6(const v8 x[6], v8 y[4]) {
    const v8 c2 = _mm256_set1_ps(2.f), c4 = _mm256_set1_ps(4.f), c8 = _mm256_set1_ps(8.f);
    v8 s12 = _mm256_add_ps(x[1], x[2]), d12 = _mm256_sub_ps(x[1], x[2]);
    v8 s34 = _mm256_add_ps(x[3], x[4]), d34 = _mm256_sub_ps(x[3], x[4]);
    y[0] = _mm256_add_ps(_mm256_add_ps(x[0], s12), s34);
    y[1] = _mm256_fmadd_ps(c2, d34, d12);
    y[2] = _mm256_fmadd_ps(c4, s34, s12);
    y[3] = _mm256_add_ps(_mm256_fmadd_ps(c8, d34, d12), x[5]);
}

/* y = G x (3 -> 6) */
static inline void g3(const v8 x[3], v8 y[6]) {
    const v8 q = _mm256_set1_ps(0.25f), s = _mm256_set1_ps(1.f / 6.f),
             t = _mm256_set1_ps(1.f / 24.f), h = _mm256_set1_ps(1.f / 12.f);
    v8 s02 = _mm256_add_ps(x[0], x[2]);
    y[0] = _mm256_mul_ps(q, x[0]);
    y[1] = _mm256_mul_ps(_mm256_set1_ps(-1.f / 6.f), _mm256_add_ps(s02, x[1]));
    y[2] = _mm256_mul_ps(_mm256_set1_ps(-1.f / 6.f), _mm256_sub_ps(s02, x[1]));
    v8 e = _mm256_fmadd_ps(t, x[0], _mm256_mul_ps(s, x[2]));
    y[3] = _mm256_fmadd_ps(h, x[1], e);
    y[4] = _mm256_fnmadd_ps(h, x[1], e);
    y[5] = x[2];
}

/* y = A x (4 -> 6), for the output-gradient tiles of backward weights */
static inline void a4(const v8 x[4], v8 y[6]) {
    const v8 c2 = _mm256_set1_ps(2.f), c4 = _mm256_set1_ps(4.f), c8 = _mm256_set1_ps(8.f);
    v8 e = _mm256_add_ps(x[0], x[2]), o = _mm256_add_ps(x[1], x[3]);
    v8 e4 = _mm256_fmadd_ps(c4, x[2], x[0]),
       o8 = _mm256_fmadd_ps(c8, x[3], _mm256_mul_ps(c2, x[1]));
    y[0] = x[0];
    y[1] = _mm256_add_ps(e, o);
    y[2] = _mm256_sub_ps(e, o);
    y[3] = _mm256_add_ps(e4, o8);
    y[4] = _mm256_sub_ps(e4, o8);
    y[5] = x[3];
}

/* y = G^T x (6 -> 3) */
static inline void gt6(const v8 x[6], v8 y[3]) {
    const v8 q = _mm256_set1_ps(0.25f), s = _mm256_set1_ps(1.f / 6.f),
             t = _mm256_set1_ps(1.f / 24.f), h = _mm256_set1_ps(1.f / 12.f);
    v8 s12 = _mm256_add_ps(x[1], x[2]), d12 = _mm256_sub_ps(x[2], x[1]);
    v8 s34 = _mm256_add_ps(x[3], x[4]), d34 = _mm256_sub_ps(x[3], x[4]);
    y[0] = _mm256_fmadd_ps(t, s34, _mm256_fnmadd_ps(s, s12, _mm256_mul_ps(q, x[0])));
    y[1] = _mm256_fmadd_ps(h, d34, _mm256_mul_ps(s, d12));
    y[2] = _mm256_add_ps(_mm256_mul_ps(s, _mm256_sub_ps(s34, s12)), x[5]);
}

/* ---- tile transforms ---- */

/* y = F x F^T, a separable 2-D transform: x is ni x ni and y no x no, both
 * row-major; f takes ni values to no. Always inlined, so f is a direct,
 * inlined call at every use. */
typedef void (*tr1d_fn)(const v8 *x, v8 *y);
static inline __attribute__((always_inline)) void tr2d(tr1d_fn f, int ni, int no, const v8 *x,
                                                       v8 *y) {
    v8 t[36], col[6], r[6];
    for (int j = 0; j < ni; j++) {
        for (int i = 0; i < ni; i++)
            col[i] = x[i * ni + j];
        f(col, r);
        for (int i = 0; i < no; i++)
            t[i * ni + j] = r[i];
    }
    for (int i = 0; i < no; i++)
        f(t + i * ni, y + i * no);
}

/* The s x s tile of one channel block at (y0, x0) of plane (h, w, 8), with
 * zeros where it sticks out, into d (row-major). */
static inline void load_tile(const float *plane, int h, int w, int y0, int x0, int s, v8 *d) {
    const v8 z = _mm256_setzero_ps();
    for (int i = 0; i < s; i++) {
        int y = y0 + i;
        for (int j = 0; j < s; j++) {
            int x = x0 + j;
            d[i * s + j] = (y >= 0 && y < h && x >= 0 && x < w)
                               ? _mm256_loadu_ps(plane + ((size_t)y * (size_t)w + (size_t)x) * 8)
                               : z;
        }
    }
}

/* ---- passes ---- */

/* src (n, c, h, w) nChw8c -> v [36][T][c]: the 6x6 input tiles (B^T d B),
 * or with dy the 4x4 output-gradient tiles (A dy A^T) */
static void to_tiles(const float *src, int n, int c, int h, int w, int dy, float *v, int threads) {
    int th = tiles(h), tw = tiles(w), cb = c / 8;
    size_t T = (size_t)n * (size_t)th * (size_t)tw, js = T * (size_t)c;
    int64_t rows = (int64_t)n * cb * th;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int ty = (int)(r % th), b = (int)((r / th) % cb), img = (int)(r / th / cb);
        const float *plane = src + ((size_t)img * (size_t)cb + (size_t)b) * (size_t)h * w * 8;
        for (int tx = 0; tx < tw; tx++) {
            float *vt = v + (((size_t)img * th + ty) * tw + tx) * c + (size_t)b * 8;
            v8 d[36], y[36];
            if (dy) {
                load_tile(plane, h, w, ty * 4, tx * 4, 4, d);
                tr2d(a4, 4, 6, d, y);
            } else {
                load_tile(plane, h, w, ty * 4 - 1, tx * 4 - 1, 6, d);
                tr2d(bt6, 6, 6, d, y);
            }
            for (int j = 0; j < 36; j++)
                _mm256_storeu_ps(vt + (size_t)j * js, y[j]);
        }
    }
}

/* m [36][T][k] -> dst (n, k, h, w) nChw8c */
static void output_transform(const float *m, int n, int k, int h, int w, float *dst, int threads) {
    int th = tiles(h), tw = tiles(w), kb = k / 8;
    size_t T = (size_t)n * (size_t)th * (size_t)tw, js = T * (size_t)k;
    int64_t rows = (int64_t)n * kb * th;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int ty = (int)(r % th), b = (int)((r / th) % kb), img = (int)(r / th / kb);
        float *plane = dst + ((size_t)img * (size_t)kb + (size_t)b) * (size_t)h * w * 8;
        for (int tx = 0; tx < tw; tx++) {
            /* A^T m A; only the outputs inside (h, w) are written */
            const float *mt = m + (((size_t)img * th + ty) * tw + tx) * k + (size_t)b * 8;
            v8 x[36], y[16];
            for (int j = 0; j < 36; j++)
                x[j] = _mm256_loadu_ps(mt + (size_t)j * js);
            tr2d(at6, 6, 4, x, y);
            for (int i = 0; i < 4 && ty * 4 + i < h; i++)
                for (int j = 0; j < 4 && tx * 4 + j < w; j++)
                    _mm256_storeu_ps(
                        plane + ((size_t)(ty * 4 + i) * (size_t)w + (size_t)(tx * 4 + j)) * 8,
                        y[i * 4 + j]);
        }
    }
}

/* offset of (o, i, kh, kw) block-of-8-o in OIhw8i8o with c input channels */
static inline size_t w_off(int ob, int i, int c, int kh, int kw) {
    return (((size_t)ob * (size_t)(c / 8) + (size_t)(i / 8)) * 9 + (size_t)(kh * 3 + kw)) * 64 +
           (size_t)(i % 8) * 8;
}

void gb_wino_weights(const float *w, int k, int c, int flip, float *u, int threads) {
    int kb = k / 8;
    int64_t pairs = (int64_t)kb * c;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < pairs; p++) {
        int ob = (int)(p % kb), i = (int)(p / kb); /* neighbours write neighbours */
        v8 g[9], y[36];
        for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++)
                g[kh * 3 + kw] = flip ? _mm256_loadu_ps(w + w_off(ob, i, c, 2 - kh, 2 - kw))
                                      : _mm256_loadu_ps(w + w_off(ob, i, c, kh, kw));
        tr2d(g3, 3, 6, g, y);
        for (int j = 0; j < 36; j++)
            _mm256_storeu_ps(u + ((size_t)j * (size_t)c + (size_t)i) * (size_t)k + (size_t)ob * 8,
                             y[j]);
    }
}

/* 36 products C_j = op(A_j) op(B_j), one thread each (oneDNN's sgemm runs
 * single-threaded inside a parallel region). */
static void gemm36(char ta, char tb, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                   size_t as, const float *b, int64_t ldb, size_t bs, float *cc, int64_t ldc,
                   size_t cs, int threads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int j = 0; j < 36; j++)
        dnnl_sgemm(ta, tb, M, N, K, 1.f, a + (size_t)j * as, lda, b + (size_t)j * bs, ldb, 0.f,
                   cc + (size_t)j * cs, ldc);
}

/* in (n, ci, h, w) -> out (n, co, h, w); u [36][ci][co] (trans 0) or
 * [36][co][ci] (trans 1) */
static void conv(const float *in, const float *u, int trans, float *out, int n, int ci, int co,
                 int h, int w, float *scratch, int threads) {
    size_t T = (size_t)n * (size_t)tiles(h) * (size_t)tiles(w);
    float *v = scratch, *m = scratch + 36 * T * (size_t)ci;
    to_tiles(in, n, ci, h, w, 0, v, threads);
    gemm36('N', trans ? 'T' : 'N', (int64_t)T, co, ci, v, ci, T * (size_t)ci, u, trans ? ci : co,
           (size_t)ci * (size_t)co, m, co, T * (size_t)co, threads);
    output_transform(m, n, co, h, w, out, threads);
}

void gb_wino_fwd(const float *src, const float *u, float *dst, int n, int c, int k, int h, int w,
                 float *scratch, int threads) {
    conv(src, u, 0, dst, n, c, k, h, w, scratch, threads);
}

void gb_wino_bwd_data(const float *diff_dst, const float *u, float *diff_src, int n, int c, int k,
                      int h, int w, float *scratch, int threads) {
    conv(diff_dst, u, 1, diff_src, n, k, c, h, w, scratch, threads);
}

void gb_wino_bwd_weights(const float *src, const float *diff_dst, float *diff_w, int n, int c,
                         int k, int h, int w, float *scratch, int threads) {
    size_t T = (size_t)n * (size_t)tiles(h) * (size_t)tiles(w);
    float *vx = scratch, *vy = vx + 36 * T * (size_t)c, *p = vy + 36 * T * (size_t)k;
    to_tiles(src, n, c, h, w, 0, vx, threads);
    to_tiles(diff_dst, n, k, h, w, 1, vy, threads);
    /* P_j (c x k) = Vx_j^T Vy_j, summed over every tile of every image */
    gemm36('T', 'N', c, k, (int64_t)T, vx, c, T * (size_t)c, vy, k, T * (size_t)k, p, k,
           (size_t)c * (size_t)k, threads);
    int kb = k / 8;
    int64_t pairs = (int64_t)kb * c;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t q = 0; q < pairs; q++) {
        int ob = (int)(q % kb), i = (int)(q / kb);
        v8 x[36], y[9];
        for (int j = 0; j < 36; j++)
            x[j] = _mm256_loadu_ps(p + ((size_t)j * (size_t)c + (size_t)i) * (size_t)k +
                                   (size_t)ob * 8);
        tr2d(gt6, 6, 3, x, y);
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                _mm256_storeu_ps(diff_w + w_off(ob, i, c, a, b), y[a * 3 + b]);
    }
}
