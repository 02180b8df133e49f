/*
 * tests/admin/http1/test_request.c - unit tests of admin/http1/request.c.
 *
 * Every rejection is its own test: raw bytes in, the status out, fed both in
 * one shot and one byte at a time (the verdict must not depend on how the
 * bytes arrive). Acceptance tests check the parsed head, keep-alive rules,
 * pipelining offsets, body decoding, limits at and one past the limit, and
 * the normalized path a parsed head carries.
 */
#include "admin/http1/request.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

#define RAW(s) (s), (sizeof(s) - 1)

/* The outcome of one request run through both phases. */
struct run {
    int rc;     /* H1_REQ_DONE, H1_REQ_ERROR, or H1_REQ_AGAIN if incomplete */
    int status; /* on error */
    bool head;  /* the head phase completed */
    size_t head_used;
    size_t used; /* bytes consumed in all */
    char body[8192];
    size_t body_len;
};

static int collect(void *ctx, const char *data, size_t len)
{
    struct run *r = ctx;

    ck_assert_uint_le(r->body_len + len, sizeof(r->body));
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
    return 0;
}

static size_t step_len(size_t step, size_t left)
{
    return (step != 0 && step < left) ? step : left;
}

/* Runs one request from raw[0..n) through <p>, <step> bytes per feed (0: all
 * at once). The parser is left as the request left it (no reset). */
static void run_one(struct h1_req_parser *p, const char *raw, size_t n, size_t step,
                    struct run *out)
{
    size_t off = 0, c, chunk;
    int rc;

    memset(out, 0, sizeof(*out));
    do {
        chunk = step_len(step, n - off);
        rc = h1_req_feed_head(p, raw + off, chunk, &c);
        ck_assert_uint_le(c, chunk);
        if (rc == H1_REQ_AGAIN)
            ck_assert_uint_eq(c, chunk);
        off += c;
    } while (rc == H1_REQ_AGAIN && off < n);
    /* the whole verdict, as before a request goes upstream */
    if (rc == H1_REQ_HEAD && h1_req_confirm(p) < 0)
        rc = H1_REQ_ERROR;

    if (rc == H1_REQ_HEAD) {
        out->head = true;
        out->head_used = off;
        do {
            chunk = step_len(step, n - off);
            rc = h1_req_feed_body(p, raw + off, chunk, &c, collect, out);
            ck_assert_uint_le(c, chunk);
            if (rc == H1_REQ_AGAIN)
                ck_assert_uint_eq(c, chunk);
            off += c;
        } while (rc == H1_REQ_AGAIN && off < n);
    }
    out->rc = rc;
    out->used = off;
    if (rc == H1_REQ_ERROR) {
        out->status = p->status;
        ck_assert_ptr_nonnull(p->reason);
    }
}

/* Asserts that raw[0..n) is refused with <status> under <lim> (NULL:
 * defaults), fed in one shot and byte by byte. */
static void expect_status_lim(const struct h1_req_limits *lim, const char *raw, size_t n,
                              int status)
{
    static const size_t steps[] = {0, 1, 3};
    size_t k;

    for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        struct h1_req_parser p;
        struct run *r = malloc(sizeof(*r));

        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(h1_req_parser_init(&p, lim), 0);
        run_one(&p, raw, n, steps[k], r);
        ck_assert_msg(r->rc == H1_REQ_ERROR && r->status == status,
                      "step %zu: expected status %d, got rc %d status %d (%s) for [%.*s]", steps[k],
                      status, r->rc, r->status, p.reason ? p.reason : "-", (int)n, raw);
        /* errors are sticky */
        {
            size_t c;
            ck_assert_int_eq(h1_req_feed_head(&p, "G", 1, &c), H1_REQ_ERROR);
            ck_assert_int_eq(p.status, status);
        }
        h1_req_parser_free(&p);
        free(r);
    }
}

static void expect_status(const char *raw, size_t n, int status)
{
    expect_status_lim(NULL, raw, n, status);
}

/* Parses raw[0..n) as one complete request with <lim>; fails the test unless
 * it is accepted. */
static void accept_lim(struct h1_req_parser *p, const struct h1_req_limits *lim, const char *raw,
                       size_t n, struct run *r)
{
    ck_assert_int_eq(h1_req_parser_init(p, lim), 0);
    run_one(p, raw, n, 0, r);
    ck_assert_msg(r->rc == H1_REQ_DONE, "expected DONE, got rc %d status %d (%s) for [%.*s]", r->rc,
                  r->status, p->reason ? p->reason : "-", (int)n, raw);
}

static void accept_req(struct h1_req_parser *p, const char *raw, size_t n, struct run *r)
{
    accept_lim(p, NULL, raw, n, r);
}

