/* gb_zmq.c - see gb_zmq.h. */
#define _DEFAULT_SOURCE
#define _GNU_SOURCE /* getaddrinfo_a: a name lookup with a time limit */
#include "gb_zmq.h"

#include "gb_curve.h"
#include "gb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void gb_frame_close(gb_frame_t *f) {
    zmq_msg_close(&f->payload);
}

static void drain(void *sock) {
    int more = 1;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            return;
        }
        zmq_msg_close(&m);
    }
}

int gb_zmq_recv(void *sock, int router, gb_frame_t *f) {
    f->rid_len = 0;
    f->parts = 0;
    zmq_msg_init(&f->payload);
    if (router) {
        zmq_msg_t id;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) < 0) {
            int e = errno;
            zmq_msg_close(&id);
            zmq_msg_close(&f->payload);
            errno = e;
            return -1;
        }
        f->rid_len = zmq_msg_size(&id) < GB_RID_MAX ? zmq_msg_size(&id) : GB_RID_MAX;
        memcpy(f->rid, zmq_msg_data(&id), f->rid_len);
        int more = zmq_msg_more(&id);
        zmq_msg_close(&id);
        if (!more) return 0; /* only a routing id: parts == 0 */
        /* the rest of the message is already here: a blocking receive is safe */
        if (zmq_msg_recv(&f->payload, sock, 0) < 0) {
            int e = errno;
            zmq_msg_close(&f->payload);
            errno = e;
            return -1;
        }
    } else if (zmq_msg_recv(&f->payload, sock, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&f->payload);
        errno = e;
        return -1;
    }
    f->parts = 1;
    int more = 0;
    size_t sz = sizeof more;
    if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        f->parts = 2; /* at least: the rest is dropped */
        drain(sock);
    }
    return 0;
}

int gb_zmq_send(void *sock, const uint8_t *rid, size_t rid_len, Gb__Envelope *env) {
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(env, &len);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    int rc = 0;
    if (rid && zmq_send(sock, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) rc = -1;
    if (rc == 0 && zmq_send(sock, buf, len, ZMQ_DONTWAIT) < 0) rc = -1;
    int e = errno;
    free(buf);
    errno = e;
    return rc;
}

int gb_zmq_reject(void *sock, const uint8_t *rid, size_t rid_len, int code, const char *reason,
                  uint64_t ref_seq) {
    Gb__Reject rej = GB__REJECT__INIT;
    rej.code = (Gb__RejectCode)code;
    rej.reason = (char *)reason;
    rej.ref_seq = ref_seq;
    Gb__Envelope env = GB__ENVELOPE__INIT;
    env.body_case = GB__ENVELOPE__BODY_REJECT;
    env.reject = &rej;
    return gb_zmq_send(sock, rid, rid_len, &env);
}

void gb_rid_str(const uint8_t *rid, size_t len, char *out, size_t outlen) {
    char tmp[GB_RID_MAX + 1];
    size_t n = len < GB_RID_MAX ? len : GB_RID_MAX;
    memcpy(tmp, rid, n);
    tmp[n] = '\0';
    if (n == len && strlen(tmp) == n && gb_wire_id_ok(tmp)) {
        snprintf(out, outlen, "%s", tmp);
        return;
    }
    size_t o = 0;
    if (outlen == 0) return;
    out[0] = '\0';
    for (size_t i = 0; i < n && o + 3 <= outlen; i++)
        o += (size_t)snprintf(out + o, outlen - o, "%02x", rid[i]);
}

int gb_monitor_read(void *mon, uint16_t *event, uint32_t *value, char *addr, size_t addrlen) {
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return -1;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    int more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    if (addrlen) addr[0] = '\0';
    if (more) {
        zmq_msg_t a;
        zmq_msg_init(&a);
        if (zmq_msg_recv(&a, mon, 0) >= 0 && addrlen) {
            size_t n = zmq_msg_size(&a) < addrlen - 1 ? zmq_msg_size(&a) : addrlen - 1;
            memcpy(addr, zmq_msg_data(&a), n);
            addr[n] = '\0';
        }
        zmq_msg_close(&a);
    }
    return 0;
}

void gb_handshake_failure_str(uint16_t event, uint32_t value, int have_keys, const char *role,
                              char *out, size_t outlen) {
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && role)
        gb_fmt(out, outlen,
               "the coordinator refused our key (ZAP status %u): is our public key in its "
               "--authorized file, with no role or role=%s?",
               value, role);
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        gb_fmt(out, outlen,
               "the coordinator refused our key (ZAP status %u): is our public key in its "
               "--authorized file?",
               value);
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
             value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        gb_fmt(out, outlen, "%s",
               have_keys ? "the coordinator does not speak CURVE (drop --key/--server-key?)"
                         : "the coordinator requires CURVE keys: give --key NAME.key and "
                           "--server-key COORD.pub");
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && !have_keys)
        gb_fmt(out, outlen,
               "the coordinator ended the connection during the handshake: does it require CURVE "
               "keys (--key NAME.key, --server-key COORD.pub)?");
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
             (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
              value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC))
        /* with keys: what a wrong --server-key looks like (the coordinator
         * cannot open our hello, and hangs up) */
        gb_fmt(out, outlen, "%s",
               "the coordinator ended the connection during the CURVE handshake: is --server-key "
               "the coordinator's public key (its NAME.pub), and does it run with --key?");
    else
        gb_fmt(out, outlen,
               "the handshake with the coordinator failed (libzmq event 0x%x, value 0x%x)%s", event,
               value,
               have_keys ? ": does --server-key match the coordinator, and does it run with keys?"
                         : "");
}

