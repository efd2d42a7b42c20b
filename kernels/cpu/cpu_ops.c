/* cpu_ops.c - oneDNN ops of the CPU backend (see cpu_ops.h).
 *
 * Pattern for every op: describe it with `any` formats where oneDNN may pick
 * (conv/ip weights and outputs), with the producer's exact format where a
 * tensor already exists (activations flow between layers without reorders),
 * create the forward-training primitive, then the backward primitives with the
 * forward one as hint, and check each implementation (strict mode) at
 * creation. Execution functions only bind memories and run.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu_ops.h"
#include "wino.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DNNL_CHECK(call, what)                                                                     \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success) {                                                                 \
            snprintf(err, errlen, "%s: %s (%s:%d)", (what), dnnl_status2str(st_), __FILE__,        \
                     __LINE__);                                                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static void *aligned_zalloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* ---------------------------------------------------------------- context */

gb_cpu_ctx_t *gb_cpu_ctx_new(int threads, int strict, char *err, size_t errlen) {
    if (threads < 1) {
        snprintf(err, errlen, "thread count %d (>= 1 needed)", threads);
        return NULL;
    }
    gb_cpu_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ctx->threads = threads;
    ctx->strict = strict;
    /* oneDNN reads omp_get_max_threads() when a primitive is created and
     * keeps it: set it first, on this thread. */
    omp_set_num_threads(threads);
    DNNL_CHECK(dnnl_engine_create(&ctx->eng, dnnl_cpu, 0), "cpu engine");
    DNNL_CHECK(dnnl_stream_create(&ctx->stream, ctx->eng, dnnl_stream_default_flags), "stream");
    return ctx;
fail:
    gb_cpu_ctx_destroy(&ctx);
    return NULL;
}

void gb_cpu_ctx_destroy(gb_cpu_ctx_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_cpu_ctx_t *ctx = *self_p;
    for (int i = 0; i < ctx->n_prims; i++) {
        gb_cpu_prim_t *pr = ctx->prims[i];
        if (pr->scratch) dnnl_memory_destroy(pr->scratch);
        if (pr->p) dnnl_primitive_destroy(pr->p);
        if (pr->pd) dnnl_primitive_desc_destroy(pr->pd);
        pr->scratch = NULL;
        pr->p = NULL;
        pr->pd = NULL;
    }
    for (int i = 0; i < ctx->n_mems; i++)
        dnnl_memory_destroy(ctx->mems[i]);
    for (int i = 0; i < ctx->n_bufs; i++)
        free(ctx->bufs[i]);
    free(ctx->prims);
    free(ctx->mems);
    free(ctx->bufs);
    free(ctx->scratch);
    if (ctx->stream) dnnl_stream_destroy(ctx->stream);
    if (ctx->eng) dnnl_engine_destroy(ctx->eng);
    free(ctx);
    *self_p = NULL;
}

size_t gb_cpu_ctx_scratch_need(const gb_cpu_ctx_t *ctx) {
    size_t need = 0;
    for (int i = 0; i < ctx->n_prims; i++) {
        size_t b = dnnl_memory_desc_get_size(&ctx->prims[i]->scratch_md);
        if (b > need) need = b;
    }
    return need;
}

static int bind_all(gb_cpu_ctx_t *ctx, void *buf, char *err, size_t errlen) {
    for (int i = 0; i < ctx->n_prims; i++) {
        gb_cpu_prim_t *pr = ctx->prims[i];
        if (dnnl_memory_desc_get_size(&pr->scratch_md) == 0) continue;
        if (pr->scratch) {
            DNNL_CHECK(dnnl_memory_set_data_handle(pr->scratch, buf), pr->what);
        } else {
            DNNL_CHECK(dnnl_memory_create(&pr->scratch, &pr->scratch_md, ctx->eng, buf), pr->what);
        }
    }
    return 0;
fail:
    return -1;
}

int gb_cpu_ctx_bind_scratch(gb_cpu_ctx_t *ctx, char *err, size_t errlen) {
    size_t need = gb_cpu_ctx_scratch_need(ctx);
    if (need > ctx->scratch_bytes) {
        void *p = aligned_zalloc(need); /* zeroed: every page touched now, not in a step */
        if (!p) {
            snprintf(err, errlen, "out of memory for a %zu-byte scratchpad", need);
            return -1;
        }
        free(ctx->scratch);
        ctx->scratch = p;
        ctx->scratch_bytes = need;
    }
    return bind_all(ctx, ctx->scratch, err, errlen);
}

int gb_cpu_ctx_bind_scratch_at(gb_cpu_ctx_t *ctx, void *buf, size_t bytes, char *err,
                               size_t errlen) {
    if (bytes < gb_cpu_ctx_scratch_need(ctx)) {
        snprintf(err, errlen, "scratchpad of %zu bytes, %zu needed", bytes,
                 gb_cpu_ctx_scratch_need(ctx));
        return -1;
    }
    free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_bytes = bytes;
    return bind_all(ctx, buf, err, errlen);
}

dnnl_memory_t gb_cpu_ctx_mem(gb_cpu_ctx_t *ctx, const dnnl_memory_desc_t *md, void *ptr, char *err,
                             size_t errlen) {
    dnnl_memory_t m = NULL;
    void *own = NULL;
    if (grow((void **)&ctx->mems, &ctx->cap_mems, ctx->n_mems, sizeof(*ctx->mems)) ||
        grow((void **)&ctx->bufs, &ctx->cap_bufs, ctx->n_bufs, sizeof(*ctx->bufs))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!ptr) {
        own = aligned_zalloc(dnnl_memory_desc_get_size(md));
        if (!own) {
            snprintf(err, errlen, "out of memory for a %zu-byte tensor",
                     dnnl_memory_desc_get_size(md));
            return NULL;
        }
        ptr = own;
    }
    DNNL_CHECK(dnnl_memory_create(&m, md, ctx->eng, ptr), "memory");
    ctx->mems[ctx->n_mems++] = m;
    if (own) ctx->bufs[ctx->n_bufs++] = own;
    return m;
fail:
    free(own);
    return NULL;
}

int gb_cpu_exec(gb_cpu_ctx_t *ctx, const gb_cpu_prim_t *pr, int nargs, const dnnl_exec_arg_t *args,
                char *err, size_t errlen) {
    dnnl_exec_arg_t a[24];
    int n = 0;
    if (!pr->p) {
        snprintf(err, errlen, "%s: primitive not created", pr->what);
        return -1;
    }
    for (int i = 0; i < nargs && n < 23; i++)
        if (args[i].memory) a[n++] = args[i];
    if (pr->scratch) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, pr->scratch};
    DNNL_CHECK(dnnl_primitive_execute(pr->p, ctx->stream, n, a), pr->what);
    return 0;
