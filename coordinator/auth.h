/* auth.h - the coordinator's allow-list of CURVE public keys and the ZAP
 * handler that enforces it.
 *
 * libzmq asks a ZAP handler (RFC 27, a socket bound at
 * inproc://zeromq.zap.01 in the same context) about every CURVE handshake,
 * but only when one is bound: a CURVE server without a handler admits any
 * client that knows the server's public key. gb_auth binds that handler and
 * answers 200 only for keys listed in the authorized file, 400 otherwise;
 * the User-Id of an admitted connection is its public key in Z85, so every
 * message it sends can be checked again against the current list (a key
 * removed by a reload is refused from its next message on, not only on its
 * next connection).
 *
 * The authorized file: one key a line (40 Z85 characters, as in a NAME.pub
 * file), optionally followed by a name for the logs, and optionally
 * preceded by a role, as OpenSSH's authorized_keys puts options before the
 * key: "role=agent KEY node-a" may use only the agents endpoint,
 * "role=control KEY alice" only the control endpoint; no role (or
 * role=any) is both. '#' starts a comment; blank lines are ignored. A file
 * with a bad line (an unknown role or option among them) is refused whole
 * (on a reload the previous list stays in force).
 *
 * The handler socket lives in the coordinator's reactor: poll
 * gb_auth_socket() and call gb_auth_serve() when it is readable. It must be
 * created before the CURVE sockets bind. Refusals are logged with the peer's
 * address and the endpoint's ZAP domain ("agents" or "control"), one line
 * per peer and reason every GB_AUTH_REPEAT_S seconds (a refused peer retries
 * at every reconnect) and at most GB_AUTH_LOG_PER_S lines a second; the rest
 * are counted and reported. */
#ifndef GB_COORD_AUTH_H
#define GB_COORD_AUTH_H

#include <stddef.h>

#define GB_AUTH_MAX_KEYS  100000
#define GB_AUTH_LOG_PER_S 20
#define GB_AUTH_REPEAT_S  30 /* the same peer refused for the same reason: one line in this */

/* The ZAP domains of the coordinator's endpoints (ZMQ_ZAP_DOMAIN on each
 * CURVE socket): what a role is checked against. */
#define GB_AUTH_AGENTS  "agents"
#define GB_AUTH_CONTROL "control"

typedef struct gb_auth gb_auth_t;

typedef enum gb_auth_role {
    GB_AUTH_ROLE_ANY = 0, /* no role, or role=any: both endpoints */
    GB_AUTH_ROLE_AGENT,   /* role=agent: the agents endpoint only */
    GB_AUTH_ROLE_CONTROL, /* role=control: the control endpoint only */
} gb_auth_role_t;

typedef struct gb_auth_entry {
    char key[41];        /* Z85 */
    char name[64];       /* the rest of its line, trimmed; may be "" */
    gb_auth_role_t role; /* given before the key; GB_AUTH_ROLE_ANY when none */
} gb_auth_entry_t;

/* Parse an authorized file's text (len bytes, need not be NUL-terminated):
 * 0 with a malloc'd array of its entries in *out (free it; NULL when there
 * are none) and their number in *n, or -1 with the line number and reason
 * in err. At most GB_AUTH_MAX_KEYS entries. Pure; fuzzed. */
int gb_auth_parse(const char *text, size_t len, gb_auth_entry_t **out, size_t *n, char *err,
                  size_t errlen);

/* Load path and bind the ZAP handler in ctx. NULL with a reason. */
gb_auth_t *gb_auth_new(void *ctx, const char *path, char *err, size_t errlen);
void gb_auth_destroy(gb_auth_t **self_p);

/* The handler's socket, for zmq_poll. */
void *gb_auth_socket(gb_auth_t *self);
/* Answer every ZAP request waiting (never blocks). */
void gb_auth_serve(gb_auth_t *self);

/* Read the file again; the new list applies to handshakes from now on and
 * to gb_auth_allowed. On failure (reason in err) the old list stays. */
int gb_auth_reload(gb_auth_t *self, char *err, size_t errlen);

/* 1 when key (Z85) is on the current list, whatever its role. */
int gb_auth_allowed(const gb_auth_t *self, const char *key);
/* 1 when key is on the current list and its role lets it use the endpoint
 * of ZAP domain GB_AUTH_AGENTS or GB_AUTH_CONTROL (any other domain admits
 * only keys without a role). */
int gb_auth_allowed_on(const gb_auth_t *self, const char *key, const char *domain);
/* Why key may not use domain's endpoint, for a log line or a Reject:
 * "key K is not in PATH", or "key K (NAME) may use only the agents endpoint
 * (role=agent in PATH)"; where (PATH above) names the list. "" when it may. */
void gb_auth_why_not(const gb_auth_t *self, const char *key, const char *domain, const char *where,
                     char *out, size_t outlen);
/* "agent", "control" or "any". */
const char *gb_auth_role_name(gb_auth_role_t role);
/* The name given on key's line, or "" (for logs). */
const char *gb_auth_name(const gb_auth_t *self, const char *key);
size_t gb_auth_count(const gb_auth_t *self);
const char *gb_auth_path(const gb_auth_t *self);

#endif
