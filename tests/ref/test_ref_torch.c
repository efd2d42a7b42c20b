/* test_ref_torch.c - the reference against PyTorch 1.13 in float64.
 *
 * Writes cases as safetensors into a temporary directory, runs ref_torch.py
 * (argv[1] = a python3 with torch + torchvision, argv[2] = the script) once
 * for all of them, and compares what torch computed with the reference:
 *   - two tiny ResNets (with BN: layers 2,1,1,1 so an identity-shortcut block
 *     is there, odd image 29; without BN: batch 1, image 16), two SGD steps
 *     each (the second uses the momentum buffer): loss, every gradient, and
 *     the update (after - before) of every parameter and running statistic;
 *   - conv2d with an uneven kernel, stride and padding, and one that skips
 *     input rows: y, dx, dw;
 *   - max pool with ties and all-negative planes: y, dx (tie-breaking).
 * And, as for every checker, a planted error must fail the same comparison.
 *
 * Tolerance TORCH_TOL = 1e-10, relative to each tensor's largest element and
 * as relative L2 error: both sides compute in double, so they differ only by
 * summation order (torch: im2col + BLAS gemm, vectorized reductions; here:
 * direct loops). A reduction of n terms differs by up to ~n eps of the sum of
 * |terms|, n <= ~700 here (conv weight gradients over N*P*Q, BN over N*H*W):
 * ~1e-13 of the tensor's scale, which is what the first step shows (worst measured
 * 1.3e-13). The second step starts from parameters that already differ by that much
 * and the loss's curvature (large through BN over 3 values) amplifies it:
 * worst measured 1.4e-11. 1e-10 sits 7x above that and far below any
 * semantic difference (a wrong eps, biased variance, momentum, weight decay
 * or tie rule moves results by 1e-6 or more; the planted 1e-6 error fails).
 */
#define _POSIX_C_SOURCE 200809L
#include "ref_net.h"
#include "ref_ops.h"
#include "ref_test.h"
#include "tensor_file.h"

#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define TORCH_TOL 1e-10
#define MAX_CASES 8

static char g_dir[256];
static double g_worst; /* largest relative error seen in any passing comparison */

static void path_of(char *buf, size_t len, const char *name) {
    int n = snprintf(buf, len, "%s/%s", g_dir, name);
    CHECK(n > 0 && (size_t)n < len);
}

static double max_abs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* got vs torch's ref: per element within TORCH_TOL * (max|ref| + |ref|), and
 * relative L2 error within TORCH_TOL. Returns 0 or -1 (printing unless quiet). */
static int compare(const char *what, const double *got, const double *ref, size_t n, int quiet) {
    gb_cmp_t c;
    double scale = max_abs(ref, n);
    int rc = gb_cmp_f64(got, ref, n, TORCH_TOL * (scale > 0 ? scale : 1), TORCH_TOL, &c);
    if (rc == 0 && !(c.rel_l2 <= TORCH_TOL)) rc = -1;
    if (rc != 0 && !quiet) gb_cmp_print(stderr, what, &c);
    if (rc == 0) {
        double rel = scale > 0 ? c.max_abs / scale : c.max_abs;
        if (rel > g_worst) g_worst = rel;
    }
    return rc;
}

static const double *need(const tf_file_t *f, const char *name, size_t n) {
    size_t have = 0;
    const double *p = tf_get_f64(f, name, &have);
    CHECKF(p != NULL, "torch output has no %s", name);
    CHECKF(have == n, "%s: %zu elements from torch, %zu here", name, have, n);
    return p;
}

/* ---- cases -------------------------------------------------------------- */

typedef struct resnet_case {
    const char *label;
    gb_model_config_t cfg;
    int batch, steps;
    double lr, momentum, wd;
    uint64_t seed;
    /* filled by write_resnet, used by check_resnet */
    gb_model_t *m;
    double *params0, *buffers0;
    double *images;  /* steps x batch x 3 x H x W */
    int32_t *labels; /* steps x batch */
} resnet_case_t;

