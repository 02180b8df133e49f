/*
 * test_pattern.c - pattern syntax (router/pattern.c): every invalid form of
 * SEMANTICS.md is RT_EINVAL with the byte offset of the fault, valid patterns
 * are accepted, by rt_pattern_check() and by rt_txn_insert() alike, and bad
 * method tokens and too many methods are refused.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "rtest.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* An invalid pattern and the range its error offset must fall in. */
struct bad {
    const char *pattern;
    size_t lo, hi;
    const char *why;
};

static const struct bad bad_paths[] = {
    {"", 0, 0, "empty pattern: path does not start with /"},
    {"users", 0, 5, "no path after the host"},
    {"/users/{}", 7, 8, "empty name"},
    {"/*{}", 1, 3, "empty catch-all name"},
    {"/users/{a}{b}", 10, 10, "{a}{b}"},
    {"/users/{a}x", 10, 10, "text after }"},
    {"/users/{a}*{b}", 10, 10, "catch-all after param in one segment"},
    {"/{a}/*{b}x", 9, 9, "*{a}x"},
    {"/*{a}x/*{b}", 5, 5, "infix catch-all not ending its segment"},
    /* fox: "consecutive catch-all parameter are not allowed" */
    {"/foo/*{args}/*{param}", 13, 13, "two catch-alls in a row"},
    {"/foo/ab*{args}/*{param}", 15, 15, "two catch-alls in a row, the first after text"},
    {"/*{a}/*{b}", 6, 6, "two catch-alls in a row at the root"},
    {"/a/*{x}/*{y}/b", 8, 8, "two infix catch-alls in a row"},
    {"/a//b", 2, 3, "empty segment"},
    {"//", 0, 1, "empty first segment"},
    {"/a//", 2, 3, "empty segment before trailing slash"},
    {"/a/./b", 2, 4, ". segment"},
    {"/a/../b", 2, 5, ".. segment"},
    {"/.", 0, 2, ". as only segment"},
    {"/a/..", 2, 5, ".. at the end"},
    {"/a/./", 2, 4, ". before trailing slash"},
    {"/users/{id", 7, 7, "unterminated {"},
    {"/{a", 1, 1, "unterminated { at end"},
    {"/users/{id/x", 7, 10, "unterminated { (slash inside)"},
    {"/*{a", 1, 2, "unterminated catch-all"},
    {"/a}b", 2, 2, "stray }"},
    {"/}", 1, 1, "stray } alone"},
    {"/{a}/{a}", 5, 6, "duplicate names"},
    {"/{a}/x/*{a}", 7, 9, "duplicate param/catch-all names"},
    {"/a b", 2, 2, "space"},
    {"/a\tb", 2, 2, "control byte"},
    {"/a\x7f", 2, 2, "DEL"},
    {"/a\x80z", 2, 2, "byte >= 0x80"},
    {"/caf\xc3\xa9", 4, 4, "UTF-8"},
    {"/a?b", 2, 2, "?"},
    {"/a#b", 2, 2, "#"},
    {"/a*b", 2, 2, "* not starting *{"},
    {"/a*", 2, 2, "trailing *"},
    {"/*", 1, 1, "bare *"},
    {"/{{a}}", 1, 2, "nested {"},
    {"/{a*b}", 1, 3, "* in name"},
    {"/{a{b}}", 1, 3, "{ inside name"},
};

