/* gb_zmq.h - sending and receiving Envelopes on ZeroMQ sockets, and the
 * request/reply helper the client commands use.
 *
 * Sends never block: a message that cannot be queued now (no connected peer,
 * high-water mark) fails with errno EAGAIN or EHOSTUNREACH and the caller
 * decides (agents resend results until acknowledged; heartbeats are simply
 * sent again next interval). Receives drain one whole multi-part message so
 * a peer sending extra parts cannot desynchronize a socket. */
#ifndef GB_ZMQ_H
#define GB_ZMQ_H

#include "gb_wire.h"

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define GB_RID_MAX           255
#define GB_REQUEST_MAX_REPLY (64 << 20) /* the largest reply gb_request takes */

struct gb_curve_client;

/* One received message. For a ROUTER the first part is the peer's routing id
 * (rid); payload is the first part after it; parts counts the payload parts
 * (a well-formed gpubench message has exactly 1; extra parts are read and
 * dropped). */
typedef struct gb_frame {
    uint8_t rid[GB_RID_MAX];
    size_t rid_len;
    zmq_msg_t payload;
    int parts;
} gb_frame_t;

/* Receive one message without blocking. Returns 0 with f filled (close it
 * with gb_frame_close), or -1 with errno (EAGAIN when nothing is waiting). */
int gb_zmq_recv(void *sock, int router, gb_frame_t *f);
void gb_frame_close(gb_frame_t *f);

/* Serialize and send env as one frame, to routing id rid on a ROUTER (rid
 * non-NULL) or on a DEALER (rid NULL). 0, or -1 with errno. */
int gb_zmq_send(void *sock, const uint8_t *rid, size_t rid_len, Gb__Envelope *env);
/* Send a Reject{code, reason, ref_seq}. */
int gb_zmq_reject(void *sock, const uint8_t *rid, size_t rid_len, int code, const char *reason,
                  uint64_t ref_seq);

/* Printable form of a routing id for logs: the id itself when it is a
 * valid agent id, else hex. */
void gb_rid_str(const uint8_t *rid, size_t len, char *out, size_t outlen);

/* One request/reply round trip to a control endpoint: a fresh DEALER, the
 * request, a wait of at most timeout_ms for the reply, and the socket
 * closed again (so a coordinator restart between calls is harmless).
 * Returns 0 with the reply in *rep (gb_wire_free it); 1 when the reply is a
 * Reject (its reason in err, the envelope in *rep); -4 on a reply that is
 * not a valid envelope (reason in err, *rep NULL: asking again may get the
 * same); -1 on a timeout or a transport error (reason in err), and at
 * once, without the timeout, when the first connect finds nothing listening
 * (connection refused, no ipc socket file: "EP: nothing listens there
 * (...)"; a tcp host name that does not resolve, EAI_NONAME or EAI_FAIL,
 * not EAI_AGAIN: "EP: the host name does not resolve (HOST: ...)"); -3 on a
 * timeout where a coordinator may be listening (not refused, denied, an
 * unknown name, or a server that is not ZeroMQ): the request may have
 * arrived and its reply been lost. */
int gb_request(const char *endpoint, Gb__Envelope *req, int timeout_ms, Gb__Envelope **rep,
               char *err, size_t errlen);
/* gb_request over CURVE when curve is non-NULL (the coordinator's key is
 * pinned). A handshake the coordinator refuses (our key is not on its
 * list, or one side speaks CURVE and the other not) fails at once with the
 * reason in err instead of waiting for the timeout, and returns -2; so
 * does an ipc:// socket this user may not open (permission denied). */
int gb_request_ex(const char *endpoint, const struct gb_curve_client *curve, Gb__Envelope *req,
                  int timeout_ms, Gb__Envelope **rep, char *err, size_t errlen);

/* Read one event from a socket monitor (zmq_socket_monitor's PAIR) without
 * blocking: 0 with the event, its value and the endpoint (addrlen bytes),
 * or -1 when none is waiting. */
