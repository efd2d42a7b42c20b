/* exec.h - the layer operations one training step is made of, as a table an
 * executor fills: the CUDA executor (cuda_exec.c: cuDNN, cuBLAS, our kernels)
 * and its host twin in double (tests/cuda/host_exec.c). net.c strings them
 * into a step once, so the GPU runs exactly the wiring the CPU tests check.
 *
 * Every op works on the activations and gradient buffers of the plan (plan.h)
 * inside the executor's arena, returns 0 or -1 with a one-line reason in
 * ex->err, and may only enqueue work (the CUDA executor captures a whole step
 * in a graph): nothing is allocated, nothing waits, until step_end.
 * Parameters, gradients, optimizer state, saved statistics and the batch live
 * inside the executor; the host-side slabs it exchanges are the plan's
 * internal master layout [A | B] in fp32 and the canonical buffer slab.
 */
#ifndef GB_CUDA_EXEC_H
#define GB_CUDA_EXEC_H

#include "engine.h"
#include "plan.h"

typedef struct gb_exec gb_exec_t;

typedef struct gb_exec_ops {
    const char *name;
    void (*destroy)(gb_exec_t **self_p);
    /* state in and out (host memory, synchronous) */
    int (*load_params)(gb_exec_t *ex, const float *master, const float *buffers);
    int (*store_params)(gb_exec_t *ex, float *master, float *buffers);
    /* the last step's raw gradients, fp32 internal layout, and the loss scale
     * they carry (1 unless fp16) */
    int (*store_grads)(gb_exec_t *ex, float *grads, float *scale);
    /* NCHW fp32 images and labels in [0, classes); both NULL: a synthetic
     * batch drawn from `seed` with cuda_math.h's counter-based generator */
    int (*load_batch)(gb_exec_t *ex, const float *images, const int32_t *labels, uint64_t seed);
    /* the step's layer ops; pointers are into the arena (act/grad buffers) */
    int (*step_begin)(gb_exec_t *ex);
    int (*conv_fwd)(gb_exec_t *ex, int ci, const void *x, void *y);
    int (*conv_bwd_data)(gb_exec_t *ex, int ci, const void *dy, void *dx, int accumulate);
    int (*conv_bwd_filter)(gb_exec_t *ex, int ci, const void *x, const void *dy);
    /* y = relu?(bn(x) + z); z NULL unless the plan's bn has a residual */
    int (*bn_fwd)(gb_exec_t *ex, int bi, const void *x, const void *z, void *y);
    /* from y (post activation; NULL: recomputed, see below) and dy: dx, and
     * dz (the residual's gradient) */
    int (*bn_bwd)(gb_exec_t *ex, int bi, const void *x, const void *y, const void *dy, void *dx,
                  void *dz);
    /* The fused step (ex->fused; net.c): batch norm's statistics from the
     * conv's epilogue, its scale, bias and ReLU in the next conv's prologue.
     * conv_stats: y = conv(pre_bn >= 0 ? relu(bn_pre(x)) : x), and the
     * per-channel sums of y for batch norm stats_bn; bn_finalize: stats_bn's
     * batch mean and variance (saved as bn_fwd saves them), its scale and
     * bias; bn_apply: y = relu(bn(x) + (zbn >= 0 ? bn_zbn(z) : z)) with both
     * finalized; conv_bwd_filter_pre: the weight gradient of conv ci on
     * relu(bn_pre(x)). bn_bwd with y NULL takes the ReLU's mask from
     * bn(x) recomputed (the fused step never stores it). */
    int (*conv_stats)(gb_exec_t *ex, int ci, const void *x, int pre_bn, void *y, int stats_bn);
    int (*bn_finalize)(gb_exec_t *ex, int bi);
    int (*bn_apply)(gb_exec_t *ex, int bi, const void *x, const void *z, int zbn, void *y);
    int (*conv_bwd_filter_pre)(gb_exec_t *ex, int ci, const void *x, int pre_bn, const void *dy);
    int (*maxpool_fwd)(gb_exec_t *ex, const void *x, void *y);
    int (*maxpool_bwd)(gb_exec_t *ex, const void *dy, void *dx);
    int (*avgpool_fwd)(gb_exec_t *ex, const void *x, void *y);
    int (*avgpool_bwd)(gb_exec_t *ex, const void *dy, void *dx);
    /* fc forward, softmax cross-entropy (mean), fc backward into dfeat */
    int (*head)(gb_exec_t *ex, const void *feat, void *dfeat);
    int (*bn_running)(gb_exec_t *ex); /* every BN's running statistics */
    /* data parallel (NULL where the executor has none): the gradient of
     * model tensor `tensor` has been enqueued, so its bucket may go */
    int (*grad_done)(gb_exec_t *ex, int tensor);
    int (*update)(gb_exec_t *ex); /* overflow check, SGD, loss scale */
    int (*step_end)(gb_exec_t *ex, gb_step_out_t *out);
    /* CUDA graphs (NULL where the executor has none): capture_end returns 0
     * when an executable graph exists; replay runs and times one step. */
    int (*capture_begin)(gb_exec_t *ex);
    int (*capture_end)(gb_exec_t *ex, int ok);
    int (*replay)(gb_exec_t *ex, gb_step_out_t *out);
    /* Data parallel (NULL with one rank): called on every rank after its
     * capture attempt, captured or not, with whether it has a graph. 1 when
     * every rank has one, 0 when any has not (this rank's graph is then
     * dropped: NCCL needs a collective captured on every rank or on none,
     * and a graph with collectives launched on every rank that made it),
     * -1 when the ranks could not agree (a peer gone), with err set. */
    int (*graph_agree)(gb_exec_t *ex, int have_graph);
    int (*report)(gb_exec_t *ex, gb_replica_report_t *rep);
    /* tests: activations in and out as double (converted to the act dtype) */
    int (*act_write)(gb_exec_t *ex, void *dst, const double *src, size_t n);
    int (*act_read)(gb_exec_t *ex, const void *src, double *dst, size_t n);
} gb_exec_ops_t;

struct gb_exec {
    const gb_exec_ops_t *ops;
    const gb_plan_t *plan;
    void *arena; /* activations and gradient buffers (device memory on GPUs) */
    int fused;   /* 1: the step runs the fused ops above (set at creation) */
    char err[GB_ERR_LEN];
};

/* Address of activation `id` and of gradient buffer `g` in the arena. */
static inline void *gb_exec_act(const gb_exec_t *ex, int id) {
    return (char *)ex->arena + ex->plan->acts[id].off;
}
static inline void *gb_exec_grad(const gb_exec_t *ex, int g) {
    return (char *)ex->arena + ex->plan->grad_off[g];
}

#endif