static const struct bad bad_hosts[] = {
    {"exa mple.com/x", 3, 3, "space in host"},
    {"example..com/x", 7, 8, "empty label"},
    {".example.com/x", 0, 0, "empty first label"},
    {"example.com./x", 11, 12, "trailing dot"},
    {"example.com:8080/x", 11, 11, "port"},
    {"-api.example.com/x", 0, 0, "label starting with -"},
    {"api-.example.com/x", 0, 3, "label ending with -"},
    {"api.example-.com/x", 4, 11, "middle label ending with -"},
    {"*.example.com/x", 0, 0, "* in host"},
    {"*{h}/x", 4, 4, "catch-all label without a label after it"},
    {"a.*{h}.example.com/x", 2, 2, "catch-all label not first"},
    {"a*{h}.example.com/x", 1, 1, "catch-all label after text"},
    {"*{h}x.example.com/x", 4, 4, "text after a catch-all label"},
    {"*{h:[a-z]+}.example.com/x", 4, 4, "regexp in a catch-all label"},
    {"{a}{b}.example.com/x", 3, 3, "{a}{b} in host"},
    {"{a}x.example.com/x", 3, 3, "text after } in a label"},
    {"{a}-x.example.com/x", 3, 3, "text after } in a label (-)"},
    {"{}.example.com/x", 0, 1, "empty host param name"},
    {"api_x.example.com/x", 3, 3, "_ in host"},
    {"{a}.example.com/{a}", 16, 17, "duplicate name across host and path"},
    {"{a}.{a}.com/x", 4, 5, "duplicate name in host"},
    {"{a.example.com/x", 0, 2, "unterminated { in host"},
    {"a}.example.com/x", 1, 1, "stray } in host"},
    {"example.com", 0, 11, "host without path"},
    /* fox refuses these two (issue 14) */
    {"API.example.com/x", 0, 0, "upper case in a host pattern"},
    {"api.Example.com/x", 4, 4, "upper case in a middle label"},
    {"127.0.0.1/x", 8, 8, "last label all digits"},
    {"example.123/x", 8, 8, "last label all digits (name)"},
};

static const char *const good[] = {
    "/",
    "/users",
    "/users/",
    "/users/{id}",
    "/users/{id}/",
    "/users/{id}/posts/{post_id}",
    "/users/uuid:{id}",
    "/avengers/{name}",
    "/src/*{filepath}",
    "/src/file=*{path}",
    "/*{all}",
    "/a*{x}",
    "/{a}/{b}/*{c}",
    "/{A_z9}",
    /* fox: a name is anything but the delimiters { } / * : */
    "/{$1}",
    "/{a-b}",
    "/{a b}",
    "/{a.b}/{@x}",
    "{a.b}.example.com/x",
    "a.b.c123/x",
    "/a.b/..c/.well-known/x.",
    "/~!$&'()+,;=:@-_%",
    "/fs/avengers.txt",
    "api.example.com/x",
    "{tenant}.example.com/x",
    "api-{region}.example.com/x",
    "{a}.{b}.com/{c}",
    "{h}/ip",
    "localhost/",
    "123.example.com/x",
    "a-b.example.com/x",
    "x/*{rest}",
    "{tenant}.example.com/*{rest}",
    /* infix catch-alls and the catch-all label (issue 14) */
    "/*{a}/",
    "/*{a}/{b}",
    "/*{a}/b*{c}",
    "/*{a}/b/*{c}",
    "/src/*{a}/b",
    "/assets/*{path}/thumbnail",
    "/foo/z*{args}/bar",
    "/a/*{x}/{y}/*{z}/c",
    "*{any}.example.com/x",
    "*{any}.{tld}/x",
};

static void check_error(const char *pattern, int rc, const struct rt_error *err, size_t lo,
                        size_t hi, const char *why)
{
    const char *nul = memchr(err->msg, '\0', sizeof(err->msg));
    size_t mlen = nul ? (size_t)(nul - err->msg) : sizeof(err->msg);

    ck_assert_msg(rc == -1, "'%s' (%s): accepted", pattern, why);
    ck_assert_msg(err->code == RT_EINVAL, "'%s' (%s): code %d, want RT_EINVAL", pattern, why,
                  (int)err->code);
    ck_assert_msg(err->offset >= lo && err->offset <= hi,
                  "'%s' (%s): offset %zu, want %zu..%zu (msg: %s)", pattern, why, err->offset, lo,
                  hi, err->msg);
    ck_assert_msg(mlen > 0 && mlen < sizeof(err->msg), "'%s' (%s): empty or unterminated msg",
                  pattern, why);
    ck_assert_msg(err->msg[mlen - 1] != '\n', "'%s' (%s): msg ends with a newline", pattern, why);
}

