/*
 * test_config.c - the config parser/validator (admin/config*.c): the default
 * config, a config using every key, the defaults of a minimal one, every
 * class of error with its exact JSON pointer, unknown keys against a key
 * table of the test's own (config_parse.c), many errors in one document,
 * the entry points. The routes section and the router table built from a
 * config are test_config_routes.c, addresses and CIDRs on their own
 * test_addr.c, error lists test_errors.c.
 *
 * Documents are written with ' for " (see J() in config_test.h) to stay
 * readable.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/config.h"
#include "admin/config_int.h"
#include "router/router.h"
#include "tests/admin/config_test.h"

/* ---- the default config ---- */

START_TEST(default_config_parses)
{
    struct adm_config *c = adm_config_default();
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(c->nlisteners, 1);
    ck_assert_str_eq(c->listeners[0].addr.text, "0.0.0.0:8080");
    ck_assert_int_eq(c->listeners[0].addr.numeric, 1);
    ck_assert_int_eq(c->listeners[0].addr.ss.ss_family, AF_INET);
    ck_assert_uint_eq(c->nupstreams, 0);
    ck_assert_uint_eq(c->nroutes, 1);
    const struct adm_route *r = &c->routes[0];
    ck_assert_str_eq(r->path, "/");
    ck_assert_uint_eq(r->nmethods, 1);
    ck_assert_str_eq(r->methods[0], "GET");
    ck_assert_int_eq(r->action, ADM_ACTION_RESPONSE);
    ck_assert_uint_eq(r->response.status, 200);
    ck_assert_uint_eq(r->response.nheaders, 1);
    ck_assert_str_eq(r->response.headers[0].name, "Content-Type");
    ck_assert_ptr_nonnull(strstr(r->response.headers[0].value, "text/plain"));
    ck_assert_ptr_nonnull(strstr(r->response.body, "Switchyard is running"));
    ck_assert_ptr_nonnull(strstr(r->response.body, "curl"));
    ck_assert_ptr_nonnull(strstr(r->response.body, "127.0.0.1:9901"));
    ck_assert_str_eq(c->admin.addr.text, "127.0.0.1:9901");
    ck_assert_int_eq(adm_addr_is_loopback(&c->admin.addr), 1);

    char *canon = adm_config_canonical(c);
    ck_assert_ptr_nonnull(canon);
    ck_assert_ptr_null(strchr(canon, '\n'));
    ck_assert_int_eq(canon[0], '{');
    ck_assert_ptr_nonnull(strstr(canon, "{\"admin\":{\"address\":\"127.0.0.1:9901\"},"));
    free(canon);
    adm_config_free(c);
}
END_TEST

/* admin/default_config.json is the embedded default, for operators to copy. */
START_TEST(default_config_file_matches)
{
    struct adm_errors e;
    adm_errors_init(&e);
    struct adm_config *f = adm_config_load_file(SY_DEFAULT_CONFIG_FILE, &e);
    if (!f)
        ck_abort_msg("%s", dump(&e));
    struct adm_config *d = adm_config_default();
    char *a = adm_config_canonical(f), *b = adm_config_canonical(d);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    adm_config_free(f);
    adm_config_free(d);
    adm_errors_clear(&e);
}
END_TEST

/* ---- values ---- */

