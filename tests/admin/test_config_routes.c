/*
 * test_config_routes.c - the "routes" section (admin/config_routes.c): the
 * errors of ids, hosts, methods, paths, actions, rewrites and headers at
 * their JSON pointers, invalid patterns, conflicts naming the other route,
 * and the router table built from a config.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "admin/config.h"
#include "router/router.h"
#include "tests/admin/config_test.h"

#define UPS "'upstreams': {'users': {'servers': [{'address': '127.0.0.1:9001'}]}}, "

START_TEST(route_errors)
{
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/', 'upstream': 'user'}]"),
                 "/routes/0/upstream", "unknown upstream \"user\" (did you mean \"users\"?)");
    {
        /* nothing near: no guess */
        struct adm_errors e;
        long i;
        ck_assert_ptr_null(
            parse(doc(UPS "'routes': [{'id': 'a', 'path': '/', 'upstream': 'billing'}]"), &e));
        i = find_error(&e, "/routes/0/upstream", "unknown upstream");
        ck_assert_int_ge(i, 0);
        ck_assert_str_eq(e.v[i].msg, "unknown upstream \"billing\"");
        adm_errors_clear(&e);
    }
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {}}, "
                     "{'id': 'b', 'path': '/b', 'response': {}}, "
                     "{'id': 'a', 'path': '/c', 'response': {}}]"),
                 "/routes/2/id", "duplicate route id \"a\" (also /routes/0)");
    expect_error(doc("'routes': [{'id': 'a b', 'path': '/', 'response': {}}]"), "/routes/0/id",
                 "invalid route id \"a b\"");
    expect_error(doc("'routes': [{'id': '', 'path': '/', 'response': {}}]"), "/routes/0/id",
                 "must not be empty");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/', 'upstream': 'users', "
                         "'response': {}, 'redirect': {'location': '/'}}]"),
                 "/routes/0/response", "exactly one action, and this one already has \"upstream\"");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/', 'upstream': 'users', "
                         "'response': {}, 'redirect': {'location': '/'}}]"),
                 "/routes/0/redirect", "already has \"upstream\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/'}]"), "/routes/0",
                 "needs an action: one of \"upstream\", \"response\", \"redirect\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': 'users'}]"), "/routes/0/path",
                 "must start with '/'");
    expect_error(doc("'routes': [{'id': 'a', 'host': 'a.com/x', 'path': '/', 'response': {}}]"),
                 "/routes/0/host", "must not contain '/'");

    /* methods */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': [], 'response': {}}]"),
                 "/routes/0/methods", "must not be empty");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': ['GET', 'PUT', 'GET'], "
                     "'response': {}}]"),
                 "/routes/0/methods/2", "duplicate method \"GET\" (also /routes/0/methods/0)");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': ['get'], 'response': {}}]"),
                 "/routes/0/methods/0", "did you mean \"GET\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': ['GE T'], 'response': {}}]"),
                 "/routes/0/methods/0", "invalid method \"GE T\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': ['*'], 'response': {}}]"),
                 "/routes/0/methods/0", "leave \"methods\" out for every method");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'methods': [''], 'response': {}}]"),
                 "/routes/0/methods/0", "must not be empty");

    /* upstream-only keys */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/x', 'strip_prefix': '/x', "
                     "'response': {}}]"),
                 "/routes/0/strip_prefix",
                 "only allowed with \"upstream\" (this route has "
                 "\"response\")");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/x', 'timeout_ms': 5, "
                     "'redirect': {'location': '/'}}]"),
                 "/routes/0/timeout_ms", "only allowed with \"upstream\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/x', 'rewrite': '/y', "
                     "'redirect': {'location': '/'}}]"),
                 "/routes/0/rewrite", "only allowed with \"upstream\"");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/x', 'upgrades': ['websocket'], "
                     "'response': {}}]"),
                 "/routes/0/upgrades", "only allowed with \"upstream\"");
    /* upgrades: tokens, and never h2c (the smuggling vector) */
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x', 'upstream': 'users', "
                         "'upgrades': ['websocket', 'H2C']}]"),
                 "/routes/0/upgrades/1", "\"h2c\" is never tunnelled");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x', 'upstream': 'users', "
                         "'upgrades': ['foo/1']}]"),
                 "/routes/0/upgrades/0", "invalid protocol \"foo/1\"");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x', 'upstream': 'users', "
                         "'upgrades': 'websocket'}]"),
                 "/routes/0/upgrades", "");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x/*{r}', 'upstream': 'users', "
                         "'strip_prefix': '/x', 'rewrite': '/{r}'}]"),
                 "/routes/0/rewrite", "not allowed together with \"strip_prefix\"");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x', 'upstream': 'users', "
                         "'strip_prefix': 'x'}]"),
                 "/routes/0/strip_prefix", "must start with '/'");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/api/{v}/x', 'upstream': 'users', "
                         "'strip_prefix': '/api/v1'}]"),
                 "/routes/0/strip_prefix",
                 "is not a prefix of every path the route matches "
                 "(the path pattern starts with \"/api/\")");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/a/*{r}', 'upstream': 'users', "
                         "'strip_prefix': '/b'}]"),
                 "/routes/0/strip_prefix", "is not a prefix");

    /* rewrite */
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/users/{id}', 'upstream': 'users', "
                         "'rewrite': '/v2/{user}/x'}]"),
                 "/routes/0/rewrite",
                 "unknown parameter \"user\" at offset 4 (the pattern has: id)");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'host': '{t}.example.com', 'path': '/f/*{rest}', "
                         "'upstream': 'users', 'rewrite': '/{t}/{rest}/{x}'}]"),
                 "/routes/0/rewrite",
                 "unknown parameter \"x\" at offset 12 (the pattern has: t, rest)");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/x', 'upstream': 'users', "
                         "'rewrite': '/{id}'}]"),
                 "/routes/0/rewrite", "the pattern has no parameters");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/{id}', 'upstream': 'users', "
                         "'rewrite': '/{id'}]"),
                 "/routes/0/rewrite", "unterminated '{' at offset 1");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/{id}', 'upstream': 'users', "
                         "'rewrite': '/{}'}]"),
                 "/routes/0/rewrite", "empty parameter name at offset 1");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/{id}', 'upstream': 'users', "
                         "'rewrite': '/x}'}]"),
                 "/routes/0/rewrite", "stray '}' at offset 2");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/{id}', 'upstream': 'users', "
                         "'rewrite': '/a b'}]"),
                 "/routes/0/rewrite", "invalid character at offset 2");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/{id}', 'upstream': 'users', "
                         "'rewrite': 'v2/{id}'}]"),
                 "/routes/0/rewrite", "must start with '/'");
    /* the names are the router's: a regexp's text is not part of its name */
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/u/{id:[0-9]{2}}/*{r}', "
                         "'upstream': 'users', 'rewrite': '/{id:[0-9]{2}}'}]"),
                 "/routes/0/rewrite", "invalid parameter name at offset 4");
    expect_error(doc(UPS "'routes': [{'id': 'a', 'path': '/u/{id:[0-9]{2}}/*{r}', "
                         "'upstream': 'users', 'rewrite': '/{x}'}]"),
                 "/routes/0/rewrite",
                 "unknown parameter \"x\" at offset 1 (the pattern has: id, r)");

    /* direct responses and redirects */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'Content-Length': '5'}}}]"),
                 "/routes/0/response/headers/Content-Length", "set by the gateway");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'transfer-encoding': 'chunked'}}}]"),
                 "/routes/0/response/headers/transfer-encoding", "set by the gateway");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'X Y': 'v'}}}]"),
                 "/routes/0/response/headers/X Y", "invalid header name");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'X-A': 'a\\r\\nSet-Cookie: x=1'}}}]"),
                 "/routes/0/response/headers/X-A", "control character 0x0d at offset 1");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'headers': "
                     "{'X-A': ' a'}}}]"),
                 "/routes/0/response/headers/X-A", "whitespace");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'response': {'status': 204, "
                     "'body': 'x'}}]"),
                 "/routes/0/response/body", "a 204 response has no body");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'redirect': {'location': "
                     "'/x\\r\\nX: y'}}]"),
                 "/routes/0/redirect/location", "control character at offset 2");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/', 'redirect': {'location': ''}}]"),
                 "/routes/0/redirect/location", "must not be empty");

    /* names */
    expect_error(doc("'upstreams': {'a b': {'servers': [{'address': '1.2.3.4:80'}]}}"),
                 "/upstreams/a b", "invalid upstream name \"a b\"");
    expect_error(doc("'upstreams': {'a/b': {'servers': [{'address': '1.2.3.4:80'}]}}"),
                 "/upstreams/a~1b", "invalid upstream name \"a/b\"");
}
END_TEST

