/* client.h - the client side of the control protocol, shared by the
 * commands (submit, wait, status, nodes, cancel, results) and by `gpubench
 * run`, which drives its embedded coordinator the same way. */
#ifndef GB_CLI_CLIENT_H
#define GB_CLI_CLIENT_H

#include "cli_util.h"
#include "gb_curve.h"
#include "gb_wire.h"
#include "output.h"

#include <getopt.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every call takes the control endpoint and the CURVE keys to reach it with
 * (NULL: plaintext). */

/* --control, --key and --server-key, which every command that talks to the
 * control endpoint takes: put CLI_CONN_OPTIONS in its getopt table and let
 * cli_conn_opt see each option first. */
// clang-format off
#define CLI_CONN_OPTIONS                                                                           \
    {"control", required_argument, 0, CLI_OPT_CONTROL},                                            \
    CLI_KEY_OPTIONS
// clang-format on

typedef struct cli_conn {
    const char *control;            /* default cli_control_default() */
    const char *key, *server_key;   /* NULL: $GB_KEY, $GB_SERVER_KEY */
    gb_curve_client_t keys;         /* loaded by cli_conn_keys */
    const gb_curve_client_t *curve; /* &keys with keys, NULL without */
} cli_conn_t;

void cli_conn_init(cli_conn_t *c);
/* 1 when opt is one of CLI_CONN_OPTIONS (its value kept), 0 otherwise. */
int cli_conn_opt(cli_conn_t *c, int opt, const char *arg);
/* Load the keys; 0, or 2 (the exit status) with the reason printed as
 * "gpubench CMD: ...". */
int cli_conn_keys(const char *cmd, cli_conn_t *c);
/* Keys, then one request whose reply must have body `want`: 0 with *rep
 * (gb_wire_free it), or the exit status with the reason printed as
 * "gpubench CMD: ...": 2 for keys that cannot be used, 1 otherwise. */
int cli_conn_request(const char *cmd, cli_conn_t *c, Gb__Envelope *env, int want,
                     Gb__Envelope **rep);

/* Submit a spec under request_id (16..64 of [0-9A-Za-z_-]; NULL: a random
 * one); a resend's notice starts "gpubench CMD:". 0 with the sweep id; 1
 * when the coordinator rejected it (reason in err); -1 when it could not be
 * reached or the wait was interrupted. */
int cli_submit(const char *cmd, const char *control, const gb_curve_client_t *curve,
               const char *spec, const char *request_id, uint64_t *sweep_id, uint32_t *n_jobs,
               char *err, size_t errlen);

/* The sweep a submit under request_id made, without making one: 0 with its
 * id, 1 when none was made, -1 when it cannot be said (err), -3 when no
 * reply came where a coordinator may be listening (asking again may tell). */
int cli_submit_made(const char *control, const gb_curve_client_t *curve, const char *spec,
                    const char *request_id, uint64_t *sweep_id, char *err, size_t errlen);

/* How cli_wait waits and what it says. */
typedef struct cli_wait_opts {
    const char *cmd;  /* its messages start "gpubench CMD:" */
    int timeout_s;    /* > 0: give up after that many seconds (exit 1) */
    int interval_ms;  /* between status requests */
    int progress;     /* > 0 always draw the progress line, < 0 never, 0 on a terminal */
    atomic_int *stop; /* NULL, or set by a signal: stop waiting */
    /* NULL, or set when the coordinator this waits on ended in this process
     * (run's own): stop waiting, said; it waited for ever, asking a
     * coordinator that had stopped (a damaged or replaced store) */
    atomic_int *gone;
    /* say "interrupted" when stopped (0 where the caller says what the stop
     * made it do, as run does) */
    int say_interrupted;
    /* a failed sweep's line names where each job's error is (0 where the
     * caller prints them next, as run's table does) */
    int say_where_errors;
} cli_wait_opts_t;

/* Block until the sweep ends; a progress line on stderr as o->progress
 * says. Rides out coordinator restarts. Returns the exit status: 0 all
 * done, 1 some failed or were cancelled or the wait timed out or was
 * stopped, 2 no such sweep. */
int cli_wait(const char *control, const gb_curve_client_t *curve, uint64_t sweep_id,
             const cli_wait_opts_t *o);

/* Cancel a sweep's queued jobs and stop its running ones (job_id 0), or
 * one job of it. reason (NULL or "": "cancelled by request"; one line, at
 * most GB_WIRE_TEXT_MAX bytes) becomes the cancelled jobs' error. 0 with
 * the counts; 1 rejected (reason in err, e.g. no such sweep or job); -1
 * unreachable. */
int cli_cancel(const char *control, const gb_curve_client_t *curve, uint64_t sweep_id,
               uint64_t job_id, const char *reason, uint32_t *cancelled, uint32_t *stopping,
               char *err, size_t errlen);

/* Which rows of v_results to print; zero or NULL: every one. */
typedef struct cli_results_filter {
    const char *kinds;    /* "resnet50,gemm": these kinds */
    const char *statuses; /* "failed,cancelled": these job states */
    const char *node;     /* a GLOB on a node's name (any rank's) */
    long last;            /* the last N jobs (by job id), after the rest */
} cli_results_filter_t;

/* Print v_results of db (one sweep, or all with sweep_id 0; f NULL or
 * its filters); the table format shows the main columns, csv/json every
 * column. Returns the exit status (1 when the store cannot be read). */
int cli_print_results(const char *db, uint64_t sweep_id, const cli_results_filter_t *f,
                      gb_format_t fmt);

/* Wait until at least n agents are connected (at_most: at most n); 0, or
 * -1 on timeout or stop. */
int cli_wait_nodes(const char *control, const gb_curve_client_t *curve, int n, int at_most,
                   int timeout_ms, atomic_int *stop);

#endif
