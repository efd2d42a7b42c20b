/* test_rawpeer.c - a peer that speaks raw frames to a running coordinator,
 * for the bad-input and fake-agent integration tests (driven by
 * it_bad_input.sh and it_fake_agent.sh).
 *
 *   test_rawpeer CASE LISTEN CONTROL [ARGS...]
 *
 * Bad-input cases send one malformed frame and CHECK the Reject that comes
 * back (code and a word of its reason). Fake-agent cases register as agent
 * "fake", take the job the script submits to it, and answer it in a
 * particular way. The coordinator under test runs with --max-frame 65536. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define MAX_FRAME 65536 /* the --max-frame the scripts give the coordinator */
/* what the agents endpoint takes with it: never less than a result */
#define AGENTS_MAX                                                                                 \
    ((size_t)(MAX_FRAME > GB_WIRE_RESULT_FRAME_MAX ? MAX_FRAME : GB_WIRE_RESULT_FRAME_MAX))

static void *ctx;

static void *peer(const char *ep, const char *rid) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    CHECK(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rid) zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
    CHECKF(zmq_connect(s, ep) == 0, "connect %s", ep);
    return s;
}

static void send_raw(void *s, const void *buf, size_t len, int more) {
    CHECKF(zmq_send(s, buf, len, more ? ZMQ_SNDMORE : 0) == (int)len, "send: %s",
           zmq_strerror(errno));
}

/* Pack with any version (gb_wire_pack would force the right one). */
static void send_env_version(void *s, Gb__Envelope *env, uint32_t version) {
    env->version = version;
    size_t n = gb__envelope__get_packed_size(env);
    uint8_t *buf = malloc(n + 1);
    CHECK(buf);
    CHECK(gb__envelope__pack(env, buf) == n);
    send_raw(s, buf, n, 0);
    free(buf);
}

/* The next envelope within ms, or NULL. */
static Gb__Envelope *recv_env(void *s, int ms) {
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0) return NULL;
    gb_frame_t f;
    CHECK(gb_zmq_recv(s, 0, &f) == 0);
    CHECKF(f.parts == 1, "the coordinator sent %d frames", f.parts);
    Gb__Envelope *env = NULL;
    uint64_t seq;
    char why[512];
    int rc = gb_wire_decode(zmq_msg_data(&f.payload), zmq_msg_size(&f.payload), 1u << 30, &env,
                            &seq, why, sizeof why);
    gb_frame_close(&f);
    CHECKF(rc == 0, "the coordinator sent an invalid envelope: %s", why);
    return env;
}

/* Expect a Reject with code and a reason containing word. */
static void expect_reject(void *s, int code, const char *word) {
    Gb__Envelope *env = recv_env(s, 3000);
    CHECKF(env, "no reply within 3 s (expected a %s reject)", gb_wire_reject_name(code));
    CHECKF(env->body_case == GB__ENVELOPE__BODY_REJECT, "got %s, expected a reject",
           gb_wire_body_name(env->body_case));
    printf("reject %s: %s\n", gb_wire_reject_name(env->reject->code), env->reject->reason);
    CHECKF((int)env->reject->code == code, "reject code %s, expected %s",
           gb_wire_reject_name(env->reject->code), gb_wire_reject_name(code));
    CHECKF(strstr(env->reject->reason, word), "reason '%s' lacks '%s'", env->reject->reason, word);
    gb_wire_free(&env);
}

/* A frame 1 KiB over cap: no reply (libzmq drops the connection before
 * reading it); the socket reconnects and is served again. */
static void over_hard_cap(void *s, size_t cap) {
    size_t n = cap + 1024;
    char *big = calloc(1, n);
    CHECK(big);
    send_raw(s, big, n, 0);
    free(big);
    Gb__Envelope *env = recv_env(s, 1000);
    CHECKF(!env, "a frame over the %zu-byte hard cap got a reply", cap);
    static const char junk[] = "\xff\xff still here";
    send_raw(s, junk, sizeof junk - 1, 0);
    expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "not a gpubench envelope");
}

