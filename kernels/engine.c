/* engine.c - the training driver of engine.h, the same for every backend.
 *
 * gb_train_run: check the configuration, pick the backend, build the model,
 * initialize or --load the canonical slabs, make or --data the batch, create
 * the replica (all memory allocated there), run warm-up steps, then timed
 * steps on the monotonic clock (or the backend's device timer), compute the
 * statistics and the validity rule of docs/result-record.md, --save and
 * --save-grads, and build the JSON result record. Nothing in the timed loop
 * allocates, prints or touches files.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine.h"
#include "cpu_backend.h"
#include "engine_stats.h"
#include "safetensors.h"

#include <cjson/cJSON.h>

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef GB_VERSION
#define GB_VERSION "0.0.0"
#endif

static const char *const prec_names[] = {"fp32", "tf32", "fp16", "bf16"};

const char *gb_precision_name(gb_precision_t p) {
    return (unsigned)p < 4 ? prec_names[p] : "?";
}

int gb_precision_parse(const char *s, gb_precision_t *out) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, prec_names[i]) == 0) {
            *out = (gb_precision_t)i;
            return 0;
        }
    }
    return -1;
}

void gb_train_config_default(gb_train_config_t *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->backend, sizeof(cfg->backend), "cpu");
    cfg->precision = GB_PREC_FP32;
    gb_model_config_resnet50(&cfg->model, 224);
    cfg->batch = 32;
    cfg->devices = 1;
    cfg->steps = 20;
    cfg->warmup = 3;
    cfg->threads = 0;
    cfg->lr = 0.1f;
    cfg->momentum = 0.9f;
    cfg->weight_decay = 1e-4f;
    cfg->seed = 1;
    cfg->bucket_mb = 25.0;
    snprintf(cfg->interconnect, sizeof(cfg->interconnect), "auto");
}

/* ------------------------------------------------------------- backends */

static const gb_backend_ops_t *load_cuda(const char *path, char *why, size_t whylen) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "%s", e ? e : path);
        return NULL;
    }
    const gb_backend_ops_t *ops = dlsym(h, "gb_cuda_backend_ops");
    if (!ops) {
        snprintf(why, whylen, "%s has no gb_cuda_backend_ops", path);
        dlclose(h);
        return NULL;
    }
    if (ops->abi != GB_BACKEND_ABI) {
        snprintf(why, whylen, "%s has backend ABI %d, this gpubench wants %d", path, ops->abi,
                 GB_BACKEND_ABI);
        dlclose(h);
        return NULL;
    }
    /* never closed: the ops table lives in the library */
    return ops;
}

const gb_backend_ops_t *gb_backend_get(const char *name, char *err, size_t errlen) {
    if (strcmp(name, "cpu") == 0) return &gb_cpu_backend_ops;
    if (strcmp(name, "cuda") != 0) {
        snprintf(err, errlen, "unknown backend '%s' (cpu, cuda)", name);
        return NULL;
    }
    char why[512] = "", path[PATH_MAX + 64];
    const char *env = getenv("GB_CUDA_LIB");
    if (env && env[0]) {
        const gb_backend_ops_t *ops = load_cuda(env, why, sizeof(why));
        if (!ops) snprintf(err, errlen, "cuda backend: %s", why);
        return ops;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *cands[] = {"%s/libgpubench_cuda.so", "%s/../lib/libgpubench_cuda.so"};
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof(path), cands[i], exe);
            if (access(path, R_OK) != 0) continue;
            const gb_backend_ops_t *ops = load_cuda(path, why, sizeof(why));
            if (ops) return ops;
        }
    }
    snprintf(err, errlen,
             "cuda backend not available%s%s (looked for libgpubench_cuda.so next "
             "to the executable, in ../lib, or $GB_CUDA_LIB)",
             why[0] ? ": " : "", why);
    return NULL;
}

/* ---------------------------------------------------------- file I/O */

