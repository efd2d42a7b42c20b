/* test_wire.c - envelope decoding and validation (common/gb_wire.c) on raw
 * bytes, one CTest test per case: every body round-trips, each way a
 * frame can be wrong is rejected with its code and a reason, and the
 * largest Hello an agent can send fits the agents endpoint's frame floor. */
#define _POSIX_C_SOURCE 200809L
#include "agent.h"
#include "check.h"
#include "gb_wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Gb__Envelope *roundtrip(Gb__Envelope *env) {
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(env, &len);
    CHECK(buf);
    Gb__Envelope *out = NULL;
    uint64_t seq = 0;
    char why[512] = "";
    int rc = gb_wire_decode(buf, len, GB_WIRE_MAX_FRAME, &out, &seq, why, sizeof why);
    free(buf);
    CHECKF(rc == 0, "%s did not round-trip: %s: %s", gb_wire_body_name(env->body_case),
           gb_wire_reject_name(rc), why);
    CHECK(out->body_case == env->body_case && out->seq == env->seq && seq == env->seq);
    return out;
}

/* Decoding env (packed with `version`) must fail with code and a reason
 * containing want. */
static void expect_bad(Gb__Envelope *env, uint32_t version, int code, const char *want) {
    env->version = version;
    size_t len = gb__envelope__get_packed_size(env);
    uint8_t *buf = malloc(len + 1);
    CHECK(buf);
    CHECK(gb__envelope__pack(env, buf) == len);
    Gb__Envelope *out = NULL;
    uint64_t seq = 0;
    char why[512] = "";
    int rc = gb_wire_decode(buf, len, GB_WIRE_MAX_FRAME, &out, &seq, why, sizeof why);
    free(buf);
    CHECKF(rc == code, "got %s (%s), want %s", gb_wire_reject_name(rc), why,
           gb_wire_reject_name(code));
    CHECK(out == NULL);
    CHECKF(strstr(why, want), "reason '%s' lacks '%s'", why, want);
    CHECK(seq == env->seq);
}

/* A complete hello the tests then break one field at a time. */
typedef struct hello_fx {
    Gb__Envelope env;
    Gb__Hello h;
    Gb__Inventory inv;
    Gb__Gpu g[2], *gp[2];
    Gb__Link l, *lp[1];
    Gb__Label lab, *labp[1];
    Gb__JobRef r, *rp[1];
    char *kinds[2];
} hello_fx_t;

static void hello_fx(hello_fx_t *x) {
    memset(x, 0, sizeof *x);
    gb__envelope__init(&x->env);
    gb__hello__init(&x->h);
    gb__inventory__init(&x->inv);
    x->inv.hostname = "node-1";
    x->inv.cpu_model = "Some CPU";
    x->inv.cpu_cores = 64;
    x->inv.memory_bytes = 1ull << 40;
    x->inv.driver_version = "560.1";
    for (int i = 0; i < 2; i++) {
        gb__gpu__init(&x->g[i]);
        x->g[i].index = (uint32_t)i;
        x->g[i].name = "NVIDIA H200";
        x->g[i].cc_major = 9;
        x->g[i].pcie_gen = 5;
        x->g[i].pcie_width = 16;
        x->gp[i] = &x->g[i];
    }
    x->inv.n_gpus = 2;
    x->inv.gpus = x->gp;
    gb__link__init(&x->l);
    x->l.gpu_a = 0;
    x->l.gpu_b = 1;
    x->l.nvlink_lanes = 18;
    x->l.pcie_path = "numa_node";
    x->lp[0] = &x->l;
    x->inv.n_links = 1;
    x->inv.links = x->lp;
    x->kinds[0] = "gemm";
    x->kinds[1] = "sleep";
    x->inv.n_kinds = 2;
    x->inv.kinds = x->kinds;
    gb__label__init(&x->lab);
    x->lab.key = "rack";
    x->lab.value = "a";
    x->labp[0] = &x->lab;
    gb__job_ref__init(&x->r);
    x->r.job_id = 7;
    x->r.attempt = 2;
    x->rp[0] = &x->r;
    x->h.agent_id = "0123456789abcdef";
    x->h.name = "node-1";
    x->h.inventory = &x->inv;
    x->h.n_labels = 1;
    x->h.labels = x->labp;
    x->h.n_running = 1;
    x->h.running = x->rp;
    x->h.slots = 1;
    x->env.seq = 42;
    x->env.body_case = GB__ENVELOPE__BODY_HELLO;
    x->env.hello = &x->h;
}

