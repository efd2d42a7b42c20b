/* test_hpeer.c - a peer that probes a running coordinator's security and
 * limits, driven by it_security.sh and it_limits.sh.
 *
 *   test_hpeer CASE LISTEN CONTROL [ARG...]
 *
 * Keys come from $GB_KEY and $GB_SERVER_KEY when set (as for the gpubench
 * commands). Cases:
 *   plaintext          a plaintext DEALER sends a valid Hello to the agent
 *                      endpoint and a status request to the control one:
 *                      nothing may come back. Then a raw TCP peer sends a
 *                      whole ZMTP 3.0 greeting naming the NULL mechanism
 *                      and waits for the coordinator to close: the
 *                      coordinator has read the mechanism, so its log can
 *                      say why (a ZeroMQ client that sees the CURVE greeting
 *                      first closes before it sends its mechanism, and the
 *                      coordinator then knows only that the peer went away)
 *   rate N             N status requests back to back on one connection:
 *                      some are answered, the rest refused as `rate` with a
 *                      retry hint; after a pause one is answered again
 *   revoked READY GO   a status request is answered; then READY is created
 *                      and, once GO exists (the script removed our key and
 *                      sent SIGHUP), the next request on the same
 *                      connection is refused as `denied`
 *   pinned AGENT_ID    with our (listed) key, a Hello and a Heartbeat as
 *                      agent AGENT_ID, registered with another key: both
 *                      refused as `denied`
 *   hellos AGENT_ID N  N identical Hellos as a new agent AGENT_ID, each
 *                      welcomed
 *   take AGENT_ID      a Hello as agent AGENT_ID must be welcomed (its pinned
 *                      key was revoked)
 *   claim AGENT_ID MS  a Hello as agent AGENT_ID (refused as `denied`), then
 *                      the connection, and with it the agent's routing id,
 *                      held for MS ms, a Heartbeat every 100 ms */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_curve.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void *ctx;
static gb_curve_client_t keys;
static int have_keys;

static void *peer(const char *ep, const char *rid, int plain) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    CHECK(s);
    int zero = 0;
    char err[256];
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rid) zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
    if (have_keys && !plain)
        CHECKF(gb_curve_client_apply(s, &keys, err, sizeof err) == 0, "%s", err);
    CHECKF(zmq_connect(s, ep) == 0, "connect %s", ep);
    return s;
}

static void send_env(void *s, Gb__Envelope *env) {
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(env, &len);
    CHECK(buf);
    CHECKF(zmq_send(s, buf, len, 0) == (int)len, "send: %s", zmq_strerror(errno));
    free(buf);
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
    CHECKF(rc == 0, "invalid envelope from the coordinator: %s", why);
    return env;
}

static void send_status(void *s, uint64_t seq) {
    Gb__StatusRequest rq = GB__STATUS_REQUEST__INIT;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = seq;
    env.body_case = GB__ENVELOPE__BODY_STATUS;
    env.status = &rq;
    send_env(s, &env);
}

static void send_hello(void *s, const char *id) {
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = (char *)id;
    inv.cpu_model = "probe";
    inv.cpu_cores = 1;
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = (char *)id;
    h.name = (char *)id;
    h.inventory = &inv;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = 1;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    send_env(s, &env);
}

/* skip_hb: a peer holding a registered agent's routing id (ZMQ_ROUTER_HANDOVER)
 * also gets the coordinator's periodic heartbeats to that id; those are
 * not the reply */
static void expect_reject_skip(void *s, int code, const char *word, int skip_hb) {
    Gb__Envelope *env = recv_env(s, 5000);
    while (skip_hb && env && env->body_case == GB__ENVELOPE__BODY_HEARTBEAT) {
        gb_wire_free(&env);
        env = recv_env(s, 5000);
    }
    CHECKF(env, "no reply within 5 s (expected a %s reject)", gb_wire_reject_name(code));
    CHECKF(env->body_case == GB__ENVELOPE__BODY_REJECT, "got %s, expected a reject",
           gb_wire_body_name(env->body_case));
    printf("reject %s: %s\n", gb_wire_reject_name(env->reject->code), env->reject->reason);
    CHECKF((int)env->reject->code == code, "reject %s, expected %s",
           gb_wire_reject_name(env->reject->code), gb_wire_reject_name(code));
    CHECKF(strstr(env->reject->reason, word), "reason '%s' lacks '%s'", env->reject->reason, word);
    gb_wire_free(&env);
}

