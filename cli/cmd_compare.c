/* cmd_compare.c - `gpubench compare`: GPU models (or CPU models) side by
 * side from the store's v_models view, as GPU buying guides show them: one
 * row per model, per precision its median images/s over one-GPU ResNet-50
 * runs, the runs behind it, and that figure over the baseline model's in
 * the same precision and configuration. With --kind gemm the same from
 * v_gemm_models: each model's median GFLOP/s over one-device gemm runs,
 * the matrix rate beside its ResNet-50 figure. With --by node, a fleet's
 * nodes instead: each node's median on its model beside that model's median
 * over every node (the view's), so that a slow node shows.
 *
 * A configuration is (batch per GPU, image size), or a gemm's shape (m, n,
 * k): figures of different configurations are never put in one cell nor
 * divided by each other; each configuration is its own group of rows, with
 * its own baseline. Every configuration found is shown (--batch,
 * --image-size, --shape pick one). A model is one row per backend (a CPU
 * run names the CPU model). The median is the view's (window functions in
 * SQL); the ratios are computed here. Read-only on the SQLite file, as
 * `gpubench results`. */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "commands.h"
#include "gb_util.h"
#include "output.h"

#include <ctype.h>
#include <getopt.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The precisions a spec takes, in the order compare shows them by default:
 * half precision first, as the guides lead with mixed-precision figures. */
static const char *const known_prec[] = {"fp16", "bf16", "tf32", "fp32"};
enum { N_PREC = sizeof known_prec / sizeof known_prec[0] };

/* What is compared: a job kind, the view with its medians, the columns
 * that make a configuration, and the figure. */
typedef struct cmp_kind {
    const char *name;    /* --kind */
    const char *view;    /* the view read */
    const char *figure;  /* its median column */
    const char *run_fig; /* the figure of one run, in v_results */
    const char *unit;    /* the figure's columns: fp16_img_s */
    const char *results; /* in "no ... results in FILE" */
    const char *counts;  /* what the view counts, said when it is empty */
    const char *filters; /* the options that filter it */
    int ncfg;            /* configuration columns (3 at most) */
    const char *cfg[3];
} cmp_kind_t;

enum { KIND_RESNET50, KIND_GEMM };
static const cmp_kind_t kinds[] = {
    [KIND_RESNET50] = {"resnet50",
                       "v_models",
                       "median_images_per_sec",
                       "images_per_sec",
                       "img_s",
                       "one-GPU ResNet-50 results",
                       "done, valid runs on one GPU of one node",
                       "--backend, --batch, --image-size or --precision",
                       2,
                       {"batch_per_gpu", "image_size"}},
    [KIND_GEMM] = {"gemm",
                   "v_gemm_models",
                   "median_gflops",
                   "gflops",
                   "gflops",
                   "gemm results",
                   "done, valid runs on one device of one node",
                   "--backend, --shape or --precision",
                   3,
                   {"m", "n", "k"}},
};

typedef struct cmp_row {
    char *model, *backend; /* NULL: the view's NULL */
    char *node;            /* --by node: the node; else NULL */
    int64_t cfg[3];        /* the configuration: batch_per_gpu, image_size; m, n, k */
    int has_cfg[3];        /* 0: the view's NULL */
    int has[N_PREC];       /* indexed as the shown precisions (sel[]) */
    double fig[N_PREC];    /* the median: images/s, GFLOP/s */
    int64_t runs[N_PREC];
    double model_fig[N_PREC]; /* --by node: the model's median over every node */
    int base;                 /* index of its group's baseline row, -1 none */
} cmp_row_t;

typedef struct cmp {
    const cmp_kind_t *kind;
    cmp_row_t *rows;
    int n, cap;
    int sel[N_PREC], nsel;  /* shown precisions: indexes into known_prec */
    int by_node;            /* --by node */
    double below;           /* --below; 0: not given */
    long long unknown_prec; /* rows of a precision this gpubench does not know (last pass) */
} cmp_t;

