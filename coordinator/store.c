/* store.c - see store.h. Every statement is prepared once in
 * gb_store_open() and reused; binding goes through bind() with a small type
 * string so each call site reads like the SQL it fills. */
#define _POSIX_C_SOURCE 200809L
#include "store.h"

#include "gb_schema.h"
#include "gb_util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    S_NODE_UPSERT,
    S_GPUS_DELETE,
    S_GPU_INSERT,
    S_LINKS_DELETE,
    S_LINK_INSERT,
    S_NODE_STATE,
    S_NODE_FORGET,
    S_NODES_LOAD,
    S_SWEEP_INSERT,
    S_SWEEP_BY_REQUEST,
    S_STORE_ID,
    S_SWEEP_FINISH,
    S_JOB_INSERT,
    S_JOB_ASSIGN,
    S_ATTEMPT_INSERT,
    S_ATTEMPT_STARTED,
    S_ATTEMPT_END,
    S_JOB_REQUEUE,
    S_ATTEMPT_REVIVE,
    S_JOB_FINISH,
    S_SWEEP_CANCEL_QUEUED,
    S_JOB_CANCEL_REQ,
    S_JOBS_LOAD,
    S_ATTEMPT_GET,
    S_RESULT_INSERT,
    S_SAMPLE_INSERT,
    S_SWEEP_STATUS,
    S_COUNT
};

