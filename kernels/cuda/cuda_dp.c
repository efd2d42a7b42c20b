/* cuda_dp.c - see cuda_dp.h. */
#define _POSIX_C_SOURCE 200809L
#include "cuda_dp.h"

#include "buckets.h"
#include "cuda_check.h"
#include "kernels.h"
#include "nccl_log.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_LOCAL 64 /* GPUs of one node */

/* ------------------------------------------------- NVLink, through NVML */

/* The few NVML entry points NVLink discovery needs, loaded with dlopen
 * (there is no nvml.h on the build machines). Layouts mirror nvml.h
 * byte for byte, as agent/nvml_dl.h does for the agent's inventory.
 * Compared (2026-12-04) with nvml.h as NVIDIA/go-nvml vendors it
 * (gen/nvml/nvml.h at 8b8585bde8bb, CUDA 13.3): nvml_pci is
 * nvmlPciInfo_t (68 bytes, busId at 36), NVML_NVLINK_MAX_LINKS is 36, the
 * far-end types GPU 0 and SWITCH 2, and the six symbols' names, version
 * suffixes and arguments match (an int for the 4-byte enums). */
typedef int nvml_ret_t;
typedef struct nvmlDevice_st *nvml_dev_t;
typedef struct nvml_pci {
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_t;
#define NVML_LINKS       36 /* NVML_NVLINK_MAX_LINKS of CUDA 13.3's nvml.h (18 before) */
#define NVML_LINK_GPU    0  /* nvmlIntNvLinkDeviceType_t: a GPU */
#define NVML_LINK_SWITCH 2  /* nvmlIntNvLinkDeviceType_t: an NVSwitch */

int gb_nvlink_verdict(int n, const unsigned char *adj, const unsigned char *sw, int *any, char *why,
                      size_t whylen) {
    int all = 1;
    *any = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (adj[i * n + j] || (sw[i] && sw[j])) {
                *any = 1;
            } else if (all) {
                snprintf(why, whylen, "GPUs %d and %d have no NVLink between them", i, j);
                all = 0;
            }
        }
    return all;
}

/* 1: NVLink joins every pair of GPUs 0..n-1 (a direct link, or both on
 * NVSwitches); 0: some pair has none (why names it); -1: NVML cannot tell.
 * *any: 1 when some pair has NVLink (bridged pairs), 0 when none, -1 when
 * NVML cannot tell. */
static int nvlink_all_pairs(int n, int *any, char *why, size_t whylen) {
    *any = -1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, whylen, "NVML not loaded (%s)", e ? e : "libnvidia-ml.so.1");
        return -1;
    }
    nvml_ret_t (*init)(void) = (nvml_ret_t(*)(void))dlsym(lib, "nvmlInit_v2");
    nvml_ret_t (*shut)(void) = (nvml_ret_t(*)(void))dlsym(lib, "nvmlShutdown");
    nvml_ret_t (*by_bus)(const char *, nvml_dev_t *) =
        (nvml_ret_t(*)(const char *, nvml_dev_t *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_ret_t (*state)(nvml_dev_t, unsigned, int *) =
        (nvml_ret_t(*)(nvml_dev_t, unsigned, int *))dlsym(lib, "nvmlDeviceGetNvLinkState");
    nvml_ret_t (*remote)(nvml_dev_t, unsigned, nvml_pci_t *) = (nvml_ret_t(*)(
        nvml_dev_t, unsigned, nvml_pci_t *))dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvml_ret_t (*rtype)(nvml_dev_t, unsigned, int *) =
        (nvml_ret_t(*)(nvml_dev_t, unsigned, int *))dlsym(lib,
                                                          "nvmlDeviceGetNvLinkRemoteDeviceType");
    int rc = -1;
    if (!init || !shut || !by_bus || !state || !remote) {
        snprintf(why, whylen, "NVML lacks the NVLink queries");
        dlclose(lib);
        return -1;
    }
    if (init() != 0) {
        snprintf(why, whylen, "nvmlInit failed");
        dlclose(lib);
        return -1;
    }
    nvml_dev_t h[MAX_LOCAL];
    unsigned dom[MAX_LOCAL], bus[MAX_LOCAL], dv[MAX_LOCAL];
    static unsigned char adj[MAX_LOCAL * MAX_LOCAL];
    unsigned char sw[MAX_LOCAL] = {0};
    memset(adj, 0, sizeof(adj));
    for (int i = 0; i < n; i++) {
        char id[32];
        unsigned fn = 0;
        if (cudaDeviceGetPCIBusId(id, sizeof(id), i) != cudaSuccess ||
            sscanf(id, "%x:%x:%x.%x", &dom[i], &bus[i], &dv[i], &fn) != 4 ||
            by_bus(id, &h[i]) != 0) {
            (void)cudaGetLastError();
            snprintf(why, whylen, "NVML does not know GPU %d", i);
            goto done;
        }
    }
    for (int i = 0; i < n; i++) {
        for (unsigned l = 0; l < NVML_LINKS; l++) {
            int on = 0;
            nvml_pci_t pci;
            if (state(h[i], l, &on) != 0 || !on) continue;
            /* as the agent's inventory reads it (agent/inventory.c): the far
             * end's type first; a switch needs no PCI id */
            int t = -1, typed = rtype && rtype(h[i], l, &t) == 0;
            if (typed && t == NVML_LINK_SWITCH) {
                sw[i] = 1;
                continue;
            }
            if (typed && t != NVML_LINK_GPU) continue; /* a CPU, or unknown */
            memset(&pci, 0, sizeof(pci));
            if (remote(h[i], l, &pci) != 0) continue;
            int j = -1;
            for (int k = 0; k < n; k++)
                if (k != i && pci.domain == dom[k] && pci.bus == bus[k] && pci.device == dv[k])
                    j = k;
            if (j >= 0)
                adj[i * n + j] = adj[j * n + i] = 1;
            else if (!typed)
                sw[i] = 1; /* without the type, a far end not ours is taken for a switch */
        }
    }
    rc = gb_nvlink_verdict(n, adj, sw, any, why, whylen);
done:
    shut();
    dlclose(lib);
    return rc;
}

/* ------------------------------------------- NCCL's environment, once */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int done;
    char mode[16];
    int n_local; /* the GPUs of this process the set-up was made for */
    int nvlink;
    int p2p_off;
    char why[256];
    char logdir[256];
} g;

