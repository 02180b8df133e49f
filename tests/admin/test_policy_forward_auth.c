/*
 * test_policy_forward_auth.c - admin/policy_forward_auth.c through the
 * config parser: a forward_auth policy's defaults and lists, its pool
 * resolved once every section is read (before or after "upstreams"), the
 * pool's index in its identity, and every refusal at its JSON path:
 * unknown or HTTP/2 pools, wrong types, bad, reserved, own and repeated
 * header names, timeout bounds, paths, and two authentication policies on
 * one route.
 */
#define _POSIX_C_SOURCE 200809L

#include "config_test.h"

#include "admin/policy.h"
#include "admin/policy_types.h"

#define UPS                                                                                        \
    "'upstreams': {'app': {'servers': [{'address': '127.0.0.1:9001'}]}, 'auth': {'servers': "      \
    "[{'address': '127.0.0.1:9002'}]}, 'grpc': {'protocol': 'h2c', 'servers': [{'address': "       \
    "'127.0.0.1:9003'}]}}"

/* A document with the upstreams above and policy "p" whose members after
 * its type are <members>. */
static const char *with_policy(const char *members)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf),
             UPS ", 'policies': {'p': {'type': 'forward_auth'%s%s}}, 'routes': [{'id': 'r', "
                 "'path': '/r', 'upstream': 'app', 'policies': ['p']}]",
             *members ? ", " : "", members);
    return doc(buf);
}

static const struct adm_fa_conf *conf_of(const struct adm_config *c)
{
    ck_assert_uint_eq(c->npolicies, 1);
    ck_assert_int_eq(c->policies[0].type, ADM_POL_FORWARD_AUTH);
    return c->policies[0].conf;
}

START_TEST(defaults)
{
    struct adm_config *c = expect_ok(with_policy("'upstream': 'auth'"));
    const struct adm_fa_conf *f = conf_of(c);

    ck_assert_str_eq(f->upstream, "auth");
    ck_assert_uint_eq(f->up, 1);
    ck_assert_str_eq(f->path, "/");
    ck_assert_uint_eq(f->path_len, 1);
    ck_assert_uint_eq(f->timeout_ms, ADM_FA_TIMEOUT_MS);
    ck_assert_uint_eq(f->nreq, 0);
    ck_assert_uint_eq(f->nresp, 0);
    ck_assert_int_eq(adm_pol_kinds[ADM_POL_FORWARD_AUTH].auth, 1);
    adm_config_free(c);
}
END_TEST

START_TEST(full_definition)
{
    struct adm_config *c = expect_ok(with_policy(
        "'upstream': 'auth', 'path': '/verify?v=1', 'request_headers': ['Authorization', "
        "'Cookie', 'X_Tenant'], 'response_headers': ['X-User', 'X-Roles'], 'timeout_ms': 60000"));
    const struct adm_fa_conf *f = conf_of(c);

    ck_assert_str_eq(f->path, "/verify?v=1");
    ck_assert_uint_eq(f->path_len, 11);
    ck_assert_uint_eq(f->nreq, 3);
    ck_assert_str_eq(f->req[0].name, "authorization");
    ck_assert_str_eq(f->req[1].name, "cookie");
    ck_assert_str_eq(f->req[2].name, "x_tenant");
    ck_assert_uint_eq(f->req[2].len, 8);
    ck_assert_uint_eq(f->nresp, 2);
    ck_assert_str_eq(f->resp[0].name, "x-user");
    ck_assert_str_eq(f->resp[1].name, "x-roles");
    ck_assert_uint_eq(f->timeout_ms, 60000);
    adm_config_free(c);
}
END_TEST

/* The policies may come before the upstreams; the pool's index is part
 * of the identity, since the definition keeps it (a snapshot shares a
 * policy whose identity did not change). */
START_TEST(pool_resolved_late_and_in_identity)
{
    struct adm_config *a = expect_ok(
        J("{'policies': {'p': {'type': 'forward_auth', 'upstream': 'auth'}}, 'listeners': "
          "[{'address': '127.0.0.1:8080'}], 'upstreams': {'auth': {'servers': [{'address': "
          "'127.0.0.1:9002'}]}}}"));
    struct adm_config *b = expect_ok(
        J("{'policies': {'p': {'type': 'forward_auth', 'upstream': 'auth'}}, 'listeners': "
          "[{'address': '127.0.0.1:8080'}], 'upstreams': {'app': {'servers': [{'address': "
          "'127.0.0.1:9001'}]}, 'auth': {'servers': [{'address': '127.0.0.1:9002'}]}}}"));

    ck_assert_uint_eq(conf_of(a)->up, 0);
    ck_assert_uint_eq(conf_of(b)->up, 1);
    ck_assert_uint_ne(a->policies[0].hash, b->policies[0].hash);
    ck_assert_int_eq(adm_policies_same(a, b), 0);
    adm_config_free(a);
    adm_config_free(b);
}
END_TEST

START_TEST(pool_refusals)
{
    expect_error(with_policy("'upstream': 'auht'"), "/policies/p/upstream",
                 "unknown upstream \"auht\" (did you mean \"auth\"?)");
    expect_error(with_policy("'upstream': 'nowhere-near'"), "/policies/p/upstream",
                 "unknown upstream");
    expect_error(with_policy("'upstream': 'grpc'"), "/policies/p/upstream", "HTTP/2");
    expect_error(with_policy(""), "/policies/p/upstream", "missing");
    expect_error(with_policy("'upstream': 7"), "/policies/p/upstream", "string");
    expect_error(with_policy("'upstream': ''"), "/policies/p/upstream", "");
    /* an upstream refused for its name has none: never compared */
    expect_error(doc("'upstreams': {'bad name': {'servers': [{'address': '127.0.0.1:9'}]}}, "
                     "'policies': {'p': {'type': 'forward_auth', 'upstream': 'bad nam'}}"),
                 "/policies/p/upstream", "unknown upstream \"bad nam\"");
}
END_TEST

