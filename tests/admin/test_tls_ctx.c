/*
 * test_tls_ctx.c - the listener contexts (admin/tls_ctx.c), exercised by
 * real handshakes between an OpenSSL client and the built SSL_CTX over a
 * memory BIO pair: SNI by exact name, wildcard and default, RSA against
 * ECDSA by the client's signature algorithms, versions, ALPN by the
 * listener's protocols (and RFC 9113's TLS 1.2 cipher rule), resumption by
 * ticket for TLS 1.2 and 1.3 (and not across contexts, nor across a
 * client-auth boundary, nor with tickets off), tickets shared by contexts
 * with one ticket_secret, a listener without certificates refusing every
 * handshake, ticket-key rotation with its grace period, client
 * certificates, and a pool's client context offering ALPN by its protocol.
 * Certificates are made by the openssl CLI at test time (tls_certs.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "admin/config.h"
#include "admin/snapshot.h"
#include "admin/tls.h"
#include "upstream/upstream.h"
#include "tls_certs.h"

/* A listener from the "tls" body <tls> (' for "), certificate names
 * expanded: "@ec" stands for the cert and key files of ec. */
static struct adm_tls_listener *listener(const char *tls)
{
    char body[8192], doc[9000];
    size_t o = 0;
    for (const char *p = tls; *p && o < sizeof(body) - 600;) {
        if (*p == '@') {
            char name[32];
            size_t n = strcspn(p + 1, "'},] ");
            snprintf(name, sizeof(name), "%.*s", (int)n, p + 1);
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "'cert': '%s/%s.pem', 'key': '%s/%s.key'", tls_certs(), name,
                                  tls_certs(), name);
            p += n + 1;
        } else {
            body[o++] = *p == '\'' ? '"' : *p;
            p++;
        }
    }
    body[o] = '\0';
    for (char *q = body; *q; q++)
        if (*q == '\'')
            *q = '"';
    snprintf(doc, sizeof(doc),
             "{\"listeners\": [{\"address\": \"127.0.0.1:8443\", \"tls\": {%s}}]}", body);
    struct adm_errors e;
    adm_errors_init(&e);
    struct adm_config *c = adm_config_parse(doc, strlen(doc), &e);
    if (!c)
        ck_abort_msg("refused: %s\n%s", adm_errors_format(&e), doc);
    struct adm_tls_listener *t = c->listeners[0].tls;
    c->listeners[0].tls = NULL; /* ours now */
    adm_config_free(c);
    return t;
}

/* The context of a listener with "tls": {<tls>} and the protocols
 * <protocols> (ADM_PROTO_* bits). */
static struct adm_tls_ctx *ctx_for(const char *tls, unsigned protocols)
{
    char why[256];
    struct adm_tls_listener *t = listener(tls);
    struct adm_tls_ctx *c = adm_tls_ctx_new(t, protocols, why, sizeof(why));
    ck_assert_msg(c != NULL, "%s", why);
    ck_assert_uint_eq(adm_tls_ctx_protocols(c), protocols);
    adm_tls_listener_free(t); /* the context keeps its own references */
    return c;
}

/* ... with a TLS listener's default protocols, h1 and h2. */
static struct adm_tls_ctx *ctx_of(const char *tls)
{
    return ctx_for(tls, ADM_PROTO_H1 | ADM_PROTO_H2);
}

#define STD                                                                                        \
    "'certificates': [{@dflt}, {@ec, 'hosts': ['api.example.com']}, {@rsa, 'hosts': "              \
    "['api.example.com']}, {@wild, 'hosts': ['*.w.example.com']}]"

struct hs {
    const char *sni;
    const char *sigalgs; /* client's, NULL: OpenSSL's default */
    int max_version;     /* 0: TLS 1.3 */
    const char *alpn;    /* wire format, NULL: none */
    SSL_SESSION *resume;
    const char *client_cert; /* a name from tls_certs.h, NULL: none */
    const char *ciphers;     /* the client's TLS 1.2 cipher list, NULL: OpenSSL's default */
    SSL_CTX *client;         /* the client's context as it is, NULL: a fresh one as above */
    /* out */
    int ok;
    int resumed;
    char subject[256];
    int version;
    char alpn_got[32];
    SSL_SESSION *session; /* the client's, after the server's tickets arrived */
    int group;
    int is_h2;           /* adm_tls_alpn_is_h2() of the server's side */
    int h2_cipher;       /* adm_tls_h2_refused_by_cipher() of the server's side */
    unsigned char alert; /* the alert the client received, 0: none */
};

/* Keeps the last alert a client received (SSL_set_info_callback). */
static void alert_seen(const SSL *ssl, int where, int ret)
{
    struct hs *h = SSL_get_app_data(ssl);
    if ((where & SSL_CB_READ_ALERT) && h)
        h->alert = (unsigned char)(ret & 0xff);
}

/* A fresh client context <cctx> as <h> asks: any version up to its
 * max_version, its certificate and ciphers, no session cache. */
