/* test_model.c - the model description matches torchvision's resnet50:
 * tensor names and order, parameter count, shapes at 224 and odd sizes. */
#include "check.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <string.h>

static void test_resnet50(void) {
    gb_model_config_t cfg;
    gb_model_config_resnet50(&cfg, 224);
    char err[256];
    gb_model_t *m = gb_model_new(&cfg, err, sizeof(err));
    CHECKF(m, "%s", err);
    /* torchvision.models.resnet50(): sum(p.numel() for p in parameters()) */
    CHECKF(m->n_params == 25557032, "n_params %zu", m->n_params);
    /* len(state_dict()) is 320, of which 53 are num_batches_tracked. */
    CHECKF(m->n_tensors == 267, "n_tensors %d", m->n_tensors);
    CHECK(m->n_blocks == 16);
    CHECK(strcmp(m->tensors[0].name, "conv1.weight") == 0);
    CHECK(strcmp(m->tensors[m->n_tensors - 1].name, "fc.bias") == 0);
    int i = gb_model_find(m, "layer1.0.bn2.running_var");
    CHECK(i >= 0 && !m->tensors[i].is_param && m->tensors[i].shape[0] == 64);
    i = gb_model_find(m, "layer2.0.downsample.0.weight");
    CHECK(i >= 0 && m->tensors[i].shape[0] == 512 && m->tensors[i].shape[1] == 256);
    i = gb_model_find(m, "layer4.2.conv3.weight");
    CHECK(i >= 0 && m->tensors[i].shape[0] == 2048 && m->tensors[i].shape[1] == 512);
    CHECK(gb_model_find(m, "layer1.1.downsample.0.weight") < 0);
    /* v1.5: the stride sits on the 3x3 */
    CHECK(m->blocks[3].conv1.stride == 1 && m->blocks[3].conv2.stride == 2);
    CHECK(m->stem.oh == 112 && m->pool_oh == 56 && m->feat_h == 7 && m->feat_c == 2048);
    /* forward is 4.09 GMAC per image; a training step about 3x that */
    CHECKF(fabs(m->fwd_flops / 2e9 - 4.09) < 0.03, "fwd %.3f GMAC", m->fwd_flops / 2e9);
    CHECKF(m->train_flops > 24.0e9 && m->train_flops < 25.0e9, "train %.2f GFLOP",
           m->train_flops / 1e9);
    /* slabs are dense and disjoint */
    size_t p = 0, b = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        if (m->tensors[t].is_param) {
            CHECK(m->tensors[t].offset == p);
            p += m->tensors[t].numel;
        } else {
            CHECK(m->tensors[t].offset == b);
            b += m->tensors[t].numel;
        }
    }
    CHECK(p == m->n_params && b == m->n_buffers);
    gb_model_destroy(&m);
    CHECK(m == NULL);
    gb_model_destroy(&m);
}

static void test_odd_sizes(void) {
    gb_model_config_t cfg;
    gb_model_config_resnet50(&cfg, 33);
    char err[256];
    gb_model_t *m = gb_model_new(&cfg, err, sizeof(err));
    CHECK(m);
    /* torch: 33 -> conv 17 -> pool 9 -> 9, 5, 3, 2 */
    CHECK(m->stem.oh == 17 && m->pool_oh == 9 && m->feat_h == 2);
    gb_model_destroy(&m);
    cfg.layers[2] = 0;
    CHECK(gb_model_new(&cfg, err, sizeof(err)) == NULL && strstr(err, "stage 3"));
    gb_model_config_resnet50(&cfg, 0);
    CHECK(gb_model_new(&cfg, err, sizeof(err)) == NULL);
}

static void test_init_deterministic(void) {
    gb_model_config_t cfg;
    gb_model_config_resnet50(&cfg, 32);
    cfg.layers[0] = cfg.layers[1] = cfg.layers[2] = cfg.layers[3] = 1;
    cfg.base_width = 8;
    cfg.n_classes = 10;
    char err[256];
    gb_model_t *m = gb_model_new(&cfg, err, sizeof(err));
    CHECK(m);
    float *p1 = malloc(m->n_params * 4), *p2 = malloc(m->n_params * 4);
    float *b1 = malloc(m->n_buffers * 4), *b2 = malloc(m->n_buffers * 4);
    gb_model_init(m, p1, b1, 7);
    gb_model_init(m, p2, b2, 7);
    CHECK(memcmp(p1, p2, m->n_params * 4) == 0);
    gb_model_init(m, p2, b2, 8);
    CHECK(memcmp(p1, p2, m->n_params * 4) != 0);
    /* conv1 weights: std sqrt(2 / (K*R*S)) */
    const gb_tensor_info_t *t = &m->tensors[0];
    double s2 = 0;
    for (size_t j = 0; j < t->numel; j++)
        s2 += (double)p1[j] * p1[j];
    double sd = sqrt(s2 / t->numel), want = sqrt(2.0 / (8 * 49));
    CHECKF(fabs(sd / want - 1) < 0.15, "conv1 std %g want %g", sd, want);
    free(p1);
    free(p2);
    free(b1);
    free(b2);
    gb_model_destroy(&m);
}

/* gb_rng_fill_normal (chunks of uniforms drawn in order, the transform on
 * every core) gives what a loop over gb_rng_normal gives, bit for bit, and
 * leaves the stream where the loop leaves it: below, at and across its
 * chunk of 65536, at odd lengths */
static void test_fill_normal(void) {
    const size_t ns[] = {0, 1, 5, 65535, 65536, 65537, 3 * 65536 + 7};
    size_t nmax = 3 * 65536 + 7;
    float *a = malloc(nmax * sizeof(float)), *b = malloc(nmax * sizeof(float));
    CHECK(a && b);
    for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
        gb_rng_t r1, r2;
        gb_rng_seed(&r1, 42 + c);
        gb_rng_seed(&r2, 42 + c);
        gb_rng_fill_normal(&r1, a, ns[c], 0.37);
        for (size_t j = 0; j < ns[c]; j++)
            b[j] = (float)(0.37 * gb_rng_normal(&r2));
        CHECKF(memcmp(a, b, ns[c] * sizeof(float)) == 0, "n %zu: values differ", ns[c]);
        CHECKF(gb_rng_next(&r1) == gb_rng_next(&r2), "n %zu: stream left elsewhere", ns[c]);
    }
    free(a);
    free(b);
}

int main(void) {
    test_resnet50();
    test_odd_sizes();
    test_init_deterministic();
    test_fill_normal();
    return 0;
}
