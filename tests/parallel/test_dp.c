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

__attribute__((unused)) static void run_fails(const gb_train_config_t *c, const char *why) {
    gb_train_result_t r;
    CHECKF(gb_train_run(c, r.record_json ? &r : &r, err, sizeof(err)) == -1,
           "run should fail with '%s'", why);
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

int main(int argc, char **argv) {
    CHECK(argc == 2);
    CHECK(mkdtemp(dir));
    const char *c = argv[1];
    (void)c;
    char data[256], g1[256], gk[256];
    path_of(data, sizeof(data), "global.safetensors");
    path_of(g1, sizeof(g1), "g1.safetensors");
    path_of(gk, sizeof(gk), "gk.safetensors");
    gb_train_config_t cfg;
    small_cfg(&cfg, 0);
    cfg.lr = 0;
    cfg.batch = 8;
    write_global_batch(&cfg, 1, data);
    cfg.data_path = data;
    cfg.save_grads_path = g1;
    gb_train_result_t r;
    run_ok(&cfg, &r);
    gb_train_result_free(&r);
    gb_model_t *m = gb_model_new(&cfg.model, err, sizeof(err));
    float *a = read_grads(m, g1);
    for (int k = 2; k <= 4; k *= 2) {
        cfg.devices = k;
        cfg.batch = 8 / k;
        cfg.save_grads_path = gk;
        run_ok(&cfg, &r);
        gb_train_result_free(&r);
        float *b = read_grads(m, gk);
        for (int i = 0; i < m->n_tensors; i++) {
            const gb_tensor_info_t *t = &m->tensors[i];
            if (!t->is_param) continue;
            printf("k=%d %-28s %.3g\n", k, t->name, rel_l2(b + t->offset, a + t->offset, t->numel));
        }
        free(b);
    }
    free(a);
    gb_model_destroy(&m);
    return 0;
}
