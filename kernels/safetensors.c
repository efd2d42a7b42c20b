/* safetensors.c - the safetensors reader and writer (see safetensors.h).
 * cJSON parses the header; every number and offset is checked here. */
#define _XOPEN_SOURCE 700 /* realpath, and POSIX 2008 */
#include "safetensors.h"
#include "gb_util.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

static const char *const dtype_names[GB_ST_NDTYPES] = {
    "BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "I64", "U64", "F64"};
static const size_t dtype_sizes[GB_ST_NDTYPES] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};

int gb_st_dtype_parse(const char *s) {
    for (int i = 0; i < GB_ST_NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) return i;
    return -1;
}

const char *gb_st_dtype_name(gb_st_dtype_t d) {
    return (unsigned)d < GB_ST_NDTYPES ? dtype_names[d] : NULL;
}

size_t gb_st_dtype_size(gb_st_dtype_t d) {
    return (unsigned)d < GB_ST_NDTYPES ? dtype_sizes[d] : 0;
}

/* ---------------------------------------------------------------- reader */

typedef struct meta_kv {
    char *key, *value;
} meta_kv_t;

struct gb_st {
    unsigned char *file; /* the whole file */
    size_t len;
    int mapped;        /* file is an mmap of len bytes (else malloc'd) */
    int guard;         /* its map_slots entry, or -1 */
    gb_st_tensor_t *t; /* sorted by data offset */
    size_t *begin;     /* parallel to t */
    char **names;      /* owned copies */
    int n;
    meta_kv_t *meta;
    int n_meta;
};

/* ------------------------------------------------------- mapped files
 * A mapped file that another process truncates while it is read faults
 * (SIGBUS) at the first page past its new end, and the run died as "Bus
 * error" without a word. The reader's mappings are registered; a fault
 * inside one ends the process with exit status 1 and a line naming the file.
 * Any other SIGBUS goes to the action there was before (the default: the
 * process dies of it). The message is made when the file is mapped: the
 * handler only compares addresses and write()s. */
#define MAP_SLOTS 16
static struct map_slot {
    _Atomic uintptr_t lo; /* 0: free */
    size_t len;
    size_t msg_len;
    char msg[PATH_MAX + 160];
} map_slots[MAP_SLOTS];
static atomic_flag map_lock = ATOMIC_FLAG_INIT;
static struct sigaction prev_bus;
static int bus_installed;

static void on_bus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; si->si_code > 0 && i < MAP_SLOTS; i++) {
        uintptr_t lo = atomic_load_explicit(&map_slots[i].lo, memory_order_acquire);
        if (lo && a >= lo && a - lo < map_slots[i].len) {
            ssize_t w = write(STDERR_FILENO, map_slots[i].msg, map_slots[i].msg_len);
            (void)w;
            _exit(1);
        }
    }
    /* not ours: the old action, for this fault (it happens again on return)
     * or for a SIGBUS sent by kill (raised again) */
    sigaction(SIGBUS, &prev_bus, NULL);
    if (si->si_code <= 0) raise(sig);
}

/* Registers [p, p+len) as PATH's mapping: its slot, or -1 when all are taken
 * (the file is then read unguarded, as before). */
static int map_guard(const char *path, const void *p, size_t len) {
    int slot = -1;
    while (atomic_flag_test_and_set_explicit(&map_lock, memory_order_acquire))
        ;
    if (!bus_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_bus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        bus_installed = sigaction(SIGBUS, &sa, &prev_bus) == 0;
    }
    for (int i = 0; bus_installed && slot < 0 && i < MAP_SLOTS; i++) {
        struct map_slot *m = &map_slots[i];
        if (atomic_load_explicit(&m->lo, memory_order_relaxed)) continue;
        m->len = len;
        int n = snprintf(m->msg, sizeof(m->msg),
                         "gpubench: %s was cut short while it was being read (another "
                         "process truncated or rewrote it); stopping\n",
                         path);
        m->msg_len = n < 0 ? 0 : (size_t)n < sizeof(m->msg) ? (size_t)n : sizeof(m->msg) - 1;
        atomic_store_explicit(&m->lo, (uintptr_t)p, memory_order_release);
        slot = i;
    }
    atomic_flag_clear_explicit(&map_lock, memory_order_release);
    return slot;
}