static void client_settings(SSL_CTX *cctx, const struct hs *h)
{
    SSL_CTX_set_min_proto_version(cctx, TLS1_VERSION);
    SSL_CTX_set_security_level(cctx, 0);
    SSL_CTX_set_max_proto_version(cctx, h->max_version ? h->max_version : TLS1_3_VERSION);
    /* no client cache: freeing an unshut connection would mark its session
     * not resumable there */
    SSL_CTX_set_session_cache_mode(cctx, SSL_SESS_CACHE_OFF);
    if (h->client_cert) {
        char f[600];
        snprintf(f, sizeof(f), "%s/%s.pem", tls_certs(), h->client_cert);
        ck_assert_int_eq(SSL_CTX_use_certificate_file(cctx, f, SSL_FILETYPE_PEM), 1);
        snprintf(f, sizeof(f), "%s/%s.key", tls_certs(), h->client_cert);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(cctx, f, SSL_FILETYPE_PEM), 1);
    }
    if (h->ciphers)
        ck_assert_int_eq(SSL_CTX_set_cipher_list(cctx, h->ciphers), 1);
}

/* One handshake of a fresh client against <c>, then a byte each way so that
 * TLS 1.3 tickets reach the client. Bounded in rounds. */
static void handshake(struct adm_tls_ctx *c, struct hs *h)
{
    SSL_CTX *cctx = h->client ? h->client : SSL_CTX_new(TLS_client_method());
    SSL *cl, *sv;
    BIO *bc, *bs;
    int cdone = 0, sdone = 0;

    ck_assert_ptr_nonnull(cctx);
    if (h->client)
        ck_assert_int_eq(SSL_CTX_up_ref(cctx), 1);
    else
        client_settings(cctx, h);
    cl = SSL_new(cctx);
    sv = SSL_new(adm_tls_ctx_ssl(c));
    SSL_set_app_data(cl, h);
    SSL_set_info_callback(cl, alert_seen);
    ck_assert_int_eq(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
    SSL_set_bio(cl, bc, bc);
    SSL_set_bio(sv, bs, bs);
    SSL_set_connect_state(cl);
    SSL_set_accept_state(sv);
    if (h->sni)
        SSL_set_tlsext_host_name(cl, h->sni);
    if (h->sigalgs)
        ck_assert_int_eq(SSL_set1_sigalgs_list(cl, h->sigalgs), 1);
    if (h->alpn)
        SSL_set_alpn_protos(cl, (const unsigned char *)h->alpn, (unsigned)strlen(h->alpn));
    if (h->resume)
        SSL_set_session(cl, h->resume);
    for (int i = 0; i < 50 && !(cdone && sdone); i++) {
        int rc;
        if (!cdone) {
            rc = SSL_do_handshake(cl);
            if (rc == 1)
                cdone = 1;
            else if (SSL_get_error(cl, rc) != SSL_ERROR_WANT_READ)
                break;
        }
        if (!sdone) {
            rc = SSL_do_handshake(sv);
            if (rc == 1)
                sdone = 1;
            else if (SSL_get_error(sv, rc) != SSL_ERROR_WANT_READ)
                break;
        }
    }
    if (!cdone && !sdone)
        SSL_do_handshake(cl); /* reads the alert the server sent, if any */
    h->ok = cdone && sdone;
    h->group = adm_tls_ssl_group(sv);
    h->is_h2 = adm_tls_alpn_is_h2(sv);
    h->h2_cipher = adm_tls_h2_refused_by_cipher(sv);
    if (h->ok) {
        char b;
        ck_assert_int_eq(SSL_write(sv, "x", 1), 1);
        ck_assert_int_eq(SSL_read(cl, &b, 1), 1);
        ck_assert_int_eq(SSL_write(cl, "y", 1), 1);
        ck_assert_int_eq(SSL_read(sv, &b, 1), 1);
        h->resumed = SSL_session_reused(cl);
        ck_assert_int_eq(h->resumed, SSL_session_reused(sv));
        h->version = SSL_version(cl);
        X509 *peer = SSL_get1_peer_certificate(cl);
        h->subject[0] = '\0';
        if (peer)
            X509_NAME_oneline(X509_get_subject_name(peer), h->subject, sizeof(h->subject));
        X509_free(peer);
        const unsigned char *a;
        unsigned alen = 0;
        SSL_get0_alpn_selected(cl, &a, &alen);
        snprintf(h->alpn_got, sizeof(h->alpn_got), "%.*s", (int)alen, alen ? (const char *)a : "");
        h->session = SSL_get1_session(cl);
    }
    /* a connection freed before its shutdown marks its session not
     * resumable (ssl_clear_bad_session) */
    SSL_shutdown(cl);
    SSL_shutdown(sv);
    ERR_clear_error();
    SSL_free(cl);
    SSL_free(sv);
    SSL_CTX_free(cctx);
}

START_TEST(sni_picks_the_certificate)
{
    struct adm_tls_ctx *c = ctx_of(STD);
    struct {
        const char *sni, *sigalgs, *subject;
    } cases[] = {
        {"api.example.com", NULL, "/CN=ec"}, /* ECDSA preferred */
        {"API.Example.COM", NULL, "/CN=ec"},
        {"api.example.com", "rsa_pss_rsae_sha256:rsa_pkcs1_sha256", "/CN=rsa"},
        {"api.example.com", "ecdsa_secp256r1_sha256", "/CN=ec"},
        {"x.w.example.com", NULL, "/CN=wild"},
        {"a.b.w.example.com", NULL, "/CN=dflt"}, /* a wildcard is one label */
        {"w.example.com", NULL, "/CN=dflt"},
        {"unknown.org", NULL, "/CN=dflt"},
        {NULL, NULL, "/CN=dflt"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hs h = {.sni = cases[i].sni, .sigalgs = cases[i].sigalgs};
        handshake(c, &h);
        ck_assert_msg(h.ok, "case %zu failed", i);
        ck_assert_msg(!strcmp(h.subject, cases[i].subject), "case %zu: %s, want %s", i, h.subject,
                      cases[i].subject);
        /* TLS 1.2 picks by cipher and signature algorithms as well */
        struct hs h12 = {
            .sni = cases[i].sni, .sigalgs = cases[i].sigalgs, .max_version = TLS1_2_VERSION};
        handshake(c, &h12);
        ck_assert_msg(h12.ok && h12.version == TLS1_2_VERSION, "case %zu (1.2) failed", i);
        ck_assert_msg(!strcmp(h12.subject, cases[i].subject), "case %zu (1.2): %s", i, h12.subject);
        ck_assert_int_eq(h12.group, h.group);
        SSL_SESSION_free(h.session);
        SSL_SESSION_free(h12.session);
    }
    /* what a Host header selects, for the 421 check */
    ck_assert_int_eq(adm_tls_ctx_group(c, "api.example.com", 15),
                     adm_tls_ctx_group(c, "API.EXAMPLE.COM.", 16));
    ck_assert_int_ne(adm_tls_ctx_group(c, "api.example.com", 15),
                     adm_tls_ctx_group(c, "zz.w.example.com", 16));
    ck_assert_int_eq(adm_tls_ctx_group(c, "nope", 4), adm_tls_ctx_group(c, "", 0));
    ck_assert_int_eq(adm_tls_ctx_client_auth(c), 0);
    adm_tls_ctx_unref(c);
}
END_TEST

START_TEST(versions_and_alpn)
{
    struct adm_tls_ctx *c = ctx_of(STD);
    struct hs h = {.max_version = TLS1_1_VERSION};
    handshake(c, &h);
    ck_assert_int_eq(h.ok, 0);
    struct hs h12 = {.max_version = TLS1_2_VERSION, .alpn = "\x08http/1.1"};
    handshake(c, &h12);
    ck_assert(h12.ok);
    ck_assert_int_eq(h12.version, TLS1_2_VERSION);
    ck_assert_str_eq(h12.alpn_got, "http/1.1");
    ck_assert_int_eq(h12.is_h2, 0);
    struct hs h13 = {.alpn = "\x02h2\x08http/1.1"};
    handshake(c, &h13);
    ck_assert(h13.ok);
    ck_assert_int_eq(h13.version, TLS1_3_VERSION);
    ck_assert_str_eq(h13.alpn_got, "h2");
    ck_assert_int_eq(h13.is_h2, 1);
    /* http/1.0 alone (curl -0) is selected; the server's order wins */
    struct hs h10 = {.alpn = "\x08http/1.0"};
    handshake(c, &h10);
    ck_assert(h10.ok);
    ck_assert_str_eq(h10.alpn_got, "http/1.0");
    struct hs h10first = {.alpn = "\x08http/1.0\x08http/1.1"};
    handshake(c, &h10first);
    ck_assert(h10first.ok);
    ck_assert_str_eq(h10first.alpn_got, "http/1.1");
    /* h2 alone */
    struct hs h2only = {.alpn = "\x02h2"};
    handshake(c, &h2only);
    ck_assert(h2only.ok);
    ck_assert_str_eq(h2only.alpn_got, "h2");
    /* nothing in common: the handshake goes on without ALPN, no alert */
    struct hs unknown = {.alpn = "\x03"
                                 "foo"
                                 "\x09http/1.1x"};
    handshake(c, &unknown);
    ck_assert(unknown.ok);
    ck_assert_str_eq(unknown.alpn_got, "");
    SSL_SESSION_free(h12.session);
    SSL_SESSION_free(h13.session);
    SSL_SESSION_free(h10.session);
    SSL_SESSION_free(h10first.session);
    SSL_SESSION_free(h2only.session);
    SSL_SESSION_free(unknown.session);
    adm_tls_ctx_unref(c);

    c = ctx_of(STD ", 'min_version': '1.3'");
    struct hs only12 = {.max_version = TLS1_2_VERSION};
    handshake(c, &only12);
    ck_assert_int_eq(only12.ok, 0);
    adm_tls_ctx_unref(c);
}
END_TEST

/* ALPN follows the listener's protocols: h2 first whatever the client's
 * order; never with h1 alone; with h2 alone, a client without h2 (or
 * without ALPN) is refused with no_application_protocol. */
START_TEST(alpn_follows_protocols)
{
    static const struct {
        unsigned protocols;
        const char *offer; /* wire format, NULL: no ALPN */
        int ok;
        const char *got;
    } cases[] = {
        {ADM_PROTO_H1 | ADM_PROTO_H2, "\x08http/1.1\x02h2", 1, "h2"},
        {ADM_PROTO_H1 | ADM_PROTO_H2, "\x08http/1.1", 1, "http/1.1"},
        {ADM_PROTO_H1 | ADM_PROTO_H2, NULL, 1, ""},
        {ADM_PROTO_H1, "\x02h2\x08http/1.1", 1, "http/1.1"},
        {ADM_PROTO_H1, "\x02h2", 1, ""},
        {ADM_PROTO_H2, "\x02h2\x08http/1.1", 1, "h2"},
        {ADM_PROTO_H2, "\x08http/1.1", 0, ""},
        {ADM_PROTO_H2, NULL, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct adm_tls_ctx *c = ctx_for(STD, cases[i].protocols);
        for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
            struct hs h = {.max_version = v, .alpn = cases[i].offer};
            handshake(c, &h);
            ck_assert_msg(h.ok == cases[i].ok, "case %zu, version %x: ok %d", i, v, h.ok);
            if (h.ok) {
                ck_assert_msg(!strcmp(h.alpn_got, cases[i].got), "case %zu, version %x: %s", i, v,
                              h.alpn_got);
                ck_assert_int_eq(h.is_h2, !strcmp(cases[i].got, "h2"));
            } else {
                ck_assert_uint_eq(h.alert, SSL_AD_NO_APPLICATION_PROTOCOL);
            }
            ck_assert_int_eq(h.h2_cipher, 0);
            SSL_SESSION_free(h.session);
        }
        adm_tls_ctx_unref(c);
    }
}
END_TEST

/* RFC 9113 9.2: over TLS 1.2, h2 only with an ephemeral key exchange and an
 * AEAD cipher. The built-in list has no other TLS 1.2 suite, so the test
 * widens its context's list to reach the other branch. */
START_TEST(alpn_h2_needs_an_ephemeral_aead_suite)
{
    static const struct {
        const char *ciphers;
        int version;
        const char *got;
    } cases[] = {
        {"ECDHE-ECDSA-AES128-GCM-SHA256", TLS1_2_VERSION, "h2"},
        {"ECDHE-ECDSA-CHACHA20-POLY1305", TLS1_2_VERSION, "h2"},
        {"ECDHE-ECDSA-AES128-SHA256", TLS1_2_VERSION, "http/1.1"}, /* CBC */
        {"ECDHE-ECDSA-AES256-SHA", TLS1_2_VERSION, "http/1.1"},    /* CBC */
        {"AES128-GCM-SHA256", TLS1_2_VERSION, "http/1.1"},         /* RSA key exchange */
        {"ECDHE-ECDSA-AES128-SHA256", TLS1_3_VERSION, "h2"},       /* 1.3 suites are AEAD */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct adm_tls_ctx *c = ctx_of(STD);
        ck_assert_int_eq(SSL_CTX_set_cipher_list(adm_tls_ctx_ssl(c),
                                                 "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                                 "ECDHE-ECDSA-CHACHA20-POLY1305:"
                                                 "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA:"
                                                 "AES128-GCM-SHA256:@SECLEVEL=0"),
                         1);
        struct hs h = {.sni = "api.example.com",
                       .max_version = cases[i].version,
                       .alpn = "\x02h2\x08http/1.1",
                       .ciphers = cases[i].ciphers};
        handshake(c, &h);
        ck_assert_msg(h.ok, "case %zu: no handshake", i);
        ck_assert_msg(!strcmp(h.alpn_got, cases[i].got), "case %zu: %s", i, h.alpn_got);
        ck_assert_int_eq(h.h2_cipher, strcmp(cases[i].got, "h2") != 0);
        SSL_SESSION_free(h.session);

        /* a listener with h2 alone has nothing to fall back to */
        adm_tls_ctx_unref(c);
        c = ctx_for(STD, ADM_PROTO_H2);
        SSL_CTX_set_cipher_list(adm_tls_ctx_ssl(c),
                                "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:"
                                "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA:"
                                "AES128-GCM-SHA256:@SECLEVEL=0");
        struct hs only = {.sni = "api.example.com",
                          .max_version = cases[i].version,
                          .alpn = "\x02h2\x08http/1.1",
                          .ciphers = cases[i].ciphers};
        handshake(c, &only);
        ck_assert_int_eq(only.ok, !strcmp(cases[i].got, "h2"));
        SSL_SESSION_free(only.session);
        adm_tls_ctx_unref(c);
    }
}
END_TEST

/* Full handshake with <first>, then one offering its session with <second>:
 * whether it resumed. */
static int resumes(struct adm_tls_ctx *a, struct adm_tls_ctx *b, const char *sni1, const char *sni2,
                   int version)
{
    struct hs h1 = {.sni = sni1, .max_version = version};
    handshake(a, &h1);
    ck_assert(h1.ok);
    ck_assert_int_eq(h1.resumed, 0);
    ck_assert_ptr_nonnull(h1.session);
    struct hs h2 = {.sni = sni2, .max_version = version, .resume = h1.session};
    handshake(b, &h2);
    ck_assert(h2.ok);
    SSL_SESSION_free(h1.session);
    SSL_SESSION_free(h2.session);
    return h2.resumed;
}

START_TEST(resumption)
{
    struct adm_tls_ctx *c = ctx_of(STD), *same = ctx_of(STD);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        ck_assert_int_eq(resumes(c, c, "api.example.com", "api.example.com", v), 1);
        ck_assert_int_eq(resumes(c, c, NULL, NULL, v), 1);
        /* another context has other ticket keys: what a restart or a
         * changed listener does */
        ck_assert_int_eq(resumes(c, same, "api.example.com", "api.example.com", v), 0);
        /* another certificate group: another session id context */
        ck_assert_int_eq(resumes(c, c, "api.example.com", "x.w.example.com", v), 0);
    }
    /* one more reference, as a second snapshot holds it: the same keys */
    struct adm_tls_ctx *again = adm_tls_ctx_ref(c);
    ck_assert_int_eq(resumes(c, again, NULL, NULL, TLS1_3_VERSION), 1);
    adm_tls_ctx_unref(again);
    adm_tls_ctx_unref(same);
    adm_tls_ctx_unref(c);

    c = ctx_of(STD ", 'session_tickets': false");
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++)
        ck_assert_int_eq(resumes(c, c, NULL, NULL, v), 0);
    adm_tls_ctx_unref(c);
}
END_TEST

