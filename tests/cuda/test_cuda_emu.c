/* test_cuda_emu.c (CPU, CI) - the CUDA backend's own kernels (kernels.cu)
 * run on the CPU emulator (emu/cuda_emu.h) through their C launchers, each
 * against a plain loop written here from the op's definition: the indexing
 * (NHWC, grid-stride loops, partial blocks, odd sizes, channel counts that
 * are not a multiple of 32), the reductions (warp shuffles of the softmax,
 * the batch-norm row chunks and their merge, the block reduction of the
 * mean loss) and the launch shapes (the emulator refuses a launch a GPU
 * would refuse). The per-element math (cuda_math.h) is test_cuda_math's;
 * here it is reused where a result must match bit for bit. Every dtype the
 * launchers dispatch on is run. What the emulator cannot show (races, memory
 * coalescing, speed) is for the GPU run (docs/engine-cuda.md). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cuda_math.h"
#include "kernels.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const gb_kdtype_t DT[3] = {GB_KDT_F32, GB_KDT_F16, GB_KDT_BF16};
static const char *DTN[3] = {"f32", "f16", "bf16"};

static gb_rng_t g_rng; /* seeded in main */

/* values as the dtype stores them: round to dt, back to float */
static float q(gb_kdtype_t dt, float v) {
    if (dt == GB_KDT_F16) return gb_half_to_float(gb_float_to_half(v));
    if (dt == GB_KDT_BF16) return gb_bf16_to_float(gb_float_to_bf16(v));
    return v;
}
/* host float array <-> dt buffer, converted here (test_casts proves the
 * cast kernels do the same) */
static void *to_dt(gb_kdtype_t dt, const float *src, size_t n) {
    void *d = malloc(n * 4 + 4);
    CHECK(d);
    for (size_t i = 0; i < n; i++) {
        if (dt == GB_KDT_F32)
            ((float *)d)[i] = src[i];
        else
            ((uint16_t *)d)[i] =
                dt == GB_KDT_F16 ? gb_float_to_half(src[i]) : gb_float_to_bf16(src[i]);
    }
    return d;
}
static float *from_dt(gb_kdtype_t dt, const void *src, size_t n) {
    float *f = malloc(n * 4 + 4);
    CHECK(f);
    for (size_t i = 0; i < n; i++) {
        if (dt == GB_KDT_F32)
            f[i] = ((const float *)src)[i];
        else {
            uint16_t h = ((const uint16_t *)src)[i];
            f[i] = dt == GB_KDT_F16 ? gb_half_to_float(h) : gb_bf16_to_float(h);
        }
    }
    return f;
}
static float *randv(size_t n, float scale) {
    float *v = malloc(n * 4 + 4);
    CHECK(v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * (float)gb_rng_normal(&g_rng);
    return v;
}

/* |a - b| <= atol + rtol |b| everywhere; reports the first miss */
static int close_all(const char *what, const float *a, const double *b, size_t n, double rtol,
                     double atol) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= atol + rtol * fabs(b[i]))) {
            fprintf(stderr, "%s: [%zu] got %.9g want %.9g\n", what, i, a[i], b[i]);
            return 0;
        }
    }
    return 1;
}

static void test_casts(void) {
    size_t n = 70001; /* 274 blocks of 256, the last partial */
    float *v = randv(n, 3.0f);
    v[5] = 70000.0f; /* over fp16's range: inf */
    v[6] = 1e-8f;    /* fp16 subnormal */
    v[7] = NAN;
    for (int d = 0; d < 3; d++) {
        void *b = malloc(n * 4), *h = to_dt(DT[d], v, n);
        float *r = malloc(n * 4);
        CHECK(b && r);
        CHECK(gb_k_cast_from_f32(NULL, DT[d], v, b, n) == cudaSuccess);
        /* the same bits as our host rounding, NaN's payload aside */
        float *hb = from_dt(DT[d], b, n), *hh = from_dt(DT[d], h, n);
        for (size_t i = 0; i < n; i++)
            CHECKF(memcmp(&hb[i], &hh[i], 4) == 0 || (isnan(hb[i]) && isnan(hh[i])),
                   "%s cast from f32 [%zu]", DTN[d], i);
        free(hb);
        free(hh);
        CHECK(gb_k_cast_to_f32(NULL, DT[d], b, r, n) == cudaSuccess);
        for (size_t i = 0; i < n; i++) {
            float want = q(DT[d], v[i]);
            CHECKF(memcmp(&r[i], &want, 4) == 0 || (isnan(r[i]) && isnan(want)),
                   "%s cast [%zu]: %g vs %g", DTN[d], i, r[i], want);
        }
        free(b);
        free(h);
        free(r);
    }
    free(v);
}

static void test_image_to_nhwc(void) {
    int n = 3, h = 7, w = 5;
    float *src = randv((size_t)n * 3 * h * w, 1.0f);
    const int cis[] = {3, 4, 8}; /* 4 and 8: the stem's channel pads */
    for (int k = 0; k < 3; k++)
        for (int d = 0, ci = cis[k]; d < 3; d++) {
            size_t total = (size_t)n * h * w * ci;
            void *dst = malloc(total * 4);
            CHECK(gb_k_image_to_nhwc(NULL, DT[d], src, dst, n, h, w, ci) == cudaSuccess);
            float *r = from_dt(DT[d], dst, total);
            for (int b = 0; b < n; b++)
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        for (int c = 0; c < ci; c++) {
                            float want = c < 3 ? src[(((size_t)b * 3 + c) * h + y) * w + x] : 0;
                            float got = r[(((size_t)b * h + y) * w + x) * ci + c];
                            CHECKF(got == q(DT[d], want), "nhwc %s c_int %d (%d,%d,%d,%d)", DTN[d],
                                   ci, b, y, x, c);
                        }
            free(dst);
            free(r);
        }
    free(src);
}