static bool slice_is(struct h1_slice s, const char *lit)
{
    return s.ptr != NULL && s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

#define ck_assert_slice(s, lit)                                                                    \
    ck_assert_msg(slice_is((s), (lit)), "expected \"%s\", got \"%.*s\"", (lit), (int)(s).len,      \
                  (s).ptr ? (s).ptr : "(null)")

/* One test per rejection: NAME, raw bytes, expected status. */
#define REJECT(name, raw, st)                                                                      \
    START_TEST(name)                                                                               \
    {                                                                                              \
        expect_status(RAW(raw), (st));                                                             \
    }                                                                                              \
    END_TEST

#define H11 " HTTP/1.1\r\nHost: a\r\n"
#define POST_TE "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

/* ---- rejections: framing fields ---- */

REJECT(rej_cl_and_te, "POST /" H11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400)
REJECT(rej_te_and_cl, "POST /" H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400)
REJECT(rej_cl_differing, "POST /" H11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400)
REJECT(rej_cl_repeated_same, "POST /" H11 "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
       400)
REJECT(rej_cl_list, "POST /" H11 "Content-Length: 1, 1\r\n\r\nx", 400)
REJECT(rej_cl_plus, "POST /" H11 "Content-Length: +5\r\n\r\nhello", 400)
REJECT(rej_cl_minus, "POST /" H11 "Content-Length: -5\r\n\r\n", 400)
REJECT(rej_cl_inner_space, "POST /" H11 "Content-Length: 1 2\r\n\r\n", 400)
REJECT(rej_cl_overflow, "POST /" H11 "Content-Length: 99999999999999999999\r\n\r\n", 400)
REJECT(rej_cl_2p63, "POST /" H11 "Content-Length: 9223372036854775808\r\n\r\n", 400)
REJECT(rej_cl_hex, "POST /" H11 "Content-Length: 0x5\r\n\r\n", 400)
REJECT(rej_cl_empty, "POST /" H11 "Content-Length:\r\n\r\n", 400)
REJECT(rej_cl_letters, "POST /" H11 "Content-Length: 5a\r\n\r\n", 400)
REJECT(rej_te_chunked_identity, "POST /" H11 "Transfer-Encoding: chunked, identity\r\n\r\n", 400)
REJECT(rej_te_gzip, "POST /" H11 "Transfer-Encoding: gzip\r\n\r\n", 400)
REJECT(rej_te_xchunked, "POST /" H11 "Transfer-Encoding: xchunked\r\n\r\n", 400)
REJECT(rej_te_chunked_twice, "POST /" H11 "Transfer-Encoding: chunked, chunked\r\n\r\n", 400)
REJECT(rej_te_chunked_two_fields,
       "POST /" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400)
REJECT(rej_te_chunked_then_gzip_field,
       "POST /" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400)
REJECT(rej_te_param, "POST /" H11 "Transfer-Encoding: chunked;q=1\r\n\r\n", 400)
REJECT(rej_te_empty_element, "POST /" H11 "Transfer-Encoding: chunked,\r\n\r\n", 400)
REJECT(rej_te_empty, "POST /" H11 "Transfer-Encoding:\r\n\r\n", 400)
REJECT(rej_te_http10, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400)
REJECT(rej_te_gzip_chunked_501, "POST /" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 501)
REJECT(rej_connect_with_body, "CONNECT a:443" H11 "Content-Length: 0\r\n\r\n", 400)

/* ---- rejections: chunked framing ---- */

REJECT(rej_chunk_size_junk, POST_TE "zz\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_empty, POST_TE "\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_space, POST_TE "5 \r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_leading_space, POST_TE " 5\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_minus, POST_TE "-5\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_0x, POST_TE "0x5\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_overflow, POST_TE "10000000000000000\r\n", 400)
REJECT(rej_chunk_size_2p63, POST_TE "8000000000000000\r\n", 400)
REJECT(rej_chunk_size_bare_lf, POST_TE "5\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_size_bare_cr, POST_TE "5\rhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_data_no_crlf, POST_TE "5\r\nhelloXX0\r\n\r\n", 400)
REJECT(rej_chunk_data_bare_lf, POST_TE "5\r\nhello\n0\r\n\r\n", 400)
REJECT(rej_chunk_data_bare_cr, POST_TE "5\r\nhello\r0\r\n\r\n", 400)
REJECT(rej_chunk_data_too_long, POST_TE "5\r\nhello!\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_last_bare_lf, POST_TE "5\r\nhello\r\n0\n\r\n", 400)
REJECT(rej_chunk_final_bare_lf, POST_TE "5\r\nhello\r\n0\r\n\n", 400)
REJECT(rej_chunk_ext_empty, POST_TE "5;\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_space, POST_TE "5 ;a=b\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_space_after, POST_TE "5; a=b\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_no_value, POST_TE "5;a=\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_ctl, POST_TE "5;a\x01\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_bare_lf, POST_TE "5;a=b\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_quoted_pair, POST_TE "5;a=\"b\\\"c\"\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_quote_unterminated, POST_TE "5;a=\"b\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_chunk_ext_after_quote, POST_TE "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n", 400)
/* valid per RFC 9112 7.1.1, but llhttp 8.1 cannot parse it: refused, not misread */
REJECT(rej_chunk_ext_after_token_value, POST_TE "5;a=b;c\r\nhello\r\n0\r\n\r\n", 400)
REJECT(rej_trailer_obs_fold, POST_TE "0\r\nX: a\r\n b\r\n\r\n", 400)
REJECT(rej_trailer_space_before_colon, POST_TE "0\r\nX : a\r\n\r\n", 400)
REJECT(rej_trailer_no_colon, POST_TE "0\r\nX\r\n\r\n", 400)
REJECT(rej_trailer_empty_name, POST_TE "0\r\n: a\r\n\r\n", 400)
REJECT(rej_trailer_ctl, POST_TE "0\r\nX: a\x01\r\n\r\n", 400)
REJECT(rej_trailer_bare_lf, POST_TE "0\r\nX: a\n\r\n", 400)
REJECT(rej_trailer_bare_cr, POST_TE "0\r\nX: a\rb\r\n\r\n", 400)
REJECT(rej_host_v6_empty, "GET / HTTP/1.1\r\nHost: []\r\n\r\n", 400)
REJECT(rej_host_v6_long,
       "GET / HTTP/1.1\r\nHost: [0000:0000:0000:0000:0000:0000:0000:0000:0]\r\n\r\n", 400)

/* ---- rejections: field lines ---- */

REJECT(rej_obs_fold, "GET /" H11 "X: a\r\n b\r\n\r\n", 400)
REJECT(rej_obs_fold_tab, "GET /" H11 "X: a\r\n\tb\r\n\r\n", 400)
REJECT(rej_first_line_folded, "GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400)
REJECT(rej_space_before_colon, "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400)
REJECT(rej_tab_before_colon, "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400)
REJECT(rej_no_colon, "GET /" H11 "Xyz\r\n\r\n", 400)
REJECT(rej_empty_name, "GET /" H11 ": a\r\n\r\n", 400)
REJECT(rej_name_bad_char, "GET /" H11 "X(y): a\r\n\r\n", 400)
REJECT(rej_name_nul, "GET /" H11 "X\0y: a\r\n\r\n", 400)
REJECT(rej_name_nonascii, "GET /" H11 "X\xc3\xa9: a\r\n\r\n", 400)
REJECT(rej_value_nul, "GET /" H11 "X: a\0b\r\n\r\n", 400)
REJECT(rej_value_ctl,
       "GET /" H11 "X: a\x01"
       "b\r\n\r\n",
       400)
REJECT(rej_value_del,
       "GET /" H11 "X: a\x7f"
       "b\r\n\r\n",
       400)
REJECT(rej_value_esc, "GET /" H11 "X: \x1b[0m\r\n\r\n", 400)
REJECT(rej_value_bare_cr, "GET /" H11 "X: a\rb\r\n\r\n", 400)
REJECT(rej_head_bare_cr_end, "GET /" H11 "\rX", 400)
REJECT(rej_rl_bare_cr, "GET / HTTP/1.1\rHost: a\r\n\r\n", 400)
REJECT(rej_leading_bare_cr, "\rGET /" H11 "\r\n", 400)
REJECT(rej_conn_bad_token, "GET /" H11 "Connection: close, a b\r\n\r\n", 400)
REJECT(rej_conn_bad_char, "GET /" H11 "Connection: \"close\"\r\n\r\n", 400)

/* ---- rejections: Host ---- */

REJECT(rej_host_missing, "GET / HTTP/1.1\r\n\r\n", 400)
REJECT(rej_host_missing_absolute, "GET http://a/ HTTP/1.1\r\n\r\n", 400)
REJECT(rej_host_twice, "GET /" H11 "Host: a\r\n\r\n", 400)
REJECT(rej_host_twice_differing, "GET /" H11 "Host: b\r\n\r\n", 400)
REJECT(rej_host_twice_http10, "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400)
REJECT(rej_host_empty, "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400)
REJECT(rej_host_userinfo, "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400)
REJECT(rej_host_space, "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400)
REJECT(rej_host_slash, "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400)
REJECT(rej_host_backslash, "GET / HTTP/1.1\r\nHost: a\\b\r\n\r\n", 400)
REJECT(rej_host_port_big, "GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", 400)
REJECT(rej_host_port_long, "GET / HTTP/1.1\r\nHost: a:000080\r\n\r\n", 400)
REJECT(rej_host_port_empty, "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", 400)
REJECT(rej_host_port_alpha, "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400)
REJECT(rej_host_two_ports, "GET / HTTP/1.1\r\nHost: a:80:81\r\n\r\n", 400)
REJECT(rej_host_no_name, "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400)
REJECT(rej_host_dotdot, "GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", 400)
REJECT(rej_host_v6_open, "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400)
REJECT(rej_host_v6_bad, "GET / HTTP/1.1\r\nHost: [::g]\r\n\r\n", 400)
REJECT(rej_host_v6_zone, "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 400)
REJECT(rej_host_v6_junk_after, "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400)
REJECT(rej_host_v4_in_brackets, "GET / HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n", 400)
REJECT(rej_host_bad_pct, "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400)

/* ---- rejections: request line ---- */

REJECT(rej_http09, "GET /\r\n\r\n", 400)
REJECT(rej_http09_lf, "GET /\n\n", 400)
REJECT(rej_method_only, "GET\r\n\r\n", 400)
REJECT(rej_version_short, "GET / HTTP/1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_long, "GET / HTTP/1.1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_lower, "GET / http/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_two_digits, "GET / HTTP/11.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_letter, "GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_space, "GET / HTTP/ 1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_trailing_space, "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_junk, "GET / FOO/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_version_2_0, "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505)
REJECT(rej_version_3_0, "GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505)
REJECT(rej_version_0_9, "GET / HTTP/0.9\r\n\r\n", 505)
REJECT(rej_version_1_2, "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505)
REJECT(rej_h2_preface, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505)
REJECT(rej_double_space, "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_leading_space, " GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_tab_separator, "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_method_bad_token, "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_method_ctl, "GE\x01T / HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_method_binary, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400)
REJECT(rej_target_nul, "GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_ctl,
       "GET /a\x01"
       "b HTTP/1.1\r\nHost: a\r\n\r\n",
       400)
REJECT(rej_target_tab, "GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_del, "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_nonascii, "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_fragment, "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_query_fragment, "GET /a?x#b HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_relative, "GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_asterisk_get, "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_authority_get, "GET a.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_connect_origin, "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_connect_no_port, "CONNECT a.com HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_connect_absolute, "CONNECT http://a:80/ HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_ftp, "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_single_slash, "GET http:/a HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_userinfo, "GET http://u:p@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_empty_authority, "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_target_bad_port, "GET http://a:99999/ HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_path_pct_alone, "GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_path_pct_g, "GET /%G1 HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_path_pct_short, "GET /%4 HTTP/1.1\r\nHost: a\r\n\r\n", 400)
REJECT(rej_path_pct_short_before_query, "GET /%4?x HTTP/1.1\r\nHost: a\r\n\r\n", 400)

/* ---- rejections: Expect ---- */

REJECT(rej_expect_other, "POST /" H11 "Expect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 417)
REJECT(rej_expect_list, "POST /" H11 "Expect: 100-continue, foo\r\nContent-Length: 1\r\n\r\nx", 417)
REJECT(rej_expect_empty, "POST /" H11 "Expect:\r\nContent-Length: 1\r\n\r\nx", 417)
REJECT(rej_expect_http10_other, "POST / HTTP/1.0\r\nExpect: foo\r\n\r\n", 417)

/* ---- acceptance: the parsed head ---- */

START_TEST(acc_simple_get)
{
    struct h1_req_parser p;
    struct run r;
    const struct h1_header *h;

    accept_req(&p,
               RAW("GET /a/b?x=1&y=%2f HTTP/1.1\r\nHost: example.com:8080\r\n"
                   "User-Agent:  t/1 \r\nAccept: */*\r\n\r\n"),
               &r);
    ck_assert_slice(p.req.method, "GET");
    ck_assert_int_eq(p.req.method_id, HTTP_GET);
    ck_assert_uint_eq(p.req.version_major, 1);
    ck_assert_uint_eq(p.req.version_minor, 1);
    ck_assert_int_eq(p.req.form, H1_TARGET_ORIGIN);
    ck_assert_slice(p.req.target, "/a/b?x=1&y=%2f");
    ck_assert_str_eq(p.req.path, "/a/b");
    ck_assert_uint_eq(p.req.path_len, 4);
    ck_assert_slice(p.req.query, "x=1&y=%2f");
    ck_assert_slice(p.req.host, "example.com:8080");
    ck_assert_slice(p.req.host_name, "example.com");
    ck_assert_uint_eq(p.req.port, 8080);
    ck_assert_uint_eq(p.req.nheaders, 3);
    ck_assert_slice(p.req.headers[0].name, "Host");
    ck_assert_slice(p.req.headers[1].name, "User-Agent");
    ck_assert_slice(p.req.headers[1].value, "t/1");
    h = h1_request_header(&p.req, "accept");
    ck_assert_ptr_nonnull(h);
    ck_assert_slice(h->value, "*/*");
    ck_assert_ptr_null(h1_request_header(&p.req, "cookie"));
    ck_assert(p.req.keep_alive);
    ck_assert(!p.req.expect_continue);
    ck_assert(!p.req.upgrade);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_NONE);
    ck_assert_uint_eq(r.used, r.head_used);
    ck_assert_uint_eq(p.req.head.len, r.used);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_value_trimming_and_bytes)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p,
               RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A:\t a  b \t\r\nX-B:\r\nX-C:   \r\n"
                   "X-D: caf\xc3\xa9\r\nX-E: \"q\" (c) ~!\r\n\r\n"),
               &r);
    ck_assert_slice(h1_request_header(&p.req, "x-a")->value, "a  b");
    ck_assert_uint_eq(h1_request_header(&p.req, "x-b")->value.len, 0);
    ck_assert_uint_eq(h1_request_header(&p.req, "x-c")->value.len, 0);
    ck_assert_slice(h1_request_header(&p.req, "x-d")->value, "caf\xc3\xa9");
    ck_assert_slice(h1_request_header(&p.req, "x-e")->value, "\"q\" (c) ~!");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_tchar_names)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET / HTTP/1.1\r\nHost: a\r\nX-y_z!#$%&'*+.^`|~09: v\r\n\r\n"), &r);
    ck_assert_slice(p.req.headers[1].name, "X-y_z!#$%&'*+.^`|~09");
    h1_req_parser_free(&p);
}
END_TEST

/* Every byte, as the second character of a field name and inside Host: only
 * the RFC 9110 tchar set, and the RFC 3986 reg-name set, are accepted. */
START_TEST(acc_char_classes)
{
    static const char tchar_punct[] = "!#$%&'*+-.^_`|~";
    static const char regname_punct[] = "-._~!$&'()*+,;=";
    int c;

    for (c = 0; c < 256; c++) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        bool tchar = alnum || (c != 0 && strchr(tchar_punct, c) != NULL);
        bool regname = alnum || (c != 0 && strchr(regname_punct, c) != NULL);
        char raw[64];
        int n;
        struct h1_req_parser p;
        struct run r;

        if (c != ':') { /* "X::" is name "X", value ":" */
            n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\nX%c: v\r\n\r\n", c);
            ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
            run_one(&p, raw, (size_t)n, 0, &r);
            ck_assert_msg((r.rc == H1_REQ_DONE) == tchar, "field name byte 0x%02x: rc %d", c, r.rc);
            h1_req_parser_free(&p);
        }

        if (c == ':' || c == '%' || c == '\r' || c == '\n')
            continue; /* port separator, escapes and line ends have their own tests */
        n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a%cb\r\n\r\n", c);
        ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
        run_one(&p, raw, (size_t)n, 0, &r);
        ck_assert_msg((r.rc == H1_REQ_DONE) == regname, "Host byte 0x%02x: rc %d", c, r.rc);
        h1_req_parser_free(&p);
    }
}
END_TEST

/* "<name> /x HTTP/1.1" is accepted with <name> as its method: one llhttp
 * knows by that name, or (other) one it does not. */
static void accept_method(const char *name, int other)
{
    struct h1_req_parser p;
    struct run r;
    char raw[128];
    int n = snprintf(raw, sizeof(raw), "%s /x HTTP/1.1\r\nHost: a\r\n\r\n", name);

    accept_req(&p, raw, (size_t)n, &r);
    ck_assert_slice(p.req.method, name);
    if (other)
        ck_assert_int_eq(p.req.method_id, H1_METHOD_OTHER);
    else
        ck_assert_str_eq(llhttp_method_name(p.req.method_id), name);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_NONE);
    h1_req_parser_free(&p);
}

START_TEST(acc_all_llhttp_methods)
{
    static const char *const names[] = {
        "DELETE",   "GET",        "HEAD",     "POST",   "PUT",       "OPTIONS",     "TRACE",
        "COPY",     "LOCK",       "MKCOL",    "MOVE",   "PROPFIND",  "PROPPATCH",   "SEARCH",
        "UNLOCK",   "BIND",       "REBIND",   "UNBIND", "ACL",       "REPORT",      "MKACTIVITY",
        "CHECKOUT", "MERGE",      "M-SEARCH", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "PATCH",
        "PURGE",    "MKCALENDAR", "LINK",     "UNLINK", "SOURCE"};
    size_t k;

    for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        accept_method(names[k], 0);
}
END_TEST

/* Any token is a method (RFC 9110 9.1), case-sensitive: those llhttp does
 * not know are kept as sent, with their bodies framed like any other. */
START_TEST(acc_other_method_tokens)
{
    static const char *const names[] = {"FOO",  "get", "PRI",     "PLAY", "PURGEALL",
                                        "X-1!", "a~b", "#$%&'*+", "Z"};
    size_t k;

    for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        accept_method(names[k], 1);
    {
        static const char raw[] = "FOO /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
        struct h1_req_parser p;
        struct run r;

        accept_req(&p, raw, sizeof(raw) - 1, &r);
        ck_assert_slice(p.req.method, "FOO");
        ck_assert_int_eq(p.req.body_kind, H1_BODY_LENGTH);
        ck_assert_uint_eq(r.body_len, 5);
        h1_req_parser_free(&p);
    }
    {
        static const char raw[] =
            "get /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        struct h1_req_parser p;
        struct run r;

        accept_req(&p, raw, sizeof(raw) - 1, &r);
        ck_assert_int_eq(p.req.body_kind, H1_BODY_CHUNKED);
        ck_assert_uint_eq(r.body_len, 3);
        h1_req_parser_free(&p);
    }
}
END_TEST

START_TEST(acc_odd_but_valid_target_chars)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(
        &p, RAW("GET /a|b{c}[d]!$&'()*+,;=:@~?q={\"x\":[1]}|^`\\ HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_str_eq(p.req.path, "/a|b{c}[d]!$&'()*+,;=:@~");
    ck_assert_slice(p.req.query, "q={\"x\":[1]}|^`\\");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_empty_query)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET /p? HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_ptr_nonnull(p.req.query.ptr);
    ck_assert_uint_eq(p.req.query.len, 0);
    h1_req_reset(&p);
    run_one(&p, RAW("GET /p HTTP/1.1\r\nHost: a\r\n\r\n"), 0, &r);
    ck_assert_int_eq(r.rc, H1_REQ_DONE);
    ck_assert_ptr_null(p.req.query.ptr);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_query_unchanged)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET /%7e/./x?a=%2e%2E/../%7e&b=/../ HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_str_eq(p.req.path, "/~/x");
    ck_assert_slice(p.req.query, "a=%2e%2E/../%7e&b=/../");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_http10_no_host)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET /x HTTP/1.0\r\n\r\n"), &r);
    ck_assert_uint_eq(p.req.version_minor, 0);
    ck_assert_ptr_null(p.req.host.ptr);
    ck_assert(!p.req.keep_alive);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_hosts)
{
    static const struct {
        const char *host, *name;
        unsigned port;
    } cases[] = {
        {"a", "a", 0},
        {"example.com.", "example.com.", 0},
        {"Example.COM:1", "Example.COM", 1},
        {"10.0.0.1:65535", "10.0.0.1", 65535},
        {"[::1]", "[::1]", 0},
        {"[2001:db8::7]:8443", "[2001:db8::7]", 8443},
        {"[::ffff:192.0.2.1]:80", "[::ffff:192.0.2.1]", 80},
        {"xn--bcher-kva.example", "xn--bcher-kva.example", 0},
        {"a_b~c!$&'()*+,;=", "a_b~c!$&'()*+,;=", 0},
        {"%41b", "%41b", 0},
        {"a:0", "a", 0},
        {"a:00080", "a", 80},
    };
    size_t k;

    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct h1_req_parser p;
        struct run r;
        char raw[256];
        int n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", cases[k].host);

        accept_req(&p, raw, (size_t)n, &r);
        ck_assert_slice(p.req.host, cases[k].host);
        ck_assert_slice(p.req.host_name, cases[k].name);
        ck_assert_uint_eq(p.req.port, cases[k].port);
        h1_req_parser_free(&p);
    }
}
END_TEST

START_TEST(acc_absolute_form_overrides_host)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET http://b.example:8080/x/../y?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n"),
               &r);
    ck_assert_int_eq(p.req.form, H1_TARGET_ABSOLUTE);
    ck_assert_slice(p.req.host, "b.example:8080");
    ck_assert_slice(p.req.host_name, "b.example");
    ck_assert_uint_eq(p.req.port, 8080);
    ck_assert_str_eq(p.req.path, "/y");
    ck_assert_slice(p.req.query, "q=1");
    ck_assert_slice(p.req.target, "http://b.example:8080/x/../y?q=1");
    ck_assert_slice(h1_request_header(&p.req, "host")->value, "a.example");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_absolute_form_variants)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET HTTPS://[::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n"), &r);
    ck_assert_slice(p.req.host, "[::1]:443");
    ck_assert_slice(p.req.host_name, "[::1]");
    ck_assert_uint_eq(p.req.port, 443);
    ck_assert_str_eq(p.req.path, "/");
    ck_assert_ptr_null(p.req.query.ptr);
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET http://h?x HTTP/1.1\r\nHost: x\r\n\r\n"), &r);
    ck_assert_slice(p.req.host, "h");
    ck_assert_str_eq(p.req.path, "/");
    ck_assert_slice(p.req.query, "x");
    h1_req_parser_free(&p);

    /* HTTP/1.0 absolute-form needs no Host */
    accept_req(&p, RAW("GET http://h/p HTTP/1.0\r\n\r\n"), &r);
    ck_assert_slice(p.req.host, "h");
    ck_assert_str_eq(p.req.path, "/p");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_asterisk_form)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_int_eq(p.req.form, H1_TARGET_ASTERISK);
    ck_assert_str_eq(p.req.path, "*");
    ck_assert_uint_eq(p.req.path_len, 1);
    ck_assert_slice(p.req.host, "a");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_connect_authority_form)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("CONNECT db.example:5432 HTTP/1.1\r\nHost: db.example:5432\r\n\r\n"), &r);
    ck_assert_int_eq(p.req.method_id, HTTP_CONNECT);
    ck_assert_int_eq(p.req.form, H1_TARGET_AUTHORITY);
    ck_assert_slice(p.req.host, "db.example:5432");
    ck_assert_uint_eq(p.req.port, 5432);
    ck_assert_str_eq(p.req.path, "");
    ck_assert(!p.req.keep_alive);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_NONE);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_bare_lf_head)
{
    struct h1_req_parser p;
    struct run r;
    static const char canon[] = "GET /x HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n";

    accept_req(&p, RAW("GET /x HTTP/1.1\nHost: a\r\nX: 1\n\n"), &r);
    ck_assert_uint_eq(r.used, sizeof("GET /x HTTP/1.1\nHost: a\r\nX: 1\n\n") - 1);
    /* the head buffer holds CRLF everywhere */
    ck_assert_uint_eq(p.req.head.len, sizeof(canon) - 1);
    ck_assert(memcmp(p.req.head.ptr, canon, sizeof(canon) - 1) == 0);
    ck_assert_slice(h1_request_header(&p.req, "x")->value, "1");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_leading_empty_lines)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_uint_eq(r.used, sizeof("\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n") - 1);
    ck_assert_slice(p.req.method, "GET");
    ck_assert_uint_eq(p.req.head.len, sizeof("GET / HTTP/1.1\r\nHost: a\r\n\r\n") - 1);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_incomplete_is_again)
{
    struct h1_req_parser p;
    size_t c;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("GET / HTTP/1.1\r\nHost: a\r\n"), &c), H1_REQ_AGAIN);
    ck_assert_uint_eq(c, sizeof("GET / HTTP/1.1\r\nHost: a\r\n") - 1);
    ck_assert_int_eq(h1_req_feed_head(&p, "", 0, &c), H1_REQ_AGAIN);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("\r"), &c), H1_REQ_AGAIN);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("\nXYZ"), &c), H1_REQ_HEAD);
    ck_assert_uint_eq(c, 1);
    h1_req_parser_free(&p);
}
END_TEST

