/*
 * test_config_upstreams.c - the "upstreams" section (admin/config_upstreams.c):
 * every pool key with its default and its errors at their JSON pointers
 * (balancers and hash keys, health_check, outlier, retries, buffering,
 * limits, per-pool timeouts falling back to "timeouts"), a route's buffering
 * keys falling back to its pool's, a config with every pool key
 * accepted (the gateway acts on each), the mistakes a new operator
 * makes named with what to write instead, and the HTTP/2 and gRPC keys
 * (admin/config_upstream_h2.c): protocol against tls, retry_on_grpc_status
 * by code and name, and a gRPC health check.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "admin/config.h"
#include "tests/admin/config_test.h"

/* One pool "u" with one server and the extra pool keys <extra>. */
static const char *pool(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf),
             "'upstreams': {'u': {'servers': [{'address': '127.0.0.1:9001'}]%s%s}}",
             *extra ? ", " : "", extra);
    return doc(buf);
}

/* The gRPC codes in <s>, bit c for code c; none outside 0..16 may be. */
static unsigned grpc_set(const struct adm_statuses *s)
{
    unsigned m = 0;
    for (unsigned c = 0; c < 640; c++)
        if (adm_statuses_has(s, c)) {
            ck_assert_uint_le(c, 16);
            m |= 1u << c;
        }
    return m;
}

static int has_range(const struct adm_statuses *s, unsigned lo, unsigned hi)
{
    for (unsigned c = 100; c < 600; c++)
        if (adm_statuses_has(s, c) != (c >= lo && c <= hi))
            return 0;
    return 1;
}

START_TEST(defaults)
{
    struct adm_config *c =
        expect_ok(doc("'upstreams': {'u': {'servers': [{'address': '127.0.0.1:9001'}]}},"
                      "'timeouts': {'upstream_connect_ms': 11, 'upstream_response_ms': 12,"
                      "             'upstream_idle_ms': 13},"
                      "'routes': [{'id': 'a', 'path': '/', 'upstream': 'u'}]"));
    const struct adm_upstream *u = adm_config_upstream(c, "u");
    ck_assert_int_eq(u->balance, ADM_BALANCE_ROUND_ROBIN);
    ck_assert_int_eq(u->hash_on, ADM_HASH_CLIENT_IP); /* hash_key: client_ip */
    ck_assert_int_eq(u->fallback, 0);
    ck_assert_ptr_null(u->hash_name);
    ck_assert_uint_eq(u->table_size, 0); /* 65537 */
    ck_assert_uint_eq(u->keepalive, 32);
    ck_assert_ptr_null(u->tls);
    ck_assert_ptr_null(u->health_check);
    ck_assert_int_eq(u->initially_unhealthy, 0);
    /* passive ejection on without the key: nginx's max_fails=1 fail_timeout=10s,
     * no status counted (a 500 is an answer) */
    ck_assert_int_eq(u->outlier.on, 1);
    ck_assert_uint_eq(u->outlier.consecutive_failures, 1);
    ck_assert_uint_eq(u->outlier.base_ejection_ms, 10000);
    ck_assert_uint_eq(u->outlier.max_ejection_ms, 300000);
    ck_assert_uint_eq(u->outlier.max_ejection_percent, 10);
    ck_assert(has_range(&u->outlier.statuses, 1, 0)); /* empty */
    ck_assert_int_eq(u->panic, 0);
    ck_assert_uint_eq(u->slow_start_ms, 0);
    ck_assert_uint_eq(u->retries, 2);                /* nginx's proxy_next_upstream error timeout */
    ck_assert(has_range(&u->retry_on_status, 1, 0)); /* empty */
    ck_assert_int_eq(u->protocol, ADM_UP_H1);
    ck_assert_uint_eq(grpc_set(&u->retry_on_grpc_status), 1u << 14); /* ["unavailable"] */
    ck_assert_uint_eq(u->retry_budget_percent, 20);
    ck_assert_int_eq(u->request_buffering, 0);
    ck_assert_uint_eq(u->max_buffered_body_bytes, 8u << 20);
    ck_assert_uint_eq(u->max_connections, 0);
    ck_assert_uint_eq(u->max_pending, 1024);
    ck_assert_uint_eq(u->queue_timeout_ms, 5000);
    ck_assert_uint_eq(u->resolve_interval_ms, 30000);
    ck_assert_uint_eq(u->connect_timeout_ms, 11);
    ck_assert_uint_eq(u->response_timeout_ms, 12);
    ck_assert_uint_eq(u->idle_timeout_ms, 13);
    ck_assert_uint_eq(c->routes[0].timeout_ms, 12);
    ck_assert_int_eq(c->routes[0].request_buffering, 0);
    ck_assert_uint_eq(c->routes[0].max_buffered_body_bytes, 8u << 20);
    adm_config_free(c);
}
END_TEST

