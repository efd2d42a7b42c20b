/* test_cuda_fuse.c - the cuDNN graph-API fusions of fuse.h.
 *
 *   test_cuda_fuse graphs      (CPU, no GPU needed) every non-stem conv of
 *                              ResNet-50 at batch 256: each kind's operation
 *                              graph finalized by cuDNN; a wrong shape refused
 *   test_cuda_fuse check [all] (GPU) 7 conv shapes in fp16, 2 in bf16 (all:
 *                              every distinct one in both) at batch 2: plan
 *                              each kind, run it, hold outputs, sums and
 *                              weight gradients to a host reference
 *   test_cuda_fuse bench [N]   (GPU) batch N (256): each conv's fused graph
 *                              against the unfused legacy calls (conv, cuDNN
 *                              batch norm; wgrad on the materialized input)
 *
 * check and bench exit 77 without a GPU. A graph no engine supports is
 * printed ("no engine") and is not a failure of check: it says what this
 * GPU and cuDNN offer; a wrong number is.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cuda_check.h"
#include "cuda_math.h"
#include "fuse.h"
#include "gpu_common.h"
#include "plan.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ERR    err
#define ERRLEN errlen

static gb_model_t *resnet50(void) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, 224);
    char err[256];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    return m;
}

static int same_geom(const gb_conv_t *a, const gb_conv_t *b) {
    return a->c == b->c && a->k == b->k && a->kh == b->kh && a->kw == b->kw &&
           a->stride == b->stride && a->pad == b->pad && a->ih == b->ih && a->iw == b->iw;
}

/* check's default shapes (all: every distinct one, about 20): 1x1 and 3x3,
 * stride 1 and 2, widening and narrowing, 56x56 down to 7x7; planning a
 * graph may compile its kernels (cuDNN's runtime fusion), seconds each */
static const char *const kCheckNames[] = {
    "layer1.0.conv1",        "layer1.0.conv2", "layer1.0.conv3", "layer2.0.conv2",
    "layer2.0.downsample.0", "layer4.1.conv1", "layer4.1.conv2"};

static int wanted(const char *name, int all) {
    if (all) return 1;
    for (size_t i = 0; i < sizeof(kCheckNames) / sizeof(kCheckNames[0]); i++)
        if (!strcmp(name, kCheckNames[i])) return 1;
    return 0;
}

