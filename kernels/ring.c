/* ring.c - see ring.h.
 *
 * Wire (all integers big-endian):
 *   hello (44 bytes): "GBR1", byte-order mark 0x01020304 in the sender's
 *     order, kind (1 join, 2 ring), 3 zero bytes, rank, n, listening port
 *     (u16), 2 zero bytes, listening IPv4 (0: use the address this
 *     connection came from), nonce[16]
 *   reply (8 bytes): "GBRW", status (0 ok, else why the hello was refused)
 *   table (rank 0 to each joined rank, 8 bytes per rank): IPv4, port, 0
 * then raw floats in host order on the ring connections.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* getifaddrs */
#include "ring.h"

#include "gb_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ID_MAGIC   "GBRING01"
#define HELLO_LEN  44
#define REPLY_LEN  8
#define ENTRY_LEN  8
#define BOM        0x01020304u
#define TMP_BYTES  (1u << 20) /* receive staging for reducing steps */
#define SEND_CHUNK (4u << 20)
#define HELLO_WAIT 5000 /* ms a fresh connection has to say hello */
#define RETRY_MS   50

enum { K_JOIN = 1, K_RING = 2 };
enum { ST_OK = 0, ST_NONCE, ST_RANK, ST_DUP, ST_SIZE, ST_ORDER, ST_KIND, ST_MAGIC };

static const char *status_text(uint32_t s) {
    switch (s) {
    case ST_OK:
        return "ok";
    case ST_NONCE:
        return "wrong nonce (not this job's id)";
    case ST_RANK:
        return "rank out of range";
    case ST_DUP:
        return "rank already joined";
    case ST_SIZE:
        return "different node count";
    case ST_ORDER:
        return "different byte order";
    case ST_KIND:
        return "unexpected connection kind";
    default:
        return "not a gpubench ring hello";
    }
}

typedef struct hello {
    uint32_t bom, kind, rank, n, ip;
    uint16_t port;
    unsigned char nonce[16];
} hello_t;

struct gb_ring {
    int rank, n, timeout_ms;
    int lfd;          /* listening socket; closed once the ring is up */
    uint32_t bind_ip; /* network order: INADDR_ANY or $GB_COMM_ADDR */
    uint32_t adv_ip;  /* network order: what rank 0 advertises */
    uint16_t port;    /* host order */
    unsigned char nonce[16];
    int next, prev;
    char next_name[96], prev_name[96];
    char *tmp;
};

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}
static uint16_t get16(const unsigned char *p) {
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void addr_text(uint32_t ip_net, uint16_t port, char *buf, size_t len) {
    char a[INET_ADDRSTRLEN] = "?";
    struct in_addr in = {.s_addr = ip_net};
    inet_ntop(AF_INET, &in, a, sizeof(a));
    snprintf(buf, len, "%s:%u", a, (unsigned)port);
}

static int set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void tune(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Wait for `events` on fd until the absolute deadline: 1 ready, 0 timed
 * out, -1 error (errno). */
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) return -1;
        if (rc > 0) return 1;
    }
}

/* 0, or -1 with the reason (who: the peer, for the message). */
static int send_all(int fd, const void *buf, size_t len, int64_t deadline, const char *who,
                    char *err, size_t errlen) {
    const char *p = buf;
    while (len > 0) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_fd(fd, POLLOUT, deadline);
            if (w > 0) continue;
            if (w == 0)
                snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s timed out", who);
            else
                snprintf(err, errlen, "tcp ring: %s %s", who, strerror(errno));
            return -1;
        }
        snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s closed the connection (%s)", who,
                 k < 0 ? strerror(errno) : "send returned 0");
        return -1;
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, int64_t deadline, const char *who, char *err,
                    size_t errlen) {
    char *p = buf;
    while (len > 0) {
        ssize_t k = recv(fd, p, len, 0);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
            continue;
        }
        if (k == 0) {
            snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s closed the connection", who);
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w > 0) continue;
            if (w == 0)
                snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s sent nothing in time", who);
            else
                snprintf(err, errlen, "tcp ring: %s %s", who, strerror(errno));
            return -1;
        }
        snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s closed the connection (%s)", who,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void hello_pack(const hello_t *h, unsigned char *b) {
    memset(b, 0, HELLO_LEN);
    memcpy(b, "GBR1", 4);
    memcpy(b + 4, &h->bom, 4); /* host order on purpose: the byte-order check */
    b[8] = (unsigned char)h->kind;
    put32(b + 12, h->rank);
    put32(b + 16, h->n);
    put16(b + 20, h->port);
    memcpy(b + 24, &h->ip, 4); /* network order already */
    memcpy(b + 28, h->nonce, 16);
}

