/* net.h - one training replica: a plan, an executor, and the step that
 * strings the executor's ops together (forward, loss, backward, running
 * statistics, update), plus the canonical-slab edges of gb_backend_ops_t.
 * Used by the CUDA backend (cuda_backend.c) and the host twin (tests/cuda).
 */
#ifndef GB_CUDA_NET_H
#define GB_CUDA_NET_H

#include "exec.h"

typedef struct gb_net gb_net_t;

/* Takes ownership of *plan_p and *ex_p (both set to NULL, also on failure).
 * The model must outlive the net. want_graph: capture the step in a CUDA
 * graph after the first (eager) step when the executor can; seed: for
 * synthetic batches. */
gb_net_t *gb_net_new(gb_plan_t **plan_p, gb_exec_t **ex_p, int want_graph, uint64_t seed, char *err,
                     size_t errlen);
void gb_net_destroy(gb_net_t **self_p);

gb_exec_t *gb_net_exec(gb_net_t *net);
const gb_plan_t *gb_net_plan(const gb_net_t *net);

int gb_net_set_state(gb_net_t *net, const float *params, const float *buffers, int64_t nbt,
                     char *err, size_t errlen);
int gb_net_get_state(gb_net_t *net, float *params, float *buffers, int64_t *nbt, char *err,
                     size_t errlen);
int gb_net_get_grads(gb_net_t *net, float *grads, char *err, size_t errlen);
/* images NULL and labels NULL: a synthetic batch drawn by the executor from
 * the seed given to gb_net_new (cuda_math.h's counter-based generator) */
int gb_net_set_batch(gb_net_t *net, const float *images, const int32_t *labels, char *err,
                     size_t errlen);
int gb_net_step(gb_net_t *net, gb_step_out_t *out, char *err, size_t errlen);
int gb_net_report(gb_net_t *net, gb_replica_report_t *rep, char *err, size_t errlen);

/* Only the step's ops, without step_begin/step_end (tests and capture). */
int gb_net_enqueue(gb_net_t *net);

#endif
