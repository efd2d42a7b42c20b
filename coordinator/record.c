/* record.c - see record.h. */
#define _POSIX_C_SOURCE 200809L
#include "record.h"

#include "gb_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        gb_fmt(err, errlen, __VA_ARGS__);                                                          \
        goto fail;                                                                                 \
    } while (0)

static int get_str(const cJSON *o, const char *key, const char **out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) > 256) {
        gb_fmt(err, errlen, "record: '%s' must be a string of at most 256 bytes", key);
        return -1;
    }
    *out = v->valuestring;
    return 0;
}

static int get_num(const cJSON *o, const char *key, double *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NAN;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0) {
        gb_fmt(err, errlen, "record: '%s' must be a finite number >= 0", key);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

/* nulls: a null entry is NaN (a diverged run's losses), else refused */
static int get_samples(const cJSON *o, const char *key, int nulls, double **out, size_t *n,
                       char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    *n = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v)) {
        gb_fmt(err, errlen, "record: '%s' must be an array of numbers", key);
        return -1;
    }
    size_t count = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        if (++count > GB_RECORD_MAX_SAMPLES) {
            gb_fmt(err, errlen, "record: '%s' has more than %d samples", key,
                   GB_RECORD_MAX_SAMPLES);
            return -1;
        }
    if (count == 0) return 0;
    double *a = malloc(count * sizeof *a);
    if (!a) {
        gb_fmt(err, errlen, "out of memory");
        return -1;
    }
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (nulls && cJSON_IsNull(c)) {
            a[i++] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) {
            free(a);
            gb_fmt(err, errlen, "record: '%s'[%zu] is not a finite number%s", key, i,
                   nulls ? " or null" : "");
            return -1;
        }
        a[i++] = c->valuedouble;
    }
    *out = a;
    *n = count;
    return 0;
}

/* The data-parallel keys (issue 5): allreduce's per-size "sizes" (stored row
 * by row by the store's trigger, so every field must be a sane number) and
 * the NCCL transports a run reports (details.nccl_transports: an array of
 * names, or an object keyed by name). */
static int check_dp(const cJSON *root, char *err, size_t errlen) {
    const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(root, "sizes");
    if (sizes && !cJSON_IsNull(sizes)) {
        if (!cJSON_IsArray(sizes) || cJSON_GetArraySize(sizes) > GB_RECORD_MAX_SIZES) {
            gb_fmt(err, errlen, "record: 'sizes' must be an array of at most %d objects",
                   GB_RECORD_MAX_SIZES);
            return -1;
        }
        static const char *const nums[] = {"bytes", "count", "time_us", "algbw_gbs", "busbw_gbs"};
        int i = 0;
        for (const cJSON *e = sizes->child; e; e = e->next, i++) {
            if (!cJSON_IsObject(e)) {
                gb_fmt(err, errlen, "record: 'sizes'[%d] must be an object", i);
                return -1;
            }
            double v;
            for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
                if (get_num(e, nums[k], &v, err, errlen) != 0) return -1;
            if (get_num(e, "bytes", &v, err, errlen) != 0 || isnan(v) || v != floor(v)) {
                gb_fmt(err, errlen, "record: 'sizes'[%d].bytes must be a whole number >= 0", i);
                return -1;
            }
            const cJSON *ok = cJSON_GetObjectItemCaseSensitive(e, "ok");
            if (ok && !cJSON_IsBool(ok)) {
                gb_fmt(err, errlen, "record: 'sizes'[%d].ok must be true or false", i);
                return -1;
            }
        }
    }
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
    const cJSON *tr = cJSON_IsObject(details)
                          ? cJSON_GetObjectItemCaseSensitive(details, "nccl_transports")
                          : NULL;
    if (tr && !cJSON_IsNull(tr)) {
        if ((!cJSON_IsArray(tr) && !cJSON_IsObject(tr)) || cJSON_GetArraySize(tr) > 64) {
            gb_fmt(err, errlen,
                   "record: 'details.nccl_transports' must be an array of at most 64 names");
            return -1;
        }
        for (const cJSON *e = tr->child; e; e = e->next) {
            const char *name = cJSON_IsArray(tr) ? e->valuestring : e->string;
            if ((cJSON_IsArray(tr) && !cJSON_IsString(e)) || !name || !name[0] ||
                strlen(name) > 64) {
                gb_fmt(err, errlen, "record: 'details.nccl_transports' names must be 1..64 bytes");
                return -1;
            }
        }
    }
    return 0;
}

