/* test_spec.c - sweep-spec parsing and expansion (common/gb_spec.c), one
 * CTest test per case: `test_spec CASE`. Good specs are checked job by job;
 * each bad spec is its own case and must fail with a reason that names the
 * problem. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_spec.h"
#include "gb_util.h"

#include <dirent.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

static gb_sweep_def_t parse_ok(const char *json) {
    gb_sweep_def_t d;
    char err[512] = "";
    CHECKF(gb_spec_parse(json, strlen(json), GB_SPEC_MAX_JOBS, &d, err, sizeof err) == 0,
           "spec %s rejected: %s", json, err);
    return d;
}

/* The spec must fail with a reason containing want. */
static void parse_bad(const char *json, size_t max_jobs, const char *want) {
    gb_sweep_def_t d;
    char err[512] = "";
    CHECKF(gb_spec_parse(json, strlen(json), max_jobs, &d, err, sizeof err) != 0,
           "spec %s accepted", json);
    CHECKF(strstr(err, want), "reason '%s' lacks '%s'", err, want);
    CHECK(d.jobs == NULL && d.n_jobs == 0);
}

/* An unknown key close to a known one says which was likely meant: a typo,
 * a dash for an underscore, a unit left off; one far from every key, or
 * one letter for another, says nothing more. */
static void case_unknown_key_like(void) {
    static const struct {
        const char *key, *like; /* like NULL: no suggestion */
    } t[] = {{"duraton_ms", "duration_ms"},
             {"image-size", "image_size"},
             {"timeout", "timeout_s"},
             {"precisions", "precision"},
             {"batch_size", "batch"},
             {"wramup", "warmup"},
             {"gpu", "gpus"},
             {"kinds", "kind"},
             {"sizes", NULL},
             {"x", NULL},
             {"throughput", NULL}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char json[128], want[160], err[512] = "";
        gb_sweep_def_t d;
        snprintf(json, sizeof json, "{\"kind\": \"resnet50\", \"%s\": 1}", t[i].key);
        CHECKF(gb_spec_parse(json, strlen(json), GB_SPEC_MAX_JOBS, &d, err, sizeof err) != 0,
               "%s accepted", json);
        if (t[i].like)
            snprintf(want, sizeof want, "unknown key '%s' (did you mean '%s'?)", t[i].key,
                     t[i].like);
        else
            snprintf(want, sizeof want, "unknown key '%s'", t[i].key);
        CHECKF(strcmp(err, want) == 0, "got '%s', want '%s'", err, want);
    }
}

/* One GPU on one node has no interconnect: it is run once, for the first
 * value of the axis, not once per value (the same run twice). */
static void case_interconnect_one_gpu(void) {
    gb_sweep_def_t d = parse_ok("{\"kind\": \"resnet50\", \"gpus\": [1, 2, 4],"
                                " \"interconnect\": [\"nvlink\", \"pcie\"], \"repeat\": 3}");
    CHECKF(d.n_jobs == 3 + 2 * 2 * 3, "%zu jobs", d.n_jobs);
    int one = 0, two_nv = 0, two_pcie = 0;
    for (size_t i = 0; i < d.n_jobs; i++) {
        const gb_jobdef_t *j = &d.jobs[i];
        if (j->gpus == 1) {
            CHECKF(strcmp(j->interconnect, "nvlink") == 0, "%s", j->interconnect);
            CHECK(j->repeat_index == one);
            one++;
        }
        two_nv += j->gpus == 2 && strcmp(j->interconnect, "nvlink") == 0;
        two_pcie += j->gpus == 2 && strcmp(j->interconnect, "pcie") == 0;
    }
    CHECK(one == 3 && two_nv == 3 && two_pcie == 3);
    gb_sweep_def_free(&d);
    /* over several nodes one GPU each does move gradients: kept per value */
    d = parse_ok(
        "{\"kind\": \"allreduce\", \"n_nodes\": 2, \"interconnect\": [\"auto\", \"pcie\"]}");
    CHECKF(d.n_jobs == 2, "%zu jobs", d.n_jobs);
    gb_sweep_def_free(&d);
    /* the job limit holds against the jobs made: a one-GPU job listing two
     * interconnects is one job, within a limit of one (it was refused) */
    char err[512] = "";
    const char *one_job = "{\"kind\": \"resnet50\", \"interconnect\": [\"auto\", \"pcie\"]}";
    CHECKF(gb_spec_parse(one_job, strlen(one_job), 1, &d, err, sizeof err) == 0 && d.n_jobs == 1,
           "%s", err);
    gb_sweep_def_free(&d);
    parse_bad("{\"kind\": \"resnet50\", \"gpus\": [1, 2], \"interconnect\": [\"auto\", \"pcie\"]}",
              2, "the sweep expands to 3 jobs, more than --max-jobs 2");
    /* one value, one GPU: as given */
    d = parse_ok("{\"kind\": \"resnet50\", \"interconnect\": \"pcie\"}");
    CHECK(d.n_jobs == 1 && strcmp(d.jobs[0].interconnect, "pcie") == 0);
    gb_sweep_def_free(&d);
}

