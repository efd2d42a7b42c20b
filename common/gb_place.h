/* gb_place.h - placement: can this node run this job, and with which
 * backend? A pure function of the node's capabilities and the job, used
 * both to place queued jobs and, at submit time, to reject a spec no known
 * node could ever run.
 *
 * Rules (docs/control-plane.md): the node offers the job's kind; the job's
 * `nodes` glob matches the node name or its GPU model (the CPU model on a
 * node without GPUs); the node carries every label the job asks for; the
 * backend resolves (auto: cuda on a node with GPUs, cpu otherwise); cuda
 * needs gpus <= the node's GPUs, cpu needs gpus (replicas) <= its cores;
 * tf32 and fp16 need cuda; nvlink with several GPUs needs NVLink on the
 * node; nvlink or pcie need cuda. One job per node at a time is the
 * coordinator's rule, not this function's. */
#ifndef GB_PLACE_H
#define GB_PLACE_H

#include "gb_spec.h"

#include <stdint.h>

#include <stddef.h>

typedef struct gb_node_caps {
    const char *name;
    const char *gpu_model;      /* first GPU's name, or the CPU model when n_gpus == 0 */
    const char *labels;         /* canonical "k=v,..." */
    const char *kinds;          /* "gemm,resnet50,sleep"; NULL or "" = every kind */
    const char *cpu_precisions; /* the CPU backend's, "fp32,bf16"; NULL or "" = any */
    int n_gpus;
    int cpu_cores;
    int has_nvlink; /* some GPU pair has NVLink lanes */
    /* bit k: GPUs 0..k-1 (those a job of k GPUs takes) are joined by NVLink,
     * directly or through each other, so NCCL can keep their traffic on it;
     * nvlink_known 0 (nodes stored before links were kept): has_nvlink rules */
    uint64_t nvlink_sets;
    int nvlink_known;
} gb_node_caps_t;

/* 1 when node can run job, with "cpu" or "cuda" in backend (8 bytes); 0
 * with the reason in why. */
int gb_place_fits(const gb_node_caps_t *node, const gb_jobdef_t *job, char *backend, char *why,
                  size_t whylen);
/* 1 when the job's own choice (kind, node glob, labels) takes the node,
 * whether or not the node can then run it: such nodes' reasons are the
 * informative ones when no node fits. */
int gb_place_selected(const gb_node_caps_t *node, const gb_jobdef_t *job);

/* nvlink_sets for a node: bit k (1 <= k <= min(n_gpus, 63)) set when GPUs
 * 0..k-1 form one connected graph of the n_links links with NVLink lanes
 * (gpu_a, gpu_b, lanes). Bit 1 is always set for a node with a GPU. */
uint64_t gb_nvlink_sets(int n_gpus, const int *gpu_a, const int *gpu_b, const int *lanes,
                        size_t n_links);

#endif
