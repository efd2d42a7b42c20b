/* worker.c - see worker.h. One table of job kinds; each run function fills
 * the kind-specific part of the record and returns 0, or -1 with a reason.
 * The driver (gb_worker_run) reads the job, adds the common keys, decides
 * validity, and writes the record. The worker is the one place that may
 * exit on error: it is a child process and a dead worker is a failed job. */
#define _POSIX_C_SOURCE 200809L
#include "worker.h"

#include "dist.h"
#include "engine_stats.h"
#include "gb_log.h"
#include "gb_spec.h"
#include "gb_sysinfo.h"
#include "gb_util.h"
#include "gemm_cpu.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <oneapi/dnnl/dnnl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef GB_HAVE_ENGINE
#include "engine.h"
#endif

#ifndef GB_VERSION
#define GB_VERSION "unknown"
#endif

#define JOB_FILE_MAX (1u << 20)

typedef struct job {
    uint64_t job_id;
    uint32_t attempt;
    gb_jobdef_t def;
    gb_dist_t *dist; /* a rank of a multi-node job, or NULL */
} job_t;

typedef int (*kind_fn)(const job_t *job, cJSON *rec, char *err, size_t errlen);

/* A kind's return for a failure that left a replica's thread running (the
 * engine's GB_STRANDED): after the failure's record the process ends at
 * once, with _exit, since that thread still holds the job's memory and
 * whatever locks it was blocked under. */
#define KIND_STRANDED (-2)

static int run_gemm(const job_t *job, cJSON *rec, char *err, size_t errlen);
static int run_sleep(const job_t *job, cJSON *rec, char *err, size_t errlen);
static int run_resnet50(const job_t *job, cJSON *rec, char *err, size_t errlen);
static int run_allreduce(const job_t *job, cJSON *rec, char *err, size_t errlen);

static const struct {
    const char *name;
    kind_fn run;
} kinds[] = {
    {"allreduce", run_allreduce},
    {"gemm", run_gemm},
    {"resnet50", run_resnet50},
    {"sleep", run_sleep},
};

const char *gb_worker_kinds(void) {
    return "allreduce,gemm,resnet50,sleep";
}

int gb_worker_has_engine(void) {
#ifdef GB_HAVE_ENGINE
    return 1;
#else
    return 0;
#endif
}

int gb_worker_cpu_bf16(void) {
    return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16;
}

/* What the CPU computes in, for every kind (a build without the training
 * engine still runs gemm in bf16; its resnet50 jobs fail in any precision). */
const char *gb_worker_cpu_precisions(void) {
    return gb_worker_cpu_bf16() ? "fp32,bf16" : "fp32";
}

#ifdef GB_HAVE_ENGINE
/* Every member of src into dst, replacing those of the same name. */
static void move_items(cJSON *dst, cJSON *src) {
    for (cJSON *it = src->child; it;) {
        cJSON *next = it->next;
        cJSON *moved = cJSON_DetachItemViaPointer(src, it);
        cJSON_DeleteItemFromObjectCaseSensitive(dst, moved->string);
        cJSON_AddItemToObject(dst, moved->string, moved);
        it = next;
    }
}
#endif

/* gpubench's version, and the libraries a kind used: oneDNN and the ISA it
 * ran for CPU gemm (the engine's kinds put their own in their record; a
 * sleep uses none). */
static void add_versions(cJSON *rec, const char *kind, const char *backend) {
    cJSON *v = cJSON_AddObjectToObject(rec, "versions");
    if (!v) return;
    cJSON_AddStringToObject(v, "gpubench", GB_VERSION);
    if (strcmp(kind, "gemm") != 0 || strcmp(backend, "cpu") != 0) return;
#ifdef GB_HAVE_ENGINE
    char why[256];
    gb_backend_info_t info;
    const gb_backend_ops_t *ops = gb_backend_get("cpu", why, sizeof why);
    cJSON *lib = ops && ops->probe(&info, why, sizeof why) == 0 ? cJSON_Parse(info.versions) : NULL;
    if (cJSON_IsObject(lib)) {
        move_items(v, lib);
        cJSON_Delete(lib);
        return;
    }
    cJSON_Delete(lib);
#endif
    const dnnl_version_t *dv = dnnl_version();
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", dv->major, dv->minor, dv->patch);
    cJSON_AddStringToObject(v, "onednn", s);
}

/* The timed window (docs/result-record.md): CLOCK_REALTIME ms of the start
 * and end of what was timed, for the agent's telemetry. */