static void test_graphs(void) {
    gb_model_t *m = resnet50();
    char err[512];
    gb_plan_t *p = gb_plan_new(m, 256, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    int built = 0;
    const cudnnDataType_t dts[2] = {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16};
    for (int d = 0; d < 2; d++)
        for (int ci = 0; ci < p->n_convs; ci++) {
            if (gb_plan_fused_role(p, ci, NULL) < 0) continue;
            for (int kind = GB_FUSE_CONV_STATS; kind <= GB_FUSE_SBR_WGRAD; kind++) {
                gb_fuse_t *f = gb_fuse_new((gb_fuse_kind_t)kind, &p->convs[ci].g, p->n, dts[d],
                                           NULL, p->convs[ci].name, err, sizeof(err));
                CHECKF(f, "%s", err);
                CHECK(gb_fuse_n_plans(f) == 0);
                gb_fuse_destroy(&f);
                CHECK(f == NULL);
                built++;
            }
        }
    CHECK(built == 2 * 52 * 3);
    /* check's shapes are layers of the plan */
    for (size_t i = 0; i < sizeof(kCheckNames) / sizeof(kCheckNames[0]); i++) {
        int found = 0;
        for (int ci = 0; ci < p->n_convs; ci++)
            found += wanted(p->convs[ci].name, 0) && !strcmp(p->convs[ci].name, kCheckNames[i]);
        CHECKF(found == 1, "%s is not a conv of the plan", kCheckNames[i]);
    }
    /* cuDNN holds the shapes to the convolution: an output one row short is
     * refused at the op, and the error names the layer and the graph */
    gb_conv_t bad = p->blocks[0].conv2 >= 0 ? p->convs[p->blocks[0].conv2].g : p->convs[1].g;
    bad.oh -= 1;
    gb_fuse_t *f = gb_fuse_new(GB_FUSE_SBR_CONV_STATS, &bad, 256, CUDNN_DATA_HALF, NULL,
                               "layer1.0.conv2", err, sizeof(err));
    CHECKF(f == NULL && strstr(err, "conv layer1.0.conv2 sbr_conv_stats") &&
               strstr(err, "CUDNN_STATUS_BAD_PARAM"),
           "%s", err);
    bad = p->convs[p->blocks[0].conv2].g;
    bad.kh = 5; /* the weight 5x3 against a 56x56 output with pad 1 */
    f = gb_fuse_new(GB_FUSE_SBR_WGRAD, &bad, 256, CUDNN_DATA_BFLOAT16, NULL, "layer1.0.conv2", err,
                    sizeof(err));
    CHECKF(f == NULL && strstr(err, "sbr_wgrad bf16"), "%s", err);
    f = gb_fuse_new((gb_fuse_kind_t)7, &p->convs[1].g, 256, CUDNN_DATA_HALF, NULL, "x", err,
                    sizeof(err));
    CHECKF(f == NULL && strstr(err, "bad arguments"), "%s", err);
    f = gb_fuse_new(GB_FUSE_CONV_STATS, &p->convs[1].g, 256, CUDNN_DATA_FLOAT, NULL, "x", err,
                    sizeof(err));
    CHECKF(f == NULL && strstr(err, "bad arguments") && strstr(err, "data type"), "%s", err);
    /* running one: every tensor the kind uses, 16-byte aligned, then a
     * plan (none without a GPU: the heuristics offer no engine) */
    f = gb_fuse_new(GB_FUSE_SBR_WGRAD, &p->convs[p->blocks[0].conv2].g, 256, CUDNN_DATA_HALF, NULL,
                    "layer1.0.conv2", err, sizeof(err));
    CHECKF(f, "%s", err);
    CHECK(gb_fuse_slots(GB_FUSE_SBR_WGRAD) ==
          (1u << GB_FUSE_X | 1u << GB_FUSE_SCALE | 1u << GB_FUSE_BIAS | 1u << GB_FUSE_DY |
           1u << GB_FUSE_DW));
    static _Alignas(16) char buf[64];
    void *ptr[GB_FUSE_NSLOTS] = {0};
    ptr[GB_FUSE_X] = ptr[GB_FUSE_SCALE] = ptr[GB_FUSE_BIAS] = ptr[GB_FUSE_DY] = buf;
    CHECKF(gb_fuse_run(f, NULL, ptr, buf, err, sizeof(err)) == -1 &&
               strstr(err, "sbr_wgrad: tensor 9 missing"),
           "%s", err);
    ptr[GB_FUSE_DW] = buf + 2;
    CHECKF(gb_fuse_run(f, NULL, ptr, buf, err, sizeof(err)) == -1 &&
               strstr(err, "tensor 9 not 16-byte aligned"),
           "%s", err);
    ptr[GB_FUSE_DW] = buf + 16;
    CHECKF(gb_fuse_run(f, NULL, ptr, buf, err, sizeof(err)) == -1 && strstr(err, "not planned"),
           "%s", err);
    int np = gb_fuse_plan(f, NULL, (size_t)1 << 30, 2, err, sizeof(err));
    printf("graphs: planning without a GPU: %d (%s)\n", np, err);
    CHECKF(np <= 0 && gb_fuse_n_plans(f) == 0 && strstr(err, "conv layer1.0.conv2 sbr_wgrad"), "%s",
           err);
    gb_fuse_destroy(&f);
    printf("graphs: %d operation graphs finalized (52 convs x 3 kinds x fp16/bf16), bad shapes "
           "refused, "
           "a run without its tensors or a plan refused\n",
           built);
    gb_plan_destroy(&p);
    gb_model_destroy(&m);
}

/* ---- GPU ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* the 16-bit type of the graphs under test: fp16, or bf16 (g_bf16) */
static int g_bf16;
static float to_f(uint16_t v) {
    return g_bf16 ? gb_bf16_to_float(v) : gb_half_to_float(v);
}
static uint16_t from_f(float v) {
    return g_bf16 ? gb_float_to_bf16(v) : gb_float_to_half(v);
}

/* the host side of check, where it needs no GPU: the two conversions, in
 * both types, round trip values either type holds exactly (to_f once
 * called itself, an endless loop that only a GPU run would have met) */
static void test_conversions(void) {
    static const float v[] = {0.0f, 1.5f, -2.25f, 0.0078125f, 96.0f, -320.0f};
    for (g_bf16 = 0; g_bf16 < 2; g_bf16++)
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
            CHECKF(to_f(from_f(v[i])) == v[i], "%s round trip of %g: %g", g_bf16 ? "bf16" : "fp16",
                   (double)v[i], (double)to_f(from_f(v[i])));
    g_bf16 = 0;
    printf("graphs: fp16 and bf16 conversions of the check round trip\n");
}

static uint16_t *half_fill(size_t n, double lo, double hi) {
    uint16_t *h = malloc(n * sizeof(uint16_t));
    CHECK(h);
    for (size_t i = 0; i < n; i++)
        h[i] = from_f((float)(lo + (hi - lo) * urand()));
    return h;
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes) == cudaSuccess);
    if (h)
        CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    else
        CHECK(cudaMemset(d, 0, bytes) == cudaSuccess);
    return d;
}

