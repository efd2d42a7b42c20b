/* cuda_bench.c - gb_cuda_bench: times the CUDA backend's ResNet-50 training
 * step through gb_cuda_backend_ops exactly as the engine driver calls it
 * (create, set_state with torchvision's init, a synthetic batch drawn on the
 * device, warm-up steps, then timed steps, each timed by the backend's CUDA
 * events), for bench/gpu/run.sh on GPU machines where the whole tree, and so
 * `gpubench train`, cannot be built (bench/gpu/CMakeLists.txt).
 *
 * Prints one JSON object on stdout: images_per_sec = batch / median step
 * time, the step-time spread, first and last timed loss, fp16 steps skipped
 * by the loss scaler, set-up time (cudnnFind included), the backend's peak
 * allocation, device and versions, and the backend's details (CUDA graph,
 * batch-norm implementation per layer, cuDNN algorithm per convolution).
 *
 * Data parallel (--dp, --devices N): one thread per GPU, each replica with
 * a member of one comm group (kernels/comm.h), so the backend builds an
 * NCCL communicator (with N = 1, a one-rank one) and averages gradients in
 * buckets; a step lasts as long as the slowest replica's; images_per_sec
 * counts the global batch; details carry the transports NCCL reported.
 * --allreduce instead runs the backend's allreduce op (nccl-tests style)
 * over N GPUs and prints {"sizes": [...]} with algbw and busbw.
 *
 * Exit status: 0; 1 when a call fails or a timed loss is not finite (the
 * JSON is still printed in the second case) or an all-reduce check fails;
 * 2 on bad options or no GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "engine.h"
#include "model.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const gb_backend_ops_t gb_cuda_backend_ops;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f) {
    fprintf(f, "usage: gb_cuda_bench [options]\n"
               "  --precision P    fp32 | tf32 | fp16 | bf16 (default fp16)\n"
               "  --batch N        images per step (default 256)\n"
               "  --image-size S   S x S images (default 224)\n"
               "  --steps N        timed steps (default 30)\n"
               "  --warmup N       untimed steps first (default 10)\n"
               "  --device D       GPU ordinal (default 0)\n"
               "  --seed N         weights and synthetic data (default 1)\n"
               "  --no-graph       run every step eagerly (no CUDA graph)\n"
               "  --dp             data parallel through NCCL, even on one GPU\n"
               "  --devices N      GPUs 0..N-1, one replica each (implies --dp; default 1)\n"
               "  --bucket-mb X    gradient all-reduce bucket (default 25)\n"
               "  --interconnect I auto | nvlink | pcie (default auto)\n"
               "  --allreduce      the allreduce kind instead of training: float sum in place\n"
               "  --min-bytes B    its smallest message (default 8)\n"
               "  --max-bytes B    its largest message (default 1 GiB)\n"
               "  --iters N        its timed all-reduces per size (default 20)\n"
               "  --gemm N         the gemm kind instead of training: C = A B, N x N x N in\n"
               "                   --precision (fp32: TF32 off; fp16/bf16: 16-bit A and B,\n"
               "                   fp32 accumulation), --steps timed products after 3 warm-up\n"
               "  -h, --help       this text\n");
}

static int parse_int(const char *s, int lo, int *out) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}

/* a finite number, or null */
static void put_num(const char *key, double v) {
    if (isfinite(v))
        printf("\"%s\":%.6g", key, v);
    else
        printf("\"%s\":null", key);
}

/* one replica: every backend call on its own thread, a barrier before each
 * step so a data-parallel step's time is the slowest replica's */
typedef struct brep {
    int d;
    const gb_model_t *m;
    const gb_train_config_t *cfg;
    gb_train_config_t own; /* the job's, with this replica's data seed */
    gb_comm_t *comm;
    gb_barrier_t *bar;
    const float *params, *buffers;
    int steps, warmup;
    double *ms, *loss;
    int skipped, warm_skipped;
    double setup_s;
    gb_replica_report_t rep;
    int rc;
    char err[GB_ERR_LEN];
} brep_t;