static int load_weights(const gb_model_t *m, const char *path, float *params, float *buffers,
                        int64_t *nbt, char *err, size_t errlen) {
    gb_st_t *st = gb_st_open(path, err, errlen);
    if (!st) return -1;
    int rc = -1, used = 0;
    int64_t nbt_max = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *ti = &m->tensors[i];
        const gb_st_tensor_t *t = gb_st_find(st, ti->name);
        if (!t) {
            snprintf(err, errlen, "%s: tensor '%s' is missing", path, ti->name);
            goto done;
        }
        int same = t->dtype == GB_ST_F32 && t->ndim == ti->ndim;
        for (int d = 0; same && d < ti->ndim; d++)
            same = t->shape[d] == ti->shape[d];
        if (!same) {
            char want[64] = "", got[64] = "";
            size_t o = 0;
            for (int d = 0; d < ti->ndim && o < sizeof(want); d++)
                o += (size_t)snprintf(want + o, sizeof(want) - o, "%s%d", d ? "," : "",
                                      ti->shape[d]);
            o = 0;
            for (int d = 0; d < t->ndim && o < sizeof(got); d++)
                o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%lld", d ? "," : "",
                                      (long long)t->shape[d]);
            snprintf(err, errlen, "%s: tensor '%s' is %s (%s), the model wants F32 (%s)", path,
                     ti->name, gb_st_dtype_name(t->dtype), got, want);
            goto done;
        }
        float *dst = (ti->is_param ? params : buffers) + ti->offset;
        memcpy(dst, t->data, ti->numel * sizeof(float));
        used++;
    }
    /* the rest must be num_batches_tracked of a BN layer the model has */
    for (int i = 0; i < gb_st_count(st); i++) {
        const gb_st_tensor_t *t = gb_st_at(st, i);
        if (gb_model_find(m, t->name) >= 0) continue;
        const char *suf = ".num_batches_tracked";
        size_t ln = strlen(t->name), ls = strlen(suf);
        char base[GB_NAME_LEN + 32];
        int ok = ln > ls && strcmp(t->name + ln - ls, suf) == 0 && ln - ls + 16 < sizeof(base);
        if (ok) {
            snprintf(base, sizeof(base), "%.*s.running_mean", (int)(ln - ls), t->name);
            ok = gb_model_find(m, base) >= 0;
        }
        if (!ok) {
            snprintf(err, errlen, "%s: tensor '%s' is not in the model", path, t->name);
            goto done;
        }
        if (t->dtype != GB_ST_I64 || t->numel != 1) {
            snprintf(err, errlen, "%s: '%s' must be one I64", path, t->name);
            goto done;
        }
        int64_t v;
        memcpy(&v, t->data, sizeof(v));
        if (v < 0) {
            snprintf(err, errlen, "%s: '%s' is negative", path, t->name);
            goto done;
        }
        if (v > nbt_max) nbt_max = v;
    }
    (void)used;
    *nbt = nbt_max;
    rc = 0;
done:
    gb_st_close(&st);
    return rc;
}

