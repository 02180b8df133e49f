/*
 * test_diff.c - the replay of requests against two tables (router/diff.c):
 * groups by (from, to) with their counts, largest first, and their first
 * request as the example; the router's own answers as labels (404, 405,
 * 301); the same-route callback asked only about requests that keep their
 * route id; an empty sample.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/diff.h"

/* A table of "METHOD PATTERN ID" triples (method "*": any). */
static rt_table *table(const char *const (*routes)[3], size_t n, enum rt_trailing_slash ts)
{
    struct rt_options o = {ts, 0};
    rt_table *empty = rt_table_new(&o, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);
    struct rt_error err;

    ck_assert_ptr_nonnull(tx);
    for (size_t i = 0; i < n; i++) {
        const char *m[1] = {routes[i][0]};
        int any = strcmp(routes[i][0], "*") == 0;
        ck_assert_int_eq(rt_txn_insert(tx, m, any ? 0 : 1, routes[i][1], routes[i][2], NULL, &err),
                         0);
    }
    t = rt_txn_commit(tx);
    rt_table_free(empty);
    ck_assert_ptr_nonnull(t);
    return t;
}

struct reqs {
    const char *const (*v)[2]; /* method, path */
    size_t n, i;
};

static int next(void *arg, struct rt_diff_req *q)
{
    struct reqs *r = arg;

    if (r->i == r->n)
        return 0;
    q->method = r->v[r->i][0];
    q->mlen = strlen(q->method);
    q->host = "";
    q->hlen = 0;
    q->path = r->v[r->i][1];
    q->plen = strlen(q->path);
    r->i++;
    return 1;
}

static unsigned asked;

static unsigned same(void *arg, const char *id)
{
    (void)arg;
    asked++;
    return strcmp(id, "users") == 0 ? 4u : 0u;
}

static const char *const OLD[][3] = {
    {"GET", "/users/{id}", "users"}, {"GET", "/old", "old"}, {"*", "/ping", "ping"}};
static const char *const NEW[][3] = {
    {"GET", "/users/{id}", "users"}, {"POST", "/users/{id}", "create"}, {"GET", "/dir/", "dir"}};

START_TEST(groups)
{
    rt_table *a = table(OLD, 3, RT_TS_STRICT), *b = table(NEW, 3, RT_TS_REDIRECT);
    static const char *const R[][2] = {
        {"GET", "/users/1"}, {"POST", "/users/2"}, {"GET", "/old"},   {"GET", "/old"},
        {"GET", "/ping"},    {"PUT", "/ping"},     {"GET", "/ping"},  {"GET", "/dir"},
        {"GET", "/users/3"}, {"GET", "/none"},     {"GET", "/old/x"},
    };
    struct reqs r = {R, sizeof(R) / sizeof(R[0]), 0};
    struct rt_diff d;

    asked = 0;
    ck_assert_int_eq(rt_diff_run(a, b, next, &r, same, NULL, &d), 0);
    ck_assert_uint_eq(d.sampled, 11);
    /* users x2 (same route, changed), /none and /old/x 404 -> 404 */
    ck_assert_uint_eq(d.unchanged, 4);
    ck_assert_uint_eq(d.nchanged, 4);
    ck_assert_str_eq(d.changed[0].from, "ping"); /* 3: the largest first */
    ck_assert_str_eq(d.changed[0].to, "404");
    ck_assert_uint_eq(d.changed[0].count, 3);
    ck_assert_str_eq(d.changed[0].example, "GET /ping");
    ck_assert_str_eq(d.changed[1].from, "old"); /* 2 */
    ck_assert_uint_eq(d.changed[1].count, 2);
    /* the 1s, by labels: 404 -> 301 (the twin /dir/), 405 -> create */
    ck_assert_str_eq(d.changed[2].from, "404");
    ck_assert_str_eq(d.changed[2].to, "301");
    ck_assert_str_eq(d.changed[2].example, "GET /dir");
    ck_assert_str_eq(d.changed[3].from, "405");
    ck_assert_str_eq(d.changed[3].to, "create");
    ck_assert_str_eq(d.changed[3].example, "POST /users/2");
    /* same route: asked for the two hits of users only */
    ck_assert_uint_eq(asked, 2);
    ck_assert_uint_eq(d.nsame, 1);
    ck_assert_str_eq(d.same[0].from, "users");
    ck_assert_uint_eq(d.same[0].changes, 4);
    ck_assert_uint_eq(d.same[0].count, 2);
    ck_assert_str_eq(d.same[0].example, "GET /users/1");
    rt_diff_clear(&d);
    rt_table_free(a);
    rt_table_free(b);
}
END_TEST

START_TEST(many_groups)
{
    /* more groups than the index's first size: it grows and keeps counting */
    enum { N = 300 };
    static char names[N][16], paths[N][16];
    static const char *routes[N][3], *reqs[2 * N][2];
    rt_table *a, *b;
    struct rt_diff d;
    struct reqs r = {(const char *const(*)[2])reqs, 2 * N, 0};

    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "r%d", i);
        snprintf(paths[i], sizeof(paths[i]), "/p%d", i);
        routes[i][0] = "GET";
        routes[i][1] = paths[i];
        routes[i][2] = names[i];
        reqs[2 * i][0] = reqs[2 * i + 1][0] = "GET";
        reqs[2 * i][1] = reqs[2 * i + 1][1] = paths[i];
    }
    a = table((const char *const(*)[3])routes, N, RT_TS_STRICT);
    b = table(NULL, 0, RT_TS_STRICT);
    ck_assert_int_eq(rt_diff_run(a, b, next, &r, NULL, NULL, &d), 0);
    ck_assert_uint_eq(d.nchanged, N);
    for (size_t i = 0; i < d.nchanged; i++) {
        ck_assert_uint_eq(d.changed[i].count, 2);
        ck_assert_str_eq(d.changed[i].to, "404");
    }
    rt_diff_clear(&d);
    r.n = 0;
    r.i = 0;
    ck_assert_int_eq(rt_diff_run(a, b, next, &r, NULL, NULL, &d), 0);
    ck_assert_uint_eq(d.sampled + d.nchanged + d.nsame, 0);
    rt_diff_clear(&d);
    rt_table_free(a);
    rt_table_free(b);
}
END_TEST

static Suite *diff_suite(void)
{
    Suite *s = suite_create("router_diff");
    TCase *tc = tcase_create("diff");

    tcase_add_test(tc, groups);
    tcase_add_test(tc, many_groups);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(diff_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
