/* map.c - see map.h. */
#include "map.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    void *value;
    size_t klen;
    unsigned char key[]; /* klen bytes */
} entry_t;

struct gb_map {
    entry_t **buckets;
    size_t n_buckets; /* power of two */
    size_t size;
};

static uint64_t fnv1a(const void *key, size_t len) {
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

gb_map_t *gb_map_new(void) {
    gb_map_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->n_buckets = 64;
    m->buckets = calloc(m->n_buckets, sizeof *m->buckets);
    if (!m->buckets) {
        free(m);
        return NULL;
    }
    return m;
}

void gb_map_destroy(gb_map_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_map_t *m = *self_p;
    for (size_t i = 0; i < m->n_buckets; i++)
        for (entry_t *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(m->buckets);
    free(m);
    *self_p = NULL;
}

static entry_t **find(const gb_map_t *m, const void *key, size_t klen, uint64_t h) {
    entry_t **pp = &m->buckets[h & (m->n_buckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->klen == klen && memcmp((*pp)->key, key, klen) == 0) break;
    return pp;
}

static int grow(gb_map_t *m) {
    size_t nb = m->n_buckets * 2;
    entry_t **b = calloc(nb, sizeof *b);
    if (!b) return -1;
    for (size_t i = 0; i < m->n_buckets; i++)
        for (entry_t *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            entry_t **slot = &b[e->hash & (nb - 1)];
            e->next = *slot;
            *slot = e;
        }
    free(m->buckets);
    m->buckets = b;
    m->n_buckets = nb;
    return 0;
}

int gb_map_put(gb_map_t *m, const void *key, size_t klen, void *value) {
    uint64_t h = fnv1a(key, klen);
    entry_t **pp = find(m, key, klen, h);
    if (*pp) {
        (*pp)->value = value;
        return 0;
    }
    entry_t *e = malloc(sizeof *e + klen);
    if (!e) return -1;
    e->next = NULL;
    e->hash = h;
    e->value = value;
    e->klen = klen;
    memcpy(e->key, key, klen);
    *pp = e;
    if (++m->size > m->n_buckets) (void)grow(m); /* a failed grow only costs speed */
    return 0;
}

void *gb_map_get(const gb_map_t *m, const void *key, size_t klen) {
    entry_t **pp = find(m, key, klen, fnv1a(key, klen));
    return *pp ? (*pp)->value : NULL;
}

void *gb_map_del(gb_map_t *m, const void *key, size_t klen) {
    entry_t **pp = find(m, key, klen, fnv1a(key, klen));
    if (!*pp) return NULL;
    entry_t *e = *pp;
    void *v = e->value;
    *pp = e->next;
    free(e);
    m->size--;
    return v;
}

size_t gb_map_size(const gb_map_t *m) {
    return m->size;
}

void gb_map_each(const gb_map_t *m, void (*fn)(void *ctx, void *value), void *ctx) {
    for (size_t i = 0; i < m->n_buckets; i++)
        for (entry_t *e = m->buckets[i]; e; e = e->next)
            fn(ctx, e->value);
}

void gb_map_clear(gb_map_t *m, void (*fn)(void *ctx, void *value), void *ctx) {
    for (size_t i = 0; i < m->n_buckets; i++) {
        for (entry_t *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            if (fn) fn(ctx, e->value);
            free(e);
        }
        m->buckets[i] = NULL;
    }
    m->size = 0;
}
