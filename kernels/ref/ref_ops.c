/* ref_ops.c - the reference ops of ref_ops.h, as direct loops over the
 * definitions. Accumulation is in double in the natural loop order; no
 * blocking, no reassociation tricks, no shared subexpressions beyond the
 * obvious ones, so that reading a loop is checking it. */
#include "ref_ops.h"

#include <math.h>
#include <string.h>

int gb_ref_out_size(int in, int k, int stride, int pad) {
    if (in < 1 || k < 1 || stride < 1 || pad < 0) return -1;
    long span = (long)in + 2L * pad - k;
    if (span < 0) return -1;
    return (int)(span / stride) + 1;
}

/* ---- convolution -------------------------------------------------------- */

int gb_ref_conv_init2(gb_ref_conv_t *cv, int n, int c, int h, int w, int k, int r, int s,
                      int stride_h, int stride_w, int pad_h, int pad_w) {
    if (n < 1 || c < 1 || k < 1) return -1;
    int p = gb_ref_out_size(h, r, stride_h, pad_h);
    int q = gb_ref_out_size(w, s, stride_w, pad_w);
    if (p < 1 || q < 1) return -1;
    *cv = (gb_ref_conv_t){.n = n,
                          .c = c,
                          .h = h,
                          .w = w,
                          .k = k,
                          .r = r,
                          .s = s,
                          .stride_h = stride_h,
                          .stride_w = stride_w,
                          .pad_h = pad_h,
                          .pad_w = pad_w,
                          .p = p,
                          .q = q};
    return 0;
}

int gb_ref_conv_init(gb_ref_conv_t *cv, int n, int c, int h, int w, int k, int r, int s, int stride,
                     int pad) {
    return gb_ref_conv_init2(cv, n, c, h, w, k, r, s, stride, stride, pad, pad);
}

/* Index helpers: row-major offsets of a 4-D tensor. */
static inline size_t at4(int d1, int d2, int d3, int i0, int i1, int i2, int i3) {
    return (((size_t)i0 * d1 + i1) * d2 + i2) * d3 + i3;
}

void gb_ref_conv2d_fwd(const gb_ref_conv_t *cv, const double *x, const double *w, double *y) {
    for (int n = 0; n < cv->n; n++)
        for (int k = 0; k < cv->k; k++)
            for (int p = 0; p < cv->p; p++)
                for (int q = 0; q < cv->q; q++) {
                    double acc = 0.0;
                    for (int c = 0; c < cv->c; c++)
                        for (int r = 0; r < cv->r; r++) {
                            int hi = p * cv->stride_h - cv->pad_h + r;
                            if (hi < 0 || hi >= cv->h) continue; /* zero padding */
                            for (int s = 0; s < cv->s; s++) {
                                int wi = q * cv->stride_w - cv->pad_w + s;
                                if (wi < 0 || wi >= cv->w) continue;
                                acc += x[at4(cv->c, cv->h, cv->w, n, c, hi, wi)] *
                                       w[at4(cv->c, cv->r, cv->s, k, c, r, s)];
                            }
                        }
                    y[at4(cv->k, cv->p, cv->q, n, k, p, q)] = acc;
                }
}

/* The two backward passes scatter along exactly the index map of the forward:
 * every (output, weight) pair the forward multiplied contributes once. */
void gb_ref_conv2d_bwd_data(const gb_ref_conv_t *cv, const double *dy, const double *w,
                            double *dx) {
    memset(dx, 0, sizeof(double) * (size_t)cv->n * cv->c * cv->h * cv->w);
    for (int n = 0; n < cv->n; n++)
        for (int k = 0; k < cv->k; k++)
            for (int p = 0; p < cv->p; p++)
                for (int q = 0; q < cv->q; q++) {
                    double g = dy[at4(cv->k, cv->p, cv->q, n, k, p, q)];
                    for (int c = 0; c < cv->c; c++)
                        for (int r = 0; r < cv->r; r++) {
                            int hi = p * cv->stride_h - cv->pad_h + r;
                            if (hi < 0 || hi >= cv->h) continue;
                            for (int s = 0; s < cv->s; s++) {
                                int wi = q * cv->stride_w - cv->pad_w + s;
                                if (wi < 0 || wi >= cv->w) continue;
                                dx[at4(cv->c, cv->h, cv->w, n, c, hi, wi)] +=
                                    g * w[at4(cv->c, cv->r, cv->s, k, c, r, s)];
                            }
                        }
                }
}

