/* Winograd F(4x4, 3x3) for the 3x3, stride-1, pad-1 f32 convolutions of
 * ResNet-50 on AVX2 machines, where oneDNN 2.6 has no Winograd (it has one
 * only for AVX-512). Activations are nChw8c, weights OIhw8i8o: the layouts
 * oneDNN's jit:avx2 convolutions choose, so these passes drop in beside
 * them. One AVX2 register holds the 8 channels of a block.
 *
 * Each pass is transform -> 36 independent matrix products (dnnl_sgemm, one
 * per point of the 6x6 transformed tile) -> inverse transform:
 *   forward        dst = A^T [ (G g G^T) . (B^T d B) ] A      per 4x4 tile
 *   backward data  the forward pass on diff_dst with the flipped kernel
 *                  (channels swapped)
 *   backward wts   dW = G^T [ sum over tiles (A dy A^T) . (B^T d B) ] G
 * (the last follows from the forward identity: it is the derivative of the
 * trilinear form sum_j (A y')_j (G g)_j (B^T d)_j with respect to g).
 * The matrices are Lavin and Gray's, "Fast Algorithms for Convolutional
 * Neural Networks" (2016), points 0, +-1, +-2, inf. */
#ifndef GB_WINO_H
#define GB_WINO_H

#include <stddef.h>

/* Can this CPU run these kernels (AVX2 and FMA)? */
int gb_wino_cpu_ok(void);

/* Transformed weights: 36 * c * k floats, laid out [36][c][k]. */
size_t gb_wino_u_floats(int c, int k);
/* Scratch for one convolution of this shape (all three passes). */
size_t gb_wino_scratch_floats(int n, int c, int k, int h, int w);

/* w: OIhw8i8o, k output and c input channels (both multiples of 8).
 * flip: transform the kernel rotated by 180 degrees (for backward data).
 * u: [36][c][k]. */
void gb_wino_weights(const float *w, int k, int c, int flip, float *u, int threads);

/* Forward: src nChw8c (n, c, h, w) -> dst nChw8c (n, k, h, w), u from
 * gb_wino_weights(flip 0). */
void gb_wino_fwd(const float *src, const float *u, float *dst, int n, int c, int k, int h, int w,
                 float *scratch, int threads);
/* Backward data: diff_dst (n, k, h, w) -> diff_src (n, c, h, w), u from
 * gb_wino_weights(flip 1). */
void gb_wino_bwd_data(const float *diff_dst, const float *u, float *diff_src, int n, int c, int k,
                      int h, int w, float *scratch, int threads);
/* Backward weights: diff_w (OIhw8i8o, overwritten) from src and diff_dst. */
void gb_wino_bwd_weights(const float *src, const float *diff_dst, float *diff_w, int n, int c,
                         int k, int h, int w, float *scratch, int threads);

#endif
