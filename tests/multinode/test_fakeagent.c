/* test_fakeagent.c - peers that pose as agents over a real socket, for the
 * topology and multi-node integration tests (it_topo.sh, it_mn.sh).
 *
 *   test_fakeagent CASE LISTEN [SECONDS]
 *
 *   topo        registers two nodes with synthetic GPU inventories (this
 *               machine has no GPU): "dgx", 8 GPUs in two NVLink islands
 *               (dgx_lanes), and "pcie", 4 GPUs, every PCIe path class once;
 *               then heartbeats for SECONDS (default 30).
 *   old         registers "old", an agent without the multi-node rendezvous
 *               (Hello.rendezvous 0), and heartbeats for SECONDS.
 *   rank_silent registers as "fake" (multi-node capable), takes a rank of a
 *               multi-node job, reports its worker started, checks the rank
 *               fields, then goes silent: no heartbeat, no ready, nothing.
 *   rank_mute   the same, but keeps heartbeating (listing the rank as
 *               running) and never says ready; when the coordinator cancels
 *               the rank, it reports it cancelled and waits for the ack.
 *   rank_early  the same, but reports its rank ended "ok" (with a record)
 *               before it ever said ready: a worker that did not take part
 *               in the rendezvous; waits for the ack.
 *   rank_lost   the same, but reports the rank's outcome lost (its spool
 *               entry unreadable): failed, outcome_lost; waits for the ack.
 *   rank_stop   the same, but then says it stops (its last Heartbeat,
 *               stopping) holding the rank's result in its spool, prints
 *               "stopping sent" and stays silent for SECONDS.
 *   rank0_restart registers as "fake" (first: it gets rank 0), takes rank
 *               0 and sends its worker's unique id, but not the Progress
 *               "started" (lost on a reconnect), heartbeating without the
 *               job; then comes back (a new connection, a Hello with
 *               nothing running), as its agent restarted: its rank must not
 *               be assigned again (a new worker's id was ignored, and the
 *               other ranks started on the dead one's).
 *   rank0_two_ids the same, but then sends a second, different id on the
 *               same connection (a second worker of rank 0).
 * Each prints what it saw and "ok" at the end; CHECK failures exit 1. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_rdv.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static void *ctx;

static void *peer(const char *ep, const char *rid) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    CHECK(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
    CHECKF(zmq_connect(s, ep) == 0, "connect %s", ep);
    return s;
}

static Gb__Envelope *recv_env(void *s, int ms) {
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0) return NULL;
    gb_frame_t f;
    CHECK(gb_zmq_recv(s, 0, &f) == 0);
    Gb__Envelope *env = NULL;
    uint64_t seq;
    char why[512];
    int rc = gb_wire_decode(zmq_msg_data(&f.payload), zmq_msg_size(&f.payload), 1u << 30, &env,
                            &seq, why, sizeof why);
    gb_frame_close(&f);
    CHECKF(rc == 0, "the coordinator sent an invalid envelope: %s", why);
    return env;
}

static void send_body(void *s, Gb__Envelope *env) {
    CHECK(gb_zmq_send(s, NULL, 0, env) == 0);
}

static void heartbeat(void *s, uint64_t job, uint32_t attempt) {
    Gb__JobRef ref = GB__JOB_REF__INIT, *refs[1] = {&ref};
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    if (job) {
        ref.job_id = job;
        ref.attempt = attempt;
        hb.n_running = 1;
        hb.running = refs;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    send_body(s, &env);
}

/* Wait for a body, heartbeating (listing job when non-zero) every 50 ms
 * meanwhile: the coordinators under test beat every 100 ms. */
static Gb__Envelope *await(void *s, Gb__Envelope__BodyCase want, int ms, uint64_t job,
                           uint32_t attempt) {
    int64_t until = gb_mono_ms() + ms;
    while (gb_mono_ms() < until) {
        Gb__Envelope *env = recv_env(s, 50);
        heartbeat(s, job, attempt);
        if (!env) continue;
        if (env->body_case == want) return env;
        CHECKF(env->body_case != GB__ENVELOPE__BODY_REJECT, "rejected: %s", env->reject->reason);
        gb_wire_free(&env);
    }
    CHECKF(0, "no %s within %d ms", gb_wire_body_name(want), ms);
    return NULL;
}

typedef struct node {
    const char *id, *name;
    int n_gpus;
    const char *gpu_name;
    /* the upper triangle, row by row: lanes and path of (a, b), a < b */
    const unsigned *lanes;
    const char *const *paths;
} node_t;

