/* test_cuda_step.c (GPU, label gpu) - whole training steps of the CUDA
 * backend, through gb_backend_ops_t, against the host twin in double (and
 * against the CPU engine when it is linked: GB_HAVE_CPU_BACKEND): loss of
 * each step, every gradient, every parameter update and running statistic,
 * with the step captured in a CUDA graph after the first; fp16 overflow
 * skips the update and halves the scale; synthetic data on the device equals
 * the host generator; probe and gemm work. Tolerances and the rule:
 * step_rule.h.
 * GB_TEST_QUICK=1 runs two configurations only (for compute-sanitizer);
 * GB_TEST_PRECS (step_rule.h) keeps the named precisions' runs alone. */
#define _POSIX_C_SOURCE 200809L
#include "gpu_common.h"
#include "host_exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const gb_backend_ops_t gb_cuda_backend_ops;
#ifdef GB_HAVE_CPU_BACKEND
extern const gb_backend_ops_t gb_cpu_backend_ops;
#endif

enum { BATCH = GB_STEP_BATCH, CLASSES = GB_STEP_CLASSES, STEPS = 3 };

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut short keeps its lines */
    gb_skip_without_gpu("test_cuda_step");
    const gb_backend_ops_t *cu = &gb_cuda_backend_ops, *tw = &gb_twin_backend_ops;
    char err[GB_ERR_LEN];
    gb_backend_info_t info;
    CHECKF(cu->probe(&info, err, sizeof(err)) == 0, "%s", err);
    printf("GPU %s x%d %s\n", info.device_model, info.device_count, info.versions);

    /* fp32 and tf32 at 32x32, fp16 and bf16 at 64x64 (step_rule.h says why),
     * each with its own reference run of the twin */
    gb_step_problem_t full, half;
    gb_step_problem_init(&full, gb_step_image(GB_PREC_FP32));
    gb_step_problem_init(&half, gb_step_image(GB_PREC_FP16));
    gb_model_t *m = full.m;
    float *params = full.params, *buffers = full.buffers, *images = full.images;
    int32_t *labels = full.labels;
    gb_rule_run_t ref = {0}, ref_half = {0};
    {
        gb_train_config_t tcfg;
        gb_gpu_step_cfg(&tcfg, full.m, GB_PREC_FP32, BATCH);
        gb_rule_train(tw, full.m, &tcfg, full.params, full.buffers, full.images, full.labels, STEPS,
                      &ref);
        /* the 64x64 reference only for a precision that is judged by it */
        if (gb_test_prec_wanted(GB_PREC_FP16) || gb_test_prec_wanted(GB_PREC_BF16)) {
            gb_gpu_step_cfg(&tcfg, half.m, GB_PREC_FP32, BATCH);
            gb_rule_train(tw, half.m, &tcfg, half.params, half.buffers, half.images, half.labels,
                          STEPS, &ref_half);
        }
    }

    int failures = 0, ran = 0; /* ran: whole-step configurations compared */
    /* fp16 starts at a scale this tiny model does not overflow (dlogits
     * reach 64 / batch; the default 65536 would skip the first steps) */
    setenv("GB_CUDA_LOSS_SCALE", "64", 1);
    const char *impls[2] = {"cudnn", "own"};
    /* GB_TEST_QUICK=1 (compute-sanitizer runs): one precision per BN impl */
    int quick = gb_test_quick();
    for (int b = 0; b < 2; b++)
        for (int p = GB_PREC_FP32; p <= GB_PREC_BF16; p++) {
            if (quick && p != (b == 0 ? GB_PREC_FP16 : GB_PREC_FP32)) continue;
            if (!gb_test_prec_wanted((gb_precision_t)p)) continue;
            ran++;
            setenv("GB_CUDA_BN", impls[b], 1);
            const gb_step_problem_t *pb = gb_step_image((gb_precision_t)p) == 64 ? &half : &full;
            const gb_rule_run_t *pref = pb == &half ? &ref_half : &ref;
            gb_train_config_t cfg;
            gb_gpu_step_cfg(&cfg, pb->m, (gb_precision_t)p, BATCH);
            gb_rule_run_t r = {0};
            gb_rule_train(cu, pb->m, &cfg, pb->params, pb->buffers, pb->images, pb->labels, STEPS,
                          &r);
            for (int s = 0; s < STEPS; s++)
                CHECKF(!r.skipped[s], "step %d skipped", s);
            char tag[32];
            snprintf(tag, sizeof(tag), "%s/%s", impls[b], gb_prec_str((gb_precision_t)p));
            int bad =
                gb_step_rule(tag, pb->m, &r, pref, pb->params, STEPS,
                             gb_step_tol((gb_precision_t)p), gb_step_worst((gb_precision_t)p));
            printf("%s: %d tensors off; %.400s\n", tag, bad, r.details);
            failures += bad;
            /* steps 2 and 3 ran as a captured graph */
            if (!strstr(r.details, "\"cuda_graph\":true")) {
                printf("%s: the step was not captured: %.300s\n", tag, r.details);
                failures++;
            }
            gb_rule_free(&r);
        }
    unsetenv("GB_CUDA_BN");

