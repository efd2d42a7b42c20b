/* test_comm.c - the host collectives of comm.h and ring.h, the buckets and
 * the reducer, with real threads and real TCP sockets on loopback.
 *
 *   test_comm CASE
 *     buckets    bucket plans: from the end, whole tensors, cover the slab,
 *                completion counting, bad input
 *     threads    the in-process group: sum/avg/max of small integers (exact
 *                in f32) for 1..5 replicas and sizes 0..100003, the same
 *                bytes in every replica, id exchange, barrier
 *     abort      a replica that fails releases the others with its reason
 *     ring       3 nodes over TCP: sum/avg/max, every rank the same bytes,
 *                sizes smaller than the ring, 1 MiB+
 *     hier       3 nodes x 2 threads through the group (threads + ring),
 *                with the rendezvous callbacks of gb_dist_t
 *     nonce      a stranger with a wrong nonce is refused while the real
 *                ranks join; a rank given a tampered id is refused and told
 *                so (its own fault: not a peer-gone error, gb_peer.h), and
 *                rank 0 gives up naming it
 *     dead       a peer process killed (SIGKILL) mid-job: the others fail
 *                at once with "closed the connection", a peer-gone error,
 *                no hang
 *     silent     a peer that never joins, one that stops sending: timeouts,
 *                peer-gone errors
 *     reducer    buckets averaged as their tensors complete, in any order;
 *                a failure surfaces at finish
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define _POSIX_C_SOURCE 200809L
#include "buckets.h"
#include "check.h"
#include "comm.h"
#include "gb_peer.h"
#include "reducer.h"
#include "ring.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* input of replica g (global rank), element i: small integers, so sums over
 * up to thousands of replicas are exact in f32 whatever the order */
static float input(int g, size_t i) {
    return (float)((int)((i * 7 + (size_t)g * 3) % 11) - 5);
}

static float expected(gb_comm_op_t op, int world, size_t i) {
    float s = 0, mx = -1e30f;
    for (int g = 0; g < world; g++) {
        s += input(g, i);
        mx = fmaxf(mx, input(g, i));
    }
    return op == GB_COMM_MAX ? mx : op == GB_COMM_AVG ? s / (float)world : s;
}

/* ------------------------------------------------------------- buckets */

static void test_buckets(void) {
    char err[256];
    /* tensors of 10, 30, 5, 50, 7 elements at offsets with padding */
    size_t off[] = {0, 16, 48, 64, 128}, cnt[] = {10, 30, 5, 50, 7};
    gb_buckets_t *bk = gb_buckets_new(off, cnt, 5, 144, 40, err, sizeof(err));
    CHECKF(bk, "%s", err);
    /* from the end: [64, 144) holds tensors 4 and 3 (80 >= 40); [16, 64)
     * holds 2 and 1 (48); [0, 16) tensor 0, reaching the slab start */
    CHECK(bk->n == 3);
    CHECK(bk->b[0].off == 64 && bk->b[0].count == 80 && bk->b[0].n_tensors == 2);
    CHECK(bk->b[1].off == 16 && bk->b[1].count == 48 && bk->b[1].n_tensors == 2);
    CHECK(bk->b[2].off == 0 && bk->b[2].count == 16 && bk->b[2].n_tensors == 1);
    CHECK(bk->of_tensor[4] == 0 && bk->of_tensor[3] == 0 && bk->of_tensor[0] == 2);
    size_t cover = 0;
    for (int i = 0; i < bk->n; i++)
        cover += bk->b[i].count;
    CHECK(cover == 144);
    int *pend = malloc(gb_buckets_pending_len(bk) * sizeof(int));
    CHECK(pend);
    gb_buckets_reset(bk, pend);
    CHECK(gb_buckets_done(bk, pend, 3) == -1); /* bucket 0 still waits for tensor 4 */
    CHECK(gb_buckets_done(bk, pend, 3) == -1); /* twice: ignored */
    CHECK(gb_buckets_done(bk, pend, 0) == 2);  /* out of order: bucket 2 first */
    CHECK(gb_buckets_done(bk, pend, 4) == 0);
    CHECK(gb_buckets_done(bk, pend, 4) == -1);
    CHECK(gb_buckets_done(bk, pend, 7) == -1 && gb_buckets_done(bk, pend, -1) == -1);
    CHECK(gb_buckets_done(bk, pend, 1) == -1 && gb_buckets_done(bk, pend, 2) == 1);
    gb_buckets_reset(bk, pend);
    CHECK(gb_buckets_done(bk, pend, 0) == 2);
    free(pend);
    /* the layout's digest (what data parallel ranks compare): the same for
     * the same layout built again, not for another bucket size, another
     * tensor split or a seed */
    uint32_t d40 = gb_buckets_digest(bk, 2166136261u);
    gb_buckets_t *same = gb_buckets_new(off, cnt, 5, 144, 40, err, sizeof(err));
    gb_buckets_t *b50 = gb_buckets_new(off, cnt, 5, 144, 50, err, sizeof(err));
    CHECK(same && b50 && b50->n == 2);
    CHECK(gb_buckets_digest(same, 2166136261u) == d40);
    CHECK(gb_buckets_digest(b50, 2166136261u) != d40);
    CHECK(gb_buckets_digest(bk, 1u) != d40);
    /* tensor 3 at 100: the first bucket is [100, 144), not [64, 144) */
    size_t off3[] = {0, 16, 48, 100, 128}, cnt3[] = {10, 30, 5, 28, 7};
    gb_buckets_t *t3 = gb_buckets_new(off3, cnt3, 5, 144, 40, err, sizeof(err));
    CHECK(t3 && t3->n == 3 && t3->b[0].off == 100);
    CHECK(gb_buckets_digest(t3, 2166136261u) != d40);
    gb_buckets_destroy(&same);
    gb_buckets_destroy(&b50);
    gb_buckets_destroy(&t3);
    gb_buckets_destroy(&bk);
    CHECK(bk == NULL);
    gb_buckets_destroy(&bk);
    /* one huge bucket; a tensor not in the slab */
    size_t cnt2[] = {10, 30, 0, 50, 7};
    bk = gb_buckets_new(off, cnt2, 5, 144, 1000000, err, sizeof(err));
    CHECK(bk && bk->n == 1 && bk->b[0].off == 0 && bk->b[0].count == 144 &&
          bk->b[0].n_tensors == 4 && bk->of_tensor[2] == -1);
    gb_buckets_destroy(&bk);
    /* every tensor its own bucket */
    bk = gb_buckets_new(off, cnt, 5, 144, 1, err, sizeof(err));
    CHECK(bk && bk->n == 5 && bk->b[0].off == 128 && bk->b[4].off == 0);
    gb_buckets_destroy(&bk);
    /* errors */
    size_t bad_off[] = {0, 5}, bad_cnt[] = {10, 10};
    CHECK(!gb_buckets_new(bad_off, bad_cnt, 2, 100, 10, err, sizeof(err)) &&
          strstr(err, "overlap"));
    size_t out_off[] = {95}, out_cnt[] = {10};
    CHECK(!gb_buckets_new(out_off, out_cnt, 1, 100, 10, err, sizeof(err)) &&
          strstr(err, "outside"));
    size_t z[] = {0};
    CHECK(!gb_buckets_new(z, z, 1, 100, 10, err, sizeof(err)) && strstr(err, "no tensor"));
    CHECK(gb_buckets_elems(25, 4) == 6250000 && gb_buckets_elems(1e-9, 4) == 1);
}

