/*
 * test_state_diff.c - admin/state_diff.c: a document's signature counts
 * the routes (by id), upstreams (by name) and other top-level keys that
 * another document adds, changes or removes; key order, route order and a
 * missing "routes" against an empty one are no change.
 */
#include <check.h>
#include <stdlib.h>

#include "admin/state.h"

/* What differs between the JSON texts <a> and <b>. */
static size_t diff(const char *a, const char *b)
{
    struct adm_state_sig sa = {0}, sb = {0};
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    size_t n;

    ck_assert_ptr_nonnull(ja);
    ck_assert_ptr_nonnull(jb);
    ck_assert_int_eq(adm_state_sig_make(&sa, ja), 0);
    ck_assert_int_eq(adm_state_sig_make(&sb, jb), 0);
    n = adm_state_sig_diff(&sa, &sb);
    ck_assert_uint_eq(adm_state_sig_diff(&sb, &sa), n);
    adm_state_sig_free(&sa);
    adm_state_sig_free(&sb);
    json_decref(ja);
    json_decref(jb);
    return n;
}

#define BASE                                                                                       \
    "{\"listeners\":[{\"address\":\"127.0.0.1:8080\"}],\"log_level\":\"warn\","                    \
    "\"upstreams\":{\"app\":{\"servers\":[{\"address\":\"127.0.0.1:3000\"}]}},"                    \
    "\"routes\":[{\"id\":\"a\",\"path\":\"/a\",\"upstream\":\"app\"},"                             \
    "{\"id\":\"b\",\"path\":\"/b\",\"upstream\":\"app\"}]}"

START_TEST(counts_what_differs)
{
    ck_assert_uint_eq(diff(BASE, BASE), 0);
    /* the same document written another way */
    ck_assert_uint_eq(
        diff(BASE, "{\"routes\":[{\"upstream\":\"app\",\"path\":\"/b\",\"id\":\"b\"},"
                   "{\"id\":\"a\",\"path\":\"/a\",\"upstream\":\"app\"}],\"log_level\":\"warn\","
                   "\"upstreams\":{\"app\":{\"servers\":[{\"address\":\"127.0.0.1:3000\"}]}},"
                   "\"listeners\":[{\"address\":\"127.0.0.1:8080\"}]}"),
        0);
    /* a route added, one changed, one removed */
    ck_assert_uint_eq(diff(BASE, "{\"listeners\":[{\"address\":\"127.0.0.1:8080\"}],"
                                 "\"log_level\":\"warn\",\"upstreams\":{\"app\":{\"servers\":"
                                 "[{\"address\":\"127.0.0.1:3000\"}]}},\"routes\":["
                                 "{\"id\":\"a\",\"path\":\"/a2\",\"upstream\":\"app\"},"
                                 "{\"id\":\"c\",\"path\":\"/c\",\"upstream\":\"app\"}]}"),
                      3);
    /* an upstream added and a setting changed */
    ck_assert_uint_eq(diff(BASE, "{\"listeners\":[{\"address\":\"127.0.0.1:8080\"}],"
                                 "\"log_level\":\"info\",\"upstreams\":{\"app\":{\"servers\":"
                                 "[{\"address\":\"127.0.0.1:3000\"}]},\"v\":{\"servers\":"
                                 "[{\"address\":\"127.0.0.1:3001\"}]}},\"routes\":["
                                 "{\"id\":\"a\",\"path\":\"/a\",\"upstream\":\"app\"},"
                                 "{\"id\":\"b\",\"path\":\"/b\",\"upstream\":\"app\"}]}"),
                      2);
    /* no routes is an empty list of them; a key added counts */
    ck_assert_uint_eq(diff("{\"upstreams\":{}}", "{\"routes\":[]}"), 0);
    ck_assert_uint_eq(diff("{}", "{\"workers\":2}"), 1);
}
END_TEST

START_TEST(remade_and_freed)
{
    struct adm_state_sig s = {0};
    json_t *a = json_loads(BASE, 0, NULL), *e = json_object();

    ck_assert_int_eq(adm_state_sig_make(&s, a), 0);
    ck_assert_uint_eq(s.n, 5);                      /* listeners, log_level, app, a, b */
    ck_assert_int_eq(adm_state_sig_make(&s, e), 0); /* the old items freed */
    ck_assert_uint_eq(s.n, 0);
    adm_state_sig_free(&s);
    adm_state_sig_free(&s);
    json_decref(a);
    json_decref(e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin_state_diff");
    TCase *tc = tcase_create("diff");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, counts_what_differs);
    tcase_add_test(tc, remade_and_freed);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