static int hello_unpack(const unsigned char *b, hello_t *h) {
    if (memcmp(b, "GBR1", 4) != 0) return ST_MAGIC;
    memcpy(&h->bom, b + 4, 4);
    h->kind = b[8];
    h->rank = get32(b + 12);
    h->n = get32(b + 16);
    h->port = get16(b + 20);
    memcpy(&h->ip, b + 24, 4);
    memcpy(h->nonce, b + 28, 16);
    return h->bom == BOM ? ST_OK : ST_ORDER;
}

static int send_reply(int fd, uint32_t status, int64_t deadline, char *err, size_t errlen) {
    unsigned char b[REPLY_LEN];
    memcpy(b, "GBRW", 4);
    put32(b + 4, status);
    return send_all(fd, b, sizeof(b), deadline, "a joining peer", err, errlen);
}

static int recv_reply(int fd, int64_t deadline, const char *who, char *err, size_t errlen) {
    unsigned char b[REPLY_LEN];
    if (recv_all(fd, b, sizeof(b), deadline, who, err, errlen)) return -1;
    if (memcmp(b, "GBRW", 4) != 0) {
        snprintf(err, errlen, "tcp ring: %s is not a gpubench ring peer", who);
        return -1;
    }
    uint32_t s = get32(b + 4);
    if (s != ST_OK) {
        snprintf(err, errlen, "tcp ring: %s refused this rank: %s", who, status_text(s));
        return -1;
    }
    return 0;
}

/* The IPv4 address to advertise when bound to every interface. */
static uint32_t default_ip(void) {
    struct ifaddrs *ifs = NULL, *it;
    uint32_t ip = htonl(INADDR_LOOPBACK);
    if (getifaddrs(&ifs) != 0) return ip;
    for (it = ifs; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
        if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK)) continue;
        ip = ((struct sockaddr_in *)(void *)it->ifa_addr)->sin_addr.s_addr;
        break;
    }
    freeifaddrs(ifs);
    return ip;
}

gb_ring_t *gb_ring_new(int rank, int n, int timeout_ms, char *err, size_t errlen) {
    if (n < 2 || n > 1024 || rank < 0 || rank >= n || timeout_ms < 1) {
        snprintf(err, errlen, "tcp ring: rank %d of %d, timeout %d ms: out of range", rank, n,
                 timeout_ms);
        return NULL;
    }
    gb_ring_t *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->rank = rank;
    r->n = n;
    r->timeout_ms = timeout_ms;
    r->lfd = r->next = r->prev = -1;
    r->tmp = malloc(TMP_BYTES);
    if (!r->tmp) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const char *env = getenv("GB_COMM_ADDR");
    r->bind_ip = htonl(INADDR_ANY);
    if (env && env[0]) {
        struct in_addr a;
        if (inet_pton(AF_INET, env, &a) != 1) {
            snprintf(err, errlen, "tcp ring: GB_COMM_ADDR '%.60s' is not an IPv4 address", env);
            goto fail;
        }
        r->bind_ip = a.s_addr;
    }
    r->adv_ip = r->bind_ip == htonl(INADDR_ANY) ? default_ip() : r->bind_ip;
    r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (r->lfd < 0) {
        snprintf(err, errlen, "tcp ring: socket: %s", strerror(errno));
        goto fail;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = r->bind_ip};
    socklen_t sl = sizeof(sa);
    if (bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(r->lfd, 64) != 0 ||
        getsockname(r->lfd, (struct sockaddr *)&sa, &sl) != 0 || set_nonblock(r->lfd) != 0) {
        snprintf(err, errlen, "tcp ring: listen: %s", strerror(errno));
        goto fail;
    }
    r->port = ntohs(sa.sin_port);
    if (getrandom(r->nonce, sizeof(r->nonce), 0) != (ssize_t)sizeof(r->nonce)) {
        snprintf(err, errlen, "tcp ring: getrandom: %s", strerror(errno));
        goto fail;
    }
    return r;
fail:
    gb_ring_destroy(&r);
    return NULL;
}

