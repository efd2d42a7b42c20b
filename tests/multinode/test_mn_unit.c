/* test_mn_unit.c - the pure parts of multi-node jobs, one case per
 * argument: the gang state machine (coordinator/gang.c), the agent/worker
 * rendezvous channel (common/gb_rdv.c), the wire's rank fields and bodies
 * (common/gb_wire.c), the spec keys (common/gb_spec.c), the worker's dist
 * parsing, callbacks and sleep ids (worker/dist.c), and the record checks
 * of issue 5's keys (coordinator/record.c). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "dist.h"
#include "gang.h"
#include "gb_rdv.h"
#include "gb_spec.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "ranks.h"
#include "record.h"
#include "store.h"
#include "worker.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- gang ---------------------------------------------------------------- */

static const unsigned char ID[4] = {1, 2, 3, 4};

/* A 3-rank attempt taken to "every rank started". */
static gb_gang_t *started3(void) {
    gb_gang_t *g = gb_gang_new(3);
    CHECK(g);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_ready(g, 2) == 0 && gb_gang_on_ready(g, 0) == 0);
    CHECK(gb_gang_on_ready(g, 1) == GB_GANG_START);
    return g;
}

static void case_gang_happy(void) {
    CHECK(gb_gang_new(1) == NULL && gb_gang_new(1025) == NULL);
    gb_gang_t *g = gb_gang_new(3);
    CHECK(g && gb_gang_size(g) == 3);
    CHECK(gb_gang_state(g, 0) == GB_RANK_ASSIGNED && gb_gang_state(g, 1) == GB_RANK_WAITING);
    CHECK(gb_gang_first_unready(g) == 0);
    /* nobody is ready before the id; a non-zero rank's id, an empty one or
     * one too long is ignored */
    CHECK(gb_gang_on_ready(g, 0) == 0 && gb_gang_on_ready(g, 1) == 0);
    CHECK(gb_gang_on_id(g, 1, ID, sizeof ID) == 0);
    CHECK(gb_gang_on_id(g, 0, ID, 0) == 0);
    unsigned char big[GB_GANG_ID_MAX + 1] = {0};
    CHECK(gb_gang_on_id(g, 0, big, sizeof big) == 0);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == 0); /* once */
    size_t len;
    const unsigned char *id = gb_gang_id(g, &len);
    CHECK(len == 4 && memcmp(id, ID, 4) == 0);
    CHECK(gb_gang_state(g, 1) == GB_RANK_ASSIGNED && gb_gang_state(g, 2) == GB_RANK_ASSIGNED);
    CHECK(gb_gang_on_ready(g, 1) == 0 && gb_gang_on_ready(g, 1) == 0); /* a repeat */
    CHECK(gb_gang_first_unready(g) == 0);
    CHECK(gb_gang_on_ready(g, 0) == 0 && gb_gang_first_unready(g) == 2 && !gb_gang_started(g));
    CHECK(gb_gang_on_ready(g, 2) == GB_GANG_START);
    CHECK(gb_gang_started(g) && gb_gang_first_unready(g) == -1);
    for (int r = 0; r < 3; r++)
        CHECK(gb_gang_state(g, r) == GB_RANK_STARTED);
    CHECK(gb_gang_on_result(g, 1, GB_GANG_OK, NULL) == 0);
    CHECK(gb_gang_on_result(g, 1, GB_GANG_OK, NULL) == 0); /* a resend */
    CHECK(gb_gang_on_result(g, 0, GB_GANG_OK, NULL) == 0 && !gb_gang_all_ended(g));
    CHECK(gb_gang_on_result(g, 2, GB_GANG_OK, NULL) == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_DONE && gb_gang_cause_rank(g) == -1);
    CHECK(strcmp(gb_rank_state_name(gb_gang_state(g, 2)), "done") == 0);
    gb_gang_destroy(&g);
    CHECK(g == NULL);
    gb_gang_destroy(&g); /* NULL is fine */
}

static void case_gang_rank_fails(void) {
    gb_gang_t *g = started3();
    int act = gb_gang_on_result(g, 1, GB_GANG_ERR_CRASHED, "rank 1 on b: killed");
    CHECK(act == GB_GANG_CANCEL);
    CHECK(gb_gang_outcome(g) == GB_GANG_FAILED && gb_gang_cause_rank(g) == 1);
    CHECK(strcmp(gb_gang_reason(g), "rank 1 on b: killed") == 0);
    CHECK(gb_gang_state(g, 1) == GB_RANK_CRASHED);
    CHECK(gb_gang_take_cancel(g, 0) && gb_gang_take_cancel(g, 2));
    CHECK(!gb_gang_take_cancel(g, 0) && !gb_gang_take_cancel(g, 1)); /* once; not the dead */
    /* the others end as they were stopped; the cause stays the first */
    CHECK(gb_gang_on_result(g, 0, GB_GANG_ERR_CANCELLED, "cancelled by request") == 0);
    CHECK(gb_gang_on_result(g, 2, GB_GANG_ERR_FAILED, "another error") == GB_GANG_END);
    CHECK(gb_gang_cause_rank(g) == 1 && strstr(gb_gang_reason(g), "killed"));
    CHECK(gb_gang_state(g, 0) == GB_RANK_CANCELLED && gb_gang_state(g, 2) == GB_RANK_FAILED);
    gb_gang_destroy(&g);
    /* a timeout is a failure too */
    g = started3();
    CHECK(gb_gang_on_result(g, 2, GB_GANG_ERR_TIMEOUT, "timed out") & GB_GANG_CANCEL);
    CHECK(gb_gang_state(g, 2) == GB_RANK_TIMEOUT && gb_gang_outcome(g) == GB_GANG_FAILED);
    gb_gang_destroy(&g);
}

static void case_gang_rank0_dies(void) {
    /* before the id: the waiting ranks are skipped, nothing to stop */
    gb_gang_t *g = gb_gang_new(3);
    CHECK(gb_gang_on_result(g, 1, GB_GANG_ERR_FAILED, "x") == 0); /* not assigned: ignored */
    CHECK(gb_gang_on_result(g, 0, GB_GANG_ERR_CRASHED, "rank 0 died") == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_FAILED && gb_gang_cause_rank(g) == 0);
    CHECK(gb_gang_state(g, 1) == GB_RANK_SKIPPED && gb_gang_state(g, 2) == GB_RANK_SKIPPED);
    CHECK(!gb_gang_take_cancel(g, 1));
    /* the id of a dead attempt assigns nobody */
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == 0);
    gb_gang_destroy(&g);
}