int gb_cuda_nccl_setup(const char *interconnect, int n_local, int *nvlink, char *err,
                       size_t errlen) {
    int rc = -1;
    pthread_mutex_lock(&g_mu);
    if (n_local > MAX_LOCAL) {
        snprintf(err, errlen, "%d GPUs in one process (at most %d)", n_local, MAX_LOCAL);
        goto out;
    }
    if (g.done) {
        if (strcmp(g.mode, interconnect) != 0) {
            snprintf(err, errlen,
                     "this process set NCCL up for interconnect %s; NCCL reads its environment "
                     "once, so %s needs a process of its own",
                     g.mode, interconnect);
            goto out;
        }
        if (n_local != g.n_local && strcmp(interconnect, "auto") != 0) {
            /* nvlink's check and pcie's switch were made for those GPUs */
            snprintf(err, errlen,
                     "this process set NCCL up for interconnect %s over %d GPU(s); %d GPU(s) "
                     "need a process of their own",
                     interconnect, g.n_local, n_local);
            goto out;
        }
        if (n_local != g.n_local) { /* auto: nothing was set; what NVML says, for the report */
            char why[256];
            int any;
            *nvlink = n_local >= 2 ? nvlink_all_pairs(n_local, &any, why, sizeof(why)) : 0;
        } else {
            *nvlink = g.nvlink;
        }
        rc = 0;
        goto out;
    }
    int any = 0;
    g.nvlink = n_local >= 2 ? nvlink_all_pairs(n_local, &any, g.why, sizeof(g.why)) : 0;
    if (n_local < 2) snprintf(g.why, sizeof(g.why), "one GPU in this process");
    if (strcmp(interconnect, "nvlink") == 0 && n_local >= 2 && g.nvlink != 1) {
        snprintf(err, errlen, "interconnect nvlink asked for, but %s%s",
                 g.nvlink < 0 ? "whether NVLink joins the GPUs cannot be told: " : "", g.why);
        goto out;
    }
    if (strcmp(interconnect, "pcie") == 0 && any != 0) {
        /* NCCL has one switch for P2P over NVLink and over PCIe: with NVLink
         * present (or not known absent) P2P goes off entirely, and with it
         * NVLink SHARP; the traffic goes through host memory. NVLink between
         * some pairs only (PCIe cards bridged two by two) is NVLink present:
         * NCCL would take the bridges where it can */
        setenv("NCCL_P2P_DISABLE", "1", 1);
        setenv("NCCL_NVLS_ENABLE", "0", 1);
        /* with P2P off NCCL may take a node's own NICs (GPUDirect RDMA,
         * a NIC beside each GPU on HGX boards) between its GPUs, not host
         * memory: loopback through the network would be measured as pcie;
         * nor route to another node through a peer GPU over NVLink (PXN) */
        setenv("NCCL_NET_DISABLE_INTRA", "1", 1);
        setenv("NCCL_PXN_DISABLE", "1", 1);
        g.p2p_off = 1;
    }
    /* its path goes into the result's JSON unescaped, and NCCL_DEBUG_FILE
     * reads '%' as its own: nccl_log.c passes over a TMPDIR holding either */
    if (gb_nccl_log_newdir(g.logdir, sizeof(g.logdir), err, errlen) < 0) goto out;
    char file[300];
    snprintf(file, sizeof(file), "%s/nccl.%%h.%%p.log", g.logdir);
    /* INFO is what the transports are read from; a user's TRACE says more
     * and is kept (WARN or VERSION would say too little) */
    const char *dbg = getenv("NCCL_DEBUG");
    if (!dbg || strcasecmp(dbg, "TRACE") != 0) setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET,GRAPH", 1);
    /* NCCL 2.22+ connects an algorithm's peers at its first collective
     * (NCCL_RUNTIME_CONNECT=1, its default): a host-side exchange inside
     * ncclAllReduce that nothing of ours polls, so a replica that failed
     * before its first collective would leave the others blocked there
     * until the job's deadline. Connected in ncclCommInitRank instead, where
     * every rank is anyway (more memory for connections never used); a
     * user's setting is kept */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    setenv("NCCL_DEBUG_FILE", file, 1);
    snprintf(g.mode, sizeof(g.mode), "%s", interconnect);
    g.n_local = n_local;
    g.done = 1;
    *nvlink = g.nvlink;
    rc = 0;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* What NCCL said it used: the record's interconnect and transports. */
static void nccl_report(int world, int nvlink, const char **ic, char *transports, size_t len,
                        int *connections) {
    gb_nccl_report_t r;
    char why[256];
    gb_nccl_report_init(&r);
    pthread_mutex_lock(&g_mu);
    if (g.done) (void)gb_nccl_log_dir(&r, g.logdir, "nccl.", why, sizeof(why));
    pthread_mutex_unlock(&g_mu);
    *ic = world > 1 ? gb_nccl_interconnect(&r, nvlink == 1) : "none";
    if (gb_nccl_transports_json(&r, transports, len) != 0) snprintf(transports, len, "[]");
    *connections = r.connections;
}

/* gb_cuda_nccl_setup for the replicas of this process: changed by replica
 * 0 while every replica is parked at the local barrier (setenv is not safe
 * against another thread's getenv, and cuDNN and CUDA read theirs).
 * n_node: the job's GPUs on this node, whose links decide it (a replica
 * process has one of them: kernels/launch.h) */
static int setup_parked(gb_comm_t *comm, int n_node, const char *interconnect, int *nvlink,
                        char *err, size_t errlen) {
    int rc = 0;
    if (n_node < comm->local_size) n_node = comm->local_size;
    if (gb_comm_local_barrier(comm, err, errlen)) return -1;
    if (comm->local_rank == 0) rc = gb_cuda_nccl_setup(interconnect, n_node, nvlink, err, errlen);
    if (rc) {
        gb_comm_abort(comm, err);
        return -1;
    }
    if (gb_comm_local_barrier(comm, err, errlen)) return -1;
    return comm->local_rank == 0 ? 0
                                 : gb_cuda_nccl_setup(interconnect, n_node, nvlink, err, errlen);
}

static int make_id(void *arg, unsigned char *id, size_t *len, char *err, size_t errlen) {
    (void)arg;
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        return -1;
    }
    memcpy(id, u.internal, sizeof(u.internal));
    *len = sizeof(u.internal);
    return 0;
}

