/* test_migrate.c - schema migrations (schema/migrate.c) on real SQLite
 * files: a fresh store reaches the last version with every table and the two
 * public views exactly as documented; re-running changes nothing; a newer
 * store is refused; a failing migration leaves the store as it was; a gap
 * in the numbering is refused. `test_migrate CASE`. */
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
