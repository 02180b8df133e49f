/*
 * test_tls_config.c - the "tls" objects of listeners and upstreams
 * (admin/tls_config.c), through adm_config_parse(): a full listener with RSA,
 * ECDSA, wildcard and default certificates, inline PEM, identities that
 * follow content and not file names, and every refusal at its JSON path;
 * ticket_secret; an empty certificate list on a fleet node only; the
 * listener keys that depend on tls (redirect_https, protocols).
 * Certificates are made by the openssl CLI at test time (tls_certs.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "admin/config.h"
#include "admin/tls.h"
#include "tls_certs.h"

static char buf[1 << 16];

/* A config with one plain listener and <listener> (a JSON object text, '
 * for ") as the second one, plus <extra> top-level members. */
static const char *doc2(const char *listener, const char *extra)
{
    char tmp[sizeof(buf)];
    snprintf(tmp, sizeof(tmp),
             "{'listeners': [{'address': '127.0.0.1:8080'}, %s]%s%s, 'admin': {'address': "
             "'127.0.0.1:9901'}}",
             listener, extra ? ", " : "", extra ? extra : "");
    for (size_t i = 0; i <= strlen(tmp); i++)
        buf[i] = tmp[i] == '\'' ? '"' : tmp[i];
    return buf;
}

/* A TLS listener on 127.0.0.1:8443 with <tls> as its "tls" body. */
static const char *tls_doc(const char *tls)
{
    static char l[1 << 15];
    snprintf(l, sizeof(l), "{'address': '127.0.0.1:8443', 'tls': {%s}}", tls);
    return doc2(l, NULL);
}

static struct adm_config *parse(const char *json, struct adm_errors *e)
{
    adm_errors_init(e);
    return adm_config_parse(json, strlen(json), e);
}

static void expect_error(const char *json, const char *path, const char *needle)
{
    struct adm_errors e;
    struct adm_config *c = parse(json, &e);
    int found = 0;
    for (size_t i = 0; i < e.n; i++)
        if (!strcmp(e.v[i].path, path) && strstr(e.v[i].msg, needle))
            found = 1;
    if (!found) {
        char *d = adm_errors_format(&e);
        ck_abort_msg("no error at \"%s\" containing \"%s\"; got:\n%s", path, needle, d);
    }
    ck_assert_ptr_null(c);
    adm_errors_clear(&e);
}

static struct adm_config *expect_ok(const char *json)
{
    struct adm_errors e;
    struct adm_config *c = parse(json, &e);
    if (!c) {
        char *d = adm_errors_format(&e);
        ck_abort_msg("refused: %s\n%s", d, json);
    }
    adm_errors_clear(&e);
    return c;
}

/* "'cert': '<dir>/<n>.pem', 'key': '<dir>/<k>.key'" */
static const char *pair(const char *n, const char *k)
{
    static char b[4][1200];
    static unsigned i;
    char *p = b[i++ % 4];
    snprintf(p, sizeof(b[0]), "'cert': '%s/%s.pem', 'key': '%s/%s.key'", tls_certs(), n,
             tls_certs(), k);
    return p;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *s = calloc(1, 1 << 16);
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    fclose(f);
    s[n] = '\0';
    return s;
}

