/* test_ref_net.c - the whole reference ResNet: its gradient against finite
 * differences on a sample of every parameter tensor and of the image, with and
 * without BN (including an identity-shortcut block), a planted wrong gradient
 * the checker must reject, the running statistics and the SGD step wired as
 * torch wires them, and the refusals (bad labels, one value per BN channel).
 *
 * Step and tolerance of the whole-model gradcheck (NET_H, NET_ATOL, NET_RTOL):
 * the loss is O(1) (log of a handful of classes) but ends a chain of ~25
 * layers, so its rounding noise is not eps |f| but eps times the magnitudes
 * summed along the way, ~1e-14; the rounding part of a central difference is
 * then ~1e-14 / h. The truncation part, h^2/6 |f'''|, is larger than for a
 * single op: BN over 3 values per channel (layer4 here) makes f''' large.
 * Measured on the BN model below: at h = 1e-4 errors reach 3e-6 (and 23
 * tensors hit kinks), at h = 1e-5 they reach 3e-7 (so |f'''| ~ 1e4), at
 * h = 1e-6 they stay below 3e-9: both parts near 1e-9..1e-8. Hence h = 1e-6
 * and atol 1e-7, rtol 1e-5: 10x above the worst either part can reach and 40x
 * above the worst measured (err/tol 0.024), while a planted 1% error on a
 * gradient above 1e-5 fails. A ReLU or max-pool kink can still fall within a
 * step; such elements are detected (the two step sizes disagree, see
 * gradcheck.h) and skipped, at most one per tensor and 5% in all.
 */
#include "ref_net.h"
#include "ref_ops.h"
#include "ref_test.h"

#include <stdio.h>
#include <string.h>

#define NET_H    1e-6
#define NET_ATOL 1e-7
#define NET_RTOL 1e-5
#define SAMPLES  5 /* elements checked per tensor: first, last and 3 random */

typedef struct fixture {
    gb_model_t *m;
    gb_ref_net_t *net;
    int batch;
    double *params, *buffers, *images;
    int32_t *labels;
    size_t n_img;
} fixture_t;

static gb_model_config_t tiny_config(int bn, int l1, int base, int image, int classes) {
    gb_model_config_t cfg;
    gb_model_config_resnet50(&cfg, image);
    cfg.layers[0] = l1;
    cfg.layers[1] = cfg.layers[2] = cfg.layers[3] = 1;
    cfg.base_width = base;
    cfg.n_classes = classes;
    cfg.bn = bn;
    return cfg;
}

/* Model, net, torchvision-style init widened to double, then BN affine
 * parameters and running statistics drawn at random (so that a swapped gamma
 * and beta, or a dropped running mean, cannot pass), and a synthetic batch. */
static void fixture_init(fixture_t *f, const gb_model_config_t *cfg, int batch, uint64_t seed) {
    char err[256];
    memset(f, 0, sizeof(*f));
    f->m = gb_model_new(cfg, err, sizeof(err));
    CHECKF(f->m, "%s", err);
    f->net = gb_ref_net_new(f->m, batch, err, sizeof(err));
    CHECKF(f->net, "%s", err);
    f->batch = batch;
    const gb_model_t *m = f->m;
    float *pf = calloc(m->n_params, sizeof(float));
    float *bf = calloc(m->n_buffers + 1, sizeof(float));
    f->n_img = (size_t)batch * 3 * cfg->image_h * cfg->image_w;
    float *imf = calloc(f->n_img, sizeof(float));
    f->labels = calloc((size_t)batch, sizeof(int32_t));
    CHECK(pf && bf && imf && f->labels);
    gb_model_init(m, pf, bf, seed);
    gb_model_synth_batch(m, batch, seed, imf, f->labels);
    f->params = dalloc(m->n_params);
    f->buffers = dalloc(m->n_buffers);
    f->images = dalloc(f->n_img);
    gb_ref_widen(pf, f->params, m->n_params);
    gb_ref_widen(bf, f->buffers, m->n_buffers);
    gb_ref_widen(imf, f->images, f->n_img);
    gb_rng_t r;
    gb_rng_seed(&r, seed + 1000);
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        double *p = (ti->is_param ? f->params : f->buffers) + ti->offset;
        if (ti->role == GB_ROLE_BN_W) fill_uniform(&r, p, ti->numel, 0.5, 1.5);
        if (ti->role == GB_ROLE_BN_B) fill_uniform(&r, p, ti->numel, -0.5, 0.5);
        if (ti->role == GB_ROLE_BN_RMEAN) fill_uniform(&r, p, ti->numel, -0.5, 0.5);
        if (ti->role == GB_ROLE_BN_RVAR) fill_uniform(&r, p, ti->numel, 0.5, 2.0);
    }
    free(pf);
    free(bf);
    free(imf);
}

