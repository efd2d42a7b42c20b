/* test_curve.c - key files (common/gb_curve.h): what `gpubench keygen`
 * writes, and every way reading a key file can fail.
 *
 *   test_curve CASE    (CASE: keygen, keygen_planted, keygen_foreign, read_errors,
 *                       public_forms, client_load; keygen_foreign exits 77, a
 *                       skip, unless root: it makes a file another user owns) */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_curve.h"
#include "gb_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define NOBODY 65534

static char dir[256];

static void put(const char *name, const char *text, mode_t mode) {
    char p[512], err[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECKF(gb_write_file_atomic(p, text, strlen(text), err, sizeof err) == 0, "%s", err);
    CHECK(chmod(p, mode) == 0);
}

static const char *path(const char *name) {
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

static const char *line_of(const char *key) {
    static char l[64];
    snprintf(l, sizeof l, "%s\n", key);
    return l;
}

/* name holds exactly text */
static int holds(const char *name, const char *text) {
    char *got = NULL, err[256];
    size_t len = 0;
    if (gb_read_file(path(name), 4096, &got, &len, err, sizeof err) != 0) return 0;
    int same = len == strlen(text) && memcmp(got, text, len) == 0;
    free(got);
    return same;
}

/* name is a regular file (not a link) of this process's user, with mode */
static void expect_own_file(const char *name, mode_t mode, ino_t not_ino) {
    struct stat st;
    CHECKF(lstat(path(name), &st) == 0, "%s is missing", name);
    CHECKF(S_ISREG(st.st_mode), "%s is %s", name, gb_file_kind(st.st_mode));
    CHECKF(st.st_uid == geteuid(), "%s belongs to uid %u", name, (unsigned)st.st_uid);
    CHECKF((st.st_mode & 07777) == mode, "%s has mode %o", name, (unsigned)(st.st_mode & 07777));
    CHECKF(st.st_ino != not_ino, "%s is the file planted at its temporary name", name);
}

static void expect_pair_error(const char *name, const char *word) {
    char pub[41], sec[41], err[600];
    CHECKF(gb_curve_read_pair(path(name), pub, sec, err, sizeof err) != 0, "%s was accepted", name);
    CHECKF(strstr(err, word), "%s: '%s' lacks '%s'", name, err, word);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *c = argv[1];
    CHECKF(gb_curve_available(), "libzmq without CURVE");
    snprintf(dir, sizeof dir, "%s/gb-curve-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(dir));
    char pub[41], sec[41], pub2[41], err[600];
    if (strcmp(c, "keygen") == 0) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/node", dir);
        CHECKF(gb_curve_keygen(prefix, 0, pub, err, sizeof err) == 0, "%s", err);
        CHECK(gb_curve_key_ok(pub));
        struct stat st;
        CHECK(stat(path("node.key"), &st) == 0);
        CHECKF((st.st_mode & 0777) == 0600, "NAME.key has mode %o", (unsigned)(st.st_mode & 0777));
        CHECK(stat(path("node.pub"), &st) == 0);
        CHECK((st.st_mode & 0777) == 0644);
        /* the .pub holds the key on one line and nothing else */
        char *text = NULL;
        size_t len = 0;
        CHECK(gb_read_file(path("node.pub"), 100, &text, &len, err, sizeof err) == 0);
        CHECK(len == 41 && text[40] == '\n' && strncmp(text, pub, 40) == 0);
        free(text);
        /* the pair reads back, and the secret makes the public key */
        CHECKF(gb_curve_read_pair(path("node.key"), pub2, sec, err, sizeof err) == 0, "%s", err);
        CHECK(strcmp(pub, pub2) == 0);
        char derived[41];
        CHECK(zmq_curve_public(derived, sec) == 0 && strcmp(derived, pub) == 0);
        /* no silent overwrite; --force replaces */
        CHECK(gb_curve_keygen(prefix, 0, pub2, err, sizeof err) != 0);
        CHECKF(strstr(err, "exists"), "%s", err);
        CHECK(gb_curve_keygen(prefix, 1, pub2, err, sizeof err) == 0);
        CHECK(strcmp(pub, pub2) != 0); /* a new pair */
        CHECK(stat(path("node.key"), &st) == 0 && (st.st_mode & 0777) == 0600);
        /* into a directory that does not exist, or a file: said of that
         * directory (it named the temporary file, "node.key.tmp.HEX: No
         * such file or directory") */
        char want[700];
        snprintf(prefix, sizeof prefix, "%s/nodir/node", dir);
        CHECK(gb_curve_keygen(prefix, 0, pub2, err, sizeof err) != 0);
        snprintf(want, sizeof want,
                 "cannot write %s/nodir/node.key: directory %s/nodir does not exist", dir, dir);
        CHECKF(strcmp(err, want) == 0, "'%s', want '%s'", err, want);
        snprintf(prefix, sizeof prefix, "%s/node.pub/node", dir);
        CHECK(gb_curve_keygen(prefix, 0, pub2, err, sizeof err) != 0);
        snprintf(want, sizeof want,
                 "cannot write %s/node.pub/node.key: %s/node.pub is not a directory", dir, dir);
        CHECKF(strcmp(err, want) == 0, "'%s', want '%s'", err, want);
    } else if (strcmp(c, "keygen_planted") == 0) {
        /* a shared directory (1777) where another user planted a link and a
         * file of mode 666 at the temporary names keygen used to write
         * through (NAME.key.tmp.PID: this process's pid). The link made
         * keygen overwrite its target and left NAME.key that user's link;
         * the file became NAME.key, readable and writable by all. */
        CHECK(chmod(dir, 01777) == 0);
        put("victim", "precious\n", 0644);
        char planted[64];
        snprintf(planted, sizeof planted, "op.key.tmp.%ld", (long)getpid());
        CHECK(symlink(path("victim"), path(planted)) == 0);
        snprintf(planted, sizeof planted, "op.pub.tmp.%ld", (long)getpid());
        int fd = open(path(planted), O_WRONLY | O_CREAT | O_EXCL, 0666);
        CHECK(fd >= 0 && fchmod(fd, 0666) == 0 && write(fd, "planted\n", 8) == 8);
        struct stat pl;
        CHECK(fstat(fd, &pl) == 0);
        close(fd);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/op", dir);
        CHECKF(gb_curve_keygen(prefix, 0, pub, err, sizeof err) == 0, "%s", err);
        CHECKF(holds("victim", "precious\n"), "keygen wrote through the planted link");
        CHECK(holds(planted, "planted\n"));
        expect_own_file("op.key", 0600, 0);
        expect_own_file("op.pub", 0644, pl.st_ino);
        CHECKF(gb_curve_read_pair(path("op.key"), pub2, sec, err, sizeof err) == 0, "%s", err);
        CHECK(strcmp(pub, pub2) == 0);
        /* --force over NAME.key that is a link: the link is replaced, its
         * target is not written */
        CHECK(symlink(path("victim"), path("fl.key")) == 0);
        CHECK(symlink(path("victim"), path("fl.pub")) == 0);
        snprintf(prefix, sizeof prefix, "%s/fl", dir);
        CHECKF(gb_curve_keygen(prefix, 1, pub, err, sizeof err) == 0, "%s", err);
        CHECKF(holds("victim", "precious\n"), "keygen --force wrote through NAME.key's link");
        expect_own_file("fl.key", 0600, 0);
        expect_own_file("fl.pub", 0644, 0);
        /* nothing of keygen's own is left behind: just what was planted */
        int n = 0;
        char cmd[600];
        snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '\\.tmp\\.'", dir);
        FILE *ls = popen(cmd, "r");
        CHECK(ls && fscanf(ls, "%d", &n) == 1);
        pclose(ls);
        CHECKF(n == 2, "%d files named *.tmp.* (want the 2 planted)", n);
    } else if (strcmp(c, "keygen_foreign") == 0) {
        if (geteuid() != 0) {
            fprintf(stderr, "SKIP: needs root to make a file another user owns\n");
            rmdir(dir);
            return 77;
        }
        /* --force does not replace a key another user owns in a shared
         * directory: that user's key, or a file planted to be taken for
         * ours */
        CHECK(chmod(dir, 01777) == 0);
        put("theirs.key", "their key\n", 0600);
        CHECK(chown(path("theirs.key"), NOBODY, NOBODY) == 0);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/theirs", dir);
        CHECK(gb_curve_keygen(prefix, 1, pub, err, sizeof err) != 0);
        CHECKF(strstr(err, "theirs.key belongs to uid 65534"), "%s", err);
        CHECK(holds("theirs.key", "their key\n"));
        put("p.pub", "their pub\n", 0644);
        CHECK(chown(path("p.pub"), NOBODY, NOBODY) == 0);
        snprintf(prefix, sizeof prefix, "%s/p", dir);
        CHECK(gb_curve_keygen(prefix, 1, pub, err, sizeof err) != 0);
        CHECKF(strstr(err, "p.pub belongs to uid 65534"), "%s", err);
        CHECK(holds("p.pub", "their pub\n"));
        CHECK(access(path("p.key"), F_OK) != 0); /* refused before writing anything */
        /* a file planted at the old temporary name, owned by that user */
        char planted[64];
        snprintf(planted, sizeof planted, "op.key.tmp.%ld", (long)getpid());
        put(planted, "planted\n", 0666);
        CHECK(chown(path(planted), NOBODY, NOBODY) == 0);
        snprintf(prefix, sizeof prefix, "%s/op", dir);
        CHECKF(gb_curve_keygen(prefix, 0, pub, err, sizeof err) == 0, "%s", err);
        expect_own_file("op.key", 0600, 0);
        CHECK(holds(planted, "planted\n"));
    } else if (strcmp(c, "read_errors") == 0) {
        CHECK(zmq_curve_keypair(pub, sec) == 0);
        char good[300];
        snprintf(good, sizeof good, "public-key = %s\nsecret-key = %s\n", pub, sec);
        put("open.key", good, 0644);
        expect_pair_error("open.key", "can be read by others (mode 644)");
        /* the words say what the mode allows, and to whom */
        put("group.key", good, 0640);
        expect_pair_error("group.key", "can be read by its group (mode 640)");
        put("wr.key", good, 0602);
        expect_pair_error("wr.key", "can be written by others (mode 602)");
        /* a .pub given as --key: told so, not "chmod 600 it" */
        put("alice.pub", pub, 0644);
        expect_pair_error("alice.pub", "is a public key; --key wants the key pair, NAME.key");
        char other_pub[41], other_sec[41];
        CHECK(zmq_curve_keypair(other_pub, other_sec) == 0);
        char mixed[300];
        snprintf(mixed, sizeof mixed, "public-key = %s\nsecret-key = %s\n", other_pub, sec);
        put("mixed.key", mixed, 0600);
        expect_pair_error("mixed.key", "not the one its secret key makes");
        put("garbage.key", "hello\n", 0600);
        expect_pair_error("garbage.key", "not a gpubench key file");
        char shortk[300];
        snprintf(shortk, sizeof shortk, "public-key = %.39s\nsecret-key = %s\n", pub, sec);
        put("short.key", shortk, 0600);
        expect_pair_error("short.key", "not a gpubench key file");
        char only[300];
        snprintf(only, sizeof only, "public-key = %s\n", pub);
        put("only.key", only, 0600);
        expect_pair_error("only.key", "is a public key"); /* no secret half */
        expect_pair_error("missing.key", "cannot read");
        /* a line that is neither is refused (it was ignored), and a field twice */
        char extra[400];
        snprintf(extra, sizeof extra, "public-key = %s\nsecret-key = %s\ngarbage line\n", pub, sec);
        put("extra.key", extra, 0600);
        expect_pair_error("extra.key", "nothing else");
        snprintf(extra, sizeof extra, "public-key = %s\nsecret-key = %s\nsecret-key = %s\n", pub,
                 sec, other_sec);
        put("twice.key", extra, 0600);
        expect_pair_error("twice.key", "one 'secret-key = ...' line");
        /* a public key under another name than .pub, given as --key */
        put("coordpub.key", line_of(pub), 0600);
        expect_pair_error("coordpub.key", "is a public key; --key wants the key pair");
        /* and a key pair under a .pub name is judged by what it holds */
        put("ak.pub", good, 0600);
        CHECKF(gb_curve_read_pair(path("ak.pub"), pub2, other_sec, err, sizeof err) == 0, "%s",
               err);
        CHECK(strcmp(pub2, pub) == 0 && strcmp(other_sec, sec) == 0);
        /* a real public key named .pub, private or not, is told so */
        put("mine.pub", line_of(pub), 0600);
        expect_pair_error("mine.pub", "is a public key; --key wants the key pair, NAME.key");
        /* a FIFO or a directory is refused at once (it waited for a writer) */
        CHECK(mkfifo(path("fifo.key"), 0600) == 0);
        expect_pair_error("fifo.key", "is a pipe or FIFO");
        CHECK(mkdir(path("dir.key"), 0700) == 0);
        chmod(path("dir.key"), 0700);
        expect_pair_error("dir.key", "is a directory");
        /* comments, quotes and CRLF are fine */
        char styled[400];
        snprintf(styled, sizeof styled, "# mine\r\n  public-key = \"%s\"\r\nsecret-key=%s\r\n", pub,
                 sec);
        put("styled.key", styled, 0600);
        CHECKF(gb_curve_read_pair(path("styled.key"), pub2, other_sec, err, sizeof err) == 0, "%s",
               err);
        CHECK(strcmp(pub2, pub) == 0 && strcmp(other_sec, sec) == 0);
    } else if (strcmp(c, "public_forms") == 0) {
        CHECK(zmq_curve_keypair(pub, sec) == 0);
        char line[100];
        snprintf(line, sizeof line, "%s\n", pub);
        put("a.pub", line, 0644);
        CHECK(gb_curve_read_public(path("a.pub"), pub2, NULL, err, sizeof err) == 0);
        CHECK(strcmp(pub, pub2) == 0);
        char pair[300];
        snprintf(pair, sizeof pair, "secret-key = %s\npublic-key = %s\n", sec, pub);
        put("a.key", pair, 0600);
        int has_secret = 0;
        CHECK(gb_curve_read_public(path("a.key"), pub2, &has_secret, err, sizeof err) == 0);
        CHECK(strcmp(pub, pub2) == 0 && has_secret); /* the public half, never the secret */
        /* in keygen's order too (public first): the secret line was never
         * reached and coord.key passed as --server-key */
        snprintf(pair, sizeof pair, "# gpubench\npublic-key = %s\nsecret-key = %s\n", pub, sec);
        put("k.key", pair, 0600);
        has_secret = 0;
        CHECK(gb_curve_read_public(path("k.key"), pub2, &has_secret, err, sizeof err) == 0);
        CHECK(strcmp(pub, pub2) == 0 && has_secret);
        CHECK(mkfifo(path("fifo.pub"), 0644) == 0);
        CHECK(gb_curve_read_public(path("fifo.pub"), pub2, NULL, err, sizeof err) != 0);
        CHECKF(strstr(err, "is a pipe or FIFO"), "%s", err);
        /* but a client never pins the coordinator with its key pair file:
         * the fleet's secret key would travel to every node */
        gb_curve_client_t cl;
        put("me.key", pair, 0600);
        CHECK(gb_curve_client_load(&cl, path("me.key"), path("a.key"), err, sizeof err) != 0);
        CHECKF(strstr(err, "holds a secret key: --server-key wants the coordinator's public key"),
               "%s", err);
        CHECKF(gb_curve_client_load(&cl, path("me.key"), path("a.pub"), err, sizeof err) == 0, "%s",
               err);
        put("bad.pub", "not a key\n", 0644);
        CHECK(gb_curve_read_public(path("bad.pub"), pub2, NULL, err, sizeof err) != 0);
        CHECKF(strstr(err, "holds no public key"), "%s", err);
        CHECK(!gb_curve_key_ok("short") && !gb_curve_key_ok(NULL));
        char bad[41];
        memcpy(bad, pub, 41);
        bad[5] = ' '; /* not in the Z85 alphabet */
        CHECK(!gb_curve_key_ok(bad));
    } else if (strcmp(c, "client_load") == 0) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/me", dir);
        CHECK(gb_curve_keygen(prefix, 0, pub, err, sizeof err) == 0);
        snprintf(prefix, sizeof prefix, "%s/coord", dir);
        CHECK(gb_curve_keygen(prefix, 0, pub2, err, sizeof err) == 0);
        gb_curve_client_t k;
        CHECKF(gb_curve_client_load(&k, path("me.key"), path("coord.pub"), err, sizeof err) == 0,
               "%s", err);
        CHECK(strcmp(k.public_key, pub) == 0 && strcmp(k.server_key, pub2) == 0);
        CHECK(gb_curve_client_load(&k, path("me.key"), NULL, err, sizeof err) != 0);
        CHECKF(strstr(err, "both --key and --server-key"), "%s", err);
        CHECK(gb_curve_client_load(&k, path("me.pub"), path("coord.pub"), err, sizeof err) != 0);
        /* what keygen wrote for the coordinator, given as --server-key */
        CHECK(gb_curve_client_load(&k, path("me.key"), path("coord.key"), err, sizeof err) != 0);
        CHECKF(strstr(err, "holds a secret key"), "%s", err);
        /* keygen does not write over a link, dangling or not, without --force */
        CHECK(symlink("/nonexistent-gb", path("dl.key")) == 0);
        snprintf(prefix, sizeof prefix, "%s/dl", dir);
        CHECK(gb_curve_keygen(prefix, 0, pub2, err, sizeof err) != 0);
        CHECKF(strstr(err, "exists"), "%s", err);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