START_TEST(full_config_values)
{
    struct adm_config *c = expect_ok(J(full_config));

    ck_assert_uint_eq(c->workers, 4);
    ck_assert_uint_eq(adm_config_workers(c), 4);

    ck_assert_uint_eq(c->nlisteners, 2);
    ck_assert_int_eq(c->listeners[1].addr.ss.ss_family, AF_INET6);
    ck_assert_uint_eq(c->listeners[1].addr.port, 8443);
    ck_assert_str_eq(c->listeners[1].addr.host, "::1");
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&c->listeners[1].addr.ss;
    ck_assert_uint_eq(ntohs(s6->sin6_port), 8443);
    ck_assert_uint_eq(c->listeners[1].addr.sslen, sizeof(struct sockaddr_in6));
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&c->listeners[0].addr.ss;
    ck_assert_uint_eq(ntohs(s4->sin_port), 8080);
    ck_assert_uint_eq(ntohl(s4->sin_addr.s_addr), 0);

    ck_assert_uint_eq(c->nupstreams, 2);
    const struct adm_upstream *u = adm_config_upstream(c, "users");
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->nservers, 2);
    ck_assert_uint_eq(u->servers[0].weight, 2);
    ck_assert_int_eq(u->servers[0].addr.numeric, 1);
    ck_assert_uint_eq(u->servers[1].weight, 1);
    ck_assert_int_eq(u->servers[1].addr.numeric, 0);
    ck_assert_str_eq(u->servers[1].addr.host, "backend-1.internal");
    ck_assert_str_eq(u->servers[1].addr.text, "Backend-1.internal:9002");
    ck_assert_uint_eq(u->servers[1].addr.port, 9002);
    ck_assert_int_eq(u->balance, ADM_BALANCE_ROUND_ROBIN);
    ck_assert_uint_eq(u->keepalive, 8);
    ck_assert_uint_eq(u->idle_timeout_ms, 1500);
    const struct adm_upstream *sv = adm_config_upstream(c, "static.v2");
    ck_assert_ptr_nonnull(sv);
    ck_assert_uint_eq(sv->keepalive, 32);
    ck_assert_uint_eq(sv->idle_timeout_ms, 6); /* timeouts.upstream_idle_ms */
    ck_assert_int_eq(sv->servers[0].addr.ss.ss_family, AF_INET6);
    ck_assert_ptr_null(adm_config_upstream(c, "nope"));

    ck_assert_uint_eq(c->nroutes, 6);
    const struct adm_route *r = adm_config_route(c, "get-user");
    ck_assert_ptr_eq(r, &c->routes[0]);
    ck_assert_str_eq(r->host, "api.example.com");
    ck_assert_str_eq(r->path, "/users/{id}");
    ck_assert_str_eq(r->pattern, "api.example.com/users/{id}");
    ck_assert_uint_eq(r->nmethods, 2);
    ck_assert_str_eq(r->methods[1], "HEAD");
    ck_assert_int_eq(r->action, ADM_ACTION_UPSTREAM);
    ck_assert_str_eq(r->upstream, "users");
    ck_assert_ptr_eq(&c->upstreams[r->upstream_index], u);
    ck_assert_str_eq(r->rewrite, "/v2/users/{id}");
    ck_assert_ptr_null(r->strip_prefix);
    ck_assert_uint_eq(r->timeout_ms, 2500);

    r = &c->routes[1];
    ck_assert_ptr_null(r->host);
    ck_assert_str_eq(r->pattern, "/static/*{file}");
    ck_assert_uint_eq(r->nmethods, 0);
    ck_assert_ptr_eq(&c->upstreams[r->upstream_index], sv);
    ck_assert_str_eq(r->strip_prefix, "/static");
    ck_assert_uint_eq(r->timeout_ms, 5); /* timeouts.upstream_response_ms */

    r = &c->routes[2];
    ck_assert_int_eq(r->action, ADM_ACTION_RESPONSE);
    ck_assert_uint_eq(r->response.status, 200);
    ck_assert_uint_eq(r->response.nheaders, 2);
    ck_assert_str_eq(r->response.headers[0].name, "Content-Type");
    ck_assert_str_eq(r->response.headers[0].value, "text/plain");
    ck_assert_str_eq(r->response.headers[1].name, "Cache-Control");
    ck_assert_str_eq(r->response.body, "pong");
    ck_assert_uint_eq(r->response.body_len, 4);

    r = &c->routes[3];
    ck_assert_str_eq(r->id, "old:docs");
    ck_assert_int_eq(r->action, ADM_ACTION_REDIRECT);
    ck_assert_uint_eq(r->redirect.status, 308);
    ck_assert_str_eq(r->redirect.location, "https://docs.example.com/");

    r = &c->routes[4];
    ck_assert_str_eq(r->pattern, "{tenant}.example.com/");
    ck_assert_str_eq(r->rewrite, "/t/{tenant}");

    r = &c->routes[5];
    ck_assert_uint_eq(r->response.status, 204);
    ck_assert_str_eq(r->response.body, "");
    ck_assert_str_eq(r->methods[1], "PURGE");

    ck_assert_int_eq(c->router.trailing_slash, RT_TS_REDIRECT);
    ck_assert_int_eq(c->router.auto_options, 1);
    ck_assert_int_eq(c->router.merge_slashes, 0);
    ck_assert_int_eq(c->router.forward_path, ADM_FWD_NORMALIZED);
    ck_assert_int_eq(c->router.escaped_slashes, H1_SLASHES_DECODE);

    ck_assert_uint_eq(c->ntrusted_proxies, 4);
    ck_assert_int_eq(c->trusted_proxies[0].family, AF_INET);
    ck_assert_uint_eq(c->trusted_proxies[0].prefix, 8);
    ck_assert_int_eq(c->trusted_proxies[1].family, AF_INET6);
    ck_assert_uint_eq(c->trusted_proxies[1].prefix, 128);
    ck_assert_uint_eq(c->trusted_proxies[2].prefix, 32);
    ck_assert_uint_eq(c->trusted_proxies[3].prefix, 8);

    ck_assert_uint_eq(c->limits.max_request_line, 4096);
    ck_assert_uint_eq(c->limits.max_header_bytes, 16384);
    ck_assert_uint_eq(c->limits.max_headers, 50);
    ck_assert_uint_eq(c->limits.max_body_bytes, 1048576);
    ck_assert_uint_eq(c->limits.max_connections, 2000);
    ck_assert_uint_eq(c->limits.max_pending_connections, 500); /* a quarter of the cap */
    ck_assert_uint_eq(c->limits.max_routes, 5000);

    ck_assert_uint_eq(c->timeouts.client_header_ms, 1);
    ck_assert_uint_eq(c->timeouts.client_idle_ms, 2);
    ck_assert_uint_eq(c->timeouts.client_body_ms, 3);
    ck_assert_uint_eq(c->timeouts.upstream_connect_ms, 4);
    ck_assert_uint_eq(c->timeouts.upstream_response_ms, 5);
    ck_assert_uint_eq(c->timeouts.upstream_idle_ms, 6);
    ck_assert_uint_eq(c->timeouts.drain_ms, 7);
    ck_assert_uint_eq(c->timeouts.lingering_ms, 8);
    ck_assert_uint_eq(c->timeouts.tunnel_idle_ms, 9);
    ck_assert_uint_eq(c->http2.max_concurrent_streams, 250);
    ck_assert_uint_eq(c->http2.initial_window_bytes, 1048576);
    ck_assert_uint_eq(c->listeners[0].protocols, ADM_PROTO_H1);
    ck_assert_uint_eq(c->listeners[1].protocols, ADM_PROTO_H1 | ADM_PROTO_H2C);

    ck_assert_int_eq(c->access_log.target, ADM_LOG_FILE);
    ck_assert_str_eq(c->access_log.path, "/var/log/switchyard/access.log");

    ck_assert_str_eq(c->admin.addr.text, "[::1]:9901");
    ck_assert_int_eq(adm_addr_is_loopback(&c->admin.addr), 1);
    ck_assert_str_eq(c->admin.token_file, "/etc/switchyard/token");
    ck_assert_str_eq(c->admin.state_dir, "/var/lib/switchyard");
    ck_assert_uint_eq(c->admin.heap_reserve_mb, 64);
    ck_assert_uint_eq(c->admin.norigins, 2);
    ck_assert_str_eq(c->admin.origins[0].scheme, "");
    ck_assert_str_eq(c->admin.origins[0].host, "admin.example.com");
    ck_assert_uint_eq(c->admin.origins[0].port, 0);
    ck_assert_str_eq(c->admin.origins[1].scheme, "https");
    ck_assert_str_eq(c->admin.origins[1].host, "ops.example.com");
    ck_assert_uint_eq(c->admin.origins[1].port, 8443);

    /* the canonical form is the same document, and parses to the same */
    char *canon = adm_config_canonical(c);
    ck_assert_ptr_nonnull(canon);
    struct adm_config *c2 = expect_ok(canon);
    char *canon2 = adm_config_canonical(c2);
    ck_assert_str_eq(canon, canon2);
    ck_assert_ptr_nonnull(strstr(canon, "\"access_log\":\"/var/log/switchyard/access.log\","
                                        "\"admin\":{\"address\":\"[::1]:9901\""));
    free(canon);
    free(canon2);
    adm_config_free(c2);
    adm_config_free(c);
}
END_TEST

