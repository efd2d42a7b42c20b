/* engine.c - the training driver of engine.h, the same for every backend.
 *
 * gb_train_run: check the configuration, pick the backend, build the model,
 * initialize or --load the canonical slabs, make or --data each replica's
 * batch, create the replicas (all memory allocated there), run warm-up
 * steps, then timed steps on the monotonic clock (or the backend's device
 * timer), compute the statistics and the validity rule of
 * docs/result-record.md, --save and --save-grads, and build the JSON result
 * record. Nothing in the timed loop allocates, prints or touches files.
 *
 * Data parallel (devices > 1, or a rank of a multi-node job): one thread
 * per replica, each calling its backend only from that thread (create,
 * steps, report, destroy), with a gb_comm_t of one comm group (comm.h);
 * the backend averages the gradients. The threads meet at a barrier before
 * every step, so a step's time is the slowest replica's. Replica with
 * global rank g trains on its own batch: the synthetic batch of seed
 * replica_seed(seed, g), or images [g*batch, (g+1)*batch) of --data. Any
 * replica's failure aborts the barrier and the comm group: the others stop
 * with it and the first reason is the run's. With launch "processes" each
 * replica is a process of its own (launch.h): this process starts them,
 * relays their rendezvous, gathers their reports into the replicas below
 * and makes the record from them as from threads.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine.h"
#include "comm.h"
#include "cpu_backend.h"
#include "crew.h"
#include "engine_stats.h"
#include "gb_util.h"
#include "launch.h"
#include "safetensors.h"

#include <cjson/cJSON.h>

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef GB_VERSION
#define GB_VERSION "0.0.0"
#endif

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
    cfg->cuda_graph = 1;
    snprintf(cfg->interconnect, sizeof(cfg->interconnect), "auto");
    snprintf(cfg->launch, sizeof(cfg->launch), "auto");
}

/* A replica process's report goes here (launch.c); -1 in any other process */
static int g_report_fd = -1;

void gb_engine_report_to(int fd) {
    g_report_fd = fd;
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

static char cuda_loaded_from[PATH_MAX + 64]; /* the file gb_backend_get("cuda") loaded */

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
        if (!ops)
            snprintf(err, errlen, "cuda backend: %s", why);
        else
            snprintf(cuda_loaded_from, sizeof(cuda_loaded_from), "%s", env);
        return ops;
    }
    const char *found = NULL;
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
            if (ops) {
                snprintf(cuda_loaded_from, sizeof(cuda_loaded_from), "%s", path);
                return ops;
            }
            found = path;
            break;
        }
    }
    if (found) /* there, and it would not load: a library it needs, say */
        snprintf(err, errlen, "cuda backend %s could not be loaded: %s", found, why);
    else
        snprintf(err, errlen,
                 "cuda backend not available: no libgpubench_cuda.so next to the executable, "
                 "in ../lib, or at $GB_CUDA_LIB");
    return NULL;
}

void gb_backend_describe(const char *name, char *out, size_t outlen) {
    char err[768];
    const gb_backend_ops_t *ops = gb_backend_get(name, err, sizeof(err));
    if (!ops) {
        /* the reason may name the backend itself: not twice */
        char self[64];
        snprintf(self, sizeof(self), "%s backend: ", name);
        const char *why = strncmp(err, self, strlen(self)) == 0 ? err + strlen(self) : err;
        snprintf(out, outlen, "%s backend: not loaded: %s", name, why);
        return;
    }
    gb_backend_info_t info;
    memset(&info, 0, sizeof(info));
    char why[512] = "";
    int rc = ops->probe(&info, why, sizeof(why));
    const char *from = strcmp(name, "cuda") == 0 ? cuda_loaded_from : "built in";
    if (rc == 0)
        snprintf(out, outlen, "%s backend: %s, %s; %d device(s): %s", name, from,
                 info.versions[0] ? info.versions : "{}", info.device_count, info.device_model);
    else
        snprintf(out, outlen, "%s backend: %s, %s; cannot run here: %s", name, from,
                 info.versions[0] ? info.versions : "{}", why);
}

/* ---------------------------------------------------------- file I/O */

/* "2,3,7,7" (a scalar: "") */
static void shape_str(const gb_st_tensor_t *t, char *s, size_t n) {
    size_t o = 0;
    s[0] = 0;
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(s + o, n - o, "%s%lld", d ? "," : "", (long long)t->shape[d]);
}

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
            char alt[GB_NAME_LEN + 16];
            snprintf(alt, sizeof(alt), "module.%s", ti->name);
            snprintf(err, errlen, "%s: tensor '%s' is missing%s", path, ti->name,
                     gb_st_find(st, alt) ? " (the file has 'module.' names, as DataParallel and "
                                           "DistributedDataParallel save them: strip the prefix)"
                                         : "");
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
        for (size_t k = 0; k < ti->numel; k++)
            if (!isfinite(dst[k])) {
                /* a NaN can vanish in a ReLU or max pool and leave the loss
                 * finite: such a run would look valid */
                snprintf(err, errlen, "%s: tensor '%s' element %zu is %s", path, ti->name, k,
                         isnan(dst[k]) ? "NaN" : "infinite");
                goto done;
            }
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

/* The --data file holds the global batch (batch images); images and labels
 * get images [first, first + count) of it: this node's replicas' slices, or
 * one replica process's. The whole file is checked (shapes, every label,
 * every pixel finite) from its mapping, so that a bad image is refused the
 * same way whichever replica's it is; only the slice is copied (each
 * replica process held a copy of the whole global batch). */
