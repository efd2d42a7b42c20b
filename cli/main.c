/* main.c - the gpubench binary: a table of subcommands (git.c style). The
 * daemons and the engine are libraries; this file only dispatches. */
#include "cli_util.h"
#include "commands.h"
#include "gb_util.h"
#ifdef GB_HAVE_ENGINE
#include "engine.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One line per command, in the order `gpubench help` lists them. */
static const gb_command_t commands[] = {
    {"run", cmd_run, "coordinator + local agent + default sweep on this machine, results table"},
    {"train", cmd_train, "train ResNet-50 for some steps on this machine and report images/s"},
    {"submit", cmd_submit, "submit a sweep (JSON spec or flags); prints the sweep id"},
    {"wait", cmd_wait, "block until a sweep ends; non-zero exit if a job failed"},
    {"status", cmd_status, "sweeps and their job counts"},
    {"nodes", cmd_nodes, "agents the coordinator knows"},
    {"cancel", cmd_cancel, "cancel a sweep or one of its jobs"},
    {"results", cmd_results, "finished jobs from the store (v_results)"},
    {"compare", cmd_compare,
     "GPU (or CPU) models side by side: median img/s per precision (v_models), or gemm GFLOP/s"},
    {"scaling", cmd_scaling,
     "what more GPUs, and NVLink against PCIe, buy: speedup and efficiency (v_scaling)"},
    {"coordinator", cmd_coordinator, "run the coordinator daemon"},
    {"agent", cmd_agent, "run the agent daemon on this node"},
    {"worker", cmd_worker, "run one job (started by the agent)"},
    {"keygen", cmd_keygen, "make a CURVE key pair: NAME.key (secret) and NAME.pub"},
    {"help", cmd_help, "list the commands"},
    {"version", cmd_version, "print the version and the libraries found"},
};

static const size_t n_commands = sizeof(commands) / sizeof(commands[0]);

int cmd_help(int argc, char **argv) {
    /* gpubench help -h: the list, as gpubench help help */
    int self = argc > 1 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "-h") == 0 ||
                            strcmp(argv[1], "--help") == 0);
    size_t which = n_commands; /* the command named, if any */
    for (size_t i = 0; argc > 1 && !self && i < n_commands; i++)
        if (strcmp(commands[i].name, argv[1]) == 0) which = i;
    if (argc > 1 && !self && which == n_commands) {
        fprintf(stderr, "gpubench help: '%s' is not a command\n", argv[1]);
        return 2;
    }
    /* one command at most: a word after it was ignored (help status extra) */
    if (argc > 2) return cli_unexpected_arg("help", argv[2], "(help takes one command)");
    /* gpubench help COMMAND is gpubench COMMAND -h */
    if (which < n_commands) {
        char h[] = "-h", *av[] = {argv[1], h, NULL};
        return commands[which].fn(2, av);
    }
    printf("usage: gpubench <command> [options]   (gpubench <command> -h for its options)\n\n");
    for (size_t i = 0; i < n_commands; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    printf("\n  gpubench --version is gpubench version; -h or --help after gpubench, this list\n");
    return 0;
}

int cmd_version(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: gpubench version\n"
               "  the version, and the libraries found at build and run time (ZeroMQ,\n"
               "  protobuf-c, SQLite, cJSON, oneDNN) and whether the engine is built in\n");
        return 0;
    }
    if (argc > 1) return cli_usage_error("version", "it takes no arguments");
    printf("gpubench %s\n", GB_VERSION);
    cli_print_versions(stdout);
    return 0;
}

int main(int argc, char **argv) {
    /* fds 0-2 open, on /dev/null where they were closed: started with one
     * closed (`2>&-`), the next file opened took it, and run's coordinator
     * wrote its stderr lines into its lock file and then the store, which
     * SQLite then found malformed, its earlier results with it */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    /* an ignored SIGCHLD is inherited across exec (a wrapper, a service
     * manager's setting): the kernel then reaps our children itself, and
     * the agent never saw a worker end (its job ran for ever) */
    signal(SIGCHLD, SIG_DFL);
    /* a --db FILE is a file name, never a URI: "file:x.db" opened x.db
     * (Debian's SQLite reads URIs by default). Before any other SQLite
     * call; an open that means a URI says SQLITE_OPEN_URI */
    sqlite3_config(SQLITE_CONFIG_URI, 0);
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
#ifdef GB_HAVE_ENGINE
    /* a replica process of a data-parallel run (kernels/launch.h): not a
     * command, started only by this executable with its socket */
    gb_train_set_replica_exe("/proc/self/exe");
    if (strcmp(argv[1], "__replica") == 0) {
        long fd = -1;
        if (argc != 3 || cli_long("gpubench __replica", "fd", argv[2], 0, 65535, &fd) != 0) {
            fprintf(stderr, "gpubench: __replica is started by gpubench itself\n");
            return 2;
        }
        return gb_train_replica_main((int)fd);
    }
#endif
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) name = "help";
    if (strcmp(name, "--version") == 0) name = "version";
    for (size_t i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) {
            /* getopt names argv[0] in its messages: "gpubench train:
             * unrecognized option", as every other message of ours */
            char prog[64];
            gb_fmt(prog, sizeof prog, "gpubench %s", commands[i].name);
            argv[1] = prog;
            int rc = commands[i].fn(argc - 1, argv + 1);
            /* output that could not be written (> /dev/full, a closed pipe)
             * is a failure, not exit 0 with the table lost */
            if ((fflush(stdout) != 0 || ferror(stdout)) && !cli_output_failure_was_said()) {
                int e = errno ? errno : EIO;
                /* errno may be a later call's by now (a closed pipe read
                 * "Bad file descriptor"): a pipe without a reader says so */
                struct pollfd pf = {.fd = STDOUT_FILENO, .events = POLLOUT};
                if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR)) e = EPIPE;
                fprintf(stderr, "gpubench %s: cannot write the output: %s\n", name, strerror(e));
                return rc ? rc : 1;
            }
            return rc;
        }
    fprintf(stderr, "gpubench: '%s' is not a command; see 'gpubench help'\n", argv[1]);
    return 2;
}
