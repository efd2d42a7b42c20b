/* gb_spec.c - see gb_spec.h. The key table below is the whole spec
 * language: each key's type, whether it may be a list (an axis of the
 * Cartesian product), the kinds it applies to, its range or its choices,
 * and where it lands in gb_jobdef_t. */
#define _POSIX_C_SOURCE 200809L
#include "gb_spec.h"

#include "gb_util.h"
#include "gb_wire.h"

#include <cjson/cJSON.h>
#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_INT, T_STR, T_LABELS };
enum { K_RESNET = 1, K_GEMM = 2, K_SLEEP = 4, K_ALLREDUCE = 8, K_ALL = 15 };

static const char *const kinds[] = {"resnet50", "gemm", "sleep", "allreduce", NULL};
static const char *const backends[] = {"auto", "cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "tf32", "fp16", "bf16", NULL};
static const char *const interconnects[] = {"auto", "nvlink", "pcie", NULL};
static const char *const fail_ats[] = {"end", "rendezvous", NULL};
static const char *const launches[] = {"auto", "threads", "processes", NULL};

typedef struct keydef {
    const char *key;
    int type;
    int axis;                   /* 1: a list is an axis of the product; 0: exactly one value */
    unsigned kinds;             /* K_* the key applies to */
    int min, max;               /* T_INT */
    const char *const *choices; /* T_STR: allowed values, or NULL for free text */
    size_t off, size;           /* field in gb_jobdef_t (size: char array bytes) */
    int idef;                   /* default (T_INT) */
    const char *sdef;           /* default (T_STR, T_LABELS) */
} keydef_t;

#define F_INT(f) offsetof(gb_jobdef_t, f), sizeof(int)
#define F_STR(f) offsetof(gb_jobdef_t, f), sizeof(((gb_jobdef_t *)0)->f)

/* Axis keys first, in expansion order (outermost first). */
static const keydef_t keys[] = {
    {"backend", T_STR, 1, K_ALL, 0, 0, backends, F_STR(backend), 0, "auto"},
    {"nodes", T_STR, 1, K_ALL, 0, 0, NULL, F_STR(nodes), 0, "*"},
    {"labels", T_LABELS, 1, K_ALL, 0, 0, NULL, F_STR(labels), 0, ""},
    {"gpus", T_INT, 1, K_RESNET | K_SLEEP | K_ALLREDUCE, 1, 1024, NULL, F_INT(gpus), 1, NULL},
    {"n_nodes", T_INT, 1, K_RESNET | K_SLEEP | K_ALLREDUCE, 1, 1024, NULL, F_INT(n_nodes), 1, NULL},
    {"precision", T_STR, 1, K_RESNET | K_GEMM, 0, 0, precisions, F_STR(precision), 0, "fp32"},
    {"batch", T_INT, 1, K_RESNET, 1, 65536, NULL, F_INT(batch), 32, NULL},
    {"interconnect", T_STR, 1, K_RESNET | K_ALLREDUCE, 0, 0, interconnects, F_STR(interconnect), 0,
     "auto"},
    {"steps", T_INT, 1, K_RESNET, 1, 1000000, NULL, F_INT(steps), 20, NULL},
    {"bucket_mb", T_INT, 1, K_RESNET, 1, 4096, NULL, F_INT(bucket_mb), 25, NULL},
    {"warmup", T_INT, 1, K_RESNET | K_ALLREDUCE, 0, 1000000, NULL, F_INT(warmup), 3, NULL},
    {"image_size", T_INT, 1, K_RESNET, 32, 1024, NULL, F_INT(image_size), 224, NULL},
    {"m", T_INT, 1, K_GEMM, 1, 65536, NULL, F_INT(m), 2048, NULL},
    {"n", T_INT, 1, K_GEMM, 1, 65536, NULL, F_INT(n), 2048, NULL},
    {"k", T_INT, 1, K_GEMM, 1, 65536, NULL, F_INT(k), 2048, NULL},
    {"reps", T_INT, 1, K_GEMM, 1, 10000, NULL, F_INT(reps), 10, NULL},
    {"min_bytes", T_INT, 1, K_ALLREDUCE, 4, 1 << 30, NULL, F_INT(min_bytes), 8, NULL},
    {"max_bytes", T_INT, 1, K_ALLREDUCE, 4, 1 << 30, NULL, F_INT(max_bytes), 1 << 30, NULL},
    {"iters", T_INT, 1, K_ALLREDUCE, 1, 100000, NULL, F_INT(iters), 20, NULL},
    {"duration_ms", T_INT, 1, K_SLEEP, 0, 86400000, NULL, F_INT(duration_ms), 100, NULL},
    /* one value each */
    {"timeout_s", T_INT, 0, K_ALL, 1, 7 * 24 * 3600, NULL, F_INT(timeout_s), 0, NULL},
    {"max_attempts", T_INT, 0, K_ALL, 1, 100, NULL, F_INT(max_attempts), 0, NULL},
    {"launch", T_STR, 0, K_RESNET, 0, 0, launches, F_STR(launch), 0, "auto"},
    {"fail", T_STR, 0, K_SLEEP, 0, 0, NULL, F_STR(fail), 0, ""},
    {"signal", T_INT, 0, K_SLEEP, 0, 64, NULL, F_INT(signal), 0, NULL},
    {"rendezvous_s", T_INT, 0, K_RESNET | K_SLEEP | K_ALLREDUCE, 1, 86400, NULL,
     F_INT(rendezvous_s), 300, NULL},
    {"fail_rank", T_INT, 0, K_SLEEP, 0, 1023, NULL, F_INT(fail_rank), -1, NULL},
    {"fail_at", T_STR, 0, K_SLEEP, 0, 0, fail_ats, F_STR(fail_at), 0, "end"},
    {"judge_telemetry", T_INT, 0, K_SLEEP, 0, 1, NULL, F_INT(judge_telemetry), 0, NULL},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        gb_fmt(err, errlen, __VA_ARGS__);                                                          \
        goto fail;                                                                                 \
    } while (0)

int gb_kind_known(const char *kind) {
    for (int i = 0; kinds[i]; i++)
        if (kind && strcmp(kind, kinds[i]) == 0) return 1;
    return 0;
}

int gb_kind_synthetic(const char *kind) {
    return kind && strcmp(kind, "sleep") == 0;
}

const char *gb_kind_names(void) {
    return "allreduce, gemm, resnet50, sleep";
}

/* Edits (insert, delete, substitute, swap two neighbours) from a to b,
 * stopping at 3: only "close" matters. */
static int edits(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40 || (la > lb ? la - lb : lb - la) > 2) return 3;
    int d[41][41];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb] < 3 ? d[la][lb] : 3;
}