static void test_synth_fill(void) {
    int n = 5, h = 9, w = 11, classes = 7;
    size_t count = (size_t)n * 3 * h * w;
    float *img = malloc(count * 4);
    int32_t lab[5];
    CHECK(img);
    CHECK(gb_k_synth(NULL, img, lab, n, h, w, classes, 42) == cudaSuccess);
    for (size_t i = 0; i < count; i++)
        CHECK(img[i] == gb_synth_normal(42, i));
    for (int i = 0; i < n; i++)
        CHECK(lab[i] == gb_synth_label(42, (uint64_t)i, classes) && lab[i] >= 0 &&
              lab[i] < classes);
    /* 1x1 images: the grid sized by the pixels still covers every label */
    int32_t many[600];
    float *px = malloc(600 * 3 * 4);
    CHECK(px);
    CHECK(gb_k_synth(NULL, px, many, 600, 1, 1, 1000, 9) == cudaSuccess);
    free(px);
    for (int i = 0; i < 600; i++)
        CHECK(many[i] == gb_synth_label(9, (uint64_t)i, 1000));
    for (int d = 0; d < 3; d++) {
        void *b = malloc(count * 4);
        CHECK(gb_k_fill_normal(NULL, DT[d], b, count, 7, 0.5f) == cudaSuccess);
        float *r = from_dt(DT[d], b, count);
        for (size_t i = 0; i < count; i++)
            CHECK(r[i] == q(DT[d], 0.5f * gb_synth_normal(7, i)));
        free(b);
        free(r);
    }
    free(img);
}

/* max pool against a plain scan (first strict maximum in row-major window
 * order, NaN wins), then its backward against a scatter of dy */
static void test_maxpool(void) {
    struct {
        int n, ih, iw, c, k, s, p;
    } cs[] = {{2, 9, 7, 5, 3, 2, 1}, {1, 8, 8, 33, 3, 2, 1}, {3, 5, 6, 4, 2, 2, 0}};
    for (size_t t = 0; t < sizeof(cs) / sizeof(cs[0]); t++) {
        int n = cs[t].n, ih = cs[t].ih, iw = cs[t].iw, c = cs[t].c, k = cs[t].k, s = cs[t].s,
            p = cs[t].p;
        int oh = (ih + 2 * p - k) / s + 1, ow = (iw + 2 * p - k) / s + 1;
        size_t ni = (size_t)n * ih * iw * c, no = (size_t)n * oh * ow * c;
        float *x = randv(ni, 1.0f);
        for (size_t i = 0; i < ni; i += 7)
            x[i] = x[i / 2]; /* ties */
        float *dy = randv(no, 1.0f);
        for (int d = 0; d < 3; d++) {
            void *xb = to_dt(DT[d], x, ni), *yb = malloc(no * 4), *dyb = to_dt(DT[d], dy, no);
            void *dxb = malloc(ni * 4);
            uint8_t *arg = malloc(no);
            CHECK(gb_k_maxpool_fwd(NULL, DT[d], xb, yb, arg, n, ih, iw, c, oh, ow, k, s, p) ==
                  cudaSuccess);
            CHECK(gb_k_maxpool_bwd(NULL, DT[d], dyb, arg, dxb, n, ih, iw, c, oh, ow, k, s, p) ==
                  cudaSuccess);
            float *y = from_dt(DT[d], yb, no), *dx = from_dt(DT[d], dxb, ni);
            double *want_dx = calloc(ni, sizeof(double));
            CHECK(want_dx);
            for (int b = 0; b < n; b++)
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++)
                        for (int ch = 0; ch < c; ch++) {
                            float best = 0;
                            long at = -1;
                            for (int r = 0; r < k; r++)
                                for (int qq = 0; qq < k; qq++) {
                                    int iy = oy * s - p + r, ix = ox * s - p + qq;
                                    if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                                    long i = (((long)b * ih + iy) * iw + ix) * c + ch;
                                    float v = q(DT[d], x[i]);
                                    if (at < 0 || v > best) best = v, at = i;
                                }
                            size_t o = (((size_t)b * oh + oy) * ow + ox) * c + ch;
                            CHECKF(y[o] == best, "maxpool %s case %zu out %zu", DTN[d], t, o);
                            want_dx[at] += q(DT[d], dy[o]);
                        }
            char what[64];
            snprintf(what, sizeof(what), "maxpool bwd %s case %zu", DTN[d], t);
            CHECK(close_all(what, dx, want_dx, ni, d ? 1e-2 : 1e-6, 1e-6));
            free(xb), free(yb), free(dyb), free(dxb), free(arg), free(y), free(dx), free(want_dx);
        }
        free(x);
        free(dy);
    }
}

static void test_avgpool(void) {
    int n = 3, hw = 49, c = 37;
    float *x = randv((size_t)n * hw * c, 1.0f), *dy = randv((size_t)n * c, 1.0f);
    for (int d = 0; d < 3; d++) {
        void *xb = to_dt(DT[d], x, (size_t)n * hw * c), *yb = malloc((size_t)n * c * 4);
        void *dyb = to_dt(DT[d], dy, (size_t)n * c), *dxb = malloc((size_t)n * hw * c * 4);
        CHECK(gb_k_avgpool_fwd(NULL, DT[d], xb, yb, n, hw, c) == cudaSuccess);
        CHECK(gb_k_avgpool_bwd(NULL, DT[d], dyb, dxb, n, hw, c) == cudaSuccess);
        float *y = from_dt(DT[d], yb, (size_t)n * c), *dx = from_dt(DT[d], dxb, (size_t)n * hw * c);
        double *wy = malloc((size_t)n * c * 8), *wdx = malloc((size_t)n * hw * c * 8);
        CHECK(wy && wdx);
        for (int b = 0; b < n; b++)
            for (int ch = 0; ch < c; ch++) {
                double acc = 0;
                for (int j = 0; j < hw; j++)
                    acc += q(DT[d], x[((size_t)b * hw + j) * c + ch]);
                wy[b * c + ch] = acc / hw;
                for (int j = 0; j < hw; j++)
                    wdx[((size_t)b * hw + j) * c + ch] = q(DT[d], dy[b * c + ch]) / hw;
            }
        double rt = d ? 1e-2 : 1e-5;
        CHECK(close_all("avgpool fwd", y, wy, (size_t)n * c, rt, 1e-6));
        CHECK(close_all("avgpool bwd", dx, wdx, (size_t)n * hw * c, rt, 1e-7));
        free(xb), free(yb), free(dyb), free(dxb), free(y), free(dx), free(wy), free(wdx);
    }
    free(x);
    free(dy);
}