void gb_ring_destroy(gb_ring_t **self_p) {
    if (!self_p || !*self_p) return;
    gb_ring_t *r = *self_p;
    if (r->lfd >= 0) close(r->lfd);
    if (r->next >= 0) close(r->next);
    if (r->prev >= 0) close(r->prev);
    free(r->tmp);
    free(r);
    *self_p = NULL;
}

int gb_ring_make_id(gb_ring_t *r, unsigned char *id, size_t *len, char *err, size_t errlen) {
    if (r->rank != 0) {
        snprintf(err, errlen, "tcp ring: only rank 0 makes the id (this is rank %d)", r->rank);
        return -1;
    }
    memcpy(id, ID_MAGIC, 8);
    memcpy(id + 8, r->nonce, 16);
    memcpy(id + 24, &r->adv_ip, 4);
    put16(id + 28, r->port);
    put32(id + 30, (uint32_t)r->n);
    *len = GB_RING_ID_LEN;
    return 0;
}

/* Non-blocking connect to ip:port, retried while refused, until deadline. */
static int tcp_connect(uint32_t ip, uint16_t port, int64_t deadline, const char *who, char *err,
                       size_t errlen) {
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || set_nonblock(fd) != 0) {
            snprintf(err, errlen, "tcp ring: socket: %s", strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_addr.s_addr = ip, .sin_port = htons(port)};
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = rc == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline);
            socklen_t l = sizeof(e);
            if (w <= 0)
                e = w == 0 ? ETIMEDOUT : errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0)
                e = errno;
        }
        if (e == 0) {
            tune(fd);
            return fd;
        }
        close(fd);
        if ((e == ECONNREFUSED || e == ECONNRESET) && now_ms() + RETRY_MS < deadline) {
            struct timespec ts = {0, RETRY_MS * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        snprintf(err, errlen, "tcp ring: cannot connect to %s: %s", who, strerror(e));
        return -1;
    }
}

/* Accept one connection on the listening socket before deadline and read
 * its hello. 0 with *fd and *h, 1 when a stranger was turned away (note
 * says who), -2 on timeout (a peer that never came), -1 on error. */
