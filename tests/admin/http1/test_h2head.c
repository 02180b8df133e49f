/*
 * tests/admin/http1/test_h2head.c - unit tests of admin/http1/h2head.c: an
 * HTTP/2 header list in, the parsed HTTP/1.1 head (or the refusal) out.
 *
 * Each case is a list "name\0value\0name\0value\0..." run through
 * h2h_field() and h2h_end() into a fresh parser; accepted lists are
 * checked on the whole head the parser saw (p->req.head), so the exact
 * HTTP/1.1 bytes are pinned, refused ones on the result and the status.
 */
#include "admin/http1/h2head.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run {
    struct h1_req_parser p;
    struct h2h h;
    char side[65536];
    int rc;
};

/* Runs the fields of <list> (pairs of NUL-terminated strings, ended by an
 * empty name) with <lim> (NULL: defaults); <body>: DATA follows. */
static int run(struct run *r, const char *const *list, bool body, const struct h1_req_limits *lim)
{
    size_t cap;

    ck_assert_int_eq(h1_req_parser_init(&r->p, lim), 0);
    cap = lim && lim->max_header_bytes ? lim->max_header_bytes + 8192 + 2 : 32768 + 8192 + 2;
    ck_assert_uint_le(cap, sizeof(r->side));
    h2h_begin(&r->h, &r->p, r->side, cap);
    r->rc = H2H_OK;
    for (size_t i = 0; list[i]; i += 2) {
        int rc =
            h2h_field(&r->h, &r->p, list[i], strlen(list[i]), list[i + 1], strlen(list[i + 1]));
        if (rc != H2H_OK && r->rc == H2H_OK)
            r->rc = rc;
        ck_assert_int_eq(rc, r->rc); /* sticky */
    }
    if (r->rc == H2H_OK)
        r->rc = h2h_end(&r->h, &r->p, body);
    return r->rc;
}

static void done(struct run *r)
{
    h1_req_parser_free(&r->p);
}

static void head_is(struct run *r, const char *want)
{
    ck_assert_int_eq(r->rc, H2H_OK);
    ck_assert_uint_eq(r->p.req.head.len, strlen(want));
    ck_assert_mem_eq(r->p.req.head.ptr, want, strlen(want));
}

#define REQ(...) ((const char *const[]){__VA_ARGS__, NULL})
#define BASE ":method", "GET", ":scheme", "https", ":authority", "example.com", ":path", "/a?b=1"

static struct run R;

START_TEST(get_simple)
{
    run(&R, REQ(BASE, "accept", "*/*", "user-agent", "curl"), false, NULL);
    head_is(&R, "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\n"
                "user-agent: curl\r\n\r\n");
    ck_assert_int_eq(R.p.req.body_kind, H1_BODY_NONE);
    ck_assert_str_eq(R.p.req.path, "/a");
    ck_assert_mem_eq(R.p.req.host.ptr, "example.com", 11);
    done(&R);
}
END_TEST

START_TEST(pseudo_any_order)
{
    run(&R,
        REQ(":path", "/x", ":authority", "h:8443", ":scheme", "http", ":method", "HEAD", "a", "1"),
        false, NULL);
    head_is(&R, "HEAD /x HTTP/1.1\r\nHost: h:8443\r\na: 1\r\n\r\n");
    ck_assert_uint_eq(R.p.req.port, 8443);
    done(&R);
}
END_TEST

