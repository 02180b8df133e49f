/*
 * tests/admin/http1/fuzz_h2head.c - fuzz target of admin/http1/h2head.c:
 * arbitrary HTTP/2 header lists (what HPACK may decode, NUL, CR, LF and
 * all) turned into HTTP/1.1 heads.
 *
 * Input layout: byte 0 picks the limits (bits 0-1) and whether DATA follows
 * (bit 2); then fields, each one byte <n> for its name (n >= 0x80: name n &
 * 0x7f of a table of the names that matter, the pseudo-header fields, host,
 * cookie and the connection-specific ones; else the next n bytes), two
 * bytes for its value's length (big-endian, cut to what is left), and the
 * value. The side buffer is malloc'd at exactly the size the codec gives
 * (the parser's head), so an overflow is the sanitizer's to see.
 *
 * Checked: the results are the three documented ones and stick; an accepted
 * head is one the parser took whole, every line of it a field the parser
 * reports (nothing injected: its line ends are its fields plus two), the
 * cookie crumbs arrive joined in order in the one Cookie field, no
 * connection-specific field but the Transfer-Encoding: chunked of a body
 * without content-length, a path that is origin-form or "*"; and the head,
 * made (no llhttp cross-check, h1_req_made_head()), is one a client could
 * have sent: a plain parser takes the same bytes, llhttp agreeing. The
 * same bytes go through h2h_fields() as a response's lines.
 *
 * And the gateway's fast path is held to the plain one: a header list
 * whose every field nghttp2's own checks pass (libnghttp2's
 * nghttp2_check_* functions, as its HTTP messaging applies them to a
 * server's request) gives, with h2h_checked(), the same result, status and
 * head bytes as without.
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * fuzz_replay.c as a plain program that replays fuzz_h2head_corpus/ plus
 * mutations of it with a fixed seed (run by ctest).
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/http1/h2head.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "tests/gateway/fuzz_util.h"

/* The same bytes as response lines (h2h_fields): every field inside them,
 * its name lower case without a colon, its value without CR, LF or
 * surrounding whitespace, no connection-specific field; the count the
 * same whatever room was given. */