static void case_product(void) {
    gb_sweep_def_t d = parse_ok("{\"name\": \"grid\", \"kind\": \"resnet50\","
                                " \"precision\": [\"fp32\", \"bf16\"], \"gpus\": [1, 2],"
                                " \"batch\": [8, 16, 32], \"repeat\": 2}");
    CHECK(strcmp(d.name, "grid") == 0);
    CHECKF(d.n_jobs == 2 * 2 * 3 * 2, "%zu jobs", d.n_jobs);
    /* the order: gpus (earlier in the key table) outside precision outside
     * batch, repeat innermost */
    int k = 0;
    const int gpus[] = {1, 2};
    const char *prec[] = {"fp32", "bf16"};
    const int batch[] = {8, 16, 32};
    for (int g = 0; g < 2; g++)
        for (int p = 0; p < 2; p++)
            for (int b = 0; b < 3; b++)
                for (int r = 0; r < 2; r++, k++) {
                    const gb_jobdef_t *j = &d.jobs[k];
                    CHECKF(j->gpus == gpus[g] && strcmp(j->precision, prec[p]) == 0 &&
                               j->batch == batch[b] && j->repeat_index == r,
                           "job %d: gpus %d %s batch %d repeat %d", k, j->gpus, j->precision,
                           j->batch, j->repeat_index);
                    CHECK(strcmp(j->kind, "resnet50") == 0);
                    CHECK(j->steps == 20 && j->warmup == 3 && j->image_size == 224);
                    CHECK(strcmp(j->backend, "auto") == 0 && strcmp(j->interconnect, "auto") == 0);
                    CHECK(j->timeout_s == 3600);
                }
    gb_sweep_def_free(&d);
    CHECK(d.jobs == NULL);
}

static void case_kinds(void) {
    /* a key multiplies only the kinds it applies to */
    gb_sweep_def_t d = parse_ok("{\"kind\": [\"resnet50\", \"gemm\", \"sleep\"],"
                                " \"precision\": [\"fp32\", \"bf16\"], \"m\": [64, 128],"
                                " \"duration_ms\": 5, \"backend\": [\"cpu\", \"auto\"]}");
    /* resnet50: precision x backend; gemm: precision x m x backend (gemm
     * takes a precision since 2026-12-05); sleep: backend */
    CHECKF(d.n_jobs == 2 * 2 + 2 * 2 * 2 + 2, "%zu jobs", d.n_jobs);
    size_t n_res = 0, n_gemm = 0, n_sleep = 0;
    for (size_t i = 0; i < d.n_jobs; i++) {
        const gb_jobdef_t *j = &d.jobs[i];
        if (strcmp(j->kind, "resnet50") == 0) {
            n_res++;
            CHECK(j->m == 0 && j->duration_ms == 0);
        } else if (strcmp(j->kind, "gemm") == 0) {
            n_gemm++;
            CHECK((strcmp(j->precision, "fp32") == 0 || strcmp(j->precision, "bf16") == 0) &&
                  j->batch == 0 && j->gpus == 1 && j->n == 2048);
            CHECK(j->timeout_s == 600);
        } else {
            n_sleep++;
            CHECK(j->duration_ms == 5 && j->m == 0 && j->timeout_s == 60 &&
                  j->precision[0] == '\0');
        }
    }
    CHECK(n_res == 4 && n_gemm == 8 && n_sleep == 2);
    /* kinds in the order given */
    CHECK(strcmp(d.jobs[0].kind, "resnet50") == 0 &&
          strcmp(d.jobs[d.n_jobs - 1].kind, "sleep") == 0);
    gb_sweep_def_free(&d);
}

