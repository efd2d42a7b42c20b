/* main.c - the gpubench binary: a table of subcommands (git.c style). The
 * daemons and the engine are libraries; this file only dispatches. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

/* One line per command, in the order `gpubench help` lists them. */
static const gb_command_t commands[] = {
    {"help", cmd_help, "list the commands"},
    {"version", cmd_version, "print the version and the libraries found"},
    {"train", cmd_train, "train ResNet-50 for some steps on this machine and report images/s"},
};

static const size_t n_commands = sizeof(commands) / sizeof(commands[0]);

int cmd_help(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("usage: gpubench <command> [options]   (gpubench <command> -h for its options)\n\n");
    for (size_t i = 0; i < n_commands; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    return 0;
}

int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("gpubench %s\n", GB_VERSION);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) name = "help";
    if (strcmp(name, "--version") == 0) name = "version";
    for (size_t i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gpubench: '%s' is not a command; see 'gpubench help'\n", argv[1]);
    return 2;
}
