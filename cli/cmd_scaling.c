/* cmd_scaling.c - `gpubench scaling`: what more GPUs, and NVLink against
 * PCIe, buy in training, from the store's v_scaling view. One row per node
 * and configuration (GPU model, backend, precision, batch per GPU, image
 * size, nodes, all-reduce bucket, how the replicas ran) and GPU count, and
 * per interconnect the run used (the record's word: nvlink, pcie, net, shm,
 * tcp) the median images/s of its runs, how many, the speedup over the
 * one-GPU median of the same node and configuration (v_scaling's baseline)
 * and the efficiency (speedup / GPUs); where both NVLink and PCIe ran, the
 * NVLink figure over the PCIe one. The medians are SQL's (window
 * functions, as v_models'); the ratios are computed here. Read-only on the
 * SQLite file, as `gpubench results`. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "gb_util.h"
#include "output.h"

#include <getopt.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const known_prec[] = {"fp16", "bf16", "tf32", "fp32"};
enum { N_PREC = sizeof known_prec / sizeof known_prec[0] };

/* The interconnects in the order shown (those found); others the record
 * may name later go after them, in the order met. */
static const char *const known_ic[] = {"nvlink", "pcie", "net", "shm", "tcp"};
enum { N_KNOWN_IC = sizeof known_ic / sizeof known_ic[0], MAX_IC = 8 };

/* The key columns, in the query's order: a configuration and its GPU
 * count. Those marked opt are shown in the table only where rows differ
 * (csv and json: always), and said once under it otherwise. */
enum {
    K_NODE,
    K_MODEL,
    K_BACKEND,
    K_PREC,
    K_BATCH,
    K_IMAGE,
    K_NODES,
    K_BUCKET,
    K_LAUNCH,
    K_GPUS,
    NK
};
static const struct {
    const char *col;  /* v_scaling's column */
    const char *name; /* the output's */
    int opt;
} keys[NK] = {
    {"node", "node", 0},
    {"gpu_model", "gpu_model", 0},
    {"backend", "backend", 1},
    {"precision", "precision", 0},
    {"batch_per_gpu", "batch_per_gpu", 1},
    {"image_size", "image_size", 1},
    {"n_nodes", "n_nodes", 1},
    {"bucket_mb", "bucket_mb", 1},
    {"launch", "launch", 1},
    {"n_gpus", "n_gpus", 0},
};

typedef struct cell {
    int type; /* SQLITE_NULL, SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT */
    int64_t i;
    double d;
    char *s;
} cell_t;

typedef struct srow {
    cell_t key[NK];
    int has[MAX_IC];
    double img_s[MAX_IC];
    int64_t runs[MAX_IC];
    double base;    /* the one-GPU median; 0: none */
    int base_model; /* base is the GPU model's (a multi-node row whose node has none) */
} srow_t;

typedef struct scaling {
    srow_t *rows;
    int n, cap;
    char *ic[MAX_IC]; /* the interconnects found, in the order shown */
    int nic;
    int prec_sel[N_PREC], nprec; /* --precision: indexes into known_prec */
    long gpus[16];               /* --gpus: the GPU counts shown; none: all */
    int ngpus;
} scaling_t;

static void usage(FILE *out) {
    fprintf(out,
            "usage: gpubench scaling [--db FILE] [--node GLOB] [--precision LIST] [--batch N]\n"
            "                        [--gpus LIST] [--backend cpu|cuda] [--format F]\n"
            "  What more GPUs, and NVLink against PCIe, buy in ResNet-50 training, from the\n"
            "  v_scaling view: one row per node, configuration and GPU count (more than\n"
            "  one), and per interconnect the run used (the record's word: nvlink, pcie,\n"
            "  net, shm, tcp) the median images/s of its runs (done, valid), how many, the\n"
            "  speedup over base_img_s (the one-GPU median of the same node and\n"
            "  configuration; for a multi-node row whose rank-0 node has none, the GPU\n"
            "  model's, said in a base_of column) and the efficiency (speedup / GPUs);\n"
            "  nvlink_gain is nvlink_img_s over pcie_img_s where both ran. A multi-node\n"
            "  row is rank 0's node's. It reads the SQLite file directly, as results does\n"
            "  --db FILE         the store (default " GB_DEFAULT_DB ")\n"
            "  --node GLOB       nodes whose name matches (a shell pattern; default all)\n"
            "  --precision LIST  fp16, bf16, tf32, fp32, comma-separated (default all)\n"
            "  --batch N         one batch per GPU (default every one)\n"
            "  --gpus LIST       GPU counts in all (2, 4, 8: comma-separated; default\n"
            "                    every one above 1)\n"
            "  --backend B       cpu or cuda (default both)\n"
            "  --format F        table | csv | json | md (default table; a missing\n"
            "                    figure is '-', empty, null, '-')\n"
            "  -h, --help        this help\n");
}

