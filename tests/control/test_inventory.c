/* test_inventory.c - the agent's inventory (agent/inventory.c) on this
 * machine: host facts are read, and without NVML there are zero GPUs and a
 * reason; an NVML path that is not NVML is refused by name. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "check.h"
#include "inventory.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    gb_inventory_t *inv = calloc(1, sizeof *inv);
    CHECK(inv);
    setenv("GB_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    gb_inventory_collect(inv);
    CHECK(inv->hostname[0] && inv->cpu_model[0] && inv->os[0] && inv->kernel[0]);
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    CHECK(inv->cpu_cores == (unsigned)CPU_COUNT(&all));
    /* under taskset (a cpuset): the cores it may run on, not the host's,
     * or placement sent it more CPU replicas than it could run */
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    gb_inventory_collect(inv);
    CHECKF(inv->cpu_cores == 1, "%u cores under a one-CPU mask", inv->cpu_cores);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
    CHECK(inv->memory_bytes > (64ull << 20));
    CHECK(inv->n_gpus == 0 && inv->n_links == 0);
    CHECKF(strstr(inv->nvml_error, "NVML not loaded") &&
               strstr(inv->nvml_error, "no NVIDIA driver"),
           "%s", inv->nvml_error);
    CHECK(inv->driver_version[0] == '\0');

    /* a real library that is not NVML: the missing entry point is named */
    setenv("GB_NVML_LIB", "libsqlite3.so.0", 1);
    gb_inventory_collect(inv);
    CHECK(inv->n_gpus == 0);
    CHECKF(strstr(inv->nvml_error, "has no nvmlInit_v2"), "%s", inv->nvml_error);

    /* the default path on this machine (no driver): zero GPUs, a reason */
    unsetenv("GB_NVML_LIB");
    gb_inventory_collect(inv);
    if (inv->n_gpus == 0) CHECK(inv->nvml_error[0]);

    CHECK(strcmp(gb_pcie_path_name(0), "same_board") == 0);
    CHECK(strcmp(gb_pcie_path_name(10), "single_switch") == 0);
    CHECK(strcmp(gb_pcie_path_name(20), "multi_switch") == 0);
    CHECK(strcmp(gb_pcie_path_name(30), "host_bridge") == 0);
    CHECK(strcmp(gb_pcie_path_name(40), "numa_node") == 0);
    CHECK(strcmp(gb_pcie_path_name(50), "cross_socket") == 0);
    CHECK(strcmp(gb_pcie_path_name(7), "unknown") == 0);
    /* SM counts NVML gives as cores: A100 6912 / 64 = 108, H100 SXM 16896 / 128 = 132 */
    CHECK(6912 / gb_cores_per_sm(8, 0) == 108);
    CHECK(16896 / gb_cores_per_sm(9, 0) == 132);
    CHECK(10752 / gb_cores_per_sm(8, 6) == 84); /* A40 */
    CHECK(gb_cores_per_sm(3, 5) == 0);
    free(inv);
    return 0;
}
