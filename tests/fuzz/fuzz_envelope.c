/* fuzz_envelope.c - libFuzzer target: envelope decoding and validation
 * (gb_wire_decode), the first thing every received frame goes through.
 * Properties beyond "no crash, no leak, no UB": an accepted envelope packs
 * again and the packed bytes decode to an accepted envelope with the same
 * body and seq; the reject code of a refusal is a known one. */
#include "gb_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Gb__Envelope *env = NULL;
    uint64_t seq = 0;
    char why[512];
    int code = gb_wire_decode(data, size, GB_WIRE_MAX_FRAME, &env, &seq, why, sizeof why);
    if (code != 0) {
        ASSERT(env == NULL);
        ASSERT(gb_wire_reject_code_ok(code));
        ASSERT(strlen(why) < sizeof why);
        return 0;
    }
    ASSERT(env && env->version == GB_PROTOCOL_VERSION && seq == env->seq);
    (void)gb_wire_body_name(env->body_case);
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(env, &len);
    ASSERT(buf);
    Gb__Envelope *again = NULL;
    uint64_t seq2 = 0;
    int code2 = gb_wire_decode(buf, len, (size_t)-1, &again, &seq2, why, sizeof why);
    ASSERT(code2 == 0);
    ASSERT(again->body_case == env->body_case && again->seq == env->seq);
    gb_wire_free(&again);
    free(buf);
    gb_wire_free(&env);
    ASSERT(env == NULL);
    return 0;
}
