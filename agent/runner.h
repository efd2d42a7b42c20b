/* runner.h - one worker child process: started with fork/exec, its stdout
 * and stderr captured through one pipe (the last bytes kept as the tail),
 * killed when it outlives its time limit or is cancelled, reaped without
 * blocking, and turned into a Result.
 *
 * The child gets its own process group (so a kill reaches anything it
 * started), PR_SET_PDEATHSIG(SIGKILL) (so it dies with the agent instead of
 * running on unwatched), stdin from /dev/null, and no other descriptors.
 * Nothing here blocks: the agent's reactor polls gb_run_fd() and calls
 * gb_run_read() and gb_run_poll(). */
#ifndef GB_AGENT_RUNNER_H
#define GB_AGENT_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#define GB_TAIL_BYTES 8192

typedef struct gb_run gb_run_t;

typedef enum {
    GB_RUN_OK = 1,
    GB_RUN_FAILED,
    GB_RUN_TIMEOUT,
    GB_RUN_CRASHED,
    GB_RUN_CANCELLED,
} gb_run_status_t; /* same numbering as the wire's ResultStatus */

typedef struct gb_run_result {
    gb_run_status_t status;
    int exit_code;     /* exit status, or -signal */
    char *record_json; /* malloc'd record (status OK), or NULL */
    char error[1024];
    char tail[GB_TAIL_BYTES + 1];    /* printable ASCII, '\n' and '\t' kept */
    int64_t started_ms, finished_ms; /* Unix ms */
    int outcome_lost;                /* the agent lost the worker's report (its spool entry):
                                      * the wire's Result.outcome_lost, status FAILED */
} gb_run_result_t;

/* Write job_json to dir/job.json and start `exe worker --job dir/job.json
 * --out dir/result.json`. dir must exist. NULL with a reason on failure. */
gb_run_t *gb_run_start(const char *exe, const char *dir, const char *job_json, int timeout_s,
                       int kill_grace_ms, char *err, size_t errlen);
/* The same, and with rdv != 0 a rendezvous channel (common/gb_rdv.h): one
 * end of a Unix stream socket pair is the child's descriptor GB_RDV_FD, the
 * other (non-blocking) is gb_run_rdv_fd(). */
gb_run_t *gb_run_start_ex(const char *exe, const char *dir, const char *job_json, int timeout_s,
                          int kill_grace_ms, int rdv, char *err, size_t errlen);
/* Make the job's directory again (removed while its worker ran, with the
 * agent's state directory), with the record's reservation unless the worker
 * already wrote its record there. */
int gb_run_restore_dir(const gb_run_t *self, char *err, size_t errlen);
/* The agent's end of the rendezvous channel, or -1 without one (or after
 * gb_run_rdv_close). */
int gb_run_rdv_fd(const gb_run_t *self);
/* The reaped worker's CPU time (user + system, its threads and reaped
 * children included) in clock ticks, as /proc/PID/stat counts it; -1 while
 * it has not been reaped. */
int gb_run_cpu_ticks(const gb_run_t *self, uint64_t *ticks);
void gb_run_rdv_close(gb_run_t *self);
/* The time limit from now: `ms` more, then timeout_s (a multi-node job's
 * limit counts from its start, after the rendezvous: the wait there is
 * bounded by rendezvous_s, not by the run's own limit). No-op once timed out. */
void gb_run_limit_from_now(gb_run_t *self, int64_t ms);
/* Kill the child if it still runs (waiting at most the grace period, or
 * until the end of the one gb_run_stop began), reap it, SIGKILL what is
 * left of its process group, and free. */
void gb_run_destroy(gb_run_t **self_p);
/* The agent stops: SIGTERM to the worker's group now, so that the graces of
 * every slot run at once (NULL: nothing). */
void gb_run_stop(gb_run_t *self);

/* The pipe to poll for output, or -1 once it reached end of file. */
int gb_run_fd(const gb_run_t *self);
/* Read what is available (never blocks). */
void gb_run_read(gb_run_t *self);
/* Enforce the time limit and reap; 1 once the child has exited and its
 * output is drained, else 0. now_ms is CLOCK_MONOTONIC ms. */
int gb_run_poll(gb_run_t *self, int64_t now_ms);
/* Stop the job on request: SIGTERM now, SIGKILL after the grace period;
 * why (NULL or "": "cancelled by request") becomes the job's error. A
 * worker that already died, or was past its time limit (being killed for
 * it), is reported as what it was. */
void gb_run_cancel(gb_run_t *self, const char *why);
/* After gb_run_poll returned 1: the outcome (record read from
 * dir/result.json). The caller frees out->record_json. */
void gb_run_result(gb_run_t *self, gb_run_result_t *out);
/* Where the agent is its PID namespace's init or a subreaper: reap what is
 * left of ended workers' process groups (their replicas, re-parented to
 * it). Called once a loop turn; a no-op otherwise. */
void gb_run_reap_orphans(void);
int gb_run_pid(const gb_run_t *self);

#endif
