/* fuzz_record.c - libFuzzer target: result-record validation
 * (gb_record_parse), which runs on every Result an agent sends. The first
 * byte picks the job's kind, the rest is the record. Properties: a refusal
 * says why and owns nothing; an accepted record has finite, non-negative
 * figures and sample arrays of the announced length. */
#include "record.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int figure_ok(double v) {
    return isnan(v) || (isfinite(v) && v >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const kinds[] = {"resnet50", "gemm", "sleep"};
    if (size < 1) return 0;
    const char *kind = kinds[data[0] % 3];
    gb_record_t r;
    char err[512];
    if (gb_record_parse((const char *)data + 1, size - 1, kind, &r, err, sizeof err) != 0) {
        ASSERT(err[0] != '\0');
        ASSERT(r.root == NULL && r.step_ms == NULL && r.loss == NULL);
        return 0;
    }
    ASSERT(figure_ok(r.images_per_sec) && figure_ok(r.step_ms_median) && figure_ok(r.step_ms_p90) &&
           figure_ok(r.gflops));
    ASSERT(r.valid >= -1 && r.valid <= 1);
    ASSERT(r.n_devices >= -1 && r.n_devices <= 65536);
    ASSERT(r.n_samples <= GB_RECORD_MAX_SAMPLES);
    ASSERT((r.n_samples == 0) == (r.step_ms == NULL));
    for (size_t i = 0; i < r.n_samples; i++) {
        ASSERT(isfinite(r.step_ms[i]));
        if (r.loss) ASSERT(isfinite(r.loss[i]));
    }
    gb_record_free(&r);
    return 0;
}
