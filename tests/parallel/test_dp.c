/* test_dp.c - data parallelism through the engine driver with CPU replicas:
 * the averaged gradient of 2 and 4 replicas equals the whole batch's on
 * one replica (no-BN model), weights stay bit-identical across replicas
 * (with and without BN), the no-BN model against the double reference,
 * the record's data-parallel keys, and the failure paths. A planted fault
 * (a comm that sums instead of averaging, one that skips the reduction)
 * shows each check can fail.
 *
 *   test_dp CASE    (equiv | identical | ref_nobn | record | faults | errors)
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "comm.h"
#include "cpu_backend.h"
#include "engine.h"
#include "ref_net.h"
#include "safetensors.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[GB_ERR_LEN];
static char dir[] = "/tmp/gb_dp_XXXXXX";

#define U 5.9604644775390625e-8 /* 2^-24: f32 unit roundoff */

static void path_of(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", dir, name);
}

/* A small ResNet (one block per stage, width 8, 10 classes) at 32x32: every
 * code path of ResNet-50 (stem, projection and identity blocks, pools, fc). */
static void small_cfg(gb_train_config_t *c, int bn) {
    gb_train_config_default(c);
    c->model.image_h = c->model.image_w = 32;
    for (int i = 0; i < 4; i++)
        c->model.layers[i] = 1;
    c->model.layers[0] = 2; /* an identity block too */
    c->model.base_width = 8;
    c->model.n_classes = 10;
    c->model.bn = bn;
    c->batch = 8;
    c->steps = 1;
    c->warmup = 0;
    c->threads = 2;
    c->bucket_mb = 0.02; /* several buckets on this model (~0.4 MB of gradients) */
}

static void run_ok(const gb_train_config_t *c, gb_train_result_t *r) {
    CHECKF(gb_train_run(c, r, err, sizeof(err)) == 0, "%s", err);
}

static void run_fails(const gb_train_config_t *c, const char *why) {
    gb_train_result_t r;
    CHECKF(gb_train_run(c, &r, err, sizeof(err)) == -1, "run should fail with '%s'", why);
    CHECKF(strstr(err, why), "error '%s' does not mention '%s'", err, why);
    CHECK(r.record_json == NULL);
}

/* the global batch as a data file: the synthetic batches of `world`
 * replicas, concatenated (replica g's slice is its own synthetic batch) */
static void write_global_batch(const gb_train_config_t *c, int world, const char *path) {
    gb_model_t *m = gb_model_new(&c->model, err, sizeof(err));
    CHECKF(m, "%s", err);
    int n = c->batch * world;
    size_t per = (size_t)3 * c->model.image_h * c->model.image_w;
    float *img = malloc((size_t)n * per * sizeof(float));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    CHECK(img && lab);
    for (int g = 0; g < world; g++)
        gb_model_synth_batch(m, c->batch, gb_replica_seed(c->seed, g),
                             img + (size_t)g * c->batch * per, lab + (size_t)g * c->batch);
    gb_st_writer_t *w = gb_st_writer_new();
    int64_t is[4] = {n, 3, c->model.image_h, c->model.image_w}, ls[1] = {n};
    CHECK(w);
    CHECK(gb_st_writer_add(w, "images", GB_ST_F32, 4, is, img, err, sizeof(err)) == 0);
    CHECK(gb_st_writer_add(w, "labels", GB_ST_I32, 1, ls, lab, err, sizeof(err)) == 0);
    CHECKF(gb_st_writer_write(w, path, err, sizeof(err)) == 0, "%s", err);
    gb_st_writer_destroy(&w);
    free(img);
    free(lab);
    gb_model_destroy(&m);
}

/* grads of every parameter tensor from a --save-grads file, canonical slab */
static float *read_grads(const gb_model_t *m, const char *path) {
    gb_st_t *st = gb_st_open(path, err, sizeof(err));
    CHECKF(st, "%s", err);
    float *g = malloc(m->n_params * sizeof(float));
    CHECK(g);
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (!t->is_param) continue;
        const gb_st_tensor_t *x = gb_st_find(st, t->name);
        CHECKF(x && x->numel == t->numel, "%s", t->name);
        memcpy(g + t->offset, x->data, t->numel * sizeof(float));
    }
    gb_st_close(&st);
    return g;
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Terms summed into one element of tensor t's weight gradient over a
 * global batch of n: every output position of every image for a conv,
 * every image for the classifier. */