START_TEST(minimal_config_defaults)
{
    struct adm_config *c = expect_ok(doc(NULL));
    ck_assert_uint_eq(c->workers, 0);
    ck_assert_uint_ge(adm_config_workers(c), 1);
    ck_assert_uint_le(adm_config_workers(c), 256);
    ck_assert_uint_eq(c->nupstreams, 0);
    ck_assert_uint_eq(c->nroutes, 0);
    ck_assert_uint_eq(c->ntrusted_proxies, 0);
    ck_assert_int_eq(c->router.trailing_slash, RT_TS_STRICT);
    ck_assert_int_eq(c->router.auto_options, 0);
    ck_assert_int_eq(c->router.merge_slashes, 1);
    ck_assert_int_eq(c->router.forward_path, ADM_FWD_AS_RECEIVED);
    ck_assert_int_eq(c->router.escaped_slashes, H1_SLASHES_REJECT);
    ck_assert_uint_eq(c->limits.max_request_line, 8192);
    ck_assert_uint_eq(c->limits.max_header_bytes, 32768);
    ck_assert_uint_eq(c->limits.max_headers, 100);
    ck_assert_uint_eq(c->limits.max_body_bytes, 0);
    ck_assert_uint_eq(c->limits.max_connections, 10000);
    ck_assert_uint_eq(c->limits.max_pending_connections, 2500);
    ck_assert_uint_eq(c->limits.max_routes, 100000);
    ck_assert_uint_eq(c->timeouts.client_header_ms, 10000);
    ck_assert_uint_eq(c->timeouts.client_idle_ms, 60000);
    ck_assert_uint_eq(c->timeouts.client_body_ms, 30000);
    ck_assert_uint_eq(c->timeouts.upstream_connect_ms, 5000);
    ck_assert_uint_eq(c->timeouts.upstream_response_ms, 60000);
    ck_assert_uint_eq(c->timeouts.upstream_idle_ms, 60000);
    ck_assert_uint_eq(c->timeouts.drain_ms, 10000);
    ck_assert_uint_eq(c->timeouts.lingering_ms, 30000);
    ck_assert_uint_eq(c->timeouts.tunnel_idle_ms, 3600000);
    ck_assert_uint_eq(c->http2.max_concurrent_streams, 100);
    ck_assert_uint_eq(c->http2.initial_window_bytes, 65535);
    ck_assert_uint_eq(c->listeners[0].protocols, ADM_PROTO_H1);
    ck_assert_int_eq(c->access_log.target, ADM_LOG_STDOUT);
    ck_assert_ptr_null(c->access_log.path);
    ck_assert_int_eq(c->log_level, ADM_LEVEL_WARN);
    ck_assert_str_eq(c->admin.addr.text, "127.0.0.1:9901");
    ck_assert_ptr_null(c->admin.token_file);
    ck_assert_ptr_null(c->admin.state_dir);
    ck_assert_uint_eq(c->admin.heap_reserve_mb, 48);
    ck_assert_uint_eq(c->admin.norigins, 0);
    adm_config_free(c);

    c = expect_ok(doc("'access_log': 'off', 'routes': [{'id': 'r', 'path': '/r', "
                      "'redirect': {'location': '/x'}}, {'id': 's', 'path': '/s', "
                      "'response': {}}]"));
    ck_assert_int_eq(c->access_log.target, ADM_LOG_OFF);
    ck_assert_uint_eq(c->routes[0].redirect.status, 302);
    ck_assert_uint_eq(c->routes[1].response.status, 200);
    ck_assert_str_eq(c->routes[1].response.body, "");
    adm_config_free(c);

    c = expect_ok(doc("'access_log': 'stderr'"));
    ck_assert_int_eq(c->access_log.target, ADM_LOG_STDERR);
    adm_config_free(c);

    static const char *const levels[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        char d[64];
        snprintf(d, sizeof(d), "'log_level': '%s'", levels[i]);
        c = expect_ok(doc(d));
        ck_assert_int_eq(c->log_level, i);
        adm_config_free(c);
    }
}
END_TEST

/* limits.max_pending_connections: as given, else a quarter of
 * max_connections, and at least 1. */
