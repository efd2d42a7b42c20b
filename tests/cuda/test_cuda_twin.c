/* test_cuda_twin.c - the CUDA backend's wiring (plan.c + net.c) run by the
 * host twin in double matches PyTorch float64 (torchvision Bottleneck,
 * torch.optim.SGD): loss of every step, every gradient of the last step, and
 * every parameter and running statistic after the last step. Runs on any
 * machine (no GPU); needs /usr/bin/python3 with torch and torchvision.
 *
 * Tolerance: both sides compute in double, differing only in summation order
 * (relative error ~1e-15 per sum, amplified through ~20 layers and batch-norm
 * divisions by small variances); 1e-9 relative L2 per tensor leaves a wide
 * margin while a wiring error (a lost residual, a wrong buffer) gives O(1).
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "compare.h"
#include "host_exec.h"
#include "rng.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOL 1e-9

typedef struct twin_run {
    int steps;
    double loss[8];
    float *grads, *params, *buffers;
} twin_run_t;

static gb_model_t *tiny_model(int image, const int layers[4], int w0, int classes) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, image);
    for (int i = 0; i < 4; i++)
        mc.layers[i] = layers[i];
    mc.base_width = w0;
    mc.n_classes = classes;
    char err[256];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    return m;
}

/* torchvision init plus random BN affine and running stats, so BN is really
 * exercised (gamma 1, beta 0 would hide transposed or skipped terms). */
static void random_state(const gb_model_t *m, uint64_t seed, float *params, float *buffers) {
    gb_model_init(m, params, buffers, seed);
    gb_rng_t r;
    gb_rng_seed(&r, seed + 99);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        float *d = (ti->is_param ? params : buffers) + ti->offset;
        for (size_t i = 0; i < ti->numel; i++) {
            double u = gb_rng_uniform(&r);
            if (ti->role == GB_ROLE_BN_W) d[i] = (float)(0.5 + u);
            if (ti->role == GB_ROLE_BN_B) d[i] = (float)(0.4 * u - 0.2);
            if (ti->role == GB_ROLE_BN_RMEAN) d[i] = (float)(0.2 * u - 0.1);
            if (ti->role == GB_ROLE_BN_RVAR) d[i] = (float)(0.5 + u);
        }
    }
}

static void twin_train(const gb_model_t *m, const gb_train_config_t *cfg, const float *params,
                       const float *buffers, const float *images, const int32_t *labels,
                       const gb_exec_ops_t *override, int reload, twin_run_t *out) {
    const gb_backend_ops_t *ops = &gb_twin_backend_ops;
    char err[GB_ERR_LEN];
    void *st = NULL;
    CHECKF(ops->create(m, cfg, 0, NULL, &st, err, sizeof(err)) == 0, "%s", err);
    if (override) gb_net_exec(st)->ops = override;
    if (reload) {
        /* train a step first: loading the state again must restart the
         * momentum, so what follows matches a fresh torch run */
        gb_step_out_t so;
        CHECKF(ops->set_state(st, params, buffers, 0, err, sizeof(err)) == 0, "%s", err);
        CHECKF(ops->set_batch(st, images, labels, err, sizeof(err)) == 0, "%s", err);
        CHECKF(ops->step(st, &so, err, sizeof(err)) == 0, "%s", err);
    }
    CHECKF(ops->set_state(st, params, buffers, 0, err, sizeof(err)) == 0, "%s", err);
    {
        /* a label outside [0, classes) is refused before it reaches a
         * device (the loss kernel indexes the logits with it); net.c's
         * check, shared with the CUDA backend */
        int n = cfg->batch, bad[2] = {-1, m->cfg.n_classes};
        int32_t *lb = malloc((size_t)n * sizeof(int32_t));
        CHECK(lb);
        for (int b = 0; b < 2; b++) {
            memcpy(lb, labels, (size_t)n * sizeof(int32_t));
            lb[n - 1] = bad[b];
            err[0] = '\0';
            CHECK(ops->set_batch(st, images, lb, err, sizeof(err)) == -1);
            CHECKF(strstr(err, "outside [0,"), "label %d: '%s'", bad[b], err);
        }
        free(lb);
        CHECK(ops->set_batch(st, images, NULL, err, sizeof(err)) == -1);
    }
    CHECKF(ops->set_batch(st, images, labels, err, sizeof(err)) == 0, "%s", err);
    for (int s = 0; s < out->steps; s++) {
        gb_step_out_t so;
        CHECKF(ops->step(st, &so, err, sizeof(err)) == 0, "%s", err);
        out->loss[s] = so.loss;
        CHECK(so.skipped == 0 && so.ms < 0.0);
    }
    out->grads = malloc(m->n_params * sizeof(float));
    out->params = malloc(m->n_params * sizeof(float));
    out->buffers = malloc(m->n_buffers * sizeof(float));
    CHECK(out->grads && out->params && out->buffers);
    int64_t nbt = -1;
    CHECKF(ops->get_grads(st, out->grads, err, sizeof(err)) == 0, "%s", err);
    CHECKF(ops->get_state(st, out->params, out->buffers, &nbt, err, sizeof(err)) == 0, "%s", err);
    CHECK(nbt == out->steps);
    gb_replica_report_t rep;
    CHECK(ops->report(st, &rep, err, sizeof(err)) == 0 && rep.peak_mem_bytes > 0);
    ops->destroy(&st);
    CHECK(st == NULL);
}