/* A number that is finite, >= 0 and at most max, or (null_ok) null. */
static int num_ok(const cJSON *v, int null_ok, double max) {
    if (null_ok && cJSON_IsNull(v)) return 1;
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 &&
           v->valuedouble <= max;
}
static int whole_ok(const cJSON *v, double max) {
    return num_ok(v, 0, max) && v->valuedouble == floor(v->valuedouble);
}

/* An array of at most max strings of 1..64 bytes, or absent. */
static int names_ok(const cJSON *o, const char *key, int max) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!a) return 1;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > max) return 0;
    for (const cJSON *e = a->child; e; e = e->next)
        if (!cJSON_IsString(e) || !e->valuestring[0] || strlen(e->valuestring) > 64) return 0;
    return 1;
}

/* The agent's telemetry (agent/telemetry.h, docs/telemetry.md): the store's
 * trigger turns its sample rows into telemetry / telemetry_cpu rows keyed
 * by (gpu, t_ms) or t_ms, and the views read its summaries, so each part
 * must have its documented shape: rows of the source's width, numbers
 * finite and >= 0 or null, the keys strictly rising. */
static int check_telemetry(const cJSON *root, char *err, size_t errlen) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "timed_window_ms");
    if (w && !cJSON_IsNull(w) &&
        (!cJSON_IsArray(w) || cJSON_GetArraySize(w) != 2 || !whole_ok(w->child, 1e15) ||
         !whole_ok(w->child->next, 1e15) || w->child->next->valuedouble < w->child->valuedouble)) {
        gb_fmt(err, errlen, "record: 'timed_window_ms' must be [start, end] in ms, start <= end");
        return -1;
    }
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(root, "telemetry");
    if (!tm || cJSON_IsNull(tm)) return 0;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(tm, "source");
    if (!cJSON_IsObject(tm) || !cJSON_IsString(src) ||
        (strcmp(src->valuestring, "nvml") != 0 && strcmp(src->valuestring, "proc") != 0)) {
        gb_fmt(err, errlen, "record: 'telemetry' must be an object with source nvml or proc");
        return -1;
    }
    int gpu = strcmp(src->valuestring, "nvml") == 0;
    const char *texts[] = {"flag", "error", "note"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(tm, texts[i]);
        if (t && !cJSON_IsNull(t) && (!cJSON_IsString(t) || strlen(t->valuestring) > 512)) {
            gb_fmt(err, errlen, "record: 'telemetry.%s' must be a string of at most 512 bytes",
                   texts[i]);
            return -1;
        }
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(tm, "throttled");
    if ((th && !cJSON_IsBool(th)) || !names_ok(tm, "reason_names", 64) ||
        !names_ok(tm, "throttle_names", 64)) {
        gb_fmt(err, errlen,
               "record: 'telemetry' throttled must be a boolean, reason names strings");
        return -1;
    }
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(tm, "samples");
    if (rows && !cJSON_IsNull(rows)) {
        if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) > GB_RECORD_MAX_TM_ROWS) {
            gb_fmt(err, errlen, "record: 'telemetry.samples' must be an array of at most %d rows",
                   GB_RECORD_MAX_TM_ROWS);
            return -1;
        }
        int width = gpu ? 10 : 5, i = 0;
        double last_gpu = -1, last_t = -1;
        for (const cJSON *r = rows->child; r; r = r->next, i++) {
            int ok = cJSON_IsArray(r) && cJSON_GetArraySize(r) == width;
            const cJSON *c = ok ? r->child : NULL;
            double g = 0, t = 0;
            if (ok && gpu) {
                ok = whole_ok(c, GB_RECORD_MAX_GPUS - 1);
                g = ok ? c->valuedouble : 0;
                c = c->next;
            }
            ok = ok && whole_ok(c, 1e12);
            t = ok ? c->valuedouble : 0;
            for (int k = 0; ok && (c = c->next); k++)
                ok = gpu && k == 6 ? (cJSON_IsNull(c) || whole_ok(c, 9007199254740991.0))
                                   : num_ok(c, 1, 1e18);
            if (!ok) {
                gb_fmt(err, errlen,
                       "record: 'telemetry.samples'[%d] must be [%s] of numbers >= 0 or null", i,
                       gpu ? "gpu, t_ms, sm_mhz, mem_mhz, power_w, temp_c, util_pct, "
                             "mem_used_bytes, reasons, power_limit_w"
                           : "t_ms, cpu_mhz, others_pct, steal_pct, worker_pct");
                return -1;
            }
            if (g < last_gpu || (g == last_gpu && t <= last_t)) {
                gb_fmt(err, errlen, "record: 'telemetry.samples'[%d] is out of order or repeated",
                       i);
                return -1;
            }
            last_gpu = g;
            last_t = t;
        }
    }
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(tm, "gpus");
    if (gpus && !cJSON_IsNull(gpus)) {
        if (!cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) > GB_RECORD_MAX_GPUS) {
            gb_fmt(err, errlen, "record: 'telemetry.gpus' must be an array of at most %d objects",
                   GB_RECORD_MAX_GPUS);
            return -1;
        }
        int i = 0;
        for (const cJSON *g = gpus->child; g; g = g->next, i++) {
            static const char *const st[] = {"sm_mhz", "mem_mhz",  "power_w",
                                             "temp_c", "util_pct", "mem_used_bytes"};
            int ok = cJSON_IsObject(g) &&
                     whole_ok(cJSON_GetObjectItemCaseSensitive(g, "gpu"), GB_RECORD_MAX_GPUS - 1) &&
                     whole_ok(cJSON_GetObjectItemCaseSensitive(g, "samples"), 1e9) &&
                     names_ok(g, "reason_names", 64) && names_ok(g, "throttle_names", 64);
            for (size_t k = 0; ok && k < sizeof st / sizeof st[0]; k++) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(g, st[k]);
                if (!o || cJSON_IsNull(o)) continue;
                ok = cJSON_IsObject(o) &&
                     num_ok(cJSON_GetObjectItemCaseSensitive(o, "min"), 0, 1e18) &&
                     num_ok(cJSON_GetObjectItemCaseSensitive(o, "median"), 0, 1e18) &&
                     num_ok(cJSON_GetObjectItemCaseSensitive(o, "max"), 0, 1e18);
            }
            static const char *const nums[] = {"power_limit_w", "default_power_limit_w",
                                               "throttled_samples", "reasons"};
            for (size_t k = 0; ok && k < sizeof nums / sizeof nums[0]; k++) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(g, nums[k]);
                ok = !o || num_ok(o, 1, 9007199254740991.0);
            }
            if (!ok) {
                gb_fmt(err, errlen, "record: 'telemetry.gpus'[%d] is not a GPU summary", i);
                return -1;
            }
        }
    }
    const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(tm, "cpu");
    if (cpu && !cJSON_IsNull(cpu)) {
        int ok = cJSON_IsObject(cpu);
        static const char *const nums[] = {"span_ms", "others_pct", "steal_pct", "taken_pct",
                                           "worker_pct"};
        for (size_t k = 0; ok && k < sizeof nums / sizeof nums[0]; k++) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(cpu, nums[k]);
            ok = !o || num_ok(o, 1, 1e12);
        }
        /* what v_cpu_telemetry shows: whole ticks, true/false flags, a
         * clock as the GPU's readings (-3 cores, "no", "fast" were taken) */
        const cJSON *o = ok ? cJSON_GetObjectItemCaseSensitive(cpu, "ticks") : NULL;
        ok = ok && (!o || whole_ok(o, 1e15));
        static const char *const flags[] = {"flagged", "judged", "covers_window"};
        for (size_t k = 0; ok && k < sizeof flags / sizeof flags[0]; k++) {
            o = cJSON_GetObjectItemCaseSensitive(cpu, flags[k]);
            ok = !o || cJSON_IsBool(o);
        }
        o = ok ? cJSON_GetObjectItemCaseSensitive(cpu, "cpu_mhz") : NULL;
        if (ok && o && !cJSON_IsNull(o))
            ok = cJSON_IsObject(o) && num_ok(cJSON_GetObjectItemCaseSensitive(o, "min"), 0, 1e7) &&
                 num_ok(cJSON_GetObjectItemCaseSensitive(o, "median"), 0, 1e7) &&
                 num_ok(cJSON_GetObjectItemCaseSensitive(o, "max"), 0, 1e7);
        if (!ok) {
            gb_fmt(err, errlen, "record: 'telemetry.cpu' is not a CPU summary");
            return -1;
        }
    }
    const cJSON *cores = cJSON_GetObjectItemCaseSensitive(tm, "cores");
    if (cores && !whole_ok(cores, 1 << 20)) {
        gb_fmt(err, errlen, "record: 'telemetry.cores' must be a whole number >= 0");
        return -1;
    }
    return 0;
}

