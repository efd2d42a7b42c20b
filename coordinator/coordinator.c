/* coordinator.c - see coordinator.h.
 *
 * In memory: every agent ever seen (registry), the unfinished jobs (a FIFO
 * queue of queued ones, and per agent the ones it runs), and per unfinished
 * sweep the count of jobs still open. Finished jobs live only in the store.
 *
 * A loop turn: poll; drain the agent socket and the control socket; run the
 * timers (liveness, heartbeats, rendezvous deadlines); place queued jobs;
 * then flush: commit the turn's transaction (every write of the turn, the
 * ranks table's included) and only then send what depends on it (result
 * acknowledgements once durable, assignments, starts and cancels of
 * multi-node ranks, replies to requests that wrote). Memory moves with the
 * turn: a result ends its job at once. If a statement or the commit fails,
 * the turn is rolled back, nothing of it is sent, and memory is reloaded
 * from the store (a running multi-node attempt, whose rendezvous lived in
 * memory only, is then given up); the agents resend. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE   700 /* realpath */
#include "coordinator.h"

#include "auth.h"
#include "gang.h"
#include "gb_curve.h"
#include "gb_log.h"
#include "gb_peer.h"
#include "gb_place.h"
#include "gb_rdv.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"
#include "map.h"
#include "ranks.h"
#include "ratelimit.h"
#include "record.h"
#include "store.h"
#include "syncer.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <sqlite3.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <zmq.h>

#define MAX_SLOTS            64
#define DRAIN_PER_TURN       256  /* messages per socket per loop turn */
#define SEEN_WRITE_MS        5000 /* nodes.last_seen is written at most this often */
#define REJECT_LOG_PER_S     20   /* reject lines logged a second; the rest are counted */
#define STORE_BACKOFF_MIN_MS 200
#define STORE_BACKOFF_MAX_MS 5000
#define GB_COORD_RATE_PEERS  65536 /* peers with a rate-limit bucket at once */
#define SLOW_TURN_US         10000 /* a loop turn longer than this is logged (debug) */

/* A_STOPPED: it said it stops (Heartbeat.stopping); not watched for silence */
enum { A_CONNECTED, A_DISCONNECTED, A_LOST, A_STOPPED };
static const char *const agent_state_names[] = {"connected", "disconnected", "lost", "stopped"};
enum { J_QUEUED, J_RUNNING };

typedef struct cjob cjob_t;
typedef struct cagent cagent_t;
typedef struct cgang cgang_t;

/* An attempt an agent runs that is not its own (any more), and when its
 * stop was last sent (stop_stale) */
typedef struct cstale {
    uint64_t job;
    uint32_t attempt;
    int64_t sent_ms;
} cstale_t;

struct cjob {
    uint64_t id, sweep_id;
    gb_jobdef_t def;
    int state;        /* J_QUEUED or J_RUNNING */
    uint32_t attempt; /* current attempt; 0 before the first */
    int max_attempts;
    /* attempts that do not count against max_attempts: refused (busy agent),
     * or multi-node attempts given up by a restart or a reload (jobs.free_attempts) */
    int refused;
    int cancel_requested;
    /* the cancel's reason (CancelRequest.reason; NULL: none given, the
     * default); kept in jobs.cancel_reason, so a restart keeps it too */
    char *cancel_why;
    int64_t cancel_sent_ms; /* its Cancel last sent (monotonic; 0: not since loaded) */
    /* while running */
    cagent_t *agent;
    char backend[8];
    int started;
    int missing; /* heartbeats in a row from its agent that did not mention it */
    int64_t assigned_ms;
    cgang_t *gang; /* a running multi-node job: its ranks (agent is then NULL) */
    /* while queued */
    cjob_t *prev, *next;
};

struct cagent {
    char id[GB_WIRE_ID_MAX + 1];
    char name[GB_WIRE_NAME_MAX + 1];
    char cpu_model[GB_WIRE_TEXT_MAX + 1];
    char gpu_model[GB_WIRE_TEXT_MAX + 1];
    char labels[GB_LABELS_LEN];
    char kinds[256];
    char cpu_precisions[32]; /* "fp32,bf16"; "": not reported */
    char last_seen[32];
    int n_gpus, cpu_cores, has_nvlink, slots;
    uint64_t nvlink_sets; /* gb_node_caps_t's */
    int nvlink_known;
    int rendezvous; /* multi-node protocol it speaks (Hello); -1: not heard since a restart */
    int state;
    int forgotten; /* nodes --forget: not placed on, listed or counted until its next Hello */
    /* when a peer with another key last spoke as this agent: libzmq's
     * routing-id handover gave it the agent's connection, so the agent is
     * silent to us through no fault of its own until it reconnects */
    int64_t claimed_ms;
    int64_t stopped_ms; /* when it said it stops (A_STOPPED) */
    /* FNV-1a of the last Hello stored (inventory, name, labels, slots, key):
     * a connected agent saying the same again is not written again */
    uint64_t hello_hash;
    int64_t last_heard_ms;
    int64_t dup_warned_ms; /* last "two agents share this id" line */
    int64_t seen_written_ms;
    cjob_t *running[MAX_SLOTS];
    int n_running;
    int reported_busy; /* jobs the agent last said it runs (ours or stale ones it is stopping) */
    /* the oldest waiting multi-node job that could run on it holds it
     * (gang_reserve, one placement pass): no newer job is placed on it */
    const cjob_t *reserved_for;
    int seen_dirty;                 /* last_seen changed and is not written yet */
    int in_store;                   /* found in the store by the last resync */
    char key[GB_CURVE_Z85_LEN + 1]; /* CURVE key it registered with ("" without CURVE) */
    /* why it cannot start workers now, from its heartbeats ("" when it
     * can): it is offered no job meanwhile (docs/control-plane.md) */
    char unable[GB_WIRE_UNABLE_MAX + 1];
    /* what it last listed as running that is not its own (stop_stale) */
    cstale_t stale[MAX_SLOTS];
    int n_stale;
};

typedef struct csweep {
    uint64_t id;
    unsigned open, failed, cancelled;
} csweep_t;

/* Something to send once the turn's transaction is committed: result
 * acknowledgements, job assignments, replies to requests that wrote. When
 * the commit fails it is dropped, or (fail_code != 0) replaced by a Reject
 * of that code answering ref_seq. */
typedef struct outmsg {
    void *sock;
    uint8_t rid[GB_RID_MAX];
    size_t rid_len;
    uint8_t *buf;
    size_t len;
    int fail_code;
    uint64_t ref_seq;
    int need_sync; /* --sync group: not before the turn's commit is durable */
    uint64_t seq;  /* (held) the commit it waits for */
} outmsg_t;

struct gb_coord {
    gb_coord_config_t cfg;
    int db_lock;             /* fd of the store file, flock'ed: one coordinator per store; -1 */
    int64_t store_check_ms;  /* keep_store: next look at the store's path */
    int64_t store_logged_ms; /* keep_store: last "cannot write it back" line */
    /* keep_store: the store's PATH-wal and PATH-shm (0 wal, 1 shm) as this
     * process has them open, once seen there (side_known) */
    int side_known[2];
    int64_t side_failed_ms; /* keep_side_files: first failed checkpoint, 0 */
    dev_t side_dev[2];
    ino_t side_ino[2];
    char db_real[PATH_MAX]; /* the store's file, symbolic links resolved at the start */
    mode_t db_dir_mode;     /* its directory's permission bits at the start (0: unknown) */
    int db_made;            /* the store's file was made by this start (lock_store) */
    /* watch_store: an inotify descriptor (-1 none yet, -2 none to be had)
     * and its watch on the store's directory (-1 none now) */
    int watch_fd, watch_wd;
    void *ctx, *agents_sock, *control_sock, *monitor, *control_monitor;
    gb_auth_t *auth; /* NULL without keys */
    gb_rate_t *rate; /* NULL when --rate-limit 0 */
    char secret[GB_CURVE_Z85_LEN + 1];
    /* A statement or the commit of this turn failed: the turn is rolled
     * back, nothing of it is sent, memory is reloaded from the store. */
    int store_failed;
    int fatal;              /* the store cannot even be read: gb_coord_run returns -1 */
    int64_t store_retry_ms; /* no placement before this (after a failure) */
    int store_backoff_ms;
    unsigned long store_failures;
    int64_t store_fail_logged_ms;
    /* > 0: the open transaction holds only the writes of the last reload
     * (gb_store_changes said this when it ended), which wait for the
     * back-off instead of failing (and being reloaded and logged) again
     * every turn while the disk stays full */
    int64_t reload_changes;
    uint64_t place_min_sweep; /* cfg.new_sweeps_only: jobs of older sweeps are not placed */
    gb_map_t *peers;          /* fd -> "addr:port" of accepted connections (read_monitor) */
    gb_map_t *spoke;          /* fd -> messages read from control connections on it, not yet
                                 matched with their disconnect (intptr_t) */
    int control_backlog;      /* this turn left control messages unread */
    int srcfd_works;          /* ZMQ_SRCFD named a connection once (it is deprecated) */
    gb_rate_t *refusal_log;   /* one "refused a peer" line per host and reason a while */
    int reject_quiet;         /* reject(): log at debug level (refusal_log said it already) */
    /* request ids asked about with only_if_made before any sweep had them:
     * their submit, should it still arrive (another connection, no order
     * between the two), is dropped; the last 64 */
    char withdrawn[64][65]; /* request ids are 16..64 bytes */
    unsigned n_withdrawn;
    char failed_why[128];
    int failed_auth;
    zmq_msg_t *cur_msg; /* the message being handled (for its peer's address), or NULL */
    /* reject log limit */
    int64_t reject_window_ms;
    int rejects_logged;
    unsigned long rejects_suppressed;
    char listen_ep[256], control_ep[256];
    char coord_id[17];
    char store_id[GB_WIRE_ID_MAX + 1]; /* store_meta.store_id (migration 0012) */
    gb_store_t *store;
    gb_ranks_t *ranks;  /* the store's ranks table (multi-node jobs) */
    unsigned gang_tick; /* passes of gang_check */
    gb_map_t *agents;   /* id -> cagent_t */
    cagent_t **agent_list;
    size_t n_agents, agent_cap;
    size_t n_forgotten; /* of agent_list: forgotten by request (kept for their ids) */
    gb_map_t *jobs;     /* id -> cjob_t (unfinished) */
    gb_map_t *sweeps;   /* id -> csweep_t (unfinished) */
    cjob_t *q_head, *q_tail;
    size_t n_queued;
    int dirty; /* placement may find something to do */
    int64_t started_ms, next_tick_ms;
    int64_t polled_ms;     /* when the loop's last poll returned (forgive_stall) */
    unsigned stall_passes; /* forgive_stall's, each gang once a pass */
    int agent_backlog;     /* turns have left agent messages unread, for less than a
                              lost window (check_liveness) */
    int64_t backlog_since; /* the first of those turns, 0 without one */
    int64_t hb_last_us;    /* heartbeats: when they were last sent, the share left over, */
    double hb_carry;       /* and where the cursor stands in agent_list */
    size_t hb_cursor;
    uint64_t seq;
    outmsg_t *out;
    size_t n_out, out_cap;
    /* --sync group: messages waiting for their commit to be durable, FIFO */
    gb_syncer_t *syncer;
    uint64_t commit_seq;
    outmsg_t *held;
    size_t held_head, n_held, held_cap;
    size_t n_acks, n_assigns; /* of the outbox, for the failure log */
    /* log lines that say a job or a sweep ended: printed once the turn that
     * ended it is committed, dropped (at debug level) when it is rolled back */
    char **endings;
    size_t n_endings, endings_cap;
};

/* Multi-node jobs (issue 5): the section "multi-node jobs" below. */
static int is_multi(const cjob_t *j);
static void gang_release(gb_coord_t *c, cjob_t *j);
static void gang_attempt_lost(gb_coord_t *c, cjob_t *j, const char *reason, int counts,
                              const cagent_t *by);
static void gang_dispatch(gb_coord_t *c);
static void gang_check(gb_coord_t *c);
static void gang_cancel(gb_coord_t *c, cjob_t *j);
static void gang_progress(gb_coord_t *c, cagent_t *a, cjob_t *j, const Gb__Progress *p);
static int gang_result(gb_coord_t *c, cagent_t *a, cjob_t *j, const Gb__Result *r);
static void gang_heartbeat(gb_coord_t *c, cagent_t *a, const Gb__Heartbeat *hb);
static void gang_hello(gb_coord_t *c, cagent_t *a, const Gb__Hello *h);
static void on_rank_update(gb_coord_t *c, cagent_t *a, const Gb__RankUpdate *u);
static int gang_satisfiable(gb_coord_t *c, const gb_jobdef_t *job, char *why, size_t whylen);

void gb_coord_config_default(gb_coord_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->listen = "tcp://127.0.0.1:5555";
    cfg->control = "tcp://127.0.0.1:5556";
    cfg->db_path = "gpubench.db";
    cfg->heartbeat_ms = 1000;
    cfg->lost_after = 5;
    cfg->max_attempts = 3;
    cfg->max_frame = GB_WIRE_MAX_FRAME;
    cfg->max_jobs_per_sweep = GB_SPEC_MAX_JOBS;
    cfg->max_agents = GB_COORD_MAX_AGENTS;
    cfg->max_queued = GB_COORD_MAX_QUEUED;
    cfg->rate_per_s = GB_COORD_RATE_PER_S;
    cfg->rate_burst = GB_COORD_RATE_BURST;
    cfg->sync = GB_SYNC_GROUP;
}

/* The largest frame the agents endpoint takes: --max-frame, but never less
 * than an agent's largest result (GB_WIRE_RESULT_FRAME_MAX). */
static size_t agents_max_frame(const gb_coord_config_t *cfg) {
    return cfg->max_frame > GB_WIRE_RESULT_FRAME_MAX ? cfg->max_frame : GB_WIRE_RESULT_FRAME_MAX;
}

const char *gb_coord_listen_endpoint(const gb_coord_t *c) {
    return c->listen_ep;
}
const char *gb_coord_control_endpoint(const gb_coord_t *c) {
    return c->control_ep;
}

int gb_endpoint_is_local(const char *ep) {
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0) return 1;
    if (strncmp(ep, "tcp://", 6) != 0) return 0;
    const char *host = ep + 6;
    if (strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0 ||
        strncmp(host, "[::1]:", 6) == 0 || strncmp(host, "[::ffff:127.", 12) == 0 ||
        strncmp(host, "lo:", 3) == 0)
        return 1;
    return 0;
}

static void now_iso(char *buf, size_t len) {
    gb_iso8601(gb_wall_ms(), buf, len);
}

static int64_t lost_window_ms(const gb_coord_t *c) {
    return (int64_t)c->cfg.heartbeat_ms * c->cfg.lost_after;
}

static void free_value(void *ctx, void *value) {
    (void)ctx;
    free(value);
}

static void gang_free(cgang_t **gp);

/* A job and, for a running multi-node job, its group of ranks. */
static void free_job(void *ctx, void *value) {
    (void)ctx;
    cjob_t *j = value;
    gang_free(&j->gang);
    free(j->cancel_why);
    free(j);
}

/* The error a cancelled job ends with: its cancel's reason, or the
 * default when none was given. */
#define CANCEL_DEFAULT "cancelled by request"
static const char *cancel_why(const cjob_t *j) {
    return j->cancel_why ? j->cancel_why : CANCEL_DEFAULT;
}

/* ---- queue ---------------------------------------------------------------- */

static void q_remove(gb_coord_t *c, cjob_t *j) {
    if (j->prev)
        j->prev->next = j->next;
    else
        c->q_head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        c->q_tail = j->prev;
    j->prev = j->next = NULL;
    c->n_queued--;
}

static void q_push_back(gb_coord_t *c, cjob_t *j) {
    j->prev = c->q_tail;
    j->next = NULL;
    if (c->q_tail)
        c->q_tail->next = j;
    else
        c->q_head = j;
    c->q_tail = j;
    c->n_queued++;
    c->dirty = 1;
}

/* A re-queued job goes ahead of the others: it waited longest. */
static void q_push_front(gb_coord_t *c, cjob_t *j) {
    j->prev = NULL;
    j->next = c->q_head;
    if (c->q_head)
        c->q_head->prev = j;
    else
        c->q_tail = j;
    c->q_head = j;
    c->n_queued++;
    c->dirty = 1;
}

/* ---- outbox --------------------------------------------------------------- */

/* Send now (replies, heartbeats, welcomes, cancels): failures are logged at
 * debug level only, since a peer that went away is the liveness code's job. */
static void send_now(gb_coord_t *c, void *sock, const uint8_t *rid, size_t rid_len,
                     Gb__Envelope *env) {
    if (env->seq == 0) env->seq = ++c->seq;
    if (gb_zmq_send(sock, rid, rid_len, env) != 0) {
        char who[2 * GB_RID_MAX + 1];
        gb_rid_str(rid, rid_len, who, sizeof who);
        gb_debug("cannot send %s to %s: %s", gb_wire_body_name(env->body_case), who,
                 zmq_strerror(errno));
    }
}

/* Send after the turn's commit; on a failed commit send a Reject of
 * fail_code answering env->seq instead (0: nothing). */
static void send_after_commit_or(gb_coord_t *c, void *sock, const uint8_t *rid, size_t rid_len,
                                 Gb__Envelope *env, int fail_code) {
    if (env->seq == 0) env->seq = ++c->seq;
    if (c->n_out == c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap * 2 : 64;
        outmsg_t *o = realloc(c->out, cap * sizeof *o);
        if (!o) {
            gb_error("out of memory queueing a message");
            return;
        }
        c->out = o;
        c->out_cap = cap;
    }
    outmsg_t *m = &c->out[c->n_out];
    m->buf = gb_wire_pack(env, &m->len);
    if (!m->buf) {
        gb_error("out of memory packing a message");
        return;
    }
    m->sock = sock;
    m->rid_len = rid_len < GB_RID_MAX ? rid_len : GB_RID_MAX;
    memcpy(m->rid, rid, m->rid_len);
    m->fail_code = fail_code;
    m->ref_seq = env->seq;
    /* what tells a peer its data is safe waits for the disk */
    m->need_sync = env->body_case == GB__ENVELOPE__BODY_RESULT_ACK || fail_code != 0;
    c->n_out++;
    if (env->body_case == GB__ENVELOPE__BODY_RESULT_ACK) c->n_acks++;
    if (env->body_case == GB__ENVELOPE__BODY_ASSIGN) c->n_assigns++;
}

static void send_after_commit(gb_coord_t *c, void *sock, const uint8_t *rid, size_t rid_len,
                              Gb__Envelope *env) {
    send_after_commit_or(c, sock, rid, rid_len, env, 0);
}

/* A damaged store (SQLite says corrupt): every turn that writes would fail
 * and be retried for ever, each result resent and its failure logged, the
 * sweep never ending. Stop, loudly, with nothing more written to it: the
 * agents keep every result not acknowledged. */
static void store_damaged(gb_coord_t *c) {
    if (c->fatal || !gb_store_damaged(c->store)) return;
    gb_error("store %s is damaged (%s): stopping. Nothing more is written to it; the agents keep "
             "the results it did not acknowledge. Keep a copy of it (and its -wal), then try "
             "`sqlite3 %s .recover`, or start on a new --db",
             c->cfg.db_path, gb_store_errmsg(c->store), c->cfg.db_path);
    c->fatal = 1;
}

/* A store call of this turn failed: log it; flush() rolls the turn back. */
static void store_err(gb_coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void store_err(gb_coord_t *c, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!c->store_failed) gb_error("store: %s: %s", what, gb_store_errmsg(c->store));
    c->store_failed = 1;
    store_damaged(c);
}

/* Log, once the turn is committed, that a job or a sweep ended (an info
 * line): a turn that is rolled back did not end it, and the line would tell
 * a reader of the log that it ended twice. */
static void log_ending(gb_coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_ending(gb_coord_t *c, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c->n_endings == c->endings_cap) {
        size_t cap = c->endings_cap ? c->endings_cap * 2 : 64;
        char **v = realloc(c->endings, cap * sizeof *v);
        if (!v) {
            gb_info("%s", line); /* out of memory: at once rather than never */
            return;
        }
        c->endings = v;
        c->endings_cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) {
        gb_info("%s", line);
        return;
    }
    c->endings[c->n_endings++] = copy;
}

/* The turn's ending lines: printed (committed), or dropped (rolled back). */
static void endings_done(gb_coord_t *c, int committed) {
    for (size_t i = 0; i < c->n_endings; i++) {
        if (committed)
            gb_info("%s", c->endings[i]);
        else
            gb_debug("not committed (rolled back): %s", c->endings[i]);
        free(c->endings[i]);
    }
    c->n_endings = 0;
}

/* A Reject to the sender and a log line; a peer that makes the coordinator
 * refuse thousands of messages a second gets REJECT_LOG_PER_S lines a
 * second and a count of the rest. */
static void reject(gb_coord_t *c, void *sock, const uint8_t *rid, size_t rid_len, int code,
                   uint64_t ref_seq, const char *what, const char *reason) {
    char who[2 * GB_RID_MAX + 1];
    gb_rid_str(rid, rid_len, who, sizeof who);
    int64_t now = gb_mono_ms();
    if (now - c->reject_window_ms >= 1000) {
        if (c->rejects_suppressed)
            gb_warn("%lu more rejected message(s) not logged", c->rejects_suppressed);
        c->reject_window_ms = now;
        c->rejects_logged = 0;
        c->rejects_suppressed = 0;
    }
    if (c->rejects_logged < REJECT_LOG_PER_S) {
        c->rejects_logged++;
        /* the peer's address and key name, when the message being handled
         * has them (a refusal is then traceable to a machine or a person) */
        char peer[200] = "";
        if (c->cur_msg) {
            const char *addr = zmq_msg_gets(c->cur_msg, "Peer-Address");
            const char *key = c->auth ? zmq_msg_gets(c->cur_msg, "User-Id") : NULL;
            const char *name = key ? gb_auth_name(c->auth, key) : "";
            gb_fmt(peer, sizeof peer, " (%s%s%s%s)", addr ? addr : "?", key ? ", key " : "",
                   key ? (name[0] ? name : key) : "", "");
        }
        /* a spec the user got wrong is answered to the user (and `gpubench
         * run` prints it): the operator's log has it at info, not warn */
        int users_own = code == GB__REJECT_CODE__REJECT_BAD_SPEC ||
                        code == GB__REJECT_CODE__REJECT_UNSATISFIABLE ||
                        code == GB__REJECT_CODE__REJECT_NOT_FOUND;
        gb_log(c->reject_quiet ? GB_LOG_DEBUG
               : users_own     ? GB_LOG_INFO
                               : GB_LOG_WARN,
               "rejected %s from %s%s: %s: %s%s", what, who, peer, gb_wire_reject_name(code),
               reason,
               code == GB__REJECT_CODE__REJECT_LIMIT && !c->reject_quiet
                   ? " (this peer's next refusals within 30 s are logged at debug level)"
                   : "");
    } else {
        c->rejects_suppressed++;
    }
    Gb__Reject rej = GB__REJECT__INIT;
    rej.code = (Gb__RejectCode)code;
    rej.reason = (char *)reason;
    rej.ref_seq = ref_seq;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = ref_seq;
    env.body_case = GB__ENVELOPE__BODY_REJECT;
    env.reject = &rej;
    send_now(c, sock, rid, rid_len, &env);
}

/* ---- agents --------------------------------------------------------------- */

static cagent_t *agent_get(gb_coord_t *c, const char *id) {
    return gb_map_get(c->agents, id, strlen(id));
}

static cagent_t *agent_add(gb_coord_t *c, const char *id) {
    cagent_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    gb_copy(a->id, sizeof a->id, id);
    a->slots = 1;
    a->rendezvous = -1;
    a->state = A_DISCONNECTED;
    if (c->n_agents == c->agent_cap) {
        size_t cap = c->agent_cap ? c->agent_cap * 2 : 16;
        cagent_t **v = realloc(c->agent_list, cap * sizeof *v);
        if (!v) {
            free(a);
            return NULL;
        }
        c->agent_list = v;
        c->agent_cap = cap;
    }
    if (gb_map_put(c->agents, a->id, strlen(a->id), a) != 0) {
        free(a);
        return NULL;
    }
    c->agent_list[c->n_agents++] = a;
    return a;
}

/* Another key spoke with agent a's id: its connection now holds a's routing
 * id (ZMQ_ROUTER_HANDOVER), so a's own messages may not reach us until a
 * reconnects, which it does once it finds us silent. Until then a gets the
 * longer window a restarted agent gets, so that one denied message cannot
 * make it lost and cost it its running jobs. */
static int64_t restart_grace_ms(const gb_coord_t *c);
static void agent_claimed(gb_coord_t *c, cagent_t *a, const char *key) {
    int64_t now = gb_mono_ms();
    /* one grace per contact with the real agent: a claimer that keeps
     * sending cannot keep a dead agent's jobs from being found lost */
    if (a->claimed_ms && a->last_heard_ms <= a->claimed_ms) return;
    if (now - a->claimed_ms > 5000)
        gb_warn("a peer with key %s spoke as agent %s (%s), registered with key %s: the agent "
                "keeps its jobs for %" PRId64 " ms while it reconnects",
                gb_auth_name(c->auth, key)[0] ? gb_auth_name(c->auth, key) : key, a->id, a->name,
                gb_auth_name(c->auth, a->key)[0] ? gb_auth_name(c->auth, a->key) : a->key,
                restart_grace_ms(c));
    a->claimed_ms = now;
}

static void agent_drop_job(cagent_t *a, cjob_t *j) {
    for (int i = 0; i < a->n_running; i++)
        if (a->running[i] == j) {
            a->running[i] = a->running[--a->n_running];
            return;
        }
}

static void agent_set_state(gb_coord_t *c, cagent_t *a, int state) {
    if (a->state == state) return;
    a->state = state;
    /* last_seen: when we last heard from it, not now */
    char seen[32];
    gb_iso8601(gb_wall_ms() - (gb_mono_ms() - a->last_heard_ms), seen, sizeof seen);
    if (a->last_heard_ms > c->started_ms) gb_copy(a->last_seen, sizeof a->last_seen, seen);
    if (gb_store_begin(c->store) != 0 ||
        gb_store_node_state(c->store, a->id, agent_state_names[state], a->last_seen) != 0)
        store_err(c, "node %s state", a->name);
}

/* gb_nvlink_sets over the links of a Hello (pb) or of a stored inventory
 * (js: objects with gpu_a, gpu_b, nvlink_lanes). */
static uint64_t nvlink_sets_of(size_t n, int n_gpus, Gb__Link *const *pb, const cJSON *js) {
    if (n > 4096) n = 4096;
    int *a = calloc(3 * (n ? n : 1), sizeof *a), *b = a + n, *lanes = a + 2 * n;
    if (!a) return 0;
    const cJSON *l = js ? js->child : NULL;
    for (size_t i = 0; i < n; i++) {
        if (pb) {
            a[i] = (int)pb[i]->gpu_a;
            b[i] = (int)pb[i]->gpu_b;
            lanes[i] = (int)pb[i]->nvlink_lanes;
        } else if (l) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(l, "gpu_a"),
                        *y = cJSON_GetObjectItemCaseSensitive(l, "gpu_b"),
                        *z = cJSON_GetObjectItemCaseSensitive(l, "nvlink_lanes");
            a[i] = cJSON_IsNumber(x) ? x->valueint : -1;
            b[i] = cJSON_IsNumber(y) ? y->valueint : -1;
            lanes[i] = cJSON_IsNumber(z) ? z->valueint : 0;
            l = l->next;
        }
    }
    uint64_t sets = gb_nvlink_sets(n_gpus, a, b, lanes, n);
    free(a);
    return sets;
}

static void agent_caps(const cagent_t *a, gb_node_caps_t *caps) {
    caps->name = a->name;
    caps->gpu_model = a->gpu_model;
    caps->labels = a->labels;
    caps->kinds = a->kinds;
    caps->cpu_precisions = a->cpu_precisions;
    caps->n_gpus = a->n_gpus;
    caps->cpu_cores = a->cpu_cores;
    caps->has_nvlink = a->has_nvlink;
    caps->nvlink_sets = a->nvlink_sets;
    caps->nvlink_known = a->nvlink_known;
}

/* What placement looks at, or the rendezvous, differs between two states
 * of an agent. */
static int caps_changed(const cagent_t *x, const cagent_t *y) {
    return strcmp(x->name, y->name) != 0 || strcmp(x->gpu_model, y->gpu_model) != 0 ||
           strcmp(x->labels, y->labels) != 0 || strcmp(x->kinds, y->kinds) != 0 ||
           strcmp(x->cpu_precisions, y->cpu_precisions) != 0 || x->n_gpus != y->n_gpus ||
           x->cpu_cores != y->cpu_cores || x->has_nvlink != y->has_nvlink ||
           x->nvlink_sets != y->nvlink_sets || x->nvlink_known != y->nvlink_known ||
           (x->rendezvous && !y->rendezvous); /* not stored: 0 after a restart */
}

static int satisfiable(gb_coord_t *c, const gb_jobdef_t *job, char *why, size_t whylen);
static void job_finish(gb_coord_t *c, cjob_t *j, const char *state, const char *error);

/* Agent a registered again able to run less than it was (was): a queued
 * job it alone could run waited for ever, its sweep's `wait` with it (the
 * same spec submitted again was refused as no node can run it, and `nodes
 * --forget` refuses a connected node). Such jobs fail, saying why, as
 * after `nodes --forget`. Only jobs the node fitted before are looked at
 * (and every multi-node one): a Hello that changes nothing costs nothing. */
static void requeue_check_caps(gb_coord_t *c, const cagent_t *was, cagent_t *a) {
    gb_node_caps_t before;
    agent_caps(was, &before);
    size_t failed = 0;
    for (cjob_t *j = c->q_head, *next; j; j = next) {
        next = j->next;
        char backend[8], why[700], err[1000];
        if (j->def.n_nodes <= 1 && !gb_place_fits(&before, &j->def, backend, why, sizeof why))
            continue;
        if (satisfiable(c, &j->def, why, sizeof why)) continue;
        gb_fmt(err, sizeof err,
               "no known node can run it since node %s registered again able to run less "
               "(its labels, GPUs, cores or kinds changed): %s",
               a->name, why);
        job_finish(c, j, "failed", err);
        failed++;
    }
    if (failed)
        gb_warn("agent %s registered again able to run less: %zu queued job(s) no node can run "
                "now failed",
                a->name, failed);
}

/* ---- sweeps and job endings ----------------------------------------------- */