START_TEST(pending_connections_budget)
{
    static const struct {
        const char *limits;
        unsigned want;
    } cases[] = {
        {"'limits': {'max_connections': 20, 'max_pending_connections': 20}", 20},
        {"'limits': {'max_connections': 20, 'max_pending_connections': 1}", 1},
        {"'limits': {'max_connections': 20}", 5},
        {"'limits': {'max_connections': 7}", 1},
        {"'limits': {'max_connections': 1}", 1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct adm_config *c = expect_ok(doc(cases[i].limits));
        ck_assert_uint_eq(c->limits.max_pending_connections, cases[i].want);
        adm_config_free(c);
    }
}
END_TEST

/* "resolver": nameservers (port 53 unless given), hosts file, timeouts. */
START_TEST(resolver_section)
{
    struct adm_config *c = expect_ok(doc(NULL));
    ck_assert_uint_eq(c->resolver.nnameservers, 0);
    ck_assert_ptr_null(c->resolver.hosts_file);
    ck_assert_uint_eq(c->resolver.timeout_ms, 5000);
    ck_assert_uint_eq(c->resolver.attempts, 2);
    adm_config_free(c);

    c = expect_ok(doc("'resolver': {'nameservers': ['127.0.0.1:5353', '10.0.0.2', '[::1]'],"
                      " 'hosts_file': '/etc/hosts', 'timeout_ms': 250, 'attempts': 3}"));
    ck_assert_uint_eq(c->resolver.nnameservers, 3);
    ck_assert_str_eq(c->resolver.nameservers[0], "127.0.0.1:5353");
    ck_assert_str_eq(c->resolver.nameservers[1], "10.0.0.2:53");
    ck_assert_str_eq(c->resolver.nameservers[2], "[::1]:53");
    ck_assert_str_eq(c->resolver.hosts_file, "/etc/hosts");
    ck_assert_uint_eq(c->resolver.timeout_ms, 250);
    ck_assert_uint_eq(c->resolver.attempts, 3);
    adm_config_free(c);

    expect_error(doc("'resolver': {'nameservers': ['dns.example:53']}"), "/resolver/nameservers/0",
                 "numeric IP address");
    expect_error(doc("'resolver': {'nameservers': ['127.0.0.1', '1.2.3.4:99999']}"),
                 "/resolver/nameservers/1", "invalid nameserver");
    expect_error(doc("'resolver': {'nameservers': []}"), "/resolver/nameservers", "at least one");
    expect_error(doc("'resolver': {'nameservers': '127.0.0.1'}"), "/resolver/nameservers", "array");
    expect_error(doc("'resolver': {'timeout_ms': 0}"), "/resolver/timeout_ms", "");
    expect_error(doc("'resolver': {'attempts': 11}"), "/resolver/attempts", "");
    expect_error(doc("'resolver': {'hosts_file': ''}"), "/resolver/hosts_file", "");
    expect_error(doc("'resolver': {'nameserver': ['127.0.0.1']}"), "/resolver/nameserver", "");
}
END_TEST

/* "rollout": a staged rollout's defaults (config_rollout.c), strict like the rest. */
START_TEST(rollout_section)
{
    struct adm_config *c = expect_ok(doc(NULL));
    ck_assert_uint_eq(c->rollout.canary_s, 60);
    ck_assert_int_eq(c->rollout.key, ADM_CANARY_CLIENT_IP);
    ck_assert_uint_eq(c->rollout.threshold_pct, 1);
    ck_assert_uint_eq(c->rollout.min_requests, 20);
    ck_assert_uint_eq(c->rollout.latency_pct, 25);
    adm_config_free(c);

    c = expect_ok(doc("'rollout': {'canary_s': 10, 'canary_key': 'request', 'threshold_pct': 0,"
                      " 'min_requests': 100, 'latency_pct': 50}"));
    ck_assert_uint_eq(c->rollout.canary_s, 10);
    ck_assert_int_eq(c->rollout.key, ADM_CANARY_REQUEST);
    ck_assert_uint_eq(c->rollout.threshold_pct, 0);
    ck_assert_uint_eq(c->rollout.min_requests, 100);
    ck_assert_uint_eq(c->rollout.latency_pct, 50);
    adm_config_free(c);

    expect_error(doc("'rollout': {'canary_s': 0}"), "/rollout/canary_s", "");
    expect_error(doc("'rollout': {'canary_key': 'ip'}"), "/rollout/canary_key", "client_ip");
    expect_error(doc("'rollout': {'threshold_pct': 101}"), "/rollout/threshold_pct", "");
    expect_error(doc("'rollout': {'min_requests': 0}"), "/rollout/min_requests", "");
    expect_error(doc("'rollout': {'canary': 10}"), "/rollout/canary", "");
    expect_error(doc("'rollout': 60"), "/rollout", "object");
}
END_TEST

START_TEST(admin_origins)
{
    struct adm_config *c =
        expect_ok(doc("'admin': {'origins': ['Admin.Example.COM:9901', 'http://[::1]:8080', "
                      "'HTTPS://10.0.0.5', 'gw_1.internal']}"));
    ck_assert_uint_eq(c->admin.norigins, 4);
    ck_assert_str_eq(c->admin.origins[0].host, "admin.example.com");
    ck_assert_uint_eq(c->admin.origins[0].port, 9901);
    ck_assert_str_eq(c->admin.origins[1].scheme, "http");
    ck_assert_str_eq(c->admin.origins[1].host, "[::1]");
    ck_assert_uint_eq(c->admin.origins[1].port, 8080);
    ck_assert_str_eq(c->admin.origins[2].scheme, "https");
    ck_assert_str_eq(c->admin.origins[2].host, "10.0.0.5");
    ck_assert_uint_eq(c->admin.origins[2].port, 0);
    ck_assert_str_eq(c->admin.origins[3].host, "gw_1.internal");
    adm_config_free(c);
    c = expect_ok(doc("'admin': {'origins': []}"));
    ck_assert_uint_eq(c->admin.norigins, 0);
    adm_config_free(c);

    expect_error(doc("'admin': {'origins': 'admin.example.com'}"), "/admin/origins", "array");
    expect_error(doc("'admin': {'origins': ['a.example', '']}"), "/admin/origins/1", "empty");
    expect_error(doc("'admin': {'origins': [5]}"), "/admin/origins/0", "expected a string");
    expect_error(doc("'admin': {'origins': ['a.example', 'ftp://b.example']}"), "/admin/origins/1",
                 "invalid origin \"ftp://b.example\": the scheme must be http or https");
    expect_error(doc("'admin': {'origins': ['*.example.com']}"), "/admin/origins/0",
                 "wildcards are not supported: list each name");
    expect_error(doc("'admin': {'origins': ['https://ops.example.com/']}"), "/admin/origins/0",
                 "a path is not allowed (write scheme://host:port)");
    expect_error(doc("'admin': {'origins': ['ops.example.com:8443/x']}"), "/admin/origins/0",
                 "a path is not allowed");
    expect_error(doc("'admin': {'origins': ['ops.example.com:0']}"), "/admin/origins/0",
                 "the port must be 1..65535");
    expect_error(doc("'admin': {'origins': ['ops.example.com:65536']}"), "/admin/origins/0",
                 "the port must be 1..65535");
    expect_error(doc("'admin': {'origins': ['ops.example.com:']}"), "/admin/origins/0",
                 "the port must be 1..65535");
    expect_error(doc("'admin': {'origins': ['user@ops.example.com']}"), "/admin/origins/0",
                 "userinfo");
    expect_error(doc("'admin': {'origins': ['::1']}"), "/admin/origins/0",
                 "an IPv6 address goes in brackets");
    expect_error(doc("'admin': {'origins': ['[::1']}"), "/admin/origins/0", "in brackets");
    expect_error(doc("'admin': {'origins': ['[fe80::1%eth0]']}"), "/admin/origins/0",
                 "is not an IPv6 address");
    expect_error(doc("'admin': {'origins': ['ops example']}"), "/admin/origins/0",
                 "a DNS name or an IP address");
    expect_error(doc("'admin': {'origin': ['ops.example.com']}"), "/admin/origin", "origins");
}
END_TEST

/* ---- unknown keys against a table of one's own (config_parse.c) ---- */

/* Reads the members of <json> through the key table <f> alone (no
 * section, no config: the rows' targets are an int) and expects the one
 * error <msg> at <path>. */
static void table_error(const char *json, const struct adm_cf_field *f, size_t nf, const char *path,
                        const char *msg)
{
    struct adm_errors e;
    struct adm_cf x = {.errs = &e, .pcap = 16};
    json_t *obj = json_loads(J(json), 0, NULL);
    int target = 0;

    adm_errors_init(&e);
    x.path = calloc(1, x.pcap);
    ck_assert_ptr_nonnull(obj);
    ck_assert_ptr_nonnull(x.path);
    adm_cf_fields(&x, obj, f, nf, &target);
    ck_assert_uint_eq(e.n, 1);
    ck_assert_str_eq(e.v[0].path, path);
    ck_assert_str_eq(e.v[0].msg, msg);
    adm_errors_clear(&e);
    free(x.path);
    json_decref(obj);
}

START_TEST(unknown_key_tie_goes_to_a_real_key)
{
    /* a typo as near a real key as a misplaced row is offered the real
     * key, wherever the rows stand (writing the misplaced one is refused).
     * No shipped table has such a tie (their misplaced rows stand last and
     * are far from every real key), so these two tables make one, in both
     * orders: "limit_xs" is one edit from either key */
    static const struct adm_cf_field misplaced_first[] = {
        {.key = "limit_ms", .misplaced = "a route key"},
        {.key = "limit_us", .kind = FK_BOOL},
    };
    static const struct adm_cf_field real_first[] = {
        {.key = "limit_us", .kind = FK_BOOL},
        {.key = "limit_ms", .misplaced = "a route key"},
    };

    table_error("{'limit_xs': true}", misplaced_first, NFIELDS(misplaced_first), "/limit_xs",
                "unknown key (did you mean \"limit_us\"?)");
    table_error("{'limit_xs': true}", real_first, NFIELDS(real_first), "/limit_xs",
                "unknown key (did you mean \"limit_us\"?)");
    /* nearer to the misplaced row than to any real key: told where it goes */
    table_error("{'limit_m': true}", real_first, NFIELDS(real_first), "/limit_m",
                "unknown key (\"limit_ms\" is a route key)");
    /* the misplaced key itself */
    table_error("{'limit_ms': true}", misplaced_first, NFIELDS(misplaced_first), "/limit_ms",
                "a route key");
}
END_TEST

/* ---- error classes ---- */

START_TEST(unknown_keys)
{
    expect_error(doc("'wokers': 2"), "/wokers", "unknown key (did you mean \"workers\"?)");
    expect_error(doc("'frobnicate': 2"), "/frobnicate", "unknown key");
    /* (listeners have "tls" now: tests/admin/test_tls_config.c) */
    expect_error(J("{'listeners': [{'address': '127.0.0.1:80', 'ssl': {}}]}"), "/listeners/0/ssl",
                 "unknown key");
    expect_error(doc("'limits': {'max_body': 1}"), "/limits/max_body", "unknown key");
    expect_error(doc("'timeouts': {'client_header': 1}"), "/timeouts/client_header",
                 "did you mean \"client_header_ms\"");
    expect_error(doc("'timeouts': {'drain': 1}"), "/timeouts/drain", "did you mean \"drain_ms\"");
    expect_error(doc("'policy': {}"), "/policy", "did you mean \"policies\"");
    expect_error(doc("'http2': {'max_concurrent_stream': 1}"), "/http2/max_concurrent_stream",
                 "did you mean \"max_concurrent_streams\"");
    /* header sizes are limits' keys, for HTTP/1.1 and HTTP/2 alike */
    expect_error(doc("'http2': {'max_header_list_size': 1}"), "/http2/max_header_list_size",
                 "unknown key (one of \"max_concurrent_streams\", \"initial_window_bytes\")");
    expect_error(doc("'http2': []"), "/http2", "expected an object, got an array");
    expect_error(doc("'limits': {'max_body': 1}"), "/limits/max_body",
                 "did you mean \"max_body_bytes\"");
    expect_error(doc("'router': {'trailing-slash': 'strict'}"), "/router/trailing-slash",
                 "did you mean \"trailing_slash\"");
    expect_error(doc("'admin': {'token': 'x'}"), "/admin/token", "unknown key");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80', 'port': 1}]}}"),
                 "/upstreams/u/servers/0/port", "unknown key");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80'}], "
                     "'health_probe': {}}}"),
                 "/upstreams/u/health_probe", "unknown key");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'stauts': 200}}]"),
                 "/routes/0/response/stauts", "did you mean \"status\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', "
                     "'redirect': {'location': '/x', 'code': 301}}]"),
                 "/routes/0/redirect/code", "unknown key");
    /* a small table is named whole when no key is close */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', "
                     "'redirect': {'location': '/x', 'code': 301}}]"),
                 "/routes/0/redirect/code", "unknown key (one of \"status\", \"location\")");
    /* JSON pointer escaping of '/' and '~' */
    expect_error(doc("'a/b~c': 1"), "/a~1b~0c", "unknown key");
}
END_TEST