/* A name lookup that gives up after timeout_ms. getaddrinfo waits as long
 * as the resolver does: for a DNS server that does not answer, 5 s times 2
 * tries by default, so `gpubench status` at a host name took 20 s where it
 * promises 5. The lookup goes to glibc's own thread (getaddrinfo_a); given
 * up, it finishes there, and whichever of the two lets go last frees it. */
struct lookup {
    struct gaicb cb;
    struct addrinfo hints;
    char host[256], port[32];
    atomic_int refs;
};

static void lookup_unref(struct lookup *l) {
    if (atomic_fetch_sub(&l->refs, 1) != 1) return;
    if (l->cb.ar_result) freeaddrinfo(l->cb.ar_result);
    free(l);
}

static void lookup_done(union sigval v) {
    lookup_unref(v.sival_ptr);
}

/* getaddrinfo's code, the first address in sa; EAI_AGAIN with *late set when
 * no answer came within timeout_ms; EAI_INTR when a signal came first */
static int lookup(const char *host, const char *port, int timeout_ms, struct sockaddr_storage *sa,
                  socklen_t *salen, int *late) {
    *late = 0;
    struct lookup *l = calloc(1, sizeof *l);
    if (!l) return EAI_MEMORY;
    if (gb_copy(l->host, sizeof l->host, host) != 0 ||
        gb_copy(l->port, sizeof l->port, port) != 0) {
        free(l);
        return EAI_NONAME; /* no such name or port, as getaddrinfo says it */
    }
    l->hints.ai_socktype = SOCK_STREAM;
    l->hints.ai_flags = AI_NUMERICSERV;
    l->cb.ar_name = l->host;
    l->cb.ar_service = l->port;
    l->cb.ar_request = &l->hints;
    atomic_init(&l->refs, 2); /* this call's, and the notification's */
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD;
    ev.sigev_notify_function = lookup_done;
    ev.sigev_value.sival_ptr = l;
    struct gaicb *list[1] = {&l->cb};
    int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &ev);
    if (rc != 0) { /* not queued: no notification comes */
        free(l);
        return rc;
    }
    int64_t deadline = gb_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
    const struct gaicb *const wait_for[1] = {&l->cb};
    while ((rc = gai_error(&l->cb)) == EAI_INPROGRESS) {
        int64_t left = deadline - gb_mono_ms();
        if (left <= 0) break;
        struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
        if (gai_suspend(wait_for, 1, &ts) == EAI_INTR && gai_error(&l->cb) == EAI_INPROGRESS) {
            rc = EAI_INTR; /* a Ctrl-C: not waited out */
            break;
        }
    }
    if (rc == EAI_INPROGRESS) {
        *late = 1;
        rc = EAI_AGAIN;
    } else if (rc == 0 && l->cb.ar_result) {
        memcpy(sa, l->cb.ar_result->ai_addr, l->cb.ar_result->ai_addrlen);
        *salen = l->cb.ar_result->ai_addrlen;
    } else if (rc == 0) {
        rc = EAI_NONAME;
    }
    lookup_unref(l);
    return rc;
}