/* softmax cross-entropy: one warp per row; k below, at and over 32 lanes,
 * rows that leave part of the last block idle */
static void test_softmax_ce(void) {
    int shapes[][2] = {{13, 10}, {9, 32}, {5, 1000}, {1, 1}};
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        int n = shapes[t][0], k = shapes[t][1];
        float *z = randv((size_t)n * k, 3.0f), *bias = randv((size_t)k, 1.0f);
        int32_t *lab = malloc((size_t)n * 4);
        CHECK(lab);
        for (int i = 0; i < n; i++)
            lab[i] = (int32_t)(gb_rng_uniform(&g_rng) * k);
        gb_scaler_state_t sc = {.scale = 64.0f};
        for (int d = 0; d < 3; d++)
            for (int with_scaler = 0; with_scaler < 2; with_scaler++) {
                /* 3 replicas with the scaler: the mean over all of them */
                int replicas = with_scaler ? 3 : 1;
                float *dl = malloc((size_t)n * k * 4), *loss = malloc((size_t)n * 4);
                void *dldt = malloc((size_t)n * k * 4);
                CHECK(gb_k_softmax_ce(NULL, DT[d], z, bias, lab, n, k, replicas,
                                      with_scaler ? &sc : NULL, dl, dldt, loss) == cudaSuccess);
                float *dlr = from_dt(DT[d], dldt, (size_t)n * k);
                double f = (with_scaler ? 64.0 : 1.0) / n / replicas;
                for (int i = 0; i < n; i++) {
                    double m = -INFINITY, s = 0;
                    for (int j = 0; j < k; j++)
                        m = fmax(m, (double)z[i * k + j] + bias[j]);
                    for (int j = 0; j < k; j++)
                        s += exp((double)z[i * k + j] + bias[j] - m);
                    double want_loss = m + log(s) - ((double)z[i * k + lab[i]] + bias[lab[i]]);
                    CHECKF(fabs(loss[i] - want_loss) <= 1e-5 * (1 + fabs(want_loss)),
                           "ce loss n %d k %d row %d: %g vs %g", n, k, i, loss[i], want_loss);
                    for (int j = 0; j < k; j++) {
                        double g =
                            (exp((double)z[i * k + j] + bias[j] - m) / s - (j == lab[i])) * f;
                        size_t o = (size_t)i * k + j;
                        CHECKF(fabs(dl[o] - g) <= 1e-6 * f + 1e-5 * fabs(g),
                               "ce grad n %d k %d [%d,%d]: %g vs %g", n, k, i, j, dl[o], g);
                        CHECKF(dlr[o] == q(DT[d], dl[o]), "ce grad %s copy", DTN[d]);
                    }
                }
                /* the mean loss: one block's tree over n rows */
                float mean = -1;
                CHECK(gb_k_loss_mean(NULL, loss, n, &mean) == cudaSuccess);
                double acc = 0;
                for (int i = 0; i < n; i++)
                    acc += loss[i];
                CHECKF(fabs(mean - acc / n) <= 1e-6 * (1 + fabs(acc / n)), "loss mean");
                free(dl), free(loss), free(dldt), free(dlr);
            }
        float dl0[1], loss0[1];
        CHECKF(gb_k_softmax_ce(NULL, DT[0], z, bias, lab, 1, k, 0, NULL, dl0, dl0, loss0) ==
                   cudaErrorInvalidValue,
               "softmax ce with 0 replicas not refused");
        free(z), free(bias), free(lab);
    }
    /* a mean over more rows than threads */
    int n = 1001;
    float *rl = randv((size_t)n, 1.0f), mean = 0;
    double acc = 0;
    for (int i = 0; i < n; i++)
        acc += rl[i];
    CHECK(gb_k_loss_mean(NULL, rl, n, &mean) == cudaSuccess);
    CHECKF(fabs(mean - acc / n) <= 1e-6, "loss mean over %d: %g vs %g", n, mean, acc / n);
    free(rl);
}

static void test_colsum(void) {
    int n = 17, k = 1000;
    float *a = randv((size_t)n * k, 1.0f), *out = malloc((size_t)k * 4);
    CHECK(out);
    CHECK(gb_k_colsum(NULL, a, n, k, out) == cudaSuccess);
    for (int j = 0; j < k; j++) {
        double acc = 0;
        for (int i = 0; i < n; i++)
            acc += a[(size_t)i * k + j];
        CHECKF(out[j] == (float)acc, "colsum [%d]", j);
    }
    free(a);
    free(out);
}

static void test_bn_running(void) {
    int cs[3] = {300, 7, 64};
    float *mean[3], *inv[3], *rm[3], *rv[3], *erm[3], *erv[3];
    gb_bn_run_entry_t tab[3];
    for (int e = 0; e < 3; e++) {
        mean[e] = randv(cs[e], 1.0f), inv[e] = randv(cs[e], 0.2f);
        rm[e] = randv(cs[e], 1.0f), rv[e] = randv(cs[e], 0.1f);
        erm[e] = malloc(cs[e] * 4), erv[e] = malloc(cs[e] * 4);
        for (int i = 0; i < cs[e]; i++) {
            inv[e][i] = 1.0f + fabsf(inv[e][i]);
            rv[e][i] = 1.0f + fabsf(rv[e][i]);
            erm[e][i] = rm[e][i], erv[e][i] = rv[e][i];
            gb_bn_running(&erm[e][i], &erv[e][i], mean[e][i], inv[e][i], 1e-5f, 98.0f, 0.1f);
        }
        tab[e] = (gb_bn_run_entry_t){mean[e], inv[e], rm[e], rv[e], cs[e], 98.0f};
    }
    CHECK(gb_k_bn_running(NULL, tab, 3, 300, 1e-5f, 0.1f) == cudaSuccess);
    for (int e = 0; e < 3; e++) {
        CHECK(memcmp(rm[e], erm[e], cs[e] * 4) == 0 && memcmp(rv[e], erv[e], cs[e] * 4) == 0);
        free(mean[e]), free(inv[e]), free(rm[e]), free(rv[e]), free(erm[e]), free(erv[e]);
    }
}

