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

/* The input of twin_torch.py and half_emu.py (format: twin_torch.py's
 * docstring): the model's shape, cfg's batch, learning rate, momentum and
 * weight decay, `steps`, the state and the batch. 0, or -1 when the file
 * could not be written. */
int gb_twin_write_input(const char *path, const gb_model_t *m, const gb_train_config_t *cfg,
                        int steps, const float *params, const float *buffers, const float *images,
                        const int32_t *labels);

#endif
