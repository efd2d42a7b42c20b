/* cmd_results.c - `gpubench results`: v_results from the store. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "gb_util.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench results [--db FILE] [--sweep N] [--kind LIST] [--status LIST]\n"
                 "                        [--node GLOB] [--last N] [--format F]\n"
                 "  one row per finished job (the v_results view); the table shows the main\n"
                 "  columns, csv and json all of them. It reads the SQLite file directly (it\n"
                 "  never talks to the coordinator, so it takes no keys): who may read results is\n"
                 "  who may read that file\n"
                 "  --db FILE      the store (default " GB_DEFAULT_DB ")\n"
                 "  --sweep N      one sweep (default all)\n"
                 "  --kind LIST    these kinds: resnet50, gemm, allreduce, sleep, comma-separated\n"
                 "  --status LIST  these job states: done, failed, cancelled\n"
                 "  --node GLOB    jobs that ran on a node whose name matches (any rank of a\n"
                 "                 multi-node job; * ? [..] as in the shell; case-sensitive)\n"
                 "  --last N       the last N of the jobs left (by job id), in the usual order\n"
                 "  --format F     table | csv | json | md (default table)\n"
                 "  -h, --help     this help\n");
}

int cmd_results(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"sweep", required_argument, 0, 's'},
                                         {"kind", required_argument, 0, 'k'},
                                         {"status", required_argument, 0, 't'},
                                         {"node", required_argument, 0, 'n'},
                                         {"last", required_argument, 0, 'l'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db = GB_DEFAULT_DB;
    gb_format_t fmt = GB_FMT_TABLE;
    static const char *const kinds[] = {"resnet50", "gemm", "allreduce", "sleep"};
    static const char *const states[] = {"done", "failed", "cancelled"};
    cli_results_filter_t f = {0};
    long sweep = 0;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("results", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "results", opts, opt)) return 2;
        switch (opt) {
        case 'd':
            db = optarg;
            break;
        case 's':
            if (cli_long("results", "--sweep", optarg, 1, 0x7fffffffL, &sweep)) return 2;
            break;
        case 'k':
            if (cli_name_list("results", "--kind", NULL, optarg, kinds, 4, NULL, NULL)) return 2;
            f.kinds = optarg;
            break;
        case 't':
            if (cli_name_list("results", "--status", NULL, optarg, states, 3, NULL, NULL)) return 2;
            f.statuses = optarg;
            break;
        case 'n':
            if (!optarg[0]) return cli_usage_error("results", "--node needs a name or a pattern");
            f.node = optarg;
            break;
        case 'l':
            if (cli_long("results", "--last", optarg, 1, 0x7fffffffL, &f.last)) return 2;
            break;
        case 'f':
            if (cli_format("results", optarg, &fmt)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("results");
        }
    }
    if (optind < argc) {
        /* `results 3`, as status, wait and cancel take a sweep: say the option */
        const char *a = argv[optind];
        char hint[96] = "";
        if (strspn(a, "0123456789") == strlen(a) && strlen(a) < 20)
            gb_fmt(hint, sizeof hint, "(one sweep is --sweep %s)", a);
        return cli_unexpected_arg("results", a, hint[0] ? hint : NULL);
    }
    if (!db[0]) return cli_usage_error("results", "--db needs a file name");
    return cli_print_results(db, (uint64_t)sweep, &f, fmt);
}
