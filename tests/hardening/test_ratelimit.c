/* test_ratelimit.c - per-peer token buckets (coordinator/ratelimit.h) on a
 * clock the test drives.
 *
 *   test_ratelimit CASE   (burst, refill, peers, table_full, bad_args) */
#include "check.h"
#include "ratelimit.h"

#include <stdio.h>
#include <string.h>

static int take(gb_rate_t *r, const char *key, int64_t now, int64_t *retry) {
    return gb_rate_take(r, key, strlen(key), now, retry);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *c = argv[1];
    int64_t retry = 0;
    if (strcmp(c, "burst") == 0) {
        /* 10/s with a burst of 5: five at once, the sixth waits 100 ms */
        gb_rate_t *r = gb_rate_new(10, 5, 16);
        CHECK(r);
        for (int i = 0; i < 5; i++)
            CHECKF(take(r, "k", 1000, &retry), "request %d of the burst refused", i);
        CHECK(!take(r, "k", 1000, &retry));
        CHECKF(retry >= 100 && retry <= 101, "retry %lld ms", (long long)retry);
        CHECK(!take(r, "k", 1099, &retry));
        CHECK(take(r, "k", 1100, &retry)); /* one token after 100 ms */
        CHECK(!take(r, "k", 1100, &retry));
        gb_rate_destroy(&r);
        CHECK(r == NULL);
        gb_rate_destroy(&r); /* no-op */
    } else if (strcmp(c, "refill") == 0) {
        gb_rate_t *r = gb_rate_new(2, 3, 16);
        for (int i = 0; i < 3; i++)
            CHECK(take(r, "k", 0, &retry));
        CHECK(!take(r, "k", 0, &retry));
        /* an hour idle refills to the burst, not beyond */
        for (int i = 0; i < 3; i++)
            CHECK(take(r, "k", 3600000, &retry));
        CHECK(!take(r, "k", 3600000, &retry));
        /* a clock that goes back gives nothing */
        CHECK(!take(r, "k", 1000, &retry));
        /* steady state: 2 a second, no more */
        int ok = 0;
        for (int64_t t = 3600000; t < 3600000 + 10000; t += 10)
            ok += take(r, "k", t, &retry);
        CHECKF(ok >= 19 && ok <= 21, "%d granted in 10 s at 2/s", ok);
        gb_rate_destroy(&r);
    } else if (strcmp(c, "peers") == 0) {
        /* buckets are per key: one peer's flood does not starve another */
        gb_rate_t *r = gb_rate_new(1, 2, 16);
        CHECK(take(r, "flood", 0, &retry) && take(r, "flood", 0, &retry));
        CHECK(!take(r, "flood", 0, &retry));
        CHECK(take(r, "quiet", 0, &retry));
        CHECK(gb_rate_peers(r) == 2);
        /* keys are bytes, not strings */
        CHECK(gb_rate_take(r, "a\0b", 3, 0, &retry) && gb_rate_take(r, "a\0c", 3, 0, &retry));
        CHECK(gb_rate_peers(r) == 4);
        gb_rate_destroy(&r);
    } else if (strcmp(c, "table_full") == 0) {
        gb_rate_t *r = gb_rate_new(1, 1, 3);
        CHECK(take(r, "a", 0, &retry) && take(r, "b", 0, &retry) && take(r, "c", 0, &retry));
        /* all three are busy (empty buckets): a fourth peer is refused */
        CHECK(!take(r, "d", 10, &retry));
        CHECK(retry > 0);
        CHECK(gb_rate_peers(r) == 3);
        /* once they are idle (full again) they are forgotten for the newcomer */
        CHECK(take(r, "d", 5000, &retry));
        CHECK(gb_rate_peers(r) == 1);
        gb_rate_destroy(&r);
    } else if (strcmp(c, "bad_args") == 0) {
        CHECK(gb_rate_new(0, 1, 1) == NULL);
        CHECK(gb_rate_new(1, 0.5, 1) == NULL);
        CHECK(gb_rate_new(1, 1, 0) == NULL);
        CHECK(gb_rate_new(-1, 1, 1) == NULL);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    printf("ok\n");
    return 0;
}
