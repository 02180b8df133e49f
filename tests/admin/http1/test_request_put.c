/*
 * tests/admin/http1/test_request_put.c - h1_req_put_line() and
 * h1_req_put_end() held to h1_req_feed_head(), their plain oracle.
 *
 * The put functions are the HTTP/2 path's shortcut (h2head.c): one line in
 * pieces instead of bytes through the state machine. Over many random
 * heads (lines from an alphabet with every class of byte a line may and may
 * not hold, CR and LF aside, cut into random pieces, under random limits),
 * both readings must give the same verdicts, statuses and reasons line by
 * line, and on success the same head bytes, fields and request.
 */
#include "admin/http1/request.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HEADS 40000
#define LINE_CAP 160

static uint64_t rng = 0x9e3779b97f4a7c15u;

static unsigned next(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* Bytes of every class: tchar, upper case, separators, SP, HTAB, controls,
 * DEL, obs-text; no CR or LF (the put functions' precondition). */
static const char alphabet[] = "abcxyzABCZ019-_.~!'*:/?#@[]()<>\",; \t\x01\x1f\x7f\x80\xff%=";

static size_t rand_bytes(char *d, size_t max)
{
    size_t n = next((unsigned)max + 1);

    for (size_t i = 0; i < n; i++)
        d[i] = alphabet[next(sizeof(alphabet) - 1)];
    return n;
}

static size_t put_str(char *d, const char *s)
{
    size_t n = strlen(s);

    memcpy(d, s, n);
    return n;
}

/* A request line: mostly well formed, sometimes not. */
static size_t request_line(char *d)
{
    static const char *const methods[] = {"GET", "POST", "OPTIONS", "BREW", "G@T", "", "CONNECT"};
    static const char *const versions[] = {" HTTP/1.1",  " HTTP/1.1", " HTTP/1.0", " HTTP/2.0",
                                           " HTTP/1.1 ", " http/1.1", ""};
    static const char good[] = "abz09-_.~%/?=&";
    size_t n = 0;

    if (next(8) == 0)
        return rand_bytes(d, 40);
    if (next(2)) { /* a well-formed one */
        n += put_str(d, next(2) ? "GET /" : "BREW /");
        for (size_t i = next(30); i > 0; i--)
            d[n++] = good[next(sizeof(good) - 1)];
        return n + put_str(d + n, " HTTP/1.1");
    }
    n += put_str(d + n, methods[next(7)]);
    d[n++] = ' ';
    if (next(4))
        d[n++] = next(6) ? '/' : '*';
    n += rand_bytes(d + n, next(3) ? 12 : 60);
    n += put_str(d + n, versions[next(7)]);
    return n;
}

/* A field line: known names with fitting or odd values, or anything. */
static size_t field_line(char *d)
{
    static const char *const names[] = {
        "Host", "host",   "Content-Length", "Transfer-Encoding", "Connection", "Expect",
        "X-A",  "cookie", "Upgrade"};
    static const char *const values[] = {"a",     "example.com:8080",    "12",    "chunked",
                                         "close", "100-continue",        "[::1]", "1, 2",
                                         "  x  ", "keep-alive, upgrade", "0",     "\tv"};
    size_t n = 0;

    switch (next(8)) {
    case 0:
        return rand_bytes(d, 60);
    case 1:
        n += rand_bytes(d, 8);
        d[n++] = ':';
        n += rand_bytes(d + n, 40);
        return n;
    default:
        n += put_str(d, names[next(9)]);
        n += put_str(d + n, next(5) ? ": " : ":");
        n += next(4) ? put_str(d + n, values[next(12)]) : rand_bytes(d + n, 30);
        return n;
    }
}

/* <line>[0..<n>) cut into up to four pieces, some of them empty. */
static size_t cut(const char *line, size_t n, struct h1_slice *v)
{
    size_t k = 1 + next(4), at = 0;

    for (size_t i = 0; i < k; i++) {
        size_t len = i == k - 1 ? n - at : next((unsigned)(n - at) + 1);
        v[i] = (struct h1_slice){line + at, len};
        at += len;
    }
    return k;
}

static void same_slice(const struct h1_request *a, struct h1_slice x, const struct h1_request *b,
                       struct h1_slice y)
{
    ck_assert_uint_eq(x.len, y.len);
    ck_assert_int_eq(x.ptr == NULL, y.ptr == NULL);
    if (x.ptr) {
        ck_assert_int_eq(x.ptr - a->head.ptr, y.ptr - b->head.ptr);
        ck_assert(memcmp(x.ptr, y.ptr, x.len) == 0);
    }
}

static void same_request(const struct h1_request *a, const struct h1_request *b)
{
    ck_assert_uint_eq(a->head.len, b->head.len);
    ck_assert(memcmp(a->head.ptr, b->head.ptr, a->head.len) == 0);
    same_slice(a, a->method, b, b->method);
    same_slice(a, a->target, b, b->target);
    same_slice(a, a->host, b, b->host);
    ck_assert_int_eq(a->method_id, b->method_id);
    ck_assert_uint_eq(a->version_minor, b->version_minor);
    ck_assert_int_eq(a->form, b->form);
    ck_assert_str_eq(a->path, b->path);
    ck_assert_uint_eq(a->port, b->port);
    ck_assert_uint_eq(a->nheaders, b->nheaders);
    for (size_t i = 0; i < a->nheaders; i++) {
        same_slice(a, a->headers[i].name, b, b->headers[i].name);
        same_slice(a, a->headers[i].value, b, b->headers[i].value);
    }
    ck_assert_uint_eq(a->nconnection, b->nconnection);
    ck_assert_int_eq(a->keep_alive, b->keep_alive);
    ck_assert_int_eq(a->expect_continue, b->expect_continue);
    ck_assert_int_eq(a->upgrade, b->upgrade);
    ck_assert_int_eq(a->body_kind, b->body_kind);
    ck_assert_uint_eq(a->content_length, b->content_length);
}

START_TEST(put_matches_feed)
{
    static const size_t rl_max[] = {12, 24, 40, 8192, 8192}, hb_max[] = {16, 40, 100, 32768, 32768};
    static const size_t nh_max[] = {1, 3, 100};
    unsigned ok = 0, refused = 0;

    for (int t = 0; t < HEADS; t++) {
        struct h1_req_limits lim = {0};
        struct h1_req_parser a, b;
        char line[LINE_CAP + 2];
        int ra = H1_REQ_AGAIN, rb = H1_REQ_AGAIN;
        size_t lines = next(5), used;

        h1_req_limits_default(&lim);
        lim.max_request_line = rl_max[next(5)];
        lim.max_header_bytes = hb_max[next(5)];
        lim.max_headers = nh_max[next(3)];
        ck_assert_int_eq(h1_req_parser_init(&a, &lim), 0);
        ck_assert_int_eq(h1_req_parser_init(&b, &lim), 0);
        h1_req_made_head(&a);
        h1_req_made_head(&b);
        for (size_t l = 0; l <= lines && ra == H1_REQ_AGAIN; l++) {
            struct h1_slice v[4];
            size_t n = l == 0              ? request_line(line)
                       : l == 1 && next(4) ? put_str(line, "Host: example.com")
                                           : field_line(line);
            size_t k = cut(line, n, v);

            memcpy(line + n, "\r\n", 2);
            ra = h1_req_feed_head(&a, line, n + 2, &used);
            rb = h1_req_put_line(&b, v, k);
            ck_assert_msg(ra == rb, "head %d line %zu: feed %d, put %d (%s / %s)", t, l, ra, rb,
                          a.reason ? a.reason : "-", b.reason ? b.reason : "-");
        }
        if (ra == H1_REQ_AGAIN) {
            ra = h1_req_feed_head(&a, "\r\n", 2, &used);
            rb = h1_req_put_end(&b);
            ck_assert_int_eq(ra, rb);
        }
        if (ra == H1_REQ_ERROR) {
            ck_assert_int_eq(a.status, b.status);
            ck_assert_str_eq(a.reason, b.reason);
            refused++;
        } else if (ra == H1_REQ_HEAD) {
            same_request(&a.req, &b.req);
            ok++;
        }
        h1_req_parser_free(&a);
        h1_req_parser_free(&b);
    }
    /* both kinds of verdict are exercised, not one alone */
    ck_assert_uint_gt(ok, HEADS / 40);
    ck_assert_uint_gt(refused, HEADS / 20);
}
END_TEST

static Suite *put_suite(void)
{
    Suite *s = suite_create("http1_request_put");
    TCase *tc = tcase_create("oracle");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, put_matches_feed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(put_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
