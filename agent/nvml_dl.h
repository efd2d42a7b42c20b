/* nvml_dl.h - the few NVML types and functions the agent's inventory and
 * telemetry sampler use, declared here because there is no nvml.h on the
 * build machines. NVML is loaded at run time with
 * dlopen("libnvidia-ml.so.1"); nothing links it.
 *
 * Every declaration mirrors NVIDIA's nvml.h (NVML API version 11 and later;
 * the versioned entry points _v2/_v3 are the ones nvml.h maps the plain names
 * to). Struct layouts and enum values must match it byte for byte: do not
 * edit without the header at hand.
 *
 * Checked (2026-12-04) against nvml.h as NVIDIA/go-nvml vendors it,
 * gen/nvml/nvml.h at commit 8b8585bde8bb ("sync nvml.h with CUDA version
 * 13.3", NVML_API_VERSION 13): every symbol name and version suffix below
 * against the header's plain-to-versioned name mapping, every prototype
 * (assigning the header's functions to these pointers compiles without an
 * incompatible-pointer warning), every constant, enum value and buffer
 * size, and every struct's size and member offsets (compiled against both
 * headers and compared; the asserts at the end keep them). Not checked:
 * what a given driver's libnvidia-ml.so.1 exports (no GPU machine), and
 * nvml.h marks nvmlDeviceGetTemperature and
 * nvmlDeviceGetCurrentClocksThrottleReasons deprecated as of 13.0 (still
 * declared; nvmlDeviceGetTemperatureV is the successor). */
#ifndef GB_NVML_DL_H
#define GB_NVML_DL_H

#include <stddef.h>

typedef int nvmlReturn_t; /* enum nvmlReturn_enum */
#define NVML_SUCCESS                  0
#define NVML_ERROR_UNINITIALIZED      1
#define NVML_ERROR_INVALID_ARGUMENT   2
#define NVML_ERROR_NOT_SUPPORTED      3
#define NVML_ERROR_NO_PERMISSION      4
#define NVML_ERROR_NOT_FOUND          6
#define NVML_ERROR_DRIVER_NOT_LOADED  9
#define NVML_ERROR_TIMEOUT            10
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST        15

typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16
#define NVML_NVLINK_MAX_LINKS                  36 /* nvml.h of CUDA 13.3; 18 in 12.x-13.2, 12 in 11.x */

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/* What the far end of an NVLink is. */
typedef enum nvmlIntNvLinkDeviceType_enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01, /* a POWER CPU */
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02, /* an NVSwitch */
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,    /* same board (multi-GPU card) */
    NVML_TOPOLOGY_SINGLE = 10,     /* one PCIe switch */
    NVML_TOPOLOGY_MULTIPLE = 20,   /* several PCIe switches, no host bridge */
    NVML_TOPOLOGY_HOSTBRIDGE = 30, /* the same host bridge */
    NVML_TOPOLOGY_NODE = 40,       /* the same NUMA node, several host bridges */
    NVML_TOPOLOGY_SYSTEM = 50      /* across the SMP interconnect (sockets) */
} nvmlGpuTopologyLevel_t;

/* Telemetry (agent/telemetry.c). */
typedef enum nvmlClockType_enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0 /* the GPU die */
} nvmlTemperatureSensors_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;    /* % of the last sample period a kernel ran */
    unsigned int memory; /* % of it device memory was read or written */
} nvmlUtilization_t;

/* Field values (nvmlDeviceGetFieldValues): the one read here is the power
 * now; nvmlDeviceGetPowerUsage is a 1-second average on Ampere (but GA100)
 * and newer, which lags a step's power by about a second. */
#define NVML_FI_DEV_POWER_INSTANT 186 /* mW, "current GPU power", every architecture */
typedef int nvmlValueType_t;          /* enum nvmlValueType_enum: which member of value */
#define NVML_VALUE_TYPE_DOUBLE             0
#define NVML_VALUE_TYPE_UNSIGNED_INT       1
#define NVML_VALUE_TYPE_UNSIGNED_LONG      2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG   4
#define NVML_VALUE_TYPE_SIGNED_INT         5
#define NVML_VALUE_TYPE_UNSIGNED_SHORT     6
typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlFieldValue_st {
    unsigned int fieldId; /* set by the caller */
    unsigned int scopeId; /* 0 */
    long long timestamp;  /* us since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn; /* this field's own result */
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlClocksEventReasons (the bits of nvmlDeviceGetCurrentClocksEventReasons;
 * nvml.h kept the older nvmlClocksThrottleReason* names as aliases of the
 * same values). */
#define nvmlClocksEventReasonGpuIdle                   0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap                0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown             0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost                 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown         0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown      0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown   0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting       0x0000000000000100ULL

/* The layouts nvml.h gives these structs on LP64 Linux (x86_64, aarch64),
 * measured from go-nvml's gen/nvml/nvml.h (above). */
_Static_assert(sizeof(nvmlPciInfo_t) == 68 && offsetof(nvmlPciInfo_t, domain) == 16 &&
                   offsetof(nvmlPciInfo_t, pciSubSystemId) == 32 &&
                   offsetof(nvmlPciInfo_t, busId) == 36,
               "nvmlPciInfo_t as in nvml.h");
_Static_assert(sizeof(nvmlMemory_t) == 24 && offsetof(nvmlMemory_t, used) == 16,
               "nvmlMemory_t as in nvml.h");
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40 &&
                   offsetof(nvmlDeviceAttributes_t, memorySizeMB) == 32,
               "nvmlDeviceAttributes_t as in nvml.h");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t as in nvml.h");
