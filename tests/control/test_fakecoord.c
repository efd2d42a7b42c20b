/* test_fakecoord.c - a coordinator's endpoint played by the test, for an
 * agent under test (it_fake_coord.sh starts the real agent against it).
 *
 *   test_fakecoord BIND N     (BIND e.g. tcp://127.0.0.1:*; prints listen=EP)
 *
 * It welcomes the agent, assigns it N sleep jobs that end together, and
 * answers the burst of their results "unknown agent" (what a coordinator
 * restarted within the agent's lost window answers to everything) until
 * the agent has registered again; from then on it acknowledges every
 * result, and ends once all N are acknowledged. It counts the Hellos and
 * Results it got: a burst of N rejects must bring one new registration and
 * the results again once each, not a Hello per reject and every result
 * again per Welcome (N^2). Prints the counts and "ok"; CHECK failures exit
 * 1.
 *
 *   test_fakecoord BIND bad_status
 *
 * A control endpoint whose every status reply is one the client refuses
 * (a sweep name with a C1 control): `gpubench wait` must give up, not ask
 * for ever. */
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

#define MAX_JOBS 16

static void send_to(void *s, const gb_frame_t *f, Gb__Envelope *env) {
    CHECK(gb_zmq_send(s, f->rid, f->rid_len, env) == 0);
}

static void welcome(void *s, const gb_frame_t *f) {
    Gb__Welcome w = GB__WELCOME__INIT;
    w.heartbeat_ms = 100;
    w.lost_after = 100; /* the agent must not find this peer silent */
    w.coordinator_id = "fakecoord";
    w.store_id = "00000000fa4ec0de";
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    send_to(s, f, &env);
}

/* One frame within 50 ms, decoded into *env: 0, or -1 when it is not a
 * valid envelope (why says why; f to be closed all the same), or 1 when
 * none came (f not open). */
static int recv_one(void *s, gb_frame_t *f, Gb__Envelope **env, char *why, size_t whylen) {
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 50) <= 0 || gb_zmq_recv(s, 1, f) != 0) return 1;
    uint64_t seq = 0;
    return gb_wire_decode(zmq_msg_data(&f->payload), zmq_msg_size(&f->payload), 1u << 30, env, &seq,
                          why, whylen) == 0
               ? 0
               : -1;
}

/* bad_status: a control endpoint that answers every status request with
 * a sweep whose name has a C1 control (U+0085), which the client's wire
 * check refuses, for 30 s; prints how many it answered. */
static int bad_status(void *s) {
    int answered = 0;
    for (int64_t until = gb_mono_ms() + 30000; gb_mono_ms() < until;) {
        gb_frame_t f;
        Gb__Envelope *env = NULL;
        char why[512];
        int rc = recv_one(s, &f, &env, why, sizeof why);
        if (rc > 0) continue;
        if (rc == 0 && env->body_case == GB__ENVELOPE__BODY_STATUS) {
            Gb__SweepStatus st = GB__SWEEP_STATUS__INIT, *sp = &st;
            st.sweep_id = 1;
            st.name = "n\xc2\x85x";
            st.state = "done";
            st.created_at = "2026-12-06T00:00:00Z";
            st.total = st.done = 1;
            Gb__StatusReply sr = GB__STATUS_REPLY__INIT;
            sr.n_sweeps = 1;
            sr.sweeps = &sp;
            Gb__Envelope rep = GB__ENVELOPE__INIT;
            rep.seq = env->seq;
            rep.body_case = GB__ENVELOPE__BODY_STATUS_REPLY;
            rep.status_reply = &sr;
            send_to(s, &f, &rep);
            printf("answered %d\n", ++answered);
            fflush(stdout);
        }
        gb_wire_free(&env);
        gb_frame_close(&f);
    }
    return 0;
}