/* ---- acceptance: connection semantics ---- */

static void check_keep_alive(const char *raw, size_t n, bool want)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, raw, n, &r);
    ck_assert_msg(p.req.keep_alive == want, "keep_alive %d, want %d for [%.*s]", p.req.keep_alive,
                  want, (int)n, raw);
    h1_req_parser_free(&p);
}

START_TEST(acc_keep_alive_matrix)
{
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), true);
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"), true);
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: x, close\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: close\r\n\r\n"),
                     false);
    check_keep_alive(RAW("GET / HTTP/1.0\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), true);
    check_keep_alive(RAW("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), true);
    check_keep_alive(RAW("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.0\r\nConnection: close\r\n\r\n"), false);
    check_keep_alive(RAW("GET / HTTP/1.0\r\nConnection: foo\r\n\r\n"), false);
}
END_TEST

START_TEST(acc_connection_tokens)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p,
               RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Foo, , keep-alive,x-bar\r\n"
                   "Connection: TE\r\n\r\n"),
               &r);
    ck_assert_uint_eq(p.req.nconnection, 4);
    ck_assert_slice(p.req.connection[0], "X-Foo");
    ck_assert_slice(p.req.connection[1], "keep-alive");
    ck_assert_slice(p.req.connection[2], "x-bar");
    ck_assert_slice(p.req.connection[3], "TE");
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_too_many_connection_tokens)
{
    char raw[1024];
    int n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\nConnection: ");
    int k;

    for (k = 0; k < H1_REQ_MAX_CONN_TOKENS; k++)
        n += snprintf(raw + n, sizeof(raw) - (size_t)n, "t%d,", k);
    n += snprintf(raw + n, sizeof(raw) - (size_t)n, "\r\n\r\n");
    {
        struct h1_req_parser p;
        struct run r;

        accept_req(&p, raw, (size_t)n, &r); /* exactly the maximum */
        ck_assert_uint_eq(p.req.nconnection, H1_REQ_MAX_CONN_TOKENS);
        h1_req_parser_free(&p);
    }
    n -= 4;
    n += snprintf(raw + n, sizeof(raw) - (size_t)n, "one-more\r\n\r\n");
    expect_status(raw, (size_t)n, 400);
}
END_TEST

