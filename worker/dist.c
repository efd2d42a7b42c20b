/* dist.c - see dist.h. */
#define _POSIX_C_SOURCE 200809L
#include "dist.h"

#include "gb_rdv.h"
#include "gb_util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int write_all(int fd, const char *buf, size_t len, char *err, size_t errlen) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            gb_fmt(err, errlen, "rendezvous channel to the agent: %s",
                   n < 0 ? strerror(errno) : "closed");
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int publish_id(gb_dist_t *d, const unsigned char *id, size_t len, char *err, size_t errlen) {
    gb_dist_chan_t *ch = d->ctx;
    if (d->rank != 0) {
        gb_fmt(err, errlen, "only rank 0 publishes the unique id (this is rank %d)", d->rank);
        return -1;
    }
    if (ch->published || ch->waited) {
        gb_fmt(err, errlen, "the unique id is published once, before wait_start");
        return -1;
    }
    if (len < 1 || len > GB_DIST_ID_MAX) {
        gb_fmt(err, errlen, "a unique id is 1..%d bytes (got %zu)", GB_DIST_ID_MAX, len);
        return -1;
    }
    gb_rdv_msg_t m = {.kind = GB_RDV_ID, .id_len = len};
    memcpy(m.id, id, len);
    char line[GB_RDV_LINE_MAX + 1];
    if (gb_rdv_format(&m, line, sizeof line) != 0 ||
        write_all(ch->fd, line, strlen(line), err, errlen) != 0)
        return -1;
    memcpy(d->unique_id, id, len);
    d->unique_id_len = len;
    ch->published = 1;
    return 0;
}

static int wait_start(gb_dist_t *d, char *err, size_t errlen) {
    gb_dist_chan_t *ch = d->ctx;
    if (ch->waited) {
        gb_fmt(err, errlen, "wait_start is called once");
        return -1;
    }
    if (d->rank == 0 && !ch->published) {
        gb_fmt(err, errlen, "rank 0 must publish the unique id before it waits to start");
        return -1;
    }
    ch->waited = 1;
    if (write_all(ch->fd, "ready\n", 6, err, errlen) != 0) return -1;
    gb_rdv_reader_t rd = {.len = 0};
    char line[GB_RDV_LINE_MAX + 1];
    gb_rdv_msg_t m;
    for (;;) {
        int rc = gb_rdv_read_line(&rd, ch->fd, line);
        if (rc < 0) {
            gb_fmt(err, errlen, "the agent closed the rendezvous channel before the start");
            return -1;
        }
        if (rc == 0) continue; /* a blocking descriptor: not reached */
        if (gb_rdv_parse(line, strlen(line), &m, err, errlen) != 0) return -1;
        if (m.kind == GB_RDV_START) break;
        gb_fmt(err, errlen, "rendezvous: expected the start, got '%.40s'", line);
        return -1;
    }
    d->start_at_ms = m.start_ms;
    struct timespec at = {(time_t)(m.start_ms / 1000), (long)(m.start_ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) == EINTR) {
    }
    d->started_at_ms = gb_wall_ms();
    return 0;
}

