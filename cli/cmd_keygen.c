/* cmd_keygen.c - `gpubench keygen NAME`: a CURVE key pair for a
 * coordinator, an agent or a person (docs/security.md). */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "gb_curve.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: gpubench keygen [--force] NAME\n"
            "  writes NAME.key (the key pair; mode 0600: keep it private) and NAME.pub (the\n"
            "  public key, 40 Z85 characters on one line), and prints the public key.\n"
            "  A coordinator takes --key coord.key and lists the .pub lines of its agents and\n"
            "  people in --authorized FILE (role=agent or role=control before a key limits\n"
            "  it to one endpoint); they take --key NAME.key --server-key coord.pub\n"
            "  --force       replace existing files (default: refuse)\n"
            "  -h, --help    this help\n");
}

int cmd_keygen(int argc, char **argv) {
    static const struct option opts[] = {
        {"force", no_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int force = 0, opt;
    optind = 1;
    if (cli_full_names("keygen", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            force = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("keygen");
        }
    }
    if (optind != argc - 1 || !argv[optind][0]) return cli_usage_error("keygen", "give one NAME");
    char pub[GB_CURVE_Z85_LEN + 1], err[600];
    if (gb_curve_keygen(argv[optind], force, pub, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench keygen: %s\n", err);
        return 1;
    }
    printf("%s\n", pub);
    fprintf(stderr, "gpubench keygen: wrote %s.key (secret, mode 0600) and %s.pub\n", argv[optind],
            argv[optind]);
    return 0;
}
