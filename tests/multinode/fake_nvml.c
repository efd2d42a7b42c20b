/* fake_nvml.c - a stand-in libnvidia-ml for test_nvml_topo: the NVML entry
 * points the agent's inventory calls (agent/nvml_dl.h), answering for a
 * machine described by $GB_FAKE_NVML, so the link-matrix logic of
 * agent/inventory.c runs in CI, where there is no GPU and no driver. It
 * shares nvml_dl.h's declarations, so it checks our logic, not our ABI
 * (that is the real driver's job, on a GPU machine):
 *
 *   switch          4 GPUs, 18 active links each to an NVSwitch (HGX-like),
 *                   and every PCIe topology level once
 *   bridge          4 PCIe GPUs, NVLink bridges 0-1 (4 links) and 2-3 (2);
 *                   GPUs 0 and 1 also have a link to an IBM NPU (a CPU),
 *                   and inactive ones
 *   bridge_untyped  the same, from a driver without
 *                   nvmlDeviceGetNvLinkRemoteDeviceType (NOT_SUPPORTED)
 *   switch_untyped  4 GPUs, 12 links each to a switch, untyped
 *   old             2 GPUs; NVLink and topology queries not supported, nor
 *                   the attributes query (SMs come from the core count)
 *   noinit          nvmlInit_v2 fails: the driver is not loaded
 *
 * Telemetry (agent/telemetry.c), scripted over time for the telemetry
 * tests through $GB_FAKE_NVML_TELEMETRY, a file of lines
 *
 *   AT GPU key=value ...
 *
 * AT is "+N" (ms after this process first called nvmlInit_v2) or a Unix
 * time in ms; GPU an index or "*". From AT on, the GPU reads the values the
 * line names (the others stay as they were): sm, mem (MHz), power (W, the
 * power now: NVML_FI_DEV_POWER_INSTANT), avg (W, what
 * nvmlDeviceGetPowerUsage gives, a 1-second average on newer GPUs; default:
 * the power now), temp (C), util (%), used (MiB), reasons (the
 * clocks-event bits, 0x.. allowed), limit (the enforced power limit, W),
 * default (the default limit, W). Lines apply in file order; '#' starts a
 * comment. Without a script: 1980 / 2619 MHz, 300 W of 700 W (default
 * 700), 40 C, 0 %, 0 MiB, no reasons. $GB_FAKE_NVML_DELAY_MS makes every SM
 * clock query take that long (a hung driver). Built with
 * FAKE_NO_EVENT_REASONS it is an older driver: it lacks
 * nvmlDeviceGetCurrentClocksEventReasons (as drivers before the rename do)
 * and nvmlDeviceGetFieldValues. $GB_FAKE_NVML_DENY=I: NVML's GPU I answers
 * NVML_ERROR_NO_PERMISSION to nvmlDeviceGetHandleByIndex_v2, as a GPU
 * outside a job's device cgroup does (nvmlDeviceGetCount_v2 still counts
 * it). */
#define _POSIX_C_SOURCE 200809L
#include "nvml_dl.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX    8

struct nvmlDevice_st {
    int idx;
};
static struct nvmlDevice_st devs[MAX] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static const char *mode(void) {
    const char *m = getenv("GB_FAKE_NVML");
    return m ? m : "";
}
static int is(const char *m) {
    return strcmp(mode(), m) == 0;
}
static int n_gpus(void) {
    return is("old") ? 2 : 4;
}
static void bus_of(int i, char *out, size_t len) {
    snprintf(out, len, "00000000:%02X:00.0", 0x18 + 0x10 * i);
}

static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static pthread_mutex_t base_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t base_ms; /* first nvmlInit_v2 */

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    if (is("noinit")) return NVML_ERROR_DRIVER_NOT_LOADED;
    pthread_mutex_lock(&base_mu);
    if (!base_ms) base_ms = wall_ms();
    pthread_mutex_unlock(&base_mu);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
    return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    return r == NVML_ERROR_DRIVER_NOT_LOADED ? "Driver Not Loaded"
           : r == NVML_ERROR_NO_PERMISSION   ? "Insufficient Permissions"
                                             : "Not Supported";
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned len) {
    snprintf(v, len, "999.1");
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    *v = 12080;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) {
    *n = (unsigned)n_gpus();
    return NVML_SUCCESS;
}
/* bridge_reversed: NVML numbers the GPUs against their PCI order (nvml.h
 * does not promise that order): index i is the GPU on the (n-1-i)-th bus */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
    if ((int)i >= n_gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    /* $GB_FAKE_NVML_DENY: an NVML index this process may not open (a GPU
     * a Slurm job's cgroup leaves out: counted, but not ours) */
    const char *deny = getenv("GB_FAKE_NVML_DENY");
    if (deny && *deny && atoi(deny) == (int)i) return NVML_ERROR_NO_PERMISSION;
    *d = &devs[is("bridge_reversed") ? n_gpus() - 1 - (int)i : (int)i];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) {
    (void)d;
    snprintf(name, len, "%s", is("old") ? "Tesla Old" : "NVIDIA Fake H100");
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned len) {
    snprintf(uuid, len, "GPU-fake-%d", d->idx);
    return NVML_SUCCESS;
}
/* ---- scripted telemetry ---------------------------------------------------- */