static void map_unguard(int slot) {
    if (slot >= 0) atomic_store_explicit(&map_slots[slot].lo, 0, memory_order_release);
}

void gb_st_close(gb_st_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_st_t *st = *self_p;
    for (int i = 0; i < st->n; i++)
        free(st->names[i]);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->names);
    free(st->meta);
    free(st->t);
    free(st->begin);
    if (st->mapped) {
        map_unguard(st->guard);
        munmap(st->file, st->len);
    } else
        free(st->file);
    free(st);
    *self_p = NULL;
}

/* RFC 3629 UTF-8, no overlongs, no surrogates. */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1;
            min = 0x80;
            c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2;
            min = 0x800;
            c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3;
            min = 0x10000;
            c &= 0x07;
        } else {
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return 0;
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

/* A JSON number that is a non-negative integer exactly representable. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || floor(d) != d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct order {
    size_t begin, end;
    int idx;
} order_t;

static int cmp_order(const void *a, const void *b) {
    const order_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static gb_st_t *parse_owned(unsigned char *file, size_t len, int mapped, int guard, char *err,
                            size_t errlen) {
    gb_st_t *st = calloc(1, sizeof(*st));
    cJSON *root = NULL;
    order_t *ord = NULL;
    gb_st_tensor_t *tmp = NULL;
    char **sorted = NULL;
    if (!st) {
        map_unguard(guard);
        if (mapped)
            munmap(file, len);
        else
            free(file);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st->file = file;
    st->len = len;
    st->mapped = mapped;
    st->guard = guard;
    if (len < 8) {
        snprintf(err, errlen,
                 "not a safetensors file: %zu bytes, shorter than the 8-byte header length", len);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | file[i];
    if (hlen < 2 || hlen > GB_ST_MAX_HEADER || hlen > len - 8) {
        /* said as what it most likely is: another file given by mistake
         * (a JSON spec's first 8 bytes read as 4189021028785791611) */
        snprintf(err, errlen,
                 "not a safetensors file: its first 8 bytes, the header length, read %llu, "
                 "which does not fit the file (%zu bytes, limit %u)",
                 (unsigned long long)hlen, len, GB_ST_MAX_HEADER);
        goto fail;
    }
    const unsigned char *hdr = file + 8;
    if (hdr[0] != '{') {
        snprintf(err, errlen, "not a safetensors file: its header does not start with '{'");
        goto fail;
    }
    /* a length that runs past the JSON into the tensor bytes shows as
     * binary in the header: say which length was read */
    if (!utf8_valid(hdr, (size_t)hlen)) {
        snprintf(err, errlen, "header is not valid UTF-8 (is its length, %llu bytes, right?)",
                 (unsigned long long)hlen);
        goto fail;
    }
    if (memchr(hdr, 0, (size_t)hlen)) {
        snprintf(err, errlen, "header contains a NUL byte (is its length, %llu bytes, right?)",
                 (unsigned long long)hlen);
        goto fail;
    }
    /* Shapes and offsets are the header's only numbers, and integers: a
     * fraction or an exponent (32.0, 3.2e1) is refused as the reference
     * reader refuses it, though cJSON would read it as a whole number. */
    int in_str = 0;
    for (size_t i = 0; i < (size_t)hlen; i++) {
        unsigned char ch = hdr[i];
        if (!gb_json_code((const char *)hdr, (size_t)hlen, &i, &in_str)) continue;
        if ((ch >= '0' && ch <= '9') || ch == '-') {
            size_t j = i;
            while (j < (size_t)hlen && strchr("0123456789+-.eE", hdr[j]))
                j++;
            if (memchr(hdr + i, '.', j - i) || memchr(hdr + i, 'e', j - i) ||
                memchr(hdr + i, 'E', j - i)) {
                snprintf(err, errlen,
                         "header number '%.*s' is not an integer (shapes and offsets are)",
                         (int)(j - i < 32 ? j - i : 32), (const char *)hdr + i);
                goto fail;
            }
            i = j - 1;
        }
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts((const char *)hdr, (size_t)hlen, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errlen, "header is not a JSON object");
        goto fail;
    }
    for (const char *p = end; p < (const char *)hdr + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            snprintf(err, errlen, "trailing bytes after the header JSON");
            goto fail;
        }
    }
    size_t buf_len = len - 8 - (size_t)hlen;
    const unsigned char *buf = hdr + hlen;
    int count = cJSON_GetArraySize(root);
    st->t = calloc((size_t)count + 1, sizeof(*st->t));
    st->begin = calloc((size_t)count + 1, sizeof(*st->begin));
    st->names = calloc((size_t)count + 1, sizeof(*st->names));
    st->meta = NULL;
    ord = calloc((size_t)count + 1, sizeof(*ord));
    sorted = calloc((size_t)count + 1, sizeof(*sorted));
    if (!st->t || !st->begin || !st->names || !ord || !sorted) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    int n_keys = 0, seen_meta = 0;
    for (cJSON *e = root->child; e; e = e->next) {
        const char *name = e->string;
        if (!name) {
            snprintf(err, errlen, "header entry without a name");
            goto fail;
        }
        sorted[n_keys++] = (char *)name;
        if (strcmp(name, "__metadata__") == 0) {
            if (seen_meta++ || !cJSON_IsObject(e)) {
                snprintf(err, errlen, "__metadata__ must be one object of strings");
                goto fail;
            }
            int nm = cJSON_GetArraySize(e);
            st->meta = calloc((size_t)nm + 1, sizeof(*st->meta));
            if (!st->meta) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            for (cJSON *kv = e->child; kv; kv = kv->next) {
                if (!cJSON_IsString(kv) || !kv->string) {
                    snprintf(err, errlen, "__metadata__ value is not a string");
                    goto fail;
                }
                meta_kv_t *m = &st->meta[st->n_meta];
                m->key = strdup(kv->string);
                m->value = strdup(kv->valuestring);
                if (!m->key || !m->value) {
                    free(m->key);
                    free(m->value);
                    snprintf(err, errlen, "out of memory");
                    goto fail;
                }
                st->n_meta++;
            }
            continue;
        }
        if (!cJSON_IsObject(e)) {
            snprintf(err, errlen, "tensor '%s': entry is not an object", name);
            goto fail;
        }
        const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
        for (cJSON *f = e->child; f; f = f->next) {
            const cJSON **slot = NULL;
            if (f->string && strcmp(f->string, "dtype") == 0)
                slot = &dt;
            else if (f->string && strcmp(f->string, "shape") == 0)
                slot = &shape;
            else if (f->string && strcmp(f->string, "data_offsets") == 0)
                slot = &offs;
            if (!slot || *slot) {
                snprintf(err, errlen, "tensor '%s': unknown or repeated field '%s'", name,
                         f->string ? f->string : "?");
                goto fail;
            }
            *slot = f;
        }
        if (!dt || !shape || !offs) {
            snprintf(err, errlen, "tensor '%s': needs dtype, shape and data_offsets", name);
            goto fail;
        }
        int d = cJSON_IsString(dt) ? gb_st_dtype_parse(dt->valuestring) : -1;
        if (d < 0) {
            if (cJSON_IsString(dt))
                snprintf(err, errlen, "tensor '%s': dtype %.32s is not one this reader knows", name,
                         dt->valuestring);
            else
                snprintf(err, errlen, "tensor '%s': dtype is not a string", name);
            goto fail;
        }
        gb_st_tensor_t *t = &st->t[st->n];
        t->dtype = (gb_st_dtype_t)d;
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > GB_ST_MAX_DIMS) {
            snprintf(err, errlen, "tensor '%s': shape must be an array of at most %d sizes", name,
                     GB_ST_MAX_DIMS);
            goto fail;
        }
        size_t numel = 1;
        int nd = 0;
        for (cJSON *s = shape->child; s; s = s->next) {
            uint64_t v;
            if (json_uint(s, &v) || v > (uint64_t)INT64_MAX) {
                snprintf(err, errlen, "tensor '%s': shape entry is not a non-negative integer",
                         name);
                goto fail;
            }
            t->shape[nd++] = (int64_t)v;
            if (v != 0 && numel > SIZE_MAX / v) {
                snprintf(err, errlen, "tensor '%s': shape overflows", name);
                goto fail;
            }
            numel *= (size_t)v;
        }
        t->ndim = nd;
        t->numel = numel;
        size_t es = gb_st_dtype_size(t->dtype);
        if (numel > SIZE_MAX / es) {
            snprintf(err, errlen, "tensor '%s': size overflows", name);
            goto fail;
        }
        t->nbytes = numel * es;
        uint64_t b, en;
        if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || json_uint(offs->child, &b) ||
            json_uint(offs->child->next, &en)) {
            snprintf(err, errlen, "tensor '%s': data_offsets must be two non-negative integers",
                     name);
            goto fail;
        }
        if (b > en) {
            snprintf(err, errlen, "tensor '%s': data_offsets [%llu, %llu] end before they begin",
                     name, (unsigned long long)b, (unsigned long long)en);
            goto fail;
        }
        if (en > buf_len) {
            snprintf(err, errlen,
                     "tensor '%s': data_offsets [%llu, %llu] outside the %zu-byte buffer", name,
                     (unsigned long long)b, (unsigned long long)en, buf_len);
            goto fail;
        }
        if (en - b != t->nbytes) {
            snprintf(err, errlen, "tensor '%s': %llu bytes for %zu elements of %s", name,
                     (unsigned long long)(en - b), numel, dtype_names[d]);
            goto fail;
        }
        st->names[st->n] = strdup(name);
        if (!st->names[st->n]) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        t->name = st->names[st->n];
        t->data = buf + b;
        ord[st->n] = (order_t){(size_t)b, (size_t)en, st->n};
        st->n++;
    }
    /* unique names (cJSON keeps duplicate keys) */
    qsort(sorted, (size_t)n_keys, sizeof(*sorted), cmp_name);
    for (int i = 1; i < n_keys; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            snprintf(err, errlen, "name '%s' appears twice in the header", sorted[i]);
            goto fail;
        }
    }
    /* the tensors tile the buffer: no gap, no overlap, nothing left over */
    qsort(ord, (size_t)st->n, sizeof(*ord), cmp_order);
    size_t at = 0;
    for (int i = 0; i < st->n; i++) {
        if (ord[i].begin != at) {
            snprintf(err, errlen, "tensor '%s' starts at byte %zu, expected %zu (%s)",
                     st->t[ord[i].idx].name, ord[i].begin, at,
                     ord[i].begin > at ? "gap" : "overlap");
            goto fail;
        }
        at = ord[i].end;
    }
    if (at != buf_len) {
        snprintf(err, errlen, "%zu bytes after the last tensor", buf_len - at);
        goto fail;
    }
    /* keep tensors in offset order */
    tmp = malloc(((size_t)st->n + 1) * sizeof(*tmp));
    if (!tmp) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int i = 0; i < st->n; i++) {
        tmp[i] = st->t[ord[i].idx];
        st->begin[i] = ord[i].begin;
    }
    free(st->t);
    st->t = tmp;
    tmp = NULL;
    cJSON_Delete(root);
    free(ord);
    free(sorted);
    return st;
