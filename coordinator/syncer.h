/* syncer.h - durability off the reactor's path (the coordinator's default,
 * --sync group).
 *
 * The store commits each loop turn with synchronous=NORMAL: the turn's
 * transaction is in the WAL file, in the kernel's page cache, when COMMIT
 * returns; a crash of the coordinator cannot lose it, a crash of the
 * machine can. This thread makes it durable: fdatasync of the WAL file
 * (any descriptor of a file flushes its pages), one call covering every
 * commit made before it, and it checkpoints the WAL into the database
 * from its own connection (PASSIVE: it never blocks the writer), so the
 * reactor never waits for the disk. The reactor numbers its commits and
 * holds back what must not be sent before its commit is durable (result
 * acknowledgements, replies to requests that wrote); assignments and
 * everything else go out at once.
 *
 * Started and stopped with a handshake; a failed fdatasync is sticky (the
 * page cache can no longer be trusted: the coordinator stops, and what it
 * had not acknowledged is resent to its successor). */
#ifndef GB_COORD_SYNCER_H
#define GB_COORD_SYNCER_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_syncer gb_syncer_t;

/* Start the thread for the store at db_path (WAL mode, opened already by
 * the reactor). NULL with a reason on failure. */
gb_syncer_t *gb_syncer_new(const char *db_path, char *err, size_t errlen);
/* Stop the thread (after a last sync of what was requested) and free. */
void gb_syncer_destroy(gb_syncer_t **self_p);

/* Commits up to seq are in the WAL file: make them durable. Never blocks. */
void gb_syncer_request(gb_syncer_t *self, uint64_t seq);
/* A descriptor that is readable when gb_syncer_done() has moved on. */
int gb_syncer_fd(const gb_syncer_t *self);
/* The highest commit seq known durable (and the descriptor drained). -1
 * when an fdatasync failed, with the reason in err. */
int64_t gb_syncer_done(gb_syncer_t *self, char *err, size_t errlen);
/* Block until seq is durable or timeout_ms passed: 0, or -1. */
int gb_syncer_wait(gb_syncer_t *self, uint64_t seq, int timeout_ms);

#endif