static void write_resnet(resnet_case_t *rc, const char *path) {
    char err[256], buf[64];
    rc->m = gb_model_new(&rc->cfg, err, sizeof(err));
    CHECKF(rc->m, "%s", err);
    const gb_model_t *m = rc->m;
    gb_rng_t r;
    gb_rng_seed(&r, rc->seed);
    float *pf = calloc(m->n_params, sizeof(float)), *bf = calloc(m->n_buffers + 1, sizeof(float));
    CHECK(pf && bf);
    gb_model_init(m, pf, bf, rc->seed);
    rc->params0 = dalloc(m->n_params);
    rc->buffers0 = dalloc(m->n_buffers);
    gb_ref_widen(pf, rc->params0, m->n_params);
    gb_ref_widen(bf, rc->buffers0, m->n_buffers);
    free(pf);
    free(bf);
    /* BN parameters and statistics away from their 1/0 init, so that every
     * term of the update is visible. */
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        double *p = (ti->is_param ? rc->params0 : rc->buffers0) + ti->offset;
        if (ti->role == GB_ROLE_BN_W) fill_uniform(&r, p, ti->numel, 0.5, 1.5);
        if (ti->role == GB_ROLE_BN_B) fill_uniform(&r, p, ti->numel, -0.5, 0.5);
        if (ti->role == GB_ROLE_BN_RMEAN) fill_uniform(&r, p, ti->numel, -0.5, 0.5);
        if (ti->role == GB_ROLE_BN_RVAR) fill_uniform(&r, p, ti->numel, 0.5, 2.0);
    }
    size_t per = (size_t)rc->batch * 3 * rc->cfg.image_h * rc->cfg.image_w;
    rc->images = dalloc(per * rc->steps);
    rc->labels = calloc((size_t)rc->batch * rc->steps, sizeof(int32_t));
    CHECK(rc->labels);
    tf_writer_t *w = tf_writer_new();
    CHECK(w);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        int64_t shape[4];
        for (int d = 0; d < ti->ndim; d++)
            shape[d] = ti->shape[d];
        snprintf(buf, sizeof(buf), "%s.%s", ti->is_param ? "param" : "buffer", ti->name);
        CHECK(tf_add_f64(w, buf, ti->ndim, shape,
                         (ti->is_param ? rc->params0 : rc->buffers0) + ti->offset) == 0);
    }
    float *imf = calloc(per, sizeof(float));
    CHECK(imf);
    for (int s = 0; s < rc->steps; s++) {
        gb_model_synth_batch(m, rc->batch, rc->seed + 100 + s, imf,
                             rc->labels + (size_t)s * rc->batch);
        gb_ref_widen(imf, rc->images + per * s, per);
        int64_t ishape[4] = {rc->batch, 3, rc->cfg.image_h, rc->cfg.image_w},
                lshape[1] = {rc->batch};
        snprintf(buf, sizeof(buf), "images.%d", s);
        CHECK(tf_add_f64(w, buf, 4, ishape, rc->images + per * s) == 0);
        snprintf(buf, sizeof(buf), "labels.%d", s);
        CHECK(tf_add_i32(w, buf, 1, lshape, rc->labels + (size_t)s * rc->batch) == 0);
    }
    free(imf);
    const gb_model_config_t *c = &rc->cfg;
    CHECK(tf_set_meta(w, "kind", "resnet") == 0);
    snprintf(buf, sizeof(buf), "%d,%d,%d,%d", c->layers[0], c->layers[1], c->layers[2],
             c->layers[3]);
    CHECK(tf_set_meta(w, "layers", buf) == 0);
    snprintf(buf, sizeof(buf), "%d", c->base_width);
    CHECK(tf_set_meta(w, "base", buf) == 0);
    snprintf(buf, sizeof(buf), "%d", c->n_classes);
    CHECK(tf_set_meta(w, "classes", buf) == 0);
    snprintf(buf, sizeof(buf), "%d", c->bn);
    CHECK(tf_set_meta(w, "bn", buf) == 0);
    snprintf(buf, sizeof(buf), "%d", rc->steps);
    CHECK(tf_set_meta(w, "steps", buf) == 0);
    snprintf(buf, sizeof(buf), "%.17g", rc->lr);
    CHECK(tf_set_meta(w, "lr", buf) == 0);
    snprintf(buf, sizeof(buf), "%.17g", rc->momentum);
    CHECK(tf_set_meta(w, "momentum", buf) == 0);
    snprintf(buf, sizeof(buf), "%.17g", rc->wd);
    CHECK(tf_set_meta(w, "weight_decay", buf) == 0);
    CHECKF(tf_write(w, path, err, sizeof(err)) == 0, "%s", err);
    tf_writer_destroy(&w);
}