fail:
    cJSON_Delete(root);
    free(ord);
    free(sorted);
    free(tmp);
    gb_st_close(&st);
    return NULL;
}

gb_st_t *gb_st_parse(const void *bytes, size_t len, char *err, size_t errlen) {
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (len) memcpy(copy, bytes, len);
    return parse_owned(copy, len, 0, -1, err, errlen);
}

/* The first bytes of what people pass instead: torch.save writes a zip
 * archive (PyTorch >= 1.6) or a bare pickle (older, or
 * _use_new_zipfile_serialization=False). */
static const char *not_safetensors_hint(const unsigned char *b, size_t n) {
    if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0)
        return " (it is a zip archive: a torch.save checkpoint? write safetensors with "
               "safetensors.torch.save_file)";
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return " (it is a Python pickle: a torch.save checkpoint? write safetensors with "
               "safetensors.torch.save_file)";
    return "";
}

/* parse_owned with the file's name and, for what is not safetensors at
 * all, a hint at what it is */
static gb_st_t *parse_file(const char *path, unsigned char *file, size_t len, int mapped, int guard,
                           char *err, size_t errlen) {
    char why[400];
    const char *hint = not_safetensors_hint(file, len);
    gb_st_t *st = parse_owned(file, len, mapped, guard, why, sizeof(why));
    if (!st) snprintf(err, errlen, "%s: %s%s", path, why, hint);
    return st;
}

