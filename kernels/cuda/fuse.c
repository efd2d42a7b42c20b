/* fuse.c - see fuse.h. Every descriptor is cudnnBackendCreateDescriptor,
 * SetAttribute..., Finalize; the operation graph holds the ops, which hold
 * the tensors. Names and attribute types follow cudnn_graph.h (cuDNN 9). */
#include "fuse.h"

#include "cuda_check.h"

#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR    err
#define ERRLEN errlen

enum { GB_FUSE_MAX_DESC = 32, GB_FUSE_MAX_PLANS = 8 };
/* virtual tensors of the prologue: after scale, after bias, after ReLU */
enum { V_SCALED = 101, V_BIASED = 102, V_RELU = 103 };

struct gb_fuse {
    gb_fuse_kind_t kind;
    cudnnDataType_t dt; /* the io type: CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16 */
    char name[GB_NAME_LEN + 32];
    cudnnBackendDescriptor_t desc[GB_FUSE_MAX_DESC]; /* everything to destroy */
    int n_desc;
    cudnnBackendDescriptor_t graph;
    cudnnBackendDescriptor_t plans[GB_FUSE_MAX_PLANS];
    size_t ws[GB_FUSE_MAX_PLANS];
    char engine[GB_FUSE_MAX_PLANS][32];
    int n_plans, chosen;
};

const char *gb_fuse_kind_name(gb_fuse_kind_t kind) {
    switch (kind) {
    case GB_FUSE_CONV_STATS:
        return "conv_stats";
    case GB_FUSE_SBR_CONV_STATS:
        return "sbr_conv_stats";
    case GB_FUSE_SBR_WGRAD:
        return "sbr_wgrad";
    }
    return "?";
}

gb_fuse_kind_t gb_fuse_kind(const gb_fuse_t *f) {
    return f->kind;
}

unsigned gb_fuse_slots(gb_fuse_kind_t kind) {
    switch (kind) {
    case GB_FUSE_CONV_STATS:
        return 1u << GB_FUSE_X | 1u << GB_FUSE_W | 1u << GB_FUSE_Y | 1u << GB_FUSE_SUM |
               1u << GB_FUSE_SQSUM;
    case GB_FUSE_SBR_CONV_STATS:
        return gb_fuse_slots(GB_FUSE_CONV_STATS) | 1u << GB_FUSE_SCALE | 1u << GB_FUSE_BIAS;
    case GB_FUSE_SBR_WGRAD:
        return 1u << GB_FUSE_X | 1u << GB_FUSE_SCALE | 1u << GB_FUSE_BIAS | 1u << GB_FUSE_DY |
               1u << GB_FUSE_DW;
    }
    return 0;
}

/* a new descriptor of type t, kept for destroy */
static int make(gb_fuse_t *f, cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d,
                char *err, size_t errlen) {
    *d = NULL;
    if (f->n_desc == GB_FUSE_MAX_DESC) {
        snprintf(err, errlen, "%s: too many descriptors", f->name);
        return -1;
    }
    CK_DNN(cudnnBackendCreateDescriptor(t, d));
    f->desc[f->n_desc++] = *d;
    return 0;
fail:
    return -1;
}

#define SET(d, attr, type, n, val) CK_DNN(cudnnBackendSetAttribute((d), (attr), (type), (n), (val)))

/* NHWC-packed (or KRSC-packed) 4-d tensor: dims {n, c, h, w} */
static int tensor(gb_fuse_t *f, int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h,
                  int64_t w, bool is_virtual, cudnnBackendDescriptor_t *out, char *err,
                  size_t errlen) {
    cudnnBackendDescriptor_t d;
    if (make(f, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d, err, errlen)) return -1;
    int64_t dims[4] = {n, c, h, w};
    int64_t strides[4] = {c * h * w, 1, w * c, c};
    int64_t align = 16;
    SET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    SET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    SET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    SET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    CK_DNN(cudnnBackendFinalize(d));
    *out = d;
    return 0;
fail:
    return -1;
}

/* y = x (mode) b, or y = relu(x) when b is NULL */
static int pointwise(gb_fuse_t *f, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                     cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                     cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op, char *err,
                     size_t errlen) {
    cudnnBackendDescriptor_t pw;
    if (make(f, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw, err, errlen)) return -1;
    SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_RELU_FWD) {
        /* as cudnn-frontend sets them: no upper clip (the float range), a
         * plain ReLU below */
        cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
        double lower = 0.0, upper = FLT_MAX, slope = 0.0;
        SET(pw, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan);
        SET(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lower);
        SET(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &upper);
        SET(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &slope);
    }
    CK_DNN(cudnnBackendFinalize(pw));
    if (make(f, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op, err, errlen)) return -1;
    SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    float one = 1.0f;
    SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    CK_DNN(cudnnBackendFinalize(*op));
    return 0;
