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
    fprintf(out, "usage: gpubench results [--db FILE] [--sweep N] [--format F]\n"
                 "  one row per finished job (the v_results view); the table shows the main\n"
                 "  columns, csv and json all of them. It reads the SQLite file directly (it\n"
                 "  never talks to the coordinator, so it takes no keys): who may read results is\n"
                 "  who may read that file\n"
                 "  --db FILE      the store (default " GB_DEFAULT_DB ")\n"
                 "  --sweep N      one sweep (default all)\n"
                 "  --format F     table | csv | json (default table)\n"
                 "  -h, --help     this help\n");
}

int cmd_results(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"sweep", required_argument, 0, 's'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db = GB_DEFAULT_DB;
    gb_format_t fmt = GB_FMT_TABLE;
    long sweep = 0;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "results", opts, opt)) return 2;
        switch (opt) {
        case 'd':
            db = optarg;
            break;
        case 's':
            if (cli_long("results", "--sweep", optarg, 1, 0x7fffffffL, &sweep)) return 2;
            break;
        case 'f':
            if (gb_format_parse(optarg, &fmt))
                return cli_usage_error("results", "--format is table, csv or json");
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
    return cli_print_results(db, (uint64_t)sweep, fmt);
}