gb_st_t *gb_st_open(const char *path, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
     * below like every other file that is not a regular one */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: is %s; give a safetensors file on disk", path,
                 gb_file_kind(sb.st_mode));
        close(fd);
        return NULL;
    }
    off_t sz = sb.st_size;
    if (sz < 0 || (uintmax_t)sz > (uintmax_t)SIZE_MAX - 1) {
        close(fd);
        snprintf(err, errlen, "%s: too large (%lld bytes)", path, (long long)sz);
        return NULL;
    }
    /* Mapped, not read: a file whose header is wrong is refused after a
     * page or two, whatever its size (a 3 GB file was read whole, and one
     * above memory said "out of memory", before its header was looked at);
     * the tensors are paged in as they are copied out. */
    if (sz > 0) {
        void *map = mmap(NULL, (size_t)sz, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            close(fd);
            int guard = map_guard(path, map, (size_t)sz);
            return parse_file(path, map, (size_t)sz, 1, guard, err, errlen);
        }
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)sz ? (size_t)sz : 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "%s: out of memory for %lld bytes", path, (long long)sz);
        return NULL;
    }
    if (sz && fread(buf, 1, (size_t)sz, f) != (size_t)sz) goto io;
    fclose(f);
    return parse_file(path, buf, (size_t)sz, 0, -1, err, errlen);