static void usage(FILE *out) {
    fprintf(out, "usage: gpubench compare [--db FILE] [--kind resnet50|gemm] [--baseline MODEL]\n"
                 "                        [--by model|node] [--below R] [--precision LIST]\n"
                 "                        [--batch N] [--image-size N] [--shape MxNxK]\n"
                 "                        [--backend cpu|cuda] [--format F]\n"
                 "  GPU models (CPU models for CPU runs) side by side, from the v_models view:\n"
                 "  one row per model, and per precision the median images/s of its one-GPU,\n"
                 "  one-node ResNet-50 runs (done, valid), how many runs, and that median over\n"
                 "  the baseline model's in the same precision and configuration (rel).\n"
                 "  Each configuration (batch per GPU, image size) is its own group with its\n"
                 "  own baseline: figures of different batches or image sizes are never mixed.\n"
                 "  With --kind gemm, the same for the matrix rate: median GFLOP/s of one-device\n"
                 "  gemm runs, from v_gemm_models, each shape (m, n, k) its own group.\n"
                 "  Rows are sorted by the first precision's figure, fastest first.\n"
                 "  With --by node, a fleet's nodes: one row per node and model, per precision\n"
                 "  the node's median, its runs, and that median over the model's median on\n"
                 "  every node (rel; the view's figure), slowest first: a slow node shows.\n"
                 "  It reads the SQLite file directly, as results does\n"
                 "  --db FILE         the store (default " GB_DEFAULT_DB ")\n"
                 "  --kind K          resnet50 (images/s; the default) or gemm (GFLOP/s)\n"
                 "  --baseline MODEL  the model every figure is divided by: its exact gpu_model,\n"
                 "                    or a part of it that names one model (any case: \"a100\");\n"
                 "                    default the slowest model of each configuration in the\n"
                 "                    first precision (every rel there is then 1 or more)\n"
                 "  --by WHAT         model (the default) or node\n"
                 "  --below R         --by node: only the nodes whose rel is under R in a\n"
                 "                    shown precision (0.95: 5%% or more below their model)\n"
                 "  --precision LIST  fp16, bf16, tf32, fp32, comma-separated, in the order shown\n"
                 "                    (default every one found, in that order)\n"
                 "  --batch N         one batch per GPU (default every one, each its own group)\n"
                 "  --image-size N    one image size (default every one, each its own group)\n"
                 "  --shape MxNxK     one gemm shape, C(MxN) = A(MxK).B(KxN); N alone is NxNxN\n"
                 "                    (--kind gemm; default every one, each its own group)\n"
                 "  --backend B       cpu or cuda (default both)\n"
                 "  --format F        table | csv | json | md (a Markdown table; default table;\n"
                 "                    a missing figure is '-', empty, null, '-')\n"
                 "  -h, --help        this help\n");
}

static int same_text(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* needle in hay, any case (ASCII). */
static int contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *h = hay; strlen(h) >= n; h++) {
        size_t i = 0;
        while (i < n && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return 1;
    }
    return 0;
}

