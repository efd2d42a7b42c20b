/* fuzz_authorized.c - libFuzzer target: the coordinator's authorized-keys
 * file (gb_auth_parse), read at start and on every SIGHUP. Properties:
 * every accepted entry is a valid Z85 key, a name without control
 * characters and one of the three roles, and no key is listed twice; a
 * refusal owns nothing and says which line. */
#include "auth.h"
#include "gb_curve.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gb_auth_entry_t *v = NULL;
    size_t n = 0;
    char err[300];
    if (gb_auth_parse((const char *)data, size, &v, &n, err, sizeof err) != 0) {
        ASSERT(v == NULL && n == 0 && err[0] != '\0');
        return 0;
    }
    ASSERT((n == 0) == (v == NULL));
    for (size_t i = 0; i < n; i++) {
        ASSERT(gb_curve_key_ok(v[i].key));
        for (size_t j = 0; j < i; j++)
            ASSERT(strcmp(v[i].key, v[j].key) != 0);
        for (const char *p = v[i].name; *p; p++)
            ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
        ASSERT(v[i].role == GB_AUTH_ROLE_ANY || v[i].role == GB_AUTH_ROLE_AGENT ||
               v[i].role == GB_AUTH_ROLE_CONTROL);
        /* a role is never taken for a name (nor the other way round) */
        ASSERT(strncmp(v[i].name, "role=", 5) != 0 && !strstr(v[i].name, " role=") &&
               !strstr(v[i].name, "\trole="));
    }
    free(v);
    return 0;
}
