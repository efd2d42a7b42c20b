/* cmd_wait.c - `gpubench wait SWEEP`: block until the sweep ends. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench wait [--control EP] [options] SWEEP\n"
                 "  blocks until every job of SWEEP ended; exit 0 when all are done, 1 when some\n"
                 "  failed or were cancelled (or on --timeout, or a refused handshake), 2 when\n"
                 "  there is no such sweep or the command line is wrong (the message says which);\n"
                 "  a Ctrl-C (SIGINT, SIGTERM, a hangup) ends it by that signal (130 in a shell\n"
                 "  for Ctrl-C), the sweep left running\n"
                 "  --control EP        coordinator's control endpoint (default $GB_CONTROL "
                 "or " GB_DEFAULT_CONTROL ")\n" CLI_KEY_HELP
                 "  --timeout S         give up after S seconds (default 0: never)\n"
                 "  --interval-ms N     how often to ask (default 500)\n"
                 "  --progress          draw the progress line even when stderr is not a terminal\n"
                 "  --quiet             never draw it\n"
                 "  -h, --help          this help\n");
}

int cmd_wait(int argc, char **argv) {
    static const struct option opts[] = {CLI_CONN_OPTIONS,
                                         {"timeout", required_argument, 0, 't'},
                                         {"interval-ms", required_argument, 0, 'i'},
                                         {"progress", no_argument, 0, 'p'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_conn_t conn;
    cli_conn_init(&conn);
    long timeout = 0, interval = 500, sweep = 0;
    int progress = 0, opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("wait", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "wait", opts, opt)) return 2;
        if (cli_conn_opt(&conn, opt, optarg)) continue;
        switch (opt) {
        case 't':
            if (cli_long("wait", "--timeout", optarg, 0, 100L * 24 * 3600, &timeout)) return 2;
            break;
        case 'i':
            if (cli_long("wait", "--interval-ms", optarg, 10, 60000, &interval)) return 2;
            break;
        case 'p':
            if (progress < 0) return cli_usage_error("wait", "--progress and --quiet together");
            progress = 1;
            break;
        case 'q':
            if (progress > 0) return cli_usage_error("wait", "--progress and --quiet together");
            progress = -1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("wait");
        }
    }
    if (optind != argc - 1) return cli_usage_error("wait", "give one sweep id");
    if (cli_long("wait", "SWEEP", argv[optind], 1, 0x7fffffffL, &sweep)) return 2;
    int k = cli_conn_keys("wait", &conn);
    if (k != 0) return k; /* 2: unusable keys, not a failed sweep */
    atomic_int stop = 0;
    cli_stop_on_signals(&stop);
    cli_wait_opts_t wo = {.cmd = "wait",
                          .timeout_s = (int)timeout,
                          .interval_ms = (int)interval,
                          .progress = progress,
                          .stop = &stop,
                          .say_interrupted = 1,
                          .say_where_errors = 1};
    int rc = cli_wait(conn.control, conn.curve, (uint64_t)sweep, &wo);
    /* a Ctrl-C: dies of it, so that a script waiting on sweeps stops too */
    return cli_end_by_signal(rc);
}