static void cell_free(cell_t *c) {
    free(c->s);
    c->s = NULL;
}

static int cell_eq(const cell_t *a, const cell_t *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case SQLITE_NULL:
        return 1;
    case SQLITE_INTEGER:
        return a->i == b->i;
    case SQLITE_FLOAT:
        return a->d == b->d;
    default:
        return strcmp(a->s, b->s) == 0;
    }
}

/* Column col of st into c; -1 on out-of-memory. */
static int cell_get(cell_t *c, sqlite3_stmt *st, int col) {
    memset(c, 0, sizeof *c);
    c->type = sqlite3_column_type(st, col);
    if (c->type == SQLITE_INTEGER) c->i = sqlite3_column_int64(st, col);
    if (c->type == SQLITE_FLOAT) c->d = sqlite3_column_double(st, col);
    if (c->type == SQLITE_TEXT || c->type == SQLITE_BLOB) {
        c->type = SQLITE_TEXT;
        const unsigned char *t = sqlite3_column_text(st, col);
        if (!(c->s = strdup(t ? (const char *)t : ""))) return -1;
    }
    return 0;
}

static void cell_put(gb_table_t *t, int col, const cell_t *c) {
    if (c->type == SQLITE_INTEGER)
        gb_table_int(t, col, c->i);
    else if (c->type == SQLITE_FLOAT)
        gb_table_real(t, col, c->d, 1);
    else if (c->type == SQLITE_TEXT)
        gb_table_text(t, col, c->s);
}

/* The index of interconnect name among s->ic, added when new; -1 when
 * there are MAX_IC already or on out-of-memory. */
static int ic_index(scaling_t *s, const char *name) {
    for (int i = 0; i < s->nic; i++)
        if (strcmp(s->ic[i], name) == 0) return i;
    if (s->nic == MAX_IC || !(s->ic[s->nic] = strdup(name))) return -1;
    return s->nic++;
}

/* The known interconnects first, in known_ic's order; then the others as
 * met. Rows' per-interconnect figures are permuted to match. */
static void order_ics(scaling_t *s) {
    int perm[MAX_IC], n = 0, used[MAX_IC] = {0};
    for (int k = 0; k < N_KNOWN_IC; k++)
        for (int i = 0; i < s->nic; i++)
            if (!used[i] && strcmp(s->ic[i], known_ic[k]) == 0) perm[n++] = i, used[i] = 1;
    for (int i = 0; i < s->nic; i++)
        if (!used[i]) perm[n++] = i;
    char *ic[MAX_IC];
    for (int i = 0; i < s->nic; i++)
        ic[i] = s->ic[perm[i]];
    memcpy(s->ic, ic, sizeof ic);
    for (int r = 0; r < s->n; r++) {
        srow_t *row = &s->rows[r], old = *row;
        for (int i = 0; i < s->nic; i++) {
            row->has[i] = old.has[perm[i]];
            row->img_s[i] = old.img_s[perm[i]];
            row->runs[i] = old.runs[perm[i]];
        }
    }
}

static void free_all(scaling_t *s) {
    for (int r = 0; r < s->n; r++)
        for (int k = 0; k < NK; k++)
            cell_free(&s->rows[r].key[k]);
    free(s->rows);
    for (int i = 0; i < s->nic; i++)
        free(s->ic[i]);
    memset(s, 0, sizeof *s);
}

/* --gpus LIST: GPU counts above 1, comma-separated, none twice; 2 (said)
 * otherwise. */
static int parse_gpus(scaling_t *s, const char *list) {
    const char *p = list;
    for (;;) {
        char *end, msg[160];
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 2 || v > 65536 ||
            s->ngpus == (int)(sizeof s->gpus / sizeof s->gpus[0])) {
            gb_fmt(msg, sizeof msg,
                   "--gpus: '%.40s' is not a list of GPU counts from 2 to 65536 (16 at most; one "
                   "GPU is base_img_s)",
                   list);
            return cli_usage_error("scaling", msg);
        }
        for (int i = 0; i < s->ngpus; i++)
            if (s->gpus[i] == v) {
                gb_fmt(msg, sizeof msg, "--gpus: %ld given twice", v);
                return cli_usage_error("scaling", msg);
            }
        s->gpus[s->ngpus++] = v;
        if (!*end) return 0;
        p = end + 1;
    }
}

