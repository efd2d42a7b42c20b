/* test_nvml_topo.c - the agent's GPU link matrix (agent/inventory.c) read
 * through NVML, here a stand-in library (fake_nvml.c) describing machines
 * this CI box is not: NVLink lanes to peers and through NVSwitches, links
 * to a CPU left out, inactive links skipped, drivers without the remote
 * device type query, and every PCIe topology level mapped to its path;
 * with CUDA_VISIBLE_DEVICES, only the GPUs it leaves, in its order.
 *
 *   test_nvml_topo LIBFAKENVML CASE */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "inventory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gb_inventory_t inv;

static const gb_link_info_t *link_of(unsigned a, unsigned b) {
    for (int i = 0; i < inv.n_links; i++)
        if (inv.links[i].gpu_a == a && inv.links[i].gpu_b == b) return &inv.links[i];
    CHECKF(0, "no link %u-%u", a, b);
    return NULL;
}

static void lanes(const unsigned want[6]) {
    static const unsigned pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    CHECK(inv.n_gpus == 4 && inv.n_links == 6);
    for (int k = 0; k < 6; k++) {
        const gb_link_info_t *l = link_of(pairs[k][0], pairs[k][1]);
        CHECKF(l->nvlink_lanes == want[k], "%u-%u: %u lanes, want %u", pairs[k][0], pairs[k][1],
               l->nvlink_lanes, want[k]);
    }
}

/* the PCIe levels the stand-in gives the six pairs of 4 GPUs */
static void paths(void) {
    static const char *const want[6] = {"single_switch", "multi_switch", "host_bridge",
                                        "numa_node",     "cross_socket", "same_board"};
    static const unsigned pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    for (int k = 0; k < 6; k++)
        CHECKF(strcmp(link_of(pairs[k][0], pairs[k][1])->pcie_path, want[k]) == 0, "%u-%u: %s",
               pairs[k][0], pairs[k][1], link_of(pairs[k][0], pairs[k][1])->pcie_path);
}