static double terms(const gb_model_t *m, int t, int n) {
    const gb_tensor_info_t *ti = &m->tensors[t];
    if (ti->role == GB_ROLE_FC_W || ti->role == GB_ROLE_FC_B) return n;
    const gb_conv_t *cv[1 + 4 * GB_MAX_BLOCKS];
    int nc = 0;
    cv[nc++] = &m->stem;
    for (int b = 0; b < m->n_blocks; b++) {
        cv[nc++] = &m->blocks[b].conv1;
        cv[nc++] = &m->blocks[b].conv2;
        cv[nc++] = &m->blocks[b].conv3;
        if (m->blocks[b].has_down) cv[nc++] = &m->blocks[b].down;
    }
    for (int k = 0; k < nc; k++)
        if (cv[k]->w == t) return (double)n * cv[k]->oh * cv[k]->ow;
    CHECKF(0, "tensor %s is neither a conv nor the classifier", ti->name);
    return 0;
}

/* The bound: the one-replica run and the k-replica run add the same M
 * products of each weight-gradient element in different groupings (each
 * replica sums its own images, then the k partial sums are averaged; the
 * forward and the data gradients are per image, the same in both). A sum of
 * M terms of one sign carries at most (M-1)u relative error in any order
 * (u = 2^-24; the average's division by k = 2, 4 is exact), so two orders
 * differ by at most 2Mu relatively; the relative L2 over a tensor obeys
 * the same bound. Returns the worst (rel L2 / bound) over all tensors: <= 1
 * passes. */
static double grads_vs_bound(const gb_model_t *m, const float *got, const float *want, int n,
                             int verbose) {
    double worst = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        if (!t->is_param) continue;
        double e = rel_l2(got + t->offset, want + t->offset, t->numel);
        double bound = 2.0 * terms(m, i, n) * U;
        if (verbose) printf("  %-28s rel L2 %.2e  bound %.2e\n", t->name, e, bound);
        if (!(e / bound <= worst)) worst = isfinite(e) ? e / bound : INFINITY;
    }
    return worst;
}

/* ---- a harness that runs CPU replicas directly, with a comm that can lie */

enum { F_NONE = 0, F_SUM, F_SKIP, F_FAIL };

typedef struct fcomm {
    gb_comm_t c; /* first: the backend sees this */
    gb_comm_t *real;
    int mode, calls;
} fcomm_t;

static int f_allreduce(gb_comm_t *c, float *buf, size_t count, gb_comm_op_t op, char *e,
                       size_t elen) {
    fcomm_t *f = (fcomm_t *)c;
    f->calls++;
    if (f->mode == F_SKIP) return 0;
    if (f->mode == F_FAIL && c->local_rank == 1 && f->calls == 3) {
        snprintf(e, elen, "replica 1's link went down (planted)");
        gb_comm_abort(f->real, e);
        return -1;
    }
    if (f->mode == F_SUM && op == GB_COMM_AVG) op = GB_COMM_SUM;
    return gb_comm_allreduce(f->real, buf, count, op, e, elen);
}
static int f_barrier(gb_comm_t *c, char *e, size_t elen) {
    return gb_comm_barrier(((fcomm_t *)c)->real, e, elen);
}
static int f_local_barrier(gb_comm_t *c, char *e, size_t elen) {
    return gb_comm_local_barrier(((fcomm_t *)c)->real, e, elen);
}
static int f_exchange(gb_comm_t *c, gb_comm_make_id_fn mk, void *arg, unsigned char *id,
                      size_t *len, char *e, size_t elen) {
    return gb_comm_exchange_id(((fcomm_t *)c)->real, mk, arg, id, len, e, elen);
}
static int f_connect(gb_comm_t *c, char *e, size_t elen) {
    return gb_comm_connect(((fcomm_t *)c)->real, e, elen);
}
static void f_abort(gb_comm_t *c, const char *why) {
    gb_comm_abort(((fcomm_t *)c)->real, why);
}
static const gb_comm_vtbl_t fvtbl = {.allreduce = f_allreduce,
                                     .barrier = f_barrier,
                                     .local_barrier = f_local_barrier,
                                     .exchange_id = f_exchange,
                                     .connect = f_connect,
                                     .abort = f_abort};