/* Run the same steps here and compare with torch's output. */
static void check_resnet(resnet_case_t *rc, const tf_file_t *out) {
    const gb_model_t *m = rc->m;
    size_t np = m->n_params, nb = m->n_buffers;
    char err[256], name[96];
    gb_ref_net_t *net = gb_ref_net_new(m, rc->batch, err, sizeof(err));
    CHECKF(net, "%s", err);
    double *p = dalloc(np), *b = dalloc(nb), *mom = dalloc(np), *g = dalloc(np);
    double *pprev = dalloc(np), *bprev = dalloc(nb), *delta = dalloc(np > nb ? np : nb);
    memcpy(p, rc->params0, sizeof(double) * np);
    memcpy(b, rc->buffers0, sizeof(double) * nb);
    size_t per = (size_t)rc->batch * 3 * rc->cfg.image_h * rc->cfg.image_w;
    int64_t step = 0;
    int failed = 0;
    for (int s = 0; s < rc->steps; s++) {
        memcpy(pprev, p, sizeof(double) * np);
        memcpy(bprev, b, sizeof(double) * nb);
        double loss;
        CHECKF(gb_ref_net_train_step(net, p, b, mom, &step, rc->images + per * s,
                                     rc->labels + (size_t)s * rc->batch, rc->lr, rc->momentum,
                                     rc->wd, &loss, g, err, sizeof(err)) == 0,
               "%s", err);
        snprintf(name, sizeof(name), "step%d.loss", s);
        failed += compare(name, &loss, need(out, name, 1), 1, 0) != 0;
        for (int t = 0; t < m->n_tensors; t++) {
            const gb_tensor_info_t *ti = &m->tensors[t];
            if (ti->is_param) {
                snprintf(name, sizeof(name), "step%d.grad.%s", s, ti->name);
                failed +=
                    compare(name, g + ti->offset, need(out, name, ti->numel), ti->numel, 0) != 0;
            }
            const double *now = (ti->is_param ? p : b) + ti->offset;
            const double *was = (ti->is_param ? pprev : bprev) + ti->offset;
            for (size_t i = 0; i < ti->numel; i++)
                delta[i] = now[i] - was[i];
            snprintf(name, sizeof(name), "step%d.delta.%s", s, ti->name);
            failed += compare(name, delta, need(out, name, ti->numel), ti->numel, 0) != 0;
        }
        if (s == 0) {
            /* Planted: the first gradient of the last conv, one element 1e-6
             * off; the same comparison must reject it. */
            int t = gb_model_find(m, "layer4.0.conv3.weight");
            CHECK(t >= 0);
            const gb_tensor_info_t *ti = &m->tensors[t];
            snprintf(name, sizeof(name), "step0.grad.%s", ti->name);
            double *bad = dalloc(ti->numel);
            memcpy(bad, g + ti->offset, sizeof(double) * ti->numel);
            size_t big = 0;
            for (size_t i = 1; i < ti->numel; i++)
                if (fabs(bad[i]) > fabs(bad[big])) big = i;
            bad[big] *= 1 + 1e-6;
            CHECK(compare(name, bad, need(out, name, ti->numel), ti->numel, 1) == -1);
            free(bad);
        }
    }
    CHECKF(failed == 0, "%s: %d tensors differ from PyTorch", rc->label, failed);
    fprintf(stderr, "%s: %d steps match PyTorch (%zu parameters, %zu buffers)\n", rc->label,
            rc->steps, np, nb);
    free(p);
    free(b);
    free(mom);
    free(g);
    free(pprev);
    free(bprev);
    free(delta);
    gb_ref_net_destroy(&net);
    gb_model_destroy(&rc->m);
    free(rc->params0);
    free(rc->buffers0);
    free(rc->images);
    free(rc->labels);
}