static const char *const sql[S_COUNT] = {
    [S_NODE_UPSERT] =
        "INSERT INTO nodes (agent_id, name, state, cpu_model, cpu_cores, memory_bytes, os, kernel,"
        " driver_version, cuda_driver_version, n_gpus, gpu_model, labels, kinds, slots, has_nvlink,"
        " inventory, first_seen, last_seen, agent_key)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
        "?18, ?19)"
        " ON CONFLICT (agent_id) DO UPDATE SET name = excluded.name, state = excluded.state,"
        " cpu_model = excluded.cpu_model, cpu_cores = excluded.cpu_cores,"
        " memory_bytes = excluded.memory_bytes, os = excluded.os, kernel = excluded.kernel,"
        " driver_version = excluded.driver_version, cuda_driver_version = "
        "excluded.cuda_driver_version,"
        " n_gpus = excluded.n_gpus, gpu_model = excluded.gpu_model, labels = excluded.labels,"
        " kinds = excluded.kinds, slots = excluded.slots, has_nvlink = excluded.has_nvlink,"
        " forgotten_at = NULL, agent_key = excluded.agent_key,"
        " inventory = excluded.inventory, last_seen = excluded.last_seen",
    [S_GPUS_DELETE] = "DELETE FROM gpus WHERE agent_id = ?1",
    [S_GPU_INSERT] =
        "INSERT INTO gpus (agent_id, idx, name, uuid, memory_bytes, sm_count, cc_major, cc_minor,"
        " pcie_gen, pcie_width, power_limit_w, pci_bus_id)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [S_LINKS_DELETE] = "DELETE FROM links WHERE agent_id = ?1",
    [S_LINK_INSERT] = "INSERT INTO links (agent_id, gpu_a, gpu_b, nvlink_lanes, pcie_path)"
                      " VALUES (?1, ?2, ?3, ?4, ?5)",
    [S_NODE_STATE] = "UPDATE nodes SET state = ?2, last_seen = ?3 WHERE agent_id = ?1",
    [S_NODE_FORGET] = "UPDATE nodes SET forgotten_at = ?2 WHERE agent_id = ?1",
    [S_NODES_LOAD] =
        "SELECT agent_id, name, state, cpu_model, cpu_cores, n_gpus, gpu_model, labels, kinds,"
        " slots, has_nvlink, last_seen, inventory, agent_key, forgotten_at IS NOT NULL FROM nodes"
        " ORDER BY first_seen, agent_id",
    [S_SWEEP_INSERT] = "INSERT INTO sweeps (name, spec, n_jobs, state, created_at, request_id)"
                       " VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
    [S_SWEEP_BY_REQUEST] = "SELECT sweep_id, n_jobs FROM sweeps WHERE request_id = ?1",
    [S_STORE_ID] = "SELECT value FROM store_meta WHERE key = 'store_id'",
    [S_SWEEP_FINISH] = "UPDATE sweeps SET state = ?2, finished_at = ?3 WHERE sweep_id = ?1",
    [S_JOB_INSERT] =
        "INSERT INTO jobs (sweep_id, seq, kind, params, backend, n_gpus, precision, batch_per_gpu,"
        " interconnect, synthetic, state, max_attempts, created_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'queued', ?11, ?12)",
    [S_JOB_ASSIGN] = "UPDATE jobs SET state = 'running', attempt = ?2, agent_id = ?3"
                     " WHERE job_id = ?1",
    [S_ATTEMPT_INSERT] =
        "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at)"
        " VALUES (?1, ?2, ?3, ?4, 'assigned', ?5)",
    [S_ATTEMPT_STARTED] = "UPDATE attempts SET state = 'running', started_at = ?3"
                          " WHERE job_id = ?1 AND attempt = ?2 AND state = 'assigned'",
    /* the first error stays: a late result of a lost attempt keeps why it
     * was given up (a running attempt has none; the result row has its own) */
    [S_ATTEMPT_END] = "UPDATE attempts SET state = ?3, error = COALESCE(error, ?4), ended_at = ?5"
                      " WHERE job_id = ?1 AND attempt = ?2",
    [S_JOB_REQUEUE] = "UPDATE jobs SET state = 'queued', agent_id = NULL, free_attempts = ?2"
                      " WHERE job_id = ?1",
    [S_ATTEMPT_REVIVE] = "UPDATE attempts SET state = 'running', error = NULL, ended_at = NULL"
                         " WHERE job_id = ?1 AND attempt = ?2",
    [S_JOB_FINISH] = "UPDATE jobs SET state = ?2, error = ?3, finished_at = ?4, agent_id = NULL"
                     " WHERE job_id = ?1",
    [S_SWEEP_CANCEL_QUEUED] = "UPDATE jobs SET state = 'cancelled', error = ?2, finished_at = ?3,"
                              " agent_id = NULL WHERE sweep_id = ?1 AND state = 'queued'",
    [S_JOB_CANCEL_REQ] =
        "UPDATE jobs SET cancel_requested = 1, cancel_reason = ?2 WHERE job_id = ?1",
    [S_JOBS_LOAD] =
        "SELECT j.job_id, j.sweep_id, j.seq, j.kind, j.params, j.state, j.attempt, j.max_attempts,"
        " j.agent_id, j.cancel_requested, a.state, a.backend, j.free_attempts, j.cancel_reason"
        " FROM jobs j LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt"
        " WHERE j.state IN ('queued', 'running') ORDER BY j.job_id",
    [S_ATTEMPT_GET] = "SELECT agent_id, state FROM attempts WHERE job_id = ?1 AND attempt = ?2",
    [S_RESULT_INSERT] =
        "INSERT INTO results (job_id, attempt, agent_id, status, kind, backend, device_model,"
        " n_devices, precision, images_per_sec, step_ms_median, step_ms_p90, gflops, valid,"
        " invalid_reason, synthetic, error, exit_code, output_tail, record, started_at,"
        " finished_at, committed_at, agent_key, key_name)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
        " ?19, ?20, ?21, ?22, ?23, ?24, ?25) ON CONFLICT (job_id, attempt) DO NOTHING",
    [S_SAMPLE_INSERT] = "INSERT INTO samples (job_id, attempt, step, step_ms, loss)"
                        " VALUES (?1, ?2, ?3, ?4, ?5)",
    [S_SWEEP_STATUS] = "SELECT s.sweep_id, s.name, s.state, s.created_at, count(j.job_id),"
                       " sum(j.state = 'queued'), sum(j.state = 'running'), sum(j.state = 'done'),"
                       " sum(j.state = 'failed'), sum(j.state = 'cancelled')"
                       " FROM sweeps s LEFT JOIN jobs j ON j.sweep_id = s.sweep_id"
                       " WHERE ?1 = 0 OR s.sweep_id = ?1 GROUP BY s.sweep_id ORDER BY s.sweep_id",
};

struct gb_store {
    sqlite3 *db;
    sqlite3_stmt *st[S_COUNT];
    int in_tx;
    /* A statement of the open transaction failed and SQLite rolled the
     * transaction back by itself (it may on SQLITE_FULL, SQLITE_IOERR, ...):
     * a later statement would run, and commit, on its own. So every write
     * is refused until the caller rolls back. */
    int broken;
    /* SQLite said the file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB):
     * retrying the turn cannot help */
    int damaged;
    char err[512];
};

const char *gb_store_errmsg(gb_store_t *self) {
    return self->err;
}

static int fail(gb_store_t *self, const char *what) {
    snprintf(self->err, sizeof self->err, "%s: %s", what, sqlite3_errmsg(self->db));
    int ec = sqlite3_errcode(self->db) & 0xff;
    if (ec == SQLITE_CORRUPT || ec == SQLITE_NOTADB) self->damaged = 1;
    return -1;
}

int gb_store_damaged(gb_store_t *self) {
    return self->damaged;
}

/* Bind ?1.. from a type string: i int, I int64/uint64, d double (NaN ->
 * NULL), t text (NULL -> NULL), n NULL. */