enum { K_SM, K_MEM, K_POWER, K_TEMP, K_UTIL, K_USED, K_REASONS, K_LIMIT, K_DEFAULT, K_AVG, K_N };
static const char *const keys[K_N] = {"sm",   "mem",     "power", "temp",    "util",
                                      "used", "reasons", "limit", "default", "avg"};
#define MAX_LINES 256
static struct line {
    int rel; /* AT was +N */
    int64_t at;
    int gpu; /* -1: every GPU */
    int set[K_N];
    double v[K_N];
} lines[MAX_LINES];
static int n_lines;
static pthread_once_t script_once = PTHREAD_ONCE_INIT;

static void script_load(void) {
    const char *path = getenv("GB_FAKE_NVML_TELEMETRY");
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    char buf[512];
    while (f && n_lines < MAX_LINES && fgets(buf, sizeof buf, f)) {
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *save = NULL, *at = strtok_r(buf, " \t\n", &save),
             *gpu = strtok_r(NULL, " \t\n", &save);
        if (!at || !gpu) continue;
        struct line *l = &lines[n_lines++];
        memset(l, 0, sizeof *l);
        l->rel = at[0] == '+';
        l->at = strtoll(at + l->rel, NULL, 10);
        l->gpu = strcmp(gpu, "*") == 0 ? -1 : atoi(gpu);
        for (char *kv; (kv = strtok_r(NULL, " \t\n", &save));) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = '\0';
            for (int k = 0; k < K_N; k++)
                if (strcmp(kv, keys[k]) == 0) {
                    l->set[k] = 1;
                    l->v[k] = strtod(eq + 1, NULL);
                    if (k == K_REASONS) l->v[k] = (double)strtoull(eq + 1, NULL, 0);
                }
        }
    }
    if (f) fclose(f);
}

/* What GPU `gpu` reads now for key k. */
static double reading(int gpu, int k) {
    static const double defaults[K_N] = {1980, 2619, 300, 40, 0, 0, 0, 700, 700, -1};
    pthread_once(&script_once, script_load);
    pthread_mutex_lock(&base_mu);
    int64_t base = base_ms;
    pthread_mutex_unlock(&base_mu);
    int64_t now = wall_ms();
    double v = defaults[k];
    for (int i = 0; i < n_lines; i++) {
        const struct line *l = &lines[i];
        if ((l->gpu >= 0 && l->gpu != gpu) || !l->set[k]) continue;
        if ((l->rel ? base + l->at : l->at) <= now) v = l->v[k];
    }
    return v;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    /* $GB_FAKE_NVML_MEM_GB: the cards' memory (default 80 GiB) */
    const char *gb = getenv("GB_FAKE_NVML_MEM_GB");
    m->total = (gb && atoi(gb) > 0 ? (unsigned long long)atoi(gb) : 80ull) << 30;
    m->used = (unsigned long long)(reading(d->idx, K_USED) * (1 << 20));
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned *clock) {
    if (type == NVML_CLOCK_SM) {
        const char *delay = getenv("GB_FAKE_NVML_DELAY_MS");
        long ms = delay ? atol(delay) : 0;
        if (ms > 0) {
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        *clock = (unsigned)reading(d->idx, K_SM);
        return NVML_SUCCESS;
    }
    if (type == NVML_CLOCK_MEM) {
        *clock = (unsigned)reading(d->idx, K_MEM);
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_SUPPORTED;
}
/* the 1-second average a newer GPU gives here: `avg` when the script sets
 * it, else the power now */
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw) {
    double avg = reading(d->idx, K_AVG);
    *mw = (unsigned)((avg >= 0 ? avg : reading(d->idx, K_POWER)) * 1000 + 0.5);
    return NVML_SUCCESS;
}
#ifndef FAKE_NO_EVENT_REASONS
/* the power now (NVML_FI_DEV_POWER_INSTANT), as an unsigned int or as the
 * nvmlValueType_t in $GB_FAKE_NVML_POWER_TYPE; other fields are
 * unsupported */
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v) {
    const char *type = getenv("GB_FAKE_NVML_POWER_TYPE");
    for (int i = 0; i < n; i++) {
        v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (v[i].fieldId != NVML_FI_DEV_POWER_INSTANT) continue;
        double mw = reading(d->idx, K_POWER) * 1000;
        unsigned long long u = (unsigned long long)(mw + 0.5);
        if (type && *type) v[i].valueType = atoi(type);
        memset(&v[i].value, 0xA5, sizeof v[i].value); /* what a member not written holds */
        switch (v[i].valueType) {
        case NVML_VALUE_TYPE_DOUBLE:
            v[i].value.dVal = mw;
            break;
        case NVML_VALUE_TYPE_UNSIGNED_LONG:
            v[i].value.ulVal = (unsigned long)u;
            break;
        case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
            v[i].value.ullVal = u;
            break;
        case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
            v[i].value.sllVal = (long long)u;
            break;
        case NVML_VALUE_TYPE_SIGNED_INT:
            v[i].value.siVal = (int)u;
            break;
        case NVML_VALUE_TYPE_UNSIGNED_SHORT:
            v[i].value.usVal = (unsigned short)u;
            break;
        default:
            v[i].value.uiVal = (unsigned)u;
        }
        v[i].nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw) {
    *mw = (unsigned)(reading(d->idx, K_LIMIT) * 1000 + 0.5);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned *mw) {
    *mw = (unsigned)(reading(d->idx, K_DEFAULT) * 1000 + 0.5);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                             unsigned *temp) {
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = (unsigned)reading(d->idx, K_TEMP);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    u->gpu = (unsigned)reading(d->idx, K_UTIL);
    u->memory = u->gpu / 2;
    return NVML_SUCCESS;
}
#ifndef FAKE_NO_EVENT_REASONS
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                           unsigned long long *reasons) {
    *reasons = (unsigned long long)reading(d->idx, K_REASONS);
    return NVML_SUCCESS;
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                              unsigned long long *reasons) {
    *reasons = (unsigned long long)reading(d->idx, K_REASONS);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *maj, int *min) {
    (void)d;
    *maj = 9;
    *min = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    bus_of(d->idx, p->busId, sizeof p->busId);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a) {
    (void)d;
    if (is("old")) return NVML_ERROR_NOT_SUPPORTED;
    memset(a, 0, sizeof *a);
    a->multiprocessorCount = 132;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t d, unsigned *cores) {
    (void)d;
    *cores = 16896; /* H100 SXM: 132 SMs x 128 */
    return NVML_SUCCESS;
}