/* The spec key an unknown key k was likely meant to be ("duraton_ms",
 * "image-size", "timeout" for "timeout_s"), or NULL: one within two edits
 * (one for a key of three letters or fewer, none for one letter against
 * another), or one that k begins, or that begins with k, over at least 5
 * characters. */
/* a and b the same but for '_' and '-' ("nnodes", "n-nodes": n_nodes) */
static int same_but_separators(const char *a, const char *b) {
    for (;; a++, b++) {
        while (*a == '_' || *a == '-')
            a++;
        while (*b == '_' || *b == '-')
            b++;
        if (*a != *b) return 0;
        if (!*a) return 1;
    }
}

static const char *key_like(const char *k) {
    static const char *const top[] = {"kind", "name", "repeat"};
    const char *best = NULL;
    int best_d = 3;
    size_t lk = strlen(k);
    for (size_t i = 0; i < N_KEYS + 3; i++) {
        const char *c = i < N_KEYS ? keys[i].key : top[i - N_KEYS];
        size_t lc = strlen(c);
        /* before any edit distance: "nnodes" is one edit from both nodes
         * and n_nodes, and the table's order chose nodes */
        if (same_but_separators(k, c)) return c;
        int d = edits(k, c);
        if ((lc <= 3 || lk <= 3) && d > 1) d = 3;
        if (lc == 1 && lk == 1) d = 3; /* 'x' is not a typo of 'm' */
        if (d == 3 && lk >= 5 && lc >= 5 && strncmp(k, c, lk < lc ? lk : lc) == 0) /* a prefix */
            d = 2;
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

static unsigned kind_bit(const char *kind) {
    for (int i = 0; kinds[i]; i++)
        if (strcmp(kind, kinds[i]) == 0) return 1u << i;
    return 0;
}

/* ---- counting jobs ----------------------------------------------------- */

/* A count of jobs past any limit (--max-jobs is at most a million): the
 * products saturate here instead of wrapping (64 values in each of 20
 * axes, times repeat, are far beyond 64 bits). */
#define COUNT_CAP ((uint64_t)1000000000000000) /* 10^15 */

static uint64_t count_mul(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    return a > COUNT_CAP / b ? COUNT_CAP : a * b;
}

static uint64_t count_add(uint64_t a, uint64_t b) {
    return a + b > COUNT_CAP ? COUNT_CAP : a + b;
}

/* n with a comma between groups of three digits ("1,296"); at COUNT_CAP
 * "over 1,000,000,000,000,000". Returns buf. */
static const char *fmt_count(char *buf, size_t len, uint64_t n) {
    char digits[24], grouped[40];
    int nd = snprintf(digits, sizeof digits, "%" PRIu64, n), o = 0;
    for (int i = 0; i < nd; i++) {
        if (i && (nd - i) % 3 == 0) grouped[o++] = ',';
        grouped[o++] = digits[i];
    }
    grouped[o] = '\0';
    gb_fmt(buf, len, "%s%s", n >= COUNT_CAP ? "over " : "", grouped);
    return buf;
}

/* The index of key in keys[] (it is there: the callers name keys of the
 * table). */
static size_t key_index(const char *key) {
    size_t i = 0;
    while (i < N_KEYS - 1 && strcmp(keys[i].key, key) != 0)
        i++;
    return i;
}

/* ---- labels ----------------------------------------------------------- */

static int label_key_char(int c) {
    return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '/';
}
static int label_val_char(int c) {
    return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':' || c == '+';
}

int gb_labels_canon(const char *in, char *out, size_t outlen, char *err, size_t errlen) {
    size_t o = 0, count = 0;
    const char *p = in ? in : "";
    if (outlen == 0) return -1;
    out[0] = '\0';
    while (*p) {
        while (*p == ' ')
            p++;
        const char *k = p;
        while (*p && label_key_char((unsigned char)*p))
            p++;
        size_t klen = (size_t)(p - k);
        if (klen == 0 || klen > 64 || *p != '=') {
            gb_fmt(err, errlen, "label '%.40s': want key=value, key of 1..64 [A-Za-z0-9_./-]", k);
            return -1;
        }
        p++;
        const char *v = p;
        while (*p && label_val_char((unsigned char)*p))
            p++;
        size_t vlen = (size_t)(p - v);
        while (*p == ' ')
            p++;
        if ((*p && *p != ',') || vlen > 128) {
            gb_fmt(err, errlen, "label '%.*s': value must be 0..128 of [A-Za-z0-9_./:+-]",
                   (int)(klen < 64 ? klen : 64), k);
            return -1;
        }
        if (++count > 32) {
            gb_fmt(err, errlen, "more than 32 labels");
            return -1;
        }
        /* repeated key? */
        for (const char *q = out; *q;) {
            const char *eq = strchr(q, '=');
            if ((size_t)(eq - q) == klen && strncmp(q, k, klen) == 0) {
                gb_fmt(err, errlen, "label key '%.*s' given twice", (int)klen, k);
                return -1;
            }
            const char *comma = strchr(q, ',');
            if (!comma) break;
            q = comma + 1;
        }
        int n =
            snprintf(out + o, outlen - o, "%s%.*s=%.*s", o ? "," : "", (int)klen, k, (int)vlen, v);
        if (n < 0 || (size_t)n >= outlen - o) {
            gb_fmt(err, errlen, "labels longer than %zu bytes", outlen - 1);
            return -1;
        }
        o += (size_t)n;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                gb_fmt(err, errlen, "labels end with a comma");
                return -1;
            }
        }
    }
    return 0;
}