/* "HOST:PORT" split at its last ':': HOST in host (an IPv6 address without
 * its brackets), the port returned; NULL when it is not that shape or HOST
 * does not fit. */
static const char *split_host_port(const char *hp, char *host, size_t hostlen) {
    const char *colon = strrchr(hp, ':');
    if (!colon || colon == hp || (size_t)(colon - hp) >= hostlen) return NULL;
    size_t hl = (size_t)(colon - hp);
    if (hp[0] == '[' && hp[hl - 1] == ']') {
        memcpy(host, hp + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, hp, hl);
        host[hl] = '\0';
    }
    return colon + 1;
}

int gb_endpoint_resolve(const char *endpoint, int timeout_ms, char *out, size_t outlen, char *err,
                        size_t errlen) {
    /* a source;destination pair, an IPv6 address: libzmq's as they are */
    if (strncmp(endpoint, "tcp://", 6) != 0 || strchr(endpoint, ';') || endpoint[6] == '[')
        return 0;
    char host[256], port[32], addr[INET6_ADDRSTRLEN];
    const char *p = split_host_port(endpoint + 6, host, sizeof host);
    if (!p || gb_copy(port, sizeof port, p) != 0 || strcmp(host, "*") == 0) return 0;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1) return 0;
    int64_t deadline = gb_mono_ms() + timeout_ms;
    int answered = 0; /* DNS said EAI_AGAIN at least once (it answers, for now "not now") */
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t salen = 0;
        int late = 0;
        int64_t left = deadline - gb_mono_ms();
        int gai = lookup(host, port, left > 0 ? (int)left : 1, &sa, &salen, &late);
        if (gai == 0) {
            if (getnameinfo((struct sockaddr *)&sa, salen, addr, sizeof addr, NULL, 0,
                            NI_NUMERICHOST) != 0)
                return 0;
            int fit = sa.ss_family == AF_INET6 ? gb_fmt(out, outlen, "tcp://[%s]:%s", addr, port)
                                               : gb_fmt(out, outlen, "tcp://%s:%s", addr, port);
            return fit == 0;
        }
        if (gai == EAI_INTR) {
            gb_fmt(err, errlen, "interrupted");
            return -4;
        }
        if (gai == EAI_NONAME || gai == EAI_FAIL || gai == EAI_NODATA) {
            gb_fmt(err, errlen, "%s: %s", host, gai_strerror(gai));
            return -1; /* DNS or /etc/hosts said so: not asked again here */
        }
        if (gai != EAI_AGAIN) return 0; /* libzmq's to say */
        /* DNS not answering now may answer later: asked again until the time
         * is up, as a request waits for a coordinator that is away */
        left = deadline - gb_mono_ms();
        if (late || left <= 0) {
            /* a last ask cut short by the deadline (a loaded machine) says
             * nothing new: what DNS answered before stands */
            if (late && !answered)
                gb_fmt(err, errlen, "%s: DNS gave no answer within %d ms", host, timeout_ms);
            else
                gb_fmt(err, errlen, "%s: %s", host, gai_strerror(gai));
            return -3;
        }
        answered = 1;
        struct timespec ts = {0, (left < 250 ? left : 250) * 1000000L};
        if (nanosleep(&ts, NULL) != 0 && errno == EINTR) {
            gb_fmt(err, errlen, "interrupted");
            return -4;
        }
    }
}

/* gb_endpoint_resolve for a request: its errors said as a request says
 * them (-1: the name does not resolve, or a signal came; -3: DNS gave no
 * answer in the time). libzmq's own lookup cannot be bounded: for a DNS
 * server that does not answer, it held its I/O thread, and so the
 * command's exit, for 20 s where a request promises 5. */
