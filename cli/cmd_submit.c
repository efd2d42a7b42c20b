/* cmd_submit.c - `gpubench submit`: send a sweep spec (a file, or built from
 * flags) to the coordinator and print the new sweep id. The coordinator
 * validates the spec; its reason for a rejection is printed as it is. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "client.h"
#include "commands.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the key options, aligned with this usage's wider first column */
#define SUBMIT_KEY_HELP CLI_KEY_HELP_AT("  ")

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: gpubench submit [--control EP] (--spec FILE | --kind K [options])\n"
        "  --control EP          coordinator's control endpoint (default $GB_CONTROL "
        "or " GB_DEFAULT_CONTROL ")\n" SUBMIT_KEY_HELP
        "  --spec FILE           a JSON sweep spec ('-' reads stdin); see docs/control-plane.md\n"
        "or a spec from flags (a comma list is an axis of the Cartesian product):\n"
        "  --kind K,...          resnet50 | gemm | allreduce | sleep (required without --spec)\n"
        "  --name TEXT           sweep name (default none)\n"
        "  --backend B,...       auto | cpu | cuda (default auto)\n"
        "  --precision P,...     fp32 | tf32 | fp16 | bf16 (resnet50, gemm; default fp32)\n"
        "  --gpus N,...          devices per job, per node (default 1)\n"
        "  --batch N,...         batch per device (resnet50; default 32)\n"
        "  --steps N,...         timed steps (resnet50; default 20)\n"
        "  --warmup N,...        warm-up steps (resnet50; allreduce: untimed all-reduces per "
        "size;\n"
        "                        default 3)\n"
        "  --image-size N,...    input size (resnet50; default 224)\n"
        "  --interconnect I,...  auto | nvlink | pcie (resnet50, allreduce; default auto)\n"
        "  --nodes GLOB,...      node name or GPU model glob (default *)\n"
        "  --labels k=v,...      labels a node must carry (default none)\n"
        "  --repeat N            copies of each configuration (default 1)\n"
        "  --timeout S           per-job time limit in seconds (default per kind)\n"
        "  --max-attempts N      attempts per job (default: the coordinator's)\n"
        "  --param KEY=V[,V..]   one more key, with a value or a list of them; repeat it for\n"
        "                        more keys (gemm m, n, k, reps; allreduce min_bytes,\n"
        "                        max_bytes, iters; resnet50 bucket_mb, launch (auto |\n"
        "                        threads | processes, one value); sleep duration_ms;\n"
        "                        n_nodes, rendezvous_s for jobs over several nodes):\n"
        "                        --param m=1024 --param n=1024,4096\n"
        "  --format F            text | json (default text: the sweep id alone)\n"
        "  -h, --help            this help\n");
}

/* "a,b,c" -> a JSON array (or a scalar when there is one value); items that
 * parse as integers become numbers, the rest strings. The coordinator
 * checks types and ranges. */
static cJSON *list_value(const char *s, int numeric_ok) {
    cJSON *arr = cJSON_CreateArray();
    char *copy = strdup(s);
    if (!arr || !copy) {
        cJSON_Delete(arr);
        free(copy);
        return NULL;
    }
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(t, &end, 10);
        if (numeric_ok && cli_number_text(t) && !*end && !errno)
            cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v));
        else
            cJSON_AddItemToArray(arr, cJSON_CreateString(t));
    }
    free(copy);
    if (cJSON_GetArraySize(arr) == 1) {
        cJSON *one = cJSON_DetachItemFromArray(arr, 0);
        cJSON_Delete(arr);
        return one;
    }
    return arr;
}

static char list_err[200];

/* The spec keys the flags set, and the flag each came from: a refusal names
 * what the user typed (--timeout, not timeout_s). */
typedef struct from_flag {
    const char *key, *flag; /* flag: the option's name, "timeout" */
} from_flag_t;

/* -1 out of memory; -2 the key is set already (by a flag or --param: the
 * JSON spec refuses a key given twice too); -3 an empty element in the list
 * ("1,", ",2", "2,,3": strtok would drop it silently), or none at all
 * ("": an empty list); list_err says so, of shown: the flag, or the key of
 * a --param */
static int add_list(cJSON *spec, const char *key, const char *value, int numeric,
                    const char *shown) {
    if (cJSON_GetObjectItemCaseSensitive(spec, key)) return -2;
    size_t n = strlen(value);
    if (!n || value[0] == ',' || value[n - 1] == ',' || strstr(value, ",,")) {
        snprintf(list_err, sizeof list_err, "%.40s '%.80s': an empty value in the list", shown,
                 value);
        return -3;
    }
    cJSON *v = list_value(value, numeric);
    if (!v) return -1;
    cJSON_AddItemToObject(spec, key, v);
    return 0;
}

/* The coordinator's refusal of a spec built from flags, with the key it
 * starts with ("'timeout_s' must be an integer in 1..604800 (got 0)",
 * "'precision': 'fp8' is not one of ...") named as the flag that set it
 * ("--timeout must be ...", "--precision: 'fp8' ..."), and its hint to use
 * the key repeat as --repeat. A key given with --param stays the key the
 * user typed; only the start is read (a value quoted later in the reason
 * may spell a key too). */