static int load_data(const gb_model_t *m, const char *path, int batch, int first, int count,
                     float *images, int32_t *labels, char *err, size_t errlen) {
    gb_st_t *st = gb_st_open(path, err, errlen);
    if (!st) return -1;
    int rc = -1;
    const gb_st_tensor_t *im = gb_st_find(st, "images"), *lb = gb_st_find(st, "labels");
    if (!im || !lb) {
        snprintf(err, errlen, "%s: needs tensors 'images' and 'labels'", path);
        goto done;
    }
    if (im->dtype != GB_ST_F32 || im->ndim != 4 || im->shape[1] != 3) {
        char got[96];
        shape_str(im, got, sizeof(got));
        snprintf(err, errlen, "%s: 'images' is %s (%s); it must be F32 (N, 3, H, W), NCHW", path,
                 gb_st_dtype_name(im->dtype), got);
        goto done;
    }
    if (im->shape[0] != batch || im->shape[2] != m->cfg.image_h || im->shape[3] != m->cfg.image_w) {
        snprintf(err, errlen,
                 "%s: images are (%lld, 3, %lld, %lld) but the run is a global batch of %d at "
                 "%dx%d (--batch per device x devices); pass --batch and --image-size to match",
                 path, (long long)im->shape[0], (long long)im->shape[2], (long long)im->shape[3],
                 batch, m->cfg.image_h, m->cfg.image_w);
        goto done;
    }
    if ((lb->dtype != GB_ST_I64 && lb->dtype != GB_ST_I32) || lb->ndim != 1 ||
        lb->shape[0] != batch) {
        char got[96];
        shape_str(lb, got, sizeof(got));
        snprintf(err, errlen, "%s: 'labels' is %s (%s); it must be I64 (or I32) of shape (%d)",
                 path, gb_st_dtype_name(lb->dtype), got, batch);
        goto done;
    }
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
        if (i >= first && i < first + count) labels[i - first] = (int32_t)v;
    }
    /* the slice copied first and checked in the copy (the pixels trained
     * on are the pixels checked, whatever the file does meanwhile), the
     * rest checked in the mapping (need not be aligned for float) */
    const char *px0 = (const char *)im->data;
    size_t per = im->numel / (size_t)batch; /* floats per image */
    size_t lo = per * (size_t)first, hi = lo + per * (size_t)count;
    memcpy(images, px0 + 4 * lo, 4 * (hi - lo));
    for (size_t i = 0; i < im->numel; i++) {
        float x;
        if (i >= lo && i < hi)
            x = images[i - lo];
        else
            memcpy(&x, px0 + 4 * i, 4);
        if (!isfinite(x)) {
            size_t hw = (size_t)m->cfg.image_h * (size_t)m->cfg.image_w, px = i % hw;
            snprintf(err, errlen, "%s: images[%zu, %zu, %zu, %zu] is %s", path, i / (3 * hw),
                     i / hw % 3, px / (size_t)m->cfg.image_w, px % (size_t)m->cfg.image_w,
                     isnan(x) ? "NaN" : "infinite");
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

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}

/* --save and --save-grads: writable now, not after the run, and not the
 * same file (the second write would replace the first), nor an input the
 * run reads (--save may replace its own --load: a checkpoint carried on). */
static int check_save_paths(const gb_train_config_t *c, char *err, size_t errlen) {
    char a[PATH_MAX] = "", b[PATH_MAX] = "", why[GB_ERR_LEN];
    if (c->save_path && gb_st_target(c->save_path, a, sizeof(a), why, sizeof(why))) {
        snprintf(err, errlen, "--save %s", why);
        return -1;
    }
    if (c->save_grads_path && gb_st_target(c->save_grads_path, b, sizeof(b), why, sizeof(why))) {
        snprintf(err, errlen, "--save-grads %s", why);
        return -1;
    }
    if (a[0] && b[0] && gb_same_path(a, b)) {
        snprintf(err, errlen, "--save and --save-grads name the same file (%s)", c->save_path);
        return -1;
    }
    if (b[0] && c->load_path && gb_same_path(b, c->load_path)) {
        snprintf(err, errlen, "--save-grads names the --load file (%s): it would be overwritten",
                 c->load_path);
        return -1;
    }
    for (int i = 0; c->data_path && i < 2; i++) {
        const char *t = i ? b : a;
        if (t[0] && gb_same_path(t, c->data_path)) {
            snprintf(err, errlen, "%s names the --data file (%s): it would be overwritten",
                     i ? "--save-grads" : "--save", c->data_path);
            return -1;
        }
    }
    return 0;
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
    if (c->devices < 1 || c->devices > 1024) {
        snprintf(err, errlen, "devices %d out of range (1..1024)", c->devices);
        return -1;
    }
    if (!isfinite(c->bucket_mb) || c->bucket_mb <= 0 || c->bucket_mb > 65536) {
        snprintf(err, errlen, "bucket size %g MB out of range (0..65536]", c->bucket_mb);
        return -1;
    }
    if (strcmp(c->interconnect, "auto") != 0 && strcmp(c->interconnect, "nvlink") != 0 &&
        strcmp(c->interconnect, "pcie") != 0) {
        snprintf(err, errlen, "interconnect '%s' (auto, nvlink, pcie)", c->interconnect);
        return -1;
    }
    if (c->launch[0] && strcmp(c->launch, "auto") != 0 && strcmp(c->launch, "threads") != 0 &&
        strcmp(c->launch, "processes") != 0) {
        snprintf(err, errlen, "launch '%s' (auto, threads, processes)", c->launch);
        return -1;
    }
    if (c->first_device < 0 || c->node_devices < 0 || c->node_devices > 1024) {
        snprintf(err, errlen, "first device %d, node devices %d out of range", c->first_device,
                 c->node_devices);
        return -1;
    }
    if (c->dist &&
        (c->dist->n_nodes < 2 || c->dist->rank < 0 || c->dist->rank >= c->dist->n_nodes ||
         c->dist->world_size != c->dist->n_nodes * c->devices)) {
        snprintf(err, errlen,
                 "multi-node rank %d of %d node(s), world size %d, does not fit %d "
                 "device(s) per node",
                 c->dist->rank, c->dist->n_nodes, c->dist->world_size, c->devices);
        return -1;
    }
    if ((size_t)c->batch * (size_t)c->devices * (size_t)(c->dist ? c->dist->n_nodes : 1) >
        (size_t)INT_MAX) {
        snprintf(err, errlen, "the global batch is too large");
        return -1;
    }
    if (check_save_paths(c, err, errlen)) return -1;
    if (!isfinite(c->lr) || c->lr < 0 || !isfinite(c->momentum) || c->momentum < 0 ||
        !isfinite(c->weight_decay) || c->weight_decay < 0) {
        snprintf(err, errlen, "lr, momentum and weight decay must be finite and >= 0");
        return -1;
    }
    return 0;
}

uint64_t gb_fnv1a64(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64-bit offset basis and prime */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---------------------------------------------------------------- record */

/* v[0..n) as a JSON array, folded by stride (gb_samples_fold) */
static cJSON *num_array(const double *v, int n, int stride) {
    cJSON *a = cJSON_CreateArray();
    double *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    int m = f ? gb_samples_fold(v, n, stride, f) : 0;
    if (!f) { /* out of memory: the record goes without it */
        cJSON_Delete(a);
        return NULL;
    }
    for (int i = 0; a && i < m; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(f[i]));
    free(f);
    return a;
}

/* Refuse, before anything is allocated, a run whose host memory cannot fit
 * on this machine by a lower bound of what it will touch: the images (and
 * this node's slice of the --data file's global batch), the canonical parameters, and for CPU
 * replicas each one's parameters, gradients and momentum and the outputs of
 * its convolutions. Else a --batch or --devices too large for the machine
 * ends in the kernel's OOM kill after minutes of page faults. The CPU
 * backend checks its exact arenas again before it maps them. */
static int check_memory(const gb_model_t *m, const gb_train_config_t *cfg,
                        const gb_backend_ops_t *ops, int D, size_t npix, char *err, size_t errlen) {
    const char *what, *env = getenv("GB_CPU_MEM_CHECK");
    if (env && env[0] && strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
        /* a typo must not pass for "off" (nor for "on") */
        snprintf(err, errlen,
                 "GB_CPU_MEM_CHECK=%.40s: 0 turns the memory check off, 1 (the "
                 "default) keeps it",
                 env);
        return -1;
    }
    uint64_t avail = gb_mem_available(&what);
    if (avail == UINT64_MAX) return 0;
    double need = 4.0 * ((double)D * (double)npix + 2.0 * (double)(m->n_params + m->n_buffers));
    if (cfg->data_path) need += 4.0 * (double)D * (double)npix; /* this node's slice */
    if (strcmp(ops->name, "cpu") == 0)
        need += 4.0 * D * (3.0 * (double)m->n_params + (double)cfg->batch * (double)m->conv_out);
    if (need <= (double)avail) return 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    snprintf(err, errlen,
             "%s: batch %d%s at %dx%d needs at least %.1f GiB of host memory, more than the %.1f "
             "GiB this machine has available (%s): use %sa smaller --batch or --image-size "
             "(GB_CPU_MEM_CHECK=0 to try anyway)",
             ops->name, cfg->batch, D > 1 ? " per replica" : "", cfg->model.image_h,
             cfg->model.image_w, need / gib, (double)avail / gib, what,
             D > 1 ? "fewer --devices, " : "");
    return -1;
}

/* One replica of the run: its thread, its batch, what it measured. */
typedef struct replica {
    struct run *run;
    int d;    /* local index */
    int rank; /* global rank */
    gb_comm_t *comm;
    float *images;
    int32_t *labels;
    double *ms, *loss;
    gb_replica_report_t rep;
    char *params_fnv, *buffers_fnv; /* hex, malloc'd */
    float loss_last;
    int64_t window[2]; /* CLOCK_REALTIME ms around the timed steps */
    /* the first step whose update left a parameter that is not finite:
     * 1..warmup a warm-up step, warmup + 1.. a timed one; 0: none */
    int diverged;
    int skipped, skipped_warmup; /* updates the fp16 loss scaler skipped */
    int rc;
} replica_t;

typedef struct run {
    gb_train_config_t cfg; /* threads: per replica */
    const gb_backend_ops_t *ops;
    const gb_model_t *m;
    float *params;        /* canonical; freed by replica 0 once every replica has it */
    const float *buffers; /* canonical running statistics */
    int64_t nbt;
    int checksums; /* take the replicas' final state checksums */
    int devices;
    int procs; /* 1: the replicas are processes (launch.h) */
    gb_barrier_t *bar;
    gb_crew_t *crew; /* the replicas' threads; NULL with one replica */
    gb_comm_group_t *grp;
    float *grads; /* --save-grads: replica 0's (the average) */
    /* --save: replica 0's final state, written once the result is made */
    float *final_params, *final_buffers;
    int64_t final_nbt;
    pthread_mutex_t mu;
    int failed;
    char err[GB_ERR_LEN];
} run_t;

static void run_fail(run_t *run, int d, const char *why) {
    pthread_mutex_lock(&run->mu);
    int first = !run->failed;
    if (first) {
        run->failed = 1;
        if (run->devices > 1)
            snprintf(run->err, sizeof(run->err), "replica %d: %s", d, why);
        else
            snprintf(run->err, sizeof(run->err), "%s", why);
    }
    pthread_mutex_unlock(&run->mu);
    /* a replica process (launch.h): its launcher hears of the failure now,
     * not after the teardown, which may never end (a CUDA or NCCL call that
     * nothing wakes) and which a peer's consequential failure ("peer gone")
     * would otherwise beat to the launcher; the launcher then kills every
     * replica process of the node, this one too. What this process says at
     * its end is then not read. */
    if (first && g_report_fd >= 0) (void)gb_launch_send(g_report_fd, "fail", run->err);
    if (run->bar) gb_barrier_abort(run->bar, why);
    gb_comm_group_abort(run->grp, why);
    gb_crew_failed(run->crew);
}

/* Every call a backend gets for one replica, on one thread. */
static void replica_run(replica_t *r) {
    run_t *run = r->run;
    const gb_backend_ops_t *ops = run->ops;
    const gb_model_t *m = run->m;
    char err[GB_ERR_LEN] = "";
    void *state = NULL;
    float *params = NULL, *buffers = NULL;
    r->rc = -1;
    gb_crew_phase(run->crew, r->d, "create");
    if (ops->create(m, &run->cfg, r->d, r->comm, &state, err, sizeof(err))) goto fail;
    gb_crew_phase(run->crew, r->d, "set-up");
    if (ops->set_state(state, run->params, run->buffers, run->nbt, err, sizeof(err))) goto fail;
    /* every replica has its copy: the canonical parameters go back before
     * the backends' memory fills in (set_batch touches it first) */
    if (run->bar && gb_barrier_wait(run->bar, err, sizeof(err))) goto fail;
    if (r->d == 0) {
        free(run->params);
        run->params = NULL;
    }
    if (ops->set_batch(state, r->images, r->labels, err, sizeof(err))) goto fail;
    free(r->images);
    r->images = NULL;
    gb_crew_phase(run->crew, r->d, "warm-up");
    for (int i = 0; i < run->cfg.warmup; i++) {
        gb_step_out_t o = {0};
        if (run->bar && gb_barrier_wait(run->bar, err, sizeof(err))) goto fail;
        if (ops->step(state, &o, err, sizeof(err))) goto fail;
        if (o.nonfinite && !r->diverged) r->diverged = i + 1;
        r->skipped_warmup += o.skipped != 0;
    }
    /* every replica set up and warmed before the window opens (one still
     * building its plan would put its setup into the telemetry window) */
    if (run->bar && gb_barrier_wait(run->bar, err, sizeof(err))) goto fail;
    r->window[0] = gb_engine_wall_ms();
    gb_crew_phase(run->crew, r->d, "the timed steps");
    for (int i = 0; i < run->cfg.steps; i++) {
        gb_step_out_t o = {0};
        if (run->bar && gb_barrier_wait(run->bar, err, sizeof(err))) goto fail;
        double t0 = now_ms();
        if (ops->step(state, &o, err, sizeof(err))) goto fail;
        double t1 = now_ms();
        r->ms[i] = o.ms >= 0 ? o.ms : t1 - t0;
        r->loss[i] = o.loss;
        r->loss_last = o.loss;
        if (o.nonfinite && !r->diverged) r->diverged = run->cfg.warmup + i + 1;
        r->skipped += o.skipped != 0;
    }
    r->window[1] = gb_engine_wall_ms();
    gb_crew_phase(run->crew, r->d, "the report");
    if (r->d == 0 && run->grads && ops->get_grads(state, run->grads, err, sizeof(err))) goto fail;
    /* the parameters every replica ends with, as checksums (identical
     * across replicas and nodes is the data-parallel invariant) */
    if (run->checksums || (r->d == 0 && run->cfg.save_path)) {
        params = malloc(m->n_params * sizeof(float));
        buffers = malloc((m->n_buffers ? m->n_buffers : 1) * sizeof(float));
        int64_t nbt = 0;
        if (!params || !buffers) {
            snprintf(err, sizeof(err), "out of memory");
            goto fail;
        }
        if (ops->get_state(state, params, buffers, &nbt, err, sizeof(err))) goto fail;
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx",
                 (unsigned long long)gb_fnv1a64(params, m->n_params * sizeof(float)));
        r->params_fnv = strdup(hex);
        snprintf(hex, sizeof(hex), "%016llx",
                 (unsigned long long)gb_fnv1a64(buffers, m->n_buffers * sizeof(float)));
        r->buffers_fnv = strdup(hex);
        if (r->d == 0 && run->cfg.save_path) {
            run->final_params = params;
            run->final_buffers = buffers;
            run->final_nbt = nbt;
            params = buffers = NULL;
        }
    }
    if (ops->report(state, &r->rep, err, sizeof(err))) goto fail;
    r->rc = 0;
    goto done;
fail:
    run_fail(run, r->d, err[0] ? err : "the replica failed");
done:
    free(params);
    free(buffers);
    gb_crew_phase(run->crew, r->d, "destroy");
    if (state) ops->destroy(&state);
}

static void replica_main(void *arg) {
    replica_run(arg);
}

/* The shortest decimal that reads back as the same float: --lr 0.1 is
 * stored as 0.1, not as the double 0.10000000149011612 of the float. */
static double float_as_typed(float f) {
    char b[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof(b), "%.*g", p, (double)f);
        if ((float)strtod(b, NULL) == f) return strtod(b, NULL);
    }
    return (double)f;
}

