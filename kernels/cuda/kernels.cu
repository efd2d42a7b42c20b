/* kernels.cu - the CUDA backend's own kernels: input layout, synthetic data,
 * casts, pooling, softmax cross-entropy, our NHWC batch norm, running
 * statistics, overflow check, SGD and the loss scaler. Per-element math comes
 * from cuda_math.h (covered by CPU tests); this file adds indexing and
 * reductions. Launchers at the end take a stream and return the launch
 * status. Every reduction has a fixed order, so results are deterministic.
 */
#include "kernels.h"

#include "cuda_math.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kThreads = 256;

/* loops over a thread's V channels: unrolled, so its arrays stay in
 * registers (a pragma the emulator's host compiler does not know) */
#ifdef GB_CUDA_EMU_H
#define GB_UNROLL
#else
#define GB_UNROLL _Pragma("unroll")
#endif

template <typename T> __device__ __forceinline__ float ld(const T *p, size_t i);
template <> __device__ __forceinline__ float ld<float>(const float *p, size_t i) {
    return p[i];
}
template <> __device__ __forceinline__ float ld<__half>(const __half *p, size_t i) {
    return __half2float(p[i]);
}
template <> __device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i) {
    return __bfloat162float(p[i]);
}
template <typename T> __device__ __forceinline__ void st(T *p, size_t i, float v);
template <> __device__ __forceinline__ void st<float>(float *p, size_t i, float v) {
    p[i] = v;
}
template <> __device__ __forceinline__ void st<__half>(__half *p, size_t i, float v) {
    p[i] = __float2half_rn(v);
}
template <> __device__ __forceinline__ void st<__nv_bfloat16>(__nv_bfloat16 *p, size_t i, float v) {
    p[i] = __float2bfloat16_rn(v);
}

unsigned grid_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > (1u << 20)) b = 1u << 20; /* grid-stride loops cover the rest */
    return (unsigned)b;
}

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* The channel of NHWC element i in 32-bit arithmetic: a 64-bit remainder is
 * a long instruction sequence per element in a memory-bound loop, and no
 * tensor here reaches 2^31 elements (the plan refuses one that does). */
#define CHANNEL(i, c) ((int)((unsigned)(i) % (unsigned)(c)))

/* dispatch on the compute dtype */
#define DISPATCH(dt, T, ...)                                                                       \
    do {                                                                                           \
        if ((dt) == GB_KDT_F32) {                                                                  \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        } else if ((dt) == GB_KDT_F16) {                                                           \
            typedef __half T;                                                                      \
            __VA_ARGS__;                                                                           \
        } else {                                                                                   \
            typedef __nv_bfloat16 T;                                                               \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

template <typename T>
__global__ void k_image_to_nhwc(const float *src, T *dst, int n, int h, int w, int c_int) {
    size_t total = (size_t)n * h * w * c_int;
    GRID_STRIDE(i, total) {
        int c = (int)(i % c_int);
        size_t pix = i / c_int;
        int x = (int)(pix % w);
        size_t t = pix / w;
        int y = (int)(t % h);
        int b = (int)(t / h);
        float v = c < 3 ? src[(((size_t)b * 3 + c) * h + y) * w + x] : 0.0f;
        st(dst, i, v);
    }
}

__global__ void k_synth(float *images, int32_t *labels, int n, size_t count, int classes,
                        uint64_t seed) {
    GRID_STRIDE(i, count) images[i] = gb_synth_normal(seed, i);
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (size_t)n) labels[t] = gb_synth_label(seed, t, classes);
}

template <typename T> __global__ void k_fill_normal(T *dst, size_t n, uint64_t seed, float scale) {
    GRID_STRIDE(i, n) st(dst, i, scale * gb_synth_normal(seed, i));
}

template <typename T> __global__ void k_cast_from_f32(const float *src, T *dst, size_t n) {
    GRID_STRIDE(i, n) st(dst, i, src[i]);
}

template <typename T> __global__ void k_cast_to_f32(const T *src, float *dst, size_t n) {
    GRID_STRIDE(i, n) dst[i] = ld(src, i);
}

template <typename T>
__global__ void k_maxpool_fwd(const T *x, T *y, uint8_t *arg, int n, int ih, int iw, int c, int oh,
                              int ow, int k, int s, int p) {
    size_t total = (size_t)n * oh * ow * c;
    GRID_STRIDE(i, total) {
        int ch = (int)(i % c);
        size_t t = i / c;
        int ox = (int)(t % ow);
        t /= ow;
        int oy = (int)(t % oh);
        int b = (int)(t / oh);
        float best = -INFINITY;
        int code = -1;
        for (int r = 0; r < k; r++) {
            int iy = oy * s - p + r;
            if (iy < 0 || iy >= ih) continue;
            for (int q = 0; q < k; q++) {
                int ix = ox * s - p + q;
                if (ix < 0 || ix >= iw) continue;
                float v = ld(x, (((size_t)b * ih + iy) * iw + ix) * c + ch);
                if (code < 0 || gb_pool_better(v, best)) {
                    best = v;
                    code = r * k + q;
                }
            }
        }
        st(y, i, best);
        arg[i] = (uint8_t)(code < 0 ? 0 : code);
    }
}

template <typename T>
__global__ void k_maxpool_bwd(const T *dy, const uint8_t *arg, T *dx, int n, int ih, int iw, int c,
                              int oh, int ow, int k, int s, int p) {
    size_t total = (size_t)n * ih * iw * c;
    GRID_STRIDE(i, total) {
        int ch = (int)(i % c);
        size_t t = i / c;
        int ix = (int)(t % iw);
        t /= iw;
        int iy = (int)(t % ih);
        int b = (int)(t / ih);
        int ylo, yhi, xlo, xhi;
        gb_pool_out_range(iy, k, s, p, oh, &ylo, &yhi);
        gb_pool_out_range(ix, k, s, p, ow, &xlo, &xhi);
        float acc = 0.0f;
        for (int oy = ylo; oy < yhi; oy++)
            for (int ox = xlo; ox < xhi; ox++) {
                size_t o = (((size_t)b * oh + oy) * ow + ox) * c + ch;
                int code = arg[o];
                if (oy * s - p + code / k == iy && ox * s - p + code % k == ix) acc += ld(dy, o);
            }
        st(dx, i, acc);
    }
}

template <typename T> __global__ void k_avgpool_fwd(const T *x, T *y, int n, int hw, int c) {
    size_t total = (size_t)n * c;
    GRID_STRIDE(i, total) {
        int ch = (int)(i % c);
        size_t b = i / c;
        float acc = 0.0f;
        for (int j = 0; j < hw; j++)
            acc += ld(x, (b * hw + j) * c + ch);
        st(y, i, acc / (float)hw);
    }
}

template <typename T> __global__ void k_avgpool_bwd(const T *dy, T *dx, int n, int hw, int c) {
    size_t total = (size_t)n * hw * c;
    GRID_STRIDE(i, total) {
        int ch = (int)(i % c);
        size_t b = i / ((size_t)hw * c);
        st(dx, i, ld(dy, b * c + ch) / (float)hw);
    }
}

/* one warp per row */
template <typename T>
__global__ void k_softmax_ce(const float *logits, const float *bias, const int32_t *labels, int n,
                             int k, int replicas, const gb_scaler_state_t *scaler, float *dl,
                             T *dl_dt, float *row_loss) {
    int lane = threadIdx.x & 31;
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= n) return;
    const float *z = logits + (size_t)row * k;
    float m = -INFINITY, s = 0.0f;
    for (int j = lane; j < k; j += 32)
        gb_lse_push(&m, &s, z[j] + bias[j]);
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        gb_lse_merge(&m, &s, m2, s2);
    }
    /* every lane uses lane 0's normalizer, so the row is self-consistent */
    m = __shfl_sync(0xffffffffu, m, 0);
    s = __shfl_sync(0xffffffffu, s, 0);
    int label = labels[row];
    float scale = scaler ? scaler->scale : 1.0f;
    float f = scale / ((float)n * (float)replicas);
    for (int j = lane; j < k; j += 32) {
        float g = gb_ce_grad(z[j] + bias[j], m, s, j == label, f);
        dl[(size_t)row * k + j] = g;
        st(dl_dt, (size_t)row * k + j, g);
    }
    if (lane == 0) row_loss[row] = gb_ce_loss(m, s, z[label] + bias[label]);
}

