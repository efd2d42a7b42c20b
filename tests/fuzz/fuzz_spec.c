/* fuzz_spec.c - libFuzzer target: sweep-spec parsing and expansion
 * (gb_spec_parse), which runs on every submit. Properties: a refusal says
 * why; an accepted spec makes 1..max jobs, and each job's canonical JSON
 * parses back (gb_jobdef_from_json) to the same canonical JSON. */
#include "gb_spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

#define MAX_JOBS   1000 /* smaller than the default cap: each input stays fast */
#define ROUNDTRIPS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gb_sweep_def_t def;
    char err[1024];
    if (gb_spec_parse((const char *)data, size, MAX_JOBS, &def, err, sizeof err) != 0) {
        ASSERT(err[0] != '\0');
        return 0;
    }
    ASSERT(def.n_jobs >= 1 && def.n_jobs <= MAX_JOBS && def.jobs);
    for (size_t i = 0; i < def.n_jobs && i < ROUNDTRIPS; i++) {
        char *j1 = gb_jobdef_to_json(&def.jobs[i]);
        ASSERT(j1);
        gb_jobdef_t back;
        ASSERT(gb_jobdef_from_json(j1, strlen(j1), &back, err, sizeof err) == 0);
        char *j2 = gb_jobdef_to_json(&back);
        ASSERT(j2 && strcmp(j1, j2) == 0);
        free(j1);
        free(j2);
    }
    gb_sweep_def_free(&def);
    return 0;
}
