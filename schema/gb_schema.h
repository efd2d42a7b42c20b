/* gb_schema.h - the store's schema migrations, embedded in the binary.
 *
 * schema/NNNN_name.sql files are turned into gb_schema_migrations[] at
 * build time (embed.cmake), numbered 1..n without gaps. gb_schema_migrate()
 * applies those above the database's PRAGMA user_version in order, each in
 * its own transaction together with the new user_version, so a migration
 * that fails leaves the database exactly as it was. */
#ifndef GB_SCHEMA_H
#define GB_SCHEMA_H

#include <sqlite3.h>
#include <stddef.h>

typedef struct gb_migration {
    int version;      /* NNNN */
    const char *name; /* "0001_init" */
    const char *sql;
} gb_migration_t;

extern const gb_migration_t gb_schema_migrations[];
extern const size_t gb_schema_n_migrations;

/* Bring db up to list[n-1].version. Versions must be 1..n in order. Fails
 * (without changing anything) when the database is newer than the list.
 * Returns 0, or -1 with a reason in err. */
int gb_schema_migrate(sqlite3 *db, const gb_migration_t *list, size_t n, char *err, size_t errlen);
/* The database's PRAGMA user_version, or -1 on error. */
int gb_schema_version(sqlite3 *db);

#endif