int gb_labels_match(const char *have, const char *want) {
    const char *w = want;
    while (w && *w) {
        const char *end = strchr(w, ',');
        size_t len = end ? (size_t)(end - w) : strlen(w);
        int found = 0;
        for (const char *h = have; h && *h;) {
            const char *hend = strchr(h, ',');
            size_t hlen = hend ? (size_t)(hend - h) : strlen(h);
            if (hlen == len && strncmp(h, w, len) == 0) {
                found = 1;
                break;
            }
            h = hend ? hend + 1 : NULL;
        }
        if (!found) return 0;
        w = end ? end + 1 : NULL;
    }
    return 1;
}

/* ---- values ----------------------------------------------------------- */

typedef struct values {
    int given;
    int n;
    int iv[GB_SPEC_MAX_VALUES];
    char *sv[GB_SPEC_MAX_VALUES];
} values_t;

/* Printable UTF-8 as the wire takes a line shown to people: no C0, DEL or
 * C1 (UTF-8 C2 80..9F; gb_wire_control_len). A name with a C1 passed here
 * and was refused in every status reply that carried it: `wait` and `run`
 * asked again for ever, `status` failed while the sweep existed. */
static int text_ok(const char *s, size_t max, int allow_empty) {
    size_t n = strlen(s);
    if (n > max || (!allow_empty && n == 0)) return 0;
    for (size_t i = 0; i < n; i++)
        if (gb_wire_control_len(s + i)) return 0;
    return gb_utf8_ok(s);
}

/* 1 when the text's brackets, outside strings, nest deeper than cJSON
 * parses: its refusal is said as that, not as an error at some byte. */
static int too_deep(const char *s, size_t len) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        if (!gb_json_code(s, len, &i, &in_str)) continue;
        if ((s[i] == '[' || s[i] == '{') && ++depth > CJSON_NESTING_LIMIT) return 1;
        if (s[i] == ']' || s[i] == '}') depth--;
    }
    return 0;
}

/* One value of key kd from item into v (appended). */
/* d is an integer in min..max */
static int int_in(double d, int min, int max) {
    return d >= min && d <= max && d == (double)(int)d;
}

/* The refusal of a number d that is not an integer in min..max, a whole
 * number said as one ("got 86400000", not "8.64e+07"). */
static void out_of_range(const char *key, int min, int max, double d, char *err, size_t errlen) {
    gb_fmt(err, errlen,
           d > -1e15 && d < 1e15 && d == (double)(long long)d
               ? "'%s' must be an integer in %d..%d (got %.0f)"
               : "'%s' must be an integer in %d..%d (got %.17g)",
           key, min, max, d);
}

