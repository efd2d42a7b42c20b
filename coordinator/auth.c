/* auth.c - see auth.h. */
#define _XOPEN_SOURCE 700 /* S_ISVTX */
#include "auth.h"

#include "gb_curve.h"
#include "gb_log.h"
#include "gb_util.h"
#include "map.h"
#include "ratelimit.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT  "inproc://zeromq.zap.01"
#define ZAP_MAX_PARTS 16
#define MAX_FILE      (16u << 20)

struct gb_auth {
    void *sock;
    char path[4096];
    gb_auth_entry_t *entries;
    size_t n;
    gb_map_t *by_key; /* key -> entry */
    /* refusal log limit: per address and key, and in all */
    gb_rate_t *per_peer;
    int64_t window_ms;
    int logged;
    unsigned long suppressed;
};

const char *gb_auth_role_name(gb_auth_role_t role) {
    return role == GB_AUTH_ROLE_AGENT ? "agent" : role == GB_AUTH_ROLE_CONTROL ? "control" : "any";
}

/* The endpoint a role is limited to, as its ZAP domain (NULL: both). */
static const char *role_domain(gb_auth_role_t role) {
    return role == GB_AUTH_ROLE_AGENT     ? GB_AUTH_AGENTS
           : role == GB_AUTH_ROLE_CONTROL ? GB_AUTH_CONTROL
                                          : NULL;
}

/* n bytes of a line, for an error: at most 24, a byte outside printable
 * ASCII as '?' (the error reaches a terminal and the log). */