static int gpus_wanted(const scaling_t *s, sqlite3_int64 n) {
    for (int i = 0; i < s->ngpus; i++)
        if (s->gpus[i] == n) return 1;
    return !s->ngpus;
}

static int prec_wanted(const scaling_t *s, const char *prec) {
    if (!s->nprec) return 1;
    for (int i = 0; i < s->nprec; i++)
        if (prec && strcmp(prec, known_prec[s->prec_sel[i]]) == 0) return 1;
    return 0;
}

/* Fill s from v_scaling under the filters (NULL/0: any); the rows come
 * sorted by their key. 1 (said) on an error. */
static int load(scaling_t *s, sqlite3 *db, const char *path, const char *node, long batch,
                const char *backend) {
    char part[512] = "", sql[2048];
    for (int k = 0; k < NK; k++) {
        size_t at = strlen(part);
        gb_fmt(part + at, sizeof part - at, "%s%s", k ? ", " : "", keys[k].col);
    }
    gb_fmt(sql, sizeof sql,
           "WITH r AS (SELECT %s, interconnect, images_per_sec AS x,"
           " baseline_images_per_sec AS base, baseline_scope AS scope FROM v_scaling"
           " WHERE n_gpus > 1"
           " AND images_per_sec IS NOT NULL AND (?1 IS NULL OR shell_match(?1, node))"
           " AND (?2 IS NULL OR batch_per_gpu = ?2) AND (?3 IS NULL OR backend = ?3)),"
           " k AS (SELECT *, row_number() OVER (g ORDER BY x) AS i, count(*) OVER g AS cnt"
           " FROM r WINDOW g AS (PARTITION BY %s, interconnect))"
           " SELECT %s, interconnect, count(*), avg(CASE WHEN i IN ((cnt + 1) / 2,"
           " (cnt + 2) / 2) THEN x END), max(base), max(scope) FROM k GROUP BY %s, interconnect"
           " ORDER BY %s, interconnect",
           part, part, part, part, part);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        cli_store_not_ours("scaling", db, path);
        return 1;
    }
    if (node) sqlite3_bind_text(st, 1, node, -1, SQLITE_STATIC);
    if (batch) sqlite3_bind_int64(st, 2, batch);
    if (backend) sqlite3_bind_text(st, 3, backend, -1, SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (!prec_wanted(s, (const char *)sqlite3_column_text(st, K_PREC)) ||
            !gpus_wanted(s, sqlite3_column_int64(st, K_GPUS)))
            continue;
        cell_t key[NK];
        int oom = 0;
        for (int k = 0; k < NK; k++)
            oom |= cell_get(&key[k], st, k) != 0;
        /* the same key as the last row (the rows come sorted), else a new row */
        srow_t *row = s->n ? &s->rows[s->n - 1] : NULL;
        for (int k = 0; row && k < NK; k++)
            if (!cell_eq(&row->key[k], &key[k])) row = NULL;
        if (!row && !oom && s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            srow_t *rows = realloc(s->rows, (size_t)cap * sizeof *rows);
            if (rows) s->rows = rows, s->cap = cap;
            oom = !rows;
        }
        if (row || oom) {
            for (int k = 0; k < NK; k++)
                cell_free(&key[k]);
        } else {
            row = &s->rows[s->n++];
            memset(row, 0, sizeof *row);
            memcpy(row->key, key, sizeof key);
        }
        const char *ic = (const char *)sqlite3_column_text(st, NK);
        int i = oom ? -1 : ic_index(s, ic ? ic : "-");
        if (i < 0) {
            fprintf(stderr, "gpubench scaling: %s\n",
                    oom ? "out of memory"
                        : "more than 8 interconnects: give --node or --precision");
            sqlite3_finalize(st);
            return 1;
        }
        row->has[i] = 1;
        row->runs[i] = sqlite3_column_int64(st, NK + 1);
        row->img_s[i] = sqlite3_column_double(st, NK + 2);
        if (sqlite3_column_type(st, NK + 3) != SQLITE_NULL)
            row->base = sqlite3_column_double(st, NK + 3);
        const char *scope = (const char *)sqlite3_column_text(st, NK + 4);
        if (scope && strcmp(scope, "gpu_model") == 0) row->base_model = 1;
    }
    if (step != SQLITE_DONE) {
        fprintf(stderr, "gpubench scaling: %s\n", sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return 1;
    }
    sqlite3_finalize(st);
    order_ics(s);
    return 0;
}