START_TEST(every_key)
{
    struct adm_config *c = expect_ok(doc(
        "'upstreams': {'u': {'servers': [{'address': '127.0.0.1:9001'}],"
        " 'balance': 'hash', 'hash_key': 'header:X-User', 'fallback': true, 'table_size': 65521,"
        " 'health_check': {'path': '/healthz?full=1', 'host': 'svc.internal:8080',"
        "   'interval_ms': 1000, 'timeout_ms': 300, 'expect_status': [200, '204-206'],"
        "   'healthy_threshold': 1, 'unhealthy_threshold': 4},"
        " 'initially_unhealthy': true,"
        " 'outlier': {'consecutive_failures': 3, 'statuses': '502-504', 'base_ejection_ms': 100,"
        "   'max_ejection_ms': 1000, 'max_ejection_percent': 50},"
        " 'panic': true, 'slow_start_ms': 2000, 'retries': 3, 'retry_on_status': [502, 503],"
        " 'retry_budget_percent': 40, 'request_buffering': true,"
        " 'max_buffered_body_bytes': 4096, 'max_connections': 10, 'max_pending': 20,"
        " 'queue_timeout_ms': 30, 'connect_timeout_ms': 40, 'response_timeout_ms': 50,"
        " 'resolve_interval_ms': 60000},"
        " 'v': {'servers': [{'address': '127.0.0.1:9002'}], 'balance': 'hash',"
        "   'hash_key': 'cookie:sid'},"
        " 'w': {'servers': [{'address': '127.0.0.1:9003'}], 'balance': 'hash', 'hash_key': 'path'},"
        " 'x': {'servers': [{'address': '127.0.0.1:9004'}], 'balance': 'least_conn',"
        "   'protocol': 'h2c', 'retry_on_grpc_status': ['unavailable', 'internal'],"
        "   'health_check': {'type': 'grpc', 'service': 'pkg.Svc'}},"
        " 'y': {'servers': [{'address': '127.0.0.1:9005'}], 'balance': 'random_two'}},"
        "'routes': [{'id': 'a', 'path': '/a', 'upstream': 'u'},"
        "  {'id': 'b', 'path': '/b', 'upstream': 'u', 'request_buffering': false,"
        "   'max_buffered_body_bytes': 99, 'timeout_ms': 7}]"));
    const struct adm_upstream *u = adm_config_upstream(c, "u");
    ck_assert_int_eq(u->balance, ADM_BALANCE_HASH);
    ck_assert_int_eq(u->hash_on, ADM_HASH_HEADER);
    ck_assert_str_eq(u->hash_name, "X-User");
    ck_assert_int_eq(u->fallback, 1);
    ck_assert_uint_eq(u->table_size, 65521);
    ck_assert_ptr_nonnull(u->health_check);
    ck_assert_str_eq(u->health_check->path, "/healthz?full=1");
    ck_assert_str_eq(u->health_check->host, "svc.internal:8080");
    ck_assert_uint_eq(u->health_check->interval_ms, 1000);
    ck_assert_uint_eq(u->health_check->timeout_ms, 300);
    ck_assert(adm_statuses_has(&u->health_check->expect, 200));
    ck_assert(!adm_statuses_has(&u->health_check->expect, 201));
    ck_assert(adm_statuses_has(&u->health_check->expect, 205));
    ck_assert(!adm_statuses_has(&u->health_check->expect, 207));
    ck_assert_uint_eq(u->health_check->healthy_threshold, 1);
    ck_assert_uint_eq(u->health_check->unhealthy_threshold, 4);
    ck_assert_int_eq(u->initially_unhealthy, 1);
    ck_assert_int_eq(u->outlier.on, 1);
    ck_assert_uint_eq(u->outlier.consecutive_failures, 3);
    ck_assert(has_range(&u->outlier.statuses, 502, 504));
    ck_assert_uint_eq(u->outlier.base_ejection_ms, 100);
    ck_assert_uint_eq(u->outlier.max_ejection_ms, 1000);
    ck_assert_uint_eq(u->outlier.max_ejection_percent, 50);
    ck_assert_int_eq(u->panic, 1);
    ck_assert_uint_eq(u->slow_start_ms, 2000);
    ck_assert_uint_eq(u->retries, 3);
    ck_assert(has_range(&u->retry_on_status, 502, 503));
    ck_assert_uint_eq(u->retry_budget_percent, 40);
    ck_assert_int_eq(u->request_buffering, 1);
    ck_assert_uint_eq(u->max_buffered_body_bytes, 4096);
    ck_assert_uint_eq(u->max_connections, 10);
    ck_assert_uint_eq(u->max_pending, 20);
    ck_assert_uint_eq(u->queue_timeout_ms, 30);
    ck_assert_uint_eq(u->connect_timeout_ms, 40);
    ck_assert_uint_eq(u->response_timeout_ms, 50);
    ck_assert_uint_eq(u->resolve_interval_ms, 60000);
    ck_assert_int_eq(adm_config_upstream(c, "v")->hash_on, ADM_HASH_COOKIE);
    ck_assert_str_eq(adm_config_upstream(c, "v")->hash_name, "sid");
    ck_assert_int_eq(adm_config_upstream(c, "w")->hash_on, ADM_HASH_PATH);
    ck_assert_ptr_null(adm_config_upstream(c, "w")->hash_name);
    ck_assert_int_eq(adm_config_upstream(c, "x")->balance, ADM_BALANCE_LEAST_CONN);
    ck_assert_int_eq(adm_config_upstream(c, "x")->protocol, ADM_UP_H2C);
    ck_assert_uint_eq(grpc_set(&adm_config_upstream(c, "x")->retry_on_grpc_status),
                      1u << 13 | 1u << 14);
    ck_assert_int_eq(adm_config_upstream(c, "x")->health_check->type, ADM_HC_GRPC);
    ck_assert_str_eq(adm_config_upstream(c, "x")->health_check->service, "pkg.Svc");
    ck_assert_int_eq(adm_config_upstream(c, "y")->balance, ADM_BALANCE_RANDOM_TWO);
    /* a route takes what it does not say from its pool */
    ck_assert_uint_eq(c->routes[0].timeout_ms, 50);
    ck_assert_int_eq(c->routes[0].request_buffering, 1);
    ck_assert_uint_eq(c->routes[0].max_buffered_body_bytes, 4096);
    ck_assert_uint_eq(c->routes[1].timeout_ms, 7);
    ck_assert_int_eq(c->routes[1].request_buffering, 0);
    ck_assert_uint_eq(c->routes[1].max_buffered_body_bytes, 99);
    /* a health_check object without keys takes every default */
    adm_config_free(c);
    c = expect_ok(pool("'health_check': {}"));
    const struct adm_health_check *h = adm_config_upstream(c, "u")->health_check;
    ck_assert_str_eq(h->path, "/");
    ck_assert_ptr_null(h->host);
    ck_assert_uint_eq(h->interval_ms, 5000);
    ck_assert_uint_eq(h->timeout_ms, 2000);
    ck_assert(has_range(&h->expect, 200, 399));
    ck_assert_uint_eq(h->healthy_threshold, 2);
    ck_assert_uint_eq(h->unhealthy_threshold, 3);
    ck_assert_int_eq(h->type, ADM_HC_HTTP);
    ck_assert_ptr_null(h->service);
    adm_config_free(c);
    /* an empty list is the empty set; one code is a set of one */
    c = expect_ok(pool("'retry_on_status': [], 'outlier': {'statuses': []}"));
    ck_assert(has_range(&adm_config_upstream(c, "u")->retry_on_status, 1, 0));
    ck_assert(has_range(&adm_config_upstream(c, "u")->outlier.statuses, 1, 0));
    adm_config_free(c);
    /* an outlier object without keys is the default, on; 0 failures turn it off */
    c = expect_ok(pool("'outlier': {}"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->outlier.on, 1);
    ck_assert_uint_eq(adm_config_upstream(c, "u")->outlier.consecutive_failures, 1);
    adm_config_free(c);
    c = expect_ok(pool("'outlier': {'consecutive_failures': 0}, 'retries': 0"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->outlier.on, 0);
    ck_assert_uint_eq(adm_config_upstream(c, "u")->retries, 0);
    adm_config_free(c);
    c = expect_ok(pool("'outlier': {'statuses': 503}"));
    ck_assert(has_range(&adm_config_upstream(c, "u")->outlier.statuses, 503, 503));
    adm_config_free(c);
}
END_TEST

START_TEST(errors)
{
    expect_error(pool("'balance': 'least'"), "/upstreams/u/balance", "expected one of");
    expect_error(pool("'hash_key': 'path'"), "/upstreams/u/hash_key",
                 "only allowed with \"balance\": \"hash\"");
    expect_error(pool("'fallback': true"), "/upstreams/u/fallback", "only allowed with");
    expect_error(pool("'balance': 'hash', 'hash_key': 'ip'"), "/upstreams/u/hash_key",
                 "expected \"client_ip\", \"path\", \"header:NAME\" or \"cookie:NAME\"");
    expect_error(pool("'balance': 'hash', 'hash_key': 'header:'"), "/upstreams/u/hash_key",
                 "invalid header name \"\"");
    expect_error(pool("'balance': 'hash', 'hash_key': 'cookie:a b'"), "/upstreams/u/hash_key",
                 "invalid cookie name \"a b\"");
    expect_error(pool("'balance': 'hash', 'fallback': 1"), "/upstreams/u/fallback",
                 "expected a boolean");
    expect_error(pool("'table_size': 101"), "/upstreams/u/table_size", "only allowed with");
    expect_error(pool("'balance': 'hash', 'table_size': 100"), "/upstreams/u/table_size",
                 "100 is not a prime above the 1 servers");
    expect_error(pool("'balance': 'hash', 'table_size': 2"), "/upstreams/u/table_size",
                 "between 3 and");
    expect_error(pool("'health_check': []"), "/upstreams/u/health_check", "expected an object");
    expect_error(pool("'health_check': {'path': 'healthz'}"), "/upstreams/u/health_check/path",
                 "must start with '/'");
    expect_error(pool("'health_check': {'path': '/a b'}"), "/upstreams/u/health_check/path",
                 "invalid character at offset 2");
    expect_error(pool("'health_check': {'host': 'a/b'}"), "/upstreams/u/health_check/host",
                 "invalid host");
    expect_error(pool("'health_check': {'interval_ms': 0}"),
                 "/upstreams/u/health_check/interval_ms", "between 1 and");
    expect_error(pool("'health_check': {'interval_ms': 100, 'timeout_ms': 200}"),
                 "/upstreams/u/health_check/timeout_ms", "must not exceed interval_ms (100)");
    expect_error(pool("'health_check': {'interval_ms': 100}"),
                 "/upstreams/u/health_check/interval_ms", "timeout_ms (2000) must not exceed");
    expect_error(pool("'health_check': {'expect_status': 99}"),
                 "/upstreams/u/health_check/expect_status", "between 100 and 599");
    expect_error(pool("'health_check': {'expect_status': [200, '300-200']}"),
                 "/upstreams/u/health_check/expect_status/1", "100 <= LO <= HI <= 599");
    expect_error(pool("'health_check': {'expect_status': '2xx'}"),
                 "/upstreams/u/health_check/expect_status", "invalid status range \"2xx\"");
    expect_error(pool("'health_check': {'expect_status': '200-'}"),
                 "/upstreams/u/health_check/expect_status", "invalid status range");
    expect_error(pool("'health_check': {'expect_status': [true]}"),
                 "/upstreams/u/health_check/expect_status/0", "expected a status code");
    expect_error(pool("'health_check': {'healthy_threshold': 0}"),
                 "/upstreams/u/health_check/healthy_threshold", "between 1 and 1000");
    expect_error(pool("'health_check': {'unhealthy_threshold': 1001}"),
                 "/upstreams/u/health_check/unhealthy_threshold", "between 1 and 1000");
    expect_error(pool("'health_check': {'interval': 1}"), "/upstreams/u/health_check/interval",
                 "did you mean \"interval_ms\"");
    expect_error(pool("'initially_unhealthy': 'yes'"), "/upstreams/u/initially_unhealthy",
                 "expected a boolean");
    expect_error(pool("'outlier': {'consecutive_failures': -1}"),
                 "/upstreams/u/outlier/consecutive_failures", "between 0 and 1000");
    expect_error(pool("'outlier': {'statuses': ['5xx']}"), "/upstreams/u/outlier/statuses/0",
                 "invalid status range");
    expect_error(pool("'outlier': {'base_ejection_ms': 0}"),
                 "/upstreams/u/outlier/base_ejection_ms", "between 1 and");
    expect_error(pool("'outlier': {'max_ejection_ms': 1000}"),
                 "/upstreams/u/outlier/max_ejection_ms",
                 "must be at least base_ejection_ms (10000)");
    expect_error(pool("'outlier': {'base_ejection_ms': 400000}"),
                 "/upstreams/u/outlier/base_ejection_ms", "max_ejection_ms (300000) must be");
    expect_error(pool("'outlier': {'max_ejection_percent': 0}"),
                 "/upstreams/u/outlier/max_ejection_percent", "between 1 and 100");
    expect_error(pool("'outlier': {'ejection_ms': 1}"), "/upstreams/u/outlier/ejection_ms",
                 "unknown key");
    expect_error(pool("'panic': null"), "/upstreams/u/panic", "expected a boolean");
    expect_error(pool("'slow_start_ms': -1"), "/upstreams/u/slow_start_ms", "between 0 and");
    expect_error(pool("'retries': 11"), "/upstreams/u/retries", "between 0 and 10");
    expect_error(pool("'retry_on_status': [600]"), "/upstreams/u/retry_on_status/0",
                 "between 100 and 599");
    expect_error(pool("'retry_budget_percent': 101"), "/upstreams/u/retry_budget_percent",
                 "between 0 and 100");
    expect_error(pool("'request_buffering': 1"), "/upstreams/u/request_buffering",
                 "expected a boolean");
    expect_error(pool("'max_buffered_body_bytes': 0"), "/upstreams/u/max_buffered_body_bytes",
                 "between 1 and 1073741824");
    expect_error(pool("'max_connections': -1"), "/upstreams/u/max_connections", "between 0 and");
    expect_error(pool("'max_pending': 'x'"), "/upstreams/u/max_pending", "expected an integer");
    expect_error(pool("'queue_timeout_ms': 0"), "/upstreams/u/queue_timeout_ms", "between 1 and");
    expect_error(pool("'connect_timeout_ms': 0"), "/upstreams/u/connect_timeout_ms",
                 "between 1 and");
    expect_error(pool("'response_timeout_ms': 0"), "/upstreams/u/response_timeout_ms",
                 "between 1 and");
    expect_error(pool("'resolve_interval_ms': 999"), "/upstreams/u/resolve_interval_ms",
                 "between 1000 and");
    /* a route's buffering keys: typed, and only with an upstream */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {},"
                     " 'request_buffering': true}]"),
                 "/routes/0/request_buffering", "only allowed with \"upstream\"");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': '127.0.0.1:9001'}]}},"
                     "'routes': [{'id': 'a', 'path': '/', 'upstream': 'u',"
                     " 'max_buffered_body_bytes': 0}]"),
                 "/routes/0/max_buffered_body_bytes", "between 1 and");
}
END_TEST

