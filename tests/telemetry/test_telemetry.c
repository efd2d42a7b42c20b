/* test_telemetry.c - the agent's telemetry (agent/telemetry.h): which
 * clocks-event reasons invalidate a result, the cut to the timed window,
 * summaries and decimation of the record amendment, CPU contention from
 * cumulative counters, and the coordinator's checks of what the agent
 * writes (pure cases); the sampler thread against the stand-in NVML
 * (tests/multinode/fake_nvml.c) with scripted readings: samples at the
 * interval, readings mapped to the right fields, the older throttle-reasons
 * query as fallback, a prompt stop, a hung NVML that never blocks the
 * caller and is abandoned without a leak, no NVML at all; the CPU sampler
 * against real competing busy loops; and the store keeping each result's
 * rows once however often it is sent.
 *
 *   test_telemetry CASE [LIBFAKENVML [LIBFAKENVML_OLD]] */
#define _GNU_SOURCE
#include "check.h"
#include "gb_util.h"
#include "record.h"
#include "runner.h"
#include "store.h"
#include "telemetry.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *fake_lib, *fake_old_lib;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---- helpers for the pure cases ------------------------------------------- */

#define W0 1700000000000LL /* a window start, Unix ms */

static gb_tm_gpu_sample_t gs(unsigned gpu, int64_t t, unsigned sm, uint64_t reasons) {
    gb_tm_gpu_sample_t s;
    memset(&s, 0, sizeof s);
    s.gpu = gpu;
    s.t_ms = t;
    s.have = GB_TM_HAVE_SM | GB_TM_HAVE_MEM | GB_TM_HAVE_POWER | GB_TM_HAVE_TEMP | GB_TM_HAVE_UTIL |
             GB_TM_HAVE_USED | GB_TM_HAVE_REASONS | GB_TM_HAVE_LIMIT;
    s.sm_mhz = sm;
    s.mem_mhz = 2619;
    s.power_mw = 300000 + sm;
    s.limit_mw = 700000;
    s.temp_c = 40 + sm % 7;
    s.util_pct = 90;
    s.mem_used = 1ull << 30;
    s.reasons = reasons;
    return s;
}

static char *record_text(int64_t w0, int64_t w1, int valid, const char *reason) {
    char *buf = malloc(1024);
    CHECK(buf);
    char win[96] = "";
    if (w0 >= 0)
        snprintf(win, sizeof win, ", \"timed_window_ms\": [%lld, %lld]", (long long)w0,
                 (long long)w1);
    snprintf(buf, 1024,
             "{\"kind\": \"resnet50\", \"backend\": \"cuda\", \"n_devices\": 1, \"valid\": %s, "
             "\"invalid_reason\": %s%s%s%s, \"images_per_sec\": 1000}",
             valid ? "true" : "false", reason ? "\"" : "", reason ? reason : "null",
             reason ? "\"" : "", win);
    return buf;
}

/* Amend `rec` with d; returns the parsed result (the text in *text_out if
 * asked). */
static cJSON *amend(const char *rec, const gb_tm_data_t *d, size_t max_len, char **text_out) {
    char *out = NULL, err[256];
    CHECKF(gb_tm_amend(rec, d, max_len, &out, err, sizeof err) == 0, "%s", err);
    CHECK(strlen(out) <= max_len);
    cJSON *o = cJSON_Parse(out);
    CHECK(cJSON_IsObject(o));
    /* whatever the agent writes, the coordinator takes */
    gb_record_t r;
    CHECKF(gb_record_parse(out, strlen(out), "resnet50", &r, err, sizeof err) == 0, "%s", err);
    gb_record_free(&r);
    if (text_out)
        *text_out = out;
    else
        free(out);
    return o;
}

static const cJSON *path(const cJSON *o, const char *p) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", p);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(k))
                             : cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}
static double num(const cJSON *o, const char *p) {
    const cJSON *v = path(o, p);
    CHECKF(cJSON_IsNumber(v), "%s is not a number", p);
    return v->valuedouble;
}
static const char *str(const cJSON *o, const char *p) {
    const cJSON *v = path(o, p);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static int is_true(const cJSON *o, const char *p) {
    return cJSON_IsTrue(path(o, p));
}

static void gpu_data(gb_tm_data_t *d, const gb_tm_gpu_sample_t *s, size_t n, int n_gpus) {
    memset(d, 0, sizeof *d);
    d->interval_ms = 100;
    d->n_gpus = n_gpus;
    d->gpu = s;
    d->n_gpu = n;
    for (int g = 0; g < n_gpus; g++)
        d->default_limit_mw[g] = 700000;
}

/* ---- pure cases ----------------------------------------------------------- */

static void t_reasons(void) {
    char buf[256];
    gb_tm_reason_names(0, buf, sizeof buf);
    CHECK(strcmp(buf, "") == 0);
    gb_tm_reason_names(0x1 | 0x40 | 0x200, buf, sizeof buf);
    CHECKF(strcmp(buf, "gpu_idle, hw_thermal_slowdown, unknown_0x200") == 0, "%s", buf);
    /* too many for the buffer: whole names, then how many were left out */
    char small[48];
    gb_tm_reason_names(0x1 | 0x2 | 0x4 | 0x8 | 0x40 | 0x200, small, sizeof small);
    CHECKF(strcmp(small, "gpu_idle, applications_clocks_setting, +4 more") == 0, "%s", small);
    CHECK(strcmp(gb_tm_reason_name(GB_TM_REASON_HW_POWER_BRAKE), "hw_power_brake_slowdown") == 0);
    CHECK(gb_tm_reason_name(0x400) == NULL);
    /* configuration and idleness are not throttling */
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_GPU_IDLE | GB_TM_REASON_APP_CLOCKS |
                                  GB_TM_REASON_DISPLAY_CLOCKS,
                              700000, 700000) == 0);
    /* every hardware and thermal reason, and sync boost, is */
    const uint64_t bad[] = {GB_TM_REASON_HW_SLOWDOWN,
                            GB_TM_REASON_HW_THERMAL,
                            GB_TM_REASON_HW_POWER_BRAKE,
                            GB_TM_REASON_SW_THERMAL,
                            GB_TM_REASON_SYNC_BOOST,
                            0x200,
                            1ULL << 63};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(gb_tm_throttle_bits(bad[i] | GB_TM_REASON_GPU_IDLE, 700000, 700000) == bad[i]);
    /* the power cap only below the default limit, and not when unknown */
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_SW_POWER_CAP, 700000, 700000) == 0);
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_SW_POWER_CAP, 720000, 700000) == 0);
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_SW_POWER_CAP, 450000, 700000) ==
          GB_TM_REASON_SW_POWER_CAP);
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_SW_POWER_CAP, 450000, 0) == 0);
    CHECK(gb_tm_throttle_bits(GB_TM_REASON_SW_POWER_CAP, 0, 700000) == 0);
    /* truncation never overruns */
    gb_tm_reason_names(~0ULL, buf, 40);
    CHECK(strlen(buf) < 40);
}

/* Samples before, inside and after the window: only the inside ones count,
 * t_ms is counted from the window's start, and idle-only reasons keep the
 * result valid. */