static void hello(void *s, const node_t *n, unsigned rendezvous) {
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = (char *)n->name;
    inv.cpu_model = "Test CPU";
    inv.cpu_cores = 2;
    inv.driver_version = n->n_gpus ? "570.00" : "";
    char *kinds[] = {"gemm", "resnet50", "sleep"};
    inv.n_kinds = 3;
    inv.kinds = kinds;
    Gb__Gpu gpus[8], *gp[8];
    char bus[8][32];
    int n_links = n->n_gpus * (n->n_gpus - 1) / 2;
    Gb__Link links[28], *lp[28];
    for (int i = 0; i < n->n_gpus; i++) {
        gb__gpu__init(&gpus[i]);
        gpus[i].index = (uint32_t)i;
        gpus[i].name = (char *)n->gpu_name;
        snprintf(bus[i], sizeof bus[i], "00000000:%02X:00.0", 0x18 + 0x10 * i);
        gpus[i].pci_bus_id = bus[i];
        gpus[i].cc_major = 9;
        gpus[i].memory_bytes = 80ull << 30;
        gp[i] = &gpus[i];
    }
    for (int a = 0, k = 0; a < n->n_gpus; a++)
        for (int b = a + 1; b < n->n_gpus; b++, k++) {
            gb__link__init(&links[k]);
            links[k].gpu_a = (uint32_t)a;
            links[k].gpu_b = (uint32_t)b;
            links[k].nvlink_lanes = n->lanes[k];
            links[k].pcie_path = (char *)n->paths[k];
            lp[k] = &links[k];
        }
    inv.n_gpus = (size_t)n->n_gpus;
    inv.gpus = gp;
    inv.n_links = (size_t)n_links;
    inv.links = lp;
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = (char *)n->id;
    h.name = (char *)n->name;
    h.inventory = &inv;
    h.rendezvous = rendezvous;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = 1;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    send_body(s, &env);
    Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000, 0, 0);
    gb_wire_free(&w);
    printf("registered %s\n", n->name);
    fflush(stdout);
}

/* 8 GPUs in two halves of 4: NVLink between the GPUs of a half (12 lanes
 * between 0-1 and 2-3, 6 on the other pairs), none across; across the
 * halves the PCIe path is the other socket (SYS), inside a half the same
 * switch for 0-1 / 4-5 and a host bridge otherwise. */
static const unsigned dgx_lanes[28] = {
    12, 6, 6, 0, 0, 0, 0, /* 0-1 .. 0-7 */
    6,  6, 0, 0, 0, 0,    /* 1-2 .. 1-7 */
    12, 0, 0, 0, 0,       /* 2-3 .. 2-7 */
    0,  0, 0, 0,          /* 3-4 .. 3-7 */
    12, 6, 6,             /* 4-5 .. 4-7 */
    6,  6,                /* 5-6, 5-7 */
    12,                   /* 6-7 */
};
static const char *const dgx_paths[28] = {
    "single_switch", "host_bridge",  "host_bridge",   "cross_socket",  "cross_socket",
    "cross_socket",  "cross_socket", "host_bridge",   "host_bridge",   "cross_socket",
    "cross_socket",  "cross_socket", "cross_socket",  "single_switch", "cross_socket",
    "cross_socket",  "cross_socket", "cross_socket",  "cross_socket",  "cross_socket",
    "cross_socket",  "cross_socket", "single_switch", "host_bridge",   "host_bridge",
    "host_bridge",   "host_bridge",  "single_switch",
};
/* 4 PCIe cards, every path class once (and one NVML could not tell) */
static const unsigned pcie_lanes[6] = {0, 0, 0, 0, 0, 0};
static const char *const pcie_paths[6] = {"single_switch", "multi_switch", "host_bridge",
                                          "numa_node",     "cross_socket", "unknown"};

/* Register as "fake", take one rank and check its fields. */
static void *fake_rank(const char *listen, uint64_t *job, uint32_t *attempt) {
    static const node_t n = {"fakeagent01", "fake", 0, NULL, NULL, NULL};
    void *s = peer(listen, n.id);
    hello(s, &n, 1);
    Gb__Envelope *as = await(s, GB__ENVELOPE__BODY_ASSIGN, 20000, 0, 0);
    const Gb__JobAssign *a = as->assign;
    *job = a->job_id;
    *attempt = a->attempt;
    printf("assigned job %llu attempt %u: rank %u of %u node(s), world %u, id %zu bytes\n",
           (unsigned long long)a->job_id, a->attempt, a->rank, a->n_nodes, a->world_size,
           a->unique_id.len);
    CHECKF(a->n_nodes >= 2 && a->rank >= 1 && a->rank < a->n_nodes, "rank fields");
    /* rank 0 is a sleep worker: its id is "GBSLEEP1" + this job + attempt */
    CHECKF(a->unique_id.len == 44 && memcmp(a->unique_id.data, "GBSLEEP1", 8) == 0,
           "not a sleep rank 0's id");
    uint64_t idjob = 0;
    for (int i = 0; i < 8; i++)
        idjob = idjob << 8 | a->unique_id.data[8 + i];
    CHECKF(idjob == a->job_id, "the id is of job %llu", (unsigned long long)idjob);
    fflush(stdout);
    gb_wire_free(&as);
    Gb__Progress p = GB__PROGRESS__INIT;
    p.job_id = *job;
    p.attempt = *attempt;
    p.phase = GB__PHASE__PHASE_STARTED;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    send_body(s, &env);
    return s;
}

