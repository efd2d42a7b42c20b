/* test_scaling.c - the views of schema/0002 on a real SQLite file, filled
 * through the store's own code (gb_store_* and gb_ranks_*, as the
 * coordinator writes them): v_scaling's baselines, speedups and
 * efficiencies on known figures (a median of several one-GPU runs, invalid
 * and failed runs left out, a missing baseline and a zero one giving NULL
 * rather than a division by zero, multi-node rows counting every GPU),
 * v_allreduce's per-size rows from a record's "sizes", the NCCL transports
 * in v_results and v_scaling, v_ranks, the NVLink-against-PCIe query of
 * docs/scaling.md, and how the replicas were launched (0020: threads or
 * processes, apart in the query; NULL for one replica per node and for
 * other kinds).
 *   test_scaling            fills a store and checks the views
 *   test_scaling make PATH  fills the store at PATH and stops (it_scaling.sh
 *                           runs `gpubench scaling` on it) */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "ranks.h"
#include "record.h"
#include "store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sql_one.h"
#include "store_fixture.h"

static char path[128];
static gb_store_t *st;
static gb_ranks_t *rk;
static uint64_t sweep;
static int seq;
static const char *xparams = "";          /* more of the job's parameters: ", \"k\": v" */
static const char *model = "NVIDIA H100"; /* the records' device_model */

/* One finished job with its result, as the coordinator stores it. nodes is
 * "a" or "a,b" (rank order); state the job's end; record NULL for none. */
static uint64_t add_job(const char *kind, const char *nodes, int gpus, const char *precision,
                        int batch, const char *state, const char *record) {
    char params[256], now[] = "2024-05-01T12:00:00.000Z";
    int n_nodes = strchr(nodes, ',') ? 2 : 1;
    snprintf(params, sizeof params,
             "{\"kind\": \"%s\", \"gpus\": %d, \"precision\": \"%s\", \"batch\": %d,"
             " \"image_size\": 224%s%s}",
             kind, gpus, precision, batch, n_nodes > 1 ? ", \"n_nodes\": 2" : "", xparams);
    gb_store_job_t j = {.sweep_id = sweep,
                        .seq = seq++,
                        .kind = kind,
                        .params = params,
                        .backend = "cuda",
                        .precision = precision,
                        .interconnect = "auto",
                        .n_gpus = gpus,
                        .batch_per_gpu = batch,
                        .max_attempts = 3};
    uint64_t id;
    char agent0[16];
    snprintf(agent0, sizeof agent0, "agent-%c", nodes[0]);
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_store_job_insert(st, &j, now, &id) == 0);
    CHECK(gb_store_job_assign(st, id, 1, agent0, "cuda", now) == 0);
    if (n_nodes > 1) {
        CHECK(gb_ranks_insert(rk, id, 1, 0, agent0, "assigned", now) == 0);
        char agent1[16];
        snprintf(agent1, sizeof agent1, "agent-%c", nodes[2]);
        CHECK(gb_ranks_insert(rk, id, 1, 1, agent1, "waiting", now) == 0);
        CHECK(gb_ranks_set(rk, id, 1, 0, "done", "ended", now, NULL) == 0);
        CHECK(gb_ranks_set(rk, id, 1, 1, "done", "ended", now, NULL) == 0);
        /* each rank's own report: its checksum and how late it began */
        for (int k = 0; k < 2; k++) {
            char rrec[160];
            snprintf(rrec, sizeof rrec,
                     "{\"details\": {\"params_fnv\": \"00c0ffee00c0ffee\"}, \"dist\": "
                     "{\"started_at_ms\": %d, \"late_ms\": %d}}",
                     1000 + 3 * k, 3 * k);
            gb_rank_report_t rep = {.status = "ok", .record = rrec};
            int stored = 0;
            CHECK(gb_ranks_report(rk, id, 1, k, &rep, &stored) == 0 && stored);
        }
    }
    gb_test_job_end(st, id, agent0, kind, state, record, now);
    return id;
}

