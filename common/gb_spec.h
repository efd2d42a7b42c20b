/* gb_spec.h - sweep specs: parse a JSON spec, validate it, and expand it
 * into jobs; plus the canonical JSON of one job's parameters.
 *
 * A spec is one JSON object (docs/control-plane.md has the reference).
 * `kind` names one or more job kinds; every other key either applies to some
 * of those kinds or is an error, and a list value is an axis: the jobs of a
 * kind are the Cartesian product of the axes that apply to that kind, times
 * `repeat`. Expansion order is fixed (kind outermost, then the key order of
 * the table in gb_spec.c, repeat innermost), so job numbering is stable.
 *
 * These functions are pure: no I/O, no globals, every error reported as one
 * line naming the key and the value, so a fuzzer can call them on any
 * bytes. */
#ifndef GB_SPEC_H
#define GB_SPEC_H

#include <stddef.h>

#define GB_SPEC_MAX_VALUES 64    /* values in one list */
#define GB_SPEC_MAX_JOBS   10000 /* default cap on the jobs of one sweep */
#define GB_SPEC_MAX_REPEAT 1000  /* copies of each configuration: repeat is 1..this */
#define GB_SPEC_STR        128   /* longest string value, bytes */
#define GB_LABELS_LEN      1024  /* "k=v,k=v" */

/* One job, as placement and the worker need it. Fields a kind does not use
 * keep their defaults and are left out of its JSON. */
typedef struct gb_jobdef {
    char kind[16];              /* resnet50 | gemm | allreduce | sleep */
    char backend[8];            /* auto | cpu | cuda */
    char nodes[GB_SPEC_STR];    /* glob on node name or GPU model; "*" = any */
    char labels[GB_LABELS_LEN]; /* "k=v,k=v" all of which the node must carry; "" = none */
    int gpus;                   /* devices (GPUs, or CPU replicas) */
    int repeat_index;           /* 0-based copy of the same configuration */
    int timeout_s;
    int max_attempts; /* 0: the coordinator's --max-attempts */
    /* resnet50 */
    char precision[8];    /* fp32 | tf32 | fp16 | bf16 */
    char interconnect[8]; /* auto | nvlink | pcie */
    char launch[16];      /* auto | threads | processes: a node's replicas (kernels/launch.h) */
    int batch;            /* per device */
    int bucket_mb;        /* data parallel: gradient all-reduce bucket, MB */
    int steps, warmup, image_size;
    /* gemm */
    int m, n, k, reps;
    /* allreduce (and warmup, interconnect, gpus, n_nodes) */
    int min_bytes, max_bytes; /* message sizes doubling from min to max, multiples of 4 */
    int iters;                /* timed all-reduces per size */
    /* sleep (control-plane test kind) */
    int duration_ms;
    char fail[GB_SPEC_STR]; /* non-empty: the worker fails with this message */
    int signal;             /* non-zero: the worker raises this signal */
    /* multi-node jobs (issue 5): resnet50, sleep */
    int n_nodes;         /* agents (nodes) the job spans; gpus is per node */
    int rendezvous_s;    /* every rank ready within this after placement, or the attempt is lost */
    int fail_rank;       /* sleep: the fail/signal hooks act on this rank only; -1 = every rank */
    char fail_at[16];    /* sleep: "end" (after sleeping) | "rendezvous" (before the id / ready) */
    int judge_telemetry; /* sleep: 1 = the agent's telemetry verdicts (throttling, contention)
                          * judge its validity as a measurement's (a test hook); 0 = not judged */
} gb_jobdef_t;

typedef struct gb_sweep_def {
    char name[GB_SPEC_STR];
    gb_jobdef_t *jobs; /* n_jobs, malloc'd */
    size_t n_jobs;
} gb_sweep_def_t;

/* Parse, validate and expand a spec of len bytes (need not be
 * NUL-terminated). Fails when it would make more than max_jobs jobs, the
 * refusal naming the limit as the option --max-jobs ("the sweep expands to
 * 12 jobs, more than --max-jobs 10 ..."), as gpubench run's is.
 * Returns 0 and fills out (free with gb_sweep_def_free), or -1 with the
 * reason in err. */
int gb_spec_parse(const char *json, size_t len, size_t max_jobs, gb_sweep_def_t *out, char *err,
                  size_t errlen);
/* gb_spec_parse with the limit named limit_name in that refusal ("more than
 * <limit_name> 10"): a coordinator names its own option, which a submit
 * client does not have. */
int gb_spec_parse_limit(const char *json, size_t len, size_t max_jobs, const char *limit_name,
                        gb_sweep_def_t *out, char *err, size_t errlen);
void gb_sweep_def_free(gb_sweep_def_t *s);
/* The first check of gb_spec_parse: len bytes of one JSON object (no
 * trailing bytes, no \u0000, nesting within cJSON's limit). The parsed
 * object (cJSON_Delete it), or NULL with the reason in err. For a client
 * that leaves the rest to a coordinator that may be newer. */
struct cJSON;
struct cJSON *gb_spec_json(const char *json, size_t len, char *err, size_t errlen);

/* The job's parameters as canonical JSON (keys that apply to its kind only);
 * malloc'd, NULL on out-of-memory. */
char *gb_jobdef_to_json(const gb_jobdef_t *job);
/* Parse one job's parameters (the output of gb_jobdef_to_json, or any spec
 * without lists that makes exactly one job, plus "repeat_index"). */
int gb_jobdef_from_json(const char *json, size_t len, gb_jobdef_t *out, char *err, size_t errlen);

/* Known job kinds. */
int gb_kind_known(const char *kind);
/* 1 for kinds that exist only to test the control plane (sleep): their rows
 * are marked synthetic in the store. */
int gb_kind_synthetic(const char *kind);
/* "allreduce, gemm, resnet50, sleep" */
const char *gb_kind_names(void);

/* Labels: parse "k=v,k2=v2" (also accepted: "" for none) into canonical form
 * (same order, no spaces) in out; -1 with a reason on a bad key or value or
 * a repeated key. */
int gb_labels_canon(const char *in, char *out, size_t outlen, char *err, size_t errlen);
/* 1 when every k=v of want is also in have (both canonical). */
int gb_labels_match(const char *have, const char *want);

#endif