fail:
    return -1;
}

/* ------------------------------------------------------------ md helpers */

void gb_cpu_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_data_type_t dt,
               dnnl_format_tag_t tag) {
    dnnl_dims_t d = {0};
    for (int i = 0; i < ndims; i++)
        d[i] = dims[i];
    /* Only fails on invalid arguments, which are our own bug. */
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(md, ndims, d, dt, tag);
    if (st != dnnl_success) memset(md, 0, sizeof(*md));
}

size_t gb_cpu_md_bytes(const dnnl_memory_desc_t *md) {
    return dnnl_memory_desc_get_size(md);
}

void gb_cpu_md_str(const dnnl_memory_desc_t *md, char *buf, size_t len) {
    if (md->ndims == 0 || dnnl_memory_desc_get_size(md) == 0) {
        snprintf(buf, len, "none");
        return;
    }
    const char *dt = md->data_type == dnnl_f32    ? "f32"
                     : md->data_type == dnnl_bf16 ? "bf16"
                     : md->data_type == dnnl_u8   ? "u8"
                                                  : "other";
    char fmt[64];
    size_t o = 0;
    if (md->format_kind != dnnl_blocked) {
        snprintf(buf, len, "%s:non-blocked", dt);
        return;
    }
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int blocked[DNNL_MAX_NDIMS] = {0};
    for (int i = 0; i < b->inner_nblks; i++)
        blocked[b->inner_idxs[i]] = 1;
    /* outer dims by decreasing stride (stable on ties, as oneDNN prints) */
    int order[DNNL_MAX_NDIMS], used[DNNL_MAX_NDIMS] = {0};
    for (int k = 0; k < md->ndims; k++) {
        int best = -1;
        for (int i = 0; i < md->ndims; i++)
            if (!used[i] && (best < 0 || b->strides[i] > b->strides[best])) best = i;
        used[best] = 1;
        order[k] = best;
    }
    for (int k = 0; k < md->ndims && o + 1 < sizeof(fmt); k++)
        fmt[o++] = (char)((blocked[order[k]] ? 'A' : 'a') + order[k]);
    for (int i = 0; i < b->inner_nblks && o + 8 < sizeof(fmt); i++)
        o += (size_t)snprintf(fmt + o, sizeof(fmt) - o, "%d%c", (int)b->inner_blks[i],
                              (char)('a' + b->inner_idxs[i]));
    fmt[o] = 0;
    snprintf(buf, len, "%s:%s", dt, fmt);
}

static void md_any(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_data_type_t dt) {
    gb_cpu_md(md, ndims, dims, dt, dnnl_format_tag_any);
}

static dnnl_format_tag_t plain_tag(int ndims) {
    switch (ndims) {
    case 1:
        return dnnl_a;
    case 2:
        return dnnl_ab;
    case 3:
        return dnnl_abc;
    case 4:
        return dnnl_abcd;
    default:
        return dnnl_format_tag_undef;
    }
}

static int md_eq(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b) {
    return dnnl_memory_desc_equal(a, b);
}

/* -------------------------------------------------------- primitive making */

static int make_attr(dnnl_primitive_attr_t *attr, int relu_post_op, char *err, size_t errlen) {
    dnnl_post_ops_t po = NULL;
    *attr = NULL;
    DNNL_CHECK(dnnl_primitive_attr_create(attr), "attr");
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user),
               "scratchpad mode");
    if (relu_post_op) {
        DNNL_CHECK(dnnl_post_ops_create(&po), "post ops");
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f),
                   "relu post op");
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(*attr, po), "post ops");
        dnnl_post_ops_destroy(po);
    }
    return 0;
fail:
    if (po) dnnl_post_ops_destroy(po);
    if (*attr) dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return -1;
}

/* A primitive descriptor for op_desc, or -1 (quietly: callers may retry). */
static int pd_try(gb_cpu_ctx_t *ctx, const void *op_desc, int relu_post_op,
                  const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd, char *err,
                  size_t errlen) {
    dnnl_primitive_attr_t attr = NULL;
    *pd = NULL;
    if (make_attr(&attr, relu_post_op, err, errlen)) return -1;
    dnnl_status_t st = dnnl_primitive_desc_create(pd, op_desc, attr, ctx->eng, hint);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        snprintf(err, errlen, "%s", dnnl_status2str(st));
        *pd = NULL;
        return -1;
    }
    return 0;
}

static const char *pd_impl(const_dnnl_primitive_desc_t pd) {
    const char *s = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s)
        return "?";
    return s;
}

static int impl_is_ref(const char *impl) {
    return strncmp(impl, "ref", 3) == 0;
}

/* Is this a slow implementation (ref, or a gemm convolution)? */
static int impl_is_slow(const char *impl, int is_conv) {
    return impl_is_ref(impl) || (is_conv && strstr(impl, "gemm"));
}

/* Is this implementation one the context's strictness refuses? */
static int impl_refused(int strict, const char *impl, int is_conv) {
    if (strict >= GB_CPU_STRICT_ALL && impl_is_ref(impl)) return 1;
    if (strict >= GB_CPU_STRICT_GEMM && is_conv && strstr(impl, "gemm")) return 1;
    return 0;
}

/* Room for one more primitive in the context's list. */
static int prim_room(gb_cpu_ctx_t *ctx, char *err, size_t errlen) {
    if (grow((void **)&ctx->prims, &ctx->cap_prims, ctx->n_prims, sizeof(*ctx->prims)) == 0)
        return 0;
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* Destroy a primitive made here and take it off the context's list. */
static void prim_drop(gb_cpu_ctx_t *ctx, gb_cpu_prim_t *pr) {
    for (int i = 0; i < ctx->n_prims; i++) {
        if (ctx->prims[i] != pr) continue;
        memmove(&ctx->prims[i], &ctx->prims[i + 1],
                (size_t)(ctx->n_prims - i - 1) * sizeof(*ctx->prims));
        ctx->n_prims--;
        ctx->n_ref -= pr->ref;
        break;
    }
    if (pr->scratch) dnnl_memory_destroy(pr->scratch);
    if (pr->p) dnnl_primitive_destroy(pr->p);
    if (pr->pd) dnnl_primitive_desc_destroy(pr->pd);
    memset(pr, 0, sizeof(*pr));
}

/* Take ownership of pd, check it, create the primitive and register it. On
 * failure pd is destroyed. */
static int prim_from_pd(gb_cpu_ctx_t *ctx, gb_cpu_prim_t *pr, dnnl_primitive_desc_t pd, int is_conv,
                        const char *name, const char *what, char *err, size_t errlen) {
    memset(pr, 0, sizeof(*pr));
    snprintf(pr->what, sizeof(pr->what), "%s %s", name, what);
    snprintf(pr->impl, sizeof(pr->impl), "%s", pd_impl(pd));
    if (impl_refused(ctx->strict, pr->impl, is_conv)) {
        snprintf(err, errlen, "%s: oneDNN chose the slow implementation '%s'", pr->what, pr->impl);
        goto fail;
    }
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sm) pr->scratch_md = *sm;
    if (prim_room(ctx, err, errlen)) goto fail;
    DNNL_CHECK(dnnl_primitive_create(&pr->p, pd), pr->what);
    pr->pd = pd;
    ctx->prims[ctx->n_prims++] = pr;
    pr->ref = impl_is_ref(pr->impl);
    pr->slow = impl_is_slow(pr->impl, is_conv);
    ctx->n_ref += pr->ref;
    return 0;
fail:
    dnnl_primitive_desc_destroy(pd);
    pr->p = NULL;
    pr->pd = NULL;
    return -1;
}

