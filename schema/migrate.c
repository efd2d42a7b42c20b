/* migrate.c - see gb_schema.h. */
#include "gb_schema.h"

#include <stdio.h>

int gb_schema_version(sqlite3 *db) {
    sqlite3_stmt *st = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

int gb_schema_migrate(sqlite3 *db, const gb_migration_t *list, size_t n, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++)
        if (list[i].version != (int)i + 1) {
            snprintf(err, errlen, "migration %s is numbered %d, expected %zu", list[i].name,
                     list[i].version, i + 1);
            return -1;
        }
    int have = gb_schema_version(db);
    if (have < 0) {
        snprintf(err, errlen, "cannot read user_version: %s", sqlite3_errmsg(db));
        return -1;
    }
    if ((size_t)have > n) {
        snprintf(err, errlen,
                 "database schema version %d is newer than this gpubench knows (%zu); "
                 "use a newer gpubench",
                 have, n);
        return -1;
    }
    /* 0009 edits a CHECK in sqlite_master (writable_schema), which a build
     * of SQLite that turns SQLITE_DBCONFIG_DEFENSIVE on by default refuses:
     * off for the migrations, as it was, after */
    int defensive = 0;
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, -1, &defensive);
    if (defensive) sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 0, NULL);
    int rc = 0;
    for (size_t i = (size_t)have; i < n && rc == 0; i++) {
        char *msg = NULL;
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", list[i].version);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, list[i].sql, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration %s failed: %s", list[i].name,
                     msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            rc = -1;
        }
    }
    if (defensive) sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    return rc;
}