/* <s> as a JSON string body: newlines escaped. */
static char *json_escape(const char *s)
{
    char *o = calloc(1, strlen(s) * 2 + 1), *p = o;
    for (; *s; s++) {
        if (*s == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else {
            *p++ = *s;
        }
    }
    return o;
}

START_TEST(full_listener)
{
    char tls[8192];
    snprintf(tls, sizeof(tls),
             "'certificates': [{%s}, {%s, 'hosts': ['api.example.com']}, "
             "{%s, 'hosts': ['API.example.com']}, {%s, 'hosts': ['*.w.example.com']}], "
             "'min_version': '1.3', 'session_tickets': false, 'ticket_rotation_s': 60, "
             "'client_auth': {'ca_file': '%s', 'mode': 'optional'}",
             pair("dflt", "dflt"), pair("ec", "ec"), pair("rsa", "rsa"), pair("wild", "wild"),
             tls_file("ca.pem"));
    struct adm_config *c = expect_ok(tls_doc(tls));
    ck_assert_ptr_null(c->listeners[0].tls);
    const struct adm_tls_listener *t = c->listeners[1].tls;
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->ncerts, 4);
    ck_assert_int_eq(t->min_version, TLS1_3_VERSION);
    ck_assert_int_eq(t->session_tickets, 0);
    ck_assert_uint_eq(t->ticket_rotation_s, 60);
    ck_assert_int_eq(t->client_mode, ADM_TLS_CLIENT_OPTIONAL);
    ck_assert_int_eq(sk_X509_num(t->client_cas), 1);
    ck_assert_uint_eq(t->certs[0].nhosts, 0);
    ck_assert_int_eq(t->certs[1].key_type, ADM_TLS_KEY_ECDSA);
    ck_assert_uint_eq(t->certs[1].key_bits, 256);
    ck_assert_int_eq(t->certs[2].key_type, ADM_TLS_KEY_RSA);
    ck_assert_uint_eq(t->certs[2].key_bits, 2048);
    ck_assert_str_eq(t->certs[2].hosts[0], "api.example.com"); /* lower-cased */
    ck_assert_str_eq(t->certs[3].names[0], "*.w.example.com");
    ck_assert_str_eq(t->certs[1].subject, "CN=ec");
    ck_assert_str_eq(t->certs[1].issuer, "CN=Test-CA");
    ck_assert_int_gt(t->certs[1].not_after, (int64_t)time(NULL) + 29 * 86400);
    ck_assert_int_eq(sk_X509_num(t->certs[1].chain), 0);
    adm_config_free(c);
}
END_TEST

START_TEST(defaults)
{
    char tls[2048];
    snprintf(tls, sizeof(tls), "'certificates': [{%s}]", pair("ec", "ec"));
    struct adm_config *c = expect_ok(tls_doc(tls));
    const struct adm_tls_listener *t = c->listeners[1].tls;
    ck_assert_int_eq(t->min_version, TLS1_2_VERSION);
    ck_assert_int_eq(t->session_tickets, 1);
    ck_assert_uint_eq(t->ticket_rotation_s, 43200);
    ck_assert_int_eq(t->client_mode, ADM_TLS_CLIENT_OFF);
    adm_config_free(c);
}
END_TEST

/* Inline PEM is the same definition as the files holding it; a file
 * rewritten in place is a different one. */
START_TEST(identity_follows_content)
{
    char tls[1 << 14];
    unsigned char id1[ADM_TLS_ID_LEN], id2[ADM_TLS_ID_LEN], id3[ADM_TLS_ID_LEN];
    char *cp = slurp(tls_file("ec.pem")), *kp = slurp(tls_file("ec.key"));
    char *ce = json_escape(cp), *ke = json_escape(kp);

    snprintf(tls, sizeof(tls), "'certificates': [{%s}]", pair("ec", "ec"));
    struct adm_config *c = expect_ok(tls_doc(tls));
    memcpy(id1, c->listeners[1].tls->id, sizeof(id1));
    adm_config_free(c);

    snprintf(tls, sizeof(tls), "'certificates': [{'cert_pem': '%s', 'key_pem': '%s'}]", ce, ke);
    c = expect_ok(tls_doc(tls));
    memcpy(id2, c->listeners[1].tls->id, sizeof(id2));
    ck_assert_ptr_null(c->listeners[1].tls->certs[0].cert_file);
    adm_config_free(c);
    ck_assert_mem_eq(id1, id2, sizeof(id1));

    /* a copy under another name: the same */
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "cp %s %s/copy.pem && cp %s %s/copy.key", tls_file("ec.pem"),
             tls_certs(), tls_file("ec.key"), tls_certs());
    ck_assert_int_eq(system(cmd), 0);
    snprintf(tls, sizeof(tls), "'certificates': [{%s}]", pair("copy", "copy"));
    c = expect_ok(tls_doc(tls));
    ck_assert_mem_eq(id1, c->listeners[1].tls->id, sizeof(id1));
    adm_config_free(c);

    /* the same name, other content: different */
    snprintf(cmd, sizeof(cmd), "cp %s %s/copy.pem && cp %s %s/copy.key", tls_file("wild.pem"),
             tls_certs(), tls_file("wild.key"), tls_certs());
    ck_assert_int_eq(system(cmd), 0);
    c = expect_ok(tls_doc(tls));
    memcpy(id3, c->listeners[1].tls->id, sizeof(id3));
    adm_config_free(c);
    ck_assert_mem_ne(id1, id3, sizeof(id1));

    /* and a setting changes it too */
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'session_tickets': false",
             pair("ec", "ec"));
    c = expect_ok(tls_doc(tls));
    ck_assert_mem_ne(id1, c->listeners[1].tls->id, sizeof(id1));
    adm_config_free(c);
    free(cp), free(kp), free(ce), free(ke);
}
END_TEST

