/*
 * test_github.c - the GitHub API table (tests/data/routes/github.txt, 203 routes)
 * and the other benchmark tables: every request of github-requests.txt hits
 * its own route (same line) with the literal parameter values, in every
 * option set; every method and trailing-slash variant of those requests
 * answers like the reference; the gplus, parse and static tables likewise.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "reference.h"
#include "rtest.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

/* A table and its reference from a route file, udata = line index + 1. */
static rt_table *load_table(const struct rtest_line *routes, size_t n, const struct rt_options *o,
                            struct ref_table *ref)
{
    rt_table *empty = rt_table_new(o, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);

    ck_assert_ptr_nonnull(tx);
    ref_init(ref);
    for (size_t i = 0; i < n; i++) {
        const char *m[1] = {routes[i].method};
        struct rt_error err;
        int rc = rt_txn_insert(tx, m, 1, routes[i].path, NULL, (void *)(intptr_t)(i + 1), &err);
        ck_assert_msg(rc == 0, "%s %s: %s", routes[i].method, routes[i].path, err.msg);
        ck_assert_int_eq(ref_insert(ref, m, 1, routes[i].path, (intptr_t)(i + 1), NULL, 0, NULL),
                         REF_OK);
    }
    t = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(t);
    rt_table_free(empty);
    ck_assert_uint_eq(rt_table_count(t), n);
    return t;
}

/* The parameters <pattern> binds in <path>, by aligning segments; written
 * without the router or the reference. Returns the count. */
static size_t expected_params(const char *pattern, const char *path, char names[][64],
                              char values[][256])
{
    size_t n = 0;
    const char *p = pattern, *q = path;

    while (*p) {
        const char *pe = strchr(p + 1, '/'), *qe = strchr(q + 1, '/');
        size_t plen = pe ? (size_t)(pe - p) : strlen(p);
        size_t qlen = qe ? (size_t)(qe - q) : strlen(q);
        const char *brace = memchr(p, '{', plen);
        if (brace) {
            size_t pre = (size_t)(brace - p);
            const char *close = memchr(brace, '}', plen - pre);
            ck_assert_ptr_nonnull(close);
            if (pre > 0 && p[pre - 1] == '*') { /* catch-all: the rest */
                pre--;
                qlen = strlen(q);
            }
            ck_assert_msg(qlen >= pre && memcmp(p, q, pre) == 0, "%s vs %s", pattern, path);
            snprintf(names[n], 64, "%.*s", (int)(close - brace - 1), brace + 1);
            snprintf(values[n], 256, "%.*s", (int)(qlen - pre), q + pre);
            n++;
        } else {
            ck_assert_msg(plen == qlen && memcmp(p, q, plen) == 0, "%s vs %s", pattern, path);
        }
        p += plen;
        q += qlen;
    }
    ck_assert_msg(*q == '\0', "%s vs %s: request longer", pattern, path);
    return n;
}

START_TEST(test_github_requests)
{
    struct rtest_line *routes, *reqs;
    size_t n = rtest_load("github.txt", &routes), nreq = rtest_load("github-requests.txt", &reqs);

    ck_assert_uint_eq(n, 203);
    ck_assert_uint_eq(nreq, 203);
    for (int ts = RT_TS_STRICT; ts <= RT_TS_RELAXED; ts++) {
        for (int ao = 0; ao <= 1; ao++) {
            struct rt_options o = {(enum rt_trailing_slash)ts, ao};
            struct ref_table ref;
            rt_table *t = load_table(routes, n, &o, &ref);
            size_t maxp = 0;

            for (size_t i = 0; i < nreq; i++) {
                char names[16][64], values[16][256];
                size_t np = expected_params(routes[i].path, reqs[i].path, names, values);
                struct rtest_res r;
                const char *path = reqs[i].path;

                ck_assert_str_eq(reqs[i].method, routes[i].method);
                if (np > maxp)
                    maxp = np;
                ck_assert_msg(rtest_lookup(t, reqs[i].method, NULL, path, &r) == RT_HIT &&
                                  rtest_id(&r) == (intptr_t)(i + 1),
                              "line %zu: %s %s: status %d route %s, want %s", i + 1, reqs[i].method,
                              path, (int)r.m.status, r.m.route ? rt_route_pattern(r.m.route) : "-",
                              routes[i].path);
                ck_assert_int_eq(r.m.slash, 0);
                ck_assert_msg(r.m.nparams == np, "%s: nparams %zu, want %zu", path, r.m.nparams,
                              np);
                for (size_t k = 0; k < np; k++) {
                    ck_assert_msg(rtest_param_is(&r, k, names[k], values[k]),
                                  "%s: param %zu: got %s=%.*s, want %s=%s", path, k,
                                  r.params[k].name, (int)r.params[k].len, r.params[k].value,
                                  names[k], values[k]);
                    ck_assert(r.params[k].value >= path &&
                              r.params[k].value + r.params[k].len <= path + strlen(path));
                }
                /* a Host header changes nothing for host-less routes */
                ck_assert_int_eq(rtest_lookup(t, reqs[i].method, "api.github.com:443", path, &r),
                                 RT_HIT);
                ck_assert_int_eq(rtest_id(&r), (intptr_t)(i + 1));
                /* HEAD is served by the GET routes */
                if (strcmp(reqs[i].method, "GET") == 0) {
                    ck_assert_int_eq(rtest_lookup(t, "HEAD", NULL, path, &r), RT_HIT);
                    ck_assert_int_eq(rtest_id(&r), (intptr_t)(i + 1));
                }
            }
            ck_assert_uint_eq(rt_table_max_params(t), maxp);
            rt_table_free(t);
            ref_clear(&ref);
        }
    }
    rtest_lines_free(routes, n);
    rtest_lines_free(reqs, nreq);
}
END_TEST