START_TEST(acc_expect_continue)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p,
               RAW("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
                   "Content-Length: 2\r\n\r\nok"),
               &r);
    ck_assert(p.req.expect_continue);
    h1_req_parser_free(&p);
    /* HTTP/1.0: MUST be ignored (RFC 9110 10.1.1) */
    accept_req(&p, RAW("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok"),
               &r);
    ck_assert(!p.req.expect_continue);
    h1_req_parser_free(&p);
}
END_TEST

/* gRPC's Content-Type (PROTOCOL-HTTP2): "application/grpc", alone or with
 * "+encoding" or parameters, in any case; nothing else (grpc-web). */
START_TEST(acc_grpc_content_type)
{
    static const struct {
        const char *v;
        bool grpc;
    } cases[] = {
        {"application/grpc", true},
        {"application/grpc+proto", true},
        {"application/grpc+json", true},
        {"application/grpc;charset=utf-8", true},
        {"Application/GRPC", true},
        {"application/grpc-web", false},
        {"application/grpc-web+proto", false},
        {"application/grpcx", false},
        {"application/grp", false},
        {"application/json", false},
        {"", false},
    };
    struct h1_req_parser p;
    struct run r;
    char raw[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = snprintf(raw, sizeof(raw),
                         "POST /pkg.Svc/M HTTP/1.1\r\nHost: a\r\nContent-Type: %s\r\n"
                         "Content-Length: 0\r\n\r\n",
                         cases[i].v);
        ck_assert_msg(h1_content_type_is_grpc(cases[i].v, strlen(cases[i].v)) == cases[i].grpc,
                      "%s", cases[i].v);
        accept_req(&p, raw, (size_t)n, &r);
        ck_assert_msg(p.req.grpc == cases[i].grpc, "%s", cases[i].v);
        h1_req_parser_free(&p);
    }
    accept_req(&p, RAW("POST /pkg.Svc/M HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"), &r);
    ck_assert(!p.req.grpc);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_upgrade)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p,
               RAW("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
                   "Upgrade: websocket\r\n\r\n"),
               &r);
    ck_assert(p.req.upgrade);
    ck_assert_uint_eq(p.req.nconnection, 1);
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n"), &r);
    ck_assert(!p.req.upgrade);
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n"), &r);
    ck_assert(!p.req.upgrade);
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET /ws HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"),
               &r);
    ck_assert(!p.req.upgrade);
    h1_req_parser_free(&p);

    /* an upgrade request may carry a body; the message still ends at its end */
    accept_req(&p,
               RAW("POST /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n"
                   "Upgrade: h2c\r\nContent-Length: 3\r\n\r\nabcXYZ"),
               &r);
    ck_assert(p.req.upgrade);
    ck_assert_uint_eq(r.body_len, 3);
    ck_assert_uint_eq(r.used, r.head_used + 3);
    h1_req_parser_free(&p);
}
END_TEST

/* ---- acceptance: bodies ---- */

START_TEST(acc_content_length_body)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(
        &p, RAW("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 00011\r\n\r\nhello worldGET"), &r);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_LENGTH);
    ck_assert_uint_eq(p.req.content_length, 11);
    ck_assert_uint_eq(r.body_len, 11);
    ck_assert(memcmp(r.body, "hello world", 11) == 0);
    ck_assert_uint_eq(r.used, r.head_used + 11);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_content_length_zero)
{
    struct h1_req_parser p;
    struct run r;
    size_t c;

    accept_req(&p, RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\nGET"), &r);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_LENGTH);
    ck_assert_uint_eq(r.body_len, 0);
    ck_assert_uint_eq(r.used, r.head_used);
    /* DONE stays DONE */
    ck_assert_int_eq(h1_req_feed_body(&p, "GET", 3, &c, collect, &r), H1_REQ_DONE);
    ck_assert_uint_eq(c, 0);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_chunked_body)
{
    struct h1_req_parser p;
    struct run r;
    static const char raw[] = POST_TE "5;flag;q=\"quoted, \tstr\xff\";name=value\r\nhello\r\n"
                                      "1\r\n \r\n"
                                      "00006\r\nworld!\r\n"
                                      "A\r\n0123456789\r\n"
                                      "0;last=1\r\nX-Checksum: abc\r\nX-Empty:\r\n\r\n"
                                      "GET / HTTP/1.1\r\n";

    accept_req(&p, RAW(raw), &r);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_CHUNKED);
    ck_assert_uint_eq(r.body_len, 22);
    ck_assert(memcmp(r.body, "hello world!0123456789", 22) == 0);
    ck_assert_uint_eq(r.used, sizeof(raw) - 1 - (sizeof("GET / HTTP/1.1\r\n") - 1));
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_trailers_dropped)
{
    struct h1_req_parser p;
    struct run r;

    /* framing and hop-by-hop names in trailers mean nothing: checked, dropped */
    accept_req(&p,
               RAW(POST_TE "2\r\nok\r\n0\r\nContent-Length: x\r\nTransfer-Encoding: gzip\r\n"
                           "Connection: close\r\nHost: b\r\n\r\nNEXT"),
               &r);
    ck_assert_uint_eq(r.body_len, 2);
    ck_assert(p.req.keep_alive);
    ck_assert_uint_eq(r.used + 4, sizeof(POST_TE "2\r\nok\r\n0\r\nContent-Length: x\r\n"
                                                 "Transfer-Encoding: gzip\r\nConnection: close\r\n"
                                                 "Host: b\r\n\r\nNEXT") -
                                      1);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_chunked_case_insensitive)
{
    struct h1_req_parser p;
    struct run r;

    accept_req(&p,
               RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \tChunked \r\n\r\n"
                   "2\r\nok\r\n0\r\n\r\n"),
               &r);
    ck_assert_int_eq(p.req.body_kind, H1_BODY_CHUNKED);
    ck_assert_uint_eq(r.body_len, 2);
    h1_req_parser_free(&p);
}
END_TEST

