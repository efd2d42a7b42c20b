/* buckets.h - gradient buckets for the data-parallel all-reduce, pure C
 * (the CPU backend and the CUDA backend share it).
 *
 * A gradient slab holds every parameter's gradient at its own offset.
 * Buckets cut the slab into contiguous ranges of whole tensors of about
 * `bucket_elems` elements each, closed from the END of the slab: backward
 * produces the gradients of the last layers first, so bucket 0 (the slab's
 * tail) fills first and can be reduced while backward still runs, as
 * PyTorch DDP does. Together the buckets cover the whole slab, padding
 * included (padding is zero on every replica, so reducing it is harmless).
 *
 * Completion is counted per bucket: each tensor's gradient reported
 * complete takes one off its bucket's count, and a bucket whose count
 * reaches zero is ready. The order in which buckets become ready depends
 * only on the backend's fixed order of operations, so it is the same on
 * every replica, which a collective needs.
 */
#ifndef GB_BUCKETS_H
#define GB_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_bucket {
    size_t off, count; /* elements of the slab */
    int n_tensors;     /* tensors inside */
} gb_bucket_t;

typedef struct gb_buckets {
    gb_bucket_t *b; /* n buckets; b[0] ends at the end of the slab */
    int n;
    int *of_tensor; /* per tensor: its bucket, or -1 when it is not in this slab */
    int n_tensors;
    size_t total; /* elements of the slab */
} gb_buckets_t;

/* Tensors 0..n_tensors-1 at off[i] with count[i] elements (count 0: not
 * in this slab); the slab has `total` elements; bucket_elems >= 1. Tensors
 * must lie inside the slab and not overlap. NULL with a reason on failure. */
gb_buckets_t *gb_buckets_new(const size_t *off, const size_t *count, int n_tensors, size_t total,
                             size_t bucket_elems, char *err, size_t errlen);
void gb_buckets_destroy(gb_buckets_t **self_p);

/* Elements per bucket for `mb` megabytes (10^6 bytes, as PyTorch's
 * bucket_cap_mb) of elem_bytes-byte elements; at least 1. */
size_t gb_buckets_elems(double mb, size_t elem_bytes);

/* Per-step counting in `pending`, an array of gb_buckets_pending_len(bk)
 * ints: reset fills it with each bucket's tensor count; done takes tensor t
 * off its bucket and returns the bucket when that made it ready, else -1
 * (also for a tensor not in the slab or already reported this step). */
size_t gb_buckets_pending_len(const gb_buckets_t *bk);
/* The layout (each bucket's offset, count and tensor count) folded into an
 * FNV-1a hash h: replicas whose all-reduces differ in size get different
 * values (data parallel set-up compares them across ranks). */
uint32_t gb_buckets_digest(const gb_buckets_t *bk, uint32_t h);
void gb_buckets_reset(const gb_buckets_t *bk, int *pending);
int gb_buckets_done(const gb_buckets_t *bk, int *pending, int t);

#endif