static void test_finite_sgd_scaler(void) {
    size_t n = 5000;
    float *v = randv(n, 1.0f);
    for (int d = 0; d < 3; d++) {
        int found = 0;
        void *b = to_dt(DT[d], v, n);
        CHECK(gb_k_finite_check(NULL, DT[d], b, n, &found) == cudaSuccess && found == 0);
        free(b);
        float keep = v[n - 3];
        v[n - 3] = d == 1 ? 1e6f : INFINITY; /* 1e6: finite in fp32, inf in fp16 */
        b = to_dt(DT[d], v, n);
        CHECK(gb_k_finite_check(NULL, DT[d], b, n, &found) == cudaSuccess && found == 1);
        free(b);
        v[n - 3] = NAN;
        b = to_dt(DT[d], v, n);
        found = 0;
        CHECK(gb_k_finite_check(NULL, DT[d], b, n, &found) == cudaSuccess && found == 1);
        free(b);
        v[n - 3] = keep;
    }
    /* SGD: every element as gb_sgd_elem, with and without the scaler and
     * the weight copy; skipped when the scaler found an inf */
    size_t m = 4099;
    float *w0 = randv(m, 1.0f), *b0 = randv(m, 0.1f), *g = randv(m, 64.0f);
    for (int gd = 0; gd < 3; gd++)
        for (int cd = -1; cd < 3; cd++)
            for (int scaled = 0; scaled < 2; scaled++) {
                float *w = malloc(m * 4), *bf = malloc(m * 4);
                memcpy(w, w0, m * 4);
                memcpy(bf, b0, m * 4);
                void *gb = to_dt(DT[gd], g, m), *wc = cd >= 0 ? malloc(m * 4) : NULL;
                gb_scaler_state_t sc = {.scale = 64.0f};
                CHECK(gb_k_sgd(NULL, DT[gd], w, bf, gb, wc, cd >= 0 ? DT[cd] : GB_KDT_F32, m, 0.1f,
                               0.9f, 1e-4f, scaled ? &sc : NULL) == cudaSuccess);
                float *wcr = cd >= 0 ? from_dt(DT[cd], wc, m) : NULL;
                for (size_t i = 0; i < m; i++) {
                    float eb = b0[i];
                    float ew = gb_sgd_elem(w0[i], &eb, q(DT[gd], g[i]), 0.1f, 0.9f, 1e-4f,
                                           scaled ? 1.0f / 64.0f : 1.0f);
                    CHECKF(w[i] == ew && bf[i] == eb, "sgd g %s copy %d scaled %d [%zu]", DTN[gd],
                           cd, scaled, i);
                    if (wcr) CHECK(wcr[i] == q(DT[cd], ew));
                }
                if (scaled) { /* found_inf: nothing moves */
                    sc.found_inf = 1;
                    memcpy(w, w0, m * 4);
                    CHECK(gb_k_sgd(NULL, DT[gd], w, bf, gb, wc, cd >= 0 ? DT[cd] : GB_KDT_F32, m,
                                   0.1f, 0.9f, 1e-4f, &sc) == cudaSuccess);
                    CHECK(memcmp(w, w0, m * 4) == 0);
                    /* a scale halved to 0: skipped too, no NaN weights */
                    sc.found_inf = 0;
                    sc.scale = 0.0f;
                    CHECK(gb_k_sgd(NULL, DT[gd], w, bf, gb, wc, cd >= 0 ? DT[cd] : GB_KDT_F32, m,
                                   0.1f, 0.9f, 1e-4f, &sc) == cudaSuccess);
                    CHECKF(memcmp(w, w0, m * 4) == 0, "sgd with scale 0 moved the weights");
                }
                free(w), free(bf), free(gb), free(wc), free(wcr);
            }
    /* the scaler: as the host rule, one thread */
    gb_scaler_state_t s = {.scale = 1024.0f, .tracker = 5, .found_inf = 1};
    float es = 1024.0f;
    int et = 5;
    gb_scaler_update(&es, &et, 1, GB_SCALER_INTERVAL);
    CHECK(gb_k_scaler_update(NULL, &s) == cudaSuccess);
    CHECK(s.used_scale == 1024.0f && s.scale == es && s.tracker == et);
    free(v), free(w0), free(b0), free(g);
}

/* one dtype's buffer of n elements, shifted by off elements from malloc's
 * 16-byte alignment (off 1: every pointer misaligned, so the launchers must
 * take the scalar kernels even where c allows 16-byte accesses) */
static void *to_dt_at(gb_kdtype_t dt, const float *src, size_t n, int off, void **base) {
    size_t es = dt == GB_KDT_F32 ? 4 : 2;
    void *d = to_dt(dt, src, n), *b = malloc((n + 8) * 4);
    CHECK(b);
    memcpy((char *)b + off * es, d, n * es);
    free(d);
    *base = b;
    return (char *)b + off * es;
}
static void *out_at(gb_kdtype_t dt, size_t n, int off, void **base) {
    size_t es = dt == GB_KDT_F32 ? 4 : 2;
    void *b = malloc((n + 8) * 4);
    CHECK(b);
    memset(b, 0xff, (n + 8) * 4); /* NaN in every dtype: an element not written shows */
    *base = b;
    return (char *)b + off * es;
}

/* Our NHWC batch norm, forward and backward, against double, for one shape:
 * m rows, c channels, rc row chunks (0: gb_k_bn_rchunks for 132 SMs), every
 * buffer off elements from 16-byte alignment. Modes (bits of modes): 0
 * plain, 1 ReLU, 2 ReLU with the residual z (and its gradient dz, as every
 * block's last BN), 3 z without ReLU. */