__global__ void k_loss_mean(const float *row_loss, int n, float *out) {
    __shared__ double part[kThreads];
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        acc += row_loss[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off >>= 1) {
        if ((int)threadIdx.x < off) part[threadIdx.x] += part[threadIdx.x + off];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = (float)(part[0] / n);
}

__global__ void k_colsum(const float *a, int n, int k, float *out) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += a[(size_t)i * k + j];
    out[j] = (float)acc;
}

__global__ void k_bn_running(const gb_bn_run_entry_t *table, float eps, float momentum) {
    gb_bn_run_entry_t e = table[blockIdx.y];
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= e.c) return;
    gb_bn_running(&e.rm[c], &e.rv[c], e.mean[c], e.invstd[c], eps, e.count, momentum);
}

template <typename T> __global__ void k_finite_check(const T *a, size_t n, int *found) {
    int bad = 0;
    GRID_STRIDE(i, n) bad |= !gb_is_finite(ld(a, i));
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(found, 1);
}

template <typename G, typename C>
__global__ void k_sgd(float *w, float *buf, const G *grad, C *wcopy, size_t n, float lr, float mom,
                      float wd, const gb_scaler_state_t *scaler) {
    float inv = 1.0f;
    if (scaler) {
        /* skip the step, as GradScaler does; a scale halved to 0 (166
         * overflowing steps in a row) too: GradScaler sees its NaNs */
        if (scaler->found_inf || !(scaler->scale > 0.0f)) return;
        inv = 1.0f / scaler->scale; /* a power of two: exact */
    }
    GRID_STRIDE(i, n) {
        float b = buf[i];
        float p = gb_sgd_elem(w[i], &b, ld(grad, i), lr, mom, wd, inv);
        buf[i] = b;
        w[i] = p;
        if (wcopy) st(wcopy, i, p);
    }
}

__global__ void k_scaler_update(gb_scaler_state_t *s) {
    s->used_scale = s->scale;
    gb_scaler_update(&s->scale, &s->tracker, s->found_inf, GB_SCALER_INTERVAL);
}

/* ---- our NHWC batch norm ----
 * Two paths with one partials layout (rchunks x c x {3 fwd, 2 bwd} floats)
 * and one finalize:
 *  - vector (c a multiple of V = 16 bytes / sizeof(T), every pointer 16-byte
 *    aligned): a thread owns V adjacent channels and moves them with one
 *    16-byte load/store per row. Block (tw, kThreads / tw) with tw = min(c/V,
 *    32) channel vectors: a warp reads 512 contiguous bytes (one row's 32
 *    vectors, or whole rows when c/V < 32). Reductions: grid (channel tiles,
 *    row chunks); each thread sums its V channels over rows r0+ty, r0+ty+rows,
 *    ...; the block's rows merge in a halving tree in shared memory laid out
 *    [lane][thread] (conflict-free). Apply: the same block, grid (tiles, row
 *    blocks), each thread's coefficients loaded once; no division.
 *  - scalar (any other shape): block (32 channels x 8 row phases), one
 *    element per access.
 * Finalize: block (kThreads / S channels, S slices), S the smallest power of
 * two >= rchunks / 8, at most 32 (each thread's chain of merges short); slice
 * s merges chunks s, s+S, ... in double, then a halving tree over the
 * slices. Every order is fixed: results are the same run to run. */
constexpr int kBnRows = 8;
constexpr int kVecBytes = 16;
constexpr int kFinSlices = 32; /* the finalize's most slices per channel */
constexpr int kApplyRows = 4;  /* rows per thread in the vector apply */

template <typename T> struct alignas(kVecBytes) vec_t {
    static constexpr int n = kVecBytes / (int)sizeof(T);
    T v[n];
};

template <typename T> __device__ __forceinline__ vec_t<T> vld(const T *p) {
#ifdef GB_CUDA_EMU_H
    if ((uintptr_t)p % kVecBytes) gb_emu::die("a misaligned 16-byte load");
#endif
    return *reinterpret_cast<const vec_t<T> *>(p);
}
template <typename T> __device__ __forceinline__ void vst(T *p, const vec_t<T> &a) {
#ifdef GB_CUDA_EMU_H
    if ((uintptr_t)p % kVecBytes) gb_emu::die("a misaligned 16-byte store");
#endif
    *reinterpret_cast<vec_t<T> *>(p) = a;
}

/* the smallest power of two >= n, halved: the first step of a halving tree */
__device__ __forceinline__ int tree_top(int n) {
    int p = 1;
    while (p < n)
        p <<= 1;
    return p >> 1;
}

__device__ __forceinline__ void chunk_rows(long m, int rchunks, long *r0, long *r1) {
    long per = (m + rchunks - 1) / rchunks;
    *r0 = (long)blockIdx.y * per;
    *r1 = *r0 + per < m ? *r0 + per : m;
}

