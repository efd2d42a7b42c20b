/* test_half_bounds.c (CPU) - the fp16 and bf16 bounds of test_cuda_step's
 * whole steps, held against what 16-bit storage alone does to the same
 * problem: half_emu.py runs its steps in float64 with every stored tensor
 * rounded to fp16 or bf16, and must clear gb_step_tol / gb_step_worst by a
 * factor of 2 on the 64x64 problem the GPU test uses for them, and so must
 * the fused step's storage (GB_CUDA_FUSE=1). The 32x32
 * problem (fp32 and tf32's) must not: there the first GPU run's fp16 and
 * bf16 steps failed, and this says why they moved (step_rule.h). Needs
 * /usr/bin/python3 with torch and torchvision, as test_cuda_twin. */
#define _POSIX_C_SOURCE 200809L
#include "host_exec.h"
#include "step_rule.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* half_emu.py's exit status on the problem at `image` */
static int emulate(int image) {
    gb_step_problem_t pb;
    gb_step_problem_init(&pb, image);
    gb_train_config_t cfg;
    gb_gpu_step_cfg(&cfg, pb.m, GB_PREC_FP32, GB_STEP_BATCH);
    char dir[] = "/tmp/gb_half_XXXXXX", in[64], cmd[768];
    CHECK(mkdtemp(dir));
    snprintf(in, sizeof(in), "%s/in.bin", dir);
    CHECK(gb_twin_write_input(in, pb.m, &cfg, 3, pb.params, pb.buffers, pb.images, pb.labels) == 0);
    /* fp16fused, bf16fused: the fused step's storage (GB_CUDA_FUSE=1), held
     * to the precision's bounds as test_cuda_step holds it */
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 %s %s fp16:%g:%g bf16:%g:%g fp16fused:%g:%g bf16fused:%g:%g",
             GB_HALF_EMU, in, gb_step_tol(GB_PREC_FP16), gb_step_worst(GB_PREC_FP16),
             gb_step_tol(GB_PREC_BF16), gb_step_worst(GB_PREC_BF16), gb_step_tol(GB_PREC_FP16),
             gb_step_worst(GB_PREC_FP16), gb_step_tol(GB_PREC_BF16), gb_step_worst(GB_PREC_BF16));
    printf("%dx%d: %s\n", image, image, cmd);
    fflush(stdout);
    int rc = system(cmd);
    unlink(in);
    rmdir(dir);
    gb_step_problem_free(&pb);
    CHECKF(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) <= 1,
           "'%s' did not run (%d): needs python3-torch and python3-torchvision", cmd, rc);
    return WEXITSTATUS(rc);
}

int main(void) {
    CHECK(gb_step_image(GB_PREC_FP16) == 64 && gb_step_image(GB_PREC_BF16) == 64);
    CHECKF(emulate(gb_step_image(GB_PREC_FP16)) == 0,
           "16-bit storage alone does not clear the fp16/bf16 bounds by 2 at 64x64");
    CHECKF(emulate(gb_step_image(GB_PREC_FP32)) == 1,
           "at 32x32 the bounds were cleared: the reason the half steps moved is gone");
    printf("test_half_bounds: ok\n");
    return 0;
}
