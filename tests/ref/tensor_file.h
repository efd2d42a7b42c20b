/* tensor_file.h - the few safetensors operations the PyTorch comparison needs.
 *
 * A test-side helper, not the project's safetensors module: it writes F64 and
 * I32 tensors plus string metadata, and reads back F64 tensors, so that the C
 * test and the Python script exchange exact doubles in a format numpy reads
 * with ten lines. Layout (safetensors): u64 little-endian header length, JSON
 * header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}
 * padded with spaces to a multiple of 8, then the raw little-endian data.
 */
#ifndef GB_TENSOR_FILE_H
#define GB_TENSOR_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tf_writer tf_writer_t;
typedef struct tf_file tf_file_t;

/* An empty file to fill; NULL when out of memory. */
tf_writer_t *tf_writer_new(void);
void tf_writer_destroy(tf_writer_t **self_p);

/* Add a tensor (data copied) or a metadata string. Return 0 or -1 (out of
 * memory, duplicate name, ndim outside 0..4). */
int tf_add_f64(tf_writer_t *w, const char *name, int ndim, const int64_t *shape,
               const double *data);
int tf_add_i32(tf_writer_t *w, const char *name, int ndim, const int64_t *shape,
               const int32_t *data);
int tf_set_meta(tf_writer_t *w, const char *key, const char *value);

/* Write everything to path. Returns 0 or -1 with a reason in err. */
int tf_write(const tf_writer_t *w, const char *path, char *err, size_t errlen);

/* Read a file; NULL with a reason in err when it cannot be read or parsed. */
tf_file_t *tf_read(const char *path, char *err, size_t errlen);
void tf_file_destroy(tf_file_t **self_p);

/* The F64 tensor `name` and its element count, or NULL when absent or of
 * another dtype. Owned by the file. */
const double *tf_get_f64(const tf_file_t *f, const char *name, size_t *numel);

#endif
