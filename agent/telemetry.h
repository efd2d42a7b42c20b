/* telemetry.h - what the agent measures beside a job: per GPU of a GPU job,
 * NVML's SM and memory clocks, power draw and limit, temperature,
 * utilization, memory used and the clocks-event (throttle) reasons; for a
 * CPU job, the CPU time others took (other processes, and the hypervisor
 * as steal) and the CPU clock. A sampler thread per job takes a sample
 * every interval from the job's start to its end; afterwards the samples
 * inside the job's timed window (the record's timed_window_ms) are
 * summarized into the result record, and a window that saw throttling (or
 * heavy CPU contention) makes the result invalid, with the reasons named.
 *
 * Three layers:
 *   gb_telemetry_t  one per agent: NVML loaded and initialized once (it can
 *                   take seconds, so never per job), shared by samplers
 *                   through a reference count;
 *   gb_sampler_t    one per running job: a thread, started and stopped with
 *                   a handshake that never blocks the caller;
 *   gb_tm_amend()   a pure function: record text + samples -> new record
 *                   text (tm_record.c), tested without threads or NVML.
 *
 * Threads: a sampler thread touches only its own buffers and its copy of
 * the NVML entry points; its owner reads the buffers only after the thread
 * said it ended (an atomic store with release order). A thread stuck in
 * NVML past the stop grace is abandoned: the job's result goes on without
 * its samples, and the thread frees what it owns when it returns. */
#ifndef GB_AGENT_TELEMETRY_H
#define GB_AGENT_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#define GB_TM_MAX_GPUS 64

/* Which of NVML's clocks-event reasons count as throttling (invalidate a
 * result), from NVIDIA's nvml.h documentation of nvmlClocksEventReasons:
 *   hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown: the hardware
 *     cut the clocks by a factor of 2 or more (temperature, an external
 *     power brake, power draw over the fast-trigger limit);
 *   sw_thermal_slowdown: clocks lowered to keep the GPU or its memory
 *     under their maximum operating temperature;
 *   sync_boost: held down to the slowest GPU of a sync-boost group, so the
 *     clocks are another GPU's, not this one's;
 *   sw_power_cap: only when the enforced power limit is below the board's
 *     default limit (someone lowered it): at the default limit, running
 *     into the power cap under full load is how the product is specified
 *     to run, and what any published figure for it measured;
 *   any bit this table does not know (a newer driver's new reason).
 * Not throttling: gpu_idle (nothing ran), applications_clocks_setting and
 * display_clock_setting (clocks an administrator configured). They are
 * recorded all the same. */
#define GB_TM_REASON_GPU_IDLE       0x001ULL
#define GB_TM_REASON_APP_CLOCKS     0x002ULL
#define GB_TM_REASON_SW_POWER_CAP   0x004ULL
#define GB_TM_REASON_HW_SLOWDOWN    0x008ULL
#define GB_TM_REASON_SYNC_BOOST     0x010ULL
#define GB_TM_REASON_SW_THERMAL     0x020ULL
#define GB_TM_REASON_HW_THERMAL     0x040ULL
#define GB_TM_REASON_HW_POWER_BRAKE 0x080ULL
#define GB_TM_REASON_DISPLAY_CLOCKS 0x100ULL

/* CPU contention, as a share of all the node's CPU time in the timed
 * window taken by other processes plus the hypervisor (steal). A job's
 * throughput on the CPU backend is bounded by the CPU time it gets, so
 * losing a share f of the machine costs at least f of the throughput (more
 * when its threads meet at barriers). Above INVALID the figure is at least
 * 10% low: the same error the spread rule (p90 > 1.10 x median) refuses to
 * quote. Above FLAG the result is kept valid but flagged: an idle node's
 * background (kernel threads, the agent, sshd) stays well under 1%. */
#define GB_TM_CPU_FLAG_PCT    5.0
#define GB_TM_CPU_INVALID_PCT 10.0
/* /proc/stat counts whole clock ticks (10 ms a CPU): a window measured in
 * fewer than this many (all CPUs together) is too coarse to judge, as one
 * stray tick in 20 is already 5% (a 1 ms gemm was found "25% contended") */
#define GB_TM_CPU_MIN_TICKS 100
/* ... but a window with fewer is still invalid when even the least the
 * others can have taken is over the limit: their ticks less a tick a CPU at
 * each end and one each end for the worker's own count, over all the ticks
 * plus as many (72% of 40 ticks, 29 of them others', on 2 cores: at least
 * 23 / 46 = 50%; the result stayed valid at 2 GFLOP/s where the same gemm
 * measured 404) */
int gb_tm_cpu_taken_floor(double taken_pct, uint64_t ticks, int cores, double *floor_pct);

/* ---- samples -------------------------------------------------------------- */