/* The job's communicator for this replica's GPU. */
static int comm_init(gb_comm_t *comm, int device, ncclComm_t *out, char *err, size_t errlen) {
#define ERR    err
#define ERRLEN errlen
    unsigned char id[GB_DIST_ID_MAX];
    size_t len = 0;
    ncclUniqueId u;
    /* nothing of ours is loaded lazily once collectives can be in flight;
     * done before the id's exchange, which a failing replica's abort can
     * still end (ncclCommInitRank, blocking, cannot be) */
    CK_CUDA(cudaSetDevice(device));
    CK_CUDA(gb_k_preload());
    if (gb_comm_exchange_id(comm, make_id, NULL, id, &len, err, errlen)) return -1;
    if (len != sizeof(u.internal)) {
        snprintf(err, errlen, "the unique id has %zu bytes, an ncclUniqueId %zu", len,
                 sizeof(u.internal));
        return -1;
    }
    memcpy(u.internal, id, len);
    CK_CUDA(cudaSetDevice(device));
    CK_NCCL(ncclCommInitRank(out, comm->world, u, comm->rank));
    /* every local replica past its init before any goes on to launch work
     * (XLA found a participant racing ahead of the others' init hang) */
    if (gb_comm_local_barrier(comm, err, errlen)) {
        ncclCommAbort(*out);
        *out = NULL;
        return -1;
    }
    return 0;
fail:
    return -1;
#undef ERR
#undef ERRLEN
}

