/* gb_zmq.c - see gb_zmq.h. */
#include "gb_zmq.h"

#include "gb_curve.h"
#include "gb_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void gb_handshake_failure_str(uint16_t event, uint32_t value, int have_keys, char *out,
                              size_t outlen) {
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
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
    else
        gb_fmt(out, outlen, "the handshake with the coordinator failed (event 0x%x, code 0x%x)%s",
               event, value,
               have_keys ? ": does --server-key match the coordinator, and does it run with keys?"
                         : "");
}

int gb_request(const char *endpoint, Gb__Envelope *req, int timeout_ms, Gb__Envelope **rep,
               char *err, size_t errlen) {
    return gb_request_ex(endpoint, NULL, req, timeout_ms, rep, err, errlen);
}

int gb_request_ex(const char *endpoint, const struct gb_curve_client *curve, Gb__Envelope *req,
                  int timeout_ms, Gb__Envelope **rep, char *err, size_t errlen) {
    *rep = NULL;
    /* an ipc socket this user may not open would read as a silent
     * coordinator after the whole timeout: say what it is at once */
    if (strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '@' &&
        access(endpoint + 6, W_OK) != 0 && errno == EACCES) {
        gb_fmt(err, errlen,
               "%s: permission denied (the socket is another user's: run as its owner, or give "
               "its directory and socket to a group you are in)",
               endpoint);
        return -1;
    }
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
    /* a refused handshake is reported at once, not as a timeout */
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://gb-request-monitor-%p", (void *)s);
    if (zmq_socket_monitor(s, mon_ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        mon = zmq_socket(ctx, ZMQ_PAIR);
        if (mon && zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero) == 0 &&
            zmq_connect(mon, mon_ep) != 0) {
            zmq_close(mon);
            mon = NULL;
        }
    }
    if (zmq_connect(s, endpoint) != 0) {
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
    int64_t deadline = gb_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - gb_mono_ms();
        if (left <= 0) {
            gb_fmt(err, errlen, "no reply from %s within %d ms (is the coordinator running?%s)",
                   endpoint, timeout_ms, curve ? " does --server-key match it?" : "");
            goto out;
        }
        int n = zmq_poll(items, mon ? 2 : 1, (long)left);
        if (n < 0) {
            if (errno == EINTR) {
                gb_fmt(err, errlen, "interrupted");
                goto out;
            }
            gb_fmt(err, errlen, "poll: %s", zmq_strerror(errno));
            goto out;
        }
        if (n == 0) continue;
        if (mon && (items[1].revents & ZMQ_POLLIN)) {
            uint16_t event;
            uint32_t value;
            char where[256];
            if (gb_monitor_read(mon, &event, &value, where, sizeof where) == 0) {
                char why[256];
                gb_handshake_failure_str(event, value, curve != NULL, why, sizeof why);
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
    if (mon) zmq_close(mon);
    if (s) {
        zmq_socket_monitor(s, NULL, 0);
        zmq_close(s);
    }
    if (ctx) zmq_ctx_term(ctx);
    return rc;
}