fail:
    return -1;
}

static int conv_desc(gb_fuse_t *f, const gb_conv_t *g, cudnnBackendDescriptor_t *out, char *err,
                     size_t errlen) {
    cudnnBackendDescriptor_t d;
    if (make(f, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d, err, errlen)) return -1;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t nd = 2, dil[2] = {1, 1}, str[2] = {g->stride, g->stride}, pad[2] = {g->pad, g->pad};
    SET(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    SET(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SET(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd);
    SET(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    SET(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
    SET(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    SET(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    CK_DNN(cudnnBackendFinalize(d));
    *out = d;
    return 0;
fail:
    return -1;
}

/* relu(x * scale + bias) into a virtual tensor of type vt; appends 3 ops */
static int prologue(gb_fuse_t *f, const gb_conv_t *g, int n, cudnnDataType_t vt,
                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t *ops, int *n_ops,
                    cudnnBackendDescriptor_t *act, char *err, size_t errlen) {
    cudnnBackendDescriptor_t s, b, v1, v2;
    if (tensor(f, GB_FUSE_SCALE, f->dt, 1, g->c, 1, 1, false, &s, err, errlen) ||
        tensor(f, GB_FUSE_BIAS, f->dt, 1, g->c, 1, 1, false, &b, err, errlen) ||
        tensor(f, V_SCALED, vt, n, g->c, g->ih, g->iw, true, &v1, err, errlen) ||
        tensor(f, V_BIASED, vt, n, g->c, g->ih, g->iw, true, &v2, err, errlen) ||
        tensor(f, V_RELU, vt, n, g->c, g->ih, g->iw, true, act, err, errlen))
        return -1;
    if (pointwise(f, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, x, s, v1, &ops[(*n_ops)++], err,
                  errlen) ||
        pointwise(f, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, v1, b, v2, &ops[(*n_ops)++], err,
                  errlen) ||
        pointwise(f, CUDNN_POINTWISE_RELU_FWD, CUDNN_DATA_FLOAT, v2, NULL, *act, &ops[(*n_ops)++],
                  err, errlen))
        return -1;
    return 0;
}

static int build(gb_fuse_t *f, const gb_conv_t *g, int n, cudnnHandle_t handle, char *err,
                 size_t errlen) {
    cudnnBackendDescriptor_t ops[6], x, w, cv, in;
    int n_ops = 0;
    float alpha = 1.0f, beta = 0.0f; /* FLOAT for half compute too (cudnn_graph.h) */
    if (tensor(f, GB_FUSE_X, f->dt, n, g->c, g->ih, g->iw, false, &x, err, errlen) ||
        conv_desc(f, g, &cv, err, errlen))
        return -1;
    in = x;
    if (f->kind != GB_FUSE_CONV_STATS) {
        /* the FE samples: fprop's intermediates in fp32, wgrad's in fp16 */
        cudnnDataType_t vt = f->kind == GB_FUSE_SBR_WGRAD ? f->dt : CUDNN_DATA_FLOAT;
        if (prologue(f, g, n, vt, x, ops, &n_ops, &in, err, errlen)) return -1;
    }
    if (f->kind == GB_FUSE_SBR_WGRAD) {
        cudnnBackendDescriptor_t dy, dw;
        if (tensor(f, GB_FUSE_DY, f->dt, n, g->k, g->oh, g->ow, false, &dy, err, errlen) ||
            tensor(f, GB_FUSE_DW, f->dt, g->k, g->c, g->kh, g->kw, false, &dw, err, errlen) ||
            make(f, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, &ops[n_ops],
                 err, errlen))
            return -1;
        cudnnBackendDescriptor_t op = ops[n_ops++];
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &in);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &dy);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &dw);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cv);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
        CK_DNN(cudnnBackendFinalize(op));
    } else {
        cudnnBackendDescriptor_t y, sum, sq;
        if (tensor(f, GB_FUSE_W, f->dt, g->k, g->c, g->kh, g->kw, false, &w, err, errlen) ||
            tensor(f, GB_FUSE_Y, f->dt, n, g->k, g->oh, g->ow, false, &y, err, errlen) ||
            tensor(f, GB_FUSE_SUM, CUDNN_DATA_FLOAT, 1, g->k, 1, 1, false, &sum, err, errlen) ||
            tensor(f, GB_FUSE_SQSUM, CUDNN_DATA_FLOAT, 1, g->k, 1, 1, false, &sq, err, errlen) ||
            make(f, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &ops[n_ops], err,
                 errlen))
            return -1;
        cudnnBackendDescriptor_t op = ops[n_ops++];
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            1, &cv);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
        CK_DNN(cudnnBackendFinalize(op));
        if (make(f, CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, &ops[n_ops], err, errlen))
            return -1;
        op = ops[n_ops++];
        cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
        /* sums over up to 802,816 values a channel (layer1 at batch 256):
         * accumulated in fp32, as the frontend's default compute type and
         * cuDNN's own ConvBN samples do (not in Y's 16-bit type) */
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        SET(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        SET(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
        SET(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        SET(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sum);
        SET(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sq);
        CK_DNN(cudnnBackendFinalize(op));
    }
    if (make(f, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &f->graph, err, errlen)) return -1;
    SET(f->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops);
    /* optional since cuDNN 9.8 (no GPU needed to finalize without it) */
    if (handle) SET(f->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    CK_DNN(cudnnBackendFinalize(f->graph));
    return 0;
fail:
    return -1;
}

gb_fuse_t *gb_fuse_new(gb_fuse_kind_t kind, const gb_conv_t *g, int n, cudnnDataType_t dt,
                       cudnnHandle_t handle, const char *name, char *err, size_t errlen) {
    gb_fuse_t *f = calloc(1, sizeof(*f));
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->kind = kind;
    f->dt = dt;
    snprintf(f->name, sizeof(f->name), "conv %s %s%s", name ? name : "?", gb_fuse_kind_name(kind),
             dt == CUDNN_DATA_BFLOAT16 ? " bf16" : "");
    char why[GB_ERR_LEN];
    why[0] = 0;
    if (kind < GB_FUSE_CONV_STATS || kind > GB_FUSE_SBR_WGRAD || n < 1 || g->c < 1 || g->k < 1 ||
        (dt != CUDNN_DATA_HALF && dt != CUDNN_DATA_BFLOAT16)) {
        snprintf(err, errlen, "%s: bad arguments (kind %d, batch %d, data type %d)", f->name,
                 (int)kind, n, (int)dt);
        gb_fuse_destroy(&f);
        return NULL;
    }
    if (build(f, g, n, handle, why, sizeof(why))) {
        snprintf(err, errlen, "%s: %s", f->name, why);
        gb_fuse_destroy(&f);
        return NULL;
    }
    return f;
}

void gb_fuse_destroy(gb_fuse_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_fuse_t *f = *self_p;
    for (int i = 0; i < f->n_plans; i++)
        cudnnBackendDestroyDescriptor(f->plans[i]);
    for (int i = f->n_desc - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(f->desc[i]);
    free(f);
    *self_p = NULL;
}

/* err, which a cuDNN check filled, prefixed with the graph's name */
static void name_err(const gb_fuse_t *f, char *err, size_t errlen) {
    char why[GB_ERR_LEN];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, errlen, "%s: %s", f->name, why);
}

/* "eng<global index>" of an engine configuration */
static void engine_name(cudnnBackendDescriptor_t cfg, char *out, size_t outlen) {
    snprintf(out, outlen, "?");
    cudnnBackendDescriptor_t eng = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng)) return;
    int64_t cnt = 0, idx = -1;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &cnt, &eng) == CUDNN_STATUS_SUCCESS &&
        cnt == 1 &&
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt,
                                 &idx) == CUDNN_STATUS_SUCCESS)
        snprintf(out, outlen, "eng%lld", (long long)idx);
    cudnnBackendDestroyDescriptor(eng);
}

