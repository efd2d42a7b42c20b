/* loadgen.c - gb_loadgen: many simulated agents in one process against a
 * real coordinator, for bench/control-plane/run.sh and a smoke test.
 *
 * Each simulated agent is a DEALER with its own routing id ("sim-00001",
 * ...) speaking the real protocol: Hello with an inventory (64 cores, kind
 * `sleep` only), heartbeats at the coordinator's interval (staggered),
 * and for every JobAssign at once a Progress (started) and a Result with a
 * `sleep` record (duration 0: no worker is forked), resent until
 * acknowledged, as a real agent does from its spool. One thread, epoll over
 * the sockets' ZMQ_FD.
 *
 * Modes:
 *   throughput  submit --jobs sleep jobs (sweeps of --sweep-size) and run
 *               them to the last acknowledgement: jobs committed per second,
 *               assign->ack latency, slot refill latency (result sent ->
 *               next assignment, while the queue is not empty)
 *   latency     --jobs jobs in sweeps of --sweep-size (default 1) submitted
 *               --rate sweeps a second, below the fleet's capacity:
 *               submit->assign latency (and submit->reply, assign->ack)
 *   idle        --duration seconds of heartbeats only
 * With --coord-pid, the coordinator's CPU time (utime+stime from
 * /proc/PID/stat) over the measured window and its peak RSS (VmHWM) are
 * reported too. Results go to stdout as one JSON object (and a summary on
 * stderr). Exit 0 only when every job submitted was acknowledged exactly
 * once per attempt and nothing unexpected arrived. */
#define _GNU_SOURCE
#include "gb_curve.h"
#include "gb_util.h"
#include "gb_wire.h"
#include "gb_zmq.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "gb_loadgen: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

static const char *const RECORD =
    "{\"kind\":\"sleep\",\"backend\":\"cpu\",\"device_model\":\"sim\","
    "\"n_devices\":1,\"precision\":null,\"valid\":true,"
    "\"invalid_reason\":null,\"synthetic\":true,\"duration_ms\":0,"
    "\"slept_ms\":0,\"versions\":{\"gpubench\":\"loadgen\"}}";

typedef struct pend {
    uint64_t job;
    uint32_t attempt;
    double next_send_ms;
} pend_t;

typedef struct agent {
    void *sock;
    int fd;
    char id[32];
    int registered;
    double next_hb_ms, last_result_ms;
    uint64_t seq;
    pend_t *pend;
    size_t n_pend, cap;
} agent_t;

/* per job, indexed by job id */
typedef struct jobt {
    double assign_ms, ack_ms; /* monotonic, fractional ms */
    uint32_t attempt, acks;
    uint64_t sweep;
} jobt_t;

static struct {
    void *ctx;
    agent_t *agents;
    int n_agents, hb_ms, epfd;
    const gb_curve_client_t *curve;
    const char *connect;
    jobt_t *jobs;
    size_t jobs_cap;
    uint64_t max_job;
    long unexpected, rejects, assigns, results_sent, resends, acked;
    double *refill, *refill_at; /* refill ms, and when the assignment came */
    size_t n_refill, refill_cap, n_refill_at, refill_at_cap;
    double refill_from_ms; /* only slots freed after this count */
} S;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double now_ms(void) {
    return now_us() / 1000.0;
}

static jobt_t *job(uint64_t id) {
    if (id >= S.jobs_cap) {
        size_t cap = S.jobs_cap ? S.jobs_cap : 1024;
        while (cap <= id)
            cap *= 2;
        jobt_t *v = realloc(S.jobs, cap * sizeof *v);
        if (!v) DIE("out of memory");
        memset(v + S.jobs_cap, 0, (cap - S.jobs_cap) * sizeof *v);
        S.jobs = v;
        S.jobs_cap = cap;
    }
    if (id > S.max_job) S.max_job = id;
    return &S.jobs[id];
}