/* Node `node-X` (agent `agent-X`) in the store, committed. */
static void add_node(char x, const char *gpu_model, int gpus) {
    char id[16], name[16];
    snprintf(id, sizeof id, "agent-%c", x);
    snprintf(name, sizeof name, "node-%c", x);
    gb_store_node_t n = {.agent_id = id,
                         .name = name,
                         .state = "connected",
                         .cpu_model = "Xeon",
                         .os = "Debian 12",
                         .kernel = "Linux 6.1",
                         .driver_version = "570.00",
                         .cuda_driver_version = "12.8",
                         .labels = "",
                         .kinds = "resnet50",
                         .gpu_model = gpu_model,
                         .inventory_json = "{}",
                         .cpu_cores = 64,
                         .n_gpus = gpus,
                         .slots = 1};
    CHECK(gb_store_begin(st) == 0 &&
          gb_store_node_upsert(st, &n, "2024-05-01T12:00:00.000Z") == 0 &&
          gb_store_commit(st) == 0);
}

/* A ResNet-50 result record. */
static uint64_t run(const char *nodes, int gpus, const char *precision, int batch, double ips,
                    int valid, const char *ic, const char *transports, const char *state) {
    char rec[1024];
    int n_nodes = strchr(nodes, ',') ? 2 : 1;
    snprintf(rec, sizeof rec,
             "{\"kind\": \"resnet50\", \"backend\": \"cuda\", \"device_model\": \"%s\","
             " \"n_devices\": %d, \"precision\": \"%s\", \"valid\": %s, \"images_per_sec\": %.6f,"
             " \"step_ms\": {\"median\": 100, \"p90\": 101}, \"interconnect\": \"%s\","
             " \"image_size\": 224, \"batch_per_device\": %d%s%s%s}",
             model, gpus * n_nodes, precision, valid ? "true" : "false", ips, ic, batch,
             transports ? ", \"details\": {\"nccl_transports\": " : "",
             transports ? transports : "", transports ? "}" : "");
    return add_job("resnet50", nodes, gpus, precision, batch, state, rec);
}

static sqlite3 *ro;

#define one(sql)      gb_sql_one(ro, (sql))
#define EQ(sql, want) GB_SQL_EQ(ro, (sql), (want))

/* A number of v_scaling (the row of job id) within 1e-12 relative: the
 * figures are ratios of small decimals, exact to a few ulps in double. */
static void near(uint64_t job, const char *col, double want) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM v_scaling WHERE job_id = %llu", col,
             (unsigned long long)job);
    const char *got = one(sql);
    CHECKF(strcmp(got, "NULL") != 0 && got[0], "%s: NULL or no row, want %g", sql, want);
    double v = atof(got);
    CHECKF(fabs(v - want) <= 1e-12 * fabs(want), "%s: got %.17g, want %.17g", sql, v, want);
}

static void null(uint64_t job, const char *col) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM v_scaling WHERE job_id = %llu", col,
             (unsigned long long)job);
    EQ(sql, "NULL");
}

/* The query of docs/scaling.md that puts NVLink and PCIe side by side. */
static const char side_by_side[] =
    "SELECT node, gpu_model, precision, n_gpus,"
    "       max(CASE WHEN interconnect = 'nvlink' THEN images_per_sec END) AS nvlink_img_s,"
    "       max(CASE WHEN interconnect = 'pcie' THEN images_per_sec END) AS pcie_img_s,"
    "       round(max(CASE WHEN interconnect = 'nvlink' THEN efficiency END), 3) AS nvlink_eff,"
    "       round(max(CASE WHEN interconnect = 'pcie' THEN efficiency END), 3) AS pcie_eff,"
    "       round(max(CASE WHEN interconnect = 'nvlink' THEN images_per_sec END)"
    "           / max(CASE WHEN interconnect = 'pcie' THEN images_per_sec END), 3) AS nvlink_gain"
    " FROM v_scaling WHERE n_gpus > 1 AND n_nodes = 1"
    " GROUP BY node, gpu_model, precision, batch_per_gpu, image_size, n_gpus, bucket_mb, launch"
    " HAVING nvlink_img_s IS NOT NULL AND pcie_img_s IS NOT NULL"
    " ORDER BY node, precision, n_gpus";