static int name_to_address(const char *endpoint, int timeout_ms, char *out, size_t outlen,
                           int have_keys, char *err, size_t errlen) {
    char said[300], why[512];
    int rc = gb_endpoint_resolve(endpoint, timeout_ms, out, outlen, said, sizeof said);
    if (rc == -1) {
        gb_probe_str(GB_PROBE_NO_NAME, said, have_keys, why, sizeof why);
        gb_fmt(err, errlen, "%s: %s", endpoint, why);
    } else if (rc == -3) {
        gb_probe_str(GB_PROBE_UNREACHABLE, said, have_keys, why, sizeof why);
        gb_fmt(err, errlen, "no reply from %s within %d ms: %s", endpoint, timeout_ms, why);
    } else if (rc == -4) {
        gb_fmt(err, errlen, "%s", said);
        rc = -1;
    }
    return rc;
}

int gb_request(const char *endpoint, Gb__Envelope *req, int timeout_ms, Gb__Envelope **rep,
               char *err, size_t errlen) {
    return gb_request_ex(endpoint, NULL, req, timeout_ms, rep, err, errlen);
}

int gb_request_ex(const char *endpoint, const struct gb_curve_client *curve, Gb__Envelope *req,
                  int timeout_ms, Gb__Envelope **rep, char *err, size_t errlen) {
    *rep = NULL;
    if (gb_endpoint_check(endpoint, err, errlen) != 0) return -1;
    /* an ipc socket this user may not open would read as a silent
     * coordinator after the whole timeout: say what it is at once */
    if (strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '@' &&
        access(endpoint + 6, W_OK) != 0 && errno == EACCES) {
        gb_fmt(err, errlen,
               "%s: permission denied (the socket is another user's: run as its owner, or give "
               "its directory and socket to a group you are in)",
               endpoint);
        return -2; /* refused, not away: waiting will not change it */
    }
    int64_t deadline = gb_mono_ms() + timeout_ms;
    char numeric[300];
    int nr =
        name_to_address(endpoint, timeout_ms, numeric, sizeof numeric, curve != NULL, err, errlen);
    if (nr < 0) return nr;
    const char *target = nr ? numeric : endpoint; /* what libzmq and the probes are given */
    int rc = -1;
    void *mon = NULL;
    void *ctx = zmq_ctx_new();
    void *s = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    if (!s) {
        gb_fmt(err, errlen, "cannot create a socket: %s", zmq_strerror(errno));
        goto out;
    }
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    /* replies are bounded too: a peer posing as the coordinator cannot make
     * a command allocate without limit */
    int64_t max_reply = GB_REQUEST_MAX_REPLY;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_reply, sizeof max_reply);
    int one = 1; /* IPv6 endpoints too ([::1], a name with only an AAAA record) */
    zmq_setsockopt(s, ZMQ_IPV6, &one, sizeof one);
    if (curve && gb_curve_client_apply(s, curve, err, errlen) != 0) goto out;
    /* a refused handshake is reported at once, not as a timeout; so is a
     * connection refused outright (a connect that failed before any was
     * made: CONNECT_RETRIED with no CONNECTED before it) */
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://gb-request-monitor-%p", (void *)s);
    if (zmq_socket_monitor(s, mon_ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_CONNECTED |
                               ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
        mon = zmq_socket(ctx, ZMQ_PAIR);
        if (!mon || zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            zmq_connect(mon, mon_ep) != 0) {
            if (mon) zmq_close(mon);
            mon = NULL;
            /* no reader: no monitor (libzmq's I/O thread would block on
             * its first event) */
            zmq_socket_monitor(s, NULL, 0);
        }
    }
    if (zmq_connect(s, target) != 0) {
        gb_fmt(err, errlen, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    size_t len = 0;
    uint8_t *buf = gb_wire_pack(req, &len);
    if (!buf) {
        gb_fmt(err, errlen, "out of memory");
        goto out;
    }
    /* A DEALER queues the message until the connection is up. */
    int sent = zmq_send(s, buf, len, 0);
    free(buf);
    if (sent < 0) {
        gb_fmt(err, errlen, "cannot send to %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    zmq_pollitem_t items[2] = {{s, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
    int connected = 0, looked = 0;      /* a connection made; the first failed one looked at */
    gb_probe_t seen = GB_PROBE_UNKNOWN; /* what that look found, said in seen_said */
    char seen_said[96] = "";
    /* the look at what is there when no reply comes: a connection made
     * says it without one (a greeting that never came is a stopped
     * process; one that came, a coordinator that did not answer in time),
     * and a look at a coordinator that is merely slow was a refused peer
     * in its log. With no connection made, the look is taken from the
     * timeout, in its last quarter (at most 1 s), not added after it (a
     * stopped coordinator made `wait --timeout 2` take 3 s); a reply that
     * comes meanwhile waits in the socket, read by one last poll */
    int64_t probe_budget = timeout_ms / 4 < 1000 ? timeout_ms / 4 : 1000;
    int probed = 0, last_poll = 0, greeted = 0;
    gb_probe_t fin = GB_PROBE_UNKNOWN;
    char fin_said[96] = "";
    for (;;) {
        int64_t left = deadline - gb_mono_ms();
        /* no connection made since the look: what it found holds (a
         * second look could wait as long again on a DNS that does not
         * answer) */
        int reuse = looked && !connected && seen != GB_PROBE_UNKNOWN;
        if (!probed && !reuse && !connected && left <= probe_budget) {
            int ms = left < 1 ? 1 : left > 1000 ? 1000 : (int)left;
            fin = gb_zmq_probe(target, ms, fin_said, sizeof fin_said);
            probed = 1;
            continue;
        }
        if (left <= 0 && !last_poll) {
            last_poll = 1;
            left = 0;
        } else if (left <= 0) {
            char said[96], why[256];
            gb_probe_t p = reuse ? seen : connected ? GB_PROBE_SILENT : fin;
            snprintf(said, sizeof said, "%s", reuse ? seen_said : fin_said);
            if (connected && greeted)
                gb_fmt(err, errlen,
                       "no reply from %s within %d ms: it took the connection and the request "
                       "but did not answer (is the coordinator overloaded, or its disk "
                       "stalled?)",
                       endpoint, timeout_ms);
            else if (gb_probe_str(p, said, curve != NULL, why, sizeof why))
                gb_fmt(err, errlen, "no reply from %s within %d ms: %s", endpoint, timeout_ms, why);
            else
                gb_fmt(err, errlen, "no reply from %s within %d ms (is the coordinator running?%s)",
                       endpoint, timeout_ms, curve ? " does --server-key match it?" : "");
            /* something may be there, or come back: the request may have
             * arrived and its reply been lost */
            if (p != GB_PROBE_REFUSED && p != GB_PROBE_DENIED && p != GB_PROBE_NO_NAME &&
                p != GB_PROBE_FOREIGN && p != GB_PROBE_CLOSED)
                rc = -3;
            goto out;
        }
        int n = zmq_poll(items, mon ? 2 : 1,
                         (long)(probed || reuse || connected ? left : left - probe_budget));
        if (n < 0) {
            if (errno == EINTR) {
                gb_fmt(err, errlen, "interrupted");
                goto out;
            }
            gb_fmt(err, errlen, "poll: %s", zmq_strerror(errno));
            goto out;
        }
        if (n == 0) continue;
        uint16_t event;
        uint32_t value;
        char where[256];
        if (mon && (items[1].revents & ZMQ_POLLIN) &&
            gb_monitor_read(mon, &event, &value, where, sizeof where) == 0) {
            if (event == ZMQ_EVENT_CONNECTED) {
                connected = 1;
            } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
                greeted = 1;
            } else if (event == ZMQ_EVENT_CONNECT_RETRIED) {
                /* no connection made, libzmq tries again: nothing listening
                 * there (connection refused, no ipc socket file) is said
                 * now, not after the timeout (it was 5 s for a mistyped
                 * port), and so is a host name that does not resolve
                 * (getaddrinfo's EAI_NONAME or EAI_FAIL; name_to_address
                 * finds that first, but for a source;destination pair).
                 * What may answer later (no route yet) is waited for.
                 * Looked at once; a stopped coordinator never is here (its
                 * kernel accepts the connection: CONNECTED) */
                if (!connected && !looked) {
                    looked = 1;
                    char why[256];
                    int ms = left < 250 ? (int)left : 250;
                    seen = gb_zmq_probe(target, ms > 0 ? ms : 1, seen_said, sizeof seen_said);
                    if ((seen == GB_PROBE_REFUSED || seen == GB_PROBE_NO_NAME) &&
                        gb_probe_str(seen, seen_said, curve != NULL, why, sizeof why)) {
                        gb_fmt(err, errlen, "%s: %s", endpoint, why);
                        goto out; /* -1: the request cannot have arrived */
                    }
                }
            } else {
                char why[256];
                /* a control endpoint's client: a command */
                gb_handshake_failure_str(event, value, curve != NULL, "control", why, sizeof why);
                if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
                    /* "ended the connection" is also what a server that is
                     * not ZeroMQ at all does: look at what is there */
                    char said[96], better[256];
                    gb_probe_t p = gb_zmq_probe(target, 1000, said, sizeof said);
                    if (gb_probe_str(p, said, curve != NULL, better, sizeof better))
                        snprintf(why, sizeof why, "%s", better);
                }
                gb_fmt(err, errlen, "%s: %s", endpoint, why);
                rc = -2;
                goto out;
            }
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        gb_frame_t f;
        if (gb_zmq_recv(s, 0, &f) != 0) continue;
        uint64_t seq = 0;
        char why[512];
        Gb__Envelope *env = NULL;
        int code = f.parts == 1 ? gb_wire_decode(zmq_msg_data(&f.payload), zmq_msg_size(&f.payload),
                                                 (size_t)1 << 30, &env, &seq, why, sizeof why)
                                : -1;
        gb_frame_close(&f);
        if (code != 0) {
            gb_fmt(err, errlen, "invalid reply from %s: %s", endpoint,
                   code < 0 ? "not one frame" : why);
            rc = -4;
            goto out;
        }
        if (env->seq != req->seq) { /* a late reply to an earlier request */
            gb_wire_free(&env);
            continue;
        }
        *rep = env;
        if (env->body_case == GB__ENVELOPE__BODY_REJECT) {
            gb_fmt(err, errlen, "%s", env->reject->reason);
            rc = 1;
        } else {
            rc = 0;
        }
        break;
    }
out:
    /* the monitor stopped before its reader is closed: libzmq's I/O thread
     * sends each event blocking, holding the socket's monitor lock, so an
     * event (a reconnect after a refused handshake) sent once the reader
     * was gone blocked it for ever, and zmq_socket_monitor(s, NULL) then
     * waited on that lock (a keyless `gpubench submit` hung so, twice in
     * 56 runs beside two busy loops) */
    if (s) zmq_socket_monitor(s, NULL, 0);
    if (mon) zmq_close(mon);
    if (s) zmq_close(s);
    if (ctx) zmq_ctx_term(ctx);
    return rc;
}

/* ---- what listens at an endpoint ------------------------------------------ */

int gb_endpoint_check(const char *ep, char *err, size_t errlen) {
    if (strncmp(ep, "ipc://", 6) == 0 && ep[6]) return 0;
    if (strncmp(ep, "tcp://", 6) != 0) { /* inproc:// reaches no other process */
        gb_fmt(err, errlen,
               "'%.200s' is not an endpoint gpubench can use: tcp://HOST:PORT or "
               "ipc://PATH",
               ep);
        return -1;
    }
    const char *colon = strrchr(ep + 6, ':');
    if (!colon || (colon[-1] == ']' && !strchr(ep + 6, '['))) {
        gb_fmt(err, errlen, "%s: a tcp:// endpoint needs a port (tcp://HOST:PORT)", ep);
        return -1;
    }
    const char *port = colon + 1;
    if (strcmp(port, "*") == 0) return 0;
    size_t n = strspn(port, "0123456789");
    if (n == 0 || port[n] || n > 5 || atol(port) > 65535) {
        gb_fmt(err, errlen, "%s: the port must be a number in 0..65535 (or * for any)", ep);
        return -1;
    }
    return 0;
}

/* A plain socket connected to endpoint within timeout_ms: the fd, or -1 with
 * errno (ETIMEDOUT when the connection did not complete in time, EINVAL when
 * the endpoint is not one this can read; a tcp host name that does not
 * resolve: EADDRNOTAVAIL, and why in said). */
static int probe_connect(const char *endpoint, int timeout_ms, char *said, size_t saidlen) {
    int64_t deadline = gb_mono_ms() + timeout_ms;
    struct sockaddr_storage sa;
    socklen_t salen = 0;
    memset(&sa, 0, sizeof sa);
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&sa;
        const char *path = endpoint + 6;
        size_t n = strlen(path);
        if (n == 0 || n >= sizeof un->sun_path) {
            errno = EINVAL;
            return -1;
        }
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, path, n);
        if (path[0] == '@') un->sun_path[0] = '\0'; /* abstract, as libzmq spells it */
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] != '@'));
    } else if (strncmp(endpoint, "tcp://", 6) == 0) {
        const char *hp = endpoint + 6, *semi = strrchr(hp, ';');
        if (semi) hp = semi + 1; /* "source;destination" */
        char host[256];
        const char *port = split_host_port(hp, host, sizeof host);
        if (!port) {
            errno = EINVAL;
            return -1;
        }
        int late = 0;
        int gai = lookup(host, port, timeout_ms, &sa, &salen, &late);
        if (gai != 0) {
            if (late) {
                gb_fmt(said, saidlen, "%s: DNS gave no answer within %d ms", host, timeout_ms);
                errno = EAGAIN;
            } else if (gai == EAI_NONAME || gai == EAI_AGAIN || gai == EAI_FAIL) {
                /* EAI_AGAIN: no answer from DNS now (a network cut), not
                 * an unknown name */
                gb_fmt(said, saidlen, "%s: %s", host, gai_strerror(gai));
                errno = gai == EAI_AGAIN ? EAGAIN : EADDRNOTAVAIL;
            } else {
                errno = EINVAL;
            }
            return -1;
        }
        /* what is left of the time for the connection */
        int64_t left = deadline - gb_mono_ms();
        timeout_ms = left > 0 ? (int)left : 1;
    } else {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, salen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int soerr = 0;
        socklen_t l = sizeof soerr;
        int n = poll(&p, 1, timeout_ms);
        if (n <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) != 0 || soerr) {
            close(fd);
            errno = n == 0 ? ETIMEDOUT : soerr ? soerr : EIO;
            return -1;
        }
    }
    return fd;
}

