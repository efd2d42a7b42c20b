/* cuda_math.h - per-element math of the CUDA backend's own kernels.
 *
 * Every function here is compiled twice: by nvcc inside the kernels of
 * kernels.cu (as __host__ __device__) and by gcc for the host twin and the CPU
 * tests in tests/cuda (GB_HD expands to nothing there). What a kernel adds on
 * top is only indexing and reductions, so the arithmetic a GPU does is the
 * arithmetic the CPU tests check.
 *
 * Conventions: float in, float out, unless a function says otherwise; half and
 * bfloat16 values travel as their 16 raw bits (uint16_t) on the host side.
 */
#ifndef GB_CUDA_MATH_H
#define GB_CUDA_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define GB_HD __host__ __device__ __forceinline__
#else
#define GB_HD static inline
#endif

/* ---- SGD (torch.optim.SGD: dampening 0, nesterov off) ----
 * g is the raw gradient as the backward pass left it (multiplied by the loss
 * scale in fp16); inv_scale undoes that (1 otherwise). Momentum buffers start
 * at zero, so the first step's buf = mom * 0 + g equals torch's buf = g.
 * Returns the new parameter; *buf is updated in place. */
GB_HD float gb_sgd_elem(float p, float *buf, float g, float lr, float mom, float wd,
                        float inv_scale) {
    float d = g * inv_scale + wd * p;
    float b = mom * (*buf) + d;
    *buf = b;
    return p - lr * b;
}

/* ---- dynamic loss scaling (torch.cuda.amp.GradScaler defaults) ----
 * init 65536, backoff 0.5 on an overflow (and the tracker resets), growth 2
 * after `interval` (2000) clean steps in a row. */
#define GB_SCALER_INIT     65536.0f
#define GB_SCALER_INTERVAL 2000

GB_HD void gb_scaler_update(float *scale, int *tracker, int found_inf, int interval) {
    if (found_inf) {
        *scale = *scale * 0.5f;
        *tracker = 0;
        return;
    }
    int t = *tracker + 1;
    if (t >= interval) {
        float s = *scale * 2.0f;
        /* torch grows only while the result stays finite */
        if (s - s == 0.0f) *scale = s;
        t = 0;
    }
    *tracker = t;
}

/* Finite test that survives -ffast-math style flags: x - x is NaN for inf
 * and NaN, 0 otherwise. */
GB_HD int gb_is_finite(float x) {
    return (x - x) == 0.0f;
}

/* ---- softmax cross-entropy, mean over the batch ----
 * Per row: online log-sum-exp (m = running max, s = sum of exp(z - m)),
 * merged pairwise so a warp can combine lanes in any tree order. */
GB_HD void gb_lse_push(float *m, float *s, float z) {
    if (z > *m) {
        *s = *s * expf(*m - z) + 1.0f;
        *m = z;
    } else {
        *s += expf(z - *m);
    }
}

GB_HD void gb_lse_merge(float *m, float *s, float m2, float s2) {
    if (m2 > *m) {
        *s = *s * expf(*m - m2) + s2;
        *m = m2;
    } else if (s2 > 0.0f) {
        *s += s2 * expf(m2 - *m);
    }
}

/* d loss_mean / d z_j for one row, times `scale` (the loss scale, 1 without):
 * (softmax_j - [j == label]) * scale / n. */
GB_HD float gb_ce_grad(float z, float m, float s, int is_label, float scale_over_n) {
    float p = expf(z - m) / s;
    return (p - (is_label ? 1.0f : 0.0f)) * scale_over_n;
}

/* Loss of one row: log(sum exp) - z_label = m + log(s) - z_label. */
GB_HD float gb_ce_loss(float m, float s, float z_label) {
    return m + logf(s) - z_label;
}

/* ---- batch norm (training) for our own NHWC kernels ----
 * Statistics: each thread sums d = x - shift (shift = the first value it
 * reads) and d*d over its rows, so mean and M2 lose nothing to cancellation
 * when |mean| >> std; partials are merged with Chan's formula. */
typedef struct gb_moments {
    float n, mean, m2;
} gb_moments_t;

