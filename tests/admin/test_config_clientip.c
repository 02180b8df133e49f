/*
 * tests/admin/test_config_clientip.c - unit tests of admin/config_clientip.c:
 * "client_ip" at the top level and on a listener, its sources and trusted
 * CIDRs, and every refusal at its JSON path.
 */
#define _POSIX_C_SOURCE 200809L
#include "config_test.h"

START_TEST(parses_sources)
{
    struct adm_config *c = expect_ok(doc("'client_ip': {'source': 'x_forwarded_for'}"));
    ck_assert_ptr_nonnull(c->client_ip);
    ck_assert_int_eq(c->client_ip->source, ADM_CIP_XFF);
    ck_assert_int_eq(c->client_ip->has_trusted, 0);
    ck_assert_ptr_null(c->listeners[0].client_ip);
    adm_config_free(c);

    c = expect_ok(doc("'client_ip': {'source': 'forwarded', 'trusted': ['10.0.0.0/8', '::1']}"));
    ck_assert_int_eq(c->client_ip->source, ADM_CIP_FORWARDED);
    ck_assert_int_eq(c->client_ip->has_trusted, 1);
    ck_assert_uint_eq(c->client_ip->ntrusted, 2);
    ck_assert_uint_eq(c->client_ip->trusted[1].prefix, 128);
    adm_config_free(c);

    c = expect_ok(doc("'client_ip': {'source': 'header:CF-Connecting-IP', 'trusted': []}"));
    ck_assert_int_eq(c->client_ip->source, ADM_CIP_HEADER);
    ck_assert_str_eq(c->client_ip->header, "CF-Connecting-IP");
    ck_assert_uint_eq(c->client_ip->header_len, 16);
    ck_assert_int_eq(c->client_ip->has_trusted, 1);
    ck_assert_uint_eq(c->client_ip->ntrusted, 0);
    adm_config_free(c);

    c = expect_ok(doc("'client_ip': {'source': 'peer'}"));
    ck_assert_int_eq(c->client_ip->source, ADM_CIP_PEER);
    adm_config_free(c);

    c = expect_ok(doc(NULL));
    ck_assert_ptr_null(c->client_ip);
    adm_config_free(c);
}
END_TEST

START_TEST(per_listener)
{
    struct adm_config *c =
        expect_ok(J("{'listeners': [{'address': '127.0.0.1:8080'},"
                    " {'address': '127.0.0.1:8081',"
                    "  'client_ip': {'source': 'header:X-Real-IP', 'trusted': ['10.1.0.0/16']}}],"
                    " 'client_ip': {'source': 'x_forwarded_for'}}"));
    ck_assert_ptr_null(c->listeners[0].client_ip);
    ck_assert_ptr_nonnull(c->listeners[1].client_ip);
    ck_assert_int_eq(c->listeners[1].client_ip->source, ADM_CIP_HEADER);
    ck_assert_int_eq(c->client_ip->source, ADM_CIP_XFF);
    adm_config_free(c);
}
END_TEST

START_TEST(refusals)
{
    expect_error(doc("'client_ip': 'x_forwarded_for'"), "/client_ip", "expected an object");
    expect_error(doc("'client_ip': {}"), "/client_ip/source", "missing");
    expect_error(doc("'client_ip': {'source': 'xff'}"), "/client_ip/source", "unknown source");
    expect_error(doc("'client_ip': {'source': 'header:'}"), "/client_ip/source",
                 "invalid header name");
    expect_error(doc("'client_ip': {'source': 'header:X Real'}"), "/client_ip/source",
                 "invalid header name");
    expect_error(doc("'client_ip': {'source': 'header:x-forwarded-for'}"), "/client_ip/source",
                 "use \"source\": \"x_forwarded_for\"");
    expect_error(doc("'client_ip': {'source': 'header:Forwarded'}"), "/client_ip/source",
                 "use \"source\": \"forwarded\"");
    expect_error(doc("'client_ip': {'source': 'peer', 'trusted': ['10.0.0.0/33']}"),
                 "/client_ip/trusted/0", "invalid CIDR");
    expect_error(doc("'client_ip': {'source': 'peer', 'trusted': '10.0.0.0/8'}"),
                 "/client_ip/trusted", "expected an array");
    expect_error(doc("'client_ip': {'source': 'peer', 'trust': []}"), "/client_ip/trust",
                 "unknown key");
    expect_error(J("{'listeners': [{'address': '127.0.0.1:8080',"
                   " 'client_ip': {'source': 'forwarded', 'trusted': ['x']}}]}"),
                 "/listeners/0/client_ip/trusted/0", "invalid CIDR");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin_config_clientip");
    TCase *tc = tcase_create("client_ip");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, parses_sources);
    tcase_add_test(tc, per_listener);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
