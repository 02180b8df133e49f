/*
 * test_match.c - lookups (router/match.c) and the writing rules they rely on
 * (router/table.c): each pattern form with the fox README examples, priority
 * and backtracking, parameters, hosts, methods (405, any-method, HEAD, custom
 * tokens, auto OPTIONS), trailing-slash modes, conflicts, update and delete,
 * rt_methods_format and the params capacity.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "rtest.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static rt_table *build_opts(enum rt_trailing_slash ts, int auto_options, const char *const *lines,
                            size_t n)
{
    struct rt_options o = {ts, auto_options};
    return rtest_build(&o, lines, n);
}

#define BUILD(lines) rtest_build(NULL, (lines), NELEM(lines))

/* ---- each pattern form (fox README) ---- */

START_TEST(test_named_param)
{
    const char *lines[] = {"GET /avengers/{name}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/avengers/ironman", 1);
    NPARAMS(1);
    PARAM(0, "name", "ironman");
    HIT(t, "GET", NULL, "/avengers/thor", 1);
    PARAM(0, "name", "thor");
    MISS(t, "GET", NULL, "/avengers/hulk/angry");
    MISS(t, "GET", NULL, "/avengers/");
    MISS(t, "GET", NULL, "/avengers");
    MISS(t, "GET", NULL, "/avenger/thor");
    rt_table_free(t);
}
END_TEST

START_TEST(test_prefix_param)
{
    const char *lines[] = {"GET /users/uuid:{id}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/uuid:123", 1);
    NPARAMS(1);
    PARAM(0, "id", "123");
    MISS(t, "GET", NULL, "/users/uuid");
    MISS(t, "GET", NULL, "/users/uuid:");
    MISS(t, "GET", NULL, "/users/uuid:1/x");
    MISS(t, "GET", NULL, "/users/uuix:1");
    rt_table_free(t);
}
END_TEST

START_TEST(test_catchall)
{
    const char *lines[] = {"GET /src/*{filepath}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/src/", 1);
    NPARAMS(1);
    PARAM(0, "filepath", "");
    HIT(t, "GET", NULL, "/src/conf.txt", 1);
    PARAM(0, "filepath", "conf.txt");
    HIT(t, "GET", NULL, "/src/dir/config.txt", 1);
    PARAM(0, "filepath", "dir/config.txt");
    HIT(t, "GET", NULL, "/src/a//b/", 1);
    PARAM(0, "filepath", "a//b/");
    MISS(t, "GET", NULL, "/src");
    MISS(t, "GET", NULL, "/srcx/a");
    rt_table_free(t);
}
END_TEST

START_TEST(test_catchall_prefix)
{
    const char *lines[] = {"GET /src/file=*{path}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/src/file=", 1);
    PARAM(0, "path", "");
    HIT(t, "GET", NULL, "/src/file=config.txt", 1);
    PARAM(0, "path", "config.txt");
    HIT(t, "GET", NULL, "/src/file=/dir/config.txt", 1);
    PARAM(0, "path", "/dir/config.txt");
    MISS(t, "GET", NULL, "/src/file");
    MISS(t, "GET", NULL, "/src/");
    MISS(t, "GET", NULL, "/src/fil=x");
    rt_table_free(t);
}
END_TEST

/* /fs/avengers.txt, /fs/{filename} and /fs/ *{filepath} each win where they
 * should, whatever the insertion order. */
START_TEST(test_fs_trio)
{
    static const char *const trio[] = {"GET /fs/avengers.txt", "GET /fs/{filename}",
                                       "GET /fs/*{filepath}"};
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

    for (size_t p = 0; p < 6; p++) {
        const char *lines[3];
        intptr_t id[3]; /* udata of trio[k] */
        struct rtest_res r;
        for (size_t k = 0; k < 3; k++) {
            lines[k] = trio[perms[p][k]];
            id[perms[p][k]] = (intptr_t)k + 1;
        }
        rt_table *t = rtest_build(NULL, lines, 3);
        HIT(t, "GET", NULL, "/fs/avengers.txt", id[0]);
        NPARAMS(0);
        HIT(t, "GET", NULL, "/fs/ironman.txt", id[1]);
        PARAM(0, "filename", "ironman.txt");
        HIT(t, "GET", NULL, "/fs/avengers.txtx", id[1]);
        PARAM(0, "filename", "avengers.txtx");
        HIT(t, "GET", NULL, "/fs/avengers.tx", id[1]);
        HIT(t, "GET", NULL, "/fs/", id[2]);
        PARAM(0, "filepath", "");
        HIT(t, "GET", NULL, "/fs/a/b", id[2]);
        PARAM(0, "filepath", "a/b");
        HIT(t, "GET", NULL, "/fs/avengers.txt/", id[2]);
        PARAM(0, "filepath", "avengers.txt/");
        HIT(t, "GET", NULL, "/fs/avengers.txt/x", id[2]);
        PARAM(0, "filepath", "avengers.txt/x");
        MISS(t, "GET", NULL, "/fs");
        rt_table_free(t);
    }
}
END_TEST

