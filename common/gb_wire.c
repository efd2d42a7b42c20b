/* gb_wire.c - see gb_wire.h. Every check here guards against a peer that is
 * buggy or hostile: limits are exact, nothing is assumed about strings
 * beyond what protobuf-c guarantees (NUL-terminated, possibly with embedded
 * NULs, which the length checks treat as the end). */
#define _POSIX_C_SOURCE 200809L
#include "gb_wire.h"

#include "gb_util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        gb_fmt(why, whylen, __VA_ARGS__);                                                          \
        return (code);                                                                             \
    } while (0)

#define RANGE GB__REJECT_CODE__REJECT_RANGE

const char *gb_wire_body_name(Gb__Envelope__BodyCase c) {
    switch (c) {
    case GB__ENVELOPE__BODY_HELLO:
        return "hello";
    case GB__ENVELOPE__BODY_WELCOME:
        return "welcome";
    case GB__ENVELOPE__BODY_HEARTBEAT:
        return "heartbeat";
    case GB__ENVELOPE__BODY_ASSIGN:
        return "assign";
    case GB__ENVELOPE__BODY_PROGRESS:
        return "progress";
    case GB__ENVELOPE__BODY_RESULT:
        return "result";
    case GB__ENVELOPE__BODY_RESULT_ACK:
        return "result_ack";
    case GB__ENVELOPE__BODY_CANCEL:
        return "cancel";
    case GB__ENVELOPE__BODY_REJECT:
        return "reject";
    case GB__ENVELOPE__BODY_SUBMIT:
        return "submit";
    case GB__ENVELOPE__BODY_SUBMIT_REPLY:
        return "submit_reply";
    case GB__ENVELOPE__BODY_STATUS:
        return "status";
    case GB__ENVELOPE__BODY_STATUS_REPLY:
        return "status_reply";
    case GB__ENVELOPE__BODY_NODES:
        return "nodes";
    case GB__ENVELOPE__BODY_NODES_REPLY:
        return "nodes_reply";
    case GB__ENVELOPE__BODY_CANCEL_REQUEST:
        return "cancel_request";
    case GB__ENVELOPE__BODY_CANCEL_REPLY:
        return "cancel_reply";
    case GB__ENVELOPE__BODY_FORGET:
        return "forget";
    case GB__ENVELOPE__BODY_FORGET_REPLY:
        return "forget_reply";
    case GB__ENVELOPE__BODY_RANK_UPDATE:
        return "rank_update";
    case GB__ENVELOPE__BODY_RANK_START:
        return "rank_start";
    default:
        return "none";
    }
}

const char *gb_wire_reject_name(int code) {
    static const char *names[] = {"unspecified",   "decode",     "version",       "too_large",
                                  "range",         "unexpected", "unknown_agent", "bad_spec",
                                  "unsatisfiable", "not_found",  "internal"};
    switch (code) {
    case GB__REJECT_CODE__REJECT_LIMIT:
        return "limit";
    case GB__REJECT_CODE__REJECT_RATE:
        return "rate";
    case GB__REJECT_CODE__REJECT_DENIED:
        return "denied";
    default:
        break;
    }
    if (code < 0 || code >= (int)(sizeof names / sizeof names[0])) return "unknown";
    return names[code];
}

int gb_wire_reject_code_ok(int code) {
    return (code >= GB__REJECT_CODE__REJECT_DECODE && code <= GB__REJECT_CODE__REJECT_INTERNAL) ||
           (code >= GB__REJECT_CODE__REJECT_LIMIT && code <= GB__REJECT_CODE__REJECT_DENIED);
}

