/* comm.c - the host implementation of comm.h: replicas that are threads of
 * one process, plus the TCP ring (ring.h) between processes.
 *
 * One all-reduce of `count` floats with L local replicas:
 *   1. each replica posts its buffer; barrier;
 *   2. replica d reduces elements [count*d/L, count*(d+1)/L) over the L
 *      buffers in the order 0..L-1 (its share: the reduce-scatter);
 *      on one node it finishes them (divides by world for an average) and
 *      writes them into every buffer (the all-gather); barrier, done;
 *   3. with other nodes: the shares go into replica 0's buffer only;
 *      barrier; replica 0 runs the ring over it (which finishes every
 *      element once, on its owning node); barrier; each replica copies its
 *      share of the result from replica 0's buffer into the others; barrier.
 * Every element's final value is computed exactly once and copied, so
 * every replica of the job holds the same bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "gb_util.h"
#include "ring.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ barrier */

struct gb_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, count;
    unsigned gen;
    int aborted;
    int gen_aborted; /* barrier_through: aborted when the last member came */
    char why[GB_ERR_LEN];
};

gb_barrier_t *gb_barrier_new(int n) {
    if (n < 1) return NULL;
    gb_barrier_t *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return NULL;
    }
    if (pthread_cond_init(&b->cv, NULL) != 0) {
        pthread_mutex_destroy(&b->mu);
        free(b);
        return NULL;
    }
    b->n = n;
    return b;
}

/* One arrival at b (b->mu held): 1 when it was the last, which opens the
 * barrier for its generation (and notes whether it was aborted by then,
 * for barrier_through's one answer). */
static int arrive(gb_barrier_t *b) {
    if (++b->count < b->n) return 0;
    b->count = 0;
    b->gen++;
    b->gen_aborted = b->aborted;
    pthread_cond_broadcast(&b->cv);
    return 1;
}