static void add_window(cJSON *rec, int64_t start_ms, int64_t end_ms) {
    cJSON *w = cJSON_AddArrayToObject(rec, "timed_window_ms");
    if (!w) return;
    cJSON_AddItemToArray(w, cJSON_CreateNumber((double)start_ms));
    cJSON_AddItemToArray(w, cJSON_CreateNumber((double)end_ms));
}

static void add_validity(cJSON *rec, double median, double p90) {
    char why[256];
    if (!gb_spread_ok("time", median, p90, why, sizeof why)) {
        cJSON_AddBoolToObject(rec, "valid", 0);
        cJSON_AddStringToObject(rec, "invalid_reason", why);
    } else {
        cJSON_AddBoolToObject(rec, "valid", 1);
        cJSON_AddNullToObject(rec, "invalid_reason");
    }
}

/* ---- gemm ----------------------------------------------------------------- */

static int run_gemm(const job_t *job, cJSON *rec, char *err, size_t errlen) {
    const gb_jobdef_t *d = &job->def;
    double median = 0, p90 = 0, gflops = 0;
    /* a job from a coordinator older than gemm's precision has none: fp32 */
    const char *prec = d->precision[0] ? d->precision : "fp32";
    cJSON *details = cJSON_AddObjectToObject(rec, "details");
    if (strcmp(d->backend, "cuda") == 0) {
#ifdef GB_HAVE_ENGINE
        gb_precision_t p;
        if (gb_precision_parse(prec, &p) != 0) {
            gb_fmt(err, errlen, "unknown precision '%s'", prec);
            return -1;
        }
        const gb_backend_ops_t *ops = gb_backend_get("cuda", err, errlen);
        if (!ops) return -1;
        gb_backend_info_t info;
        if (ops->probe(&info, err, errlen) != 0) return -1;
        if (!ops->gemm) {
            gb_fmt(err, errlen, "the cuda backend has no gemm op");
            return -1;
        }
        /* telemetry is judged over the backend's timed runs only: the set-up
         * before them (host inputs, context, upload, warm-up) leaves the GPU
         * idle or changing power state, which would read as throttling */
        int64_t win[2] = {0, 0};
        if (ops->gemm(0, p, d->m, d->n, d->k, d->reps, &median, &p90, &gflops, win, err, errlen) !=
            0)
            return -1;
        add_window(rec, win[0], win[1]);
        cJSON_AddNumberToObject(details, "ms_p90", p90);
        cJSON_AddStringToObject(rec, "device_model", info.device_model);
        char impl[64];
        if (p == GB_PREC_FP32)
            gb_fmt(impl, sizeof impl, "cublas sgemm");
        else if (p == GB_PREC_TF32)
            gb_fmt(impl, sizeof impl, "cublas gemm tf32");
        else
            gb_fmt(impl, sizeof impl, "cublas gemm %s in, fp32 accumulate and out", prec);
        cJSON_AddStringToObject(details, "impl", impl);
#else
        gb_fmt(err, errlen,
               "cuda backend not available: this gpubench was built without the "
               "training engine (GB_HAVE_ENGINE)");
        return -1;
#endif
    } else {
        int bf16 = strcmp(prec, "bf16") == 0;
        if (!bf16 && strcmp(prec, "fp32") != 0) {
            gb_fmt(err, errlen,
                   "gemm in %s: the CPU's gemm runs in fp32 (oneDNN's sgemm) and bf16 (its "
                   "matmul) only (run it with backend cuda)",
                   prec);
            return -1;
        }
        gb_gemm_out_t g;
        int warmup = d->reps < 2 ? d->reps : 2;
        if (gb_gemm_cpu(d->m, d->n, d->k, bf16, warmup, d->reps, &g, err, errlen) != 0) return -1;
        median = g.ms_median;
        p90 = g.ms_p90;
        add_window(rec, g.window_ms[0], g.window_ms[1]);
        gflops = g.gflops;
        char cpu[256];
        gb_sys_cpu_model(cpu, sizeof cpu);
        cJSON_AddStringToObject(rec, "device_model", cpu);
        cJSON_AddStringToObject(details, "impl", g.impl);
        cJSON_AddNumberToObject(details, "threads", g.threads);
        cJSON_AddNumberToObject(details, "warmup", g.warmup);
        cJSON_AddNumberToObject(details, "verified_entries", g.checked);
        cJSON_AddNumberToObject(details, "ms_min", g.ms_min);
        cJSON_AddNumberToObject(details, "ms_max", g.ms_max);
        cJSON_AddNumberToObject(details, "ms_p90", g.ms_p90);
        cJSON *samples = cJSON_AddArrayToObject(details, "ms_samples");
        for (int i = 0; samples && i < d->reps; i++)
            cJSON_AddItemToArray(samples, cJSON_CreateNumber(g.ms[i]));
        free(g.ms);
    }
    cJSON_AddNumberToObject(rec, "n_devices", 1);
    cJSON_AddStringToObject(rec, "precision", prec);
    add_validity(rec, median, p90);
    cJSON_AddNumberToObject(rec, "m", d->m);
    cJSON_AddNumberToObject(rec, "n", d->n);
    cJSON_AddNumberToObject(rec, "k", d->k);
    cJSON_AddNumberToObject(rec, "reps", d->reps);
    cJSON_AddNumberToObject(rec, "ms_median", median);
    cJSON_AddNumberToObject(rec, "gflops", gflops);
    return 0;
}

