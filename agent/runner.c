/* runner.c - see runner.h. */
#define _GNU_SOURCE
#include "runner.h"

#include "gb_rdv.h"
#include "gb_util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORD_MAX (512u << 10)

/* An agent that is its PID namespace's init (a container's entrypoint with
 * no --init: the default in Docker and Kubernetes) or a subreaper inherits
 * a worker's processes once the worker is gone: a timed-out or cancelled
 * data-parallel job's replicas, killed with the worker's group, stayed its
 * zombies for ever, one a replica. The group of every worker that ended is
 * waited for a minute (waitpid of -pgid: only that group's members). */
#define ORPHAN_GROUPS  64
#define ORPHAN_WAIT_MS 60000
static struct {
    pid_t pgid; /* 0: free */
    int64_t until_ms;
} orphan_groups[ORPHAN_GROUPS];
static pthread_mutex_t orphan_mu = PTHREAD_MUTEX_INITIALIZER;

static int is_reaper(void) {
    int sub = 0;
    return getpid() == 1 || (prctl(PR_GET_CHILD_SUBREAPER, &sub) == 0 && sub);
}

/* Watch pgid's group (watch 1), or stop (0: a new worker took the pid). */
static void orphans_watch(pid_t pgid, int watch) {
    if (pgid <= 0 || (watch && !is_reaper())) return;
    int64_t now = gb_mono_ms();
    pthread_mutex_lock(&orphan_mu);
    int slot = -1;
    for (int i = 0; i < ORPHAN_GROUPS; i++) {
        if (orphan_groups[i].pgid == pgid) orphan_groups[i].pgid = 0;
        if (slot < 0 && (!orphan_groups[i].pgid || now > orphan_groups[i].until_ms)) slot = i;
    }
    if (watch && slot >= 0) {
        orphan_groups[slot].pgid = pgid;
        orphan_groups[slot].until_ms = now + ORPHAN_WAIT_MS;
    }
    pthread_mutex_unlock(&orphan_mu);
}

void gb_run_reap_orphans(void) {
    int64_t now = gb_mono_ms();
    pthread_mutex_lock(&orphan_mu);
    for (int i = 0; i < ORPHAN_GROUPS; i++) {
        pid_t g = orphan_groups[i].pgid;
        if (!g) continue;
        pid_t w;
        while ((w = waitpid(-g, NULL, WNOHANG)) > 0) {
        }
        if ((w < 0 && errno == ECHILD) || now > orphan_groups[i].until_ms)
            orphan_groups[i].pgid = 0; /* none left (or given up) */
    }
    pthread_mutex_unlock(&orphan_mu);
}

struct gb_run {
    pid_t pid;
    int fd;     /* read end of the output pipe; -1 at EOF */
    int rdv_fd; /* the agent's end of the rendezvous channel, or -1 */
    char dir[4096];
    char tail[GB_TAIL_BYTES]; /* ring buffer */
    size_t tail_len, tail_pos;
    int64_t deadline_ms, kill_at_ms; /* monotonic; kill_at 0 = no SIGKILL scheduled */
    int64_t stop_by_ms;              /* gb_run_stop: TERM sent, SIGKILL at this time */
    int timeout_s, grace_ms;
    int timed_out, cancelled, exited, wstatus;
    int status_lost;    /* exited, but its wait status and CPU time were never ours to read */
    uint64_t cpu_ticks; /* the reaped worker's user + system time, its children's included */
    char cancel_why[256];
    int64_t started_wall, finished_wall;
};

int gb_run_fd(const gb_run_t *r) {
    return r->fd;
}
int gb_run_pid(const gb_run_t *r) {
    return (int)r->pid;
}
int gb_run_cpu_ticks(const gb_run_t *r, uint64_t *ticks) {
    if (!r->exited || r->status_lost) return -1;
    *ticks = r->cpu_ticks;
    return 0;
}
int gb_run_rdv_fd(const gb_run_t *r) {
    return r->rdv_fd;
}
void gb_run_rdv_close(gb_run_t *r) {
    if (r->rdv_fd >= 0) close(r->rdv_fd);
    r->rdv_fd = -1;
}