GB_HD gb_moments_t gb_moments_from_shifted(float n, float shift, float sum_d, float sum_d2) {
    gb_moments_t r;
    r.n = n;
    if (n > 0.0f) {
        float md = sum_d / n;
        r.mean = shift + md;
        float m2 = sum_d2 - sum_d * md;
        r.m2 = m2 > 0.0f ? m2 : 0.0f;
    } else {
        r.mean = 0.0f;
        r.m2 = 0.0f;
    }
    return r;
}

GB_HD gb_moments_t gb_moments_merge(gb_moments_t a, gb_moments_t b) {
    if (b.n <= 0.0f) return a;
    if (a.n <= 0.0f) return b;
    gb_moments_t r;
    r.n = a.n + b.n;
    float delta = b.mean - a.mean;
    float fb = b.n / r.n;
    r.mean = a.mean + delta * fb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * fb;
    return r;
}

/* Same merge in double, for the per-channel finalize over block partials. */
GB_HD void gb_moments_merge_d(double *n, double *mean, double *m2, double bn, double bmean,
                              double bm2) {
    if (bn <= 0.0) return;
    if (*n <= 0.0) {
        *n = bn;
        *mean = bmean;
        *m2 = bm2;
        return;
    }
    double tot = *n + bn;
    double delta = bmean - *mean;
    *mean += delta * (bn / tot);
    *m2 += bm2 + delta * delta * (*n) * (bn / tot);
    *n = tot;
}

/* Forward apply: y = relu?(a * x + b (+ z)), a = gamma * invstd,
 * b = beta - mean * a. */
GB_HD float gb_bn_apply(float x, float a, float b, float z, int relu) {
    float v = a * x + b + z;
    return (relu && !(v > 0.0f)) ? (v != v ? v : 0.0f) : v;
}

/* Backward: g = dy masked by the ReLU that produced y (y > 0 passes). */
GB_HD float gb_relu_grad(float dy, float y, int relu) {
    return (!relu || y > 0.0f) ? dy : 0.0f;
}

/* dx = k1 * (g - k2 - (x - mean) * k3) with k1 = gamma * invstd,
 * k2 = sum(g) / M, k3 = invstd^2 * sum(g * (x - mean)) / M. */
GB_HD float gb_bn_dx(float g, float x, float mean, float k1, float k2, float k3) {
    return k1 * (g - k2 - (x - mean) * k3);
}

/* Running statistics exactly as torch: rm = (1-m) rm + m mean,
 * rv = (1-m) rv + m var_b M/(M-1), the batch variance recovered from the
 * saved inverse std: var_b = 1/invstd^2 - eps. */
GB_HD void gb_bn_running(float *rm, float *rv, float mean, float invstd, float eps, float count,
                         float momentum) {
    float var_b = 1.0f / (invstd * invstd) - eps;
    if (var_b < 0.0f) var_b = 0.0f;
    float unbiased = var_b * (count / (count - 1.0f));
    *rm = (1.0f - momentum) * (*rm) + momentum * mean;
    *rv = (1.0f - momentum) * (*rv) + momentum * unbiased;
}

/* ---- the fused step (exec.h: statistics from the conv's epilogue, batch
 * norm in the next conv's prologue) ---- */

/* A batch norm finalized from its input's per-channel sum and sum of
 * squares over n values (cuDNN's GenStats; E[x^2] - E[x]^2 in double, the
 * variance clamped at 0): the saved mean and inverse std as bn_fwd saves
 * them, and the affine form bn(x) = a x + b. */
typedef struct gb_bn_fin {
    float mean, invstd, a, b;
} gb_bn_fin_t;
GB_HD gb_bn_fin_t gb_bn_from_sums(double sum, double sqsum, double n, float gamma, float beta,
                                  float eps) {
    gb_bn_fin_t f;
    double mean = sum / n, var = sqsum / n - mean * mean;
    if (!(var > 0.0)) var = var != var ? var : 0.0; /* NaN stays NaN */
    double inv = 1.0 / sqrt(var + (double)eps), a = (double)gamma * inv;
    f.mean = (float)mean;
    f.invstd = (float)inv;
    f.a = (float)a;
    f.b = (float)((double)beta - mean * a);
    return f;
}