static char *make_record(const run_t *run, const char *backend, const gb_backend_info_t *info,
                         int threads, const gb_train_result_t *r, const double *ms,
                         const double *loss, const replica_t *reps, size_t peak_rss) {
    const gb_train_config_t *cfg = &run->cfg;
    const gb_model_t *m = run->m;
    int nodes = cfg->dist ? cfg->dist->n_nodes : 1, world = run->devices * nodes;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "kind", "resnet50");
    cJSON_AddStringToObject(o, "backend", backend);
    cJSON_AddStringToObject(o, "device_model", info->device_model);
    cJSON_AddNumberToObject(o, "n_devices", world);
    cJSON_AddStringToObject(o, "precision", gb_precision_name(cfg->precision));
    cJSON_AddBoolToObject(o, "valid", r->valid);
    if (r->valid)
        cJSON_AddNullToObject(o, "invalid_reason");
    else
        cJSON_AddStringToObject(o, "invalid_reason", r->invalid_reason);
    /* the updates the fp16 loss scaler skipped (an overflow in the
     * gradients; 0 in the other precisions), the same on every replica */
    cJSON_AddNumberToObject(o, "skipped_steps", reps[0].skipped);
    cJSON_AddNumberToObject(o, "skipped_warmup_steps", reps[0].skipped_warmup);
    cJSON *ver = cJSON_Parse(info->versions);
    if (!ver || !cJSON_IsObject(ver)) {
        cJSON_Delete(ver);
        ver = cJSON_CreateObject();
    }
    cJSON_AddStringToObject(ver, "gpubench", GB_VERSION);
    cJSON_AddItemToObject(o, "versions", ver);
    const char *details = reps[0].rep.details_json;
    cJSON *det = details ? cJSON_Parse(details) : NULL;
    if (!det || !cJSON_IsObject(det)) {
        cJSON_Delete(det);
        det = cJSON_CreateObject();
    }
    /* the interconnect the backend says it really used (CUDA: from NCCL's
     * own report); else what the replicas are: threads share memory, nodes
     * talk over the TCP ring */
    char ic[32];
    const cJSON *bic = cJSON_GetObjectItemCaseSensitive(det, "interconnect");
    if (cJSON_IsString(bic))
        snprintf(ic, sizeof(ic), "%s", bic->valuestring);
    else
        snprintf(ic, sizeof(ic), "%s",
                 world == 1                ? "none"
                 : nodes > 1 || run->procs ? "tcp"
                                           : "shm");
    cJSON_DeleteItemFromObjectCaseSensitive(det, "interconnect");
    cJSON_AddNumberToObject(det, "peak_rss_bytes", (double)peak_rss);
    if (cfg->model.image_h != cfg->model.image_w) {
        cJSON_AddNumberToObject(det, "image_h", cfg->model.image_h);
        cJSON_AddNumberToObject(det, "image_w", cfg->model.image_w);
    }
    cJSON_AddStringToObject(det, "data", cfg->data_path ? "file" : "synthetic");
    cJSON_AddStringToObject(det, "weights", cfg->load_path ? "file" : "init");
    if (!m->cfg.bn) cJSON_AddBoolToObject(det, "batch_norm", 0);
    if (run->devices > 1)
        cJSON_AddStringToObject(det, "launch", run->procs ? "processes" : "threads");
    if (world > 1) {
        cJSON_AddNumberToObject(det, "bucket_mb", cfg->bucket_mb);
        /* replica 0's all-reduce figures go with the other replicas' */
        cJSON *ar = cJSON_DetachItemFromObjectCaseSensitive(det, "allreduce");
        const cJSON *nb = cJSON_GetObjectItemCaseSensitive(ar, "buckets");
        if (cJSON_IsNumber(nb)) cJSON_AddNumberToObject(det, "buckets", nb->valuedouble);
        cJSON_Delete(ar);
        cJSON_AddStringToObject(det, "batch_norm_stats", m->cfg.bn ? "per replica" : "none");
        cJSON *ra = cJSON_AddArrayToObject(det, "replicas");
        for (int d = 0; ra && d < run->devices; d++) {
            const replica_t *rp = &reps[d];
            gb_step_stats_t s;
            cJSON *e = cJSON_CreateObject();
            if (!e) break;
            cJSON_AddNumberToObject(e, "replica", d);
            cJSON_AddNumberToObject(e, "rank", rp->rank);
            if (gb_step_stats(rp->ms, NULL, cfg->steps, &s) == 0)
                cJSON_AddNumberToObject(e, "step_ms_median", s.median);
            cJSON_AddNumberToObject(e, "loss_last", rp->loss_last);
            cJSON_AddNumberToObject(e, "peak_mem_bytes", (double)rp->rep.peak_mem_bytes);
            cJSON_AddStringToObject(e, "params_fnv", rp->params_fnv ? rp->params_fnv : "");
            cJSON_AddStringToObject(e, "buffers_fnv", rp->buffers_fnv ? rp->buffers_fnv : "");
            cJSON *rd = rp->rep.details_json ? cJSON_Parse(rp->rep.details_json) : NULL;
            cJSON *rar = rd ? cJSON_DetachItemFromObjectCaseSensitive(rd, "allreduce") : NULL;
            if (rar) cJSON_AddItemToObject(e, "allreduce", rar);
            cJSON_Delete(rd);
            cJSON_AddItemToArray(ra, e);
        }
    }
    /* one checksum for the whole run: what every replica ended with */
    if (reps[0].params_fnv) cJSON_AddStringToObject(det, "params_fnv", reps[0].params_fnv);
    cJSON_AddItemToObject(o, "details", det);
    cJSON_AddNumberToObject(o, "batch_per_device", cfg->batch);
    cJSON_AddNumberToObject(o, "global_batch", (double)cfg->batch * world);
    cJSON_AddNumberToObject(o, "image_size", cfg->model.image_h);
    cJSON_AddNumberToObject(o, "steps", cfg->steps);
    cJSON_AddNumberToObject(o, "warmup", cfg->warmup);
    cJSON_AddNumberToObject(o, "threads", threads);
    cJSON_AddNumberToObject(o, "lr", float_as_typed(cfg->lr));
    cJSON_AddNumberToObject(o, "momentum", float_as_typed(cfg->momentum));
    cJSON_AddNumberToObject(o, "weight_decay", float_as_typed(cfg->weight_decay));
    {
        /* every digit (up to 2^53): as a double cJSON wrote 5000000000000001
         * as 5e+15 (its round-trip check is loose) */
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)cfg->seed);
        cJSON_AddRawToObject(o, "seed", seed);
    }
    cJSON_AddStringToObject(o, "interconnect", ic);
    cJSON_AddNumberToObject(o, "images_per_sec", r->images_per_sec);
    cJSON *sm = cJSON_AddObjectToObject(o, "step_ms");
    if (sm) {
        cJSON_AddNumberToObject(sm, "median", r->step_ms_median);
        cJSON_AddNumberToObject(sm, "p90", r->step_ms_p90);
        cJSON_AddNumberToObject(sm, "min", r->step_ms_min);
        cJSON_AddNumberToObject(sm, "max", r->step_ms_max);
        cJSON_AddNumberToObject(sm, "mean", r->step_ms_mean);
    }
    int stride = gb_samples_stride(cfg->steps);
    cJSON_AddItemToObject(o, "step_ms_samples", num_array(ms, cfg->steps, stride));
    if (stride > 1) cJSON_AddNumberToObject(o, "samples_stride", stride);
    cJSON_AddNumberToObject(o, "loss_first", r->loss_first);
    cJSON_AddNumberToObject(o, "loss_last", r->loss_last);
    cJSON_AddItemToObject(o, "loss_samples", num_array(loss, cfg->steps, stride));
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

