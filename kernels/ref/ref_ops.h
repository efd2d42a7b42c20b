/* ref_ops.h - naive double-precision reference ops: the ground truth of gpubench.
 *
 * Every op a ResNet training step needs, written as the plainest loops that
 * follow PyTorch's definition, in double, on plain NCHW arrays. Nothing here is
 * fast; everything here is meant to be read and believed. Each backward is
 * proven against central finite differences (tests/ref/), and the whole set is
 * compared with PyTorch in float64. The CPU (oneDNN) and CUDA engines are held
 * against these ops with tolerances derived from f32/bf16/fp16 rounding.
 *
 * Conventions:
 * - Layout NCHW (activations), KCRS = OIHW (conv weights), (out, in) for FC
 *   weights, as torch stores them.
 * - Buffers are caller-owned and must not overlap unless a function says so.
 *   Every output is overwritten, never accumulated into.
 * - Conv and pool shapes are validated once, by the *_init functions that
 *   fill a shape struct; the compute functions trust a shape init accepted.
 *   The other ops take their sizes as plain arguments, each >= 1.
 * - Output spatial sizes follow PyTorch: floor((in + 2*pad - k) / stride) + 1.
 */
#ifndef GB_REF_OPS_H
#define GB_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

/* PyTorch's BatchNorm2d defaults, which ResNet-50 uses. */
#define GB_REF_BN_EPS      1e-5
#define GB_REF_BN_MOMENTUM 0.1

/* floor((in + 2*pad - k) / stride) + 1, or -1 when in, k or stride < 1, pad < 0,
 * or the padded input is smaller than the kernel (torch raises then). */
int gb_ref_out_size(int in, int k, int stride, int pad);

/* ---- convolution (no bias, no groups, no dilation) ---------------------- */

typedef struct gb_ref_conv {
    int n, c, h, w;         /* input (N, C, H, W) */
    int k, r, s;            /* weight (K, C, R, S) */
    int stride_h, stride_w; /* >= 1 */
    int pad_h, pad_w;       /* zero padding on both sides, >= 0 */
    int p, q;               /* output (N, K, P, Q), filled by init */
} gb_ref_conv_t;

/* Fill *cv for a convolution with a square stride and padding. Returns 0, or -1
 * when a size is < 1, padding < 0 or the output would be empty. */
int gb_ref_conv_init(gb_ref_conv_t *cv, int n, int c, int h, int w, int k, int r, int s, int stride,
                     int pad);

/* Same with separate vertical and horizontal stride and padding. */
int gb_ref_conv_init2(gb_ref_conv_t *cv, int n, int c, int h, int w, int k, int r, int s,
                      int stride_h, int stride_w, int pad_h, int pad_w);

/* y[n,k,p,q] = sum_{c,r,s} x[n,c,p*sh-ph+r, q*sw-pw+s] * w[k,c,r,s]
 * (terms falling in the padding are zero). x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q). */
void gb_ref_conv2d_fwd(const gb_ref_conv_t *cv, const double *x, const double *w, double *y);

/* dx = d<dy, y>/dx: dy (N,K,P,Q), w (K,C,R,S) -> dx (N,C,H,W). */
void gb_ref_conv2d_bwd_data(const gb_ref_conv_t *cv, const double *dy, const double *w, double *dx);

/* dw = d<dy, y>/dw: x (N,C,H,W), dy (N,K,P,Q) -> dw (K,C,R,S). */
void gb_ref_conv2d_bwd_weights(const gb_ref_conv_t *cv, const double *x, const double *dy,
                               double *dw);

/* ---- batch norm, training mode ------------------------------------------ */

/* Forward over x (N, C, HW): per channel c, with M = N*HW values,
 *   mean[c] = sum x / M,  var[c] = sum (x - mean)^2 / M   (biased, as torch normalizes)
 *   y = gamma * (x - mean) / sqrt(var + eps) + beta.
 * mean and var (C) are outputs the backward needs. Returns -1 when M < 2
 * (torch refuses to train BN on one value per channel), else 0. */
int gb_ref_bn_fwd(int n, int c, int hw, const double *x, const double *gamma, const double *beta,
                  double eps, double *y, double *mean, double *var);

/* Running statistics exactly as torch updates them in training mode:
 *   rmean = (1 - m) * rmean + m * mean
 *   rvar  = (1 - m) * rvar  + m * var * M / (M - 1)   (unbiased)
 * with M = count values per channel (N*H*W). Returns -1 when count < 2, else 0. */
int gb_ref_bn_update_running(int c, long count, double momentum, const double *mean,
                             const double *var, double *rmean, double *rvar);

/* Backward of gb_ref_bn_fwd given its mean and var: with xhat = (x - mean) * istd,
 * istd = 1 / sqrt(var + eps),
 *   dbeta = sum dy,  dgamma = sum dy * xhat,
 *   dx = gamma * istd * (dy - dbeta / M - xhat * dgamma / M).
 * dgamma and dbeta (C) may be NULL. */