static int parse_value(const keydef_t *kd, const cJSON *item, values_t *v, char *err,
                       size_t errlen) {
    char canon[GB_LABELS_LEN];
    const char *s = NULL;
    if (v->n >= GB_SPEC_MAX_VALUES) {
        gb_fmt(err, errlen, "'%s': more than %d values", kd->key, GB_SPEC_MAX_VALUES);
        return -1;
    }
    if (kd->type == T_INT) {
        if (!cJSON_IsNumber(item)) {
            /* a string said as it was given ("abc", "8") */
            if (cJSON_IsString(item))
                gb_fmt(err, errlen, "'%s' must be an integer (got \"%.40s\")", kd->key,
                       item->valuestring);
            else
                gb_fmt(err, errlen, "'%s' must be an integer", kd->key);
            return -1;
        }
        double d = item->valuedouble;
        if (!int_in(d, kd->min, kd->max)) {
            out_of_range(kd->key, kd->min, kd->max, d, err, errlen);
            return -1;
        }
        for (int i = 0; i < v->n; i++)
            if (v->iv[i] == (int)d) {
                gb_fmt(err, errlen, "'%s': value %d given twice (use repeat for copies)", kd->key,
                       (int)d);
                return -1;
            }
        v->iv[v->n++] = (int)d;
        return 0;
    }
    if (kd->type == T_LABELS && cJSON_IsObject(item)) {
        /* {"k": "v", ...} -> "k=v,..." */
        char joined[GB_LABELS_LEN];
        size_t o = 0;
        joined[0] = '\0';
        for (const cJSON *c = item->child; c; c = c->next) {
            if (!cJSON_IsString(c)) {
                gb_fmt(err, errlen, "'labels': value of '%.40s' must be a string", c->string);
                return -1;
            }
            /* a ',' or '=' inside would make more labels once joined */
            if (strpbrk(c->string, ",=") || strpbrk(c->valuestring, ",=")) {
                gb_fmt(err, errlen,
                       "'labels': key '%.40s': keys are 1..64 [A-Za-z0-9_./-] and values 0..128 "
                       "[A-Za-z0-9_./:+-]",
                       c->string);
                return -1;
            }
            int n = snprintf(joined + o, sizeof joined - o, "%s%s=%s", o ? "," : "", c->string,
                             c->valuestring);
            if (n < 0 || (size_t)n >= sizeof joined - o) {
                gb_fmt(err, errlen, "'labels' longer than %zu bytes", sizeof joined - 1);
                return -1;
            }
            o += (size_t)n;
        }
        if (gb_labels_canon(joined, canon, sizeof canon, err, errlen) != 0) return -1;
        s = canon;
    } else {
        if (!cJSON_IsString(item)) {
            gb_fmt(err, errlen, "'%s' must be a string%s", kd->key,
                   kd->type == T_LABELS ? " \"k=v,...\" or an object" : "");
            return -1;
        }
        s = item->valuestring;
        if (kd->type == T_LABELS) {
            /* the key named, as for an object's labels ("'labels': label
             * 'x': want key=value"; the flag's name, from submit --labels) */
            char why[256];
            if (gb_labels_canon(s, canon, sizeof canon, why, sizeof why) != 0) {
                gb_fmt(err, errlen, "'%s': %s", kd->key, why);
                return -1;
            }
            s = canon;
        } else if (kd->choices) {
            int ok = 0;
            for (int i = 0; kd->choices[i]; i++)
                ok |= strcmp(s, kd->choices[i]) == 0;
            if (!ok) {
                char list[128] = "";
                for (int i = 0; kd->choices[i]; i++) {
                    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
                    strncat(list, kd->choices[i], sizeof list - strlen(list) - 1);
                }
                gb_fmt(err, errlen, "'%s': '%.40s' is not one of %s", kd->key, s, list);
                return -1;
            }
        } else if (!text_ok(s, kd->size - 1, strcmp(kd->key, "fail") == 0)) {
            gb_fmt(err, errlen, "'%s' must be %s..%zu bytes of printable UTF-8", kd->key,
                   strcmp(kd->key, "fail") == 0 ? "0" : "1", kd->size - 1);
            return -1;
        }
    }
    for (int i = 0; i < v->n; i++)
        /* label sets are the same in any order ("rack=a,pool=x" and
         * "pool=x,rack=a" made the same jobs twice) */
        if (kd->type == T_LABELS ? gb_labels_match(v->sv[i], s) && gb_labels_match(s, v->sv[i])
                                 : strcmp(v->sv[i], s) == 0) {
            gb_fmt(err, errlen, "'%s': value '%.40s' given twice (use repeat for copies)", kd->key,
                   s);
            return -1;
        }
    v->sv[v->n] = strdup(s);
    if (!v->sv[v->n]) {
        gb_fmt(err, errlen, "out of memory");
        return -1;
    }
    v->n++;
    return 0;
}

static void set_field(gb_jobdef_t *job, const keydef_t *kd, const values_t *v, int idx) {
    char *base = (char *)job + kd->off;
    if (kd->type == T_INT) {
        *(int *)base = v->given ? v->iv[idx] : kd->idef;
    } else {
        const char *s = v->given ? v->sv[idx] : kd->sdef;
        snprintf(base, kd->size, "%s", s);
    }
}

static int default_timeout(const gb_jobdef_t *j) {
    if (strcmp(j->kind, "resnet50") == 0) return 3600;
    if (strcmp(j->kind, "gemm") == 0) return 600;
    if (strcmp(j->kind, "allreduce") == 0) return 1800;
    return j->duration_ms / 1000 + 60;
}

