/* skew_clock.c - LD_PRELOAD'ed into an agent (and the workers it starts) by
 * it_mn.sh's case skewed: CLOCK_REALTIME GB_TEST_SKEW_S seconds behind the
 * machine's, as on a node whose clock is off, for clock_gettime and for
 * clock_nanosleep's absolute deadlines (the worker sleeps on the wall clock
 * until a multi-node start). Other clocks are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static long skew_s(void) {
    const char *s = getenv("GB_TEST_SKEW_S");
    return s ? atol(s) : 0;
}

int clock_gettime(clockid_t c, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(c, ts);
    if (r == 0 && c == CLOCK_REALTIME) ts->tv_sec -= skew_s();
    return r;
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *rq, struct timespec *rem) {
    static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(
            RTLD_NEXT, "clock_nanosleep");
    if (c == CLOCK_REALTIME && (flags & TIMER_ABSTIME)) {
        struct timespec t = *rq;
        t.tv_sec += skew_s();
        return real(c, flags, &t, rem);
    }
    return real(c, flags, rq, rem);
}