/* have bits of a GPU sample: which readings NVML gave */
enum {
    GB_TM_HAVE_SM = 1 << 0,
    GB_TM_HAVE_MEM = 1 << 1,
    GB_TM_HAVE_POWER = 1 << 2,
    GB_TM_HAVE_TEMP = 1 << 3,
    GB_TM_HAVE_UTIL = 1 << 4,
    GB_TM_HAVE_USED = 1 << 5,
    GB_TM_HAVE_REASONS = 1 << 6,
    GB_TM_HAVE_LIMIT = 1 << 7,
    /* not a reading: the sample stands for two or more in a row with HW
     * slowdown, folded into it when the sampler thinned its samples (one
     * such alone is not held against the GPU: tm_record.c) */
    GB_TM_SLOWDOWN_RUN = 1 << 8,
    /* a folded sample (GB_TM_FOLDED): whether the first and the last of the
     * samples it stands for that had reasons had HW slowdown; only those
     * touch its neighbours' (two blips a clean sample apart, folded into
     * two neighbours, read as a run of two and invalidated the result).
     * A sample never folded is its own first and last */
    GB_TM_FOLDED = 1 << 9,
    GB_TM_SLOW_FIRST = 1 << 10,
    GB_TM_SLOW_LAST = 1 << 11,
};

typedef struct gb_tm_gpu_sample {
    int64_t t_ms; /* CLOCK_REALTIME ms when the GPU was read */
    unsigned gpu; /* the job's GPU index (0..n_gpus-1) */
    unsigned have;
    unsigned sm_mhz, mem_mhz;
    unsigned power_mw, limit_mw; /* draw, and the enforced limit */
    unsigned temp_c, util_pct;
    uint64_t mem_used; /* bytes */
    uint64_t reasons;  /* nvmlClocksEventReasons bits */
} gb_tm_gpu_sample_t;

/* Fold y, the later sample of a GPU that the sampler's thinning drops,
 * into x: its reasons (and that there were some: a kept sample whose own
 * query failed lost them), and GB_TM_SLOWDOWN_RUN where the two are a run
 * of HW slowdown (two in a row, or a run already). */
void gb_tm_fold(gb_tm_gpu_sample_t *x, const gb_tm_gpu_sample_t *y);

typedef struct gb_tm_cpu_sample {
    int64_t t_ms;                /* CLOCK_REALTIME ms */
    uint64_t busy, steal, total; /* /proc/stat, all CPUs, clock ticks */
    uint64_t worker;             /* the worker's utime + stime (+ reaped children) */
    int have_worker;             /* 0: its /proc/PID/stat was gone */
    double mhz;                  /* mean over the CPUs; 0: unknown */
} gb_tm_cpu_sample_t;

/* Everything a sampler collected for one job. */
typedef struct gb_tm_data {
    int interval_ms; /* as sampled (doubled by each decimation of a long run) */
    int n_gpus;      /* GPU job: > 0 */
    const gb_tm_gpu_sample_t *gpu;
    size_t n_gpu;
    unsigned default_limit_mw[GB_TM_MAX_GPUS]; /* 0: unknown */
    int cpu;                                   /* CPU job */
    const gb_tm_cpu_sample_t *cpus;
    size_t n_cpu;
    int cores;
    const char *error; /* why sampling was incomplete ("" or NULL: it was not) */
    /* GPU i of the job is NVML's nvml_index[i] (CUDA_VISIBLE_DEVICES) */
    int have_nvml_index;
    int nvml_index[GB_TM_MAX_GPUS];
} gb_tm_data_t;

/* ---- the pure part (tm_record.c) ------------------------------------------ */

/* "hw_thermal_slowdown" for one bit, NULL for a bit the table lacks. */
const char *gb_tm_reason_name(uint64_t bit);
/* Names of every bit set, comma-separated ("unknown_0x200" for one the
 * table lacks); "" for none. */
void gb_tm_reason_names(uint64_t reasons, char *out, size_t len);
/* The bits of `reasons` that count as throttling (see above); limit_mw and
 * default_mw decide sw_power_cap (0: unknown, then it does not count). */
uint64_t gb_tm_throttle_bits(uint64_t reasons, unsigned limit_mw, unsigned default_mw);

/* CPU contention of one window. */
/* The CPU time of worker pid with its running children's (a data-parallel
 * job's replica processes), in clock ticks: what the CPU sampler records as
 * the worker's. The children come from /proc/PID/task/TID/children where the
 * kernel has it, else (and always with scan = 1) from a scan of /proc for
 * processes whose parent is pid. 0, or -1 when pid cannot be read. */
int gb_tm_worker_ticks(int pid, int scan, uint64_t *ticks);

typedef struct gb_tm_cpu_window {
    int ok;          /* 0: fewer than two usable samples */
    int64_t span_ms; /* between the two samples used */
    int covers;      /* those samples bracket the whole window */
    double others_pct, steal_pct, taken_pct, worker_pct;
    uint64_t ticks;  /* all CPU time between the two samples, in clock ticks */
    size_t from, to; /* the two samples' indices (ok only) */
} gb_tm_cpu_window_t;
/* Contention over [start_ms, end_ms] from cumulative samples (sorted by
 * time): from the last sample at or before the start (else the first
 * after it) to the first at or after the end (else the last before it),
 * using only samples that read the worker. */
