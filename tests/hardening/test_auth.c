/* test_auth.c - the allow-list and the ZAP handler (coordinator/auth.h),
 * with real CURVE sockets on loopback.
 *
 *   test_auth CASE
 *
 * zap_pitfall shows first what the handler is for: a CURVE server with no
 * ZAP handler in its context admits a client whose key nobody listed. The
 * same client is refused once gb_auth is bound, a listed one is admitted
 * (and its messages carry its key as User-Id), and a plaintext client never
 * gets a message through. reload swaps the list under open sockets.
 * zap_roles: a key with role=agent or role=control gets through only the
 * endpoint (ZAP domain) of its role, one without (or role=any) both, and a
 * reload that changes a role applies to the next handshake. */
#define _POSIX_C_SOURCE 200809L
#include "auth.h"
#include "check.h"
#include "gb_curve.h"
#include "gb_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

typedef struct pair {
    char pub[41], sec[41];
} pair_t;

static pair_t keypair(void) {
    pair_t p;
    CHECK(zmq_curve_keypair(p.pub, p.sec) == 0);
    return p;
}

static char dir[256];

static const char *write_list(const char *text) {
    static char p[300];
    char err[256];
    snprintf(p, sizeof p, "%s/authorized", dir);
    CHECKF(gb_write_file_atomic(p, text, strlen(text), err, sizeof err) == 0, "%s", err);
    return p;
}

/* A CURVE ROUTER server bound on an ephemeral loopback port; with ZAP
 * domain (the coordinator's endpoint names) when not NULL. */
static void *server_on(void *ctx, const pair_t *k, const char *domain, char *ep, size_t eplen) {
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    char err[256];
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    CHECKF(gb_curve_server_apply(s, k->sec, err, sizeof err) == 0, "%s", err);
    if (domain) CHECK(zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) == 0);
    CHECK(zmq_bind(s, "tcp://127.0.0.1:*") == 0);
    CHECK(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &eplen) == 0);
    return s;
}

static void *server(void *ctx, const pair_t *k, char *ep, size_t eplen) {
    return server_on(ctx, k, NULL, ep, eplen);
}

/* A DEALER that sends "hello" at once (queued until the handshake is
 * done); with CURVE when me is non-NULL. */
static void *client(void *ctx, const char *ep, const pair_t *me, const pair_t *srv) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (me) {
        gb_curve_client_t k;
        memcpy(k.public_key, me->pub, 41);
        memcpy(k.secret_key, me->sec, 41);
        memcpy(k.server_key, srv->pub, 41);
        char err[256];
        CHECK(gb_curve_client_apply(s, &k, err, sizeof err) == 0);
    }
    CHECK(zmq_connect(s, ep) == 0);
    CHECK(zmq_send(s, "hello", 5, 0) == 5);
    return s;
}

/* Serve ZAP (when auth) and wait up to ms for a message on srv: 1 with
 * its User-Id in user (may be ""), 0 on timeout. */
static int pump(gb_auth_t *auth, void *srv, int ms, char *user, size_t userlen) {
    int64_t end = gb_mono_ms() + ms;
    while (gb_mono_ms() < end) {
        zmq_pollitem_t it[2] = {{srv, 0, ZMQ_POLLIN, 0},
                                {auth ? gb_auth_socket(auth) : NULL, 0, ZMQ_POLLIN, 0}};
        zmq_poll(it, auth ? 2 : 1, 50);
        if (auth && (it[1].revents & ZMQ_POLLIN)) gb_auth_serve(auth);
        if (it[0].revents & ZMQ_POLLIN) {
            zmq_msg_t id, m;
            zmq_msg_init(&id);
            zmq_msg_init(&m);
            CHECK(zmq_msg_recv(&id, srv, 0) >= 0);
            CHECK(zmq_msg_recv(&m, srv, 0) == 5);
            const char *u = zmq_msg_gets(&m, "User-Id");
            snprintf(user, userlen, "%s", u ? u : "");
            zmq_msg_close(&id);
            zmq_msg_close(&m);
            return 1;
        }
    }
    return 0;
}

/* parse_large: a list of GB_AUTH_MAX_KEYS keys parses, and one whose last
 * line repeats an entry in its middle is refused naming both (keys of
 * pseudo-random bytes: any 32 bytes are a Z85 key, and keypairs are slow) */
