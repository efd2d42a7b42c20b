/* cli_util.c - see cli_util.h. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE   700 /* realpath */
#include "cli_util.h"
#include "engine.h"

#include "gb_curve.h"
#include "gb_log.h"
#include "gb_schema.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "worker.h"

#include <cjson/cJSON.h>
#include <oneapi/dnnl/dnnl.h>
#include <protobuf-c/protobuf-c.h>
#include <sqlite3.h>
#include <zmq.h>

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cli_control_default(void) {
    const char *e = getenv("GB_CONTROL");
    return e && *e ? e : GB_DEFAULT_CONTROL;
}

int cli_curve_setup(const char *cmd, const char *key, const char *server_key,
                    struct gb_curve_client *out, const struct gb_curve_client **use) {
    *use = NULL;
    if (!key) key = getenv("GB_KEY");
    if (!server_key) server_key = getenv("GB_SERVER_KEY");
    if (key && !*key) key = NULL;
    if (server_key && !*server_key) server_key = NULL;
    if (!key && !server_key) return 0;
    char err[600];
    if (!key || !server_key) {
        /* say where the half that is there came from */
        fprintf(stderr, "gpubench %s: CURVE needs both --key and --server-key: %s given, no %s\n",
                cmd,
                key ? (key == getenv("GB_KEY") ? "$GB_KEY" : "--key")
                    : (server_key == getenv("GB_SERVER_KEY") ? "$GB_SERVER_KEY" : "--server-key"),
                key ? "--server-key (or $GB_SERVER_KEY)" : "--key (or $GB_KEY)");
        return 2;
    }
    if (gb_curve_client_load(out, key, server_key, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench %s: %s\n", cmd, err);
        return 2;
    }
    *use = out;
    return 0;
}

int cli_number_text(const char *s) {
    if (!s) return 0;
    if (*s == '-') s++;
    if (*s == '.') s++;
    return *s >= '0' && *s <= '9';
}

int cli_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!cli_number_text(s) || errno || *end || v < min || v > max) {
        fprintf(stderr, "gpubench %s: %s: '%s' is not an integer in %ld..%ld\n", cmd, opt,
                s ? s : "", min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_log_level(const char *cmd, const char *s) {
    gb_log_level_t lv;
    if (gb_log_level_parse(s, &lv) != 0) {
        fprintf(stderr, "gpubench %s: --log-level: '%s' is not debug, info, warn or error\n", cmd,
                s);
        return -1;
    }
    gb_log_set_level(lv);
    return 0;
}

static atomic_int *stop_flag;
static volatile sig_atomic_t stop_signal; /* the first one caught; 0: none */

static void on_signal(int sig) {
    if (!stop_signal) stop_signal = sig;
    if (stop_flag) atomic_store(stop_flag, 1);
}

int cli_end_by_signal(int rc) {
    stop_flag = NULL; /* the command's own, in its frame, which ends now */
    /* the output first: a signal that comes while it is written (a pipe
     * that blocks) is one too. It was looked for before main's flush, and
     * one caught during that flush was lost (exit 0) */
    int out_failed = fflush(stdout) != 0 || ferror(stdout);
    int sig = stop_signal;
    if (!sig) return rc;
    /* dying skips main's check: a table that could not be written is said
     * there, with exit status 1, instead; but not after a hangup, whose
     * terminal is gone with it (it ended 1 where the docs say 129) */
    if (out_failed && sig != SIGHUP) return rc ? rc : 1;
    fflush(stderr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    return 128 + sig; /* not reached */
}

/* sig's handler set to sa; a hangup ignored by whoever started us stays
 * ignored: `nohup gpubench run` had the terminal's close cancel its sweep.
 * (SIGINT is caught even where ignored: a script's `gpubench run &` has
 * it ignored by the shell, and `kill -INT` is how such a script stops the
 * run.) The first look decides, for every later call. */
static void catch_signal(int sig, const struct sigaction *sa) {
    static int looked, hup_ignored;
    if (sig == SIGHUP && !looked) {
        struct sigaction old;
        hup_ignored = sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
        looked = 1;
    }
    if (sig != SIGHUP || !hup_ignored) sigaction(sig, sa, NULL);
}

void cli_stop_on_signals(atomic_int *flag) {
    stop_flag = flag;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    catch_signal(SIGINT, &sa);
    catch_signal(SIGTERM, &sa);
    signal(SIGPIPE, SIG_IGN);
}

void cli_signals_restart(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    catch_signal(SIGINT, &sa);
    catch_signal(SIGTERM, &sa);
    catch_signal(SIGHUP, &sa);
}

void cli_stop_on_hangup(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    catch_signal(SIGHUP, &sa);
}

static atomic_int *reload_flag;

static void on_hup(int sig) {
    (void)sig;
    if (reload_flag) atomic_store(reload_flag, 1);
}

void cli_reload_on_sighup(atomic_int *flag) {
    reload_flag = flag;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);
}

int cli_usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "gpubench %s: %s (see 'gpubench %s -h')\n", cmd, msg, cmd);
    return 2;
}