/* The engine configurations cuDNN's heuristics in `mode` offer for f's
 * graph, into cfg[0..max) (created here); how many of them were written
 * (cuDNN reports how many it has, which can be more than max), -1 on
 * error. */
static int64_t heur_cfgs(gb_fuse_t *f, cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t *cfg,
                         int max, char *err, size_t errlen) {
    cudnnBackendDescriptor_t heur = NULL;
    int64_t n = 0;
    CK_DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &f->graph);
    SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    CK_DNN(cudnnBackendFinalize(heur));
    for (int i = 0; i < max; i++)
        CK_DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]));
    CK_DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, max, &n, cfg));
    cudnnBackendDestroyDescriptor(heur);
    return n < max ? n : max;
fail:
    if (heur) cudnnBackendDestroyDescriptor(heur);
    return -1;
}

int gb_fuse_plan(gb_fuse_t *f, cudnnHandle_t handle, size_t ws_limit, int max_plans, char *err,
                 size_t errlen) {
    enum { MAX_CFG = 32 };
    /* mode A, the engines cuDNN ranks for the graph; only when none of
     * them plans, the fallback list (the frontend's order too) */
    static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    static const char *const mode_name[] = {"", "fallback "};
    cudnnBackendDescriptor_t cfg[MAX_CFG] = {0};
    int64_t n_cfg[2] = {0, 0};
    char first[GB_ERR_LEN];
    first[0] = 0;
    for (int i = 0; i < f->n_plans; i++)
        cudnnBackendDestroyDescriptor(f->plans[i]);
    f->n_plans = 0;
    f->chosen = 0;
    if (max_plans > GB_FUSE_MAX_PLANS) max_plans = GB_FUSE_MAX_PLANS;
    for (int mi = 0; mi < 2 && f->n_plans == 0; mi++) {
        n_cfg[mi] = heur_cfgs(f, modes[mi], cfg, MAX_CFG, err, errlen);
        if (n_cfg[mi] < 0) {
            /* a mode whose query fails offers nothing; the next is still
             * tried (as the frontend does), and the error is said if no
             * engine plans at all */
            if (!first[0]) snprintf(first, sizeof(first), "%sheuristics: %s", mode_name[mi], err);
            n_cfg[mi] = 0;
        }
        for (int64_t i = 0; i < n_cfg[mi] && f->n_plans < max_plans; i++) {
            cudnnBackendDescriptor_t plan = NULL;
            int64_t ws = 0;
            cudnnStatus_t s =
                cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                             CUDNN_TYPE_HANDLE, 1, &handle);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
            if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
            int64_t cnt = 0;
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &cnt, &ws);
            if (s != CUDNN_STATUS_SUCCESS || ws < 0 || (size_t)ws > ws_limit) {
                if (!first[0]) {
                    char d[256];
                    cudnnGetLastErrorString(d, sizeof(d));
                    if (s != CUDNN_STATUS_SUCCESS)
                        snprintf(first, sizeof(first), "%s%s%s", cudnnGetErrorString(s),
                                 d[0] ? ": " : "", d);
                    else
                        snprintf(first, sizeof(first), "workspace %lld bytes over the limit %zu",
                                 (long long)ws, ws_limit);
                }
                if (plan) cudnnBackendDestroyDescriptor(plan);
                continue;
            }
            f->plans[f->n_plans] = plan;
            f->ws[f->n_plans] = (size_t)ws;
            char eng[16];
            engine_name(cfg[i], eng, sizeof(eng));
            snprintf(f->engine[f->n_plans], sizeof(f->engine[0]), "%s%s", mode_name[mi], eng);
            f->n_plans++;
        }
        for (int i = 0; i < MAX_CFG; i++)
            if (cfg[i]) cudnnBackendDestroyDescriptor(cfg[i]);
        memset(cfg, 0, sizeof(cfg));
    }
    if (f->n_plans == 0)
        snprintf(err, errlen,
                 "%s: no engine (%lld configurations from the heuristics, %lld from the fallback "
                 "list%s%s)",
                 f->name, (long long)n_cfg[0], (long long)n_cfg[1], first[0] ? "; the first: " : "",
                 first);
    return f->n_plans;
}

