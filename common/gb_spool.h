/* gb_spool.h - the agent's on-disk spool of results not yet acknowledged.
 *
 * One file per (job, attempt), "result-<job>-<attempt>.pb", written
 * atomically and durably (gb_write_file_atomic) before the result is first
 * sent, and deleted only when the coordinator acknowledged it. So a result
 * survives an agent crash, a coordinator restart and a network drop. The
 * spool does not interpret the bytes (the agent stores a packed Result).
 * Leftover temporary files of an interrupted write are removed on open;
 * files whose names do not match are left alone and not listed. */
#ifndef GB_SPOOL_H
#define GB_SPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_spool gb_spool_t;

typedef struct gb_spool_entry {
    uint64_t job_id;
    uint32_t attempt;
} gb_spool_entry_t;

/* Open (creating it, mode 0700) the spool directory dir. NULL with a reason
 * in err on failure. */
gb_spool_t *gb_spool_new(const char *dir, char *err, size_t errlen);
void gb_spool_destroy(gb_spool_t **self_p);

/* Store data as the result of (job, attempt), replacing an older copy. */
int gb_spool_put(gb_spool_t *self, uint64_t job_id, uint32_t attempt, const void *data, size_t len,
                 char *err, size_t errlen);
/* Read it back into a malloc'd buffer (caller frees). -1 when missing or
 * unreadable. */
int gb_spool_get(gb_spool_t *self, uint64_t job_id, uint32_t attempt, void **data, size_t *len,
                 char *err, size_t errlen);
/* Delete it; deleting what is not there succeeds. */
int gb_spool_del(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err, size_t errlen);
/* Move an unreadable entry aside as "<name>.bad" so it is not resent. */
int gb_spool_quarantine(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err,
                        size_t errlen);
/* 1 when (job, attempt) has an entry (whatever it holds), 0 when it has
 * none, -1 when that cannot be told (err says why). */
int gb_spool_has(gb_spool_t *self, uint64_t job_id, uint32_t attempt, char *err, size_t errlen);
/* Make the spool directory again when it is gone (removed while the agent
 * ran): 1 when it was made, 0 when it was there, -1 on failure. */
int gb_spool_ensure(gb_spool_t *self, char *err, size_t errlen);
/* Every entry, sorted by (job_id, attempt); *out is malloc'd (may be NULL
 * when *n is 0). */
int gb_spool_list(gb_spool_t *self, gb_spool_entry_t **out, size_t *n, char *err, size_t errlen);

#endif