typedef struct conv_case {
    int n, c, h, w, k, r, s, sh, sw, ph, pw;
    uint64_t seed;
    gb_ref_conv_t cv;
    double *x, *wt, *dy;
} conv_case_t;

static void write_conv(conv_case_t *cc, const char *path) {
    char err[256], buf[32];
    CHECK(gb_ref_conv_init2(&cc->cv, cc->n, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh,
                            cc->sw, cc->ph, cc->pw) == 0);
    size_t nx = (size_t)cc->n * cc->c * cc->h * cc->w, nw = (size_t)cc->k * cc->c * cc->r * cc->s;
    size_t ny = (size_t)cc->n * cc->k * cc->cv.p * cc->cv.q;
    gb_rng_t r;
    gb_rng_seed(&r, cc->seed);
    cc->x = dalloc(nx);
    cc->wt = dalloc(nw);
    cc->dy = dalloc(ny);
    fill_uniform(&r, cc->x, nx, -1, 1);
    fill_uniform(&r, cc->wt, nw, -1, 1);
    fill_uniform(&r, cc->dy, ny, -1, 1);
    tf_writer_t *w = tf_writer_new();
    CHECK(w);
    int64_t xs[4] = {cc->n, cc->c, cc->h, cc->w}, ws[4] = {cc->k, cc->c, cc->r, cc->s};
    int64_t ys[4] = {cc->n, cc->k, cc->cv.p, cc->cv.q};
    CHECK(tf_add_f64(w, "x", 4, xs, cc->x) == 0 && tf_add_f64(w, "w", 4, ws, cc->wt) == 0 &&
          tf_add_f64(w, "dy", 4, ys, cc->dy) == 0);
    CHECK(tf_set_meta(w, "kind", "conv") == 0);
    const char *keys[4] = {"stride_h", "stride_w", "pad_h", "pad_w"};
    int vals[4] = {cc->sh, cc->sw, cc->ph, cc->pw};
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof(buf), "%d", vals[i]);
        CHECK(tf_set_meta(w, keys[i], buf) == 0);
    }
    CHECKF(tf_write(w, path, err, sizeof(err)) == 0, "%s", err);
    tf_writer_destroy(&w);
}

static void check_conv(conv_case_t *cc, const tf_file_t *out) {
    size_t nx = (size_t)cc->n * cc->c * cc->h * cc->w, nw = (size_t)cc->k * cc->c * cc->r * cc->s;
    size_t ny = (size_t)cc->n * cc->k * cc->cv.p * cc->cv.q;
    double *y = dalloc(ny), *dx = dalloc(nx), *dw = dalloc(nw);
    gb_ref_conv2d_fwd(&cc->cv, cc->x, cc->wt, y);
    gb_ref_conv2d_bwd_data(&cc->cv, cc->dy, cc->wt, dx);
    gb_ref_conv2d_bwd_weights(&cc->cv, cc->x, cc->dy, dw);
    CHECK(compare("conv y", y, need(out, "y", ny), ny, 0) == 0);
    CHECK(compare("conv dx", dx, need(out, "dx", nx), nx, 0) == 0);
    CHECK(compare("conv dw", dw, need(out, "dw", nw), nw, 0) == 0);
    free(y);
    free(dx);
    free(dw);
    free(cc->x);
    free(cc->wt);
    free(cc->dy);
}

