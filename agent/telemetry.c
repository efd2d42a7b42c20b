/* telemetry.c - the agent's NVML hub and per-job sampler threads (see
 * telemetry.h); the record logic is in tm_record.c.
 *
 * The NVML library is held by a reference-counted lib_t: the hub holds one
 * reference, each sampler thread another (taken before the thread starts,
 * dropped by the thread as its last act), and the last one out shuts NVML
 * down and unloads it. So a thread abandoned inside a hung NVML call never
 * finds the library gone under it, whatever the agent does meanwhile.
 *
 * A sampler and its thread share the struct; `state` (atomic) says whether
 * the thread still runs, and `orphan` (atomic exchange) decides who frees
 * it: the owner (destroy after the thread ended) or the thread (when the
 * owner abandoned it first). The thread sleeps in poll() on a pipe the
 * owner writes to ask it to stop, so a stop is seen at once, not after the
 * interval. */
#define _GNU_SOURCE
#include "telemetry.h"

#include "gb_log.h"
#include "gb_util.h"
#include "nvml_dl.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* In memory per job: past this many samples a long run is decimated (every
 * other sample dropped, the interval doubled), so a job of days stays
 * within a few MiB. 2^18 GPU rows, all GPUs together, is 7 h of one GPU
 * at 100 ms, 55 min of 8. */
#define MAX_GPU_ROWS (1u << 18)
#define MAX_CPU_ROWS (1u << 16)

typedef struct lib {
    gb_nvml_t nv;
    int ready; /* nvmlInit succeeded */
    char error[256];
    atomic_int refs;
} lib_t;

static void lib_unref(lib_t *l) {
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1) return;
    if (l->ready && l->nv.Shutdown) l->nv.Shutdown();
    if (l->nv.lib) dlclose(l->nv.lib);
    free(l);
}

struct gb_telemetry {
    gb_tm_config_t cfg;
    lib_t *lib;
};

void gb_tm_config_default(gb_tm_config_t *cfg) {
    cfg->interval_ms = 100;
    cfg->stop_grace_ms = 5000;
}