START_TEST(refusals)
{
    char tls[8192];
    const char *P = "/listeners/1/tls";
    char path[256];

    /* the example of the task: the third certificate's key */
    snprintf(tls, sizeof(tls),
             "'certificates': [{%s}, {%s, 'hosts': ['api.example.com']}, {%s, 'hosts': "
             "['api.example.com']}]",
             pair("dflt", "dflt"), pair("ec", "ec"), pair("rsa", "other"));
    expect_error(tls_doc(tls), "/listeners/1/tls/certificates/2/key",
                 "does not match the certificate");

    snprintf(tls, sizeof(tls), "'certificates': [{'cert': '%s/nope.pem', 'key': '%s'}]",
             tls_certs(), tls_file("ec.key"));
    snprintf(path, sizeof(path), "%s/certificates/0/cert", P);
    expect_error(tls_doc(tls), path, "cannot read");
    expect_error(tls_doc(tls), path, "No such file");
    {
        /* a relative path: the error names where it was looked for */
        char cwd[4096], want[4300];
        ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
        snprintf(want, sizeof(want),
                 "cannot read \"nope.pem\" (relative to %s, the directory switchyard started "
                 "in): No such file or directory",
                 cwd);
        snprintf(tls, sizeof(tls), "'certificates': [{'cert': 'nope.pem', 'key': '%s'}]",
                 tls_file("ec.key"));
        expect_error(tls_doc(tls), path, want);
    }

    snprintf(tls, sizeof(tls), "'certificates': [{'cert': '%s', 'key': '%s'}]",
             tls_file("garbage.pem"), tls_file("ec.key"));
    expect_error(tls_doc(tls), path, "cannot parse the certificate");

    snprintf(tls, sizeof(tls), "'certificates': [{'cert': '%s', 'key': '%s'}]", tls_file("ec.pem"),
             tls_file("garbage.pem"));
    snprintf(path, sizeof(path), "%s/certificates/0/key", P);
    expect_error(tls_doc(tls), path, "cannot parse the key");

    snprintf(tls, sizeof(tls), "'certificates': [{'cert_pem': 'nonsense', 'key': '%s'}]",
             tls_file("ec.key"));
    snprintf(path, sizeof(path), "%s/certificates/0/cert_pem", P);
    expect_error(tls_doc(tls), path, "cannot parse the certificate");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}]", pair("expired", "expired"));
    snprintf(path, sizeof(path), "%s/certificates/0/cert", P);
    expect_error(tls_doc(tls), path, "expired on");

    snprintf(tls, sizeof(tls), "'certificates': [{%s, 'hosts': ['api.example.com', 'x.org']}]",
             pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/certificates/0/hosts/1", P);
    expect_error(tls_doc(tls), path, "does not cover \"x.org\"");

    /* a wildcard certificate covers a name under it, not the wildcard above */
    snprintf(tls, sizeof(tls), "'certificates': [{%s, 'hosts': ['a.w.example.com']}]",
             pair("wild", "wild"));
    adm_config_free(expect_ok(tls_doc(tls)));
    snprintf(tls, sizeof(tls), "'certificates': [{%s, 'hosts': ['*.example.com']}]",
             pair("wild", "wild"));
    snprintf(path, sizeof(path), "%s/certificates/0/hosts/0", P);
    expect_error(tls_doc(tls), path, "does not cover");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}, {%s}]", pair("ec", "ec"),
             pair("dflt", "dflt"));
    snprintf(path, sizeof(path), "%s/certificates/1", P);
    expect_error(tls_doc(tls), path, "a second default certificate");

    snprintf(tls, sizeof(tls),
             "'certificates': [{%s, 'hosts': ['api.example.com']}, {%s, 'hosts': "
             "['api.example.com']}]",
             pair("ec", "ec"), pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/certificates/1/hosts", P);
    expect_error(tls_doc(tls), path, "two ECDSA certificates");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'min_version': '1.1'", pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/min_version", P);
    expect_error(tls_doc(tls), path, "not supported");
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'min_version': '1.0'", pair("ec", "ec"));
    expect_error(tls_doc(tls), path, "not supported");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_rotation_s': 0", pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/ticket_rotation_s", P);
    expect_error(tls_doc(tls), path, "between 1 and");

    snprintf(tls, sizeof(tls), "'certificates': [{%s, 'hots': []}], 'tickets': 1",
             pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/certificates/0/hots", P);
    expect_error(tls_doc(tls), path, "unknown key");
    snprintf(path, sizeof(path), "%s/tickets", P);
    expect_error(tls_doc(tls), path, "unknown key");

    snprintf(tls, sizeof(tls), "'certificates': [{'cert': '%s'}]", tls_file("ec.pem"));
    snprintf(path, sizeof(path), "%s/certificates/0/key", P);
    expect_error(tls_doc(tls), path, "missing");

    snprintf(tls, sizeof(tls), "'certificates': []");
    snprintf(path, sizeof(path), "%s/certificates", P);
    expect_error(tls_doc(tls), path, "non-empty");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'client_auth': {'mode': 'maybe'}",
             pair("ec", "ec"));
    snprintf(path, sizeof(path), "%s/client_auth/mode", P);
    expect_error(tls_doc(tls), path, "invalid value");
    snprintf(path, sizeof(path), "%s/client_auth/ca_file", P);
    expect_error(tls_doc(tls), path, "missing");

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'client_auth': {'ca_file': '%s'}",
             pair("ec", "ec"), tls_file("garbage.pem"));
    expect_error(tls_doc(tls), path, "cannot parse the CA");

    /* redirect_https belongs to plain listeners */
    snprintf(tls, sizeof(tls),
             "{'address': '127.0.0.1:8443', 'redirect_https': 8443, "
             "'tls': {'certificates': [{%s}]}}",
             pair("ec", "ec"));
    expect_error(doc2(tls, NULL), "/listeners/1/redirect_https", "plain listener");
    expect_error(doc2("{'address': '127.0.0.1:8443', 'redirect_https': 0}", NULL),
                 "/listeners/1/redirect_https", "between 1 and 65535");
}
END_TEST