static void parse_large(void) {
    size_t cap = (size_t)GB_AUTH_MAX_KEYS * 64, len = 0;
    char *text = malloc(cap), err[300], dup[41] = "";
    uint64_t x = 42;
    CHECK(text);
    for (int i = 0; i < GB_AUTH_MAX_KEYS; i++) {
        uint8_t bin[32];
        char key[41];
        for (size_t k = 0; k < sizeof bin; k += 8) { /* splitmix64 */
            uint64_t z = (x += 0x9e3779b97f4a7c15u);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
            z ^= z >> 31;
            memcpy(bin + k, &z, 8);
        }
        CHECK(zmq_z85_encode(key, bin, sizeof bin));
        if (i == 49999) memcpy(dup, key, sizeof key);
        len += (size_t)snprintf(text + len, cap - len, "%s node-%d\n", key, i + 1);
    }
    gb_auth_entry_t *v = NULL;
    size_t n = 0;
    CHECKF(gb_auth_parse(text, len, &v, &n, err, sizeof err) == 0, "%s", err);
    CHECK(n == GB_AUTH_MAX_KEYS && strcmp(v[49999].key, dup) == 0);
    free(v);
    /* the last line (100,000) again the key of entry 50,000 */
    char *last = text + len - 1;
    while (last > text && last[-1] != '\n')
        last--;
    len = (size_t)(last - text) + (size_t)snprintf(last, cap - (size_t)(last - text), "%s\n", dup);
    CHECK(gb_auth_parse(text, len, &v, &n, err, sizeof err) != 0 && v == NULL && n == 0);
    CHECKF(strstr(err, "line 100000: the key of entry 50000 again (node-50000)"), "%s", err);
    free(text);
}

/* Entry e of a parsed list is KEY, NAME and ROLE, or the test fails
 * printing what it is (a macro: the failure names the caller's line). */
#define CHECK_ENTRY(e, k, nm, r)                                                                   \
    CHECKF(strcmp((e).key, (k)) == 0 && strcmp((e).name, (nm)) == 0 && (e).role == (r),            \
           "'%s' '%s' %s", (e).key, (e).name, gb_auth_role_name((e).role))