/* An empty result file with RECORD_MAX bytes of blocks allocated past its
 * end (FALLOC_FL_KEEP_SIZE): the worker writes its record into them, so a
 * disk that fills while the job runs (a minutes-long training run) cannot
 * cost the measurement. No room for it: the job is refused before it starts
 * rather than lost at the end. A file system without fallocate gets no
 * reservation. */
static int reserve_record(const char *path, int keep, char *err, size_t errlen) {
    if (!keep) unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && keep && errno == EEXIST) return 0; /* the worker wrote its record */
    if (fd < 0) {
        gb_fmt(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, RECORD_MAX) != 0 && errno != EOPNOTSUPP &&
        errno != ENOSYS) {
        gb_fmt(err, errlen, "no room for the result record (%u KiB) in %s: %s", RECORD_MAX >> 10,
               path, strerror(errno));
        rc = -1;
    }
    close(fd);
    if (rc != 0) unlink(path);
    return rc;
}

int gb_run_restore_dir(const gb_run_t *self, char *err, size_t errlen) {
    char out_path[4200];
    if (gb_mkdir_p(self->dir, err, errlen) != 0) return -1;
    if (gb_fmt(out_path, sizeof out_path, "%s/result.json", self->dir) != 0) {
        gb_fmt(err, errlen, "job directory path too long");
        return -1;
    }
    return reserve_record(out_path, 1, err, errlen);
}

gb_run_t *gb_run_start(const char *exe, const char *dir, const char *job_json, int timeout_s,
                       int kill_grace_ms, char *err, size_t errlen) {
    return gb_run_start_ex(exe, dir, job_json, timeout_s, kill_grace_ms, 0, err, errlen);
}

