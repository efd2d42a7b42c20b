/* reducer.c - see reducer.h. One mutex guards the queue (bucket indices in
 * the order they became ready), the completion count and the error; the
 * thread sleeps on `work`, finish sleeps on `done`. */
#define _POSIX_C_SOURCE 200809L
#include "reducer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gb_reducer {
    gb_comm_t *comm;
    const gb_buckets_t *bk;
    float *slab;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int *pending;       /* gb_buckets_pending_len */
    int *queued;        /* per bucket: queued this step */
    int *queue;         /* bucket indices, FIFO */
    int q_head, q_tail; /* q_tail - q_head queued, not yet taken */
    int n_done;         /* buckets reduced this step */
    int quit, failed;
    char err[GB_ERR_LEN];
    gb_reducer_stats_t st;
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void *run(void *arg) {
    gb_reducer_t *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->quit && r->q_head == r->q_tail)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->quit) break;
        int b = r->queue[r->q_head++];
        int failed = r->failed;
        pthread_mutex_unlock(&r->mu);
        char why[GB_ERR_LEN] = "";
        int rc = 0;
        if (!failed) {
            const gb_bucket_t *bu = &r->bk->b[b];
            double t0 = now_ms();
            rc = gb_comm_allreduce(r->comm, r->slab + bu->off, bu->count, GB_COMM_AVG, why,
                                   sizeof(why));
            double t1 = now_ms();
            pthread_mutex_lock(&r->mu);
            r->st.reduce_ms += t1 - t0;
            pthread_mutex_unlock(&r->mu);
        }
        pthread_mutex_lock(&r->mu);
        if (rc && !r->failed) {
            r->failed = 1;
            snprintf(r->err, sizeof(r->err), "%s", why);
        }
        r->n_done++;
        pthread_cond_broadcast(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

gb_reducer_t *gb_reducer_new(gb_comm_t *comm, const gb_buckets_t *bk, float *slab, char *err,
                             size_t errlen) {
    gb_reducer_t *r = calloc(1, sizeof(*r));
    if (!r) goto oom;
    r->comm = comm;
    r->bk = bk;
    r->slab = slab;
    r->pending = calloc(gb_buckets_pending_len(bk), sizeof(int));
    r->queued = calloc((size_t)bk->n, sizeof(int));
    r->queue = calloc((size_t)bk->n, sizeof(int));
    if (!r->pending || !r->queued || !r->queue) goto oom;
    if (pthread_mutex_init(&r->mu, NULL) || pthread_cond_init(&r->work, NULL) ||
        pthread_cond_init(&r->done, NULL)) {
        snprintf(err, errlen, "reducer: cannot make its locks");
        free(r->pending);
        free(r->queued);
        free(r->queue);
        free(r);
        return NULL;
    }
    gb_buckets_reset(bk, r->pending);
    if (pthread_create(&r->th, NULL, run, r) != 0) {
        snprintf(err, errlen, "reducer: cannot start its thread");
        gb_reducer_destroy(&r);
        return NULL;
    }
    r->started = 1;
    return r;
oom:
    snprintf(err, errlen, "out of memory");
    if (r) {
        free(r->pending);
        free(r->queued);
        free(r->queue);
        free(r);
    }
    return NULL;
}

void gb_reducer_begin(gb_reducer_t *r) {
    pthread_mutex_lock(&r->mu);
    gb_buckets_reset(r->bk, r->pending);
    memset(r->queued, 0, (size_t)r->bk->n * sizeof(int));
    r->q_head = r->q_tail = 0;
    r->n_done = 0;
    pthread_mutex_unlock(&r->mu);
}

static void enqueue_locked(gb_reducer_t *r, int b) {
    if (r->queued[b]) return;
    r->queued[b] = 1;
    r->queue[r->q_tail++] = b;
    pthread_cond_signal(&r->work);
}

void gb_reducer_tensor_done(gb_reducer_t *r, int tensor) {
    pthread_mutex_lock(&r->mu);
    int b = gb_buckets_done(r->bk, r->pending, tensor);
    if (b >= 0) {
        enqueue_locked(r, b);
        r->st.buckets_before++;
    }
    pthread_mutex_unlock(&r->mu);
}

int gb_reducer_finish(gb_reducer_t *r, char *err, size_t errlen) {
    double t0 = now_ms();
    pthread_mutex_lock(&r->mu);
    for (int b = 0; b < r->bk->n; b++)
        enqueue_locked(r, b);
    while (r->n_done < r->bk->n)
        pthread_cond_wait(&r->done, &r->mu);
    int rc = r->failed ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s", r->err);
    r->st.steps++;
    r->st.wait_ms += now_ms() - t0;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void gb_reducer_stats(gb_reducer_t *r, gb_reducer_stats_t *out) {
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}

void gb_reducer_destroy(gb_reducer_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_reducer_t *r = *self_p;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->quit = 1;
        pthread_cond_broadcast(&r->work);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
    }
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->done);
    pthread_mutex_destroy(&r->mu);
    free(r->pending);
    free(r->queued);
    free(r->queue);
    free(r);
    *self_p = NULL;
}