static void fixture_free(fixture_t *f) {
    gb_ref_net_destroy(&f->net);
    CHECK(f->net == NULL);
    gb_model_destroy(&f->m);
    free(f->params);
    free(f->buffers);
    free(f->images);
    free(f->labels);
}

/* The loss as a function of params and images (forward only, no running
 * statistics update), for gradcheck. */
static int loss_eval(void *ctx, double *value) {
    fixture_t *f = ctx;
    char err[256];
    return gb_ref_net_loss(f->net, f->params, NULL, f->images, f->labels, value, NULL, NULL, err,
                           sizeof(err));
}

static gb_gc_opts_t net_opts(void) {
    gb_gc_opts_t o;
    gb_gc_opts_default(&o);
    o.h = NET_H;
    o.atol = NET_ATOL;
    o.rtol = NET_RTOL;
    o.nonsmooth = 1;
    o.max_skip = 1; /* per tensor; the totals are checked below */
    return o;
}

/* Gradcheck a sample of every parameter tensor and of the image. Returns the
 * number of tensors that failed (0 expected), and adds up kinks skipped. */
static int check_all(fixture_t *f, const double *grads, const double *dimages,
                     const gb_gc_opts_t *o, size_t *skipped, size_t *checked, double *worst) {
    const gb_model_t *m = f->m;
    gb_rng_t r;
    gb_rng_seed(&r, 99);
    size_t idx[SAMPLES];
    int failed = 0;
    gb_gc_report_t rep;
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        size_t k = sample_indices(&r, ti->numel, idx, SAMPLES);
        if (gb_gradcheck(loss_eval, f, f->params + ti->offset, ti->numel, grads + ti->offset, idx,
                         k, o, ti->name, &rep) != 0)
            failed++;
        *skipped += rep.skipped;
        *checked += rep.checked;
        if (rep.cmp.max_ratio > *worst) *worst = rep.cmp.max_ratio;
    }
    size_t img_idx[4 * SAMPLES];
    size_t k = sample_indices(&r, f->n_img, img_idx, 4 * SAMPLES);
    if (gb_gradcheck(loss_eval, f, f->images, f->n_img, dimages, img_idx, k, o, "image", &rep) != 0)
        failed++;
    *skipped += rep.skipped;
    *checked += rep.checked;
    if (rep.cmp.max_ratio > *worst) *worst = rep.cmp.max_ratio;
    return failed;
}