void gb_ref_bn_bwd(int n, int c, int hw, const double *x, const double *dy, const double *gamma,
                   const double *mean, const double *var, double eps, double *dx, double *dgamma,
                   double *dbeta);

/* ---- elementwise -------------------------------------------------------- */

/* y = max(x, 0). y may equal x. */
void gb_ref_relu_fwd(size_t n, const double *x, double *y);

/* dx = dy where y > 0, else 0 (torch's threshold_backward: the gradient at 0 is
 * 0). y is the forward output (or input: same sign test). dx may equal dy. */
void gb_ref_relu_bwd(size_t n, const double *y, const double *dy, double *dx);

/* y = a + b. y may equal a or b. Its backward is the identity to both inputs. */
void gb_ref_add_fwd(size_t n, const double *a, const double *b, double *y);

/* y = max(a + b, 0), the residual join of a bottleneck. y may equal a or b. */
void gb_ref_add_relu_fwd(size_t n, const double *a, const double *b, double *y);

/* Gradient of both summands of gb_ref_add_relu_fwd: ds = dy where y > 0, else 0.
 * ds may equal dy. */
void gb_ref_add_relu_bwd(size_t n, const double *y, const double *dy, double *ds);

/* ---- pooling ------------------------------------------------------------ */

typedef struct gb_ref_pool {
    int n, c, h, w;  /* input (N, C, H, W) */
    int kh, kw;      /* window */
    int stride, pad; /* padded cells never take part (max pool pads with -inf) */
    int p, q;        /* output (N, C, P, Q), filled by init */
} gb_ref_pool_t;

/* Fill *pl for a max pool as torch.nn.MaxPool2d(kernel, stride, pad) with
 * ceil_mode False. Returns -1 on a size < 1, pad < 0, pad > kernel / 2 (torch
 * refuses it; it also guarantees every window holds a real cell), or an empty
 * output; else 0. */
int gb_ref_pool_init(gb_ref_pool_t *pl, int n, int c, int h, int w, int kh, int kw, int stride,
                     int pad);

/* y = max over the real cells of each window. x (N,C,H,W) -> y (N,C,P,Q). */
void gb_ref_maxpool_fwd(const gb_ref_pool_t *pl, const double *x, double *y);

/* dx: each dy goes to the first maximum of its window in row-major order (a
 * later equal value does not take it: PyTorch's tie-breaking); windows that
 * overlap add up. Recomputes the argmax from x. */
void gb_ref_maxpool_bwd(const gb_ref_pool_t *pl, const double *x, const double *dy, double *dx);

/* Global average pool: y[n,c] = mean over HW of x[n,c,:]. x (N,C,HW) -> y (N,C). */
void gb_ref_gap_fwd(int n, int c, int hw, const double *x, double *y);

/* dx[n,c,i] = dy[n,c] / HW. */
void gb_ref_gap_bwd(int n, int c, int hw, const double *dy, double *dx);

/* ---- fully connected ---------------------------------------------------- */

/* y = x * W^T + b: x (N, IN), w (OUT, IN), b (OUT) or NULL, y (N, OUT). */
void gb_ref_fc_fwd(int n, int in, int out, const double *x, const double *w, const double *b,
                   double *y);

/* dx = dy * W (N, IN), dw = dy^T * x (OUT, IN), db = sum_n dy (OUT).
 * Any of dx, dw, db may be NULL. */
void gb_ref_fc_bwd(int n, int in, int out, const double *x, const double *w, const double *dy,
                   double *dx, double *dw, double *db);

/* ---- loss --------------------------------------------------------------- */

/* Softmax cross-entropy, mean over the batch (torch.nn.CrossEntropyLoss()):
 *   loss = (1/N) sum_n [ logsumexp(z[n,:]) - z[n, label[n]] ]
 * computed stably (the row maximum is subtracted before exp). When dlogits is
 * not NULL it receives (softmax(z) - onehot(label)) / N, shape (N, K).
 * Returns -1 (nothing written) when a label is outside [0, K), else 0. */
int gb_ref_softmax_xent(int n, int k, const double *logits, const int32_t *labels, double *loss,
                        double *dlogits);

/* ---- optimizer ---------------------------------------------------------- */

/* One torch.optim.SGD step (dampening 0, nesterov False) over n elements:
 *   d = g + wd * theta
 *   buf = d                   on the first step (first != 0)
 *   buf = momentum * buf + d  after
 *   theta = theta - lr * buf
 * With momentum 0, buf is not used (may be NULL) and theta -= lr * d.
 * grad is not modified. */
void gb_ref_sgd_step(size_t n, double *theta, const double *grad, double *buf, double lr,
                     double momentum, double weight_decay, int first);

#endif