static void case_gang_lost(void) {
    gb_gang_t *g = gb_gang_new(2);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_ready(g, 0) == 0);
    /* rank 1's agent is lost before it was ready */
    CHECK(gb_gang_on_lost(g, 1, "rank 1: agent b lost", 1) == GB_GANG_CANCEL);
    CHECK(gb_gang_outcome(g) == GB_GANG_LOST && gb_gang_counts(g) == 1);
    CHECK(gb_gang_on_lost(g, 1, "again", 1) == 0);
    CHECK(gb_gang_on_ready(g, 1) == 0); /* too late */
    CHECK(gb_gang_take_cancel(g, 0));
    CHECK(gb_gang_on_result(g, 0, GB_GANG_ERR_CANCELLED, "cancelled by request") == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_LOST &&
          strcmp(gb_gang_reason(g), "rank 1: agent b lost") == 0);
    gb_gang_destroy(&g);
    /* a refusal does not count */
    g = gb_gang_new(2);
    CHECK(gb_gang_on_lost(g, 0, "refused", 0) == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_LOST && gb_gang_counts(g) == 0);
    CHECK(gb_gang_state(g, 1) == GB_RANK_SKIPPED);
    gb_gang_destroy(&g);
}

static void case_gang_deadline_cancel(void) {
    gb_gang_t *g = gb_gang_new(2);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_ready(g, 0) == 0 && gb_gang_first_unready(g) == 1);
    CHECK(gb_gang_end(g, GB_GANG_LOST, 1, "rank 1 was not ready within 2 s", 1) == GB_GANG_CANCEL);
    CHECK(gb_gang_cause_rank(g) == 1 && gb_gang_outcome(g) == GB_GANG_LOST);
    /* a cancel after the cause is remembered, the cause kept */
    CHECK(!gb_gang_cancel_requested(g));
    gb_gang_end(g, GB_GANG_CANCELLED, -1, "cancelled by request", 1);
    CHECK(gb_gang_cancel_requested(g) && gb_gang_outcome(g) == GB_GANG_LOST);
    CHECK(gb_gang_take_cancel(g, 0) && gb_gang_take_cancel(g, 1));
    CHECK(gb_gang_end(g, GB_GANG_CANCELLED, -1, "again", 1) == 0); /* cancels sent already */
    CHECK(gb_gang_on_result(g, 1, GB_GANG_ERR_CANCELLED, "") == 0);
    CHECK(gb_gang_on_result(g, 0, GB_GANG_ERR_CANCELLED, "") == GB_GANG_END);
    gb_gang_destroy(&g);
    /* a cancel first: every started rank is stopped */
    g = started3();
    CHECK(gb_gang_end(g, GB_GANG_CANCELLED, -1, "cancelled by request", 1) == GB_GANG_CANCEL);
    CHECK(gb_gang_outcome(g) == GB_GANG_CANCELLED && gb_gang_cause_rank(g) == -1);
    CHECK(gb_gang_end(g, GB_GANG_RUNNING, -1, NULL, 0) == 0 &&
          gb_gang_end(g, GB_GANG_DONE, 0, NULL, 0) == 0);
    /* one rank stopped in time: the attempt stays cancelled */
    CHECK(gb_gang_take_cancel(g, 0) && gb_gang_take_cancel(g, 1) && gb_gang_take_cancel(g, 2));
    CHECK(gb_gang_on_result(g, 0, GB_GANG_OK, NULL) == 0);
    CHECK(gb_gang_on_result(g, 1, GB_GANG_ERR_CANCELLED, "cancelled by request") == 0);
    CHECK(gb_gang_on_result(g, 2, GB_GANG_OK, NULL) == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_CANCELLED);
    gb_gang_destroy(&g);
    /* a cancel that came too late for every rank (rank 1 had already
     * finished, the others finished before their stop arrived): the whole
     * measurement stands, as a one-node job's that finished first */
    g = started3();
    CHECK(gb_gang_on_result(g, 1, GB_GANG_OK, NULL) == 0);
    CHECK(gb_gang_end(g, GB_GANG_CANCELLED, -1, "cancelled by request", 1) == GB_GANG_CANCEL);
    CHECK(gb_gang_take_cancel(g, 0) && !gb_gang_take_cancel(g, 1) && gb_gang_take_cancel(g, 2));
    CHECK(gb_gang_on_result(g, 0, GB_GANG_OK, NULL) == 0);
    CHECK(gb_gang_outcome(g) == GB_GANG_CANCELLED); /* rank 2 may still be stopped */
    CHECK(gb_gang_on_result(g, 2, GB_GANG_OK, NULL) == GB_GANG_END);
    CHECK(gb_gang_outcome(g) == GB_GANG_DONE && gb_gang_cancel_requested(g));
    gb_gang_destroy(&g);
}

static void case_gang_early_ok(void) {
    /* a worker that ends "ok" without the barrier did not run with the
     * others: a failure */
    gb_gang_t *g = gb_gang_new(2);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_result(g, 0, GB_GANG_OK, NULL) == GB_GANG_CANCEL);
    CHECK(gb_gang_outcome(g) == GB_GANG_FAILED && gb_gang_state(g, 0) == GB_RANK_FAILED);
    CHECK(strstr(gb_gang_reason(g), "before the start barrier"));
    gb_gang_destroy(&g);
    /* the caller's words (the rank and its node) lead the reason */
    g = gb_gang_new(2);
    CHECK(gb_gang_on_id(g, 0, ID, sizeof ID) == GB_GANG_ASSIGN);
    CHECK(gb_gang_on_result(g, 1, GB_GANG_OK, "rank 1 on b") == GB_GANG_CANCEL);
    CHECK(gb_gang_cause_rank(g) == 1);
    CHECKF(strncmp(gb_gang_reason(g), "rank 1 on b: finished before the start barrier", 46) == 0,
           "reason: %s", gb_gang_reason(g));
    gb_gang_destroy(&g);
    /* a stop nobody asked for is a failure */
    g = started3();
    CHECK(gb_gang_on_result(g, 2, GB_GANG_ERR_CANCELLED, "") & GB_GANG_CANCEL);
    CHECK(gb_gang_outcome(g) == GB_GANG_FAILED &&
          strstr(gb_gang_reason(g), "cancelled on its node"));
    gb_gang_destroy(&g);
}

