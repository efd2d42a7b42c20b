/* cmd_train.c - `gpubench train`: the training engine without daemons.
 *
 * Parses the options into a gb_train_config_t, runs gb_train_run and prints
 * the result as a table for people or as the JSON result record
 * (docs/result-record.md) for scripts. Errors go to stderr; the exit status is
 * 0 on success, 1 when the run fails, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "engine.h"
#include "output.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    gb_train_config_t d;
    gb_train_config_default(&d);
    fprintf(f,
            "usage: gpubench train [options]\n"
            "Train ResNet-50 v1.5 for a number of steps and report images/s.\n\n"
            "  --backend B         cpu, cuda or auto (default %s)\n"
            "  --precision P       fp32, tf32, fp16 or bf16; the CPU runs fp32 and bf16 "
            "(default %s)\n"
            "  --batch N           images per device per step (default %d)\n"
            "  --image-size S      input height and width (default %d)\n"
            "  --steps N           timed steps (default %d)\n"
            "  --warmup N          untimed steps before them (default %d)\n"
            "  --threads N         CPU threads, 0 = every core it may run on (default %d)\n"
            "  --devices N         replicas, data parallel: GPUs, or CPU replicas splitting the\n"
            "                      threads; --batch is per device (default %d)\n"
            "  --bucket-mb X       gradient all-reduce bucket, MB (default %g)\n"
            "  --interconnect I    auto, nvlink or pcie between GPUs (default %s)\n"
            "  --launch L          the replicas as threads of this process or as processes of\n"
            "                      their own; auto: processes for GPUs (a CUDA graph each),\n"
            "                      threads for CPU replicas (default %s)\n"
            "  --no-bn             the model without batch norm (as the equivalence tests use)\n"
            "  --no-cuda-graph     GPU: run each step eagerly instead of as one CUDA graph\n"
            "  --lr X              SGD learning rate (default %g)\n"
            "  --momentum X        SGD momentum (default %g)\n"
            "  --weight-decay X    SGD weight decay (default %g)\n"
            "  --seed N            weights and synthetic data (default %llu)\n"
            "  --load FILE         safetensors with parameters and running stats by torchvision "
            "name\n"
            "  --data FILE         safetensors with images (N,3,H,W) f32 and labels (N) i64\n"
            "  --save FILE         write parameters and running stats after the run\n"
            "  --save-grads FILE   write the last step's gradients\n"
            "  --format F          table or json (default table)\n"
            "  -h, --help          this text\n",
            d.backend, gb_precision_name(d.precision), d.batch, d.model.image_h, d.steps, d.warmup,
            d.threads, d.devices, d.bucket_mb, d.interconnect, d.launch, (double)d.lr,
            (double)d.momentum, (double)d.weight_decay, (unsigned long long)d.seed);
}

/* An integer option, in the words of every command's (cli_long: "gpubench
 * train: --steps: '0' is not an integer in 1..1000000"); -1 when it is not. */