static int accept_hello(gb_ring_t *r, int64_t deadline, int *fd, hello_t *h, uint32_t *peer_ip,
                        char *note, size_t notelen, char *err, size_t errlen) {
    int w = wait_fd(r->lfd, POLLIN, deadline);
    if (w <= 0) {
        snprintf(err, errlen, "%s", w == 0 ? "timed out" : strerror(errno));
        return w == 0 ? -2 : -1;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int afd = accept(r->lfd, (struct sockaddr *)&sa, &sl);
    if (afd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
            return 1;
        snprintf(err, errlen, "accept: %s", strerror(errno));
        return -1;
    }
    (void)fcntl(afd, F_SETFD, FD_CLOEXEC);
    if (set_nonblock(afd) != 0) {
        close(afd);
        return 1;
    }
    tune(afd);
    char who[64], why[GB_ERR_LEN];
    addr_text(sa.sin_addr.s_addr, ntohs(sa.sin_port), who, sizeof(who));
    unsigned char b[HELLO_LEN];
    int64_t hd = now_ms() + HELLO_WAIT < deadline ? now_ms() + HELLO_WAIT : deadline;
    if (recv_all(afd, b, sizeof(b), hd, who, why, sizeof(why))) {
        snprintf(note, notelen, "a connection from %s said no hello", who);
        close(afd);
        return 1;
    }
    int st = hello_unpack(b, h);
    if (st == ST_OK && memcmp(h->nonce, r->nonce, 16) != 0) st = ST_NONCE;
    if (st == ST_OK && h->n != (uint32_t)r->n) st = ST_SIZE;
    if (st == ST_OK && h->rank >= (uint32_t)r->n) st = ST_RANK;
    if (st != ST_OK) {
        snprintf(note, notelen, "refused a connection from %s: %s", who, status_text((uint32_t)st));
        (void)send_reply(afd, (uint32_t)st, hd, why, sizeof(why));
        close(afd);
        return 1;
    }
    *fd = afd;
    *peer_ip = sa.sin_addr.s_addr;
    return 0;
}

static void ranks_missing(const int *have, int n, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int k = 1; k < n && o + 8 < len; k++)
        if (!have[k]) o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", k);
}

/* Rank 0: take every other rank's join, then send each the table. */
static int gather_joins(gb_ring_t *r, uint32_t *ips, uint16_t *ports, char *err, size_t errlen) {
    int n = r->n, rc = -1, joined = 0;
    int *fds = malloc((size_t)n * sizeof(int));
    int *have = calloc((size_t)n, sizeof(int));
    unsigned char *table = malloc((size_t)n * ENTRY_LEN);
    char note[256] = "", why[GB_ERR_LEN];
    if (!fds || !have || !table) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int k = 0; k < n; k++)
        fds[k] = -1;
    int64_t deadline = now_ms() + r->timeout_ms;
    while (joined < n - 1) {
        int fd = -1;
        hello_t h;
        uint32_t pip = 0;
        int a = accept_hello(r, deadline, &fd, &h, &pip, note, sizeof(note), why, sizeof(why));
        if (a < 0) {
            char miss[256];
            ranks_missing(have, n, miss, sizeof(miss));
            snprintf(err, errlen, "tcp ring: %srank 0 waited for rank(s) %s to join: %s%s%s",
                     a == -2 ? GB_PEER_GONE : "", miss, why, note[0] ? "; " : "", note);
            goto done;
        }
        if (a > 0) continue;
        uint32_t st = ST_OK;
        if (h.kind != K_JOIN)
            st = ST_KIND;
        else if (h.rank == 0 || have[h.rank])
            st = ST_DUP;
        if (st != ST_OK) {
            snprintf(note, sizeof(note), "refused rank %u: %s", h.rank, status_text(st));
            (void)send_reply(fd, st, deadline, why, sizeof(why));
            close(fd);
            continue;
        }
        if (send_reply(fd, ST_OK, deadline, why, sizeof(why))) {
            close(fd);
            continue;
        }
        have[h.rank] = 1;
        fds[h.rank] = fd;
        ips[h.rank] = h.ip ? h.ip : pip;
        ports[h.rank] = h.port;
        joined++;
    }
    ips[0] = r->adv_ip;
    ports[0] = r->port;
    for (int k = 0; k < n; k++) {
        memcpy(table + (size_t)k * ENTRY_LEN, &ips[k], 4);
        put16(table + (size_t)k * ENTRY_LEN + 4, ports[k]);
        put16(table + (size_t)k * ENTRY_LEN + 6, 0);
    }
    for (int k = 1; k < n; k++) {
        char who[32];
        snprintf(who, sizeof(who), "rank %d", k);
        if (send_all(fds[k], table, (size_t)n * ENTRY_LEN, deadline, who, err, errlen)) goto done;
    }
    rc = 0;