static void parse_case(const char *c) {
    if (strcmp(c, "parse_large") == 0) {
        parse_large();
        return;
    }
    pair_t a = keypair(), b = keypair(), d = keypair(), e = keypair();
    char text[1000], err[300];
    gb_auth_entry_t *v = NULL;
    size_t n = 0;
    if (strcmp(c, "parse_roles") == 0) {
        /* a role before the key, OpenSSH-style; none is both endpoints */
        snprintf(text, sizeof text,
                 "role=agent %s node-a\n\trole=control\t %s alice  # a person\n%s bob\n"
                 "role=any %s  carol's-role=ops  # role=agent once\n",
                 a.pub, b.pub, d.pub, e.pub);
        CHECKF(gb_auth_parse(text, strlen(text), &v, &n, err, sizeof err) == 0, "%s", err);
        CHECK(n == 4);
        CHECK_ENTRY(v[0], a.pub, "node-a", GB_AUTH_ROLE_AGENT);
        CHECK_ENTRY(v[1], b.pub, "alice", GB_AUTH_ROLE_CONTROL);
        CHECK_ENTRY(v[2], d.pub, "bob", GB_AUTH_ROLE_ANY);
        /* "role=" within a word of the name, or in a comment, is no role
         * (one after the key is refused: parse_role_after_key) */
        CHECK_ENTRY(v[3], e.pub, "carol's-role=ops", GB_AUTH_ROLE_ANY);
        free(v);
        v = NULL;
        CHECK(strcmp(gb_auth_role_name(GB_AUTH_ROLE_AGENT), "agent") == 0 &&
              strcmp(gb_auth_role_name(GB_AUTH_ROLE_CONTROL), "control") == 0 &&
              strcmp(gb_auth_role_name(GB_AUTH_ROLE_ANY), "any") == 0);
        return;
    }
    if (strcmp(c, "parse_ok") == 0) {
        snprintf(text, sizeof text,
                 "# fleet\r\n\n  %s   node-a  rack 1 \r\n%s\n\t\n# end\n%s person", a.pub, b.pub,
                 d.pub);
        CHECKF(gb_auth_parse(text, strlen(text), &v, &n, err, sizeof err) == 0, "%s", err);
        CHECK(n == 3);
        CHECK_ENTRY(v[0], a.pub, "node-a  rack 1", GB_AUTH_ROLE_ANY);
        CHECK_ENTRY(v[1], b.pub, "", GB_AUTH_ROLE_ANY);
        CHECK_ENTRY(v[2], d.pub, "person", GB_AUTH_ROLE_ANY); /* no final newline */
        free(v);
        /* '#' after a blank ends the name ("alice  # person" was the name);
         * a '#' inside a name or a key stays */
        snprintf(text, sizeof text, "%s   alice  # person\n%s #only a note\n%s a#b\n", a.pub, b.pub,
                 d.pub);
        CHECKF(gb_auth_parse(text, strlen(text), &v, &n, err, sizeof err) == 0, "%s", err);
        CHECK(n == 3);
        CHECK_ENTRY(v[0], a.pub, "alice", GB_AUTH_ROLE_ANY);
        CHECK_ENTRY(v[1], b.pub, "", GB_AUTH_ROLE_ANY);
        CHECK_ENTRY(v[2], d.pub, "a#b", GB_AUTH_ROLE_ANY);
        free(v);
        /* an empty list is valid: it admits nobody */
        CHECK(gb_auth_parse("# nobody\n", 9, &v, &n, err, sizeof err) == 0 && n == 0 && !v);
        /* not NUL-terminated: only len bytes are read */
        snprintf(text, sizeof text, "%sXXXX", a.pub);
        CHECK(gb_auth_parse(text, 40, &v, &n, err, sizeof err) == 0 && n == 1);
        free(v);
        return;
    }
    const char *want = NULL;
    if (strcmp(c, "parse_bad_key") == 0) {
        snprintf(text, sizeof text, "%s\n%.39s\n", a.pub, b.pub);
        want = "line 2: not a public key";
    } else if (strcmp(c, "parse_secret_key_line") == 0) {
        snprintf(text, sizeof text, "secret-key = %s\n", a.sec); /* a pasted .key file */
        want = "line 1: not a public key";
    } else if (strcmp(c, "parse_long_name") == 0) {
        snprintf(text, sizeof text, "%s %070d\n", a.pub, 7);
        want = "longer than 63 bytes";
    } else if (strcmp(c, "parse_twice") == 0) {
        /* a key listed twice (under two names, say) is a mistake to point at */
        snprintf(text, sizeof text, "%s alice\n%s\n%s alice-laptop\n", a.pub, b.pub, a.pub);
        want = "line 3: the key of entry 1 again (alice)";
    } else if (strcmp(c, "parse_control_char") == 0) {
        snprintf(text, sizeof text, "%s evil\033[2Jname\n", a.pub);
        want = "control character";
    } else if (strcmp(c, "parse_bad_role") == 0) {
        snprintf(text, sizeof text, "role=agent %s\nrole=admin %s root\n", a.pub, b.pub);
        want = "line 2: unknown role 'admin' (role=agent: the agents endpoint only, "
               "role=control: the control endpoint only, role=any or none: both)";
    } else if (strcmp(c, "parse_bad_role_text") == 0) {
        /* what is echoed is cut and has no control character */
        snprintf(text, sizeof text, "role=\033[2J%s %s\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", a.pub);
        want = "line 1: unknown role '?[2Jaaaaaaaaaaaaaaaaaaaa...'";
    } else if (strcmp(c, "parse_unknown_option") == 0) {
        snprintf(text, sizeof text, "%s\nfoo=bar %s\n", a.pub, b.pub);
        want = "line 2: unknown option 'foo=bar' before the key (the only one is role=agent, "
               "role=control or role=any)";
    } else if (strcmp(c, "parse_role_no_key") == 0) {
        snprintf(text, sizeof text, "%s\nrole=control  # alice, key to come\n", a.pub);
        want = "line 2: role=control but no key after it";
    } else if (strcmp(c, "parse_role_no_key_eol") == 0) {
        snprintf(text, sizeof text, "role=agent\t\r\n%s\n", a.pub);
        want = "line 1: role=agent but no key after it";
    } else if (strcmp(c, "parse_role_bad_key") == 0) {
        /* a key cut short after a role: said to be no key, and how a line
         * goes; not an unknown option for the '=' it holds (Z85 has '=',
         * but no option is 39 characters long) */
        snprintf(text, sizeof text, "role=agent %.30s=%.8s node-a\n", a.pub, a.pub + 31);
        want = "line 1: not a public key (40 Z85 characters, as in a NAME.pub file, optionally "
               "preceded by a role and followed by a name: [role=agent|control] KEY [NAME])";
    } else if (strcmp(c, "parse_role_twice") == 0) {
        snprintf(text, sizeof text, "role=agent role=control %s\n", a.pub);
        want = "line 1: more than one role";
    } else if (strcmp(c, "parse_role_after_key") == 0) {
        /* would have named the key "node-a role=agent", for both endpoints */
        snprintf(text, sizeof text, "%s node-a role=agent\n", a.pub);
        want = "line 1: a role after the key: it goes before the key (role=agent KEY name)";
    } else if (strcmp(c, "parse_twice_roles") == 0) {
        /* one key with two roles is not two entries: still a duplicate */
        snprintf(text, sizeof text, "role=agent %s node-a\n%s\nrole=control %s node-a-ops\n", a.pub,
                 b.pub, a.pub);
        want = "line 3: the key of entry 1 again (node-a): one line without a role lets a key "
               "use both endpoints";
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    CHECKF(gb_auth_parse(text, strlen(text), &v, &n, err, sizeof err) != 0, "%s: accepted", c);
    CHECKF(strstr(err, want), "'%s' lacks '%s'", err, want);
    CHECK(v == NULL && n == 0);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *c = argv[1];
    if (strncmp(c, "parse_", 6) == 0) {
        parse_case(c);
        printf("ok\n");
        return 0;
    }
    snprintf(dir, sizeof dir, "%s/gb-auth-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(dir));
    pair_t srv = keypair(), listed = keypair(), stranger = keypair();
    char ep[128], user[64], err[600], list[200];
    if (strcmp(c, "zap_pitfall") == 0) {
        /* 1. libzmq alone: no handler in this context, so a CURVE server
         *    admits a key nobody listed */
        void *bare = zmq_ctx_new();
        void *s0 = server(bare, &srv, ep, sizeof ep);
        void *c0 = client(bare, ep, &stranger, &srv);
        CHECKF(pump(NULL, s0, 3000, user, sizeof user),
               "a CURVE server without a ZAP handler did not admit the stranger: the pitfall "
               "this test documents is gone from libzmq");
        printf("without a ZAP handler: the unlisted key got a message through\n");
        zmq_close(c0);
        zmq_close(s0);
        zmq_ctx_term(bare);
        /* 2. the same with gb_auth bound first: refused; a listed key passes */
        void *ctx = zmq_ctx_new();
        snprintf(list, sizeof list, "%s the-listed-one\n", listed.pub);
        gb_auth_t *auth = gb_auth_new(ctx, write_list(list), err, sizeof err);
        CHECKF(auth, "%s", err);
        void *s1 = server(ctx, &srv, ep, sizeof ep);
        void *c1 = client(ctx, ep, &stranger, &srv);
        CHECKF(!pump(auth, s1, 1500, user, sizeof user), "the stranger got through gb_auth");
        void *c2 = client(ctx, ep, NULL, NULL); /* plaintext */
        CHECKF(!pump(auth, s1, 1000, user, sizeof user), "a plaintext client got through");
        void *c3 = client(ctx, ep, &listed, &srv);
        CHECKF(pump(auth, s1, 3000, user, sizeof user), "the listed key was not admitted");
        CHECKF(strcmp(user, listed.pub) == 0, "User-Id '%s' is not the client's key", user);
        /* a client that pins the wrong server key never gets through either */
        pair_t impostor = keypair();
        void *c4 = client(ctx, ep, &listed, &impostor);
        CHECKF(!pump(auth, s1, 1000, user, sizeof user), "a wrong server key got through");
        printf("with gb_auth: stranger, plaintext and wrong server key refused; listed admitted\n");
        zmq_close(c1);
        zmq_close(c2);
        zmq_close(c3);
        zmq_close(c4);
        zmq_close(s1);
        gb_auth_destroy(&auth);
        CHECK(auth == NULL);
        zmq_ctx_term(ctx);
    } else if (strcmp(c, "reload") == 0) {
        void *ctx = zmq_ctx_new();
        snprintf(list, sizeof list, "%s\n", listed.pub);
        gb_auth_t *auth = gb_auth_new(ctx, write_list(list), err, sizeof err);
        CHECKF(auth, "%s", err);
        CHECK(gb_auth_count(auth) == 1 && gb_auth_allowed(auth, listed.pub));
        CHECK(!gb_auth_allowed(auth, stranger.pub) && !gb_auth_allowed(auth, NULL));
        void *s = server(ctx, &srv, ep, sizeof ep);
        void *c1 = client(ctx, ep, &stranger, &srv);
        CHECK(!pump(auth, s, 1000, user, sizeof user));
        zmq_close(c1);
        /* the stranger is added, the listed key removed */
        snprintf(list, sizeof list, "%s added\n", stranger.pub);
        write_list(list);
        CHECKF(gb_auth_reload(auth, err, sizeof err) == 0, "%s", err);
        CHECK(gb_auth_allowed(auth, stranger.pub) && !gb_auth_allowed(auth, listed.pub));
        CHECK(strcmp(gb_auth_name(auth, stranger.pub), "added") == 0);
        void *c2 = client(ctx, ep, &stranger, &srv);
        CHECKF(pump(auth, s, 3000, user, sizeof user) && strcmp(user, stranger.pub) == 0,
               "the added key was not admitted after the reload");
        void *c3 = client(ctx, ep, &listed, &srv);
        CHECKF(!pump(auth, s, 1000, user, sizeof user), "the removed key still got in");
        /* a broken file leaves the list as it was */
        write_list("garbage\n");
        CHECK(gb_auth_reload(auth, err, sizeof err) != 0);
        CHECKF(strstr(err, "line 1"), "%s", err);
        CHECK(gb_auth_count(auth) == 1 && gb_auth_allowed(auth, stranger.pub));
        unlink(gb_auth_path(auth));
        CHECK(gb_auth_reload(auth, err, sizeof err) != 0);
        CHECK(gb_auth_allowed(auth, stranger.pub));
        zmq_close(c2);
        zmq_close(c3);
        zmq_close(s);
        gb_auth_destroy(&auth);
        zmq_ctx_term(ctx);
    } else if (strcmp(c, "zap_roles") == 0) {
        /* the coordinator's two endpoints, by their ZAP domains */
        void *ctx = zmq_ctx_new();
        pair_t ag = keypair(), ctl = keypair(), both = keypair(), any = keypair();
        char big[600], ep_ag[128], ep_ctl[128];
        snprintf(big, sizeof big,
                 "role=agent %s node-a\nrole=control %s alice\n%s bob\n"
                 "role=any %s carol\n",
                 ag.pub, ctl.pub, both.pub, any.pub);
        gb_auth_t *auth = gb_auth_new(ctx, write_list(big), err, sizeof err);
        CHECKF(auth, "%s", err);
        CHECK(gb_auth_allowed_on(auth, ag.pub, GB_AUTH_AGENTS) &&
              !gb_auth_allowed_on(auth, ag.pub, GB_AUTH_CONTROL));
        CHECK(!gb_auth_allowed_on(auth, ctl.pub, GB_AUTH_AGENTS) &&
              gb_auth_allowed_on(auth, ctl.pub, GB_AUTH_CONTROL));
        CHECK(gb_auth_allowed_on(auth, both.pub, GB_AUTH_AGENTS) &&
              gb_auth_allowed_on(auth, both.pub, GB_AUTH_CONTROL));
        CHECK(gb_auth_allowed_on(auth, any.pub, GB_AUTH_AGENTS) &&
              gb_auth_allowed_on(auth, any.pub, GB_AUTH_CONTROL));
        /* a domain that is neither: only keys without a role */
        CHECK(!gb_auth_allowed_on(auth, ag.pub, "") && !gb_auth_allowed_on(auth, ctl.pub, NULL) &&
              gb_auth_allowed_on(auth, both.pub, ""));
        CHECK(!gb_auth_allowed_on(auth, stranger.pub, GB_AUTH_AGENTS) &&
              !gb_auth_allowed_on(auth, NULL, GB_AUTH_AGENTS));
        /* listed whatever the role, for the pin and the logs */
        CHECK(gb_auth_allowed(auth, ag.pub) && gb_auth_allowed(auth, ctl.pub));
        char why[400], want[400];
        gb_auth_why_not(auth, ag.pub, GB_AUTH_CONTROL, "LIST", why, sizeof why);
        snprintf(want, sizeof want,
                 "key %s (node-a) may use only the agents endpoint (role=agent in LIST)", ag.pub);
        CHECKF(strcmp(why, want) == 0, "'%s'", why);
        gb_auth_why_not(auth, stranger.pub, GB_AUTH_CONTROL, "LIST", why, sizeof why);
        snprintf(want, sizeof want, "key %s is not in LIST", stranger.pub);
        CHECKF(strcmp(why, want) == 0, "'%s'", why);
        gb_auth_why_not(auth, ag.pub, GB_AUTH_AGENTS, "LIST", why, sizeof why);
        CHECK(why[0] == '\0');
        /* real handshakes on both endpoints */
        void *s_ag = server_on(ctx, &srv, GB_AUTH_AGENTS, ep_ag, sizeof ep_ag);
        void *s_ctl = server_on(ctx, &srv, GB_AUTH_CONTROL, ep_ctl, sizeof ep_ctl);
        struct {
            const pair_t *k;
            const char *name;
            int on_ag, on_ctl;
        } want_of[] = {{&ag, "role=agent", 1, 0},
                       {&ctl, "role=control", 0, 1},
                       {&both, "no role", 1, 1},
                       {&any, "role=any", 1, 1}};
        for (size_t i = 0; i < sizeof want_of / sizeof want_of[0]; i++) {
            void *c1 = client(ctx, ep_ag, want_of[i].k, &srv);
            int got = pump(auth, s_ag, want_of[i].on_ag ? 3000 : 1000, user, sizeof user);
            CHECKF(got == want_of[i].on_ag, "%s on the agents endpoint: %s", want_of[i].name,
                   got ? "admitted" : "refused");
            CHECK(!got || strcmp(user, want_of[i].k->pub) == 0);
            void *c2 = client(ctx, ep_ctl, want_of[i].k, &srv);
            got = pump(auth, s_ctl, want_of[i].on_ctl ? 3000 : 1000, user, sizeof user);
            CHECKF(got == want_of[i].on_ctl, "%s on the control endpoint: %s", want_of[i].name,
                   got ? "admitted" : "refused");
            CHECK(!got || strcmp(user, want_of[i].k->pub) == 0);
            zmq_close(c1);
            zmq_close(c2);
        }
        /* a reload that gives bob role=control: refused on the agents
         * endpoint from its next handshake */
        snprintf(big, sizeof big, "role=control %s bob\n", both.pub);
        write_list(big);
        CHECKF(gb_auth_reload(auth, err, sizeof err) == 0, "%s", err);
        CHECK(!gb_auth_allowed_on(auth, both.pub, GB_AUTH_AGENTS) &&
              gb_auth_allowed_on(auth, both.pub, GB_AUTH_CONTROL));
        void *c3 = client(ctx, ep_ag, &both, &srv);
        CHECKF(!pump(auth, s_ag, 1000, user, sizeof user),
               "role=control got through the agents endpoint after the reload");
        void *c4 = client(ctx, ep_ctl, &both, &srv);
        CHECKF(pump(auth, s_ctl, 3000, user, sizeof user), "role=control refused on control");
        printf("roles: each key admitted on its role's endpoints only, also after a reload\n");
        zmq_close(c3);
        zmq_close(c4);
        zmq_close(s_ag);
        zmq_close(s_ctl);
        gb_auth_destroy(&auth);
        zmq_ctx_term(ctx);
    } else if (strcmp(c, "new_errors") == 0) {
        void *ctx = zmq_ctx_new();
        char missing[300];
        snprintf(missing, sizeof missing, "%s/none", dir);
        CHECK(gb_auth_new(ctx, missing, err, sizeof err) == NULL);
        CHECKF(strstr(err, "authorized keys"), "%s", err);
        snprintf(list, sizeof list, "%s\n", listed.pub);
        gb_auth_t *a1 = gb_auth_new(ctx, write_list(list), err, sizeof err);
        CHECK(a1);
        /* one handler per context: a second bind fails cleanly */
        CHECK(gb_auth_new(ctx, write_list(list), err, sizeof err) == NULL);
        CHECKF(strstr(err, "zeromq.zap.01"), "%s", err);
        gb_auth_destroy(&a1);
        gb_auth_destroy(&a1); /* no-op on NULL */
        zmq_ctx_term(ctx);
    } else {
        CHECKF(0, "unknown case %s", c);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