int main(int argc, char **argv) {
    CHECKF(argc == 3, "usage: test_fakecoord LISTEN N|bad_status");
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    CHECKF(zmq_bind(s, argv[1]) == 0, "bind %s", argv[1]);
    char ep[256];
    size_t eplen = sizeof ep;
    CHECK(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &eplen) == 0);
    printf("listen=%s\n", ep); /* the script starts the agent on it */
    fflush(stdout);
    if (strcmp(argv[2], "bad_status") == 0) {
        bad_status(s);
        zmq_close(s);
        zmq_ctx_term(ctx);
        return 0;
    }
    int n = atoi(argv[2]);
    CHECKF(n >= 2 && n <= MAX_JOBS, "N in 2..%d", MAX_JOBS);
    int hellos = 0, results = 0, rejected = 0, late = 0, acked = 0, assigned = 0;
    int done[MAX_JOBS + 1] = {0};
    int64_t until = gb_mono_ms() + 60000;
    while (acked < n && gb_mono_ms() < until) {
        gb_frame_t f;
        Gb__Envelope *env = NULL;
        char why[512];
        int rc = recv_one(s, &f, &env, why, sizeof why);
        if (rc > 0) continue;
        CHECKF(rc == 0, "the agent sent an invalid envelope: %s", why);
        if (env->body_case == GB__ENVELOPE__BODY_HELLO) {
            hellos++;
            welcome(s, &f);
            if (!assigned) { /* N jobs that end together: one burst of results */
                for (int j = 1; j <= n; j++) {
                    Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
                    as.job_id = (uint64_t)j;
                    as.attempt = 1;
                    as.sweep_id = 1;
                    as.kind = "sleep";
                    as.params_json = "{\"kind\": \"sleep\", \"duration_ms\": 500}";
                    as.timeout_s = 60;
                    Gb__Envelope a = GB__ENVELOPE__INIT;
                    a.body_case = GB__ENVELOPE__BODY_ASSIGN;
                    a.assign = &as;
                    send_to(s, &f, &a);
                }
                assigned = 1;
            }
        } else if (env->body_case == GB__ENVELOPE__BODY_RESULT) {
            const Gb__Result *r = env->result;
            CHECKF(r->job_id >= 1 && r->job_id <= (uint64_t)n, "a result of job %llu",
                   (unsigned long long)r->job_id);
            if (!results++) {
                /* the first of the burst: the rest (every job ends within
                 * about 50 ms of the others) are queued by the time it is
                 * answered, as at a restart with results in flight */
                struct timespec ts = {1, 0};
                nanosleep(&ts, NULL);
            }
            if (hellos < 2) { /* "restarted": everything refused until a Hello */
                Gb__Reject rej = GB__REJECT__INIT;
                rej.code = GB__REJECT_CODE__REJECT_UNKNOWN_AGENT;
                rej.reason = "unknown agent (the coordinator restarted?)";
                rej.ref_seq = env->seq;
                Gb__Envelope e = GB__ENVELOPE__INIT;
                e.body_case = GB__ENVELOPE__BODY_REJECT;
                e.reject = &rej;
                send_to(s, &f, &e);
                rejected++;
            } else {
                late++;
                Gb__ResultAck ack = GB__RESULT_ACK__INIT;
                ack.job_id = r->job_id;
                ack.attempt = r->attempt;
                Gb__Envelope e = GB__ENVELOPE__INIT;
                e.body_case = GB__ENVELOPE__BODY_RESULT_ACK;
                e.result_ack = &ack;
                send_to(s, &f, &e);
                if (!done[r->job_id]) acked++;
                done[r->job_id] = 1;
            }
        }
        gb_wire_free(&env);
        gb_frame_close(&f);
    }
    printf("hellos %d, results %d (%d refused, %d after the new registration), acknowledged %d "
           "of %d\n",
           hellos, results, rejected, late, acked, n);
    CHECKF(acked == n, "only %d of %d results acknowledged within 60 s", acked, n);
    /* a burst: every job's result refused (and the agent's own resends of
     * them while it waited for an answer) */
    CHECKF(rejected >= n, "the burst was %d result(s) of %d jobs", rejected, n);
    /* the first registration, and one for the burst */
    CHECKF(hellos == 2, "%d Hellos for one burst of %d rejects", hellos, rejected);
    /* after it, each result once (and a timer's resend at most), not once
     * per Welcome */
    CHECKF(late <= 2 * n, "%d results sent after the new registration for %d jobs", late, n);
    zmq_close(s);
    zmq_ctx_term(ctx);
    printf("ok\n");
    return 0;
}
