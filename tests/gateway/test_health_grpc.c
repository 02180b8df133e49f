/*
 * test_health_grpc.c - gateway/health_grpc.c's pure parts: the request
 * message as bytes (service "" left out, as proto3 leaves a default out;
 * a long service's two-byte length), the HealthCheckResponse read (the
 * statuses, fields it does not know skipped, the last status winning, a
 * message cut short or not protobuf refused), the gRPC message framing
 * of a unary answer, and the verdict on a whole answer. The call itself
 * runs against a real grpcio server in tests/e2e/test_health_grpc.py.
 */
#include "gateway/health_grpc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B(s) (const unsigned char *)(s), sizeof(s) - 1

START_TEST(request_empty_service)
{
    unsigned char out[16];

    /* the field is left out: an empty message in a 5-byte frame */
    ck_assert_uint_eq(gw_hgrpc_request("", out, sizeof(out)), 5);
    ck_assert_mem_eq(out, "\0\0\0\0\0", 5);
    ck_assert_uint_eq(gw_hgrpc_request(NULL, out, sizeof(out)), 5);
    ck_assert_mem_eq(out, "\0\0\0\0\0", 5);
}
END_TEST

START_TEST(request_service)
{
    unsigned char out[64];
    static const char want[] = "\0\0\0\0\x0b"
                               "\x0a\x09"
                               "echo.Echo";

    ck_assert_uint_eq(gw_hgrpc_request("echo.Echo", out, sizeof(out)), sizeof(want) - 1);
    ck_assert_mem_eq(out, want, sizeof(want) - 1);
}
END_TEST

START_TEST(request_sizes)
{
    char svc[201];
    unsigned char out[256], guard[4] = {0xee, 0xee, 0xee, 0xee};

    memset(svc, 'a', 200);
    svc[200] = '\0';
    /* 200 bytes: a two-byte length (0xc8 0x01) */
    ck_assert_uint_eq(gw_hgrpc_request(svc, out, sizeof(out)), 5 + 1 + 2 + 200);
    ck_assert_mem_eq(out, "\0\0\0\0\xcb\x0a\xc8\x01", 8);
    ck_assert_mem_eq(out + 8, svc, 200);
    /* too small a buffer: the length, nothing written */
    ck_assert_uint_eq(gw_hgrpc_request("echo", guard, 3), 11);
    ck_assert_mem_eq(guard, "\xee\xee\xee\xee", 4);
    ck_assert_uint_eq(gw_hgrpc_request("echo", NULL, 0), 11);
}
END_TEST

/* gw_hgrpc_response's status of <p>, or -100 when it refused the bytes. */
static int32_t status_of(const unsigned char *p, size_t n)
{
    int32_t st = 99;
    return gw_hgrpc_response(p, n, &st) < 0 ? -100 : st;
}

START_TEST(response_statuses)
{
    ck_assert_int_eq(status_of(B("\x08\x01")), GW_HGRPC_SERVING);
    ck_assert_int_eq(status_of(B("\x08\x02")), GW_HGRPC_NOT_SERVING);
    ck_assert_int_eq(status_of(B("\x08\x03")), GW_HGRPC_SERVICE_UNKNOWN);
    ck_assert_int_eq(status_of(B("\x08\x00")), GW_HGRPC_UNKNOWN);
    /* proto3 leaves UNKNOWN (0) out: an empty message says it */
    ck_assert_int_eq(status_of(B("")), GW_HGRPC_UNKNOWN);
    /* an enum value we do not know, and a negative one (ten bytes) */
    ck_assert_int_eq(status_of(B("\x08\x07")), 7);
    ck_assert_int_eq(status_of(B("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")), -1);
    /* a field written twice: the last one counts */
    ck_assert_int_eq(status_of(B("\x08\x02\x08\x01")), GW_HGRPC_SERVING);
    ck_assert_int_eq(status_of(B("\x08\x01\x08\x02")), GW_HGRPC_NOT_SERVING);
}
END_TEST