/* ------------------------------------- waiting on work with collectives */

/* Wait until `ev` (or, with ev NULL, stream s) has completed, without
 * blocking in the driver: a collective whose peer is gone never ends, and
 * nothing would wake a thread blocked in cudaEventSynchronize. So poll the
 * work, NCCL's asynchronous error on nc, and comm's group (another replica
 * of this process failed). 0 when the work is done; -1 with the reason
 * otherwise (the caller sees that nc is aborted, which ends its kernels:
 * the allreduce kind at once; a training step in the executor's destroy,
 * once its CUDA graph is gone: gb_cuda_dp_wait). */
static int nccl_poll(gb_comm_t *comm, ncclComm_t nc, cudaStream_t s, cudaEvent_t ev, char *err,
                     size_t errlen) {
    for (long spin = 0;; spin++) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(s);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) {
            snprintf(err, errlen, "waiting for the step's collectives: %s (%s)",
                     cudaGetErrorString(e), cudaGetErrorName(e));
            return -1;
        }
        /* "not ready" can stay behind as the thread's last error, and every
         * later check reads that (finish_step's cudaGetLastError, each of
         * kernels.h's launchers): cleared, as PyTorch's CUDAEvent::query
         * does; only that one, so no other error is swallowed */
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        ncclResult_t ar = ncclSuccess;
        if (nc && ncclCommGetAsyncError(nc, &ar) == ncclSuccess && ar != ncclSuccess &&
            ar != ncclInProgress) {
            const char *l = ncclGetLastError(nc);
            snprintf(err, errlen, "NCCL failed asynchronously: %s%s%s%s",
                     ar == ncclRemoteError ? GB_PEER_GONE : "", ncclGetErrorString(ar),
                     l && l[0] ? ": " : "", l && l[0] ? l : "");
            return -1;
        }
        if (comm && gb_comm_aborted(comm, err, errlen)) return -1;
        /* spin briefly (a step's end is near once it is waited on), then
         * sleep 20 us a round: the device's time is measured with events,
         * so this costs it nothing but a slightly later next launch */
        if (spin > 200) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ------------------------------------------------ training: the buckets */

struct gb_cuda_dp {
    gb_comm_t *comm;
    int device;
    const gb_plan_t *p;
    ncclComm_t nccl;
    cudaStream_t cs;
    cudaEvent_t done;
    gb_buckets_t *bk[2];
    int *pend[2], *queued[2];
    cudaEvent_t *ev[2];
    char *base[2];
    size_t esz[2];
    ncclDataType_t dt[2];
    double bucket_mb;
    int nvlink;
    char asked[16];
    int *dflag, *hflag; /* gb_cuda_dp_agree, _same: 2 device ints, 4 pinned host */
    long finished;      /* steps whose all-reduces were launched (gb_cuda_dp_finish) */
};

static void dp_abort(gb_cuda_dp_t *dp) {
    if (!dp->nccl) return;
    cudaSetDevice(dp->device);
    ncclCommAbort(dp->nccl); /* its kernels end; the streams drain */
    dp->nccl = NULL;
}

/* A failure here aborts the group (the process's other replicas stop too),
 * not yet the communicator: ncclCommAbort waits for every CUDA graph that
 * captured its collectives to be destroyed, and the step's graph may be
 * alive; the executor's destroy does it, graphs first, before it waits on
 * any stream (gb_cuda_dp_stop_if_failed). Nothing waits on the streams
 * between. */
int gb_cuda_dp_wait(gb_cuda_dp_t *dp, cudaEvent_t ev, char *err, size_t errlen) {
    if (nccl_poll(dp->comm, dp->nccl, NULL, ev, err, errlen) == 0) return 0;
    gb_comm_abort(dp->comm, err);
    return -1;
}

void gb_cuda_dp_stop_if_failed(gb_cuda_dp_t *dp) {
    if (dp && gb_comm_aborted(dp->comm, NULL, 0)) dp_abort(dp);
}

#define ERR    err
#define ERRLEN errlen

