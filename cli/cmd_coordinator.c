/* cmd_coordinator.c - `gpubench coordinator`: the daemon in the foreground. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "coordinator.h"
#include "gb_log.h"
#include "gb_util.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: gpubench coordinator [options]\n"
        "  --listen EP         agents' endpoint (default " GB_DEFAULT_LISTEN ")\n"
        "  --control EP        clients' endpoint (default " GB_DEFAULT_CONTROL ")\n"
        "  --db FILE           SQLite store (default " GB_DEFAULT_DB ")\n"
        "  --heartbeat-ms N    heartbeat interval, both ways (default 1000)\n"
        "  --lost-after N      heartbeats missed before an agent is lost (default 5)\n"
        "  --max-attempts N    attempts per job before it fails (default 3)\n"
        "  --max-frame BYTES   largest frame accepted (default 1048576)\n"
        "  --max-jobs N        jobs one sweep may expand to (default 10000)\n"
        "  --max-queued N      unfinished jobs of all sweeps together (default 1000000)\n"
        "  --max-agents N      agents the coordinator knows, every one ever seen (default 10000)\n"
        "  --rate-limit N      control requests a second per peer, 0 for none (default 50)\n"
        "  --rate-burst N      requests a peer may send at once (default 100)\n"
        "  --sync MODE         when an acknowledged result is durable (default group):\n"
        "                      group: on stable storage; a thread flushes the store's log\n"
        "                      while the coordinator goes on, acknowledgements wait for it\n"
        "                      full: on stable storage; every commit waits for the disk\n"
        "                      normal: survives a crash of the coordinator, not of the\n"
        "                      machine (power loss)\n"
        "  --key FILE          the coordinator's NAME.key: CURVE on both endpoints\n"
        "  --authorized FILE   public keys of the agents and clients admitted, one a line:\n"
        "                      [role=agent|control] KEY [NAME] (a role limits the key to\n"
        "                      that endpoint; none: both); reloaded on SIGHUP; required\n"
        "                      with --key\n"
        "  --ready-file FILE   write the bound endpoints there once listening\n"
        "  --insecure          allow a non-loopback bind without keys\n"
        "  --log-level L       debug|info|warn|error (default info)\n"
        "  -h, --help          this help\n"
        "Without keys it binds loopback only (unless --insecure). Stops cleanly on SIGTERM or\n"
        "SIGINT; a restarted coordinator resumes from the store. See docs/security.md.\n");
}

int cmd_coordinator(int argc, char **argv) {
    static const struct option opts[] = {{"listen", required_argument, 0, 'l'},
                                         {"control", required_argument, 0, 'c'},
                                         {"db", required_argument, 0, 'd'},
                                         {"heartbeat-ms", required_argument, 0, 'H'},
                                         {"lost-after", required_argument, 0, 'L'},
                                         {"max-attempts", required_argument, 0, 'a'},
                                         {"max-frame", required_argument, 0, 'F'},
                                         {"max-jobs", required_argument, 0, 'J'},
                                         {"ready-file", required_argument, 0, 'r'},
                                         {"insecure", no_argument, 0, 'I'},
                                         {"max-queued", required_argument, 0, 'Q'},
                                         {"max-agents", required_argument, 0, 'A'},
                                         {"rate-limit", required_argument, 0, 'R'},
                                         {"rate-burst", required_argument, 0, 'B'},
                                         {"sync", required_argument, 0, 's'},
                                         {"key", required_argument, 0, 'k'},
                                         {"authorized", required_argument, 0, 'z'},
                                         {"log-level", required_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    gb_coord_config_t cfg;
    gb_coord_config_default(&cfg);
    const char *ready = NULL;
    long v;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("coordinator", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "coordinator", opts, opt)) return 2;
        switch (opt) {
        case 'l':
            cfg.listen = optarg;
            break;
        case 'c':
            cfg.control = optarg;
            break;
        case 'd':
            cfg.db_path = optarg;
            break;
        case 'H':
            if (cli_long("coordinator", "--heartbeat-ms", optarg, 10, 600000, &v)) return 2;
            cfg.heartbeat_ms = (int)v;
            break;
        case 'L':
            if (cli_long("coordinator", "--lost-after", optarg, 1, 1000, &v)) return 2;
            cfg.lost_after = (int)v;
            break;
        case 'a':
            if (cli_long("coordinator", "--max-attempts", optarg, 1, 1000, &v)) return 2;
            cfg.max_attempts = (int)v;
            break;
        case 'F':
            if (cli_long("coordinator", "--max-frame", optarg, 1024, 1L << 30, &v)) return 2;
            cfg.max_frame = (size_t)v;
            break;
        case 'J':
            if (cli_long("coordinator", "--max-jobs", optarg, 1, 1000000, &v)) return 2;
            cfg.max_jobs_per_sweep = (size_t)v;
            break;
        case 'r':
            ready = optarg;
            break;
        case 'I':
            cfg.insecure = 1;
            break;
        case 'Q':
            if (cli_long("coordinator", "--max-queued", optarg, 1, 100000000, &v)) return 2;
            cfg.max_queued = (size_t)v;
            break;
        case 'A':
            if (cli_long("coordinator", "--max-agents", optarg, 1, 1000000, &v)) return 2;
            cfg.max_agents = (size_t)v;
            break;
        case 'R':
            if (cli_long("coordinator", "--rate-limit", optarg, 0, 1000000, &v)) return 2;
            cfg.rate_per_s = (double)v;
            break;
        case 'B':
            if (cli_long("coordinator", "--rate-burst", optarg, 1, 1000000, &v)) return 2;
            cfg.rate_burst = (double)v;
            break;
        case 's':
            if (strcmp(optarg, "group") == 0)
                cfg.sync = GB_SYNC_GROUP;
            else if (strcmp(optarg, "full") == 0)
                cfg.sync = GB_SYNC_FULL;
            else if (strcmp(optarg, "normal") == 0)
                cfg.sync = GB_SYNC_NORMAL;
            else
                return cli_usage_error("coordinator", "--sync is group, full or normal");
            break;
        case 'k':
            cfg.key_path = optarg;
            break;
        case 'z':
            cfg.authorized_path = optarg;
            break;
        case 'g':
            if (cli_log_level("coordinator", optarg)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("coordinator");
        }
    }
    if (optind < argc) return cli_unexpected_arg("coordinator", argv[optind], NULL);
    /* "" is SQLite's temporary database: every result would be lost */
    if (cfg.db_path && !cfg.db_path[0])
        return cli_usage_error("coordinator", "--db needs a file name");
    gb_log_set_component("coord");
    gb_heap_keep();
    atomic_int stop = 0, reload = 0;
    cfg.stop = &stop;
    cfg.reload = &reload;
    cli_stop_on_signals(&stop);
    cli_reload_on_sighup(&reload);
    char err[1024];
    /* keys that cannot be used are a configuration error (exit 2), as for
     * the agent and the commands */
    if (gb_coord_check_keys(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench coordinator: %s\n", err);
        return 2;
    }
    /* a --ready-file that cannot be written is said before the store is
     * made (it was said once the coordinator had started: an empty store
     * left behind, its start logged) */
    if (ready && gb_can_write_atomic(ready, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench coordinator: --ready-file: %s\n", err);
        return 1;
    }
    gb_coord_t *c = gb_coord_new(&cfg, err, sizeof err);
    if (!c) {
        fprintf(stderr, "gpubench coordinator: %s\n", err);
        return 1;
    }
    if (ready) {
        char text[1024];
        gb_fmt(text, sizeof text, "listen=%s\ncontrol=%s\npid=%ld\n", gb_coord_listen_endpoint(c),
               gb_coord_control_endpoint(c), (long)getpid());
        if (gb_write_file_atomic(ready, text, strlen(text), err, sizeof err) != 0) {
            fprintf(stderr, "gpubench coordinator: --ready-file: %s\n", err);
            gb_coord_destroy(&c);
            return 1;
        }
    }
    int rc = gb_coord_run(c);
    gb_coord_destroy(&c);
    return rc == 0 ? 0 : 1;
}