/* A body-less head waits for h1_req_confirm(); one with a body does not. */
START_TEST(acc_confirm_deferred)
{
    struct h1_req_parser p;
    size_t c;
    static const char get[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
    static const char post[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n";
    static const char post0[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW(get), &c), H1_REQ_HEAD);
    ck_assert(p.confirm_pending);
    ck_assert_int_eq(h1_req_confirm(&p), 0);
    ck_assert(!p.confirm_pending);
    ck_assert_int_eq(h1_req_confirm(&p), 0); /* once */
    ck_assert_int_eq(p.http.method, HTTP_GET);

    h1_req_reset(&p);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW(post), &c), H1_REQ_HEAD);
    ck_assert(!p.confirm_pending); /* checked when the head ended */
    ck_assert_int_eq(h1_req_confirm(&p), 0);

    h1_req_reset(&p); /* no body bytes: like no body */
    ck_assert_int_eq(h1_req_feed_head(&p, RAW(post0), &c), H1_REQ_HEAD);
    ck_assert(p.confirm_pending);
    ck_assert_int_eq(h1_req_confirm(&p), 0);
    ck_assert_uint_eq(p.http.content_length, 0);

    h1_req_reset(&p);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("GET / HTTP/1.1\r\n\r\n"), &c), H1_REQ_ERROR);
    ck_assert_int_eq(h1_req_confirm(&p), H1_REQ_ERROR);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_body_split_across_feeds)
{
    struct h1_req_parser p;
    struct run r;
    size_t c, off;
    static const char head[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
    static const char *const parts[] = {"01", "2345", "", "678", "9NEXT"};
    size_t k;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(h1_req_feed_head(&p, RAW(head), &c), H1_REQ_HEAD);
    ck_assert_uint_eq(c, sizeof(head) - 1);
    for (k = 0; k < 4; k++) {
        ck_assert_int_eq(h1_req_feed_body(&p, parts[k], strlen(parts[k]), &c, collect, &r),
                         H1_REQ_AGAIN);
        ck_assert_uint_eq(c, strlen(parts[k]));
    }
    ck_assert_int_eq(h1_req_feed_body(&p, parts[4], 5, &c, collect, &r), H1_REQ_DONE);
    ck_assert_uint_eq(c, 1);
    ck_assert_uint_eq(r.body_len, 10);
    ck_assert(memcmp(r.body, "0123456789", 10) == 0);
    h1_req_parser_free(&p);

    /* chunked, cut inside sizes, extensions, data, CRLFs and trailers */
    {
        static const char body[] = "4;a=\"x\"\r\nWiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\nNEXT";
        size_t cuts[] = {1, 3, 8, 9, 11, 13, 14, 20, 25, 27, 30, 33};

        ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
        memset(&r, 0, sizeof(r));
        ck_assert_int_eq(h1_req_feed_head(&p, RAW(POST_TE), &c), H1_REQ_HEAD);
        off = 0;
        for (k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
            ck_assert_int_eq(h1_req_feed_body(&p, body + off, cuts[k] - off, &c, collect, &r),
                             H1_REQ_AGAIN);
            ck_assert_uint_eq(c, cuts[k] - off);
            off = cuts[k];
        }
        ck_assert_int_eq(h1_req_feed_body(&p, body + off, sizeof(body) - 1 - off, &c, collect, &r),
                         H1_REQ_DONE);
        ck_assert_uint_eq(off + c, sizeof(body) - 1 - 4);
        ck_assert_uint_eq(r.body_len, 9);
        ck_assert(memcmp(r.body, "Wikipedia", 9) == 0);
        h1_req_parser_free(&p);
    }
}
END_TEST

static int failing_sink(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return -1;
}

START_TEST(acc_body_callback_failure)
{
    struct h1_req_parser p;
    size_t c;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    ck_assert_int_eq(
        h1_req_feed_head(&p, RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"), &c),
        H1_REQ_HEAD);
    ck_assert_int_eq(h1_req_feed_body(&p, "abc", 3, &c, failing_sink, NULL), H1_REQ_ERROR);
    ck_assert_int_eq(p.status, 500);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(acc_misuse)
{
    struct h1_req_parser p;
    size_t c;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    ck_assert_int_eq(h1_req_feed_body(&p, "abc", 3, &c, collect, NULL), H1_REQ_ERROR);
    ck_assert_int_eq(p.status, 500);
    h1_req_reset(&p);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &c),
                     H1_REQ_HEAD);
    ck_assert_int_eq(h1_req_feed_head(&p, RAW("GET"), &c), H1_REQ_ERROR);
    ck_assert_int_eq(p.status, 500);
    h1_req_parser_free(&p);
    h1_req_parser_free(&p); /* twice is fine */
    h1_req_parser_free(NULL);
}
END_TEST

/* ---- pipelining and split invariance ---- */

START_TEST(acc_pipelined)
{
    static const char buf[] = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
                              "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                              "POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "2\r\nde\r\n0\r\n\r\n"
                              "\r\nGET /4 HTTP/1.1\r\nHost: a\r\n\r\n";
    static const struct {
        const char *path;
        size_t head, body;
        const char *content;
    } want[] = {
        {"/1", 28, 0, ""},
        {"/2", 48, 3, "abc"},
        {"/3", 57, 12, "de"},
        {"/4", 30, 0, ""}, /* the stray CRLF before it counts as its head */
    };
    struct h1_req_parser p;
    struct run r;
    size_t off = 0, c, k, n = sizeof(buf) - 1;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    for (k = 0; k < 4; k++) {
        memset(&r, 0, sizeof(r));
        ck_assert_int_eq(h1_req_feed_head(&p, buf + off, n - off, &c), H1_REQ_HEAD);
        ck_assert_uint_eq(c, want[k].head);
        ck_assert_str_eq(p.req.path, want[k].path);
        off += c;
        ck_assert_int_eq(h1_req_feed_body(&p, buf + off, n - off, &c, collect, &r), H1_REQ_DONE);
        ck_assert_uint_eq(c, want[k].body);
        ck_assert_uint_eq(r.body_len, strlen(want[k].content));
        ck_assert(memcmp(r.body, want[k].content, r.body_len) == 0);
        off += c;
        h1_req_reset(&p);
    }
    ck_assert_uint_eq(off, n);
    h1_req_parser_free(&p);
}
END_TEST

/* Everything observable about one parse, copied out of the parser. */
struct outcome {
    int rc, status;
    char method[16], path[256], query[256], host[256];
    size_t nheaders, used, body_len;
    bool keep_alive, expect_continue, upgrade;
    int body_kind;
    char body[8192];
};

static void copy_slice(char *dst, size_t cap, struct h1_slice s)
{
    size_t n = s.ptr ? (s.len < cap - 1 ? s.len : cap - 1) : 0;

    memcpy(dst, s.ptr ? s.ptr : "", n);
    dst[n] = '\0';
}

static void outcome_of(const char *raw, size_t n, size_t step, struct outcome *o)
{
    struct h1_req_parser p;
    struct run *r = malloc(sizeof(*r));

    ck_assert_ptr_nonnull(r);
    memset(o, 0, sizeof(*o));
    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    run_one(&p, raw, n, step, r);
    o->rc = r->rc;
    o->status = r->status;
    o->used = r->used;
    if (r->head) {
        copy_slice(o->method, sizeof(o->method), p.req.method);
        snprintf(o->path, sizeof(o->path), "%s", p.req.path);
        copy_slice(o->query, sizeof(o->query), p.req.query);
        copy_slice(o->host, sizeof(o->host), p.req.host);
        o->nheaders = p.req.nheaders;
        o->keep_alive = p.req.keep_alive;
        o->expect_continue = p.req.expect_continue;
        o->upgrade = p.req.upgrade;
        o->body_kind = (int)p.req.body_kind;
    }
    if (r->rc == H1_REQ_DONE) {
        o->body_len = r->body_len;
        memcpy(o->body, r->body, r->body_len);
    }
    h1_req_parser_free(&p);
    free(r);
}

START_TEST(acc_split_invariance)
{
    static const char *const reqs[] = {
        "GET /a/./b/../c?x=1 HTTP/1.1\r\nHost: a:1\r\nX: y\r\n\r\n",
        "GET http://h:2/%7e/x HTTP/1.1\nHost: a\nConnection: close\n\n",
        "\r\n\r\nOPTIONS * HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
        POST_TE "3;x=\"y z\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\nU: 2\r\n\r\n",
        POST_TE "3\r\nabc\r\n5\r\nde\r\n",                             /* error: data too long */
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",                /* error 400 */
        "GET / HTTP/2.0\r\nHost: a\r\n\r\n",                           /* error 505 */
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", /* incomplete */
    };
    size_t k, steps[] = {1, 2, 3, 5, 7, 13};
    struct outcome *one = malloc(sizeof(*one)), *other = malloc(sizeof(*other));

    ck_assert_ptr_nonnull(one);
    ck_assert_ptr_nonnull(other);
    for (k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
        size_t s, n = strlen(reqs[k]);

        outcome_of(reqs[k], n, 0, one);
        for (s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
            outcome_of(reqs[k], n, steps[s], other);
            ck_assert_msg(memcmp(one, other, sizeof(*one)) == 0,
                          "request %zu differs when fed %zu bytes at a time", k, steps[s]);
        }
    }
    free(one);
    free(other);
}
END_TEST

/* ---- limits ---- */

/* "GET /aaa... HTTP/1.1" of exactly <len> bytes (len >= 15). */
static size_t request_line(char *buf, size_t len)
{
    size_t plen = len - 13; /* "GET " + path + " HTTP/1.1" */

    memcpy(buf, "GET /", 5);
    memset(buf + 5, 'a', plen - 1);
    memcpy(buf + 4 + plen, " HTTP/1.1", 9);
    return len;
}

START_TEST(lim_request_line)
{
    struct h1_req_limits lim;
    char buf[256];
    size_t n;

    h1_req_limits_default(&lim);
    lim.max_request_line = 64;

    n = request_line(buf, 64);
    memcpy(buf + n, "\r\nHost: a\r\n\r\n", 13);
    {
        struct h1_req_parser p;
        struct run r;

        accept_lim(&p, &lim, buf, n + 13, &r);
        ck_assert_uint_eq(p.req.path_len, 64 - 13);
        h1_req_parser_free(&p);
    }
    n = request_line(buf, 65);
    memcpy(buf + n, "\r\nHost: a\r\n\r\n", 13);
    expect_status_lim(&lim, buf, n + 13, 414);
    /* 414 as soon as the 65th byte arrives, long before any CRLF */
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "GET /", 5);
    expect_status_lim(&lim, buf, 65, 414);
    {
        struct h1_req_parser p;
        size_t c;

        ck_assert_int_eq(h1_req_parser_init(&p, &lim), 0);
        ck_assert_int_eq(h1_req_feed_head(&p, buf, 64, &c), H1_REQ_AGAIN);
        ck_assert_int_eq(h1_req_feed_head(&p, buf, 1, &c), H1_REQ_ERROR);
        ck_assert_int_eq(p.status, 414);
        h1_req_parser_free(&p);
    }
}
END_TEST