#define SECRET "0123456789abcdef0123456789abcdef" /* 32 bytes, the shortest */

/* ticket_secret: kept, part of the identity (another secret, another
 * identity; none, the identity of a listener without the key), and
 * refused at its pointer when it is not a string, too short, the redaction
 * marker, or set with tickets off. */
START_TEST(ticket_secret)
{
    char tls[4096];
    unsigned char none[ADM_TLS_ID_LEN], one[ADM_TLS_ID_LEN];
    const char *P = "/listeners/1/tls/ticket_secret";

    snprintf(tls, sizeof(tls), "'certificates': [{%s}]", pair("ec", "ec"));
    struct adm_config *c = expect_ok(tls_doc(tls));
    ck_assert_ptr_null(c->listeners[1].tls->ticket_secret);
    memcpy(none, c->listeners[1].tls->id, sizeof(none));
    adm_config_free(c);

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': '%s'", pair("ec", "ec"),
             SECRET);
    c = expect_ok(tls_doc(tls));
    ck_assert_str_eq(c->listeners[1].tls->ticket_secret, SECRET);
    memcpy(one, c->listeners[1].tls->id, sizeof(one));
    adm_config_free(c);
    ck_assert_mem_ne(none, one, sizeof(one));
    c = expect_ok(tls_doc(tls)); /* the same secret: the same identity */
    ck_assert_mem_eq(one, c->listeners[1].tls->id, sizeof(one));
    adm_config_free(c);
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': '%sX'", pair("ec", "ec"),
             SECRET);
    c = expect_ok(tls_doc(tls));
    ck_assert_mem_ne(one, c->listeners[1].tls->id, sizeof(one));
    adm_config_free(c);

    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': 42", pair("ec", "ec"));
    expect_error(tls_doc(tls), P, "expected a string of at least 32 bytes");
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': '%.31s'", pair("ec", "ec"),
             SECRET);
    expect_error(tls_doc(tls), P, "too short: 31 bytes, at least 32");
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': ''", pair("ec", "ec"));
    expect_error(tls_doc(tls), P, "too short: 0 bytes");
    snprintf(tls, sizeof(tls), "'certificates': [{%s}], 'ticket_secret': '%s'", pair("ec", "ec"),
             ADM_TLS_REDACTED);
    expect_error(tls_doc(tls), P, "is what GET /config shows instead of the secret");
    snprintf(tls, sizeof(tls),
             "'certificates': [{%s}], 'session_tickets': false, 'ticket_secret': '%s'",
             pair("ec", "ec"), SECRET);
    expect_error(tls_doc(tls), P, "set while session_tickets is false");
}
END_TEST

