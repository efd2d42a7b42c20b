/* test_models.c - v_models (schema/0019) on a real SQLite file, filled
 * through the store's own code (gb_store_*, as the coordinator writes
 * results): one row per GPU model and configuration over done, valid,
 * one-GPU, one-node ResNet-50 runs, with the median of an odd and of an
 * even count, min, max, runs, nodes and the latest finished_at; invalid,
 * failed, multi-GPU and multi-node runs, gemm results and other batches or
 * image sizes never counted in. And its gemm twin v_gemm_models (0021):
 * one row per model, precision and shape (m, n, k) over done, valid gemm
 * runs, ResNet-50 runs and invalid or failed gemms never counted in.
 *   test_models view       fills a store and checks the views
 *   test_models make PATH  fills the store at PATH (it_compare.sh runs
 *                          `gpubench compare` on it)
 *   test_models empty PATH a store with jobs but no row v_models counts
 *   test_models empty_gemm PATH  ... no row v_gemm_models counts */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "record.h"
#include "store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sql_one.h"
#include "store_fixture.h"

static gb_store_t *st;
static uint64_t sweep;
static int seq;

/* One finished job with the record rec, as the coordinator stores it: on
 * node (a letter), n_nodes in the job's params (extra: more of them). */
static uint64_t job(char node, const char *kind, const char *backend, int gpus, int n_nodes,
                    const char *precision, int batch, int image, const char *extra, const char *rec,
                    const char *state) {
    char params[256], now[64], agent[16];
    /* every job a second later: last_finished_at is the latest */
    snprintf(now, sizeof now, "2024-05-01T12:%02d:%02d.000Z", seq / 60, seq % 60);
    snprintf(agent, sizeof agent, "agent-%c", node);
    snprintf(params, sizeof params,
             "{\"kind\": \"%s\", \"gpus\": %d, \"precision\": \"%s\", \"batch\": %d,"
             " \"image_size\": %d%s%s}",
             kind, gpus, precision, batch, image, n_nodes > 1 ? ", \"n_nodes\": 2" : "", extra);
    gb_store_job_t j = {.sweep_id = sweep,
                        .seq = seq++,
                        .kind = kind,
                        .params = params,
                        .backend = backend,
                        .precision = precision,
                        .interconnect = "auto",
                        .n_gpus = gpus,
                        .batch_per_gpu = batch,
                        .max_attempts = 3};
    uint64_t id;
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_store_job_insert(st, &j, now, &id) == 0);
    CHECK(gb_store_job_assign(st, id, 1, agent, backend, now) == 0);
    gb_test_job_end(st, id, agent, kind, state, rec, now);
    return id;
}

/* One finished job with its result: `gpus` devices in the record. */
static uint64_t add(char node, const char *kind, const char *backend, const char *model, int gpus,
                    int n_nodes, const char *precision, int batch, int image, double ips, int valid,
                    const char *state) {
    char rec[1024];
    if (strcmp(kind, "gemm") == 0)
        snprintf(rec, sizeof rec,
                 "{\"kind\": \"gemm\", \"backend\": \"%s\", \"device_model\": \"%s\","
                 " \"n_devices\": 1, \"valid\": true, \"gflops\": %.6f, \"m\": 64, \"n\": 64,"
                 " \"k\": 64, \"reps\": 10, \"ms_median\": 1}",
                 backend, model, ips);
    else
        snprintf(rec, sizeof rec,
                 "{\"kind\": \"resnet50\", \"backend\": \"%s\", \"device_model\": \"%s\","
                 " \"n_devices\": %d, \"precision\": \"%s\", \"valid\": %s,"
                 " \"images_per_sec\": %.6f, \"step_ms\": {\"median\": 100, \"p90\": 101},"
                 " \"interconnect\": \"none\", \"image_size\": %d, \"batch_per_device\": %d}",
                 backend, model, gpus, precision, valid ? "true" : "false", ips, image, batch);
    return job(node, kind, backend, gpus, n_nodes, precision, batch, image, "", rec, state);
}

/* A gemm of shape m x n x k on one device at gflops. */
static void gemm(char node, const char *backend, const char *model, const char *precision, int m,
                 int n, int k, double gflops, int valid, const char *state) {
    char rec[1024], extra[96];
    snprintf(rec, sizeof rec,
             "{\"kind\": \"gemm\", \"backend\": \"%s\", \"device_model\": \"%s\","
             " \"n_devices\": 1, \"precision\": \"%s\", \"valid\": %s, \"gflops\": %.6f,"
             " \"m\": %d, \"n\": %d, \"k\": %d, \"reps\": 10, \"ms_median\": %.6f}",
             backend, model, precision, valid ? "true" : "false", gflops, m, n, k,
             2e-6 * m * n * k / gflops);
    snprintf(extra, sizeof extra, ", \"m\": %d, \"n\": %d, \"k\": %d", m, n, k);
    job(node, "gemm", backend, 1, 1, precision, 0, 0, extra, rec, state);
}