static void sweep_job_ended(gb_coord_t *c, uint64_t sweep_id, const char *state) {
    csweep_t *s = gb_map_get_u64(c->sweeps, sweep_id);
    if (!s) return;
    if (strcmp(state, "failed") == 0) s->failed++;
    if (strcmp(state, "cancelled") == 0) s->cancelled++;
    if (s->open > 0) s->open--;
    if (s->open > 0) return;
    const char *final = s->failed ? "failed" : s->cancelled ? "cancelled" : "done";
    char now[32];
    now_iso(now, sizeof now);
    if (gb_store_begin(c->store) != 0 || gb_store_sweep_finish(c->store, sweep_id, final, now) != 0)
        store_err(c, "finishing sweep %" PRIu64, sweep_id);
    log_ending(c, "sweep %" PRIu64 " %s", sweep_id, final);
    gb_map_del_u64(c->sweeps, sweep_id);
    free(s);
}

/* Forget a job that reached a terminal state (its rows are written). */
static void job_forget(gb_coord_t *c, cjob_t *j, const char *state) {
    if (j->state == J_QUEUED) q_remove(c, j);
    if (j->agent) {
        agent_drop_job(j->agent, j);
        c->dirty = 1;
    }
    if (j->gang) gang_release(c, j);
    gb_map_del_u64(c->jobs, j->id);
    sweep_job_ended(c, j->sweep_id, state);
    free(j->cancel_why);
    free(j);
}

/* End a job outside the result path: rows and memory at once. */
/* quiet: the line at debug level (a cancel's queued jobs: one line for all
 * of them, not 10,000) */
static void job_finish_ex(gb_coord_t *c, cjob_t *j, const char *state, const char *error,
                          int quiet) {
    char now[32];
    now_iso(now, sizeof now);
    if (gb_store_begin(c->store) != 0 ||
        gb_store_job_finish(c->store, j->id, state, error, now) != 0)
        store_err(c, "finishing job %" PRIu64, j->id);
    if (quiet)
        gb_debug("job %" PRIu64 " %s%s%s", j->id, state, error ? ": " : "", error ? error : "");
    else
        log_ending(c, "job %" PRIu64 " %s%s%s", j->id, state, error ? ": " : "",
                   error ? error : "");
    job_forget(c, j, state);
}

static void job_finish(gb_coord_t *c, cjob_t *j, const char *state, const char *error) {
    job_finish_ex(c, j, state, error, 0);
}

/* The attempt of j ended as lost (its rows are written, no agent holds
 * it): re-queue with attempt + 1, or end the job. */
static void attempt_retry(gb_coord_t *c, cjob_t *j, const char *reason, int counts) {
    c->dirty = 1;
    if (j->cancel_requested) {
        job_finish(c, j, "cancelled", cancel_why(j));
        return;
    }
    if (!counts) j->refused++;
    if ((int)j->attempt - j->refused >= j->max_attempts || j->attempt >= GB_WIRE_ATTEMPT_MAX) {
        char err[600];
        gb_fmt(err, sizeof err, "gave up after %d attempt(s); last: %s",
               (int)j->attempt - j->refused, reason);
        job_finish(c, j, "failed", err);
        return;
    }
    /* no known node can run it any more (its node came back able to run
     * less, and its attempt was lost with that): it waited queued for
     * ever */
    char why[700];
    if (!satisfiable(c, &j->def, why, sizeof why)) {
        char err[1200];
        gb_fmt(err, sizeof err, "%s; and no known node can run it now: %s", reason, why);
        job_finish(c, j, "failed", err);
        return;
    }
    if (gb_store_job_requeue(c->store, j->id, j->refused) != 0)
        store_err(c, "re-queueing job %" PRIu64, j->id);
    j->state = J_QUEUED;
    j->started = 0;
    q_push_front(c, j);
}

/* The running attempt of j is gone (agent lost, restarted without it, never
 * started it, refused it): re-queue with attempt + 1, or end the job. A
 * multi-node attempt first stops its other ranks (gang_attempt_lost). by:
 * the agent the reason is about, NULL when it is about none (a restart). */
static void attempt_lost_ex(gb_coord_t *c, cjob_t *j, const char *reason, int counts,
                            const cagent_t *by) {
    if (j->gang) {
        gang_attempt_lost(c, j, reason, counts, by);
        return;
    }
    char now[32];
    now_iso(now, sizeof now);
    if (gb_store_begin(c->store) != 0 ||
        gb_store_attempt_end(c->store, j->id, j->attempt, "lost", reason, now) != 0)
        store_err(c, "ending attempt %u of job %" PRIu64, j->attempt, j->id);
    gb_warn("job %" PRIu64 " attempt %u lost: %s", j->id, j->attempt, reason);
    if (j->agent) agent_drop_job(j->agent, j);
    j->agent = NULL;
    attempt_retry(c, j, reason, counts);
}

static void attempt_lost(gb_coord_t *c, cjob_t *j, const char *reason) {
    attempt_lost_ex(c, j, reason, 1, NULL);
}

/* ---- placement ------------------------------------------------------------ */

static void send_gang_fields(const cjob_t *j, int rank, Gb__JobAssign *as);

/* The JobAssign of j's current attempt to agent a, after the commit: its
 * parameters with the backend placement chose and, for rank >= 0 of a
 * multi-node job, the rank fields. */
static void send_assign(gb_coord_t *c, cjob_t *j, cagent_t *a, int rank) {
    gb_jobdef_t placed = j->def;
    gb_copy(placed.backend, sizeof placed.backend, j->backend);
    char *params = gb_jobdef_to_json(&placed);
    if (!params) {
        gb_error("out of memory assigning job %" PRIu64, j->id);
        return; /* the start timeout (rendezvous deadline) will re-queue it */
    }
    Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
    as.job_id = j->id;
    as.attempt = j->attempt;
    as.sweep_id = j->sweep_id;
    as.kind = j->def.kind;
    as.params_json = params;
    as.timeout_s = (uint32_t)j->def.timeout_s;
    if (rank >= 0) send_gang_fields(j, rank, &as);
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_ASSIGN;
    env.assign = &as;
    send_after_commit(c, c->agents_sock, (const uint8_t *)a->id, strlen(a->id), &env);
    free(params);
}

static void assign(gb_coord_t *c, cjob_t *j, cagent_t *a, const char *backend) {
    char now[32];
    now_iso(now, sizeof now);
    uint32_t attempt = j->attempt + 1;
    if (gb_store_begin(c->store) != 0 ||
        gb_store_job_assign(c->store, j->id, attempt, a->id, backend, now) != 0) {
        store_err(c, "assigning job %" PRIu64, j->id);
        return;
    }
    q_remove(c, j);
    j->state = J_RUNNING;
    j->attempt = attempt;
    j->agent = a;
    j->started = 0;
    j->missing = 0;
    j->assigned_ms = gb_mono_ms();
    gb_copy(j->backend, sizeof j->backend, backend);
    a->running[a->n_running++] = j;
    send_assign(c, j, a, -1);
    gb_info("job %" PRIu64 " attempt %u -> %s (%s)", j->id, attempt, a->name, backend);
}

/* Does the agent run a rank of a multi-node job? Nothing else goes beside
 * one: it would measure both (docs/scaling.md). */
static int runs_rank(const cagent_t *a) {
    for (int k = 0; k < a->n_running; k++)
        if (is_multi(a->running[k])) return 1;
    return 0;
}

/* What its heartbeat says about starting workers: a node that cannot (its
 * disk full, no processes left) is offered nothing until it says it can
 * again; each change is logged once. */
static void agent_unable(gb_coord_t *c, cagent_t *a, const char *unable) {
    const char *u = unable ? unable : "";
    if (!*u && !a->unable[0]) return;
    if (!*u) {
        gb_info("agent %s tries to run jobs again (it could not: %s)", a->name, a->unable);
        a->unable[0] = '\0';
        c->dirty = 1;
        return;
    }
    if (!a->unable[0])
        gb_warn("agent %s cannot run jobs now: %s; it is offered none until it says it can",
                a->name, u);
    gb_copy(a->unable, sizeof a->unable, u);
}

static void dispatch(gb_coord_t *c) {
    if (!c->dirty || !c->q_head) return;
    if (c->store_retry_ms && gb_mono_ms() < c->store_retry_ms) return; /* after a failure */
    c->dirty = 0;
    gang_dispatch(c); /* multi-node jobs first: they need several idle nodes at once */
    for (size_t i = 0; i < c->n_agents && c->q_head; i++) {
        cagent_t *a = c->agent_list[i];
        if (a->state != A_CONNECTED || runs_rank(a) || a->unable[0]) continue;
        gb_node_caps_t caps;
        agent_caps(a, &caps);
        for (cjob_t *j = c->q_head, *next;
             j && a->n_running < a->slots && a->reported_busy < a->slots; j = next) {
            next = j->next;
            char backend[8], why[256];
            if (j == a->reserved_for) break; /* what comes after it is newer */
            if (is_multi(j) || j->sweep_id < c->place_min_sweep) continue;
            if (gb_place_fits(&caps, &j->def, backend, why, sizeof why)) assign(c, j, a, backend);
        }
    }
    for (size_t i = 0; i < c->n_agents; i++)
        c->agent_list[i]->reserved_for = NULL; /* a pass's own: the job may end before the next */
}

static void flush(gb_coord_t *c);

/* ---- agent messages ------------------------------------------------------- */

static char *inventory_json(const Gb__Inventory *inv) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "hostname", inv->hostname);
    cJSON_AddStringToObject(o, "cpu_model", inv->cpu_model);
    cJSON_AddNumberToObject(o, "cpu_cores", inv->cpu_cores);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)inv->memory_bytes);
    cJSON_AddStringToObject(o, "os", inv->os);
    cJSON_AddStringToObject(o, "kernel", inv->kernel);
    cJSON_AddStringToObject(o, "driver_version", inv->driver_version);
    cJSON_AddStringToObject(o, "cuda_driver_version", inv->cuda_driver_version);
    cJSON_AddStringToObject(o, "nvml_error", inv->nvml_error);
    cJSON_AddStringToObject(o, "gpubench_version", inv->gpubench_version);
    cJSON *kinds = cJSON_AddArrayToObject(o, "kinds");
    for (size_t i = 0; kinds && i < inv->n_kinds; i++)
        cJSON_AddItemToArray(kinds, cJSON_CreateString(inv->kinds[i]));
    if (inv->n_cpu_precisions) {
        cJSON *pr = cJSON_AddArrayToObject(o, "cpu_precisions");
        for (size_t i = 0; pr && i < inv->n_cpu_precisions; i++)
            cJSON_AddItemToArray(pr, cJSON_CreateString(inv->cpu_precisions[i]));
    }
    cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
    for (size_t i = 0; gpus && i < inv->n_gpus; i++) {
        const Gb__Gpu *g = inv->gpus[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddNumberToObject(x, "index", g->index);
        cJSON_AddStringToObject(x, "name", g->name);
        cJSON_AddStringToObject(x, "uuid", g->uuid);
        cJSON_AddNumberToObject(x, "memory_bytes", (double)g->memory_bytes);
        cJSON_AddNumberToObject(x, "sm_count", g->sm_count);
        cJSON_AddNumberToObject(x, "cc_major", g->cc_major);
        cJSON_AddNumberToObject(x, "cc_minor", g->cc_minor);
        cJSON_AddNumberToObject(x, "pcie_gen", g->pcie_gen);
        cJSON_AddNumberToObject(x, "pcie_width", g->pcie_width);
        if (g->power_limit_mw) /* unknown: null, as the gpus table has it */
            cJSON_AddNumberToObject(x, "power_limit_w", g->power_limit_mw / 1000.0);
        else
            cJSON_AddNullToObject(x, "power_limit_w");
        cJSON_AddStringToObject(x, "pci_bus_id", g->pci_bus_id);
        cJSON_AddItemToArray(gpus, x);
    }
    cJSON *links = cJSON_AddArrayToObject(o, "links");
    for (size_t i = 0; links && i < inv->n_links; i++) {
        const Gb__Link *l = inv->links[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddNumberToObject(x, "gpu_a", l->gpu_a);
        cJSON_AddNumberToObject(x, "gpu_b", l->gpu_b);
        cJSON_AddNumberToObject(x, "nvlink_lanes", l->nvlink_lanes);
        cJSON_AddStringToObject(x, "pcie_path", l->pcie_path);
        cJSON_AddItemToArray(links, x);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static const char *known_pcie_path(const char *p) {
    static const char *const ok[] = {"same_board", "single_switch", "multi_switch", "host_bridge",
                                     "numa_node",  "cross_socket",  "unknown"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(p, ok[i]) == 0) return ok[i];
    return "unknown";
}

/* A ref of another store's job (JobRef.store_id; none from an older
 * agent): an agent lists its spooled results before its first Welcome
 * tells it which store it serves, and its running jobs when its
 * coordinator came back with another store. Never this store's job of
 * that id. */
static int ref_foreign(const gb_coord_t *c, const Gb__JobRef *r) {
    return r->store_id && r->store_id[0] && strcmp(r->store_id, c->store_id) != 0;
}

static int ref_listed(const gb_coord_t *c, Gb__JobRef **refs, size_t n, uint64_t job,
                      uint32_t attempt) {
    for (size_t i = 0; i < n; i++)
        if (refs[i]->job_id == job && refs[i]->attempt == attempt && !ref_foreign(c, refs[i]))
            return 1;
    return 0;
}

/* A job whose last attempt was given up as lost, but not yet re-run, turns
 * out to be alive on agent a (it came back late, or its result did): take
 * that attempt back instead of running the job again. */
static void adopt(gb_coord_t *c, cjob_t *j, cagent_t *a) {
    if (a->n_running >= MAX_SLOTS) return;
    if (gb_store_begin(c->store) != 0 ||
        gb_store_attempt_revive(c->store, j->id, j->attempt, a->id) != 0)
        store_err(c, "reviving job %" PRIu64, j->id);
    q_remove(c, j);
    j->state = J_RUNNING;
    j->agent = a;
    j->started = 1;
    j->assigned_ms = gb_mono_ms();
    a->running[a->n_running++] = j;
    gb_info("job %" PRIu64 " attempt %u is alive on %s after all: kept", j->id, j->attempt,
            a->name);
}

static void adopt_listed(gb_coord_t *c, cagent_t *a, Gb__JobRef **refs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ref_foreign(c, refs[i])) continue;
        cjob_t *j = gb_map_get_u64(c->jobs, refs[i]->job_id);
        /* a multi-node attempt is never taken back: its other ranks stopped */
        if (j && !is_multi(j) && j->state == J_QUEUED && j->attempt == refs[i]->attempt &&
            j->attempt > 0) {
            char att_agent[GB_WIRE_ID_MAX + 1], att_state[16];
            if (gb_store_attempt_get(c->store, j->id, j->attempt, att_agent, sizeof att_agent,
                                     att_state, sizeof att_state) == 0 &&
                strcmp(att_agent, a->id) == 0)
                adopt(c, j, a);
        }
    }
}

/* Stop (job, attempt) on an agent, after the turn's commit: what decided
 * it (a cancel request, a job taken from the agent, a multi-node attempt
 * ended) may be rolled back, and a cancel must not overtake the assignment
 * it stops. A rolled-back turn re-derives its cancels from the store. */
static void send_cancel(gb_coord_t *c, const char *agent_id, uint64_t job, uint32_t attempt,
                        const char *why) {
    Gb__Cancel cn = GB__CANCEL__INIT;
    cn.job_id = job;
    cn.attempt = attempt;
    char reason[GB_WIRE_TEXT_MAX + 1];
    gb_copy(reason, sizeof reason, why ? why : "");
    cn.reason = reason;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_CANCEL;
    env.cancel = &cn;
    send_after_commit(c, c->agents_sock, (const uint8_t *)agent_id, strlen(agent_id), &env);
}

/* j's cancel was requested and its agent a still runs it (a Hello or a
 * Heartbeat lists it): the Cancel goes again, on every Hello (a new
 * connection: what was sent before may never have arrived) and else at
 * most once a lost window. It went once: sent while the agent was not
 * connected (a coordinator restarted, the agent not registered again yet;
 * a connection cut), it was dropped, the worker ran to its end and the job
 * ended `done`. Repeats are harmless: the agent's cancel of a worker being
 * cancelled is a no-op. */
/* Whether a stop last sent at sent_ms (0: never) goes again now: on every
 * Hello, else at most once a lost window (cancel_again, gang_stop_again). */
static int resend_due(const gb_coord_t *c, int64_t sent_ms, int hello) {
    return hello || !sent_ms || gb_mono_ms() - sent_ms >= lost_window_ms(c);
}

static void cancel_again(gb_coord_t *c, cagent_t *a, cjob_t *j, int hello) {
    if (!j->cancel_requested || j->gang || !resend_due(c, j->cancel_sent_ms, hello)) return;
    gb_info("job %" PRIu64 " attempt %u: agent %s still runs it: its cancel sent again", j->id,
            j->attempt, a->name);
    j->cancel_sent_ms = gb_mono_ms();
    send_cancel(c, a->id, j->id, j->attempt, cancel_why(j));
}

/* What agent a lists as running (a Hello's or a Heartbeat's refs) that is
 * not one of its attempts (given up and run elsewhere, ended, another
 * store's) is stopped: on every Hello, and again at most once a lost window
 * while its heartbeats list it. Only a Hello did it: a Hello whose turn was
 * rolled back (a commit failed: a full disk) lost the Cancel with it while
 * its registration stood (the Welcome goes at once), and the worker ran to
 * its end, the node kept from other jobs meanwhile. Attempts it may take
 * back are adopted before this (adopt_listed). */
static void stop_stale(gb_coord_t *c, cagent_t *a, Gb__JobRef **refs, size_t n, int hello) {
    cstale_t keep[MAX_SLOTS];
    int n_keep = 0;
    for (size_t i = 0; i < n; i++) {
        int ours = 0, other = ref_foreign(c, refs[i]);
        for (int k = 0; k < a->n_running; k++) /* (a Cancel names no store) */
            if (a->running[k]->id == refs[i]->job_id && a->running[k]->attempt == refs[i]->attempt)
                ours = 1;
        if (ours) continue;
        int64_t sent = 0;
        int known = 0;
        for (int s = 0; s < a->n_stale; s++)
            if (a->stale[s].job == refs[i]->job_id && a->stale[s].attempt == refs[i]->attempt) {
                sent = a->stale[s].sent_ms;
                known = 1;
            }
        if (!hello && !known && n_keep == MAX_SLOTS) continue; /* more than an agent can run */
        if (resend_due(c, sent, hello)) {
            gb_log(hello || !sent ? GB_LOG_WARN : GB_LOG_INFO,
                   "agent %s %sruns job %" PRIu64 " attempt %u that is %s: %s", a->name,
                   hello || !sent ? "" : "still ", refs[i]->job_id, refs[i]->attempt,
                   other ? "another store's" : "no longer its",
                   hello || !sent ? "cancelling" : "its stop sent again");
            send_cancel(c, a->id, refs[i]->job_id, refs[i]->attempt,
                        "stopped: the coordinator no longer runs this attempt here");
            sent = gb_mono_ms();
        }
        if (n_keep < MAX_SLOTS)
            keep[n_keep++] = (cstale_t){refs[i]->job_id, refs[i]->attempt, sent};
    }
    memcpy(a->stale, keep, (size_t)n_keep * sizeof *keep);
    a->n_stale = n_keep;
}

/* The CURVE key a message came with (its connection's ZAP User-Id), or
 * NULL without CURVE. */
static const char *peer_key(gb_coord_t *c, gb_frame_t *f) {
    if (!c->auth) return NULL;
    const char *k = zmq_msg_gets(&f->payload, "User-Id");
    return k && *k ? k : NULL;
}

/* With keys: may the key of the connection f came on still use this
 * endpoint (sock)? A key removed by a reload, or given a role for the other
 * endpoint, keeps its open connections, so each message is checked again; a
 * refused one gets a Reject. */
static int key_still_allowed(gb_coord_t *c, gb_frame_t *f, void *sock, uint64_t seq,
                             const char *what) {
    if (!c->auth) return 1;
    const char *k = peer_key(c, f);
    const char *domain = sock == c->agents_sock ? GB_AUTH_AGENTS : GB_AUTH_CONTROL;
    if (k && gb_auth_allowed_on(c->auth, k, domain)) return 1;
    char why[300];
    if (k && gb_auth_allowed(c->auth, k)) /* listed, with the other endpoint's role */
        gb_auth_why_not(c->auth, k, domain, "the coordinator's --authorized", why, sizeof why);
    else
        gb_fmt(why, sizeof why, "key %s is no longer authorized", k ? k : "(none)");
    reject(c, sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_DENIED, seq, what, why);
    return 0;
}

static void on_hello(gb_coord_t *c, gb_frame_t *f, const Gb__Envelope *env) {
    const Gb__Hello *h = env->hello;
    const Gb__Inventory *inv = h->inventory;
    if (f->rid_len != strlen(h->agent_id) || memcmp(f->rid, h->agent_id, f->rid_len) != 0) {
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_RANGE, env->seq,
               "hello", "the socket routing id must equal hello.agent_id");
        return;
    }
    /* labels: validated and put in canonical form */
    char raw[GB_LABELS_LEN] = "", labels[GB_LABELS_LEN], why[300];
    size_t o = 0;
    for (size_t i = 0; i < h->n_labels; i++) {
        int n = snprintf(raw + o, sizeof raw - o, "%s%s=%s", o ? "," : "", h->labels[i]->key,
                         h->labels[i]->value);
        if (n < 0 || (size_t)n >= sizeof raw - o) {
            reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_RANGE, env->seq,
                   "hello", "labels too long");
            return;
        }
        o += (size_t)n;
    }
    if (gb_labels_canon(raw, labels, sizeof labels, why, sizeof why) != 0) {
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_RANGE, env->seq,
               "hello", why);
        return;
    }
    cagent_t *a = agent_get(c, h->agent_id);
    int known = a != NULL;
    const char *key = peer_key(c, f);
    if (a && key && a->key[0] && strcmp(a->key, key) != 0 && c->auth &&
        !gb_auth_allowed_on(c->auth, a->key, GB_AUTH_AGENTS)) {
        /* the key it was pinned to was revoked, or may no longer be an
         * agent's (role=control): the id is free again */
        gb_info("agent %s (%s): its key %s is no longer authorized%s; key %s registers it now",
                a->id, h->name, a->key,
                gb_auth_allowed(c->auth, a->key) ? " on the agents endpoint (role=control)" : "",
                gb_auth_name(c->auth, key)[0] ? gb_auth_name(c->auth, key) : key);
        a->key[0] = '\0';
    } else if (a && key && !a->key[0] && !a->forgotten) {
        /* a node known only without keys (the fleet moved onto keys on
         * its store): whichever listed key comes first takes its id, and
         * ids are shown to every listed key: said, not only "is back" */
        gb_warn("agent %s (node %s) had registered only without a key: key %s pins its id now "
                "(if that is not the node's own key, revoke it: docs/security.md)",
                a->id, a->name, gb_auth_name(c->auth, key)[0] ? gb_auth_name(c->auth, key) : key);
    }
    if (a && key && a->key[0] && strcmp(a->key, key) != 0) {
        char why[200];
        const char *nm = gb_auth_name(c->auth, a->key);
        gb_fmt(why, sizeof why, "agent id %s is registered with another key (%s)", a->id,
               nm[0] ? nm : a->key);
        agent_claimed(c, a, key);
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_DENIED, env->seq,
               "hello", why);
        return;
    }
    if ((!a || a->forgotten) && c->n_agents - c->n_forgotten >= c->cfg.max_agents) {
        char why[200];
        gb_fmt(why, sizeof why,
               "the coordinator already knows %zu agents, its limit (--max-agents %zu)",
               c->n_agents - c->n_forgotten, c->cfg.max_agents);
        /* an agent over the cap asks again and again (a slot may be freed):
         * one line per agent a while, the rest at debug level */
        char rk[GB_WIRE_ID_MAX + 16];
        int64_t retry;
        gb_fmt(rk, sizeof rk, "limit:%s", h->agent_id);
        c->reject_quiet =
            c->refusal_log && !gb_rate_take(c->refusal_log, rk, strlen(rk), gb_mono_ms(), &retry);
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_LIMIT, env->seq,
               "hello", why);
        c->reject_quiet = 0;
        return;
    }
    if (!a && !(a = agent_add(c, h->agent_id))) {
        gb_error("out of memory registering agent %s", h->agent_id);
        return;
    }
    if (a->forgotten) { /* it came back: known again (the upsert below clears the store's mark) */
        gb_info("agent %s (%s), forgotten, registers again", a->id, h->name);
        a->forgotten = 0;
        c->n_forgotten--;
    }
    /* A Hello under another name for an id that is connected and heard
     * from within the lost window: two agents share one id (a state dir
     * copied with a VM image). They take the id's connection from each
     * other and every job runs twice; nothing said so. */
    if (a->state == A_CONNECTED && a->name[0] && strcmp(a->name, h->name) != 0 &&
        gb_mono_ms() - a->last_heard_ms < lost_window_ms(c) &&
        (!a->dup_warned_ms || gb_mono_ms() - a->dup_warned_ms >= 30000)) {
        gb_warn(
            "agent id %s: a Hello from '%s' while '%s' is connected: two agents share one "
            "id (a copied --state-dir?), unless it was just renamed; give each its own --state-dir",
            a->id, h->name, a->name);
        a->dup_warned_ms = gb_mono_ms();
    }
    /* what it could run before (a node known, here or from the store):
     * queued jobs only it could run are looked at again below */
    cagent_t *before = a->name[0] ? malloc(sizeof *before) : NULL;
    if (before) *before = *a;
    gb_copy(a->name, sizeof a->name, h->name);
    gb_copy(a->cpu_model, sizeof a->cpu_model, inv->cpu_model);
    gb_copy(a->gpu_model, sizeof a->gpu_model, inv->n_gpus ? inv->gpus[0]->name : inv->cpu_model);
    gb_copy(a->labels, sizeof a->labels, labels);
    a->kinds[0] = '\0';
    for (size_t i = 0, ko = 0; i < inv->n_kinds; i++) {
        int n = snprintf(a->kinds + ko, sizeof a->kinds - ko, "%s%s", ko ? "," : "", inv->kinds[i]);
        if (n < 0 || (size_t)n >= sizeof a->kinds - ko) break;
        ko += (size_t)n;
    }
    a->cpu_precisions[0] = '\0';
    for (size_t i = 0, po = 0; i < inv->n_cpu_precisions; i++) {
        int n = snprintf(a->cpu_precisions + po, sizeof a->cpu_precisions - po, "%s%s",
                         po ? "," : "", inv->cpu_precisions[i]);
        if (n < 0 || (size_t)n >= sizeof a->cpu_precisions - po) break;
        po += (size_t)n;
    }
    a->n_gpus = (int)inv->n_gpus;
    a->cpu_cores = (int)inv->cpu_cores;
    a->slots = h->slots ? (int)h->slots : 1;
    a->rendezvous = (int)h->rendezvous;
    a->has_nvlink = 0;
    for (size_t i = 0; i < inv->n_links; i++)
        if (inv->links[i]->nvlink_lanes > 0) a->has_nvlink = 1;
    a->nvlink_sets = nvlink_sets_of(inv->n_links, a->n_gpus, inv->links, NULL);
    a->nvlink_known = 1;

    /* store the node with its GPUs and links */
    char now[32];
    now_iso(now, sizeof now);
    gb_store_gpu_t *gpus = calloc(inv->n_gpus ? inv->n_gpus : 1, sizeof *gpus);
    gb_store_link_t *links = calloc(inv->n_links ? inv->n_links : 1, sizeof *links);
    char *inv_json = inventory_json(inv);
    uint64_t hh = 1469598103934665603ull;
    const char *parts[] = {inv_json ? inv_json : "", a->name, a->labels, key ? key : ""};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
        for (const unsigned char *q = (const unsigned char *)parts[p];; q++) {
            hh = (hh ^ *q) * 1099511628211ull; /* the NUL too: a separator */
            if (!*q) break;
        }
    hh = (hh ^ (uint64_t)a->slots) * 1099511628211ull;
    /* the same Hello again from a connected agent (a peer repeating it, or
     * one that re-registers without change): nothing new to write */
    int same = a->state == A_CONNECTED && a->hello_hash == hh && !c->store_failed;
    if (!gpus || !links || !inv_json) {
        gb_error("out of memory registering agent %s", a->id);
    } else if (same) {
        gb_debug("agent %s: the same inventory again, not written", a->id);
    } else {
        for (size_t i = 0; i < inv->n_gpus; i++) {
            const Gb__Gpu *g = inv->gpus[i];
            gpus[i] = (gb_store_gpu_t){g->index,
                                       g->name,
                                       g->uuid,
                                       g->pci_bus_id,
                                       g->memory_bytes,
                                       g->sm_count,
                                       g->cc_major,
                                       g->cc_minor,
                                       g->pcie_gen,
                                       g->pcie_width,
                                       g->power_limit_mw ? g->power_limit_mw / 1000.0 : -1};
        }
        for (size_t i = 0; i < inv->n_links; i++)
            links[i] = (gb_store_link_t){inv->links[i]->gpu_a, inv->links[i]->gpu_b,
                                         inv->links[i]->nvlink_lanes,
                                         known_pcie_path(inv->links[i]->pcie_path)};
        gb_store_node_t n = {.agent_id = a->id,
                             .name = a->name,
                             .state = "connected",
                             .cpu_model = inv->cpu_model,
                             .os = inv->os,
                             .kernel = inv->kernel,
                             .driver_version = inv->driver_version,
                             .cuda_driver_version = inv->cuda_driver_version,
                             .gpu_model = a->gpu_model,
                             .labels = a->labels,
                             .kinds = a->kinds,
                             .inventory_json = inv_json,
                             .agent_key = key ? key : "",
                             .cpu_cores = a->cpu_cores,
                             .n_gpus = a->n_gpus,
                             .slots = a->slots,
                             .has_nvlink = a->has_nvlink,
                             .memory_bytes = inv->memory_bytes,
                             .gpus = gpus,
                             .links = links,
                             .n_links = inv->n_links};
        if (gb_store_begin(c->store) != 0 || gb_store_node_upsert(c->store, &n, now) != 0)
            store_err(c, "node %s", a->name);
        else
            a->hello_hash = hh;
    }
    free(gpus);
    free(links);
    free(inv_json);
    if (before && caps_changed(before, a)) requeue_check_caps(c, before, a);
    free(before);
    int was = a->state;
    if (key) gb_copy(a->key, sizeof a->key, key); /* pinned for this coordinator's life */
    a->state = A_CONNECTED;
    a->reported_busy = (int)h->n_running;
    a->unable[0] = '\0'; /* a restarted agent tries again; a sick one says so again */
    a->last_heard_ms = gb_mono_ms();
    a->seen_written_ms = a->last_heard_ms;
    gb_copy(a->last_seen, sizeof a->last_seen, now);

    /* reconcile: what we think it runs against what it says it runs */
    for (int i = 0; i < a->n_running;) {
        cjob_t *j = a->running[i];
        if (j->gang) { /* a rank of a multi-node job: gang_hello, below */
            i++;
            continue;
        }
        if (ref_listed(c, h->running, h->n_running, j->id, j->attempt)) {
            if (!j->started) {
                j->started = 1;
                if (gb_store_begin(c->store) != 0 ||
                    gb_store_attempt_started(c->store, j->id, j->attempt, now) != 0)
                    store_err(c, "job %" PRIu64 " started", j->id);
            }
            cancel_again(c, a, j, 1);
            i++;
        } else if (ref_listed(c, h->spooled, h->n_spooled, j->id, j->attempt)) {
            i++; /* its result is on the way */
        } else if (!j->started && j->cancel_requested) {
            /* cancelled before it started, and the agent registered without
             * it (its JobAssign and the Cancel both dropped while the
             * connection was made anew): it ends cancelled here. It was
             * sent again, ran, and a job shorter than a lost window ended
             * done. The Cancel goes too, for a JobAssign still on its way */
            gb_info("job %" PRIu64 " attempt %u: agent %s registered without it, and it was "
                    "cancelled: not sent again",
                    j->id, j->attempt, a->name);
            if (gb_store_begin(c->store) != 0 ||
                gb_store_attempt_end(c->store, j->id, j->attempt, "cancelled", cancel_why(j),
                                     now) != 0)
                store_err(c, "ending attempt %u of job %" PRIu64, j->attempt, j->id);
            send_cancel(c, a->id, j->id, j->attempt, cancel_why(j));
            job_finish(c, j, "cancelled", cancel_why(j)); /* removes it from a->running */
        } else if (!j->started) {
            /* it registered without it: the JobAssign went while its
             * connection was being made anew, and the ROUTER dropped it (or
             * it is still on its way: the agent answers a second one
             * "already running"). Sent again, with a fresh window to start
             * (check_liveness loses it otherwise): the attempt was lost, and
             * with --max-attempts 1 the job failed */
            gb_info("job %" PRIu64 " attempt %u: agent %s registered without it: its assignment "
                    "sent again",
                    j->id, j->attempt, a->name);
            send_assign(c, j, a, -1);
            j->assigned_ms = gb_mono_ms();
            i++;
        } else {
            char reason[200];
            gb_fmt(reason, sizeof reason, "agent %s came back without it", a->name);
            attempt_lost(c, j, reason); /* removes it from a->running */
        }
    }
    gang_hello(c, a, h);
    adopt_listed(c, a, h->running, h->n_running);
    adopt_listed(c, a, h->spooled, h->n_spooled);
    stop_stale(c, a, h->running, h->n_running, 1);
    /* Another agent id under the same name: results, v_results and
     * v_scaling name nodes by name, so two machines read as one (a cloned
     * image with one hostname); said at each registration that is not a
     * repeat */
    for (size_t i = 0; !same && i < c->n_agents; i++) {
        const cagent_t *o = c->agent_list[i];
        if (o == a || o->forgotten || strcmp(o->name, a->name) != 0) continue;
        gb_warn("agent %s (%s): agent %s (%s) has the same name: results and the v_* views name "
                "nodes by name, so the two read as one; give one of them another --name (or "
                "`gpubench nodes --forget %s` if that one is gone for good)",
                a->name, a->id, o->name, o->id, o->id);
        break;
    }
    gb_log(same ? GB_LOG_DEBUG : GB_LOG_INFO,
           "agent %s (%s) %s: %d GPU(s), %s, labels '%s', %d slot(s)", a->name, a->id,
           !known               ? "registered"
           : was == A_CONNECTED ? "re-registered"
                                : "is back",
           a->n_gpus, a->gpu_model, a->labels, a->slots);

    Gb__Welcome w = GB__WELCOME__INIT;
    w.heartbeat_ms = (uint32_t)c->cfg.heartbeat_ms;
    w.lost_after = (uint32_t)c->cfg.lost_after;
    w.coordinator_id = c->coord_id;
    w.store_id = c->store_id;
    Gb__Envelope reply = GB__ENVELOPE__INIT;
    reply.seq = env->seq;
    reply.body_case = GB__ENVELOPE__BODY_WELCOME;
    reply.welcome = &w;
    send_now(c, c->agents_sock, f->rid, f->rid_len, &reply);
    c->dirty = 1;
}

