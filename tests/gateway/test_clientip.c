/*
 * tests/gateway/test_clientip.c - unit tests of gateway/clientip.c's
 * gw_cip_derive(): each client_ip source on real parsed requests, the
 * rightmost untrusted hop of X-Forwarded-For and Forwarded (split fields,
 * ports, IPv6, obfuscated and unknown hops, all hops trusted), one header
 * believed only from a trusted peer, and spoofing: whatever an untrusted
 * peer sends, its address is its own.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/clientip.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The address gw_cip_derive() gives for <fields> (header lines, each
 * ending in \r\n) from peer <peer> under the config's client_ip <cip>
 * (a JSON object; trusted_proxies is 10.0.0.0/8 and ::1); "peer" when it
 * is the peer's. */
static const char *derive(const char *cip, const char *peer, const char *fields)
{
    static char out[INET6_ADDRSTRLEN];
    char json[1024], req[2048];
    struct adm_errors errs;
    struct adm_config *cfg;
    struct h1_req_parser rp;
    struct sockaddr_storage p, got;
    size_t used = 0;
    int rc;

    snprintf(json, sizeof(json),
             "{\"listeners\": [{\"address\": \"127.0.0.1:1\"}], \"client_ip\": %s,"
             " \"trusted_proxies\": [\"10.0.0.0/8\", \"::1\"]}",
             cip);
    adm_errors_init(&errs);
    cfg = adm_config_parse(json, strlen(json), &errs);
    ck_assert_msg(cfg != NULL, "%s", json);
    adm_errors_clear(&errs);

    memset(&p, 0, sizeof(p));
    if (strchr(peer, ':')) {
        p.ss_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, peer, &((struct sockaddr_in6 *)&p)->sin6_addr), 1);
    } else {
        p.ss_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, peer, &((struct sockaddr_in *)&p)->sin_addr), 1);
    }
    snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: h\r\n%s\r\n", fields);
    ck_assert_int_eq(h1_req_parser_init(&rp, NULL), 0);
    rc = h1_req_feed_head(&rp, req, strlen(req), &used);
    ck_assert_msg(rc == H1_REQ_HEAD || rc == H1_REQ_DONE, "%s", req);

    const struct adm_client_ip *ci = cfg->client_ip;
    if (!gw_cip_derive(ci, ci->has_trusted ? ci->trusted : cfg->trusted_proxies,
                       ci->has_trusted ? ci->ntrusted : cfg->ntrusted_proxies, &rp.req,
                       (const struct sockaddr *)&p, &got)) {
        strcpy(out, "peer");
    } else if (got.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, out, sizeof(out));
    } else {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, out, sizeof(out));
    }
    h1_req_parser_free(&rp);
    adm_config_free(cfg);
    return out;
}

#define XFF "{\"source\": \"x_forwarded_for\"}"
#define FWD "{\"source\": \"forwarded\"}"
#define HDR "{\"source\": \"header:X-Real-IP\"}"

struct tcase_ {
    const char *cip, *peer, *fields, *want;
};

static void run(const struct tcase_ *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got = derive(t[i].cip, t[i].peer, t[i].fields);
        ck_assert_msg(!strcmp(got, t[i].want), "%zu: %s from %s with %s -> %s (want %s)", i,
                      t[i].cip, t[i].peer, t[i].fields, got, t[i].want);
    }
}

START_TEST(x_forwarded_for)
{
    static const struct tcase_ t[] = {
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7\r\n", "203.0.113.7"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7, 10.0.0.2\r\n", "203.0.113.7"},
        /* a client that writes its own list: only the rightmost untrusted counts */
        {XFF, "10.0.0.1", "X-Forwarded-For: 6.6.6.6, 203.0.113.7, 10.0.0.2\r\n", "203.0.113.7"},
        /* several fields are one list, in order */
        {XFF, "10.0.0.1", "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 203.0.113.7, 10.9.9.9\r\n",
         "203.0.113.7"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 10.9.9.9\r\n",
         "203.0.113.7"},
        /* every hop trusted: the leftmost */
        {XFF, "10.0.0.1", "X-Forwarded-For: 10.1.1.1, 10.2.2.2\r\n", "10.1.1.1"},
        /* a hop that is no address ends the walk at the trusted hop right of it */
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7, unknown, 10.0.0.5\r\n", "10.0.0.5"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7, garbage\r\n", "peer"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7,, 10.0.0.5\r\n", "203.0.113.7"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7:5555\r\n", "203.0.113.7"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 2001:db8::1\r\n", "2001:db8::1"},
        {XFF, "10.0.0.1", "X-Forwarded-For: [2001:db8::2]:443\r\n", "2001:db8::2"},
        {XFF, "10.0.0.1", "X-Forwarded-For: 203.0.113.7, ::1\r\n", "203.0.113.7"},
        {XFF, "10.0.0.1", "", "peer"},
        {XFF, "10.0.0.1", "X-Forwarded-For: \r\n", "peer"},
        /* an IPv6 peer, and an IPv4-mapped one inside an IPv4 prefix */
        {XFF, "::1", "X-Forwarded-For: 198.51.100.1\r\n", "198.51.100.1"},
        {XFF, "::ffff:10.0.0.1", "X-Forwarded-For: 198.51.100.1\r\n", "198.51.100.1"},
        /* client_ip's own trusted list replaces trusted_proxies */
        {"{\"source\": \"x_forwarded_for\", \"trusted\": [\"192.0.2.0/24\"]}", "192.0.2.1",
         "X-Forwarded-For: 198.51.100.1, 10.0.0.9\r\n", "10.0.0.9"},
        {"{\"source\": \"x_forwarded_for\", \"trusted\": [\"192.0.2.0/24\"]}", "10.0.0.1",
         "X-Forwarded-For: 198.51.100.1\r\n", "peer"},
    };
    run(t, sizeof(t) / sizeof(t[0]));
}
END_TEST