static void check_fields(const uint8_t *data, size_t size)
{
    static char lines[1 << 16];
    struct h1_header f[64];
    size_t n, all;

    if (size > sizeof(lines))
        size = sizeof(lines);
    memcpy(lines, data, size);
    all = h2h_fields(lines, size, f, 0);
    n = h2h_fields(lines, size, f, 64);
    CHECK(n == all);
    for (size_t i = 0; i < n && i < 64; i++) {
        const struct h1_slice *nm = &f[i].name, *v = &f[i].value;
        int cf = h1_conn_field(nm);

        CHECK(nm->len > 0 && nm->ptr >= lines && nm->ptr + nm->len <= lines + size);
        CHECK(v->ptr >= lines && v->ptr + v->len <= lines + size);
        CHECK(!memchr(nm->ptr, ':', nm->len) && !memchr(nm->ptr, '\n', nm->len));
        for (size_t k = 0; k < nm->len; k++)
            CHECK(!(nm->ptr[k] >= 'A' && nm->ptr[k] <= 'Z'));
        CHECK(!memchr(v->ptr, '\r', v->len) && !memchr(v->ptr, '\n', v->len));
        CHECK(!v->len || (v->ptr[0] != ' ' && v->ptr[0] != '\t' && v->ptr[v->len - 1] != ' ' &&
                          v->ptr[v->len - 1] != '\t'));
        CHECK(cf != H1_CF_CONNECTION && cf != H1_CF_KEEP_ALIVE && cf != H1_CF_UPGRADE &&
              cf != H1_CF_PROXY_CONNECTION && cf != H1_CF_TRANSFER_ENCODING);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    ":method",
    ":path",
    ":authority",
    ":scheme",
    "host",
    "cookie",
    "te",
    "content-length",
    "connection",
    "upgrade",
    "transfer-encoding",
    "keep-alive",
    "expect",
    "proxy-connection",
    ":status",
    ":protocol",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* What the list held that the head must show. */
struct expect {
    char cookie[1 << 16];
    size_t cookie_len, crumbs;
    bool cl;
};

static void add_crumb(struct expect *e, const uint8_t *v, size_t n)
{
    if (!n || e->cookie_len + n + 2 > sizeof(e->cookie))
        return;
    if (e->crumbs++) {
        memcpy(e->cookie + e->cookie_len, "; ", 2);
        e->cookie_len += 2;
    }
    memcpy(e->cookie + e->cookie_len, v, n);
    e->cookie_len += n;
}

/* The made head <p> holds, fed as a client's bytes to a parser of the same
 * limits: taken whole, cross-checked by llhttp, framed alike. */
static void check_as_client_bytes(const struct h1_req_parser *p, const struct h1_req_limits *lim)
{
    const struct h1_request *r = &p->req;
    struct h1_req_parser q;
    size_t used = 0;

    CHECK(h1_req_parser_init(&q, lim) == 0);
    CHECK(h1_req_feed_head(&q, r->head.ptr, r->head.len, &used) == H1_REQ_HEAD);
    CHECK(used == r->head.len);
    CHECK(h1_req_confirm(&q) == 0);
    CHECK(q.req.body_kind == r->body_kind && q.req.content_length == r->content_length);
    CHECK(q.req.nheaders == r->nheaders && q.req.path_len == r->path_len);
    CHECK(memcmp(q.req.path, r->path, r->path_len) == 0);
    h1_req_parser_free(&q);
}

static void check_head(const struct h1_req_parser *p, const struct expect *e, bool body)
{
    const struct h1_request *r = &p->req;
    const char *h = r->head.ptr, *end = h + r->head.len;
    size_t lines = 0, cookies = 0;
    bool te = false;

    CHECK(r->head.len >= 4 && memcmp(end - 4, "\r\n\r\n", 4) == 0);
    for (const char *q = h; (q = memchr(q, '\n', (size_t)(end - q))); q++) {
        CHECK(q > h && q[-1] == '\r');
        lines++;
    }
    CHECK(lines == r->nheaders + 2); /* request line, fields, the empty line */
    CHECK(!memchr(h, '\0', r->head.len));
    CHECK(r->path_len >= 1 && (r->path[0] == '/' || (r->path[0] == '*' && r->path_len == 1)));
    CHECK(r->form == H1_TARGET_ORIGIN || r->form == H1_TARGET_ASTERISK);
    CHECK(r->host.ptr != NULL);
    for (size_t i = 0; i < r->nheaders; i++) {
        const struct h1_header *f = &r->headers[i];
        int cf = h1_conn_field(&f->name);

        CHECK(cf != H1_CF_CONNECTION && cf != H1_CF_KEEP_ALIVE && cf != H1_CF_UPGRADE &&
              cf != H1_CF_PROXY_CONNECTION);
        if (cf == H1_CF_TRANSFER_ENCODING) {
            CHECK(!te && f->value.len == 7 && !memcmp(f->value.ptr, "chunked", 7));
            te = true;
        }
        if (h1_name_is(&f->name, "cookie")) {
            CHECK(++cookies == 1);
            CHECK(f->value.len == e->cookie_len && !memcmp(f->value.ptr, e->cookie, e->cookie_len));
        }
    }
    CHECK(cookies == (e->crumbs > 0));
    CHECK(te == (body && !e->cl));
    CHECK(r->body_kind == (te ? H1_BODY_CHUNKED : e->cl ? H1_BODY_LENGTH : H1_BODY_NONE));
}

/* Whether nghttp2's HTTP messaging passes the field <name>: <value> of a
 * request on to a server's callback (nghttp2_http.c: a field it fails is
 * refused or ignored, never passed on). */
static bool nghttp2_passes(const uint8_t *name, size_t nlen, const uint8_t *v, size_t vlen)
{
    if (!nghttp2_check_header_name(name, nlen))
        return false;
    if (nlen == 7 && !memcmp(name, ":method", 7))
        return nghttp2_check_method(v, vlen);
    if (nlen == 5 && !memcmp(name, ":path", 5))
        return nghttp2_check_path(v, vlen);
    if ((nlen == 10 && !memcmp(name, ":authority", 10)) || (nlen == 4 && !memcmp(name, "host", 4)))
        return nghttp2_check_authority(v, vlen);
    return nghttp2_check_header_value_rfc9113(v, vlen);
}

/* The last accepted head of run(), for the fast path to be compared with. */
static char head_seen[1 << 17];
static size_t head_seen_len;

static int run(const uint8_t *data, size_t size, const struct h1_req_limits *lim, bool body,
               bool checked, bool *passes, int *status)
{
    static struct expect e;
    struct h1_req_parser p;
    struct h2h h;
    size_t cap, i = 0;
    char *side;
    int rc = H2H_OK;

    CHECK(h1_req_parser_init(&p, lim) == 0);
    cap = lim->max_request_line + 2 + lim->max_header_bytes;
    side = malloc(cap);
    CHECK(side != NULL);
    h2h_begin(&h, &p, side, cap);
    if (checked)
        h2h_checked(&h);
    *passes = true;
    memset(&e, 0, sizeof(e));
    while (i < size) {
        const char *name;
        size_t nlen, vlen;
        const uint8_t *v;
        int r;

        if (data[i] & 0x80) {
            name = names[(data[i] & 0x7f) % NNAMES];
            nlen = strlen(name);
            i++;
        } else {
            nlen = data[i++];
            if (nlen > size - i)
                nlen = size - i;
            name = (const char *)data + i;
            i += nlen;
        }
        vlen = i + 2 <= size ? (size_t)data[i] << 8 | data[i + 1] : 0;
        i = i + 2 <= size ? i + 2 : size;
        if (vlen > size - i)
            vlen = size - i;
        v = data + i;
        i += vlen;
        *passes = *passes && nghttp2_passes((const uint8_t *)name, nlen, v, vlen);
        r = h2h_field(&h, &p, name, nlen, (const char *)v, vlen);
        CHECK(r == H2H_OK || r == H2H_MALFORMED || r == H2H_ERROR);
        CHECK(rc == H2H_OK || r == rc); /* sticky */
        CHECK(h.len <= h.cap);
        rc = r;
        if (rc == H2H_OK && nlen == 6 && !memcmp(name, "cookie", 6))
            add_crumb(&e, v, vlen);
        if (rc == H2H_OK && nlen == 14 && !memcmp(name, "content-length", 14))
            e.cl = true;
    }
    if (rc == H2H_OK)
        rc = h2h_end(&h, &p, body);
    CHECK(rc == H2H_OK || rc == H2H_MALFORMED || rc == H2H_ERROR);
    if (rc != H2H_OK)
        CHECK(h2h_end(&h, &p, body) == rc);
    head_seen_len = 0;
    if (rc == H2H_OK) {
        check_head(&p, &e, body);
        check_as_client_bytes(&p, lim);
        CHECK(p.req.head.len <= sizeof(head_seen));
        memcpy(head_seen, p.req.head.ptr, p.req.head.len);
        head_seen_len = p.req.head.len;
    }
    if (rc == H2H_ERROR)
        CHECK(h.status >= 400 && h.status < 600 && h.reason != NULL);
    *status = rc == H2H_OK ? 0 : h.status;
    free(side);
    h1_req_parser_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct h1_req_limits lim;
    int s1, s2, rc;
    bool passes;

    if (size < 1)
        return 0;
    h1_req_limits_default(&lim);
    switch (data[0] & 3) {
    case 1:
        lim.max_request_line = 32;
        lim.max_header_bytes = 64;
        lim.max_headers = 4;
        break;
    case 2:
        lim.max_request_line = 128;
        lim.max_header_bytes = 256;
        lim.max_headers = 8;
        break;
    case 3:
        lim.max_request_line = 16;
        lim.max_header_bytes = 24;
        lim.max_headers = 2;
        break;
    default:
        break;
    }
    rc = run(data + 1, size - 1, &lim, (data[0] & 4) != 0, false, &passes, &s1);
    if (passes) { /* nghttp2 would pass each field: the fast path answers alike */
        static char plain[sizeof(head_seen)];
        size_t plain_len = head_seen_len;

        memcpy(plain, head_seen, plain_len);
        CHECK(run(data + 1, size - 1, &lim, (data[0] & 4) != 0, true, &passes, &s2) == rc &&
              s1 == s2);
        CHECK(head_seen_len == plain_len && !memcmp(head_seen, plain, plain_len));
    } else {
        CHECK(run(data + 1, size - 1, &lim, (data[0] & 4) != 0, false, &passes, &s2) == rc &&
              s1 == s2);
    }
    check_fields(data + 1, size - 1);
    return 0;
}

const size_t fuzz_prefix = 1;