START_TEST(response_unknown_fields)
{
    /* field 2 bytes, 3 fixed32, 4 fixed64, 5 varint, around the status */
    ck_assert_int_eq(status_of(B("\x12\x03"
                                 "abc"
                                 "\x08\x01"
                                 "\x1d\x01\x02\x03\x04"
                                 "\x21\x01\x02\x03\x04\x05\x06\x07\x08"
                                 "\x28\x96\x01")),
                     GW_HGRPC_SERVING);
    /* a large field number (2^29 - 1), and an empty bytes field */
    ck_assert_int_eq(status_of(B("\xf8\xff\xff\xff\x0f\x05\x08\x02\x7a\x00")),
                     GW_HGRPC_NOT_SERVING);
    /* field 1 with another wire type is not the status: skipped */
    ck_assert_int_eq(status_of(B("\x0d\x01\x00\x00\x00")), GW_HGRPC_UNKNOWN);
    ck_assert_int_eq(status_of(B("\x0a\x01\x01")), GW_HGRPC_UNKNOWN);
}
END_TEST

START_TEST(response_truncated)
{
    ck_assert_int_eq(status_of(B("\x08")), -100);     /* no value */
    ck_assert_int_eq(status_of(B("\x08\x80")), -100); /* a varint cut short */
    ck_assert_int_eq(status_of(B("\x08\x01\x12\x05"
                                 "ab")),
                     -100);                                       /* bytes cut short */
    ck_assert_int_eq(status_of(B("\x12")), -100);                 /* no length */
    ck_assert_int_eq(status_of(B("\x1d\x01\x02\x03")), -100);     /* fixed32 cut short */
    ck_assert_int_eq(status_of(B("\x21\x01\x02\x03\x04")), -100); /* fixed64 cut short */
    ck_assert_int_eq(status_of(B("\x80")), -100);                 /* a key cut short */
}
END_TEST

START_TEST(response_garbage)
{
    ck_assert_int_eq(status_of(B("\x00\x01")), -100); /* field 0 */
    ck_assert_int_eq(status_of(B("\x0b\x0c")), -100); /* a group: not proto3 */
    ck_assert_int_eq(status_of(B("\x0f\x01")), -100); /* wire type 7 */
    ck_assert_int_eq(status_of(B("\x0e\x01")), -100); /* wire type 6 */
    /* a varint over ten bytes, or whose tenth byte passes 64 bits */
    ck_assert_int_eq(status_of(B("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")), -100);
    ck_assert_int_eq(status_of(B("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02")), -100);
    /* a length past the end, and one past 2^63 */
    ck_assert_int_eq(status_of(B("\x12\xff\xff\xff\xff\x0f")), -100);
    ck_assert_int_eq(status_of(B("\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")), -100);
    ck_assert_int_eq(status_of(B("HTTP/1.1 200 OK\r\n")), -100);
}
END_TEST

START_TEST(frame_parse)
{
    const unsigned char *m = NULL;
    size_t n = 99;

    ck_assert_int_eq(gw_hgrpc_frame(B(""), &m, &n), 0);
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0"), &m, &n), 0);
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0\0\x02\x08"), &m, &n), 0);
    /* a length far past what came: still only the start of one */
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\xff\xff\xff\xff\x08\x01"), &m, &n), 0);
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0\0\x02\x08\x01"), &m, &n), 1);
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(m, "\x08\x01", 2);
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0\0\0"), &m, &n), 1);
    ck_assert_uint_eq(n, 0);
    /* compressed (we accepted no encoding), a flag that is no flag */
    ck_assert_int_eq(gw_hgrpc_frame(B("\x01"), &m, &n), -1);
    ck_assert_int_eq(gw_hgrpc_frame(B("\x01\0\0\0\x02\x08\x01"), &m, &n), -1);
    ck_assert_int_eq(gw_hgrpc_frame(B("\x80\0\0\0\0"), &m, &n), -1);
    /* a second message, or bytes after the first */
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0\0\x02\x08\x01\0\0\0\0\0"), &m, &n), -1);
    ck_assert_int_eq(gw_hgrpc_frame(B("\0\0\0\0\x02\x08\x01x"), &m, &n), -1);
}
END_TEST

