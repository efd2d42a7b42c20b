/* test_cuda_ops.c (GPU, label gpu) - every op of the CUDA executor against
 * the host twin in double (itself checked against PyTorch by test_cuda_twin)
 * on a tiny ResNet, per precision and per batch-norm implementation (cuDNN
 * and ours): every conv forward / backward-data (plain and accumulating) /
 * backward-filter, every batch norm forward and backward (with ReLU, with the
 * residual add), max and average pool both ways, the classifier head (loss,
 * fc gradients, feature gradient), the running statistics, and SGD.
 * Inputs are written to the GPU first and read back, so both sides start
 * from the same (rounded) values. Tolerances: step_rule.h.
 * The host twin computes each op with kernels/ref's reference ops (double,
 * NCHW; proven by finite differences and against PyTorch), so this compares
 * the GPU with the reference ops in the GPU's own layouts and sequence. */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"
#include "cuda_exec.h"
#include "gpu_common.h"
#include "host_exec.h"
#include "rng.h"

#include <stdlib.h>

typedef struct pair {
    gb_plan_t *pc, *ph;
    gb_exec_t *cu, *hx;
    gb_precision_t prec;
    double tol;
    int failures;
    const char *tag;
} pair_t;

static uint64_t g_seed = 1;

/* random N(0,1) values into (cu_ptr, hx_ptr), identical after rounding */
static void fill(pair_t *P, void *cu, void *hx, size_t n, double scale) {
    double *v = malloc(n * sizeof(double));
    CHECK(v);
    gb_rng_t r;
    gb_rng_seed(&r, g_seed++);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * gb_rng_normal(&r);
    CHECKF(P->cu->ops->act_write(P->cu, cu, v, n) == 0, "%s", P->cu->err);
    CHECKF(P->cu->ops->act_read(P->cu, cu, v, n) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->act_write(P->hx, hx, v, n) == 0);
    free(v);
}

/* dy zeroed wherever the two sides' ReLU masks disagree (y > 0 on one side
 * only: rounding put a value near 0 on both sides of it), on both sides:
 * there the two correct backward passes differ by all of dy, not by
 * rounding, which would swamp the comparison of dx. */
static void mask_agree(pair_t *P, const void *yc, const void *yh, void *dyc, void *dyh, size_t n) {
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)),
           *d = malloc(n * sizeof(double));
    CHECK(a && b && d);
    CHECKF(P->cu->ops->act_read(P->cu, yc, a, n) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->act_read(P->hx, yh, b, n) == 0);
    CHECKF(P->cu->ops->act_read(P->cu, dyc, d, n) == 0, "%s", P->cu->err);
    size_t flips = 0;
    for (size_t i = 0; i < n; i++)
        if ((a[i] > 0) != (b[i] > 0)) {
            d[i] = 0;
            flips++;
        }
    if (flips) {
        CHECKF(P->cu->ops->act_write(P->cu, dyc, d, n) == 0, "%s", P->cu->err);
        CHECK(P->hx->ops->act_write(P->hx, dyh, d, n) == 0);
    }
    free(a);
    free(b);
    free(d);
}

/* cu / cu_scale against hx: cu_scale is the loss scale an fp16 gradient
 * that came through the loss carries (1 elsewhere) */
static void cmp_scaled(pair_t *P, const char *what, const char *name, const void *cu,
                       const void *hx, size_t n, double tol, double cu_scale) {
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    CHECK(a && b);
    CHECKF(P->cu->ops->act_read(P->cu, cu, a, n) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->act_read(P->hx, hx, b, n) == 0);
    for (size_t i = 0; i < n; i++)
        a[i] /= cu_scale;
    char nm[160];
    snprintf(nm, sizeof(nm), "%s %s %s %s", P->tag, gb_prec_str(P->prec), what, name);
    P->failures += !gb_close(nm, a, b, n, tol, 0);
    free(a);
    free(b);
}

static void cmp(pair_t *P, const char *what, const char *name, const void *cu, const void *hx,
                size_t n, double tol) {
    cmp_scaled(P, what, name, cu, hx, n, tol, 1.0);
}

