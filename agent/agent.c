/* agent.c - see agent.h.
 *
 * Invariants: a job's Result is on disk (spool) before it is sent and stays
 * there until a ResultAck for that (job, attempt) arrives (a full disk
 * aside: then it is held in memory and spooled once there is room); the
 * unacked list mirrors the spool, with copies in memory (keep_state_dir
 * writes them back into a spool removed under the agent). A slot holds at
 * most one running worker. Every message from the coordinator is validated
 * by gb_wire_decode before use. */
#define _GNU_SOURCE
#include "agent.h"

#include "gb_curve.h"
#include "gb_log.h"
#include "gb_rdv.h"
#include "gb_spec.h"
#include "gb_spool.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"
#include "inventory.h"
#include "runner.h"
#include "telemetry.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (4u << 20) /* the agent only receives small control messages */
/* How long the end of a worker killed by SIGTERM or SIGINT from outside
 * waits for its agent's own stop (ended_with_stop): signals sent to every
 * process of a unit or a job step reach them microseconds apart, in any
 * order; this covers them many times over, and delays a real crash's
 * report by no more */
#define STOP_WAIT_MS 500
/* --connect's host name is looked up by the agent (gb_endpoint_resolve) and
 * libzmq given the address: libzmq's own lookup, for a DNS server that
 * never answers, held its I/O thread and so the agent's exit 10 to 20 s
 * after a SIGTERM. While not registered it is looked up again, as libzmq
 * did at each reconnect, so that a coordinator that moved (DNS or
 * /etc/hosts changed) is followed: every LOOKUP_EVERY_MS, or
 * LOOKUP_SILENT_EVERY_MS after a try DNS did not answer. A try holds the
 * loop LOOKUP_MS at most, doubled after each unanswered one up to
 * LOOKUP_MAX_MS (a DNS server slow to answer still is waited for); a
 * SIGTERM cuts it short. */
#define LOOKUP_MS              300
#define LOOKUP_MAX_MS          1200
#define LOOKUP_EVERY_MS        2000
#define LOOKUP_SILENT_EVERY_MS 5000

/* A rank of a multi-node job (issue 5): what its worker said on the
 * rendezvous channel, resent to the coordinator until the start arrives. */
typedef struct slot_rank {
    int on;             /* the slot's job is multi-node */
    gb_rdv_rank_t said; /* its rank, and what its worker said */
    gb_rdv_reader_t in; /* lines from the worker */
    unsigned char id[GB_RDV_ID_MAX];
    size_t id_len; /* > 0: rank 0's worker made its id */
    int started;   /* the start went to the worker */
} slot_rank_t;

typedef struct slot {
    gb_run_t *run;                     /* NULL: free */
    int ended_by_stop;                 /* its worker was ended by the agent's clean stop */
    char store_id[GB_WIRE_ID_MAX + 1]; /* the store of its job (Welcome.store_id at assign) */
    uint64_t job_id;
    uint32_t attempt;
    char dir[4200];
    slot_rank_t rank;
    gb_sampler_t *tm; /* the job's telemetry sampler, or NULL */
    /* why a job that should have been sampled was not (said in its record) */
    char tm_error[300];
    int tm_n_gpus;
    /* when its worker was seen dead of a SIGTERM or SIGINT the agent did
     * not send (0: not): reported after STOP_WAIT_MS unless the agent stops */
    int64_t signalled_ms;
} slot_t;

typedef struct unacked {
    uint64_t job_id;
    uint32_t attempt;
    int64_t next_send_ms;
    int on_disk; /* the spool has it */
    /* the packed Result, or NULL: a copy of the spool's (while
     * MEM_COPIES_MAX allows), or the only one when the spool could not keep
     * it (a full disk; lost only if the agent dies before it is
     * acknowledged or spooled) */
    uint8_t *mem;
    size_t mem_len;
    /* the store of its job (Result.store_id; "" from an older agent or not
     * known): sent only to a coordinator of that store */
    char store_id[GB_WIRE_ID_MAX + 1];
    int foreign_said; /* "held for another store" logged */
} unacked_t;

struct gb_agent {
    gb_agent_config_t cfg;
    char store_id[GB_WIRE_ID_MAX + 1]; /* the coordinator's store (Welcome), "" before one */
    char id[GB_WIRE_ID_MAX + 1];
    char name[GB_WIRE_NAME_MAX + 1];
    char labels[GB_LABELS_LEN];
    char state_dir[4096], jobs_dir[4200];
    int lock_fd;
    gb_spool_t *spool;
    gb_inventory_t *inv;
    gb_telemetry_t *tm; /* NULL: telemetry off */
    void *ctx, *sock, *monitor;
    /* what the socket connects to: the address --connect's host name had at
     * the last lookup that found one, or --connect itself (nothing to look
     * up); "" while no lookup has found one (the socket connects nowhere) */
    char addr[300];
    int by_name;                  /* --connect names a tcp host: looked up again */
    int64_t lookup_at_ms;         /* the next lookup, while not registered */
    int lookup_ms;                /* what it may wait */
    char lookup_failed[300];      /* why the last lookup found no address ("" after one that did) */
    int lookup_failed_rc;         /* gb_endpoint_resolve's -1 (no such name) or -3 (no answer) */
    int64_t refused_logged_ms;    /* last "the coordinator rejected our message" line */
    int64_t denied_backoff_ms;    /* > 0 while our messages are denied (a key, a pinned id) */
    int64_t limit_backoff_ms;     /* > 0 while our hello meets the coordinator's --max-agents */
    int64_t start_fail_logged_ms; /* last "cannot start a worker" line */
    char last_handshake[300];     /* why the last handshake failed; "" once registered */
    int64_t handshake_logged_ms;  /* last "cannot connect" line */
    int64_t reopen_at_ms;         /* make the socket anew then (after a refused handshake) */
    int reopen_backoff_ms;
    /* why no worker could start ("" once one has): said in heartbeats until
     * unable_until_ms, so that the coordinator offers this node no job
     * meanwhile; then it is offered one again, a try (2 s doubling to 60 s) */
    char unable[GB_WIRE_UNABLE_MAX + 1];
    int64_t unable_until_ms, unable_backoff_ms;
    unsigned n_sockets;
    char last_reject[256];
    int registered;
    int hb_ms, lost_after;
    int64_t last_rx_ms, next_hb_ms;
    /* a hello that could not go out (the connection not made yet: the
     * socket is ZMQ_IMMEDIATE) is tried again then, not a heartbeat later */
    int64_t hello_retry_ms;
    int64_t hello_sent_ms;    /* the last Hello that went out (0: none) */
    int64_t silent_warned_ms; /* last "no answer" line, or 0 */
    uint64_t seq;
    slot_t slots[GB_AGENT_MAX_SLOTS];
    unacked_t *unacked;
    size_t n_unacked, unacked_cap;
    size_t mem_held; /* bytes of unacked[].mem */
    /* the spool directory as keep_state_dir last found every entry in it
     * (dev, inode, mtime): unchanged, the entries are not looked at again */
    struct stat spool_seen;
    int spool_seen_ok;
    int64_t state_logged_ms; /* last "cannot make the state directory again" line */
};

void gb_agent_config_default(gb_agent_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->connect = "tcp://127.0.0.1:5555";
    cfg->state_dir = "gpubench-agent";
    cfg->kinds = "allreduce,gemm,resnet50,sleep";
    cfg->worker_exe = "/proc/self/exe";
    cfg->heartbeat_ms = 1000;
    cfg->lost_after = 5;
    cfg->slots = 1;
    cfg->kill_grace_ms = 2000;
    cfg->telemetry_ms = 100;
    cfg->result_memory_mb = 64;
}

const char *gb_agent_id(const gb_agent_t *a) {
    return a->id;
}

static int resend_ms(const gb_agent_t *a) {
    return a->hb_ms * 2 > 200 ? a->hb_ms * 2 : 200;
}

/* ---- sending -------------------------------------------------------------- */

static int send_env(gb_agent_t *a, Gb__Envelope *env) {
    env->seq = ++a->seq;
    if (gb_zmq_send(a->sock, NULL, 0, env) != 0) {
        gb_debug("cannot send %s now: %s", gb_wire_body_name(env->body_case), zmq_strerror(errno));
        return -1;
    }
    return 0;
}

static int n_running(const gb_agent_t *a) {
    int n = 0;
    for (int i = 0; i < a->cfg.slots; i++)
        n += a->slots[i].run != NULL;
    return n;
}

/* A result of another store's job than the coordinator's (job ids start at 1
 * in every store: it was taken as this store's job of that id). Kept in
 * the spool for a coordinator of its store; not sent, not listed. */
static int foreign(const gb_agent_t *a, const unacked_t *u) {
    return u->store_id[0] && a->store_id[0] && strcmp(u->store_id, a->store_id) != 0;
}

/* The jobs whose workers run, and those a clean stop has ended, as refs in
 * v, pointed to by p (GB_AGENT_MAX_SLOTS each). The ended ones are listed
 * in every heartbeat of the stop, not only its last: while the agent waits
 * out its kill grace for a worker deaf to the stop, a job listed nowhere
 * is lost by the coordinator after two heartbeats, its attempt used up,
 * where the last heartbeat gives it back for free. */
static size_t running_refs(const gb_agent_t *a, Gb__JobRef *v, Gb__JobRef **p) {
    size_t n = 0;
    for (int i = 0; i < a->cfg.slots; i++)
        if (a->slots[i].run || a->slots[i].ended_by_stop) {
            gb__job_ref__init(&v[n]);
            v[n].job_id = a->slots[i].job_id;
            v[n].attempt = a->slots[i].attempt;
            v[n].store_id = (char *)a->slots[i].store_id;
            p[n] = &v[n];
            n++;
        }
    return n;
}

/* This store's unacknowledged results (not foreign ones), at most max, as
 * refs in v pointed to by p. */
static size_t spooled_refs(const gb_agent_t *a, Gb__JobRef *v, Gb__JobRef **p, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < a->n_unacked && n < max; i++) {
        if (foreign(a, &a->unacked[i])) continue;
        gb__job_ref__init(&v[n]);
        v[n].job_id = a->unacked[i].job_id;
        v[n].attempt = a->unacked[i].attempt;
        v[n].store_id = (char *)a->unacked[i].store_id;
        p[n] = &v[n];
        n++;
    }
    return n;
}

/* Hello with the whole inventory; the protobuf structures live on the stack
 * and in a few arrays freed before returning. One not sent (no connection
 * yet) is tried again 100 ms later (hello_retry_ms). */