static void gradcheck_model(const char *what, const gb_model_config_t *cfg, int batch,
                            uint64_t seed) {
    fixture_t f;
    fixture_init(&f, cfg, batch, seed);
    double *grads = dalloc(f.m->n_params), *dimages = dalloc(f.n_img);
    double loss;
    char err[256];
    CHECKF(gb_ref_net_loss(f.net, f.params, NULL, f.images, f.labels, &loss, grads, dimages, err,
                           sizeof(err)) == 0,
           "%s", err);
    CHECKF(isfinite(loss) && loss > 0, "%s: loss %g", what, loss);
    gb_gc_opts_t o = net_opts();
    size_t skipped = 0, checked = 0;
    double worst = 0;
    int failed = check_all(&f, grads, dimages, &o, &skipped, &checked, &worst);
    fprintf(stderr,
            "%s: loss %.6f, %zu elements differenced, %zu skipped as kinks, max err/tol %.3g\n",
            what, loss, checked, skipped, worst);
    CHECKF(failed == 0, "%s: %d tensors failed the gradcheck", what, failed);
    CHECKF(skipped * 20 <= checked, "%s: %zu of %zu elements skipped as kinks", what, skipped,
           checked);

    /* Planted: one gradient element of a BN weight (or of a conv without BN)
     * 1% off; the same checker must reject it and name the tensor's element. */
    int t = gb_model_find(f.m, cfg->bn ? "layer1.0.bn2.weight" : "layer1.0.conv2.weight");
    CHECK(t >= 0);
    const gb_tensor_info_t *ti = &f.m->tensors[t];
    size_t big = 0;
    for (size_t i = 1; i < ti->numel; i++)
        if (fabs(grads[ti->offset + i]) > fabs(grads[ti->offset + big])) big = i;
    grads[ti->offset + big] *= 1.01;
    size_t idx[1] = {big};
    gb_gc_opts_t q = o;
    q.quiet = 1;
    gb_gc_report_t rep;
    CHECK(gb_gradcheck(loss_eval, &f, f.params + ti->offset, ti->numel, grads + ti->offset, idx, 1,
                       &q, ti->name, &rep) == -1);
    CHECK(rep.cmp.n_bad == 1 && rep.cmp.worst[0].index == big);
    /* Planted: the image gradient with its sign flipped on one element. */
    size_t bigi = 0;
    for (size_t i = 1; i < f.n_img; i++)
        if (fabs(dimages[i]) > fabs(dimages[bigi])) bigi = i;
    dimages[bigi] = -dimages[bigi];
    idx[0] = bigi;
    CHECK(gb_gradcheck(loss_eval, &f, f.images, f.n_img, dimages, idx, 1, &q, "image", &rep) == -1);
    free(grads);
    free(dimages);
    fixture_free(&f);
}

static void test_gradcheck_bn(void) {
    /* BN, stage 1 with two blocks (the second has an identity shortcut), odd
     * image 29 -> 15 -> 8 -> 8, 4, 2, 1; batch 3, so layer4's BN sees 3 values. */
    gb_model_config_t cfg = tiny_config(1, 2, 4, 29, 5);
    gradcheck_model("bn, layers 2,1,1,1, width 4, image 29, batch 3", &cfg, 3, 1);
}

static void test_gradcheck_nobn(void) {
    /* Without BN a batch of 1 is fine; image 16 -> 8 -> 4 -> 4, 2, 1, 1. */
    gb_model_config_t cfg = tiny_config(0, 1, 4, 16, 3);
    gradcheck_model("no bn, layers 1,1,1,1, width 4, image 16, batch 1", &cfg, 1, 2);
}

/* The running statistics: the loss ignores them, one forward updates them as
 * torch does (checked on the stem BN by recomputing its input with ref ops),
 * and a forward without buffers leaves them alone. */
