/*
 * test_tls_redact.c - admin/tls_redact.c: GET /config's copy shows every
 * inline key_pem as the marker and leaves the live document alone, and a
 * push's markers take the live key of the certificate with the same
 * cert_pem, or are refused at their JSON path.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "admin/tls.h"

static json_t *doc(const char *text)
{
    json_error_t e;
    json_t *d = json_loads(text, 0, &e);

    ck_assert_msg(d != NULL, "%s", e.text);
    return d;
}

static const char *key_at(const json_t *d, size_t l, size_t c)
{
    const json_t *cert = json_array_get(
        json_object_get(json_object_get(json_array_get(json_object_get(d, "listeners"), l), "tls"),
                        "certificates"),
        c);

    return json_string_value(json_object_get(cert, "key_pem"));
}

#define LIVE                                                                                       \
    "{\"listeners\": [{\"address\": \"127.0.0.1:80\"},"                                            \
    " {\"address\": \"127.0.0.1:443\", \"tls\": {\"certificates\": ["                              \
    "  {\"cert_pem\": \"A\", \"key_pem\": \"KEY-A\"},"                                             \
    "  {\"cert\": \"b.pem\", \"key\": \"b.key\", \"hosts\": [\"b.test\"]},"                        \
    "  {\"cert_pem\": \"C\", \"key_pem\": \"KEY-C\", \"hosts\": [\"c.test\"]}]}}]}"

START_TEST(redacts_inline_keys_only)
{
    json_t *live = doc(LIVE), *shown = adm_tls_redact(live);
    char *text;

    ck_assert_ptr_nonnull(shown);
    ck_assert_str_eq(key_at(shown, 1, 0), ADM_TLS_REDACTED);
    ck_assert_str_eq(key_at(shown, 1, 2), ADM_TLS_REDACTED);
    ck_assert_ptr_null(key_at(shown, 1, 1)); /* a file stays a path */
    text = json_dumps(shown, 0);
    ck_assert_ptr_null(strstr(text, "KEY-"));
    ck_assert_ptr_nonnull(strstr(text, "b.key"));
    free(text);
    /* the live document keeps its keys */
    ck_assert_str_eq(key_at(live, 1, 0), "KEY-A");
    ck_assert_str_eq(key_at(live, 1, 2), "KEY-C");
    json_decref(shown);
    json_decref(live);
}
END_TEST

START_TEST(push_keeps_live_keys_by_certificate)
{
    json_t *live = doc(LIVE), *push = adm_tls_redact(live);
    struct adm_errors errs;

    adm_errors_init(&errs);
    /* the round trip: every key back */
    ck_assert_int_eq(adm_tls_unredact(push, live, &errs), 2);
    ck_assert_uint_eq(errs.n, 0);
    ck_assert(json_equal(push, live));
    json_decref(push);
    /* moved to another listener and reordered: matched by cert_pem */
    push = doc("{\"listeners\": [{\"address\": \"127.0.0.1:80\", \"tls\": {\"certificates\": ["
               " {\"cert_pem\": \"C\", \"key_pem\": \"[redacted]\"},"
               " {\"cert_pem\": \"A\", \"key_pem\": \"[redacted]\", \"hosts\": [\"a.test\"]},"
               " {\"cert_pem\": \"D\", \"key_pem\": \"KEY-D\"}]}}]}");
    ck_assert_int_eq(adm_tls_unredact(push, live, &errs), 2);
    ck_assert_str_eq(key_at(push, 0, 0), "KEY-C");
    ck_assert_str_eq(key_at(push, 0, 1), "KEY-A");
    ck_assert_str_eq(key_at(push, 0, 2), "KEY-D");
    json_decref(push);
    /* nothing to restore: 0, unchanged */
    push = doc(LIVE);
    ck_assert_int_eq(adm_tls_unredact(push, live, &errs), 0);
    ck_assert(json_equal(push, live));
    json_decref(push);
    json_decref(live);
}
END_TEST

START_TEST(unknown_certificate_refused_at_its_path)
{
    json_t *live = doc(LIVE);
    json_t *push = doc("{\"listeners\": [{\"address\": \"127.0.0.1:80\"},"
                       " {\"address\": \"127.0.0.1:443\", \"tls\": {\"certificates\": ["
                       "  {\"cert_pem\": \"A\", \"key_pem\": \"[redacted]\"},"
                       "  {\"cert_pem\": \"NEW\", \"key_pem\": \"[redacted]\"},"
                       "  {\"cert\": \"b.pem\", \"key_pem\": \"[redacted]\"}]}}]}");
    struct adm_errors errs;

    adm_errors_init(&errs);
    ck_assert_int_eq(adm_tls_unredact(push, live, &errs), -1);
    ck_assert_uint_eq(errs.n, 2);
    ck_assert_str_eq(errs.v[0].path, "/listeners/1/tls/certificates/1/key_pem");
    ck_assert_str_eq(errs.v[1].path, "/listeners/1/tls/certificates/2/key_pem");
    ck_assert_ptr_nonnull(strstr(errs.v[0].msg, "send the key"));
    adm_errors_clear(&errs);
    /* no live document (nothing to keep): every marker refused */
    json_decref(push);
    push = doc("{\"listeners\": [{\"address\": \"127.0.0.1:80\", \"tls\": {\"certificates\": ["
               " {\"cert_pem\": \"A\", \"key_pem\": \"[redacted]\"},"
               " {\"cert_pem\": \"C\", \"key_pem\": \"[redacted]\"},"
               " {\"cert_pem\": \"NEW\", \"key_pem\": \"[redacted]\"}]}}]}");
    ck_assert_int_eq(adm_tls_unredact(push, NULL, &errs), -1);
    ck_assert_uint_eq(errs.n, 3);
    adm_errors_clear(&errs);
    json_decref(push);
    json_decref(live);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin_tls_redact");
    TCase *tc = tcase_create("redact");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, redacts_inline_keys_only);
    tcase_add_test(tc, push_keeps_live_keys_by_certificate);
    tcase_add_test(tc, unknown_certificate_refused_at_its_path);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