static void hello_spooled(void *s, const char *id, const char *name, unsigned cores,
                          Gb__JobRef *spooled);

static void hello(void *s, const char *id, const char *name, unsigned cores) {
    hello_spooled(s, id, name, cores, NULL);
}

static void hello_spooled(void *s, const char *id, const char *name, unsigned cores,
                          Gb__JobRef *spooled) {
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = "rawpeer";
    inv.cpu_model = "Test CPU";
    inv.cpu_cores = cores;
    char *kinds[] = {"gemm", "sleep"};
    inv.n_kinds = 2;
    inv.kinds = kinds;
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = (char *)id;
    h.name = (char *)name;
    h.inventory = &inv;
    if (spooled) {
        h.n_spooled = 1;
        h.spooled = &spooled;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = 1;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
}

/* The job the fake lists as running, and the result it lists as spooled,
 * in its heartbeats (job_id 0: none), as a real agent does while it holds
 * them; unlisted, a started job vanishes from the coordinator's view after
 * two heartbeats. */
static Gb__JobRef hb_running = GB__JOB_REF__INIT, hb_spooled = GB__JOB_REF__INIT;

static void heartbeat(void *s) {
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    Gb__JobRef *run = &hb_running, *spool = &hb_spooled;
    if (hb_running.job_id) {
        hb.n_running = 1;
        hb.running = &run;
    }
    if (hb_spooled.job_id) {
        hb.spooled = 1;
        hb.n_spooled_jobs = 1;
        hb.spooled_jobs = &spool;
    }
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
}

/* Wait for a body, heartbeating every 50 ms meanwhile (the coordinator
 * runs with a 100 ms heartbeat). */
static Gb__Envelope *await(void *s, Gb__Envelope__BodyCase want, int ms) {
    int64_t until = gb_mono_ms() + ms;
    while (gb_mono_ms() < until) {
        Gb__Envelope *env = recv_env(s, 50);
        heartbeat(s);
        if (!env) continue;
        if (env->body_case == want) return env;
        CHECKF(env->body_case != GB__ENVELOPE__BODY_REJECT, "rejected: %s", env->reject->reason);
        gb_wire_free(&env);
    }
    CHECKF(0, "no %s within %d ms", gb_wire_body_name(want), ms);
    return NULL;
}

static const char *result_store_id; /* Result.store_id of send_result, NULL: none */

static void send_result(void *s, uint64_t job, uint32_t attempt, Gb__ResultStatus st,
                        const char *record) {
    Gb__Result r = GB__RESULT__INIT;
    if (result_store_id) r.store_id = (char *)result_store_id;
    r.job_id = job;
    r.attempt = attempt;
    r.status = st;
    r.record_json = (char *)record;
    r.output_tail = "rawpeer output\n";
    r.started_at_ms = (uint64_t)gb_wall_ms();
    r.finished_at_ms = r.started_at_ms;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = &r;
    CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
}

static void expect_ack(void *s, uint64_t job, uint32_t attempt) {
    Gb__Envelope *ack = await(s, GB__ENVELOPE__BODY_RESULT_ACK, 5000);
    CHECKF(ack->result_ack->job_id == job && ack->result_ack->attempt == attempt,
           "ack for job %llu attempt %u", (unsigned long long)ack->result_ack->job_id,
           ack->result_ack->attempt);
    gb_wire_free(&ack);
}

/* Register as "fake", take one assignment, report it started. */
static void *fake_agent(const char *listen, uint64_t *job, uint32_t *attempt) {
    void *s = peer(listen, "fakeagent01");
    hello(s, "fakeagent01", "fake", 4);
    Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000);
    gb_wire_free(&w);
    printf("registered\n");
    fflush(stdout);
    Gb__Envelope *as = await(s, GB__ENVELOPE__BODY_ASSIGN, 20000);
    *job = as->assign->job_id;
    *attempt = as->assign->attempt;
    printf("assigned job %llu attempt %u: %s\n", (unsigned long long)*job, *attempt,
           as->assign->params_json);
    gb_wire_free(&as);
    Gb__Progress p = GB__PROGRESS__INIT;
    p.job_id = *job;
    p.attempt = *attempt;
    p.phase = GB__PHASE__PHASE_STARTED;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
    return s;
}