void gb_ref_conv2d_bwd_weights(const gb_ref_conv_t *cv, const double *x, const double *dy,
                               double *dw) {
    memset(dw, 0, sizeof(double) * (size_t)cv->k * cv->c * cv->r * cv->s);
    for (int n = 0; n < cv->n; n++)
        for (int k = 0; k < cv->k; k++)
            for (int p = 0; p < cv->p; p++)
                for (int q = 0; q < cv->q; q++) {
                    double g = dy[at4(cv->k, cv->p, cv->q, n, k, p, q)];
                    for (int c = 0; c < cv->c; c++)
                        for (int r = 0; r < cv->r; r++) {
                            int hi = p * cv->stride_h - cv->pad_h + r;
                            if (hi < 0 || hi >= cv->h) continue;
                            for (int s = 0; s < cv->s; s++) {
                                int wi = q * cv->stride_w - cv->pad_w + s;
                                if (wi < 0 || wi >= cv->w) continue;
                                dw[at4(cv->c, cv->r, cv->s, k, c, r, s)] +=
                                    g * x[at4(cv->c, cv->h, cv->w, n, c, hi, wi)];
                            }
                        }
                }
}

/* ---- batch norm --------------------------------------------------------- */

/* Element i of channel ch of image b in an (N, C, HW) tensor. */
static inline size_t at3(int c, int hw, int b, int ch, int i) {
    return ((size_t)b * c + ch) * hw + i;
}

int gb_ref_bn_fwd(int n, int c, int hw, const double *x, const double *gamma, const double *beta,
                  double eps, double *y, double *mean, double *var) {
    long m = (long)n * hw;
    if (m < 2) return -1;
    for (int ch = 0; ch < c; ch++) {
        double sum = 0.0;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < hw; i++)
                sum += x[at3(c, hw, b, ch, i)];
        double mu = sum / (double)m;
        /* Two passes: the variance from centred values, not E[x^2] - E[x]^2. */
        double ss = 0.0;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < hw; i++) {
                double d = x[at3(c, hw, b, ch, i)] - mu;
                ss += d * d;
            }
        double v = ss / (double)m;
        double istd = 1.0 / sqrt(v + eps);
        for (int b = 0; b < n; b++)
            for (int i = 0; i < hw; i++) {
                size_t j = at3(c, hw, b, ch, i);
                y[j] = gamma[ch] * (x[j] - mu) * istd + beta[ch];
            }
        mean[ch] = mu;
        var[ch] = v;
    }
    return 0;
}

int gb_ref_bn_update_running(int c, long count, double momentum, const double *mean,
                             const double *var, double *rmean, double *rvar) {
    if (count < 2) return -1;
    double unbias = (double)count / (double)(count - 1);
    for (int ch = 0; ch < c; ch++) {
        rmean[ch] = (1.0 - momentum) * rmean[ch] + momentum * mean[ch];
        rvar[ch] = (1.0 - momentum) * rvar[ch] + momentum * var[ch] * unbias;
    }
    return 0;
}