io:
    snprintf(err, errlen, "%s: read error: %s", path, ferror(f) ? strerror(errno) : "file shrank");
    free(buf);
    fclose(f);
    return NULL;
}

int gb_st_count(const gb_st_t *st) {
    return st->n;
}

const gb_st_tensor_t *gb_st_at(const gb_st_t *st, int i) {
    return (i >= 0 && i < st->n) ? &st->t[i] : NULL;
}

const gb_st_tensor_t *gb_st_find(const gb_st_t *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0) return &st->t[i];
    return NULL;
}

const char *gb_st_metadata(const gb_st_t *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

/* ---------------------------------------------------------------- writer */

typedef struct wentry {
    char *name;
    gb_st_dtype_t dtype;
    int ndim;
    int64_t shape[GB_ST_MAX_DIMS];
    size_t nbytes;
    const void *data;
} wentry_t;

struct gb_st_writer {
    wentry_t *e;
    int n, cap;
    meta_kv_t *meta;
    int n_meta, cap_meta;
};

gb_st_writer_t *gb_st_writer_new(void) {
    return calloc(1, sizeof(gb_st_writer_t));
}

void gb_st_writer_destroy(gb_st_writer_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_st_writer_t *w = *self_p;
    for (int i = 0; i < w->n; i++)
        free(w->e[i].name);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->e);
    free(w->meta);
    free(w);
    *self_p = NULL;
}

