/* gang.c - see gang.h. */
#include "gang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gb_gang {
    int n;
    gb_rank_state_t *state;
    unsigned char *cancel_sent;
    unsigned char id[GB_GANG_ID_MAX];
    size_t id_len;
    int started;
    gb_gang_outcome_t outcome;
    int cause_rank, counts, cancel_requested;
    char reason[GB_GANG_REASON_MAX];
};

gb_gang_t *gb_gang_new(int n) {
    if (n < 2 || n > 1024) return NULL;
    gb_gang_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n = n;
    g->state = calloc((size_t)n, sizeof *g->state);
    g->cancel_sent = calloc((size_t)n, 1);
    if (!g->state || !g->cancel_sent) {
        gb_gang_destroy(&g);
        return NULL;
    }
    g->state[0] = GB_RANK_ASSIGNED;
    for (int r = 1; r < n; r++)
        g->state[r] = GB_RANK_WAITING;
    g->cause_rank = -1;
    return g;
}

void gb_gang_destroy(gb_gang_t **self_p) {
    if (!self_p || !*self_p) return;
    free((*self_p)->state);
    free((*self_p)->cancel_sent);
    free(*self_p);
    *self_p = NULL;
}

int gb_gang_size(const gb_gang_t *g) {
    return g->n;
}

static int ok_rank(const gb_gang_t *g, int rank) {
    return rank >= 0 && rank < g->n;
}

gb_rank_state_t gb_gang_state(const gb_gang_t *g, int rank) {
    return ok_rank(g, rank) ? g->state[rank] : GB_RANK_SKIPPED;
}

