/* store.h - the coordinator's SQLite store: one file, WAL, foreign keys,
 * busy_timeout, migrations from schema/, every statement prepared once.
 *
 * Only the coordinator writes. The reactor groups the writes of one loop
 * turn into one transaction (gb_store_begin ... gb_store_commit) and sends
 * acknowledgements only after the commit, so "acknowledged" always means
 * "on disk" (synchronous=FULL). Functions return 0 or -1; the reason of the
 * last failure is gb_store_errmsg(). Times are ISO 8601 text. */
#ifndef GB_COORD_STORE_H
#define GB_COORD_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_store gb_store_t;

/* Open (creating and migrating) the database at path. */
gb_store_t *gb_store_open(const char *path, char *err, size_t errlen);
void gb_store_close(gb_store_t **self_p);
const char *gb_store_errmsg(gb_store_t *self);
/* 1 once SQLite has said the file is damaged (corrupt, or not a database):
 * no retry can help. */
int gb_store_damaged(gb_store_t *self);

/* Open a write transaction unless one is open (idempotent). */
int gb_store_begin(gb_store_t *self);
/* Commit the open transaction (no-op without one). On failure the
 * transaction is rolled back. A transaction that SQLite rolled back by
 * itself when a statement failed (disk full, I/O error) is "broken": every
 * later write fails and the commit fails, since a later statement would
 * otherwise run, and commit, on its own. */
int gb_store_commit(gb_store_t *self);
void gb_store_rollback(gb_store_t *self);
/* 1 while a transaction is open. */
int gb_store_in_tx(const gb_store_t *self);
/* 1 when the open transaction is broken (see above). */
int gb_store_broken(const gb_store_t *self);
/* For modules with their own statements on the connection (gb_store_db):
 * one of their statements failed with msg. The transaction is marked broken
 * when SQLite rolled it back, as for the store's own writes, and msg is
 * what gb_store_errmsg says. Such modules refuse to write while
 * gb_store_broken(). */
void gb_store_note_failure(gb_store_t *self, const char *msg);
/* Rows written through the connection since it opened (inserted, updated or
 * deleted, by the store or by modules on gb_store_db): a turn compares it
 * to tell whether it wrote anything. */
int64_t gb_store_changes(gb_store_t *self);
/* PRAGMA synchronous: FULL (1, the default: a commit is on stable storage
 * when it returns; survives power loss) or NORMAL (0: WAL commits survive a
 * crash of the process, not of the machine). */
int gb_store_set_synchronous(gb_store_t *self, int full);
/* PRAGMA wal_autocheckpoint: pages of WAL after which a commit checkpoints
 * (SQLite's default 1000); 0: never (someone else checkpoints: syncer.h). */
int gb_store_set_autocheckpoint(gb_store_t *self, int pages);

/* The store's file held as SQLite's own connections hold it in WAL mode
 * (a read lock on its shared-lock bytes), by a child process, while this
 * process closes its connection and opens it again: another process's last
 * connection to close meanwhile cannot take the exclusive lock, so it does
 * not checkpoint its WAL into the file (SQLite does that only as the last
 * connection). Such a WAL may have been written against the file as it was
 * before (coordinator.c: keep_side_files). The lock belongs to the child
 * (record locks are per process: a descriptor of ours would lose SQLite's
 * own locks on that file when closed); it goes with gb_store_release, or
 * when this process dies. */
typedef struct gb_store_hold {
    int pid; /* the child; 0: none */
    int fd;  /* the pipe whose close lets it go */
} gb_store_hold_t;
/* 0 with *h held, or -1 with the reason (nothing held). */
int gb_store_hold(const char *path, gb_store_hold_t *h, char *err, size_t errlen);
/* Let it go and reap the child (nothing when none is held). */
void gb_store_release(gb_store_hold_t *h);

/* ---- nodes -------------------------------------------------------------- */

typedef struct gb_store_gpu {
    unsigned idx;
    const char *name, *uuid, *pci_bus_id;
    uint64_t memory_bytes;
    unsigned sm_count, cc_major, cc_minor, pcie_gen, pcie_width;
    double power_limit_w; /* < 0: unknown */
} gb_store_gpu_t;

typedef struct gb_store_link {
    unsigned gpu_a, gpu_b, nvlink_lanes;
    const char *pcie_path;
} gb_store_link_t;

typedef struct gb_store_node {
    const char *agent_id, *name, *state;
    const char *cpu_model, *os, *kernel, *driver_version, *cuda_driver_version;
    const char *gpu_model, *labels, *kinds, *inventory_json;
    const char *agent_key; /* CURVE public key it registered with; "" without keys */
    int cpu_cores, n_gpus, slots, has_nvlink;
    int forgotten; /* gb_store_load_nodes: nodes.forgotten_at is set */
    uint64_t memory_bytes;
    const char *last_seen;
    const gb_store_gpu_t *gpus; /* n_gpus */
    const gb_store_link_t *links;
    size_t n_links;
} gb_store_node_t;

/* Insert or update a node with its GPUs and links (replaced). */
int gb_store_node_upsert(gb_store_t *self, const gb_store_node_t *n, const char *now);
int gb_store_node_state(gb_store_t *self, const char *agent_id, const char *state, const char *now);
/* The node is forgotten (nodes.forgotten_at = now): loaded again as
 * forgotten (its id and key pin kept, never placed on);
 * gb_store_node_upsert (its agent's next Hello) makes it known again. */
int gb_store_node_forget(gb_store_t *self, const char *agent_id, const char *now);
/* Every node ever seen, forgotten ones too (n->forgotten); gpus and links
 * are not filled. */
int gb_store_load_nodes(gb_store_t *self, void (*fn)(void *ctx, const gb_store_node_t *n),
                        void *ctx);