gb_cuda_dp_t *gb_cuda_dp_new(gb_comm_t *comm, int device, const gb_train_config_t *cfg,
                             const gb_plan_t *p, void *grads, size_t a_esize, size_t grad_b_bytes,
                             char *err, size_t errlen) {
    const gb_model_t *m = p->m;
    size_t *off[2] = {NULL, NULL}, *cnt[2] = {NULL, NULL};
    gb_cuda_dp_t *dp = calloc(1, sizeof(*dp));
    if (!dp) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    dp->comm = comm;
    dp->device = device;
    dp->p = p;
    dp->bucket_mb = cfg->bucket_mb;
    snprintf(dp->asked, sizeof(dp->asked), "%s", cfg->interconnect);
    if (setup_parked(comm, cfg->node_devices, cfg->interconnect, &dp->nvlink, err, errlen))
        goto fail;
    if (comm_init(comm, device, &dp->nccl, err, errlen)) goto fail;
    CK_CUDA(cudaStreamCreateWithFlags(&dp->cs, cudaStreamNonBlocking));
    CK_CUDA(cudaEventCreateWithFlags(&dp->done, cudaEventDisableTiming));
    dp->base[0] = grads;
    dp->base[1] = (char *)grads + grad_b_bytes;
    dp->esz[0] = a_esize;
    dp->esz[1] = sizeof(float);
    dp->dt[0] = a_esize == 4                     ? ncclFloat32
                : cfg->precision == GB_PREC_BF16 ? ncclBfloat16
                                                 : ncclFloat16;
    dp->dt[1] = ncclFloat32;
    /* every parameter's place in its group: A (convs, fc.weight), B (BN, fc.bias) */
    for (int gi = 0; gi < 2; gi++) {
        off[gi] = calloc((size_t)m->n_tensors, sizeof(size_t));
        cnt[gi] = calloc((size_t)m->n_tensors, sizeof(size_t));
        if (!off[gi] || !cnt[gi]) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    for (int gi = 0; gi < 2; gi++)
        gb_plan_grad_spans(p, gi, off[gi], cnt[gi]);
    size_t total[2] = {p->n_a, p->n_b};
    for (int gi = 0; gi < 2; gi++) {
        dp->bk[gi] = gb_buckets_new(off[gi], cnt[gi], m->n_tensors, total[gi],
                                    gb_buckets_elems(cfg->bucket_mb, dp->esz[gi]), err, errlen);
        if (!dp->bk[gi]) goto fail;
        dp->pend[gi] = calloc(gb_buckets_pending_len(dp->bk[gi]), sizeof(int));
        dp->queued[gi] = calloc((size_t)dp->bk[gi]->n, sizeof(int));
        dp->ev[gi] = calloc((size_t)dp->bk[gi]->n, sizeof(cudaEvent_t));
        if (!dp->pend[gi] || !dp->queued[gi] || !dp->ev[gi]) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        for (int b = 0; b < dp->bk[gi]->n; b++)
            CK_CUDA(cudaEventCreateWithFlags(&dp->ev[gi][b], cudaEventDisableTiming));
    }
    CK_CUDA(cudaMalloc((void **)&dp->dflag, 2 * sizeof(int)));
    CK_CUDA(cudaMallocHost((void **)&dp->hflag, 4 * sizeof(int)));
    gb_cuda_dp_begin(dp);
    for (int gi = 0; gi < 2; gi++) {
        free(off[gi]);
        free(cnt[gi]);
    }
    return dp;
fail:
    for (int gi = 0; gi < 2; gi++) {
        free(off[gi]);
        free(cnt[gi]);
    }
    gb_comm_abort(comm, err);
    gb_cuda_dp_destroy(&dp);
    return NULL;
}

int gb_cuda_dp_world(const gb_cuda_dp_t *dp) {
    return dp->comm->world;
}

uint32_t gb_cuda_dp_layout(const gb_cuda_dp_t *dp, uint32_t h) {
    return gb_buckets_digest(dp->bk[1], gb_buckets_digest(dp->bk[0], h));
}

void gb_cuda_dp_begin(gb_cuda_dp_t *dp) {
    for (int gi = 0; gi < 2; gi++) {
        gb_buckets_reset(dp->bk[gi], dp->pend[gi]);
        memset(dp->queued[gi], 0, (size_t)dp->bk[gi]->n * sizeof(int));
    }
}

static int launch(gb_cuda_dp_t *dp, cudaStream_t s, int gi, int b, char *err, size_t errlen) {
    const gb_bucket_t *bu = &dp->bk[gi]->b[b];
    void *ptr = dp->base[gi] + bu->off * dp->esz[gi];
    dp->queued[gi][b] = 1;
    CK_CUDA(cudaEventRecord(dp->ev[gi][b], s));
    CK_CUDA(cudaStreamWaitEvent(dp->cs, dp->ev[gi][b], 0));
    /* a sum: the step's loss gradient is already divided by the world size
     * (gb_k_softmax_ce's replicas), as DDP divides before its all-reduce.
     * Not ncclAvg: NCCL runs an average of float types as a pre-multiplied
     * sum, which NVLS (NVLink SHARP on NVSwitch nodes) does not take, and
     * multiplies by 1/world rounded to the 16-bit type */
    CK_NCCL(ncclAllReduce(ptr, ptr, bu->count, dp->dt[gi], ncclSum, dp->nccl, dp->cs));
    return 0;
fail:
    return -1;
}

int gb_cuda_dp_grad_done(gb_cuda_dp_t *dp, cudaStream_t s, int tensor, char *err, size_t errlen) {
    const gb_model_t *m = dp->p->m;
    if (tensor < 0 || tensor >= m->n_tensors || !m->tensors[tensor].is_param) return 0;
    int gi = dp->p->params[tensor].group;
    int b = gb_buckets_done(dp->bk[gi], dp->pend[gi], tensor);
    /* the first step's buckets wait for its end (gb_cuda_dp_finish): its
     * backward makes cuDNN's plans and loads libraries for the first time,
     * in the driver, which must not happen while this GPU runs a collective
     * that waits for another replica of this process (openxla/xla#12228);
     * one GPU per process has no such replica, and overlaps from the first */
    return b >= 0 && (dp->finished > 0 || dp->comm->local_size == 1)
               ? launch(dp, s, gi, b, err, errlen)
               : 0;
}

int gb_cuda_dp_finish(gb_cuda_dp_t *dp, cudaStream_t s, char *err, size_t errlen) {
    for (int gi = 0; gi < 2; gi++)
        for (int b = 0; b < dp->bk[gi]->n; b++)
            if (!dp->queued[gi][b] && launch(dp, s, gi, b, err, errlen)) return -1;
    CK_CUDA(cudaEventRecord(dp->done, dp->cs));
    CK_CUDA(cudaStreamWaitEvent(s, dp->done, 0));
    dp->finished++;
    return 0;
fail:
    return -1;
}

int gb_cuda_dp_join_capture(gb_cuda_dp_t *dp, cudaStream_t s) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(dp->cs, &st) != cudaSuccess) return -1;
    if (st != cudaStreamCaptureStatusActive) return 0;
    if (cudaEventRecord(dp->done, dp->cs) != cudaSuccess) return -1;
    return cudaStreamWaitEvent(s, dp->done, 0) == cudaSuccess ? 0 : -1;
}