typedef struct hrep {
    const gb_model_t *m;
    const gb_train_config_t *cfg;
    fcomm_t fc;
    const float *params, *buffers, *images;
    const int32_t *labels;
    int steps;
    float *grads;
    uint64_t fnv;
    int rc;
    char err[GB_ERR_LEN];
} hrep_t;

static void *hrep_main(void *arg) {
    hrep_t *h = arg;
    const gb_backend_ops_t *o = &gb_cpu_backend_ops;
    void *st = NULL;
    float *p = malloc(h->m->n_params * sizeof(float));
    float *b = malloc((h->m->n_buffers + 1) * sizeof(float));
    int64_t nbt;
    h->rc = -1;
    if (!p || !b) goto out;
    if (o->create(h->m, h->cfg, h->fc.c.local_rank, &h->fc.c, &st, h->err, sizeof(h->err)) ||
        o->set_state(st, h->params, h->buffers, 0, h->err, sizeof(h->err)) ||
        o->set_batch(st, h->images, h->labels, h->err, sizeof(h->err)))
        goto out;
    for (int i = 0; i < h->steps; i++) {
        gb_step_out_t so;
        if (o->step(st, &so, h->err, sizeof(h->err))) goto out;
    }
    if (o->get_grads(st, h->grads, h->err, sizeof(h->err)) ||
        o->get_state(st, p, b, &nbt, h->err, sizeof(h->err)))
        goto out;
    h->fnv = gb_fnv1a64(p, h->m->n_params * sizeof(float));
    h->rc = 0;
out:
    if (st) o->destroy(&st);
    free(p);
    free(b);
    return NULL;
}

/* k replicas of cfg->batch images each, replica d on images [d*batch,
 * (d+1)*batch) of the global batch made as gen_world replicas' synthetic
 * batches of gen_batch images (as write_global_batch) */
static void harness(const gb_train_config_t *cfg, int k, int gen_batch, int gen_world, int mode,
                    int steps, float **grads, uint64_t *fnv, int *rc, char errs[][GB_ERR_LEN]) {
    gb_model_t *m = gb_model_new(&cfg->model, err, sizeof(err));
    CHECKF(m, "%s", err);
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc((m->n_buffers + 1) * sizeof(float));
    size_t pix = (size_t)3 * cfg->model.image_h * cfg->model.image_w, per = pix * cfg->batch;
    CHECK(gen_batch * gen_world == k * cfg->batch);
    float *img = malloc((size_t)k * per * sizeof(float));
    int32_t *lab = malloc((size_t)k * cfg->batch * sizeof(int32_t));
    CHECK(params && buffers && img && lab);
    gb_model_init(m, params, buffers, cfg->seed);
    for (int g = 0; g < gen_world; g++)
        gb_model_synth_batch(m, gen_batch, gb_replica_seed(cfg->seed, g),
                             img + (size_t)g * gen_batch * pix, lab + (size_t)g * gen_batch);
    gb_comm_group_t *grp = gb_comm_group_new(k, NULL, 0, err, sizeof(err));
    CHECK(grp);
    hrep_t h[4];
    pthread_t th[4];
    gb_train_config_t c1 = *cfg;
    c1.threads = 1;
    for (int d = 0; d < k; d++) {
        memset(&h[d], 0, sizeof(h[d]));
        h[d].m = m;
        h[d].cfg = &c1;
        h[d].fc.real = gb_comm_group_member(grp, d);
        h[d].fc.c = *h[d].fc.real;
        h[d].fc.c.v = &fvtbl;
        h[d].fc.mode = mode;
        h[d].params = params;
        h[d].buffers = buffers;
        h[d].images = img + d * per;
        h[d].labels = lab + (size_t)d * cfg->batch;
        h[d].steps = steps;
        h[d].grads = grads[d];
        CHECK(pthread_create(&th[d], NULL, hrep_main, &h[d]) == 0);
    }
    for (int d = 0; d < k; d++) {
        pthread_join(th[d], NULL);
        fnv[d] = h[d].fnv;
        rc[d] = h[d].rc;
        snprintf(errs[d], GB_ERR_LEN, "%s", h[d].err);
    }
    gb_comm_group_destroy(&grp);
    free(params);
    free(buffers);
    free(img);
    free(lab);
    gb_model_destroy(&m);
}

