/* topo.h - `gpubench nodes --topo [NODE]`: the GPU pair link matrix of each
 * node, read from the store (the links and gpus tables the coordinator
 * fills from every agent's Hello) and printed the way `nvidia-smi topo -m`
 * prints it: NV# (a bonded set of # NVLinks), PIX, PXB, PHB, NODE, SYS, X.
 *
 * It reads the store rather than asking the coordinator: the matrix is
 * part of the inventory the store keeps for every node ever seen, so it is
 * there for disconnected nodes too and while the coordinator is down, and
 * reading it needs no new control message (the same path as `results`). */
#ifndef GB_CLI_TOPO_H
#define GB_CLI_TOPO_H

#include "output.h"

#include <stddef.h>
#include <stdio.h>

/* The nvidia-smi code of a GPU pair: "NV<lanes>" when it has NVLink lanes,
 * else by PCIe path: same_board and single_switch PIX, multi_switch PXB,
 * host_bridge PHB, numa_node NODE, cross_socket SYS, anything else "?". */
void gb_topo_code(unsigned nvlink_lanes, const char *pcie_path, char *buf, size_t len);

/* Print the matrix of every node in db (or of the node named or with agent
 * id `node`): a matrix per node and the legend (GB_FMT_TABLE), or one row
 * per GPU pair (csv, json). Returns the exit status: 0, 1 when the store
 * cannot be read or has no such node (reason on stderr). */
int cli_print_topo(const char *db, const char *node, gb_format_t fmt, FILE *out);

#endif
