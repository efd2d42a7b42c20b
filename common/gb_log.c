/* gb_log.c - see gb_log.h. */
#define _POSIX_C_SOURCE 200809L
#include "gb_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int log_level = -1; /* -1: not yet read from the environment */
static atomic_int partial_line;   /* a line without its end is on stderr */
static _Thread_local char log_component[16] = "gpubench";

void gb_log_set_level(gb_log_level_t level) {
    atomic_store(&log_level, (int)level);
}

int gb_log_level_parse(const char *s, gb_log_level_t *out) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (gb_log_level_t)i;
            return 0;
        }
    return -1;
}

void gb_log_set_component(const char *name) {
    snprintf(log_component, sizeof log_component, "%s", name ? name : "gpubench");
}

static void put_hex(char *out, size_t *o, unsigned char b) {
    static const char hex[] = "0123456789abcdef";
    out[(*o)++] = '\\';
    out[(*o)++] = 'x';
    out[(*o)++] = hex[b >> 4];
    out[(*o)++] = hex[b & 15];
}

void gb_log_escape(const char *in, char *out, size_t outlen) {
    size_t o = 0;
    if (outlen == 0) return;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            /* a C1 control as UTF-8 (0x9b is CSI to some terminals) */
            if (o + 8 >= outlen) break;
            put_hex(out, &o, p[0]);
            put_hex(out, &o, p[1]);
            p++;
        } else if (*p >= 0x20 && *p != 0x7f) {
            if (o + 1 >= outlen) break;
            out[o++] = (char)*p;
        } else {
            if (o + 4 >= outlen) break;
            put_hex(out, &o, *p);
        }
    }
    out[o] = '\0';
}

static int current_level(void) {
    int lv = atomic_load(&log_level);
    if (lv >= 0) return lv;
    gb_log_level_t parsed = GB_LOG_INFO;
    const char *env = getenv("GB_LOG_LEVEL");
    if (env) (void)gb_log_level_parse(env, &parsed);
    atomic_store(&log_level, (int)parsed);
    return (int)parsed;
}

void gb_log(gb_log_level_t level, const char *fmt, ...) {
    static const char *tags[] = {"debug", "info ", "warn ", "error"};
    if ((int)level < current_level()) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof msg) memcpy(msg + sizeof msg - 4, "...", 4); /* mark truncation */
    /* Text from the wire (names, reasons, errors) is logged: a control
     * character in it must not forge a line or a terminal escape. */
    char safe[sizeof msg];
    gb_log_escape(msg, safe, sizeof safe);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    flockfile(stderr); /* the check and the record together, as a progress line's draw */
    if (atomic_exchange(&partial_line, 0)) fputc('\n', stderr);
    fprintf(stderr, "%s.%03ldZ %-6s %s %s\n", when, ts.tv_nsec / 1000000L, log_component,
            tags[level], safe);
    funlockfile(stderr);
}

void gb_log_partial_line(int open) {
    atomic_store(&partial_line, open ? 1 : 0);
}

void gb_log_end_partial_line(void) {
    flockfile(stderr);
    if (atomic_exchange(&partial_line, 0)) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    funlockfile(stderr);
}