static void case_roundtrip_hello(void) {
    hello_fx_t x;
    hello_fx(&x);
    Gb__Envelope *out = roundtrip(&x.env);
    const Gb__Hello *h = out->hello;
    CHECK(strcmp(h->agent_id, "0123456789abcdef") == 0 && h->n_labels == 1);
    CHECK(h->inventory->n_gpus == 2 && h->inventory->gpus[1]->index == 1);
    CHECK(h->inventory->n_links == 1 && h->inventory->links[0]->nvlink_lanes == 18);
    CHECK(h->n_running == 1 && h->running[0]->attempt == 2);
    gb_wire_free(&out);
    CHECK(out == NULL);
    gb_wire_free(&out); /* NULL is fine */
}

static void case_roundtrip_all(void) {
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = 9;
    Gb__Welcome w = GB__WELCOME__INIT;
    w.heartbeat_ms = 1000;
    w.lost_after = 5;
    env.body_case = GB__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    Gb__Envelope *o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
    as.job_id = 1;
    as.attempt = 1;
    as.kind = "gemm";
    as.params_json = "{}";
    as.timeout_s = 10;
    env.body_case = GB__ENVELOPE__BODY_ASSIGN;
    env.assign = &as;
    o = roundtrip(&env);
    CHECK(strcmp(o->assign->params_json, "{}") == 0);
    gb_wire_free(&o);
    Gb__Progress p = GB__PROGRESS__INIT;
    p.job_id = 1;
    p.attempt = 1;
    p.phase = GB__PHASE__PHASE_STARTED;
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__Result r = GB__RESULT__INIT;
    r.job_id = 3;
    r.attempt = 1;
    r.status = GB__RESULT_STATUS__RESULT_OK;
    r.record_json = "{\"kind\":\"gemm\"}";
    r.exit_code = -9;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = &r;
    o = roundtrip(&env);
    CHECK(o->result->exit_code == -9);
    gb_wire_free(&o);
    Gb__ResultAck ack = GB__RESULT_ACK__INIT;
    ack.job_id = 3;
    ack.attempt = 1;
    env.body_case = GB__ENVELOPE__BODY_RESULT_ACK;
    env.result_ack = &ack;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__Cancel cn = GB__CANCEL__INIT;
    cn.job_id = 3;
    cn.attempt = 1;
    env.body_case = GB__ENVELOPE__BODY_CANCEL;
    env.cancel = &cn;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__Reject rej = GB__REJECT__INIT;
    rej.code = GB__REJECT_CODE__REJECT_BAD_SPEC;
    rej.reason = "why";
    env.body_case = GB__ENVELOPE__BODY_REJECT;
    env.reject = &rej;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__SubmitRequest sub = GB__SUBMIT_REQUEST__INIT;
    sub.spec_json = "{}";
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__StatusRequest st = GB__STATUS_REQUEST__INIT;
    env.body_case = GB__ENVELOPE__BODY_STATUS;
    env.status = &st;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__NodesRequest nq = GB__NODES_REQUEST__INIT;
    env.body_case = GB__ENVELOPE__BODY_NODES;
    env.nodes = &nq;
    o = roundtrip(&env);
    gb_wire_free(&o);
    Gb__CancelRequest cq = GB__CANCEL_REQUEST__INIT;
    cq.sweep_id = 1;
    env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
    env.cancel_request = &cq;
    o = roundtrip(&env);
    gb_wire_free(&o);
}