static void bn_case(long m, int c, int rc_in, int off, int modes) {
    size_t nn = (size_t)m * c;
    float *x = randv(nn, 2.0f), *z = randv(nn, 1.0f), *dy = randv(nn, 1.0f);
    for (size_t i = 0; i < nn; i++)
        x[i] += 5.0f; /* a mean far from 0: the shifted moments matter */
    float *gamma = randv(c, 1.0f), *beta = randv(c, 1.0f);
    for (int d = 0; d < 3; d++)
        for (int mode = 0; mode < 4; mode++) {
            if (!(modes >> mode & 1)) continue;
            int relu = mode == 1 || mode == 2, with_z = mode >= 2;
            int rc = rc_in ? rc_in : gb_k_bn_rchunks(DT[d], m, c, 132);
            void *bx, *bz, *by, *bdy, *bdx, *bdz;
            void *xb = to_dt_at(DT[d], x, nn, off, &bx), *zb = to_dt_at(DT[d], z, nn, off, &bz);
            void *dyb = to_dt_at(DT[d], dy, nn, off, &bdy), *yb = out_at(DT[d], nn, off, &by);
            void *dxb = out_at(DT[d], nn, off, &bdx), *dzb = out_at(DT[d], nn, off, &bdz);
            float *part = malloc((size_t)rc * c * 3 * 4), *smean = malloc(c * 4);
            float *sinv = malloc(c * 4), *coef = malloc(3 * (size_t)c * 4);
            float *dg = malloc(c * 4), *db = malloc(c * 4);
            CHECK(part && smean && sinv && coef && dg && db);
            CHECK(gb_k_bn_fwd_stats(NULL, DT[d], xb, m, c, rc, part) == cudaSuccess);
            CHECK(gb_k_bn_fwd_finalize(NULL, part, rc, c, gamma, beta, 1e-5f, smean, sinv, coef) ==
                  cudaSuccess);
            CHECK(gb_k_bn_fwd_apply(NULL, DT[d], xb, with_z ? zb : NULL, yb, m, c, coef, relu) ==
                  cudaSuccess);
            /* without the ReLU the backward reads no y (NULL here) */
            CHECK(gb_k_bn_bwd_reduce(NULL, DT[d], xb, relu ? yb : NULL, dyb, m, c, relu, NULL,
                                     smean, rc, part) == cudaSuccess);
            CHECK(gb_k_bn_bwd_finalize(NULL, part, rc, c, m, gamma, sinv, dg, db, coef) ==
                  cudaSuccess);
            CHECK(gb_k_bn_bwd_apply(NULL, DT[d], xb, relu ? yb : NULL, dyb, dxb,
                                    with_z ? dzb : NULL, m, c, relu, NULL, smean,
                                    coef) == cudaSuccess);
            float *y = from_dt(DT[d], yb, nn), *dx = from_dt(DT[d], dxb, nn);
            float *dz = with_z ? from_dt(DT[d], dzb, nn) : NULL;
            double rt = d == 0 ? 2e-5 : d == 1 ? 4e-3 : 3e-2;
            for (int ch = 0; ch < c; ch++) {
                double s = 0, s2 = 0;
                for (long r = 0; r < m; r++)
                    s += q(DT[d], x[r * c + ch]);
                double mu = s / m;
                for (long r = 0; r < m; r++) {
                    double e = q(DT[d], x[r * c + ch]) - mu;
                    s2 += e * e;
                }
                double inv = 1.0 / sqrt(s2 / m + 1e-5);
                CHECKF(fabs(smean[ch] - mu) <= 1e-5 * (1 + fabs(mu)) &&
                           fabs(sinv[ch] - inv) <= 1e-5 * inv,
                       "bn stats %s m %ld c %d rc %d off %d ch %d: mean %g/%g invstd %g/%g", DTN[d],
                       m, c, rc, off, ch, smean[ch], mu, sinv[ch], inv);
                /* forward output; then the backward through our y's mask */
                double sg = 0, sgx = 0;
                for (long r = 0; r < m; r++) {
                    size_t i = (size_t)r * c + ch;
                    double xh = (q(DT[d], x[i]) - mu) * inv;
                    double v = gamma[ch] * xh + beta[ch] + (with_z ? q(DT[d], z[i]) : 0.0);
                    if (relu && v < 0) v = 0;
                    CHECKF(fabs(y[i] - v) <= rt * (1 + fabs(v)),
                           "bn y %s m %ld c %d mode %d off %d [%ld,%d]: %g/%g", DTN[d], m, c, mode,
                           off, r, ch, y[i], v);
                    double gg = (!relu || y[i] > 0) ? q(DT[d], dy[i]) : 0.0;
                    sg += gg;
                    sgx += gg * xh;
                }
                CHECKF(fabs(db[ch] - sg) <= rt * (1 + fabs(sg)) &&
                           fabs(dg[ch] - sgx) <= rt * (1 + fabs(sgx)),
                       "bn dgamma/dbeta %s m %ld c %d mode %d off %d ch %d: %g/%g %g/%g", DTN[d], m,
                       c, mode, off, ch, dg[ch], sgx, db[ch], sg);
                for (long r = 0; r < m; r++) {
                    size_t i = (size_t)r * c + ch;
                    double xh = (q(DT[d], x[i]) - mu) * inv;
                    double gg = (!relu || y[i] > 0) ? q(DT[d], dy[i]) : 0.0;
                    double want = gamma[ch] * inv * (gg - sg / m - xh * sgx / m);
                    CHECKF(fabs(dx[i] - want) <= rt * (1 + fabs(want)) &&
                               (!dz || dz[i] == q(DT[d], (float)gg)),
                           "bn dx/dz %s m %ld c %d mode %d off %d [%ld,%d]: %g/%g", DTN[d], m, c,
                           mode, off, r, ch, dx[i], want);
                }
            }
            /* nothing written outside the tensors */
            size_t es = DT[d] == GB_KDT_F32 ? 4 : 2;
            const unsigned char *outs[3] = {by, bdx, bdz};
            for (int k = 0; k < 3; k++)
                for (size_t b = 0; b < (nn + 8) * 4; b++)
                    if (b < off * es || b >= (off + nn) * es || (k == 2 && !with_z))
                        CHECKF(outs[k][b] == 0xff, "bn %s wrote outside its tensor", DTN[d]);
            free(bx), free(bz), free(by), free(bdy), free(bdx), free(bdz), free(part);
            free(smean), free(sinv), free(coef), free(dg), free(db), free(y), free(dx), free(dz);
        }
    free(x), free(z), free(dy), free(gamma), free(beta);
}