START_TEST(pattern_errors)
{
    /* the router's offset, relative to "path" or "host" */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/users/a b', 'response': {}}]"),
                 "/routes/0/path", "invalid pattern at offset 8: ");
    expect_error(doc("'routes': [{'id': 'a', 'host': 'api.example.com', 'path': '/a b', "
                     "'response': {}}]"),
                 "/routes/0/path", "invalid pattern at offset 2: ");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/users/{id', 'response': {}}]"),
                 "/routes/0/path", "invalid pattern at offset 7: ");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/a//b', 'response': {}}]"), "/routes/0/path",
                 "invalid pattern at offset ");
    expect_error(doc("'routes': [{'id': 'a', 'host': 'api..example.com', 'path': '/', "
                     "'response': {}}]"),
                 "/routes/0/host", "invalid host pattern at offset ");
    expect_error(doc("'routes': [{'id': 'a', 'host': 'api.example.com:8080', 'path': '/', "
                     "'response': {}}]"),
                 "/routes/0/host", "invalid host pattern at offset ");
    /* issue 14: an invalid regexp names its offset; fox's host rules */
    expect_error(doc("'routes': [{'id': 'a', 'path': '/a/{x:[0-9}', 'response': {}}]"),
                 "/routes/0/path", "invalid pattern at offset 10: invalid regexp: missing");
    /* the offset is the field's, said once (the router's counts the host too) */
    expect_error(doc("'routes': [{'id': 'a', 'host': 'api.example.com', 'path': '/{x:(}', "
                     "'response': {}}]"),
                 "/routes/0/path", "invalid pattern at offset 5: invalid regexp: missing closing");
    expect_error(doc("'routes': [{'id': 'a', 'host': 'API.example.com', 'path': '/', "
                     "'response': {}}]"),
                 "/routes/0/host", "upper case");
    expect_error(doc("'routes': [{'id': 'a', 'host': '10.0.0.1', 'path': '/', "
                     "'response': {}}]"),
                 "/routes/0/host", "all digits");
}
END_TEST