/* ----------------------------------------------------- in-process group */

typedef struct tcase {
    gb_comm_t *c;
    size_t n;
    gb_comm_op_t op;
    float *buf;
    int rc;
    char err[GB_ERR_LEN];
    int same; /* test_same: gb_comm_same of v instead */
    uint32_t v;
    int same_got;
} tcase_t;

static int make_id(void *arg, unsigned char *id, size_t *len, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    memcpy(id, arg, strlen(arg));
    *len = strlen(arg);
    return 0;
}

static void *threads_member(void *arg) {
    tcase_t *t = arg;
    int g = t->c->rank;
    for (size_t i = 0; i < t->n; i++)
        t->buf[i] = input(g, i);
    t->rc = gb_comm_allreduce(t->c, t->buf, t->n, t->op, t->err, sizeof(t->err));
    if (t->rc == 0) t->rc = gb_comm_barrier(t->c, t->err, sizeof(t->err));
    return NULL;
}

static void test_threads(void) {
    char err[GB_ERR_LEN];
    size_t sizes[] = {0, 1, 3, 7, 1000, 100003};
    gb_comm_op_t ops[] = {GB_COMM_SUM, GB_COMM_AVG, GB_COMM_MAX};
    for (int L = 1; L <= 5; L++) {
        gb_comm_group_t *g = gb_comm_group_new(L, NULL, 0, err, sizeof(err));
        CHECKF(g, "%s", err);
        CHECK(!gb_comm_group_has_ring(g));
        for (int d = 0; d < L; d++) {
            gb_comm_t *c = gb_comm_group_member(g, d);
            CHECK(c && c->rank == d && c->world == L && c->local_size == L && c->n_nodes == 1);
        }
        CHECK(gb_comm_group_member(g, L) == NULL && gb_comm_group_member(g, -1) == NULL);
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            for (int oi = 0; oi < 3; oi++) {
                tcase_t t[5];
                pthread_t th[5];
                for (int d = 0; d < L; d++) {
                    t[d] =
                        (tcase_t){.c = gb_comm_group_member(g, d), .n = sizes[si], .op = ops[oi]};
                    t[d].buf = malloc((sizes[si] + 1) * sizeof(float));
                    CHECK(t[d].buf);
                    CHECK(pthread_create(&th[d], NULL, threads_member, &t[d]) == 0);
                }
                for (int d = 0; d < L; d++)
                    pthread_join(th[d], NULL);
                for (int d = 0; d < L; d++) {
                    CHECKF(t[d].rc == 0, "%s", t[d].err);
                    for (size_t i = 0; i < sizes[si]; i++)
                        CHECKF(t[d].buf[i] == expected(ops[oi], L, i),
                               "L=%d n=%zu op=%d replica %d [%zu]: %g vs %g", L, sizes[si], ops[oi],
                               d, i, t[d].buf[i], expected(ops[oi], L, i));
                    /* bit for bit the same in every replica */
                    CHECK(memcmp(t[d].buf, t[0].buf, sizes[si] * sizeof(float)) == 0);
                }
                for (int d = 0; d < L; d++)
                    free(t[d].buf);
            }
        }
        gb_comm_group_destroy(&g);
        CHECK(g == NULL);
    }
    /* the id exchange on one node: replica 0 makes it, every replica gets
     * it; a second exchange is refused */
    gb_comm_group_t *g = gb_comm_group_new(1, NULL, 0, err, sizeof(err));
    CHECK(g);
    unsigned char id[GB_DIST_ID_MAX];
    size_t len = 0;
    gb_comm_t *c = gb_comm_group_member(g, 0);
    CHECK(gb_comm_exchange_id(c, make_id, "hello", id, &len, err, sizeof(err)) == 0);
    CHECK(len == 5 && memcmp(id, "hello", 5) == 0);
    CHECK(gb_comm_exchange_id(c, make_id, "again", id, &len, err, sizeof(err)) == -1);
    CHECKF(strstr(err, "once"), "%s", err);
    gb_comm_group_destroy(&g);
    gb_comm_group_destroy(&g); /* no-op on NULL */
    CHECK(!gb_comm_group_new(0, NULL, 0, err, sizeof(err)) && strstr(err, "replicas"));
    /* the wait on other nodes, from the environment */
    int tmo = -1;
    unsetenv("GB_COMM_TIMEOUT_MS");
    CHECK(gb_comm_timeout_ms(&tmo, err, sizeof(err)) == 0 && tmo == 600000);
    setenv("GB_COMM_TIMEOUT_MS", "", 1);
    CHECK(gb_comm_timeout_ms(&tmo, err, sizeof(err)) == 0 && tmo == 600000);
    setenv("GB_COMM_TIMEOUT_MS", "1500", 1);
    CHECK(gb_comm_timeout_ms(&tmo, err, sizeof(err)) == 0 && tmo == 1500);
    /* a typo is an error, not a silent 600 s */
    const char *bad[] = {"0", "-5", "12ms", "abc", "86400001", "99999999999999999999"};
    for (int i = 0; i < 6; i++) {
        setenv("GB_COMM_TIMEOUT_MS", bad[i], 1);
        err[0] = 0;
        CHECKF(gb_comm_timeout_ms(&tmo, err, sizeof(err)) == -1 &&
                   strstr(err, "GB_COMM_TIMEOUT_MS") && strstr(err, bad[i]),
               "'%s': %s", bad[i], err);
    }
    unsetenv("GB_COMM_TIMEOUT_MS");
}