/* Row counts not divisible by the chunks (some chunks empty), channels not a
 * multiple of 32. The 16-byte path (c a multiple of 4 fp32 / 8 fp16, bf16
 * channels, aligned): c 64, 2048 (tiles of 32 vectors), 40 (5 or 10 vectors
 * a row: blocks of 51 or 25 rows, a tree over a count that is no power of
 * two), 16 (2 vectors: 128-row blocks, most threads without rows), 12 in
 * fp32 (3 vectors); more than 32 chunks (the finalize's slices each merge
 * several; 70: 16 slices), 328 (41 or 82 vectors: a last tile with idle
 * lanes). The scalar kernels: c 7, 33, 12 in fp16/bf16,
 * and 64 and 256 misaligned by one element. */
static void test_bn(void) {
    struct {
        long m;
        int c, rchunks, off, modes;
    } cs[] = {{1000, 40, 3, 0, 15}, {37, 7, 1, 0, 15},    {600, 64, 16, 0, 15},
              {5, 33, 8, 0, 15},    {1003, 64, 0, 0, 15}, {200, 2048, 5, 0, 5},
              {777, 12, 7, 0, 15},  {1100, 16, 36, 0, 5}, {1100, 64, 70, 0, 4},
              {500, 64, 9, 1, 4},   {130, 256, 3, 1, 4},  {61, 64, 0, 1, 15},
              {150, 328, 4, 0, 9}};
    for (size_t t = 0; t < sizeof(cs) / sizeof(cs[0]); t++)
        bn_case(cs[t].m, cs[t].c, cs[t].rchunks, cs[t].off, cs[t].modes);
}

/* the chunk rule for every ResNet-50 BN shape at batch 256 on 132 SMs: a
 * launch a GPU takes (1..65535 chunks), enough reduction blocks to fill it
 * (one wave of 4 per SM where the rows allow), >= 8 rows per thread */
static void test_bn_rchunks(void) {
    const long hw[] = {112 * 112, 56 * 56, 28 * 28, 14 * 14, 7 * 7};
    const int cs[] = {64, 128, 256, 512, 1024, 2048};
    for (int d = 0; d < 3; d++)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 6; b++) {
                long m = 256 * hw[a];
                int c = cs[b], v = d == 0 ? 4 : 8, cv = c / v, tw = cv < 32 ? cv : 32;
                int tiles = (cv + tw - 1) / tw, rows = 256 / tw;
                int rc = gb_k_bn_rchunks(DT[d], m, c, 132);
                CHECKF(rc >= 1 && rc <= 65535, "rchunks %d", rc);
                long per = (m + rc - 1) / rc;
                CHECKF(per >= 8L * rows || rc == 1, "%s m %ld c %d: %d chunks of %ld rows", DTN[d],
                       m, c, rc, per);
                CHECKF((long)rc * tiles >= 4 * 132 || per < 16L * rows,
                       "%s m %ld c %d: %d chunks x %d tiles", DTN[d], m, c, rc, tiles);
                CHECKF((long)rc * tiles < 4 * 132 + tiles, "%s m %ld c %d: over one wave", DTN[d],
                       m, c);
            }
    /* the largest: 3.2M rows of 64 channels in fp16 */
    CHECK(gb_k_bn_rchunks(GB_KDT_F16, 256L * 112 * 112, 64, 132) == 528);
    CHECK(gb_k_bn_rchunks(GB_KDT_F16, 256L * 7 * 7, 2048, 132) == 66);
    /* few rows: one chunk; channels the scalar kernels take */
    CHECK(gb_k_bn_rchunks(GB_KDT_F16, 10, 64, 132) == 1);
    CHECK(gb_k_bn_rchunks(GB_KDT_F16, 1L << 20, 12, 132) == 528);
}

/* a channel whose mean is far above its spread: b = beta - mean gamma / std
 * past fp16's 65504 (fine in fp32 and bf16) is flagged, only there; NaN
 * sums are not (the loss scaler sees those) */