static void check_bad(const struct bad *b)
{
    struct rt_error err;
    int rc;

    memset(&err, 0x5a, sizeof(err));
    rc = rt_pattern_check(b->pattern, &err);
    check_error(b->pattern, rc, &err, b->lo, b->hi, b->why);
}

START_TEST(test_bad_paths)
{
    for (size_t i = 0; i < NELEM(bad_paths); i++)
        check_bad(&bad_paths[i]);
}
END_TEST

START_TEST(test_bad_hosts)
{
    for (size_t i = 0; i < NELEM(bad_hosts); i++)
        check_bad(&bad_hosts[i]);
}
END_TEST

/* Offsets that have exactly one sensible value. */
START_TEST(test_exact_offsets)
{
    struct rt_error err;

    ck_assert_int_eq(rt_pattern_check("/users/{id", &err), -1);
    ck_assert_int_eq(err.code, RT_EINVAL);
    ck_assert_uint_eq(err.offset, 7);

    ck_assert_int_eq(rt_pattern_check("/a/b/{x}/{yy", &err), -1);
    ck_assert_uint_eq(err.offset, 9);

    ck_assert_int_eq(rt_pattern_check("/a}b", &err), -1);
    ck_assert_uint_eq(err.offset, 2);

    ck_assert_int_eq(rt_pattern_check("/x/{a}y", &err), -1);
    ck_assert_uint_eq(err.offset, 6);

    /* an infix catch-all is valid since issue 14, but it still ends its segment */
    ck_assert_int_eq(rt_pattern_check("/x/*{a}/y", &err), 0);
    ck_assert_int_eq(rt_pattern_check("/x/*{a}y/z", &err), -1);
    ck_assert_uint_eq(err.offset, 7);
    /* nor may a catch-all follow a catch-all (fox: consecutive catch-alls) */
    ck_assert_int_eq(rt_pattern_check("/foo/*{args}/*{param}", &err), -1);
    ck_assert_uint_eq(err.offset, 13);
    ck_assert_ptr_nonnull(strstr(err.msg, "a catch-all right after a catch-all"));

    ck_assert_int_eq(rt_pattern_check("/ab cd", &err), -1);
    ck_assert_uint_eq(err.offset, 3);

    ck_assert_int_eq(rt_pattern_check("api.example.com:80/x", &err), -1);
    ck_assert_uint_eq(err.offset, 15);
}
END_TEST

START_TEST(test_good)
{
    for (size_t i = 0; i < NELEM(good); i++) {
        struct rt_error err;
        memset(&err, 0, sizeof(err));
        int rc = rt_pattern_check(good[i], &err);
        ck_assert_msg(rc == 0, "'%s' refused: code %d offset %zu: %s", good[i], (int)err.code,
                      err.offset, err.msg);
    }
}
END_TEST

/* Length limits: pattern 4096 bytes, host 253 bytes, label 63 bytes. */
START_TEST(test_limits)
{
    char *p = malloc(4200);
    struct rt_error err;
    int rc;

    ck_assert_ptr_nonnull(p);
    /* exactly 4096 bytes is fine, 4097 is too long */
    p[0] = '/';
    memset(p + 1, 'a', 4095);
    p[4096] = '\0';
    rc = rt_pattern_check(p, &err);
    ck_assert_msg(rc == 0, "4096-byte pattern refused: %s", err.msg);

    /* label of 63 ok, 64 bad */
    memset(p, 'a', 63);
    strcpy(p + 63, ".com/x");
    rc = rt_pattern_check(p, &err);
    ck_assert_msg(rc == 0, "63-byte label refused: %s", err.msg);
    memset(p, 'a', 64);
    strcpy(p + 64, ".com/x");
    rc = rt_pattern_check(p, &err);
    check_error("<64-byte label>", rc, &err, 0, 64, "label longer than 63 bytes");

    /* host of 253 ok (63.63.63.61), 254 bad (63.63.63.62) */
    memset(p, 'a', 253);
    p[63] = p[127] = p[191] = '.';
    strcpy(p + 253, "/x");
    ck_assert_uint_eq(strchr(p, '/') - p, 253);
    rc = rt_pattern_check(p, &err);
    ck_assert_msg(rc == 0, "253-byte host refused: %s", err.msg);
    memset(p, 'b', 254);
    p[63] = p[127] = p[191] = '.';
    strcpy(p + 254, "/x");
    rc = rt_pattern_check(p, &err);
    check_error("<254-byte host>", rc, &err, 0, 254, "host longer than 253 bytes");
    free(p);
}
END_TEST