START_TEST(conflicts)
{
    expect_error(doc(UPS "'routes': ["
                         "{'id': 'get-user', 'methods': ['GET'], 'path': '/users/{id}', "
                         "'upstream': 'users'},"
                         "{'id': 'x', 'path': '/x', 'response': {}},"
                         "{'id': 'get-user2', 'methods': ['POST', 'GET'], 'path': '/users/{name}', "
                         "'upstream': 'users'}]"),
                 "/routes/2/path", "conflicts with route \"get-user\" (GET /users/{id})");
    expect_error(doc("'routes': ["
                     "{'id': 'all', 'path': '/a/*{rest}', 'response': {}},"
                     "{'id': 'all2', 'path': '/a/*{x}', 'response': {}}]"),
                 "/routes/1/path", "conflicts with route \"all\" (any method /a/*{rest})");
    expect_error(doc("'routes': ["
                     "{'id': 'h1', 'host': 'api.example.com', 'methods': ['GET', 'PUT'], "
                     "'path': '/', 'response': {}},"
                     "{'id': 'h2', 'host': 'api.example.com', 'methods': ['PUT'], "
                     "'path': '/', 'response': {}}]"),
                 "/routes/1/path", "conflicts with route \"h1\" (GET,PUT ");

    /* a route without a valid id still takes part, and is named by its path */
    expect_error(doc("'routes': ["
                     "{'id': 'bad id', 'methods': ['GET'], 'path': '/a', 'response': {}},"
                     "{'id': 'b', 'methods': ['GET'], 'path': '/a', 'response': {}}]"),
                 "/routes/1/path", "conflicts with /routes/0 (GET /a)");

    /* not conflicts: other methods, other hosts, any-method beside explicit */
    struct adm_config *c = expect_ok(
        doc("'routes': ["
            "{'id': 'a', 'methods': ['GET'], 'path': '/users/{id}', 'response': {}},"
            "{'id': 'b', 'methods': ['PUT'], 'path': '/users/{name}', 'response': {}},"
            "{'id': 'c', 'path': '/users/{id}', 'response': {}},"
            "{'id': 'd', 'host': 'a.example.com', 'methods': ['GET'], 'path': '/users/{id}', "
            "'response': {}},"
            "{'id': 'e', 'path': '/users/{id}/profile', 'response': {}},"
            "{'id': 'f', 'path': '/users/me', 'response': {}}]"));
    adm_config_free(c);
    /* rewrite templates name the parameters of regexp, infix and fox-style names */
    c = expect_ok(doc(UPS "'routes': ["
                          "{'id': 'a', 'path': '/u/{id:[0-9]{2}}/*{r}', 'upstream': 'users', "
                          "'rewrite': '/v/{r}/{id}'},"
                          "{'id': 'b', 'path': '/a/*{p}/t/{$1}', 'upstream': 'users', "
                          "'rewrite': '/{$1}/{p}'},"
                          "{'id': 'c', 'host': '*{any}.example.com', 'path': '/w', "
                          "'upstream': 'users', 'rewrite': '/w/{any}'}]"));
    adm_config_free(c);
}
END_TEST

