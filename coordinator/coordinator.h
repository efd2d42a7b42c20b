/* coordinator.h - the gpubench coordinator as a library: `gpubench
 * coordinator` and `gpubench run` are thin commands over it.
 *
 * One reactor (zmq_poll) serves two ROUTER sockets: agents on `listen`, the
 * people's commands on `control`. It keeps the registry of agents, expands
 * submitted sweeps into jobs, places queued jobs on idle agents (one job per
 * node unless the agent offers more slots), tracks liveness with heartbeats
 * both ways, re-queues the jobs of a lost agent (attempt + 1, at most
 * max_attempts), and commits every result to the store before it
 * acknowledges it. All state that matters is in the store, so a restarted
 * coordinator resumes where the last one stopped: queued jobs stay queued
 * and running jobs wait one liveness window for their agent to come back.
 *
 * Handlers never block: sockets are non-blocking and the only slow call is
 * the SQLite commit at the end of a loop turn (one transaction per turn). */
#ifndef GB_COORDINATOR_H
#define GB_COORDINATOR_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct gb_coord gb_coord_t;

typedef struct gb_coord_config {
    const char *listen;        /* agents' endpoint: "tcp://127.0.0.1:5555"; port * = ephemeral */
    const char *control;       /* clients' endpoint: "tcp://127.0.0.1:5556" */
    const char *db_path;       /* "gpubench.db" */
    int heartbeat_ms;          /* 1000: heartbeat interval, both ways */
    int lost_after;            /* 5: heartbeats missed before an agent is lost */
    int max_attempts;          /* 3: attempts per job before it fails (a spec may say otherwise) */
    size_t max_frame;          /* GB_WIRE_MAX_FRAME: frames above get a Reject */
    size_t max_jobs_per_sweep; /* GB_SPEC_MAX_JOBS */
    int insecure;              /* 1: allow binding a non-loopback address without keys */
    atomic_int *stop;          /* the loop returns once *stop != 0; may be NULL */
} gb_coord_config_t;

void gb_coord_config_default(gb_coord_config_t *cfg);

/* Open the store (migrating it), load its state, bind both endpoints.
 * NULL with a reason in err on failure (bad endpoint, port in use, store). */
gb_coord_t *gb_coord_new(const gb_coord_config_t *cfg, char *err, size_t errlen);
void gb_coord_destroy(gb_coord_t **self_p);

/* The endpoints actually bound (an ephemeral port resolved). */
const char *gb_coord_listen_endpoint(const gb_coord_t *self);
const char *gb_coord_control_endpoint(const gb_coord_t *self);

/* Serve until *cfg.stop is set. Returns 0 on a clean stop, -1 when the
 * reactor itself failed (logged). */
int gb_coord_run(gb_coord_t *self);

/* 1 when endpoint is local only: tcp on 127.0.0.0/8, localhost or ::1, or
 * ipc:// / inproc://. */
int gb_endpoint_is_local(const char *endpoint);

#endif