/* SEMANTICS.md lists "patterns longer than 4096 bytes" among the RT_EINVAL
 * errors (router.h's comment on RT_ELIMIT says "pattern too long"). */
START_TEST(test_too_long)
{
    char *p = malloc(4200);
    struct rt_error err;
    int rc;

    ck_assert_ptr_nonnull(p);
    p[0] = '/';
    memset(p + 1, 'a', 4096);
    p[4097] = '\0';
    rc = rt_pattern_check(p, &err);
    check_error("<4097 bytes>", rc, &err, 0, 4097, "pattern longer than 4096 bytes");
    free(p);
}
END_TEST

/* rt_txn_insert refuses what rt_pattern_check refuses, with the same offset,
 * and leaves the transaction as it was. */
START_TEST(test_insert_refuses)
{
    rt_table *empty = rt_table_new(NULL, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);
    const char *get[] = {"GET"};
    struct rt_error e0;

    ck_assert_ptr_nonnull(tx);
    ck_assert_int_eq(rt_txn_insert(tx, get, 1, "/ok", NULL, (void *)1, &e0), 0);
    for (size_t i = 0; i < NELEM(bad_paths) + NELEM(bad_hosts); i++) {
        const struct bad *b =
            i < NELEM(bad_paths) ? &bad_paths[i] : &bad_hosts[i - NELEM(bad_paths)];
        struct rt_error e1, e2;
        int rc1 = rt_pattern_check(b->pattern, &e1);
        int rc2 = rt_txn_insert(tx, get, 1, b->pattern, "bad", (void *)2, &e2);
        check_error(b->pattern, rc2, &e2, b->lo, b->hi, b->why);
        ck_assert_int_eq(rc1, rc2);
        ck_assert_msg(e1.offset == e2.offset, "'%s': check offset %zu, insert offset %zu",
                      b->pattern, e1.offset, e2.offset);
    }
    t = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(rt_table_count(t), 1);
    rt_table_free(t);
    /* each good pattern on its own (some have the same shape) */
    for (size_t i = 0; i < NELEM(good); i++) {
        struct rt_error err;
        tx = rt_txn_begin(empty);
        int rc = rt_txn_insert(tx, get, 1, good[i], NULL, (void *)(intptr_t)(i + 10), &err);
        ck_assert_msg(rc == 0, "insert '%s': code %d: %s", good[i], (int)err.code, err.msg);
        t = rt_txn_commit(tx);
        ck_assert_uint_eq(rt_table_count(t), 1);
        rt_table_free(t);
    }
    rt_table_free(empty);
}
END_TEST

START_TEST(test_bad_methods)
{
    rt_table *empty = rt_table_new(NULL, NULL);
    rt_txn *tx = rt_txn_begin(empty);
    const char *const bad[][2] = {
        {"", NULL}, {"GE T", NULL}, {"GET\r", NULL}, {"GET", "P\nOST"}, {"GET", ""}};
    struct rt_error err;

    for (size_t i = 0; i < NELEM(bad); i++) {
        size_t n = bad[i][1] ? 2 : 1;
        memset(&err, 0, sizeof(err));
        ck_assert_int_eq(rt_txn_insert(tx, bad[i], n, "/x", NULL, NULL, &err), -1);
        ck_assert_msg(err.code == RT_EINVAL, "method set %zu: code %d", i, (int)err.code);
        ck_assert_uint_gt(strlen(err.msg), 0);
    }
    rt_txn_abort(tx);
    rt_table_free(empty);
}
END_TEST