START_TEST(test_params_coexist)
{
    const char *lines[] = {"GET /users/{id}", "GET /users/{name}/profile"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/42", 1);
    NPARAMS(1);
    PARAM(0, "id", "42");
    HIT(t, "GET", NULL, "/users/bob/profile", 2);
    NPARAMS(1);
    PARAM(0, "name", "bob");
    MISS(t, "GET", NULL, "/users/bob/other");
    MISS(t, "GET", NULL, "/users/bob/");
    MISS(t, "GET", NULL, "/users//profile");
    rt_table_free(t);
}
END_TEST

/* ---- priority and backtracking ---- */

START_TEST(test_backtracking)
{
    const char *lines[] = {
        "GET /a/b/c",                /* 1 */
        "GET /a/{x}/d",              /* 2 */
        "GET /foo/bar/baz",          /* 3 */
        "GET /foo/{p}/qux",          /* 4 */
        "GET /foo/*{rest}",          /* 5 */
        "GET /f/a{x}",               /* 6 */
        "GET /f/{n}",                /* 7 */
        "GET /g/a{x}/z",             /* 8 */
        "GET /g/{n}/y",              /* 9 */
        "GET /e/x",                  /* 10 */
        "GET /e/x*{c}",              /* 11 */
        "GET /e/",                   /* 12 */
        "GET /e/*{c}",               /* 13 */
        "GET /x/{a}/y",              /* 14 */
        "GET /x/*{c}",               /* 15 */
        "GET /ab/c",                 /* 16 */
        "GET /{x}/d",                /* 17 */
        "GET /api/v1/users",         /* 18 */
        "GET /api/{ver}/users/{id}", /* 19 */
        "GET /deep/a/b/c/d",         /* 20 */
        "GET /deep/{p1}/b/c/e",      /* 21 */
        "GET /deep/a/{p2}/c/f",      /* 22 */
    };
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/a/b/c", 1);
    HIT(t, "GET", NULL, "/a/b/d", 2); /* static b dead-ends: back to {x} */
    PARAM(0, "x", "b");
    HIT(t, "GET", NULL, "/a/c/d", 2);
    PARAM(0, "x", "c");
    MISS(t, "GET", NULL, "/a/b/");
    HIT(t, "GET", NULL, "/foo/bar/baz", 3);
    HIT(t, "GET", NULL, "/foo/bar/qux", 4);
    PARAM(0, "p", "bar");
    HIT(t, "GET", NULL, "/foo/bar/zzz", 5);
    PARAM(0, "rest", "bar/zzz");
    HIT(t, "GET", NULL, "/foo/x/qux", 4);
    HIT(t, "GET", NULL, "/foo/", 5);
    PARAM(0, "rest", "");
    MISS(t, "GET", NULL, "/foo");
    HIT(t, "GET", NULL, "/f/ab", 6);
    PARAM(0, "x", "b");
    HIT(t, "GET", NULL, "/f/a", 7); /* a{x} needs a non-empty x */
    PARAM(0, "n", "a");
    HIT(t, "GET", NULL, "/f/b", 7);
    HIT(t, "GET", NULL, "/f/d", 7); /* static f beats {x} of /{x}/d */
    PARAM(0, "n", "d");
    HIT(t, "GET", NULL, "/g/ab/y", 9); /* a{x} matches ab but /z does not follow */
    PARAM(0, "n", "ab");
    HIT(t, "GET", NULL, "/g/ab/z", 8);
    PARAM(0, "x", "b");
    MISS(t, "GET", NULL, "/g/a/z");
    HIT(t, "GET", NULL, "/e/x", 10); /* pattern ended < catch-all matching "" */
    HIT(t, "GET", NULL, "/e/xy", 11);
    PARAM(0, "c", "y");
    HIT(t, "GET", NULL, "/e/", 12);
    HIT(t, "GET", NULL, "/e/q", 13);
    PARAM(0, "c", "q");
    HIT(t, "GET", NULL, "/e/x/", 11);
    PARAM(0, "c", "/");
    HIT(t, "GET", NULL, "/x/b/y", 14);
    PARAM(0, "a", "b");
    HIT(t, "GET", NULL, "/x/b/z", 15);
    PARAM(0, "c", "b/z");
    HIT(t, "GET", NULL, "/x/b", 15);
    HIT(t, "GET", NULL, "/ab/c", 16);
    HIT(t, "GET", NULL, "/ab/d", 17);
    PARAM(0, "x", "ab");
    HIT(t, "GET", NULL, "/a/d", 17);
    PARAM(0, "x", "a");
    HIT(t, "GET", NULL, "/api/v1/users", 18);
    HIT(t, "GET", NULL, "/api/v1/users/5", 19);
    PARAM(0, "ver", "v1");
    PARAM(1, "id", "5");
    MISS(t, "GET", NULL, "/api/v2/users");
    HIT(t, "GET", NULL, "/deep/a/b/c/d", 20);
    HIT(t, "GET", NULL, "/deep/a/b/c/e", 21);
    PARAM(0, "p1", "a");
    HIT(t, "GET", NULL, "/deep/a/b/c/f", 22);
    PARAM(0, "p2", "b");
    MISS(t, "GET", NULL, "/deep/a/b/c/g");
    rt_table_free(t);
}
END_TEST

START_TEST(test_prefix_vs_param)
{
    const char *lines[] = {"GET /users/uuid:{id}", "GET /users/{name}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/uuid:1", 1);
    PARAM(0, "id", "1");
    HIT(t, "GET", NULL, "/users/uuid", 2);
    PARAM(0, "name", "uuid");
    HIT(t, "GET", NULL, "/users/uuid:", 2);
    PARAM(0, "name", "uuid:");
    HIT(t, "GET", NULL, "/users/uuidx", 2);
    rt_table_free(t);
}
END_TEST

/* Only routes that take the method compete: a more specific route of another
 * method does not hide a less specific one that takes it. */
START_TEST(test_method_aware_backtracking)
{
    const char *lines[] = {"GET /users/{id}", "POST /users/admin", "GET /s/{x}",
                           "* /s/static",     "HEAD /t/{x}",       "GET /t/static"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/users/admin", 1);
    PARAM(0, "id", "admin");
    HIT(t, "POST", NULL, "/users/admin", 2);
    HIT(t, "HEAD", NULL, "/users/admin", 1);
    EXPECT(t, "PUT", NULL, "/users/admin", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET | RT_M_POST);
    EXPECT(t, "PUT", NULL, "/users/x", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET);
    /* the more specific shape wins over the more exact method */
    HIT(t, "GET", NULL, "/s/static", 4);
    HIT(t, "GET", NULL, "/s/other", 3);
    HIT(t, "HEAD", NULL, "/t/static", 6);
    HIT(t, "HEAD", NULL, "/t/other", 5);
    rt_table_free(t);
}
END_TEST

/* ---- parameters ---- */

START_TEST(test_params_values)
{
    const char *lines[] = {"GET /{a}/{b}/*{c}", "GET {t}.example.com/u/{id}/*{rest}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    const char *path = "/x/yy/z/w";
    const char *host = "Acme.example.com:8080";

    ck_assert_uint_eq(rt_table_max_params(t), 3);
    HIT(t, "GET", NULL, path, 1);
    NPARAMS(3);
    PARAM(0, "a", "x");
    PARAM(1, "b", "yy");
    PARAM(2, "c", "z/w");
    /* values are slices of the path given */
    ck_assert_ptr_eq(r.params[0].value, path + 1);
    ck_assert_ptr_eq(r.params[1].value, path + 3);
    ck_assert_ptr_eq(r.params[2].value, path + 6);

    path = "/u/7/r/s";
    HIT(t, "GET", host, path, 2);
    NPARAMS(3);
    PARAM(0, "t", "Acme"); /* host params first, as written in H */
    PARAM(1, "id", "7");
    PARAM(2, "rest", "r/s");
    ck_assert_ptr_eq(r.params[0].value, host);
    ck_assert_ptr_eq(r.params[1].value, path + 3);
    /* host-less route when no host */
    HIT(t, "GET", NULL, "/u/7/r/s", 1);
    PARAM(0, "a", "u");
    rt_table_free(t);
}
END_TEST

/* The params array needs exactly rt_table_max_params entries (host + path). */
START_TEST(test_max_params)
{
    const char *lines[] = {"GET /a", "GET /b/{x}/{y}", "GET {h}.example.com/c/{a}/{b}/{c}/*{d}"};
    const char *none[] = {"GET /a", "POST /b"};
    rt_table *t = BUILD(lines), *t0 = BUILD(none);
    struct rt_param params[5];
    struct rt_match m;
    const char *host = "w.example.com", *path = "/c/1/2/3/4/5";
    struct rtest_res r;

    ck_assert_uint_eq(rt_table_max_params(t), 5);
    ck_assert_uint_eq(rt_table_max_params(t0), 0);
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(rt_lookup(t, "GET", 3, host, strlen(host), path, strlen(path), params, 5, &m),
                     RT_HIT);
    ck_assert_uint_eq(m.nparams, 5);
    ck_assert_str_eq(params[0].name, "h");
    ck_assert_str_eq(params[4].name, "d");
    ck_assert_uint_eq(params[4].len, 3);
    ck_assert_int_eq(memcmp(params[4].value, "4/5", 3), 0);
    HIT(t0, "POST", NULL, "/b", 2);
    NPARAMS(0);
    rt_table_free(t);
    rt_table_free(t0);
}
END_TEST

/* ---- hosts ---- */

START_TEST(test_host_exact)
{
    const char *lines[] = {"GET api.example.com/x"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", "api.example.com", "/x", 1);
    NPARAMS(0);
    HIT(t, "GET", "API.Example.COM", "/x", 1);
    HIT(t, "GET", "api.example.com:8080", "/x", 1);
    HIT(t, "GET", "api.example.com.", "/x", 1);
    HIT(t, "GET", "Api.Example.Com.:443", "/x", 1);
    MISS(t, "GET", "other.com", "/x");
    MISS(t, "GET", NULL, "/x");
    MISS(t, "GET", "", "/x");
    MISS(t, "GET", "api.example.com..", "/x");
    MISS(t, "GET", "xapi.example.com", "/x");
    MISS(t, "GET", "api.example.co", "/x");
    MISS(t, "GET", "api.example.com", "/y");
    rt_table_free(t);
}
END_TEST

START_TEST(test_host_params)
{
    const char *lines[] = {"GET {tenant}.example.com/x", "GET api-{region}.example.com/y",
                           "GET {h}/ip"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", "acme.example.com", "/x", 1);
    NPARAMS(1);
    PARAM(0, "tenant", "acme");
    HIT(t, "GET", "Acme.Example.com", "/x", 1);
    PARAM(0, "tenant", "Acme");
    HIT(t, "GET", "api-eu.example.com", "/x", 1);
    PARAM(0, "tenant", "api-eu");
    HIT(t, "GET", "acme.example.com:80", "/x", 1);
    PARAM(0, "tenant", "acme");
    MISS(t, "GET", "a.b.example.com", "/x");
    MISS(t, "GET", ".example.com", "/x");
    MISS(t, "GET", "example.com", "/x");

    HIT(t, "GET", "api-eu.example.com", "/y", 2);
    PARAM(0, "region", "eu");
    HIT(t, "GET", "API-EU.example.com", "/y", 2);
    PARAM(0, "region", "EU");
    MISS(t, "GET", "api-.example.com", "/y");
    MISS(t, "GET", "apieu.example.com", "/y");

    HIT(t, "GET", "[::1]:8080", "/ip", 3);
    PARAM(0, "h", "[::1]");
    HIT(t, "GET", "[::1]", "/ip", 3);
    PARAM(0, "h", "[::1]");
    HIT(t, "GET", "localhost:80", "/ip", 3);
    PARAM(0, "h", "localhost");
    HIT(t, "GET", "localhost.", "/ip", 3);
    PARAM(0, "h", "localhost");
    MISS(t, "GET", "127.0.0.1:8080", "/ip");
    MISS(t, "GET", NULL, "/ip");
    rt_table_free(t);
}
END_TEST

START_TEST(test_host_priority)
{
    struct rtest_res r;
    {
        const char *lines[] = {"GET /x", "GET api.example.com/x"};
        rt_table *t = BUILD(lines);
        HIT(t, "GET", "api.example.com", "/x", 2);
        HIT(t, "GET", "API.example.com:80", "/x", 2);
        HIT(t, "GET", "other.com", "/x", 1);
        HIT(t, "GET", NULL, "/x", 1);
        HIT(t, "GET", "", "/x", 1);
        rt_table_free(t);
    }
    {
        /* a host route beats a more specific host-less one */
        const char *lines[] = {"GET /y/static", "GET api.example.com/y/{p}"};
        rt_table *t = BUILD(lines);
        HIT(t, "GET", "api.example.com", "/y/static", 2);
        PARAM(0, "p", "static");
        HIT(t, "GET", NULL, "/y/static", 1);
        MISS(t, "GET", NULL, "/y/other");
        rt_table_free(t);
    }
    {
        /* fall back to host-less when the host route's path does not match */
        const char *lines[] = {"GET api.example.com/only", "GET /other", "GET /only/{x}",
                               "GET api.example.com/p/{x}/q", "GET /p/{x}/*{r}"};
        rt_table *t = BUILD(lines);
        HIT(t, "GET", "api.example.com", "/other", 2);
        HIT(t, "GET", "api.example.com", "/only", 1);
        HIT(t, "GET", "api.example.com", "/only/z", 3);
        HIT(t, "GET", "api.example.com", "/p/1/q", 4);
        HIT(t, "GET", "api.example.com", "/p/1/z", 5);
        PARAM(0, "x", "1");
        PARAM(1, "r", "z");
        MISS(t, "GET", NULL, "/only");
        rt_table_free(t);
    }
    {
        /* between host routes the host is compared first, then the path */
        const char *lines[] = {"GET api.example.com/{p}", "GET {t}.example.com/static",
                               "GET api.example.com/a", "GET {t}.example.com/b"};
        rt_table *t = BUILD(lines);
        HIT(t, "GET", "api.example.com", "/static", 1);
        PARAM(0, "p", "static");
        HIT(t, "GET", "foo.example.com", "/static", 2);
        PARAM(0, "t", "foo");
        HIT(t, "GET", "api.example.com", "/zzz", 1);
        MISS(t, "GET", "foo.example.com", "/zzz");
        HIT(t, "GET", "api.example.com", "/a", 3);
        HIT(t, "GET", "api.example.com", "/b", 1); /* api.example.com/{p} beats {t}.../b */
        HIT(t, "GET", "foo.example.com", "/b", 4);
        rt_table_free(t);
    }
    {
        /* fall back from one host route to another */
        const char *lines[] = {"GET api.example.com/a", "GET {t}.example.com/b"};
        rt_table *t = BUILD(lines);
        HIT(t, "GET", "api.example.com", "/b", 2);
        PARAM(0, "t", "api");
        rt_table_free(t);
    }
    {
        /* 405 takes every route that matches host and path */
        const char *lines[] = {"GET api.example.com/m", "POST /m"};
        rt_table *t = BUILD(lines);
        EXPECT(t, "PUT", "api.example.com", "/m", RT_NOT_ALLOWED, 0);
        ALLOW(t, RT_M_GET | RT_M_POST);
        HIT(t, "POST", "api.example.com", "/m", 2);
        HIT(t, "GET", "api.example.com", "/m", 1);
        EXPECT(t, "GET", NULL, "/m", RT_NOT_ALLOWED, 0);
        ALLOW(t, RT_M_POST);
        rt_table_free(t);
    }
}
END_TEST

/* ---- methods ---- */

START_TEST(test_not_allowed)
{
    const char *lines[] = {"GET /r", "POST /r", "PUT /r/{id}", "DELETE /r/{id}", "PURGE /cache"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    uint64_t purge = rt_method_bit(t, "PURGE", 5);
    char buf[128];

    EXPECT(t, "PATCH", NULL, "/r", RT_NOT_ALLOWED, 0);
    ck_assert_uint_eq(r.m.allow & ~RT_M_HEAD, RT_M_GET | RT_M_POST);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST");
    EXPECT(t, "GET", NULL, "/r/1", RT_NOT_ALLOWED, 0);
    ck_assert_uint_eq(r.m.allow, RT_M_PUT | RT_M_DELETE);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "PUT, DELETE");
    EXPECT(t, "GET", NULL, "/cache", RT_NOT_ALLOWED, 0);
    ck_assert_uint_ne(purge, 0);
    ck_assert_uint_eq(r.m.allow, purge);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "PURGE");
    HIT(t, "PURGE", NULL, "/cache", 5);
    MISS(t, "GET", NULL, "/nothing");
    MISS(t, "PURGE", NULL, "/nothing");
    rt_table_free(t);
}
END_TEST

START_TEST(test_any_method_and_head)
{
    const char *lines[] = {"* /any",   "* /both", "GET /both", "GET /hh", "HEAD /hh", "GET /h",
                           "HEAD /ho", "* /z",    "HEAD /z",   "* /w",    "GET /w",   "HEAD /w"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    char buf[64];

    HIT(t, "PATCH", NULL, "/any", 1);
    HIT(t, "FOO", NULL, "/any", 1); /* a token no route names */
    HIT(t, "GET", NULL, "/any", 1);
    HIT(t, "OPTIONS", NULL, "/any", 1);
    HIT(t, "GET", NULL, "/both", 3);
    HIT(t, "POST", NULL, "/both", 2);
    HIT(t, "HEAD", NULL, "/both", 3); /* GET route before the any-method one */
    HIT(t, "HEAD", NULL, "/hh", 5);   /* explicit HEAD preferred */
    HIT(t, "GET", NULL, "/hh", 4);
    EXPECT(t, "POST", NULL, "/hh", RT_NOT_ALLOWED, 0);
    ck_assert_uint_eq(r.m.allow, RT_M_GET | RT_M_HEAD);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD");
    HIT(t, "HEAD", NULL, "/h", 6); /* HEAD served by the GET route */
    EXPECT(t, "POST", NULL, "/h", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD");
    EXPECT(t, "GET", NULL, "/ho", RT_NOT_ALLOWED, 0); /* HEAD does not serve GET */
    ck_assert_uint_eq(r.m.allow, RT_M_HEAD);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "HEAD");
    HIT(t, "HEAD", NULL, "/z", 9);
    HIT(t, "GET", NULL, "/z", 8);
    HIT(t, "HEAD", NULL, "/w", 12);
    HIT(t, "GET", NULL, "/w", 11);
    HIT(t, "DELETE", NULL, "/w", 10);
    ck_assert_uint_eq(rt_route_methods(r.m.route), RT_ANY_METHOD);
    rt_table_free(t);
}
END_TEST

START_TEST(test_custom_methods)
{
    const char *lines[] = {"PURGE /cache", "PURGE,GET /both", "MKCOL /dav/{x}"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    uint64_t purge = rt_method_bit(t, "PURGE", 5), mkcol = rt_method_bit(t, "MKCOL", 5);
    uint64_t known = (RT_M_PATCH << 1) - 1;
    char buf[64];

    ck_assert_uint_ne(purge, 0);
    ck_assert_uint_ne(mkcol, 0);
    ck_assert_uint_ne(purge, mkcol);
    ck_assert_uint_eq(purge & known, 0);
    ck_assert_uint_eq(mkcol & known, 0);
    ck_assert_uint_eq(purge & (purge - 1), 0); /* one bit */
    ck_assert_uint_eq(mkcol & (mkcol - 1), 0);
    ck_assert_uint_eq(rt_method_bit(t, "GET", 3), RT_M_GET);
    ck_assert_uint_eq(rt_method_bit(t, "NOPE", 4), 0);
    ck_assert_uint_eq(rt_method_bit(t, "PURGEX", 5), purge); /* mlen counts */
    ck_assert_uint_eq(rt_method_bit(t, "purge", 5), 0);      /* case-sensitive */

    HIT(t, "PURGE", NULL, "/cache", 1);
    ck_assert_uint_eq(rt_route_methods(r.m.route), purge);
    HIT(t, "GET", NULL, "/both", 2);
    HIT(t, "PURGE", NULL, "/both", 2);
    HIT(t, "HEAD", NULL, "/both", 2);
    ck_assert_uint_eq(rt_route_methods(r.m.route), purge | RT_M_GET);
    HIT(t, "MKCOL", NULL, "/dav/1", 3);
    PARAM(0, "x", "1");
    EXPECT(t, "purge", NULL, "/cache", RT_NOT_ALLOWED, 0);
    ck_assert_uint_eq(r.m.allow, purge);
    ck_assert_uint_eq(rtest_norm_mask(t, rt_table_methods(t)),
                      rtest_norm_mask(t, purge | mkcol | RT_M_GET));
    rt_methods_format(t, purge | RT_M_GET, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, PURGE");
    rt_table_free(t);
}
END_TEST

START_TEST(test_auto_options)
{
    const char *lines[] = {"GET /r", "POST /r", "OPTIONS /o", "* /any", "GET /r2/{x}"};
    rt_table *t = build_opts(RT_TS_STRICT, 1, lines, NELEM(lines));
    rt_table *off = build_opts(RT_TS_STRICT, 0, lines, NELEM(lines));
    struct rtest_res r;
    char buf[64];

    ck_assert_int_eq(rt_table_options(t)->auto_options, 1);
    EXPECT(t, "OPTIONS", NULL, "/r", RT_OPTIONS_AUTO, 0);
    /* fox: the Allow of the automatic answer lists OPTIONS itself */
    ck_assert_uint_eq(r.m.allow & ~RT_M_HEAD, RT_M_GET | RT_M_POST | RT_M_OPTIONS);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST, OPTIONS");
    HIT(t, "OPTIONS", NULL, "/o", 3);
    HIT(t, "OPTIONS", NULL, "/any", 4);
    MISS(t, "OPTIONS", NULL, "/nothing");
    EXPECT(t, "OPTIONS", NULL, "/r2/5", RT_OPTIONS_AUTO, 0);
    ALLOW(t, RT_M_GET | RT_M_OPTIONS);
    EXPECT(t, "GET", NULL, "/o", RT_NOT_ALLOWED, 0);
    ck_assert_uint_eq(r.m.allow, RT_M_OPTIONS);
    EXPECT(t, "PUT", NULL, "/r", RT_NOT_ALLOWED, 0);
    /* a 405's Allow lists OPTIONS when automatic OPTIONS is on (fox, httprouter) */
    ALLOW(t, RT_M_GET | RT_M_POST | RT_M_OPTIONS);
    rt_methods_format(t, r.m.allow, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST, OPTIONS");
    /* "OPTIONS *": every registered method, plus OPTIONS */
    EXPECT(t, "OPTIONS", NULL, "*", RT_OPTIONS_AUTO, 0);
    ck_assert_uint_eq(r.m.allow, RT_ANY_METHOD); /* "* /any" takes every method */
    MISS(t, "GET", NULL, "*");
    MISS(off, "OPTIONS", NULL, "*");
    {
        const char *two[] = {"GET /r", "PURGE /p"};
        rt_table *t2 = build_opts(RT_TS_STRICT, 1, two, NELEM(two));
        EXPECT(t2, "OPTIONS", NULL, "*", RT_OPTIONS_AUTO, 0);
        rt_methods_format(t2, r.m.allow, buf, sizeof(buf));
        ck_assert_str_eq(buf, "GET, HEAD, OPTIONS, PURGE");
        rt_table_free(t2);
    }
    {
        /* no route, no method to list: 404, as fox (issue 23) */
        rt_table *t0 = build_opts(RT_TS_STRICT, 1, NULL, 0);
        MISS(t0, "OPTIONS", NULL, "*");
        MISS(t0, "OPTIONS", NULL, "/");
        rt_table_free(t0);
    }

    EXPECT(off, "OPTIONS", NULL, "/r", RT_NOT_ALLOWED, 0);
    ALLOW(off, RT_M_GET | RT_M_POST); /* auto OPTIONS off: no OPTIONS in Allow */
    HIT(off, "OPTIONS", NULL, "/o", 3);
    MISS(off, "OPTIONS", NULL, "/nothing");
    rt_table_free(t);
    rt_table_free(off);
}
END_TEST

/* "OPTIONS *": every method any route takes. */
START_TEST(test_table_methods)
{
    const char *lines[] = {"GET /a", "POST /b", "PURGE /c", "PUT,DELETE /d/{x}"};
    const char *none[] = {"GET /a"};
    rt_table *t = BUILD(lines), *g = BUILD(none), *empty = rt_table_new(NULL, NULL);
    uint64_t purge = rt_method_bit(t, "PURGE", 5);
    char buf[128];

    ck_assert_uint_eq(rtest_norm_mask(t, rt_table_methods(t)),
                      rtest_norm_mask(t, RT_M_GET | RT_M_POST | RT_M_PUT | RT_M_DELETE | purge));
    rt_methods_format(t, rt_table_methods(t), buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST, PUT, DELETE, PURGE");
    ck_assert_uint_eq(rtest_norm_mask(g, rt_table_methods(g)), RT_M_GET | RT_M_HEAD);
    ck_assert_uint_eq(rt_table_methods(empty), 0);
    rt_table_free(t);
    rt_table_free(g);
    rt_table_free(empty);
}
END_TEST

START_TEST(test_methods_format)
{
    const char *lines[] = {"GET /a", "PURGE /b", "* /c", "POST,PUT /d"};
    rt_table *t = BUILD(lines);
    uint64_t purge = rt_method_bit(t, "PURGE", 5);
    char buf[128], small[5];

    ck_assert_uint_eq(rt_methods_format(t, RT_M_GET | RT_M_POST, buf, sizeof(buf)), 15);
    ck_assert_str_eq(buf, "GET, HEAD, POST");
    rt_methods_format(t, RT_M_GET, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD");
    rt_methods_format(t, RT_M_HEAD, buf, sizeof(buf));
    ck_assert_str_eq(buf, "HEAD");
    rt_methods_format(t, RT_M_GET | RT_M_HEAD, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD");
    rt_methods_format(t, RT_M_POST | RT_M_DELETE, buf, sizeof(buf));
    ck_assert_str_eq(buf, "POST, DELETE");
    ck_assert_uint_eq(rt_methods_format(t, 0, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "");
    rt_methods_format(t,
                      RT_M_GET | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_CONNECT | RT_M_OPTIONS |
                          RT_M_TRACE | RT_M_PATCH,
                      buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH");
    rt_methods_format(t, purge | RT_M_GET, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, PURGE");

    /* truncation: always NUL-terminated (a prefix of the full text), returns
     * the length needed */
    memset(small, 'Z', sizeof(small));
    ck_assert_uint_eq(rt_methods_format(t, RT_M_GET | RT_M_POST, small, sizeof(small)), 15);
    ck_assert_ptr_nonnull(memchr(small, '\0', sizeof(small)));
    ck_assert_int_eq(strncmp(small, "GET, HEAD, POST", strlen(small)), 0);
    memset(small, 'Z', sizeof(small));
    ck_assert_uint_eq(rt_methods_format(t, RT_M_GET | RT_M_POST, small, 0), 15);
    ck_assert_int_eq(small[0], 'Z');
    rt_table_free(t);
}
END_TEST

/* A route's own methods (router.h: "GET POST" style, "*" for any). */
START_TEST(test_route_methods_format)
{
    const char *lines[] = {"GET /a", "PURGE /b", "* /c", "POST,PUT /d", "PURGE,GET /e"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    char buf[128];

    HIT(t, "GET", NULL, "/c", 3);
    ck_assert_uint_eq(rt_route_methods_format(t, r.m.route, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "*");
    HIT(t, "GET", NULL, "/a", 1);
    rt_route_methods_format(t, r.m.route, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET");
    HIT(t, "PURGE", NULL, "/b", 2);
    rt_route_methods_format(t, r.m.route, buf, sizeof(buf));
    ck_assert_str_eq(buf, "PURGE");
    HIT(t, "PUT", NULL, "/d", 4);
    ck_assert_uint_eq(rt_route_methods_format(t, r.m.route, buf, sizeof(buf)), 8);
    ck_assert_str_eq(buf, "POST PUT");
    HIT(t, "PURGE", NULL, "/e", 5);
    rt_route_methods_format(t, r.m.route, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET PURGE");
    rt_table_free(t);
}
END_TEST

/* ---- trailing slash ---- */

static const char *const ts_lines[] = {
    "GET /a",                 /* 1 */
    "GET /b/",                /* 2 */
    "POST /p",                /* 3 */
    "GET /u/{id}",            /* 4 */
    "GET /s/*{p}",            /* 5 */
    "POST /c",                /* 6 */
    "GET /c/",                /* 7 */
    "GET,POST /d/{x}/",       /* 8 */
    "GET api.example.com/h/", /* 9 */
    "GET /",                  /* 10 */
};

START_TEST(test_slash_strict)
{
    rt_table *t = build_opts(RT_TS_STRICT, 0, ts_lines, NELEM(ts_lines));
    struct rtest_res r;

    ck_assert_int_eq(rt_table_options(t)->trailing_slash, RT_TS_STRICT);
    HIT(t, "GET", NULL, "/a", 1);
    ck_assert_int_eq(r.m.slash, 0);
    MISS(t, "GET", NULL, "/a/");
    MISS(t, "GET", NULL, "/b");
    HIT(t, "GET", NULL, "/b/", 2);
    MISS(t, "POST", NULL, "/p/");
    MISS(t, "GET", NULL, "/u/5/");
    MISS(t, "GET", NULL, "/s");
    MISS(t, "GET", "api.example.com", "/h");
    HIT(t, "GET", NULL, "/", 10);
    rt_table_free(t);
}
END_TEST

START_TEST(test_slash_redirect)
{
    rt_table *t = build_opts(RT_TS_REDIRECT, 0, ts_lines, NELEM(ts_lines));
    struct rtest_res r;

    HIT(t, "GET", NULL, "/a", 1);
    ck_assert_int_eq(r.m.slash, 0);
    EXPECT(t, "GET", NULL, "/a/", RT_REDIRECT_301, 1);
    ck_assert_int_eq(r.m.slash, -1);
    EXPECT(t, "HEAD", NULL, "/a/", RT_REDIRECT_301, 1);
    ck_assert_int_eq(r.m.slash, -1);
    EXPECT(t, "GET", NULL, "/b", RT_REDIRECT_301, 2);
    ck_assert_int_eq(r.m.slash, +1);
    EXPECT(t, "POST", NULL, "/p/", RT_REDIRECT_308, 3);
    ck_assert_int_eq(r.m.slash, -1);
    MISS(t, "GET", NULL, "/p/"); /* the twin is a 405, not a hit */
    EXPECT(t, "GET", NULL, "/u/5/", RT_REDIRECT_301, 4);
    ck_assert_int_eq(r.m.slash, -1);
    EXPECT(t, "GET", NULL, "/s", RT_REDIRECT_301, 5);
    ck_assert_int_eq(r.m.slash, +1);
    /* a route matches the path under another method: 405, no redirect */
    EXPECT(t, "GET", NULL, "/c", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_POST);
    EXPECT(t, "POST", NULL, "/c/", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET);
    EXPECT(t, "GET", NULL, "/d/x", RT_REDIRECT_301, 8);
    ck_assert_int_eq(r.m.slash, +1);
    EXPECT(t, "POST", NULL, "/d/x", RT_REDIRECT_308, 8);
    EXPECT(t, "PUT", NULL, "/d/x", RT_NOT_FOUND, 0);
    EXPECT(t, "GET", "api.example.com", "/h", RT_REDIRECT_301, 9);
    ck_assert_int_eq(r.m.slash, +1);
    HIT(t, "GET", NULL, "/", 10);
    MISS(t, "GET", NULL, "/zz/");
    MISS(t, "GET", NULL, "/zz");
    rt_table_free(t);
}
END_TEST

START_TEST(test_slash_relaxed)
{
    rt_table *t = build_opts(RT_TS_RELAXED, 0, ts_lines, NELEM(ts_lines));
    struct rtest_res r;

    HIT(t, "GET", NULL, "/a", 1);
    ck_assert_int_eq(r.m.slash, 0);
    HIT(t, "GET", NULL, "/a/", 1);
    ck_assert_int_eq(r.m.slash, -1);
    NPARAMS(0);
    HIT(t, "GET", NULL, "/b", 2);
    ck_assert_int_eq(r.m.slash, +1);
    HIT(t, "GET", NULL, "/u/5/", 4);
    ck_assert_int_eq(r.m.slash, -1);
    NPARAMS(1);
    PARAM(0, "id", "5");
    HIT(t, "GET", NULL, "/s", 5);
    ck_assert_int_eq(r.m.slash, +1);
    NPARAMS(1);
    PARAM(0, "p", "");
    HIT(t, "POST", NULL, "/p/", 3);
    ck_assert_int_eq(r.m.slash, -1);
    /* the twin counts for the 405 too (fox): POST /p matches through the slash */
    EXPECT(t, "GET", NULL, "/p/", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_POST);
    /* and a twin that takes the method is served rather than answered 405
     * (an Allow would otherwise list the request's own method) */
    HIT(t, "GET", NULL, "/c", 7);
    ck_assert_int_eq(r.m.slash, +1);
    EXPECT(t, "PUT", NULL, "/c", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET | RT_M_POST);
    HIT(t, "POST", NULL, "/d/q", 8);
    PARAM(0, "x", "q");
    ck_assert_int_eq(r.m.slash, +1);
    HIT(t, "GET", "api.example.com", "/h", 9);
    ck_assert_int_eq(r.m.slash, +1);
    MISS(t, "GET", NULL, "/zz/");
    rt_table_free(t);
}
END_TEST

/* ---- writing: conflicts, update, delete ---- */

static void expect_conflict(rt_txn *tx, const char *spec, const char *pattern, intptr_t other_id,
                            const char *other_pattern)
{
    struct rt_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = rtest_insert(tx, spec, pattern, 999, &err);
    ck_assert_msg(rc == -1 && err.code == RT_ECONFLICT, "%s %s: rc %d code %d, want conflict", spec,
                  pattern, rc, (int)err.code);
    ck_assert_msg(err.other != NULL, "%s %s: err.other is NULL", spec, pattern);
    if (other_id)
        ck_assert_msg((intptr_t)rt_route_udata(err.other) == other_id,
                      "%s %s: conflicts with %ld (%s), want %ld", spec, pattern,
                      (long)(intptr_t)rt_route_udata(err.other), rt_route_pattern(err.other),
                      (long)other_id);
    if (other_pattern)
        ck_assert_str_eq(rt_route_pattern(err.other), other_pattern);
    ck_assert_uint_gt(strlen(err.msg), 0);
}

static void expect_ok(rt_txn *tx, const char *spec, const char *pattern, intptr_t id)
{
    struct rt_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = rtest_insert(tx, spec, pattern, id, &err);
    ck_assert_msg(rc == 0, "%s %s: code %d: %s", spec, pattern, (int)err.code, err.msg);
}

START_TEST(test_conflicts)
{
    rt_table *empty = rt_table_new(NULL, NULL), *t, *t2;
    rt_txn *tx = rt_txn_begin(empty);
    struct rtest_res r;

    expect_ok(tx, "GET", "/users/{id}", 1);
    expect_conflict(tx, "GET", "/users/{name}", 1, "/users/{id}");
    expect_conflict(tx, "GET", "/users/{id}", 1, "/users/{id}");
    expect_ok(tx, "GET", "/users/{name}/profile", 2);
    expect_ok(tx, "*", "/z/{a}", 3);
    expect_ok(tx, "GET", "/z/{b}", 4); /* any-method and GET of one shape coexist */
    expect_conflict(tx, "*", "/z/{c}", 3, "/z/{a}");
    expect_ok(tx, "POST", "/z/{d}", 5);
    expect_conflict(tx, "PUT,POST", "/z/{e}", 5, NULL);
    expect_ok(tx, "GET", "/v", 6);
    expect_conflict(tx, "GET,POST", "/v", 6, "/v");
    expect_ok(tx, "POST", "/v", 7);
    expect_conflict(tx, "PUT,POST", "/v", 7, "/v");
    expect_ok(tx, "HEAD", "/v", 8); /* {GET} and {HEAD} do not intersect */
    expect_ok(tx, "GET", "api.example.com/x", 9);
    {
        /* a host pattern in upper case is refused (fox), not folded into a conflict */
        struct rt_error err;
        ck_assert_int_eq(rtest_insert(tx, "GET", "API.example.com/x", 99, &err), -1);
        ck_assert_int_eq(err.code, RT_EINVAL);
    }
    expect_ok(tx, "GET", "api.example.com/y", 10);
    expect_ok(tx, "GET", "/x", 11); /* host-less is another shape */
    expect_ok(tx, "GET", "{a}.example.com/x", 12);
    expect_conflict(tx, "GET", "{b}.example.com/x", 12, "{a}.example.com/x");
    expect_ok(tx, "GET", "/c/*{a}", 13);
    expect_conflict(tx, "GET", "/c/*{b}", 13, "/c/*{a}");
    expect_ok(tx, "GET", "/p/{a}", 14);
    expect_ok(tx, "GET", "/p/x{a}", 15);
    expect_ok(tx, "GET", "/p/*{a}", 16);
    expect_ok(tx, "PURGE", "/q", 17);
    expect_conflict(tx, "PURGE", "/q", 17, "/q");
    t = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(rt_table_count(t), 17);

    /* the conflicts left the table as it was */
    HIT(t, "GET", NULL, "/users/5", 1);
    PARAM(0, "id", "5");
    HIT(t, "GET", NULL, "/z/1", 4);
    HIT(t, "DELETE", NULL, "/z/1", 3);

    /* conflicts against the base version name the base's route */
    tx = rt_txn_begin(t);
    expect_conflict(tx, "GET", "/users/{uid}", 1, "/users/{id}");
    expect_conflict(tx, "GET,DELETE", "api.example.com/y", 10, "api.example.com/y");
    t2 = rt_txn_commit(tx);
    ck_assert_uint_eq(rt_table_count(t2), 17);
    rt_table_free(t2);
    rt_table_free(t);
    rt_table_free(empty);
}
END_TEST

START_TEST(test_update_delete)
{
    const char *lines[] = {"GET /u/{id}", "* /any", "GET,POST /m", "GET api.example.com/h"};
    rt_table *v1 = BUILD(lines), *v2, *v3;
    rt_txn *tx = rt_txn_begin(v1);
    struct rtest_res r;
    struct rt_error err;

    ck_assert_int_eq(rtest_update(tx, "GET", "/u/{uid}", 10, &err), 0);
    ck_assert_int_eq(rtest_update(tx, "GET,POST", "/u/{id}", 99, &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_update(tx, "POST", "/u/{id}", 99, &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_update(tx, "GET", "/nope", 99, &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_update(tx, "POST,GET", "/m", 11, &err), 0);
    ck_assert_int_eq(rtest_update(tx, "GET", "/m", 99, &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_update(tx, "GET", "/any", 99, &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_update(tx, "*", "/any", 12, &err), 0);
    /* host patterns are lower case (fox): an upper-case one is invalid */
    ck_assert_int_eq(rtest_update(tx, "GET", "API.EXAMPLE.com/h", 13, &err), -1);
    ck_assert_int_eq(err.code, RT_EINVAL);
    ck_assert_int_eq(rtest_update(tx, "GET", "api.example.com/h", 13, &err), 0);
    v2 = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(v2);
    ck_assert_uint_eq(rt_table_count(v2), 4);

    HIT(v2, "GET", NULL, "/u/5", 10);
    PARAM(0, "uid", "5");
    HIT(v1, "GET", NULL, "/u/5", 1);
    PARAM(0, "id", "5");
    HIT(v2, "POST", NULL, "/m", 11);
    HIT(v1, "POST", NULL, "/m", 3);
    HIT(v2, "PATCH", NULL, "/any", 12);
    HIT(v2, "GET", "api.example.com", "/h", 13);

    tx = rt_txn_begin(v2);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/nope", &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/m", &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "GET,POST,PUT", "/m", &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "POST,GET", "/m", &err), 0);
    ck_assert_int_eq(rtest_delete(tx, "POST,GET", "/m", &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/any", &err), -1);
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "*", "/any", &err), 0);
    ck_assert_int_eq(rtest_delete(tx, "GET", "/u/{x}", &err), 0); /* same shape */
    ck_assert_int_eq(rtest_delete(tx, "GET", "/h", &err), -1);    /* host-less: other shape */
    ck_assert_int_eq(err.code, RT_ENOENT);
    ck_assert_int_eq(rtest_delete(tx, "GET", "api.example.com/h", &err), 0);
    /* re-insert after delete in the same transaction */
    ck_assert_int_eq(rtest_insert(tx, "GET", "/m", 20, &err), 0);
    v3 = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(v3);
    ck_assert_uint_eq(rt_table_count(v3), 1);
    HIT(v3, "GET", NULL, "/m", 20);
    EXPECT(v3, "POST", NULL, "/m", RT_NOT_ALLOWED, 0);
    MISS(v3, "GET", NULL, "/u/5");
    MISS(v3, "PATCH", NULL, "/any");
    MISS(v3, "GET", "api.example.com", "/h");
    /* v2 still answers as before */
    HIT(v2, "GET", NULL, "/u/5", 10);
    HIT(v2, "PATCH", NULL, "/any", 12);
    rt_table_free(v2);
    HIT(v1, "GET", NULL, "/u/5", 1);
    rt_table_free(v1);
    HIT(v3, "GET", NULL, "/m", 20);
    rt_table_free(v3);
}
END_TEST

/* ---- tables and transactions ---- */

static void count_route(const rt_route *rt, void *arg)
{
    (void)rt;
    (*(size_t *)arg)++;
}

START_TEST(test_table_basics)
{
    struct rt_options o = {RT_TS_REDIRECT, 1};
    rt_table *d = rt_table_new(NULL, NULL), *t = rt_table_new(&o, NULL), *t2;
    rt_txn *tx;
    struct rtest_res r;
    struct rt_error err;
    size_t n = 0;

    rt_table_free(NULL);
    ck_assert_int_eq(rt_table_options(d)->trailing_slash, RT_TS_STRICT);
    ck_assert_int_eq(rt_table_options(d)->auto_options, 0);
    o.trailing_slash = RT_TS_STRICT; /* the table copied the options */
    ck_assert_int_eq(rt_table_options(t)->trailing_slash, RT_TS_REDIRECT);
    ck_assert_int_eq(rt_table_options(t)->auto_options, 1);
    ck_assert_uint_eq(rt_table_count(d), 0);
    ck_assert_uint_eq(rt_table_max_params(d), 0);
    MISS(d, "GET", NULL, "/");
    MISS(d, "GET", "example.com", "/x");

    /* an aborted transaction leaves no trace */
    tx = rt_txn_begin(t);
    ck_assert_int_eq(rtest_insert(tx, "GET", "/a", 1, &err), 0);
    rt_txn_abort(tx);
    ck_assert_uint_eq(rt_table_count(t), 0);
    MISS(t, "GET", NULL, "/a");

    /* options are inherited by derived versions */
    tx = rt_txn_begin(t);
    ck_assert_int_eq(rtest_insert(tx, "GET", "/a", 1, &err), 0);
    ck_assert_int_eq(rtest_insert(tx, "POST", "/b/{x}", 2, &err), 0);
    t2 = rt_txn_commit(tx);
    ck_assert_int_eq(rt_table_options(t2)->trailing_slash, RT_TS_REDIRECT);
    ck_assert_int_eq(rt_table_options(t2)->auto_options, 1);
    EXPECT(t2, "GET", NULL, "/a/", RT_REDIRECT_301, 1);
    ck_assert_uint_eq(rt_table_count(t2), 2);
    ck_assert_uint_eq(rt_table_count(t), 0);
    rt_table_foreach(t2, count_route, &n);
    ck_assert_uint_eq(n, 2);
    n = 0;
    rt_table_foreach(t, count_route, &n);
    ck_assert_uint_eq(n, 0);
    rt_table_free(t);
    rt_table_free(t2);
    rt_table_free(d);
}
END_TEST

/* ---- infix catch-alls and the catch-all label (issue 14, its examples verbatim) ---- */

START_TEST(test_infix_catchall)
{
    const char *lines[] = {"GET /assets/*{path}/thumbnail", "GET /foo/z*{args}/bar",
                           "GET /x/*{args}/bar"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/assets/photos/2021/thumbnail", 1);
    NPARAMS(1);
    PARAM(0, "path", "photos/2021");
    HIT(t, "GET", NULL, "/assets/a/thumbnail", 1);
    PARAM(0, "path", "a");
    MISS(t, "GET", NULL, "/assets/thumbnail");
    MISS(t, "GET", NULL, "/assets//thumbnail/x");
    HIT(t, "GET", NULL, "/foo/za/b/c/bar", 2);
    PARAM(0, "args", "a/b/c");
    MISS(t, "GET", NULL, "/foo/z/bar"); /* at least one byte after the prefix */
    /* at least one byte, which may be a slash: /foo///bar has args=/ */
    HIT(t, "GET", NULL, "/x///bar", 3);
    PARAM(0, "args", "/");
    MISS(t, "GET", NULL, "/x/bar");
    /* the value ends where the rest of the pattern matches to the end */
    HIT(t, "GET", NULL, "/x/a/bar/bar", 3);
    PARAM(0, "args", "a/bar");
    EXPECT(t, "POST", NULL, "/x/a/b/bar", RT_NOT_ALLOWED, 0);
    ALLOW(t, RT_M_GET);
    rt_table_free(t);
}
END_TEST

START_TEST(test_infix_priority)
{
    const char *lines[] = {"GET /foo/{ps}/bar", "GET /foo/*{args}/bar", "GET /foo/*{args}"};
    const char *issue[] = {"GET /foo/{ps}/bar", "GET /foo/*{args}/bar", "GET /foo/*{args}",
                           "GET /foo/*{args}/bar/{x}"};
    rt_table *t = BUILD(lines), *u = BUILD(issue);
    struct rtest_res r;

    HIT(t, "GET", NULL, "/foo/a/bar", 1);
    PARAM(0, "ps", "a");
    HIT(t, "GET", NULL, "/foo/a/b/c/bar", 2);
    PARAM(0, "args", "a/b/c");
    HIT(t, "GET", NULL, "/foo/a/b/c/baz", 3);
    PARAM(0, "args", "a/b/c/baz");
    /* the suffix catch-all keeps the seed's rule: it may be empty */
    HIT(t, "GET", NULL, "/foo/", 3);
    PARAM(0, "args", "");
    /* backtracking: {ps} matches "a" but its /bar does not end the path */
    HIT(t, "GET", NULL, "/foo/a/bar/baz", 3);
    HIT(u, "GET", NULL, "/foo/a/bar/baz", 4);
    PARAM(0, "args", "a");
    PARAM(1, "x", "baz");
    HIT(u, "GET", NULL, "/foo/a/b/bar/baz", 4);
    PARAM(0, "args", "a/b");
    rt_table_free(t);
    rt_table_free(u);
}
END_TEST

/* Three infix catch-alls and a path of 3000 segments: 4.5e9 ways to split
 * it, but one walk tries at most 4096 infix values, so the lookup returns
 * (Check's 4 s timeout fails the test otherwise); short paths still match.
 * (Two catch-alls in a row are refused, as fox refuses them: each is
 * followed by a static segment here.) */
START_TEST(test_infix_budget)
{
    const char *lines[] = {"GET /a/*{x}/c/*{y}/c/*{z}/b"};
    rt_table *t = BUILD(lines);
    struct rtest_res r;
    size_t n = 3000, len = 0;
    char *path = malloc(2 * n + 8);

    ck_assert_ptr_nonnull(path);
    len += (size_t)sprintf(path, "/a");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(path + len, "/c");
    sprintf(path + len, "/d");
    MISS(t, "GET", NULL, path);
    HIT(t, "GET", NULL, "/a/1/c/2/c/3/b", 1);
    PARAM(0, "x", "1");
    PARAM(1, "y", "2");
    PARAM(2, "z", "3");
    HIT(t, "GET", NULL, "/a/1/c/2/c/3/4/b", 1);
    PARAM(2, "z", "3/4");
    free(path);
    rt_table_free(t);
}
END_TEST

START_TEST(test_host_catchall)
{
    const char *lines[] = {
        "GET *{any}.example.com/path",       /* 1 */
        "GET api.example.com/x",             /* 2 */
        "GET {sub}.example.com/p/{id}",      /* 3 */
        "GET /path",                         /* 4 */
        "GET *{any}.example.com/p/{id}/{z}", /* 5 */
    };
    rt_table *t = BUILD(lines);
    struct rtest_res r;

    HIT(t, "GET", "a.example.com", "/path", 1);
    NPARAMS(1);
    PARAM(0, "any", "a");
    HIT(t, "GET", "A.b.Example.com:8080", "/path", 1); /* one or more leading labels */
    PARAM(0, "any", "A.b");
    MISS(t, "GET", "example.com", "/x");
    HIT(t, "GET", "example.com", "/path", 4);
    HIT(t, "GET", "a..example.com", "/path", 4); /* an empty label is no label */
    HIT(t, "GET", ".example.com", "/path", 4);
    /* static hosts first; a host route whose path does not match falls
     * back to the catch-all host */
    HIT(t, "GET", "api.example.com", "/x", 2);
    HIT(t, "GET", "api.example.com", "/path", 1);
    PARAM(0, "any", "api");
    /* a host parameter (one label) before the catch-all label */
    HIT(t, "GET", "eu.example.com", "/p/7", 3);
    PARAM(0, "sub", "eu");
    MISS(t, "GET", "a.eu.example.com", "/p/7"); /* {sub} is one label, 5 needs {z} */
    HIT(t, "GET", "a.eu.example.com", "/p/7/8", 5);
    PARAM(0, "any", "a.eu");
    PARAM(1, "id", "7");
    PARAM(2, "z", "8");
    HIT(t, "GET", "eu.example.com", "/p/7/8", 5); /* {sub}'s path fails: back to *{any} */
    rt_table_free(t);
}
END_TEST

static Suite *match_suite(void)
{
    Suite *s = suite_create("router_match");
    TCase *forms = tcase_create("forms");
    TCase *prio = tcase_create("priority");
    TCase *hosts = tcase_create("hosts");
    TCase *methods = tcase_create("methods");
    TCase *slash = tcase_create("trailing_slash");
    TCase *write = tcase_create("write");

    tcase_add_test(forms, test_named_param);
    tcase_add_test(forms, test_prefix_param);
    tcase_add_test(forms, test_catchall);
    tcase_add_test(forms, test_catchall_prefix);
    tcase_add_test(forms, test_fs_trio);
    tcase_add_test(forms, test_params_coexist);
    tcase_add_test(forms, test_params_values);
    tcase_add_test(forms, test_max_params);
    tcase_add_test(prio, test_backtracking);
    tcase_add_test(prio, test_prefix_vs_param);
    tcase_add_test(prio, test_method_aware_backtracking);
    tcase_add_test(hosts, test_host_exact);
    tcase_add_test(hosts, test_host_params);
    tcase_add_test(hosts, test_host_priority);
    tcase_add_test(methods, test_not_allowed);
    tcase_add_test(methods, test_any_method_and_head);
    tcase_add_test(methods, test_custom_methods);
    tcase_add_test(methods, test_auto_options);
    tcase_add_test(methods, test_table_methods);
    tcase_add_test(methods, test_methods_format);
    tcase_add_test(methods, test_route_methods_format);
    tcase_add_test(slash, test_slash_strict);
    tcase_add_test(slash, test_slash_redirect);
    tcase_add_test(slash, test_slash_relaxed);
    tcase_add_test(write, test_conflicts);
    tcase_add_test(write, test_update_delete);
    tcase_add_test(write, test_table_basics);
    suite_add_tcase(s, forms);
    suite_add_tcase(s, prio);
    suite_add_tcase(s, hosts);
    suite_add_tcase(s, methods);
    suite_add_tcase(s, slash);
    suite_add_tcase(s, write);
    {
        TCase *fox = tcase_create("fox14");
        tcase_add_test(fox, test_infix_catchall);
        tcase_add_test(fox, test_infix_priority);
        tcase_add_test(fox, test_host_catchall);
        tcase_add_test(fox, test_infix_budget);
        suite_add_tcase(s, fox);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(match_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
