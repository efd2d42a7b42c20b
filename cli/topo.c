/* topo.c - see topo.h. */
#define _POSIX_C_SOURCE 200809L
#include "topo.h"

#include "cli_util.h"
#include "gb_util.h"
#include "output.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_GPUS 64 /* GB_WIRE_GPUS_MAX */

void gb_topo_code(unsigned lanes, const char *path, char *buf, size_t len) {
    static const struct {
        const char *path, *code;
    } map[] = {{"same_board", "PIX"},  {"single_switch", "PIX"}, {"multi_switch", "PXB"},
               {"host_bridge", "PHB"}, {"numa_node", "NODE"},    {"cross_socket", "SYS"}};
    if (lanes > 0) {
        snprintf(buf, len, "NV%u", lanes);
        return;
    }
    for (size_t i = 0; path && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(path, map[i].path) == 0) {
            snprintf(buf, len, "%s", map[i].code);
            return;
        }
    snprintf(buf, len, "?");
}

static const char legend[] =
    "Legend:\n"
    "\n"
    "  X    = the GPU itself\n"
    "  SYS  = PCIe and the interconnect between CPU sockets (NUMA nodes)\n"
    "  NODE = PCIe and the interconnect between host bridges of one NUMA node\n"
    "  PHB  = PCIe through a host bridge (the CPU)\n"
    "  PXB  = PCIe through several PCIe switches, no host bridge\n"
    "  PIX  = PCIe through at most one PCIe switch (or two GPUs on one board)\n"
    "  NV#  = NVLink: a bonded set of # links (through NVSwitches counted too)\n"
    "  ?    = unknown (NVML could not tell)\n";

typedef struct node_topo {
    int n_gpus;
    char names[MAX_GPUS][97], bus[MAX_GPUS][33];
    unsigned lanes[MAX_GPUS][MAX_GPUS];
    char path[MAX_GPUS][MAX_GPUS][16];
    int have[MAX_GPUS][MAX_GPUS];
} node_topo_t;

