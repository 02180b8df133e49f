/*
 * tests/admin/http1/test_token.c - unit tests of admin/http1/token.h and
 * token.c: every class against its RFC definition, written out here as a
 * list of characters, for all 256 byte values; then the field-name and list
 * helpers.
 */
#include "admin/http1/token.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static bool alnum(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool one_of(int c, const char *set)
{
    return c != 0 && strchr(set, c) != NULL;
}

START_TEST(classes_all_bytes)
{
    for (int c = 0; c < 256; c++) {
        unsigned char u = (unsigned char)c;
        bool tchar = alnum(c) || one_of(c, "!#$%&'*+-.^_`|~");          /* RFC 9110 5.6.2 */
        bool unreserved = alnum(c) || one_of(c, "-._~");                /* RFC 3986 2.3 */
        bool regname = unreserved || one_of(c, "!$&'()*+,;=");          /* RFC 3986 3.2.2 */
        bool field = c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f); /* RFC 9110 5.5 */

        ck_assert_msg(h1_is_tchar(u) == tchar, "tchar 0x%02x", c);
        ck_assert_msg(h1_is_unreserved(u) == unreserved, "unreserved 0x%02x", c);
        ck_assert_msg(h1_is_regname_char(u) == regname, "reg-name 0x%02x", c);
        ck_assert_msg(h1_is_field_byte(u) == field, "field byte 0x%02x", c);
        ck_assert_msg(h1_is_digit(u) == (c >= '0' && c <= '9'), "digit 0x%02x", c);
        ck_assert_msg(h1_is_alpha(u) == (alnum(c) && !h1_is_digit(u)), "alpha 0x%02x", c);
        ck_assert_int_eq(h1_lower(u), c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (c >= '0' && c <= '9')
            ck_assert_int_eq(h1_hex_value(u), c - '0');
        else if (c >= 'a' && c <= 'f')
            ck_assert_int_eq(h1_hex_value(u), c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            ck_assert_int_eq(h1_hex_value(u), c - 'A' + 10);
        else
            ck_assert_int_eq(h1_hex_value(u), -1);
    }
}
END_TEST

/* h1_lower_copy, eight bytes a step, against h1_lower a byte at a time:
 * every byte value at every position of random strings of every length up
 * to 24. */
START_TEST(lower_copy)
{
    unsigned char src[32], dst[32], want[32];
    uint32_t seed = 1;
    int bad = 0;

    for (size_t n = 1; n <= 24; n++) {
        for (unsigned c = 0; c < 256 * n; c++) {
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                src[i] = (unsigned char)(seed >> 16);
            }
            src[c % n] = (unsigned char)(c / n);
            h1_lower_copy((char *)dst, (const char *)src, n);
            for (size_t i = 0; i < n; i++)
                want[i] = h1_lower(src[i]);
            bad += memcmp(dst, want, n) != 0; /* one assertion at the end: each costs a write */
        }
    }
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(tokens)
{
    ck_assert(h1_is_token("GET", 3));
    ck_assert(h1_is_token("x-My_Header.1~", 14));
    ck_assert(!h1_is_token("", 0));
    ck_assert(!h1_is_token("a b", 3));
    ck_assert(!h1_is_token("a:b", 3));
    ck_assert(!h1_is_token("caf\xc3\xa9", 5));
    ck_assert(!h1_is_token("a\0b", 3));
}
END_TEST

START_TEST(names)
{
    struct h1_slice a = {"Content-Length", 14}, b = {"content-LENGTH", 14},
                    c = {"Content-Lengt", 13};

    ck_assert(h1_ci_eq("Content-Length", 14, "content-length"));
    ck_assert(!h1_ci_eq("Content-Length", 13, "content-length"));
    ck_assert(!h1_ci_eq("Content-Lengtx", 14, "content-length"));
    ck_assert(h1_name_is(&a, "content-length"));
    ck_assert(!h1_name_is(&c, "content-length"));
    ck_assert(h1_names_eq(&a, &b));
    ck_assert(!h1_names_eq(&a, &c));
    /* the case fold is ASCII only: '[' (0x5b) is not '{' (0x7b) */
    ck_assert(!h1_ci_eq("[", 1, "{"));
}
END_TEST

START_TEST(hop_fields)
{
    static const char *const hop[] = {"Connection", "keep-alive", "Proxy-Connection",
                                      "TE",         "Trailer",    "UPGRADE"};
    static const char *const end[] = {"Host",
                                      "Content-Length",
                                      "Transfer-Encoding",
                                      "Trailers",
                                      "T",
                                      "Upgrade-Insecure-Requests",
                                      "Keep-Alives",
                                      ""};
    size_t k;

    for (k = 0; k < sizeof(hop) / sizeof(hop[0]); k++) {
        struct h1_slice n = {hop[k], strlen(hop[k])};
        ck_assert_msg(h1_is_hop_field(&n), "%s", hop[k]);
    }
    for (k = 0; k < sizeof(end) / sizeof(end[0]); k++) {
        struct h1_slice n = {end[k], strlen(end[k])};
        ck_assert_msg(!h1_is_hop_field(&n), "%s", end[k]);
    }
}
END_TEST

/* The one list of connection fields: its lengths are its names', each is
 * found whatever its case, and the framing ones are framing, not hop. */
START_TEST(conn_fields)
{
    static const char *const framing[] = {"content-length", "TRANSFER-ENCODING"};
    static const char *const other[] = {
        "Host", "Content-Type", "Transfer", "Proxy-Authorization", "TE", ""};
    size_t k;

    for (int i = 0; i < H1_CF_COUNT; i++) {
        const struct h1_conn_field_name *f = &h1_conn_fields[i];
        struct h1_slice n = {f->name, f->len};
        ck_assert_uint_eq(f->len, strlen(f->lc));
        ck_assert_uint_eq(f->len, strlen(f->name));
        ck_assert_msg(h1_ci_eq(f->name, f->len, f->lc), "%s", f->name);
        ck_assert_int_eq(h1_conn_field(&n), i);
    }
    for (k = 0; k < sizeof(framing) / sizeof(framing[0]); k++) {
        struct h1_slice n = {framing[k], strlen(framing[k])};
        ck_assert_msg(h1_is_framing_field(&n) && !h1_is_hop_field(&n), "%s", framing[k]);
    }
    for (k = 0; k < sizeof(other) / sizeof(other[0]); k++) {
        struct h1_slice n = {other[k], strlen(other[k])};
        ck_assert_msg(!h1_is_framing_field(&n), "%s", other[k]);
    }
}
END_TEST

START_TEST(lists)
{
    static const char v[] = " close ,, Upgrade\t,keep-alive ";
    static const char *const want[] = {"close", "", "Upgrade", "keep-alive"};
    struct h1_slice list = {v, sizeof(v) - 1}, e, empty = {"", 0}, sp = {" \t ", 3};
    size_t pos = 0, k = 0;

    while (h1_list_next(list, &pos, &e)) {
        ck_assert_uint_lt(k, 4);
        ck_assert_uint_eq(e.len, strlen(want[k]));
        ck_assert(memcmp(e.ptr, want[k], e.len) == 0);
        k++;
    }
    ck_assert_uint_eq(k, 4);
    /* an empty value is one empty element */
    pos = 0;
    ck_assert(h1_list_next(empty, &pos, &e));
    ck_assert_uint_eq(e.len, 0);
    ck_assert(!h1_list_next(empty, &pos, &e));
    h1_trim_ows(&sp);
    ck_assert_uint_eq(sp.len, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_token");
    TCase *tc = tcase_create("token");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, classes_all_bytes);
    tcase_add_test(tc, lower_copy);
    tcase_add_test(tc, tokens);
    tcase_add_test(tc, names);
    tcase_add_test(tc, hop_fields);
    tcase_add_test(tc, conn_fields);
    tcase_add_test(tc, lists);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