static void push(double **v, size_t *n, size_t *cap, double x) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4096;
        double *nv = realloc(*v, *cap * sizeof *nv);
        if (!nv) DIE("out of memory");
        *v = nv;
    }
    (*v)[(*n)++] = x;
}

static void send_env(void *sock, Gb__Envelope *env) {
    if (gb_zmq_send(sock, NULL, 0, env) != 0 && errno != EAGAIN)
        DIE("send: %s", zmq_strerror(errno));
}

static void send_hello(agent_t *a) {
    char *kinds[] = {"sleep"};
    Gb__Inventory inv = GB__INVENTORY__INIT;
    inv.hostname = a->id;
    inv.cpu_model = "sim";
    inv.cpu_cores = 64;
    inv.memory_bytes = 1ull << 34;
    inv.n_kinds = 1;
    inv.kinds = kinds;
    inv.gpubench_version = "loadgen";
    Gb__Hello h = GB__HELLO__INIT;
    h.agent_id = a->id;
    h.name = a->id;
    h.inventory = &inv;
    h.slots = 1;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = ++a->seq;
    env.body_case = GB__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    send_env(a->sock, &env);
}

static void send_heartbeat(agent_t *a) {
    Gb__JobRef refs[64], *rp[64];
    size_t n = a->n_pend < 64 ? a->n_pend : 64;
    for (size_t i = 0; i < n; i++) {
        gb__job_ref__init(&refs[i]);
        refs[i].job_id = a->pend[i].job;
        refs[i].attempt = a->pend[i].attempt;
        rp[i] = &refs[i];
    }
    Gb__Heartbeat hb = GB__HEARTBEAT__INIT;
    hb.spooled = (uint32_t)a->n_pend;
    hb.n_spooled_jobs = n;
    hb.spooled_jobs = rp;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = ++a->seq;
    env.body_case = GB__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    send_env(a->sock, &env);
}

static void send_result(agent_t *a, pend_t *p) {
    Gb__Result r = GB__RESULT__INIT;
    r.job_id = p->job;
    r.attempt = p->attempt;
    r.status = GB__RESULT_STATUS__RESULT_OK;
    r.record_json = (char *)RECORD;
    int64_t wall = gb_wall_ms();
    r.started_at_ms = (uint64_t)wall;
    r.finished_at_ms = (uint64_t)wall;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = ++a->seq;
    env.body_case = GB__ENVELOPE__BODY_RESULT;
    env.result = &r;
    send_env(a->sock, &env);
    p->next_send_ms = now_ms() + 2 * S.hb_ms;
    S.results_sent++;
}

static void on_assign(agent_t *a, const Gb__JobAssign *as) {
    double t = now_ms();
    jobt_t *j = job(as->job_id);
    j->assign_ms = t;
    j->attempt = as->attempt;
    j->sweep = as->sweep_id;
    S.assigns++;
    if (a->last_result_ms && a->last_result_ms >= S.refill_from_ms) {
        push(&S.refill, &S.n_refill, &S.refill_cap, t - a->last_result_ms);
        push(&S.refill_at, &S.n_refill_at, &S.refill_at_cap, t);
    }
    Gb__Progress p = GB__PROGRESS__INIT;
    p.job_id = as->job_id;
    p.attempt = as->attempt;
    p.phase = GB__PHASE__PHASE_STARTED;
    p.message = "";
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.seq = ++a->seq;
    env.body_case = GB__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    send_env(a->sock, &env);
    if (a->n_pend == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 4;
        pend_t *v = realloc(a->pend, a->cap * sizeof *v);
        if (!v) DIE("out of memory");
        a->pend = v;
    }
    pend_t *pd = &a->pend[a->n_pend++];
    pd->job = as->job_id;
    pd->attempt = as->attempt;
    send_result(a, pd);
    a->last_result_ms = now_ms();
}

