/* cmd_agent.c - `gpubench agent`: the daemon in the foreground. */
#define _POSIX_C_SOURCE 200809L
#include "agent.h"
#include "cli_util.h"
#include "commands.h"
#include "gb_curve.h"
#include "gb_log.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"
#include "worker.h"

#include <getopt.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

static void default_state_dir(char *out, size_t len) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (getuid() == 0)
        gb_fmt(out, len, "/var/lib/gpubench/agent");
    else if (xdg && *xdg)
        gb_fmt(out, len, "%s/gpubench/agent", xdg);
    else if (home && *home)
        gb_fmt(out, len, "%s/.local/state/gpubench/agent", home);
    else
        gb_fmt(out, len, "gpubench-agent");
}

static void usage(FILE *out) {
    char dir[4096];
    default_state_dir(dir, sizeof dir);
    fprintf(
        out,
        "usage: gpubench agent [options]\n"
        "  --connect EP        coordinator's agent endpoint (default " GB_DEFAULT_LISTEN ")\n"
        "  --labels k=v,...    labels sweeps can select on (default none)\n"
        "  --state-dir DIR     agent id, result spool, job files (default %s)\n"
        "  --name NAME         node name (default the host name)\n"
        "  --slots N           jobs run at once (default 1: benchmarks do not share a node)\n"
        "  --heartbeat-ms N    heartbeat interval until the coordinator sets it (default 1000)\n"
        "  --lost-after N      coordinator heartbeats missed before registering again (default 5)\n"
        "  --kill-grace-ms N   SIGTERM to SIGKILL for a timed-out or cancelled job (default "
        "2000)\n" CLI_KEY_HELP
        "  --telemetry-ms N    GPU (NVML) and CPU telemetry interval while a job runs; 0 off\n"
        "                      (default 100)\n"
        "  --result-memory-mb N\n"
        "                      results not yet acknowledged, held in memory as well as in the\n"
        "                      spool, to write them again if they are removed (default 64; 0\n"
        "                      none)\n"
        "  --log-level L       debug|info|warn|error (default info)\n"
        "  -h, --help          this help\n",
        dir);
}

int cmd_agent(int argc, char **argv) {
    static const struct option opts[] = {{"connect", required_argument, 0, 'c'},
                                         {"labels", required_argument, 0, 'l'},
                                         {"state-dir", required_argument, 0, 's'},
                                         {"name", required_argument, 0, 'n'},
                                         {"slots", required_argument, 0, 'S'},
                                         {"heartbeat-ms", required_argument, 0, 'H'},
                                         {"lost-after", required_argument, 0, 'L'},
                                         {"kill-grace-ms", required_argument, 0, 'k'},
                                         CLI_KEY_OPTIONS,
                                         {"telemetry-ms", required_argument, 0, 'T'},
                                         {"result-memory-mb", required_argument, 0, 'M'},
                                         {"log-level", required_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    gb_agent_config_t cfg;
    gb_agent_config_default(&cfg);
    char dir[4096];
    default_state_dir(dir, sizeof dir);
    cfg.state_dir = dir;
    int state_dir_given = 0;
    cfg.kinds = gb_worker_kinds();
    cfg.cpu_precisions = gb_worker_cpu_precisions();
    const char *key_path = NULL, *server_key_path = NULL;
    gb_curve_client_t keys;
    long v;
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("agent", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "agent", opts, opt)) return 2;
        switch (opt) {
        case 'c':
            cfg.connect = optarg;
            break;
        case 'l':
            cfg.labels = optarg;
            break;
        case 's':
            cfg.state_dir = optarg;
            state_dir_given = 1;
            break;
        case 'n':
            if (!optarg[0])
                return cli_usage_error("agent", "--name is empty (leave it out for the host name)");
            cfg.name = optarg;
            break;
        case 'S':
            if (cli_long("agent", "--slots", optarg, 1, GB_AGENT_MAX_SLOTS, &v)) return 2;
            cfg.slots = (int)v;
            break;
        case 'H':
            if (cli_long("agent", "--heartbeat-ms", optarg, 10, 600000, &v)) return 2;
            cfg.heartbeat_ms = (int)v;
            break;
        case 'L':
            if (cli_long("agent", "--lost-after", optarg, 1, 1000, &v)) return 2;
            cfg.lost_after = (int)v;
            break;
        case 'k':
            if (cli_long("agent", "--kill-grace-ms", optarg, 0, 600000, &v)) return 2;
            cfg.kill_grace_ms = (int)v;
            break;
        case 'T': {
            char *end = NULL;
            errno = 0;
            long t = strtol(optarg, &end, 10);
            if (!cli_number_text(optarg) || errno || *end || !(t == 0 || (t >= 10 && t <= 60000)))
                return cli_usage_error("agent", "--telemetry-ms: 0 (off) or 10..60000");
            cfg.telemetry_ms = (int)t;
            break;
        }
        case 'M':
            if (cli_long("agent", "--result-memory-mb", optarg, 0, 65536, &v)) return 2;
            cfg.result_memory_mb = (int)v;
            break;
        case 'g':
            if (cli_log_level("agent", optarg)) return 2;
            break;
        case CLI_OPT_KEY:
            key_path = optarg;
            break;
        case CLI_OPT_SERVER_KEY:
            server_key_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("agent");
        }
    }
    if (optind < argc) return cli_unexpected_arg("agent", argv[optind], NULL);
    char err[1024];
    if (cfg.connect && gb_endpoint_check(cfg.connect, err, sizeof err) != 0) {
        fprintf(stderr, "gpubench agent: %s\n", err); /* a bad option: a usage error */
        return 2;
    }
    /* --labels and --name too, before the state directory is made */
    char canon[GB_LABELS_LEN], why[300];
    if (cfg.labels && gb_labels_canon(cfg.labels, canon, sizeof canon, why, sizeof why) != 0) {
        fprintf(stderr, "gpubench agent: --labels: %s\n", why);
        return 2;
    }
    if (cfg.name && *cfg.name &&
        (!gb_wire_line_ok(cfg.name, 1, GB_WIRE_NAME_MAX) || !gb_utf8_ok(cfg.name) ||
         strchr(cfg.name, ','))) {
        fprintf(stderr,
                "gpubench agent: --name: a node name is 1..%d bytes of UTF-8 without control "
                "characters or ',' (v_results.nodes joins a job's nodes with ',')\n",
                GB_WIRE_NAME_MAX);
        return 2;
    }
    int k = cli_curve_setup("agent", key_path, server_key_path, &keys, &cfg.curve);
    if (k != 0) return k;
    gb_log_set_component("agent");
    atomic_int stop = 0;
    cfg.stop = &stop;
    cli_stop_on_signals(&stop);
    /* a hangup (the ssh session that started it ends) must not kill the
     * agent and the job it runs; it has nothing to reload */
    signal(SIGHUP, SIG_IGN);
    gb_agent_t *a = gb_agent_new(&cfg, err, sizeof err);
    if (!a) {
        /* the default directory is this user's (root's /var/lib, else under
         * $XDG_STATE_HOME or $HOME): say how to choose another */
        fprintf(stderr, "gpubench agent: %s%s\n", err,
                !state_dir_given && strstr(err, "cannot make the state directory")
                    ? " (the default for this user; --state-dir DIR chooses another)"
                    : "");
        return 1;
    }
    int rc = gb_agent_run(a);
    gb_agent_destroy(&a);
    return rc == 0 ? 0 : 1;
}
