/* step_rule.h - what the CUDA backend's numerics tests share that needs no
 * CUDA: the tiny model and configurations, tolerances, the conditioned
 * starting state and the whole-step rule (gb_step_rule), so the CPU engine
 * can be held to the same rule in CI (test_step_rule.c).
 *
 * Tolerances (relative L2 error per tensor against the double host twin),
 * from the unit roundoff u of the arithmetic each precision uses:
 *   fp32: u = 2^-24 = 6e-8; sums of up to ~5000 products grow it by about
 *         sqrt(5000) = 70 at worst in relative L2: 4e-6 -> 1e-5.
 *   tf32: operands rounded to 10 mantissa bits, u = 2^-11 = 4.9e-4 each,
 *         products carry ~2u = 1e-3 uncorrelated: 3e-3.
 *   fp16: operands and outputs stored in fp16 (u = 4.9e-4), weights rounded
 *         from fp32 masters, fp32 accumulation: a few u: 3e-3.
 *   bf16: u = 2^-8 = 3.9e-3, same count: 2.5e-2.
 * A whole step compounds these over ~3 layers per block through BN (which
 * renormalizes, so errors do not grow geometrically). Its rule (gb_step_rule)
 * takes the tensors by kind (gradients, the update each parameter took,
 * running statistics) and holds each kind's median tensor to gb_step_tol and
 * every tensor to gb_step_worst (losses each to gb_step_tol): a few tensors
 * are ill-conditioned sums (a BN gamma gradient of channels where few values
 * pass the ReLU is a small sum of larger terms of both signs), while a fault
 * moves a whole kind (a wrong weight decay every update, a wrong running
 * variance every buffer) or, through backward, most gradients. fp32:
 * median 2e-4, every tensor 2e-3, sized on the CPU engine (fp32, oneDNN and
 * our Winograd) against the twin on this model and conditioned state, 3
 * steps, 41 batches at 1 and 2 threads (82 runs): losses within 7e-6;
 * gradients median 7.5e-6 to 8.0e-5, worst 1.6e-5 to 5.0e-4 (a BN gamma
 * gradient every time); updates median 8.5e-6 to 9.8e-6 (the fp32 rounding
 * of after - before), worst up to 6.8e-5; buffers median under 2e-7, worst
 * under 3e-6. Later steps amplify: a learning rate 1e-4 off moves step 3's
 * gradients by 1e-4. test_step_rule holds the CPU engine to the rule in CI
 * and plants faults it must catch. The "fp32 near 1e-5" is met op by
 * op (gb_op_tol). tf32 and fp16 (the
 * same 11-bit significands) 5e-2 and 2e-1, bf16 2e-1 and 8e-1.
 */
#ifndef GB_TESTS_STEP_RULE_H
#define GB_TESTS_STEP_RULE_H

#include "check.h"
#include "compare.h"
#include "engine.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB_RULE_MAX_STEPS 8

static inline double gb_op_tol(gb_precision_t p) {
    switch (p) {
    case GB_PREC_FP32:
        return 1e-5;
    case GB_PREC_TF32:
        return 3e-3;
    case GB_PREC_FP16:
        return 3e-3;
    case GB_PREC_BF16:
        return 2.5e-2;
    }
    return 0.0;
}

/* whole step: the median tensor */
static inline double gb_step_tol(gb_precision_t p) {
    switch (p) {
    case GB_PREC_FP32:
        return 2e-4;
    case GB_PREC_TF32:
        return 5e-2;
    case GB_PREC_FP16:
        return 5e-2;
    case GB_PREC_BF16:
        return 2e-1;
    }
    return 0.0;
}

/* whole step: every tensor */
static inline double gb_step_worst(gb_precision_t p) {
    return p == GB_PREC_FP32 ? 10 * gb_step_tol(p) : 4 * gb_step_tol(p);
}

static inline const char *gb_prec_str(gb_precision_t p) {
    static const char *n[] = {"fp32", "tf32", "fp16", "bf16"};
    return n[p];
}

/* layers 2,1,1,1 (an identity block and four projections), base width 8
 * (channel counts multiples of 4 as cuDNN's fused NHWC BN wants) */
static inline gb_model_t *gb_gpu_tiny_model(int image, int classes) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, image);
    mc.layers[0] = 2;
    mc.layers[1] = mc.layers[2] = mc.layers[3] = 1;
    mc.base_width = 8;
    mc.n_classes = classes;
    char err[256];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    return m;
}

