/* cmd_run.c - `gpubench run`: a coordinator and one local agent in this
 * process (one thread each, talking over loopback like any other pair),
 * a small default sweep on this machine, the results table, exit 0 when
 * every job succeeded. */
#define _POSIX_C_SOURCE 200809L
#include "agent.h"
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "coordinator.h"
#include "gb_log.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "inventory.h"
#include "worker.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* The batch of the default GPU sweep: 256 where the smallest GPU holds it in
 * tf32 (fp32 storage: the plan's arena is 27.3 GB at 256, 107 MB an image,
 * docs/engine-cuda.md; about 3.5 GB more for the weights, cuDNN's workspace
 * and the context; 5% left free), else the largest power of two below that
 * does (a 24 GB card: 128; 16 GB: 64). One batch for all three precisions:
 * they are compared at the same batch, as buying guides do. */
static int default_gpu_batch(const gb_inventory_t *inv) {
    uint64_t least = 0;
    for (int i = 0; i < inv->n_gpus; i++)
        if (inv->gpus[i].memory_bytes && (!least || inv->gpus[i].memory_bytes < least))
            least = inv->gpus[i].memory_bytes;
    if (!least) return 256; /* not told: as before */
    int b = 256;
    while (b > 8 && (double)b * 107e6 + 3.5e9 > 0.95 * (double)least)
        b /= 2;
    return b;
}

/* The default sweep for this machine: ResNet-50 on every GPU alone in the
 * precisions buyers compare (tf32, fp16, bf16; batch 256 where it fits,
 * seconds), or on the CPU at batch 8 in fp32, and bf16 where the CPU has it
 * (about a minute on two cores); beside each, the matrix rate in the same
 * precision (the gemm kind: 8192^3 on a GPU, large enough to reach its
 * peak; 2048^3 on the CPU, 50 ms a product there; a second or two in all).
 * Without the engine built in, the gemm probe at three shapes. */
static const char *default_spec(const gb_inventory_t *inv, char *what, size_t whatlen) {
    if (!gb_worker_has_engine()) {
        gb_fmt(what, whatlen, "gemm, m = 512, 1024, 2048 by n = k = 2048");
        return "{\"name\": \"gpubench run\", \"kind\": \"gemm\", \"m\": [512, 1024, 2048],"
               " \"n\": 2048, \"k\": 2048}";
    }
    /* one GPU in buyers' three precisions; else the CPU, bf16 where it has it */
    static char spec[320];
    int gpu = inv->n_gpus > 0, bf16 = gb_worker_cpu_bf16();
    int b = gpu ? default_gpu_batch(inv) : 8, size = gpu ? 8192 : 2048;
    const char *names = "tf32, fp16 and bf16", *list = "\"tf32\", \"fp16\", \"bf16\"";
    const char *note = b < 256 ? " (256 does not fit in its memory)" : "";
    if (!gpu) {
        names = bf16 ? "fp32 and bf16" : "fp32";
        list = bf16 ? "\"fp32\", \"bf16\"" : "\"fp32\"";
        note = bf16 ? "" : " (bf16 needs avx512_bf16)";
    }
    gb_fmt(what, whatlen, "ResNet-50 on %s in %s, batch %d%s, and the matrix rate%s: gemm %dx%dx%d",
           gpu ? "one GPU" : "the CPU", names, b, note, gpu || bf16 ? " in each" : "", size, size,
           size);
    gb_fmt(spec, sizeof spec,
           "{\"name\": \"gpubench run\", \"kind\": [\"resnet50\", \"gemm\"], \"precision\": "
           "[%s], %s\"batch\": %d, \"steps\": %d, \"warmup\": %d, \"m\": %d, \"n\": %d, "
           "\"k\": %d, \"reps\": 20}",
           list, gpu ? "\"gpus\": 1, " : "", b, gpu ? 30 : 10, gpu ? 10 : 3, size, size, size);
    return spec;
}

static const gb_inventory_t *local_inventory(void) {
    static gb_inventory_t inv; /* large; the CLI is single-threaded here */
    static int have;
    if (!have) gb_inventory_collect(&inv);
    have = 1;
    return &inv;
}

