/* cli_util.h - what the command files share: default endpoints, option
 * parsing helpers that report errors the same way, and stop-on-signal. */
#ifndef GB_CLI_UTIL_H
#define GB_CLI_UTIL_H

#include "output.h"

#include <stdatomic.h>
#include <getopt.h>
#include <stdio.h>

#define GB_DEFAULT_LISTEN  "tcp://127.0.0.1:5555"
#define GB_DEFAULT_CONTROL "tcp://127.0.0.1:5556"
#define GB_DEFAULT_DB      "gpubench.db"
#define GB_REQUEST_MS      5000 /* one control request */

/* $GB_CONTROL, or GB_DEFAULT_CONTROL. */
const char *cli_control_default(void);

/* --key and --server-key, which every command that talks to the
 * coordinator (control or agent endpoint) takes: CLI_KEY_OPTIONS in its
 * getopt table, CLI_KEY_HELP in its usage, the values to cli_curve_setup. */
enum { CLI_OPT_CONTROL = 3001, CLI_OPT_KEY, CLI_OPT_SERVER_KEY };
// clang-format off
#define CLI_KEY_OPTIONS                                                                            \
    {"key", required_argument, 0, CLI_OPT_KEY},                                                    \
    {"server-key", required_argument, 0, CLI_OPT_SERVER_KEY}
// clang-format on
#define CLI_KEY_HELP CLI_KEY_HELP_AT("")
/* the same, its descriptions moved right by the spaces in pad, for a usage
 * whose descriptions start further right */
#define CLI_KEY_HELP_AT(pad)                                                                       \
    "  --key FILE          " pad "our NAME.key, for a coordinator with keys (default $GB_KEY)\n"   \
    "  --server-key FILE   " pad "the coordinator's public key, pinned (default $GB_SERVER_KEY)\n"

struct gb_curve_client;
/* Load the keys named by --key/--server-key (NULL: $GB_KEY/$GB_SERVER_KEY).
 * 0 with *use = out when keys are given, *use = NULL when none are; 2, the
 * command's exit status for a wrong command line (message printed as
 * "gpubench CMD: ..."), when they cannot be read or only one of the two is
 * given: a script tells a bad key set-up from a failed sweep (1). */
int cli_curve_setup(const char *cmd, const char *key, const char *server_key,
                    struct gb_curve_client *out, const struct gb_curve_client **use);

struct sqlite3;
/* The store at PATH, read-only, for `results` and `nodes --topo` (5 s busy
 * timeout). A missing path, a directory, a file that is not SQLite, or one
 * that cannot be read are said as "gpubench CMD: ..." and give NULL. A WAL
 * store closed cleanly (no -wal file) in a directory this user cannot write
 * (or on a read-only mount) is read as immutable: SQLite would want to make
 * its -shm file there even to read. */
struct sqlite3 *cli_store_open(const char *cmd, const char *path);
/* Says why db (cli_store_open's, at path) lacks the tables a query of cmd
 * needs: not a gpubench store, or one with no tables yet (a coordinator
 * making it: its migrations run in one transaction). */
void cli_store_not_ours(const char *cmd, struct sqlite3 *db, const char *path);
/* The one number a query such as "SELECT count(*) FROM v" gives; -1 on an
 * error. */
long long cli_count(struct sqlite3 *db, const char *sql);

/* Parse an integer option value in [min, max]; on error print
 * "gpubench CMD: --OPT: ..." to stderr and return -1. */
int cli_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out);

/* 1 when s begins as a number is written: a digit, or '-' or '.' and a
 * digit. strto* also take leading blanks and a '+' (" 5", "+5"), which a
 * typed option or spec value should not silently be. */
int cli_number_text(const char *s);

/* Set the log threshold from a --log-level value; -1 (with a message) when
 * unknown. */
int cli_log_level(const char *cmd, const char *s);

/* SIGINT and SIGTERM set *flag (and interrupt blocking calls); SIGPIPE is
 * ignored. */
void cli_stop_on_signals(atomic_int *flag);
/* A command that said itself that its stdout could not be written calls
 * cli_output_failure_said(), so main does not say it again. */
