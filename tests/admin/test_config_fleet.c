/*
 * test_config_fleet.c - admin/config_fleet.c: the "fleet" key (etcd's
 * endpoints, prefix, TLS files, auth from a password file, timeouts), its
 * errors at their JSON pointers, "certificates": "fleet" on a listener of
 * a document that was not composed, and fleet as a restart-only key.
 */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "admin/fleet.h"
#include "config_test.h"
#include "tls_certs.h"

#define EP "'endpoints': ['http://127.0.0.1:2379']"

/* A file <name> in the certificates' directory holding <text>. */
static const char *write_file(const char *name, const char *text)
{
    const char *path = tls_file(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* The document with "fleet": <fleet> (' for "). */
static const char *fdoc(const char *fleet)
{
    static char buf[8192];
    snprintf(buf, sizeof(buf), "'fleet': %s", fleet);
    return doc(buf);
}

START_TEST(defaults_and_values)
{
    struct adm_config *c = expect_ok(fdoc("{'etcd': {" EP "}}"));
    ck_assert_ptr_nonnull(c->fleet);
    ck_assert_uint_eq(c->fleet->nendpoints, 1);
    ck_assert_str_eq(c->fleet->endpoints[0], "http://127.0.0.1:2379");
    ck_assert_str_eq(c->fleet->prefix, "/switchyard/");
    ck_assert_uint_eq(c->fleet->dial_timeout_ms, 2000);
    ck_assert_uint_eq(c->fleet->request_timeout_ms, 5000);
    ck_assert_uint_eq(c->fleet->watch_idle_ms, 10000);
    ck_assert_uint_eq(c->fleet->write_wait_ms, 5000);
    ck_assert_ptr_null(c->fleet->username);
    ck_assert_ptr_null(c->fleet->ca_file);
    adm_config_free(c);

    c = expect_ok(doc(""));
    ck_assert_ptr_null(c->fleet);
    adm_config_free(c);

    char buf[2048];
    const char *pw = write_file("etcd.pw", "s3cret\n");
    snprintf(buf, sizeof(buf),
             "{'etcd': {'endpoints': ['https://etcd-1.internal:2379', 'https://[::1]:2379'],"
             " 'prefix': '/prod/gw/', 'tls': {'ca_file': '%s', 'cert_file': '%s',"
             " 'key_file': '%s'}, 'username': 'gw', 'password_file': '%s',"
             " 'dial_timeout_ms': 100, 'request_timeout_ms': 200, 'watch_idle_ms': 300},"
             " 'write_wait_ms': 400}",
             tls_file("ca.pem"), tls_file("client.pem"), tls_file("client.key"), pw);
    c = expect_ok(fdoc(buf));
    ck_assert_uint_eq(c->fleet->nendpoints, 2);
    ck_assert_str_eq(c->fleet->endpoints[1], "https://[::1]:2379");
    ck_assert_str_eq(c->fleet->prefix, "/prod/gw/");
    ck_assert_str_eq(c->fleet->ca_file, tls_file("ca.pem"));
    ck_assert_str_eq(c->fleet->key_file, tls_file("client.key"));
    ck_assert_str_eq(c->fleet->username, "gw");
    ck_assert_str_eq(c->fleet->password_file, pw);
    ck_assert_str_eq(c->fleet->password, "s3cret");
    ck_assert_uint_eq(c->fleet->dial_timeout_ms, 100);
    ck_assert_uint_eq(c->fleet->request_timeout_ms, 200);
    ck_assert_uint_eq(c->fleet->watch_idle_ms, 300);
    ck_assert_uint_eq(c->fleet->write_wait_ms, 400);
    /* the password is not in the document: GET /config shows the file's name */
    char *canon = adm_config_canonical(c);
    ck_assert_ptr_null(strstr(canon, "s3cret"));
    ck_assert_ptr_nonnull(strstr(canon, "etcd.pw"));
    free(canon);
    adm_config_free(c);
}
END_TEST

START_TEST(errors)
{
    expect_error(fdoc("[]"), "/fleet", "expected an object, got an array");
    expect_error(fdoc("{}"), "/fleet/etcd", "missing (required)");
    expect_error(fdoc("{'etcd': {}}"), "/fleet/etcd/endpoints", "missing (required)");
    expect_error(fdoc("{'etcd': {" EP "}, 'write_wait': 1}"), "/fleet/write_wait",
                 "did you mean \"write_wait_ms\"");
    expect_error(fdoc("{'etcd': {" EP ", 'endpoint': []}}"), "/fleet/etcd/endpoint",
                 "did you mean \"endpoints\"");
    expect_error(fdoc("{'etcd': {'endpoints': []}}"), "/fleet/etcd/endpoints",
                 "expected 1..32 endpoints, got 0");
    expect_error(fdoc("{'etcd': {'endpoints': '127.0.0.1:2379'}}"), "/fleet/etcd/endpoints",
                 "expected an array");
    expect_error(fdoc("{'etcd': {'endpoints': ['127.0.0.1:2379']}}"), "/fleet/etcd/endpoints/0",
                 "write http://HOST:PORT or https://HOST:PORT");
    expect_error(fdoc("{'etcd': {'endpoints': ['grpc://h:1']}}"), "/fleet/etcd/endpoints/0",
                 "write http://HOST:PORT");
    expect_error(fdoc("{'etcd': {'endpoints': ['http://h']}}"), "/fleet/etcd/endpoints/0",
                 "the port is required");
    expect_error(fdoc("{'etcd': {'endpoints': ['http://h:2379/v3']}}"), "/fleet/etcd/endpoints/0",
                 "a path is not allowed");
    expect_error(fdoc("{'etcd': {'endpoints': ['http://u@h:2379']}}"), "/fleet/etcd/endpoints/0",
                 "userinfo");
    expect_error(fdoc("{'etcd': {'endpoints': ['http://h:99999']}}"), "/fleet/etcd/endpoints/0",
                 "1..65535");
    expect_error(fdoc("{'etcd': {" EP ", 'prefix': 'switchyard/'}}"), "/fleet/etcd/prefix",
                 "starts and ends with '/'");
    expect_error(fdoc("{'etcd': {" EP ", 'prefix': '/switchyard'}}"), "/fleet/etcd/prefix",
                 "starts and ends with '/'");
    expect_error(fdoc("{'etcd': {" EP ", 'prefix': '/'}}"), "/fleet/etcd/prefix",
                 "starts and ends");
    expect_error(fdoc("{'etcd': {" EP ", 'dial_timeout_ms': 0}}"), "/fleet/etcd/dial_timeout_ms",
                 "must be between 1 and");
    expect_error(fdoc("{'etcd': {" EP ", 'watch_idle_ms': 10}}"), "/fleet/etcd/watch_idle_ms",
                 "must be between 100 and");
    expect_error(fdoc("{'etcd': {" EP ", 'username': 'gw'}}"), "/fleet/etcd/password_file",
                 "a username needs its password_file");
}
END_TEST

START_TEST(files)
{
    char buf[2048];
    const char *empty = write_file("empty.pw", "\n");

    snprintf(buf, sizeof(buf), "{'etcd': {" EP ", 'password_file': '%s'}}", tls_file("ec.key"));
    expect_error(fdoc(buf), "/fleet/etcd/username", "a password_file needs its username");
    expect_error(fdoc("{'etcd': {" EP ", 'username': 'gw', 'password_file': '/nonexistent/pw'}}"),
                 "/fleet/etcd/password_file", "cannot read \"/nonexistent/pw\"");
    snprintf(buf, sizeof(buf), "{'etcd': {" EP ", 'username': 'gw', 'password_file': '%s'}}",
             empty);
    expect_error(fdoc(buf), "/fleet/etcd/password_file", "is empty");

    const char *https = "'endpoints': ['https://127.0.0.1:2379']";
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'ca_file': '/nonexistent/ca.pem'}}}", https);
    expect_error(fdoc(buf), "/fleet/etcd/tls/ca_file", "cannot read \"/nonexistent/ca.pem\"");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'ca_file': '%s'}}}", https,
             tls_file("garbage.pem"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/ca_file", "holds no PEM certificate");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'cert_file': '%s'}}}", https,
             tls_file("client.pem"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/key_file", "needs both cert_file and key_file");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'key_file': '%s'}}}", https,
             tls_file("client.key"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/cert_file", "needs both cert_file and key_file");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'cert_file': '%s', 'key_file': '%s'}}}",
             https, tls_file("client.pem"), tls_file("other.key"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/key_file", "is not the key of");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'cert_file': '%s', 'key_file': '%s'}}}",
             https, tls_file("client.pem"), tls_file("client.pem"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/key_file", "holds no PEM private key");
    snprintf(buf, sizeof(buf), "{'etcd': {%s, 'tls': {'ca': '%s'}}}", https, tls_file("ca.pem"));
    expect_error(fdoc(buf), "/fleet/etcd/tls/ca", "unknown key");
    snprintf(buf, sizeof(buf), "{'etcd': {" EP ", 'tls': {'ca_file': '%s'}}}", tls_file("ca.pem"));
    expect_error(fdoc(buf), "/fleet/etcd/tls", "only https:// endpoints use TLS");
    /* https without tls: the system's CAs */
    struct adm_config *c =
        expect_ok(fdoc("{'etcd': {'endpoints': ['https://etcd.example:2379']}}"));
    adm_config_free(c);
}
END_TEST

START_TEST(fleet_certificates_string)
{
    expect_error(J("{'listeners': [{'address': '127.0.0.1:8443',"
                   " 'tls': {'certificates': 'fleet'}}]}"),
                 "/listeners/0/tls/certificates",
                 "\"fleet\" serves the fleet's certificates: it needs the top-level fleet key");
    /* a fleet node's own file: no certificate until the fleet's arrive */
    struct adm_config *c = expect_ok(J("{'listeners': [{'address': '127.0.0.1:8443',"
                                       " 'tls': {'certificates': 'fleet'}}],"
                                       " 'fleet': {'etcd': {" EP "}}}"));
    ck_assert_ptr_nonnull(c->listeners[0].tls);
    adm_config_free(c);
}
END_TEST

/* The restart diff of two documents' fleets. */
static size_t restart_errors(const char *a, const char *b, struct adm_errors *e)
{
    struct adm_config *ca = expect_ok(a);
    struct adm_config *cb = expect_ok(b);
    size_t n;

    adm_errors_init(e);
    n = adm_config_restart_diff(ca, cb, e);
    adm_config_free(ca);
    adm_config_free(cb);
    return n;
}

START_TEST(restart_only)
{
    struct adm_errors e;
    char a[4096], b[4096];

    snprintf(a, sizeof(a), "%s", fdoc("{'etcd': {" EP "}}"));
    ck_assert_uint_eq(restart_errors(a, doc(""), &e), 1);
    ck_has_error(&e, "/fleet", "needs a restart to change (the running value is a fleet node)");
    adm_errors_clear(&e);
    snprintf(a, sizeof(a), "%s", doc(""));
    ck_assert_uint_eq(restart_errors(a, fdoc("{'etcd': {" EP "}}"), &e), 1);
    ck_has_error(&e, "/fleet", "a standalone node");
    adm_errors_clear(&e);
    /* the default written out is no change */
    snprintf(a, sizeof(a), "%s", fdoc("{'etcd': {" EP "}}"));
    ck_assert_uint_eq(
        restart_errors(
            a, fdoc("{'etcd': {" EP ", 'prefix': '/switchyard/'}, 'write_wait_ms': 5000}"), &e),
        0);
    adm_errors_clear(&e);
    snprintf(b, sizeof(b), "%s",
             fdoc("{'etcd': {'endpoints': ['http://127.0.0.1:2380'], 'prefix': '/p/',"
                  " 'watch_idle_ms': 500}, 'write_wait_ms': 1}"));
    ck_assert_uint_eq(restart_errors(a, b, &e), 4);
    ck_has_error(&e, "/fleet/etcd/endpoints", "http://127.0.0.1:2379");
    ck_has_error(&e, "/fleet/etcd/prefix", "/switchyard/");
    ck_has_error(&e, "/fleet/etcd/watch_idle_ms", "10000");
    ck_has_error(&e, "/fleet/write_wait_ms", "5000");
    adm_errors_clear(&e);

    /* the same password file with another password in it */
    const char *pw = write_file("rot.pw", "one");
    snprintf(b, sizeof(b), "{'etcd': {" EP ", 'username': 'u', 'password_file': '%s'}}", pw);
    snprintf(a, sizeof(a), "%s", fdoc(b));
    struct adm_config *ca = expect_ok(a);
    write_file("rot.pw", "two\n");
    struct adm_config *cb = expect_ok(a);
    adm_errors_init(&e);
    ck_assert_uint_eq(adm_config_restart_diff(ca, cb, &e), 1);
    ck_has_error(&e, "/fleet/etcd/password_file", "the password in it changed");
    adm_errors_clear(&e);
    adm_config_free(ca);
    adm_config_free(cb);
}
END_TEST

int main(void)
{
    tls_certs();
    Suite *s = suite_create("config_fleet");
    TCase *tc = tcase_create("fleet");
    tcase_add_test(tc, defaults_and_values);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, files);
    tcase_add_test(tc, fleet_certificates_string);
    tcase_add_test(tc, restart_only);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tls_certs_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