/* A one-GPU, one-node ResNet-50 run. */
static void run(char node, const char *model, const char *precision, int batch, int image,
                double ips) {
    add(node, "resnet50", "cuda", model, 1, 1, precision, batch, image, ips, 1, "done");
}

#define H100  "NVIDIA H100"
#define NVL   "NVIDIA H100 NVL"
#define A100S "NVIDIA A100-SXM4-80GB"
#define A100P "NVIDIA A100-PCIE-40GB"
#define V100  "Tesla V100-SXM2-16GB"
#define XEON  "Intel Xeon Gold 6338"

enum { FILL_EMPTY, FILL_ALL, FILL_EMPTY_GEMM };
static void open_store(const char *path, int fill) {
    char err[512];
    unlink(path);
    st = gb_store_open(path, err, sizeof err);
    CHECKF(st, "%s", err);
    const char *now = "2024-05-01T11:00:00.000Z";
    for (char c = 'a'; c <= 'g'; c++) {
        char id[16], name[16];
        snprintf(id, sizeof id, "agent-%c", c);
        snprintf(name, sizeof name, "node-%c", c);
        gb_store_node_t n = {.agent_id = id,
                             .name = name,
                             .state = "connected",
                             .cpu_model = XEON,
                             .os = "Debian 12",
                             .kernel = "Linux 6.1",
                             .driver_version = "570.00",
                             .cuda_driver_version = "12.8",
                             .labels = "",
                             .kinds = "resnet50",
                             .gpu_model = c == 'f' ? "" : "some GPU",
                             .inventory_json = "{}",
                             .cpu_cores = 64,
                             .n_gpus = c == 'f' ? 0 : 8,
                             .slots = 1};
        CHECK(gb_store_begin(st) == 0 && gb_store_node_upsert(st, &n, now) == 0);
        CHECK(gb_store_commit(st) == 0);
    }
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_store_sweep_insert(st, "models", "{}", 40, NULL, now, &sweep) == 0);
    CHECK(gb_store_commit(st) == 0);
    if (fill == FILL_EMPTY) {
        /* jobs, but none v_models counts: an invalid run, a two-GPU one, a gemm */
        add('a', "resnet50", "cuda", H100, 1, 1, "fp16", 64, 224, 9999, 0, "done");
        add('a', "resnet50", "cuda", H100, 2, 1, "fp16", 64, 224, 6000, 1, "done");
        add('a', "gemm", "cuda", H100, 1, 1, "fp32", 64, 224, 50000, 1, "done");
        gb_store_close(&st);
        return;
    }
    if (fill == FILL_EMPTY_GEMM) {
        /* jobs, but none v_gemm_models counts: a ResNet-50 run, an invalid
         * gemm, a failed one */
        run('a', H100, "fp16", 64, 224, 3000);
        gemm('a', "cuda", H100, "fp16", 4096, 4096, 4096, 9e5, 0, "done");
        gemm('a', "cuda", H100, "fp16", 4096, 4096, 4096, 1, 1, "failed");
        gb_store_close(&st);
        return;
    }
    /* batch 64, image 224, fp16. H100 on two nodes: 3000, 3100, 2300 ->
     * median 3000 (odd count; the mean would be 2800), min 2300, max 3100 */
    run('a', H100, "fp16", 64, 224, 3000);
    run('b', H100, "fp16", 64, 224, 3100);
    run('a', H100, "fp16", 64, 224, 2300);
    /* none of these counts: each would move the median or the counts */
    add('a', "resnet50", "cuda", H100, 1, 1, "fp16", 64, 224, 9999, 0, "done"); /* invalid */
    add('a', "resnet50", "cuda", H100, 1, 1, "fp16", 64, 224, 1, 1, "failed");  /* failed */
    add('a', "resnet50", "cuda", H100, 2, 1, "fp16", 64, 224, 6000, 1, "done"); /* 2 GPUs */
    add('b', "resnet50", "cuda", H100, 1, 2, "fp16", 64, 224, 7777, 1, "done"); /* 2 nodes */
    add('a', "gemm", "cuda", H100, 1, 1, "fp16", 64, 224, 50000, 1, "done");    /* not resnet50 */
    run('g', NVL, "fp16", 64, 224, 2600);
    /* even count: the mean of the two middle ones, 1650 (of all: 1525) */
    run('c', A100S, "fp16", 64, 224, 1000);
    run('c', A100S, "fp16", 64, 224, 1800);
    run('c', A100S, "fp16", 64, 224, 1600);
    run('c', A100S, "fp16", 64, 224, 1700);
    run('d', A100P, "fp16", 64, 224, 1200);
    run('e', V100, "fp16", 64, 224, 750);
    /* fp32 */
    run('a', H100, "fp32", 64, 224, 1000);
    run('b', H100, "fp32", 64, 224, 1100);
    run('c', A100S, "fp32", 64, 224, 600);
    run('e', V100, "fp32", 64, 224, 300);
    add('f', "resnet50", "cpu", XEON, 1, 1, "fp32", 64, 224, 50, 1, "done");
    /* other configurations: never in batch 64 / 224's figures */
    run('a', H100, "fp16", 128, 224, 3500);
    run('c', A100S, "fp16", 128, 224, 1750);
    run('e', V100, "fp16", 64, 128, 2000);
    /* gemm at 4096^3. H100 fp16 on two nodes: 600k, 700k, 650k -> median
     * 650k (odd); fp32 50k, 52k -> 51k (even); none of the invalid 999999,
     * the failed 1 or the ResNet-50 runs counts. And the CPU in fp32, bf16 */
    gemm('a', "cuda", H100, "fp16", 4096, 4096, 4096, 600000, 1, "done");
    gemm('b', "cuda", H100, "fp16", 4096, 4096, 4096, 700000, 1, "done");
    gemm('a', "cuda", H100, "fp16", 4096, 4096, 4096, 650000, 1, "done");
    gemm('a', "cuda", H100, "fp16", 4096, 4096, 4096, 999999, 0, "done");
    gemm('b', "cuda", H100, "fp16", 4096, 4096, 4096, 1, 1, "failed");
    gemm('a', "cuda", H100, "fp32", 4096, 4096, 4096, 50000, 1, "done");
    gemm('b', "cuda", H100, "fp32", 4096, 4096, 4096, 52000, 1, "done");
    gemm('c', "cuda", A100S, "fp16", 4096, 4096, 4096, 280000, 1, "done");
    gemm('c', "cuda", A100S, "fp32", 4096, 4096, 4096, 19000, 1, "done");
    gemm('f', "cpu", XEON, "fp32", 4096, 4096, 4096, 380, 1, "done");
    gemm('f', "cpu", XEON, "bf16", 4096, 4096, 4096, 700, 1, "done");
    /* other shapes: groups of their own (a non-square one: m, n, k in order) */
    gemm('c', "cuda", A100S, "fp16", 2048, 2048, 2048, 250000, 1, "done");
    gemm('a', "cuda", H100, "fp16", 8192, 1024, 4096, 620000, 1, "done");
    gb_store_close(&st);
}