START_TEST(no_regular_fields)
{
    run(&R, REQ(BASE), false, NULL);
    head_is(&R, "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    done(&R);
}
END_TEST

START_TEST(cookies_joined)
{
    run(&R, REQ(BASE, "cookie", "a=1", "x", "y", "cookie", "b=2", "cookie", "", "cookie", "c=3"),
        false, NULL);
    head_is(&R, "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nx: y\r\n"
                "Cookie: a=1; b=2; c=3\r\n\r\n");
    done(&R);
}
END_TEST

START_TEST(body_without_length_is_chunked)
{
    run(&R, REQ(":method", "POST", ":scheme", "https", ":authority", "h", ":path", "/up"), true,
        NULL);
    head_is(&R, "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    ck_assert_int_eq(R.p.req.body_kind, H1_BODY_CHUNKED);
    done(&R);
}
END_TEST

START_TEST(body_with_length)
{
    run(&R,
        REQ(":method", "POST", ":scheme", "https", ":authority", "h", ":path", "/up",
            "content-length", "5"),
        true, NULL);
    head_is(&R, "POST /up HTTP/1.1\r\nHost: h\r\ncontent-length: 5\r\n\r\n");
    ck_assert_int_eq(R.p.req.body_kind, H1_BODY_LENGTH);
    ck_assert_uint_eq(R.p.req.content_length, 5);
    done(&R);
}
END_TEST

START_TEST(host_same_as_authority)
{
    run(&R, REQ(BASE, "host", "example.com"), false, NULL);
    head_is(&R, "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    done(&R);
}
END_TEST

START_TEST(host_without_authority)
{
    run(&R, REQ(":method", "GET", ":scheme", "http", ":path", "/", "host", "h.test"), false, NULL);
    head_is(&R, "GET / HTTP/1.1\r\nhost: h.test\r\n\r\n");
    ck_assert_mem_eq(R.p.req.host.ptr, "h.test", 6);
    done(&R);
}
END_TEST

START_TEST(no_authority_no_host_is_400)
{
    ck_assert_int_eq(run(&R, REQ(":method", "GET", ":scheme", "http", ":path", "/"), false, NULL),
                     H2H_ERROR);
    ck_assert_int_eq(R.h.status, 400);
    done(&R);
}
END_TEST

START_TEST(options_asterisk)
{
    run(&R, REQ(":method", "OPTIONS", ":scheme", "http", ":authority", "h", ":path", "*"), false,
        NULL);
    head_is(&R, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(R.p.req.form, H1_TARGET_ASTERISK);
    done(&R);
}
END_TEST

START_TEST(te_trailers)
{
    run(&R, REQ(BASE, "te", "trailers"), false, NULL);
    head_is(&R, "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nte: trailers\r\n\r\n");
    done(&R);
}
END_TEST

START_TEST(long_field_fed_in_pieces)
{
    static char v[3000];

    memset(v, 'v', sizeof(v) - 1);
    run(&R, REQ(BASE, "x-long", v), false, NULL);
    ck_assert_int_eq(R.rc, H2H_OK);
    ck_assert_uint_eq(R.p.req.nheaders, 2);
    ck_assert_uint_eq(R.p.req.headers[1].value.len, sizeof(v) - 1);
    done(&R);
}
END_TEST

/* ---- malformed: RST_STREAM PROTOCOL_ERROR ---- */

static const struct {
    const char *why;
    const char *const *list;
} bad[] = {
    {"upper case name", REQ(BASE, "Accept", "x")},
    {"space in name", REQ(BASE, "a b", "x")},
    {"empty name", REQ(BASE, "", "x")},
    {"CR in value", REQ(BASE, "a", "x\ry")},
    {"LF in value", REQ(BASE, "a", "x\nInjected: 1")},
    {"leading space", REQ(BASE, "a", " x")},
    {"trailing tab", REQ(BASE, "a", "x\t")},
    {"connection", REQ(BASE, "connection", "close")},
    {"keep-alive", REQ(BASE, "keep-alive", "5")},
    {"proxy-connection", REQ(BASE, "proxy-connection", "x")},
    {"transfer-encoding", REQ(BASE, "transfer-encoding", "chunked")},
    {"upgrade", REQ(BASE, "upgrade", "h2c")},
    {"te gzip", REQ(BASE, "te", "gzip")},
    {"te trailers, gzip", REQ(BASE, "te", "trailers, gzip")},
    {"pseudo after regular", REQ(BASE, "a", "b", ":method", "GET")},
    {"unknown pseudo", REQ(BASE, ":protocol", "websocket")},
    {"status in request", REQ(BASE, ":status", "200")},
    {"repeated method", REQ(BASE, ":method", "GET")},
    {"missing path", REQ(":method", "GET", ":scheme", "http", ":authority", "h")},
    {"missing method", REQ(":path", "/", ":scheme", "http", ":authority", "h")},
    {"missing scheme", REQ(":method", "GET", ":path", "/", ":authority", "h")},
    {"empty path", REQ(":method", "GET", ":scheme", "http", ":authority", "h", ":path", "")},
    {"absolute path",
     REQ(":method", "GET", ":scheme", "http", ":authority", "h", ":path", "http://evil/")},
    {"asterisk for GET", REQ(":method", "GET", ":scheme", "http", ":authority", "h", ":path", "*")},
    {"space in path",
     REQ(":method", "GET", ":scheme", "http", ":authority", "h", ":path", "/a HTTP/1.1")},
    {"space in method", REQ(":method", "G T", ":scheme", "http", ":authority", "h", ":path", "/")},
    {"connect", REQ(":method", "CONNECT", ":authority", "h:443")},
    {"ftp scheme", REQ(":method", "GET", ":scheme", "ftp", ":authority", "h", ":path", "/")},
    {"host differs", REQ(BASE, "host", "other.com")},
};

START_TEST(malformed)
{
    int rc = run(&R, bad[_i].list, false, NULL);

    ck_assert_msg(rc == H2H_MALFORMED, "%s: %d", bad[_i].why, rc);
    ck_assert_ptr_nonnull(R.h.reason);
    done(&R);
}
END_TEST

/* ---- what HTTP/1.1 refuses too: the parser's status ---- */

START_TEST(other_method_as_http1)
{
    run(&R, REQ(":method", "FOO", ":scheme", "http", ":authority", "h", ":path", "/"), false, NULL);
    head_is(&R, "FOO / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(R.p.req.method_id, H1_METHOD_OTHER);
    done(&R);
}
END_TEST

START_TEST(control_byte_400)
{
    run(&R, REQ(BASE, "a", "x\001y"), false, NULL);
    ck_assert_int_eq(R.rc, H2H_ERROR);
    ck_assert_int_eq(R.h.status, 400);
    done(&R);
}
END_TEST

START_TEST(bad_authority_400)
{
    run(&R, REQ(":method", "GET", ":scheme", "http", ":authority", "u@h", ":path", "/"), false,
        NULL);
    ck_assert_int_eq(R.rc, H2H_ERROR);
    ck_assert_int_eq(R.h.status, 400);
    done(&R);
}
END_TEST

START_TEST(content_length_twice_400)
{
    run(&R, REQ(BASE, "content-length", "1", "content-length", "1"), true, NULL);
    ck_assert_int_eq(R.rc, H2H_ERROR);
    ck_assert_int_eq(R.h.status, 400);
    done(&R);
}
END_TEST

/* ---- limits, as HTTP/1.1's ---- */

/* A GET for h with <k> fields "x: y" after its pseudo-header fields. */
static void list_with(const char **list, int k)
{
    size_t n = 0;

    list[n++] = ":method", list[n++] = "GET";
    list[n++] = ":scheme", list[n++] = "http";
    list[n++] = ":authority", list[n++] = "h";
    list[n++] = ":path", list[n++] = "/";
    for (int i = 0; i < k; i++)
        list[n++] = "x", list[n++] = "y";
    list[n] = NULL;
}

START_TEST(too_many_fields_431)
{
    struct h1_req_limits lim;
    const char *list[2 * 12 + 1];

    h1_req_limits_default(&lim);
    lim.max_headers = 4;
    list_with(list, 3); /* Host and 3 fields: 4 */
    ck_assert_int_eq(run(&R, list, false, &lim), H2H_OK);
    done(&R);
    list_with(list, 4);
    ck_assert_int_eq(run(&R, list, false, &lim), H2H_ERROR);
    ck_assert_int_eq(R.h.status, 431);
    done(&R);
}
END_TEST

/* An HPACK bomb: 60 fields of 1000 bytes, each a byte on the wire once
 * in the dynamic table, as plain fields or as cookie crumbs: 431 once the
 * head passes max_header_bytes, never more kept aside than the side buffer. */
static const char *const bomb_names[] = {"x", "cookie"};

START_TEST(bomb_431)
{
    struct h1_req_limits lim;
    static char v[1001];
    const char *list[2 * 64 + 1];
    size_t n = 0;

    h1_req_limits_default(&lim);
    lim.max_header_bytes = 4096;
    memset(v, 'v', sizeof(v) - 1);
    list_with(list, 0);
    n = 8;
    while (n < 2 * 64)
        list[n++] = bomb_names[_i], list[n++] = v;
    list[n] = NULL;
    ck_assert_int_eq(run(&R, list, false, &lim), H2H_ERROR);
    ck_assert_int_eq(R.h.status, 431);
    ck_assert_uint_le(R.h.len, R.h.cap);
    done(&R);
}
END_TEST

START_TEST(path_too_long_414)
{
    struct h1_req_limits lim;
    static char v[200];

    h1_req_limits_default(&lim);
    lim.max_request_line = 100;
    memset(v, 'p', sizeof(v) - 1);
    v[0] = '/';
    run(&R, REQ(":method", "GET", ":scheme", "http", ":authority", "h", ":path", v), false, &lim);
    ck_assert_int_eq(R.rc, H2H_ERROR);
    ck_assert_int_eq(R.h.status, 414);
    done(&R);
}
END_TEST

START_TEST(side_full_stops)
{
    char small[16];
    struct h2h h;

    ck_assert_int_eq(h1_req_parser_init(&R.p, NULL), 0);
    h2h_begin(&h, &R.p, small, sizeof(small));
    ck_assert_int_eq(h2h_field(&h, &R.p, ":method", 7, "GET", 3), H2H_OK);
    ck_assert_int_eq(h2h_field(&h, &R.p, ":path", 5, "/0123456789abcdef", 17), H2H_ERROR);
    ck_assert_int_eq(h.status, 414);
    ck_assert_int_eq(h2h_end(&h, &R.p, false), H2H_ERROR);
    h2h_begin(&h, &R.p, small, sizeof(small));
    ck_assert_int_eq(h2h_field(&h, &R.p, ":authority", 10, "0123456789abcdefg", 17), H2H_ERROR);
    ck_assert_int_eq(h.status, 431);
    done(&R);
}
END_TEST

/* ---- responses: lines to an HTTP/2 field list ---- */

START_TEST(response_fields)
{
    char lines[] = "Content-Type: text/plain\r\nConnection: close\r\nX-A:  v  \r\n"
                   "Transfer-Encoding: chunked\r\nnot a field\r\nKeep-Alive: 5\r\n"
                   "Set-Cookie: a=1\r\nUpgrade: x\r\nProxy-Connection: y\r\nX-Empty:\r\n"
                   "Set-Cookie: b=2\r\n";
    struct h1_header f[8];
    size_t n = h2h_fields(lines, sizeof(lines) - 1, f, 8);

    ck_assert_uint_eq(n, 5);
    ck_assert_mem_eq(f[0].name.ptr, "content-type", f[0].name.len);
    ck_assert_mem_eq(f[0].value.ptr, "text/plain", f[0].value.len);
    ck_assert_mem_eq(f[1].name.ptr, "x-a", 3);
    ck_assert_uint_eq(f[1].value.len, 1);
    ck_assert_mem_eq(f[2].value.ptr, "a=1", 3);
    ck_assert_uint_eq(f[3].name.len, 7);
    ck_assert_uint_eq(f[3].value.len, 0);
    ck_assert_mem_eq(f[4].value.ptr, "b=2", 3);
    ck_assert_uint_eq(h2h_fields(lines, sizeof(lines) - 1, f, 2), 5); /* counts past <cap> */
    ck_assert_uint_eq(h2h_fields(lines, 0, f, 8), 0);
}
END_TEST

static Suite *h2head_suite(void)
{
    Suite *s = suite_create("http1_h2head");
    TCase *ok = tcase_create("accepted"), *rej = tcase_create("refused"),
          *lim = tcase_create("limits");

    tcase_add_test(ok, get_simple);
    tcase_add_test(ok, pseudo_any_order);
    tcase_add_test(ok, no_regular_fields);
    tcase_add_test(ok, cookies_joined);
    tcase_add_test(ok, body_without_length_is_chunked);
    tcase_add_test(ok, body_with_length);
    tcase_add_test(ok, host_same_as_authority);
    tcase_add_test(ok, host_without_authority);
    tcase_add_test(ok, options_asterisk);
    tcase_add_test(ok, te_trailers);
    tcase_add_test(ok, long_field_fed_in_pieces);
    tcase_add_test(ok, response_fields);
    tcase_add_loop_test(rej, malformed, 0, (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(rej, no_authority_no_host_is_400);
    tcase_add_test(ok, other_method_as_http1);
    tcase_add_test(rej, control_byte_400);
    tcase_add_test(rej, bad_authority_400);
    tcase_add_test(rej, content_length_twice_400);
    tcase_add_test(lim, too_many_fields_431);
    tcase_add_loop_test(lim, bomb_431, 0, 2);
    tcase_add_test(lim, path_too_long_414);
    tcase_add_test(lim, side_full_stops);
    suite_add_tcase(s, ok);
    suite_add_tcase(s, rej);
    suite_add_tcase(s, lim);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(h2head_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