/* ---- rendezvous channel --------------------------------------------------- */

static void case_rdv_lines(void) {
    gb_rdv_msg_t m = {.kind = GB_RDV_ID, .id_len = 3, .id = {0x00, 0xab, 0xff}}, back;
    char line[GB_RDV_LINE_MAX + 1], err[256];
    CHECK(gb_rdv_format(&m, line, sizeof line) == 0 && strcmp(line, "id 00abff\n") == 0);
    CHECK(gb_rdv_parse(line, strlen(line) - 1, &back, err, sizeof err) == 0);
    CHECK(back.kind == GB_RDV_ID && back.id_len == 3 && memcmp(back.id, m.id, 3) == 0);
    CHECK(gb_rdv_parse("id 00ABFF", 9, &back, err, sizeof err) == 0 && back.id[1] == 0xab);
    m.kind = GB_RDV_ID;
    m.id_len = GB_RDV_ID_MAX;
    memset(m.id, 0x5a, sizeof m.id);
    CHECK(gb_rdv_format(&m, line, sizeof line) == 0 && strlen(line) == GB_RDV_LINE_MAX);
    CHECK(gb_rdv_parse(line, strlen(line) - 1, &back, err, sizeof err) == 0 && back.id_len == 128);
    m.id_len = 0;
    CHECK(gb_rdv_format(&m, line, sizeof line) != 0);
    m.id_len = GB_RDV_ID_MAX + 1;
    CHECK(gb_rdv_format(&m, line, sizeof line) != 0);
    m = (gb_rdv_msg_t){.kind = GB_RDV_READY};
    CHECK(gb_rdv_format(&m, line, sizeof line) == 0 && strcmp(line, "ready\n") == 0);
    m = (gb_rdv_msg_t){.kind = GB_RDV_START, .start_ms = 1700000000123};
    CHECK(gb_rdv_format(&m, line, sizeof line) == 0 && strcmp(line, "start 1700000000123\n") == 0);
    CHECK(gb_rdv_parse(line, strlen(line) - 1, &back, err, sizeof err) == 0);
    CHECK(back.kind == GB_RDV_START && back.start_ms == 1700000000123);
    m.start_ms = 0;
    CHECK(gb_rdv_format(&m, line, sizeof line) != 0);
    CHECK(gb_rdv_format(&(gb_rdv_msg_t){.kind = 9}, line, sizeof line) != 0);
    CHECK(gb_rdv_format(&(gb_rdv_msg_t){.kind = GB_RDV_READY}, line, 3) != 0); /* too short */
    static const struct {
        const char *line, *word;
    } bad[] = {{"", "unknown line"},
               {"readyy", "unknown line"},
               {"id ", "unknown line"},
               {"id 0", "hex"},
               {"id zz", "hex"},
               {"start 0", "positive"},
               {"start -5", "positive"},
               {"start 12x", "positive"},
               {"start 99999999999999999999", "positive"},
               {"stop 5", "unknown line"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(gb_rdv_parse(bad[i].line, strlen(bad[i].line), &back, err, sizeof err) != 0, "%s",
               bad[i].line);
        CHECKF(strstr(err, bad[i].word), "%s: %s", bad[i].line, err);
    }
    /* an id of 129 bytes */
    char longer[3 + 2 * 129 + 1] = "id ";
    memset(longer + 3, 'a', 2 * 129);
    longer[3 + 2 * 129] = '\0';
    CHECK(gb_rdv_parse(longer, strlen(longer), &back, err, sizeof err) != 0);
    /* hex helpers */
    char hex[8];
    size_t n;
    unsigned char out[2];
    CHECK(gb_hex_encode((const unsigned char *)"\x01\x02\x03\x04", 4, hex, sizeof hex) != 0);
    CHECK(gb_hex_decode("0102", 4, out, 1, &n) != 0); /* too many bytes */
    CHECK(gb_hex_decode("010", 3, out, 2, &n) != 0);
}

/* The agent's rules for what a rank's worker may say. */
static void case_rdv_worker(void) {
    gb_rdv_msg_t id = {.kind = GB_RDV_ID, .id_len = 1}, ready = {.kind = GB_RDV_READY},
                 start = {.kind = GB_RDV_START, .start_ms = 1};
    gb_rdv_rank_t r0 = {.rank = 0};
    CHECK(gb_rdv_from_worker(&r0, &ready) == GB_RDV_VIOLATION); /* ready before its id */
    r0 = (gb_rdv_rank_t){.rank = 0};
    CHECK(gb_rdv_from_worker(&r0, &id) == GB_RDV_SEND_ID);
    CHECK(gb_rdv_from_worker(&r0, &id) == GB_RDV_VIOLATION); /* a second id */
    r0 = (gb_rdv_rank_t){.rank = 0};
    CHECK(gb_rdv_from_worker(&r0, &id) == GB_RDV_SEND_ID);
    CHECK(gb_rdv_from_worker(&r0, &ready) == GB_RDV_SEND_READY);
    CHECK(gb_rdv_from_worker(&r0, &ready) == GB_RDV_VIOLATION); /* twice */
    gb_rdv_rank_t r2 = {.rank = 2};
    CHECK(gb_rdv_from_worker(&r2, &id) == GB_RDV_VIOLATION); /* only rank 0 makes the id */
    r2 = (gb_rdv_rank_t){.rank = 2};
    CHECK(gb_rdv_from_worker(&r2, &start) == GB_RDV_VIOLATION); /* the agent sends the start */
    CHECK(gb_rdv_from_worker(&r2, &ready) == GB_RDV_SEND_READY);
}

static void case_rdv_reader(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    gb_rdv_reader_t r = {.len = 0};
    char line[GB_RDV_LINE_MAX + 1];
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 0); /* nothing yet */
    CHECK(write(sv[1], "rea", 3) == 3);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 0); /* a part */
    CHECK(write(sv[1], "dy\nid 0a\nsta", 12) == 12);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 1 && strcmp(line, "ready") == 0);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 1 && strcmp(line, "id 0a") == 0);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 0);
    close(sv[1]);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == -1); /* end of file inside a line */
    close(sv[0]);
    /* a line longer than any the protocol has */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    char junk[GB_RDV_LINE_MAX + 10];
    memset(junk, 'x', sizeof junk);
    CHECK(write(sv[1], junk, sizeof junk) == (ssize_t)sizeof junk);
    r.len = 0;
    CHECK(gb_rdv_read_line(&r, sv[0], line) == -1);
    close(sv[0]);
    close(sv[1]);
}

