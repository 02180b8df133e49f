/*
 * test_regex.c - regexp parameters {name:regexp} (router/regex.c, and the
 * parts of pattern.c, table.c and match.c that carry them): the whole
 * segment must match, priority static > regexp (in registration order) >
 * {param} with backtracking, conflicts by regexp text not name, invalid
 * regexps as errors with their offset, and lookups with and without a
 * caller's context.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "rtest.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_whole_segment)
{
    const char *lines[] = {"GET /users/{id:[0-9]+}", "GET /n/uuid:{id:[0-9a-f]{4}}",
                           "GET /alt/{v:ab|abc}"};
    rt_table *t = rtest_build(NULL, lines, NELEM(lines));
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/42", 1);
    NPARAMS(1);
    PARAM(0, "id", "42");
    MISS(t, "GET", NULL, "/users/42a"); /* anchored at the end */
    MISS(t, "GET", NULL, "/users/a42"); /* and at the start */
    MISS(t, "GET", NULL, "/users/");
    MISS(t, "GET", NULL, "/users/4/2");
    HIT(t, "GET", NULL, "/n/uuid:beef", 2);
    PARAM(0, "id", "beef"); /* the rest of the segment after the static prefix */
    MISS(t, "GET", NULL, "/n/uuid:beefa");
    MISS(t, "GET", NULL, "/n/uuid:");
    /* the end anchor makes the alternation try its longer branch */
    HIT(t, "GET", NULL, "/alt/abc", 3);
    HIT(t, "GET", NULL, "/alt/ab", 3);
    MISS(t, "GET", NULL, "/alt/abcd");
    rt_table_free(t);
}
END_TEST

START_TEST(test_priority)
{
    const char *lines[] = {
        "GET /users/{name}",          /* 1 */
        "GET /users/{id:[0-9]+}",     /* 2 */
        "GET /users/me",              /* 3 */
        "GET /users/{hex:[0-9a-f]+}", /* 4: after 2, so 2 wins where both match */
        "GET /users/*{rest}",         /* 5 */
    };
    rt_table *t = rtest_build(NULL, lines, NELEM(lines));
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/me", 3);
    HIT(t, "GET", NULL, "/users/42", 2);
    PARAM(0, "id", "42");
    HIT(t, "GET", NULL, "/users/beef", 4);
    PARAM(0, "hex", "beef");
    HIT(t, "GET", NULL, "/users/bob", 1);
    PARAM(0, "name", "bob");
    HIT(t, "GET", NULL, "/users/bob/x", 5);
    rt_table_free(t);
}
END_TEST

/* Registration order decides between two regexps at one position, and a
 * regexp that comes back after its last route was deleted goes last. */
START_TEST(test_registration_order)
{
    const char *ab[] = {"GET /r/{a:[a-z]+}", "GET /r/{b:[a-c]+}"};
    const char *ba[] = {"GET /r/{b:[a-c]+}", "GET /r/{a:[a-z]+}"};
    rt_table *t1 = rtest_build(NULL, ab, 2), *t2 = rtest_build(NULL, ba, 2), *t3;
    struct rtest_res r;
    struct rt_error err;
    rt_txn *tx;

    HIT(t1, "GET", NULL, "/r/abc", 1);
    PARAM(0, "a", "abc");
    HIT(t2, "GET", NULL, "/r/abc", 1);
    PARAM(0, "b", "abc");
    HIT(t2, "GET", NULL, "/r/xyz", 2);

    tx = rt_txn_begin(t1);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/r/{a:[a-z]+}", &err), 0);
    ck_assert_int_eq(rtest_insert(tx, "GET", "/r/{z:[a-z]+}", 3, &err), 0);
    t3 = rt_txn_commit(tx);
    HIT(t3, "GET", NULL, "/r/abc", 2); /* [a-c]+ is older now */
    HIT(t3, "GET", NULL, "/r/xyz", 3);
    HIT(t1, "GET", NULL, "/r/abc", 1); /* the old version is unchanged */
    rt_table_free(t3);
    rt_table_free(t1);
    rt_table_free(t2);
}
END_TEST