START_TEST(type_refusals)
{
    expect_error(with_policy("'upstream': 'auth', 'request_headers': 'Authorization'"),
                 "/policies/p/request_headers", "array");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': {}"),
                 "/policies/p/response_headers", "array");
    expect_error(with_policy("'upstream': 'auth', 'request_headers': [1]"),
                 "/policies/p/request_headers/0", "string");
    expect_error(with_policy("'upstream': 'auth', 'timeout_ms': '1000'"), "/policies/p/timeout_ms",
                 "");
    expect_error(with_policy("'upstream': 'auth', 'path': 3"), "/policies/p/path", "string");
    expect_error(with_policy("'upstream': 'auth', 'timeuot_ms': 5"), "/policies/p/timeuot_ms",
                 "timeout_ms");
    expect_error(doc(UPS ", 'policies': {'p': {'type': 'forward_autth', 'upstream': 'auth'}}"),
                 "/policies/p/type", "did you mean \"forward_auth\"");
}
END_TEST

START_TEST(header_refusals)
{
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['Cookie', 'Bad Name']"),
                 "/policies/p/request_headers/1", "invalid header name");
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['Connection']"),
                 "/policies/p/request_headers/0", "hop-by-hop");
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['Proxy-Authorization']"),
                 "/policies/p/request_headers/0", "a Proxy-* field");
    /* Host is neither hop-by-hop nor framing: say what it is, and what carries it */
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['Host']"),
                 "/policies/p/request_headers/0", "X-Forwarded-Host carries the client's");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': ['Transfer-Encoding']"),
                 "/policies/p/response_headers/0", "framing");
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['X-Forwarded-For']"),
                 "/policies/p/request_headers/0", "written by the gateway");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': ['X-User', 'X-Real-IP']"),
                 "/policies/p/response_headers/1", "written by the gateway");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': ['Authorization']"),
                 "/policies/p/response_headers/0", "names credentials");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': ['X-Forwarded-Uri']"),
                 "/policies/p/response_headers/0", "written by the gateway");
    expect_error(with_policy("'upstream': 'auth', 'request_headers': ['Cookie', 'COOKIE']"),
                 "/policies/p/request_headers/1", "named twice");
    expect_error(with_policy("'upstream': 'auth', 'response_headers': ['X-User', 'x-user']"),
                 "/policies/p/response_headers/1", "named twice");
    /* at most ADM_FA_MAX_FIELDS */
    char list[2048], members[2300];
    size_t n = 0;
    for (int i = 0; i <= ADM_FA_MAX_FIELDS; i++)
        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s'X-H%d'", i ? ", " : "", i);
    snprintf(members, sizeof(members), "'upstream': 'auth', 'response_headers': [%s]", list);
    expect_error(with_policy(members), "/policies/p/response_headers", "at most 32");
}
END_TEST

START_TEST(bounds_refusals)
{
    expect_error(with_policy("'upstream': 'auth', 'timeout_ms': 0"), "/policies/p/timeout_ms", "");
    expect_error(with_policy("'upstream': 'auth', 'timeout_ms': 60001"), "/policies/p/timeout_ms",
                 "");
    expect_error(with_policy("'upstream': 'auth', 'timeout_ms': -5"), "/policies/p/timeout_ms", "");
    expect_error(with_policy("'upstream': 'auth', 'path': 'verify'"), "/policies/p/path",
                 "origin-form");
    expect_error(with_policy("'upstream': 'auth', 'path': '/a b'"), "/policies/p/path",
                 "origin-form");
    expect_error(with_policy("'upstream': 'auth', 'path': '/a#frag'"), "/policies/p/path",
                 "origin-form");
    expect_error(with_policy("'upstream': 'auth', 'path': ''"), "/policies/p/path", "");
    char long_path[1200], members[1300];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    snprintf(members, sizeof(members), "'upstream': 'auth', 'path': '%s'", long_path);
    expect_error(with_policy(members), "/policies/p/path", "origin-form");
}
END_TEST

START_TEST(one_authentication_a_route)
{
    expect_error(doc(UPS ", 'policies': {'p': {'type': 'forward_auth', 'upstream': 'auth'}, "
                         "'k': {'type': 'api_key', 'keys': [{'name': 'a', 'sha256': "
                         "'0000000000000000000000000000000000000000000000000000000000000000'}]}}"
                         ", 'routes': [{'id': 'r', 'path': '/r', 'upstream': 'app', "
                         "'policies': ['k', 'p']}]"),
                 "/routes/0/policies/1", "at most one authentication policy");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policy_forward_auth");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, defaults);
    tcase_add_test(tc, full_definition);
    tcase_add_test(tc, pool_resolved_late_and_in_identity);
    tcase_add_test(tc, pool_refusals);
    tcase_add_test(tc, type_refusals);
    tcase_add_test(tc, header_refusals);
    tcase_add_test(tc, bounds_refusals);
    tcase_add_test(tc, one_authentication_a_route);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