typedef struct {
    const gb_conv_t *g;
    int n;
    uint16_t *x, *w, *s, *b, *dy;
} ref_t;

/* the prologue's output at (n, y, x, c) of the input, 0 in the padding;
 * fprop keeps it in fp32, wgrad's graph in fp16 (fuse.c) */
static double act(const ref_t *r, int sbr, int half_mid, int n, int y, int x, int c) {
    const gb_conv_t *g = r->g;
    if (y < 0 || y >= g->ih || x < 0 || x >= g->iw) return 0.0;
    float v = to_f(r->x[(((size_t)n * g->ih + y) * g->iw + x) * g->c + c]);
    if (!sbr) return v;
    float a = v * to_f(r->s[c]);
    if (half_mid) a = to_f(from_f(a));
    a += to_f(r->b[c]);
    if (half_mid) a = to_f(from_f(a));
    return a > 0.0f ? a : 0.0f;
}

/* |got - want| within rel of the sum of the terms' magnitudes (fp16 inputs,
 * fp32 accumulation, an fp16 result: 2^-11 of the largest partial sum) */
static int close_to(double got, double want, double mag, double rel) {
    return fabs(got - want) <= rel * mag + 1e-6;
}

static int check_one(const gb_conv_t *g, const char *name, cudnnDataType_t dt, cudnnHandle_t dnn,
                     int *no_engine) {
    g_bf16 = dt == CUDNN_DATA_BFLOAT16;
    /* an output's rounding against the terms' magnitudes: 2^-11 (fp16) or
     * 2^-8 (bf16), with room for fp32 accumulation */
    const double rel = g_bf16 ? 1e-2 : 2e-3;
    char err[1024];
    const size_t errlen = sizeof(err);
    const int n = 2;
    size_t nx = (size_t)n * g->ih * g->iw * g->c, ny = (size_t)n * g->oh * g->ow * g->k;
    size_t nw = (size_t)g->k * g->kh * g->kw * g->c;
    double ws_scale = 1.0 / sqrt((double)g->c * g->kh * g->kw);
    ref_t r = {g,
               n,
               half_fill(nx, -2, 2),
               half_fill(nw, -ws_scale, ws_scale),
               half_fill(g->c, 0.5, 1.5),
               half_fill(g->c, -0.5, 0.5),
               half_fill(ny, -1, 1)};
    void *dx = dev_copy(r.x, nx * 2), *dw = dev_copy(r.w, nw * 2), *ds = dev_copy(r.s, g->c * 2),
         *db = dev_copy(r.b, g->c * 2), *ddy = dev_copy(r.dy, ny * 2);
    void *dyo = dev_copy(NULL, ny * 2), *dsum = dev_copy(NULL, g->k * 4),
         *dsq = dev_copy(NULL, g->k * 4), *ddw = dev_copy(NULL, nw * 2);
    size_t ws_limit = (size_t)256 << 20;
    void *ws = dev_copy(NULL, ws_limit);
    uint16_t *yo = malloc(ny * 2), *dwo = malloc(nw * 2);
    float sum[2048], sq[2048];
    CHECK(yo && dwo && g->k <= 2048);
    int bad = 0;
    for (int kind = GB_FUSE_CONV_STATS; kind <= GB_FUSE_SBR_WGRAD; kind++) {
        gb_fuse_t *f = gb_fuse_new((gb_fuse_kind_t)kind, g, n, dt, dnn, name, err, errlen);
        CHECKF(f, "%s", err);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int np = gb_fuse_plan(f, dnn, ws_limit, 1, err, errlen);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double plan_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        CHECKF(np >= 0, "%s", err);
        if (np == 0) {
            printf("  %-18s %-15s no engine: %s\n", name, gb_fuse_kind_name(kind), err);
            (*no_engine)++;
            gb_fuse_destroy(&f);
            continue;
        }
        void *ptr[GB_FUSE_NSLOTS] = {0};
        ptr[GB_FUSE_X] = dx;
        ptr[GB_FUSE_W] = dw;
        ptr[GB_FUSE_Y] = dyo;
        ptr[GB_FUSE_SUM] = dsum;
        ptr[GB_FUSE_SQSUM] = dsq;
        ptr[GB_FUSE_SCALE] = ds;
        ptr[GB_FUSE_BIAS] = db;
        ptr[GB_FUSE_DY] = ddy;
        ptr[GB_FUSE_DW] = ddw;
        /* zeroed before each kind's first run: the previous kind's sums are
         * still there, and a GenStats that adds to them would then look
         * like neither "overwrites" nor "adds to" below */
        CHECK(cudaMemset(dsum, 0, g->k * 4) == cudaSuccess);
        CHECK(cudaMemset(dsq, 0, g->k * 4) == cudaSuccess);
        CHECKF(gb_fuse_run(f, dnn, ptr, ws, err, errlen) == 0, "%s", err);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        if (kind != GB_FUSE_SBR_WGRAD) {
            /* a second run on the first one's sums: overwritten (the same)
             * or added to (twice): which, said (the executor zeroes them
             * before each run either way) */
            float s1[2048], s2[2048];
            CHECK(cudaMemcpy(s1, dsum, g->k * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECKF(gb_fuse_run(f, dnn, ptr, ws, err, errlen) == 0, "%s", err);
            CHECK(cudaMemcpy(s2, dsum, g->k * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            int same = 1, twice = 1;
            for (int k = 0; k < g->k; k++) {
                same &= fabsf(s2[k] - s1[k]) <= 1e-3f * (1.0f + fabsf(s1[k]));
                twice &= fabsf(s2[k] - 2 * s1[k]) <= 1e-3f * (1.0f + fabsf(s1[k]));
            }
            printf("  %-18s %-15s GenStats %s its sums\n", name, gb_fuse_kind_name(kind),
                   same    ? "overwrites"
                   : twice ? "adds to"
                           : "does something else with");
            CHECK(same || twice);
            CHECK(cudaMemset(dsum, 0, g->k * 4) == cudaSuccess);
            CHECK(cudaMemset(dsq, 0, g->k * 4) == cudaSuccess);
            CHECKF(gb_fuse_run(f, dnn, ptr, ws, err, errlen) == 0, "%s", err);
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
        }
        int sbr = kind != GB_FUSE_CONV_STATS, wrong = 0;
        double worst = 0.0;
        if (kind != GB_FUSE_SBR_WGRAD) {
            CHECK(cudaMemcpy(yo, dyo, ny * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(cudaMemcpy(sum, dsum, g->k * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(cudaMemcpy(sq, dsq, g->k * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            for (int t = 0; t < 512; t++) {
                int b = (int)(urand() * n), oy = (int)(urand() * g->oh),
                    ox = (int)(urand() * g->ow), k = (int)(urand() * g->k);
                double want = 0.0, mag = 0.0;
                for (int ky = 0; ky < g->kh; ky++)
                    for (int kx = 0; kx < g->kw; kx++)
                        for (int c = 0; c < g->c; c++) {
                            double a = act(&r, sbr, 0, b, oy * g->stride - g->pad + ky,
                                           ox * g->stride - g->pad + kx, c);
                            double wv =
                                to_f(r.w[(((size_t)k * g->kh + ky) * g->kw + kx) * g->c + c]);
                            want += a * wv;
                            mag += fabs(a * wv);
                        }
                double got = to_f(yo[(((size_t)b * g->oh + oy) * g->ow + ox) * g->k + k]);
                if (!close_to(got, want, mag, rel)) wrong++;
                if (mag > 0) worst = fmax(worst, fabs(got - want) / mag);
            }
            /* the sums of the output as stored, per channel */
            for (int k = 0; k < g->k; k++) {
                double s1 = 0, s2 = 0, m1 = 0;
                for (size_t i = k; i < ny; i += g->k) {
                    double v = to_f(yo[i]);
                    s1 += v;
                    s2 += v * v;
                    m1 += fabs(v);
                }
                if (!close_to(sum[k], s1, m1, rel) || !close_to(sq[k], s2, s2, rel)) wrong++;
            }
        } else {
            CHECK(cudaMemcpy(dwo, ddw, nw * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
            for (int t = 0; t < 256; t++) {
                int k = (int)(urand() * g->k), ky = (int)(urand() * g->kh),
                    kx = (int)(urand() * g->kw), c = (int)(urand() * g->c);
                double want = 0.0, mag = 0.0;
                for (int b = 0; b < n; b++)
                    for (int oy = 0; oy < g->oh; oy++)
                        for (int ox = 0; ox < g->ow; ox++) {
                            double a = act(&r, 1, 1, b, oy * g->stride - g->pad + ky,
                                           ox * g->stride - g->pad + kx, c);
                            double d =
                                to_f(r.dy[(((size_t)b * g->oh + oy) * g->ow + ox) * g->k + k]);
                            want += a * d;
                            mag += fabs(a * d);
                        }
                double got = to_f(dwo[(((size_t)k * g->kh + ky) * g->kw + kx) * g->c + c]);
                if (!close_to(got, want, mag, rel)) wrong++;
                if (mag > 0) worst = fmax(worst, fabs(got - want) / mag);
            }
        }
        printf("  %-18s %-15s %s %-8s %s (worst error %.2e of the terms' magnitude; planned in "
               "%.2f s)\n",
               name, gb_fuse_kind_name(kind), g_bf16 ? "bf16" : "fp16", gb_fuse_engine(f, 0),
               wrong ? "WRONG" : "ok", worst, plan_s);
        if (wrong) {
            printf("    %d values outside the bound\n", wrong);
            bad++;
        }
        gb_fuse_destroy(&f);
    }
    void *all[] = {dx, dw, ds, db, ddy, dyo, dsum, dsq, ddw, ws};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(r.x), free(r.w), free(r.s), free(r.b), free(r.dy), free(yo), free(dwo);
    return bad;
}

static int test_check(int all) {
    gb_skip_without_gpu("test_cuda_fuse check");
    gb_model_t *m = resnet50();
    char err[512];
    gb_plan_t *p = gb_plan_new(m, 2, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    cudnnHandle_t dnn;
    CHECK(cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS);
    int bad = 0, no_engine = 0, no_bf16 = 0, shapes = 0;
    for (int ci = 0; ci < p->n_convs; ci++) {
        if (gb_plan_fused_role(p, ci, NULL) < 0) continue;
        int seen = 0;
        for (int cj = 0; cj < ci && !seen; cj++)
            seen =
                gb_plan_fused_role(p, cj, NULL) >= 0 && same_geom(&p->convs[cj].g, &p->convs[ci].g);
        if (seen || !wanted(p->convs[ci].name, all)) continue;
        shapes++;
        /* fp16, what cuDNN documents the patterns for, then bf16, tried: on
         * the first two shapes (a 1x1 and a 3x3; all with `all`), as each
         * plan may be compiled */
        bad += check_one(&p->convs[ci].g, p->convs[ci].name, CUDNN_DATA_HALF, dnn, &no_engine);
        if (all || shapes <= 2)
            bad +=
                check_one(&p->convs[ci].g, p->convs[ci].name, CUDNN_DATA_BFLOAT16, dnn, &no_bf16);
    }
    printf("check: %d shapes x 3 kinds, %d wrong; with no engine: %d in fp16, %d in bf16 (cuDNN "
           "%zu)\n",
           shapes, bad, no_engine, no_bf16, cudnnGetVersion());
    cudnnDestroy(dnn);
    gb_plan_destroy(&p);
    gb_model_destroy(&m);
    return bad ? 1 : 0;
}

/* ---- bench: fused against the legacy calls, per conv ---- */

typedef struct {
    cudnnHandle_t dnn;
    cudaStream_t st;
    cudaEvent_t e0, e1;
    void *ws;
    size_t ws_bytes;
} bench_t;

/* mean ms of reps runs of what (after 3 untimed) */
typedef int (*run_fn)(void *ctx, char *err, size_t errlen);
static double time_it(bench_t *B, run_fn what, void *ctx, int reps, char *err, size_t errlen) {
    for (int i = 0; i < 3; i++)
        if (what(ctx, err, errlen)) return -1.0;
    CK_CUDA(cudaEventRecord(B->e0, B->st));
    for (int i = 0; i < reps; i++)
        if (what(ctx, err, errlen)) return -1.0;
    CK_CUDA(cudaEventRecord(B->e1, B->st));
    CK_CUDA(cudaEventSynchronize(B->e1));
    float ms = 0.0f;
    CK_CUDA(cudaEventElapsedTime(&ms, B->e0, B->e1));
    return ms / reps;
fail:
    return -1.0;
}

typedef struct {
    bench_t *B;
    const gb_conv_t *g;
    int n;
    cudnnTensorDescriptor_t xd, yd, bnd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t relu;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdFilterAlgo_t bwf;
    void *x, *w, *y, *u, *dy, *dw, *gamma, *beta, *mean, *inv, *sum, *sq, *s, *b, *reserve, *bnws;
    size_t reserve_bytes, bnws_bytes;
    gb_fuse_t *f;
} layer_t;

static int run_legacy_fwd(void *ctx, char *err, size_t errlen) {
    layer_t *L = ctx;
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnConvolutionForward(L->B->dnn, &one, L->xd, L->x, L->wd, L->w, L->cd, L->fwd,
                                   L->B->ws, L->B->ws_bytes, &zero, L->yd, L->y));
    CK_DNN(cudnnBatchNormalizationForwardTrainingEx(
        L->B->dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &one,
        &zero, L->yd, L->y, NULL, NULL, L->yd, L->u, L->bnd, L->gamma, L->beta, 0.0, NULL, NULL,
        1e-5, L->mean, L->inv, L->relu, L->bnws, L->bnws_bytes, L->reserve, L->reserve_bytes));
    return 0;
fail:
    return -1;
}

static int run_legacy_wgrad(void *ctx, char *err, size_t errlen) {
    layer_t *L = ctx;
    const float one = 1.0f, zero = 0.0f;
    CK_DNN(cudnnConvolutionBackwardFilter(L->B->dnn, &one, L->xd, L->x, L->yd, L->dy, L->cd, L->bwf,
                                          L->B->ws, L->B->ws_bytes, &zero, L->wd, L->dw));
    return 0;
fail:
    return -1;
}

static int run_fused(void *ctx, char *err, size_t errlen) {
    layer_t *L = ctx;
    void *ptr[GB_FUSE_NSLOTS] = {0};
    ptr[GB_FUSE_X] = L->x;
    ptr[GB_FUSE_W] = L->w;
    ptr[GB_FUSE_Y] = L->y;
    ptr[GB_FUSE_SUM] = L->sum;
    ptr[GB_FUSE_SQSUM] = L->sq;
    ptr[GB_FUSE_SCALE] = L->s;
    ptr[GB_FUSE_BIAS] = L->b;
    ptr[GB_FUSE_DY] = L->dy;
    ptr[GB_FUSE_DW] = L->dw;
    return gb_fuse_run(L->f, L->B->dnn, ptr, L->B->ws, err, errlen);
}

/* the fastest of f's plans (up to 2: each may be compiled) over 5 runs
 * each; a plan that fails to run is passed over, as the executor does (0
 * with err when none runs) */
static int fuse_pick(bench_t *B, layer_t *L, gb_fuse_kind_t kind, double *ms, char *err,
                     size_t errlen) {
    L->f = gb_fuse_new(kind, L->g, L->n, CUDNN_DATA_HALF, B->dnn, "bench", err, errlen);
    if (!L->f) return -1;
    int np = gb_fuse_plan(L->f, B->dnn, B->ws_bytes, 2, err, errlen);
    if (np <= 0) return np;
    double best = -1.0;
    int at = 0;
    for (int i = 0; i < np; i++) {
        gb_fuse_choose(L->f, i);
        double t = time_it(B, run_fused, L, 5, err, errlen);
        if (t >= 0 && (best < 0 || t < best)) best = t, at = i;
    }
    if (best < 0) return 0; /* err: the last plan's failure */
    gb_fuse_choose(L->f, at);
    *ms = time_it(B, run_fused, L, 20, err, errlen);
    return *ms < 0 ? -1 : 1;
}

static int test_bench(int n) {
    gb_skip_without_gpu("test_cuda_fuse bench");
    gb_model_t *m = resnet50();
    char err[1024];
    const size_t errlen = sizeof(err);
    gb_plan_t *p = gb_plan_new(m, n, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    bench_t B = {0};
    B.ws_bytes = (size_t)512 << 20;
    CHECK(cudnnCreate(&B.dnn) == CUDNN_STATUS_SUCCESS);
    CHECK(cudaStreamCreate(&B.st) == cudaSuccess);
    CHECK(cudnnSetStream(B.dnn, B.st) == CUDNN_STATUS_SUCCESS);
    CHECK(cudaEventCreate(&B.e0) == cudaSuccess && cudaEventCreate(&B.e1) == cudaSuccess);
    B.ws = dev_copy(NULL, B.ws_bytes);
    double tot[4] = {0}; /* fwd legacy, fwd fused, wgrad legacy, wgrad fused */
    int rows = 0, skipped = 0;
    printf("%-18s %5s %5s %3s %2s %4s | %9s %9s %-8s | %9s %9s %-8s\n", "conv (first of)", "c", "k",
           "rs", "st", "hw", "fwd+BN", "fused", "engine", "wgrad", "fused", "engine");
    for (int ci = 0; ci < p->n_convs; ci++) {
        int role = gb_plan_fused_role(p, ci, NULL);
        if (role < 0) continue;
        int count = 0, seen = 0;
        for (int cj = 0; cj < p->n_convs; cj++)
            if (gb_plan_fused_role(p, cj, NULL) == role &&
                same_geom(&p->convs[cj].g, &p->convs[ci].g)) {
                if (cj < ci) seen = 1;
                count++;
            }
        if (seen) continue;
        const gb_conv_t *g = &p->convs[ci].g;
        layer_t L = {.B = &B, .g = g, .n = n};
        size_t nx = (size_t)n * g->ih * g->iw * g->c, ny = (size_t)n * g->oh * g->ow * g->k;
        size_t nw = (size_t)g->k * g->kh * g->kw * g->c;
        uint16_t *hx = half_fill(nx, -1, 1), *hw = half_fill(nw, -0.05, 0.05),
                 *hs = half_fill(g->c, 0.5, 1.5), *hb = half_fill(g->c, -0.2, 0.2),
                 *hdy = half_fill(ny, -1, 1);
        float *ones = malloc(g->k * sizeof(float));
        CHECK(ones);
        for (int k = 0; k < g->k; k++)
            ones[k] = 1.0f;
        L.x = dev_copy(hx, nx * 2), L.w = dev_copy(hw, nw * 2), L.s = dev_copy(hs, g->c * 2);
        L.b = dev_copy(hb, g->c * 2), L.dy = dev_copy(hdy, ny * 2), L.y = dev_copy(NULL, ny * 2);
        L.u = dev_copy(NULL, ny * 2), L.dw = dev_copy(NULL, nw * 2);
        L.gamma = dev_copy(ones, g->k * 4), L.beta = dev_copy(NULL, g->k * 4);
        L.mean = dev_copy(NULL, g->k * 4), L.inv = dev_copy(NULL, g->k * 4);
        L.sum = dev_copy(NULL, g->k * 4), L.sq = dev_copy(NULL, g->k * 4);
        CHECK(cudnnCreateTensorDescriptor(&L.xd) == 0 && cudnnCreateTensorDescriptor(&L.yd) == 0 &&
              cudnnCreateTensorDescriptor(&L.bnd) == 0 && cudnnCreateFilterDescriptor(&L.wd) == 0 &&
              cudnnCreateConvolutionDescriptor(&L.cd) == 0 &&
              cudnnCreateActivationDescriptor(&L.relu) == 0);
        CHECK(cudnnSetTensor4dDescriptor(L.xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, g->c, g->ih,
                                         g->iw) == 0);
        CHECK(cudnnSetTensor4dDescriptor(L.yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, g->k, g->oh,
                                         g->ow) == 0);
        CHECK(cudnnSetFilter4dDescriptor(L.wd, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, g->k, g->c,
                                         g->kh, g->kw) == 0);
        CHECK(cudnnSetConvolution2dDescriptor(L.cd, g->pad, g->pad, g->stride, g->stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) == 0);
        CHECK(cudnnSetConvolutionMathType(L.cd, CUDNN_TENSOR_OP_MATH) == 0);
        CHECK(cudnnSetActivationDescriptor(L.relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN,
                                           0.0) == 0);
        CHECK(cudnnDeriveBNTensorDescriptor(L.bnd, L.yd, CUDNN_BATCHNORM_SPATIAL_PERSISTENT) == 0);
        CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                  B.dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION,
                  L.yd, NULL, L.yd, L.bnd, L.relu, &L.bnws_bytes) == 0);
        CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
                  B.dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION,
                  L.relu, L.yd, &L.reserve_bytes) == 0);
        L.bnws = dev_copy(NULL, L.bnws_bytes + 16);
        L.reserve = dev_copy(NULL, L.reserve_bytes + 16);
        int got = 0;
        cudnnConvolutionFwdAlgoPerf_t pf[8];
        cudnnConvolutionBwdFilterAlgoPerf_t pw[8];
        CHECK(cudnnFindConvolutionForwardAlgorithmEx(B.dnn, L.xd, L.x, L.wd, L.w, L.cd, L.yd, L.y,
                                                     8, &got, pf, B.ws, B.ws_bytes) == 0 &&
              got > 0 && pf[0].status == CUDNN_STATUS_SUCCESS);
        L.fwd = pf[0].algo;
        CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(B.dnn, L.xd, L.x, L.yd, L.dy, L.cd,
                                                            L.wd, L.dw, 8, &got, pw, B.ws,
                                                            B.ws_bytes) == 0 &&
              got > 0 && pw[0].status == CUDNN_STATUS_SUCCESS);
        L.bwf = pw[0].algo;
        double t[4] = {-1, -1, -1, -1};
        char eng[2][16] = {"-", "-"};
        t[0] = time_it(&B, run_legacy_fwd, &L, 20, err, errlen);
        CHECKF(t[0] >= 0, "%s", err);
        int rc = fuse_pick(&B, &L, role ? GB_FUSE_SBR_CONV_STATS : GB_FUSE_CONV_STATS, &t[1], err,
                           errlen);
        CHECKF(rc >= 0, "%s", err);
        if (rc > 0)
            snprintf(eng[0], sizeof(eng[0]), "%s", gb_fuse_engine(L.f, gb_fuse_chosen(L.f)));
        else
            printf("  (%s fused forward: %s)\n", p->convs[ci].name, err);
        gb_fuse_destroy(&L.f);
        if (role) {
            t[2] = time_it(&B, run_legacy_wgrad, &L, 20, err, errlen);
            CHECKF(t[2] >= 0, "%s", err);
            rc = fuse_pick(&B, &L, GB_FUSE_SBR_WGRAD, &t[3], err, errlen);
            CHECKF(rc >= 0, "%s", err);
            if (rc > 0)
                snprintf(eng[1], sizeof(eng[1]), "%s", gb_fuse_engine(L.f, gb_fuse_chosen(L.f)));
            else
                printf("  (%s fused wgrad: %s)\n", p->convs[ci].name, err);
            gb_fuse_destroy(&L.f);
        }
        printf("%-18s %5d %5d %d%d %2d %4d | %9.3f %9.3f %-8s | %9.3f %9.3f %-8s x%d\n",
               p->convs[ci].name, g->c, g->k, g->kh, g->kw, g->stride, g->ih, t[0], t[1], eng[0],
               t[2], t[3], eng[1], count);
        /* totals only over convs where both sides ran */
        if (t[1] >= 0)
            tot[0] += count * t[0], tot[1] += count * t[1];
        else
            skipped += count;
        if (role && t[3] >= 0) tot[2] += count * t[2], tot[3] += count * t[3];
        rows++;
        cudnnDestroyTensorDescriptor(L.xd), cudnnDestroyTensorDescriptor(L.yd);
        cudnnDestroyTensorDescriptor(L.bnd), cudnnDestroyFilterDescriptor(L.wd);
        cudnnDestroyConvolutionDescriptor(L.cd), cudnnDestroyActivationDescriptor(L.relu);
        void *all[] = {L.x,     L.w,    L.s,    L.b,   L.dy,  L.y,  L.u,    L.dw,
                       L.gamma, L.beta, L.mean, L.inv, L.sum, L.sq, L.bnws, L.reserve};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
            cudaFree(all[i]);
        free(hx), free(hw), free(hs), free(hb), free(hdy), free(ones);
    }
    printf("fuse: batch %d, forward conv+BN %.2f ms against fused %.2f ms (%d convs not fused), "
           "wgrad %.2f ms against fused %.2f ms (conv2/conv3), over %d shapes\n",
           n, tot[0], tot[1], skipped, tot[2], tot[3], rows);
    cudaFree(B.ws);
    cudaEventDestroy(B.e0), cudaEventDestroy(B.e1);
    cudnnDestroy(B.dnn);
    cudaStreamDestroy(B.st);
    gb_plan_destroy(&p);
    gb_model_destroy(&m);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "graphs";
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut short keeps its lines */
    if (!strcmp(mode, "graphs")) {
        test_conversions();
        test_graphs();
        return 0;
    }
    if (!strcmp(mode, "check")) return test_check(argc > 2 && !strcmp(argv[2], "all"));
    if (!strcmp(mode, "bench")) return test_bench(argc > 2 ? atoi(argv[2]) : 256);
    fprintf(stderr, "usage: test_cuda_fuse graphs | check [all] | bench [batch]\n");
    return 2;
}