static void send_hello(gb_agent_t *a) {
    int sent = 0;
    const gb_inventory_t *inv = a->inv;
    Gb__Inventory pi = GB__INVENTORY__INIT;
    pi.hostname = (char *)inv->hostname;
    pi.cpu_model = (char *)inv->cpu_model;
    pi.cpu_cores = inv->cpu_cores;
    pi.memory_bytes = inv->memory_bytes;
    pi.os = (char *)inv->os;
    pi.kernel = (char *)inv->kernel;
    pi.driver_version = (char *)inv->driver_version;
    pi.cuda_driver_version = (char *)inv->cuda_driver_version;
    pi.nvml_error = (char *)inv->nvml_error;
    pi.gpubench_version = GB_VERSION;

    Gb__Gpu *gpus = calloc((size_t)inv->n_gpus + 1, sizeof *gpus);
    Gb__Gpu **gpu_p = calloc((size_t)inv->n_gpus + 1, sizeof *gpu_p);
    Gb__Link *links = calloc((size_t)inv->n_links + 1, sizeof *links);
    Gb__Link **link_p = calloc((size_t)inv->n_links + 1, sizeof *link_p);
    char kinds_buf[256];
    char *kinds[GB_WIRE_KINDS_MAX];
    Gb__Label label_v[GB_WIRE_LABELS_MAX], *label_p[GB_WIRE_LABELS_MAX];
    char label_buf[GB_LABELS_LEN];
    Gb__JobRef run_v[GB_AGENT_MAX_SLOTS], *run_p[GB_AGENT_MAX_SLOTS];
    Gb__JobRef *spool_v = calloc(a->n_unacked + 1, sizeof *spool_v);
    Gb__JobRef **spool_p = calloc(a->n_unacked + 1, sizeof *spool_p);
    if (!gpus || !gpu_p || !links || !link_p || !spool_v || !spool_p) {
        gb_error("out of memory building hello");
        goto out;
    }
    for (int i = 0; i < inv->n_gpus; i++) {
        const gb_gpu_info_t *g = &inv->gpus[i];
        gb__gpu__init(&gpus[i]);
        gpus[i].index = (uint32_t)i;
        gpus[i].name = (char *)g->name;
        gpus[i].uuid = (char *)g->uuid;
        gpus[i].memory_bytes = g->memory_bytes;
        gpus[i].sm_count = g->sm_count;
        gpus[i].cc_major = g->cc_major;
        gpus[i].cc_minor = g->cc_minor;
        gpus[i].pcie_gen = g->pcie_gen;
        gpus[i].pcie_width = g->pcie_width;
        gpus[i].power_limit_mw = g->power_limit_mw;
        gpus[i].pci_bus_id = (char *)g->pci_bus_id;
        gpu_p[i] = &gpus[i];
    }
    pi.n_gpus = (size_t)inv->n_gpus;
    pi.gpus = gpu_p;
    for (int i = 0; i < inv->n_links; i++) {
        gb__link__init(&links[i]);
        links[i].gpu_a = inv->links[i].gpu_a;
        links[i].gpu_b = inv->links[i].gpu_b;
        links[i].nvlink_lanes = inv->links[i].nvlink_lanes;
        links[i].pcie_path = (char *)inv->links[i].pcie_path;
        link_p[i] = &links[i];
    }
    pi.n_links = (size_t)inv->n_links;
    pi.links = link_p;
    gb_copy(kinds_buf, sizeof kinds_buf, a->cfg.kinds);
    size_t nk = 0;
    for (char *save = NULL, *t = strtok_r(kinds_buf, ",", &save); t && nk < GB_WIRE_KINDS_MAX;
         t = strtok_r(NULL, ",", &save))
        kinds[nk++] = t;
    pi.n_kinds = nk;
    pi.kinds = kinds;
    char precs_buf[64], *precs[GB_WIRE_PRECISIONS_MAX];
    size_t np = 0;
    gb_copy(precs_buf, sizeof precs_buf, a->cfg.cpu_precisions ? a->cfg.cpu_precisions : "");
    for (char *save = NULL, *t = strtok_r(precs_buf, ",", &save); t && np < GB_WIRE_PRECISIONS_MAX;
         t = strtok_r(NULL, ",", &save))
        precs[np++] = t;
    pi.n_cpu_precisions = np;
    pi.cpu_precisions = precs;

    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = a->id;
    h.name = a->name;
    h.inventory = &pi;
    h.slots = (uint32_t)a->cfg.slots;
    h.rendezvous = 1;
    gb_copy(label_buf, sizeof label_buf, a->labels);
    size_t nl = 0;
    for (char *save = NULL, *t = strtok_r(label_buf, ",", &save); t && nl < GB_WIRE_LABELS_MAX;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) continue;
        *eq = '\0';
        gb__label__init(&label_v[nl]);
        label_v[nl].key = t;
        label_v[nl].value = eq + 1;
        label_p[nl] = &label_v[nl];
        nl++;
    }
    h.n_labels = nl;
    h.labels = label_p;
    h.n_running = running_refs(a, run_v, run_p);
    h.running = run_p;
    h.n_spooled = spooled_refs(a, spool_v, spool_p, GB_AGENT_HELLO_SPOOLED_MAX);
    h.spooled = spool_p;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    sent = send_env(a, &env) == 0;
out:
    a->hello_retry_ms = sent ? 0 : gb_mono_ms() + 100;
    if (sent) a->hello_sent_ms = gb_mono_ms();
    free(gpus);
    free(gpu_p);
    free(links);
    free(link_p);
    free(spool_v);
    free(spool_p);
}