/* Send the rank's Result r (for job, attempt) and wait for its ack. */
static void report(void *s, uint64_t job, uint32_t attempt, Gb__Result *r) {
    r->job_id = job;
    r->attempt = attempt;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = r;
    send_body(s, &env);
    Gb__Envelope *ack = await(s, GB__ENVELOPE__BODY_RESULT_ACK, 5000, 0, 0);
    CHECK(ack->result_ack->job_id == job && ack->result_ack->attempt == attempt);
    gb_wire_free(&ack);
}

/* Send rank 0's unique id as a sleep worker makes it (worker/dist.c):
 * magic, job, attempt, 16 bytes (from salt), FNV-1a 64 of those 36. No
 * Progress "started" first: lost on a reconnect. */
static void send_sleep_id(void *s, uint64_t job, uint32_t att, int salt) {
    unsigned char id[44];
    memcpy(id, "GBSLEEP1", 8);
    for (int i = 0; i < 8; i++)
        id[8 + i] = (unsigned char)(job >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        id[16 + i] = (unsigned char)(att >> (24 - 8 * i));
    for (int i = 0; i < 16; i++)
        id[20 + i] = (unsigned char)(37 * i + salt);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 36; i++)
        h = (h ^ id[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++)
        id[36 + i] = (unsigned char)(h >> (56 - 8 * i));
    Gb__RankUpdate u = GB__RANK_UPDATE__INIT;
    u.job_id = job;
    u.attempt = att;
    u.phase = GB__RANK_PHASE__RANK_ID;
    u.unique_id.data = id;
    u.unique_id.len = sizeof id;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RANK_UPDATE;
    env.rank_update = &u;
    send_body(s, &env);
    printf("sent an id (%d)\n", salt);
    fflush(stdout);
}

/* ms of reading, heartbeating (listing no job) unless quiet; no_assign:
 * a JobAssign fails */
static void pump(void *s, int ms, int no_assign, int quiet) {
    for (int64_t until = gb_mono_ms() + ms; gb_mono_ms() < until;) {
        Gb__Envelope *e = recv_env(s, 50);
        CHECKF(!e || e->body_case != GB__ENVELOPE__BODY_REJECT, "rejected: %s", e->reject->reason);
        CHECKF(!no_assign || !e || e->body_case != GB__ENVELOPE__BODY_ASSIGN,
               "rank 0 assigned again after its agent came back, though its worker had sent its "
               "id");
        gb_wire_free(&e);
        if (!quiet) heartbeat(s, 0, 0);
    }
}

int main(int argc, char **argv) {
    CHECKF(argc >= 3, "usage: test_fakeagent CASE LISTEN [SECONDS]");
    const char *c = argv[1], *listen = argv[2];
    int seconds = argc > 3 ? atoi(argv[3]) : 30;
    ctx = zmq_ctx_new();
    CHECK(ctx);
    if (strcmp(c, "topo") == 0) {
        static const node_t dgx = {"fakedgx01", "dgx",    8, "NVIDIA H100 80GB HBM3",
                                   dgx_lanes,   dgx_paths};
        static const node_t pcie = {"fakepcie01", "pcie", 4, "NVIDIA L40S", pcie_lanes, pcie_paths};
        void *a = peer(listen, dgx.id), *b = peer(listen, pcie.id);
        hello(a, &dgx, 1);
        hello(b, &pcie, 1);
        int64_t until = gb_mono_ms() + (int64_t)seconds * 1000;
        while (gb_mono_ms() < until) {
            Gb__Envelope *e = recv_env(a, 25);
            gb_wire_free(&e);
            e = recv_env(b, 25);
            gb_wire_free(&e);
            heartbeat(a, 0, 0);
            heartbeat(b, 0, 0);
        }
        zmq_close(a);
        zmq_close(b);
    } else if (strcmp(c, "old") == 0) {
        static const node_t n = {"fakeold01", "old", 0, NULL, NULL, NULL};
        void *s = peer(listen, n.id);
        hello(s, &n, 0);
        int64_t until = gb_mono_ms() + (int64_t)seconds * 1000;
        while (gb_mono_ms() < until) {
            Gb__Envelope *e = recv_env(s, 50);
            CHECKF(!e || e->body_case != GB__ENVELOPE__BODY_ASSIGN,
                   "a rank was assigned to an agent without the rendezvous");
            gb_wire_free(&e);
            heartbeat(s, 0, 0);
        }
        zmq_close(s);
    } else if (strcmp(c, "rank_silent") == 0) {
        uint64_t job;
        uint32_t att;
        void *s = fake_rank(listen, &job, &att);
        printf("going silent\n");
        fflush(stdout);
        struct timespec ts = {seconds, 0};
        nanosleep(&ts, NULL);
        zmq_close(s);
    } else if (strcmp(c, "rank_mute") == 0) {
        uint64_t job;
        uint32_t att;
        void *s = fake_rank(listen, &job, &att);
        Gb__Envelope *cn = await(s, GB__ENVELOPE__BODY_CANCEL, seconds * 1000, job, att);
        CHECK(cn->cancel->job_id == job && cn->cancel->attempt == att);
        gb_wire_free(&cn);
        printf("cancelled\n");
        Gb__Result r = GB__RESULT__INIT;
        r.status = GB__RESULT_STATUS__RESULT_CANCELLED;
        r.error = "cancelled by request";
        r.exit_code = -15;
        report(s, job, att, &r);
        zmq_close(s);
    } else if (strcmp(c, "rank_early") == 0) {
        uint64_t job;
        uint32_t att;
        void *s = fake_rank(listen, &job, &att);
        Gb__Result r = GB__RESULT__INIT;
        r.status = GB__RESULT_STATUS__RESULT_OK;
        r.exit_code = 0;
        r.record_json = "{\"kind\": \"sleep\", \"n_devices\": 2, \"valid\": true}";
        report(s, job, att, &r);
        printf("reported ok before the barrier\n");
        zmq_close(s);
    } else if (strcmp(c, "rank_lost") == 0) {
        uint64_t job;
        uint32_t att;
        void *s = fake_rank(listen, &job, &att);
        Gb__Result r = GB__RESULT__INIT;
        r.status = GB__RESULT_STATUS__RESULT_FAILED;
        r.outcome_lost = 1;
        r.exit_code = -1;
        r.error = "the agent's spooled result was unreadable";
        report(s, job, att, &r);
        printf("reported the outcome lost\n");
        zmq_close(s);
    } else if (strcmp(c, "rank_stop") == 0) {
        uint64_t job;
        uint32_t att;
        void *s = fake_rank(listen, &job, &att);
        Gb__JobRef ref = GB__JOB_REF__INIT, *refs[1] = {&ref};
        ref.job_id = job;
        ref.attempt = att;
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        hb.spooled = 1;
        hb.n_spooled_jobs = 1;
        hb.spooled_jobs = refs;
        hb.stopping = 1;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        send_body(s, &env);
        printf("stopping sent\n");
        fflush(stdout);
        struct timespec ts = {seconds, 0};
        nanosleep(&ts, NULL);
        zmq_close(s);
    } else if (strcmp(c, "rank0_restart") == 0 || strcmp(c, "rank0_two_ids") == 0) {
        static const node_t n = {"fakeagent00", "fake", 0, NULL, NULL, NULL};
        void *s = peer(listen, n.id);
        hello(s, &n, 1);
        Gb__Envelope *as = await(s, GB__ENVELOPE__BODY_ASSIGN, seconds * 1000, 0, 0);
        uint64_t job = as->assign->job_id;
        uint32_t att = as->assign->attempt;
        printf("assigned job %llu attempt %u: rank %u of %u node(s)\n", (unsigned long long)job,
               att, as->assign->rank, as->assign->n_nodes);
        CHECKF(as->assign->rank == 0 && as->assign->unique_id.len == 0, "not rank 0");
        gb_wire_free(&as);
        send_sleep_id(s, job, att, 11);
        /* the others are assigned on it. No heartbeat (it would list the
         * job, and say the worker runs): the agent restarts before its next
         * one (300 ms, within the 500 ms lost window of it_mn.sh) */
        pump(s, 300, 0, 1);
        if (strcmp(c, "rank0_two_ids") == 0) {
            /* a second worker's, on the same connection */
            send_sleep_id(s, job, att, 12);
            pump(s, 1500, 0, 0);
        } else {
            zmq_close(s);
            s = peer(listen, n.id);
            hello(s, &n, 1);
            printf("came back\n");
            fflush(stdout);
            pump(s, 1500, 1, 0);
            printf("not assigned again\n");
        }
        zmq_close(s);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    zmq_ctx_term(ctx);
    printf("ok\n");
    return 0;
}