START_TEST(build_routes)
{
    struct adm_config *c = expect_ok(J(full_config));
    struct adm_errors e;
    adm_errors_init(&e);
    rt_table *t = adm_config_build_routes(c, NULL, NULL, NULL, &e);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(rt_table_count(t), c->nroutes);
    ck_assert_int_eq(rt_table_options(t)->trailing_slash, RT_TS_REDIRECT);
    ck_assert_int_eq(rt_table_options(t)->auto_options, 1);

    struct rt_param params[8];
    struct rt_match m;
    const char *path = "/users/42";
    ck_assert_int_eq(
        rt_lookup(t, "GET", 3, "api.example.com", 15, path, strlen(path), params, 8, &m), RT_HIT);
    ck_assert_ptr_eq(rt_route_udata(m.route), &c->routes[0]);
    ck_assert_str_eq(rt_route_name(m.route), "get-user");
    rt_table_free(t);

    freed = 0;
    t = adm_config_build_routes(c, make_udata, count_free, NULL, &e);
    ck_assert_ptr_nonnull(t);
    path = "/ping";
    ck_assert_int_eq(rt_lookup(t, "GET", 3, NULL, 0, path, strlen(path), params, 8, &m), RT_HIT);
    ck_assert_str_eq(rt_route_udata(m.route), "ping");
    rt_table_free(t);
    ck_assert_uint_eq(freed, c->nroutes);
    ck_assert_uint_eq(e.n, 0);
    adm_errors_clear(&e);
    adm_config_free(c);

    /* a conflict (made by editing a valid config) fails the build and
     * releases every udata already made */
    c = expect_ok(doc("'routes': [{'id': 'a', 'path': '/a', 'response': {}}, "
                      "{'id': 'b', 'path': '/b', 'response': {}}, "
                      "{'id': 'c', 'path': '/c', 'response': {}}]"));
    free(c->routes[2].pattern);
    c->routes[2].pattern = strdup("/a");
    freed = 0;
    ck_assert_ptr_null(adm_config_build_routes(c, make_udata, count_free, NULL, &e));
    ck_assert_uint_eq(freed, 3);
    ck_has_error(&e, "/routes/2/path", "conflicts with route \"a\" (any method /a)");
    adm_errors_clear(&e);
    adm_config_free(c);
}
END_TEST

/* request_headers and response_headers: each refusal at its JSON path. */
/* HR() with a run-time <extra> */
static const char *HR_DYN(const char *extra)
{
    static char buf[20480];
    snprintf(buf, sizeof(buf),
             UPS "'routes': [{'id': 'a', 'path': '/u/{id}', 'upstream': 'users', %s}]", extra);
    return doc(buf);
}
#define HR(extra)                                                                                  \
    doc(UPS "'routes': [{'id': 'a', 'path': '/u/{id}', 'upstream': 'users', " extra "}]")
