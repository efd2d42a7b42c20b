/* buckets.c - see buckets.h. */
#include "buckets.h"
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct span {
    size_t off, count;
    int t;
} span_t;

static int by_off_desc(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    return (x->off < y->off) - (x->off > y->off);
}

size_t gb_buckets_elems(double mb, size_t elem_bytes) {
    double e = mb * 1e6 / (double)(elem_bytes ? elem_bytes : 1);
    return e < 1.0 ? 1 : (size_t)e;
}

gb_buckets_t *gb_buckets_new(const size_t *off, const size_t *count, int n_tensors, size_t total,
                             size_t bucket_elems, char *err, size_t errlen) {
    gb_buckets_t *bk = calloc(1, sizeof(*bk));
    span_t *sp = calloc((size_t)(n_tensors > 0 ? n_tensors : 1), sizeof(*sp));
    if (!bk || !sp) goto oom;
    bk->n_tensors = n_tensors;
    bk->total = total;
    bk->of_tensor = malloc((size_t)(n_tensors > 0 ? n_tensors : 1) * sizeof(int));
    bk->b = calloc((size_t)(n_tensors > 0 ? n_tensors : 1), sizeof(*bk->b));
    if (!bk->of_tensor || !bk->b) goto oom;
    if (bucket_elems < 1) {
        snprintf(err, errlen, "buckets: bucket size 0");
        goto fail;
    }
    int ns = 0;
    for (int t = 0; t < n_tensors; t++) {
        bk->of_tensor[t] = -1;
        if (count[t] == 0) continue;
        if (off[t] > total || count[t] > total - off[t]) {
            snprintf(err, errlen, "buckets: tensor %d [%zu, +%zu) is outside the slab of %zu", t,
                     off[t], count[t], total);
            goto fail;
        }
        sp[ns++] = (span_t){off[t], count[t], t};
    }
    if (ns == 0) {
        snprintf(err, errlen, "buckets: no tensor in the slab");
        goto fail;
    }
    qsort(sp, (size_t)ns, sizeof(*sp), by_off_desc);
    for (int i = 1; i < ns; i++) {
        if (sp[i].off + sp[i].count > sp[i - 1].off) {
            snprintf(err, errlen, "buckets: tensors %d and %d overlap", sp[i].t, sp[i - 1].t);
            goto fail;
        }
    }
    size_t hi = total;
    int cnt = 0;
    for (int i = 0; i < ns; i++) {
        bk->of_tensor[sp[i].t] = bk->n;
        cnt++;
        if (hi - sp[i].off >= bucket_elems || i == ns - 1) {
            size_t lo = i == ns - 1 ? 0 : sp[i].off; /* the first bucket reaches the slab start */
            bk->b[bk->n++] = (gb_bucket_t){lo, hi - lo, cnt};
            hi = lo;
            cnt = 0;
        }
    }
    free(sp);
    return bk;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(sp);
    gb_buckets_destroy(&bk);
    return NULL;
}

void gb_buckets_destroy(gb_buckets_t **self_p) {
    if (!self_p || !*self_p) return;
    free((*self_p)->b);
    free((*self_p)->of_tensor);
    free(*self_p);
    *self_p = NULL;
}

uint32_t gb_buckets_digest(const gb_buckets_t *bk, uint32_t h) {
    for (int b = -1; b < bk->n; b++) {
        /* b = -1: the count and the slab's size first */
        uint64_t v[3] = {(uint64_t)bk->n, bk->total, 0};
        if (b >= 0) {
            v[0] = bk->b[b].off;
            v[1] = bk->b[b].count;
            v[2] = (uint64_t)bk->b[b].n_tensors;
        }
        for (int k = 0; k < 3; k++)
            h = gb_fnv1a32_u64(h, v[k]);
    }
    return h;
}

size_t gb_buckets_pending_len(const gb_buckets_t *bk) {
    return (size_t)bk->n + (size_t)bk->n_tensors;
}

/* pending[0..n): tensors still missing per bucket; pending[n + t]: 1 once
 * tensor t was reported this step */
void gb_buckets_reset(const gb_buckets_t *bk, int *pending) {
    for (int i = 0; i < bk->n; i++)
        pending[i] = bk->b[i].n_tensors;
    for (int t = 0; t < bk->n_tensors; t++)
        pending[bk->n + t] = 0;
}

int gb_buckets_done(const gb_buckets_t *bk, int *pending, int t) {
    if (t < 0 || t >= bk->n_tensors) return -1;
    int b = bk->of_tensor[t];
    if (b < 0 || pending[bk->n + t] || pending[b] <= 0) return -1;
    pending[bk->n + t] = 1;
    return --pending[b] == 0 ? b : -1;
}
