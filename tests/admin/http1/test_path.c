/*
 * tests/admin/http1/test_path.c - unit tests of admin/http1/path.c: the
 * normalization table (decoding, dot segments, merged slashes) and every
 * input it refuses.
 */
#include "admin/http1/path.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void norm_ok(const char *in, int merge, const char *want)
{
    char out[256];
    size_t outlen = 12345, n = strlen(in);

    ck_assert_msg(h1_path_normalize(in, n, out, n + 2, merge, &outlen) == 0, "rejected \"%s\"", in);
    ck_assert_msg(strcmp(out, want) == 0, "\"%s\" (merge %d) -> \"%s\", want \"%s\"", in, merge,
                  out, want);
    ck_assert_uint_eq(outlen, strlen(want));
    ck_assert(outlen <= n || n == 0);
}

START_TEST(norm_table)
{
    norm_ok("/a/./b/../c", 1, "/a/c");
    norm_ok("/a//b", 1, "/a/b");
    norm_ok("/a//b", 0, "/a//b");
    /* %41 is 'A'; %2f stays encoded (upper-cased) and is no separator, so
     * "A%2F.." is one ordinary segment after decoding %2e%2E */
    norm_ok("/%41%2f%2e%2E/x", 1, "/A%2F../x");
    norm_ok("/..", 1, "/");
    norm_ok("/../..", 1, "/");
    norm_ok("/a/%2e%2e/b", 1, "/b");
    norm_ok("/a/.%2E/b", 1, "/b");
    norm_ok("/a/%2E/b", 1, "/a/b");
    norm_ok("/", 1, "/");
    norm_ok("", 1, "/");
    norm_ok("//", 1, "/");
    norm_ok("//", 0, "//");
    norm_ok("/a/.", 1, "/a/");
    norm_ok("/a/..", 1, "/");
    norm_ok("/a/b/..", 1, "/a/");
    norm_ok("/a/b/../", 1, "/a/");
    norm_ok("/a/b/../../../c", 1, "/c");
    norm_ok("/./a", 1, "/a");
    norm_ok("/a/", 1, "/a/");
    norm_ok("/a//", 1, "/a/");
    norm_ok("/a//", 0, "/a//");
    norm_ok("//a///b//", 1, "/a/b/");
    norm_ok("//a///b//", 0, "//a///b//");
    norm_ok("/a//../b", 0, "/a/b");
    norm_ok("/a//../b", 1, "/b");
    norm_ok("/.a/..b/.../a.", 1, "/.a/..b/.../a.");
    norm_ok("/%7e%5F%2d%2E%30%7A", 1, "/~_-.0z");
    norm_ok("/%3a%3A%2f%2F%25%00%ff%20", 1, "/%3A%3A%2F%2F%25%00%FF%20");
    norm_ok("/a%2F..%2Fb", 1, "/a%2F..%2Fb");
    norm_ok("/a/..%2f", 1, "/a/..%2F");
    norm_ok("/%2e%2e%2f", 1, "/..%2F");
    norm_ok("/a/b/c/./../../g", 1, "/a/g");
    norm_ok("/mid/content=5/../6", 1, "/mid/6");
}
END_TEST

START_TEST(norm_errors)
{
    static const char *const bad[] = {"/%",   "/%G1",  "/%4",   "/a%zz", "/%%41",
                                      "/a/%", "/%4/",  "a",     "a/b",   "*",
                                      "/a b", "/a\tb", "/\x01", "/\x7f", "/caf\xc3\xa9"};
    char out[64];
    size_t k, outlen;

    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        ck_assert_msg(h1_path_normalize(bad[k], strlen(bad[k]), out, sizeof(out), 1, &outlen) == -1,
                      "accepted \"%s\"", bad[k]);
    /* too small an output */
    ck_assert_int_eq(h1_path_normalize("/abc", 4, out, 4, 1, &outlen), -1);
    ck_assert_int_eq(h1_path_normalize("", 0, out, 1, 1, &outlen), -1);
    ck_assert_int_eq(h1_path_normalize("/abc", 4, out, 5, 1, &outlen), 0);
    ck_assert_int_eq(h1_path_normalize("/a\0b", 4, out, sizeof(out), 1, &outlen), -1);
}
END_TEST

START_TEST(norm_fast_path_is_identity)
{
    /* a path that is its own normal form comes back byte for byte */
    static const char *const same[] = {"/",   "/a",      "/a/b/c",         "/a-b_c~d.e",
                                       "/a/", "/x.y/z.", "/v1/users/{id}", "/a;b=c/d,e"};
    char out[64];
    size_t k, outlen;

    for (k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        ck_assert_int_eq(h1_path_normalize(same[k], strlen(same[k]), out, sizeof(out), 1, &outlen),
                         0);
        ck_assert_str_eq(out, same[k]);
        ck_assert_uint_eq(outlen, strlen(same[k]));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_path");
    TCase *tc = tcase_create("normalize");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, norm_table);
    tcase_add_test(tc, norm_errors);
    tcase_add_test(tc, norm_fast_path_is_identity);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
