/* test_store.c - the coordinator's store (coordinator/store.c) on a real
 * SQLite file: pragmas, nodes with GPUs and links, the life of a job, a
 * result stored once however often it is sent, foreign keys enforced, what
 * v_results and v_nodes show, and what a reopened store loads. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_schema.h"
#include "store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[128];

static char *one(const char *sql) {
    static char buf[1024];
    sqlite3 *db;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    CHECKF(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
           sqlite3_errmsg(db));
    buf[0] = '\0';
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, sizeof buf, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return buf;
}

#define EQ(sql, want)                                                                              \
    do {                                                                                           \
        const char *got_ = one(sql);                                                               \
        CHECKF(strcmp(got_, (want)) == 0, "%s: got '%s', want '%s'", (sql), got_, (want));         \
    } while (0)

static int nodes_seen, jobs_seen, free_seen = -1, cancel_seen = -1;
static char reason_seen[128];
static void on_node(void *ctx, const gb_store_node_t *n) {
    (void)ctx;
    nodes_seen++;
    CHECK(strcmp(n->agent_id, "agent1") == 0 && strcmp(n->name, "node-1") == 0);
    CHECK(n->n_gpus == 2 && n->has_nvlink == 1 && n->slots == 1);
}
static void on_job(void *ctx, const gb_store_job_t *j) {
    (void)ctx;
    jobs_seen++;
    CHECK(j->job_id == 2 && strcmp(j->state, "running") == 0 && j->attempt == 1);
    CHECK(strcmp(j->agent_id, "agent1") == 0 && strcmp(j->attempt_state, "running") == 0);
    CHECK(strcmp(j->attempt_backend, "cuda") == 0 && strstr(j->params, "\"gemm\""));
    free_seen = j->free_attempts;
    cancel_seen = j->cancel_requested;
    snprintf(reason_seen, sizeof reason_seen, "%s", j->cancel_reason ? j->cancel_reason : "NULL");
}
static unsigned st_total, st_done, st_running;
static void on_status(void *ctx, const gb_store_sweep_status_t *s) {
    (void)ctx;
    st_total = s->total;
    st_done = s->done;
    st_running = s->running;
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/gb-store-%d.db", (int)getpid());
    char err[512];
    gb_store_t *s = gb_store_open(path, err, sizeof err);
    CHECKF(s, "%s", err);
    EQ("PRAGMA journal_mode", "wal");
    char version[16];
    snprintf(version, sizeof version, "%zu", gb_schema_n_migrations);
    EQ("PRAGMA user_version", version);

    gb_store_gpu_t gpus[2] = {
        {0, "NVIDIA H200", "GPU-a", "00000000:18:00.0", 150ull << 30, 132, 9, 0, 5, 16, 700.0},
        {1, "NVIDIA H200", "GPU-b", "00000000:2A:00.0", 150ull << 30, 132, 9, 0, 5, 16, -1},
    };
    gb_store_link_t links[1] = {{0, 1, 18, "numa_node"}};
    gb_store_node_t n = {.agent_id = "agent1",
                         .name = "node-1",
                         .state = "connected",
                         .cpu_model = "Xeon",
                         .os = "Debian",
                         .kernel = "Linux 6",
                         .driver_version = "560",
                         .cuda_driver_version = "12.6",
                         .gpu_model = "NVIDIA H200",
                         .labels = "rack=a",
                         .kinds = "gemm",
                         .inventory_json = "{\"hostname\":\"node-1\"}",
                         .cpu_cores = 64,
                         .n_gpus = 2,
                         .slots = 1,
                         .has_nvlink = 1,
                         .memory_bytes = 1ull << 40,
                         .gpus = gpus,
                         .links = links,
                         .n_links = 1};
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_node_upsert(s, &n, "2024-01-01T00:00:00.000Z") == 0);
    CHECK(gb_store_node_upsert(s, &n, "2024-01-01T00:00:05.000Z") == 0); /* again: replaced */
    CHECK(gb_store_commit(s) == 0);
    EQ("SELECT count(*) FROM gpus", "2");
    EQ("SELECT power_limit_w FROM gpus WHERE idx = 0", "700.0");
    EQ("SELECT power_limit_w IS NULL FROM gpus WHERE idx = 1", "1");
    EQ("SELECT nvlink_lanes || pcie_path FROM links", "18numa_node");
    EQ("SELECT first_seen || ' ' || last_seen FROM nodes",
       "2024-01-01T00:00:00.000Z 2024-01-01T00:00:05.000Z");
    EQ("SELECT node || ',' || state || ',' || n_gpus || ',' || gpu_model || ',' || labels FROM "
       "v_nodes",
       "node-1,connected,2,NVIDIA H200,rack=a");
    EQ("SELECT json_extract(inventory, '$.hostname') FROM nodes", "node-1");

    uint64_t sweep = 0, j1 = 0, j2 = 0;
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_sweep_insert(s, "t", "{\"kind\":\"gemm\"}", 2, NULL, "2024-01-01T00:00:10.000Z",
                                &sweep) == 0);
    /* a spec cJSON takes but SQLite's JSON does not (a byte-order mark, a
     * leading zero) is stored as cJSON writes it: one such row made every
     * json_extract() over sweeps.spec fail ("malformed JSON") */
    uint64_t odd = 0;
    CHECK(gb_store_sweep_insert(s, "odd", "\xef\xbb\xbf{\"kind\": \"sleep\", \"duration_ms\": 010}",
                                1, NULL, "2024-01-01T00:00:10.000Z", &odd) == 0);

    gb_store_job_t sj = {.sweep_id = sweep,
                         .seq = 0,
                         .kind = "gemm",
                         .params = "{\"kind\":\"gemm\",\"m\":8}",
                         .backend = "auto",
                         .n_gpus = 1,
                         .batch_per_gpu = -1,
                         .max_attempts = 3};
    CHECK(gb_store_job_insert(s, &sj, "2024-01-01T00:00:10.000Z", &j1) == 0);
    sj.seq = 1;
    CHECK(gb_store_job_insert(s, &sj, "2024-01-01T00:00:10.000Z", &j2) == 0);
    CHECK(j1 == 1 && j2 == 2);
    sj.seq = 1;
    CHECK(gb_store_job_insert(s, &sj, "x", &j2) != 0); /* (sweep, seq) unique */
    CHECK(gb_store_job_assign(s, j1, 1, "agent1", "cuda", "2024-01-01T00:00:11.000Z") == 0);
    CHECK(gb_store_attempt_started(s, j1, 1, "2024-01-01T00:00:11.500Z") == 0);
    CHECK(gb_store_job_assign(s, 2, 1, "agent1", "cuda", "2024-01-01T00:00:11.000Z") == 0);
    CHECK(gb_store_attempt_started(s, 2, 1, "2024-01-01T00:00:11.500Z") == 0);
    CHECK(gb_store_commit(s) == 0);
    EQ("SELECT count(*) FROM sweeps WHERE json_valid(spec)", "2");
    EQ("SELECT json_extract(spec, '$.duration_ms') FROM sweeps WHERE name = 'odd'", "10");
    EQ("SELECT spec FROM sweeps WHERE name = 't'", "{\"kind\":\"gemm\"}"); /* as submitted */

    char agent[65], state[16];
    CHECK(gb_store_attempt_get(s, j1, 1, agent, sizeof agent, state, sizeof state) == 0);
    CHECK(strcmp(agent, "agent1") == 0 && strcmp(state, "running") == 0);
    CHECK(gb_store_attempt_get(s, j1, 2, agent, sizeof agent, state, sizeof state) == 1);

    const double ms[3] = {1.5, 1.25, 1.75}, loss[3] = {2.0, 1.9, NAN};
    gb_store_result_t r = {.job_id = j1,
                           .attempt = 1,
                           .agent_id = "agent1",
                           .status = "ok",
                           .kind = "gemm",
                           .backend = "cuda",
                           .device_model = "NVIDIA H200",
                           .precision = "fp32",
                           .n_devices = 1,
                           .images_per_sec = NAN,
                           .step_ms_median = 1.5,
                           .step_ms_p90 = 1.75,
                           .gflops = 900.5,
                           .valid = 1,
                           .record = "{\"kind\":\"gemm\",\"gflops\":900.5}",
                           .step_ms = ms,
                           .loss = loss,
                           .n_samples = 3,
                           .samples_stride = 10, /* each the mean of 10 steps */
                           .agent_key = "rq:rYn&G]Jtu)@-ZT5.q0k2KC$>dNz5nWT%F(b:6",
                           .key_name = "node-a"};
    int inserted = -1;
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_result_insert(s, &r, "2024-01-01T00:00:12.000Z", &inserted) == 0 &&
          inserted == 1);
    CHECK(gb_store_result_insert(s, &r, "2024-01-01T00:00:13.000Z", &inserted) == 0 &&
          inserted == 0);
    CHECK(gb_store_attempt_end(s, j1, 1, "done", NULL, "2024-01-01T00:00:12.000Z") == 0);
    CHECK(gb_store_job_finish(s, j1, "done", NULL, "2024-01-01T00:00:12.000Z") == 0);
    CHECK(gb_store_commit(s) == 0);
    EQ("SELECT count(*) FROM results", "1");
    EQ("SELECT committed_at FROM results",
       "2024-01-01T00:00:12.000Z"); /* the first, not the resend */
    EQ("SELECT count(*) || ',' || sum(loss IS NULL) FROM samples", "3,1");
    EQ("SELECT agent_key || ' ' || key_name FROM results",
       "rq:rYn&G]Jtu)@-ZT5.q0k2KC$>dNz5nWT%F(b:6 node-a");
    EQ("SELECT group_concat(step) FROM (SELECT step FROM samples ORDER BY step)", "0,10,20");
    /* a result needs its attempt */
    r.job_id = j2;
    r.attempt = 7;
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_result_insert(s, &r, "now", &inserted) != 0);
    CHECKF(strstr(gb_store_errmsg(s), "FOREIGN KEY"), "%s", gb_store_errmsg(s));
    gb_store_rollback(s);

    /* v_results: only finished jobs, with the ending attempt's figures */
    EQ("SELECT count(*) FROM v_results", "1");
    EQ("SELECT sweep_id || ',' || job_id || ',' || node || ',' || gpu_model || ',' || backend || "
       "','"
       " || kind || ',' || n_gpus || ',' || precision || ',' || ifnull(batch_per_gpu, '-') || ','"
       " || ifnull(images_per_sec, '-') || ',' || step_ms_median || ',' || step_ms_p90 || ','"
       " || status || ',' || ifnull(error, '-') || ',' || finished_at || ',' || synthetic || ','"
       " || attempt || ',' || gflops FROM v_results",
       "1,1,node-1,NVIDIA "
       "H200,cuda,gemm,1,fp32,-,-,1.5,1.75,done,-,2024-01-01T00:00:12.000Z,0,1,900.5");
    CHECK(gb_store_sweep_status(s, sweep, on_status, NULL) == 1);
    CHECK(st_total == 2 && st_done == 1 && st_running == 1);
    CHECK(gb_store_sweep_status(s, 999, on_status, NULL) == 0);
    gb_store_close(&s);
    CHECK(s == NULL);
    gb_store_close(&s);

    /* reopened: the unfinished job and the node come back */
    s = gb_store_open(path, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(gb_store_load_nodes(s, on_node, NULL) == 0 && nodes_seen == 1);
    CHECK(gb_store_load_jobs(s, on_job, NULL) == 0 && jobs_seen == 1);
    CHECK(free_seen == 0);
    /* an attempt given up and then revived; the count of attempts that did
     * not count is kept with the requeue (schema 0003) */
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_attempt_end(s, 2, 1, "lost", "agent lost", "t") == 0);
    CHECK(gb_store_job_requeue(s, 2, 1) == 0);
    CHECK(gb_store_attempt_revive(s, 2, 1, "agent1") == 0);
    CHECK(gb_store_commit(s) == 0);
    EQ("SELECT j.state || ',' || a.state || ',' || ifnull(a.error, '-') FROM jobs j JOIN attempts a"
       " USING (job_id) WHERE job_id = 2",
       "running,running,-");
    EQ("SELECT free_attempts FROM jobs WHERE job_id = 2", "1");
    CHECK(gb_store_load_jobs(s, on_job, NULL) == 0 && jobs_seen == 2 && free_seen == 1);
    CHECK(cancel_seen == 0 && strcmp(reason_seen, "NULL") == 0);
    /* a running job's cancel keeps its reason (schema 0017), and a reopened
     * store loads it; none given: NULL, the default */
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_job_cancel_requested(s, 2, NULL) == 0);
    CHECK(gb_store_commit(s) == 0);
    CHECK(gb_store_load_jobs(s, on_job, NULL) == 0 && jobs_seen == 3);
    CHECK(cancel_seen == 1 && strcmp(reason_seen, "NULL") == 0);
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_job_cancel_requested(s, 2, "cancelled: gpubench run --timeout 5 s ran out") ==
          0);
    CHECK(gb_store_commit(s) == 0);
    gb_store_close(&s);
    s = gb_store_open(path, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(gb_store_load_jobs(s, on_job, NULL) == 0 && jobs_seen == 4 && cancel_seen == 1);
    CHECKF(strcmp(reason_seen, "cancelled: gpubench run --timeout 5 s ran out") == 0, "%s",
           reason_seen);
    EQ("SELECT cancel_requested || ',' || cancel_reason FROM jobs WHERE job_id = 2",
       "1,cancelled: gpubench run --timeout 5 s ran out");

    /* a sweep's queued jobs cancelled in one statement: its running one and
     * another sweep's jobs untouched */
    gb_store_job_t bj = {.kind = "sleep",
                         .params = "{\"kind\":\"sleep\"}",
                         .backend = "cpu",
                         .n_gpus = 1,
                         .batch_per_gpu = -1,
                         .synthetic = 1,
                         .max_attempts = 1};
    uint64_t bulk = 0, ids[3] = {0};
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_sweep_insert(s, "bulk", "{}", 3, NULL, "t", &bulk) == 0);
    bj.sweep_id = bulk;
    for (int i = 0; i < 3; i++) {
        bj.seq = i;
        CHECK(gb_store_job_insert(s, &bj, "t1", &ids[i]) == 0);
    }
    CHECK(gb_store_commit(s) == 0);
    char q[512];
    int n_cancelled = -1;
    CHECK(gb_store_begin(s) == 0);
    CHECK(gb_store_job_assign(s, ids[0], 1, "agent1", "cuda", "t") == 0);
    CHECK(gb_store_sweep_cancel_queued(s, bulk, "cancelled: test", "t3", &n_cancelled) == 0);
    CHECK(gb_store_commit(s) == 0);
    CHECKF(n_cancelled == 2, "%d", n_cancelled);
    snprintf(q, sizeof q,
             "SELECT group_concat(seq || ',' || state || ',' || ifnull(error, '-') || ',' ||"
             " ifnull(finished_at, '-') || ',' || ifnull(agent_id, '-'), ' ') FROM (SELECT * FROM"
             " jobs WHERE sweep_id = %llu ORDER BY seq)",
             (unsigned long long)bulk);
    EQ(q, "0,running,-,-,agent1 1,cancelled,cancelled: test,t3,- 2,cancelled,cancelled: test,t3,-");
    EQ("SELECT count(*) FROM jobs WHERE state = 'cancelled'", "2");

    /* the WAL grows while a reader holds a snapshot, and is cut back to
     * journal_size_limit (4 MiB) once it starts over; it kept its peak */
    char walp[160];
    struct stat wst;
    snprintf(walp, sizeof walp, "%s-wal", path);
    sqlite3 *rd = NULL;
    CHECK(sqlite3_open(path, &rd) == SQLITE_OK);
    CHECK(sqlite3_exec(rd, "BEGIN; SELECT count(*) FROM sweeps;", NULL, NULL, NULL) == SQLITE_OK);
    static char big[8192];
    memset(big, 'x', sizeof big - 1);
    for (int i = 0; i < 800; i++) {
        uint64_t sw;
        CHECK(gb_store_begin(s) == 0);
        CHECK(gb_store_sweep_insert(s, "big", big, 0, NULL, "t", &sw) == 0);
        CHECK(gb_store_commit(s) == 0);
    }
    CHECK(stat(walp, &wst) == 0 && wst.st_size > (6 << 20));
    CHECK(sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_wal_checkpoint_v2(rd, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) == SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        uint64_t sw;
        CHECK(gb_store_begin(s) == 0);
        CHECK(gb_store_sweep_insert(s, "after", "{}", 0, NULL, "t", &sw) == 0);
        CHECK(gb_store_commit(s) == 0);
    }
    CHECKF(stat(walp, &wst) == 0 && wst.st_size <= (4 << 20), "the WAL kept %lld bytes",
           (long long)wst.st_size);
    sqlite3_close(rd);
    gb_store_close(&s);

    /* a file that is not a database */
    FILE *f = fopen(path, "w");
    fputs("this is not sqlite", f);
    fclose(f);
    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    CHECK(gb_store_open(path, err, sizeof err) == NULL);
    CHECKF(strstr(err, "not a database"), "%s", err);
    unlink(path);
    snprintf(wal, sizeof wal, "%s-shm", path);
    unlink(wal);
    return 0;
}