int gb_record_parse(const char *json, size_t len, const char *kind, gb_record_t *out, char *err,
                    size_t errlen) {
    memset(out, 0, sizeof *out);
    out->n_devices = -1;
    out->valid = -1;
    out->images_per_sec = out->step_ms_median = out->step_ms_p90 = out->gflops = NAN;
    cJSON *root = cJSON_ParseWithLength(json, len);
    out->root = root;
    if (!root) FAIL("record is not valid JSON");
    if (!cJSON_IsObject(root)) FAIL("record must be a JSON object");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (!cJSON_IsString(k)) FAIL("record has no 'kind'");
    if (strcmp(k->valuestring, kind) != 0)
        FAIL("record is of kind '%.32s' but the job is '%s'", k->valuestring, kind);
    if (get_str(root, "backend", &out->backend, err, errlen) ||
        get_str(root, "device_model", &out->device_model, err, errlen) ||
        get_str(root, "precision", &out->precision, err, errlen) ||
        get_str(root, "invalid_reason", &out->invalid_reason, err, errlen))
        goto fail;
    if (out->backend && strcmp(out->backend, "cpu") != 0 && strcmp(out->backend, "cuda") != 0)
        FAIL("record: backend '%.32s' is not cpu or cuda", out->backend);
    const cJSON *nd = cJSON_GetObjectItemCaseSensitive(root, "n_devices");
    if (nd) {
        if (!cJSON_IsNumber(nd) || !(nd->valuedouble >= 0 && nd->valuedouble <= 65536))
            FAIL("record: 'n_devices' must be an integer in 0..65536");
        out->n_devices = (int)nd->valuedouble;
    }
    /* the configuration keys the views group by: whole numbers (224.9 and
     * "224" beside 224 made three groups in v_models, which `compare` read
     * as one and showed one of their figures) */
    static const char *const whole_keys[] = {
        "image_size", "batch_per_device", "global_batch", "steps", "warmup", "m", "n", "k", "reps"};
    for (size_t i = 0; i < sizeof whole_keys / sizeof whole_keys[0]; i++) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, whole_keys[i]);
        if (w && !cJSON_IsNull(w) && !whole_ok(w, 1e12))
            FAIL("record: '%s' must be a whole number >= 0", whole_keys[i]);
    }
    const cJSON *valid = cJSON_GetObjectItemCaseSensitive(root, "valid");
    if (valid) {
        if (!cJSON_IsBool(valid)) FAIL("record: 'valid' must be true or false");
        out->valid = cJSON_IsTrue(valid) ? 1 : 0;
    }
    if (get_num(root, "images_per_sec", &out->images_per_sec, err, errlen) ||
        get_num(root, "gflops", &out->gflops, err, errlen))
        goto fail;
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(root, "step_ms");
    if (sm && !cJSON_IsNull(sm)) {
        if (!cJSON_IsObject(sm)) FAIL("record: 'step_ms' must be an object");
        if (get_num(sm, "median", &out->step_ms_median, err, errlen) ||
            get_num(sm, "p90", &out->step_ms_p90, err, errlen))
            goto fail;
    } else if (strcmp(kind, "gemm") == 0) {
        /* gemm's step is one product: its median and p90 time over the
         * timed repetitions, as the worker measured them */
        const cJSON *det = cJSON_GetObjectItemCaseSensitive(root, "details");
        if (get_num(root, "ms_median", &out->step_ms_median, err, errlen) ||
            (cJSON_IsObject(det) && get_num(det, "ms_p90", &out->step_ms_p90, err, errlen)))
            goto fail;
    }
    size_t n_loss = 0;
    /* a loss that is not finite is null in JSON: the run is stored, invalid
     * ("loss of timed step N is not finite"); it failed as a bad record */
    if (get_samples(root, "step_ms_samples", 0, &out->step_ms, &out->n_samples, err, errlen) ||
        get_samples(root, "loss_samples", 1, &out->loss, &n_loss, err, errlen))
        goto fail;
    if (out->loss && n_loss != out->n_samples)
        FAIL("record: %zu loss samples for %zu step samples", n_loss, out->n_samples);
    out->samples_stride = 1;
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(root, "samples_stride");
    if (ss) { /* a run of more steps than a record keeps samples of (engine_stats.h) */
        if (!cJSON_IsNumber(ss) || !(ss->valuedouble >= 1 && ss->valuedouble <= 1e6) ||
            ss->valuedouble != (double)(int)ss->valuedouble)
            FAIL("record: 'samples_stride' must be an integer in 1..1000000");
        out->samples_stride = (int)ss->valuedouble;
    }
    if (check_dp(root, err, errlen) != 0 || check_telemetry(root, err, errlen) != 0) goto fail;
    /* what is stored: cJSON's own print of what it read. cJSON takes text
     * SQLite's JSON functions refuse (a number 0400, "1.", bytes after the
     * object): stored as sent, the insert trigger failed, the whole turn
     * rolled back at every resend and placement paused for every agent */
    out->text = cJSON_PrintUnformatted(root);
    if (!out->text) FAIL("out of memory reading the record");
    return 0;
