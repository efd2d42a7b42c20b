/* test_place.c - placement (common/gb_place.c): which node can run which
 * job, with which backend, and why not. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_place.h"

#include <string.h>

static gb_jobdef_t job(const char *json) {
    gb_jobdef_t j;
    char err[512];
    CHECKF(gb_jobdef_from_json(json, strlen(json), &j, err, sizeof err) == 0, "%s: %s", json, err);
    return j;
}

static void fits(const gb_node_caps_t *n, const char *json, const char *backend) {
    gb_jobdef_t j = job(json);
    char be[8], why[256] = "";
    CHECKF(gb_place_fits(n, &j, be, why, sizeof why), "%s on %s: %s", json, n->name, why);
    CHECKF(strcmp(be, backend) == 0, "%s on %s: backend %s, want %s", json, n->name, be, backend);
}

static void no_fit(const gb_node_caps_t *n, const char *json, const char *want) {
    gb_jobdef_t j = job(json);
    char be[8] = "x", why[256] = "";
    CHECKF(!gb_place_fits(n, &j, be, why, sizeof why), "%s fits %s", json, n->name);
    CHECKF(strstr(why, want), "reason '%s' lacks '%s'", why, want);
    CHECK(be[0] == '\0');
}

int main(void) {
    gb_node_caps_t cpu = {.name = "cpu-1",
                          .gpu_model = "AMD EPYC 9654",
                          .labels = "rack=a",
                          .kinds = "gemm,resnet50,sleep",
                          .n_gpus = 0,
                          .cpu_cores = 8};
    gb_node_caps_t h100 = {.name = "dgx-3",
                           .gpu_model = "NVIDIA H100 80GB HBM3",
                           .labels = "rack=b,fabric=ib",
                           .kinds = "",
                           .n_gpus = 8,
                           .cpu_cores = 112,
                           .has_nvlink = 1,
                           .nvlink_sets = 0x1fe, /* 1..8 */
                           .nvlink_known = 1};
    gb_node_caps_t pcie = {.name = "ws-1",
                           .gpu_model = "NVIDIA RTX 6000 Ada Generation",
                           .labels = "",
                           .kinds = "gemm,sleep",
                           .n_gpus = 2,
                           .cpu_cores = 32};

    /* backend resolution */
    fits(&cpu, "{\"kind\": \"gemm\"}", "cpu");
    fits(&h100, "{\"kind\": \"gemm\"}", "cuda");
    fits(&h100, "{\"kind\": \"gemm\", \"backend\": \"cpu\"}", "cpu");
    no_fit(&cpu, "{\"kind\": \"gemm\", \"backend\": \"cuda\"}", "has 0 GPU(s), the job needs 1");
    /* GPU counts and CPU replicas */
    fits(&h100, "{\"kind\": \"resnet50\", \"gpus\": 8}", "cuda");
    no_fit(&pcie, "{\"kind\": \"sleep\", \"gpus\": 4}", "has 2 GPU(s), the job needs 4");
    fits(&cpu, "{\"kind\": \"resnet50\", \"gpus\": 4}", "cpu");
    no_fit(&cpu, "{\"kind\": \"resnet50\", \"gpus\": 16}", "has 8 cores, too few for 16");
    /* precision and interconnect */
    no_fit(&cpu, "{\"kind\": \"resnet50\", \"precision\": \"fp16\"}", "fp16 needs a GPU");
    no_fit(&cpu, "{\"kind\": \"resnet50\", \"precision\": \"tf32\"}", "tf32 needs a GPU");
    fits(&cpu, "{\"kind\": \"resnet50\", \"precision\": \"bf16\"}", "cpu");
    /* a node that reports its CPU's precisions: bf16 only with avx512_bf16
     * (an older agent reports none and is taken at its word) */
    gb_node_caps_t avx2 = cpu, bf16cpu = cpu;
    avx2.cpu_precisions = "fp32";
    bf16cpu.cpu_precisions = "fp32,bf16";
    no_fit(&avx2, "{\"kind\": \"resnet50\", \"precision\": \"bf16\"}",
           "node cpu-1's CPU trains in fp32 only (bf16 needs avx512_bf16)");
    fits(&avx2, "{\"kind\": \"resnet50\", \"precision\": \"fp32\"}", "cpu");
    fits(&bf16cpu, "{\"kind\": \"resnet50\", \"precision\": \"bf16\"}", "cpu");
    /* gemm: every precision on a GPU; on a CPU fp32 (oneDNN's sgemm) and
     * bf16 (its matmul) where the CPU has avx512_bf16 */
    fits(&h100, "{\"kind\": \"gemm\", \"precision\": \"fp16\"}", "cuda");
    fits(&h100, "{\"kind\": \"gemm\", \"precision\": \"tf32\"}", "cuda");
    fits(&bf16cpu, "{\"kind\": \"gemm\", \"precision\": \"fp32\"}", "cpu");
    fits(&bf16cpu, "{\"kind\": \"gemm\", \"precision\": \"bf16\"}", "cpu");
    fits(&cpu, "{\"kind\": \"gemm\", \"precision\": \"bf16\"}", "cpu"); /* not reported */
    no_fit(&avx2, "{\"kind\": \"gemm\", \"precision\": \"bf16\"}",
           "node cpu-1's CPU multiplies in fp32 only (bf16 needs avx512_bf16)");
    no_fit(&bf16cpu, "{\"kind\": \"gemm\", \"precision\": \"tf32\"}",
           "gemm in tf32 needs a GPU (the CPU's gemm runs in fp32 and bf16) and node cpu-1 "
           "would run it on the CPU");
    no_fit(&h100, "{\"kind\": \"gemm\", \"precision\": \"fp16\", \"backend\": \"cpu\"}",
           "gemm in fp16 needs a GPU");
    gb_node_caps_t gpu_avx2 = h100;
    gpu_avx2.cpu_precisions = "fp32"; /* a GPU node's bf16 runs on its GPUs */
    fits(&gpu_avx2, "{\"kind\": \"resnet50\", \"precision\": \"bf16\"}", "cuda");
    fits(&h100, "{\"kind\": \"resnet50\", \"gpus\": 2, \"interconnect\": \"nvlink\"}", "cuda");
    fits(&h100, "{\"kind\": \"resnet50\", \"gpus\": 2, \"interconnect\": \"pcie\"}", "cuda");
    gb_node_caps_t pcie2 = pcie;
    pcie2.kinds = NULL;
    no_fit(&pcie2, "{\"kind\": \"resnet50\", \"gpus\": 2, \"interconnect\": \"nvlink\"}",
           "no NVLink");
    fits(&pcie2, "{\"kind\": \"resnet50\", \"gpus\": 1, \"interconnect\": \"nvlink\"}", "cuda");
    no_fit(&cpu, "{\"kind\": \"resnet50\", \"interconnect\": \"pcie\"}",
           "interconnect pcie needs GPUs");
    /* NVLink joining the GPUs a job takes (0..gpus-1), not just somewhere:
     * bridges join 0-1 and 2-3 */
    int ba[2] = {0, 2}, bb[2] = {1, 3}, bl[2] = {4, 4};
    CHECK(gb_nvlink_sets(4, ba, bb, bl, 2) == 0x6); /* {0}, {0,1} */
    /* a hybrid cube mesh need not link every pair: joined is enough
     * (0-1, 1-2, 2-3, 3-0: a ring; no 0-2, 1-3) */
    int ra[4] = {0, 1, 2, 3}, rb[4] = {1, 2, 3, 0}, rl[4] = {2, 2, 2, 2};
    CHECK(gb_nvlink_sets(4, ra, rb, rl, 4) == 0x1e);
    /* 0-1 and 1-3, 2-3: {0,1,2} is not joined (2 reaches 1 only through 3),
     * {0,1,2,3} is */
    int ca[3] = {0, 1, 2}, cb[3] = {1, 3, 3}, cl[3] = {1, 1, 1};
    CHECK(gb_nvlink_sets(4, ca, cb, cl, 3) == 0x16);
    cl[1] = 0; /* no lanes: no link */
    CHECK(gb_nvlink_sets(4, ca, cb, cl, 3) == 0x6);
    CHECK(gb_nvlink_sets(1, NULL, NULL, NULL, 0) == 0x2 &&
          gb_nvlink_sets(0, NULL, NULL, NULL, 0) == 0);
    gb_node_caps_t bridged = pcie;
    bridged.name = "ws-2";
    bridged.kinds = NULL;
    bridged.n_gpus = 4;
    bridged.has_nvlink = 1;
    bridged.nvlink_sets = gb_nvlink_sets(4, ba, bb, bl, 2);
    bridged.nvlink_known = 1;
    fits(&bridged, "{\"kind\": \"resnet50\", \"gpus\": 2, \"interconnect\": \"nvlink\"}", "cuda");
    no_fit(&bridged, "{\"kind\": \"resnet50\", \"gpus\": 4, \"interconnect\": \"nvlink\"}",
           "node ws-2's GPUs 0..3, which a job of 4 GPUs takes, are not joined by NVLink");
    no_fit(&bridged, "{\"kind\": \"resnet50\", \"gpus\": 3, \"interconnect\": \"nvlink\"}",
           "are not joined by NVLink");
    fits(&bridged, "{\"kind\": \"resnet50\", \"gpus\": 4, \"interconnect\": \"pcie\"}", "cuda");
    bridged.nvlink_known = 0; /* stored before links were kept: any NVLink will do */
    fits(&bridged, "{\"kind\": \"resnet50\", \"gpus\": 4, \"interconnect\": \"nvlink\"}", "cuda");
    /* kinds the node offers */
    no_fit(&pcie, "{\"kind\": \"resnet50\"}", "cannot run resnet50 jobs");
    /* globs on the node name or the GPU model (the CPU model on CPU nodes) */
    fits(&h100, "{\"kind\": \"gemm\", \"nodes\": \"dgx-*\"}", "cuda");
    fits(&h100, "{\"kind\": \"gemm\", \"nodes\": \"*H100*\"}", "cuda");
    fits(&cpu, "{\"kind\": \"gemm\", \"nodes\": \"AMD EPYC*\"}", "cpu");
    no_fit(&cpu, "{\"kind\": \"gemm\", \"nodes\": \"*H100*\"}", "does not match '*H100*'");
    /* labels: all must match */
    fits(&h100, "{\"kind\": \"gemm\", \"labels\": \"fabric=ib\"}", "cuda");
    fits(&h100, "{\"kind\": \"gemm\", \"labels\": \"fabric=ib,rack=b\"}", "cuda");
    no_fit(&h100, "{\"kind\": \"gemm\", \"labels\": \"fabric=ib,rack=a\"}",
           "node dgx-3 lacks labels rack=a (it has rack=b,fabric=ib)");
    no_fit(&pcie, "{\"kind\": \"gemm\", \"labels\": \"rack=a\"}",
           "lacks labels rack=a (it has none)");
    /* the job's own choice of nodes, apart from whether they can run it */
    gb_jobdef_t j = job("{\"kind\": \"resnet50\", \"precision\": \"tf32\", \"backend\": \"cpu\", "
                        "\"labels\": \"rack=a\"}");
    CHECK(gb_place_selected(&cpu, &j)); /* chosen, though it cannot run tf32 */
    CHECK(!gb_place_selected(&h100, &j) && !gb_place_selected(&pcie, &j));
    j = job("{\"kind\": \"resnet50\", \"nodes\": \"dgx-*\"}");
    CHECK(gb_place_selected(&h100, &j) && !gb_place_selected(&cpu, &j));
    CHECK(!gb_place_selected(&pcie, &j)); /* offers no resnet50 either */
    return 0;
}
