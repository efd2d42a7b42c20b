/* launch.c - see launch.h. */
#define _GNU_SOURCE
#include "launch.h"

#include "gb_util.h"
#include "nccl_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_exe[PATH_MAX];

void gb_train_set_replica_exe(const char *path) {
    snprintf(g_exe, sizeof(g_exe), "%s", path ? path : "");
}

/* ------------------------------------------------------------- lines */

typedef struct lbuf {
    char *b;
    size_t len, cap;
} lbuf_t;

/* One read into l: >0 bytes, 0 at the end, -1 on an error. */
static ssize_t lbuf_read(lbuf_t *l, int fd) {
    if (l->cap - l->len < 4096) {
        size_t cap = l->cap ? l->cap * 2 : 8192;
        char *b = realloc(l->b, cap);
        if (!b) return -1;
        l->b = b;
        l->cap = cap;
    }
    ssize_t n;
    do
        n = read(fd, l->b + l->len, l->cap - l->len - 1);
    while (n < 0 && errno == EINTR);
    if (n > 0) l->len += (size_t)n;
    return n;
}

/* The next whole line (malloc'd, without its '\n'), or NULL. */
static char *lbuf_line(lbuf_t *l) {
    char *nl = l->len ? memchr(l->b, '\n', l->len) : NULL;
    if (!nl) return NULL;
    size_t n = (size_t)(nl - l->b);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, l->b, n);
    s[n] = '\0';
    memmove(l->b, nl + 1, l->len - n - 1);
    l->len -= n + 1;
    return s;
}

/* Blocking: the next line from fd, or NULL at the end or on an error. */
static char *read_line(lbuf_t *l, int fd) {
    for (;;) {
        char *s = lbuf_line(l);
        if (s) return s;
        if (lbuf_read(l, fd) <= 0) return NULL;
    }
}

int gb_launch_send(int fd, const char *tag, const char *text) {
    size_t nt = strlen(tag), nx = text ? strlen(text) : 0;
    char *line = malloc(nt + nx + 3);
    if (!line) return -1;
    memcpy(line, tag, nt);
    size_t n = nt;
    if (text) {
        line[n++] = ' ';
        /* one line: a reason with a newline in it keeps its first line */
        for (size_t i = 0; i < nx; i++)
            line[n++] = text[i] == '\n' ? ' ' : text[i];
    }
    line[n++] = '\n';
    const char *p = line;
    int rc = 0;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = -1;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    free(line);
    return rc;
}

static int send_hex(int fd, const char *tag, const void *p, size_t n) {
    char *h = malloc(2 * n + 1);
    if (!h) return -1;
    gb_hex_encode(p, n, h, 2 * n + 1);
    int rc = gb_launch_send(fd, tag, h);
    free(h);
    return rc;
}

/* ---------------------------------------------------------- the launcher */

typedef struct child {
    pid_t pid;
    int fd;
    lbuf_t in;
    int ready, ended, ok;
    cJSON *report;
} child_t;

typedef struct launch {
    const gb_train_config_t *cfg;
    child_t *ch;
    int P, node, nodes;
    unsigned char id[GB_DIST_ID_MAX];
    size_t id_len;
    int failed;
    char *err;
    size_t errlen;
    char nccl_dir[256]; /* one NCCL log directory for every replica process; "" */
} launch_t;

static void fail(launch_t *L, int d, const char *why) {
    if (L->failed) return;
    L->failed = 1;
    if (d >= 0)
        snprintf(L->err, L->errlen, "replica process %d (rank %d): %s", d, L->node * L->P + d, why);
    else
        snprintf(L->err, L->errlen, "%s", why);
}

/* Why child d ended without its result: its exit status, once it has one
 * (it closed its socket, so it is ending; after 2 s it is killed). */