static void case_defaults(void) {
    gb_sweep_def_t d = parse_ok("{\"kind\": \"gemm\"}");
    CHECK(d.n_jobs == 1);
    const gb_jobdef_t *j = &d.jobs[0];
    CHECK(j->m == 2048 && j->n == 2048 && j->k == 2048 && j->reps == 10);
    CHECK(strcmp(j->precision, "fp32") == 0);
    /* its job says no precision in fp32, as before gemm took one (an
     * older worker refuses the key), and another one */
    char *json = gb_jobdef_to_json(j);
    CHECKF(json && !strstr(json, "precision"), "%s", json);
    free(json);
    gb_sweep_def_t h = parse_ok("{\"kind\": \"gemm\", \"precision\": \"fp16\"}");
    json = gb_jobdef_to_json(&h.jobs[0]);
    CHECKF(json && strstr(json, "\"precision\":\"fp16\""), "%s", json);
    free(json);
    gb_sweep_def_free(&h);
    CHECK(strcmp(j->nodes, "*") == 0 && j->labels[0] == '\0' && j->max_attempts == 0);
    CHECK(d.name[0] == '\0');
    gb_sweep_def_free(&d);
}

static void case_roundtrip(void) {
    gb_sweep_def_t d =
        parse_ok("{\"kind\": [\"resnet50\", \"sleep\", \"gemm\"], \"gpus\": 2,"
                 " \"labels\": {\"rack\": \"a\", \"pool\": \"x\"}, \"nodes\": \"h*\","
                 " \"precision\": \"bf16\", \"batch\": 64, \"interconnect\": \"pcie\","
                 " \"fail\": \"boom\", \"signal\": 6, \"max_attempts\": 5,"
                 " \"timeout_s\": 77, \"repeat\": 2, \"m\": 3}");
    for (size_t i = 0; i < d.n_jobs; i++) {
        char *json = gb_jobdef_to_json(&d.jobs[i]);
        CHECK(json);
        gb_jobdef_t back;
        char err[512];
        CHECKF(gb_jobdef_from_json(json, strlen(json), &back, err, sizeof err) == 0, "%s: %s", json,
               err);
        char *again = gb_jobdef_to_json(&back);
        CHECKF(strcmp(json, again) == 0, "%s != %s", json, again);
        CHECK(back.repeat_index == d.jobs[i].repeat_index);
        CHECK(strcmp(back.labels, "rack=a,pool=x") == 0);
        free(json);
        free(again);
    }
    /* a job takes no lists */
    gb_jobdef_t j;
    char err[256];
    const char *two = "{\"kind\": \"sleep\", \"duration_ms\": [1, 2]}";
    CHECK(gb_jobdef_from_json(two, strlen(two), &j, err, sizeof err) != 0);
    CHECK(strstr(err, "takes one value"));
    gb_sweep_def_free(&d);
}

static void case_labels(void) {
    char out[GB_LABELS_LEN], err[256];
    CHECK(gb_labels_canon(" rack=a , gpu=h100", out, sizeof out, err, sizeof err) == 0);
    CHECKF(strcmp(out, "rack=a,gpu=h100") == 0, "%s", out);
    CHECK(gb_labels_canon("", out, sizeof out, err, sizeof err) == 0 && out[0] == '\0');
    CHECK(gb_labels_canon("empty=", out, sizeof out, err, sizeof err) == 0);
    CHECK(gb_labels_canon("a=1,a=2", out, sizeof out, err, sizeof err) != 0 &&
          strstr(err, "twice"));
    CHECK(gb_labels_canon("novalue", out, sizeof out, err, sizeof err) != 0);
    CHECK(gb_labels_canon("sp ace=1", out, sizeof out, err, sizeof err) != 0);
    CHECK(gb_labels_canon("a=1,", out, sizeof out, err, sizeof err) != 0 && strstr(err, "comma"));
    CHECK(gb_labels_canon("a=b;c", out, sizeof out, err, sizeof err) != 0);
    CHECK(gb_labels_match("rack=a,gpu=h100", "gpu=h100"));
    CHECK(gb_labels_match("rack=a,gpu=h100", ""));
    CHECK(gb_labels_match("rack=a,gpu=h100", "gpu=h100,rack=a"));
    CHECK(!gb_labels_match("rack=a,gpu=h100", "rack=b"));
    CHECK(!gb_labels_match("rack=ab", "rack=a"));
    CHECK(!gb_labels_match("", "rack=a"));
    /* a list of selectors is an axis */
    gb_sweep_def_t d =
        parse_ok("{\"kind\": \"sleep\", \"labels\": [\"rack=a\", {\"rack\": \"b\"}]}");
    CHECK(d.n_jobs == 2 && strcmp(d.jobs[1].labels, "rack=b") == 0);
    gb_sweep_def_free(&d);
}