/* ------------------------------------------------ replicas as processes */

/* In a replica process: what the launcher's make_record needs of it. */
static int send_report(const run_t *run, const replica_t *r, size_t peak_rss) {
    int steps = run->cfg.steps;
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddItemToObject(o, "ms", num_array(r->ms, steps, 1));
    cJSON_AddItemToObject(o, "loss", num_array(r->loss, steps, 1));
    cJSON_AddNumberToObject(o, "loss_last", r->loss_last);
    cJSON_AddNumberToObject(o, "diverged", r->diverged);
    cJSON_AddNumberToObject(o, "skipped", r->skipped);
    cJSON_AddNumberToObject(o, "skipped_warmup", r->skipped_warmup);
    cJSON *w = cJSON_AddArrayToObject(o, "window");
    if (w) {
        cJSON_AddItemToArray(w, cJSON_CreateNumber((double)r->window[0]));
        cJSON_AddItemToArray(w, cJSON_CreateNumber((double)r->window[1]));
    }
    cJSON_AddStringToObject(o, "params_fnv", r->params_fnv ? r->params_fnv : "");
    cJSON_AddStringToObject(o, "buffers_fnv", r->buffers_fnv ? r->buffers_fnv : "");
    cJSON_AddNumberToObject(o, "peak_mem_bytes", (double)r->rep.peak_mem_bytes);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)peak_rss);
    cJSON *det = r->rep.details_json ? cJSON_Parse(r->rep.details_json) : NULL;
    if (det) cJSON_AddItemToObject(o, "details", det);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int rc = text ? gb_launch_send(g_report_fd, "report", text) : -1;
    free(text);
    return rc;
}

