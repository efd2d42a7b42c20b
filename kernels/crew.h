/* crew.h - the threads of one job's local replicas, joined with a deadline
 * once one of them has failed.
 *
 * A replica that fails aborts the others (the comm group, the barrier),
 * and each of them notices at its next wait. A replica blocked where
 * nothing wakes it never notices: ncclCommInitRank is blocking, and a
 * peer that failed before its own init leaves the others inside theirs.
 * Joined with pthread_join, such a replica held the job until the agent's
 * deadline killed the worker, and the record said "timed out" instead of
 * the failure. gb_crew_join waits for every member as long as none has
 * failed; after the first failure (gb_crew_failed) it waits grace_ms
 * more, then gives up on those still running and names them with the
 * phase each was last in. Those threads still use the job's memory: the
 * caller frees nothing they can reach and ends the process soon
 * (GB_STRANDED in engine.h).
 */
#ifndef GB_CREW_H
#define GB_CREW_H

#include <stddef.h>

typedef struct gb_crew gb_crew_t;

/* n members, none started. NULL with a reason. */
gb_crew_t *gb_crew_new(int n, char *err, size_t errlen);
/* Runs fn(arg) on a new thread as member i. -1 with a reason. */
int gb_crew_start(gb_crew_t *c, int i, void (*fn)(void *), void *arg, char *err, size_t errlen);
/* Member i is now in `phase` (a string that outlives the crew: a literal).
 * No-op on NULL: a run with one replica has no crew. */
void gb_crew_phase(gb_crew_t *c, int i, const char *phase);
/* A member failed (or the start of one did): the grace period starts at
 * the first call. No-op on NULL. */
void gb_crew_failed(gb_crew_t *c);
/* Waits for every started member. 0: all ended and joined. -1: some were
 * still running grace_ms after the first failure, err names them ("replica
 * 1 (in create) still running 10 s after the failure"); they are detached
 * and the crew must not be freed. */
int gb_crew_join(gb_crew_t *c, int grace_ms, char *err, size_t errlen);
/* After a join that returned 0. No-op on NULL; sets *c to NULL. */
void gb_crew_free(gb_crew_t **c);

/* The grace period: $GB_REPLICA_GRACE_MS, 1..3600000, default 10000. -1
 * with a reason for a value that is not one. */
int gb_crew_grace_ms(int *ms, char *err, size_t errlen);

#endif