int gb_monitor_read(void *mon, uint16_t *event, uint32_t *value, char *addr, size_t addrlen);
/* A sentence on a failed handshake event (ZMQ_EVENT_HANDSHAKE_FAILED_*)
 * seen from a client: whether it has keys decides the advice. role is the
 * role in the coordinator's --authorized that lets us in besides none
 * ("agent" for an agent, "control" for a command; NULL: not said): a key
 * listed with the other endpoint's role is refused as an unlisted one is,
 * and ZAP tells the client only a status code. */
void gb_handshake_failure_str(uint16_t event, uint32_t value, int have_keys, const char *role,
                              char *out, size_t outlen);

/* 0 when endpoint's form is one gpubench can use; else -1 with why in err.
 * tcp://HOST:PORT or ipc://PATH (inproc:// reaches no other process).
 * Checks what libzmq lets through: a tcp:// port must be 0..65535 or '*'
 * (libzmq takes 99999 and uses 99999 - 65536). */
int gb_endpoint_check(const char *endpoint, char *err, size_t errlen);

/* A tcp:// endpoint's host name looked up within timeout_ms, for libzmq to
 * be given the address: its own lookup cannot be bounded, and for a DNS
 * server that never answers it held its I/O thread, and with it
 * zmq_ctx_term and the process's exit, 10 to 20 s. The lookup runs on
 * glibc's thread (getaddrinfo_a); one given up ends there and frees itself.
 * Returns 1 with the endpoint at the name's (first) address in out
 * (tcp://10.0.0.5:5555, tcp://[fd00::5]:5555); 0, out untouched, when there
 * is nothing to look up (an address already, '*', another transport, a
 * source;destination pair) or the lookup failed otherwise (libzmq's to
 * say); -1 when DNS or /etc/hosts says there is no such name; -3 when no
 * answer came in the time (DNS not answering is asked again every 250 ms
 * meanwhile); -4 when a signal came first. err (not on 1 or 0): "HOST: why"
 * ("coord: DNS gave no answer within 300 ms"), or "interrupted". */
int gb_endpoint_resolve(const char *endpoint, int timeout_ms, char *out, size_t outlen, char *err,
                        size_t errlen);

/* What listens at a tcp:// or ipc:// endpoint, seen from a plain socket
 * (the answer to "why did the ZeroMQ handshake fail, or never start"): */
typedef enum gb_probe {
    GB_PROBE_UNKNOWN,     /* could not tell (another transport, a timeout) */
    GB_PROBE_REFUSED,     /* nothing listens there (connection refused, no socket file) */
    GB_PROBE_DENIED,      /* an ipc socket this user may not open */
    GB_PROBE_SILENT,      /* it accepted the connection and said nothing within the time */
    GB_PROBE_CLOSED,      /* it accepted and closed the connection without a word */
    GB_PROBE_FOREIGN,     /* it spoke, and not ZeroMQ: what it said is in the text */
    GB_PROBE_ZMQ,         /* a ZeroMQ peer; its mechanism not seen */
    GB_PROBE_ZMQ_NULL,    /* a ZeroMQ peer with another mechanism than CURVE (NULL: no keys) */
    GB_PROBE_ZMQ_CURVE,   /* a ZeroMQ peer that requires CURVE */
    GB_PROBE_UNREACHABLE, /* no route: the network or host unreachable, down */
    GB_PROBE_NO_NAME      /* a tcp host name that does not resolve (said: which, why) */
} gb_probe_t;
/* Connect to endpoint with a plain socket, send a ZMTP 3.0 greeting with the
 * NULL mechanism, read the peer's greeting for at most timeout_ms, close
 * (a ZeroMQ peer is left before our mechanism reaches it).
 * said (saidlen bytes) gets a printable prefix of what a foreign peer sent
 * (its first line) or the mechanism of another ZeroMQ peer. */
gb_probe_t gb_zmq_probe(const char *endpoint, int timeout_ms, char *said, size_t saidlen);
/* A sentence for a probe's answer that explains a failure, or NULL when the
 * probe adds nothing to what the caller already says. */
const char *gb_probe_str(gb_probe_t p, const char *said, int have_keys, char *out, size_t outlen);

#endif
