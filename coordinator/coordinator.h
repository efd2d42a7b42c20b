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
 * the SQLite commit at the end of a loop turn (one transaction per turn).
 * What a turn changed in memory is sent (acknowledgements, assignments,
 * replies) only after that commit; when it fails, the turn is rolled back,
 * nothing of it is sent and memory is reloaded from the store.
 *
 * With keys (key_path, authorized_path) both endpoints speak CURVE and a
 * ZAP handler admits only listed public keys (coordinator/auth.h). */
#ifndef GB_COORDINATOR_H
#define GB_COORDINATOR_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct gb_coord gb_coord_t;

#define GB_COORD_MAX_AGENTS 10000   /* agents the registry holds (every one ever seen) */
#define GB_COORD_MAX_QUEUED 1000000 /* unfinished jobs, all sweeps together */
#define GB_COORD_RATE_PER_S 50.0    /* control requests a second per peer */
#define GB_COORD_RATE_BURST 100.0

/* When an acknowledged result is durable (--sync):
 *   GROUP   on stable storage, like FULL, but the reactor does not wait for
 *           the disk: commits are written (synchronous=NORMAL) and a thread
 *           flushes the WAL; acknowledgements (and replies to requests that
 *           wrote) wait for that flush, nothing else does (syncer.h)
 *   FULL    SQLite synchronous=FULL: each commit waits for the disk
 *   NORMAL  SQLite synchronous=NORMAL, acknowledged after the commit: it
 *           survives a crash of the coordinator (SIGKILL), not of the
 *           machine (a power loss may lose what the last checkpoint had not
 *           reached) */
enum { GB_SYNC_GROUP = 0, GB_SYNC_FULL = 1, GB_SYNC_NORMAL = 2 };

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
    /* 1 (gpubench run): place only the jobs of sweeps made by this
     * coordinator; the store's other unfinished sweeps wait, untouched, for
     * their own (run's local agent ran a fleet's queued jobs first) */
    int new_sweeps_only;
    /* security (docs/security.md): both or neither */
    const char *key_path;        /* NAME.key: CURVE on both endpoints */
    const char *authorized_path; /* public keys admitted (agents and clients), one a line */
    atomic_int *reload;          /* set (SIGHUP): re-read authorized_path; may be NULL */
    /* limits */
    size_t max_agents; /* GB_COORD_MAX_AGENTS: a Hello from a new id beyond it is refused */
    size_t max_queued; /* GB_COORD_MAX_QUEUED: a submit that would pass it is refused */
    double rate_per_s; /* GB_COORD_RATE_PER_S per peer on the control endpoint; 0: no limit */
    double rate_burst; /* GB_COORD_RATE_BURST */
    int sync;          /* GB_SYNC_GROUP (default), GB_SYNC_FULL or GB_SYNC_NORMAL, below */
} gb_coord_config_t;

void gb_coord_config_default(gb_coord_config_t *cfg);

/* The keys and endpoints alone, before anything is opened or bound: both
 * or neither of --key and --authorized, CURVE in this libzmq, a usable key
 * pair and a usable allow list; endpoints of a form gpubench can use, two
 * of them (not one path or tcp port for both), and loopback ones only
 * without keys (the same checks gb_coord_new makes). -1
 * with the reason: a configuration error, which the command exits 2 for. */
int gb_coord_check_keys(const gb_coord_config_t *cfg, char *err, size_t errlen);

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
