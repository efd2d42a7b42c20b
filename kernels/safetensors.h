/* safetensors.h - read and write the safetensors format (huggingface/safetensors).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 * ..., optional "__metadata__": {string: string}}), then the data buffer. The
 * reader checks everything before handing out a tensor: the header length
 * against the file size, the JSON shape of every entry (no unknown keys, no
 * duplicate names), known dtypes, non-negative integral shapes, offsets that
 * lie inside the buffer, sizes that equal numel x dtype size without
 * overflow, and that the tensors tile the buffer exactly (no gaps, no
 * overlaps, nothing after the last one). Data is little-endian, as on every
 * host gpubench builds for.
 *
 * Reader: gb_st_open reads the whole file; tensors point into that copy and
 * live until gb_st_close. Writer: tensors are referenced, not copied, until
 * gb_st_writer_write, which writes a temporary file and renames it.
 */
#ifndef GB_SAFETENSORS_H
#define GB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define GB_ST_MAX_DIMS   8
#define GB_ST_MAX_HEADER (100u << 20) /* as the reference implementation */

typedef enum {
    GB_ST_BOOL = 0,
    GB_ST_U8,
    GB_ST_I8,
    GB_ST_I16,
    GB_ST_U16,
    GB_ST_F16,
    GB_ST_BF16,
    GB_ST_I32,
    GB_ST_U32,
    GB_ST_F32,
    GB_ST_I64,
    GB_ST_U64,
    GB_ST_F64,
    GB_ST_NDTYPES
} gb_st_dtype_t;

typedef struct gb_st_tensor {
    const char *name;
    gb_st_dtype_t dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[GB_ST_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    const void *data; /* into the file's buffer; not aligned in general: memcpy out */
} gb_st_tensor_t;

typedef struct gb_st gb_st_t;
typedef struct gb_st_writer gb_st_writer_t;

/* "F32" etc.; -1 / NULL when unknown. Size in bytes of one element. */
int gb_st_dtype_parse(const char *s);
const char *gb_st_dtype_name(gb_st_dtype_t d);
size_t gb_st_dtype_size(gb_st_dtype_t d);

/* Open and validate; NULL with a reason in err. */
gb_st_t *gb_st_open(const char *path, char *err, size_t errlen);
/* Validate a file image already in memory (copied). */
gb_st_t *gb_st_parse(const void *bytes, size_t len, char *err, size_t errlen);
void gb_st_close(gb_st_t **self_p);

int gb_st_count(const gb_st_t *st);
const gb_st_tensor_t *gb_st_at(const gb_st_t *st, int i); /* in file order of offsets */
const gb_st_tensor_t *gb_st_find(const gb_st_t *st, const char *name);
/* The __metadata__ value for key, or NULL. */
const char *gb_st_metadata(const gb_st_t *st, const char *key);

gb_st_writer_t *gb_st_writer_new(void);
void gb_st_writer_destroy(gb_st_writer_t **self_p);
/* Reference `data` (numel x dtype size bytes) under `name`; names must be
 * unique. Returns 0 or -1 (duplicate, bad shape, out of memory). */
int gb_st_writer_add(gb_st_writer_t *w, const char *name, gb_st_dtype_t dtype, int ndim,
                     const int64_t *shape, const void *data, char *err, size_t errlen);
int gb_st_writer_meta(gb_st_writer_t *w, const char *key, const char *value, char *err,
                      size_t errlen);
/* Write to a new file beside the target, fsync, rename it into place (a
 * symbolic link keeps pointing at the new contents); the old file stays
 * whole on any failure. */
int gb_st_writer_write(gb_st_writer_t *w, const char *path, char *err, size_t errlen);
/* Could a file be saved at `path`? 0, or -1 with the reason: the directory
 * is missing or not writable, the path is a directory, device or FIFO, or a
 * dangling symbolic link. Check before hours of work, not after. */
int gb_st_check_writable(const char *path, char *err, size_t errlen);
/* The file a save replaces (symbolic links followed) into real. */
int gb_st_target(const char *path, char *real, size_t reallen, char *err, size_t errlen);

#endif
