/* ref_net.h - a whole ResNet training step in double, built from ref_ops.
 *
 * The reference the engines (and the data-parallel equivalence tests) hold a
 * full step against: forward over the model description of model.h
 * (torchvision's ResNet with Bottleneck blocks; BN in training mode, or the
 * identity when cfg.bn == 0), mean softmax cross-entropy, backward to every
 * parameter (and optionally the image), running statistics updated as torch
 * does, and a torch.optim.SGD step over the whole parameter slab.
 *
 * Slabs are the canonical ones of model.h, widened to double: params
 * (m->n_params), buffers (m->n_buffers), gradients and momentum like params.
 * It is naive and slow (direct loops): meant for tiny models (layers 1,1,1,1,
 * base width 4..8, images 16..32) and a few images. Activations for `batch`
 * images are allocated once by gb_ref_net_new.
 */
#ifndef GB_REF_NET_H
#define GB_REF_NET_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_ref_net gb_ref_net_t;

/* A reference network for model m (borrowed: it must outlive the net) and
 * `batch` images per step. Returns NULL with a reason in err when out of
 * memory, batch < 1, or a batch-norm layer would see fewer than 2 values per
 * channel (batch * H * W < 2: torch refuses to train that). */
gb_ref_net_t *gb_ref_net_new(const gb_model_t *m, int batch, char *err, size_t errlen);

/* Free the net and set *self_p to NULL; no-op on NULL. */
void gb_ref_net_destroy(gb_ref_net_t **self_p);

/* Forward in training mode and the mean cross-entropy of the batch, into *loss.
 *   params  (n_params)          canonical parameters
 *   buffers (n_buffers) or NULL running statistics, updated in place as torch
 *                               does (momentum 0.1, unbiased variance) when given
 *   images  (batch, 3, H, W)    NCHW
 *   labels  (batch)             in [0, n_classes)
 *   grads   (n_params) or NULL  d loss / d params, overwritten (NULL: forward only)
 *   dimages (batch,3,H,W) or NULL  d loss / d images, overwritten (only with grads)
 * BN normalizes with the batch statistics, so the loss does not depend on
 * buffers. Returns 0, or -1 with a reason in err (a label out of range). */
int gb_ref_net_loss(gb_ref_net_t *net, const double *params, double *buffers, const double *images,
                    const int32_t *labels, double *loss, double *grads, double *dimages, char *err,
                    size_t errlen);

/* One training step as `loss.backward(); opt.step()` in torch with
 * torch.optim.SGD(params, lr, momentum, weight_decay=wd) (weight decay on every
 * parameter, BN and bias included): gb_ref_net_loss with the running
 * statistics update, then gb_ref_sgd_step over the whole slab.
 *   mom   (n_params)  momentum buffers; *step == 0 creates them from this step
 *   *step             optimizer steps taken before this one; incremented
 *   grads (n_params) or NULL  receives this step's gradient
 * Returns 0, or -1 with a reason in err (nothing updated then). */
int gb_ref_net_train_step(gb_ref_net_t *net, double *params, double *buffers, double *mom,
                          int64_t *step, const double *images, const int32_t *labels, double lr,
                          double momentum, double weight_decay, double *loss, double *grads,
                          char *err, size_t errlen);

/* dst[i] = src[i]: a float slab (canonical, as the engines keep it) in double. */
void gb_ref_widen(const float *src, double *dst, size_t n);

#endif
