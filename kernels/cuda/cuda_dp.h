/* cuda_dp.h - data parallelism on GPUs: one NCCL communicator over the
 * job's GPUs (one thread per GPU in this process; other nodes join through
 * the ncclUniqueId that comm.h's exchange_id carries), the interconnect
 * mode, NCCL's own report of what it used, the bucketed gradient
 * all-reduce of a training step, and the allreduce job kind.
 *
 * Interconnect modes, set once per process before NCCL's first
 * communicator (NCCL reads its environment once):
 *   nvlink - refused with a clear error unless NVML shows NVLink between
 *            every pair of this node's GPUs (directly or both on NVSwitches);
 *   pcie   - where NVLink joins the GPUs, NCCL_P2P_DISABLE=1 and
 *            NCCL_NVLS_ENABLE=0: NCCL cannot turn off only NVLink (P2P over
 *            NVLink and over PCIe are one switch), so the traffic goes
 *            through host memory (SHM) over PCIe; without NVLink NCCL's
 *            defaults already stay on PCIe;
 *   auto   - NCCL's choice.
 * The environment is changed by the process's replica 0 while all its
 * replicas wait at the comm group's local barrier (setenv is not safe
 * against other threads' getenv).
 * NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET,
 * GRAPH) goes to a file per process in a temporary directory, parsed by
 * nccl_log.h at report time: the record's interconnect and
 * nccl_transports are what NCCL says it did, never what was asked.
 *
 * Training: the gradient slab's two groups (plan.h: A in the compute dtype,
 * B in fp32) are cut into buckets (buckets.h); as backward completes a
 * bucket's gradients the main stream records an event, the communication
 * stream waits for it and runs ncclAllReduce(ncclAvg) in place; before the
 * update the main stream waits for the communication stream. Everything is
 * enqueued, nothing synchronizes, so one GPU per process captures in a
 * CUDA graph (several per process stay eager: NCCL's documentation warns
 * that capture may deadlock there). NCCL's all-reduce leaves every rank
 * with the same bytes, so weights stay identical.
 */
#ifndef GB_CUDA_DP_H
#define GB_CUDA_DP_H

#include "comm.h"
#include "engine.h"
#include "plan.h"

#include <cuda_runtime_api.h>

typedef struct gb_cuda_dp gb_cuda_dp_t;

/* NCCL's environment for `interconnect` and its log, once per process for
 * n_local GPUs (0..n_local-1). *nvlink: 1 when NVLink joins every pair of
 * them, 0 when not, -1 when NVML could not tell. A later call with another
 * mode fails (NCCL has read its environment by then). */
int gb_cuda_nccl_setup(const char *interconnect, int n_local, int *nvlink, char *err,
                       size_t errlen);
/* What NVLink joins among n GPUs, from NVML's answers: adj[i * n + j] a
 * direct link between i and j (symmetric), sw[i] GPU i on NVSwitches.
 * Returns 1 when every pair is joined (a link, or both on switches), else
 * 0 with the first pair without in why; *any: 1 when some pair is joined
 * (interconnect pcie must then turn P2P off: bridged pairs), else 0. */
int gb_nvlink_verdict(int n, const unsigned char *adj, const unsigned char *sw, int *any, char *why,
                      size_t whylen);

/* The communicator for this replica (GPU `device` = comm->local_rank) and
 * the buckets over its gradient slab `grads` (group A elements of a_esize
 * bytes, group B fp32 at grad_b_bytes). Blocks in ncclCommInitRank until
 * every rank of the job has joined. NULL with a reason on failure (the
 * comm group is aborted then). */
gb_cuda_dp_t *gb_cuda_dp_new(gb_comm_t *comm, int device, const gb_train_config_t *cfg,
                             const gb_plan_t *p, void *grads, size_t a_esize, size_t grad_b_bytes,
                             char *err, size_t errlen);
/* A step's backward is about to be enqueued. */
void gb_cuda_dp_begin(gb_cuda_dp_t *dp);
/* The job's world size: the step divides its loss gradient by it, and the
 * buckets are summed (ncclSum), so each replica ends with the average. */
int gb_cuda_dp_world(const gb_cuda_dp_t *dp);
/* Both gradient slabs' bucket layouts folded into h (gb_buckets_digest). */
uint32_t gb_cuda_dp_layout(const gb_cuda_dp_t *dp, uint32_t h);
/* Model tensor `tensor`'s gradient has been enqueued on `s`. */
int gb_cuda_dp_grad_done(gb_cuda_dp_t *dp, cudaStream_t s, int tensor, char *err, size_t errlen);
/* Every bucket enqueued, and `s` waits for the all-reduces. */
int gb_cuda_dp_finish(gb_cuda_dp_t *dp, cudaStream_t s, char *err, size_t errlen);
/* Wait for `ev` (recorded after a step's collectives) by polling, so that a
 * collective that cannot end (a peer died, NCCL failed, another replica of
 * this process failed and aborted the group) ends the wait: then the group
 * is aborted with the reason, and -1. 0 once ev has completed. The
 * communicator itself is aborted (its kernels end) by the caller's
 * teardown, after it has destroyed any CUDA graph that captured its
 * collectives (gb_cuda_dp_stop_if_failed): NCCL's abort waits for those. */
int gb_cuda_dp_wait(gb_cuda_dp_t *dp, cudaEvent_t ev, char *err, size_t errlen);
/* When the group has been aborted (a replica failed), ncclCommAbort on this
 * replica's communicator, so that no collective is left that never ends
 * (before anything waits on the streams; after every CUDA graph that
 * captured its collectives is destroyed, or it never returns); a no-op
 * otherwise. */
void gb_cuda_dp_stop_if_failed(gb_cuda_dp_t *dp);
/* A capture that failed part-way may have forked the communication stream
 * into the capture and not joined it back: join it to `s` (the capturing
 * stream) so that ending the capture ends it on both. 0, or -1. */
int gb_cuda_dp_join_capture(gb_cuda_dp_t *dp, cudaStream_t s);
/* Every rank says whether it has a CUDA graph (ok): 1 when all do, 0 when
 * any does not (a min over the ranks, eagerly, outside any capture), -1 with
 * the reason when the collective cannot end (the group is aborted). */
int gb_cuda_dp_agree(gb_cuda_dp_t *dp, int ok, char *err, size_t errlen);
/* Every rank passes v (< 2^30): 1 when all passed the same, 0 when not (on
 * every rank alike), -1 with the reason when the collective cannot end (the
 * group is aborted). Eagerly, outside any capture. */
int gb_cuda_dp_same(gb_cuda_dp_t *dp, uint32_t v, char *err, size_t errlen);
/* JSON members (no braces) for the report: interconnect, nccl_transports,
 * the all-reduce figures; malloc'd, NULL when out of memory. */
char *gb_cuda_dp_report(gb_cuda_dp_t *dp);
void gb_cuda_dp_destroy(gb_cuda_dp_t **self_p);

/* The backend's allreduce op (engine.h). */
int gb_cuda_allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                      gb_allreduce_size_t *sizes, int n, char **details_json, char *err,
                      size_t errlen);

#endif