/* The far end of (gpu, link): 'g' + peer, 's' switch, 'n' NPU, 'x'
 * inactive, 0 past the last link. */
static int far_end(int gpu, unsigned link, int *peer) {
    if (is("switch")) return link < 18 ? 's' : 0;
    if (is("switch_untyped")) return link < 12 ? 's' : 0;
    if (is("bridge") || is("bridge_untyped") || is("bridge_gaps") || is("bridge_short_ids") ||
        is("bridge_reversed")) {
        if (link >= 6) return 0;
        if (gpu < 2 && link < 4) {
            *peer = 1 - gpu;
            return 'g';
        }
        if (gpu >= 2 && link < 2) {
            *peer = 5 - gpu;
            return 'g';
        }
        if (gpu < 2 && link == 4) return 'n';
        return 'x';
    }
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, nvmlEnableState_t *s) {
    if (is("old")) return NVML_ERROR_NOT_SUPPORTED;
    /* bridge_gaps: the bridge machine with link 0 of every GPU fused off,
     * answered "not supported", and link 1 "invalid" */
    if (is("bridge_gaps") && link == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (is("bridge_gaps") && link == 1) return NVML_ERROR_INVALID_ARGUMENT;
    int peer = -1, e = far_end(d->idx, link, &peer);
    if (!e) return NVML_ERROR_INVALID_ARGUMENT;
    *s = e == 'x' ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link,
                                                        nvmlPciInfo_t *p) {
    int peer = -1, e = far_end(d->idx, link, &peer);
    if (!e || e == 'x') return NVML_ERROR_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    if (e == 'g' && is("bridge_short_ids")) /* 4-digit domain, lower case */
        snprintf(p->busId, sizeof p->busId, "0000:%02x:00.0", 0x18 + 0x10 * peer);
    else if (e == 'g')
        bus_of(peer, p->busId, sizeof p->busId);
    else
        snprintf(p->busId, sizeof p->busId, e == 's' ? "00000000:C0:00.0" : "00000000:04:00.1");
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned link,
                                                        nvmlIntNvLinkDeviceType_t *t) {
    if (is("bridge_untyped") || is("switch_untyped")) return NVML_ERROR_NOT_SUPPORTED;
    int peer = -1, e = far_end(d->idx, link, &peer);
    if (!e || e == 'x') return NVML_ERROR_INVALID_ARGUMENT;
    *t = e == 'g'   ? NVML_NVLINK_DEVICE_TYPE_GPU
         : e == 's' ? NVML_NVLINK_DEVICE_TYPE_SWITCH
                    : NVML_NVLINK_DEVICE_TYPE_IBMNPU;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                        nvmlGpuTopologyLevel_t *level) {
    if (is("old")) return NVML_ERROR_NOT_SUPPORTED;
    /* pairs in order (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) */
    static const nvmlGpuTopologyLevel_t levels[4][4] = {
        {0, NVML_TOPOLOGY_SINGLE, NVML_TOPOLOGY_MULTIPLE, NVML_TOPOLOGY_HOSTBRIDGE},
        {0, 0, NVML_TOPOLOGY_NODE, NVML_TOPOLOGY_SYSTEM},
        {0, 0, 0, NVML_TOPOLOGY_INTERNAL},
        {0, 0, 0, 0}};
    int i = a->idx < b->idx ? a->idx : b->idx, j = a->idx < b->idx ? b->idx : a->idx;
    *level = levels[i][j];
    return NVML_SUCCESS;
}