/* ---- wire ----------------------------------------------------------------- */

static int validate(Gb__Envelope *env, char *why, size_t whylen) {
    env->version = GB_PROTOCOL_VERSION;
    return gb_wire_validate(env, why, whylen);
}

static void case_wire(void) {
    char why[512];
    uint8_t id[GB_WIRE_UNIQUE_ID_MAX + 1] = {0};
    Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
    as.job_id = 1;
    as.attempt = 1;
    as.kind = "sleep";
    as.params_json = "{}";
    as.timeout_s = 10;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_ASSIGN;
    env.assign = &as;
    CHECK(validate(&env, why, sizeof why) == 0); /* one node: all zero */
    as.rank = 1;
    CHECK(validate(&env, why, sizeof why) == GB__REJECT_CODE__REJECT_RANGE);
    CHECK(strstr(why, "rank fields on a one-node job"));
    as.n_nodes = 2;
    as.world_size = 4;
    as.unique_id.data = id;
    as.unique_id.len = 44;
    CHECK(validate(&env, why, sizeof why) == 0);
    as.rank = 2;
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "below n_nodes"));
    as.rank = 1;
    as.world_size = 3; /* not a multiple of the node count */
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "world_size"));
    as.world_size = 1;
    CHECK(validate(&env, why, sizeof why) != 0);
    as.world_size = 2;
    as.unique_id.len = 0; /* rank 1 without the id */
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "unique_id"));
    as.unique_id.len = GB_WIRE_UNIQUE_ID_MAX + 1;
    CHECK(validate(&env, why, sizeof why) != 0);
    as.rank = 0;
    as.unique_id.len = 4; /* rank 0 makes it, it is given none */
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "rank 0 carries no"));
    as.unique_id.len = 0;
    CHECK(validate(&env, why, sizeof why) == 0);
    as.n_nodes = GB_WIRE_NODES_MAX + 1;
    as.world_size = as.n_nodes;
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "n_nodes"));

    Gb__RankUpdate u = GB__RANK_UPDATE__INIT;
    env = (Gb__Envelope)GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RANK_UPDATE;
    env.rank_update = &u;
    u.job_id = 5;
    u.attempt = 2;
    u.phase = GB__RANK_PHASE__RANK_READY;
    CHECK(validate(&env, why, sizeof why) == 0);
    CHECK(strcmp(gb_wire_body_name(env.body_case), "rank_update") == 0);
    u.unique_id.data = id;
    u.unique_id.len = 3;
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "carries no id"));
    u.phase = GB__RANK_PHASE__RANK_ID;
    CHECK(validate(&env, why, sizeof why) == 0);
    u.unique_id.len = 0;
    CHECK(validate(&env, why, sizeof why) != 0);
    u.unique_id.len = GB_WIRE_UNIQUE_ID_MAX + 1;
    CHECK(validate(&env, why, sizeof why) != 0);
    u.unique_id.len = 3;
    u.phase = 7;
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "phase"));
    u.phase = GB__RANK_PHASE__RANK_ID;
    u.job_id = 0;
    CHECK(validate(&env, why, sizeof why) != 0);

    Gb__RankStart st = GB__RANK_START__INIT;
    env = (Gb__Envelope)GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_RANK_START;
    env.rank_start = &st;
    st.job_id = 5;
    st.attempt = 1;
    CHECK(validate(&env, why, sizeof why) != 0 && strstr(why, "start_at_ms"));
    st.start_at_ms = 1700000000000;
    CHECK(validate(&env, why, sizeof why) == 0);
    CHECK(strcmp(gb_wire_body_name(env.body_case), "rank_start") == 0);
    st.attempt = 0;
    CHECK(validate(&env, why, sizeof why) != 0);

    /* the rendezvous an agent speaks: any version up to a sane bound */
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = "h";
    inv.cpu_cores = 2;
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = "a1";
    h.name = "n1";
    h.inventory = &inv;
    Gb__Envelope henv = GB__ENVELOPE__INIT;
    henv.body_case = GB__ENVELOPE__BODY_HELLO;
    henv.hello = &h;
    h.rendezvous = 1;
    CHECK(validate(&henv, why, sizeof why) == 0);
    h.rendezvous = 1001;
    CHECK(validate(&henv, why, sizeof why) != 0 && strstr(why, "hello.rendezvous"));

    /* packed and decoded again, the bytes of the id survive */
    st.attempt = 1;
    size_t len;
    uint8_t *buf = gb_wire_pack(&env, &len);
    CHECK(buf);
    Gb__Envelope *back = NULL;
    uint64_t seq;
    CHECK(gb_wire_decode(buf, len, GB_WIRE_MAX_FRAME, &back, &seq, why, sizeof why) == 0);
    CHECK(back->rank_start->start_at_ms == 1700000000000);
    gb_wire_free(&back);
    free(buf);
}

/* ---- spec ----------------------------------------------------------------- */