static inline void gb_gpu_cfg(gb_train_config_t *cfg, const gb_model_t *m, gb_precision_t p,
                              int batch) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->backend, sizeof(cfg->backend), "cuda");
    cfg->precision = p;
    cfg->model = m->cfg;
    cfg->batch = batch;
    cfg->devices = 1;
    cfg->steps = 3;
    cfg->lr = 0.1f;
    cfg->momentum = 0.9f;
    cfg->weight_decay = 1e-4f;
    cfg->seed = 5;
    cfg->bucket_mb = 25.0;
    cfg->cuda_graph = 1;
    /* as the engine's default: a process's NCCL mode is set by its first
     * communicator, and an empty one would refuse every later "auto" */
    snprintf(cfg->interconnect, sizeof(cfg->interconnect), "auto");
}

/* Whole steps compared across engines: lr 1e-3 with weight decay 1 (as
 * tests/engine/torch_match.py), so the update is large against rounding
 * (lr (g + w): ~1e-3 |w|) while the weights move too little between steps
 * for rounding-level differences to grow; at lr 0.1 on 4 images training is
 * chaotic (docs/engine-cpu.md) and 3 steps amplify them. */
static inline void gb_gpu_step_cfg(gb_train_config_t *cfg, const gb_model_t *m, gb_precision_t p,
                                   int batch) {
    gb_gpu_cfg(cfg, m, p, batch);
    cfg->lr = 1e-3f;
    cfg->weight_decay = 1.0f;
}

/* The state whole-step comparisons start from. A ReLU whose input is
 * within rounding of zero takes its mask from the rounding, and one flipped
 * element moves a weight gradient by ~1/sqrt(positions x channels), far over
 * any fp32 bound; with torchvision-like batch norm (beta near 0) that
 * happened in almost every 3-step fp32 run of the CPU engine against the
 * twin (median tensor 1e-4 to 6e-2). So every batch-norm channel is pushed
 * off zero: gamma in [0.5, 1], beta +-[2.5, 3] (positive on bn3 and the
 * projection, whose sum with the shortcut feeds a ReLU): the normalized
 * value sits 2.5 to 6 gammas from the threshold, where values near zero are
 * 20 to 800 times rarer than in a centred channel. Half the channels still
 * pass gradient, half are mostly off: every op's backward is exercised. */
static inline void gb_gpu_conditioned_state(const gb_model_t *m, float *params, float *buffers,
                                            uint64_t seed) {
    gb_model_init(m, params, buffers, seed);
    gb_rng_t r;
    gb_rng_seed(&r, seed + 1);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        float *d = (ti->is_param ? params : buffers) + ti->offset;
        int feeds_add = strstr(ti->name, "bn3") || strstr(ti->name, "downsample");
        for (size_t i = 0; i < ti->numel; i++) {
            double u = gb_rng_uniform(&r);
            if (ti->role == GB_ROLE_BN_W) d[i] = (float)(0.5 + 0.5 * u);
            if (ti->role == GB_ROLE_BN_B) {
                double sign = feeds_add || gb_rng_uniform(&r) < 0.5 ? 1.0 : -1.0;
                d[i] = (float)(sign * (2.5 + 0.5 * u));
            }
        }
    }
}

/* The whole-step comparisons' problem: the tiny model at `image`, the
 * conditioned state drawn from `seed` and the synthetic batch. fp32 and tf32
 * compare at 32x32 images; fp16 and bf16 at 64x64 (gb_step_image): at 32x32
 * layer4 is 1x1, so its batch norm normalizes 4 values per channel, and that
 * amplified the rounding of 16-bit storage so far that the first GPU run's
 * fp16 and bf16 errors (median gradient 4e-2 to 5e-2 and 0.25 to 0.38) were
 * what storing every tensor in 16 bits does to this problem, not a fault
 * (tests/cuda/half_emu.py reproduces them on the CPU); at 64x64 the same
 * emulation gives fp16 median 6e-3 and bf16 5e-2, and test_half_bounds
 * holds it to these bounds with a margin of 2. */
enum { GB_STEP_SEED = 21, GB_STEP_BATCH = 4, GB_STEP_CLASSES = 10 };

static inline int gb_step_image(gb_precision_t p) {
    return p == GB_PREC_FP16 || p == GB_PREC_BF16 ? 64 : 32;
}

typedef struct gb_step_problem {
    gb_model_t *m;
    float *params, *buffers, *images;
    int32_t labels[GB_STEP_BATCH];
} gb_step_problem_t;

static inline void gb_step_problem_init(gb_step_problem_t *pb, int image) {
    pb->m = gb_gpu_tiny_model(image, GB_STEP_CLASSES);
    pb->params = malloc(pb->m->n_params * 4);
    pb->buffers = malloc(pb->m->n_buffers * 4);
    pb->images = malloc((size_t)GB_STEP_BATCH * 3 * image * image * 4);
    CHECK(pb->params && pb->buffers && pb->images);
    gb_gpu_conditioned_state(pb->m, pb->params, pb->buffers, GB_STEP_SEED);
    gb_model_synth_batch(pb->m, GB_STEP_BATCH, 3, pb->images, pb->labels);
}

