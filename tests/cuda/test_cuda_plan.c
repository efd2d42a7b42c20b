/* test_cuda_plan.c - the CUDA backend's memory plan and layout conversions:
 * ResNet-50 shapes, disjoint aligned arena regions, parameter groups, OIHW
 * <-> KRSC (the stem in 4 and in 8 channels), refusal of what cannot run. */
#include "check.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gb_model_t *resnet50(int image) {
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, image);
    char err[256];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    return m;
}

static void test_resnet50_plan(void) {
    gb_model_t *m = resnet50(224);
    char err[256];
    gb_plan_t *p = gb_plan_new(m, 256, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    CHECK(p->n_convs == 53 && p->n_bns == 53 && p->n_blocks == 16);
    CHECK(p->acts[p->x0].c == GB_PLAN_STEM_C && p->acts[p->x0].h == 224);
    CHECK(p->acts[p->c0].h == 112 && p->acts[p->p0].h == 56 && p->acts[p->feat].c == 2048);
    CHECK(p->max_act_numel == (size_t)256 * 112 * 112 * 64);
    /* arena regions: aligned, in bounds, pairwise disjoint */
    size_t nreg = (size_t)p->n_acts + GB_PLAN_NGRAD;
    size_t *lo = malloc(nreg * sizeof(size_t)), *hi = malloc(nreg * sizeof(size_t));
    CHECK(lo && hi);
    for (int i = 0; i < p->n_acts; i++) {
        lo[i] = p->acts[i].off;
        hi[i] = p->acts[i].off + p->acts[i].numel * p->esize;
    }
    for (int g = 0; g < GB_PLAN_NGRAD; g++) {
        lo[p->n_acts + g] = p->grad_off[g];
        hi[p->n_acts + g] = p->grad_off[g] + p->grad_numel * p->esize;
    }
    for (size_t i = 0; i < nreg; i++) {
        CHECK(lo[i] % 256 == 0 && hi[i] <= p->arena_bytes && hi[i] > lo[i]);
        for (size_t j = i + 1; j < nreg; j++)
            CHECKF(hi[i] <= lo[j] || hi[j] <= lo[i], "overlap %zu %zu", i, j);
    }
    free(lo);
    free(hi);
    /* every conv reads what the previous layer wrote, with matching shapes */
    for (int i = 0; i < p->n_convs; i++) {
        const gb_plan_conv_t *c = &p->convs[i];
        const gb_plan_act_t *x = &p->acts[c->x], *y = &p->acts[c->y];
        CHECKF(x->h == c->g.ih && x->w == c->g.iw && x->c == c->c_int, "%s input", c->name);
        CHECKF(y->h == c->g.oh && y->w == c->g.ow && y->c == c->g.k, "%s output", c->name);
        CHECK(c->w_off % GB_PLAN_ALIGN == 0 && c->w_off + c->w_numel <= p->n_a);
        CHECK(c->dgrad == (i != p->stem_conv));
    }
    for (int i = 0; i < p->n_bns; i++) {
        const gb_plan_bn_t *b = &p->bns[i];
        CHECK(p->acts[b->x].c == b->g.c && p->acts[b->y].numel == p->acts[b->x].numel);
        CHECK(b->gamma_off >= p->n_a && b->beta_off + b->g.c <= p->n_a + p->n_b);
        CHECK(b->count == 256L * b->g.h * b->g.w);
        CHECK(b->z < 0 || p->acts[b->z].numel == p->acts[b->y].numel);
    }
    /* bn3 of a projection block adds the projection, otherwise the input */
    CHECK(p->bns[p->blocks[0].bn3].z == p->blocks[0].sd);
    CHECK(p->bns[p->blocks[1].bn3].z == p->blocks[1].x && p->blocks[1].x == p->blocks[0].y);
    CHECK(p->bns[p->blocks[0].bnd].relu == 0 && p->bns[p->blocks[0].bn1].relu == 1);
    /* group A holds conv and fc weights (+ alignment), group B the rest */
    size_t wa = 0, wb = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const gb_tensor_info_t *ti = &m->tensors[t];
        if (!ti->is_param) continue;
        if (ti->role == GB_ROLE_CONV_W || ti->role == GB_ROLE_FC_W)
            wa += ti->numel;
        else
            wb += ti->numel;
    }
    CHECK(wa + wb == m->n_params);
    CHECK(p->n_a >= wa + 64 * 7 * 7 && p->n_a < wa + 64 * 7 * 7 + 54 * GB_PLAN_ALIGN);
    CHECK(p->n_b >= wb && p->n_b < wb + 107 * GB_PLAN_ALIGN);
    CHECK(gb_plan_grad_b_byte_off(p, 2) % 256 == 0);
    CHECK(gb_plan_grad_bytes(p, 2) == gb_plan_grad_b_byte_off(p, 2) + p->n_b * 4);
    gb_plan_destroy(&p);
    CHECK(p == NULL);
    gb_plan_destroy(&p);
    gb_model_destroy(&m);
}