static int parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    long v;
    if (cli_long("train", opt, s, lo, hi, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

/* Any other value refused, in the same words: "gpubench train: --OPT: 'V'
 * is not WHAT"; 2, the exit status. */
static int bad_value(const char *opt, const char *s, const char *what) {
    fprintf(stderr, "gpubench train: --%s: '%s' is not %s\n", opt, s, what);
    return 2;
}

/* An empty file name, as the other commands say --db "" */
static int no_file(const char *opt) {
    char msg[64];
    snprintf(msg, sizeof msg, "%s needs a file name", opt);
    return cli_usage_error("train", msg);
}

#define FLOAT_VALUE "a number >= 0 that a float holds (0, or 1.4e-45..3.4e38)"

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!cli_number_text(s) || errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A float the engine can hold: 1e39 (inf as a float) or 1e-46 (0) is not
 * the value typed, and was refused later as a run failure, or taken as 0. */
static int parse_float(const char *s, float *out) {
    double v;
    if (parse_double(s, &v) != 0) return -1;
    float f = (float)v;
    if (!isfinite(f) || (v != 0 && f == 0)) return -1;
    *out = f;
    return 0;
}

static void print_bytes(double b) {
    if (b >= 1024.0 * 1024 * 1024)
        printf("%.2f GiB", b / (1024.0 * 1024 * 1024));
    else
        printf("%.1f MiB", b / (1024.0 * 1024));
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void print_table(const gb_train_config_t *cfg, const gb_train_result_t *r) {
    cJSON *rec = cJSON_Parse(r->record_json);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(rec, "versions");
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(rec, "details");
    int threads = (int)jnum(rec, "threads");
    printf("resnet50 %s %s, batch %d, %dx%d, %d thread%s, %d step%s after %d warm-up\n",
           jstr(rec, "backend"), gb_precision_name(cfg->precision), cfg->batch, cfg->model.image_h,
           cfg->model.image_w, threads, threads == 1 ? "" : "s", cfg->steps,
           cfg->steps == 1 ? "" : "s", cfg->warmup);
    if (cfg->devices > 1) {
        printf("  %-12s %d replicas as %s (global batch %d), %s, %g buckets of %g MB", "parallel",
               cfg->devices, jstr(det, "launch"), cfg->devices * cfg->batch,
               jstr(rec, "interconnect"), jnum(det, "buckets"), cfg->bucket_mb);
        if (isfinite(jnum(det, "threads")))
            printf(", %d thread%s each", (int)jnum(det, "threads"),
                   (int)jnum(det, "threads") == 1 ? "" : "s");
        printf("\n");
    }
    printf("  %-12s %s\n", "device", jstr(rec, "device_model"));
    if (!cfg->model.bn) printf("  %-12s without batch norm (--no-bn)\n", "model");
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(det, "conv_algo")))
        printf("  %-12s %s\n", "convolution", jstr(det, "conv_algo"));
    if (cJSON_GetObjectItemCaseSensitive(ver, "onednn"))
        printf("  %-12s oneDNN %s, ISA %s\n", "library", jstr(ver, "onednn"), jstr(ver, "isa"));
    /* three significant digits below 100 (a CPU's 0.00617), whole ones
     * from there (%g wrote 1.23e+03 for eight large GPUs) */
    double tf = jnum(rec, "tflops");
    printf("  %-12s %.2f img/s  (%.*f TFLOP/s)\n", "throughput", r->images_per_sec,
           gb_decimals_for(tf, 0), tf);
    printf("  %-12s median %.1f  p90 %.1f  min %.1f  max %.1f  mean %.1f\n", "step ms",
           r->step_ms_median, r->step_ms_p90, r->step_ms_min, r->step_ms_max, r->step_ms_mean);
    /* "nan", not glibc's "-nan", when the loss diverged */
    printf("  %-12s first %.5f  last %.5f\n", "loss", isnan(r->loss_first) ? NAN : r->loss_first,
           isnan(r->loss_last) ? NAN : r->loss_last);
    printf("  %-12s ", "memory");
    print_bytes((double)r->peak_mem_bytes);
    printf(" allocated by the engine, ");
    print_bytes(jnum(det, "peak_rss_bytes"));
    printf(" peak RSS\n");
    printf("  %-12s %s%s\n", "valid", r->valid ? "yes" : "no: ", r->valid ? "" : r->invalid_reason);
    cJSON_Delete(rec);
}

int cmd_train(int argc, char **argv) {
    enum {
        O_BACKEND = 256,
        O_PREC,
        O_BATCH,
        O_SIZE,
        O_STEPS,
        O_WARMUP,
        O_THREADS,
        O_DEVICES,
        O_BUCKET,
        O_ICONN,
        O_LAUNCH,
        O_NOBN,
        O_NOGRAPH,
        O_LR,
        O_MOM,
        O_WD,
        O_SEED,
        O_LOAD,
        O_DATA,
        O_SAVE,
        O_SAVEG,
        O_FORMAT
    };
    static const struct option opts[] = {{"backend", required_argument, 0, O_BACKEND},
                                         {"precision", required_argument, 0, O_PREC},
                                         {"batch", required_argument, 0, O_BATCH},
                                         {"image-size", required_argument, 0, O_SIZE},
                                         {"steps", required_argument, 0, O_STEPS},
                                         {"warmup", required_argument, 0, O_WARMUP},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"devices", required_argument, 0, O_DEVICES},
                                         {"bucket-mb", required_argument, 0, O_BUCKET},
                                         {"interconnect", required_argument, 0, O_ICONN},
                                         {"launch", required_argument, 0, O_LAUNCH},
                                         {"no-bn", no_argument, 0, O_NOBN},
                                         {"no-cuda-graph", no_argument, 0, O_NOGRAPH},
                                         {"lr", required_argument, 0, O_LR},
                                         {"momentum", required_argument, 0, O_MOM},
                                         {"weight-decay", required_argument, 0, O_WD},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"load", required_argument, 0, O_LOAD},
                                         {"data", required_argument, 0, O_DATA},
                                         {"save", required_argument, 0, O_SAVE},
                                         {"save-grads", required_argument, 0, O_SAVEG},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    gb_train_config_t cfg;
    gb_train_config_default(&cfg);
    int json = 0, size = cfg.model.image_h, nobn = 0;
    optind = 0; /* glibc: full re-initialization, so commands can be composed */
    int c;
    cli_once_t once = {0};
    if (cli_full_names("train", argc, argv, opts)) return 2;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "train", opts, c)) return 2;
        const char *a = optarg;
        const char *what = NULL; /* set: a refused value, and what the option takes */
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case O_BACKEND:
            if (strcmp(a, "cpu") && strcmp(a, "cuda") && strcmp(a, "auto"))
                what = "cpu, cuda or auto";
            else
                snprintf(cfg.backend, sizeof(cfg.backend), "%s", a);
            break;
        case O_PREC:
            if (gb_precision_parse(a, &cfg.precision)) what = "fp32, tf32, fp16 or bf16";
            break;
        case O_BATCH:
            if (parse_int("--batch", a, 1, 65536, &cfg.batch)) return 2;
            break;
        case O_SIZE:
            if (parse_int("--image-size", a, 1, 4096, &size)) return 2;
            break;
        case O_STEPS:
            if (parse_int("--steps", a, 1, 1000000, &cfg.steps)) return 2;
            break;
        case O_WARMUP:
            if (parse_int("--warmup", a, 0, 1000000, &cfg.warmup)) return 2;
            break;
        case O_THREADS:
            if (parse_int("--threads", a, 0, 4096, &cfg.threads)) return 2;
            break;
        case O_DEVICES:
            if (parse_int("--devices", a, 1, 1024, &cfg.devices)) return 2;
            break;
        case O_BUCKET: {
            double mb = 0; /* a double, as in a spec: the record says 0.1, not 0.10000000149 */
            if (parse_double(a, &mb) || !(mb > 0) || mb > 4096) /* a spec's range, fractions too */
                what = "a number of MB above 0, up to 4096";
            cfg.bucket_mb = mb;
            break;
        }
        case O_ICONN:
            if (strcmp(a, "auto") && strcmp(a, "nvlink") && strcmp(a, "pcie"))
                what = "auto, nvlink or pcie";
            else
                snprintf(cfg.interconnect, sizeof(cfg.interconnect), "%s", a);
            break;
        case O_LAUNCH:
            if (strcmp(a, "auto") && strcmp(a, "threads") && strcmp(a, "processes"))
                what = "auto, threads or processes";
            else
                snprintf(cfg.launch, sizeof(cfg.launch), "%s", a);
            break;
        case O_NOBN:
            nobn = 1;
            break;
        case O_NOGRAPH:
            cfg.cuda_graph = 0;
            break;
        case O_LR:
            if (parse_float(a, &cfg.lr) || cfg.lr < 0) what = FLOAT_VALUE;
            break;
        case O_MOM:
            if (parse_float(a, &cfg.momentum) || cfg.momentum < 0) what = FLOAT_VALUE;
            break;
        case O_WD:
            if (parse_float(a, &cfg.weight_decay) || cfg.weight_decay < 0) what = FLOAT_VALUE;
            break;
        case O_SEED: {
            /* the record carries it as a JSON number: above 2^53 it would
             * name another seed than the one that ran */
            long v;
            if (cli_long("train", "--seed", a, 0, 1L << 53, &v)) return 2;
            cfg.seed = (unsigned long long)v;
            break;
        }
        case O_LOAD:
            if (!a[0]) return no_file("--load");
            cfg.load_path = a;
            break;
        case O_DATA:
            if (!a[0]) return no_file("--data");
            cfg.data_path = a;
            break;
        case O_SAVE:
            if (!a[0]) return no_file("--save");
            cfg.save_path = a;
            break;
        case O_SAVEG:
            if (!a[0]) return no_file("--save-grads");
            cfg.save_grads_path = a;
            break;
        case O_FORMAT:
            if (strcmp(a, "table") && strcmp(a, "json"))
                return cli_usage_error("train", "--format is table or json"); /* as others say */
            json = strcmp(a, "json") == 0;
            break;
        default: /* getopt said which option */
            return cli_bad_option("train");
        }
        if (what) return bad_value(opts[c - O_BACKEND].name, a, what);
    }
    if (optind < argc) return cli_unexpected_arg("train", argv[optind], NULL);
    cfg.model.image_h = cfg.model.image_w = size;
    if (nobn) cfg.model.bn = 0;
    /* stdout carries the table or the record (with --format json it is
     * pointed at stderr while the engine runs), stderr the messages: a save
     * into either (--save out.txt > out.txt, --save /dev/stdout) replaced
     * the file and the output written after it was lost */
    const char *saves[2] = {cfg.save_path, cfg.save_grads_path};
    struct stat so, sp;
    for (int i = 0; i < 2; i++)
        for (int fd = STDOUT_FILENO; saves[i] && fd <= STDERR_FILENO; fd++)
            if (stat(saves[i], &sp) == 0 && fstat(fd, &so) == 0 && sp.st_dev == so.st_dev &&
                sp.st_ino == so.st_ino) {
                fprintf(stderr,
                        "gpubench train: --%s %s is this command's %s, which carries %s: "
                        "give a file\n",
                        i ? "save-grads" : "save", saves[i],
                        fd == STDOUT_FILENO ? "stdout" : "stderr",
                        fd == STDERR_FILENO ? "its messages"
                        : json              ? "the JSON record with --format json"
                                            : "the result table");
                return 2;
            }
    if (!cfg.cuda_graph && strcmp(cfg.backend, "cpu") == 0) {
        fprintf(stderr, "gpubench train: --no-cuda-graph is for --backend cuda (or auto)\n");
        return 2;
    }
    long online = gb_cpus_usable();
    if (online > 0 && cfg.threads > online && strcmp(cfg.backend, "cuda") != 0)
        fprintf(stderr,
                "gpubench train: note: --threads %d is above the %ld core(s) this process may run "
                "on: the threads contend, and a step can take many times longer than with %ld\n",
                cfg.threads, online, online);
    gb_train_result_t res;
    char err[GB_ERR_LEN];
    /* with --format json stdout carries the record alone: whatever else
     * writes to it while the engine runs (ONEDNN_VERBOSE's trace, say) goes
     * to stderr instead */
    FILE *out = stdout;
    if (json) {
        fflush(stdout);
        int keep = dup(STDOUT_FILENO);
        if (keep >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0) {
            out = fdopen(keep, "w");
            if (!out) {
                dup2(keep, STDOUT_FILENO);
                close(keep);
                out = stdout;
            }
        } else if (keep >= 0) {
            close(keep);
        }
    }
    int trc = gb_train_run(&cfg, &res, err, sizeof(err));
    if (trc == GB_STRANDED) {
        /* a replica's thread still runs in the engine's memory */
        fprintf(stderr, "gpubench train: %s\n", err);
        fflush(NULL);
        _exit(1);
    }
    int rc = trc != 0;
    if (cfg.devices > 1 && res.record_json) {
        /* the engine's split of the threads, as its record states it: the
         * whole (threads) and each CPU replica's (details.threads) */
        cJSON *rec = cJSON_Parse(res.record_json);
        const cJSON *det = cJSON_GetObjectItemCaseSensitive(rec, "details");
        double tt = jnum(rec, "threads"), te = jnum(det, "threads");
        int t = isfinite(tt) ? (int)tt : 0, each = isfinite(te) ? (int)te : 0, d = cfg.devices;
        if (strcmp(jstr(rec, "backend"), "cpu") == 0 && t > 0 && each > 0) {
            if (each * d > t)
                fprintf(stderr,
                        "gpubench train: note: %d thread(s) for %d replicas: each replica still "
                        "runs one, %d in all\n",
                        t, d, each * d);
            else if (each * d < t)
                fprintf(stderr,
                        "gpubench train: note: %d threads do not split evenly over %d replicas: "
                        "%d each, %d left idle\n",
                        t, d, each, t - each * d);
        }
        cJSON_Delete(rec);
    }
    if (res.record_json) { /* measured (even when a save failed after it) */
        if (json)
            fprintf(out, "%s\n", res.record_json);
        else
            print_table(&cfg, &res);
    }
    int werr = (out != stdout && fclose(out) != 0) | (fflush(stdout) != 0);
    if (werr && !rc) {
        snprintf(err, sizeof(err), "cannot write the result: %s", strerror(errno));
        cli_output_failure_said(); /* main says nothing more */
        rc = 1;
    }
    if (rc) fprintf(stderr, "gpubench train: %s\n", err);
    gb_train_result_free(&res);
    return rc;
}
