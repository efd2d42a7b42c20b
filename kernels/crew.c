/* crew.c - see crew.h. One mutex and condition: each member's end and the
 * first failure are signalled on it; the joiner waits on it with a
 * deadline (CLOCK_MONOTONIC) only once a member has failed. */
#define _POSIX_C_SOURCE 200809L
#include "crew.h"

#include "gb_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct member {
    gb_crew_t *crew;
    void (*fn)(void *);
    void *arg;
    pthread_t th;
    int started, ended;
    const char *phase;
} member_t;

struct gb_crew {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, running;
    int failed;
    struct timespec failed_at; /* CLOCK_MONOTONIC */
    member_t m[];
};

gb_crew_t *gb_crew_new(int n, char *err, size_t errlen) {
    gb_crew_t *c = n > 0 ? calloc(1, sizeof(*c) + (size_t)n * sizeof(member_t)) : NULL;
    if (!c) {
        snprintf(err, errlen, n > 0 ? "out of memory" : "a crew of %d", n);
        return NULL;
    }
    pthread_condattr_t ca;
    int ok_mu = pthread_mutex_init(&c->mu, NULL) == 0;
    int ok_cv = pthread_condattr_init(&ca) == 0;
    if (ok_cv) {
        ok_cv = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                pthread_cond_init(&c->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!ok_mu || !ok_cv) {
        if (ok_mu) pthread_mutex_destroy(&c->mu);
        if (ok_cv) pthread_cond_destroy(&c->cv);
        free(c);
        snprintf(err, errlen, "cannot make the replicas' mutex and condition");
        return NULL;
    }
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->m[i].crew = c;
        c->m[i].phase = "start";
    }
    return c;
}

static void *member_main(void *arg) {
    member_t *m = arg;
    m->fn(m->arg);
    gb_crew_t *c = m->crew;
    pthread_mutex_lock(&c->mu);
    m->ended = 1;
    c->running--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int gb_crew_start(gb_crew_t *c, int i, void (*fn)(void *), void *arg, char *err, size_t errlen) {
    if (i < 0 || i >= c->n || c->m[i].started) {
        snprintf(err, errlen, "replica %d: not a member to start", i);
        return -1;
    }
    member_t *m = &c->m[i];
    m->fn = fn;
    m->arg = arg;
    pthread_mutex_lock(&c->mu);
    c->running++; /* before the thread can end */
    int e = pthread_create(&m->th, NULL, member_main, m);
    if (e == 0)
        m->started = 1;
    else
        c->running--;
    pthread_mutex_unlock(&c->mu);
    if (e) {
        snprintf(err, errlen, "cannot start a replica thread: %s", strerror(e));
        return -1;
    }
    return 0;
}

void gb_crew_phase(gb_crew_t *c, int i, const char *phase) {
    if (!c || i < 0 || i >= c->n) return;
    pthread_mutex_lock(&c->mu);
    c->m[i].phase = phase;
    pthread_mutex_unlock(&c->mu);
}

void gb_crew_failed(gb_crew_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    if (!c->failed) {
        c->failed = 1;
        clock_gettime(CLOCK_MONOTONIC, &c->failed_at);
        pthread_cond_broadcast(&c->cv); /* the joiner's wait gets its deadline */
    }
    pthread_mutex_unlock(&c->mu);
}

int gb_crew_join(gb_crew_t *c, int grace_ms, char *err, size_t errlen) {
    pthread_mutex_lock(&c->mu);
    int timed_out = 0;
    while (c->running > 0 && !timed_out) {
        if (!c->failed) {
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        struct timespec dl = c->failed_at;
        dl.tv_sec += grace_ms / 1000;
        dl.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT) timed_out = c->running > 0;
    }
    if (timed_out) {
        size_t off = 0;
        int named = 0;
        err[0] = 0;
        for (int i = 0; i < c->n && off < errlen; i++) {
            member_t *m = &c->m[i];
            if (!m->started || m->ended) continue;
            int w = snprintf(err + off, errlen - off, "%sreplica %d (in %s)", named ? ", " : "", i,
                             m->phase);
            off += w > 0 ? (size_t)w : 0;
            named++;
            pthread_detach(m->th);
        }
        if (off < errlen)
            snprintf(err + off, errlen - off, " still running %.3g s after the failure",
                     grace_ms / 1000.0);
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (c->m[i].started) pthread_join(c->m[i].th, NULL);
    return 0;
}

void gb_crew_free(gb_crew_t **cp) {
    if (!cp || !*cp) return;
    gb_crew_t *c = *cp;
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    *cp = NULL;
}

int gb_crew_grace_ms(int *ms, char *err, size_t errlen) {
    return gb_env_ms("GB_REPLICA_GRACE_MS", 10000, 3600000, ms, err, errlen);
}