gb_telemetry_t *gb_telemetry_new(const gb_tm_config_t *cfg, char *err, size_t errlen) {
    if (cfg->interval_ms < 10 || cfg->interval_ms > 60000 || cfg->stop_grace_ms < 0) {
        gb_fmt(err, errlen, "telemetry interval must be 10..60000 ms");
        return NULL;
    }
    gb_telemetry_t *t = calloc(1, sizeof *t);
    lib_t *l = calloc(1, sizeof *l);
    if (!t || !l) {
        free(t);
        free(l);
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    t->cfg = *cfg;
    atomic_init(&l->refs, 1);
    t->lib = l;
    if (gb_nvml_load(&l->nv, l->error, sizeof l->error) == 0) {
        nvmlReturn_t rc = l->nv.Init();
        if (rc == NVML_SUCCESS)
            l->ready = 1;
        else
            gb_fmt(l->error, sizeof l->error, "nvmlInit: %s", l->nv.ErrorString(rc));
    }
    if (!l->ready && l->nv.lib) {
        dlclose(l->nv.lib);
        l->nv.lib = NULL;
    }
    return t;
}

void gb_telemetry_destroy(gb_telemetry_t **self_p) {
    if (!self_p || !*self_p) return;
    lib_unref((*self_p)->lib);
    free(*self_p);
    *self_p = NULL;
}

const char *gb_telemetry_nvml_error(const gb_telemetry_t *t) {
    return t->lib->ready ? "" : t->lib->error;
}

int gb_telemetry_refs(const gb_telemetry_t *t) {
    return atomic_load(&t->lib->refs);
}

int gb_tm_gpu_indices(const char *cvd, int n, int *out, char *err, size_t errlen) {
    if (n < 0 || n > GB_TM_MAX_GPUS) {
        gb_fmt(err, errlen, "%d GPUs: at most %d are sampled", n, GB_TM_MAX_GPUS);
        return -1;
    }
    if (!cvd) {
        for (int i = 0; i < n; i++)
            out[i] = i;
        return 0;
    }
    const char *p = cvd;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= 1024 || (*end && *end != ',')) {
            gb_fmt(err, errlen,
                   "CUDA_VISIBLE_DEVICES='%.64s' is not a list of %d GPU indices: cannot tell "
                   "which GPUs to sample",
                   cvd, n);
            return -1;
        }
        out[i] = (int)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* ---- the sampler ---------------------------------------------------------- */

enum { RUNNING = 0, ENDED = 1 };

struct gb_sampler {
    lib_t *lib; /* a reference, dropped by the thread */
    int interval_ms, grace_ms;
    gb_tm_job_t job;
    nvmlDevice_t dev[GB_TM_MAX_GPUS];
    int nvml_index[GB_TM_MAX_GPUS]; /* NVML's index of job GPU i (thread, before ENDED) */
    unsigned default_limit_mw[GB_TM_MAX_GPUS];
    int wake[2]; /* the owner writes wake[1] to stop the thread */
    pthread_t th;
    atomic_int state;   /* RUNNING, ENDED (release: the buffers are final) */
    atomic_int orphan;  /* the first of owner and thread to set it does not free */
    atomic_size_t seen; /* samples so far, for gb_sampler_count */
    int64_t stop_asked_ms;
    int joined, abandoned;
    /* the reaped worker's CPU time, set before the stop: the thread's last
     * sample (after the timed window) reads it instead of /proc/PID */
    uint64_t final_ticks;
    /* set after final_ticks (release) by the thread that reaped the worker,
     * read by the sampler (acquire): it may be sampling at that moment */
    atomic_int have_final;
    /* the CPUs the worker may run on (the agent's affinity mask, which it
     * inherits), cores of them; mask_all: every online CPU (the aggregate
     * line of /proc/stat serves) */
    cpu_set_t mask;
    int cores, mask_all;
    /* written by the thread only, until ENDED */
    gb_tm_gpu_sample_t *gs;
    size_t n_gs, cap_gs;
    gb_tm_cpu_sample_t *cs;
    size_t n_cs, cap_cs;
    char error[256];
};

static void sampler_free(gb_sampler_t *s) {
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    free(s->gs);
    free(s->cs);
    free(s);
}

/* Keep every other round of samples (a round: one sample of each GPU),
 * folding the dropped round's reasons into the kept one (gb_tm_fold), and
 * double the interval: memory stays bounded over a run of any length. */
static void decimate_gpu(gb_sampler_t *s) {
    size_t ng = (size_t)s->job.n_gpus, rounds = s->n_gs / ng, o = 0;
    for (size_t r = 0; r < rounds; r += 2)
        for (size_t g = 0; g < ng; g++) {
            gb_tm_gpu_sample_t x = s->gs[r * ng + g];
            if (r + 1 < rounds) gb_tm_fold(&x, &s->gs[(r + 1) * ng + g]);
            s->gs[o++] = x;
        }
    s->n_gs = o;
    s->interval_ms *= 2;
}

static int grow(void **buf, size_t *cap, size_t need, size_t size, size_t max) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap * 2 : 256;
    if (c > max) c = max;
    if (c < need) return -1;
    void *p = realloc(*buf, c * size);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

/* A field value's milliwatts, read from the member its valueType names:
 * nvml.h (go-nvml gen/nvml/nvml.h, CUDA 13.3) leaves the type to the
 * driver, and reading uiVal out of a double would be a wrong figure, not
 * an error. 0, or -1 (its own error, a type not known here, or a value no
 * unsigned int holds): the caller falls back to nvmlDeviceGetPowerUsage. */
static int field_mw(const nvmlFieldValue_t *fv, unsigned *mw) {
    if (fv->nvmlReturn != NVML_SUCCESS) return -1;
    double v;
    switch (fv->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        v = fv->value.dVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        v = fv->value.uiVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        v = (double)fv->value.ulVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        v = (double)fv->value.ullVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        v = (double)fv->value.sllVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_INT:
        v = fv->value.siVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        v = fv->value.usVal;
        break;
    default:
        return -1;
    }
    if (!(v >= 0 && v < 4294967295.0)) return -1; /* NaN too */
    *mw = (unsigned)(v + 0.5);
    return 0;
}

static void sample_gpus(gb_sampler_t *s) {
    const gb_nvml_t *nv = &s->lib->nv;
    size_t ng = (size_t)s->job.n_gpus;
    if (s->n_gs + ng > MAX_GPU_ROWS) decimate_gpu(s);
    if (grow((void **)&s->gs, &s->cap_gs, s->n_gs + ng, sizeof *s->gs, MAX_GPU_ROWS) != 0) {
        gb_fmt(s->error, sizeof s->error, "out of memory for samples");
        return;
    }
    for (size_t g = 0; g < ng; g++) {
        gb_tm_gpu_sample_t x;
        memset(&x, 0, sizeof x);
        x.gpu = (unsigned)g;
        x.t_ms = gb_wall_ms();
        nvmlDevice_t d = s->dev[g];
        unsigned v = 0;
        if (nv->DeviceGetClockInfo &&
            nv->DeviceGetClockInfo(d, NVML_CLOCK_SM, &v) == NVML_SUCCESS) {
            x.sm_mhz = v;
            x.have |= GB_TM_HAVE_SM;
        }
        if (nv->DeviceGetClockInfo &&
            nv->DeviceGetClockInfo(d, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) {
            x.mem_mhz = v;
            x.have |= GB_TM_HAVE_MEM;
        }
        /* the power now (a field value), else nvmlDeviceGetPowerUsage: a
         * 1-second average on Ampere and newer, late by about a second */
        nvmlFieldValue_t fv;
        memset(&fv, 0, sizeof fv);
        fv.fieldId = NVML_FI_DEV_POWER_INSTANT;
        if (nv->DeviceGetFieldValues && nv->DeviceGetFieldValues(d, 1, &fv) == NVML_SUCCESS &&
            field_mw(&fv, &v) == 0) {
            x.power_mw = v;
            x.have |= GB_TM_HAVE_POWER;
        } else if (nv->DeviceGetPowerUsage && nv->DeviceGetPowerUsage(d, &v) == NVML_SUCCESS) {
            x.power_mw = v;
            x.have |= GB_TM_HAVE_POWER;
        }
        if (nv->DeviceGetEnforcedPowerLimit &&
            nv->DeviceGetEnforcedPowerLimit(d, &v) == NVML_SUCCESS) {
            x.limit_mw = v;
            x.have |= GB_TM_HAVE_LIMIT;
        }
        if (nv->DeviceGetTemperature &&
            nv->DeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
            x.temp_c = v;
            x.have |= GB_TM_HAVE_TEMP;
        }
        nvmlUtilization_t u;
        if (nv->DeviceGetUtilizationRates && nv->DeviceGetUtilizationRates(d, &u) == NVML_SUCCESS) {
            x.util_pct = u.gpu;
            x.have |= GB_TM_HAVE_UTIL;
        }
        nvmlMemory_t m;
        if (nv->DeviceGetMemoryInfo(d, &m) == NVML_SUCCESS) {
            x.mem_used = m.used;
            x.have |= GB_TM_HAVE_USED;
        }
        /* the new name first; a driver that has it but answers "not
         * supported" or "not found" gets the old one */
        unsigned long long r = 0;
        nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
        if (nv->DeviceGetCurrentClocksEventReasons)
            rc = nv->DeviceGetCurrentClocksEventReasons(d, &r);
        if (rc != NVML_SUCCESS && nv->DeviceGetCurrentClocksThrottleReasons)
            rc = nv->DeviceGetCurrentClocksThrottleReasons(d, &r);
        if (rc == NVML_SUCCESS) {
            x.reasons = r;
            x.have |= GB_TM_HAVE_REASONS;
        }
        s->gs[s->n_gs++] = x;
    }
    atomic_fetch_add(&s->seen, ng);
}

/* /proc/stat over the CPUs of mask (all: its aggregate line): busy (user
 * nice system irq softirq; guest time is already inside user), steal, and
 * the total of them all plus idle and iowait. Only the job's CPUs: under
 * taskset or a cpuset, what ran on the others took nothing from it (it was
 * counted as contention, and a busy CPU the job could not use made its
 * result invalid). */
static int read_proc_stat(const cpu_set_t *mask, int all, uint64_t *busy, uint64_t *steal,
                          uint64_t *total) {
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return -1;
    char line[512];
    int found = 0;
    *busy = *steal = *total = 0;
    while (fgets(line, sizeof line, f) && strncmp(line, "cpu", 3) == 0) {
        int cpu = -1, off = 0;
        unsigned long long v[8] = {0};
        if (line[3] == ' ') {
            if (!all) continue;
            off = 3;
        } else if (all || sscanf(line + 3, "%d%n", &cpu, &off) != 1 || cpu < 0 ||
                   cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask)) {
            continue;
        } else {
            off += 3;
        }
        if (sscanf(line + off, " %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]) < 8)
            continue;
        uint64_t b = v[0] + v[1] + v[2] + v[5] + v[6];
        *busy += b;
        *steal += v[7];
        *total += b + v[3] + v[4] + v[7];
        found++;
        if (all) break;
    }
    fclose(f);
    /* no cpuN line of the mask (a /proc/stat that a container renumbers
     * while the mask has the host's numbers): the whole node, as before */
    if (!found && !all) return read_proc_stat(mask, 1, busy, steal, total);
    return found ? 0 : -1;
}

/* One read of a small /proc or /sys file into buf, NUL-terminated: the
 * bytes read, or -1 when it cannot be opened or holds nothing. */
static ssize_t read_small(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    return n;
}

/* utime + stime + cutime + cstime of pid, in clock ticks. */
static int read_pid_stat(int pid, uint64_t *ticks) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_small(path, buf, sizeof buf) < 0) return -1;
    const char *p = strrchr(buf, ')'); /* the command name may hold anything */
    if (!p) return -1;
    char state;
    unsigned long long ut, st;
    long long cut, cst;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime cutime cstime */
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &state,
               &ut, &st, &cut, &cst) != 5)
        return -1;
    *ticks = ut + st + (uint64_t)(cut > 0 ? cut : 0) + (uint64_t)(cst > 0 ? cst : 0);
    return 0;
}

