/* model.h - the one ResNet description every backend consumes.
 *
 * ResNet-50 v1.5 exactly as torchvision builds it: 7x7/2 stem conv (no bias),
 * BN, ReLU, 3x3/2 max pool (pad 1), four stages of bottleneck blocks (3-4-6-3)
 * with the stride on the 3x3 conv and a 1x1/stride projection + BN on the first
 * block of every stage, global average pool, fully connected layer with bias.
 * The stage depths, the base width and the class count are parameters so tests
 * can build small variants with the same naming; `bn = 0` builds the variant
 * without batch norm used by the data-parallel equivalence tests (each BN
 * becomes the identity and has no tensors).
 *
 * Every trainable tensor lives in one contiguous parameter slab and every
 * running statistic in one buffer slab, in the *canonical* layout: the order
 * and shapes of torchvision's state_dict (conv weights (K, C, R, S) OIHW,
 * fc.weight (classes, features)). Backends may keep their own internal layouts
 * and convert at the edges; the canonical slab is what is loaded, saved,
 * compared and checkpointed. `num_batches_tracked` is not in any slab: it is
 * one counter per model instance (all BN layers advance together).
 *
 * Invariants: tensors[] is in state_dict order; offsets are in elements of
 * float; params and buffers do not overlap; every spatial size follows
 * PyTorch's floor((i + 2p - k) / s) + 1.
 */
#ifndef GB_MODEL_H
#define GB_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define GB_MAX_STAGES 4
#define GB_MAX_BLOCKS 64
#define GB_NAME_LEN   48

typedef enum {
    GB_ROLE_CONV_W = 0, /* (K, C, R, S) */
    GB_ROLE_BN_W,       /* (C)  gamma */
    GB_ROLE_BN_B,       /* (C)  beta */
    GB_ROLE_FC_W,       /* (classes, features) */
    GB_ROLE_FC_B,       /* (classes) */
    GB_ROLE_BN_RMEAN,   /* (C)  buffer */
    GB_ROLE_BN_RVAR,    /* (C)  buffer, unbiased as torch keeps it */
} gb_role_t;

typedef struct gb_tensor_info {
    char name[GB_NAME_LEN]; /* torchvision state_dict name, e.g. "layer1.0.bn2.running_var" */
    gb_role_t role;
    int is_param; /* 1: in the parameter slab (has a gradient and momentum); 0: buffer slab */
    int ndim;
    int shape[4];
    size_t offset; /* in elements, into the parameter or buffer slab */
    size_t numel;
} gb_tensor_info_t;

/* One convolution (no bias, as in torchvision's ResNet). */
typedef struct gb_conv {
    int c, k;        /* input and output channels */
    int kh, kw;      /* kernel */
    int stride, pad; /* symmetric padding */
    int ih, iw;      /* input spatial size */
    int oh, ow;      /* output spatial size */
    int w;           /* tensor index of the weight (K, C, kh, kw) */
} gb_conv_t;

/* One batch norm over c channels; indices are -1 when the model has no BN. */
typedef struct gb_bn {
    int c;
    int h, w; /* spatial size it normalizes over (with the batch) */
    int weight, bias, rmean, rvar;
} gb_bn_t;

/* Bottleneck: conv1 1x1 -> bn1 -> relu -> conv2 3x3/stride -> bn2 -> relu ->
 * conv3 1x1 -> bn3 -> (+ shortcut) -> relu. shortcut = x or down_bn(down(x)). */
typedef struct gb_block {
    char prefix[16]; /* "layer2.0" */
    int stage, index;
    int in_c, mid_c, out_c, stride;
    int ih, iw, oh, ow;
    gb_conv_t conv1, conv2, conv3, down;
    gb_bn_t bn1, bn2, bn3, down_bn;
    int has_down;
} gb_block_t;

typedef struct gb_model_config {
    int image_h, image_w;      /* input size; torchvision accepts any size >= 1 */
    int n_classes;             /* 1000 for ResNet-50 */
    int layers[GB_MAX_STAGES]; /* blocks per stage: 3,4,6,3 */
    int base_width;            /* 64: stem channels and stage-1 mid width */
    int bn;                    /* 1: batch norm (ResNet-50); 0: no-BN variant */
} gb_model_config_t;

typedef struct gb_model {
    gb_model_config_t cfg;
    int in_c; /* 3 */
    gb_conv_t stem;
    gb_bn_t stem_bn;
    int pool_k, pool_stride, pool_pad; /* 3, 2, 1 */
    int pool_ih, pool_iw, pool_oh, pool_ow;
    gb_block_t blocks[GB_MAX_BLOCKS];
    int n_blocks;
    int feat_c, feat_h, feat_w; /* tensor entering the global average pool */
    int fc_w, fc_b;             /* tensor indices */
    gb_tensor_info_t *tensors;
    int n_tensors;
    size_t n_params;    /* floats in the parameter slab */
    size_t n_buffers;   /* floats in the buffer slab */
    double fwd_flops;   /* forward FLOPs per image (convs + fc, 2 per MAC) */
    double train_flops; /* forward + backward FLOPs per image (stem has no data gradient) */
    size_t conv_out;    /* floats every convolution outputs per image, summed: a lower
                           bound of the activations a training step keeps */
} gb_model_t;

/* Fill cfg with ResNet-50 v1.5 at image_size x image_size, 1000 classes. */
void gb_model_config_resnet50(gb_model_config_t *cfg, int image_size);

/* Build the description. Returns NULL (and writes a reason into err) when the
 * configuration is out of range. Caller owns the model. */
gb_model_t *gb_model_new(const gb_model_config_t *cfg, char *err, size_t errlen);

/* Free the model and set *self_p to NULL; no-op on NULL. */
void gb_model_destroy(gb_model_t **self_p);

/* Index of the tensor named `name` (torchvision spelling) or -1. */
int gb_model_find(const gb_model_t *m, const char *name);

/* Initialize the canonical slabs as torchvision does: convs kaiming_normal_
 * (fan_out, relu), BN gamma 1 / beta 0, running mean 0 / var 1, fc weight and
 * bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Deterministic in `seed`. */
void gb_model_init(const gb_model_t *m, float *params, float *buffers, uint64_t seed);

/* dst[j] = (float)(scale * gb_rng_normal(r)) for j < n, the same values as
 * that loop gives (the uniforms drawn in order, from one stream), with the
 * transform (log and cos, most of the time) on every core where gb_model
 * is built with OpenMP: weight init of ResNet-50 (25.5 M normals) took
 * about 0.8 s on one core. */
struct gb_rng;
void gb_rng_fill_normal(struct gb_rng *r, float *dst, size_t n, double scale);

/* Deterministic synthetic batch: images (n, 3, h, w) ~ N(0, 1) NCHW, labels
 * uniform in [0, n_classes). Same seed, same batch, on every backend. */
void gb_model_synth_batch(const gb_model_t *m, int n, uint64_t seed, float *images,
                          int32_t *labels);

#endif