/* n copies of c and a NUL into s (n + 1 bytes). */
static char *fill(char *s, size_t n, char c) {
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* The largest Hello an agent can send: GB_AGENT_MAX_SLOTS running jobs,
 * GB_AGENT_HELLO_SPOOLED_MAX spooled results, every list and string of the
 * inventory at its wire limit (all GPU pairs as links), store ids of
 * GB_WIRE_ID_MAX and every number at its largest. The agents endpoint
 * accepts GB_WIRE_RESULT_FRAME_MAX whatever --max-frame says: a Hello over
 * it would leave an agent unable to register with a small --max-frame. */
#define LINKS_MAX ((size_t)GB_WIRE_GPUS_MAX * (GB_WIRE_GPUS_MAX - 1) / 2)
#define REFS_MAX  (GB_AGENT_MAX_SLOTS + GB_AGENT_HELLO_SPOOLED_MAX)
static void case_hello_largest(void) {
    static char id[GB_WIRE_ID_MAX + 1], name[GB_WIRE_NAME_MAX + 1], text[GB_WIRE_TEXT_MAX + 1];
    static char key[GB_WIRE_LABEL_KEY + 1], val[GB_WIRE_LABEL_VAL + 1];
    static char kind[GB_WIRE_KIND_MAX + 1], path[GB_WIRE_PCIE_PATH_MAX + 1];
    static char prec[GB_WIRE_PRECISION_MAX + 1];
    static Gb__Label lab[GB_WIRE_LABELS_MAX], *labp[GB_WIRE_LABELS_MAX];
    static Gb__Gpu gpu[GB_WIRE_GPUS_MAX], *gpup[GB_WIRE_GPUS_MAX];
    static Gb__Link link[LINKS_MAX], *linkp[LINKS_MAX];
    static char *kinds[GB_WIRE_KINDS_MAX], *precs[GB_WIRE_PRECISIONS_MAX];
    static Gb__JobRef ref[REFS_MAX], *refp[REFS_MAX];
    fill(id, GB_WIRE_ID_MAX, 'a');
    fill(name, GB_WIRE_NAME_MAX, 'n');
    fill(text, GB_WIRE_TEXT_MAX, 't');
    fill(key, GB_WIRE_LABEL_KEY, 'k');
    fill(val, GB_WIRE_LABEL_VAL, 'v');
    fill(kind, GB_WIRE_KIND_MAX, 'j');
    fill(path, GB_WIRE_PCIE_PATH_MAX, 'p');
    fill(prec, GB_WIRE_PRECISION_MAX, 'f');

    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = name;
    inv.cpu_model = inv.os = inv.kernel = text;
    inv.driver_version = inv.cuda_driver_version = inv.nvml_error = text;
    inv.gpubench_version = text;
    inv.cpu_cores = 65536; /* gb_wire_validate's limits, here and below */
    inv.memory_bytes = UINT64_MAX;
    for (size_t i = 0; i < GB_WIRE_GPUS_MAX; i++) {
        gb__gpu__init(&gpu[i]);
        gpu[i].index = (uint32_t)i;
        gpu[i].name = gpu[i].uuid = gpu[i].pci_bus_id = text;
        gpu[i].memory_bytes = UINT64_MAX;
        gpu[i].sm_count = gpu[i].power_limit_mw = UINT32_MAX;
        gpu[i].cc_major = gpu[i].cc_minor = gpu[i].pcie_gen = 100;
        gpu[i].pcie_width = 64;
        gpup[i] = &gpu[i];
    }
    inv.n_gpus = GB_WIRE_GPUS_MAX;
    inv.gpus = gpup;
    size_t nl = 0;
    for (uint32_t a = 0; a < GB_WIRE_GPUS_MAX; a++)
        for (uint32_t b = a + 1; b < GB_WIRE_GPUS_MAX; b++, nl++) {
            gb__link__init(&link[nl]);
            link[nl].gpu_a = a;
            link[nl].gpu_b = b;
            link[nl].nvlink_lanes = GB_WIRE_NVLINK_LANES_MAX;
            link[nl].pcie_path = path;
            linkp[nl] = &link[nl];
        }
    CHECK(nl == LINKS_MAX);
    inv.n_links = nl;
    inv.links = linkp;
    for (size_t i = 0; i < GB_WIRE_KINDS_MAX; i++)
        kinds[i] = kind;
    inv.n_kinds = GB_WIRE_KINDS_MAX;
    inv.kinds = kinds;
    for (size_t i = 0; i < GB_WIRE_PRECISIONS_MAX; i++)
        precs[i] = prec;
    inv.n_cpu_precisions = GB_WIRE_PRECISIONS_MAX;
    inv.cpu_precisions = precs;

    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = id;
    h.name = name;
    h.inventory = &inv;
    h.slots = GB_AGENT_MAX_SLOTS;
    h.rendezvous = 1000;
    for (size_t i = 0; i < GB_WIRE_LABELS_MAX; i++) {
        gb__label__init(&lab[i]);
        lab[i].key = key;
        lab[i].value = val;
        labp[i] = &lab[i];
    }
    h.n_labels = GB_WIRE_LABELS_MAX;
    h.labels = labp;
    for (size_t i = 0; i < REFS_MAX; i++) {
        gb__job_ref__init(&ref[i]);
        ref[i].job_id = UINT64_MAX - i;
        ref[i].attempt = GB_WIRE_ATTEMPT_MAX;
        ref[i].store_id = id;
        refp[i] = &ref[i];
    }
    h.n_running = GB_AGENT_MAX_SLOTS;
    h.running = refp;
    h.n_spooled = GB_AGENT_HELLO_SPOOLED_MAX;
    h.spooled = refp + GB_AGENT_MAX_SLOTS;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = UINT64_MAX;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;

    size_t len = 0;
    uint8_t *buf = gb_wire_pack(&env, &len);
    CHECK(buf);
    printf("the largest hello: %zu bytes of %zu\n", len, (size_t)GB_WIRE_RESULT_FRAME_MAX);
    CHECKF(len <= GB_WIRE_RESULT_FRAME_MAX,
           "the largest hello an agent sends is %zu bytes, over GB_WIRE_RESULT_FRAME_MAX (%zu): "
           "with a small --max-frame it could not register",
           len, (size_t)GB_WIRE_RESULT_FRAME_MAX);
    Gb__Envelope *out = NULL;
    uint64_t seq = 0;
    char why[512] = "";
    int rc = gb_wire_decode(buf, len, GB_WIRE_RESULT_FRAME_MAX, &out, &seq, why, sizeof why);
    free(buf);
    CHECKF(rc == 0, "the largest hello an agent sends is refused: %s: %s", gb_wire_reject_name(rc),
           why);
    const Gb__Hello *o = out->hello;
    CHECK(o->n_running == GB_AGENT_MAX_SLOTS && o->n_spooled == GB_AGENT_HELLO_SPOOLED_MAX);
    CHECK(o->inventory->n_gpus == GB_WIRE_GPUS_MAX && o->inventory->n_links == LINKS_MAX);
    CHECK(o->n_labels == GB_WIRE_LABELS_MAX && o->inventory->n_kinds == GB_WIRE_KINDS_MAX);
    CHECK(strcmp(o->spooled[0]->store_id, id) == 0);
    gb_wire_free(&out);
}

static void decode_raw(const void *buf, size_t len, size_t max, int code, const char *want) {
    Gb__Envelope *out = NULL;
    uint64_t seq = 0;
    char why[512] = "";
    int rc = gb_wire_decode(buf, len, max, &out, &seq, why, sizeof why);
    CHECKF(rc == code, "got %s (%s), want %s", gb_wire_reject_name(rc), why,
           gb_wire_reject_name(code));
    CHECK(out == NULL);
    CHECKF(strstr(why, want), "reason '%s' lacks '%s'", why, want);
}

int main(int argc, char **argv) {
    CHECKF(argc == 2, "usage: test_wire CASE");
    const char *c = argv[1];
    hello_fx_t x;
    hello_fx(&x);
    if (strcmp(c, "roundtrip_hello") == 0)
        case_roundtrip_hello();
    else if (strcmp(c, "roundtrip_all") == 0)
        case_roundtrip_all();
    else if (strcmp(c, "garbage") == 0) {
        static const char junk[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
        decode_raw(junk, sizeof junk - 1, GB_WIRE_MAX_FRAME, GB__REJECT_CODE__REJECT_DECODE,
                   "not a gpubench envelope");
    } else if (strcmp(c, "truncated") == 0) {
        size_t len;
        uint8_t *buf = gb_wire_pack(&x.env, &len);
        for (size_t cut = 1; cut < len; cut += 7) { /* every prefix is invalid or incomplete */
            Gb__Envelope *out = NULL;
            uint64_t seq;
            char why[256];
            int rc = gb_wire_decode(buf, cut, GB_WIRE_MAX_FRAME, &out, &seq, why, sizeof why);
            CHECKF(rc != 0, "a %zu-byte prefix of a %zu-byte hello decoded", cut, len);
            CHECK(out == NULL);
        }
        free(buf);
    } else if (strcmp(c, "too_large") == 0) {
        size_t len;
        uint8_t *buf = gb_wire_pack(&x.env, &len);
        decode_raw(buf, len, len - 1, GB__REJECT_CODE__REJECT_TOO_LARGE, "over the limit");
        free(buf);
    } else if (strcmp(c, "version") == 0) {
        expect_bad(&x.env, 2, GB__REJECT_CODE__REJECT_VERSION, "version 2 is not supported");
    } else if (strcmp(c, "version_zero") == 0) {
        decode_raw("", 0, GB_WIRE_MAX_FRAME, GB__REJECT_CODE__REJECT_DECODE, "an empty frame");
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.seq = 5;
        expect_bad(&env, 0, GB__REJECT_CODE__REJECT_VERSION, "version 0");
    } else if (strcmp(c, "no_body") == 0) {
        Gb__Envelope env = GB__ENVELOPE__INIT;
        expect_bad(&env, GB_PROTOCOL_VERSION, GB__REJECT_CODE__REJECT_RANGE, "no body");
    } else if (strcmp(c, "hello_agent_id") == 0) {
        x.h.agent_id = "has space";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.agent_id");
    } else if (strcmp(c, "hello_agent_id_long") == 0) {
        char id[GB_WIRE_ID_MAX + 2];
        memset(id, 'a', sizeof id - 1);
        id[sizeof id - 1] = '\0';
        x.h.agent_id = id;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.agent_id");
    } else if (strcmp(c, "hello_no_inventory") == 0) {
        x.h.inventory = NULL;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "inventory missing");
    } else if (strcmp(c, "hello_no_name") == 0) {
        x.h.name = "";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.name");
    } else if (strcmp(c, "hello_control_chars") == 0) {
        /* names and models reach terminals and logs: no escape sequence, no
         * newline, no C1 control (UTF-8), while other UTF-8 is fine */
        x.h.name = "evil\x1b]0;pwned\x07";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.name");
        x.h.name = "node-1\nline2";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.name");
        x.h.name = "node\xff-1"; /* not UTF-8: JSON listings could not carry it */
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.name");
        x.h.name = "node-1";
        x.inv.cpu_model = "cpu\xc2\x9b"
                          "2J";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "inventory.cpu_model");
        x.inv.cpu_model = "cpu";
        x.g[0].name = "H200\x7f";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "inventory.gpus.name");
        x.g[0].name = "NVIDIA H200";
        x.lab.value = "a\tb";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.labels.value");
        x.lab.value = "r\xc3\xa9seau"; /* UTF-8 letters pass */
        x.h.name = "n\xc5\x93ud";
        x.env.version = 1;
        Gb__Envelope *ok = roundtrip(&x.env);
        CHECK(strcmp(ok->hello->name, "n\xc5\x93ud") == 0);
        gb_wire_free(&ok);
    } else if (strcmp(c, "hello_gpu_index") == 0) {
        x.g[1].index = 5;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "gpus[1].index must be 1");
    } else if (strcmp(c, "hello_link") == 0) {
        x.l.gpu_b = 2;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "gpu_a < gpu_b < n_gpus");
    } else if (strcmp(c, "hello_link_twice") == 0) {
        /* the store keys a link by its pair: a repeat failed the node's
         * insert and rolled back the coordinator's turn */
        Gb__Link *two[2] = {&x.l, &x.l};
        x.inv.n_links = 2;
        x.inv.links = two;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "pair (0,1) listed twice");
    } else if (strcmp(c, "hello_labels") == 0) {
        Gb__Label *many[GB_WIRE_LABELS_MAX + 1];
        for (int i = 0; i <= GB_WIRE_LABELS_MAX; i++)
            many[i] = &x.lab;
        x.h.n_labels = GB_WIRE_LABELS_MAX + 1;
        x.h.labels = many;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "more than 32 labels");
    } else if (strcmp(c, "hello_string_long") == 0) {
        char *s = malloc(GB_WIRE_TEXT_MAX + 2);
        memset(s, 'x', GB_WIRE_TEXT_MAX + 1);
        s[GB_WIRE_TEXT_MAX + 1] = '\0';
        x.inv.cpu_model = s;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "inventory.cpu_model");
        free(s);
    } else if (strcmp(c, "hello_name_comma") == 0) {
        x.h.name = "a,b"; /* v_results.nodes joins names with ',' */
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.name: a node name has no ','");
    } else if (strcmp(c, "hello_jobref") == 0) {
        x.r.attempt = 0;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.running[0]");
        x.r.attempt = 1;
        x.r.store_id = "no spaces";
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.running[0].store_id");
        x.r.store_id = "0123456789abcdef"; /* a store's id passes, and comes back */
        Gb__Envelope *ok = roundtrip(&x.env);
        CHECK(strcmp(ok->hello->running[0]->store_id, "0123456789abcdef") == 0);
        gb_wire_free(&ok);
    } else if (strcmp(c, "hello_largest") == 0) {
        case_hello_largest();
    } else if (strcmp(c, "hello_slots") == 0) {
        x.h.slots = GB_WIRE_SLOTS_MAX + 1;
        expect_bad(&x.env, 1, GB__REJECT_CODE__REJECT_RANGE, "hello.slots");
    } else if (strcmp(c, "assign_timeout") == 0) {
        Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
        as.job_id = 1;
        as.attempt = 1;
        as.kind = "gemm";
        as.params_json = "{}";
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_ASSIGN;
        env.assign = &as;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "assign.timeout_s");
    } else if (strcmp(c, "result_status") == 0) {
        Gb__Result r = GB__RESULT__INIT;
        r.job_id = 1;
        r.attempt = 1;
        r.status = (Gb__ResultStatus)9;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_RESULT;
        env.result = &r;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "result.status 9");
    } else if (strcmp(c, "result_ok_without_record") == 0) {
        Gb__Result r = GB__RESULT__INIT;
        r.job_id = 1;
        r.attempt = 1;
        r.status = GB__RESULT_STATUS__RESULT_OK;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_RESULT;
        env.result = &r;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "result.record_json");
    } else if (strcmp(c, "result_outcome_lost") == 0) {
        /* a lost outcome is a failure with a reason and no record (what a
         * coordinator without the field stores), and goes through */
        Gb__Result r = GB__RESULT__INIT;
        r.job_id = 1;
        r.attempt = 1;
        r.status = GB__RESULT_STATUS__RESULT_FAILED;
        r.outcome_lost = 1;
        r.error = "the agent's spooled result was unreadable";
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_RESULT;
        env.result = &r;
        Gb__Envelope *o = roundtrip(&env);
        CHECK(o->result->outcome_lost);
        gb_wire_free(&o);
        r.error = "";
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "result.outcome_lost");
        r.error = "lost";
        r.record_json = "{}";
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "result.outcome_lost");
        r.record_json = "";
        r.status = GB__RESULT_STATUS__RESULT_CRASHED;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "result.outcome_lost");
    } else if (strcmp(c, "result_clock") == 0) {
        /* agent-clock times: up to year 9999 (UINT64_MAX was stored as
         * "1970-01-01T00:00:00.-01Z") */
        Gb__Result r = GB__RESULT__INIT;
        r.job_id = 1;
        r.attempt = 1;
        r.status = GB__RESULT_STATUS__RESULT_FAILED;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_RESULT;
        env.result = &r;
        r.started_at_ms = r.finished_at_ms = GB_WIRE_UNIX_MS_MAX;
        Gb__Envelope *o = roundtrip(&env);
        gb_wire_free(&o);
        r.finished_at_ms = UINT64_MAX;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "finished_at_ms must be 0..");
        r.finished_at_ms = 0;
        r.started_at_ms = GB_WIRE_UNIX_MS_MAX + 1;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "started_at_ms and");
        /* an end before the start is a wall clock stepped back during the
         * run (NTP, a VM resumed): the result is taken, not refused for
         * good (the agent would resend it for ever) */
        r.started_at_ms = 2000;
        r.finished_at_ms = 1999;
        o = roundtrip(&env);
        gb_wire_free(&o);
    } else if (strcmp(c, "result_job_zero") == 0) {
        Gb__Result r = GB__RESULT__INIT;
        r.attempt = 1;
        r.status = GB__RESULT_STATUS__RESULT_FAILED;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_RESULT;
        env.result = &r;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "job_id must be > 0");
    } else if (strcmp(c, "progress_phase") == 0) {
        Gb__Progress p = GB__PROGRESS__INIT;
        p.job_id = 1;
        p.attempt = 1;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_PROGRESS;
        env.progress = &p;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "progress.phase 0");
    } else if (strcmp(c, "heartbeat_unable") == 0) {
        /* why a node cannot start workers: one line, shown in logs and by
         * `gpubench nodes`, so no control character and bounded */
        Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        hb.unable = "cannot start a worker: No space left on device";
        Gb__Envelope *o = roundtrip(&env);
        CHECK(strcmp(o->heartbeat->unable, hb.unable) == 0);
        gb_wire_free(&o);
        hb.unable = "disk full\n\x1b]0;owned\a";
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "heartbeat.unable");
        char big[GB_WIRE_UNABLE_MAX + 2];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        hb.unable = big;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "heartbeat.unable");
        Gb__NodeStatus ns = GB__NODE_STATUS__INIT;
        Gb__NodeStatus *nsp = &ns;
        ns.agent_id = "a1";
        ns.name = "n1";
        ns.state = "connected";
        ns.unable = "x\x1b[2J";
        Gb__NodesReply nr = GB__NODES_REPLY__INIT;
        nr.n_nodes = 1;
        nr.nodes = &nsp;
        env.body_case = GB__ENVELOPE__BODY_NODES_REPLY;
        env.nodes_reply = &nr;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "nodes_reply.unable");
    } else if (strcmp(c, "reject_code") == 0) {
        Gb__Reject rej = GB__REJECT__INIT;
        rej.code = (Gb__RejectCode)77;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_REJECT;
        env.reject = &rej;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "reject.code 77");
    } else if (strcmp(c, "welcome_range") == 0) {
        Gb__Welcome w = GB__WELCOME__INIT;
        w.heartbeat_ms = 1;
        w.lost_after = 5;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_WELCOME;
        env.welcome = &w;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "welcome.heartbeat_ms");
    } else if (strcmp(c, "submit_empty") == 0) {
        Gb__SubmitRequest s = GB__SUBMIT_REQUEST__INIT;
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.body_case = GB__ENVELOPE__BODY_SUBMIT;
        env.submit = &s;
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "submit.spec_json");
    } else if (strcmp(c, "cancel_reason") == 0) {
        /* CancelRequest.reason: the cancelled jobs' error, one line of at
         * most GB_WIRE_TEXT_MAX bytes (it goes on to the agents' Cancel) */
        Gb__CancelRequest cq = GB__CANCEL_REQUEST__INIT;
        cq.sweep_id = 1;
        cq.reason = "cancelled: gpubench run --timeout 30 s ran out";
        Gb__Envelope env = GB__ENVELOPE__INIT;
        env.version = GB_PROTOCOL_VERSION;
        env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
        env.cancel_request = &cq;
        Gb__Envelope *o = roundtrip(&env);
        CHECK(strcmp(o->cancel_request->reason, cq.reason) == 0);
        gb_wire_free(&o);
        char big[GB_WIRE_TEXT_MAX + 2];
        cq.reason = fill(big, GB_WIRE_TEXT_MAX, 'x');
        o = roundtrip(&env);
        gb_wire_free(&o);
        cq.reason = fill(big, GB_WIRE_TEXT_MAX + 1, 'x');
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "cancel_request.reason");
        cq.reason = "ran out\n\x1b[2J";
        expect_bad(&env, 1, GB__REJECT_CODE__REJECT_RANGE, "cancel_request.reason");
    } else if (strcmp(c, "names") == 0) {
        CHECK(strcmp(gb_wire_body_name(GB__ENVELOPE__BODY_RESULT), "result") == 0);
        CHECK(strcmp(gb_wire_body_name((Gb__Envelope__BodyCase)99), "none") == 0);
        CHECK(strcmp(gb_wire_reject_name(GB__REJECT_CODE__REJECT_UNSATISFIABLE), "unsatisfiable") ==
              0);
        CHECK(strcmp(gb_wire_reject_name(-1), "unknown") == 0);
        CHECK(gb_wire_id_ok("a.b_c-1") && !gb_wire_id_ok("") && !gb_wire_id_ok("a/b") &&
              !gb_wire_id_ok(NULL));
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    return 0;
}