static void on_message(agent_t *a, gb_frame_t *f) {
    Gb__Envelope *env = NULL;
    uint64_t seq;
    char why[512];
    if (f->parts != 1 || gb_wire_decode(zmq_msg_data(&f->payload), zmq_msg_size(&f->payload),
                                        1u << 24, &env, &seq, why, sizeof why) != 0) {
        S.unexpected++;
        return;
    }
    switch (env->body_case) {
    case GB__ENVELOPE__BODY_WELCOME:
        if (!a->registered) {
            a->registered = 1;
            S.hb_ms = (int)env->welcome->heartbeat_ms;
            a->next_hb_ms = now_ms() + rand() % S.hb_ms; /* staggered */
        }
        break;
    case GB__ENVELOPE__BODY_HEARTBEAT:
        break;
    case GB__ENVELOPE__BODY_ASSIGN:
        on_assign(a, env->assign);
        break;
    case GB__ENVELOPE__BODY_RESULT_ACK:
        for (size_t i = 0; i < a->n_pend; i++)
            if (a->pend[i].job == env->result_ack->job_id &&
                a->pend[i].attempt == env->result_ack->attempt) {
                jobt_t *j = job(env->result_ack->job_id);
                if (!j->ack_ms) {
                    j->ack_ms = now_ms();
                    S.acked++;
                }
                j->acks++;
                a->pend[i] = a->pend[--a->n_pend];
                break;
            }
        break;
    case GB__ENVELOPE__BODY_REJECT:
        S.rejects++;
        if (env->reject->code == GB__REJECT_CODE__REJECT_UNKNOWN_AGENT) {
            a->registered = 0;
            send_hello(a);
        } else {
            fprintf(stderr, "gb_loadgen: %s rejected: %s: %s\n", a->id,
                    gb_wire_reject_name(env->reject->code), env->reject->reason);
        }
        break;
    default:
        S.unexpected++;
    }
    gb_wire_free(&env);
}

static void drain(agent_t *a) {
    for (;;) {
        gb_frame_t f;
        if (gb_zmq_recv(a->sock, 0, &f) != 0) {
            if (errno != EAGAIN) DIE("recv: %s", zmq_strerror(errno));
            return;
        }
        on_message(a, &f);
        gb_frame_close(&f);
    }
}

static void open_agents(int n, const char *prefix) {
    S.agents = calloc((size_t)n, sizeof *S.agents);
    if (!S.agents) DIE("out of memory");
    S.n_agents = n;
    for (int i = 0; i < n; i++) {
        agent_t *a = &S.agents[i];
        snprintf(a->id, sizeof a->id, "%s-%05d", prefix, i + 1);
        a->sock = zmq_socket(S.ctx, ZMQ_DEALER);
        if (!a->sock) DIE("socket %d: %s", i, zmq_strerror(errno));
        int zero = 0, hwm = 100000;
        zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, a->id, strlen(a->id));
        zmq_setsockopt(a->sock, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(a->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
        char err[300];
        if (S.curve && gb_curve_client_apply(a->sock, S.curve, err, sizeof err) != 0)
            DIE("%s", err);
        if (zmq_connect(a->sock, S.connect) != 0) DIE("connect: %s", zmq_strerror(errno));
        size_t sz = sizeof a->fd;
        zmq_getsockopt(a->sock, ZMQ_FD, &a->fd, &sz);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(S.epfd, EPOLL_CTL_ADD, a->fd, &ev) != 0) DIE("epoll: %s", strerror(errno));
        send_hello(a);
    }
}

static void *ctl; /* the control DEALER */

/* One pass of the reactor: wait up to ms, then drain every socket that
 * signalled, run heartbeats and resends. */