static int prim_make(gb_cpu_ctx_t *ctx, gb_cpu_prim_t *pr, const void *op_desc, int relu_post_op,
                     const_dnnl_primitive_desc_t hint, int is_conv, const char *name,
                     const char *what, char *err, size_t errlen) {
    dnnl_primitive_desc_t pd;
    if (pd_try(ctx, op_desc, relu_post_op, hint, &pd, err, errlen)) {
        char why[128];
        snprintf(why, sizeof(why), "%s", err);
        snprintf(err, errlen, "%s %s: %s", name, what, why);
        return -1;
    }
    return prim_from_pd(ctx, pr, pd, is_conv, name, what, err, errlen);
}

static const dnnl_memory_desc_t *q_md(const gb_cpu_prim_t *pr, dnnl_query_t q, int idx) {
    return dnnl_primitive_desc_query_md(pr->pd, q, idx);
}

int gb_cpu_reorder_init(gb_cpu_ctx_t *ctx, gb_cpu_prim_t *pr, const dnnl_memory_desc_t *src_md,
                        const dnnl_memory_desc_t *dst_md, const char *name, char *err,
                        size_t errlen) {
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (make_attr(&attr, 0, err, errlen)) return -1;
    dnnl_status_t st =
        dnnl_reorder_primitive_desc_create(&pd, src_md, ctx->eng, dst_md, ctx->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        snprintf(err, errlen, "%s reorder: %s", name, dnnl_status2str(st));
        return -1;
    }
    return prim_from_pd(ctx, pr, pd, 0, name, "reorder", err, errlen);
}

int gb_cpu_reorder(gb_cpu_ctx_t *ctx, const gb_cpu_prim_t *pr, dnnl_memory_t src, dnnl_memory_t dst,
                   char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    return gb_cpu_exec(ctx, pr, 2, a, err, errlen);
}

int gb_cpu_reorder_once(gb_cpu_ctx_t *ctx, const dnnl_memory_desc_t *src_md, const void *src,
                        const dnnl_memory_desc_t *dst_md, void *dst, char *err, size_t errlen) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    dnnl_memory_t ms = NULL, md = NULL;
    int rc = -1;
    /* Library scratchpad: this primitive runs once, here, on this thread. */
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, src_md, ctx->eng, dst_md, ctx->eng, NULL),
               "reorder");
    DNNL_CHECK(dnnl_primitive_create(&p, pd), "reorder");
    DNNL_CHECK(dnnl_memory_create(&ms, src_md, ctx->eng, (void *)src), "reorder src");
    DNNL_CHECK(dnnl_memory_create(&md, dst_md, ctx->eng, dst), "reorder dst");
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
    DNNL_CHECK(dnnl_primitive_execute(p, ctx->stream, 2, a), "reorder");
    DNNL_CHECK(dnnl_stream_wait(ctx->stream), "reorder");
    rc = 0;
fail:
    if (ms) dnnl_memory_destroy(ms);
    if (md) dnnl_memory_destroy(md);
    if (p) dnnl_primitive_destroy(p);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int plain_io(gb_cpu_ctx_t *ctx, dnnl_memory_t mem, float *plain, int to_mem, char *err,
                    size_t errlen) {
    const dnnl_memory_desc_t *md = NULL;
    void *h = NULL;
    DNNL_CHECK(dnnl_memory_get_memory_desc(mem, &md), "memory desc");
    DNNL_CHECK(dnnl_memory_get_data_handle(mem, &h), "memory handle");
    dnnl_memory_desc_t pmd;
    gb_cpu_md(&pmd, md->ndims, md->dims, dnnl_f32, plain_tag(md->ndims));
    if (to_mem) return gb_cpu_reorder_once(ctx, &pmd, plain, md, h, err, errlen);
    return gb_cpu_reorder_once(ctx, md, h, &pmd, plain, err, errlen);
fail:
    return -1;
}

int gb_cpu_write_plain(gb_cpu_ctx_t *ctx, dnnl_memory_t mem, const float *src, char *err,
                       size_t errlen) {
    return plain_io(ctx, mem, (float *)src, 1, err, errlen);
}

int gb_cpu_read_plain(gb_cpu_ctx_t *ctx, dnnl_memory_t mem, float *dst, char *err, size_t errlen) {
    return plain_io(ctx, mem, dst, 0, err, errlen);
}

/* ------------------------------------------------------------ convolution */

int gb_cpu_out_size(int in, int k, int stride, int pad) {
    return (in + 2 * pad - k) / stride + 1;
}

/* Master copies: when the compute layout differs from master (or the type
 * does), a reorder master -> copy runs once per step. */
static int weight_copies(gb_cpu_ctx_t *ctx, const char *name, const dnnl_memory_desc_t *w_md,
                         const dnnl_memory_desc_t *wfwd_md, const dnnl_memory_desc_t *wbwd_md,
                         int has_bwd, int *fwd_is_master, int *bwd_is_master, int *bwd_is_fwd,
                         gb_cpu_prim_t *to_fwd, gb_cpu_prim_t *to_bwd, char *err, size_t errlen) {
    *fwd_is_master = md_eq(wfwd_md, w_md);
    *bwd_is_master = has_bwd && md_eq(wbwd_md, w_md);
    *bwd_is_fwd = has_bwd && !*bwd_is_master && md_eq(wbwd_md, wfwd_md);
    char nm[64];
    if (!*fwd_is_master) {
        snprintf(nm, sizeof(nm), "%s weights->fwd", name);
        if (gb_cpu_reorder_init(ctx, to_fwd, w_md, wfwd_md, nm, err, errlen)) return -1;
    }
    if (has_bwd && !*bwd_is_master && !*bwd_is_fwd) {
        snprintf(nm, sizeof(nm), "%s weights->bwd_data", name);
        if (gb_cpu_reorder_init(ctx, to_bwd, w_md, wbwd_md, nm, err, errlen)) return -1;
    }
    return 0;
}