/* The arena at batch 256, 224x224, counted from the model's geometry
 * independently of plan.c: every forward activation once (stem input padded
 * to 4 channels; per block t1 u1 at the input size, t2 u2 t3 y at the output
 * size, td sd for a projection; the pooled features) plus five gradient
 * buffers of the largest activation; plan.c may only add 256-byte alignment.
 * Also: nothing near the 2^31-element limit of cuDNN's descriptors. */
static void test_resnet50_sizes(void) {
    gb_model_t *m = resnet50(224);
    const size_t N = 256;
    size_t per_image = 224 * 224 * 4 + 2 * 112 * 112 * 64 + 56 * 56 * 64 + 2048;
    size_t largest = 112 * 112 * 64;
    for (int i = 0; i < m->n_blocks; i++) {
        const gb_block_t *b = &m->blocks[i];
        size_t in = (size_t)b->ih * b->iw, out = (size_t)b->oh * b->ow;
        per_image += 2 * in * b->mid_c + 2 * out * b->mid_c + 2 * out * b->out_c;
        if (b->has_down) per_image += 2 * out * b->out_c;
    }
    /* 21.1M values per image: the known figure of ResNet-50's training activations */
    CHECKF(per_image > 20000000 && per_image < 23000000, "%zu per image", per_image);
    for (size_t es = 2; es <= 4; es += 2) {
        char err[256];
        gb_plan_t *p = gb_plan_new(m, (int)N, es, GB_PLAN_STEM_C, err, sizeof(err));
        CHECKF(p, "%s", err);
        size_t need = (N * per_image + 5 * N * largest) * es;
        size_t slack = (size_t)(p->n_acts + GB_PLAN_NGRAD) * 256;
        CHECKF(p->arena_bytes >= need && p->arena_bytes <= need + slack,
               "arena %zu bytes, counted %zu (+ %zu alignment)", p->arena_bytes, need, slack);
        for (int i = 0; i < p->n_acts; i++)
            CHECK(p->acts[i].numel < (size_t)1 << 31);
        printf("batch 256 %s: arena %.2f GB\n", es == 2 ? "fp16/bf16" : "fp32/tf32",
               p->arena_bytes / 1e9);
        gb_plan_destroy(&p);
    }
    gb_model_destroy(&m);
}