/* ------------------------------------------------------------ the cases */

static void test_equiv(void) {
    char data[256], g1[256], gk[256];
    path_of(data, sizeof(data), "global.safetensors");
    path_of(g1, sizeof(g1), "g1.safetensors");
    path_of(gk, sizeof(gk), "gk.safetensors");
    gb_train_config_t cfg;
    small_cfg(&cfg, 0);
    cfg.lr = 0; /* the gradients of the first step, on identical weights */
    cfg.batch = 2;
    write_global_batch(&cfg, 4, data); /* 4 replicas' synthetic batches = 8 images */
    cfg.data_path = data;
    gb_train_result_t r;
    gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
    CHECK(m);
    cfg.batch = 8;
    cfg.save_grads_path = g1;
    run_ok(&cfg, &r);
    gb_train_result_free(&r);
    float *whole = read_grads(m, g1);
    for (int k = 2; k <= 4; k *= 2) {
        cfg.devices = k;
        cfg.batch = 8 / k;
        cfg.save_grads_path = gk;
        run_ok(&cfg, &r);
        gb_train_result_free(&r);
        float *avg = read_grads(m, gk);
        printf("%d replicas of %d images against 1 replica of 8:\n", k, 8 / k);
        double w = grads_vs_bound(m, avg, whole, 8, 1);
        CHECKF(w <= 1.0, "%d replicas: a gradient is %.2fx its bound", k, w);
        free(avg);
    }
    /* the same comparison on a comm that sums instead of averaging, and on
     * one that does not reduce at all: the check fails */
    small_cfg(&cfg, 0);
    cfg.lr = 0;
    cfg.batch = 4;
    float *g[4];
    for (int d = 0; d < 4; d++)
        CHECK((g[d] = malloc(m->n_params * sizeof(float))));
    uint64_t fnv[4];
    int rc[4];
    char errs[4][GB_ERR_LEN];
    harness(&cfg, 2, 2, 4, F_NONE, 1, g, fnv, rc, errs);
    CHECKF(rc[0] == 0 && rc[1] == 0, "%s %s", errs[0], errs[1]);
    CHECK(grads_vs_bound(m, g[0], whole, 8, 0) <= 1.0); /* the harness agrees with the driver */
    harness(&cfg, 2, 2, 4, F_SUM, 1, g, fnv, rc, errs);
    CHECK(rc[0] == 0 && rc[1] == 0);
    double w = grads_vs_bound(m, g[0], whole, 8, 0);
    printf("planted fault, sum instead of average: %.3gx the bound\n", w);
    CHECK(w > 1.0);
    harness(&cfg, 2, 2, 4, F_SKIP, 1, g, fnv, rc, errs);
    CHECK(rc[0] == 0 && rc[1] == 0);
    w = grads_vs_bound(m, g[1], whole, 8, 0);
    printf("planted fault, no reduction: %.3gx the bound\n", w);
    CHECK(w > 1.0);
    for (int d = 0; d < 4; d++)
        free(g[d]);
    free(whole);
    gb_model_destroy(&m);
}

/* replicas' checksums from a record; 1 when all equal */
static int replicas_identical(const char *record, int want, const char *key) {
    cJSON *o = cJSON_Parse(record);
    CHECK(o);
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, "details"), "replicas");
    CHECK(cJSON_GetArraySize(reps) == want);
    const char *first = NULL;
    int same = 1;
    for (const cJSON *e = reps->child; e; e = e->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, key);
        CHECK(cJSON_IsString(f) && strlen(f->valuestring) == 16);
        if (!first) first = f->valuestring;
        same = same && strcmp(first, f->valuestring) == 0;
    }
    cJSON_Delete(o);
    return same;
}

