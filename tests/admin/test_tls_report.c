/*
 * test_tls_report.c - what the admin API says about TLS (admin/tls_report.c):
 * the GET /certificates document, the expiry, handshake and failure lines of
 * /metrics, and the classification of handshake failures.
 * Certificates are made by the openssl CLI at test time (tls_certs.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "admin/api.h"
#include "admin/tls.h"
#include "tls_certs.h"

static struct adm_config *config(void)
{
    char doc[4096];
    const char *d = tls_certs();
    snprintf(doc, sizeof(doc),
             "{\"listeners\": [{\"address\": \"127.0.0.1:8080\"}, {\"address\": "
             "\"127.0.0.1:8443\", \"tls\": {\"certificates\": [{\"cert\": \"%s/dflt.pem\", "
             "\"key\": \"%s/dflt.key\"}, {\"cert\": \"%s/ec.pem\", \"key\": \"%s/ec.key\", "
             "\"hosts\": [\"api.example.com\"]}, {\"cert\": \"%s/rsa.pem\", \"key\": "
             "\"%s/rsa.key\", \"hosts\": [\"api.example.com\"]}]}}]}",
             d, d, d, d, d, d);
    struct adm_errors e;
    adm_errors_init(&e);
    struct adm_config *c = adm_config_parse(doc, strlen(doc), &e);
    ck_assert_msg(c != NULL, "%s", adm_errors_format(&e));
    return c;
}

START_TEST(certificates_document)
{
    struct adm_config *c = config();
    json_t *j = adm_tls_certificates_json(c), *certs = json_object_get(j, "certificates");
    ck_assert_uint_eq(json_array_size(certs), 3);
    json_t *ec = json_array_get(certs, 1);
    ck_assert_str_eq(json_string_value(json_object_get(ec, "listener")), "127.0.0.1:8443");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(ec, "hosts"), 0)),
                     "api.example.com");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(ec, "names"), 0)),
                     "api.example.com");
    ck_assert_str_eq(json_string_value(json_object_get(ec, "subject")), "CN=ec");
    ck_assert_str_eq(json_string_value(json_object_get(ec, "issuer")), "CN=Test-CA");
    ck_assert_str_eq(json_string_value(json_object_get(ec, "key_type")), "ECDSA");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(certs, 2), "key_type")),
                     "RSA");
    ck_assert(json_is_true(json_object_get(json_array_get(certs, 0), "default")));
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(ec, "sha256"))), 64);
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(ec, "not_after"))), 20);

    /* the fingerprint is the openssl CLI's */
    char cmd[700], out[200] = "";
    snprintf(cmd, sizeof(cmd), "openssl x509 -in %s/ec.pem -noout -fingerprint -sha256",
             tls_certs());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
    pclose(p);
    char hex[65], *o = hex;
    for (const char *s = strchr(out, '=') + 1; *s && *s != '\n'; s++)
        if (*s != ':')
            *o++ = (char)(*s >= 'A' && *s <= 'F' ? *s - 'A' + 'a' : *s);
    *o = '\0';
    ck_assert_str_eq(json_string_value(json_object_get(ec, "sha256")), hex);
    json_decref(j);
    adm_config_free(c);
}
END_TEST

START_TEST(metrics_lines)
{
    struct adm_config *c = config();
    struct adm_gw_stats gs;
    memset(&gs, 0, sizeof(gs));
    gs.tls_handshakes[ADM_TLS_V13][1] = 7;
    gs.tls_failures[ADM_TLS_FAIL_PROTOCOL] = 3;
    struct evbuffer *b = evbuffer_new();
    adm_tls_metrics(b, c, &gs);
    evbuffer_add(b, "", 1);
    const char *s = (const char *)evbuffer_pullup(b, -1);
    char want[200];
    snprintf(want, sizeof(want),
             "switchyard_tls_certificate_expiry_timestamp_seconds{listener=\"127.0.0.1:8443\","
             "name=\"api.example.com\"} %lld\n",
             (long long)(c->listeners[1].tls->certs[1].not_after <
                                 c->listeners[1].tls->certs[2].not_after
                             ? c->listeners[1].tls->certs[1].not_after
                             : c->listeners[1].tls->certs[2].not_after));
    ck_assert_ptr_nonnull(strstr(s, want));
    /* one line per name, though two certificates serve it */
    ck_assert_ptr_null(strstr(strstr(s, want) + strlen(want), "name=\"api.example.com\"}"));
    ck_assert_ptr_nonnull(strstr(s, "{listener=\"127.0.0.1:8443\",name=\"default.example.com\"}"));
    ck_assert_ptr_nonnull(
        strstr(s, "switchyard_tls_handshakes_total{version=\"TLSv1.3\",resumed=\"true\"} 7\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "switchyard_tls_handshakes_total{version=\"TLSv1.2\",resumed=\"false\"} 0\n"));
    ck_assert_ptr_nonnull(
        strstr(s, "switchyard_tls_handshake_failures_total{reason=\"protocol_version\"} 3\n"));
    evbuffer_free(b);
    adm_config_free(c);
}
END_TEST

START_TEST(failure_reasons)
{
    ck_assert_int_eq(adm_tls_fail_of(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_UNSUPPORTED_PROTOCOL), 1),
                     ADM_TLS_FAIL_PROTOCOL);
    ck_assert_int_eq(adm_tls_fail_of(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_HTTP_REQUEST), 1),
                     ADM_TLS_FAIL_NOT_TLS);
    ck_assert_int_eq(
        adm_tls_fail_of(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE), 1),
        ADM_TLS_FAIL_NO_CLIENT_CERT);
    ck_assert_int_eq(adm_tls_fail_of(0, SSL_ERROR_SYSCALL), ADM_TLS_FAIL_CLOSED);
    ck_assert_int_eq(adm_tls_fail_of(ERR_PACK(ERR_LIB_SSL, 0, 1), 1), ADM_TLS_FAIL_OTHER);
    ck_assert_str_eq(adm_tls_fail_name(ADM_TLS_FAIL_TIMEOUT), "timeout");
    ck_assert_int_eq(adm_tls_version_of(TLS1_3_VERSION), ADM_TLS_V13);
    ck_assert_int_eq(adm_tls_version_of(TLS1_2_VERSION), ADM_TLS_V12);
}
END_TEST

static Suite *tls_report_suite(void)
{
    Suite *s = suite_create("tls_report");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, certificates_document);
    tcase_add_test(tc, metrics_lines);
    tcase_add_test(tc, failure_reasons);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tls_certs(); /* once, before the tests fork */
    SRunner *sr = srunner_create(tls_report_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tls_certs_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