void gb_ref_bn_bwd(int n, int c, int hw, const double *x, const double *dy, const double *gamma,
                   const double *mean, const double *var, double eps, double *dx, double *dgamma,
                   double *dbeta) {
    double m = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double istd = 1.0 / sqrt(var[ch] + eps);
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < hw; i++) {
                size_t j = at3(c, hw, b, ch, i);
                double xhat = (x[j] - mean[ch]) * istd;
                sum_dy += dy[j];
                sum_dy_xhat += dy[j] * xhat;
            }
        /* y depends on x directly and through mean and var; the two sums are
         * those dependencies (see the derivation in docs/ref.md). */
        for (int b = 0; b < n; b++)
            for (int i = 0; i < hw; i++) {
                size_t j = at3(c, hw, b, ch, i);
                double xhat = (x[j] - mean[ch]) * istd;
                dx[j] = gamma[ch] * istd * (dy[j] - sum_dy / m - xhat * sum_dy_xhat / m);
            }
        if (dgamma) dgamma[ch] = sum_dy_xhat;
        if (dbeta) dbeta[ch] = sum_dy;
    }
}

/* ---- elementwise -------------------------------------------------------- */

void gb_ref_relu_fwd(size_t n, const double *x, double *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0 ? x[i] : 0.0;
}

void gb_ref_relu_bwd(size_t n, const double *y, const double *dy, double *dx) {
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0 ? dy[i] : 0.0;
}

void gb_ref_add_fwd(size_t n, const double *a, const double *b, double *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void gb_ref_add_relu_fwd(size_t n, const double *a, const double *b, double *y) {
    for (size_t i = 0; i < n; i++) {
        double s = a[i] + b[i];
        y[i] = s > 0.0 ? s : 0.0;
    }
}

void gb_ref_add_relu_bwd(size_t n, const double *y, const double *dy, double *ds) {
    gb_ref_relu_bwd(n, y, dy, ds);
}

/* ---- pooling ------------------------------------------------------------ */

int gb_ref_pool_init(gb_ref_pool_t *pl, int n, int c, int h, int w, int kh, int kw, int stride,
                     int pad) {
    if (n < 1 || c < 1) return -1;
    if (kh < 1 || kw < 1 || pad < 0 || 2 * pad > kh || 2 * pad > kw) return -1;
    int p = gb_ref_out_size(h, kh, stride, pad);
    int q = gb_ref_out_size(w, kw, stride, pad);
    if (p < 1 || q < 1) return -1;
    *pl = (gb_ref_pool_t){.n = n,
                          .c = c,
                          .h = h,
                          .w = w,
                          .kh = kh,
                          .kw = kw,
                          .stride = stride,
                          .pad = pad,
                          .p = p,
                          .q = q};
    return 0;
}

/* Offset (within one (n, c) plane) of the first maximum of window (p, q) in
 * row-major order: a value replaces the running maximum only when strictly
 * greater. Padded cells are skipped, never compared. */
static size_t pool_argmax(const gb_ref_pool_t *pl, const double *plane, int p, int q) {
    size_t best = 0;
    int found = 0;
    for (int i = 0; i < pl->kh; i++) {
        int hi = p * pl->stride - pl->pad + i;
        if (hi < 0 || hi >= pl->h) continue;
        for (int j = 0; j < pl->kw; j++) {
            int wi = q * pl->stride - pl->pad + j;
            if (wi < 0 || wi >= pl->w) continue;
            size_t off = (size_t)hi * pl->w + wi;
            if (!found || plane[off] > plane[best]) {
                best = off;
                found = 1;
            }
        }
    }
    return best; /* init guarantees every window holds a real cell */
}

void gb_ref_maxpool_fwd(const gb_ref_pool_t *pl, const double *x, double *y) {
    size_t in_plane = (size_t)pl->h * pl->w, out_plane = (size_t)pl->p * pl->q;
    for (size_t nc = 0; nc < (size_t)pl->n * pl->c; nc++) {
        const double *xp = x + nc * in_plane;
        for (int p = 0; p < pl->p; p++)
            for (int q = 0; q < pl->q; q++)
                y[nc * out_plane + (size_t)p * pl->q + q] = xp[pool_argmax(pl, xp, p, q)];
    }
}

void gb_ref_maxpool_bwd(const gb_ref_pool_t *pl, const double *x, const double *dy, double *dx) {
    size_t in_plane = (size_t)pl->h * pl->w, out_plane = (size_t)pl->p * pl->q;
    memset(dx, 0, sizeof(double) * (size_t)pl->n * pl->c * in_plane);
    for (size_t nc = 0; nc < (size_t)pl->n * pl->c; nc++) {
        const double *xp = x + nc * in_plane;
        for (int p = 0; p < pl->p; p++)
            for (int q = 0; q < pl->q; q++)
                dx[nc * in_plane + pool_argmax(pl, xp, p, q)] +=
                    dy[nc * out_plane + (size_t)p * pl->q + q];
    }
}

void gb_ref_gap_fwd(int n, int c, int hw, const double *x, double *y) {
    for (size_t nc = 0; nc < (size_t)n * c; nc++) {
        double sum = 0.0;
        for (int i = 0; i < hw; i++)
            sum += x[nc * hw + i];
        y[nc] = sum / hw;
    }
}

void gb_ref_gap_bwd(int n, int c, int hw, const double *dy, double *dx) {
    for (size_t nc = 0; nc < (size_t)n * c; nc++)
        for (int i = 0; i < hw; i++)
            dx[nc * hw + i] = dy[nc] / hw;
}

/* ---- fully connected ---------------------------------------------------- */

void gb_ref_fc_fwd(int n, int in, int out, const double *x, const double *w, const double *b,
                   double *y) {
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < in; j++)
                acc += x[(size_t)i * in + j] * w[(size_t)o * in + j];
            y[(size_t)i * out + o] = acc;
        }
}