/* A 200 with a gRPC content-type, grpc-status 0 and <body>. */
static void answer(struct gw_hgrpc_answer *a, const char *body, size_t n)
{
    memset(a, 0, sizeof(*a));
    a->http_status = 200;
    a->grpc_type = 1;
    a->grpc_status = 0;
    memcpy(a->body, body, n);
    a->len = n;
}

#define ANSWER(a, s) answer(a, s, sizeof(s) - 1)

/* The verdict on <a>: 1, or 0 with <why> wanted. */
static void verdict_is(const struct gw_hgrpc_answer *a, int want, const char *why)
{
    char got[64] = "";

    ck_assert_int_eq(gw_hgrpc_verdict(a, got, sizeof(got)), want);
    if (why)
        ck_assert_str_eq(got, why);
}

START_TEST(verdicts)
{
    struct gw_hgrpc_answer a;

    ANSWER(&a, "\0\0\0\0\x02\x08\x01");
    verdict_is(&a, 1, NULL);
    ANSWER(&a, "\0\0\0\0\x02\x08\x02");
    verdict_is(&a, 0, "NOT_SERVING");
    ANSWER(&a, "\0\0\0\0\x02\x08\x03");
    verdict_is(&a, 0, "SERVICE_UNKNOWN");
    ANSWER(&a, "\0\0\0\0\0");
    verdict_is(&a, 0, "UNKNOWN");
    ANSWER(&a, "\0\0\0\0\x02\x08\x09");
    verdict_is(&a, 0, "serving status 9");
    ANSWER(&a, "\0\0\0\0\x02\x08");
    verdict_is(&a, 0, "answer cut short");
    ANSWER(&a, "");
    verdict_is(&a, 0, "answer cut short");
    ANSWER(&a, "\x01\0\0\0\x02\x08\x01");
    verdict_is(&a, 0, "malformed gRPC message");
    ANSWER(&a, "\0\0\0\0\x01\x08");
    verdict_is(&a, 0, "malformed HealthCheckResponse");
    ANSWER(&a, "\0\0\0\0\x02\x08\x01");
    a.overflow = 1;
    verdict_is(&a, 0, "answer over 512 bytes");
}
END_TEST

START_TEST(verdicts_before_the_message)
{
    struct gw_hgrpc_answer a;

    /* each check comes before the message is read: a SERVING body does
     * not save an answer that failed them */
    ANSWER(&a, "\0\0\0\0\x02\x08\x01");
    a.grpc_status = 5;
    verdict_is(&a, 0, "grpc-status 5");
    a.grpc_status = -1;
    verdict_is(&a, 0, "no grpc-status");
    a.grpc_status = 0;
    a.grpc_type = 0;
    verdict_is(&a, 0, "not a gRPC answer (content-type)");
    a.grpc_type = 1;
    a.http_status = 503;
    verdict_is(&a, 0, "HTTP status 503");
    a.http_status = 0;
    verdict_is(&a, 0, "no response head");
    a.http_status = 200;
    a.reset = 2;
    verdict_is(&a, 0, "stream reset (HTTP/2 error 2)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_health_grpc");
    TCase *tc = tcase_create("health_grpc");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, request_empty_service);
    tcase_add_test(tc, request_service);
    tcase_add_test(tc, request_sizes);
    tcase_add_test(tc, response_statuses);
    tcase_add_test(tc, response_unknown_fields);
    tcase_add_test(tc, response_truncated);
    tcase_add_test(tc, response_garbage);
    tcase_add_test(tc, frame_parse);
    tcase_add_test(tc, verdicts);
    tcase_add_test(tc, verdicts_before_the_message);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