static void *brep_main(void *arg) {
    brep_t *r = arg;
    const gb_backend_ops_t *ops = &gb_cuda_backend_ops;
    void *st = NULL;
    r->rc = 1;
    double t0 = now_s();
    if (ops->create(r->m, r->cfg, r->d, r->comm, &st, r->err, sizeof(r->err)) ||
        ops->set_state(st, r->params, r->buffers, 0, r->err, sizeof(r->err)) ||
        ops->set_batch(st, NULL, NULL, r->err, sizeof(r->err)))
        goto out;
    r->setup_s = now_s() - t0;
    for (int i = 0; i < r->warmup + r->steps; i++) {
        gb_step_out_t out;
        if (r->bar && gb_barrier_wait(r->bar, r->err, sizeof(r->err))) goto out;
        if (ops->step(st, &out, r->err, sizeof(r->err))) {
            char e[GB_ERR_LEN];
            snprintf(e, sizeof(e), "step %d: %.480s", i, r->err);
            snprintf(r->err, sizeof(r->err), "%s", e);
            goto out;
        }
        if (i < r->warmup) {
            r->warm_skipped += out.skipped;
            continue;
        }
        r->ms[i - r->warmup] = out.ms;
        r->loss[i - r->warmup] = out.loss;
        r->skipped += out.skipped;
    }
    if (ops->report(st, &r->rep, r->err, sizeof(r->err))) goto out;
    r->rc = 0;
out:
    if (r->rc) {
        if (r->bar) gb_barrier_abort(r->bar, r->err);
        if (r->comm) gb_comm_abort(r->comm, r->err);
    }
    if (st) ops->destroy(&st);
    return NULL;
}

typedef struct arep {
    gb_comm_t *comm;
    const gb_allreduce_config_t *cfg;
    gb_allreduce_size_t sizes[64];
    int n, rc;
    char *details;
    char err[GB_ERR_LEN];
} arep_t;

static void *arep_main(void *arg) {
    arep_t *a = arg;
    a->rc = gb_cuda_backend_ops.allreduce(a->comm->local_rank, a->comm, a->cfg, a->sizes, a->n,
                                          &a->details, a->err, sizeof(a->err));
    return NULL;
}

/* nccl-tests' all_reduce_perf through the backend's allreduce op */
static int run_allreduce(const gb_backend_info_t *info, int devices, const char *interconnect,
                         size_t min_b, size_t max_b, int iters, int warmup) {
    char err[GB_ERR_LEN];
    gb_allreduce_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
    snprintf(cfg.interconnect, sizeof(cfg.interconnect), "%s", interconnect);
    cfg.devices = devices;
    cfg.min_bytes = min_b;
    cfg.max_bytes = max_b;
    cfg.iters = iters;
    cfg.warmup = warmup;
    cfg.fault_rank = -1;
    gb_comm_group_t *g = gb_comm_group_new(devices, NULL, 0, err, sizeof(err));
    arep_t *a = calloc((size_t)devices, sizeof(*a));
    pthread_t *th = calloc((size_t)devices, sizeof(*th));
    if (!g || !a || !th) {
        fprintf(stderr, "gb_cuda_bench: %s\n", g ? "out of memory" : err);
        return 1;
    }
    int n = 0;
    gb_allreduce_size_t sizes[64];
    for (size_t b = min_b; b <= max_b && n < 64; b *= 2) {
        memset(&sizes[n], 0, sizeof(sizes[n]));
        sizes[n].bytes = b;
        sizes[n].count = b / 4;
        n++;
        if (b > max_b / 2) break;
    }
    for (int d = 0; d < devices; d++) {
        a[d].comm = gb_comm_group_member(g, d);
        a[d].cfg = &cfg;
        a[d].n = n;
        memcpy(a[d].sizes, sizes, (size_t)n * sizeof(sizes[0]));
        if (pthread_create(&th[d], NULL, arep_main, &a[d]) != 0) {
            fprintf(stderr, "gb_cuda_bench: cannot start a thread\n");
            return 1;
        }
    }
    for (int d = 0; d < devices; d++)
        pthread_join(th[d], NULL);
    int rc = 0;
    for (int d = 0; d < devices; d++)
        if (a[d].rc) {
            fprintf(stderr, "gb_cuda_bench: allreduce on GPU %d: %s\n", d, a[d].err);
            rc = 1;
        }
    if (rc == 0) {
        double peak = 0;
        int wrong = 0;
        printf(
            "{\"framework\":\"gpubench\",\"kind\":\"allreduce\",\"devices\":%d,\"device\":\"%s\","
            "\"iters\":%d,\"warmup\":%d,\"sizes\":[",
            devices, info->device_model, iters, warmup);
        for (int k = 0; k < n; k++) {
            const gb_allreduce_size_t *z = &a[0].sizes[k];
            double t = z->time_us > 0 ? z->time_us : 1e-3;
            double alg = (double)z->bytes / (t * 1e-6) / 1e9;
            double bus = devices > 1 ? alg * 2.0 * (devices - 1) / devices : 0.0;
            if (z->ok && bus > peak) peak = bus;
            wrong += !z->ok;
            printf("%s{\"bytes\":%zu,\"count\":%zu,\"time_us\":%.3f,\"algbw_gbs\":%.3f,"
                   "\"busbw_gbs\":%.3f,\"ok\":%s}",
                   k ? "," : "", z->bytes, z->count, t, alg, bus, z->ok ? "true" : "false");
        }
        printf("],\"peak_busbw_gbs\":%.3f,\"wrong_sizes\":%d,\"versions\":%s,\"details\":%s}\n",
               peak, wrong, info->versions[0] ? info->versions : "{}",
               a[0].details ? a[0].details : "null");
        fflush(stdout);
        if (wrong) {
            fprintf(stderr, "gb_cuda_bench: %d sizes gave wrong sums\n", wrong);
            rc = 1;
        }
    }
    for (int d = 0; d < devices; d++)
        free(a[d].details);
    free(a);
    free(th);
    gb_comm_group_destroy(&g);
    return rc;
}