static void case_kind_table(void) {
    CHECK(gb_kind_known("gemm") && gb_kind_known("resnet50") && gb_kind_known("sleep"));
    CHECK(!gb_kind_known("bert") && !gb_kind_known(NULL) && !gb_kind_known(""));
    CHECK(gb_kind_synthetic("sleep") && !gb_kind_synthetic("gemm") && !gb_kind_synthetic(NULL));
}

/* A spec may be any bytes: not NUL-terminated, with NULs inside. */
static void case_raw_bytes(void) {
    const char buf[] = {'{', '"', 'k', 'i', 'n', 'd', '"', ':',
                        '"', 's', 'l', 'e', 'e', 'p', '"', '}'};
    gb_sweep_def_t d;
    char err[256];
    CHECK(gb_spec_parse(buf, sizeof buf, 10, &d, err, sizeof err) == 0 && d.n_jobs == 1);
    gb_sweep_def_free(&d);
    const char nul[] = "{\"kind\": \"sleep\"}\0garbage";
    CHECK(gb_spec_parse(nul, sizeof nul - 1, 10, &d, err, sizeof err) != 0);
    CHECK(gb_spec_parse("", 0, 10, &d, err, sizeof err) != 0);
}

static const struct {
    const char *name, *spec;
    size_t max_jobs;
    const char *want;
} bad[] = {
    {"bad_json", "{\"kind\": \"gemm\", \"m\": [1, 2", 0, "not valid JSON"},
    /* where, as an editor counts: line 3, column 1 is the '}' after a
     * trailing comma (column in characters: "é" is one) */
    {"bad_json_where", "{\"kind\": \"sleep\",\n \"name\": \"\xc3\xa9\",\n}", 0,
     "not valid JSON (error near line 3, column 1: byte 33)"},
    {"bad_trailing", "{\"kind\": \"gemm\"} {}", 0, "trailing bytes"},
    {"bad_not_object", "[\"gemm\"]", 0, "must be a JSON object"},
    {"bad_no_kind", "{\"gpus\": 1}", 0, "has no 'kind'"},
    {"bad_unknown_kind", "{\"kind\": \"bert\"}", 0, "unknown job kind 'bert'"},
    {"bad_kind_type", "{\"kind\": 3}", 0, "'kind' must be a string"},
    {"bad_kind_empty", "{\"kind\": []}", 0, "'kind' is an empty list"},
    {"bad_kind_twice", "{\"kind\": [\"gemm\", \"gemm\"]}", 0, "'gemm' given twice"},
    {"bad_unknown_key", "{\"kind\": \"gemm\", \"sizes\": 1}", 0, "unknown key 'sizes'"},
    /* one edit from nodes and from n_nodes: the one it is but for '_' */
    /* the hooks' where and when, with no failure to place */
    {"bad_fail_rank_alone", "{\"kind\": \"sleep\", \"n_nodes\": 2, \"fail_rank\": 1}", 0,
     "'fail_rank' says where 'fail' or 'signal' acts; give one of them"},
    {"bad_key_separators", "{\"kind\": \"sleep\", \"nnodes\": 2}", 0,
     "unknown key 'nnodes' (did you mean 'n_nodes'"},
    {"bad_not_applicable", "{\"kind\": \"gemm\", \"duration_ms\": 5}", 0,
     "'duration_ms' does not apply"},
    /* which kinds the key applies to, so the refusal says what to do (it
     * said "does not apply to the kind(s) of this spec" alone); allreduce
     * has no precision key: it runs in fp32 */
    {"bad_not_applicable_precision", "{\"kind\": \"allreduce\", \"precision\": \"fp16\"}", 0,
     "'precision' does not apply to allreduce, the kind of this spec; it applies to resnet50 and "
     "gemm only (allreduce runs in fp32): drop it, or add one of those to the kinds"},
    {"bad_not_applicable_precision_sleep", "{\"kind\": \"sleep\", \"precision\": \"fp16\"}", 0,
     "'precision' does not apply to sleep, the kind of this spec; it applies to resnet50 and "
     "gemm only: drop it, or add one of those to the kinds"},
    {"bad_not_applicable_kinds", "{\"kind\": [\"gemm\", \"sleep\"], \"warmup\": 2}", 0,
     "'warmup' does not apply to gemm and sleep, the kinds of this spec; it applies to resnet50 "
     "and allreduce only: drop it, or add one of those to the kinds"},
    {"bad_type", "{\"kind\": \"resnet50\", \"gpus\": \"two\"}", 0,
     "'gpus' must be an integer (got \"two\")"},
    {"bad_range_low", "{\"kind\": \"resnet50\", \"batch\": 0}", 0, "in 1..65536"},
    {"bad_nul", "{\"kind\": \"sleep\", \"name\": \"ab\\u0000cd\"}", 0, "holds \\u0000 (NUL)"},
    {"bad_name_list", "{\"kind\": \"sleep\", \"name\": [\"x\", \"y\"]}", 0,
     "'name' takes one value, not a list"},
    {"bad_range_high", "{\"kind\": \"sleep\", \"duration_ms\": 900000000}", 0, "(got 900000000)"},
    {"bad_fraction", "{\"kind\": \"resnet50\", \"steps\": 1.5}", 0, "'steps' must be an integer"},
    /* a fraction a hair off a whole number in range is said with its digits
     * ("got 64" contradicted "in 1..65536") */
    {"bad_fraction_near", "{\"kind\": \"gemm\", \"m\": 64.00000000000001}", 0,
     "'m' must be an integer in 1..65536 (got 64.000000000000014)"},
    {"bad_huge", "{\"kind\": \"resnet50\", \"steps\": 1e300}", 0, "'steps' must be an integer"},
    {"bad_negative", "{\"kind\": \"sleep\", \"duration_ms\": -1}", 0, "'duration_ms' must be"},
    {"bad_choice", "{\"kind\": \"resnet50\", \"precision\": \"fp8\"}", 0,
     "'fp8' is not one of fp32, tf32, fp16, bf16"},
    {"bad_backend", "{\"kind\": \"gemm\", \"backend\": \"rocm\"}", 0,
     "is not one of auto, cpu, cuda"},
    {"bad_empty_list", "{\"kind\": \"resnet50\", \"batch\": []}", 0, "'batch' is an empty list"},
    {"bad_duplicate_value", "{\"kind\": \"resnet50\", \"batch\": [8, 8]}", 0,
     "value 8 given twice"},
    {"bad_duplicate_key", "{\"kind\": \"gemm\", \"m\": 1, \"m\": 2}", 0, "key 'm' given twice"},
    {"bad_scalar_list", "{\"kind\": \"gemm\", \"repeat\": [1, 2]}", 0,
     "'repeat' takes one value, not a list"},
    /* the value given and the limit (it said "must be an integer in 1..1000") */
    {"bad_repeat_range", "{\"kind\": \"gemm\", \"repeat\": 5000}", 0,
     "'repeat' must be an integer in 1..1000 (got 5000)"},
    {"bad_repeat_string", "{\"kind\": \"gemm\", \"repeat\": \"x\"}", 0,
     "'repeat' must be an integer in 1..1000 (got \"x\")"},
    {"bad_timeout_list", "{\"kind\": \"gemm\", \"timeout_s\": [1, 2]}", 0, "takes one value"},
    /* the refusal says how many jobs the spec makes (it said "more than 10") */
    {"bad_too_many", "{\"kind\": \"sleep\", \"duration_ms\": [1, 2, 3], \"repeat\": 4}", 10,
     "the sweep expands to 12 jobs, more than --max-jobs 10"},
    /* the count in groups of three digits, and the jobs made, not the
     * combinations: one GPU is one job for both interconnects, so
     * 6 x 6 x (1 + 5 x 2) x 3 = 1188 of 6 x 6 x 6 x 2 x 3 = 1296 */
    {"bad_too_many_count",
     "{\"kind\": \"resnet50\", \"batch\": [1, 2, 3, 4, 5, 6], \"steps\": [1, 2, 3, 4, 5, 6],"
     " \"gpus\": [1, 2, 3, 4, 5, 6], \"interconnect\": [\"nvlink\", \"pcie\"], \"repeat\": 3}",
     1000, "the sweep expands to 1,188 jobs, more than --max-jobs 1000"},
    /* beyond 64 bits (64^7 x 1000): said as that, not a wrapped number */
    {"bad_too_many_huge", NULL, 0,
     "the sweep expands to over 1,000,000,000,000,000 jobs, more than --max-jobs 10000"},
    {"bad_too_many_values", NULL, 0, "more than 64 values"},
    {"bad_gemm_memory", "{\"kind\": \"gemm\", \"m\": 65536, \"n\": 65536, \"k\": 65536}", 0,
     "limit 16 GiB"},
    {"bad_label", "{\"kind\": \"gemm\", \"labels\": \"rack a\"}", 0, "'labels': label 'rack a'"},
    /* an object's key or value with ',' or '=' became more labels once joined */
    {"bad_label_object_key", "{\"kind\": \"sleep\", \"labels\": {\"rack=a,pool\": \"bench\"}}", 0,
     "key 'rack=a,pool': keys are 1..64"},
    {"bad_label_object_value", "{\"kind\": \"sleep\", \"labels\": {\"pool\": \"bench,rack=a\"}}", 0,
     "key 'pool': keys are 1..64"},
    /* the same set in another order is the same value (two identical jobs) */
    {"bad_label_sets_twice",
     "{\"kind\": \"sleep\", \"labels\": [\"rack=a,pool=bench\", \"pool=bench,rack=a\"]}", 0,
     "value 'pool=bench,rack=a' given twice"},
    {"bad_label_value_type", "{\"kind\": \"gemm\", \"labels\": {\"rack\": 1}}", 0,
     "must be a string"},
    {"bad_nodes_empty", "{\"kind\": \"gemm\", \"nodes\": \"\"}", 0, "'nodes' must be 1..127"},
    {"bad_name", "{\"kind\": \"gemm\", \"name\": 5}", 0, "'name' must be a string"},
    {"bad_name_control", "{\"kind\": \"gemm\", \"name\": \"a\\u0001b\"}", 0, "'name' must be"},
    /* C1 (U+0085, U+009B: the 8-bit CSI), refused as the wire refuses it */
    {"bad_name_c1", "{\"kind\": \"gemm\", \"name\": \"n\\u0085x\"}", 0, "'name' must be"},
    {"bad_fail_c1", "{\"kind\": \"sleep\", \"fail\": \"x\\u009by\"}", 0,
     "'fail' must be 0..127 bytes"},
    /* JSON is UTF-8: a stray byte would make every `--format json` listing
     * unreadable to a JSON parser */
    {"bad_name_utf8", "{\"kind\": \"gemm\", \"name\": \"a\xff\xfe b\"}", 0,
     "'name' must be a string of at most 127 bytes of printable UTF-8"},
    {"bad_name_surrogate", "{\"kind\": \"gemm\", \"name\": \"a\xed\xa0\x80\"}", 0,
     "'name' must be"},
    {"bad_fail_utf8", "{\"kind\": \"sleep\", \"fail\": \"x\xc3\x28\"}", 0, "'fail' must be"},
    {"bad_repeat_index", "{\"kind\": \"gemm\", \"repeat_index\": 1}", 0,
     "unknown key 'repeat_index'"},
    {"bad_many_keys", NULL, 0, "more than 64 keys"},
    {"bad_deep", NULL, 0, "spec nests objects or lists deeper than 1000 levels"},
};

