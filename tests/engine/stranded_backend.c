/* stranded_backend.c - a backend library with a planted fault, loaded as
 * the CUDA backend ($GB_CUDA_LIB) by test_stranded.py: the engine's driver,
 * the worker and `gpubench train` are the real ones under test.
 *
 * It stands for a failure no GPU-less machine can produce: one replica
 * fails while another is blocked where nothing wakes it (NCCL's blocking
 * ncclCommInitRank, whose peer will never arrive). Replica 0 fails with a
 * "(planted)" reason; replica 1 blocks in pause() for good. Where, is
 * $GB_PLANT_AT: "create" (the default), "step" (the first step), or
 * "none" (replica 1 fails too, 0.2 s later: the joined path). The
 * allreduce op does the same. It reports two devices named "planted".
 * A replica is known by its GPU (first_device + replica), so replica
 * processes (launch processes) plant the same faults as threads. With
 * $GB_PLANT_DESTROY_HANGS=1, replica 0 also blocks for good in its
 * destroy after its failure (a teardown that never ends: an NCCL abort
 * waiting on something that will not come). With $GB_PLANT_SAY_NCCL_DIR=1
 * each replica first prints the NCCL log directory its launcher gave it
 * ($GB_NCCL_LOG_DIR) and then meets the others (the unique id's
 * exchange, the start barrier), so that every replica has printed before
 * any fails. At "setup", replica 1 blocks for good before it is ready
 * (before the id's exchange) while replica 0 is ready and waits for the
 * start: the launcher's set-up deadline ($GB_REPLICA_SETUP_MS) ends it.
 */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int plant_at(const char *phase) {
    const char *e = getenv("GB_PLANT_AT");
    return strcmp(e && e[0] ? e : "create", phase) == 0 ||
           (e && strcmp(e, "none") == 0 && strcmp(phase, "create") == 0);
}

/* replica 0 fails; replica 1 never returns (or, at "none", fails later) */
static int planted(int replica, const char *phase, char *err, size_t errlen) {
    if (replica == 0) {
        snprintf(err, errlen, "replica 0's %s failed (planted)", phase);
        return -1;
    }
    const char *e = getenv("GB_PLANT_AT");
    if (e && strcmp(e, "none") == 0) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        snprintf(err, errlen, "replica 1 gave up after its peer failed (planted)");
        return -1;
    }
    fprintf(stderr, "planted: replica %d blocks in %s for good\n", replica, phase);
    for (;;)
        pause();
}

static int probe(gb_backend_info_t *info, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    snprintf(info->device_model, sizeof(info->device_model), "planted");
    info->device_count = 2;
    snprintf(info->versions, sizeof(info->versions), "{\"planted\":\"1\"}");
    return 0;
}

typedef struct {
    int replica;
} state_t;

static int make_id(void *arg, unsigned char *id, size_t *len, char *err, size_t errlen) {
    (void)arg;
    (void)err;
    (void)errlen;
    memcpy(id, "planted", 7);
    *len = 7;
    return 0;
}

static int create(const gb_model_t *m, const gb_train_config_t *cfg, int replica, gb_comm_t *comm,
                  void **state, char *err, size_t errlen) {
    (void)m;
    /* which replica of the node: a replica process has replica 0 of
     * GPU first_device (kernels/launch.h) */
    replica += cfg->first_device;
    const char *say = getenv("GB_PLANT_SAY_NCCL_DIR");
    if (say && strcmp(say, "1") == 0 && comm) {
        const char *dir = getenv("GB_NCCL_LOG_DIR");
        fprintf(stderr, "planted: replica %d NCCL log dir %s\n", replica, dir ? dir : "(none)");
        unsigned char id[GB_DIST_ID_MAX];
        size_t len = 0;
        if (gb_comm_exchange_id(comm, make_id, NULL, id, &len, err, errlen)) return -1;
    }
    const char *at = getenv("GB_PLANT_AT");
    if (at && strcmp(at, "setup") == 0 && comm) {
        /* replica 1 never becomes ready (a hung mount, a driver call that
         * never returns); replica 0 is ready and waits for the start */
        if (replica == 1) {
            fprintf(stderr, "planted: replica 1 blocks in its set-up for good\n");
            for (;;)
                pause();
        }
        unsigned char id[GB_DIST_ID_MAX];
        size_t len = 0;
        if (gb_comm_exchange_id(comm, make_id, NULL, id, &len, err, errlen)) return -1;
    }
    if (plant_at("create")) return planted(replica, "create", err, errlen);
    state_t *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->replica = replica;
    *state = s;
    return 0;
}

static int set_state(void *state, const float *params, const float *buffers, int64_t nbt, char *err,
                     size_t errlen) {
    (void)state;
    (void)params;
    (void)buffers;
    (void)nbt;
    (void)err;
    (void)errlen;
    return 0;
}

static int get_state(void *state, float *params, float *buffers, int64_t *nbt, char *err,
                     size_t errlen) {
    (void)state;
    (void)params;
    (void)buffers;
    (void)nbt;
    snprintf(err, errlen, "the planted backend keeps no state");
    return -1;
}

static int get_grads(void *state, float *grads, char *err, size_t errlen) {
    (void)state;
    (void)grads;
    snprintf(err, errlen, "the planted backend keeps no gradients");
    return -1;
}

static int set_batch(void *state, const float *images, const int32_t *labels, char *err,
                     size_t errlen) {
    (void)state;
    (void)images;
    (void)labels;
    (void)err;
    (void)errlen;
    return 0;
}

static int step(void *state, gb_step_out_t *out, char *err, size_t errlen) {
    (void)out;
    return planted(((state_t *)state)->replica, "step", err, errlen);
}

static int report(void *state, gb_replica_report_t *rep, char *err, size_t errlen) {
    (void)state;
    (void)rep;
    snprintf(err, errlen, "the planted backend has no report");
    return -1;
}

static void destroy(void **state) {
    const char *e = getenv("GB_PLANT_DESTROY_HANGS");
    if (*state && ((state_t *)*state)->replica == 0 && e && strcmp(e, "1") == 0) {
        fprintf(stderr, "planted: replica 0 blocks in destroy for good\n");
        for (;;)
            pause();
    }
    free(*state);
    *state = NULL;
}

static int allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                     gb_allreduce_size_t *sizes, int n, char **details_json, char *err,
                     size_t errlen) {
    (void)comm;
    (void)cfg;
    (void)sizes;
    (void)n;
    (void)details_json;
    if (!plant_at("create")) {
        snprintf(err, errlen, "the planted allreduce plants only at create");
        return -1;
    }
    return planted(replica, "communicator", err, errlen);
}

const gb_backend_ops_t gb_cuda_backend_ops = {
    .abi = GB_BACKEND_ABI,
    .name = "cuda",
    .probe = probe,
    .create = create,
    .set_state = set_state,
    .get_state = get_state,
    .get_grads = get_grads,
    .set_batch = set_batch,
    .step = step,
    .report = report,
    .destroy = destroy,
    .gemm = NULL,
    .allreduce = allreduce,
};