START_TEST(every_key_served)
{
    /* every pool key is acted on since panic and slow_start_ms were the
     * last (upstream/balance.c, gateway/health.c): a config using all of
     * them is accepted whole, and has what it says */
    struct adm_config *c =
        expect_ok(doc("'upstreams': {'u': {'servers': [{'address': '127.0.0.1:9001'}],"
                      "  'balance': 'round_robin', 'keepalive': 4, 'idle_timeout_ms': 5,"
                      "  'response_timeout_ms': 6, 'connect_timeout_ms': 7, 'retries': 1,"
                      "  'retry_budget_percent': 30, 'request_buffering': true,"
                      "  'max_buffered_body_bytes': 9, 'max_connections': 2, 'max_pending': 3,"
                      "  'queue_timeout_ms': 4, 'resolve_interval_ms': 1000},"
                      " 'v': {'servers': [{'address': '127.0.0.1:9002'}], 'balance': 'least_conn',"
                      "  'slow_start_ms': 100, 'panic': true, 'retry_on_status': 503,"
                      "  'health_check': {}, 'initially_unhealthy': true, 'outlier': {}},"
                      " 'w': {'servers': [{'address': '127.0.0.1:9003'}], 'balance': 'hash',"
                      "  'hash_key': 'cookie:sid', 'fallback': true, 'table_size': 101}},"
                      "'routes': [{'id': 'a', 'path': '/', 'upstream': 'u'},"
                      " {'id': 'b', 'path': '/b', 'upstream': 'u', 'request_buffering': true}]"));
    const struct adm_upstream *v = adm_config_upstream(c, "v");

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->panic, 1);
    ck_assert_uint_eq(v->slow_start_ms, 100);
    ck_assert_ptr_nonnull(v->health_check);
    ck_assert_int_eq(v->initially_unhealthy, 1);
    ck_assert_int_eq(v->outlier.on, 1);
    adm_config_free(c);
}
END_TEST

