/* gb_curve.c - see gb_curve.h. */
#define _POSIX_C_SOURCE 200809L
#include "gb_curve.h"

#include "gb_util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_KEY_FILE 4096

int gb_curve_available(void) {
    return zmq_has("curve");
}

int gb_curve_key_ok(const char *s) {
    if (!s || strlen(s) != GB_CURVE_Z85_LEN) return 0;
    uint8_t bin[32];
    return zmq_z85_decode(bin, s) != NULL;
}

/* Copy a 40-character key that starts at p (ends at space, quote or end). */
static int take_key(const char *p, char *out) {
    while (*p == ' ' || *p == '\t' || *p == '"')
        p++;
    size_t n = 0;
    while (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != '"' && p[n] != '\r' && p[n] != '\n')
        n++;
    if (n != GB_CURVE_Z85_LEN) return -1;
    char tmp[GB_CURVE_Z85_LEN + 1];
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    if (!gb_curve_key_ok(tmp)) return -1;
    memcpy(out, tmp, n + 1);
    return 0;
}

/* "name = KEY" on one line: the key after '=', or -1. */
static int field(const char *line, const char *name, char *out) {
    size_t n = strlen(name);
    while (*line == ' ' || *line == '\t')
        line++;
    if (strncmp(line, name, n) != 0) return 1; /* not this field */
    line += n;
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line != '=') return 1;
    return take_key(line + 1, out);
}