static int load_data(const gb_model_t *m, const char *path, int batch, float *images,
                     int32_t *labels, char *err, size_t errlen) {
    gb_st_t *st = gb_st_open(path, err, errlen);
    if (!st) return -1;
    int rc = -1;
    const gb_st_tensor_t *im = gb_st_find(st, "images"), *lb = gb_st_find(st, "labels");
    if (!im || !lb) {
        snprintf(err, errlen, "%s: needs tensors 'images' and 'labels'", path);
        goto done;
    }
    if (im->dtype != GB_ST_F32 || im->ndim != 4 || im->shape[1] != 3) {
        snprintf(err, errlen, "%s: 'images' must be F32 (N, 3, H, W)", path);
        goto done;
    }
    if (im->shape[0] != batch || im->shape[2] != m->cfg.image_h || im->shape[3] != m->cfg.image_w) {
        snprintf(err, errlen,
                 "%s: images are (%lld, 3, %lld, %lld) but the run is batch %d at %dx%d; pass "
                 "--batch and --image-size to match",
                 path, (long long)im->shape[0], (long long)im->shape[2], (long long)im->shape[3],
                 batch, m->cfg.image_h, m->cfg.image_w);
        goto done;
    }
    if ((lb->dtype != GB_ST_I64 && lb->dtype != GB_ST_I32) || lb->ndim != 1 ||
        lb->shape[0] != batch) {
        snprintf(err, errlen, "%s: 'labels' must be I64 (or I32) of shape (%d)", path, batch);
        goto done;
    }
    memcpy(images, im->data, im->nbytes);
    for (int i = 0; i < batch; i++) {
        int64_t v;
        if (lb->dtype == GB_ST_I64) {
            memcpy(&v, (const char *)lb->data + 8 * (size_t)i, 8);
        } else {
            int32_t w;
            memcpy(&w, (const char *)lb->data + 4 * (size_t)i, 4);
            v = w;
        }
        if (v < 0 || v >= m->cfg.n_classes) {
            snprintf(err, errlen, "%s: label %lld of image %d is outside [0, %d)", path,
                     (long long)v, i, m->cfg.n_classes);
            goto done;
        }
        labels[i] = (int32_t)v;
    }
    for (size_t i = 0; i < im->numel; i++) {
        if (!isfinite(images[i])) {
            snprintf(err, errlen, "%s: image value %zu is not finite", path, i);
            goto done;
        }
    }
    rc = 0;
done:
    gb_st_close(&st);
    return rc;
}

static int save_tensors(const gb_model_t *m, const char *path, const float *params,
                        const float *buffers, const int64_t *nbt, int grads_only, char *err,
                        size_t errlen) {
    gb_st_writer_t *w = gb_st_writer_new();
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    char name[GB_NAME_LEN + 32];
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (grads_only && !t->is_param) continue;
        int64_t shape[4];
        for (int d = 0; d < t->ndim; d++)
            shape[d] = t->shape[d];
        const float *src = (t->is_param ? params : buffers) + t->offset;
        if (gb_st_writer_add(w, t->name, GB_ST_F32, t->ndim, shape, src, err, errlen)) goto done;
        if (!grads_only && t->role == GB_ROLE_BN_RVAR) {
            size_t ln = strlen(t->name) - strlen(".running_var");
            snprintf(name, sizeof(name), "%.*s.num_batches_tracked", (int)ln, t->name);
            if (gb_st_writer_add(w, name, GB_ST_I64, 0, NULL, nbt, err, errlen)) goto done;
        }
    }
    if (gb_st_writer_meta(w, "format", "pt", err, errlen) ||
        gb_st_writer_meta(w, "producer", "gpubench " GB_VERSION, err, errlen))
        goto done;
    rc = gb_st_writer_write(w, path, err, errlen);
done:
    gb_st_writer_destroy(&w);
    return rc;
}

/* ------------------------------------------------------------ statistics */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* CLOCK_REALTIME ms, for the timed window the agent's telemetry is cut to. */
static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile by linear interpolation between order statistics (numpy's
 * default); v sorted ascending. */
static double quantile(const double *v, int n, double q) {
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1) return v[n - 1];
    double f = pos - lo;
    return v[lo] + f * (v[lo + 1] - v[lo]);
}

int gb_step_stats(const double *ms, const double *loss, int n, gb_step_stats_t *out) {
    memset(out, 0, sizeof(*out));
    if (n < 1) return -1;
    double *v = malloc((size_t)n * sizeof(double));
    if (!v) return -1;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(ms[i]) || ms[i] < 0) {
            free(v);
            return -1;
        }
        v[i] = ms[i];
        sum += ms[i];
    }
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    out->median = quantile(v, n, 0.5);
    out->p90 = quantile(v, n, 0.9);
    out->min = v[0];
    out->max = v[n - 1];
    out->mean = sum / n;
    free(v);
    out->valid = 1;
    for (int i = 0; loss && i < n; i++) {
        if (!isfinite(loss[i])) {
            out->valid = 0;
            snprintf(out->invalid_reason, sizeof(out->invalid_reason),
                     "loss of timed step %d is not finite", i + 1);
            return 0;
        }
    }
    if (out->p90 > (1.0 + GB_SPREAD_LIMIT) * out->median) {
        out->valid = 0;
        snprintf(out->invalid_reason, sizeof(out->invalid_reason),
                 "p90 step time %.2f ms is %.0f%% above the median %.2f ms (limit %.0f%%)",
                 out->p90, 100.0 * (out->p90 / out->median - 1.0), out->median,
                 100.0 * GB_SPREAD_LIMIT);
    }
    return 0;
}

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}