done:
    for (int k = 0; fds && k < n; k++)
        if (fds[k] >= 0) close(fds[k]);
    free(fds);
    free(have);
    free(table);
    return rc;
}

/* Rank > 0: join rank 0 and read the table. */
static int join(gb_ring_t *r, uint32_t ip0, uint16_t port0, uint32_t *ips, uint16_t *ports,
                char *err, size_t errlen) {
    char who[96], addr[64];
    addr_text(ip0, port0, addr, sizeof(addr));
    snprintf(who, sizeof(who), "rank 0 (%s)", addr);
    int64_t deadline = now_ms() + r->timeout_ms;
    int fd = tcp_connect(ip0, port0, deadline, who, err, errlen);
    if (fd < 0) return -1;
    hello_t h = {.bom = BOM,
                 .kind = K_JOIN,
                 .rank = (uint32_t)r->rank,
                 .n = (uint32_t)r->n,
                 .ip = r->bind_ip,
                 .port = r->port};
    memcpy(h.nonce, r->nonce, 16);
    unsigned char b[HELLO_LEN];
    hello_pack(&h, b);
    int rc = -1;
    unsigned char *table = malloc((size_t)r->n * ENTRY_LEN);
    if (!table) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (send_all(fd, b, sizeof(b), deadline, who, err, errlen) ||
        recv_reply(fd, deadline, who, err, errlen) ||
        recv_all(fd, table, (size_t)r->n * ENTRY_LEN, deadline, who, err, errlen))
        goto done;
    for (int k = 0; k < r->n; k++) {
        memcpy(&ips[k], table + (size_t)k * ENTRY_LEN, 4);
        ports[k] = get16(table + (size_t)k * ENTRY_LEN + 4);
    }
    rc = 0;
done:
    free(table);
    close(fd);
    return rc;
}

