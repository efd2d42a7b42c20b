/* client.c - see client.h. */
#define _POSIX_C_SOURCE 200809L
#include "client.h"

#include "cli_util.h"
#include "gb_log.h"
#include "gb_util.h"
#include "gb_zmq.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cli_conn_init(cli_conn_t *c) {
    memset(c, 0, sizeof *c);
    c->control = cli_control_default();
}

int cli_conn_opt(cli_conn_t *c, int opt, const char *arg) {
    switch (opt) {
    case CLI_OPT_CONTROL:
        c->control = arg;
        return 1;
    case CLI_OPT_KEY:
        c->key = arg;
        return 1;
    case CLI_OPT_SERVER_KEY:
        c->server_key = arg;
        return 1;
    default:
        return 0;
    }
}

int cli_conn_keys(const char *cmd, cli_conn_t *c) {
    char err[512];
    if (c->control && gb_endpoint_check(c->control, err, sizeof err) != 0) {
        /* a bad option: a usage error; one from the environment says so (a
         * shell profile's GB_CONTROL=host:5556 read as a mistyped --control) */
        const char *env = getenv("GB_CONTROL");
        fprintf(stderr, "gpubench %s: %s%s\n", cmd, err,
                env && c->control == env ? " (from $GB_CONTROL; --control overrides it)" : "");
        return 2;
    }
    return cli_curve_setup(cmd, c->key, c->server_key, &c->keys, &c->curve);
}

int cli_conn_request(const char *cmd, cli_conn_t *c, Gb__Envelope *env, int want,
                     Gb__Envelope **rep) {
    char err[512];
    *rep = NULL;
    int k = cli_conn_keys(cmd, c);
    if (k != 0) return k; /* 2: the keys given cannot be used */
    int rc = gb_request_ex(c->control, c->curve, env, GB_REQUEST_MS, rep, err, sizeof err);
    if (rc == 0 && (int)(*rep)->body_case == want) return 0;
    if (rc == 1 && (*rep)->reject->code == GB__REJECT_CODE__REJECT_UNEXPECTED)
        fprintf(stderr,
                "gpubench %s: %s does not take commands (%s): is it the coordinator's agents "
                "endpoint? --control wants its control endpoint\n",
                cmd, c->control, err);
    else
        fprintf(stderr, "gpubench %s: %s\n", cmd, rc == 0 ? "unexpected reply" : err);
    gb_wire_free(rep);
    return 1;
}

/* One request whose reply must have body `want`: gb_request_ex's 0 / 1
 * (rejected) / -1 / -2 / -3 (no reply, something may be there), and -1
 * for any other reply. */
static int request_for(const char *control, const gb_curve_client_t *curve, Gb__Envelope *env,
                       int want, Gb__Envelope **rep, char *err, size_t errlen) {
    env->seq = (uint64_t)gb_wall_ms();
    int rc = gb_request_ex(control, curve, env, GB_REQUEST_MS, rep, err, errlen);
    if (rc == 0 && (int)(*rep)->body_case != want) {
        gb_fmt(err, errlen, "unexpected reply %s", gb_wire_body_name((*rep)->body_case));
        rc = -1;
    }
    return rc;
}

/* A submit carries a random request id; one whose reply does not come (a
 * network cut, the coordinator restarting, its reply lost after the commit)
 * is sent again, twice at most, with the same id: the coordinator answers
 * a resend with the sweep the first one made (sweeps.request_id), so a lost
 * reply neither fails a submit that worked nor makes a second sweep. Not
 * sent again when nothing listens there, the name does not resolve, or the
 * connection is refused outright. */