/* Known methods have fixed bits; other tokens take the 55 bits left. */
START_TEST(test_method_limit)
{
    rt_table *empty = rt_table_new(NULL, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);
    struct rt_error err;
    size_t ok = 0;
    int rc = 0;

    for (size_t i = 0; i < 100 && rc == 0; i++) {
        char m[16], path[32];
        const char *ms[1] = {m};
        snprintf(m, sizeof(m), "X%zu", i);
        snprintf(path, sizeof(path), "/m%zu", i);
        rc = rt_txn_insert(tx, ms, 1, path, NULL, NULL, &err);
        if (rc == 0)
            ok++;
    }
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(err.code, RT_ELIMIT);
    ck_assert_uint_eq(ok, 64 - 9);
    /* the known methods still work */
    const char *get[] = {"GET", "PATCH", "TRACE"};
    ck_assert_int_eq(rt_txn_insert(tx, get, 3, "/known", NULL, NULL, &err), 0);
    t = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(rt_table_count(t), ok + 1);
    ck_assert_uint_ne(rt_method_bit(t, "X54", 3), 0);
    ck_assert_uint_eq(rt_method_bit(t, "X55", 3), 0);
    rt_table_free(t);
    rt_table_free(empty);
}
END_TEST

/* The registered pattern is kept as given; params are counted over host and
 * path in pattern order. */
START_TEST(test_route_accessors)
{
    const char *lines[] = {"GET api.example.com/u/{id}", "GET {t}.example.com/v/{a}/*{rest}"};
    rt_table *t = rtest_build(NULL, lines, 2);
    struct rtest_res r;

    ck_assert_int_eq(rtest_lookup(t, "GET", "API.example.com", "/u/1", &r), RT_HIT);
    ck_assert_str_eq(rt_route_pattern(r.m.route), "api.example.com/u/{id}");
    ck_assert_ptr_null(rt_route_name(r.m.route));
    ck_assert_uint_eq(rt_route_nparams(r.m.route), 1);
    ck_assert_str_eq(rt_route_param_name(r.m.route, 0), "id");

    ck_assert_int_eq(rtest_lookup(t, "GET", "acme.example.com", "/v/x/y/z", &r), RT_HIT);
    ck_assert_uint_eq(rt_route_nparams(r.m.route), 3);
    ck_assert_str_eq(rt_route_param_name(r.m.route, 0), "t");
    ck_assert_str_eq(rt_route_param_name(r.m.route, 1), "a");
    ck_assert_str_eq(rt_route_param_name(r.m.route, 2), "rest");
    ck_assert_uint_eq(rt_table_max_params(t), 3);
    rt_table_free(t);
}
END_TEST

START_TEST(test_route_name_copied)
{
    rt_table *empty = rt_table_new(NULL, NULL), *t;
    rt_txn *tx = rt_txn_begin(empty);
    const char *get[] = {"GET"};
    char name[16] = "users-route";
    struct rtest_res r;
    struct rt_error err;

    ck_assert_int_eq(rt_txn_insert(tx, get, 1, "/users", name, NULL, &err), 0);
    memset(name, 'X', sizeof(name) - 1);
    t = rt_txn_commit(tx);
    ck_assert_int_eq(rtest_lookup(t, "GET", NULL, "/users", &r), RT_HIT);
    ck_assert_str_eq(rt_route_name(r.m.route), "users-route");
    rt_table_free(t);
    rt_table_free(empty);
}
END_TEST

static Suite *pattern_suite(void)
{
    Suite *s = suite_create("router_pattern");
    TCase *tc = tcase_create("pattern");

    tcase_add_test(tc, test_bad_paths);
    tcase_add_test(tc, test_bad_hosts);
    tcase_add_test(tc, test_exact_offsets);
    tcase_add_test(tc, test_good);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_too_long);
    tcase_add_test(tc, test_insert_refuses);
    tcase_add_test(tc, test_bad_methods);
    tcase_add_test(tc, test_method_limit);
    tcase_add_test(tc, test_route_accessors);
    tcase_add_test(tc, test_route_name_copied);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pattern_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
