/*
 * tests/admin/http1/test_forwarded.c - unit tests of admin/http1/forwarded.c:
 * RFC 7239's own examples of Forwarded elements (quoted values, IPv6 in
 * brackets, ports, obfuscated identifiers, "unknown"), syntax errors, and
 * node names as X-Forwarded-For writes them.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/http1/forwarded.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* The elements of <value> as "for-value" / "-" (no for) / "!" (invalid),
 * joined by "|". */
static void elements(const char *value, char *out, size_t cap)
{
    struct h1_slice v = {value, strlen(value)}, f;
    char buf[H1_FWD_VALUE_MAX];
    enum h1_fwd_elem kind;
    size_t pos = 0, o = 0;
    int guard = 0;

    out[0] = '\0';
    while (h1_forwarded_next(v, &pos, &kind, &f, buf)) {
        ck_assert_int_lt(++guard, 100);
        if (o)
            out[o++] = '|';
        if (kind == H1_FWD_FOR) {
            ck_assert_uint_lt(o + f.len, cap);
            memcpy(out + o, f.ptr, f.len);
            o += f.len;
        } else {
            out[o++] = kind == H1_FWD_NO_FOR ? '-' : '!';
        }
        out[o] = '\0';
    }
}

START_TEST(rfc7239_examples)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        /* RFC 7239 4 and 7.1-7.4 */
        {"for=\"_gazonk\"", "_gazonk"},
        {"For=\"[2001:db8:cafe::17]:4711\"", "[2001:db8:cafe::17]:4711"},
        {"for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"},
        {"for=192.0.2.43, for=198.51.100.17", "192.0.2.43|198.51.100.17"},
        {"for=192.0.2.43, for=\"[2001:db8:cafe::17]\", for=unknown",
         "192.0.2.43|[2001:db8:cafe::17]|unknown"},
        {"for=192.0.2.43,for=198.51.100.17;by=203.0.113.60;proto=http;host=example.com",
         "192.0.2.43|198.51.100.17"},
        {"for=\"_mdn\"", "_mdn"},
        {"for=\"192.0.2.60:_port\"", "192.0.2.60:_port"},
        /* pairs in any order, empty pairs and elements, OWS */
        {"proto=https ; for=10.0.0.1 ;by=x", "10.0.0.1"},
        {"for=1.1.1.1;;proto=http", "1.1.1.1"},
        {" , for=1.1.1.1 ,, for=2.2.2.2 , ", "1.1.1.1|2.2.2.2"},
        {"proto=http", "-"},
        {"proto=http, for=3.3.3.3", "-|3.3.3.3"},
        /* quoted-pair and a comma inside quotes */
        {"for=\"1.2\\.3.4\"", "1.2.3.4"},
        {"for=\"a,b\", for=5.5.5.5", "a,b|5.5.5.5"},
        /* syntax errors: the rest of the field is one invalid element */
        {"for=1.1.1.1, for", "1.1.1.1|!"},
        {"for=1.1.1.1, for=\"2.2.2.2, for=3.3.3.3", "1.1.1.1|!"},
        {"for=[::1]", "!"}, /* brackets are not a token: RFC 7239 quotes them */
        {"for=1.1.1.1;for=2.2.2.2", "!"},
        {"for=", "!"},
        {"=1.1.1.1", "!"},
        {"for=1.1.1.1 2.2.2.2", "!"},
        {"", ""},
    };
    char got[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        elements(cases[i].in, got, sizeof(got));
        ck_assert_msg(!strcmp(got, cases[i].want), "%zu: %s -> %s (want %s)", i, cases[i].in, got,
                      cases[i].want);
    }
}
END_TEST

START_TEST(long_quoted_value_is_invalid)
{
    char v[200] = "for=\"";
    memset(v + 5, '1', 100);
    strcpy(v + 105, "\"");
    char got[256];
    elements(v, got, sizeof(got));
    ck_assert_str_eq(got, "!");
}
END_TEST

/* <s> as an address, written back by inet_ntop; "-" when it is none. */
static const char *node(const char *s, char *buf)
{
    struct sockaddr_storage a;

    if (h1_node_addr(s, strlen(s), &a) < 0)
        return "-";
    if (a.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, buf, INET6_ADDRSTRLEN);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a)->sin6_addr, buf, INET6_ADDRSTRLEN);
    return buf;
}

START_TEST(node_names)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"192.0.2.60", "192.0.2.60"},
        {"192.0.2.60:4711", "192.0.2.60"},
        {"192.0.2.60:_port", "192.0.2.60"},
        {"[2001:db8:cafe::17]", "2001:db8:cafe::17"},
        {"[2001:db8:cafe::17]:4711", "2001:db8:cafe::17"},
        {"[2001:db8:cafe::17]:_a.b-c", "2001:db8:cafe::17"},
        {"2001:db8::1", "2001:db8::1"}, /* bare, as X-Forwarded-For has it */
        {"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
        {"unknown", "-"},
        {"_hidden", "-"},
        {"_gazonk", "-"},
        {"", "-"},
        {"192.0.2", "-"},
        {"192.0.2.256", "-"},
        {"192.0.2.1:", "-"},
        {"192.0.2.1:65536", "-"},
        {"192.0.2.1:_", "-"},
        {"192.0.2.1:80x", "-"},
        {"[2001:db8::1", "-"},
        {"[2001:db8::1]x", "-"},
        {"[192.0.2.1]", "-"},
        {"fe80::1%eth0", "-"},
        {"example.com", "-"},
        {"1.2.3.4 ", "-"},
    };
    char buf[INET6_ADDRSTRLEN];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(!strcmp(node(cases[i].in, buf), cases[i].want), "%zu: %s -> %s", i,
                      cases[i].in, node(cases[i].in, buf));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_forwarded");
    TCase *tc = tcase_create("forwarded");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, rfc7239_examples);
    tcase_add_test(tc, long_quoted_value_is_invalid);
    tcase_add_test(tc, node_names);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
