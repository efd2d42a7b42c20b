/* engine_util.c - what the engine driver and the backends share (engine.h),
 * in gb_model so that every build with the model has it, the GPU machine's
 * (bench/gpu, no engine driver) and libgpubench_cuda.so included: the
 * precisions' names, the wall clock of the timed windows and the replicas'
 * data seeds. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "engine.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int gb_cpus_usable(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN); /* more than 1024 CPUs, say */
    return n > 0 ? (int)n : 1;
}

int64_t gb_engine_wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

uint64_t gb_replica_seed(uint64_t seed, int rank) {
    if (rank == 0) return seed; /* one replica trains exactly as before */
    /* splitmix64 of (seed, rank): unrelated streams per replica and node */
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(rank + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

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

static int read_u64_file(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1; /* "max" does not parse: no limit */
    fclose(f);
    if (ok) *out = v;
    return ok;
}

/* "KEY N" from a cgroup's memory.stat; 0 when absent */
static uint64_t stat_key(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256], k[64];
    unsigned long long v, out = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %llu", k, &v) == 2 && strcmp(k, key) == 0) {
            out = v;
            break;
        }
    fclose(f);
    return out;
}

/* What a cgroup directory leaves: its limit less its usage (its page
 * cache, which the kernel reclaims before it kills, not counted);
 * UINT64_MAX without a limit there. v2: memory.max, v1: the memory
 * controller's memory.limit_in_bytes. */
static uint64_t cg_left(const char *dir, int v2) {
    char p[4200];
    uint64_t lim, used, cache;
    snprintf(p, sizeof p, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (!read_u64_file(p, &lim)) return UINT64_MAX;
    snprintf(p, sizeof p, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (!read_u64_file(p, &used)) return UINT64_MAX;
    snprintf(p, sizeof p, "%s/memory.stat", dir);
    cache = stat_key(p, v2 ? "file" : "total_cache");
    used = used > cache ? used - cache : 0;
    return lim > used ? lim - used : 0;
}

/* The least any cgroup of this process leaves: the one it is in (from
 * proc_cgroup, /proc/self/cgroup) and each above it up to the root of
 * sysfs (/sys/fs/cgroup; its v1 memory controller under memory/). Only
 * the root's files were read: a limit on the process's own cgroup
 * (systemd-run -p MemoryMax=, a batch scheduler's job) was not seen, and
 * a run it could not hold was killed rather than refused. */
uint64_t gb_cgroup_left(const char *proc_cgroup, const char *sysfs) {
    uint64_t least = UINT64_MAX;
    char root[4096], dir[4200], line[4096];
    for (int v2 = 1; v2 >= 0; v2--) { /* the roots, as before */
        snprintf(root, sizeof root, v2 ? "%s" : "%s/memory", sysfs);
        uint64_t l = cg_left(root, v2);
        if (l < least) least = l;
    }
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return least;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* "ID:CONTROLLERS:PATH": v2's is "0::PATH", v1's memory one names
         * "memory" among its controllers */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/') continue;
        *c1 = *c2 = '\0';
        const char *ctl = c1 + 1, *path = c2 + 1;
        int v2 = strcmp(line, "0") == 0 && !*ctl, mem = 0;
        for (const char *t = ctl; !v2 && *t;) {
            size_t n = strcspn(t, ",");
            mem |= n == 6 && strncmp(t, "memory", 6) == 0;
            t += n + (t[n] == ',');
        }
        if (!v2 && !mem) continue;
        snprintf(root, sizeof root, v2 ? "%s" : "%s/memory", sysfs);
        if (snprintf(dir, sizeof dir, "%s%s", root, path) >= (int)sizeof dir) continue;
        for (size_t rl = strlen(root);;) { /* this cgroup, then each above it */
            size_t n = strlen(dir);
            while (n > rl && dir[n - 1] == '/') /* "/" itself: the root, read above */
                dir[--n] = '\0';
            if (n <= rl) break;
            uint64_t l = cg_left(dir, v2);
            if (l < least) least = l;
            char *slash = strrchr(dir + rl, '/');
            if (!slash) break;
            *slash = '\0';
        }
    }
    fclose(f);
    return least;
}

uint64_t gb_mem_available(const char **what) {
    uint64_t avail = UINT64_MAX;
    *what = "unknown";
    const char *off = getenv("GB_CPU_MEM_CHECK");
    if (off && strcmp(off, "0") == 0) return UINT64_MAX;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (uint64_t)kb * 1024u;
                *what = "MemAvailable";
                break;
            }
        }
        fclose(f);
    }
    uint64_t left = gb_cgroup_left("/proc/self/cgroup", "/sys/fs/cgroup");
    if (left < avail) {
        avail = left;
        *what = "the cgroup's memory limit";
    }
    return avail;
}