/* GB_CPU_WINO: a comma-separated list of fwd, bwd_data, bwd_weights, or
 * none; unset or empty means all three. A misspelt pass is an error, not a
 * silent A/B run of something else. */
static int wino_passes(int *fwd, int *bwd_d, int *bwd_w, char *err, size_t errlen) {
    const char *env = getenv("GB_CPU_WINO");
    *fwd = *bwd_d = *bwd_w = 1;
    if (!env || !*env) return 0;
    *fwd = *bwd_d = *bwd_w = 0;
    const char *p = env;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 3 && strncmp(p, "fwd", 3) == 0)
            *fwd = 1;
        else if (n == 8 && strncmp(p, "bwd_data", 8) == 0)
            *bwd_d = 1;
        else if (n == 11 && strncmp(p, "bwd_weights", 11) == 0)
            *bwd_w = 1;
        else if (!(n == 4 && strncmp(p, "none", 4) == 0)) {
            snprintf(err, errlen,
                     "GB_CPU_WINO=%s: unknown pass '%.*s' (a comma-separated list of fwd, "
                     "bwd_data, bwd_weights, or none)",
                     env, (int)n, p);
            return -1;
        }
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

int gb_cpu_wino_env(char *err, size_t errlen) {
    int fwd, bwd_d, bwd_w;
    return wino_passes(&fwd, &bwd_d, &bwd_w, err, errlen);
}

/* Which passes of a 3x3/1 convolution our Winograd takes (wino.h): every one
 * whose formats are the ones it reads (nChw8c, OIhw8i8o: oneDNN's AVX2
 * choice), on a CPU with AVX2 and FMA, minus what GB_CPU_WINO leaves out.
 * oneDNN's primitives for those passes were made first (they fixed the
 * formats) and are dropped here. */
static int own_wino_init(gb_cpu_ctx_t *ctx, gb_cpu_conv_t *cv, const char *name, char *err,
                         size_t errlen) {
    const gb_cpu_conv_shape_t *s = &cv->s;
    if (cv->dt != dnnl_f32 || s->kh != 3 || s->kw != 3 || s->stride != 1 || s->pad != 1 ||
        s->c % 8 || s->k % 8 || cv->oh != s->ih || cv->ow != s->iw || !gb_wino_cpu_ok())
        return 0;
    dnnl_memory_desc_t a, b, w;
    int64_t sd[4] = {s->n, s->c, s->ih, s->iw}, dd[4] = {s->n, s->k, cv->oh, cv->ow},
            wd[4] = {s->k, s->c, 3, 3};
    gb_cpu_md(&a, 4, sd, dnnl_f32, dnnl_nChw8c);
    gb_cpu_md(&b, 4, dd, dnnl_f32, dnnl_nChw8c);
    gb_cpu_md(&w, 4, wd, dnnl_f32, dnnl_OIhw8i8o);
    if (!md_eq(&cv->src_md, &a) || !md_eq(&cv->dst_md, &b)) return 0;
    int fwd, bwd_d, bwd_w;
    if (wino_passes(&fwd, &bwd_d, &bwd_w, err, errlen)) return -1;
    bwd_d = bwd_d && cv->has_bwd_data;
    if (!md_eq(&cv->w_md, &w)) {
        /* oneDNN's backward weights chose another master layout (its `ref`
         * kernel does on AVX2 for 2x2 maps): ours can set it only when every
         * pass is ours */
        if (!(fwd && bwd_w && (bwd_d || !cv->has_bwd_data))) return 0;
        cv->w_md = w;
    }
    cv->own_fwd = fwd;
    cv->own_bwd_d = bwd_d;
    cv->own_bwd_w = bwd_w;
    if (!cv->own_fwd && !cv->own_bwd_d && !cv->own_bwd_w) return 0;
    if (cv->own_fwd) prim_drop(ctx, &cv->fwd);
    if (cv->own_bwd_d) prim_drop(ctx, &cv->bwd_d);
    if (cv->own_bwd_w) prim_drop(ctx, &cv->bwd_w);
    gb_cpu_prim_t *pr = &cv->wino;
    memset(pr, 0, sizeof(*pr));
    snprintf(pr->what, sizeof(pr->what), "%s conv wino%s%s%s", name, cv->own_fwd ? " fwd" : "",
             cv->own_bwd_d ? " bwd_data" : "", cv->own_bwd_w ? " bwd_weights" : "");
    snprintf(pr->impl, sizeof(pr->impl), "gpubench:wino_4x3:avx2");
    int64_t sf[1] = {(int64_t)gb_wino_scratch_floats(s->n, s->c, s->k, s->ih, s->iw)};
    gb_cpu_md(&pr->scratch_md, 1, sf, dnnl_f32, dnnl_a);
    if (prim_room(ctx, err, errlen)) return -1;
    ctx->prims[ctx->n_prims++] = pr;
    return 0;
}