int gb_cuda_dp_same(gb_cuda_dp_t *dp, uint32_t v, char *err, size_t errlen) {
    CK_CUDA(cudaSetDevice(dp->device));
    /* one min over (v, -v): every rank gets the least v and minus the
     * greatest; equal when all passed the same (v < 2^30: no overflow) */
    dp->hflag[0] = (int)(v & 0x3fffffffu);
    dp->hflag[1] = -dp->hflag[0];
    CK_CUDA(
        cudaMemcpyAsync(dp->dflag, &dp->hflag[0], 2 * sizeof(int), cudaMemcpyHostToDevice, dp->cs));
    CK_NCCL(ncclAllReduce(dp->dflag, dp->dflag, 2, ncclInt32, ncclMin, dp->nccl, dp->cs));
    CK_CUDA(
        cudaMemcpyAsync(&dp->hflag[2], dp->dflag, 2 * sizeof(int), cudaMemcpyDeviceToHost, dp->cs));
    CK_CUDA(cudaEventRecord(dp->done, dp->cs));
    if (gb_cuda_dp_wait(dp, dp->done, err, errlen)) return -1;
    return dp->hflag[2] == -dp->hflag[3];
fail:
    gb_comm_abort(dp->comm, err); /* the communicator: as gb_cuda_dp_wait */
    return -1;
}

int gb_cuda_dp_agree(gb_cuda_dp_t *dp, int ok, char *err, size_t errlen) {
    CK_CUDA(cudaSetDevice(dp->device));
    dp->hflag[0] = ok ? 1 : 0;
    CK_CUDA(cudaMemcpyAsync(dp->dflag, &dp->hflag[0], sizeof(int), cudaMemcpyHostToDevice, dp->cs));
    CK_NCCL(ncclAllReduce(dp->dflag, dp->dflag, 1, ncclInt32, ncclMin, dp->nccl, dp->cs));
    CK_CUDA(cudaMemcpyAsync(&dp->hflag[1], dp->dflag, sizeof(int), cudaMemcpyDeviceToHost, dp->cs));
    CK_CUDA(cudaEventRecord(dp->done, dp->cs));
    if (gb_cuda_dp_wait(dp, dp->done, err, errlen)) return -1;
    return dp->hflag[1] != 0;
fail:
    gb_comm_abort(dp->comm, err); /* the communicator: as gb_cuda_dp_wait */
    return -1;
}