START_TEST(mistakes_named)
{
    /* what a new operator writes first, each refused with what to write
     * instead (and nothing refused twice) */
    struct adm_errors e;
    struct adm_config *c;

    expect_error(pool("'timeout_ms': 100"), "/upstreams/u/timeout_ms",
                 "a pool has \"connect_timeout_ms\" and \"response_timeout_ms\"");
    expect_error(doc("'upstreams': {'u': {'servers': [{'address': 'http://127.0.0.1:9001'}]}}"),
                 "/upstreams/u/servers/0/address", "without a scheme");
    expect_error(pool("'health_check': {'expect_status': '200'}"),
                 "/upstreams/u/health_check/expect_status",
                 "a single code is a number: 200, without quotes");
    expect_error(pool("'outlier': {'statuses': '5xx'}"), "/upstreams/u/outlier/statuses",
                 "expected \"LO-HI\": \"500-599\"");
    expect_error(pool("'retries': 1, 'retry_on_status': [503, 200]"),
                 "/upstreams/u/retry_on_status/1", "200 is an answer, not a failure");
    expect_error(pool("'retries': 1, 'retry_on_status': '200-599'"), "/upstreams/u/retry_on_status",
                 "only 400-599 can be retried");
    c = expect_ok(pool("'retries': 1, 'retry_on_status': ['400-404', 599]"));
    ck_assert(adm_statuses_has(&adm_config_upstream(c, "u")->retry_on_status, 404));
    adm_config_free(c);
    expect_error(pool("'initially_unhealthy': true"), "/upstreams/u/initially_unhealthy",
                 "only allowed with \"health_check\"");
    c = expect_ok(pool("'initially_unhealthy': false"));
    adm_config_free(c);
    expect_error(pool("'health_check': {'initially_unhealthy': true}"),
                 "/upstreams/u/health_check/initially_unhealthy", "a key of the pool");
    /* another proxy's name for a balancer or a hash key: ours, named */
    expect_error(pool("'balance': 'leastconn'"), "/upstreams/u/balance",
                 "expected one of \"round_robin\", \"least_conn\", \"random_two\", \"hash\"): "
                 "write \"least_conn\"");
    expect_error(pool("'balance': 'ip_hash'"), "/upstreams/u/balance",
                 "write \"hash\" (its hash_key is client_ip by default)");
    expect_error(pool("'balance': 'hash', 'hash_key': 'uri'"), "/upstreams/u/hash_key",
                 "or \"cookie:NAME\"): write \"path\"");
    expect_error(pool("'balance': 'hash', 'hash_key': 'header'"), "/upstreams/u/hash_key",
                 "write \"header:NAME\", e.g. \"header:X-User\"");
    /* a table_size of the wrong type is one error, not two */
    ck_assert_ptr_null(parse(pool("'balance': 'hash', 'table_size': '65537'"), &e));
    ck_has_error(&e, "/upstreams/u/table_size", "expected an integer");
    ck_assert_uint_eq(e.n, 1);
    adm_errors_clear(&e);
    /* a health_check that is no object is its own error only */
    ck_assert_ptr_null(parse(pool("'health_check': [], 'initially_unhealthy': true"), &e));
    ck_assert_uint_eq(e.n, 1);
    adm_errors_clear(&e);
}
END_TEST

