/*
 * config_test.h - what the config parser's unit tests share: documents
 * written with ' for " (J()), the minimal valid document (doc()), parsing
 * that must fail at a JSON pointer (expect_error()) or succeed
 * (expect_ok()), a config using every key, and route udata that counts its
 * frees.
 */
#ifndef SY_TESTS_ADMIN_CONFIG_TEST_H
#define SY_TESTS_ADMIN_CONFIG_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/config.h"

#define BASE "{'listeners': [{'address': '127.0.0.1:8080'}]"

/* <s> with every ' turned into ". Static buffer: one document at a time. */
static inline const char *J(const char *s)
{
    static char buf[65536];
    size_t n = strlen(s);
    ck_assert_uint_lt(n, sizeof(buf));
    for (size_t i = 0; i <= n; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    return buf;
}

/* The minimal valid document plus <extra> top-level members. */
static inline const char *doc(const char *extra)
{
    static char buf[65536];
    snprintf(buf, sizeof(buf), "%s%s%s}", BASE, extra && *extra ? ", " : "", extra ? extra : "");
    return J(buf);
}

static inline struct adm_config *parse(const char *json, struct adm_errors *e)
{
    adm_errors_init(e);
    return adm_config_parse(json, strlen(json), e);
}

static inline char *dump(const struct adm_errors *e)
{
    char *s = adm_errors_format(e);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Index of an error at exactly <path> whose message contains <needle>, or -1. */
static inline long find_error(const struct adm_errors *e, const char *path, const char *needle)
{
    for (size_t i = 0; i < e->n; i++)
        if (!strcmp(e->v[i].path, path) && strstr(e->v[i].msg, needle))
            return (long)i;
    return -1;
}

#define ck_has_error(e, path, needle)                                                              \
    do {                                                                                           \
        if (find_error((e), (path), (needle)) < 0) {                                               \
            char *d_ = dump(e);                                                                    \
            ck_abort_msg("no error at \"%s\" containing \"%s\"; got:\n%s", (path), (needle), d_);  \
        }                                                                                          \
    } while (0)

/* Parses <json>, which must fail with an error at <path> containing
 * <needle>. */
static inline void expect_error(const char *json, const char *path, const char *needle)
{
    struct adm_errors e;
    struct adm_config *c = parse(json, &e);
    if (c) {
        adm_config_free(c);
        ck_abort_msg("accepted a config that should fail at %s: %s", path, json);
    }
    ck_assert_int_eq(e.nomem, 0);
    ck_has_error(&e, path, needle);
    adm_errors_clear(&e);
}

static inline struct adm_config *expect_ok(const char *json)
{
    struct adm_errors e;
    struct adm_config *c = parse(json, &e);
    if (!c) {
        char *d = dump(&e);
        ck_abort_msg("rejected:\n%s\n%s", json, d);
    }
    ck_assert_uint_eq(e.n, 0);
    adm_errors_clear(&e);
    return c;
}

/* A config that sets every key. */
static const char full_config[] =
    "{'workers': 4,"
    " 'listeners': [{'address': '0.0.0.0:8080'},"
    "               {'address': '[::1]:8443', 'protocols': ['h2c', 'h1']}],"
    " 'upstreams': {"
    "   'users': {'servers': [{'address': '127.0.0.1:9001', 'weight': 2},"
    "                         {'address': 'Backend-1.internal:9002'}],"
    "             'balance': 'round_robin', 'keepalive': 8, 'idle_timeout_ms': 1500},"
    "   'static.v2': {'servers': [{'address': '[2001:db8::5]:80'}]}},"
    " 'routes': ["
    "   {'id': 'get-user', 'host': 'api.example.com', 'methods': ['GET', 'HEAD'],"
    "    'path': '/users/{id}', 'upstream': 'users', 'rewrite': '/v2/users/{id}',"
    "    'timeout_ms': 2500},"
    "   {'id': 'files', 'path': '/static/*{file}', 'upstream': 'static.v2',"
    "    'strip_prefix': '/static'},"
    "   {'id': 'ping', 'path': '/ping', 'response': {'status': 200,"
    "    'headers': {'Content-Type': 'text/plain', 'Cache-Control': 'no-store'},"
    "    'body': 'pong'}},"
    "   {'id': 'old:docs', 'methods': ['GET'], 'path': '/old-docs/*{rest}',"
    "    'redirect': {'status': 308, 'location': 'https://docs.example.com/'}},"
    "   {'id': 'tenant', 'host': '{tenant}.example.com', 'path': '/', 'upstream': 'users',"
    "    'rewrite': '/t/{tenant}'},"
    "   {'id': 'nocontent', 'methods': ['DELETE', 'PURGE'], 'path': '/cache',"
    "    'response': {'status': 204}}"
    " ],"
    " 'router': {'trailing_slash': 'redirect', 'auto_options': true, 'merge_slashes': false,"
    "            'forward_path': 'normalized', 'escaped_slashes': 'decode'},"
    " 'trusted_proxies': ['10.0.0.0/8', '::1/128', '192.168.1.7', 'fd00::/8'],"
    " 'limits': {'max_request_line': 4096, 'max_header_bytes': 16384, 'max_headers': 50,"
    "            'max_body_bytes': 1048576, 'max_connections': 2000,"
    "            'max_routes': 5000},"
    " 'timeouts': {'client_header_ms': 1, 'client_idle_ms': 2, 'client_body_ms': 3,"
    "              'upstream_connect_ms': 4, 'upstream_response_ms': 5,"
    "              'upstream_idle_ms': 6, 'drain_ms': 7, 'lingering_ms': 8,"
    "              'tunnel_idle_ms': 9},"
    " 'http2': {'max_concurrent_streams': 250, 'initial_window_bytes': 1048576},"
    " 'access_log': '/var/log/switchyard/access.log',"
    " 'admin': {'address': '[::1]:9901', 'token_file': '/etc/switchyard/token',"
    "           'state_dir': '/var/lib/switchyard', 'heap_reserve_mb': 64,"
    "           'origins': ['admin.example.com', 'https://ops.example.com:8443']}}";

static size_t freed;
static inline void *make_udata(const struct adm_route *r, void *arg)
{
    (void)arg;
    return strdup(r->id);
}
static inline void count_free(void *p)
{
    freed++;
    free(p);
}

#endif