gb_probe_t gb_zmq_probe(const char *endpoint, int timeout_ms, char *said, size_t saidlen) {
    if (saidlen) said[0] = '\0';
    int64_t deadline = gb_mono_ms() + timeout_ms;
    int fd = probe_connect(endpoint, timeout_ms, said, saidlen);
    if (fd < 0) {
        if (errno == EADDRNOTAVAIL && saidlen && said[0]) return GB_PROBE_NO_NAME;
        if (errno == EAGAIN && saidlen && said[0]) return GB_PROBE_UNREACHABLE;
        if (errno == EINVAL || errno == ETIMEDOUT) return GB_PROBE_UNKNOWN;
        if (errno == EACCES || errno == EPERM) return GB_PROBE_DENIED;
        if (errno == ENETUNREACH || errno == EHOSTUNREACH || errno == ENETDOWN ||
            errno == EHOSTDOWN) {
            gb_fmt(said, saidlen, "%s", strerror(errno));
            return GB_PROBE_UNREACHABLE;
        }
        gb_fmt(said, saidlen, "%s", strerror(errno));
        return GB_PROBE_REFUSED;
    }
    /* ZMTP 3.0 greeting: signature, version 3.0, mechanism "NULL", as-server 0,
     * filler. It goes in two parts: the signature and major version, after
     * which a ZeroMQ peer sends the rest of its own greeting with its
     * mechanism (read before ours could make it close, and a close with our
     * bytes unread resets the connection and loses its answer); then, to a
     * peer still silent, the rest and an empty line, which servers of
     * line-based protocols answer with an error line. */
    unsigned char hello[68] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    memcpy(hello + 64, "\r\n\r\n", 4);
    unsigned char buf[64];
    size_t got = 0, sent = 11;
    int eof = 0;
    int64_t half = gb_mono_ms() + timeout_ms / 2;
    (void)!send(fd, hello, sent, MSG_NOSIGNAL);
    while (got < sizeof buf) {
        if (got >= 32 && buf[0] == 0xff) break; /* the mechanism is in */
        if (got && buf[0] != 0xff && memchr(buf, '\n', got)) break;
        int zmq_seen = got && buf[0] == 0xff, phase1 = sent < sizeof hello && !zmq_seen;
        int64_t left = (phase1 ? half : deadline) - gb_mono_ms();
        if (left <= 0 && phase1) {
            (void)!send(fd, hello + sent, sizeof hello - sent, MSG_NOSIGNAL);
            sent = sizeof hello;
            continue;
        }
        if (left <= 0) break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0) continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - got, 0);
        if (n <= 0) {
            eof = 1;
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (got == 0) return eof ? GB_PROBE_CLOSED : GB_PROBE_SILENT;
    if (buf[0] == 0xff && (got < 10 || buf[9] == 0x7f)) {
        if (got < 32) return GB_PROBE_ZMQ; /* its mechanism not seen */
        char mech[21] = {0};
        memcpy(mech, buf + 12, 20);
        for (size_t i = 0; mech[i]; i++)
            if (mech[i] < 0x21 || mech[i] > 0x7e) mech[i] = '?';
        gb_fmt(said, saidlen, "%s", mech);
        return strcmp(mech, "CURVE") == 0 ? GB_PROBE_ZMQ_CURVE : GB_PROBE_ZMQ_NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < got && buf[i] != '\r' && buf[i] != '\n' && o + 1 < saidlen; i++)
        said[o++] = buf[i] >= 0x20 && buf[i] < 0x7f ? (char)buf[i] : '?';
    if (saidlen) said[o] = '\0';
    return GB_PROBE_FOREIGN;
}

