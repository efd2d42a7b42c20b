/* test_store_hold.c - gb_store_hold (coordinator/store.c): the store's file
 * held by a child process while ours is closed, so that another process's
 * last close does not checkpoint a WAL written against the file as it was.
 *
 * The scene is the coordinator's repair of a removed WAL (keep_side_files):
 * our connection's WAL has no name; a `sqlite3` shell writes into a WAL of
 * its own, made against the file without what ours held; we checkpoint ours
 * into the file and close. A `sqlite3` that closes now as the last
 * connection checkpoints the shell's WAL over ours: case `unheld` shows that
 * it does (the test's own control: the scene is real), case `kept` that with
 * the hold it does not, and that the store opens again whole.
 *
 *   kept     held: the foreign WAL stays, set aside; our table is there
 *   unheld   not held: our table is lost (what the hold prevents)
 *   dies     the hold ends with the process that took it
 *   missing  a path that cannot be opened: -1 with the reason */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64], path[128];

static void sh(const char *sql) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sqlite3 -batch '%s' \"%s\" >/dev/null", path, sql);
    CHECKF(system(cmd) == 0, "%s", cmd);
}

static void exec_ok(sqlite3 *db, const char *sql) {
    char *e = NULL;
    CHECKF(sqlite3_exec(db, sql, NULL, NULL, &e) == SQLITE_OK, "%s: %s", sql, e ? e : "");
}

static long side_size(const char *suffix) {
    char p[160];
    struct stat st;
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Who else holds a lock that keeps SQLite's exclusive lock off the file:
 * that process's pid, or 0. (Our own locks never conflict with ours.) */
static pid_t exclusive_blocked_by(void) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0x40000002;
    fl.l_len = 510;
    CHECK(fcntl(fd, F_GETLK, &fl) == 0);
    close(fd);
    return fl.l_type == F_UNLCK ? 0 : fl.l_pid;
}

/* Our store in WAL mode, its WAL removed, a shell's WAL made against the
 * file without our table, ours checkpointed: the moment before the close. */
static sqlite3 *scene(void) {
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    exec_ok(db, "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;"
                "CREATE TABLE ours(x); INSERT INTO ours VALUES (1)");
    char p[160];
    snprintf(p, sizeof p, "%s-wal", path);
    CHECK(unlink(p) == 0);
    snprintf(p, sizeof p, "%s-shm", path);
    CHECK(unlink(p) == 0);
    sh("CREATE TABLE mine(x); INSERT INTO mine VALUES (7)");
    /* our open connection's shared lock kept the shell's close from
     * checkpointing: its WAL stays */
    CHECKF(side_size("-wal") > 0, "the shell's WAL: %ld bytes", side_size("-wal"));
    int log = -1, done = -2;
    CHECK(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done) ==
          SQLITE_OK);
    CHECK(log == done);
    int one = 1;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
    return db;
}

static int count_ours(void) {
    sqlite3 *db;
    sqlite3_stmt *st;
    int n = -1;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM ours", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    snprintf(dir, sizeof dir, "/tmp/gb-hold-XXXXXX");
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/gb.db", dir);
    char err[512] = "";
    gb_store_hold_t h;
    if (strcmp(c, "kept") == 0) {
        sqlite3 *db = scene();
        CHECKF(gb_store_hold(path, &h, err, sizeof err) == 0, "%s", err);
        CHECK(h.pid > 0);
        CHECK(exclusive_blocked_by() == h.pid);
        CHECK(sqlite3_close(db) == SQLITE_OK);
        /* a reader opens and closes as the last connection: held, it cannot
         * checkpoint the shell's WAL */
        sh("SELECT count(*) FROM sqlite_master");
        CHECKF(side_size("-wal") > 0, "the shell's WAL was checkpointed: %ld", side_size("-wal"));
        /* set aside, as keep_side_files does, and opened again */
        char wal[160], aside[176], shm[160];
        snprintf(wal, sizeof wal, "%s-wal", path);
        snprintf(aside, sizeof aside, "%s.aside", wal);
        snprintf(shm, sizeof shm, "%s-shm", path);
        CHECK(rename(wal, aside) == 0);
        CHECK(unlink(shm) == 0);
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        exec_ok(db, "SELECT count(*) FROM ours");
        gb_store_release(&h);
        CHECK(h.pid == 0);
        CHECK(exclusive_blocked_by() == 0); /* the child is gone, and its lock */
        sqlite3_close(db);
        CHECK(count_ours() == 1);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "test \"$(sqlite3 '%s' 'PRAGMA integrity_check')\" = ok", path);
        CHECK(system(cmd) == 0);
        gb_store_release(&h); /* twice: nothing */
    } else if (strcmp(c, "unheld") == 0) {
        sqlite3 *db = scene();
        CHECK(sqlite3_close(db) == SQLITE_OK);
        sh("SELECT count(*) FROM sqlite_master");
        /* the reader's close checkpointed the shell's WAL over our pages */
        CHECKF(side_size("-wal") <= 0, "the shell's WAL stayed: %ld", side_size("-wal"));
        CHECKF(count_ours() == -1, "our table survived: %d rows", count_ours());
    } else if (strcmp(c, "dies") == 0) {
        sqlite3 *db;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        exec_ok(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(x)");
        sqlite3_close(db);
        int ready[2];
        CHECK(pipe(ready) == 0);
        pid_t taker = fork();
        CHECK(taker >= 0);
        if (taker == 0) {
            close(ready[0]);
            if (gb_store_hold(path, &h, err, sizeof err) != 0) _exit(2);
            if (write(ready[1], &h.pid, sizeof h.pid) != (ssize_t)sizeof h.pid) _exit(3);
            pause(); /* killed holding it */
            _exit(4);
        }
        close(ready[1]);
        int child = 0;
        CHECK(read(ready[0], &child, sizeof child) == (ssize_t)sizeof child);
        CHECK(exclusive_blocked_by() == child);
        CHECK(kill(taker, SIGKILL) == 0);
        CHECK(waitpid(taker, NULL, 0) == taker);
        int freed = 0;
        for (int i = 0; i < 500 && !freed; i++) { /* 5 s */
            freed = exclusive_blocked_by() == 0;
            if (!freed) nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
        }
        CHECK(freed);
    } else if (strcmp(c, "missing") == 0) {
        char nowhere[160];
        snprintf(nowhere, sizeof nowhere, "%s/no/gb.db", dir);
        CHECK(gb_store_hold(nowhere, &h, err, sizeof err) == -1);
        CHECKF(strstr(err, "cannot open") && strstr(err, "No such file or directory"), "%s", err);
        CHECK(h.pid == 0);
        gb_store_release(&h);
    } else {
        fprintf(stderr, "unknown case '%s'\n", c);
        return 2;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}