START_TEST(header_actions)
{
    struct adm_config *c =
        expect_ok(HR("'request_headers': {'set': {'X-Id': '{id}', 'Host': 'b'}, "
                     "'add': {'X-A': '{client_ip} {request_id} {host} {{'}, 'remove': ['Cookie']},"
                     " 'response_headers': {'set': {'Cache-Control': 'no-store'},"
                     " 'remove': ['Server']}"));
    const struct adm_hdr_actions *a = c->routes[0].request_headers;
    ck_assert_uint_eq(a->nset, 2);
    ck_assert_str_eq(a->set[0].name, "X-Id");
    ck_assert_str_eq(a->set[0].value, "{id}");
    ck_assert_uint_eq(a->nadd, 1);
    ck_assert_uint_eq(a->nremove, 1);
    ck_assert_uint_eq(c->routes[0].response_headers->nremove, 1);
    adm_config_free(c);

    expect_error(HR("'request_headers': {'set': {'X-A': 'a\\r\\nX-B: b'}}"),
                 "/routes/0/request_headers/set/X-A", "control character 0x0d at offset 1");
    expect_error(HR("'request_headers': {'add': {'X-A': 'a\\nb'}}"),
                 "/routes/0/request_headers/add/X-A", "control character 0x0a");
    expect_error(HR("'response_headers': {'set': {'X A': 'b'}}"),
                 "/routes/0/response_headers/set/X A", "invalid header name");
    expect_error(HR("'request_headers': {'remove': ['X:A']}"), "/routes/0/request_headers/remove/0",
                 "invalid header name");
    expect_error(HR("'request_headers': {'set': {'X-A': '{nope}'}}"),
                 "/routes/0/request_headers/set/X-A", "unknown placeholder {nope} at offset 0");
    expect_error(HR("'response_headers': {'add': {'X-A': 'x{id'}}"),
                 "/routes/0/response_headers/add/X-A", "unterminated or empty placeholder");
    expect_error(HR("'response_headers': {'add': {'X-A': '{}'}}"),
                 "/routes/0/response_headers/add/X-A", "unterminated or empty placeholder");
    static const char *const framing[] = {
        "Connection",     "keep-alive",          "TE",
        "Trailer",        "Transfer-Encoding",   "Upgrade",
        "Content-Length", "Proxy-Authorization", "proxy-connection"};
    char extra[256], path[128];
    for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++) {
        snprintf(extra, sizeof(extra), "'response_headers': {'remove': ['%s']}", framing[i]);
        expect_error(HR_DYN(extra), "/routes/0/response_headers/remove/0", "hop-by-hop or framing");
        snprintf(extra, sizeof(extra), "'request_headers': {'set': {'%s': 'x'}}", framing[i]);
        snprintf(path, sizeof(path), "/routes/0/request_headers/set/%s", framing[i]);
        expect_error(HR_DYN(extra), path, "hop-by-hop or framing");
    }
    /* a field's name and value are both checked, as a direct response's
     * headers are (one reader for both) */
    expect_error(HR("'request_headers': {'set': {'Connection': 'a\\nb'}}"),
                 "/routes/0/request_headers/set/Connection", "hop-by-hop or framing");
    expect_error(HR("'request_headers': {'set': {'Connection': 'a\\nb'}}"),
                 "/routes/0/request_headers/set/Connection", "control character 0x0a");
    expect_error(HR("'request_headers': {'add': {'Host': 'b'}}"),
                 "/routes/0/request_headers/add/Host", "Host can only be set");
    expect_error(HR("'request_headers': {'remove': ['host']}"),
                 "/routes/0/request_headers/remove/0", "Host can only be set");
    expect_error(HR("'response_headers': {'set': {'Host': 'b'}}"),
                 "/routes/0/response_headers/set/Host", "written by the gateway");
    expect_error(HR("'request_headers': {'set': {'X-Forwarded-For': '1.2.3.4'}}"),
                 "/routes/0/request_headers/set/X-Forwarded-For", "see client_ip");
    expect_error(HR("'request_headers': {'set': {'X-A': '1'}, 'remove': ['x-a']}"),
                 "/routes/0/request_headers/remove", "x-a is also in \"set\"");
    expect_error(HR("'request_headers': {'replace': {}}"), "/routes/0/request_headers/replace",
                 "unknown key");
    /* the keys are a table like every other object's: a typo gets its
     * "did you mean", a key like none of them the list */
    expect_error(HR("'request_headers': {'replace': {}}"), "/routes/0/request_headers/replace",
                 "unknown key (one of \"set\", \"add\", \"remove\")");
    expect_error(HR("'request_headers': {'sett': {'X-A': '1'}}"), "/routes/0/request_headers/sett",
                 "unknown key (did you mean \"set\"?)");
    expect_error(HR("'response_headers': {'remve': ['Server']}"),
                 "/routes/0/response_headers/remve", "unknown key (did you mean \"remove\"?)");
    expect_error(doc("'routes': [{'id': 'a', 'path': '/x', 'response': {},"
                     " 'response_headers': {'set': {'X-A': '1'}}}]"),
                 "/routes/0/response_headers", "only allowed with \"upstream\"");
}
END_TEST

