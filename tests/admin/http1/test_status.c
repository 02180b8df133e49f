/*
 * tests/admin/http1/test_status.c - unit tests of admin/http1/status.c: the
 * RFC 9110 reason phrases, the codes the gateway and the admin API answer
 * with, and "Unknown" for the rest.
 */
#include "admin/http1/status.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(status_reasons)
{
    ck_assert_str_eq(h1_status_reason(400), "Bad Request");
    ck_assert_str_eq(h1_status_reason(413), "Content Too Large");
    ck_assert_str_eq(h1_status_reason(414), "URI Too Long");
    ck_assert_str_eq(h1_status_reason(417), "Expectation Failed");
    ck_assert_str_eq(h1_status_reason(431), "Request Header Fields Too Large");
    ck_assert_str_eq(h1_status_reason(501), "Not Implemented");
    ck_assert_str_eq(h1_status_reason(505), "HTTP Version Not Supported");
    ck_assert_str_eq(h1_status_reason(200), "OK");
    ck_assert_str_eq(h1_status_reason(799), "Unknown");
    ck_assert_str_eq(h1_status_reason(100), "Continue");
    ck_assert_str_eq(h1_status_reason(502), "Bad Gateway");
}
END_TEST

/* The phrases RFC 9110 15 gives, where the two old tables disagreed or had
 * none (a configured 501 used to say "Server Error"). */
START_TEST(status_rfc9110)
{
    ck_assert_str_eq(h1_status_reason(421), "Misdirected Request");
    ck_assert_str_eq(h1_status_reason(422), "Unprocessable Content");
    ck_assert_str_eq(h1_status_reason(416), "Range Not Satisfiable");
    ck_assert_str_eq(h1_status_reason(203), "Non-Authoritative Information");
    ck_assert_str_eq(h1_status_reason(300), "Multiple Choices");
    ck_assert_str_eq(h1_status_reason(410), "Gone");
    ck_assert_str_eq(h1_status_reason(409), "Conflict");
    ck_assert_str_eq(h1_status_reason(408), "Request Timeout");
    ck_assert_str_eq(h1_status_reason(429), "Too Many Requests");
    ck_assert_str_eq(h1_status_reason(503), "Service Unavailable");
    ck_assert_str_eq(h1_status_reason(504), "Gateway Timeout");
    ck_assert_str_eq(h1_status_reason(308), "Permanent Redirect");
}
END_TEST

START_TEST(status_edges)
{
    static const int unknown[] = {-1, 0, 99, 102, 299, 418, 499, 599, 600, 1000};
    int s;

    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++)
        ck_assert_str_eq(h1_status_reason(unknown[k]), "Unknown");
    /* every code gets a short phrase: local answers encode it in fixed room */
    for (s = 100; s < 600; s++)
        ck_assert_uint_le(strlen(h1_status_reason(s)), 31);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_status");
    TCase *tc = tcase_create("reasons");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, status_reasons);
    tcase_add_test(tc, status_rfc9110);
    tcase_add_test(tc, status_edges);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