int gb_curve_read_pair(const char *path, char *pub, char *sec, char *err, size_t errlen) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        gb_fmt(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    /* a link's owner can point it at another key file whenever they like
     * (at any root key, whose owner and mode pass the checks below): the
     * file's own link, and a directory's on the way (it was only the file's) */
    if (gb_path_links_trusted(path, err, errlen) != 0) return -1;
    size_t pl = strlen(path);
    int is_pub = pl > 4 && strcmp(path + pl - 4, ".pub") == 0;
    if (is_pub) {
        /* by what it holds, not its name: a key pair called NAME.pub is one */
        char seen[GB_CURVE_Z85_LEN + 1], why[256];
        int has_secret = 0;
        (void)gb_curve_read_public(path, seen, &has_secret, why, sizeof why);
        is_pub = !has_secret;
    }
    if (is_pub) {
        /* the mode check would say "chmod 600 it", which cannot help */
        gb_fmt(err, errlen,
               "%s is a public key; --key wants the key pair, NAME.key (its .pub goes in the "
               "other side's --authorized or --server-key)",
               path);
        return -1;
    }
    /* opened once: what is checked is what is read (a stat of the path,
     * then an open of it, read whatever had been put there meanwhile) */
    int fd = gb_open_regular(path, &st, err, errlen);
    if (fd < 0) return -1;
    if (st.st_mode & 077) {
        gb_fmt(err, errlen,
               "%s can be %s by %s (mode %03o): a secret key must be its owner's "
               "alone; chmod 600 it",
               path,
               (st.st_mode & 044) && (st.st_mode & 022) ? "read and written"
               : (st.st_mode & 044)                     ? "read"
               : (st.st_mode & 022)                     ? "written"
                                                        : "used",
               (st.st_mode & 007) ? "others" : "its group", (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    /* its owner could change it under us (and chmod it back) */
    if (!gb_trusted_owner(&st)) {
        gb_fmt(err, errlen,
               "%s belongs to uid %u, not to this process's user (uid %u) or root: its owner "
               "could put another key in it; chown it",
               path, (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    if (gb_read_fd(fd, path, MAX_KEY_FILE, &text, &len, err, errlen) != 0) return -1;
    /* exactly what keygen writes: comments, one public-key and one
     * secret-key line; anything else means the file is not what it seems */
    int have_pub = 0, have_sec = 0, bad = 0, bare = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[strspn(line, " \t\r")] == '#' || line[strspn(line, " \t\r")] == '\0') continue;
        int r = field(line, "public-key", pub);
        if (r == 0) {
            bad |= have_pub++ > 0;
            continue;
        }
        if (r < 0) {
            bad = 1;
            continue;
        }
        r = field(line, "secret-key", sec);
        if (r == 0) {
            bad |= have_sec++ > 0;
            continue;
        }
        bad = 1; /* an unknown line, or a key that is not 40 Z85 characters */
        char tmp[GB_CURVE_Z85_LEN + 1];
        bare += take_key(line, tmp) == 0;
    }
    memset(text, 0, len);
    free(text);
    if (!have_sec && (bare == 1 || have_pub)) {
        gb_fmt(err, errlen,
               "%s is a public key; --key wants the key pair, NAME.key (its .pub goes in the "
               "other side's --authorized or --server-key)",
               path);
        return -1;
    }
    if (bad || !have_pub || !have_sec) {
        gb_fmt(err, errlen,
               "%s is not a gpubench key file (want one 'public-key = ...' and one "
               "'secret-key = ...' line of 40 Z85 characters and comments, nothing else; make "
               "one with 'gpubench keygen')",
               path);
        return -1;
    }
    char derived[GB_CURVE_Z85_LEN + 1];
    if (zmq_curve_public(derived, sec) != 0 || strcmp(derived, pub) != 0) {
        gb_fmt(err, errlen, "%s: the public key is not the one its secret key makes", path);
        return -1;
    }
    return 0;
}

/* The public key in text (len bytes, freed here), as gb_curve_read_public. */
static int parse_public(const char *path, char *text, size_t len, char *pub, int *has_secret,
                        char *err, size_t errlen) {
    /* the whole file: keygen writes the public key before the secret one,
     * and a NAME.key given here must be seen for what it is */
    int found = -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *p = line + strspn(line, " \t\r");
        if (*p == '#' || *p == '\0') continue;
        if (strncmp(p, "secret-key", 10) == 0) {
            if (has_secret) *has_secret = 1;
            continue;
        }
        if (found != 0 && (field(p, "public-key", pub) == 0 || take_key(p, pub) == 0)) found = 0;
    }
    memset(text, 0, len);
    free(text);
    if (found != 0)
        gb_fmt(err, errlen, "%s holds no public key (40 Z85 characters on a line)", path);
    return found;
}

int gb_curve_read_pin(const char *path, char *pub, int *has_secret, char *err, size_t errlen) {
    if (has_secret) *has_secret = 0;
    if (gb_path_links_trusted(path, err, errlen) != 0) return -1;
    /* opened once: what is checked is what is read */
    struct stat st;
    int fd = gb_open_regular(path, &st, err, errlen);
    if (fd < 0) return -1;
    /* whoever can write it chooses the coordinator this side trusts: its
     * owner (a service account's public file is fine: that account runs
     * the coordinator), our own group (a umask of 002 makes files group
     * writable for the user's private group), nobody else */
    if (st.st_mode & 002) {
        gb_fmt(err, errlen,
               "%s can be written by anyone (mode %03o): anyone could put another "
               "coordinator's key in it; chmod o-w it",
               path, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    if ((st.st_mode & 020) && st.st_gid != getegid()) {
        gb_fmt(err, errlen,
               "%s can be written by its group, gid %u, not this process's (gid %u; mode %03o): "
               "its members could put another coordinator's key in it; chmod g-w it",
               path, (unsigned)st.st_gid, (unsigned)getegid(), (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    if (gb_read_fd(fd, path, MAX_KEY_FILE, &text, &len, err, errlen) != 0) return -1;
    return parse_public(path, text, len, pub, has_secret, err, errlen);
}

int gb_curve_read_public(const char *path, char *pub, int *has_secret, char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    if (has_secret) *has_secret = 0;
    if (gb_read_regular_file(path, MAX_KEY_FILE, &text, &len, err, errlen) != 0) return -1;
    return parse_public(path, text, len, pub, has_secret, err, errlen);
}

int gb_curve_keygen(const char *prefix, int force, char *pub, char *err, size_t errlen) {
    if (!gb_curve_available()) {
        gb_fmt(err, errlen, "this libzmq was built without CURVE");
        return -1;
    }
    char key_path[4096], pub_path[4096];
    if (gb_fmt(key_path, sizeof key_path, "%s.key", prefix) != 0 ||
        gb_fmt(pub_path, sizeof pub_path, "%s.pub", prefix) != 0) {
        gb_fmt(err, errlen, "name too long");
        return -1;
    }
    struct stat st;
    /* lstat: a link, dangling or not, is there too */
    if (!force && (lstat(key_path, &st) == 0 || lstat(pub_path, &st) == 0)) {
        gb_fmt(err, errlen, "%s or %s exists (--force replaces them)", key_path, pub_path);
        return -1;
    }
    /* --force replaces our own files only (a link is replaced, not
     * followed: the writes rename over it): in a shared directory one
     * another user owns is that user's, or planted there for us */
    const char *const paths[] = {key_path, pub_path};
    for (int i = 0; i < 2; i++) {
        if (lstat(paths[i], &st) == 0 && st.st_uid != geteuid()) {
            gb_fmt(err, errlen,
                   "%s belongs to uid %u, not to this process's user (uid %u): not replaced; "
                   "remove it or choose another NAME",
                   paths[i], (unsigned)st.st_uid, (unsigned)geteuid());
            return -1;
        }
    }
    char sec[GB_CURVE_Z85_LEN + 1];
    if (zmq_curve_keypair(pub, sec) != 0) {
        gb_fmt(err, errlen, "zmq_curve_keypair: %s", zmq_strerror(errno));
        return -1;
    }
    char text[512];
    gb_fmt(text, sizeof text,
           "# gpubench CURVE key pair (gpubench keygen). The secret key is the\n"
           "# node's identity: keep this file private (mode 0600).\n"
           "public-key = %s\n"
           "secret-key = %s\n",
           pub, sec);
    /* a new file of mode 0600 under a random name, renamed into place:
     * nothing planted in the directory is written through or taken over */
    int rc = gb_write_file_atomic(key_path, text, strlen(text), err, errlen);
    memset(text, 0, sizeof text);
    memset(sec, 0, sizeof sec);
    if (rc != 0) return -1;
    char line[GB_CURVE_Z85_LEN + 2];
    gb_fmt(line, sizeof line, "%s\n", pub);
    /* 0644 from its creation: a chmod by name after the rename would
     * follow a link put there in between */
    return gb_write_file_atomic_mode(pub_path, line, strlen(line), 0644, err, errlen);
}

int gb_curve_client_load(gb_curve_client_t *c, const char *key_path, const char *server_key_path,
                         char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!key_path || !server_key_path) {
        gb_fmt(err, errlen, "CURVE needs both --key and --server-key");
        return -1;
    }
    if (!gb_curve_available()) {
        gb_fmt(err, errlen, "this libzmq was built without CURVE");
        return -1;
    }
    if (gb_curve_read_pair(key_path, c->public_key, c->secret_key, err, errlen) != 0) return -1;
    /* the pin chooses which coordinator this side trusts: whoever can change
     * it can put their own key there */
    int has_secret = 0;
    if (gb_curve_read_pin(server_key_path, c->server_key, &has_secret, err, errlen) != 0) return -1;
    if (has_secret) {
        /* the coordinator's secret key is the fleet's identity: it belongs
         * on the coordinator alone, not on every node and laptop */
        gb_fmt(err, errlen,
               "%s holds a secret key: --server-key wants the coordinator's public key, its "
               "NAME.pub (keep NAME.key on the coordinator alone)",
               server_key_path);
        return -1;
    }
    return 0;
}

int gb_curve_client_apply(void *sock, const gb_curve_client_t *c, char *err, size_t errlen) {
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, c->server_key, GB_CURVE_Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, c->public_key, GB_CURVE_Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->secret_key, GB_CURVE_Z85_LEN) != 0) {
        gb_fmt(err, errlen, "cannot set CURVE keys: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

int gb_curve_server_apply(void *sock, const char *sec, char *err, size_t errlen) {
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, GB_CURVE_Z85_LEN) != 0) {
        gb_fmt(err, errlen, "cannot make a CURVE server: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}
