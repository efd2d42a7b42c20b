/* map.h - a small hash map from byte-string keys to pointers, for the
 * coordinator's registries (agents by id, jobs by id, sweeps by id).
 * Chained buckets, FNV-1a, doubling at load 1. Keys are copied; values are
 * borrowed (the map never frees them). Not thread-safe: the reactor owns it. */
#ifndef GB_COORD_MAP_H
#define GB_COORD_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_map gb_map_t;

gb_map_t *gb_map_new(void);
void gb_map_destroy(gb_map_t **self_p);
/* Insert or replace; -1 on out-of-memory. */
int gb_map_put(gb_map_t *self, const void *key, size_t klen, void *value);
void *gb_map_get(const gb_map_t *self, const void *key, size_t klen);
/* Remove; returns the value that was there, or NULL. */
void *gb_map_del(gb_map_t *self, const void *key, size_t klen);
size_t gb_map_size(const gb_map_t *self);
/* Call fn on every value (in no particular order). fn must not change the map. */
void gb_map_each(const gb_map_t *self, void (*fn)(void *ctx, void *value), void *ctx);

/* Remove every entry, calling fn (when non-NULL) on each value first. */
void gb_map_clear(gb_map_t *self, void (*fn)(void *ctx, void *value), void *ctx);

/* Helpers for the two key types used. */
static inline int gb_map_put_u64(gb_map_t *m, uint64_t k, void *v) {
    return gb_map_put(m, &k, sizeof k, v);
}
static inline void *gb_map_get_u64(const gb_map_t *m, uint64_t k) {
    return gb_map_get(m, &k, sizeof k);
}
static inline void *gb_map_del_u64(gb_map_t *m, uint64_t k) {
    return gb_map_del(m, &k, sizeof k);
}

#endif