static char *dup_col(sqlite3_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

/* Same configuration: a NULL batch, image size or m, n, k is a
 * configuration too (before every value, as SQLite sorts). */
static int cmp_config(const cmp_row_t *a, const cmp_row_t *b) {
    for (int i = 0; i < 3; i++) {
        if (a->has_cfg[i] != b->has_cfg[i]) return a->has_cfg[i] ? 1 : -1;
        if (a->cfg[i] != b->cfg[i]) return a->cfg[i] < b->cfg[i] ? -1 : 1;
    }
    return 0;
}

static void free_row(cmp_row_t *r) {
    free(r->model);
    free(r->backend);
    free(r->node);
}

/* The row of this model, backend and configuration (and node), made when
 * new; NULL on out-of-memory. The query's ORDER BY puts a key's rows (its
 * precisions) together, so a row already made is the last one: a fleet of
 * thousands of nodes is not searched once per row. */
static cmp_row_t *row_for(cmp_t *c, sqlite3_stmt *st) {
    cmp_row_t key = {0};
    for (int i = 0; i < 3; i++) {
        key.has_cfg[i] = sqlite3_column_type(st, 3 + i) != SQLITE_NULL;
        key.cfg[i] = key.has_cfg[i] ? sqlite3_column_int64(st, 3 + i) : 0;
    }
    const char *model = (const char *)sqlite3_column_text(st, 0);
    const char *backend = (const char *)sqlite3_column_text(st, 1);
    const char *node = c->by_node ? (const char *)sqlite3_column_text(st, 8) : NULL;
    if (c->n) {
        cmp_row_t *r = &c->rows[c->n - 1];
        if (cmp_config(r, &key) == 0 && same_text(r->model, model) &&
            same_text(r->backend, backend) && same_text(r->node, node))
            return r;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        cmp_row_t *rows = realloc(c->rows, (size_t)cap * sizeof *rows);
        if (!rows) return NULL;
        c->rows = rows;
        c->cap = cap;
    }
    cmp_row_t *r = &c->rows[c->n];
    memset(r, 0, sizeof *r);
    r->model = dup_col(st, 0);
    r->backend = dup_col(st, 1);
    r->node = node ? strdup(node) : NULL;
    if ((model && !r->model) || (backend && !r->backend) || (node && !r->node)) {
        free_row(r);
        return NULL;
    }
    memcpy(r->cfg, key.cfg, sizeof r->cfg);
    memcpy(r->has_cfg, key.has_cfg, sizeof r->has_cfg);
    r->base = -1;
    c->n++;
    return r;
}

/* for qsort's comparator, which takes no context: c->nsel, c->by_node */
static int g_nsel, g_by_node;

/* --by node: the node's figure over its model's in shown precision p; 0
 * when there is none (no run, or a model median of 0). */
static int node_rel(const cmp_row_t *r, int p, double *rel) {
    if (!r->has[p] || !(r->model_fig[p] > 0)) return 0;
    *rel = r->fig[p] / r->model_fig[p];
    return 1;
}

/* By configuration; with --by node, each precision's rel in turn, slowest
 * first; then each precision's figure in turn, fastest first (a missing
 * rel or figure after every present one); then model, backend and node. */
static int cmp_rows(const void *pa, const void *pb) {
    const cmp_row_t *a = pa, *b = pb;
    int k = cmp_config(a, b);
    if (k) return k;
    for (int p = 0; g_by_node && p < g_nsel; p++) { /* rel, slowest first */
        double ra, rb;
        int ha = node_rel(a, p, &ra), hb = node_rel(b, p, &rb);
        if (ha != hb) return ha ? -1 : 1;
        if (ha && ra != rb) return ra < rb ? -1 : 1;
    }
    for (int p = 0; p < g_nsel; p++) {
        if (a->has[p] != b->has[p]) return a->has[p] ? -1 : 1;
        if (a->has[p] && a->fig[p] != b->fig[p]) return a->fig[p] > b->fig[p] ? -1 : 1;
    }
    k = strcmp(a->model ? a->model : "", b->model ? b->model : "");
    if (!k) k = strcmp(a->backend ? a->backend : "", b->backend ? b->backend : "");
    return k ? k : strcmp(a->node ? a->node : "", b->node ? b->node : "");
}

/* --baseline: the one model name it means among the rows (exact, else a
 * part of one name in any case). NULL (said, *rc set) when none or
 * several. */
static const char *find_baseline(const cmp_t *c, const char *want, const char *db, int *rc) {
    for (int i = 0; i < c->n; i++)
        if (c->rows[i].model && strcmp(c->rows[i].model, want) == 0) return c->rows[i].model;
    const char *match[8];
    int nmatch = 0;
    for (int i = 0; i < c->n; i++) {
        const char *m = c->rows[i].model;
        if (!m || !contains_nocase(m, want)) continue;
        int seen = 0;
        for (int j = 0; j < i; j++)
            if (same_text(c->rows[j].model, m)) seen = 1;
        if (seen) continue;
        if (nmatch < 8) match[nmatch] = m;
        nmatch++;
    }
    if (nmatch == 1) return match[0];
    *rc = 1;
    if (nmatch == 0) {
        fprintf(stderr,
                "gpubench compare: --baseline '%s' names no model compared here (models:", want);
        int k = 0;
        for (int i = 0; i < c->n; i++) {
            const char *m = c->rows[i].model;
            int seen = 0;
            for (int j = 0; j < i; j++)
                if (same_text(c->rows[j].model, m)) seen = 1;
            if (!m || seen) continue;
            if (k++ == 10) {
                fprintf(stderr, " ...");
                break;
            }
            fprintf(stderr, "%s '", k > 1 ? "," : "");
            gb_put_line(stderr, m); /* a stored name: its control bytes as '?' */
            fputc('\'', stderr);
        }
        fprintf(stderr, ") in %s\n", db);
        return NULL;
    }
    fprintf(stderr, "gpubench compare: --baseline '%s' is ambiguous: it matches %d models:", want,
            nmatch);
    for (int i = 0; i < nmatch && i < 8; i++) {
        fprintf(stderr, "%s '", i ? "," : "");
        gb_put_line(stderr, match[i]);
        fputc('\'', stderr);
    }
    fprintf(stderr, "%s (give more of the name, or all of it)\n", nmatch > 8 ? ", ..." : "");
    return NULL;
}

/* Each group's baseline row (rows sorted): the named model's row, or the
 * slowest in the first precision with a figure in that group. -1 (said)
 * when the named model is in a group on two backends. */
static int pick_baselines(cmp_t *c, const char *model) {
    for (int g = 0; g < c->n;) {
        int end = g;
        while (end < c->n && cmp_config(&c->rows[g], &c->rows[end]) == 0)
            end++;
        int base = -1;
        if (model) {
            for (int i = g; i < end; i++)
                if (same_text(c->rows[i].model, model)) {
                    if (base >= 0) {
                        fprintf(stderr,
                                "gpubench compare: --baseline '%s' was run on %s and on %s in one "
                                "configuration: add --backend\n",
                                model, c->rows[base].backend ? c->rows[base].backend : "?",
                                c->rows[i].backend ? c->rows[i].backend : "?");
                        return -1;
                    }
                    base = i;
                }
        } else {
            for (int p = 0; p < c->nsel && base < 0; p++)
                for (int i = g; i < end; i++)
                    if (c->rows[i].has[p] && (base < 0 || c->rows[i].fig[p] < c->rows[base].fig[p]))
                        base = i;
        }
        for (int i = g; i < end; i++)
            c->rows[i].base = base;
        g = end;
    }
    return 0;
}

/* "batch 64, image size 224"; a gemm's "shape 2048x2048x2048" (m x n x k);
 * '-' for a NULL. */
static void print_config(FILE *out, const cmp_kind_t *kind, const cmp_row_t *r) {
    static const char *const label[2] = {"batch ", ", image size "};
    for (int i = 0; i < kind->ncfg; i++) {
        if (kind == &kinds[KIND_GEMM])
            fprintf(out, "%s", i ? "x" : "shape ");
        else
            fprintf(out, "%s", label[i]);
        if (r->has_cfg[i])
            fprintf(out, "%lld", (long long)r->cfg[i]);
        else
            fprintf(out, "-");
    }
}

/* The table (or csv, json) of c's rows, sorted and with their baselines. */
static int print_compare(const cmp_t *c, gb_format_t fmt) {
    /* the table names backend and configuration columns (batch, image size;
     * m, n, k) only where they differ */
    const cmp_kind_t *kind = c->kind;
    int show_backend = !gb_format_for_people(fmt), show_cfg[3];
    for (int j = 0; j < 3; j++)
        show_cfg[j] = show_backend && j < kind->ncfg;
    for (int i = 1; i < c->n; i++) {
        const cmp_row_t *a = &c->rows[0], *b = &c->rows[i];
        if (!same_text(a->backend, b->backend)) show_backend = 1;
        for (int j = 0; j < kind->ncfg; j++)
            if (a->has_cfg[j] != b->has_cfg[j] || a->cfg[j] != b->cfg[j]) show_cfg[j] = 1;
    }
    /* per precision: figure, runs, rel, and --by node's model median (csv, json) */
    int per = c->by_node && !gb_format_for_people(fmt) ? 4 : 3;
    char names[6 + 4 * N_PREC][32];
    const char *np[6 + 4 * N_PREC];
    int nc = 0, c_backend = -1, c_cfg[3] = {-1, -1, -1}, c_prec = 0, c_base = -1, c_model = 0;
    if (c->by_node) gb_fmt(names[nc++], 32, "node");
    c_model = nc;
    gb_fmt(names[nc++], 32, "gpu_model");
    if (show_backend) gb_fmt(names[c_backend = nc++], 32, "backend");
    for (int j = 0; j < kind->ncfg; j++)
        if (show_cfg[j]) gb_fmt(names[c_cfg[j] = nc++], 32, "%s", kind->cfg[j]);
    c_prec = nc;
    for (int p = 0; p < c->nsel; p++) {
        gb_fmt(names[nc++], 32, "%s_%s", known_prec[c->sel[p]], kind->unit);
        gb_fmt(names[nc++], 32, "%s_runs", known_prec[c->sel[p]]);
        gb_fmt(names[nc++], 32, "%s_rel", known_prec[c->sel[p]]);
        if (per == 4) gb_fmt(names[nc++], 32, "%s_model_%s", known_prec[c->sel[p]], kind->unit);
    }
    if (!gb_format_for_people(fmt) && !c->by_node) gb_fmt(names[c_base = nc++], 32, "baseline");
    for (int i = 0; i < nc; i++)
        np[i] = names[i];
    gb_table_t *t = gb_table_new(nc, np);
    if (!t) return 1;
    for (int i = 0; i < c->n; i++) {
        const cmp_row_t *r = &c->rows[i];
        const cmp_row_t *b = r->base >= 0 ? &c->rows[r->base] : NULL;
        if (gb_table_row(t) != 0) {
            gb_table_destroy(&t);
            return 1;
        }
        if (c->by_node) gb_table_text(t, 0, r->node);
        gb_table_text(t, c_model, r->model);
        if (c_backend >= 0) gb_table_text(t, c_backend, r->backend);
        for (int j = 0; j < kind->ncfg; j++)
            if (c_cfg[j] >= 0 && r->has_cfg[j]) gb_table_int(t, c_cfg[j], r->cfg[j]);
        for (int p = 0; p < c->nsel; p++) {
            int col = c_prec + per * p;
            double rel;
            if (!r->has[p]) continue; /* NULL: '-', empty, null */
            gb_table_real(t, col, r->fig[p], GB_DECIMALS_RATE);
            gb_table_int(t, col + 1, r->runs[p]);
            if (c->by_node && node_rel(r, p, &rel)) gb_table_real(t, col + 2, rel, 3);
            if (!c->by_node && b && b->has[p] && b->fig[p] > 0)
                gb_table_real(t, col + 2, r->fig[p] / b->fig[p], 2);
            if (per == 4) gb_table_real(t, col + 3, r->model_fig[p], GB_DECIMALS_RATE);
        }
        if (c_base >= 0) gb_table_text(t, c_base, b ? b->model : NULL);
    }
    gb_table_print(t, stdout, fmt);
    gb_table_destroy(&t);
    if (!gb_format_for_people(fmt)) return 0;
    if (c->by_node) {
        printf("\nrel is each node's median over its model's median on every node (%s), in the "
               "same precision and configuration (a model run on one node is its own median)\n",
               kind->view);
        if (c->below) printf("only the nodes under %g of it in a precision shown\n", c->below);
        return 0;
    }
    /* under the table: what rel is over, per configuration */
    int groups = 0;
    for (int i = 0; i < c->n; i++)
        groups += i == 0 || cmp_config(&c->rows[i - 1], &c->rows[i]) != 0;
    printf("\n");
    for (int i = 0; i < c->n; i++) {
        const cmp_row_t *r = &c->rows[i];
        if (i > 0 && cmp_config(&c->rows[i - 1], r) == 0) continue;
        if (groups > 1) {
            print_config(stdout, kind, r);
            printf(": ");
        }
        if (r->base >= 0) {
            printf("rel is over ");
            gb_put_line(stdout, c->rows[r->base].model ? c->rows[r->base].model : "(no model)");
            printf("%s", show_backend ? " on " : "");
            gb_put_line(stdout, show_backend ? c->rows[r->base].backend : NULL);
            printf(" in the same precision\n");
        } else
            printf("no rel: the baseline model was not run in this configuration\n");
    }
    return 0;
}

static void free_rows(cmp_t *c) {
    for (int i = 0; i < c->n; i++)
        free_row(&c->rows[i]);
    free(c->rows);
    c->rows = NULL;
    c->n = c->cap = 0;
}

/* Fill c from its kind's view under the filters (NULL/0: any; cfg[i]
 * the kind's i-th configuration column), one row per model, backend and
 * configuration; without --precision (given_prec 0) the shown precisions
 * are those found, in known_prec's order. 1 (said) on an error. */
static int load(cmp_t *c, sqlite3 *db, const char *path, const char *backend, const long cfg[3],
                int given_prec) {
    const cmp_kind_t *kind = c->kind;
    const char *col[3];
    char mcol[3][32]; /* the view's, in --by node's join: m.batch_per_gpu */
    for (int i = 0; i < 3; i++) {
        col[i] = i < kind->ncfg ? kind->cfg[i] : "NULL";
        gb_fmt(mcol[i], sizeof mcol[i], "%s%s", i < kind->ncfg ? "m." : "", col[i]);
    }
    char sql[2048];
    if (!c->by_node)
        gb_fmt(sql, sizeof sql,
               "SELECT gpu_model, backend, precision, %s, %s, %s, runs, %s FROM %s"
               " WHERE (?1 IS NULL OR backend = ?1) AND (?2 IS NULL OR %s = ?2)"
               " AND (?3 IS NULL OR %s = ?3) AND (?4 IS NULL OR %s = ?4) AND %s IS NOT NULL"
               " ORDER BY gpu_model, backend, %s, %s, %s",
               col[0], col[1], col[2], kind->figure, kind->view, col[0], col[1], col[2],
               kind->figure, col[0], col[1], col[2]);
    else /* the view's runs per node, their median as the view takes it; the
          * model's median beside (the same runs, so every node row has one) */
        gb_fmt(sql, sizeof sql,
               "WITH runs AS (SELECT node, gpu_model, backend, precision, %s AS c0, %s AS c1,"
               " %s AS c2, %s AS x FROM v_results WHERE kind = '%s' AND status = 'done'"
               " AND valid = 1 AND %s IS NOT NULL AND n_gpus = 1 AND n_nodes = 1),"
               " ranked AS (SELECT *, row_number() OVER (g ORDER BY x) AS i, count(*) OVER g"
               " AS cnt FROM runs WINDOW g AS (PARTITION BY node, gpu_model, backend,"
               " precision, c0, c1, c2)),"
               " per_node AS (SELECT node, gpu_model, backend, precision, c0, c1, c2,"
               " count(*) AS runs, avg(CASE WHEN i IN ((cnt + 1) / 2, (cnt + 2) / 2) THEN x END)"
               " AS fig FROM ranked GROUP BY node, gpu_model, backend, precision, c0, c1, c2)"
               " SELECT p.gpu_model, p.backend, p.precision, p.c0, p.c1, p.c2, p.runs, p.fig,"
               " p.node, m.%s FROM per_node p JOIN %s m ON m.gpu_model IS p.gpu_model"
               " AND m.backend IS p.backend AND m.precision IS p.precision AND %s IS p.c0"
               " AND %s IS p.c1 AND %s IS p.c2"
               " WHERE (?1 IS NULL OR p.backend = ?1) AND (?2 IS NULL OR p.c0 = ?2)"
               " AND (?3 IS NULL OR p.c1 = ?3) AND (?4 IS NULL OR p.c2 = ?4)"
               " AND p.fig IS NOT NULL AND m.%s IS NOT NULL"
               " ORDER BY p.gpu_model, p.backend, p.c0, p.c1, p.c2, p.node",
               col[0], col[1], col[2], kind->run_fig, kind->name, kind->run_fig, kind->figure,
               kind->view, mcol[0], mcol[1], mcol[2], kind->figure);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        cli_store_not_ours("compare", db, path);
        return 1;
    }
    if (backend) sqlite3_bind_text(st, 1, backend, -1, SQLITE_STATIC);
    for (int i = 0; i < 3; i++)
        if (cfg[i]) sqlite3_bind_int64(st, 2 + i, cfg[i]);
    int step, found[N_PREC] = {0};
    /* two passes: without --precision, the shown ones are those found */
    for (int pass = given_prec ? 1 : 0; pass < 2; pass++) {
        while ((step = sqlite3_step(st)) == SQLITE_ROW) {
            const char *prec = (const char *)sqlite3_column_text(st, 2);
            int k = -1, p = -1;
            for (int i = 0; prec && i < N_PREC; i++)
                if (strcmp(prec, known_prec[i]) == 0) k = i;
            if (k < 0) { /* a precision this gpubench does not know */
                if (pass == 1) c->unknown_prec++;
                continue;
            }
            if (pass == 0) {
                found[k] = 1;
                continue;
            }
            for (int i = 0; i < c->nsel; i++)
                if (c->sel[i] == k) p = i;
            if (p < 0) continue;
            cmp_row_t *r = row_for(c, st);
            if (!r) {
                fprintf(stderr, "gpubench compare: out of memory\n");
                sqlite3_finalize(st);
                return 1;
            }
            r->has[p] = 1;
            r->fig[p] = sqlite3_column_double(st, 7);
            r->runs[p] = sqlite3_column_int64(st, 6);
            if (c->by_node) r->model_fig[p] = sqlite3_column_double(st, 9);
        }
        if (step != SQLITE_DONE) {
            fprintf(stderr, "gpubench compare: %s\n", sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return 1;
        }
        if (pass == 0) {
            for (int i = 0; i < N_PREC; i++)
                if (found[i]) c->sel[c->nsel++] = i;
            sqlite3_reset(st);
        }
    }
    sqlite3_finalize(st);
    return 0;
}

/* --below R: only the rows with a rel under R in a shown precision. */
static void keep_below(cmp_t *c) {
    int n = 0;
    for (int i = 0; i < c->n; i++) {
        cmp_row_t *r = &c->rows[i];
        int keep = 0;
        double rel;
        for (int p = 0; p < c->nsel; p++)
            if (node_rel(r, p, &rel) && rel < c->below) keep = 1;
        if (keep)
            c->rows[n++] = *r;
        else
            free_row(r);
    }
    c->n = n;
}

/* How many rows the kind's view has in all (-1 on an error). */
static long long view_rows(sqlite3 *db, const cmp_kind_t *kind) {
    char sql[96];
    gb_fmt(sql, sizeof sql, "SELECT count(*) FROM %s", kind->view);
    return cli_count(db, sql);
}

/* --shape: "MxNxK", or "N" for NxNxN, each 1..GB_SHAPE_MAX. 2 (said) on
 * anything else. */
enum { GB_SHAPE_MAX = 1 << 20 };
static int parse_shape(const char *s, long out[3]) {
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        if (n == 3 || !isdigit((unsigned char)*p)) break;
        long v = strtol(p, &end, 10);
        if (v < 1 || v > GB_SHAPE_MAX) break;
        out[n++] = v;
        if (!*end) {
            if (n == 1) out[1] = out[2] = out[0];
            if (n == 1 || n == 3) return 0;
            break;
        }
        if (*end != 'x' && *end != 'X') break;
        p = end + 1;
    }
    char msg[160];
    gb_fmt(msg, sizeof msg,
           "--shape: '%.40s' is not MxNxK (or N for NxNxN), each a whole number from 1 to %d", s,
           (int)GB_SHAPE_MAX);
    return cli_usage_error("compare", msg);
}