const char *gb_probe_str(gb_probe_t p, const char *said, int have_keys, char *out, size_t outlen) {
    switch (p) {
    case GB_PROBE_REFUSED:
        gb_fmt(out, outlen,
               "nothing listens there (%s): is the coordinator running, and is this "
               "its address?",
               said);
        break;
    case GB_PROBE_UNREACHABLE:
        gb_fmt(out, outlen,
               "cannot reach it (%s): is the network up between here and there, and is this "
               "its address?",
               said);
        break;
    case GB_PROBE_NO_NAME:
        gb_fmt(out, outlen,
               "the host name does not resolve (%s): is the name right, and DNS or "
               "/etc/hosts up to date?",
               said);
        break;
    case GB_PROBE_DENIED:
        gb_fmt(out, outlen,
               "permission denied (the socket is another user's: run as its owner, "
               "or give its directory and socket to a group you are in)");
        break;
    case GB_PROBE_SILENT:
        gb_fmt(out, outlen,
               "it accepted the connection but sent no ZeroMQ greeting: is this a "
               "gpubench coordinator's address, and is its process running (not stopped)?");
        break;
    case GB_PROBE_CLOSED:
        gb_fmt(out, outlen,
               "it closed the connection without a ZeroMQ greeting: is this a "
               "gpubench coordinator's address?");
        break;
    case GB_PROBE_FOREIGN:
        gb_fmt(out, outlen,
               "it does not speak ZeroMQ (it answered \"%s\"): is this a gpubench "
               "coordinator's address?",
               said);
        break;
    case GB_PROBE_ZMQ_CURVE:
        if (have_keys) return NULL;
        gb_fmt(out, outlen,
               "the coordinator requires CURVE keys: give --key NAME.key and "
               "--server-key COORD.pub");
        break;
    case GB_PROBE_ZMQ_NULL:
        if (!have_keys) return NULL;
        gb_fmt(out, outlen, "the coordinator does not speak CURVE (drop --key/--server-key?)");
        break;
    default:
        return NULL;
    }
    return out;
}