static void send_heartbeat(gb_agent_t *a, int stopping) {
    Gb__JobRef run_v[GB_AGENT_MAX_SLOTS], *run_p[GB_AGENT_MAX_SLOTS];
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    hb.n_running = running_refs(a, run_v, run_p);
    hb.running = run_p;
    size_t own = 0;
    for (size_t i = 0; i < a->n_unacked; i++)
        own += !foreign(a, &a->unacked[i]);
    hb.spooled = (uint32_t)own;
    if (a->unable[0] && gb_mono_ms() < a->unable_until_ms) hb.unable = a->unable;
    hb.stopping = stopping != 0;
    size_t ns = own < GB_WIRE_JOBREFS_MAX ? own : GB_WIRE_JOBREFS_MAX;
    Gb__JobRef *spool_v = calloc(ns + 1, sizeof *spool_v);
    Gb__JobRef **spool_p = calloc(ns + 1, sizeof *spool_p);
    if (spool_v && spool_p) {
        hb.n_spooled_jobs = spooled_refs(a, spool_v, spool_p, ns);
        hb.spooled_jobs = spool_p;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    send_env(a, &env);
    free(spool_v);
    free(spool_p);
}

static void send_progress(gb_agent_t *a, uint64_t job, uint32_t attempt, Gb__Phase phase,
                          const char *msg) {
    Gb__Progress p = GB__PROGRESS__INIT;
    p.job_id = job;
    p.attempt = attempt;
    p.phase = phase;
    p.message = (char *)(msg ? msg : "");
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    send_env(a, &env);
}

static void finish_result(gb_agent_t *a, uint64_t job, uint32_t attempt, const char *store_id,
                          gb_run_result_t *rr);

/* Send one spooled result as it is on disk. A spool entry that does not
 * decode is moved aside (it could never be acknowledged). */
static void send_spooled(gb_agent_t *a, unacked_t *u) {
    void *data = NULL;
    size_t len = 0;
    char err[512];
    u->next_send_ms = gb_mono_ms() + resend_ms(a);
    if (foreign(a, u)) {
        if (!u->foreign_said)
            gb_warn("spooled result of job %" PRIu64 " attempt %u is of store %s, not this "
                    "coordinator's (%s): kept for a coordinator of that store",
                    u->job_id, u->attempt, u->store_id, a->store_id);
        u->foreign_said = 1;
        return;
    }
    Gb__Result *r = NULL;
    int removed = !u->mem && !u->on_disk; /* from the spool, with no copy (keep_state_dir) */
    if (removed) {
        /* nothing to send: the job is reported failed below */
    } else if (u->mem) {
        r = gb__result__unpack(NULL, u->mem_len, u->mem);
        if (!r && !u->on_disk) {
            /* our own packing: only memory can fail here; the next round retries */
            gb_error("out of memory sending the result of job %" PRIu64, u->job_id);
            return;
        }
    } else {
        /* an entry that cannot be read (a directory, a FIFO, no permission,
         * too large) will not become readable: it was retried five times a
         * second for ever, and the job stayed running */
        if (gb_spool_get(a->spool, u->job_id, u->attempt, &data, &len, err, sizeof err) != 0) {
            gb_error("spool: %s", err);
            r = NULL;
        } else {
            r = gb__result__unpack(NULL, len, data);
            free(data);
        }
    }
    /* the entry must be the one its name says (an empty file decodes as job
     * 0, which the coordinator refuses at every resend; a renamed one stored
     * its result under another attempt) */
    if (r && (r->job_id != u->job_id || r->attempt != u->attempt)) {
        gb_error("spool: the entry of job %" PRIu64 " attempt %u holds job %" PRIu64 " attempt %u",
                 u->job_id, u->attempt, r->job_id, r->attempt);
        gb__result__free_unpacked(r, NULL);
        r = NULL;
    }
    /* and one the coordinator takes: an entry that reads but breaks a
     * field's rule (a flipped status byte, a cut record) was refused at
     * every resend, listed as spooled all the while, and its job never
     * ended */
    char bad[300] = "";
    if (r) {
        Gb__Envelope chk = GB__ENVELOPE__INIT;
        chk.version = GB_PROTOCOL_VERSION;
        chk.body_case = GB__ENVELOPE__BODY_RESULT;
        chk.result = r;
        if (gb_wire_validate(&chk, bad, sizeof bad) != 0) {
            gb_error("spool: the result of job %" PRIu64 " attempt %u would be refused: %s",
                     u->job_id, u->attempt, bad);
            gb__result__free_unpacked(r, NULL);
            r = NULL;
        } else {
            bad[0] = '\0';
        }
    }
    if (!r) {
        /* It could never be acknowledged: keep the bytes aside and report
         * the attempt's outcome lost instead, so the job runs again (or
         * ends, with no attempts left) rather than waits forever. */
        uint64_t job = u->job_id;
        uint32_t attempt = u->attempt;
        if (!removed) {
            gb_error("spool: result of job %" PRIu64 " attempt %u is %s: moved aside", job, attempt,
                     bad[0] ? "damaged" : "unreadable");
            if (gb_spool_quarantine(a->spool, job, attempt, err, sizeof err) != 0)
                gb_error("spool: %s", err);
        }
        gb_run_result_t rr;
        memset(&rr, 0, sizeof rr);
        rr.status = GB_RUN_FAILED;
        rr.exit_code = -1;
        rr.started_ms = rr.finished_ms = gb_wall_ms();
        /* what the worker said is gone, not a failure of the job: the
         * coordinator runs it again while attempts are left */
        rr.outcome_lost = 1;
        if (removed)
            gb_fmt(rr.error, sizeof rr.error,
                   "the agent's spooled result was removed before it was acknowledged (with its "
                   "state directory?) and no copy was held in memory");
        else if (bad[0])
            gb_fmt(rr.error, sizeof rr.error, "the agent's spooled result was damaged (%s)", bad);
        else
            gb_fmt(rr.error, sizeof rr.error, "the agent's spooled result was unreadable");
        finish_result(a, job, attempt, u->store_id[0] ? u->store_id : a->store_id, &rr);
        return;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = r;
    if (send_env(a, &env) == 0)
        gb_debug("sent result of job %" PRIu64 " attempt %u", u->job_id, u->attempt);
    gb__result__free_unpacked(r, NULL);
}

/* Every spooled result sent again at a Welcome, said in one line: a
 * spool can hold thousands (another store's kept for it by design), and a
 * line each at every registration buried the log. Each entry is said at
 * debug, another store's instead of the warning send_spooled gives. */
static void resend_spool(gb_agent_t *a) {
    size_t n_own = 0, n_other = 0;
    for (size_t i = 0; i < a->n_unacked; i++) {
        unacked_t *u = &a->unacked[i];
        if (foreign(a, u)) {
            gb_debug("spooled result of job %" PRIu64 " attempt %u is of store %s: kept", u->job_id,
                     u->attempt, u->store_id);
            u->foreign_said = 1;
            n_other++;
        } else {
            gb_debug("resending spooled result of job %" PRIu64 " attempt %u", u->job_id,
                     u->attempt);
            n_own++;
        }
        send_spooled(a, u);
    }
    if (n_other)
        gb_info("resending %zu spooled result(s); keeping %zu of other stores (this "
                "coordinator's is %s) for their own coordinators",
                n_own, n_other, a->store_id);
    else if (n_own)
        gb_info("resending %zu spooled result(s)", n_own);
}

static unacked_t *unacked_find(gb_agent_t *a, uint64_t job, uint32_t attempt) {
    for (size_t i = 0; i < a->n_unacked; i++)
        if (a->unacked[i].job_id == job && a->unacked[i].attempt == attempt) return &a->unacked[i];
    return NULL;
}

static unacked_t *unacked_add(gb_agent_t *a, uint64_t job, uint32_t attempt) {
    unacked_t *u = unacked_find(a, job, attempt);
    if (u) return u;
    if (a->n_unacked == a->unacked_cap) {
        size_t cap = a->unacked_cap ? a->unacked_cap * 2 : 16;
        unacked_t *v = realloc(a->unacked, cap * sizeof *v);
        if (!v) return NULL;
        a->unacked = v;
        a->unacked_cap = cap;
    }
    u = &a->unacked[a->n_unacked++];
    memset(u, 0, sizeof *u);
    u->job_id = job;
    u->attempt = attempt;
    return u;
}

/* Unacknowledged results are held in memory as well as in the spool, up to
 * --result-memory-mb in all: a spool removed under the agent (a tmp
 * cleaner, a hand) is written again from them. */
static size_t mem_copies_max(const gb_agent_t *a) {
    return (size_t)a->cfg.result_memory_mb << 20;
}

/* Hold buf (malloc'd, len bytes) as u's copy in memory, or free it: kept
 * when it is the only copy, or while mem_copies_max allows. */
static void unacked_hold(gb_agent_t *a, unacked_t *u, uint8_t *buf, size_t len) {
    if (u->mem) {
        a->mem_held -= u->mem_len;
        free(u->mem);
        u->mem = NULL;
        u->mem_len = 0;
    }
    if (!u->on_disk || a->mem_held + len <= mem_copies_max(a)) {
        u->mem = buf;
        u->mem_len = len;
        a->mem_held += len;
    } else {
        /* no copy, and none counted: a caller that took u's copy out
         * (u->mem NULL, mem_len still set) must not have it subtracted
         * again when u is dropped (mem_held wrapped below zero, and no
         * result got a copy after that) */
        free(buf);
        u->mem_len = 0;
    }
}

/* Forget an acknowledged result: its spool entry and its copy in memory.
 * The entry is deleted even when the result counts as not spooled: a write
 * whose directory could not be synced had renamed its file into place (it
 * stayed until the agent's next start, which sent the result again). */
static void unacked_drop(gb_agent_t *a, unacked_t *u) {
    char why[600];
    if (gb_spool_del(a->spool, u->job_id, u->attempt, why, sizeof why) != 0)
        gb_error("spool: %s", why);
    a->mem_held -= u->mem_len;
    free(u->mem);
    *u = a->unacked[--a->n_unacked];
}

/* ---- jobs ----------------------------------------------------------------- */

/* The job's directory and every file in it: job.json, result.json, and
 * anything else in it (a result.json.tmp.PID an older worker killed while
 * writing left kept the directory, and every start tried and failed to
 * remove it). */
static void rm_job_dir(const char *dir) {
    char p[4300];
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            gb_fmt(p, sizeof p, "%s/%s", dir, e->d_name) == 0)
            unlink(p);
    if (d) closedir(d);
    rmdir(dir);
}

/* Store the outcome in the spool, then send it. */
static void finish_result(gb_agent_t *a, uint64_t job, uint32_t attempt, const char *store_id,
                          gb_run_result_t *rr) {
    Gb__Result r = GB__RESULT__INIT;
    char sid[GB_WIRE_ID_MAX + 1]; /* a copy: store_id may be the entry's own, rewritten below */
    gb_copy(sid, sizeof sid, store_id ? store_id : "");
    r.job_id = job;
    r.attempt = attempt;
    r.store_id = sid;
    r.status = (Gb__ResultStatus)rr->status;
    r.record_json = rr->record_json ? rr->record_json : "";
    r.error = rr->error;
    r.output_tail = rr->tail;
    r.exit_code = rr->exit_code;
    r.started_at_ms = (uint64_t)rr->started_ms;
    r.finished_at_ms = (uint64_t)rr->finished_ms;
    r.outcome_lost = rr->outcome_lost != 0;
    size_t len = gb__result__get_packed_size(&r);
    uint8_t *buf = malloc(len ? len : 1);
    char err[512];
    if (!buf) {
        gb_error("out of memory storing the result of job %" PRIu64, job);
        return;
    }
    gb__result__pack(&r, buf);
    int rc = gb_spool_put(a->spool, job, attempt, buf, len, err, sizeof err);
    if (rc != 0)
        /* A full disk must not cost a finished measurement: the result is
         * sent from memory and held there until acknowledged (it is lost
         * only if the agent dies before that, as any result in flight) */
        gb_error("spool: cannot store the result of job %" PRIu64
                 ": %s; sending it from memory (it does not survive an agent restart)",
                 job, err);
    unacked_t *u = unacked_add(a, job, attempt);
    if (!u) {
        gb_error("out of memory tracking the result of job %" PRIu64, job);
        free(buf);
        return;
    }
    u->on_disk = rc == 0;
    gb_copy(u->store_id, sizeof u->store_id, r.store_id);
    u->foreign_said = 0;
    unacked_hold(a, u, buf, len);
    gb_info("job %" PRIu64 " attempt %u ended: %s%s%s", job, attempt,
            rr->status == GB_RUN_OK ? "ok" : "not ok", rr->error[0] ? ": " : "", rr->error);
    if (a->registered) send_spooled(a, u);
}

/* ---- ranks of multi-node jobs ------------------------------------------- */

/* The job file's "dist" object for a rank (worker/dist.h). */
static void rank_job_file(cJSON *job, const Gb__JobAssign *as) {
    cJSON *d = cJSON_AddObjectToObject(job, "dist");
    if (!d) return;
    cJSON_AddNumberToObject(d, "rank", as->rank);
    cJSON_AddNumberToObject(d, "n_nodes", as->n_nodes);
    cJSON_AddNumberToObject(d, "world_size", as->world_size);
    cJSON_AddNumberToObject(d, "fd", GB_RDV_FD);
    if (as->unique_id.len > 0) {
        char hex[2 * GB_RDV_ID_MAX + 1];
        if (gb_hex_encode(as->unique_id.data, as->unique_id.len, hex, sizeof hex) == 0)
            cJSON_AddStringToObject(d, "unique_id", hex);
    }
}

static void send_rank_update(gb_agent_t *a, const slot_t *s, Gb__RankPhase phase) {
    Gb__RankUpdate u = GB__RANK_UPDATE__INIT;
    u.job_id = s->job_id;
    u.attempt = s->attempt;
    u.phase = phase;
    if (phase == GB__RANK_PHASE__RANK_ID) {
        u.unique_id.data = (uint8_t *)s->rank.id;
        u.unique_id.len = s->rank.id_len;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RANK_UPDATE;
    env.rank_update = &u;
    send_env(a, &env);
}

/* What a rank still owes the coordinator before its start: sent when the
 * worker says it, again with every heartbeat (a message lost while the
 * coordinator was unreachable would stall the whole job). */
static void rank_resend(gb_agent_t *a, const slot_t *s) {
    if (!s->run || !s->rank.on || s->rank.started) return;
    if (s->rank.id_len) send_rank_update(a, s, GB__RANK_PHASE__RANK_ID);
    if (s->rank.said.ready) send_rank_update(a, s, GB__RANK_PHASE__RANK_READY);
}

/* Lines from a rank's worker. A worker that breaks the protocol is stopped:
 * its job then fails with what it printed. */
static void rank_read(gb_agent_t *a, slot_t *s) {
    char line[GB_RDV_LINE_MAX + 1], why[256];
    int rc;
    while ((rc = gb_rdv_read_line(&s->rank.in, gb_run_rdv_fd(s->run), line)) == 1) {
        gb_rdv_msg_t m;
        int ok = gb_rdv_parse(line, strlen(line), &m, why, sizeof why) == 0;
        gb_rdv_action_t act = ok ? gb_rdv_from_worker(&s->rank.said, &m) : GB_RDV_VIOLATION;
        if (act == GB_RDV_SEND_ID) {
            memcpy(s->rank.id, m.id, m.id_len);
            s->rank.id_len = m.id_len;
            gb_info("job %" PRIu64 " attempt %u: rank 0 made its unique id (%zu bytes)", s->job_id,
                    s->attempt, m.id_len);
            send_rank_update(a, s, GB__RANK_PHASE__RANK_ID);
        } else if (act == GB_RDV_SEND_READY) {
            gb_info("job %" PRIu64 " attempt %u: rank %u ready", s->job_id, s->attempt,
                    s->rank.said.rank);
            send_rank_update(a, s, GB__RANK_PHASE__RANK_READY);
        } else {
            gb_warn("job %" PRIu64 " attempt %u: the worker broke the rendezvous protocol (%s): "
                    "stopping it",
                    s->job_id, s->attempt, ok ? line : why);
            gb_run_cancel(s->run, "stopped by its agent: the worker broke the rendezvous protocol");
            rc = -1;
            break;
        }
    }
    if (rc < 0) gb_run_rdv_close(s->run); /* closed by the worker, or useless: stop polling it */
}

static void on_rank_start(gb_agent_t *a, const Gb__RankStart *st) {
    for (int i = 0; i < a->cfg.slots; i++) {
        slot_t *s = &a->slots[i];
        if (!s->run || !s->rank.on || s->job_id != st->job_id || s->attempt != st->attempt)
            continue;
        if (s->rank.started) return; /* a repeat */
        /* the start is on the coordinator's clock: one behind it by more
         * than the lead (and a second for the way) would sleep the
         * difference, its time limit stretched by as much; one ahead would
         * cut the limit short. The start then comes after the longest lead
         * on this node's clock, said in the log (and in the record: this
         * rank's dist.started_at_ms stands apart from the others') */
        int64_t now = gb_wall_ms(), start = (int64_t)st->start_at_ms, delay = start - now;
        if (delay > GB_RDV_LEAD_MAX_MS + 1000) {
            gb_warn("job %" PRIu64 " attempt %u: the start is %" PRId64 " ms away on this node's "
                    "clock, more than the coordinator's lead of at most %d ms: this clock is "
                    "behind the coordinator's; starting in %d ms (synchronize the clocks: NTP)",
                    s->job_id, s->attempt, delay, GB_RDV_LEAD_MAX_MS, GB_RDV_LEAD_MAX_MS);
            delay = GB_RDV_LEAD_MAX_MS;
            start = now + delay;
        } else if (delay < -1000) {
            gb_warn("job %" PRIu64 " attempt %u: the start was %" PRId64 " ms ago on this "
                    "node's clock: this clock is ahead of the coordinator's, or the start came "
                    "late; starting now (synchronize the clocks: NTP)",
                    s->job_id, s->attempt, -delay);
        }
        if (delay < 0) delay = 0;
        gb_rdv_msg_t m = {.kind = GB_RDV_START, .start_ms = start};
        char line[GB_RDV_LINE_MAX + 1];
        int fd = gb_run_rdv_fd(s->run);
        s->rank.started = 1;
        if (fd < 0 || gb_rdv_format(&m, line, sizeof line) != 0 ||
            send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line)) {
            gb_warn("job %" PRIu64 " attempt %u: cannot pass the start to the worker: stopping it",
                    s->job_id, s->attempt);
            gb_run_cancel(s->run,
                          "stopped by its agent: the start could not be passed to the worker");
            return;
        }
        /* the run's limit counts from its start, not from the fork */
        gb_run_limit_from_now(s->run, delay);
        gb_info("job %" PRIu64 " attempt %u: rank %u starts at %" PRId64, s->job_id, s->attempt,
                s->rank.said.rank, start);
        return;
    }
    gb_debug("start for job %" PRIu64 " attempt %u, which runs no worker here", st->job_id,
             st->attempt);
}

/* ---- telemetry ------------------------------------------------------------ */

/* Start the job's sampler: NVML for the GPUs of a cuda job, /proc for a
 * cpu one. A sampler that cannot start costs the job its telemetry only. */
static void tm_start(gb_agent_t *a, slot_t *s, const char *params_json) {
    if (!a->tm) return;
    cJSON *p = cJSON_Parse(params_json);
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(p, "backend");
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(p, "gpus");
    gb_tm_job_t job;
    memset(&job, 0, sizeof job);
    char err[256] = "";
    int ok = 1;
    if (cJSON_IsString(be) && strcmp(be->valuestring, "cuda") == 0) {
        job.n_gpus = cJSON_IsNumber(gpus) ? (int)gpus->valuedouble : 1;
        ok = gb_tm_gpu_indices(getenv("CUDA_VISIBLE_DEVICES"), job.n_gpus, job.gpu_index, err,
                               sizeof err) == 0;
    } else {
        job.pid = gb_run_pid(s->run);
    }
    cJSON_Delete(p);
    s->tm_error[0] = '\0';
    s->tm_n_gpus = job.n_gpus;
    if (ok) s->tm = gb_sampler_start(a->tm, &job, err, sizeof err);
    if (!s->tm) {
        gb_warn("job %" PRIu64 ": no telemetry: %s", s->job_id, err);
        gb_fmt(s->tm_error, sizeof s->tm_error, "no telemetry: %s", err);
    }
}

/* The job ended: its samples go into the record (a successful one); a job
 * whose sampler could not start gets telemetry that says why (else its
 * record reads like one with telemetry turned off). */
static void tm_finish(slot_t *s, gb_run_result_t *rr) {
    if (!s->tm && !s->tm_error[0]) return;
    if (rr->status == GB_RUN_OK && rr->record_json) {
        gb_tm_data_t d;
        char *amended = NULL, err[256];
        if (s->tm) {
            gb_sampler_data(s->tm, &d);
        } else {
            memset(&d, 0, sizeof d);
            d.n_gpus = s->tm_n_gpus;
            d.cpu = s->tm_n_gpus == 0;
            d.error = s->tm_error;
        }
        if (gb_tm_amend(rr->record_json, &d, GB_WIRE_RECORD_MAX - 1024, &amended, err,
                        sizeof err) == 0) {
            free(rr->record_json);
            rr->record_json = amended;
            gb_info("job %" PRIu64 ": telemetry of %zu sample(s) added to the record", s->job_id,
                    d.n_gpu + d.n_cpu);
        } else {
            gb_warn("job %" PRIu64 ": telemetry not added: %s", s->job_id, err);
        }
    }
    s->tm_error[0] = '\0';
    gb_sampler_destroy(&s->tm);
}

static void start_job(gb_agent_t *a, const Gb__JobAssign *as) {
    for (int i = 0; i < a->cfg.slots; i++)
        if (a->slots[i].run && a->slots[i].job_id == as->job_id &&
            a->slots[i].attempt == as->attempt) {
            if (a->slots[i].store_id[0] && a->store_id[0] &&
                strcmp(a->slots[i].store_id, a->store_id) != 0) {
                /* another store's job of that id and attempt, still ending
                 * (its coordinator's Cancel is on its way): refused, which
                 * costs no attempt (it was taken for this one, running) */
                send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_REFUSED,
                              "busy: another store's job of this id and attempt is still ending "
                              "here");
                return;
            }
            send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_STARTED, "already running");
            return;
        }
    unacked_t *held = unacked_find(a, as->job_id, as->attempt);
    if (held && foreign(a, held)) {
        /* another store's result under the key this store's job needs (the
         * spool is keyed by job and attempt): set aside as .bad, and the job
         * runs (it was answered "already finished" and then never was) */
        char why[600];
        gb_warn("spooled result of job %" PRIu64 " attempt %u of store %s set aside: this "
                "store's job of that id and attempt is assigned here",
                as->job_id, as->attempt, held->store_id);
        if (held->on_disk &&
            gb_spool_quarantine(a->spool, as->job_id, as->attempt, why, sizeof why) != 0)
            gb_error("spool: %s", why);
        a->mem_held -= held->mem_len;
        free(held->mem);
        *held = a->unacked[--a->n_unacked];
    }
    if (unacked_find(a, as->job_id, as->attempt)) {
        gb_info("job %" PRIu64 " attempt %u already finished: resending its result", as->job_id,
                as->attempt);
        send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_STARTED, "already finished");
        send_spooled(a, unacked_find(a, as->job_id, as->attempt));
        return;
    }
    slot_t *s = NULL;
    for (int i = 0; i < a->cfg.slots && !s; i++)
        if (!a->slots[i].run) s = &a->slots[i];
    if (!s) {
        char msg[64];
        gb_fmt(msg, sizeof msg, "busy: %d job(s) running", n_running(a));
        send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_REFUSED, msg);
        return;
    }
    char err[600];
    gb_run_result_t rr;
    /* the job file: ids plus the parameters as the coordinator sent them */
    cJSON *params = cJSON_Parse(as->params_json);
    cJSON *job = cJSON_CreateObject();
    char *text = NULL;
    if (params && job) {
        cJSON_AddNumberToObject(job, "job_id", (double)as->job_id);
        cJSON_AddNumberToObject(job, "attempt", as->attempt);
        cJSON_AddItemToObject(job, "params", params);
        params = NULL;
        if (as->n_nodes > 1) rank_job_file(job, as);
        text = cJSON_PrintUnformatted(job);
    }
    cJSON_Delete(params);
    cJSON_Delete(job);
    if (gb_fmt(s->dir, sizeof s->dir, "%s/%" PRIu64 "-%u", a->jobs_dir, as->job_id, as->attempt) !=
            0 ||
        !text) {
        gb_fmt(err, sizeof err, "%s",
               text ? "job directory path too long" : "job parameters are not JSON");
        goto failed;
    }
    if (gb_mkdir_p(s->dir, err, sizeof err) != 0) goto refused;
    s->run = gb_run_start_ex(a->cfg.worker_exe, s->dir, text, (int)as->timeout_s,
                             a->cfg.kill_grace_ms, as->n_nodes > 1, err, sizeof err);
    if (!s->run) goto refused;
    free(text);
    s->job_id = as->job_id;
    gb_copy(s->store_id, sizeof s->store_id, a->store_id);
    s->attempt = as->attempt;
    memset(&s->rank, 0, sizeof s->rank);
    s->rank.on = as->n_nodes > 1;
    s->rank.said.rank = as->rank;
    if (s->rank.on) {
        /* until the start, the rendezvous (rendezvous_s, which the
         * coordinator enforces) comes before the run's own limit: this
         * bound holds only if the coordinator never says */
        cJSON *pj = cJSON_Parse(as->params_json);
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(pj, "rendezvous_s");
        double rdv_s = cJSON_IsNumber(rs) && rs->valuedouble > 0 ? rs->valuedouble : 300;
        cJSON_Delete(pj);
        gb_run_limit_from_now(s->run, (int64_t)(rdv_s * 1000));
    }
    a->unable[0] = '\0';
    a->unable_backoff_ms = 0;
    tm_start(a, s, as->params_json);
    gb_info("job %" PRIu64 " attempt %u started: %s (worker pid %d, limit %u s)", as->job_id,
            as->attempt, as->kind, gb_run_pid(s->run), as->timeout_s);
    send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_STARTED, NULL);
    return;
