/* engine.h - the training engine's contract: one driver, several backends.
 *
 * The driver (engine.c) owns everything that is the same on every backend:
 * the model description, the canonical parameter/buffer slabs, weight init or
 * --load, synthetic data or --data, warm-up, timing, statistics, validity,
 * --save / --save-grads and the JSON result record (docs/result-record.md).
 * A backend fills a gb_backend_ops_t and does only the computation of one
 * replica: forward, loss, backward, (gradient all-reduce), SGD update.
 *
 * The CPU backend (kernels/cpu, oneDNN) is linked into gpubench. The CUDA
 * backend (kernels/cuda) is libgpubench_cuda.so, loaded with dlopen by
 * gb_backend_get("cuda") only when a GPU job runs; it exports one symbol,
 * gb_cuda_backend_ops (a const gb_backend_ops_t), whose `abi` must equal
 * GB_BACKEND_ABI.
 *
 * Conventions: functions return 0 on success and -1 on failure, writing a
 * one-line reason into err (GB_ERR_LEN bytes). Canonical slabs are laid out as
 * model.h describes (torchvision state_dict order and shapes). Images are
 * (N, 3, H, W) float32 NCHW on the host; labels int32 in [0, classes).
 */
#ifndef GB_ENGINE_H
#define GB_ENGINE_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

#define GB_BACKEND_ABI                                                                             \
    7 /* 2: the allreduce op; 3: gemm's timed window; 4: allreduce's;                              \
       5: gemm's p90; 6: the train config's launch, first_device, node_devices;                    \
       7: gemm's precision */
#define GB_ERR_LEN 512

typedef enum {
    GB_PREC_FP32 = 0, /* fp32 everywhere (TF32 off on GPUs) */
    GB_PREC_TF32,     /* fp32 storage, TF32 tensor-core math (GPU only) */
    GB_PREC_FP16,     /* fp16 compute, fp32 master weights, dynamic loss scaling (GPU) */
    GB_PREC_BF16,     /* bf16 compute, fp32 master weights */
} gb_precision_t;

/* "fp32" "tf32" "fp16" "bf16"; parse returns -1 on an unknown name. */
const char *gb_precision_name(gb_precision_t p);
int gb_precision_parse(const char *s, gb_precision_t *out);
/* CLOCK_REALTIME ms: the clock of timed windows (the agent's telemetry is
 * cut to them). */
int64_t gb_engine_wall_ms(void);

/* Host memory this process can still be given: MemAvailable, or less where
 * a cgroup (v2 or v1) limit leaves less; *what names which. UINT64_MAX when
 * unknown or when GB_CPU_MEM_CHECK=0 (the memory checks before a run are
 * then off). */
/* The CPUs this process may run on (its affinity mask: taskset, a cpuset);
 * the online ones where that cannot be read. What --threads 0 takes: every
 * online core under taskset -c 0 made threads that contend. */
int gb_cpus_usable(void);
uint64_t gb_mem_available(const char **what);
/* The least memory any cgroup of this process leaves (limit less usage
 * less page cache), reading proc_cgroup (/proc/self/cgroup) and the
 * cgroup tree at sysfs (/sys/fs/cgroup); UINT64_MAX without a limit. */
uint64_t gb_cgroup_left(const char *proc_cgroup, const char *sysfs);

/* Multi-node data parallelism: coordinator-relayed. A job over n_nodes
 * agents runs one worker per node (a *rank*), each driving `devices`
 * replicas; the coordinator carries rank 0's unique id (ncclGetUniqueId's
 * bytes on GPUs, the CPU all-reduce's TCP address and nonce on CPUs) to the
 * other ranks and starts every rank at one time. The worker fills this from
 * its job file and passes it in gb_train_config_t.dist; the engine:
 *   - on rank 0: makes the id and calls publish_id once, before wait_start;
 *   - on every rank: calls wait_start once, after its setup and before the
 *     first collective (ncclCommInitRank included: it blocks until every
 *     rank joins), and begins the warm-up when it returns;
 *   - on ranks > 0: reads unique_id only after wait_start returned (a
 *     replica process is given it with the start: launch.h);
 *   - gives local replica d the global rank rank * devices + d of
 *     world_size, and reports global figures (images/s over the global
 *     batch, n_devices = world_size) in rank 0's record.
 * A job whose engine never calls wait_start fails ("does not support
 * multi-node jobs"); so does one whose rank 0 never publishes an id (the
 * coordinator's rendezvous deadline). Both callbacks return 0, or -1 with a
 * reason in err (the coordinator is gone, the job was cancelled). */
#define GB_DIST_ID_MAX 128 /* NCCL_UNIQUE_ID_BYTES */

