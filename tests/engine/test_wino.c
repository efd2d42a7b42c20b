/* test_wino: our AVX2 Winograd F(4x4,3x3) passes (kernels/cpu/wino.c)
 * against a direct convolution in double precision, on shapes with tile
 * edges (sizes not multiples of 4, 1x1 images, one image, several channel
 * blocks). The comparison itself is checked: one planted error fails it.
 * Skips (77) on a CPU without AVX2/FMA. */
#include "check.h"
#include "wino.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* plain (n, c, h, w) <-> nChw8c */
static size_t blk(int c, int h, int w, int img, int ch, int y, int x) {
    return ((((size_t)img * (size_t)(c / 8) + (size_t)(ch / 8)) * (size_t)h + (size_t)y) *
                (size_t)w +
            (size_t)x) *
               8 +
           (size_t)(ch % 8);
}
/* plain (k, c, 3, 3) <-> OIhw8i8o */
static size_t wblk(int c, int o, int i, int kh, int kw) {
    return ((((size_t)(o / 8) * (size_t)(c / 8) + (size_t)(i / 8)) * 9 + (size_t)(kh * 3 + kw)) *
                8 +
            (size_t)(i % 8)) *
               8 +
           (size_t)(o % 8);
}

/* random plain (n, c, h, w) values, their nChw8c copy, and where each went */
static void fill(float *plain, float *blocked, size_t *idx, int n, int c, int h, int w) {
    for (int img = 0; img < n; img++)
        for (int ch = 0; ch < c; ch++)
            for (int yy = 0; yy < h; yy++)
                for (int xx = 0; xx < w; xx++) {
                    size_t p = (((size_t)img * c + ch) * h + yy) * w + xx;
                    plain[p] = frand();
                    idx[p] = blk(c, h, w, img, ch, yy, xx);
                    blocked[idx[p]] = plain[p];
                }
}

/* relative L2 error of got (blocked by idx) against ref (plain, double) */
static double rel_l2(const double *ref, const float *got, size_t count, const size_t *idx) {
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double)got[idx[i]] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static int check_shape(int n, int c, int k, int h, int w, int plant) {
    size_t xs = (size_t)n * c * h * w, ys = (size_t)n * k * h * w, ws = (size_t)k * c * 9;
    float *x = malloc(xs * 4), *dy = malloc(ys * 4), *wt = malloc(ws * 4);
    float *xb = malloc(xs * 4), *dyb = malloc(ys * 4), *wb = malloc(ws * 4);
    float *yb = malloc(ys * 4), *dxb = malloc(xs * 4), *dwb = malloc(ws * 4);
    float *u = malloc(gb_wino_u_floats(c, k) * 4);
    float *scr = malloc(gb_wino_scratch_floats(n, c, k, h, w) * 4);
    double *y = calloc(ys, 8), *dx = calloc(xs, 8), *dw = calloc(ws, 8);
    size_t *xi = malloc(xs * sizeof(size_t)), *yi = malloc(ys * sizeof(size_t)),
           *wi = malloc(ws * sizeof(size_t));
    CHECK(x && dy && wt && xb && dyb && wb && yb && dxb && dwb && u && scr && y && dx && dw && xi &&
          yi && wi);
    fill(x, xb, xi, n, c, h, w);
    fill(dy, dyb, yi, n, k, h, w);
    for (int o = 0; o < k; o++)
        for (int i = 0; i < c; i++)
            for (int a = 0; a < 9; a++) {
                size_t p = ((size_t)o * c + i) * 9 + a;
                wt[p] = frand() * 0.2f;
                wi[p] = wblk(c, o, i, a / 3, a % 3);
                wb[wi[p]] = wt[p];
            }
    /* direct, in double: y = conv(x, w), dx = conv^T(dy, w), dw = corr(x, dy) */
    for (int img = 0; img < n; img++)
        for (int o = 0; o < k; o++)
            for (int i = 0; i < c; i++)
                for (int yy = 0; yy < h; yy++)
                    for (int xx = 0; xx < w; xx++)
                        for (int kh = 0; kh < 3; kh++)
                            for (int kw = 0; kw < 3; kw++) {
                                int sy = yy + kh - 1, sx = xx + kw - 1;
                                if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
                                size_t pi = (((size_t)img * c + i) * h + sy) * w + sx;
                                size_t po = (((size_t)img * k + o) * h + yy) * w + xx;
                                size_t pw = ((size_t)o * c + i) * 9 + kh * 3 + kw;
                                y[po] += (double)x[pi] * wt[pw];
                                dx[pi] += (double)dy[po] * wt[pw];
                                dw[pw] += (double)dy[po] * x[pi];
                            }
    int threads = 2;
    /* every output must be written: start from garbage */
    memset(yb, 0x7f, ys * 4), memset(dxb, 0x7f, xs * 4), memset(dwb, 0x7f, ws * 4);
    gb_wino_weights(wb, k, c, 0, u, threads);
    gb_wino_fwd(xb, u, yb, n, c, k, h, w, scr, threads);
    gb_wino_weights(wb, k, c, 1, u, threads);
    gb_wino_bwd_data(dyb, u, dxb, n, c, k, h, w, scr, threads);
    gb_wino_bwd_weights(xb, dyb, dwb, n, c, k, h, w, scr, threads);
    if (plant == 1) yb[yi[ys / 2]] += 0.05f;
    if (plant == 2) dxb[xi[xs / 3]] -= 0.05f;
    if (plant == 3) dwb[wi[ws - 1]] += 0.05f;
    double ey = rel_l2(y, yb, ys, yi), ex = rel_l2(dx, dxb, xs, xi), ew = rel_l2(dw, dwb, ws, wi);
    if (!plant)
        printf("n=%d c=%d k=%d %dx%d: rel L2 fwd %.2e bwd_data %.2e bwd_weights %.2e\n", n, c, k, h,
               w, ey, ex, ew);
    /* fp32 Winograd F(4,3): transforms with factors up to 8 and 1/24 lose
     * a few bits over direct fp32 (~1e-7); 1e-5 is far below what a wrong
     * tap, edge or transform gives (>= 1e-3) */
    int ok = ey < 1e-5 && ex < 1e-5 && ew < 1e-5;
    free(x), free(dy), free(wt), free(xb), free(dyb), free(wb), free(yb), free(dxb), free(dwb);
    free(u), free(scr), free(y), free(dx), free(dw), free(xi), free(yi), free(wi);
    return ok;
}

int main(void) {
    if (!gb_wino_cpu_ok()) {
        printf("SKIP: this CPU has no AVX2/FMA\n");
        return 77;
    }
    static const int shapes[][5] = {
        {2, 8, 8, 8, 8},  {1, 16, 8, 7, 5},    {3, 8, 16, 1, 1}, {2, 24, 16, 13, 14},
        {1, 8, 24, 4, 9}, {2, 16, 16, 14, 14}, {1, 32, 8, 6, 3}, {4, 8, 8, 2, 17},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const int *s = shapes[i];
        CHECKF(check_shape(s[0], s[1], s[2], s[3], s[4], 0), "shape %zu off", i);
    }
    /* the check sees one wrong value in each pass */
    for (int p = 1; p <= 3; p++)
        CHECKF(!check_shape(2, 16, 8, 9, 7, p), "planted error %d not seen", p);
    printf("ok\n");
    return 0;
}
