/* rng.h - a small deterministic generator shared by every backend.
 *
 * splitmix64 to seed, xoshiro256** to draw. Used for weight init and synthetic
 * data so that the same seed gives bit-identical inputs on the CPU and the GPU
 * (the CUDA backend generates on the host with this, or on the device with the
 * same per-element functions). Not for cryptography.
 */
#ifndef GB_RNG_H
#define GB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct gb_rng {
    uint64_t s[4];
} gb_rng_t;

static inline uint64_t gb_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void gb_rng_seed(gb_rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = gb_splitmix64(&seed);
}

static inline uint64_t gb_rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t gb_rng_next(gb_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = gb_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = gb_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double gb_rng_uniform(gb_rng_t *r) {
    return (double)(gb_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Box-Muller's transform of two uniforms: one standard normal */
static inline double gb_normal_from(double u1, double u2) {
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Standard normal by Box-Muller (one value per call; simple over fast).
 * gb_rng_fill_normal (model.c) gives the same values for many at once. */
static inline double gb_rng_normal(gb_rng_t *r) {
    double u1 = gb_rng_uniform(r), u2 = gb_rng_uniform(r);
    return gb_normal_from(u1, u2);
}

#endif