int gb_wire_id_ok(const char *s) {
    if (!s) return 0;
    size_t n = strlen(s);
    if (n == 0 || n > GB_WIRE_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* SubmitRequest.request_id: none, or 16..64 of [0-9A-Za-z_-]. */
static int request_id_ok(const char *s) {
    if (!s || !*s) return 1;
    size_t n = 0;
    for (; s[n]; n++)
        if (!isalnum((unsigned char)s[n]) && s[n] != '_' && s[n] != '-') return 0;
    return n >= 16 && n <= 64;
}

/* A string field: present (protobuf-c gives "" for absent proto3 strings),
 * at most max bytes, at least min. */
static int str_ok(const char *s, size_t min, size_t max) {
    if (!s) return min == 0;
    size_t n = strnlen(s, max + 1);
    return n >= min && n <= max;
}

#define CHECK_STR(s, min, max, what)                                                               \
    do {                                                                                           \
        if (!str_ok((s), (min), (max)))                                                            \
            FAIL(RANGE, "%s: length must be %zu..%zu bytes", (what), (size_t)(min),                \
                 (size_t)(max));                                                                   \
    } while (0)

/* A one-line string shown to people (names, models, labels): str_ok and no
 * control character, C0, DEL or C1 (UTF-8 C2 80..9F), so that a peer
 * cannot put an escape sequence or a newline into a terminal or a log. */
size_t gb_wire_control_len(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    if (*p && (*p < 0x20 || *p == 0x7f)) return 1;
    return *p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f ? 2 : 0;
}

void gb_wire_line_clean(char *s) {
    for (char *p = s; *p;) {
        size_t n = gb_wire_control_len(p);
        if (!n) {
            p++;
            continue;
        }
        for (size_t i = 0; i < n; i++)
            p[i] = '?';
        p += n;
    }
}

int gb_wire_line_ok(const char *s, size_t min, size_t max) {
    if (!str_ok(s, min, max)) return 0;
    for (const char *p = s ? s : ""; *p; p++)
        if (gb_wire_control_len(p)) return 0;
    return 1;
}

#define CHECK_LINE(s, min, max, what)                                                              \
    do {                                                                                           \
        if (!gb_wire_line_ok((s), (min), (max)))                                                   \
            FAIL(RANGE, "%s: must be %zu..%zu bytes without control characters", (what),           \
                 (size_t)(min), (size_t)(max));                                                    \
    } while (0)

static int jobref_ok(const Gb__JobRef *r) {
    return r && r->job_id > 0 && r->attempt >= 1 && r->attempt <= GB_WIRE_ATTEMPT_MAX;
}

static int check_jobrefs(Gb__JobRef **refs, size_t n, const char *what, char *why, size_t whylen) {
    if (n > GB_WIRE_JOBREFS_MAX) FAIL(RANGE, "%s: more than %d entries", what, GB_WIRE_JOBREFS_MAX);
    for (size_t i = 0; i < n; i++)
        if (!jobref_ok(refs[i]))
            FAIL(RANGE, "%s[%zu]: job_id must be > 0 and attempt 1..%d", what, i,
                 GB_WIRE_ATTEMPT_MAX);
        else if (refs[i]->store_id && refs[i]->store_id[0] && !gb_wire_id_ok(refs[i]->store_id))
            FAIL(RANGE, "%s[%zu].store_id: 1..%d of [A-Za-z0-9._-], or none", what, i,
                 GB_WIRE_ID_MAX);
    return 0;
}

static int check_inventory(const Gb__Inventory *inv, char *why, size_t whylen) {
    if (!inv) FAIL(RANGE, "hello: inventory missing");
    CHECK_LINE(inv->hostname, 1, GB_WIRE_NAME_MAX, "inventory.hostname");
    CHECK_LINE(inv->cpu_model, 0, GB_WIRE_TEXT_MAX, "inventory.cpu_model");
    CHECK_LINE(inv->os, 0, GB_WIRE_TEXT_MAX, "inventory.os");
    CHECK_LINE(inv->kernel, 0, GB_WIRE_TEXT_MAX, "inventory.kernel");
    CHECK_LINE(inv->driver_version, 0, GB_WIRE_TEXT_MAX, "inventory.driver_version");
    CHECK_LINE(inv->cuda_driver_version, 0, GB_WIRE_TEXT_MAX, "inventory.cuda_driver_version");
    CHECK_STR(inv->nvml_error, 0, GB_WIRE_TEXT_MAX, "inventory.nvml_error");
    CHECK_LINE(inv->gpubench_version, 0, GB_WIRE_TEXT_MAX, "inventory.gpubench_version");
    if (inv->cpu_cores < 1 || inv->cpu_cores > 65536)
        FAIL(RANGE, "inventory.cpu_cores must be 1..65536");
    if (inv->n_gpus > GB_WIRE_GPUS_MAX)
        FAIL(RANGE, "inventory: more than %d GPUs", GB_WIRE_GPUS_MAX);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const Gb__Gpu *g = inv->gpus[i];
        if (!g) FAIL(RANGE, "inventory.gpus[%zu] missing", i);
        if (g->index != i) FAIL(RANGE, "inventory.gpus[%zu].index must be %zu", i, i);
        CHECK_LINE(g->name, 1, GB_WIRE_TEXT_MAX, "inventory.gpus.name");
        CHECK_LINE(g->uuid, 0, GB_WIRE_TEXT_MAX, "inventory.gpus.uuid");
        CHECK_LINE(g->pci_bus_id, 0, GB_WIRE_TEXT_MAX, "inventory.gpus.pci_bus_id");
        if (g->cc_major > 100 || g->cc_minor > 100 || g->pcie_gen > 100 || g->pcie_width > 64)
            FAIL(RANGE, "inventory.gpus[%zu]: capability or PCIe figures out of range", i);
    }
    size_t max_links = (size_t)GB_WIRE_GPUS_MAX * (GB_WIRE_GPUS_MAX - 1) / 2;
    if (inv->n_links > max_links) FAIL(RANGE, "inventory: more than %zu links", max_links);
    /* each pair once: the store keys a link by its pair, and a repeat
     * failed the node's insert, which rolled back the coordinator's whole
     * turn (everything else in it too) at every Hello of that agent */
    uint64_t seen[GB_WIRE_GPUS_MAX] = {0};
    for (size_t i = 0; i < inv->n_links; i++) {
        const Gb__Link *l = inv->links[i];
        if (!l) FAIL(RANGE, "inventory.links[%zu] missing", i);
        if (l->gpu_a >= l->gpu_b || l->gpu_b >= inv->n_gpus)
            FAIL(RANGE, "inventory.links[%zu]: need gpu_a < gpu_b < n_gpus", i);
        if (seen[l->gpu_a] & (1ULL << l->gpu_b))
            FAIL(RANGE, "inventory.links[%zu]: pair (%u,%u) listed twice", i, l->gpu_a, l->gpu_b);
        seen[l->gpu_a] |= 1ULL << l->gpu_b;
        if (l->nvlink_lanes > GB_WIRE_NVLINK_LANES_MAX)
            FAIL(RANGE, "inventory.links[%zu]: nvlink_lanes out of range", i);
        CHECK_LINE(l->pcie_path, 0, GB_WIRE_PCIE_PATH_MAX, "inventory.links.pcie_path");
    }
    if (inv->n_kinds > GB_WIRE_KINDS_MAX)
        FAIL(RANGE, "inventory: more than %d kinds", GB_WIRE_KINDS_MAX);
    for (size_t i = 0; i < inv->n_kinds; i++)
        CHECK_LINE(inv->kinds[i], 1, GB_WIRE_KIND_MAX, "inventory.kinds");
    if (inv->n_cpu_precisions > GB_WIRE_PRECISIONS_MAX)
        FAIL(RANGE, "inventory: more than %d CPU precisions", GB_WIRE_PRECISIONS_MAX);
    for (size_t i = 0; i < inv->n_cpu_precisions; i++)
        CHECK_LINE(inv->cpu_precisions[i], 1, GB_WIRE_PRECISION_MAX, "inventory.cpu_precisions");
    return 0;
}

static int check_hello(const Gb__Hello *h, char *why, size_t whylen) {
    if (!gb_wire_id_ok(h->agent_id))
        FAIL(RANGE, "hello.agent_id must be 1..%d characters of [A-Za-z0-9._-]", GB_WIRE_ID_MAX);
    CHECK_LINE(h->name, 1, GB_WIRE_NAME_MAX, "hello.name");
    if (!gb_utf8_ok(h->name)) FAIL(RANGE, "hello.name: not valid UTF-8");
    /* the views join a job's nodes with ',' (v_results.nodes), and
     * --nodes lists are split at ',' */
    if (strchr(h->name, ',')) FAIL(RANGE, "hello.name: a node name has no ','");
    if (h->n_labels > GB_WIRE_LABELS_MAX)
        FAIL(RANGE, "hello: more than %d labels", GB_WIRE_LABELS_MAX);
    for (size_t i = 0; i < h->n_labels; i++) {
        if (!h->labels[i]) FAIL(RANGE, "hello.labels[%zu] missing", i);
        CHECK_LINE(h->labels[i]->key, 1, GB_WIRE_LABEL_KEY, "hello.labels.key");
        CHECK_LINE(h->labels[i]->value, 0, GB_WIRE_LABEL_VAL, "hello.labels.value");
    }
    if (h->slots > GB_WIRE_SLOTS_MAX) FAIL(RANGE, "hello.slots must be 0..%d", GB_WIRE_SLOTS_MAX);
    /* later versions of the rendezvous keep speaking this one (a change an
     * old coordinator would misread bumps GB_PROTOCOL_VERSION instead) */
    if (h->rendezvous > 1000) FAIL(RANGE, "hello.rendezvous must be 0..1000");
    int rc = check_inventory(h->inventory, why, whylen);
    if (rc) return rc;
    rc = check_jobrefs(h->running, h->n_running, "hello.running", why, whylen);
    if (rc) return rc;
    return check_jobrefs(h->spooled, h->n_spooled, "hello.spooled", why, whylen);
}

/* The multi-node fields of an assignment: all zero for a one-node job;
 * otherwise a rank below n_nodes, a world of at least one device per node,
 * and rank 0's id on every other rank (rank 0 makes it, so it has none). */
static int check_assign_ranks(const Gb__JobAssign *a, char *why, size_t whylen) {
    if (a->n_nodes <= 1) {
        if (a->rank != 0 || a->world_size > 1 || a->unique_id.len != 0)
            FAIL(RANGE, "assign: rank fields on a one-node job");
        return 0;
    }
    if (a->n_nodes > GB_WIRE_NODES_MAX)
        FAIL(RANGE, "assign.n_nodes must be 1..%d", GB_WIRE_NODES_MAX);
    if (a->rank >= a->n_nodes) FAIL(RANGE, "assign.rank must be below n_nodes");
    if (a->world_size < a->n_nodes || a->world_size > GB_WIRE_NODES_MAX * 1024u ||
        a->world_size % a->n_nodes != 0)
        FAIL(RANGE, "assign.world_size must be a multiple of n_nodes (devices per node x n_nodes)");
    if (a->rank == 0 && a->unique_id.len != 0) FAIL(RANGE, "assign: rank 0 carries no unique id");
    if (a->rank > 0 && (a->unique_id.len < 1 || a->unique_id.len > GB_WIRE_UNIQUE_ID_MAX))
        FAIL(RANGE, "assign.unique_id must be 1..%d bytes on ranks > 0", GB_WIRE_UNIQUE_ID_MAX);
    return 0;
}

int gb_wire_validate(const Gb__Envelope *env, char *why, size_t whylen) {
    if (env->version != GB_PROTOCOL_VERSION)
        FAIL(GB__REJECT_CODE__REJECT_VERSION, "protocol version %u is not supported (this is %d)",
             env->version, GB_PROTOCOL_VERSION);
    switch (env->body_case) {
    case GB__ENVELOPE__BODY_HELLO:
        return check_hello(env->hello, why, whylen);
    case GB__ENVELOPE__BODY_WELCOME:
        if (env->welcome->heartbeat_ms < 10 || env->welcome->heartbeat_ms > 600000)
            FAIL(RANGE, "welcome.heartbeat_ms must be 10..600000");
        if (env->welcome->lost_after < 1 || env->welcome->lost_after > 1000)
            FAIL(RANGE, "welcome.lost_after must be 1..1000");
        CHECK_STR(env->welcome->coordinator_id, 0, GB_WIRE_ID_MAX, "welcome.coordinator_id");
        if (env->welcome->store_id && env->welcome->store_id[0] &&
            !gb_wire_id_ok(env->welcome->store_id))
            FAIL(RANGE, "welcome.store_id: 1..%d of [A-Za-z0-9._-], or none", GB_WIRE_ID_MAX);
        return 0;
    case GB__ENVELOPE__BODY_HEARTBEAT:
        if (env->heartbeat->spooled > 1000000) FAIL(RANGE, "heartbeat.spooled out of range");
        CHECK_LINE(env->heartbeat->unable, 0, GB_WIRE_UNABLE_MAX, "heartbeat.unable");
        if (check_jobrefs(env->heartbeat->running, env->heartbeat->n_running, "heartbeat.running",
                          why, whylen))
            return RANGE;
        return check_jobrefs(env->heartbeat->spooled_jobs, env->heartbeat->n_spooled_jobs,
                             "heartbeat.spooled_jobs", why, whylen);
    case GB__ENVELOPE__BODY_ASSIGN: {
        const Gb__JobAssign *a = env->assign;
        if (a->job_id == 0 || a->attempt < 1 || a->attempt > GB_WIRE_ATTEMPT_MAX)
            FAIL(RANGE, "assign: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        CHECK_STR(a->kind, 1, GB_WIRE_KIND_MAX, "assign.kind");
        CHECK_STR(a->params_json, 2, GB_WIRE_PARAMS_MAX, "assign.params_json");
        if (a->timeout_s < 1 || a->timeout_s > GB_WIRE_TIMEOUT_MAX)
            FAIL(RANGE, "assign.timeout_s must be 1..%u", GB_WIRE_TIMEOUT_MAX);
        return check_assign_ranks(a, why, whylen);
    }
    case GB__ENVELOPE__BODY_PROGRESS: {
        const Gb__Progress *p = env->progress;
        if (p->job_id == 0 || p->attempt < 1 || p->attempt > GB_WIRE_ATTEMPT_MAX)
            FAIL(RANGE, "progress: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        if (p->phase != GB__PHASE__PHASE_STARTED && p->phase != GB__PHASE__PHASE_REFUSED)
            FAIL(RANGE, "progress.phase %d is not a known phase", (int)p->phase);
        CHECK_STR(p->message, 0, GB_WIRE_ERROR_MAX, "progress.message");
        return 0;
    }
    case GB__ENVELOPE__BODY_RESULT: {
        const Gb__Result *r = env->result;
        if (r->job_id == 0 || r->attempt < 1 || r->attempt > GB_WIRE_ATTEMPT_MAX)
            FAIL(RANGE, "result: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        if (r->status < GB__RESULT_STATUS__RESULT_OK ||
            r->status > GB__RESULT_STATUS__RESULT_CANCELLED)
            FAIL(RANGE, "result.status %d is not a known status", (int)r->status);
        CHECK_STR(r->record_json, r->status == GB__RESULT_STATUS__RESULT_OK ? 2 : 0,
                  GB_WIRE_RECORD_MAX, "result.record_json");
        CHECK_STR(r->error, 0, GB_WIRE_ERROR_MAX, "result.error");
        CHECK_STR(r->output_tail, 0, GB_WIRE_TAIL_MAX, "result.output_tail");
        /* an outcome the agent lost is no outcome: it says failed, with no
         * record, for a coordinator that does not know the field */
        if (r->outcome_lost &&
            (r->status != GB__RESULT_STATUS__RESULT_FAILED || r->record_json[0] || !r->error[0]))
            FAIL(RANGE, "result.outcome_lost needs status failed, no record and an error");
        if (r->store_id && r->store_id[0] && !gb_wire_id_ok(r->store_id))
            FAIL(RANGE, "result.store_id: 1..%d of [A-Za-z0-9._-], or none", GB_WIRE_ID_MAX);
        /* agent-clock Unix ms, 0 for none: past year 9999 it is no time a
         * clock gives, and the store's ISO 8601 text broke */
        if (r->started_at_ms > GB_WIRE_UNIX_MS_MAX || r->finished_at_ms > GB_WIRE_UNIX_MS_MAX)
            FAIL(RANGE, "result: started_at_ms and finished_at_ms must be 0..%llu (year 9999)",
                 (unsigned long long)GB_WIRE_UNIX_MS_MAX);
        return 0;
    }
    case GB__ENVELOPE__BODY_RESULT_ACK:
        if (!jobref_ok(&(Gb__JobRef){.job_id = env->result_ack->job_id,
                                     .attempt = env->result_ack->attempt}))
            FAIL(RANGE, "result_ack: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        return 0;
    case GB__ENVELOPE__BODY_CANCEL:
        if (!jobref_ok(
                &(Gb__JobRef){.job_id = env->cancel->job_id, .attempt = env->cancel->attempt}))
            FAIL(RANGE, "cancel: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        CHECK_STR(env->cancel->reason, 0, GB_WIRE_TEXT_MAX, "cancel.reason");
        return 0;
    case GB__ENVELOPE__BODY_REJECT:
        if (!gb_wire_reject_code_ok((int)env->reject->code))
            FAIL(RANGE, "reject.code %d is not a known code", (int)env->reject->code);
        CHECK_STR(env->reject->reason, 0, GB_WIRE_ERROR_MAX, "reject.reason");
        return 0;
    case GB__ENVELOPE__BODY_SUBMIT:
        CHECK_STR(env->submit->spec_json, 1, GB_WIRE_SPEC_MAX, "submit.spec_json");
        if (!request_id_ok(env->submit->request_id))
            FAIL(RANGE, "submit.request_id: 16..64 characters of [0-9A-Za-z_-], or none");
        if (env->submit->only_if_made && (!env->submit->request_id || !env->submit->request_id[0]))
            FAIL(RANGE, "submit.only_if_made needs a request_id");
        return 0;
    case GB__ENVELOPE__BODY_SUBMIT_REPLY:
        if (env->submit_reply->sweep_id == 0) FAIL(RANGE, "submit_reply.sweep_id must be > 0");
        return 0;
    case GB__ENVELOPE__BODY_STATUS:
    case GB__ENVELOPE__BODY_NODES:
        return 0;
    case GB__ENVELOPE__BODY_STATUS_REPLY:
        for (size_t i = 0; i < env->status_reply->n_sweeps; i++) {
            const Gb__SweepStatus *s = env->status_reply->sweeps[i];
            if (!s || s->sweep_id == 0) FAIL(RANGE, "status_reply.sweeps[%zu] invalid", i);
            CHECK_LINE(s->name, 0, GB_WIRE_NAME_MAX, "status_reply.name");
            CHECK_LINE(s->state, 1, 16, "status_reply.state");
            CHECK_STR(s->created_at, 0, 40, "status_reply.created_at");
        }
        return 0;
    case GB__ENVELOPE__BODY_NODES_REPLY:
        for (size_t i = 0; i < env->nodes_reply->n_nodes; i++) {
            const Gb__NodeStatus *n = env->nodes_reply->nodes[i];
            if (!n || !gb_wire_id_ok(n->agent_id)) FAIL(RANGE, "nodes_reply.nodes[%zu] invalid", i);
            CHECK_LINE(n->name, 1, GB_WIRE_NAME_MAX, "nodes_reply.name");
            CHECK_LINE(n->state, 1, 16, "nodes_reply.state");
            CHECK_LINE(n->cpu_model, 0, GB_WIRE_TEXT_MAX, "nodes_reply.cpu_model");
            CHECK_LINE(n->gpu_model, 0, GB_WIRE_TEXT_MAX, "nodes_reply.gpu_model");
            CHECK_LINE(n->labels, 0, 8192, "nodes_reply.labels");
            CHECK_LINE(n->last_seen, 0, 40, "nodes_reply.last_seen");
            CHECK_LINE(n->unable, 0, GB_WIRE_UNABLE_MAX, "nodes_reply.unable");
        }
        return 0;
    case GB__ENVELOPE__BODY_CANCEL_REQUEST:
        if (env->cancel_request->sweep_id == 0) FAIL(RANGE, "cancel_request.sweep_id must be > 0");
        CHECK_LINE(env->cancel_request->reason, 0, GB_WIRE_TEXT_MAX, "cancel_request.reason");
        return 0;
    case GB__ENVELOPE__BODY_CANCEL_REPLY:
        return 0;
    case GB__ENVELOPE__BODY_FORGET:
        CHECK_LINE(env->forget->node, 1, GB_WIRE_NAME_MAX, "forget.node");
        return 0;
    case GB__ENVELOPE__BODY_FORGET_REPLY:
        if (env->forget_reply->n_agent_ids > 4096) FAIL(RANGE, "forget_reply: too many agents");
        for (size_t i = 0; i < env->forget_reply->n_agent_ids; i++)
            if (!gb_wire_id_ok(env->forget_reply->agent_ids[i]))
                FAIL(RANGE, "forget_reply.agent_ids[%zu] invalid", i);
        CHECK_STR(env->forget_reply->node_name, 0, GB_WIRE_NAME_MAX, "forget_reply.node_name");
        return 0;
    case GB__ENVELOPE__BODY_RANK_UPDATE: {
        const Gb__RankUpdate *u = env->rank_update;
        if (!jobref_ok(&(Gb__JobRef){.job_id = u->job_id, .attempt = u->attempt}))
            FAIL(RANGE, "rank_update: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        if (u->phase == GB__RANK_PHASE__RANK_ID) {
            if (u->unique_id.len < 1 || u->unique_id.len > GB_WIRE_UNIQUE_ID_MAX)
                FAIL(RANGE, "rank_update.unique_id must be 1..%d bytes", GB_WIRE_UNIQUE_ID_MAX);
        } else if (u->phase == GB__RANK_PHASE__RANK_READY) {
            if (u->unique_id.len != 0) FAIL(RANGE, "rank_update: a ready update carries no id");
        } else {
            FAIL(RANGE, "rank_update.phase %d is not a known phase", (int)u->phase);
        }
        return 0;
    }
    case GB__ENVELOPE__BODY_RANK_START:
        if (!jobref_ok(&(Gb__JobRef){.job_id = env->rank_start->job_id,
                                     .attempt = env->rank_start->attempt}))
            FAIL(RANGE, "rank_start: job_id must be > 0 and attempt 1..%d", GB_WIRE_ATTEMPT_MAX);
        if (env->rank_start->start_at_ms == 0) FAIL(RANGE, "rank_start.start_at_ms missing");
        return 0;
    default:
        FAIL(RANGE, "envelope has no body (or a body this version does not know)");
    }
}

/* protobuf-c keeps fields it does not know (a newer peer's), and it
 * accepts the tag of field number 0 written in two bytes (82 00) while it
 * refuses the same tag in one (02): such an envelope decodes, but packs into
 * bytes that do not. Field number 0 is not valid protobuf: it is refused
 * anywhere in the tree. Found by fuzz_envelope (tests/fuzz/regressions). */
static int field_zero(const ProtobufCMessage *m, int depth) {
    if (!m || depth > 8) return 0;
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0) return 1;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue; /* not the body this envelope holds */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (field_zero(v[k], depth + 1)) return 1;
        } else if (field_zero(*(ProtobufCMessage *const *)(base + f->offset), depth + 1)) {
            return 1;
        }
    }
    return 0;
}

int gb_wire_decode(const void *buf, size_t len, size_t max_frame, Gb__Envelope **out, uint64_t *seq,
                   char *why, size_t whylen) {
    *out = NULL;
    *seq = 0;
    if (len > max_frame)
        FAIL(GB__REJECT_CODE__REJECT_TOO_LARGE, "frame of %zu bytes is over the limit of %zu", len,
             max_frame);
    /* protobuf reads it as an envelope of version 0: say what it is */
    if (len == 0) FAIL(GB__REJECT_CODE__REJECT_DECODE, "an empty frame (no envelope)");
    Gb__Envelope *env = gb__envelope__unpack(NULL, len, buf);
    if (!env)
        FAIL(GB__REJECT_CODE__REJECT_DECODE, "frame of %zu bytes is not a gpubench envelope", len);
    *seq = env->seq;
    if (field_zero(&env->base, 0)) {
        gb__envelope__free_unpacked(env, NULL);
        FAIL(GB__REJECT_CODE__REJECT_DECODE, "frame of %zu bytes holds a field numbered 0", len);
    }
    int rc = gb_wire_validate(env, why, whylen);
    if (rc) {
        gb__envelope__free_unpacked(env, NULL);
        return rc;
    }
    *out = env;
    return 0;
}

void gb_wire_free(Gb__Envelope **env) {
    if (env && *env) {
        gb__envelope__free_unpacked(*env, NULL);
        *env = NULL;
    }
}

uint8_t *gb_wire_pack(Gb__Envelope *env, size_t *len) {
    env->version = GB_PROTOCOL_VERSION;
    size_t n = gb__envelope__get_packed_size(env);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    *len = gb__envelope__pack(env, buf);
    return buf;
}
