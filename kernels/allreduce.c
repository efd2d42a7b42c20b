/* allreduce.c - the allreduce job kind (engine.h: gb_allreduce_run), as
 * nccl-tests' all_reduce_perf measures it: float sum in place over every
 * replica of the job, message sizes doubling from min_bytes to max_bytes,
 * per size `warmup` untimed and `iters` timed all-reduces (the time per
 * operation is the slowest replica's mean), then a check of every element
 * against the exact sum of known inputs. algbw = bytes / time; busbw =
 * algbw * 2(n-1)/n, the traffic a ring all-reduce puts on each link, so
 * figures compare across replica counts (and with nccl-tests).
 *
 * One thread per local replica calls the backend's allreduce op with its
 * member of a comm group (comm.h); a failing replica aborts the group so
 * the others stop with its reason.
 */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "crew.h"
#include "engine.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GB_VERSION
#define GB_VERSION "0.0.0"
#endif

#define MAX_SIZES 64

void gb_allreduce_config_default(gb_allreduce_config_t *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->backend, sizeof(cfg->backend), "cpu");
    cfg->devices = 1;
    cfg->min_bytes = 8;
    cfg->max_bytes = (size_t)1 << 30;
    cfg->iters = 20;
    cfg->warmup = 3;
    snprintf(cfg->interconnect, sizeof(cfg->interconnect), "auto");
    cfg->fault_rank = -1;
}

static int check(const gb_allreduce_config_t *c, char *err, size_t errlen) {
    if (c->devices < 1 || c->devices > 1024) {
        snprintf(err, errlen, "devices %d out of range (1..1024)", c->devices);
        return -1;
    }
    if (c->min_bytes < 4 || c->min_bytes % 4 || c->max_bytes % 4 || c->max_bytes < c->min_bytes ||
        c->max_bytes > ((size_t)1 << 34)) {
        snprintf(err, errlen,
                 "message sizes %zu..%zu bytes: multiples of 4 (floats), 4 <= min <= max <= 16 GiB",
                 c->min_bytes, c->max_bytes);
        return -1;
    }
    if (c->iters < 1 || c->iters > 100000 || c->warmup < 0 || c->warmup > 100000) {
        snprintf(err, errlen, "iters %d (1..100000), warm-up %d (0..100000)", c->iters, c->warmup);
        return -1;
    }
    if (strcmp(c->interconnect, "auto") != 0 && strcmp(c->interconnect, "nvlink") != 0 &&
        strcmp(c->interconnect, "pcie") != 0) {
        snprintf(err, errlen, "interconnect '%s' (auto, nvlink, pcie)", c->interconnect);
        return -1;
    }
    if (c->dist && (c->dist->n_nodes < 2 || c->dist->world_size != c->dist->n_nodes * c->devices)) {
        snprintf(err, errlen, "multi-node world size %d does not fit %d node(s) x %d device(s)",
                 c->dist->world_size, c->dist->n_nodes, c->devices);
        return -1;
    }
    return 0;
}

typedef struct rep {
    const gb_backend_ops_t *ops;
    gb_allreduce_config_t cfg; /* a copy: a stranded replica outlives the caller's */
    gb_comm_t *comm;
    gb_comm_group_t *grp;
    gb_crew_t *crew; /* NULL with one replica */
    int d, n;
    gb_allreduce_size_t sizes[MAX_SIZES];
    char *details;
    int rc;
    char err[GB_ERR_LEN];
} rep_t;

static void rep_main(void *arg) {
    rep_t *r = arg;
    gb_crew_phase(r->crew, r->d, "the allreduce op");
    r->rc = r->ops->allreduce(r->d, r->comm, &r->cfg, r->sizes, r->n, &r->details, r->err,
                              sizeof(r->err));
    if (r->rc) {
        gb_comm_group_abort(r->grp, r->err[0] ? r->err : "allreduce failed");
        gb_crew_failed(r->crew);
    }
}

static int allreduce_run(const gb_allreduce_config_t *cfg, char **record_json, char *err,
                         size_t errlen);

int gb_allreduce_run(const gb_allreduce_config_t *cfg_in, char **record_json, char *err,
                     size_t errlen) {
    gb_allreduce_config_t c = *cfg_in;
    char why[GB_ERR_LEN];
    gb_auto_backend(cfg_in->backend, c.backend, sizeof(c.backend), why, sizeof(why));
    int rc = allreduce_run(&c, record_json, err, errlen);
    if (rc != 0) gb_auto_backend_note(cfg_in->backend, why, err, errlen);
    return rc;
}

