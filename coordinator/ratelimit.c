/* ratelimit.c - see ratelimit.h. */
#include "ratelimit.h"

#include "map.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MAX 255

typedef struct bucket {
    double tokens;
    int64_t last_ms;
    size_t klen;
    unsigned char key[KEY_MAX];
} bucket_t;

struct gb_rate {
    double per_s, burst;
    size_t max_peers;
    gb_map_t *map;
};

gb_rate_t *gb_rate_new(double per_s, double burst, size_t max_peers) {
    if (!(per_s > 0) || !(burst >= 1) || max_peers < 1) return NULL;
    gb_rate_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->per_s = per_s;
    self->burst = burst;
    self->max_peers = max_peers;
    self->map = gb_map_new();
    if (!self->map) {
        free(self);
        return NULL;
    }
    return self;
}

static void free_bucket(void *ctx, void *value) {
    (void)ctx;
    free(value);
}

void gb_rate_destroy(gb_rate_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_rate_t *self = *self_p;
    gb_map_each(self->map, free_bucket, NULL);
    gb_map_destroy(&self->map);
    free(self);
    *self_p = NULL;
}

static void refill(const gb_rate_t *self, bucket_t *b, int64_t now_ms) {
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * self->per_s / 1000.0;
        if (b->tokens > self->burst) b->tokens = self->burst;
        b->last_ms = now_ms;
    }
}

typedef struct sweep_ctx {
    const gb_rate_t *self;
    int64_t now_ms;
    bucket_t **idle;
    size_t n;
} sweep_ctx_t;

static void find_idle(void *vctx, void *value) {
    sweep_ctx_t *x = vctx;
    bucket_t *b = value;
    refill(x->self, b, x->now_ms);
    if (b->tokens >= x->self->burst) x->idle[x->n++] = b;
}

/* Forget every peer whose bucket is full again. */
static void sweep(gb_rate_t *self, int64_t now_ms) {
    sweep_ctx_t x = {self, now_ms, malloc(gb_map_size(self->map) * sizeof(bucket_t *) + 1), 0};
    if (!x.idle) return;
    gb_map_each(self->map, find_idle, &x);
    for (size_t i = 0; i < x.n; i++) {
        gb_map_del(self->map, x.idle[i]->key, x.idle[i]->klen);
        free(x.idle[i]);
    }
    free(x.idle);
}

int gb_rate_take(gb_rate_t *self, const void *key, size_t klen, int64_t now_ms, int64_t *retry_ms) {
    if (klen > KEY_MAX) klen = KEY_MAX;
    *retry_ms = 0;
    bucket_t *b = gb_map_get(self->map, key, klen);
    if (!b) {
        if (gb_map_size(self->map) >= self->max_peers) sweep(self, now_ms);
        b = gb_map_size(self->map) < self->max_peers ? calloc(1, sizeof *b) : NULL;
        if (b) {
            b->tokens = self->burst;
            b->last_ms = now_ms;
            b->klen = klen;
            memcpy(b->key, key, klen);
            if (gb_map_put(self->map, b->key, klen, b) != 0) {
                free(b);
                b = NULL;
            }
        }
        if (!b) { /* the table is full of busy peers */
            *retry_ms = (int64_t)(1000.0 / self->per_s) + 1;
            return 0;
        }
    }
    refill(self, b, now_ms);
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return 1;
    }
    *retry_ms = (int64_t)((1.0 - b->tokens) * 1000.0 / self->per_s) + 1;
    return 0;
}

size_t gb_rate_peers(const gb_rate_t *self) {
    return gb_map_size(self->map);
}
