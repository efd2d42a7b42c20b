/* gb_place.c - see gb_place.h. */
#include "gb_place.h"

#include "gb_util.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

/* Is item in the comma list (NULL or "": every item is)? */
static int in_list(const char *list, const char *item) {
    if (!list || !*list) return 1;
    size_t ilen = strlen(item);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == ilen && strncmp(p, item, len) == 0) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* The job's choice of nodes: kind offered, name or model glob, labels. */
static int selected(const gb_node_caps_t *node, const gb_jobdef_t *job, char *why, size_t whylen) {
    if (!in_list(node->kinds, job->kind)) {
        gb_fmt(why, whylen, "node %s cannot run %s jobs", node->name, job->kind);
        return 0;
    }
    const char *model = node->gpu_model ? node->gpu_model : "";
    if (fnmatch(job->nodes, node->name, 0) != 0 && fnmatch(job->nodes, model, 0) != 0) {
        gb_fmt(why, whylen, "node %s (%s) does not match '%s'", node->name, model, job->nodes);
        return 0;
    }
    if (!gb_labels_match(node->labels, job->labels)) {
        /* name only the labels it lacks, and what it has: "lacks labels
         * rack=a,pool=x" read as if the node had neither */
        char missing[512] = "";
        size_t used = 0;
        for (const char *w = job->labels; w && *w;) {
            const char *end = strchr(w, ',');
            size_t len = end ? (size_t)(end - w) : strlen(w);
            char one[256];
            if (len < sizeof one) {
                memcpy(one, w, len);
                one[len] = '\0';
                if (!gb_labels_match(node->labels, one) && used < sizeof missing) {
                    int n = snprintf(missing + used, sizeof missing - used, "%s%s", used ? "," : "",
                                     one);
                    if (n > 0) used += (size_t)n;
                }
            }
            w = end ? end + 1 : NULL;
        }
        gb_fmt(why, whylen, "node %s lacks labels %s (it has %s)", node->name,
               missing[0] ? missing : job->labels,
               node->labels && node->labels[0] ? node->labels : "none");
        return 0;
    }
    return 1;
}

int gb_place_selected(const gb_node_caps_t *node, const gb_jobdef_t *job) {
    char why[8];
    return selected(node, job, why, sizeof why);
}

int gb_place_fits(const gb_node_caps_t *node, const gb_jobdef_t *job, char *backend, char *why,
                  size_t whylen) {
    backend[0] = '\0';
    if (!selected(node, job, why, whylen)) return 0;
    const char *be = job->backend;
    if (strcmp(be, "auto") == 0) be = node->n_gpus > 0 ? "cuda" : "cpu";
    if (strcmp(be, "cuda") == 0) {
        if (node->n_gpus < job->gpus) {
            gb_fmt(why, whylen, "node %s has %d GPU(s), the job needs %d", node->name, node->n_gpus,
                   job->gpus);
            return 0;
        }
        if (strcmp(job->interconnect, "nvlink") == 0 && job->gpus > 1 && !node->has_nvlink) {
            gb_fmt(why, whylen, "node %s has no NVLink between its GPUs", node->name);
            return 0;
        }
        if (strcmp(job->interconnect, "nvlink") == 0 && job->gpus > 1 && node->nvlink_known &&
            (job->gpus > 63 || !((node->nvlink_sets >> job->gpus) & 1))) {
            gb_fmt(why, whylen,
                   "node %s's GPUs 0..%d, which a job of %d GPUs takes, are not joined by NVLink "
                   "(some of them reach the others only over PCIe or the CPUs)",
                   node->name, job->gpus - 1, job->gpus);
            return 0;
        }
    } else {
        if (job->gpus > node->cpu_cores) {
            gb_fmt(why, whylen, "node %s has %d cores, too few for %d CPU replicas", node->name,
                   node->cpu_cores, job->gpus);
            return 0;
        }
        if (strcmp(job->kind, "gemm") == 0 &&
            (strcmp(job->precision, "tf32") == 0 || strcmp(job->precision, "fp16") == 0)) {
            gb_fmt(why, whylen,
                   "gemm in %s needs a GPU (the CPU's gemm runs in fp32 and bf16) and node %s "
                   "would run it on the CPU",
                   job->precision, node->name);
            return 0;
        }
        if (strcmp(job->precision, "tf32") == 0 || strcmp(job->precision, "fp16") == 0) {
            gb_fmt(why, whylen, "%s needs a GPU and node %s would run it on the CPU",
                   job->precision, node->name);
            return 0;
        }
        if (job->precision[0] && node->cpu_precisions && node->cpu_precisions[0] &&
            !in_list(node->cpu_precisions, job->precision)) {
            gb_fmt(why, whylen, "node %s's CPU %s in %s only%s", node->name,
                   strcmp(job->kind, "gemm") == 0 ? "multiplies" : "trains", node->cpu_precisions,
                   strcmp(job->precision, "bf16") == 0 ? " (bf16 needs avx512_bf16)" : "");
            return 0;
        }
        if (strcmp(job->interconnect, "nvlink") == 0 || strcmp(job->interconnect, "pcie") == 0) {
            gb_fmt(why, whylen, "interconnect %s needs GPUs and node %s would use the CPU",
                   job->interconnect, node->name);
            return 0;
        }
    }
    gb_copy(backend, 8, be);
    return 1;
}

uint64_t gb_nvlink_sets(int n_gpus, const int *gpu_a, const int *gpu_b, const int *lanes,
                        size_t n_links) {
    uint64_t sets = 0;
    if (n_gpus > 63) n_gpus = 63;
    for (int k = 1; k <= n_gpus; k++) { /* is 0..k-1 connected? grow from GPU 0 */
        uint64_t reach = 1, before = 0;
        while (reach != before) {
            before = reach;
            for (size_t l = 0; l < n_links; l++) {
                int a = gpu_a[l], b = gpu_b[l];
                if (lanes[l] <= 0 || a < 0 || b < 0 || a >= k || b >= k) continue;
                if ((reach >> a) & 1) reach |= (uint64_t)1 << b;
                if ((reach >> b) & 1) reach |= (uint64_t)1 << a;
            }
        }
        if (reach == (k == 64 ? ~(uint64_t)0 : ((uint64_t)1 << k) - 1)) sets |= (uint64_t)1 << k;
    }
    return sets;
}
