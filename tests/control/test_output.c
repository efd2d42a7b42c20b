/* test_output.c - cli/output.c: what the commands print. A peer's string
 * with an escape sequence, a bell, DEL or a C1 control (UTF-8) prints as
 * '?' in the table and CSV (never raw to a terminal), other UTF-8 as it is;
 * JSON escapes it; CSV carries every digit of a number. Markdown: a pipe
 * table with the table's cells, '|' escaped, one line per row.
 * Usage: test_output CASE */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_util.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>

static char *print(const gb_table_t *t, gb_format_t fmt) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    gb_table_print(t, f, fmt);
    CHECK(fclose(f) == 0);
    return buf;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    static const char *const cols[] = {"node", "figure"};
    gb_table_t *t = gb_table_new(2, cols);
    CHECK(t && gb_table_row(t) == 0);
    gb_table_text(t, 0,
                  "evil\x1b]0;x\x07 \xc2\x9b"
                  "2J\x7f r\xc3\xa9seau");
    gb_table_real(t, 1, 7.19960883, 1);
    if (strcmp(c, "control_chars") == 0) {
        static const gb_format_t fmts[] = {GB_FMT_TABLE, GB_FMT_CSV, GB_FMT_MD};
        for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
            gb_format_t fmt = fmts[i];
            char *out = print(t, fmt);
            for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
                CHECKF(*p >= 0x20 || *p == '\n', "format %d: control byte 0x%02x in %s", fmt, *p,
                       out);
                CHECKF(*p != 0x7f && !(*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f),
                       "format %d: DEL or C1 in %s", fmt, out);
            }
            CHECKF(strstr(out, "evil?]0;x? ?2J? r\xc3\xa9seau"), "format %d: %s", fmt, out);
            free(out);
        }
        char *out = print(t, GB_FMT_JSON);
        CHECKF(strstr(out, "\\u001b]0;x\\u0007"), "json escapes: %s", out);
        free(out);
    } else if (strcmp(c, "json_utf8") == 0) {
        /* a stray byte (a store written before names were checked, a
         * worker's output) reads as U+FFFD: the JSON stays UTF-8 */
        gb_table_text(t, 0, "a\xff\xfe b\xed\xa0\x80 r\xc3\xa9seau \xc3");
        char *out = print(t, GB_FMT_JSON);
        CHECKF(gb_utf8_ok(out), "not UTF-8: %s", out);
        CHECKF(strstr(out, "a\xef\xbf\xbd\xef\xbf\xbd b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                           "r\xc3\xa9seau \xef\xbf\xbd\""),
               "%s", out);
        free(out);
    } else if (strcmp(c, "csv_digits") == 0) {
        char *out = print(t, GB_FMT_CSV);
        CHECKF(strstr(out, ",7.19960883\n"), "csv keeps every digit: %s", out);
        free(out);
        out = print(t, GB_FMT_TABLE);
        CHECKF(strstr(out, "7.2") && !strstr(out, "7.19"), "the table rounds: %s", out);
        free(out);
    } else if (strcmp(c, "json_digits") == 0) {
        /* csv and json carry every digit: 0.1 + 0.2 is not 0.3 (cJSON's
         * printer stopped at 15 digits), nor 2^53 + 1 9.00719925474099e+15 */
        static const char *const two[] = {"x", "n"};
        gb_table_t *u = gb_table_new(2, two);
        CHECK(u && gb_table_row(u) == 0);
        gb_table_real(u, 0, 0.1 + 0.2, 1);
        gb_table_int(u, 1, 9007199254740993LL);
        CHECK(gb_table_row(u) == 0);
        gb_table_real(u, 0, 7.19960883, 1);
        gb_table_int(u, 1, -3);
        char *out = print(u, GB_FMT_JSON);
        CHECKF(strstr(out, "\"x\":\t0.30000000000000004") &&
                   strstr(out, "\"n\":\t9007199254740993") && strstr(out, "\"x\":\t7.19960883,") &&
                   strstr(out, "\"n\":\t-3\n"),
               "json: %s", out);
        free(out);
        out = print(u, GB_FMT_CSV);
        CHECKF(strstr(out, "0.30000000000000004,9007199254740993\n7.19960883,-3\n"), "csv: %s",
               out);
        free(out);
        gb_table_destroy(&u);
    } else if (strcmp(c, "utf8_width") == 0) {
        /* columns line up by characters, not bytes: "ünï" is 3 wide */
        static const char *const two[] = {"name", "state"};
        gb_table_t *u = gb_table_new(2, two);
        CHECK(u && gb_table_row(u) == 0);
        gb_table_text(u, 0, "smoke \xc3\xbcn\xc3\xaf");
        gb_table_text(u, 1, "done");
        CHECK(gb_table_row(u) == 0);
        gb_table_text(u, 0, "plain");
        gb_table_text(u, 1, "done");
        char *out = print(u, GB_FMT_TABLE);
        /* header, then each row: the state column starts at the same column */
        const char *l1 = strchr(out, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
        int col1 = 0, col2 = 0;
        for (const char *p = l1; p < strstr(l1, "done"); p++)
            col1 += ((unsigned char)*p & 0xc0) != 0x80;
        for (const char *p = l2; p < strstr(l2, "done"); p++)
            col2 += ((unsigned char)*p & 0xc0) != 0x80;
        CHECKF(col1 == col2 && col1 == (int)strlen("smoke uni  "), "%d %d:\n%s", col1, col2, out);
        free(out);
        gb_table_destroy(&u);
    } else if (strcmp(c, "markdown") == 0) {
        /* GitHub's pipe table: a column of numbers right-aligned (---:),
         * the table's rounding, NULL '-', a '|' or '\\' in a cell escaped, a
         * newline a space (a row is one line); "md" and "markdown" */
        static const char *const three[] = {"gpu_model", "fp16_img_s", "note"};
        gb_table_t *u = gb_table_new(3, three);
        CHECK(u && gb_table_row(u) == 0);
        gb_table_text(u, 0, "NVIDIA H100");
        gb_table_real(u, 1, 3000.04, 1);
        gb_table_text(u, 2, "a|b\\c\nd");
        CHECK(gb_table_row(u) == 0);
        gb_table_text(u, 0, "Tesla V100");
        char *out = print(u, GB_FMT_MD);
        CHECKF(strcmp(out, "| gpu_model | fp16_img_s | note |\n"
                           "| --- | ---: | --- |\n"
                           "| NVIDIA H100 | 3000.0 | a\\|b\\\\c d |\n"
                           "| Tesla V100 | - | - |\n") == 0,
               "\n%s", out);
        free(out);
        gb_format_t f = GB_FMT_TABLE;
        CHECK(gb_format_parse("md", &f) == 0 && f == GB_FMT_MD);
        f = GB_FMT_TABLE;
        CHECK(gb_format_parse("markdown", &f) == 0 && f == GB_FMT_MD);
        CHECK(gb_format_parse("MD", &f) != 0 && gb_format_parse("mdx", &f) != 0);
        CHECK(gb_format_for_people(GB_FMT_MD) && gb_format_for_people(GB_FMT_TABLE));
        CHECK(!gb_format_for_people(GB_FMT_CSV) && !gb_format_for_people(GB_FMT_JSON));
        gb_table_destroy(&u);
    } else if (strcmp(c, "null_align") == 0) {
        /* a NULL ("-") in a column of numbers is right-aligned with them,
         * as the last character of the column: "256" over "  -" */
        static const char *const three[] = {"kind", "m", "valid"};
        gb_table_t *u = gb_table_new(3, three);
        CHECK(u && gb_table_row(u) == 0);
        gb_table_text(u, 0, "gemm");
        gb_table_int(u, 1, 256);
        gb_table_int(u, 2, 1);
        CHECK(gb_table_row(u) == 0);
        gb_table_text(u, 0, "sleep");
        CHECK(gb_table_row(u) == 0); /* every cell NULL */
        char *out = print(u, GB_FMT_TABLE);
        CHECKF(strcmp(out, "kind   m    valid\n"
                           "gemm   256      1\n"
                           "sleep    -      -\n"
                           "-        -      -\n") == 0,
               "\n%s", out);
        free(out);
        gb_table_destroy(&u);
    } else if (strcmp(c, "real_extremes") == 0) {
        /* a huge figure prints its magnitude (1e100 printed 63 digits of
         * about 1e62: the buffer cut it); a tiny nonzero rate is not 0 */
        static const char *const one[] = {"img_s"};
        gb_table_t *u = gb_table_new(1, one);
        CHECK(u && gb_table_row(u) == 0);
        gb_table_real(u, 0, 1e100, GB_DECIMALS_RATE);
        CHECK(gb_table_row(u) == 0);
        gb_table_real(u, 0, 1.23456e-9, GB_DECIMALS_RATE);
        CHECK(gb_table_row(u) == 0);
        gb_table_real(u, 0, 2.345, GB_DECIMALS_RATE);
        char *out = print(u, GB_FMT_TABLE);
        CHECKF(strstr(out, "1e+100\n") && strstr(out, "1.235e-09\n") && strstr(out, "2.345\n"),
               "\n%s", out);
        free(out);
        gb_table_destroy(&u);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    gb_table_destroy(&t);
    puts("PASS");
    return 0;
}