refused:
    /* this node cannot start a worker now (its state dir's disk full, out
     * of fds or processes): that is the node's trouble, not the job's. It
     * was failed for good, and a sick node drained a sweep of failures:
     * refused, the job goes back to the queue without using up an attempt
     * (a healthy node takes it; this one is offered it again after its
     * next heartbeat) */
    free(text);
    rm_job_dir(s->dir);
    {
        int64_t now = gb_mono_ms();
        if (now - a->start_fail_logged_ms >= 30000) {
            gb_error("cannot start a worker: %s: refusing jobs until it can", err);
            a->start_fail_logged_ms = now;
        }
        char msg[GB_WIRE_ERROR_MAX];
        gb_fmt(msg, sizeof msg, "cannot start a worker: %s", err);
        send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_REFUSED, msg);
        /* and until the back-off ends, no job is offered to it at all (a
         * node alone in its pool bounced each job once a heartbeat, up to
         * the attempt cap) */
        a->unable_backoff_ms = a->unable_backoff_ms ? a->unable_backoff_ms * 2 : 2000;
        if (a->unable_backoff_ms > 60000) a->unable_backoff_ms = 60000;
        a->unable_until_ms = now + a->unable_backoff_ms;
        gb_log_escape(msg, a->unable, sizeof a->unable); /* one line, as the wire wants */
    }
    return;
failed:
    free(text);
    gb_error("job %" PRIu64 ": cannot start the worker: %s", as->job_id, err);
    memset(&rr, 0, sizeof rr);
    rr.status = GB_RUN_FAILED;
    rr.exit_code = -1;
    rr.started_ms = rr.finished_ms = gb_wall_ms();
    gb_fmt(rr.error, sizeof rr.error, "cannot start the worker: %s", err);
    send_progress(a, as->job_id, as->attempt, GB__PHASE__PHASE_STARTED, NULL);
    finish_result(a, as->job_id, as->attempt, a->store_id, &rr);
    rm_job_dir(s->dir);
}

/* A worker killed by SIGTERM or SIGINT (not by the agent's timeout or
 * cancel) while the agent stops died of the same stop: `systemctl stop`
 * signals every process of the unit's cgroup at once, Slurm every process
 * of a job step, and the worker, in its own process group but in the same
 * cgroup, died before the agent reaped it. Its job is not at fault: it goes
 * back to the queue as at any stop (it failed as "worker killed by signal
 * 15", not retried, whenever the agent was busy in a turn as the signals
 * came). */
static int killed_by_term(const gb_run_result_t *rr) {
    return rr->status == GB_RUN_CRASHED && (rr->exit_code == -SIGTERM || rr->exit_code == -SIGINT);
}

static int ended_with_stop(const gb_agent_t *a, const gb_run_result_t *rr) {
    return a->cfg.stop && atomic_load(a->cfg.stop) && killed_by_term(rr);
}

static void reap_jobs(gb_agent_t *a) {
    int64_t now = gb_mono_ms();
    gb_run_reap_orphans();
    for (int i = 0; i < a->cfg.slots; i++) {
        slot_t *s = &a->slots[i];
        if (!s->run || !gb_run_poll(s->run, now)) continue;
        uint64_t ticks;
        if (s->tm && gb_run_cpu_ticks(s->run, &ticks) == 0) gb_sampler_worker_ended(s->tm, ticks);
        if (s->tm && !gb_sampler_stop(s->tm, now)) continue; /* its handshake: a later turn */
        gb_run_result_t rr;
        gb_run_result(s->run, &rr);
        if (!ended_with_stop(a, &rr) && killed_by_term(&rr) &&
            (!s->signalled_ms || now - s->signalled_ms < STOP_WAIT_MS)) {
            /* the worker's signal may be the first of a stop that signals
             * every process (pkill, a job step's processes in list order):
             * the agent's own may come a moment later. Seen first, it
             * failed the job as a crash, not retried */
            if (!s->signalled_ms) {
                s->signalled_ms = now;
                gb_info("job %" PRIu64 " attempt %u: its worker (pid %d) was killed by signal %d, "
                        "not by this agent: reported in %d ms unless the agent stops meanwhile",
                        s->job_id, s->attempt, gb_run_pid(s->run), -rr.exit_code, STOP_WAIT_MS);
            }
            free(rr.record_json);
            continue;
        }
        s->signalled_ms = 0;
        if (ended_with_stop(a, &rr)) {
            gb_warn("job %" PRIu64 " attempt %u: its worker (pid %d) was killed by signal %d as "
                    "the agent stops: stopped with it",
                    s->job_id, s->attempt, gb_run_pid(s->run), -rr.exit_code);
            free(rr.record_json);
            gb_sampler_destroy(&s->tm);
            s->tm_error[0] = '\0';
            gb_run_destroy(&s->run);
            rm_job_dir(s->dir);
            s->ended_by_stop = 1;
            continue;
        }
        tm_finish(s, &rr);
        finish_result(a, s->job_id, s->attempt, s->store_id, &rr);
        free(rr.record_json);
        gb_run_destroy(&s->run);
        rm_job_dir(s->dir);
    }
}

