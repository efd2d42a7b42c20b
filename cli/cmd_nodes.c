/* cmd_nodes.c - `gpubench nodes`: every agent the coordinator knows. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "gb_util.h"
#include "output.h"
#include "topo.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench nodes [--control EP] [--format F]\n"
                 "       gpubench nodes --topo [NODE] [--db FILE] [--format F]\n"
                 "       gpubench nodes --forget NODE [--control EP]\n"
                 "  every agent ever seen: state, CPU, GPUs, labels, the jobs it runs, and why\n"
                 "  it is offered no job when it cannot start workers or its key was taken\n"
                 "  off --authorized or given role=control there (problem)\n"
                 "  --control EP        coordinator's control endpoint (default $GB_CONTROL "
                 "or " GB_DEFAULT_CONTROL ")\n" CLI_KEY_HELP
                 "  --topo              the GPU link matrix of each node (or of NODE, a name\n"
                 "                      or an agent id) as nvidia-smi topo -m prints it, from\n"
                 "                      the store\n"
                 "  --db FILE           the store --topo reads (default " GB_DEFAULT_DB ")\n"
                 "  --forget NODE       a node gone for good (name or agent id; its agent must\n"
                 "                      be stopped): no longer placed on or counted when a spec\n"
                 "                      is checked; its running jobs are queued again, queued\n"
                 "                      jobs only it could run fail. It is known again if its\n"
                 "                      agent returns\n"
                 "  --format F          table | csv | json | md (default table; csv, json and\n"
                 "                      md: one row per GPU pair with --topo)\n"
                 "  -h, --help          this help\n");
}

int cmd_nodes(int argc, char **argv) {
    static const struct option opts[] = {CLI_CONN_OPTIONS,
                                         {"format", required_argument, 0, 'f'},
                                         {"topo", no_argument, 0, 't'},
                                         {"db", required_argument, 0, 'd'},
                                         {"forget", required_argument, 0, 'F'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db = GB_DEFAULT_DB;
    cli_conn_t conn;
    cli_conn_init(&conn);
    gb_format_t fmt = GB_FMT_TABLE;
    int opt, topo = 0, db_given = 0, conn_given = 0, fmt_given = 0;
    const char *forget = NULL;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("nodes", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "nodes", opts, opt)) return 2;
        if (cli_conn_opt(&conn, opt, optarg)) {
            conn_given = 1;
            continue;
        }
        switch (opt) {
        case 't':
            topo = 1;
            break;
        case 'd':
            db = optarg;
            db_given = 1;
            break;
        case 'F':
            forget = optarg;
            break;
        case 'f':
            if (cli_format("nodes", optarg, &fmt)) return 2;
            fmt_given = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("nodes");
        }
    }
    if (forget) {
        if (topo || optind < argc || db_given || fmt_given)
            return cli_usage_error("nodes", "--forget NODE takes no --topo, --db, --format or "
                                            "other argument (it asks the coordinator; one line)");
        if (!forget[0]) return cli_usage_error("nodes", "--forget needs a node name or agent id");
        Gb__ForgetRequest fq = GB__FORGET_REQUEST__INIT;
        fq.node = (char *)forget;
        Gb__Envelope fe = GB__ENVELOPE__INIT;
        fe.seq = (uint64_t)gb_wall_ms();
        fe.body_case = GB__ENVELOPE__BODY_FORGET;
        fe.forget = &fq;
        Gb__Envelope *rep = NULL;
        int e = cli_conn_request("nodes", &conn, &fe, GB__ENVELOPE__BODY_FORGET_REPLY, &rep);
        if (e) return e;
        const Gb__ForgetReply *fr = rep->forget_reply;
        printf("forgot node %s (agent%s",
               fr->node_name && fr->node_name[0] ? fr->node_name : forget,
               fr->n_agent_ids > 1 ? "s" : "");
        for (size_t i = 0; i < fr->n_agent_ids; i++)
            printf("%s %s", i ? "," : "", fr->agent_ids[i]);
        printf("): %u job(s) that waited for it queued again, %u queued job(s) no remaining node "
               "can run failed\n",
               fr->requeued, fr->failed);
        gb_wire_free(&rep);
        return 0;
    }
    if (topo && conn_given) /* as --db without --topo: an option that would not be read */
        return cli_usage_error("nodes", "--topo reads the store (--db), not the coordinator: "
                                        "--control, --key and --server-key do not apply");
    if (topo) {
        if (!db[0]) return cli_usage_error("nodes", "--db needs a file name");
        if (optind + 1 < argc) return cli_usage_error("nodes", "--topo takes at most one NODE");
        return cli_print_topo(db, optind < argc ? argv[optind] : NULL, fmt, stdout);
    }
    if (optind < argc) return cli_unexpected_arg("nodes", argv[optind], "(NODE needs --topo)");
    if (db_given) /* without --topo the coordinator answers, not the store */
        return cli_usage_error("nodes", "--db is read by --topo only (nodes asks the coordinator)");
    Gb__NodesRequest rq = GB__NODES_REQUEST__INIT;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = (uint64_t)gb_wall_ms();
    env.body_case = GB__ENVELOPE__BODY_NODES;
    env.nodes = &rq;
    Gb__Envelope *rep = NULL;
    int e = cli_conn_request("nodes", &conn, &env, GB__ENVELOPE__BODY_NODES_REPLY, &rep);
    if (e) return e;
    static const char *const cols[] = {"node",         "agent_id",  "state",  "cpu_model",
                                       "n_gpus",       "gpu_model", "labels", "last_seen",
                                       "running_jobs", "problem"};
    gb_table_t *t = gb_table_new(10, cols);
    for (size_t i = 0; t && i < rep->nodes_reply->n_nodes; i++) {
        const Gb__NodeStatus *n = rep->nodes_reply->nodes[i];
        if (gb_table_row(t) != 0) break;
        gb_table_text(t, 0, n->name);
        gb_table_text(t, 1, n->agent_id);
        gb_table_text(t, 2, n->state);
        gb_table_text(t, 3, n->cpu_model);
        gb_table_int(t, 4, n->n_gpus);
        gb_table_text(t, 5, n->gpu_model);
        gb_table_text(t, 6, n->labels);
        gb_table_text(t, 7, n->last_seen);
        /* every job of an agent with --slots N (a coordinator before
         * running_jobs sends the first only) */
        char jobs[64 * 21 + 1] = "";
        size_t o = 0;
        for (size_t k = 0; k < n->n_running_jobs && o + 22 < sizeof jobs; k++)
            o += (size_t)snprintf(jobs + o, sizeof jobs - o, "%s%" PRIu64, k ? "," : "",
                                  n->running_jobs[k]);
        if (!o && n->running_job) snprintf(jobs, sizeof jobs, "%" PRIu64, n->running_job);
        gb_table_text(t, 8, jobs[0] ? jobs : NULL); /* "45,46": text in every format */
        /* why a connected node is offered no job (it cannot start workers) */
        gb_table_text(t, 9, n->unable && n->unable[0] ? n->unable : NULL);
    }
    if (t) gb_table_print(t, stdout, fmt);
    gb_table_destroy(&t);
    gb_wire_free(&rep);
    return 0;
}