START_TEST(test_backtracking)
{
    const char *lines[] = {"GET /b/{id:[0-9]+}/x", "GET /b/{p}/y", "GET /b/{q:[0-9]}/y/z",
                           "POST /b/{id:[0-9]+}/w"};
    rt_table *t = rtest_build(NULL, lines, NELEM(lines));
    struct rtest_res r;

    HIT(t, "GET", NULL, "/b/1/x", 1);
    HIT(t, "GET", NULL, "/b/1/y", 2); /* the regexp branch fails below: back to {p} */
    PARAM(0, "p", "1");
    NPARAMS(1);
    HIT(t, "GET", NULL, "/b/1/y/z", 3);
    MISS(t, "GET", NULL, "/b/12/y/z");
    EXPECT(t, "GET", NULL, "/b/7/w", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_POST);
    MISS(t, "GET", NULL, "/b/x7/w");
    rt_table_free(t);
}
END_TEST

static void expect_invalid(const char *pattern, size_t offset, const char *words)
{
    struct rt_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(rt_pattern_check(pattern, &err) == -1, "'%s' accepted", pattern);
    ck_assert_int_eq(err.code, RT_EINVAL);
    ck_assert_msg(err.offset == offset, "'%s': offset %zu, want %zu (%s)", pattern, err.offset,
                  offset, err.msg);
    ck_assert_msg(strstr(err.msg, words) != NULL, "'%s': message '%s' lacks '%s'", pattern, err.msg,
                  words);
}

START_TEST(test_invalid)
{
    /* PCRE2's offset of the fault, in the pattern */
    expect_invalid("/a/{x:[0-9}", 10, "invalid regexp");
    expect_invalid("/a/{x:(ab}", 9, "invalid regexp");
    expect_invalid("/a/{x:a)}", 7, "invalid regexp");
    expect_invalid("/a/{x:}", 6, "empty regexp");
    expect_invalid("/a/{x:[0-9]", 3, "unterminated");
    expect_invalid("/a/{x:[0-9]{2}", 3, "unterminated");
    expect_invalid("/a/{x:a b}", 7, "not allowed in a regexp");
    expect_invalid("/a/*{x:.*}", 7, "catch-all takes no regexp");
    expect_invalid("{h:[a-z]+}.example.com/x", 3, "no regexp in a host");
    expect_invalid("/a/{x:[0-9]+}y", 13, "must end its segment");
    ck_assert_int_eq(rt_pattern_check("/a/{x:[0-9]{2,3}}/{y:\\}}/{$:(?i)ab}", NULL), 0);
    ck_assert_int_eq(rt_pattern_check("/a/{x:[^/]+}", NULL), 0);
}
END_TEST

