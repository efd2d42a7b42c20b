/* agent.h - the gpubench agent as a library: `gpubench agent` and `gpubench
 * run` are thin commands over it.
 *
 * One reactor (zmq_poll) over a DEALER connected to the coordinator and the
 * output pipes of the running workers. The agent registers with a Hello
 * (stable id, name, labels, inventory, what it still runs, what it has
 * spooled), heartbeats, starts each assigned job as a worker child process
 * (runner.h) with a time limit, and turns its end into a Result that is
 * written to the spool before it is first sent and resent until the
 * coordinator acknowledges it. When the coordinator goes silent (restart,
 * network) the agent registers again as soon as it answers; running jobs
 * keep running meanwhile.
 *
 * While a job runs, a sampler thread (telemetry.h) records NVML telemetry
 * of its GPUs, or the CPU time others take from a CPU job; the samples of
 * the job's timed window go into its result record, which says when the
 * GPU throttled.
 *
 * State directory: agent_id (the stable id), lock (one agent per
 * directory), spool/ (results not yet acknowledged), jobs/ (one directory
 * per running job: job.json, result.json). */
#ifndef GB_AGENT_H
#define GB_AGENT_H

#include "gb_wire.h"

#include <stdatomic.h>
#include <stddef.h>

/* The most jobs an agent runs at once (--slots): as many running jobs as
 * its Hello and heartbeats list. */
#define GB_AGENT_MAX_SLOTS GB_WIRE_SLOTS_MAX
/* The most spooled results a Hello lists; the others are resent all the
 * same once registered. With GB_AGENT_MAX_SLOTS running jobs and every
 * inventory field at its wire limit, the largest Hello stays within
 * GB_WIRE_RESULT_FRAME_MAX, which the coordinator's agents endpoint always
 * accepts, whatever its --max-frame (test_wire hello_largest). */
#define GB_AGENT_HELLO_SPOOLED_MAX GB_WIRE_JOBREFS_MAX

typedef struct gb_agent gb_agent_t;

typedef struct gb_agent_config {
    const char *connect;        /* coordinator's agent endpoint: "tcp://127.0.0.1:5555" */
    const char *state_dir;      /* created if missing */
    const char *name;           /* node name; NULL: the host name */
    const char *labels;         /* "k=v,k=v" or NULL */
    const char *kinds;          /* job kinds the worker runs: "allreduce,gemm,resnet50,sleep" */
    const char *cpu_precisions; /* the CPU backend's: "fp32,bf16"; NULL: not reported */
    const char *worker_exe;     /* "/proc/self/exe": run as `<exe> worker --job .. --out ..` */
    int heartbeat_ms;           /* 1000 until the coordinator's Welcome says otherwise */
    int lost_after;             /* 5: coordinator heartbeats missed before re-registering */
    int slots;                  /* 1: jobs run at once (benchmarks must not share a node) */
    int kill_grace_ms;          /* 2000: SIGTERM to SIGKILL on timeout or cancel */
    int telemetry_ms;           /* 100: GPU/CPU telemetry interval (telemetry.h); 0: off */
    /* 64: MiB of unacknowledged results held in memory as well as in the
     * spool, from which a spool removed under the agent is written again;
     * 0: none (a result the spool cannot keep is held in memory anyway) */
    int result_memory_mb;
    atomic_int *stop; /* the loop returns once *stop != 0; may be NULL */
    /* CURVE (docs/security.md): the agent's key pair and the coordinator's
     * public key, pinned; NULL: plaintext (a coordinator on loopback) */
    const struct gb_curve_client *curve;
} gb_agent_config_t;

void gb_agent_config_default(gb_agent_config_t *cfg);

/* 0 when no agent holds state directory dir (or it does not exist yet);
 * 1 when one does, -1 when it cannot be used, with the reason gb_agent_new
 * would give. For a caller that makes
 * other things first (`gpubench run`'s store), so that a busy state dir
 * leaves nothing behind; gb_agent_new still decides. */
int gb_agent_state_dir_free(const char *dir, char *err, size_t errlen);

/* Read or create the agent id, lock the state directory, open the spool,
 * collect the inventory, connect. NULL with a reason on failure. */
gb_agent_t *gb_agent_new(const gb_agent_config_t *cfg, char *err, size_t errlen);
/* Stops running workers (SIGTERM, then SIGKILL after the grace period);
 * the spool stays on disk. */
void gb_agent_destroy(gb_agent_t **self_p);

const char *gb_agent_id(const gb_agent_t *self);

/* Serve until *cfg.stop is set. 0 on a clean stop, -1 when the reactor
 * failed (logged). */
int gb_agent_run(gb_agent_t *self);

#endif