static int load(sqlite3 *db, const char *agent_id, node_topo_t *t) {
    sqlite3_stmt *st = NULL;
    memset(t, 0, sizeof *t);
    if (sqlite3_prepare_v2(db,
                           "SELECT idx, name, pci_bus_id FROM gpus WHERE agent_id = ?1"
                           " ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, agent_id, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int i = sqlite3_column_int(st, 0);
        if (i < 0 || i >= MAX_GPUS) continue;
        snprintf(t->names[i], sizeof t->names[i], "%s", (const char *)sqlite3_column_text(st, 1));
        snprintf(t->bus[i], sizeof t->bus[i], "%s", (const char *)sqlite3_column_text(st, 2));
        if (i + 1 > t->n_gpus) t->n_gpus = i + 1;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db,
                           "SELECT gpu_a, gpu_b, nvlink_lanes, pcie_path FROM links"
                           " WHERE agent_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, agent_id, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int a = sqlite3_column_int(st, 0), b = sqlite3_column_int(st, 1);
        if (a < 0 || b < 0 || a >= MAX_GPUS || b >= MAX_GPUS || a == b) continue;
        unsigned lanes = (unsigned)sqlite3_column_int(st, 2);
        const char *path = (const char *)sqlite3_column_text(st, 3);
        t->lanes[a][b] = t->lanes[b][a] = lanes;
        snprintf(t->path[a][b], sizeof t->path[a][b], "%s", path ? path : "unknown");
        snprintf(t->path[b][a], sizeof t->path[b][a], "%s", path ? path : "unknown");
        t->have[a][b] = t->have[b][a] = 1;
    }
    sqlite3_finalize(st);
    return 0;
}

static void print_matrix(FILE *out, const node_topo_t *t) {
    char code[16];
    fprintf(out, "%-8s", "");
    for (int j = 0; j < t->n_gpus; j++) {
        char h[16];
        snprintf(h, sizeof h, "GPU%d", j);
        fprintf(out, j + 1 < t->n_gpus ? "%-8s" : "%s", h);
    }
    fputc('\n', out);
    for (int i = 0; i < t->n_gpus; i++) {
        char h[16];
        snprintf(h, sizeof h, "GPU%d", i);
        fprintf(out, "%-8s", h);
        for (int j = 0; j < t->n_gpus; j++) {
            if (i == j)
                snprintf(code, sizeof code, "X");
            else if (t->have[i][j])
                gb_topo_code(t->lanes[i][j], t->path[i][j], code, sizeof code);
            else
                snprintf(code, sizeof code, "?");
            /* the last column without trailing blanks */
            fprintf(out, j + 1 < t->n_gpus ? "%-8s" : "%s", code);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
    for (int i = 0; i < t->n_gpus; i++) { /* stored text: its control bytes as '?' */
        fprintf(out, "GPU%d  ", i);
        gb_put_line(out, t->names[i]);
        fputs("  ", out);
        gb_put_line(out, t->bus[i]);
        fputc('\n', out);
    }
}

int cli_print_topo(const char *db_path, const char *node, gb_format_t fmt, FILE *out) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    node_topo_t *t = calloc(1, sizeof *t);
    gb_table_t *tab = NULL;
    int rc = 1, found = 0, matrices = 0;
    if (!t) {
        fprintf(stderr, "gpubench nodes: out of memory\n");
        return 1;
    }
    if (!(db = cli_store_open("nodes", db_path))) goto out;
    if (sqlite3_prepare_v2(
            db,
            "SELECT agent_id, name, n_gpus, gpu_model,"
            " json_extract(inventory, '$.nvml_error') FROM nodes"
            " WHERE ?1 IS NULL OR name = ?1 OR agent_id = ?1 ORDER BY name, agent_id",
            -1, &st, NULL) != SQLITE_OK) {
        cli_store_not_ours("nodes", db, db_path);
        goto out;
    }
    if (node) sqlite3_bind_text(st, 1, node, -1, SQLITE_STATIC);
    static const char *const cols[] = {"node", "gpu_a",        "gpu_b",
                                       "link", "nvlink_lanes", "pcie_path"};
    if (fmt != GB_FMT_TABLE && !(tab = gb_table_new(6, cols))) {
        fprintf(stderr, "gpubench nodes: out of memory\n");
        goto out;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        int n_gpus = sqlite3_column_int(st, 2);
        const char *model = (const char *)sqlite3_column_text(st, 3);
        const char *nvml = (const char *)sqlite3_column_text(st, 4);
        found++;
        if (load(db, id, t) != 0) {
            fprintf(stderr, "gpubench nodes: %s: %s\n", db_path, sqlite3_errmsg(db));
            goto out;
        }
        if (fmt != GB_FMT_TABLE) {
            for (int a = 0; a < t->n_gpus; a++)
                for (int b = a + 1; b < t->n_gpus; b++) {
                    char code[16];
                    if (!t->have[a][b] || gb_table_row(tab) != 0) continue;
                    gb_topo_code(t->lanes[a][b], t->path[a][b], code, sizeof code);
                    gb_table_text(tab, 0, name);
                    gb_table_int(tab, 1, a);
                    gb_table_int(tab, 2, b);
                    gb_table_text(tab, 3, code);
                    gb_table_int(tab, 4, t->lanes[a][b]);
                    gb_table_text(tab, 5, t->path[a][b]);
                }
            continue;
        }
        if (found > 1) fputc('\n', out);
        if (n_gpus == 0 || t->n_gpus == 0) {
            fputs("node ", out);
            gb_put_line(out, name);
            fputs(" (agent ", out);
            gb_put_line(out, id);
            fprintf(out, "): no GPUs%s", nvml && *nvml ? ": " : "");
            gb_put_line(out, nvml);
            fputc('\n', out);
            continue;
        }
        fputs("node ", out);
        gb_put_line(out, name);
        fputs(" (agent ", out);
        gb_put_line(out, id);
        fprintf(out, "): %d GPU(s), ", n_gpus);
        gb_put_line(out, model);
        fputs("\n\n", out);
        print_matrix(out, t);
        matrices++;
    }
    if (node && !found) {
        fprintf(stderr, "gpubench nodes: no node named '%s' in %s\n", node, db_path);
        goto out;
    }
    /* the legend explains a matrix: none under nodes without GPUs, and
     * for a store no agent has registered with, a line that says so (it
     * printed the legend alone) */
    if (fmt == GB_FMT_TABLE && !found)
        fprintf(stderr,
                "gpubench nodes: no node in %s yet (no agent has registered with its "
                "coordinator)\n",
                db_path);
    else if (fmt == GB_FMT_TABLE && matrices)
        fprintf(out, "\n%s", legend);
    else if (fmt != GB_FMT_TABLE)
        gb_table_print(tab, out, fmt);
    rc = 0;
out:
    gb_table_destroy(&tab);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(t);
    return rc;
}
