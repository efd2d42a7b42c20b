/* output.h - command output for people and for scripts: one table of typed
 * cells printed as a fixed-width table (numbers right-aligned, and a NULL
 * "-" in a column of numbers with them), CSV
 * (RFC 4180), JSON (an array of objects, numbers as numbers, NULL as
 * null) or a Markdown table (GitHub's pipe tables: the fixed-width table's
 * cells, numbers right-aligned, for pasting into a page or an issue).
 * Output goes to stdout; errors never do. */
#ifndef GB_CLI_OUTPUT_H
#define GB_CLI_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

typedef enum { GB_FMT_TABLE = 0, GB_FMT_CSV, GB_FMT_JSON, GB_FMT_MD } gb_format_t;

/* "table" "csv" "json" "md" (or "markdown"); -1 when unknown. */
int gb_format_parse(const char *s, gb_format_t *out);
/* For people (table, md: the columns and notes a reader wants, rounded),
 * not for programs (csv, json: every column, every digit). */
int gb_format_for_people(gb_format_t fmt);

typedef struct gb_table gb_table_t;

/* A table with ncols columns named names[0..ncols-1] (copied). */
/* s on out, each control character (C0, DEL, C1, a newline too) as '?',
 * as a table's cells print: text from a peer (an invalid_reason, a model
 * name, an NVML error) printed beside a table must not carry an escape
 * sequence or a forged line to the terminal. NULL prints nothing. */
void gb_put_line(FILE *out, const char *s);

gb_table_t *gb_table_new(int ncols, const char *const *names);
void gb_table_destroy(gb_table_t **self_p);
/* Start a new row (all cells NULL); -1 on out-of-memory. */
int gb_table_row(gb_table_t *t);
/* Set a cell of the last row. */
void gb_table_text(gb_table_t *t, int col, const char *s); /* NULL -> null */
void gb_table_int(gb_table_t *t, int col, int64_t v);
void gb_table_real(gb_table_t *t, int col, double v, int decimals); /* decimals: table/CSV text */
/* decimals for a rate (images/s, GFLOP/s): one, or as many as show four
 * significant digits (2.345 img/s, 23.45, 234.5), so that a CPU figure of
 * about 2 img/s shows a 5% difference that one decimal would hide */
#define GB_DECIMALS_RATE (-1)
/* Decimals for v: min, one more for each power of ten v is below 100, at
 * most 6 (min 1: four significant digits below 1000; min 0: three below
 * 100, whole numbers above) */
int gb_decimals_for(double v, int min);
void gb_table_print(const gb_table_t *t, FILE *out, gb_format_t fmt);
int gb_table_rows(const gb_table_t *t);

#endif