static void on_progress(gb_coord_t *c, cagent_t *a, const Gb__Progress *p) {
    cjob_t *j = gb_map_get_u64(c->jobs, p->job_id);
    if (j && j->gang && j->attempt == p->attempt) {
        gang_progress(c, a, j, p);
        return;
    }
    if (!j || j->agent != a || j->attempt != p->attempt) {
        gb_debug("progress for job %" PRIu64 " attempt %u from %s ignored (not its)", p->job_id,
                 p->attempt, a->name);
        return;
    }
    if (p->phase == GB__PHASE__PHASE_STARTED) {
        if (j->started) return;
        j->started = 1;
        char now[32];
        now_iso(now, sizeof now);
        if (gb_store_begin(c->store) != 0 ||
            gb_store_attempt_started(c->store, j->id, j->attempt, now) != 0)
            store_err(c, "job %" PRIu64 " started", j->id);
    } else {
        char reason[GB_WIRE_ERROR_MAX + 64];
        gb_fmt(reason, sizeof reason, "agent %s refused it: %s", a->name, p->message);
        a->reported_busy = a->slots; /* full until its next heartbeat says otherwise */
        attempt_lost_ex(c, j, reason, 0, a);
    }
}

static const char *status_name(Gb__ResultStatus s) {
    switch (s) {
    case GB__RESULT_STATUS__RESULT_OK:
        return "ok";
    case GB__RESULT_STATUS__RESULT_FAILED:
        return "failed";
    case GB__RESULT_STATUS__RESULT_TIMEOUT:
        return "timeout";
    case GB__RESULT_STATUS__RESULT_CRASHED:
        return "crashed";
    default:
        return "cancelled";
    }
}

/* The key a result came under (results.agent_key, key_name): its agent's
 * pinned key, which every message of a connected agent is checked against;
 * "" without keys; NULL with keys where the pin was freed since (a rank's
 * report is stored before its job's result is put together). */
static void result_key(const gb_coord_t *c, const cagent_t *a, gb_store_result_t *sr) {
    if (!c->auth) {
        sr->agent_key = sr->key_name = "";
    } else if (a && a->key[0]) {
        sr->agent_key = a->key;
        sr->key_name = gb_auth_name(c->auth, a->key);
    }
}

/* The stored result's columns from a parsed record (strings point into rec). */
static void result_from_record(gb_store_result_t *sr, const gb_record_t *rec) {
    sr->backend = rec->backend;
    sr->device_model = rec->device_model;
    sr->precision = rec->precision;
    sr->invalid_reason = rec->invalid_reason;
    sr->n_devices = rec->n_devices;
    sr->images_per_sec = rec->images_per_sec;
    sr->step_ms_median = rec->step_ms_median;
    sr->step_ms_p90 = rec->step_ms_p90;
    sr->gflops = rec->gflops;
    sr->valid = rec->valid;
    sr->step_ms = rec->step_ms;
    sr->loss = rec->loss;
    sr->n_samples = rec->n_samples;
    sr->samples_stride = rec->samples_stride;
}

/* Acknowledge a result once the turn is committed (an agent deletes it
 * from its spool on the acknowledgement, so it must be on disk first). */
static void ack_after_commit(gb_coord_t *c, cagent_t *a, const Gb__Result *r) {
    Gb__ResultAck ack = GB__RESULT_ACK__INIT;
    ack.job_id = r->job_id;
    ack.attempt = r->attempt;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RESULT_ACK;
    env.result_ack = &ack;
    send_after_commit(c, c->agents_sock, (const uint8_t *)a->id, strlen(a->id), &env);
}

/* Agent was, which an attempt ran on, is the same node as agent a under
 * another id: the same name, not connected (a node's agent starts again
 * with a new id when its agent_id file was lost while it was down: a tmp
 * cleaner takes the oldest file first) and, with keys, the same key. Its
 * spooled results are that attempt's (they matched no attempt of the new
 * id and were dropped, acknowledged, the job run again). */
static int same_node(const gb_coord_t *c, const cagent_t *was, const cagent_t *a) {
    return was && was != a && !was->forgotten && was->state != A_CONNECTED &&
           strcmp(was->name, a->name) == 0 && (!c->auth || strcmp(was->key, a->key) == 0);
}

static void on_result(gb_coord_t *c, cagent_t *a, const Gb__Result *r) {
    char now[32], att_agent[GB_WIRE_ID_MAX + 1], att_state[16];
    now_iso(now, sizeof now);
    if (r->store_id && r->store_id[0] && strcmp(r->store_id, c->store_id) != 0) {
        /* another store's job of the same id (agents keep such results for
         * their own store; this one sent it anyway): not this job's */
        gb_warn("result for job %" PRIu64 " attempt %u from %s is of store %s, not this one (%s): "
                "dropped",
                r->job_id, r->attempt, a->name, r->store_id, c->store_id);
        if (gb_store_begin(c->store) == 0) ack_after_commit(c, a, r);
        return;
    }
    if (gb_store_begin(c->store) != 0) {
        store_err(c, "result of job %" PRIu64, r->job_id);
        return; /* not acknowledged: resent later */
    }
    cjob_t *j = gb_map_get_u64(c->jobs, r->job_id);
    if ((j ? is_multi(j) : 1) && gang_result(c, a, j, r)) return; /* a rank's result */
    /* The common case, the running attempt of this agent, is known from
     * memory (which matches the store); anything else is looked up. */
    int found = 0;
    if (j && j->state == J_RUNNING && j->agent == a && j->attempt == r->attempt)
        gb_copy(att_agent, sizeof att_agent, a->id);
    else
        found = gb_store_attempt_get(c->store, r->job_id, r->attempt, att_agent, sizeof att_agent,
                                     att_state, sizeof att_state);
    if (found < 0) {
        store_err(c, "result of job %" PRIu64, r->job_id);
        return; /* not acknowledged: resent later */
    }
    /* The attempt's agent, which this result is stored under: the sender,
     * or the agent id it had before (same_node) */
    cagent_t *own = a;
    /* (a job still open and of one node: a multi-node attempt's ranks
     * report through gang_result, and one is never taken back) */
    if (found == 0 && strcmp(att_agent, a->id) != 0 && j && !is_multi(j)) {
        cagent_t *was = agent_get(c, att_agent);
        if (same_node(c, was, a)) {
            gb_info("result for job %" PRIu64 " attempt %u from %s (%s): the attempt ran under its "
                    "agent id before, %s (its state directory's agent_id lost?): taken as that "
                    "one's",
                    r->job_id, r->attempt, a->name, a->id, was->id);
            own = was;
        }
    }
    if (found == 1 || strcmp(att_agent, own->id) != 0) {
        /* Nothing to attach it to (another database, or not this agent's):
         * acknowledge so the agent stops resending, and say so. */
        /* one line per agent a while: a peer sending thousands must not
         * flood the log (the rest at debug level) */
        char rk[GB_WIRE_ID_MAX + 16];
        int64_t retry;
        gb_fmt(rk, sizeof rk, "dropped:%s", a->id);
        gb_log(c->refusal_log && !gb_rate_take(c->refusal_log, rk, strlen(rk), gb_mono_ms(), &retry)
                   ? GB_LOG_DEBUG
                   : GB_LOG_WARN,
               "result for job %" PRIu64 " attempt %u from %s matches no attempt of that agent: "
               "dropped (more from it within %d s are logged at debug level)",
               r->job_id, r->attempt, a->name, GB_AUTH_REPEAT_S);
        ack_after_commit(c, a, r);
        return;
    }
    if (j && !is_multi(j) && j->state == J_QUEUED && j->attempt == r->attempt) adopt(c, j, own);
    int current = j && j->attempt == r->attempt && j->state == J_RUNNING && j->agent == own;
    if (r->outcome_lost) {
        /* The agent lost what the worker reported (its spool entry damaged
         * or removed): the outcome is unknown, not a failure of the job.
         * Nothing is stored as a result; the attempt ends lost and the job
         * runs again while attempts are left (it failed for good before) */
        if (current)
            attempt_lost_ex(c, j, r->error, 1, own); /* may end (free) j */
        else
            gb_info("job %" PRIu64 " attempt %u: %s (the attempt had ended)", r->job_id, r->attempt,
                    r->error);
        ack_after_commit(c, a, r);
        return;
    }
    /* What the record says, when it is one. */
    const char *status = status_name(r->status);
    char error[GB_WIRE_ERROR_MAX + 128] = "";
    gb_copy(error, sizeof error, r->error);
    gb_record_t rec;
    int have_rec = 0;
    char kbuf[16] = "";
    const char *kind = j ? j->def.kind : "";
    if (r->record_json[0]) {
        char why[300];
        if (!j) {
            /* a late result of a finished job: keep the text, check only JSON */
            gb_record_t tmp;
            cJSON *probe = cJSON_Parse(r->record_json);
            const cJSON *k = probe ? cJSON_GetObjectItemCaseSensitive(probe, "kind") : NULL;
            kind = "";
            if (cJSON_IsString(k) && gb_kind_known(k->valuestring)) {
                gb_copy(kbuf, sizeof kbuf, k->valuestring);
                kind = kbuf;
            }
            cJSON_Delete(probe);
            if (kind[0] && gb_record_parse(r->record_json, strlen(r->record_json), kind, &tmp, why,
                                           sizeof why) == 0) {
                rec = tmp;
                have_rec = 1;
            }
        } else if (gb_record_parse(r->record_json, strlen(r->record_json), kind, &rec, why,
                                   sizeof why) == 0) {
            have_rec = 1;
        } else if (r->status == GB__RESULT_STATUS__RESULT_OK) {
            status = "failed";
            gb_fmt(error, sizeof error, "invalid result record: %s", why);
        }
    }
    gb_store_result_t sr = {
        .job_id = r->job_id,
        .attempt = r->attempt,
        .agent_id = own->id,
        .status = status,
        .kind = kind[0] ? kind : "unknown",
        .n_devices = -1,
        .images_per_sec = NAN,
        .step_ms_median = NAN,
        .step_ms_p90 = NAN,
        .gflops = NAN,
        .valid = -1,
        .synthetic = gb_kind_synthetic(kind),
        .error = error[0] ? error : NULL,
        .output_tail = r->output_tail[0] ? r->output_tail : NULL,
        .record = have_rec ? rec.text : NULL,
        .exit_code = r->exit_code,
    };
    char started[32], finished[32];
    if (r->started_at_ms) {
        gb_iso8601((int64_t)r->started_at_ms, started, sizeof started);
        sr.started_at = started;
    }
    if (r->finished_at_ms) {
        gb_iso8601((int64_t)r->finished_at_ms, finished, sizeof finished);
        sr.finished_at = finished;
    }
    if (have_rec) result_from_record(&sr, &rec);
    result_key(c, a, &sr); /* the sender's, also for a result taken as another id's */
    int inserted = 0;
    int rc = gb_store_result_insert(c->store, &sr, now, &inserted);
    if (have_rec) gb_record_free(&rec);
    if (rc != 0) {
        store_err(c, "result of job %" PRIu64 " attempt %u", r->job_id, r->attempt);
        return; /* the turn is rolled back; the agent resends */
    }
    if (!inserted) { /* a resend of a stored result */
        gb_debug("result of job %" PRIu64 " attempt %u already stored", r->job_id, r->attempt);
        ack_after_commit(c, a, r);
        return;
    }
    const char *job_state = NULL;
    const char *att_end;
    if (!current) {
        att_end = "superseded";
        gb_info("late result of job %" PRIu64 " attempt %u kept as superseded", r->job_id,
                r->attempt);
    } else {
        if (strcmp(status, "ok") == 0)
            job_state = "done";
        else if (strcmp(status, "cancelled") == 0)
            job_state = "cancelled";
        else
            job_state = "failed";
        if (j->cancel_requested && strcmp(status, "ok") != 0) job_state = "cancelled";
        att_end = strcmp(status, "ok") == 0          ? "done"
                  : strcmp(status, "cancelled") == 0 ? "cancelled"
                                                     : "failed";
    }
    if (gb_store_attempt_end(c->store, r->job_id, r->attempt, att_end, sr.error, now) != 0 ||
        (job_state && gb_store_job_finish(c->store, r->job_id, job_state,
                                          strcmp(job_state, "done") == 0 ? NULL
                                          : sr.error                     ? sr.error
                                                                         : cancel_why(j),
                                          now) != 0)) {
        store_err(c, "result of job %" PRIu64, r->job_id);
        return;
    }
    if (job_state) {
        log_ending(c, "job %" PRIu64 " %s (attempt %u on %s)", j->id, job_state, j->attempt,
                   a->name);
        job_forget(c, j, job_state); /* its slot is free for this turn's placement */
    }
    ack_after_commit(c, a, r);
}

/* ---- multi-node jobs (issue 5) ---------------------------------------------
 *
 * A job with n_nodes > 1 is placed only when n idle connected agents that
 * speak the rendezvous fit it with one backend (all ranks at once, never a
 * part), rank 0 on the first of them in registration order. gang.c decides
 * what each event means; this section persists it (the ranks table), sends
 * what it asks for, and releases each rank's agent as the rank ends. The
 * job's agent pointer stays NULL: its agents are in gang->agent. */

struct cgang {
    gb_gang_t *g;
    cagent_t **agent;        /* per rank */
    gb_rank_state_t *stored; /* per rank: the state last written to the store */
    unsigned char *worker;   /* per rank: its agent reported the worker started */
    int *missing;            /* per rank: heartbeats in a row that did not mention it */
    int64_t *stop_ms;        /* per rank: its Cancel last sent (monotonic), 0: none */
    int64_t *assigned_ms;    /* per rank: its JobAssign sent (monotonic), 0: not yet */
    int64_t deadline_ms;     /* monotonic: every rank ready by then */
    int64_t start_at_ms;     /* wall clock: the start time sent, 0 before */
    char start_iso[32];
    unsigned tick;       /* gang_check's last pass */
    unsigned stall_pass; /* forgive_stall's last pass */
    /* A rank that failed because a peer went away (its ring or NCCL saw the
     * connection close: its error says so, gb_peer.h) is held, not judged: the peer's agent may be
     * found lost (the attempt is lost, and runs again) or the peer may report a failure of its own
     * (the job fails with that), within a lost window; only then is the held failure the job's
     * (gang_check). */
    int held, held_rank;                  /* ranks held; the first of them */
    unsigned char *held_r;                /* per rank: its report is held */
    char **held_why;                      /* per rank: its reason, "rank R on NODE: ...", for its
                                           * row once the hold ends (NULL: its report's error) */
    int64_t held_until_ms;                /* monotonic */
    char held_reason[GB_GANG_REASON_MAX]; /* the first's */
};

static int is_multi(const cjob_t *j) {
    return j->def.n_nodes > 1;
}

static void gang_free(cgang_t **gp) {
    if (!gp || !*gp) return;
    cgang_t *G = *gp;
    if (G->held_why)
        for (int r = 0; G->g && r < gb_gang_size(G->g); r++)
            free(G->held_why[r]);
    free(G->held_why);
    gb_gang_destroy(&G->g);
    free(G->agent);
    free(G->stored);
    free(G->worker);
    free(G->missing);
    free(G->stop_ms);
    free(G->assigned_ms);
    free(G->held_r);
    free(G);
    *gp = NULL;
}

static int gang_rank_of(const cjob_t *j, const cagent_t *a) {
    for (int r = 0; r < gb_gang_size(j->gang->g); r++)
        if (j->gang->agent[r] == a) return r;
    return -1;
}

/* Off every agent, and freed (job_forget, or before a retry). */
static void gang_release(gb_coord_t *c, cjob_t *j) {
    for (int r = 0; r < gb_gang_size(j->gang->g); r++)
        agent_drop_job(j->gang->agent[r], j);
    c->dirty = 1;
    gang_free(&j->gang);
}

static void send_gang_fields(const cjob_t *j, int rank, Gb__JobAssign *as) {
    size_t len = 0;
    const unsigned char *id = gb_gang_id(j->gang->g, &len);
    as->rank = (uint32_t)rank;
    as->n_nodes = (uint32_t)j->def.n_nodes;
    as->world_size = (uint32_t)(j->def.n_nodes * j->def.gpus);
    if (rank > 0) {
        as->unique_id.data = (uint8_t *)id;
        as->unique_id.len = len;
    }
}

/* Write what changed in the ranks' states; rank `who` (or -1) ended with
 * `error`. A rank that ended frees its agent for other work. */
static void gang_sync(gb_coord_t *c, cjob_t *j, int who, const char *error) {
    cgang_t *G = j->gang;
    char now[32];
    now_iso(now, sizeof now);
    if (gb_store_begin(c->store) != 0) store_err(c, "ranks of job %" PRIu64, j->id);
    for (int r = 0; r < gb_gang_size(G->g); r++) {
        gb_rank_state_t st = gb_gang_state(G->g, r);
        if (st == G->stored[r]) continue;
        const char *when = st == GB_RANK_ASSIGNED  ? "assigned"
                           : st == GB_RANK_READY   ? "ready"
                           : st == GB_RANK_STARTED ? "start"
                                                   : "ended";
        /* a rank held after a peer went away ends with its own reason,
         * though another rank's event ended it */
        const char *e = r == who ? error : gb_rank_ended(st) ? G->held_why[r] : NULL;
        if (gb_ranks_set(c->ranks, j->id, j->attempt, r, gb_rank_state_name(st), when,
                         st == GB_RANK_STARTED ? G->start_iso : now, e) != 0)
            store_err(c, "rank %d of job %" PRIu64, r, j->id);
        G->stored[r] = st;
        if (gb_rank_ended(st)) {
            agent_drop_job(G->agent[r], j);
            c->dirty = 1;
        }
    }
}

static void gang_send_start(gb_coord_t *c, cjob_t *j, cagent_t *a) {
    Gb__RankStart st = GB__RANK_START__INIT;
    st.job_id = j->id;
    st.attempt = j->attempt;
    st.start_at_ms = (uint64_t)j->gang->start_at_ms;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RANK_START;
    env.rank_start = &st;
    send_after_commit(c, c->agents_sock, (const uint8_t *)a->id, strlen(a->id), &env);
}

/* The job row's verdict when every rank succeeded: valid only if every
 * rank's record is (gb_record_fold_valid; the reason names the invalid
 * ranks and their nodes). Rank 0's record rec is the row's; the others'
 * are in their ranks rows. This runs where the row is written, once: the
 * row is written in the turn the last rank's report is stored (a rank is
 * done only in the turn its report is), so every rank's record is there,
 * whatever order they came in; an attempt that a coordinator's restart or
 * reload interrupted is lost and runs again, and a late report of it is
 * only kept in its ranks row: it has no results row to change. The verdict
 * is folded before the row is written, as results rows are written once
 * (docs/telemetry.md). A rank whose record is gone or does not parse now
 * (it did when it came) says nothing. Returns the row's valid; fold gets
 * the reason when it is 0. */
static int gang_fold_valid(gb_coord_t *c, cjob_t *j, const gb_record_t *rec, char *fold,
                           size_t foldlen) {
    int n = gb_gang_size(j->gang->g);
    gb_rank_verdict_t *v = calloc((size_t)n, sizeof *v);
    gb_rank_saved_t *sv = calloc((size_t)n, sizeof *sv);
    gb_record_t *rr = calloc((size_t)n, sizeof *rr);
    int out = rec->valid;
    fold[0] = '\0';
    if (!v || !sv || !rr) {
        gb_error("out of memory folding the ranks' verdicts of job %" PRIu64, j->id);
        goto done;
    }
    v[0] = (gb_rank_verdict_t){0, j->gang->agent[0]->name, rec->valid, rec->invalid_reason};
    for (int r = 1; r < n; r++) {
        v[r] = (gb_rank_verdict_t){r, j->gang->agent[r]->name, -1, NULL};
        int rc = gb_ranks_saved(c->ranks, j->id, j->attempt, r, &sv[r]);
        if (rc < 0) store_err(c, "report of rank %d of job %" PRIu64, r, j->id);
        if (rc != 0 || !sv[r].record) continue;
        char why[300];
        if (gb_record_parse(sv[r].record, strlen(sv[r].record), j->def.kind, &rr[r], why,
                            sizeof why) != 0) {
            gb_warn("job %" PRIu64 " rank %d: its stored record no longer parses (%s)", j->id, r,
                    why);
            continue;
        }
        v[r].valid = rr[r].valid;
        v[r].invalid_reason = rr[r].invalid_reason;
    }
    out = gb_record_fold_valid(v, (size_t)n, fold, foldlen);
done:
    for (int r = 1; rr && sv && r < n; r++) {
        gb_record_free(&rr[r]);
        gb_rank_saved_free(&sv[r]);
    }
    free(v);
    free(sv);
    free(rr);
    return out;
}

/* The rows of a finished multi-node attempt's result: the report of rank
 * `rank` (rank 0's when every rank succeeded; the failing rank's
 * otherwise) as the job's results row. A successful record must count
 * every device of the job. 0, or -1 with the reason (the job then fails).
 * status: the row's status instead of the rank's own (a cancelled job's
 * row says cancelled, whatever its rank 0 reported); NULL keeps it.
 * A store error is the turn's (store_err: it is rolled back). */
static int gang_store_result(gb_coord_t *c, cjob_t *j, int rank, const char *force_status,
                             const char *error, char *why, size_t whylen) {
    gb_rank_saved_t sv;
    int rc = gb_ranks_saved(c->ranks, j->id, j->attempt, rank, &sv);
    if (rc < 0) store_err(c, "report of rank %d of job %" PRIu64, rank, j->id);
    if (rc != 0) return 0; /* nothing to store: the job row says why */
    gb_record_t rec;
    int have_rec = 0, out = 0;
    char rwhy[300];
    /* a rank that ended "ok" in an attempt that failed (it finished before
     * the start barrier, so without the others): its row says failed, and
     * its figures, not measured with the job's other ranks, stay out */
    if (!force_status && error && strcmp(sv.status, "ok") == 0) force_status = "failed";
    const char *status = force_status ? force_status : sv.status;
    if (sv.record && !force_status) {
        if (gb_record_parse(sv.record, strlen(sv.record), j->def.kind, &rec, rwhy, sizeof rwhy) ==
            0)
            have_rec = 1;
        if (have_rec && strcmp(status, "ok") == 0 && rec.n_devices >= 0 &&
            rec.n_devices != j->def.n_nodes * j->def.gpus) {
            gb_fmt(why, whylen,
                   "invalid result record: rank %d reports %d device(s), the job has %d (%d "
                   "node(s) x %d)",
                   rank, rec.n_devices, j->def.n_nodes * j->def.gpus, j->def.n_nodes, j->def.gpus);
            status = "failed";
            error = why;
            out = -1;
        }
    }
    gb_store_result_t sr = {
        .job_id = j->id,
        .attempt = j->attempt,
        .agent_id = j->gang->agent[rank]->id,
        .status = status,
        .kind = j->def.kind,
        .n_devices = -1,
        .images_per_sec = NAN,
        .step_ms_median = NAN,
        .step_ms_p90 = NAN,
        .gflops = NAN,
        .valid = -1,
        .synthetic = gb_kind_synthetic(j->def.kind),
        .error = error,
        .output_tail = sv.output_tail,
        .record = have_rec ? sv.record : NULL,
        .exit_code = sv.exit_code,
        .started_at = sv.started_at,
        .finished_at = sv.finished_at,
    };
    char fold[GB_RECORD_FOLD_MAX];
    if (have_rec) result_from_record(&sr, &rec);
    if (have_rec && rank == 0 && strcmp(status, "ok") == 0 &&
        gb_gang_outcome(j->gang->g) == GB_GANG_DONE) { /* every rank succeeded */
        int v = gang_fold_valid(c, j, &rec, fold, sizeof fold);
        if (v == 0 && sr.valid != 0)
            gb_info("job %" PRIu64 " attempt %u invalid: %s", j->id, j->attempt, fold);
        sr.valid = v;
        sr.invalid_reason = v == 0 ? fold : sr.invalid_reason;
    }
    result_key(c, j->gang->agent[rank], &sr);
    char now[32];
    int inserted = 0;
    now_iso(now, sizeof now);
    if (gb_store_result_insert(c->store, &sr, now, &inserted) != 0)
        store_err(c, "result of job %" PRIu64 " attempt %u", j->id, j->attempt);
    if (have_rec) gb_record_free(&rec);
    gb_rank_saved_free(&sv);
    return out;
}

/* Every rank ended: the attempt's outcome becomes the job's, at once (as a
 * one-node job's result ends its job in the turn it arrives): j is
 * forgotten, or re-queued for another attempt. */
static void gang_finish(gb_coord_t *c, cjob_t *j) {
    gb_gang_t *g = j->gang->g;
    gb_gang_outcome_t outcome = gb_gang_outcome(g);
    int cause = gb_gang_cause_rank(g);
    int cancel = j->cancel_requested || gb_gang_cancel_requested(g);
    char now[32], error[GB_GANG_REASON_MAX + 300] = "", why[400];
    now_iso(now, sizeof now);
    const char *state, *att;
    if (outcome == GB_GANG_DONE) {
        state = att = "done";
        if (gang_store_result(c, j, 0, NULL, NULL, why, sizeof why) != 0) {
            state = att = "failed";
            gb_copy(error, sizeof error, why);
        }
    } else if (cancel) {
        state = att = "cancelled";
        gb_copy(error, sizeof error, cancel_why(j));
        /* one results row, as for every ended job: rank 0's report (its
         * exit status, its output), as cancelled */
        gang_store_result(c, j, 0, "cancelled", error, why, sizeof why);
    } else if (outcome == GB_GANG_FAILED) {
        state = att = "failed";
        gb_copy(error, sizeof error, gb_gang_reason(g));
        gang_store_result(c, j, cause >= 0 ? cause : 0, NULL, error, why, sizeof why);
    } else { /* lost: every rank has stopped, so it may run again */
        char reason[GB_GANG_REASON_MAX];
        gb_copy(reason, sizeof reason, gb_gang_reason(g));
        int counts = gb_gang_counts(g);
        if (gb_store_begin(c->store) != 0 ||
            gb_store_attempt_end(c->store, j->id, j->attempt, "lost", reason, now) != 0)
            store_err(c, "ending attempt %u of job %" PRIu64, j->attempt, j->id);
        gb_warn("job %" PRIu64 " attempt %u lost: %s", j->id, j->attempt, reason);
        gang_release(c, j);
        attempt_retry(c, j, reason, counts);
        return;
    }
    if (gb_store_begin(c->store) != 0 ||
        gb_store_attempt_end(c->store, j->id, j->attempt, att, error[0] ? error : NULL, now) != 0 ||
        gb_store_job_finish(c->store, j->id, state, error[0] ? error : NULL, now) != 0)
        store_err(c, "finishing job %" PRIu64 " attempt %u", j->id, j->attempt);
    log_ending(c, "job %" PRIu64 " %s (attempt %u on %d nodes, rank 0 on %s)%s%s", j->id, state,
               j->attempt, gb_gang_size(g), j->gang->agent[0]->name, error[0] ? ": " : "", error);
    job_forget(c, j, state); /* and its group: its ranks' agents are free */
}