static void test_fin_range(void) {
    const int c = 3;
    const long m = 1000;
    /* ch 0: mean 1, var 1; ch 1: mean 300, var 0 (b = -300/sqrt(1e-5)
     * = -94868); ch 2: mean 300 var 4 (b = -150) */
    float sums[6] = {1000.0f, 300000.0f, 300000.0f, 2000.0f, 90000000.0f, 90004000.0f};
    float gamma[3] = {1, 1, 1}, beta[3] = {0, 0, 0}, mean[3], inv[3], fc[6], pre[6];
    for (int d = 0; d < 3; d++) {
        int range = 0;
        CHECK(gb_k_bn_fin_sums(NULL, DT[d], sums, m, c, gamma, beta, 1e-5f, mean, inv, fc, pre,
                               &range) == cudaSuccess);
        CHECKF(fc[c + 1] < -9.0e4f && fc[c + 1] > -9.9e4f, "b %g", (double)fc[c + 1]);
        CHECKF(range == (DT[d] == GB_KDT_F16), "%s: range flag %d", DTN[d], range);
        /* NULL: not asked */
        CHECK(gb_k_bn_fin_sums(NULL, DT[d], sums, m, c, gamma, beta, 1e-5f, mean, inv, fc, pre,
                               NULL) == cudaSuccess);
    }
    float nan_sums[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    int range = 0;
    CHECK(gb_k_bn_fin_sums(NULL, GB_KDT_F16, nan_sums, m, c, gamma, beta, 1e-5f, mean, inv, fc, pre,
                           &range) == cudaSuccess);
    CHECKF(range == 0, "NaN sums flagged as out of range");
}

/* the fused step's kernels: a batch norm finalized from sums, the block's
 * end (identity or projection residual), 16-byte and one-element paths */
static void test_fused(void) {
    struct {
        long m;
        int c, shift; /* shift: pointers one element off 16-byte alignment */
    } cs[] = {{300, 64, 0}, {37, 12, 0}, {50, 7, 0}, {40, 64, 1}};
    for (size_t t = 0; t < sizeof(cs) / sizeof(cs[0]); t++) {
        long m = cs[t].m;
        int c = cs[t].c, sh = cs[t].shift;
        size_t nn = (size_t)m * c;
        float *x = randv(nn, 2.0f), *z = randv(nn, 1.0f), *gamma = randv(c, 1.0f);
        float *beta = randv(c, 1.0f), *sums = malloc(2 * (size_t)c * 4);
        CHECK(sums);
        for (int d = 0; d < 3; d++) {
            /* the sums as a conv's epilogue would give them, for x as stored */
            for (int ch = 0; ch < c; ch++) {
                double s1 = 0, s2 = 0;
                for (long r = 0; r < m; r++) {
                    double v = q(DT[d], x[r * c + ch]) + 0.5;
                    s1 += v;
                    s2 += v * v;
                }
                sums[ch] = (float)s1;
                sums[c + ch] = (float)s2;
            }
            float *mean = malloc(c * 4), *inv = malloc(c * 4), *fc = malloc(2 * (size_t)c * 4);
            float *zc = malloc(2 * (size_t)c * 4);
            void *pre = malloc(2 * (size_t)c * 4);
            CHECK(mean && inv && fc && zc && pre);
            int range = 0;
            CHECK(gb_k_bn_fin_sums(NULL, DT[d], sums, m, c, gamma, beta, 1e-5f, mean, inv, fc, pre,
                                   &range) == cudaSuccess);
            CHECKF(range == 0, "fin_sums %s case %zu: in range, flagged", DTN[d], t);
            float *pf = from_dt(DT[d], pre, 2 * (size_t)c);
            for (int ch = 0; ch < c; ch++) {
                gb_bn_fin_t f =
                    gb_bn_from_sums(sums[ch], sums[c + ch], (double)m, gamma[ch], beta[ch], 1e-5f);
                CHECKF(mean[ch] == f.mean && inv[ch] == f.invstd && fc[ch] == f.a &&
                           fc[c + ch] == f.b && pf[ch] == q(DT[d], f.a) &&
                           pf[c + ch] == q(DT[d], f.b),
                       "fin_sums %s case %zu ch %d", DTN[d], t, ch);
                zc[ch] = 0.5f + 0.01f * (float)ch;
                zc[c + ch] = -0.25f;
            }
            size_t es = DT[d] == GB_KDT_F32 ? 4 : 2;
            char *xb = to_dt(DT[d], x, nn + 1), *zb = to_dt(DT[d], z, nn + 1);
            char *yb = malloc((nn + 1) * 4);
            CHECK(yb);
            for (int proj = 0; proj < 2; proj++)
                for (int relu = 0; relu < 2; relu++) {
                    /* shifted: the tensors start one element in */
                    CHECK(gb_k_bn_apply2(NULL, DT[d], xb + sh * es, zb + sh * es, yb + sh * es, m,
                                         c, fc, proj ? zc : NULL, relu) == cudaSuccess);
                    float *y = from_dt(DT[d], yb + sh * es, nn);
                    float *xs = from_dt(DT[d], xb + sh * es, nn);
                    float *zs = from_dt(DT[d], zb + sh * es, nn);
                    for (size_t i = 0; i < nn; i++) {
                        int ch = (int)(i % (size_t)c);
                        float want = q(DT[d], gb_bn_apply2(xs[i], fc[ch], fc[c + ch], zs[i],
                                                           proj ? zc[ch] : 1.0f,
                                                           proj ? zc[c + ch] : 0.0f, relu));
                        CHECKF(y[i] == want, "apply2 %s case %zu proj %d relu %d [%zu]: %g/%g",
                               DTN[d], t, proj, relu, i, y[i], want);
                    }
                    free(y), free(xs), free(zs);
                }
            free(mean), free(inv), free(fc), free(zc), free(pre), free(pf), free(xb), free(zb),
                free(yb);
        }
        free(x), free(z), free(gamma), free(beta), free(sums);
    }
}

/* the fused step's batch-norm backward: no stored output, the ReLU's mask
 * recomputed from x with the prologue's coefficients (in the dtype), both
 * paths (16-byte, one element, misaligned) */
static void test_bwd_recompute(void) {
    struct {
        long m;
        int c, shift;
    } cs[] = {{300, 64, 0}, {37, 12, 0}, {40, 64, 1}};
    for (size_t t = 0; t < sizeof(cs) / sizeof(cs[0]); t++) {
        long m = cs[t].m;
        int c = cs[t].c, sh = cs[t].shift, rc = 3;
        size_t nn = (size_t)m * c;
        float *x = randv(nn + 1, 2.0f), *dy = randv(nn + 1, 1.0f), *gamma = randv(c, 1.0f);
        float *beta = randv(c, 1.0f), *ab = malloc(2 * (size_t)c * 4);
        CHECK(ab);
        for (int d = 0; d < 3; d++) {
            size_t es = DT[d] == GB_KDT_F32 ? 4 : 2;
            double *mu = malloc(c * 8), *inv = malloc(c * 8);
            float *smean = malloc(c * 4), *sinv = malloc(c * 4),
                  *part = malloc(rc * (size_t)c * 12);
            float *coef = malloc(3 * (size_t)c * 4), *dg = malloc(c * 4), *db = malloc(c * 4);
            CHECK(mu && inv && smean && sinv && part && coef && dg && db);
            for (int ch = 0; ch < c; ch++) {
                double s1 = 0, s2 = 0;
                for (long r = 0; r < m; r++)
                    s1 += q(DT[d], x[sh + r * c + ch]);
                mu[ch] = s1 / m;
                for (long r = 0; r < m; r++) {
                    double e = q(DT[d], x[sh + r * c + ch]) - mu[ch];
                    s2 += e * e;
                }
                inv[ch] = 1.0 / sqrt(s2 / m + 1e-5);
                smean[ch] = (float)mu[ch];
                sinv[ch] = (float)inv[ch];
                ab[ch] = (float)(gamma[ch] * inv[ch]);
                ab[c + ch] = (float)(beta[ch] - mu[ch] * gamma[ch] * inv[ch]);
            }
            char *xb = to_dt(DT[d], x, nn + 1), *dyb = to_dt(DT[d], dy, nn + 1);
            char *dxb = malloc((nn + 1) * 4);
            void *pre = to_dt(DT[d], ab, 2 * (size_t)c);
            float *pf = from_dt(DT[d], pre, 2 * (size_t)c);
            CHECK(dxb);
            /* shifted: the tensors start one element into their buffers */
            char *xs = xb + sh * es, *dys = dyb + sh * es, *dxs = dxb + sh * es;
            CHECK(gb_k_bn_bwd_reduce(NULL, DT[d], xs, NULL, dys, m, c, 1, pre, smean, rc, part) ==
                  cudaSuccess);
            CHECK(gb_k_bn_bwd_finalize(NULL, part, rc, c, m, gamma, sinv, dg, db, coef) ==
                  cudaSuccess);
            CHECK(gb_k_bn_bwd_apply(NULL, DT[d], xs, NULL, dys, dxs, NULL, m, c, 1, pre, smean,
                                    coef) == cudaSuccess);
            float *dx = from_dt(DT[d], dxs, nn);
            double rt = d == 0 ? 2e-5 : d == 1 ? 4e-3 : 3e-2;
            for (int ch = 0; ch < c; ch++) {
                double sg = 0, sgx = 0;
                for (long r = 0; r < m; r++) {
                    size_t i = sh + (size_t)r * c + ch;
                    float xq = q(DT[d], x[i]);
                    double g = gb_prologue_passes(xq, pf[ch], pf[c + ch]) ? q(DT[d], dy[i]) : 0.0;
                    sg += g;
                    sgx += g * (xq - mu[ch]) * inv[ch];
                }
                CHECKF(fabs(db[ch] - sg) <= rt * (1 + fabs(sg)) &&
                           fabs(dg[ch] - sgx) <= rt * (1 + fabs(sgx)),
                       "bn bwd recomputed %s case %zu ch %d: dgamma %g/%g dbeta %g/%g", DTN[d], t,
                       ch, dg[ch], sgx, db[ch], sg);
                for (long r = 0; r < m; r++) {
                    size_t i = sh + (size_t)r * c + ch;
                    float xq = q(DT[d], x[i]);
                    double g = gb_prologue_passes(xq, pf[ch], pf[c + ch]) ? q(DT[d], dy[i]) : 0.0;
                    double xh = (xq - mu[ch]) * inv[ch];
                    double want = gamma[ch] * inv[ch] * (g - sg / m - xh * sgx / m);
                    CHECKF(fabs(dx[i - sh] - want) <= rt * (1 + fabs(want)),
                           "bn bwd recomputed dx %s case %zu [%zu]: %g/%g", DTN[d], t, i,
                           dx[i - sh], want);
                }
            }
            free(mu), free(inv), free(smean), free(sinv), free(part), free(coef), free(dg),
                free(db), free(xb), free(dyb), free(dxb), free(pre), free(pf), free(dx);
        }
        free(x), free(dy), free(gamma), free(beta), free(ab);
    }
}

static void test_allreduce_kernels(void) {
    size_t n = 1000;
    float *b = malloc(n * 4);
    CHECK(b);
    gb_ar_want_t want;
    for (int j = 0; j < 11; j++)
        want.v[j] = (float)((int)((j * 7 + 3) % 11) - 5); /* rank 1: element j mod 11 */
    unsigned bad = 0;
    CHECK(gb_k_ar_fill(NULL, b, n, 1, -1) == cudaSuccess);
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == (float)((int)((i * 7 + 3) % 11) - 5));
    /* i*7 mod 11 repeats with period 11 in i: want.v[i mod 11] */
    CHECK(gb_k_ar_check(NULL, b, n, want, &bad) == cudaSuccess && bad == 0);
    CHECK(gb_k_ar_fill(NULL, b, n, 1, 777) == cudaSuccess);
    CHECK(gb_k_ar_check(NULL, b, n, want, &bad) == cudaSuccess && bad == 1);
    free(b);
}