int gb_cpu_conv_init(gb_cpu_ctx_t *ctx, gb_cpu_conv_t *cv, const gb_cpu_conv_shape_t *s,
                     const dnnl_memory_desc_t *src_in, dnnl_data_type_t dt, int bwd_data,
                     int winograd, const char *name, char *err, size_t errlen) {
    memset(cv, 0, sizeof(*cv));
    cv->s = *s;
    cv->dt = dt;
    cv->has_bwd_data = bwd_data;
    cv->oh = gb_cpu_out_size(s->ih, s->kh, s->stride, s->pad);
    cv->ow = gb_cpu_out_size(s->iw, s->kw, s->stride, s->pad);
    if (s->n < 1 || s->c < 1 || s->k < 1 || s->stride < 1 || s->pad < 0 || cv->oh < 1 ||
        cv->ow < 1) {
        snprintf(err, errlen, "%s: bad convolution shape", name);
        return -1;
    }
    int64_t sd[4] = {s->n, s->c, s->ih, s->iw}, wd[4] = {s->k, s->c, s->kh, s->kw},
            dd[4] = {s->n, s->k, cv->oh, cv->ow};
    dnnl_dims_t strides = {s->stride, s->stride}, pl = {s->pad, s->pad};
    /* PyTorch drops what does not fit; oneDNN wants the right padding that
     * makes the sizes agree (it may be negative, e.g. 1x1/2 on even input). */
    dnnl_dims_t pr = {(int64_t)(cv->oh - 1) * s->stride + s->kh - s->ih - s->pad,
                      (int64_t)(cv->ow - 1) * s->stride + s->kw - s->iw - s->pad};
    dnnl_memory_desc_t src_md, w_any, wf32_any, dst_any;
    if (src_in)
        src_md = *src_in;
    else
        md_any(&src_md, 4, sd, dt);
    md_any(&w_any, 4, wd, dt);
    md_any(&wf32_any, 4, wd, dnnl_f32);
    md_any(&dst_any, 4, dd, dt);
    dnnl_convolution_desc_t d;

    /* forward: Winograd where asked and implemented, else direct */
    int ok = 0;
    if (winograd && dt == dnnl_f32) {
        dnnl_primitive_desc_t pd = NULL;
        if (dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_winograd,
                                               &src_md, &w_any, NULL, &dst_any, strides, pl,
                                               pr) == dnnl_success &&
            pd_try(ctx, &d, 0, NULL, &pd, err, errlen) == 0) {
            if (prim_from_pd(ctx, &cv->fwd, pd, 1, name, "fwd", err, errlen)) return -1;
            cv->winograd = 1;
            ok = 1;
        }
    }
    if (!ok) {
        DNNL_CHECK(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training,
                                                      dnnl_convolution_direct, &src_md, &w_any,
                                                      NULL, &dst_any, strides, pl, pr),
                   name);
        if (prim_make(ctx, &cv->fwd, &d, 0, NULL, 1, name, "fwd", err, errlen)) return -1;
    }
    dnnl_alg_kind_t alg = cv->winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
    cv->src_md = *q_md(&cv->fwd, dnnl_query_src_md, 0);
    cv->dst_md = *q_md(&cv->fwd, dnnl_query_dst_md, 0);
    cv->wfwd_md = *q_md(&cv->fwd, dnnl_query_weights_md, 0);
    if (src_in && !md_eq(&cv->src_md, src_in)) {
        snprintf(err, errlen, "%s: convolution changed its input format", name);
        return -1;
    }

    /* backward weights: f32 gradient; its layout is the master layout. Prefer
     * the forward layout when oneDNN runs it fast, so f32 needs no copy. */
    int have_bww = 0;
    if (dt == dnnl_f32) {
        dnnl_primitive_desc_t pd = NULL;
        if (dnnl_convolution_backward_weights_desc_init(&d, alg, &cv->src_md, &cv->wfwd_md, NULL,
                                                        &cv->dst_md, strides, pl,
                                                        pr) == dnnl_success &&
            pd_try(ctx, &d, 0, cv->fwd.pd, &pd, err, errlen) == 0) {
            if (!impl_is_slow(pd_impl(pd), 1)) {
                if (prim_from_pd(ctx, &cv->bwd_w, pd, 1, name, "bwd_w", err, errlen)) return -1;
                have_bww = 1;
            } else {
                dnnl_primitive_desc_destroy(pd);
            }
        }
    }
    if (!have_bww) {
        DNNL_CHECK(dnnl_convolution_backward_weights_desc_init(&d, alg, &cv->src_md, &wf32_any,
                                                               NULL, &cv->dst_md, strides, pl, pr),
                   name);
        if (prim_make(ctx, &cv->bwd_w, &d, 0, cv->fwd.pd, 1, name, "bwd_w", err, errlen)) return -1;
    }
    cv->w_md = *q_md(&cv->bwd_w, dnnl_query_diff_weights_md, 0);

    if (bwd_data) {
        dnnl_memory_desc_t dsrc_any;
        md_any(&dsrc_any, 4, sd, dt);
        DNNL_CHECK(dnnl_convolution_backward_data_desc_init(&d, alg, &dsrc_any, &w_any, &cv->dst_md,
                                                            strides, pl, pr),
                   name);
        if (prim_make(ctx, &cv->bwd_d, &d, 0, cv->fwd.pd, 1, name, "bwd_data", err, errlen))
            return -1;
        if (!md_eq(q_md(&cv->bwd_d, dnnl_query_diff_src_md, 0), &cv->src_md)) {
            snprintf(err, errlen, "%s: backward-data gradient format differs from the input's",
                     name);
            return -1;
        }
        cv->wbwd_md = *q_md(&cv->bwd_d, dnnl_query_weights_md, 0);
    }
    if (winograd && !cv->winograd && own_wino_init(ctx, cv, name, err, errlen)) return -1;
    /* our Winograd's weights are made by gb_wino_weights, not by a reorder */
    if (weight_copies(ctx, name, &cv->w_md, cv->own_fwd ? &cv->w_md : &cv->wfwd_md, &cv->wbwd_md,
                      bwd_data && !cv->own_bwd_d, &cv->wfwd_is_master, &cv->wbwd_is_master,
                      &cv->wbwd_is_fwd, &cv->to_fwd, &cv->to_bwd, err, errlen))
        return -1;
    dnnl_memory_desc_t u_md;
    int64_t ud[1] = {(int64_t)gb_wino_u_floats(s->c, s->k)};
    gb_cpu_md(&u_md, 1, ud, dnnl_f32, dnnl_a);
    if (cv->own_fwd) {
        cv->wfwd_md = u_md;
        cv->wfwd_is_master = 0;
    }
    if (cv->own_bwd_d) {
        cv->wbwd_md = u_md;
        cv->wbwd_is_master = cv->wbwd_is_fwd = 0;
    }
    return 0;
fail:
    return -1;
}

static float *mem_ptr(dnnl_memory_t m) {
    void *p = NULL;
    dnnl_memory_get_data_handle(m, &p);
    return p;
}

int gb_cpu_conv_weights_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                            dnnl_memory_t wfwd, char *err, size_t errlen) {
    if (cv->own_fwd) {
        gb_wino_weights(mem_ptr(w), cv->s.k, cv->s.c, 0, mem_ptr(wfwd), ctx->threads);
        return 0;
    }
    if (cv->wfwd_is_master) return 0;
    return gb_cpu_reorder(ctx, &cv->to_fwd, w, wfwd, err, errlen);
}

int gb_cpu_conv_weights_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                            dnnl_memory_t wbwd, char *err, size_t errlen) {
    if (!cv->has_bwd_data || cv->wbwd_is_master) return 0;
    if (cv->own_bwd_d) {
        gb_wino_weights(mem_ptr(w), cv->s.k, cv->s.c, 1, mem_ptr(wbwd), ctx->threads);
        return 0;
    }
    /* the forward copy may be gone (copies can share one buffer): remake it */
    return gb_cpu_reorder(ctx, cv->wbwd_is_fwd ? &cv->to_fwd : &cv->to_bwd, w, wbwd, err, errlen);
}

int gb_cpu_conv_weights(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t w,
                        dnnl_memory_t wfwd, dnnl_memory_t wbwd, char *err, size_t errlen) {
    if (gb_cpu_conv_weights_fwd(ctx, cv, w, wfwd, err, errlen)) return -1;
    if (cv->wbwd_is_fwd) return 0;
    return gb_cpu_conv_weights_bwd(ctx, cv, w, wbwd, err, errlen);
}