static int get_int(const cJSON *o, const char *key, int min, int max, int *out, char *err,
                   size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= min && v->valuedouble <= max) ||
        v->valuedouble != (double)(int)v->valuedouble) {
        gb_fmt(err, errlen, "job file: dist.%s must be an integer in %d..%d", key, min, max);
        return -1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

int gb_dist_from_json(const cJSON *dist, int devices, gb_dist_t *d, gb_dist_chan_t *ch, char *err,
                      size_t errlen) {
    memset(d, 0, sizeof *d);
    memset(ch, 0, sizeof *ch);
    ch->fd = -1;
    if (!cJSON_IsObject(dist)) {
        gb_fmt(err, errlen, "job file: 'dist' must be an object");
        return -1;
    }
    if (get_int(dist, "n_nodes", 2, 1024, &d->n_nodes, err, errlen) ||
        get_int(dist, "rank", 0, d->n_nodes - 1, &d->rank, err, errlen) ||
        get_int(dist, "world_size", 2, 1 << 20, &d->world_size, err, errlen) ||
        get_int(dist, "fd", 0, 65535, &ch->fd, err, errlen))
        return -1;
    if (d->world_size != d->n_nodes * devices) {
        gb_fmt(err, errlen, "job file: dist.world_size %d is not n_nodes %d x %d device(s)",
               d->world_size, d->n_nodes, devices);
        return -1;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(dist, "unique_id");
    if (d->rank > 0) {
        if (!cJSON_IsString(id) ||
            gb_hex_decode(id->valuestring, strlen(id->valuestring), d->unique_id,
                          sizeof d->unique_id, &d->unique_id_len) != 0 ||
            d->unique_id_len == 0) {
            gb_fmt(err, errlen, "job file: rank %d has no unique id of 1..%d bytes (hex)", d->rank,
                   GB_DIST_ID_MAX);
            return -1;
        }
    } else if (id) {
        gb_fmt(err, errlen, "job file: rank 0 makes the unique id and is given none");
        return -1;
    }
    if (fcntl(ch->fd, F_GETFD) < 0) {
        gb_fmt(err, errlen, "job file: dist.fd %d is not an open descriptor (%s)", ch->fd,
               strerror(errno));
        return -1;
    }
    d->publish_id = publish_id;
    d->wait_start = wait_start;
    d->ctx = ch;
    return 0;
}

void gb_dist_record(const gb_dist_t *d, cJSON *rec) {
    cJSON *o = cJSON_AddObjectToObject(rec, "dist");
    if (!o) return;
    char hex[2 * GB_DIST_ID_MAX + 1] = "";
    gb_hex_encode(d->unique_id, d->unique_id_len, hex, sizeof hex);
    cJSON_AddNumberToObject(o, "rank", d->rank);
    cJSON_AddNumberToObject(o, "n_nodes", d->n_nodes);
    cJSON_AddNumberToObject(o, "world_size", d->world_size);
    cJSON_AddStringToObject(o, "unique_id", hex);
    cJSON_AddNumberToObject(o, "start_at_ms", (double)d->start_at_ms);
    cJSON_AddNumberToObject(o, "started_at_ms", (double)d->started_at_ms);
    cJSON_AddNumberToObject(o, "late_ms", (double)(d->started_at_ms - d->start_at_ms));
}

/* ---- the sleep kind's id ------------------------------------------------- */

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64-bit offset basis and prime */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put_be(unsigned char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)(v & 0xff);
}

static uint64_t get_be(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

#define SLEEP_MAGIC "GBSLEEP1"

int gb_sleep_id_make(uint64_t job_id, uint32_t attempt, unsigned char *id, char *err,
                     size_t errlen) {
    char hex[33];
    size_t n = 0;
    memcpy(id, SLEEP_MAGIC, 8);
    put_be(id + 8, job_id, 8);
    put_be(id + 16, attempt, 4);
    if (gb_random_hex(hex, 16, err, errlen) != 0 || gb_hex_decode(hex, 32, id + 20, 16, &n) != 0)
        return -1;
    put_be(id + 36, fnv1a(id, 36), 8);
    return 0;
}

int gb_sleep_id_check(const unsigned char *id, size_t len, uint64_t job_id, uint32_t attempt,
                      char *err, size_t errlen) {
    if (len != GB_SLEEP_ID_LEN || memcmp(id, SLEEP_MAGIC, 8) != 0) {
        gb_fmt(err, errlen, "the unique id (%zu bytes) is not a sleep job's id", len);
        return -1;
    }
    if (get_be(id + 36, 8) != fnv1a(id, 36)) {
        gb_fmt(err, errlen, "the unique id's checksum does not match: it was damaged");
        return -1;
    }
    uint64_t j = get_be(id + 8, 8);
    uint32_t a = (uint32_t)get_be(id + 16, 4);
    if (j != job_id || a != attempt) {
        gb_fmt(err, errlen,
               "the unique id is rank 0's of job %llu attempt %u, not of this job %llu attempt %u",
               (unsigned long long)j, a, (unsigned long long)job_id, attempt);
        return -1;
    }
    return 0;
}