/* The errors of listener "tls" body <tls> (' for ") parsed directly with
 * <flags>; *<out> the result, or NULL. */
static int parse_tls(const char *tls, unsigned flags, struct adm_errors *e,
                     struct adm_tls_listener **out)
{
    char text[4096];
    json_error_t je;
    snprintf(text, sizeof(text), "{%s}", tls);
    for (char *p = text; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_t *v = json_loads(text, 0, &je);
    ck_assert_msg(v != NULL, "%s: %s", text, je.text);
    adm_errors_init(e);
    int rc = adm_tls_listener_parse(v, "/listeners/0/tls", flags, e, out);
    json_decref(v);
    return rc;
}

/* An empty "certificates" is a fleet node's listener before the fleet has
 * certificates: accepted with ADM_TLS_FLEET_NODE, and only there. The
 * config parser passes the flag when the document has a top-level
 * "fleet". */
START_TEST(empty_certificates_on_a_fleet_node)
{
    struct adm_errors e;
    struct adm_tls_listener *t = NULL;

    ck_assert_int_eq(parse_tls("'certificates': []", ADM_TLS_FLEET_NODE, &e, &t), 0);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->ncerts, 0);
    adm_tls_listener_free(t);
    adm_errors_clear(&e);
    /* the other keys are read as ever */
    ck_assert_int_eq(
        parse_tls("'certificates': [], 'ticket_secret': '" SECRET "'", ADM_TLS_FLEET_NODE, &e, &t),
        0);
    ck_assert_str_eq(t->ticket_secret, SECRET);
    adm_tls_listener_free(t);
    adm_errors_clear(&e);
    ck_assert_int_eq(
        parse_tls("'certificates': [], 'min_version': '1.1'", ADM_TLS_FLEET_NODE, &e, &t), 1);
    ck_assert_str_eq(e.v[0].path, "/listeners/0/tls/min_version");
    adm_errors_clear(&e);
    /* a missing or non-array "certificates" stays an error there */
    ck_assert_int_eq(parse_tls("'min_version': '1.2'", ADM_TLS_FLEET_NODE, &e, &t), 1);
    ck_assert_str_eq(e.v[0].path, "/listeners/0/tls/certificates");
    adm_errors_clear(&e);
    ck_assert_int_eq(parse_tls("'certificates': {}", ADM_TLS_FLEET_NODE, &e, &t), 1);
    adm_errors_clear(&e);
    /* elsewhere, the existing error */
    ck_assert_int_eq(parse_tls("'certificates': []", 0, &e, &t), 1);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(e.v[0].path, "/listeners/0/tls/certificates");
    ck_assert_ptr_nonnull(strstr(e.v[0].msg, "non-empty"));
    adm_errors_clear(&e);

