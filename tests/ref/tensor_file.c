/* tensor_file.c - see tensor_file.h. Little-endian hosts only (x86-64, arm64),
 * checked at run time. */
#define _POSIX_C_SOURCE 200809L
#include "tensor_file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *name;
    const char *dtype; /* "F64" or "I32" */
    int ndim;
    int64_t shape[4];
    void *data;
    size_t bytes;
} entry_t;

struct tf_writer {
    entry_t *e;
    int n, cap;
    cJSON *meta;
};

struct tf_file {
    entry_t *e;
    int n;
};

static int little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

tf_writer_t *tf_writer_new(void) {
    tf_writer_t *w = calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->meta = cJSON_CreateObject();
    if (!w->meta) {
        free(w);
        return NULL;
    }
    return w;
}

static void free_entries(entry_t *e, int n) {
    for (int i = 0; i < n; i++) {
        free(e[i].name);
        free(e[i].data);
    }
    free(e);
}

void tf_writer_destroy(tf_writer_t **self_p) {
    if (!self_p || !*self_p) return;
    tf_writer_t *w = *self_p;
    free_entries(w->e, w->n);
    cJSON_Delete(w->meta);
    free(w);
    *self_p = NULL;
}

static int add(tf_writer_t *w, const char *name, const char *dtype, size_t elem, int ndim,
               const int64_t *shape, const void *data) {
    if (ndim < 0 || ndim > 4) return -1;
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0) return -1;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 32;
        entry_t *e = realloc(w->e, sizeof(*e) * (size_t)cap);
        if (!e) return -1;
        w->e = e;
        w->cap = cap;
    }
    entry_t *t = &w->e[w->n];
    memset(t, 0, sizeof(*t));
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        t->shape[i] = shape[i];
        numel *= (size_t)shape[i];
    }
    t->ndim = ndim;
    t->dtype = dtype;
    t->bytes = numel * elem;
    t->name = strdup(name);
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return -1;
    }
    memcpy(t->data, data, t->bytes);
    w->n++;
    return 0;
}

int tf_add_f64(tf_writer_t *w, const char *name, int ndim, const int64_t *shape,
               const double *data) {
    return add(w, name, "F64", sizeof(double), ndim, shape, data);
}

int tf_add_i32(tf_writer_t *w, const char *name, int ndim, const int64_t *shape,
               const int32_t *data) {
    return add(w, name, "I32", sizeof(int32_t), ndim, shape, data);
}

int tf_set_meta(tf_writer_t *w, const char *key, const char *value) {
    cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    return cJSON_AddStringToObject(w->meta, key, value) ? 0 : -1;
}

int tf_write(const tf_writer_t *w, const char *path, char *err, size_t errlen) {
    if (!little_endian()) {
        snprintf(err, errlen, "big-endian host");
        return -1;
    }
    int rc = -1;
    char *text = NULL;
    FILE *f = NULL;
    cJSON *hdr = cJSON_CreateObject();
    if (!hdr || !cJSON_AddItemReferenceToObject(hdr, "__metadata__", w->meta)) goto oom;
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const entry_t *t = &w->e[i];
        cJSON *o = cJSON_AddObjectToObject(hdr, t->name);
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        cJSON *offs = o ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        if (!shape || !offs || !cJSON_AddStringToObject(o, "dtype", t->dtype)) goto oom;
        for (int d = 0; d < t->ndim; d++)
            if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]))) goto oom;
        if (!cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off)) ||
            !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t->bytes))))
            goto oom;
        off += t->bytes;
    }
    text = cJSON_PrintUnformatted(hdr);
    if (!text) goto oom;
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint64_t n64 = padded;
    f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot create %s", path);
        goto done;
    }
    int ok = fwrite(&n64, 8, 1, f) == 1 && fwrite(text, 1, len, f) == len;
    for (size_t i = len; ok && i < padded; i++)
        ok = fputc(' ', f) != EOF;
    for (int i = 0; ok && i < w->n; i++)
        ok = w->e[i].bytes == 0 || fwrite(w->e[i].data, 1, w->e[i].bytes, f) == w->e[i].bytes;
    if (fclose(f) != 0) ok = 0;
    f = NULL;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s", path);
        goto done;
    }
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "out of memory");
done:
    if (f) fclose(f);
    free(text);
    cJSON_Delete(hdr); /* the metadata was added by reference: not freed here */
    return rc;
}

tf_file_t *tf_read(const char *path, char *err, size_t errlen) {
    tf_file_t *tf = NULL;
    char *text = NULL;
    unsigned char *data = NULL;
    cJSON *hdr = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return NULL;
    }
    uint64_t hlen;
    long total;
    if (!little_endian() || fseek(f, 0, SEEK_END) != 0 || (total = ftell(f)) < 8 ||
        fseek(f, 0, SEEK_SET) != 0 || fread(&hlen, 8, 1, f) != 1 || hlen > (uint64_t)total - 8) {
        snprintf(err, errlen, "%s: not a safetensors file", path);
        goto fail;
    }
    size_t dlen = (size_t)total - 8 - (size_t)hlen;
    text = malloc((size_t)hlen + 1);
    data = malloc(dlen ? dlen : 1);
    tf = calloc(1, sizeof(*tf));
    if (!text || !data || !tf) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (fread(text, 1, (size_t)hlen, f) != hlen || fread(data, 1, dlen, f) != dlen) {
        snprintf(err, errlen, "%s: short read", path);
        goto fail;
    }
    text[hlen] = '\0';
    hdr = cJSON_Parse(text);
    if (!cJSON_IsObject(hdr)) {
        snprintf(err, errlen, "%s: header is not JSON", path);
        goto fail;
    }
    int count = cJSON_GetArraySize(hdr);
    tf->e = calloc((size_t)count + 1, sizeof(entry_t));
    if (!tf->e) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, hdr) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
            !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > 4) {
            snprintf(err, errlen, "%s: bad entry %s", path, it->string);
            goto fail;
        }
        double b = cJSON_GetArrayItem(offs, 0)->valuedouble;
        double e = cJSON_GetArrayItem(offs, 1)->valuedouble;
        if (!(b >= 0 && e >= b && e <= (double)dlen)) {
            snprintf(err, errlen, "%s: %s lies outside the data", path, it->string);
            goto fail;
        }
        entry_t *t = &tf->e[tf->n];
        t->name = strdup(it->string);
        t->dtype = strcmp(dt->valuestring, "F64") == 0 ? "F64" : "other";
        t->bytes = (size_t)(e - b);
        t->data = malloc(t->bytes ? t->bytes : 1);
        if (!t->name || !t->data) {
            free(t->name);
            free(t->data);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        memcpy(t->data, data + (size_t)b, t->bytes);
        tf->n++;
    }
    cJSON_Delete(hdr);
    free(text);
    free(data);
    fclose(f);
    return tf;
fail:
    cJSON_Delete(hdr);
    free(text);
    free(data);
    tf_file_destroy(&tf);
    fclose(f);
    return NULL;
}

void tf_file_destroy(tf_file_t **self_p) {
    if (!self_p || !*self_p) return;
    free_entries((*self_p)->e, (*self_p)->n);
    free(*self_p);
    *self_p = NULL;
}

const double *tf_get_f64(const tf_file_t *f, const char *name, size_t *numel) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) {
            if (strcmp(f->e[i].dtype, "F64") != 0) return NULL;
            *numel = f->e[i].bytes / sizeof(double);
            return f->e[i].data;
        }
    return NULL;
}