void cli_output_failure_said(void);
int cli_output_failure_was_said(void);
/* SIGHUP too sets that flag (a command whose terminal may close). */
void cli_stop_on_hangup(void);
/* From now on those signals (INT, TERM, HUP) only set the flag: writes they
 * interrupt are restarted (a results table printed into a full pipe was cut
 * short by a Ctrl-C, with exit 0). */
void cli_signals_restart(void);
/* For a command that has cleaned up after a stop signal (INT, TERM, HUP,
 * set up above): it dies of the first one caught, as a shell expects of a
 * program stopped by Ctrl-C (status 130 there). A script running it then
 * stops too; one that exits 1 told the shell it took the interrupt as
 * handled, and the script went on to its next command. Flushes stdout and
 * stderr first (where stdout cannot be written, returns rc, or 1, for
 * main to say so). Returns rc when no signal was caught. The command's
 * threads must have ended. */
int cli_end_by_signal(int rc);
/* SIGHUP sets *flag (the coordinator reloads its authorized keys). */
void cli_reload_on_sighup(atomic_int *flag);

/* One line per library found at build/run time (ZeroMQ, protobuf-c, SQLite,
 * cJSON, oneDNN) and whether the training engine is built in. */
void cli_print_versions(FILE *out);

/* The spec in FILE ('-': stdin), malloc'd, or NULL (said, as CMD) when it
 * cannot be read, holds a NUL byte or is empty; with max_jobs above 0, also
 * when it is not a valid spec of at most max_jobs jobs (gb_spec_parse, as
 * the coordinator will); with 0, when it is not one JSON object. */
char *cli_read_spec(const char *cmd, const char *file, size_t max_jobs);
/* Long options written in full: getopt_long takes any unique prefix, so
 * `submit --m 1024` (a gemm's m, a spec key with no flag of its own) ran
 * as --max-attempts 1024 at the default shape. Called before CMD's
 * getopt_long loop over the same argv and opts: 0 when every "--NAME" is
 * an option's whole name (or no option's prefix at all: getopt_long says
 * so then); else the usage error, naming the options it is a prefix of
 * (and --param, where CMD has it), and 2. */
int cli_full_names(const char *cmd, int argc, char **argv, const struct option *opts);
/* "see 'gpubench CMD -h'" usage error: prints msg and returns 2. */
int cli_usage_error(const char *cmd, const char *msg);
/* --format S into *fmt (gb_format_parse); else a usage error naming the
 * formats: 2, said. */
int cli_format(const char *cmd, const char *s, gb_format_t *fmt);
/* A word on CMD's command line it takes no place for: "unexpected argument
 * 'ARG'" and the hint (may be NULL) as a usage error; returns 2. */
int cli_unexpected_arg(const char *cmd, const char *arg, const char *hint);
/* An option that takes one value given twice ("--sweep 1 --sweep 2": the
 * last one won, silently): a cli_once_t per command, zeroed, and
 * cli_once(&once, CMD, opts, opt) for each option getopt_long returns (opts:
 * its table). The second time an option with a required argument comes,
 * "gpubench CMD: --OPT given twice" as a usage error, and 2 returned; 0
 * otherwise (a flag without a value, an unknown option). An option that may
 * be repeated (submit --param) is not passed to it. */
struct option;
typedef struct cli_once {
    int seen[64]; /* the opt values given so far */
    int n;
} cli_once_t;
int cli_once(cli_once_t *once, const char *cmd, const struct option *opts, int opt);
/* A comma-separated LIST for option OPT of CMD, each name one of known[0..n)
 * (n at most 16): their indexes, in the order given, into order[] (room for
 * n; may be NULL) and their count into *count (may be NULL). An unknown name
 * ("OPT: unknown NOUN 'x' (a, b, c)"; NOUN may be NULL) or a repeated one
 * ("OPT: a given twice") is a usage error: 2, said. */
int cli_name_list(const char *cmd, const char *opt, const char *noun, const char *list,
                  const char *const *known, int n, int *order, int *count);
/* After getopt's own line about an unknown option or a missing value: one
 * line pointing at -h (the whole usage would push getopt's off the screen);
 * returns 2. */
int cli_bad_option(const char *cmd);

#endif
