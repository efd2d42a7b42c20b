/* cmd_status.c - `gpubench status [SWEEP]`: sweeps and their job counts. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "gb_util.h"
#include "output.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench status [--control EP] [--format F] [SWEEP]\n"
                 "  every sweep (or one) with its job counts\n"
                 "  --control EP        coordinator's control endpoint (default $GB_CONTROL "
                 "or " GB_DEFAULT_CONTROL ")\n" CLI_KEY_HELP
                 "  --format F          table | csv | json | md (default table)\n"
                 "  -h, --help          this help\n");
}

int cmd_status(int argc, char **argv) {
    static const struct option opts[] = {CLI_CONN_OPTIONS,
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_conn_t conn;
    cli_conn_init(&conn);
    gb_format_t fmt = GB_FMT_TABLE;
    long sweep = 0;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("status", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "status", opts, opt)) return 2;
        if (cli_conn_opt(&conn, opt, optarg)) continue;
        switch (opt) {
        case 'f':
            if (cli_format("status", optarg, &fmt)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("status");
        }
    }
    if (optind < argc - 1) return cli_usage_error("status", "at most one sweep id");
    if (optind == argc - 1 && cli_long("status", "SWEEP", argv[optind], 1, 0x7fffffffL, &sweep))
        return 2;
    Gb__StatusRequest rq = GB__STATUS_REQUEST__INIT;
    rq.sweep_id = (uint64_t)sweep;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = (uint64_t)gb_wall_ms();
    env.body_case = GB__ENVELOPE__BODY_STATUS;
    env.status = &rq;
    Gb__Envelope *rep = NULL;
    int e = cli_conn_request("status", &conn, &env, GB__ENVELOPE__BODY_STATUS_REPLY, &rep);
    if (e) return e;
    static const char *const cols[] = {"sweep_id", "name", "state",  "total",     "queued",
                                       "running",  "done", "failed", "cancelled", "created_at"};
    gb_table_t *t = gb_table_new(10, cols);
    for (size_t i = 0; t && i < rep->status_reply->n_sweeps; i++) {
        const Gb__SweepStatus *s = rep->status_reply->sweeps[i];
        if (gb_table_row(t) != 0) break;
        gb_table_int(t, 0, (int64_t)s->sweep_id);
        gb_table_text(t, 1, s->name);
        gb_table_text(t, 2, s->state);
        gb_table_int(t, 3, s->total);
        gb_table_int(t, 4, s->queued);
        gb_table_int(t, 5, s->running);
        gb_table_int(t, 6, s->done);
        gb_table_int(t, 7, s->failed);
        gb_table_int(t, 8, s->cancelled);
        gb_table_text(t, 9, s->created_at);
    }
    if (t) gb_table_print(t, stdout, fmt);
    gb_table_destroy(&t);
    gb_wire_free(&rep);
    return 0;
}