/* Checks that need several fields of one job. */
static int check_job(const gb_jobdef_t *j, char *err, size_t errlen) {
    if (j->fail_rank >= 0 && j->fail_rank >= j->n_nodes) {
        gb_fmt(err, errlen, "'fail_rank' %d is not a rank of a job over %d node(s)", j->fail_rank,
               j->n_nodes);
        return -1;
    }
    if (strcmp(j->fail_at, "rendezvous") == 0 && j->n_nodes < 2) {
        gb_fmt(err, errlen, "'fail_at': 'rendezvous' needs a multi-node job (n_nodes > 1)");
        return -1;
    }
    /* where and when a failure acts, with none to act: the job ran ok */
    if ((j->fail_rank >= 0 || strcmp(j->fail_at, "rendezvous") == 0) && !j->fail[0] && !j->signal) {
        gb_fmt(err, errlen, "'%s' says where 'fail' or 'signal' acts; give one of them",
               j->fail_rank >= 0 ? "fail_rank" : "fail_at");
        return -1;
    }
    if (strcmp(j->kind, "allreduce") == 0 &&
        (j->min_bytes % 4 || j->max_bytes % 4 || j->min_bytes > j->max_bytes)) {
        gb_fmt(err, errlen,
               "allreduce: 'min_bytes' %d and 'max_bytes' %d must be multiples of 4 (floats) with "
               "min <= max",
               j->min_bytes, j->max_bytes);
        return -1;
    }
    if (strcmp(j->kind, "gemm") == 0) {
        uint64_t elems = (uint64_t)j->m * (uint64_t)j->k + (uint64_t)j->k * (uint64_t)j->n +
                         (uint64_t)j->m * (uint64_t)j->n;
        if (elems * 4 > ((uint64_t)16 << 30)) {
            gb_fmt(err, errlen, "gemm %dx%dx%d needs %.1f GiB for its matrices (limit 16 GiB)",
                   j->m, j->n, j->k, (double)elems * 4 / (1 << 30));
            return -1;
        }
    }
    return 0;
}

