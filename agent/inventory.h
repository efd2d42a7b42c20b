/* inventory.h - what the agent tells the coordinator about its node: host
 * name, CPU model, cores, memory, OS and kernel, and every GPU through NVML
 * (loaded with dlopen; none on a machine without the driver, with the reason
 * kept in nvml_error), plus the GPU pair link matrix: NVLink lanes and the
 * PCIe path between every two GPUs. */
#ifndef GB_AGENT_INVENTORY_H
#define GB_AGENT_INVENTORY_H

#include <stddef.h>
#include <stdint.h>

#define GB_INV_MAX_GPUS 64

typedef struct gb_gpu_info {
    char name[96], uuid[96], pci_bus_id[32];
    uint64_t memory_bytes;
    unsigned sm_count; /* 0: unknown */
    unsigned cc_major, cc_minor, pcie_gen, pcie_width;
    unsigned power_limit_mw;
} gb_gpu_info_t;

typedef struct gb_link_info {
    unsigned gpu_a, gpu_b; /* gpu_a < gpu_b */
    unsigned nvlink_lanes;
    char pcie_path[16]; /* same_board | single_switch | multi_switch | host_bridge | numa_node |
                           cross_socket | unknown */
} gb_link_info_t;

typedef struct gb_inventory {
    char hostname[128], cpu_model[256], os[256], kernel[256];
    char driver_version[96], cuda_driver_version[32], nvml_error[256];
    unsigned cpu_cores;
    uint64_t memory_bytes;
    int n_gpus;
    gb_gpu_info_t gpus[GB_INV_MAX_GPUS];
    int n_links;
    gb_link_info_t links[GB_INV_MAX_GPUS * (GB_INV_MAX_GPUS - 1) / 2];
} gb_inventory_t;

/* Fill inv. Never fails: without NVML (no library, no driver, a library
 * missing a required function) it reports zero GPUs and says why in
 * nvml_error. The NVML library is $GB_NVML_LIB when set, else
 * libnvidia-ml.so.1. */
void gb_inventory_collect(gb_inventory_t *inv);

/* "same_board" ... for an NVML topology level. */
const char *gb_pcie_path_name(int nvml_level);
/* CUDA cores per SM for a compute capability (0 when unknown), to derive the
 * SM count from nvmlDeviceGetNumGpuCores where the attributes query is MIG-only. */
unsigned gb_cores_per_sm(unsigned major, unsigned minor);

#endif