/* a launch a GPU would refuse is refused here too, with the error
 * cudaGetLastError reports: 70000 rows chunks is over grid.y's 65535 */
static void test_launch_limits(void) {
    _Alignas(16) float x[64] = {0};
    float part[3 * 64];
    CHECK(gb_k_bn_fwd_stats(NULL, GB_KDT_F32, x, 64, 1, 70000, part) ==
          cudaErrorInvalidConfiguration);
    CHECK(gb_k_bn_fwd_stats(NULL, GB_KDT_F32, x, 64, 1, 1, part) == cudaSuccess);
    /* the 16-byte path too: one row of 64 channels */
    CHECK(gb_k_bn_fwd_stats(NULL, GB_KDT_F32, x, 1, 64, 70000, part) ==
          cudaErrorInvalidConfiguration);
    CHECK(gb_k_bn_fwd_stats(NULL, GB_KDT_F32, x, 1, 64, 1, part) == cudaSuccess);
}

int main(void) {
    gb_rng_seed(&g_rng, 0x1234567u);
    test_casts();
    test_image_to_nhwc();
    test_synth_fill();
    test_maxpool();
    test_avgpool();
    test_softmax_ce();
    test_colsum();
    test_bn_running();
    test_finite_sgd_scaler();
    /* the fused step's kernels before our batch norm's (the longest: a
     * planted fault in them fails early) */
    test_fin_range();
    test_fused();
    test_bwd_recompute();
    test_bn_rchunks();
    test_bn();
    test_allreduce_kernels();
    test_launch_limits();
    printf("test_cuda_emu: every kernel of kernels.cu matches its plain loop\n");
    return 0;
}