const char *gb_rank_state_name(gb_rank_state_t s) {
    static const char *const names[] = {"waiting",   "assigned", "ready",   "started",
                                        "done",      "failed",   "timeout", "crashed",
                                        "cancelled", "lost",     "skipped"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "skipped";
}

int gb_rank_ended(gb_rank_state_t s) {
    return s >= GB_RANK_DONE;
}

const unsigned char *gb_gang_id(const gb_gang_t *g, size_t *len) {
    *len = g->id_len;
    return g->id;
}

int gb_gang_started(const gb_gang_t *g) {
    return g->started;
}

int gb_gang_all_ended(const gb_gang_t *g) {
    for (int r = 0; r < g->n; r++)
        if (!gb_rank_ended(g->state[r])) return 0;
    return 1;
}

gb_gang_outcome_t gb_gang_outcome(const gb_gang_t *g) {
    return g->outcome;
}
int gb_gang_cause_rank(const gb_gang_t *g) {
    return g->cause_rank;
}
const char *gb_gang_reason(const gb_gang_t *g) {
    return g->reason;
}
int gb_gang_counts(const gb_gang_t *g) {
    return g->counts;
}
int gb_gang_cancel_requested(const gb_gang_t *g) {
    return g->cancel_requested;
}

static int all_done(const gb_gang_t *g) {
    for (int r = 0; r < g->n; r++)
        if (g->state[r] != GB_RANK_DONE) return 0;
    return 1;
}

/* The attempt ended for everyone once one rank's end is known: DONE when
 * every rank succeeded, END when nothing runs any more. A cancel that came
 * after the last rank's worker had already finished (each rank ended "ok",
 * the stops too late) leaves a whole measurement: DONE, as a one-node job
 * whose worker finished first. */
static int settle(gb_gang_t *g) {
    int actions = 0;
    if (g->outcome != GB_GANG_RUNNING) {
        for (int r = 0; r < g->n; r++) {
            if (g->state[r] == GB_RANK_WAITING) g->state[r] = GB_RANK_SKIPPED;
            if (!gb_rank_ended(g->state[r]) && !g->cancel_sent[r]) actions |= GB_GANG_CANCEL;
        }
    }
    if (gb_gang_all_ended(g)) {
        if (g->outcome == GB_GANG_RUNNING || (g->outcome == GB_GANG_CANCELLED && all_done(g)))
            g->outcome = GB_GANG_DONE;
        actions |= GB_GANG_END;
    }
    return actions;
}

static void set_cause(gb_gang_t *g, gb_gang_outcome_t outcome, int rank, const char *reason,
                      int counts) {
    if (g->outcome != GB_GANG_RUNNING) return;
    g->outcome = outcome;
    g->cause_rank = rank;
    g->counts = counts;
    snprintf(g->reason, sizeof g->reason, "%s", reason ? reason : "");
}

int gb_gang_on_id(gb_gang_t *g, int rank, const unsigned char *id, size_t len) {
    if (rank != 0 || g->id_len || g->outcome != GB_GANG_RUNNING || len < 1 ||
        len > GB_GANG_ID_MAX || g->state[0] != GB_RANK_ASSIGNED)
        return 0;
    memcpy(g->id, id, len);
    g->id_len = len;
    for (int r = 1; r < g->n; r++)
        g->state[r] = GB_RANK_ASSIGNED;
    return GB_GANG_ASSIGN;
}

int gb_gang_on_ready(gb_gang_t *g, int rank) {
    if (!ok_rank(g, rank) || g->outcome != GB_GANG_RUNNING || g->state[rank] != GB_RANK_ASSIGNED ||
        g->id_len == 0)
        return 0;
    g->state[rank] = GB_RANK_READY;
    for (int r = 0; r < g->n; r++)
        if (g->state[r] != GB_RANK_READY) return 0;
    for (int r = 0; r < g->n; r++)
        g->state[r] = GB_RANK_STARTED;
    g->started = 1;
    return GB_GANG_START;
}

int gb_gang_on_result(gb_gang_t *g, int rank, gb_gang_status_t status, const char *reason) {
    if (!ok_rank(g, rank) || gb_rank_ended(g->state[rank]) || g->state[rank] == GB_RANK_WAITING)
        return 0;
    char why[GB_GANG_REASON_MAX];
    switch (status) {
    case GB_GANG_OK:
        if (g->state[rank] == GB_RANK_STARTED) {
            g->state[rank] = GB_RANK_DONE;
            break;
        }
        g->state[rank] = GB_RANK_FAILED;
        snprintf(why, sizeof why,
                 "%s%sfinished before the start barrier (a worker that does not "
                 "take part in the rendezvous)",
                 reason && *reason ? reason : "", reason && *reason ? ": " : "");
        set_cause(g, GB_GANG_FAILED, rank, why, 1);
        break;
    case GB_GANG_ERR_CANCELLED:
        g->state[rank] = GB_RANK_CANCELLED;
        /* a stop we did not ask for is a failure of the attempt */
        set_cause(g, GB_GANG_FAILED, rank, reason && *reason ? reason : "cancelled on its node", 1);
        break;
    default:
        g->state[rank] = status == GB_GANG_ERR_TIMEOUT   ? GB_RANK_TIMEOUT
                         : status == GB_GANG_ERR_CRASHED ? GB_RANK_CRASHED
                                                         : GB_RANK_FAILED;
        set_cause(g, GB_GANG_FAILED, rank, reason && *reason ? reason : "failed", 1);
    }
    return settle(g);
}

int gb_gang_on_lost(gb_gang_t *g, int rank, const char *reason, int counts) {
    if (!ok_rank(g, rank) || gb_rank_ended(g->state[rank])) return 0;
    g->state[rank] = GB_RANK_LOST;
    set_cause(g, GB_GANG_LOST, rank, reason, counts);
    return settle(g);
}

int gb_gang_end(gb_gang_t *g, gb_gang_outcome_t outcome, int rank, const char *reason, int counts) {
    if (outcome == GB_GANG_CANCELLED) g->cancel_requested = 1;
    if (outcome == GB_GANG_RUNNING || outcome == GB_GANG_DONE) return 0;
    if (g->outcome != GB_GANG_RUNNING) return settle(g) & ~GB_GANG_END;
    set_cause(g, outcome, ok_rank(g, rank) ? rank : -1, reason, counts);
    return settle(g);
}

int gb_gang_first_unready(const gb_gang_t *g) {
    if (g->started) return -1;
    for (int r = 0; r < g->n; r++)
        if (g->state[r] != GB_RANK_READY) return r;
    return -1;
}

int gb_gang_take_cancel(gb_gang_t *g, int rank) {
    if (!ok_rank(g, rank) || g->outcome == GB_GANG_RUNNING || gb_rank_ended(g->state[rank]) ||
        g->cancel_sent[rank])
        return 0;
    g->cancel_sent[rank] = 1;
    return 1;
}