static void test_identical(void) {
    for (int bn = 0; bn <= 1; bn++) {
        for (int k = 2; k <= 4; k *= 2) {
            gb_train_config_t cfg;
            small_cfg(&cfg, bn);
            cfg.devices = k;
            cfg.batch = 4;
            cfg.steps = 10;
            cfg.lr = 0.05f;
            gb_train_result_t r;
            run_ok(&cfg, &r);
            CHECKF(replicas_identical(r.record_json, k, "params_fnv"),
                   "bn %d, %d replicas: weights differ after 10 steps", bn, k);
            /* running statistics are per replica (as DDP without SyncBN):
             * each replica normalized its own batch */
            if (bn) CHECK(!replicas_identical(r.record_json, k, "buffers_fnv"));
            CHECK(isfinite(r.loss_last));
            /* and they did train: the weights are not the initial ones */
            gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
            float *p0 = malloc(m->n_params * sizeof(float)), *b0 = malloc((m->n_buffers + 1) * 4);
            CHECK(m && p0 && b0);
            gb_model_init(m, p0, b0, cfg.seed);
            char hex[17];
            snprintf(hex, sizeof(hex), "%016llx",
                     (unsigned long long)gb_fnv1a64(p0, m->n_params * sizeof(float)));
            CHECK(!strstr(r.record_json, hex));
            free(p0);
            free(b0);
            gb_model_destroy(&m);
            gb_train_result_free(&r);
            printf("bn %d, %d replicas: identical weights after 10 steps\n", bn, k);
        }
    }
    /* the planted fault: replicas that do not reduce end apart */
    gb_train_config_t cfg;
    small_cfg(&cfg, 1);
    cfg.batch = 4;
    gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
    CHECK(m);
    float *g[2];
    for (int d = 0; d < 2; d++)
        CHECK((g[d] = malloc(m->n_params * sizeof(float))));
    uint64_t fnv[2];
    int rc[2];
    char errs[2][GB_ERR_LEN];
    harness(&cfg, 2, 4, 2, F_NONE, 3, g, fnv, rc, errs);
    CHECK(rc[0] == 0 && rc[1] == 0 && fnv[0] == fnv[1]);
    CHECK(memcmp(g[0], g[1], m->n_params * sizeof(float)) == 0);
    harness(&cfg, 2, 4, 2, F_SKIP, 3, g, fnv, rc, errs);
    CHECK(rc[0] == 0 && rc[1] == 0 && fnv[0] != fnv[1]);
    for (int d = 0; d < 2; d++)
        free(g[d]);
    gb_model_destroy(&m);
}

/* The no-BN model on the CPU backend against the double reference: one
 * step's loss and every gradient, within the bound the engine tests hold
 * a whole fp32 step to (1e-4 relative L2 per tensor; tests/cuda/
 * gpu_common.h derives it from fp32 sums of thousands of products). */
static void test_ref_nobn(void) {
    gb_train_config_t cfg;
    small_cfg(&cfg, 0);
    cfg.lr = 0;
    cfg.batch = 3;
    char g1[256];
    path_of(g1, sizeof(g1), "g1.safetensors");
    cfg.save_grads_path = g1;
    gb_train_result_t r;
    run_ok(&cfg, &r);
    gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
    CHECK(m);
    CHECK(m->n_buffers == 0);
    float *got = read_grads(m, g1);
    float *p = malloc(m->n_params * sizeof(float));
    double *pd = malloc(m->n_params * sizeof(double)), *gd = malloc(m->n_params * sizeof(double));
    size_t npix = (size_t)cfg.batch * 3 * 32 * 32;
    float *img = malloc(npix * sizeof(float));
    double *imgd = malloc(npix * sizeof(double));
    int32_t lab[3];
    CHECK(p && pd && gd && img && imgd);
    gb_model_init(m, p, NULL, cfg.seed);
    gb_model_synth_batch(m, cfg.batch, cfg.seed, img, lab);
    gb_ref_widen(p, pd, m->n_params);
    gb_ref_widen(img, imgd, npix);
    gb_ref_net_t *net = gb_ref_net_new(m, cfg.batch, err, sizeof(err));
    CHECKF(net, "%s", err);
    double loss;
    CHECKF(gb_ref_net_loss(net, pd, NULL, imgd, lab, &loss, gd, NULL, err, sizeof(err)) == 0, "%s",
           err);
    CHECKF(fabs(r.loss_first - loss) <= 1e-5 * fabs(loss), "loss %g vs %g", r.loss_first, loss);
    float *gf = malloc(m->n_params * sizeof(float));
    CHECK(gf);
    for (size_t i = 0; i < m->n_params; i++)
        gf[i] = (float)gd[i];
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_tensor_info_t *t = &m->tensors[i];
        double e = rel_l2(got + t->offset, gf + t->offset, t->numel);
        CHECKF(e <= 1e-4, "%s: relative L2 %.2e against the double reference", t->name, e);
    }
    printf("no-BN CPU step against the double reference: loss %.6f vs %.6f\n", r.loss_first, loss);
    gb_train_result_free(&r);
    gb_ref_net_destroy(&net);
    free(got);
    free(p);
    free(pd);
    free(gd);
    free(gf);
    free(img);
    free(imgd);
    gb_model_destroy(&m);
}

