/* exports.c - anchor of libgpubench_cuda.so: the library is gb_cuda_core
 * linked whole; exports.map keeps gb_cuda_backend_ops its only symbol. */
#include "engine.h"

extern const gb_backend_ops_t gb_cuda_backend_ops;

/* referenced so a linker never drops the object that defines it */
const gb_backend_ops_t *gb_cuda_backend_anchor(void);
const gb_backend_ops_t *gb_cuda_backend_anchor(void) {
    return &gb_cuda_backend_ops;
}