_Static_assert(sizeof(nvmlValue_t) == 8 && sizeof(nvmlFieldValue_t) == 40 &&
                   offsetof(nvmlFieldValue_t, timestamp) == 8 &&
                   offsetof(nvmlFieldValue_t, valueType) == 24 &&
                   offsetof(nvmlFieldValue_t, nvmlReturn) == 28 &&
                   offsetof(nvmlFieldValue_t, value) == 32,
               "nvmlFieldValue_t as in nvml.h");
_Static_assert(sizeof(nvmlEnableState_t) == 4 && sizeof(nvmlIntNvLinkDeviceType_t) == 4 &&
                   sizeof(nvmlGpuTopologyLevel_t) == 4 && sizeof(nvmlClockType_t) == 4 &&
                   sizeof(nvmlTemperatureSensors_t) == 4,
               "NVML enums are 4 bytes");

/* The entry points, as function pointers filled by dlsym. */
typedef struct gb_nvml {
    void *lib;
    nvmlReturn_t (*Init)(void);     /* nvmlInit_v2 */
    nvmlReturn_t (*Shutdown)(void); /* nvmlShutdown */
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*SystemGetDriverVersion)(char *version, unsigned int length);
    nvmlReturn_t (*SystemGetCudaDriverVersion)(int *version);
    nvmlReturn_t (*DeviceGetCount)(unsigned int *count);                        /* _v2 */
    nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int index, nvmlDevice_t *); /* _v2 */
    nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char *name, unsigned int length);
    nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char *uuid, unsigned int length);
    nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int *major, int *minor);
    nvmlReturn_t (*DeviceGetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int *gen);
    nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int *width);
    nvmlReturn_t (*DeviceGetPowerManagementLimit)(nvmlDevice_t, unsigned int *milliwatts);
    nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *); /* _v3 */
    /* optional: NULL when the library lacks them */
    nvmlReturn_t (*DeviceGetAttributes)(nvmlDevice_t, nvmlDeviceAttributes_t *); /* _v2 */
    nvmlReturn_t (*DeviceGetNumGpuCores)(nvmlDevice_t, unsigned int *cores);
    nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int link, nvmlEnableState_t *);
    nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int link,
                                                 nvmlPciInfo_t *); /* _v2 */
    nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int link,
                                                    nvmlIntNvLinkDeviceType_t *); /* NVML 11+ */
    nvmlReturn_t (*DeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t,
                                                    nvmlGpuTopologyLevel_t *);
    /* telemetry, all optional */
    nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, nvmlClockType_t type, unsigned int *clock);
    nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int *power); /* mW */
    nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int valuesCount, nvmlFieldValue_t *values);
    nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, nvmlTemperatureSensors_t sensorType,
                                         unsigned int *temp);
    nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *utilization);
    /* the newer name (newer drivers only); the older one below
     * is the same query and stays exported, deprecated */
    nvmlReturn_t (*DeviceGetCurrentClocksEventReasons)(nvmlDevice_t,
                                                       unsigned long long *clocksEventReasons);
    nvmlReturn_t (*DeviceGetCurrentClocksThrottleReasons)(
        nvmlDevice_t, unsigned long long *clocksThrottleReasons);
    nvmlReturn_t (*DeviceGetEnforcedPowerLimit)(nvmlDevice_t, unsigned int *limit); /* mW */
    nvmlReturn_t (*DeviceGetPowerManagementDefaultLimit)(nvmlDevice_t,
                                                         unsigned int *defaultLimit); /* mW */
} gb_nvml_t;

/* Load NVML ($GB_NVML_LIB, else libnvidia-ml.so.1) into nv and resolve its
 * entry points (agent/inventory.c); does not call nvmlInit. 0, or -1 with
 * the reason (nv->lib may then be open: dlclose it). */
int gb_nvml_load(gb_nvml_t *nv, char *why, size_t whylen);

/* perm[c]: the NVML index of the c-th of NVML's GPUs 0..n-1 in PCI bus id
 * order (domain, bus, device, function ascending), which is CUDA's order
 * under CUDA_DEVICE_ORDER=PCI_BUS_ID. nvml.h (go-nvml gen/nvml/nvml.h,
 * CUDA 13.3) says NVML's own index order is not guaranteed and "may not
 * correlate" with CUDA's device index, so a CUDA index is mapped through
 * this, not used as an NVML index. A GPU whose handle NVML refuses with
 * NVML_ERROR_NO_PERMISSION (outside this process's device cgroup: NVML
 * counts it, CUDA does not see it) is left out, so perm[0..m-1] are the
 * GPUs this process can open, CUDA's 0..m-1. Returns m, or -1 (n over 64,
 * or a GPU that answers another error or whose bus id cannot be read):
 * perm is then 0..n-1, NVML's order. After nvmlInit (agent/inventory.c). */
int gb_nvml_pci_order(const gb_nvml_t *nv, unsigned n, int *perm);

#endif