/* expect_error() for a document too long to quote in a message. */
static void expect_error_long(const char *json, const char *path, const char *needle)
{
    struct adm_errors e;
    struct adm_config *c = parse(json, &e);

    if (c) {
        adm_config_free(c);
        ck_abort_msg("accepted a config that should fail at %s (%s)", path, needle);
    }
    ck_has_error(&e, path, needle);
    adm_errors_clear(&e);
}

/* <head>, then <n> names '<name>0', '<name>1'... each followed by <after>
 * and separated by ", ", then <tail>, in the static buffer it returns. */
static const char *repeated(const char *head, const char *name, const char *after, int n,
                            const char *tail)
{
    static char buf[16384];
    size_t o = (size_t)snprintf(buf, sizeof(buf), "%s", head);

    for (int i = 0; i < n && o < sizeof(buf); i++) {
        if (i)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, ", ");
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "'%s%d'%s", name, i, after);
    }
    if (o < sizeof(buf))
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s", tail);
    ck_assert_uint_lt(o, sizeof(buf));
    return buf;
}

/* Duplicates are caught however many names the actions have: the check
 * once stopped remembering names past 256. */
START_TEST(header_actions_many)
{
    expect_error_long(HR_DYN(repeated("'request_headers': {'set': {", "X-H", ": 'v'", 300,
                                      "}, 'remove': ['x-h299']}")),
                      "/routes/0/request_headers/remove", "x-h299 is also in \"set\"");
    /* and within one list, past the same point */
    expect_error_long(
        HR_DYN(repeated("'response_headers': {'remove': [", "X-R", "", 300, ", 'X-R280']}")),
        "/routes/0/response_headers/remove", "X-R280 is also in \"remove\"");
    /* 300 distinct names are fine */
    adm_config_free(
        expect_ok(HR_DYN(repeated("'request_headers': {'remove': [", "X-R", "", 300, "]}"))));
}
END_TEST

#define R3                                                                                         \
    "'routes': [{'id': 'a', 'path': '/a', 'response': {}}, "                                       \
    "{'id': 'b', 'path': '/b', 'response': {}}, {'id': 'c', 'path': '/c', 'response': {}}]"

/* limits.max_routes: a config with more routes is refused at /routes,
 * wherever "limits" comes in the document, before a route is parsed (a
 * push's cost is bounded by the cap, not by its size). */
START_TEST(max_routes)
{
    struct adm_errors e;
    struct adm_config *c;
    json_t *d, *routes;

    expect_error(doc(R3 ", 'limits': {'max_routes': 2}"), "/routes",
                 "3 routes, more than limits.max_routes (2)");
    expect_error(doc("'limits': {'max_routes': 2}, " R3), "/routes",
                 "3 routes, more than limits.max_routes (2)");
    c = expect_ok(doc(R3 ", 'limits': {'max_routes': 3}"));
    ck_assert_uint_eq(c->limits.max_routes, 3);
    ck_assert_uint_eq(c->nroutes, 3);
    adm_config_free(c);
    expect_error(doc(R3 ", 'limits': {'max_routes': 0}"), "/limits/max_routes", "between 1 and");
    expect_error(doc("'limits': {'max_routes': 10000001}"), "/limits/max_routes",
                 "between 1 and 10000000");

    /* the default, 100000: one more, each route invalid, is one error */
    ck_assert_ptr_nonnull(d = json_loads(doc(NULL), 0, NULL));
    ck_assert_ptr_nonnull(routes = json_array());
    for (int i = 0; i < 100001; i++)
        ck_assert_int_eq(json_array_append_new(routes, json_object()), 0);
    ck_assert_int_eq(json_object_set_new(d, "routes", routes), 0);
    adm_errors_init(&e);
    ck_assert_ptr_null(adm_config_from_json(d, &e));
    ck_assert_uint_eq(e.n, 1);
    ck_has_error(&e, "/routes", "100001 routes, more than limits.max_routes (100000)");
    adm_errors_clear(&e);
    json_decref(d);
}
END_TEST

static Suite *config_routes_suite(void)
{
    Suite *s = suite_create("admin_config_routes");
    TCase *tc = tcase_create("routes");
    tcase_add_test(tc, route_errors);
    tcase_add_test(tc, pattern_errors);
    tcase_add_test(tc, conflicts);
    tcase_add_test(tc, build_routes);
    tcase_add_test(tc, header_actions);
    tcase_add_test(tc, header_actions_many);
    tcase_add_test(tc, max_routes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_routes_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