/* null: NaN (JSON has no NaN: a diverged run's loss) */
static int report_nums(const cJSON *o, const char *key, double *out, int n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return -1;
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) && !cJSON_IsNull(e)) return -1;
        out[i] = cJSON_IsNull(e) ? NAN : e->valuedouble;
    }
    return 0;
}

static const char *report_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Replica process d's report into reps[d] (as its thread would have left it). */
static int from_report(replica_t *r, const cJSON *o, int steps, size_t *peak_rss) {
    double win[2], v[6];
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(o, "rank");
    const char *pf = report_str(o, "params_fnv"), *bf = report_str(o, "buffers_fnv");
    r->ms = calloc((size_t)steps, sizeof(double));
    r->loss = calloc((size_t)steps, sizeof(double));
    if (!r->ms || !r->loss || !cJSON_IsNumber(rank) || rank->valuedouble != r->rank ||
        report_nums(o, "ms", r->ms, steps) || report_nums(o, "loss", r->loss, steps) ||
        report_nums(o, "window", win, 2) || !pf || !bf)
        return -1;
    const char *keys[6] = {"loss_last", "peak_mem_bytes", "peak_rss_bytes",
                           "diverged",  "skipped",        "skipped_warmup"};
    for (int k = 0; k < 6; k++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
        if (k == 0 && cJSON_IsNull(n)) { /* a NaN loss */
            v[k] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(n) || (k >= 3 && !(n->valuedouble >= 0 && n->valuedouble <= 1e9)))
            return -1;
        v[k] = n->valuedouble;
    }
    r->loss_last = (float)v[0];
    r->rep.peak_mem_bytes = (size_t)v[1];
    *peak_rss += (size_t)v[2];
    r->diverged = (int)v[3];
    r->skipped = (int)v[4];
    r->skipped_warmup = (int)v[5];
    r->window[0] = (int64_t)win[0];
    r->window[1] = (int64_t)win[1];
    r->params_fnv = strdup(pf);
    r->buffers_fnv = strdup(bf);
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(o, "details");
    if (cJSON_IsObject(det)) r->rep.details_json = cJSON_PrintUnformatted(det);
    return r->params_fnv && r->buffers_fnv ? 0 : -1;
}