static int bind(gb_store_t *self, int which, const char *types, ...) {
    sqlite3_stmt *st = self->st[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    va_list ap;
    va_start(ap, types);
    int rc = SQLITE_OK;
    for (int i = 0; types[i] && rc == SQLITE_OK; i++) {
        int pos = i + 1;
        switch (types[i]) {
        case 'i':
            rc = sqlite3_bind_int(st, pos, va_arg(ap, int));
            break;
        case 'I':
            rc = sqlite3_bind_int64(st, pos, (sqlite3_int64)va_arg(ap, uint64_t));
            break;
        case 'd': {
            double d = va_arg(ap, double);
            rc = isnan(d) ? sqlite3_bind_null(st, pos) : sqlite3_bind_double(st, pos, d);
            break;
        }
        case 't': {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, pos, s, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, pos);
            break;
        }
        case 'n':
            rc = sqlite3_bind_null(st, pos);
            break;
        default:
            rc = SQLITE_MISUSE;
        }
    }
    va_end(ap);
    if (rc != SQLITE_OK) return fail(self, sql[which]);
    return 0;
}

/* Step a bound statement that returns no rows. */
static int exec(gb_store_t *self, int which) {
    if (self->broken) {
        sqlite3_reset(self->st[which]);
        return -1; /* self->err still says what failed first */
    }
    int rc = sqlite3_step(self->st[which]);
    sqlite3_reset(self->st[which]);
    if (rc != SQLITE_DONE) {
        snprintf(self->err, sizeof self->err, "%s", sqlite3_errmsg(self->db));
        if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) self->damaged = 1;
        /* a constraint failure undoes its statement only; SQLITE_FULL or an
         * I/O error may undo the whole transaction */
        if (self->in_tx && sqlite3_get_autocommit(self->db)) self->broken = 1;
        return -1;
    }
    return 0;
}

static const char *col_text(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : NULL;
}

/* A file at --db that is another program's SQLite database is not made a
 * store: neither our tables added among its own nor its journal mode
 * changed. It is one when it holds schema objects at user_version 0 (ours
 * start empty), has a negative user_version, or one of ours without our
 * tables (one above ours is gb_schema_migrate's "newer" refusal). 0, or -1
 * with the reason. */
static int check_ours(sqlite3 *db, const char *path, char *err, size_t errlen) {
    sqlite3_stmt *st = NULL;
    int version = 0, objects = 0, ours = 0, rc;
    char first[64] = "", why[200];
    rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_ROW) {
        rc = sqlite3_prepare_v2(db,
                                "SELECT count(*), total(name IN ('sweeps', 'jobs', 'results')), "
                                "min(name) FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' "
                                "ESCAPE '\\'",
                                -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            objects = sqlite3_column_int(st, 0);
            ours = sqlite3_column_int(st, 1);
            gb_copy(first, sizeof first, col_text(st, 2) ? col_text(st, 2) : "");
        }
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_ROW) { /* not a database, damaged, encrypted */
        if (sqlite3_errcode(db) == SQLITE_READONLY) {
            /* a store in a directory this user cannot write: SQLite cannot
             * make its -wal and -shm beside it (it is a store all right) */
            gb_fmt(err, errlen,
                   "cannot write beside %s (%s): SQLite needs its -wal and -shm files in the "
                   "store's directory, which this user cannot write",
                   path, sqlite3_errmsg(db));
            return -1;
        }
        int ec = sqlite3_errcode(db) & 0xff;
        if (ec == SQLITE_CORRUPT)
            gb_fmt(err, errlen,
                   "%s is damaged (%s): left as it is; keep a copy, then try `sqlite3 %s .recover`",
                   path, sqlite3_errmsg(db), path);
        else
            gb_fmt(err, errlen, "%s is not a gpubench store (%s)", path, sqlite3_errmsg(db));
        return -1;
    }
    if (version < 0)
        gb_fmt(why, sizeof why, "its user_version is %d", version);
    else if (version == 0 && objects > 0)
        gb_fmt(why, sizeof why,
               "it holds %d table(s), index(es) or view(s) of another program "
               "('%.40s'%s) and no gpubench schema",
               objects, first, objects > 1 ? ", ..." : "");
    else if (version > 0 && (size_t)version <= gb_schema_n_migrations && ours < 3)
        gb_fmt(why, sizeof why, "its user_version is %d but it has no gpubench tables", version);
    else
        return 0;
    gb_fmt(err, errlen, "%s is not a gpubench store: %s; left as it is (give --db a new file)",
           path, why);
    return -1;
}