int gb_ring_connect(gb_ring_t *r, const unsigned char *id, size_t len, char *err, size_t errlen) {
    if (len != GB_RING_ID_LEN || memcmp(id, ID_MAGIC, 8) != 0) {
        snprintf(err, errlen, "tcp ring: the unique id (%zu bytes) is not a ring id", len);
        return -1;
    }
    if (get32(id + 30) != (uint32_t)r->n) {
        snprintf(err, errlen, "tcp ring: the id is for %u nodes, this job has %d", get32(id + 30),
                 r->n);
        return -1;
    }
    if (r->next >= 0 || r->lfd < 0) {
        snprintf(err, errlen, "tcp ring: already connected");
        return -1;
    }
    uint32_t ip0;
    memcpy(&ip0, id + 24, 4);
    uint16_t port0 = get16(id + 28);
    if (r->rank > 0)
        memcpy(r->nonce, id + 8, 16);
    else if (memcmp(r->nonce, id + 8, 16) != 0) {
        snprintf(err, errlen, "tcp ring: rank 0 was given an id that is not its own");
        return -1;
    }
    int n = r->n, rc = -1;
    uint32_t *ips = calloc((size_t)n, sizeof(uint32_t));
    uint16_t *ports = calloc((size_t)n, sizeof(uint16_t));
    if (!ips || !ports) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (r->rank == 0 ? gather_joins(r, ips, ports, err, errlen)
                     : join(r, ip0, port0, ips, ports, err, errlen))
        goto done;
    /* the ring: connect to the successor, accept the predecessor */
    int nx = (r->rank + 1) % n, pv = (r->rank + n - 1) % n;
    char addr[64];
    addr_text(ips[nx], ports[nx], addr, sizeof(addr));
    snprintf(r->next_name, sizeof(r->next_name), "rank %d (%s)", nx, addr);
    addr_text(ips[pv], ports[pv], addr, sizeof(addr));
    snprintf(r->prev_name, sizeof(r->prev_name), "rank %d (%s)", pv, addr);
    int64_t deadline = now_ms() + r->timeout_ms;
    r->next = tcp_connect(ips[nx], ports[nx], deadline, r->next_name, err, errlen);
    if (r->next < 0) goto done;
    hello_t h = {.bom = BOM,
                 .kind = K_RING,
                 .rank = (uint32_t)r->rank,
                 .n = (uint32_t)n,
                 .ip = r->bind_ip,
                 .port = r->port};
    memcpy(h.nonce, r->nonce, 16);
    unsigned char b[HELLO_LEN];
    hello_pack(&h, b);
    if (send_all(r->next, b, sizeof(b), deadline, r->next_name, err, errlen)) goto done;
    char note[256] = "", why[GB_ERR_LEN];
    while (r->prev < 0) {
        int fd = -1;
        hello_t ph;
        uint32_t pip = 0;
        int a = accept_hello(r, deadline, &fd, &ph, &pip, note, sizeof(note), why, sizeof(why));
        if (a < 0) {
            snprintf(err, errlen, "tcp ring: %srank %d waited for %s to connect: %s%s%s",
                     a == -2 ? GB_PEER_GONE : "", r->rank, r->prev_name, why, note[0] ? "; " : "",
                     note);
            goto done;
        }
        if (a > 0) continue;
        uint32_t st = ph.kind != K_RING ? ST_KIND : ph.rank != (uint32_t)pv ? ST_RANK : ST_OK;
        if (send_reply(fd, st, deadline, why, sizeof(why)) || st != ST_OK) {
            if (st != ST_OK)
                snprintf(note, sizeof(note), "refused rank %u: %s", ph.rank, status_text(st));
            close(fd);
            continue;
        }
        r->prev = fd;
    }
    if (recv_reply(r->next, deadline, r->next_name, err, errlen)) goto done;
    close(r->lfd); /* nobody else may join */
    r->lfd = -1;
    rc = 0;
done:
    free(ips);
    free(ports);
    if (rc != 0) {
        if (r->next >= 0) close(r->next);
        if (r->prev >= 0) close(r->prev);
        r->next = r->prev = -1;
    }
    return rc;
}

enum { M_COPY = 0, M_SUM, M_MAX };

/* After a failure: shut both ring connections down, so the neighbours'
 * transfers fail at once too and the failure goes round the ring instead
 * of every rank waiting out its timeout. */
static int ring_break(gb_ring_t *r) {
    if (r->next >= 0) shutdown(r->next, SHUT_RDWR);
    if (r->prev >= 0) shutdown(r->prev, SHUT_RDWR);
    return -1;
}

static void combine(float *dst, const float *src, size_t n, int mode) {
    if (mode == M_SUM)
        for (size_t i = 0; i < n; i++)
            dst[i] += src[i];
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = fmaxf(dst[i], src[i]);
}

/* Send sbytes from sbuf to the successor while receiving rcount floats
 * from the predecessor into dst (copied, added or max'ed). */