/* the loss scale the CUDA executor's gradients from the loss carry */
static double cu_loss_scale(pair_t *P) {
    size_t np = P->pc->n_a + P->pc->n_b;
    float *g = malloc(np * sizeof(float)), s = 0.0f;
    CHECK(g);
    CHECKF(P->cu->ops->store_grads(P->cu, g, &s) == 0, "%s", P->cu->err);
    free(g);
    CHECK(s > 0.0f);
    return s;
}

/* fp32 internal gradient ranges [off, off + n) of both executors; unscale:
 * divide by the loss scale (gradients that came through the loss) */
static void cmp_grads(pair_t *P, const char *what, const char *name, size_t off, size_t n,
                      double tol, int unscale) {
    size_t np = P->pc->n_a + P->pc->n_b;
    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float));
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    CHECK(ga && gb && a && b);
    float sa = 0, sb = 0;
    CHECKF(P->cu->ops->store_grads(P->cu, ga, &sa) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->store_grads(P->hx, gb, &sb) == 0);
    for (size_t i = 0; i < n; i++) {
        a[i] = unscale ? ga[off + i] / sa : ga[off + i];
        b[i] = unscale ? gb[off + i] / sb : gb[off + i];
    }
    char nm[160];
    snprintf(nm, sizeof(nm), "%s %s %s %s", P->tag, gb_prec_str(P->prec), what, name);
    P->failures += !gb_close(nm, a, b, n, tol, 0);
    free(ga);
    free(gb);
    free(a);
    free(b);
}

#define RUN2(P, call_cu, call_hx)                                                                  \
    do {                                                                                           \
        CHECKF((call_cu) == 0, "%s", (P)->cu->err);                                                \
        CHECKF((call_hx) == 0, "%s", (P)->hx->err);                                                \
    } while (0)

static void sync_params(pair_t *P, const gb_model_t *m, uint64_t seed) {
    float *canon = malloc(m->n_params * sizeof(float)), *buf = malloc(m->n_buffers * sizeof(float));
    float *in = malloc((P->pc->n_a + P->pc->n_b) * sizeof(float));
    CHECK(canon && buf && in);
    gb_model_init(m, canon, buf, seed);
    gb_rng_t r;
    gb_rng_seed(&r, seed + 1);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        float *d = (ti->is_param ? canon : buf) + ti->offset;
        for (size_t i = 0; i < ti->numel; i++) {
            double u = gb_rng_uniform(&r);
            if (ti->role == GB_ROLE_BN_W) d[i] = (float)(0.5 + u);
            if (ti->role == GB_ROLE_BN_B) d[i] = (float)(0.4 * u - 0.2);
            if (ti->role == GB_ROLE_BN_RVAR) d[i] = (float)(0.5 + u);
        }
    }
    /* both get the same fp32 masters; 16-bit precisions compute with rounded
     * copies, a 2^-11 / 2^-8 effect inside the op tolerances */
    gb_plan_params_to_internal(P->pc, canon, in);
    CHECKF(P->cu->ops->load_params(P->cu, in, buf) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->load_params(P->hx, in, buf) == 0);
    free(canon);
    free(buf);
    free(in);
}