/* Do what the gang asked for after an event about rank `who` (-1: none),
 * which ended with `error` if it did: write the ranks' new states in the
 * turn's transaction, queue the assignments, starts and cancels to be sent
 * after its commit, and end the attempt when every rank has ended (j may
 * then be freed: the caller must not use it). */
/* Give the gang every held report: the first one's reason first (when the
 * attempt has no cause yet, it becomes the cause). Returns the actions. */
static int gang_release_held(cgang_t *G) {
    int n = gb_gang_size(G->g), actions = 0;
    G->held = 0;
    if (G->held_r[G->held_rank]) {
        G->held_r[G->held_rank] = 0;
        actions |= gb_gang_on_result(G->g, G->held_rank, GB_GANG_ERR_FAILED, G->held_reason);
    }
    for (int r = 0; r < n; r++)
        if (G->held_r[r]) {
            char why[96];
            gb_fmt(why, sizeof why, "rank %d: a peer rank went away", r);
            G->held_r[r] = 0;
            actions |= gb_gang_on_result(G->g, r, GB_GANG_ERR_FAILED,
                                         G->held_why[r] ? G->held_why[r] : why);
        }
    return actions;
}

/* Rank r's Cancel, with the attempt's reason, and when it went
 * (gang_stop_again sends it again while the rank runs on). */
static void gang_send_stop(gb_coord_t *c, cjob_t *j, int r) {
    cgang_t *G = j->gang;
    char why[GB_WIRE_TEXT_MAX + 1];
    gb_fmt(why, sizeof why, "stopped: the multi-node attempt ended (%s)", gb_gang_reason(G->g));
    send_cancel(c, G->agent[r]->id, j->id, j->attempt, why);
    G->stop_ms[r] = gb_mono_ms();
}

static void gang_act(gb_coord_t *c, cjob_t *j, int actions, int who, const char *error) {
    cgang_t *G = j->gang;
    int n = gb_gang_size(G->g);
    /* the attempt has its cause (the peer's agent lost, its own failure,
     * a cancel): the held reports are now only those ranks' ends, which the
     * attempt waits for (their workers are gone already) */
    if (G->held && gb_gang_outcome(G->g) != GB_GANG_RUNNING) actions |= gang_release_held(G);
    if (actions & GB_GANG_START) {
        /* time for the start to reach every agent and its worker: two
         * heartbeats, 0.2..2 s */
        int64_t lead = 2 * (int64_t)c->cfg.heartbeat_ms;
        lead = lead < 200 ? 200 : lead > GB_RDV_LEAD_MAX_MS ? GB_RDV_LEAD_MAX_MS : lead;
        G->start_at_ms = gb_wall_ms() + lead;
        gb_iso8601(G->start_at_ms, G->start_iso, sizeof G->start_iso);
        j->started = 1;
        char now[32];
        now_iso(now, sizeof now);
        if (gb_store_begin(c->store) != 0 ||
            gb_store_attempt_started(c->store, j->id, j->attempt, now) != 0)
            store_err(c, "job %" PRIu64 " started", j->id);
    }
    gang_sync(c, j, who, error);
    if (actions & GB_GANG_ASSIGN) {
        for (int r = 1; r < n; r++) {
            send_assign(c, j, G->agent[r], r);
            G->assigned_ms[r] = gb_mono_ms();
        }
        gb_info("job %" PRIu64 " attempt %u: rank 0 made its id; ranks 1..%d assigned", j->id,
                j->attempt, n - 1);
    }
    if (actions & GB_GANG_START) {
        for (int r = 0; r < n; r++)
            gang_send_start(c, j, G->agent[r]);
        gb_info("job %" PRIu64 " attempt %u: every rank ready; start at %s", j->id, j->attempt,
                G->start_iso);
    }
    if (actions & GB_GANG_CANCEL)
        for (int r = 0; r < n; r++)
            if (gb_gang_take_cancel(G->g, r)) {
                gang_send_stop(c, j, r); /* after the commit */
                gb_info("job %" PRIu64 " attempt %u: stopping rank %d on %s (%s)", j->id,
                        j->attempt, r, G->agent[r]->name, gb_gang_reason(G->g));
            }
    if (actions & GB_GANG_END) gang_finish(c, j);
}

/* Place j on `pick` (n agents, rank order) with backend. */
static void gang_place(gb_coord_t *c, cjob_t *j, cagent_t **pick, const char *backend) {
    int n = j->def.n_nodes;
    uint32_t attempt = j->attempt + 1;
    char now[32];
    now_iso(now, sizeof now);
    cgang_t *G = calloc(1, sizeof *G);
    if (G) {
        G->g = gb_gang_new(n);
        G->agent = calloc((size_t)n, sizeof *G->agent);
        G->stored = calloc((size_t)n, sizeof *G->stored);
        G->worker = calloc((size_t)n, 1);
        G->missing = calloc((size_t)n, sizeof *G->missing);
        G->stop_ms = calloc((size_t)n, sizeof *G->stop_ms);
        G->assigned_ms = calloc((size_t)n, sizeof *G->assigned_ms);
        G->held_r = calloc((size_t)n, 1);
        G->held_why = calloc((size_t)n, sizeof *G->held_why);
    }
    if (!G || !G->g || !G->agent || !G->stored || !G->worker || !G->missing || !G->stop_ms ||
        !G->assigned_ms || !G->held_r || !G->held_why) {
        gb_error("out of memory placing job %" PRIu64, j->id);
        gang_free(&G);
        return;
    }
    int ok = gb_store_begin(c->store) == 0 &&
             gb_store_job_assign(c->store, j->id, attempt, pick[0]->id, backend, now) == 0;
    for (int r = 0; ok && r < n; r++)
        ok = gb_ranks_insert(c->ranks, j->id, attempt, r, pick[r]->id, r ? "waiting" : "assigned",
                             now) == 0;
    if (!ok) { /* the turn is rolled back: nothing was placed */
        store_err(c, "assigning job %" PRIu64, j->id);
        gang_free(&G);
        return;
    }
    for (int r = 0; r < n; r++) {
        G->agent[r] = pick[r];
        G->stored[r] = gb_gang_state(G->g, r);
        pick[r]->running[pick[r]->n_running++] = j;
    }
    G->deadline_ms = gb_mono_ms() + (int64_t)j->def.rendezvous_s * 1000;
    q_remove(c, j);
    j->state = J_RUNNING;
    j->attempt = attempt;
    j->agent = NULL;
    j->gang = G;
    j->started = 0;
    j->missing = 0;
    j->assigned_ms = gb_mono_ms();
    gb_copy(j->backend, sizeof j->backend, backend);
    send_assign(c, j, pick[0], 0);
    G->assigned_ms[0] = j->assigned_ms;
    char names[600];
    size_t o = 0;
    for (int r = 0; r < n && o < sizeof names; r++) {
        int w = snprintf(names + o, sizeof names - o, "%s%s", r ? ", " : "", pick[r]->name);
        if (w < 0) break;
        o += (size_t)w;
    }
    gb_info("job %" PRIu64 " attempt %u -> %d nodes (%s), ranks %s", j->id, attempt, n, backend,
            names);
}

/* Idle, connected agents that fit j with one backend (cuda first), in
 * registration order: 1 with n of them in pick, 0 when there are too few. */
static int gang_pick(gb_coord_t *c, const cjob_t *j, cagent_t **pick, char *backend) {
    static const char *const order[] = {"cuda", "cpu"};
    int n = j->def.n_nodes;
    for (size_t b = 0; b < 2; b++) {
        if (strcmp(j->def.backend, "auto") != 0 && strcmp(j->def.backend, order[b]) != 0) continue;
        int k = 0;
        for (size_t i = 0; i < c->n_agents && k < n; i++) {
            cagent_t *a = c->agent_list[i];
            /* idle, not only a free slot: a rank beside another job on the
             * node would measure both (docs/scaling.md) */
            if (a->state != A_CONNECTED || a->rendezvous < 1 || a->n_running > 0 ||
                a->reported_busy > 0 || a->unable[0] || (a->reserved_for && a->reserved_for != j))
                continue;
            gb_node_caps_t caps;
            char be[8], why[256];
            agent_caps(a, &caps);
            if (gb_place_fits(&caps, &j->def, be, why, sizeof why) && strcmp(be, order[b]) == 0)
                pick[k++] = a;
        }
        if (k == n) {
            gb_copy(backend, 8, order[b]);
            return 1;
        }
    }
    return 0;
}

/* The agents that could run a rank of j on backend, the idle ones first:
 * counted, or (mark) held for it, n_nodes of them. */
static int gang_candidates(gb_coord_t *c, const cjob_t *j, const char *backend, int mark) {
    int k = 0, n = j->def.n_nodes;
    for (int idle = 1; idle >= 0 && (!mark || k < n); idle--)
        for (size_t i = 0; i < c->n_agents && (!mark || k < n); i++) {
            cagent_t *a = c->agent_list[i];
            if (a->state != A_CONNECTED || a->rendezvous < 1 || a->unable[0] || a->reserved_for ||
                (a->n_running == 0 && a->reported_busy == 0) != idle)
                continue;
            gb_node_caps_t caps;
            char be[8], why[256];
            agent_caps(a, &caps);
            if (!gb_place_fits(&caps, &j->def, be, why, sizeof why) || strcmp(be, backend) != 0)
                continue;
            if (mark) a->reserved_for = j;
            k++;
        }
    return k;
}

/* j, a multi-node job that cannot be placed now, holds the agents it
 * would run on, when enough connected ones could run it: n_nodes of one
 * backend, the idle ones first. Newer jobs are then not placed on them, so
 * they come free for it: one-node jobs submitted after it took each node
 * as it came free, and it waited as long as they kept coming (a sweep's
 * `wait` with it). 1 when it holds them. */
static int gang_reserve(gb_coord_t *c, const cjob_t *j) {
    static const char *const order[] = {"cuda", "cpu"};
    for (size_t b = 0; b < 2; b++) {
        if (strcmp(j->def.backend, "auto") != 0 && strcmp(j->def.backend, order[b]) != 0) continue;
        if (gang_candidates(c, j, order[b], 0) < j->def.n_nodes) continue;
        gang_candidates(c, j, order[b], 1);
        return 1;
    }
    return 0;
}

static void gang_dispatch(gb_coord_t *c) {
    cagent_t **pick = NULL;
    for (size_t i = 0; i < c->n_agents; i++)
        c->agent_list[i]->reserved_for = NULL;
    int held = 0; /* the oldest waiting one holds its agents; the rest backfill around them */
    for (cjob_t *j = c->q_head, *next; j; j = next) {
        next = j->next;
        if (!is_multi(j) || j->sweep_id < c->place_min_sweep) continue;
        cagent_t **p = realloc(pick, (size_t)j->def.n_nodes * sizeof *p);
        if (!p) break;
        pick = p;
        char backend[8];
        if (gang_pick(c, j, pick, backend))
            gang_place(c, j, pick, backend);
        else if (!held)
            held = gang_reserve(c, j);
    }
    free(pick);
}

static int gang_satisfiable(gb_coord_t *c, const gb_jobdef_t *job, char *why, size_t whylen) {
    int fit[2] = {0, 0}, old = 0;
    char first[256] = "";
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        if (a->forgotten) continue;
        if (a->rendezvous == 0) { /* -1: not heard since a restart, counts as able */
            old++;
            continue;
        }
        gb_node_caps_t caps;
        char be[8], r[256];
        agent_caps(a, &caps);
        if (gb_place_fits(&caps, job, be, r, sizeof r))
            fit[strcmp(be, "cuda") == 0 ? 0 : 1]++;
        else if (!first[0])
            gb_copy(first, sizeof first, r);
    }
    int best = fit[0] > fit[1] ? fit[0] : fit[1];
    if (best >= job->n_nodes) return 1;
    char olds[96] = "";
    if (old) gb_fmt(olds, sizeof olds, "; %d agent(s) too old for multi-node jobs", old);
    /* enough nodes, but not on one backend: said, or the count read as
     * nodes missing that `gpubench nodes` lists */
    char mixed[160] = "";
    if (fit[0] && fit[1])
        gb_fmt(mixed, sizeof mixed,
               " (%d on GPUs, %d on CPUs: a job's ranks all run on one backend; \"backend\" "
               "chooses it)",
               fit[0], fit[1]);
    gb_fmt(why, whylen,
           "the job spans %d nodes, and %d known node(s) could run it together%s%s%s%s",
           job->n_nodes, best, mixed, first[0] ? "; " : "", first, olds);
    return 0;
}

/* A rank is gone (its agent lost or back without it, a refusal, a vanished
 * worker): the attempt is lost unless it has a cause already. */
static void gang_rank_lost(gb_coord_t *c, cjob_t *j, int r, const char *reason, int counts) {
    int act = gb_gang_on_lost(j->gang->g, r, reason, counts);
    gang_act(c, j, act, r, reason);
}

/* attempt_lost of a multi-node job: its ranks on agents that are not
 * connected are lost. by (NULL: none) is the agent the reason is about:
 * its ranks first, so the attempt's cause names it; a rank of another
 * agent away at the time (stopped, holding its result in its spool) is
 * lost with its own agent named, not by's reason alone. */
static void gang_attempt_lost(gb_coord_t *c, cjob_t *j, const char *reason, int counts,
                              const cagent_t *by) {
    int any = 0;
    uint64_t id = j->id;
    for (int pass = by ? 0 : 1; pass < 2; pass++)
        for (int r = 0; j->gang && r < gb_gang_size(j->gang->g); r++) {
            cagent_t *a = j->gang->agent[r];
            if (a->state == A_CONNECTED || gb_rank_ended(gb_gang_state(j->gang->g, r))) continue;
            if (by && (a == by) != (pass == 0)) continue;
            char why[GB_GANG_REASON_MAX];
            if (by && a != by)
                gb_fmt(why, sizeof why, "rank %d: its agent %s is %s, and the attempt was lost: %s",
                       r, a->name, agent_state_names[a->state], reason);
            else
                gb_fmt(why, sizeof why, "rank %d: %s", r, reason);
            any = 1;
            gang_rank_lost(c, j, r, why, counts); /* may end j: freed, or re-queued */
            if (gb_map_get_u64(c->jobs, id) != j || !j->gang) return;
        }
    if (!any && j->gang) {
        int act = gb_gang_end(j->gang->g, GB_GANG_LOST, -1, reason, counts);
        gang_act(c, j, act, -1, NULL);
    }
}

static void gang_cancel(gb_coord_t *c, cjob_t *j) {
    int act = gb_gang_end(j->gang->g, GB_GANG_CANCELLED, -1, cancel_why(j), 1);
    gang_act(c, j, act, -1, NULL);
}

static void gang_progress(gb_coord_t *c, cagent_t *a, cjob_t *j, const Gb__Progress *p) {
    int r = gang_rank_of(j, a);
    if (r < 0) {
        gb_debug("progress for job %" PRIu64 " from %s ignored (not one of its ranks)", j->id,
                 a->name);
        return;
    }
    if (p->phase == GB__PHASE__PHASE_STARTED) {
        j->gang->worker[r] = 1;
        return;
    }
    char reason[GB_WIRE_ERROR_MAX + 64];
    gb_fmt(reason, sizeof reason, "agent %s refused rank %d: %s", a->name, r, p->message);
    a->reported_busy = a->slots;        /* full until its next heartbeat says otherwise */
    gang_rank_lost(c, j, r, reason, 0); /* a refusal does not use up an attempt */
}

static void on_rank_update(gb_coord_t *c, cagent_t *a, const Gb__RankUpdate *u) {
    cjob_t *j = gb_map_get_u64(c->jobs, u->job_id);
    int r = j && j->gang && j->attempt == u->attempt ? gang_rank_of(j, a) : -1;
    if (r < 0) {
        gb_debug("rank update for job %" PRIu64 " attempt %u from %s ignored (not a rank it runs)",
                 u->job_id, u->attempt, a->name);
        return;
    }
    cgang_t *G = j->gang;
    /* only a worker that runs says these (its Progress "started" may have
     * been lost on a reconnect): a restart of its agent must lose the rank,
     * not assign it again */
    G->worker[r] = 1;
    if (u->phase == GB__RANK_PHASE__RANK_ID) {
        if (r != 0) {
            gb_warn("job %" PRIu64 ": rank %d on %s sent a unique id; only rank 0 makes one", j->id,
                    r, a->name);
            return;
        }
        size_t had_len = 0;
        const unsigned char *had = gb_gang_id(G->g, &had_len);
        if (had_len &&
            (had_len != u->unique_id.len || memcmp(had, u->unique_id.data, had_len) != 0)) {
            /* a second worker of rank 0 (started again): the others hold
             * the first one's id, which no one answers any more */
            char why[GB_GANG_REASON_MAX];
            gb_fmt(why, sizeof why,
                   "rank 0 on %s made a second unique id (its worker started again); the other "
                   "ranks hold the first",
                   a->name);
            gb_warn("job %" PRIu64 " attempt %u: %s", j->id, j->attempt, why);
            gang_rank_lost(c, j, 0, why, 1);
            return;
        }
        gang_act(c, j, gb_gang_on_id(G->g, 0, u->unique_id.data, u->unique_id.len), -1, NULL);
        return;
    }
    if (gb_gang_started(G->g) && gb_gang_state(G->g, r) == GB_RANK_STARTED) {
        /* it says ready again: our start did not reach it (a reconnect) */
        gang_send_start(c, j, a);
        return;
    }
    int act = gb_gang_on_ready(G->g, r);
    gb_rank_state_t st = gb_gang_state(G->g, r);
    if (G->stored[r] == GB_RANK_ASSIGNED && (st == GB_RANK_READY || st == GB_RANK_STARTED)) {
        /* when it said so, also when it was the last (the start follows) */
        char now[32];
        now_iso(now, sizeof now);
        if (gb_store_begin(c->store) != 0 ||
            gb_ranks_set(c->ranks, j->id, j->attempt, r, "ready", "ready", now, NULL) != 0)
            store_err(c, "rank %d of job %" PRIu64 " ready", r, j->id);
        G->stored[r] = GB_RANK_READY;
    }
    gang_act(c, j, act, -1, NULL);
}

/* A result from agent a for (job, attempt): 1 when it is a rank's of a
 * multi-node attempt (handled: its report is kept in the ranks row, and it
 * is acknowledged once the turn is committed; the rank that ends the
 * attempt ends the job in this turn), 0 when not (the one-node path takes
 * it). */
static int gang_result(gb_coord_t *c, cagent_t *a, cjob_t *j, const Gb__Result *r) {
    int rank;
    int found = gb_ranks_find(c->ranks, r->job_id, r->attempt, a->id, &rank);
    if (found < 0) {
        store_err(c, "result of job %" PRIu64 " attempt %u", r->job_id, r->attempt);
        return 1; /* not acknowledged: resent later */
    }
    if (found == 1) return 0;
    if (r->outcome_lost) { /* no report to keep: on_result says why */
        if (j && j->gang && j->attempt == r->attempt) {
            char reason[GB_GANG_REASON_MAX];
            gb_fmt(reason, sizeof reason, "rank %d on %s: %s", rank, a->name, r->error);
            /* that rank is lost (its row says why), and with it the attempt
             * (attempt_lost_ex skipped the rank: its agent is connected) */
            gang_rank_lost(c, j, rank, reason, 1); /* may end (free) j */
        } else {
            gb_info("job %" PRIu64 " attempt %u rank %d: %s (the attempt had ended)", r->job_id,
                    r->attempt, rank, r->error);
        }
        ack_after_commit(c, a, r);
        return 1;
    }
    const char *status = status_name(r->status);
    char error[GB_WIRE_ERROR_MAX + 128], why[300];
    gb_copy(error, sizeof error, r->error);
    int have_rec = 0;
    char kind[16] = "";
    if (j) {
        gb_copy(kind, sizeof kind, j->def.kind);
    } else if (r->record_json[0]) { /* a late report of a finished job: its own kind */
        cJSON *probe = cJSON_Parse(r->record_json);
        const cJSON *k = probe ? cJSON_GetObjectItemCaseSensitive(probe, "kind") : NULL;
        if (cJSON_IsString(k) && gb_kind_known(k->valuestring))
            gb_copy(kind, sizeof kind, k->valuestring);
        cJSON_Delete(probe);
    }
    char *canon = NULL; /* the record as stored (gb_record_t.text) */
    if (r->record_json[0] && kind[0]) {
        gb_record_t rec;
        if (gb_record_parse(r->record_json, strlen(r->record_json), kind, &rec, why, sizeof why) ==
            0) {
            have_rec = 1;
            canon = rec.text;
            rec.text = NULL;
            gb_record_free(&rec);
        } else if (j && r->status == GB__RESULT_STATUS__RESULT_OK) {
            status = "failed";
            gb_fmt(error, sizeof error, "invalid result record: %s", why);
        }
    }
    char started[32], finished[32];
    gb_rank_report_t rep = {.status = status,
                            .error = error[0] ? error : NULL,
                            .output_tail = r->output_tail[0] ? r->output_tail : NULL,
                            .record = have_rec ? canon : NULL,
                            .exit_code = r->exit_code};
    if (r->started_at_ms) {
        gb_iso8601((int64_t)r->started_at_ms, started, sizeof started);
        rep.started_at = started;
    }
    if (r->finished_at_ms) {
        gb_iso8601((int64_t)r->finished_at_ms, finished, sizeof finished);
        rep.finished_at = finished;
    }
    int stored = 0;
    int rrc = gb_ranks_report(c->ranks, r->job_id, r->attempt, rank, &rep, &stored);
    cJSON_free(canon);
    if (rrc != 0) {
        store_err(c, "result of job %" PRIu64 " attempt %u rank %d", r->job_id, r->attempt, rank);
        return 1; /* the turn is rolled back; the agent resends */
    }
    int current = j && j->gang && j->attempt == r->attempt;
    if (!stored || !current) {
        if (stored)
            gb_info("late result of job %" PRIu64 " attempt %u rank %d kept", r->job_id, r->attempt,
                    rank);
        ack_after_commit(c, a, r);
        return 1;
    }
    gb_gang_status_t gs = strcmp(status, "ok") == 0          ? GB_GANG_OK
                          : strcmp(status, "timeout") == 0   ? GB_GANG_ERR_TIMEOUT
                          : strcmp(status, "crashed") == 0   ? GB_GANG_ERR_CRASHED
                          : strcmp(status, "cancelled") == 0 ? GB_GANG_ERR_CANCELLED
                                                             : GB_GANG_ERR_FAILED;
    char reason[GB_GANG_REASON_MAX];
    if (gs == GB_GANG_OK) /* "ok" matters only before the barrier: gang.c says why */
        gb_fmt(reason, sizeof reason, "rank %d on %s", rank, a->name);
    else
        gb_fmt(reason, sizeof reason, "rank %d on %s: %s", rank, a->name,
               error[0] ? error : status);
    if (gs == GB_GANG_ERR_FAILED && gb_peer_gone(error) &&
        gb_gang_outcome(j->gang->g) == GB_GANG_RUNNING) {
        cgang_t *G = j->gang;
        G->held_r[rank] = 1;
        free(G->held_why[rank]);
        G->held_why[rank] = strdup(reason); /* NULL: the row keeps the report's error */
        if (!G->held) {
            int64_t hold = lost_window_ms(c) + c->cfg.heartbeat_ms + 1000;
            G->held = 1;
            G->held_rank = rank;
            G->held_until_ms = gb_mono_ms() + hold;
            gb_copy(G->held_reason, sizeof G->held_reason, reason);
            gb_info("job %" PRIu64 " attempt %u: %s; held %" PRId64
                    " ms for the peer's own report or its agent's loss",
                    j->id, j->attempt, reason, hold);
        }
        ack_after_commit(c, a, r);
        return 1;
    }
    int act = gb_gang_on_result(j->gang->g, rank, gs, reason);
    gang_act(c, j, act, rank, gs == GB_GANG_OK ? NULL : reason); /* may end (free) j */
    ack_after_commit(c, a, r);
    return 1;
}

/* Rank r of j was told to stop, and its agent a says it still runs it (a
 * Hello, or a Heartbeat): the stop goes again, on every Hello (a new
 * connection: what went before may never have arrived) and else at most
 * once a lost window. It went once: sent while the agent had no connection
 * (the coordinator stopped past the agents' heartbeat timeout, their
 * connections made anew; a connection cut), the ROUTER dropped it, and the
 * worker ran to its end, holding its node and the attempt's end (as
 * cancel_again for a one-node job). */
static void gang_stop_again(gb_coord_t *c, cagent_t *a, cjob_t *j, int r, int hello) {
    cgang_t *G = j->gang;
    if (!G->stop_ms[r] || gb_rank_ended(gb_gang_state(G->g, r)) ||
        !resend_due(c, G->stop_ms[r], hello))
        return;
    gb_info("job %" PRIu64 " attempt %u: agent %s still runs rank %d: its stop sent again", j->id,
            j->attempt, a->name, r);
    gang_send_stop(c, j, r);
}

/* A rank whose worker its agent reported started, and that two heartbeats
 * in a row mention neither as running nor as a spooled result, vanished. */
static void gang_heartbeat(gb_coord_t *c, cagent_t *a, const Gb__Heartbeat *hb) {
    for (int k = 0; k < a->n_running; k++) {
        cjob_t *j = a->running[k];
        int r = j->gang ? gang_rank_of(j, a) : -1;
        if (r < 0) continue;
        if (ref_listed(c, hb->running, hb->n_running, j->id, j->attempt)) {
            j->gang->worker[r] = 1; /* it runs: its Progress was lost */
            gang_stop_again(c, a, j, r, 0);
        }
        if (!j->gang->worker[r] || j->gang->held_r[r] ||
            ref_listed(c, hb->running, hb->n_running, j->id, j->attempt) ||
            ref_listed(c, hb->spooled_jobs, hb->n_spooled_jobs, j->id, j->attempt) ||
            hb->n_spooled_jobs < hb->spooled) {
            j->gang->missing[r] = 0;
        } else if (++j->gang->missing[r] >= 2) {
            char reason[300];
            gb_fmt(reason, sizeof reason,
                   "rank %d: agent %s no longer runs it and holds no result for it", r, a->name);
            gang_rank_lost(c, j, r, reason, 1); /* takes j off a: look at slot k again */
            k = -1;
        }
    }
}

/* An agent registers again while it holds ranks: a rank it neither runs
 * nor holds a result for, though its worker had started, is lost. */
static void gang_hello(gb_coord_t *c, cagent_t *a, const Gb__Hello *h) {
    for (int k = 0; k < a->n_running; k++) {
        cjob_t *j = a->running[k];
        int r = j->gang ? gang_rank_of(j, a) : -1;
        if (r < 0) continue;
        if (ref_listed(c, h->running, h->n_running, j->id, j->attempt)) {
            j->gang->worker[r] = 1;
            gang_stop_again(c, a, j, r, 1);
            continue;
        }
        if (j->gang->held_r[r] || ref_listed(c, h->spooled, h->n_spooled, j->id, j->attempt))
            continue;
        if (!j->gang->worker[r]) {
            /* assigned, and it registered without it: the JobAssign went
             * while its connection was being made anew, and the ROUTER
             * dropped it (or it is still on its way: the agent answers a
             * second one "already running"). Sent again, with a fresh window
             * to start it (gang_check), as a one-node job's */
            cgang_t *G = j->gang;
            if (G->assigned_ms[r] && !G->stop_ms[r] && !gb_rank_ended(gb_gang_state(G->g, r)) &&
                gb_gang_outcome(G->g) == GB_GANG_RUNNING) {
                gb_info("job %" PRIu64 " attempt %u: agent %s registered without rank %d: its "
                        "assignment sent again",
                        j->id, j->attempt, a->name, r);
                send_assign(c, j, a, r);
                G->assigned_ms[r] = gb_mono_ms();
            }
            continue;
        }
        char reason[300];
        gb_fmt(reason, sizeof reason, "rank %d: agent %s came back without it", r, a->name);
        gang_rank_lost(c, j, r, reason, 1);
        k = -1;
    }
}

/* Rendezvous deadlines: an attempt whose ranks are not all ready within
 * the job's rendezvous_s is lost (and may run again). */
static void gang_check(gb_coord_t *c) {
    unsigned tick = ++c->gang_tick;
    int64_t now = gb_mono_ms();
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        for (int k = 0; k < a->n_running; k++) {
            cjob_t *j = a->running[k];
            if (!j->gang || j->gang->tick == tick) continue;
            j->gang->tick = tick;
            /* not while agent messages wait unread: no agent's silence is
             * judged then (check_liveness), and the hold is there to wait
             * for that verdict (it ran out first, and the job failed for
             * good, though the peer's agent was found lost a moment later) */
            if (j->gang->held && now >= j->gang->held_until_ms && !c->agent_backlog &&
                gb_gang_outcome(j->gang->g) == GB_GANG_RUNNING) {
                /* nothing else came: the held failure is the job's */
                cgang_t *G = j->gang;
                char reason[GB_GANG_REASON_MAX];
                gb_copy(reason, sizeof reason, G->held_reason);
                int hr = G->held_rank;
                int act = gang_release_held(G);
                gang_act(c, j, act, hr, reason);
                k = -1;
                continue;
            }
            /* a rank assigned whose worker its (connected) agent never
             * reported started within the restart grace, as a one-node
             * job's: the assignment or its answer was lost. It was waited
             * for forever: stopped with the attempt, it never ended */
            int lost_r = -1;
            for (int r = 0; !c->agent_backlog && r < gb_gang_size(j->gang->g); r++)
                if (j->gang->assigned_ms[r] && !j->gang->worker[r] && !j->gang->held_r[r] &&
                    j->gang->agent[r]->state == A_CONNECTED &&
                    !gb_rank_ended(gb_gang_state(j->gang->g, r)) &&
                    now - j->gang->assigned_ms[r] > restart_grace_ms(c)) {
                    lost_r = r;
                    break;
                }
            if (lost_r >= 0) {
                char reason[300];
                gb_fmt(reason, sizeof reason,
                       "rank %d: agent %s did not start it within %" PRId64 " ms", lost_r,
                       j->gang->agent[lost_r]->name, restart_grace_ms(c));
                gang_rank_lost(c, j, lost_r, reason, 1); /* may end (free) j */
                k = -1;
                continue;
            }
            int r = gb_gang_first_unready(j->gang->g);
            if (r < 0 || now < j->gang->deadline_ms ||
                gb_gang_outcome(j->gang->g) != GB_GANG_RUNNING)
                continue;
            char reason[300];
            gb_fmt(reason, sizeof reason, "rank %d (node %s) was not ready within %d s", r,
                   j->gang->agent[r]->name, j->def.rendezvous_s);
            int act = gb_gang_end(j->gang->g, GB_GANG_LOST, r, reason, 1);
            gang_act(c, j, act, -1, NULL);
            k = -1; /* the list may have changed */
        }
    }
}

static void on_agent_message_(gb_coord_t *c, gb_frame_t *f);

static void on_agent_message(gb_coord_t *c, gb_frame_t *f) {
    c->cur_msg = f->parts ? &f->payload : NULL;
    on_agent_message_(c, f);
    c->cur_msg = NULL;
}

