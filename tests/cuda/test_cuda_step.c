/* test_cuda_step.c (GPU, label gpu) - whole training steps of the CUDA
 * backend, through gb_backend_ops_t, against the host twin in double (and
 * against the CPU engine when it is linked: GB_HAVE_CPU_BACKEND): loss of
 * each step, every gradient, every parameter update and running statistic,
 * with the step captured in a CUDA graph after the first; fp16 overflow
 * skips the update and halves the scale; synthetic data on the device equals
 * the host generator; probe and gemm work. Tolerances: gpu_common.h.
 * GB_TEST_QUICK=1 runs two configurations only (for compute-sanitizer). */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"
#include "gpu_common.h"
#include "host_exec.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>

extern const gb_backend_ops_t gb_cuda_backend_ops;
#ifdef GB_HAVE_CPU_BACKEND
extern const gb_backend_ops_t gb_cpu_backend_ops;
#endif

enum { BATCH = 4, IMAGE = 32, CLASSES = 10, STEPS = 3 };

typedef struct run {
    double loss[STEPS];
    int skipped[STEPS];
    float *grads, *params, *buffers;
    char *details;
} run_t;

static void state_for(const gb_model_t *m, float *params, float *buffers) {
    gb_model_init(m, params, buffers, 21);
    gb_rng_t r;
    gb_rng_seed(&r, 22);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        float *d = (ti->is_param ? params : buffers) + ti->offset;
        for (size_t i = 0; i < ti->numel; i++) {
            double u = gb_rng_uniform(&r);
            if (ti->role == GB_ROLE_BN_W) d[i] = (float)(0.5 + u);
            if (ti->role == GB_ROLE_BN_B) d[i] = (float)(0.4 * u - 0.2);
        }
    }
}

/* images NULL: the backend's own synthetic batch */
static void train(const gb_backend_ops_t *ops, const gb_model_t *m, const gb_train_config_t *cfg,
                  const float *params, const float *buffers, const float *images,
                  const int32_t *labels, int steps, run_t *out) {
    char err[GB_ERR_LEN];
    void *st = NULL;
    CHECKF(ops->create(m, cfg, 0, NULL, &st, err, sizeof(err)) == 0, "%s create: %s", ops->name,
           err);
    CHECKF(ops->set_state(st, params, buffers, 0, err, sizeof(err)) == 0, "%s", err);
    CHECKF(ops->set_batch(st, images, labels, err, sizeof(err)) == 0, "%s", err);
    for (int s = 0; s < steps; s++) {
        gb_step_out_t so;
        CHECKF(ops->step(st, &so, err, sizeof(err)) == 0, "%s step %d: %s", ops->name, s, err);
        out->loss[s] = so.loss;
        out->skipped[s] = so.skipped;
    }
    out->grads = malloc(m->n_params * 4);
    out->params = malloc(m->n_params * 4);
    out->buffers = malloc(m->n_buffers * 4);
    CHECK(out->grads && out->params && out->buffers);
    int64_t nbt = 0;
    CHECKF(ops->get_grads(st, out->grads, err, sizeof(err)) == 0, "%s", err);
    CHECKF(ops->get_state(st, out->params, out->buffers, &nbt, err, sizeof(err)) == 0, "%s", err);
    CHECK(nbt == steps);
    gb_replica_report_t rep;
    CHECKF(ops->report(st, &rep, err, sizeof(err)) == 0, "%s", err);
    out->details = rep.details_json;
    ops->destroy(&st);
    CHECK(st == NULL);
}

static void free_run(run_t *r) {
    free(r->grads);
    free(r->params);
    free(r->buffers);
    free(r->details);
}

/* One tensor's relative L2 error (Inf with a non-finite value); over its
 * bound the worst pairs are printed. */
typedef struct errs {
    double *e;
    int n, worst;
    char worst_name[GB_NAME_LEN + 64];
} errs_t;

