/* sql_one.h - for tests that read a store with SQL: the first column of the
 * first row of a query as text ("" for no row, "NULL" for a NULL), and
 * GB_SQL_EQ to hold it to a value. Include after check.h and sqlite3.h. */
#ifndef GB_TESTS_SQL_ONE_H
#define GB_TESTS_SQL_ONE_H

#include <stdio.h>
#include <string.h>

static inline const char *gb_sql_one(sqlite3 *db, const char *sql) {
    static char buf[1024];
    sqlite3_stmt *s;
    CHECKF(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql,
           sqlite3_errmsg(db));
    buf[0] = '\0';
    int rc = sqlite3_step(s);
    CHECKF(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
    if (rc == SQLITE_ROW)
        snprintf(buf, sizeof buf, "%s",
                 sqlite3_column_type(s, 0) == SQLITE_NULL
                     ? "NULL"
                     : (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return buf;
}

#define GB_SQL_EQ(db, sql, want)                                                                   \
    do {                                                                                           \
        const char *got_ = gb_sql_one((db), (sql));                                                \
        CHECKF(strcmp(got_, (want)) == 0, "%s: got '%s', want '%s'", (sql), got_, (want));         \
    } while (0)

#endif
