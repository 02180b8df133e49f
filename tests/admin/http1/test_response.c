/*
 * tests/admin/http1/test_response.c - unit tests of admin/http1/response.c:
 * the heads it refuses although llhttp takes them, the fields it collects,
 * keep-alive and framing as the proxy asks for them, and bodies decoded
 * whole and byte by byte.
 */
#include "admin/http1/response.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAW(s) (s), (sizeof(s) - 1)
#define MAX (64 * 1024)

static struct h1_resp r; /* 256 fields: too big for Check's small stacks */

struct sink {
    char b[4096];
    size_t n;
};

static void collect(void *ctx, const char *data, size_t len)
{
    struct sink *s = ctx;

    ck_assert_uint_le(s->n + len, sizeof(s->b));
    memcpy(s->b + s->n, data, len);
    s->n += len;
}

static int head(const char *d, size_t n, size_t *hl)
{
    *hl = 0;
    return h1_resp_parse_head(&r, d, n, MAX, hl);
}

START_TEST(head_ok)
{
    static const char h[] = "HTTP/1.1 200 Fine Thanks\r\nContent-Length: 2\r\nX-A:  v \r\n"
                            "Empty:\r\n\r\nok";
    size_t hl;

    ck_assert_int_eq(head(RAW(h), &hl), 1);
    ck_assert_uint_eq(hl, sizeof(h) - 1 - 2);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.status_text.len, 11);
    ck_assert(memcmp(r.status_text.ptr, "Fine Thanks", 11) == 0);
    ck_assert_uint_eq(r.nhdr, 3);
    ck_assert(h1_name_is(&r.hdr[0].name, "content-length"));
    ck_assert(h1_name_is(&r.hdr[1].name, "x-a"));
    ck_assert_uint_eq(r.hdr[1].value.len, 2); /* llhttp drops leading OWS only */
    ck_assert(memcmp(r.hdr[1].value.ptr, "v ", 2) == 0);
    ck_assert_uint_eq(r.hdr[2].value.len, 0);
    ck_assert(h1_resp_keep_alive(&r));
    ck_assert(!h1_resp_chunked(&r));
    ck_assert(!h1_resp_needs_eof(&r));
}
END_TEST

START_TEST(head_no_reason)
{
    size_t hl;

    ck_assert_int_eq(head(RAW("HTTP/1.1 204\r\n\r\n"), &hl), 1);
    ck_assert_int_eq(r.status, 204);
    ck_assert_ptr_null(r.status_text.ptr);
}
END_TEST