typedef struct gb_dist {
    int rank;                                /* this worker's node rank, 0..n_nodes-1 */
    int n_nodes;                             /* ranks (nodes) in the job, > 1 */
    int world_size;                          /* devices in the job: n_nodes * devices per node */
    unsigned char unique_id[GB_DIST_ID_MAX]; /* ranks > 0: rank 0's id as relayed; rank 0:
                                                what it published */
    size_t unique_id_len;                    /* 1..GB_DIST_ID_MAX; 0 on rank 0 before publish_id */
    int64_t start_at_ms;                     /* set by wait_start: the job's start time (Unix ms) */
    int64_t started_at_ms;                   /* set by wait_start: when this rank went (Unix ms) */
    int (*publish_id)(struct gb_dist *self, const unsigned char *id, size_t len, char *err,
                      size_t errlen);
    int (*wait_start)(struct gb_dist *self, char *err, size_t errlen);
    void *ctx; /* the worker's */
} gb_dist_t;

typedef struct gb_train_config {
    char backend[16]; /* "cpu", "cuda" or "auto" (cuda when a GPU is usable) */
    gb_precision_t precision;
    gb_model_config_t model;          /* ResNet-50 at image_size by default */
    int batch;                        /* per device (replica), as in every published table */
    int devices;                      /* replicas: GPUs, or CPU replicas splitting the cores */
    int steps, warmup;                /* timed steps, untimed warm-up steps */
    int threads;                      /* CPU threads in all (0: every online core) */
    float lr, momentum, weight_decay; /* torch.optim.SGD semantics */
    uint64_t seed;                    /* weights (unless --load) and synthetic data */
    double bucket_mb;                 /* gradient all-reduce bucket size (data parallel) */
    char interconnect[16];            /* "auto", "nvlink", "pcie" (multi-GPU) */
    const char *load_path;            /* safetensors with parameters and running stats, or NULL */
    const char *data_path; /* safetensors with images (N,3,H,W) f32, labels (N) i64, or NULL */
    const char *save_path; /* safetensors of parameters + buffers after the run, or NULL */
    const char *save_grads_path; /* safetensors of the last step's gradients, or NULL */
    int cuda_graph;              /* 1: capture the step in a CUDA graph where possible */
    gb_dist_t *dist;             /* NULL: one node; else a rank of a multi-node job (gb_dist_t) */
    /* How a node's replicas run (devices > 1): "threads" of this process,
     * "processes" (one process per replica, as NCCL recommends for CUDA
     * graphs: see gb_train_run), or "auto" (processes for the CUDA backend,
     * threads for the CPU one) */
    char launch[16];
    /* Set by the launcher in a replica process, 0 otherwise: the device
     * ordinal of this process's replica 0, and the job's devices on this
     * node (0: devices), over which the interconnect is checked and set */
    int first_device;
    int node_devices;
} gb_train_config_t;

/* Defaults: cpu, fp32, ResNet-50 at 224, batch 32, 1 device, 20 steps, 3
 * warm-up, lr 0.1, momentum 0.9, weight decay 1e-4, seed 1, 25 MB buckets. */
void gb_train_config_default(gb_train_config_t *cfg);

/* What one step of one replica reports. */
typedef struct gb_step_out {
    float loss;  /* mean cross-entropy over this replica's batch (before loss scaling) */
    double ms;   /* device-timed step time (CUDA events); < 0 when the backend has no
                    device timer and the driver's wall clock is used */
    int skipped; /* 1 when fp16 loss scaling found an overflow and skipped the update */
    /* 1 when this step's update left a parameter that is not finite (NaN or
     * inf: the run diverged). A backend whose parameters are not finite
     * reports the loss of its later steps as NaN, as torch computes it
     * (ReLU and max pool turn NaN into 0, and the loss looked finite) */
    int nonfinite;
} gb_step_out_t;

/* Backend facts for the result record. Strings are NUL-terminated. */
typedef struct gb_backend_info {
    char device_model[128]; /* GPU name, or the CPU model for the CPU backend */
    int device_count;       /* usable devices (GPUs; 1 for the CPU) */
    char versions[512];     /* JSON object text: {"onednn":"2.6.3","isa":"..."} */
} gb_backend_info_t;

/* Per-replica report after the run. */
typedef struct gb_replica_report {
    size_t peak_mem_bytes; /* device memory peak (GPU) or bytes the backend allocated (CPU) */
    char *details_json; /* malloc'd JSON object text (algorithms, impls), or NULL; driver frees */
} gb_replica_report_t;

/* The collective over the replicas of one job (threads on the CPU, NCCL on
 * GPUs; comm.h defines it); NULL for a single replica on one node. A
 * backend given one averages the gradients of every step over the job's
 * replicas (bit-identical on all of them) before its update. */
