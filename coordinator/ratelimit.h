/* ratelimit.h - per-peer token buckets for the control endpoint.
 *
 * Each peer (its CURVE public key, or its address when there are no keys:
 * a client command uses a fresh DEALER, so its routing id says nothing)
 * has a bucket of `burst` tokens that refills at `per_s` tokens a second; a
 * request takes one token or is refused. Buckets of idle peers are
 * forgotten when the table is full (an idle bucket is a full one, so
 * forgetting it changes nothing); when none is idle a new peer is refused.
 * Times are passed in, so the tests drive the clock. Not thread-safe. */
#ifndef GB_COORD_RATELIMIT_H
#define GB_COORD_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_rate gb_rate_t;

/* per_s > 0 and burst >= 1; max_peers >= 1. NULL on bad arguments or
 * out-of-memory. */
gb_rate_t *gb_rate_new(double per_s, double burst, size_t max_peers);
void gb_rate_destroy(gb_rate_t **self_p);

/* Take a token for key (klen bytes, at most 255) at now_ms: 1 allowed; 0
 * refused, with the milliseconds until a token is there in *retry_ms. */
int gb_rate_take(gb_rate_t *self, const void *key, size_t klen, int64_t now_ms, int64_t *retry_ms);
/* Peers with a bucket now. */
size_t gb_rate_peers(const gb_rate_t *self);

#endif