static void one(errs_t *E, const char *nm, const double *x, const double *y, size_t n,
                double bound) {
    gb_cmp_t c;
    gb_cmp_f64(x, y, n, 0.0, bound, &c);
    double e = c.n_nonfinite ? INFINITY : c.rel_l2;
    if (e > bound) {
        fprintf(stderr, "  over  %-40s rel_l2 %.3e (bound %.1e)%s\n", nm, e, bound,
                c.n_nonfinite ? ", not finite" : "");
        gb_cmp_print(stderr, "        ", &c);
    }
    if (E->n == 0 || e > E->e[E->worst]) {
        E->worst = E->n;
        snprintf(E->worst_name, sizeof(E->worst_name), "%s", nm);
    }
    E->e[E->n++] = e;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every tensor of run a against ref (loss per step, gradients, the update
 * each parameter took, buffers). fp32 (lenient 0): every tensor within tol.
 * tf32/fp16/bf16 (lenient 1): the median tensor within tol and every one
 * within 4 tol: a rounding-level difference can flip a ReLU mask (or a max
 * pool's argmax) between the two runs, which moves a few tensors by more
 * than rounding, while a wiring, graph or loss-scale fault moves most of
 * them by 0.5 or more. One line per run gives the margins either way. */
static int compare(const char *tag, const gb_model_t *m, const run_t *a, const run_t *ref,
                   const float *before, int steps, double tol, int lenient) {
    size_t big = m->n_params > m->n_buffers ? m->n_params : m->n_buffers;
    double *x = malloc(big * 8), *y = malloc(big * 8);
    errs_t E = {malloc(((size_t)steps + 2 * (size_t)m->n_tensors) * sizeof(double)), 0, 0, ""};
    CHECK(x && y && E.e);
    double bound = lenient ? 4 * tol : tol;
    char nm[GB_NAME_LEN + 64];
    for (int s = 0; s < steps; s++) {
        snprintf(nm, sizeof(nm), "loss[%d]", s);
        one(&E, nm, &a->loss[s], &ref->loss[s], 1, bound);
    }
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (ti->is_param) {
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = a->grads[ti->offset + i];
                y[i] = ref->grads[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "grad %s", ti->name);
            one(&E, nm, x, y, ti->numel, bound);
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = (double)a->params[ti->offset + i] - before[ti->offset + i];
                y[i] = (double)ref->params[ti->offset + i] - before[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "update %s", ti->name);
            one(&E, nm, x, y, ti->numel, bound);
        } else {
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = a->buffers[ti->offset + i];
                y[i] = ref->buffers[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "buffer %s", ti->name);
            one(&E, nm, x, y, ti->numel, bound);
        }
    }
    double worst = E.e[E.worst];
    int over = 0;
    for (int i = 0; i < E.n; i++)
        over += !(E.e[i] <= bound); /* NaN and Inf count */
    qsort(E.e, (size_t)E.n, sizeof(double), cmp_double);
    double median = E.e[E.n / 2];
    int bad = over + (lenient && !(median <= tol));
    printf("%s: %d tensors, median rel %.2e, worst %.2e (%s); tol %.1e%s: %s\n", tag, E.n, median,
           worst, E.worst_name, tol, lenient ? " median, 4x worst" : " each", bad ? "FAIL" : "ok");
    free(x);
    free(y);
    free(E.e);
    return bad;
}

int main(void) {
    gb_skip_without_gpu("test_cuda_step");
    const gb_backend_ops_t *cu = &gb_cuda_backend_ops, *tw = &gb_twin_backend_ops;
    char err[GB_ERR_LEN];
    gb_backend_info_t info;
    CHECKF(cu->probe(&info, err, sizeof(err)) == 0, "%s", err);
    printf("GPU %s x%d %s\n", info.device_model, info.device_count, info.versions);

    gb_model_t *m = gb_gpu_tiny_model(IMAGE, CLASSES);
    float *params = malloc(m->n_params * 4), *buffers = malloc(m->n_buffers * 4);
    float *images = malloc((size_t)BATCH * 3 * IMAGE * IMAGE * 4);
    int32_t labels[BATCH];
    CHECK(params && buffers && images);
    state_for(m, params, buffers);
    gb_model_synth_batch(m, BATCH, 3, images, labels);

    gb_train_config_t tcfg;
    gb_gpu_step_cfg(&tcfg, m, GB_PREC_FP32, BATCH);
    run_t ref = {0};
    train(tw, m, &tcfg, params, buffers, images, labels, STEPS, &ref);

    int failures = 0;
    /* fp16 starts at a scale this tiny model does not overflow (dlogits
     * reach 64 / batch; the default 65536 would skip the first steps) */
    setenv("GB_CUDA_LOSS_SCALE", "64", 1);
    const char *impls[2] = {"cudnn", "own"};
    /* GB_TEST_QUICK=1 (compute-sanitizer runs): one precision per BN impl */
    int quick = gb_test_quick();
    for (int b = 0; b < 2; b++)
        for (int p = GB_PREC_FP32; p <= GB_PREC_BF16; p++) {
            if (quick && p != (b == 0 ? GB_PREC_FP16 : GB_PREC_FP32)) continue;
            setenv("GB_CUDA_BN", impls[b], 1);
            gb_train_config_t cfg;
            gb_gpu_step_cfg(&cfg, m, (gb_precision_t)p, BATCH);
            run_t r = {0};
            train(cu, m, &cfg, params, buffers, images, labels, STEPS, &r);
            for (int s = 0; s < STEPS; s++)
                CHECKF(!r.skipped[s], "step %d skipped", s);
            char tag[32];
            snprintf(tag, sizeof(tag), "%s/%s", impls[b], gb_prec_str((gb_precision_t)p));
            int bad = compare(tag, m, &r, &ref, params, STEPS, gb_step_tol((gb_precision_t)p),
                              p != GB_PREC_FP32);
            printf("%s: %d tensors off; %.400s\n", tag, bad, r.details);
            failures += bad;
            /* steps 2 and 3 ran as a captured graph */
            if (!strstr(r.details, "\"cuda_graph\":true")) {
                printf("%s: the step was not captured: %.300s\n", tag, r.details);
                failures++;
            }
            free_run(&r);
        }
    unsetenv("GB_CUDA_BN");

#ifdef GB_HAVE_CPU_BACKEND
    if (!quick) {
        run_t c = {0}, g = {0};
        gb_train_config_t cfg;
        gb_gpu_step_cfg(&cfg, m, GB_PREC_FP32, BATCH);
        snprintf(cfg.backend, sizeof(cfg.backend), "cpu");
        cfg.threads = 2;
        /* the CPU engine may refuse this host's CPU (a slow kernel it will
         * not run): then the comparison is skipped, saying why */
        void *st = NULL;
        if (gb_cpu_backend_ops.create(m, &cfg, 0, NULL, &st, err, sizeof(err)) != 0) {
            printf("cuda-vs-cpu fp32: skipped: the CPU engine: %s\n", err);
        } else {
            gb_cpu_backend_ops.destroy(&st);
            train(&gb_cpu_backend_ops, m, &cfg, params, buffers, images, labels, STEPS, &c);
            snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
            train(cu, m, &cfg, params, buffers, images, labels, STEPS, &g);
            /* two fp32 engines: each within 1e-4 of double, so 2e-4 apart */
            failures += compare("cuda-vs-cpu fp32", m, &g, &c, params, STEPS, 2e-4, 0);
            free_run(&c);
            free_run(&g);
        }
    }
#endif

    /* fp16 overflow: at 2^100 every scaled gradient is inf; the update is
     * skipped, parameters stay, the scale halves */
    {
        setenv("GB_CUDA_LOSS_SCALE", "1267650600228229401496703205376", 1);
        gb_train_config_t cfg;
        gb_gpu_cfg(&cfg, m, GB_PREC_FP16, BATCH);
        run_t r = {0};
        train(cu, m, &cfg, params, buffers, images, labels, 1, &r);
        CHECKF(r.skipped[0] == 1, "overflow not detected");
        CHECK(memcmp(r.params, params, m->n_params * 4) == 0);
        CHECKF(strstr(r.details, "\"loss_scale\":6.33825e+29"), "%.200s", r.details);
        free_run(&r);
        setenv("GB_CUDA_LOSS_SCALE", "3", 1);
        void *st = NULL;
        CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == -1 &&
              strstr(err, "power of two"));
        unsetenv("GB_CUDA_LOSS_SCALE");
    }
    /* synthetic batch drawn on the device equals the twin's host draw */
    {
        run_t a = {0}, r = {0};
        gb_train_config_t cfg;
        gb_gpu_step_cfg(&cfg, m, GB_PREC_FP32, BATCH);
        train(cu, m, &cfg, params, buffers, NULL, NULL, 1, &a);
        train(tw, m, &cfg, params, buffers, NULL, NULL, 1, &r);
        failures += compare("synthetic fp32", m, &a, &r, params, 1, gb_step_tol(GB_PREC_FP32), 0);
        free_run(&a);
        free_run(&r);
    }
    /* bad inputs fail cleanly */
    {
        gb_train_config_t cfg;
        gb_gpu_cfg(&cfg, m, GB_PREC_FP32, 1);
        void *st = NULL;
        CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == -1 &&
              strstr(err, "at least 2"));
        gb_gpu_cfg(&cfg, m, GB_PREC_FP32, BATCH);
        CHECK(cu->create(m, &cfg, 99, NULL, &st, err, sizeof(err)) == -1 && strstr(err, "GPU 99"));
        if (!quick) { /* (a whole creation, long under compute-sanitizer) */
            CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == 0);
            int32_t badl[BATCH] = {0, 1, CLASSES, 2};
            CHECK(cu->set_batch(st, images, badl, err, sizeof(err)) == -1 && strstr(err, "label"));
            cu->destroy(&st);
        }
    }
    /* the matrix-rate probe */
    {
        double ms = 0, gf = 0;
        int64_t win[2] = {0, 0};
        CHECKF(cu->gemm(0, 1024, 1024, 1024, 5, &ms, &gf, win, err, sizeof(err)) == 0, "%s", err);
        CHECK(win[0] > 0 && win[1] >= win[0]);
        CHECK(ms > 0 && gf > 0);
        printf("sgemm 1024^3: %.3f ms, %.0f GFLOP/s\n", ms, gf);
        CHECK(cu->gemm(0, 0, 1, 1, 1, &ms, &gf, NULL, err, sizeof(err)) == -1);
    }
    free_run(&ref);
    free(params);
    free(buffers);
    free(images);
    gb_model_destroy(&m);
    CHECKF(failures == 0, "%d comparisons failed", failures);
    return 0;
}