typedef struct gb_comm gb_comm_t;

/* The `allreduce` job kind, as nccl-tests' all_reduce_perf: float sum, in
 * place, message sizes from min_bytes doubling up to max_bytes; per size
 * `warmup` untimed then `iters` timed all-reduces, then a correctness check
 * on known inputs (replica g's element i: ((7i + 3g) mod 11) - 5, so every
 * sum is exact in f32 whatever the order). */
typedef struct gb_allreduce_config {
    char backend[16];            /* "cpu", "cuda" or "auto" */
    int devices;                 /* replicas (GPUs or CPU threads) per node */
    size_t min_bytes, max_bytes; /* multiples of 4, 4 <= min <= max <= 2^34 */
    int iters, warmup;           /* per size */
    int threads;                 /* CPU threads in all (0: every online core) */
    char interconnect[16];       /* "auto", "nvlink", "pcie" */
    gb_dist_t *dist;             /* as in gb_train_config_t */
    int fault_rank; /* tests: -1, else this global rank's check input has one wrong element */
} gb_allreduce_config_t;

/* Defaults: cpu, 1 device, 8 B to 1 GiB, 20 iterations after 3 warm-up ones. */
void gb_allreduce_config_default(gb_allreduce_config_t *cfg);

/* One message size of the sweep. */
typedef struct gb_allreduce_size {
    size_t bytes, count; /* count = bytes / 4 floats */
    double time_us;      /* per all-reduce: the slowest replica's mean over the timed iterations */
    double algbw_gbs;    /* bytes / time, 1e9 bytes/s */
    double busbw_gbs;    /* algbw * 2 (n - 1) / n, n = the job's replicas */
    int ok;              /* every replica's result equal to the exact sum */
    /* CLOCK_REALTIME ms (gb_engine_wall_ms) when this replica began this
     * size's warm-up and ended its check: the record's timed window runs
     * from the first size's start to the last size's end, after the
     * rendezvous and the setup (0: the backend did not say) */
    int64_t window_ms[2];
} gb_allreduce_size_t;

typedef struct gb_backend_ops {
    int abi; /* GB_BACKEND_ABI */
    const char *name;
    /* Facts about the machine for this backend; -1 when it cannot run here
     * (no driver, no GPU) with the reason in err. */
    int (*probe)(gb_backend_info_t *info, char *err, size_t errlen);
    /* One replica on device `replica` (GPU ordinal; CPU replica index), all
     * memory allocated here, none during steps. */
    int (*create)(const gb_model_t *m, const gb_train_config_t *cfg, int replica, gb_comm_t *comm,
                  void **state, char *err, size_t errlen);
    /* Canonical slabs in and out; nbt is num_batches_tracked. */
    int (*set_state)(void *state, const float *params, const float *buffers, int64_t nbt, char *err,
                     size_t errlen);
    int (*get_state)(void *state, float *params, float *buffers, int64_t *nbt, char *err,
                     size_t errlen);
    /* Gradients of the last step (after averaging over replicas), canonical. */
    int (*get_grads)(void *state, float *grads, char *err, size_t errlen);
    /* This replica's batch: `batch` images and labels, kept until replaced. */
    int (*set_batch)(void *state, const float *images, const int32_t *labels, char *err,
                     size_t errlen);
    /* One training step on the current batch. */
    int (*step)(void *state, gb_step_out_t *out, char *err, size_t errlen);
    int (*report)(void *state, gb_replica_report_t *rep, char *err, size_t errlen);
    void (*destroy)(void **state);
    /* GEMM throughput probe C = A*B (m x k times k x n) in `prec`: fp32
     * (TF32 off), tf32 (fp32 data, TF32 math), fp16 or bf16 (16-bit A and B,
     * fp32 accumulation and C); a precision the backend has not: -1, said
     * in err. Median and 90th percentile (nearest rank; may be NULL) of
     * `reps` timed runs after warm-up; window_ms (may be NULL):
     * wall-clock ms (CLOCK_REALTIME) at the start of the first timed run
     * and the end of the last, the window telemetry is judged over (not the
     * set-up, the upload or the warm-up); NULL when unsupported. */
    int (*gemm)(int device, gb_precision_t prec, int m, int n, int k, int reps, double *ms_median,
                double *ms_p90, double *gflops, int64_t window_ms[2], char *err, size_t errlen);
    /* One replica's part of the allreduce kind on device `replica`, called
     * on its own thread with its comm member (never NULL): sizes[0..n)
     * come with bytes and count set; fills time_us (already the maximum
     * over the job), ok (over the job), and *details_json (malloc'd JSON
     * object text or NULL: transports, the interconnect really used as
     * "interconnect"). NULL when unsupported. */
    int (*allreduce)(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                     gb_allreduce_size_t *sizes, int n, char **details_json, char *err,
                     size_t errlen);
} gb_backend_ops_t;