int cmd_compare(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"kind", required_argument, 0, 'K'},
                                         {"shape", required_argument, 0, 's'},
                                         {"baseline", required_argument, 0, 'B'},
                                         {"by", required_argument, 0, 'y'},
                                         {"below", required_argument, 0, 'w'},
                                         {"precision", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"image-size", required_argument, 0, 'i'},
                                         {"backend", required_argument, 0, 'k'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *db_path = GB_DEFAULT_DB, *baseline = NULL, *backend = NULL;
    gb_format_t fmt = GB_FMT_TABLE;
    long batch = 0, image = 0, shape[3] = {0, 0, 0};
    cmp_t c = {.kind = &kinds[KIND_RESNET50]};
    int opt, given_prec = 0;
    optind = 1;
    cli_once_t once = {0};
    if (cli_full_names("compare", argc, argv, opts)) return 2;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once(&once, "compare", opts, opt)) return 2;
        switch (opt) {
        case 'd':
            db_path = optarg;
            break;
        case 'K':
            c.kind = NULL;
            for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
                if (strcmp(optarg, kinds[i].name) == 0) c.kind = &kinds[i];
            if (!c.kind) return cli_usage_error("compare", "--kind is resnet50 or gemm");
            break;
        case 's':
            if (parse_shape(optarg, shape)) return 2;
            break;
        case 'B':
            baseline = optarg;
            break;
        case 'y':
            if (strcmp(optarg, "model") != 0 && strcmp(optarg, "node") != 0)
                return cli_usage_error("compare", "--by is model or node");
            c.by_node = strcmp(optarg, "node") == 0;
            break;
        case 'w': {
            char *end;
            c.below = strtod(optarg, &end);
            if (!cli_number_text(optarg) || end == optarg || *end ||
                !(c.below > 0 && c.below <= 100))
                return cli_usage_error("compare", "--below is a ratio above 0, at most 100 "
                                                  "(0.95: 5% or more below the model)");
            break;
        }
        case 'p':
            if (cli_name_list("compare", "--precision", "precision", optarg, known_prec, N_PREC,
                              c.sel, &c.nsel))
                return 2;
            given_prec = 1;
            break;
        case 'b':
            if (cli_long("compare", "--batch", optarg, 1, 65536, &batch)) return 2;
            break;
        case 'i':
            if (cli_long("compare", "--image-size", optarg, 1, 4096, &image)) return 2;
            break;
        case 'k':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return cli_usage_error("compare", "--backend is cpu or cuda");
            backend = optarg;
            break;
        case 'f':
            if (cli_format("compare", optarg, &fmt)) return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt said which option */
            return cli_bad_option("compare");
        }
    }
    if (optind < argc) return cli_unexpected_arg("compare", argv[optind], NULL);
    if (!db_path[0]) return cli_usage_error("compare", "--db needs a file name");
    if (baseline && !baseline[0]) return cli_usage_error("compare", "--baseline needs a model");
    if (c.kind == &kinds[KIND_GEMM] && (batch || image))
        return cli_usage_error("compare", "--batch and --image-size are resnet50's: a gemm's "
                                          "configuration is its shape (--shape MxNxK)");
    if (baseline && c.by_node)
        return cli_usage_error("compare", "--baseline is --by model's: --by node divides each "
                                          "node's figure by its own model's median");
    if (c.below && !c.by_node) return cli_usage_error("compare", "--below is --by node's");
    if (c.kind != &kinds[KIND_GEMM] && shape[0])
        return cli_usage_error("compare", "--shape is a gemm's (add --kind gemm)");
    const long cfg[3] = {c.kind == &kinds[KIND_GEMM] ? shape[0] : batch,
                         c.kind == &kinds[KIND_GEMM] ? shape[1] : image, shape[2]};

    sqlite3 *db = cli_store_open("compare", db_path);
    if (!db) return 1;
    int rc = load(&c, db, db_path, backend, cfg, given_prec);
    if (rc == 0 && c.n == 0) {
        /* nothing to compare: said plainly; exit 0 as results with an
         * empty store (csv: the header; json: []) */
        const cmp_kind_t *k = c.kind;
        long long in_view = view_rows(db, k);
        FILE *say = gb_format_for_people(fmt) ? stdout : stderr;
        if (in_view > 0 && c.unknown_prec > 0) /* it blamed filters nobody gave */
            fprintf(say,
                    "%sno %s in %s to show: %lld of the %lld row(s) of %s have a precision this "
                    "gpubench does not know (it shows fp16, bf16, tf32, fp32), the rest none "
                    "the %s given match\n",
                    say == stderr ? "gpubench compare: " : "", k->results, db_path, c.unknown_prec,
                    in_view, k->view, k->filters);
        else if (in_view > 0)
            fprintf(say, "%sno %s in %s match the %s given (%s has %lld row(s))\n",
                    say == stderr ? "gpubench compare: " : "", k->results, db_path, k->filters,
                    k->view, in_view);
        else
            fprintf(say, "%sno %s in %s yet (%s is empty: it counts %s)\n",
                    say == stderr ? "gpubench compare: " : "", k->results, db_path, k->view,
                    k->counts);
        if (!gb_format_for_people(fmt)) rc = print_compare(&c, fmt);
    } else if (rc == 0 && c.by_node) {
        int had = c.n;
        if (c.below) keep_below(&c);
        g_nsel = c.nsel;
        g_by_node = 1;
        qsort(c.rows, (size_t)c.n, sizeof *c.rows, cmp_rows);
        if (c.n == 0) {
            FILE *say = gb_format_for_people(fmt) ? stdout : stderr;
            fprintf(say, "%severy node is at %g or more of its model's median (%d node row(s))\n",
                    say == stderr ? "gpubench compare: " : "", c.below, had);
        }
        if (c.n || !gb_format_for_people(fmt)) rc = print_compare(&c, fmt);
    } else if (rc == 0) {
        const char *model = NULL;
        if (baseline && !(model = find_baseline(&c, baseline, db_path, &rc))) goto out;
        g_nsel = c.nsel;
        qsort(c.rows, (size_t)c.n, sizeof *c.rows, cmp_rows);
        if (pick_baselines(&c, model) != 0) {
            rc = 1;
            goto out;
        }
        rc = print_compare(&c, fmt);
    }
out:
    free_rows(&c);
    sqlite3_close(db);
    return rc;
}
