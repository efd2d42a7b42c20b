/* test_migrate.c - schema migrations (schema/migrate.c) on real SQLite
 * files: a fresh store reaches the last version with every table and the two
 * public views exactly as documented; re-running changes nothing; a newer
 * store is refused; a failing migration leaves the store as it was; a gap
 * in the numbering is refused; stores at older versions upgraded with
 * their rows (upgrade_NNNN). `test_migrate CASE`. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sqlite3 *open_tmp(char *path, size_t len) {
    snprintf(path, len, "/tmp/gb-migrate-%d-XXXXXX", (int)getpid());
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    return db;
}

static int count(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    CHECKF(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
           sqlite3_errmsg(db));
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* One row's one text column, "NULL" for NULL, into out. */
static void text(sqlite3 *db, const char *sql, char *out, size_t len) {
    sqlite3_stmt *st = NULL;
    CHECKF(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
           sqlite3_errmsg(db));
    CHECKF(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(out, len, "%s", t ? (const char *)t : "NULL");
    sqlite3_finalize(st);
}

/* The view's columns now are `before` with `tail` appended (a later
 * migration's columns). */
static void appended(const char *got, const char *before, const char *tail) {
    size_t n = strlen(before);
    CHECKF(strncmp(got, before, n) == 0 && strcmp(got + n, tail) == 0,
           "columns %s, want %s then %s", got, before, tail);
}

static void exec_ok(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    CHECKF(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql, msg);
}

/* The view's columns, comma-joined. */
static void columns(sqlite3 *db, const char *view, char *out, size_t len) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s')", view);
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
    size_t o = 0;
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW)
        o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