cJSON *gb_spec_json(const char *json, size_t len, char *err, size_t errlen) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        if (too_deep(json, len))
            FAIL("spec nests objects or lists deeper than %d levels (a spec needs 3)",
                 CJSON_NESTING_LIMIT);
        /* line and column, as an editor shows them: a byte offset alone
         * ("near byte 17") sent people counting */
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < len; i++) {
            if (json[i] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)json[i] & 0xc0) != 0x80) {
                col++;
            }
        }
        FAIL("spec is not valid JSON (error near line %zu, column %zu: byte %zu)", line, col, at);
    }
    while (end && (size_t)(end - json) < len && isspace((unsigned char)*end))
        end++;
    if (end && (size_t)(end - json) < len) FAIL("spec has trailing bytes after the JSON object");
    if (!cJSON_IsObject(root)) FAIL("spec must be a JSON object");
    /* "\u0000" in a string: cJSON's C strings end there, and the rest of
     * the value would be dropped without a word ("ab\u0000cd" read "ab") */
    for (size_t i = 0, bs = 0; i < len; i++) {
        if (json[i] == '\\') {
            bs++;
            continue;
        }
        if ((bs & 1) && json[i] == 'u' && i + 4 < len && json[i + 1] == '0' && json[i + 2] == '0' &&
            json[i + 3] == '0' && json[i + 4] == '0')
            FAIL("a string in the spec holds \\u0000 (NUL), which no value may");
        bs = 0;
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

/* The key repeat (or a job's repeat_index): one integer in min..max into
 * *out, else a refusal that says what it got ("'repeat' must be an integer
 * in 1..1000 (got 5000)"), as a key of the table says it (out_of_range). */
static int one_int(const cJSON *c, const char *key, int min, int max, int *out, char *err,
                   size_t errlen) {
    if (cJSON_IsArray(c)) {
        gb_fmt(err, errlen, "'%s' takes one value, not a list", key);
        return -1;
    }
    if (cJSON_IsNumber(c) && int_in(c->valuedouble, min, max)) {
        *out = (int)c->valuedouble;
        return 0;
    }
    if (cJSON_IsString(c))
        gb_fmt(err, errlen, "'%s' must be an integer in %d..%d (got \"%.40s\")", key, min, max,
               c->valuestring);
    else if (!cJSON_IsNumber(c))
        gb_fmt(err, errlen, "'%s' must be an integer in %d..%d", key, min, max);
    else
        out_of_range(key, min, max, c->valuedouble, err, errlen);
    return -1;
}

/* The kinds of mask, in the table's order, as "resnet50", "resnet50 and
 * gemm", "resnet50, sleep and allreduce". Returns buf. */
static const char *kind_list(char *buf, size_t len, unsigned mask) {
    int n = 0, total = 0;
    for (int i = 0; kinds[i]; i++)
        total += (mask >> i) & 1;
    buf[0] = '\0';
    for (int i = 0; kinds[i]; i++) {
        if (!((mask >> i) & 1)) continue;
        size_t o = strlen(buf);
        snprintf(buf + o, len - o, "%s%s", n == 0 ? "" : n == total - 1 ? " and " : ", ", kinds[i]);
        n++;
    }
    return buf;
}

/* A key none of the spec's kinds takes: which kinds it does apply to, so
 * that the refusal says what to do ("'precision' does not apply to
 * allreduce, the kind of this spec; it applies to resnet50 and gemm only
 * (allreduce runs in fp32): drop it, or add one of those to the kinds"). */
static void not_applicable(const keydef_t *kd, unsigned kindmask, char *err, size_t errlen) {
    char have[64], takes[64], fp32[64] = "";
    int n_have = 0, n_takes = 0;
    for (int i = 0; kinds[i]; i++) {
        n_have += (kindmask >> i) & 1;
        n_takes += (kd->kinds >> i) & 1;
    }
    kind_list(have, sizeof have, kindmask);
    kind_list(takes, sizeof takes, kd->kinds);
    /* allreduce has no precision: it sums floats */
    if (strcmp(kd->key, "precision") == 0 && (kindmask & K_ALLREDUCE))
        gb_fmt(fp32, sizeof fp32, " (allreduce runs in fp32)");
    gb_fmt(err, errlen,
           "'%s' does not apply to %s, the kind%s of this spec; it applies to %s only%s: drop "
           "it, or add %s to the kinds",
           kd->key, have, n_have > 1 ? "s" : "", takes, fp32, n_takes > 1 ? "one of those" : takes);
}

static int parse_common(const char *json, size_t len, int job_mode, size_t max_jobs,
                        const char *limit_name, gb_sweep_def_t *out, int *repeat_index, char *err,
                        size_t errlen) {
    values_t *vals = calloc(N_KEYS, sizeof *vals);
    values_t kindv = {0};
    cJSON *root = NULL;
    int repeat = 1;
    memset(out, 0, sizeof *out);
    if (!vals) {
        gb_fmt(err, errlen, "out of memory");
        return -1;
    }
    if (!(root = gb_spec_json(json, len, err, errlen))) goto fail;

    /* Pass 1: kind, and the keys every object may hold. */
    unsigned kindmask = 0;
    int n_keys = 0;
    for (const cJSON *c = root->child; c; c = c->next)
        if (++n_keys > 64) FAIL("spec has more than 64 keys");
    for (const cJSON *c = root->child; c; c = c->next) {
        for (const cJSON *d = c->next; d; d = d->next)
            if (strcmp(c->string, d->string) == 0) FAIL("key '%.40s' given twice", c->string);
        if (strcmp(c->string, "kind") == 0) {
            const cJSON *items = cJSON_IsArray(c) ? c->child : c;
            if (cJSON_IsArray(c) && !items) FAIL("'kind' is an empty list");
            if (cJSON_IsArray(c) && job_mode) FAIL("'kind' takes one value in a job");
            for (const cJSON *it = items; it; it = cJSON_IsArray(c) ? it->next : NULL) {
                if (!cJSON_IsString(it)) FAIL("'kind' must be a string or a list of strings");
                if (!gb_kind_known(it->valuestring))
                    FAIL("unknown job kind '%.40s' (known: %s)", it->valuestring, gb_kind_names());
                unsigned bit = kind_bit(it->valuestring);
                if (kindmask & bit) FAIL("'kind': '%s' given twice", it->valuestring);
                kindmask |= bit;
                kindv.sv[kindv.n++] = it->valuestring; /* borrowed from root */
            }
        }
    }
    if (!kindmask) FAIL("spec has no 'kind' (one of %s)", gb_kind_names());

    for (const cJSON *c = root->child; c; c = c->next) {
        const char *k = c->string;
        if (strcmp(k, "kind") == 0) continue;
        if (strcmp(k, "name") == 0) {
            if (cJSON_IsArray(c)) FAIL("'name' takes one value, not a list");
            if (!cJSON_IsString(c) || !text_ok(c->valuestring, sizeof out->name - 1, 1))
                FAIL("'name' must be a string of at most %zu bytes of printable UTF-8",
                     sizeof out->name - 1);
            snprintf(out->name, sizeof out->name, "%s", c->valuestring);
            continue;
        }
        if (strcmp(k, "repeat") == 0 && !job_mode) {
            if (one_int(c, k, 1, GB_SPEC_MAX_REPEAT, &repeat, err, errlen) != 0) goto fail;
            continue;
        }
        if (strcmp(k, "repeat_index") == 0 && job_mode) {
            if (one_int(c, k, 0, GB_SPEC_MAX_REPEAT - 1, repeat_index, err, errlen) != 0) goto fail;
            continue;
        }
        size_t ki = 0;
        while (ki < N_KEYS && strcmp(keys[ki].key, k) != 0)
            ki++;
        if (ki == N_KEYS) {
            const char *like = key_like(k);
            FAIL("unknown key '%.40s'%s%s%s", k, like ? " (did you mean '" : "", like ? like : "",
                 like ? "'?)" : "");
        }
        const keydef_t *kd = &keys[ki];
        if (!(kd->kinds & kindmask)) {
            not_applicable(kd, kindmask, err, errlen);
            goto fail;
        }
        values_t *v = &vals[ki];
        v->given = 1;
        if (cJSON_IsArray(c)) {
            if (!kd->axis || job_mode) FAIL("'%s' takes one value, not a list", k);
            if (!c->child) FAIL("'%s' is an empty list", k);
            for (const cJSON *it = c->child; it; it = it->next)
                if (parse_value(kd, it, v, err, errlen) != 0) goto fail;
        } else if (parse_value(kd, c, v, err, errlen) != 0) {
            goto fail;
        }
    }

    /* rendezvous_s times the ranks of a job over several nodes; on a spec
     * whose every job is on one node it would be silently meaningless. */
    {
        size_t kr = 0, kn = 0;
        while (kr < N_KEYS && strcmp(keys[kr].key, "rendezvous_s") != 0)
            kr++;
        while (kn < N_KEYS && strcmp(keys[kn].key, "n_nodes") != 0)
            kn++;
        if (kr < N_KEYS && kn < N_KEYS && vals[kr].given) {
            int multi = 0;
            for (int i = 0; vals[kn].given && i < vals[kn].n; i++)
                multi |= vals[kn].iv[i] > 1;
            if (!multi)
                FAIL("'rendezvous_s' applies only to jobs over several nodes; add \"n_nodes\" "
                     "above 1 or drop it");
        }
    }

    /* Count the jobs before making any, exactly, as expansion below makes
     * them (a one-GPU job on one node once for all interconnect values), so
     * that a refusal can say how many the spec makes: the product of the
     * axes that apply to each kind, times repeat, with the (gpus, n_nodes)
     * pairs of one GPU on one node counted once instead of once per
     * interconnect value. Saturates at COUNT_CAP. */
    size_t k_ic = key_index("interconnect"), k_gpus = key_index("gpus"),
           k_nodes = key_index("n_nodes");
    uint64_t total = 0, made = 0; /* made: before one-GPU jobs are dropped */
    for (int ki = 0; ki < kindv.n; ki++) {
        unsigned bit = kind_bit(kindv.sv[ki]);
        uint64_t prod = (uint64_t)repeat;
        for (size_t i = 0; i < N_KEYS; i++)
            if ((keys[i].kinds & bit) && vals[i].given && i != k_ic && i != k_gpus && i != k_nodes)
                prod = count_mul(prod, (uint64_t)vals[i].n);
        uint64_t n_ic = (keys[k_ic].kinds & bit) && vals[k_ic].given ? (uint64_t)vals[k_ic].n : 1;
        const values_t *g = (keys[k_gpus].kinds & bit) && vals[k_gpus].given ? &vals[k_gpus] : NULL;
        const values_t *nn =
            (keys[k_nodes].kinds & bit) && vals[k_nodes].given ? &vals[k_nodes] : NULL;
        uint64_t pairs = 0, all = (uint64_t)(g ? g->n : 1) * (uint64_t)(nn ? nn->n : 1) * n_ic;
        for (int a = 0; a < (g ? g->n : 1); a++)
            for (int b = 0; b < (nn ? nn->n : 1); b++)
                pairs += (g ? g->iv[a] : 1) <= 1 && (nn ? nn->iv[b] : 1) <= 1 ? 1 : n_ic;
        total = count_add(total, count_mul(prod, pairs));
        made = count_add(made, count_mul(prod, all));
    }
    if (total > max_jobs) {
        char n[48];
        FAIL("the sweep expands to %s jobs, more than %s %zu (the most one sweep may have)",
             fmt_count(n, sizeof n, total), limit_name, max_jobs);
    }
    /* room for every combination expansion visits (at most 3 times the
     * limit: three interconnect values), whatever it then drops */
    out->jobs = calloc((size_t)made, sizeof *out->jobs);
    if (!out->jobs) FAIL("out of memory");

    /* Expand: per kind, an odometer over the axes that apply to it. */
    for (int ki = 0; ki < kindv.n; ki++) {
        unsigned bit = kind_bit(kindv.sv[ki]);
        int idx[N_KEYS] = {0};
        for (;;) {
            size_t first = out->n_jobs;
            for (int r = 0; r < repeat; r++) {
                gb_jobdef_t *j = &out->jobs[out->n_jobs++];
                snprintf(j->kind, sizeof j->kind, "%s", kindv.sv[ki]);
                for (size_t i = 0; i < N_KEYS; i++)
                    set_field(j, &keys[i], &vals[i], idx[i]);
                if (!(bit & K_GEMM)) j->m = j->n = j->k = j->reps = 0;
                if (!(bit & K_RESNET)) {
                    j->batch = j->steps = j->image_size = j->bucket_mb = 0;
                    j->launch[0] = '\0';
                }
                if (!(bit & (K_RESNET | K_GEMM))) j->precision[0] = '\0';
                if (!(bit & (K_RESNET | K_ALLREDUCE))) {
                    j->warmup = 0;
                    j->interconnect[0] = '\0';
                }
                if (!(bit & K_ALLREDUCE)) j->min_bytes = j->max_bytes = j->iters = 0;
                if (!(bit & (K_RESNET | K_SLEEP | K_ALLREDUCE))) j->gpus = 1;
                if (!(bit & K_SLEEP)) {
                    j->duration_ms = 0;
                    j->fail_rank = -1;
                    j->fail_at[0] = '\0';
                    j->judge_telemetry = 0;
                }
                if (!(bit & (K_RESNET | K_SLEEP | K_ALLREDUCE))) {
                    j->n_nodes = 1;
                    j->rendezvous_s = 0;
                }
                if (j->timeout_s == 0) j->timeout_s = default_timeout(j);
                j->repeat_index = job_mode ? *repeat_index : r;
                if (check_job(j, err, errlen) != 0) goto fail;
            }
            /* One GPU on one node moves no gradients: its interconnect is
             * a word only, so the run is made once, for the first value of
             * the interconnect axis (--gpus 1,2,4 --interconnect nvlink,pcie
             * made the same one-GPU run twice). */
            if (k_ic < N_KEYS && (keys[k_ic].kinds & bit) && idx[k_ic] > 0 && out->n_jobs > first &&
                out->jobs[first].gpus <= 1 && out->jobs[first].n_nodes <= 1) {
                memset(&out->jobs[first], 0, (out->n_jobs - first) * sizeof *out->jobs);
                out->n_jobs = first;
            }
            /* next combination: the last axis moves fastest */
            int moved = 0;
            for (int i = (int)N_KEYS - 1; i >= 0; i--) {
                if (!(keys[i].kinds & bit) || !vals[i].given || vals[i].n < 2) continue;
                if (++idx[i] < vals[i].n) {
                    moved = 1;
                    break;
                }
                idx[i] = 0;
            }
            if (!moved) break;
        }
    }
    /* the count above is what expansion makes: a refusal said the number */
    assert(out->n_jobs == total);
    for (size_t i = 0; i < N_KEYS; i++)
        for (int j = 0; j < vals[i].n; j++)
            free(vals[i].sv[j]);
    free(vals);
    cJSON_Delete(root);
    return 0;
fail:
    if (vals)
        for (size_t i = 0; i < N_KEYS; i++)
            for (int j = 0; j < vals[i].n; j++)
                free(vals[i].sv[j]);
    free(vals);
    cJSON_Delete(root);
    gb_sweep_def_free(out);
    return -1;
}

int gb_spec_parse(const char *json, size_t len, size_t max_jobs, gb_sweep_def_t *out, char *err,
                  size_t errlen) {
    return parse_common(json, len, 0, max_jobs, "--max-jobs", out, NULL, err, errlen);
}

int gb_spec_parse_limit(const char *json, size_t len, size_t max_jobs, const char *limit_name,
                        gb_sweep_def_t *out, char *err, size_t errlen) {
    return parse_common(json, len, 0, max_jobs, limit_name, out, NULL, err, errlen);
}

void gb_sweep_def_free(gb_sweep_def_t *s) {
    if (!s) return;
    free(s->jobs);
    s->jobs = NULL;
    s->n_jobs = 0;
}

int gb_jobdef_from_json(const char *json, size_t len, gb_jobdef_t *out, char *err, size_t errlen) {
    gb_sweep_def_t def;
    int repeat_index = 0;
    if (parse_common(json, len, 1, 1, "--max-jobs", &def, &repeat_index, err, errlen) != 0)
        return -1;
    *out = def.jobs[0];
    gb_sweep_def_free(&def);
    return 0;
}

char *gb_jobdef_to_json(const gb_jobdef_t *j) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    unsigned bit = kind_bit(j->kind);
    cJSON_AddStringToObject(o, "kind", j->kind);
    for (size_t i = 0; i < N_KEYS; i++) {
        const keydef_t *kd = &keys[i];
        if (!(kd->kinds & bit)) continue;
        const char *base = (const char *)j + kd->off;
        if (kd->type == T_INT) {
            int v = *(const int *)base;
            if (strcmp(kd->key, "max_attempts") == 0 && v == 0) continue; /* coordinator default */
            if (strcmp(kd->key, "signal") == 0 && v == 0) continue;
            /* multi-node keys only where they matter: one-node jobs keep the
             * parameters they had before issue 5 */
            if (strcmp(kd->key, "n_nodes") == 0 && v <= 1) continue;
            if (strcmp(kd->key, "rendezvous_s") == 0 && j->n_nodes <= 1) continue;
            if (strcmp(kd->key, "fail_rank") == 0 && v < 0) continue;
            if (strcmp(kd->key, "judge_telemetry") == 0 && v == 0) continue;
            cJSON_AddNumberToObject(o, kd->key, v);
        } else {
            if (strcmp(kd->key, "fail") == 0 && base[0] == '\0') continue;
            if (strcmp(kd->key, "fail_at") == 0 && strcmp(base, "end") == 0) continue;
            /* the default: jobs keep the parameters they had before it */
            if (strcmp(kd->key, "launch") == 0 && strcmp(base, "auto") == 0) continue;
            /* a gemm in fp32 says nothing: its job is what it was before gemm
             * took a precision, which an older agent's worker still runs */
            if (strcmp(kd->key, "precision") == 0 && (bit & K_GEMM) && strcmp(base, "fp32") == 0)
                continue;
            cJSON_AddStringToObject(o, kd->key, base);
        }
    }
    cJSON_AddNumberToObject(o, "repeat_index", j->repeat_index);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
