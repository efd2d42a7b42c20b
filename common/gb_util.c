/* gb_util.c - see gb_util.h. */
#define _DEFAULT_SOURCE
#include "gb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t gb_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t gb_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t gb_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gb_iso8601(int64_t unix_ms, char *buf, size_t len) {
    /* floor division: -1 ms is 1969-12-31T23:59:59.999Z, not ".-01" */
    int64_t ms = unix_ms % 1000, s = unix_ms / 1000;
    if (ms < 0) {
        ms += 1000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    char base[24];
    /* a year past 9999 (or before 0) has no 24-byte text: a fixed one, never
     * an unterminated buffer */
    if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999 ||
        strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "%s",
                 unix_ms < 0 ? "0000-01-01T00:00:00.000Z" : "9999-12-31T23:59:59.999Z");
        return;
    }
    snprintf(buf, len, "%s.%03dZ", base, (int)ms);
}

int gb_fmt(char *buf, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

int gb_copy(char *dst, size_t dstlen, const char *src) {
    return gb_fmt(dst, dstlen, "%s", src ? src : "");
}

static int read_stream(FILE *f, const char *path, size_t max, char **data, size_t *len, char *err,
                       size_t errlen);

int gb_read_file(const char *path, size_t max, char **data, size_t *len, char *err, size_t errlen) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        gb_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    return read_stream(f, path, max, data, len, err, errlen);
}

const char *gb_file_kind(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a pipe or FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a regular file";
}

int gb_same_path(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    if (strcmp(na ? na + 1 : a, nb ? nb + 1 : b) != 0) return 0;
    char da[4096], db[4096];
    if (gb_fmt(da, sizeof da, "%.*s", na ? (na == a ? 1 : (int)(na - a)) : 1, na ? a : ".") != 0 ||
        gb_fmt(db, sizeof db, "%.*s", nb ? (nb == b ? 1 : (int)(nb - b)) : 1, nb ? b : ".") != 0)
        return 0;
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int gb_open_regular(const char *path, struct stat *st, char *err, size_t errlen) {
    /* O_NONBLOCK: a FIFO must not hold the open until a writer comes */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        gb_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        gb_fmt(err, errlen, "%s is unreadable; give a regular file", path);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        gb_fmt(err, errlen, "%s is %s; give a regular file", path, gb_file_kind(st->st_mode));
        close(fd);
        return -1;
    }
    return fd;
}

int gb_read_fd(int fd, const char *path, size_t max, char **data, size_t *len, char *err,
               size_t errlen) {
    *data = NULL;
    *len = 0;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        gb_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return read_stream(f, path, max, data, len, err, errlen);
}

int gb_read_regular_file(const char *path, size_t max, char **data, size_t *len, char *err,
                         size_t errlen) {
    *data = NULL;
    *len = 0;
    struct stat st;
    int fd = gb_open_regular(path, &st, err, errlen);
    if (fd < 0) return -1;
    return gb_read_fd(fd, path, max, data, len, err, errlen);
}

static int read_stream(FILE *f, const char *path, size_t max, char **data, size_t *len, char *err,
                       size_t errlen) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) goto oom;
    for (;;) {
        if (n == cap) {
            if (cap > max) break;
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) goto oom;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        gb_fmt(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (n > max) {
        gb_fmt(err, errlen, "%s is larger than %zu bytes", path, max);
        goto fail;
    }
    fclose(f);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
oom:
    gb_fmt(err, errlen, "out of memory reading %s", path);
fail:
    free(buf);
    fclose(f);
    return -1;
}

static int fsync_dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int gb_trusted_owner(const struct stat *st) {
    return st->st_uid == geteuid() || st->st_uid == 0;
}

int gb_path_links_trusted(const char *path, char *err, size_t errlen) {
    /* walked a component at a time, each link followed where it points (a
     * link of ours to another user's link is that user's to point), up to
     * 40 links as the kernel allows */
    char done[4096], rest[8192], cand[4096 + 256], target[4096];
    if (path[0] == '/') {
        done[0] = '\0'; /* "" is "/" below */
    } else if (!getcwd(done, sizeof done)) {
        return 0; /* the open that follows says why */
    }
    if (gb_copy(rest, sizeof rest, path) != 0) {
        gb_fmt(err, errlen, "%.64s...: path too long", path);
        return -1;
    }
    int links = 0;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p) break;
        char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char comp[256];
        if (n >= sizeof comp) return 0; /* the open says ENAMETOOLONG */
        memcpy(comp, p, n);
        comp[n] = '\0';
        p += n;
        if (strcmp(comp, ".") == 0) continue;
        if (strcmp(comp, "..") == 0) { /* done has no link in it: its parent is lexical */
            char *last = strrchr(done, '/');
            if (last) *last = '\0';
            continue;
        }
        if (gb_fmt(cand, sizeof cand, "%s/%s", done, comp) != 0) return 0;
        struct stat st;
        if (lstat(cand, &st) != 0) return 0; /* the open that follows says why */
        if (!S_ISLNK(st.st_mode)) {
            gb_copy(done, sizeof done, cand);
            continue;
        }
        if (!gb_trusted_owner(&st)) {
            gb_fmt(err, errlen,
                   "%s: %s is a symbolic link that belongs to uid %u, not to this process's user "
                   "(uid %u) or root: its owner could point it at another file; give the path "
                   "without it",
                   path, cand, (unsigned)st.st_uid, (unsigned)geteuid());
            return -1;
        }
        if (++links > 40) {
            gb_fmt(err, errlen, "%s: more than 40 symbolic links on the way", path);
            return -1;
        }
        ssize_t tl = readlink(cand, target, sizeof target - 1);
        if (tl <= 0) return 0;
        target[tl] = '\0';
        /* the link's target, then what was left of the path */
        char next[8192];
        if (gb_fmt(next, sizeof next, "%s/%s", target, p) != 0) {
            gb_fmt(err, errlen, "%.64s...: path too long", path);
            return -1;
        }
        if (target[0] == '/') done[0] = '\0';
        gb_copy(rest, sizeof rest, next);
        p = rest;
    }
    return 0;
}

