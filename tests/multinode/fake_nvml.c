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
 *   noinit          nvmlInit_v2 fails: the driver is not loaded */
#include "nvml_dl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    return is("noinit") ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
    return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    return r == NVML_ERROR_DRIVER_NOT_LOADED ? "Driver Not Loaded" : "Not Supported";
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
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
    if ((int)i >= n_gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devs[i];
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
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    (void)d;
    m->total = 80ull << 30;
    m->free = m->total;
    m->used = 0;
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
    if (is("bridge") || is("bridge_untyped")) {
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
    if (e == 'g')
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
