/* test_cuda_math.c - the per-element math of the CUDA kernels
 * (kernels/cuda/cuda_math.h), compiled by gcc, against hand-computed values
 * and double-precision references. */
#include "check.h"
#include "compare.h"
#include "cuda_math.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_sgd(void) {
    /* torch.optim.SGD(lr 0.1, momentum 0.9, weight_decay 0.01), two steps of
     * g = 0.5 from p = 1, by hand: d1 = 0.51, buf = 0.51, p = 0.949;
     * d2 = 0.5 + 0.00949, buf = 0.9 * 0.51 + 0.50949 = 0.96849,
     * p = 0.949 - 0.096849 = 0.852151. fp32: 1e-6 covers a few ulps. */
    float buf = 0.0f, p = 1.0f;
    p = gb_sgd_elem(p, &buf, 0.5f, 0.1f, 0.9f, 0.01f, 1.0f);
    CHECKF(fabsf(p - 0.949f) < 1e-6f && fabsf(buf - 0.51f) < 1e-6f, "p %.9g buf %.9g", p, buf);
    p = gb_sgd_elem(p, &buf, 0.5f, 0.1f, 0.9f, 0.01f, 1.0f);
    CHECKF(fabsf(p - 0.852151f) < 1e-6f && fabsf(buf - 0.96849f) < 1e-6f, "p %.9g", p);
    /* a loss-scaled gradient with its inverse scale gives the same bits */
    float b1 = 0.0f, b2 = 0.0f;
    float p1 = gb_sgd_elem(0.25f, &b1, 0.375f, 0.1f, 0.9f, 1e-4f, 1.0f);
    float p2 = gb_sgd_elem(0.25f, &b2, 0.375f * 65536.0f, 0.1f, 0.9f, 1e-4f, 1.0f / 65536.0f);
    CHECK(p1 == p2 && b1 == b2);
}

static void test_scaler(void) {
    float s = GB_SCALER_INIT;
    int t = 0;
    gb_scaler_update(&s, &t, 1, GB_SCALER_INTERVAL);
    CHECK(s == 32768.0f && t == 0);
    for (int i = 0; i < GB_SCALER_INTERVAL - 1; i++)
        gb_scaler_update(&s, &t, 0, GB_SCALER_INTERVAL);
    CHECK(s == 32768.0f && t == GB_SCALER_INTERVAL - 1);
    gb_scaler_update(&s, &t, 0, GB_SCALER_INTERVAL);
    CHECK(s == 65536.0f && t == 0);
    /* an overflow mid-way resets the count */
    for (int i = 0; i < 10; i++)
        gb_scaler_update(&s, &t, 0, GB_SCALER_INTERVAL);
    gb_scaler_update(&s, &t, 1, GB_SCALER_INTERVAL);
    CHECK(s == 32768.0f && t == 0);
    /* growth stops where the scale would become infinite */
    s = FLT_MAX;
    t = GB_SCALER_INTERVAL - 1;
    gb_scaler_update(&s, &t, 0, GB_SCALER_INTERVAL);
    CHECK(s == FLT_MAX && t == 0);
}

static void test_finite(void) {
    CHECK(gb_is_finite(1.0f) && gb_is_finite(-0.0f) && gb_is_finite(FLT_MAX));
    CHECK(!gb_is_finite(INFINITY) && !gb_is_finite(-INFINITY) && !gb_is_finite(NAN));
}

