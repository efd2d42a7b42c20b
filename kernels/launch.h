/* launch.h - one process per replica (gb_train_config_t.launch "processes").
 *
 * NCCL recommends one GPU per process, and CUDA graphs with NCCL inside
 * may deadlock with several GPUs in one process: the engine's threads
 * then step eagerly. A process per replica captures its step as a graph,
 * as every published multi-GPU ResNet-50 figure ran (torchrun, MLPerf).
 *
 * The launcher (in the process that gb_train_run was called in) starts
 * devices copies of the executable (gb_train_set_replica_exe) as
 * `<exe> __replica <fd>`, each with one end of a socket pair. Replica
 * process d of node r is, to the engine it runs, node r * devices + d of
 * n_nodes * devices nodes with one device (its device ordinal
 * first_device + d): the job's multi-node path (gb_dist_t), its rendezvous
 * relayed by the launcher:
 *   launcher -> replica: "cfg <hex>" (the config's bytes: one executable),
 *     "str <k> <hex>" (its paths), "place <first_device> <node_devices>
 *     <threads> <rank> <n_nodes>", "go";
 *   replica -> launcher: "id <hex>" (global rank 0: its unique id), "ready"
 *     (set up, at the start barrier);
 *   launcher -> replica: "start <unix ms> <hex id>" once every replica of
 *     the node is ready (and, on several nodes, the node's own rendezvous
 *     has started: the worker's gb_dist_t);
 *   replica -> launcher: "report <json>" (what make_record needs of it),
 *     "savefail <reason>", then "ok" or "fail <reason>", and it exits.
 * A replica that fails, dies or closes its socket ends the job: the others
 * are killed (SIGKILL, nothing can strand: each is a process) and the first
 * failure is the job's error, naming the replica process. Replica
 * processes die with the launcher (PR_SET_PDEATHSIG).
 */
#ifndef GB_LAUNCH_H
#define GB_LAUNCH_H

#include "engine.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Run cfg's devices replicas as processes, threads_each CPU threads each.
 * 0: reports[d] is replica process d's report (a cJSON object the caller
 * deletes); *saveerr non-empty when replica 0 could not write --save or
 * --save-grads. -1 with the reason in err. */
int gb_launch_run(const gb_train_config_t *cfg, int threads_each, cJSON **reports, char *saveerr,
                  size_t saveerrlen, char *err, size_t errlen);

/* The engine, in a replica process: where its report goes (-1: none) */
void gb_engine_report_to(int fd);
/* Write one line "<tag> <text>\n" to fd; 0 or -1. */
int gb_launch_send(int fd, const char *tag, const char *text);

#endif