static sqlite3 *ro;

#define one(sql)      gb_sql_one(ro, (sql))
#define EQ(sql, want) GB_SQL_EQ(ro, (sql), (want))

/* One v_models row as "runs|nodes|median|min|max|last_finished_at". */
static void row(const char *model, const char *prec, int batch, int image, const char *want) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT runs || '|' || nodes || '|' || median_images_per_sec || '|' ||"
             " min_images_per_sec || '|' || max_images_per_sec || '|' || last_finished_at"
             " FROM v_models WHERE gpu_model = '%s' AND precision = '%s'"
             " AND batch_per_gpu = %d AND image_size = %d",
             model, prec, batch, image);
    EQ(sql, want);
}

/* One v_gemm_models row as "runs|nodes|median|min|max|last_finished_at". */
static void gemm_row(const char *model, const char *prec, int m, int n, int k, const char *want) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT runs || '|' || nodes || '|' || median_gflops || '|' || min_gflops || '|' ||"
             " max_gflops || '|' || last_finished_at FROM v_gemm_models WHERE gpu_model = '%s'"
             " AND precision = '%s' AND m = %d AND n = %d AND k = %d",
             model, prec, m, n, k);
    EQ(sql, want);
}

static void cleanup(const char *path) {
    char side[160];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(int argc, char **argv) {
    CHECKF(argc >= 2, "usage: test_models view | make PATH | empty PATH | empty_gemm PATH");
    static const char *const fills[] = {
        [FILL_EMPTY] = "empty", [FILL_ALL] = "make", [FILL_EMPTY_GEMM] = "empty_gemm"};
    for (int f = 0; f < 3; f++)
        if (strcmp(argv[1], fills[f]) == 0) {
            CHECKF(argc == 3, "test_models %s PATH", argv[1]);
            open_store(argv[2], f);
            return 0;
        }
    CHECKF(strcmp(argv[1], "view") == 0, "unknown case %s", argv[1]);
    char path[128];
    snprintf(path, sizeof path, "/tmp/gb-models-%d.db", (int)getpid());
    open_store(path, FILL_ALL);
    CHECK(sqlite3_open_v2(path, &ro, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);

    /* the columns, in the documented order */
    EQ("SELECT group_concat(name, ',') FROM pragma_table_info('v_models')",
       "gpu_model,backend,precision,batch_per_gpu,image_size,runs,nodes,median_images_per_sec,"
       "min_images_per_sec,max_images_per_sec,last_finished_at");
    /* 5 models in fp16 and 4 in fp32 at batch 64 / 224, 2 at batch 128, 1 at 128 px */
    EQ("SELECT count(*) FROM v_models", "12");
    /* odd count: the middle one, over two nodes; the invalid 9999, the
     * failed 1, the two-GPU 6000, the two-node 7777 and the gemm left out
     * (min, max and the runs would show them) */
    row(H100, "fp16", 64, 224, "3|2|3000.0|2300.0|3100.0|2024-05-01T12:00:02.000Z");
    /* even count: the mean of the two middle ones */
    row(A100S, "fp16", 64, 224, "4|1|1650.0|1000.0|1800.0|2024-05-01T12:00:12.000Z");
    row(H100, "fp32", 64, 224, "2|2|1050.0|1000.0|1100.0|2024-05-01T12:00:16.000Z");
    row(V100, "fp16", 64, 224, "1|1|750.0|750.0|750.0|2024-05-01T12:00:14.000Z");
    /* other batches and image sizes are rows of their own */
    row(H100, "fp16", 128, 224, "1|1|3500.0|3500.0|3500.0|2024-05-01T12:00:20.000Z");
    row(V100, "fp16", 64, 128, "1|1|2000.0|2000.0|2000.0|2024-05-01T12:00:22.000Z");
    /* a CPU run: its CPU model, backend cpu */
    EQ("SELECT gpu_model || '|' || runs || '|' || median_images_per_sec FROM v_models"
       " WHERE backend = 'cpu'",
       XEON "|1|50.0");
    EQ("SELECT count(*) FROM v_models WHERE backend IS NOT 'cuda' AND backend IS NOT 'cpu'", "0");

    /* v_gemm_models: the columns, in the documented order */
    EQ("SELECT group_concat(name, ',') FROM pragma_table_info('v_gemm_models')",
       "gpu_model,backend,precision,m,n,k,runs,nodes,median_gflops,min_gflops,max_gflops,"
       "last_finished_at");
    /* at 4096^3: H100 and A100 in fp16 and fp32, the CPU in fp32 and bf16;
     * and the 64^3 H100 gemm of the ResNet-50 fill, 2048^3, 8192x1024x4096 */
    EQ("SELECT count(*) FROM v_gemm_models", "9");
    /* odd count over two nodes: the middle one (the invalid 999999 and the
     * failed 1 would show in max, min and runs) */
    gemm_row(H100, "fp16", 4096, 4096, 4096,
             "3|2|650000.0|600000.0|700000.0|2024-05-01T12:00:25.000Z");
    /* even count: the mean of the two middle ones */
    gemm_row(H100, "fp32", 4096, 4096, 4096,
             "2|2|51000.0|50000.0|52000.0|2024-05-01T12:00:29.000Z");
    gemm_row(A100S, "fp16", 2048, 2048, 2048,
             "1|1|250000.0|250000.0|250000.0|2024-05-01T12:00:34.000Z");
    gemm_row(H100, "fp16", 8192, 1024, 4096,
             "1|1|620000.0|620000.0|620000.0|2024-05-01T12:00:35.000Z");
    gemm_row(H100, "fp16", 64, 64, 64, "1|1|50000.0|50000.0|50000.0|2024-05-01T12:00:07.000Z");
    EQ("SELECT group_concat(precision || ':' || median_gflops, ',') FROM (SELECT * FROM"
       " v_gemm_models WHERE backend = 'cpu' AND gpu_model = '" XEON "' ORDER BY precision)",
       "bf16:700.0,fp32:380.0");
    /* no ResNet-50 run is a gemm row */
    EQ("SELECT count(*) FROM v_gemm_models WHERE m IS NULL OR n IS NULL OR k IS NULL", "0");
    sqlite3_close(ro);
    if (getenv("GB_KEEP_TMP") && strcmp(getenv("GB_KEEP_TMP"), "1") == 0) {
        printf("store kept: %s\n", path);
        return 0;
    }
    cleanup(path);
    return 0;
}
