/* cuda_exec.h - the CUDA executor of exec.h (cuDNN, cuBLAS, kernels.cu). */
#ifndef GB_CUDA_EXEC_IMPL_H
#define GB_CUDA_EXEC_IMPL_H

#include "exec.h"

/* One replica on CUDA device `device` for the plan p (esize 4 for fp32/tf32,
 * 2 for fp16/bf16); allocates all device memory and picks every algorithm.
 * NULL with a file:line reason in err on failure. The plan must outlive it. */
gb_exec_t *gb_cuda_exec_new(const gb_plan_t *p, const gb_train_config_t *cfg, int device, char *err,
                            size_t errlen);

/* Data parallel: join the job's NCCL communicator (cuda_dp.h) through
 * comm and average the gradients in buckets from the next step on. With
 * several GPUs in this process the caller must not ask for graphs (the
 * note in the report says why). 0, or -1 with a reason (the comm group is
 * aborted). */
struct gb_comm;
int gb_cuda_exec_attach_comm(gb_exec_t *ex, struct gb_comm *comm, const gb_train_config_t *cfg,
                             char *err, size_t errlen);

/* 1 when the step runs as a captured CUDA graph. */
int gb_cuda_exec_graph_used(const gb_exec_t *ex);

#endif
