/* test_hwire.c - the wire additions of issue 6 (reject codes 70-72) and
 * log escaping of peers' text; a log record under a progress line.
 *
 *   test_hwire CASE   (reject_codes, log_escape, log_partial_line) */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_log.h"
#include "gb_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int decode_reject(int code) {
    Gb__Reject rej = GB__REJECT__INIT;
    rej.code = (Gb__RejectCode)code;
    rej.reason = "x";
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_REJECT;
    env.reject = &rej;
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(&env, &len);
    CHECK(buf);
    Gb__Envelope *out = NULL;
    uint64_t seq;
    char why[256];
    int rc = gb_wire_decode(buf, len, 1 << 20, &out, &seq, why, sizeof why);
    free(buf);
    gb_wire_free(&out);
    return rc;
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *c = argv[1];
    if (strcmp(c, "reject_codes") == 0) {
        CHECK(decode_reject(GB__REJECT_CODE__REJECT_LIMIT) == 0);
        CHECK(decode_reject(GB__REJECT_CODE__REJECT_RATE) == 0);
        CHECK(decode_reject(GB__REJECT_CODE__REJECT_DENIED) == 0);
        CHECK(decode_reject(GB__REJECT_CODE__REJECT_INTERNAL) == 0);
        /* the gaps stay invalid */
        CHECK(decode_reject(11) == GB__REJECT_CODE__REJECT_RANGE);
        CHECK(decode_reject(69) == GB__REJECT_CODE__REJECT_RANGE);
        CHECK(decode_reject(73) == GB__REJECT_CODE__REJECT_RANGE);
        CHECK(decode_reject(0) == GB__REJECT_CODE__REJECT_RANGE);
        CHECK(strcmp(gb_wire_reject_name(GB__REJECT_CODE__REJECT_LIMIT), "limit") == 0);
        CHECK(strcmp(gb_wire_reject_name(GB__REJECT_CODE__REJECT_RATE), "rate") == 0);
        CHECK(strcmp(gb_wire_reject_name(GB__REJECT_CODE__REJECT_DENIED), "denied") == 0);
        CHECK(strcmp(gb_wire_reject_name(50), "unknown") == 0);
    } else if (strcmp(c, "log_escape") == 0) {
        char out[64];
        gb_log_escape("node\n2024-01-01 coord error forged\r\033[2J\x7f ok", out, sizeof out);
        CHECKF(strchr(out, '\n') == NULL && strchr(out, '\r') == NULL && strchr(out, 033) == NULL,
               "%s", out);
        CHECKF(strcmp(out, "node\\x0a2024-01-01 coord error forged\\x0d\\x1b[2J\\x7f ok") == 0,
               "%s", out);
        /* UTF-8 passes untouched */
        gb_log_escape("n\xc3\xa9ud", out, sizeof out);
        CHECK(strcmp(out, "n\xc3\xa9ud") == 0);
        /* but not a C1 control in it (U+009B, CSI to some terminals) */
        gb_log_escape("a\xc2\x9b"
                      "31mX\xc2\xa0",
                      out, sizeof out);
        CHECKF(strcmp(out, "a\\xc2\\x9b31mX\xc2\xa0") == 0, "%s", out);
        CHECK(gb_wire_line_ok(out, 0, 64));
        /* cut short, never overrun, never half an escape */
        char tiny[6];
        gb_log_escape("ab\ncd", tiny, sizeof tiny);
        CHECKF(strcmp(tiny, "ab") == 0, "'%s'", tiny);
        gb_log_escape("abcdefgh", tiny, sizeof tiny);
        CHECK(strcmp(tiny, "abcde") == 0);
    } else if (strcmp(c, "log_partial_line") == 0) {
        /* a progress line left open (\r, no newline; gpubench run's, while
         * its daemons log): the next record ends it first, once; a record
         * below the level writes nothing, not even that */
        char path[] = "/tmp/gb-hwire-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        unlink(path);
        fflush(stderr);
        int saved = dup(2);
        CHECK(saved >= 0 && dup2(fd, 2) == 2);
        gb_log_set_level(GB_LOG_INFO);
        fputs("\rsweep 1 [..] 0/1", stderr);
        gb_log_partial_line(1);
        gb_debug("dropped");
        gb_warn("first");
        gb_warn("second");
        fputs("\rsweep 1 [#.] 1/2", stderr);
        gb_log_partial_line(1);
        gb_log_end_partial_line();
        gb_log_end_partial_line(); /* none open: nothing */
        fputs("message\n", stderr);
        fputs("\rsweep 1 [##] 2/2\n", stderr);
        gb_log_partial_line(0); /* ended by its own newline */
        gb_warn("third");
        fflush(stderr);
        CHECK(dup2(saved, 2) == 2);
        close(saved);
        char buf[1024];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        CHECK(n > 0);
        buf[n] = '\0';
        CHECKF(!strstr(buf, "\n\n"), "an empty line: %s", buf);
        /* the records' lines without their timestamps */
        char want[][40] = {"\rsweep 1 [..] 0/1", " warn  first", " warn  second",
                           "\rsweep 1 [#.] 1/2", "message",      "\rsweep 1 [##] 2/2",
                           " warn  third"};
        char *save = NULL, *line = strtok_r(buf, "\n", &save);
        size_t i = 0;
        for (; line && i < sizeof want / sizeof want[0]; i++, line = strtok_r(NULL, "\n", &save)) {
            const char *tail = want[i][0] == ' ' ? strstr(line, " warn  ") : line;
            CHECKF(tail && strcmp(tail, want[i]) == 0, "line %zu: '%s', want '%s'", i, line,
                   want[i]);
        }
        CHECKF(i == sizeof want / sizeof want[0] && !line, "%zu lines", i);
        CHECKF(!strstr(buf, "dropped"), "%s", buf);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    printf("ok\n");
    return 0;
}