static void name_flags(char *err, size_t errlen, const from_flag_t *ff, int n) {
    for (int i = 0; i < n; i++) {
        size_t kl = strlen(ff[i].key);
        if (err[0] != '\'' || strncmp(err + 1, ff[i].key, kl) != 0 || err[kl + 1] != '\'' ||
            (err[kl + 2] != ' ' && err[kl + 2] != ':' && err[kl + 2] != '\0'))
            continue;
        char out[1024];
        const char *rest = err + kl + 2, *hint = strstr(rest, "(use repeat for copies)");
        if (hint)
            snprintf(out, sizeof out, "--%s%.*s(use --repeat for copies)%s", ff[i].flag,
                     (int)(hint - rest), rest, hint + strlen("(use repeat for copies)"));
        else
            snprintf(out, sizeof out, "--%s%s", ff[i].flag, rest);
        gb_copy(err, errlen, out);
        return;
    }
}

/* A flag that sets one spec key. */
typedef struct spec_flag {
    int opt;
    const char *key;
    enum { SF_STRINGS, SF_NUMBERS, SF_ONE } how;
} spec_flag_t;

int cmd_submit(int argc, char **argv) {
    enum {
        O_SPEC = 256,
        O_KIND,
        O_NAME,
        O_BACKEND,
        O_PREC,
        O_GPUS,
        O_BATCH,
        O_STEPS,
        O_WARMUP,
        O_IMAGE,
        O_IC,
        O_NODES,
        O_LABELS,
        O_REPEAT,
        O_TIMEOUT,
        O_ATTEMPTS,
        O_PARAM,
        O_FORMAT
    };
    static const struct option opts[] = {CLI_CONN_OPTIONS,
                                         {"spec", required_argument, 0, O_SPEC},
                                         {"kind", required_argument, 0, O_KIND},
                                         {"name", required_argument, 0, O_NAME},
                                         {"backend", required_argument, 0, O_BACKEND},
                                         {"precision", required_argument, 0, O_PREC},
                                         {"gpus", required_argument, 0, O_GPUS},
                                         {"batch", required_argument, 0, O_BATCH},
                                         {"steps", required_argument, 0, O_STEPS},
                                         {"warmup", required_argument, 0, O_WARMUP},
                                         {"image-size", required_argument, 0, O_IMAGE},
                                         {"interconnect", required_argument, 0, O_IC},
                                         {"nodes", required_argument, 0, O_NODES},
                                         {"labels", required_argument, 0, O_LABELS},
                                         {"repeat", required_argument, 0, O_REPEAT},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"max-attempts", required_argument, 0, O_ATTEMPTS},
                                         {"param", required_argument, 0, O_PARAM},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    /* the flags that set a spec key: the key, and whether the value is a
     * comma list of strings or of numbers, or one string as given (--name;
     * --labels "k=v,k=v" is one label set) */
    static const spec_flag_t spec_flags[] = {{O_KIND, "kind", SF_STRINGS},
                                             {O_NAME, "name", SF_ONE},
                                             {O_BACKEND, "backend", SF_STRINGS},
                                             {O_PREC, "precision", SF_STRINGS},
                                             {O_GPUS, "gpus", SF_NUMBERS},
                                             {O_BATCH, "batch", SF_NUMBERS},
                                             {O_STEPS, "steps", SF_NUMBERS},
                                             {O_WARMUP, "warmup", SF_NUMBERS},
                                             {O_IMAGE, "image_size", SF_NUMBERS},
                                             {O_IC, "interconnect", SF_STRINGS},
                                             {O_NODES, "nodes", SF_STRINGS},
                                             {O_LABELS, "labels", SF_ONE},
                                             {O_REPEAT, "repeat", SF_NUMBERS},
                                             {O_TIMEOUT, "timeout_s", SF_NUMBERS},
                                             {O_ATTEMPTS, "max_attempts", SF_NUMBERS}};
    const char *spec_file = NULL, *format = "text";
    cli_conn_t conn;
    cli_conn_init(&conn);
    cJSON *spec = cJSON_CreateObject();
    int flags = 0, rc = 2, opt, n_from = 0;
    from_flag_t from[O_FORMAT - O_SPEC];
    char *text = NULL;
    if (!spec) return 1;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("submit", argc, argv, opts)) {
        cJSON_Delete(spec);
        return 2;
    }
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        /* a flag that sets a spec key, and how its value becomes the key's */
        const spec_flag_t *sf = NULL;
        for (size_t i = 0; i < sizeof spec_flags / sizeof spec_flags[0]; i++)
            if (spec_flags[i].opt == opt) sf = &spec_flags[i];
        /* every other option is given once (a key set twice is said below,
         * with --param named; --param itself is repeated for more keys) */
        if (!sf && opt != O_PARAM && opt != 'h' && opt != '?' &&
            cli_once(&once, "submit", opts, opt)) {
            rc = 2;
            goto out;
        }
        if (cli_conn_opt(&conn, opt, optarg)) continue;
        int r = 0;
        const char *key = NULL, *flag = "an option"; /* the spec key a flag sets; its name */
        for (const struct option *o = opts; o->name; o++)
            if (o->val == opt) flag = o->name;
        char shown[48]; /* "--timeout": the flag as typed, in a refusal */
        snprintf(shown, sizeof shown, "--%s", flag);
        if (sf) {
            key = sf->key;
            if (sf->how == SF_ONE && !optarg[0]) { /* --labels "$POOL", unset: every node */
                snprintf(list_err, sizeof list_err, "%.40s '': an empty value", shown);
                r = -3;
            } else if (sf->how == SF_ONE) /* one string, as given (a comma is its own) */
                r = cJSON_GetObjectItemCaseSensitive(spec, key)          ? -2
                    : cJSON_AddStringToObject(spec, key, optarg) != NULL ? 0
                                                                         : -1;
            else
                r = add_list(spec, key, optarg, sf->how == SF_NUMBERS, shown);
            flags++;
        }
        switch (sf ? 0 : opt) {
        case 0:
            break;
        case O_SPEC:
            spec_file = optarg;
            break;
        case O_FORMAT:
            format = optarg;
            break;
        case O_PARAM: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                rc = cli_usage_error("submit", "--param wants KEY=VALUE");
                goto out;
            }
            if (strchr(eq + 1, '=')) {
                rc = cli_usage_error(
                    "submit", (size_t)(eq - optarg) == 6 && strncmp(optarg, "labels", 6) == 0
                                  ? "labels are given with --labels k=v,k=v (one set; a list of "
                                    "sets in a --spec file)"
                                  : "--param takes one KEY=VALUE[,VALUE..]; repeat --param for "
                                    "more keys (--param m=256 --param n=256)");
                goto out;
            }
            *eq = '\0';
            if (strcmp(optarg, "fail") == 0 || strcmp(optarg, "name") == 0) {
                /* one string, as given: "1" is a message, "" one too, and a
                 * comma is the text's own (it was a number, or a list) */
                r = cJSON_GetObjectItemCaseSensitive(spec, optarg)          ? -2
                    : cJSON_AddStringToObject(spec, optarg, eq + 1) != NULL ? 0
                                                                            : -1;
            } else {
                r = add_list(spec, optarg, eq + 1, 1, optarg);
            }
            if (r == -2) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         "key '%.60s' given twice (by a flag and --param, or twice)", optarg);
                rc = cli_usage_error("submit", msg);
                goto out;
            }
            *eq = '=';
            flags++;
            break;
        }
        case 'h':
            usage(stdout);
            rc = 0;
            goto out;
        default: /* getopt said which option */
            rc = cli_bad_option("submit");
            goto out;
        }
        if (r == -2) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s given twice, or also as --param", shown);
            rc = cli_usage_error("submit", msg);
            goto out;
        }
        if (r == -3) {
            rc = cli_usage_error("submit", list_err);
            goto out;
        }
        if (r != 0) {
            fprintf(stderr, "gpubench submit: out of memory\n");
            rc = 1;
            goto out;
        }
        if (key && n_from < (int)(sizeof from / sizeof from[0])) {
            from[n_from].key = key;
            from[n_from++].flag = flag;
        }
    }
    if (optind < argc) {
        rc = cli_unexpected_arg("submit", argv[optind], NULL);
        goto out;
    }
    if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
        rc = cli_usage_error("submit", "--format is text or json");
        goto out;
    }
    if (spec_file && flags) {
        rc = cli_usage_error("submit", "give --spec or spec flags, not both");
        goto out;
    }
    if (!spec_file && !cJSON_GetObjectItemCaseSensitive(spec, "kind")) {
        rc = cli_usage_error("submit", "give --spec FILE or at least --kind");
        goto out;
    }
    char err[1024];
    if (spec_file) { /* checked by the coordinator, which may be newer */
        if (!(text = cli_read_spec("submit", spec_file, 0))) {
            rc = 1;
            goto out;
        }
    } else if (!(text = cJSON_PrintUnformatted(spec))) {
        rc = 1;
        goto out;
    }
    uint64_t sweep = 0;
    uint32_t n = 0;
    if ((rc = cli_conn_keys("submit", &conn)) != 0) goto out; /* 2: unusable keys */
    int r = cli_submit("submit", conn.control, conn.curve, text, NULL, &sweep, &n, err, sizeof err);
    if (r != 0) {
        if (r == 1 && !spec_file) name_flags(err, sizeof err, from, n_from);
        fprintf(stderr, "gpubench submit: %s%s\n", r == 1 ? "rejected: " : "", err);
        rc = 1;
        goto out;
    }
    if (strcmp(format, "json") == 0)
        printf("{\"sweep_id\": %" PRIu64 ", \"n_jobs\": %u}\n", sweep, n);
    else
        printf("%" PRIu64 "\n", sweep);
    fprintf(stderr, "gpubench submit: sweep %" PRIu64 ": %u job(s) queued\n", sweep, n);
    rc = 0;
out:
    free(text);
    cJSON_Delete(spec);
    return rc;
}