int main(int argc, char **argv) {
    int make = argc == 3 && strcmp(argv[1], "make") == 0;
    CHECKF(argc == 1 || make, "usage: test_scaling [make PATH]");
    CHECKF(!make || strlen(argv[2]) < sizeof path, "%s: a shorter path, please", argv[2]);
    if (make)
        snprintf(path, sizeof path, "%s", argv[2]);
    else
        snprintf(path, sizeof path, "/tmp/gb-scaling-%d.db", (int)getpid());
    if (make) unlink(path);
    char err[512];
    st = gb_store_open(path, err, sizeof err);
    CHECKF(st, "%s", err);
    rk = gb_ranks_new(st, err, sizeof err);
    CHECKF(rk, "%s", err);
    const char *now = "2024-05-01T12:00:00.000Z";
    add_node('a', "NVIDIA H100", 8);
    add_node('b', "NVIDIA H100", 8);
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_store_sweep_insert(st, "scaling", "{}", 20, NULL, now, &sweep) == 0);
    CHECK(gb_store_commit(st) == 0);

    /* node a, bf16, batch 64: one GPU 100, 110, 90 -> median 100; an
     * invalid 1000 and a failed 5 would move it if they counted */
    uint64_t one_a = run("a", 1, "bf16", 64, 100, 1, "none", NULL, "done");
    run("a", 1, "bf16", 64, 110, 1, "none", NULL, "done");
    run("a", 1, "bf16", 64, 90, 1, "none", NULL, "done");
    uint64_t bad1 = run("a", 1, "bf16", 64, 1000, 0, "none", NULL, "done");
    uint64_t failed1 = run("a", 1, "bf16", 64, 5, 1, "none", NULL, "failed");
    uint64_t two = run("a", 2, "bf16", 64, 196, 1, "nvlink", "[\"P2P/CUMEM\"]", "done");
    uint64_t nv8 = run("a", 8, "bf16", 64, 780, 1, "nvlink", "[\"P2P/CUMEM\", \"NVLS\"]", "done");
    uint64_t pc8 = run("a", 8, "bf16", 64, 700, 1, "pcie", "{\"SHM\": 56}", "done");
    uint64_t bad8 = run("a", 8, "bf16", 64, 999, 0, "nvlink", NULL, "done");
    /* a faster NVLink run with 1 MB buckets (the others: the default 25):
     * another configuration, not the 8-GPU NVLink figure beside PCIe's */
    uint64_t nv8_b1 =
        run("a", 8, "bf16", 64, 790, 1, "nvlink", "[\"P2P/CUMEM\"], \"bucket_mb\": 1", "done");
    /* how the replicas ran (0020): a faster run as processes and one as
     * threads beside nv8 (stored before records said: threads); two
     * configurations, never one figure in the query */
    uint64_t nv8_proc = run("a", 8, "bf16", 64, 800, 1, "nvlink",
                            "[\"P2P/CUMEM\"], \"launch\": \"processes\"", "done");
    uint64_t nv8_thr = run("a", 8, "bf16", 64, 770, 1, "nvlink",
                           "[\"P2P/CUMEM\"], \"launch\": \"threads\"", "done");
    /* failed runs say no launch: the job's parameter, else auto */
    xparams = ", \"launch\": \"processes\"";
    uint64_t failed_proc = run("a", 8, "bf16", 64, 5, 1, "nvlink", NULL, "failed");
    xparams = "";
    uint64_t failed_auto = run("a", 8, "bf16", 64, 5, 1, "nvlink", NULL, "failed");
    /* one GPU on each of two nodes: one replica per node, nothing launched */
    uint64_t multi1 = run("a,b", 1, "bf16", 64, 190, 1, "tcp", NULL, "done");
    uint64_t gemm = add_job("gemm", "a", 1, "fp32", 0, "done",
                            "{\"kind\": \"gemm\", \"backend\": \"cuda\", \"device_model\":"
                            " \"NVIDIA H100\", \"n_devices\": 1, \"valid\": true, \"m\": 96,"
                            " \"n\": 80, \"k\": 72, \"ms_median\": 0.25, \"gflops\": 4.4}");
    uint64_t multi =
        run("a,b", 8, "bf16", 64, 1500, 1, "nvlink", "[\"P2P/CUMEM\", \"NET/IB\"]", "done");
    /* fp16 without a one-GPU fp16 run: no baseline */
    uint64_t fp16 = run("a", 8, "fp16", 64, 1600, 1, "nvlink", NULL, "done");
    /* batch 128: two one-GPU runs, the median is their mean */
    run("a", 1, "bf16", 128, 120, 1, "none", NULL, "done");
    run("a", 1, "bf16", 128, 130, 1, "none", NULL, "done");
    uint64_t four = run("a", 4, "bf16", 128, 490, 1, "pcie", NULL, "done");
    /* node b: a one-GPU run that measured 0 img/s is no baseline to divide by */
    run("b", 1, "bf16", 64, 0, 1, "none", NULL, "done");
    uint64_t b4 = run("b", 4, "bf16", 64, 400, 1, "nvlink", NULL, "done");
    /* two nodes with rank 0 on node b, which has no one-GPU run of its own:
     * the median over every node of the GPU model (node a's 100) */
    uint64_t multi_b = run("b,a", 8, "bf16", 64, 1520, 1, "nvlink", NULL, "done");
    /* an allreduce result: three sizes */
    uint64_t ar = add_job(
        "allreduce", "a", 8, "fp32", 1, "done",
        "{\"kind\": \"allreduce\", \"backend\": \"cuda\", \"device_model\": \"NVIDIA H100\","
        " \"n_devices\": 8, \"valid\": true, \"interconnect\": \"nvlink\","
        " \"details\": {\"nccl_transports\": [\"P2P/CUMEM\", \"NVLS\"]},"
        " \"sizes\": [{\"bytes\": 8, \"count\": 2, \"time_us\": 10.5, \"algbw_gbs\": 0.0008,"
        " \"busbw_gbs\": 0.0014, \"ok\": true},"
        " {\"bytes\": 1048576, \"count\": 262144, \"time_us\": 30, \"algbw_gbs\": 34.9,"
        " \"busbw_gbs\": 61.1, \"ok\": true},"
        " {\"bytes\": 1073741824, \"count\": 268435456, \"time_us\": 2800, \"algbw_gbs\": 383.5,"
        " \"busbw_gbs\": 671.1, \"ok\": false}]}");
    gb_ranks_destroy(&rk);
    gb_store_close(&st);
    if (make) return 0;

    CHECK(sqlite3_open_v2(path, &ro, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    char sql[512];

    /* rows: valid, successful resnet50 results only */
    EQ("SELECT count(*) FROM v_scaling", "18");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM v_scaling WHERE job_id IN (%llu, %llu, %llu)",
             (unsigned long long)bad1, (unsigned long long)failed1, (unsigned long long)bad8);
    EQ(sql, "0");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)ar);
    EQ(sql, "0");

    /* the baseline: median 100 of three valid runs */
    near(two, "baseline_images_per_sec", 100);
    near(two, "baseline_runs", 3);
    near(one_a, "speedup", 1.0);
    near(one_a, "efficiency", 1.0);
    near(two, "speedup", 1.96);
    near(two, "efficiency", 0.98);
    near(nv8, "speedup", 7.8);
    near(nv8, "efficiency", 0.975);
    near(pc8, "speedup", 7.0);
    near(pc8, "efficiency", 0.875);
    /* two nodes of 8: 16 GPUs against rank 0's node's one-GPU median */
    near(multi, "n_gpus", 16);
    near(multi, "n_nodes", 2);
    near(multi, "speedup", 15.0);
    near(multi, "efficiency", 1500.0 / 1600.0);
    snprintf(sql, sizeof sql, "SELECT node || '|' || nodes FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)multi);
    EQ(sql, "node-a|node-a,node-b");
    /* even count: the mean of the two middle ones (125) */
    near(four, "baseline_images_per_sec", 125);
    near(four, "speedup", 490.0 / 125.0);
    near(four, "efficiency", 490.0 / (4 * 125.0));
    /* no baseline, and a zero baseline: NULL, not an error */
    null(fp16, "baseline_images_per_sec");
    null(fp16, "speedup");
    null(fp16, "efficiency");
    null(b4, "speedup");
    null(b4, "efficiency");
    null(b4, "baseline_images_per_sec"); /* it read 0.0 */
    null(b4, "baseline_runs");
    null(b4, "baseline_scope");
    snprintf(sql, sizeof sql, "SELECT baseline_scope FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)multi);
    EQ(sql, "node");
    near(multi_b, "baseline_images_per_sec", 100);
    near(multi_b, "baseline_runs", 3);
    near(multi_b, "speedup", 15.2);
    near(multi_b, "efficiency", 1520.0 / 1600.0);
    snprintf(sql, sizeof sql, "SELECT baseline_scope FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)multi_b);
    EQ(sql, "gpu_model");

    /* what the record says it used, and what NCCL reported */
    snprintf(sql, sizeof sql,
             "SELECT interconnect || '|' || nccl_transports FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)nv8);
    EQ(sql, "nvlink|P2P/CUMEM,NVLS");
    snprintf(sql, sizeof sql, "SELECT nccl_transports FROM v_scaling WHERE job_id = %llu",
             (unsigned long long)pc8);
    EQ(sql, "SHM"); /* an object is read by its keys */
    snprintf(sql, sizeof sql, "SELECT nccl_transports FROM v_results WHERE job_id = %llu",
             (unsigned long long)four);
    EQ(sql, "NULL");
    snprintf(sql, sizeof sql,
             "SELECT n_nodes || '|' || nodes || '|' || n_gpus || '|' || nccl_transports"
             " FROM v_results WHERE job_id = %llu",
             (unsigned long long)multi);
    EQ(sql, "2|node-a,node-b|16|P2P/CUMEM,NET/IB");
    snprintf(sql, sizeof sql, "SELECT n_nodes || '|' || nodes FROM v_results WHERE job_id = %llu",
             (unsigned long long)two);
    EQ(sql, "1|node-a");

    /* the bucket: the record's, else the default; none for other kinds */
    snprintf(sql, sizeof sql,
             "SELECT bucket_mb || '|' || (SELECT bucket_mb FROM v_scaling WHERE job_id = %llu)"
             " FROM v_results WHERE job_id = %llu",
             (unsigned long long)nv8_b1, (unsigned long long)nv8_b1);
    EQ(sql, "1|1");
    snprintf(sql, sizeof sql,
             "SELECT bucket_mb || '|' || (SELECT bucket_mb FROM v_scaling WHERE job_id = %llu)"
             " FROM v_results WHERE job_id = %llu",
             (unsigned long long)nv8, (unsigned long long)nv8);
    EQ(sql, "25|25");
    snprintf(sql, sizeof sql, "SELECT bucket_mb FROM v_results WHERE job_id = %llu",
             (unsigned long long)ar);
    EQ(sql, "NULL");

    /* how the replicas ran: the record's launch, threads for a record of
     * before (nv8, multi: every such run ran as threads), the job's
     * parameter or auto for a failed run; NULL for one replica per node
     * (one GPU; one on each of two nodes) and for other kinds (the 8-GPU
     * allreduce, a gemm) */
    {
        const struct {
            uint64_t job;
            const char *want;
        } lw[] = {{nv8_proc, "processes|processes"},
                  {nv8_thr, "threads|threads"},
                  {nv8, "threads|threads"},
                  {multi, "threads|threads"},
                  {failed_proc, "processes|-"},
                  {failed_auto, "auto|-"},
                  {one_a, "NULL|NULL"},
                  {multi1, "NULL|NULL"},
                  {ar, "NULL|-"},
                  {gemm, "NULL|-"}};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) {
            snprintf(sql, sizeof sql,
                     "SELECT COALESCE(launch, 'NULL') || '|' || COALESCE((SELECT COALESCE(launch, "
                     "'NULL') FROM v_scaling WHERE job_id = %llu), '-') FROM v_results "
                     "WHERE job_id = %llu",
                     (unsigned long long)lw[i].job, (unsigned long long)lw[i].job);
            EQ(sql, lw[i].want);
        }
    }
    /* a run as processes and one as threads, same node and configuration:
     * two rows, each its own figure, against the same one-GPU median */
    near(nv8_proc, "images_per_sec", 800);
    near(nv8_thr, "images_per_sec", 770);
    near(nv8_proc, "baseline_images_per_sec", 100);
    near(nv8_thr, "baseline_images_per_sec", 100);
    near(nv8_proc, "baseline_runs", 3);
    near(nv8_thr, "baseline_runs", 3);
    near(nv8_proc, "speedup", 8.0);
    near(nv8_thr, "efficiency", 770.0 / 800.0);
    near(multi1, "speedup", 1.9); /* a NULL launch joins its baseline too */
    /* grouped by launch (NULL, the one-GPU rows, a group of its own): the
     * processes run apart from the threads runs, whose mean is 775 */
    EQ("SELECT group_concat(k, ' ') FROM (SELECT COALESCE(launch, 'NULL') || ':' || count(*) || "
       "':' || avg(images_per_sec) AS k FROM v_scaling WHERE node = 'node-a' AND n_nodes = 1 "
       "AND precision = 'bf16' AND batch_per_gpu = 64 AND n_gpus IN (1, 8) "
       "AND interconnect IN ('none', 'nvlink') AND bucket_mb = 25 GROUP BY launch ORDER BY launch)",
       "NULL:3:100.0 processes:1:800.0 threads:2:775.0");

    /* per-size all-reduce rows */
    EQ("SELECT count(*) FROM allreduce_sizes", "3");
    snprintf(sql, sizeof sql,
             "SELECT group_concat(bytes || ':' || busbw_gbs || ':' || ok, ' ') FROM"
             " (SELECT * FROM v_allreduce WHERE job_id = %llu ORDER BY bytes)",
             (unsigned long long)ar);
    EQ(sql, "8:0.0014:1 1048576:61.1:1 1073741824:671.1:0");
    EQ("SELECT DISTINCT node || '|' || n_gpus || '|' || interconnect || '|' || nccl_transports"
       " FROM v_allreduce",
       "node-a|8|nvlink|P2P/CUMEM,NVLS");

    /* ranks of the multi-node run */
    snprintf(sql, sizeof sql,
             "SELECT group_concat(rank || ':' || node || ':' || state, ' ') FROM"
             " (SELECT * FROM v_ranks WHERE job_id = %llu ORDER BY rank)",
             (unsigned long long)multi);
    EQ(sql, "0:node-a:done 1:node-b:done");
    /* every node ended with the same weights, and how late each began */
    snprintf(sql, sizeof sql,
             "SELECT count(DISTINCT params_fnv) || ',' || group_concat(late_ms, ',') FROM"
             " (SELECT * FROM v_ranks WHERE job_id = %llu ORDER BY rank)",
             (unsigned long long)multi);
    EQ(sql, "1,0,3");

    /* the documented NVLink-against-PCIe query: one row, node a's 8 GPUs
     * with 25 MB buckets as threads (790 with 1 MB and 800 as processes
     * have no PCIe run beside them: grouped with 780 they read 790 or 800) */
    sqlite3_stmt *s;
    CHECKF(sqlite3_prepare_v2(ro, side_by_side, -1, &s, NULL) == SQLITE_OK, "%s",
           sqlite3_errmsg(ro));
    CHECK(sqlite3_step(s) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 0), "node-a") == 0);
    CHECK(sqlite3_column_int(s, 3) == 8);
    CHECK(sqlite3_column_double(s, 4) == 780 && sqlite3_column_double(s, 5) == 700);
    CHECK(sqlite3_column_double(s, 6) == 0.975 && sqlite3_column_double(s, 7) == 0.875);
    CHECK(sqlite3_column_double(s, 8) == 1.114); /* round(780 / 700, 3) */
    CHECK(sqlite3_step(s) == SQLITE_DONE);
    sqlite3_finalize(s);

    /* node c holds GPUs of two models (a workstation's 4090 and A6000):
     * each model's rows against its own one-GPU median there. One baseline
     * for the node (27, the middle of 25, 26, 27, 100, 101) put the A6000's
     * 2-GPU 180 at an efficiency of 3.3 */
    st = gb_store_open(path, err, sizeof err);
    CHECKF(st, "%s", err);
    rk = gb_ranks_new(st, err, sizeof err);
    CHECKF(rk, "%s", err);
    add_node('c', "NVIDIA RTX 4090", 2);
    model = "NVIDIA GeForce RTX 4090";
    for (int i = 0; i < 3; i++)
        run("c", 1, "bf16", 64, 25 + i, 1, "none", NULL, "done");
    uint64_t c4090x2 = run("c", 2, "bf16", 64, 50, 1, "pcie", NULL, "done");
    model = "NVIDIA RTX A6000";
    run("c", 1, "bf16", 64, 100, 1, "none", NULL, "done");
    run("c", 1, "bf16", 64, 101, 1, "none", NULL, "done");
    uint64_t a6000x2 = run("c", 2, "bf16", 64, 180, 1, "pcie", NULL, "done");
    gb_ranks_destroy(&rk);
    gb_store_close(&st);
    near(a6000x2, "baseline_images_per_sec", 100.5);
    near(a6000x2, "baseline_runs", 2);
    near(a6000x2, "efficiency", 180.0 / (2 * 100.5));
    near(c4090x2, "baseline_images_per_sec", 26);
    near(c4090x2, "efficiency", 50.0 / (2 * 26));
    sqlite3_close(ro);
    const char *keep = getenv("GB_KEEP_TMP"); /* as the integration tests: keep it to look at */
    if (keep && strcmp(keep, "1") == 0) {
        printf("store kept: %s\n", path);
        return 0;
    }
    char wal[160];
    unlink(path);
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", path);
    unlink(wal);
    return 0;
}