static void usage(FILE *out) {
    char what[256];
    default_spec(local_inventory(), what, sizeof what);
    fprintf(out,
            "usage: gpubench run [options]\n"
            "  a coordinator and a local agent in one process, the default sweep on this\n"
            "  machine (%s), and the results table\n"
            "  --db FILE        the store (default " GB_DEFAULT_DB ")\n"
            "  --spec FILE      run this sweep instead of the default (- reads stdin)\n"
            "  --state-dir DIR  the local agent's state (default FILE.agent next to the store)\n"
            "  --format F       table | csv | json | md (default table)\n"
            "  --timeout S      give up after S seconds, the sweep cancelled (its jobs'\n"
            "                   error: \"cancelled: gpubench run --timeout S s ran out\";\n"
            "                   default 0: never)\n"
            "  --max-jobs N     jobs the sweep may expand to (default 10000)\n"
            "  --verbose        the daemons' log on stderr (default: warnings only)\n"
            "  -h, --help       this help\n"
            "  exit status 0 when every job succeeded, else 1 (--timeout too); a Ctrl-C\n"
            "  (SIGINT, SIGTERM, a hangup) cancels the sweep, prints what finished and\n"
            "  ends by that signal (130 in a shell for Ctrl-C)\n",
            what);
}

typedef struct runner {
    gb_coord_t *coord;
    gb_agent_t *agent;
    int rc;
    atomic_int ended; /* the thread ended (asked to, or on its own) */
    atomic_int *gone; /* set with it: either daemon's */
} runner_t;

static void *coord_thread(void *arg) {
    runner_t *r = arg;
    gb_log_set_component("coord");
    r->rc = gb_coord_run(r->coord);
    atomic_store(&r->ended, 1);
    atomic_store(r->gone, 1);
    return NULL;
}

static void *agent_thread(void *arg) {
    runner_t *r = arg;
    gb_log_set_component("agent");
    r->rc = gb_agent_run(r->agent);
    atomic_store(&r->ended, 1);
    atomic_store(r->gone, 1);
    return NULL;
}

/* The wait ended without the sweep (timeout, Ctrl-C) or with it failed:
 * an unfinished sweep must not stay "running" in the store, where the next
 * `gpubench run` on it would take its jobs up again. Cancel it and give the
 * agent a moment to stop what runs. The jobs' error says which ended it
 * (timeout_s: the --timeout that ran out), not "cancelled by request" as
 * for a `gpubench cancel`. */
enum stop_why {
    STOP_ENDED,       /* the wait ended otherwise (the sweep had ended) */
    STOP_INTERRUPTED, /* a Ctrl-C */
    STOP_TIMED_OUT,   /* --timeout ran out */
    STOP_NO_REPLY,    /* the submit got no reply, yet the sweep was stored */
};

static int stop_sweep(const char *control, uint64_t sweep, enum stop_why reason, long timeout_s) {
    /* the cancelled sweep's end: at most 30 s, no progress drawn */
    const cli_wait_opts_t after_cancel = {
        .cmd = "run", .timeout_s = 30, .interval_ms = 100, .progress = -1};
    char err[512], why[128];
    uint32_t queued = 0, running = 0;
    int interrupted = reason == STOP_INTERRUPTED;
    /* what ended it, as the lines below say it (a submit without a reply
     * was said "interrupted", though nothing was) */
    const char *word = interrupted                ? "interrupted"
                       : reason == STOP_TIMED_OUT ? "timed out"
                       : reason == STOP_NO_REPLY  ? "no reply to its submit"
                                                  : "stopped";
    if (interrupted)
        gb_copy(why, sizeof why, "cancelled: gpubench run was interrupted");
    else if (reason == STOP_TIMED_OUT)
        gb_fmt(why, sizeof why, "cancelled: gpubench run --timeout %ld s ran out", timeout_s);
    else if (reason == STOP_NO_REPLY)
        gb_copy(why, sizeof why, "cancelled: gpubench run got no reply to its submit");
    else /* the default */
        why[0] = '\0';
    /* asked again for up to 10 s: a second Ctrl-C ends the request itself
     * (its reply lost, the cancel done or not), a store that cannot commit
     * (a full disk) may be able to a moment later; one try left the sweep
     * `running` for the next run to take up */
    int tries = 0;
    int64_t until = gb_mono_ms() + 10000; /* a request may take 5 s itself */
    while (cli_cancel(control, NULL, sweep, 0, why, &queued, &running, err, sizeof err) != 0) {
        ++tries;
        if (gb_mono_ms() >= until) {
            fprintf(stderr,
                    "gpubench run: %s%scannot cancel sweep %" PRIu64 ": %s (the next `gpubench "
                    "run` on this store cancels it)\n",
                    reason == STOP_ENDED ? "" : word, reason == STOP_ENDED ? "" : ": ", sweep, err);
            return -1;
        }
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
    }
    if (queued + running == 0 && !tries) { /* it had ended (some jobs failed) */
        /* cli_wait leaves an interrupt for run to say, with what it did */
        if (interrupted)
            fprintf(stderr, "gpubench run: interrupted: sweep %" PRIu64 " had ended\n", sweep);
        return 0;
    }
    if (queued + running == 0) { /* a try whose reply was lost did it */
        fprintf(stderr, "gpubench run: %s: sweep %" PRIu64 " cancelled\n", word, sweep);
        cli_wait(control, NULL, sweep, &after_cancel);
        return 0;
    }
    fprintf(stderr,
            "gpubench run: %s: sweep %" PRIu64 " cancelled (%u queued, %u running stopped)\n", word,
            sweep, queued, running);
    cli_wait(control, NULL, sweep, &after_cancel);
    return 0;
}

