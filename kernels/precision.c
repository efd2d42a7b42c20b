/* precision.c - the precisions' names (engine.h), in gb_model so that every
 * build with the model has them: the backends name their precision in
 * errors, and the GPU machine's build (bench/gpu) has no engine driver. */
#include "engine.h"

#include <string.h>

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