/* The ops of backend `name` ("cpu" or "cuda"); loads libgpubench_cuda.so on
 * first use of "cuda" (next to the executable, in its ../lib, or $GB_CUDA_LIB).
 * NULL with a reason in err when it is not available. */
const gb_backend_ops_t *gb_backend_get(const char *name, char *err, size_t errlen);
/* One line for `gpubench version`: where the backend was loaded from, its
 * libraries' versions and whether it can run here (its probe), or why it
 * did not load. */
void gb_backend_describe(const char *name, char *out, size_t outlen);
/* The backend "auto" stands for here: "cuda" when its probe passes, else
 * "cpu" with why in `why` (empty when nothing was given up); any other
 * request as is. gb_auto_backend_note appends that reason to an error of a
 * run that "auto" put on the CPU. */
int gb_auto_backend(const char *requested, char *chosen, size_t chosenlen, char *why,
                    size_t whylen);
void gb_auto_backend_note(const char *requested, const char *why, char *err, size_t errlen);

/* Result of gb_train_run; the record is the JSON of docs/result-record.md. */
typedef struct gb_train_result {
    double images_per_sec; /* global batch / median step time */
    double step_ms_median, step_ms_p90, step_ms_min, step_ms_max, step_ms_mean;
    double loss_first, loss_last; /* first and last timed step (warm-up excluded) */
    size_t peak_mem_bytes;
    int valid;
    char invalid_reason[256];
    int64_t timed_window_ms[2]; /* CLOCK_REALTIME ms: start, end of the timed steps */
    char *record_json;          /* malloc'd result record; free with gb_train_result_free */
} gb_train_result_t;

/* The synthetic batch of the replica with global rank `rank` is
 * gb_model_synth_batch(..., gb_replica_seed(seed, rank), ...); rank 0 keeps
 * the seed itself, so one replica trains exactly as before. */
uint64_t gb_replica_seed(uint64_t seed, int rank);
/* FNV-1a 64 of n bytes: the replicas' parameter checksums in the record. */
uint64_t gb_fnv1a64(const void *data, size_t n);
/* FNV-1a 32 continued from h over v's 8 bytes, low first: the layouts that
 * data-parallel ranks compare at set-up (gb_plan_fingerprint,
 * gb_buckets_digest). Start from 2166136261. */
static inline uint32_t gb_fnv1a32_u64(uint32_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (uint32_t)(v >> (8 * i)) & 0xffu;
        h *= 16777619u;
    }
    return h;
}

/* Run warm-up + timed steps as configured. With devices > 1 (or a dist)
 * one thread per replica (launch "threads") or one process per replica
 * (launch "processes": the executable named by gb_train_set_replica_exe,
 * started as `<exe> __replica <fd>`, runs gb_train_replica_main), each on
 * its own batch (--batch is per device;
 * --data holds the global batch, replica g taking images [g*batch,
 * (g+1)*batch)). Returns 0 and fills `res`, or -1 with a reason in err.
 * The save paths are checked before the model is built; should a save still
 * fail at the end, -1 comes with the measured result in `res` (record_json
 * set), so callers call gb_train_result_free either way.
 * GB_STRANDED: failed, and a replica was still running $GB_REPLICA_GRACE_MS
 * after the first failure (blocked where nothing wakes it: inside
 * ncclCommInitRank, say; err names it and its phase). Its thread still
 * uses the run's memory, which is not freed: the caller reports err and
 * ends the process with _exit (exit's handlers could wait on that thread's
 * locks), and must not call gb_train_result_free. */
#define GB_STRANDED (-2)
int gb_train_run(const gb_train_config_t *cfg, gb_train_result_t *res, char *err, size_t errlen);
void gb_train_result_free(gb_train_result_t *res);

/* Replica processes (launch "processes"): the executable that runs
 * gb_train_replica_main when given `__replica <fd>` (gpubench's main sets
 * /proc/self/exe; a program that never sets it cannot launch processes),
 * and that entry: it reads its part of the job from the socket fd, trains
 * one replica and reports back; returns the process's exit status. */
void gb_train_set_replica_exe(const char *path);
int gb_train_replica_main(int fd);

/* Run the allreduce kind: one thread per local replica through the
 * backend's allreduce op. Returns 0 with *record_json (malloc'd: the result
 * record of docs/result-record.md, `sizes` per message size; invalid when a
 * check failed), or -1 with a reason in err, or GB_STRANDED as
 * gb_train_run. */
int gb_allreduce_run(const gb_allreduce_config_t *cfg, char **record_json, char *err,
                     size_t errlen);

#endif