int gb_barrier_wait(gb_barrier_t *b, char *err, size_t errlen) {
    pthread_mutex_lock(&b->mu);
    if (b->aborted) {
        snprintf(err, errlen, "%s", b->why);
        pthread_mutex_unlock(&b->mu);
        return -1;
    }
    unsigned gen = b->gen;
    if (arrive(b)) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    while (gen == b->gen && !b->aborted)
        pthread_cond_wait(&b->cv, &b->mu);
    int rc = gen == b->gen ? -1 : 0; /* released by abort, not by the last arrival */
    if (rc) snprintf(err, errlen, "%s", b->why);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* A barrier that an abort does not open: for the ends of phases in which
 * members touch each other's buffers. Every member that passed the barrier
 * before (all-or-nothing: none or all do) is certain to arrive, as nothing
 * between blocks; leaving early on an abort let a member free its buffer
 * while its peers still read and wrote it (found with ThreadSanitizer: a
 * use after munmap in g_allreduce). The abort is then said after it. */
static int barrier_through(gb_barrier_t *b, char *err, size_t errlen) {
    pthread_mutex_lock(&b->mu);
    unsigned gen = b->gen;
    if (!arrive(b))
        while (gen == b->gen)
            pthread_cond_wait(&b->cv, &b->mu);
    int rc = b->gen_aborted ? -1 : 0; /* one answer for all: an abort after it is the next's */
    if (rc) snprintf(err, errlen, "%s", b->why);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

void gb_barrier_abort(gb_barrier_t *b, const char *why) {
    pthread_mutex_lock(&b->mu);
    if (!b->aborted) {
        b->aborted = 1;
        snprintf(b->why, sizeof(b->why), "%s", why && why[0] ? why : "aborted");
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int gb_barrier_aborted(gb_barrier_t *b, char *why, size_t whylen) {
    pthread_mutex_lock(&b->mu);
    int a = b->aborted;
    if (a && why) snprintf(why, whylen, "%s", b->why);
    pthread_mutex_unlock(&b->mu);
    return a;
}

void gb_barrier_destroy(gb_barrier_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_barrier_t *b = *self_p;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
    *self_p = NULL;
}

/* -------------------------------------------------------------- group */

typedef struct member {
    gb_comm_t c;
    gb_comm_group_t *g;
} member_t;

struct gb_comm_group {
    int L;
    gb_dist_t *dist;
    int timeout_ms;
    member_t *m;
    gb_barrier_t *bar;
    float **bufs; /* posted by each member for the current collective */
    gb_ring_t *ring;
    int ring_up;
    int exchanged;
    unsigned char id[GB_DIST_ID_MAX];
    size_t id_len;
};

static gb_comm_group_t *grp(gb_comm_t *c) {
    return ((member_t *)c->impl)->g;
}

void gb_comm_group_abort(gb_comm_group_t *g, const char *why) {
    if (g) gb_barrier_abort(g->bar, why);
}

static int fail_all(gb_comm_group_t *g, const char *why, char *err, size_t errlen) {
    if (err && err != why) snprintf(err, errlen, "%s", why);
    gb_barrier_abort(g->bar, why);
    return -1;
}

static void share(size_t count, int d, int L, size_t *lo, size_t *hi) {
    *lo = count * (size_t)d / (size_t)L;
    *hi = count * (size_t)(d + 1) / (size_t)L;
}

/* -1 with the first reason once the group is aborted: a process of one
 * replica (every replica process; a node of --devices 1) passes no
 * barrier that would say it, and went on reducing over the ring after its
 * own abort (its reducer's queued buckets, each up to the comm timeout) */
static int aborted(gb_comm_group_t *g, char *err, size_t errlen) {
    char why[GB_ERR_LEN];
    if (!gb_barrier_aborted(g->bar, why, sizeof why)) return 0;
    if (err) snprintf(err, errlen, "%s", why);
    return -1;
}

static int g_allreduce(gb_comm_t *c, float *buf, size_t count, gb_comm_op_t op, char *err,
                       size_t errlen) {
    gb_comm_group_t *g = grp(c);
    int L = g->L, d = c->local_rank;
    if (aborted(g, err, errlen)) return -1;
    if (op != GB_COMM_SUM && op != GB_COMM_AVG && op != GB_COMM_MAX)
        return fail_all(g, "comm: unknown reduction", err, errlen);
    if (!g->ring_up && c->world > L)
        return fail_all(g, "comm: a collective across nodes needs the ring (connect first)", err,
                        errlen);
    g->bufs[d] = buf;
    if (L > 1 && gb_barrier_wait(g->bar, err, errlen)) return -1;
    size_t lo, hi;
    share(count, d, L, &lo, &hi);
    int cross = g->ring_up;
    float div = (float)c->world;
    if (L > 1) {
        float *const *b = g->bufs;
        for (size_t i = lo; i < hi; i++) {
            float s = b[0][i];
            if (op == GB_COMM_MAX)
                for (int k = 1; k < L; k++)
                    s = fmaxf(s, b[k][i]);
            else
                for (int k = 1; k < L; k++)
                    s += b[k][i];
            if (cross) {
                b[0][i] = s;
            } else {
                if (op == GB_COMM_AVG) s = s / div;
                for (int k = 0; k < L; k++)
                    b[k][i] = s;
            }
        }
        if (barrier_through(g->bar, err, errlen)) return -1; /* done with the others' buffers */
    }
    if (!cross) return 0;
    if (d == 0) {
        char why[GB_ERR_LEN];
        if (gb_ring_allreduce(g->ring, buf, count, op == GB_COMM_MAX ? GB_COMM_MAX : GB_COMM_SUM,
                              op == GB_COMM_AVG ? div : 0.0f, why, sizeof(why)))
            return fail_all(g, why, err, errlen);
    }
    if (L > 1) {
        if (gb_barrier_wait(g->bar, err, errlen)) return -1;
        for (int k = 1; k < L; k++) /* share d of the result into every other buffer */
            memcpy(g->bufs[k] + lo, g->bufs[0] + lo, (hi - lo) * sizeof(float));
        if (barrier_through(g->bar, err, errlen)) return -1;
    }
    return 0;
}

static int g_barrier(gb_comm_t *c, char *err, size_t errlen) {
    float one = 1.0f;
    return g_allreduce(c, &one, 1, GB_COMM_SUM, err, errlen);
}

static int g_local_barrier(gb_comm_t *c, char *err, size_t errlen) {
    gb_comm_group_t *g = grp(c);
    if (aborted(g, err, errlen)) return -1;
    return g->L > 1 ? gb_barrier_wait(g->bar, err, errlen) : 0;
}

static int g_exchange_id(gb_comm_t *c, gb_comm_make_id_fn make, void *arg, unsigned char *id,
                         size_t *len, char *err, size_t errlen) {
    gb_comm_group_t *g = grp(c);
    gb_dist_t *dist = g->dist;
    if (c->local_rank == 0) {
        char why[GB_ERR_LEN] = "";
        int rc = 0;
        if (g->exchanged) {
            snprintf(why, sizeof(why), "comm: the unique id is exchanged once per job");
            rc = -1;
        } else if (!dist || dist->rank == 0) {
            g->id_len = 0;
            rc = make(arg, g->id, &g->id_len, why, sizeof(why));
            if (rc == 0 && (g->id_len < 1 || g->id_len > GB_DIST_ID_MAX)) {
                snprintf(why, sizeof(why), "comm: a unique id of %zu bytes (1..%d)", g->id_len,
                         GB_DIST_ID_MAX);
                rc = -1;
            }
            if (rc == 0 && dist) rc = dist->publish_id(dist, g->id, g->id_len, why, sizeof(why));
        }
        if (rc == 0 && dist) rc = dist->wait_start(dist, why, sizeof(why));
        /* read after the start: a replica process is given rank 0's id
         * with it (launch.c); a worker has it from its job file */
        if (rc == 0 && dist && dist->rank != 0) {
            memcpy(g->id, dist->unique_id, dist->unique_id_len);
            g->id_len = dist->unique_id_len;
        }
        g->exchanged = 1;
        if (rc) return fail_all(g, why[0] ? why : "comm: the id exchange failed", err, errlen);
    }
    if (gb_barrier_wait(g->bar, err, errlen)) return -1;
    memcpy(id, g->id, g->id_len);
    *len = g->id_len;
    return 0;
}

static int ring_make(void *arg, unsigned char *id, size_t *len, char *err, size_t errlen) {
    return gb_ring_make_id(arg, id, len, err, errlen);
}

static int g_connect(gb_comm_t *c, char *err, size_t errlen) {
    gb_comm_group_t *g = grp(c);
    if (aborted(g, err, errlen)) return -1;
    if (!g->dist) return g->L > 1 ? gb_barrier_wait(g->bar, err, errlen) : 0;
    char why[GB_ERR_LEN];
    if (c->local_rank == 0 && !g->ring) {
        g->ring = gb_ring_new(g->dist->rank, g->dist->n_nodes, g->timeout_ms, why, sizeof(why));
        if (!g->ring) return fail_all(g, why, err, errlen);
    }
    if (g->L > 1 && gb_barrier_wait(g->bar, err, errlen)) return -1;
    unsigned char id[GB_DIST_ID_MAX];
    size_t len = 0;
    if (g_exchange_id(c, ring_make, g->ring, id, &len, err, errlen)) return -1;
    if (c->local_rank == 0) {
        if (gb_ring_connect(g->ring, id, len, why, sizeof(why)))
            return fail_all(g, why, err, errlen);
        g->ring_up = 1;
    }
    return g->L > 1 ? gb_barrier_wait(g->bar, err, errlen) : 0;
}

static void g_abort(gb_comm_t *c, const char *why) {
    gb_comm_group_abort(grp(c), why);
}

static int g_aborted(gb_comm_t *c, char *why, size_t whylen) {
    return gb_barrier_aborted(grp(c)->bar, why, whylen);
}

static const gb_comm_vtbl_t group_vtbl = {
    .allreduce = g_allreduce,
    .barrier = g_barrier,
    .local_barrier = g_local_barrier,
    .exchange_id = g_exchange_id,
    .connect = g_connect,
    .abort = g_abort,
    .aborted = g_aborted,
};

gb_comm_group_t *gb_comm_group_new(int local_size, gb_dist_t *dist, int timeout_ms, char *err,
                                   size_t errlen) {
    if (local_size < 1 || local_size > 1024) {
        snprintf(err, errlen, "comm: %d local replicas (1..1024)", local_size);
        return NULL;
    }
    if (dist && (dist->n_nodes < 2 || dist->rank < 0 || dist->rank >= dist->n_nodes ||
                 dist->world_size != dist->n_nodes * local_size || !dist->publish_id ||
                 !dist->wait_start)) {
        snprintf(err, errlen,
                 "comm: rank %d of %d node(s) with world size %d does not fit %d "
                 "replica(s) per node",
                 dist->rank, dist->n_nodes, dist->world_size, local_size);
        return NULL;
    }
    gb_comm_group_t *g = calloc(1, sizeof(*g));
    if (!g) goto oom;
    g->L = local_size;
    g->dist = dist;
    g->timeout_ms = timeout_ms > 0 ? timeout_ms : 600000;
    g->m = calloc((size_t)local_size, sizeof(*g->m));
    g->bufs = calloc((size_t)local_size, sizeof(*g->bufs));
    g->bar = gb_barrier_new(local_size);
    if (!g->m || !g->bufs || !g->bar) goto oom;
    int nodes = dist ? dist->n_nodes : 1, node = dist ? dist->rank : 0;
    for (int d = 0; d < local_size; d++) {
        gb_comm_t *c = &g->m[d].c;
        g->m[d].g = g;
        c->v = &group_vtbl;
        c->local_rank = d;
        c->local_size = local_size;
        c->node_rank = node;
        c->n_nodes = nodes;
        c->rank = node * local_size + d;
        c->world = nodes * local_size;
        c->transport = dist ? "threads+tcp" : "threads";
        c->impl = &g->m[d];
    }
    return g;
oom:
    snprintf(err, errlen, "out of memory");
    gb_comm_group_destroy(&g);
    return NULL;
}

int gb_comm_timeout_ms(int *ms, char *err, size_t errlen) {
    return gb_env_ms("GB_COMM_TIMEOUT_MS", 600000, 86400000, ms, err, errlen);
}

gb_comm_t *gb_comm_group_member(gb_comm_group_t *g, int local_rank) {
    if (!g || local_rank < 0 || local_rank >= g->L) return NULL;
    return &g->m[local_rank].c;
}

int gb_comm_group_has_ring(const gb_comm_group_t *g) {
    return g && g->ring_up;
}

void gb_comm_group_destroy(gb_comm_group_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_comm_group_t *g = *self_p;
    gb_ring_destroy(&g->ring);
    gb_barrier_destroy(&g->bar);
    free(g->m);
    free(g->bufs);
    free(g);
    *self_p = NULL;
}
