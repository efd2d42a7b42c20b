/* test_cuda_dp.c (GPU, label gpu) - the NCCL path of the CUDA backend:
 *   - one GPU, a one-rank communicator: three training steps (the step
 *     captured in a CUDA graph from the second, NCCL inside it) end where
 *     they end without a communicator (an average over one rank is the
 *     value itself; within the step tolerance, as each run picks its own
 *     cuDNN algorithms; the same bits are reported when they are), per
 *     precision; the report names the transport and says interconnect
 *     "none" (nothing to connect);
 *   - the allreduce op on one GPU: every size checked, and a planted fault
 *     (one wrong input element) caught;
 *   - NCCL's environment is set once per process: another interconnect
 *     mode later is refused with the reason;
 *   - with two or more GPUs: two replicas on two threads end with
 *     identical weights, and the allreduce op over both checks out;
 *   - with two or more GPUs, a replica that leaves, the replicas meeting
 *     before every step as the engine's do: before its first step without
 *     a word (a set-up failure: the backend aborts the group as the replica
 *     is destroyed, which must open the other's barrier); and in the middle
 *     of step 2, after the barrier, with the group aborted as the engine's
 *     run_fail does: the other's collectives of that step then wait on the
 *     GPU for a peer that never launches its part, and its polled wait must
 *     end the step with the group's reason (ncclCommAbort ends the kernels)
 *     instead of hanging. The process must then make and use a new
 *     communicator. A watchdog (alarm) fails the test rather than let a
 *     hang hold the machine.
 * Skips (77) without a usable GPU. */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "cuda_dp.h"
#include "gpu_common.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern const gb_backend_ops_t gb_cuda_backend_ops;

enum { BATCH = 4, IMAGE = 32, CLASSES = 10, STEPS = 3 };

enum { LEAVE_QUIET = 1, LEAVE_MID = 2 };

typedef struct rep {
    const gb_model_t *m;
    const gb_train_config_t *cfg;
    gb_comm_t *comm; /* NULL: no communicator */
    int device;
    const float *params, *buffers;
    float *out_params, *out_grads;
    char *details;
    int rc;
    char err[GB_ERR_LEN];
    /* a planted departure at step leave_step: LEAVE_QUIET leaves before
     * the step's barrier without a word; LEAVE_MID passes the barrier, lets
     * the others launch the step, aborts the comm group (as the engine does
     * for a replica that fails) and leaves. failed_at: the step whose
     * barrier or run failed, or -1 */
    int leaves, leave_step, failed_at;
} rep_t;

static void *train(void *arg) {
    rep_t *r = arg;
    const gb_backend_ops_t *o = &gb_cuda_backend_ops;
    float *buf = malloc((r->m->n_buffers + 1) * sizeof(float));
    void *st = NULL;
    int64_t nbt;
    gb_replica_report_t rep = {0, NULL};
    r->rc = -1;
    r->failed_at = -1;
    if (!buf || o->create(r->m, r->cfg, r->device, r->comm, &st, r->err, sizeof(r->err)) ||
        o->set_state(st, r->params, r->buffers, 0, r->err, sizeof(r->err)) ||
        o->set_batch(st, NULL, NULL, r->err, sizeof(r->err)))
        goto out;
    for (int s = 0; s < STEPS; s++) {
        gb_step_out_t so;
        int leaving = r->leaves && s == r->leave_step;
        if (leaving && r->leaves == LEAVE_QUIET) {
            snprintf(r->err, sizeof(r->err), "planted: replica %d left before step %d", r->device,
                     s);
            goto out;
        }
        /* the replicas meet before every step, as in the engine (a no-op
         * with one replica) */
        if (r->comm && gb_comm_local_barrier(r->comm, r->err, sizeof(r->err))) {
            r->failed_at = s;
            goto out;
        }
        if (leaving) { /* LEAVE_MID: the others are in step s by now */
            struct timespec ts = {0, 300 * 1000 * 1000};
            nanosleep(&ts, NULL);
            snprintf(r->err, sizeof(r->err), "planted: replica %d left in step %d", r->device, s);
            gb_comm_abort(r->comm, r->err);
            goto out;
        }
        if (o->step(st, &so, r->err, sizeof(r->err))) {
            r->failed_at = s;
            goto out;
        }
    }
    if (o->get_state(st, r->out_params, buf, &nbt, r->err, sizeof(r->err)) ||
        o->get_grads(st, r->out_grads, r->err, sizeof(r->err)) ||
        o->report(st, &rep, r->err, sizeof(r->err)))
        goto out;
    r->details = rep.details_json;
    r->rc = 0;
out:
    /* as the engine's run_fail: a replica that failed aborts its group, so
     * that no other waits for it (a planted departure says itself) */
    if (r->rc != 0 && r->comm && !r->leaves) gb_comm_abort(r->comm, r->err);
    if (st) o->destroy(&st);
    free(buf);
    return NULL;
}