/* Runs twin_torch.py; fills loss[steps], grads, params, buffers (double). */
static void torch_train(const gb_model_t *m, const gb_train_config_t *cfg, int steps,
                        const float *params, const float *buffers, const float *images,
                        const int32_t *labels, double *loss, double *grads, double *p_after,
                        double *b_after) {
    char dir[] = "/tmp/gb_twin_XXXXXX";
    CHECK(mkdtemp(dir));
    char in[64], outp[64], cmd[512];
    snprintf(in, sizeof(in), "%s/in.bin", dir);
    snprintf(outp, sizeof(outp), "%s/out.bin", dir);
    CHECK(gb_twin_write_input(in, m, cfg, steps, params, buffers, images, labels) == 0);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %s", GB_TWIN_SCRIPT, in, outp);
    int rc = system(cmd);
    CHECKF(rc == 0, "'%s' exited with %d (needs python3-torch and python3-torchvision)", cmd, rc);
    FILE *f = fopen(outp, "rb");
    CHECK(f);
    CHECK(fread(loss, sizeof(double), (size_t)steps, f) == (size_t)steps);
    CHECK(fread(grads, sizeof(double), m->n_params, f) == m->n_params);
    CHECK(fread(p_after, sizeof(double), m->n_params, f) == m->n_params);
    CHECK(fread(b_after, sizeof(double), m->n_buffers, f) == m->n_buffers);
    CHECK(fgetc(f) == EOF);
    fclose(f);
    unlink(in);
    unlink(outp);
    rmdir(dir);
}

/* Compare every tensor; returns the number of failing tensors. */
static int compare_run(const gb_model_t *m, const twin_run_t *tw, const double *loss,
                       const double *grads, const double *p_after, const double *b_after,
                       const float *p_before, int verbose) {
    int bad = 0;
    size_t big = m->n_params > m->n_buffers ? m->n_params : m->n_buffers;
    double *a = malloc(big * sizeof(double)), *ref = malloc(big * sizeof(double));
    CHECK(a && ref);
    for (int s = 0; s < tw->steps; s++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "loss[%d]", s);
        /* the twin reports the loss as float: 6e-8 relative */
        bad += !gb_close(nm, &tw->loss[s], &loss[s], 1, 1e-6, verbose);
    }
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        char nm[GB_NAME_LEN + 16];
        if (ti->is_param) {
            for (size_t i = 0; i < ti->numel; i++) {
                a[i] = tw->grads[ti->offset + i];
                ref[i] = grads[ti->offset + i];
            }
            /* the twin hands gradients out as float: 6e-8 relative */
            snprintf(nm, sizeof(nm), "grad %s", ti->name);
            bad += !gb_close(nm, a, ref, ti->numel, 1e-6, verbose);
            /* updates (after - before) carry the float rounding of the
             * weights relative to the step: ulp(w)/|lr*buf| ~ 1e-5 at most */
            for (size_t i = 0; i < ti->numel; i++) {
                a[i] = (double)tw->params[ti->offset + i] - p_before[ti->offset + i];
                ref[i] = p_after[ti->offset + i] - p_before[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "update %s", ti->name);
            bad += !gb_close(nm, a, ref, ti->numel, 1e-4, verbose);
        } else {
            for (size_t i = 0; i < ti->numel; i++) {
                a[i] = tw->buffers[ti->offset + i];
                ref[i] = b_after[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "buffer %s", ti->name);
            bad += !gb_close(nm, a, ref, ti->numel, 1e-6, verbose);
        }
    }
    free(a);
    free(ref);
    return bad;
}

/* A broken executor: the residual's gradient share is overwritten instead
 * of accumulated. The comparison must catch it. */
static gb_exec_ops_t broken;
static int (*real_bwd_data)(gb_exec_t *, int, const void *, void *, int);
static int bwd_data_no_acc(gb_exec_t *ex, int ci, const void *dy, void *dx, int acc) {
    (void)acc;
    return real_bwd_data(ex, ci, dy, dx, 0);
}

/* the fused step's fault: conv2's and conv3's weight gradients on the raw
 * conv output, the prologue's batch norm and ReLU left out */
