/* worker.h - the child process that runs one job: `gpubench worker --job
 * JOB.json --out RESULT.json`, started by the agent with fork/exec so that
 * a crash, a hang or a CUDA error ends the job, never the agent.
 *
 * JOB.json is {"job_id": N, "attempt": N, "params": {...}} with params as
 * gb_jobdef_to_json() writes them (the backend already resolved to cpu or
 * cuda by placement). The worker looks the kind up in its table, runs it,
 * and writes the result record (docs/result-record.md) to RESULT.json
 * atomically. On failure it writes {"kind": K, "error": "..."} instead and
 * exits 1; its stderr (captured by the agent) carries the same line. */
#ifndef GB_WORKER_H
#define GB_WORKER_H

/* Run the job; returns the process exit status (0 ok, 1 the job failed,
 * 2 the job file is unusable). */
int gb_worker_run(const char *job_path, const char *out_path);

/* The kinds this build's worker runs, comma-separated ("allreduce,gemm,resnet50,sleep"). */
const char *gb_worker_kinds(void);
/* 1 when the ResNet-50 engine is built in (GB_HAVE_ENGINE). */
int gb_worker_has_engine(void);

/* 1 when the CPU can train and multiply in bf16 here (oneDNN sees
 * avx512_bf16). */
int gb_worker_cpu_bf16(void);
/* The precisions the CPU computes in here (training, gemm): "fp32,bf16" or
 * "fp32"; the same in a build without the training engine. */
const char *gb_worker_cpu_precisions(void);

#endif