/* ||a - ref|| / ||ref||, in double; NaN anywhere makes it NaN (fails) */
static double rel_l2f(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

static void one_gpu(gb_precision_t prec) {
    /* fp16 and bf16 at 64x64, as test_cuda_step (step_rule.h says why: at
     * 32x32 layer4's batch norm amplifies 16-bit rounding about tenfold;
     * fp16 passed there on the H200 by a margin of only 2.3) */
    gb_model_t *m = gb_gpu_tiny_model(gb_step_image(prec), CLASSES);
    gb_train_config_t cfg;
    /* as test_cuda_step: lr 1e-3, weight decay 1, a conditioned state (at lr
     * 0.1 from torchvision-like batch norm, two fp32 runs that differ only
     * in rounding part after a flipped ReLU mask: step_rule.h) */
    gb_gpu_step_cfg(&cfg, m, prec, BATCH);
    cfg.bucket_mb = 0.01; /* several buckets on the tiny model */
    float *params = malloc(m->n_params * sizeof(float)), *buffers = malloc(m->n_buffers * 4 + 4);
    float *p0 = malloc(m->n_params * 4), *g0 = malloc(m->n_params * 4);
    float *p1 = malloc(m->n_params * 4), *g1 = malloc(m->n_params * 4);
    CHECK(params && buffers && p0 && g0 && p1 && g1);
    gb_gpu_conditioned_state(m, params, buffers, 21);
    char err[GB_ERR_LEN];
    rep_t a = {m, &cfg, NULL, 0, params, buffers, p0, g0, NULL, 0, "", 0, 0, -1};
    train(&a);
    CHECKF(a.rc == 0, "%s: %s", gb_prec_str(prec), a.err);
    gb_comm_group_t *g = gb_comm_group_new(1, NULL, 0, err, sizeof(err));
    CHECKF(g, "%s", err);
    rep_t b = {m, &cfg, gb_comm_group_member(g, 0), 0, params, buffers, p1, g1, NULL, 0, "", 0,
               0, -1};
    train(&b);
    CHECKF(b.rc == 0, "%s with NCCL: %s", gb_prec_str(prec), b.err);
    /* The two runs make their own cudnnFind, which may pick other
     * algorithms, and some (backward ALGO_0, atomics) are not bitwise
     * reproducible anyway: the same bits are reported, not required. A
     * broken NCCL path (a bucket averaged with garbage, the update racing the
     * all-reduce, a graph that lost a node) is far outside a step's
     * tolerance. */
    int same = memcmp(p0, p1, m->n_params * sizeof(float)) == 0 &&
               memcmp(g0, g1, m->n_params * sizeof(float)) == 0;
    double ep = rel_l2f(p1, p0, m->n_params), eg = rel_l2f(g1, g0, m->n_params);
    /* all parameters as one vector: held to the every-tensor bound */
    CHECKF(ep <= gb_step_worst(prec) && eg <= gb_step_worst(prec),
           "%s: after %d steps with a one-rank communicator: weights rel %.3e, gradients rel "
           "%.3e (tol %.1e)",
           gb_prec_str(prec), STEPS, ep, eg, gb_step_worst(prec));
    CHECKF(strstr(b.details, "\"interconnect\":\"none\"") &&
               strstr(b.details, "\"transport\":\"nccl\"") &&
               strstr(b.details, "\"nccl_transports\":[]"),
           "%s", b.details);
    CHECKF(strstr(b.details, "\"cuda_graph\":true"), "one GPU per process captures: %s", b.details);
    {
        char want[64]; /* the weights' gradients move in the step's type (fp32 in tf32) */
        snprintf(want, sizeof want, "\"grad_dtype\":\"%s\"",
                 prec == GB_PREC_FP16   ? "fp16"
                 : prec == GB_PREC_BF16 ? "bf16"
                                        : "fp32");
        CHECKF(strstr(b.details, want), "%s not in %s", want, b.details);
    }
    printf("%s: one-rank NCCL, %d steps: %s (weights rel %.2e, gradients rel %.2e)\n",
           gb_prec_str(prec), STEPS, same ? "bit-identical to no communicator" : "within tolerance",
           ep, eg);
    free(a.details);
    free(b.details);
    gb_comm_group_destroy(&g);
    free(params);
    free(buffers);
    free(p0);
    free(g0);
    free(p1);
    free(g1);
    gb_model_destroy(&m);
}

typedef struct arep {
    gb_comm_t *comm;
    gb_allreduce_config_t *cfg;
    gb_allreduce_size_t sizes[32];
    int n, rc;
    char *details;
    char err[GB_ERR_LEN];
} arep_t;

static void *ar(void *arg) {
    arep_t *a = arg;
    a->rc = gb_cuda_backend_ops.allreduce(a->comm->local_rank, a->comm, a->cfg, a->sizes, a->n,
                                          &a->details, a->err, sizeof(a->err));
    return NULL;
}

/* the allreduce op over `gpus` GPUs of this process; returns how many
 * sizes checked out on replica 0 */
static int allreduce(int gpus, int fault_rank, int *n_sizes) {
    char err[GB_ERR_LEN];
    gb_allreduce_config_t cfg;
    memset(&cfg, 0, sizeof(cfg)); /* (the engine's defaults are not in this build) */
    snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
    snprintf(cfg.interconnect, sizeof(cfg.interconnect), "auto");
    cfg.warmup = 1;
    cfg.devices = gpus;
    cfg.iters = 5;
    cfg.fault_rank = fault_rank;
    gb_comm_group_t *g = gb_comm_group_new(gpus, NULL, 0, err, sizeof(err));
    CHECK(g);
    arep_t a[8];
    pthread_t th[8];
    int n = 0;
    for (size_t b = 4; b <= ((size_t)4 << 20); b *= 4)
        n++;
    for (int d = 0; d < gpus; d++) {
        memset(&a[d], 0, sizeof(a[d]));
        a[d].comm = gb_comm_group_member(g, d);
        a[d].cfg = &cfg;
        a[d].n = n;
        int k = 0;
        for (size_t b = 4; b <= ((size_t)4 << 20); b *= 4, k++) {
            a[d].sizes[k].bytes = b;
            a[d].sizes[k].count = b / 4;
        }
        CHECK(pthread_create(&th[d], NULL, ar, &a[d]) == 0);
    }
    for (int d = 0; d < gpus; d++)
        pthread_join(th[d], NULL);
    int ok = 0;
    for (int d = 0; d < gpus; d++) {
        CHECKF(a[d].rc == 0, "allreduce on GPU %d: %s", d, a[d].err);
        for (int k = 0; k < n; k++) {
            /* one rank: an in-place sum is no work at all, and two events
             * back to back may read 0 ms apart */
            CHECK((a[d].sizes[k].time_us > 0 || (gpus == 1 && a[d].sizes[k].time_us == 0)) &&
                  a[d].sizes[k].ok == a[0].sizes[k].ok);
            CHECK(a[d].sizes[k].time_us == a[0].sizes[k].time_us); /* the job's maximum */
        }
        CHECKF(a[d].details && strstr(a[d].details, "\"transport\":\"nccl\""), "%s",
               a[d].details ? a[d].details : "(none)");
    }
    for (int k = 0; k < n; k++)
        ok += a[0].sizes[k].ok;
    for (int d = 0; d < gpus; d++)
        free(a[d].details);
    gb_comm_group_destroy(&g);
    *n_sizes = n;
    return ok;
}

/* Two replicas of the tiny model on GPUs 0 and 1, one thread each, from
 * the same initial state, with buckets small enough to be several; replica
 * 1 leaves at `leave_step` as `leaves` says (0: it does not). Run to the
 * end; pair_free frees what pair_run made. */
typedef struct pair {
    gb_model_t *m;
    gb_train_config_t cfg;
    float *params, *buffers, *p[2], *gr[2];
    gb_comm_group_t *g;
    rep_t r[2];
} pair_t;

static void pair_run(pair_t *P, int leaves, int leave_step) {
    P->m = gb_gpu_tiny_model(IMAGE, CLASSES);
    gb_gpu_cfg(&P->cfg, P->m, GB_PREC_FP32, BATCH);
    P->cfg.bucket_mb = 0.01;
    P->params = malloc(P->m->n_params * 4);
    P->buffers = malloc(P->m->n_buffers * 4 + 4);
    CHECK(P->params && P->buffers);
    gb_model_init(P->m, P->params, P->buffers, P->cfg.seed);
    char err[GB_ERR_LEN];
    P->g = gb_comm_group_new(2, NULL, 0, err, sizeof(err));
    CHECKF(P->g, "%s", err);
    pthread_t th[2];
    if (leaves) alarm(120); /* a hang fails the test (SIGALRM) rather than hold the machine */
    for (int d = 0; d < 2; d++) {
        CHECK((P->p[d] = malloc(P->m->n_params * 4)) && (P->gr[d] = malloc(P->m->n_params * 4)));
        P->r[d] = (rep_t){.m = P->m,
                          .cfg = &P->cfg,
                          .comm = gb_comm_group_member(P->g, d),
                          .device = d,
                          .params = P->params,
                          .buffers = P->buffers,
                          .out_params = P->p[d],
                          .out_grads = P->gr[d],
                          .leaves = d == 1 ? leaves : 0,
                          .leave_step = d == 1 ? leave_step : 0,
                          .failed_at = -1};
        CHECK(pthread_create(&th[d], NULL, train, &P->r[d]) == 0);
    }
    for (int d = 0; d < 2; d++)
        pthread_join(th[d], NULL);
    if (leaves) alarm(0);
}

static void pair_free(pair_t *P) {
    for (int d = 0; d < 2; d++) {
        free(P->r[d].details);
        free(P->p[d]);
        free(P->gr[d]);
    }
    gb_comm_group_destroy(&P->g);
    free(P->params);
    free(P->buffers);
    gb_model_destroy(&P->m);
}

static void two_gpus(void) {
    pair_t P;
    pair_run(&P, 0, -1);
    for (int d = 0; d < 2; d++)
        CHECKF(P.r[d].rc == 0, "replica %d: %s", d, P.r[d].err);
    CHECK(memcmp(P.p[0], P.p[1], P.m->n_params * 4) == 0);
    CHECK(memcmp(P.gr[0], P.gr[1], P.m->n_params * 4) == 0);
    printf("2 GPUs: identical weights after %d steps; %s\n", STEPS, P.r[0].details);
    pair_free(&P);
}

/* Two replicas; replica 1 leaves at step `step` (`how`: LEAVE_QUIET,
 * LEAVE_MID). Replica 0 must fail at that step, within the watchdog, with
 * `why` in its reason. */
static void one_leaves(int step, int how, const char *why) {
    pair_t P;
    pair_run(&P, how, step);
    const rep_t *r = P.r;
    CHECKF(r[1].rc != 0 && strstr(r[1].err, "planted"), "replica 1: rc %d, %s", r[1].rc, r[1].err);
    CHECKF(r[0].rc != 0, "replica 0 ended its %d steps though replica 1 left before step %d", STEPS,
           step);
    CHECKF(r[0].failed_at == step && strstr(r[0].err, why),
           "replica 0 failed at step %d (replica 1 left at %d): %s", r[0].failed_at, step,
           r[0].err);
    printf("2 GPUs, replica 1 left %s step %d: replica 0 stopped there: %s\n",
           how == LEAVE_QUIET ? "before" : "in", step, r[0].err);
    pair_free(&P);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut short keeps its lines */
    /* fp16 starts at a scale this tiny model does not overflow (the default
     * 65536 skips the first steps, and a skipped last step leaves no
     * gradient to compare) */
    setenv("GB_CUDA_LOSS_SCALE", "64", 1);
    gb_skip_without_gpu("test_cuda_dp");
    int gpus = 0;
    CHECK(cudaGetDeviceCount(&gpus) == cudaSuccess);
    gb_precision_t precs[] = {GB_PREC_FP32, GB_PREC_FP16, GB_PREC_BF16};
    for (int i = 0; i < 3; i++)
        one_gpu(precs[i]);
    int n = 0;
    int ok = allreduce(1, -1, &n);
    CHECKF(ok == n, "one GPU: %d of %d sizes checked out", ok, n);
    ok = allreduce(1, 0, &n);
    CHECKF(ok == 0, "a planted fault went unseen at %d of %d sizes", ok, n);
    /* NCCL read its environment for "auto": another mode is refused */
    int nv;
    char err[GB_ERR_LEN];
    CHECK(gb_cuda_nccl_setup("pcie", 1, &nv, err, sizeof(err)) == -1);
    CHECKF(strstr(err, "process of its own"), "%s", err);
    CHECK(gb_cuda_nccl_setup("auto", 1, &nv, err, sizeof(err)) == 0);
    if (gpus >= 2) {
        two_gpus();
        ok = allreduce(2, -1, &n);
        CHECKF(ok == n, "two GPUs: %d of %d sizes checked out", ok, n);
        one_leaves(0, LEAVE_QUIET, "a replica ended before its first step");
        one_leaves(2, LEAVE_MID, "planted");
        /* the aborted communicators are gone: a new one works */
        ok = allreduce(2, -1, &n);
        CHECKF(ok == n, "two GPUs after the aborts: %d of %d sizes checked out", ok, n);
    } else {
        printf("one GPU: the two-GPU cases need a second one\n");
    }
    printf("test_cuda_dp: ok\n");
    return 0;
}
