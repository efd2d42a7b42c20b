/* gb_log.h - one-line log records on stderr for the daemons and tools.
 *
 * A record is "2024-05-01T12:00:00.123Z coord  warn  message" and is written
 * with one fprintf, so lines from several threads (gpubench run hosts a
 * coordinator and an agent in one process) never interleave. The component
 * name ("coord", "agent", "worker", "cli") is per thread. Nothing is ever
 * written to stdout: stdout belongs to command output. */
#ifndef GB_LOG_H
#define GB_LOG_H

#include <stddef.h>

typedef enum { GB_LOG_DEBUG = 0, GB_LOG_INFO, GB_LOG_WARN, GB_LOG_ERROR } gb_log_level_t;

/* Process-wide threshold; records below it are dropped. Default INFO, or the
 * level named by $GB_LOG_LEVEL (debug|info|warn|error) at the first record. */
void gb_log_set_level(gb_log_level_t level);
/* Parse "debug" "info" "warn" "error"; -1 when unknown. */
int gb_log_level_parse(const char *s, gb_log_level_t *out);
/* Component name for records written by the calling thread (copied, at most
 * 15 characters). */
void gb_log_set_component(const char *name);

/* Copy in to out (outlen bytes, always terminated, cut short when it does
 * not fit) with every control character (bytes below 0x20, 0x7f, and C1
 * controls as UTF-8, C2 80..9F) written as \xHH: the result is a line
 * gb_wire_line_ok accepts. gb_log does this to each record: peers' text
 * cannot start a new log line or send terminal escapes. */
void gb_log_escape(const char *in, char *out, size_t outlen);

void gb_log(gb_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line without its end is on stderr (a progress line redrawn in place
 * with \r): open 1 once written (under flockfile(stderr), with it), 0 once
 * ended. While one is open the next record first ends it with a newline,
 * so that no record is glued to the progress text. Process-wide: gpubench
 * run's daemon threads log while its progress line is shown. */
void gb_log_partial_line(int open);
/* End an open partial line (a newline; nothing when none is open), before
 * a message written to stderr outside gb_log. */
void gb_log_end_partial_line(void);

#define gb_debug(...) gb_log(GB_LOG_DEBUG, __VA_ARGS__)
#define gb_info(...)  gb_log(GB_LOG_INFO, __VA_ARGS__)
#define gb_warn(...)  gb_log(GB_LOG_WARN, __VA_ARGS__)
#define gb_error(...) gb_log(GB_LOG_ERROR, __VA_ARGS__)

#endif