/* "batch 64 per GPU" and the like: an optional key all rows share. */
static void say_shared(FILE *out, int k, const cell_t *c, int *said) {
    static const char *const what[NK] = {[K_BACKEND] = "backend %s",
                                         [K_BATCH] = "batch %s per GPU",
                                         [K_IMAGE] = "%s px images",
                                         [K_NODES] = "%s node(s)",
                                         [K_BUCKET] = "%s MB all-reduce buckets",
                                         [K_LAUNCH] = "replicas as %s"};
    char v[64];
    if (c->type == SQLITE_NULL) return;
    if (c->type == SQLITE_INTEGER) gb_fmt(v, sizeof v, "%lld", (long long)c->i);
    if (c->type == SQLITE_FLOAT) gb_fmt(v, sizeof v, "%g", c->d);
    if (c->type == SQLITE_TEXT) gb_fmt(v, sizeof v, "%s", c->s);
    fprintf(out, "%s", (*said)++ ? ", " : "every row: ");
    char line[160];
    gb_fmt(line, sizeof line, what[k], v);
    gb_put_line(out, line); /* a record's launch text, as stored */
}

static int print_scaling(const scaling_t *s, gb_format_t fmt) {
    int people = gb_format_for_people(fmt), show[NK];
    for (int k = 0; k < NK; k++) {
        show[k] = !keys[k].opt || !people;
        for (int r = 1; r < s->n && !show[k]; r++)
            show[k] = !cell_eq(&s->rows[0].key[k], &s->rows[r].key[k]);
    }
    int nv = -1, pc = -1;
    for (int i = 0; i < s->nic; i++) {
        if (strcmp(s->ic[i], "nvlink") == 0) nv = i;
        if (strcmp(s->ic[i], "pcie") == 0) pc = i;
    }
    char names[NK + 3 + 4 * MAX_IC][48];
    const char *np[NK + 3 + 4 * MAX_IC];
    int nc = 0, col[NK], c_base, c_base_of = -1, c_ic, c_gain = -1, any_model = 0;
    for (int r = 0; r < s->n; r++)
        any_model |= s->rows[r].base > 0 && s->rows[r].base_model;
    for (int k = 0; k < NK; k++) {
        col[k] = -1;
        if (show[k]) gb_fmt(names[col[k] = nc++], sizeof names[0], "%s", keys[k].name);
    }
    gb_fmt(names[c_base = nc++], sizeof names[0], "base_img_s");
    /* whose median it is, where some row's is not its node's own */
    if (any_model) gb_fmt(names[c_base_of = nc++], sizeof names[0], "base_of");
    c_ic = nc;
    for (int i = 0; i < s->nic; i++) {
        gb_fmt(names[nc++], sizeof names[0], "%s_img_s", s->ic[i]);
        gb_fmt(names[nc++], sizeof names[0], "%s_runs", s->ic[i]);
        gb_fmt(names[nc++], sizeof names[0], "%s_speedup", s->ic[i]);
        gb_fmt(names[nc++], sizeof names[0], "%s_eff", s->ic[i]);
    }
    if (nv >= 0 && pc >= 0) gb_fmt(names[c_gain = nc++], sizeof names[0], "nvlink_gain");
    for (int i = 0; i < nc; i++)
        np[i] = names[i];
    gb_table_t *t = gb_table_new(nc, np);
    if (!t) return 1;
    for (int r = 0; r < s->n; r++) {
        const srow_t *row = &s->rows[r];
        if (gb_table_row(t) != 0) {
            gb_table_destroy(&t);
            return 1;
        }
        for (int k = 0; k < NK; k++)
            if (col[k] >= 0) cell_put(t, col[k], &row->key[k]);
        if (row->base > 0) gb_table_real(t, c_base, row->base, GB_DECIMALS_RATE);
        if (c_base_of >= 0 && row->base > 0)
            gb_table_text(t, c_base_of, row->base_model ? "gpu_model" : "node");
        double gpus = row->key[K_GPUS].type == SQLITE_INTEGER ? (double)row->key[K_GPUS].i : 0;
        for (int i = 0; i < s->nic; i++) {
            int c = c_ic + 4 * i;
            if (!row->has[i]) continue;
            gb_table_real(t, c, row->img_s[i], GB_DECIMALS_RATE);
            gb_table_int(t, c + 1, row->runs[i]);
            if (row->base > 0) gb_table_real(t, c + 2, row->img_s[i] / row->base, 2);
            if (row->base > 0 && gpus > 0)
                gb_table_real(t, c + 3, row->img_s[i] / (gpus * row->base), 3);
        }
        if (c_gain >= 0 && row->has[nv] && row->has[pc] && row->img_s[pc] > 0)
            gb_table_real(t, c_gain, row->img_s[nv] / row->img_s[pc], 3);
    }
    gb_table_print(t, stdout, fmt);
    gb_table_destroy(&t);
    if (!people) return 0;
    int said = 0, cpu = 0;
    printf("\n");
    for (int k = 0; k < NK; k++)
        if (!show[k] && s->n) say_shared(stdout, k, &s->rows[0].key[k], &said);
    if (said) printf("\n");
    printf("speedup and eff are over base_img_s, the one-GPU median of the same node and "
           "configuration%s (v_scaling's baseline; none measured: '-')%s\n",
           any_model ? ", or where base_of says gpu_model (a multi-node row whose rank-0 node has "
                       "none) the GPU model's over every node"
                     : "",
           c_gain >= 0 ? "; nvlink_gain is nvlink_img_s over pcie_img_s" : "");
    for (int r = 0; r < s->n; r++)
        cpu |= s->rows[r].key[K_BACKEND].type == SQLITE_TEXT &&
               strcmp(s->rows[r].key[K_BACKEND].s, "cpu") == 0;
    if (cpu)
        printf("CPU replicas split one node's cores: their efficiency tests the data-parallel "
               "logic, it says nothing about scaling\n");
    return 0;
}