fail:
    gb_record_free(out);
    return -1;
}

void gb_record_free(gb_record_t *r) {
    if (!r) return;
    cJSON_Delete(r->root);
    cJSON_free(r->text);
    r->text = NULL;
    free(r->step_ms);
    free(r->loss);
    r->root = NULL;
    r->step_ms = r->loss = NULL;
    r->n_samples = 0;
}

int gb_record_fold_valid(const gb_rank_verdict_t *v, size_t n, char *out, size_t outlen) {
    if (outlen) out[0] = '\0';
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].valid == 0) bad++;
    if (n == 0) return -1;
    if (bad == 0) return v[0].valid;
    if (!outlen) return 0;
    if (bad == 1 && v[0].valid == 0) { /* rank 0's own verdict, as a one-node job's */
        gb_copy(out, outlen, v[0].invalid_reason ? v[0].invalid_reason : "");
        return 0;
    }
    /* room kept for the tail that counts the ranks left out */
    char tail[64];
    size_t len = 0, shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].valid != 0) continue;
        char item[600];
        gb_fmt(item, sizeof item, "%srank %d on %s: %s", shown ? "; " : "", v[i].rank,
               v[i].node && v[i].node[0] ? v[i].node : "?",
               v[i].invalid_reason && v[i].invalid_reason[0] ? v[i].invalid_reason
                                                             : "(no reason given)");
        size_t il = strlen(item);
        size_t left = bad - shown - 1; /* invalid ranks after this one */
        gb_fmt(tail, sizeof tail, "; and %zu more invalid rank(s)", left);
        size_t need = il + (left ? strlen(tail) : 0);
        if (len + need >= outlen) break;
        memcpy(out + len, item, il + 1);
        len += il;
        shown++;
    }
    if (shown < bad) {
        gb_fmt(tail, sizeof tail, "%sand %zu more invalid rank(s)", shown ? "; " : "", bad - shown);
        if (len + strlen(tail) < outlen) memcpy(out + len, tail, strlen(tail) + 1);
    }
    return 0;
}
