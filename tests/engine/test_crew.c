/* test_crew.c - the replicas' threads (crew.h) with real threads: joined
 * when all end; after a failure, joined as soon as the rest end, or given
 * up on grace_ms later with each one still running named with its phase;
 * the grace period's setting checked.
 *
 *   test_crew CASE    (all | failed_joined | stranded | grace_env)
 */
#define _POSIX_C_SOURCE 200809L
#include "crew.h"
#include "check.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct {
    gb_crew_t *crew;
    int i;
    int fail_after_ms; /* < 0: never fails */
    int end_after_ms;  /* how long it runs before it ends (after any failure) */
    atomic_int *hold;  /* while set, the member does not end */
    atomic_int ended;
} job_t;

static void member(void *arg) {
    job_t *j = arg;
    gb_crew_phase(j->crew, j->i, "working");
    if (j->fail_after_ms >= 0) {
        nap_ms(j->fail_after_ms);
        gb_crew_failed(j->crew);
    }
    gb_crew_phase(j->crew, j->i, "the held part");
    nap_ms(j->end_after_ms);
    while (j->hold && atomic_load(j->hold))
        nap_ms(5);
    atomic_store(&j->ended, 1);
}

/* a stranded crew stays reachable: the leak checker must not call it lost */
static gb_crew_t *kept;

static int run(job_t *jobs, int n, int grace_ms, char *err, size_t errlen, double *took) {
    char e[256];
    gb_crew_t *c = gb_crew_new(n, e, sizeof(e));
    CHECKF(c, "%s", e);
    for (int i = 0; i < n; i++) {
        jobs[i].crew = c;
        jobs[i].i = i;
        CHECKF(gb_crew_start(c, i, member, &jobs[i], e, sizeof(e)) == 0, "%s", e);
    }
    double t0 = mono_s();
    int rc = gb_crew_join(c, grace_ms, err, errlen);
    *took = mono_s() - t0;
    if (rc == 0)
        gb_crew_free(&c);
    else
        kept = c;
    return rc;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    char err[512] = "";
    double took = 0;
    if (strcmp(c, "all") == 0) {
        /* no failure: join waits as long as it takes (well past the grace) */
        job_t j[3] = {{.fail_after_ms = -1, .end_after_ms = 300},
                      {.fail_after_ms = -1, .end_after_ms = 10},
                      {.fail_after_ms = -1, .end_after_ms = 150}};
        CHECK(run(j, 3, 50, err, sizeof(err), &took) == 0);
        for (int i = 0; i < 3; i++)
            CHECK(atomic_load(&j[i].ended));
        printf("all: joined after %.2f s (grace 0.05 s, no failure)\n", took);
    } else if (strcmp(c, "failed_joined") == 0) {
        /* member 0 fails; member 1 ends 0.3 s later, inside the 30 s grace:
         * joined when it ends, not at the grace's end */
        job_t j[2] = {{.fail_after_ms = 0, .end_after_ms = 0},
                      {.fail_after_ms = -1, .end_after_ms = 300}};
        CHECK(run(j, 2, 30000, err, sizeof(err), &took) == 0);
        CHECK(atomic_load(&j[1].ended));
        CHECKF(took < 20, "the join took %.1f s: it waited out the grace", took);
        printf("failed_joined: joined after %.2f s\n", took);
    } else if (strcmp(c, "stranded") == 0) {
        /* member 1 fails at 50 ms; member 0 and 2 are held: given up on
         * 0.4 s after the failure, both named, member 1 not */
        static atomic_int hold = 1;
        static job_t j[3] = {{.fail_after_ms = -1, .end_after_ms = 0, .hold = &hold},
                             {.fail_after_ms = 50, .end_after_ms = 0},
                             {.fail_after_ms = -1, .end_after_ms = 0, .hold = &hold}};
        CHECK(run(j, 3, 400, err, sizeof(err), &took) == -1);
        printf("stranded: %s (after %.2f s)\n", err, took);
        CHECKF(took >= 0.4 && took < 20, "gave up after %.2f s", took);
        CHECKF(strcmp(err, "replica 0 (in the held part), replica 2 (in the held part) still "
                           "running 0.4 s after the failure") == 0,
               "%s", err);
        CHECK(!atomic_load(&j[0].ended) && !atomic_load(&j[2].ended));
        /* the detached threads end later on memory still there */
        atomic_store(&hold, 0);
        for (int k = 0; k < 400 && !(atomic_load(&j[0].ended) && atomic_load(&j[2].ended)); k++)
            nap_ms(5);
        CHECK(atomic_load(&j[0].ended) && atomic_load(&j[2].ended));
        nap_ms(50); /* their last touch of the crew */
    } else if (strcmp(c, "grace_env") == 0) {
        int ms = 0;
        unsetenv("GB_REPLICA_GRACE_MS");
        CHECK(gb_crew_grace_ms(&ms, err, sizeof(err)) == 0 && ms == 10000);
        setenv("GB_REPLICA_GRACE_MS", "250", 1);
        CHECK(gb_crew_grace_ms(&ms, err, sizeof(err)) == 0 && ms == 250);
        const char *bad[] = {"0", "-5", "10s", "", "3600001", "1e3"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            setenv("GB_REPLICA_GRACE_MS", bad[i], 1);
            err[0] = 0;
            int rc = gb_crew_grace_ms(&ms, err, sizeof(err));
            if (bad[i][0]) /* empty is unset */
                CHECKF(rc == -1 && strstr(err, "GB_REPLICA_GRACE_MS"), "'%s': %d %s", bad[i], rc,
                       err);
            else
                CHECK(rc == 0 && ms == 10000);
        }
        printf("grace_env: %s\n", err);
    } else {
        fprintf(stderr, "usage: test_crew all|failed_joined|stranded|grace_env\n");
        return 2;
    }
    return 0;
}
