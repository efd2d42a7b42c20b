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
 * Exit status: 0; 1 when a call fails or a timed loss is not finite (the
 * JSON is still printed in the second case); 2 on bad options or no GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine.h"
#include "model.h"

#include <getopt.h>
#include <math.h>
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

int main(int argc, char **argv) {
    static const char *precs[] = {"fp32", "tf32", "fp16", "bf16"};
    int prec = GB_PREC_FP16, batch = 256, image = 224, steps = 30, warmup = 10, device = 0;
    int graph = 1, seed = 1;
    static const struct option opts[] = {{"precision", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"image-size", required_argument, 0, 's'},
                                         {"steps", required_argument, 0, 'n'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"device", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 'r'},
                                         {"no-graph", no_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, bad = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
        case 'h':
            usage(stdout);
            return 0;
        default:
            bad = 1;
        }
    }
    if (bad || optind != argc) {
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
    snprintf(cfg.interconnect, sizeof(cfg.interconnect), "auto");
    cfg.precision = (gb_precision_t)prec;
    cfg.model = mc;
    cfg.batch = batch;
    cfg.devices = 1;
    cfg.steps = steps;
    cfg.warmup = warmup;
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    cfg.weight_decay = 1e-4f;
    cfg.seed = (uint64_t)seed;
    cfg.bucket_mb = 25.0;
    cfg.cuda_graph = graph;

    int rc = 1;
    void *st = NULL;
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc(m->n_buffers * sizeof(float));
    double *ms = malloc((size_t)steps * sizeof(double)), *sorted = malloc((size_t)steps * 8);
    double *loss = malloc((size_t)steps * sizeof(double));
    gb_replica_report_t rep = {0, NULL};
    if (!params || !buffers || !ms || !sorted || !loss) {
        fprintf(stderr, "gb_cuda_bench: out of memory\n");
        goto done;
    }
    gb_model_init(m, params, buffers, cfg.seed);
    double t0 = now_s();
    if (ops->create(m, &cfg, device, NULL, &st, err, sizeof(err)) ||
        ops->set_state(st, params, buffers, 0, err, sizeof(err)) ||
        ops->set_batch(st, NULL, NULL, err, sizeof(err))) {
        fprintf(stderr, "gb_cuda_bench: %s %s batch %d: %s\n", info.device_model, precs[prec],
                batch, err);
        goto done;
    }
    double setup_s = now_s() - t0;
    int skipped = 0, warm_skipped = 0;
    for (int i = 0; i < warmup + steps; i++) {
        gb_step_out_t out;
        if (ops->step(st, &out, err, sizeof(err))) {
            fprintf(stderr, "gb_cuda_bench: step %d: %s\n", i, err);
            goto done;
        }
        if (i < warmup) {
            warm_skipped += out.skipped;
            continue;
        }
        ms[i - warmup] = out.ms;
        loss[i - warmup] = out.loss;
        skipped += out.skipped;
    }
    if (ops->report(st, &rep, err, sizeof(err))) {
        fprintf(stderr, "gb_cuda_bench: report: %s\n", err);
        goto done;
    }
    memcpy(sorted, ms, (size_t)steps * sizeof(double));
    qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
    double med = steps % 2 ? sorted[steps / 2] : 0.5 * (sorted[steps / 2 - 1] + sorted[steps / 2]);
    double mean = 0.0;
    int finite = 1;
    for (int i = 0; i < steps; i++) {
        mean += ms[i] / steps;
        finite &= isfinite(loss[i]) && ms[i] > 0.0;
    }
    printf("{\"framework\":\"gpubench\",\"backend\":\"cuda\",\"precision\":\"%s\",\"batch\":%d,"
           "\"image_size\":%d,\"steps\":%d,\"warmup\":%d,\"cuda_graph_requested\":%s,",
           precs[prec], batch, image, steps, warmup, graph ? "true" : "false");
    put_num("images_per_sec", med > 0.0 ? batch * 1000.0 / med : NAN);
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
    put_num("loss_first", loss[0]);
    printf(",");
    put_num("loss_last", loss[steps - 1]);
    printf(",\"skipped_steps\":%d,\"skipped_warmup_steps\":%d,\"valid\":%s,", skipped, warm_skipped,
           finite ? "true" : "false");
    put_num("setup_s", setup_s);
    printf(",\"peak_mem_bytes\":%zu,\"device\":\"%s\",\"versions\":%s,\"details\":%s}\n",
           rep.peak_mem_bytes, info.device_model, info.versions[0] ? info.versions : "{}",
           rep.details_json ? rep.details_json : "null");
    fflush(stdout);
    if (!finite) fprintf(stderr, "gb_cuda_bench: a timed step's loss or time is not finite\n");
    rc = finite ? 0 : 1;
done:
    if (st) ops->destroy(&st);
    free(rep.details_json);
    free(params);
    free(buffers);
    free(ms);
    free(sorted);
    free(loss);
    gb_model_destroy(&m);
    return rc;
}