int gb_st_writer_add(gb_st_writer_t *w, const char *name, gb_st_dtype_t dtype, int ndim,
                     const int64_t *shape, const void *data, char *err, size_t errlen) {
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0) {
        snprintf(err, errlen, "bad tensor name");
        return -1;
    }
    if ((unsigned)dtype >= GB_ST_NDTYPES || ndim < 0 || ndim > GB_ST_MAX_DIMS) {
        snprintf(err, errlen, "tensor '%s': bad dtype or rank", name);
        return -1;
    }
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->e[i].name, name) == 0) {
            snprintf(err, errlen, "tensor '%s' added twice", name);
            return -1;
        }
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && numel > SIZE_MAX / (size_t)shape[i])) {
            snprintf(err, errlen, "tensor '%s': bad shape", name);
            return -1;
        }
        numel *= (size_t)shape[i];
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        wentry_t *e = realloc(w->e, (size_t)cap * sizeof(*e));
        if (!e) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        w->e = e;
        w->cap = cap;
    }
    wentry_t *e = &w->e[w->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(name);
    if (!e->name) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        e->shape[i] = shape[i];
    e->nbytes = numel * gb_st_dtype_size(dtype);
    e->data = data;
    w->n++;
    return 0;
}

int gb_st_writer_meta(gb_st_writer_t *w, const char *key, const char *value, char *err,
                      size_t errlen) {
    if (w->n_meta == w->cap_meta) {
        int cap = w->cap_meta ? 2 * w->cap_meta : 8;
        meta_kv_t *m = realloc(w->meta, (size_t)cap * sizeof(*m));
        if (!m) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        w->meta = m;
        w->cap_meta = cap;
    }
    meta_kv_t *m = &w->meta[w->n_meta];
    m->key = strdup(key);
    m->value = strdup(value);
    if (!m->key || !m->value) {
        free(m->key);
        free(m->value);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->n_meta++;
    return 0;
}

/* growable string */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf_t;

static void sb_put(sbuf_t *s, const char *str, size_t len) {
    if (s->oom) return;
    if (s->n + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->n + len + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->oom = 1;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->n, str, len);
    s->n += len;
    s->p[s->n] = 0;
}

static void sb_str(sbuf_t *s, const char *str) {
    sb_put(s, str, strlen(str));
}

/* JSON string literal */
static void sb_json(sbuf_t *s, const char *str) {
    sb_put(s, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
        char tmp[8];
        if (*c == '"' || *c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)*c;
            sb_put(s, tmp, 2);
        } else if (*c < 0x20) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", *c);
            sb_put(s, tmp, 6);
        } else {
            sb_put(s, (const char *)c, 1);
        }
    }
    sb_put(s, "\"", 1);
}

static int writer_write(gb_st_writer_t *w, const char *path, char *err, size_t errlen);

/* A Ctrl-C or SIGTERM while the file is written waits until the write is
 * whole and renamed, or removed: it would leave NAME.tmp.PID behind. Only
 * signals left at their default are held (a caller's own handler stays);
 * sigaction, not a mask, because any of the process's threads may take
 * the signal. */
static volatile sig_atomic_t held_signal;
static void hold_signal(int sig) {
    held_signal = sig;
}

int gb_st_writer_write(gb_st_writer_t *w, const char *path, char *err, size_t errlen) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction hold, old[3];
    int held[3] = {0};
    memset(&hold, 0, sizeof(hold));
    hold.sa_handler = hold_signal;
    hold.sa_flags = SA_RESTART;
    sigemptyset(&hold.sa_mask);
    held_signal = 0;
    for (int i = 0; i < 3; i++)
        if (sigaction(sigs[i], NULL, &old[i]) == 0 && old[i].sa_handler == SIG_DFL &&
            !(old[i].sa_flags & SA_SIGINFO))
            held[i] = sigaction(sigs[i], &hold, NULL) == 0;
    int rc = writer_write(w, path, err, errlen);
    for (int i = 0; i < 3; i++)
        if (held[i]) sigaction(sigs[i], &old[i], NULL);
    if (held_signal) raise(held_signal);
    return rc;
}

