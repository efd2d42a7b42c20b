/* test_graph_agree.c - kernels/cuda/net.c's CUDA-graph decision in a
 * data-parallel job: every rank graphs or none does. NCCL needs a collective
 * captured on every rank or on none; a rank replaying a graph while a peer
 * steps eagerly waits in NCCL for ever. The host twin's executor stands in
 * for the GPU's, with capture ops that say what happened and an agreement
 * that answers as the job's other ranks would (on a GPU, gb_cuda_dp_agree:
 * a min over the ranks with NCCL). Cases: all capture (replayed from the
 * second step on); this rank captures and a peer does not (its graph is not
 * used: eager steps); this rank's capture fails to start (it still takes
 * part in the agreement, or its peers would wait); the agreement itself
 * fails (a peer gone: the step fails with the reason, which still says
 * so to the coordinator, gb_peer.h). */
#include "check.h"
#include "gb_peer.h"
#include "host_exec.h"
#include "model.h"
#include "net.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int begin_fails; /* capture_begin returns -1 */
    int peers;       /* what the other ranks say: 1 all have graphs, 0 one has not, -1 gone */
    int begins, ends, agrees, agreed_with, replays, eager;
    const gb_exec_ops_t *real;
} S;

static int t_capture_begin(gb_exec_t *ex) {
    (void)ex;
    S.begins++;
    return S.begin_fails ? -1 : 0;
}

static int t_capture_end(gb_exec_t *ex, int ok) {
    (void)ex;
    S.ends++;
    return ok ? 0 : -1;
}

static int t_agree(gb_exec_t *ex, int have) {
    S.agrees++;
    S.agreed_with = have;
    if (S.peers < 0) {
        snprintf(ex->err, sizeof(ex->err),
                 "NCCL failed asynchronously: " GB_PEER_GONE "remote process exited");
        return -1;
    }
    return have && S.peers;
}

static int t_replay(gb_exec_t *ex, gb_step_out_t *out) {
    S.replays++;
    return S.real->step_end(ex, out);
}

static int t_step_begin(gb_exec_t *ex) {
    S.eager++;
    return S.real->step_begin(ex);
}

static void run(int begin_fails, int peers, int steps) {
    memset(&S, 0, sizeof(S));
    S.begin_fails = begin_fails;
    S.peers = peers;
    gb_model_config_t mc;
    gb_model_config_resnet50(&mc, 16);
    for (int i = 0; i < 4; i++)
        mc.layers[i] = 1;
    mc.base_width = 4;
    mc.n_classes = 5;
    char err[GB_ERR_LEN];
    gb_model_t *m = gb_model_new(&mc, err, sizeof(err));
    CHECKF(m, "%s", err);
    gb_train_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.precision = GB_PREC_FP32;
    cfg.model = mc;
    cfg.batch = 2;
    cfg.devices = 1;
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    gb_plan_t *p = gb_plan_new(m, 2, sizeof(double), GB_PLAN_STEM_C, err, sizeof(err));
    CHECKF(p, "%s", err);
    gb_exec_t *ex = gb_host_exec_new(p, &cfg, err, sizeof(err));
    CHECKF(ex, "%s", err);
    static gb_exec_ops_t ops;
    S.real = ex->ops;
    ops = *ex->ops;
    ops.capture_begin = t_capture_begin;
    ops.capture_end = t_capture_end;
    ops.graph_agree = t_agree;
    ops.replay = t_replay;
    ops.step_begin = t_step_begin;
    ex->ops = &ops;
    gb_net_t *net = gb_net_new(&p, &ex, 1, 1, err, sizeof(err));
    CHECKF(net, "%s", err);
    float *params = malloc(m->n_params * sizeof(float));
    float *buffers = malloc(m->n_buffers * sizeof(float));
    CHECK(params && buffers);
    gb_model_init(m, params, buffers, 3);
    CHECKF(gb_net_set_state(net, params, buffers, 0, err, sizeof(err)) == 0, "%s", err);
    CHECKF(gb_net_set_batch(net, NULL, NULL, err, sizeof(err)) == 0, "%s", err);
    int failed_at = -1;
    for (int s = 0; s < steps; s++) {
        gb_step_out_t out;
        err[0] = 0;
        if (gb_net_step(net, &out, err, sizeof(err)) != 0) {
            failed_at = s;
            break;
        }
    }
    if (peers < 0) {
        /* a peer gone: the second step (the capture's) fails with why */
        CHECKF(failed_at == 1 && strstr(err, "remote process exited") && gb_peer_gone(err),
               "failed at %d: %s", failed_at, err);
    } else {
        CHECKF(failed_at < 0, "step %d failed: %s", failed_at, err);
    }
    free(params);
    free(buffers);
    gb_net_destroy(&net);
    gb_model_destroy(&m);
}

int main(void) {
    /* every rank captured: the agreement is asked once, then replays */
    run(0, 1, 4);
    CHECKF(S.begins == 1 && S.ends == 1 && S.agrees == 1 && S.agreed_with == 1, "%d %d %d %d",
           S.begins, S.ends, S.agrees, S.agreed_with);
    CHECKF(S.replays == 3 && S.eager == 1, "replays %d eager %d", S.replays, S.eager);
    /* captured here, not by a peer: no replay, every step eager */
    run(0, 0, 4);
    CHECKF(S.agrees == 1 && S.agreed_with == 1, "%d %d", S.agrees, S.agreed_with);
    CHECKF(S.replays == 0 && S.eager == 4, "replays %d eager %d", S.replays, S.eager);
    /* the capture did not start here: the agreement is still taken, with 0 */
    run(1, 1, 4);
    CHECKF(S.begins == 1 && S.ends == 0 && S.agrees == 1 && S.agreed_with == 0, "%d %d %d %d",
           S.begins, S.ends, S.agrees, S.agreed_with);
    CHECKF(S.replays == 0 && S.eager == 4, "replays %d eager %d", S.replays, S.eager);
    /* the agreement fails (a peer gone): the step fails, nothing replays */
    run(0, -1, 4);
    CHECKF(S.agrees == 1 && S.replays == 0, "agrees %d replays %d", S.agrees, S.replays);
    printf("graph agreement: all or none, and a failed agreement fails the step\n");
    return 0;
}