static inline void gb_step_problem_free(gb_step_problem_t *pb) {
    free(pb->params);
    free(pb->buffers);
    free(pb->images);
    gb_model_destroy(&pb->m);
}

/* GB_TEST_PRECS: the precisions (a comma-separated list of fp32, tf32,
 * fp16, bf16) that the GPU tests' precision loops keep; unset or empty: all
 * four. bench/gpu's fp32any section wants the fp32 lines alone (the whole
 * tests took up to 200 s of a GPU session for them). A name it does not
 * know stops the test: a typo must not pass for "none". */
static inline int gb_test_prec_wanted(gb_precision_t p) {
    const char *e = getenv("GB_TEST_PRECS");
    if (!e || !e[0]) return 1;
    int want = 0;
    for (const char *s = e;;) {
        size_t n = strcspn(s, ",");
        int known = 0;
        for (int q = GB_PREC_FP32; q <= GB_PREC_BF16; q++) {
            const char *name = gb_prec_str((gb_precision_t)q);
            if (strlen(name) == n && strncmp(s, name, n) == 0) {
                known = 1;
                want |= q == (int)p;
            }
        }
        CHECKF(known, "GB_TEST_PRECS=%s: '%.*s' is not fp32, tf32, fp16 or bf16", e, (int)n, s);
        if (!s[n]) break;
        s += n + 1;
    }
    return want;
}

/* GB_TEST_QUICK set and not "0" (compute-sanitizer runs) */
static inline int gb_test_quick(void) {
    const char *q = getenv("GB_TEST_QUICK");
    return q && q[0] && strcmp(q, "0") != 0;
}

typedef struct gb_rule_run {
    double loss[GB_RULE_MAX_STEPS];
    int skipped[GB_RULE_MAX_STEPS];
    float *grads, *params, *buffers;
    char *details;
} gb_rule_run_t;