static int allreduce_run(const gb_allreduce_config_t *cfg, char **record_json, char *err,
                         size_t errlen) {
    *record_json = NULL;
    if (check(cfg, err, errlen)) return -1;
    char why[GB_ERR_LEN];
    gb_backend_info_t info;
    const gb_backend_ops_t *ops = NULL;
    const char *bname = cfg->backend;
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
    if (!ops->allreduce) {
        snprintf(err, errlen, "the %s backend has no allreduce", ops->name);
        return -1;
    }
    int D = cfg->devices, nodes = cfg->dist ? cfg->dist->n_nodes : 1, world = D * nodes;
    int cpu = strcmp(ops->name, "cpu") == 0;
    if (cpu && strcmp(cfg->interconnect, "auto") != 0) {
        snprintf(err, errlen, "interconnect %s needs GPUs; CPU replicas share memory (auto)",
                 cfg->interconnect);
        return -1;
    }
    if (!cpu && D > info.device_count) {
        snprintf(err, errlen, "%d devices asked for, %d %s GPU(s) here", D, info.device_count,
                 info.device_model);
        return -1;
    }
    gb_allreduce_size_t sizes[MAX_SIZES];
    int n = 0;
    for (size_t b = cfg->min_bytes; b <= cfg->max_bytes && n < MAX_SIZES; b *= 2) {
        memset(&sizes[n], 0, sizeof(sizes[n]));
        sizes[n].bytes = b;
        sizes[n].count = b / 4;
        n++;
        if (b > cfg->max_bytes / 2) break;
    }
    int tmo, grace;
    if (gb_comm_timeout_ms(&tmo, err, errlen) || gb_crew_grace_ms(&grace, err, errlen)) return -1;
    rep_t *reps = calloc((size_t)D, sizeof(*reps));
    gb_comm_group_t *grp = gb_comm_group_new(D, cfg->dist, tmo, err, errlen);
    gb_crew_t *crew = NULL;
    cJSON *o = NULL;
    int rc = -1;
    if (!reps || !grp) {
        if (!reps) snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (D > 1 && !(crew = gb_crew_new(D, err, errlen))) goto done;
    for (int d = 0; d < D; d++) {
        rep_t *r = &reps[d];
        r->ops = ops;
        r->cfg = *cfg;
        r->comm = gb_comm_group_member(grp, d);
        r->grp = grp;
        r->crew = crew;
        r->d = d;
        r->n = n;
        memcpy(r->sizes, sizes, (size_t)n * sizeof(sizes[0]));
    }
    if (D == 1) {
        rep_main(&reps[0]);
    } else {
        for (int d = 0; d < D; d++) {
            if (gb_crew_start(crew, d, rep_main, &reps[d], reps[d].err, sizeof(reps[d].err))) {
                for (int k = d; k < D; k++) {
                    reps[k].rc = -1;
                    snprintf(reps[k].err, sizeof(reps[k].err), "%s", reps[d].err);
                }
                gb_comm_group_abort(grp, reps[d].err);
                gb_crew_failed(crew);
                break;
            }
        }
        char why[GB_ERR_LEN];
        if (gb_crew_join(crew, grace, why, sizeof(why))) {
            /* their threads still use reps, the group and the backend:
             * nothing is freed, the caller ends the process */
            char first[GB_ERR_LEN] = "";
            gb_comm_aborted(reps[0].comm, first, sizeof(first));
            snprintf(err, errlen, "%s; %s", first[0] ? first : "a replica failed", why);
            return GB_STRANDED;
        }
    }
    /* a failing replica aborted the group with its reason: every failed
     * replica's error carries it */
    for (int d = 0; d < D; d++) {
        if (reps[d].rc == 0) continue;
        snprintf(err, errlen, "%s", reps[d].err[0] ? reps[d].err : "allreduce failed");
        goto done;
    }
    o = cJSON_CreateObject();
    if (!o) goto oom;
    const rep_t *r0 = &reps[0];
    int wrong = 0;
    size_t first_wrong = 0;
    double peak = 0;
    cJSON *arr = cJSON_CreateArray();
    if (!arr) goto oom;
    for (int k = 0; k < n; k++) {
        const gb_allreduce_size_t *s = &r0->sizes[k];
        double t = s->time_us > 0 ? s->time_us : 1e-3; /* a timer's resolution, never 0 */
        double alg = (double)s->bytes / (t * 1e-6) / 1e9;
        double bus = world > 1 ? alg * 2.0 * (world - 1) / world : 0.0;
        if (bus > peak && s->ok) peak = bus;
        if (!s->ok && wrong++ == 0) first_wrong = s->bytes;
        cJSON *e = cJSON_CreateObject();
        if (!e) {
            cJSON_Delete(arr);
            goto oom;
        }
        cJSON_AddNumberToObject(e, "bytes", (double)s->bytes);
        cJSON_AddNumberToObject(e, "count", (double)s->count);
        cJSON_AddNumberToObject(e, "time_us", t);
        cJSON_AddNumberToObject(e, "algbw_gbs", alg);
        cJSON_AddNumberToObject(e, "busbw_gbs", bus);
        cJSON_AddBoolToObject(e, "ok", s->ok);
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddStringToObject(o, "kind", "allreduce");
    cJSON_AddStringToObject(o, "backend", ops->name);
    cJSON_AddStringToObject(o, "device_model", info.device_model);
    cJSON_AddNumberToObject(o, "n_devices", world);
    cJSON_AddStringToObject(o, "precision", "fp32");
    cJSON_AddBoolToObject(o, "valid", wrong == 0);
    if (wrong) {
        char reason[160];
        snprintf(reason, sizeof(reason), "wrong results at %d of %d sizes (the first at %zu bytes)",
                 wrong, n, first_wrong);
        cJSON_AddStringToObject(o, "invalid_reason", reason);
    } else {
        cJSON_AddNullToObject(o, "invalid_reason");
    }
    cJSON *ver = cJSON_Parse(info.versions);
    if (!cJSON_IsObject(ver)) {
        cJSON_Delete(ver);
        ver = cJSON_CreateObject();
    }
    cJSON_AddStringToObject(ver, "gpubench", GB_VERSION);
    cJSON_AddItemToObject(o, "versions", ver);
    cJSON *det = r0->details ? cJSON_Parse(r0->details) : NULL;
    if (!cJSON_IsObject(det)) {
        cJSON_Delete(det);
        det = cJSON_CreateObject();
    }
    char ic[32];
    const cJSON *bic = cJSON_GetObjectItemCaseSensitive(det, "interconnect");
    snprintf(ic, sizeof(ic), "%s",
             cJSON_IsString(bic) ? bic->valuestring
             : world == 1        ? "none"
             : nodes > 1         ? "tcp"
                                 : "shm");
    cJSON_DeleteItemFromObjectCaseSensitive(det, "interconnect");
    cJSON_AddStringToObject(det, "op", "sum");
    cJSON_AddStringToObject(det, "dtype", "float32");
    cJSON_AddBoolToObject(det, "in_place", 1);
    cJSON_AddNumberToObject(det, "iters", cfg->iters);
    cJSON_AddNumberToObject(det, "warmup", cfg->warmup);
    cJSON_AddNumberToObject(det, "min_bytes", (double)cfg->min_bytes);
    cJSON_AddNumberToObject(det, "max_bytes", (double)cfg->max_bytes);
    cJSON_AddNumberToObject(det, "peak_busbw_gbs", peak);
    cJSON_AddNumberToObject(det, "wrong_sizes", wrong);
    cJSON_AddStringToObject(det, "time", "slowest replica's mean per operation");
    cJSON_AddItemToObject(o, "details", det);
    cJSON_AddStringToObject(o, "interconnect", ic);
    cJSON_AddItemToObject(o, "sizes", arr);
    /* the timed window: every replica's sizes, rendezvous and setup left
     * out, so the telemetry judges the all-reduces alone */
    int64_t w0 = 0, w1 = 0;
    for (int d = 0; d < D; d++) {
        int64_t a = reps[d].sizes[0].window_ms[0], b = reps[d].sizes[n - 1].window_ms[1];
        if (a > 0 && (w0 == 0 || a < w0)) w0 = a;
        if (b > w1) w1 = b;
    }
    if (w0 > 0 && w1 >= w0) {
        cJSON *w = cJSON_AddArrayToObject(o, "timed_window_ms");
        if (!w) goto oom;
        cJSON_AddItemToArray(w, cJSON_CreateNumber((double)w0));
        cJSON_AddItemToArray(w, cJSON_CreateNumber((double)w1));
    }
    *record_json = cJSON_PrintUnformatted(o);
    if (!*record_json) goto oom;
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "out of memory building the result record");
done:
    cJSON_Delete(o);
    for (int d = 0; reps && d < D; d++)
        free(reps[d].details);
    free(reps);
    gb_crew_free(&crew);
    gb_comm_group_destroy(&grp);
    return rc;
}