char *gb_cuda_dp_report(gb_cuda_dp_t *dp) {
    const char *ic;
    char tr[512];
    int conns = 0;
    nccl_report(dp->comm->world, dp->nvlink, &ic, tr, sizeof(tr), &conns);
    size_t cap = 2048;
    char *j = malloc(cap);
    if (!j) return NULL;
    snprintf(j, cap,
             "\"interconnect\":\"%s\",\"interconnect_requested\":\"%s\",\"nvlink\":%s,"
             "\"p2p_disabled\":%s,\"nccl_transports\":%s,\"nccl_connections\":%d,"
             "\"nccl_log\":\"%s\",\"allreduce\":{\"transport\":\"nccl\",\"buckets\":%d,"
             "\"bucket_mb\":%g,\"ranks\":%d,\"grad_dtype\":\"%s\"}",
             ic, dp->asked,
             dp->nvlink == 1   ? "true"
             : dp->nvlink == 0 ? "false"
                               : "null",
             g.p2p_off ? "true" : "false", tr, conns, g.logdir, dp->bk[0]->n + dp->bk[1]->n,
             dp->bucket_mb, dp->comm->world,
             /* the conv and fc weights' gradients, averaged in this type (the
              * BN parameters' and fc bias's in fp32): fp16 and bf16 move half
              * the bytes of PyTorch AMP's fp32 gradients */
             dp->dt[0] == ncclFloat32    ? "fp32"
             : dp->dt[0] == ncclBfloat16 ? "bf16"
                                         : "fp16");
    return j;
}

void gb_cuda_dp_destroy(gb_cuda_dp_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_cuda_dp_t *dp = *self_p;
    cudaSetDevice(dp->device);
    /* after a failure anywhere in the group a collective may never end:
     * abort the communicator before waiting on its stream */
    gb_cuda_dp_stop_if_failed(dp);
    /* ncclCommDestroy and ncclCommAbort are both collective over a node's
     * ranks: one replica destroying while another aborts can hang. The
     * local replicas meet first; one that failed meanwhile opens the
     * barrier with its abort, and then every one aborts */
    if (dp->nccl && dp->finished == 0) {
        /* no step ended: a failure in the set-up (gb_net_new out of memory
         * destroys the executor before its caller aborts the group) — the
         * others must not wait for this one at the barrier */
        gb_comm_abort(dp->comm, "a replica ended before its first step");
        dp_abort(dp);
    } else if (dp->nccl && gb_comm_local_barrier(dp->comm, NULL, 0) != 0) {
        dp_abort(dp);
    }
    if (dp->cs) cudaStreamSynchronize(dp->cs);
    if (dp->nccl) ncclCommDestroy(dp->nccl);
    for (int gi = 0; gi < 2; gi++) {
        for (int b = 0; dp->ev[gi] && dp->bk[gi] && b < dp->bk[gi]->n; b++)
            if (dp->ev[gi][b]) cudaEventDestroy(dp->ev[gi][b]);
        free(dp->ev[gi]);
        free(dp->pend[gi]);
        free(dp->queued[gi]);
        gb_buckets_destroy(&dp->bk[gi]);
    }
    if (dp->done) cudaEventDestroy(dp->done);
    if (dp->cs) cudaStreamDestroy(dp->cs);
    if (dp->dflag) cudaFree(dp->dflag);
    if (dp->hflag) cudaFreeHost(dp->hflag);
    free(dp);
    *self_p = NULL;
}

/* ------------------------------------------------- the allreduce kind */