/* A session made without client authentication never resumes on a context
 * that verifies clients, even with the same certificates. */
START_TEST(no_resumption_across_client_auth)
{
    struct adm_tls_ctx *plain = ctx_of("'certificates': [{@ec}]");
    char ca[1200];
    snprintf(ca, sizeof(ca),
             "'certificates': [{@ec}], 'client_auth': {'ca_file': '%s/ca.pem', "
             "'mode': 'optional'}",
             tls_certs());
    struct adm_tls_ctx *auth = ctx_of(ca);
    ck_assert_int_eq(adm_tls_ctx_client_auth(auth), 1);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        ck_assert_int_eq(resumes(plain, auth, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(auth, auth, NULL, NULL, v), 1);
    }
    adm_tls_ctx_unref(plain);
    adm_tls_ctx_unref(auth);
}
END_TEST

START_TEST(client_certificates)
{
    char tls[1200];
    snprintf(tls, sizeof(tls), "'certificates': [{@ec}], 'client_auth': {'ca_file': '%s/ca.pem'}",
             tls_certs());
    struct adm_tls_ctx *req = ctx_of(tls);
    struct hs none = {0}, good = {.client_cert = "client"}, bad = {.client_cert = "expired"};
    handshake(req, &none);
    ck_assert_int_eq(none.ok, 0);
    handshake(req, &good);
    ck_assert(good.ok);
    handshake(req, &bad);
    ck_assert_int_eq(bad.ok, 0);
    SSL_SESSION_free(good.session);
    adm_tls_ctx_unref(req);

    snprintf(tls, sizeof(tls),
             "'certificates': [{@ec}], 'client_auth': {'ca_file': '%s/ca.pem', 'mode': "
             "'optional'}",
             tls_certs());
    struct adm_tls_ctx *opt = ctx_of(tls);
    struct hs none2 = {0}, good2 = {.client_cert = "client"}, bad2 = {.client_cert = "expired"};
    handshake(opt, &none2);
    ck_assert(none2.ok);
    handshake(opt, &good2);
    ck_assert(good2.ok);
    handshake(opt, &bad2);
    ck_assert_int_eq(bad2.ok, 0);
    SSL_SESSION_free(none2.session);
    SSL_SESSION_free(good2.session);
    adm_tls_ctx_unref(opt);
}
END_TEST

