/* reducer.h - averages a replica's gradient slab over the job's replicas,
 * bucket by bucket, on a thread of its own while backward goes on (host
 * memory: the CPU backend).
 *
 * Per step: gb_reducer_begin before backward; gb_reducer_tensor_done as
 * each parameter's gradient is complete (never blocks: a bucket that
 * became ready is queued); gb_reducer_finish before the update: queues any
 * bucket not yet queued (in bucket order), waits until every bucket is
 * averaged in place, and reports the first failure. The reducer thread
 * runs one gb_comm_allreduce(GB_COMM_AVG) per bucket, in the order the
 * buckets became ready (the same on every replica). A failed collective
 * aborts the comm group, so no other replica waits for this one, and every
 * later finish fails with the reason.
 */
#ifndef GB_REDUCER_H
#define GB_REDUCER_H

#include "buckets.h"
#include "comm.h"

typedef struct gb_reducer gb_reducer_t;

/* Borrowed: comm, bk and slab (bk->total floats) outlive the reducer.
 * Starts the thread. NULL with a reason on failure. */
gb_reducer_t *gb_reducer_new(gb_comm_t *comm, const gb_buckets_t *bk, float *slab, char *err,
                             size_t errlen);
void gb_reducer_begin(gb_reducer_t *r);
void gb_reducer_tensor_done(gb_reducer_t *r, int tensor);
int gb_reducer_finish(gb_reducer_t *r, char *err, size_t errlen);

typedef struct gb_reducer_stats {
    long steps;          /* finished steps */
    long buckets_before; /* buckets queued while backward still ran */
    double reduce_ms;    /* total time in the collectives */
    double wait_ms;      /* total time finish waited (communication not hidden) */
} gb_reducer_stats_t;
void gb_reducer_stats(gb_reducer_t *r, gb_reducer_stats_t *out);

/* Stops and joins the thread; no-op on NULL; sets *self_p to NULL. */
void gb_reducer_destroy(gb_reducer_t **self_p);

#endif