/* ---------------------------------------------------------------- abort */

typedef struct abort_case {
    gb_comm_t *c;
    int fail;
    int rc;
    double t;
    char err[GB_ERR_LEN];
} abort_case_t;

static void *abort_member(void *arg) {
    abort_case_t *a = arg;
    float buf[4] = {1, 2, 3, 4};
    double t0 = now_s();
    if (a->fail) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        gb_comm_abort(a->c, "replica 2 ran out of memory (planted)");
        a->rc = -1;
    } else {
        a->rc = gb_comm_allreduce(a->c, buf, 4, GB_COMM_SUM, a->err, sizeof(a->err));
    }
    a->t = now_s() - t0;
    return NULL;
}

/* An abort that lands while the members reduce (between the all-reduce's
 * barriers): a member that failed frees its buffer at once, as a replica
 * that tears down does (cpu_destroy unmaps its arena). None may leave the
 * reduce before every member is done with the others' buffers: the first
 * to reach the next barrier used to return at once and unmap its buffer
 * under its peer (SIGSEGV here in 3 runs of 3, found with TSan). */
typedef struct mid_member {
    gb_comm_t *c;
    float *buf;
    size_t n;
    int rc;
    char err[GB_ERR_LEN];
} mid_member_t;

static void *mid_member(void *arg) {
    mid_member_t *m = arg;
    m->rc = gb_comm_allreduce(m->c, m->buf, m->n, GB_COMM_SUM, m->err, sizeof(m->err));
    if (m->rc) { /* the failure path: the replica's memory goes */
        munmap(m->buf, m->n * sizeof(float));
        m->buf = NULL;
    }
    return NULL;
}