long long cli_count(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    long long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

int cli_format(const char *cmd, const char *s, gb_format_t *fmt) {
    if (gb_format_parse(s, fmt) == 0) return 0;
    return cli_usage_error(cmd, "--format is table, csv, json or md");
}

int cli_unexpected_arg(const char *cmd, const char *arg, const char *hint) {
    fprintf(stderr, "gpubench %s: unexpected argument '%s'%s%s (see 'gpubench %s -h')\n", cmd, arg,
            hint ? " " : "", hint ? hint : "", cmd);
    return 2;
}

int cli_once(cli_once_t *once, const char *cmd, const struct option *opts, int opt) {
    const struct option *o = opts;
    while (o->name && (o->val != opt || o->flag))
        o++;
    if (!o->name || o->has_arg != required_argument) return 0;
    for (int i = 0; i < once->n; i++)
        if (once->seen[i] == opt) {
            char msg[96];
            gb_fmt(msg, sizeof msg, "--%s given twice", o->name);
            return cli_usage_error(cmd, msg);
        }
    if (once->n < (int)(sizeof once->seen / sizeof once->seen[0])) once->seen[once->n++] = opt;
    return 0;
}

int cli_name_list(const char *cmd, const char *opt, const char *noun, const char *list,
                  const char *const *known, int n, int *order, int *count) {
    const char *p = list;
    char seen[16] = {0};
    int got = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        int k = -1;
        for (int i = 0; i < n && i < 16; i++)
            if (strlen(known[i]) == len && strncmp(p, known[i], len) == 0) k = i;
        if (k < 0) {
            char names[160] = "", msg[256];
            for (int i = 0; i < n; i++) {
                size_t at = strlen(names);
                gb_fmt(names + at, sizeof names - at, "%s%s", i ? ", " : "", known[i]);
            }
            gb_fmt(msg, sizeof msg, "%s: unknown %s%s'%.*s' (%s)", opt, noun ? noun : "",
                   noun ? " " : "", (int)(len > 40 ? 40 : len), p, names);
            return cli_usage_error(cmd, msg);
        }
        if (seen[k]) {
            char msg[96];
            gb_fmt(msg, sizeof msg, "%s: %s given twice", opt, known[k]);
            return cli_usage_error(cmd, msg);
        }
        seen[k] = 1;
        if (order) order[got] = k;
        got++;
        if (count) *count = got;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

int cli_full_names(const char *cmd, int argc, char **argv, const struct option *opts) {
    int has_param = 0;
    for (const struct option *o = opts; o->name; o++)
        if (strcmp(o->name, "param") == 0) has_param = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (strncmp(a, "--", 2) != 0 || !a[2]) continue;
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct option *exact = NULL;
        char near[200] = "";
        size_t o_near = 0;
        for (const struct option *o = opts; o->name; o++) {
            if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                exact = o;
            else if (strncmp(o->name, name, len) == 0 && o_near < sizeof near) {
                int n = snprintf(near + o_near, sizeof near - o_near, "%s--%s", o_near ? ", " : "",
                                 o->name);
                if (n > 0) o_near += (size_t)n;
            }
        }
        if (exact) {
            if (exact->has_arg == required_argument && !eq) i++; /* its value, whatever it is */
            continue;
        }
        if (!near[0]) continue; /* no option's prefix: getopt_long says it is unknown */
        fprintf(stderr,
                "gpubench %s: '--%.*s' is not an option: options are written in full (it would "
                "have been taken as %s)%s (see 'gpubench %s -h')\n",
                cmd, (int)(len > 64 ? 64 : len), name, near,
                has_param ? "; a spec key with no flag of its own is --param KEY=VALUE" : "", cmd);
        return 2;
    }
    return 0;
}

int cli_bad_option(const char *cmd) {
    fprintf(stderr, "gpubench %s: see 'gpubench %s -h' for the options\n", cmd, cmd);
    return 2;
}

void cli_print_versions(FILE *out) {
    int maj, min, pat;
    zmq_version(&maj, &min, &pat);
    const dnnl_version_t *dv = dnnl_version();
    fprintf(out, "libzmq %d.%d.%d, protobuf-c %s, sqlite %s, cJSON %s, oneDNN %d.%d.%d\n", maj, min,
            pat, protobuf_c_version(), sqlite3_libversion(), cJSON_Version(), dv->major, dv->minor,
            dv->patch);
    fprintf(out, "job kinds: %s; resnet50 engine %s\n", gb_worker_kinds(),
            gb_worker_has_engine() ? "built in" : "not built");
    char line[2048];
    gb_backend_describe("cpu", line, sizeof line);
    fprintf(out, "%s\n", line);
    gb_backend_describe("cuda", line, sizeof line);
    fprintf(out, "%s\n", line);
}

/* PATH as an SQLite URI path: what a URI gives a meaning escaped */
static void uri_path(const char *p, char *out, size_t len) {
    size_t o = 0;
    for (; *p && o + 4 < len; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '%' || ch == '?' || ch == '#' || ch <= 0x20 || ch >= 0x7f)
            o += (size_t)snprintf(out + o, len - o, "%%%02X", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
}

/* The store at path read as immutable (no -shm, no locks: for a store no
 * coordinator has open). NULL, with why set when SQLite said why. */
static sqlite3 *open_immutable(const char *path, char *why, size_t whylen) {
    char uri[8400], esc[8300];
    sqlite3 *db = NULL;
    uri_path(path, esc, sizeof esc);
    gb_fmt(uri, sizeof uri, "file:%s?immutable=1", esc);
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) == SQLITE_OK &&
        sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) == SQLITE_OK)
        return db;
    if (db) gb_fmt(why, whylen, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
}