static void case_spec(void) {
    gb_sweep_def_t d;
    char err[512];
    const char *spec = "{\"kind\": [\"sleep\", \"gemm\"], \"n_nodes\": [1, 2, 4], \"gpus\": 2,"
                       " \"rendezvous_s\": 30}";
    CHECKF(gb_spec_parse(spec, strlen(spec), 100, &d, err, sizeof err) == 0, "%s", err);
    CHECK(d.n_jobs == 4); /* 3 sleep jobs, one gemm (n_nodes does not apply to it) */
    CHECK(d.jobs[0].n_nodes == 1 && d.jobs[1].n_nodes == 2 && d.jobs[2].n_nodes == 4);
    CHECK(d.jobs[3].n_nodes == 1 && strcmp(d.jobs[3].kind, "gemm") == 0);
    CHECK(d.jobs[1].rendezvous_s == 30 && d.jobs[1].fail_rank == -1);
    CHECK(strcmp(d.jobs[1].fail_at, "end") == 0);
    /* one-node jobs keep the parameters they had; multi-node ones say so */
    char *one = gb_jobdef_to_json(&d.jobs[0]), *two = gb_jobdef_to_json(&d.jobs[1]);
    CHECK(one && two);
    CHECKF(!strstr(one, "n_nodes") && !strstr(one, "rendezvous") && !strstr(one, "fail_"), "%s",
           one);
    CHECKF(strstr(two, "\"n_nodes\":2") && strstr(two, "\"rendezvous_s\":30"), "%s", two);
    gb_jobdef_t back;
    CHECKF(gb_jobdef_from_json(two, strlen(two), &back, err, sizeof err) == 0, "%s", err);
    char *again = gb_jobdef_to_json(&back);
    CHECK(again && strcmp(again, two) == 0);
    free(one);
    free(two);
    free(again);
    gb_sweep_def_free(&d);
    /* the hooks */
    spec = "{\"kind\": \"sleep\", \"n_nodes\": 3, \"fail_rank\": 2, \"fail_at\": \"rendezvous\","
           " \"signal\": 9}";
    CHECKF(gb_spec_parse(spec, strlen(spec), 10, &d, err, sizeof err) == 0, "%s", err);
    CHECK(d.jobs[0].fail_rank == 2 && strcmp(d.jobs[0].fail_at, "rendezvous") == 0);
    char *j = gb_jobdef_to_json(&d.jobs[0]);
    CHECKF(j && strstr(j, "\"fail_rank\":2") && strstr(j, "\"fail_at\":\"rendezvous\""), "%s", j);
    CHECK(gb_jobdef_from_json(j, strlen(j), &back, err, sizeof err) == 0 && back.fail_rank == 2);
    free(j);
    gb_sweep_def_free(&d);
    static const struct {
        const char *spec, *word;
    } bad[] = {
        {"{\"kind\": \"sleep\", \"n_nodes\": 0}", "'n_nodes' must be an integer in 1..1024"},
        {"{\"kind\": \"sleep\", \"n_nodes\": 1025}", "1..1024"},
        {"{\"kind\": \"gemm\", \"n_nodes\": 2}", "'n_nodes' does not apply"},
        {"{\"kind\": \"sleep\", \"n_nodes\": 2, \"fail_rank\": 2}",
         "'fail_rank' 2 is not a rank of a job over 2 node(s)"},
        {"{\"kind\": \"sleep\", \"fail_at\": \"rendezvous\"}", "needs a multi-node job"},
        {"{\"kind\": \"sleep\", \"fail_at\": \"middle\"}", "'fail_at': 'middle' is not one of"},
        {"{\"kind\": \"sleep\", \"rendezvous_s\": 0}", "'rendezvous_s' must be an integer"},
        {"{\"kind\": \"sleep\", \"rendezvous_s\": [5, 6]}", "takes one value"},
        {"{\"kind\": \"resnet50\", \"fail_rank\": 0}", "'fail_rank' does not apply"},
        /* on one node it would be silently meaningless */
        {"{\"kind\": \"sleep\", \"rendezvous_s\": 60}", "applies only to jobs over several"},
        {"{\"kind\": \"sleep\", \"n_nodes\": 1, \"rendezvous_s\": 60}", "add \"n_nodes\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(gb_spec_parse(bad[i].spec, strlen(bad[i].spec), 10, &d, err, sizeof err) != 0, "%s",
               bad[i].spec);
        CHECKF(strstr(err, bad[i].word), "%s: %s", bad[i].spec, err);
    }
}

/* ---- worker: dist ----------------------------------------------------------- */

static cJSON *dist_json(int rank, int n, int world, int fd, const char *id) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", rank);
    cJSON_AddNumberToObject(o, "n_nodes", n);
    cJSON_AddNumberToObject(o, "world_size", world);
    cJSON_AddNumberToObject(o, "fd", fd);
    if (id) cJSON_AddStringToObject(o, "unique_id", id);
    return o;
}

static void case_dist_parse(void) {
    gb_dist_t d;
    gb_dist_chan_t ch;
    char err[512];
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    cJSON *o = dist_json(1, 2, 4, sv[1], "0a0b");
    CHECKF(gb_dist_from_json(o, 2, &d, &ch, err, sizeof err) == 0, "%s", err);
    CHECK(d.rank == 1 && d.n_nodes == 2 && d.world_size == 4 && d.unique_id_len == 2);
    CHECK(d.unique_id[1] == 0x0b && d.ctx == &ch && ch.fd == sv[1] && d.publish_id && d.wait_start);
    cJSON_Delete(o);
    static const struct {
        int rank, n, world, fd;
        const char *id, *word;
    } bad[] = {
        {1, 2, 3, -2, "0a", "world_size 3 is not n_nodes 2 x 2"},
        {1, 2, 4, -2, NULL, "rank 1 has no unique id"},
        {1, 2, 4, -2, "0", "rank 1 has no unique id"},
        {0, 2, 4, -2, "0a", "rank 0 makes the unique id"},
        {2, 2, 4, -2, "0a", "dist.rank must be an integer in 0..1"},
        {0, 1, 2, -2, NULL, "dist.n_nodes must be an integer in 2..1024"},
        {1, 2, 4, 1000, "0a", "not an open descriptor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = dist_json(bad[i].rank, bad[i].n, bad[i].world, bad[i].fd == -2 ? sv[1] : bad[i].fd,
                      bad[i].id);
        CHECKF(gb_dist_from_json(o, 2, &d, &ch, err, sizeof err) != 0, "case %zu", i);
        CHECKF(strstr(err, bad[i].word), "case %zu: %s", i, err);
        cJSON_Delete(o);
    }
    CHECK(gb_dist_from_json(NULL, 2, &d, &ch, err, sizeof err) != 0);
    close(sv[0]);
    close(sv[1]);
}