/* the gemm kind through the backend's gemm op, as the worker runs it (its
 * entries are checked against a double reference after timing) */
static int run_gemm(const gb_backend_info_t *info, int device, gb_precision_t prec, int n,
                    int reps) {
    char err[GB_ERR_LEN] = "";
    double ms = 0, p90 = 0, gf = 0;
    int64_t win[2] = {0, 0};
    if (gb_cuda_backend_ops.gemm(device, prec, n, n, n, reps, &ms, &p90, &gf, win, err,
                                 sizeof(err)) != 0) {
        fprintf(stderr, "gb_cuda_bench: gemm: %s\n", err);
        return 1;
    }
    printf("{\"framework\":\"gpubench\",\"kind\":\"gemm\",\"impl\":\"cublasGemmEx\","
           "\"precision\":\"%s\",\"device\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"reps\":%d,",
           gb_precision_name(prec), info->device_model, n, n, n, reps);
    put_num("ms_median", ms);
    printf(",");
    put_num("ms_p90", p90);
    printf(",");
    put_num("gflops", gf);
    printf(",\"window_ms\":%lld,\"versions\":%s}\n", (long long)(win[1] - win[0]),
           info->versions[0] ? info->versions : "{}");
    fflush(stdout);
    return 0;
}

static int parse_size(const char *s, size_t *out) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (!end || *end || v < 4 || v % 4 || v > (1ull << 34)) return -1;
    *out = (size_t)v;
    return 0;
}