START_TEST(forwarded)
{
    static const struct tcase_ t[] = {
        /* RFC 7239's examples */
        {FWD, "10.0.0.1", "Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43\r\n", "192.0.2.60"},
        {FWD, "10.0.0.1", "Forwarded: for=192.0.2.43, for=198.51.100.17\r\n", "198.51.100.17"},
        {FWD, "10.0.0.1", "Forwarded: For=\"[2001:db8:cafe::17]:4711\"\r\n", "2001:db8:cafe::17"},
        {FWD, "10.0.0.1", "Forwarded: for=192.0.2.43, for=\"[2001:db8:cafe::17]\"\r\n",
         "2001:db8:cafe::17"},
        {FWD, "10.0.0.1", "Forwarded: for=\"192.0.2.60:4711\";proto=https\r\n", "192.0.2.60"},
        {FWD, "10.0.0.1", "Forwarded: for=192.0.2.43, for=10.0.0.3\r\n", "192.0.2.43"},
        /* obfuscated and unknown hops: the trusted hop right of them */
        {FWD, "10.0.0.1", "Forwarded: for=192.0.2.43, for=_hidden, for=10.0.0.7\r\n", "10.0.0.7"},
        {FWD, "10.0.0.1", "Forwarded: for=unknown\r\n", "peer"},
        {FWD, "10.0.0.1", "Forwarded: for=\"_gazonk\", for=10.0.0.7\r\n", "10.0.0.7"},
        {FWD, "10.0.0.1", "Forwarded: proto=https\r\n", "peer"},
        /* split fields, and a syntax error at the left that is never reached */
        {FWD, "10.0.0.1", "Forwarded: for=6.6.6.6\r\nForwarded: for=198.51.100.2\r\n",
         "198.51.100.2"},
        {FWD, "10.0.0.1", "Forwarded: for=\"6.6.6.6\r\nForwarded: for=198.51.100.2\r\n",
         "198.51.100.2"},
        {FWD, "10.0.0.1", "Forwarded: for=198.51.100.2, for=10.0.0.2;;\"x\r\n", "peer"},
        /* X-Forwarded-For does not count for "forwarded" */
        {FWD, "10.0.0.1", "X-Forwarded-For: 198.51.100.3\r\n", "peer"},
    };
    run(t, sizeof(t) / sizeof(t[0]));
}
END_TEST

START_TEST(one_header)
{
    static const struct tcase_ t[] = {
        {HDR, "10.0.0.1", "X-Real-IP: 203.0.113.9\r\n", "203.0.113.9"},
        {HDR, "10.0.0.1", "x-real-ip: 2001:db8::9\r\n", "2001:db8::9"},
        {HDR, "10.0.0.1", "X-Real-IP: 203.0.113.9\r\nX-Real-IP: 203.0.113.10\r\n", "peer"},
        {HDR, "10.0.0.1", "X-Real-IP: 203.0.113.9, 203.0.113.10\r\n", "peer"},
        {HDR, "10.0.0.1", "X-Real-IP: unknown\r\n", "peer"},
        {HDR, "10.0.0.1", "", "peer"},
        {"{\"source\": \"header:CF-Connecting-IP\"}", "10.0.0.1",
         "CF-Connecting-IP: 198.51.100.77\r\nX-Real-IP: 1.1.1.1\r\n", "198.51.100.77"},
    };
    run(t, sizeof(t) / sizeof(t[0]));
}
END_TEST

/* An untrusted peer's headers are never believed, whatever the source. */
START_TEST(spoofing)
{
    static const char *const sources[] = {XFF, FWD, HDR, "{\"source\": \"peer\"}"};
    static const char spoof[] = "X-Forwarded-For: 1.2.3.4\r\nForwarded: for=1.2.3.4\r\n"
                                "X-Real-IP: 1.2.3.4\r\n";

    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
        ck_assert_str_eq(derive(sources[i], "198.51.100.9", spoof), "peer");
        ck_assert_str_eq(derive(sources[i], "2001:db8::5", spoof), "peer");
    }
    /* "peer" believes nobody, trusted or not */
    ck_assert_str_eq(derive("{\"source\": \"peer\"}", "10.0.0.1", spoof), "peer");
    /* "trusted": [] trusts no peer */
    ck_assert_str_eq(
        derive("{\"source\": \"x_forwarded_for\", \"trusted\": []}", "10.0.0.1", spoof), "peer");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_clientip");
    TCase *tc = tcase_create("clientip");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, x_forwarded_for);
    tcase_add_test(tc, forwarded);
    tcase_add_test(tc, one_header);
    tcase_add_test(tc, spoofing);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