template <typename T>
__global__ void k_bn_fwd_stats(const T *x, long m, int c, int rchunks, float *partials) {
    __shared__ float sn[kBnRows][32], smean[kBnRows][32], sm2[kBnRows][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int ch = blockIdx.x * 32 + tx;
    long r0, r1;
    chunk_rows(m, rchunks, &r0, &r1);
    float cnt = 0.0f, shift = 0.0f, sd = 0.0f, sd2 = 0.0f;
    if (ch < c) {
        long r = r0 + ty;
        if (r < r1) shift = ld(x, (size_t)r * c + ch);
        for (; r < r1; r += kBnRows) {
            float d = ld(x, (size_t)r * c + ch) - shift;
            sd += d;
            sd2 += d * d;
            cnt += 1.0f;
        }
    }
    gb_moments_t mo = gb_moments_from_shifted(cnt, shift, sd, sd2);
    sn[ty][tx] = mo.n;
    smean[ty][tx] = mo.mean;
    sm2[ty][tx] = mo.m2;
    __syncthreads();
    if (ty == 0 && ch < c) {
        gb_moments_t acc = {sn[0][tx], smean[0][tx], sm2[0][tx]};
        for (int j = 1; j < kBnRows; j++) {
            gb_moments_t o = {sn[j][tx], smean[j][tx], sm2[j][tx]};
            acc = gb_moments_merge(acc, o);
        }
        float *pp = partials + ((size_t)blockIdx.y * c + ch) * 3;
        pp[0] = acc.n;
        pp[1] = acc.mean;
        pp[2] = acc.m2;
    }
}

/* shifted sums of one row's vector into a thread's V channels */
template <typename T, int V>
__device__ __forceinline__ void stats_push(const vec_t<T> &a, const float *shift, float *sd,
                                           float *sd2) {
    GB_UNROLL
    for (int j = 0; j < V; j++) {
        float d = ld(a.v, j) - shift[j];
        sd[j] += d;
        sd2[j] += d * d;
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 4)
    k_bn_fwd_stats_v(const T *__restrict__ x, long m, int c, int rchunks,
                     float *__restrict__ partials) {
    constexpr int V = vec_t<T>::n;
    __shared__ float sn[kThreads], smean[V][kThreads], sm2[V][kThreads];
    int tx = threadIdx.x, ty = threadIdx.y, rows = blockDim.y;
    int tid = ty * blockDim.x + tx;
    int vi = blockIdx.x * blockDim.x + tx; /* this thread's channel vector */
    long r0, r1;
    chunk_rows(m, rchunks, &r0, &r1);
    float cnt = 0.0f, shift[V], sd[V], sd2[V];
    GB_UNROLL
    for (int j = 0; j < V; j++)
        shift[j] = sd[j] = sd2[j] = 0.0f;
    long r = r0 + ty;
    if (vi * V < c && r < r1) {
        size_t step = (size_t)rows * c;
        const T *p = x + (size_t)r * c + (size_t)vi * V;
        vec_t<T> a = vld(p);
        GB_UNROLL
        for (int j = 0; j < V; j++)
            shift[j] = ld(a.v, j);
        cnt = 1.0f; /* the first row: d = 0 */
        r += rows, p += step;
        /* two rows per pass: two 16-byte loads in flight per thread */
        for (; r + rows < r1; r += 2 * rows, p += 2 * step) {
            vec_t<T> a0 = vld(p), a1 = vld(p + step);
            stats_push<T, V>(a0, shift, sd, sd2);
            stats_push<T, V>(a1, shift, sd, sd2);
            cnt += 2.0f;
        }
        if (r < r1) {
            stats_push<T, V>(vld(p), shift, sd, sd2);
            cnt += 1.0f;
        }
    }
    sn[tid] = cnt;
    GB_UNROLL
    for (int j = 0; j < V; j++) {
        gb_moments_t mo = gb_moments_from_shifted(cnt, shift[j], sd[j], sd2[j]);
        smean[j][tid] = mo.mean;
        sm2[j][tid] = mo.m2;
    }
    for (int st = tree_top(rows); st > 0; st >>= 1) {
        __syncthreads();
        if (ty < st && ty + st < rows) {
            int o = tid + st * blockDim.x;
            float n = sn[tid];
            GB_UNROLL
            for (int j = 0; j < V; j++) {
                gb_moments_t a = {sn[tid], smean[j][tid], sm2[j][tid]};
                gb_moments_t b = {sn[o], smean[j][o], sm2[j][o]};
                gb_moments_t mo = gb_moments_merge(a, b);
                smean[j][tid] = mo.mean;
                sm2[j][tid] = mo.m2;
                n = mo.n;
            }
            sn[tid] = n;
        }
    }
    __syncthreads();
    if (ty == 0 && vi * V < c) {
        float *pp = partials + ((size_t)blockIdx.y * c + (size_t)vi * V) * 3;
        GB_UNROLL
        for (int j = 0; j < V; j++) {
            pp[3 * j] = sn[tid];
            pp[3 * j + 1] = smean[j][tid];
            pp[3 * j + 2] = sm2[j][tid];
        }
    }
}

/* block (kThreads / slices, slices), grid (c / blockDim.x): fin_block */
__global__ void k_bn_fwd_finalize(const float *partials, int rchunks, int c, const float *gamma,
                                  const float *beta, float eps, float *save_mean,
                                  float *save_invstd, float *coef) {
    __shared__ double sn[kThreads], smean[kThreads], sm2[kThreads];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * blockDim.x + tx;
    int ch = blockIdx.x * blockDim.x + tx;
    double n = 0.0, mean = 0.0, m2 = 0.0;
    if (ch < c)
        for (int r = ty; r < rchunks; r += blockDim.y) {
            const float *pp = partials + ((size_t)r * c + ch) * 3;
            gb_moments_merge_d(&n, &mean, &m2, pp[0], pp[1], pp[2]);
        }
    sn[tid] = n;
    smean[tid] = mean;
    sm2[tid] = m2;
    for (int st = blockDim.y / 2; st > 0; st >>= 1) {
        __syncthreads();
        if (ty < st) {
            int o = tid + st * blockDim.x;
            gb_moments_merge_d(&sn[tid], &smean[tid], &sm2[tid], sn[o], smean[o], sm2[o]);
        }
    }
    __syncthreads();
    if (ty != 0 || ch >= c) return;
    n = sn[tid], mean = smean[tid], m2 = sm2[tid];
    double var = n > 0.0 ? m2 / n : 0.0;
    double inv = 1.0 / sqrt(var + (double)eps);
    save_mean[ch] = (float)mean;
    save_invstd[ch] = (float)inv;
    double a = (double)gamma[ch] * inv;
    coef[ch] = (float)a;
    coef[c + ch] = (float)((double)beta[ch] - mean * a);
}

template <typename T>
__global__ void k_bn_fwd_apply(const T *x, const T *z, T *y, long m, int c, const float *coef,
                               int relu) {
    size_t total = (size_t)m * c;
    GRID_STRIDE(i, total) {
        int ch = CHANNEL(i, c);
        float zz = z ? ld(z, i) : 0.0f;
        st(y, i, gb_bn_apply(ld(x, i), coef[ch], coef[c + ch], zz, relu));
    }
}

/* 16 bytes per thread: a thread's V channels fixed, their coefficients
 * loaded once into registers, rows strided over grid.y. BLOCK_END: the
 * fused step's block end (gb_bn_apply2), the residual z scaled and shifted
 * by zc first (zc NULL: 1 and 0); otherwise the batch norm's apply, z added
 * as it is (z NULL: none) */
template <typename T, bool BLOCK_END>
__global__ void k_bn_fwd_apply_v(const T *__restrict__ x, const T *__restrict__ z,
                                 T *__restrict__ y, long m, int c, const float *__restrict__ coef,
                                 const float *__restrict__ zc, int relu) {
    constexpr int V = vec_t<T>::n;
    int vi = blockIdx.x * blockDim.x + threadIdx.x;
    if (vi * V >= c) return;
    int ch0 = vi * V;
    float a[V], b[V], za[V], zb[V];
    GB_UNROLL
    for (int j = 0; j < V; j++) {
        a[j] = coef[ch0 + j];
        b[j] = coef[c + ch0 + j];
        if (BLOCK_END) {
            za[j] = zc ? zc[ch0 + j] : 1.0f;
            zb[j] = zc ? zc[c + ch0 + j] : 0.0f;
        }
    }
    size_t step = (size_t)gridDim.y * blockDim.y * c;
    long r = (long)blockIdx.y * blockDim.y + threadIdx.y;
    size_t i = (size_t)r * c + ch0;
    for (; r < m; r += (long)gridDim.y * blockDim.y, i += step) {
        vec_t<T> xv = vld(x + i), o;
        if (z) {
            vec_t<T> zv = vld(z + i);
            GB_UNROLL
            for (int j = 0; j < V; j++)
                st(o.v, j,
                   BLOCK_END
                       ? gb_bn_apply2(ld(xv.v, j), a[j], b[j], ld(zv.v, j), za[j], zb[j], relu)
                       : gb_bn_apply(ld(xv.v, j), a[j], b[j], ld(zv.v, j), relu));
        } else {
            GB_UNROLL
            for (int j = 0; j < V; j++)
                st(o.v, j, gb_bn_apply(ld(xv.v, j), a[j], b[j], 0.0f, relu));
        }
        vst(y + i, o);
    }
}

/* The gradient through the ReLU: masked by the stored output y, or, with
 * the fused step's prologue coefficients (pa, pb: bn(x) = pa x + pb as the
 * next conv's prologue applied it), by the mask recomputed from x. */
__device__ __forceinline__ float relu_masked(float dy, float x, float y, int relu, int recompute,
                                             float pa, float pb) {
    if (recompute) return gb_prologue_passes(x, pa, pb) ? dy : 0.0f;
    return gb_relu_grad(dy, y, relu);
}

template <typename T>
__global__ void k_bn_bwd_reduce(const T *x, const T *y, const T *dy, long m, int c, int relu,
                                const T *pre, const float *save_mean, int rchunks,
                                float *partials) {
    __shared__ float s0[kBnRows][32], s1[kBnRows][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int ch = blockIdx.x * 32 + tx;
    long r0, r1;
    chunk_rows(m, rchunks, &r0, &r1);
    float sg = 0.0f, sgx = 0.0f;
    if (ch < c) {
        float mean = save_mean[ch];
        float pa = pre ? ld(pre, ch) : 0.0f, pb = pre ? ld(pre, c + ch) : 0.0f;
        for (long r = r0 + ty; r < r1; r += kBnRows) {
            size_t i = (size_t)r * c + ch;
            float g = relu_masked(ld(dy, i), ld(x, i), pre || !relu ? 0.0f : ld(y, i), relu,
                                  pre != NULL, pa, pb);
            sg += g;
            sgx += g * (ld(x, i) - mean);
        }
    }
    s0[ty][tx] = sg;
    s1[ty][tx] = sgx;
    __syncthreads();
    if (ty == 0 && ch < c) {
        for (int j = 1; j < kBnRows; j++) {
            sg += s0[j][tx];
            sgx += s1[j][tx];
        }
        float *pp = partials + ((size_t)blockIdx.y * c + ch) * 2;
        pp[0] = sg;
        pp[1] = sgx;
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 4)
    k_bn_bwd_reduce_v(const T *__restrict__ x, const T *__restrict__ y, const T *__restrict__ dy,
                      long m, int c, int relu, const T *__restrict__ pre,
                      const float *__restrict__ save_mean, int rchunks,
                      float *__restrict__ partials) {
    constexpr int V = vec_t<T>::n;
    __shared__ float s0[V][kThreads], s1[V][kThreads];
    int tx = threadIdx.x, ty = threadIdx.y, rows = blockDim.y;
    int tid = ty * blockDim.x + tx;
    int vi = blockIdx.x * blockDim.x + tx;
    long r0, r1;
    chunk_rows(m, rchunks, &r0, &r1);
    float sg[V], sgx[V];
    GB_UNROLL
    for (int j = 0; j < V; j++)
        sg[j] = sgx[j] = 0.0f;
    long r = r0 + ty;
    if (vi * V < c && r < r1) {
        float mean[V], pa[V], pb[V];
        GB_UNROLL
        for (int j = 0; j < V; j++) {
            mean[j] = save_mean[vi * V + j];
            pa[j] = pre ? ld(pre, vi * V + j) : 0.0f;
            pb[j] = pre ? ld(pre, c + vi * V + j) : 0.0f;
        }
        size_t step = (size_t)rows * c, i = (size_t)r * c + (size_t)vi * V;
        for (; r < r1; r += rows, i += step) {
            vec_t<T> xv = vld(x + i), yv = pre || !relu ? xv : vld(y + i), gv = vld(dy + i);
            GB_UNROLL
            for (int j = 0; j < V; j++) {
                float g = relu_masked(ld(gv.v, j), ld(xv.v, j), ld(yv.v, j), relu, pre != NULL,
                                      pa[j], pb[j]);
                sg[j] += g;
                sgx[j] += g * (ld(xv.v, j) - mean[j]);
            }
        }
    }
    GB_UNROLL
    for (int j = 0; j < V; j++) {
        s0[j][tid] = sg[j];
        s1[j][tid] = sgx[j];
    }
    for (int st = tree_top(rows); st > 0; st >>= 1) {
        __syncthreads();
        if (ty < st && ty + st < rows) {
            int o = tid + st * blockDim.x;
            GB_UNROLL
            for (int j = 0; j < V; j++) {
                s0[j][tid] += s0[j][o];
                s1[j][tid] += s1[j][o];
            }
        }
    }
    __syncthreads();
    if (ty == 0 && vi * V < c) {
        float *pp = partials + ((size_t)blockIdx.y * c + (size_t)vi * V) * 2;
        GB_UNROLL
        for (int j = 0; j < V; j++) {
            pp[2 * j] = s0[j][tid];
            pp[2 * j + 1] = s1[j][tid];
        }
    }
}

/* block (kThreads / slices, slices), grid (c / blockDim.x): fin_block */
__global__ void k_bn_bwd_finalize(const float *partials, int rchunks, int c, long m,
                                  const float *gamma, const float *save_invstd, float *dgamma,
                                  float *dbeta, float *coef) {
    __shared__ double s0[kThreads], s1[kThreads];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * blockDim.x + tx;
    int ch = blockIdx.x * blockDim.x + tx;
    double sg = 0.0, sgx = 0.0;
    if (ch < c)
        for (int r = ty; r < rchunks; r += blockDim.y) {
            sg += partials[((size_t)r * c + ch) * 2];
            sgx += partials[((size_t)r * c + ch) * 2 + 1];
        }
    s0[tid] = sg;
    s1[tid] = sgx;
    for (int st = blockDim.y / 2; st > 0; st >>= 1) {
        __syncthreads();
        if (ty < st) {
            s0[tid] += s0[tid + st * blockDim.x];
            s1[tid] += s1[tid + st * blockDim.x];
        }
    }
    __syncthreads();
    if (ty != 0 || ch >= c) return;
    sg = s0[tid], sgx = s1[tid];
    double inv = save_invstd[ch];
    dbeta[ch] = (float)sg;
    dgamma[ch] = (float)(sgx * inv);
    coef[ch] = (float)((double)gamma[ch] * inv);
    coef[c + ch] = (float)(sg / (double)m);
    coef[2 * c + ch] = (float)(inv * inv * sgx / (double)m);
}

template <typename T>
__global__ void k_bn_bwd_apply(const T *x, const T *y, const T *dy, T *dx, T *dz, long m, int c,
                               int relu, const T *pre, const float *save_mean, const float *coef) {
    size_t total = (size_t)m * c;
    GRID_STRIDE(i, total) {
        int ch = CHANNEL(i, c);
        float g =
            pre ? relu_masked(ld(dy, i), ld(x, i), 0.0f, relu, 1, ld(pre, ch), ld(pre, c + ch))
                : gb_relu_grad(ld(dy, i), relu ? ld(y, i) : 0.0f, relu);
        if (dz) st(dz, i, g);
        st(dx, i, gb_bn_dx(g, ld(x, i), save_mean[ch], coef[ch], coef[c + ch], coef[2 * c + ch]));
    }
}

template <typename T>
__global__ void k_bn_bwd_apply_v(const T *__restrict__ x, const T *__restrict__ y,
                                 const T *__restrict__ dy, T *__restrict__ dx, T *__restrict__ dz,
                                 long m, int c, int relu, const T *__restrict__ pre,
                                 const float *__restrict__ save_mean,
                                 const float *__restrict__ coef) {
    constexpr int V = vec_t<T>::n;
    int vi = blockIdx.x * blockDim.x + threadIdx.x;
    if (vi * V >= c) return;
    int ch0 = vi * V;
    float mean[V], k1[V], k2[V], k3[V], pa[V], pb[V];
    GB_UNROLL
    for (int j = 0; j < V; j++) {
        pa[j] = pre ? ld(pre, ch0 + j) : 0.0f;
        pb[j] = pre ? ld(pre, c + ch0 + j) : 0.0f;
        mean[j] = save_mean[ch0 + j];
        k1[j] = coef[ch0 + j];
        k2[j] = coef[c + ch0 + j];
        k3[j] = coef[2 * c + ch0 + j];
    }
    size_t step = (size_t)gridDim.y * blockDim.y * c;
    long r = (long)blockIdx.y * blockDim.y + threadIdx.y;
    size_t i = (size_t)r * c + ch0;
    for (; r < m; r += (long)gridDim.y * blockDim.y, i += step) {
        vec_t<T> xv = vld(x + i), yv = pre || !relu ? xv : vld(y + i), gv = vld(dy + i), dxv, gz;
        GB_UNROLL
        for (int j = 0; j < V; j++) {
            float g =
                relu_masked(ld(gv.v, j), ld(xv.v, j), ld(yv.v, j), relu, pre != NULL, pa[j], pb[j]);
            st(gz.v, j, g);
            st(dxv.v, j, gb_bn_dx(g, ld(xv.v, j), mean[j], k1[j], k2[j], k3[j]));
        }
        if (dz) vst(dz + i, gz);
        vst(dx + i, dxv);
    }
}

__global__ void k_ar_fill(float *buf, size_t n, int rank, long long fault) {
    GRID_STRIDE(i, n) {
        float v = (float)((int)((i * 7 + (size_t)rank * 3) % 11) - 5);
        if ((long long)i == fault) v += 1.0f;
        buf[i] = v;
    }
}

__global__ void k_ar_check(const float *buf, size_t n, gb_ar_want_t want, unsigned int *bad) {
    unsigned int mine = 0;
    GRID_STRIDE(i, n) {
        if (buf[i] != want.v[i % 11]) mine++;
    }
    if (mine) atomicAdd(bad, mine);
}

/* ---- the fused step (exec.h): a batch norm finalized from its conv's
 * sums, and the block's end ---- */

/* per channel: saved mean / inverse std, the affine form in fp32 (fcoef:
 * a[c] then b[c]) and in the compute type for the next conv's prologue
 * (pre: a[c] then b[c]) */
template <typename T>
__global__ void k_bn_fin_sums(const float *sums, double count, int c, const float *gamma,
                              const float *beta, float eps, float *save_mean, float *save_invstd,
                              float *fcoef, T *pre, int *range) {
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c) return;
    gb_bn_fin_t f = gb_bn_from_sums(sums[ch], sums[c + ch], count, gamma[ch], beta[ch], eps);
    save_mean[ch] = f.mean;
    save_invstd[ch] = f.invstd;
    fcoef[ch] = f.a;
    fcoef[c + ch] = f.b;
    st(pre, ch, f.a);
    st(pre, c + ch, f.b);
    /* an fp16 coefficient that overflowed: the prologue would feed inf to
     * the conv (a NaN from NaN sums is the loss scaler's to see) */
    if (range && gb_is_finite(f.a) && gb_is_finite(f.b) &&
        !(gb_is_finite(ld(pre, ch)) && gb_is_finite(ld(pre, c + ch))))
        *range = 1;
}

/* y = relu?(bn(x) + bn_z(z)): zc NULL: the residual as it is. One element
 * per thread (any c) or, in k_bn_fwd_apply_v<T, true>, 16 bytes per thread
 * (c a multiple of the vector, 16-byte aligned tensors). */
template <typename T>
__global__ void k_bn_apply2(const T *x, const T *z, T *y, size_t total, int c, const float *fc,
                            const float *zc, int relu) {
    GRID_STRIDE(i, total) {
        int ch = CHANNEL(i, c);
        float za = zc ? zc[ch] : 1.0f, zb = zc ? zc[c + ch] : 0.0f;
        st(y, i, gb_bn_apply2(ld(x, i), fc[ch], fc[c + ch], ld(z, i), za, zb, relu));
    }
}

} // namespace

/* The launch shape of a batch-norm reduction or apply: vec (V channels per
 * thread, 16-byte accesses) when c % V == 0 and every pointer is 16-byte
 * aligned, else the scalar kernels. */
struct bn_shape {
    int vec;    /* 1: the _v kernels */
    int tw;     /* block.x: channel vectors (vec) or channels (scalar) */
    int rows;   /* block.y: rows in flight */
    int grid_x; /* channel tiles */
};
constexpr int kBnBlocksPerSm = 4; /* the reductions' __launch_bounds__ */

static bn_shape bn_shape_for(int v, int c, bool vec) {
    bn_shape sh;
    if (vec) {
        int cv = c / v;
        sh.vec = 1;
        sh.tw = cv < 32 ? cv : 32;
        sh.rows = kThreads / sh.tw;
        sh.grid_x = (cv + sh.tw - 1) / sh.tw;
    } else {
        sh.vec = 0;
        sh.tw = 32;
        sh.rows = kBnRows;
        sh.grid_x = (c + 31) / 32;
    }
    return sh;
}

static bool aligned16(const void *p) {
    return (uintptr_t)p % kVecBytes == 0; /* NULL (no z, no dz) counts as aligned */
}
template <typename T, typename... P> static bool bn_vec_ok(int c, P... ptrs) {
    return c > 0 && c % vec_t<T>::n == 0 && (aligned16(ptrs) && ...);
}

/* the finalize's block: S slices per channel (see above) */
static dim3 fin_block(int rchunks) {
    int sl = 1;
    while (sl < kFinSlices && sl * 8 < rchunks)
        sl <<= 1;
    return dim3(kThreads / sl, sl);
}

/* the vector apply's grid: kApplyRows rows per thread, grid.y <= 65535 (the
 * kernels stride over what is left) */
static dim3 apply_grid(const bn_shape &sh, long m) {
    long rb = (m + (long)sh.rows * kApplyRows - 1) / ((long)sh.rows * kApplyRows);
    if (rb > 65535) rb = 65535;
    return dim3(sh.grid_x, rb < 1 ? 1 : (unsigned)rb);
}

/* Every kernel's module loaded now: CUDA 12.2+ loads a kernel lazily at its
 * first launch, under the context's lock and after the device's queue
 * drains. With several GPUs in one process a first launch queued behind a
 * collective whose peer thread is itself blocked in the driver can hang
 * (NVIDIA/nccl#613); cudaFuncGetAttributes loads the function, as NCCL does
 * for its own kernels. Not in the CPU emulator (no driver there). */
#ifndef GB_CUDA_EMU_H
template <typename T> static cudaError_t preload_typed() {
    const void *fns[] = {
        (const void *)k_image_to_nhwc<T>,      (const void *)k_fill_normal<T>,
        (const void *)k_cast_from_f32<T>,      (const void *)k_cast_to_f32<T>,
        (const void *)k_maxpool_fwd<T>,        (const void *)k_maxpool_bwd<T>,
        (const void *)k_avgpool_fwd<T>,        (const void *)k_avgpool_bwd<T>,
        (const void *)k_softmax_ce<T>,         (const void *)k_finite_check<T>,
        (const void *)k_bn_fwd_stats<T>,       (const void *)k_bn_fwd_apply<T>,
        (const void *)k_bn_bwd_reduce<T>,      (const void *)k_bn_bwd_apply<T>,
        (const void *)k_bn_fwd_stats_v<T>,     (const void *)k_bn_fwd_apply_v<T, false>,
        (const void *)k_bn_bwd_reduce_v<T>,    (const void *)k_bn_bwd_apply_v<T>,
        (const void *)k_sgd<T, float>,         (const void *)k_sgd<T, __half>,
        (const void *)k_sgd<T, __nv_bfloat16>, (const void *)k_bn_fin_sums<T>,
        (const void *)k_bn_apply2<T>,          (const void *)k_bn_fwd_apply_v<T, true>};
    cudaFuncAttributes a;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        cudaError_t e = cudaFuncGetAttributes(&a, fns[i]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
#endif

extern "C" {

cudaError_t gb_k_preload(void) {
#ifndef GB_CUDA_EMU_H
    const void *fns[] = {(const void *)k_synth,           (const void *)k_loss_mean,
                         (const void *)k_colsum,          (const void *)k_bn_running,
                         (const void *)k_scaler_update,   (const void *)k_bn_fwd_finalize,
                         (const void *)k_bn_bwd_finalize, (const void *)k_ar_fill,
                         (const void *)k_ar_check};
    cudaFuncAttributes a;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        cudaError_t e = cudaFuncGetAttributes(&a, fns[i]);
        if (e != cudaSuccess) return e;
    }
    cudaError_t e = preload_typed<float>();
    if (e == cudaSuccess) e = preload_typed<__half>();
    if (e == cudaSuccess) e = preload_typed<__nv_bfloat16>();
    return e;
#else
    return cudaSuccess;
#endif
}

cudaError_t gb_k_image_to_nhwc(cudaStream_t s, gb_kdtype_t dt, const float *src, void *dst, int n,
                               int h, int w, int c_int) {
    size_t total = (size_t)n * h * w * c_int;
    DISPATCH(dt, T,
             k_image_to_nhwc<T>
             <<<grid_for(total), kThreads, 0, s>>>(src, (T *)dst, n, h, w, c_int));
    return cudaGetLastError();
}

cudaError_t gb_k_synth(cudaStream_t s, float *images, int32_t *labels, int n, int h, int w,
                       int classes, uint64_t seed) {
    size_t count = (size_t)n * 3 * h * w;
    unsigned g = grid_for(count > (size_t)n ? count : (size_t)n);
    k_synth<<<g, kThreads, 0, s>>>(images, labels, n, count, classes, seed);
    return cudaGetLastError();
}

cudaError_t gb_k_ar_fill(cudaStream_t s, float *buf, size_t n, int rank, long long fault_index) {
    k_ar_fill<<<grid_for(n), kThreads, 0, s>>>(buf, n, rank, fault_index);
    return cudaGetLastError();
}

cudaError_t gb_k_ar_check(cudaStream_t s, const float *buf, size_t n, gb_ar_want_t want,
                          unsigned int *bad) {
    k_ar_check<<<grid_for(n), kThreads, 0, s>>>(buf, n, want, bad);
    return cudaGetLastError();
}

cudaError_t gb_k_fill_normal(cudaStream_t s, gb_kdtype_t dt, void *dst, size_t n, uint64_t seed,
                             float scale) {
    DISPATCH(dt, T, k_fill_normal<T><<<grid_for(n), kThreads, 0, s>>>((T *)dst, n, seed, scale));
    return cudaGetLastError();
}

cudaError_t gb_k_cast_from_f32(cudaStream_t s, gb_kdtype_t dt, const float *src, void *dst,
                               size_t n) {
    DISPATCH(dt, T, k_cast_from_f32<T><<<grid_for(n), kThreads, 0, s>>>(src, (T *)dst, n));
    return cudaGetLastError();
}

cudaError_t gb_k_cast_to_f32(cudaStream_t s, gb_kdtype_t dt, const void *src, float *dst,
                             size_t n) {
    DISPATCH(dt, T, k_cast_to_f32<T><<<grid_for(n), kThreads, 0, s>>>((const T *)src, dst, n));
    return cudaGetLastError();
}

cudaError_t gb_k_maxpool_fwd(cudaStream_t s, gb_kdtype_t dt, const void *x, void *y, uint8_t *arg,
                             int n, int ih, int iw, int c, int oh, int ow, int k, int st, int p) {
    size_t total = (size_t)n * oh * ow * c;
    DISPATCH(dt, T,
             k_maxpool_fwd<T><<<grid_for(total), kThreads, 0, s>>>((const T *)x, (T *)y, arg, n, ih,
                                                                   iw, c, oh, ow, k, st, p));
    return cudaGetLastError();
}

cudaError_t gb_k_maxpool_bwd(cudaStream_t s, gb_kdtype_t dt, const void *dy, const uint8_t *arg,
                             void *dx, int n, int ih, int iw, int c, int oh, int ow, int k, int st,
                             int p) {
    size_t total = (size_t)n * ih * iw * c;
    DISPATCH(dt, T,
             k_maxpool_bwd<T><<<grid_for(total), kThreads, 0, s>>>((const T *)dy, arg, (T *)dx, n,
                                                                   ih, iw, c, oh, ow, k, st, p));
    return cudaGetLastError();
}

cudaError_t gb_k_avgpool_fwd(cudaStream_t s, gb_kdtype_t dt, const void *x, void *y, int n, int hw,
                             int c) {
    size_t total = (size_t)n * c;
    DISPATCH(dt, T,
             k_avgpool_fwd<T><<<grid_for(total), kThreads, 0, s>>>((const T *)x, (T *)y, n, hw, c));
    return cudaGetLastError();
}

cudaError_t gb_k_avgpool_bwd(cudaStream_t s, gb_kdtype_t dt, const void *dy, void *dx, int n,
                             int hw, int c) {
    size_t total = (size_t)n * hw * c;
    DISPATCH(dt, T,
             k_avgpool_bwd<T>
             <<<grid_for(total), kThreads, 0, s>>>((const T *)dy, (T *)dx, n, hw, c));
    return cudaGetLastError();
}

cudaError_t gb_k_softmax_ce(cudaStream_t s, gb_kdtype_t dt, const float *logits, const float *bias,
                            const int32_t *labels, int n, int k, int replicas,
                            const gb_scaler_state_t *scaler, float *dlogits, void *dlogits_dt,
                            float *row_loss) {
    unsigned blocks = (unsigned)(((size_t)n * 32 + kThreads - 1) / kThreads);
    if (replicas < 1) return cudaErrorInvalidValue;
    DISPATCH(dt, T,
             k_softmax_ce<T><<<blocks, kThreads, 0, s>>>(
                 logits, bias, labels, n, k, replicas, scaler, dlogits, (T *)dlogits_dt, row_loss));
    return cudaGetLastError();
}

cudaError_t gb_k_loss_mean(cudaStream_t s, const float *row_loss, int n, float *out) {
    k_loss_mean<<<1, kThreads, 0, s>>>(row_loss, n, out);
    return cudaGetLastError();
}

cudaError_t gb_k_colsum(cudaStream_t s, const float *a, int n, int k, float *out) {
    k_colsum<<<(k + kThreads - 1) / kThreads, kThreads, 0, s>>>(a, n, k, out);
    return cudaGetLastError();
}

cudaError_t gb_k_bn_running(cudaStream_t s, const gb_bn_run_entry_t *table, int n_entries,
                            int max_c, float eps, float momentum) {
    dim3 grid((max_c + kThreads - 1) / kThreads, n_entries);
    k_bn_running<<<grid, kThreads, 0, s>>>(table, eps, momentum);
    return cudaGetLastError();
}

cudaError_t gb_k_finite_check(cudaStream_t s, gb_kdtype_t dt, const void *a, size_t n,
                              int *found_inf) {
    DISPATCH(dt, T, k_finite_check<T><<<grid_for(n), kThreads, 0, s>>>((const T *)a, n, found_inf));
    return cudaGetLastError();
}

cudaError_t gb_k_sgd(cudaStream_t s, gb_kdtype_t gdt, float *w, float *buf, const void *grad,
                     void *wcopy, gb_kdtype_t cdt, size_t n, float lr, float mom, float wd,
                     const gb_scaler_state_t *scaler) {
    unsigned g = grid_for(n);
    if (!wcopy) {
        DISPATCH(gdt, G,
                 k_sgd<G, float><<<g, kThreads, 0, s>>>(w, buf, (const G *)grad, (float *)nullptr,
                                                        n, lr, mom, wd, scaler));
    } else {
        DISPATCH(gdt, G,
                 DISPATCH(cdt, C,
                          k_sgd<G, C><<<g, kThreads, 0, s>>>(w, buf, (const G *)grad, (C *)wcopy, n,
                                                             lr, mom, wd, scaler)));
    }
    return cudaGetLastError();
}

cudaError_t gb_k_scaler_update(cudaStream_t s, gb_scaler_state_t *st) {
    k_scaler_update<<<1, 1, 0, s>>>(st);
    return cudaGetLastError();
}

int gb_k_bn_rchunks(gb_kdtype_t dt, long m, int c, int sms) {
    int v = kVecBytes / (dt == GB_KDT_F32 ? 4 : 2);
    bn_shape sh = bn_shape_for(v, c, c % v == 0);
    /* one wave of kBnBlocksPerSm blocks per SM; >= 8 rows per thread */
    long want = ((long)kBnBlocksPerSm * sms + sh.grid_x - 1) / sh.grid_x;
    long cap = (m + 8L * sh.rows - 1) / (8L * sh.rows);
    if (want > cap) want = cap;
    if (want > 65535) want = 65535;
    return want < 1 ? 1 : (int)want;
}

cudaError_t gb_k_bn_fwd_stats(cudaStream_t s, gb_kdtype_t dt, const void *x, long m, int c,
                              int rchunks, float *partials) {
    DISPATCH(dt, T, {
        bn_shape sh = bn_shape_for(vec_t<T>::n, c, bn_vec_ok<T>(c, x));
        dim3 grid(sh.grid_x, rchunks), block(sh.tw, sh.rows);
        if (sh.vec)
            k_bn_fwd_stats_v<T><<<grid, block, 0, s>>>((const T *)x, m, c, rchunks, partials);
        else
            k_bn_fwd_stats<T><<<grid, block, 0, s>>>((const T *)x, m, c, rchunks, partials);
    });
    return cudaGetLastError();
}

cudaError_t gb_k_bn_fwd_finalize(cudaStream_t s, const float *partials, int rchunks, int c,
                                 const float *gamma, const float *beta, float eps, float *save_mean,
                                 float *save_invstd, float *coef) {
    dim3 block = fin_block(rchunks);
    k_bn_fwd_finalize<<<(c + block.x - 1) / block.x, block, 0, s>>>(
        partials, rchunks, c, gamma, beta, eps, save_mean, save_invstd, coef);
    return cudaGetLastError();
}

cudaError_t gb_k_bn_fwd_apply(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *z, void *y,
                              long m, int c, const float *coef, int relu) {
    size_t total = (size_t)m * c;
    DISPATCH(dt, T, {
        bn_shape sh = bn_shape_for(vec_t<T>::n, c, bn_vec_ok<T>(c, x, z, y));
        if (sh.vec)
            k_bn_fwd_apply_v<T, false><<<apply_grid(sh, m), dim3(sh.tw, sh.rows), 0, s>>>(
                (const T *)x, (const T *)z, (T *)y, m, c, coef, NULL, relu);
        else
            k_bn_fwd_apply<T><<<grid_for(total), kThreads, 0, s>>>((const T *)x, (const T *)z,
                                                                   (T *)y, m, c, coef, relu);
    });
    return cudaGetLastError();
}

cudaError_t gb_k_bn_bwd_reduce(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *y,
                               const void *dy, long m, int c, int relu, const void *pre,
                               const float *save_mean, int rchunks, float *partials) {
    DISPATCH(dt, T, {
        bn_shape sh = bn_shape_for(vec_t<T>::n, c, bn_vec_ok<T>(c, x, y, dy));
        dim3 grid(sh.grid_x, rchunks), block(sh.tw, sh.rows);
        if (sh.vec)
            k_bn_bwd_reduce_v<T><<<grid, block, 0, s>>>((const T *)x, (const T *)y, (const T *)dy,
                                                        m, c, relu, (const T *)pre, save_mean,
                                                        rchunks, partials);
        else
            k_bn_bwd_reduce<T><<<grid, block, 0, s>>>((const T *)x, (const T *)y, (const T *)dy, m,
                                                      c, relu, (const T *)pre, save_mean, rchunks,
                                                      partials);
    });
    return cudaGetLastError();
}

cudaError_t gb_k_bn_bwd_finalize(cudaStream_t s, const float *partials, int rchunks, int c, long m,
                                 const float *gamma, const float *save_invstd, float *dgamma,
                                 float *dbeta, float *coef) {
    dim3 block = fin_block(rchunks);
    k_bn_bwd_finalize<<<(c + block.x - 1) / block.x, block, 0, s>>>(
        partials, rchunks, c, m, gamma, save_invstd, dgamma, dbeta, coef);
    return cudaGetLastError();
}

cudaError_t gb_k_bn_bwd_apply(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *y,
                              const void *dy, void *dx, void *dz, long m, int c, int relu,
                              const void *pre, const float *save_mean, const float *coef) {
    size_t total = (size_t)m * c;
    DISPATCH(dt, T, {
        bn_shape sh = bn_shape_for(vec_t<T>::n, c, bn_vec_ok<T>(c, x, y, dy, dx, dz));
        if (sh.vec)
            k_bn_bwd_apply_v<T><<<apply_grid(sh, m), dim3(sh.tw, sh.rows), 0, s>>>(
                (const T *)x, (const T *)y, (const T *)dy, (T *)dx, (T *)dz, m, c, relu,
                (const T *)pre, save_mean, coef);
        else
            k_bn_bwd_apply<T><<<grid_for(total), kThreads, 0, s>>>(
                (const T *)x, (const T *)y, (const T *)dy, (T *)dx, (T *)dz, m, c, relu,
                (const T *)pre, save_mean, coef);
    });
    return cudaGetLastError();
}

cudaError_t gb_k_bn_fin_sums(cudaStream_t s, gb_kdtype_t dt, const float *sums, long m, int c,
                             const float *gamma, const float *beta, float eps, float *save_mean,
                             float *save_invstd, float *fcoef, void *pre, int *range) {
    DISPATCH(dt, T,
             k_bn_fin_sums<T>
             <<<(c + 127) / 128, 128, 0, s>>>(sums, (double)m, c, gamma, beta, eps, save_mean,
                                              save_invstd, fcoef, (T *)pre, range));
    return cudaGetLastError();
}

cudaError_t gb_k_bn_apply2(cudaStream_t s, gb_kdtype_t dt, const void *x, const void *z, void *y,
                           long m, int c, const float *fcoef, const float *zcoef, int relu) {
    size_t total = (size_t)m * c;
    DISPATCH(dt, T, {
        bn_shape sh = bn_shape_for(vec_t<T>::n, c, bn_vec_ok<T>(c, x, z, y));
        if (sh.vec)
            k_bn_fwd_apply_v<T, true><<<apply_grid(sh, m), dim3(sh.tw, sh.rows), 0, s>>>(
                (const T *)x, (const T *)z, (T *)y, m, c, fcoef, zcoef, relu);
        else
            k_bn_apply2<T><<<grid_for(total), kThreads, 0, s>>>((const T *)x, (const T *)z, (T *)y,
                                                                total, c, fcoef, zcoef, relu);
    });
    return cudaGetLastError();
}

} // extern "C"
