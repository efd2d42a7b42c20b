/* ranks.c - see ranks.h. */
#define _POSIX_C_SOURCE 200809L
#include "ranks.h"

#include "gb_util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    R_INSERT,
    R_ASSIGNED,
    R_READY,
    R_START,
    R_ENDED,
    R_REPORT,
    R_FIND,
    R_SAVED,
    R_ABANDON,
    R_HANDED,
    R_N
};

static const char *const sql[R_N] = {
    [R_INSERT] =
        "INSERT INTO ranks (job_id, attempt, rank, agent_id, state, placed_at, assigned_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?5 = 'assigned' THEN ?6 END)",
    [R_ASSIGNED] = "UPDATE ranks SET state = ?4, assigned_at = ?5"
                   " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3",
    [R_READY] = "UPDATE ranks SET state = ?4, ready_at = ?5"
                " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3",
    [R_START] = "UPDATE ranks SET state = ?4, start_at = ?5"
                " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3",
    [R_ENDED] = "UPDATE ranks SET state = ?4, ended_at = ?5, error = COALESCE(?6, error)"
                " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3",
    [R_REPORT] = "UPDATE ranks SET status = ?4, error = COALESCE(error, ?5), exit_code = ?6,"
                 " output_tail = ?7, record = ?8, worker_started_at = ?9, worker_finished_at = ?10"
                 " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3 AND status IS NULL",
    [R_FIND] = "SELECT rank FROM ranks WHERE job_id = ?1 AND attempt = ?2 AND agent_id = ?3",
    [R_SAVED] = "SELECT status, error, output_tail, record, worker_started_at,"
                " worker_finished_at, exit_code FROM ranks"
                " WHERE job_id = ?1 AND attempt = ?2 AND rank = ?3",
    [R_ABANDON] = "UPDATE ranks SET state = CASE WHEN state = 'waiting' THEN 'skipped' ELSE 'lost'"
                  " END, ended_at = ?4, error = COALESCE(error, ?3)"
                  " WHERE job_id = ?1 AND attempt = ?2"
                  " AND state IN ('waiting', 'assigned', 'ready', 'started')",
    [R_HANDED] = "SELECT rank, agent_id FROM ranks WHERE job_id = ?1 AND attempt = ?2"
                 " AND state IN ('assigned', 'ready', 'started') ORDER BY rank",
};

struct gb_ranks {
    gb_store_t *store;
    sqlite3 *db;
    sqlite3_stmt *st[R_N];
    char err[512];
};

const char *gb_ranks_errmsg(gb_ranks_t *self) {
    return self->err;
}

gb_ranks_t *gb_ranks_new(gb_store_t *store, char *err, size_t errlen) {
    gb_ranks_t *self = calloc(1, sizeof *self);
    if (!self) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    self->store = store;
    self->db = gb_store_db(store);
    for (int i = 0; i < R_N; i++)
        if (sqlite3_prepare_v3(self->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &self->st[i],
                               NULL) != SQLITE_OK) {
            gb_fmt(err, errlen, "cannot prepare ranks statement %d: %s", i,
                   sqlite3_errmsg(self->db));
            gb_ranks_destroy(&self);
            return NULL;
        }
    return self;
}

void gb_ranks_destroy(gb_ranks_t **self_p) {
    if (!self_p || !*self_p) return;
    for (int i = 0; i < R_N; i++)
        sqlite3_finalize((*self_p)->st[i]);
    free(*self_p);
    *self_p = NULL;
}

/* Reset, clear, and bind job_id, attempt (and rank when >= 0) as ?1 ?2 ?3. */
static sqlite3_stmt *key(gb_ranks_t *self, int which, uint64_t job_id, uint32_t attempt, int rank) {
    sqlite3_stmt *st = self->st[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)job_id);
    sqlite3_bind_int(st, 2, (int)attempt);
    if (rank >= 0) sqlite3_bind_int(st, 3, rank);
    return st;
}

static int text(sqlite3_stmt *st, int pos, const char *s) {
    return s ? sqlite3_bind_text(st, pos, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, pos);
}

/* Step a bound write. Like the store's own writes, none runs while the
 * open transaction is broken (SQLite rolled it back after a failure: the
 * write would commit on its own), and a failure is reported to the store,
 * which marks the transaction broken when SQLite rolled it back. */
static int done(gb_ranks_t *self, sqlite3_stmt *st, int bind_rc, const char *what) {
    if (gb_store_broken(self->store)) {
        sqlite3_reset(st);
        snprintf(self->err, sizeof self->err, "ranks: %s: %s", what, gb_store_errmsg(self->store));
        return -1; /* the store's message still says what failed first */
    }
    int rc = bind_rc == SQLITE_OK ? sqlite3_step(st) : bind_rc;
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        snprintf(self->err, sizeof self->err, "ranks: %s: %s", what, sqlite3_errmsg(self->db));
        gb_store_note_failure(self->store, self->err);
        return -1;
    }
    return 0;
}

