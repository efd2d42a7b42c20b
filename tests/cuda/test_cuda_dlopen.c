/* test_cuda_dlopen.c - libgpubench_cuda.so loads with dlopen wherever the
 * CUDA libraries are installed, exports only gb_cuda_backend_ops, and on a
 * machine without a driver or GPU every entry point fails with "no CUDA
 * driver/GPU" instead of crashing; with a GPU, probe names it. A wrong
 * GB_CUDA_STEM_C is refused by create on either. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "engine.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ops->create of a ResNet-50 (64x64, batch 2) at prec must fail, with no
 * state left; its reason in err, the model in *m (the caller frees it) */
static void create_fails(const gb_backend_ops_t *ops, gb_precision_t prec, gb_model_t **m,
                         char *err, size_t errlen) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, 64);
    *m = gb_model_new(&mc, err, errlen);
    CHECK(*m);
    gb_train_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.precision = prec;
    cfg.model = mc;
    cfg.batch = 2;
    void *st = (void *)1;
    err[0] = 0;
    CHECK(ops->create(*m, &cfg, 0, NULL, &st, err, errlen) == -1 && st == NULL);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECKF(h, "dlopen: %s", dlerror());
    const gb_backend_ops_t *ops = dlsym(h, "gb_cuda_backend_ops");
    CHECKF(ops, "dlsym: %s", dlerror());
    CHECK(ops->abi == GB_BACKEND_ABI && strcmp(ops->name, "cuda") == 0);
    CHECK(ops->probe && ops->create && ops->step && ops->destroy && ops->gemm);
    /* internals stay hidden */
    CHECK(dlsym(h, "gb_cuda_exec_new") == NULL && dlsym(h, "gb_model_new") == NULL);
    CHECK(dlsym(h, "gb_k_sgd") == NULL && dlsym(h, "gb_plan_new") == NULL);

    gb_backend_info_t info;
    char err[GB_ERR_LEN] = "";
    int rc = ops->probe(&info, err, sizeof(err));
    CHECKF(strstr(info.versions, "\"cudnn\":\"9.") && strstr(info.versions, "\"nccl\":\"2."),
           "versions %s", info.versions);
    /* tests/cuda/old_driver.sh: a driver that supports only CUDA 12.4 */
    const char *old = getenv("GB_EXPECT_OLD_DRIVER");
    const char *want = old && old[0] == '1' ? "NVIDIA driver too old" : "no CUDA driver/GPU";
    if (old && old[0] == '1') {
        CHECKF(rc != 0 && strstr(err, "supports CUDA 12.4") && strstr(err, "CUDA 13."),
               "probe said: %s", err);
        CHECKF(strstr(info.versions, "\"driver\":\"12.4\""), "versions %s", info.versions);
    }
    if (rc != 0) {
        CHECKF(strstr(err, want), "probe said: %s", err);
        /* no driver at all: said so, not as one too old */
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!drv && !(old && old[0] == '1'))
            CHECKF(strstr(err, "no NVIDIA driver is installed here"), "probe said: %s", err);
        if (drv) dlclose(drv);
        printf("no GPU here, as expected of CI: probe: %s; versions %s\n", err, info.versions);
        gb_model_t *m = NULL;
        create_fails(ops, GB_PREC_FP16, &m, err, sizeof(err));
        CHECKF(strstr(err, want), "create said: %s", err);
        double ms = 0, gf = 0;
        err[0] = 0;
        CHECK(ops->gemm(0, GB_PREC_FP16, 64, 64, 64, 3, &ms, NULL, &gf, NULL, err, sizeof(err)) ==
              -1);
        CHECKF(strstr(err, want), "gemm said: %s", err);
        gb_model_destroy(&m);
    } else {
        CHECK(info.device_count >= 1 && info.device_model[0]);
        printf("GPU: %s x%d, versions %s\n", info.device_model, info.device_count, info.versions);
    }
    /* a wrong GB_CUDA_STEM_C or GB_CUDA_FUSE is refused before any GPU is
     * touched, GPU or not */
    {
        gb_model_t *m = NULL;
        setenv("GB_CUDA_STEM_C", "5", 1);
        create_fails(ops, GB_PREC_BF16, &m, err, sizeof(err));
        CHECKF(strstr(err, "GB_CUDA_STEM_C=5: 4 or 8"), "create said: %s", err);
        unsetenv("GB_CUDA_STEM_C");
        gb_model_destroy(&m);
        setenv("GB_CUDA_FUSE", "yes", 1);
        create_fails(ops, GB_PREC_FP16, &m, err, sizeof(err));
        CHECKF(strstr(err, "GB_CUDA_FUSE=yes: 0 or 1"), "create said: %s", err);
        unsetenv("GB_CUDA_FUSE");
        gb_model_destroy(&m);
    }
    dlclose(h);
    return 0;
}
