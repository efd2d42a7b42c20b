/* test_spool.c - the agent's result spool (common/gb_spool.c) on a real
 * temp directory: what is put survives a reopen, deletes are idempotent,
 * leftovers of an interrupted write are cleaned, foreign files ignored,
 * quarantined entries no longer listed, a removed directory made again. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_spool.h"
#include "gb_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void touch(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
}

static int exists(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

int main(void) {
    char base[] = "/tmp/gb-spool-XXXXXX", cmd[600];
    CHECK(mkdtemp(base));
    snprintf(dir, sizeof dir, "%s/deep/spool", base); /* created with parents */
    char err[512];
    gb_spool_t *s = gb_spool_new(dir, err, sizeof err);
    CHECKF(s, "%s", err);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);

    CHECK(gb_spool_put(s, 12, 1, "first", 5, err, sizeof err) == 0);
    CHECK(gb_spool_put(s, 3, 2, "\0binary\xff", 8, err, sizeof err) == 0);
    CHECK(gb_spool_put(s, 12, 1, "replaced", 8, err, sizeof err) == 0);
    CHECK(gb_spool_put(s, 12, 2, "", 0, err, sizeof err) == 0);
    touch("notes.txt", "not an entry");
    touch("result-x-1.pb", "bad name");
    touch("result-5-0.pb", "attempt 0 is not valid");
    touch("result-7-1.pb.tmp.999", "an interrupted write");
    gb_spool_destroy(&s);
    CHECK(s == NULL);
    gb_spool_destroy(&s); /* NULL is fine */

    s = gb_spool_new(dir, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(!exists("result-7-1.pb.tmp.999")); /* cleaned on open */
    CHECK(exists("notes.txt"));              /* foreign files left alone */
    gb_spool_entry_t *e = NULL;
    size_t n = 0;
    CHECK(gb_spool_list(s, &e, &n, err, sizeof err) == 0);
    CHECKF(n == 3, "%zu entries", n);
    CHECK(e[0].job_id == 3 && e[0].attempt == 2);
    CHECK(e[1].job_id == 12 && e[1].attempt == 1);
    CHECK(e[2].job_id == 12 && e[2].attempt == 2);
    free(e);

    void *data = NULL;
    size_t len = 0;
    CHECK(gb_spool_get(s, 12, 1, &data, &len, err, sizeof err) == 0);
    CHECK(len == 8 && memcmp(data, "replaced", 8) == 0);
    free(data);
    CHECK(gb_spool_get(s, 3, 2, &data, &len, err, sizeof err) == 0);
    CHECK(len == 8 && memcmp(data, "\0binary\xff", 8) == 0);
    free(data);
    CHECK(gb_spool_get(s, 99, 1, &data, &len, err, sizeof err) != 0);
    CHECK(strstr(err, "result-99-1.pb"));

    CHECK(gb_spool_del(s, 12, 1, err, sizeof err) == 0);
    CHECK(gb_spool_del(s, 12, 1, err, sizeof err) == 0); /* twice is fine */
    CHECK(gb_spool_quarantine(s, 3, 2, err, sizeof err) == 0);
    CHECK(exists("result-3-2.pb.bad"));
    CHECK(gb_spool_quarantine(s, 3, 2, err, sizeof err) != 0);
    CHECK(gb_spool_list(s, &e, &n, err, sizeof err) == 0);
    CHECK(n == 1 && e[0].job_id == 12 && e[0].attempt == 2);
    free(e);

    /* has / ensure: the directory removed under an open spool */
    CHECK(gb_spool_has(s, 12, 2, err, sizeof err) == 1);
    CHECK(gb_spool_has(s, 12, 1, err, sizeof err) == 0);
    CHECK(gb_spool_ensure(s, err, sizeof err) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s/deep'", base);
    CHECK(system(cmd) == 0);
    CHECK(gb_spool_has(s, 12, 2, err, sizeof err) == 0);
    CHECK(gb_spool_put(s, 12, 2, "x", 1, err, sizeof err) != 0); /* no directory */
    CHECKF(gb_spool_ensure(s, err, sizeof err) == 1, "%s", err);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    CHECK(gb_spool_ensure(s, err, sizeof err) == 0);
    CHECK(gb_spool_put(s, 12, 2, "x", 1, err, sizeof err) == 0);
    CHECK(gb_spool_has(s, 12, 2, err, sizeof err) == 1);
    gb_spool_destroy(&s);

    /* a spool where a file is in the way */
    char file[300];
    snprintf(file, sizeof file, "%s/afile", base);
    FILE *af = fopen(file, "w");
    CHECK(af);
    fclose(af);
    CHECK(gb_spool_new(file, err, sizeof err) == NULL);
    CHECKF(strstr(err, "afile"), "%s", err);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0);
    return 0;
}
