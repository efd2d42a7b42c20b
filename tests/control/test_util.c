/* test_util.c - path helpers of common/gb_util.c shared by the coordinator
 * (an ipc path that is the store's) and the engine (--save over --load or
 * --data): gb_same_path on real files in a temp directory, existing or not,
 * through ".", "..", a relative path and a symbolic link; gb_file_kind. */
#define _DEFAULT_SOURCE
#include "check.h"
#include "gb_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    char base[] = "/tmp/gb-util-XXXXXX", p[4][512], cmd[600];
    CHECK(mkdtemp(base));
    snprintf(p[0], sizeof p[0], "%s/sub", base);
    CHECK(mkdir(p[0], 0700) == 0);
    CHECK(chdir(base) == 0);

    /* neither exists: the same directory and name, however written */
    CHECK(gb_same_path("x.db", "./x.db"));
    CHECK(gb_same_path("x.db", "sub/../x.db"));
    snprintf(p[1], sizeof p[1], "%s/x.db", base);
    CHECK(gb_same_path("x.db", p[1]));
    CHECK(!gb_same_path("x.db", "sub/x.db"));
    CHECK(!gb_same_path("x.db", "x.db-wal"));
    CHECK(!gb_same_path("nodir/x.db", "nodir/x.db")); /* a directory that does not resolve */
    /* both exist: the same inode, a link to it included */
    FILE *f = fopen("x.db", "w");
    CHECK(f);
    fclose(f);
    CHECK(symlink("../x.db", "sub/link.db") == 0);
    CHECK(gb_same_path("sub/link.db", p[1]));
    CHECK(gb_same_path("sub/../x.db", "./x.db"));
    f = fopen("y.db", "w");
    CHECK(f);
    fclose(f);
    CHECK(!gb_same_path("x.db", "y.db"));
    /* one exists, the other does not */
    CHECK(gb_same_path("x.db-new", "./x.db-new"));
    CHECK(!gb_same_path("x.db", "sub/x.db"));
    /* the root's entries */
    CHECK(gb_same_path("/gb-util-none", "/./gb-util-none"));

    struct stat st;
    CHECK(stat(base, &st) == 0 && strcmp(gb_file_kind(st.st_mode), "a directory") == 0);
    CHECK(mkfifo("fifo", 0600) == 0 && stat("fifo", &st) == 0);
    CHECK(strcmp(gb_file_kind(st.st_mode), "a pipe or FIFO") == 0);
    CHECK(stat("/dev/null", &st) == 0 &&
          strcmp(gb_file_kind(st.st_mode), "a character device") == 0);

    /* UTF-8: valid characters of 1..4 bytes; stray, overlong, surrogate,
     * beyond U+10FFFF and cut-short sequences are not */
    CHECK(gb_utf8_ok("") && gb_utf8_ok("plain") && gb_utf8_ok("r\xc3\xa9seau \xe2\x82\xac"));
    CHECK(gb_utf8_ok("\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf \xee\x80\x80"));
    CHECK(gb_utf8_len("\xe2\x82\xac") == 3 && gb_utf8_len("\xf0\x9f\x98\x80") == 4);
    static const char *const bad_utf8[] = {"\x80",
                                           "\xbf",
                                           "\xc0\xaf",
                                           "\xc1\xbf",
                                           "\xe0\x80\xaf",
                                           "\xf0\x80\x80\xaf",
                                           "\xed\xa0\x80",
                                           "\xed\xbf\xbf",
                                           "\xf4\x90\x80\x80",
                                           "\xf5\x80\x80\x80",
                                           "\xff",
                                           "\xc3",
                                           "\xe2\x82",
                                           "\xf0\x9f\x98",
                                           "\xc3\x28"};
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++)
        CHECKF(!gb_utf8_ok(bad_utf8[i]) && gb_utf8_len(bad_utf8[i]) == 0, "case %zu", i);
    char *fixed = gb_utf8_fix("a\xff\xc3\xa9\xe2\x82");
    CHECK(fixed && strcmp(fixed, "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd") == 0);
    free(fixed);

    /* $TMPDIR when set and not empty, else /tmp */
    CHECK(setenv("TMPDIR", base, 1) == 0 && strcmp(gb_tmpdir(), base) == 0);
    CHECK(setenv("TMPDIR", "", 1) == 0 && strcmp(gb_tmpdir(), "/tmp") == 0);
    CHECK(unsetenv("TMPDIR") == 0 && strcmp(gb_tmpdir(), "/tmp") == 0);

    CHECK(chdir("/") == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0);
    return 0;
}
