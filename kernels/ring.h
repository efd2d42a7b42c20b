/* ring.h - the CPU all-reduce across nodes: a ring of TCP connections, one
 * node (worker process) per position, as NCCL's ring does it on a network.
 *
 * Setup, coordinator-relayed (gb_dist_t): every node opens a listening
 * socket (gb_ring_new); rank 0's address, port and a random 16-byte nonce
 * are the job's unique id (gb_ring_make_id), which the coordinator carries
 * to the other ranks. After the start barrier every rank joins rank 0
 * (authenticated by the nonce; a wrong one is refused and told so), rank 0
 * sends everyone the table of listening addresses, and each rank connects
 * to its successor and accepts its predecessor (the nonce again). From
 * then on rank r sends only to r+1 and receives only from r-1.
 *
 * All-reduce of `count` floats in place: reduce-scatter then all-gather
 * over n segments, 2(n-1) steps of sending one segment while receiving
 * another (non-blocking sockets, poll). Segment i is summed in one fixed
 * order (starting at rank i+1) on one rank and then copied, so every rank
 * ends with the same bytes; an average divides the owner's sum once. The
 * wire carries floats in host byte order: every peer checks at the
 * handshake that the other end has the same.
 *
 * Timeouts: every wait on a peer (connect, handshake, each transfer) fails
 * after timeout_ms without progress, naming the peer; a peer that dies
 * closes its sockets, which fails the transfer at once ("closed the
 * connection"). Nothing is encrypted: the nonce only keeps strangers and
 * stale ranks out. Listening address: $GB_COMM_ADDR (an IPv4 address to
 * bind and advertise), else every interface, advertising the first
 * non-loopback IPv4 address that is up (127.0.0.1 if none).
 */
#ifndef GB_RING_H
#define GB_RING_H

#include "comm.h"

#include <stddef.h>

#define GB_RING_ID_LEN 34 /* "GBRING01", nonce[16], IPv4, port, n */

typedef struct gb_ring gb_ring_t;

/* Node `rank` of n (2..1024): opens the listening socket. timeout_ms > 0.
 * NULL with a reason on failure. */
gb_ring_t *gb_ring_new(int rank, int n, int timeout_ms, char *err, size_t errlen);

/* Rank 0 only: the unique id to publish (GB_RING_ID_LEN bytes into id,
 * which holds at least that many; *len set). */
int gb_ring_make_id(gb_ring_t *r, unsigned char *id, size_t *len, char *err, size_t errlen);

/* Every rank, with rank 0's id: join and close the ring. Returns when this
 * rank is connected to both neighbours. */
int gb_ring_connect(gb_ring_t *r, const unsigned char *id, size_t len, char *err, size_t errlen);

/* In place over buf[0..count): op GB_COMM_SUM or GB_COMM_MAX; div > 0
 * divides every summed element by div once (the average). */
int gb_ring_allreduce(gb_ring_t *r, float *buf, size_t count, gb_comm_op_t op, float div, char *err,
                      size_t errlen);

/* Close every socket; no-op on NULL; sets *self_p to NULL. */
void gb_ring_destroy(gb_ring_t **self_p);

#endif
