/* syncer.c - see syncer.h. */
#define _GNU_SOURCE
#include "syncer.h"

#include "gb_log.h"
#include "gb_util.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define CHECKPOINT_MS 500 /* a PASSIVE checkpoint at least this often while writes come */

struct gb_syncer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stop;
    uint64_t requested; /* under mu */
    _Atomic uint64_t done;
    atomic_int failed;
    char err[256]; /* set once, before failed */
    int wal_fd, event_fd;
    sqlite3 *db; /* the thread's own connection, for checkpoints */
};

static void *run(void *arg) {
    gb_syncer_t *s = arg;
    gb_log_set_component("sync");
    int64_t last_ckpt = gb_mono_ms(), ckpt_logged = 0;
    uint64_t ckpt_seen = 0, ckpt_failed = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && s->requested == atomic_load(&s->done)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += CHECKPOINT_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
        }
        uint64_t target = s->requested;
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (target > atomic_load(&s->done) && !atomic_load(&s->failed)) {
            if (fdatasync(s->wal_fd) != 0) {
                snprintf(s->err, sizeof s->err, "fdatasync of the WAL: %s", strerror(errno));
                atomic_store(&s->failed, 1);
            } else {
                atomic_store(&s->done, target);
            }
            uint64_t one = 1;
            if (write(s->event_fd, &one, sizeof one) < 0) { /* the counter is saturated: fine */
            }
        }
        /* Move the WAL into the database now and then, off the reactor's path
         * (the reactor's connection has automatic checkpoints off). */
        int64_t now = gb_mono_ms();
        if (s->db && target != ckpt_seen && now - last_ckpt >= CHECKPOINT_MS) {
            int log = 0, ckpt = 0;
            int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &ckpt);
            /* a full disk fails it at every try: said once, then every 30 s
             * with the count (the WAL keeps what it could not move) */
            if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
                ckpt_failed++;
                if (!ckpt_logged || now - ckpt_logged >= 30000) {
                    char more[64] = "";
                    if (ckpt_failed > 1)
                        gb_fmt(more, sizeof more, "; %" PRIu64 " tries failed since the last line",
                               ckpt_failed);
                    gb_warn("checkpoint: %s (tried again every %d ms, said every 30 s%s)",
                            sqlite3_errmsg(s->db), CHECKPOINT_MS, more);
                    ckpt_logged = now;
                    ckpt_failed = 0;
                }
            } else if (rc == SQLITE_OK && ckpt_logged) {
                gb_info("checkpoint: moving the WAL into the store works again");
                ckpt_logged = 0;
                ckpt_failed = 0;
            }
            last_ckpt = now;
            ckpt_seen = target;
        }
        if (stop) break;
    }
    return NULL;
}

gb_syncer_t *gb_syncer_new(const char *db_path, char *err, size_t errlen) {
    gb_syncer_t *s = calloc(1, sizeof *s);
    if (!s) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    s->wal_fd = s->event_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    char wal[4200];
    if (gb_fmt(wal, sizeof wal, "%s-wal", db_path) != 0) {
        gb_fmt(err, errlen, "store path too long");
        goto err;
    }
    /* SQLite made the WAL when the store was opened in WAL mode; an empty
     * one is a valid WAL should it not be there yet */
    s->wal_fd = open(wal, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    s->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wal_fd < 0 || s->event_fd < 0) {
        gb_fmt(err, errlen, "sync: cannot open %s: %s", wal, strerror(errno));
        goto err;
    }
    if (sqlite3_open_v2(db_path, &s->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK) {
        gb_fmt(err, errlen, "sync: cannot open %s: %s", db_path,
               s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto err;
    }
    sqlite3_busy_timeout(s->db, 100);
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        gb_fmt(err, errlen, "sync: cannot start a thread");
        goto err;
    }
    s->started = 1;
    return s;
err:
    gb_syncer_destroy(&s);
    return NULL;
}

void gb_syncer_destroy(gb_syncer_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_syncer_t *s = *self_p;
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    if (s->db) sqlite3_close(s->db);
    if (s->wal_fd >= 0) close(s->wal_fd);
    if (s->event_fd >= 0) close(s->event_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    *self_p = NULL;
}

void gb_syncer_request(gb_syncer_t *s, uint64_t seq) {
    pthread_mutex_lock(&s->mu);
    if (seq > s->requested) {
        s->requested = seq;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

int gb_syncer_fd(const gb_syncer_t *s) {
    return s->event_fd;
}

int64_t gb_syncer_done(gb_syncer_t *s, char *err, size_t errlen) {
    uint64_t n;
    while (read(s->event_fd, &n, sizeof n) > 0) {
    }
    if (atomic_load(&s->failed)) {
        gb_fmt(err, errlen, "%s", s->err);
        return -1;
    }
    return (int64_t)atomic_load(&s->done);
}

int gb_syncer_wait(gb_syncer_t *s, uint64_t seq, int timeout_ms) {
    gb_syncer_request(s, seq);
    int64_t end = gb_mono_ms() + timeout_ms;
    while (atomic_load(&s->done) < seq && !atomic_load(&s->failed)) {
        if (gb_mono_ms() > end) return -1;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->failed) ? -1 : 0;
}