/* An agent's last heartbeat (Heartbeat.stopping): it stops cleanly and its
 * workers with it. Shown `stopped`, not `lost` a lost window later; the
 * jobs it ran (or was given and had not started) go back to the queue now,
 * without using up an attempt (it is not theirs to answer for). A job whose
 * result waits in its spool stays its own for the restart grace, as for a
 * restarting agent: its result comes when it starts again (check_liveness
 * gives it back, free, after that). */
static void agent_stopping(gb_coord_t *c, cagent_t *a, const Gb__Heartbeat *hb) {
    int requeued = 0, kept = 0;
    agent_set_state(c, a, A_STOPPED);
    a->stopped_ms = gb_mono_ms();
    for (int k = 0; k < a->n_running;) {
        cjob_t *j = a->running[k];
        const char *how;
        if (ref_listed(c, hb->running, hb->n_running, j->id, j->attempt))
            how = "while it ran it";
        else if (ref_listed(c, hb->spooled_jobs, hb->n_spooled_jobs, j->id, j->attempt) ||
                 (j->started && hb->n_spooled_jobs < hb->spooled)) {
            kept++; /* its result is in the spool (or may be: the list was cut) */
            k++;
            continue;
        } else if (!j->started)
            how = "before it started it";
        else
            how = "neither running it nor holding its result";
        char reason[300];
        gb_fmt(reason, sizeof reason, "agent %s stopped (SIGTERM/SIGINT) %s", a->name, how);
        attempt_lost_ex(c, j, reason, 0, a); /* removes it from a->running */
        requeued++;
    }
    if (kept)
        gb_info("agent %s stops; %d job(s) back to the queue, %d wait for the result it holds",
                a->name, requeued, kept);
    else
        gb_info("agent %s stops%s", a->name, requeued ? "; its jobs go back to the queue" : "");
    c->dirty = 1;
}

static void on_agent_message_(gb_coord_t *c, gb_frame_t *f) {
    char who[2 * GB_RID_MAX + 1], why[512];
    if (f->parts != 1) {
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_DECODE, 0, "message",
               f->parts == 0 ? "empty message" : "a message must be exactly one frame");
        return;
    }
    Gb__Envelope *env = NULL;
    uint64_t seq = 0;
    int code = gb_wire_decode(zmq_msg_data(&f->payload), zmq_msg_size(&f->payload),
                              agents_max_frame(&c->cfg), &env, &seq, why, sizeof why);
    if (code) {
        reject(c, c->agents_sock, f->rid, f->rid_len, code, seq, "frame", why);
        return;
    }
    gb_rid_str(f->rid, f->rid_len, who, sizeof who);
    Gb__Envelope__BodyCase body = env->body_case;
    if (!key_still_allowed(c, f, c->agents_sock, env->seq, gb_wire_body_name(body))) {
        gb_wire_free(&env);
        return;
    }
    if (body == GB__ENVELOPE__BODY_HELLO) {
        on_hello(c, f, env);
        gb_wire_free(&env);
        return;
    }
    if (body == GB__ENVELOPE__BODY_REJECT) {
        gb_warn("agent %s rejected our message %" PRIu64 ": %s: %s", who, env->reject->ref_seq,
                gb_wire_reject_name(env->reject->code), env->reject->reason);
        gb_wire_free(&env);
        return;
    }
    if (body != GB__ENVELOPE__BODY_HEARTBEAT && body != GB__ENVELOPE__BODY_PROGRESS &&
        body != GB__ENVELOPE__BODY_RESULT && body != GB__ENVELOPE__BODY_RANK_UPDATE) {
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_UNEXPECTED, env->seq,
               gb_wire_body_name(body),
               "agents may send hello, heartbeat, progress, result, rank_update");
        gb_wire_free(&env);
        return;
    }
    char idbuf[GB_RID_MAX + 1];
    memcpy(idbuf, f->rid, f->rid_len);
    idbuf[f->rid_len] = '\0';
    cagent_t *a = strlen(idbuf) == f->rid_len ? agent_get(c, idbuf) : NULL;
    if (!a || a->state != A_CONNECTED) {
        /* a known agent back after a partition sends what it queued before
         * its Hello: one info line a while, not a warn line per message */
        if (a) {
            char rk[GB_RID_MAX + 16];
            int64_t retry;
            gb_fmt(rk, sizeof rk, "back:%s", idbuf);
            if (!c->refusal_log ||
                gb_rate_take(c->refusal_log, rk, strlen(rk), gb_mono_ms(), &retry))
                gb_info("agent %s (%s) heard again before its hello: asked to register again",
                        a->name, agent_state_names[a->state]);
            c->reject_quiet = 1;
        }
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_UNKNOWN_AGENT,
               env->seq, gb_wire_body_name(body), "not registered: send hello");
        c->reject_quiet = 0;
        gb_wire_free(&env);
        return;
    }
    const char *key = peer_key(c, f);
    if (key && strcmp(a->key, key) != 0) { /* another key speaking for this agent id */
        agent_claimed(c, a, key);
        reject(c, c->agents_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_DENIED, env->seq,
               gb_wire_body_name(body), "this agent id registered with another key");
        gb_wire_free(&env);
        return;
    }
    a->last_heard_ms = gb_mono_ms();
    if (body == GB__ENVELOPE__BODY_HEARTBEAT) {
        const Gb__Heartbeat *hb = env->heartbeat;
        int was_full = a->reported_busy >= a->slots, was_busy = a->reported_busy > 0;
        a->reported_busy = (int)hb->n_running;
        /* a free slot for a one-node job; an idle agent for a rank */
        if ((was_full && a->reported_busy < a->slots) || (was_busy && a->reported_busy == 0))
            c->dirty = 1;
        agent_unable(c, a, hb->unable);
        /* A started job its agent neither runs nor holds a result for has
         * vanished (e.g. its result could not be spooled). Its result, had it
         * been sent, arrives before this heartbeat (one connection is FIFO),
         * but is applied only after this turn's commit: so two heartbeats. */
        for (int k = 0; k < a->n_running;) {
            cjob_t *j = a->running[k];
            if (!j->gang && !j->started &&
                ref_listed(c, hb->running, hb->n_running, j->id, j->attempt)) {
                /* it runs: its Progress was lost (or its turn rolled back) */
                char now[32];
                now_iso(now, sizeof now);
                j->started = 1;
                if (gb_store_begin(c->store) != 0 ||
                    gb_store_attempt_started(c->store, j->id, j->attempt, now) != 0)
                    store_err(c, "job %" PRIu64 " started", j->id);
            }
            if (!j->gang && ref_listed(c, hb->running, hb->n_running, j->id, j->attempt))
                cancel_again(c, a, j, 0);
            if (j->gang || !j->started ||
                ref_listed(c, hb->running, hb->n_running, j->id, j->attempt) ||
                ref_listed(c, hb->spooled_jobs, hb->n_spooled_jobs, j->id, j->attempt) ||
                hb->n_spooled_jobs < hb->spooled) {
                j->missing = 0;
                k++;
            } else if (++j->missing >= 2) {
                char reason[200];
                gb_fmt(reason, sizeof reason,
                       "agent %s no longer runs it and holds no result for it", a->name);
                attempt_lost(c, j, reason);
            } else {
                k++;
            }
        }
        gang_heartbeat(c, a, hb);
        if (!hb->stopping) { /* (a stopping agent has ended its workers) */
            adopt_listed(c, a, hb->running, hb->n_running);
            stop_stale(c, a, hb->running, hb->n_running, 0);
        }
        if (hb->stopping) agent_stopping(c, a, hb);
        if (a->last_heard_ms - a->seen_written_ms >= SEEN_WRITE_MS) {
            /* written by the next liveness tick, together with the others */
            now_iso(a->last_seen, sizeof a->last_seen);
            a->seen_written_ms = a->last_heard_ms;
            a->seen_dirty = 1;
        }
    } else if (body == GB__ENVELOPE__BODY_PROGRESS) {
        on_progress(c, a, env->progress);
    } else if (body == GB__ENVELOPE__BODY_RANK_UPDATE) {
        on_rank_update(c, a, env->rank_update);
    } else {
        on_result(c, a, env->result);
    }
    gb_wire_free(&env);
}

/* ---- control requests ----------------------------------------------------- */

typedef struct status_ctx {
    Gb__SweepStatus *items;
    Gb__SweepStatus **ptrs;
    char (*text)[3][GB_SPEC_STR];
    size_t n, cap;
} status_ctx_t;

static void status_row(void *vctx, const gb_store_sweep_status_t *s) {
    status_ctx_t *x = vctx;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        Gb__SweepStatus *it = realloc(x->items, cap * sizeof *it);
        if (!it) return;
        x->items = it;
        char(*t)[3][GB_SPEC_STR] = realloc(x->text, cap * sizeof *t);
        if (!t) return;
        x->text = t;
        x->cap = cap;
    }
    Gb__SweepStatus *o = &x->items[x->n];
    gb__sweep_status__init(o);
    gb_copy(x->text[x->n][0], GB_SPEC_STR, s->name ? s->name : "");
    gb_wire_line_clean(x->text[x->n][0]); /* stored before the spec refused C1 */
    gb_copy(x->text[x->n][1], GB_SPEC_STR, s->state ? s->state : "");
    gb_copy(x->text[x->n][2], GB_SPEC_STR, s->created_at ? s->created_at : "");
    o->sweep_id = s->sweep_id;
    o->total = s->total;
    o->queued = s->queued;
    o->running = s->running;
    o->done = s->done;
    o->failed = s->failed;
    o->cancelled = s->cancelled;
    x->n++;
}

static void on_status(gb_coord_t *c, const gb_frame_t *f, const Gb__Envelope *env) {
    status_ctx_t x = {0};
    int n = gb_store_sweep_status(c->store, env->status->sweep_id, status_row, &x);
    if (n < 0) {
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_INTERNAL, env->seq,
               "status", gb_store_errmsg(c->store));
    } else if (env->status->sweep_id && x.n == 0) {
        char why[80];
        gb_fmt(why, sizeof why, "no sweep %" PRIu64, env->status->sweep_id);
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_NOT_FOUND, env->seq,
               "status", why);
    } else {
        x.ptrs = calloc(x.n ? x.n : 1, sizeof *x.ptrs);
        if (x.ptrs) {
            for (size_t i = 0; i < x.n; i++) {
                x.items[i].name = x.text[i][0];
                x.items[i].state = x.text[i][1];
                x.items[i].created_at = x.text[i][2];
                x.ptrs[i] = &x.items[i];
            }
            Gb__StatusReply sr = GB__STATUS_REPLY__INIT;
            sr.n_sweeps = x.n;
            sr.sweeps = x.ptrs;
            Gb__Envelope reply = GB__ENVELOPE__INIT;
            reply.seq = env->seq;
            reply.body_case = GB__ENVELOPE__BODY_STATUS_REPLY;
            reply.status_reply = &sr;
            send_now(c, c->control_sock, f->rid, f->rid_len, &reply);
        }
    }
    free(x.items);
    free(x.ptrs);
    free(x.text);
}

static void on_nodes(gb_coord_t *c, const gb_frame_t *f, const Gb__Envelope *env) {
    size_t listed = env->nodes->no_nodes ? 0 : c->n_agents; /* no_nodes: what it can do only */
    Gb__NodeStatus *items = calloc(c->n_agents ? c->n_agents : 1, sizeof *items);
    Gb__NodeStatus **ptrs = calloc(c->n_agents ? c->n_agents : 1, sizeof *ptrs);
    size_t n_ids = 0, used = 0;
    for (size_t i = 0; i < c->n_agents; i++)
        n_ids += (size_t)c->agent_list[i]->n_running;
    uint64_t *ids = calloc(n_ids ? n_ids : 1, sizeof *ids);
    if (!items || !ptrs || !ids) {
        free(items);
        free(ptrs);
        free(ids);
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_INTERNAL, env->seq,
               "nodes", "out of memory");
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < listed; i++) {
        cagent_t *a = c->agent_list[i];
        if (a->forgotten) continue;
        Gb__NodeStatus *n = &items[m];
        gb__node_status__init(n);
        n->agent_id = a->id;
        n->name = a->name;
        n->state = (char *)agent_state_names[a->state];
        n->cpu_model = a->cpu_model;
        n->n_gpus = (uint32_t)a->n_gpus;
        n->gpu_model = a->gpu_model;
        n->labels = a->labels;
        n->last_seen = a->last_seen;
        n->unable = a->state == A_CONNECTED ? a->unable : "";
        /* its pinned key taken off --authorized (or given role=control):
         * every message it sends is refused, and it cannot register again
         * (it showed only `lost`) */
        if (c->auth && a->key[0] && !gb_auth_allowed_on(c->auth, a->key, GB_AUTH_AGENTS) &&
            !n->unable[0])
            n->unable = gb_auth_allowed(c->auth, a->key)
                            ? "its key has role=control in --authorized (the control endpoint "
                              "only): refused (another listed key may take its id)"
                            : "its key is no longer in --authorized: refused (another listed key "
                              "may take its id)";
        n->running_job = a->n_running ? a->running[0]->id : 0;
        n->n_running_jobs = (size_t)a->n_running;
        n->running_jobs = ids + used;
        for (int k = 0; k < a->n_running; k++)
            ids[used++] = a->running[k]->id;
        ptrs[m++] = n;
    }
    Gb__NodesReply nr = GB__NODES_REPLY__INIT;
    nr.n_nodes = m;
    nr.nodes = ptrs;
    nr.submit_request_ids = 1;
    Gb__Envelope reply = GB__ENVELOPE__INIT;
    reply.seq = env->seq;
    reply.body_case = GB__ENVELOPE__BODY_NODES_REPLY;
    reply.nodes_reply = &nr;
    send_now(c, c->control_sock, f->rid, f->rid_len, &reply);
    free(items);
    free(ptrs);
    free(ids);
}

/* Can some known node (connected or not) ever run job? Why not, if not. */
static int satisfiable(gb_coord_t *c, const gb_jobdef_t *job, char *why, size_t whylen) {
    if (c->n_agents == c->n_forgotten) {
        gb_fmt(why, whylen,
               c->n_agents ? "every node this coordinator knew was forgotten (nodes --forget)"
                           : "no agent has ever registered with this coordinator");
        return 0;
    }
    if (job->n_nodes > 1) return gang_satisfiable(c, job, why, whylen);
    size_t o = 0, shown = 0;
    why[0] = '\0';
    /* the nodes the job itself chose (kind, glob, labels) first: why they
     * cannot run it says more than that the others were not chosen */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < c->n_agents; i++) {
            gb_node_caps_t caps;
            if (c->agent_list[i]->forgotten) continue;
            agent_caps(c->agent_list[i], &caps);
            if (gb_place_selected(&caps, job) != (pass == 0)) continue;
            char backend[8], r[256];
            if (gb_place_fits(&caps, job, backend, r, sizeof r)) return 1;
            if (shown < 3 && o < whylen) {
                int n = snprintf(why + o, whylen - o, "%s%s", o ? "; " : "", r);
                if (n > 0) o += (size_t)n;
                shown++;
            }
        }
    if (c->n_agents - c->n_forgotten > 3 && o < whylen)
        snprintf(why + o, whylen - o, "; and %zu more node(s)", c->n_agents - c->n_forgotten - 3);
    return 0;
}

static int same_requirements(const gb_jobdef_t *a, const gb_jobdef_t *b) {
    return strcmp(a->kind, b->kind) == 0 && strcmp(a->backend, b->backend) == 0 &&
           strcmp(a->nodes, b->nodes) == 0 && strcmp(a->labels, b->labels) == 0 &&
           strcmp(a->precision, b->precision) == 0 &&
           strcmp(a->interconnect, b->interconnect) == 0 && a->gpus == b->gpus &&
           a->n_nodes == b->n_nodes;
}

/* The SubmitReply to request seq, after the commit (a Reject if it fails). */
static void submit_reply(gb_coord_t *c, const gb_frame_t *f, uint64_t seq, uint64_t sweep_id,
                         uint32_t n_jobs) {
    Gb__SubmitReply sr = GB__SUBMIT_REPLY__INIT;
    sr.sweep_id = sweep_id;
    sr.n_jobs = n_jobs;
    Gb__Envelope reply = GB__ENVELOPE__INIT;
    reply.seq = seq;
    reply.body_case = GB__ENVELOPE__BODY_SUBMIT_REPLY;
    reply.submit_reply = &sr;
    send_after_commit_or(c, c->control_sock, f->rid, f->rid_len, &reply,
                         GB__REJECT_CODE__REJECT_INTERNAL);
}

static void on_submit(gb_coord_t *c, const gb_frame_t *f, const Gb__Envelope *env) {
    char err[1024];
    const char *spec = env->submit->spec_json, *rid = env->submit->request_id;
    gb_sweep_def_t def;
    /* the same submit again (its reply was lost): the sweep it made */
    uint64_t made_id = 0;
    uint32_t made_n = 0;
    int had = rid && rid[0] ? gb_store_sweep_by_request(c->store, rid, &made_id, &made_n) : 0;
    if (had != 0) {
        if (had < 0) {
            reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_INTERNAL,
                   env->seq, "submit", gb_store_errmsg(c->store));
            return;
        }
        gb_info("sweep %" PRIu64 ": the same submit again (request %s): answered with it", made_id,
                rid);
        submit_reply(c, f, env->seq, made_id, made_n);
        return;
    }
    if (env->submit->only_if_made) {
        gb_copy(c->withdrawn[c->n_withdrawn++ % 64], sizeof c->withdrawn[0], rid);
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_NOT_FOUND, env->seq,
               "submit", "no sweep was made for this request");
        return;
    }
    for (unsigned i = 0; rid && rid[0] && i < 64 && i < c->n_withdrawn; i++)
        if (strcmp(c->withdrawn[i], rid) == 0) {
            reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_NOT_FOUND,
                   env->seq, "submit",
                   "this request was withdrawn: its client asked whether it had made a sweep, "
                   "and none had been made");
            return;
        }
    /* the limit is this daemon's option, not one of submit's */
    if (gb_spec_parse_limit(spec, strlen(spec), c->cfg.max_jobs_per_sweep,
                            "the coordinator's --max-jobs", &def, err, sizeof err) != 0) {
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_BAD_SPEC, env->seq,
               "submit", err);
        return;
    }
    const gb_jobdef_t *checked = NULL;
    for (size_t i = 0; i < def.n_jobs; i++) {
        if (checked && same_requirements(checked, &def.jobs[i])) continue;
        char why[700];
        if (!satisfiable(c, &def.jobs[i], why, sizeof why)) {
            char *pj = gb_jobdef_to_json(&def.jobs[i]);
            gb_fmt(err, sizeof err, "no known node can run job %zu of the sweep %s: %s", i + 1,
                   pj ? pj : "", why);
            free(pj);
            gb_sweep_def_free(&def);
            reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_UNSATISFIABLE,
                   env->seq, "submit", err);
            return;
        }
        checked = &def.jobs[i];
    }
    size_t open_jobs = gb_map_size(c->jobs);
    if (open_jobs + def.n_jobs > c->cfg.max_queued) {
        gb_fmt(err, sizeof err,
               "the coordinator holds %zu unfinished job(s); %zu more would pass its limit of %zu "
               "(--max-queued): wait for some to end",
               open_jobs, def.n_jobs, c->cfg.max_queued);
        gb_sweep_def_free(&def);
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_LIMIT, env->seq,
               "submit", err);
        return;
    }
    /* The sweep joins the turn's transaction (placement may assign its jobs
     * in the same turn); the reply goes after the commit, or a Reject when
     * the commit fails (flush). */
    char now[32];
    now_iso(now, sizeof now);
    uint64_t sweep_id = 0;
    cjob_t **made = calloc(def.n_jobs, sizeof *made);
    csweep_t *sw = calloc(1, sizeof *sw);
    int ok = made && sw && !c->store_failed && gb_store_begin(c->store) == 0 &&
             gb_store_sweep_insert(c->store, def.name, spec, def.n_jobs, rid, now, &sweep_id) == 0;
    for (size_t i = 0; ok && i < def.n_jobs; i++) {
        const gb_jobdef_t *d = &def.jobs[i];
        char *params = gb_jobdef_to_json(d);
        int resnet = strcmp(d->kind, "resnet50") == 0, gemm = strcmp(d->kind, "gemm") == 0;
        /* a gemm's precision too (fp32 unless given, as its worker runs it):
         * a failed one's row says which it was */
        gb_store_job_t sj = {
            .sweep_id = sweep_id,
            .seq = (int)i,
            .kind = d->kind,
            .params = params,
            .backend = d->backend,
            .precision = resnet ? d->precision
                         : gemm ? (d->precision[0] ? d->precision : "fp32")
                                : NULL,
            /* allreduce's too: an unfinished one's row
             * says which interconnect it was to measure */
            .interconnect = resnet || strcmp(d->kind, "allreduce") == 0 ? d->interconnect : NULL,
            .n_gpus = d->gpus,
            .batch_per_gpu = resnet ? d->batch : -1,
            .synthetic = gb_kind_synthetic(d->kind),
            .max_attempts = d->max_attempts ? d->max_attempts : c->cfg.max_attempts};
        uint64_t job_id = 0;
        made[i] = calloc(1, sizeof *made[i]);
        ok = params && made[i] && gb_store_job_insert(c->store, &sj, now, &job_id) == 0;
        if (ok) {
            made[i]->id = job_id;
            made[i]->sweep_id = sweep_id;
            made[i]->def = *d;
            made[i]->max_attempts = sj.max_attempts;
            made[i]->state = J_QUEUED;
        }
        free(params);
    }
    if (!ok) {
        if (made && sw) store_err(c, "storing a sweep"); /* the turn is rolled back */
        gb_fmt(err, sizeof err, "could not store the sweep: %s",
               made && sw ? gb_store_errmsg(c->store) : "out of memory");
        for (size_t i = 0; made && i < def.n_jobs; i++)
            free(made[i]);
        free(made);
        free(sw);
        gb_sweep_def_free(&def);
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_INTERNAL, env->seq,
               "submit", err);
        return;
    }
    sw->id = sweep_id;
    sw->open = (unsigned)def.n_jobs;
    gb_map_put_u64(c->sweeps, sweep_id, sw);
    for (size_t i = 0; i < def.n_jobs; i++) {
        gb_map_put_u64(c->jobs, made[i]->id, made[i]);
        q_push_back(c, made[i]);
    }
    gb_info("sweep %" PRIu64 " '%s' submitted: %zu job(s)", sweep_id, def.name, def.n_jobs);
    submit_reply(c, f, env->seq, sweep_id, (uint32_t)def.n_jobs);
    free(made);
    gb_sweep_def_free(&def);
}

typedef struct cancel_ctx {
    uint64_t sweep_id, job_id;
    cjob_t **hits;
    size_t n, cap;
} cancel_ctx_t;

static void cancel_collect(void *vctx, void *value) {
    cancel_ctx_t *x = vctx;
    cjob_t *j = value;
    if (j->sweep_id != x->sweep_id || (x->job_id && j->id != x->job_id)) return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        cjob_t **h = realloc(x->hits, cap * sizeof *h);
        if (!h) return;
        x->hits = h;
        x->cap = cap;
    }
    x->hits[x->n++] = j;
}

static int cmp_job_id(const void *a, const void *b) {
    const cjob_t *x = *(cjob_t *const *)a, *y = *(cjob_t *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void on_cancel(gb_coord_t *c, const gb_frame_t *f, const Gb__Envelope *env) {
    const Gb__CancelRequest *rq = env->cancel_request;
    status_ctx_t probe = {0};
    int n = gb_store_sweep_status(c->store, rq->sweep_id, status_row, &probe);
    free(probe.items);
    free(probe.text);
    if (n <= 0) {
        char why[80];
        gb_fmt(why, sizeof why, "no sweep %" PRIu64, rq->sweep_id);
        reject(c, c->control_sock, f->rid, f->rid_len,
               n < 0 ? GB__REJECT_CODE__REJECT_INTERNAL : GB__REJECT_CODE__REJECT_NOT_FOUND,
               env->seq, "cancel", n < 0 ? gb_store_errmsg(c->store) : why);
        return;
    }
    if (rq->job_id) {
        /* a mistyped job id must not read as a successful cancel */
        const cjob_t *j = gb_map_get_u64(c->jobs, rq->job_id);
        char why[160];
        if (j && j->sweep_id != rq->sweep_id)
            gb_fmt(why, sizeof why, "job %" PRIu64 " belongs to sweep %" PRIu64 ", not %" PRIu64,
                   rq->job_id, j->sweep_id, rq->sweep_id);
        else if (!j)
            gb_fmt(why, sizeof why,
                   "no queued or running job %" PRIu64 " in sweep %" PRIu64
                   " (no such job, or it has ended)",
                   rq->job_id, rq->sweep_id);
        if (!j || j->sweep_id != rq->sweep_id) {
            reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_NOT_FOUND,
                   env->seq, "cancel", why);
            return;
        }
    }
    cancel_ctx_t x = {.sweep_id = rq->sweep_id, .job_id = rq->job_id};
    gb_map_each(c->jobs, cancel_collect, &x);
    if (x.n) qsort(x.hits, x.n, sizeof *x.hits, cmp_job_id);
    unsigned cancelled = 0, stopping = 0;
    /* the request's reason (gpubench run: its --timeout ran out), else
     * the default; a job asked twice keeps the first */
    const char *why = rq->reason && rq->reason[0] ? rq->reason : NULL;
    if (!rq->job_id) {
        /* a sweep's queued jobs end in one statement: one per job made
         * cancelling 10,000 a turn of 2.4 s under ASan, 10 s in a loaded
         * CI (past the 10 s `gpubench run` asks for). None holds a reason
         * of its own: a job whose cancel was asked never goes back to the
         * queue (attempt_retry ends it). */
        const char *error = why ? why : CANCEL_DEFAULT;
        char now[32];
        int n = 0;
        now_iso(now, sizeof now);
        if (gb_store_begin(c->store) != 0 ||
            gb_store_sweep_cancel_queued(c->store, rq->sweep_id, error, now, &n) != 0)
            store_err(c, "cancelling the queued jobs of sweep %" PRIu64, rq->sweep_id);
        for (size_t i = 0; i < x.n; i++) {
            cjob_t *j = x.hits[i];
            if (j->state != J_QUEUED) continue;
            gb_debug("job %" PRIu64 " cancelled: %s", j->id, error);
            job_forget(c, j, "cancelled");
            x.hits[i] = NULL;
            cancelled++;
        }
    }
    for (size_t i = 0; i < x.n; i++) {
        cjob_t *j = x.hits[i];
        if (!j) continue;
        if (j->state == J_QUEUED) {
            if (why && !j->cancel_why) j->cancel_why = strdup(why); /* NULL: the default */
            job_finish_ex(c, j, "cancelled", cancel_why(j), 1);
            cancelled++;
        } else if (!j->cancel_requested) {
            j->cancel_requested = 1;
            if (why && !j->cancel_why) j->cancel_why = strdup(why); /* NULL: the default */
            if (gb_store_begin(c->store) != 0 ||
                gb_store_job_cancel_requested(c->store, j->id, j->cancel_why) != 0)
                store_err(c, "cancelling job %" PRIu64, j->id);
            j->cancel_sent_ms = gb_mono_ms();
            /* last: a gang whose other ranks had all ended (one's failure
             * held) ends here, and j is freed (it was written after) */
            uint64_t id = j->id;
            if (j->gang)
                gang_cancel(c, j);
            else
                send_cancel(c, j->agent->id, j->id, j->attempt, cancel_why(j));
            if (gb_map_get_u64(c->jobs, id) == j)
                stopping++;
            else
                cancelled++; /* ended already */
        }
    }
    free(x.hits);
    /* once committed: the queued jobs' own lines are at debug level */
    log_ending(c, "sweep %" PRIu64 ": cancelled %u queued job(s), stopping %u running",
               rq->sweep_id, cancelled, stopping);
    Gb__CancelReply cr = GB__CANCEL_REPLY__INIT;
    cr.cancelled = cancelled;
    cr.stopping = stopping;
    Gb__Envelope reply = GB__ENVELOPE__INIT;
    reply.seq = env->seq;
    reply.body_case = GB__ENVELOPE__BODY_CANCEL_REPLY;
    reply.cancel_reply = &cr;
    send_after_commit_or(c, c->control_sock, f->rid, f->rid_len, &reply,
                         GB__REJECT_CODE__REJECT_INTERNAL);
}

/* nodes --forget: every agent not connected whose name or id is rq->node
 * stops counting. Jobs it was running (waiting for it to come back) are
 * queued again, without using up an attempt; queued jobs that no remaining
 * node can run fail with the reason, instead of waiting forever. */
static void on_forget(gb_coord_t *c, const gb_frame_t *f, const Gb__Envelope *env) {
    const char *node = env->forget->node;
    cagent_t *hit[64];
    size_t n = 0, connected = 0, forgotten = 0;
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        if (strcmp(a->id, node) != 0 && strcmp(a->name, node) != 0) continue;
        if (a->forgotten) {
            forgotten++;
            continue;
        }
        if (a->state == A_CONNECTED)
            connected++;
        else if (n < sizeof hit / sizeof hit[0])
            hit[n++] = a;
    }
    if (connected || n == 0) {
        char why[600];
        if (connected && n)
            gb_fmt(why, sizeof why,
                   "'%s' names %zu agents, one of them connected: forget the gone one by its "
                   "agent id (%s%s; see gpubench nodes --format csv)",
                   node, n + connected, hit[0]->id, n > 1 ? ", ..." : "");
        else if (connected)
            gb_fmt(why, sizeof why,
                   "node '%s' is connected: stop its agent first (only a node that is gone can "
                   "be forgotten)",
                   node);
        else if (forgotten) /* a second forget: not a typo of a name */
            gb_fmt(why, sizeof why,
                   "node '%s' is forgotten already (v_nodes.forgotten_at; its agent registering "
                   "again makes it known again)",
                   node);
        else
            gb_fmt(why, sizeof why, "no known node '%s' (by name or agent id; see gpubench nodes)",
                   node);
        reject(c, c->control_sock, f->rid, f->rid_len,
               connected ? GB__REJECT_CODE__REJECT_RANGE : GB__REJECT_CODE__REJECT_NOT_FOUND,
               env->seq, "forget", why);
        return;
    }
    char now[32], reason[300];
    now_iso(now, sizeof now);
    unsigned requeued = 0, failed = 0;
    char *ids[64];
    for (size_t k = 0; k < n; k++) {
        cagent_t *a = hit[k];
        gb_fmt(reason, sizeof reason, "node %s (agent %s) was forgotten", a->name, a->id);
        while (a->n_running > 0) {
            attempt_lost_ex(c, a->running[0], reason, 0, a);
            requeued++;
        }
        a->forgotten = 1;
        c->n_forgotten++;
        if (gb_store_begin(c->store) != 0 || gb_store_node_forget(c->store, a->id, now) != 0)
            store_err(c, "forgetting node %s", a->id);
        gb_info("%s", reason);
        ids[k] = a->id;
    }
    /* what waited for the forgotten nodes alone can never run now */
    for (cjob_t *j = c->q_head, *next; j; j = next) {
        next = j->next;
        char why[700], err[1000];
        if (satisfiable(c, &j->def, why, sizeof why)) continue;
        gb_fmt(err, sizeof err, "no known node can run it since node %s was forgotten: %s",
               hit[0]->name, why);
        job_finish(c, j, "failed", err);
        failed++;
    }
    c->dirty = 1;
    Gb__ForgetReply fr = GB__FORGET_REPLY__INIT;
    fr.n_agent_ids = n;
    fr.agent_ids = ids;
    fr.requeued = requeued;
    fr.failed = failed;
    fr.node_name = hit[0]->name;
    Gb__Envelope reply = GB__ENVELOPE__INIT;
    reply.seq = env->seq;
    reply.body_case = GB__ENVELOPE__BODY_FORGET_REPLY;
    reply.forget_reply = &fr;
    send_after_commit_or(c, c->control_sock, f->rid, f->rid_len, &reply,
                         GB__REJECT_CODE__REJECT_INTERNAL);
}

