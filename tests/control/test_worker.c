/* test_worker.c - the worker's job kinds (worker/worker.c), run in this
 * process through gb_worker_run on real job files: the gemm record, the
 * sleep record, and every way a job file can be refused.
 * `test_worker CASE`. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "engine_stats.h"
#include "gemm_cpu.h"
#include "worker.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char job_path[64], out_path[64];

static cJSON *run(const char *job, int want_rc) {
    FILE *f = fopen(job_path, "w");
    CHECK(f);
    fputs(job, f);
    fclose(f);
    unlink(out_path);
    int rc = gb_worker_run(job_path, out_path);
    CHECKF(rc == want_rc, "exit %d, want %d for %s", rc, want_rc, job);
    f = fopen(out_path, "r");
    CHECKF(f, "no record written for %s", job);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *rec = cJSON_Parse(buf);
    CHECKF(cJSON_IsObject(rec), "record is not an object: %s", buf);
    return rec;
}

static void fails(const char *job, int rc, const char *want) {
    cJSON *rec = run(job, rc);
    const cJSON *e = cJSON_GetObjectItem(rec, "error");
    CHECKF(cJSON_IsString(e) && strstr(e->valuestring, want), "error '%s' lacks '%s'",
           cJSON_IsString(e) ? e->valuestring : "(none)", want);
    cJSON_Delete(rec);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    CHECKF(cJSON_IsNumber(v), "no number '%s'", k);
    return v->valuedouble;
}

int main(int argc, char **argv) {
    CHECKF(argc == 2, "usage: test_worker CASE");
    const char *c = argv[1];
    snprintf(job_path, sizeof job_path, "/tmp/gb-worker-%d.job", (int)getpid());
    snprintf(out_path, sizeof out_path, "/tmp/gb-worker-%d.out", (int)getpid());
    if (strcmp(c, "gemm") == 0) {
        cJSON *r = run("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"gemm\","
                       " \"backend\": \"cpu\", \"m\": 33, \"n\": 65, \"k\": 129, \"reps\": 4}}",
                       0);
        CHECK(strcmp(cJSON_GetObjectItem(r, "kind")->valuestring, "gemm") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(r, "backend")->valuestring, "cpu") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(r, "precision")->valuestring, "fp32") == 0);
        CHECK(cJSON_IsBool(cJSON_GetObjectItem(r, "valid")));
        CHECK(num(r, "m") == 33 && num(r, "n") == 65 && num(r, "k") == 129 && num(r, "reps") == 4);
        double ms = num(r, "ms_median"), gf = num(r, "gflops");
        CHECK(ms > 0 && gf > 0);
        /* gflops is what the median says: 2 m n k / median. Both went through
         * cJSON, which prints 15 significant digits when they read back
         * within DBL_EPSILON relative (its compare_double), so allow a few ulp. */
        double want = 2.0 * 33 * 65 * 129 / (ms * 1e6);
        CHECKF(fabs(gf - want) <= 4 * DBL_EPSILON * want,
               "gflops %.17g vs %.17g from median %.17g ms", gf, want, ms);
        const cJSON *d = cJSON_GetObjectItem(r, "details");
        CHECK(num(d, "verified_entries") == 68);
        CHECK(num(d, "warmup") == 8); /* small products: all 8 of the settling warm-up */
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(d, "ms_samples")) == 4);
        CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "versions"), "onednn"));
        /* the ISA oneDNN ran for, as in the engine's records */
        CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "versions"), "isa")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(r, "device_model")));
        cJSON_Delete(r);
    } else if (strcmp(c, "gemm_stats") == 0) {
        /* the gemm probe's statistics and spread rule are the engine's */
        double v[] = {5, 1, 4, 2, 3}, w[] = {4, 1, 3, 2, 10, 6, 7, 8, 9, 5};
        gb_step_stats_t st;
        CHECK(gb_step_stats(v, NULL, 5, &st) == 0);
        CHECK(st.median == 3 && fabs(st.p90 - 4.6) < 1e-12 && st.min == 1 && st.max == 5);
        CHECK(gb_step_stats(w, NULL, 10, &st) == 0);
        CHECK(st.median == 5.5 && fabs(st.p90 - 9.1) < 1e-12);
        char why[256] = "";
        CHECK(gb_spread_ok("time", 10, 11, why, sizeof why) == 1 && why[0] == 0);
        CHECK(gb_spread_ok("time", 10, 12, why, sizeof why) == 0);
        CHECKF(strcmp(why, "p90 time 12.00 ms is 20.0% above the median 10.00 ms (limit 10%)") == 0,
               "%s", why);
        /* just above the limit, and times under 1 ms: digits enough to see both */
        CHECK(gb_spread_ok("step time", 242.805, 267.206, why, sizeof why) == 0);
        CHECKF(strcmp(why, "p90 step time 267.21 ms is 10.05% above the median 242.80 ms "
                           "(limit 10%)") == 0 ||
                   strcmp(why, "p90 step time 267.21 ms is 10.05% above the median 242.81 ms "
                               "(limit 10%)") == 0,
               "%s", why);
        CHECK(gb_spread_ok("time", 0.00761, 0.00844, why, sizeof why) == 0);
        CHECKF(strcmp(why,
                      "p90 time 0.00844 ms is 10.9% above the median 0.00761 ms (limit 10%)") == 0,
               "%s", why);
        /* the exactness argument of gemm_cpu.c at its extreme: k = 4096 */
        gb_gemm_out_t g;
        char err[256];
        CHECKF(gb_gemm_cpu(2, 3, 4096, 0, 0, 1, &g, err, sizeof err) == 0, "%s", err);
        CHECK(g.checked == 68);
        CHECK(strcmp(g.impl, "dnnl_sgemm") == 0);
        free(g.ms);
        /* and in bf16 (oneDNN's matmul, fp32 accumulation): exact too (also
         * where oneDNN emulates bf16: DNNL_MAX_CPU_ISA=AVX512_CORE), or refused
         * where it has no bf16 matmul (AVX2) or only its reference loop */
        if (gb_gemm_cpu(2, 3, 4096, 1, 0, 1, &g, err, sizeof err) == 0) {
            CHECK(g.checked == 68);
            CHECKF(strncmp(g.impl, "dnnl matmul bf16 (", 18) == 0 && !strstr(g.impl, "(ref"), "%s",
                   g.impl);
            free(g.ms);
        } else {
            CHECKF(!gb_worker_cpu_bf16() && strstr(err, "gemm in bf16: oneDNN has ") &&
                       strstr(err, "avx512_bf16 or AMX"),
                   "%s", err);
        }
    } else if (strcmp(c, "sleep") == 0) {
        cJSON *r = run("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"sleep\","
                       " \"backend\": \"cpu\", \"duration_ms\": 20, \"gpus\": 3}}",
                       0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r, "synthetic")));
        CHECK(num(r, "slept_ms") >= 20 && num(r, "n_devices") == 3);
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(r, "precision")));
        /* a sleep uses no library: it claims none */
        const cJSON *v = cJSON_GetObjectItem(r, "versions");
        CHECK(cJSON_IsString(cJSON_GetObjectItem(v, "gpubench")) &&
              !cJSON_GetObjectItem(v, "onednn"));
        cJSON_Delete(r);
    } else if (strcmp(c, "sleep_fail") == 0) {
        fails("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"sleep\", \"backend\": "
              "\"cpu\","
              " \"duration_ms\": 0, \"fail\": \"as asked\"}}",
              1, "as asked");
    } else if (strcmp(c, "resnet50") == 0) {
        const char *job = "{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"resnet50\","
                          " \"backend\": \"cpu\", \"batch\": 2, \"steps\": 1, \"warmup\": 0,"
                          " \"image_size\": 32}}";
        if (gb_worker_has_engine()) {
            cJSON *r = run(job, 0);
            CHECK(num(r, "images_per_sec") > 0);
            cJSON_Delete(r);
        } else {
            fails(job, 1, "resnet50 engine not built");
        }
    } else if (strcmp(c, "cuda_gemm") == 0) {
        /* no usable CUDA backend here: a clear failure, never a crash */
        fails("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"gemm\", \"backend\": "
              "\"cuda\","
              " \"m\": 8, \"n\": 8, \"k\": 8}}",
              1, "cuda");
    } else if (strcmp(c, "bad_params") == 0) {
        fails(
            "{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"gemm\", \"backend\": \"cpu\","
            " \"m\": -4}}",
            2, "bad job parameters: 'm' must be an integer");
    } else if (strcmp(c, "unknown_kind") == 0) {
        fails("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"bert\", \"backend\": "
              "\"cpu\"}}",
              2, "unknown job kind 'bert'");
    } else if (strcmp(c, "auto_backend") == 0) {
        fails("{\"job_id\": 1, \"attempt\": 1, \"params\": {\"kind\": \"gemm\"}}", 2,
              "backend must be resolved");
    } else if (strcmp(c, "not_a_job") == 0) {
        fails("[1, 2, 3]", 2, "is not a job file");
    } else if (strcmp(c, "missing_file") == 0) {
        unlink(job_path);
        unlink(out_path);
        CHECK(gb_worker_run("/nonexistent/job.json", out_path) == 2);
        FILE *f = fopen(out_path, "r");
        CHECK(f); /* the failure is still written where the agent looks */
        fclose(f);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    unlink(job_path);
    unlink(out_path);
    return 0;
}