/* The end of a block: relu?(a x + b + (za z + zb)), the residual z either
 * the block's input (za 1, zb 0) or the projection's conv output with its
 * own batch norm. */
GB_HD float gb_bn_apply2(float x, float a, float b, float z, float za, float zb, int relu) {
    return gb_bn_apply(x, a, b, za * z + zb, relu);
}

/* The ReLU's mask the fused step never stores, recomputed as the next
 * conv's prologue computed it: relu(x * a + b) with a, b in fp16, products
 * and sums in fp32, each rounded (cuDNN's graph has a MUL then an ADD node,
 * fp32 between them). On the GPU the two roundings are written out: nvcc
 * contracts x * a + b into one FMA by default (one rounding), and the mask
 * then differed from the CPU emulator's where x * a + b is within an ulp of
 * 0. Whether cuDNN's generated prologue contracts is for a GPU run to say
 * (test_cuda_ops' fused lines). */
GB_HD int gb_prologue_passes(float x, float a, float b) {
#if defined(__CUDA_ARCH__)
    float v = __fadd_rn(__fmul_rn(x, a), b);
#else
    float v = x * a;
    v = v + b;
#endif
    return v > 0.0f;
}

/* ---- max pool (PyTorch semantics: NaN wins, then the first strict maximum
 * in row-major scan order; padded cells never win). ---- */
GB_HD int gb_pool_better(float v, float best) {
    return v > best || v != v;
}

/* Output range [lo, hi) of windows (kernel k, stride s, pad p, out size o)
 * that contain input coordinate i. */
GB_HD void gb_pool_out_range(int i, int k, int s, int p, int o, int *lo, int *hi) {
    int a = i + p - k + 1; /* smallest out index whose window reaches i: ceil(a / s) */
    int l = a <= 0 ? 0 : (a + s - 1) / s;
    int h = (i + p) / s + 1;
    if (h > o) h = o;
    *lo = l;
    *hi = h;
}

/* ---- synthetic data, counter-based so any thread can draw element i ----
 * splitmix64 of (seed, stream, i): two uniforms -> one Box-Muller normal. */
GB_HD uint64_t gb_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

GB_HD double gb_synth_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
    uint64_t h = gb_mix64(gb_mix64(seed ^ (stream * 0xd1b54a32d192ed03ULL)) + i);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

GB_HD float gb_synth_normal(uint64_t seed, uint64_t i) {
    double u1 = gb_synth_uniform(seed, 1, 2 * i), u2 = gb_synth_uniform(seed, 1, 2 * i + 1);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

GB_HD int gb_synth_label(uint64_t seed, uint64_t i, int classes) {
    uint64_t h = gb_mix64(gb_mix64(seed ^ (2 * 0xd1b54a32d192ed03ULL)) + i);
    return (int)(h % (uint64_t)classes);
}

/* ---- half / bfloat16 on the host (the device uses the cuda_fp16 and
 * cuda_bf16 intrinsics, which implement the same IEEE rounding) ---- */
GB_HD float gb_bits_to_float(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

GB_HD uint32_t gb_float_to_bits(float f) {
    union {
        uint32_t u;
        float f;
    } v;
    v.f = f;
    return v.u;
}

GB_HD float gb_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return gb_bits_to_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 exactly */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return gb_bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round to nearest even, overflow to inf, NaN stays NaN. */
GB_HD uint16_t gb_float_to_half(float f) {
    uint32_t x = gb_float_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24 rounded to an integer */
        if (ax < 0x33000000u) return sign; /* < 2^-25: rounds to 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t e = (ax >> 23) - 112u, m = ax & 0x7fffffu;
    uint32_t q = (e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

GB_HD float gb_bf16_to_float(uint16_t b) {
    return gb_bits_to_float((uint32_t)b << 16);
}

GB_HD uint16_t gb_float_to_bf16(float f) {
    uint32_t x = gb_float_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

#endif
