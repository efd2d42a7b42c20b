/* dist.h - the worker's side of a multi-node job (issue 5): the "dist"
 * object of the job file, the gb_dist_t (kernels/engine.h) the job kinds
 * call, and the unique id the `sleep` kind makes and checks in the
 * control-plane tests.
 *
 * The job file of a rank carries
 *   "dist": {"rank": R, "n_nodes": N, "world_size": W, "fd": 3,
 *            "unique_id": "<hex>"}          (unique_id on ranks > 0 only)
 * and fd is the rendezvous channel to the agent (common/gb_rdv.h). The
 * callbacks write "id" and "ready" lines on it and block for "start". */
#ifndef GB_WORKER_DIST_H
#define GB_WORKER_DIST_H

#include "engine.h"

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* The channel behind a gb_dist_t's callbacks. */
typedef struct gb_dist_chan {
    int fd;
    int published, waited;
} gb_dist_chan_t;

/* Fill d (and ch, which d->ctx then points to) from the job file's "dist"
 * object; devices is the job's gpus (devices per node): world_size must be
 * n_nodes * devices. 0, or -1 with the reason. */
int gb_dist_from_json(const struct cJSON *dist, int devices, gb_dist_t *d, gb_dist_chan_t *ch,
                      char *err, size_t errlen);
/* Add "dist" to a result record: rank, n_nodes, world_size, unique_id (hex),
 * start_at_ms, started_at_ms, late_ms (how long after the start time this
 * rank went). */
void gb_dist_record(const gb_dist_t *d, struct cJSON *rec);

/* The id the sleep kind's rank 0 makes: "GBSLEEP1", the job id and attempt,
 * 16 random bytes and a 64-bit FNV-1a checksum of all that, so another rank
 * can tell it got rank 0's id of this very attempt (not a stale one, not
 * garbage). GB_SLEEP_ID_LEN bytes. */
#define GB_SLEEP_ID_LEN 44
int gb_sleep_id_make(uint64_t job_id, uint32_t attempt, unsigned char *id, char *err,
                     size_t errlen);
/* 0 when id is such an id of (job_id, attempt), else -1 with the reason. */
int gb_sleep_id_check(const unsigned char *id, size_t len, uint64_t job_id, uint32_t attempt,
                      char *err, size_t errlen);

#endif