/* ---- sleep (control-plane test kind) -------------------------------------- */

/* The sleep kind's test hooks: fail or raise a signal at `at` ("end" after
 * sleeping, "rendezvous" before the id / ready) on fail_rank (-1: any). */
static int sleep_hook(const gb_jobdef_t *d, int rank, const char *at, char *err, size_t errlen) {
    if (strcmp(d->fail_at, at) != 0 || (d->fail_rank >= 0 && d->fail_rank != rank)) return 0;
    if (d->signal) {
        fprintf(stderr, "sleep: rank %d raising signal %d at %s as asked\n", rank, d->signal, at);
        fflush(stderr);
        raise(d->signal);
    }
    if (d->fail[0]) {
        gb_fmt(err, errlen, "%s", d->fail);
        return -1;
    }
    return 0;
}

/* A rank of a multi-node sleep job: rank 0 makes an id and hands it up,
 * the others check that theirs is rank 0's of this very attempt; then every
 * rank waits for the common start time. */
static int sleep_rendezvous(const job_t *job, char *err, size_t errlen) {
    gb_dist_t *dist = job->dist;
    if (sleep_hook(&job->def, dist->rank, "rendezvous", err, errlen) != 0) return -1;
    if (dist->rank == 0) {
        unsigned char id[GB_SLEEP_ID_LEN];
        if (gb_sleep_id_make(job->job_id, job->attempt, id, err, errlen) != 0 ||
            dist->publish_id(dist, id, sizeof id, err, errlen) != 0)
            return -1;
    } else if (gb_sleep_id_check(dist->unique_id, dist->unique_id_len, job->job_id, job->attempt,
                                 err, errlen) != 0) {
        return -1;
    }
    fprintf(stderr, "sleep: rank %d of %d node(s), world size %d, id checked: waiting to start\n",
            dist->rank, dist->n_nodes, dist->world_size);
    return dist->wait_start(dist, err, errlen);
}