int gb_cpu_conv_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t src,
                    dnnl_memory_t wfwd, dnnl_memory_t dst, char *err, size_t errlen) {
    if (cv->own_fwd) {
        gb_wino_fwd(mem_ptr(src), mem_ptr(wfwd), mem_ptr(dst), cv->s.n, cv->s.c, cv->s.k, cv->s.ih,
                    cv->s.iw, mem_ptr(cv->wino.scratch), ctx->threads);
        return 0;
    }
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wfwd}, {DNNL_ARG_DST, dst}};
    return gb_cpu_exec(ctx, &cv->fwd, 3, a, err, errlen);
}

int gb_cpu_conv_bwd_data(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t diff_dst,
                         dnnl_memory_t wbwd, dnnl_memory_t diff_src, char *err, size_t errlen) {
    if (cv->own_bwd_d) {
        gb_wino_bwd_data(mem_ptr(diff_dst), mem_ptr(wbwd), mem_ptr(diff_src), cv->s.n, cv->s.c,
                         cv->s.k, cv->s.ih, cv->s.iw, mem_ptr(cv->wino.scratch), ctx->threads);
        return 0;
    }
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, wbwd}, {DNNL_ARG_DIFF_SRC, diff_src}};
    return gb_cpu_exec(ctx, &cv->bwd_d, 3, a, err, errlen);
}

int gb_cpu_conv_bwd_weights(gb_cpu_ctx_t *ctx, const gb_cpu_conv_t *cv, dnnl_memory_t src,
                            dnnl_memory_t diff_dst, dnnl_memory_t diff_w, char *err,
                            size_t errlen) {
    if (cv->own_bwd_w) {
        gb_wino_bwd_weights(mem_ptr(src), mem_ptr(diff_dst), mem_ptr(diff_w), cv->s.n, cv->s.c,
                            cv->s.k, cv->s.ih, cv->s.iw, mem_ptr(cv->wino.scratch), ctx->threads);
        return 0;
    }
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_w}};
    return gb_cpu_exec(ctx, &cv->bwd_w, 3, a, err, errlen);
}

/* ------------------------------------------------------------- batch norm */

int gb_cpu_bn_init(gb_cpu_ctx_t *ctx, gb_cpu_bn_t *bn, const dnnl_memory_desc_t *data_md, int relu,
                   const char *name, char *err, size_t errlen) {
    memset(bn, 0, sizeof(*bn));
    if (data_md->ndims != 4) {
        snprintf(err, errlen, "%s: batch norm wants a 4D tensor", name);
        return -1;
    }
    bn->c = (int)data_md->dims[1];
    bn->count = (double)data_md->dims[0] * (double)data_md->dims[2] * (double)data_md->dims[3];
    bn->relu = relu;
    bn->data_md = *data_md;
    int64_t cd[1] = {bn->c};
    gb_cpu_md(&bn->stat_md, 1, cd, dnnl_f32, dnnl_a);
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0u);
    dnnl_batch_normalization_desc_t d;
    DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, data_md,
                                                          GB_CPU_BN_EPS, flags),
               name);
    if (prim_make(ctx, &bn->fwd, &d, 0, NULL, 0, name, "bn fwd", err, errlen)) return -1;
    if (!md_eq(q_md(&bn->fwd, dnnl_query_dst_md, 0), data_md)) {
        snprintf(err, errlen, "%s: batch norm changed the tensor format", name);
        return -1;
    }
    const dnnl_memory_desc_t *ws = q_md(&bn->fwd, dnnl_query_workspace_md, 0);
    if (ws) bn->ws_md = *ws;
    /* The gradient has the data's format: in-place backward and no reorders. */
    DNNL_CHECK(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, data_md, data_md,
                                                           GB_CPU_BN_EPS, flags),
               name);
    if (prim_make(ctx, &bn->bwd, &d, 0, bn->fwd.pd, 0, name, "bn bwd", err, errlen)) return -1;
    if (relu) {
        DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_inference, data_md,
                                                              GB_CPU_BN_EPS,
                                                              flags | dnnl_use_global_stats),
                   name);
        if (prim_make(ctx, &bn->apply, &d, 0, NULL, 0, name, "bn apply", err, errlen)) return -1;
    }
    return 0;
fail:
    return -1;
}

int gb_cpu_bn_apply(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src, dnnl_memory_t dst,
                    dnnl_memory_t scale, dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var,
                    char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src},     {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
                           {DNNL_ARG_MEAN, mean},   {DNNL_ARG_VARIANCE, var}};
    return gb_cpu_exec(ctx, &bn->apply, 6, a, err, errlen);
}

int gb_cpu_bn_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src, dnnl_memory_t dst,
                  dnnl_memory_t scale, dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var,
                  dnnl_memory_t ws, char *err, size_t errlen) {
    if (bn->relu && !ws) {
        snprintf(err, errlen, "%s: fused ReLU needs its workspace", bn->fwd.what);
        return -1;
    }
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCALE, scale},
                           {DNNL_ARG_SHIFT, shift},
                           {DNNL_ARG_MEAN, mean},
                           {DNNL_ARG_VARIANCE, var},
                           {DNNL_ARG_WORKSPACE, bn->relu ? ws : NULL}};
    return gb_cpu_exec(ctx, &bn->fwd, 7, a, err, errlen);
}

int gb_cpu_bn_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_bn_t *bn, dnnl_memory_t src,
                  dnnl_memory_t diff_dst, dnnl_memory_t diff_src, dnnl_memory_t scale,
                  dnnl_memory_t shift, dnnl_memory_t mean, dnnl_memory_t var, dnnl_memory_t ws,
                  dnnl_memory_t diff_scale, dnnl_memory_t diff_shift, char *err, size_t errlen) {
    if (bn->relu && !ws) {
        snprintf(err, errlen, "%s: fused ReLU needs its workspace", bn->bwd.what);
        return -1;
    }
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_DIFF_DST, diff_dst},
                           {DNNL_ARG_DIFF_SRC, diff_src},
                           {DNNL_ARG_SCALE, scale},
                           {DNNL_ARG_SHIFT, shift},
                           {DNNL_ARG_MEAN, mean},
                           {DNNL_ARG_VARIANCE, var},
                           {DNNL_ARG_WORKSPACE, bn->relu ? ws : NULL},
                           {DNNL_ARG_DIFF_SCALE, diff_scale},
                           {DNNL_ARG_DIFF_SHIFT, diff_shift}};
    return gb_cpu_exec(ctx, &bn->bwd, 10, a, err, errlen);
}

void gb_cpu_bn_running_update(const float *mean, const float *var, float *rm, float *rv, int c,
                              double count, float momentum) {
    /* torch: running_var uses the unbiased variance, var * n / (n - 1) */
    double unbias = count / (count - 1.0);
    for (int i = 0; i < c; i++) {
        rm[i] = (1.0f - momentum) * rm[i] + momentum * mean[i];
        rv[i] = (1.0f - momentum) * rv[i] + momentum * (float)(var[i] * unbias);
    }
}