/* Other methods, trailing-slash twins and truncations of the GitHub
 * requests, against the reference, in every option set. */
START_TEST(test_github_variants)
{
    struct rtest_line *routes, *reqs;
    size_t n = rtest_load("github.txt", &routes), nreq = rtest_load("github-requests.txt", &reqs);
    char why[4096];
    size_t checked = 0;

    for (int ts = RT_TS_STRICT; ts <= RT_TS_RELAXED; ts++) {
        for (int ao = 0; ao <= 1; ao++) {
            struct rt_options o = {(enum rt_trailing_slash)ts, ao};
            struct ref_table ref;
            rt_table *t = load_table(routes, n, &o, &ref);

            for (size_t i = 0; i < nreq; i++) {
                char path[600];
                for (int v = 0; v < 4; v++) {
                    if (v == 0) /* as is */
                        snprintf(path, sizeof(path), "%s", reqs[i].path);
                    else if (v == 1) /* slash toggled */
                        snprintf(path, sizeof(path), "%s/", reqs[i].path);
                    else if (v == 2) /* last segment dropped */
                        snprintf(path, sizeof(path), "%.*s",
                                 (int)(strrchr(reqs[i].path, '/') - reqs[i].path + 1),
                                 reqs[i].path);
                    else /* raw pattern text, as the benchmark replays it */
                        snprintf(path, sizeof(path), "%s", routes[i].path);
                    for (size_t m = 0; m < NMETHODS; m++) {
                        checked++;
                        if (!rtest_agree(t, &ref, NULL, methods[m], NULL, 0, path, strlen(path),
                                         why, sizeof(why)))
                            ck_abort_msg("github table: %s", why);
                    }
                }
            }
            rt_table_free(t);
            ref_clear(&ref);
        }
    }
    fprintf(stderr, "github variants: %zu lookups agreed\n", checked);
    rtest_lines_free(routes, n);
    rtest_lines_free(reqs, nreq);
}
END_TEST

/* gplus, parse and static: each route's pattern with its parameters filled
 * by "xxx" (fox's benchmark) and as raw text, every method. */
START_TEST(test_other_tables)
{
    static const char *const files[] = {"gplus.txt", "parse.txt", "static.txt"};
    char why[4096];

    for (size_t f = 0; f < 3; f++) {
        struct rtest_line *routes;
        size_t n = rtest_load(files[f], &routes), hits = 0;
        struct rt_options o = {RT_TS_REDIRECT, 1};
        struct ref_table ref;
        rt_table *t = load_table(routes, n, &o, &ref);

        for (size_t i = 0; i < n; i++) {
            char filled[600];
            size_t k = 0;
            for (const char *p = routes[i].path; *p && k + 4 < sizeof(filled); p++) {
                if (*p == '{') {
                    memcpy(filled + k, "xxx", 3);
                    k += 3;
                    while (*p && *p != '}')
                        p++;
                } else {
                    filled[k++] = *p;
                }
            }
            filled[k] = '\0';
            struct rtest_res r;
            if (rtest_lookup(t, routes[i].method, NULL, filled, &r) == RT_HIT &&
                rtest_id(&r) == (intptr_t)(i + 1))
                hits++;
            for (size_t m = 0; m < NMETHODS; m++) {
                if (!rtest_agree(t, &ref, NULL, methods[m], NULL, 0, filled, strlen(filled), why,
                                 sizeof(why)) ||
                    !rtest_agree(t, &ref, NULL, methods[m], NULL, 0, routes[i].path,
                                 strlen(routes[i].path), why, sizeof(why)))
                    ck_abort_msg("%s: %s", files[f], why);
            }
        }
        /* every route is reachable through its own filled-in pattern */
        ck_assert_msg(hits == n, "%s: %zu of %zu routes hit by their own request", files[f], hits,
                      n);
        rt_table_free(t);
        ref_clear(&ref);
        rtest_lines_free(routes, n);
    }
}
END_TEST

static Suite *github_suite(void)
{
    Suite *s = suite_create("router_github");
    TCase *tc = tcase_create("github");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_github_requests);
    tcase_add_test(tc, test_github_variants);
    tcase_add_test(tc, test_other_tables);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(github_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
