/*
 * test_grpc.c - gateway/grpc.c: the gRPC status each of our HTTP answers
 * maps to (the map first, then gRPC's own), grpc-message's
 * percent-encoding (PROTOCOL-HTTP2: space and visible ASCII but '%' as
 * they are, every other byte as upper-case %XX, cut only at a whole
 * escape), and the grpc-status read from an upstream's head or trailers.
 */
#include "gateway/grpc.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(codes_by_status)
{
    static const int map[][2] = {
        {404, 12}, {405, 12}, {501, 12},         /* no route, no method: UNIMPLEMENTED */
        {502, 14}, {503, 14}, {421, 14},         /* no server, failed connection: UNAVAILABLE */
        {504, 4},  {408, 4},                     /* time ran out: DEADLINE_EXCEEDED */
        {413, 8},  {429, 8},  {431, 8},          /* over a limit: RESOURCE_EXHAUSTED */
        {400, 13}, {500, 13},                    /* INTERNAL, as gRPC's own map says for 400 */
        {401, 16}, {403, 7},                     /* gRPC's own map */
        {417, 2},  {505, 2},  {200, 2},  {0, 2}, /* anything else: UNKNOWN */
    };

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        ck_assert_msg(gw_grpc_code(map[i][0]) == map[i][1], "HTTP %d: got %d, want %d", map[i][0],
                      gw_grpc_code(map[i][0]), map[i][1]);
}
END_TEST

START_TEST(messages)
{
    /* Envoy's words where it has them: clients and dashboards know them */
    ck_assert_str_eq(gw_grpc_message(503), "no healthy upstream");
    ck_assert_str_eq(gw_grpc_message(504), "upstream request timeout");
    for (int s = 100; s < 600; s++) {
        const char *m = gw_grpc_message(s);
        char enc[512];
        ck_assert(m && *m);
        /* plain ASCII: sent as it is */
        ck_assert_uint_eq(gw_grpc_pct_encode(enc, sizeof(enc), m, strlen(m)), strlen(m));
    }
}
END_TEST

START_TEST(pct_encode)
{
    char all[256], out[3 * 256 + 1];
    size_t n;

    n = gw_grpc_pct_encode(out, sizeof(out), "no route for /a b~", 18);
    ck_assert_uint_eq(n, 18);
    ck_assert_mem_eq(out, "no route for /a b~", 18);
    n = gw_grpc_pct_encode(out, sizeof(out), "100%\tcaf\xc3\xa9\n\x7f", 12);
    out[n] = '\0';
    ck_assert_str_eq(out, "100%25%09caf%C3%A9%0A%7F");
    /* every byte: 0x20..0x7e but '%' as is, the rest escaped */
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    n = gw_grpc_pct_encode(out, sizeof(out), all, 256);
    ck_assert_uint_eq(n, 94 + 3 * (256 - 94));
    for (size_t i = 0, o = 0; i < 256; i++) {
        if (i >= 0x20 && i <= 0x7e && i != '%') {
            ck_assert_int_eq((unsigned char)out[o], i);
            o++;
        } else {
            char want[4];
            static const char hex[] = "0123456789ABCDEF";
            want[0] = '%';
            want[1] = hex[i >> 4];
            want[2] = hex[i & 15];
            ck_assert_mem_eq(out + o, want, 3);
            o += 3;
        }
    }
    /* too little room: cut before an escape that does not fit whole */
    ck_assert_uint_eq(gw_grpc_pct_encode(out, 5, "abcd%", 5), 4);
    ck_assert_uint_eq(gw_grpc_pct_encode(out, 6, "abcd%", 5), 4);
    ck_assert_uint_eq(gw_grpc_pct_encode(out, 7, "abcd%", 5), 7);
    ck_assert_uint_eq(gw_grpc_pct_encode(out, 0, "a", 1), 0);
}
END_TEST

START_TEST(status_values)
{
    ck_assert_int_eq(gw_grpc_status_value("0", 1), 0);
    ck_assert_int_eq(gw_grpc_status_value("14", 2), 14);
    ck_assert_int_eq(gw_grpc_status_value(" 16\t", 4), 16);
    /* what a gRPC client would not know is UNKNOWN to it, and to us */
    ck_assert_int_eq(gw_grpc_status_value("17", 2), 2);
    ck_assert_int_eq(gw_grpc_status_value("123", 3), 2);
    ck_assert_int_eq(gw_grpc_status_value("-1", 2), 2);
    ck_assert_int_eq(gw_grpc_status_value("1a", 2), 2);
    ck_assert_int_eq(gw_grpc_status_value("", 0), 2);
}
END_TEST

static struct h1_header field(const char *name, const char *value)
{
    return (struct h1_header){{name, strlen(name)}, {value, strlen(value)}};
}

START_TEST(status_in_head)
{
    struct h1_header h[3] = {
        field("Content-Type", "application/grpc"),
        field("Grpc-Status", "5"),
        field("grpc-message", "x"),
    };

    ck_assert_int_eq(gw_grpc_status_in(h, 3), 5);
    ck_assert_int_eq(gw_grpc_status_in(h, 1), -1);
    ck_assert_int_eq(gw_grpc_status_in(NULL, 0), -1);
}
END_TEST

START_TEST(status_in_lines)
{
    static const char t1[] = "grpc-message: a\r\nGRPC-STATUS: 13\r\n";
    static const char t2[] = "x-grpc-status: 3\r\ngrpc-status-details-bin: AA\r\n";
    static const char t3[] = "grpc-status:7"; /* no line end: still read */

    ck_assert_int_eq(gw_grpc_status_in_lines(t1, sizeof(t1) - 1), 13);
    ck_assert_int_eq(gw_grpc_status_in_lines(t2, sizeof(t2) - 1), -1);
    ck_assert_int_eq(gw_grpc_status_in_lines(t3, sizeof(t3) - 1), 7);
    ck_assert_int_eq(gw_grpc_status_in_lines("", 0), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_grpc");
    TCase *tc = tcase_create("grpc");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, codes_by_status);
    tcase_add_test(tc, messages);
    tcase_add_test(tc, pct_encode);
    tcase_add_test(tc, status_values);
    tcase_add_test(tc, status_in_head);
    tcase_add_test(tc, status_in_lines);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