/* Max pool 3/2/1 over planes built to have ties (small integers) and, in the
 * second channel, only negative values (a zero-padded max would show 0). */
enum { MP_N = 2, MP_C = 2, MP_H = 7, MP_W = 6 };

static void maxpool_data(double *x, double *dy, gb_ref_pool_t *pl) {
    CHECK(gb_ref_pool_init(pl, MP_N, MP_C, MP_H, MP_W, 3, 3, 2, 1) == 0);
    gb_rng_t r;
    gb_rng_seed(&r, 77);
    for (int b = 0; b < MP_N; b++)
        for (int c = 0; c < MP_C; c++)
            for (int i = 0; i < MP_H * MP_W; i++) {
                double v = (double)(gb_rng_next(&r) % 4); /* 0..3: many ties */
                x[((size_t)b * MP_C + c) * MP_H * MP_W + i] = c == 0 ? v : -1.0 - v;
            }
    size_t ny = (size_t)MP_N * MP_C * pl->p * pl->q;
    fill_uniform(&r, dy, ny, -1, 1);
}

static void write_maxpool(const char *path) {
    char err[256];
    double x[MP_N * MP_C * MP_H * MP_W], dy[MP_N * MP_C * 4 * 3];
    gb_ref_pool_t pl;
    maxpool_data(x, dy, &pl);
    CHECK(pl.p == 4 && pl.q == 3);
    tf_writer_t *w = tf_writer_new();
    CHECK(w);
    int64_t xs[4] = {MP_N, MP_C, MP_H, MP_W}, ys[4] = {MP_N, MP_C, pl.p, pl.q};
    CHECK(tf_add_f64(w, "x", 4, xs, x) == 0 && tf_add_f64(w, "dy", 4, ys, dy) == 0);
    CHECK(tf_set_meta(w, "kind", "maxpool") == 0 && tf_set_meta(w, "kernel", "3") == 0 &&
          tf_set_meta(w, "stride", "2") == 0 && tf_set_meta(w, "pad", "1") == 0);
    CHECKF(tf_write(w, path, err, sizeof(err)) == 0, "%s", err);
    tf_writer_destroy(&w);
}

static void check_maxpool(const tf_file_t *out) {
    double x[MP_N * MP_C * MP_H * MP_W], dy[MP_N * MP_C * 4 * 3], y[MP_N * MP_C * 4 * 3];
    double dx[MP_N * MP_C * MP_H * MP_W];
    gb_ref_pool_t pl;
    maxpool_data(x, dy, &pl);
    gb_ref_maxpool_fwd(&pl, x, y);
    gb_ref_maxpool_bwd(&pl, x, dy, dx);
    size_t ny = sizeof(y) / sizeof(y[0]), nx = sizeof(x) / sizeof(x[0]);
    /* The max selects, it does not compute: y must be identical. */
    gb_cmp_t c;
    CHECK(gb_cmp_f64(y, need(out, "y", ny), ny, 0, 0, &c) == 0);
    /* dx adds the dy of the windows that chose a cell; with ties, which cell
     * that is is the tie rule, so a different rule moves whole dy values. */
    CHECK(compare("maxpool dx", dx, need(out, "dx", nx), nx, 0) == 0);
    /* Planted: the last maximum of each window instead of the first. */
    double dx_last[MP_N * MP_C * MP_H * MP_W] = {0};
    for (int nc = 0; nc < MP_N * MP_C; nc++)
        for (int i = 0; i < pl.p; i++)
            for (int j = 0; j < pl.q; j++) {
                int best = -1;
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++) {
                        int hi = 2 * i - 1 + a, wi = 2 * j - 1 + b;
                        if (hi < 0 || hi >= MP_H || wi < 0 || wi >= MP_W) continue;
                        int off = hi * MP_W + wi;
                        if (best < 0 || x[nc * MP_H * MP_W + off] >= x[nc * MP_H * MP_W + best])
                            best = off;
                    }
                dx_last[nc * MP_H * MP_W + best] += dy[(nc * pl.p + i) * pl.q + j];
            }
    CHECK(compare("maxpool dx (last max)", dx_last, need(out, "dx", nx), nx, 1) == -1);
}