static void run(gb_precision_t prec, const char *bn_impl) {
    setenv("GB_CUDA_BN", bn_impl, 1);
    gb_model_t *m = gb_gpu_tiny_model(32, 10);
    gb_train_config_t cfg;
    gb_gpu_cfg(&cfg, m, prec, 4);
    char err[GB_ERR_LEN];
    pair_t P = {.prec = prec, .tol = gb_op_tol(prec), .tag = bn_impl};
    size_t es = (prec == GB_PREC_FP16 || prec == GB_PREC_BF16) ? 2 : 4;
    /* the stem's channels as the backend takes them (8 for bf16, 4 otherwise) */
    int stem_c = gb_plan_stem_c(prec, getenv("GB_CUDA_STEM_C"), err, sizeof(err));
    CHECKF(stem_c > 0, "%s", err);
    P.pc = gb_plan_new(m, cfg.batch, es, stem_c, err, sizeof(err));
    P.ph = gb_plan_new(m, cfg.batch, 8, stem_c, err, sizeof(err));
    CHECK(P.pc && P.ph);
    P.cu = gb_cuda_exec_new(P.pc, &cfg, 0, err, sizeof(err));
    CHECKF(P.cu, "%s", err);
    P.hx = gb_host_exec_new(P.ph, &cfg, err, sizeof(err));
    CHECK(P.hx);
    sync_params(&P, m, 3);
    const gb_plan_t *p = P.pc;
    double tol = P.tol;

    /* convolutions */
    for (int i = 0; i < p->n_convs; i++) {
        const gb_plan_conv_t *c = &p->convs[i];
        void *xc = gb_exec_act(P.cu, c->x), *xh = gb_exec_act(P.hx, c->x);
        void *yc = gb_exec_act(P.cu, c->y), *yh = gb_exec_act(P.hx, c->y);
        size_t nx = p->acts[c->x].numel, ny = p->acts[c->y].numel;
        fill(&P, xc, xh, nx, 1.0);
        RUN2(&P, P.cu->ops->conv_fwd(P.cu, i, xc, yc), P.hx->ops->conv_fwd(P.hx, i, xh, yh));
        cmp(&P, "conv fwd", c->name, yc, yh, ny, tol);
        void *dyc = gb_exec_grad(P.cu, 0), *dyh = gb_exec_grad(P.hx, 0);
        void *dxc = gb_exec_grad(P.cu, 1), *dxh = gb_exec_grad(P.hx, 1);
        fill(&P, dyc, dyh, ny, 1.0);
        RUN2(&P, P.cu->ops->conv_bwd_filter(P.cu, i, xc, dyc),
             P.hx->ops->conv_bwd_filter(P.hx, i, xh, dyh));
        cmp_grads(&P, "conv bwd filter", c->name, c->w_off, c->w_numel, tol, 0);
        if (c->dgrad) {
            RUN2(&P, P.cu->ops->conv_bwd_data(P.cu, i, dyc, dxc, 0),
                 P.hx->ops->conv_bwd_data(P.hx, i, dyh, dxh, 0));
            cmp(&P, "conv bwd data", c->name, dxc, dxh, nx, tol);
            RUN2(&P, P.cu->ops->conv_bwd_data(P.cu, i, dyc, dxc, 1),
                 P.hx->ops->conv_bwd_data(P.hx, i, dyh, dxh, 1));
            cmp(&P, "conv bwd data (accumulate)", c->name, dxc, dxh, nx, tol);
        }
    }
    /* batch norms: forward (saved stats), backward, then running stats */
    for (int i = 0; i < p->n_bns; i++) {
        const gb_plan_bn_t *b = &p->bns[i];
        size_t n = p->acts[b->x].numel;
        void *xc = gb_exec_act(P.cu, b->x), *xh = gb_exec_act(P.hx, b->x);
        void *yc = gb_exec_act(P.cu, b->y), *yh = gb_exec_act(P.hx, b->y);
        void *zc = NULL, *zh = NULL;
        fill(&P, xc, xh, n, 2.0);
        if (b->z >= 0) {
            zc = gb_exec_act(P.cu, b->z);
            zh = gb_exec_act(P.hx, b->z);
            fill(&P, zc, zh, n, 1.0);
        }
        RUN2(&P, P.cu->ops->bn_fwd(P.cu, i, xc, zc, yc), P.hx->ops->bn_fwd(P.hx, i, xh, zh, yh));
        cmp(&P, "bn fwd", b->name, yc, yh, n, tol);
        void *dyc = gb_exec_grad(P.cu, 0), *dyh = gb_exec_grad(P.hx, 0);
        void *dxc = gb_exec_grad(P.cu, 1), *dxh = gb_exec_grad(P.hx, 1);
        void *dzc = b->z >= 0 ? gb_exec_grad(P.cu, 2) : NULL;
        void *dzh = b->z >= 0 ? gb_exec_grad(P.hx, 2) : NULL;
        fill(&P, dyc, dyh, n, 1.0);
        if (b->relu) mask_agree(&P, yc, yh, dyc, dyh, n);
        RUN2(&P, P.cu->ops->bn_bwd(P.cu, i, xc, yc, dyc, dxc, dzc),
             P.hx->ops->bn_bwd(P.hx, i, xh, yh, dyh, dxh, dzh));
        /* dx of BN subtracts means: relative to its (smaller) norm the
         * rounding of y's ReLU mask at 0 weighs more; 3x the op tolerance */
        cmp(&P, "bn bwd dx", b->name, dxc, dxh, n, 3 * tol);
        if (dzc) cmp(&P, "bn bwd dz", b->name, dzc, dzh, n, tol);
        cmp_grads(&P, "bn dgamma", b->name, b->gamma_off, (size_t)b->g.c, 3 * tol, 0);
        cmp_grads(&P, "bn dbeta", b->name, b->beta_off, (size_t)b->g.c, 3 * tol, 0);
    }
    {
        /* every BN's saved statistics are the last forward's: update all */
        RUN2(&P, P.cu->ops->bn_running(P.cu), P.hx->ops->bn_running(P.hx));
        size_t np = p->n_a + p->n_b;
        float *mc = malloc(np * 4), *mh = malloc(np * 4);
        float *bc = malloc(m->n_buffers * 4), *bh = malloc(m->n_buffers * 4);
        double *a = malloc(m->n_buffers * 8), *r = malloc(m->n_buffers * 8);
        CHECK(mc && mh && bc && bh && a && r);
        CHECKF(P.cu->ops->store_params(P.cu, mc, bc) == 0, "%s", P.cu->err);
        CHECK(P.hx->ops->store_params(P.hx, mh, bh) == 0);
        for (size_t i = 0; i < m->n_buffers; i++) {
            a[i] = bc[i];
            r[i] = bh[i];
        }
        char nm[64];
        snprintf(nm, sizeof(nm), "%s %s running stats", bn_impl, gb_prec_str(prec));
        /* statistics are fp32 sums of rounded inputs: the op tolerance */
        P.failures += !gb_close(nm, a, r, m->n_buffers, tol, 1);
        free(mc);
        free(mh);
        free(bc);
        free(bh);
        free(a);
        free(r);
    }
    /* pools */
    {
        void *ac = gb_exec_act(P.cu, p->a0), *ah = gb_exec_act(P.hx, p->a0);
        void *pc = gb_exec_act(P.cu, p->p0), *ph = gb_exec_act(P.hx, p->p0);
        fill(&P, ac, ah, p->acts[p->a0].numel, 1.0);
        RUN2(&P, P.cu->ops->maxpool_fwd(P.cu, ac, pc), P.hx->ops->maxpool_fwd(P.hx, ah, ph));
        /* max pool moves values: exact */
        cmp(&P, "maxpool fwd", "", pc, ph, p->acts[p->p0].numel, 0.0);
        void *dyc = gb_exec_grad(P.cu, 0), *dyh = gb_exec_grad(P.hx, 0);
        void *dxc = gb_exec_grad(P.cu, 1), *dxh = gb_exec_grad(P.hx, 1);
        fill(&P, dyc, dyh, p->acts[p->p0].numel, 1.0);
        RUN2(&P, P.cu->ops->maxpool_bwd(P.cu, dyc, dxc), P.hx->ops->maxpool_bwd(P.hx, dyh, dxh));
        cmp(&P, "maxpool bwd", "", dxc, dxh, p->acts[p->a0].numel, tol);
        int last = p->blocks[p->n_blocks - 1].y;
        void *lc = gb_exec_act(P.cu, last), *lh = gb_exec_act(P.hx, last);
        void *fc = gb_exec_act(P.cu, p->feat), *fh = gb_exec_act(P.hx, p->feat);
        fill(&P, lc, lh, p->acts[last].numel, 1.0);
        RUN2(&P, P.cu->ops->avgpool_fwd(P.cu, lc, fc), P.hx->ops->avgpool_fwd(P.hx, lh, fh));
        cmp(&P, "avgpool fwd", "", fc, fh, p->acts[p->feat].numel, tol);
        fill(&P, dyc, dyh, p->acts[p->feat].numel, 1.0);
        RUN2(&P, P.cu->ops->avgpool_bwd(P.cu, dyc, dxc), P.hx->ops->avgpool_bwd(P.hx, dyh, dxh));
        cmp(&P, "avgpool bwd", "", dxc, dxh, p->acts[last].numel, tol);
    }
    /* head, then the loss it reports, then SGD over everything */
    {
        void *fc = gb_exec_act(P.cu, p->feat), *fh = gb_exec_act(P.hx, p->feat);
        void *dc = gb_exec_grad(P.cu, 0), *dh = gb_exec_grad(P.hx, 0);
        fill(&P, fc, fh, p->acts[p->feat].numel, 1.0);
        int32_t labels[4] = {0, 3, 9, 3};
        float *img = calloc((size_t)4 * 3 * 32 * 32, sizeof(float));
        CHECK(img);
        CHECKF(P.cu->ops->load_batch(P.cu, img, labels, 0) == 0, "%s", P.cu->err);
        CHECK(P.hx->ops->load_batch(P.hx, img, labels, 0) == 0);
        free(img);
        CHECKF(P.cu->ops->step_begin(P.cu) == 0, "%s", P.cu->err);
        RUN2(&P, P.cu->ops->head(P.cu, fc, dc), P.hx->ops->head(P.hx, fh, dh));
        /* fp16: dlogits, so dfeat, carry the loss scale (GB_CUDA_LOSS_SCALE) */
        double ls = cu_loss_scale(&P);
        CHECKF(prec == GB_PREC_FP16 ? ls == 64.0 : ls == 1.0, "loss scale %g", ls);
        cmp_scaled(&P, "head dfeat", "", dc, dh, p->acts[p->feat].numel, tol, ls);
        cmp_grads(&P, "head", "fc.weight", p->fc_w_off, (size_t)m->cfg.n_classes * m->feat_c, tol,
                  1);
        cmp_grads(&P, "head", "fc.bias", p->fc_b_off, (size_t)m->cfg.n_classes, tol, 1);
        RUN2(&P, P.cu->ops->update(P.cu), P.hx->ops->update(P.hx));
        gb_step_out_t oc, oh;
        RUN2(&P, P.cu->ops->step_end(P.cu, &oc), P.hx->ops->step_end(P.hx, &oh));
        double lc = oc.loss, lh = oh.loss;
        P.failures += !gb_close("loss", &lc, &lh, 1, tol, 1);
        CHECK(oc.ms >= 0.0 && oc.skipped == 0);
        size_t np = p->n_a + p->n_b;
        float *mc = malloc(np * 4), *mh = malloc(np * 4), *bc = malloc(m->n_buffers * 4);
        double *a = malloc(np * 8), *r = malloc(np * 8);
        CHECK(mc && mh && bc && a && r);
        CHECKF(P.cu->ops->store_params(P.cu, mc, bc) == 0, "%s", P.cu->err);
        CHECK(P.hx->ops->store_params(P.hx, mh, bc) == 0);
        /* fp16: only the fc gradients carry the loss scale the update
         * divides by (the others came from the ops above), so compare those */
        size_t k = 0, lo[2] = {0, 0}, hi[2] = {np, 0};
        if (prec == GB_PREC_FP16) {
            lo[0] = p->fc_w_off;
            hi[0] = p->fc_w_off + (size_t)m->cfg.n_classes * m->feat_c;
            lo[1] = p->fc_b_off;
            hi[1] = p->fc_b_off + (size_t)m->cfg.n_classes;
        }
        for (int q = 0; q < 2; q++)
            for (size_t i = lo[q]; i < hi[q]; i++) {
                a[k] = mc[i];
                r[k++] = mh[i];
            }
        /* SGD on fp32 masters from gradients compared above: op tolerance */
        P.failures += !gb_close("sgd params", a, r, k, tol, 1);
        free(mc);
        free(mh);
        free(bc);
        free(a);
        free(r);
    }
    gb_replica_report_t rep;
    CHECKF(P.cu->ops->report(P.cu, &rep) == 0, "%s", P.cu->err);
    CHECK(rep.details_json && strstr(rep.details_json, "\"convs\":["));
    printf("%s %s: %d failures; details %.300s...\n", bn_impl, gb_prec_str(prec), P.failures,
           rep.details_json);
    free(rep.details_json);
    CHECKF(P.failures == 0, "%s %s: %d comparisons failed", bn_impl, gb_prec_str(prec), P.failures);
    P.cu->ops->destroy(&P.cu);
    P.hx->ops->destroy(&P.hx);
    gb_plan_destroy(&P.pc);
    gb_plan_destroy(&P.ph);
    gb_model_destroy(&m);
}