static void test_layouts(void) {
    /* OIHW (2,3,2,2) -> KRSC with 4 channels: element (k1,c2,r0,s1) */
    float src[24], krsc[2 * 2 * 2 * 4], back[24];
    for (int i = 0; i < 24; i++)
        src[i] = (float)(i + 1);
    gb_oihw_to_krsc(src, 2, 3, 2, 2, 4, krsc);
    /* src index ((1*3+2)*2+0)*2+1 = 21 -> value 22; dst ((1*2+0)*2+1)*4+2 = 22 */
    CHECK(krsc[22] == 22.0f);
    for (int k = 0; k < 2; k++)
        for (int rs = 0; rs < 4; rs++)
            CHECK(krsc[(k * 4 + rs) * 4 + 3] == 0.0f);
    gb_krsc_to_oihw(krsc, 2, 3, 2, 2, 4, back, 1.0f);
    CHECK(memcmp(src, back, sizeof(src)) == 0);
    gb_krsc_to_oihw(krsc, 2, 3, 2, 2, 4, back, 0.5f);
    CHECK(back[21] == 11.0f);

    /* whole slabs round trip bit-exactly; padding is zero; with the stem
     * stored in 4 channels and in 8 (bf16's default) */
    gb_model_t *m = resnet50(64);
    char err[256];
    for (int stem_c = 4; stem_c <= 8; stem_c += 4) {
        gb_plan_t *p = gb_plan_new(m, 2, 4, stem_c, err, sizeof(err));
        CHECKF(p, "%s", err);
        const gb_plan_conv_t *sc = &p->convs[p->stem_conv];
        CHECK(p->stem_c == stem_c && p->acts[p->x0].c == stem_c && sc->c_int == stem_c);
        CHECK(sc->w_numel == (size_t)64 * 7 * 7 * stem_c);
        CHECK(p->params[m->stem.w].c_int == stem_c);
        float *canon = malloc(m->n_params * 4), *canon2 = malloc(m->n_params * 4);
        float *in = malloc((p->n_a + p->n_b) * 4);
        CHECK(canon && canon2 && in);
        for (size_t i = 0; i < m->n_params; i++)
            canon[i] = (float)i * 0.5f + 1.0f;
        gb_plan_params_to_internal(p, canon, in);
        gb_plan_params_from_internal(p, in, canon2, 1.0f);
        CHECK(memcmp(canon, canon2, m->n_params * 4) == 0);
        size_t nonzero = 0;
        for (size_t i = 0; i < p->n_a + p->n_b; i++)
            nonzero += in[i] != 0.0f;
        CHECK(nonzero == m->n_params); /* every value lands once, padding stays 0 */
        /* fc weight keeps its canonical layout */
        const gb_tensor_info_t *fw = &m->tensors[m->fc_w];
        CHECK(in[p->fc_w_off + 5] == canon[fw->offset + 5]);
        /* the stem's weight (k 0, r 0, s 0): channels 0..2 as given, the rest 0 */
        const gb_tensor_info_t *sw = &m->tensors[m->stem.w];
        for (int c = 0; c < stem_c; c++)
            CHECK(in[sc->w_off + c] == (c < 3 ? canon[sw->offset + (size_t)c * 49] : 0.0f));
        free(canon);
        free(canon2);
        free(in);
        gb_plan_destroy(&p);
    }
    gb_model_destroy(&m);
}

/* GB_CUDA_FUSE: 1 asks for the fused step, 0 or unset not, anything else refused */
static void test_fuse_env(void) {
    char err[256] = "";
    CHECK(gb_plan_fuse(NULL, err, sizeof(err)) == 0);
    CHECK(gb_plan_fuse("0", err, sizeof(err)) == 0);
    CHECK(gb_plan_fuse("1", err, sizeof(err)) == 1);
    const char *bad[] = {"", "2", "yes", "1 ", "01"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        CHECKF(gb_plan_fuse(bad[i], err, sizeof(err)) == -1 && strstr(err, "GB_CUDA_FUSE=") &&
                   strstr(err, "0 or 1"),
               "'%s': %s", bad[i], err);
    }
}

