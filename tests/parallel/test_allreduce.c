/* test_allreduce.c - the allreduce job kind on CPU replicas
 * (gb_allreduce_run): the sizes of the sweep, the record's figures (algbw =
 * bytes / time, busbw = algbw * 2(n-1)/n), the check after timing passing
 * on 1..3 replicas and failing on a planted fault (one wrong input element
 * on one replica), and bad configurations. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "engine.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[GB_ERR_LEN];

static cJSON *run(const gb_allreduce_config_t *c) {
    char *text = NULL;
    CHECKF(gb_allreduce_run(c, &text, err, sizeof(err)) == 0, "%s", err);
    cJSON *o = cJSON_Parse(text);
    free(text);
    CHECK(cJSON_IsObject(o));
    return o;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECKF(cJSON_IsNumber(v), "no number '%s'", k);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECKF(cJSON_IsString(v), "no string '%s'", k);
    return v->valuestring;
}

static void fails(const gb_allreduce_config_t *c, const char *why) {
    char *text = NULL;
    CHECKF(gb_allreduce_run(c, &text, err, sizeof(err)) == -1, "should fail: %s", why);
    CHECKF(strstr(err, why), "'%s' does not mention '%s'", err, why);
    CHECK(text == NULL);
}

int main(void) {
    gb_allreduce_config_t c;
    for (int dev = 1; dev <= 3; dev++) {
        gb_allreduce_config_default(&c);
        CHECK(c.min_bytes == 8 && c.max_bytes == (1u << 30) && c.fault_rank == -1);
        c.devices = dev;
        c.min_bytes = 8;
        c.max_bytes = 4 << 20; /* 8 B .. 4 MiB: 20 sizes */
        c.iters = 5;
        c.warmup = 1;
        cJSON *o = run(&c);
        CHECK(strcmp(str(o, "kind"), "allreduce") == 0 && strcmp(str(o, "backend"), "cpu") == 0);
        CHECK(num(o, "n_devices") == dev && strcmp(str(o, "precision"), "fp32") == 0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "valid")));
        CHECK(strcmp(str(o, "interconnect"), dev == 1 ? "none" : "shm") == 0);
        const cJSON *det = cJSON_GetObjectItemCaseSensitive(o, "details");
        CHECK(strcmp(str(det, "op"), "sum") == 0 && strcmp(str(det, "transport"), "threads") == 0);
        CHECK(num(det, "iters") == 5 && num(det, "wrong_sizes") == 0);
        const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(o, "sizes");
        CHECK(cJSON_GetArraySize(sizes) == 20);
        double bytes = 8, peak = 0;
        for (const cJSON *e = sizes->child; e; e = e->next, bytes *= 2) {
            CHECK(num(e, "bytes") == bytes && num(e, "count") == bytes / 4);
            double t = num(e, "time_us"), alg = num(e, "algbw_gbs"), bus = num(e, "busbw_gbs");
            CHECK(t > 0 && isfinite(t));
            CHECK(fabs(alg - bytes / (t * 1e-6) / 1e9) <= 1e-9 * alg);
            CHECK(fabs(bus - alg * 2.0 * (dev - 1) / dev) <= 1e-9 * (alg + 1));
            CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "ok")));
            if (bus > peak) peak = bus;
        }
        CHECK(num(det, "peak_busbw_gbs") == peak);
        printf("%d replica(s): peak busbw %.2f GB/s at 4 MiB: %.1f us\n", dev, peak,
               num(cJSON_GetArrayItem(sizes, 19), "time_us"));
        cJSON_Delete(o);
    }
    /* a planted fault: replica 1's input has one wrong element, so every
     * size's check fails and the record says so */
    gb_allreduce_config_default(&c);
    c.devices = 2;
    c.min_bytes = 4;
    c.max_bytes = 64;
    c.iters = 2;
    c.fault_rank = 1;
    cJSON *o = run(&c);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "valid")));
    CHECKF(strcmp(str(o, "invalid_reason"),
                  "wrong results at 5 of 5 sizes (the first at 4 bytes)") == 0,
           "%s", str(o, "invalid_reason"));
    for (const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "sizes")->child; e; e = e->next)
        CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(e, "ok")));
    cJSON_Delete(o);
    /* a non-power-of-two range ends at the last doubling within it */
    gb_allreduce_config_default(&c);
    c.min_bytes = 12;
    c.max_bytes = 100;
    c.iters = 1;
    o = run(&c);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "sizes")) == 4); /* 12..96 */
    cJSON_Delete(o);
    /* bad configurations */
    gb_allreduce_config_default(&c);
    c.min_bytes = 6;
    fails(&c, "multiples of 4");
    gb_allreduce_config_default(&c);
    c.min_bytes = 64;
    c.max_bytes = 32;
    fails(&c, "min <= max");
    gb_allreduce_config_default(&c);
    c.iters = 0;
    fails(&c, "iters 0");
    gb_allreduce_config_default(&c);
    c.devices = 0;
    fails(&c, "devices 0");
    gb_allreduce_config_default(&c);
    snprintf(c.interconnect, sizeof(c.interconnect), "nvlink");
    fails(&c, "interconnect nvlink needs GPUs");
    gb_allreduce_config_default(&c);
    snprintf(c.backend, sizeof(c.backend), "tpu");
    fails(&c, "unknown backend");
    gb_dist_t d = {.rank = 0, .n_nodes = 2, .world_size = 3};
    gb_allreduce_config_default(&c);
    c.dist = &d;
    fails(&c, "does not fit");
    printf("allreduce: ok\n");
    return 0;
}