static void test_record(void) {
    gb_train_config_t cfg;
    small_cfg(&cfg, 1);
    cfg.devices = 2;
    cfg.batch = 4;
    cfg.steps = 3;
    cfg.warmup = 2;
    gb_train_result_t r;
    run_ok(&cfg, &r);
    cJSON *o = cJSON_Parse(r.record_json);
    CHECK(o);
#define NUM(obj, k) cJSON_GetObjectItemCaseSensitive((obj), (k))->valuedouble
#define STR(obj, k) cJSON_GetObjectItemCaseSensitive((obj), (k))->valuestring
    CHECK(NUM(o, "n_devices") == 2 && NUM(o, "global_batch") == 8 &&
          NUM(o, "batch_per_device") == 4);
    CHECK(strcmp(STR(o, "interconnect"), "shm") == 0);
    double med = NUM(cJSON_GetObjectItemCaseSensitive(o, "step_ms"), "median");
    CHECK(fabs(NUM(o, "images_per_sec") - 8 / (med / 1000)) < 1e-6 * NUM(o, "images_per_sec"));
    cJSON *det = cJSON_GetObjectItemCaseSensitive(o, "details");
    CHECK(NUM(det, "bucket_mb") == cfg.bucket_mb && NUM(det, "buckets") >= 3);
    CHECK(strcmp(STR(det, "batch_norm_stats"), "per replica") == 0);
    cJSON *reps = cJSON_GetObjectItemCaseSensitive(det, "replicas");
    CHECK(cJSON_GetArraySize(reps) == 2);
    int d = 0;
    for (cJSON *e = reps->child; e; e = e->next, d++) {
        CHECK(NUM(e, "replica") == d && NUM(e, "rank") == d && NUM(e, "peak_mem_bytes") > 0);
        cJSON *ar = cJSON_GetObjectItemCaseSensitive(e, "allreduce");
        CHECK(ar && strcmp(STR(ar, "transport"), "threads") == 0);
        CHECK(NUM(ar, "buckets") == NUM(det, "buckets"));
        /* every bucket was queued while backward still ran */
        CHECK(NUM(ar, "buckets_during_backward") == NUM(det, "buckets"));
        /* the figures per step are the timed steps' (they took the warm-up
         * in too, its first touches and skew) */
        CHECKF(NUM(ar, "steps") == cfg.steps, "over %g steps, %d timed (warm-up %d)",
               NUM(ar, "steps"), cfg.steps, cfg.warmup);
        CHECK(strcmp(STR(ar, "grad_dtype"), "fp32") == 0);
    }
    /* the slowest replica's step: no replica's median is above the step's */
    CHECK(strcmp(STR(det, "params_fnv"), STR(reps->child, "params_fnv")) == 0);
    cJSON_Delete(o);
    gb_train_result_free(&r);
    /* one device: no data-parallel keys */
    cfg.devices = 1;
    run_ok(&cfg, &r);
    o = cJSON_Parse(r.record_json);
    det = cJSON_GetObjectItemCaseSensitive(o, "details");
    CHECK(strcmp(STR(o, "interconnect"), "none") == 0 && NUM(o, "n_devices") == 1);
    CHECK(!cJSON_GetObjectItemCaseSensitive(det, "replicas") &&
          !cJSON_GetObjectItemCaseSensitive(det, "bucket_mb"));
    cJSON_Delete(o);
    gb_train_result_free(&r);
    /* seeds: replica 0 keeps the run's seed, the others differ */
    CHECK(gb_replica_seed(7, 0) == 7 && gb_replica_seed(7, 1) != 7 &&
          gb_replica_seed(7, 1) != gb_replica_seed(7, 2) &&
          gb_replica_seed(7, 1) != gb_replica_seed(8, 1));
    CHECK(gb_fnv1a64("", 0) == 0xcbf29ce484222325ULL &&
          gb_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL); /* FNV-1a's published test vector */
}