int cli_submit(const char *cmd, const char *control, const gb_curve_client_t *curve,
               const char *spec, const char *request_id, uint64_t *sweep_id, uint32_t *n_jobs,
               char *err, size_t errlen) {
    Gb__SubmitRequest rq = GB__SUBMIT_REQUEST__INIT;
    rq.spec_json = (char *)spec;
    char id[33], why[200];
    if (request_id && request_id[0])
        rq.request_id = (char *)request_id;
    else if (gb_random_hex(id, 16, why, sizeof why) == 0)
        rq.request_id = id;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &rq;
    Gb__Envelope *rep = NULL;
    int rc = -1;
    for (int tries = 0; tries < 3; tries++) {
        if (tries) {
            /* only to a coordinator that knows request ids: an older one
             * would make a second sweep of a resend */
            Gb__NodesRequest nq = GB__NODES_REQUEST__INIT;
            nq.no_nodes = 1;
            Gb__Envelope ask = GB__ENVELOPE__INIT;
            ask.body_case = GB__ENVELOPE__BODY_NODES;
            ask.nodes = &nq;
            Gb__Envelope *can = NULL;
            char err2[512];
            int r2 = request_for(control, curve, &ask, GB__ENVELOPE__BODY_NODES_REPLY, &can, err2,
                                 sizeof err2);
            int dedup = r2 == 0 && can->nodes_reply->submit_request_ids;
            gb_wire_free(&can);
            if (r2 == -3) continue; /* still away: that was a try */
            if (r2 != 0 || !dedup) {
                if (r2 == 0)
                    gb_fmt(err + strlen(err), errlen - strlen(err),
                           "; not sent again: this coordinator is older and would make a "
                           "second sweep of it");
                break;
            }
            fprintf(stderr,
                    "gpubench %s: %s; asking again (the same request: a sweep it made is not "
                    "made twice)\n",
                    cmd, err);
            gb_wire_free(&rep);
        }
        rc = request_for(control, curve, &env, GB__ENVELOPE__BODY_SUBMIT_REPLY, &rep, err, errlen);
        if (rc != -3 || !rq.request_id) break;
    }
    if (rc == -3 || (rc == -1 && strcmp(err, "interrupted") == 0))
        /* the request may have arrived: say where to look */
        gb_fmt(err + strlen(err), errlen - strlen(err),
               "; the coordinator may have got it: `gpubench status` lists the sweeps");
    if (rc == 0) {
        *sweep_id = rep->submit_reply->sweep_id;
        *n_jobs = rep->submit_reply->n_jobs;
    }
    gb_wire_free(&rep);
    return rc;
}

int cli_submit_made(const char *control, const gb_curve_client_t *curve, const char *spec,
                    const char *request_id, uint64_t *sweep_id, char *err, size_t errlen) {
    Gb__SubmitRequest rq = GB__SUBMIT_REQUEST__INIT;
    rq.spec_json = (char *)spec;
    rq.request_id = (char *)request_id;
    rq.only_if_made = 1;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &rq;
    Gb__Envelope *rep = NULL;
    int rc = request_for(control, curve, &env, GB__ENVELOPE__BODY_SUBMIT_REPLY, &rep, err, errlen);
    if (rc == 0) *sweep_id = rep->submit_reply->sweep_id;
    if (rc == 1 && rep->reject->code != GB__REJECT_CODE__REJECT_NOT_FOUND) rc = -1;
    gb_wire_free(&rep);
    return rc;
}