/* Sweeps an earlier `gpubench run` on this store left unfinished (it was
 * killed, or could not cancel): cancelled before the local agent starts,
 * where they were taken up again and ran before this run's own sweep. A
 * store's other sweeps (submitted to a coordinator daemon) are left alone. */
static void cancel_leftovers(const char *db, const char *control) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return;
    }
    sqlite3_busy_timeout(h, 5000);
    uint64_t ids[64];
    int n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h,
                           "SELECT sweep_id FROM sweeps WHERE state = 'running' AND request_id "
                           "GLOB 'run-*' ORDER BY sweep_id LIMIT 64",
                           -1, &st, NULL) == SQLITE_OK)
        while (n < 64 && sqlite3_step(st) == SQLITE_ROW)
            ids[n++] = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    for (int i = 0; i < n; i++) {
        char err[512];
        uint32_t q = 0, r = 0;
        if (cli_cancel(control, NULL, ids[i], 0,
                       "cancelled: left unfinished by an earlier gpubench run on this store", &q,
                       &r, err, sizeof err) == 0)
            fprintf(stderr,
                    "gpubench run: sweep %" PRIu64 ", left unfinished by an earlier run on this "
                    "store, cancelled (%u queued, %u running)\n",
                    ids[i], q, r);
        else
            fprintf(stderr, "gpubench run: cannot cancel sweep %" PRIu64 " of an earlier run: %s\n",
                    ids[i], err);
    }
}