void gb_tm_cpu_window(const gb_tm_cpu_sample_t *s, size_t n, int64_t start_ms, int64_t end_ms,
                      gb_tm_cpu_window_t *out);

#define GB_TM_MAX_ROWS 2048 /* sample rows kept in one record, all GPUs together */

/* Add the job's telemetry to its result record: read timed_window_ms,
 * keep the samples inside it (at most GB_TM_MAX_ROWS rows, and a record of
 * at most max_len bytes: longer windows are decimated, each kept row
 * standing for a block of consecutive samples with the union of their
 * reasons), summarize them (min / median / max per reading, the union of
 * reasons), and when the window saw throttling or CPU contention over
 * GB_TM_CPU_INVALID_PCT, set valid = false and add the reason to
 * invalid_reason (at most 255 bytes, the reasons named first). A record
 * without a timed window is judged over every sample of the job. Returns
 * 0 and a malloc'd record in *out, or -1 with the reason (the record is
 * not a JSON object, out of memory). */
int gb_tm_amend(const char *record_json, const gb_tm_data_t *d, size_t max_len, char **out,
                char *err, size_t errlen);

/* ---- the agent's hub ------------------------------------------------------ */

typedef struct gb_tm_config {
    int interval_ms;   /* 100: between samples (10..60000) */
    int stop_grace_ms; /* 5000: a sampler not stopped by then is abandoned */
} gb_tm_config_t;

void gb_tm_config_default(gb_tm_config_t *cfg);

typedef struct gb_telemetry gb_telemetry_t;

/* Load and initialize NVML ($GB_NVML_LIB, else libnvidia-ml.so.1) once for
 * the agent; without it GPU jobs get telemetry that says why. NULL only
 * for a bad configuration or out of memory (reason in err). May block for
 * as long as nvmlInit takes: call it where the agent starts, never from the
 * reactor. */
gb_telemetry_t *gb_telemetry_new(const gb_tm_config_t *cfg, char *err, size_t errlen);
/* NVML is shut down and unloaded when the last sampler thread is gone. */
void gb_telemetry_destroy(gb_telemetry_t **self_p);
/* "" when NVML is ready, else why not. */
const char *gb_telemetry_nvml_error(const gb_telemetry_t *self);
/* Holders of the NVML library: the hub (until destroyed) plus every sampler
 * thread still running, abandoned ones included. For tests. */
int gb_telemetry_refs(const gb_telemetry_t *self);

/* ---- one job's sampler ---------------------------------------------------- */

typedef struct gb_tm_job {
    int n_gpus;                    /* GPU job: sample these many GPUs */
    int gpu_index[GB_TM_MAX_GPUS]; /* NVML index of the job's GPU i */
    int pid;                       /* CPU job: the worker (> 0) */
} gb_tm_job_t;

/* The NVML indices of a job's n GPUs: 0..n-1, or, when the agent runs with
 * CUDA_VISIBLE_DEVICES=i,j,.. (indices), those. -1 with the reason when
 * the list cannot be mapped (UUIDs, MIG, too short). */
int gb_tm_gpu_indices(const char *cuda_visible_devices, int n, int *out, char *err, size_t errlen);

typedef struct gb_sampler gb_sampler_t;

/* Start sampling a job (a thread; this returns at once). NULL with the
 * reason when the thread cannot be made. */
gb_sampler_t *gb_sampler_start(gb_telemetry_t *hub, const gb_tm_job_t *job, char *err,
                               size_t errlen);
/* A CPU job's worker was reaped with this CPU time (gb_run_cpu_ticks):
 * the sampler's last sample, taken at the stop, counts it as the worker's.
 * Call before the first gb_sampler_stop; ignored after. */
void gb_sampler_worker_ended(gb_sampler_t *self, uint64_t ticks);
/* The stop handshake, never blocking: the first call asks the thread to
 * stop; every call returns 1 once it has (then the samples are the
 * caller's), or once stop_grace_ms has passed since the first call (the
 * thread is then abandoned and the job's telemetry says so), else 0. */
int gb_sampler_stop(gb_sampler_t *self, int64_t now_mono_ms);
/* After gb_sampler_stop returned 1: what was collected (valid until
 * destroy). */
void gb_sampler_data(const gb_sampler_t *self, gb_tm_data_t *out);
/* Samples taken so far, all GPUs (read while running, for tests and logs). */
size_t gb_sampler_count(const gb_sampler_t *self);
/* Stop (waiting at most the grace), join or abandon, free. */
void gb_sampler_destroy(gb_sampler_t **self_p);

#endif
