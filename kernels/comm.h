/* comm.h - the collective interface of data parallelism: gb_comm_t of
 * engine.h, one per replica.
 *
 * A job's replicas are `world` devices: `local_size` replicas (threads) in
 * each of `n_nodes` processes (nodes; one worker per node). Replica d of
 * node r has the global rank r * local_size + d. Every replica holds one
 * gb_comm_t; a collective is called by every replica of the job, in the same
 * order, and returns the same bytes to all of them.
 *
 * The struct is public so that a backend built as its own shared object
 * (libgpubench_cuda.so) can call through the table without linking the
 * engine: the gb_comm_* inline functions below are the whole interface.
 *
 * Implementations:
 *   - the host group (gb_comm_group_new, comm.c): replicas that are threads
 *     of one process reduce through shared memory, each replica summing its
 *     share of the range over all replicas (a reduce-scatter) and writing
 *     the result into every replica's buffer (an all-gather), so the cost
 *     per replica falls as replicas are added; across nodes a TCP ring
 *     (ring.h) joins the per-node sums. Every element's result is computed
 *     once, in one fixed order, and copied: all replicas of the job get
 *     bit-identical results.
 *   - NCCL, inside the CUDA backend: it uses this table only to share the
 *     ncclUniqueId (exchange_id) and to meet the job's start barrier.
 *
 * Errors: every function returns 0, or -1 with a one-line reason in err.
 * After a failure in any replica of a process the group is aborted: every
 * call of every replica of that process then fails with the first reason,
 * so no thread waits forever for one that died.
 */
#ifndef GB_COMM_H
#define GB_COMM_H

#include "engine.h"

#include <stddef.h>

typedef enum {
    GB_COMM_SUM = 0, /* sum over the job's replicas */
    GB_COMM_AVG,     /* sum, then divided by world (once, by the element's owner) */
    GB_COMM_MAX,     /* maximum */
} gb_comm_op_t;

/* Makes the job's unique id (called once, on global rank 0): writes 1..
 * GB_DIST_ID_MAX bytes into id and their count into *len. */
typedef int (*gb_comm_make_id_fn)(void *arg, unsigned char *id, size_t *len, char *err,
                                  size_t errlen);

typedef struct gb_comm_vtbl {
    /* In place over the `count` floats at buf (each replica its own buf). */
    int (*allreduce)(gb_comm_t *c, float *buf, size_t count, gb_comm_op_t op, char *err,
                     size_t errlen);
    /* Every replica of the job has reached it. */
    int (*barrier)(gb_comm_t *c, char *err, size_t errlen);
    /* Every replica of this process has reached it (no other node is
     * involved): e.g. to change the process's environment while all of
     * them are parked. */
    int (*local_barrier)(gb_comm_t *c, char *err, size_t errlen);
    /* The job's unique id to every replica: made by `make` on global rank 0,
     * published to the other nodes through gb_dist_t.publish_id, read from
     * gb_dist_t.unique_id there, and shared among each node's replicas;
     * then, for a multi-node job, the start barrier (gb_dist_t.wait_start,
     * once per node). Collective over the job; at most once per group. */
    int (*exchange_id)(gb_comm_t *c, gb_comm_make_id_fn make, void *arg, unsigned char *id,
                       size_t *len, char *err, size_t errlen);
    /* Host memory collectives across nodes: the TCP ring of ring.h, set up
     * through exchange_id (so it includes the start barrier). Collective
     * over the job; a no-op on one node. The CPU backend calls it in create. */
    int (*connect)(gb_comm_t *c, char *err, size_t errlen);
    /* Fail every pending and later call of this process's replicas. */
    void (*abort)(gb_comm_t *c, const char *why);
    /* 1 with the first reason in why once the group is aborted, else 0:
     * for a replica that waits on something the group cannot wake (a GPU
     * collective) and polls instead. NULL: never aborted. */
    int (*aborted)(gb_comm_t *c, char *why, size_t whylen);
} gb_comm_vtbl_t;

struct gb_comm {
    const gb_comm_vtbl_t *v;
    int rank, world;            /* global: node_rank * local_size + local_rank of world */
    int local_rank, local_size; /* this process's replicas */
    int node_rank, n_nodes;
    const char *transport; /* "threads", "threads+tcp", "nccl" (set by the backend) */
    void *impl;
};