static void step(int ms) {
    struct epoll_event evs[512];
    int n = epoll_wait(S.epfd, evs, 512, ms);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.u32 == UINT32_MAX) { /* the control socket: its reader polls it; */
            int ev;                          /* asking for its events resets the wake-up */
            size_t sz = sizeof ev;
            zmq_getsockopt(ctl, ZMQ_EVENTS, &ev, &sz);
            continue;
        }
        drain(&S.agents[evs[i].data.u32]);
    }
    double t = now_ms();
    for (int i = 0; i < S.n_agents; i++) {
        agent_t *a = &S.agents[i];
        int sent = 0;
        if (a->registered && t >= a->next_hb_ms) {
            send_heartbeat(a);
            a->next_hb_ms = t + S.hb_ms;
            sent = 1;
        }
        for (size_t k = 0; a->registered && k < a->n_pend; k++)
            if (t >= a->pend[k].next_send_ms) {
                send_result(a, &a->pend[k]);
                S.resends++;
                sent = 1;
            }
        if (!a->registered && t >= a->next_hb_ms) { /* hello again until welcomed */
            send_hello(a);
            a->next_hb_ms = t + 1000;
            sent = 1;
        }
        if (sent) drain(a); /* a send may have consumed the fd's wake-up */
    }
}

static int registered(void) {
    int n = 0;
    for (int i = 0; i < S.n_agents; i++)
        n += S.agents[i].registered;
    return n;
}

/* ---- control requests (one outstanding, on their own DEALER) ------------ */

static uint64_t ctl_seq;

static Gb__Envelope *ctl_request(Gb__Envelope *req, int timeout_ms) {
    req->seq = ++ctl_seq;
    send_env(ctl, req);
    double end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        gb_frame_t f;
        if (gb_zmq_recv(ctl, 0, &f) == 0) {
            Gb__Envelope *env = NULL;
            uint64_t seq;
            char why[512];
            int rc = gb_wire_decode(zmq_msg_data(&f.payload), zmq_msg_size(&f.payload), 1u << 30,
                                    &env, &seq, why, sizeof why);
            gb_frame_close(&f);
            if (rc != 0) DIE("bad reply: %s", why);
            if (env->seq == req->seq) return env;
            gb_wire_free(&env);
            continue;
        }
        step(1); /* the agents keep running meanwhile */
    }
    DIE("no reply from the control endpoint within %d ms", timeout_ms);
}

/* Submit a sleep sweep of n jobs; returns its id. */
static uint64_t submit(size_t n, double *reply_ms) {
    char spec[2048];
    if (n <= 1000) {
        snprintf(spec, sizeof spec,
                 "{\"kind\":\"sleep\",\"name\":\"load\",\"duration_ms\":0,\"repeat\":%zu}", n);
    } else {
        if (n % 1000 || n / 1000 > 1024) DIE("--sweep-size above 1000 must be a multiple of 1000");
        size_t o = (size_t)snprintf(spec, sizeof spec,
                                    "{\"kind\":\"sleep\",\"name\":\"load\",\"duration_ms\":0,"
                                    "\"repeat\":1000,\"gpus\":[");
        for (size_t g = 1; g <= n / 1000 && o < sizeof spec; g++)
            o += (size_t)snprintf(spec + o, sizeof spec - o, "%s%zu", g > 1 ? "," : "", g);
        snprintf(spec + o, sizeof spec - o, "]}");
    }
    Gb__SubmitRequest rq = GB__SUBMIT_REQUEST__INIT;
    rq.spec_json = spec;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_SUBMIT;
    env.submit = &rq;
    Gb__Envelope *rep = ctl_request(&env, 120000);
    if (reply_ms) *reply_ms = now_ms();
    if (rep->body_case != GB__ENVELOPE__BODY_SUBMIT_REPLY)
        DIE("submit refused: %s", rep->body_case == GB__ENVELOPE__BODY_REJECT
                                      ? rep->reject->reason
                                      : gb_wire_body_name(rep->body_case));
    uint64_t id = rep->submit_reply->sweep_id;
    if (rep->submit_reply->n_jobs != n)
        DIE("sweep of %u jobs, wanted %zu", rep->submit_reply->n_jobs, n);
    gb_wire_free(&rep);
    return id;
}