static void shown_text(const char *s, size_t n, char *out, size_t outlen) {
    size_t o = 0;
    for (size_t i = 0; i < n && i < 24 && o + 1 < outlen; i++)
        out[o++] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
    if (n > 24 && o + 4 < outlen) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static int is_blank(char ch) {
    return ch == ' ' || ch == '\t';
}

/* Options before the key at text[*start..end), as OpenSSH's authorized_keys
 * has them: blank-separated NAME=VALUE tokens; only role=agent|control|any
 * is known. A token of 40 Z85 characters is the key: Z85 holds '=', but a
 * key is never shorter or longer, so no option is read as a key. Any other
 * token starting "role=" is a role; one with '=' shorter than OPTION_MAX an
 * unknown option; the rest is left to the key's own check (a key cut
 * short, which may hold '=', is said to be "not a public key").
 * 0 with *start moved to the key and the role in *role; -1 with err. */
#define OPTION_MAX 20
static int parse_options(const char *text, size_t *start, size_t end, size_t line_no,
                         gb_auth_role_t *role, char *err, size_t errlen) {
    int have_role = 0;
    char shown[32];
    for (;;) {
        size_t s = *start, tlen = 0;
        while (s + tlen < end && !is_blank(text[s + tlen]))
            tlen++;
        const char *eq = memchr(text + s, '=', tlen);
        if (tlen == GB_CURVE_Z85_LEN || !eq) return 0;
        size_t nlen = (size_t)(eq - (text + s)), vlen = tlen - nlen - 1;
        const char *val = eq + 1;
        int is_role = nlen == 4 && memcmp(text + s, "role", 4) == 0;
        if (!is_role && tlen >= OPTION_MAX) return 0;
        if (!is_role) {
            shown_text(text + s, tlen, shown, sizeof shown);
            gb_fmt(err, errlen,
                   "line %zu: unknown option '%s' before the key (the only one is role=agent, "
                   "role=control or role=any)",
                   line_no, shown);
            return -1;
        }
        if (have_role) {
            gb_fmt(err, errlen, "line %zu: more than one role", line_no);
            return -1;
        }
        if (vlen == 5 && memcmp(val, "agent", 5) == 0)
            *role = GB_AUTH_ROLE_AGENT;
        else if (vlen == 7 && memcmp(val, "control", 7) == 0)
            *role = GB_AUTH_ROLE_CONTROL;
        else if (vlen == 3 && memcmp(val, "any", 3) == 0)
            *role = GB_AUTH_ROLE_ANY;
        else {
            shown_text(val, vlen, shown, sizeof shown);
            gb_fmt(err, errlen,
                   "line %zu: unknown role '%s' (role=agent: the agents endpoint only, "
                   "role=control: the control endpoint only, role=any or none: both)",
                   line_no, shown);
            return -1;
        }
        have_role = 1;
        s += tlen;
        while (s < end && is_blank(text[s]))
            s++;
        if (s == end || text[s] == '#') {
            gb_fmt(err, errlen, "line %zu: role=%s but no key after it", line_no,
                   gb_auth_role_name(*role));
            return -1;
        }
        *start = s;
    }
}

int gb_auth_parse(const char *text, size_t len, gb_auth_entry_t **out, size_t *n, char *err,
                  size_t errlen) {
    *out = NULL;
    *n = 0;
    gb_auth_entry_t *v = NULL;
    size_t cap = 0, count = 0, line_no = 0;
    size_t i = 0;
    gb_map_t *keys = gb_map_new();
    if (!keys) {
        gb_fmt(err, errlen, "out of memory");
        return -1;
    }
    while (i < len) {
        size_t start = i;
        while (i < len && text[i] != '\n')
            i++;
        size_t end = i;
        if (i < len) i++; /* the newline */
        line_no++;
        /* trim */
        while (start < end && (text[start] == ' ' || text[start] == '\t'))
            start++;
        while (end > start &&
               (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r'))
            end--;
        if (start == end || text[start] == '#') continue;
        gb_auth_role_t role = GB_AUTH_ROLE_ANY;
        if (parse_options(text, &start, end, line_no, &role, err, errlen) != 0) goto fail;
        size_t klen = 0;
        while (start + klen < end && text[start + klen] != ' ' && text[start + klen] != '\t')
            klen++;
        char key[GB_CURVE_Z85_LEN + 1];
        if (klen != GB_CURVE_Z85_LEN) goto bad;
        memcpy(key, text + start, klen);
        key[klen] = '\0';
        if (!gb_curve_key_ok(key)) goto bad;
        size_t ns = start + klen;
        while (ns < end && (text[ns] == ' ' || text[ns] == '\t'))
            ns++;
        /* "KEY name  # note": '#' after a blank starts a comment there too
         * (the key itself may hold '#', a Z85 character) */
        for (size_t k = ns; k < end; k++)
            if (text[k] == '#' && (k == ns || text[k - 1] == ' ' || text[k - 1] == '\t')) {
                end = k;
                while (end > ns && (text[end - 1] == ' ' || text[end - 1] == '\t'))
                    end--;
                break;
            }
        if (end - ns >= sizeof v[0].name) {
            gb_fmt(err, errlen, "line %zu: the name after the key is longer than %zu bytes",
                   line_no, sizeof v[0].name - 1);
            goto fail;
        }
        for (size_t k = ns; k < end; k++) {
            if ((unsigned char)text[k] < 0x20 || text[k] == 0x7f) {
                gb_fmt(err, errlen, "line %zu: a control character in the name", line_no);
                goto fail;
            }
            /* "KEY node-a role=agent" would name the key "node-a role=agent"
             * and let it use both endpoints: said, not taken as a name */
            if ((k == ns || is_blank(text[k - 1])) && end - k >= 5 &&
                memcmp(text + k, "role=", 5) == 0) {
                gb_fmt(err, errlen,
                       "line %zu: a role after the key: it goes before the key "
                       "(role=agent KEY name)",
                       line_no);
                goto fail;
            }
        }
        if (count == GB_AUTH_MAX_KEYS) {
            gb_fmt(err, errlen, "more than %d keys", GB_AUTH_MAX_KEYS);
            goto fail;
        }
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            gb_auth_entry_t *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                gb_fmt(err, errlen, "out of memory");
                goto fail;
            }
            v = nv;
            cap = ncap;
        }
        /* a set of the keys so far, valued by entry number + 1 (a loop over
         * every earlier key took 15-20 s for 100,000 keys, on each SIGHUP) */
        uintptr_t seen = (uintptr_t)gb_map_get(keys, key, GB_CURVE_Z85_LEN);
        if (seen) {
            gb_fmt(err, errlen, "line %zu: the key of entry %zu again (%s)%s", line_no,
                   (size_t)seen, v[seen - 1].name[0] ? v[seen - 1].name : "no name",
                   v[seen - 1].role != role
                       ? ": one line without a role lets a key use both endpoints"
                       : "");
            goto fail;
        }
        if (gb_map_put(keys, key, GB_CURVE_Z85_LEN, (void *)(uintptr_t)(count + 1)) != 0) {
            gb_fmt(err, errlen, "out of memory");
            goto fail;
        }
        memcpy(v[count].key, key, sizeof key);
        memcpy(v[count].name, text + ns, end - ns);
        v[count].name[end - ns] = '\0';
        v[count].role = role;
        count++;
        continue;
    bad:
        gb_fmt(err, errlen,
               "line %zu: not a public key (40 Z85 characters, as in a NAME.pub file, "
               "optionally preceded by a role and followed by a name: [role=agent|control] KEY "
               "[NAME])",
               line_no);
        goto fail;
    }
    gb_map_destroy(&keys);
    *out = v;
    *n = count;
    return 0;
fail:
    gb_map_destroy(&keys);
    free(v);
    return -1;
}

/* Where the file open on fd really is (links resolved): from
 * /proc/self/fd, else realpath(path). 0, or -1 with errno set. */
static int real_path_of(int fd, const char *path, char *out, size_t outlen) {
    char proc[64];
    gb_fmt(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, out, outlen - 1);
    if (n > 0 && (size_t)n < outlen - 1 && out[0] == '/') {
        out[n] = '\0';
        return 0;
    }
    char buf[PATH_MAX];
    if (!realpath(path, buf)) return -1;
    if (gb_copy(out, outlen, buf) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* Whoever can replace a directory's entries can put another list in the
 * file's place: every directory from real (the list's real path) up to
 * "/" must belong to root or us, and be writable by nobody else unless it
 * is sticky (as /tmp: only a file's owner may rename or remove it there),
 * as OpenSSH's secure_filename asks of authorized_keys. shown names the
 * list in errors. */
static int check_dirs(const char *shown, const char *real, char *err, size_t errlen) {
    char dir[4096];
    if (gb_copy(dir, sizeof dir, real) != 0) {
        gb_fmt(err, errlen, "authorized keys %s: path too long", shown);
        return -1;
    }
    for (int depth = 0;; depth++) {
        char *slash = strrchr(dir, '/');
        if (!slash) return 0; /* real paths are absolute */
        if (slash == dir) {
            if (dir[1] == '\0') return 0; /* "/" was checked */
            dir[1] = '\0';
        } else {
            *slash = '\0';
        }
        const char *which = depth == 0 ? "its directory" : "the directory";
        const char *where = depth == 0 ? "" : " above it";
        struct stat st;
        if (lstat(dir, &st) != 0) {
            gb_fmt(err, errlen, "authorized keys %s: cannot check %s %s%s: %s", shown, which, dir,
                   where, strerror(errno));
            return -1;
        }
        if (!gb_trusted_owner(&st)) {
            gb_fmt(err, errlen,
                   "authorized keys %s: %s %s%s belongs to uid %u, not to this process's user "
                   "(uid %u) or root: its owner could put another list in its place; chown it, "
                   "or move the list",
                   shown, which, dir, where, (unsigned)st.st_uid, (unsigned)geteuid());
            return -1;
        }
        if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
            gb_fmt(err, errlen,
                   "authorized keys %s: %s %s%s can be written by %s (mode %03o): anyone who "
                   "can could put another list in its place; chmod go-w it, or move the list",
                   shown, which, dir, where, (st.st_mode & 002) ? "anyone" : "its group",
                   (unsigned)(st.st_mode & 0777));
            return -1;
        }
    }
}

/* Swap in the list read from self->path. */
static int load(gb_auth_t *self, char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    char why[512];
    /* opened once, and every check made on what was opened: a stat of the
     * path, then an open of it, read whatever was put there meanwhile */
    struct stat st;
    int fd = gb_open_regular(self->path, &st, why, sizeof why);
    if (fd < 0) {
        gb_fmt(err, errlen, "authorized keys: %s", why);
        return -1;
    }
    /* whoever can write the list can let any key in */
    if (st.st_mode & 022) {
        gb_fmt(err, errlen,
               "authorized keys %s can be written by %s (mode %03o): anyone who can could let a "
               "key in; chmod go-w it",
               self->path, (st.st_mode & 002) ? "anyone" : "its group",
               (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    /* ... and so can its owner (who can chmod it) */
    if (!gb_trusted_owner(&st)) {
        gb_fmt(err, errlen,
               "authorized keys %s belongs to uid %u, not to this process's user (uid %u) or "
               "root: its owner could let a key in; chown it",
               self->path, (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    /* ... and so can whoever may replace it: the directories the file
     * really is in (a link's target's, not the link's), all the way up */
    char real[4096], shown[sizeof real + sizeof self->path + 16];
    if (real_path_of(fd, self->path, real, sizeof real) != 0) {
        gb_fmt(err, errlen, "authorized keys %s: cannot tell which directory it is in: %s",
               self->path, strerror(errno));
        close(fd);
        return -1;
    }
    struct stat lst;
    if (lstat(self->path, &lst) == 0 && S_ISLNK(lst.st_mode))
        gb_fmt(shown, sizeof shown, "%s (a link to %s)", self->path, real);
    else
        gb_copy(shown, sizeof shown, self->path);
    if (check_dirs(shown, real, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    if (gb_read_fd(fd, self->path, MAX_FILE, &text, &len, why, sizeof why) != 0) {
        gb_fmt(err, errlen, "authorized keys: %s", why);
        return -1;
    }
    gb_auth_entry_t *v = NULL;
    size_t n = 0;
    int rc = gb_auth_parse(text, len, &v, &n, why, sizeof why);
    free(text);
    if (rc != 0) {
        gb_fmt(err, errlen, "authorized keys %s: %s", self->path, why);
        return -1;
    }
    gb_map_t *m = gb_map_new();
    for (size_t i = 0; m && i < n; i++)
        if (gb_map_put(m, v[i].key, GB_CURVE_Z85_LEN, &v[i]) != 0) gb_map_destroy(&m);
    if (!m) {
        free(v);
        gb_fmt(err, errlen, "out of memory");
        return -1;
    }
    gb_map_destroy(&self->by_key);
    free(self->entries);
    self->by_key = m;
    self->entries = v;
    self->n = n;
    return 0;
}

gb_auth_t *gb_auth_new(void *ctx, const char *path, char *err, size_t errlen) {
    gb_auth_t *self = calloc(1, sizeof *self);
    if (!self) {
        gb_fmt(err, errlen, "out of memory");
        return NULL;
    }
    if (gb_copy(self->path, sizeof self->path, path) != 0) {
        gb_fmt(err, errlen, "authorized keys: path too long");
        goto err;
    }
    if (load(self, err, errlen) != 0) goto err;
    self->per_peer = gb_rate_new(1.0 / GB_AUTH_REPEAT_S, 1, 4096);
    self->sock = zmq_socket(ctx, ZMQ_REP);
    int zero = 0;
    if (!self->sock || zmq_setsockopt(self->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(self->sock, ZAP_ENDPOINT) != 0) {
        gb_fmt(err, errlen, "cannot bind the ZAP handler at %s: %s", ZAP_ENDPOINT,
               zmq_strerror(errno));
        goto err;
    }
    return self;
err:
    gb_auth_destroy(&self);
    return NULL;
}

void gb_auth_destroy(gb_auth_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_auth_t *self = *self_p;
    if (self->sock) zmq_close(self->sock);
    gb_rate_destroy(&self->per_peer);
    gb_map_destroy(&self->by_key);
    free(self->entries);
    free(self);
    *self_p = NULL;
}

void *gb_auth_socket(gb_auth_t *self) {
    return self->sock;
}

int gb_auth_reload(gb_auth_t *self, char *err, size_t errlen) {
    return load(self, err, errlen);
}

static const gb_auth_entry_t *entry_of(const gb_auth_t *self, const char *key) {
    return key && strlen(key) == GB_CURVE_Z85_LEN ? gb_map_get(self->by_key, key, GB_CURVE_Z85_LEN)
                                                  : NULL;
}

int gb_auth_allowed(const gb_auth_t *self, const char *key) {
    return entry_of(self, key) != NULL;
}

int gb_auth_allowed_on(const gb_auth_t *self, const char *key, const char *domain) {
    const gb_auth_entry_t *e = entry_of(self, key);
    if (!e) return 0;
    const char *only = role_domain(e->role);
    return !only || (domain && strcmp(domain, only) == 0);
}

void gb_auth_why_not(const gb_auth_t *self, const char *key, const char *domain, const char *where,
                     char *out, size_t outlen) {
    const gb_auth_entry_t *e = entry_of(self, key);
    if (!e) {
        gb_fmt(out, outlen, "key %s is not in %s", key ? key : "(none)", where);
        return;
    }
    if (gb_auth_allowed_on(self, key, domain)) {
        if (outlen) out[0] = '\0';
        return;
    }
    gb_fmt(out, outlen, "key %s%s%s%s may use only the %s endpoint (role=%s in %s)", key,
           e->name[0] ? " (" : "", e->name, e->name[0] ? ")" : "", role_domain(e->role),
           gb_auth_role_name(e->role), where);
}

const char *gb_auth_name(const gb_auth_t *self, const char *key) {
    const gb_auth_entry_t *e = entry_of(self, key);
    return e ? e->name : "";
}

size_t gb_auth_count(const gb_auth_t *self) {
    return self->n;
}

const char *gb_auth_path(const gb_auth_t *self) {
    return self->path;
}

/* Copy a frame as text (escaped by the logger later). */
static void part_str(zmq_msg_t *m, char *out, size_t outlen) {
    size_t n = zmq_msg_size(m) < outlen - 1 ? zmq_msg_size(m) : outlen - 1;
    memcpy(out, zmq_msg_data(m), n);
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0') out[i] = '?';
}

static void log_refusal(gb_auth_t *self, const char *domain, const char *addr, const char *what) {
    int64_t now = gb_mono_ms(), retry;
    /* an ipc peer's address is libzmq's "localhost:UID:GID:PID": every
     * command is a new pid, so the peer is its user (and said in words) */
    unsigned uid, gid;
    long pid;
    char who[160], shown[200];
    gb_copy(who, sizeof who, addr);
    gb_copy(shown, sizeof shown, addr[0] ? addr : "an unknown address");
    if (sscanf(addr, "localhost:%u:%u:%ld", &uid, &gid, &pid) == 3) {
        gb_fmt(who, sizeof who, "ipc uid %u gid %u", uid, gid);
        gb_fmt(shown, sizeof shown, "a local process (ipc: uid %u, gid %u, pid %ld)", uid, gid,
               pid);
    }
    /* a refused peer retries at every reconnect: one line per peer and
     * reason every GB_AUTH_REPEAT_S */
    char peer[300];
    gb_fmt(peer, sizeof peer, "%s|%s|%s", domain, who, what);
    if (self->per_peer && !gb_rate_take(self->per_peer, peer, strlen(peer), now, &retry)) {
        self->suppressed++;
        return;
    }
    if (now - self->window_ms >= 1000) {
        if (self->suppressed)
            gb_warn("auth: %lu more refused handshake(s) not logged", self->suppressed);
        self->window_ms = now;
        self->logged = 0;
        self->suppressed = 0;
    }
    if (self->logged >= GB_AUTH_LOG_PER_S) {
        self->suppressed++;
        return;
    }
    self->logged++;
    gb_warn("auth: refused a handshake on the %s endpoint from %s: %s", domain[0] ? domain : "?",
            shown, what);
}

static void send_str(void *s, const char *text, int more) {
    zmq_send(s, text, strlen(text), more ? ZMQ_SNDMORE : 0);
}

void gb_auth_serve(gb_auth_t *self) {
    for (int round = 0; round < 1000; round++) {
        zmq_msg_t part[ZAP_MAX_PARTS];
        int n = 0, more = 1;
        zmq_msg_init(&part[0]);
        if (zmq_msg_recv(&part[0], self->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part[0]);
            return;
        }
        n = 1;
        more = zmq_msg_more(&part[0]);
        while (more) { /* the rest of a message is already here */
            zmq_msg_t extra;
            zmq_msg_t *m = n < ZAP_MAX_PARTS ? &part[n] : &extra;
            zmq_msg_init(m);
            if (zmq_msg_recv(m, self->sock, 0) < 0) {
                zmq_msg_close(m);
                break;
            }
            more = zmq_msg_more(m);
            if (m == &extra)
                zmq_msg_close(m);
            else
                n++;
        }
        char version[8] = "", domain[32] = "", addr[128] = "", mech[16] = "", key[41] = "";
        if (n >= 1) part_str(&part[0], version, sizeof version);
        if (n >= 3) part_str(&part[2], domain, sizeof domain);
        if (n >= 4) part_str(&part[3], addr, sizeof addr);
        if (n >= 6) part_str(&part[5], mech, sizeof mech);
        const char *status = "400", *text = "not allowed";
        if (n != 7 || strcmp(version, "1.0") != 0 || strcmp(mech, "CURVE") != 0 ||
            zmq_msg_size(&part[6]) != 32) {
            status = "400";
            text = "only CURVE clients with a listed key are admitted";
            log_refusal(self, domain, addr, mech[0] ? mech : "not a CURVE handshake");
        } else if (!zmq_z85_encode(key, zmq_msg_data(&part[6]), 32)) {
            status = "500";
            text = "cannot read the key";
        } else if (!gb_auth_allowed_on(self, key, domain)) {
            /* not listed, or listed with a role for the other endpoint */
            char what[512];
            gb_auth_why_not(self, key, domain, self->path, what, sizeof what);
            log_refusal(self, domain, addr, what);
        } else {
            status = "200";
            text = "OK";
            gb_debug("auth: admitted %s (%s) on the %s endpoint from %s", key,
                     gb_auth_name(self, key), domain, addr);
        }
        /* reply: version, request id, status code, status text, user id, metadata */
        send_str(self->sock, "1.0", 1);
        if (n >= 2)
            zmq_send(self->sock, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
        else
            send_str(self->sock, "", 1);
        send_str(self->sock, status, 1);
        send_str(self->sock, text, 1);
        send_str(self->sock, strcmp(status, "200") == 0 ? key : "", 1);
        send_str(self->sock, "", 0);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&part[i]);
    }
}