static void ended_early(launch_t *L, int d) {
    child_t *c = &L->ch[d];
    int st = 0;
    pid_t w = 0;
    for (int i = 0; i < 200 && (w = waitpid(c->pid, &st, WNOHANG)) == 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    char why[128];
    if (w == c->pid) {
        c->pid = 0;
        if (WIFSIGNALED(st))
            snprintf(why, sizeof(why), "ended without a result: killed by signal %d (%s)",
                     WTERMSIG(st), strsignal(WTERMSIG(st)));
        else
            snprintf(why, sizeof(why), "ended without a result: exit status %d", WEXITSTATUS(st));
    } else {
        snprintf(why, sizeof(why), "closed its socket without a result");
    }
    fail(L, d, why);
}

static int start_child(launch_t *L, int d, char *err, size_t errlen) {
    child_t *c = &L->ch[d];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    /* the replica's end is its descriptor 3 (below) */
    char *const argv[] = {(char *)"gpubench", (char *)"__replica", (char *)"3", NULL};
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        /* die with the launcher, which kills the others on a failure */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(126);
        /* its socket as descriptor 3 and nothing else of the launcher's
         * (the worker's rendezvous socket, which the agent's exec passed
         * on purpose; whatever a caller left without close-on-exec), as the
         * agent starts a worker (agent/runner.c) */
        if (sv[1] != 3 && dup2(sv[1], 3) != 3) _exit(126); /* dup2: not close-on-exec */
        if (sv[1] == 3) {
            int fl = fcntl(3, F_GETFD);
            if (fl < 0 || fcntl(3, F_SETFD, fl & ~FD_CLOEXEC) < 0) _exit(126);
        }
        close_range(4, ~0U, 0);
        execv(g_exe, argv);
        static const char msg[] = "gpubench: cannot start a replica process: exec failed\n";
        ssize_t wr = write(2, msg, sizeof(msg) - 1);
        (void)wr;
        _exit(127);
    }
    close(sv[1]);
    c->pid = pid;
    c->fd = sv[0];
    /* the job: the config's bytes (the same executable reads them), its
     * paths, this replica's place */
    const gb_train_config_t *cfg = L->cfg;
    gb_train_config_t cc = *cfg;
    cc.dist = NULL;
    cc.load_path = cc.data_path = cc.save_path = cc.save_grads_path = NULL;
    const char *paths[4] = {cfg->load_path, cfg->data_path, d == 0 ? cfg->save_path : NULL,
                            d == 0 ? cfg->save_grads_path : NULL};
    char place[128];
    snprintf(place, sizeof(place), "%d %d %d %d %d", cfg->first_device + d, L->P, cfg->threads,
             L->node * L->P + d, L->nodes * L->P);
    int rc = send_hex(c->fd, "cfg", &cc, sizeof(cc));
    for (int k = 0; k < 4 && rc == 0; k++) {
        if (!paths[k]) continue;
        char tag[8];
        snprintf(tag, sizeof(tag), "str%d", k);
        rc = send_hex(c->fd, tag, paths[k], strlen(paths[k]));
    }
    if (rc == 0 && L->nccl_dir[0])
        rc = send_hex(c->fd, "nccldir", L->nccl_dir, strlen(L->nccl_dir));
    if (rc == 0) rc = gb_launch_send(c->fd, "place", place);
    if (rc == 0) rc = gb_launch_send(c->fd, "go", NULL);
    if (rc) snprintf(err, errlen, "cannot send replica process %d its job", d);
    return rc;
}

static void on_line(launch_t *L, int d, char *line) {
    child_t *c = &L->ch[d];
    char *arg = strchr(line, ' ');
    if (arg) *arg++ = '\0';
    if (strcmp(line, "id") == 0 && arg && L->node == 0 && d == 0 && !L->id_len) {
        if (gb_hex_decode(arg, strlen(arg), L->id, sizeof(L->id), &L->id_len) || !L->id_len) {
            L->id_len = 0;
            fail(L, d, "sent a unique id that is not 1..128 bytes of hex");
            return;
        }
        gb_dist_t *dist = L->cfg->dist;
        char why[GB_ERR_LEN];
        if (dist && dist->publish_id(dist, L->id, L->id_len, why, sizeof(why))) fail(L, -1, why);
    } else if (strcmp(line, "ready") == 0 && !c->ready) {
        c->ready = 1;
    } else if (strcmp(line, "report") == 0 && arg && !c->report) {
        c->report = cJSON_Parse(arg);
        if (!cJSON_IsObject(c->report)) fail(L, d, "sent a report that is not a JSON object");
    } else if (strcmp(line, "ok") == 0) {
        c->ended = c->ok = 1;
        if (!c->report) fail(L, d, "ended without its report");
    } else if (strcmp(line, "fail") == 0) {
        c->ended = 1;
        fail(L, d, arg && arg[0] ? arg : "failed");
    } else {
        char why[96];
        snprintf(why, sizeof(why), "sent '%.40s', which the launcher does not know", line);
        fail(L, d, why);
    }
}