static void test_softmax_ce(void) {
    srand(3);
    enum { K = 1000 };
    float z[K];
    for (int rep = 0; rep < 20; rep++) {
        double mx = -1e300;
        for (int j = 0; j < K; j++) {
            z[j] = (float)((rand() / (double)RAND_MAX - 0.5) * (rep < 10 ? 20.0 : 2000.0));
            if (z[j] > mx) mx = z[j];
        }
        double s = 0.0;
        for (int j = 0; j < K; j++)
            s += exp(z[j] - mx);
        double lse = mx + log(s);
        /* sequential push, and 32 "lanes" merged as a warp would */
        float m1 = -INFINITY, s1 = 0.0f;
        for (int j = 0; j < K; j++)
            gb_lse_push(&m1, &s1, z[j]);
        float lm[32], ls[32];
        for (int l = 0; l < 32; l++) {
            lm[l] = -INFINITY;
            ls[l] = 0.0f;
            for (int j = l; j < K; j += 32)
                gb_lse_push(&lm[l], &ls[l], z[j]);
        }
        for (int off = 16; off > 0; off /= 2)
            for (int l = 0; l < off; l++)
                gb_lse_merge(&lm[l], &ls[l], lm[l + off], ls[l + off]);
        int label = rep * 37 % K;
        /* fp32 log-sum-exp: ~K ulps of the sum at worst, 1e-5 relative */
        double l1 = gb_ce_loss(m1, s1, z[label]), l2 = gb_ce_loss(lm[0], ls[0], z[label]);
        double ref = lse - z[label];
        CHECKF(fabs(l1 - ref) <= 1e-5 * fmax(1.0, fabs(lse)), "loss %.9g vs %.9g", l1, ref);
        CHECKF(fabs(l2 - ref) <= 1e-5 * fmax(1.0, fabs(lse)), "loss %.9g vs %.9g", l2, ref);
        /* the gradient row sums to 0 and matches the double softmax */
        double sum = 0.0, worst = 0.0;
        for (int j = 0; j < K; j++) {
            float g = gb_ce_grad(z[j], lm[0], ls[0], j == label, 1.0f / 8);
            double gr = (exp(z[j] - lse) - (j == label)) / 8;
            sum += g;
            worst = fmax(worst, fabs(g - gr));
        }
        CHECKF(fabs(sum) < 1e-5 && worst < 1e-6, "sum %.3g worst %.3g", sum, worst);
    }
}

static void test_moments(void) {
    enum { N = 10000, P = 7 };
    static float x[N];
    srand(5);
    for (int i = 0; i < N; i++)
        x[i] = 1.0e4f + (float)((rand() / (double)RAND_MAX - 0.5) * 3.0);
    double mean = 0.0, m2 = 0.0;
    for (int i = 0; i < N; i++)
        mean += x[i];
    mean /= N;
    for (int i = 0; i < N; i++)
        m2 += (x[i] - mean) * (x[i] - mean);
    /* P threads, each its own shift; merged in float, then in double */
    gb_moments_t acc = {0, 0, 0};
    double dn = 0, dmean = 0, dm2 = 0;
    for (int t = 0; t < P; t++) {
        float shift = x[t], sd = 0.0f, sd2 = 0.0f, cnt = 0.0f;
        for (int i = t; i < N; i += P) {
            float d = x[i] - shift;
            sd += d;
            sd2 += d * d;
            cnt += 1.0f;
        }
        gb_moments_t part = gb_moments_from_shifted(cnt, shift, sd, sd2);
        acc = gb_moments_merge(acc, part);
        gb_moments_merge_d(&dn, &dmean, &dm2, part.n, part.mean, part.m2);
    }
    /* the mean of 1e4 + U(-1.5,1.5) in fp32: ulp(1e4) ~ 1e-3; the variance
     * is 0.75 and must not suffer the 1e8 cancellation of E[x^2] - E[x]^2:
     * 1e-3 relative */
    CHECKF(acc.n == N && fabs(acc.mean - mean) < 2e-3, "mean %.9g vs %.9g", acc.mean, mean);
    CHECKF(fabs(acc.m2 / m2 - 1.0) < 1e-3, "m2 %.9g vs %.9g", acc.m2, m2);
    CHECKF(dn == N && fabs(dm2 / m2 - 1.0) < 1e-3, "double merge m2 %.9g vs %.9g", dm2, m2);
    gb_moments_t empty = {0, 0, 0};
    gb_moments_t same = gb_moments_merge(acc, empty);
    CHECK(same.n == acc.n && same.mean == acc.mean && same.m2 == acc.m2);
}