static void t_window(void) {
    gb_tm_gpu_sample_t s[64];
    size_t n = 0;
    /* 2 GPUs, every 100 ms from W0-500 to W0+1500; window [W0, W0+1000] */
    for (int64_t t = W0 - 500; t <= W0 + 1500; t += 100)
        for (unsigned g = 0; g < 2; g++) {
            int in = t >= W0 && t <= W0 + 1000;
            /* outside the window: a thermal reason that must not count */
            s[n++] = gs(g, t + g, in ? 1400 + (unsigned)(t - W0) / 100 + 100 * g : 300,
                        in ? GB_TM_REASON_GPU_IDLE : GB_TM_REASON_HW_THERMAL);
        }
    gb_tm_data_t d;
    gpu_data(&d, s, n, 2);
    char *rec = record_text(W0, W0 + 1000, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid"));
    CHECK(cJSON_IsNull(path(o, "invalid_reason")));
    CHECK(!is_true(o, "telemetry.throttled"));
    CHECK(cJSON_IsNull(path(o, "telemetry.flag")) && cJSON_IsNull(path(o, "telemetry.error")));
    CHECK(strcmp(str(o, "telemetry.source"), "nvml") == 0);
    CHECK(num(o, "telemetry.window_ms.0") == W0 && num(o, "telemetry.window_ms.1") == W0 + 1000);
    /* GPU 0: t = W0 .. W0+1000 (11 samples); GPU 1 read 1 ms later: the
     * last one (W0+1001) falls outside */
    CHECK(num(o, "telemetry.gpus.0.samples") == 11);
    CHECK(num(o, "telemetry.gpus.1.samples") == 10);
    CHECK(num(o, "telemetry.gpus.0.sm_mhz.min") == 1400);
    CHECK(num(o, "telemetry.gpus.0.sm_mhz.max") == 1410);
    CHECK(num(o, "telemetry.gpus.0.sm_mhz.median") == 1405);
    CHECK(num(o, "telemetry.gpus.1.sm_mhz.median") == 1504.5); /* even count: middle two */
    CHECK(num(o, "telemetry.gpus.0.power_w.max") == 301.41);
    CHECK(num(o, "telemetry.gpus.0.power_limit_w") == 700);
    CHECK(num(o, "telemetry.gpus.0.default_power_limit_w") == 700);
    CHECK(strcmp(str(o, "telemetry.reason_names.0"), "gpu_idle") == 0);
    CHECK(cJSON_GetArraySize(path(o, "telemetry.throttle_names")) == 0);
    const cJSON *rows = path(o, "telemetry.samples");
    CHECK(cJSON_GetArraySize(rows) == 21 && num(o, "telemetry.kept_every") == 1);
    /* sorted by GPU then time, t from the window's start */
    CHECK(num(o, "telemetry.samples.0.0") == 0 && num(o, "telemetry.samples.0.1") == 0);
    CHECK(num(o, "telemetry.samples.10.1") == 1000);
    CHECK(num(o, "telemetry.samples.11.0") == 1 && num(o, "telemetry.samples.11.1") == 1);
    CHECK(num(o, "telemetry.samples.0.2") == 1400 && num(o, "telemetry.samples.0.4") == 301.4);
    CHECK(num(o, "telemetry.samples.0.7") == (double)(1ull << 30));
    CHECK(num(o, "telemetry.samples.0.8") == 1 && num(o, "telemetry.samples.0.9") == 700);
    cJSON_Delete(o);
    free(rec);
}

/* A throttled window: invalid, the reasons and GPUs named first, an earlier
 * reason kept after them, at most 255 bytes. */
static void t_throttled(void) {
    gb_tm_gpu_sample_t s[40];
    size_t n = 0;
    for (int i = 0; i < 10; i++)
        for (unsigned g = 0; g < 2; g++)
            s[n++] = gs(g, W0 + 100 * i, 1980,
                        g == 1 && i >= 6 ? GB_TM_REASON_HW_SLOWDOWN | GB_TM_REASON_HW_THERMAL
                                         : GB_TM_REASON_SW_POWER_CAP);
    gb_tm_data_t d;
    gpu_data(&d, s, n, 2);
    char *rec = record_text(
        W0, W0 + 900, 0, "p90 step time 12.00 ms is 20.0% above the median 10.00 ms (limit 10%)");
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid"));
    const char *why = str(o, "invalid_reason");
    CHECKF(why &&
               strcmp(why, "GPU throttling in the timed window: hw_slowdown, hw_thermal_slowdown "
                           "(GPU 1: 4 of 10 samples); p90 step time 12.00 ms is 20.0% above the "
                           "median 10.00 ms (limit 10%)") == 0,
           "%s", why);
    CHECK(is_true(o, "telemetry.throttled"));
    CHECK(strcmp(str(o, "telemetry.flag"), "throttled: hw_slowdown, hw_thermal_slowdown") == 0);
    CHECK(num(o, "telemetry.gpus.0.throttled_samples") == 0);
    CHECK(num(o, "telemetry.gpus.1.throttled_samples") == 4);
    /* the power cap at the default limit is seen, and not held against it */
    CHECK(strcmp(str(o, "telemetry.gpus.0.reason_names.0"), "sw_power_cap") == 0);
    CHECK(cJSON_GetArraySize(path(o, "telemetry.gpus.0.throttle_names")) == 0);
    CHECK(num(o, "telemetry.reasons") == (double)(0x4 | 0x8 | 0x40));
    cJSON_Delete(o);
    free(rec);

    /* a reason bit past 2^53 (a driver's bit 63, "unknown"): folded into
     * bit 52 in the numbers, named in full, and the record is one the
     * coordinator takes (amend checks: it refused it, the job failed and
     * its figures were lost) */
    for (size_t i = 0; i < n; i++)
        s[i].reasons = i >= 10 ? 0x8000000000000000ULL | GB_TM_REASON_HW_SLOWDOWN : 0;
    rec = record_text(W0, W0 + 900, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(num(o, "telemetry.reasons") == (double)((1ULL << 52) | GB_TM_REASON_HW_SLOWDOWN));
    CHECKF(strstr(str(o, "invalid_reason"), "unknown_0x8000000000000000"), "%s",
           str(o, "invalid_reason"));
    cJSON_Delete(o);
    free(rec);
    for (size_t k = 0; k < n; k++) /* as made above */
        s[k].reasons = k % 2 == 1 && k / 2 >= 6 ? GB_TM_REASON_HW_SLOWDOWN | GB_TM_REASON_HW_THERMAL
                                                : GB_TM_REASON_SW_POWER_CAP;

    /* a long earlier reason is cut, never the record invalid */
    char longreason[400];
    memset(longreason, 'x', 300);
    longreason[300] = '\0';
    rec = record_text(W0, W0 + 900, 0, longreason);
    o = amend(rec, &d, 1 << 19, NULL);
    why = str(o, "invalid_reason");
    CHECK(why && strlen(why) == 255 && strncmp(why, "GPU throttling", 14) == 0);
    CHECK(strcmp(why + 252, "...") == 0);
    cJSON_Delete(o);
    free(rec);

    /* the job's GPUs 0 and 1 are NVML's 2 and 3 (CUDA_VISIBLE_DEVICES=2,3):
     * the verdict and the summary name the physical GPU */
    d.have_nvml_index = 1;
    d.nvml_index[0] = 2;
    d.nvml_index[1] = 3;
    rec = record_text(W0, W0 + 900, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    why = str(o, "invalid_reason");
    CHECKF(why && strstr(why, "(GPU 1 (NVML 3): 4 of 10 samples)"), "%s", why);
    CHECK(num(o, "telemetry.gpus.0.nvml_gpu") == 2 && num(o, "telemetry.gpus.1.nvml_gpu") == 3);
    cJSON_Delete(o);
    free(rec);

    /* every bit on four GPUs: names are cut whole with a count of the rest,
     * the verdict keeps its GPUs, and what was cut says so */
    gb_tm_gpu_sample_t many[4];
    for (unsigned g = 0; g < 4; g++)
        many[g] = gs(g, W0 + 100, 1980, 0xFFFFFFFFFFFEull);
    gpu_data(&d, many, 4, 4);
    rec = record_text(W0, W0 + 900, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    why = str(o, "invalid_reason");
    CHECKF(why && strlen(why) <= 255 && strstr(why, " more (GPU 0: 1 of 1 samples, GPU 1: "), "%s",
           why);
    CHECKF(strstr(why, "GPU 3: 1 of 1 samples)") || strcmp(why + strlen(why) - 3, "...") == 0, "%s",
           why);
    const char *flag = str(o, "telemetry.flag");
    CHECKF(flag && strlen(flag) < 160 && strcmp(flag + strlen(flag) - 5, " more") == 0, "%s", flag);
    cJSON_Delete(o);
    free(rec);
}

/* sw_power_cap under a lowered limit counts; an unknown bit counts. */
static void t_power_cap(void) {
    gb_tm_gpu_sample_t s[10];
    for (int i = 0; i < 10; i++) {
        s[i] = gs(0, W0 + 100 * i, 1700, GB_TM_REASON_SW_POWER_CAP);
        s[i].limit_mw = 400000;
    }
    gb_tm_data_t d;
    gpu_data(&d, s, 10, 1);
    char *rec = record_text(W0, W0 + 1000, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid"));
    CHECKF(strstr(str(o, "invalid_reason"), "sw_power_cap (GPU 0: 10 of 10 samples)"), "%s",
           str(o, "invalid_reason"));
    CHECK(num(o, "telemetry.gpus.0.power_limit_w") == 400);
    cJSON_Delete(o);
    /* the same at the default limit: valid */
    for (int i = 0; i < 10; i++)
        s[i].limit_mw = 700000;
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid") && strcmp(str(o, "telemetry.reason_names.0"), "sw_power_cap") == 0);
    cJSON_Delete(o);
    /* a bit no table knows yet */
    s[3].reasons = 0x800;
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid") && strstr(str(o, "invalid_reason"), "unknown_0x800 (GPU 0: 1 of"));
    cJSON_Delete(o);
    free(rec);
}

/* HW slowdown alone in one sample (nvml.h: "may be also reported during
 * PState or clock change"): listed among the reasons, not held against the
 * GPU (it invalidated a healthy GPU's result); two samples in a row, or
 * one with a hardware thermal or power-brake reason, are throttling. */
static void t_lone_slowdown(void) {
    static const struct {
        uint64_t at3, at4;
        int valid;
    } cases[] = {
        {GB_TM_REASON_HW_SLOWDOWN, 0, 1},
        {GB_TM_REASON_HW_SLOWDOWN, GB_TM_REASON_HW_SLOWDOWN, 0},
        {GB_TM_REASON_HW_SLOWDOWN | GB_TM_REASON_HW_POWER_BRAKE, 0, 0},
        {GB_TM_REASON_HW_SLOWDOWN | GB_TM_REASON_GPU_IDLE, GB_TM_REASON_GPU_IDLE, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb_tm_gpu_sample_t s[20];
        size_t n = 0;
        for (int i = 0; i < 10; i++)
            for (unsigned g = 0; g < 2; g++)
                s[n++] = gs(g, W0 + 100 * i, 1980,
                            g == 1 && i == 3   ? cases[k].at3
                            : g == 1 && i == 4 ? cases[k].at4
                                               : 0);
        gb_tm_data_t d;
        gpu_data(&d, s, n, 2);
        char *rec = record_text(W0, W0 + 900, 1, NULL);
        cJSON *o = amend(rec, &d, 1 << 19, NULL);
        CHECKF(is_true(o, "valid") == cases[k].valid, "case %zu: valid %d, %s", k,
               is_true(o, "valid"), str(o, "invalid_reason") ? str(o, "invalid_reason") : "");
        CHECKF(num(o, "telemetry.reasons") != 0, "case %zu: the reason not listed", k);
        CHECK(is_true(o, "telemetry.throttled") == !cases[k].valid);
        cJSON_Delete(o);
        free(rec);
    }
}

/* A GPU whose every sample lacks its clocks-event reasons (both queries
 * "not supported": some virtual GPUs) was not judged: the result stays
 * valid, its flag says so, and that GPU's throttled_samples is null
 * (v_telemetry's throttled NULL; it read 0, a clean run). */
static void t_unjudged(void) {
    gb_tm_gpu_sample_t s[20];
    size_t n = 0;
    for (int i = 0; i < 10; i++)
        for (unsigned g = 0; g < 2; g++) {
            s[n] = gs(g, W0 + 100 * i, 1980, 0);
            if (g == 1) s[n].have &= ~(unsigned)GB_TM_HAVE_REASONS;
            n++;
        }
    gb_tm_data_t d;
    gpu_data(&d, s, n, 2);
    char *rec = record_text(W0, W0 + 900, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid"));
    CHECKF(str(o, "telemetry.flag") &&
               strcmp(str(o, "telemetry.flag"),
                      "throttling not judged: GPU 1 gave no clocks-event reasons (10 samples)") ==
                   0,
           "%s", str(o, "telemetry.flag") ? str(o, "telemetry.flag") : "(null)");
    CHECK(cJSON_IsNull(path(o, "telemetry.gpus.1.throttled_samples")));
    CHECK(num(o, "telemetry.gpus.0.throttled_samples") == 0);
    /* the coordinator takes it */
    char *text = cJSON_PrintUnformatted(o), err[300];
    gb_record_t r;
    CHECK(text);
    CHECKF(gb_record_parse(text, strlen(text), "resnet50", &r, err, sizeof err) == 0, "%s", err);
    gb_record_free(&r);
    free(text);
    cJSON_Delete(o);
    free(rec);
}

/* The sampler's thinning folds a dropped sample into the one kept: its
 * reasons and that it had them, and a run of HW slowdown marked as one
 * (folded into one sample, two in a row read as one alone, no verdict). */
static void t_fold(void) {
    gb_tm_gpu_sample_t x = gs(0, W0, 1980, 0), y = gs(0, W0 + 100, 1980, 0x40);
    x.have &= ~(unsigned)GB_TM_HAVE_REASONS; /* its own query failed */
    gb_tm_fold(&x, &y);
    CHECK((x.have & GB_TM_HAVE_REASONS) && x.reasons == 0x40 && !(x.have & GB_TM_SLOWDOWN_RUN));
    x = gs(0, W0, 1980, GB_TM_REASON_HW_SLOWDOWN);
    y = gs(0, W0 + 100, 1980, GB_TM_REASON_HW_SLOWDOWN);
    gb_tm_fold(&x, &y);
    CHECK(x.have & GB_TM_SLOWDOWN_RUN);
    x = gs(0, W0, 1980, GB_TM_REASON_HW_SLOWDOWN);
    y = gs(0, W0 + 100, 1980, 0);
    gb_tm_fold(&x, &y);
    CHECK(!(x.have & GB_TM_SLOWDOWN_RUN) && x.reasons == GB_TM_REASON_HW_SLOWDOWN);
    /* a run folded once more stays one; and a folded run is a verdict */
    y = x;
    y.have |= GB_TM_SLOWDOWN_RUN;
    x = gs(0, W0, 1980, 0);
    gb_tm_fold(&x, &y);
    CHECK(x.have & GB_TM_SLOWDOWN_RUN);
    gb_tm_gpu_sample_t s[10];
    for (int i = 0; i < 10; i++)
        s[i] = gs(0, W0 + 100 * i, 1980, 0);
    s[4] = x;
    s[4].t_ms = W0 + 400;
    gb_tm_data_t d;
    gpu_data(&d, s, 10, 1);
    char *rec = record_text(W0, W0 + 900, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid"));
    cJSON_Delete(o);
    free(rec);
    /* two lone blips a clean sample apart (raw 2 and 4), folded in pairs
     * into neighbours: not a run, valid (the folded pair [2, 3] and [4, 5]
     * read as two in a row and made it invalid); blips at raw 3 and 4 are
     * a run across the pairs' edge */
    for (int blip = 0; blip < 2; blip++) {
        gb_tm_gpu_sample_t raw[16];
        for (int i = 0; i < 16; i++)
            raw[i] = gs(0, W0 + 50 * i, 1980,
                        i == (blip ? 3 : 2) || i == 4 ? GB_TM_REASON_HW_SLOWDOWN : 0);
        for (int i = 0; i < 8; i++) {
            s[i] = raw[2 * i];
            gb_tm_fold(&s[i], &raw[2 * i + 1]);
        }
        gpu_data(&d, s, 8, 1);
        rec = record_text(W0, W0 + 800, 1, NULL);
        o = amend(rec, &d, 1 << 19, NULL);
        CHECKF(is_true(o, "valid") == !blip, "blips at %d and 4: %s", blip ? 3 : 2,
               str(o, "invalid_reason"));
        cJSON_Delete(o);
        free(rec);
    }
}

/* A long run of 8 GPUs: at most GB_TM_MAX_ROWS rows, each the first of a
 * block of samples with the block's reasons; the summary still over all;
 * a smaller size limit decimates further; one too small for the summary
 * keeps the verdict only. */
static void t_decimate(void) {
    const int ng = 8, per = 1000;
    gb_tm_gpu_sample_t *s = calloc((size_t)ng * per, sizeof *s);
    CHECK(s);
    size_t n = 0;
    for (int i = 0; i < per; i++)
        for (int g = 0; g < ng; g++)
            s[n++] = gs((unsigned)g, W0 + 100 * i, 1000 + (unsigned)i,
                        g == 5 && (i == 501 || i == 502) ? GB_TM_REASON_HW_SLOWDOWN : 0);
    gb_tm_data_t d;
    gpu_data(&d, s, n, ng);
    char *rec = record_text(W0, W0 + 100 * per, 1, NULL);
    char *text = NULL;
    cJSON *o = amend(rec, &d, 1 << 19, &text);
    const cJSON *rows = path(o, "telemetry.samples");
    CHECKF(cJSON_GetArraySize(rows) <= GB_TM_MAX_ROWS, "%d rows", cJSON_GetArraySize(rows));
    CHECK(num(o, "telemetry.kept_every") == 4);
    CHECK(cJSON_GetArraySize(rows) == ng * per / 4);
    for (int g = 0; g < ng; g++) {
        char p[64];
        snprintf(p, sizeof p, "telemetry.gpus.%d.samples", g);
        CHECK(num(o, p) == per);
    }
    CHECK(num(o, "telemetry.gpus.0.sm_mhz.max") == 1000 + per - 1); /* all samples, not rows */
    /* the throttled samples 501 and 502 of GPU 5 (two in a row: one alone
     * is a clock change as likely, t_lone_slowdown) live on in the row of
     * their block (500..503), and invalidate */
    CHECK(!is_true(o, "valid"));
    int found = 0;
    for (const cJSON *r = rows->child; r; r = r->next) {
        if (cJSON_GetArrayItem(r, 0)->valuedouble != 5) continue;
        double t = cJSON_GetArrayItem(r, 1)->valuedouble;
        double reasons = cJSON_GetArrayItem(r, 8)->valuedouble;
        if (t == 50000)
            found = reasons == 8;
        else
            CHECK(reasons == 0);
    }
    CHECK(found);
    size_t full = strlen(text);
    free(text);
    cJSON_Delete(o);
    /* half the room: fewer rows, same summary */
    o = amend(rec, &d, full / 2, NULL);
    CHECK(num(o, "telemetry.kept_every") >= 8 && num(o, "telemetry.gpus.7.samples") == per);
    cJSON_Delete(o);
    /* room for the verdict only */
    o = amend(rec, &d, 1400, NULL);
    CHECK(!is_true(o, "valid") && is_true(o, "telemetry.throttled"));
    CHECK(path(o, "telemetry.gpus") == NULL && strstr(str(o, "telemetry.error"), "too large"));
    cJSON_Delete(o);
    /* and not even that */
    char *out = NULL, err[256];
    CHECK(gb_tm_amend(rec, &d, 200, &out, err, sizeof err) == -1 && out == NULL);
    CHECK(strstr(err, "too large"));
    free(rec);
    free(s);
}

/* No timed window: every sample is judged; no sample in it: said so, and
 * no verdict; a sampler error is carried. */
static void t_edges(void) {
    gb_tm_gpu_sample_t s[6];
    for (int i = 0; i < 6; i++)
        s[i] = gs(0, W0 + 100 * i, 1500, i == 0 ? GB_TM_REASON_SW_THERMAL : 0);
    gb_tm_data_t d;
    gpu_data(&d, s, 6, 1);
    char *rec = record_text(-1, 0, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(cJSON_IsNull(path(o, "telemetry.window_ms")) && str(o, "telemetry.note"));
    CHECK(num(o, "telemetry.gpus.0.samples") == 6 && !is_true(o, "valid"));
    CHECK(num(o, "telemetry.samples.0.1") == 0 && num(o, "telemetry.samples.5.1") == 500);
    cJSON_Delete(o);
    free(rec);
    /* a window between two samples */
    rec = record_text(W0 + 110, W0 + 150, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid") && num(o, "telemetry.gpus.0.samples") == 0);
    CHECK(cJSON_IsNull(path(o, "telemetry.gpus.0.sm_mhz")));
    CHECKF(strcmp(str(o, "telemetry.error"),
                  "no GPU sample in the timed window (40 ms, interval 100 ms)") == 0,
           "%s", str(o, "telemetry.error"));
    /* incomplete is said in the flag too (the store's telemetry_flag) */
    CHECKF(strcmp(str(o, "telemetry.flag"), "telemetry incomplete: no GPU sample in the timed "
                                            "window (40 ms, interval 100 ms)") == 0,
           "%s", str(o, "telemetry.flag"));
    cJSON_Delete(o);
    /* what the sampler could not do */
    d.error = "NVML not available: no driver";
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(strcmp(str(o, "telemetry.error"), "NVML not available: no driver") == 0);
    CHECK(strcmp(str(o, "telemetry.flag"), "telemetry incomplete: NVML not available: no driver") ==
          0);
    CHECK(is_true(o, "valid"));
    cJSON_Delete(o);
    free(rec);
    /* a missing reading is null, not zero */
    s[2].have &= ~(unsigned)GB_TM_HAVE_POWER;
    d.error = NULL;
    rec = record_text(W0, W0 + 500, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(cJSON_IsNull(path(o, "telemetry.samples.2.4")) && num(o, "telemetry.samples.1.4") > 0);
    cJSON_Delete(o);
    free(rec);
    /* the wall clock stepped back mid-job, and two samples share a ms: the
     * rows stay acceptable to the store (amend() checks), the summary has
     * them all */
    gb_tm_gpu_sample_t j[4] = {gs(0, W0, 1500, 0), gs(0, W0 + 100, 1500, 0),
                               gs(0, W0 + 100, 1500, 0), gs(0, W0 - 50, 1500, 0)};
    gpu_data(&d, j, 4, 1);
    rec = record_text(-1, 0, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(num(o, "telemetry.gpus.0.samples") == 4);
    CHECK(cJSON_GetArraySize(path(o, "telemetry.samples")) == 2);
    CHECK(num(o, "telemetry.samples.0.1") == 0 && num(o, "telemetry.samples.1.1") == 100);
    cJSON_Delete(o);
    free(rec);
    /* not a record */
    char *out = NULL, err[128];
    CHECK(gb_tm_amend("[1]", &d, 1000, &out, err, sizeof err) == -1 && !out);
}

static gb_tm_cpu_sample_t cs(int64_t t, uint64_t busy, uint64_t steal, uint64_t total,
                             uint64_t worker) {
    gb_tm_cpu_sample_t s = {t, busy, steal, total, worker, 1, 2600};
    return s;
}

/* CPU contention from cumulative counters: the bracketing samples, the
 * worker's own time left out, the 5% flag and the 10% limit. */
/* A CPU job's telemetry of n samples, 2 cores, every 100 ms. */
static gb_tm_data_t cpu_data(gb_tm_cpu_sample_t *s, size_t n) {
    gb_tm_data_t d;
    memset(&d, 0, sizeof d);
    d.interval_ms = 100;
    d.cpu = 1;
    d.cpus = s;
    d.n_cpu = n;
    d.cores = 2;
    return d;
}

static void t_cpu(void) {
    /* 2 cores, 100 ticks/s: 20 ticks a 100 ms interval; the worker takes
     * 18, others `o` per interval, steal 1 */
    gb_tm_cpu_sample_t s[12];
    gb_tm_cpu_window_t w;
    uint64_t busy = 0, steal = 0, total = 0, worker = 0;
    for (int i = 0; i < 12; i++) {
        s[i] = cs(W0 - 100 + 100 * i, busy, steal, total, worker);
        busy += 18 + 1;
        worker += 18;
        steal += 0;
        total += 20;
    }
    /* from the last sample at or before the start to the first at or after
     * the end */
    gb_tm_cpu_window(s, 12, W0 + 50, W0 + 850, &w);
    CHECK(w.ok && w.covers && w.span_ms == 900);
    CHECK(fabs(w.others_pct - 5.0) < 1e-9 && w.steal_pct == 0 && fabs(w.worker_pct - 90) < 1e-9);
    /* the end beyond the last sample: the last one is used, not covering */
    gb_tm_cpu_window(s, 12, W0, W0 + 5000, &w);
    CHECK(w.ok && !w.covers && w.span_ms == 1000);
    /* the worker gone from the last samples: they are skipped */
    s[10].have_worker = s[11].have_worker = 0;
    gb_tm_cpu_window(s, 12, W0, W0 + 1000, &w);
    CHECK(w.ok && !w.covers && w.span_ms == 800);
    /* fewer than two usable samples */
    gb_tm_cpu_window(s, 1, W0, W0 + 1000, &w);
    CHECK(!w.ok);

    /* through the record: levels of contention around the 5% flag and the
     * 10% limit (both exclusive), 100 ticks an interval */
    const struct {
        uint64_t others, steal;
        int flagged, valid;
    } lv[] = {{0, 0, 0, 1}, {5, 0, 0, 1}, {6, 0, 1, 1}, {9, 1, 1, 1}, {10, 1, 1, 0}, {15, 5, 1, 0}};
    for (size_t k = 0; k < sizeof lv / sizeof lv[0]; k++) {
        busy = steal = total = worker = 0;
        for (int i = 0; i < 12; i++) {
            s[i] = cs(W0 - 100 + 100 * i, busy, steal, total, worker);
            busy += 50 + lv[k].others;
            worker += 50;
            steal += lv[k].steal;
            total += 100;
        }
        gb_tm_data_t d = cpu_data(s, 12);
        char *rec = record_text(W0, W0 + 1000, 1, NULL);
        cJSON *o = amend(rec, &d, 1 << 19, NULL);
        double taken = (double)(lv[k].others + lv[k].steal);
        CHECKF(num(o, "telemetry.cpu.taken_pct") == taken, "level %zu: %g", k,
               num(o, "telemetry.cpu.taken_pct"));
        CHECK(num(o, "telemetry.cpu.worker_pct") == 50);
        CHECK(is_true(o, "telemetry.cpu.flagged") == lv[k].flagged);
        CHECK(is_true(o, "valid") == lv[k].valid);
        CHECK(lv[k].flagged == (str(o, "telemetry.flag") != NULL));
        if (lv[k].others == 15)
            CHECKF(strcmp(str(o, "invalid_reason"),
                          "CPU contention in the timed window: 20.0% of the CPU time taken by "
                          "other processes (15.0%) and the hypervisor (5.0%), limit 10%") == 0,
                   "%s", str(o, "invalid_reason"));
        CHECK(strcmp(str(o, "telemetry.source"), "proc") == 0);
        CHECK(num(o, "telemetry.cpu.cpu_mhz.median") == 2600);
        /* rows: samples at W0..W0+1000, each over the interval before it */
        CHECK(cJSON_GetArraySize(path(o, "telemetry.samples")) == 11);
        CHECK(num(o, "telemetry.samples.0.0") == 0 &&
              num(o, "telemetry.samples.0.2") == (double)lv[k].others);
        cJSON_Delete(o);
        free(rec);
    }
    /* a sleep (the control plane's test kind) measures nothing: contention
     * does not make it invalid (a shared machine marked most sleep jobs of
     * the smoke spec valid 0); the telemetry is kept, the flag says what
     * was seen, not_judged the verdict it would have drawn. Its test hook
     * judge_telemetry asks for the verdict */
    for (int judge = 0; judge < 2; judge++) {
        busy = steal = total = worker = 0;
        for (int i = 0; i < 12; i++) {
            s[i] = cs(W0 - 100 + 100 * i, busy, steal, total, worker);
            busy += 50 + 30;
            worker += 50;
            total += 100;
        }
        gb_tm_data_t d = cpu_data(s, 12);
        char rec[256], *out = NULL, err[256];
        snprintf(rec, sizeof rec,
                 "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"valid\": true, "
                 "\"invalid_reason\": null, \"judge_telemetry\": %s, "
                 "\"timed_window_ms\": [%lld, %lld]}",
                 judge ? "true" : "false", (long long)W0, (long long)W0 + 1000);
        CHECKF(gb_tm_amend(rec, &d, 1 << 19, &out, err, sizeof err) == 0, "%s", err);
        gb_record_t r;
        CHECKF(gb_record_parse(out, strlen(out), "sleep", &r, err, sizeof err) == 0, "%s", err);
        CHECKF(r.valid == !judge, "judge_telemetry %d: valid %d", judge, r.valid);
        gb_record_free(&r);
        cJSON *o = cJSON_Parse(out);
        CHECK(num(o, "telemetry.cpu.taken_pct") == 30);
        CHECK(strncmp(str(o, "telemetry.flag"), "cpu contention: 30.0%", 21) == 0);
        const char *verdict = "CPU contention in the timed window: 30.0% of the CPU time taken by "
                              "other processes (30.0%) and the hypervisor (0.0%), limit 10%";
        CHECKF(judge ? strcmp(str(o, "invalid_reason"), verdict) == 0
                     : str(o, "invalid_reason") == NULL &&
                           strcmp(str(o, "telemetry.not_judged"), verdict) == 0,
               "judge_telemetry %d: %s", judge, out);
        CHECK(judge == (path(o, "telemetry.not_judged") == NULL));
        cJSON_Delete(o);
        free(out);
    }

    /* a window a few ms long between two samples 100 ms apart: 20 ticks on
     * 2 cores, 5 of them others' (25%). Too coarse to judge: valid, not
     * contended, and the flag says why it was not judged (a 1 ms gemm was
     * made invalid by one stray tick) */
    busy = steal = total = worker = 0;
    for (int i = 0; i < 2; i++) {
        s[i] = cs(W0 + 100 * i, busy, steal, total, worker);
        busy += 10;
        worker += 5;
        total += 20;
    }
    gb_tm_data_t d = cpu_data(s, 2);
    char *rec = record_text(W0 + 40, W0 + 41, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECKF(num(o, "telemetry.cpu.taken_pct") == 25 && num(o, "telemetry.cpu.ticks") == 20, "%g",
           num(o, "telemetry.cpu.taken_pct"));
    CHECK(!is_true(o, "telemetry.cpu.judged") && !is_true(o, "telemetry.cpu.flagged"));
    CHECKF(is_true(o, "valid"), "%s", str(o, "invalid_reason"));
    /* no sample inside the window: the clock is the two around it (it was
     * null for every small gemm) */
    CHECKF(num(o, "telemetry.cpu.cpu_mhz.median") == 2600, "%g",
           num(o, "telemetry.cpu.cpu_mhz.median"));
    CHECKF(strstr(str(o, "telemetry.flag"), "too few clock ticks to judge contention"), "%s",
           str(o, "telemetry.flag"));
    cJSON_Delete(o);
    free(rec);

    /* ... but 29 of 40 ticks others' is contention whatever the ticks' grain:
     * at least (29 - 6) / (40 + 6) = 50%, invalid (it stayed valid: a gemm
     * at 2 GFLOP/s where it measured 404 alone) */
    busy = steal = total = worker = 0;
    for (int i = 0; i < 2; i++) {
        s[i] = cs(W0 + 100 * i, busy, steal, total, worker);
        busy += 34;
        worker += 5;
        total += 40;
    }
    d = cpu_data(s, 2);
    rec = record_text(W0 + 40, W0 + 41, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECKF(num(o, "telemetry.cpu.taken_pct") == 72.5 && num(o, "telemetry.cpu.ticks") == 40, "%g",
           num(o, "telemetry.cpu.taken_pct"));
    CHECK(is_true(o, "telemetry.cpu.judged") && !is_true(o, "valid"));
    CHECKF(strstr(str(o, "invalid_reason"),
                  "CPU contention in the timed window: at least 50.0% of the CPU time taken by "
                  "other processes and the hypervisor (72.5% in 40 clock ticks"),
           "%s", str(o, "invalid_reason"));
    /* the window is the reason it is invalid: flagged, and the flag says
     * so (v_results.telemetry_flag was NULL, flagged 0) */
    CHECK(is_true(o, "telemetry.cpu.flagged"));
    CHECKF(strstr(str(o, "telemetry.flag"),
                  "cpu contention: at least 50.0% of the CPU time taken by others (72.5% in 40"),
           "%s", str(o, "telemetry.flag"));
    cJSON_Delete(o);
    free(rec);
    /* just over the limit: the reason shows it over ("10.0% ..., limit 10%"
     * was why a 10.04% window was invalid) */
    s[0] = cs(W0 - 100, 0, 0, 0, 0);
    s[1] = cs(W0 + 1000, 251 + 2000, 0, 2500, 2000);
    d = cpu_data(s, 2);
    rec = record_text(W0, W0 + 900, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECKF(strstr(str(o, "invalid_reason"),
                  "CPU contention in the timed window: 10.04% of the CPU time taken"),
           "%s", str(o, "invalid_reason"));
    cJSON_Delete(o);
    free(rec);
    double fl;
    CHECK(!gb_tm_cpu_taken_floor(25, 20, 2, &fl) && fl == 0);           /* the stray tick above */
    CHECK(!gb_tm_cpu_taken_floor(15, 60, 2, &fl) && fl < 5);            /* 9 - 6 = 3 of 66: 4.5% */
    CHECK(gb_tm_cpu_taken_floor(40, 60, 2, &fl) && fl > 27 && fl < 28); /* 24 - 6 of 66 */
}

/* A long CPU window: at most GB_TM_MAX_ROWS rows (4097 samples in it kept
 * 2049 rows with every second one: the partial block counted too). */
static void t_cpu_rows(void) {
    enum { N = 4099 };
    gb_tm_cpu_sample_t *s = calloc(N, sizeof *s);
    CHECK(s);
    uint64_t busy = 0, total = 0, worker = 0;
    for (int i = 0; i < N; i++) {
        s[i] = cs(W0 - 100 + 100 * i, busy, 0, total, worker);
        busy += 19;
        worker += 18;
        total += 20;
    }
    gb_tm_data_t d = cpu_data(s, N);
    /* samples 1..4097 are in the window [W0, W0 + 409600] */
    char *rec = record_text(W0, W0 + 100 * 4096, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 20, NULL);
    const cJSON *rows = path(o, "telemetry.samples");
    CHECKF(cJSON_GetArraySize(rows) <= GB_TM_MAX_ROWS, "%d rows, kept_every %g",
           cJSON_GetArraySize(rows), num(o, "telemetry.kept_every"));
    CHECK(num(o, "telemetry.kept_every") == 4);
    cJSON_Delete(o);
    free(rec);
    free(s);
}

/* What the coordinator refuses in a record's telemetry. */
static void t_record_check(void) {
    static const char *const bad[] = {
        "\"timed_window_ms\": [5, 4]",
        "\"timed_window_ms\": [5]",
        "\"timed_window_ms\": [-1, 4]",
        "\"telemetry\": []",
        "\"telemetry\": {\"source\": \"dcgm\"}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": {}}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 1, 2]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 1, 1, 1, 1, 1, 1, 1, 1, -1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[64, 1, 1, 1, 1, 1, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 1.5, 1, 1, 1, 1, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 1, 1, 1, 1, 1, 1, 1, 0.5, 1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 1, 1, 1, 1, 1, 1, 1, 1, \"x\"]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[0, 5, 1, 1, 1, 1, 1, 1, 1, 1], "
        "[0, 5, 1, 1, 1, 1, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"samples\": [[1, 5, 1, 1, 1, 1, 1, 1, 1, 1], "
        "[0, 6, 1, 1, 1, 1, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"proc\", \"samples\": [[7, 1, 1, 1, 1], [6, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"proc\", \"samples\": [[7, 1, 1, 1, 1, 1]]}",
        "\"telemetry\": {\"source\": \"nvml\", \"gpus\": [{\"gpu\": 0}]}",
        "\"telemetry\": {\"source\": \"nvml\", \"gpus\": [{\"gpu\": 0, \"samples\": 3, "
        "\"sm_mhz\": {\"min\": -1, \"median\": 1, \"max\": 1}}]}",
        "\"telemetry\": {\"source\": \"nvml\", \"gpus\": [{\"gpu\": 0, \"samples\": 3, "
        "\"reason_names\": [7]}]}",
        "\"telemetry\": {\"source\": \"nvml\", \"throttled\": 1}",
        "\"telemetry\": {\"source\": \"nvml\", \"flag\": 3}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"taken_pct\": \"high\"}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"flagged\": \"yes\"}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"judged\": \"no\"}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"covers_window\": 1}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"ticks\": -7}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"ticks\": 2.5}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"cpu_mhz\": {\"median\": \"fast\"}}}",
        "\"telemetry\": {\"source\": \"proc\", \"cpu\": {\"cpu_mhz\": 2000}}",
        "\"telemetry\": {\"source\": \"proc\", \"cores\": -3}",
    };
    char json[1024], err[300];
    gb_record_t r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{\"kind\": \"sleep\", %s}", bad[i]);
        CHECKF(gb_record_parse(json, strlen(json), "sleep", &r, err, sizeof err) == -1,
               "accepted: %s", bad[i]);
        CHECKF(strstr(err, "record: '"), "%s: %s", bad[i], err);
    }
    /* too many rows */
    size_t cap = 64u << 10, o = 0;
    char *big = malloc(cap * 8);
    CHECK(big);
    o += (size_t)sprintf(big + o, "{\"kind\": \"sleep\", \"telemetry\": {\"source\": \"proc\", "
                                  "\"samples\": [");
    for (int i = 0; i <= GB_RECORD_MAX_TM_ROWS; i++)
        o += (size_t)sprintf(big + o, "%s[%d, 1, 1, 1, 1]", i ? ", " : "", i);
    o += (size_t)sprintf(big + o, "]}}");
    CHECK(gb_record_parse(big, o, "sleep", &r, err, sizeof err) == -1 && strstr(err, "at most"));
    free(big);
    /* nulls are readings NVML did not give */
    snprintf(json, sizeof json,
             "{\"kind\": \"sleep\", \"timed_window_ms\": [5, 5], \"telemetry\": {\"source\": "
             "\"nvml\", \"samples\": [[0, 0, null, null, null, null, null, null, null, null]], "
             "\"gpus\": [{\"gpu\": 0, \"samples\": 1, \"sm_mhz\": null}], \"flag\": null}}");
    CHECKF(gb_record_parse(json, strlen(json), "sleep", &r, err, sizeof err) == 0, "%s", err);
    gb_record_free(&r);
}

static void t_gpu_indices(void) {
    int out[GB_TM_MAX_GPUS];
    char err[256];
    CHECK(gb_tm_gpu_indices(NULL, 3, out, err, sizeof err) == 0 && out[0] == 0 && out[2] == 2);
    CHECK(gb_tm_gpu_indices("4,6,7", 2, out, err, sizeof err) == 0 && out[0] == 4 && out[1] == 6);
    CHECK(gb_tm_gpu_indices("5", 2, out, err, sizeof err) == -1 && strstr(err, "CUDA_VISIBLE"));
    CHECK(gb_tm_gpu_indices("GPU-8e1f,GPU-aa", 1, out, err, sizeof err) == -1);
    CHECK(gb_tm_gpu_indices("0,x", 2, out, err, sizeof err) == -1);
    CHECK(gb_tm_gpu_indices(NULL, GB_TM_MAX_GPUS + 1, out, err, sizeof err) == -1);
}

/* ---- the sampler thread --------------------------------------------------- */

static gb_telemetry_t *hub(int interval_ms, int grace_ms) {
    gb_tm_config_t cfg;
    gb_tm_config_default(&cfg);
    cfg.interval_ms = interval_ms;
    cfg.stop_grace_ms = grace_ms;
    char err[256];
    gb_telemetry_t *t = gb_telemetry_new(&cfg, err, sizeof err);
    CHECKF(t, "%s", err);
    return t;
}

static gb_sampler_t *start_gpus(gb_telemetry_t *t, int n) {
    gb_tm_job_t job;
    memset(&job, 0, sizeof job);
    job.n_gpus = n;
    char err[256];
    CHECK(gb_tm_gpu_indices(NULL, n, job.gpu_index, err, sizeof err) == 0);
    gb_sampler_t *s = gb_sampler_start(t, &job, err, sizeof err);
    CHECKF(s, "%s", err);
    return s;
}

/* Stop without blocking: each call returns at once; returns ms it took. */
static int64_t stop_polling(gb_sampler_t *s) {
    int64_t t0 = gb_mono_ms();
    for (;;) {
        int64_t c0 = gb_mono_ms();
        int done = gb_sampler_stop(s, gb_mono_ms());
        /* blocking would take the grace or NVML's delay (300, 1500 ms);
         * 250 leaves room for a preempted call under ASan on 2 cores */
        CHECKF(gb_mono_ms() - c0 < 250, "a stop call blocked %" PRId64 " ms", gb_mono_ms() - c0);
        if (done) return gb_mono_ms() - t0;
        sleep_ms(2);
    }
}

static char script_file[64];
static pid_t script_owner;
static void remove_script(void) {
    if (getpid() == script_owner) unlink(script_file); /* not a forked child's exit */
}

static void write_script(const char *text) {
    char *file = script_file;
    if (!file[0]) atexit(remove_script); /* a failed CHECK exits too */
    script_owner = getpid();
    snprintf(script_file, sizeof script_file, "/tmp/gb-tm-script.%d", (int)getpid());
    FILE *f = fopen(file, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
    setenv("GB_FAKE_NVML_TELEMETRY", file, 1);
}

/* Samples come at the interval, per GPU, with the scripted readings. */
static void t_sampler_interval(void) {
    write_script("0 * sm=1755 mem=2619 power=412.5 temp=61 util=99 used=1024 reasons=0x1 "
                 "limit=650 default=700\n"
                 "0 1 sm=1200 reasons=0x48\n");
    gb_telemetry_t *t = hub(50, 5000);
    CHECKF(gb_telemetry_nvml_error(t)[0] == '\0', "%s", gb_telemetry_nvml_error(t));
    CHECK(gb_telemetry_refs(t) == 1);
    gb_sampler_t *s = start_gpus(t, 2);
    sleep_ms(1000);
    CHECK(gb_sampler_count(s) >= 2);
    int64_t took = stop_polling(s);
    CHECKF(took < 2000, "stopping took %" PRId64 " ms (grace 5000)", took);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(!d.error && d.n_gpus == 2 && d.interval_ms == 50);
    CHECK(d.default_limit_mw[0] == 700000 && d.default_limit_mw[1] == 700000);
    /* 1 s at 50 ms is 20 or 21 samples a GPU; a loaded 2-core machine may
     * run the thread late (never early: a late sample is not caught up) */
    size_t n0 = 0;
    int64_t gaps[64];
    size_t ng = 0;
    int64_t last = 0;
    for (size_t i = 0; i < d.n_gpu; i++) {
        const gb_tm_gpu_sample_t *x = &d.gpu[i];
        CHECK(x->have ==
              (GB_TM_HAVE_SM | GB_TM_HAVE_MEM | GB_TM_HAVE_POWER | GB_TM_HAVE_TEMP |
               GB_TM_HAVE_UTIL | GB_TM_HAVE_USED | GB_TM_HAVE_REASONS | GB_TM_HAVE_LIMIT));
        CHECK(x->mem_mhz == 2619 && x->power_mw == 412500 && x->temp_c == 61 && x->util_pct == 99);
        CHECK(x->mem_used == 1024ull << 20 && x->limit_mw == 650000);
        CHECK(x->sm_mhz == (x->gpu == 0 ? 1755u : 1200u));
        CHECK(x->reasons == (x->gpu == 0 ? 0x1u : 0x48u));
        if (x->gpu != 0) continue;
        if (n0++ && ng < 64) gaps[ng++] = x->t_ms - last;
        last = x->t_ms;
    }
    CHECKF(n0 >= 10 && n0 <= 22, "%zu samples of GPU 0 in 1 s at 50 ms", n0);
    CHECK(d.n_gpu == 2 * n0);
    /* the median gap is the interval: +-1 for the ms clock; a late wake-up
     * on a loaded 2-core machine shortens the next gap as much as it
     * lengthened this one, and a very late one skips a tick (+50) */
    for (size_t i = 0; i < ng; i++)
        for (size_t j = i + 1; j < ng; j++)
            if (gaps[j] < gaps[i]) {
                int64_t x = gaps[i];
                gaps[i] = gaps[j];
                gaps[j] = x;
            }
    CHECKF(gaps[ng / 2] >= 45 && gaps[ng / 2] <= 65, "median gap %" PRId64 " ms", gaps[ng / 2]);
    CHECK(gb_telemetry_refs(t) == 1); /* the thread let go of NVML */
    gb_sampler_destroy(&s);
    CHECK(s == NULL);
    gb_telemetry_destroy(&t);
    CHECK(t == NULL);
}

/* Readings change when the script says, and a window around the change
 * judges only what it holds. */
static void t_sampler_script(void) {
    int64_t now = gb_wall_ms();
    char text[256];
    /* avg: what nvmlDeviceGetPowerUsage says; the sampler reads the power
     * now (NVML_FI_DEV_POWER_INSTANT) where the driver has it */
    snprintf(text, sizeof text,
             "0 * sm=1980 reasons=0 avg=250\n%lld 0 sm=1100 power=699 reasons=0x20\n",
             (long long)(now + 400));
    write_script(text);
    gb_telemetry_t *t = hub(20, 5000);
    gb_sampler_t *s = start_gpus(t, 1);
    sleep_ms(800);
    stop_polling(s);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    int before = 0, after = 0;
    for (size_t i = 0; i < d.n_gpu; i++) {
        const gb_tm_gpu_sample_t *x = &d.gpu[i];
        if (x->t_ms < now + 400) {
            CHECK(x->sm_mhz == 1980 && x->reasons == 0 && x->power_mw == 300000); /* not avg */
            before++;
        } else {
            CHECK(x->sm_mhz == 1100 && x->reasons == 0x20 && x->power_mw == 699000);
            after++;
        }
    }
    CHECK(before >= 3 && after >= 3);
    char *rec = record_text(now, now + 380, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid") && num(o, "telemetry.gpus.0.sm_mhz.min") == 1980);
    cJSON_Delete(o);
    free(rec);
    rec = record_text(now + 300, now + 800, 1, NULL);
    o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid") && strstr(str(o, "invalid_reason"), "sw_thermal_slowdown"));
    CHECK(num(o, "telemetry.gpus.0.sm_mhz.min") == 1100 &&
          num(o, "telemetry.gpus.0.sm_mhz.max") == 1980);
    cJSON_Delete(o);
    free(rec);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* A driver without nvmlDeviceGetCurrentClocksEventReasons: the reasons come
 * from the older query; without nvmlDeviceGetFieldValues the power is
 * nvmlDeviceGetPowerUsage's (the average). */
static void t_sampler_fallback(void) {
    write_script("0 * reasons=0x88 power=650 avg=420\n");
    gb_telemetry_t *t = hub(20, 5000);
    gb_sampler_t *s = start_gpus(t, 1);
    sleep_ms(100);
    stop_polling(s);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(d.n_gpu >= 1);
    for (size_t i = 0; i < d.n_gpu; i++) {
        CHECK((d.gpu[i].have & GB_TM_HAVE_REASONS) && d.gpu[i].reasons == 0x88);
        CHECK((d.gpu[i].have & GB_TM_HAVE_POWER) && d.gpu[i].power_mw == 420000);
    }
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* The power now is read from the member of the field value its valueType
 * names (nvml.h leaves the type to the driver): a double, a signed or a
 * 64-bit integer give the same milliwatts as an unsigned int; a type not
 * known here gives the 1-second average of nvmlDeviceGetPowerUsage, not a
 * figure read from the wrong member. */
static void t_sampler_power_types(void) {
    write_script("0 * power=412.5 avg=250\n");
    gb_telemetry_t *t = hub(20, 5000);
    static const struct {
        const char *type;
        unsigned want_mw;
    } cases[] = {{"0", 412500}, {"1", 412500}, {"2", 412500}, {"3", 412500},
                 {"4", 412500}, {"5", 412500}, {"99", 250000}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        setenv("GB_FAKE_NVML_POWER_TYPE", cases[k].type, 1);
        gb_sampler_t *s = start_gpus(t, 1);
        for (int i = 0; i < 1000 && gb_sampler_count(s) < 1; i++)
            sleep_ms(5);
        stop_polling(s);
        gb_tm_data_t d;
        gb_sampler_data(s, &d);
        CHECK(d.n_gpu >= 1);
        for (size_t i = 0; i < d.n_gpu; i++)
            CHECKF((d.gpu[i].have & GB_TM_HAVE_POWER) && d.gpu[i].power_mw == cases[k].want_mw,
                   "valueType %s: %u mW, want %u", cases[k].type, d.gpu[i].power_mw,
                   cases[k].want_mw);
        gb_sampler_destroy(&s);
    }
    unsetenv("GB_FAKE_NVML_POWER_TYPE");
    gb_telemetry_destroy(&t);
}

/* The job's GPUs 0 and 1 sampled at NVML indices nvml0 and nvml1 (the
 * fake's mode, deny: GB_FAKE_NVML_DENY or NULL), read back from script. */
static void sampler_maps(const char *mode, const char *deny, const char *script, int nvml0,
                         int nvml1) {
    setenv("GB_FAKE_NVML", mode, 1);
    if (deny)
        setenv("GB_FAKE_NVML_DENY", deny, 1);
    else
        unsetenv("GB_FAKE_NVML_DENY");
    write_script(script);
    gb_telemetry_t *t = hub(20, 5000);
    gb_sampler_t *s = start_gpus(t, 2);
    for (int i = 0; i < 1000 && gb_sampler_count(s) < 2; i++)
        sleep_ms(5);
    stop_polling(s);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECKF(!d.error, "%s", d.error);
    CHECK(d.n_gpu >= 2);
    for (size_t i = 0; i < d.n_gpu; i++)
        CHECKF(d.gpu[i].sm_mhz == (d.gpu[i].gpu == 0 ? 1100u : 1200u), "job GPU %u read %u MHz",
               d.gpu[i].gpu, d.gpu[i].sm_mhz);
    CHECKF(d.have_nvml_index && d.nvml_index[0] == nvml0 && d.nvml_index[1] == nvml1, "NVML %d, %d",
           d.nvml_index[0], d.nvml_index[1]);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
    unsetenv("GB_FAKE_NVML_DENY");
    unsetenv("GB_FAKE_NVML");
}

/* NVML numbering its GPUs against their PCI order (the fake's
 * bridge_reversed: NVML index 0 is the GPU on the last bus): the job's GPU
 * k, CUDA's k-th in PCI order, is still the one sampled, and the record
 * names the NVML index that was. */
static void t_sampler_pci_order(void) {
    sampler_maps("bridge_reversed", NULL, "0 * sm=1000\n0 0 sm=1100\n0 1 sm=1200\n0 3 sm=1400\n", 3,
                 2);
}

/* NVML's GPU 0 outside this process's device cgroup (Slurm's
 * ConstrainDevices: NVML counts it and refuses its handle; CUDA sees the
 * other three as 0..2): the job's GPU 0 is NVML's 1. The sampler failed
 * ("NVML GPU 0: ...") and sampled no GPU. */
static void t_sampler_denied(void) {
    sampler_maps("switch", "0", "0 * sm=1000\n0 1 sm=1100\n0 2 sm=1200\n", 1, 2);
}

/* A stop is seen at once, not after the interval. */
static void t_sampler_stop(void) {
    write_script("");
    gb_telemetry_t *t = hub(10000, 5000);
    gb_sampler_t *s = start_gpus(t, 4);
    for (int i = 0; i < 1000 && gb_sampler_count(s) < 4; i++)
        sleep_ms(5);
    CHECK(gb_sampler_count(s) == 4); /* the first round */
    int64_t took = stop_polling(s);
    CHECKF(took < 3000, "a stop with a 10 s interval took %" PRId64 " ms", took);
    /* destroy without a stop first: it stops, joins and frees */
    gb_sampler_t *s2 = start_gpus(t, 1);
    int64_t t0 = gb_mono_ms();
    gb_sampler_destroy(&s2);
    CHECK(gb_mono_ms() - t0 < 1000);
    gb_sampler_destroy(&s);
    /* the hub can go before nothing else holds NVML */
    gb_telemetry_destroy(&t);
}

/* NVML hangs in a query for 1.5 s: starting and stopping never block; the
 * thread is abandoned after the grace, the telemetry says so, and the
 * thread frees what it holds once NVML returns. */
static void t_sampler_hung(void) {
    write_script("");
    gb_telemetry_t *t = hub(50, 300);
    setenv("GB_FAKE_NVML_DELAY_MS", "1500", 1);
    int64_t t0 = gb_mono_ms();
    gb_sampler_t *s = start_gpus(t, 1);
    CHECKF(gb_mono_ms() - t0 < 500, "start took %" PRId64 " ms (NVML's delay: 1500)",
           gb_mono_ms() - t0);
    CHECK(gb_telemetry_refs(t) == 2);
    sleep_ms(100);
    int64_t took = stop_polling(s);
    /* not waiting for NVML, which returns some 1400 ms after the stop */
    CHECKF(took >= 290 && took < 1100, "abandoned after %" PRId64 " ms (grace 300)", took);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(d.error && strstr(d.error, "did not stop") && d.n_gpu == 0);
    char *rec = record_text(W0, W0 + 100, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(is_true(o, "valid") && strstr(str(o, "telemetry.flag"), "telemetry incomplete"));
    cJSON_Delete(o);
    free(rec);
    t0 = gb_mono_ms();
    gb_sampler_destroy(&s);
    CHECK(gb_mono_ms() - t0 < 500);
    /* the agent may go while the thread still waits in NVML */
    gb_telemetry_destroy(&t);
    /* ... which then returns, finishes, frees itself and unloads NVML: no
     * leak (LeakSanitizer checks at exit in the sanitizer build); give it
     * the rest of the 1.5 s */
    sleep_ms(2000);
    unsetenv("GB_FAKE_NVML_DELAY_MS");
}

/* Without NVML the GPU sampler ends at once and says why. */
static void t_sampler_no_nvml(void) {
    setenv("GB_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    gb_telemetry_t *t = hub(50, 5000);
    CHECK(strstr(gb_telemetry_nvml_error(t), "NVML not loaded"));
    gb_sampler_t *s = start_gpus(t, 1);
    stop_polling(s);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(d.n_gpu == 0 && d.error && strstr(d.error, "NVML not available"));
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
    /* nothing to sample is refused */
    t = hub(50, 5000);
    gb_tm_job_t job;
    memset(&job, 0, sizeof job);
    char err[128];
    CHECK(gb_sampler_start(t, &job, err, sizeof err) == NULL && strstr(err, "nothing to sample"));
    gb_telemetry_destroy(&t);
    /* a bad interval */
    gb_tm_config_t cfg;
    gb_tm_config_default(&cfg);
    cfg.interval_ms = 5;
    CHECK(gb_telemetry_new(&cfg, err, sizeof err) == NULL && strstr(err, "10..60000"));
}

/* ---- the CPU sampler ------------------------------------------------------ */

static pid_t spin(void) {
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    return p;
}

/* SIGKILL and reap n competitors and the worker. */
static void kill_all(const pid_t *comp, int n, pid_t worker) {
    for (int i = 0; i < n; i++)
        kill(comp[i], SIGKILL);
    kill(worker, SIGKILL);
    for (int i = 0; i < n; i++)
        waitpid(comp[i], NULL, 0);
    waitpid(worker, NULL, 0);
}

/* The CPU sampler on worker pid every 50 ms, around a window [*w0, *w1] of
 * 1.5 s with 300 ms before and 200 ms after it; stopped polling, its hub in
 * *t (both for the caller to destroy). */
static gb_sampler_t *sample_window(pid_t worker, gb_telemetry_t **t, int64_t *w0, int64_t *w1) {
    *t = hub(50, 5000);
    gb_tm_job_t job;
    memset(&job, 0, sizeof job);
    job.pid = worker;
    char err[128];
    gb_sampler_t *s = gb_sampler_start(*t, &job, err, sizeof err);
    CHECKF(s, "%s", err);
    sleep_ms(300);
    *w0 = gb_wall_ms();
    sleep_ms(1500);
    *w1 = gb_wall_ms();
    sleep_ms(200);
    stop_polling(s);
    return s;
}

/* The worker spins on one thread while competitors spin on every core:
 * the CPUs are never idle and the worker can have at most one core of N,
 * so what others took is at least (N-1)/N of the time; the worker's own
 * time is not counted as theirs. */
static void t_cpu_competing(void) {
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    pid_t worker = spin(), comp[256];
    int nc = cores < 256 ? cores : 256;
    for (int i = 0; i < nc; i++)
        comp[i] = spin();
    gb_telemetry_t *t;
    int64_t w0, w1;
    gb_sampler_t *s = sample_window(worker, &t, &w0, &w1);
    kill_all(comp, nc, worker);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(d.cpu && !d.error && d.n_cpu >= 10);
    gb_tm_cpu_window_t w;
    gb_tm_cpu_window(d.cpus, d.n_cpu, w0, w1, &w);
    CHECK(w.ok && w.covers);
    /* tolerance: clock ticks are 10 ms, 2 x cores ticks of error at each
     * end over >= 1.5 s x cores x 100 ticks: under 2 points; 5 more for the
     * instants the competitors are not yet or no longer running */
    double floor_pct = 100.0 * (cores - 1) / cores - 7;
    CHECKF(w.taken_pct >= floor_pct, "others took %.1f%% (+%.1f%% steal); at least %.1f%% expected",
           w.others_pct, w.steal_pct, floor_pct);
    CHECKF(w.worker_pct <= 100.0 / cores + 2 && w.worker_pct > 1, "worker %.1f%%", w.worker_pct);
    CHECKF(w.others_pct + w.steal_pct + w.worker_pct <= 100.5, "more than the machine: %.1f",
           w.others_pct + w.steal_pct + w.worker_pct);
    for (size_t i = 0; i < d.n_cpu; i++)
        CHECK(d.cpus[i].mhz > 0); /* /proc/cpuinfo has it here */
    char *rec = record_text(w0, w1, 1, NULL);
    cJSON *o = amend(rec, &d, 1 << 19, NULL);
    CHECK(!is_true(o, "valid") && strstr(str(o, "invalid_reason"), "CPU contention"));
    CHECK(is_true(o, "telemetry.cpu.flagged"));
    CHECK(cJSON_GetArraySize(path(o, "telemetry.samples")) >= 20);
    cJSON_Delete(o);
    free(rec);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* An agent under taskset (a cpuset): its telemetry counts the CPUs it may
 * run on only. Competitors spin on every other CPU and the worker sleeps:
 * the window holds one CPU's clock ticks, not the host's (every CPU was
 * counted, and the competitors, which take nothing from a job that cannot
 * run there, were contention that made its result invalid). */
static void t_cpu_mask(void) {
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    if (CPU_COUNT(&all) < 2) {
        printf("skip: one CPU, nothing outside a mask\n");
        return;
    }
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    pid_t comp[256];
    int nc = 0;
    for (int c = first + 1; c < CPU_SETSIZE && nc < 256; c++) {
        if (!CPU_ISSET(c, &all)) continue;
        pid_t p = fork();
        CHECK(p >= 0);
        if (p == 0) {
            cpu_set_t mine;
            CPU_ZERO(&mine);
            CPU_SET(c, &mine);
            sched_setaffinity(0, sizeof mine, &mine);
            volatile unsigned long x = 0;
            for (;;)
                x++;
        }
        comp[nc++] = p;
    }
    pid_t worker = fork();
    CHECK(worker >= 0);
    if (worker == 0) {
        for (;;)
            pause();
    }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    gb_telemetry_t *t;
    int64_t w0, w1;
    gb_sampler_t *s = sample_window(worker, &t, &w0, &w1);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
    kill_all(comp, nc, worker);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECKF(d.cpu && !d.error && d.cores == 1, "cores %d", d.cores);
    gb_tm_cpu_window_t w;
    gb_tm_cpu_window(d.cpus, d.n_cpu, w0, w1, &w);
    CHECK(w.ok && w.covers);
    double one_cpu = (double)w.span_ms / 1000.0 * (double)sysconf(_SC_CLK_TCK);
    CHECKF((double)w.ticks <= one_cpu * 1.25 + 5, "%llu ticks in %lld ms: more than one CPU's %.0f",
           (unsigned long long)w.ticks, (long long)w.span_ms, one_cpu);
    for (size_t i = 0; i < d.n_cpu; i++)
        CHECK(d.cpus[i].mhz > 0);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* A worker that sleeps while nk children of its own spin (as a launcher
 * waits on its replica processes): its pid, and in *release the pipe end
 * whose close ends it and them (release_worker). */
static pid_t sleeping_worker(int nk, int *release) {
    int pfd[2];
    CHECK(nk <= 64 && pipe(pfd) == 0);
    pid_t worker = fork();
    CHECK(worker >= 0);
    if (worker == 0) {
        close(pfd[1]); /* nor its children: the test's close is the signal */
        pid_t kids[64];
        for (int i = 0; i < nk; i++)
            kids[i] = spin();
        char b;
        ssize_t r = read(pfd[0], &b, 1); /* until the test is done */
        (void)r;
        for (int i = 0; i < nk; i++)
            kill(kids[i], SIGKILL);
        _exit(0);
    }
    close(pfd[0]);
    *release = pfd[1];
    return worker;
}

static void release_worker(pid_t worker, int release) {
    close(release);
    waitpid(worker, NULL, 0);
}

/* A worker whose work is done by its children (replica processes of a
 * data-parallel job, kernels/launch.h): one spinning child per core, the
 * worker itself asleep. Their time is the worker's, not others': nothing
 * else runs, so the window is not contention. (Counted from the worker's
 * own stat alone, as before, others took nearly all of it: invalid.) */
static void t_cpu_worker_children(void) {
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int release;
    pid_t worker = sleeping_worker(cores < 64 ? cores : 64, &release);
    gb_telemetry_t *t;
    int64_t w0, w1;
    gb_sampler_t *s = sample_window(worker, &t, &w0, &w1);
    release_worker(worker, release);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    CHECK(d.cpu && !d.error);
    gb_tm_cpu_window_t w;
    gb_tm_cpu_window(d.cpus, d.n_cpu, w0, w1, &w);
    CHECK(w.ok && w.covers);
    /* the worker itself sleeps: without its children it had about 0%; a
     * busy host (another test, the other core's tenant) may take a share */
    CHECKF(w.worker_pct >= 25, "the worker's children: %.1f%% of the CPU time (others %.1f%%)",
           w.worker_pct, w.others_pct);
    printf("cpu_worker_children: worker %.1f%%, others %.1f%%, steal %.1f%%\n", w.worker_pct,
           w.others_pct, w.steal_pct);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* Both ways of finding the worker's children count a spinning child's time
 * while the worker itself sleeps: the kernel's children list, and the scan
 * of /proc that kernels without it get. */
static void t_cpu_worker_ticks(void) {
    int release;
    pid_t worker = sleeping_worker(1, &release);
    sleep_ms(100);
    uint64_t a[2], b[2];
    for (int scan = 0; scan < 2; scan++)
        CHECK(gb_tm_worker_ticks(worker, scan, &a[scan]) == 0);
    sleep_ms(1000);
    for (int scan = 0; scan < 2; scan++)
        CHECK(gb_tm_worker_ticks(worker, scan, &b[scan]) == 0);
    release_worker(worker, release);
    long hz = sysconf(_SC_CLK_TCK);
    /* a second of one spinning child: a busy host may take part of it */
    for (int scan = 0; scan < 2; scan++)
        CHECKF(b[scan] - a[scan] >= (uint64_t)(hz / 4), "%s: %llu ticks in 1 s (%ld per s)",
               scan ? "the /proc scan" : "the children list",
               (unsigned long long)(b[scan] - a[scan]), hz);
    uint64_t t;
    CHECK(gb_tm_worker_ticks(worker, 0, &t) == -1); /* gone */
}

/* A worker that is gone mid-way: later samples lack it, nothing breaks. */
static void t_cpu_worker_exits(void) {
    pid_t worker = spin();
    gb_telemetry_t *t = hub(20, 5000);
    gb_tm_job_t job;
    memset(&job, 0, sizeof job);
    job.pid = worker;
    char err[128];
    gb_sampler_t *s = gb_sampler_start(t, &job, err, sizeof err);
    CHECK(s);
    sleep_ms(300);
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    int64_t gone = gb_wall_ms();
    sleep_ms(200);
    stop_polling(s);
    gb_tm_data_t d;
    gb_sampler_data(s, &d);
    size_t with = 0, without = 0;
    for (size_t i = 0; i < d.n_cpu; i++) {
        if (d.cpus[i].have_worker)
            with++;
        else {
            CHECK(d.cpus[i].t_ms >= gone - 30);
            without++;
        }
    }
    CHECK(with >= 5 && without >= 3);
    gb_tm_cpu_window_t w;
    gb_tm_cpu_window(d.cpus, d.n_cpu, gone - 250, gone + 150, &w);
    CHECK(w.ok && !w.covers && w.worker_pct > 0);
    gb_sampler_destroy(&s);

    /* the agent's way: the reaped worker's CPU time is handed over before
     * the stop, and the sample the stop takes carries it: the window up to
     * the exit is covered (the schedule's last sample came before it) */
    worker = spin();
    job.pid = worker;
    s = gb_sampler_start(t, &job, err, sizeof err);
    CHECK(s);
    sleep_ms(230);
    kill(worker, SIGKILL);
    struct rusage ru;
    CHECK(wait4(worker, NULL, 0, &ru) == worker);
    gone = gb_wall_ms();
    uint64_t ticks = (uint64_t)(((double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6) *
                                    (double)sysconf(_SC_CLK_TCK) +
                                0.5);
    gb_sampler_worker_ended(s, ticks);
    stop_polling(s);
    gb_sampler_data(s, &d);
    CHECK(d.n_cpu >= 2);
    const gb_tm_cpu_sample_t *last = &d.cpus[d.n_cpu - 1];
    CHECKF(last->have_worker && last->worker == ticks && last->t_ms >= gone,
           "last sample: worker %d %" PRIu64 " (reaped %" PRIu64 "), at %" PRId64 " (gone %" PRId64
           ")",
           last->have_worker, last->worker, ticks, last->t_ms, gone);
    gb_tm_cpu_window(d.cpus, d.n_cpu, d.cpus[0].t_ms + 10, gone, &w);
    CHECK(w.ok && w.covers && w.worker_pct > 0);
    gb_sampler_destroy(&s);
    gb_telemetry_destroy(&t);
}

/* ---- the worker's GPU order ---------------------------------------------- */

/* What CUDA_DEVICE_ORDER a worker the runner starts sees (a script stands
 * in for the worker and writes it to its result file). */
static char *worker_order(void) {
    char dir[64], exe[96], err[256];
    snprintf(dir, sizeof dir, "/tmp/gb-tm-run.%d", (int)getpid());
    CHECK(gb_mkdir_p(dir, err, sizeof err) == 0);
    snprintf(exe, sizeof exe, "%s/worker.sh", dir);
    FILE *f = fopen(exe, "w");
    CHECK(f);
    /* argv: worker --job FILE --out FILE */
    fputs("#!/bin/sh\nprintf '%s,%s' \"${CUDA_DEVICE_ORDER-unset}\" \"$GB_TM_PROBE\" > \"$5\"\n",
          f);
    CHECK(fclose(f) == 0 && chmod(exe, 0755) == 0);
    gb_run_t *r = gb_run_start(exe, dir, "{}", 30, 500, err, sizeof err);
    CHECKF(r, "%s", err);
    while (!gb_run_poll(r, gb_mono_ms()))
        sleep_ms(5);
    gb_run_destroy(&r);
    char path[128], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/result.json", dir);
    CHECKF(gb_read_file(path, 4096, &text, &len, err, sizeof err) == 0, "%s", err);
    unlink(path);
    unlink(exe);
    snprintf(path, sizeof path, "%s/job.json", dir);
    unlink(path);
    rmdir(dir);
    return text;
}

/* NVML numbers GPUs by PCI bus id, CUDA fastest first unless told: the
 * worker is told, also when the agent's environment chose another order
 * (kept, the telemetry sampled another GPU than the job's on a node of
 * mixed GPUs). */
static void t_runner_env(void) {
    setenv("GB_TM_PROBE", "kept", 1); /* the rest of the environment goes along */
    unsetenv("CUDA_DEVICE_ORDER");
    char *got = worker_order();
    CHECKF(strcmp(got, "PCI_BUS_ID,kept") == 0, "%s", got);
    free(got);
    setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST", 1);
    got = worker_order();
    CHECKF(strcmp(got, "PCI_BUS_ID,kept") == 0, "%s", got);
    free(got);
    unsetenv("CUDA_DEVICE_ORDER");
}

/* ---- the store ------------------------------------------------------------ */

static char dbpath[128];

static char *one(const char *sql) {
    static char buf[1024];
    sqlite3 *db;
    CHECK(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
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

/* A result with GPU telemetry stored through the coordinator's store: its
 * rows once, whatever the resends; the views; a CPU result's rows. */
static void t_store(void) {
    snprintf(dbpath, sizeof dbpath, "/tmp/gb-tm-store.%d.db", (int)getpid());
    unlink(dbpath);
    char err[512];
    gb_store_t *st = gb_store_open(dbpath, err, sizeof err);
    CHECKF(st, "%s", err);
    gb_store_node_t node = {.agent_id = "a1",
                            .name = "node-1",
                            .state = "connected",
                            .cpu_model = "cpu",
                            .os = "",
                            .kernel = "",
                            .driver_version = "",
                            .cuda_driver_version = "",
                            .gpu_model = "NVIDIA Fake H100",
                            .labels = "",
                            .kinds = "sleep",
                            .inventory_json = "{}",
                            .n_gpus = 0,
                            .slots = 2};
    uint64_t sweep, job[2];
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_store_node_upsert(st, &node, "t0") == 0);
    CHECK(gb_store_sweep_insert(st, "s", "{}", 2, NULL, "t0", &sweep) == 0);
    for (int i = 0; i < 2; i++) {
        gb_store_job_t j = {.sweep_id = sweep,
                            .seq = i,
                            .kind = "sleep",
                            .params = "{}",
                            .backend = "auto",
                            .n_gpus = 1,
                            .batch_per_gpu = -1,
                            .synthetic = 1,
                            .max_attempts = 1};
        CHECK(gb_store_job_insert(st, &j, "t0", &job[i]) == 0);
        CHECK(gb_store_job_assign(st, job[i], 1, "a1", i ? "cpu" : "cuda", "t0") == 0);
        if (i == 1) { /* the CPU job ran twice: attempt 1 given up, its result came late */
            CHECK(gb_store_attempt_end(st, job[i], 1, "lost", "agent a1 lost", "t0") == 0);
            CHECK(gb_store_job_assign(st, job[i], 2, "a1", "cpu", "t0") == 0);
        }
        CHECK(gb_store_job_finish(st, job[i], "done", NULL, "t1") == 0);
    }
    /* a GPU record as the agent makes it: 2 GPUs, GPU 1 throttled */
    gb_tm_gpu_sample_t s[20];
    size_t n = 0;
    for (int i = 0; i < 10; i++)
        for (unsigned g = 0; g < 2; g++)
            s[n++] = gs(g, W0 + 100 * i, 1900 - 10 * g, g == 1 && i > 7 ? 0x40 : 0);
    gb_tm_data_t d;
    gpu_data(&d, s, n, 2);
    char *rec = record_text(W0, W0 + 1000, 1, NULL), *text = NULL;
    cJSON *o = amend(rec, &d, 1 << 19, &text);
    cJSON_Delete(o);
    free(rec);
    gb_record_t r;
    CHECKF(gb_record_parse(text, strlen(text), "resnet50", &r, err, sizeof err) == 0, "%s", err);
    gb_store_result_t sr = {.job_id = job[0],
                            .attempt = 1,
                            .agent_id = "a1",
                            .status = "ok",
                            .kind = "sleep",
                            .backend = "cuda",
                            .device_model = "NVIDIA Fake H100",
                            .invalid_reason = r.invalid_reason,
                            .n_devices = 2,
                            .images_per_sec = NAN,
                            .step_ms_median = NAN,
                            .step_ms_p90 = NAN,
                            .gflops = NAN,
                            .valid = r.valid,
                            .synthetic = 1,
                            .record = text};
    for (int k = 0; k < 3; k++) { /* sent three times */
        int inserted = -1;
        CHECK(gb_store_result_insert(st, &sr, "t1", &inserted) == 0);
        CHECK(inserted == (k == 0));
    }
    /* a CPU record */
    gb_tm_cpu_sample_t c[6];
    for (int i = 0; i < 6; i++)
        c[i] = cs(W0 + 200 * i, (uint64_t)i * 30, (uint64_t)i, (uint64_t)i * 40, (uint64_t)i * 20);
    memset(&d, 0, sizeof d);
    d.interval_ms = 200;
    d.cpu = 1;
    d.cpus = c;
    d.n_cpu = 6;
    d.cores = 2;
    rec = record_text(W0, W0 + 1000, 1, NULL);
    char *ctext = NULL;
    cJSON_Delete(amend(rec, &d, 1 << 19, &ctext));
    free(rec);
    gb_store_result_t cr = sr;
    cr.job_id = job[1];
    cr.backend = "cpu";
    cr.valid = 0;
    cr.invalid_reason = "contention";
    cr.record = ctext;
    cr.attempt = 2;
    int inserted;
    CHECK(gb_store_result_insert(st, &cr, "t1", &inserted) == 0 && inserted);
    gb_store_result_t stale = cr; /* attempt 1's, superseded */
    stale.attempt = 1;
    CHECK(gb_store_result_insert(st, &stale, "t1", &inserted) == 0 && inserted);
    CHECK(gb_store_commit(st) == 0);
    gb_store_close(&st);
    gb_record_free(&r);

    EQ("SELECT count(*) FROM telemetry", "20");
    EQ("SELECT count(DISTINCT gpu_idx) || ',' || min(t_ms) || ',' || max(t_ms) FROM telemetry",
       "2,0,900");
    EQ("SELECT sm_clock_mhz || ',' || mem_clock_mhz || ',' || power_w || ',' || temp_c || ',' || "
       "util_pct || ',' || mem_used_bytes || ',' || throttle_reasons || ',' || power_limit_w "
       "FROM telemetry WHERE gpu_idx = 1 AND t_ms = 900",
       "1890,2619,301.89,40,90,1073741824,64,700.0");
    EQ("SELECT group_concat(gpu || ':' || samples || ':' || sm_clock_median_mhz || ':' || "
       "throttled || ':' || COALESCE(throttle_reasons, '-'), ' ') FROM v_telemetry",
       "0:10:1900:0:- 1:10:1890:1:hw_thermal_slowdown");
    EQ("SELECT node || ',' || temp_max_c || ',' || power_max_w FROM v_telemetry WHERE gpu = 1",
       "node-1,40,301.89");
    EQ("SELECT valid || ',' || telemetry_flag || ',' || substr(invalid_reason, 1, 34) FROM "
       "v_results WHERE job_id = 1",
       "0,throttled: hw_thermal_slowdown,GPU throttling in the timed window");
    EQ("SELECT count(*) FROM telemetry_cpu", "10"); /* both attempts' rows are kept */
    EQ("SELECT others_pct || ',' || steal_pct || ',' || worker_pct FROM telemetry_cpu WHERE t_ms "
       "= 200",
       "25.0,2.5,50.0");
    EQ("SELECT cores || ',' || taken_pct || ',' || flagged || ',' || valid FROM v_cpu_telemetry",
       "2,27.5,1,0");
    /* the result that ended the job only (0010), its figures REAL, judged */
    EQ("SELECT count(*) || ',' || attempt || ',' || typeof(taken_pct) || ',' || typeof(others_pct) "
       "|| ',' || judged || ',' || ticks FROM v_cpu_telemetry",
       "1,2,real,real,1,200");
    EQ("SELECT count(*) FROM v_telemetry WHERE job_id = 2", "0");
    free(text);
    free(ctext);
    unlink(dbpath);
    char side[160];
    snprintf(side, sizeof side, "%s-wal", dbpath);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", dbpath);
    unlink(side);
}

int main(int argc, char **argv) {
    CHECKF(argc >= 2, "usage: test_telemetry CASE [LIBFAKENVML [LIBFAKENVML_OLD]]");
    const char *c = argv[1];
    fake_lib = argc > 2 ? argv[2] : NULL;
    fake_old_lib = argc > 3 ? argv[3] : NULL;
    if (fake_lib)
        setenv("GB_NVML_LIB",
               strcmp(c, "sampler_fallback") == 0 && fake_old_lib ? fake_old_lib : fake_lib, 1);
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"reasons", t_reasons},
        {"window", t_window},
        {"throttled", t_throttled},
        {"power_cap", t_power_cap},
        {"lone_slowdown", t_lone_slowdown},
        {"unjudged", t_unjudged},
        {"fold", t_fold},
        {"decimate", t_decimate},
        {"edges", t_edges},
        {"cpu", t_cpu},
        {"cpu_rows", t_cpu_rows},
        {"record_check", t_record_check},
        {"gpu_indices", t_gpu_indices},
        {"sampler_interval", t_sampler_interval},
        {"sampler_script", t_sampler_script},
        {"sampler_fallback", t_sampler_fallback},
        {"sampler_power_types", t_sampler_power_types},
        {"sampler_pci_order", t_sampler_pci_order},
        {"sampler_denied", t_sampler_denied},
        {"sampler_stop", t_sampler_stop},
        {"sampler_hung", t_sampler_hung},
        {"sampler_no_nvml", t_sampler_no_nvml},
        {"cpu_competing", t_cpu_competing},
        {"cpu_mask", t_cpu_mask},
        {"cpu_worker_exits", t_cpu_worker_exits},
        {"cpu_worker_children", t_cpu_worker_children},
        {"cpu_worker_ticks", t_cpu_worker_ticks},
        {"store", t_store},
        {"runner_env", t_runner_env},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(c, cases[i].name) == 0) {
            cases[i].fn();
            printf("ok %s\n", c);
            return 0;
        }
    CHECKF(0, "unknown case %s", c);
    return 1;
}
