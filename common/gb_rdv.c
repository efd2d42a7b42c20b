/* gb_rdv.c - see gb_rdv.h. */
#define _POSIX_C_SOURCE 200809L
#include "gb_rdv.h"

#include "gb_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gb_rdv_format(const gb_rdv_msg_t *m, char *line, size_t len) {
    char hex[2 * GB_RDV_ID_MAX + 1];
    switch (m->kind) {
    case GB_RDV_ID:
        if (m->id_len < 1 || m->id_len > GB_RDV_ID_MAX ||
            gb_hex_encode(m->id, m->id_len, hex, sizeof hex) != 0)
            return -1;
        return gb_fmt(line, len, "id %s\n", hex);
    case GB_RDV_READY:
        return gb_fmt(line, len, "ready\n");
    case GB_RDV_START:
        if (m->start_ms <= 0) return -1;
        return gb_fmt(line, len, "start %" PRId64 "\n", m->start_ms);
    default:
        return -1;
    }
}

int gb_rdv_parse(const char *line, size_t len, gb_rdv_msg_t *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (len == 5 && memcmp(line, "ready", 5) == 0) {
        m->kind = GB_RDV_READY;
        return 0;
    }
    if (len > 3 && memcmp(line, "id ", 3) == 0) {
        if (gb_hex_decode(line + 3, len - 3, m->id, sizeof m->id, &m->id_len) != 0 ||
            m->id_len == 0) {
            gb_fmt(err, errlen, "rendezvous: the id must be 1..%d bytes of hex", GB_RDV_ID_MAX);
            return -1;
        }
        m->kind = GB_RDV_ID;
        return 0;
    }
    if (len > 6 && memcmp(line, "start ", 6) == 0) {
        int64_t v = 0;
        for (size_t i = 6; i < len; i++) {
            if (line[i] < '0' || line[i] > '9' || v > (INT64_MAX - 9) / 10) {
                gb_fmt(err, errlen, "rendezvous: the start time must be a positive integer (ms)");
                return -1;
            }
            v = v * 10 + (line[i] - '0');
        }
        if (v <= 0) {
            gb_fmt(err, errlen, "rendezvous: the start time must be a positive integer (ms)");
            return -1;
        }
        m->kind = GB_RDV_START;
        m->start_ms = v;
        return 0;
    }
    gb_fmt(err, errlen, "rendezvous: unknown line '%.*s'", (int)(len < 40 ? len : 40), line);
    return -1;
}

gb_rdv_action_t gb_rdv_from_worker(gb_rdv_rank_t *st, const gb_rdv_msg_t *m) {
    if (m->kind == GB_RDV_ID && st->rank == 0 && !st->have_id && !st->ready) {
        st->have_id = 1;
        return GB_RDV_SEND_ID;
    }
    if (m->kind == GB_RDV_READY && !st->ready && (st->rank > 0 || st->have_id)) {
        st->ready = 1;
        return GB_RDV_SEND_READY;
    }
    return GB_RDV_VIOLATION;
}

int gb_rdv_read_line(gb_rdv_reader_t *r, int fd, char *out) {
    for (;;) {
        char *nl = memchr(r->buf, '\n', r->len);
        if (nl) {
            size_t n = (size_t)(nl - r->buf);
            memcpy(out, r->buf, n);
            out[n] = '\0';
            memmove(r->buf, nl + 1, r->len - n - 1);
            r->len -= n + 1;
            return 1;
        }
        if (r->len >= GB_RDV_LINE_MAX) return -1; /* no newline within a line's length */
        ssize_t got = read(fd, r->buf + r->len, GB_RDV_LINE_MAX - r->len);
        if (got > 0) {
            r->len += (size_t)got;
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (got < 0 && errno == EINTR) continue;
        return -1;
    }
}