START_TEST(lim_request_line_default)
{
    size_t len = 8192, n;
    char *buf = malloc(len + 64);

    ck_assert_ptr_nonnull(buf);
    n = request_line(buf, len);
    memcpy(buf + n, "\r\nHost: a\r\n\r\n", 13);
    {
        struct h1_req_parser p;
        struct run r;

        accept_req(&p, buf, n + 13, &r);
        h1_req_parser_free(&p);
    }
    n = request_line(buf, len + 1);
    memcpy(buf + n, "\r\nHost: a\r\n\r\n", 13);
    expect_status(buf, n + 13, 414);
    free(buf);
}
END_TEST

/* A head whose header section (field lines, their CRLFs and the final CRLF)
 * is exactly <bytes> long: "Host: a\r\n" + "X: vvv...\r\n" + "\r\n". */
static size_t head_with_section(char *buf, size_t bytes, bool bare_lf)
{
    size_t n = 0, vlen = bytes - 16;

    memcpy(buf + n, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
    n += 28;
    memset(buf + n, 'v', vlen);
    n += vlen;
    if (bare_lf) {
        memcpy(buf + n, "\n\n", 2);
        n += 2;
    } else {
        memcpy(buf + n, "\r\n\r\n", 4);
        n += 4;
    }
    return n;
}

START_TEST(lim_header_bytes)
{
    struct h1_req_limits lim;
    char buf[512];
    size_t n;

    h1_req_limits_default(&lim);
    lim.max_header_bytes = 128;
    n = head_with_section(buf, 128, false);
    {
        struct h1_req_parser p;
        struct run r;

        accept_lim(&p, &lim, buf, n, &r);
        ck_assert_uint_eq(h1_request_header(&p.req, "x")->value.len, 112);
        h1_req_parser_free(&p);
        /* bare LF counts as CRLF: the same head with LF is just as big */
        n = head_with_section(buf, 128, true);
        accept_lim(&p, &lim, buf, n, &r);
        h1_req_parser_free(&p);
    }
    n = head_with_section(buf, 129, false);
    expect_status_lim(&lim, buf, n, 431);
    n = head_with_section(buf, 129, true);
    expect_status_lim(&lim, buf, n, 431);
}
END_TEST

START_TEST(lim_header_bytes_default)
{
    char *buf = malloc(40000);
    size_t n;

    ck_assert_ptr_nonnull(buf);
    n = head_with_section(buf, 32768, false);
    {
        struct h1_req_parser p;
        struct run r;

        accept_req(&p, buf, n, &r);
        h1_req_parser_free(&p);
    }
    n = head_with_section(buf, 32769, false);
    expect_status(buf, n, 431);
    free(buf);
}
END_TEST

static size_t head_with_fields(char *buf, size_t cap, size_t nfields)
{
    size_t n = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\nHost: a\r\n"), k;

    for (k = 1; k < nfields; k++)
        n += (size_t)snprintf(buf + n, cap - n, "X-%zu: %zu\r\n", k, k);
    n += (size_t)snprintf(buf + n, cap - n, "\r\n");
    return n;
}

START_TEST(lim_header_count)
{
    struct h1_req_limits lim;
    char buf[4096];
    size_t n;
    struct h1_req_parser p;
    struct run r;

    h1_req_limits_default(&lim);
    lim.max_headers = 5;
    n = head_with_fields(buf, sizeof(buf), 5);
    accept_lim(&p, &lim, buf, n, &r);
    ck_assert_uint_eq(p.req.nheaders, 5);
    h1_req_parser_free(&p);
    n = head_with_fields(buf, sizeof(buf), 6);
    expect_status_lim(&lim, buf, n, 431);

    /* the default: 100 */
    n = head_with_fields(buf, sizeof(buf), 100);
    accept_req(&p, buf, n, &r);
    ck_assert_uint_eq(p.req.nheaders, 100);
    h1_req_parser_free(&p);
    n = head_with_fields(buf, sizeof(buf), 101);
    expect_status(buf, n, 431);
}
END_TEST

START_TEST(lim_body_content_length)
{
    struct h1_req_limits lim;
    struct h1_req_parser p;
    struct run r;

    h1_req_limits_default(&lim);
    lim.max_body_bytes = 10;
    accept_lim(&p, &lim, RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789"),
               &r);
    ck_assert_uint_eq(r.body_len, 10);
    h1_req_parser_free(&p);
    /* refused at head time, before any body byte */
    expect_status_lim(&lim, RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"), 413);
}
END_TEST

START_TEST(lim_body_chunked)
{
    struct h1_req_limits lim;
    struct h1_req_parser p;
    struct run r;

    h1_req_limits_default(&lim);
    lim.max_body_bytes = 10;
    accept_lim(&p, &lim, RAW(POST_TE "4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n"), &r);
    ck_assert_uint_eq(r.body_len, 10);
    h1_req_parser_free(&p);
    expect_status_lim(&lim, RAW(POST_TE "b\r\n"), 413);
    expect_status_lim(&lim, RAW(POST_TE "4\r\n0123\r\n7\r\n4567890\r\n0\r\n\r\n"), 413);
    /* while streaming: the first chunk went through before the second said too much */
    ck_assert_int_eq(h1_req_parser_init(&p, &lim), 0);
    run_one(&p, RAW(POST_TE "4\r\n0123\r\n7\r\n4567890\r\n0\r\n\r\n"), 9, &r);
    ck_assert_int_eq(r.rc, H1_REQ_ERROR);
    ck_assert_int_eq(r.status, 413);
    ck_assert_uint_eq(r.body_len, 4);
    h1_req_parser_free(&p);
}
END_TEST

START_TEST(lim_trailers)
{
    struct h1_req_limits lim;
    struct h1_req_parser p;
    struct run r;
    char buf[512];
    size_t n;

    h1_req_limits_default(&lim);
    lim.max_header_bytes = 64;
    lim.max_headers = 2;
    accept_lim(&p, &lim, RAW(POST_TE "0\r\nA: 1\r\nB: 2\r\n\r\n"), &r);
    h1_req_parser_free(&p);
    expect_status_lim(&lim, RAW(POST_TE "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"), 431);
    /* trailer section of exactly 64 bytes ("T: " value CRLF CRLF), then 65 */
    n = (size_t)snprintf(buf, sizeof(buf), "%s0\r\nT: ", POST_TE);
    memset(buf + n, 'v', 57);
    n += 57;
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n\r\n");
    accept_lim(&p, &lim, buf, n, &r);
    h1_req_parser_free(&p);
    n = (size_t)snprintf(buf, sizeof(buf), "%s0\r\nT: ", POST_TE);
    memset(buf + n, 'v', 58);
    n += 58;
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n\r\n");
    expect_status_lim(&lim, buf, n, 431);
}
END_TEST

START_TEST(lim_chunk_line)
{
    char *buf = malloc(8192);
    size_t n;
    struct h1_req_parser p;
    struct run r;

    ck_assert_ptr_nonnull(buf);
    /* a size line of exactly 4096 bytes including CRLF, then 4097 */
    n = (size_t)snprintf(buf, 8192, "%s1;x=", POST_TE);
    memset(buf + n, 'v', 4096 - 6);
    n += 4096 - 6;
    n += (size_t)snprintf(buf + n, 8192 - n, "\r\na\r\n0\r\n\r\n");
    accept_req(&p, buf, n, &r);
    h1_req_parser_free(&p);
    n = (size_t)snprintf(buf, 8192, "%s1;x=", POST_TE);
    memset(buf + n, 'v', 4096 - 5);
    n += 4096 - 5;
    n += (size_t)snprintf(buf + n, 8192 - n, "\r\na\r\n0\r\n\r\n");
    expect_status(buf, n, 400);
    free(buf);
}
END_TEST

START_TEST(lim_init)
{
    struct h1_req_parser p;
    struct h1_req_limits lim;

    h1_req_limits_default(&lim);
    lim.max_request_line = (size_t)1 << 30;
    ck_assert_int_eq(h1_req_parser_init(&p, &lim), -1);
    {
        size_t c;

        ck_assert_int_eq(h1_req_feed_head(&p, "GET", 3, &c), H1_REQ_ERROR);
        ck_assert_int_eq(h1_req_feed_body(&p, "GET", 3, &c, collect, NULL), H1_REQ_ERROR);
    }
    h1_req_parser_free(&p);
    memset(&lim, 0, sizeof(lim)); /* zeros mean defaults, merge_slashes off */
    ck_assert_int_eq(h1_req_parser_init(&p, &lim), 0);
    ck_assert_uint_eq(p.lim.max_request_line, 8192);
    ck_assert_uint_eq(p.lim.max_header_bytes, 32768);
    ck_assert_uint_eq(p.lim.max_headers, 100);
    ck_assert(!p.lim.merge_slashes);
    h1_req_parser_free(&p);
}
END_TEST

/* The block taken away between requests (an idle gateway connection holds
 * none) and another of the same size given back: the next request parses
 * into it, and the old block is no longer written. */
/* A made head (HTTP/2's) is parsed and limited as a client's, without the
 * llhttp cross-check: nothing is left for h1_req_confirm(). */
START_TEST(made_head_skips_cross_check)
{
    static const char r1[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char r2[] = "GET /a HTTP/1.1\r\nHost: x\r\nX: a\001b\r\n\r\n";
    struct h1_req_parser p;
    size_t used;

    ck_assert_int_eq(h1_req_parser_init(&p, NULL), 0);
    h1_req_made_head(&p);
    ck_assert_int_eq(h1_req_feed_head(&p, r1, sizeof(r1) - 1, &used), H1_REQ_HEAD);
    ck_assert(!p.confirm_pending);
    ck_assert_int_eq(h1_req_confirm(&p), 0);
    h1_req_reset(&p);
    ck_assert(!p.made); /* a reset forgets it */
    ck_assert_int_eq(h1_req_feed_head(&p, r1, sizeof(r1) - 1, &used), H1_REQ_HEAD);
    ck_assert(p.confirm_pending);
    h1_req_reset(&p);
    h1_req_made_head(&p);
    ck_assert_int_eq(h1_req_feed_head(&p, r2, sizeof(r2) - 1, &used), H1_REQ_ERROR);
    ck_assert_int_eq(p.status, 400); /* the validator's rules still hold */
    h1_req_parser_free(&p);
}
END_TEST

/* A parser set up without its block sizes it as init would, fails every
 * feed until it has one, then parses as usual. */
START_TEST(lim_setup_without_mem)
{
    static const char r1[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    struct h1_req_limits lim;
    struct h1_req_parser p, q;
    struct run r;
    size_t used;

    h1_req_limits_default(&lim);
    lim.max_headers = 7;
    ck_assert_int_eq(h1_req_parser_init(&q, &lim), 0);
    ck_assert_int_eq(h1_req_parser_setup(&p, &lim), 0);
    ck_assert_ptr_null(p.mem);
    ck_assert_uint_eq(h1_req_mem_size(&p), h1_req_mem_size(&q));
    ck_assert_int_eq(h1_req_feed_head(&p, r1, sizeof(r1) - 1, &used), H1_REQ_ERROR);
    ck_assert_int_eq(p.status, 500);
    h1_req_give_mem(&p, malloc(h1_req_mem_size(&p)));
    h1_req_reset(&p);
    run_one(&p, r1, sizeof(r1) - 1, 0, &r);
    ck_assert_int_eq(r.rc, H1_REQ_DONE);
    ck_assert_str_eq(p.req.path, "/a");
    h1_req_parser_free(&p);
    h1_req_parser_free(&q);
    lim.max_headers = 1u << 20;
    ck_assert_int_eq(h1_req_parser_setup(&p, &lim), -1);
}
END_TEST

START_TEST(lim_take_give_mem)
{
    static const char r1[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char r2[] = "GET /b/../c HTTP/1.1\r\nHost: y\r\nUser-Agent: t/2\r\n\r\n";
    struct h1_req_parser p;
    struct run r;
    void *old, *fresh;

    accept_req(&p, r1, sizeof(r1) - 1, &r);
    ck_assert_str_eq(p.req.path, "/a");
    h1_req_reset(&p);
    old = h1_req_take_mem(&p);
    ck_assert_ptr_nonnull(old);
    ck_assert_ptr_null(p.mem);
    ck_assert_ptr_null(p.req.headers);
    memset(old, 0x5a, h1_req_mem_size(&p));
    fresh = malloc(h1_req_mem_size(&p));
    ck_assert_ptr_nonnull(fresh);
    h1_req_give_mem(&p, fresh);
    run_one(&p, r2, sizeof(r2) - 1, 0, &r);
    ck_assert_int_eq(r.rc, H1_REQ_DONE);
    ck_assert_str_eq(p.req.path, "/c");
    ck_assert_uint_eq(p.req.nheaders, 2);
    ck_assert_slice(p.req.headers[1].value, "t/2");
    ck_assert_ptr_eq(p.req.headers, fresh);
    for (size_t i = 0; i < h1_req_mem_size(&p); i++)
        ck_assert_int_eq(((unsigned char *)old)[i], 0x5a);
    free(old);
    h1_req_parser_free(&p); /* frees <fresh> */
}
END_TEST

/* ---- path normalization in the parser (path.c has its own tests) ---- */

START_TEST(norm_in_parser)
{
    struct h1_req_parser p;
    struct run r;
    struct h1_req_limits lim;

    accept_req(&p, RAW("GET /%41%2f%2e%2E/x//y/./../z HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_str_eq(p.req.path, "/A%2F../x/z");
    ck_assert_slice(p.req.target, "/%41%2f%2e%2E/x//y/./../z");
    h1_req_parser_free(&p);

    h1_req_limits_default(&lim);
    lim.merge_slashes = false;
    accept_lim(&p, &lim, RAW("GET //x//y/ HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_str_eq(p.req.path, "//x//y/");
    h1_req_parser_free(&p);
}
END_TEST

/* An escaped control character in the path is 400 (nginx: "%00"), whatever
 * router.escaped_slashes says: it is refused before any mode applies. */
START_TEST(path_control_escapes)
{
    expect_status(RAW("GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    expect_status(RAW("GET /a/%00 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    expect_status(RAW("GET /a%0d%0aSet-Cookie:x HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    expect_status(RAW("GET /%7f HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    expect_status(RAW("GET http://h/a%00 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    /* in the query it is the backend's business, as nginx leaves it */
    {
        struct h1_req_parser p;
        struct run r;
        accept_req(&p, RAW("GET /a?x=%00 HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
        ck_assert_str_eq(p.req.path, "/a");
        h1_req_parser_free(&p);
    }
}
END_TEST

/* What the parser reports of a path, and h1_req_route_path() under each
 * router.escaped_slashes mode: the decoded path comes from the target as
 * sent, again and again alike. */
START_TEST(route_path_modes)
{
    static const char req[] = "GET /api/..%2fsecret/x?q=%2F HTTP/1.1\r\nHost: a\r\n\r\n";
    struct h1_req_parser p;
    struct run r;

    accept_req(&p, RAW("GET /plain/path HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_uint_eq(p.req.path_found, 0);
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_REJECT), 0);
    h1_req_parser_free(&p);

    accept_req(&p, req, sizeof(req) - 1, &r);
    ck_assert_uint_eq(p.req.path_found, H1_PATH_SLASH_ESCAPE);
    ck_assert_str_eq(p.req.path, "/api/..%2Fsecret/x");
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_KEEP), 0);
    ck_assert_str_eq(p.req.path, "/api/..%2Fsecret/x");
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_REJECT), -1);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_DECODE), 0);
        ck_assert_str_eq(p.req.path, "/secret/x");
        ck_assert_uint_eq(p.req.path_len, 9);
    }
    ck_assert_slice(p.req.target, "/api/..%2fsecret/x?q=%2F");
    ck_assert_slice(p.req.query, "q=%2F");
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET http://h/a/..;/b HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_uint_eq(p.req.path_found, H1_PATH_DOT_PARAMS);
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_DECODE), -1);
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_KEEP), 0);
    ck_assert_str_eq(p.req.path, "/a/..;/b");
    h1_req_parser_free(&p);

    accept_req(&p, RAW("GET http://h/a\\..%5C..\\b?x HTTP/1.1\r\nHost: a\r\n\r\n"), &r);
    ck_assert_int_eq(h1_req_route_path(&p, H1_SLASHES_DECODE), 0);
    ck_assert_str_eq(p.req.path, "/b");
    h1_req_parser_free(&p);
}
END_TEST

/* ---- Max-Forwards ---- */

static int64_t max_forwards_of(const char *raw, size_t n)
{
    struct h1_req_parser p;
    struct run r;
    int64_t v;

    accept_req(&p, raw, n, &r);
    v = h1_max_forwards(&p.req);
    h1_req_parser_free(&p);
    return v;
}

START_TEST(acc_max_forwards)
{
    ck_assert_int_eq(max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: 3\r\n\r\n")),
                     3);
    ck_assert_int_eq(
        max_forwards_of(RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\nmax-forwards: 0\r\n\r\n")), 0);
    /* other methods ignore the field (RFC 9110 7.6.2) */
    ck_assert_int_eq(max_forwards_of(RAW("GET / HTTP/1.1\r\nHost: a\r\nMax-Forwards: 3\r\n\r\n")),
                     -1);
    ck_assert_int_eq(max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\n\r\n")), -1);
    ck_assert_int_eq(max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: \r\n\r\n")),
                     -1);
    ck_assert_int_eq(
        max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: 1x\r\n\r\n")), -1);
    ck_assert_int_eq(
        max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: -1\r\n\r\n")), -1);
    ck_assert_int_eq(max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: 1\r\n"
                                         "Max-Forwards: 1\r\n\r\n")),
                     -1);
    /* huge values stay positive */
    ck_assert_int_ge(max_forwards_of(RAW("TRACE / HTTP/1.1\r\nHost: a\r\nMax-Forwards: "
                                         "99999999999999999999999999\r\n\r\n")),
                     1000000000);
}
END_TEST

/* ---- suite ---- */

#define ADD(tc, t) tcase_add_test((tc), t)

static Suite *request_suite(void)
{
    Suite *s = suite_create("http1_request");
    TCase *rej = tcase_create("reject");
    TCase *acc = tcase_create("accept");
    TCase *lim = tcase_create("limits");
    TCase *norm = tcase_create("normalize");

    /* framing fields */
    ADD(rej, rej_cl_and_te);
    ADD(rej, rej_te_and_cl);
    ADD(rej, rej_cl_differing);
    ADD(rej, rej_cl_repeated_same);
    ADD(rej, rej_cl_list);
    ADD(rej, rej_cl_plus);
    ADD(rej, rej_cl_minus);
    ADD(rej, rej_cl_inner_space);
    ADD(rej, rej_cl_overflow);
    ADD(rej, rej_cl_2p63);
    ADD(rej, rej_cl_hex);
    ADD(rej, rej_cl_empty);
    ADD(rej, rej_cl_letters);
    ADD(rej, rej_te_chunked_identity);
    ADD(rej, rej_te_gzip);
    ADD(rej, rej_te_xchunked);
    ADD(rej, rej_te_chunked_twice);
    ADD(rej, rej_te_chunked_two_fields);
    ADD(rej, rej_te_chunked_then_gzip_field);
    ADD(rej, rej_te_param);
    ADD(rej, rej_te_empty_element);
    ADD(rej, rej_te_empty);
    ADD(rej, rej_te_http10);
    ADD(rej, rej_te_gzip_chunked_501);
    ADD(rej, rej_connect_with_body);
    /* chunked framing */
    ADD(rej, rej_chunk_size_junk);
    ADD(rej, rej_chunk_size_empty);
    ADD(rej, rej_chunk_size_space);
    ADD(rej, rej_chunk_size_leading_space);
    ADD(rej, rej_chunk_size_minus);
    ADD(rej, rej_chunk_size_0x);
    ADD(rej, rej_chunk_size_overflow);
    ADD(rej, rej_chunk_size_2p63);
    ADD(rej, rej_chunk_size_bare_lf);
    ADD(rej, rej_chunk_size_bare_cr);
    ADD(rej, rej_chunk_data_no_crlf);
    ADD(rej, rej_chunk_data_bare_lf);
    ADD(rej, rej_chunk_data_bare_cr);
    ADD(rej, rej_chunk_data_too_long);
    ADD(rej, rej_chunk_last_bare_lf);
    ADD(rej, rej_chunk_final_bare_lf);
    ADD(rej, rej_chunk_ext_empty);
    ADD(rej, rej_chunk_ext_space);
    ADD(rej, rej_chunk_ext_space_after);
    ADD(rej, rej_chunk_ext_no_value);
    ADD(rej, rej_chunk_ext_ctl);
    ADD(rej, rej_chunk_ext_bare_lf);
    ADD(rej, rej_chunk_ext_quoted_pair);
    ADD(rej, rej_chunk_ext_quote_unterminated);
    ADD(rej, rej_chunk_ext_after_quote);
    ADD(rej, rej_chunk_ext_after_token_value);
    ADD(rej, rej_trailer_obs_fold);
    ADD(rej, rej_trailer_space_before_colon);
    ADD(rej, rej_trailer_no_colon);
    ADD(rej, rej_trailer_empty_name);
    ADD(rej, rej_trailer_ctl);
    ADD(rej, rej_trailer_bare_lf);
    ADD(rej, rej_trailer_bare_cr);
    ADD(rej, rej_host_v6_empty);
    ADD(rej, rej_host_v6_long);
    /* field lines */
    ADD(rej, rej_obs_fold);
    ADD(rej, rej_obs_fold_tab);
    ADD(rej, rej_first_line_folded);
    ADD(rej, rej_space_before_colon);
    ADD(rej, rej_tab_before_colon);
    ADD(rej, rej_no_colon);
    ADD(rej, rej_empty_name);
    ADD(rej, rej_name_bad_char);
    ADD(rej, rej_name_nul);
    ADD(rej, rej_name_nonascii);
    ADD(rej, rej_value_nul);
    ADD(rej, rej_value_ctl);
    ADD(rej, rej_value_del);
    ADD(rej, rej_value_esc);
    ADD(rej, rej_value_bare_cr);
    ADD(rej, rej_head_bare_cr_end);
    ADD(rej, rej_rl_bare_cr);
    ADD(rej, rej_leading_bare_cr);
    ADD(rej, rej_conn_bad_token);
    ADD(rej, rej_conn_bad_char);
    /* Host */
    ADD(rej, rej_host_missing);
    ADD(rej, rej_host_missing_absolute);
    ADD(rej, rej_host_twice);
    ADD(rej, rej_host_twice_differing);
    ADD(rej, rej_host_twice_http10);
    ADD(rej, rej_host_empty);
    ADD(rej, rej_host_userinfo);
    ADD(rej, rej_host_space);
    ADD(rej, rej_host_slash);
    ADD(rej, rej_host_backslash);
    ADD(rej, rej_host_port_big);
    ADD(rej, rej_host_port_long);
    ADD(rej, rej_host_port_empty);
    ADD(rej, rej_host_port_alpha);
    ADD(rej, rej_host_two_ports);
    ADD(rej, rej_host_no_name);
    ADD(rej, rej_host_dotdot);
    ADD(rej, rej_host_v6_open);
    ADD(rej, rej_host_v6_bad);
    ADD(rej, rej_host_v6_zone);
    ADD(rej, rej_host_v6_junk_after);
    ADD(rej, rej_host_v4_in_brackets);
    ADD(rej, rej_host_bad_pct);
    /* request line */
    ADD(rej, rej_http09);
    ADD(rej, rej_http09_lf);
    ADD(rej, rej_method_only);
    ADD(rej, rej_version_short);
    ADD(rej, rej_version_long);
    ADD(rej, rej_version_lower);
    ADD(rej, rej_version_two_digits);
    ADD(rej, rej_version_letter);
    ADD(rej, rej_version_space);
    ADD(rej, rej_version_trailing_space);
    ADD(rej, rej_version_junk);
    ADD(rej, rej_version_2_0);
    ADD(rej, rej_version_3_0);
    ADD(rej, rej_version_0_9);
    ADD(rej, rej_version_1_2);
    ADD(rej, rej_h2_preface);
    ADD(rej, rej_double_space);
    ADD(rej, rej_leading_space);
    ADD(rej, rej_tab_separator);
    ADD(rej, rej_method_bad_token);
    ADD(rej, rej_method_ctl);
    ADD(rej, rej_method_binary);
    ADD(rej, rej_target_nul);
    ADD(rej, rej_target_ctl);
    ADD(rej, rej_target_tab);
    ADD(rej, rej_target_del);
    ADD(rej, rej_target_nonascii);
    ADD(rej, rej_target_fragment);
    ADD(rej, rej_target_query_fragment);
    ADD(rej, rej_target_relative);
    ADD(rej, rej_target_asterisk_get);
    ADD(rej, rej_target_authority_get);
    ADD(rej, rej_target_connect_origin);
    ADD(rej, rej_target_connect_no_port);
    ADD(rej, rej_target_connect_absolute);
    ADD(rej, rej_target_ftp);
    ADD(rej, rej_target_single_slash);
    ADD(rej, rej_target_userinfo);
    ADD(rej, rej_target_empty_authority);
    ADD(rej, rej_target_bad_port);
    ADD(rej, rej_path_pct_alone);
    ADD(rej, rej_path_pct_g);
    ADD(rej, rej_path_pct_short);
    ADD(rej, rej_path_pct_short_before_query);
    /* Expect */
    ADD(rej, rej_expect_other);
    ADD(rej, rej_expect_list);
    ADD(rej, rej_expect_empty);
    ADD(rej, rej_expect_http10_other);

    ADD(acc, acc_simple_get);
    ADD(acc, acc_value_trimming_and_bytes);
    ADD(acc, acc_tchar_names);
    ADD(acc, acc_char_classes);
    ADD(acc, acc_all_llhttp_methods);
    ADD(acc, acc_other_method_tokens);
    ADD(acc, acc_confirm_deferred);
    ADD(acc, acc_odd_but_valid_target_chars);
    ADD(acc, acc_empty_query);
    ADD(acc, acc_query_unchanged);
    ADD(acc, acc_http10_no_host);
    ADD(acc, acc_hosts);
    ADD(acc, acc_absolute_form_overrides_host);
    ADD(acc, acc_absolute_form_variants);
    ADD(acc, acc_asterisk_form);
    ADD(acc, acc_connect_authority_form);
    ADD(acc, acc_bare_lf_head);
    ADD(acc, acc_leading_empty_lines);
    ADD(acc, acc_incomplete_is_again);
    ADD(acc, acc_keep_alive_matrix);
    ADD(acc, acc_connection_tokens);
    ADD(acc, acc_too_many_connection_tokens);
    ADD(acc, acc_expect_continue);
    ADD(acc, acc_upgrade);
    ADD(acc, acc_grpc_content_type);
    ADD(acc, acc_content_length_body);
    ADD(acc, acc_content_length_zero);
    ADD(acc, acc_chunked_body);
    ADD(acc, acc_trailers_dropped);
    ADD(acc, acc_chunked_case_insensitive);
    ADD(acc, acc_body_split_across_feeds);
    ADD(acc, acc_body_callback_failure);
    ADD(acc, acc_misuse);
    ADD(acc, acc_pipelined);
    ADD(acc, acc_split_invariance);

    ADD(lim, lim_request_line);
    ADD(lim, lim_request_line_default);
    ADD(lim, lim_header_bytes);
    ADD(lim, lim_header_bytes_default);
    ADD(lim, lim_header_count);
    ADD(lim, lim_body_content_length);
    ADD(lim, lim_body_chunked);
    ADD(lim, lim_trailers);
    ADD(lim, lim_chunk_line);
    ADD(lim, lim_init);
    ADD(lim, lim_take_give_mem);
    ADD(lim, lim_setup_without_mem);
    ADD(acc, made_head_skips_cross_check);

    ADD(norm, norm_in_parser);
    ADD(norm, path_control_escapes);
    ADD(norm, route_path_modes);
    ADD(acc, acc_max_forwards);

    suite_add_tcase(s, rej);
    suite_add_tcase(s, acc);
    suite_add_tcase(s, lim);
    suite_add_tcase(s, norm);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(request_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