/* ------------------------------------------------------------ binary add */

int gb_cpu_add_init(gb_cpu_ctx_t *ctx, gb_cpu_add_t *op, const dnnl_memory_desc_t *md, int relu,
                    const char *name, char *err, size_t errlen) {
    memset(op, 0, sizeof(*op));
    op->relu = relu;
    op->md = *md;
    dnnl_binary_desc_t d;
    DNNL_CHECK(dnnl_binary_desc_init(&d, dnnl_binary_add, md, md, md), name);
    if (prim_make(ctx, &op->fwd, &d, relu, NULL, 0, name, relu ? "add+relu" : "add", err, errlen))
        return -1;
    if (relu) {
        dnnl_eltwise_desc_t e;
        DNNL_CHECK(
            dnnl_eltwise_backward_desc_init(&e, dnnl_eltwise_relu_use_dst_for_bwd, md, md, 0, 0),
            name);
        if (prim_make(ctx, &op->bwd, &e, 0, NULL, 0, name, "relu bwd", err, errlen)) return -1;
    }
    return 0;
fail:
    return -1;
}

int gb_cpu_add_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_add_t *op, dnnl_memory_t a, dnnl_memory_t b,
                   dnnl_memory_t dst, char *err, size_t errlen) {
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, dst}};
    return gb_cpu_exec(ctx, &op->fwd, 3, args, err, errlen);
}

int gb_cpu_add_relu_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_add_t *op, dnnl_memory_t dst,
                        dnnl_memory_t diff, char *err, size_t errlen) {
    if (!op->relu) {
        snprintf(err, errlen, "%s: no ReLU to differentiate", op->fwd.what);
        return -1;
    }
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff}, {DNNL_ARG_DIFF_SRC, diff}};
    return gb_cpu_exec(ctx, &op->bwd, 3, a, err, errlen);
}

/* ------------------------------------------------------------------ relu */

int gb_cpu_relu_init(gb_cpu_ctx_t *ctx, gb_cpu_relu_t *op, const dnnl_memory_desc_t *md,
                     const char *name, char *err, size_t errlen) {
    memset(op, 0, sizeof(*op));
    op->md = *md;
    dnnl_eltwise_desc_t e;
    DNNL_CHECK(dnnl_eltwise_forward_desc_init(&e, dnnl_forward_training,
                                              dnnl_eltwise_relu_use_dst_for_bwd, md, 0, 0),
               name);
    if (prim_make(ctx, &op->fwd, &e, 0, NULL, 0, name, "relu fwd", err, errlen)) return -1;
    DNNL_CHECK(dnnl_eltwise_backward_desc_init(&e, dnnl_eltwise_relu_use_dst_for_bwd, md, md, 0, 0),
               name);
    if (prim_make(ctx, &op->bwd, &e, 0, op->fwd.pd, 0, name, "relu bwd", err, errlen)) return -1;
    return 0;
fail:
    return -1;
}

int gb_cpu_relu_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_relu_t *op, dnnl_memory_t x, char *err,
                    size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, x}};
    return gb_cpu_exec(ctx, &op->fwd, 2, a, err, errlen);
}

int gb_cpu_relu_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_relu_t *op, dnnl_memory_t y, dnnl_memory_t diff,
                    char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_DST, y}, {DNNL_ARG_DIFF_DST, diff}, {DNNL_ARG_DIFF_SRC, diff}};
    return gb_cpu_exec(ctx, &op->bwd, 3, a, err, errlen);
}

/* --------------------------------------------------------------- pooling */

int gb_cpu_pool_init(gb_cpu_ctx_t *ctx, gb_cpu_pool_t *pl, const dnnl_memory_desc_t *src_md,
                     int max, int kh, int kw, int stride, int pad, const char *name, char *err,
                     size_t errlen) {
    memset(pl, 0, sizeof(*pl));
    pl->max = max;
    pl->kh = kh;
    pl->kw = kw;
    pl->stride = stride;
    pl->pad = pad;
    int ih = (int)src_md->dims[2], iw = (int)src_md->dims[3];
    pl->oh = gb_cpu_out_size(ih, kh, stride, pad);
    pl->ow = gb_cpu_out_size(iw, kw, stride, pad);
    if (pl->oh < 1 || pl->ow < 1 || stride < 1 || pad < 0 || 2 * pad > kh || 2 * pad > kw) {
        snprintf(err, errlen, "%s: bad pooling shape", name);
        return -1;
    }
    pl->src_md = *src_md;
    int64_t dd[4] = {src_md->dims[0], src_md->dims[1], pl->oh, pl->ow};
    dnnl_memory_desc_t dst_any;
    md_any(&dst_any, 4, dd, src_md->data_type);
    dnnl_dims_t st = {stride, stride}, k = {kh, kw}, dil = {0, 0}, pdl = {pad, pad};
    dnnl_dims_t pdr = {(int64_t)(pl->oh - 1) * stride + kh - ih - pad,
                       (int64_t)(pl->ow - 1) * stride + kw - iw - pad};
    dnnl_alg_kind_t alg = max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t d;
    DNNL_CHECK(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_training, alg, src_md, &dst_any,
                                                 st, k, dil, pdl, pdr),
               name);
    if (prim_make(ctx, &pl->fwd, &d, 0, NULL, 0, name, "pool fwd", err, errlen)) return -1;
    pl->dst_md = *q_md(&pl->fwd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *ws = q_md(&pl->fwd, dnnl_query_workspace_md, 0);
    if (ws) pl->ws_md = *ws;
    DNNL_CHECK(
        dnnl_pooling_v2_backward_desc_init(&d, alg, src_md, &pl->dst_md, st, k, dil, pdl, pdr),
        name);
    if (prim_make(ctx, &pl->bwd, &d, 0, pl->fwd.pd, 0, name, "pool bwd", err, errlen)) return -1;
    return 0;
fail:
    return -1;
}

int gb_cpu_pool_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_pool_t *pl, dnnl_memory_t src,
                    dnnl_memory_t dst, dnnl_memory_t ws, char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, ws}};
    return gb_cpu_exec(ctx, &pl->fwd, 3, a, err, errlen);
}

int gb_cpu_pool_bwd(gb_cpu_ctx_t *ctx, const gb_cpu_pool_t *pl, dnnl_memory_t diff_dst,
                    dnnl_memory_t diff_src, dnnl_memory_t ws, char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_WORKSPACE, ws}};
    return gb_cpu_exec(ctx, &pl->bwd, 3, a, err, errlen);
}

/* -------------------------------------------------------- inner product */

