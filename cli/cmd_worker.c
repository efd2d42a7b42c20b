/* cmd_worker.c - `gpubench worker`: the child the agent starts for one job
 * (not for people; listed for completeness). */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "worker.h"

#include <getopt.h>
#include <stdio.h>
#include <sys/prctl.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench worker --job JOB.json --out RESULT.json\n"
                 "  runs one job as the agent's child process and writes its result record\n"
                 "  --job FILE   {\"job_id\", \"attempt\", \"params\"} (required)\n"
                 "  --out FILE   where the record goes (required)\n"
                 "  -h, --help   this help\n");
}

int cmd_worker(int argc, char **argv) {
    static const struct option opts[] = {{"job", required_argument, 0, 'j'},
                                         {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *job = NULL, *out = NULL;
    int opt;
    /* started as /proc/self/exe its name would be "exe": pgrep gpubench,
     * ps -C gpubench and top find it by this one */
    prctl(PR_SET_NAME, "gpubench", 0, 0, 0);
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("worker", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "worker", opts, opt)) return 2;
        switch (opt) {
        case 'j':
            job = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("worker");
        }
    }
    if (!job || !out || optind < argc)
        return cli_usage_error("worker", "--job and --out are required");
    return gb_worker_run(job, out);
}
