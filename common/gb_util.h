/* gb_util.h - small helpers both daemons share: clocks, bounded string
 * copies, whole-file reads, atomic file writes and random ids.
 *
 * Every function returns 0 on success and -1 on failure with a one-line
 * reason in err (errlen bytes, always NUL-terminated), unless it says
 * otherwise. None of them exits or logs. */
#ifndef GB_UTIL_H
#define GB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Keep freed heap memory in the process (glibc: no trimming of the heap top,
 * large blocks from the heap rather than their own mappings) for a
 * long-running daemon whose allocations come and go every message: on VMs
 * where a page's first touch costs ~10 us, giving memory back and taking it
 * again cost the coordinator ~9% of its time (brk and page faults under
 * SQLite's per-statement allocations). */
void gb_heap_keep(void);

/* Milliseconds on CLOCK_MONOTONIC (for timers and intervals). */
int64_t gb_mono_ms(void);
/* Microseconds on CLOCK_MONOTONIC (for timing what the daemons do). */
int64_t gb_mono_us(void);
/* Unix time in milliseconds (for timestamps that are stored or shown). */
int64_t gb_wall_ms(void);
/* "2024-05-01T12:00:00.123Z" for a Unix time in ms; buf needs 25 bytes. */
void gb_iso8601(int64_t unix_ms, char *buf, size_t len);

/* snprintf that reports truncation: 0 when everything fit, -1 otherwise
 * (buf then holds the truncated text). */
int gb_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copy src into dst (dstlen bytes); -1 when it did not fit (dst truncated). */
int gb_copy(char *dst, size_t dstlen, const char *src);

/* Read a whole file into a malloc'd, NUL-terminated buffer (*len excludes
 * the NUL). Fails when the file is larger than max bytes. The caller frees. */
int gb_read_file(const char *path, size_t max, char **data, size_t *len, char *err, size_t errlen);
/* gb_read_file for a file that must be a regular one (keys, lists): a FIFO,
 * socket, directory or device is refused at once, without waiting on it. */
int gb_read_regular_file(const char *path, size_t max, char **data, size_t *len, char *err,
                         size_t errlen);
/* Does st belong to this process's user or to root? A key or list anyone
 * else owns can be changed under us (its owner can chmod it back). */
struct stat;
int gb_trusted_owner(const struct stat *st);
/* Every symbolic link on path as given (a directory on the way, as
 * evil/dir/NAME.key, or the file itself) belongs to this process's user or
 * root: a link's owner can point it at another file whenever they like (at
 * any root key or list, whose owner and mode pass every other check). 0, or
 * -1 with err naming the link and its owner. */
int gb_path_links_trusted(const char *path, char *err, size_t errlen);
/* Open path once for reading (O_CLOEXEC, and O_NONBLOCK so that a FIFO
 * does not wait for a writer) and fstat it into *st: the fd, or -1 with
 * err set when it cannot be opened or is not a regular file. Checks made
 * on *st hold for what is read from the fd, whatever the path names by
 * then (a stat of the path, then an open of it, was a race). */
int gb_open_regular(const char *path, struct stat *st, char *err, size_t errlen);
/* gb_read_file for an fd (from gb_open_regular): reads it to its end, at
 * most max bytes, naming it path in errors; closes fd in every case. */
int gb_read_fd(int fd, const char *path, size_t max, char **data, size_t *len, char *err,
               size_t errlen);
/* "a directory", "a pipe or FIFO", ... for messages about what a path is. */
const char *gb_file_kind(mode_t m);
/* Do two paths name one file, whether or not it exists yet? The same inode
 * when both exist; else the same directory (by inode: "./x", "/abs/x" and
 * "sub/../x" are one) and the same name. */
int gb_same_path(const char *a, const char *b);
/* Create path as a new file with exactly mode (fchmod: the umask takes
 * nothing) and open it for writing: never an existing file, never through
 * a symbolic link (O_EXCL | O_NOFOLLOW). The descriptor, or -1 with errno
 * set (EEXIST where something is there) and err said. */
int gb_create_new(const char *path, mode_t mode, char *err, size_t errlen);
/* Write data to path atomically and durably, the file of mode 0600: a new
 * temporary file next to it under a random name (PATH.tmp.HEX, made with
 * gb_create_new, so a file or link another user planted in a shared
 * directory is never written through or taken over), fsync, rename over
 * path (a link at path is replaced, not followed), fsync of the
 * directory. A reader sees the old file or the new one, never a part.
 * When the temporary file cannot be made, err names path and its
 * directory ("directory D does not exist"), not the temporary name. */
int gb_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* gb_write_file_atomic for a file of another mode (0644 for a public key):
 * the mode is the new file's from its creation on. */
int gb_write_file_atomic_mode(const char *path, const void *data, size_t len, mode_t mode,
                              char *err, size_t errlen);
/* 0 when gb_write_file_atomic could make its temporary file beside path
 * now (one is made and removed); else -1, err as gb_write_file_atomic's:
 * for a file written later, checked before anything else is made. */
int gb_can_write_atomic(const char *path, char *err, size_t errlen);
/* Write data over the start of path (created if missing), then cut the
 * file to len: blocks reserved for it beforehand (fallocate, see the
 * agent's runner) are written into, so this needs no free space where they
 * cover it. Not atomic: for a file read only once its writer has exited.
 * A path that is not a regular file (a pipe, /dev/stdout) is written only. */
int gb_write_file_in_place(const char *path, const void *data, size_t len, char *err,
                           size_t errlen);
/* The bytes of the UTF-8 character at p (1..4); 0 at the end (NUL) and
 * where p does not start a valid one: a stray continuation byte, an
 * overlong form, a surrogate (U+D800..DFFF), beyond U+10FFFF, cut short. */
size_t gb_utf8_len(const char *p);
/* 1 when s is valid UTF-8 throughout. */
int gb_utf8_ok(const char *s);
/* A copy of s (malloc) with each byte that does not start a valid UTF-8
 * character replaced by U+FFFD: text for JSON. NULL when out of memory. */
char *gb_utf8_fix(const char *s);
/* For a scan of JSON text byte by byte: 1 when s[*i] is outside every
 * string (and is not a string's quote); inside one, *in_str is kept and an
 * escaped character skipped (*i advanced past it). */
int gb_json_code(const char *s, size_t len, size_t *i, int *in_str);
/* Where temporary and rescued files go: $TMPDIR when set and not empty,
 * else /tmp. */
const char *gb_tmpdir(void);
/* mkdir -p with mode 0700 for the directories it creates. */
int gb_mkdir_p(const char *path, char *err, size_t errlen);
/* n random bytes from the kernel (getrandom), written as 2n hex characters
 * into out (2n+1 bytes). */
int gb_random_hex(char *out, size_t n, char *err, size_t errlen);

/* Lowercase hex of n bytes into out (2n + 1 bytes needed); -1 if too small. */
int gb_hex_encode(const unsigned char *in, size_t n, char *out, size_t outlen);
/* Decode len hex characters (either case) into out (at most max bytes);
 * -1 on an odd length, a non-hex character or too many bytes. */
int gb_hex_decode(const char *in, size_t len, unsigned char *out, size_t max, size_t *n);
/* $name as a whole number of milliseconds, 1..max; *ms = dflt when it is
 * unset or empty. -1 with "NAME=value: a whole number of milliseconds,
 * 1..max (unset: dflt)" otherwise. */
int gb_env_ms(const char *name, int dflt, int max, int *ms, char *err, size_t errlen);

#endif