/* Adds to *ticks the CPU time of every running child of pid whose pid is
 * listed in text (space-separated). */
static void add_children(const char *text, uint64_t *ticks) {
    for (const char *p = text; *p;) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p) break;
        uint64_t t;
        if (c > 0 && read_pid_stat((int)c, &t) == 0) *ticks += t;
        p = end;
    }
}

/* The worker's CPU time with its running children's: the replica processes
 * of a data-parallel job (kernels/launch.h) are its own work, and their
 * time reaches its cutime only when it reaps them, after the timed window.
 * /proc/PID/task/TID/children where the kernel has it (CONFIG_PROC_CHILDREN)
 * and scan is 0, else a scan of /proc for the processes whose parent is pid. */
int gb_tm_worker_ticks(int pid, int scan, uint64_t *ticks) {
    if (read_pid_stat(pid, ticks) != 0) return -1;
    char path[96], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = scan ? NULL : opendir(path);
    int listed = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%d/task/%.20s/children", pid, e->d_name);
        if (access(path, R_OK) != 0) continue;
        listed = 1;
        if (read_small(path, buf, sizeof buf) > 0) add_children(buf, ticks);
    }
    if (d) closedir(d);
    if (listed) return 0;
    d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
        if (read_small(path, buf, sizeof buf) < 0) continue;
        const char *q = strrchr(buf, ')');
        int ppid = 0;
        if (q && sscanf(q + 1, " %*c %d", &ppid) == 1 && ppid == pid)
            add_children(e->d_name, ticks);
    }
    if (d) closedir(d);
    return 0;
}