/* ---- the exchange format itself ------------------------------------------ */

/* tensor_file round-trips doubles exactly and refuses what it must. */
static void test_tensor_file(void) {
    char path[320], err[256];
    path_of(path, sizeof(path), "roundtrip.st");
    double v[3] = {1.0 / 3.0, -0.0, 1e-300};
    int32_t l[2] = {7, -1};
    int64_t s3[1] = {3}, s2[2] = {1, 2};
    tf_writer_t *w = tf_writer_new();
    CHECK(w);
    CHECK(tf_add_f64(w, "v", 1, s3, v) == 0 && tf_add_i32(w, "l", 2, s2, l) == 0);
    CHECK(tf_add_f64(w, "v", 1, s3, v) == -1); /* duplicate name */
    CHECK(tf_add_f64(w, "bad", 5, s3, v) == -1);
    CHECK(tf_set_meta(w, "kind", "x") == 0 && tf_set_meta(w, "kind", "y") == 0);
    CHECKF(tf_write(w, path, err, sizeof(err)) == 0, "%s", err);
    tf_writer_destroy(&w);
    CHECK(w == NULL);
    tf_file_t *f = tf_read(path, err, sizeof(err));
    CHECKF(f, "%s", err);
    size_t n = 0;
    const double *back = tf_get_f64(f, "v", &n);
    CHECK(back && n == 3 && memcmp(back, v, sizeof(v)) == 0);
    CHECK(tf_get_f64(f, "l", &n) == NULL); /* not F64 */
    CHECK(tf_get_f64(f, "missing", &n) == NULL);
    tf_file_destroy(&f);
    CHECK(f == NULL);
    /* Not a safetensors file: too short, then a header length past the end. */
    FILE *g = fopen(path, "wb");
    CHECK(g && fwrite("abc", 1, 3, g) == 3 && fclose(g) == 0);
    CHECK(tf_read(path, err, sizeof(err)) == NULL && strstr(err, "not a safetensors"));
    uint64_t huge = 1000;
    g = fopen(path, "wb");
    CHECK(g && fwrite(&huge, 8, 1, g) == 1 && fwrite("{}", 1, 2, g) == 2 && fclose(g) == 0);
    CHECK(tf_read(path, err, sizeof(err)) == NULL);
    /* A header that is not JSON, and one whose offsets leave the data. */
    const char *bad[2] = {"{nope",
                          "{\"v\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}"};
    for (int i = 0; i < 2; i++) {
        uint64_t len = strlen(bad[i]);
        g = fopen(path, "wb");
        CHECK(g && fwrite(&len, 8, 1, g) == 1 && fwrite(bad[i], 1, len, g) == len &&
              fclose(g) == 0);
        CHECK(tf_read(path, err, sizeof(err)) == NULL);
    }
    CHECK(strstr(err, "outside the data"));
    unlink(path);
    CHECK(tf_read(path, err, sizeof(err)) == NULL && strstr(err, "cannot open"));
}

/* ---- driver ------------------------------------------------------------- */

