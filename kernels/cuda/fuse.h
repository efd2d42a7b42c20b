/* fuse.h - cuDNN's graph (backend) API from C for the batch-norm fusions of
 * the ResNet bottleneck (the ConvBNfprop / ConvBNwgrad patterns of cuDNN's
 * Graph-API guide, what MLPerf's ResNet entries run), one graph per conv:
 *
 *   GB_FUSE_CONV_STATS      y = conv(x, w); sum, sqsum = per-channel sums of y
 *   GB_FUSE_SBR_CONV_STATS  y = conv(relu(x * scale + bias), w); sum, sqsum
 *   GB_FUSE_SBR_WGRAD       dw = wgrad(relu(x * scale + bias), dy)
 *
 * x, w, y, dy, dw, scale and bias are fp16 or bf16 (scale/bias per input channel),
 * activations NHWC packed, weights KRSC packed, sums fp32 per output
 * channel. With the first conv's statistics finalized into scale and bias
 * (scale = gamma·invstd, bias = beta − mean·scale), a block's batch norm and
 * ReLU happen in the next conv's prologue and its statistics in the conv's
 * epilogue: no separate pass over the activation.
 *
 * Building (gb_fuse_new) finalizes the operation graph, which cuDNN does
 * without a GPU, so the CPU tests check every descriptor for every layer of
 * the plan. Planning (engine heuristics, execution plans, workspace) and
 * running need a cuDNN handle on a GPU. Not yet part of the training step:
 * test_cuda_fuse checks the graphs against a host reference and times them
 * against the unfused legacy calls on a GPU (bench/gpu/run.sh, `fuse`).
 */
#ifndef GB_CUDA_FUSE_H
#define GB_CUDA_FUSE_H

#include "engine.h"
#include "model.h"

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    GB_FUSE_CONV_STATS = 0,
    GB_FUSE_SBR_CONV_STATS = 1,
    GB_FUSE_SBR_WGRAD = 2,
} gb_fuse_kind_t;

/* The variant-pack slots (and the graph's tensor unique ids) */
enum {
    GB_FUSE_X = 1,
    GB_FUSE_W = 2,
    GB_FUSE_Y = 3,
    GB_FUSE_SUM = 4,
    GB_FUSE_SQSUM = 5,
    GB_FUSE_SCALE = 6,
    GB_FUSE_BIAS = 7,
    GB_FUSE_DY = 8,
    GB_FUSE_DW = 9,
    GB_FUSE_NSLOTS = 10
};

typedef struct gb_fuse gb_fuse_t;

const char *gb_fuse_kind_name(gb_fuse_kind_t kind);
gb_fuse_kind_t gb_fuse_kind(const gb_fuse_t *f);

/* The graph of `kind` for conv geometry g at batch n (g.c input channels as
 * stored), its tensors (all but the sums) of type dt: CUDNN_DATA_HALF, what
 * the graph-API guide documents these patterns for, or CUDNN_DATA_BFLOAT16,
 * which an engine may or may not take (gb_fuse_plan says). handle may be
 * NULL (no GPU: the operation graph is still built and finalized; only
 * gb_fuse_plan needs one). NULL with err set when cuDNN refuses a
 * descriptor ("conv layer3.0.conv2 sbr_conv_stats: ..."). */
gb_fuse_t *gb_fuse_new(gb_fuse_kind_t kind, const gb_conv_t *g, int n, cudnnDataType_t dt,
                       cudnnHandle_t handle, const char *name, char *err, size_t errlen);
void gb_fuse_destroy(gb_fuse_t **self_p);

/* Engine heuristics (mode A), then an execution plan for each engine
 * configuration that cuDNN finalizes and whose workspace fits ws_limit, up
 * to max_plans of them; when none of mode A's does, the same over cuDNN's
 * fallback list (gb_fuse_engine then says "fallback eng<n>"); a list whose
 * query fails counts as empty. Returns the number of plans (0: no engine
 * supports the graph here; err gives both lists' lengths and what cuDNN
 * said of the first refused engine or failed query). */
int gb_fuse_plan(gb_fuse_t *f, cudnnHandle_t handle, size_t ws_limit, int max_plans, char *err,
                 size_t errlen);
int gb_fuse_n_plans(const gb_fuse_t *f);
size_t gb_fuse_workspace(const gb_fuse_t *f, int plan);
/* the plan the next gb_fuse_run uses (0 after gb_fuse_plan) */
void gb_fuse_choose(gb_fuse_t *f, int plan);
int gb_fuse_chosen(const gb_fuse_t *f);
/* the engine's name as cuDNN reports it ("eng12_k5=..."), or "?" */
const char *gb_fuse_engine(const gb_fuse_t *f, int plan);

/* Run the chosen plan on the handle's stream. ptr[slot] for each slot the
 * kind uses (GB_FUSE_X..GB_FUSE_DW; others ignored), 16-byte aligned. */
int gb_fuse_run(gb_fuse_t *f, cudnnHandle_t handle, void *const ptr[GB_FUSE_NSLOTS],
                void *workspace, char *err, size_t errlen);

/* Which slots a kind reads or writes (1 << slot). */
unsigned gb_fuse_slots(gb_fuse_kind_t kind);

#endif