START_TEST(head_incomplete)
{
    static const char h[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    size_t hl;

    for (size_t n = 0; n < sizeof(h) - 1; n++)
        ck_assert_int_eq(head(h, n, &hl), 0);
    ck_assert_int_eq(head(RAW(h), &hl), 1);
    /* at the limit and still incomplete: refused */
    ck_assert_int_eq(h1_resp_parse_head(&r, h, sizeof(h) - 2, sizeof(h) - 2, &hl), -1);
}
END_TEST

START_TEST(head_refused)
{
    static const char *const bad[] = {
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 0200 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\r\n: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\n:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n",
        /* both framings (RFC 9112 6.3: reject or chunked; a desync either way) */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "garbage\r\n\r\n",
    };
    size_t hl;

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        ck_assert_msg(head(bad[k], strlen(bad[k]), &hl) == -1, "accepted: %s", bad[k]);
        ck_assert(!r.too_many);
    }
    ck_assert_int_eq(head(RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked \r\n\r\n"), &hl), 1);
    ck_assert(h1_resp_chunked(&r));
}
END_TEST

START_TEST(head_too_many)
{
    static char h[16384];
    size_t n = 0, hl;
    int k;

    n += (size_t)snprintf(h + n, sizeof(h) - n, "HTTP/1.1 200 OK\r\n");
    for (k = 0; k < H1_RESP_MAX_HEADERS; k++)
        n += (size_t)snprintf(h + n, sizeof(h) - n, "X-%d: v\r\n", k);
    memcpy(h + n, "\r\n", 2);
    ck_assert_int_eq(head(h, n + 2, &hl), 1);
    ck_assert_uint_eq(r.nhdr, H1_RESP_MAX_HEADERS);
    n += (size_t)snprintf(h + n, sizeof(h) - n, "X-last: v\r\n\r\n");
    ck_assert_int_eq(head(h, n, &hl), -1);
    ck_assert(r.too_many);
}
END_TEST

START_TEST(keep_alive_rules)
{
    size_t hl;

    ck_assert_int_eq(
        head(RAW("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"), &hl), 1);
    ck_assert(!h1_resp_keep_alive(&r));
    ck_assert_int_eq(head(RAW("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"), &hl), 1);
    ck_assert(!h1_resp_keep_alive(&r));
    ck_assert_int_eq(
        head(RAW("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"), &hl),
        1);
    ck_assert(h1_resp_keep_alive(&r));
    ck_assert_int_eq(head(RAW("HTTP/1.1 200 OK\r\n\r\n"), &hl), 1);
    ck_assert(h1_resp_needs_eof(&r));
}
END_TEST

START_TEST(interim_then_final)
{
    static const char d[] = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    struct sink s = {.n = 0};
    size_t hl, hl2, used;

    ck_assert_int_eq(head(RAW(d), &hl), 1);
    ck_assert_int_eq(r.status, 103);
    ck_assert_int_eq(head(d + hl, sizeof(d) - 1 - hl, &hl2), 1);
    ck_assert_int_eq(r.status, 200);
    h1_resp_begin_body(&r);
    ck_assert(!r.msg_done);
    ck_assert_int_eq(h1_resp_feed_body(&r, d + hl + hl2, 3, &used, collect, &s), 0);
    ck_assert_uint_eq(used, 3);
    ck_assert(r.msg_done);
    ck_assert_uint_eq(s.n, 3);
    ck_assert(memcmp(s.b, "abc", 3) == 0);
}
END_TEST

START_TEST(empty_body_done_at_once)
{
    size_t hl;

    ck_assert_int_eq(head(RAW("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), &hl), 1);
    h1_resp_begin_body(&r);
    ck_assert(r.msg_done);
}
END_TEST

START_TEST(chunked_byte_by_byte)
{
    static const char d[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nT: x\r\n\r\nNEXT";
    struct sink s = {.n = 0};
    size_t hl, i, used;

    ck_assert_int_eq(head(RAW(d), &hl), 1);
    h1_resp_begin_body(&r);
    for (i = hl; i < sizeof(d) - 1 && !r.msg_done; i++) {
        ck_assert_int_eq(h1_resp_feed_body(&r, d + i, 1, &used, collect, &s), 0);
        ck_assert_uint_eq(used, 1);
    }
    ck_assert(r.msg_done);
    ck_assert_str_eq(d + i, "NEXT");
    ck_assert_uint_eq(s.n, 12);
    ck_assert(memcmp(s.b, "hello, world", 12) == 0);
    /* a raw forwarder passes no callback and gets where the message ends */
    ck_assert_int_eq(head(RAW(d), &hl), 1);
    h1_resp_begin_body(&r);
    ck_assert_int_eq(h1_resp_feed_body(&r, d + hl, sizeof(d) - 1 - hl, &used, NULL, NULL), 0);
    ck_assert(r.msg_done);
    ck_assert_str_eq(d + hl + used, "NEXT");
}
END_TEST

/* Trailer fields are kept as lines, the same whole or byte by byte, the
 * head's fields untouched; a trailer name that is no token is refused. */
START_TEST(chunked_trailers)
{
    static const char d[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-H: 1\r\n\r\n"
                            "2\r\nhi\r\n0\r\nGrpc-Status: 0\r\nEmpty:\r\nX-T:  a b\r\n\r\n";
    static const char want[] = "Grpc-Status: 0\r\nEmpty: \r\nX-T: a b\r\n";
    static const char bad[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "0\r\nBad Name: x\r\n\r\n";
    struct sink s = {.n = 0};
    size_t hl, used;

    for (int step = 0; step < 2; step++) {
        ck_assert_int_eq(head(RAW(d), &hl), 1);
        ck_assert_uint_eq(h1_resp_trailers(&r).len, 0);
        h1_resp_begin_body(&r);
        for (size_t i = hl; i < sizeof(d) - 1;) {
            size_t n = step ? 1 : sizeof(d) - 1 - i;
            ck_assert_int_eq(h1_resp_feed_body(&r, d + i, n, &used, collect, &s), 0);
            i += n;
        }
        ck_assert(r.msg_done);
        ck_assert_uint_eq(r.nhdr, 2);
        ck_assert_uint_eq(h1_resp_trailers(&r).len, sizeof(want) - 1);
        ck_assert(memcmp(h1_resp_trailers(&r).ptr, want, sizeof(want) - 1) == 0);
        ck_assert(!r.trailers_dropped);
    }
    ck_assert_int_eq(head(RAW(bad), &hl), 1);
    h1_resp_begin_body(&r);
    ck_assert_int_eq(h1_resp_feed_body(&r, bad + hl, sizeof(bad) - 1 - hl, &used, NULL, NULL), -1);
}
END_TEST

/* Trailers past H1_RESP_TRAILERS_MAX: the fields that fit are kept whole,
 * the others dropped and said so. */
START_TEST(chunked_trailers_bounded)
{
    static char d[3 * H1_RESP_TRAILERS_MAX];
    size_t n, hl, used;

    n = (size_t)snprintf(d, sizeof(d),
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: ");
    memset(d + n, 'b', H1_RESP_TRAILERS_MAX);
    n += H1_RESP_TRAILERS_MAX;
    n += (size_t)snprintf(d + n, sizeof(d) - n, "\r\nC: 3\r\n\r\n");
    ck_assert_int_eq(head(d, n, &hl), 1);
    h1_resp_begin_body(&r);
    ck_assert_int_eq(h1_resp_feed_body(&r, d + hl, n - hl, &used, NULL, NULL), 0);
    ck_assert(r.msg_done);
    ck_assert(r.trailers_dropped);
    ck_assert_uint_eq(h1_resp_trailers(&r).len, 12);
    ck_assert(memcmp(h1_resp_trailers(&r).ptr, "A: 1\r\nC: 3\r\n", 12) == 0);
}
END_TEST

START_TEST(chunked_invalid)
{
    static const char d[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    size_t hl, used;

    ck_assert_int_eq(head(RAW(d), &hl), 1);
    h1_resp_begin_body(&r);
    ck_assert_int_eq(h1_resp_feed_body(&r, d + hl, sizeof(d) - 1 - hl, &used, NULL, NULL), -1);
    ck_assert_str_eq(h1_resp_error(&r), "HPE_INVALID_CHUNK_SIZE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_response");
    TCase *tc = tcase_create("response");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, head_ok);
    tcase_add_test(tc, head_no_reason);
    tcase_add_test(tc, head_incomplete);
    tcase_add_test(tc, head_refused);
    tcase_add_test(tc, head_too_many);
    tcase_add_test(tc, keep_alive_rules);
    tcase_add_test(tc, interim_then_final);
    tcase_add_test(tc, empty_body_done_at_once);
    tcase_add_test(tc, chunked_byte_by_byte);
    tcase_add_test(tc, chunked_trailers);
    tcase_add_test(tc, chunked_trailers_bounded);
    tcase_add_test(tc, chunked_invalid);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