gb_store_t *gb_store_open(const char *path, char *err, size_t errlen) {
    gb_store_t *self = calloc(1, sizeof *self);
    if (!self) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    if (sqlite3_open_v2(path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        gb_fmt(err, errlen, "cannot open %s: %s", path,
               self->db ? sqlite3_errmsg(self->db) : "out of memory");
        goto err;
    }
    sqlite3_busy_timeout(self->db, 5000);
    if (check_ours(self->db, path, err, errlen) != 0) goto err;
    char *msg = NULL;
    /* journal_mode returns a row; sqlite3_exec ignores it. journal_size_limit:
     * the WAL is cut back to 4 MiB when it starts over (after a checkpoint
     * that moved all of it); it kept its largest size for the coordinator's
     * life (16 MiB after a reader held a snapshot through 400 jobs). */
    if (sqlite3_exec(self->db,
                     "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                     " PRAGMA foreign_keys = ON; PRAGMA journal_size_limit = 4194304;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        gb_fmt(err, errlen, "cannot configure %s: %s", path, msg ? msg : "?");
        sqlite3_free(msg);
        goto err;
    }
    if (gb_schema_migrate(self->db, gb_schema_migrations, gb_schema_n_migrations, err, errlen) != 0)
        goto err;
    for (int i = 0; i < S_COUNT; i++)
        if (sqlite3_prepare_v3(self->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &self->st[i],
                               NULL) != SQLITE_OK) {
            gb_fmt(err, errlen, "cannot prepare statement %d: %s", i, sqlite3_errmsg(self->db));
            goto err;
        }
    return self;
err:
    gb_store_close(&self);
    return NULL;
}

void gb_store_close(gb_store_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_store_t *self = *self_p;
    if (self->in_tx) gb_store_rollback(self);
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(self->st[i]);
    sqlite3_close(self->db);
    free(self);
    *self_p = NULL;
}

/* ---- the file held across a close (see store.h) --------------------------- */

/* SQLite's unix VFS: a shared lock is a read lock on these bytes, the
 * exclusive lock a write lock on all of them (os_unix.c, PENDING_BYTE
 * 0x40000000 + 2, SHARED_SIZE 510). */
#define SQLITE_SHARED_FIRST 0x40000002
#define SQLITE_SHARED_SIZE  510

/* The child: only calls that are safe after fork in a threaded process.
 * It tells st_fd 0 or the errno and the step, then waits for go_fd's end. */
static void hold_child(const char *path, int st_fd, int go_fd) {
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, NULL); /* a ^C to the terminal's group: the parent decides */
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    int said[2] = {0, 0}; /* errno; 1: open, 2: lock */
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        said[0] = errno;
        said[1] = 1;
    } else {
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_RDLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = SQLITE_SHARED_FIRST;
        fl.l_len = SQLITE_SHARED_SIZE;
        /* busy only while another process holds the exclusive lock (its
         * close checkpointing): a moment */
        for (int i = 0; i < 200; i++) {
            if (fcntl(fd, F_SETLK, &fl) == 0) {
                said[0] = 0;
                break;
            }
            said[0] = errno;
            said[1] = 2;
            if (errno != EAGAIN && errno != EACCES && errno != EINTR) break;
            nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        }
    }
    if (write(st_fd, said, sizeof said) != (ssize_t)sizeof said || said[0]) _exit(1);
    close(st_fd);
    char b;
    while (read(go_fd, &b, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
}

int gb_store_hold(const char *path, gb_store_hold_t *h, char *err, size_t errlen) {
    int st[2], go[2];
    h->pid = 0;
    h->fd = -1;
    if (pipe(st) != 0) {
        gb_fmt(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe(go) != 0) {
        gb_fmt(err, errlen, "pipe: %s", strerror(errno));
        close(st[0]);
        close(st[1]);
        return -1;
    }
    for (int i = 0; i < 2; i++) { /* not into what a later exec starts */
        fcntl(st[i], F_SETFD, FD_CLOEXEC);
        fcntl(go[i], F_SETFD, FD_CLOEXEC);
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(st[0]);
        close(go[1]); /* its own copy would keep the pipe from ending */
        hold_child(path, st[1], go[0]);
    }
    close(st[1]);
    close(go[0]);
    if (pid < 0) {
        gb_fmt(err, errlen, "fork: %s", strerror(errno));
        close(st[0]);
        close(go[1]);
        return -1;
    }
    int said[2] = {0, 0};
    ssize_t n;
    while ((n = read(st[0], said, sizeof said)) < 0 && errno == EINTR) {
    }
    close(st[0]);
    h->pid = (int)pid;
    h->fd = go[1];
    if (n == (ssize_t)sizeof said && said[0] == 0) return 0;
    gb_store_release(h);
    if (n != (ssize_t)sizeof said)
        gb_fmt(err, errlen, "the process that would hold %s ended at once", path);
    else
        gb_fmt(err, errlen, "cannot %s %s: %s", said[1] == 1 ? "open" : "lock", path,
               strerror(said[0]));
    return -1;
}

void gb_store_release(gb_store_hold_t *h) {
    if (!h || !h->pid) return;
    close(h->fd);
    while (waitpid((pid_t)h->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    h->pid = 0;
    h->fd = -1;
}

int gb_store_begin(gb_store_t *self) {
    if (self->in_tx) return 0;
    if (sqlite3_exec(self->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return fail(self, "begin");
    self->in_tx = 1;
    return 0;
}

int gb_store_set_synchronous(gb_store_t *self, int full) {
    if (sqlite3_exec(self->db, full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL",
                     NULL, NULL, NULL) != SQLITE_OK)
        return fail(self, "synchronous");
    return 0;
}

int gb_store_set_autocheckpoint(gb_store_t *self, int pages) {
    char q[64];
    snprintf(q, sizeof q, "PRAGMA wal_autocheckpoint = %d", pages);
    if (sqlite3_exec(self->db, q, NULL, NULL, NULL) != SQLITE_OK)
        return fail(self, "autocheckpoint");
    return 0;
}

int gb_store_in_tx(const gb_store_t *self) {
    return self->in_tx;
}

int gb_store_broken(const gb_store_t *self) {
    return self->broken;
}

int64_t gb_store_changes(gb_store_t *self) {
    return (int64_t)sqlite3_total_changes64(self->db);
}

void gb_store_note_failure(gb_store_t *self, const char *msg) {
    snprintf(self->err, sizeof self->err, "%s", msg);
    if (self->in_tx && sqlite3_get_autocommit(self->db)) self->broken = 1;
}

int gb_store_commit(gb_store_t *self) {
    if (!self->in_tx) return 0;
    if (self->broken) {
        gb_store_rollback(self);
        return -1;
    }
    if (sqlite3_exec(self->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        fail(self, "commit");
        gb_store_rollback(self);
        return -1;
    }
    self->in_tx = 0;
    return 0;
}

void gb_store_rollback(gb_store_t *self) {
    self->broken = 0;
    if (!self->in_tx) return;
    /* fails harmlessly when SQLite already rolled the transaction back */
    sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
    self->in_tx = 0;
}

int gb_store_node_upsert(gb_store_t *self, const gb_store_node_t *n, const char *now) {
    if (bind(self, S_NODE_UPSERT, "ttttiIttttitttiittt", n->agent_id, n->name, n->state,
             n->cpu_model, n->cpu_cores, (uint64_t)n->memory_bytes, n->os, n->kernel,
             n->driver_version, n->cuda_driver_version, n->n_gpus, n->gpu_model, n->labels,
             n->kinds, n->slots, n->has_nvlink, n->inventory_json, now,
             n->agent_key ? n->agent_key : "") != 0)
        return -1;
    if (exec(self, S_NODE_UPSERT) != 0) return -1;
    if (bind(self, S_GPUS_DELETE, "t", n->agent_id) != 0 || exec(self, S_GPUS_DELETE) != 0)
        return -1;
    for (int i = 0; i < n->n_gpus && n->gpus; i++) {
        const gb_store_gpu_t *g = &n->gpus[i];
        if (bind(self, S_GPU_INSERT, "tittIiiiiidt", n->agent_id, (int)g->idx, g->name, g->uuid,
                 g->memory_bytes, (int)g->sm_count, (int)g->cc_major, (int)g->cc_minor,
                 (int)g->pcie_gen, (int)g->pcie_width,
                 g->power_limit_w < 0 ? NAN : g->power_limit_w, g->pci_bus_id) != 0 ||
            exec(self, S_GPU_INSERT) != 0)
            return -1;
    }
    if (bind(self, S_LINKS_DELETE, "t", n->agent_id) != 0 || exec(self, S_LINKS_DELETE) != 0)
        return -1;
    for (size_t i = 0; i < n->n_links; i++) {
        const gb_store_link_t *l = &n->links[i];
        if (bind(self, S_LINK_INSERT, "tiiit", n->agent_id, (int)l->gpu_a, (int)l->gpu_b,
                 (int)l->nvlink_lanes, l->pcie_path) != 0 ||
            exec(self, S_LINK_INSERT) != 0)
            return -1;
    }
    return 0;
}

int gb_store_node_forget(gb_store_t *self, const char *agent_id, const char *now) {
    if (bind(self, S_NODE_FORGET, "tt", agent_id, now) != 0) return -1;
    return exec(self, S_NODE_FORGET);
}

int gb_store_node_state(gb_store_t *self, const char *agent_id, const char *state,
                        const char *now) {
    if (bind(self, S_NODE_STATE, "ttt", agent_id, state, now) != 0) return -1;
    return exec(self, S_NODE_STATE);
}

int gb_store_load_nodes(gb_store_t *self, void (*fn)(void *ctx, const gb_store_node_t *n),
                        void *ctx) {
    sqlite3_stmt *st = self->st[S_NODES_LOAD];
    sqlite3_reset(st);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        gb_store_node_t n = {0};
        n.agent_id = col_text(st, 0);
        n.name = col_text(st, 1);
        n.state = col_text(st, 2);
        n.cpu_model = col_text(st, 3);
        n.cpu_cores = sqlite3_column_int(st, 4);
        n.n_gpus = sqlite3_column_int(st, 5);
        n.gpu_model = col_text(st, 6);
        n.labels = col_text(st, 7);
        n.kinds = col_text(st, 8);
        n.slots = sqlite3_column_int(st, 9);
        n.has_nvlink = sqlite3_column_int(st, 10);
        n.last_seen = col_text(st, 11);
        n.inventory_json = col_text(st, 12);
        n.agent_key = col_text(st, 13);
        n.forgotten = sqlite3_column_int(st, 14);
        fn(ctx, &n);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : fail(self, "load nodes");
}

int gb_store_sweep_insert(gb_store_t *self, const char *name, const char *spec, size_t n_jobs,
                          const char *request_id, const char *now, uint64_t *sweep_id) {
    /* the spec as submitted, when SQLite reads it as JSON; else as cJSON
     * (which took it) writes it again: a byte-order mark or a leading zero
     * ("010") made every json_extract() over sweeps.spec fail, the whole
     * query, "malformed JSON" */
    char *norm = NULL;
    sqlite3_stmt *jv = NULL;
    int valid = sqlite3_prepare_v2(self->db, "SELECT json_valid(?1)", -1, &jv, NULL) == SQLITE_OK &&
                sqlite3_bind_text(jv, 1, spec, -1, SQLITE_STATIC) == SQLITE_OK &&
                sqlite3_step(jv) == SQLITE_ROW && sqlite3_column_int(jv, 0) == 1;
    sqlite3_finalize(jv);
    if (!valid) {
        cJSON *root = cJSON_Parse(spec);
        norm = root ? cJSON_PrintUnformatted(root) : NULL;
        cJSON_Delete(root);
    }
    int rc = bind(self, S_SWEEP_INSERT, "ttItt", name, norm ? norm : spec, (uint64_t)n_jobs, now,
                  request_id && request_id[0] ? request_id : NULL) != 0 ||
             exec(self, S_SWEEP_INSERT) != 0;
    free(norm);
    if (rc) return -1;
    *sweep_id = (uint64_t)sqlite3_last_insert_rowid(self->db);
    return 0;
}

int gb_store_id(gb_store_t *self, char *out, size_t outlen) {
    sqlite3_stmt *st = self->st[S_STORE_ID];
    int rc = sqlite3_step(st);
    const unsigned char *v = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    int ok = v && snprintf(out, outlen, "%s", (const char *)v) < (int)outlen;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(self, "store id");
    if (!ok) {
        snprintf(self->err, sizeof self->err,
                 "the store has no store_id in its store_meta table (made by migration 0012; "
                 "restore it with: INSERT INTO store_meta VALUES ('store_id', "
                 "lower(hex(randomblob(8)))))");
        return -1;
    }
    return 0;
}

int gb_store_sweep_by_request(gb_store_t *self, const char *request_id, uint64_t *sweep_id,
                              uint32_t *n_jobs) {
    if (bind(self, S_SWEEP_BY_REQUEST, "t", request_id) != 0) return -1;
    sqlite3_stmt *st = self->st[S_SWEEP_BY_REQUEST];
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *sweep_id = (uint64_t)sqlite3_column_int64(st, 0);
        *n_jobs = (uint32_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(self, "sweep by request id");
    return rc == SQLITE_ROW;
}

int gb_store_sweep_finish(gb_store_t *self, uint64_t sweep_id, const char *state, const char *now) {
    if (bind(self, S_SWEEP_FINISH, "Itt", sweep_id, state, now) != 0) return -1;
    return exec(self, S_SWEEP_FINISH);
}

int gb_store_job_insert(gb_store_t *self, const gb_store_job_t *j, const char *now,
                        uint64_t *job_id) {
    if (j->batch_per_gpu >= 0) {
        if (bind(self, S_JOB_INSERT, "Iitttititiit", j->sweep_id, j->seq, j->kind, j->params,
                 j->backend, j->n_gpus, j->precision, j->batch_per_gpu, j->interconnect,
                 j->synthetic, j->max_attempts, now) != 0)
            return -1;
    } else if (bind(self, S_JOB_INSERT, "Iitttitntiit", j->sweep_id, j->seq, j->kind, j->params,
                    j->backend, j->n_gpus, j->precision, j->interconnect, j->synthetic,
                    j->max_attempts, now) != 0) {
        return -1;
    }
    if (exec(self, S_JOB_INSERT) != 0) return -1;
    *job_id = (uint64_t)sqlite3_last_insert_rowid(self->db);
    return 0;
}

int gb_store_job_assign(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *agent_id,
                        const char *backend, const char *now) {
    if (bind(self, S_JOB_ASSIGN, "Iit", job_id, (int)attempt, agent_id) != 0 ||
        exec(self, S_JOB_ASSIGN) != 0)
        return -1;
    if (bind(self, S_ATTEMPT_INSERT, "Iittt", job_id, (int)attempt, agent_id, backend, now) != 0)
        return -1;
    return exec(self, S_ATTEMPT_INSERT);
}

int gb_store_attempt_started(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *now) {
    if (bind(self, S_ATTEMPT_STARTED, "Iit", job_id, (int)attempt, now) != 0) return -1;
    return exec(self, S_ATTEMPT_STARTED);
}

int gb_store_attempt_end(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *state,
                         const char *error, const char *now) {
    if (bind(self, S_ATTEMPT_END, "Iittt", job_id, (int)attempt, state, error, now) != 0) return -1;
    return exec(self, S_ATTEMPT_END);
}

int gb_store_job_requeue(gb_store_t *self, uint64_t job_id, int free_attempts) {
    if (bind(self, S_JOB_REQUEUE, "Ii", job_id, free_attempts) != 0) return -1;
    return exec(self, S_JOB_REQUEUE);
}

int gb_store_attempt_revive(gb_store_t *self, uint64_t job_id, uint32_t attempt,
                            const char *agent_id) {
    if (bind(self, S_ATTEMPT_REVIVE, "Ii", job_id, (int)attempt) != 0 ||
        exec(self, S_ATTEMPT_REVIVE) != 0)
        return -1;
    if (bind(self, S_JOB_ASSIGN, "Iit", job_id, (int)attempt, agent_id) != 0) return -1;
    return exec(self, S_JOB_ASSIGN);
}

int gb_store_job_finish(gb_store_t *self, uint64_t job_id, const char *state, const char *error,
                        const char *now) {
    if (bind(self, S_JOB_FINISH, "Ittt", job_id, state, error, now) != 0) return -1;
    return exec(self, S_JOB_FINISH);
}

int gb_store_sweep_cancel_queued(gb_store_t *self, uint64_t sweep_id, const char *error,
                                 const char *now, int *n) {
    *n = 0;
    if (bind(self, S_SWEEP_CANCEL_QUEUED, "Itt", sweep_id, error, now) != 0 ||
        exec(self, S_SWEEP_CANCEL_QUEUED) != 0)
        return -1;
    *n = sqlite3_changes(self->db);
    return 0;
}

int gb_store_job_cancel_requested(gb_store_t *self, uint64_t job_id, const char *reason) {
    if (bind(self, S_JOB_CANCEL_REQ, "It", job_id, reason) != 0) return -1;
    return exec(self, S_JOB_CANCEL_REQ);
}

int gb_store_load_jobs(gb_store_t *self, void (*fn)(void *ctx, const gb_store_job_t *j),
                       void *ctx) {
    sqlite3_stmt *st = self->st[S_JOBS_LOAD];
    sqlite3_reset(st);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        gb_store_job_t j = {0};
        j.job_id = (uint64_t)sqlite3_column_int64(st, 0);
        j.sweep_id = (uint64_t)sqlite3_column_int64(st, 1);
        j.seq = sqlite3_column_int(st, 2);
        j.kind = col_text(st, 3);
        j.params = col_text(st, 4);
        j.state = col_text(st, 5);
        j.attempt = (uint32_t)sqlite3_column_int(st, 6);
        j.max_attempts = sqlite3_column_int(st, 7);
        j.agent_id = col_text(st, 8);
        j.cancel_requested = sqlite3_column_int(st, 9);
        j.attempt_state = col_text(st, 10);
        j.attempt_backend = col_text(st, 11);
        j.free_attempts = sqlite3_column_int(st, 12);
        j.cancel_reason = col_text(st, 13);
        fn(ctx, &j);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : fail(self, "load jobs");
}

int gb_store_attempt_get(gb_store_t *self, uint64_t job_id, uint32_t attempt, char *agent_id,
                         size_t agent_len, char *state, size_t state_len) {
    if (bind(self, S_ATTEMPT_GET, "Ii", job_id, (int)attempt) != 0) return -1;
    sqlite3_stmt *st = self->st[S_ATTEMPT_GET];
    int rc = sqlite3_step(st);
    int out;
    if (rc == SQLITE_ROW) {
        snprintf(agent_id, agent_len, "%s", col_text(st, 0) ? col_text(st, 0) : "");
        snprintf(state, state_len, "%s", col_text(st, 1) ? col_text(st, 1) : "");
        out = 0;
    } else if (rc == SQLITE_DONE) {
        out = 1;
    } else {
        out = fail(self, "attempt lookup");
    }
    sqlite3_reset(st);
    return out;
}

int gb_store_result_insert(gb_store_t *self, const gb_store_result_t *r, const char *now,
                           int *inserted) {
    *inserted = 0;
    sqlite3_stmt *st = self->st[S_RESULT_INSERT];
    if (bind(self, S_RESULT_INSERT, "Iittttt", r->job_id, (int)r->attempt, r->agent_id, r->status,
             r->kind, r->backend, r->device_model) != 0)
        return -1;
    int rc = SQLITE_OK;
    rc |= r->n_devices >= 0 ? sqlite3_bind_int(st, 8, r->n_devices) : sqlite3_bind_null(st, 8);
    rc |= r->precision ? sqlite3_bind_text(st, 9, r->precision, -1, SQLITE_TRANSIENT)
                       : sqlite3_bind_null(st, 9);
    const double nums[4] = {r->images_per_sec, r->step_ms_median, r->step_ms_p90, r->gflops};
    for (int i = 0; i < 4; i++)
        rc |= isnan(nums[i]) ? sqlite3_bind_null(st, 10 + i)
                             : sqlite3_bind_double(st, 10 + i, nums[i]);
    rc |= r->valid >= 0 ? sqlite3_bind_int(st, 14, r->valid) : sqlite3_bind_null(st, 14);
    rc |= sqlite3_bind_int(st, 16, r->synthetic);
    rc |= sqlite3_bind_int(st, 18, r->exit_code);
    const struct {
        int pos;
        const char *s;
    } texts[] = {{15, r->invalid_reason},
                 {17, r->error},
                 {19, r->output_tail},
                 {20, r->record},
                 {21, r->started_at},
                 {22, r->finished_at},
                 {23, now},
                 {24, r->agent_key},
                 {25, r->key_name}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        rc |= texts[i].s ? sqlite3_bind_text(st, texts[i].pos, texts[i].s, -1, SQLITE_TRANSIENT)
                         : sqlite3_bind_null(st, texts[i].pos);
    if (rc != SQLITE_OK) return fail(self, "bind result");
    if (exec(self, S_RESULT_INSERT) != 0) return -1;
    if (sqlite3_changes(self->db) == 0) return 0; /* already stored: a resend */
    *inserted = 1;
    int stride = r->samples_stride > 1 ? r->samples_stride : 1;
    for (size_t i = 0; i < r->n_samples; i++) {
        double ms = r->step_ms ? r->step_ms[i] : NAN;
        double loss = r->loss ? r->loss[i] : NAN;
        /* a folded sample (a long run's mean of stride steps) at its first step */
        if (bind(self, S_SAMPLE_INSERT, "Iiidd", r->job_id, (int)r->attempt, (int)i * stride, ms,
                 loss) != 0 ||
            exec(self, S_SAMPLE_INSERT) != 0)
            return -1;
    }
    return 0;
}

int gb_store_sweep_status(gb_store_t *self, uint64_t sweep_id,
                          void (*fn)(void *ctx, const gb_store_sweep_status_t *s), void *ctx) {
    if (bind(self, S_SWEEP_STATUS, "I", sweep_id) != 0) return -1;
    sqlite3_stmt *st = self->st[S_SWEEP_STATUS];
    int rc, count = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        gb_store_sweep_status_t s = {0};
        s.sweep_id = (uint64_t)sqlite3_column_int64(st, 0);
        s.name = col_text(st, 1);
        s.state = col_text(st, 2);
        s.created_at = col_text(st, 3);
        s.total = (unsigned)sqlite3_column_int(st, 4);
        s.queued = (unsigned)sqlite3_column_int(st, 5);
        s.running = (unsigned)sqlite3_column_int(st, 6);
        s.done = (unsigned)sqlite3_column_int(st, 7);
        s.failed = (unsigned)sqlite3_column_int(st, 8);
        s.cancelled = (unsigned)sqlite3_column_int(st, 9);
        fn(ctx, &s);
        count++;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? count : fail(self, "sweep status");
}

struct sqlite3 *gb_store_db(gb_store_t *self) {
    return self->db;
}