static int run_sleep(const job_t *job, cJSON *rec, char *err, size_t errlen) {
    const gb_jobdef_t *d = &job->def;
    if (job->dist && sleep_rendezvous(job, err, errlen) != 0) return -1;
    int64_t t0 = gb_mono_ms(), w0 = gb_wall_ms();
    struct timespec ts = {d->duration_ms / 1000, (long)(d->duration_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    int64_t slept = gb_mono_ms() - t0;
    add_window(rec, w0, gb_wall_ms());
    fprintf(stderr, "sleep: slept %lld ms\n", (long long)slept);
    if (sleep_hook(d, job->dist ? job->dist->rank : 0, "end", err, errlen) != 0) return -1;
    /* the device the job was placed on: the CPU's model for a cpu job; a
     * GPU job's sleep touches no GPU, and the CPU's model would be shown as
     * its gpu_model (v_results): say that no GPU was used */
    char cpu[256];
    if (strcmp(d->backend, "cpu") == 0)
        gb_sys_cpu_model(cpu, sizeof cpu);
    else
        gb_copy(cpu, sizeof cpu, "none (the sleep kind uses no GPU)");
    cJSON_AddStringToObject(rec, "device_model", cpu);
    cJSON_AddNumberToObject(rec, "n_devices", job->dist ? job->dist->world_size : d->gpus);
    cJSON_AddNullToObject(rec, "precision");
    /* a sleep measures nothing: it is valid, and the agent's telemetry
     * (a throttled GPU, others taking the CPU) is recorded but does not
     * judge it, unless the test hook judge_telemetry asks */
    cJSON_AddBoolToObject(rec, "valid", 1);
    cJSON_AddNullToObject(rec, "invalid_reason");
    cJSON_AddBoolToObject(rec, "judge_telemetry", d->judge_telemetry);
    cJSON_AddBoolToObject(rec, "synthetic", 1);
    cJSON_AddNumberToObject(rec, "duration_ms", d->duration_ms);
    cJSON_AddNumberToObject(rec, "slept_ms", (double)slept);
    return 0;
}

/* ---- resnet50 ------------------------------------------------------------- */

#ifdef GB_HAVE_ENGINE
/* The engine's record is the record: move its keys over ours. */
static int merge_record(cJSON *rec, const char *engine_json, char *err, size_t errlen) {
    cJSON *engine_rec = engine_json ? cJSON_Parse(engine_json) : NULL;
    if (!cJSON_IsObject(engine_rec)) {
        cJSON_Delete(engine_rec);
        gb_fmt(err, errlen, "the engine returned no result record");
        return -1;
    }
    move_items(rec, engine_rec);
    cJSON_Delete(engine_rec);
    return 0;
}
#endif

static int run_resnet50(const job_t *job, cJSON *rec, char *err, size_t errlen) {
#ifdef GB_HAVE_ENGINE
    const gb_jobdef_t *d = &job->def;
    gb_train_config_t cfg;
    gb_train_config_default(&cfg);
    gb_copy(cfg.backend, sizeof cfg.backend, d->backend);
    if (gb_precision_parse(d->precision, &cfg.precision) != 0) {
        gb_fmt(err, errlen, "unknown precision '%s'", d->precision);
        return -1;
    }
    gb_model_config_resnet50(&cfg.model, d->image_size);
    cfg.batch = d->batch;
    cfg.devices = d->gpus;
    cfg.steps = d->steps;
    cfg.warmup = d->warmup;
    cfg.bucket_mb = d->bucket_mb;
    gb_copy(cfg.interconnect, sizeof cfg.interconnect, d->interconnect);
    if (d->launch[0]) gb_copy(cfg.launch, sizeof cfg.launch, d->launch);
    cfg.dist = job->dist; /* NULL on one node */
    gb_train_result_t res;
    int trc = gb_train_run(&cfg, &res, err, errlen);
    if (trc == GB_STRANDED) return KIND_STRANDED;
    if (trc != 0) {
        gb_train_result_free(&res);
        return -1;
    }
    int rc = merge_record(rec, res.record_json, err, errlen);
    gb_train_result_free(&res);
    return rc;
#else
    (void)job;
    (void)rec;
    gb_fmt(err, errlen, "resnet50 engine not built");
    return -1;
#endif
}

/* ---- allreduce ------------------------------------------------------------ */

static int run_allreduce(const job_t *job, cJSON *rec, char *err, size_t errlen) {
#ifdef GB_HAVE_ENGINE
    const gb_jobdef_t *d = &job->def;
    gb_allreduce_config_t cfg;
    gb_allreduce_config_default(&cfg);
    gb_copy(cfg.backend, sizeof cfg.backend, d->backend);
    cfg.devices = d->gpus;
    cfg.min_bytes = (size_t)d->min_bytes;
    cfg.max_bytes = (size_t)d->max_bytes;
    cfg.iters = d->iters;
    cfg.warmup = d->warmup;
    gb_copy(cfg.interconnect, sizeof cfg.interconnect, d->interconnect);
    cfg.dist = job->dist; /* NULL on one node */
    char *text = NULL;
    int arc = gb_allreduce_run(&cfg, &text, err, errlen);
    if (arc != 0) return arc == GB_STRANDED ? KIND_STRANDED : -1;
    int rc = merge_record(rec, text, err, errlen);
    free(text);
    return rc;
#else
    (void)job;
    (void)rec;
    gb_fmt(err, errlen, "allreduce: the engine is not built");
    return -1;
#endif
}

/* ---- driver --------------------------------------------------------------- */

static int write_record(const char *path, cJSON *rec) {
    char *text = cJSON_PrintUnformatted(rec);
    char err[512];
    if (!text) {
        fprintf(stderr, "worker: out of memory writing the record\n");
        return -1;
    }
    /* in place: the agent reserved the file's blocks before the start, so a
     * disk that filled during the run does not cost the measurement */
    int rc = gb_write_file_in_place(path, text, strlen(text), err, sizeof err);
    if (rc != 0) fprintf(stderr, "worker: %s\n", err);
    free(text);
    return rc;
}

static int fail_record(const char *out_path, const char *kind, const char *msg) {
    fprintf(stderr, "worker: error: %s\n", msg);
    cJSON *rec = cJSON_CreateObject();
    if (rec) {
        cJSON_AddStringToObject(rec, "kind", kind ? kind : "");
        cJSON_AddStringToObject(rec, "error", msg);
        write_record(out_path, rec);
        cJSON_Delete(rec);
    }
    return 1;
}

/* A rank of a multi-node job: its "dist" object, which must agree with the
 * parameters. */
static int read_dist(const cJSON *djson, job_t *job, gb_dist_t *dist, gb_dist_chan_t *chan,
                     char *err, size_t errlen) {
    if (gb_dist_from_json(djson, job->def.gpus, dist, chan, err, errlen) != 0) return -1;
    if (dist->n_nodes != job->def.n_nodes) {
        gb_fmt(err, errlen, "job file: dist.n_nodes %d but the parameters say %d", dist->n_nodes,
               job->def.n_nodes);
        return -1;
    }
    job->dist = dist;
    return 0;
}

static int read_job(const char *path, job_t *job, gb_dist_t *dist, gb_dist_chan_t *chan, char *err,
                    size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    if (gb_read_file(path, JOB_FILE_MAX, &text, &len, err, errlen) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    int rc = -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "job_id");
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(root, "attempt");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    const cJSON *djson = cJSON_GetObjectItemCaseSensitive(root, "dist");
    if (!cJSON_IsObject(root) || !cJSON_IsNumber(id) || !cJSON_IsNumber(att) ||
        !cJSON_IsObject(params)) {
        gb_fmt(err, errlen, "%s is not a job file ({\"job_id\", \"attempt\", \"params\"})", path);
        goto out;
    }
    job->job_id = (uint64_t)id->valuedouble;
    job->attempt = (uint32_t)att->valuedouble;
    char *ptext = cJSON_PrintUnformatted(params);
    if (!ptext) {
        gb_fmt(err, errlen, "out of memory");
        goto out;
    }
    char why[512];
    if (gb_jobdef_from_json(ptext, strlen(ptext), &job->def, why, sizeof why) != 0)
        gb_fmt(err, errlen, "bad job parameters: %s", why);
    else if (strcmp(job->def.backend, "auto") == 0)
        gb_fmt(err, errlen, "bad job parameters: backend must be resolved (cpu or cuda)");
    else if ((job->def.n_nodes > 1) != (djson != NULL))
        gb_fmt(err, errlen, "job file: a job over %d node(s) %s", job->def.n_nodes,
               djson ? "takes no 'dist'" : "needs its rank in 'dist'");
    else
        rc = djson ? read_dist(djson, job, dist, chan, err, errlen) : 0;
    free(ptext);
out:
    cJSON_Delete(root);
    return rc;
}

int gb_worker_run(const char *job_path, const char *out_path) {
    gb_log_set_component("worker");
    job_t job;
    gb_dist_t dist;
    gb_dist_chan_t chan;
    char err[1024];
    memset(&job, 0, sizeof job);
    if (read_job(job_path, &job, &dist, &chan, err, sizeof err) != 0) {
        fail_record(out_path, NULL, err);
        return 2;
    }
    kind_fn run = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, job.def.kind) == 0) run = kinds[i].run;
    if (!run) {
        gb_fmt(err, sizeof err, "unknown job kind '%s' (this worker runs %s)", job.def.kind,
               gb_worker_kinds());
        return fail_record(out_path, job.def.kind, err);
    }
    fprintf(stderr, "worker: job %llu attempt %u: %s on %s\n", (unsigned long long)job.job_id,
            job.attempt, job.def.kind, job.def.backend);
    cJSON *rec = cJSON_CreateObject();
    if (!rec) return fail_record(out_path, job.def.kind, "out of memory");
    cJSON_AddStringToObject(rec, "kind", job.def.kind);
    cJSON_AddStringToObject(rec, "backend", job.def.backend);
    add_versions(rec, job.def.kind, job.def.backend);
    err[0] = '\0';
    int krc = run(&job, rec, err, sizeof err);
    if (krc != 0) {
        cJSON_Delete(rec);
        int frc = fail_record(out_path, job.def.kind, err[0] ? err : "the job failed");
        if (krc == KIND_STRANDED) {
            fprintf(stderr, "worker: ending the process with the replica still running\n");
            fflush(NULL);
            _exit(frc);
        }
        return frc;
    }
    if (job.dist) {
        /* a rank that never went through the start barrier did not run with
         * the others: its figures are not the job's */
        if (!chan.waited || job.dist->started_at_ms == 0) {
            cJSON_Delete(rec);
            gb_fmt(err, sizeof err,
                   "the %s job never reached the start barrier: this build's %s does not support "
                   "multi-node jobs",
                   job.def.kind,
                   strcmp(job.def.kind, "resnet50") == 0 ? "training engine" : "job kind");
            return fail_record(out_path, job.def.kind, err);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(rec, "dist");
        gb_dist_record(job.dist, rec);
    }
    int rc = write_record(out_path, rec) == 0 ? 0 : 1;
    cJSON_Delete(rec);
    return rc;
}