/* The job given again as attempt att + 1 (its attempt att given up);
 * returns att + 1. */
static uint32_t expect_reassign(void *s, uint64_t job, uint32_t att) {
    Gb__Envelope *as = await(s, GB__ENVELOPE__BODY_ASSIGN, 10000);
    CHECKF(as->assign->job_id == job && as->assign->attempt == att + 1,
           "re-assigned job %llu attempt %u", (unsigned long long)as->assign->job_id,
           as->assign->attempt);
    gb_wire_free(&as);
    return att + 1;
}

/* A SubmitRequest of spec with request_id rid (NULL: none); the sweep id
 * of the reply, 0 after a Reject (its reason in why). */
static uint64_t submit_ex(void *s, const char *spec, const char *rid, int only_if_made, char *why,
                          size_t whylen) {
    Gb__SubmitRequest rq = GB__SUBMIT_REQUEST__INIT;
    rq.spec_json = (char *)spec;
    if (rid) rq.request_id = (char *)rid;
    rq.only_if_made = only_if_made;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = (uint64_t)gb_wall_ms();
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &rq;
    CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
    Gb__Envelope *rep = recv_env(s, 3000);
    CHECKF(rep, "no reply to a submit within 3 s");
    uint64_t id = 0;
    why[0] = '\0';
    if (rep->body_case == GB__ENVELOPE__BODY_SUBMIT_REPLY)
        id = rep->submit_reply->sweep_id;
    else if (rep->body_case == GB__ENVELOPE__BODY_REJECT)
        snprintf(why, whylen, "%s", rep->reject->reason);
    else
        CHECKF(0, "a submit answered with %s", gb_wire_body_name(rep->body_case));
    gb_wire_free(&rep);
    return id;
}

static uint64_t submit_as(void *s, const char *spec, const char *rid, char *why, size_t whylen) {
    return submit_ex(s, spec, rid, 0, why, whylen);
}

/* A coordinator's control endpoint that swallows the first SubmitRequest
 * (its reply "lost"), answers the capability question (NodesRequest
 * no_nodes) with submit_request_ids = knows, and a resend with sweep 7;
 * CHECKs that the resend carries the first one's request id. knows 0:
 * CHECKs that no resend comes within 3 s of the answer. */
static void fake_coordinator(const char *ep, int knows) {
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    CHECK(r);
    int zero = 0;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    CHECKF(zmq_bind(r, ep) == 0, "bind %s: %s", ep, zmq_strerror(errno));
    char first[80] = "";
    int64_t answered = 0;
    for (;;) {
        zmq_pollitem_t it = {r, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, 100);
        CHECK(n >= 0);
        if (answered && gb_mono_ms() - answered > 3000) {
            CHECKF(!knows, "no resend after the capability answer");
            break; /* an older coordinator's client asked nothing more */
        }
        if (n == 0) continue;
        gb_frame_t f;
        if (gb_zmq_recv(r, 1, &f) != 0) continue;
        Gb__Envelope *env = NULL;
        uint64_t seq;
        char why[300];
        CHECKF(gb_wire_decode(zmq_msg_data(&f.payload), zmq_msg_size(&f.payload), 1u << 30, &env,
                              &seq, why, sizeof why) == 0,
               "%s", why);
        if (env->body_case == GB__ENVELOPE__BODY_NODES) {
            CHECKF(env->nodes->no_nodes, "a NodesRequest for the node list");
            Gb__NodesReply nr = GB__NODES_REPLY__INIT;
            nr.submit_request_ids = knows != 0;
            Gb__Envelope rep = GB__ENVELOPE__INIT;
            rep.seq = env->seq;
            rep.body_case = GB__ENVELOPE__BODY_NODES_REPLY;
            rep.nodes_reply = &nr;
            CHECK(gb_zmq_send(r, f.rid, f.rid_len, &rep) == 0);
            answered = gb_mono_ms();
        } else {
            CHECKF(env->body_case == GB__ENVELOPE__BODY_SUBMIT, "got %s",
                   gb_wire_body_name(env->body_case));
            const char *id = env->submit->request_id;
            CHECKF(id && strlen(id) == 32, "request id '%s'", id ? id : "");
            if (!first[0]) {
                snprintf(first, sizeof first, "%s", id); /* swallowed */
            } else {
                CHECKF(knows, "a resend to a coordinator that does not know request ids");
                CHECKF(strcmp(id, first) == 0, "the resend's id %s, the first's %s", id, first);
                Gb__SubmitReply sr = GB__SUBMIT_REPLY__INIT;
                sr.sweep_id = 7;
                sr.n_jobs = 1;
                Gb__Envelope rep = GB__ENVELOPE__INIT;
                rep.seq = env->seq;
                rep.body_case = GB__ENVELOPE__BODY_SUBMIT_REPLY;
                rep.submit_reply = &sr;
                CHECK(gb_zmq_send(r, f.rid, f.rid_len, &rep) == 0);
                gb_wire_free(&env);
                gb_frame_close(&f);
                struct timespec ts = {0, 300000000L}; /* let it go out */
                nanosleep(&ts, NULL);
                break;
            }
        }
        gb_wire_free(&env);
        gb_frame_close(&f);
    }
    zmq_close(r);
    printf("ok\n");
}