static void test_running_stats(void) {
    gb_model_config_t cfg = tiny_config(1, 1, 4, 16, 3);
    fixture_t f;
    fixture_init(&f, &cfg, 2, 3);
    const gb_model_t *m = f.m;
    size_t nb = m->n_buffers;
    double *before = dalloc(nb), *after = dalloc(nb);
    memcpy(before, f.buffers, sizeof(double) * nb);
    double l1, l2;
    char err[256];
    CHECK(gb_ref_net_loss(f.net, f.params, NULL, f.images, f.labels, &l1, NULL, NULL, err,
                          sizeof(err)) == 0);
    CHECK(memcmp(before, f.buffers, sizeof(double) * nb) == 0);
    CHECK(gb_ref_net_loss(f.net, f.params, f.buffers, f.images, f.labels, &l2, NULL, NULL, err,
                          sizeof(err)) == 0);
    CHECK(l1 == l2); /* same computation, the buffers only receive */
    memcpy(after, f.buffers, sizeof(double) * nb);
    for (size_t i = 0; i < nb; i++)
        CHECKF(after[i] != before[i], "buffer %zu unchanged", i);

    /* Stem: conv1 over the images, then mean and unbiased variance per channel. */
    const gb_conv_t *sc = &m->stem;
    gb_ref_conv_t cv;
    CHECK(gb_ref_conv_init(&cv, 2, 3, sc->ih, sc->iw, sc->k, 7, 7, 2, 3) == 0);
    size_t nz = (size_t)2 * sc->k * sc->oh * sc->ow;
    double *z = dalloc(nz);
    gb_ref_conv2d_fwd(&cv, f.images, f.params + m->tensors[sc->w].offset, z);
    int hw = sc->oh * sc->ow;
    long cnt = 2L * hw;
    double *want_m = dalloc(sc->k), *want_v = dalloc(sc->k);
    const double *rm0 = before + m->tensors[m->stem_bn.rmean].offset;
    const double *rv0 = before + m->tensors[m->stem_bn.rvar].offset;
    for (int c = 0; c < sc->k; c++) {
        double s = 0, ss = 0;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < hw; i++)
                s += z[((size_t)b * sc->k + c) * hw + i];
        double mu = s / cnt;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < hw; i++) {
                double d = z[((size_t)b * sc->k + c) * hw + i] - mu;
                ss += d * d;
            }
        want_m[c] = 0.9 * rm0[c] + 0.1 * mu;
        want_v[c] = 0.9 * rv0[c] + 0.1 * ss / (cnt - 1);
    }
    gb_cmp_t cmp;
    /* Same sums in the same order; 1e-13 allows for the one-pass vs. ref-op
     * rounding of the variance (each ~eps * M). */
    CHECK(gb_cmp_f64(after + m->tensors[m->stem_bn.rmean].offset, want_m, sc->k, 1e-15, 1e-13,
                     &cmp) == 0);
    CHECK(gb_cmp_f64(after + m->tensors[m->stem_bn.rvar].offset, want_v, sc->k, 1e-15, 1e-13,
                     &cmp) == 0);
    free(z);
    free(want_m);
    free(want_v);
    free(before);
    free(after);
    fixture_free(&f);
}

/* A train step is loss + backward + torch's SGD over the whole slab, weight
 * decay on every parameter; the counter starts the momentum buffers. */