static void test_abort_mid(void) {
    const size_t n = (size_t)4 << 20; /* 16 MB a member: a reduce of some ms */
    int aborted = 0;
    for (int trial = 0; trial < 24; trial++) {
        char err[GB_ERR_LEN];
        gb_comm_group_t *g = gb_comm_group_new(2, NULL, 0, err, sizeof(err));
        CHECK(g);
        mid_member_t m[2];
        pthread_t th[2];
        for (int d = 0; d < 2; d++) {
            memset(&m[d], 0, sizeof(m[d]));
            m[d].c = gb_comm_group_member(g, d);
            m[d].n = n;
            m[d].buf = mmap(NULL, n * sizeof(float), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(m[d].buf != MAP_FAILED);
            for (size_t i = 0; i < n; i++)
                m[d].buf[i] = 1.0f;
        }
        for (int d = 0; d < 2; d++)
            CHECK(pthread_create(&th[d], NULL, mid_member, &m[d]) == 0);
        struct timespec ts = {0, (long)(500 + (trial % 12) * 1500) * 1000L};
        nanosleep(&ts, NULL);
        gb_comm_group_abort(g, "replica 2's step failed (planted)");
        for (int d = 0; d < 2; d++)
            pthread_join(th[d], NULL);
        /* both or neither: the reduce is whole or said to have failed */
        CHECKF(m[0].rc == m[1].rc, "rc %d and %d", m[0].rc, m[1].rc);
        if (m[0].rc) {
            aborted++;
            CHECKF(strstr(m[0].err, "planted") && strstr(m[1].err, "planted"), "%s / %s", m[0].err,
                   m[1].err);
        } else {
            CHECK(m[0].buf[0] == 2.0f && m[1].buf[n - 1] == 2.0f);
        }
        for (int d = 0; d < 2; d++)
            if (m[d].buf) munmap(m[d].buf, n * sizeof(float));
        gb_comm_group_destroy(&g);
    }
    printf("abort mid-reduce: %d of 24 trials aborted, none crashed\n", aborted);
}

static void test_abort(void) {
    char err[GB_ERR_LEN];
    gb_comm_group_t *g = gb_comm_group_new(3, NULL, 0, err, sizeof(err));
    CHECK(g);
    CHECK(gb_comm_aborted(gb_comm_group_member(g, 0), NULL, 0) == 0);
    abort_case_t a[3] = {{0}};
    pthread_t th[3];
    for (int d = 0; d < 3; d++) {
        a[d].c = gb_comm_group_member(g, d);
        a[d].fail = d == 2;
        CHECK(pthread_create(&th[d], NULL, abort_member, &a[d]) == 0);
    }
    for (int d = 0; d < 3; d++)
        pthread_join(th[d], NULL);
    for (int d = 0; d < 2; d++) {
        CHECK(a[d].rc == -1);
        CHECKF(strstr(a[d].err, "replica 2 ran out of memory"), "%s", a[d].err);
        CHECK(a[d].t < 5.0);
    }
    /* the query a replica waiting on a GPU polls: aborted, first reason */
    char why[GB_ERR_LEN] = "";
    CHECK(gb_comm_aborted(gb_comm_group_member(g, 1), why, sizeof(why)) == 1);
    CHECKF(strstr(why, "replica 2 ran out of memory"), "%s", why);
    /* later calls fail at once with the first reason */
    float x = 1;
    CHECK(gb_comm_allreduce(gb_comm_group_member(g, 0), &x, 1, GB_COMM_SUM, err, sizeof(err)) ==
          -1);
    CHECKF(strstr(err, "planted"), "%s", err);
    CHECK(gb_comm_local_barrier(gb_comm_group_member(g, 2), err, sizeof(err)) == -1);
    CHECKF(strstr(err, "planted"), "%s", err);
    gb_comm_group_abort(g, "a second reason");
    CHECK(gb_comm_barrier(gb_comm_group_member(g, 1), err, sizeof(err)) == -1);
    CHECKF(strstr(err, "planted") && !strstr(err, "second"), "%s", err);
    gb_comm_group_destroy(&g);
    /* a group of one replica (a replica process, a node of --devices 1)
     * passes no barrier: its calls fail at once with the reason all the
     * same (they went on, over the ring, after the abort) */
    g = gb_comm_group_new(1, NULL, 0, err, sizeof(err));
    CHECKF(g, "%s", err);
    gb_comm_t *one = gb_comm_group_member(g, 0);
    CHECK(gb_comm_allreduce(one, &x, 1, GB_COMM_SUM, err, sizeof(err)) == 0);
    gb_comm_abort(one, "planted: the step failed");
    CHECK(gb_comm_allreduce(one, &x, 1, GB_COMM_SUM, err, sizeof(err)) == -1);
    CHECKF(strstr(err, "planted: the step failed"), "%s", err);
    CHECK(gb_comm_local_barrier(one, err, sizeof(err)) == -1 && strstr(err, "planted"));
    CHECK(gb_comm_connect(one, err, sizeof(err)) == -1 && strstr(err, "planted"));
    gb_comm_group_destroy(&g);
    /* the plain barrier */
    gb_barrier_t *b = gb_barrier_new(1);
    CHECK(b && gb_barrier_wait(b, err, sizeof(err)) == 0 &&
          gb_barrier_wait(b, err, sizeof(err)) == 0);
    CHECK(gb_barrier_aborted(b, why, sizeof(why)) == 0);
    gb_barrier_abort(b, NULL);
    CHECK(gb_barrier_aborted(b, why, sizeof(why)) == 1 && strcmp(why, "aborted") == 0);
    CHECK(gb_barrier_wait(b, err, sizeof(err)) == -1 && strcmp(err, "aborted") == 0);
    gb_barrier_destroy(&b);
    CHECK(b == NULL && gb_barrier_new(0) == NULL);
}

/* ----------------------------------------------------------------- ring */

#define TMO 3000 /* ms: every wait on a peer in these tests */

typedef struct ring_case {
    int rank, n;
    gb_ring_t *r;
    const unsigned char *id; /* rank 0's */
    size_t id_len;
    size_t count;
    int rc;
    char err[GB_ERR_LEN];
    float *buf[3];
} ring_case_t;

static void *ring_member(void *arg) {
    ring_case_t *c = arg;
    c->rc = gb_ring_connect(c->r, c->id, c->id_len, c->err, sizeof(c->err));
    if (c->rc) return NULL;
    gb_comm_op_t ops[3] = {GB_COMM_SUM, GB_COMM_AVG, GB_COMM_MAX};
    for (int o = 0; o < 3 && c->rc == 0; o++) {
        for (size_t i = 0; i < c->count; i++)
            c->buf[o][i] = input(c->rank, i);
        c->rc = gb_ring_allreduce(
            c->r, c->buf[o], c->count, ops[o] == GB_COMM_MAX ? GB_COMM_MAX : GB_COMM_SUM,
            ops[o] == GB_COMM_AVG ? (float)c->n : 0.0f, c->err, sizeof(c->err));
    }
    return NULL;
}

/* n ring ranks as threads of this process */
static void ring_run(int n, size_t count) {
    char err[GB_ERR_LEN];
    ring_case_t c[3];
    pthread_t th[3];
    unsigned char id[GB_RING_ID_LEN];
    size_t len = 0;
    for (int k = 0; k < n; k++) {
        memset(&c[k], 0, sizeof(c[k]));
        c[k].rank = k;
        c[k].n = n;
        c[k].count = count;
        c[k].r = gb_ring_new(k, n, TMO, err, sizeof(err));
        CHECKF(c[k].r, "%s", err);
        for (int o = 0; o < 3; o++)
            CHECK((c[k].buf[o] = malloc((count + 1) * sizeof(float))));
    }
    CHECK(gb_ring_make_id(c[0].r, id, &len, err, sizeof(err)) == 0 && len == GB_RING_ID_LEN);
    CHECK(gb_ring_make_id(c[1].r, id + 0, &len, err, sizeof(err)) == -1 && strstr(err, "rank 0"));
    CHECK(gb_ring_make_id(c[0].r, id, &len, err, sizeof(err)) == 0);
    for (int k = 0; k < n; k++) {
        c[k].id = id;
        c[k].id_len = len;
        CHECK(pthread_create(&th[k], NULL, ring_member, &c[k]) == 0);
    }
    for (int k = 0; k < n; k++)
        pthread_join(th[k], NULL);
    gb_comm_op_t ops[3] = {GB_COMM_SUM, GB_COMM_AVG, GB_COMM_MAX};
    for (int k = 0; k < n; k++) {
        CHECKF(c[k].rc == 0, "rank %d: %s", k, c[k].err);
        for (int o = 0; o < 3; o++) {
            for (size_t i = 0; i < count; i++)
                CHECKF(c[k].buf[o][i] == expected(ops[o], n, i),
                       "n=%d count=%zu op %d rank %d [%zu]", n, count, o, k, i);
            CHECK(memcmp(c[k].buf[o], c[0].buf[o], count * sizeof(float)) == 0);
        }
    }
    /* a second connect is refused */
    CHECK(gb_ring_connect(c[0].r, id, len, err, sizeof(err)) == -1 && strstr(err, "already"));
    for (int k = 0; k < n; k++) {
        for (int o = 0; o < 3; o++)
            free(c[k].buf[o]);
        gb_ring_destroy(&c[k].r);
        CHECK(c[k].r == NULL);
    }
}

static void test_ring(void) {
    char err[GB_ERR_LEN];
    ring_run(2, 1000);
    ring_run(3, 0);
    ring_run(3, 2); /* fewer elements than ranks: empty segments */
    ring_run(3, 100003);
    ring_run(3, (1u << 20) / 4 * 3 + 5); /* 3 MiB: several staging rounds */
    CHECK(!gb_ring_new(0, 1, TMO, err, sizeof(err)) && strstr(err, "out of range"));
    CHECK(!gb_ring_new(3, 3, TMO, err, sizeof(err)));
    gb_ring_t *r = gb_ring_new(1, 2, TMO, err, sizeof(err));
    CHECK(r);
    float x = 1;
    CHECK(gb_ring_allreduce(r, &x, 1, GB_COMM_SUM, 0, err, sizeof(err)) == -1 &&
          strstr(err, "not connected"));
    unsigned char junk[GB_RING_ID_LEN] = {0};
    CHECK(gb_ring_connect(r, junk, sizeof(junk), err, sizeof(err)) == -1 &&
          strstr(err, "not a ring id"));
    gb_ring_destroy(&r);
    /* GB_COMM_ADDR: bind and advertise that address; a bad one is refused */
    setenv("GB_COMM_ADDR", "127.0.0.1", 1);
    ring_run(2, 77);
    setenv("GB_COMM_ADDR", "not-an-address", 1);
    CHECK(!gb_ring_new(0, 2, TMO, err, sizeof(err)) && strstr(err, "GB_COMM_ADDR"));
    unsetenv("GB_COMM_ADDR");
}

/* ------------------------------------------- the group across 3 nodes */

/* a stand-in for the agent and coordinator: rank 0's id goes to the other
 * ranks, and wait_start returns once every node is waiting */
typedef struct fake_coord {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, waiting;
    unsigned char id[GB_DIST_ID_MAX];
    size_t id_len;
    int published, waits;
} fake_coord_t;

static int fc_publish(gb_dist_t *d, const unsigned char *id, size_t len, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    fake_coord_t *f = d->ctx;
    pthread_mutex_lock(&f->mu);
    memcpy(f->id, id, len);
    f->id_len = len;
    f->published++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    memcpy(d->unique_id, id, len);
    d->unique_id_len = len;
    return 0;
}

static int fc_wait(gb_dist_t *d, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    fake_coord_t *f = d->ctx;
    pthread_mutex_lock(&f->mu);
    f->waits++;
    f->waiting++;
    pthread_cond_broadcast(&f->cv);
    while (f->waiting < f->n)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    d->start_at_ms = d->started_at_ms = 1;
    return 0;
}

enum { NODES = 3, PER = 2 };

typedef struct node {
    fake_coord_t *f;
    gb_dist_t dist;
    gb_comm_group_t *g;
    tcase_t t[PER];
    int rc;
    char err[GB_ERR_LEN];
} node_t;

static void *hier_member(void *arg) {
    tcase_t *t = arg;
    /* the node's own replicas only: no other node takes part */
    t->rc = gb_comm_local_barrier(t->c, t->err, sizeof(t->err));
    if (t->rc == 0) t->rc = gb_comm_connect(t->c, t->err, sizeof(t->err));
    if (t->rc == 0 && t->same) {
        t->same_got = gb_comm_same(t->c, t->v, t->err, sizeof(t->err));
        if (t->same_got < 0) t->rc = -1;
    } else if (t->rc == 0) {
        threads_member(t);
    }
    return NULL;
}

static void *hier_node(void *arg) {
    node_t *nd = arg;
    fake_coord_t *f = nd->f;
    if (nd->dist.rank > 0) { /* the coordinator hands rank 0's id over */
        pthread_mutex_lock(&f->mu);
        while (!f->published)
            pthread_cond_wait(&f->cv, &f->mu);
        memcpy(nd->dist.unique_id, f->id, f->id_len);
        nd->dist.unique_id_len = f->id_len;
        pthread_mutex_unlock(&f->mu);
    }
    nd->g = gb_comm_group_new(PER, &nd->dist, TMO, nd->err, sizeof(nd->err));
    if (!nd->g) {
        nd->rc = -1;
        return NULL;
    }
    pthread_t th[PER];
    for (int d = 0; d < PER; d++) {
        nd->t[d].c = gb_comm_group_member(nd->g, d);
        pthread_create(&th[d], NULL, hier_member, &nd->t[d]);
    }
    for (int d = 0; d < PER; d++)
        pthread_join(th[d], NULL);
    return NULL;
}

/* NODES nodes of PER replicas (their tcases set by the caller), each a
 * thread that makes its group and runs hier_member on every replica, with
 * f handing rank 0's id over; returns once all have ended. */
static void run_nodes(node_t *nodes, fake_coord_t *f) {
    *f = (fake_coord_t){.n = NODES};
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    pthread_t th[NODES];
    for (int k = 0; k < NODES; k++) {
        nodes[k].f = f;
        nodes[k].dist = (gb_dist_t){.rank = k,
                                    .n_nodes = NODES,
                                    .world_size = NODES * PER,
                                    .publish_id = fc_publish,
                                    .wait_start = fc_wait,
                                    .ctx = f};
        CHECK(pthread_create(&th[k], NULL, hier_node, &nodes[k]) == 0);
    }
    for (int k = 0; k < NODES; k++)
        pthread_join(th[k], NULL);
}

static void test_hier(void) {
    gb_comm_op_t ops[] = {GB_COMM_SUM, GB_COMM_AVG, GB_COMM_MAX};
    size_t sizes[] = {5, 4099, 300001};
    for (int oi = 0; oi < 3; oi++) {
        size_t n = sizes[oi];
        fake_coord_t f;
        node_t nodes[NODES];
        memset(nodes, 0, sizeof(nodes));
        for (int k = 0; k < NODES; k++)
            for (int d = 0; d < PER; d++) {
                nodes[k].t[d] = (tcase_t){.n = n, .op = ops[oi]};
                CHECK((nodes[k].t[d].buf = malloc(n * sizeof(float))));
            }
        run_nodes(nodes, &f);
        CHECK(f.published == 1 && f.waits == NODES); /* once per node, not per replica */
        for (int k = 0; k < NODES; k++) {
            CHECKF(nodes[k].g, "%s", nodes[k].err);
            CHECK(gb_comm_group_has_ring(nodes[k].g));
            for (int d = 0; d < PER; d++) {
                tcase_t *t = &nodes[k].t[d];
                CHECKF(t->rc == 0, "node %d replica %d: %s", k, d, t->err);
                CHECK(t->c->rank == k * PER + d && t->c->world == NODES * PER);
                CHECK(strcmp(t->c->transport, "threads+tcp") == 0);
                for (size_t i = 0; i < n; i++)
                    CHECKF(t->buf[i] == expected(ops[oi], NODES * PER, i),
                           "op %d node %d replica %d [%zu]: %g, want %g", oi, k, d, i, t->buf[i],
                           expected(ops[oi], NODES * PER, i));
                CHECK(memcmp(t->buf, nodes[0].t[0].buf, n * sizeof(float)) == 0);
            }
        }
        for (int k = 0; k < NODES; k++) {
            for (int d = 0; d < PER; d++)
                free(nodes[k].t[d].buf);
            gb_comm_group_destroy(&nodes[k].g);
        }
        pthread_mutex_destroy(&f.mu);
        pthread_cond_destroy(&f.cv);
    }
    /* a dist that does not fit the replicas; a collective across nodes
     * before connect */
    char err[GB_ERR_LEN];
    gb_dist_t bad = {
        .rank = 0, .n_nodes = 2, .world_size = 3, .publish_id = fc_publish, .wait_start = fc_wait};
    CHECK(!gb_comm_group_new(2, &bad, 0, err, sizeof(err)) && strstr(err, "does not fit"));
    bad.world_size = 2;
    gb_comm_group_t *g = gb_comm_group_new(1, &bad, 0, err, sizeof(err));
    CHECK(g);
    float x = 1;
    CHECK(gb_comm_allreduce(gb_comm_group_member(g, 0), &x, 1, GB_COMM_AVG, err, sizeof(err)) ==
          -1);
    CHECKF(strstr(err, "needs the ring") && !gb_peer_gone(err), "%s", err);
    gb_comm_group_destroy(&g);
}

/* ----------------------------------------------------------------- same */

/* gb_comm_same over nodes and their threads: 1 on every replica when all
 * passed the same value, 0 on every one when one replica's differs (in
 * either half, by one bit); what the CPU backend asks of the nodes'
 * gradient layouts before their buckets meet. */
static void test_same(void) {
    static const struct {
        uint32_t odd; /* node 1 replica 1's value; the others 0xdeadbeef */
        int want;
    } cases[] = {{0xdeadbeefu, 1}, {0xdeadbeeeu, 0}, {0xdeafbeefu, 0}, {0x5eadbeefu, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fake_coord_t f;
        node_t nodes[NODES];
        memset(nodes, 0, sizeof(nodes));
        for (int nd = 0; nd < NODES; nd++)
            for (int d = 0; d < PER; d++)
                nodes[nd].t[d] =
                    (tcase_t){.same = 1, .v = nd == 1 && d == 1 ? cases[k].odd : 0xdeadbeefu};
        run_nodes(nodes, &f);
        for (int nd = 0; nd < NODES; nd++) {
            CHECKF(nodes[nd].g, "%s", nodes[nd].err);
            for (int d = 0; d < PER; d++) {
                tcase_t *t = &nodes[nd].t[d];
                CHECKF(t->rc == 0, "node %d replica %d: %s", nd, d, t->err);
                CHECKF(t->same_got == cases[k].want, "case %zu node %d replica %d: %d", k, nd, d,
                       t->same_got);
            }
            gb_comm_group_destroy(&nodes[nd].g);
        }
        pthread_mutex_destroy(&f.mu);
        pthread_cond_destroy(&f.cv);
    }
}

/* ---------------------------------------------------------------- nonce */

static int connect_to(const unsigned char *id) {
    uint32_t ip;
    memcpy(&ip, id + 24, 4);
    uint16_t port = (uint16_t)(id[28] << 8 | id[29]);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = ip, .sin_port = htons(port)};
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    return fd;
}

static void test_nonce(void) {
    char err[GB_ERR_LEN];
    /* 1. a stranger (right format, wrong nonce) is refused and told why;
     * the real ranks still join */
    ring_case_t c[2];
    pthread_t th[2];
    unsigned char id[GB_RING_ID_LEN];
    size_t len;
    for (int k = 0; k < 2; k++) {
        memset(&c[k], 0, sizeof(c[k]));
        c[k].rank = k;
        c[k].n = 2;
        c[k].count = 10;
        CHECK((c[k].r = gb_ring_new(k, 2, TMO, err, sizeof(err))));
        for (int o = 0; o < 3; o++)
            CHECK((c[k].buf[o] = malloc(11 * sizeof(float))));
    }
    CHECK(gb_ring_make_id(c[0].r, id, &len, err, sizeof(err)) == 0);
    c[0].id = c[1].id = id;
    c[0].id_len = c[1].id_len = len;
    CHECK(pthread_create(&th[0], NULL, ring_member, &c[0]) == 0);
    int fd = connect_to(id);
    unsigned char hello[44] = {0};
    uint32_t bom = 0x01020304u;
    memcpy(hello, "GBR1", 4);
    memcpy(hello + 4, &bom, 4);
    hello[8] = 1;  /* join */
    hello[15] = 1; /* rank 1 */
    hello[19] = 2; /* of 2 */
    memcpy(hello + 28, id + 8, 16);
    hello[28] ^= 0x80; /* one bit of the nonce */
    CHECK(send(fd, hello, sizeof(hello), 0) == (ssize_t)sizeof(hello));
    unsigned char reply[8];
    size_t got = 0;
    while (got < sizeof(reply)) {
        ssize_t k = recv(fd, reply + got, sizeof(reply) - got, 0);
        CHECK(k > 0);
        got += (size_t)k;
    }
    CHECK(memcmp(reply, "GBRW", 4) == 0 && reply[7] == 1); /* status 1: wrong nonce */
    close(fd);
    CHECK(pthread_create(&th[1], NULL, ring_member, &c[1]) == 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        CHECKF(c[k].rc == 0, "rank %d: %s", k, c[k].err);
        CHECK(c[k].buf[0][3] == expected(GB_COMM_SUM, 2, 3));
        gb_ring_destroy(&c[k].r);
    }
    /* 2. a rank given a tampered id: refused, and rank 0 times out naming it */
    for (int k = 0; k < 2; k++)
        CHECK((c[k].r = gb_ring_new(k, 2, 1000, err, sizeof(err))));
    CHECK(gb_ring_make_id(c[0].r, id, &len, err, sizeof(err)) == 0);
    unsigned char bad[GB_RING_ID_LEN];
    memcpy(bad, id, len);
    bad[8 + 5] ^= 1;
    c[0].id = id;
    c[1].id = bad;
    double t0 = now_s();
    for (int k = 0; k < 2; k++)
        CHECK(pthread_create(&th[k], NULL, ring_member, &c[k]) == 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    CHECK(c[1].rc == -1);
    CHECKF(strstr(c[1].err, "refused this rank: wrong nonce"), "%s", c[1].err);
    CHECKF(!gb_peer_gone(c[1].err), "its own fault, not a peer's: %s", c[1].err);
    CHECK(c[0].rc == -1);
    CHECKF(strstr(c[0].err, "waited for rank(s) 1 to join") && strstr(c[0].err, "wrong nonce"),
           "%s", c[0].err);
    CHECK(now_s() - t0 < 10);
    for (int k = 0; k < 2; k++) {
        gb_ring_destroy(&c[k].r);
        for (int o = 0; o < 3; o++)
            free(c[k].buf[o]);
    }
    /* 3. an id for another node count */
    gb_ring_t *r = gb_ring_new(0, 3, 1000, err, sizeof(err));
    CHECK(r && gb_ring_make_id(r, id, &len, err, sizeof(err)) == 0);
    gb_ring_t *r2 = gb_ring_new(1, 2, 1000, err, sizeof(err));
    CHECK(r2 && gb_ring_connect(r2, id, len, err, sizeof(err)) == -1 && strstr(err, "3 nodes"));
    gb_ring_destroy(&r);
    gb_ring_destroy(&r2);
}

/* ----------------------------------------------------------------- dead */

/* ranks 0 and 1 in this process, rank 2 a child process that joins, takes
 * part in one all-reduce, then is killed with SIGKILL during the second */
static void test_dead(void) {
    char err[GB_ERR_LEN];
    int pfd[2], done_fd[2];
    CHECK(pipe(pfd) == 0 && pipe(done_fd) == 0);
    ring_case_t c[2];
    unsigned char id[GB_RING_ID_LEN];
    size_t len;
    for (int k = 0; k < 2; k++) {
        memset(&c[k], 0, sizeof(c[k]));
        c[k].rank = k;
        c[k].n = 3;
        c[k].count = 1000;
        CHECK((c[k].r = gb_ring_new(k, 3, 20000, err, sizeof(err))));
        for (int o = 0; o < 3; o++)
            CHECK((c[k].buf[o] = malloc(1001 * sizeof(float))));
    }
    CHECK(gb_ring_make_id(c[0].r, id, &len, err, sizeof(err)) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        gb_ring_t *r = gb_ring_new(2, 3, 20000, err, sizeof(err));
        float buf[1000];
        for (int i = 0; i < 1000; i++)
            buf[i] = input(2, (size_t)i);
        if (!r || gb_ring_connect(r, id, len, err, sizeof(err)) ||
            gb_ring_allreduce(r, buf, 1000, GB_COMM_SUM, 0, err, sizeof(err)))
            _exit(3);
        char one = 1;
        if (write(done_fd[1], &one, 1) != 1) _exit(4);
        for (;;)
            pause(); /* killed here, inside the job, before the next collective */
    }
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        c[k].id = id;
        c[k].id_len = len;
        CHECK(pthread_create(&th[k], NULL, ring_member, &c[k]) == 0);
    }
    /* the first collective (sum) completes on all three; the second (avg)
     * waits for rank 2, which dies */
    char one;
    CHECK(read(done_fd[0], &one, 1) == 1);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    double t0 = now_s();
    CHECK(kill(child, SIGKILL) == 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    double dt = now_s() - t0;
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));
    for (int k = 0; k < 2; k++) {
        CHECK(c[k].rc == -1);
        CHECKF(strstr(c[k].err, "closed the connection"), "rank %d: %s", k, c[k].err);
        CHECKF(gb_peer_gone(c[k].err), "rank %d: a peer's fault: %s", k, c[k].err);
        CHECK(c[k].buf[0][9] == expected(GB_COMM_SUM, 3, 9)); /* the first one was right */
    }
    /* rank 1 sends to rank 2; rank 0 receives from it */
    CHECKF(strstr(c[0].err, "rank 2"), "%s", c[0].err);
    CHECKF(dt < 5.0, "the survivors took %.1f s to notice (timeout 20 s)", dt);
    for (int k = 0; k < 2; k++) {
        gb_ring_destroy(&c[k].r);
        for (int o = 0; o < 3; o++)
            free(c[k].buf[o]);
    }
    close(pfd[0]);
    close(pfd[1]);
    close(done_fd[0]);
    close(done_fd[1]);
}