/* <json> is refused with the one error <msg>, whole, at <path>. */
static void expect_only(const char *json, const char *path, const char *msg)
{
    struct adm_errors e;
    ck_assert_ptr_null(parse(json, &e));
    ck_assert_uint_eq(e.n, 1);
    ck_assert_str_eq(e.v[0].path, path);
    ck_assert_str_eq(e.v[0].msg, msg);
    adm_errors_clear(&e);
}

START_TEST(misplaced_keys_not_offered)
{
    /* a row that exists only to say "wrong place" is no choice: a typo near
     * it is told where the key belongs, not to write what is then refused */
    expect_only(pool("'health_check': {'initialy_unhealthy': true}"),
                "/upstreams/u/health_check/initialy_unhealthy",
                "unknown key (\"initially_unhealthy\" is a key of the pool, not of its "
                "health_check: put it next to \"health_check\")");
    expect_only(pool("'health_check': {'initially': true}"), "/upstreams/u/health_check/initially",
                "unknown key (\"initially_unhealthy\" is a key of the pool, not of its "
                "health_check: put it next to \"health_check\")");
    expect_only(pool("'health_check': {'frobnicate': 1}"), "/upstreams/u/health_check/frobnicate",
                "unknown key (one of \"path\", \"host\", \"interval_ms\", \"timeout_ms\", "
                "\"expect_status\", \"healthy_threshold\", \"unhealthy_threshold\", \"type\", "
                "\"service\")");
    expect_only(pool("'timeout_m': 100"), "/upstreams/u/timeout_m",
                "unknown key (\"timeout_ms\" is a route key; a pool has \"connect_timeout_ms\" "
                "and \"response_timeout_ms\" (its routes' default timeout_ms))");
    /* written where it belongs elsewhere, the key itself says so */
    expect_only(pool("'health_check': {'initially_unhealthy': true}"),
                "/upstreams/u/health_check/initially_unhealthy",
                "a key of the pool, not of its health_check: put it next to \"health_check\"");
    expect_only(pool("'timeout_ms': 100"), "/upstreams/u/timeout_ms",
                "a route key; a pool has \"connect_timeout_ms\" and \"response_timeout_ms\" "
                "(its routes' default timeout_ms)");
    /* misplaced is per object: the typo told above that timeout_ms is a
     * route key is offered timeout_ms in health_check, where it is a key
     * (a real key winning a tie with a misplaced row is test_config.c's
     * unknown_key_tie_goes_to_a_real_key: no table here has such a tie) */
    expect_only(pool("'health_check': {'timeout_m': 1}"), "/upstreams/u/health_check/timeout_m",
                "unknown key (did you mean \"timeout_ms\"?)");
}
END_TEST