static int (*real_bwd_filter_pre)(gb_exec_t *, int, const void *, int, const void *);
static int bwd_filter_no_pre(gb_exec_t *ex, int ci, const void *x, int pre_bn, const void *dy) {
    (void)pre_bn;
    return real_bwd_filter_pre(ex, ci, x, -1, dy);
}

/* inject: 0 plain, 1 a wiring fault that must be caught, 2 the state loaded
 * again after a step (must change nothing), 3 the fused step's fault */
static void run_case(int image, const int layers[4], int w0, int classes, int batch, int steps,
                     int inject) {
    gb_model_t *m = tiny_model(image, layers, w0, classes);
    gb_train_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.backend, sizeof(cfg.backend), "cuda-twin");
    cfg.precision = GB_PREC_FP32;
    cfg.model = m->cfg;
    cfg.batch = batch;
    cfg.devices = 1;
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    cfg.weight_decay = 1e-4f;
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc(m->n_buffers * sizeof(float));
    size_t ni = (size_t)batch * 3 * image * image;
    float *images = malloc(ni * sizeof(float));
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    CHECK(params && buffers && images && labels);
    random_state(m, 7 + (uint64_t)image, params, buffers);
    gb_model_synth_batch(m, batch, 11, images, labels);

    double loss[8], *grads = malloc(m->n_params * sizeof(double));
    double *pa = malloc(m->n_params * sizeof(double)), *ba = malloc(m->n_buffers * sizeof(double));
    CHECK(grads && pa && ba && steps <= 8);
    torch_train(m, &cfg, steps, params, buffers, images, labels, loss, grads, pa, ba);

    twin_run_t tw = {.steps = steps};
    const gb_exec_ops_t *ovr = NULL;
    {
        /* the step the twin runs is the one GB_CUDA_FUSE asks for; for
         * faults, take the host twin's own table and break one op */
        void *st = NULL;
        char err[GB_ERR_LEN];
        CHECKF(gb_twin_backend_ops.create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == 0, "%s", err);
        const char *fe = getenv("GB_CUDA_FUSE");
        CHECK(gb_net_exec(st)->fused == (fe && !strcmp(fe, "1")));
        broken = *gb_net_exec(st)->ops;
        gb_twin_backend_ops.destroy(&st);
    }
    if (inject == 1) {
        real_bwd_data = broken.conv_bwd_data;
        broken.conv_bwd_data = bwd_data_no_acc;
        ovr = &broken;
    } else if (inject == 3) {
        real_bwd_filter_pre = broken.conv_bwd_filter_pre;
        broken.conv_bwd_filter_pre = bwd_filter_no_pre;
        ovr = &broken;
    }
    twin_train(m, &cfg, params, buffers, images, labels, ovr, inject == 2, &tw);
    int bad = compare_run(m, &tw, loss, grads, pa, ba, params, 0);
    if (inject == 3) {
        CHECKF(bad > 0, "a weight gradient without its prologue went unnoticed");
        fprintf(stderr, "injected fused-step fault caught: %d tensors differ\n", bad);
    } else if (inject == 1) {
        CHECKF(bad > 0, "a dropped residual gradient went unnoticed");
        fprintf(stderr, "injected fault caught: %d tensors differ\n", bad);
    } else {
        if (bad) compare_run(m, &tw, loss, grads, pa, ba, params, 1);
        CHECKF(bad == 0, "%d tensors differ from torch (image %d, batch %d)", bad, image, batch);
        fprintf(stderr,
                "image %d layers %d,%d,%d,%d width %d batch %d steps %d: %d tensors match torch "
                "(loss %.6f)\n",
                image, layers[0], layers[1], layers[2], layers[3], w0, batch, steps, m->n_tensors,
                loss[steps - 1]);
    }
    free(tw.grads);
    free(tw.params);
    free(tw.buffers);
    free(grads);
    free(pa);
    free(ba);
    free(params);
    free(buffers);
    free(images);
    free(labels);
    gb_model_destroy(&m);
}

int main(void) {
    /* identity and projection blocks, two steps so momentum is exercised */
    const int l2211[4] = {2, 2, 1, 1}, l1111[4] = {1, 1, 1, 1};
    run_case(32, l2211, 8, 10, 3, 2, 0);
    /* odd image size: 37 -> 19 -> 10 -> 10, 5, 3, 2 */
    run_case(37, l1111, 4, 7, 2, 1, 0);
    /* the comparison fails on a wiring fault */
    run_case(32, l2211, 8, 10, 3, 1, 1);
    /* a second set_state restarts the momentum (two steps after it) */
    run_case(32, l1111, 8, 10, 3, 2, 2);
    /* GB_CUDA_FUSE=1 (cuda_twin_fused): the fused step's own fault too */
    const char *fe = getenv("GB_CUDA_FUSE");
    if (fe && !strcmp(fe, "1")) run_case(32, l2211, 8, 10, 3, 1, 3);
    return 0;
}