static int run_python(const char *python, const char *script, char **paths, int n_paths) {
    char *argv[2 + 2 * MAX_CASES + 1];
    int a = 0;
    argv[a++] = (char *)python;
    argv[a++] = (char *)script;
    for (int i = 0; i < n_paths; i++)
        argv[a++] = paths[i];
    argv[a] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, python, NULL, NULL, argv, environ);
    if (rc != 0) {
        fprintf(stderr, "cannot start %s: %s\n", python, strerror(rc));
        return -1;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    CHECKF(argc == 3, "usage: %s PYTHON SCRIPT", argv[0]);
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(g_dir, sizeof(g_dir), "%s/gb_ref_torch_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(n > 0 && (size_t)n < sizeof(g_dir));
    CHECK(mkdtemp(g_dir) != NULL);
    test_tensor_file();

    resnet_case_t rn[2] = {
        {.label = "resnet bn, layers 2,1,1,1, width 4, image 29, batch 3",
         .batch = 3,
         .steps = 2,
         .lr = 0.1,
         .momentum = 0.9,
         .wd = 1e-2,
         .seed = 5},
        {.label = "resnet no bn, layers 1,1,1,1, width 6, image 16, batch 1",
         .batch = 1,
         .steps = 2,
         .lr = 0.05,
         .momentum = 0.8,
         .wd = 5e-3,
         .seed = 6},
    };
    int l1[2] = {2, 1}, base[2] = {4, 6}, image[2] = {29, 16}, classes[2] = {5, 3}, bn[2] = {1, 0};
    for (int i = 0; i < 2; i++) {
        gb_model_config_resnet50(&rn[i].cfg, image[i]);
        rn[i].cfg.layers[0] = l1[i];
        rn[i].cfg.layers[1] = rn[i].cfg.layers[2] = rn[i].cfg.layers[3] = 1;
        rn[i].cfg.base_width = base[i];
        rn[i].cfg.n_classes = classes[i];
        rn[i].cfg.bn = bn[i];
    }
    /*                  n  c  h  w  k  r  s  sh sw ph pw */
    conv_case_t cc[2] = {{2, 3, 7, 6, 4, 2, 3, 2, 1, 0, 1, .seed = 8},
                         {1, 2, 8, 9, 3, 3, 3, 3, 3, 2, 0, .seed = 9}};

    char bufs[2 * MAX_CASES][320];
    char *paths[2 * MAX_CASES];
    int nc = 0;
    const char *names[] = {"resnet0", "resnet1", "conv0", "conv1", "maxpool"};
    for (int i = 0; i < 5; i++) {
        char in[32], out[32];
        snprintf(in, sizeof(in), "%s.in", names[i]);
        snprintf(out, sizeof(out), "%s.out", names[i]);
        path_of(bufs[2 * i], sizeof(bufs[0]), in);
        path_of(bufs[2 * i + 1], sizeof(bufs[0]), out);
        paths[2 * i] = bufs[2 * i];
        paths[2 * i + 1] = bufs[2 * i + 1];
        nc++;
    }
    /* A missing interpreter is a failure, not a pass. */
    CHECK(run_python("/nonexistent/python3", argv[2], paths, 2) == -1);
    write_resnet(&rn[0], paths[0]);
    write_resnet(&rn[1], paths[2]);
    write_conv(&cc[0], paths[4]);
    write_conv(&cc[1], paths[6]);
    write_maxpool(paths[8]);
    CHECKF(run_python(argv[1], argv[2], paths, 2 * nc) == 0,
           "%s %s failed (PyTorch and torchvision are needed: .ci/run installs python3-torch "
           "and python3-torchvision)",
           argv[1], argv[2]);

    char err[256];
    tf_file_t *out[5];
    for (int i = 0; i < nc; i++) {
        out[i] = tf_read(paths[2 * i + 1], err, sizeof(err));
        CHECKF(out[i], "%s", err);
    }
    check_resnet(&rn[0], out[0]);
    check_resnet(&rn[1], out[1]);
    check_conv(&cc[0], out[2]);
    check_conv(&cc[1], out[3]);
    check_maxpool(out[4]);
    fprintf(stderr, "largest difference from PyTorch: %.3g of the tensor's scale (tolerance %g)\n",
            g_worst, TORCH_TOL);
    for (int i = 0; i < nc; i++) {
        tf_file_destroy(&out[i]);
        unlink(paths[2 * i]);
        unlink(paths[2 * i + 1]);
    }
    CHECK(rmdir(g_dir) == 0);
    return 0;
}