/* ---- messages ------------------------------------------------------------- */

static void on_message(gb_agent_t *a, gb_frame_t *f) {
    char why[512];
    if (f->parts != 1) {
        gb_warn("dropped a message of %d frames from the coordinator", f->parts);
        return;
    }
    Gb__Envelope *env = NULL;
    uint64_t seq = 0;
    int code = gb_wire_decode(zmq_msg_data(&f->payload), zmq_msg_size(&f->payload), MAX_FRAME, &env,
                              &seq, why, sizeof why);
    if (code) {
        gb_warn("bad message from the coordinator: %s", why);
        Gb__Reject rej = GB__REJECT__INIT;
        rej.code = (Gb__RejectCode)code;
        rej.reason = why;
        rej.ref_seq = seq;
        Gb__Envelope renv = GB__ENVELOPE__INIT;
        renv.body_case = GB__ENVELOPE__BODY_REJECT;
        renv.reject = &rej;
        send_env(a, &renv);
        return;
    }
    a->last_rx_ms = gb_mono_ms();
    switch (env->body_case) {
    case GB__ENVELOPE__BODY_WELCOME: {
        /* the spool goes again once per registration: more Welcomes (one
         * per Hello that was out) each sent every result again, N Hellos
         * for a burst of N rejected results making N^2 sends */
        int first = !a->registered;
        if (first)
            gb_info("registered with coordinator %s (heartbeat %u ms, lost after %u)",
                    env->welcome->coordinator_id, env->welcome->heartbeat_ms,
                    env->welcome->lost_after);
        a->registered = 1;
        a->reopen_backoff_ms = 0;
        a->denied_backoff_ms = 0;
        a->limit_backoff_ms = 0;
        a->last_handshake[0] = '\0';
        a->hb_ms = (int)env->welcome->heartbeat_ms;
        a->lost_after = (int)env->welcome->lost_after;
        a->next_hb_ms = a->last_rx_ms + a->hb_ms;
        gb_copy(a->store_id, sizeof a->store_id, env->welcome->store_id);
        if (first) resend_spool(a);
        break;
    }
    case GB__ENVELOPE__BODY_HEARTBEAT:
        break;
    case GB__ENVELOPE__BODY_ASSIGN:
        /* taken even while registering again: the coordinator stored the
         * assignment before it sent it, so it is real */
        start_job(a, env->assign);
        break;
    case GB__ENVELOPE__BODY_RESULT_ACK: {
        const Gb__ResultAck *ack = env->result_ack;
        unacked_t *u = unacked_find(a, ack->job_id, ack->attempt);
        if (u) {
            unacked_drop(a, u);
            gb_info("result of job %" PRIu64 " attempt %u acknowledged", ack->job_id, ack->attempt);
        } else if (gb_spool_del(a->spool, ack->job_id, ack->attempt, why, sizeof why) != 0) {
            gb_error("spool: %s", why);
        }
        break;
    }
    case GB__ENVELOPE__BODY_CANCEL:
        for (int i = 0; i < a->cfg.slots; i++)
            if (a->slots[i].run && a->slots[i].job_id == env->cancel->job_id &&
                a->slots[i].attempt == env->cancel->attempt) {
                gb_info("job %" PRIu64 " attempt %u: cancelling%s%s", env->cancel->job_id,
                        env->cancel->attempt, env->cancel->reason[0] ? ": " : "",
                        env->cancel->reason);
                gb_run_cancel(a->slots[i].run, env->cancel->reason);
            }
        break;
    case GB__ENVELOPE__BODY_RANK_START:
        on_rank_start(a, env->rank_start);
        break;
    case GB__ENVELOPE__BODY_REJECT:
        if (env->reject->code == GB__REJECT_CODE__REJECT_UNKNOWN_AGENT) {
            /* one Hello for a burst of such rejects (each message sent to
             * a coordinator that restarted comes back so), not one each */
            int64_t now = gb_mono_ms();
            int again = a->registered || !a->hello_sent_ms || now - a->hello_sent_ms >= a->hb_ms;
            if (a->registered)
                gb_info("the coordinator does not know us (restarted?): registering");
            a->registered = 0;
            if (again) {
                send_hello(a);
                a->next_hb_ms = now + a->hb_ms;
            }
        } else {
            /* A refused hello (a cap, a key) is sent again every heartbeat:
             * say so once, then every 30 s while it lasts. A denial (our key
             * taken out of the list, our id pinned to another key) lasts
             * until someone changes a file: back off, 1 s doubling to a
             * minute, on a new socket (a revoked key then meets the
             * handshake's own refusal), instead of a denied message every
             * heartbeat for as long as the agent runs. */
            if (env->reject->code == GB__REJECT_CODE__REJECT_LIMIT) {
                /* over the coordinator's --max-agents: asked again, a
                 * heartbeat later doubling to 30 s (a slot may be freed) */
                int64_t b = a->limit_backoff_ms ? a->limit_backoff_ms * 2 : a->hb_ms;
                a->limit_backoff_ms = b > 30000 ? 30000 : b;
                a->next_hb_ms = gb_mono_ms() + a->limit_backoff_ms;
            }
            if (env->reject->code == GB__REJECT_CODE__REJECT_DENIED) {
                int64_t b = a->denied_backoff_ms ? a->denied_backoff_ms * 2 : 1000;
                a->denied_backoff_ms = b > 60000 ? 60000 : b;
                a->registered = 0;
                a->reopen_at_ms = gb_mono_ms() + a->denied_backoff_ms;
                a->next_hb_ms = a->reopen_at_ms;
            }
            char line[256];
            gb_fmt(line, sizeof line, "%s: %s", gb_wire_reject_name(env->reject->code),
                   env->reject->reason);
            int64_t now = gb_mono_ms();
            if (strcmp(line, a->last_reject) != 0 || now - a->refused_logged_ms >= 30000) {
                char more[320] = "";
                if (env->reject->code == GB__REJECT_CODE__REJECT_DENIED)
                    gb_fmt(more, sizeof more, "; trying again in %" PRId64 " s%s",
                           a->denied_backoff_ms / 1000,
                           strstr(line, "another key")
                               ? " (this node's id is another key's: a key rotated on "
                                 "purpose is let in once the coordinator's --authorized no "
                                 "longer lists the old one (then SIGHUP it); else give the "
                                 "agent a new --state-dir, or its own key)"
                               : "");
                if (env->reject->code == GB__REJECT_CODE__REJECT_UNEXPECTED && !a->registered)
                    /* our hello refused as a command would be: a --connect
                     * naming the control endpoint (5556 for 5555) */
                    gb_fmt(more, sizeof more,
                           " (is %s the coordinator's control endpoint? --connect wants its "
                           "agents endpoint, the coordinator's --listen)",
                           a->cfg.connect);
                gb_warn("the coordinator rejected our message %" PRIu64 ": %s%s",
                        env->reject->ref_seq, line, more);
                gb_copy(a->last_reject, sizeof a->last_reject, line);
                a->refused_logged_ms = now;
            }
        }
        break;
    default:
        gb_warn("unexpected %s from the coordinator: ignored", gb_wire_body_name(env->body_case));
    }
    gb_wire_free(&env);
}

/* ---- lifecycle ------------------------------------------------------------ */

/* DIR/agent_id: this agent's id and a newline, written atomically. */
static int write_id(const gb_agent_t *a, const char *dir, char *err, size_t errlen) {
    char path[PATH_MAX + 16], line[GB_WIRE_ID_MAX + 2];
    if (gb_fmt(path, sizeof path, "%s/agent_id", dir) != 0) {
        gb_fmt(err, errlen, "state directory path too long");
        return -1;
    }
    gb_fmt(line, sizeof line, "%s\n", a->id);
    return gb_write_file_atomic(path, line, strlen(line), err, errlen);
}

