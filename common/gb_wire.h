/* gb_wire.h - the wire rules: protocol version, limits, and the pure
 * functions that turn a received frame into a validated Envelope.
 *
 * Nothing that arrives on a socket is used before gb_wire_decode() accepted
 * it: size, decode, version, the presence of a body, and every field's range
 * (ids, enums, string lengths, list lengths). Decode and validation take no
 * sockets and keep no state, so tests and fuzzers call them on raw bytes.
 * The role check (which bodies an endpoint accepts) is the caller's. */
#ifndef GB_WIRE_H
#define GB_WIRE_H

#include "gpubench.pb-c.h"

#include <stddef.h>
#include <stdint.h>

#define GB_PROTOCOL_VERSION 1

/* Default largest frame an endpoint accepts (--max-frame). libzmq's
 * ZMQ_MAXMSGSIZE is set to GB_WIRE_HARD_FACTOR times it: a frame between the
 * two gets a Reject, a larger one makes libzmq drop the connection before
 * the frame is ever held in memory. */
#define GB_WIRE_MAX_FRAME   (1u << 20)
#define GB_WIRE_HARD_FACTOR 4

/* Field limits (bytes of a string, not counting the NUL; items of a list). */
#define GB_WIRE_ID_MAX      64  /* agent_id: [A-Za-z0-9._-] */
#define GB_WIRE_NAME_MAX    128 /* node name, sweep name */
#define GB_WIRE_LABEL_KEY   64
#define GB_WIRE_LABEL_VAL   128
#define GB_WIRE_LABELS_MAX  32
#define GB_WIRE_TEXT_MAX    256 /* inventory strings, GPU names */
#define GB_WIRE_GPUS_MAX    64
#define GB_WIRE_UNIX_MS_MAX 253402300799999ULL /* 9999-12-31T23:59:59.999Z */
#define GB_WIRE_KINDS_MAX   16
#define GB_WIRE_JOBREFS_MAX 4096 /* running or spooled job references */
#define GB_WIRE_PARAMS_MAX  (64u << 10)
#define GB_WIRE_RECORD_MAX  (512u << 10)
#define GB_WIRE_ERROR_MAX   4096
#define GB_WIRE_UNABLE_MAX  1024 /* Heartbeat.unable, NodeStatus.unable: one line */
#define GB_WIRE_TAIL_MAX    (16u << 10)
#define GB_WIRE_SPEC_MAX    (256u << 10)
#define GB_WIRE_ATTEMPT_MAX 1000
#define GB_WIRE_TIMEOUT_MAX (7u * 24 * 3600)
/* Hello and inventory fields. */
#define GB_WIRE_SLOTS_MAX        64   /* Hello.slots: jobs an agent runs at once */
#define GB_WIRE_KIND_MAX         32   /* a job kind's name (Inventory.kinds, JobAssign.kind) */
#define GB_WIRE_PCIE_PATH_MAX    32   /* Link.pcie_path */
#define GB_WIRE_NVLINK_LANES_MAX 1024 /* Link.nvlink_lanes */
#define GB_WIRE_PRECISIONS_MAX   4    /* Inventory.cpu_precisions */
#define GB_WIRE_PRECISION_MAX    8    /* one of them: "fp32" */
/* The largest frame of a Result the field limits allow (its record, error
 * and output tail, and 4 KiB for the rest): the agents endpoint accepts at
 * least this whatever --max-frame says, as the control endpoint accepts
 * the largest spec; a smaller limit refused a real result at every resend,
 * and its job never ended. */
#define GB_WIRE_RESULT_FRAME_MAX (GB_WIRE_RECORD_MAX + GB_WIRE_ERROR_MAX + GB_WIRE_TAIL_MAX + 4096)
/* Multi-node jobs (issue 5). */
#define GB_WIRE_NODES_MAX     1024 /* ranks (agents) of one job */
#define GB_WIRE_UNIQUE_ID_MAX 128  /* rendezvous id bytes: NCCL_UNIQUE_ID_BYTES */

/* Decode and validate one frame. Returns 0 and a new envelope in *out (free
 * with gb_wire_free), or a Gb__RejectCode (> 0) with a one-line reason in
 * why; *seq then holds the envelope's seq when it could be read, else 0. */
int gb_wire_decode(const void *buf, size_t len, size_t max_frame, Gb__Envelope **out, uint64_t *seq,
                   char *why, size_t whylen);
/* Range checks of a decoded envelope (what gb_wire_decode runs last):
 * 0 or a Gb__RejectCode with the reason in why. */
int gb_wire_validate(const Gb__Envelope *env, char *why, size_t whylen);
void gb_wire_free(Gb__Envelope **env);

/* Serialize env (its version is set to GB_PROTOCOL_VERSION) into a malloc'd
 * buffer; NULL on out-of-memory. */
uint8_t *gb_wire_pack(Gb__Envelope *env, size_t *len);

/* The name of a body case ("hello", "result", ...), for logs. */
const char *gb_wire_body_name(Gb__Envelope__BodyCase c);
/* The name of a reject code ("decode", "version", ...). */
const char *gb_wire_reject_name(int code);
/* 1 when code is a RejectCode this version knows (1..10, 70..72). */
int gb_wire_reject_code_ok(int code);

/* The bytes of a control character at p: 1 for C0 or DEL, 2 for a C1
 * control as UTF-8 (C2 80..9F), 0 for anything else (NUL included). */
size_t gb_wire_control_len(const char *p);
/* Each control character of s (as gb_wire_control_len counts them) made
 * '?', in place: a stored text that a line check refuses (a sweep's name
 * from before the spec refused C1) sent as one it takes. */
void gb_wire_line_clean(char *s);
/* 1 when s is min..max bytes with no control character (C0, DEL, or C1
 * as UTF-8): what names, models and labels on the wire must be. */
int gb_wire_line_ok(const char *s, size_t min, size_t max);
/* 1 when s is a valid agent id: 1..GB_WIRE_ID_MAX of [A-Za-z0-9._-]. */
int gb_wire_id_ok(const char *s);

#endif