int gb_fuse_n_plans(const gb_fuse_t *f) {
    return f->n_plans;
}

size_t gb_fuse_workspace(const gb_fuse_t *f, int plan) {
    return plan >= 0 && plan < f->n_plans ? f->ws[plan] : 0;
}

void gb_fuse_choose(gb_fuse_t *f, int plan) {
    if (plan >= 0 && plan < f->n_plans) f->chosen = plan;
}

int gb_fuse_chosen(const gb_fuse_t *f) {
    return f->chosen;
}

const char *gb_fuse_engine(const gb_fuse_t *f, int plan) {
    return plan >= 0 && plan < f->n_plans ? f->engine[plan] : "?";
}

int gb_fuse_run(gb_fuse_t *f, cudnnHandle_t handle, void *const ptr[GB_FUSE_NSLOTS],
                void *workspace, char *err, size_t errlen) {
    cudnnBackendDescriptor_t pack = NULL;
    int64_t uids[GB_FUSE_NSLOTS];
    void *ptrs[GB_FUSE_NSLOTS];
    int64_t n = 0;
    unsigned used = gb_fuse_slots(f->kind);
    for (int s = 0; s < GB_FUSE_NSLOTS; s++) {
        if (!(used & 1u << s)) continue;
        if (!ptr[s] || ((uintptr_t)ptr[s] & 15u)) {
            snprintf(err, errlen, "%s: tensor %d %s", f->name, s,
                     ptr[s] ? "not 16-byte aligned" : "missing");
            return -1;
        }
        uids[n] = s;
        ptrs[n] = ptr[s];
        n++;
    }
    if (f->n_plans < 1) {
        snprintf(err, errlen, "%s: not planned", f->name);
        return -1;
    }
    CK_DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    CK_DNN(cudnnBackendFinalize(pack));
    CK_DNN(cudnnBackendExecute(handle, f->plans[f->chosen], pack));
    cudnnBackendDestroyDescriptor(pack);
    return 0;
fail:
    name_err(f, err, errlen);
    if (pack) cudnnBackendDestroyDescriptor(pack);
    return -1;
}