int cmd_run(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"spec", required_argument, 0, 's'},
                                         {"state-dir", required_argument, 0, 'S'},
                                         {"format", required_argument, 0, 'f'},
                                         {"timeout", required_argument, 0, 't'},
                                         {"max-jobs", required_argument, 0, 'J'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db = GB_DEFAULT_DB, *spec_file = NULL, *state_dir = NULL;
    gb_format_t fmt = GB_FMT_TABLE;
    long timeout = 0, max_jobs = GB_SPEC_MAX_JOBS;
    int verbose = 0, opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("run", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "run", opts, opt)) return 2;
        switch (opt) {
        case 'd':
            db = optarg;
            break;
        case 's':
            spec_file = optarg;
            break;
        case 'S':
            state_dir = optarg;
            break;
        case 'f':
            if (cli_format("run", optarg, &fmt)) return 2;
            break;
        case 't':
            if (cli_long("run", "--timeout", optarg, 0, 100L * 24 * 3600, &timeout)) return 2;
            break;
        case 'J': /* the coordinator's range */
            if (cli_long("run", "--max-jobs", optarg, 1, 1000000, &max_jobs)) return 2;
            break;
        case 'v':
            verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("run");
        }
    }
    if (optind < argc) return cli_unexpected_arg("run", argv[optind], NULL);
    /* "" is SQLite's temporary database: the sweep ran, its results gone */
    if (!db[0]) return cli_usage_error("run", "--db needs a file name");
    if (state_dir && !state_dir[0]) return cli_usage_error("run", "--state-dir needs a directory");
    if (!verbose) gb_log_set_level(GB_LOG_WARN);
    gb_log_set_component("run");

    char err[1024], dir[4096];
    char *spec = NULL;
    /* checked before a store or state dir is made for it */
    if (spec_file && !(spec = cli_read_spec("run", spec_file, (size_t)max_jobs))) return 1;
    struct stat sd;
    if (state_dir && stat(state_dir, &sd) == 0 && !S_ISDIR(sd.st_mode)) {
        fprintf(stderr, "gpubench run: --state-dir %s is not a directory\n", state_dir);
        free(spec);
        return 1;
    }
    if (!state_dir) {
        if (gb_fmt(dir, sizeof dir, "%s.agent", db) != 0) {
            free(spec);
            return cli_usage_error("run", "--db path too long");
        }
        state_dir = dir;
    }
    /* another agent's (a run going on): said before the store is made (a
     * new one was left empty) */
    int busy = gb_agent_state_dir_free(state_dir, err, sizeof err);
    if (busy == 1 && state_dir == dir)
        fprintf(stderr, "gpubench run: %s is in use by another `gpubench run` (its agent: %s)\n",
                db, err);
    else if (busy != 0)
        fprintf(stderr, "gpubench run: agent: %s\n", err);
    if (busy != 0) {
        free(spec);
        return 1;
    }
    /* the state directory made (or found unusable) before the store: an
     * agent that could not make it left a new, empty store behind */
    if (gb_mkdir_p(state_dir, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench run: the local agent's state directory: %s\n", err);
        free(spec);
        return 1;
    }
    /* stop: a signal (the user's); daemons, agent_stop: the embedded
     * coordinator and agent, stopped only once an unfinished sweep has been
     * cancelled, the agent first (its node is `stopped` in the store) */
    atomic_int stop = 0, daemons = 0, agent_stop = 0, gone = 0;
    char control[256] = "";
    cli_stop_on_signals(&stop);
    cli_stop_on_hangup(); /* the terminal closed: as Ctrl-C, the sweep cancelled */
    int rc = 1;
    runner_t rc_coord = {.gone = &gone}, rc_agent = {.gone = &gone};
    pthread_t tc, ta;
    int have_tc = 0, have_ta = 0;

    gb_heap_keep(); /* this process hosts a coordinator */
    gb_coord_config_t cc;
    gb_coord_config_default(&cc);
    cc.listen = "tcp://127.0.0.1:*";
    cc.control = "tcp://127.0.0.1:*";
    cc.db_path = db;
    cc.max_jobs_per_sweep = (size_t)max_jobs;
    cc.stop = &daemons;
    cc.new_sweeps_only = 1; /* a fleet's store: its queued jobs are not run here */
    rc_coord.coord = gb_coord_new(&cc, err, sizeof err);
    if (!rc_coord.coord) {
        fprintf(stderr, "gpubench run: coordinator: %s\n", err);
        goto out;
    }
    gb_copy(control, sizeof control, gb_coord_control_endpoint(rc_coord.coord));
    gb_agent_config_t ac;
    gb_agent_config_default(&ac);
    ac.connect = gb_coord_listen_endpoint(rc_coord.coord);
    ac.state_dir = state_dir;
    ac.kinds = gb_worker_kinds();
    ac.cpu_precisions = gb_worker_cpu_precisions();
    ac.stop = &agent_stop;
    rc_agent.agent = gb_agent_new(&ac, err, sizeof err);
    if (!rc_agent.agent) {
        fprintf(stderr, "gpubench run: agent: %s\n", err);
        goto out;
    }
    if (pthread_create(&tc, NULL, coord_thread, &rc_coord) != 0) goto out;
    have_tc = 1;
    cancel_leftovers(db, control);
    if (pthread_create(&ta, NULL, agent_thread, &rc_agent) != 0) goto out;
    have_ta = 1;
    if (cli_wait_nodes(control, NULL, 1, 0, 15000, &stop) != 0) {
        fprintf(stderr, "gpubench run: %s\n",
                atomic_load(&stop) ? "interrupted" : "the local agent did not register");
        goto out;
    }
    uint64_t sweep = 0;
    uint32_t n = 0;
    char what[256];
    const char *text = spec ? spec : default_spec(local_inventory(), what, sizeof what);
    /* "run-": the sweeps of `gpubench run` (an unfinished one is cancelled
     * by the next run on the store, cancel_leftovers) */
    char rid[40] = "run-";
    if (gb_random_hex(rid + 4, 16, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench run: %s\n", err);
        goto out;
    }
    int r = cli_submit("run", control, NULL, text, rid, &sweep, &n, err, sizeof err);
    if (r == 1) {
        fprintf(stderr, "gpubench run: rejected: %s\n", err);
        goto out;
    }
    if (r != 0) {
        /* interrupted (or no reply) after the coordinator may have stored
         * the sweep: it must not stay `running` for the next run to take
         * up; the embedded coordinator says whether it made it (and, if it
         * did not, drops the request should it still arrive) */
        char why[1024];
        gb_copy(why, sizeof why, atomic_load(&stop) ? "interrupted" : err);
        /* asked again while no reply comes (-3), for up to 30 s: the
         * embedded coordinator is alive but may be in one long turn (a
         * 10000-job sweep stored under ASan on a loaded machine took 5 s,
         * the ask's own timeout: the sweep was left `running`) */
        int made;
        int64_t until = gb_mono_ms() + 30000;
        while ((made = cli_submit_made(control, NULL, text, rid, &sweep, err, sizeof err)) == -3 &&
               gb_mono_ms() < until)
            fprintf(stderr,
                    "gpubench run: no answer yet from the local coordinator (%s); asking "
                    "again\n",
                    err);
        if (made == 0) {
            /* a Ctrl-C: stop_sweep says it, with what it did ("interrupted:
             * sweep N cancelled (Q queued, R running stopped)"), in one line
             * as after the wait; "interrupted; sweep N was stored before
             * that" came before it, the same news */
            if (!atomic_load(&stop))
                fprintf(stderr, "gpubench run: %s; sweep %" PRIu64 " was stored before that\n", why,
                        sweep);
            stop_sweep(control, sweep, atomic_load(&stop) ? STOP_INTERRUPTED : STOP_NO_REPLY,
                       timeout);
            rc = 1;
            goto finish; /* what finished of it printed, as after the wait */
        } else if (made == 1) {
            fprintf(stderr, "gpubench run: %s; no sweep was stored\n", why);
        } else {
            fprintf(stderr, "gpubench run: %s; whether a sweep was stored cannot be said: %s\n",
                    why, err);
        }
        goto out;
    }
    fprintf(stderr, "gpubench run: sweep %" PRIu64 ": %u job(s); store %s\n", sweep, n, db);
    /* run says an interrupt itself, with what it did, and prints each
     * job's error in its table */
    cli_wait_opts_t wo = {
        .cmd = "run", .timeout_s = (int)timeout, .interval_ms = 200, .stop = &stop, .gone = &gone};
    rc = cli_wait(control, NULL, sweep, &wo);
    /* (a daemon that ended takes no cancel: asked, it waited a request's
     * timeout for each) */
    if (rc != 0 && !atomic_load(&gone) &&
        stop_sweep(control, sweep,
                   atomic_load(&stop) ? STOP_INTERRUPTED
                   : timeout > 0      ? STOP_TIMED_OUT
                                      : STOP_ENDED,
                   timeout) != 0)
        rc = 1;
finish:
    /* the agent, then the coordinator once it has its last word (a second
     * at most: else the node is left `disconnected`, as by a restart) */
    atomic_store(&agent_stop, 1);
    if (have_ta) pthread_join(ta, NULL);
    have_ta = 0;
    gb_agent_destroy(&rc_agent.agent);
    cli_wait_nodes(control, NULL, 0, 1, 1000, NULL);
    atomic_store(&daemons, 1);
    if (have_tc) pthread_join(tc, NULL);
    have_tc = 0;
    gb_coord_destroy(&rc_coord.coord);
    cli_signals_restart(); /* the table is written whole, whatever comes now */
    if (cli_print_results(db, sweep, NULL, fmt) != 0) rc = 1;
out:
    atomic_store(&agent_stop, 1);
    if (have_ta) { /* the agent first, its last word heard: its node `stopped` */
        pthread_join(ta, NULL);
        gb_agent_destroy(&rc_agent.agent);
        if (have_tc && !atomic_load(&rc_coord.ended))
            cli_wait_nodes(control, NULL, 0, 1, 1000, NULL);
    }
    atomic_store(&daemons, 1);
    if (have_tc) pthread_join(tc, NULL);
    gb_agent_destroy(&rc_agent.agent);
    gb_coord_destroy(&rc_coord.coord);
    free(spec);
    /* a Ctrl-C: the sweep cancelled, what finished printed; then dies of it,
     * so that a script running `gpubench run` stops as well */
    return cli_end_by_signal(rc);
}