static void expect_reject(void *s, int code, const char *word) {
    expect_reject_skip(s, code, word, 0);
}

/* A ZMTP 3.0 greeting for the NULL mechanism, whole, on a plain TCP
 * connection to ENDPOINT (tcp://HOST:PORT); then read until the peer closes
 * (it must, within 5 s, having answered no more than its own greeting). */
static void raw_null_greeting(const char *endpoint) {
    char host[256];
    CHECKF(strncmp(endpoint, "tcp://", 6) == 0, "not a tcp endpoint: %s", endpoint);
    gb_copy(host, sizeof host, endpoint + 6);
    char *colon = strrchr(host, ':');
    CHECKF(colon, "no port in %s", endpoint);
    *colon = '\0';
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    CHECKF(getaddrinfo(host, colon + 1, &hints, &ai) == 0 && ai, "resolve %s", endpoint);
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    CHECK(fd >= 0);
    CHECKF(connect(fd, ai->ai_addr, ai->ai_addrlen) == 0, "connect %s", endpoint);
    freeaddrinfo(ai);
    unsigned char g[64] = {0};
    g[0] = 0xff; /* signature: 0xff, 8 bytes of padding, 0x7f */
    g[9] = 0x7f;
    g[10] = 3; /* version 3.0 */
    g[11] = 0;
    memcpy(g + 12, "NULL", 4); /* mechanism, 20 bytes, zero padded */
    g[32] = 0;                 /* as-server: no; the rest is filler */
    CHECK(send(fd, g, sizeof g, MSG_NOSIGNAL) == (ssize_t)sizeof g);
    unsigned char buf[256];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        CHECKF(poll(&p, 1, 5000) == 1, "the coordinator kept a NULL-mechanism peer open 5 s");
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break; /* closed (or reset) */
        got += (size_t)n;
        CHECKF(got <= 64, "the coordinator sent %zu bytes to a NULL-mechanism peer", got);
    }
    close(fd);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    CHECK(argc >= 4);
    const char *c = argv[1], *listen = argv[2], *control = argv[3];
    ctx = zmq_ctx_new();
    const char *k = getenv("GB_KEY"), *sk = getenv("GB_SERVER_KEY");
    char err[600];
    if (k && *k) {
        CHECKF(gb_curve_client_load(&keys, k, sk, err, sizeof err) == 0, "%s", err);
        have_keys = 1;
    }
    if (strcmp(c, "plaintext") == 0) {
        void *a = peer(listen, "intruder", 1);
        send_hello(a, "intruder");
        void *q = peer(control, NULL, 1);
        send_status(q, 7);
        Gb__Envelope *r1 = recv_env(a, 2000), *r2 = recv_env(q, 500);
        CHECKF(!r1, "the agent endpoint answered a plaintext hello (%s)",
               gb_wire_body_name(r1->body_case));
        CHECKF(!r2, "the control endpoint answered a plaintext request (%s)",
               gb_wire_body_name(r2->body_case));
        printf("plaintext peer: no answer on either endpoint\n");
        zmq_close(a);
        zmq_close(q);
        raw_null_greeting(listen);
        raw_null_greeting(control);
        printf("raw NULL-mechanism greeting: closed on both endpoints\n");
    } else if (strcmp(c, "rate") == 0) {
        CHECK(argc == 5);
        int n = atoi(argv[4]), answered = 0, limited = 0;
        void *q = peer(control, NULL, 0);
        for (int i = 1; i <= n; i++)
            send_status(q, (uint64_t)i);
        for (int i = 0; i < n; i++) {
            Gb__Envelope *env = recv_env(q, 5000);
            CHECKF(env, "only %d of %d requests were answered", i, n);
            if (env->body_case == GB__ENVELOPE__BODY_STATUS_REPLY) {
                answered++;
            } else {
                CHECKF(env->body_case == GB__ENVELOPE__BODY_REJECT &&
                           env->reject->code == GB__REJECT_CODE__REJECT_RATE,
                       "unexpected %s", gb_wire_body_name(env->body_case));
                CHECKF(env->seq == env->reject->ref_seq && env->seq >= 1,
                       "the reject answers seq %llu", (unsigned long long)env->reject->ref_seq);
                CHECKF(strstr(env->reject->reason, "rate limit") &&
                           strstr(env->reject->reason, "retry in"),
                       "%s", env->reject->reason);
                if (!limited) printf("reject rate: %s\n", env->reject->reason);
                limited++;
            }
            gb_wire_free(&env);
        }
        printf("%d answered, %d refused\n", answered, limited);
        CHECKF(answered >= 1 && limited >= 1, "%d answered, %d refused", answered, limited);
        sleep_ms(1500); /* the bucket refills */
        send_status(q, 1000);
        Gb__Envelope *env = recv_env(q, 5000);
        CHECKF(env && env->body_case == GB__ENVELOPE__BODY_STATUS_REPLY,
               "not answered again after a pause");
        gb_wire_free(&env);
        zmq_close(q);
    } else if (strcmp(c, "revoked") == 0) {
        CHECK(argc == 6 && have_keys);
        void *q = peer(control, NULL, 0);
        send_status(q, 1);
        Gb__Envelope *env = recv_env(q, 5000);
        CHECKF(env && env->body_case == GB__ENVELOPE__BODY_STATUS_REPLY,
               "a listed key was not answered");
        gb_wire_free(&env);
        char e2[64];
        CHECK(gb_write_file_atomic(argv[4], "1\n", 2, e2, sizeof e2) == 0);
        for (int i = 0; i < 200 && access(argv[5], F_OK) != 0; i++)
            sleep_ms(50);
        CHECKF(access(argv[5], F_OK) == 0, "the script did not revoke the key");
        send_status(q, 2);
        expect_reject(q, GB__REJECT_CODE__REJECT_DENIED, "no longer authorized");
        zmq_close(q);
    } else if (strcmp(c, "pinned") == 0) {
        CHECK(argc == 5 && have_keys);
        void *a = peer(listen, argv[4], 0);
        send_hello(a, argv[4]);
        expect_reject_skip(a, GB__REJECT_CODE__REJECT_DENIED, "registered with another key", 1);
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = 2;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        send_env(a, &env);
        expect_reject_skip(a, GB__REJECT_CODE__REJECT_DENIED, "another key", 1);
        zmq_close(a);
    } else if (strcmp(c, "hellos") == 0) {
        CHECK(argc == 6 && have_keys);
        void *a = peer(listen, argv[4], 0);
        int n = atoi(argv[5]), welcomed = 0;
        for (int i = 0; i < n; i++)
            send_hello(a, argv[4]);
        for (Gb__Envelope *env; welcomed < n && (env = recv_env(a, 5000));) {
            welcomed += env->body_case == GB__ENVELOPE__BODY_WELCOME;
            gb_wire_free(&env);
        }
        CHECKF(welcomed == n, "%d of %d Hellos welcomed", welcomed, n);
        zmq_close(a);
    } else if (strcmp(c, "take") == 0) {
        CHECK(argc == 5 && have_keys);
        void *a = peer(listen, argv[4], 0);
        send_hello(a, argv[4]);
        Gb__Envelope *env = recv_env(a, 5000);
        while (env && env->body_case == GB__ENVELOPE__BODY_HEARTBEAT) {
            gb_wire_free(&env);
            env = recv_env(a, 5000);
        }
        CHECKF(env && env->body_case == GB__ENVELOPE__BODY_WELCOME,
               "got %s, expected a welcome%s%s",
               env ? gb_wire_body_name(env->body_case) : "nothing",
               env && env->body_case == GB__ENVELOPE__BODY_REJECT ? ": " : "",
               env && env->body_case == GB__ENVELOPE__BODY_REJECT ? env->reject->reason : "");
        gb_wire_free(&env);
        zmq_close(a);
    } else if (strcmp(c, "claim") == 0) {
        CHECK(argc == 6 && have_keys);
        void *a = peer(listen, argv[4], 0);
        send_hello(a, argv[4]);
        expect_reject_skip(a, GB__REJECT_CODE__REJECT_DENIED, "registered with another key", 1);
        int64_t until = gb_mono_ms() + atoi(argv[5]);
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        for (uint64_t seq = 2; gb_mono_ms() < until; seq++) {
            env.seq = seq;
            send_env(a, &env);
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
        zmq_close(a);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    zmq_ctx_term(ctx);
    return 0;
}