static int load_id(gb_agent_t *a, char *err, size_t errlen) {
    char path[4200];
    if (gb_fmt(path, sizeof path, "%s/agent_id", a->state_dir) != 0) {
        gb_fmt(err, errlen, "state directory path too long");
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    char why[256];
    if (gb_read_file(path, 256, &text, &len, why, sizeof why) == 0) {
        while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
            text[--len] = '\0';
        int ok = gb_wire_id_ok(text);
        if (ok) gb_copy(a->id, sizeof a->id, text);
        free(text);
        if (!ok) {
            gb_fmt(err, errlen, "%s does not hold a valid agent id", path);
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT && access(path, F_OK) == 0) {
        gb_fmt(err, errlen, "%s", why);
        return -1;
    }
    if (gb_random_hex(a->id, 16, err, errlen) != 0) return -1;
    return write_id(a, a->state_dir, err, errlen);
}

/* 1 when path names nothing (ENOENT), 0 otherwise. */
static int gone(const char *path) {
    struct stat st;
    return lstat(path, &st) != 0 && errno == ENOENT;
}

/* The state directory stays the agent's while it runs. Removed, whole or in
 * part (by hand; by a tmp cleaner that deletes old files, the lock and the
 * id among them), it is made again: the directories, the lock (else a
 * second agent could start in it), the id, the spool entries of results
 * not yet acknowledged (from their copies in memory) and the directories of
 * running jobs, where their workers write their records. Results the spool
 * could not keep (a full disk) are spooled once it can. Checked once a
 * heartbeat. -1 when another agent holds the directory now: this one
 * stops, leaving it to that one. */
static int keep_state_dir(gb_agent_t *a) {
    char path[4200], err[600];
    int failed = 0;
    int64_t now = gb_mono_ms();
    int whole = gone(a->state_dir);
    if (whole || gone(a->jobs_dir)) {
        if (gb_mkdir_p(a->jobs_dir, err, sizeof err) != 0)
            failed = 1;
        else if (whole)
            gb_warn("state directory %s was removed while the agent ran: made it again",
                    a->state_dir);
        else
            gb_warn("state directory %s: its jobs directory was removed: made it again",
                    a->state_dir);
    }
    struct stat st, own;
    gb_fmt(path, sizeof path, "%s/lock", a->state_dir);
    if (!failed && (stat(path, &st) != 0 || fstat(a->lock_fd, &own) != 0 ||
                    st.st_dev != own.st_dev || st.st_ino != own.st_ino)) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            gb_fmt(err, sizeof err, "cannot make %s again: %s", path, strerror(errno));
            failed = 1;
        } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd);
            gb_error("state directory %s: its lock file was removed and another agent holds "
                     "the new one: this agent stops and leaves the directory to it",
                     a->state_dir);
            return -1;
        } else {
            close(a->lock_fd);
            a->lock_fd = fd;
            gb_warn("state directory %s: its lock file was removed: locked it again", a->state_dir);
        }
    }
    gb_fmt(path, sizeof path, "%s/agent_id", a->state_dir);
    if (!failed && gone(path)) {
        if (write_id(a, a->state_dir, err, sizeof err) == 0)
            gb_warn("state directory %s: its agent_id was removed: wrote it again", a->state_dir);
        else
            failed = 1;
    }
    int made = failed ? 0 : gb_spool_ensure(a->spool, err, sizeof err);
    if (made < 0) failed = 1;
    if (made > 0) gb_warn("state directory %s: its spool was removed: made it again", a->state_dir);
    /* the entries are looked at only when the spool directory changed (a
     * removed file changes its mtime) or a result waits in memory alone: a
     * backlog of thousands while the coordinator is away must not cost a
     * benchmark running beside the agent a stat per result per heartbeat */
    struct stat sd;
    int scan = 0, have_sd = 0;
    gb_fmt(path, sizeof path, "%s/spool", a->state_dir);
    if (!failed && a->n_unacked > 0) {
        have_sd = stat(path, &sd) == 0;
        scan = !(have_sd && a->spool_seen_ok && sd.st_dev == a->spool_seen.st_dev &&
                 sd.st_ino == a->spool_seen.st_ino &&
                 sd.st_mtim.tv_sec == a->spool_seen.st_mtim.tv_sec &&
                 sd.st_mtim.tv_nsec == a->spool_seen.st_mtim.tv_nsec);
        for (size_t i = 0; !scan && i < a->n_unacked; i++)
            scan = !a->unacked[i].on_disk && a->unacked[i].mem;
    }
    if (scan) a->spool_seen_ok = 0;
    for (size_t i = 0; scan && !failed && i < a->n_unacked; i++) {
        unacked_t *u = &a->unacked[i];
        if (!u->on_disk && !u->mem) continue; /* lost already: its job is reported failed */
        int has = gb_spool_has(a->spool, u->job_id, u->attempt, err, sizeof err);
        if (has != 0) {
            failed = has < 0;
            continue;
        }
        if (!u->mem) {
            /* beyond --result-memory-mb: sending it finds it missing
             * and reports the job failed rather than leave it waiting */
            gb_error("spool: the result of job %" PRIu64 " attempt %u was removed from the "
                     "spool and has no copy in memory: it is lost",
                     u->job_id, u->attempt);
            u->on_disk = 0;
            continue;
        }
        if (gb_spool_put(a->spool, u->job_id, u->attempt, u->mem, u->mem_len, err, sizeof err) !=
            0) {
            /* a full disk: tried again at the next heartbeat (a result only
             * in memory already said so when it ended) */
            failed = u->on_disk;
            break;
        }
        if (u->on_disk)
            gb_warn("spool: the result of job %" PRIu64 " attempt %u was removed from the "
                    "spool: written again from memory",
                    u->job_id, u->attempt);
        else
            gb_info("spool: the result of job %" PRIu64 " attempt %u, held in memory, is in "
                    "the spool now",
                    u->job_id, u->attempt);
        u->on_disk = 1;
        uint8_t *mem = u->mem;
        u->mem = NULL;
        a->mem_held -= u->mem_len;
        unacked_hold(a, u, mem, u->mem_len); /* within the budget now, or freed */
    }
    /* an mtime less than 2 s old is not trusted: file systems stamp times
     * from a coarse clock (a tick of some ms), so a removal in the same
     * tick as the look would leave it unchanged */
    struct timespec rt;
    if (scan && have_sd && !failed && clock_gettime(CLOCK_REALTIME, &rt) == 0 &&
        rt.tv_sec - sd.st_mtim.tv_sec >= 2) {
        a->spool_seen = sd; /* as it was before the entries were looked at */
        a->spool_seen_ok = 1;
    }
    for (int i = 0; !failed && i < a->cfg.slots; i++) {
        slot_t *sl = &a->slots[i];
        if (!sl->run || !gone(sl->dir)) continue;
        if (gb_run_restore_dir(sl->run, err, sizeof err) != 0) {
            failed = 1;
            break;
        }
        gb_warn("the directory of job %" PRIu64 " was removed while it ran: made it again",
                sl->job_id);
    }
    if (failed && now - a->state_logged_ms >= 30000) {
        a->state_logged_ms = now;
        gb_error("state directory %s cannot be made whole again: %s; trying again at each "
                 "heartbeat",
                 a->state_dir, err);
    }
    return 0;
}

static void clean_jobs_dir(gb_agent_t *a) {
    DIR *d = opendir(a->jobs_dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[4500];
        if (gb_fmt(p, sizeof p, "%s/%s", a->jobs_dir, e->d_name) == 0) {
            gb_info("removing the leftovers of an earlier run: %s", p);
            rm_job_dir(p);
        }
    }
    closedir(d);
}

static void close_socket(gb_agent_t *a) {
    /* the monitor stopped before its reader is closed (an event sent to a
     * closed reader blocks libzmq's I/O thread under the lock that stopping
     * takes: gb_request_ex) */
    if (a->sock) zmq_socket_monitor(a->sock, NULL, 0);
    if (a->monitor) zmq_close(a->monitor);
    if (a->sock) zmq_close(a->sock);
    a->monitor = a->sock = NULL;
}

/* What the socket connects to (and a probe looks at): --connect's address
 * from the last lookup ("" before one found it), or --connect itself. */
static const char *target(const gb_agent_t *a) {
    return a->by_name ? a->addr : a->cfg.connect;
}

/* The DEALER to the coordinator (and its monitor); connected to nothing
 * while --connect's host name has no address yet. */