static void test_bn_elems(void) {
    /* apply: relu(a x + b + z); NaN passes through the ReLU like torch */
    CHECK(gb_bn_apply(2.0f, 0.5f, 1.0f, 0.0f, 0) == 2.0f);
    CHECK(gb_bn_apply(-4.0f, 0.5f, 1.0f, 0.5f, 1) == 0.0f);
    CHECK(gb_bn_apply(-4.0f, 0.5f, 1.0f, 0.5f, 0) == -0.5f);
    float nanv = gb_bn_apply(NAN, 1.0f, 0.0f, 0.0f, 1);
    CHECK(nanv != nanv);
    CHECK(gb_relu_grad(3.0f, 0.0f, 1) == 0.0f && gb_relu_grad(3.0f, 0.1f, 1) == 3.0f);
    CHECK(gb_relu_grad(3.0f, -1.0f, 0) == 3.0f);
    /* backward: with the k's computed as the kernels do, dx sums to 0 and is
     * orthogonal to xhat (BN's invariances), and matches double */
    enum { M = 64 };
    float x[M], g[M];
    srand(9);
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < M; i++) {
        x[i] = (float)(rand() / (double)RAND_MAX * 4.0 - 1.0);
        g[i] = (float)(rand() / (double)RAND_MAX - 0.5);
        mean += x[i];
    }
    mean /= M;
    for (int i = 0; i < M; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= M;
    double inv = 1.0 / sqrt(var + 1e-5), gamma = 1.3, sg = 0.0, sgx = 0.0;
    for (int i = 0; i < M; i++) {
        sg += g[i];
        sgx += g[i] * (x[i] - mean);
    }
    float k1 = (float)(gamma * inv), k2 = (float)(sg / M), k3 = (float)(inv * inv * sgx / M);
    double s0 = 0.0, s1 = 0.0, worst = 0.0, a0 = 0.0, a1 = 0.0;
    for (int i = 0; i < M; i++) {
        float dx = gb_bn_dx(g[i], x[i], (float)mean, k1, k2, k3);
        double xh = (x[i] - mean) * inv;
        double ref = gamma * inv * (g[i] - sg / M - xh * (sgx * inv) / M);
        s0 += dx;
        s1 += dx * xh;
        a0 += fabs(dx);
        a1 += fabs(dx * xh);
        worst = fmax(worst, fabs(dx - ref));
    }
    /* the sums cancel up to the float rounding of each term and of the k's:
     * a few 1e-7 of the sum of magnitudes; 1e-5 of it is a safe bound */
    CHECKF(fabs(s0) < 1e-5 * a0 && fabs(s1) < 1e-5 * a1 && worst < 1e-5, "%.3g/%.3g %.3g/%.3g %.3g",
           s0, a0, s1, a1, worst);
}

/* the fused step: a batch norm finalized from sums (as cuDNN's GenStats
 * gives them, fp32) against two-pass double; the block's end; the mask */
