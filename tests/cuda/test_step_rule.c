/* test_step_rule.c (CPU) - the whole-step rule the GPU tests apply
 * (step_rule.h), held against the CPU engine here, where CI runs it: from
 * the conditioned state, 3 fp32 steps of the CPU engine (oneDNN and our
 * Winograd) at 1 and 2 threads on 8 batches pass the rule against the
 * double twin that the CUDA backend is judged by, and the rule catches
 * faults that touch one kind of tensor first: a weight decay, a learning
 * rate and a momentum each 0.1% off (5 times the fp32 median bound in the
 * updates), and one label changed. And GB_TEST_PRECS, the GPU tests'
 * choice of precisions, read as they read it. */
#define _POSIX_C_SOURCE 200809L
#include "host_exec.h"
#include "step_rule.h"

#include <sys/wait.h>
#include <unistd.h>

extern const gb_backend_ops_t gb_cpu_backend_ops;

enum { BATCH = 4, IMAGE = 32, CLASSES = 10, STEPS = 3, BATCHES = 8 };

/* GB_TEST_PRECS as the GPU tests read it (bench/gpu's fp32any section) */
static void check_precs(void) {
    const char *cases[][2] = {{"", "1111"},          {"fp32", "1000"},      {"fp16,bf16", "0011"},
                              {"bf16,fp32", "1001"}, {"tf32,tf32", "0100"}, {NULL, "1111"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i][0])
            setenv("GB_TEST_PRECS", cases[i][0], 1);
        else
            unsetenv("GB_TEST_PRECS");
        for (int p = GB_PREC_FP32; p <= GB_PREC_BF16; p++)
            CHECKF(gb_test_prec_wanted((gb_precision_t)p) == (cases[i][1][p] == '1'),
                   "GB_TEST_PRECS=%s: %s", cases[i][0] ? cases[i][0] : "(unset)",
                   gb_prec_str((gb_precision_t)p));
    }
    /* a name it does not know stops the test (a typo is not "none") */
    const char *bad[] = {"fp33", "fp32,fp8", "FP32", "fp32 ", "tf32,", ","};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            setenv("GB_TEST_PRECS", bad[i], 1);
            (void)!freopen("/dev/null", "w", stderr);
            gb_test_prec_wanted(GB_PREC_FP32);
            _exit(0);
        }
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "GB_TEST_PRECS=%s was taken", bad[i]);
    }
    unsetenv("GB_TEST_PRECS");
}

int main(void) {
    check_precs();
    gb_model_t *m = gb_gpu_tiny_model(IMAGE, CLASSES);
    float *params = malloc(m->n_params * 4), *buffers = malloc(m->n_buffers * 4);
    float *images = malloc((size_t)BATCH * 3 * IMAGE * IMAGE * 4);
    int32_t labels[BATCH];
    CHECK(params && buffers && images);
    gb_gpu_conditioned_state(m, params, buffers, 21);

    gb_train_config_t cfg;
    gb_gpu_step_cfg(&cfg, m, GB_PREC_FP32, BATCH);
    snprintf(cfg.backend, sizeof(cfg.backend), "cpu");
    char err[GB_ERR_LEN];
    void *st = NULL;
    if (gb_cpu_backend_ops.create(m, &cfg, 0, NULL, &st, err, sizeof(err)) != 0) {
        printf("SKIP test_step_rule: the CPU engine: %s\n", err);
        return 77;
    }
    gb_cpu_backend_ops.destroy(&st);

    double tol = gb_step_tol(GB_PREC_FP32), worst = gb_step_worst(GB_PREC_FP32);
    int failures = 0;
    gb_rule_run_t ref0 = {0};
    for (int b = 0; b < BATCHES; b++) {
        gb_model_synth_batch(m, BATCH, 3 + (uint64_t)b, images, labels);
        gb_rule_run_t ref = {0};
        gb_rule_train(&gb_twin_backend_ops, m, &cfg, params, buffers, images, labels, STEPS, &ref);
        for (int threads = 1; threads <= 2; threads++) {
            cfg.threads = threads;
            gb_rule_run_t c = {0};
            gb_rule_train(&gb_cpu_backend_ops, m, &cfg, params, buffers, images, labels, STEPS, &c);
            char tag[64];
            snprintf(tag, sizeof(tag), "batch %d, %d thread%s", b, threads, threads > 1 ? "s" : "");
            failures += gb_step_rule(tag, m, &c, &ref, params, STEPS, tol, worst) != 0;
            gb_rule_free(&c);
        }
        if (b == 0)
            ref0 = ref;
        else
            gb_rule_free(&ref);
    }
    CHECKF(failures == 0, "%d of %d runs broke the rule", failures, 2 * BATCHES);

    /* planted faults, each on the batch of ref0 */
    gb_model_synth_batch(m, BATCH, 3, images, labels);
    cfg.threads = 2;
    struct {
        const char *what;
        float lr, momentum, wd;
        int label;
    } f[] = {
        {"weight decay x1.001", cfg.lr, cfg.momentum, cfg.weight_decay * 1.001f, -1},
        {"learning rate x1.001", cfg.lr * 1.001f, cfg.momentum, cfg.weight_decay, -1},
        {"momentum x1.001", cfg.lr, cfg.momentum * 1.001f, cfg.weight_decay, -1},
        {"one label changed", cfg.lr, cfg.momentum, cfg.weight_decay, 0},
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        gb_train_config_t fc = cfg;
        fc.lr = f[i].lr;
        fc.momentum = f[i].momentum;
        fc.weight_decay = f[i].wd;
        int32_t fl[BATCH];
        memcpy(fl, labels, sizeof(fl));
        if (f[i].label >= 0) fl[f[i].label] = (fl[f[i].label] + 1) % CLASSES;
        gb_rule_run_t c = {0};
        gb_rule_train(&gb_cpu_backend_ops, m, &fc, params, buffers, images, fl, STEPS, &c);
        char tag[64];
        snprintf(tag, sizeof(tag), "planted: %s", f[i].what);
        int bad = gb_step_rule(tag, m, &c, &ref0, params, STEPS, tol, worst);
        CHECKF(bad > 0, "the rule missed a planted fault: %s", f[i].what);
        gb_rule_free(&c);
    }
    gb_rule_free(&ref0);
    free(params);
    free(buffers);
    free(images);
    gb_model_destroy(&m);
    printf("test_step_rule: ok\n");
    return 0;
}