static int open_socket(gb_agent_t *a, char *err, size_t errlen) {
    const gb_agent_config_t *cfg = &a->cfg;
    a->sock = zmq_socket(a->ctx, ZMQ_DEALER);
    if (!a->sock) {
        gb_fmt(err, errlen, "cannot create a socket: %s", zmq_strerror(errno));
        return -1;
    }
    /* reconnect quickly after a coordinator restart: back off no further
     * than one heartbeat (and at most 1 s) */
    int ivl_max = cfg->heartbeat_ms < 100    ? 100
                  : cfg->heartbeat_ms > 1000 ? 1000
                                             : cfg->heartbeat_ms;
    int zero = 0, one = 1, ivl = ivl_max < 100 ? ivl_max : 100, hb = cfg->heartbeat_ms,
        hb_timeout = cfg->heartbeat_ms * cfg->lost_after;
    int64_t max = MAX_FRAME * GB_WIRE_HARD_FACTOR;
    zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, a->id, strlen(a->id));
    zmq_setsockopt(a->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(a->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(a->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(a->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    zmq_setsockopt(a->sock, ZMQ_HEARTBEAT_IVL, &hb, sizeof hb);
    zmq_setsockopt(a->sock, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof hb_timeout);
    zmq_setsockopt(a->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    zmq_setsockopt(a->sock, ZMQ_IPV6, &one, sizeof one); /* tcp://[::1]:P, names with AAAA */
    if (cfg->curve && gb_curve_client_apply(a->sock, cfg->curve, err, errlen) != 0) return -1;
    /* a refused handshake (our key, CURVE on one side only) is logged, and
     * the socket made anew later: libzmq does not reconnect after one */
    char mon_ep[96];
    snprintf(mon_ep, sizeof mon_ep, "inproc://gb-agent-monitor-%p-%u", (void *)a, ++a->n_sockets);
    if (zmq_socket_monitor(a->sock, mon_ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        a->monitor = zmq_socket(a->ctx, ZMQ_PAIR);
        if (!a->monitor || zmq_setsockopt(a->monitor, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            zmq_connect(a->monitor, mon_ep) != 0) {
            if (a->monitor) zmq_close(a->monitor);
            a->monitor = NULL;
            /* no reader: no monitor (libzmq's I/O thread would block on
             * its first event) */
            zmq_socket_monitor(a->sock, NULL, 0);
        }
    }
    if (target(a)[0] && zmq_connect(a->sock, target(a)) != 0) {
        gb_fmt(err, errlen, "cannot connect to %s: %s", cfg->connect, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

/* --connect looked up (a->by_name): 1 when its address changed (a->addr
 * holds the new one: the socket is to be made anew), else 0. A failure
 * keeps the address found before (the coordinator may still be there) and
 * is said in the "no answer" warning; the next try waits longer while DNS
 * does not answer. At the start, --connect with nothing to look up (an
 * address, ipc://) is given to libzmq as it is, and never looked up. */
static int look_up(gb_agent_t *a, int64_t now, int first) {
    char addr[300], why[300];
    int rc = gb_endpoint_resolve(a->cfg.connect, a->lookup_ms, addr, sizeof addr, why, sizeof why);
    a->lookup_at_ms = now + LOOKUP_EVERY_MS;
    if (rc == 0 && first) {
        a->by_name = 0;
        return 0;
    }
    if (rc == 0) /* getaddrinfo failed otherwise (out of memory, a system error) */
        gb_fmt(why, sizeof why, "the lookup failed");
    if (rc <= 0) {
        if (rc == -4) return 0; /* a signal: the loop sees the stop */
        if (rc == -3) {
            a->lookup_at_ms = now + LOOKUP_SILENT_EVERY_MS;
            a->lookup_ms = a->lookup_ms * 2 > LOOKUP_MAX_MS ? LOOKUP_MAX_MS : a->lookup_ms * 2;
        }
        gb_debug("cannot look up %s: %s%s%s", a->cfg.connect, why,
                 a->addr[0] ? "; still connecting to its last address, " : "", a->addr);
        gb_copy(a->lookup_failed, sizeof a->lookup_failed, why);
        a->lookup_failed_rc = rc;
        return 0;
    }
    int failed_before = a->lookup_failed[0] != '\0', changed = strcmp(addr, a->addr) != 0;
    a->lookup_failed[0] = '\0';
    a->lookup_ms = LOOKUP_MS;
    if (changed && a->addr[0])
        gb_info("%s now resolves to %s (was %s): connecting there", a->cfg.connect, addr, a->addr);
    else if (failed_before)
        gb_info("%s resolves %s (%s)%s", a->cfg.connect, a->addr[0] ? "again" : "now", addr,
                changed ? ": connecting there" : "");
    else if (changed)
        gb_debug("%s resolves to %s", a->cfg.connect, addr);
    if (changed) gb_copy(a->addr, sizeof a->addr, addr);
    return changed;
}

/* The state directory's lock, held (its fd), or -1 with the reason. */
static int lock_state_dir(const char *dir, char *err, size_t errlen) {
    char lock[4200];
    gb_fmt(lock, sizeof lock, "%s/lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        /* not "in use": a read-only mount, a lock file of another user */
        gb_fmt(err, errlen, "state directory %s cannot be used: %s: %s", dir, lock,
               strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int held = errno == EWOULDBLOCK;
        if (held)
            gb_fmt(err, errlen, "state directory %s is in use by another agent (it holds %s)", dir,
                   lock);
        else
            gb_fmt(err, errlen, "state directory %s cannot be locked: %s: %s", dir, lock,
                   strerror(errno));
        close(fd);
        return held ? -2 : -1; /* -2: in use */
    }
    return fd;
}

int gb_agent_state_dir_free(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) != 0) return 0; /* made by gb_agent_new, or its error then */
    int fd = lock_state_dir(dir, err, errlen);
    if (fd < 0) return fd == -2 ? 1 : -1;
    close(fd); /* flock: the lock goes with the last fd of its open file */
    return 0;
}

gb_agent_t *gb_agent_new(const gb_agent_config_t *cfg, char *err, size_t errlen) {
    if (cfg->slots < 1 || cfg->slots > GB_AGENT_MAX_SLOTS || cfg->heartbeat_ms < 10 ||
        cfg->lost_after < 1 || cfg->kill_grace_ms < 0 || !cfg->connect || !cfg->state_dir ||
        (cfg->telemetry_ms != 0 && (cfg->telemetry_ms < 10 || cfg->telemetry_ms > 60000)) ||
        cfg->result_memory_mb < 0 || cfg->result_memory_mb > 65536) {
        gb_fmt(err, errlen,
               "bad configuration: slots 1..%d, heartbeat >= 10 ms, lost-after >= 1, telemetry "
               "0 or 10..60000 ms, result memory 0..65536 MiB",
               GB_AGENT_MAX_SLOTS);
        return NULL;
    }
    if (gb_endpoint_check(cfg->connect, err, errlen) != 0) return NULL;
    gb_agent_t *a = calloc(1, sizeof *a);
    if (!a) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->lock_fd = -1;
    a->hb_ms = cfg->heartbeat_ms;
    a->lost_after = cfg->lost_after;
    char why[512];
    if (gb_labels_canon(cfg->labels ? cfg->labels : "", a->labels, sizeof a->labels, why,
                        sizeof why) != 0) {
        gb_fmt(err, errlen, "--labels: %s", why);
        goto err;
    }
    if (gb_copy(a->state_dir, sizeof a->state_dir, cfg->state_dir) != 0 ||
        gb_fmt(a->jobs_dir, sizeof a->jobs_dir, "%s/jobs", cfg->state_dir) != 0) {
        gb_fmt(err, errlen, "state directory path too long");
        goto err;
    }
    if (gb_mkdir_p(a->state_dir, err, errlen) != 0 || gb_mkdir_p(a->jobs_dir, err, errlen) != 0) {
        /* name the state directory: "cannot create directory /nonexistent"
         * alone (a service user's HOME) did not say what was being made */
        char why[1024];
        gb_copy(why, sizeof why, err);
        gb_fmt(err, errlen, "cannot make the state directory %s: %s", a->state_dir, why);
        goto err;
    }
    if ((a->lock_fd = lock_state_dir(a->state_dir, err, errlen)) < 0) goto err;
    if (load_id(a, err, errlen) != 0) goto err;
    char spool_dir[4200];
    gb_fmt(spool_dir, sizeof spool_dir, "%s/spool", a->state_dir);
    a->spool = gb_spool_new(spool_dir, err, errlen);
    if (!a->spool) goto err;
    gb_spool_entry_t *entries = NULL;
    size_t n = 0;
    if (gb_spool_list(a->spool, &entries, &n, err, errlen) != 0) goto err;
    for (size_t i = 0; i < n; i++) {
        unacked_t *u = unacked_add(a, entries[i].job_id, entries[i].attempt);
        void *data;
        size_t len;
        char why[600];
        if (!u) {
            free(entries);
            gb_fmt(err, errlen, "out of memory");
            goto err;
        }
        u->on_disk = 1;
        /* its store, and a copy in memory too; one that cannot be read is
         * dealt with when it is sent (moved aside, the job reported failed) */
        if (gb_spool_get(a->spool, u->job_id, u->attempt, &data, &len, why, sizeof why) == 0) {
            Gb__Result *r = gb__result__unpack(NULL, len, data);
            if (r && r->store_id) gb_copy(u->store_id, sizeof u->store_id, r->store_id);
            if (r) gb__result__free_unpacked(r, NULL);
            if (a->mem_held < mem_copies_max(a))
                unacked_hold(a, u, data, len);
            else
                free(data);
        }
    }
    free(entries);
    clean_jobs_dir(a);
    a->inv = calloc(1, sizeof *a->inv);
    if (!a->inv) {
        gb_fmt(err, errlen, "out of memory");
        goto err;
    }
    gb_inventory_collect(a->inv);
    if (cfg->telemetry_ms > 0) {
        gb_tm_config_t tcfg;
        gb_tm_config_default(&tcfg);
        tcfg.interval_ms = cfg->telemetry_ms;
        a->tm = gb_telemetry_new(&tcfg, err, errlen);
        if (!a->tm) goto err;
    }
    if (gb_copy(a->name, sizeof a->name, cfg->name && *cfg->name ? cfg->name : a->inv->hostname) !=
            0 ||
        !gb_wire_line_ok(a->name, 1, GB_WIRE_NAME_MAX) || !gb_utf8_ok(a->name) ||
        strchr(a->name, ',')) {
        /* (a host name of ',' registered never: every Hello refused) */
        gb_fmt(err, errlen,
               "node name (the host name, or --name) must be 1..%d bytes of UTF-8 without control "
               "characters or ',' (give the agent --name)",
               GB_WIRE_NAME_MAX);
        goto err;
    }
    a->ctx = zmq_ctx_new();
    if (!a->ctx) {
        gb_fmt(err, errlen, "cannot create a ZeroMQ context");
        goto err;
    }
    a->by_name = 1;
    a->lookup_ms = LOOKUP_MS;
    look_up(a, gb_mono_ms(), 1);
    if (open_socket(a, err, errlen) != 0) goto err;
    gb_info("agent %s (%s): %d GPU(s)%s%s, %u cores, labels '%s', %zu spooled result(s), "
            "coordinator %s%s%s",
            a->name, a->id, a->inv->n_gpus, a->inv->nvml_error[0] ? " - " : "", a->inv->nvml_error,
            a->inv->cpu_cores, a->labels, a->n_unacked, cfg->connect,
            cfg->curve ? ", CURVE with key " : "", cfg->curve ? cfg->curve->public_key : "");
    return a;
err:
    gb_agent_destroy(&a);
    return NULL;
}

/* Every worker told at once, one grace for all, and waited for (killed
 * after the grace). */
static void stop_workers(gb_agent_t *a) {
    for (int i = 0; i < GB_AGENT_MAX_SLOTS; i++)
        gb_run_stop(a->slots[i].run);
    for (int i = 0; i < GB_AGENT_MAX_SLOTS; i++)
        if (a->slots[i].run) {
            gb_warn("stopping job %" PRIu64 " (worker pid %d)", a->slots[i].job_id,
                    gb_run_pid(a->slots[i].run));
            gb_run_destroy(&a->slots[i].run);
            rm_job_dir(a->slots[i].dir);
            a->slots[i].ended_by_stop = 1;
        }
}

static void nap_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A clean stop's end of the workers: one that ended by itself hands its
 * result in as any other (it was thrown away, the job run again); the rest
 * are told to stop, and heartbeats go on while they die, up to the kill
 * grace (silent that long, past a lost window, the agent was found lost and
 * the job placed again while its worker lived); then stop_workers kills
 * what is left. */
static void stop_workers_heartbeating(gb_agent_t *a) {
    int64_t now = gb_mono_ms(), until = now + 1000;
    for (;;) { /* ended ones first; a telemetry handshake may take a turn or two */
        reap_jobs(a);
        int pending = 0;
        for (int i = 0; i < a->cfg.slots; i++)
            if (a->slots[i].run && gb_run_poll(a->slots[i].run, gb_mono_ms())) pending = 1;
        if (!pending || gb_mono_ms() >= until) break;
        nap_ms(10);
    }
    for (int i = 0; i < GB_AGENT_MAX_SLOTS; i++)
        gb_run_stop(a->slots[i].run);
    until = gb_mono_ms() + a->cfg.kill_grace_ms;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < GB_AGENT_MAX_SLOTS; i++) {
            slot_t *s = &a->slots[i];
            if (!s->run) continue;
            gb_run_read(s->run); /* a full pipe must not hold it up */
            if (gb_run_poll(s->run, gb_mono_ms())) {
                gb_warn("stopped job %" PRIu64 " (worker pid %d)", s->job_id, gb_run_pid(s->run));
                gb_run_destroy(&s->run);
                rm_job_dir(s->dir);
                s->ended_by_stop = 1;
            } else {
                alive = 1;
            }
        }
        now = gb_mono_ms();
        if (!alive || now >= until) break;
        if (now >= a->next_hb_ms) {
            send_heartbeat(a, 0);
            a->next_hb_ms = now + a->hb_ms;
        }
        nap_ms(10);
    }
    stop_workers(a);
}

void gb_agent_destroy(gb_agent_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_agent_t *a = *self_p;
    stop_workers(a);
    for (int i = 0; i < GB_AGENT_MAX_SLOTS; i++)
        gb_sampler_destroy(&a->slots[i].tm);
    gb_telemetry_destroy(&a->tm);
    close_socket(a);
    if (a->ctx) zmq_ctx_term(a->ctx);
    gb_spool_destroy(&a->spool);
    if (a->lock_fd >= 0) close(a->lock_fd);
    free(a->inv);
    for (size_t i = 0; i < a->n_unacked; i++)
        free(a->unacked[i].mem);
    free(a->unacked);
    free(a);
    *self_p = NULL;
}

static void read_monitor(gb_agent_t *a) {
    uint16_t event;
    uint32_t value;
    char where[256], why[300];
    while (gb_monitor_read(a->monitor, &event, &value, where, sizeof where) == 0) {
        int64_t now = gb_mono_ms();
        if (event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && !a->reopen_at_ms) {
            /* a refusal ends the session for good in libzmq: try again on a
             * new socket, 1 s later at first, then up to a minute apart
             * (the key may be added to the list, the server key fixed) */
            a->reopen_backoff_ms = a->reopen_backoff_ms ? a->reopen_backoff_ms * 2 : 1000;
            if (a->reopen_backoff_ms > 60000) a->reopen_backoff_ms = 60000;
            a->reopen_at_ms = now + a->reopen_backoff_ms;
        }
        if (now - a->handshake_logged_ms < 30000) continue; /* libzmq retries every reconnect */
        a->handshake_logged_ms = now;
        gb_handshake_failure_str(event, value, a->cfg.curve != NULL, "agent", why, sizeof why);
        if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            /* a server that is not ZeroMQ ends the handshake the same way */
            char said[96], better[256];
            gb_probe_t p = gb_zmq_probe(target(a), 500, said, sizeof said);
            if (gb_probe_str(p, said, a->cfg.curve != NULL, better, sizeof better))
                snprintf(why, sizeof why, "%s", better);
        }
        gb_copy(a->last_handshake, sizeof a->last_handshake, why);
        /* where is the address libzmq was given: the endpoint is named as
         * --connect gave it */
        if (strcmp(where, a->cfg.connect) != 0) gb_debug("%s is at %s", a->cfg.connect, where);
        gb_error("cannot connect to %s: %s", a->cfg.connect, why);
    }
}

/* 0 when dir (just made, or there already) is a directory of this user's
 * that no one else may write in; else -1 and why. The rescue's name is
 * known to anyone ($TMPDIR/gpubench-state-AGENT_ID): made by someone else
 * first, or a link to elsewhere, it would have them read the results, or
 * put spool entries of their own there for the agent started on it. */
static int own_dir(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return gb_fmt(err, errlen, "cannot make %s: %s", dir, strerror(errno)), -1;
    if (lstat(dir, &st) != 0) return gb_fmt(err, errlen, "%s: %s", dir, strerror(errno)), -1;
    if (S_ISLNK(st.st_mode)) return gb_fmt(err, errlen, "%s is a symbolic link", dir), -1;
    if (!S_ISDIR(st.st_mode)) return gb_fmt(err, errlen, "%s is not a directory", dir), -1;
    if (st.st_uid != geteuid())
        return gb_fmt(err, errlen, "%s belongs to user %u", dir, (unsigned)st.st_uid), -1;
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return gb_fmt(err, errlen, "others may write in %s (mode %03o)", dir,
                      (unsigned)(st.st_mode & 0777)),
               -1;
    return 0;
}

/* Where rescue_unspooled saves: dir ($TMPDIR/gpubench-state-AGENT_ID),
 * made as a state directory of this agent's id (dir/agent_id, dir/spool/),
 * so that an agent started on it sends what is there. When that name is
 * not this user's alone (own_dir), a new directory beside it
 * (...-AGENT_ID-XXXXXX, mkdtemp), its name written back into dir. NULL
 * (err says why) when neither can be made. */
static gb_spool_t *rescue_dir(gb_agent_t *a, char *dir, size_t dirlen, char *err, size_t errlen) {
    char path[PATH_MAX + 16], why[PATH_MAX + 64];
    if (gb_mkdir_p(gb_tmpdir(), err, errlen) != 0) return NULL;
    if (own_dir(dir, why, sizeof why) != 0) {
        char alt[PATH_MAX];
        if (gb_fmt(alt, sizeof alt, "%s-XXXXXX", dir) != 0) {
            gb_fmt(err, errlen, "%s, and no directory beside it: its name is too long", why);
            return NULL;
        }
        if (!mkdtemp(alt)) {
            gb_fmt(err, errlen, "%s, and no directory beside it: %s", why, strerror(errno));
            return NULL;
        }
        gb_warn("spool: %s: the results the stop saves go to %s instead", why, alt);
        gb_copy(dir, dirlen, alt);
    }
    if (write_id(a, dir, err, errlen) != 0) return NULL;
    gb_fmt(path, sizeof path, "%s/spool", dir);
    return gb_spool_new(path, err, errlen);
}

/* At the stop: a result held only in memory (the spool was full when it
 * ended) would be gone with the process. Spooled if there is room now;
 * otherwise saved under $TMPDIR/gpubench-state-AGENT_ID (/tmp without
 * TMPDIR), a state directory of this agent's id: an agent started on it
 * sends it, or its spool entries go back into the state dir's spool/
 * before the agent starts again. With !own_spool (the state dir is
 * another agent's now: it took it while it was gone) every result held in
 * memory is saved there at once. 0, or -1 (said) when any was not
 * spooled: the agent exits 1. */
static int rescue_unspooled(gb_agent_t *a, int own_spool) {
    gb_spool_t *elsewhere = NULL;
    char err[512], err2[512], dir[PATH_MAX];
    int rc = 0;
    gb_fmt(dir, sizeof dir, "%s/gpubench-state-%s", gb_tmpdir(), a->id);
    for (size_t i = 0; i < a->n_unacked; i++) {
        unacked_t *u = &a->unacked[i];
        if ((own_spool && u->on_disk) || !u->mem) continue; /* not ours: its entries neither */
        gb_copy(err, sizeof err, "the state directory is another agent's now");
        if (own_spool && gb_spool_ensure(a->spool, err, sizeof err) == 0 &&
            gb_spool_put(a->spool, u->job_id, u->attempt, u->mem, u->mem_len, err, sizeof err) ==
                0) {
            u->on_disk = 1;
            gb_info("spool: the result of job %" PRIu64 " attempt %u, held in memory, is in the "
                    "spool now (at the stop)",
                    u->job_id, u->attempt);
            continue;
        }
        rc = -1;
        err2[0] = '\0';
        if (!elsewhere) elsewhere = rescue_dir(a, dir, sizeof dir, err2, sizeof err2);
        if (elsewhere && gb_spool_put(elsewhere, u->job_id, u->attempt, u->mem, u->mem_len, err2,
                                      sizeof err2) == 0)
            gb_error("spool: the result of job %" PRIu64 " attempt %u, held only in memory, "
                     "cannot be spooled at the stop (%s): saved in %s, a state directory of this "
                     "agent's id: `gpubench agent --state-dir %s` (with the other options) sends "
                     "it%s%s%s",
                     u->job_id, u->attempt, err, dir, dir,
                     own_spool ? "; or move its spool/result-*.pb into " : "",
                     own_spool ? a->state_dir : "",
                     own_spool ? "/spool/ before the agent starts again" : "");
        else
            gb_error("spool: the result of job %" PRIu64 " attempt %u, held only in memory, "
                     "cannot be spooled at the stop (%s), nor saved in %s (%s): it is lost",
                     u->job_id, u->attempt, err, dir, err2);
    }
    gb_spool_destroy(&elsewhere);
    return rc;
}

int gb_agent_run(gb_agent_t *a) {
    zmq_pollitem_t items[2 + 2 * GB_AGENT_MAX_SLOTS];
    int failed = 0, own_spool = 1; /* !own_spool: another agent took the state dir */
    a->next_hb_ms = 0;             /* hello at once */
    a->last_rx_ms = gb_mono_ms();
    while (!(a->cfg.stop && atomic_load(a->cfg.stop))) {
        int n = 0;
        items[n++] = (zmq_pollitem_t){a->sock, 0, ZMQ_POLLIN, 0};
        int slot_of[2 + 2 * GB_AGENT_MAX_SLOTS], is_rdv[2 + 2 * GB_AGENT_MAX_SLOTS], i_mon = -1;
        if (a->monitor) {
            i_mon = n;
            slot_of[n] = -1;
            is_rdv[n] = 0;
            items[n++] = (zmq_pollitem_t){a->monitor, 0, ZMQ_POLLIN, 0};
        }
        for (int i = 0; i < a->cfg.slots; i++) {
            if (a->slots[i].run && gb_run_fd(a->slots[i].run) >= 0) {
                slot_of[n] = i;
                is_rdv[n] = 0;
                items[n++] = (zmq_pollitem_t){NULL, gb_run_fd(a->slots[i].run), ZMQ_POLLIN, 0};
            }
            if (a->slots[i].run && gb_run_rdv_fd(a->slots[i].run) >= 0) {
                slot_of[n] = i;
                is_rdv[n] = 1;
                items[n++] = (zmq_pollitem_t){NULL, gb_run_rdv_fd(a->slots[i].run), ZMQ_POLLIN, 0};
            }
        }
        int64_t now = gb_mono_ms();
        long timeout = (long)(a->next_hb_ms - now);
        if (timeout < 0) timeout = 0;
        if (timeout > 100) timeout = 100; /* workers are reaped and stop requests seen */
        if (zmq_poll(items, n, timeout) < 0) {
            if (errno == EINTR) continue;
            gb_error("poll: %s", zmq_strerror(errno));
            failed = 1;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN)
            for (int i = 0; i < 1000; i++) {
                gb_frame_t f;
                if (gb_zmq_recv(a->sock, 0, &f) != 0) break;
                on_message(a, &f);
                gb_frame_close(&f);
            }
        if (i_mon >= 0 && (items[i_mon].revents & ZMQ_POLLIN)) read_monitor(a);
        for (int i = 1; i < n; i++)
            if (i != i_mon && items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR) &&
                a->slots[slot_of[i]].run) {
                if (!is_rdv[i])
                    gb_run_read(a->slots[slot_of[i]].run);
                else if (gb_run_rdv_fd(a->slots[slot_of[i]].run) >= 0)
                    rank_read(a, &a->slots[slot_of[i]]);
            }
        reap_jobs(a);
        now = gb_mono_ms();
        /* a host name that now has another address: the coordinator moved
         * (or came up elsewhere); followed on a new socket */
        int moved = 0;
        if (a->by_name && !a->registered && now >= a->lookup_at_ms) {
            moved = look_up(a, now, 0);
            now = gb_mono_ms();
            if (a->cfg.stop && atomic_load(a->cfg.stop)) break;
        }
        if (moved) {
            a->reopen_backoff_ms = 0; /* a refused handshake there said at once */
            a->handshake_logged_ms = 0;
            a->last_handshake[0] = '\0';
        }
        if (moved || (a->reopen_at_ms && now >= a->reopen_at_ms)) {
            char err[600];
            a->reopen_at_ms = 0;
            close_socket(a);
            if (open_socket(a, err, sizeof err) != 0) {
                gb_error("%s", err);
                failed = 1;
                break;
            }
            gb_debug("connecting to %s (%s) again on a new socket", a->cfg.connect, target(a));
            a->registered = 0;
            a->next_hb_ms = now;
        }
        if (a->registered && now - a->last_rx_ms > (int64_t)a->hb_ms * a->lost_after) {
            gb_warn("the coordinator has been silent for %" PRId64 " ms: registering again",
                    now - a->last_rx_ms);
            a->registered = 0;
            a->next_hb_ms = now;
            a->lookup_at_ms = now; /* it may have moved: its name looked up at once */
        }
        /* a wrong --connect must not look like an idle agent: say so after
         * 5 s (or a lost window) without an answer, then every 30 s */
        int64_t silent = now - a->last_rx_ms, window = (int64_t)a->hb_ms * a->lost_after;
        if (!a->registered && silent > (window > 5000 ? window : 5000) &&
            !a->denied_backoff_ms && /* it answers: "denied" is logged */
            (!a->silent_warned_ms || now - a->silent_warned_ms >= 30000)) {
            char said[300] = "", why[512];
            gb_probe_t p = GB_PROBE_UNKNOWN;
            if (a->lookup_failed[0]) { /* what the last lookup said */
                p = a->lookup_failed_rc == -1 ? GB_PROBE_NO_NAME : GB_PROBE_UNREACHABLE;
                gb_copy(said, sizeof said, a->lookup_failed);
            } else if (target(a)[0]) { /* a look at what is there */
                p = gb_zmq_probe(target(a), 500, said, sizeof said);
            }
            if (a->last_handshake[0] && !a->lookup_failed[0])
                gb_warn("no answer from %s for %" PRId64 " s; still trying: the last handshake "
                        "failed: %s",
                        a->cfg.connect, silent / 1000, a->last_handshake);
            else if (gb_probe_str(p, said, a->cfg.curve != NULL, why, sizeof why))
                gb_warn("no answer from %s for %" PRId64 " s; still trying: %s", a->cfg.connect,
                        silent / 1000, why);
            else
                gb_warn("no answer from %s for %" PRId64
                        " s; still trying (is the coordinator running? is --connect right?)",
                        a->cfg.connect, silent / 1000);
            a->silent_warned_ms = now;
        }
        if (a->registered) a->silent_warned_ms = 0;
        if (now >= a->next_hb_ms) {
            if (keep_state_dir(a) != 0) {
                failed = 1;
                own_spool = 0;
                break;
            }
            if (a->registered) {
                send_heartbeat(a, 0);
                for (int i = 0; i < a->cfg.slots; i++)
                    rank_resend(a, &a->slots[i]);
            } else {
                send_hello(a);
            }
            a->next_hb_ms = now + a->hb_ms;
        } else if (!a->registered && a->hello_retry_ms && now >= a->hello_retry_ms) {
            send_hello(a);
        }
        if (a->registered)
            for (size_t i = 0; i < a->n_unacked; i++)
                if (now >= a->unacked[i].next_send_ms) send_spooled(a, &a->unacked[i]);
    }
    /* a clean stop is said, so that the coordinator does not wait a lost
     * window to find it gone and shows it `stopped`, not `lost`; the
     * socket lingers up to 1 s for it. The workers end first (up to the
     * kill grace): the coordinator places their jobs again on this word,
     * and a worker still dying must not overlap its job's next run. */
    if (!failed && a->registered) {
        int linger = 1000;
        stop_workers_heartbeating(a);
        send_heartbeat(a, 1);
        zmq_setsockopt(a->sock, ZMQ_LINGER, &linger, sizeof linger);
    }
    /* every exit: a result held only in memory is saved first */
    int rc = rescue_unspooled(a, own_spool);
    if (failed) return -1;
    gb_info("agent stopping");
    return rc;
}