/* --------------------------------------------------------------- silent */

typedef struct sleeper {
    gb_ring_t *r;
    const unsigned char *id;
    size_t len;
    int ms;
} sleeper_t;

static void *join_then_sleep(void *arg) {
    sleeper_t *s = arg;
    char err[GB_ERR_LEN];
    if (gb_ring_connect(s->r, s->id, s->len, err, sizeof(err)) == 0) {
        struct timespec ts = {s->ms / 1000, (long)(s->ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_silent(void) {
    char err[GB_ERR_LEN];
    /* 1. rank 1 never joins: rank 0 gives up after its timeout, naming it */
    gb_ring_t *r0 = gb_ring_new(0, 2, 500, err, sizeof(err));
    unsigned char id[GB_RING_ID_LEN];
    size_t len;
    CHECK(r0 && gb_ring_make_id(r0, id, &len, err, sizeof(err)) == 0);
    double t0 = now_s();
    CHECK(gb_ring_connect(r0, id, len, err, sizeof(err)) == -1);
    double dt = now_s() - t0;
    CHECKF(strstr(err, "waited for rank(s) 1 to join: timed out"), "%s", err);
    CHECKF(gb_peer_gone(err), "%s", err);
    CHECK(dt >= 0.45 && dt < 5);
    gb_ring_destroy(&r0);
    /* 2. rank 1 joins, then never takes part in the all-reduce */
    r0 = gb_ring_new(0, 2, 500, err, sizeof(err));
    gb_ring_t *r1 = gb_ring_new(1, 2, 500, err, sizeof(err));
    CHECK(r0 && r1 && gb_ring_make_id(r0, id, &len, err, sizeof(err)) == 0);
    sleeper_t s = {.r = r1, .id = id, .len = len, .ms = 2000};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, join_then_sleep, &s) == 0);
    CHECKF(gb_ring_connect(r0, id, len, err, sizeof(err)) == 0, "%s", err);
    float buf[16] = {0};
    t0 = now_s();
    CHECK(gb_ring_allreduce(r0, buf, 16, GB_COMM_SUM, 0, err, sizeof(err)) == -1);
    dt = now_s() - t0;
    CHECKF(strstr(err, "no progress for 500 ms receiving from rank 1"), "%s", err);
    CHECKF(gb_peer_gone(err), "%s", err);
    CHECK(dt >= 0.45 && dt < 1.9);
    pthread_join(th, NULL);
    gb_ring_destroy(&r0);
    gb_ring_destroy(&r1);
}

/* -------------------------------------------------------------- reducer */

typedef struct rcase {
    gb_comm_t *c;
    const gb_buckets_t *bk;
    const int *order; /* tensor completion order */
    int n_order;
    float *slab;
    size_t total;
    int rc;
    char err[GB_ERR_LEN];
} rcase_t;

static void *reducer_member(void *arg) {
    rcase_t *t = arg;
    gb_reducer_t *r = gb_reducer_new(t->c, t->bk, t->slab, t->err, sizeof(t->err));
    if (!r) {
        t->rc = -1;
        return NULL;
    }
    for (int step = 0; step < 3 && t->rc == 0; step++) {
        for (size_t i = 0; i < t->total; i++)
            t->slab[i] = input(t->c->rank + step, i);
        gb_reducer_begin(r);
        for (int k = 0; k < t->n_order; k++)
            gb_reducer_tensor_done(r, t->order[k]);
        t->rc = gb_reducer_finish(r, t->err, sizeof(t->err));
        if (t->rc) break;
        for (size_t i = 0; i < t->total && t->rc == 0; i++) {
            float s = 0;
            for (int g = 0; g < t->c->world; g++)
                s += input(g + step, i);
            if (t->slab[i] != s / (float)t->c->world) {
                snprintf(t->err, sizeof(t->err), "step %d element %zu: %g", step, i, t->slab[i]);
                t->rc = -1;
            }
        }
    }
    gb_reducer_stats_t st;
    gb_reducer_stats(r, &st);
    if (t->rc == 0 && st.steps != 3) t->rc = -1;
    gb_reducer_destroy(&r);
    return NULL;
}

static void test_reducer(void) {
    char err[GB_ERR_LEN];
    size_t off[] = {0, 100, 1000, 5000, 5100}, cnt[] = {100, 900, 4000, 100, 3000};
    gb_buckets_t *bk = gb_buckets_new(off, cnt, 5, 8192, 2000, err, sizeof(err));
    CHECKF(bk && bk->n >= 3, "%s", err);
    int order[] = {4, 3, 2, 1, 0};
    int partial[] = {4, 2}; /* some never reported: finish queues them */
    for (int pass = 0; pass < 2; pass++) {
        gb_comm_group_t *g = gb_comm_group_new(3, NULL, 0, err, sizeof(err));
        CHECK(g);
        rcase_t t[3];
        pthread_t th[3];
        for (int d = 0; d < 3; d++) {
            t[d] = (rcase_t){.c = gb_comm_group_member(g, d),
                             .bk = bk,
                             .order = pass ? partial : order,
                             .n_order = pass ? 2 : 5,
                             .total = 8192};
            CHECK((t[d].slab = malloc(8192 * sizeof(float))));
            CHECK(pthread_create(&th[d], NULL, reducer_member, &t[d]) == 0);
        }
        for (int d = 0; d < 3; d++)
            pthread_join(th[d], NULL);
        for (int d = 0; d < 3; d++) {
            CHECKF(t[d].rc == 0, "replica %d: %s", d, t[d].err);
            free(t[d].slab);
        }
        gb_comm_group_destroy(&g);
    }
    /* a failing collective: finish reports it (the group was aborted) */
    gb_comm_group_t *g = gb_comm_group_new(2, NULL, 0, err, sizeof(err));
    CHECK(g);
    float *slab = calloc(8192, sizeof(float));
    gb_reducer_t *r = gb_reducer_new(gb_comm_group_member(g, 0), bk, slab, err, sizeof(err));
    CHECK(r && slab);
    gb_comm_group_abort(g, "replica 1 died (planted)");
    gb_reducer_begin(r);
    gb_reducer_tensor_done(r, 4);
    CHECK(gb_reducer_finish(r, err, sizeof(err)) == -1);
    CHECKF(strstr(err, "planted"), "%s", err);
    gb_reducer_begin(r);
    CHECK(gb_reducer_finish(r, err, sizeof(err)) == -1);
    gb_reducer_destroy(&r);
    CHECK(r == NULL);
    gb_reducer_destroy(&r);
    free(slab);
    gb_comm_group_destroy(&g);
    gb_buckets_destroy(&bk);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    signal(SIGPIPE, SIG_IGN);
    const char *c = argv[1];
    if (strcmp(c, "buckets") == 0)
        test_buckets();
    else if (strcmp(c, "threads") == 0)
        test_threads();
    else if (strcmp(c, "abort") == 0)
        test_abort();
    else if (strcmp(c, "abort_mid") == 0)
        test_abort_mid();
    else if (strcmp(c, "ring") == 0)
        test_ring();
    else if (strcmp(c, "same") == 0)
        test_same();
    else if (strcmp(c, "hier") == 0)
        test_hier();
    else if (strcmp(c, "nonce") == 0)
        test_nonce();
    else if (strcmp(c, "dead") == 0)
        test_dead();
    else if (strcmp(c, "silent") == 0)
        test_silent();
    else if (strcmp(c, "reducer") == 0)
        test_reducer();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    printf("%s: ok\n", c);
    return 0;
}