START_TEST(wrong_types)
{
    expect_error(doc("'workers': '4'"), "/workers", "expected an integer, got a string");
    expect_error(doc("'workers': 4.0"), "/workers", "expected an integer, got a real number");
    expect_error(J("{'listeners': {'address': '1.2.3.4:80'}}"), "/listeners",
                 "expected an array, got an object");
    expect_error(J("{'listeners': ['1.2.3.4:80']}"), "/listeners/0",
                 "expected an object, got a string");
    expect_error(doc("'upstreams': []"), "/upstreams", "expected an object, got an array");
    expect_error(doc("'routes': [{'id': 7, 'path': '/', 'response': {}}]"), "/routes/0/id",
                 "expected a string, got an integer");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': 'GET', 'response': {}}]"),
                 "/routes/0/methods", "expected an array, got a string");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': [null], 'response': {}}]"),
                 "/routes/0/methods/0", "expected a string, got null");
    expect_error(doc("'router': {'auto_options': 1}"), "/router/auto_options",
                 "expected a boolean, got an integer");
    expect_error(doc("'limits': {'max_headers': true}"), "/limits/max_headers",
                 "expected an integer, got a boolean");
    expect_error(doc("'trusted_proxies': '10.0.0.0/8'"), "/trusted_proxies",
                 "expected an array, got a string");
    expect_error(doc("'access_log': false"), "/access_log", "expected a string, got a boolean");
    expect_error(doc("'log_level': 2"), "/log_level", "expected a string, got an integer");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'X-A': 1}}}]"),
                 "/routes/0/response/headers/X-A", "expected a string, got an integer");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': []}]"), "/routes/0/response",
                 "expected an object, got an array");
}
END_TEST

START_TEST(missing_required)
{
    expect_error("{}", "/listeners", "missing (required)");
    expect_error(J("{'listeners': [{}]}"), "/listeners/0/address", "missing (required)");
    expect_error(doc("'routes': [{'path': '/', 'response': {}}]"), "/routes/0/id", "missing");
    expect_error(doc("'routes': [{'id': 'a', 'response': {}}]"), "/routes/0/path", "missing");
    expect_error(doc("'upstreams': {'u': {}}"), "/upstreams/u/servers", "missing");
    expect_error(doc("'upstreams': {'u': {'servers': [{'weight': 2}]}}"),
                 "/upstreams/u/servers/0/address", "missing");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'redirect': {'status': 301}}]"),
                 "/routes/0/redirect/location", "missing");
}
END_TEST