int gb_cuda_allreduce(int replica, gb_comm_t *comm, const gb_allreduce_config_t *cfg,
                      gb_allreduce_size_t *sizes, int n, char **details_json, char *err,
                      size_t errlen) {
    ncclComm_t nc = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float *buf = NULL, *dtime = NULL;
    unsigned int *dbad = NULL;
    /* the host ends of the small copies, pinned: a copy to pageable memory
     * waits for the stream inside the driver, where a collective whose peer
     * died would hold it for ever; read only after nccl_poll says done */
    struct ar_host {
        float us_in, us_out;
        unsigned int bad;
    } *h = NULL;
    int nvlink = 0;
    *details_json = NULL;
    if (!comm || replica != comm->local_rank || n < 1) {
        snprintf(err, errlen, "cuda allreduce: replica %d needs its comm member", replica);
        goto fail;
    }
    if (setup_parked(comm, comm->local_size, cfg->interconnect, &nvlink, err, errlen)) goto fail;
    /* everything allocated before the communicator, as the training path
     * does: a replica of this process still inside cudaMalloc (the driver)
     * while another already waits in its first collective is the hang XLA
     * found (openxla/xla#12228) */
    size_t maxc = 1;
    for (int k = 0; k < n; k++)
        if (sizes[k].count > maxc) maxc = sizes[k].count;
    CK_CUDA(cudaSetDevice(replica));
    CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK_CUDA(cudaEventCreate(&e0));
    CK_CUDA(cudaEventCreate(&e1));
    CK_CUDA(cudaMalloc((void **)&buf, maxc * sizeof(float)));
    CK_CUDA(cudaMalloc((void **)&dtime, sizeof(float)));
    CK_CUDA(cudaMalloc((void **)&dbad, sizeof(unsigned int)));
    CK_CUDA(cudaMallocHost((void **)&h, sizeof(*h)));
    if (comm_init(comm, replica, &nc, err, errlen)) goto fail;
    gb_ar_want_t want;
    for (int i = 0; i < 11; i++)
        want.v[i] = gb_allreduce_expected(comm->world, (size_t)i);
    for (int k = 0; k < n; k++) {
        size_t count = sizes[k].count;
        sizes[k].window_ms[0] = gb_engine_wall_ms();
        CK_CUDA(gb_k_ar_fill(s, buf, count, comm->rank, -1));
        for (int w = 0; w < cfg->warmup; w++)
            CK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, nc, s));
        /* every rank ready before the clock starts: a one-element all-reduce */
        CK_NCCL(ncclAllReduce(dtime, dtime, 1, ncclFloat32, ncclSum, nc, s));
        if (nccl_poll(comm, nc, s, NULL, err, errlen)) goto fail;
        CK_CUDA(cudaEventRecord(e0, s));
        for (int it = 0; it < cfg->iters; it++)
            CK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, nc, s));
        CK_CUDA(cudaEventRecord(e1, s));
        if (nccl_poll(comm, nc, NULL, e1, err, errlen)) goto fail;
        float ms = 0;
        CK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        h->us_in = ms * 1000.0f / (float)cfg->iters;
        CK_CUDA(cudaMemcpyAsync(dtime, &h->us_in, sizeof(float), cudaMemcpyHostToDevice, s));
        CK_NCCL(ncclAllReduce(dtime, dtime, 1, ncclFloat32, ncclMax, nc, s));
        CK_CUDA(cudaMemcpyAsync(&h->us_out, dtime, sizeof(float), cudaMemcpyDeviceToHost, s));
        /* the check, after timing: known inputs, exact sums */
        CK_CUDA(gb_k_ar_fill(s, buf, count, comm->rank,
                             comm->rank == cfg->fault_rank ? (long long)(count / 2) : -1));
        CK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, nc, s));
        CK_CUDA(cudaMemsetAsync(dbad, 0, sizeof(unsigned int), s));
        CK_CUDA(gb_k_ar_check(s, buf, count, want, dbad));
        CK_NCCL(ncclAllReduce(dbad, dbad, 1, ncclUint32, ncclMax, nc, s));
        CK_CUDA(cudaMemcpyAsync(&h->bad, dbad, sizeof(unsigned int), cudaMemcpyDeviceToHost, s));
        if (nccl_poll(comm, nc, s, NULL, err, errlen)) goto fail;
        sizes[k].time_us = h->us_out;
        sizes[k].ok = h->bad == 0;
        sizes[k].window_ms[1] = gb_engine_wall_ms();
    }
    /* as in gb_cuda_dp_destroy: the local replicas destroy the communicator
     * together, or (one failed meanwhile) every one aborts it */
    if (gb_comm_local_barrier(comm, err, errlen) != 0) goto fail;
    {
        const char *ic;
        char tr[512];
        int conns = 0;
        nccl_report(comm->world, nvlink, &ic, tr, sizeof(tr), &conns);
        char *j = malloc(1024);
        if (j)
            snprintf(j, 1024,
                     "{\"transport\":\"nccl\",\"interconnect\":\"%s\",\"interconnect_requested\":"
                     "\"%s\",\"nvlink\":%s,\"nccl_transports\":%s,\"nccl_connections\":%d}",
                     ic, cfg->interconnect,
                     nvlink == 1   ? "true"
                     : nvlink == 0 ? "false"
                                   : "null",
                     tr, conns);
        *details_json = j;
    }
    cudaFree(buf);
    cudaFree(dtime);
    cudaFree(dbad);
    cudaFreeHost(h);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    ncclCommDestroy(nc);
    return 0;
fail:
    if (comm) gb_comm_abort(comm, err); /* the process's other replicas stop too */
    /* first: cudaFree waits for the device, which may be stuck in a collective */
    if (nc) ncclCommAbort(nc); /* the other ranks may be inside a collective */
    if (buf) cudaFree(buf);
    if (dtime) cudaFree(dtime);
    if (dbad) cudaFree(dbad);
    if (h) cudaFreeHost(h);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    return -1;
}
