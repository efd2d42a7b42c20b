/* gb_rdv.h - the rendezvous channel between an agent and the worker that
 * runs one rank of a multi-node job (issue 5).
 *
 * The agent starts such a worker with one end of a Unix stream socket pair
 * on descriptor GB_RDV_FD and names it in the job file ("dist": {"fd": 3}).
 * Text lines travel on it, at most one of each kind per job:
 *
 *   worker -> agent   "id <hex>\n"        rank 0 only: the unique id it made
 *                     "ready\n"           the worker waits at the start barrier
 *   agent  -> worker  "start <unix_ms>\n" every rank is ready: begin at unix_ms
 *
 * The agent turns the first two into RankUpdate messages to the coordinator
 * and the coordinator's RankStart into the third. A worker whose channel
 * closes (its agent stopped it) ends with an error.
 *
 * gb_rdv_format and gb_rdv_parse are pure functions of their arguments (a
 * test or a fuzzer calls them on any bytes); gb_rdv_read_line buffers the
 * partial lines of a non-blocking descriptor. */
#ifndef GB_RDV_H
#define GB_RDV_H

#include <stddef.h>
#include <stdint.h>

#define GB_RDV_FD       3
#define GB_RDV_ID_MAX   128 /* = GB_WIRE_UNIQUE_ID_MAX = GB_DIST_ID_MAX */
#define GB_RDV_LINE_MAX (3 + 2 * GB_RDV_ID_MAX + 1)
/* The coordinator starts a multi-node job's ranks at its wall clock plus a
 * lead of two heartbeats, 200..GB_RDV_LEAD_MAX_MS ms: an agent that finds
 * the start further away than that on its own clock (plus a second for the
 * message's way) has a clock behind the coordinator's, and starts its
 * worker after the longest lead instead of sleeping the difference (a node
 * 20 s behind slept 20 s and its time limit grew by as much) */
#define GB_RDV_LEAD_MAX_MS 2000

typedef enum { GB_RDV_ID = 1, GB_RDV_READY, GB_RDV_START } gb_rdv_kind_t;

typedef struct gb_rdv_msg {
    gb_rdv_kind_t kind;
    unsigned char id[GB_RDV_ID_MAX]; /* GB_RDV_ID */
    size_t id_len;                   /* 1..GB_RDV_ID_MAX */
    int64_t start_ms;                /* GB_RDV_START: > 0 */
} gb_rdv_msg_t;

/* The line for m, '\n' included, in line (len bytes: GB_RDV_LINE_MAX + 1
 * always suffice). 0, or -1 when m is out of range or line too short. */
int gb_rdv_format(const gb_rdv_msg_t *m, char *line, size_t len);
/* Parse one line of len bytes (without its '\n'). 0 with m filled, or -1
 * with the reason in err: an unknown word, bad hex, an id of 0 or more than
 * GB_RDV_ID_MAX bytes, a start time that is not a positive integer, extra
 * bytes. */
int gb_rdv_parse(const char *line, size_t len, gb_rdv_msg_t *m, char *err, size_t errlen);

/* (gb_hex_encode and gb_hex_decode are gb_util.h's.) */

/* The agent's account of what one rank's worker said so far. */
typedef struct gb_rdv_rank {
    unsigned rank;
    int have_id, ready;
} gb_rdv_rank_t;

typedef enum {
    GB_RDV_SEND_ID = 1, /* pass the id up (RankUpdate ID) */
    GB_RDV_SEND_READY,  /* pass ready up (RankUpdate READY) */
    GB_RDV_VIOLATION,   /* out of protocol: the agent stops the worker */
} gb_rdv_action_t;

/* What message m from the worker means, given what it said before: an id
 * from rank 0, once, before it is ready; ready once (rank 0 only after its
 * id); anything else (an id from another rank, a second id or ready, a
 * start, which only the agent sends) is a violation. Updates st. */
gb_rdv_action_t gb_rdv_from_worker(gb_rdv_rank_t *st, const gb_rdv_msg_t *m);

/* Partial lines of one non-blocking descriptor. Zero-initialise. */
typedef struct gb_rdv_reader {
    char buf[GB_RDV_LINE_MAX + 1];
    size_t len;
} gb_rdv_reader_t;

/* The next complete line (without '\n', NUL-terminated, out must hold
 * GB_RDV_LINE_MAX + 1 bytes): 1 with a line; 0 when none is complete yet
 * (read would block); -1 at end of file, on a read error, or on a line
 * longer than GB_RDV_LINE_MAX (the channel is then useless). */
int gb_rdv_read_line(gb_rdv_reader_t *r, int fd, char *out);

#endif