/* Every replica of the node at the barrier (and rank 0's id known): the
 * node's own start (the worker's rendezvous with the other nodes), then
 * the start time and the id to each. */
static void start_all(launch_t *L) {
    gb_dist_t *dist = L->cfg->dist;
    int64_t at = gb_wall_ms();
    const unsigned char *id = L->id;
    size_t id_len = L->id_len;
    char why[GB_ERR_LEN];
    if (dist) {
        if (dist->wait_start(dist, why, sizeof(why))) {
            fail(L, -1, why);
            return;
        }
        at = dist->start_at_ms;
        id = dist->unique_id;
        id_len = dist->unique_id_len;
    }
    char *line = malloc(2 * id_len + 32);
    if (!line) {
        fail(L, -1, "out of memory");
        return;
    }
    int n = snprintf(line, 32, "%lld ", (long long)at);
    gb_hex_encode(id, id_len, line + n, 2 * id_len + 32 - (size_t)n);
    for (int d = 0; d < L->P; d++)
        if (gb_launch_send(L->ch[d].fd, "start", line)) {
            fail(L, d, "its socket closed before the start");
            break;
        }
    free(line);
}

int gb_launch_run(const gb_train_config_t *cfg, int threads_each, cJSON **reports, char *saveerr,
                  size_t saveerrlen, char *err, size_t errlen) {
    int P = cfg->devices;
    if (saveerrlen) saveerr[0] = '\0';
    if (!g_exe[0]) {
        snprintf(err, errlen,
                 "launch processes: this program cannot start replica processes (gpubench "
                 "can); use launch threads");
        return -1;
    }
    gb_train_config_t c = *cfg;
    c.threads = threads_each;
    launch_t L = {.cfg = &c,
                  .P = P,
                  .node = cfg->dist ? cfg->dist->rank : 0,
                  .nodes = cfg->dist ? cfg->dist->n_nodes : 1,
                  .err = err,
                  .errlen = errlen};
    L.ch = calloc((size_t)P, sizeof(*L.ch));
    struct pollfd *pf = calloc((size_t)P, sizeof(*pf));
    if (!L.ch || !pf) {
        free(L.ch);
        free(pf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int d = 0; d < P; d++)
        L.ch[d].fd = -1;
    char why[GB_ERR_LEN];
    /* NCCL's log of every replica process in one directory, where rank 0
     * reads the transports and connections of them all (each process
     * making its own, the record had rank 0's alone). Without it, each
     * makes its own, as before */
    int made_dir = 0;
    if (strcmp(cfg->backend, "cpu") != 0) {
        made_dir = gb_nccl_log_newdir(L.nccl_dir, sizeof(L.nccl_dir), why, sizeof(why));
        if (made_dir < 0) L.nccl_dir[0] = '\0';
    }
    /* the set-up has a deadline: a replica that neither fails nor becomes
     * ready (a hung mount under --data, a driver call that never returns)
     * held the launcher and every ready replica for ever, unnamed */
    int setup_ms = 0;
    if (gb_env_ms("GB_REPLICA_SETUP_MS", 1800000, 86400000, &setup_ms, why, sizeof(why)))
        fail(&L, -1, why);
    int64_t setup_by = gb_mono_ms() + setup_ms;
    for (int d = 0; d < P && !L.failed; d++)
        if (start_child(&L, d, why, sizeof(why))) fail(&L, -1, why);
    int started = 0, ended = 0;
    while (!L.failed && ended < P) {
        for (int d = 0; d < P; d++) {
            pf[d].fd = L.ch[d].ended ? -1 : L.ch[d].fd;
            pf[d].events = POLLIN;
            pf[d].revents = 0;
        }
        int64_t left = setup_by - gb_mono_ms();
        if (!started && left <= 0) {
            size_t o = (size_t)snprintf(why, sizeof(why), "replica process(es)");
            for (int d = 0; d < P && o < sizeof(why); d++)
                if (!L.ch[d].ready && !L.ch[d].ended)
                    o += (size_t)snprintf(why + o, sizeof(why) - o, " %d (rank %d)", d,
                                          L.node * P + d);
            if (o < sizeof(why))
                snprintf(why + o, sizeof(why) - o,
                         " not ready %d s after their start (GB_REPLICA_SETUP_MS)",
                         setup_ms / 1000);
            fail(&L, -1, why);
            break;
        }
        int timeout = started ? -1 : left > INT_MAX ? INT_MAX : (int)left;
        if (poll(pf, (nfds_t)P, timeout) < 0) {
            if (errno == EINTR) continue;
            snprintf(why, sizeof(why), "poll: %s", strerror(errno));
            fail(&L, -1, why);
            break;
        }
        for (int d = 0; d < P && !L.failed; d++) {
            child_t *ch = &L.ch[d];
            if (!pf[d].revents || ch->ended) continue;
            ssize_t n = lbuf_read(&ch->in, ch->fd);
            char *line;
            while (!L.failed && !ch->ended && (line = lbuf_line(&ch->in))) {
                if (strncmp(line, "savefail ", 9) == 0)
                    snprintf(saveerr, saveerrlen, "%s", line + 9);
                else
                    on_line(&L, d, line);
                free(line);
            }
            if (ch->ended) {
                ended++;
            } else if (n <= 0 && !L.failed) {
                ch->ended = 1;
                ended_early(&L, d);
            }
        }
        int ready = 0;
        for (int d = 0; d < P; d++)
            ready += L.ch[d].ready;
        if (!L.failed && !started && ready == P && (L.node != 0 || L.id_len)) {
            started = 1;
            start_all(&L);
        }
    }
    /* the others of a failed job have nothing left to do: killed, not
     * waited on (one may be blocked where nothing wakes it). After a run
     * that every replica ended "ok", each has its exit's teardown (the
     * CUDA runtime's, NCCL's) to finish: 30 s, then it is killed, its
     * result in hand (a driver call at exit that never returns must not
     * hold the job) */
    int64_t reap_by = gb_mono_ms() + 30000;
    for (int d = 0; d < P; d++) {
        child_t *ch = &L.ch[d];
        if (L.failed && ch->pid > 0) kill(ch->pid, SIGKILL);
        if (ch->fd >= 0) close(ch->fd);
        if (ch->pid > 0) {
            int st;
            pid_t w;
            while ((w = waitpid(ch->pid, &st, WNOHANG)) == 0 && gb_mono_ms() < reap_by) {
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
            if (w == 0) {
                fprintf(stderr,
                        "gpubench: replica process %d said ok but had not exited 30 s later: "
                        "killed\n",
                        d);
                kill(ch->pid, SIGKILL);
            }
            while (w <= 0 && waitpid(ch->pid, &st, 0) < 0 && errno == EINTR) {
            }
        }
        free(ch->in.b);
        if (!L.failed)
            reports[d] = ch->report;
        else
            cJSON_Delete(ch->report);
    }
    /* one that no NCCL wrote to (a run that failed before, a backend
     * without NCCL) goes; one with logs stays, named by the record */
    if (made_dir > 0) (void)rmdir(L.nccl_dir);
    free(L.ch);
    free(pf);
    return L.failed ? -1 : 0;
}

/* ------------------------------------------------------- a replica process */

typedef struct child_chan {
    int fd;
    lbuf_t *in;
} child_chan_t;

static int child_publish(gb_dist_t *d, const unsigned char *id, size_t len, char *err,
                         size_t errlen) {
    child_chan_t *ch = d->ctx;
    if (len < 1 || len > GB_DIST_ID_MAX || send_hex(ch->fd, "id", id, len)) {
        snprintf(err, errlen, "cannot hand the unique id to the launcher");
        return -1;
    }
    memcpy(d->unique_id, id, len);
    d->unique_id_len = len;
    return 0;
}

static int child_wait(gb_dist_t *d, char *err, size_t errlen) {
    child_chan_t *ch = d->ctx;
    if (gb_launch_send(ch->fd, "ready", NULL)) {
        snprintf(err, errlen, "the launcher is gone (its socket closed)");
        return -1;
    }
    char *line = read_line(ch->in, ch->fd);
    long long at = 0;
    int off = 0;
    if (!line || sscanf(line, "start %lld %n", &at, &off) != 1 || off == 0) {
        snprintf(err, errlen, "%s",
                 line ? "the launcher sent no start"
                      : "the launcher closed the replica's socket "
                        "before the start");
        free(line);
        return -1;
    }
    size_t n = 0;
    int bad = gb_hex_decode(line + off, strlen(line + off), d->unique_id, sizeof(d->unique_id), &n);
    free(line);
    if (bad || n == 0) {
        snprintf(err, errlen, "the launcher's start carries no unique id");
        return -1;
    }
    d->unique_id_len = n;
    d->start_at_ms = at;
    struct timespec ts = {(time_t)(at / 1000), (long)(at % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    d->started_at_ms = gb_wall_ms();
    return 0;
}

int gb_train_replica_main(int fd) {
    lbuf_t in = {0};
    gb_train_config_t cfg;
    char *paths[4] = {0};
    int have_cfg = 0, have_place = 0, rc = 1;
    int first = 0, node_devices = 0, threads = 0, rank = -1, n_nodes = 0;
    char err[GB_ERR_LEN] = "";
    char *line;
    while ((line = read_line(&in, fd))) {
        char *arg = strchr(line, ' ');
        if (arg) *arg++ = '\0';
        int done = strcmp(line, "go") == 0;
        if (strcmp(line, "cfg") == 0 && arg) {
            size_t n = 0;
            have_cfg =
                gb_hex_decode(arg, strlen(arg), (unsigned char *)&cfg, sizeof(cfg), &n) == 0 &&
                n == sizeof(cfg);
        } else if (strncmp(line, "str", 3) == 0 && line[3] >= '0' && line[3] <= '3' && arg) {
            int k = line[3] - '0';
            size_t n = strlen(arg) / 2;
            free(paths[k]);
            paths[k] = calloc(n + 1, 1);
            size_t got = 0;
            if (paths[k] &&
                (gb_hex_decode(arg, strlen(arg), (unsigned char *)paths[k], n, &got) || got != n)) {
                free(paths[k]);
                paths[k] = NULL;
            }
        } else if (strcmp(line, "place") == 0 && arg) {
            have_place = sscanf(arg, "%d %d %d %d %d", &first, &node_devices, &threads, &rank,
                                &n_nodes) == 5;
        } else if (strcmp(line, "nccldir") == 0 && arg) {
            /* read by gb_nccl_log_newdir (nccl_log.h), which checks it;
             * this process has no other thread yet */
            char dir[256];
            size_t got = 0;
            if (gb_hex_decode(arg, strlen(arg), (unsigned char *)dir, sizeof(dir) - 1, &got) == 0 &&
                got > 0) {
                dir[got] = '\0';
                setenv("GB_NCCL_LOG_DIR", dir, 1);
            }
        }
        free(line);
        if (done) break;
    }
    if (!have_cfg || !have_place || rank < 0 || n_nodes < 2 || rank >= n_nodes) {
        snprintf(err, sizeof(err), "the launcher's job for this replica is incomplete");
        goto out;
    }
    cfg.load_path = paths[0];
    cfg.data_path = paths[1];
    cfg.save_path = paths[2];
    cfg.save_grads_path = paths[3];
    cfg.devices = 1;
    cfg.first_device = first;
    cfg.node_devices = node_devices;
    cfg.threads = threads;
    snprintf(cfg.launch, sizeof(cfg.launch), "threads");
    child_chan_t chan = {fd, &in};
    gb_dist_t dist = {.rank = rank,
                      .n_nodes = n_nodes,
                      .world_size = n_nodes,
                      .publish_id = child_publish,
                      .wait_start = child_wait,
                      .ctx = &chan};
    cfg.dist = &dist;
    gb_engine_report_to(fd);
    gb_train_result_t res;
    int trc = gb_train_run(&cfg, &res, err, sizeof(err));
    /* a --save that failed leaves the result (and said "savefail"): the
     * run itself is the launcher's to report */
    rc = trc == 0 || (trc == -1 && res.record_json) ? 0 : 1;
    if (trc != GB_STRANDED) gb_train_result_free(&res);
out:
    if (rc)
        gb_launch_send(fd, "fail", err[0] ? err : "the replica failed");
    else
        gb_launch_send(fd, "ok", NULL);
    for (int k = 0; k < 4; k++)
        free(paths[k]);
    free(in.b);
    close(fd);
    return rc;
}