/* Every spec in examples/ is valid and makes at least one job. */
static void case_examples(const char *dir) {
    DIR *d = opendir(dir);
    CHECKF(d, "cannot open %s", dir);
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[1024], *text = NULL;
        size_t len = 0;
        char err[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        CHECKF(gb_read_file(path, 1 << 20, &text, &len, err, sizeof err) == 0, "%s", err);
        gb_sweep_def_t def;
        CHECKF(gb_spec_parse(text, len, GB_SPEC_MAX_JOBS, &def, err, sizeof err) == 0, "%s: %s",
               e->d_name, err);
        CHECK(def.n_jobs >= 1 && def.name[0]);
        gb_sweep_def_free(&def);
        free(text);
        seen++;
    }
    closedir(d);
    CHECKF(seen >= 3, "only %d example specs", seen);
}

int main(int argc, char **argv) {
    CHECKF(argc == 2 || argc == 3, "usage: test_spec CASE [DIR]");
    const char *c = argv[1];
    if (strcmp(c, "examples") == 0)
        case_examples(argc == 3 ? argv[2] : "examples");
    else if (strcmp(c, "unknown_key_like") == 0)
        case_unknown_key_like();
    else if (strcmp(c, "interconnect_one_gpu") == 0)
        case_interconnect_one_gpu();
    else if (strcmp(c, "product") == 0)
        case_product();
    else if (strcmp(c, "kinds") == 0)
        case_kinds();
    else if (strcmp(c, "defaults") == 0)
        case_defaults();
    else if (strcmp(c, "roundtrip") == 0)
        case_roundtrip();
    else if (strcmp(c, "labels") == 0)
        case_labels();
    else if (strcmp(c, "kind_table") == 0)
        case_kind_table();
    else if (strcmp(c, "raw_bytes") == 0)
        case_raw_bytes();
    else {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            if (strcmp(c, bad[i].name) != 0) continue;
            char big[8192];
            const char *spec = bad[i].spec;
            if (strcmp(c, "bad_too_many_values") == 0) {
                int o = snprintf(big, sizeof big, "{\"kind\": \"sleep\", \"duration_ms\": [0");
                for (int v = 1; v <= 64; v++)
                    o += snprintf(big + o, sizeof big - (size_t)o, ", %d", v);
                snprintf(big + o, sizeof big - (size_t)o, "]}");
                spec = big;
            } else if (strcmp(c, "bad_too_many_huge") == 0) {
                static const char *const axes[] = {"batch", "steps",     "warmup", "image_size",
                                                   "gpus",  "bucket_mb", "n_nodes"};
                int o = snprintf(big, sizeof big, "{\"kind\": \"resnet50\", \"repeat\": 1000");
                for (size_t a = 0; a < sizeof axes / sizeof axes[0]; a++) {
                    o += snprintf(big + o, sizeof big - (size_t)o, ", \"%s\": [", axes[a]);
                    for (int v = 0; v < 64; v++)
                        o += snprintf(big + o, sizeof big - (size_t)o, "%s%d", v ? ", " : "",
                                      v + 32);
                    o += snprintf(big + o, sizeof big - (size_t)o, "]");
                }
                snprintf(big + o, sizeof big - (size_t)o, "}");
                spec = big;
            } else if (strcmp(c, "bad_deep") == 0) { /* "[[[...]]]": said as too deep */
                int o = snprintf(big, sizeof big,
                                 "{\"kind\": \"sleep\", \"name\": \"[[\\\"\", \"x\": ");
                for (int v = 0; v < 1500; v++)
                    big[o++] = '[';
                for (int v = 0; v < 1500; v++)
                    big[o++] = ']';
                snprintf(big + o, sizeof big - (size_t)o, "}");
                spec = big;
            } else if (strcmp(c, "bad_many_keys") == 0) {
                int o = snprintf(big, sizeof big, "{\"kind\": \"sleep\"");
                for (int v = 0; v < 70; v++)
                    o += snprintf(big + o, sizeof big - (size_t)o, ", \"k%d\": 1", v);
                snprintf(big + o, sizeof big - (size_t)o, "}");
                spec = big;
            }
            parse_bad(spec, bad[i].max_jobs ? bad[i].max_jobs : GB_SPEC_MAX_JOBS, bad[i].want);
            if (strcmp(c, "bad_too_many") == 0) {
                /* a coordinator names its own option (submit has none) */
                gb_sweep_def_t d;
                char err[512] = "";
                CHECK(gb_spec_parse_limit(spec, strlen(spec), 10, "the coordinator's --max-jobs",
                                          &d, err, sizeof err) != 0);
                CHECKF(strcmp(err, "the sweep expands to 12 jobs, more than the coordinator's "
                                   "--max-jobs 10 (the most one sweep may have)") == 0,
                       "%s", err);
                CHECK(d.jobs == NULL && d.n_jobs == 0);
            }
            return 0;
        }
        CHECKF(0, "unknown case %s", c);
    }
    return 0;
}
