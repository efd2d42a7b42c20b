/* gen_envelopes.c - writes the seed corpus of fuzz_envelope: one valid
 * envelope of every body the protocol has (and a few near misses), packed
 * as the peers pack them. Run once and commit its output:
 *   gen_envelopes tests/fuzz/corpus/envelope */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;

static void put(const char *name, Gb__Envelope *env, uint32_t version) {
    env->version = version;
    size_t n = gb__envelope__get_packed_size(env);
    uint8_t *buf = malloc(n + 1);
    CHECK(buf);
    gb__envelope__pack(env, buf);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECKF(f, "%s", path);
    CHECK(fwrite(buf, 1, n, f) == n);
    fclose(f);
    free(buf);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    dir = argv[1];
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = 42;

    Gb__Gpu g0 = GB__GPU__INIT, g1 = GB__GPU__INIT, *gp[2] = {&g0, &g1};
    g0.index = 0;
    g0.name = "NVIDIA H100 80GB HBM3";
    g0.uuid = "GPU-0";
    g0.memory_bytes = 85899345920ull;
    g0.sm_count = 132;
    g0.cc_major = 9;
    g1 = g0;
    g1.index = 1;
    Gb__Link l = GB__LINK__INIT, *lp[1] = {&l};
    l.gpu_a = 0;
    l.gpu_b = 1;
    l.nvlink_lanes = 18;
    l.pcie_path = "numa_node";
    char *kinds[] = {"gemm", "resnet50", "sleep"};
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = "dgx-01";
    inv.cpu_model = "AMD EPYC";
    inv.cpu_cores = 128;
    inv.n_gpus = 2;
    inv.gpus = gp;
    inv.n_links = 1;
    inv.links = lp;
    inv.n_kinds = 3;
    inv.kinds = kinds;
    char *precs[] = {"fp32", "bf16"};
    inv.n_cpu_precisions = 2;
    inv.cpu_precisions = precs;
    Gb__Label lab = GB__LABEL__INIT, *labp[1] = {&lab};
    lab.key = "rack";
    lab.value = "a";
    Gb__JobRef ref = GB__JOB_REF__INIT, *refp[1] = {&ref};
    ref.job_id = 7;
    ref.attempt = 1;
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = "0123456789abcdef";
    h.name = "dgx-01";
    h.n_labels = 1;
    h.labels = labp;
    h.inventory = &inv;
    h.n_running = 1;
    h.running = refp;
    h.n_spooled = 1;
    h.spooled = refp;
    h.slots = 2;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    put("hello", &env, 1);
    put("hello_version_2", &env, 2);
    h.rendezvous = 1; /* issue 5: speaks the multi-node rendezvous */
    put("hello_rendezvous", &env, 1);

    Gb__Welcome w = GB__WELCOME__INIT;
    w.heartbeat_ms = 1000;
    w.lost_after = 5;
    w.coordinator_id = "abcdef";
    env.body_case = GB__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    put("welcome", &env, 1);

    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    hb.n_running = 1;
    hb.running = refp;
    hb.spooled = 1;
    hb.n_spooled_jobs = 1;
    hb.spooled_jobs = refp;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    put("heartbeat", &env, 1);

    Gb__JobAssign as = GB__JOB_ASSIGN__INIT;
    as.job_id = 7;
    as.attempt = 1;
    as.sweep_id = 1;
    as.kind = "sleep";
    as.params_json = "{\"kind\":\"sleep\",\"duration_ms\":100}";
    as.timeout_s = 60;
    env.body_case = GB__ENVELOPE__BODY_ASSIGN;
    env.assign = &as;
    put("assign", &env, 1);
    /* issue 5: rank 1 of a two-node job, with rank 0's id */
    static uint8_t id[44] = {'G', 'B', 'S', 'L', 'E', 'E', 'P', '1'};
    as.params_json = "{\"kind\":\"sleep\",\"duration_ms\":100,\"n_nodes\":2}";
    as.rank = 1;
    as.n_nodes = 2;
    as.world_size = 2;
    as.unique_id.data = id;
    as.unique_id.len = sizeof id;
    put("assign_rank", &env, 1);

    Gb__RankUpdate ru = GB__RANK_UPDATE__INIT;
    ru.job_id = 7;
    ru.attempt = 1;
    ru.phase = GB__RANK_PHASE__RANK_ID;
    ru.unique_id.data = id;
    ru.unique_id.len = sizeof id;
    env.body_case = GB__ENVELOPE__BODY_RANK_UPDATE;
    env.rank_update = &ru;
    put("rank_update_id", &env, 1);
    ru.phase = GB__RANK_PHASE__RANK_READY;
    ru.unique_id.len = 0;
    put("rank_update_ready", &env, 1);

    Gb__RankStart rs = GB__RANK_START__INIT;
    rs.job_id = 7;
    rs.attempt = 1;
    rs.start_at_ms = 1700000000200ull;
    env.body_case = GB__ENVELOPE__BODY_RANK_START;
    env.rank_start = &rs;
    put("rank_start", &env, 1);

    Gb__Progress pr = GB__PROGRESS__INIT;
    pr.job_id = 7;
    pr.attempt = 1;
    pr.phase = GB__PHASE__PHASE_REFUSED;
    pr.message = "busy";
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &pr;
    put("progress", &env, 1);

    Gb__Result r = GB__RESULT__INIT;
    r.job_id = 7;
    r.attempt = 1;
    r.status = GB__RESULT_STATUS__RESULT_OK;
    r.record_json = "{\"kind\":\"sleep\",\"backend\":\"cpu\",\"valid\":true}";
    r.output_tail = "worker: job 7 attempt 1\n";
    r.started_at_ms = 1700000000000ull;
    r.finished_at_ms = 1700000000100ull;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = &r;
    put("result", &env, 1);
    r.status = GB__RESULT_STATUS__RESULT_CRASHED;
    r.record_json = "";
    r.error = "worker killed by signal 9";
    r.exit_code = -9;
    put("result_crashed", &env, 1);

    Gb__ResultAck ack = GB__RESULT_ACK__INIT;
    ack.job_id = 7;
    ack.attempt = 1;
    env.body_case = GB__ENVELOPE__BODY_RESULT_ACK;
    env.result_ack = &ack;
    put("result_ack", &env, 1);

    Gb__Cancel cn = GB__CANCEL__INIT;
    cn.job_id = 7;
    cn.attempt = 1;
    cn.reason = "stopped: the multi-node attempt ended (rank 1 failed)";
    env.body_case = GB__ENVELOPE__BODY_CANCEL;
    env.cancel = &cn;
    put("cancel", &env, 1);

    Gb__Reject rj = GB__REJECT__INIT;
    rj.code = GB__REJECT_CODE__REJECT_RATE;
    rj.reason = "rate limit";
    rj.ref_seq = 41;
    env.body_case = GB__ENVELOPE__BODY_REJECT;
    env.reject = &rj;
    put("reject", &env, 1);

    Gb__SubmitRequest sr = GB__SUBMIT_REQUEST__INIT;
    sr.spec_json = "{\"kind\":\"sleep\",\"repeat\":3}";
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &sr;
    put("submit", &env, 1);

    Gb__SubmitReply srp = GB__SUBMIT_REPLY__INIT;
    srp.sweep_id = 1;
    srp.n_jobs = 3;
    env.body_case = GB__ENVELOPE__BODY_SUBMIT_REPLY;
    env.submit_reply = &srp;
    put("submit_reply", &env, 1);

    Gb__StatusRequest st = GB__STATUS_REQUEST__INIT;
    st.sweep_id = 1;
    env.body_case = GB__ENVELOPE__BODY_STATUS;
    env.status = &st;
    put("status", &env, 1);

    Gb__SweepStatus ss = GB__SWEEP_STATUS__INIT, *ssp[1] = {&ss};
    ss.sweep_id = 1;
    ss.name = "x";
    ss.state = "running";
    ss.total = 3;
    ss.created_at = "2024-01-01T00:00:00.000Z";
    Gb__StatusReply str = GB__STATUS_REPLY__INIT;
    str.n_sweeps = 1;
    str.sweeps = ssp;
    env.body_case = GB__ENVELOPE__BODY_STATUS_REPLY;
    env.status_reply = &str;
    put("status_reply", &env, 1);

    Gb__NodesRequest nq = GB__NODES_REQUEST__INIT;
    env.body_case = GB__ENVELOPE__BODY_NODES;
    env.nodes = &nq;
    put("nodes", &env, 1);

    Gb__NodeStatus ns = GB__NODE_STATUS__INIT, *nsp[1] = {&ns};
    ns.agent_id = "0123456789abcdef";
    ns.name = "dgx-01";
    ns.state = "connected";
    Gb__NodesReply nr = GB__NODES_REPLY__INIT;
    nr.n_nodes = 1;
    nr.nodes = nsp;
    env.body_case = GB__ENVELOPE__BODY_NODES_REPLY;
    env.nodes_reply = &nr;
    put("nodes_reply", &env, 1);

    Gb__CancelRequest cr = GB__CANCEL_REQUEST__INIT;
    cr.sweep_id = 1;
    cr.job_id = 7;
    env.body_case = GB__ENVELOPE__BODY_CANCEL_REQUEST;
    env.cancel_request = &cr;
    put("cancel_request", &env, 1);

    Gb__CancelReply crp = GB__CANCEL_REPLY__INIT;
    crp.cancelled = 1;
    env.body_case = GB__ENVELOPE__BODY_CANCEL_REPLY;
    env.cancel_reply = &crp;
    put("cancel_reply", &env, 1);

    Gb__ForgetRequest fq = GB__FORGET_REQUEST__INIT;
    fq.node = "node-b";
    env.body_case = GB__ENVELOPE__BODY_FORGET;
    env.forget = &fq;
    put("forget", &env, 1);

    Gb__ForgetReply fr = GB__FORGET_REPLY__INIT;
    char *fids[] = {"a1b2c3"};
    fr.n_agent_ids = 1;
    fr.agent_ids = fids;
    fr.requeued = 1;
    fr.failed = 2;
    env.body_case = GB__ENVELOPE__BODY_FORGET_REPLY;
    env.forget_reply = &fr;
    put("forget_reply", &env, 1);

    env.body_case = GB__ENVELOPE__BODY__NOT_SET;
    put("no_body", &env, 1);
    printf("corpus written to %s\n", dir);
    return 0;
}
