/* test_nccl_env.c (CPU, CI) - the NCCL environment gb_cuda_nccl_setup sets
 * once per process, before NCCL's first communicator: INFO logging into a
 * file of ours, and peers connected at ncclCommInitRank rather than at the
 * first collective (NCCL_RUNTIME_CONNECT=0: a replica failing before its
 * first collective would leave the others blocked in NCCL's lazy connect,
 * which nothing polls); a user's NCCL_RUNTIME_CONNECT is kept. No GPU is
 * needed: with one GPU in the process nothing asks NVML or the driver. Also
 * the verdict on NVML's NVLink answers that interconnect nvlink and pcie
 * act on (gb_nvlink_verdict), for layouts no machine here has.
 *   test_nccl_env [EXPECTED_RUNTIME_CONNECT]   (default "0") */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cuda_dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gb_nvlink_verdict: what interconnect nvlink and pcie decide on */
static void verdicts(void) {
    enum { N = 4 };
    unsigned char adj[N * N], sw[N];
    char why[128];
    int any = -2;
    /* PCIe cards bridged two by two (0-1, 2-3): not every pair, but some:
     * pcie must still turn P2P off, or NCCL takes the bridges */
    memset(adj, 0, sizeof adj);
    memset(sw, 0, sizeof sw);
    adj[0 * N + 1] = adj[1 * N + 0] = adj[2 * N + 3] = adj[3 * N + 2] = 1;
    CHECK(gb_nvlink_verdict(N, adj, sw, &any, why, sizeof why) == 0 && any == 1);
    CHECKF(strcmp(why, "GPUs 0 and 2 have no NVLink between them") == 0, "why: %s", why);
    /* every pair linked directly */
    memset(adj, 1, sizeof adj);
    CHECK(gb_nvlink_verdict(N, adj, sw, &any, why, sizeof why) == 1 && any == 1);
    /* NVSwitches: no direct link, every GPU on the fabric */
    memset(adj, 0, sizeof adj);
    memset(sw, 1, sizeof sw);
    CHECK(gb_nvlink_verdict(N, adj, sw, &any, why, sizeof why) == 1 && any == 1);
    /* one GPU off the fabric: the others still joined */
    sw[3] = 0;
    CHECK(gb_nvlink_verdict(N, adj, sw, &any, why, sizeof why) == 0 && any == 1);
    CHECKF(strstr(why, "GPUs 0 and 3"), "why: %s", why);
    /* plain PCIe */
    memset(sw, 0, sizeof sw);
    CHECK(gb_nvlink_verdict(N, adj, sw, &any, why, sizeof why) == 0 && any == 0);
    printf("NVLink verdicts: bridged pairs, full mesh, NVSwitch, one off the switch, none\n");
}

int main(int argc, char **argv) {
    const char *want = argc > 1 ? argv[1] : "0";
    verdicts();
    char dir[256];
    snprintf(dir, sizeof dir, "%s", "/tmp/gb-nccl-env-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    setenv("TMPDIR", dir, 1); /* NCCL's log directory goes under it */
    int nvlink = -2;
    char err[256] = "";
    CHECKF(gb_cuda_nccl_setup("auto", 1, &nvlink, err, sizeof err) == 0, "%s", err);
    CHECK(nvlink == 0);
    const char *rc = getenv("NCCL_RUNTIME_CONNECT");
    CHECKF(rc && strcmp(rc, want) == 0, "NCCL_RUNTIME_CONNECT=%s, want %s", rc ? rc : "(unset)",
           want);
    const char *dbg = getenv("NCCL_DEBUG"), *file = getenv("NCCL_DEBUG_FILE");
    CHECK(dbg && strcmp(dbg, "INFO") == 0);
    CHECKF(file && strncmp(file, dir, strlen(dir)) == 0, "NCCL_DEBUG_FILE=%s", file ? file : "");
    /* the set-up is once per process: another mode is refused */
    CHECK(gb_cuda_nccl_setup("pcie", 1, &nvlink, err, sizeof err) == -1 &&
          strstr(err, "reads its environment once"));
    printf("NCCL_RUNTIME_CONNECT=%s, NCCL_DEBUG=%s, NCCL_DEBUG_FILE=%s\n", rc, dbg, file);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}
