/* cpu_backend.h - the oneDNN backend of the training engine (engine.h).
 *
 * gb_cpu_backend_ops implements gb_backend_ops_t for one replica: ResNet
 * forward, softmax cross-entropy, backward, running statistics and SGD, in
 * fp32 or bf16 (f32 master weights), with every buffer allocated and touched
 * in create(). A replica's state is self-contained (its own oneDNN context,
 * arena and slabs), so several replicas can run on separate threads; given
 * a gb_comm_t (comm.h) it averages its gradients with the other replicas'
 * (data parallel, docs/data-parallel.md), and it runs the no-BN variant.
 *
 * The internal parameter, gradient and momentum slabs hold the tensors in
 * model order, each in its oneDNN master layout and 64-byte aligned: the
 * gradient slab is one contiguous block that an all-reduce can slice.
 */
#ifndef GB_CPU_BACKEND_H
#define GB_CPU_BACKEND_H

#include "engine.h"

extern const gb_backend_ops_t gb_cpu_backend_ops;

/* Implementation facts for tests and the report, filled after create(). */
typedef struct gb_cpu_stats {
    int n_prims;             /* primitives created */
    int n_slow;              /* ref implementations or gemm convolutions among them */
    int n_winograd;          /* convolutions running Winograd */
    int n_reorders_per_step; /* reorders executed in one step (weight copies, bf16 edges) */
    size_t arena_bytes;      /* activations, gradients of activations, workspaces */
    size_t slab_bytes;       /* parameters + gradients + momentum, internal layouts */
    size_t scratch_bytes;    /* shared oneDNN scratchpad */
} gb_cpu_stats_t;

/* Fill *out for a state made by gb_cpu_backend_ops.create. */
void gb_cpu_backend_stats(void *state, gb_cpu_stats_t *out);

/* Name and implementation of primitive i (0 <= i < n_prims); NULL past the end. */
const char *gb_cpu_backend_prim(void *state, int i, const char **impl);

#endif