/* the twin's activation set to the GPU's (n values), so the next op of a
 * chain starts from the same values on both sides */
static void sync_act(pair_t *P, const void *cu, void *hx, size_t n) {
    double *v = malloc(n * sizeof(double));
    CHECK(v);
    CHECKF(P->cu->ops->act_read(P->cu, cu, v, n) == 0, "%s", P->cu->err);
    CHECK(P->hx->ops->act_write(P->hx, hx, v, n) == 0);
    free(v);
}

/* The fused step's ops (GB_CUDA_FUSE=1, fp16) against the twin's, block by
 * block: conv + statistics (with the prologue for conv2 and conv3), the
 * finalize (seen through the next conv's prologue, the block's end and the
 * running statistics), the block's end with identity and projection
 * residuals, and the prologue's weight gradients. Batch norm backward with
 * the recomputed mask is in test_cuda_step's fused whole steps (compared op
 * by op, masks that differ by rounding at 0 would need the stored y this
 * path has not). Where cuDNN has no engine for the graphs (sm_89, older
 * cuDNN) the executor runs the plain step and this says so. */
static int run_fused(void) {
    setenv("GB_CUDA_FUSE", "1", 1);
    unsetenv("GB_CUDA_BN");
    gb_precision_t prec = GB_PREC_FP16;
    gb_model_t *m = gb_gpu_tiny_model(32, 10);
    gb_train_config_t cfg;
    gb_gpu_cfg(&cfg, m, prec, 4);
    char err[GB_ERR_LEN];
    pair_t P = {.prec = prec, .tol = gb_op_tol(prec), .tag = "fused"};
    int stem_c = gb_plan_stem_c(prec, NULL, err, sizeof(err));
    P.pc = gb_plan_new(m, cfg.batch, 2, stem_c, err, sizeof(err));
    P.ph = gb_plan_new(m, cfg.batch, 8, stem_c, err, sizeof(err));
    CHECK(P.pc && P.ph);
    P.cu = gb_cuda_exec_new(P.pc, &cfg, 0, err, sizeof(err));
    CHECKF(P.cu, "%s", err);
    P.hx = gb_host_exec_new(P.ph, &cfg, err, sizeof(err));
    CHECK(P.hx && P.hx->fused);
    gb_replica_report_t rep;
    CHECKF(P.cu->ops->report(P.cu, &rep) == 0, "%s", P.cu->err);
    const char *note = strstr(rep.details_json, "\"fused_note\"");
    printf("fused fp16: %.200s\n", note ? note : rep.details_json);
    int major, minor, documented = gb_fused_documented(&major, &minor);
    if (!P.cu->fused) {
        CHECKF(!documented, "the fused step is off on sm_%d%d, where cuDNN documents it", major,
               minor);
        printf("fused fp16: off on sm_%d%d (not a documented target): ops not compared\n", major,
               minor);
    } else {
        sync_params(&P, m, 5);
        const gb_plan_t *p = P.pc;
        double tol = P.tol;
#define A(side, id) gb_exec_act(P.side, (id))
        for (int i = 0; i < p->n_blocks; i++) {
            const gb_plan_block_t *b = &p->blocks[i];
            const char *nm = p->convs[b->conv1].name;
            fill(&P, A(cu, b->x), A(hx, b->x), p->acts[b->x].numel, 1.0);
            RUN2(&P, P.cu->ops->conv_stats(P.cu, b->conv1, A(cu, b->x), -1, A(cu, b->t1), b->bn1),
                 P.hx->ops->conv_stats(P.hx, b->conv1, A(hx, b->x), -1, A(hx, b->t1), b->bn1));
            cmp(&P, "conv_stats", nm, A(cu, b->t1), A(hx, b->t1), p->acts[b->t1].numel, tol);
            sync_act(&P, A(cu, b->t1), A(hx, b->t1), p->acts[b->t1].numel);
            RUN2(&P, P.cu->ops->bn_finalize(P.cu, b->bn1), P.hx->ops->bn_finalize(P.hx, b->bn1));
            /* the prologue applies bn1 finalized from conv1's statistics */
            RUN2(&P,
                 P.cu->ops->conv_stats(P.cu, b->conv2, A(cu, b->t1), b->bn1, A(cu, b->t2), b->bn2),
                 P.hx->ops->conv_stats(P.hx, b->conv2, A(hx, b->t1), b->bn1, A(hx, b->t2), b->bn2));
            cmp(&P, "conv_stats (prologue)", p->convs[b->conv2].name, A(cu, b->t2), A(hx, b->t2),
                p->acts[b->t2].numel, tol);
            sync_act(&P, A(cu, b->t2), A(hx, b->t2), p->acts[b->t2].numel);
            RUN2(&P, P.cu->ops->bn_finalize(P.cu, b->bn2), P.hx->ops->bn_finalize(P.hx, b->bn2));
            RUN2(&P,
                 P.cu->ops->conv_stats(P.cu, b->conv3, A(cu, b->t2), b->bn2, A(cu, b->t3), b->bn3),
                 P.hx->ops->conv_stats(P.hx, b->conv3, A(hx, b->t2), b->bn2, A(hx, b->t3), b->bn3));
            cmp(&P, "conv_stats (prologue)", p->convs[b->conv3].name, A(cu, b->t3), A(hx, b->t3),
                p->acts[b->t3].numel, tol);
            sync_act(&P, A(cu, b->t3), A(hx, b->t3), p->acts[b->t3].numel);
            RUN2(&P, P.cu->ops->bn_finalize(P.cu, b->bn3), P.hx->ops->bn_finalize(P.hx, b->bn3));
            if (b->down >= 0) {
                RUN2(&P,
                     P.cu->ops->conv_stats(P.cu, b->down, A(cu, b->x), -1, A(cu, b->td), b->bnd),
                     P.hx->ops->conv_stats(P.hx, b->down, A(hx, b->x), -1, A(hx, b->td), b->bnd));
                cmp(&P, "conv_stats", p->convs[b->down].name, A(cu, b->td), A(hx, b->td),
                    p->acts[b->td].numel, tol);
                sync_act(&P, A(cu, b->td), A(hx, b->td), p->acts[b->td].numel);
                RUN2(&P, P.cu->ops->bn_finalize(P.cu, b->bnd),
                     P.hx->ops->bn_finalize(P.hx, b->bnd));
                RUN2(&P,
                     P.cu->ops->bn_apply(P.cu, b->bn3, A(cu, b->t3), A(cu, b->td), b->bnd,
                                         A(cu, b->y)),
                     P.hx->ops->bn_apply(P.hx, b->bn3, A(hx, b->t3), A(hx, b->td), b->bnd,
                                         A(hx, b->y)));
            } else {
                RUN2(&P,
                     P.cu->ops->bn_apply(P.cu, b->bn3, A(cu, b->t3), A(cu, b->x), -1, A(cu, b->y)),
                     P.hx->ops->bn_apply(P.hx, b->bn3, A(hx, b->t3), A(hx, b->x), -1, A(hx, b->y)));
            }
            cmp(&P, "bn_apply", p->bns[b->bn3].name, A(cu, b->y), A(hx, b->y), p->acts[b->y].numel,
                tol);
            /* the weight gradients through the prologue */
            void *dyc = gb_exec_grad(P.cu, 0), *dyh = gb_exec_grad(P.hx, 0);
            const int wc[2] = {b->conv3, b->conv2}, wx[2] = {b->t2, b->t1},
                      wb[2] = {b->bn2, b->bn1};
            for (int k = 0; k < 2; k++) {
                const gb_plan_conv_t *c = &p->convs[wc[k]];
                fill(&P, dyc, dyh, p->acts[c->y].numel, 1.0);
                RUN2(&P, P.cu->ops->conv_bwd_filter_pre(P.cu, wc[k], A(cu, wx[k]), wb[k], dyc),
                     P.hx->ops->conv_bwd_filter_pre(P.hx, wc[k], A(hx, wx[k]), wb[k], dyh));
                cmp_grads(&P, "conv_bwd_filter_pre", c->name, c->w_off, c->w_numel, tol, 0);
            }
        }
#undef A
        /* the stem's statistics were never computed here: its forward once,
         * then every layer's running statistics from the saved ones */
        const gb_plan_bn_t *sb = &p->bns[p->stem_bn];
        fill(&P, gb_exec_act(P.cu, sb->x), gb_exec_act(P.hx, sb->x), p->acts[sb->x].numel, 1.0);
        RUN2(&P,
             P.cu->ops->bn_fwd(P.cu, p->stem_bn, gb_exec_act(P.cu, sb->x), NULL,
                               gb_exec_act(P.cu, sb->y)),
             P.hx->ops->bn_fwd(P.hx, p->stem_bn, gb_exec_act(P.hx, sb->x), NULL,
                               gb_exec_act(P.hx, sb->y)));
        RUN2(&P, P.cu->ops->bn_running(P.cu), P.hx->ops->bn_running(P.hx));
        float *mc = malloc((p->n_a + p->n_b) * 4), *bc = malloc(m->n_buffers * 4),
              *bh = malloc(m->n_buffers * 4);
        double *a = malloc(m->n_buffers * 8), *r = malloc(m->n_buffers * 8);
        CHECK(mc && bc && bh && a && r);
        CHECKF(P.cu->ops->store_params(P.cu, mc, bc) == 0, "%s", P.cu->err);
        CHECK(P.hx->ops->store_params(P.hx, mc, bh) == 0);
        for (size_t i = 0; i < m->n_buffers; i++)
            a[i] = bc[i], r[i] = bh[i];
        P.failures += !gb_close("fused fp16 running stats (from the convs' sums)", a, r,
                                m->n_buffers, tol, 1);
        free(mc), free(bc), free(bh), free(a), free(r);
    }
    free(rep.details_json);
    printf("fused fp16: %d failures\n", P.failures);
    int failures = P.failures;
    P.cu->ops->destroy(&P.cu);
    P.hx->ops->destroy(&P.hx);
    gb_plan_destroy(&P.pc);
    gb_plan_destroy(&P.ph);
    gb_model_destroy(&m);
    unsetenv("GB_CUDA_FUSE");
    return failures;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut short keeps its lines */
    gb_skip_without_gpu("test_cuda_ops");
    /* fp16's default 65536 would overflow this tiny model's fc gradients
     * (batch 4: dlogits up to 16384); 64 keeps every value in range */
    setenv("GB_CUDA_LOSS_SCALE", "64", 1);
    const char *impls[2] = {"cudnn", "own"};
    for (int b = 0; b < 2; b++)
        for (int p = GB_PREC_FP32; p <= GB_PREC_BF16; p++)
            if (gb_test_prec_wanted((gb_precision_t)p)) run((gb_precision_t)p, impls[b]);
    /* the fused step is fp16's */
    if (gb_test_prec_wanted(GB_PREC_FP16))
        CHECKF(run_fused() == 0, "the fused step's ops differ from the twin's");
    return 0;
}