START_TEST(out_of_range)
{
    expect_error(doc("'workers': 0"), "/workers", "must be between 1 and 256 (got 0)");
    expect_error(doc("'workers': 257"), "/workers", "must be between 1 and 256 (got 257)");
    expect_error(doc("'admin': {'heap_reserve_mb': 1025}"), "/admin/heap_reserve_mb",
                 "must be between 0 and 1024 (got 1025)");
    expect_error(J("{'listeners': []}"), "/listeners", "at least one");
    expect_error(doc("'upstreams': {'u': {'servers': []}}"), "/upstreams/u/servers",
                 "at least one");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80', 'weight': 0}]}}"),
                 "/upstreams/u/servers/0/weight", "between 1 and 1000");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80', "
                     "'weight': 1001}]}}"),
                 "/upstreams/u/servers/0/weight", "between 1 and 1000");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80'}], "
                     "'keepalive': -1}}"),
                 "/upstreams/u/keepalive", "between 0 and");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80'}], "
                     "'balance': 'least_connections'}}"),
                 "/upstreams/u/balance",
                 "invalid value \"least_connections\" (expected one of \"round_robin\", "
                 "\"least_conn\", \"random_two\", \"hash\")");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'status': 199}}]"),
                 "/routes/0/response/status", "between 200 and 599");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'status': 600}}]"),
                 "/routes/0/response/status", "between 200 and 599");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'redirect': {'status': 305, "
                     "'location': '/'}}]"),
                 "/routes/0/redirect/status", "one of 301, 302, 303, 307, 308");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'redirect': {'status': 200, "
                     "'location': '/'}}]"),
                 "/routes/0/redirect/status", "between 300 and 399");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80'}]}}, "
                     "'routes': [{'id': 'a', 'path': '/', 'upstream': 'u', 'timeout_ms': 0}]"),
                 "/routes/0/timeout_ms", "between 1 and");
    expect_error(doc("'limits': {'max_headers': 0}"), "/limits/max_headers", "between 1 and");
    expect_error(doc("'limits': {'max_body_bytes': -1}"), "/limits/max_body_bytes",
                 "between 0 and");
    expect_error(doc("'limits': {'max_request_line': 99999999999}"), "/limits/max_request_line",
                 "between 1 and");
    expect_error(doc("'limits': {'max_pending_connections': 0}"), "/limits/max_pending_connections",
                 "between 1 and");
    expect_error(doc("'limits': {'max_connections': 20, 'max_pending_connections': 21}"),
                 "/limits/max_pending_connections", "must be at most max_connections (20)");
    expect_error(doc("'limits': {'max_pending_connections': 10001}"),
                 "/limits/max_pending_connections", "must be at most max_connections (10000)");
    expect_error(doc("'timeouts': {'drain_ms': 0}"), "/timeouts/drain_ms", "between 1 and");
    expect_error(doc("'timeouts': {'tunnel_idle_ms': 0}"), "/timeouts/tunnel_idle_ms",
                 "between 1 and 86400000");
    expect_error(doc("'timeouts': {'client_idle_ms': 86400001}"), "/timeouts/client_idle_ms",
                 "between 1 and 86400000");
    expect_error(doc("'http2': {'max_concurrent_streams': 0}"), "/http2/max_concurrent_streams",
                 "must be between 1 and 10000 (got 0)");
    expect_error(doc("'http2': {'max_concurrent_streams': 10001}"), "/http2/max_concurrent_streams",
                 "must be between 1 and 10000 (got 10001)");
    expect_error(doc("'http2': {'initial_window_bytes': 65534}"), "/http2/initial_window_bytes",
                 "must be between 65535 and 2147483647 (got 65534)");
    expect_error(doc("'http2': {'initial_window_bytes': 2147483648}"),
                 "/http2/initial_window_bytes", "must be between 65535 and 2147483647");
    expect_error(doc("'router': {'trailing_slash': 'loose'}"), "/router/trailing_slash",
                 "expected one of \"strict\", \"redirect\", \"relaxed\"");
    expect_error(doc("'router': {'forward_path': 'raw'}"), "/router/forward_path",
                 "expected one of \"as_received\", \"normalized\"");
    expect_error(doc("'router': {'escaped_slashes': 'unescape_and_forward'}"),
                 "/router/escaped_slashes", "expected one of \"reject\", \"decode\", \"keep\"");
    expect_error(doc("'router': {'escaped_slashes': true}"), "/router/escaped_slashes", "");
    expect_error(doc("'access_log': ''"), "/access_log", "must not be empty");
    expect_error(doc("'log_level': 'notice'"), "/log_level",
                 "invalid value \"notice\" (expected one of \"error\", \"warn\", \"info\", "
                 "\"debug\")");
}
END_TEST

START_TEST(bad_addresses)
{
    static const struct {
        const char *addr, *why;
    } bad[] = {
        {"1.2.3.4", "expected HOST:PORT"},
        {"1.2.3.4:0", "port must be"},
        {"1.2.3.4:65536", "port must be"},
        {"1.2.3.4:080", "port must be"},
        {"1.2.3.4:http", "port must be"},
        {"1.2.3.4:", "port must be"},
        {":8080", "missing host"},
        {"::1:80", "needs brackets"},
        {"[::1]80", "expected ':PORT' after ']'"},
        {"[::1:80", "missing ']'"},
        {"[1.2.3.4]:80", "invalid IPv6 address"},
        {"[::g]:80", "invalid IPv6 address"},
        {"256.1.1.1:80", "invalid IPv4 address"},
        {"1.2.3:80", "invalid IPv4 address"},
        {"localhost:80", "must be a numeric IP address"},
        {"[fe80::1%eth0]:80", "invalid IPv6 address"},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(buf, sizeof(buf), "{'listeners': [{'address': '%s'}]}", bad[i].addr);
        expect_error(J(buf), "/listeners/0/address", bad[i].why);
        snprintf(buf, sizeof(buf), "'admin': {'address': '%s'}", bad[i].addr);
        expect_error(doc(buf), "/admin/address", bad[i].why);
    }
    /* names are fine for upstream servers, but must be valid names */
    static const char *bad_names[] = {"-a.example:80", "a-.example:80",          "a..b:80",
                                      "a b:80",        "caf\xc3\xa9.example:80", "example.123:80"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        snprintf(buf, sizeof(buf), "'upstreams': {'u': {'servers': [{'address': '%s'}]}}",
                 bad_names[i]);
        expect_error(doc(buf), "/upstreams/u/servers/0/address", "invalid host name");
    }
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': ''}]}}"),
                 "/upstreams/u/servers/0/address", "must not be empty");

    /* duplicates */
    expect_error(J("{'listeners': [{'address': '0.0.0.0:80'}, {'address': '[::]:80'}, "
                   "{'address': '0.0.0.0:80'}]}"),
                 "/listeners/2/address", "duplicate listener address (also /listeners/0)");
    expect_error(J("{'listeners': [{'address': '[::1]:80'}, {'address': '[0:0::1]:80'}]}"),
                 "/listeners/1/address", "duplicate listener address");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': 'a.example:80'}, "
                     "{'address': 'A.example:80'}]}}"),
                 "/upstreams/u/servers/1/address",
                 "duplicate server (also /upstreams/u/servers/0/address)");

    /* the admin address */
    expect_error(doc("'admin': {'address': '127.0.0.1:8080'}"), "/admin/address",
                 "overlaps /listeners/0/address");
    expect_error(J("{'listeners': [{'address': '0.0.0.0:9901'}]}"), "/listeners/0/address",
                 "overlaps the admin API's default address 127.0.0.1:9901");
    /* a non-loopback admin address without token_file is the gateway's call
     * (it also takes SWITCHYARD_ADMIN_TOKEN) */
    struct adm_config *c0 = expect_ok(doc("'admin': {'address': '0.0.0.0:9901'}"));
    adm_config_free(c0);
    struct adm_config *c = expect_ok(doc("'admin': {'address': '0.0.0.0:9901', "
                                         "'token_file': 'admin.token'}"));
    ck_assert_int_eq(adm_addr_is_loopback(&c->admin.addr), 0);
    adm_config_free(c);
    c = expect_ok(doc("'admin': {'address': '127.3.4.5:9901'}"));
    adm_config_free(c);
    c = expect_ok(doc("'admin': {'address': '[::ffff:127.0.0.1]:9901'}"));
    adm_config_free(c);
}
END_TEST

START_TEST(bad_cidrs)
{
    expect_error(doc("'trusted_proxies': ['10.0.0.0/8', '10.0.0.0/33']"), "/trusted_proxies/1",
                 "invalid CIDR \"10.0.0.0/33\": prefix length must be 0..32");
    expect_error(doc("'trusted_proxies': ['10.1.2.3/8']"), "/trusted_proxies/0",
                 "host bits are set beyond the prefix (did you mean 10.0.0.0/8?)");
    expect_error(doc("'trusted_proxies': ['::1/129']"), "/trusted_proxies/0",
                 "prefix length must be 0..128");
    expect_error(doc("'trusted_proxies': ['fd00::1/8']"), "/trusted_proxies/0",
                 "did you mean fd00::/8?");
    expect_error(doc("'trusted_proxies': ['proxy.local']"), "/trusted_proxies/0",
                 "invalid IP address");
    expect_error(doc("'trusted_proxies': ['10.0.0.0/']"), "/trusted_proxies/0",
                 "prefix length must be a decimal number");
    expect_error(doc("'trusted_proxies': ['10.0.0.0/08']"), "/trusted_proxies/0",
                 "prefix length must be a decimal number");
    expect_error(doc("'trusted_proxies': ['/8']"), "/trusted_proxies/0", "expected ADDRESS/PREFIX");
    expect_error(doc("'trusted_proxies': [8]"), "/trusted_proxies/0", "expected a string");
}
END_TEST

