/* gb_spool.c - see gb_spool.h. */
#define _DEFAULT_SOURCE
#include "gb_spool.h"

#include "gb_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPOOL_MAX_ENTRY (64u << 20) /* far above any Result the wire accepts */

struct gb_spool {
    char dir[4096];
};

static int entry_path(const gb_spool_t *s, uint64_t job, uint32_t attempt, const char *suffix,
                      char *out, size_t outlen) {
    return gb_fmt(out, outlen, "%s/result-%" PRIu64 "-%" PRIu32 ".pb%s", s->dir, job, attempt,
                  suffix);
}

gb_spool_t *gb_spool_new(const char *dir, char *err, size_t errlen) {
    gb_spool_t *s = calloc(1, sizeof *s);
    DIR *d = NULL;
    if (!s) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    if (gb_copy(s->dir, sizeof s->dir, dir) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        goto err;
    }
    if (gb_mkdir_p(dir, err, errlen) != 0) goto err;
    d = opendir(dir);
    if (!d) {
        gb_fmt(err, errlen, "cannot open spool %s: %s", dir, strerror(errno));
        goto err;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "result-", 7) == 0 && strstr(e->d_name, ".pb.tmp.")) {
            char p[4400];
            if (gb_fmt(p, sizeof p, "%s/%s", dir, e->d_name) == 0) unlink(p);
        }
    }
    closedir(d);
    return s;
err:
    free(s);
    return NULL;
}

void gb_spool_destroy(gb_spool_t **self_p) {
    if (self_p && *self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

int gb_spool_put(gb_spool_t *self, uint64_t job_id, uint32_t attempt, const void *data, size_t len,
                 char *err, size_t errlen) {
    char p[4200];
    if (entry_path(self, job_id, attempt, "", p, sizeof p) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        return -1;
    }
    return gb_write_file_atomic(p, data, len, err, errlen);
}

int gb_spool_get(gb_spool_t *self, uint64_t job_id, uint32_t attempt, void **data, size_t *len,
                 char *err, size_t errlen) {
    char p[4200];
    if (entry_path(self, job_id, attempt, "", p, sizeof p) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        return -1;
    }
    char *buf = NULL;
    /* a regular file: a FIFO put there would hold the agent in open() */
    if (gb_read_regular_file(p, SPOOL_MAX_ENTRY, &buf, len, err, errlen) != 0) return -1;
    *data = buf;
    return 0;
}

int gb_spool_del(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err, size_t errlen) {
    char p[4200];
    if (entry_path(self, job_id, attempt, "", p, sizeof p) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        return -1;
    }
    if (unlink(p) != 0 && errno != ENOENT) {
        gb_fmt(err, errlen, "cannot delete %s: %s", p, strerror(errno));
        return -1;
    }
    return 0;
}

int gb_spool_quarantine(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err,
                        size_t errlen) {
    char p[4200], bad[4200];
    if (entry_path(self, job_id, attempt, "", p, sizeof p) != 0 ||
        entry_path(self, job_id, attempt, ".bad", bad, sizeof bad) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        return -1;
    }
    if (rename(p, bad) != 0) {
        gb_fmt(err, errlen, "cannot move %s aside: %s", p, strerror(errno));
        return -1;
    }
    return 0;
}

int gb_spool_has(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err, size_t errlen) {
    char p[4200];
    struct stat st;
    if (entry_path(self, job_id, attempt, "", p, sizeof p) != 0) {
        gb_fmt(err, errlen, "spool path too long");
        return -1;
    }
    if (lstat(p, &st) == 0) return 1;
    if (errno == ENOENT) return 0;
    gb_fmt(err, errlen, "cannot look at %s: %s", p, strerror(errno));
    return -1;
}

int gb_spool_ensure(gb_spool_t *self, char *err, size_t errlen) {
    struct stat st;
    if (stat(self->dir, &st) == 0) return 0;
    if (errno != ENOENT) {
        gb_fmt(err, errlen, "cannot look at spool %s: %s", self->dir, strerror(errno));
        return -1;
    }
    return gb_mkdir_p(self->dir, err, errlen) == 0 ? 1 : -1;
}

static int cmp_entry(const void *a, const void *b) {
    const gb_spool_entry_t *x = a, *y = b;
    if (x->job_id != y->job_id) return x->job_id < y->job_id ? -1 : 1;
    return x->attempt < y->attempt ? -1 : x->attempt > y->attempt;
}

/* "result-<job>-<attempt>.pb" exactly, with decimal numbers in range. */
static int parse_name(const char *name, gb_spool_entry_t *e) {
    if (strncmp(name, "result-", 7) != 0) return 0;
    const char *p = name + 7;
    char *end;
    if (*p < '0' || *p > '9') return 0;
    errno = 0;
    unsigned long long job = strtoull(p, &end, 10);
    if (errno || *end != '-' || job == 0) return 0;
    p = end + 1;
    if (*p < '0' || *p > '9') return 0;
    unsigned long att = strtoul(p, &end, 10);
    if (errno || strcmp(end, ".pb") != 0 || att == 0 || att > UINT32_MAX) return 0;
    e->job_id = job;
    e->attempt = (uint32_t)att;
    return 1;
}

int gb_spool_list(gb_spool_t *self, gb_spool_entry_t **out, size_t *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(self->dir);
    if (!d) {
        gb_fmt(err, errlen, "cannot open spool %s: %s", self->dir, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    gb_spool_entry_t *v = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        gb_spool_entry_t ent;
        if (!parse_name(e->d_name, &ent)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            gb_spool_entry_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                closedir(d);
                gb_fmt(err, errlen, "out of memory");
                *n = 0;
                return -1;
            }
            v = nv;
        }
        v[(*n)++] = ent;
    }
    closedir(d);
    if (*n) qsort(v, *n, sizeof *v, cmp_entry);
    *out = v;
    return 0;
}