/* GB_CUDA_STEM_C: 8 for bf16 unless set, 4 otherwise; any other value refused */
static void test_stem_c(void) {
    char err[256] = "";
    CHECK(gb_plan_stem_c(GB_PREC_BF16, NULL, err, sizeof(err)) == 8);
    CHECK(gb_plan_stem_c(GB_PREC_FP16, NULL, err, sizeof(err)) == 4);
    CHECK(gb_plan_stem_c(GB_PREC_TF32, NULL, err, sizeof(err)) == 4);
    CHECK(gb_plan_stem_c(GB_PREC_FP32, NULL, err, sizeof(err)) == 4);
    CHECK(gb_plan_stem_c(GB_PREC_BF16, "4", err, sizeof(err)) == 4);
    CHECK(gb_plan_stem_c(GB_PREC_FP16, "8", err, sizeof(err)) == 8);
    const char *bad[] = {"3", "16", "", "8 ", "08", "four"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        CHECKF(gb_plan_stem_c(GB_PREC_BF16, bad[i], err, sizeof(err)) == -1 &&
                   strstr(err, "GB_CUDA_STEM_C=") && strstr(err, "4 or 8"),
               "'%s': %s", bad[i], err);
    }
    gb_model_t *m = resnet50(64);
    CHECK(gb_plan_new(m, 2, 4, 3, err, sizeof(err)) == NULL && strstr(err, "stem channels 3"));
    CHECK(gb_plan_new(m, 2, 4, 16, err, sizeof(err)) == NULL && strstr(err, "4 or 8"));
    gb_model_destroy(&m);
}

static void test_refusals(void) {
    char err[256];
    gb_model_t *m = resnet50(32); /* layer4 is 1x1 at 32 */
    gb_plan_t *p = gb_plan_new(m, 1, 4, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p == NULL && strstr(err, "at least 2"), "%s", err);
    p = gb_plan_new(m, 2, 4, GB_PLAN_STEM_C, err, sizeof(err));
    CHECK(p);
    gb_plan_destroy(&p);
    CHECK(gb_plan_new(m, 0, 4, GB_PLAN_STEM_C, err, sizeof(err)) == NULL && strstr(err, "batch"));
    CHECK(gb_plan_new(m, 2, 3, GB_PLAN_STEM_C, err, sizeof(err)) == NULL);
    gb_model_destroy(&m);
    /* the stem's output of ResNet-50 at 224 is 802816 values per image:
     * batch 2674 stays under 2^31 elements, 2675 does not */
    m = resnet50(224);
    p = gb_plan_new(m, 2674, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    gb_plan_destroy(&p);
    p = gb_plan_new(m, 2675, 2, GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p == NULL && strstr(err, "2^31"), "%s", p ? "accepted" : err);
    gb_model_destroy(&m);
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, 64);
    mc.bn = 0;
    m = gb_model_new(&mc, err, sizeof(err));
    CHECK(m);
    CHECK(gb_plan_new(m, 2, 4, GB_PLAN_STEM_C, err, sizeof(err)) == NULL &&
          strstr(err, "batch norm"));
    gb_model_destroy(&m);
}

/* what data-parallel ranks compare at set-up: alike for alike plans, not
 * when the stem's channels, the element size, the batch or `extra` differ */
static void test_fingerprint(void) {
    char err[256];
    gb_model_t *m = resnet50(64);
    gb_plan_t *a = gb_plan_new(m, 2, 2, 4, err, sizeof(err));
    gb_plan_t *b = gb_plan_new(m, 2, 2, 4, err, sizeof(err));
    gb_plan_t *c8 = gb_plan_new(m, 2, 2, 8, err, sizeof(err));
    gb_plan_t *e4 = gb_plan_new(m, 2, 4, 4, err, sizeof(err));
    gb_plan_t *n3 = gb_plan_new(m, 3, 2, 4, err, sizeof(err));
    CHECK(a && b && c8 && e4 && n3);
    uint32_t fa = gb_plan_fingerprint(a, 65536);
    CHECK(fa < (1u << 30) && fa == gb_plan_fingerprint(b, 65536));
    CHECK(fa != gb_plan_fingerprint(c8, 65536));
    CHECK(fa != gb_plan_fingerprint(e4, 65536));
    CHECK(fa != gb_plan_fingerprint(n3, 65536));
    CHECK(fa != gb_plan_fingerprint(a, 32768));
    gb_plan_destroy(&a);
    gb_plan_destroy(&b);
    gb_plan_destroy(&c8);
    gb_plan_destroy(&e4);
    gb_plan_destroy(&n3);
    gb_model_destroy(&m);
}

int main(void) {
    test_resnet50_plan();
    test_resnet50_sizes();
    test_layouts();
    test_refusals();
    test_stem_c();
    test_fuse_env();
    test_fingerprint();
    return 0;
}
