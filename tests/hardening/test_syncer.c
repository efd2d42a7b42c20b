/* test_syncer.c - the WAL flusher of --sync group (coordinator/syncer.h) on
 * a real SQLite store in WAL mode.
 *
 *   test_syncer CASE   (flush, full, bad_path) */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "syncer.h"

#include <fcntl.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The "full" case's tmpfs, unmounted at the end or at a failed CHECK's exit
 * (one was left mounted on /tmp by a failure). */
static const char *mounted;
static void unmount_tmpfs(void) {
    char cmd[400];
    if (!mounted) return;
    snprintf(cmd, sizeof cmd, "umount -l '%s'", mounted);
    if (system(cmd) != 0) fprintf(stderr, "cannot unmount %s\n", mounted);
    mounted = NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *c = argv[1];
    char dir[256], db_path[300], err[300];
    snprintf(dir, sizeof dir, "%s/gb-syncer-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(dir));
    snprintf(db_path, sizeof db_path, "%s/s.db", dir);
    if (strcmp(c, "flush") == 0) {
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db,
                           "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                           " PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (x)",
                           NULL, NULL, NULL) == SQLITE_OK);
        gb_syncer_t *s = gb_syncer_new(db_path, err, sizeof err);
        CHECKF(s, "%s", err);
        CHECK(gb_syncer_done(s, err, sizeof err) == 0); /* nothing asked yet */
        for (uint64_t seq = 1; seq <= 50; seq++) {
            CHECK(sqlite3_exec(db, "INSERT INTO t VALUES (randomblob(3000))", NULL, NULL, NULL) ==
                  SQLITE_OK);
            gb_syncer_request(s, seq);
        }
        /* the descriptor wakes a poller once the flush is done */
        struct pollfd p = {gb_syncer_fd(s), POLLIN, 0};
        CHECKF(poll(&p, 1, 5000) == 1, "no wake-up within 5 s");
        CHECK(gb_syncer_wait(s, 50, 5000) == 0);
        CHECK(gb_syncer_done(s, err, sizeof err) == 50);
        /* older requests change nothing */
        gb_syncer_request(s, 10);
        CHECK(gb_syncer_done(s, err, sizeof err) == 50);
        /* its checkpoints move the WAL into the database (the writer has
         * automatic checkpoints off): the database file grows */
        char main_path[300];
        snprintf(main_path, sizeof main_path, "%s", db_path);
        long size0 = 0;
        FILE *f = fopen(main_path, "rb");
        CHECK(f && fseek(f, 0, SEEK_END) == 0);
        size0 = ftell(f);
        fclose(f);
        for (int i = 0; i < 30; i++) {
            f = fopen(main_path, "rb");
            CHECK(f && fseek(f, 0, SEEK_END) == 0);
            long now = ftell(f);
            fclose(f);
            if (now > 100000) break;
            struct timespec ts = {0, 100000000L};
            nanosleep(&ts, NULL);
        }
        f = fopen(main_path, "rb");
        CHECK(f && fseek(f, 0, SEEK_END) == 0);
        long size1 = ftell(f);
        fclose(f);
        CHECKF(size1 > 100000 && size1 >= size0, "database %ld bytes: no checkpoint", size1);
        gb_syncer_destroy(&s);
        CHECK(s == NULL);
        gb_syncer_destroy(&s); /* no-op */
        sqlite3_close(db);
    } else if (strcmp(c, "full") == 0) {
        /* the store on a full disk: every checkpoint fails (the file cannot
         * grow), and is said once, not every 500 ms (it said 21 lines in
         * 20 s). Needs root for the small tmpfs. */
        char cmd[600], log_path[320], fill[320];
        snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=1m gb-syncer '%s' 2>/dev/null", dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "SKIP: cannot mount a tmpfs here (needs root)\n");
            rmdir(dir);
            return 77;
        }
        static char mount_dir[256];
        snprintf(mount_dir, sizeof mount_dir, "%s", dir);
        mounted = mount_dir;
        atexit(unmount_tmpfs); /* a failed CHECK exits too: no mount left behind */
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db,
                           "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;"
                           " CREATE TABLE t (x)",
                           NULL, NULL, NULL) == SQLITE_OK);
        for (int i = 0; i < 40; i++) /* ~120 KiB in the WAL, none in the file */
            CHECK(sqlite3_exec(db, "INSERT INTO t VALUES (randomblob(3000))", NULL, NULL, NULL) ==
                  SQLITE_OK);
        snprintf(fill, sizeof fill, "%s/filler", dir);
        snprintf(cmd, sizeof cmd, "dd if=/dev/zero of='%s' bs=4k 2>/dev/null", fill);
        CHECK(system(cmd) != 0 || 1); /* dd stops at the full disk */
        snprintf(log_path, sizeof log_path, "/tmp/gb-syncer-log-%d", (int)getpid());
        fflush(stderr);
        int saved = dup(2), lf = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        CHECK(saved >= 0 && lf >= 0 && dup2(lf, 2) == 2);
        close(lf);
        gb_syncer_t *sy = gb_syncer_new(db_path, err, sizeof err);
        CHECKF(sy, "%s", err);
        for (uint64_t seq = 1; seq <= 50; seq++) { /* 2.5 s: five checkpoint tries */
            gb_syncer_request(sy, seq);
            struct timespec ts = {0, 50000000L};
            nanosleep(&ts, NULL);
        }
        gb_syncer_destroy(&sy);
        fflush(stderr);
        CHECK(dup2(saved, 2) == 2);
        close(saved);
        sqlite3_close(db);
        int lines = 0;
        char line[512];
        FILE *lg = fopen(log_path, "r");
        CHECK(lg);
        while (fgets(line, sizeof line, lg))
            if (strstr(line, "checkpoint: database or disk is full")) {
                lines++;
                CHECKF(strstr(line, "said every 30 s"), "%s", line);
            }
        fclose(lg);
        unlink(log_path);
        unmount_tmpfs();
        CHECKF(lines == 1, "the failing checkpoint was said %d times in 2.5 s", lines);
    } else if (strcmp(c, "bad_path") == 0) {
        snprintf(db_path, sizeof db_path, "%s/no/such/dir/s.db", dir);
        CHECK(gb_syncer_new(db_path, err, sizeof err) == NULL);
        CHECKF(strstr(err, "cannot open"), "%s", err);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
