/* test_probe.c - gb_zmq_probe against real listeners on loopback: a port
 * nothing listens on, servers that are not ZeroMQ (one answers a line, one
 * closes at once, one says nothing), real libzmq sockets without keys and
 * with CURVE, and an ipc path with no socket; and the sentences a client
 * command shows for each (gb_probe_str).
 *
 *   test_probe CASE */
#define _DEFAULT_SOURCE
#include "check.h"
#include "gb_zmq.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

/* A TCP listener on 127.0.0.1, an ephemeral port; its port in *port. */
static int listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(fd, 4) == 0);
    socklen_t l = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    *port = ntohs(a.sin_port);
    return fd;
}

typedef struct {
    int fd;
    const char *mode; /* "line": read, answer a line, close; "close"; "silent" */
} server_t;

static void *serve(void *arg) {
    server_t *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0) return NULL;
    if (strcmp(s->mode, "line") == 0) {
        char buf[128];
        /* like a line-based server: nothing until it has read a line */
        size_t got = 0;
        while (got < sizeof buf && !memchr(buf, '\n', got)) {
            ssize_t n = recv(c, buf + got, sizeof buf - got, 0);
            if (n <= 0) break;
            got += (size_t)n;
        }
        const char *ans = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        (void)!send(c, ans, strlen(ans), MSG_NOSIGNAL);
    } else if (strcmp(s->mode, "silent") == 0) {
        usleep(1500 * 1000);
    }
    close(c);
    return NULL;
}

static gb_probe_t probe_server(const char *mode, char *said, size_t saidlen) {
    int port;
    server_t s = {listener(&port), mode};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, serve, &s) == 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    gb_probe_t p = gb_zmq_probe(ep, 600, said, saidlen);
    pthread_join(t, NULL);
    close(s.fd);
    return p;
}

/* A real libzmq ROUTER on loopback, with CURVE when curve is set. */
static gb_probe_t probe_zmq(int curve, char *said, size_t saidlen) {
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    CHECK(r);
    int zero = 0;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    if (curve) {
        char pub[41], sec[41];
        CHECK(zmq_curve_keypair(pub, sec) == 0);
        int one = 1;
        CHECK(zmq_setsockopt(r, ZMQ_CURVE_SERVER, &one, sizeof one) == 0);
        CHECK(zmq_setsockopt(r, ZMQ_CURVE_SECRETKEY, sec, 40) == 0);
    }
    CHECK(zmq_bind(r, "tcp://127.0.0.1:*") == 0);
    char ep[128];
    size_t l = sizeof ep;
    CHECK(zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &l) == 0);
    gb_probe_t p = gb_zmq_probe(ep, 1000, said, saidlen);
    zmq_close(r);
    zmq_ctx_term(ctx);
    return p;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    char said[96], out[256];
    if (strcmp(c, "refused") == 0) {
        int port, fd = listener(&port);
        close(fd); /* the port is free again: nothing listens */
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        CHECK(gb_zmq_probe(ep, 500, said, sizeof said) == GB_PROBE_REFUSED);
        CHECKF(strstr(said, "refused"), "%s", said);
        CHECK(gb_probe_str(GB_PROBE_REFUSED, said, 0, out, sizeof out));
        CHECKF(strstr(out, "nothing listens there (Connection refused)"), "%s", out);
    } else if (strcmp(c, "foreign") == 0) {
        CHECK(probe_server("line", said, sizeof said) == GB_PROBE_FOREIGN);
        CHECKF(strcmp(said, "HTTP/1.1 400 Bad Request") == 0, "%s", said);
        CHECK(gb_probe_str(GB_PROBE_FOREIGN, said, 1, out, sizeof out));
        CHECKF(strstr(out, "does not speak ZeroMQ (it answered \"HTTP/1.1 400 Bad Request\")"),
               "%s", out);
    } else if (strcmp(c, "closed") == 0) {
        CHECK(probe_server("close", said, sizeof said) == GB_PROBE_CLOSED);
        CHECK(gb_probe_str(GB_PROBE_CLOSED, said, 0, out, sizeof out));
        CHECKF(strstr(out, "closed the connection without a ZeroMQ greeting"), "%s", out);
    } else if (strcmp(c, "silent") == 0) {
        CHECK(probe_server("silent", said, sizeof said) == GB_PROBE_SILENT);
        CHECK(gb_probe_str(GB_PROBE_SILENT, said, 0, out, sizeof out));
        CHECKF(strstr(out, "sent no ZeroMQ greeting"), "%s", out);
    } else if (strcmp(c, "zmq_null") == 0) {
        CHECK(probe_zmq(0, said, sizeof said) == GB_PROBE_ZMQ_NULL);
        CHECKF(strcmp(said, "NULL") == 0, "%s", said);
        /* without keys the probe has nothing to add; with keys it says why */
        CHECK(!gb_probe_str(GB_PROBE_ZMQ_NULL, said, 0, out, sizeof out));
        CHECK(gb_probe_str(GB_PROBE_ZMQ_NULL, said, 1, out, sizeof out));
        CHECKF(strstr(out, "does not speak CURVE"), "%s", out);
    } else if (strcmp(c, "zmq_curve") == 0) {
        CHECK(probe_zmq(1, said, sizeof said) == GB_PROBE_ZMQ_CURVE);
        CHECK(gb_probe_str(GB_PROBE_ZMQ_CURVE, said, 0, out, sizeof out));
        CHECKF(strstr(out, "requires CURVE keys"), "%s", out);
        CHECK(!gb_probe_str(GB_PROBE_ZMQ_CURVE, said, 1, out, sizeof out));
    } else if (strcmp(c, "ipc_missing") == 0) {
        CHECK(gb_zmq_probe("ipc:///nonexistent-dir/x.sock", 500, said, sizeof said) ==
              GB_PROBE_REFUSED);
        CHECKF(strstr(said, "No such file"), "%s", said);
        /* what it cannot read it does not judge */
        CHECK(gb_zmq_probe("inproc://x", 500, said, sizeof said) == GB_PROBE_UNKNOWN);
        CHECK(gb_zmq_probe("tcp://nocolon", 500, said, sizeof said) == GB_PROBE_UNKNOWN);
        CHECK(!gb_probe_str(GB_PROBE_UNKNOWN, said, 0, out, sizeof out));
    } else if (strcmp(c, "unreachable") == 0) {
        /* no route (the kernel refuses TCP to a multicast address): the
         * network, not "nothing listens there" */
        CHECK(gb_zmq_probe("tcp://224.0.0.1:5555", 500, said, sizeof said) == GB_PROBE_UNREACHABLE);
        CHECK(gb_probe_str(GB_PROBE_UNREACHABLE, said, 0, out, sizeof out));
        CHECKF(strstr(out, "cannot reach it (Network is unreachable): is the network up"), "%s",
               out);
    } else if (strcmp(c, "no_name") == 0) {
        /* .invalid never resolves (RFC 6761) */
        CHECK(gb_zmq_probe("tcp://gb-no-such-host.invalid:5555", 2000, said, sizeof said) ==
              GB_PROBE_NO_NAME);
        CHECK(gb_probe_str(GB_PROBE_NO_NAME, said, 0, out, sizeof out));
        CHECKF(strstr(out, "the host name does not resolve (gb-no-such-host.invalid: "), "%s", out);
    } else {
        fprintf(stderr, "unknown case '%s'\n", c);
        return 2;
    }
    puts("ok");
    return 0;
}