int gb_ranks_insert(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                    const char *agent_id, const char *state, const char *now) {
    sqlite3_stmt *st = key(self, R_INSERT, job_id, attempt, rank);
    int rc = text(st, 4, agent_id) | text(st, 5, state) | text(st, 6, now);
    return done(self, st, rc, "insert");
}

int gb_ranks_set(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank, const char *state,
                 const char *when, const char *now, const char *error) {
    int which = strcmp(when, "assigned") == 0 ? R_ASSIGNED
                : strcmp(when, "ready") == 0  ? R_READY
                : strcmp(when, "start") == 0  ? R_START
                                              : R_ENDED;
    sqlite3_stmt *st = key(self, which, job_id, attempt, rank);
    int rc = text(st, 4, state) | text(st, 5, now);
    if (which == R_ENDED) rc |= text(st, 6, error);
    return done(self, st, rc, state);
}

int gb_ranks_report(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                    const gb_rank_report_t *rep, int *stored) {
    *stored = 0;
    sqlite3_stmt *st = key(self, R_REPORT, job_id, attempt, rank);
    int rc = text(st, 4, rep->status) | text(st, 5, rep->error) |
             sqlite3_bind_int(st, 6, rep->exit_code) | text(st, 7, rep->output_tail) |
             text(st, 8, rep->record) | text(st, 9, rep->started_at) |
             text(st, 10, rep->finished_at);
    if (done(self, st, rc, "report") != 0) return -1;
    *stored = sqlite3_changes(self->db) > 0;
    return 0;
}

int gb_ranks_find(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, const char *agent_id,
                  int *rank) {
    sqlite3_stmt *st = key(self, R_FIND, job_id, attempt, -1);
    if (text(st, 3, agent_id) != SQLITE_OK) return done(self, st, SQLITE_MISUSE, "find");
    int rc = sqlite3_step(st), out;
    if (rc == SQLITE_ROW) {
        *rank = sqlite3_column_int(st, 0);
        out = 0;
    } else if (rc == SQLITE_DONE) {
        out = 1;
    } else {
        snprintf(self->err, sizeof self->err, "ranks: find: %s", sqlite3_errmsg(self->db));
        gb_store_note_failure(self->store, self->err);
        out = -1;
    }
    sqlite3_reset(st);
    return out;
}

static char *dup_col(sqlite3_stmt *st, int i, int *oom) {
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t) return NULL;
    char *s = strdup((const char *)t);
    if (!s) *oom = 1;
    return s;
}

int gb_ranks_saved(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, int rank,
                   gb_rank_saved_t *out) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = key(self, R_SAVED, job_id, attempt, rank);
    int rc = sqlite3_step(st), ret = 1, oom = 0;
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        out->status = dup_col(st, 0, &oom);
        out->error = dup_col(st, 1, &oom);
        out->output_tail = dup_col(st, 2, &oom);
        out->record = dup_col(st, 3, &oom);
        out->started_at = dup_col(st, 4, &oom);
        out->finished_at = dup_col(st, 5, &oom);
        out->exit_code = sqlite3_column_int(st, 6);
        ret = 0;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        snprintf(self->err, sizeof self->err, "ranks: saved: %s", sqlite3_errmsg(self->db));
        gb_store_note_failure(self->store, self->err);
        ret = -1;
    }
    sqlite3_reset(st);
    if (oom) {
        gb_rank_saved_free(out);
        snprintf(self->err, sizeof self->err, "ranks: out of memory");
        gb_store_note_failure(self->store, self->err);
        return -1;
    }
    return ret;
}

void gb_rank_saved_free(gb_rank_saved_t *s) {
    free(s->status);
    free(s->error);
    free(s->output_tail);
    free(s->record);
    free(s->started_at);
    free(s->finished_at);
    memset(s, 0, sizeof *s);
}

int gb_ranks_abandon(gb_ranks_t *self, uint64_t job_id, uint32_t attempt, const char *reason,
                     const char *now) {
    sqlite3_stmt *st = key(self, R_ABANDON, job_id, attempt, -1);
    int rc = text(st, 3, reason) | text(st, 4, now);
    return done(self, st, rc, "abandon");
}

int gb_ranks_handed(gb_ranks_t *self, uint64_t job_id, uint32_t attempt,
                    void (*fn)(void *ctx, int rank, const char *agent_id), void *ctx) {
    sqlite3_stmt *st = key(self, R_HANDED, job_id, attempt, -1);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *agent = sqlite3_column_text(st, 1);
        if (agent) fn(ctx, sqlite3_column_int(st, 0), (const char *)agent);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        snprintf(self->err, sizeof self->err, "ranks: handed: %s", sqlite3_errmsg(self->db));
        gb_store_note_failure(self->store, self->err);
        return -1;
    }
    return 0;
}