int main(int argc, char **argv) {
    CHECKF(argc == 3, "usage: test_nvml_topo LIBFAKENVML CASE");
    const char *c = argv[2];
    setenv("GB_NVML_LIB", argv[1], 1);
    /* visible_*: the switch machine seen through CUDA_VISIBLE_DEVICES */
    static const char *const vis[][2] = {{"visible", "2,0"},
                                         {"visible_uuid", "GPU-fake-3,GPU-fake-1"},
                                         {"visible_bad", "1,7,0"},
                                         {"visible_none", ""}};
    const char *cvd = NULL;
    for (size_t i = 0; i < sizeof vis / sizeof vis[0]; i++)
        if (strcmp(c, vis[i][0]) == 0) cvd = vis[i][1];
    /* denied: the switch machine whose NVML GPU 0 is outside this
     * process's device cgroup (NVML counts it, refuses its handle) */
    int denied = strcmp(c, "denied") == 0;
    setenv("GB_FAKE_NVML", cvd || denied ? "switch" : c, 1);
    if (denied)
        setenv("GB_FAKE_NVML_DENY", "0", 1);
    else
        unsetenv("GB_FAKE_NVML_DENY");
    if (cvd)
        setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
    else
        unsetenv("CUDA_VISIBLE_DEVICES");
    /* what the agent's log says of the GPUs it hides (stderr, kept) */
    FILE *log = tmpfile();
    int saved = dup(2);
    CHECK(log && saved >= 0 && dup2(fileno(log), 2) == 2);
    gb_inventory_collect(&inv);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    char said[1024] = "";
    rewind(log);
    size_t got = fread(said, 1, sizeof said - 1, log);
    said[got] = '\0';
    fclose(log);
    if (cvd && strcmp(c, "visible_bad") == 0)
        CHECKF(strstr(said, "CUDA_VISIBLE_DEVICES='1,7,0' shows 1 of the 4 GPU(s) NVML lists: it "
                            "stops at '7'"),
               "%s", said);
    if (cvd && strcmp(c, "visible") == 0)
        CHECKF(strstr(said, "CUDA_VISIBLE_DEVICES='2,0' shows 2 of the 4 GPU(s)"), "%s", said);
    if (cvd) {
        CHECKF(inv.nvml_error[0] == '\0', "%s", inv.nvml_error);
        const char *want[3] = {NULL, NULL, NULL};
        if (strcmp(c, "visible") == 0) want[0] = "GPU-fake-2", want[1] = "GPU-fake-0";
        if (strcmp(c, "visible_uuid") == 0) want[0] = "GPU-fake-3", want[1] = "GPU-fake-1";
        /* CUDA stops at the first entry that names no GPU */
        if (strcmp(c, "visible_bad") == 0) want[0] = "GPU-fake-1";
        int n = 0;
        while (want[n])
            n++;
        CHECKF(inv.n_gpus == n, "%s: %d GPUs, want %d", c, inv.n_gpus, n);
        for (int i = 0; i < n; i++)
            CHECKF(strcmp(inv.gpus[i].uuid, want[i]) == 0, "%s: GPU %d is %s", c, i,
                   inv.gpus[i].uuid);
        CHECK(inv.n_links == n * (n - 1) / 2);
        if (n == 2) CHECK(link_of(0, 1)->nvlink_lanes == 18);
        return 0;
    }
    if (denied) {
        /* the three it may open, in PCI order: it stopped at the first
         * refusal, and listed none */
        CHECKF(inv.nvml_error[0] == '\0', "%s", inv.nvml_error);
        CHECKF(inv.n_gpus == 3, "%d GPUs", inv.n_gpus);
        for (int i = 0; i < 3; i++) {
            char want[32];
            snprintf(want, sizeof want, "GPU-fake-%d", i + 1);
            CHECKF(strcmp(inv.gpus[i].uuid, want) == 0, "GPU %d is %s", i, inv.gpus[i].uuid);
        }
        CHECK(inv.n_links == 3 && link_of(0, 2)->nvlink_lanes == 18);
        CHECKF(strstr(said, "NVML lists 4 GPU(s), 3 of them this agent's to open"), "%s", said);
        return 0;
    }
    if (strcmp(c, "noinit") == 0) {
        CHECK(inv.n_gpus == 0 && inv.n_links == 0);
        CHECKF(strstr(inv.nvml_error, "nvmlInit: Driver Not Loaded"), "%s", inv.nvml_error);
        return 0;
    }
    CHECKF(inv.nvml_error[0] == '\0', "%s", inv.nvml_error);
    CHECK(strcmp(inv.driver_version, "999.1") == 0 && strcmp(inv.cuda_driver_version, "12.8") == 0);
    CHECK(strcmp(inv.gpus[1].uuid, "GPU-fake-1") == 0);
    CHECK(strcmp(inv.gpus[1].pci_bus_id, "00000000:28:00.0") == 0);
    CHECK(inv.gpus[0].memory_bytes == 80ull << 30 && inv.gpus[0].cc_major == 9);
    CHECK(inv.gpus[0].sm_count == 132);
    if (strcmp(c, "switch") == 0) {
        /* every pair through the switches: min(18, 18) */
        static const unsigned want[6] = {18, 18, 18, 18, 18, 18};
        lanes(want);
        paths();
    } else if (strcmp(c, "switch_untyped") == 0) {
        static const unsigned want[6] = {12, 12, 12, 12, 12, 12};
        lanes(want);
    } else if (strcmp(c, "bridge") == 0) {
        /* the bridges only: the NPU link and the inactive one count nowhere */
        static const unsigned want[6] = {4, 0, 0, 0, 0, 2};
        lanes(want);
        paths();
    } else if (strcmp(c, "bridge_reversed") == 0) {
        /* NVML numbers the GPUs against their PCI order: the inventory
         * lists them in PCI order all the same, CUDA's under
         * CUDA_DEVICE_ORDER=PCI_BUS_ID, and the links and paths follow */
        for (int i = 0; i < 4; i++) {
            char want[32];
            snprintf(want, sizeof want, "GPU-fake-%d", i);
            CHECKF(strcmp(inv.gpus[i].uuid, want) == 0, "GPU %d is %s, want %s", i,
                   inv.gpus[i].uuid, want);
        }
        static const unsigned want[6] = {4, 0, 0, 0, 0, 2};
        lanes(want);
        paths();
    } else if (strcmp(c, "bridge_short_ids") == 0) {
        /* the far end's bus id with a 4-digit domain in lower case
         * (0000:28:00.0 for 00000000:28:00.0): the same GPU */
        static const unsigned want[6] = {4, 0, 0, 0, 0, 2};
        lanes(want);
    } else if (strcmp(c, "bridge_gaps") == 0) {
        /* links 0 and 1 answer errors (fused off): the links after them
         * still count, 2 and 3 of GPUs 0 and 1, none left of 2 and 3's */
        static const unsigned want[6] = {2, 0, 0, 0, 0, 0};
        lanes(want);
    } else if (strcmp(c, "bridge_untyped") == 0) {
        /* a driver that cannot say what the far end is: the CPU links of GPUs
         * 0 and 1 are taken for switch ports, one lane "through a switch" -
         * the limit of the fallback, which the typed query removes */
        static const unsigned want[6] = {5, 0, 0, 0, 0, 2};
        lanes(want);
    } else if (strcmp(c, "old") == 0) {
        CHECK(inv.n_gpus == 2 && inv.n_links == 1);
        CHECK(link_of(0, 1)->nvlink_lanes == 0 && strcmp(link_of(0, 1)->pcie_path, "unknown") == 0);
        CHECK(strcmp(inv.gpus[0].name, "Tesla Old") == 0);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    return 0;
}