static void test_fused_elems(void) {
    enum { M = 4096 };
    static float x[M];
    srand(17);
    for (int shift = 0; shift <= 2; shift++) {
        double mean = 0.0, var = 0.0;
        float s = 0.0f, sq = 0.0f; /* fp32 sums, as the conv's epilogue keeps them */
        for (int i = 0; i < M; i++) {
            x[i] = (float)(shift * 3.0 + rand() / (double)RAND_MAX * 2.0 - 1.0);
            mean += x[i];
            s += x[i];
            sq += x[i] * x[i];
        }
        mean /= M;
        for (int i = 0; i < M; i++)
            var += (x[i] - mean) * (x[i] - mean);
        var /= M;
        gb_bn_fin_t f = gb_bn_from_sums(s, sq, M, 1.5f, -0.25f, 1e-5f);
        double inv = 1.0 / sqrt(var + 1e-5);
        /* fp32 sums lose about M * 2^-24 of sq's magnitude: the variance's
         * error is that over var (grows with the mean's shift) */
        double tol = 4.0 * M * 0x1p-24 * ((double)sq / M) / var;
        CHECKF(fabs(f.mean - mean) < 1e-5 * (1.0 + fabs(mean)) &&
                   fabs(f.invstd - inv) < tol * inv && fabs(f.a - 1.5 * inv) < tol * 1.5 * inv &&
                   fabs(f.b - (-0.25 - mean * 1.5 * inv)) < tol * (1.0 + fabs(mean * 1.5 * inv)),
               "shift %d: mean %.9g/%.9g invstd %.9g/%.9g (tol %.3g)", shift, f.mean, mean,
               f.invstd, inv, tol);
        /* a x + b is the batch norm */
        for (int i = 0; i < M; i += 511) {
            double want = 1.5 * (x[i] - mean) * inv - 0.25;
            CHECK(fabs(gb_bn_apply(x[i], f.a, f.b, 0.0f, 0) - want) < 2 * tol * (1.0 + fabs(want)));
        }
    }
    /* constant input: E[x^2] - E[x]^2 may come out below 0 in rounding; the
     * variance is 0 then, not NaN; NaN sums stay NaN */
    gb_bn_fin_t c =
        gb_bn_from_sums(3.0 * 0.1f * 1000, 1000 * (0.1 * 0.1) * 0.999999, 1000, 1.0f, 0.0f, 1e-5f);
    CHECKF(c.invstd == (float)(1.0 / sqrt((double)1e-5f)), "%.9g", c.invstd);
    gb_bn_fin_t nf = gb_bn_from_sums(NAN, 1.0, 10, 1.0f, 0.0f, 1e-5f);
    CHECK(nf.invstd != nf.invstd);
    /* the block's end: identity residual exact, projection residual normalized */
    CHECK(gb_bn_apply2(2.0f, 0.5f, 1.0f, 3.0f, 1.0f, 0.0f, 1) ==
          gb_bn_apply(2.0f, 0.5f, 1.0f, 3.0f, 1));
    CHECK(gb_bn_apply2(2.0f, 0.5f, 1.0f, 3.0f, 2.0f, -1.0f, 0) == 7.0f);
    CHECK(gb_bn_apply2(-2.0f, 0.5f, 1.0f, 3.0f, -2.0f, 1.0f, 1) == 0.0f);
    /* the recomputed mask is the prologue's ReLU: passes where relu(a x + b) > 0 */
    CHECK(gb_prologue_passes(1.0f, 2.0f, -1.5f) && !gb_prologue_passes(1.0f, 2.0f, -2.0f));
    CHECK(!gb_prologue_passes(-1.0f, 2.0f, 1.5f) && gb_prologue_passes(-1.0f, -2.0f, -1.5f));
    CHECK(!gb_prologue_passes(NAN, 1.0f, 0.0f));
}

static void test_running(void) {
    /* mean 2, batch variance 4 over 5 values: unbiased 5;
     * rm = 0.9 * 0 + 0.1 * 2 = 0.2; rv = 0.9 * 1 + 0.1 * 5 = 1.4 */
    float rm = 0.0f, rv = 1.0f;
    gb_bn_running(&rm, &rv, 2.0f, (float)(1.0 / sqrt(4.0 + 1e-5)), 1e-5f, 5.0f, 0.1f);
    CHECKF(fabsf(rm - 0.2f) < 1e-6f && fabsf(rv - 1.4f) < 1e-5f, "rm %.9g rv %.9g", rm, rv);
}

static void test_pool_range(void) {
    /* every (k, s, p, size) of interest: the closed-form range equals the
     * windows that really contain i */
    for (int k = 1; k <= 3; k++)
        for (int s = 1; s <= 2; s++)
            for (int p = 0; p < k; p++)
                for (int in = 1; in <= 13; in++) {
                    int o = (in + 2 * p - k) / s + 1;
                    if (o < 1) continue;
                    for (int i = 0; i < in; i++) {
                        int lo, hi, blo = -1, bhi = -1;
                        gb_pool_out_range(i, k, s, p, o, &lo, &hi);
                        for (int q = 0; q < o; q++)
                            if (q * s - p <= i && i < q * s - p + k) {
                                if (blo < 0) blo = q;
                                bhi = q + 1;
                            }
                        /* no window holds i (k < s): the range must be empty */
                        CHECKF(blo < 0 ? lo >= hi : (lo == blo && hi == bhi),
                               "k%d s%d p%d in%d i%d: [%d,%d) vs [%d,%d)", k, s, p, in, i, lo, hi,
                               blo, bhi);
                    }
                }
    CHECK(gb_pool_better(NAN, 1.0f) && gb_pool_better(2.0f, 1.0f) && !gb_pool_better(1.0f, 1.0f));
}

