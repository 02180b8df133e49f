/*
 * test_tls_redact.c - admin/tls_redact.c: GET /config's copy shows every
 * inline key_pem as the marker and leaves the live document alone, and a
 * push's markers take the live key of the certificate with the same
 * cert_pem, or are refused at their JSON path; the same for ticket_secret,
 * matched by the listener's address.
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

/* adm_tls_unredact(<push>, <live>) refuses with two errors, at <path0>
 * and <path1>, the first saying <needle>. */
static void refused_at(json_t *push, const json_t *live, const char *path0, const char *path1,
                       const char *needle)
{
    struct adm_errors errs;

    adm_errors_init(&errs);
    ck_assert_int_eq(adm_tls_unredact(push, live, &errs), -1);
    ck_assert_uint_eq(errs.n, 2);
    ck_assert_str_eq(errs.v[0].path, path0);
    ck_assert_str_eq(errs.v[1].path, path1);
    ck_assert_ptr_nonnull(strstr(errs.v[0].msg, needle));
    adm_errors_clear(&errs);
}

START_TEST(unknown_certificate_refused_at_its_path)
{
    json_t *live = doc(LIVE);
    json_t *push = doc("{\"listeners\": [{\"address\": \"127.0.0.1:80\"},"
                       " {\"address\": \"127.0.0.1:443\", \"tls\": {\"certificates\": ["
                       "  {\"cert_pem\": \"A\", \"key_pem\": \"[redacted]\"},"
                       "  {\"cert_pem\": \"NEW\", \"key_pem\": \"[redacted]\"},"
                       "  {\"cert\": \"b.pem\", \"key_pem\": \"[redacted]\"}]}}]}");
    struct adm_errors errs;

    refused_at(push, live, "/listeners/1/tls/certificates/1/key_pem",
               "/listeners/1/tls/certificates/2/key_pem", "send the key");
    adm_errors_init(&errs);
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

static const char *secret_at(const json_t *d, size_t l)
{
    const json_t *tls = json_object_get(json_array_get(json_object_get(d, "listeners"), l), "tls");

    return json_string_value(json_object_get(tls, "ticket_secret"));
}

#define SECRETS                                                                                    \
    "{\"listeners\": [{\"address\": \"127.0.0.1:443\", \"tls\": {\"ticket_secret\": \"S-443\","    \
    "  \"certificates\": [{\"cert_pem\": \"A\", \"key_pem\": \"KEY-A\"}]}},"                       \
    " {\"address\": \"127.0.0.1:8443\", \"tls\": {\"ticket_secret\": \"S-8443\","                  \
    "  \"certificates\": [{\"cert\": \"b.pem\", \"key\": \"b.key\"}]}},"                           \
    " {\"address\": \"127.0.0.1:9443\", \"tls\": {\"certificates\": []}}]}"

/* ticket_secret is shown as the marker, and a pushed marker takes the
 * secret of the live listener with the same address, wherever it now is in
 * the list; a marker on an address with no live secret is refused at its
 * path. */
START_TEST(ticket_secrets_by_address)
{
    json_t *live = doc(SECRETS), *shown = adm_tls_redact(live), *push;
    struct adm_errors errs;
    char *text;

    ck_assert_ptr_nonnull(shown);
    ck_assert_str_eq(secret_at(shown, 0), ADM_TLS_REDACTED);
    ck_assert_str_eq(secret_at(shown, 1), ADM_TLS_REDACTED);
    ck_assert_ptr_null(secret_at(shown, 2));
    text = json_dumps(shown, 0);
    ck_assert_ptr_null(strstr(text, "S-"));
    free(text);
    ck_assert_str_eq(secret_at(live, 0), "S-443");

    adm_errors_init(&errs);
    ck_assert_int_eq(adm_tls_unredact(shown, live, &errs), 3); /* two secrets, one key */
    ck_assert(json_equal(shown, live));
    json_decref(shown);

    push = doc("{\"listeners\": ["
               " {\"address\": \"127.0.0.1:8443\", \"tls\": {\"ticket_secret\": \"[redacted]\"}},"
               " {\"address\": \"127.0.0.1:443\", \"tls\": {\"ticket_secret\": \"[redacted]\"}},"
               " {\"address\": \"127.0.0.1:9443\", \"tls\": {\"ticket_secret\": \"[redacted]\"}},"
               " {\"address\": \"127.0.0.1:10443\", \"tls\": {\"ticket_secret\": \"[redacted]\"}},"
               " {\"address\": \"127.0.0.1:11443\", \"tls\": {\"ticket_secret\": \"NEW\"}}]}");
    refused_at(push, live, "/listeners/2/tls/ticket_secret", "/listeners/3/tls/ticket_secret",
               "send the secret");
    ck_assert_str_eq(secret_at(push, 0), "S-8443");
    ck_assert_str_eq(secret_at(push, 1), "S-443");
    ck_assert_str_eq(secret_at(push, 4), "NEW");
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
    tcase_add_test(tc, ticket_secrets_by_address);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