static int check_config(const gb_train_config_t *c, char *err, size_t errlen) {
    if (c->batch < 1 || c->batch > 65536) {
        snprintf(err, errlen, "batch %d out of range (1..65536)", c->batch);
        return -1;
    }
    if (c->steps < 1 || c->steps > 1000000) {
        snprintf(err, errlen, "steps %d out of range (1..1000000)", c->steps);
        return -1;
    }
    if (c->warmup < 0 || c->warmup > 1000000) {
        snprintf(err, errlen, "warm-up %d out of range (0..1000000)", c->warmup);
        return -1;
    }
    if (c->threads < 0 || c->threads > 4096) {
        snprintf(err, errlen, "threads %d out of range (0 = all cores, up to 4096)", c->threads);
        return -1;
    }
    if (c->devices != 1) {
        snprintf(err, errlen, "devices %d: data parallel runs are not implemented yet", c->devices);
        return -1;
    }
    if (!isfinite(c->lr) || c->lr < 0 || !isfinite(c->momentum) || c->momentum < 0 ||
        !isfinite(c->weight_decay) || c->weight_decay < 0) {
        snprintf(err, errlen, "lr, momentum and weight decay must be finite and >= 0");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- record */

static cJSON *num_array(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static char *make_record(const gb_train_config_t *cfg, const gb_model_t *m, const char *backend,
                         const gb_backend_info_t *info, int threads, const gb_train_result_t *r,
                         const double *ms, const double *loss, const char *details,
                         size_t peak_rss) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "kind", "resnet50");
    cJSON_AddStringToObject(o, "backend", backend);
    cJSON_AddStringToObject(o, "device_model", info->device_model);
    cJSON_AddNumberToObject(o, "n_devices", cfg->devices);
    cJSON_AddStringToObject(o, "precision", gb_precision_name(cfg->precision));
    cJSON_AddBoolToObject(o, "valid", r->valid);
    if (r->valid)
        cJSON_AddNullToObject(o, "invalid_reason");
    else
        cJSON_AddStringToObject(o, "invalid_reason", r->invalid_reason);
    cJSON *ver = cJSON_Parse(info->versions);
    if (!ver || !cJSON_IsObject(ver)) {
        cJSON_Delete(ver);
        ver = cJSON_CreateObject();
    }
    cJSON_AddStringToObject(ver, "gpubench", GB_VERSION);
    cJSON_AddItemToObject(o, "versions", ver);
    cJSON *det = details ? cJSON_Parse(details) : NULL;
    if (!det || !cJSON_IsObject(det)) {
        cJSON_Delete(det);
        det = cJSON_CreateObject();
    }
    cJSON_AddNumberToObject(det, "peak_rss_bytes", (double)peak_rss);
    if (cfg->model.image_h != cfg->model.image_w) {
        cJSON_AddNumberToObject(det, "image_h", cfg->model.image_h);
        cJSON_AddNumberToObject(det, "image_w", cfg->model.image_w);
    }
    cJSON_AddStringToObject(det, "data", cfg->data_path ? "file" : "synthetic");
    cJSON_AddStringToObject(det, "weights", cfg->load_path ? "file" : "init");
    cJSON_AddItemToObject(o, "details", det);
    cJSON_AddNumberToObject(o, "batch_per_device", cfg->batch);
    cJSON_AddNumberToObject(o, "global_batch", (double)cfg->batch * cfg->devices);
    cJSON_AddNumberToObject(o, "image_size", cfg->model.image_h);
    cJSON_AddNumberToObject(o, "steps", cfg->steps);
    cJSON_AddNumberToObject(o, "warmup", cfg->warmup);
    cJSON_AddNumberToObject(o, "threads", threads);
    cJSON_AddNumberToObject(o, "lr", cfg->lr);
    cJSON_AddNumberToObject(o, "momentum", cfg->momentum);
    cJSON_AddNumberToObject(o, "weight_decay", cfg->weight_decay);
    cJSON_AddNumberToObject(o, "seed", (double)cfg->seed);
    cJSON_AddStringToObject(o, "interconnect", "none");
    cJSON_AddNumberToObject(o, "images_per_sec", r->images_per_sec);
    cJSON *sm = cJSON_AddObjectToObject(o, "step_ms");
    if (sm) {
        cJSON_AddNumberToObject(sm, "median", r->step_ms_median);
        cJSON_AddNumberToObject(sm, "p90", r->step_ms_p90);
        cJSON_AddNumberToObject(sm, "min", r->step_ms_min);
        cJSON_AddNumberToObject(sm, "max", r->step_ms_max);
        cJSON_AddNumberToObject(sm, "mean", r->step_ms_mean);
    }
    cJSON_AddItemToObject(o, "step_ms_samples", num_array(ms, cfg->steps));
    cJSON_AddNumberToObject(o, "loss_first", r->loss_first);
    cJSON_AddNumberToObject(o, "loss_last", r->loss_last);
    cJSON_AddItemToObject(o, "loss_samples", num_array(loss, cfg->steps));
    cJSON *tw = cJSON_AddArrayToObject(o, "timed_window_ms");
    if (tw) {
        cJSON_AddItemToArray(tw, cJSON_CreateNumber((double)r->timed_window_ms[0]));
        cJSON_AddItemToArray(tw, cJSON_CreateNumber((double)r->timed_window_ms[1]));
    }
    cJSON_AddNumberToObject(o, "peak_mem_bytes", (double)r->peak_mem_bytes);
    cJSON_AddNumberToObject(o, "gflop_per_image", m->train_flops / 1e9);
    cJSON_AddNumberToObject(o, "tflops", m->train_flops / 1e9 * r->images_per_sec / 1000.0);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ----------------------------------------------------------------- run */

int gb_train_run(const gb_train_config_t *cfg_in, gb_train_result_t *res, char *err,
                 size_t errlen) {
    memset(res, 0, sizeof(*res));
    gb_train_config_t cfg = *cfg_in;
    gb_model_t *m = NULL;
    float *params = NULL, *buffers = NULL, *images = NULL;
    int32_t *labels = NULL;
    double *ms = NULL, *loss = NULL;
    void *state = NULL;
    const gb_backend_ops_t *ops = NULL;
    gb_replica_report_t rep = {0};
    int rc = -1;
    char why[GB_ERR_LEN];

    if (check_config(&cfg, err, errlen)) return -1;
    const char *bname = cfg.backend;
    gb_backend_info_t info;
    if (strcmp(bname, "auto") == 0) {
        ops = gb_backend_get("cuda", why, sizeof(why));
        if (!ops || ops->probe(&info, why, sizeof(why)) != 0) ops = NULL;
        bname = ops ? "cuda" : "cpu";
    }
    if (!ops) ops = gb_backend_get(bname, err, errlen);
    if (!ops) return -1;
    if (ops->probe(&info, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s backend cannot run here: %s", ops->name, why);
        return -1;
    }
    m = gb_model_new(&cfg.model, err, errlen);
    if (!m) return -1;
    size_t npix = (size_t)cfg.batch * 3 * cfg.model.image_h * cfg.model.image_w;
    params = malloc(m->n_params * sizeof(float));
    buffers = malloc((m->n_buffers ? m->n_buffers : 1) * sizeof(float));
    images = malloc(npix * sizeof(float));
    labels = malloc((size_t)cfg.batch * sizeof(int32_t));
    ms = calloc((size_t)cfg.steps, sizeof(double));
    loss = calloc((size_t)cfg.steps, sizeof(double));
    if (!params || !buffers || !images || !labels || !ms || !loss) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int64_t nbt = 0;
    if (cfg.load_path) {
        if (load_weights(m, cfg.load_path, params, buffers, &nbt, err, errlen)) goto done;
    } else {
        gb_model_init(m, params, buffers, cfg.seed);
    }
    if (cfg.data_path) {
        if (load_data(m, cfg.data_path, cfg.batch, images, labels, err, errlen)) goto done;
    } else {
        gb_model_synth_batch(m, cfg.batch, cfg.seed, images, labels);
    }
    if (ops->create(m, &cfg, 0, NULL, &state, err, errlen)) goto done;
    /* the canonical copies are not needed while training: each goes back
     * as soon as the backend has it, before its arena fills in */
    if (ops->set_state(state, params, buffers, nbt, err, errlen)) goto done;
    free(params);
    params = NULL;
    if (ops->set_batch(state, images, labels, err, errlen)) goto done;
    free(images);
    images = NULL;

    for (int i = 0; i < cfg.warmup; i++) {
        gb_step_out_t o;
        if (ops->step(state, &o, err, errlen)) goto done;
    }
    res->timed_window_ms[0] = wall_ms();
    for (int i = 0; i < cfg.steps; i++) {
        gb_step_out_t o = {0};
        double t0 = now_ms();
        if (ops->step(state, &o, err, errlen)) goto done;
        double t1 = now_ms();
        ms[i] = o.ms >= 0 ? o.ms : t1 - t0;
        loss[i] = o.loss;
    }
    res->timed_window_ms[1] = wall_ms();

    gb_step_stats_t sst;
    if (gb_step_stats(ms, loss, cfg.steps, &sst)) {
        snprintf(err, errlen, "bad step times from the backend");
        goto done;
    }
    res->step_ms_median = sst.median;
    res->step_ms_p90 = sst.p90;
    res->step_ms_min = sst.min;
    res->step_ms_max = sst.max;
    res->step_ms_mean = sst.mean;
    res->images_per_sec = (double)cfg.batch * cfg.devices / (sst.median / 1000.0);
    res->loss_first = loss[0];
    res->loss_last = loss[cfg.steps - 1];
    res->valid = sst.valid;
    snprintf(res->invalid_reason, sizeof(res->invalid_reason), "%s", sst.invalid_reason);

    if (cfg.save_grads_path) {
        float *g = malloc(m->n_params * sizeof(float));
        if (!g) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        int bad = ops->get_grads(state, g, err, errlen) ||
                  save_tensors(m, cfg.save_grads_path, g, NULL, NULL, 1, err, errlen);
        free(g);
        if (bad) goto done;
    }
    if (cfg.save_path) {
        params = malloc(m->n_params * sizeof(float));
        if (!params) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        if (ops->get_state(state, params, buffers, &nbt, err, errlen) ||
            save_tensors(m, cfg.save_path, params, buffers, &nbt, 0, err, errlen))
            goto done;
    }
    if (ops->report(state, &rep, err, errlen)) goto done;
    /* the backend's memory plus what the driver holds while the backend's
     * memory fills in (the batch, running statistics, labels); the
     * canonical parameters are freed before that (and come back only for
     * --save, after the timed steps) */
    res->peak_mem_bytes = rep.peak_mem_bytes + (m->n_buffers + npix) * sizeof(float) +
                          (size_t)cfg.batch * sizeof(int32_t);
    int threads = cfg.threads > 0 ? cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    res->record_json = make_record(&cfg, m, ops->name, &info, threads, res, ms, loss,
                                   rep.details_json, peak_rss_bytes());
    if (!res->record_json) {
        snprintf(err, errlen, "out of memory building the result record");
        goto done;
    }
    rc = 0;
done:
    if (state) ops->destroy(&state);
    free(rep.details_json);
    gb_model_destroy(&m);
    free(params);
    free(buffers);
    free(images);
    free(labels);
    free(ms);
    free(loss);
    if (rc != 0) gb_train_result_free(res);
    return rc;
}

void gb_train_result_free(gb_train_result_t *res) {
    if (!res) return;
    free(res->record_json);
    res->record_json = NULL;
}