static void test_synth(void) {
    enum { N = 200000 };
    double s = 0.0, q = 0.0;
    for (int i = 0; i < N; i++) {
        double v = gb_synth_normal(42, (uint64_t)i);
        s += v;
        q += v * v;
    }
    double mean = s / N, var = q / N - mean * mean;
    /* standard errors 1/sqrt(N) = 0.0022 and sqrt(2/N) = 0.0032: 5 sigma */
    CHECKF(fabs(mean) < 0.012 && fabs(var - 1.0) < 0.016, "mean %.4f var %.4f", mean, var);
    CHECK(gb_synth_normal(42, 7) == gb_synth_normal(42, 7));
    CHECK(gb_synth_normal(42, 7) != gb_synth_normal(43, 7));
    int hist[10] = {0};
    for (int i = 0; i < 10000; i++) {
        int l = gb_synth_label(1, (uint64_t)i, 10);
        CHECK(l >= 0 && l < 10);
        hist[l]++;
    }
    for (int i = 0; i < 10; i++)
        CHECKF(hist[i] > 850 && hist[i] < 1150, "bin %d: %d", i, hist[i]);
}

static void test_half(void) {
    /* every half value survives half -> float -> half */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gb_half_to_float((uint16_t)h);
        uint16_t back = gb_float_to_half(f);
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) {
            CHECK(f != f && (back & 0x7c00) == 0x7c00 && (back & 0x3ff));
        } else {
            CHECKF(back == h, "0x%04x -> %.9g -> 0x%04x", h, f, back);
        }
    }
    CHECK(gb_half_to_float(0x3c00) == 1.0f && gb_half_to_float(0x7bff) == 65504.0f);
    CHECK(gb_half_to_float(0x0001) == ldexpf(1.0f, -24) && gb_half_to_float(0x8000) == 0.0f);
    CHECK(gb_float_to_half(65519.0f) == 0x7bff && gb_float_to_half(65520.0f) == 0x7c00);
    CHECK(gb_float_to_half(1.0f + ldexpf(1.0f, -11)) == 0x3c00);     /* tie to even */
    CHECK(gb_float_to_half(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02); /* tie to even, up */
    CHECK(gb_float_to_half(ldexpf(1.0f, -25)) == 0x0000);            /* tie to even zero */
    CHECK(gb_float_to_half(3 * ldexpf(1.0f, -25)) == 0x0002);
    CHECK(gb_float_to_half(ldexpf(1.0f, -14)) == 0x0400); /* smallest normal */
    CHECK(gb_float_to_half(-2.0f) == 0xc000 && gb_float_to_half(INFINITY) == 0x7c00);
    /* bfloat16: round to nearest even on the upper 16 bits */
    CHECK(gb_float_to_bf16(1.0f) == 0x3f80 && gb_bf16_to_float(0x3f80) == 1.0f);
    CHECK(gb_float_to_bf16(gb_bits_to_float(0x3f808000u)) == 0x3f80);
    CHECK(gb_float_to_bf16(gb_bits_to_float(0x3f818000u)) == 0x3f82);
    CHECK(gb_float_to_bf16(gb_bits_to_float(0x3f808001u)) == 0x3f81);
    CHECK(gb_float_to_bf16(INFINITY) == 0x7f80);
    float bn = gb_bf16_to_float(gb_float_to_bf16(NAN));
    CHECK(bn != bn);
}

static void test_compare_catches(void) {
    /* the comparison used by every numerics test fails when it should */
    double a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
    CHECK(gb_close("same", a, b, 4, 1e-12, 0));
    a[2] = 3.001;
    CHECK(!gb_close("planted error (expected FAIL)", a, b, 4, 1e-5, 0));
    a[2] = NAN;
    CHECK(!gb_close("planted NaN (expected FAIL)", a, b, 4, 1.0, 0));
    /* against an all-zero reference only zeros pass */
    double z[2] = {0, 0}, e[2] = {0, 1e-30};
    CHECK(gb_close("zeros", z, z, 2, 1e-12, 0));
    CHECK(!gb_close("planted nonzero vs zero (expected FAIL)", e, z, 2, 1e-3, 0));
}

int main(void) {
    test_sgd();
    test_scaler();
    test_finite();
    test_softmax_ce();
    test_moments();
    test_bn_elems();
    test_running();
    test_fused_elems();
    test_pool_range();
    test_synth();
    test_half();
    test_compare_catches();
    return 0;
}
