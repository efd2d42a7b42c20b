/* gang.h - the ranks of one attempt of a multi-node job (issue 5), as a
 * state machine of events in and actions out. It keeps no sockets, no
 * store and no clock of its own: the coordinator feeds it what agents say
 * and does what it answers, so every transition is tested without them.
 *
 * The life of an attempt over n ranks:
 *   placed    rank 0 is assigned at once, ranks 1..n-1 wait;
 *   id        rank 0's worker made the unique id: ranks 1..n-1 are
 *             assigned with it (action ASSIGN);
 *   ready     each rank's worker waits at the start barrier; when the last
 *             one is ready every rank gets the start time (action START);
 *   results   each rank's worker ends and reports.
 * The first thing that goes wrong - a rank that fails, crashes, times out,
 * or finishes before the start; an agent that is lost or refuses; the
 * rendezvous deadline; a cancel - decides the attempt's outcome (the
 * *cause*): ranks still waiting are skipped (no worker ever ran), the
 * others are told to stop (action CANCEL, once per rank). The attempt ends
 * (action END) only when every rank has ended, so a retry never overlaps
 * a worker of the attempt before it. */
#ifndef GB_COORD_GANG_H
#define GB_COORD_GANG_H

#include <stddef.h>
#include <stdint.h>

#define GB_GANG_ID_MAX     128
#define GB_GANG_REASON_MAX 600

typedef enum {
    GB_RANK_WAITING = 0, /* for rank 0's id */
    GB_RANK_ASSIGNED,
    GB_RANK_READY,
    GB_RANK_STARTED,
    /* ended */
    GB_RANK_DONE,
    GB_RANK_FAILED,
    GB_RANK_TIMEOUT,
    GB_RANK_CRASHED,
    GB_RANK_CANCELLED,
    GB_RANK_LOST,
    GB_RANK_SKIPPED,
} gb_rank_state_t;

typedef enum {
    GB_GANG_RUNNING = 0, /* no cause yet */
    GB_GANG_DONE,        /* every rank succeeded */
    GB_GANG_FAILED,      /* a rank's worker failed: the job fails (not retried) */
    GB_GANG_LOST,        /* an agent, or the rendezvous: the job may run again */
    GB_GANG_CANCELLED,   /* by request */
} gb_gang_outcome_t;

/* How a rank's worker ended, as its agent reported (the wire's ResultStatus). */
typedef enum {
    GB_GANG_OK = 1,
    GB_GANG_ERR_FAILED,
    GB_GANG_ERR_TIMEOUT,
    GB_GANG_ERR_CRASHED,
    GB_GANG_ERR_CANCELLED,
} gb_gang_status_t;

/* Actions, or'ed. */
enum {
    GB_GANG_ASSIGN = 1, /* send ranks 1..n-1 their assignment with the id */
    GB_GANG_START = 2,  /* send every rank the start time */
    GB_GANG_CANCEL = 4, /* gb_gang_take_cancel() names the ranks to stop */
    GB_GANG_END = 8,    /* every rank ended: finish the attempt (gb_gang_outcome) */
};

typedef struct gb_gang gb_gang_t;

/* An attempt over n ranks (2..1024), rank 0 assigned. NULL on bad n or
 * out of memory. */
gb_gang_t *gb_gang_new(int n);
void gb_gang_destroy(gb_gang_t **self_p);

int gb_gang_size(const gb_gang_t *g);
gb_rank_state_t gb_gang_state(const gb_gang_t *g, int rank);
/* "waiting" ... "skipped": the store's ranks.state */
const char *gb_rank_state_name(gb_rank_state_t s);
int gb_rank_ended(gb_rank_state_t s);
/* The id once rank 0 made it (len 0 before). */
const unsigned char *gb_gang_id(const gb_gang_t *g, size_t *len);
int gb_gang_started(const gb_gang_t *g); /* the start went out */
int gb_gang_all_ended(const gb_gang_t *g);

/* The outcome so far, the rank that caused it (-1: none, e.g. a cancel),
 * its reason, and whether a LOST outcome counts against max_attempts (a
 * refusal does not). */
gb_gang_outcome_t gb_gang_outcome(const gb_gang_t *g);
int gb_gang_cause_rank(const gb_gang_t *g);
const char *gb_gang_reason(const gb_gang_t *g);
int gb_gang_counts(const gb_gang_t *g);
/* 1 once a cancel was requested (whatever the outcome). */
int gb_gang_cancel_requested(const gb_gang_t *g);

/* ---- events: each returns the actions to take (0: nothing, e.g. a
 * repeat, or an event for a rank that already ended) ---- */

/* Rank `rank` reports the id (1..GB_GANG_ID_MAX bytes). Only rank 0, once,
 * before any cause: ASSIGN. Anything else is ignored. */
int gb_gang_on_id(gb_gang_t *g, int rank, const unsigned char *id, size_t len);
/* Rank `rank`'s worker waits at the barrier (rank 0 only after its id).
 * When it is the last: START (every rank is then started). */
int gb_gang_on_ready(gb_gang_t *g, int rank);
/* Rank `rank`'s worker ended with status; reason says why when it is not
 * OK. OK before the start counts as a failure. */
int gb_gang_on_result(gb_gang_t *g, int rank, gb_gang_status_t status, const char *reason);
/* Rank `rank` is gone without a report (its agent was lost, came back
 * without it, or refused it): the rank is lost and, unless the attempt
 * already has a cause, the attempt is LOST with reason (counts: whether it
 * uses up an attempt). */
int gb_gang_on_lost(gb_gang_t *g, int rank, const char *reason, int counts);
/* Give the attempt a cause from outside a rank's report: the rendezvous
 * deadline (LOST, rank = the first not ready) or a cancel (CANCELLED, rank
 * -1). Ignored when there is a cause already, except that a cancel is
 * always remembered (gb_gang_cancel_requested). */
int gb_gang_end(gb_gang_t *g, gb_gang_outcome_t outcome, int rank, const char *reason, int counts);
/* The first rank not yet ready, or -1 (all ready, or started). */
int gb_gang_first_unready(const gb_gang_t *g);

/* After CANCEL: 1 (once per rank) for each rank whose worker may run and
 * must be stopped. */
int gb_gang_take_cancel(gb_gang_t *g, int rank);

#endif