gb_run_t *gb_run_start_ex(const char *exe, const char *dir, const char *job_json, int timeout_s,
                          int kill_grace_ms, int rdv, char *err, size_t errlen) {
    char job_path[4200], out_path[4200];
    if (gb_fmt(job_path, sizeof job_path, "%s/job.json", dir) != 0 ||
        gb_fmt(out_path, sizeof out_path, "%s/result.json", dir) != 0) {
        gb_fmt(err, errlen, "job directory path too long");
        return NULL;
    }
    if (gb_write_file_atomic(job_path, job_json, strlen(job_json), err, errlen) != 0) return NULL;
    if (reserve_record(out_path, 0, err, errlen) != 0) return NULL;
    gb_run_t *r = calloc(1, sizeof *r);
    if (!r) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    gb_copy(r->dir, sizeof r->dir, dir);
    r->fd = -1;
    r->rdv_fd = -1;
    r->timeout_s = timeout_s;
    r->grace_ms = kill_grace_ms;
    int p[2] = {-1, -1}, sv[2] = {-1, -1};
    char **envp = NULL;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(p, O_CLOEXEC) != 0) {
        gb_fmt(err, errlen, "cannot create the output pipe: %s", strerror(errno));
        goto err;
    }
    if (rdv && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        gb_fmt(err, errlen, "cannot create the rendezvous channel: %s", strerror(errno));
        goto err;
    }
    /* argv[0] "gpubench", so ps shows "gpubench worker --job ..." even
     * when exe is /proc/self/exe (the worker sets its name to match) */
    const char *arg0 = strcmp(exe, "/proc/self/exe") == 0 ? "gpubench" : exe;
    char *const argv[] = {(char *)arg0, "worker", "--job", job_path, "--out", out_path, NULL};
    /* CUDA numbers GPUs fastest first unless told otherwise; NVML (the
     * inventory, the telemetry sampler) by PCI bus id. The worker's GPU i
     * must be the agent's GPU i, so it gets PCI order, whatever the
     * agent's environment says: another order there had the telemetry
     * sample (and judge) a GPU the job did not use on a node of mixed
     * GPUs (the inventory says it overrides one: inventory.c) */
    extern char **environ;
    size_t n_env = 0, k = 0;
    while (environ[n_env])
        n_env++;
    envp = calloc(n_env + 2, sizeof *envp);
    if (!envp) {
        gb_fmt(err, errlen, "out of memory");
        goto err;
    }
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "CUDA_DEVICE_ORDER=", 18) != 0) envp[k++] = environ[i];
    envp[k] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
    pid_t parent = getpid();
    r->started_wall = gb_wall_ms();
    /* every signal held from before the fork until the child has put its
     * handlers back to the default: the agent's own (stop on SIGTERM/SIGINT,
     * reload on SIGHUP) must never run in the child, where a cancel's
     * SIGTERM to the group would set the agent's flag in this copy and be
     * lost, and the worker would run until the KILL after the grace. Held,
     * it waits, and the unmask below delivers it to the default action. */
    sigset_t all, old_mask;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_mask);
    pid_t pid = fork();
    if (pid < 0) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        gb_fmt(err, errlen, "fork: %s", strerror(errno));
        goto err;
    }
    if (pid == 0) {
        /* child: async-signal-safe calls only until exec */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127); /* the agent died before prctl */
        dup2(devnull, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        if (sv[1] >= 0) {
            /* dup2 onto itself keeps close-on-exec: clear it then */
            if (sv[1] == GB_RDV_FD)
                fcntl(GB_RDV_FD, F_SETFD, 0);
            else
                dup2(sv[1], GB_RDV_FD);
        }
        /* every signal as new, then let in: the agent's handlers gone (a
         * cancel's TERM held since the fork then ends the worker), and also
         * those ignored by whoever started the agent (a shell script's
         * background job ignores SIGQUIT/SIGINT). One ignored here that
         * came while held (the hangup the agent ignores, to the group the
         * child is still in) waits, where unheld it was dropped: set to
         * ignored once more it is dropped, and does not end the worker */
        struct sigaction dfl, ign, cur;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        ign = dfl;
        ign.sa_handler = SIG_IGN;
        for (int sig = 1; sig < NSIG; sig++) {
            if (sig == SIGKILL || sig == SIGSTOP) continue;
            if (sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
                cur.sa_handler == SIG_IGN)
                sigaction(sig, &ign, NULL);
            sigaction(sig, &dfl, NULL);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        close_range(sv[1] >= 0 ? GB_RDV_FD + 1 : 3, ~0U, 0);
        execve(exe, argv, envp);
        static const char msg[] = "agent: cannot exec the worker\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    setpgid(pid, pid);     /* also here: whichever runs first */
    orphans_watch(pid, 0); /* a group of that number watched is gone: not this one's */
    free(envp);
    close(p[1]);
    close(devnull);
    if (sv[1] >= 0) {
        close(sv[1]);
        r->rdv_fd = sv[0];
        fcntl(r->rdv_fd, F_SETFL, fcntl(r->rdv_fd, F_GETFL) | O_NONBLOCK);
    }
    r->pid = pid;
    r->fd = p[0];
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    r->deadline_ms = gb_mono_ms() + (int64_t)timeout_s * 1000;
    return r;
err:
    free(envp);
    if (devnull >= 0) close(devnull);
    if (p[0] >= 0) close(p[0]);
    if (p[1] >= 0) close(p[1]);
    if (sv[0] >= 0) close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    free(r);
    return NULL;
}

void gb_run_limit_from_now(gb_run_t *r, int64_t ms) {
    if (!r || r->timed_out) return;
    r->deadline_ms = gb_mono_ms() + (ms > 0 ? ms : 0) + (int64_t)r->timeout_s * 1000;
}

static void tail_add(gb_run_t *r, const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        r->tail[(r->tail_pos + r->tail_len) % GB_TAIL_BYTES] = buf[i];
        if (r->tail_len < GB_TAIL_BYTES)
            r->tail_len++;
        else
            r->tail_pos = (r->tail_pos + 1) % GB_TAIL_BYTES;
    }
}