#ifdef GB_HAVE_CPU_BACKEND
    if (!quick) {
        gb_rule_run_t c = {0}, g = {0};
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
            gb_rule_train(&gb_cpu_backend_ops, m, &cfg, params, buffers, images, labels, STEPS, &c);
            snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
            gb_rule_train(cu, m, &cfg, params, buffers, images, labels, STEPS, &g);
            /* two fp32 engines, each held to the bounds against double:
             * twice them apart */
            failures +=
                gb_step_rule("cuda-vs-cpu fp32", m, &g, &c, params, STEPS,
                             2 * gb_step_tol(GB_PREC_FP32), 2 * gb_step_worst(GB_PREC_FP32));
            gb_rule_free(&c);
            gb_rule_free(&g);
        }
    }
#endif

    /* fp16 overflow: at 2^100 every scaled gradient is inf; the update is
     * skipped, parameters stay, the scale halves */
    {
        setenv("GB_CUDA_LOSS_SCALE", "1267650600228229401496703205376", 1);
        gb_train_config_t cfg;
        gb_gpu_cfg(&cfg, m, GB_PREC_FP16, BATCH);
        gb_rule_run_t r = {0};
        gb_rule_train(cu, m, &cfg, params, buffers, images, labels, 1, &r);
        CHECKF(r.skipped[0] == 1, "overflow not detected");
        CHECK(memcmp(r.params, params, m->n_params * 4) == 0);
        CHECKF(strstr(r.details, "\"loss_scale\":6.33825e+29"), "%.200s", r.details);
        gb_rule_free(&r);
        setenv("GB_CUDA_LOSS_SCALE", "3", 1);
        void *st = NULL;
        CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == -1 &&
              strstr(err, "power of two"));
        unsetenv("GB_CUDA_LOSS_SCALE");
        /* the fp32 algorithm knob takes fma or any (run.sh sets any), else
         * refuses, whatever the precision; its value is put back */
        const char *was = getenv("GB_CUDA_FP32_ALGOS");
        char *keep = was ? strdup(was) : NULL;
        setenv("GB_CUDA_FP32_ALGOS", "winograd", 1);
        CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == -1 &&
              strstr(err, "GB_CUDA_FP32_ALGOS=winograd: fma (the default) or any"));
        setenv("GB_CUDA_BN", "both", 1);
        CHECK(cu->create(m, &cfg, 0, NULL, &st, err, sizeof(err)) == -1 &&
              strstr(err, "GB_CUDA_BN=both: own or cudnn"));
        unsetenv("GB_CUDA_BN");
        if (keep)
            setenv("GB_CUDA_FP32_ALGOS", keep, 1);
        else
            unsetenv("GB_CUDA_FP32_ALGOS");
        free(keep);
    }
    /* synthetic batch drawn on the device equals the twin's host draw */
    {
        gb_rule_run_t a = {0}, r = {0};
        gb_train_config_t cfg;
        gb_gpu_step_cfg(&cfg, m, GB_PREC_FP32, BATCH);
        gb_rule_train(cu, m, &cfg, params, buffers, NULL, NULL, 1, &a);
        gb_rule_train(tw, m, &cfg, params, buffers, NULL, NULL, 1, &r);
        failures += gb_step_rule("synthetic fp32", m, &a, &r, params, 1, gb_step_tol(GB_PREC_FP32),
                                 gb_step_worst(GB_PREC_FP32));
        gb_rule_free(&a);
        gb_rule_free(&r);
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
    /* the matrix-rate probe in every precision (each checks 16 entries
     * against double after timing, and fails past its bound) */
    for (int p = GB_PREC_FP32; p <= GB_PREC_BF16; p++) {
        double ms = 0, p90 = 0, gf = 0;
        int64_t win[2] = {0, 0};
        CHECKF(cu->gemm(0, (gb_precision_t)p, 1024, 1024, 1024, 5, &ms, &p90, &gf, win, err,
                        sizeof(err)) == 0,
               "gemm %s: %s", gb_precision_name((gb_precision_t)p), err);
        CHECK(win[0] > 0 && win[1] >= win[0]);
        CHECK(ms > 0 && gf > 0 && p90 >= ms);
        printf("gemm %s 1024^3: %.3f ms, %.0f GFLOP/s\n", gb_precision_name((gb_precision_t)p), ms,
               gf);
    }
    {
        double ms = 0, gf = 0;
        CHECK(cu->gemm(0, GB_PREC_FP32, 0, 1, 1, 1, &ms, NULL, &gf, NULL, err, sizeof(err)) == -1);
        CHECK(cu->gemm(0, (gb_precision_t)9, 64, 64, 64, 1, &ms, NULL, &gf, NULL, err,
                       sizeof(err)) == -1 &&
              strstr(err, "unknown precision"));
    }
    /* the fused step (GB_CUDA_FUSE=1): fp16 and bf16 whole steps against the
     * twin running the fused wiring (cuda_twin_fused holds that to PyTorch;
     * cuda_half_bounds derives the bounds for its storage). fp16 must be on
     * where cuDNN documents the patterns (sm_80, sm_90); bf16 is tried.
     * Last: planning its graphs may compile them (minutes), and a timeout
     * there must not take the verdicts above with it */
    if (!quick && (gb_test_prec_wanted(GB_PREC_FP16) || gb_test_prec_wanted(GB_PREC_BF16))) {
        setenv("GB_CUDA_FUSE", "1", 1);
        setenv("GB_CUDA_LOSS_SCALE", "64", 1); /* as above */
        gb_rule_run_t fref = {0};
        gb_train_config_t cfg;
        gb_gpu_step_cfg(&cfg, half.m, GB_PREC_FP32, BATCH);
        gb_rule_train(tw, half.m, &cfg, half.params, half.buffers, half.images, half.labels, STEPS,
                      &fref);
        int major, minor, documented = gb_fused_documented(&major, &minor);
        const gb_precision_t fp[2] = {GB_PREC_FP16, GB_PREC_BF16};
        for (int k = 0; k < 2; k++) {
            if (!gb_test_prec_wanted(fp[k])) continue;
            ran++;
            gb_rule_run_t r = {0};
            char tag[32];
            snprintf(tag, sizeof(tag), "fused/%s", gb_prec_str(fp[k]));
            gb_gpu_step_cfg(&cfg, half.m, fp[k], BATCH);
            gb_rule_train(cu, half.m, &cfg, half.params, half.buffers, half.images, half.labels,
                          STEPS, &r);
            if (strstr(r.details, "\"fused_step\":true")) {
                int bad = gb_step_rule(tag, half.m, &r, &fref, half.params, STEPS,
                                       gb_step_tol(fp[k]), gb_step_worst(fp[k]));
                printf("%s: %d tensors off; %.400s\n", tag, bad, r.details);
                failures += bad;
                if (!strstr(r.details, "\"cuda_graph\":true")) {
                    printf("%s: the step was not captured: %.300s\n", tag, r.details);
                    failures++;
                }
            } else {
                const char *note = strstr(r.details, "\"fused_note\"");
                printf("%s: the fused step is off on sm_%d%d: %.300s\n", tag, major, minor,
                       note ? note : r.details);
                failures += documented && fp[k] == GB_PREC_FP16;
            }
            gb_rule_free(&r);
        }
        gb_rule_free(&fref);
        unsetenv("GB_CUDA_FUSE");
        unsetenv("GB_CUDA_LOSS_SCALE");
    }

    gb_rule_free(&ref);
    gb_rule_free(&ref_half);
    gb_step_problem_free(&full);
    gb_step_problem_free(&half);
    CHECKF(failures == 0, "%d comparisons failed", failures);
    /* GB_TEST_QUICK with GB_TEST_PRECS=tf32 (or bf16) compares nothing */
    const char *precs = getenv("GB_TEST_PRECS");
    CHECKF(ran > 0, "GB_TEST_PRECS=%s%s: no whole-step configuration was compared",
           precs ? precs : "(unset)", quick ? " with GB_TEST_QUICK" : "");
    return 0;
}