    /* through the config parser: a document with "fleet" raises no error
     * at the certificates (whatever it says of "fleet" itself), one
     * without does */
    const char *doc = doc2("{'address': '127.0.0.1:8443', 'tls': {'certificates': []}}",
                           "'fleet': {'etcd': {'endpoints': ['http://127.0.0.1:2379']}}");
    struct adm_config *c = parse(doc, &e);
    for (size_t i = 0; i < e.n; i++)
        ck_assert_msg(strcmp(e.v[i].path, "/listeners/1/tls/certificates"), "%s", e.v[i].msg);
    adm_config_free(c);
    adm_errors_clear(&e);
    expect_error(tls_doc("'certificates': []"), "/listeners/1/tls/certificates", "non-empty");
}
END_TEST

START_TEST(redirect_https)
{
    struct adm_config *c =
        expect_ok(doc2("{'address': '127.0.0.1:8081', 'redirect_https': 8443}", NULL));
    ck_assert_uint_eq(c->listeners[1].redirect_https, 8443);
    ck_assert_uint_eq(c->listeners[0].redirect_https, 0);
    adm_config_free(c);
}
END_TEST

/* A listener on 127.0.0.1:8443, with tls (a certificate) or without, and
 * "protocols": <protocols> (a JSON value, ' for "; NULL: none). */
static const char *proto_doc(int tls, const char *protocols)
{
    static char l[4096];
    snprintf(l, sizeof(l), "{'address': '127.0.0.1:8443'%s%s%s%s%s}", tls ? ", 'tls': {" : "",
             tls ? "'certificates': [{" : "", tls ? pair("ec", "ec") : "", tls ? "}]}" : "",
             protocols ? ", 'protocols': " : "");
    if (protocols)
        snprintf(l + strlen(l) - 1, sizeof(l) - strlen(l) + 1, "%s}", protocols);
    return doc2(l, NULL);
}

/* listeners[].protocols: the defaults by tls, every allowed set, and each
 * refusal at its JSON path. */