/* ---- /proc ------------------------------------------------------------- */

static double proc_cpu_s(int pid) {
    if (pid <= 0) return 0;
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may hold spaces */
    if (!p) return -1;
    unsigned long utime = 0, stime = 0;
    /* after ") ": state(3) ... utime is field 14, stime 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static long proc_kb(int pid, const char *field) {
    if (pid <= 0) return 0;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':') v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    return v;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
    if (n == 0) return -1;
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return v[i];
}

static void stats(const char *name, double *v, size_t n, int last) {
    qsort(v, n, sizeof *v, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    printf("  \"%s\": {\"n\": %zu, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"max\": %.3f, "
           "\"mean\": %.3f}%s\n",
           name, n, pct(v, n, 50), pct(v, n, 90), pct(v, n, 99), n ? v[n - 1] : -1,
           n ? sum / (double)n : -1, last ? "" : ",");
    fprintf(stderr, "gb_loadgen: %-16s n %zu  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n",
            name, n, pct(v, n, 50), pct(v, n, 90), pct(v, n, 99), n ? v[n - 1] : -1);
}

static void usage(void) {
    fprintf(stderr, "usage: gb_loadgen --connect EP --control EP [options]\n"
                    "  --mode M          throughput | latency | idle (default throughput)\n"
                    "  --agents N        simulated agents (default 100)\n"
                    "  --jobs N          jobs to run (default 1000)\n"
                    "  --sweep-size N    jobs per sweep (default 10000; latency mode 1)\n"
                    "  --rate N          latency mode: sweeps submitted a second (default 50)\n"
                    "  --duration S      idle mode: seconds measured (default 30)\n"
                    "  --warmup S        idle mode: seconds before measuring (default 3)\n"
                    "  --coord-pid PID   report the coordinator's CPU time and peak RSS\n"
                    "  --prefix P        routing ids P-00001... (default sim)\n"
                    "  --key F --server-key F   CURVE, as for gpubench agent\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"connect", 1, 0, 'c'},    {"control", 1, 0, 'C'},
                                         {"mode", 1, 0, 'm'},       {"agents", 1, 0, 'a'},
                                         {"jobs", 1, 0, 'j'},       {"sweep-size", 1, 0, 's'},
                                         {"rate", 1, 0, 'r'},       {"duration", 1, 0, 'd'},
                                         {"warmup", 1, 0, 'w'},     {"coord-pid", 1, 0, 'p'},
                                         {"prefix", 1, 0, 'x'},     {"key", 1, 0, 'k'},
                                         {"server-key", 1, 0, 'K'}, {0, 0, 0, 0}};
    const char *control = NULL, *mode = "throughput", *prefix = "sim", *key = NULL, *skey = NULL;
    long n_agents = 100, n_jobs = 1000, sweep_size = 0, rate = 50, duration = 30, warmup = 3;
    int pid = 0, opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            S.connect = optarg;
            break;
        case 'C':
            control = optarg;
            break;
        case 'm':
            mode = optarg;
            break;
        case 'a':
            n_agents = atol(optarg);
            break;
        case 'j':
            n_jobs = atol(optarg);
            break;
        case 's':
            sweep_size = atol(optarg);
            break;
        case 'r':
            rate = atol(optarg);
            break;
        case 'd':
            duration = atol(optarg);
            break;
        case 'w':
            warmup = atol(optarg);
            break;
        case 'p':
            pid = atoi(optarg);
            break;
        case 'x':
            prefix = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'K':
            skey = optarg;
            break;
        default:
            usage();
        }
    }
    if (sweep_size == 0) sweep_size = strcmp(mode, "latency") == 0 ? 1 : 10000;
    if (!S.connect || !control || n_agents < 1 || n_agents > 60000 || n_jobs < 0 ||
        sweep_size < 1 || rate < 1)
        usage();
    gb_curve_client_t keys;
    char err[600];
    if (key || skey) {
        if (gb_curve_client_load(&keys, key, skey, err, sizeof err) != 0) DIE("%s", err);
        S.curve = &keys;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    srand(1);
    S.hb_ms = 1000;
    S.ctx = zmq_ctx_new();
    zmq_ctx_set(S.ctx, ZMQ_MAX_SOCKETS, (int)n_agents + 64);
    S.epfd = epoll_create1(EPOLL_CLOEXEC);
    open_agents((int)n_agents, prefix);
    ctl = zmq_socket(S.ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(ctl, ZMQ_LINGER, &zero, sizeof zero);
    if (S.curve && gb_curve_client_apply(ctl, S.curve, err, sizeof err) != 0) DIE("%s", err);
    if (zmq_connect(ctl, control) != 0) DIE("connect %s: %s", control, zmq_strerror(errno));
    int ctl_fd;
    size_t fdsz = sizeof ctl_fd;
    zmq_getsockopt(ctl, ZMQ_FD, &ctl_fd, &fdsz);
    struct epoll_event cev = {.events = EPOLLIN, .data.u32 = UINT32_MAX}; /* a reply wakes us */
    if (epoll_ctl(S.epfd, EPOLL_CTL_ADD, ctl_fd, &cev) != 0) DIE("epoll: %s", strerror(errno));

    double t0 = now_ms();
    while (registered() < n_agents) {
        step(10);
        if (now_ms() - t0 > 120000) DIE("only %d of %ld agents registered", registered(), n_agents);
    }
    double reg_s = (double)(now_ms() - t0) / 1000.0;
    fprintf(stderr, "gb_loadgen: %ld agents registered in %.1f s\n", n_agents, reg_s);
    printf("{\n  \"mode\": \"%s\", \"agents\": %ld, \"jobs\": %ld, \"register_s\": %.2f,\n", mode,
           n_agents, n_jobs, reg_s);

    double cpu0, cpu1, wall_s;
    int ok = 1;
    if (strcmp(mode, "idle") == 0) {
        double end = now_ms() + (double)warmup * 1000;
        while (now_ms() < end)
            step(10);
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        cpu0 = proc_cpu_s(pid);
        double w0 = now_us();
        end = now_ms() + (double)duration * 1000;
        while (now_ms() < end)
            step(10);
        cpu1 = proc_cpu_s(pid);
        wall_s = (now_us() - w0) / 1e6;
        getrusage(RUSAGE_SELF, &ru1);
        double self = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                               ru0.ru_stime.tv_sec) +
                      (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                               ru0.ru_stime.tv_usec) /
                          1e6;
        printf("  \"heartbeat_ms\": %d, \"window_s\": %.2f, \"coordinator_cpu_s\": %.3f, "
               "\"coordinator_cpu_pct_of_one_core\": %.2f, \"loadgen_cpu_pct\": %.2f,\n",
               S.hb_ms, wall_s, cpu1 - cpu0, 100.0 * (cpu1 - cpu0) / wall_s, 100.0 * self / wall_s);
        fprintf(stderr,
                "gb_loadgen: idle %ld agents at %d ms heartbeats: coordinator %.2f%% of one core "
                "over %.1f s (the load generator %.1f%%)\n",
                n_agents, S.hb_ms, 100.0 * (cpu1 - cpu0) / wall_s, wall_s, 100.0 * self / wall_s);
    } else if (strcmp(mode, "latency") == 0) {
        /* --jobs jobs in sweeps of --sweep-size, --rate sweeps a second */
        long per = sweep_size < n_jobs ? sweep_size : (n_jobs > 0 ? n_jobs : 1);
        long n_sweeps = (n_jobs + per - 1) / per;
        double *sa = NULL, *sr = NULL, *sent_by_sweep = NULL;
        size_t n_sa = 0, c_sa = 0, n_sr = 0, c_sr = 0, sbs_cap = 0;
        cpu0 = proc_cpu_s(pid);
        double w0 = now_us();
        double next = now_ms();
        long left = n_jobs;
        for (long i = 0; i < n_sweeps; i++) {
            while (now_ms() < next)
                step(1);
            next += 1000.0 / (double)rate;
            long n = left < per ? left : per;
            left -= n;
            double reply_ms, sent = now_ms();
            uint64_t id = submit((size_t)n, &reply_ms);
            if (id >= sbs_cap) {
                size_t cap = sbs_cap ? sbs_cap : 1024;
                while (cap <= id)
                    cap *= 2;
                double *v = realloc(sent_by_sweep, cap * sizeof *v);
                if (!v) DIE("out of memory");
                memset(v + sbs_cap, 0, (cap - sbs_cap) * sizeof *v);
                sent_by_sweep = v;
                sbs_cap = cap;
            }
            sent_by_sweep[id] = sent;
            push(&sr, &n_sr, &c_sr, reply_ms - sent);
        }
        double end = now_ms() + 10000;
        while (now_ms() < end && S.acked < n_jobs) /* the last assignments and acks */
            step(5);
        cpu1 = proc_cpu_s(pid);
        wall_s = (now_us() - w0) / 1e6;
        double *aa = NULL;
        size_t n_aa = 0, c_aa = 0;
        for (uint64_t j = 1; j <= S.max_job; j++) {
            jobt_t *jt = &S.jobs[j];
            if (!jt->assign_ms) continue;
            if (jt->sweep < sbs_cap && sent_by_sweep[jt->sweep] > 0)
                push(&sa, &n_sa, &c_sa, jt->assign_ms - sent_by_sweep[jt->sweep]);
            if (jt->ack_ms) push(&aa, &n_aa, &c_aa, jt->ack_ms - jt->assign_ms);
        }
        printf("  \"sweep_size\": %ld, \"sweeps_per_s\": %ld, \"jobs_per_s_offered\": %ld, "
               "\"window_s\": %.2f, \"jobs_acked\": %ld, \"coordinator_cpu_s\": %.3f, "
               "\"coordinator_cpu_pct_of_one_core\": %.1f,\n",
               per, rate, per * rate, wall_s, S.acked, cpu1 - cpu0, 100.0 * (cpu1 - cpu0) / wall_s);
        fprintf(stderr,
                "gb_loadgen: %ld jobs offered at %ld a second (%ld sweeps of %ld): coordinator "
                "CPU %.0f%% of one core\n",
                n_jobs, per * rate, n_sweeps, per, 100.0 * (cpu1 - cpu0) / wall_s);
        stats("submit_to_reply_ms", sr, n_sr, 0);
        stats("submit_to_assign_ms", sa, n_sa, 0);
        stats("assign_to_ack_ms", aa, n_aa, 0);
        if ((long)n_sa != n_jobs) ok = 0;
        free(sa);
        free(sr);
        free(aa);
        free(sent_by_sweep);
    } else if (strcmp(mode, "throughput") == 0) {
        cpu0 = proc_cpu_s(pid);
        double w0 = now_us();
        S.refill_from_ms = now_ms();
        long left = n_jobs;
        while (left > 0) {
            long n = left < sweep_size ? left : sweep_size;
            submit((size_t)n, NULL);
            left -= n;
        }
        double submitted_s = (now_us() - w0) / 1e6;
        fprintf(stderr, "gb_loadgen: %ld jobs submitted in %.2f s\n", n_jobs, submitted_s);
        long acked = 0, prev = -1;
        double last = now_ms();
        for (;;) {
            step(5);
            acked = S.acked;
            if (acked >= n_jobs) break;
            if (acked != prev) {
                prev = acked;
                last = now_ms();
            }
            if (now_ms() - last > 30000) {
                fprintf(stderr, "gb_loadgen: stalled at %ld of %ld acknowledged\n", acked, n_jobs);
                ok = 0;
                break;
            }
        }
        cpu1 = proc_cpu_s(pid);
        wall_s = (now_us() - w0) / 1e6;
        /* refill samples count only while the queue was certainly not empty:
         * assignments of all but the last fleet-full of jobs */
        double *aa = NULL;
        size_t n_aa = 0, c_aa = 0;
        double cutoff = 0;
        {
            double *at = NULL;
            size_t n_at = 0, c_at = 0;
            for (uint64_t j = 1; j <= S.max_job; j++)
                if (S.jobs[j].assign_ms) push(&at, &n_at, &c_at, S.jobs[j].assign_ms);
            qsort(at, n_at, sizeof *at, cmp_d);
            if (n_at > (size_t)n_agents) cutoff = at[n_at - (size_t)n_agents - 1];
            free(at);
        }
        for (uint64_t j = 1; j <= S.max_job; j++)
            if (S.jobs[j].assign_ms && S.jobs[j].ack_ms)
                push(&aa, &n_aa, &c_aa, S.jobs[j].ack_ms - S.jobs[j].assign_ms);
        size_t kept = 0;
        for (size_t i = 0; i < S.n_refill; i++)
            if (S.refill_at[i] <= cutoff) S.refill[kept++] = S.refill[i];
        S.n_refill = kept;
        printf("  \"window_s\": %.3f, \"submit_s\": %.3f, \"jobs_acked\": %ld, "
               "\"jobs_per_s\": %.1f, \"coordinator_cpu_s\": %.3f, "
               "\"coordinator_cpu_pct_of_one_core\": %.1f, \"resends\": %ld,\n",
               wall_s, submitted_s, acked, (double)acked / wall_s, cpu1 - cpu0,
               100.0 * (cpu1 - cpu0) / wall_s, S.resends);
        fprintf(stderr,
                "gb_loadgen: %ld jobs committed and acknowledged in %.2f s: %.0f jobs/s; "
                "coordinator CPU %.2f s (%.0f%% of one core)\n",
                acked, wall_s, (double)acked / wall_s, cpu1 - cpu0, 100.0 * (cpu1 - cpu0) / wall_s);
        stats("assign_to_ack_ms", aa, n_aa, 0);
        stats("slot_refill_ms", S.refill, S.n_refill, 0);
        free(aa);
    } else {
        usage();
    }
    /* exactly once: every job acknowledged, none twice for one attempt
     * (a resend crossing its acknowledgement is acknowledged again: counted) */
    long missing = 0, twice = 0;
    for (uint64_t j = 1; j <= S.max_job; j++) {
        if (S.jobs[j].assign_ms && !S.jobs[j].ack_ms) missing++;
        if (S.jobs[j].acks > 1) twice++;
    }
    if (missing || S.unexpected) ok = 0;
    printf("  \"coordinator_peak_rss_kb\": %ld, \"coordinator_rss_kb\": %ld, \"unacked\": %ld, "
           "\"acked_twice\": %ld, \"unexpected\": %ld, \"rejects\": %ld, \"ok\": %s\n}\n",
           proc_kb(pid, "VmHWM"), proc_kb(pid, "VmRSS"), missing, twice, S.unexpected, S.rejects,
           ok ? "true" : "false");
    fprintf(stderr,
            "gb_loadgen: coordinator peak RSS %ld KiB; %ld unacknowledged, %ld unexpected\n",
            proc_kb(pid, "VmHWM"), missing, S.unexpected);
    for (int i = 0; i < S.n_agents; i++) {
        zmq_close(S.agents[i].sock);
        free(S.agents[i].pend);
    }
    zmq_close(ctl);
    zmq_ctx_term(S.ctx);
    free(S.agents);
    free(S.jobs);
    free(S.refill);
    free(S.refill_at);
    close(S.epfd);
    return ok ? 0 : 1;
}