int cmd_scaling(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"node", required_argument, 0, 'n'},
                                         {"precision", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"gpus", required_argument, 0, 'g'},
                                         {"backend", required_argument, 0, 'k'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db_path = GB_DEFAULT_DB, *node = NULL, *backend = NULL;
    gb_format_t fmt = GB_FMT_TABLE;
    long batch = 0;
    scaling_t s = {0};
    int opt;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("scaling", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "scaling", opts, opt)) return 2;
        switch (opt) {
        case 'd':
            db_path = optarg;
            break;
        case 'n':
            if (!optarg[0]) return cli_usage_error("scaling", "--node needs a name or a pattern");
            node = optarg;
            break;
        case 'p':
            if (cli_name_list("scaling", "--precision", "precision", optarg, known_prec, N_PREC,
                              s.prec_sel, &s.nprec))
                return 2;
            break;
        case 'g':
            if (parse_gpus(&s, optarg)) return 2;
            break;
        case 'b':
            if (cli_long("scaling", "--batch", optarg, 1, 65536, &batch)) return 2;
            break;
        case 'k':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return cli_usage_error("scaling", "--backend is cpu or cuda");
            backend = optarg;
            break;
        case 'f':
            if (cli_format("scaling", optarg, &fmt)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("scaling");
        }
    }
    if (optind < argc) return cli_unexpected_arg("scaling", argv[optind], NULL);
    if (!db_path[0]) return cli_usage_error("scaling", "--db needs a file name");

    sqlite3 *db = cli_store_open("scaling", db_path);
    if (!db) return 1;
    int rc = load(&s, db, db_path, node, batch, backend);
    if (rc == 0 && s.n == 0) {
        /* nothing to show: said plainly, exit 0 (csv: the header; json: []) */
        long long in_view = cli_count(db, "SELECT count(*) FROM v_scaling WHERE n_gpus > 1");
        FILE *say = gb_format_for_people(fmt) ? stdout : stderr;
        const char *pre = say == stderr ? "gpubench scaling: " : "";
        if (in_view > 0)
            fprintf(say,
                    "%sno data-parallel ResNet-50 results in %s match the --node, --precision, "
                    "--batch, --gpus or --backend given (v_scaling has %lld row(s) of more than "
                    "one GPU)\n",
                    pre, db_path, in_view);
        else
            fprintf(say,
                    "%sno data-parallel ResNet-50 results in %s yet (v_scaling has no done, valid "
                    "run of more than one GPU: submit one with --gpus 2,4,8)\n",
                    pre, db_path);
        if (!gb_format_for_people(fmt)) rc = print_scaling(&s, fmt);
    } else if (rc == 0) {
        rc = print_scaling(&s, fmt);
    }
    free_all(&s);
    sqlite3_close(db);
    return rc;
}