int main(int argc, char **argv) {
    static const char *precs[] = {"fp32", "tf32", "fp16", "bf16"};
    int prec = GB_PREC_FP16, batch = 256, image = 224, steps = 30, warmup = 10, device = 0;
    int graph = 1, seed = 1, dp = 0, devices = 1, allred = 0, iters = 20, gemm = 0;
    size_t min_b = 8, max_b = (size_t)1 << 30;
    double bucket_mb = 25.0;
    char ic[16] = "auto";
    static const struct option opts[] = {{"precision", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"image-size", required_argument, 0, 's'},
                                         {"steps", required_argument, 0, 'n'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"device", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 'r'},
                                         {"no-graph", no_argument, 0, 'g'},
                                         {"dp", no_argument, 0, 'D'},
                                         {"devices", required_argument, 0, 'N'},
                                         {"bucket-mb", required_argument, 0, 'B'},
                                         {"interconnect", required_argument, 0, 'I'},
                                         {"allreduce", no_argument, 0, 'A'},
                                         {"min-bytes", required_argument, 0, 'm'},
                                         {"max-bytes", required_argument, 0, 'M'},
                                         {"iters", required_argument, 0, 'i'},
                                         {"gemm", required_argument, 0, 'G'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, bad = 0, li = -1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        int was_bad = bad;
        switch (c) {
        case 'p':
            prec = -1;
            for (int i = 0; i < 4; i++)
                if (strcmp(optarg, precs[i]) == 0) prec = i;
            bad |= prec < 0;
            break;
        case 'b':
            bad |= parse_int(optarg, 1, &batch);
            break;
        case 's':
            bad |= parse_int(optarg, 1, &image);
            break;
        case 'n':
            bad |= parse_int(optarg, 1, &steps);
            break;
        case 'w':
            bad |= parse_int(optarg, 0, &warmup);
            break;
        case 'd':
            bad |= parse_int(optarg, 0, &device);
            break;
        case 'r':
            bad |= parse_int(optarg, 0, &seed);
            break;
        case 'g':
            graph = 0;
            break;
        case 'D':
            dp = 1;
            break;
        case 'N':
            bad |= parse_int(optarg, 1, &devices) || devices > 64;
            dp = 1;
            break;
        case 'B': {
            char *end = NULL;
            bucket_mb = strtod(optarg, &end);
            bad |= !end || *end || !(bucket_mb > 0) || bucket_mb > 65536;
            break;
        }
        case 'I':
            bad |= strcmp(optarg, "auto") && strcmp(optarg, "nvlink") && strcmp(optarg, "pcie");
            snprintf(ic, sizeof(ic), "%.15s", optarg);
            break;
        case 'A':
            allred = 1;
            break;
        case 'm':
            bad |= parse_size(optarg, &min_b);
            break;
        case 'M':
            bad |= parse_size(optarg, &max_b);
            break;
        case 'i':
            bad |= parse_int(optarg, 1, &iters);
            break;
        case 'G':
            bad |= parse_int(optarg, 1, &gemm) || gemm > 65536;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            bad = 1;
        }
        /* which value was wrong, not only the usage */
        if (bad && !was_bad && c != '?' && li >= 0 && optarg)
            fprintf(stderr, "gb_cuda_bench: bad value '%s' for --%s\n", optarg, opts[li].name);
        li = -1;
    }
    if (min_b > max_b) fprintf(stderr, "gb_cuda_bench: --min-bytes is above --max-bytes\n");
    if (dp && device != 0) fprintf(stderr, "gb_cuda_bench: data parallel uses devices 0..N-1\n");
    if (optind != argc) fprintf(stderr, "gb_cuda_bench: unexpected argument '%s'\n", argv[optind]);
    if (bad || optind != argc || min_b > max_b || (dp && device != 0)) {
        usage(stderr);
        return 2;
    }

    const gb_backend_ops_t *ops = &gb_cuda_backend_ops;
    char err[GB_ERR_LEN] = "";
    gb_backend_info_t info;
    if (ops->probe(&info, err, sizeof(err)) != 0) {
        fprintf(stderr, "gb_cuda_bench: %s\n", err);
        return 2;
    }
    for (char *q = info.device_model; *q; q++) /* it goes into a JSON string */
        if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) *q = '_';
    if (devices > info.device_count) {
        fprintf(stderr, "gb_cuda_bench: %d GPUs asked for, %d here\n", devices, info.device_count);
        return 2;
    }
    if (allred) return run_allreduce(&info, devices, ic, min_b, max_b, iters, warmup);
    if (gemm) return run_gemm(&info, device, (gb_precision_t)prec, gemm, steps);
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, image);
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "gb_cuda_bench: model: %s\n", err);
        return 2;
    }
    gb_train_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
    snprintf(cfg.interconnect, sizeof(cfg.interconnect), "%s", ic);
    cfg.precision = (gb_precision_t)prec;
    cfg.model = mc;
    cfg.batch = batch;
    cfg.devices = devices;
    cfg.steps = steps;
    cfg.warmup = warmup;
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    cfg.weight_decay = 1e-4f;
    cfg.seed = (uint64_t)seed;
    cfg.bucket_mb = bucket_mb;
    cfg.cuda_graph = graph;

    int rc = 1;
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc(m->n_buffers * sizeof(float));
    double *ms = malloc((size_t)steps * sizeof(double)), *sorted = malloc((size_t)steps * 8);
    brep_t *reps = calloc((size_t)devices, sizeof(*reps));
    pthread_t *th = calloc((size_t)devices, sizeof(*th));
    gb_comm_group_t *grp = NULL;
    gb_barrier_t *bar = NULL;
    if (!params || !buffers || !ms || !sorted || !reps || !th) {
        fprintf(stderr, "gb_cuda_bench: out of memory\n");
        goto done;
    }
    gb_model_init(m, params, buffers, cfg.seed);
    if (dp) {
        grp = gb_comm_group_new(devices, NULL, 0, err, sizeof(err));
        bar = devices > 1 ? gb_barrier_new(devices) : NULL;
        if (!grp || (devices > 1 && !bar)) {
            fprintf(stderr, "gb_cuda_bench: %s\n", grp ? "out of memory" : err);
            goto done;
        }
    }
    for (int d = 0; d < devices; d++) {
        brep_t *r = &reps[d];
        r->d = dp ? d : device;
        r->m = m;
        /* each replica its own synthetic images, as the engine gives them
         * (gb_replica_seed): the losses are the engine's, not N copies */
        r->own = cfg;
        r->own.seed = gb_replica_seed(cfg.seed, dp ? d : 0);
        r->cfg = &r->own;
        r->comm = dp ? gb_comm_group_member(grp, d) : NULL;
        r->bar = bar;
        r->params = params;
        r->buffers = buffers;
        r->steps = steps;
        r->warmup = warmup;
        r->ms = calloc((size_t)steps, sizeof(double));
        r->loss = calloc((size_t)steps, sizeof(double));
        if (!r->ms || !r->loss) {
            fprintf(stderr, "gb_cuda_bench: out of memory\n");
            goto done;
        }
    }
    if (devices == 1) {
        brep_main(&reps[0]);
    } else {
        for (int d = 0; d < devices; d++)
            if (pthread_create(&th[d], NULL, brep_main, &reps[d]) != 0) {
                fprintf(stderr, "gb_cuda_bench: cannot start a thread\n");
                goto done; /* (the process exits) */
            }
        for (int d = 0; d < devices; d++)
            pthread_join(th[d], NULL);
    }
    for (int d = 0; d < devices; d++) {
        if (reps[d].rc) {
            fprintf(stderr, "gb_cuda_bench: %s %s batch %d, GPU %d: %s\n", info.device_model,
                    precs[prec], batch, reps[d].d, reps[d].err);
            goto done;
        }
    }
    /* a data-parallel step lasts as long as its slowest replica */
    for (int i = 0; i < steps; i++) {
        ms[i] = 0;
        for (int d = 0; d < devices; d++)
            if (reps[d].ms[i] > ms[i]) ms[i] = reps[d].ms[i];
    }
    const brep_t *r0 = &reps[0];
    memcpy(sorted, ms, (size_t)steps * sizeof(double));
    qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
    double med = steps % 2 ? sorted[steps / 2] : 0.5 * (sorted[steps / 2 - 1] + sorted[steps / 2]);
    double mean = 0.0;
    int finite = 1;
    for (int i = 0; i < steps; i++) {
        mean += ms[i] / steps;
        finite &= isfinite(r0->loss[i]) && ms[i] > 0.0;
    }
    printf("{\"framework\":\"gpubench\",\"backend\":\"cuda\",\"precision\":\"%s\",\"batch\":%d,"
           "\"devices\":%d,\"data_parallel\":%s,\"global_batch\":%d,"
           "\"image_size\":%d,\"steps\":%d,\"warmup\":%d,\"cuda_graph_requested\":%s,",
           precs[prec], batch, devices, dp ? "true" : "false", batch * devices, image, steps,
           warmup, graph ? "true" : "false");
    put_num("images_per_sec", med > 0.0 ? batch * devices * 1000.0 / med : NAN);
    printf(",\"step_ms\":{");
    put_num("median", med);
    printf(",");
    put_num("p90", sorted[(int)(0.9 * (steps - 1))]);
    printf(",");
    put_num("min", sorted[0]);
    printf(",");
    put_num("max", sorted[steps - 1]);
    printf(",");
    put_num("mean", mean);
    printf("},");
    put_num("loss_first", r0->loss[0]);
    printf(",");
    put_num("loss_last", r0->loss[steps - 1]);
    printf(",\"skipped_steps\":%d,\"skipped_warmup_steps\":%d,\"valid\":%s,", r0->skipped,
           r0->warm_skipped, finite ? "true" : "false");
    put_num("setup_s", r0->setup_s);
    printf(",\"peak_mem_bytes\":%zu,\"device\":\"%s\",\"versions\":%s,\"details\":%s}\n",
           r0->rep.peak_mem_bytes, info.device_model, info.versions[0] ? info.versions : "{}",
           r0->rep.details_json ? r0->rep.details_json : "null");
    fflush(stdout);
    if (!finite) fprintf(stderr, "gb_cuda_bench: a timed step's loss or time is not finite\n");
    rc = finite ? 0 : 1;
done:
    for (int d = 0; reps && d < devices; d++) {
        free(reps[d].ms);
        free(reps[d].loss);
        free(reps[d].rep.details_json);
    }
    free(reps);
    free(th);
    gb_barrier_destroy(&bar);
    gb_comm_group_destroy(&grp);
    free(params);
    free(buffers);
    free(ms);
    free(sorted);
    gb_model_destroy(&m);
    return rc;
}
