/* gb_curve.h - CURVE keys for the control plane: making a key pair
 * (`gpubench keygen`), reading key files, and setting a ZeroMQ socket up as
 * a CURVE client or server.
 *
 * Files (docs/security.md):
 *   NAME.key  mode 0600, the pair:   "public-key = <Z85>" and "secret-key = <Z85>"
 *             lines ('#' comments allowed); read only when it is not
 *             readable by group or others, and only when the public key
 *             is the one the secret key makes;
 *   NAME.pub  the public key alone, Z85 (40 characters) on one line.
 * A key in Z85 is 40 characters of the Z85 alphabet (32 bytes). Functions
 * return 0, or -1 with a one-line reason in err; none of them logs. */
#ifndef GB_CURVE_H
#define GB_CURVE_H

#include <stddef.h>

#define GB_CURVE_Z85_LEN 40 /* characters of a key in Z85 */

/* What a CURVE client (an agent, a command) holds: its own pair and the
 * public key of the coordinator it pins. */
typedef struct gb_curve_client {
    char public_key[GB_CURVE_Z85_LEN + 1];
    char secret_key[GB_CURVE_Z85_LEN + 1];
    char server_key[GB_CURVE_Z85_LEN + 1];
} gb_curve_client_t;

/* 1 when libzmq was built with CURVE. */
int gb_curve_available(void);
/* 1 when s is exactly a 40-character Z85 key. */
int gb_curve_key_ok(const char *s);

/* Make a key pair: PREFIX.key (0600, refused when it exists unless force)
 * and PREFIX.pub. The public key in Z85 is copied to pub (41 bytes). */
int gb_curve_keygen(const char *prefix, int force, char *pub, char *err, size_t errlen);

/* Read a NAME.key file: its pair, checked against each other. */
int gb_curve_read_pair(const char *path, char *pub, char *sec, char *err, size_t errlen);
/* Read a public key: a NAME.pub file, or the public half of a NAME.key
 * (*has_secret, when not NULL, says whether the file held a secret key). */
int gb_curve_read_public(const char *path, char *pub, int *has_secret, char *err, size_t errlen);
/* gb_curve_read_public for a --server-key file, which pins the
 * coordinator's key: a regular file that neither others nor a group other
 * than this process's can write, reached through no link another user
 * owns (gb_path_links_trusted), checked and read through one open. */
int gb_curve_read_pin(const char *path, char *pub, int *has_secret, char *err, size_t errlen);

/* Fill c from a NAME.key and the server's NAME.pub. */
int gb_curve_client_load(gb_curve_client_t *c, const char *key_path, const char *server_key_path,
                         char *err, size_t errlen);
/* Make sock a CURVE client of c (before it connects). */
int gb_curve_client_apply(void *sock, const gb_curve_client_t *c, char *err, size_t errlen);
/* Make sock a CURVE server with secret key sec (before it binds). */
int gb_curve_server_apply(void *sock, const char *sec, char *err, size_t errlen);

#endif