/* The callbacks over a real socket pair, the test playing the agent. */
static void case_dist_channel(void) {
    int sv[2];
    char err[512], line[GB_RDV_LINE_MAX + 1];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    gb_dist_t d;
    gb_dist_chan_t ch;
    cJSON *o = dist_json(0, 2, 2, sv[1], NULL);
    CHECKF(gb_dist_from_json(o, 1, &d, &ch, err, sizeof err) == 0, "%s", err);
    cJSON_Delete(o);
    /* rank 0 waits only after its id */
    CHECK(d.wait_start(&d, err, sizeof err) != 0 && strstr(err, "must publish"));
    ch.waited = 0;
    CHECK(d.publish_id(&d, ID, 0, err, sizeof err) != 0);
    CHECK(d.publish_id(&d, ID, sizeof ID, err, sizeof err) == 0);
    CHECK(d.publish_id(&d, ID, sizeof ID, err, sizeof err) != 0 && strstr(err, "once"));
    CHECK(d.unique_id_len == 4 && memcmp(d.unique_id, ID, 4) == 0);
    /* the agent's end sees the id; a start time in the past is met at once */
    gb_rdv_reader_t r = {.len = 0};
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 1 && strcmp(line, "id 01020304") == 0);
    int64_t start = gb_wall_ms() - 5;
    char msg[64];
    snprintf(msg, sizeof msg, "start %lld\n", (long long)start);
    CHECK(write(sv[0], msg, strlen(msg)) == (ssize_t)strlen(msg));
    CHECKF(d.wait_start(&d, err, sizeof err) == 0, "%s", err);
    CHECK(gb_rdv_read_line(&r, sv[0], line) == 1 && strcmp(line, "ready") == 0);
    CHECK(d.start_at_ms == start && d.started_at_ms >= start);
    CHECK(d.wait_start(&d, err, sizeof err) != 0); /* once */
    cJSON *rec = cJSON_CreateObject();
    gb_dist_record(&d, rec);
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(rec, "dist");
    CHECK(cJSON_IsObject(dj));
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(dj, "unique_id")->valuestring, "01020304") == 0);
    CHECK(cJSON_GetObjectItemCaseSensitive(dj, "late_ms")->valuedouble >= 5);
    cJSON_Delete(rec);
    /* a start time in the future is waited for */
    close(sv[0]);
    close(sv[1]);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    o = dist_json(1, 2, 2, sv[1], "01020304");
    CHECK(gb_dist_from_json(o, 1, &d, &ch, err, sizeof err) == 0);
    cJSON_Delete(o);
    CHECK(d.publish_id(&d, ID, sizeof ID, err, sizeof err) != 0 && strstr(err, "only rank 0"));
    start = gb_wall_ms() + 150;
    snprintf(msg, sizeof msg, "start %lld\n", (long long)start);
    CHECK(write(sv[0], msg, strlen(msg)) == (ssize_t)strlen(msg));
    CHECK(d.wait_start(&d, err, sizeof err) == 0);
    CHECKF(d.started_at_ms >= start, "began %lld ms early", (long long)(start - d.started_at_ms));
    /* the agent goes away before the start: an error, not a hang */
    close(sv[0]);
    close(sv[1]);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    o = dist_json(1, 2, 2, sv[1], "01020304");
    CHECK(gb_dist_from_json(o, 1, &d, &ch, err, sizeof err) == 0);
    cJSON_Delete(o);
    close(sv[0]);
    CHECK(d.wait_start(&d, err, sizeof err) != 0 && strstr(err, "rendezvous channel"));
    close(sv[1]);
    /* a line that is not the start */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    o = dist_json(1, 2, 2, sv[1], "01020304");
    CHECK(gb_dist_from_json(o, 1, &d, &ch, err, sizeof err) == 0);
    cJSON_Delete(o);
    CHECK(write(sv[0], "ready\n", 6) == 6);
    CHECK(d.wait_start(&d, err, sizeof err) != 0 && strstr(err, "expected the start"));
    close(sv[0]);
    close(sv[1]);
}

static void case_sleep_id(void) {
    unsigned char id[GB_SLEEP_ID_LEN], id2[GB_SLEEP_ID_LEN];
    char err[256];
    CHECK(gb_sleep_id_make(77, 3, id, err, sizeof err) == 0);
    CHECK(gb_sleep_id_make(77, 3, id2, err, sizeof err) == 0);
    CHECK(memcmp(id, id2, sizeof id) != 0); /* random part */
    CHECK(memcmp(id, "GBSLEEP1", 8) == 0);
    CHECK(gb_sleep_id_check(id, sizeof id, 77, 3, err, sizeof err) == 0);
    CHECK(gb_sleep_id_check(id, sizeof id, 78, 3, err, sizeof err) != 0 && strstr(err, "job 77"));
    CHECK(gb_sleep_id_check(id, sizeof id, 77, 4, err, sizeof err) != 0 &&
          strstr(err, "attempt 3"));
    CHECK(gb_sleep_id_check(id, sizeof id - 1, 77, 3, err, sizeof err) != 0);
    /* one flipped bit anywhere is caught */
    for (size_t i = 0; i < sizeof id; i++) {
        memcpy(id2, id, sizeof id);
        id2[i] ^= 0x10;
        CHECKF(gb_sleep_id_check(id2, sizeof id2, 77, 3, err, sizeof err) != 0, "byte %zu", i);
    }
}

