/* test_util.c - path helpers of common/gb_util.c shared by the coordinator
 * (an ipc path that is the store's) and the engine (--save over --load or
 * --data): gb_same_path on real files in a temp directory, existing or not,
 * through ".", "..", a relative path and a symbolic link; gb_file_kind;
 * gb_create_new and gb_write_file_atomic against a file or a link already
 * at the name (another user's, in a shared directory). */
#define _DEFAULT_SOURCE
#include "check.h"
#include "gb_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path holds exactly text */
static int holds(const char *path, const char *text) {
    char *got = NULL, err[256];
    size_t len = 0;
    if (gb_read_file(path, 4096, &got, &len, err, sizeof err) != 0) return 0;
    int same = len == strlen(text) && memcmp(got, text, len) == 0;
    free(got);
    return same;
}

/* entries of dir whose name contains part */
static int count_named(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

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

    /* links of our own on the way, followed (relative, '.', '..', a link to
     * a directory, /proc's): fine; a loop is said, not walked for ever */
    char e[256];
    CHECK(symlink("sub", "dl") == 0);
    f = fopen("sub/f", "w");
    CHECK(f);
    fclose(f);
    CHECK(gb_path_links_trusted("dl/f", e, sizeof e) == 0);
    CHECK(gb_path_links_trusted("./dl/../dl/./f", e, sizeof e) == 0);
    CHECK(gb_path_links_trusted("/proc/self/cwd/dl/f", e, sizeof e) == 0);
    CHECK(gb_path_links_trusted("sub/link.db", e, sizeof e) == 0);
    CHECK(gb_path_links_trusted("no/such/file", e, sizeof e) == 0); /* the open says why */
    CHECK(symlink("loop2", "loop1") == 0 && symlink("loop1", "loop2") == 0);
    CHECK(gb_path_links_trusted("loop1/x", e, sizeof e) == -1);
    CHECKF(strstr(e, "more than 40 symbolic links"), "%s", e);

    /* ISO 8601 of Unix ms: floor division before 1970, a fixed text past
     * year 9999 (it printed ".-01" and read an unterminated buffer) */
    char iso[40];
    gb_iso8601(0, iso, sizeof iso);
    CHECK(strcmp(iso, "1970-01-01T00:00:00.000Z") == 0);
    gb_iso8601(1764950400123, iso, sizeof iso);
    CHECKF(strcmp(iso, "2025-12-05T16:00:00.123Z") == 0, "%s", iso);
    gb_iso8601(-1, iso, sizeof iso);
    CHECKF(strcmp(iso, "1969-12-31T23:59:59.999Z") == 0, "%s", iso);
    gb_iso8601(253402300799999, iso, sizeof iso);
    CHECKF(strcmp(iso, "9999-12-31T23:59:59.999Z") == 0, "%s", iso);
    gb_iso8601(INT64_MAX, iso, sizeof iso);
    CHECKF(strcmp(iso, "9999-12-31T23:59:59.999Z") == 0, "%s", iso);
    gb_iso8601(INT64_MIN, iso, sizeof iso);
    CHECKF(strcmp(iso, "0000-01-01T00:00:00.000Z") == 0, "%s", iso);

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

    /* gb_create_new: a new file of exactly the mode asked for; never an
     * existing one, never through a link (dangling or not) */
    char err[600];
    mode_t old_mask = umask(077);
    int fd = gb_create_new("new.pub", 0644, err, sizeof err);
    CHECKF(fd >= 0, "%s", err);
    CHECK(write(fd, "x\n", 2) == 2 && close(fd) == 0);
    CHECK(lstat("new.pub", &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644);
    umask(old_mask);
    errno = 0;
    CHECK(gb_create_new("new.pub", 0600, err, sizeof err) < 0 && errno == EEXIST);
    CHECKF(strstr(err, "new.pub"), "%s", err);
    CHECK(holds("new.pub", "x\n")); /* not truncated */
    f = fopen("victim", "w");
    CHECK(f && fputs("precious\n", f) >= 0 && fclose(f) == 0);
    CHECK(symlink("victim", "link") == 0 && symlink("absent", "dangling") == 0);
    CHECK(gb_create_new("link", 0600, err, sizeof err) < 0);
    CHECK(gb_create_new("dangling", 0600, err, sizeof err) < 0);
    CHECK(holds("victim", "precious\n") && access("absent", F_OK) != 0);

    /* gb_write_file_atomic over a link replaces the link; its target keeps
     * its text. Its temporary file is new (PATH.tmp.HEX, random) and gone
     * afterwards; the mode is the one asked for */
    CHECKF(gb_write_file_atomic("link", "key\n", 4, err, sizeof err) == 0, "%s", err);
    CHECK(lstat("link", &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
    CHECK(holds("link", "key\n") && holds("victim", "precious\n"));
    CHECKF(gb_write_file_atomic_mode("w.pub", "p\n", 2, 0644, err, sizeof err) == 0, "%s", err);
    CHECK(stat("w.pub", &st) == 0 && (st.st_mode & 07777) == 0644);
    CHECK(count_named(".", ".tmp.") == 0);
    /* a file or link planted at the name a pid-named temporary had is
     * neither written through nor taken over */
    char planted[64];
    snprintf(planted, sizeof planted, "out.tmp.%ld", (long)getpid());
    CHECK(symlink("victim", planted) == 0);
    CHECKF(gb_write_file_atomic("out", "secret\n", 7, err, sizeof err) == 0, "%s", err);
    CHECK(holds("victim", "precious\n") && holds("out", "secret\n"));
    CHECK(lstat(planted, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(unlink(planted) == 0);
    fd = open(planted, O_WRONLY | O_CREAT | O_EXCL, 0666);
    CHECK(fd >= 0 && fchmod(fd, 0666) == 0 && close(fd) == 0);
    struct stat pl;
    CHECK(stat(planted, &pl) == 0);
    CHECKF(gb_write_file_atomic("out", "secret2\n", 8, err, sizeof err) == 0, "%s", err);
    CHECK(stat("out", &st) == 0 && st.st_ino != pl.st_ino && (st.st_mode & 07777) == 0600);
    CHECK(holds(planted, "") && count_named(".", ".tmp.") == 1);

    /* $TMPDIR when set and not empty, else /tmp */
    CHECK(setenv("TMPDIR", base, 1) == 0 && strcmp(gb_tmpdir(), base) == 0);
    CHECK(setenv("TMPDIR", "", 1) == 0 && strcmp(gb_tmpdir(), "/tmp") == 0);
    CHECK(unsetenv("TMPDIR") == 0 && strcmp(gb_tmpdir(), "/tmp") == 0);

    CHECK(chdir("/") == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0);
    return 0;
}
