/* cmd_cancel.c - `gpubench cancel SWEEP [--job ID]`. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "gb_curve.h"
#include "commands.h"
#include "gb_util.h"
#include "gb_zmq.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench cancel [--control EP] [--job ID] SWEEP\n"
                 "  queued jobs end as cancelled at once; running ones are stopped (SIGTERM, then\n"
                 "  SIGKILL) and end as cancelled when their agent reports\n"
                 "  --control EP   coordinator's control endpoint (default $GB_CONTROL "
                 "or " GB_DEFAULT_CONTROL ")\n" CLI_KEY_HELP
                 "  --job ID       only this job of the sweep (default every unfinished job)\n"
                 "  -h, --help     this help\n");
}

int cmd_cancel(int argc, char **argv) {
    static const struct option opts[] = {{"control", required_argument, 0, 'c'},
                                         {"key", required_argument, 0, 1001},
                                         {"server-key", required_argument, 0, 1002},
                                         {"job", required_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *control = cli_control_default();
    const char *key_path = NULL, *server_key_path = NULL;
    gb_curve_client_t keys;
    const gb_curve_client_t *curve = NULL;
    long job = 0, sweep = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            control = optarg;
            break;
        case 1001:
            key_path = optarg;
            break;
        case 1002:
            server_key_path = optarg;
            break;
        case 'j':
            if (cli_long("cancel", "--job", optarg, 1, 0x7fffffffffffL, &job)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
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
    char err[512];
    if (cli_curve_setup("cancel", key_path, server_key_path, &keys, &curve) != 0) return 1;
    int rc = gb_request_ex(control, curve, &env, GB_REQUEST_MS, &rep, err, sizeof err);
    if (rc != 0 || rep->body_case != GB__ENVELOPE__BODY_CANCEL_REPLY) {
        fprintf(stderr, "gpubench cancel: %s\n", rc == 0 ? "unexpected reply" : err);
        gb_wire_free(&rep);
        return 1;
    }
    printf("sweep %ld: %u queued job(s) cancelled, %u running job(s) stopping\n", sweep,
           rep->cancel_reply->cancelled, rep->cancel_reply->stopping);
    gb_wire_free(&rep);
    return 0;
}