/* write(2) all of data, through EINTR and short writes */
static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int gb_create_new(const char *path, mode_t mode, char *err, size_t errlen) {
    /* O_EXCL: never an existing file (another user's, or one of ours a
     * reader holds open); O_NOFOLLOW: never through a link, dangling or not
     * (O_EXCL already refuses one; this says so on every system) */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 07777);
    if (fd < 0) {
        int e = errno; /* EEXIST: the caller tries another name */
        gb_fmt(err, errlen, "cannot create %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    /* the mode asked for, whatever the umask took from it */
    if (fchmod(fd, mode & 07777) != 0) {
        int e = errno;
        gb_fmt(err, errlen, "cannot chmod %s: %s", path, strerror(e));
        close(fd);
        unlink(path);
        errno = e;
        return -1;
    }
    return fd;
}

/* A new file PATH.tmp.RANDOM (16 hex digits: no one can plant a link or a
 * file at the name beforehand), its name in tmp; a name taken is tried
 * again with another. The ".tmp." is what the spool's start removes. */
static int create_temp(const char *path, mode_t mode, char *tmp, size_t tmplen, char *err,
                       size_t errlen) {
    for (int tries = 0; tries < 8; tries++) {
        char hex[17];
        if (gb_random_hex(hex, 8, err, errlen) != 0) return -1;
        if (gb_fmt(tmp, tmplen, "%s.tmp.%s", path, hex) != 0) {
            gb_fmt(err, errlen, "path too long: %s", path);
            return -1;
        }
        int fd = gb_create_new(tmp, mode, err, errlen);
        if (fd >= 0) return fd;
        if (errno != EEXIST) {
            /* said of the file asked for and its directory: the temporary
             * name is ours ("node.key.tmp.1f92...: No such file or
             * directory" for a directory that does not exist) */
            int e = errno;
            char *copy = strdup(path);
            const char *dir = copy ? dirname(copy) : ".";
            struct stat st;
            if ((e == ENOENT || e == ENOTDIR) && stat(dir, &st) != 0 && errno == ENOENT)
                gb_fmt(err, errlen, "cannot write %s: directory %s does not exist", path, dir);
            else if (e == ENOENT || e == ENOTDIR)
                gb_fmt(err, errlen, "cannot write %s: %s is not a directory", path, dir);
            else
                gb_fmt(err, errlen, "cannot write %s: %s (in directory %s)", path, strerror(e),
                       dir);
            free(copy);
            errno = e;
            return -1;
        }
    }
    return -1; /* err names the last name tried: it exists */
}

int gb_write_file_atomic_mode(const char *path, const void *data, size_t len, mode_t mode,
                              char *err, size_t errlen) {
    char tmp[4096];
    int fd = create_temp(path, mode, tmp, sizeof tmp, err, errlen);
    if (fd < 0) return -1;
    if (write_all(fd, data, len) != 0) {
        gb_fmt(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (fsync(fd) != 0) {
        gb_fmt(err, errlen, "cannot fsync %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        gb_fmt(err, errlen, "cannot close %s: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;
    /* rename replaces path itself: a link there is replaced, not followed */
    if (rename(tmp, path) != 0) {
        gb_fmt(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto fail;
    }
    if (fsync_dir_of(path) != 0) {
        gb_fmt(err, errlen, "cannot fsync the directory of %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

int gb_can_write_atomic(const char *path, char *err, size_t errlen) {
    /* the rename onto it must succeed too: a directory there is refused by
     * the rename, after the store was made */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        gb_fmt(err, errlen, "cannot write %s: it is %s", path, gb_file_kind(st.st_mode));
        return -1;
    }
    char tmp[4096];
    int fd = create_temp(path, 0600, tmp, sizeof tmp, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    unlink(tmp);
    return 0;
}

int gb_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    return gb_write_file_atomic_mode(path, data, len, 0600, err, errlen);
}

int gb_write_file_in_place(const char *path, const void *data, size_t len, char *err,
                           size_t errlen) {
    /* no O_TRUNC: truncating would free the blocks reserved for this */
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        gb_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (write_all(fd, data, len) != 0 || fstat(fd, &st) != 0 ||
        (S_ISREG(st.st_mode) && ftruncate(fd, (off_t)len) != 0)) {
        gb_fmt(err, errlen, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (close(fd) != 0) {
        gb_fmt(err, errlen, "cannot close %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

size_t gb_utf8_len(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    if (c < 0x80) return c ? 1 : 0;
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (!n) return 0; /* a continuation byte, C0/C1 (overlong), F5..FF */
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    unsigned c1 = p[1];
    if ((c == 0xe0 && c1 < 0xa0) || (c == 0xf0 && c1 < 0x90)) return 0; /* overlong */
    if (c == 0xed && c1 >= 0xa0) return 0;                              /* a surrogate */
    if (c == 0xf4 && c1 >= 0x90) return 0;                              /* beyond U+10FFFF */
    return n;
}

int gb_utf8_ok(const char *s) {
    for (size_t n; *s; s += n)
        if (!(n = gb_utf8_len(s))) return 0;
    return 1;
}

char *gb_utf8_fix(const char *s) {
    size_t len = strlen(s), o = 0;
    char *out = malloc(len * 3 + 1); /* each byte at worst U+FFFD (3 bytes) */
    if (!out) return NULL;
    while (*s) {
        size_t n = gb_utf8_len(s);
        if (n) {
            memcpy(out + o, s, n);
            o += n;
            s += n;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            s++;
        }
    }
    out[o] = '\0';
    return out;
}

int gb_json_code(const char *s, size_t len, size_t *i, int *in_str) {
    char ch = s[*i];
    if (*in_str) {
        if (ch == '\\' && *i + 1 < len)
            (*i)++;
        else if (ch == '"')
            *in_str = 0;
        return 0;
    }
    if (ch != '"') return 1;
    *in_str = 1;
    return 0;
}

const char *gb_tmpdir(void) {
    const char *dir = getenv("TMPDIR");
    return dir && dir[0] ? dir : "/tmp";
}

int gb_mkdir_p(const char *path, char *err, size_t errlen) {
    char buf[4096];
    if (gb_copy(buf, sizeof buf, path) != 0 || buf[0] == '\0') {
        gb_fmt(err, errlen, "bad directory path '%s'", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
                gb_fmt(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gb_fmt(err, errlen, "%s is not a directory", path);
        return -1;
    }
    return 0;
}

int gb_hex_encode(const unsigned char *in, size_t n, char *out, size_t outlen) {
    static const char digits[] = "0123456789abcdef";
    if (outlen < 2 * n + 1) return -1;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int gb_hex_decode(const char *in, size_t len, unsigned char *out, size_t max, size_t *n) {
    *n = 0;
    if (len % 2 != 0 || len / 2 > max) return -1;
    for (size_t i = 0; i < len; i += 2) {
        int hi = hexval(in[i]), lo = hexval(in[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    *n = len / 2;
    return 0;
}

int gb_random_hex(char *out, size_t n, char *err, size_t errlen) {
    unsigned char bytes[64];
    if (n > sizeof bytes) {
        gb_fmt(err, errlen, "at most %zu random bytes", sizeof bytes);
        return -1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(bytes + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            gb_fmt(err, errlen, "getrandom: %s", strerror(errno));
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", bytes[i]);
    out[2 * n] = '\0';
    return 0;
}

void gb_heap_keep(void) {
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
    (void)mallopt(M_TOP_PAD, 16 << 20);
    (void)mallopt(M_MMAP_THRESHOLD, 64 << 20);
}

int gb_env_ms(const char *name, int dflt, int max, int *ms, char *err, size_t errlen) {
    const char *e = getenv(name);
    *ms = dflt;
    if (!e || !e[0]) return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || end == e || *end || v < 1 || v > max) {
        snprintf(err, errlen, "%s=%.40s: a whole number of milliseconds, 1..%d (unset: %d)", name,
                 e, max, dflt);
        return -1;
    }
    *ms = (int)v;
    return 0;
}