static inline int gb_comm_allreduce(gb_comm_t *c, float *buf, size_t count, gb_comm_op_t op,
                                    char *err, size_t errlen) {
    return c->v->allreduce(c, buf, count, op, err, errlen);
}
/* 1 when every replica of the job passed the same v, 0 when any differs
 * (on every replica alike), -1 on a failure (err). Collective: one MAX
 * over (v, -v) in two 16-bit halves, exact in floats. What a replica's
 * collectives must agree on before they start (the layout of the gradient
 * slab a bucket covers), as gb_cuda_dp_same on GPUs. */
static inline int gb_comm_same(gb_comm_t *c, uint32_t v, char *err, size_t errlen) {
    float hi = (float)(v >> 16), lo = (float)(v & 0xffffu);
    float x[4] = {hi, -hi, lo, -lo};
    if (c->v->allreduce(c, x, 4, GB_COMM_MAX, err, errlen)) return -1;
    return x[0] == -x[1] && x[2] == -x[3];
}

static inline int gb_comm_barrier(gb_comm_t *c, char *err, size_t errlen) {
    return c->v->barrier(c, err, errlen);
}
static inline int gb_comm_local_barrier(gb_comm_t *c, char *err, size_t errlen) {
    return c->v->local_barrier(c, err, errlen);
}
static inline int gb_comm_exchange_id(gb_comm_t *c, gb_comm_make_id_fn make, void *arg,
                                      unsigned char *id, size_t *len, char *err, size_t errlen) {
    return c->v->exchange_id(c, make, arg, id, len, err, errlen);
}
static inline int gb_comm_connect(gb_comm_t *c, char *err, size_t errlen) {
    return c->v->connect(c, err, errlen);
}
static inline void gb_comm_abort(gb_comm_t *c, const char *why) {
    c->v->abort(c, why);
}
static inline int gb_comm_aborted(gb_comm_t *c, char *why, size_t whylen) {
    return c->v->aborted ? c->v->aborted(c, why, whylen) : 0;
}

/* ---- the allreduce kind's known inputs (engine.h), shared by backends ---- */

/* Replica g's element i: a small integer, so every sum is exact in f32. */
static inline float gb_allreduce_input(int g, size_t i) {
    return (float)((int)((i * 7 + (size_t)g * 3) % 11) - 5);
}
/* The exact sum over `world` replicas of element i. */
static inline float gb_allreduce_expected(int world, size_t i) {
    long s = 0;
    for (int g = 0; g < world; g++)
        s += (long)((i * 7 + (size_t)g * 3) % 11) - 5;
    return (float)s;
}

/* ---- the host group (comm.c) ---- */

typedef struct gb_comm_group gb_comm_group_t;

/* A group of local_size (1..1024) replicas of this process; dist NULL for
 * one node, else this worker's rank of a multi-node job (borrowed; it must
 * outlive the group), whose world_size must be n_nodes * local_size.
 * timeout_ms bounds every wait on another node (0: 600 s); waits on the
 * process's own threads end only by success or abort. NULL on failure. */
gb_comm_group_t *gb_comm_group_new(int local_size, gb_dist_t *dist, int timeout_ms, char *err,
                                   size_t errlen);
/* How long a node waits on another: $GB_COMM_TIMEOUT_MS, a whole number of
 * 1..86400000 ms, into *ms (600000 when unset or empty). -1 with a reason
 * when it is set to anything else. */
int gb_comm_timeout_ms(int *ms, char *err, size_t errlen);
/* Replica local_rank's comm (owned by the group). */
gb_comm_t *gb_comm_group_member(gb_comm_group_t *g, int local_rank);
/* Abort every member (see above); the first reason is kept. */
void gb_comm_group_abort(gb_comm_group_t *g, const char *why);
/* 1 when the ring across nodes is up (connect ran on a multi-node job). */
int gb_comm_group_has_ring(const gb_comm_group_t *g);
/* Free the group; no-op on NULL; sets *self_p to NULL. No member may be in
 * a call. */
void gb_comm_group_destroy(gb_comm_group_t **self_p);

/* ---- a barrier the driver's threads share (abortable) ---- */

typedef struct gb_barrier gb_barrier_t;
gb_barrier_t *gb_barrier_new(int n);
/* 0 when all n arrived, -1 (err: the reason) once aborted. */
int gb_barrier_wait(gb_barrier_t *b, char *err, size_t errlen);
void gb_barrier_abort(gb_barrier_t *b, const char *why);
/* 1 with the reason in why once aborted, else 0. */
int gb_barrier_aborted(gb_barrier_t *b, char *why, size_t whylen);
void gb_barrier_destroy(gb_barrier_t **self_p);

#endif