START_TEST(json_syntax)
{
    /* duplicate keys name the duplicate's path */
    expect_error(J("{'listeners': [{'address': '1.2.3.4:80'}], 'listeners': []}"), "/listeners",
                 "duplicate key (line 1, column ");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '1.2.3.4:80'}],\n"
                     "'servers': []}}"),
                 "/upstreams/u/servers", "duplicate key (line 2, column ");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {}},\n"
                     " {'id': 'b', 'path': '/b', 'id': 'c'}]"),
                 "/routes/1/id", "duplicate key (line 2,");
    expect_error(doc("'upstreams': {'a/b~': {'servers': [{'address': '1.2.3.4:80', "
                     "'x\\\"y': 1, 'x\\\"y': 2}]}}"),
                 "/upstreams/a~1b~0/servers/0/x\"y", "duplicate key");
    /* syntax errors: the document, with line and column */
    expect_error(J("{'listeners': [{'address': '1.2.3.4:80'}]\n,}"), "", "line 2, column ");
    expect_error("{\"listeners\": [", "", "line 1, column ");
    /* an empty text is named as such, not as "'[' or '{' expected near end of file" */
    expect_error("", "", "the document is empty: a config is a JSON object ({...})");
    expect_error(" \n\t", "", "the document holds nothing but white space");
    expect_error("{\"a\": 1} x", "", "line 1");
    expect_error("{\"a\": \"x\\u0000y\"}", "", "line 1");
    expect_error("{\"a\": 123456789012345678901234567890}", "", "too big integer");
    /* the document must be an object */
    expect_error("[]", "", "the config must be a JSON object, got an array");
    expect_error("42", "", "line 1");
    expect_error("\"x\"", "", "line 1");

    struct adm_errors e;
    adm_errors_init(&e);
    ck_assert_ptr_null(adm_config_parse(NULL, 0, &e));
    ck_assert_uint_eq(e.n, 1);
    adm_errors_clear(&e);
    ck_assert_ptr_null(adm_config_parse("{", 1, NULL));
    /* a length shorter than the string: only <len> bytes count */
    ck_assert_ptr_null(adm_config_parse(doc(NULL), 5, NULL));
}
END_TEST

START_TEST(many_errors_reported)
{
    static const char bad[] =
        "{'workers': 0, 'listeners': [{'address': 'nope'}, {'address': '1.2.3.4:80', 'x': 1}],"
        " 'upstreams': {'u': {'servers': [{'address': '1.2.3.4:0'}], 'keepalive': 'lots'}},"
        " 'routes': ["
        "   {'id': 'a', 'path': '/a/{id}', 'upstream': 'missing'},"
        "   {'id': 'a', 'path': '/b', 'response': {'status': 42}},"
        "   {'id': 'c', 'path': '/a/{x}', 'upstream': 'u'},"
        "   {'path': 'rel', 'redirect': {}}"
        " ],"
        " 'router': {'trailing_slash': 'sometimes'},"
        " 'trusted_proxies': ['1.2.3.4/40'],"
        " 'limits': {'max_headers': 0},"
        " 'timeouts': {'drain': 5},"
        " 'access_log': 7,"
        " 'admin': {'address': 'localhost:9901'},"
        " 'extra': null}";
    struct adm_errors e;
    struct adm_config *c = parse(J(bad), &e);
    ck_assert_ptr_null(c);
    static const char *const paths[] = {
        "/workers",
        "/listeners/0/address",
        "/listeners/1/x",
        "/upstreams/u/servers/0/address",
        "/upstreams/u/keepalive",
        "/routes/0/upstream",
        "/routes/1/id",
        "/routes/1/response/status",
        "/routes/2/path",
        "/routes/3/id",
        "/routes/3/path",
        "/routes/3/redirect/location",
        "/router/trailing_slash",
        "/trusted_proxies/0",
        "/limits/max_headers",
        "/timeouts/drain",
        "/access_log",
        "/admin/address",
        "/extra",
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        ck_has_error(&e, paths[i], "");
    ck_has_error(&e, "/routes/2/path", "conflicts with route \"a\" (any method /a/{id})");
    ck_assert_uint_eq(e.n, sizeof(paths) / sizeof(paths[0]));

    /* formatting */
    char line[256];
    long i = find_error(&e, "/routes/0/upstream", "");
    ck_assert_int_ge(i, 0);
    size_t n = adm_error_format(&e.v[i], line, sizeof(line));
    ck_assert_str_eq(line, "/routes/0/upstream: unknown upstream \"missing\"");
    ck_assert_uint_eq(n, strlen(line));
    char *all = adm_errors_format(&e);
    ck_assert_ptr_nonnull(strstr(all, "/routes/0/upstream: unknown upstream \"missing\"\n"));
    size_t lines = 0;
    for (const char *p = all; *p; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, e.n);
    free(all);
    json_t *j = adm_errors_json(&e);
    ck_assert_uint_eq(json_array_size(j), e.n);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, (size_t)i), "path")),
                     "/routes/0/upstream");
    json_decref(j);
    adm_errors_clear(&e);

    /* a root error formats without a path */
    c = parse("[", &e);
    ck_assert_ptr_null(c);
    adm_error_format(&e.v[0], line, sizeof(line));
    ck_assert_int_eq(strncmp(line, "line 1, column ", 15), 0);
    adm_errors_clear(&e);
}
END_TEST

/* Error lists are capped; the rest is counted. */
START_TEST(error_cap)
{
    size_t n = ADM_ERRORS_MAX + 50;
    char *s = malloc(n * 16 + 64);
    size_t o = (size_t)sprintf(s, "{\"listeners\": [{\"address\": \"1.2.3.4:80\"}]");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(s + o, ", \"k%zu\": 1", i);
    strcpy(s + o, "}");
    struct adm_errors e;
    ck_assert_ptr_null(parse(s, &e));
    ck_assert_uint_eq(e.n, ADM_ERRORS_MAX);
    ck_assert_uint_eq(e.dropped, 50);
    char *all = adm_errors_format(&e);
    ck_assert_ptr_nonnull(strstr(all, "... and 50 more errors\n"));
    free(all);
    adm_errors_clear(&e);
    free(s);
}
END_TEST

/* ---- entry points ---- */