/* The mean current clock of the CPUs of mask: cpufreq where the kernel has
 * it, else /proc/cpuinfo's "cpu MHz" (on many VMs a constant). 0: unknown. */
static double read_cpu_mhz(const cpu_set_t *mask) {
    double sum = 0;
    int n = 0, none = 0;
    for (int c = 0; c < CPU_SETSIZE && !none; c++) {
        if (!CPU_ISSET(c, mask)) continue;
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", c);
        if (read_small(path, buf, sizeof buf) < 0) {
            none = 1;
            break;
        }
        sum += strtod(buf, NULL) / 1000.0; /* kHz */
        n++;
    }
    if (n > 0 && !none) return sum / n;
    sum = 0;
    n = 0;
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f) return 0;
    char line[256];
    int cpu = -1;
    while (fgets(line, sizeof line, f)) {
        double mhz;
        const char *colon = strchr(line, ':');
        if (strncmp(line, "processor", 9) == 0 && colon) cpu = atoi(colon + 1);
        if (strncmp(line, "cpu MHz", 7) == 0 && colon && sscanf(colon + 1, "%lf", &mhz) == 1 &&
            cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, mask)) {
            sum += mhz;
            n++;
        }
    }
    fclose(f);
    return n > 0 ? sum / n : 0;
}