void gb_run_read(gb_run_t *r) {
    char buf[4096];
    while (r->fd >= 0) {
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n > 0) {
            tail_add(r, buf, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        close(r->fd); /* EOF, or an error: nothing more to read */
        r->fd = -1;
    }
}

static void kill_group(gb_run_t *r, int sig) {
    if (r->pid > 0 && !r->exited) kill(-r->pid, sig);
}

/* Reap the worker if it has ended: 1 when it has. */
static int reap(gb_run_t *r) {
    if (r->exited) return 1;
    int st;
    struct rusage ru;
    pid_t w = wait4(r->pid, &st, WNOHANG, &ru);
    if (w < 0 && errno == ECHILD) {
        /* ended, and reaped by the kernel: SIGCHLD ignored (inherited
         * across exec from whoever started us; main() sets it back, a
         * library may not). wait4 never returned it, and the job ran
         * for ever, its finished result never read */
        kill(-r->pid, SIGKILL);
        r->exited = 1;
        r->status_lost = 1;
        r->wstatus = 0;
        r->finished_wall = gb_wall_ms();
        return 1;
    }
    if (w != r->pid) return 0;
    /* what the worker started and left behind goes with it: its group
     * (a pgid is not given to a new process while members of it live) */
    kill(-r->pid, SIGKILL);
    r->exited = 1;
    r->wstatus = st;
    long hz = sysconf(_SC_CLK_TCK);
    double sec = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    r->cpu_ticks = (uint64_t)(sec * (double)(hz > 0 ? hz : 100) + 0.5);
    r->finished_wall = gb_wall_ms();
    kill(-r->pid, SIGKILL); /* anything the worker left behind in its group */
    return 1;
}

void gb_run_stop(gb_run_t *r) {
    if (!r || reap(r) || r->stop_by_ms) return;
    kill_group(r, SIGTERM);
    r->stop_by_ms = gb_mono_ms() + r->grace_ms;
}

void gb_run_cancel(gb_run_t *r, const char *why) {
    /* a worker that already died (killed from outside, crashed) before the
     * cancel came is reported as what it was, not as cancelled */
    if (reap(r) || r->cancelled) return;
    /* past its limit already: it timed out, and its KILL stays one grace
     * after the limit's TERM */
    if (r->timed_out) return;
    r->cancelled = 1;
    gb_copy(r->cancel_why, sizeof r->cancel_why, why && *why ? why : "cancelled by request");
    kill_group(r, SIGTERM);
    r->kill_at_ms = gb_mono_ms() + r->grace_ms;
}

int gb_run_poll(gb_run_t *r, int64_t now) {
    /* reaped first: a worker that ended while the agent's loop was held up
     * (a stopped agent, a slow fsync of the spool) ended in time, and its
     * result stands (it was thrown away as "timed out") */
    reap(r);
    if (!r->exited) {
        if (!r->timed_out && !r->cancelled && now >= r->deadline_ms) {
            r->timed_out = 1;
            kill_group(r, SIGTERM);
            r->kill_at_ms = now + r->grace_ms;
        }
        if (r->kill_at_ms && now >= r->kill_at_ms) {
            kill_group(r, SIGKILL);
            r->kill_at_ms = 0;
        }
        reap(r);
    }
    if (r->exited) gb_run_read(r);
    /* done once reaped and drained; a grandchild holding the pipe open is
     * ignored after the kill above */
    return r->exited ? 1 : 0;
}

static void tail_copy(const gb_run_t *r, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < r->tail_len; i++) {
        unsigned char c = (unsigned char)r->tail[(r->tail_pos + i) % GB_TAIL_BYTES];
        out[o++] = (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? (char)c : '?';
    }
    out[o] = '\0';
}

static void last_line(const char *tail, char *out, size_t len) {
    size_t n = strlen(tail);
    while (n && tail[n - 1] == '\n')
        n--;
    size_t start = n;
    while (start && tail[start - 1] != '\n')
        start--;
    snprintf(out, len, "%.*s", (int)(n - start), tail + start);
}

void gb_run_result(gb_run_t *r, gb_run_result_t *out) {
    memset(out, 0, sizeof *out);
    tail_copy(r, out->tail);
    out->started_ms = r->started_wall;
    out->finished_ms = r->finished_wall;
    char path[4200], err[256];
    char *text = NULL;
    size_t len = 0;
    cJSON *rec = NULL;
    if (gb_fmt(path, sizeof path, "%s/result.json", r->dir) == 0 &&
        gb_read_file(path, RECORD_MAX, &text, &len, err, sizeof err) == 0)
        rec = cJSON_ParseWithLength(text, len);
    const cJSON *rec_err =
        cJSON_IsObject(rec) ? cJSON_GetObjectItemCaseSensitive(rec, "error") : NULL;
    int st = r->wstatus;
    if (WIFEXITED(st))
        out->exit_code = WEXITSTATUS(st);
    else if (WIFSIGNALED(st))
        out->exit_code = -WTERMSIG(st);
    if (r->status_lost) out->exit_code = -1;
    if (r->cancelled) {
        out->status = GB_RUN_CANCELLED;
        gb_fmt(out->error, sizeof out->error, "%s", r->cancel_why);
    } else if (r->timed_out && cJSON_IsObject(rec) && !rec_err && !r->status_lost &&
               cJSON_AddStringToObject(rec, "worker_end",
                                       "killed at its time limit after it wrote this record") &&
               (out->record_json = cJSON_PrintUnformatted(rec)) != NULL) {
        /* the measurement is whole; what hung was the worker's exit (a
         * CUDA or NCCL teardown that never returns): it was a timeout,
         * the record dropped */
        out->status = GB_RUN_OK;
    } else if (r->timed_out) {
        out->status = GB_RUN_TIMEOUT;
        gb_fmt(out->error, sizeof out->error, "timed out after %d s (worker killed)", r->timeout_s);
    } else if (r->status_lost && !(cJSON_IsObject(rec) && !rec_err)) {
        /* no exit status to go by: a whole record is the worker's word */
        out->status = cJSON_IsString(rec_err) ? GB_RUN_FAILED : GB_RUN_CRASHED;
        if (cJSON_IsString(rec_err))
            gb_fmt(out->error, sizeof out->error, "%s", rec_err->valuestring);
        else
            gb_fmt(out->error, sizeof out->error,
                   "worker ended without a result record; its exit status was lost (SIGCHLD "
                   "ignored by the agent's parent?)");
    } else if (WIFSIGNALED(st)) {
        out->status = GB_RUN_CRASHED;
        gb_fmt(out->error, sizeof out->error, "worker killed by signal %d (%s)", WTERMSIG(st),
               strsignal(WTERMSIG(st)));
    } else if (WEXITSTATUS(st) == 0 && cJSON_IsObject(rec) && !rec_err) {
        out->status = GB_RUN_OK;
        out->record_json = text;
        text = NULL;
    } else if (cJSON_IsString(rec_err)) {
        out->status = GB_RUN_FAILED;
        gb_fmt(out->error, sizeof out->error, "%s", rec_err->valuestring);
    } else if (WEXITSTATUS(st) == 0) {
        out->status = GB_RUN_CRASHED;
        gb_fmt(out->error, sizeof out->error, "worker exited without a result record");
    } else {
        char line[300];
        last_line(out->tail, line, sizeof line);
        out->status = GB_RUN_FAILED;
        gb_fmt(out->error, sizeof out->error, "worker exited with status %d%s%s", WEXITSTATUS(st),
               line[0] ? ": " : "", line);
    }
    cJSON_Delete(rec);
    free(text);
}

void gb_run_destroy(gb_run_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_run_t *r = *self_p;
    if (!r->exited && r->pid > 0) {
        /* one grace for all: gb_run_stop has sent the TERM already when
         * an agent stops every slot (it waited a grace per slot in turn) */
        int64_t until = r->stop_by_ms ? r->stop_by_ms : gb_mono_ms() + r->grace_ms;
        if (!r->stop_by_ms) kill_group(r, SIGTERM);
        while (!r->exited && gb_mono_ms() < until) {
            int st;
            if (waitpid(r->pid, &st, WNOHANG) == r->pid)
                r->exited = 1;
            else
                usleep(10000);
        }
        if (!r->exited) {
            kill_group(r, SIGKILL);
            waitpid(r->pid, NULL, 0);
        }
        kill(-r->pid, SIGKILL); /* what the worker started that ignored the TERM */
    }
    if (r->pid > 0) orphans_watch(r->pid, 1);
    if (r->fd >= 0) close(r->fd);
    gb_run_rdv_close(r);
    free(r);
    *self_p = NULL;
}