/* shell_match(pattern, name): fnmatch(3), as a spec's `nodes` matches */
static void shell_match(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *pat = (const char *)sqlite3_value_text(argv[0]);
    const char *name = (const char *)sqlite3_value_text(argv[1]);
    if (!pat || !name)
        sqlite3_result_null(ctx);
    else
        sqlite3_result_int(ctx, fnmatch(pat, name, 0) == 0);
}

static struct sqlite3 *store_open(const char *cmd, const char *path);

/* store_open's, with shell_match for the --node filters (SQLite's GLOB
 * is not the shell's: [^x], not [!x]) */
struct sqlite3 *cli_store_open(const char *cmd, const char *path) {
    sqlite3 *db = store_open(cmd, path);
    if (db && sqlite3_create_function(db, "shell_match", 2,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, NULL,
                                      shell_match, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "gpubench %s: %s: %s\n", cmd, path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return NULL;
    }
    /* an older store reads without an error, through views that later
     * migrations fixed: its figures were the wrong ones those fixed (a
     * scaling baseline of another GPU model, a failed job's given-up
     * attempt's rate), printed as this version's */
    sqlite3_stmt *st = NULL;
    long long v = 0;
    if (db && sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (db && v > 0 && v < (long long)gb_schema_n_migrations) {
        fprintf(stderr,
                "gpubench %s: %s has schema version %lld, this gpubench reads %zu: its views are "
                "older than this version's, and would show figures it corrected; a coordinator of "
                "this version upgrades it when it starts on it (gpubench coordinator --db %s)\n",
                cmd, path, v, gb_schema_n_migrations, path);
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static struct sqlite3 *store_open(const char *cmd, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        /* it reads the file itself: not over the network from wherever
         * GB_CONTROL points (README's remote set-up) */
        fprintf(stderr,
                "gpubench %s: no store at %s (this command reads the coordinator's SQLite file "
                "itself: run it where that file is, or give its path with --db)\n",
                cmd, path);
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "gpubench %s: %s is a directory; --db names the store file\n", cmd, path);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) { /* a FIFO: SQLite's open waited for a writer for ever */
        fprintf(stderr, "gpubench %s: %s is not a regular file; --db names the store file\n", cmd,
                path);
        return NULL;
    }
    sqlite3 *db = NULL;
    char wal[PATH_MAX + 8], real[PATH_MAX], why[300];
    /* SQLite keeps the -wal beside the file a symbolic link points to */
    gb_fmt(wal, sizeof wal, "%s-wal", realpath(path, real) ? real : path);
    /* Another user's store with no -wal beside it (no coordinator has it
     * open: one keeps a -wal while it runs): SQLite would make -wal and
     * -shm files owned by this user, left behind (a read-only connection
     * never removes them), and a coordinator run as the store's owner could
     * not write them and would not start. Read it as immutable instead. */
    if (sb.st_uid != geteuid() && access(wal, F_OK) != 0 && errno == ENOENT &&
        (db = open_immutable(path, why, sizeof why)))
        return db;
    /* Read-write where the file lets us, writing nothing (query_only): a
     * read-only connection leaves the -wal and -shm it made behind a store
     * no coordinator has open (results, run's table), which then looked
     * open; the last connection to close removes them, as the sqlite3
     * shell's does. A file we may not write is opened read-only. */
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "gpubench %s: cannot open %s: %s\n", cmd, path,
                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    int rc = sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return db;
    gb_fmt(why, sizeof why, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    db = NULL;
    if (rc == SQLITE_NOTADB) {
        fprintf(stderr, "gpubench %s: %s is not a gpubench store (%s)\n", cmd, path, why);
        return NULL;
    }
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) { /* not the -shm's directory (said below) */
        fprintf(stderr,
                "gpubench %s: cannot read %s: %s (another process held it locked past a 5 s "
                "wait: a sqlite3 shell in an exclusive transaction, say)\n",
                cmd, path, why);
        return NULL;
    }
    /* A WAL store read where this user cannot create its -shm file (a
     * directory not its own, a read-only mount): SQLite needs one even to
     * read. With no -wal file the store was closed cleanly and holds
     * everything: read it as immutable, without the -shm. */
    if (access(wal, F_OK) != 0 && errno == ENOENT && (db = open_immutable(path, why, sizeof why)))
        return db;
    fprintf(stderr,
            "gpubench %s: cannot read %s: %s (a store in WAL mode is read with its -shm file "
            "beside it: the directory must be writable by you, or a coordinator must have it "
            "open)\n",
            cmd, path, why);
    return NULL;
}

static int output_failure_said;
void cli_output_failure_said(void) {
    output_failure_said = 1;
}
int cli_output_failure_was_said(void) {
    return output_failure_said;
}

void cli_store_not_ours(const char *cmd, sqlite3 *db, const char *path) {
    char why[300];
    gb_fmt(why, sizeof why, "%s", sqlite3_errmsg(db));
    long long n[2] = {-1, -1}; /* tables and such, user_version */
    static const char *const q[2] = {"SELECT count(*) FROM sqlite_master", "PRAGMA user_version"};
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, q[i], -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n[i] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    /* it said "not a gpubench store" while a coordinator made it, or
     * upgraded it (one transaction per migration) */
    if (n[0] == 0)
        fprintf(stderr,
                "gpubench %s: %s has no tables yet (a coordinator starting on it makes them: "
                "try again in a moment)\n",
                cmd, path);
    else if (n[1] > 0 && n[1] < (long long)gb_schema_n_migrations)
        fprintf(stderr,
                "gpubench %s: %s has schema version %lld, this gpubench reads %zu (%s): a "
                "coordinator of this version upgrades it when it starts on it\n",
                cmd, path, n[1], gb_schema_n_migrations, why);
    else
        fprintf(stderr, "gpubench %s: %s is not a gpubench store (%s)\n", cmd, path, why);
}

char *cli_read_spec(const char *cmd, const char *file, size_t max_jobs) {
    char *text = NULL, err[1024];
    size_t len = 0;
    int std_in = strcmp(file, "-") == 0;
    const char *name = std_in ? "stdin" : file;
    /* stdin as it is open, not /dev/stdin opened again: a socket cannot be
     * (ENXIO), nor a file inherited across a change of user (EACCES) */
    int fd = std_in ? dup(0) : -1;
    if (std_in && fd < 0) {
        fprintf(stderr, "gpubench %s: cannot read stdin: %s\n", cmd, strerror(errno));
        return NULL;
    }
    if ((std_in ? gb_read_fd(fd, "stdin", GB_WIRE_SPEC_MAX, &text, &len, err, sizeof err)
                : gb_read_file(file, GB_WIRE_SPEC_MAX, &text, &len, err, sizeof err)) != 0) {
        fprintf(stderr, "gpubench %s: %s\n", cmd, err);
        return NULL;
    }
    if (strlen(text) != len)
        fprintf(stderr, "gpubench %s: %s holds a NUL byte: not a JSON spec\n", cmd, name);
    else if (strspn(text, " \t\r\n") == len)
        fprintf(stderr, "gpubench %s: %s is empty: not a JSON spec (docs/control-plane.md)\n", cmd,
                name);
    else {
        /* without check, what any coordinator would refuse: not one JSON
         * object (it waited for the coordinator's answer, or for 5 s and
         * "no reply" when none was running) */
        gb_sweep_def_t def;
        cJSON *o = NULL;
        if (max_jobs ? gb_spec_parse(text, len, max_jobs, &def, err, sizeof err) == 0
                     : (o = gb_spec_json(text, len, err, sizeof err)) != NULL) {
            if (max_jobs) gb_sweep_def_free(&def);
            cJSON_Delete(o);
            return text;
        }
        fprintf(stderr, "gpubench %s: %s: %s\n", cmd, name, err);
    }
    free(text);
    return NULL;
}