START_TEST(from_json_and_files)
{
    json_t *j = json_loads(doc("'workers': 3"), 0, NULL);
    struct adm_errors e;
    adm_errors_init(&e);
    struct adm_config *c = adm_config_from_json(j, &e);
    ck_assert_ptr_nonnull(c);
    json_object_set_new(j, "workers", json_integer(9)); /* the config holds a copy */
    ck_assert_int_eq(json_integer_value(json_object_get(c->json, "workers")), 3);
    ck_assert_uint_eq(c->workers, 3);
    adm_config_free(c);

    /* strings with NUL only come this way */
    json_object_set_new(j, "access_log", json_stringn("a\0b", 3));
    ck_assert_ptr_null(adm_config_from_json(j, &e));
    ck_has_error(&e, "/access_log", "must not contain NUL characters");
    adm_errors_clear(&e);
    json_decref(j);

    ck_assert_ptr_null(adm_config_from_json(NULL, &e));
    ck_has_error(&e, "", "must be a JSON object, got null");
    adm_errors_clear(&e);

    char tmpl[] = "/tmp/sy_config_XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    const char *text = doc("'workers': 5");
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    c = adm_config_load_file(tmpl, &e);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(c->workers, 5);
    adm_config_free(c);
    /* a syntax error in a file names the file (a duplicate key too) */
    ck_assert_int_eq(truncate(tmpl, 0), 0);
    fd = open(tmpl, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{\n\"workers\": 1,}", 16), 16);
    close(fd);
    ck_assert_ptr_null(adm_config_load_file(tmpl, &e));
    ck_assert_uint_eq(e.n, 1);
    {
        char want[128];
        snprintf(want, sizeof(want), "%s: line 2, column 14: ", tmpl);
        ck_assert_msg(strncmp(e.v[0].msg, want, strlen(want)) == 0, "%s", e.v[0].msg);
    }
    adm_errors_clear(&e);
    ck_assert_int_eq(truncate(tmpl, 0), 0);
    ck_assert_ptr_null(adm_config_load_file(tmpl, &e));
    {
        char want[128];
        snprintf(want, sizeof(want), "%s: the file is empty: a config is a JSON object ({...})",
                 tmpl);
        ck_has_error(&e, "", want);
    }
    adm_errors_clear(&e);
    unlink(tmpl);

    ck_assert_ptr_null(adm_config_load_file("/nonexistent/sy.json", &e));
    ck_has_error(&e, "", "/nonexistent/sy.json: No such file or directory");
    adm_errors_clear(&e);
    ck_assert_ptr_null(adm_config_load_file("/tmp", &e));
    ck_assert_uint_ge(e.n, 1);
    adm_errors_clear(&e);

    /* a file over 64 MiB (sparse), read whole or from an open stream (a
     * reload's): refused alike, with the same message */
    char big[] = "/tmp/sy_config_XXXXXX";
    fd = mkstemp(big);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (64 << 20) + 1), 0);
    close(fd);
    char want[128];
    snprintf(want, sizeof(want), "%s: larger than 67108864 bytes", big);
    ck_assert_ptr_null(adm_config_load_file(big, &e));
    ck_assert_uint_eq(e.n, 1);
    ck_assert_str_eq(e.v[0].msg, want);
    adm_errors_clear(&e);
    FILE *f = fopen(big, "rb");
    size_t len = 0;
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_null(adm_config_read_file(f, big, &len, &e));
    fclose(f);
    ck_assert_uint_eq(e.n, 1);
    ck_assert_str_eq(e.v[0].path, "");
    ck_assert_str_eq(e.v[0].msg, want);
    adm_errors_clear(&e);
    /* 64 MiB exactly is read */
    ck_assert_int_eq(truncate(big, 64 << 20), 0);
    f = fopen(big, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = adm_config_read_file(f, big, &len, &e);
    fclose(f);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(len, 64u << 20);
    ck_assert_uint_eq(e.n, 0);
    free(buf);
    unlink(big);

    adm_config_free(NULL);
    adm_errors_clear(NULL);
}
END_TEST

/* The validator's table kept with bound udata, and the copy's sharing. */
START_TEST(from_json_bound)
{
    json_t *j = json_loads(J(full_config), 0, NULL);
    struct adm_route_binder b = {make_udata, count_free, NULL};
    struct adm_errors e;
    struct rt_param params[8];
    struct rt_match m;
    const char *path = "/ping";

    ck_assert_ptr_nonnull(j);
    adm_errors_init(&e);
    freed = 0;
    struct adm_config *c = adm_config_from_json_bound(j, &b, &e);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(c->table);
    ck_assert_uint_eq(rt_table_count(c->table), c->nroutes);
    ck_assert_int_eq(rt_lookup(c->table, "GET", 3, NULL, 0, path, strlen(path), params, 8, &m),
                     RT_HIT);
    ck_assert_str_eq(rt_route_udata(m.route), "ping");

    /* the caller's routes array and top level may change; the config's do not */
    size_t n = json_array_size(json_object_get(j, "routes"));
    json_array_clear(json_object_get(j, "routes"));
    json_object_set_new(j, "workers", json_integer(7));
    ck_assert_uint_eq(json_array_size(json_object_get(c->json, "routes")), n);
    ck_assert_int_eq(json_integer_value(json_object_get(c->json, "workers")), 4);
    adm_config_free(c); /* frees the kept table and its udata */
    ck_assert_uint_eq(freed, n);
    json_decref(j);

    /* an invalid config keeps nothing and frees every udata it made */
    j = json_loads(J(full_config), 0, NULL);
    json_object_set_new(j, "workers", json_string("many"));
    freed = 0;
    ck_assert_ptr_null(adm_config_from_json_bound(j, &b, &e));
    ck_has_error(&e, "/workers", "");
    ck_assert_uint_eq(freed, n);
    adm_errors_clear(&e);
    json_decref(j);

    /* without a binder nothing is kept */
    j = json_loads(J(full_config), 0, NULL);
    c = adm_config_from_json(j, &e);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_null(c->table);
    adm_config_free(c);
    json_decref(j);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("admin_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, default_config_parses);
    tcase_add_test(tc, default_config_file_matches);
    tcase_add_test(tc, full_config_values);
    tcase_add_test(tc, minimal_config_defaults);
    tcase_add_test(tc, pending_connections_budget);
    tcase_add_test(tc, resolver_section);
    tcase_add_test(tc, rollout_section);
    tcase_add_test(tc, admin_origins);
    tcase_add_test(tc, unknown_keys);
    tcase_add_test(tc, unknown_key_tie_goes_to_a_real_key);
    tcase_add_test(tc, wrong_types);
    tcase_add_test(tc, missing_required);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, bad_addresses);
    tcase_add_test(tc, bad_cidrs);
    tcase_add_test(tc, json_syntax);
    tcase_add_test(tc, many_errors_reported);
    tcase_add_test(tc, error_cap);
    tcase_add_test(tc, from_json_and_files);
    tcase_add_test(tc, from_json_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
