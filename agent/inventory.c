/* inventory.c - see inventory.h. */
#define _GNU_SOURCE
#include "inventory.h"

#include "gb_log.h"
#include "gb_sysinfo.h"
#include "gb_util.h"
#include "nvml_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gb_pcie_path_name(int level) {
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
        return "same_board";
    case NVML_TOPOLOGY_SINGLE:
        return "single_switch";
    case NVML_TOPOLOGY_MULTIPLE:
        return "multi_switch";
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return "host_bridge";
    case NVML_TOPOLOGY_NODE:
        return "numa_node";
    case NVML_TOPOLOGY_SYSTEM:
        return "cross_socket";
    default:
        return "unknown";
    }
}

/* The CUDA programming guide's table of arithmetic units per multiprocessor
 * (FP32 lanes): 6.0 and 7.x and 8.0 have 64, the others listed 128. */
unsigned gb_cores_per_sm(unsigned major, unsigned minor) {
    switch (major) {
    case 6:
        return minor == 0 ? 64 : 128;
    case 7:
        return 64;
    case 8:
        return minor == 0 ? 64 : 128;
    case 9:
    case 10:
    case 12:
        return 128;
    default:
        return 0;
    }
}

#define SYM(field, name, required)                                                                 \
    do {                                                                                           \
        *(void **)&nv->field = dlsym(nv->lib, name);                                               \
        if (!nv->field && (required)) {                                                            \
            gb_fmt(why, whylen, "%s has no %s", path, name);                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

int gb_nvml_load(gb_nvml_t *nv, char *why, size_t whylen) {
    const char *path = getenv("GB_NVML_LIB");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    memset(nv, 0, sizeof *nv);
    nv->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) {
        gb_fmt(why, whylen, "NVML not loaded (%s): no NVIDIA driver on this node", dlerror());
        return -1;
    }
    SYM(Init, "nvmlInit_v2", 1);
    SYM(Shutdown, "nvmlShutdown", 1);
    SYM(ErrorString, "nvmlErrorString", 1);
    SYM(SystemGetDriverVersion, "nvmlSystemGetDriverVersion", 1);
    SYM(SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion", 0);
    SYM(DeviceGetCount, "nvmlDeviceGetCount_v2", 1);
    SYM(DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", 1);
    SYM(DeviceGetName, "nvmlDeviceGetName", 1);
    SYM(DeviceGetUUID, "nvmlDeviceGetUUID", 1);
    SYM(DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", 1);
    SYM(DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", 1);
    SYM(DeviceGetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration", 0);
    SYM(DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", 0);
    SYM(DeviceGetPowerManagementLimit, "nvmlDeviceGetPowerManagementLimit", 0);
    SYM(DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", 1);
    SYM(DeviceGetAttributes, "nvmlDeviceGetAttributes_v2", 0);
    SYM(DeviceGetNumGpuCores, "nvmlDeviceGetNumGpuCores", 0);
    SYM(DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", 0);
    SYM(DeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", 0);
    SYM(DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType", 0);
    SYM(DeviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor", 0);
    SYM(DeviceGetClockInfo, "nvmlDeviceGetClockInfo", 0);
    SYM(DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage", 0);
    SYM(DeviceGetFieldValues, "nvmlDeviceGetFieldValues", 0);
    SYM(DeviceGetTemperature, "nvmlDeviceGetTemperature", 0);
    SYM(DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates", 0);
    SYM(DeviceGetCurrentClocksEventReasons, "nvmlDeviceGetCurrentClocksEventReasons", 0);
    SYM(DeviceGetCurrentClocksThrottleReasons, "nvmlDeviceGetCurrentClocksThrottleReasons", 0);
    SYM(DeviceGetEnforcedPowerLimit, "nvmlDeviceGetEnforcedPowerLimit", 0);
    SYM(DeviceGetPowerManagementDefaultLimit, "nvmlDeviceGetPowerManagementDefaultLimit", 0);
    return 0;
}

/* Two PCI bus ids ("domain:bus:device.function", hex) name the same
 * device: compared as numbers, as kernels/cuda/cuda_dp.c compares them, so
 * the domain's width (8 digits in nvmlPciInfo_t.busId, 4 in busIdLegacy
 * and in CUDA's ids) and the case (NCCL notes older drivers answer the
 * NVLink far end's id in lower case) do not matter. */
static int same_bus(const char *a, const char *b) {
    unsigned da, ba, va, fa, db, bb, vb, fb;
    if (sscanf(a, "%x:%x:%x.%x", &da, &ba, &va, &fa) != 4 ||
        sscanf(b, "%x:%x:%x.%x", &db, &bb, &vb, &fb) != 4)
        return strcasecmp(a, b) == 0;
    return da == db && ba == bb && va == vb && fa == fb;
}

int gb_nvml_pci_order(const gb_nvml_t *nv, unsigned n, int *perm) {
    unsigned long long key[64];
    for (unsigned i = 0; i < n; i++)
        perm[i] = (int)i;
    if (n > 64) return -1;
    unsigned m = 0; /* the GPUs this process may open */
    for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t d;
        nvmlPciInfo_t pci;
        unsigned dom, bus, dev, fn;
        nvmlReturn_t rc = nv->DeviceGetHandleByIndex(i, &d);
        if (rc == NVML_ERROR_NO_PERMISSION) continue; /* counted, not ours: CUDA skips it too */
        if (rc != NVML_SUCCESS || nv->DeviceGetPciInfo(d, &pci) != NVML_SUCCESS ||
            sscanf(pci.busId, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
            for (unsigned k = 0; k < n; k++)
                perm[k] = (int)k;
            return -1;
        }
        key[i] = (unsigned long long)dom << 32 | (unsigned long long)(bus & 0xffff) << 16 |
                 (dev & 0xff) << 8 | (fn & 0xff);
        perm[m++] = (int)i;
    }
    for (unsigned i = 1; i < m; i++) /* insertion sort: stable, m is small */
        for (unsigned j = i; j > 0 && key[perm[j - 1]] > key[perm[j]]; j--) {
            int t = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = t;
        }
    return (int)m;
}

/* Only the GPUs CUDA_VISIBLE_DEVICES leaves to this agent's jobs, as CUDA
 * reads it: indices or GPU UUIDs (a unique prefix, "GPU-" included), in
 * that order, up to the first entry that names none (or names one twice);
 * empty hides every GPU. The workers run with CUDA_DEVICE_ORDER=PCI_BUS_ID,
 * and the list is in PCI bus id order, so CUDA's indices are the list's
 * (gb_nvml_pci_order). MIG names are left alone: the inventory
 * lists whole GPUs. Job GPU i is then the list's GPU keep[i] (in PCI
 * order), as the telemetry maps it (gb_tm_gpu_indices, then
 * gb_nvml_pci_order to NVML's index). */
static void visible_only(gb_inventory_t *inv, nvmlDevice_t *dev) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd || strstr(cvd, "MIG-")) return;
    int keep[GB_INV_MAX_GPUS], n = 0, total = inv->n_gpus;
    char stop[128] = "";
    const char *p = cvd;
    while (*p && n < inv->n_gpus) {
        size_t len = strcspn(p, ",");
        char tok[128];
        gb_fmt(tok, sizeof tok, "%.*s", (int)(len < sizeof tok ? len : sizeof tok - 1), p);
        int idx = -1;
        char *end = NULL;
        long v = strtol(tok, &end, 10);
        if (tok[0] >= '0' && tok[0] <= '9' && *end == '\0') {
            if (v < inv->n_gpus) idx = (int)v;
        } else if (strncmp(tok, "GPU-", 4) == 0) {
            for (int g = 0; g < inv->n_gpus; g++)
                if (strncmp(inv->gpus[g].uuid, tok, strlen(tok)) == 0) {
                    if (idx >= 0) { /* not unique */
                        idx = -1;
                        break;
                    }
                    idx = g;
                }
        }
        for (int k = 0; k < n && idx >= 0; k++)
            if (keep[k] == idx) idx = -1;
        if (idx < 0) {
            gb_copy(stop, sizeof stop, tok);
            break;
        }
        keep[n++] = idx;
        p += len;
        if (*p == ',') p++;
    }
    gb_gpu_info_t g2[GB_INV_MAX_GPUS];
    nvmlDevice_t d2[GB_INV_MAX_GPUS];
    for (int i = 0; i < n; i++) {
        g2[i] = inv->gpus[keep[i]];
        d2[i] = dev[keep[i]];
    }
    for (int i = 0; i < n; i++) {
        inv->gpus[i] = g2[i];
        dev[i] = d2[i];
    }
    inv->n_gpus = n;
    /* a GPU hidden is said, and why the list stopped where it did (the
     * node said only "0 GPU(s)" or "1 GPU(s)") */
    if (stop[0])
        gb_warn("CUDA_VISIBLE_DEVICES='%s' shows %d of the %d GPU(s) NVML lists: it stops at "
                "'%s' (not a GPU of this node, or one given twice: CUDA ignores the rest too)",
                cvd, n, total, stop);
    else if (n < total)
        gb_info("CUDA_VISIBLE_DEVICES='%s' shows %d of the %d GPU(s) NVML lists", cvd, n, total);
}

static void nvml_collect(gb_inventory_t *inv) {
    gb_nvml_t nv;
    char why[256];
    if (gb_nvml_load(&nv, why, sizeof why) != 0) {
        gb_copy(inv->nvml_error, sizeof inv->nvml_error, why);
        if (nv.lib) dlclose(nv.lib);
        return;
    }
    nvmlReturn_t rc = nv.Init();
    if (rc != NVML_SUCCESS) {
        gb_fmt(inv->nvml_error, sizeof inv->nvml_error, "nvmlInit: %s", nv.ErrorString(rc));
        dlclose(nv.lib);
        return;
    }
    nv.SystemGetDriverVersion(inv->driver_version, sizeof inv->driver_version);
    int cuda = 0;
    if (nv.SystemGetCudaDriverVersion && nv.SystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS)
        gb_fmt(inv->cuda_driver_version, sizeof inv->cuda_driver_version, "%d.%d", cuda / 1000,
               (cuda % 1000) / 10);
    unsigned count = 0;
    if ((rc = nv.DeviceGetCount(&count)) != NVML_SUCCESS) {
        gb_fmt(inv->nvml_error, sizeof inv->nvml_error, "nvmlDeviceGetCount: %s",
               nv.ErrorString(rc));
        count = 0;
    }
    if (count > GB_INV_MAX_GPUS) count = GB_INV_MAX_GPUS;
    /* listed in PCI bus id order, CUDA's (the workers run with
     * CUDA_DEVICE_ORDER=PCI_BUS_ID), not in NVML's index order */
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (count && order && strcmp(order, "PCI_BUS_ID") != 0)
        gb_warn("CUDA_DEVICE_ORDER=%.40s in the agent's environment: its workers run with "
                "PCI_BUS_ID, the order of its inventory and telemetry (and of "
                "CUDA_VISIBLE_DEVICES' indices here)",
                order);
    int perm[GB_INV_MAX_GPUS];
    int mine = gb_nvml_pci_order(&nv, count, perm);
    if (mine >= 0 && (unsigned)mine < count) {
        /* a device cgroup (Slurm's ConstrainDevices) leaves this agent
         * some: NVML counts them all, and a GPU it may not open stopped
         * the list there (the GPUs after it were not listed) */
        gb_info("NVML lists %u GPU(s), %d of them this agent's to open (the others answer "
                "\"%s\"): those %d are its GPUs",
                count, mine, nv.ErrorString(NVML_ERROR_NO_PERMISSION), mine);
        count = (unsigned)mine;
    }
    nvmlDevice_t dev[GB_INV_MAX_GPUS];
    unsigned switch_lanes[GB_INV_MAX_GPUS] = {
        0}; /* lanes to something that is not one of our GPUs */
    for (unsigned c = 0; c < count; c++) {
        unsigned i = (unsigned)perm[c];
        gb_gpu_info_t *g = &inv->gpus[inv->n_gpus];
        memset(g, 0, sizeof *g);
        if ((rc = nv.DeviceGetHandleByIndex(i, &dev[inv->n_gpus])) != NVML_SUCCESS) {
            gb_fmt(inv->nvml_error, sizeof inv->nvml_error, "GPU %u: %s", i, nv.ErrorString(rc));
            break;
        }
        nvmlDevice_t d = dev[inv->n_gpus];
        if (nv.DeviceGetName(d, g->name, sizeof g->name) != NVML_SUCCESS || !g->name[0])
            gb_copy(g->name, sizeof g->name, "unknown NVIDIA GPU");
        nv.DeviceGetUUID(d, g->uuid, sizeof g->uuid);
        nvmlMemory_t mem;
        if (nv.DeviceGetMemoryInfo(d, &mem) == NVML_SUCCESS) g->memory_bytes = mem.total;
        int maj = 0, min = 0;
        if (nv.DeviceGetCudaComputeCapability(d, &maj, &min) == NVML_SUCCESS) {
            g->cc_major = (unsigned)maj;
            g->cc_minor = (unsigned)min;
        }
        nvmlDeviceAttributes_t attr;
        unsigned cores = 0;
        if (nv.DeviceGetAttributes && nv.DeviceGetAttributes(d, &attr) == NVML_SUCCESS)
            g->sm_count = attr.multiprocessorCount;
        else if (nv.DeviceGetNumGpuCores && nv.DeviceGetNumGpuCores(d, &cores) == NVML_SUCCESS &&
                 gb_cores_per_sm(g->cc_major, g->cc_minor))
            g->sm_count = cores / gb_cores_per_sm(g->cc_major, g->cc_minor);
        if (nv.DeviceGetMaxPcieLinkGeneration) nv.DeviceGetMaxPcieLinkGeneration(d, &g->pcie_gen);
        if (nv.DeviceGetMaxPcieLinkWidth) nv.DeviceGetMaxPcieLinkWidth(d, &g->pcie_width);
        if (nv.DeviceGetPowerManagementLimit)
            nv.DeviceGetPowerManagementLimit(d, &g->power_limit_mw);
        nvmlPciInfo_t pci;
        if (nv.DeviceGetPciInfo(d, &pci) == NVML_SUCCESS)
            gb_copy(g->pci_bus_id, sizeof g->pci_bus_id, pci.busId);
        inv->n_gpus++;
    }
    visible_only(inv, dev);
    /* Link matrix: count active NVLinks from each GPU to each peer GPU (by
     * the remote PCI bus id) and to NVSwitches; two GPUs both on NVSwitches
     * reach each other over min(their switch lanes), as nvidia-smi counts
     * them (NV18 between any two GPUs of an HGX H100). What the far end is
     * comes from nvmlDeviceGetNvLinkRemoteDeviceType where the driver has
     * it, so a link to a CPU (IBM POWER's NPU) counts as neither; without
     * it, a remote bus id that is not one of our GPUs is taken for a
     * switch. */
    unsigned lanes[GB_INV_MAX_GPUS][GB_INV_MAX_GPUS];
    memset(lanes, 0, sizeof lanes);
    for (int i = 0; i < inv->n_gpus && nv.DeviceGetNvLinkState && nv.DeviceGetNvLinkRemotePciInfo;
         i++) {
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t active = NVML_FEATURE_DISABLED;
            /* every link index is asked: an error says nothing of the
             * links after it. nvml.h (go-nvml gen/nvml/nvml.h, CUDA 13.3)
             * has NOT_SUPPORTED for a device without the feature and
             * INVALID_ARGUMENT for an invalid link, but a GPU sold with
             * some of its links fused off (A800, H800) may answer either
             * for a link below an active one; NCCL's topology scan and
             * kernels/cuda/cuda_dp.c skip such a link too */
            rc = nv.DeviceGetNvLinkState(dev[i], l, &active);
            if (rc != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
            nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            int typed = nv.DeviceGetNvLinkRemoteDeviceType &&
                        nv.DeviceGetNvLinkRemoteDeviceType(dev[i], l, &type) == NVML_SUCCESS;
            if (typed && type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
                switch_lanes[i]++;
                continue;
            }
            if (typed && type != NVML_NVLINK_DEVICE_TYPE_GPU) continue; /* a CPU, or unknown */
            nvmlPciInfo_t remote;
            if (nv.DeviceGetNvLinkRemotePciInfo(dev[i], l, &remote) != NVML_SUCCESS) continue;
            int peer = -1;
            for (int j = 0; j < inv->n_gpus; j++)
                if (j != i && same_bus(remote.busId, inv->gpus[j].pci_bus_id)) peer = j;
            if (peer >= 0)
                lanes[i][peer]++;
            else if (!typed)
                switch_lanes[i]++;
        }
    }
    for (int a = 0; a < inv->n_gpus; a++)
        for (int b = a + 1; b < inv->n_gpus; b++) {
            gb_link_info_t *lk = &inv->links[inv->n_links++];
            lk->gpu_a = (unsigned)a;
            lk->gpu_b = (unsigned)b;
            unsigned direct = lanes[a][b] > lanes[b][a] ? lanes[a][b] : lanes[b][a];
            unsigned via = switch_lanes[a] < switch_lanes[b] ? switch_lanes[a] : switch_lanes[b];
            lk->nvlink_lanes = direct + via;
            nvmlGpuTopologyLevel_t level;
            const char *path = "unknown";
            if (nv.DeviceGetTopologyCommonAncestor &&
                nv.DeviceGetTopologyCommonAncestor(dev[a], dev[b], &level) == NVML_SUCCESS)
                path = gb_pcie_path_name((int)level);
            gb_copy(lk->pcie_path, sizeof lk->pcie_path, path);
        }
    nv.Shutdown();
    dlclose(nv.lib);
}

void gb_inventory_collect(gb_inventory_t *inv) {
    memset(inv, 0, sizeof *inv);
    gb_sys_hostname(inv->hostname, sizeof inv->hostname);
    gb_sys_cpu_model(inv->cpu_model, sizeof inv->cpu_model);
    gb_sys_os(inv->os, sizeof inv->os);
    gb_sys_kernel(inv->kernel, sizeof inv->kernel);
    inv->cpu_cores = (unsigned)gb_sys_cpu_cores();
    inv->memory_bytes = gb_sys_memory_bytes();
    nvml_collect(inv);
}