/* The run's replicas as processes (launch.h); reps[d].rank set. */
static int launch_replicas(run_t *run, replica_t *reps, size_t *peak_rss, char *saveerr,
                           size_t saveerrlen, char *err, size_t errlen) {
    const gb_train_config_t *cfg = &run->cfg;
    int D = run->devices;
    cJSON **rp = calloc((size_t)D, sizeof(*rp));
    if (!rp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = gb_launch_run(cfg, cfg->threads, rp, saveerr, saveerrlen, err, errlen);
    for (int d = 0; rc == 0 && d < D; d++) {
        if (from_report(&reps[d], rp[d], cfg->steps, peak_rss)) {
            snprintf(err, errlen, "replica process %d (rank %d) sent a report that does not fit", d,
                     reps[d].rank);
            rc = -1;
        }
    }
    for (int d = 0; d < D; d++)
        cJSON_Delete(rp[d]);
    free(rp);
    return rc;
}

static int train_run(const gb_train_config_t *cfg, gb_train_result_t *res, char *err,
                     size_t errlen);

/* --backend auto: the CUDA backend when it can run here, else the CPU one;
 * a run that then fails on the CPU says why the GPU was not used (an fp16
 * or nvlink refusal from the CPU backend alone reads as if no GPU had been
 * looked for). */
int gb_auto_backend(const char *requested, char *chosen, size_t chosenlen, char *why,
                    size_t whylen) {
    if (whylen) why[0] = '\0';
    if (strcmp(requested, "auto") != 0) {
        snprintf(chosen, chosenlen, "%s", requested);
        return 0;
    }
    gb_backend_info_t info;
    const gb_backend_ops_t *ops = gb_backend_get("cuda", why, whylen);
    int gpu = ops && ops->probe(&info, why, whylen) == 0;
    snprintf(chosen, chosenlen, "%s", gpu ? "cuda" : "cpu");
    if (gpu && whylen) why[0] = '\0';
    /* a machine with a GPU the backend cannot use (a driver too old for
     * its runtime) must not be measured on the CPU without a word */
    if (!gpu && whylen && strstr(why, "driver too old"))
        fprintf(stderr, "gpubench: warning: --backend auto runs the CPU backend: cuda: %s\n", why);
    return 0;
}

void gb_auto_backend_note(const char *requested, const char *why, char *err, size_t errlen) {
    size_t n = strlen(err);
    if (strcmp(requested, "auto") != 0 || !why[0] || n + 32 >= errlen) return;
    snprintf(err + n, errlen - n, " (--backend auto ran the CPU backend: cuda: %s)", why);
}

int gb_train_run(const gb_train_config_t *cfg_in, gb_train_result_t *res, char *err,
                 size_t errlen) {
    gb_train_config_t c = *cfg_in;
    char why[GB_ERR_LEN];
    gb_auto_backend(cfg_in->backend, c.backend, sizeof(c.backend), why, sizeof(why));
    int rc = train_run(&c, res, err, errlen);
    if (rc != 0) gb_auto_backend_note(cfg_in->backend, why, err, errlen);
    return rc;
}

/* train_run's work on *run, which the caller frees unless a replica was
 * left running (GB_STRANDED): such a replica's thread still uses it */
static int run_with(run_t *run, const gb_train_config_t *cfg_in, gb_train_result_t *res, char *err,
                    size_t errlen) {
    memset(res, 0, sizeof(*res));
    run->cfg = *cfg_in;
    gb_train_config_t *cfg = &run->cfg;
    gb_model_t *m = NULL;
    float *buffers = NULL, *images = NULL;
    int32_t *labels = NULL;
    double *ms = NULL, *loss = NULL;
    replica_t *reps = NULL;
    const gb_backend_ops_t *ops = NULL;
    int rc = -1, mu_ok = 0;
    char why[GB_ERR_LEN], saveerr[GB_ERR_LEN] = "";
    size_t procs_rss = 0;

    if (check_config(cfg, err, errlen)) return -1;
    const char *bname = cfg->backend;
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
    int D = cfg->devices, nodes = cfg->dist ? cfg->dist->n_nodes : 1;
    int world = D * nodes, node = cfg->dist ? cfg->dist->rank : 0;
    if (strcmp(ops->name, "cpu") == 0 && strcmp(cfg->interconnect, "auto") != 0) {
        snprintf(err, errlen, "interconnect %s needs GPUs; CPU replicas share memory (auto)",
                 cfg->interconnect);
        return -1;
    }
    if (strcmp(ops->name, "cpu") != 0 && D > info.device_count) {
        snprintf(err, errlen, "%d devices asked for, %d %s GPU(s) here", D, info.device_count,
                 info.device_model);
        return -1;
    }
    run->ops = ops;
    run->devices = D;
    /* auto: a process per GPU, as NCCL recommends (and CUDA graphs need);
     * CPU replicas share memory as threads */
    run->procs =
        D > 1 &&
        (strcmp(cfg->launch, "processes") == 0 ||
         ((!cfg->launch[0] || strcmp(cfg->launch, "auto") == 0) && strcmp(ops->name, "cuda") == 0));
    m = gb_model_new(&cfg->model, err, errlen);
    if (!m) return -1;
    run->m = m;
    int threads = cfg->threads > 0 ? cfg->threads : gb_cpus_usable();
    if (threads < 1) threads = 1;
    /* CPU replicas split the cores */
    cfg->threads = threads / D > 0 ? threads / D : 1;
    size_t npix = (size_t)cfg->batch * 3 * cfg->model.image_h * cfg->model.image_w;
    if (check_memory(m, cfg, ops, D, npix, err, errlen)) goto done;
    ms = calloc((size_t)cfg->steps, sizeof(double));
    loss = calloc((size_t)cfg->steps, sizeof(double));
    reps = calloc((size_t)D, sizeof(*reps));
    run->checksums = world > 1;
    if (!ms || !loss || !reps) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (pthread_mutex_init(&run->mu, NULL) != 0) {
        snprintf(err, errlen, "cannot make a mutex");
        goto done;
    }
    mu_ok = 1;
    if (run->procs) {
        /* the replicas load or make their weights and batches themselves */
        for (int d = 0; d < D; d++)
            reps[d].rank = node * D + d;
        if (launch_replicas(run, reps, &procs_rss, saveerr, sizeof(saveerr), err, errlen))
            goto done;
        goto gathered;
    }
    run->params = malloc(m->n_params * sizeof(float));
    buffers = malloc((m->n_buffers ? m->n_buffers : 1) * sizeof(float));
    if (!run->params || !buffers) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (cfg->load_path) {
        if (load_weights(m, cfg->load_path, run->params, buffers, &run->nbt, err, errlen))
            goto done;
    } else {
        gb_model_init(m, run->params, buffers, cfg->seed);
    }
    if (cfg->data_path) {
        /* the file holds the global batch; this node's replicas take theirs */
        int gb = world * cfg->batch;
        images = malloc((size_t)D * npix * sizeof(float));
        labels = malloc((size_t)D * (size_t)cfg->batch * sizeof(int32_t));
        if (!images || !labels) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        if (load_data(m, cfg->data_path, gb, node * D * cfg->batch, D * cfg->batch, images, labels,
                      err, errlen))
            goto done;
    }
    for (int d = 0; d < D; d++) {
        replica_t *r = &reps[d];
        r->run = run;
        r->d = d;
        r->rank = node * D + d;
        r->images = malloc(npix * sizeof(float));
        r->labels = malloc((size_t)cfg->batch * sizeof(int32_t));
        r->ms = calloc((size_t)cfg->steps, sizeof(double));
        r->loss = calloc((size_t)cfg->steps, sizeof(double));
        if (!r->images || !r->labels || !r->ms || !r->loss) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        if (cfg->data_path) {
            memcpy(r->images, images + (size_t)d * npix, npix * sizeof(float));
            memcpy(r->labels, labels + (size_t)d * (size_t)cfg->batch,
                   (size_t)cfg->batch * sizeof(int32_t));
        } else {
            gb_model_synth_batch(m, cfg->batch, gb_replica_seed(cfg->seed, r->rank), r->images,
                                 r->labels);
        }
    }
    free(images);
    images = NULL;
    free(labels);
    labels = NULL;
    if (cfg->save_grads_path) {
        run->grads = malloc(m->n_params * sizeof(float));
        if (!run->grads) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
    }
    run->buffers = buffers;
    if (world > 1) {
        int tmo;
        if (gb_comm_timeout_ms(&tmo, err, errlen)) goto done;
        run->grp = gb_comm_group_new(D, cfg->dist, tmo, err, errlen);
        if (!run->grp) goto done;
        for (int d = 0; d < D; d++)
            reps[d].comm = gb_comm_group_member(run->grp, d);
    }
    if (D > 1) {
        int grace;
        if (gb_crew_grace_ms(&grace, err, errlen)) goto done;
        run->bar = gb_barrier_new(D);
        if (!run->bar) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        run->crew = gb_crew_new(D, err, errlen);
        if (!run->crew) goto done;
        for (int d = 0; d < D; d++) {
            if (gb_crew_start(run->crew, d, replica_main, &reps[d], why, sizeof(why))) {
                run_fail(run, d, why);
                break;
            }
        }
        if (gb_crew_join(run->crew, grace, why, sizeof(why))) {
            /* their threads still use run, reps, the model and the
             * backend: nothing of them is freed, the caller ends the
             * process */
            pthread_mutex_lock(&run->mu);
            snprintf(err, errlen, "%s; %s", run->err, why);
            pthread_mutex_unlock(&run->mu);
            return GB_STRANDED;
        }
    } else {
        replica_run(&reps[0]); /* one replica: on this thread */
    }
    if (run->failed) {
        snprintf(err, errlen, "%s", run->err);
        goto done;
    }
gathered:
    /* the timed window spans every replica's timed steps */
    res->timed_window_ms[0] = reps[0].window[0];
    res->timed_window_ms[1] = reps[0].window[1];
    for (int d = 1; d < D; d++) {
        if (reps[d].window[0] < res->timed_window_ms[0])
            res->timed_window_ms[0] = reps[d].window[0];
        if (reps[d].window[1] > res->timed_window_ms[1])
            res->timed_window_ms[1] = reps[d].window[1];
    }
    /* a data-parallel step lasts as long as its slowest replica */
    for (int i = 0; i < cfg->steps; i++) {
        ms[i] = 0;
        loss[i] = 0;
        for (int d = 0; d < D; d++) {
            if (reps[d].ms[i] > ms[i]) ms[i] = reps[d].ms[i];
            loss[i] += reps[d].loss[i] / D;
        }
    }
    gb_step_stats_t sst;
    if (gb_step_stats(ms, loss, cfg->steps, &sst)) {
        snprintf(err, errlen, "bad step times from the backend");
        goto done;
    }
    res->step_ms_median = sst.median;
    res->step_ms_p90 = sst.p90;
    res->step_ms_min = sst.min;
    res->step_ms_max = sst.max;
    res->step_ms_mean = sst.mean;
    res->images_per_sec = (double)cfg->batch * world / (sst.median / 1000.0);
    res->loss_first = loss[0];
    res->loss_last = loss[cfg->steps - 1];
    res->valid = sst.valid;
    snprintf(res->invalid_reason, sizeof(res->invalid_reason), "%s", sst.invalid_reason);
    /* a diverged run is no measurement, whatever its losses looked like
     * (every replica has the same parameters: the earliest one says when) */
    int div = 0;
    for (int d = 0; d < D; d++)
        if (reps[d].diverged && (!div || reps[d].diverged < div)) div = reps[d].diverged;
    if (div) {
        int warm = div <= cfg->warmup;
        res->valid = 0;
        snprintf(res->invalid_reason, sizeof(res->invalid_reason),
                 "the parameters are not finite from %s step %d on (the run diverged; lower --lr)",
                 warm ? "warm-up" : "timed", warm ? div : div - cfg->warmup);
    }
    /* the backends' memory plus what the driver holds while theirs fills in
     * (running statistics, each replica's batch and labels); the canonical
     * parameters are given to every replica before the batches, and the
     * replicas' state checksums come after the timed steps */
    res->peak_mem_bytes = (m->n_buffers + (size_t)D * npix) * sizeof(float) +
                          (size_t)D * (size_t)cfg->batch * sizeof(int32_t);
    for (int d = 0; d < D; d++)
        res->peak_mem_bytes += reps[d].rep.peak_mem_bytes;
    if (g_report_fd >= 0 && send_report(run, &reps[0], peak_rss_bytes())) {
        snprintf(err, errlen, "cannot send this replica's report to its launcher");
        goto done;
    }
    res->record_json = make_record(run, ops->name, &info, threads, res, ms, loss, reps,
                                   run->procs ? procs_rss : peak_rss_bytes());
    if (!res->record_json) {
        snprintf(err, errlen, "out of memory building the result record");
        goto done;
    }
    /* the files last: a write that fails still leaves the measured result
     * with the caller (record_json stays set) */
    /* both are tried; a failure of either is said, the first one first */
    rc = 0;
    if (run->procs && saveerr[0]) { /* replica process 0 wrote them */
        snprintf(err, errlen, "%s", saveerr);
        rc = -2;
    }
    if (cfg->save_path && !run->procs) {
        size_t bad = SIZE_MAX;
        for (size_t k = 0; k < m->n_params && bad == SIZE_MAX; k++)
            if (!isfinite(run->final_params[k])) bad = k;
        if (bad != SIZE_MAX) {
            /* --load refuses such a file: not written, the run said why */
            snprintf(err, errlen,
                     "--save %s: not written: the parameters are not finite after the run (the "
                     "loss diverged; lower --lr)",
                     cfg->save_path);
            rc = -2;
        } else if (save_tensors(m, cfg->save_path, run->final_params, run->final_buffers,
                                &run->final_nbt, 0, err, errlen)) {
            rc = -2;
        }
    }
    if (cfg->save_grads_path && !run->procs) {
        char gerr[GB_ERR_LEN];
        if (save_tensors(m, cfg->save_grads_path, run->grads, NULL, NULL, 1, gerr, sizeof(gerr))) {
            if (rc == 0)
                snprintf(err, errlen, "%s", gerr);
            else
                snprintf(err + strlen(err), errlen - strlen(err), "; and %s", gerr);
            rc = -2;
        }
    }
    if (rc && g_report_fd >= 0) gb_launch_send(g_report_fd, "savefail", err);
    if (rc) goto done;
done:
    for (int d = 0; reps && d < D; d++) {
        free(reps[d].images);
        free(reps[d].labels);
        free(reps[d].ms);
        free(reps[d].loss);
        free(reps[d].rep.details_json);
        free(reps[d].params_fnv);
        free(reps[d].buffers_fnv);
    }
    free(reps);
    gb_barrier_destroy(&run->bar);
    gb_crew_free(&run->crew);
    gb_comm_group_destroy(&run->grp);
    if (mu_ok) pthread_mutex_destroy(&run->mu);
    gb_model_destroy(&m);
    free(run->grads);
    free(run->final_params);
    free(run->final_buffers);
    free(run->params);
    free(buffers);
    free(images);
    free(labels);
    free(ms);
    free(loss);
    if (rc == -1) gb_train_result_free(res);
    return rc < 0 ? -1 : 0;
}

static int train_run(const gb_train_config_t *cfg, gb_train_result_t *res, char *err,
                     size_t errlen) {
    run_t *run = calloc(1, sizeof(*run));
    if (!run) {
        memset(res, 0, sizeof(*res));
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = run_with(run, cfg, res, err, errlen);
    if (rc != GB_STRANDED) free(run);
    return rc;
}

void gb_train_result_free(gb_train_result_t *res) {
    if (!res) return;
    free(res->record_json);
    res->record_json = NULL;
}