/* The per-peer rate limit of the control endpoint. The peer is its CURVE
 * key, else its address: a command opens a fresh connection (and routing
 * id) for every request, so the routing id would not hold a peer to its
 * budget. Every message counts, well-formed or not. */
static int rate_ok(gb_coord_t *c, gb_frame_t *f, uint64_t seq) {
    if (!c->rate) return 1;
    const char *peer = peer_key(c, f);
    char local[128];
    if (!peer) {
        peer = zmq_msg_gets(&f->payload, "Peer-Address");
        /* over ipc:// libzmq gives "host:uid:gid:pid": a new pid for every
         * command, so the bucket is the user's (drop the pid) */
        const char *last = peer ? strrchr(peer, ':') : NULL;
        if (last && strncmp(c->cfg.control, "ipc://", 6) == 0 &&
            (size_t)(last - peer) < sizeof local) {
            memcpy(local, peer, (size_t)(last - peer));
            local[last - peer] = '\0';
            peer = local;
        }
    }
    if (!peer || !*peer) peer = "local";
    /* every loopback address is this host's users: one bucket (a command
     * given the source tcp://127.0.0.N:0;... had a bucket per N, 127/8's
     * worth of them) */
    if (strncmp(peer, "127.", 4) == 0 || strcmp(peer, "::1") == 0 ||
        strncmp(peer, "::ffff:127.", 11) == 0)
        peer = "loopback";
    int64_t retry = 0;
    if (gb_rate_take(c->rate, peer, strlen(peer), gb_mono_ms(), &retry)) return 1;
    char why[300];
    gb_fmt(why, sizeof why,
           "rate limit: more than %.0f requests a second (burst %.0f) from %s; retry in %" PRId64
           " ms",
           c->cfg.rate_per_s, c->cfg.rate_burst, peer, retry);
    reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_RATE, seq, "request",
           why);
    return 0;
}

static void on_control_message_(gb_coord_t *c, gb_frame_t *f);

static void on_control_message(gb_coord_t *c, gb_frame_t *f) {
    c->cur_msg = f->parts ? &f->payload : NULL;
    /* which connection spoke (ZMQ_SRCFD): one that closes without a whole
     * message had its frame dropped by libzmq, over the hard cap */
    int fd = zmq_msg_get(&f->payload, ZMQ_SRCFD);
    if (fd >= 0) c->srcfd_works = 1;
    if (fd >= 0 && c->spoke) {
        intptr_t n = (intptr_t)gb_map_get(c->spoke, &fd, sizeof fd);
        gb_map_put(c->spoke, &fd, sizeof fd, (void *)(n + 1));
    }
    on_control_message_(c, f);
    c->cur_msg = NULL;
}

static void on_control_message_(gb_coord_t *c, gb_frame_t *f) {
    char why[512];
    if (f->parts != 1) {
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_DECODE, 0, "request",
               f->parts == 0 ? "empty message" : "a request must be exactly one frame");
        return;
    }
    Gb__Envelope *env = NULL;
    uint64_t seq = 0;
    /* a spec may be larger than an agent frame; the wire caps it */
    size_t max =
        c->cfg.max_frame > GB_WIRE_SPEC_MAX + 1024 ? c->cfg.max_frame : GB_WIRE_SPEC_MAX + 1024;
    int code = gb_wire_decode(zmq_msg_data(&f->payload), zmq_msg_size(&f->payload), max, &env, &seq,
                              why, sizeof why);
    if (!rate_ok(c, f, seq)) {
        gb_wire_free(&env);
        return;
    }
    if (code) {
        reject(c, c->control_sock, f->rid, f->rid_len, code, seq, "request", why);
        return;
    }
    if (!key_still_allowed(c, f, c->control_sock, env->seq, gb_wire_body_name(env->body_case))) {
        gb_wire_free(&env);
        return;
    }
    switch (env->body_case) {
    case GB__ENVELOPE__BODY_SUBMIT:
        on_submit(c, f, env);
        break;
    case GB__ENVELOPE__BODY_STATUS:
        on_status(c, f, env);
        break;
    case GB__ENVELOPE__BODY_NODES:
        on_nodes(c, f, env);
        break;
    case GB__ENVELOPE__BODY_CANCEL_REQUEST:
        on_cancel(c, f, env);
        break;
    case GB__ENVELOPE__BODY_FORGET:
        on_forget(c, f, env);
        break;
    default:
        reject(c, c->control_sock, f->rid, f->rid_len, GB__REJECT_CODE__REJECT_UNEXPECTED, env->seq,
               gb_wire_body_name(env->body_case),
               "the control endpoint takes submit, status, nodes, cancel_request, forget");
    }
    gb_wire_free(&env);
}

/* ---- timers --------------------------------------------------------------- */

/* Agents known from the store get longer to come back after a restart than
 * a running agent gets to answer: they have to notice the silence and
 * reconnect (with libzmq's back-off) first. */
static int64_t restart_grace_ms(const gb_coord_t *c) {
    int64_t w = lost_window_ms(c);
    return w * 2 > w + 2000 ? w * 2 : w + 2000;
}

/* Whether ms without running is a stall to forgive: over a second and
 * over two heartbeats (a busy turn or a slow poll is not). */
static int stalled(const gb_coord_t *c, int64_t ms) {
    return ms > 1000 && ms > 2 * (int64_t)c->cfg.heartbeat_ms;
}

/* The coordinator itself did not run for stall_ms (SIGSTOP, a paused VM,
 * a turn stuck in SQLite's busy wait): its agents' silence over that time
 * is not theirs. Their clocks move on by it: every agent was found lost
 * after a stall of a lost window, and jobs running fine failed with
 * --max-attempts 1 (their heartbeats were queued, or their reconnect's
 * handshake not yet done, when the check ran). */
static void forgive_stall(gb_coord_t *c, int64_t stall_ms) {
    int64_t now = gb_mono_ms();
    unsigned pass = ++c->stall_passes;
    gb_warn("the coordinator did not run for %" PRId64 " ms (stopped, or a turn that long): "
            "its agents' silence over that time is not held against them",
            stall_ms);
    /* when something last happened: later by the stall, never past now */
#define LATER(t) ((t) = (t) + stall_ms < now ? (t) + stall_ms : now)
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        LATER(a->last_heard_ms);
        if (a->stopped_ms) LATER(a->stopped_ms);
        if (a->claimed_ms) LATER(a->claimed_ms);
        for (int k = 0; k < a->n_running; k++) {
            cjob_t *j = a->running[k];
            if (!j->gang) {
                LATER(j->assigned_ms);
            } else if (j->gang->stall_pass != pass) { /* a gang: on several agents */
                j->gang->stall_pass = pass;
                /* deadlines: moved whole (the hold outlasts a peer's lost
                 * window by design, so that its loss is found first) */
                j->gang->deadline_ms += stall_ms;
                if (j->gang->held) j->gang->held_until_ms += stall_ms;
                for (int r = 0; r < gb_gang_size(j->gang->g); r++)
                    if (j->gang->assigned_ms[r]) LATER(j->gang->assigned_ms[r]);
            }
        }
    }
#undef LATER
}

static void check_liveness(gb_coord_t *c) {
    int64_t now = gb_mono_ms(), window = lost_window_ms(c), grace = restart_grace_ms(c);
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        int64_t limit = a->state == A_DISCONNECTED || (a->claimed_ms && now - a->claimed_ms < grace)
                            ? grace
                            : window;
        if (a->state == A_STOPPED && a->n_running > 0 && !a->forgotten &&
            now - a->stopped_ms > grace) {
            /* it stopped holding results and has not come back with them */
            char reason[300];
            gb_fmt(reason, sizeof reason,
                   "agent %s stopped (SIGTERM/SIGINT) holding its result unsent, and has not "
                   "come back with it within %" PRId64 " ms",
                   a->name, grace);
            while (a->n_running > 0)
                attempt_lost_ex(c, a->running[0], reason, 0, a);
            continue;
        }
        /* agent messages left unread this turn may be its heartbeats */
        if (a->state == A_LOST || a->state == A_STOPPED || a->forgotten || c->agent_backlog ||
            now - a->last_heard_ms <= limit)
            continue;
        char reason[300];
        gb_fmt(reason, sizeof reason, "agent %s lost (silent for %" PRId64 " ms)", a->name,
               now - a->last_heard_ms);
        gb_warn("%s", reason);
        agent_set_state(c, a, A_LOST);
        while (a->n_running > 0)
            attempt_lost_ex(c, a->running[0], reason, 1, a);
    }
    /* assigned but never started: the assignment or its answer was lost.
     * Given the restart grace, not one lost window: an agent starting
     * workers on a loaded node (four at once after a coordinator restart,
     * under ASan) took over half a second, and jobs ran out of attempts */
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        if (a->seen_dirty) { /* last_seen of the heartbeats, or a state to write again */
            a->seen_dirty = 0;
            if (gb_store_begin(c->store) != 0 ||
                gb_store_node_state(c->store, a->id, agent_state_names[a->state], a->last_seen) !=
                    0)
                store_err(c, "node %s last seen", a->name);
        }
        if (a->state != A_CONNECTED) continue; /* handled above, as a whole */
        for (int k = 0; k < a->n_running;) {
            cjob_t *j = a->running[k];
            if (!j->gang && !j->started && !c->agent_backlog && now - j->assigned_ms > grace) {
                char reason[300];
                gb_fmt(reason, sizeof reason, "agent %s did not start it within %" PRId64 " ms",
                       a->name, grace);
                attempt_lost(c, j, reason);
            } else {
                k++;
            }
        }
    }
    gang_check(c); /* rendezvous deadlines */
}

/* Heartbeats to the agents, spread over the interval: a cursor goes round
 * the registry once per interval and each turn sends to the share that came
 * due since the last one, so 2,000 agents cost 2,000 small sends a second
 * but never 2,000 in one turn (which would delay whatever waits behind it). */
static void send_heartbeats(gb_coord_t *c, int64_t now_us) {
    double due = c->hb_carry + (double)(now_us - c->hb_last_us) * (double)c->n_agents /
                                   ((double)c->cfg.heartbeat_ms * 1000.0);
    c->hb_last_us = now_us;
    if (due > (double)c->n_agents) due = (double)c->n_agents;
    size_t n = (size_t)due;
    c->hb_carry = due - (double)n;
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    for (size_t k = 0; k < n; k++) {
        if (c->hb_cursor >= c->n_agents) c->hb_cursor = 0;
        cagent_t *a = c->agent_list[c->hb_cursor++];
        if (a->state != A_CONNECTED) continue;
        env.seq = 0;
        send_now(c, c->agents_sock, (const uint8_t *)a->id, strlen(a->id), &env);
    }
}

/* ---- flush ---------------------------------------------------------------- */

static void resync(gb_coord_t *c);

static void out_send(outmsg_t *m) {
    if (zmq_send(m->sock, m->rid, m->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(m->sock, m->buf, m->len, ZMQ_DONTWAIT) < 0)
        gb_debug("cannot send a queued message: %s", zmq_strerror(errno));
    free(m->buf);
    m->buf = NULL;
}

/* Keep m (and its buffer) until commit c->commit_seq is durable. */
static void hold(gb_coord_t *c, outmsg_t *m) {
    if (c->held_head > 0 && c->held_head == c->n_held) c->held_head = c->n_held = 0;
    if (c->n_held == c->held_cap) {
        if (c->held_head > 0) { /* reuse the room at the front */
            memmove(c->held, c->held + c->held_head, (c->n_held - c->held_head) * sizeof *c->held);
            c->n_held -= c->held_head;
            c->held_head = 0;
        }
        if (c->n_held == c->held_cap) {
            size_t cap = c->held_cap ? c->held_cap * 2 : 256;
            outmsg_t *v = realloc(c->held, cap * sizeof *v);
            if (!v) { /* not acknowledged: the agent resends */
                gb_error("out of memory holding a message");
                free(m->buf);
                m->buf = NULL;
                return;
            }
            c->held = v;
            c->held_cap = cap;
        }
    }
    c->held[c->n_held] = *m;
    c->held[c->n_held].seq = c->commit_seq;
    c->n_held++;
    m->buf = NULL;
}

/* Send what waited for a commit that is durable now. */
static void release_held(gb_coord_t *c) {
    if (!c->syncer) return;
    char err[300];
    int64_t done = gb_syncer_done(c->syncer, err, sizeof err);
    if (done < 0) {
        gb_error("store: %s: the store can no longer promise durability; stopping (the agents "
                 "resend what was not acknowledged)",
                 err);
        c->fatal = 1;
        return;
    }
    while (c->held_head < c->n_held && c->held[c->held_head].seq <= (uint64_t)done)
        out_send(&c->held[c->held_head++]);
}

/* End the turn: commit, then send what waited for the commit. When a
 * statement of the turn or the commit failed, roll the turn back, send
 * nothing of it (a request that wrote gets a Reject), reload memory from the
 * store, and pause placement for a while (doubling up to 5 s) so a full
 * disk is not hammered: the agents resend their results meanwhile. What
 * the reload itself writes and queues (the multi-node attempts it gives
 * up, the cancels of their ranks) is committed and sent with the next turn
 * that writes, or after the back-off. */
static void flush(gb_coord_t *c) {
    if (c->reload_changes) {
        if (!c->store_failed && gb_store_changes(c->store) == c->reload_changes &&
            gb_mono_ms() < c->store_retry_ms) {
            release_held(c);
            return; /* the transaction and the outbox wait for the back-off */
        }
        c->reload_changes = 0;
    }
    int had_tx = gb_store_in_tx(c->store);
    int ok = !c->store_failed && gb_store_commit(c->store) == 0;
    if (ok && had_tx) {
        c->commit_seq++;
        if (c->syncer) gb_syncer_request(c->syncer, c->commit_seq);
    }
    if (ok) {
        endings_done(c, 1); /* right after the commit: what the store says now */
        /* the store takes real work again (an empty transaction proves
         * nothing about a full disk) */
        if (had_tx && c->n_acks + c->n_assigns > 0) {
            c->store_backoff_ms = 0;
            c->store_retry_ms = 0;
        }
        for (size_t i = 0; i < c->n_out; i++) {
            outmsg_t *m = &c->out[i];
            if (c->syncer && m->need_sync) {
                hold(c, m); /* the buffer moves to the held queue */
                continue;
            }
            out_send(m);
        }
    } else {
        char why[512];
        gb_copy(why, sizeof why, gb_store_errmsg(c->store));
        store_damaged(c);
        gb_store_rollback(c->store);
        c->store_failures++;
        c->store_backoff_ms = c->store_backoff_ms ? c->store_backoff_ms * 2 : STORE_BACKOFF_MIN_MS;
        if (c->store_backoff_ms > STORE_BACKOFF_MAX_MS) c->store_backoff_ms = STORE_BACKOFF_MAX_MS;
        c->store_retry_ms = gb_mono_ms() + c->store_backoff_ms;
        /* a full disk fails every turn that writes: one line every 10 s */
        int64_t now = gb_mono_ms();
        if (now - c->store_fail_logged_ms >= 10000) {
            gb_error("store: commit failed (%s): turn rolled back, %zu result(s) not acknowledged "
                     "(their agents resend), %zu assignment(s) not sent; state reloaded from the "
                     "store, placement paused %d ms (%lu failed turn(s) so far)",
                     why, c->n_acks, c->n_assigns, c->store_backoff_ms, c->store_failures);
            c->store_fail_logged_ms = now;
        } else {
            gb_debug("store: commit failed again (%s)", why);
        }
        char reason[700];
        gb_fmt(reason, sizeof reason,
               "the coordinator could not commit this to its store (%s): nothing of it was kept, "
               "try again",
               why);
        for (size_t i = 0; i < c->n_out; i++) {
            outmsg_t *m = &c->out[i];
            if (m->fail_code)
                reject(c, m->sock, m->rid, m->rid_len, m->fail_code, m->ref_seq, "request", reason);
            free(m->buf);
        }
        c->n_out = c->n_acks = c->n_assigns = 0;
        endings_done(c, 0);
        c->store_failed = 0;
        int64_t before = gb_store_changes(c->store);
        resync(c); /* may write, and queue messages for the next commit */
        if (gb_store_changes(c->store) != before) c->reload_changes = gb_store_changes(c->store);
        release_held(c);
        return;
    }
    for (size_t i = 0; i < c->n_out; i++)
        free(c->out[i].buf);
    c->n_out = c->n_acks = c->n_assigns = 0;
    release_held(c);
}

/* ---- lifecycle ------------------------------------------------------------ */

static void load_node(void *vctx, const gb_store_node_t *n) {
    gb_coord_t *c = vctx;
    cagent_t *a = agent_add(c, n->agent_id);
    if (!a) return;
    gb_copy(a->name, sizeof a->name, n->name);
    gb_copy(a->cpu_model, sizeof a->cpu_model, n->cpu_model ? n->cpu_model : "");
    gb_copy(a->gpu_model, sizeof a->gpu_model, n->gpu_model ? n->gpu_model : "");
    gb_copy(a->labels, sizeof a->labels, n->labels ? n->labels : "");
    gb_copy(a->kinds, sizeof a->kinds, n->kinds ? n->kinds : "");
    /* the CPU's precisions live in the stored inventory only */
    a->cpu_precisions[0] = '\0';
    cJSON *inv = n->inventory_json ? cJSON_Parse(n->inventory_json) : NULL;
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(inv, "cpu_precisions"), *e;
    size_t po = 0;
    cJSON_ArrayForEach(e, pr) {
        if (!cJSON_IsString(e)) continue;
        int k = snprintf(a->cpu_precisions + po, sizeof a->cpu_precisions - po, "%s%s",
                         po ? "," : "", e->valuestring);
        if (k < 0 || (size_t)k >= sizeof a->cpu_precisions - po) break;
        po += (size_t)k;
    }
    gb_copy(a->last_seen, sizeof a->last_seen, n->last_seen ? n->last_seen : "");
    a->n_gpus = n->n_gpus;
    a->cpu_cores = n->cpu_cores;
    a->slots = n->slots > 0 && n->slots <= MAX_SLOTS ? n->slots : 1;
    a->has_nvlink = n->has_nvlink;
    /* links from the stored inventory; none stored: not known */
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(inv, "links");
    a->nvlink_known = cJSON_IsArray(links);
    a->nvlink_sets = a->nvlink_known
                         ? nvlink_sets_of((size_t)cJSON_GetArraySize(links), a->n_gpus, NULL, links)
                         : 0;
    cJSON_Delete(inv);
    a->state = strcmp(n->state, "lost") == 0      ? A_LOST
               : strcmp(n->state, "stopped") == 0 ? A_STOPPED
                                                  : A_DISCONNECTED;
    a->last_heard_ms = a->stopped_ms = gb_mono_ms(); /* a stopped one's jobs: a grace from now */
    gb_copy(a->key, sizeof a->key, n->agent_key ? n->agent_key : ""); /* the pin survives */
    /* a forgotten node keeps its id's pin across a restart too: not loaded,
     * its id was free for any listed key, which took the node's identity */
    if (n->forgotten && !a->forgotten) {
        a->forgotten = 1;
        c->n_forgotten++;
    }
}

static void load_job(void *vctx, const gb_store_job_t *sj) {
    gb_coord_t *c = vctx;
    cjob_t *j = calloc(1, sizeof *j);
    char err[300];
    if (!j) return;
    if (gb_jobdef_from_json(sj->params, strlen(sj->params), &j->def, err, sizeof err) != 0) {
        gb_error("job %" PRIu64 " has unreadable parameters (%s): failing it", sj->job_id, err);
        char now[32];
        now_iso(now, sizeof now);
        gb_store_job_finish(c->store, sj->job_id, "failed", err, now);
        sweep_job_ended(c, sj->sweep_id, "failed");
        free(j);
        return;
    }
    j->id = sj->job_id;
    j->sweep_id = sj->sweep_id;
    j->attempt = sj->attempt;
    j->max_attempts = sj->max_attempts;
    j->refused = sj->free_attempts;
    j->cancel_requested = sj->cancel_requested;
    /* the reason survives a restart (schema 0017); none stored: the default */
    if (sj->cancel_requested && sj->cancel_reason && sj->cancel_reason[0])
        j->cancel_why = strdup(sj->cancel_reason);
    gb_map_put_u64(c->jobs, j->id, j);
    cagent_t *a = sj->agent_id ? agent_get(c, sj->agent_id) : NULL;
    if (a && a->forgotten) a = NULL; /* its jobs were given back when it was forgotten */
    if (strcmp(sj->state, "running") == 0 && a && a->n_running < MAX_SLOTS && !is_multi(j)) {
        j->state = J_RUNNING;
        j->agent = a;
        j->started = sj->attempt_state && strcmp(sj->attempt_state, "running") == 0;
        j->assigned_ms = gb_mono_ms();
        gb_copy(j->backend, sizeof j->backend, sj->attempt_backend ? sj->attempt_backend : "cpu");
        a->running[a->n_running++] = j;
    } else if (strcmp(sj->state, "running") == 0) {
        j->state = J_RUNNING; /* its agent is unknown: lose the attempt after loading */
        j->agent = NULL;
    } else {
        j->state = J_QUEUED;
        q_push_back(c, j);
    }
}

static void load_sweep(void *vctx, const gb_store_sweep_status_t *s) {
    gb_coord_t *c = vctx;
    if (strcmp(s->state, "running") != 0) return;
    csweep_t *sw = calloc(1, sizeof *sw);
    if (!sw) return;
    sw->id = s->sweep_id;
    sw->open = s->queued + s->running;
    sw->failed = s->failed;
    sw->cancelled = s->cancelled;
    gb_map_put_u64(c->sweeps, sw->id, sw);
}

typedef struct orphan_ctx {
    cjob_t **v;
    size_t n, cap;
} orphan_ctx_t;

static void find_orphans(void *vctx, void *value) {
    orphan_ctx_t *x = vctx;
    cjob_t *j = value;
    if (j->state != J_RUNNING || j->agent) return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        cjob_t **v = realloc(x->v, cap * sizeof *v);
        if (!v) return;
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = j;
}

typedef struct empty_ctx {
    uint64_t ids[256];
    size_t n;
} empty_ctx_t;

static void find_empty_sweeps(void *vctx, void *value) {
    empty_ctx_t *x = vctx;
    csweep_t *s = value;
    if (s->open == 0 && x->n < 256) x->ids[x->n++] = s->id;
}

static void stop_handed_rank(void *vctx, int rank, const char *agent_id) {
    gb_coord_t *c = ((void **)vctx)[0];
    const cjob_t *j = ((void **)vctx)[1];
    cagent_t *a = agent_get(c, agent_id);
    if (!a || a->state != A_CONNECTED) return; /* told when it registers again (on_hello) */
    gb_info("job %" PRIu64 " attempt %u: stopping rank %d on %s (the attempt is given up)", j->id,
            j->attempt, rank, a->name);
    send_cancel(c, a->id, j->id, j->attempt, "stopped: the multi-node attempt was given up");
}

/* Sweeps and unfinished jobs from the store into memory (the agents are
 * loaded): running jobs go to their agents, a job whose agent the store does
 * not know loses its attempt, and a sweep whose last job ended just before
 * a crash is finished. A running multi-node attempt loses its attempt too,
 * without using one up: its rendezvous lived in memory that is gone (a
 * restart, or `reload`: a rolled-back turn); its ranks still on connected
 * agents are stopped after the next commit, the others when their agents
 * register. Writes join the open transaction. */
static int load_work(gb_coord_t *c, int reload) {
    if (gb_store_sweep_status(c->store, 0, load_sweep, c) < 0 || gb_store_begin(c->store) != 0 ||
        gb_store_load_jobs(c->store, load_job, c) != 0)
        return -1;
    char now[32];
    now_iso(now, sizeof now);
    orphan_ctx_t o = {0};
    gb_map_each(c->jobs, find_orphans, &o);
    for (size_t i = 0; i < o.n; i++) {
        cjob_t *j = o.v[i];
        if (is_multi(j)) {
            const char *why =
                reload ? "a commit failed during this multi-node attempt: the coordinator "
                         "reloaded its state from the store"
                       : "the coordinator restarted during this multi-node attempt";
            void *ctx[2] = {c, j};
            if (gb_ranks_handed(c->ranks, j->id, j->attempt, stop_handed_rank, ctx) != 0 ||
                gb_ranks_abandon(c->ranks, j->id, j->attempt, why, now) != 0)
                store_err(c, "giving up attempt %u of job %" PRIu64, j->attempt, j->id);
            attempt_lost_ex(c, j, why, 0, NULL);
        } else {
            attempt_lost(c, j, "its agent is not in the store");
        }
    }
    free(o.v);
    for (;;) {
        empty_ctx_t e = {.n = 0};
        gb_map_each(c->sweeps, find_empty_sweeps, &e);
        if (e.n == 0) break;
        for (size_t i = 0; i < e.n; i++) {
            csweep_t *s = gb_map_get_u64(c->sweeps, e.ids[i]);
            s->open = 1;
            sweep_job_ended(c, e.ids[i], "done");
        }
    }
    c->dirty = 1;
    return 0;
}

static void max_sweep(void *ctx, void *value) {
    uint64_t *m = ctx;
    const csweep_t *s = value;
    if (s->id > *m) *m = s->id;
}

static int load_state(gb_coord_t *c, char *err, size_t errlen) {
    if (gb_store_load_nodes(c->store, load_node, c) != 0 || load_work(c, 0) != 0) {
        gb_fmt(err, errlen, "cannot load the store: %s", gb_store_errmsg(c->store));
        return -1;
    }
    if (c->cfg.new_sweeps_only) { /* a sweep made now has an id above every one there */
        uint64_t m = 0;
        gb_map_each(c->sweeps, max_sweep, &m);
        c->place_min_sweep = m + 1;
        if (m)
            gb_info("the store's unfinished sweeps (up to %" PRIu64 ") are left for their own "
                    "coordinator",
                    m);
    }
    char now[32];
    now_iso(now, sizeof now);
    size_t running = 0;
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        /* a forgotten node's row stays as it was forgotten (its last_seen
         * moved at every restart, past its forgotten_at) */
        if (a->state == A_DISCONNECTED && !a->forgotten)
            gb_store_node_state(c->store, a->id, "disconnected", now);
        running += (size_t)a->n_running;
    }
    if (c->store_failed || gb_store_commit(c->store) != 0) {
        gb_fmt(err, errlen, "cannot update the store: %s", gb_store_errmsg(c->store));
        gb_store_rollback(c->store);
        endings_done(c, 0);
        return -1;
    }
    endings_done(c, 1);
    if (c->n_agents || gb_map_size(c->jobs))
        gb_info("resumed: %zu node(s) known, %zu job(s) queued, %zu running",
                c->n_agents - c->n_forgotten, c->n_queued, running);
    return 0;
}

static void resync_node(void *vctx, const gb_store_node_t *n) {
    gb_coord_t *c = vctx;
    cagent_t *a = agent_get(c, n->agent_id);
    if (!a) {
        load_node(c, n);
        a = agent_get(c, n->agent_id);
    } else if (n->forgotten && !a->forgotten) {
        /* its Hello after a forget was rolled back: forgotten again, and
         * asked to register again (below) */
        a->forgotten = 1;
        c->n_forgotten++;
        return;
    } else if (!n->forgotten && a->forgotten) {
        /* the forget was rolled back: known again */
        a->forgotten = 0;
        c->n_forgotten--;
        a->seen_dirty = 1;
    } else if (strcmp(n->state, agent_state_names[a->state]) != 0) {
        a->seen_dirty = 1; /* its state was rolled back: write it again */
    }
    if (a) a->in_store = 1;
}

/* After a rolled-back turn: the jobs and sweeps in memory are replaced by
 * those of the store. Agents keep their connections; one whose
 * registration was rolled back is treated as unknown (its next message
 * gets unknown_agent and it registers again); one given up as lost in the
 * rolled-back turn is given up again by the next liveness check. Running
 * multi-node attempts are given up (load_work): their groups are freed
 * with their jobs, and the rendezvous they were in cannot be rebuilt from
 * the store. */
static void resync(gb_coord_t *c) {
    gb_map_clear(c->jobs, free_job, NULL); /* multi-node groups with them */
    gb_map_clear(c->sweeps, free_value, NULL);
    c->q_head = c->q_tail = NULL;
    c->n_queued = 0;
    for (size_t i = 0; i < c->n_agents; i++) {
        c->agent_list[i]->n_running = 0;
        c->agent_list[i]->in_store = 0;
        c->agent_list[i]->hello_hash = 0; /* what was written may have been rolled back */
        c->agent_list[i]->n_stale = 0;    /* and the stops sent with it were dropped */
    }
    if (gb_store_load_nodes(c->store, resync_node, c) != 0 || load_work(c, 1) != 0) {
        gb_error("store: cannot reload the state (%s): stopping", gb_store_errmsg(c->store));
        c->fatal = 1;
        return;
    }
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        if (!a->in_store)
            a->state = A_LOST; /* memory only: it is asked to register again */
        else if (a->state == A_LOST && a->n_running > 0)
            a->state = A_DISCONNECTED; /* silent already: lost again at the next tick */
        else if (a->state == A_STOPPED)
            a->stopped_ms = gb_mono_ms(); /* its jobs given back, free, after the grace */
        for (int k = 0; k < a->n_running; k++)
            a->running[k]->assigned_ms = gb_mono_ms(); /* a fresh window to report it */
    }
    gb_debug("state reloaded from the store: %zu job(s) unfinished, %zu queued",
             gb_map_size(c->jobs), c->n_queued);
}

static void *open_monitor(gb_coord_t *c, void *sock, const char *name);

/* A coordinator holds one descriptor per agent connection: lift the soft
 * limit to the hard one (Debian's soft default, 1024, is below a fleet of
 * 2,000 agents). */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) gb_debug("cannot raise the descriptor limit");
    }
}

/* Does a process accept connections on ipc://PATH now? (A socket file
 * left by one that died refuses them.) */
