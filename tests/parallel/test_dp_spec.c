/* test_dp_spec.c - the spec keys of data parallelism (common/gb_spec.c):
 * the allreduce kind's keys, defaults and checks, the keys it shares with
 * resnet50 (gpus, n_nodes, interconnect, warmup, rendezvous_s), bucket_mb,
 * and every job's canonical JSON round trip. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_spec.h"

#include <stdlib.h>
#include <string.h>

static char err[512];

static gb_sweep_def_t ok(const char *json) {
    gb_sweep_def_t d;
    CHECKF(gb_spec_parse(json, strlen(json), GB_SPEC_MAX_JOBS, &d, err, sizeof err) == 0, "%s: %s",
           json, err);
    for (size_t i = 0; i < d.n_jobs; i++) { /* canonical JSON round trip */
        char *j = gb_jobdef_to_json(&d.jobs[i]);
        gb_jobdef_t back;
        CHECK(j);
        CHECKF(gb_jobdef_from_json(j, strlen(j), &back, err, sizeof err) == 0, "%s: %s", j, err);
        char *again = gb_jobdef_to_json(&back);
        CHECKF(again && strcmp(j, again) == 0, "%s vs %s", j, again);
        free(j);
        free(again);
    }
    return d;
}

static void bad(const char *json, const char *why) {
    gb_sweep_def_t d;
    CHECKF(gb_spec_parse(json, strlen(json), GB_SPEC_MAX_JOBS, &d, err, sizeof err) != 0,
           "accepted: %s", json);
    CHECKF(strstr(err, why), "'%s' does not say '%s'", err, why);
}

int main(void) {
    CHECK(gb_kind_known("allreduce") && !gb_kind_synthetic("allreduce"));
    CHECK(strcmp(gb_kind_names(), "allreduce, gemm, resnet50, sleep") == 0);
    gb_sweep_def_t d = ok("{\"kind\": \"allreduce\"}");
    CHECK(d.n_jobs == 1);
    gb_jobdef_t *j = &d.jobs[0];
    CHECK(j->min_bytes == 8 && j->max_bytes == 1 << 30 && j->iters == 20 && j->warmup == 3);
    CHECK(j->gpus == 1 && j->n_nodes == 1 && strcmp(j->interconnect, "auto") == 0);
    CHECK(j->timeout_s == 1800 && j->batch == 0 && j->bucket_mb == 0 && j->precision[0] == 0);
    char *js = gb_jobdef_to_json(j);
    CHECKF(js && strstr(js, "\"min_bytes\":8") && strstr(js, "\"iters\":20") &&
               !strstr(js, "batch") && !strstr(js, "precision") && !strstr(js, "bucket_mb"),
           "%s", js);
    free(js);
    gb_sweep_def_free(&d);
    /* axes: GPU counts x interconnects, and sizes */
    d = ok("{\"kind\": \"allreduce\", \"backend\": \"cuda\", \"gpus\": [2, 4, 8], "
           "\"interconnect\": [\"nvlink\", \"pcie\"], \"max_bytes\": [1024, 4096], \"n_nodes\": 2, "
           "\"rendezvous_s\": 60, \"warmup\": 5}");
    CHECK(d.n_jobs == 12);
    CHECK(d.jobs[11].gpus == 8 && strcmp(d.jobs[11].interconnect, "pcie") == 0 &&
          d.jobs[11].max_bytes == 4096 && d.jobs[11].n_nodes == 2 &&
          d.jobs[11].rendezvous_s == 60 && d.jobs[11].warmup == 5);
    gb_sweep_def_free(&d);
    /* resnet50's bucket, and a spec of both kinds: each takes its own keys */
    d = ok("{\"kind\": [\"resnet50\", \"allreduce\"], \"gpus\": 2, \"bucket_mb\": [10, 50], "
           "\"iters\": 5}");
    CHECK(d.n_jobs == 3);
    CHECK(strcmp(d.jobs[0].kind, "resnet50") == 0 && d.jobs[0].bucket_mb == 10 &&
          d.jobs[0].iters == 0 && d.jobs[1].bucket_mb == 50);
    CHECK(strcmp(d.jobs[2].kind, "allreduce") == 0 && d.jobs[2].iters == 5 &&
          d.jobs[2].bucket_mb == 0 && d.jobs[2].gpus == 2);
    gb_sweep_def_free(&d);
    d = ok("{\"kind\": \"resnet50\"}");
    CHECK(d.jobs[0].bucket_mb == 25 && d.jobs[0].min_bytes == 0);
    gb_sweep_def_free(&d);
    /* refusals */
    bad("{\"kind\": \"allreduce\", \"min_bytes\": 6}", "multiples of 4");
    bad("{\"kind\": \"allreduce\", \"min_bytes\": 64, \"max_bytes\": 32}", "min <= max");
    bad("{\"kind\": \"allreduce\", \"max_bytes\": 2147483647}", "'max_bytes'");
    bad("{\"kind\": \"allreduce\", \"iters\": 0}", "'iters'");
    bad("{\"kind\": \"allreduce\", \"steps\": 5}", "'steps' does not apply");
    bad("{\"kind\": \"allreduce\", \"bucket_mb\": 5}", "'bucket_mb' does not apply");
    bad("{\"kind\": \"gemm\", \"min_bytes\": 8}", "'min_bytes' does not apply");
    bad("{\"kind\": \"resnet50\", \"bucket_mb\": 0}", "'bucket_mb'");
    printf("dp_spec: ok\n");
    return 0;
}
