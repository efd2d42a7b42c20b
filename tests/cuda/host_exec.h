/* host_exec.h - the CUDA backend's host twin: the same plan and step
 * (kernels/cuda/net.c) with every op computed naively in double on the CPU,
 * NHWC and KRSC like the GPU. It is the reference the GPU tests compare the
 * CUDA executor against, op by op and for whole steps, and it is itself
 * checked against PyTorch in float64 (test_cuda_twin). fp32 semantics only.
 */
#ifndef GB_TESTS_HOST_EXEC_H
#define GB_TESTS_HOST_EXEC_H

#include "exec.h"
#include "net.h"

/* plan must have esize 8. NULL with a reason in err on failure. */
gb_exec_t *gb_host_exec_new(const gb_plan_t *plan, const gb_train_config_t *cfg, char *err,
                            size_t errlen);

/* The twin as a backend (gb_backend_ops_t), name "cuda-twin". */
extern const gb_backend_ops_t gb_twin_backend_ops;

#endif
