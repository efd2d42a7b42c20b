/* output.c - see output.h. */
#define _POSIX_C_SOURCE 200809L
#include "output.h"

#include "gb_util.h"
#include "gb_wire.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C_NULL = 0, C_TEXT, C_INT, C_REAL };

typedef struct cell {
    int type;
    char *text; /* rendering (also for numbers) */
    int64_t i;
    double d;
} cell_t;

struct gb_table {
    int ncols, nrows, cap;
    char **names;
    cell_t *cells; /* nrows * ncols */
};

int gb_format_parse(const char *s, gb_format_t *out) {
    if (!s) return -1;
    if (strcmp(s, "table") == 0)
        *out = GB_FMT_TABLE;
    else if (strcmp(s, "csv") == 0)
        *out = GB_FMT_CSV;
    else if (strcmp(s, "json") == 0)
        *out = GB_FMT_JSON;
    else if (strcmp(s, "md") == 0 || strcmp(s, "markdown") == 0)
        *out = GB_FMT_MD;
    else
        return -1;
    return 0;
}

int gb_format_for_people(gb_format_t fmt) {
    return fmt == GB_FMT_TABLE || fmt == GB_FMT_MD;
}

gb_table_t *gb_table_new(int ncols, const char *const *names) {
    gb_table_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncols = ncols;
    t->names = calloc((size_t)ncols, sizeof *t->names);
    if (!t->names) {
        free(t);
        return NULL;
    }
    for (int i = 0; i < ncols; i++)
        t->names[i] = strdup(names[i]);
    return t;
}

void gb_table_destroy(gb_table_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_table_t *t = *self_p;
    for (int i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i].text);
    for (int i = 0; i < t->ncols; i++)
        free(t->names[i]);
    free(t->names);
    free(t->cells);
    free(t);
    *self_p = NULL;
}

int gb_table_rows(const gb_table_t *t) {
    return t->nrows;
}

int gb_table_row(gb_table_t *t) {
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        cell_t *c = realloc(t->cells, (size_t)cap * (size_t)t->ncols * sizeof *c);
        if (!c) return -1;
        t->cells = c;
        t->cap = cap;
    }
    memset(&t->cells[(size_t)t->nrows * (size_t)t->ncols], 0, (size_t)t->ncols * sizeof(cell_t));
    t->nrows++;
    return 0;
}

static cell_t *cur(gb_table_t *t, int col) {
    cell_t *c = &t->cells[(size_t)(t->nrows - 1) * (size_t)t->ncols + (size_t)col];
    free(c->text);
    c->text = NULL;
    return c;
}

void gb_table_text(gb_table_t *t, int col, const char *s) {
    cell_t *c = cur(t, col);
    c->type = s ? C_TEXT : C_NULL;
    c->text = s ? strdup(s) : NULL;
}

void gb_table_int(gb_table_t *t, int col, int64_t v) {
    cell_t *c = cur(t, col);
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    c->type = C_INT;
    c->i = v;
    c->text = strdup(buf);
}

int gb_decimals_for(double v, int min) {
    int d = min;
    for (double a = fabs(v); d < 6 && a > 0 && a < 100; a *= 10)
        d++;
    return d;
}

void gb_table_real(gb_table_t *t, int col, double v, int decimals) {
    cell_t *c = cur(t, col);
    if (!isfinite(v)) {
        c->type = C_NULL;
        return;
    }
    int rate = decimals == GB_DECIMALS_RATE;
    if (rate) decimals = gb_decimals_for(v, 1);
    char buf[64];
    /* fixed decimals, unless that form lies: past 1e15 its digits run over
     * the buffer (1e100 printed 63 digits of about 1e62) and are noise
     * anyway; a nonzero rate it rounds to 0 showed as 0.000000 */
    if (fabs(v) >= 1e15 || (rate && v != 0 && fabs(v) < 0.5 * pow(10.0, -decimals)))
        snprintf(buf, sizeof buf, "%.4g", v);
    else
        snprintf(buf, sizeof buf, "%.*f", decimals, v);
    c->type = C_REAL;
    c->d = v;
    c->text = strdup(buf);
}

static const cell_t *at(const gb_table_t *t, int r, int col) {
    return &t->cells[(size_t)r * (size_t)t->ncols + (size_t)col];
}

/* A control character (an escape sequence, a bell) from a peer's string
 * never reaches the terminal: '?' instead (C1 controls too, as UTF-8; the
 * wire's own test, gb_wire_control_len). Returns the bytes of p it took. */
static size_t put_safe(FILE *out, const char *p, int keep_newlines) {
    size_t n = gb_wire_control_len(p);
    if (n && !(keep_newlines && (*p == '\n' || *p == '\t'))) {
        fputc('?', out);
        return n;
    }
    fputc(*p, out);
    return 1;
}

void gb_put_line(FILE *out, const char *s) {
    for (const char *p = s ? s : ""; *p;)
        p += put_safe(out, p, 0);
}

static void csv_field(FILE *out, const char *s) {
    int quote = strpbrk(s, ",\"\n\r") != NULL;
    if (quote) fputc('"', out);
    for (const char *p = s; *p;) {
        if (*p == '"') fputc('"', out);
        p += put_safe(out, p, 1);
    }
    if (quote) fputc('"', out);
}

/* Columns a string takes on a terminal: one per character, not per byte
 * (UTF-8 continuation bytes take none; a control character prints as one
 * '?'). Wide East Asian characters are still counted as one. */
