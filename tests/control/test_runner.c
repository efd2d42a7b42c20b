/* test_runner.c - worker processes (agent/runner.c) with the real gpubench
 * binary as the worker: how a job can end (ok, failed, crashed, timed out,
 * cancelled, not started) and what is kept of its output.
 * `test_runner GPUBENCH CASE`. */
#define _GNU_SOURCE
#include "check.h"
#include "gb_util.h"
#include "runner.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[128];
static volatile sig_atomic_t got_term;
static int hup_at_fork; /* case hup_at_fork: the child gets a SIGHUP in our fork */

/* The runner's fork (agent/runner.c, linked in here, calls this one): a
 * signal can then reach the child at the one moment a test cannot time,
 * between the fork and the child's reset of its handlers. The child sends
 * it to itself (sent by the parent, it could come after the reset, where
 * a hangup ends the worker as it should). */
pid_t fork(void) {
    static pid_t (*real)(void);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "fork");
    pid_t pid = real();
    if (pid == 0 && hup_at_fork) kill(getpid(), SIGHUP);
    return pid;
}

static void on_term(int sig) {
    (void)sig;
    got_term = 1;
}

/* Has process pid ended (gone, or a zombie nobody reaps)? */
static int ended(pid_t pid) {
    char p[64], st[512];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 1;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = '\0';
    const char *rp = strrchr(st, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Poll r until its worker has ended (10 s at most), then its result; r freed. */
static void finish(gb_run_t *r, gb_run_result_t *out) {
    for (int64_t t0 = gb_mono_ms(); !gb_run_poll(r, gb_mono_ms());)
        CHECKF(gb_mono_ms() - t0 < 10000, "the worker never ended");
    gb_run_result(r, out);
    gb_run_destroy(&r);
}

/* A "worker" script in dir: name, text. */
static void script(const char *name, const char *text, char *exe, size_t len) {
    snprintf(exe, len, "%s/%s", dir, name);
    FILE *f = fopen(exe, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
    CHECK(chmod(exe, 0700) == 0);
}

/* exe started on job 5 attempt 2 with these parameters, grace 300 ms. */
static gb_run_t *start(const char *exe, const char *params, int timeout_s) {
    char job[1024], err[512];
    snprintf(job, sizeof job, "{\"job_id\": 5, \"attempt\": 2, \"params\": %s}", params);
    gb_run_t *r = gb_run_start(exe, dir, job, timeout_s, 300, err, sizeof err);
    CHECKF(r, "%s", err);
    return r;
}

/* Run exe on a sleep job until it ends; cancel_after_ms >= 0 cancels it. */
static void run(const char *exe, const char *params, int timeout_s, int cancel_after_ms,
                gb_run_result_t *out) {
    gb_run_t *r = start(exe, params, timeout_s);
    CHECK(gb_run_pid(r) > 0 && gb_run_fd(r) >= 0);
    int64_t t0 = gb_mono_ms();
    int cancelled = 0;
    while (!gb_run_poll(r, gb_mono_ms())) {
        gb_run_read(r);
        if (cancel_after_ms >= 0 && !cancelled && gb_mono_ms() - t0 >= cancel_after_ms) {
            gb_run_cancel(r, NULL);
            cancelled = 1;
        }
        CHECKF(gb_mono_ms() - t0 < 30000, "the worker never ended");
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    gb_run_result(r, out);
    gb_run_destroy(&r);
    CHECK(r == NULL);
}

int main(int argc, char **argv) {
    CHECKF(argc == 3, "usage: test_runner GPUBENCH CASE");
    const char *gb = argv[1], *c = argv[2];
    snprintf(dir, sizeof dir, "/tmp/gb-runner-XXXXXX");
    CHECK(mkdtemp(dir));
    gb_run_result_t res;
    if (strcmp(c, "ok") == 0) {
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 30}", 10, -1, &res);
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        CHECK(res.exit_code == 0 && res.record_json && strstr(res.record_json, "\"slept_ms\""));
        CHECK(strstr(res.tail, "worker: job 5 attempt 2: sleep on cpu"));
        CHECK(res.finished_ms >= res.started_ms + 30);
        free(res.record_json);
    } else if (strcmp(c, "sigchld_ignored") == 0) {
        /* SIGCHLD ignored (as inherited across exec): the kernel reaps the
         * worker, wait4 says ECHILD, and the run never ended; now it ends,
         * its record taken, and a worker that wrote none is said to have
         * crashed with why */
        signal(SIGCHLD, SIG_IGN);
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 30}", 10, -1, &res);
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        CHECK(res.record_json && strstr(res.record_json, "\"slept_ms\""));
        free(res.record_json);
        char exe[200];
        script("norec.sh", "#!/bin/sh\nexit 0\n", exe, sizeof exe);
        run(exe, "{}", 10, -1, &res);
        CHECKF(res.status == GB_RUN_CRASHED && strstr(res.error, "its exit status was lost"),
               "status %d: %s", res.status, res.error);
        unlink(exe);
    } else if (strcmp(c, "reserved") == 0) {
        /* the result file exists from the start, empty, with the record's
         * 512 KiB of blocks allocated past its end (where the file system
         * has fallocate: probed on a file of our own) */
        char probe[200];
        snprintf(probe, sizeof probe, "%s/probe", dir);
        int pfd = open(probe, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        CHECK(pfd >= 0);
        int can = fallocate(pfd, FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
        close(pfd);
        unlink(probe);
        gb_run_t *r =
            start(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 300}", 10);
        char out[200];
        struct stat st;
        snprintf(out, sizeof out, "%s/result.json", dir);
        CHECK(stat(out, &st) == 0 && st.st_size == 0);
        if (can)
            CHECKF((long long)st.st_blocks * 512 >= 512 << 10, "%lld blocks reserved",
                   (long long)st.st_blocks);
        else
            printf("no fallocate on %s: nothing reserved\n", dir);
        finish(r, &res);
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        CHECK(res.record_json && strstr(res.record_json, "\"slept_ms\""));
        /* the record written in place, the file cut to its length */
        CHECK(stat(out, &st) == 0 && (size_t)st.st_size == strlen(res.record_json));
        free(res.record_json);
    } else if (strcmp(c, "failed") == 0) {
        run(gb,
            "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 0, \"fail\": \"no "
            "luck\"}",
            10, -1, &res);
        CHECK(res.status == GB_RUN_FAILED && res.exit_code == 1 && !res.record_json);
        CHECKF(strcmp(res.error, "no luck") == 0, "%s", res.error);
        CHECK(strstr(res.tail, "worker: error: no luck"));
    } else if (strcmp(c, "crashed") == 0) {
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 0, \"signal\": 6}",
            10, -1, &res);
        CHECK(res.status == GB_RUN_CRASHED && res.exit_code == -6);
        CHECKF(strstr(res.error, "worker killed by signal 6 (Aborted)"), "%s", res.error);
        CHECK(strstr(res.tail, "raising signal 6"));
    } else if (strcmp(c, "timeout") == 0) {
        int64_t t0 = gb_mono_ms();
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 60000}", 1, -1, &res);
        int64_t took = gb_mono_ms() - t0;
        CHECK(res.status == GB_RUN_TIMEOUT);
        CHECKF(strcmp(res.error, "timed out after 1 s (worker killed)") == 0, "%s", res.error);
        /* the limit plus at most the 300 ms grace, plus scheduling slack */
        CHECKF(took >= 1000 && took < 3000, "took %lld ms", (long long)took);
    } else if (strcmp(c, "record_then_hang") == 0) {
        /* a whole record written, then an exit that hangs (a CUDA or NCCL
         * teardown): the measurement stands, its record saying how the
         * worker ended (it was a timeout, the record dropped) */
        char exe[200];
        script("hang.sh",
               "#!/bin/sh\nprintf '{\"kind\": \"sleep\", \"slept_ms\": 5}' > \"$5\"\n"
               "exec sleep 100\n",
               exe, sizeof exe);
        run(exe, "{}", 1, -1, &res);
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        CHECKF(res.record_json && strstr(res.record_json, "\"slept_ms\":5") &&
                   strstr(res.record_json,
                          "\"worker_end\":\"killed at its time limit after it wrote this record\""),
               "%s", res.record_json ? res.record_json : "(none)");
        free(res.record_json);
        unlink(exe);
    } else if (strcmp(c, "cancel") == 0) {
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 60000}", 100, 100,
            &res);
        CHECK(res.status == GB_RUN_CANCELLED && strcmp(res.error, "cancelled by request") == 0);
        CHECK(res.exit_code == -SIGTERM);
    } else if (strcmp(c, "killed_then_cancelled") == 0) {
        /* killed from outside, and the stop for it arrives before the next
         * poll has reaped it (a rank of a multi-node job whose death failed
         * the job): it reports the signal, not "cancelled by request" */
        gb_run_t *r =
            start(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 60000}", 100);
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        CHECK(kill(gb_run_pid(r), SIGKILL) == 0);
        nanosleep(&ts, NULL); /* a zombie now, not reaped */
        gb_run_cancel(r, "stopped: rank 0 failed");
        finish(r, &res);
        CHECKF(res.status == GB_RUN_CRASHED && res.exit_code == -SIGKILL, "status %d: %s",
               res.status, res.error);
        CHECKF(strstr(res.error, "worker killed by signal 9"), "%s", res.error);
    } else if (strcmp(c, "bad_job") == 0) {
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"auto\"}", 10, -1, &res);
        CHECK(res.status == GB_RUN_FAILED && res.exit_code == 2);
        CHECKF(strstr(res.error, "backend must be resolved"), "%s", res.error);
    } else if (strcmp(c, "noexec") == 0) {
        run("/nonexistent/gpubench", "{\"kind\": \"sleep\", \"backend\": \"cpu\"}", 10, -1, &res);
        CHECK(res.status == GB_RUN_FAILED && res.exit_code == 127);
        CHECKF(strstr(res.error, "worker exited with status 127: agent: cannot exec the worker"),
               "%s", res.error);
    } else if (strcmp(c, "tail") == 0) {
        /* a "worker" that floods its output with binary noise, then says one line */
        char exe[256];
        script("noisy.sh",
               "#!/bin/sh\nhead -c 50000 /dev/urandom\necho\necho the last line\nexit 3\n", exe,
               sizeof exe);
        run(exe, "{\"kind\": \"sleep\", \"backend\": \"cpu\"}", 10, -1, &res);
        CHECK(res.status == GB_RUN_FAILED && res.exit_code == 3);
        CHECKF(strstr(res.error, "worker exited with status 3: the last line"), "%s", res.error);
        CHECKF(strlen(res.tail) == GB_TAIL_BYTES, "tail of %zu bytes", strlen(res.tail));
        for (const char *p = res.tail; *p; p++)
            CHECKF(*p == '\n' || *p == '\t' || (*p >= 0x20 && *p < 0x7f), "byte %d in the tail",
                   *p);
        unlink(exe);
    } else if (strcmp(c, "late_poll") == 0) {
        /* the worker ends in time, but the agent's loop is held up past the
         * limit (a stopped agent, a slow fsync) before it polls: the result
         * stands (it was "timed out after 1 s (worker killed)") */
        gb_run_t *r =
            start(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 50}", 1);
        struct timespec ts = {1, 600000000};
        nanosleep(&ts, NULL);
        finish(r, &res);
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        free(res.record_json);
    } else if (strcmp(c, "group") == 0) {
        /* what a worker started goes with it when the agent stops: a child
         * that ignores SIGTERM outlived the agent under pid 1 */
        char exe[256], sh[600], pidfile[200];
        snprintf(pidfile, sizeof pidfile, "%s/gc.pid", dir);
        snprintf(
            sh, sizeof sh,
            "#!/bin/sh\nsh -c 'trap \"\" TERM; exec sleep 60' &\necho $! > %s\nexec sleep 60\n",
            pidfile);
        script("spawner.sh", sh, exe, sizeof exe);
        gb_run_t *r = start(exe, "{}", 100);
        long gc = 0;
        for (int i = 0; i < 200 && gc <= 0; i++) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            FILE *f = fopen(pidfile, "r");
            if (f && fscanf(f, "%ld", &gc) != 1) gc = 0;
            if (f) fclose(f);
        }
        CHECKF(gc > 0 && !ended((pid_t)gc), "no grandchild (%ld)", gc);
        gb_run_stop(r);
        gb_run_destroy(&r);
        for (int i = 0; i < 100 && !ended((pid_t)gc); i++) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        CHECKF(ended((pid_t)gc), "the worker's child %ld outlived it", gc);
        unlink(pidfile);
        unlink(exe);
    } else if (strcmp(c, "stop_all") == 0) {
        /* three workers that ignore SIGTERM, grace 1 s each: the agent's
         * stop waits one grace for all (it waited one per slot in turn) */
        char exe[256], err[512];
        script("deaf.sh", "#!/bin/sh\ntrap '' TERM\nexec sleep 60\n", exe, sizeof exe);
        gb_run_t *r[3];
        char sub_dir[3][200];
        for (int i = 0; i < 3; i++) {
            snprintf(sub_dir[i], sizeof sub_dir[i], "%s/%d", dir, i);
            CHECK(mkdir(sub_dir[i], 0700) == 0);
            r[i] = gb_run_start(exe, sub_dir[i], "{\"job_id\": 5, \"attempt\": 2, \"params\": {}}",
                                100, 1000, err, sizeof err);
            CHECKF(r[i], "%s", err);
        }
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        int64_t t0 = gb_mono_ms();
        for (int i = 0; i < 3; i++)
            gb_run_stop(r[i]);
        for (int i = 0; i < 3; i++)
            gb_run_destroy(&r[i]);
        int64_t took = gb_mono_ms() - t0;
        CHECKF(took >= 900 && took < 2500, "stopping 3 deaf workers took %lld ms", (long long)took);
        for (int i = 0; i < 3; i++) {
            char p[1024];
            snprintf(p, sizeof p, "%s/job.json", sub_dir[i]);
            unlink(p);
            snprintf(p, sizeof p, "%s/result.json", sub_dir[i]);
            unlink(p);
            CHECK(rmdir(sub_dir[i]) == 0);
        }
        unlink(exe);
    } else if (strcmp(c, "cancel_at_fork") == 0) {
        /* the caller (the agent) has its own SIGTERM handler; a cancel that
         * comes before the child has put its handlers back to the default
         * (the child has not run yet: on two cores it often has not) must
         * still end the worker with that SIGTERM, not with the grace's KILL */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigemptyset(&sa.sa_mask);
        CHECK(sigaction(SIGTERM, &sa, NULL) == 0);
        int by_kill = 0;
        for (int i = 0; i < 40; i++) {
            gb_run_t *r = start(
                gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 60000}", 100);
            gb_run_cancel(r, NULL);
            finish(r, &res);
            CHECKF(res.status == GB_RUN_CANCELLED, "status %d: %s", res.status, res.error);
            if (res.exit_code != -SIGTERM) by_kill++;
        }
        CHECKF(by_kill == 0, "%d of 40 workers cancelled at their start outlived the SIGTERM",
               by_kill);
        CHECKF(!got_term, "the test's own handler ran in the test");
    } else if (strcmp(c, "hup_at_fork") == 0) {
        /* the agent ignores SIGHUP (an ssh session's end must not end it or
         * its jobs); a hangup that reaches the child before its reset,
         * held by the fork's mask, must be dropped as it was unheld, not
         * wait and kill the worker once its handlers are the default */
        CHECK(signal(SIGHUP, SIG_IGN) != SIG_ERR);
        hup_at_fork = 1;
        run(gb, "{\"kind\": \"sleep\", \"backend\": \"cpu\", \"duration_ms\": 30}", 10, -1, &res);
        hup_at_fork = 0;
        CHECKF(res.status == GB_RUN_OK, "status %d: %s", res.status, res.error);
        free(res.record_json);
    } else if (strcmp(c, "timeout_then_cancel") == 0) {
        /* a job past its limit, its worker deaf to the TERM, then cancelled
         * (a gang's stop, a user's cancel): it timed out, and the KILL comes
         * one grace after the limit's TERM, not one after the cancel */
        char exe[256], err[512];
        script("deaf.sh", "#!/bin/sh\ntrap '' TERM\nexec sleep 60\n", exe, sizeof exe);
        /* limit 1 s, grace 2 s: the KILL at 3 s; a cancel at 1.5 s pushed
         * it to 3.5 s. Timed from the start's return (its job file's
         * fsyncs are not the limit's) */
        gb_run_t *r = gb_run_start(exe, dir, "{\"job_id\": 5, \"attempt\": 2, \"params\": {}}", 1,
                                   2000, err, sizeof err);
        CHECKF(r, "%s", err);
        int64_t t0 = gb_mono_ms();
        int cancelled = 0;
        while (!gb_run_poll(r, gb_mono_ms())) {
            gb_run_read(r);
            if (!cancelled && gb_mono_ms() - t0 >= 1500) {
                gb_run_cancel(r, "stopped: rank 1 failed");
                cancelled = 1;
            }
            CHECKF(gb_mono_ms() - t0 < 30000, "the worker never ended");
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        int64_t took = gb_mono_ms() - t0;
        gb_run_result(r, &res);
        gb_run_destroy(&r);
        CHECK(cancelled);
        CHECKF(res.status == GB_RUN_TIMEOUT, "status %d: %s", res.status, res.error);
        CHECKF(strcmp(res.error, "timed out after 1 s (worker killed)") == 0, "%s", res.error);
        CHECK(res.exit_code == -SIGKILL);
        CHECKF(took >= 2900 && took < 3400, "took %lld ms", (long long)took);
        unlink(exe);
    } else if (strcmp(c, "no_record") == 0) {
        /* exits 0 without writing a record */
        char exe[256];
        script("silent.sh", "#!/bin/sh\nexit 0\n", exe, sizeof exe);
        run(exe, "{\"kind\": \"sleep\", \"backend\": \"cpu\"}", 10, -1, &res);
        CHECK(res.status == GB_RUN_CRASHED);
        CHECKF(strstr(res.error, "without a result record"), "%s", res.error);
        unlink(exe);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    char p[200];
    snprintf(p, sizeof p, "%s/job.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/result.json", dir);
    unlink(p);
    CHECK(rmdir(dir) == 0);
    return 0;
}