static int writer_write(gb_st_writer_t *w, const char *path, char *err, size_t errlen) {
    sbuf_t h = {0};
    char num[64];
    sb_str(&h, "{");
    if (w->n_meta) {
        sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < w->n_meta; i++) {
            if (i) sb_str(&h, ",");
            sb_json(&h, w->meta[i].key);
            sb_str(&h, ":");
            sb_json(&h, w->meta[i].value);
        }
        sb_str(&h, "}");
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const wentry_t *e = &w->e[i];
        if (i || w->n_meta) sb_str(&h, ",");
        sb_json(&h, e->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, dtype_names[e->dtype]);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            snprintf(num, sizeof(num), "%s%lld", d ? "," : "", (long long)e->shape[d]);
            sb_str(&h, num);
        }
        snprintf(num, sizeof(num), "],\"data_offsets\":[%zu,%zu]}", off, off + e->nbytes);
        sb_str(&h, num);
        off += e->nbytes;
    }
    sb_str(&h, "}");
    while (h.n % 8)
        sb_str(&h, " "); /* data starts 8-byte aligned */
    if (h.oom) {
        free(h.p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char real[PATH_MAX], tmp[PATH_MAX + 32];
    if (gb_st_target(path, real, sizeof(real), err, errlen)) {
        free(h.p);
        return -1;
    }
    /* a new file under a name no one can guess (PATH.tmp.PID: a link
     * planted there in a shared directory was written through, a file
     * planted there became PATH), 0666 less the umask as fopen's */
    int fd = -1;
    for (int tries = 0; tries < 8 && fd < 0; tries++) {
        char hex[17];
        if (gb_random_hex(hex, 8, err, errlen) != 0) {
            free(h.p);
            return -1;
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp.%s", real, hex);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot create a file beside it: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(h.p);
        return -1;
    }
    /* a file replaced keeps its permissions (a private checkpoint stays
     * private; the new file would get the umask's) */
    struct stat old;
    int existed = stat(real, &old) == 0;
    if (existed) (void)!fchmod(fileno(f), old.st_mode & 07777);
    unsigned char len8[8];
    uint64_t hl = h.n;
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(hl >> (8 * i));
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.n, f) != h.n;
    for (int i = 0; i < w->n && !bad; i++)
        if (w->e[i].nbytes && fwrite(w->e[i].data, 1, w->e[i].nbytes, f) != w->e[i].nbytes) bad = 1;
    /* on disk before the rename, so a crash leaves the old file or the
     * whole new one, never a short one */
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = 1;
    int werr = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        werr = errno;
    }
    free(h.p);
    if (bad) {
        snprintf(err, errlen, "%s: write error: %s (%s)", path, strerror(werr),
                 existed ? "the file is unchanged" : "no file was made");
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, real) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The file a save to `path` replaces: a symbolic link is followed (the
 * link stays, its target gets the new contents), anything that exists and
 * is not a regular file is refused (the write is a new file renamed into
 * place, which would replace a device or FIFO with a regular file), and the
 * directory must take a new file. */
int gb_st_target(const char *path, char *real, size_t reallen, char *err, size_t errlen) {
    struct stat sb;
    const char *use = path;
    char *r = NULL;
    if (!path || !*path) {
        snprintf(err, errlen, "empty file name");
        return -1;
    }
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        r = realpath(path, NULL);
        if (!r) {
            snprintf(err, errlen, "%s: a symbolic link whose target cannot be reached: %s", path,
                     strerror(errno));
            return -1;
        }
        use = r;
    }
    int rc = -1;
    if (stat(use, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: is %s; give the name of a file to write", path,
                 gb_file_kind(sb.st_mode));
        goto done;
    }
    if (strlen(use) >= reallen || strlen(use) + 32 > PATH_MAX) {
        snprintf(err, errlen, "%s: path too long", path);
        goto done;
    }
    snprintf(real, reallen, "%s", use);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", use);
    const char *d = dirname(dir);
    if (stat(d, &sb) != 0) {
        snprintf(err, errlen, "%s: directory %s: %s", path, d, strerror(errno));
        goto done;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: %s is not a directory", path, d);
        goto done;
    }
    if (access(d, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "%s: cannot write in directory %s: %s", path, d, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(r);
    return rc;
}

int gb_st_check_writable(const char *path, char *err, size_t errlen) {
    char real[PATH_MAX];
    return gb_st_target(path, real, sizeof(real), err, errlen);
}