/* ---- sweeps and jobs ---------------------------------------------------- */

/* request_id: the submit's (SubmitRequest.request_id); NULL or "" for none. */
int gb_store_sweep_insert(gb_store_t *self, const char *name, const char *spec, size_t n_jobs,
                          const char *request_id, const char *now, uint64_t *sweep_id);
int gb_store_sweep_finish(gb_store_t *self, uint64_t sweep_id, const char *state, const char *now);
/* The store's identity (store_meta, migration 0012): 16 hex digits. 0 or
 * -1 (errmsg says why). */
int gb_store_id(gb_store_t *self, char *out, size_t outlen);
/* The sweep a submit with this request id made: 1 (sweep_id, n_jobs set),
 * 0 none, -1 error. */
int gb_store_sweep_by_request(gb_store_t *self, const char *request_id, uint64_t *sweep_id,
                              uint32_t *n_jobs);

typedef struct gb_store_job {
    uint64_t job_id, sweep_id;
    int seq;
    const char *kind, *params, *backend, *precision, *interconnect; /* NULL: SQL NULL */
    int n_gpus, batch_per_gpu;                                      /* batch < 0: NULL */
    int synthetic, max_attempts;
    /* as loaded */
    const char *state, *agent_id;
    uint32_t attempt;
    int cancel_requested;
    const char *cancel_reason; /* the cancel's reason (schema 0017); NULL: the default */
    const char *attempt_state; /* of the current attempt, or NULL */
    const char *attempt_backend;
    int free_attempts; /* attempts that did not count against max_attempts */
} gb_store_job_t;

int gb_store_job_insert(gb_store_t *self, const gb_store_job_t *j, const char *now,
                        uint64_t *job_id);
/* The job runs as `attempt` on agent_id with backend: jobs row and a new
 * attempts row ('assigned'). */
int gb_store_job_assign(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *agent_id,
                        const char *backend, const char *now);
int gb_store_attempt_started(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *now);
/* End an attempt: state lost | failed | done | cancelled | superseded. */
int gb_store_attempt_end(gb_store_t *self, uint64_t job_id, uint32_t attempt, const char *state,
                         const char *error, const char *now);
/* Back to the queue; free_attempts: how many of its attempts so far did
 * not count against max_attempts (schema 0003). */
int gb_store_job_requeue(gb_store_t *self, uint64_t job_id, int free_attempts);
/* An attempt given up as lost is running after all: attempt and job back to
 * running on agent_id. */
int gb_store_attempt_revive(gb_store_t *self, uint64_t job_id, uint32_t attempt,
                            const char *agent_id);
/* Terminal: done | failed | cancelled. */
int gb_store_job_finish(gb_store_t *self, uint64_t job_id, const char *state, const char *error,
                        const char *now);
/* Every queued job of a sweep ends cancelled with error, in one statement
 * (one per job made a 10,000-job cancel a turn of seconds under ASan: each
 * UPDATE of jobs.state builds its CHECK's IN list anew); *n: how many. */
int gb_store_sweep_cancel_queued(gb_store_t *self, uint64_t sweep_id, const char *error,
                                 const char *now, int *n);
/* A running job's cancel asked: cancel_requested, with its reason
 * (jobs.cancel_reason, schema 0017; NULL: none given, the default). */
int gb_store_job_cancel_requested(gb_store_t *self, uint64_t job_id, const char *reason);
/* Unfinished jobs (queued, running) in job_id order, with their current attempt. */
int gb_store_load_jobs(gb_store_t *self, void (*fn)(void *ctx, const gb_store_job_t *j), void *ctx);
/* The agent and state of an attempt; 0 found, 1 not found, -1 error. */
int gb_store_attempt_get(gb_store_t *self, uint64_t job_id, uint32_t attempt, char *agent_id,
                         size_t agent_len, char *state, size_t state_len);

/* ---- results ------------------------------------------------------------ */

typedef struct gb_store_result {
    uint64_t job_id;
    uint32_t attempt;
    const char *agent_id, *status, *kind;
    const char *backend, *device_model, *precision, *invalid_reason; /* NULL: SQL NULL */
    int n_devices;                                                   /* < 0: NULL */
    double images_per_sec, step_ms_median, step_ms_p90, gflops;      /* NaN: NULL */
    int valid;                                                       /* < 0: NULL */
    int synthetic;
    const char *error, *output_tail, *record;
    int exit_code;
    const char *started_at, *finished_at;
    /* the key it came under and that key's name in --authorized; "" without
     * keys, NULL where not known */
    const char *agent_key, *key_name;
    const double *step_ms, *loss; /* n_samples each, or NULL */
    size_t n_samples;
    int samples_stride; /* steps per sample: samples.step is i x this (0 taken as 1) */
} gb_store_result_t;

/* Insert a result with its samples; *inserted = 0 when (job, attempt) was
 * already stored (a resend: nothing changes). */
int gb_store_result_insert(gb_store_t *self, const gb_store_result_t *r, const char *now,
                           int *inserted);

/* ---- status ------------------------------------------------------------- */

typedef struct gb_store_sweep_status {
    uint64_t sweep_id;
    const char *name, *state, *created_at;
    unsigned total, queued, running, done, failed, cancelled;
} gb_store_sweep_status_t;

/* Sweeps with job counts: one (sweep_id > 0) or all (0), newest last.
 * Returns the number reported, or -1. */
int gb_store_sweep_status(gb_store_t *self, uint64_t sweep_id,
                          void (*fn)(void *ctx, const gb_store_sweep_status_t *s), void *ctx);

/* The SQLite connection, for modules that keep their own statements on it
 * (coordinator/ranks.c) and so share the open transaction. */
struct sqlite3;
struct sqlite3 *gb_store_db(gb_store_t *self);

#endif