START_TEST(retry_on_interim)
{
    /* a 1xx is interim, the answer still to come: not "an answer" */
    expect_only(pool("'retries': 1, 'retry_on_status': [101]"), "/upstreams/u/retry_on_status/0",
                "101 is interim (the answer follows it), not a failure: only 400-599 can be "
                "retried");
    expect_only(pool("'retries': 1, 'retry_on_status': '100-599'"), "/upstreams/u/retry_on_status",
                "100 is interim (the answer follows it), not a failure: only 400-599 can be "
                "retried");
    expect_only(pool("'retries': 1, 'retry_on_status': [302]"), "/upstreams/u/retry_on_status/0",
                "302 is an answer, not a failure: only 400-599 can be retried");
}
END_TEST

/* A pool "u" with TLS (the system's store: nothing to read) and the extra
 * pool keys <extra>. */
static const char *tls_pool(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), "'tls': {}, %s", extra);
    return pool(buf);
}

START_TEST(protocol)
{
    struct adm_config *c = expect_ok(pool("'protocol': 'h1'"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->protocol, ADM_UP_H1);
    adm_config_free(c);
    c = expect_ok(pool("'protocol': 'h2c'"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->protocol, ADM_UP_H2C);
    adm_config_free(c);
    c = expect_ok(tls_pool("'protocol': 'h2'"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->protocol, ADM_UP_H2);
    adm_config_free(c);
    c = expect_ok(tls_pool("'protocol': 'h1'"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->protocol, ADM_UP_H1);
    adm_config_free(c);
    /* which HTTP/2 goes with the pool's tls, whatever the keys' order */
    expect_only(pool("'protocol': 'h2'"), "/upstreams/u/protocol",
                "\"h2\" is HTTP/2 over TLS (chosen by ALPN): it needs \"tls\", or use \"h2c\" "
                "for HTTP/2 without TLS");
    expect_only(doc("'upstreams': {'u': {'protocol': 'h2c', 'tls': {},"
                    " 'servers': [{'address': '127.0.0.1:9001'}]}}"),
                "/upstreams/u/protocol",
                "\"h2c\" is HTTP/2 without TLS: with \"tls\" write \"h2\" (HTTP/2 over TLS, "
                "chosen by ALPN)");
    /* another name for a protocol: ours, and for HTTP/2 the one the pool's
     * tls calls for */
    expect_only(pool("'protocol': 'http2'"), "/upstreams/u/protocol",
                "invalid value \"http2\" (expected one of \"h1\", \"h2c\", \"h2\"): write "
                "\"h2c\" (HTTP/2 without TLS; \"h2\" is over TLS and needs \"tls\")");
    expect_only(tls_pool("'protocol': 'HTTP/2'"), "/upstreams/u/protocol",
                "invalid value \"HTTP/2\" (expected one of \"h1\", \"h2c\", \"h2\"): write "
                "\"h2\" (HTTP/2 over the pool's \"tls\", chosen by ALPN)");
    expect_error(pool("'protocol': 'grpc'"), "/upstreams/u/protocol",
                 "gRPC runs over HTTP/2: write \"h2c\"");
    expect_error(tls_pool("'protocol': 'grpc'"), "/upstreams/u/protocol",
                 "gRPC runs over HTTP/2: write \"h2\"");
    expect_error(pool("'protocol': 'http/1.1'"), "/upstreams/u/protocol", "write \"h1\"");
    expect_error(pool("'protocol': 'H2C'"), "/upstreams/u/protocol", "write \"h2c\" (lower case)");
    expect_error(pool("'protocol': 'h3'"), "/upstreams/u/protocol", "HTTP/3");
    expect_only(pool("'protocol': 'spdy'"), "/upstreams/u/protocol",
                "invalid value \"spdy\" (expected one of \"h1\", \"h2c\", \"h2\")");
    expect_error(pool("'protocol': 2"), "/upstreams/u/protocol", "expected a string");
    expect_error(pool("'protocl': 'h2c'"), "/upstreams/u/protocl", "did you mean \"protocol\"");
}
END_TEST

START_TEST(retry_on_grpc_status)
{
    struct adm_config *c = expect_ok(pool("'retry_on_grpc_status': []"));
    ck_assert_uint_eq(grpc_set(&adm_config_upstream(c, "u")->retry_on_grpc_status), 0);
    adm_config_free(c);
    /* a code, or a name in any case with '-' or '_' */
    c = expect_ok(pool("'retry_on_grpc_status': [14, 'deadline_exceeded', 'RESOURCE-EXHAUSTED',"
                       " 'Cancelled', 16]"));
    ck_assert_uint_eq(grpc_set(&adm_config_upstream(c, "u")->retry_on_grpc_status),
                      1u << 1 | 1u << 4 | 1u << 8 | 1u << 14 | 1u << 16);
    adm_config_free(c);
    /* every name of 1..16, by the table GET-side code names them with */
    char list[1024] = "'retry_on_grpc_status': [";
    for (unsigned k = 1; k <= 16; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s'%s'", k > 1 ? ", " : "",
                 adm_grpc_code_name(k));
    strcat(list, "]");
    c = expect_ok(pool(list));
    ck_assert_uint_eq(grpc_set(&adm_config_upstream(c, "u")->retry_on_grpc_status), 0x1fffe);
    adm_config_free(c);
    ck_assert_str_eq(adm_grpc_code_name(0), "ok");
    ck_assert_str_eq(adm_grpc_code_name(14), "unavailable");
    ck_assert_str_eq(adm_grpc_code_name(16), "unauthenticated");
    ck_assert_ptr_null(adm_grpc_code_name(17));

    const char *at0 = "/upstreams/u/retry_on_grpc_status/0";
    expect_only(pool("'retry_on_grpc_status': [0]"), at0,
                "0 (ok) is a success, not a failure: only 1..16 can be retried");
    expect_only(pool("'retry_on_grpc_status': ['OK']"), at0,
                "0 (ok) is a success, not a failure: only 1..16 can be retried");
    expect_error(pool("'retry_on_grpc_status': [17]"), at0, "between 1 and 16");
    expect_error(pool("'retry_on_grpc_status': [-1]"), at0, "between 1 and 16");
    expect_only(pool("'retry_on_grpc_status': [503]"), at0,
                "503 is an HTTP status (retry_on_status takes those): a gRPC status is 1..16, "
                "e.g. 14 (unavailable)");
    expect_only(pool("'retry_on_grpc_status': ['14']"), at0,
                "invalid gRPC status \"14\" (a code is a number: 14, without quotes, or its "
                "name \"unavailable\")");
    expect_only(pool("'retry_on_grpc_status': ['canceled']"), at0,
                "invalid gRPC status \"canceled\" (did you mean \"cancelled\"?)");
    expect_only(pool("'retry_on_grpc_status': ['StatusCode.UNAVAILABLE']"), at0,
                "invalid gRPC status \"StatusCode.UNAVAILABLE\": write \"unavailable\"");
    expect_error(pool("'retry_on_grpc_status': ['frobnicate']"), at0,
                 "expected a code 1..16 or its name");
    expect_error(pool("'retry_on_grpc_status': [true]"), at0,
                 "expected a gRPC status code (1..16) or its name, got a boolean");
    expect_error(pool("'retry_on_grpc_status': [14, 'nope']"),
                 "/upstreams/u/retry_on_grpc_status/1", "invalid gRPC status \"nope\"");
    /* one status alone: the list to write */
    expect_only(pool("'retry_on_grpc_status': 'unavailable'"), "/upstreams/u/retry_on_grpc_status",
                "expected a list: [\"unavailable\"]");
    expect_only(pool("'retry_on_grpc_status': 14"), "/upstreams/u/retry_on_grpc_status",
                "expected a list: [14]");
    expect_error(pool("'retry_on_grpc_status': {}"), "/upstreams/u/retry_on_grpc_status",
                 "expected an array");
}
END_TEST

START_TEST(grpc_health_check)
{
    struct adm_config *c =
        expect_ok(pool("'protocol': 'h2c', 'health_check': {'type': 'grpc', 'service': 'pkg.Users',"
                       " 'host': 'users.internal', 'interval_ms': 1000, 'timeout_ms': 500}"));
    const struct adm_health_check *h = adm_config_upstream(c, "u")->health_check;
    ck_assert_int_eq(h->type, ADM_HC_GRPC);
    ck_assert_str_eq(h->service, "pkg.Users");
    ck_assert_str_eq(h->host, "users.internal");
    ck_assert_uint_eq(h->interval_ms, 1000);
    adm_config_free(c);
    /* "" is the server as a whole, as no service */
    c = expect_ok(tls_pool("'protocol': 'h2', 'health_check': {'type': 'grpc', 'service': ''}"));
    h = adm_config_upstream(c, "u")->health_check;
    ck_assert_int_eq(h->type, ADM_HC_GRPC);
    ck_assert_ptr_null(h->service);
    adm_config_free(c);
    c = expect_ok(pool("'health_check': {'type': 'http', 'path': '/healthz'}"));
    ck_assert_int_eq(adm_config_upstream(c, "u")->health_check->type, ADM_HC_HTTP);
    adm_config_free(c);

    expect_only(pool("'health_check': {'type': 'grpc'}"), "/upstreams/u/health_check/type",
                "a gRPC check needs the pool's \"protocol\": \"h2c\" or \"h2\" (gRPC runs over "
                "HTTP/2; the pool speaks \"h1\")");
    expect_error(pool("'protocol': 'h1', 'health_check': {'type': 'grpc'}"),
                 "/upstreams/u/health_check/type", "needs the pool's \"protocol\"");
    expect_only(pool("'protocol': 'h2c', 'health_check': {'type': 'grpc', 'path': '/healthz'}"),
                "/upstreams/u/health_check/path",
                "not used by a gRPC check, which calls /grpc.health.v1.Health/Check: name what it "
                "asks about in \"service\"");
    expect_only(pool("'protocol': 'h2c', 'health_check': {'type': 'grpc', 'expect_status': 200}"),
                "/upstreams/u/health_check/expect_status",
                "not used by a gRPC check: SERVING passes, any other answer fails");
    expect_only(pool("'health_check': {'service': 'pkg.Users'}"),
                "/upstreams/u/health_check/service",
                "only allowed with \"type\": \"grpc\" (an HTTP check asks for \"path\")");
    expect_error(pool("'health_check': {'type': 'http', 'service': 'x'}"),
                 "/upstreams/u/health_check/service", "only allowed with \"type\": \"grpc\"");
    /* a key in error is its own error alone */
    expect_only(pool("'health_check': {'type': 'tcp', 'service': 'x'}"),
                "/upstreams/u/health_check/type",
                "invalid value \"tcp\" (expected one of \"http\", \"grpc\")");
    expect_only(pool("'protocol': 'grpc', 'health_check': {'type': 'grpc'}"),
                "/upstreams/u/protocol",
                "invalid value \"grpc\" (expected one of \"h1\", \"h2c\", \"h2\"): gRPC runs "
                "over HTTP/2: write \"h2c\" (HTTP/2 without TLS; \"h2\" is over TLS and needs "
                "\"tls\")");
    expect_error(pool("'protocol': 'h2c', 'health_check': {'type': 'grpc', 'service': 5}"),
                 "/upstreams/u/health_check/service", "expected a string");
    expect_error(pool("'protocol': 'h2c', 'health_check': {'type': 'grpc', 'service': 'a\\nb'}"),
                 "/upstreams/u/health_check/service", "invalid character at offset 1");
    char big[600];
    snprintf(big, sizeof(big),
             "'protocol': 'h2c', 'health_check': {'type': 'grpc', 'service': '%0257d'}", 0);
    expect_error(pool(big), "/upstreams/u/health_check/service", "at most 256 bytes");
}
END_TEST

static Suite *config_upstreams_suite(void)
{
    Suite *s = suite_create("admin_config_upstreams");
    TCase *tc = tcase_create("upstreams");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, every_key);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, every_key_served);
    tcase_add_test(tc, mistakes_named);
    tcase_add_test(tc, misplaced_keys_not_offered);
    tcase_add_test(tc, retry_on_interim);
    tcase_add_test(tc, protocol);
    tcase_add_test(tc, retry_on_grpc_status);
    tcase_add_test(tc, grpc_health_check);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_upstreams_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
