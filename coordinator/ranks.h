/* ranks.h - the store's ranks table (schema/0002_multinode.sql): one row
 * per rank of each attempt of a multi-node job. It shares the store's
 * SQLite connection, so its writes join the transaction the reactor has
 * open (gb_store_begin) and commit with the rest of the loop turn.
 * Functions return 0 or -1 (reason in gb_ranks_errmsg) unless they say
 * otherwise; times are ISO 8601 text. */
#ifndef GB_COORD_RANKS_H
#define GB_COORD_RANKS_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_ranks gb_ranks_t;

/* Statements on store's connection; the store must outlive it. */
gb_ranks_t *gb_ranks_new(gb_store_t *store, char *err, size_t errlen);
void gb_ranks_destroy(gb_ranks_t **self_p);
const char *gb_ranks_errmsg(gb_ranks_t *self);

/* A rank placed on agent_id in state (waiting | assigned). */
int gb_ranks_insert(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                    const char *agent_id, const char *state, const char *now);
/* Move a rank to state; `when` names the column that gets now: "assigned",
 * "ready", "start" or "ended" (the latter with error, which may be NULL). */
int gb_ranks_set(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank, const char *state,
                 const char *when, const char *now, const char *error);

/* What a rank's worker reported. */
typedef struct gb_rank_report {
    const char *status;                       /* ok | failed | timeout | crashed | cancelled */
    const char *error, *output_tail, *record; /* NULL: SQL NULL */
    int exit_code;
    const char *started_at, *finished_at;
} gb_rank_report_t;

/* Keep a rank's report; *stored = 0 when it had one already (a resend). */
int gb_ranks_report(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                    const gb_rank_report_t *rep, int *stored);
/* The rank agent_id holds in (job, attempt): 0 with *rank, 1 when it holds
 * none, -1 on error. */
int gb_ranks_find(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, const char *agent_id,
                  int *rank);
/* A rank's report, malloc'd copies (free each): 0, 1 when it has none, -1. */
typedef struct gb_rank_saved {
    char *status, *error, *output_tail, *record, *started_at, *finished_at;
    int exit_code;
} gb_rank_saved_t;
int gb_ranks_saved(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                   gb_rank_saved_t *out);
void gb_rank_saved_free(gb_rank_saved_t *s);
/* Every rank of (job, attempt) that has not ended: state lost with reason
 * (a restarted coordinator gives up the multi-node attempts it cannot
 * resume). */
int gb_ranks_abandon(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, const char *reason,
                     const char *now);
/* fn(ctx, rank, agent_id) for every rank of (job, attempt) that was handed
 * to its agent and has not ended (assigned, ready or started), rank order:
 * the workers there may still run. 0 or -1. */
int gb_ranks_handed(gb_ranks_t *self, uint64_t job_id, uint32_t attempt,
                    void (*fn)(void *ctx, int rank, const char *agent_id), void *ctx);

#endif