static int ipc_in_use(const char *ep) {
    if (strncmp(ep, "ipc://", 6) != 0) return 0;
    const char *path = ep + 6;
    struct sockaddr_un a;
    if (!path[0] || path[0] == '@' || strcmp(path, "*") == 0 || strlen(path) >= sizeof a.sun_path)
        return 0;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int up = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return up;
}

/* What binding ipc://PATH would destroy: libzmq unlinks whatever is at
 * PATH before it binds, a store or any other file included. */
static int ipc_path_check(const gb_coord_config_t *cfg, const char *ep, char *err, size_t errlen) {
    if (strncmp(ep, "ipc://", 6) != 0) return 0;
    const char *path = ep + 6;
    if (!path[0] || path[0] == '@' || strcmp(path, "*") == 0) return 0;
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        gb_fmt(err, errlen,
               "cannot bind %s: %s exists and is not a socket (binding would delete it); give "
               "another path",
               ep, path);
        return -1;
    }
    char side[PATH_MAX + 16];
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        if (gb_fmt(side, sizeof side, "%s%s", cfg->db_path, sfx[i]) != 0) continue;
        if (gb_same_path(path, side)) {
            gb_fmt(err, errlen, "cannot bind %s: that is the store's path (--db %s)", ep,
                   cfg->db_path);
            return -1;
        }
    }
    return 0;
}

static void *bind_router(gb_coord_t *c, const char *ep, size_t maxmsg, char *out, size_t outlen,
                         char *err, size_t errlen) {
    void *s = zmq_socket(c->ctx, ZMQ_ROUTER);
    if (!s) {
        gb_fmt(err, errlen, "cannot create a socket: %s", zmq_strerror(errno));
        return NULL;
    }
    int one = 1, zero = 0, hwm = 100000, handshake_ms = 5000;
    int64_t max = (int64_t)maxmsg;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    /* a connection that does not finish its handshake in 5 s is dropped */
    zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
    if (c->auth) {
        if (gb_curve_server_apply(s, c->secret, err, errlen) != 0) {
            zmq_close(s);
            return NULL;
        }
        /* the ZAP domain names the endpoint in the handler's log lines,
         * and is what a key's role in --authorized is checked against */
        const char *domain = out == c->listen_ep ? GB_AUTH_AGENTS : GB_AUTH_CONTROL;
        if (zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0) {
            gb_fmt(err, errlen, "cannot set the ZAP domain of the %s endpoint: %s", domain,
                   zmq_strerror(errno));
            zmq_close(s);
            return NULL;
        }
    }
    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    /* an IPv6 address (tcp://[::]:P, [::1]:P) binds, and [::] takes IPv4
     * peers too; IPv4 endpoints stay IPv4 sockets (and say so in
     * ZMQ_LAST_ENDPOINT, not as [::ffff:127.0.0.1]) */
    if (strncmp(ep, "tcp://[", 7) == 0) zmq_setsockopt(s, ZMQ_IPV6, &one, sizeof one);
    if (ipc_in_use(ep)) {
        /* libzmq would unlink the other's socket file and bind anyway,
         * leaving that process unreachable */
        gb_fmt(err, errlen, "cannot bind %s: another process is listening there", ep);
        zmq_close(s);
        return NULL;
    }
    /* A port named outright (a restart on the same endpoints) may be held
     * a moment by a connection, not a listener: a client polling the old
     * coordinator whose connect to the free port picked that very port as
     * its own (a self-connection, possible on loopback while the port is in
     * the ephemeral range), seen once in CI. Such a holder lets go within
     * its request's timeout: tried again for 5 s before giving up. */
    const char *port = strrchr(ep, ':');
    int named =
        strncmp(ep, "tcp://", 6) == 0 && port && strcmp(port, ":*") != 0 && strcmp(port, ":0") != 0;
    int rc = zmq_bind(s, ep);
    for (int k = 0; rc != 0 && errno == EADDRINUSE && named && k < 50; k++) {
        if (k == 0)
            gb_warn("cannot bind %s yet: %s; trying again for 5 s", ep, zmq_strerror(errno));
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        rc = zmq_bind(s, ep);
    }
    if (rc != 0) {
        int e = errno;
        gb_fmt(err, errlen, "cannot bind %s: %s%s", ep, zmq_strerror(e),
               e == ENODEV ? " (a tcp:// host must be an IP address such as 127.0.0.1 or an "
                             "interface name; not a host name)"
                           : "");
        zmq_close(s);
        return NULL;
    }
    size_t len = outlen;
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, out, &len) != 0) gb_copy(out, outlen, ep);
    return s;
}

/* One coordinator per store: two would hand out the same queued jobs and
 * store their results twice. An flock on the store file itself (SQLite
 * uses POSIX record locks, which flock does not touch), held for the
 * coordinator's life; readers (the sqlite3 shell, `gpubench results`) take
 * none. */
static int lock_store(gb_coord_t *c, char *err, size_t errlen) {
    const char *p = c->cfg.db_path;
    /* (a name "file:..." is a file: gpubench reads no URIs; two
     * coordinators on --db file:x.db both ran) */
    if (!p || !p[0] || strcmp(p, ":memory:") == 0) return 0;
    struct stat st;
    c->db_made = lstat(p, &st) != 0 && errno == ENOENT; /* removed again if the start fails */
    if (stat(p, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* /dev/null got a /dev/null-journal beside it, a FIFO "disk I/O error" */
        gb_fmt(err, errlen, "%s is not a regular file (%s): --db names the store file", p,
               S_ISDIR(st.st_mode)    ? "a directory"
               : S_ISCHR(st.st_mode)  ? "a character device"
               : S_ISBLK(st.st_mode)  ? "a block device"
               : S_ISFIFO(st.st_mode) ? "a FIFO"
               : S_ISSOCK(st.st_mode) ? "a socket"
                                      : "not a file");
        return -1;
    }
    c->db_lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c->db_lock < 0) {
        gb_fmt(err, errlen, "cannot open %s: %s", p, strerror(errno));
        return -1;
    }
    if (flock(c->db_lock, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(c->db_lock);
        c->db_lock = -1;
        if (e == EWOULDBLOCK)
            gb_fmt(err, errlen,
                   "store %s is in use by another coordinator (a daemon or a `gpubench run`): "
                   "one coordinator per store",
                   p);
        else
            gb_fmt(err, errlen, "cannot lock %s: %s", p, strerror(e));
        return -1;
    }
    return 0;
}

/* Whether a connection has the store's -shm open: SQLite holds a shared
 * lock on its byte 128 (the "dead man switch") for as long as it does.
 * The pid of one that does, 0 for none, or -1 when it cannot be told. */
static pid_t shm_reader(const char *db) {
    char p[PATH_MAX + 8];
    gb_fmt(p, sizeof p, "%s-shm", db);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 128, .l_len = 1};
    int rc = fcntl(fd, F_GETLK, &fl);
    close(fd);
    if (rc != 0) return -1;
    return fl.l_type == F_UNLCK ? 0 : fl.l_pid > 0 ? fl.l_pid : -1;
}

/* The store's -wal and -shm must be this user's to write: SQLite opens
 * them read-write. One it cannot write is another user's, most often left
 * by a reader without write access to the store (`sqlite3`, `gpubench
 * results` of an older version, as another user: a read-only connection
 * makes them and never removes them); the coordinator failed at its first
 * write with "attempt to write a readonly database". Holding the store's
 * lock (no other coordinator), a -shm (an index SQLite rebuilds from the
 * -wal) or an empty -wal is removed unless a reader has the -shm open;
 * anything else is said. 0, or -1 with the reason. */
static int side_files_writable(const gb_coord_t *c, char *err, size_t errlen) {
    static const char *const sfx[] = {"-wal", "-shm"};
    const char *db = c->db_real[0] ? c->db_real : c->cfg.db_path; /* beside a link's target */
    pid_t reader = -1; /* who has the -shm open (-1: not looked yet; 0: nobody) */
    for (int i = 0; i < 2 && c->db_lock >= 0; i++) {
        char p[PATH_MAX + 8];
        struct stat st;
        gb_fmt(p, sizeof p, "%s%s", db, sfx[i]);
        if (lstat(p, &st) != 0 || faccessat(AT_FDCWD, p, R_OK | W_OK, AT_EACCESS) == 0) continue;
        int e = errno;
        int spare = i == 1 || st.st_size == 0;
        if (spare && reader < 0) reader = shm_reader(db);
        if (spare && reader != 0) {
            char who[64] = "may have the store open (its -shm's lock cannot be read)";
            if (reader > 0) gb_fmt(who, sizeof who, "has the store open (pid %d)", (int)reader);
            gb_fmt(err, errlen,
                   "store %s: %s belongs to uid %u and this user cannot write it (%s); a reader "
                   "%s: start the coordinator once it is closed",
                   c->cfg.db_path, p, (unsigned)st.st_uid, strerror(e), who);
            return -1;
        }
        if (spare && unlink(p) == 0) {
            gb_warn("store %s: removed %s, %s of uid %u that this user could not write (left by "
                    "%s reading the store)",
                    c->cfg.db_path, p, i == 1 ? "an index" : "an empty log", (unsigned)st.st_uid,
                    st.st_uid == geteuid() ? "this user, when the store was read-only to it,"
                                           : "another user");
            continue;
        }
        gb_fmt(err, errlen,
               "store %s: %s belongs to uid %u and this user cannot write it (%s)%s: %s",
               c->cfg.db_path, p, (unsigned)st.st_uid, strerror(e), spare ? ", nor remove it" : "",
               spare ? "it holds nothing (another user reading the store left it): remove it as "
                       "its owner or root, and start again"
                     : "it holds writes not yet in the store: start the coordinator as its owner "
                       "(or root) once, or give this user write access to it; do not remove it");
        return -1;
    }
    return 0;
}

/* Make what was written to path durable: the file, then its directory. */
static int fsync_path(const char *path, int dir) {
    int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* VACUUM INTO path from the open store: a consistent copy of everything
 * committed, made durable. */
static int store_copy(gb_coord_t *c, const char *path, char *err, size_t errlen) {
    sqlite3 *db = gb_store_db(c->store);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "VACUUM INTO ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    if (rc != SQLITE_OK)
        gb_fmt(err, errlen, "cannot copy the store into %s: %s", path, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        unlink(path);
        return -1;
    }
    char dir[PATH_MAX];
    gb_copy(dir, sizeof dir, path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        gb_copy(dir, sizeof dir, ".");
    if (fsync_path(path, 0) != 0 || fsync_path(dir, 1) != 0) {
        gb_fmt(err, errlen, "cannot make %s durable: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

/* Is the file at path one this process has open? */
static int open_here(const char *path) {
    struct stat st, fst;
    if (stat(path, &st) != 0) return 0;
    DIR *d = opendir("/proc/self/fd");
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        int fd = atoi(e->d_name);
        found = e->d_name[0] != '.' && fd != dirfd(d) && fstat(fd, &fst) == 0 &&
                fst.st_dev == st.st_dev && fst.st_ino == st.st_ino;
    }
    if (d) closedir(d);
    return found;
}

/* Remove PATH-wal and PATH-shm where they are still this process's own (the
 * store's file was unlinked while open): SQLite does not delete the WAL of
 * such a file, and would apply it to whatever file is opened at PATH next. */
static void drop_own_wal(const char *path) {
    char side[PATH_MAX + 8];
    for (int i = 0; i < 2; i++) {
        gb_fmt(side, sizeof side, "%s-%s", path, i ? "shm" : "wal");
        if (open_here(side)) unlink(side);
    }
}

/* Where a store this coordinator can no longer use at PATH is kept. */
static void saved_path(const char *path, char *out, size_t outlen) {
    gb_fmt(out, outlen, "%s.saved-%lld", path, (long long)(gb_wall_ms() / 1000));
}

/* The store's path now names another file: what this coordinator stored is
 * saved beside it (PATH.saved-UNIXTIME) and the coordinator stops, leaving
 * the new file alone. Our PATH-wal and PATH-shm, if still there, are
 * removed: whoever opened the new file next would have our WAL applied to
 * it (SQLite does not delete the WAL of a database file that was unlinked
 * while open: seen here, the new file then read as our store). The new
 * store's own WAL is never touched (persistent WAL at our close). */
static void store_replaced(gb_coord_t *c, const char *path, const char *why) {
    char saved[PATH_MAX + 64], err[PATH_MAX + 300];
    int one = 1;
    saved_path(path, saved, sizeof saved);
    if (store_copy(c, saved, err, sizeof err) == 0)
        gb_error("store %s %s while the coordinator ran: everything this coordinator stored is "
                 "saved in %s; stopping (the agents keep what was not acknowledged)",
                 c->cfg.db_path, why, saved);
    else
        gb_error("store %s %s while the coordinator ran, and %s; stopping", c->cfg.db_path, why,
                 err);
    drop_own_wal(path);
    sqlite3_file_control(gb_store_db(c->store), "main", SQLITE_FCNTL_PERSIST_WAL, &one);
    c->fatal = 1;
}

/* The store's connections closed by keep_store opened again at PATH: the
 * store, its settings, the ranks' statements, the syncer. 1, or 0 (said,
 * with `what` before "cannot be opened again", and the coordinator stops). */
static int store_reopen(gb_coord_t *c, const char *path, const char *name, const char *what) {
    char err[PATH_MAX + 300] = "";
    c->side_known[0] = c->side_known[1] = 0;
    c->store = gb_store_open(path, err, sizeof err);
    if (!c->store || gb_store_set_synchronous(c->store, c->cfg.sync == GB_SYNC_FULL) != 0 ||
        (c->cfg.sync == GB_SYNC_GROUP && gb_store_set_autocheckpoint(c->store, 0) != 0) ||
        gb_store_id(c->store, c->store_id, sizeof c->store_id) != 0 ||
        !(c->ranks = gb_ranks_new(c->store, err, sizeof err)) ||
        (c->cfg.sync == GB_SYNC_GROUP && !(c->syncer = gb_syncer_new(path, err, sizeof err)))) {
        gb_error("store %s %s cannot be opened again: %s; stopping", name, what,
                 c->store ? (err[0] ? err : gb_store_errmsg(c->store)) : err);
        c->fatal = 1;
        return 0;
    }
    return 1;
}

/* Was PATH-wal or PATH-shm, as this process has it open, removed (or
 * replaced) while the store at PATH stayed? Each is noted the first time
 * it is seen there and open here (after every opening of the store). */
static int side_gone(gb_coord_t *c, const char *path) {
    char side[PATH_MAX + 8];
    struct stat st;
    for (int i = 0; i < 2; i++) {
        gb_fmt(side, sizeof side, "%s-%s", path, i ? "shm" : "wal");
        int there = stat(side, &st) == 0;
        if (!c->side_known[i]) {
            if (there && open_here(side)) {
                c->side_known[i] = 1;
                c->side_dev[i] = st.st_dev;
                c->side_ino[i] = st.st_ino;
            }
            continue;
        }
        if (!there ? errno == ENOENT : st.st_dev != c->side_dev[i] || st.st_ino != c->side_ino[i])
            return 1;
    }
    return 0;
}

/* A WAL another process made at PATH-wal while ours had no name holds
 * what that process wrote (the `sqlite3` shell) to the store's file as it
 * was then, without what ours held: applied to the file now, its pages
 * would overwrite ours. Set aside (PATH-wal.aside-UNIXTIME; its index
 * removed) before the store is opened again; an empty one (a reader's) is
 * used. -1 (said) when it cannot be moved. */
static int set_aside_foreign_wal(const char *path, const char *name) {
    char wal[PATH_MAX + 8], shm[PATH_MAX + 8], aside[PATH_MAX + 64];
    struct stat st;
    gb_fmt(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &st) != 0 || st.st_size == 0) return 0;
    gb_fmt(shm, sizeof shm, "%s-shm", path);
    gb_fmt(aside, sizeof aside, "%s.aside-%lld", wal, (long long)(gb_wall_ms() / 1000));
    if (rename(wal, aside) != 0) {
        gb_error("store %s: %s, written by another process while the coordinator's write-ahead "
                 "log had no name, cannot be set aside (%s); stopping (it would overwrite the "
                 "store: move it away before the next start)",
                 name, wal, strerror(errno));
        return -1;
    }
    gb_warn("store %s: another process wrote to the store while the coordinator's write-ahead "
            "log had no name; what it wrote is set aside in %s, not applied (it was written "
            "against the store without what the coordinator's log held)",
            name, aside);
    unlink(shm);
    return 0;
}

/* A reader that stayed connected across keep_side_files (the `sqlite3`
 * shell) reads the pages it cached before: the store's file changed under
 * the WAL index it shares with us now, which says nothing changed, so it
 * kept reading the store without what our nameless WAL held (seen: "no
 * such table" after the repair). A commit into the WAL makes every reader
 * drop its cache: user_version written back as it is. */
static void wake_readers(sqlite3 *db) {
    sqlite3_stmt *st = NULL;
    int v = 0;
    char sql[48];
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    gb_fmt(sql, sizeof sql, "PRAGMA user_version = %d", v);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        gb_warn("store: a reader that stayed connected may read stale pages until the next "
                "write: %s",
                sqlite3_errmsg(db));
}

/* PATH-wal or PATH-shm was removed while the store stayed (rm gb.db-wal
 * gb.db-shm, taken for leftovers): SQLite goes on writing the WAL it has
 * open, which no longer has a name, so whatever was not checkpointed yet
 * would vanish with a crash of the coordinator (or of the machine), and
 * `sqlite3` on the store reads only what was. Everything is checkpointed
 * into the store's file from the open connection (TRUNCATE: every frame,
 * and the file synced), then the connections are opened again on new
 * files. A checkpoint that cannot finish (a full disk: the file grows) is
 * said every 30 s and tried again at each heartbeat; nothing is torn down
 * before it has. */
static void keep_side_files(gb_coord_t *c, const char *path, const char *name, int64_t now) {
    int log = -1, ckpt = -1, one = 1, rc = SQLITE_BUSY;
    sqlite3 *db = gb_store_db(c->store);
    /* the syncer's own PASSIVE checkpoints hold the checkpoint lock
     * briefly: busy is waited out here, a little, then at the next
     * heartbeat (a new connection, a new syncer, is no way around it: it
     * would open the file now at PATH-wal, not the WAL our index is of) */
    for (int i = 0; i < 50 && rc == SQLITE_BUSY; i++) {
        if (i) nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
        rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt);
    }
    if (rc != SQLITE_OK || log != ckpt) {
        if (!c->side_failed_ms) c->side_failed_ms = now;
        if ((rc != SQLITE_BUSY || now - c->side_failed_ms >= 10000) &&
            (now - c->store_logged_ms >= 30000 || !c->store_logged_ms)) {
            c->store_logged_ms = now;
            gb_error("store %s: its write-ahead log (%s-wal or -shm) was removed while the "
                     "coordinator ran, and what it holds cannot be written into the store yet "
                     "(%s): it lives only in this coordinator's open file until then (trying "
                     "again at each heartbeat): %sdo not stop the coordinator",
                     name, path,
                     rc != SQLITE_OK ? sqlite3_errmsg(db) : "a checkpoint stopped short",
                     sqlite3_errcode(db) == SQLITE_FULL ? "make room, and " : "");
        }
        return;
    }
    c->side_failed_ms = 0;
    c->store_logged_ms = 0;
    /* From our close to our next read the file had no shared lock: a
     * `sqlite3` that wrote into a WAL of its own meanwhile, closing in that
     * moment as the last connection, checkpointed it into the file, over
     * what ours had just put there (seen: the store's schema lost, only the
     * writer's table left). Held by a child until the store is open again,
     * such a WAL stays, and is set aside below. */
    gb_store_hold_t hold;
    char herr[PATH_MAX + 128];
    if (gb_store_hold(path, &hold, herr, sizeof herr) != 0)
        gb_warn(
            "store %s: %s; opening it again without holding it (another process's close may write "
            "into it meanwhile)",
            name, herr);
    /* everything committed is in the store's file, synced: what waited for
     * durability goes now */
    if (c->syncer) gb_syncer_destroy(&c->syncer);
    while (c->held_head < c->n_held)
        out_send(&c->held[c->held_head++]);
    gb_ranks_destroy(&c->ranks);
    /* the files at PATH-wal and -shm now are somebody else's (a `sqlite3`
     * that opened the store meanwhile): not deleted at the close */
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
    gb_store_close(&c->store);
    if (set_aside_foreign_wal(path, name) != 0) {
        gb_store_release(&hold);
        c->fatal = 1;
        return;
    }
    int opened = store_reopen(c, path, name, "was checkpointed but");
    if (opened) wake_readers(gb_store_db(c->store)); /* a read: ours is the shared lock now */
    gb_store_release(&hold);
    if (!opened) return;
    gb_warn("store %s: its write-ahead log (%s-wal or -shm) was removed while the coordinator "
            "ran: wrote everything in it into the store and opened it again",
            name, path);
}

/* The store's path, the directory of it and the name in it. */
static const char *store_dir(const gb_coord_t *c, char *dir, size_t len) {
    const char *path = c->db_real[0] ? c->db_real : c->cfg.db_path;
    const char *slash = strrchr(path, '/');
    gb_copy(dir, len, path);
    if (!slash)
        gb_copy(dir, len, ".");
    else if (slash == path)
        dir[1] = '\0';
    else
        dir[slash - path] = '\0';
    return slash ? slash + 1 : path;
}

/* The store's directory, removed with it (rm -rf of the directory), made
 * again with its permission bits when the coordinator started (0700 when
 * they are not known), and made durable in its parent. Its owner is this
 * process. 0 (nothing to make, or made), or -1 with the reason. */
static int remake_dir(const gb_coord_t *c, const char *name, char *err, size_t errlen) {
    char dir[PATH_MAX];
    struct stat st;
    mode_t mode = c->db_dir_mode;
    store_dir(c, dir, sizeof dir);
    if (strcmp(dir, ".") == 0 || strcmp(dir, "/") == 0) return 0; /* not ours to make */
    if (stat(dir, &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return 0;
    if (gb_mkdir_p(dir, err, errlen) != 0) return -1;
    if (mode && mode != 0700 && chmod(dir, mode) != 0) {
        gb_warn("store %s: cannot give its directory %s its old mode %04o again: %s", name, dir,
                (unsigned)mode, strerror(errno));
        mode = 0;
    }
    if (!mode) mode = 0700; /* what gb_mkdir_p made */
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        fsync_path(dir, 1);
        *slash = '/';
    }
    gb_warn("store %s was removed while the coordinator ran, with its directory: made %s again "
            "(mode %04o%s)",
            name, dir, (unsigned)mode, mode == 0700 ? "" : ", as it was");
    return 0;
}

/* keep_store looks at the store's path once a heartbeat. An inotify watch
 * on its directory makes it look at once when the store, its -wal or its
 * -shm is removed or moved, or something moved over them, or the
 * directory itself goes: the window in which a reader opens the store
 * without what the removed WAL held, or an acknowledgement is durable only
 * in an unlinked file, is a turn of the loop, not a heartbeat. Watched
 * again (once a heartbeat) when the directory was made again. Without
 * inotify (its limits reached) the heartbeat's look stands alone. */
static void watch_store(gb_coord_t *c) {
    char dir[PATH_MAX];
    if (c->db_lock < 0 || c->watch_fd == -2 || c->watch_wd >= 0) return;
    if (c->watch_fd < 0 && (c->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
        gb_debug("store %s: no inotify (%s): its path is looked at once a heartbeat",
                 c->cfg.db_path, strerror(errno));
        c->watch_fd = -2;
        return;
    }
    store_dir(c, dir, sizeof dir);
    c->watch_wd = inotify_add_watch(c->watch_fd, dir,
                                    IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                                        IN_MOVE_SELF | IN_ONLYDIR);
    if (c->watch_wd < 0 && errno != ENOENT && errno != ENOTDIR)
        gb_debug("store %s: cannot watch %s (%s): its path is looked at once a heartbeat",
                 c->cfg.db_path, dir, strerror(errno));
}

/* The watch's events: one that names the store or its side files, or the
 * directory, has keep_store look 50 ms later (a turn or two): the command
 * that removes them (rm gb.db gb.db-wal gb.db-shm, rm -rf DIR) has
 * finished by then, and is not raced. */
static void read_watch(gb_coord_t *c) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event)))), dir[PATH_MAX];
    const char *base = store_dir(c, dir, sizeof dir);
    size_t bl = strlen(base);
    int due = 0;
    ssize_t n;
    while ((n = read(c->watch_fd, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_MOVE_SELF && ev->wd == c->watch_wd) {
                inotify_rm_watch(c->watch_fd, c->watch_wd); /* it watches the moved one */
                c->watch_wd = -1;
            }
            if (ev->mask & IN_IGNORED && ev->wd == c->watch_wd) c->watch_wd = -1;
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW) ||
                (ev->len && strncmp(ev->name, base, bl) == 0 &&
                 (ev->name[bl] == '\0' || strcmp(ev->name + bl, "-wal") == 0 ||
                  strcmp(ev->name + bl, "-shm") == 0)))
                due = 1;
        }
    int64_t at = gb_mono_ms() + 50;
    if (due && at < c->store_check_ms) c->store_check_ms = at;
}

/* The store at --db stays the file this coordinator writes. Removed while
 * it runs (rm gpubench.db*, a cleaner), SQLite would go on writing into the
 * unlinked file, and every result in it would vanish when the coordinator
 * stopped; a second coordinator could open a new store at the path. Looked
 * at once a heartbeat, between transactions: removed, the store is written
 * back from the open connection (VACUUM INTO a file beside it, made
 * durable and locked before it is linked into place) and opened there;
 * replaced by another file, store_replaced; its -wal or -shm removed
 * alone, keep_side_files. */
static void keep_store(gb_coord_t *c) {
    /* a --db that is a symbolic link: its target is what is removed */
    const char *path = c->db_real[0] ? c->db_real : c->cfg.db_path, *name = c->cfg.db_path;
    struct stat st, own;
    int64_t now = gb_mono_ms();
    if (c->db_lock < 0 || now < c->store_check_ms || c->store_failed || c->reload_changes ||
        gb_store_in_tx(c->store))
        return;
    c->store_check_ms = now + c->cfg.heartbeat_ms;
    watch_store(c); /* when the directory was made again */
    if (fstat(c->db_lock, &own) != 0) return;
    if (stat(path, &st) == 0) {
        if (st.st_dev != own.st_dev || st.st_ino != own.st_ino)
            store_replaced(c, path, "was replaced by another file");
        else if (side_gone(c, path))
            keep_side_files(c, path, name, now);
        return;
    }
    if (errno != ENOENT && errno != ENOTDIR) return; /* ENOTDIR: a file where its directory was */
    char tmp[PATH_MAX + 64], err[PATH_MAX + 300];
    int no_dir = remake_dir(c, name, err, sizeof err) != 0;
    gb_fmt(tmp, sizeof tmp, "%s.restore-%d", path, (int)getpid());
    if (!no_dir) unlink(tmp);
    if (no_dir || store_copy(c, tmp, err, sizeof err) != 0) {
        /* (a full disk): stopping would lose all of it, the open file being
         * its only copy (rescue_store saves it elsewhere then); tried again
         * at every heartbeat */
        if (now - c->store_logged_ms >= 30000 || !c->store_logged_ms) {
            c->store_logged_ms = now;
            gb_error("store %s was removed while the coordinator ran%s, and %s: everything "
                     "stored lives only in this coordinator's open file until it can be written "
                     "back (trying again at each heartbeat): %s",
                     name, no_dir ? ", with its directory" : "", err,
                     no_dir ? "a stop saves it in $TMPDIR or /tmp"
                            : "make room, and do not stop the coordinator");
        }
        return;
    }
    c->store_logged_ms = 0;
    int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        gb_error("store %s was removed while the coordinator ran; its copy %s cannot be locked: "
                 "%s; stopping",
                 name, tmp, strerror(errno));
        if (fd >= 0) close(fd);
        c->fatal = 1;
        return;
    }
    /* our PATH-wal and PATH-shm, if still there (only PATH was removed),
     * go too: SQLite would apply that WAL to the copy when it opens it
     * (it does not delete the WAL of a database file unlinked while open) */
    drop_own_wal(path);
    /* then the old connections, before the copy is in place */
    if (c->syncer) {
        if (c->n_held > c->held_head && gb_syncer_wait(c->syncer, c->commit_seq, 5000) == 0)
            release_held(c); /* durable: in the copy */
        gb_syncer_destroy(&c->syncer);
    }
    gb_ranks_destroy(&c->ranks);
    gb_store_close(&c->store);
    close(c->db_lock);
    c->db_lock = fd;
    if (link(tmp, path) != 0) {
        /* another file is there now (a second coordinator made its store
         * while the copy was made): as store_replaced */
        int e = errno;
        char saved[PATH_MAX + 64];
        saved_path(path, saved, sizeof saved);
        if (e == EEXIST && rename(tmp, saved) == 0)
            gb_error("store %s was replaced by another file while the coordinator ran: "
                     "everything this coordinator stored is saved in %s; stopping (the agents "
                     "keep what was not acknowledged)",
                     name, saved);
        else
            gb_error("store %s was removed while the coordinator ran, and cannot be put back "
                     "(%s): everything this coordinator stored is in %s; stopping",
                     name, strerror(e), tmp);
        c->fatal = 1;
        return;
    }
    unlink(tmp);
    if (store_reopen(c, path, name, "was written back but"))
        gb_warn("store %s was removed while the coordinator ran: wrote it back from the open "
                "store and use it again",
                name);
}

/* At the stop: a store removed while the coordinator ran and not yet
 * written back (a full disk, a directory that cannot be made) exists only
 * as this process's open file, gone when it exits; a WAL removed alone
 * and not yet checkpointed (a full disk) holds what the file lacks, gone
 * too. Tried once more, then the store is saved as
 * $TMPDIR/NAME.saved-UNIXTIME (or in /tmp). 0 when the store is whole
 * where it belongs, -1 (said) otherwise: the coordinator exits 1. */
/* A store that does not exist where a saved copy of it lies beside it (a
 * coordinator that could not write it back left PATH.saved-UNIXTIME): said
 * before a new, empty one is made in its place, which went unremarked. */
static void warn_saved(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT) return;
    char pat[PATH_MAX + 16];
    if (gb_fmt(pat, sizeof pat, "%s.saved-*", path) != 0) return;
    glob_t g;
    if (glob(pat, GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc > 0)
        gb_warn("store %s does not exist, but %s does (%zu saved cop%s): a coordinator that could "
                "not write its store back saved it there. A new, empty store is made; to go on "
                "with the saved one, stop this coordinator and move it to %s",
                path, g.gl_pathv[0], g.gl_pathc, g.gl_pathc == 1 ? "y" : "ies", path);
    globfree(&g);
}