#define SECRET_A "'ticket_secret': '0123456789abcdef0123456789abcdef'"
#define SECRET_B "'ticket_secret': 'fedcba9876543210fedcba9876543210'"

/* Two contexts with one ticket_secret, as two nodes of a fleet (or a
 * restarted process) build them, open each other's tickets; another secret,
 * no secret, another rotation period do not; neither does another
 * certificate group, nor another client-auth setting with the same
 * secret. */
START_TEST(ticket_secret_shares_tickets)
{
    char tls[1200];
    struct adm_tls_ctx *a = ctx_of(STD ", " SECRET_A), *b = ctx_of(STD ", " SECRET_A);
    struct adm_tls_ctx *other = ctx_of(STD ", " SECRET_B), *none = ctx_of(STD);
    struct adm_tls_ctx *hourly = ctx_of(STD ", 'ticket_rotation_s': 3600, " SECRET_A);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        ck_assert_int_eq(resumes(a, b, "api.example.com", "api.example.com", v), 1);
        ck_assert_int_eq(resumes(b, a, NULL, NULL, v), 1);
        ck_assert_int_eq(resumes(a, other, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(a, none, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(none, a, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(a, hourly, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(a, b, "api.example.com", "x.w.example.com", v), 0);
    }
    adm_tls_ctx_unref(a);
    adm_tls_ctx_unref(b);
    adm_tls_ctx_unref(other);
    adm_tls_ctx_unref(none);
    adm_tls_ctx_unref(hourly);

    struct adm_tls_ctx *plain = ctx_of("'certificates': [{@ec}], " SECRET_A);
    snprintf(tls, sizeof(tls),
             "'certificates': [{@ec}], 'client_auth': {'ca_file': '%s/ca.pem', "
             "'mode': 'optional'}, " SECRET_A,
             tls_certs());
    struct adm_tls_ctx *auth = ctx_of(tls), *auth2 = ctx_of(tls);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        ck_assert_int_eq(resumes(plain, auth, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(auth, plain, NULL, NULL, v), 0);
        ck_assert_int_eq(resumes(auth, auth2, NULL, NULL, v), 1);
    }
    adm_tls_ctx_unref(plain);
    adm_tls_ctx_unref(auth);
    adm_tls_ctx_unref(auth2);
}
END_TEST

/* A fleet node's listener without certificates: every client hello, with
 * SNI or without, gets unrecognized_name and no handshake completes. */
START_TEST(no_certificates_refuses_every_handshake)
{
    json_t *body = json_pack("{s:[]}", "certificates");
    struct adm_errors e;
    struct adm_tls_listener *t = NULL;
    char why[256];

    adm_errors_init(&e);
    ck_assert_int_eq(adm_tls_listener_parse(body, "/listeners/0/tls", ADM_TLS_FLEET_NODE, &e, &t),
                     0);
    struct adm_tls_ctx *c = adm_tls_ctx_new(t, ADM_PROTO_H1 | ADM_PROTO_H2, why, sizeof(why));
    ck_assert_msg(c != NULL, "%s", why);
    adm_tls_listener_free(t);
    json_decref(body);
    const char *snis[] = {"api.example.com", NULL};
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        for (size_t i = 0; i < 2; i++) {
            struct hs h = {.sni = snis[i], .max_version = v, .alpn = "\x02h2"};
            handshake(c, &h);
            ck_assert_int_eq(h.ok, 0);
            ck_assert_int_eq(h.alert, SSL_AD_UNRECOGNIZED_NAME);
            ck_assert_int_eq(h.group, -1);
        }
    }
    ck_assert_int_eq(adm_tls_ctx_group(c, "api.example.com", 15), -1);
    ck_assert_int_eq(adm_tls_ctx_group(c, "", 0), -1);
    adm_tls_ctx_unref(c);
}
END_TEST

/* Waits until the wall clock enters a new second (a rotation period of 1 s). */
static void next_second(void)
{
    time_t t = time(NULL);
    for (int i = 0; i < 300 && time(NULL) == t; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
}

START_TEST(ticket_rotation)
{
    struct adm_tls_ctx *c = ctx_of(STD ", 'ticket_rotation_s': 1");
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        /* sealed in period p, offered in p+1: still accepted (and renewed) */
        next_second();
        struct hs h1 = {.max_version = v};
        handshake(c, &h1);
        ck_assert(h1.ok);
        next_second();
        struct hs h2 = {.max_version = v, .resume = h1.session};
        handshake(c, &h2);
        ck_assert_int_eq(h2.resumed, 1);
        /* offered in p+2: the key is gone */
        next_second();
        next_second();
        struct hs h3 = {.max_version = v, .resume = h1.session};
        handshake(c, &h3);
        ck_assert(h3.ok);
        ck_assert_int_eq(h3.resumed, 0);
        SSL_SESSION_free(h1.session);
        SSL_SESSION_free(h2.session);
        SSL_SESSION_free(h3.session);
    }
    adm_tls_ctx_unref(c);
}
END_TEST

/* The snapshot of config <doc> built after <prev> (NULL: the first), which
 * must parse and build. */
static struct adm_snapshot *snapshot_after(const char *doc, const struct adm_snapshot *prev)
{
    struct adm_errors e;
    struct adm_snapshot *s;

    adm_errors_init(&e);
    struct adm_config *c = adm_config_parse(doc, strlen(doc), &e);
    ck_assert_msg(c != NULL, "%s", adm_errors_format(&e));
    s = adm_snapshot_build(c, prev, 2, &e);
    ck_assert_ptr_nonnull(s);
    adm_errors_clear(&e);
    return s;
}

/* A snapshot built after another keeps the TLS contexts whose definition
 * did not change (admin/snapshot.c), compared by content: the same files
 * under other names are the same definition. */
START_TEST(snapshots_reuse_contexts)
{
    char doc[4096], cmd[1200];
    const char *d = tls_certs();

    snprintf(cmd, sizeof(cmd), "cp %s/ec.pem %s/ec2.pem && cp %s/ec.key %s/ec2.key", d, d, d, d);
    ck_assert_int_eq(system(cmd), 0);
#define FMT                                                                                        \
    "{\"listeners\": [{\"address\": \"127.0.0.1:8443\", \"tls\": "                                 \
    "{\"certificates\": [{\"cert\": \"%s/%s.pem\", \"key\": \"%s/%s.key\"}]}}, "                   \
    "{\"address\": \"127.0.0.1:8444\", \"tls\": {\"certificates\": "                               \
    "[{\"cert\": \"%s/wild.pem\", \"key\": \"%s/wild.key\"}]%s}}], "                               \
    "\"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:9\"}], "                      \
    "\"tls\": {\"ca_file\": \"%s/ca.pem\"}}}}"
    struct adm_snapshot *s[6] = {0};
    const char *names[6] = {"ec", "ec2", "ec2", "dflt", "dflt", "dflt"};
    const char *extra[6] = {"",
                            "",
                            ", \"session_tickets\": false",
                            "",
                            ", \"ticket_secret\": \"0123456789abcdef0123456789abcdef\"",
                            ", \"ticket_secret\": \"fedcba9876543210fedcba9876543210\""};
    for (int i = 0; i < 6; i++) {
        snprintf(doc, sizeof(doc), FMT, d, names[i], d, names[i], d, d, extra[i], d);
        s[i] = snapshot_after(doc, i ? s[i - 1] : NULL);
        ck_assert_ptr_nonnull(s[i]->tls[0]);
        ck_assert_ptr_nonnull(s[i]->uptls[0]);
    }
    ck_assert_ptr_eq(s[0]->tls[0], s[1]->tls[0]); /* other path, same bytes */
    ck_assert_ptr_eq(s[0]->tls[1], s[1]->tls[1]);
    ck_assert_ptr_eq(s[0]->uptls[0], s[1]->uptls[0]);
    ck_assert_ptr_eq(s[1]->tls[0], s[2]->tls[0]);
    ck_assert_ptr_ne(s[1]->tls[1], s[2]->tls[1]); /* a setting changed */
    ck_assert_ptr_ne(s[2]->tls[0], s[3]->tls[0]); /* another certificate */
    /* the tickets of the first still open on the second */
    ck_assert_int_eq(resumes(s[0]->tls[0], s[1]->tls[0], NULL, NULL, TLS1_3_VERSION), 1);
    /* a ticket_secret set, then changed alone: a new context each time,
     * with the new keys; the other listener keeps its own */
    ck_assert_ptr_ne(s[3]->tls[1], s[4]->tls[1]);
    ck_assert_ptr_ne(s[4]->tls[1], s[5]->tls[1]);
    ck_assert_ptr_eq(s[4]->tls[0], s[5]->tls[0]);
    ck_assert_int_eq(resumes(s[4]->tls[1], s[5]->tls[1], NULL, NULL, TLS1_3_VERSION), 0);
    for (int i = 0; i < 6; i++)
        adm_snapshot_free(s[i]);
}
END_TEST

/* A push that changes a listener's protocols alone gives it a new context
 * (what ALPN selects is the context's: connections accepted after the push
 * see the change), which keeps the old one's ticket keys; the unchanged
 * listener keeps its context. */
START_TEST(snapshots_follow_protocols)
{
    char doc[4096];
    const char *d = tls_certs();
    struct adm_snapshot *s[3] = {0};
    const char *protocols[3] = {"", ", \"protocols\": [\"h1\"]", ", \"protocols\": [\"h1\"]"};

    for (int i = 0; i < 3; i++) {
        snprintf(doc, sizeof(doc),
                 "{\"listeners\": [{\"address\": \"127.0.0.1:8443\", \"tls\": {\"certificates\": "
                 "[{\"cert\": \"%s/ec.pem\", \"key\": \"%s/ec.key\"}]}%s}, "
                 "{\"address\": \"127.0.0.1:8444\", \"tls\": {\"certificates\": "
                 "[{\"cert\": \"%s/wild.pem\", \"key\": \"%s/wild.key\"}]}}]}",
                 d, d, protocols[i], d, d);
        s[i] = snapshot_after(doc, i ? s[i - 1] : NULL);
    }
    ck_assert_uint_eq(adm_tls_ctx_protocols(s[0]->tls[0]), ADM_PROTO_H1 | ADM_PROTO_H2);
    ck_assert_ptr_ne(s[0]->tls[0], s[1]->tls[0]);
    ck_assert_uint_eq(adm_tls_ctx_protocols(s[1]->tls[0]), ADM_PROTO_H1);
    ck_assert_ptr_eq(s[1]->tls[0], s[2]->tls[0]); /* unchanged again */
    ck_assert_ptr_eq(s[0]->tls[1], s[1]->tls[1]);
    struct hs before = {.alpn = "\x02h2\x08http/1.1"}, after = before;
    handshake(s[0]->tls[0], &before);
    handshake(s[1]->tls[0], &after);
    ck_assert_str_eq(before.alpn_got, "h2");
    ck_assert_str_eq(after.alpn_got, "http/1.1");
    SSL_SESSION_free(before.session);
    SSL_SESSION_free(after.session);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++)
        ck_assert_int_eq(resumes(s[0]->tls[0], s[1]->tls[0], NULL, NULL, v), 1);
    for (int i = 0; i < 3; i++)
        adm_snapshot_free(s[i]);
}
END_TEST

/* A pool's client context offers ALPN "h2" alone with protocol "h2", and
 * "http/1.1" otherwise; a push that changes the protocol alone gives the
 * pool a new context (connections opened after it offer the new one), one
 * that leaves it keeps the context. Idle connections follow a changed pool
 * only while its protocol stays (an HTTP/1.1 connection is no HTTP/2
 * session): its servers' state is copied, not shared, across the change. */
START_TEST(upstream_alpn_follows_protocol)
{
    char doc[4096];
    const char *d = tls_certs();
    struct adm_snapshot *s[5] = {0};
    const char *protocol[5] = {"", ", \"protocol\": \"h2\"", ", \"protocol\": \"h2\"",
                               ", \"protocol\": \"h1\"", ", \"protocol\": \"h1\", \"retries\": 1"};
    const char *want[5] = {"http/1.1", "h2", "h2", "http/1.1", "http/1.1"};

    for (int i = 0; i < 5; i++) {
        snprintf(doc, sizeof(doc),
                 "{\"listeners\": [{\"address\": \"127.0.0.1:8443\", \"tls\": {\"certificates\": "
                 "[{\"cert\": \"%s/ec.pem\", \"key\": \"%s/ec.key\"}]}}], "
                 "\"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:9\"}], "
                 "\"tls\": {\"ca_file\": \"%s/ca.pem\"}%s}}}",
                 d, d, d, protocol[i]);
        s[i] = snapshot_after(doc, i ? s[i - 1] : NULL);
        /* the server offers both: what it selects is what the pool offered */
        struct hs h = {.client = s[i]->uptls[0]};
        handshake(s[i]->tls[0], &h);
        ck_assert(h.ok);
        ck_assert_str_eq(h.alpn_got, want[i]);
        SSL_SESSION_free(h.session);
    }
    ck_assert_ptr_ne(s[0]->uptls[0], s[1]->uptls[0]);
    ck_assert_ptr_eq(s[1]->uptls[0], s[2]->uptls[0]);
    ck_assert_ptr_ne(s[2]->uptls[0], s[3]->uptls[0]);
    ck_assert_ptr_eq(s[3]->uptls[0], s[4]->uptls[0]);
    ck_assert_ptr_eq(s[0]->tls[0], s[3]->tls[0]); /* the listener's, untouched */
    ck_assert_uint_eq(up_pool_same_server(s[1]->pools[0], s[0]->pools[0], 0), UP_NONE);
    ck_assert_ptr_eq(s[1]->pools[0], s[2]->pools[0]);
    ck_assert_uint_eq(up_pool_same_server(s[3]->pools[0], s[2]->pools[0], 0), UP_NONE);
    ck_assert_ptr_ne(s[3]->pools[0], s[4]->pools[0]);
    ck_assert_uint_eq(up_pool_same_server(s[4]->pools[0], s[3]->pools[0], 0), 0); /* shared */
    for (int i = 0; i < 5; i++)
        adm_snapshot_free(s[i]);
}
END_TEST

static Suite *tls_ctx_suite(void)
{
    Suite *s = suite_create("tls_ctx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sni_picks_the_certificate);
    tcase_add_test(tc, versions_and_alpn);
    tcase_add_test(tc, alpn_follows_protocols);
    tcase_add_test(tc, alpn_h2_needs_an_ephemeral_aead_suite);
    tcase_add_test(tc, resumption);
    tcase_add_test(tc, no_resumption_across_client_auth);
    tcase_add_test(tc, client_certificates);
    tcase_add_test(tc, ticket_secret_shares_tickets);
    tcase_add_test(tc, no_certificates_refuses_every_handshake);
    tcase_add_test(tc, ticket_rotation);
    tcase_add_test(tc, snapshots_reuse_contexts);
    tcase_add_test(tc, snapshots_follow_protocols);
    tcase_add_test(tc, upstream_alpn_follows_protocol);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tls_certs(); /* once, before the tests fork */
    SRunner *sr = srunner_create(tls_ctx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tls_certs_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