static void sample_cpu(gb_sampler_t *s) {
    if (s->n_cs + 1 > MAX_CPU_ROWS) {
        size_t o = 0;
        for (size_t i = 0; i < s->n_cs; i += 2)
            s->cs[o++] = s->cs[i];
        s->n_cs = o;
        s->interval_ms *= 2;
    }
    if (grow((void **)&s->cs, &s->cap_cs, s->n_cs + 1, sizeof *s->cs, MAX_CPU_ROWS) != 0) {
        gb_fmt(s->error, sizeof s->error, "out of memory for samples");
        return;
    }
    gb_tm_cpu_sample_t x;
    memset(&x, 0, sizeof x);
    x.t_ms = gb_wall_ms();
    if (read_proc_stat(&s->mask, s->mask_all, &x.busy, &x.steal, &x.total) != 0) {
        gb_fmt(s->error, sizeof s->error, "cannot read /proc/stat");
        return;
    }
    x.have_worker = gb_tm_worker_ticks(s->job.pid, 0, &x.worker) == 0;
    if (!x.have_worker && atomic_load_explicit(&s->have_final, memory_order_acquire)) {
        x.worker = s->final_ticks;
        x.have_worker = 1;
    }
    x.mhz = read_cpu_mhz(&s->mask);
    s->cs[s->n_cs++] = x;
    atomic_fetch_add(&s->seen, 1);
}

static void *sampler_main(void *arg) {
    gb_sampler_t *s = arg;
    const gb_nvml_t *nv = &s->lib->nv;
    int gpu = s->job.n_gpus > 0;
    if (gpu && !s->lib->ready) {
        gb_fmt(s->error, sizeof s->error, "NVML not available: %s", s->lib->error);
        goto out;
    }
    /* the job's GPU indices are CUDA's (PCI bus id order): NVML's index of
     * each through gb_nvml_pci_order; NVML's order where it cannot tell */
    unsigned count = 0;
    int perm[GB_TM_MAX_GPUS], mine = -1;
    if (gpu && (nv->DeviceGetCount(&count) != NVML_SUCCESS || count > GB_TM_MAX_GPUS ||
                (mine = gb_nvml_pci_order(nv, count, perm)) < 0))
        count = 0;
    else if (gpu)
        count = (unsigned)mine; /* the GPUs this process may open: CUDA's */
    for (int g = 0; gpu && g < s->job.n_gpus; g++) {
        int i = s->job.gpu_index[g];
        if (i >= 0 && (unsigned)i < count) i = perm[i];
        s->nvml_index[g] = i;
        nvmlReturn_t rc = nv->DeviceGetHandleByIndex((unsigned)i, &s->dev[g]);
        if (rc != NVML_SUCCESS) {
            gb_fmt(s->error, sizeof s->error, "NVML GPU %d: %s", i, nv->ErrorString(rc));
            goto out;
        }
        unsigned def = 0;
        if (nv->DeviceGetPowerManagementDefaultLimit &&
            nv->DeviceGetPowerManagementDefaultLimit(s->dev[g], &def) == NVML_SUCCESS)
            s->default_limit_mw[g] = def;
    }
    int64_t next = gb_mono_ms();
    for (;;) {
        if (gpu)
            sample_gpus(s);
        else
            sample_cpu(s);
        int64_t now = gb_mono_ms();
        next += s->interval_ms;
        if (next <= now) next = now + s->interval_ms; /* late: skip, do not burst */
        struct pollfd pfd = {s->wake[0], POLLIN, 0};
        int r = poll(&pfd, 1, (int)(next - now));
        if (r > 0 || (r < 0 && errno != EINTR)) break; /* asked to stop (or the pipe broke) */
    }
    /* a CPU job's last sample, at the stop: the worker has ended, so it is
     * at or after the end of the timed window, which the contention figure
     * then covers whole (the schedule's last one often came before) */
    if (!gpu) sample_cpu(s);
out:;
    lib_t *lib = s->lib;
    atomic_store_explicit(&s->state, ENDED, memory_order_release);
    /* after this exchange the owner may free s at any moment */
    if (atomic_exchange(&s->orphan, 1)) sampler_free(s); /* abandoned: ours to free */
    lib_unref(lib);
    return NULL;
}