static void test_train_step(void) {
    gb_model_config_t cfg = tiny_config(1, 1, 4, 16, 3);
    fixture_t f;
    fixture_init(&f, &cfg, 2, 4);
    size_t np = f.m->n_params;
    double *p0 = dalloc(np), *mom = dalloc(np), *g = dalloc(np), *want = dalloc(np);
    double *g2 = dalloc(np), *p1 = dalloc(np), *mom1 = dalloc(np);
    memcpy(p0, f.params, sizeof(double) * np);
    int64_t step = 0;
    double loss, loss_ref;
    char err[256];
    const double lr = 0.05, mu = 0.9, wd = 1e-3;
    CHECK(gb_ref_net_train_step(f.net, f.params, f.buffers, mom, &step, f.images, f.labels, lr, mu,
                                wd, &loss, g, err, sizeof(err)) == 0);
    CHECK(step == 1);
    CHECK(gb_ref_net_loss(f.net, p0, NULL, f.images, f.labels, &loss_ref, g2, NULL, err,
                          sizeof(err)) == 0);
    CHECK(loss == loss_ref && memcmp(g, g2, sizeof(double) * np) == 0);
    for (size_t i = 0; i < np; i++)
        want[i] = p0[i] - lr * (g2[i] + wd * p0[i]);
    gb_cmp_t cmp;
    CHECK(gb_cmp_f64(f.params, want, np, 0, 0, &cmp) == 0); /* the same expression: exact */
    memcpy(p1, f.params, sizeof(double) * np);
    memcpy(mom1, mom, sizeof(double) * np);
    /* Second step: buf = mu * buf + d; grads NULL is allowed. */
    CHECK(gb_ref_net_train_step(f.net, f.params, f.buffers, mom, &step, f.images, f.labels, lr, mu,
                                wd, &loss, NULL, err, sizeof(err)) == 0);
    CHECK(step == 2);
    CHECK(gb_ref_net_loss(f.net, p1, NULL, f.images, f.labels, &loss_ref, g2, NULL, err,
                          sizeof(err)) == 0);
    for (size_t i = 0; i < np; i++)
        want[i] = p1[i] - lr * (mu * mom1[i] + (g2[i] + wd * p1[i]));
    CHECK(gb_cmp_f64(f.params, want, np, 0, 0, &cmp) == 0);

    /* Training on one batch drives its loss down: 40 steps from ~log 3. */
    double first = loss;
    for (int s = 0; s < 40; s++)
        CHECK(gb_ref_net_train_step(f.net, f.params, f.buffers, mom, &step, f.images, f.labels,
                                    0.05, 0.9, 1e-4, &loss, NULL, err, sizeof(err)) == 0);
    CHECKF(loss < 0.1 * first, "loss %g after 40 steps, first %g", loss, first);
    free(p0);
    free(mom);
    free(g);
    free(g2);
    free(want);
    free(p1);
    free(mom1);
    fixture_free(&f);
}

static void test_refusals(void) {
    char err[256];
    gb_model_config_t cfg = tiny_config(1, 1, 4, 16, 3);
    gb_model_t *m = gb_model_new(&cfg, err, sizeof(err));
    CHECK(m);
    /* Image 16: layer3 and layer4 are 1x1, so with BN a batch of 1 gives one
     * value per channel, which torch refuses to train. */
    CHECK(gb_ref_net_new(m, 1, err, sizeof(err)) == NULL);
    CHECKF(strstr(err, "layer3.0.bn2.weight") && strstr(err, "at least 2"), "%s", err);
    CHECK(gb_ref_net_new(m, 0, err, sizeof(err)) == NULL && strstr(err, "batch 0"));
    gb_ref_net_destroy(NULL);
    gb_model_destroy(&m);

    fixture_t f;
    fixture_init(&f, &cfg, 2, 5);
    size_t np = f.m->n_params, nb = f.m->n_buffers;
    double *p0 = dalloc(np), *b0 = dalloc(nb), *mom = dalloc(np);
    memcpy(p0, f.params, sizeof(double) * np);
    memcpy(b0, f.buffers, sizeof(double) * nb);
    int64_t step = 0;
    double loss = 42;
    f.labels[1] = 3; /* 3 classes: 0..2 */
    CHECK(gb_ref_net_train_step(f.net, f.params, f.buffers, mom, &step, f.images, f.labels, 0.1,
                                0.9, 0, &loss, NULL, err, sizeof(err)) == -1);
    CHECKF(strstr(err, "label 3 of image 1"), "%s", err);
    CHECK(step == 0 && loss == 42);
    CHECK(memcmp(p0, f.params, sizeof(double) * np) == 0);
    CHECK(memcmp(b0, f.buffers, sizeof(double) * nb) == 0);
    f.labels[1] = -1;
    CHECK(gb_ref_net_loss(f.net, f.params, f.buffers, f.images, f.labels, &loss, NULL, NULL, err,
                          sizeof(err)) == -1);
    free(p0);
    free(b0);
    free(mom);
    fixture_free(&f);
}

int main(void) {
    test_gradcheck_bn();
    test_gradcheck_nobn();
    test_running_stats();
    test_train_step();
    test_refusals();
    return 0;
}