static void test_faults(void) {
    /* a replica whose collective fails mid-step: every replica stops with
     * its reason, none waits forever */
    gb_train_config_t cfg;
    small_cfg(&cfg, 1);
    cfg.batch = 4;
    gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
    CHECK(m);
    float *g[3];
    for (int d = 0; d < 3; d++)
        CHECK((g[d] = malloc(m->n_params * sizeof(float))));
    uint64_t fnv[3];
    int rc[3];
    char errs[3][GB_ERR_LEN];
    harness(&cfg, 3, 4, 3, F_FAIL, 5, g, fnv, rc, errs);
    for (int d = 0; d < 3; d++) {
        CHECK(rc[d] == -1);
        CHECKF(strstr(errs[d], "replica 1's link went down (planted)"), "replica %d: %s", d,
               errs[d]);
    }
    for (int d = 0; d < 3; d++)
        free(g[d]);
    gb_model_destroy(&m);
}

static void test_errors(void) {
    gb_train_config_t c;
    small_cfg(&c, 1);
    c.devices = 1025;
    run_fails(&c, "devices 1025 out of range");
    small_cfg(&c, 1);
    c.bucket_mb = NAN;
    run_fails(&c, "bucket size");
    small_cfg(&c, 1);
    snprintf(c.interconnect, sizeof(c.interconnect), "pcie");
    c.devices = 2;
    run_fails(&c, "interconnect pcie needs GPUs");
    small_cfg(&c, 1);
    snprintf(c.interconnect, sizeof(c.interconnect), "infiniband");
    run_fails(&c, "interconnect 'infiniband'");
    small_cfg(&c, 1);
    snprintf(c.launch, sizeof(c.launch), "forks");
    run_fails(&c, "launch 'forks'");
    /* replica processes from a program that never named its executable
     * (only gpubench's main does: kernels/launch.h) */
    small_cfg(&c, 1);
    snprintf(c.launch, sizeof(c.launch), "processes");
    c.devices = 2;
    run_fails(&c, "cannot start replica processes");
    /* --data with one replica's batch for two replicas */
    char data[256];
    path_of(data, sizeof(data), "one.safetensors");
    small_cfg(&c, 1);
    write_global_batch(&c, 1, data);
    c.data_path = data;
    c.devices = 2;
    run_fails(&c, "global batch of 16");
    /* batch norm over one value per channel in a replica: refused there,
     * and the other replica does not wait forever */
    small_cfg(&c, 1);
    c.devices = 2;
    c.batch = 1;
    c.model.image_h = c.model.image_w = 32;
    run_fails(&c, "batch norm over one value");
    /* a multi-node dist that does not fit the devices */
    small_cfg(&c, 1);
    gb_dist_t d = {.rank = 0, .n_nodes = 2, .world_size = 3};
    c.dist = &d;
    run_fails(&c, "does not fit");
    /* the CPU backend's own checks on what it is given */
    gb_model_t *m = gb_model_new(&c.model, err, sizeof(err));
    CHECK(m);
    gb_comm_group_t *grp = gb_comm_group_new(2, NULL, 0, err, sizeof(err));
    CHECK(grp);
    void *st = NULL;
    c.dist = NULL;
    CHECK(gb_cpu_backend_ops.create(m, &c, 0, gb_comm_group_member(grp, 1), &st, err,
                                    sizeof(err)) == -1 &&
          strstr(err, "comm member 1"));
    gb_comm_group_destroy(&grp);
    gb_model_destroy(&m);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    CHECK(mkdtemp(dir));
    const char *c = argv[1];
    if (strcmp(c, "equiv") == 0)
        test_equiv();
    else if (strcmp(c, "identical") == 0)
        test_identical();
    else if (strcmp(c, "ref_nobn") == 0)
        test_ref_nobn();
    else if (strcmp(c, "record") == 0)
        test_record();
    else if (strcmp(c, "faults") == 0)
        test_faults();
    else if (strcmp(c, "errors") == 0)
        test_errors();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("%s: ok\n", c);
    return 0;
}