static int xfer(gb_ring_t *r, const void *sbuf, size_t sbytes, float *dst, size_t rcount, int mode,
                char *err, size_t errlen) {
    size_t sent = 0, rbytes = rcount * sizeof(float), got = 0, fill = 0;
    int64_t deadline = now_ms() + r->timeout_ms;
    while (sent < sbytes || got < rbytes) {
        struct pollfd p[2];
        int np = 0, is = -1, ir = -1;
        if (sent < sbytes) {
            p[np] = (struct pollfd){.fd = r->next, .events = POLLOUT};
            is = np++;
        }
        if (got < rbytes) {
            p[np] = (struct pollfd){.fd = r->prev, .events = POLLIN};
            ir = np++;
        }
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            snprintf(err, errlen, "tcp ring: rank %d: " GB_PEER_GONE "no progress for %d ms %s %s",
                     r->rank, r->timeout_ms, got < rbytes ? "receiving from" : "sending to",
                     got < rbytes ? r->prev_name : r->next_name);
            return -1;
        }
        int pr = poll(p, (nfds_t)np, left > 1000000 ? 1000000 : (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) {
            snprintf(err, errlen, "tcp ring: poll: %s", strerror(errno));
            return -1;
        }
        int progress = 0;
        if (is >= 0 && p[is].revents) {
            size_t want = sbytes - sent < SEND_CHUNK ? sbytes - sent : SEND_CHUNK;
            ssize_t k = send(r->next, (const char *)sbuf + sent, want, MSG_NOSIGNAL);
            if (k > 0) {
                sent += (size_t)k;
                progress = 1;
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s closed the connection (%s)",
                         r->next_name, strerror(errno));
                return -1;
            }
        }
        if (ir >= 0 && p[ir].revents) {
            ssize_t k;
            if (mode == M_COPY) {
                k = recv(r->prev, (char *)dst + got, rbytes - got, 0);
            } else {
                size_t room = TMP_BYTES - fill, rest = rbytes - got - fill;
                k = recv(r->prev, r->tmp + fill, room < rest ? room : rest, 0);
            }
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                snprintf(err, errlen, "tcp ring: " GB_PEER_GONE "%s closed the connection%s%s%s",
                         r->prev_name, k < 0 ? " (" : "", k < 0 ? strerror(errno) : "",
                         k < 0 ? ")" : "");
                return -1;
            }
            if (k > 0) {
                progress = 1;
                if (mode == M_COPY) {
                    got += (size_t)k;
                } else {
                    fill += (size_t)k;
                    size_t nf = fill / sizeof(float);
                    combine(dst + got / sizeof(float), (const float *)(void *)r->tmp, nf, mode);
                    got += nf * sizeof(float);
                    size_t rem = fill - nf * sizeof(float);
                    memmove(r->tmp, r->tmp + nf * sizeof(float), rem);
                    fill = rem;
                }
            }
        }
        if (progress) deadline = now_ms() + r->timeout_ms;
    }
    return 0;
}

int gb_ring_allreduce(gb_ring_t *r, float *buf, size_t count, gb_comm_op_t op, float div, char *err,
                      size_t errlen) {
    if (r->next < 0 || r->prev < 0) {
        snprintf(err, errlen, "tcp ring: not connected");
        return -1;
    }
    if (op != GB_COMM_SUM && op != GB_COMM_MAX) {
        snprintf(err, errlen, "tcp ring: op %d (sum or max; an average is a sum with div)", op);
        return -1;
    }
    int n = r->n, me = r->rank, mode = op == GB_COMM_MAX ? M_MAX : M_SUM;
#define SEG_LO(i) (count * (size_t)(i) / (size_t)n)
#define SEG_N(i)  (SEG_LO((i) + 1) - SEG_LO(i))
    /* reduce-scatter: after n-1 steps this rank owns segment me+1 */
    for (int s = 0; s < n - 1; s++) {
        int snd = ((me - s) % n + n) % n, rcv = ((me - s - 1) % n + n) % n;
        if (xfer(r, buf + SEG_LO(snd), SEG_N(snd) * sizeof(float), buf + SEG_LO(rcv), SEG_N(rcv),
                 mode, err, errlen))
            return ring_break(r);
    }
    int own = (me + 1) % n;
    if (div > 0 && op == GB_COMM_SUM) {
        float *p = buf + SEG_LO(own);
        for (size_t i = 0; i < SEG_N(own); i++)
            p[i] = p[i] / div;
    }
    /* all-gather */
    for (int s = 0; s < n - 1; s++) {
        int snd = ((me + 1 - s) % n + n) % n, rcv = ((me - s) % n + n) % n;
        if (xfer(r, buf + SEG_LO(snd), SEG_N(snd) * sizeof(float), buf + SEG_LO(rcv), SEG_N(rcv),
                 M_COPY, err, errlen))
            return ring_break(r);
    }
#undef SEG_LO
#undef SEG_N
    return 0;
}