void gb_ref_fc_bwd(int n, int in, int out, const double *x, const double *w, const double *dy,
                   double *dx, double *dw, double *db) {
    if (dx)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < in; j++) {
                double acc = 0.0;
                for (int o = 0; o < out; o++)
                    acc += dy[(size_t)i * out + o] * w[(size_t)o * in + j];
                dx[(size_t)i * in + j] = acc;
            }
    if (dw)
        for (int o = 0; o < out; o++)
            for (int j = 0; j < in; j++) {
                double acc = 0.0;
                for (int i = 0; i < n; i++)
                    acc += dy[(size_t)i * out + o] * x[(size_t)i * in + j];
                dw[(size_t)o * in + j] = acc;
            }
    if (db)
        for (int o = 0; o < out; o++) {
            double acc = 0.0;
            for (int i = 0; i < n; i++)
                acc += dy[(size_t)i * out + o];
            db[o] = acc;
        }
}

/* ---- loss --------------------------------------------------------------- */

int gb_ref_softmax_xent(int n, int k, const double *logits, const int32_t *labels, double *loss,
                        double *dlogits) {
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k) return -1;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const double *z = logits + (size_t)i * k;
        double zmax = z[0];
        for (int j = 1; j < k; j++)
            if (z[j] > zmax) zmax = z[j];
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp(z[j] - zmax);
        /* -log_softmax(z)[label] = log(sum) - (z[label] - zmax): every term is
         * formed from shifted logits, so nothing of size |z| is added to
         * something small (as zmax + log(sum) would). */
        total += log(sum) - (z[labels[i]] - zmax);
        if (dlogits)
            for (int j = 0; j < k; j++)
                dlogits[(size_t)i * k + j] =
                    (exp(z[j] - zmax) / sum - (j == labels[i] ? 1.0 : 0.0)) / (double)n;
    }
    *loss = total / (double)n;
    return 0;
}

/* ---- optimizer ---------------------------------------------------------- */

void gb_ref_sgd_step(size_t n, double *theta, const double *grad, double *buf, double lr,
                     double momentum, double weight_decay, int first) {
    for (size_t i = 0; i < n; i++) {
        double d = grad[i] + weight_decay * theta[i];
        if (momentum != 0.0) {
            buf[i] = first ? d : momentum * buf[i] + d;
            d = buf[i];
        }
        theta[i] -= lr * d;
    }
}
