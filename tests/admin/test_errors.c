/*
 * test_errors.c - error lists (admin/errors.c): entries keep their path and
 * message, format as "path: message" (or the message alone for the whole
 * document), stop at ADM_ERRORS_MAX and count the rest, and answer as JSON.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "admin/errors.h"

START_TEST(add_and_format)
{
    struct adm_errors e;
    char buf[64];
    char *s;

    adm_errors_init(&e);
    ck_assert_int_eq(adm_errors_add(&e, "/routes/3/path", "bad %s at %d", "brace", 7), 0);
    ck_assert_int_eq(adm_errors_add(&e, "", "line %d: eof", 2), 0);
    ck_assert_uint_eq(e.n, 2);
    ck_assert_str_eq(e.v[0].path, "/routes/3/path");
    ck_assert_str_eq(e.v[0].msg, "bad brace at 7");
    ck_assert_uint_eq(adm_error_format(&e.v[0], buf, sizeof(buf)),
                      strlen("/routes/3/path: bad brace at 7"));
    ck_assert_str_eq(buf, "/routes/3/path: bad brace at 7");
    /* snprintf semantics: the length needed, the buffer cut and terminated */
    ck_assert_uint_eq(adm_error_format(&e.v[0], buf, 5), strlen("/routes/3/path: bad brace at 7"));
    ck_assert_str_eq(buf, "/rou");
    s = adm_errors_format(&e);
    ck_assert_str_eq(s, "/routes/3/path: bad brace at 7\nline 2: eof\n");
    free(s);
    adm_errors_clear(&e);
    ck_assert_uint_eq(e.n, 0);
    adm_errors_clear(NULL);
}
END_TEST

START_TEST(cap_and_json)
{
    struct adm_errors e;
    json_t *j;
    char *s;

    adm_errors_init(&e);
    for (int i = 0; i < ADM_ERRORS_MAX + 5; i++)
        ck_assert_int_eq(adm_errors_add(&e, "/x", "e%d", i), 0);
    ck_assert_uint_eq(e.n, ADM_ERRORS_MAX);
    ck_assert_uint_eq(e.dropped, 5);
    s = adm_errors_format(&e);
    ck_assert_ptr_nonnull(strstr(s, "... and 5 more errors\n"));
    free(s);
    j = adm_errors_json(&e);
    ck_assert_uint_eq(json_array_size(j), ADM_ERRORS_MAX);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "path")), "/x");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "message")), "e1");
    json_decref(j);
    adm_errors_clear(&e);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("admin_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, add_and_format);
    tcase_add_test(tc, cap_and_json);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(errors_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