START_TEST(protocols)
{
    static const struct {
        int tls;
        const char *protocols;
        unsigned want;
    } ok[] = {
        {0, NULL, ADM_PROTO_H1},
        {1, NULL, ADM_PROTO_H1 | ADM_PROTO_H2},
        {0, "['h1']", ADM_PROTO_H1},
        {0, "['h2c']", ADM_PROTO_H2C},
        {0, "['h2c', 'h1']", ADM_PROTO_H1 | ADM_PROTO_H2C},
        {1, "['h1']", ADM_PROTO_H1},
        {1, "['h2']", ADM_PROTO_H2},
        {1, "['h2', 'h1']", ADM_PROTO_H1 | ADM_PROTO_H2},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct adm_config *c = expect_ok(proto_doc(ok[i].tls, ok[i].protocols));
        ck_assert_msg(c->listeners[1].protocols == ok[i].want, "case %zu: got %u", i,
                      c->listeners[1].protocols);
        ck_assert_uint_eq(c->listeners[0].protocols, ADM_PROTO_H1);
        adm_config_free(c);
    }

    static const struct {
        int tls;
        const char *protocols, *path, *needle;
    } bad[] = {
        {0, "['h1', 'h2']", "/listeners/1/protocols/1",
         "\"h2\" needs tls (HTTP/2 over TLS, selected by ALPN): add \"tls\", or use \"h2c\" "
         "for HTTP/2 by prior knowledge on a plain listener"},
        {1, "['h2c']", "/listeners/1/protocols/0",
         "\"h2c\" is HTTP/2 without TLS: on a tls listener write \"h2\""},
        {1, "[]", "/listeners/1/protocols", "must list at least one protocol"},
        {0, "'h1'", "/listeners/1/protocols", "expected an array, got a string"},
        {1, "['h2', 'h1', 'h2']", "/listeners/1/protocols/2",
         "\"h2\" is listed twice (also at index 0)"},
        {1, "['h1', 7]", "/listeners/1/protocols/1", "expected a string, got an integer"},
        {1, "['h1', 'spdy']", "/listeners/1/protocols/1",
         "invalid value \"spdy\" (expected one of \"h1\", \"h2\", \"h2c\")"},
        {1, "['http/1.1']", "/listeners/1/protocols/0",
         "invalid value \"http/1.1\" (expected one of \"h1\", \"h2\", \"h2c\"): write \"h1\""},
        {1, "['HTTP2']", "/listeners/1/protocols/0",
         "write \"h2\" (over TLS) or \"h2c\" (without)"},
        {1, "['H2']", "/listeners/1/protocols/0", "write \"h2\" (lower case)"},
        {1, "['h1', 'h3']", "/listeners/1/protocols/1", "HTTP/3 is not supported"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_error(proto_doc(bad[i].tls, bad[i].protocols), bad[i].path, bad[i].needle);
    /* a "tls" in error is reported once, not again as "h2 needs tls" */
    struct adm_errors e;
    ck_assert_ptr_null(parse(doc2("{'address': '127.0.0.1:8443', 'tls': {'certificates': []}, "
                                  "'protocols': ['h2']}",
                                  NULL),
                             &e));
    for (size_t i = 0; i < e.n; i++)
        ck_assert_msg(strncmp(e.v[i].path, "/listeners/1/protocols", 22) != 0, "%s: %s",
                      e.v[i].path, e.v[i].msg);
    adm_errors_clear(&e);
}
END_TEST

START_TEST(upstream_tls)
{
    char up[4096];
    snprintf(up, sizeof(up),
             "'upstreams': {'a': {'servers': [{'address': '127.0.0.1:9443'}], 'tls': {'ca_file': "
             "'%s', 'server_name': 'API.example.com'}}, 'b': {'servers': [{'address': "
             "'127.0.0.1:9444'}], 'tls': {}}, 'c': {'servers': [{'address': '127.0.0.1:9445'}], "
             "'tls': {'verify': false}}}",
             tls_file("ca.pem"));
    struct adm_config *c = expect_ok(doc2("{'address': '127.0.0.1:8081'}", up));
    const struct adm_upstream *a = adm_config_upstream(c, "a"), *b = adm_config_upstream(c, "b"),
                              *u = adm_config_upstream(c, "c");
    ck_assert_int_eq(a->tls->verify, 1);
    ck_assert_str_eq(a->tls->server_name, "api.example.com");
    ck_assert_int_eq(sk_X509_num(a->tls->cas), 1);
    ck_assert_int_eq(b->tls->verify, 1);
    ck_assert_ptr_null(b->tls->cas);
    ck_assert_ptr_null(b->tls->server_name);
    ck_assert_int_eq(u->tls->verify, 0);
    ck_assert_mem_ne(a->tls->id, b->tls->id, ADM_TLS_ID_LEN);
    adm_config_free(c);

    expect_error(doc2("{'address': '127.0.0.1:8081'}",
                      "'upstreams': {'a': {'servers': [{'address': '127.0.0.1:9443'}], "
                      "'tls': {'ca_file': '/nonexistent/ca.pem'}}}"),
                 "/upstreams/a/tls/ca_file", "cannot read");
    expect_error(doc2("{'address': '127.0.0.1:8081'}",
                      "'upstreams': {'a': {'servers': [{'address': '127.0.0.1:9443'}], "
                      "'tls': {'server_name': 'bad name', 'verify': 1, 'x': 2}}}"),
                 "/upstreams/a/tls/server_name", "invalid host name");
    expect_error(doc2("{'address': '127.0.0.1:8081'}",
                      "'upstreams': {'a': {'servers': [{'address': '127.0.0.1:9443'}], "
                      "'tls': {'verify': 1}}}"),
                 "/upstreams/a/tls/verify", "boolean");
    expect_error(doc2("{'address': '127.0.0.1:8081'}",
                      "'upstreams': {'a': {'servers': [{'address': '127.0.0.1:9443'}], "
                      "'tls': {'x': 2}}}"),
                 "/upstreams/a/tls/x", "unknown key");
}
END_TEST

static Suite *tls_config_suite(void)
{
    Suite *s = suite_create("tls_config");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, full_listener);
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, identity_follows_content);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, ticket_secret);
    tcase_add_test(tc, empty_certificates_on_a_fleet_node);
    tcase_add_test(tc, redirect_https);
    tcase_add_test(tc, protocols);
    tcase_add_test(tc, upstream_tls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tls_certs(); /* once, before the tests fork */
    SRunner *sr = srunner_create(tls_config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tls_certs_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
