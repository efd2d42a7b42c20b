/* test_record.c - result-record checks (coordinator/record.c): the columns
 * pulled out of a good record, and each kind of bad record refused. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "record.h"

#include <math.h>
#include <sqlite3.h>
#include <string.h>

/* What SQLite's JSON functions (the store's triggers, the views) make of
 * text: 1 valid, 0 not. */
static int sqlite_json_valid(const char *text) {
    sqlite3 *db;
    sqlite3_stmt *st;
    CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "SELECT json_valid(?)", -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void bad(const char *json, const char *kind, const char *want) {
    gb_record_t r;
    char err[256] = "";
    CHECKF(gb_record_parse(json, strlen(json), kind, &r, err, sizeof err) != 0, "accepted %s",
           json);
    CHECKF(strstr(err, want), "reason '%s' lacks '%s'", err, want);
    CHECK(r.root == NULL && r.step_ms == NULL && r.loss == NULL);
}

int main(void) {
    const char *good =
        "{\"kind\": \"resnet50\", \"backend\": \"cpu\", \"device_model\": \"AMD EPYC\","
        " \"n_devices\": 1, \"precision\": \"bf16\", \"valid\": false,"
        " \"invalid_reason\": \"p90 is 12% above the median\", \"images_per_sec\": 41.5,"
        " \"step_ms\": {\"median\": 192.7, \"p90\": 215.0, \"min\": 190, \"max\": 230, \"mean\": "
        "200},"
        " \"step_ms_samples\": [190.0, 192.7, 215.0], \"loss_samples\": [6.9, 6.8, 6.7],"
        " \"tflops\": 0.5, \"extra\": {\"ignored\": true}}";
    gb_record_t r;
    char err[256];
    CHECKF(gb_record_parse(good, strlen(good), "resnet50", &r, err, sizeof err) == 0, "%s", err);
    CHECK(strcmp(r.backend, "cpu") == 0 && strcmp(r.device_model, "AMD EPYC") == 0);
    CHECK(strcmp(r.precision, "bf16") == 0 && r.n_devices == 1 && r.valid == 0);
    CHECK(strstr(r.invalid_reason, "12%"));
    CHECK(r.images_per_sec == 41.5 && r.step_ms_median == 192.7 && r.step_ms_p90 == 215.0);
    CHECK(isnan(r.gflops));
    CHECK(r.n_samples == 3 && r.step_ms[2] == 215.0 && r.loss[0] == 6.9);
    CHECK(r.samples_stride == 1);
    gb_record_free(&r);
    /* text cJSON takes and SQLite refuses (a number written 0400, "1."):
     * stored as sent, the insert trigger failed, the turn rolled back at
     * every resend, and placement paused for every agent. What is stored
     * is cJSON's print of it */
    const char *lax = "{\"kind\": \"sleep\", \"duration_ms\": 0400, \"x\": 1.}";
    CHECK(!sqlite_json_valid(lax));
    CHECKF(gb_record_parse(lax, strlen(lax), "sleep", &r, err, sizeof err) == 0, "%s", err);
    CHECKF(r.text && sqlite_json_valid(r.text) && strstr(r.text, "\"duration_ms\":400"), "%s",
           r.text ? r.text : "(none)");
    gb_record_free(&r);
    CHECK(r.text == NULL);
    /* the configuration keys the views group by are whole numbers: 224.9
     * and "224" beside 224 made three groups, which compare showed as one */
    bad("{\"kind\": \"resnet50\", \"image_size\": 224.9}", "resnet50",
        "'image_size' must be a whole number");
    bad("{\"kind\": \"resnet50\", \"image_size\": \"224\"}", "resnet50",
        "'image_size' must be a whole number");
    bad("{\"kind\": \"gemm\", \"m\": -1}", "gemm", "'m' must be a whole number");
    /* a long run's samples, each the mean of samples_stride steps */
    const char *folded = "{\"kind\": \"resnet50\", \"step_ms_samples\": [1, 2], \"loss_samples\":"
                         " [3, 4], \"samples_stride\": 245}";
    CHECKF(gb_record_parse(folded, strlen(folded), "resnet50", &r, err, sizeof err) == 0, "%s",
           err);
    CHECK(r.n_samples == 2 && r.samples_stride == 245);
    gb_record_free(&r);
    /* a diverged run's losses are NaN, null in JSON: stored (as an invalid
     * run), not refused as a bad record, which failed the job */
    const char *nan_loss = "{\"kind\": \"resnet50\", \"valid\": false, \"step_ms_samples\": [1, "
                           "2], \"loss_samples\": [3, null]}";
    CHECKF(gb_record_parse(nan_loss, strlen(nan_loss), "resnet50", &r, err, sizeof err) == 0, "%s",
           err);
    CHECK(r.n_samples == 2 && r.loss[0] == 3 && isnan(r.loss[1]));
    gb_record_free(&r);
    bad("{\"kind\": \"resnet50\", \"step_ms_samples\": [1, null]}", "resnet50",
        "'step_ms_samples'[1] is not a finite number");
    CHECK(r.root == NULL);
    gb_record_free(&r); /* twice is fine */

    /* gemm: its median and p90 time per product are the step's */
    const char *gemm = "{\"kind\": \"gemm\", \"m\": 96, \"n\": 80, \"k\": 72, \"ms_median\": 0.25,"
                       " \"gflops\": 4.4, \"details\": {\"ms_p90\": 0.5}}";
    CHECKF(gb_record_parse(gemm, strlen(gemm), "gemm", &r, err, sizeof err) == 0, "%s", err);
    CHECK(r.step_ms_median == 0.25 && r.step_ms_p90 == 0.5 && r.gflops == 4.4);
    CHECK(r.n_samples == 0);
    gb_record_free(&r);
    const char *gemm_bare = "{\"kind\": \"gemm\", \"details\": 3}"; /* a failed one's */
    CHECKF(gb_record_parse(gemm_bare, strlen(gemm_bare), "gemm", &r, err, sizeof err) == 0, "%s",
           err);
    CHECK(isnan(r.step_ms_median) && isnan(r.step_ms_p90));
    gb_record_free(&r);

    const char *minimal = "{\"kind\": \"sleep\"}";
    CHECK(gb_record_parse(minimal, strlen(minimal), "sleep", &r, err, sizeof err) == 0);
    CHECK(r.n_devices == -1 && r.valid == -1 && isnan(r.images_per_sec) && r.n_samples == 0);
    CHECK(r.backend == NULL && r.precision == NULL);
    gb_record_free(&r);

    bad("{not json", "gemm", "not valid JSON");
    bad("[1]", "gemm", "must be a JSON object");
    bad("{\"backend\": \"cpu\"}", "gemm", "has no 'kind'");
    bad("{\"kind\": \"sleep\"}", "gemm", "of kind 'sleep' but the job is 'gemm'");
    bad("{\"kind\": \"gemm\", \"backend\": \"rocm\"}", "gemm", "backend 'rocm'");
    bad("{\"kind\": \"gemm\", \"backend\": 3}", "gemm", "'backend' must be a string");
    bad("{\"kind\": \"gemm\", \"gflops\": -1}", "gemm", "'gflops' must be a finite number >= 0");
    bad("{\"kind\": \"gemm\", \"gflops\": \"fast\"}", "gemm", "'gflops'");
    bad("{\"kind\": \"gemm\", \"n_devices\": 1e9}", "gemm", "'n_devices'");
    bad("{\"kind\": \"gemm\", \"valid\": 1}", "gemm", "'valid' must be true or false");
    bad("{\"kind\": \"gemm\", \"ms_median\": -1}", "gemm", "'ms_median' must be a finite number");
    bad("{\"kind\": \"gemm\", \"details\": {\"ms_p90\": \"x\"}}", "gemm", "'ms_p90'");
    bad("{\"kind\": \"resnet50\", \"step_ms\": 5}", "resnet50", "'step_ms' must be an object");
    bad("{\"kind\": \"resnet50\", \"step_ms\": {\"median\": -2}}", "resnet50", "'median'");
    bad("{\"kind\": \"resnet50\", \"step_ms_samples\": [1, \"x\"]}", "resnet50",
        "'step_ms_samples'[1]");
    bad("{\"kind\": \"resnet50\", \"step_ms_samples\": {}}", "resnet50", "must be an array");
    bad("{\"kind\": \"resnet50\", \"step_ms_samples\": [1, 2], \"loss_samples\": [1]}", "resnet50",
        "1 loss samples for 2 step samples");
    bad("{\"kind\": \"resnet50\", \"samples_stride\": 0}", "resnet50", "'samples_stride'");
    bad("{\"kind\": \"resnet50\", \"samples_stride\": 2.5}", "resnet50", "'samples_stride'");
    return 0;
}