static int display_len(const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

/* One line per cell in a table: newlines and tabs become spaces. */
static void table_field(FILE *out, const char *s, int width, int right) {
    int len = display_len(s);
    if (right)
        for (int i = len; i < width; i++)
            fputc(' ', out);
    for (const char *p = s; *p;) {
        if (*p == '\n' || *p == '\t' || *p == '\r') {
            fputc(' ', out);
            p++;
        } else {
            p += put_safe(out, p, 0);
        }
    }
    if (!right)
        for (int i = len; i < width; i++)
            fputc(' ', out);
}

/* One Markdown cell: '|' escaped, a newline, tab or CR a space (a cell
 * is one line), control characters '?', NULL "-". */
static void md_field(FILE *out, const char *s) {
    for (const char *p = s; *p;) {
        if (*p == '\n' || *p == '\t' || *p == '\r') {
            fputc(' ', out);
            p++;
        } else if (*p == '|' || *p == '\\') {
            fputc('\\', out);
            fputc(*p++, out);
        } else {
            p += put_safe(out, p, 0);
        }
    }
}

static void print_md(const gb_table_t *t, FILE *out) {
    for (int c = 0; c < t->ncols; c++) {
        fputs("| ", out);
        md_field(out, t->names[c]);
        fputc(' ', out);
    }
    fputs("|\n", out);
    for (int c = 0; c < t->ncols; c++) { /* a column of numbers right-aligned */
        int num = 0;
        for (int r = 0; r < t->nrows && !num; r++)
            num = at(t, r, c)->type == C_INT || at(t, r, c)->type == C_REAL;
        fputs(num ? "| ---: " : "| --- ", out);
    }
    fputs("|\n", out);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const cell_t *x = at(t, r, c);
            fputs("| ", out);
            md_field(out, x->type == C_NULL ? "-" : x->text);
            fputc(' ', out);
        }
        fputs("|\n", out);
    }
}

/* For machines (csv, json): every digit the value has (the table's
 * rounding is for eyes), the shortest that reads back. cJSON's own printer
 * stops at 15 digits when the 16th is within its epsilon, and prints
 * integers past 2^53 in e-notation. */
static void real_text(double d, char *buf, size_t len) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, d);
        if (strtod(buf, NULL) == d) return;
    }
}

void gb_table_print(const gb_table_t *t, FILE *out, gb_format_t fmt) {
    if (fmt == GB_FMT_MD) {
        print_md(t, out);
        return;
    }
    if (fmt == GB_FMT_JSON) {
        cJSON *arr = cJSON_CreateArray();
        for (int r = 0; arr && r < t->nrows; r++) {
            cJSON *o = cJSON_CreateObject();
            if (!o) break;
            for (int c = 0; c < t->ncols; c++) {
                const cell_t *x = at(t, r, c);
                if (x->type == C_TEXT) { /* JSON is UTF-8: a stray byte reads as U+FFFD */
                    char *fixed = gb_utf8_fix(x->text);
                    cJSON_AddStringToObject(o, t->names[c], fixed ? fixed : "");
                    free(fixed);
                } else if (x->type == C_INT) {
                    cJSON_AddRawToObject(o, t->names[c], x->text ? x->text : "null");
                } else if (x->type == C_REAL) { /* finite: gb_table_real */
                    char buf[40];
                    real_text(x->d, buf, sizeof buf);
                    cJSON_AddRawToObject(o, t->names[c], buf);
                } else
                    cJSON_AddNullToObject(o, t->names[c]);
            }
            cJSON_AddItemToArray(arr, o);
        }
        char *s = arr ? cJSON_Print(arr) : NULL;
        if (s) fprintf(out, "%s\n", s);
        free(s);
        cJSON_Delete(arr);
        return;
    }
    if (fmt == GB_FMT_CSV) {
        for (int c = 0; c < t->ncols; c++) {
            if (c) fputc(',', out);
            csv_field(out, t->names[c]);
        }
        fputc('\n', out);
        for (int r = 0; r < t->nrows; r++) {
            for (int c = 0; c < t->ncols; c++) {
                if (c) fputc(',', out);
                const cell_t *x = at(t, r, c);
                if (x->type == C_REAL) {
                    char buf[40];
                    real_text(x->d, buf, sizeof buf);
                    fputs(buf, out);
                } else if (x->type != C_NULL) {
                    csv_field(out, x->text);
                }
            }
            fputc('\n', out);
        }
        return;
    }
    /* w[c]: the column's width; num[c]: it holds numbers, so its "-" for
     * NULL is right-aligned with them (it stood at the left edge, under no
     * digit: "256" over "-" in a gemm's m column) */
    int *w = calloc((size_t)t->ncols * 2, sizeof *w);
    if (!w) return;
    int *num = w + t->ncols;
    for (int c = 0; c < t->ncols; c++) {
        w[c] = display_len(t->names[c]);
        for (int r = 0; r < t->nrows; r++) {
            const cell_t *x = at(t, r, c);
            int len = x->type == C_NULL ? 1 : display_len(x->text);
            if (len > w[c]) w[c] = len;
            if (x->type == C_INT || x->type == C_REAL) num[c] = 1;
        }
    }
    for (int c = 0; c < t->ncols; c++) {
        if (c) fputs("  ", out);
        table_field(out, t->names[c], c == t->ncols - 1 ? 0 : w[c], 0);
    }
    fputc('\n', out);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const cell_t *x = at(t, r, c);
            int right = x->type == C_INT || x->type == C_REAL || (x->type == C_NULL && num[c]);
            if (c) fputs("  ", out);
            table_field(out, x->type == C_NULL ? "-" : x->text,
                        c == t->ncols - 1 && !right ? 0 : w[c], right);
        }
        fputc('\n', out);
    }
    free(w);
}