/* images NULL: the backend's own synthetic batch */
static inline void gb_rule_train(const gb_backend_ops_t *ops, const gb_model_t *m,
                                 const gb_train_config_t *cfg, const float *params,
                                 const float *buffers, const float *images, const int32_t *labels,
                                 int steps, gb_rule_run_t *out) {
    char err[GB_ERR_LEN];
    void *st = NULL;
    CHECK(steps <= GB_RULE_MAX_STEPS);
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

static inline void gb_rule_free(gb_rule_run_t *r) {
    free(r->grads);
    free(r->params);
    free(r->buffers);
    free(r->details);
}

/* One tensor's relative L2 error ||x - y|| / max(||y||, floor) (Inf with a
 * non-finite value); over its bound the worst pairs are printed. floor is 0
 * except for batch-norm bias gradients (see gb_step_rule). */
typedef struct gb_rule_errs {
    double *e;
    int n, worst;
    char worst_name[GB_NAME_LEN + 64];
} gb_rule_errs_t;

static inline void gb_rule_one(gb_rule_errs_t *E, const char *nm, const double *x, const double *y,
                               size_t n, double floor, double bound) {
    gb_cmp_t c;
    gb_cmp_f64(x, y, n, 0.0, bound, &c);
    double de = 0, dy = 0;
    for (size_t i = 0; i < n; i++) {
        de += (x[i] - y[i]) * (x[i] - y[i]);
        dy += y[i] * y[i];
    }
    double den = fmax(sqrt(dy), floor);
    double e = c.n_nonfinite ? INFINITY : den > 0 ? sqrt(de) / den : (de > 0 ? INFINITY : 0);
    if (!(e <= bound)) {
        fprintf(stderr, "  over  %-40s rel_l2 %.3e (bound %.1e%s)%s\n", nm, e, bound,
                floor > 0 ? ", floor: its weight's gradient" : "",
                c.n_nonfinite ? ", not finite" : "");
        gb_cmp_print(stderr, "        ", &c);
    }
    if (E->n == 0 || !(e <= E->e[E->worst])) {
        E->worst = E->n;
        snprintf(E->worst_name, sizeof(E->worst_name), "%s", nm);
    }
    E->e[E->n++] = e;
}

/* ||ref gradient|| of the batch-norm weight beside bias tensor t */
static inline double gb_rule_bn_weight_grad_norm(const gb_model_t *m, int t, const float *grads) {
    char want[GB_NAME_LEN];
    const char *name = m->tensors[t].name;
    size_t L = strlen(name);
    if (L < 5 || strcmp(name + L - 5, ".bias") != 0 || L + 2 >= sizeof(want)) return 0;
    snprintf(want, sizeof(want), "%.*s.weight", (int)(L - 5), name);
    for (int w = 0; w < m->n_tensors; w++) {
        const gb_tensor_info_t *ti = &m->tensors[w];
        if (ti->role != GB_ROLE_BN_W || strcmp(ti->name, want) != 0) continue;
        double s = 0;
        for (size_t i = 0; i < ti->numel; i++)
            s += (double)grads[ti->offset + i] * grads[ti->offset + i];
        return sqrt(s);
    }
    return 0;
}

static inline int gb_rule_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Run a against ref, started from the parameters `before`: the loss of
 * each step within tol; by kind (gradients, the update each parameter took
 * (after - before: a wrong weight-decay or momentum term hides inside a
 * value, not inside an update), buffers) the median tensor within tol and
 * every tensor within worst_tol (this header's opening comment says why).
 * A batch-norm bias gradient is the sum of its channel's dy, and where every
 * value of the channel passes the ReLU after it, that sum is exactly zero
 * (each consumer is a convolution followed by batch norm, whose input
 * gradient sums to zero per channel): there relative error is rounding over
 * zero. Its error is measured against the larger of its own norm and its
 * weight's gradient, the same dy summed with x-hat (~1) as weights. One line
 * per run gives the margins either way; the number of broken bounds is
 * returned. */
static inline int gb_step_rule(const char *tag, const gb_model_t *m, const gb_rule_run_t *a,
                               const gb_rule_run_t *ref, const float *before, int steps, double tol,
                               double worst_tol) {
    size_t big = m->n_params > m->n_buffers ? m->n_params : m->n_buffers;
    double *x = malloc(big * 8), *y = malloc(big * 8);
    enum { LOSS, GRAD, UPDATE, BUFFER, KINDS };
    static const char *kind[KINDS] = {"losses", "gradients", "updates", "buffers"};
    gb_rule_errs_t E[KINDS];
    int bad = 0;
    CHECK(x && y);
    for (int k = 0; k < KINDS; k++) {
        E[k] = (gb_rule_errs_t){malloc(((size_t)steps + (size_t)m->n_tensors) * sizeof(double)), 0,
                                0, ""};
        CHECK(E[k].e);
    }
    char nm[GB_NAME_LEN + 64];
    for (int s = 0; s < steps; s++) {
        snprintf(nm, sizeof(nm), "loss[%d]", s);
        gb_rule_one(&E[LOSS], nm, &a->loss[s], &ref->loss[s], 1, 0, tol);
    }
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (ti->is_param) {
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = a->grads[ti->offset + i];
                y[i] = ref->grads[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "grad %s", ti->name);
            double floor =
                ti->role == GB_ROLE_BN_B ? gb_rule_bn_weight_grad_norm(m, t, ref->grads) : 0;
            gb_rule_one(&E[GRAD], nm, x, y, ti->numel, floor, worst_tol);
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = (double)a->params[ti->offset + i] - before[ti->offset + i];
                y[i] = (double)ref->params[ti->offset + i] - before[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "update %s", ti->name);
            gb_rule_one(&E[UPDATE], nm, x, y, ti->numel, 0, worst_tol);
        } else {
            for (size_t i = 0; i < ti->numel; i++) {
                x[i] = a->buffers[ti->offset + i];
                y[i] = ref->buffers[ti->offset + i];
            }
            snprintf(nm, sizeof(nm), "buffer %s", ti->name);
            gb_rule_one(&E[BUFFER], nm, x, y, ti->numel, 0, worst_tol);
        }
    }
    char line[1024];
    int at = snprintf(line, sizeof(line), "%s:", tag);
    for (int k = 0; k < KINDS; k++) {
        gb_rule_errs_t *K = &E[k];
        if (K->n == 0) continue;
        double worst = K->e[K->worst], bound = k == LOSS ? tol : worst_tol;
        int over = 0;
        for (int i = 0; i < K->n; i++)
            over += !(K->e[i] <= bound); /* NaN and Inf count */
        qsort(K->e, (size_t)K->n, sizeof(double), gb_rule_cmp_double);
        double median = K->e[K->n / 2];
        int kbad = over + !(median <= tol);
        bad += kbad;
        if (at < (int)sizeof(line))
            at += snprintf(line + at, sizeof(line) - (size_t)at,
                           "%s %d %s median %.2e worst %.2e (%s)%s", k ? ";" : "", K->n, kind[k],
                           median, worst, K->worst_name, kbad ? " OFF" : "");
        free(K->e);
    }
    printf("%s; bounds: median %.1e, every tensor %.1e: %s\n", line, tol, worst_tol,
           bad ? "FAIL" : "ok");
    free(x);
    free(y);
    return bad;
}

#endif