static int rescue_store(gb_coord_t *c) {
    struct stat own;
    const char *path = c->db_real[0] ? c->db_real : c->cfg.db_path;
    if (c->db_lock < 0 || !c->store || c->fatal || fstat(c->db_lock, &own) != 0) return 0;
    int side = own.st_nlink > 0;
    if (side && !side_gone(c, path)) return 0;
    if (gb_store_in_tx(c->store)) gb_store_rollback(c->store); /* a reload's: made again */
    c->store_failed = 0;
    c->reload_changes = 0;
    c->store_check_ms = 0;
    keep_store(c);
    if (c->fatal) return -1;
    if (side ? !c->side_failed_ms : fstat(c->db_lock, &own) == 0 && own.st_nlink > 0) return 0;
    const char *dir = gb_tmpdir(), *name = c->cfg.db_path, *base = strrchr(name, '/');
    char saved[PATH_MAX + 64], err[PATH_MAX + 300], what[PATH_MAX + 100];
    gb_fmt(saved, sizeof saved, "%s/%s.saved-%lld", dir, base ? base + 1 : name,
           (long long)(gb_wall_ms() / 1000));
    if (side)
        gb_fmt(what, sizeof what,
               "store %s: its write-ahead log was removed while the coordinator "
               "ran and could not be written into the store",
               name);
    else
        gb_fmt(what, sizeof what,
               "store %s was removed while the coordinator ran and could not be written back "
               "there",
               name);
    if (store_copy(c, saved, err, sizeof err) == 0)
        gb_error("%s: everything this coordinator stored is saved in %s; put it back at %s%s "
                 "before a coordinator starts again (the agents keep what was not acknowledged)",
                 what, saved, name, side ? " (removing its -wal and -shm)" : "");
    else
        gb_error("%s, and %s: what this coordinator stored is lost with it", what, err);
    return -1;
}

/* --key without --authorized, or the reverse */
static int keys_half(const gb_coord_config_t *cfg, char *err, size_t errlen) {
    if (!cfg->key_path == !cfg->authorized_path) return 0;
    gb_fmt(err, errlen,
           "keys: give both --key (the coordinator's NAME.key) and --authorized "
           "(the public keys it admits)");
    return -1;
}

/* Without keys or --insecure, listen and control must be loopback: 0, or
 * -1 with why (verb: what was refused, "bind" for the endpoints given,
 * "serve" for the ones libzmq says it bound). */
static int keyless_loopback(const gb_coord_config_t *cfg, int keys, const char *listen,
                            const char *control, const char *verb, char *err, size_t errlen) {
    if (keys || cfg->insecure || (gb_endpoint_is_local(listen) && gb_endpoint_is_local(control)))
        return 0;
    gb_fmt(err, errlen,
           "refusing to %s %s / %s: without keys the coordinator only binds loopback (give --key "
           "and --authorized, or --insecure to accept anyone on the network)",
           verb, listen, control);
    return -1;
}

/* Two tcp endpoints that would bind one port: the same host, or either on
 * every interface (*, 0.0.0.0, [::]); an ephemeral port (* or 0) never. */
static int tcp_same_port(const char *a, const char *b) {
    if (strncmp(a, "tcp://", 6) != 0 || strncmp(b, "tcp://", 6) != 0) return 0;
    const char *pa = strrchr(a, ':'), *pb = strrchr(b, ':');
    if (!pa || !pb || pa < a + 6 || pb < b + 6 || strcmp(pa, pb) != 0) return 0;
    if (strcmp(pa, ":*") == 0 || strcmp(pa, ":0") == 0) return 0;
    size_t la = (size_t)(pa - (a + 6)), lb = (size_t)(pb - (b + 6));
    static const char *const any[] = {"*", "0.0.0.0", "[::]", "[*]"};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        if ((la == strlen(any[i]) && strncmp(a + 6, any[i], la) == 0) ||
            (lb == strlen(any[i]) && strncmp(b + 6, any[i], lb) == 0))
            return 1;
    return la == lb && strncmp(a + 6, b + 6, la) == 0;
}

/* The endpoints' form, two of them, and loopback only without keys. */
static int endpoints_ok(const gb_coord_config_t *cfg, char *err, size_t errlen) {
    if (gb_endpoint_check(cfg->listen, err, errlen) != 0 ||
        gb_endpoint_check(cfg->control, err, errlen) != 0)
        return -1; /* a malformed one is not "not loopback" */
    /* libzmq reads "tcp://SOURCE;DEST" and binds DEST: "tcp://127.0.0.1:0;
     * 0.0.0.0:5555" passed as loopback and served the network, keyless */
    const char *eps[2] = {cfg->listen, cfg->control};
    for (int i = 0; i < 2; i++)
        if (strchr(eps[i], ';')) {
            gb_fmt(err, errlen,
                   "%s: an endpoint the coordinator binds names no source address (';')", eps[i]);
            return -1;
        }
    /* one endpoint for both: a configuration error, said before a store is
     * made (exit 2, as a non-loopback one without keys) */
    if (strncmp(cfg->listen, "ipc://", 6) == 0 && strncmp(cfg->control, "ipc://", 6) == 0 &&
        strcmp(cfg->listen + 6, "*") != 0 &&
        (strcmp(cfg->listen, cfg->control) == 0 ||
         gb_same_path(cfg->listen + 6, cfg->control + 6))) {
        gb_fmt(err, errlen, "--listen and --control must be two endpoints (both are %s)",
               cfg->listen);
        return -1;
    }
    if (tcp_same_port(cfg->listen, cfg->control)) {
        /* it would fail on its own second bind after 5 s of "address in use",
         * as though another process held the port */
        gb_fmt(err, errlen, "--listen and --control must be two endpoints (%s and %s share a port)",
               cfg->listen, cfg->control);
        return -1;
    }
    return keyless_loopback(cfg, cfg->key_path != NULL, cfg->listen, cfg->control, "bind", err,
                            errlen);
}

int gb_coord_check_keys(const gb_coord_config_t *cfg, char *err, size_t errlen) {
    if (keys_half(cfg, err, errlen) || endpoints_ok(cfg, err, errlen)) return -1;
    if (!cfg->key_path) return 0;
    if (!gb_curve_available()) {
        gb_fmt(err, errlen, "--key: this libzmq was built without CURVE");
        return -1;
    }
    char pub[GB_CURVE_Z85_LEN + 1], sec[GB_CURVE_Z85_LEN + 1];
    int rc = gb_curve_read_pair(cfg->key_path, pub, sec, err, errlen);
    memset(sec, 0, sizeof sec);
    if (rc != 0) return -1;
    /* the list as the ZAP handler will load it (on a context of its own) */
    void *ctx = zmq_ctx_new();
    if (!ctx) {
        gb_fmt(err, errlen, "cannot create a ZeroMQ context");
        return -1;
    }
    gb_auth_t *auth = gb_auth_new(ctx, cfg->authorized_path, err, errlen);
    rc = auth ? 0 : -1;
    gb_auth_destroy(&auth);
    zmq_ctx_term(ctx);
    return rc;
}

gb_coord_t *gb_coord_new(const gb_coord_config_t *cfg, char *err, size_t errlen) {
    if (cfg->heartbeat_ms < 10 || cfg->heartbeat_ms > 600000 || cfg->lost_after < 1 ||
        cfg->lost_after > 1000 || cfg->max_attempts < 1 ||
        cfg->max_attempts > GB_WIRE_ATTEMPT_MAX || cfg->max_frame < 1024 ||
        cfg->max_jobs_per_sweep < 1) {
        gb_fmt(err, errlen,
               "bad configuration: heartbeat 10..600000 ms, lost-after 1..1000, "
               "max-attempts 1..%d, max-frame >= 1024",
               GB_WIRE_ATTEMPT_MAX);
        return NULL;
    }
    if (keys_half(cfg, err, errlen)) return NULL;
    if (cfg->max_agents < 1 || cfg->max_queued < 1 || cfg->rate_per_s < 0 ||
        (cfg->rate_per_s > 0 && cfg->rate_burst < 1)) {
        gb_fmt(err, errlen,
               "bad limits: max-agents >= 1, max-queued >= 1, rate-limit >= 0, "
               "rate-burst >= 1");
        return NULL;
    }
    if (endpoints_ok(cfg, err, errlen)) return NULL;
    gb_coord_t *c = calloc(1, sizeof *c);
    if (!c) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    c->cfg = *cfg;
    c->db_lock = -1;
    c->watch_fd = c->watch_wd = -1;
    c->started_ms = gb_mono_ms();
    c->agents = gb_map_new();
    c->jobs = gb_map_new();
    c->sweeps = gb_map_new();
    c->peers = gb_map_new();
    c->spoke = gb_map_new();
    if (!c->agents || !c->jobs || !c->sweeps || !c->peers) {
        gb_fmt(err, errlen, "out of memory");
        goto err;
    }
    if (gb_random_hex(c->coord_id, 8, err, errlen) != 0) goto err;
    /* a live ipc endpoint is refused before anything is made: no store
     * created, no other socket file left behind */
    for (int i = 0; i < 2; i++) {
        const char *ep = i ? cfg->control : cfg->listen;
        if (gb_endpoint_check(ep, err, errlen) != 0 || ipc_path_check(cfg, ep, err, errlen) != 0)
            goto err;
        if (ipc_in_use(ep)) {
            gb_fmt(err, errlen, "cannot bind %s: another process is listening there", ep);
            goto err;
        }
    }
    warn_saved(cfg->db_path); /* before the lock makes the file */
    if (lock_store(c, err, errlen) != 0) goto err;
    if (c->db_lock >= 0 && !realpath(cfg->db_path, c->db_real)) c->db_real[0] = '\0';
    if (side_files_writable(c, err, errlen) != 0) goto err;
    if (c->db_lock >= 0) { /* its directory's mode, for remake_dir */
        char dir[PATH_MAX];
        struct stat dst;
        store_dir(c, dir, sizeof dir);
        if (stat(dir, &dst) == 0) c->db_dir_mode = dst.st_mode & 07777;
    }
    c->store = gb_store_open(cfg->db_path, err, errlen);
    if (!c->store) goto err;
    watch_store(c);
    if (gb_store_set_synchronous(c->store, cfg->sync == GB_SYNC_FULL) != 0 ||
        (cfg->sync == GB_SYNC_GROUP && gb_store_set_autocheckpoint(c->store, 0) != 0)) {
        gb_fmt(err, errlen, "%s", gb_store_errmsg(c->store));
        goto err;
    }
    if (gb_store_id(c->store, c->store_id, sizeof c->store_id) != 0) {
        gb_fmt(err, errlen, "%s", gb_store_errmsg(c->store));
        goto err;
    }
    c->ranks = gb_ranks_new(c->store, err, errlen);
    if (!c->ranks) goto err;
    if (load_state(c, err, errlen) != 0) goto err;
    /* the WAL it syncs is beside the store's file: a --db that is a
     * symbolic link had it open (and make) an empty one beside the link */
    if (cfg->sync == GB_SYNC_GROUP &&
        !(c->syncer = gb_syncer_new(c->db_real[0] ? c->db_real : cfg->db_path, err, errlen)))
        goto err;
    if (cfg->rate_per_s > 0 &&
        !(c->rate = gb_rate_new(cfg->rate_per_s, cfg->rate_burst, GB_COORD_RATE_PEERS))) {
        gb_fmt(err, errlen, "out of memory");
        goto err;
    }
    c->refusal_log = gb_rate_new(1.0 / GB_AUTH_REPEAT_S, 1, 4096);
    raise_fd_limit();
    c->ctx = zmq_ctx_new();
    if (!c->ctx) {
        gb_fmt(err, errlen, "cannot create a ZeroMQ context");
        goto err;
    }
    if (cfg->key_path) {
        /* The ZAP handler is bound before any CURVE socket: a CURVE server
         * without one admits every client that knows its public key. */
        char pub[GB_CURVE_Z85_LEN + 1];
        if (!gb_curve_available()) {
            gb_fmt(err, errlen, "--key: this libzmq was built without CURVE");
            goto err;
        }
        if (gb_curve_read_pair(cfg->key_path, pub, c->secret, err, errlen) != 0) goto err;
        c->auth = gb_auth_new(c->ctx, cfg->authorized_path, err, errlen);
        if (!c->auth) goto err;
        gb_info("CURVE on both endpoints: coordinator key %s, %zu key(s) admitted from %s", pub,
                gb_auth_count(c->auth), cfg->authorized_path);
        if (gb_auth_count(c->auth) == 0)
            gb_warn("%s lists no key: no agent or command can connect until keys are added to "
                    "it (then SIGHUP)",
                    cfg->authorized_path);
    }
    c->agents_sock = bind_router(c, cfg->listen, agents_max_frame(cfg) * GB_WIRE_HARD_FACTOR,
                                 c->listen_ep, sizeof c->listen_ep, err, errlen);
    if (!c->agents_sock) goto err;
    size_t cmax =
        cfg->max_frame > GB_WIRE_SPEC_MAX + 1024 ? cfg->max_frame : GB_WIRE_SPEC_MAX + 1024;
    c->control_sock = bind_router(c, cfg->control, cmax * GB_WIRE_HARD_FACTOR, c->control_ep,
                                  sizeof c->control_ep, err, errlen);
    if (!c->control_sock) goto err;
    /* Connections libzmq drops itself (a frame over the hard cap, a failed
     * handshake) are logged from the socket monitors. */
    c->monitor = open_monitor(c, c->agents_sock, "agents");
    c->control_monitor = open_monitor(c, c->control_sock, "control");
    c->next_tick_ms = gb_mono_ms();
    c->hb_last_us = gb_mono_us();
    c->dirty = 1;
    /* what was bound, as libzmq says (an interface name, a host name
     * resolved): loopback only without keys, whatever the text said */
    if (keyless_loopback(cfg, c->auth != NULL, c->listen_ep, c->control_ep, "serve", err, errlen) !=
        0)
        goto err;
    gb_info("coordinator %s: agents on %s, control on %s, store %s, heartbeat %d ms, lost after %d",
            c->coord_id, c->listen_ep, c->control_ep, cfg->db_path, cfg->heartbeat_ms,
            cfg->lost_after);
    if (!c->auth && (!gb_endpoint_is_local(c->listen_ep) || !gb_endpoint_is_local(c->control_ep)))
        gb_warn("insecure: endpoints reachable from the network without authentication");
    else if (!c->auth)
        gb_info("no keys: bound to loopback only (give --key and --authorized to serve the "
                "network)");
    return c;
err:;
    /* a start that fails (a port in use, a bad key) leaves no new store
     * behind: one it made is empty, and removed with its side files */
    char made[PATH_MAX + 8] = "";
    if (c->db_made && c->db_lock >= 0) gb_copy(made, sizeof made, cfg->db_path);
    gb_coord_destroy(&c);
    if (made[0]) {
        size_t n = strlen(made);
        unlink(made);
        gb_copy(made + n, sizeof made - n, "-wal");
        unlink(made);
        gb_copy(made + n, sizeof made - n, "-shm");
        unlink(made);
    }
    return NULL;
}

void gb_coord_destroy(gb_coord_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_coord_t *c = *self_p;
    if (c->store) endings_done(c, gb_store_commit(c->store) == 0);
    if (c->syncer) { /* what waited for the disk goes out once it is there */
        if (c->n_held > c->held_head && gb_syncer_wait(c->syncer, c->commit_seq, 5000) == 0)
            release_held(c);
        gb_syncer_destroy(&c->syncer);
    }
    for (size_t i = c->held_head; i < c->n_held; i++)
        free(c->held[i].buf);
    free(c->held);
    gb_ranks_destroy(&c->ranks);
    if (c->store) gb_store_close(&c->store);
    /* the monitors stopped before their readers are closed (an event sent
     * to a closed reader blocks libzmq's I/O thread under the lock that
     * stopping takes: gb_request_ex) */
    if (c->agents_sock) zmq_socket_monitor(c->agents_sock, NULL, 0);
    if (c->control_sock) zmq_socket_monitor(c->control_sock, NULL, 0);
    if (c->monitor) zmq_close(c->monitor);
    if (c->control_monitor) zmq_close(c->control_monitor);
    if (c->agents_sock) zmq_close(c->agents_sock);
    if (c->control_sock) zmq_close(c->control_sock);
    gb_auth_destroy(&c->auth);
    gb_rate_destroy(&c->rate);
    gb_rate_destroy(&c->refusal_log);
    memset(c->secret, 0, sizeof c->secret);
    if (c->ctx) zmq_ctx_term(c->ctx);
    if (c->jobs) gb_map_each(c->jobs, free_job, NULL);
    if (c->sweeps) gb_map_each(c->sweeps, free_value, NULL);
    /* after every SQLite connection to the file is closed: closing any fd of
     * a file drops the process's POSIX locks on it, SQLite's included */
    if (c->db_lock >= 0) close(c->db_lock);
    if (c->watch_fd >= 0) close(c->watch_fd);
    for (size_t i = 0; i < c->n_agents; i++)
        free(c->agent_list[i]);
    gb_map_destroy(&c->agents);
    gb_map_destroy(&c->jobs);
    gb_map_destroy(&c->sweeps);
    if (c->peers) gb_map_each(c->peers, free_value, NULL);
    gb_map_destroy(&c->peers);
    gb_map_destroy(&c->spoke);
    free(c->agent_list);
    for (size_t i = 0; i < c->n_out; i++)
        free(c->out[i].buf);
    free(c->out);
    endings_done(c, 0);
    free(c->endings);
    free(c);
    *self_p = NULL;
}

/* Peer addresses by file descriptor, taken when a connection is accepted,
 * so that a handshake that fails later is logged with its address. (The
 * monitor reports a failed handshake without its descriptor, right before
 * the disconnection that carries it.) */
static void remember_peer(gb_coord_t *c, int fd) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[INET6_ADDRSTRLEN] = "?", addr[INET6_ADDRSTRLEN + 16];
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0) return; /* closed already */
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        gb_fmt(addr, sizeof addr, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)&sa;
        inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
        gb_fmt(addr, sizeof addr, "[%s]:%u", host, ntohs(in->sin6_port));
    } else {
        gb_fmt(addr, sizeof addr, "a local socket");
    }
    char *copy = strdup(addr);
    if (!copy) return;
    free(gb_map_get(c->peers, &fd, sizeof fd));
    if (gb_map_put(c->peers, &fd, sizeof fd, copy) != 0) free(copy);
}

static void *open_monitor(gb_coord_t *c, void *sock, const char *name) {
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://gb-coord-monitor-%s-%p", name, (void *)c);
    if (zmq_socket_monitor(
            sock, ep,
            ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
        return NULL;
    void *m = zmq_socket(c->ctx, ZMQ_PAIR);
    int zero = 0;
    if (!m || zmq_setsockopt(m, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_connect(m, ep) != 0) {
        if (m) zmq_close(m);
        m = NULL;
        /* no reader: no monitor (libzmq's I/O thread would block on its
         * first event) */
        zmq_socket_monitor(sock, NULL, 0);
    }
    return m;
}

static void read_monitor(gb_coord_t *c, void *mon, const char *name) {
    uint16_t event;
    uint32_t value;
    char where[256];
    while (gb_monitor_read(mon, &event, &value, where, sizeof where) == 0) {
        if (event == ZMQ_EVENT_ACCEPTED) {
            remember_peer(c, (int)value);
            continue;
        }
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            c->failed_auth = 1; /* the ZAP handler logged it, with the address */
            continue;
        }
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
            event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            gb_fmt(c->failed_why, sizeof c->failed_why, "%s",
                   event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                           value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                       ? (c->auth ? "it does not speak CURVE (a plaintext peer)"
                                  : "it speaks CURVE and this coordinator has no keys")
                   : event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                       ? "a protocol error (a wrong server key, or not ZeroMQ)"
                   : c->auth ? "the peer closed the connection during the handshake (as a client "
                               "without keys does, or a port probe)"
                             : "the peer closed the connection during the handshake (as a client "
                               "with keys does, or a port probe)");
            continue;
        }
        /* ZMQ_EVENT_DISCONNECTED, value = fd */
        int fd = (int)value;
        char *addr = gb_map_del(c->peers, &fd, sizeof fd);
        /* A command's connection sends one request, so each disconnect on
         * fd takes one message read from fd. The messages of a turn are
         * read before its monitor events, and fds are used again at once
         * (status, then nodes): a flag per fd would be cleared by the next
         * connection's accept before the last one's disconnect is seen. */
        intptr_t n_msgs = c->spoke ? (intptr_t)gb_map_get(c->spoke, &fd, sizeof fd) : 0;
        int spoke = n_msgs > 0;
        if (n_msgs > 1)
            gb_map_put(c->spoke, &fd, sizeof fd, (void *)(n_msgs - 1));
        else if (n_msgs == 1)
            gb_map_del(c->spoke, &fd, sizeof fd);
        size_t cap = agents_max_frame(&c->cfg) * GB_WIRE_HARD_FACTOR;
        if (mon == c->control_monitor) {
            size_t cmax = c->cfg.max_frame > GB_WIRE_SPEC_MAX + 1024 ? c->cfg.max_frame
                                                                     : GB_WIRE_SPEC_MAX + 1024;
            cap = cmax * GB_WIRE_HARD_FACTOR;
        }
        if (c->failed_why[0]) {
            /* a refused peer retries at every reconnect: one line per host
             * and reason every GB_AUTH_REPEAT_S seconds */
            char host[INET6_ADDRSTRLEN + 16] = "?", peer[400], *colon;
            int64_t retry;
            if (addr) gb_copy(host, sizeof host, addr);
            if ((colon = strrchr(host, ':'))) *colon = '\0'; /* the port changes every time */
            gb_fmt(peer, sizeof peer, "%s|%s|%s", name, host, c->failed_why);
            if (c->refusal_log &&
                !gb_rate_take(c->refusal_log, peer, strlen(peer), gb_mono_ms(), &retry))
                gb_debug("refused a peer on the %s endpoint from %s: %s", name, addr ? addr : "?",
                         c->failed_why);
            else
                gb_warn("refused a peer on the %s endpoint (%s) from %s: %s", name, where,
                        addr ? addr : "an address not known (it closed at once)", c->failed_why);
        } else if (!c->failed_auth && mon == c->control_monitor && !spoke && !c->control_backlog &&
                   c->srcfd_works) {
            /* a command closes after its reply; one that closes having sent
             * nothing whole had its request dropped (or gave up at once) */
            char host[INET6_ADDRSTRLEN + 16] = "?", key[300], *colon;
            int64_t retry;
            if (addr) gb_copy(host, sizeof host, addr);
            if ((colon = strrchr(host, ':'))) *colon = '\0';
            gb_fmt(key, sizeof key, "nomsg|%s", host);
            gb_log(c->refusal_log &&
                           !gb_rate_take(c->refusal_log, key, strlen(key), gb_mono_ms(), &retry)
                       ? GB_LOG_DEBUG
                       : GB_LOG_WARN,
                   "a peer on the control endpoint (%s) from %s closed before a whole request "
                   "arrived: libzmq drops the connection of a frame over the %zu-byte hard cap "
                   "that way (or the peer gave up)",
                   where, addr ? addr : "?", cap);
        } else if (!c->failed_auth) {
            /* a client command disconnects after every request: not news */
            gb_log(mon == c->monitor ? GB_LOG_INFO : GB_LOG_DEBUG,
                   "a peer connection on %s from %s closed (by the peer, or by libzmq for a "
                   "frame over the %zu-byte hard cap)",
                   where, addr ? addr : "?", cap);
        }
        c->failed_why[0] = '\0';
        c->failed_auth = 0;
        free(addr);
    }
}

/* A clean stop: no agent is connected to a coordinator that is gone, so the
 * store says so (v_nodes.state); a restart would mark them the same way. */
static void mark_disconnected(gb_coord_t *c) {
    char now[32];
    now_iso(now, sizeof now);
    int n = 0;
    for (size_t i = 0; i < c->n_agents; i++)
        n += c->agent_list[i]->state == A_CONNECTED;
    if (n == 0 || c->store_failed || gb_store_begin(c->store) != 0) return;
    for (size_t i = 0; i < c->n_agents; i++) {
        cagent_t *a = c->agent_list[i];
        if (a->state == A_CONNECTED) gb_store_node_state(c->store, a->id, "disconnected", now);
    }
    if (gb_store_commit(c->store) != 0) {
        gb_warn("cannot mark %d agent(s) disconnected in the store: %s", n,
                gb_store_errmsg(c->store));
        gb_store_rollback(c->store);
    }
}

/* SIGHUP: read the authorized keys again. New handshakes and every
 * message from now on are checked against the new list. */
static void reload_keys(gb_coord_t *c) {
    if (!c->auth) {
        gb_info("reload requested, but the coordinator runs without keys: nothing to reload");
        return;
    }
    size_t before = gb_auth_count(c->auth);
    char err[600];
    if (gb_auth_reload(c->auth, err, sizeof err) != 0) {
        gb_error("reload failed, the previous %zu key(s) stay in force: %s", before, err);
        return;
    }
    gb_info("reloaded %s: %zu key(s) admitted (were %zu)", gb_auth_path(c->auth),
            gb_auth_count(c->auth), before);
    if (gb_auth_count(c->auth) == 0)
        gb_warn("%s lists no key now: no agent or command can connect", gb_auth_path(c->auth));
}

int gb_coord_run(gb_coord_t *c) {
    zmq_pollitem_t items[7] = {{c->agents_sock, 0, ZMQ_POLLIN, 0},
                               {c->control_sock, 0, ZMQ_POLLIN, 0}};
    int n_items = 2, i_mon = -1, i_cmon = -1, i_auth = -1, i_sync = -1, i_watch = -1;
    if (c->monitor) {
        i_mon = n_items;
        items[n_items++] = (zmq_pollitem_t){c->monitor, 0, ZMQ_POLLIN, 0};
    }
    if (c->control_monitor) {
        i_cmon = n_items;
        items[n_items++] = (zmq_pollitem_t){c->control_monitor, 0, ZMQ_POLLIN, 0};
    }
    if (c->auth) {
        i_auth = n_items;
        items[n_items++] = (zmq_pollitem_t){gb_auth_socket(c->auth), 0, ZMQ_POLLIN, 0};
    }
    if (c->syncer) { /* wakes the loop when a flush finished: release_held */
        i_sync = n_items;
        items[n_items++] = (zmq_pollitem_t){NULL, gb_syncer_fd(c->syncer), ZMQ_POLLIN, 0};
    }
    if (c->watch_fd >= 0) { /* keep_store, at once */
        i_watch = n_items;
        items[n_items++] = (zmq_pollitem_t){NULL, c->watch_fd, ZMQ_POLLIN, 0};
    }
    int tick_ms = c->cfg.heartbeat_ms / 4 > 0 ? c->cfg.heartbeat_ms / 4 : 1;
    while (!(c->cfg.stop && atomic_load(c->cfg.stop))) {
        int64_t now = gb_mono_ms();
        long timeout = (long)(c->next_tick_ms - now);
        if (timeout < 0) timeout = 0;
        if (timeout > 100) timeout = 100; /* notice a stop request quickly */
        if (i_sync >= 0 && c->syncer) items[i_sync].fd = gb_syncer_fd(c->syncer); /* keep_store */
        int rc = zmq_poll(items, n_items, timeout);
        if (rc < 0) {
            if (errno == EINTR) continue;
            gb_error("poll: %s", zmq_strerror(errno));
            return -1;
        }
        /* since the last poll returned: the last turn, and this poll's
         * wait, which may take timeout */
        int64_t polled = gb_mono_ms(), stall = c->polled_ms ? polled - c->polled_ms - timeout : 0;
        c->polled_ms = polled;
        if (stalled(c, stall)) forgive_stall(c, stall);
        /* a turn's phases are timed: a slow one is logged (debug) with
         * where the time went */
        int64_t t_start = gb_mono_us(), t_agents, t_control, t_timers, t_dispatch;
        int n_agent_msgs = 0, n_control_msgs = 0;
        if (items[0].revents & ZMQ_POLLIN)
            for (; n_agent_msgs < DRAIN_PER_TURN; n_agent_msgs++) {
                gb_frame_t f;
                if (gb_zmq_recv(c->agents_sock, 1, &f) != 0) break;
                on_agent_message(c, &f);
                gb_frame_close(&f);
            }
        t_agents = gb_mono_us();
        if (items[1].revents & ZMQ_POLLIN)
            for (; n_control_msgs < DRAIN_PER_TURN; n_control_msgs++) {
                gb_frame_t f;
                if (gb_zmq_recv(c->control_sock, 1, &f) != 0) break;
                on_control_message(c, &f);
                gb_frame_close(&f);
            }
        c->control_backlog = n_control_msgs >= DRAIN_PER_TURN;
        t_control = gb_mono_us();
        if (i_auth >= 0 && (items[i_auth].revents & ZMQ_POLLIN)) gb_auth_serve(c->auth);
        if (i_mon >= 0 && (items[i_mon].revents & ZMQ_POLLIN))
            read_monitor(c, c->monitor, "agents");
        if (i_cmon >= 0 && (items[i_cmon].revents & ZMQ_POLLIN))
            read_monitor(c, c->control_monitor, "control");
        if (i_watch >= 0 && (items[i_watch].revents & ZMQ_POLLIN)) read_watch(c);
        if (c->cfg.reload && atomic_exchange(c->cfg.reload, 0)) reload_keys(c);
        now = gb_mono_ms();
        if (now >= c->next_tick_ms) {
            /* this turn itself may have stalled (a request stuck in SQLite's
             * busy wait): not the agents' silence either */
            int64_t turn = now - c->polled_ms;
            if (stalled(c, turn)) {
                forgive_stall(c, turn);
                c->polled_ms = now; /* not counted again at the next poll */
            }
            /* agent messages left unread may be the silent agent's: no
             * verdict while they wait, but no longer than a lost window (a
             * flood, of junk frames even, would hide a dead agent) */
            if (n_agent_msgs < DRAIN_PER_TURN)
                c->backlog_since = 0;
            else if (!c->backlog_since)
                c->backlog_since = now;
            c->agent_backlog = c->backlog_since && now - c->backlog_since < lost_window_ms(c);
            check_liveness(c);
            c->next_tick_ms = now + tick_ms;
        }
        send_heartbeats(c, gb_mono_us());
        t_timers = gb_mono_us();
        size_t n_out = c->n_out;
        dispatch(c);
        t_dispatch = gb_mono_us();
        n_out = c->n_out - n_out;
        flush(c);
        keep_store(c);
        int64_t t_end = gb_mono_us();
        if (t_end - t_start > SLOW_TURN_US)
            gb_debug("slow turn: %.1f ms: %d agent message(s) %.1f ms, %d request(s) %.1f ms, "
                     "timers %.1f ms, placement of %zu %.1f ms, commit and send %.1f ms",
                     (t_end - t_start) / 1e3, n_agent_msgs, (t_agents - t_start) / 1e3,
                     n_control_msgs, (t_control - t_agents) / 1e3, (t_timers - t_control) / 1e3,
                     n_out, (t_dispatch - t_timers) / 1e3, (t_end - t_dispatch) / 1e3);
        if (c->fatal) return -1;
    }
    flush(c);
    mark_disconnected(c);
    int rc = rescue_store(c);
    gb_info("coordinator stopping");
    return rc;
}