int main(int argc, char **argv) {
    CHECKF(argc == 2, "usage: test_migrate CASE");
    const char *c = argv[1];
    char path[128], err[512];
    sqlite3 *db = open_tmp(path, sizeof path);
    int n = (int)gb_schema_n_migrations;
    CHECK(n >= 1 && gb_schema_migrations[0].version == 1);
    CHECK(strcmp(gb_schema_migrations[0].name, "0001_init") == 0);
    if (strcmp(c, "fresh") == 0) {
        CHECK(gb_schema_version(db) == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(gb_schema_version(db) == n);
        static const char *const tables[] = {"nodes",    "gpus",    "links",   "sweeps",   "jobs",
                                             "attempts", "results", "samples", "telemetry"};
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
            char sql[128];
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '%s'",
                     tables[i]);
            CHECKF(count(db, sql) == 1, "table %s missing", tables[i]);
        }
        char cols[1024];
        columns(db, "v_results", cols, sizeof cols);
        /* issue 2's columns in its order, then synthetic, attempt, gflops; later
         * migrations only append (0002: n_nodes, nodes, nccl_transports) */
        static const char v1[] = "sweep_id,job_id,node,gpu_model,backend,kind,n_gpus,precision,"
                                 "batch_per_gpu,interconnect,images_per_sec,step_ms_median,"
                                 "step_ms_p90,status,error,finished_at,synthetic,attempt,gflops";
        CHECKF(strncmp(cols, v1, sizeof v1 - 1) == 0 &&
                   (!cols[sizeof v1 - 1] || cols[sizeof v1 - 1] == ','),
               "v_results columns: %s", cols);
        columns(db, "v_nodes", cols, sizeof cols);
        CHECKF(
            strcmp(
                cols,
                "node,agent_id,state,cpu_model,n_gpus,gpu_model,labels,last_seen,forgotten_at") ==
                0,
            "v_nodes columns: %s", cols);
        CHECK(count(db, "SELECT count(*) FROM v_results") == 0);
    } else if (strcmp(c, "idempotent") == 0) {
        CHECK(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                sizeof err) == 0);
        CHECK(sqlite3_exec(db,
                           "INSERT INTO sweeps (spec, n_jobs, state, created_at) VALUES ('{}', 0, "
                           "'done', 'now')",
                           NULL, NULL, NULL) == SQLITE_OK);
        CHECK(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                sizeof err) == 0);
        CHECK(gb_schema_version(db) == n);
        CHECK(count(db, "SELECT count(*) FROM sweeps") == 1); /* data kept */
    } else if (strcmp(c, "newer") == 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", n + 1);
        CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
        CHECK(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                sizeof err) != 0);
        CHECKF(strstr(err, "is newer than this gpubench knows"), "%s", err);
        CHECK(gb_schema_version(db) == n + 1);
        CHECK(count(db, "SELECT count(*) FROM sqlite_schema") == 0); /* untouched */
    } else if (strcmp(c, "broken") == 0) {
        const gb_migration_t list[] = {
            {1, "0001_ok", "CREATE TABLE a (x);"},
            {2, "0002_broken", "CREATE TABLE b (y); INSERT INTO nosuch VALUES (1);"},
        };
        CHECK(gb_schema_migrate(db, list, 2, err, sizeof err) != 0);
        CHECKF(strstr(err, "migration 0002_broken failed") && strstr(err, "nosuch"), "%s", err);
        CHECK(gb_schema_version(db) == 1); /* the first one stays applied */
        CHECK(count(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'a'") == 1);
        CHECK(count(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'b'") ==
              0); /* rolled back */
        const gb_migration_t fixed[] = {list[0], {2, "0002_fixed", "CREATE TABLE b (y);"}};
        CHECK(gb_schema_migrate(db, fixed, 2, err, sizeof err) == 0);
        CHECK(gb_schema_version(db) == 2);
    } else if (strcmp(c, "stopped") == 0) {
        /* 0009 loosens nodes.state's CHECK in place (sqlite_schema's text): a
         * store at 0008 with a node keeps it, takes 'stopped' from then on,
         * from a connection opened before the migration too, and still
         * refuses other states */
        CHECK(n >= 9 && strcmp(gb_schema_migrations[8].name, "0009_nodes_stopped") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 8, err, sizeof err) == 0, "%s", err);
        CHECK(sqlite3_exec(db,
                           "INSERT INTO nodes (agent_id, name, state, first_seen, last_seen) "
                           "VALUES ('a1', 'n1', 'lost', 't', 't')",
                           NULL, NULL, NULL) == SQLITE_OK);
        CHECK(sqlite3_exec(db, "UPDATE nodes SET state = 'stopped'", NULL, NULL, NULL) !=
              SQLITE_OK); /* 0001's CHECK */
        sqlite3 *other = NULL;
        CHECK(sqlite3_open(path, &other) == SQLITE_OK);
        CHECK(count(other, "SELECT count(*) FROM nodes") == 1); /* its schema read */
        /* a build of SQLite that turns defensive mode on by default refuses
         * writable_schema: the migrations run with it off, and it is back */
        int def = -1;
        CHECK(sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &def) == SQLITE_OK && def == 1);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, -1, &def) == SQLITE_OK && def == 1);
        CHECK(gb_schema_version(db) == n);
        CHECK(sqlite3_exec(db, "UPDATE nodes SET state = 'stopped'", NULL, NULL, NULL) ==
              SQLITE_OK);
        CHECK(sqlite3_exec(other, "UPDATE nodes SET state = 'connected'", NULL, NULL, NULL) ==
              SQLITE_OK);
        CHECK(sqlite3_exec(other, "UPDATE nodes SET state = 'stopped'", NULL, NULL, NULL) ==
              SQLITE_OK);
        CHECK(sqlite3_exec(other, "UPDATE nodes SET state = 'gone'", NULL, NULL, NULL) !=
              SQLITE_OK);
        CHECK(count(db, "SELECT count(*) FROM nodes") == 1); /* the check row removed */
        CHECK(count(db, "SELECT count(*) FROM v_nodes WHERE node = 'n1' AND state = 'stopped'") ==
              1);
        CHECK(count(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = "
                        "'ok'") == 1);
        CHECK(count(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'gb_0009_cookie'") == 0);
        sqlite3_close(other);
    } else if (strcmp(c, "upgrade_0014") == 0) {
        /* a store at 0014 with results on a GPU node: a gemm that ran on the
         * CPU, a gemm that failed on the GPU, a resnet50 and a sleep that
         * failed on the GPU. After the upgrade v_results has each gemm's
         * shape (from the record, else the job's parameters) and the done
         * one's measured median and p90 per product (its record's
         * ms_median and details.ms_p90, now in results too), none for the
         * others; a sleep says it used no GPU (0015) */
        CHECK(n >= 16 && strcmp(gb_schema_migrations[13].name, "0014_results_agent_key") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 14, err, sizeof err) == 0, "%s", err);
        exec_ok(db,
                "INSERT INTO nodes (agent_id, name, state, cpu_model, n_gpus, gpu_model, "
                "first_seen, last_seen) VALUES ('a1', 'n1', 'lost', 'CPU Y', 1, 'GPU X', 't', 't');"
                "INSERT INTO sweeps (sweep_id, spec, n_jobs, state, created_at) "
                "VALUES (1, '{}', 4, 'failed', 't');"
                "INSERT INTO jobs (job_id, sweep_id, seq, kind, params, backend, n_gpus, state, "
                "attempt, max_attempts, created_at) VALUES "
                "(1, 1, 0, 'gemm', '{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72}', 'cpu', "
                "1, 'done', 1, 3, 't'),"
                "(2, 1, 1, 'gemm', '{\"kind\":\"gemm\",\"m\":64,\"n\":32,\"k\":16}', 'auto', "
                "1, 'failed', 1, 3, 't'),"
                "(3, 1, 2, 'resnet50', '{\"kind\":\"resnet50\"}', 'cuda', 1, 'done', 1, 3, 't'),"
                "(4, 1, 3, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'failed', 1, 3, 't');"
                "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at) "
                "VALUES (1, 1, 'a1', 'cpu', 'done', 't'), (2, 1, 'a1', 'cuda', 'failed', 't'),"
                "(3, 1, 'a1', 'cuda', 'done', 't'), (4, 1, 'a1', 'cuda', 'failed', 't');"
                "INSERT INTO results (job_id, attempt, agent_id, status, kind, backend, "
                "device_model, gflops, step_ms_median, step_ms_p90, record, committed_at) VALUES "
                "(1, 1, 'a1', 'ok', 'gemm', 'cpu', 'CPU Y', 4.4, NULL, NULL, "
                "'{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72,\"ms_median\":0.25,"
                "\"gflops\":4.4,\"details\":{\"ms_p90\":0.5}}', 't'),"
                "(2, 1, 'a1', 'failed', 'gemm', NULL, NULL, NULL, NULL, NULL, "
                "'{\"kind\":\"gemm\",\"error\":\"no GPU\"}', 't'),"
                "(3, 1, 'a1', 'ok', 'resnet50', 'cuda', 'GPU X', NULL, 100, 110, "
                "'{\"kind\":\"resnet50\",\"step_ms\":{\"median\":100,\"p90\":110}}', 't'),"
                "(4, 1, 'a1', 'failed', 'sleep', NULL, NULL, NULL, NULL, NULL, "
                "'{\"kind\":\"sleep\",\"error\":\"asked\"}', 't');");
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(gb_schema_version(db) == n);
        char got[1024];
        text(db,
             "SELECT group_concat(job_id || ':' || kind || ':' || COALESCE(m, '-') || 'x' || "
             "COALESCE(n, '-') || 'x' || COALESCE(k, '-') || ':' || COALESCE(step_ms_median, '-') "
             "|| ':' || COALESCE(step_ms_p90, '-') || ':' || gpu_model, '|') "
             "FROM (SELECT * FROM v_results ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:gemm:96x80x72:0.25:0.5:CPU Y|2:gemm:64x32x16:-:-:GPU X|"
                           "3:resnet50:-x-x-:100.0:110.0:GPU X|"
                           "4:sleep:-x-x-:-:-:none (the sleep kind uses no GPU)") == 0,
               "v_results after the upgrade: %s", got);
        text(db,
             "SELECT group_concat(COALESCE(step_ms_median, '-') || ',' || "
             "COALESCE(step_ms_p90, '-'), '|') FROM (SELECT * FROM results ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "0.25,0.5|-,-|100.0,110.0|-,-") == 0, "results: %s", got);
        /* the view's columns: 0013's last, then 0016's, then 0020's */
        columns(db, "v_results", got, sizeof got);
        static const char tail[] = ",bucket_mb,m,n,k,launch";
        size_t len = strlen(got);
        CHECKF(len >= sizeof tail - 1 && strcmp(got + len - (sizeof tail - 1), tail) == 0,
               "v_results: %s", got);
    } else if (strcmp(c, "upgrade_0016") == 0) {
        /* a store at 0016 with a running job whose cancel was asked (its
         * reason not kept then) and a queued one: 0017 appends
         * jobs.cancel_reason, NULL for both (the default reason), which
         * takes a reason from then on; v_results is as it was */
        CHECK(n >= 17 && strcmp(gb_schema_migrations[15].name, "0016_v_results_gemm_shape") == 0);
        CHECK(strcmp(gb_schema_migrations[16].name, "0017_jobs_cancel_reason") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 16, err, sizeof err) == 0, "%s", err);
        char before[1024], got[1024];
        columns(db, "v_results", before, sizeof before);
        exec_ok(db, "INSERT INTO sweeps (sweep_id, spec, n_jobs, state, created_at) "
                    "VALUES (1, '{}', 2, 'running', 't');"
                    "INSERT INTO jobs (job_id, sweep_id, seq, kind, params, backend, n_gpus, "
                    "state, attempt, max_attempts, cancel_requested, created_at) VALUES "
                    "(1, 1, 0, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'running', 1, 3, "
                    "1, 't'),"
                    "(2, 1, 1, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'queued', 0, 3, "
                    "0, 't');");
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(gb_schema_version(db) == n);
        text(db,
             "SELECT group_concat(job_id || ':' || cancel_requested || ':' || "
             "COALESCE(cancel_reason, 'NULL'), '|') FROM (SELECT * FROM jobs ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:1:NULL|2:0:NULL") == 0, "jobs after the upgrade: %s", got);
        exec_ok(db, "UPDATE jobs SET cancel_requested = 1, cancel_reason = 'cancelled: why' "
                    "WHERE job_id = 2");
        text(db, "SELECT cancel_reason FROM jobs WHERE job_id = 2", got, sizeof got);
        CHECKF(strcmp(got, "cancelled: why") == 0, "%s", got);
        columns(db, "v_results", got, sizeof got);
        appended(got, before, ",launch"); /* as it was, then 0020's */
    } else if (strcmp(c, "upgrade_0017") == 0) {
        /* a store at 0017 with a done gemm (its record's reps), a failed one
         * (no reps in its record: the job's parameter), a resnet50 and a
         * sleep: 0018 gives each gemm row its timed products as steps (one
         * product is a gemm's step; they were NULL), the others' as before;
         * the view's columns unchanged. And jobs cancelled before any node
         * took them (no attempt), a sleep (the smoke spec's, backend auto),
         * a sleep on cuda and a gemm, have no gpu_model, whatever their
         * kind: the never-run sleeps said 'none (the sleep kind uses no
         * GPU)' beside the gemm's empty one. A sleep cancelled while it ran
         * on a node says none, as before (0015) */
        CHECK(n >= 18 && strcmp(gb_schema_migrations[16].name, "0017_jobs_cancel_reason") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 17, err, sizeof err) == 0, "%s", err);
        char before[1024], got[1024];
        columns(db, "v_results", before, sizeof before);
        exec_ok(db,
                "INSERT INTO nodes (agent_id, name, state, cpu_model, n_gpus, gpu_model, "
                "first_seen, last_seen) VALUES ('a1', 'n1', 'lost', 'CPU Y', 1, 'GPU X', 't', 't');"
                "INSERT INTO sweeps (sweep_id, spec, n_jobs, state, created_at) "
                "VALUES (1, '{}', 8, 'failed', 't');"
                "INSERT INTO jobs (job_id, sweep_id, seq, kind, params, backend, n_gpus, state, "
                "attempt, max_attempts, created_at) VALUES "
                "(5, 1, 4, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'cancelled', 0, 3, 't'),"
                "(6, 1, 5, 'sleep', '{\"kind\":\"sleep\"}', 'cuda', 1, 'cancelled', 0, 3, 't'),"
                "(7, 1, 6, 'gemm', '{\"kind\":\"gemm\",\"reps\":10}', 'auto', 1, 'cancelled', "
                "0, 3, 't'),"
                "(8, 1, 7, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'cancelled', 1, 3, 't'),"
                "(1, 1, 0, 'gemm', '{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72,\"reps\":7}', "
                "'cpu', 1, 'done', 1, 3, 't'),"
                "(2, 1, 1, 'gemm', '{\"kind\":\"gemm\",\"m\":64,\"n\":32,\"k\":16,\"reps\":10}', "
                "'auto', 1, 'failed', 1, 3, 't'),"
                "(3, 1, 2, 'resnet50', '{\"kind\":\"resnet50\",\"steps\":20}', 'cuda', 1, "
                "'done', 1, 3, 't'),"
                "(4, 1, 3, 'sleep', '{\"kind\":\"sleep\"}', 'auto', 1, 'done', 1, 3, 't');"
                "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at) "
                "VALUES (1, 1, 'a1', 'cpu', 'done', 't'), (2, 1, 'a1', 'cuda', 'failed', 't'),"
                "(3, 1, 'a1', 'cuda', 'done', 't'), (4, 1, 'a1', 'cuda', 'done', 't'),"
                "(8, 1, 'a1', 'cuda', 'cancelled', 't');"
                "INSERT INTO results (job_id, attempt, agent_id, status, kind, backend, "
                "device_model, gflops, step_ms_median, step_ms_p90, record, committed_at) VALUES "
                "(1, 1, 'a1', 'ok', 'gemm', 'cpu', 'CPU Y', 4.4, 0.25, 0.5, "
                "'{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72,\"reps\":5,\"ms_median\":0.25,"
                "\"gflops\":4.4,\"details\":{\"ms_p90\":0.5}}', 't'),"
                "(2, 1, 'a1', 'failed', 'gemm', NULL, NULL, NULL, NULL, NULL, "
                "'{\"kind\":\"gemm\",\"error\":\"no GPU\"}', 't'),"
                "(3, 1, 'a1', 'ok', 'resnet50', 'cuda', 'GPU X', NULL, 100, 110, "
                "'{\"kind\":\"resnet50\",\"steps\":30,\"step_ms\":{\"median\":100,\"p90\":110}}', "
                "'t'),"
                "(4, 1, 'a1', 'ok', 'sleep', NULL, NULL, NULL, NULL, NULL, "
                "'{\"kind\":\"sleep\"}', 't');");
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(gb_schema_version(db) == n);
        text(db,
             "SELECT group_concat(job_id || ':' || kind || ':' || COALESCE(steps, '-'), '|') "
             "FROM (SELECT * FROM v_results ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:gemm:5|2:gemm:10|3:resnet50:30|4:sleep:-|5:sleep:-|6:sleep:-|"
                           "7:gemm:10|8:sleep:-") == 0,
               "v_results steps after the upgrade: %s", got);
        text(db,
             "SELECT group_concat(job_id || ':' || status || ':' || COALESCE(gpu_model, '-') || "
             "':' || backend, '|') FROM (SELECT * FROM v_results ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:done:CPU Y:cpu|2:failed:GPU X:cuda|3:done:GPU X:cuda|"
                           "4:done:none (the sleep kind uses no GPU):cuda|5:cancelled:-:auto|"
                           "6:cancelled:-:cuda|7:cancelled:-:auto|"
                           "8:cancelled:none (the sleep kind uses no GPU):cuda") == 0,
               "v_results gpu_model after the upgrade: %s", got);
        columns(db, "v_results", got, sizeof got);
        appended(got, before, ",launch"); /* as it was, then 0020's */
        /* 0019's v_models reads the upgraded v_results: job 3, the one
         * ResNet-50 run, stored no images/s, so no row */
        text(db, "SELECT count(*) FROM v_models", got, sizeof got);
        CHECKF(strcmp(got, "0") == 0, "v_models after the upgrade: %s rows", got);
    } else if (strcmp(c, "upgrade_0019") == 0) {
        /* a store at 0019 with ResNet-50 runs on one node: one GPU (the
         * baseline), two GPUs whose record was made before records said how
         * the replicas ran (as threads, every such run), four GPUs whose
         * record says processes, two GPUs that failed with a failed record
         * and none, a two-GPU job cancelled before it ran, and a gemm.
         * After the upgrade both views end in launch (0020): the record's,
         * threads for an ok record without one, the job's parameter (the
         * failed one's processes), else auto; NULL for one GPU and for
         * other kinds. v_scaling's rows keep their one-GPU baseline; the
         * other columns are as they were */
        CHECK(n >= 20 && strcmp(gb_schema_migrations[18].name, "0019_v_models") == 0);
        CHECK(strcmp(gb_schema_migrations[19].name, "0020_launch") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 19, err, sizeof err) == 0, "%s", err);
        char before_r[1024], before_s[1024], got[1024];
        columns(db, "v_results", before_r, sizeof before_r);
        columns(db, "v_scaling", before_s, sizeof before_s);
        exec_ok(db,
                "INSERT INTO nodes (agent_id, name, state, cpu_model, n_gpus, gpu_model, "
                "first_seen, last_seen) VALUES ('a1', 'n1', 'lost', 'CPU Y', 4, 'GPU X', 't', 't');"
                "INSERT INTO sweeps (sweep_id, spec, n_jobs, state, created_at) "
                "VALUES (1, '{}', 6, 'failed', 't');"
                "INSERT INTO jobs (job_id, sweep_id, seq, kind, params, backend, n_gpus, state, "
                "attempt, max_attempts, created_at) VALUES "
                "(1, 1, 0, 'resnet50', '{\"kind\":\"resnet50\",\"gpus\":1}', 'cuda', 1, "
                "'done', 1, 3, 't'),"
                "(2, 1, 1, 'resnet50', '{\"kind\":\"resnet50\",\"gpus\":2}', 'cuda', 2, "
                "'done', 1, 3, 't'),"
                "(3, 1, 2, 'resnet50', '{\"kind\":\"resnet50\",\"gpus\":4}', 'cuda', 4, "
                "'done', 1, 3, 't'),"
                "(4, 1, 3, 'resnet50', '{\"kind\":\"resnet50\",\"gpus\":2,"
                "\"launch\":\"processes\"}', 'cuda', 2, 'failed', 1, 3, 't'),"
                "(5, 1, 4, 'resnet50', '{\"kind\":\"resnet50\",\"gpus\":2}', 'cuda', 2, "
                "'cancelled', 0, 3, 't'),"
                "(6, 1, 5, 'gemm', '{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72}', "
                "'cuda', 1, 'done', 1, 3, 't'),"
                "(7, 1, 6, 'gemm', '{\"kind\":\"gemm\",\"precision\":\"bf16\"}', 'cuda', 1, "
                "'failed', 1, 3, 't');"
                "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at) "
                "VALUES (1, 1, 'a1', 'cuda', 'done', 't'), (2, 1, 'a1', 'cuda', 'done', 't'),"
                "(3, 1, 'a1', 'cuda', 'done', 't'), (4, 1, 'a1', 'cuda', 'failed', 't'),"
                "(6, 1, 'a1', 'cuda', 'done', 't'), (7, 1, 'a1', 'cuda', 'failed', 't');"
                "INSERT INTO results (job_id, attempt, agent_id, status, kind, backend, "
                "device_model, n_devices, images_per_sec, valid, gflops, record, committed_at) "
                "VALUES "
                "(1, 1, 'a1', 'ok', 'resnet50', 'cuda', 'GPU X', 1, 100, 1, NULL, "
                "'{\"kind\":\"resnet50\",\"n_devices\":1}', 't'),"
                "(2, 1, 'a1', 'ok', 'resnet50', 'cuda', 'GPU X', 2, 190, 1, NULL, "
                "'{\"kind\":\"resnet50\",\"n_devices\":2,\"details\":{\"bucket_mb\":25}}', "
                "'t'),"
                "(3, 1, 'a1', 'ok', 'resnet50', 'cuda', 'GPU X', 4, 392, 1, NULL, "
                "'{\"kind\":\"resnet50\",\"n_devices\":4,\"details\":{\"launch\":"
                "\"processes\"}}', 't'),"
                "(4, 1, 'a1', 'failed', 'resnet50', NULL, NULL, NULL, NULL, NULL, NULL, "
                "'{\"kind\":\"resnet50\",\"error\":\"out of memory\"}', 't'),"
                "(6, 1, 'a1', 'ok', 'gemm', 'cuda', 'GPU X', 1, NULL, 1, 4.4, "
                "'{\"kind\":\"gemm\",\"m\":96,\"n\":80,\"k\":72}', 't');");
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        CHECK(gb_schema_version(db) == n);
        columns(db, "v_results", got, sizeof got);
        appended(got, before_r, ",launch");
        columns(db, "v_scaling", got, sizeof got);
        appended(got, before_s, ",launch");
        text(db,
             "SELECT group_concat(job_id || ':' || kind || ':' || COALESCE(launch, 'NULL'), '|') "
             "FROM (SELECT * FROM v_results ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:resnet50:NULL|2:resnet50:threads|3:resnet50:processes|"
                           "4:resnet50:processes|5:resnet50:auto|6:gemm:NULL|7:gemm:NULL") == 0,
               "v_results launch after the upgrade: %s", got);
        text(db,
             "SELECT group_concat(job_id || ':' || COALESCE(launch, 'NULL') || ':' || "
             "baseline_images_per_sec || ':' || speedup, '|') "
             "FROM (SELECT * FROM v_scaling ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:NULL:100.0:1.0|2:threads:100.0:1.9|3:processes:100.0:3.92") == 0,
               "v_scaling after the upgrade: %s", got);
        /* 0019's v_models reads the upgraded v_results: the one-GPU run */
        text(db, "SELECT runs || ':' || median_images_per_sec FROM v_models", got, sizeof got);
        CHECKF(strcmp(got, "1:100.0") == 0, "v_models after the upgrade: %s", got);
        /* 0021's v_gemm_models: the gemm, stored before gemm had a precision
         * (job and record without one), is fp32, the only one it ran in */
        text(db,
             "SELECT gpu_model || ':' || backend || ':' || precision || ':' || m || 'x' || n || "
             "'x' || k || ':' || runs || ':' || median_gflops FROM v_gemm_models",
             got, sizeof got);
        CHECKF(strcmp(got, "GPU X:cuda:fp32:96x80x72:1:4.4") == 0,
               "v_gemm_models after the upgrade: %s", got);
        /* ... by 0021's jobs.precision for gemm jobs: the parameter, else
         * fp32; a failed gemm, with no record, says it too */
        text(db,
             "SELECT group_concat(job_id || ':' || COALESCE(precision, 'NULL'), '|') FROM "
             "(SELECT * FROM v_results WHERE kind = 'gemm' ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "6:fp32|7:bf16") == 0, "gemm precisions after the upgrade: %s", got);
    } else if (strcmp(c, "upgrade_0022") == 0) {
        /* a store at 0022: job 1 failed when its one attempt was given up
         * (its agent lost), and the agent came back with that attempt's
         * result, kept as superseded; job 2 was done. The views showed job
         * 1's late figures (images/s, valid, telemetry) as the failed job's;
         * after 0023 job 1 has none, job 2 its own, and every column is as
         * it was */
        CHECK(n >= 23 && strcmp(gb_schema_migrations[21].name, "0022_scaling_model_baseline") == 0);
        CHECK(strcmp(gb_schema_migrations[22].name, "0023_superseded_results") == 0);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, 22, err, sizeof err) == 0, "%s", err);
        static const char *const views[] = {"v_results", "v_allreduce", "v_telemetry",
                                            "v_cpu_telemetry"};
        char before[4][1024], got[1024];
        for (int i = 0; i < 4; i++)
            columns(db, views[i], before[i], sizeof before[i]);
        exec_ok(db,
                "INSERT INTO nodes (agent_id, name, state, cpu_model, n_gpus, gpu_model, "
                "first_seen, last_seen) VALUES ('a1', 'n1', 'connected', 'CPU Y', 0, '', 't', "
                "'t');"
                "INSERT INTO sweeps (sweep_id, spec, n_jobs, state, created_at) "
                "VALUES (1, '{}', 3, 'failed', 't');"
                "INSERT INTO jobs (job_id, sweep_id, seq, kind, params, backend, n_gpus, state, "
                "attempt, max_attempts, error, created_at) VALUES "
                "(1, 1, 0, 'resnet50', '{\"kind\":\"resnet50\"}', 'cpu', 1, 'failed', 1, 1, "
                "'gave up after 1 attempt(s); last: agent a1 lost', 't'),"
                "(2, 1, 1, 'resnet50', '{\"kind\":\"resnet50\"}', 'cpu', 1, 'done', 1, 1, NULL, "
                "'t'),"
                "(3, 1, 2, 'allreduce', '{\"kind\":\"allreduce\",\"interconnect\":\"pcie\"}', "
                "'cuda', 2, 'cancelled', 0, 1, 'cancelled by request', 't');"
                "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at) "
                "VALUES (1, 1, 'a1', 'cpu', 'superseded', 't'), (2, 1, 'a1', 'cpu', 'done', 't');"
                "INSERT INTO results (job_id, attempt, agent_id, status, kind, backend, "
                "device_model, n_devices, images_per_sec, valid, record, committed_at) VALUES "
                "(1, 1, 'a1', 'ok', 'resnet50', 'cpu', 'CPU Y', 1, 9.7, 1, "
                "'{\"kind\":\"resnet50\",\"telemetry\":{\"source\":\"proc\","
                "\"taken_pct\":64.4}}', 't'),"
                "(2, 1, 'a1', 'ok', 'resnet50', 'cpu', 'CPU Y', 1, 9.9, 1, "
                "'{\"kind\":\"resnet50\",\"telemetry\":{\"source\":\"proc\","
                "\"taken_pct\":1.5}}', 't');");
        text(db, "SELECT images_per_sec FROM v_results WHERE job_id = 1", got, sizeof got);
        CHECKF(strcmp(got, "9.7") == 0, "before 0023 the failed job showed %s img/s", got);
        CHECKF(gb_schema_migrate(db, gb_schema_migrations, gb_schema_n_migrations, err,
                                 sizeof err) == 0,
               "%s", err);
        for (int i = 0; i < 4; i++) {
            columns(db, views[i], got, sizeof got);
            CHECKF(strcmp(got, before[i]) == 0, "%s's columns changed: %s", views[i], got);
        }
        text(db,
             "SELECT group_concat(job_id || ':' || status || ':' || COALESCE(images_per_sec, "
             "'NULL') || ':' || COALESCE(valid, 'NULL'), '|') FROM (SELECT * FROM v_results "
             "ORDER BY job_id)",
             got, sizeof got);
        CHECKF(strcmp(got, "1:failed:NULL:NULL|2:done:9.9:1|3:cancelled:NULL:NULL") == 0,
               "v_results: %s", got);
        /* an allreduce that never ran says which interconnect it was to
         * measure (jobs.interconnect was left NULL for it) */
        text(db, "SELECT COALESCE(interconnect, 'NULL') FROM v_results WHERE job_id = 3", got,
             sizeof got);
        CHECKF(strcmp(got, "pcie") == 0, "the cancelled allreduce's interconnect: %s", got);
        text(db, "SELECT group_concat(job_id, '|') FROM v_cpu_telemetry", got, sizeof got);
        CHECKF(strcmp(got, "2") == 0, "v_cpu_telemetry's jobs: %s", got);
        /* the late result itself is kept */
        CHECK(count(db, "SELECT count(*) FROM results WHERE job_id = 1 AND images_per_sec = 9.7") ==
              1);
    } else if (strcmp(c, "gap") == 0) {
        const gb_migration_t list[] = {{1, "0001_a", "CREATE TABLE a (x);"},
                                       {3, "0003_c", "CREATE TABLE c (x);"}};
        CHECK(gb_schema_migrate(db, list, 2, err, sizeof err) != 0);
        CHECKF(strstr(err, "numbered 3, expected 2"), "%s", err);
        CHECK(gb_schema_version(db) == 0);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    sqlite3_close(db);
    unlink(path);
    return 0;
}