gb_sampler_t *gb_sampler_start(gb_telemetry_t *hub, const gb_tm_job_t *job, char *err,
                               size_t errlen) {
    if (job->n_gpus < 0 || job->n_gpus > GB_TM_MAX_GPUS || (job->n_gpus == 0 && job->pid <= 0)) {
        gb_fmt(err, errlen, "nothing to sample: %d GPUs, worker pid %d", job->n_gpus, job->pid);
        return NULL;
    }
    gb_sampler_t *s = calloc(1, sizeof *s);
    if (!s) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    s->wake[0] = s->wake[1] = -1;
    s->job = *job;
    memcpy(s->nvml_index, job->gpu_index, sizeof s->nvml_index);
    s->interval_ms = hub->cfg.interval_ms;
    s->grace_ms = hub->cfg.stop_grace_ms;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof s->mask, &s->mask) != 0 || CPU_COUNT(&s->mask) < 1) {
        CPU_ZERO(&s->mask);
        for (long c = 0; c < online && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &s->mask);
    }
    s->cores = CPU_COUNT(&s->mask);
    s->mask_all = s->cores >= online;
    atomic_init(&s->state, RUNNING);
    atomic_init(&s->orphan, 0);
    atomic_init(&s->seen, 0);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        gb_fmt(err, errlen, "cannot make the sampler's pipe: %s", strerror(errno));
        sampler_free(s);
        return NULL;
    }
    s->lib = hub->lib;
    atomic_fetch_add(&s->lib->refs, 1);
    /* the thread gets no signals: the agent's handlers run elsewhere */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->th, NULL, sampler_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        gb_fmt(err, errlen, "cannot start the sampler thread: %s", strerror(rc));
        lib_unref(s->lib);
        sampler_free(s);
        return NULL;
    }
    return s;
}

void gb_sampler_worker_ended(gb_sampler_t *s, uint64_t ticks) {
    if (s->stop_asked_ms) return; /* the thread may be reading it */
    s->final_ticks = ticks;
    atomic_store_explicit(&s->have_final, 1, memory_order_release);
}

int gb_sampler_stop(gb_sampler_t *s, int64_t now) {
    if (s->joined || s->abandoned) return 1;
    if (!s->stop_asked_ms) {
        s->stop_asked_ms = now ? now : 1;
        char c = 1;
        if (write(s->wake[1], &c, 1) < 0 && errno != EAGAIN)
            gb_warn("telemetry: cannot wake the sampler: %s", strerror(errno));
    }
    if (atomic_load_explicit(&s->state, memory_order_acquire) == ENDED) {
        pthread_join(s->th, NULL);
        s->joined = 1;
        return 1;
    }
    if (now - s->stop_asked_ms >= s->grace_ms) {
        pthread_detach(s->th);
        s->abandoned = 1;
        gb_warn("telemetry: the sampler did not stop within %d ms (NVML hung?): left behind",
                s->grace_ms);
        return 1;
    }
    return 0;
}

void gb_sampler_data(const gb_sampler_t *s, gb_tm_data_t *d) {
    memset(d, 0, sizeof *d);
    d->interval_ms = s->interval_ms;
    d->n_gpus = s->job.n_gpus;
    d->cpu = s->job.n_gpus == 0;
    d->cores = s->cores;
    if (d->n_gpus > 0) {
        /* the NVML index the thread sampled once it is joined; until then
         * (or abandoned) the job's index, which is NVML's in PCI order */
        d->have_nvml_index = 1;
        memcpy(d->nvml_index, s->joined ? s->nvml_index : s->job.gpu_index, sizeof d->nvml_index);
    }
    if (s->abandoned) {
        d->error = "the sampler did not stop (NVML hung?): its samples were dropped";
        return;
    }
    if (!s->joined) {
        d->error = "the sampler was not stopped";
        return;
    }
    d->gpu = s->gs;
    d->n_gpu = s->n_gs;
    d->cpus = s->cs;
    d->n_cpu = s->n_cs;
    memcpy(d->default_limit_mw, s->default_limit_mw, sizeof d->default_limit_mw);
    d->error = s->error[0] ? s->error : NULL;
}

size_t gb_sampler_count(const gb_sampler_t *s) {
    return atomic_load(&s->seen);
}

void gb_sampler_destroy(gb_sampler_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_sampler_t *s = *self_p;
    *self_p = NULL;
    int64_t until = gb_mono_ms() + s->grace_ms;
    while (!gb_sampler_stop(s, gb_mono_ms())) {
        if (gb_mono_ms() >= until) break;
        usleep(5000);
    }
    if (!s->joined && !s->abandoned) { /* the grace passed between the calls */
        pthread_detach(s->th);
        s->abandoned = 1;
    }
    if (s->joined) {
        sampler_free(s);
        return;
    }
    if (atomic_exchange(&s->orphan, 1)) sampler_free(s); /* it ended meanwhile */
}
