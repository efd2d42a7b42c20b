/* engine_util.c - what the engine driver and the backends share (engine.h),
 * in gb_model so that every build with the model has it, the GPU machine's
 * (bench/gpu, no engine driver) and libgpubench_cuda.so included: the
 * precisions' names, the wall clock of the timed windows and the replicas'
 * data seeds. */
#define _POSIX_C_SOURCE 200809L
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

uint64_t gb_mem_available(const char **what) {
    uint64_t avail = UINT64_MAX, lim, used;
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
    /* a cgroup's usage counts its page cache, which the kernel reclaims
     * before it kills: what is left is the limit less the rest */
    uint64_t cache = 0;
    int cg = 0;
    if (read_u64_file("/sys/fs/cgroup/memory.max", &lim) &&
        read_u64_file("/sys/fs/cgroup/memory.current", &used)) {
        cache = stat_key("/sys/fs/cgroup/memory.stat", "file");
        cg = 1;
    } else if (read_u64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes", &lim) &&
               read_u64_file("/sys/fs/cgroup/memory/memory.usage_in_bytes", &used)) {
        cache = stat_key("/sys/fs/cgroup/memory/memory.stat", "total_cache");
        cg = 1;
    }
    if (cg) {
        used = used > cache ? used - cache : 0;
        uint64_t left = lim > used ? lim - used : 0;
        if (left < avail) {
            avail = left;
            *what = "the cgroup's memory limit";
        }
    }
    return avail;
}
