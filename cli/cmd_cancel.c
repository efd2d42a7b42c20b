/* cmd_cancel.c - `gpubench cancel SWEEP [--job ID]`. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "gb_util.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench cancel [--control EP] [--job ID] SWEEP\n"
                 "  queued jobs end as cancelled at once; running ones are stopped (SIGTERM, then\n"
                 "  SIGKILL) and end as cancelled when their agent reports\n"
                 "  --control EP        coordinator's control endpoint (default $GB_CONTROL "
                 "or " GB_DEFAULT_CONTROL ")\n" CLI_KEY_HELP
                 "  --job ID            only this job of the sweep (default every unfinished job)\n"
                 "  -h, --help          this help\n");
}

int cmd_cancel(int argc, char **argv) {
    static const struct option opts[] = {CLI_CONN_OPTIONS,
                                         {"job", required_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_conn_t conn;
    cli_conn_init(&conn);
    long job = 0, sweep = 0;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("cancel", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "cancel", opts, opt)) return 2;
        if (cli_conn_opt(&conn, opt, optarg)) continue;
        switch (opt) {
        case 'j':
            if (cli_long("cancel", "--job", optarg, 1, 0x7fffffffffffL, &job)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("cancel");
        }
    }
    if (optind != argc - 1) return cli_usage_error("cancel", "give one sweep id");
    if (cli_long("cancel", "SWEEP", argv[optind], 1, 0x7fffffffL, &sweep)) return 2;
    Gb__CancelRequest rq = GB__CANCEL_REQUEST__INIT;
    rq.sweep_id = (uint64_t)sweep;
    rq.job_id = (uint64_t)job;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = (uint64_t)gb_wall_ms();
    env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
    env.cancel_request = &rq;
    Gb__Envelope *rep = NULL;
    int e = cli_conn_request("cancel", &conn, &env, GB__ENVELOPE__BODY_CANCEL_REPLY, &rep);
    if (e) return e;
    unsigned cancelled = rep->cancel_reply->cancelled, stopping = rep->cancel_reply->stopping;
    gb_wire_free(&rep);
    if (cancelled + stopping == 0) { /* not "0 cancelled" and exit 0, as for a job id */
        fprintf(stderr,
                "gpubench cancel: sweep %ld has no job left to cancel (it has ended, or its "
                "running jobs are being stopped already)\n",
                sweep);
        return 1;
    }
    printf("sweep %ld: %u queued job(s) cancelled, %u running job(s) stopping\n", sweep, cancelled,
           stopping);
    return 0;
}
