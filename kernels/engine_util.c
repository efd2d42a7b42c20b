/* engine_util.c - what the engine driver and the backends share (engine.h),
 * in gb_model so that every build with the model has it, the GPU machine's
 * (bench/gpu, no engine driver) and libgpubench_cuda.so included: the
 * precisions' names and the wall clock of the timed windows. */
#define _POSIX_C_SOURCE 200809L
#include "engine.h"

#include <string.h>
#include <time.h>

int64_t gb_engine_wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const char *const prec_names[] = {"fp32", "tf32", "fp16", "bf16"};

const char *gb_precision_name(gb_precision_t p) {
    return (unsigned)p < 4 ? prec_names[p] : "?";
}

int gb_precision_parse(const char *s, gb_precision_t *out) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, prec_names[i]) == 0) {
            *out = (gb_precision_t)i;
            return 0;
        }
    }
    return -1;
}