int main(int argc, char **argv) {
    CHECKF(argc >= 4, "usage: test_rawpeer CASE LISTEN CONTROL [ARGS...]");
    const char *c = argv[1], *listen = argv[2], *control = argv[3];
    ctx = zmq_ctx_new();
    CHECK(ctx);
    void *s = NULL;
    if (strcmp(c, "garbage") == 0) {
        s = peer(listen, NULL);
        static const char junk[] = "\xff\xfe\x01 this is not a protobuf envelope \x80\x80";
        send_raw(s, junk, sizeof junk - 1, 0);
        expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "not a gpubench envelope");
    } else if (strcmp(c, "truncated") == 0) {
        s = peer(listen, NULL);
        Gb__SubmitRequest rq = GB__SUBMIT_REQUEST__INIT;
        rq.spec_json = "{\"kind\": \"sleep\", \"duration_ms\": 10}";
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_SUBMIT;
        env.submit = &rq;
        size_t len;
        uint8_t *buf = gb_wire_pack(&env, &len);
        send_raw(s, buf, len / 2, 0); /* cut inside the spec string */
        free(buf);
        expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "not a gpubench envelope");
    } else if (strcmp(c, "version") == 0) {
        s = peer(listen, NULL);
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = 77;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        send_env_version(s, &env, 99);
        expect_reject(s, GB__REJECT_CODE__REJECT_VERSION, "version 99");
    } else if (strcmp(c, "empty") == 0) {
        s = peer(listen, NULL);
        send_raw(s, "", 0, 0); /* protobuf would read it as an envelope of version 0 */
        expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "an empty frame");
    } else if (strcmp(c, "nobody") == 0) {
        s = peer(listen, NULL);
        Gb__Envelope env = GB__ENVELOPE__INIT;
        send_env_version(s, &env, GB_PROTOCOL_VERSION);
        expect_reject(s, GB__REJECT_CODE__REJECT_RANGE, "no body");
    } else if (strcmp(c, "oversize") == 0) {
        /* the agents endpoint takes at least an agent's largest result,
         * whatever --max-frame says */
        s = peer(listen, NULL);
        size_t n = AGENTS_MAX + 1;
        char *big = calloc(1, n);
        CHECK(big);
        send_raw(s, big, n, 0);
        free(big);
        expect_reject(s, GB__REJECT_CODE__REJECT_TOO_LARGE, "over the limit");
    } else if (strcmp(c, "hardcap") == 0) {
        /* Over GB_WIRE_HARD_FACTOR x max-frame: libzmq drops the connection
         * before the frame is read; the peer reconnects and is served. */
        s = peer(listen, NULL);
        over_hard_cap(s, AGENTS_MAX * GB_WIRE_HARD_FACTOR);
    } else if (strcmp(c, "hardcap_control") == 0) {
        /* the same on the control endpoint (its cap is 4 x max(max-frame,
         * the largest spec + 1 KiB)): no reply, but the coordinator's log
         * says the connection closed before a whole request arrived */
        s = peer(control, NULL);
        size_t cmax = MAX_FRAME > GB_WIRE_SPEC_MAX + 1024 ? MAX_FRAME : GB_WIRE_SPEC_MAX + 1024;
        over_hard_cap(s, cmax * GB_WIRE_HARD_FACTOR);
    } else if (strcmp(c, "multipart") == 0) {
        s = peer(listen, NULL);
        send_raw(s, "a", 1, 1);
        send_raw(s, "b", 1, 0);
        expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "exactly one frame");
    } else if (strcmp(c, "unexpected") == 0) {
        s = peer(listen, NULL);
        Gb__NodesRequest rq = GB__NODES_REQUEST__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_NODES;
        env.nodes = &rq;
        CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
        expect_reject(s, GB__REJECT_CODE__REJECT_UNEXPECTED, "agents may send");
    } else if (strcmp(c, "unknown_agent") == 0) {
        s = peer(listen, "neverhello01");
        heartbeat(s);
        expect_reject(s, GB__REJECT_CODE__REJECT_UNKNOWN_AGENT, "send hello");
    } else if (strcmp(c, "lost_heard_again") == 0) {
        /* registered, silent past the lost window (100 ms x 5), then the
         * heartbeats a partition queued: each refused "send hello" (the
         * coordinator logs it once, at info: it_bad_input.sh) */
        s = peer(listen, "lostagain0001");
        hello(s, "lostagain0001", "lostagain", 2);
        Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000);
        gb_wire_free(&w);
        /* 3 s: lost at 0.5 s, unless the coordinator missed its check for
         * a while (a stall over 1 s is forgiven and moves the clock on) */
        nanosleep(&(struct timespec){3, 0}, NULL);
        for (Gb__Envelope *e; (e = recv_env(s, 10));) /* what came meanwhile */
            gb_wire_free(&e);
        for (int i = 0; i < 6; i++)
            heartbeat(s);
        for (int i = 0; i < 6; i++)
            expect_reject(s, GB__REJECT_CODE__REJECT_UNKNOWN_AGENT, "send hello");
    } else if (strcmp(c, "hello_id_mismatch") == 0) {
        s = peer(listen, "routing01");
        hello(s, "someoneelse01", "liar", 2);
        expect_reject(s, GB__REJECT_CODE__REJECT_RANGE, "routing id");
    } else if (strcmp(c, "hello_range") == 0) {
        s = peer(listen, "zerocores01");
        hello(s, "zerocores01", "zerocores", 0);
        expect_reject(s, GB__REJECT_CODE__REJECT_RANGE, "cpu_cores");
    } else if (strcmp(c, "control_garbage") == 0) {
        s = peer(control, NULL);
        static const char junk[] = "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
        send_raw(s, junk, sizeof junk - 1, 0);
        expect_reject(s, GB__REJECT_CODE__REJECT_DECODE, "not a gpubench envelope");
    } else if (strcmp(c, "submit_spec") == 0) {
        /* the spec on stdin, sent as it is (gpubench submit refuses what is
         * not one JSON object itself): the coordinator's refusal printed */
        static char spec[1 << 16];
        size_t n = fread(spec, 1, sizeof spec - 1, stdin);
        spec[n] = '\0';
        char why[512];
        s = peer(control, NULL);
        uint64_t id = submit_as(s, spec, NULL, why, sizeof why);
        CHECKF(id == 0, "the coordinator accepted it as sweep %llu", (unsigned long long)id);
        printf("rejected: %s\n", why);
    } else if (strcmp(c, "cancel_reason") == 0) {
        /* test_rawpeer cancel_reason - CONTROL SWEEP REASON: a CancelRequest
         * with a reason, as `gpubench run` sends when its --timeout runs
         * out; the reply printed as gpubench cancel says it */
        CHECKF(argc == 6, "usage: test_rawpeer cancel_reason - CONTROL SWEEP REASON");
        s = peer(control, NULL);
        Gb__CancelRequest rq = GB__CANCEL_REQUEST__INIT;
        rq.sweep_id = strtoull(argv[4], NULL, 10);
        rq.reason = argv[5];
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = (uint64_t)gb_wall_ms();
        env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
        env.cancel_request = &rq;
        CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
        Gb__Envelope *rep = recv_env(s, 5000);
        CHECKF(rep, "no reply to a cancel within 5 s");
        CHECKF(rep->body_case != GB__ENVELOPE__BODY_REJECT, "the cancel was rejected: %s",
               rep->reject->reason);
        CHECKF(rep->body_case == GB__ENVELOPE__BODY_CANCEL_REPLY, "a cancel answered with %s",
               gb_wire_body_name(rep->body_case));
        printf("%u queued job(s) cancelled, %u running job(s) stopping\n",
               rep->cancel_reply->cancelled, rep->cancel_reply->stopping);
        gb_wire_free(&rep);
    } else if (strcmp(c, "submit_resend") == 0) {
        /* a submit sent again with its request id (its reply lost) is
         * answered with the sweep the first made; another id makes another */
        static const char spec[] = "{\"kind\": \"sleep\", \"duration_ms\": 10}";
        char why[512];
        s = peer(control, NULL);
        uint64_t a = submit_as(s, spec, "gbtest-resend-0000000001", why, sizeof why);
        CHECKF(a, "rejected: %s", why);
        uint64_t b = submit_as(s, spec, "gbtest-resend-0000000001", why, sizeof why);
        CHECKF(b == a, "the resend made sweep %llu, the first %llu", (unsigned long long)b,
               (unsigned long long)a);
        uint64_t d = submit_as(s, spec, "gbtest-resend-0000000002", why, sizeof why);
        CHECKF(d && d != a, "another request id: sweep %llu (the first %llu)",
               (unsigned long long)d, (unsigned long long)a);
        uint64_t e = submit_as(s, spec, NULL, why, sizeof why);
        CHECKF(e && e != a && e != d, "no request id: sweep %llu", (unsigned long long)e);
        CHECK(submit_as(s, spec, "short", why, sizeof why) == 0);
        CHECKF(strstr(why, "submit.request_id: 16..64 characters"), "%s", why);
        CHECK(submit_as(s, spec, "has a space in it, 0123456789", why, sizeof why) == 0);
        /* only_if_made: the sweep an id made, and nothing made for another
         * (`gpubench run` interrupted before its submit's reply asks this) */
        uint64_t m = submit_ex(s, spec, "gbtest-resend-0000000001", 1, why, sizeof why);
        CHECKF(m == a, "only_if_made: sweep %llu (%s), the first %llu", (unsigned long long)m, why,
               (unsigned long long)a);
        CHECK(submit_ex(s, spec, "gbtest-resend-0000000003", 1, why, sizeof why) == 0);
        CHECKF(strstr(why, "no sweep was made for this request"), "%s", why);
        /* ... and that request, arriving after all, makes nothing */
        CHECK(submit_ex(s, spec, "gbtest-resend-0000000003", 0, why, sizeof why) == 0);
        CHECKF(strstr(why, "this request was withdrawn"), "%s", why);
        CHECK(submit_ex(s, spec, NULL, 1, why, sizeof why) == 0);
        CHECKF(strstr(why, "only_if_made needs a request_id"), "%s", why);
        printf("sweeps %llu %llu %llu\n", (unsigned long long)a, (unsigned long long)d,
               (unsigned long long)e);
    } else if (strcmp(c, "fake_coordinator") == 0 || strcmp(c, "old_coordinator") == 0) {
        fake_coordinator(control, strcmp(c, "fake_coordinator") == 0);
        zmq_ctx_term(ctx);
        return 0;
    } else if (strcmp(c, "control_unexpected") == 0) {
        s = peer(control, NULL);
        hello(s, "controlhello01", "x", 2);
        expect_reject(s, GB__REJECT_CODE__REJECT_UNEXPECTED, "control endpoint");
    } else if (strcmp(c, "fake_bad_record") == 0) {
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK, "{this is not json");
        expect_ack(s, job, att);
    } else if (strcmp(c, "fake_wrong_kind") == 0) {
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK, "{\"kind\": \"sleep\"}");
        expect_ack(s, job, att);
    } else if (strcmp(c, "fake_resend") == 0) {
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        const char *rec =
            "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"device_model\": \"Test CPU\","
            " \"n_devices\": 1, \"precision\": \"fp32\", \"valid\": true,"
            " \"gflops\": 12.5, \"m\": 8, \"n\": 8, \"k\": 8}";
        for (int i = 0; i < 3; i++) { /* as an agent does when acks are lost */
            send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK, rec);
            expect_ack(s, job, att);
        }
    } else if (strcmp(c, "fake_other_store") == 0) {
        /* a result marked with another store's id: dropped (acknowledged),
         * the job's own then taken */
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        /* still running it while the foreign result is dropped: two empty
         * heartbeats sent before the ack (a slow coordinator) lost the job */
        hb_running.job_id = job;
        hb_running.attempt = att;
        result_store_id = "0123456789abcdef";
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK,
                    "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"device_model\": \"Test CPU\","
                    " \"n_devices\": 1, \"precision\": \"fp32\", \"valid\": true,"
                    " \"gflops\": 99.0, \"m\": 8, \"n\": 8, \"k\": 8}");
        heartbeat(s); /* as when the ack is slow: the job still listed */
        heartbeat(s);
        expect_ack(s, job, att);
        result_store_id = NULL;
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK,
                    "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"device_model\": \"Test CPU\","
                    " \"n_devices\": 1, \"precision\": \"fp32\", \"valid\": true,"
                    " \"gflops\": 12.5, \"m\": 8, \"n\": 8, \"k\": 8}");
        expect_ack(s, job, att);
    } else if (strcmp(c, "fake_refuse") == 0) {
        /* refuse the first assignment as a busy agent does; take the next */
        s = peer(listen, "fakeagent01");
        hello(s, "fakeagent01", "fake", 4);
        Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000);
        gb_wire_free(&w);
        printf("registered\n");
        fflush(stdout);
        Gb__Envelope *as = await(s, GB__ENVELOPE__BODY_ASSIGN, 20000);
        Gb__Progress p = GB__PROGRESS__INIT;
        p.job_id = as->assign->job_id;
        p.attempt = as->assign->attempt;
        p.phase = GB__PHASE__PHASE_REFUSED;
        p.message = "busy: 1 job(s) running";
        gb_wire_free(&as);
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_PROGRESS;
        env.progress = &p;
        CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
        as = await(s, GB__ENVELOPE__BODY_ASSIGN, 20000);
        uint64_t job = as->assign->job_id;
        uint32_t att = as->assign->attempt;
        CHECKF(att == p.attempt + 1, "second assignment is attempt %u", att);
        gb_wire_free(&as);
        p.attempt = att;
        p.phase = GB__PHASE__PHASE_STARTED;
        p.message = "";
        CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK,
                    "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"gflops\": 1}");
        expect_ack(s, job, att);
    } else if (strcmp(c, "fake_vanish") == 0) {
        /* start a job, then forget it: heartbeats list neither it nor a
         * result; the coordinator must give the attempt up and re-place it */
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        att = expect_reassign(s, job, att);
        send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK,
                    "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"gflops\": 2}");
        expect_ack(s, job, att);
    } else if (strcmp(c, "fake_stop_back") == 0 || strcmp(c, "fake_stop_gone") == 0 ||
               strcmp(c, "fake_foreign_spooled") == 0) {
        /* the job's result in the spool, unsent, when the agent stops
         * (SIGTERM): its last heartbeat says so; the job stays its own for
         * the restart grace. back: it starts again at once and sends it (the
         * attempt is kept); gone: it never comes back; foreign_spooled: it
         * comes back listing only another store's result of that job and
         * attempt (its store made anew), which is not this job's on its
         * way: the attempt is lost and the job runs again */
        uint64_t job;
        uint32_t att;
        s = fake_agent(listen, &job, &att);
        Gb__JobRef ref = GB__JOB_REF__INIT;
        ref.job_id = job;
        ref.attempt = att;
        Gb__JobRef *refs[1] = {&ref};
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        hb.stopping = 1;
        hb.spooled = 1;
        hb.n_spooled_jobs = 1;
        hb.spooled_jobs = refs;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        CHECK(gb_zmq_send(s, NULL, 0, &env) == 0);
        struct timespec ts = {0, 200000000L}; /* it goes out; then the agent is gone */
        nanosleep(&ts, NULL);
        zmq_close(s);
        s = NULL;
        if (strcmp(c, "fake_stop_gone") == 0) {
            s = peer(listen, "fakeagent09"); /* only closed at the end */
        } else {
            int foreign = strcmp(c, "fake_foreign_spooled") == 0;
            ts.tv_nsec = 800000000L; /* > the lost window (0.5 s), < the grace */
            nanosleep(&ts, NULL);
            s = peer(listen, "fakeagent01");
            if (foreign) ref.store_id = "0123456789abcdef";
            hb_spooled = ref; /* listed until sent: a slow Welcome let two
                               * heartbeats through before the result */
            hello_spooled(s, "fakeagent01", "fake", 4, &ref);
            Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000);
            gb_wire_free(&w);
            if (foreign) att = expect_reassign(s, job, att);
            hb_spooled.job_id = 0;
            send_result(s, job, att, GB__RESULT_STATUS__RESULT_OK,
                        "{\"kind\": \"gemm\", \"backend\": \"cpu\", \"gflops\": 3}");
            expect_ack(s, job, att);
        }
    } else if (strcmp(c, "flood") == 0) {
        /* junk frames on the agent endpoint, as fast as they go, for 8 s
         * (the coordinator reads 256 a turn and leaves the rest); with FILE
         * TEXT MS: connected first ("connected" on stdout), the flood MS
         * after TEXT shows in FILE (a flooder started then came 10 s late
         * at three ASan tests a core) */
        s = peer(listen, "flooder00001");
        static const char junk[] = "\xff\xfe flood";
        struct timespec t0, t;
        if (argc >= 7) {
            printf("connected\n");
            fflush(stdout);
            int64_t until = gb_mono_ms() + 60000;
            for (int seen = 0; !seen;) {
                char *buf = NULL, why[64];
                size_t n;
                /* not there yet: not seen */
                seen = gb_read_file(argv[4], 1 << 20, &buf, &n, why, sizeof why) == 0 &&
                       strstr(buf, argv[5]) != NULL;
                free(buf);
                CHECKF(seen || gb_mono_ms() < until, "'%s' not in %s after 60 s", argv[5], argv[4]);
                if (!seen) nanosleep(&(struct timespec){0, 10000000L}, NULL);
            }
            long ms = atol(argv[6]);
            nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long sent = 0;
        do {
            for (int i = 0; i < 1000; i++, sent++)
                send_raw(s, junk, sizeof junk - 1, 0);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 8000);
        printf("%ld frames\n", sent);
    } else if (strcmp(c, "fake_unknown_result") == 0) {
        s = peer(listen, "fakeagent02");
        hello(s, "fakeagent02", "fake2", 4);
        Gb__Envelope *w = await(s, GB__ENVELOPE__BODY_WELCOME, 5000);
        gb_wire_free(&w);
        send_result(s, 424242, 1, GB__RESULT_STATUS__RESULT_OK, "{\"kind\": \"gemm\"}");
        expect_ack(s, 424242, 1); /* acknowledged so the agent stops resending */
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    printf("ok\n");
    return 0;
}