int cli_cancel(const char *control, const gb_curve_client_t *curve, uint64_t sweep_id,
               uint64_t job_id, const char *reason, uint32_t *cancelled, uint32_t *stopping,
               char *err, size_t errlen) {
    Gb__CancelRequest rq = GB__CANCEL_REQUEST__INIT;
    rq.sweep_id = sweep_id;
    rq.job_id = job_id;
    if (reason && reason[0]) rq.reason = (char *)reason;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
    env.cancel_request = &rq;
    Gb__Envelope *rep = NULL;
    int rc = request_for(control, curve, &env, GB__ENVELOPE__BODY_CANCEL_REPLY, &rep, err, errlen);
    if (rc == 0) {
        if (cancelled) *cancelled = rep->cancel_reply->cancelled;
        if (stopping) *stopping = rep->cancel_reply->stopping;
    }
    gb_wire_free(&rep);
    return rc;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The progress line, redrawn in place (\r); ended with final. Left open,
 * gb_log knows it: a log record (gpubench run's daemons) or a message
 * (gb_log_end_partial_line first) starts on a line of its own. */
static void draw(const Gb__SweepStatus *s, int final) {
    unsigned ended = s->done + s->failed + s->cancelled;
    int width = 30, fill = s->total ? (int)((uint64_t)ended * width / s->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    flockfile(stderr);
    fprintf(stderr,
            "\rsweep %" PRIu64 " [%s] %u/%u  running %u  queued %u  failed %u  cancelled %u%s",
            s->sweep_id, bar, ended, s->total, s->running, s->queued, s->failed, s->cancelled,
            final ? "\n" : "");
    fflush(stderr);
    gb_log_partial_line(!final);
    funlockfile(stderr);
}

int cli_wait(const char *control, const gb_curve_client_t *curve, uint64_t sweep_id,
             const cli_wait_opts_t *o) {
    const char *cmd = o->cmd;
    const int timeout_s = o->timeout_s, interval_ms = o->interval_ms;
    atomic_int *stop = o->stop;
    int tty = o->progress > 0 || (o->progress == 0 && isatty(2));
    int64_t deadline = 0; /* set at the first request, from the clock it reads */
    int warned = 0, refused = 0, heard = 0, invalid = 0;
    /* the progress last drawn (its numbers only), drawn again under a
     * warning: the warning starts a line of its own */
    Gb__SweepStatus last = GB__SWEEP_STATUS__INIT;
    int have_last = 0;
    for (;;) {
        if (o->gone && atomic_load(o->gone)) {
            gb_log_end_partial_line();
            fprintf(stderr,
                    "gpubench %s: the local coordinator or agent stopped (its log above says why); "
                    "sweep %" PRIu64 " did not finish\n",
                    cmd, sweep_id);
            return 1;
        }
        if (stop && atomic_load(stop)) {
            gb_log_end_partial_line();
            /* run says it with what it did then ("interrupted: sweep N
             * cancelled (...)"): one line, not that and this one */
            if (o->say_interrupted) fprintf(stderr, "gpubench %s: interrupted\n", cmd);
            return 1;
        }
        Gb__StatusRequest rq = GB__STATUS_REQUEST__INIT;
        rq.sweep_id = sweep_id;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = (uint64_t)gb_wall_ms();
        env.body_case = GB__ENVELOPE__BODY_STATUS;
        env.status = &rq;
        Gb__Envelope *rep = NULL;
        char err[512];
        int req_ms = GB_REQUEST_MS; /* --timeout holds while the coordinator is away too */
        int64_t now = gb_mono_ms();
        /* one reading of the clock: the first request of a --timeout under 5 s
         * waits (and says it waited) exactly that long, not a millisecond
         * less when the clock ticked between two readings */
        if (timeout_s > 0 && !deadline) deadline = now + (int64_t)timeout_s * 1000;
        if (deadline && deadline - now < req_ms)
            req_ms = deadline - now > 100 ? (int)(deadline - now) : 100;
        int rc = gb_request_ex(control, curve, &env, req_ms, &rep, err, sizeof err);
        if ((stop && atomic_load(stop)) || (o->gone && atomic_load(o->gone))) {
            /* the request cut short by it ("interrupted"), or the daemons
             * ended: said once, at the top */
            gb_wire_free(&rep);
            continue;
        }
        if (rc != -2) refused = 0;
        if (rc != -4) invalid = 0;
        if (rc == 1 && rep->reject->code == GB__REJECT_CODE__REJECT_RATE) {
            gb_wire_free(&rep); /* asked too often: the next round comes soon enough */
        } else if (rc == 1) {
            int code = rep->reject->code;
            gb_wire_free(&rep);
            gb_log_end_partial_line();
            if (code == GB__REJECT_CODE__REJECT_UNEXPECTED) {
                /* the agents' endpoint answers a status request so: asking
                 * again will not make it the control endpoint */
                fprintf(stderr,
                        "gpubench %s: %s does not take commands (%s): is it the coordinator's "
                        "agents endpoint? --control wants its control endpoint\n",
                        cmd, control, err);
                return 1;
            }
            fprintf(stderr, "gpubench %s: %s\n", cmd, err);
            if (code == GB__REJECT_CODE__REJECT_NOT_FOUND) return 2;
            /* a refusal that asking again cannot change */
            if (code == GB__REJECT_CODE__REJECT_DENIED || code == GB__REJECT_CODE__REJECT_DECODE ||
                code == GB__REJECT_CODE__REJECT_VERSION || code == GB__REJECT_CODE__REJECT_RANGE ||
                code == GB__REJECT_CODE__REJECT_TOO_LARGE)
                return 1;
            if (tty && have_last) draw(&last, 0); /* asked again: the progress under it */
        } else if (rc == -2 && strstr(err, "permission denied")) {
            gb_log_end_partial_line();
            fprintf(stderr, "gpubench %s: %s\n", cmd, err);
            return 1;
        } else if (rc == -2 && ++refused >= 3) {
            /* the coordinator answers and refuses our handshake (key not
             * listed, keys on one side only): waiting will not change that */
            gb_log_end_partial_line();
            fprintf(stderr, "gpubench %s: %s\n", cmd, err);
            return 1;
        } else if (rc == -4 && ++invalid >= 3) {
            /* the coordinator answers, three times in a row with what this
             * client cannot take (a sweep's name with a C1 control
             * character, stored before the spec refused one): asked for
             * ever, and "no answer" at --timeout */
            gb_log_end_partial_line();
            fprintf(stderr, "gpubench %s: %s\n", cmd, err);
            return 1;
        } else if (rc < 0) {
            if (!warned) { /* on a line of its own, the progress drawn again under it */
                gb_log_end_partial_line();
                fprintf(stderr, "gpubench %s: %s; still waiting\n", cmd, err);
                if (tty && have_last) draw(&last, 0);
            }
            warned = 1;
        } else if (rep->body_case == GB__ENVELOPE__BODY_STATUS_REPLY &&
                   rep->status_reply->n_sweeps == 1) {
            warned = 0;
            heard = 1;
            const Gb__SweepStatus *s = rep->status_reply->sweeps[0];
            int ended = strcmp(s->state, "running") != 0;
            if (tty) draw(s, ended);
            last = *s; /* its strings are rep's, freed below: not drawn */
            last.name = last.state = last.created_at = NULL;
            have_last = 1;
            if (ended) {
                int ok = strcmp(s->state, "done") == 0;
                /* wait says where the failures' reasons are (run prints
                 * them in its table next) */
                char why[160] = "";
                if (!ok && s->failed && o->say_where_errors)
                    gb_fmt(why, sizeof why,
                           "; each job's error: gpubench results --sweep %" PRIu64
                           " on the coordinator's store",
                           sweep_id);
                if (!ok)
                    fprintf(stderr,
                            "gpubench %s: sweep %" PRIu64
                            " %s: %u done, %u failed, %u cancelled%s\n",
                            cmd, sweep_id, s->state, s->done, s->failed, s->cancelled, why);
                gb_wire_free(&rep);
                return ok ? 0 : 1;
            }
        }
        gb_wire_free(&rep);
        if (deadline && gb_mono_ms() > deadline) {
            gb_log_end_partial_line();
            if (!heard) /* it may have ended long ago: not known */
                fprintf(stderr,
                        "gpubench %s: no answer from the coordinator within %d s: the state of "
                        "sweep %" PRIu64 " is not known\n",
                        cmd, timeout_s, sweep_id);
            else if (warned)
                fprintf(stderr,
                        "gpubench %s: sweep %" PRIu64 " was not finished when the coordinator "
                        "last answered; no answer since, %d s in all\n",
                        cmd, sweep_id, timeout_s);
            else
                fprintf(stderr, "gpubench %s: sweep %" PRIu64 " not finished after %d s\n", cmd,
                        sweep_id, timeout_s);
            return 1;
        }
        int64_t nap = interval_ms;
        if (deadline && deadline - gb_mono_ms() < nap) nap = deadline - gb_mono_ms() + 1;
        sleep_ms(nap > 0 ? (int)nap : 1);
    }
}

int cli_wait_nodes(const char *control, const gb_curve_client_t *curve, int n, int at_most,
                   int timeout_ms, atomic_int *stop) {
    int64_t deadline = gb_mono_ms() + timeout_ms;
    while (gb_mono_ms() < deadline && !(stop && atomic_load(stop))) {
        Gb__NodesRequest rq = GB__NODES_REQUEST__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = (uint64_t)gb_wall_ms();
        env.body_case = GB__ENVELOPE__BODY_NODES;
        env.nodes = &rq;
        Gb__Envelope *rep = NULL;
        char err[256];
        if (gb_request_ex(control, curve, &env, GB_REQUEST_MS, &rep, err, sizeof err) == 0 &&
            rep->body_case == GB__ENVELOPE__BODY_NODES_REPLY) {
            int connected = 0;
            for (size_t i = 0; i < rep->nodes_reply->n_nodes; i++)
                connected += strcmp(rep->nodes_reply->nodes[i]->state, "connected") == 0;
            gb_wire_free(&rep);
            if (at_most ? connected <= n : connected >= n) return 0;
        }
        gb_wire_free(&rep);
        sleep_ms(50);
    }
    return -1;
}

/* the table's note on invalid rows: their reasons, this many at most */
#define MAX_WHY_LINES 10

int cli_print_results(const char *db_path, uint64_t sweep_id, const cli_results_filter_t *f,
                      gb_format_t fmt) {
    static const cli_results_filter_t all = {0};
    if (!f) f = &all;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    gb_table_t *t = NULL;
    int rc = 1;
    char *why = NULL; /* the reasons of invalid rows, for the table */
    size_t why_len = 0;
    FILE *whyf = NULL;
    if (!(db = cli_store_open("results", db_path))) return 1;
    /* the filters: a list matched whole entries (",done," in ",done,failed,");
     * a node by its name or any rank's (a multi-node job's node is rank 0's);
     * the last N jobs by job id, shown in the usual order */
    if (sqlite3_prepare_v2(
            db,
            "SELECT * FROM (SELECT * FROM v_results v WHERE (?1 = 0 OR sweep_id = ?1)"
            " AND (?2 IS NULL OR instr(',' || ?2 || ',', ',' || kind || ',') > 0)"
            " AND (?3 IS NULL OR instr(',' || ?3 || ',', ',' || status || ',') > 0)"
            " AND (?4 IS NULL OR shell_match(?4, node) OR EXISTS (SELECT 1 FROM ranks k"
            " JOIN nodes kn ON kn.agent_id = k.agent_id WHERE k.job_id = v.job_id"
            " AND k.attempt = v.attempt AND shell_match(?4, kn.name)))"
            " ORDER BY job_id DESC LIMIT ?5) ORDER BY sweep_id, job_id",
            -1, &st, NULL) != SQLITE_OK) {
        cli_store_not_ours("results", db, db_path);
        goto out;
    }
    if (sweep_id) { /* an unknown sweep is an error, as in status and wait */
        sqlite3_stmt *q = NULL;
        int known = sqlite3_prepare_v2(db, "SELECT 1 FROM sweeps WHERE sweep_id = ?1", -1, &q,
                                       NULL) == SQLITE_OK &&
                    sqlite3_bind_int64(q, 1, (sqlite3_int64)sweep_id) == SQLITE_OK &&
                    sqlite3_step(q) == SQLITE_ROW;
        sqlite3_finalize(q);
        if (!known) {
            fprintf(stderr, "gpubench results: no sweep %" PRIu64 " in %s\n", sweep_id, db_path);
            goto out;
        }
    }
    sqlite3_bind_int64(st, 1, (sqlite3_int64)sweep_id);
    if (f->kinds) sqlite3_bind_text(st, 2, f->kinds, -1, SQLITE_STATIC);
    if (f->statuses) sqlite3_bind_text(st, 3, f->statuses, -1, SQLITE_STATIC);
    if (f->node) sqlite3_bind_text(st, 4, f->node, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, f->last > 0 ? f->last : -1); /* LIMIT -1: none */
    /* the table shows these; csv and json every column */
    /* (interconnect and n_nodes: NVLink against PCIe, one node against
     * several, were two rows that read alike; m, n, k: a gemm's GFLOP/s
     * did not say which matrices it was) */
    static const char *const brief[] = {
        "sweep_id", "job_id",  "node",         "gpu_model",      "backend",        "kind",
        "n_gpus",   "n_nodes", "precision",    "batch_per_gpu",  "image_size",     "m",
        "n",        "k",       "interconnect", "images_per_sec", "step_ms_median", "gflops",
        "valid",    "status",  "error"};
    int ncols = sqlite3_column_count(st);
    int map[64], nshow = 0;
    const char *names[64];
    if (!gb_format_for_people(fmt)) /* every column, in the view's order */
        for (int c = 0; c < ncols && c < 64; c++) {
            map[nshow] = c;
            names[nshow++] = sqlite3_column_name(st, c);
        }
    else /* these, in this order (the view appends columns as it grows) */
        for (size_t b = 0; b < sizeof brief / sizeof brief[0]; b++)
            for (int c = 0; c < ncols && c < 64; c++)
                if (strcmp(sqlite3_column_name(st, c), brief[b]) == 0) {
                    map[nshow] = c;
                    names[nshow++] = sqlite3_column_name(st, c);
                    break;
                }
    t = gb_table_new(nshow, names);
    if (!t) goto out;
    /* decimals per column, decided now: the names are SQLite's, valid only
     * until the first step, which may prepare the statement again (a bound
     * GLOB pattern does) */
    int decimals[64];
    for (int i = 0; i < nshow; i++)
        decimals[i] = strstr(names[i], "ms") ? 3
                      : strstr(names[i], "per_sec") || strcmp(names[i], "gflops") == 0
                          ? GB_DECIMALS_RATE
                          : 1;
    /* the table says valid 0 but not why: the reasons follow it */
    int c_job = -1, c_valid = -1, c_why = -1;
    for (int c = 0; c < ncols; c++) {
        const char *nm = sqlite3_column_name(st, c);
        if (strcmp(nm, "job_id") == 0) c_job = c;
        if (strcmp(nm, "valid") == 0) c_valid = c;
        if (strcmp(nm, "invalid_reason") == 0) c_why = c;
    }
    int want_why = gb_format_for_people(fmt) && c_job >= 0 && c_valid >= 0 && c_why >= 0;
    int n_rows = 0, n_invalid = 0;
    if (want_why) whyf = open_memstream(&why, &why_len); /* NULL: the table only */
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        n_rows++;
        if (want_why && sqlite3_column_type(st, c_valid) != SQLITE_NULL &&
            sqlite3_column_int(st, c_valid) == 0 && ++n_invalid <= MAX_WHY_LINES && whyf) {
            fprintf(whyf, "job %lld invalid: ", (long long)sqlite3_column_int64(st, c_job));
            gb_put_line(whyf, sqlite3_column_text(st, c_why)
                                  ? (const char *)sqlite3_column_text(st, c_why)
                                  : "(no reason stored)");
            fputc('\n', whyf);
        }
        if (gb_table_row(t) != 0) goto out;
        for (int i = 0; i < nshow; i++) {
            int c = map[i];
            switch (sqlite3_column_type(st, c)) {
            case SQLITE_INTEGER:
                gb_table_int(t, i, sqlite3_column_int64(st, c));
                break;
            case SQLITE_FLOAT:
                gb_table_real(t, i, sqlite3_column_double(st, c), decimals[i]);
                break;
            case SQLITE_NULL:
                gb_table_text(t, i, NULL);
                break;
            default:
                gb_table_text(t, i, (const char *)sqlite3_column_text(st, c));
            }
        }
    }
    if (step != SQLITE_DONE) {
        fprintf(stderr, "gpubench results: %s\n", sqlite3_errmsg(db));
        goto out;
    }
    gb_table_print(t, stdout, fmt);
    if (n_invalid && whyf && fclose(whyf) == 0) {
        whyf = NULL;
        printf("\n%d of %d result(s) invalid, not to be trusted (invalid_reason in the store):\n%s",
               n_invalid, n_rows, why);
        if (n_invalid > MAX_WHY_LINES) printf("... and %d more\n", n_invalid - MAX_WHY_LINES);
    }
    rc = 0;
out:
    if (whyf) fclose(whyf);
    free(why);
    gb_table_destroy(&t);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}