START_TEST(test_conflicts)
{
    rt_table *empty = rt_table_new(NULL, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);
    struct rt_error err;
    struct rtest_res r;

    ck_assert_int_eq(rtest_insert(tx, "GET", "/c/{id:[0-9]+}", 1, &err), 0);
    /* differing only in the parameter's name: the same route */
    ck_assert_int_eq(rtest_insert(tx, "GET", "/c/{n:[0-9]+}", 2, &err), -1);
    ck_assert_int_eq(err.code, RT_ECONFLICT);
    ck_assert_str_eq(rt_route_pattern(err.other), "/c/{id:[0-9]+}");
    /* another regexp, a plain parameter, another method: all coexist */
    ck_assert_int_eq(rtest_insert(tx, "GET", "/c/{n:[0-9]*}", 3, &err), 0);
    ck_assert_int_eq(rtest_insert(tx, "GET", "/c/{p}", 4, &err), 0);
    ck_assert_int_eq(rtest_insert(tx, "POST", "/c/{n:[0-9]+}", 5, &err), 0);
    ck_assert_int_eq(rtest_update(tx, "GET", "/c/{other:[0-9]+}", 6, &err), 0);
    {
        const char *get[] = {"GET"};
        ck_assert_ptr_null(rt_txn_find(tx, get, 1, "/c/{id:[0-9]*x}"));
        ck_assert_ptr_eq(rt_txn_find(tx, get, 1, "/c/{z:[0-9]+}"), (void *)(intptr_t)6);
    }
    t = rt_txn_commit(tx);
    HIT(t, "GET", NULL, "/c/12", 6);
    PARAM(0, "other", "12");
    HIT(t, "POST", NULL, "/c/12", 5);
    HIT(t, "GET", NULL, "/c/x", 4);
    tx = rt_txn_begin(t);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/c/{q:[0-9]+}", &err), 0);
    ck_assert_int_eq(rtest_delete(tx, "POST", "/c/{q:[0-9]+}", &err), 0);
    rt_table_free(t);
    t = rt_txn_commit(tx);
    HIT(t, "GET", NULL, "/c/12", 3);
    ck_assert_uint_eq(rt_table_count(t), 2);
    rt_table_free(t);
    rt_table_free(empty);
}
END_TEST

/* A caller's context, reused over lookups and tables, answers like the
 * context-less lookup; tables without regexps need none. */
START_TEST(test_context)
{
    const char *lines[] = {"GET /users/{id:[0-9]+}", "GET /users/{name}"};
    const char *plain[] = {"GET /users/{name}"};
    rt_table *t = rtest_build(NULL, lines, 2), *p = rtest_build(NULL, plain, 1);
    rt_ctx *ctx = rt_ctx_new();
    struct rt_param params[2];
    struct rt_match m;

    ck_assert_ptr_nonnull(ctx);
    for (int i = 0; i < 1000; i++) {
        const char *path = i % 2 ? "/users/123" : "/users/abc";
        ck_assert_int_eq(rt_lookup_ctx(t, ctx, "GET", 3, NULL, 0, path, 10, params, 2, &m), RT_HIT);
        ck_assert_ptr_eq(rt_route_udata(m.route), (void *)(intptr_t)(i % 2 ? 1 : 2));
        ck_assert_int_eq(rt_lookup_ctx(p, ctx, "GET", 3, NULL, 0, path, 10, params, 2, &m), RT_HIT);
    }
    ck_assert_int_eq(rt_lookup(t, "GET", 3, NULL, 0, "/users/7", 8, params, 2, &m), RT_HIT);
    ck_assert_ptr_eq(rt_route_udata(m.route), (void *)(intptr_t)1);
    ck_assert_int_eq(rt_lookup_ctx(p, NULL, "GET", 3, NULL, 0, "/users/7", 8, params, 2, &m),
                     RT_HIT);
    rt_ctx_free(ctx);
    rt_ctx_free(NULL);
    rt_table_free(t);
    rt_table_free(p);
}
END_TEST

/* A regexp that backtracks badly stops at the match limit: no match, and
 * the lookup returns. */
START_TEST(test_match_limit)
{
    const char *lines[] = {"GET /d/{x:(a+)+b}", "GET /d/{y}"};
    rt_table *t = rtest_build(NULL, lines, 2);
    struct rtest_res r;
    char path[64];

    snprintf(path, sizeof(path), "/d/%s", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac");
    HIT(t, "GET", NULL, path, 2);
    HIT(t, "GET", NULL, "/d/aab", 1);
    rt_table_free(t);
}
END_TEST

static Suite *regex_suite(void)
{
    Suite *s = suite_create("router_regex");
    TCase *tc = tcase_create("regex");

    tcase_add_test(tc, test_whole_segment);
    tcase_add_test(tc, test_priority);
    tcase_add_test(tc, test_registration_order);
    tcase_add_test(tc, test_backtracking);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_conflicts);
    tcase_add_test(tc, test_context);
    tcase_add_test(tc, test_match_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(regex_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
