/*
 * test_addr.c - addresses and CIDR prefixes (admin/addr.c): parsing of
 * IPv6, host names and ports, loopback, and prefix matching with
 * IPv4-mapped IPv6 addresses. How a config reports a bad address is
 * test_config.c's.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "admin/addr.h"

static struct sockaddr_storage sa(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
    }
    return ss;
}

static int match(const struct adm_cidr *l, size_t n, const char *ip)
{
    struct sockaddr_storage ss = sa(ip);
    return adm_cidr_match(l, n, (const struct sockaddr *)&ss);
}

START_TEST(cidr_matching)
{
    static const char *const specs[] = {"10.0.0.0/8",    "192.168.1.7", "172.16.0.0/12",
                                        "2001:db8::/32", "::1",         "fe80::/10"};
    struct adm_cidr l[6];
    char why[128];
    for (size_t i = 0; i < 6; i++)
        ck_assert_msg(adm_cidr_parse(&l[i], specs[i], why, sizeof(why)) == 0, "%s: %s", specs[i],
                      why);

    ck_assert_int_eq(match(l, 6, "10.0.0.1"), 1);
    ck_assert_int_eq(match(l, 6, "10.255.255.255"), 1);
    ck_assert_int_eq(match(l, 6, "11.0.0.1"), 0);
    ck_assert_int_eq(match(l, 6, "9.255.255.255"), 0);
    ck_assert_int_eq(match(l, 6, "192.168.1.7"), 1);
    ck_assert_int_eq(match(l, 6, "192.168.1.8"), 0);
    ck_assert_int_eq(match(l, 6, "172.31.255.255"), 1);
    ck_assert_int_eq(match(l, 6, "172.32.0.0"), 0);
    ck_assert_int_eq(match(l, 6, "172.15.255.255"), 0);
    ck_assert_int_eq(match(l, 6, "2001:db8::1"), 1);
    ck_assert_int_eq(match(l, 6, "2001:db8:ffff:ffff::1"), 1);
    ck_assert_int_eq(match(l, 6, "2001:db9::1"), 0);
    ck_assert_int_eq(match(l, 6, "::1"), 1);
    ck_assert_int_eq(match(l, 6, "::2"), 0);
    ck_assert_int_eq(match(l, 6, "fe80::1234"), 1);
    ck_assert_int_eq(match(l, 6, "febf::1"), 1);
    ck_assert_int_eq(match(l, 6, "fec0::1"), 0);
    /* IPv4-mapped IPv6 (dual-stack sockets) matches IPv4 prefixes */
    ck_assert_int_eq(match(l, 6, "::ffff:10.1.2.3"), 1);
    ck_assert_int_eq(match(l, 6, "::ffff:11.1.2.3"), 0);
    ck_assert_int_eq(match(l, 6, "::ffff:192.168.1.7"), 1);
    /* an empty list matches nothing; /0 matches everything of its family */
    ck_assert_int_eq(match(l, 0, "10.0.0.1"), 0);
    struct adm_cidr all4, all6, mapped;
    ck_assert_int_eq(adm_cidr_parse(&all4, "0.0.0.0/0", why, sizeof(why)), 0);
    ck_assert_int_eq(adm_cidr_parse(&all6, "::/0", why, sizeof(why)), 0);
    ck_assert_int_eq(adm_cidr_parse(&mapped, "::ffff:0:0/96", why, sizeof(why)), 0);
    ck_assert_int_eq(match(&all4, 1, "1.2.3.4"), 1);
    ck_assert_int_eq(match(&all4, 1, "::1"), 0);
    ck_assert_int_eq(match(&all6, 1, "::1"), 1);
    ck_assert_int_eq(match(&mapped, 1, "1.2.3.4"), 1);
    /* other families never match */
    struct sockaddr un = {.sa_family = AF_UNIX};
    ck_assert_int_eq(adm_cidr_match(&all4, 1, &un), 0);
    ck_assert_int_eq(adm_cidr_match(&all4, 1, NULL), 0);
    /* odd prefix lengths */
    struct adm_cidr p;
    ck_assert_int_eq(adm_cidr_parse(&p, "192.168.128.0/17", why, sizeof(why)), 0);
    ck_assert_int_eq(match(&p, 1, "192.168.255.1"), 1);
    ck_assert_int_eq(match(&p, 1, "192.168.127.1"), 0);
    ck_assert_int_eq(adm_cidr_parse(&p, "192.168.129.0/17", why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "192.168.128.0/17"));
}
END_TEST

START_TEST(address_parsing)
{
    struct adm_addr a;
    char why[128];
    ck_assert_int_eq(adm_addr_parse(&a, "[2001:db8::1]:443", 0, why, sizeof(why)), 0);
    ck_assert_str_eq(a.host, "2001:db8::1");
    ck_assert_uint_eq(a.port, 443);
    ck_assert_int_eq(adm_addr_is_loopback(&a), 0);
    adm_addr_free(&a);
    ck_assert_int_eq(adm_addr_parse(&a, "db.internal:5432", 1, why, sizeof(why)), 0);
    ck_assert_int_eq(a.numeric, 0);
    ck_assert_int_eq(adm_addr_is_loopback(&a), 0);
    adm_addr_free(&a);
    ck_assert_int_eq(adm_addr_parse(&a, "db_1:5432", 1, why, sizeof(why)), 0);
    adm_addr_free(&a);
    ck_assert_int_eq(adm_addr_parse(&a, "localhost:65535", 1, why, sizeof(why)), 0);
    ck_assert_uint_eq(a.port, 65535);
    adm_addr_free(&a);
    ck_assert_int_eq(adm_addr_parse(&a, "localhost:65535", 0, why, sizeof(why)), -1);
    adm_addr_free(&a);
    adm_addr_free(NULL);
}
END_TEST

static Suite *addr_suite(void)
{
    Suite *s = suite_create("admin_addr");
    TCase *tc = tcase_create("addr");
    tcase_add_test(tc, cidr_matching);
    tcase_add_test(tc, address_parsing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(addr_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