/* The worker refuses job files whose rank fields do not fit the job. */
static void case_worker_files(void) {
    char dir[] = "/tmp/gb-mn-worker-XXXXXX", job[64], out[64];
    CHECK(mkdtemp(dir));
    snprintf(job, sizeof job, "%s/job.json", dir);
    snprintf(out, sizeof out, "%s/result.json", dir);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    static const struct {
        const char *params, *dist, *word;
    } bad[] = {
        {"{\"kind\": \"sleep\", \"backend\": \"cpu\", \"n_nodes\": 2}", NULL,
         "a job over 2 node(s) needs its rank in 'dist'"},
        {"{\"kind\": \"gemm\", \"backend\": \"cpu\"}", "{\"rank\": 0}",
         "a job over 1 node(s) takes no 'dist'"},
        {"{\"kind\": \"sleep\", \"backend\": \"cpu\", \"n_nodes\": 2}",
         "{\"rank\": 1, \"n_nodes\": 3, \"world_size\": 3, \"fd\": %d, \"unique_id\": \"0a\"}",
         "dist.n_nodes 3 but the parameters say 2"},
        {"{\"kind\": \"sleep\", \"backend\": \"cpu\", \"n_nodes\": 2, \"gpus\": 2}",
         "{\"rank\": 1, \"n_nodes\": 2, \"world_size\": 2, \"fd\": %d, \"unique_id\": \"0a\"}",
         "world_size 2 is not n_nodes 2 x 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dist[256] = "", text[1024], err[256];
        if (bad[i].dist) snprintf(dist, sizeof dist, bad[i].dist, sv[1]);
        snprintf(text, sizeof text, "{\"job_id\": 9, \"attempt\": 1, \"params\": %s%s%s}",
                 bad[i].params, bad[i].dist ? ", \"dist\": " : "", dist);
        CHECK(gb_write_file_atomic(job, text, strlen(text), err, sizeof err) == 0);
        CHECKF(gb_worker_run(job, out) == 2, "case %zu", i);
        char *rec = NULL;
        size_t len;
        CHECK(gb_read_file(out, 1 << 16, &rec, &len, err, sizeof err) == 0);
        CHECKF(strstr(rec, bad[i].word), "case %zu: %s", i, rec);
        free(rec);
    }
    close(sv[0]);
    close(sv[1]);
    unlink(job);
    unlink(out);
    rmdir(dir);
}

/* ---- records -------------------------------------------------------------- */

static void case_record(void) {
    gb_record_t r;
    char err[512];
    const char *good =
        "{\"kind\": \"sleep\", \"sizes\": [{\"bytes\": 8, \"count\": 2, \"time_us\": 5.5,"
        " \"algbw_gbs\": 0.001, \"busbw_gbs\": 0.002, \"ok\": true}, {\"bytes\": 1024}],"
        " \"details\": {\"nccl_transports\": [\"P2P/CUMEM\", \"SHM\"]}}";
    CHECKF(gb_record_parse(good, strlen(good), "sleep", &r, err, sizeof err) == 0, "%s", err);
    gb_record_free(&r);
    const char *obj = "{\"kind\": \"sleep\", \"details\": {\"nccl_transports\": {\"P2P\": 4}}}";
    CHECKF(gb_record_parse(obj, strlen(obj), "sleep", &r, err, sizeof err) == 0, "%s", err);
    gb_record_free(&r);
    static const struct {
        const char *rec, *word;
    } bad[] = {
        {"{\"kind\": \"sleep\", \"sizes\": {}}", "'sizes' must be an array"},
        {"{\"kind\": \"sleep\", \"sizes\": [3]}", "'sizes'[0] must be an object"},
        {"{\"kind\": \"sleep\", \"sizes\": [{\"count\": 1}]}", "'sizes'[0].bytes"},
        {"{\"kind\": \"sleep\", \"sizes\": [{\"bytes\": 1.5}]}", "'sizes'[0].bytes"},
        {"{\"kind\": \"sleep\", \"sizes\": [{\"bytes\": 8, \"busbw_gbs\": -1}]}", "'busbw_gbs'"},
        {"{\"kind\": \"sleep\", \"sizes\": [{\"bytes\": 8, \"ok\": 1}]}", "'sizes'[0].ok"},
        {"{\"kind\": \"sleep\", \"details\": {\"nccl_transports\": \"P2P\"}}",
         "'details.nccl_transports' must be"},
        {"{\"kind\": \"sleep\", \"details\": {\"nccl_transports\": [3]}}", "names must be"},
        {"{\"kind\": \"sleep\", \"details\": {\"nccl_transports\": [\"\"]}}", "names must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(gb_record_parse(bad[i].rec, strlen(bad[i].rec), "sleep", &r, err, sizeof err) != 0,
               "%s", bad[i].rec);
        CHECKF(strstr(err, bad[i].word), "%s: %s", bad[i].rec, err);
    }

    /* a multi-node job's verdict over its ranks (docs/telemetry.md) */
    char out[GB_RECORD_FOLD_MAX];
    gb_rank_verdict_t v[3] = {{0, "a", 1, NULL}, {1, "b", 1, NULL}, {2, "c", 1, NULL}};
    CHECK(gb_record_fold_valid(v, 3, out, sizeof out) == 1 && out[0] == '\0');
    v[0].valid = -1; /* rank 0 says nothing: nor does the row, unless a rank is invalid */
    CHECK(gb_record_fold_valid(v, 3, out, sizeof out) == -1 && out[0] == '\0');
    v[2] = (gb_rank_verdict_t){2, "c", 0, "GPU throttling in the timed window: hw_slowdown"};
    CHECK(gb_record_fold_valid(v, 3, out, sizeof out) == 0);
    CHECKF(strcmp(out, "rank 2 on c: GPU throttling in the timed window: hw_slowdown") == 0, "%s",
           out);
    v[2].valid = 1; /* rank 0 alone: its own reason, as a one-node job's */
    v[0] = (gb_rank_verdict_t){0, "a", 0, "CPU contention in the timed window: 20%"};
    CHECK(gb_record_fold_valid(v, 3, out, sizeof out) == 0);
    CHECKF(strcmp(out, "CPU contention in the timed window: 20%") == 0, "%s", out);
    v[1] = (gb_rank_verdict_t){1, "b", 0, NULL}; /* and another rank: both named */
    CHECK(gb_record_fold_valid(v, 3, out, sizeof out) == 0);
    CHECKF(strcmp(out, "rank 0 on a: CPU contention in the timed window: 20%; rank 1 on b: (no "
                       "reason given)") == 0,
           "%s", out);
    v[0].valid = 1;
    CHECK(gb_record_fold_valid(v, 3, out, 31) == 0); /* just room for it */
    CHECKF(strcmp(out, "rank 1 on b: (no reason given)") == 0, "%s", out);
    CHECK(gb_record_fold_valid(v, 3, out, 30) == 0); /* no room: how many */
    CHECKF(strcmp(out, "and 1 more invalid rank(s)") == 0, "%s", out);
    CHECK(gb_record_fold_valid(v, 3, out, 20) == 0); /* not even for that */
    CHECKF(out[0] == '\0', "%s", out);
    /* 1024 ranks, 1023 invalid with the longest reasons a record holds:
     * as many as fit, in rank order, then the count of the others */
    enum { N = 1024 };
    static gb_rank_verdict_t many[N];
    static char why[257], nodes[N][16];
    memset(why, 'x', 256);
    for (int i = 0; i < N; i++) {
        snprintf(nodes[i], sizeof nodes[i], "node%d", i);
        many[i] = (gb_rank_verdict_t){i, nodes[i], i ? 0 : 1, i ? why : NULL};
    }
    CHECK(gb_record_fold_valid(many, N, out, sizeof out) == 0);
    size_t shown = 1;
    for (const char *p = out; (p = strstr(p, "; rank ")); p++)
        shown++;
    char tail[64];
    snprintf(tail, sizeof tail, "; and %zu more invalid rank(s)", (size_t)N - 1 - shown);
    CHECKF(strncmp(out, "rank 1 on node1: xxx", 20) == 0, "%s", out);
    CHECKF(strstr(out, "; rank 2 on node2: xxx") != NULL, "%s", out);
    CHECKF(strlen(out) > strlen(tail) && strcmp(out + strlen(out) - strlen(tail), tail) == 0,
           "%zu shown: ...%s", shown, out + strlen(out) - 60);
    CHECKF(shown >= 5 && strlen(out) < sizeof out, "%zu shown, %zu bytes", shown, strlen(out));
}

/* One value from the store file, read through a connection of its own (so
 * only what was committed). */
static int committed_int(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *q;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECKF(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    int v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* The ranks table's statements share the store's connection and its rule
 * for a transaction SQLite rolled back by itself (SQLITE_FULL, an I/O
 * error): a failed write of either marks it broken, and then no write of
 * either runs (it would commit on its own) and the commit fails, so
 * nothing of the turn reaches the file. The roll-back SQLite would do is
 * done here by hand on the same connection. */
static void case_ranks_broken(void) {
    char path[64], err[512], sql[128];
    const char *now = "2024-05-01T12:00:00.000Z";
    snprintf(path, sizeof path, "/tmp/gb-ranks-broken-%d.db", (int)getpid());
    gb_store_t *st = gb_store_open(path, err, sizeof err);
    CHECKF(st, "%s", err);
    gb_ranks_t *rk = gb_ranks_new(st, err, sizeof err);
    CHECKF(rk, "%s", err);
    gb_store_node_t n = {.agent_id = "agent-a",
                         .name = "node-a",
                         .state = "connected",
                         .cpu_model = "cpu",
                         .os = "os",
                         .kernel = "k",
                         .driver_version = "",
                         .cuda_driver_version = "",
                         .labels = "",
                         .kinds = "sleep",
                         .gpu_model = "cpu",
                         .inventory_json = "{}",
                         .cpu_cores = 2,
                         .slots = 1};
    gb_store_job_t j = {.kind = "sleep",
                        .params = "{\"kind\": \"sleep\", \"n_nodes\": 2}",
                        .backend = "auto",
                        .n_gpus = 1,
                        .batch_per_gpu = -1,
                        .synthetic = 1,
                        .max_attempts = 1};
    uint64_t job;
    CHECK(gb_store_begin(st) == 0);
    for (const char *const *id = (const char *const[]){"agent-a", "agent-b", "agent-c", NULL}; *id;
         id++) {
        n.agent_id = n.name = *id;
        CHECK(gb_store_node_upsert(st, &n, now) == 0);
    }
    CHECK(gb_store_sweep_insert(st, "s", "{}", 1, NULL, now, &j.sweep_id) == 0);
    CHECK(gb_store_job_insert(st, &j, now, &job) == 0);
    CHECK(gb_store_job_assign(st, job, 1, "agent-a", "cpu", now) == 0);
    CHECK(gb_ranks_insert(rk, job, 1, 0, "agent-a", "assigned", now) == 0);
    CHECK(gb_store_commit(st) == 0);
    sqlite3 *db = gb_store_db(st);

    /* a ranks write fails after SQLite rolled the turn back */
    CHECK(gb_store_begin(st) == 0);
    CHECKF(gb_ranks_insert(rk, job, 1, 1, "agent-b", "waiting", now) == 0, "%s",
           gb_ranks_errmsg(rk));
    CHECK(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(!gb_store_broken(st)); /* nothing has told the store yet */
    CHECK(gb_ranks_insert(rk, job, 1, 0, "agent-a", "assigned", now) != 0); /* rank 0 exists */
    CHECK(gb_store_broken(st));
    CHECKF(strstr(gb_store_errmsg(st), "ranks: insert"), "%s", gb_store_errmsg(st));
    CHECK(gb_ranks_set(rk, job, 1, 0, "ready", "ready", now, NULL) != 0);
    CHECKF(strstr(gb_ranks_errmsg(rk), "ranks: ready"), "%s", gb_ranks_errmsg(rk));
    CHECK(gb_ranks_insert(rk, job, 1, 2, "agent-c", "waiting", now) != 0);
    CHECK(gb_store_node_state(st, "agent-a", "lost", now) != 0);
    CHECK(gb_store_commit(st) != 0);
    CHECK(!gb_store_broken(st) && !gb_store_in_tx(st)); /* the commit rolled back */
    snprintf(sql, sizeof sql, "SELECT count(*) * 10 + (state = 'assigned') FROM ranks");
    CHECK(committed_int(path, sql) == 11); /* rank 0 only, as committed */
    CHECK(committed_int(path, "SELECT count(*) FROM nodes WHERE state = 'connected'") == 3);

    /* a store write fails after SQLite rolled the turn back: ranks writes
     * are refused as well */
    CHECK(gb_store_begin(st) == 0);
    CHECK(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(gb_store_job_assign(st, 999, 1, "agent-a", "cpu", now) != 0); /* no job 999 */
    CHECK(gb_store_broken(st));
    CHECK(gb_ranks_set(rk, job, 1, 0, "ready", "ready", now, NULL) != 0);
    CHECK(gb_store_commit(st) != 0);
    CHECK(committed_int(path, "SELECT count(*) FROM ranks WHERE state = 'ready'") == 0);

    /* and a turn after the roll-back writes again */
    CHECK(gb_store_begin(st) == 0);
    CHECK(gb_ranks_set(rk, job, 1, 0, "ready", "ready", now, NULL) == 0);
    CHECK(gb_store_commit(st) == 0);
    CHECK(committed_int(path, "SELECT count(*) FROM ranks WHERE state = 'ready'") == 1);
    gb_ranks_destroy(&rk);
    gb_store_close(&st);
    unlink(path);
    snprintf(sql, sizeof sql, "%s-wal", path);
    unlink(sql);
    snprintf(sql, sizeof sql, "%s-shm", path);
    unlink(sql);
}

int main(int argc, char **argv) {
    CHECKF(argc == 2, "usage: test_mn_unit CASE");
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"gang_happy", case_gang_happy},
        {"gang_rank_fails", case_gang_rank_fails},
        {"gang_rank0_dies", case_gang_rank0_dies},
        {"gang_lost", case_gang_lost},
        {"gang_deadline_cancel", case_gang_deadline_cancel},
        {"gang_early_ok", case_gang_early_ok},
        {"rdv_lines", case_rdv_lines},
        {"rdv_reader", case_rdv_reader},
        {"rdv_worker", case_rdv_worker},
        {"wire", case_wire},
        {"spec", case_spec},
        {"dist_parse", case_dist_parse},
        {"dist_channel", case_dist_channel},
        {"sleep_id", case_sleep_id},
        {"worker_files", case_worker_files},
        {"record", case_record},
        {"ranks_broken", case_ranks_broken},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return 0;
        }
    CHECKF(0, "unknown case %s", argv[1]);
    return 1;
}