int gb_cpu_fc_init(gb_cpu_ctx_t *ctx, gb_cpu_fc_t *fc, const dnnl_memory_desc_t *src_md, int k,
                   const char *name, char *err, size_t errlen) {
    memset(fc, 0, sizeof(*fc));
    if (src_md->data_type != dnnl_f32 || (src_md->ndims != 2 && src_md->ndims != 4) || k < 1) {
        snprintf(err, errlen, "%s: fully connected wants f32 (N, C[, H, W]) input", name);
        return -1;
    }
    fc->n = (int)src_md->dims[0];
    fc->c = (int)src_md->dims[1];
    fc->k = k;
    fc->src_md = *src_md;
    int64_t wd[4] = {k, src_md->dims[1], 1, 1}, dd[2] = {fc->n, k}, bd[1] = {k};
    if (src_md->ndims == 4) {
        wd[2] = src_md->dims[2];
        wd[3] = src_md->dims[3];
    }
    dnnl_memory_desc_t w_any;
    md_any(&w_any, src_md->ndims, wd, dnnl_f32);
    gb_cpu_md(&fc->dst_md, 2, dd, dnnl_f32, dnnl_ab);
    gb_cpu_md(&fc->bias_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_inner_product_desc_t d;
    DNNL_CHECK(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_training, src_md, &w_any,
                                                    &fc->bias_md, &fc->dst_md),
               name);
    if (prim_make(ctx, &fc->fwd, &d, 0, NULL, 0, name, "fc fwd", err, errlen)) return -1;
    if (!md_eq(q_md(&fc->fwd, dnnl_query_src_md, 0), src_md)) {
        snprintf(err, errlen, "%s: fully connected changed its input format", name);
        return -1;
    }
    fc->wfwd_md = *q_md(&fc->fwd, dnnl_query_weights_md, 0);
    /* backward weights into the forward layout when it runs fast */
    int have = 0;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_inner_product_backward_weights_desc_init(&d, src_md, &fc->wfwd_md, &fc->bias_md,
                                                      &fc->dst_md) == dnnl_success &&
        pd_try(ctx, &d, 0, fc->fwd.pd, &pd, err, errlen) == 0) {
        if (!impl_is_slow(pd_impl(pd), 0)) {
            if (prim_from_pd(ctx, &fc->bwd_w, pd, 0, name, "fc bwd_w", err, errlen)) return -1;
            have = 1;
        } else {
            dnnl_primitive_desc_destroy(pd);
        }
    }
    if (!have) {
        DNNL_CHECK(dnnl_inner_product_backward_weights_desc_init(&d, src_md, &w_any, &fc->bias_md,
                                                                 &fc->dst_md),
                   name);
        if (prim_make(ctx, &fc->bwd_w, &d, 0, fc->fwd.pd, 0, name, "fc bwd_w", err, errlen))
            return -1;
    }
    fc->w_md = *q_md(&fc->bwd_w, dnnl_query_diff_weights_md, 0);
    DNNL_CHECK(dnnl_inner_product_backward_data_desc_init(&d, src_md, &w_any, &fc->dst_md), name);
    if (prim_make(ctx, &fc->bwd_d, &d, 0, fc->fwd.pd, 0, name, "fc bwd_data", err, errlen))
        return -1;
    fc->wbwd_md = *q_md(&fc->bwd_d, dnnl_query_weights_md, 0);
    return weight_copies(ctx, name, &fc->w_md, &fc->wfwd_md, &fc->wbwd_md, 1, &fc->wfwd_is_master,
                         &fc->wbwd_is_master, &fc->wbwd_is_fwd, &fc->to_fwd, &fc->to_bwd, err,
                         errlen);
fail:
    return -1;
}

int gb_cpu_fc_weights(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t w, dnnl_memory_t wfwd,
                      dnnl_memory_t wbwd, char *err, size_t errlen) {
    if (!fc->wfwd_is_master && gb_cpu_reorder(ctx, &fc->to_fwd, w, wfwd, err, errlen)) return -1;
    if (!fc->wbwd_is_master && !fc->wbwd_is_fwd &&
        gb_cpu_reorder(ctx, &fc->to_bwd, w, wbwd, err, errlen))
        return -1;
    return 0;
}

int gb_cpu_fc_fwd(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t src, dnnl_memory_t wfwd,
                  dnnl_memory_t bias, dnnl_memory_t dst, char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wfwd}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    return gb_cpu_exec(ctx, &fc->fwd, 4, a, err, errlen);
}

int gb_cpu_fc_bwd_data(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t diff_dst,
                       dnnl_memory_t wbwd, dnnl_memory_t diff_src, char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, wbwd}, {DNNL_ARG_DIFF_SRC, diff_src}};
    return gb_cpu_exec(ctx, &fc->bwd_d, 3, a, err, errlen);
}

int gb_cpu_fc_bwd_weights(gb_cpu_ctx_t *ctx, const gb_cpu_fc_t *fc, dnnl_memory_t src,
                          dnnl_memory_t diff_dst, dnnl_memory_t diff_w, dnnl_memory_t diff_bias,
                          char *err, size_t errlen) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_DIFF_DST, diff_dst},
                           {DNNL_ARG_DIFF_WEIGHTS, diff_w},
                           {DNNL_ARG_DIFF_BIAS, diff_bias}};
    return gb_cpu_exec(ctx, &fc->bwd_w, 4, a, err, errlen);
}

/* ---------------------------------------------- softmax cross-entropy, SGD */

double gb_cpu_softmax_xent(const float *logits, const int32_t *labels, int n, int k,
                           float *dlogits) {
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        double mx = z[0];
        for (int j = 1; j < k; j++)
            if (z[j] > mx) mx = z[j];
        double s = 0.0;
        for (int j = 0; j < k; j++)
            s += exp((double)z[j] - mx);
        double lse = mx + log(s);
        total += lse - (double)z[labels[i]];
        if (dlogits) {
            float *g = dlogits + (size_t)i * k;
            for (int j = 0; j < k; j++)
                g[j] = (float)(exp((double)z[j] - lse) / n);
            g[labels[i]] -= (float)(1.0 / n);
        }
    }
    return total / n;
}

int gb_cpu_sgd(float *w, const float *g, float *b, size_t n, float lr, float mu, float wd,
               int first, int threads) {
    int bad = 0;
    if (first) {
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(| : bad)
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * w[i];
            b[i] = d;
            float x = w[i] - lr * d;
            w[i] = x;
            bad |= !isfinite(x);
        }
    } else {
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(| : bad)
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * w[i];
            float m = mu * b[i] + d;
            b[i] = m;
            float x = w[i] - lr * m;
            w[i] = x;
            bad |= !isfinite(x);
        }
    }
    return bad;
}
