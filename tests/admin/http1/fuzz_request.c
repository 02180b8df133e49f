/*
 * tests/admin/http1/fuzz_request.c - fuzz target of admin/http1/request.c
 * (and path.c).
 *
 * Input layout: byte 0 picks the limits and merge_slashes, bytes 1-8 seed the
 * split points, the rest is a client byte stream. The stream goes through the
 * head and body phases request after request, once in one shot and once cut
 * at pseudo-random points; both runs must tell the same story (same heads,
 * same bodies, same error statuses). Along the way every invariant of the API
 * is checked: consumed <= len, AGAIN takes everything, a parsed head is
 * self-consistent (slices inside the head buffer, normalized path starting
 * with '/', idempotent normalization, ...), errors carry an allowed status.
 * The bytes are also fed to h1_path_normalize() and h1_path_route() (each
 * router.escaped_slashes mode) directly, and every field value to the
 * Forwarded parser (forwarded.c).
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * fuzz_replay.c as a plain program that replays a corpus directory plus
 * mutations of it with a fixed seed (run by ctest).
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/http1/forwarded.h"
#include "admin/http1/request.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t mix(uint64_t h, uint64_t v)
{
    int k;

    for (k = 0; k < 8; k++) {
        h ^= (v >> (8 * k)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* FNV-1a over bytes: feeding "ab" then "c" gives the hash of "abc". */
static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++) {
        h ^= (unsigned char)s[k];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t mix_bytes(uint64_t h, const char *s, size_t n)
{
    return mix(hash_bytes(h, s, n), n);
}

struct body_sink {
    uint64_t hash;
    uint64_t len;
};

static int sink(void *ctx, const char *d, size_t n)
{
    struct body_sink *b = ctx;

    CHECK(n > 0);
    b->hash = hash_bytes(b->hash, d, n);
    b->len += n;
    return 0;
}

static bool in_buf(struct h1_slice s, const struct h1_slice *buf)
{
    return s.ptr >= buf->ptr && s.ptr + s.len <= buf->ptr + buf->len;
}

/* Checks a path normalized with <opts>: shape, escapes, no dot segments,
 * no slash left escaped when they were decoded, idempotent. */
static void check_normalized(const char *path, size_t len, unsigned opts)
{
    char again[1 << 12];
    size_t k, len2;
    unsigned found;
    bool merge = (opts & H1_PATH_MERGE_SLASHES) != 0;

    CHECK(len >= 1 && path[0] == '/');
    CHECK(strlen(path) == len);
    for (k = 0; k < len; k++) {
        if (path[k] == '%') {
            CHECK(k + 2 < len);
            CHECK(path[k + 1] != '\0' && strchr("0123456789ABCDEF", path[k + 1]) != NULL);
            CHECK(path[k + 2] != '\0' && strchr("0123456789ABCDEF", path[k + 2]) != NULL);
            if (opts & H1_PATH_DECODE_SLASHES)
                CHECK(memcmp(path + k, "%2F", 3) != 0 && memcmp(path + k, "%5C", 3) != 0);
        }
        if (opts & H1_PATH_DECODE_SLASHES)
            CHECK(path[k] != '\\');
        if (path[k] == '/') {
            const char *seg = path + k + 1;
            size_t sl = strcspn(seg, "/");

            CHECK(!(sl == 1 && seg[0] == '.'));
            CHECK(!(sl == 2 && seg[0] == '.' && seg[1] == '.'));
            if (merge && k + 1 < len)
                CHECK(sl > 0);
        }
    }
    if (len + 2 <= sizeof(again)) {
        CHECK(h1_path_normalize(path, len, again, sizeof(again), opts, &found, &len2) == 0);
        CHECK(len2 == len && memcmp(again, path, len) == 0);
    }
}

/* Every field value through the Forwarded element parser and node names
 * (admin/http1/forwarded.c): it ends, always moves on, and each "for"
 * value lies inside the field or its unquoting buffer. */
static void check_forwarded(struct h1_slice v)
{
    char buf[H1_FWD_VALUE_MAX];
    enum h1_fwd_elem kind;
    struct h1_slice f;
    size_t pos = 0, last = 0, n = 0;
    struct sockaddr_storage a;

    while (h1_forwarded_next(v, &pos, &kind, &f, buf)) {
        CHECK(pos > last || n == 0);
        CHECK(++n <= v.len + 1);
        last = pos;
        if (kind == H1_FWD_FOR) {
            CHECK(f.ptr == buf ? f.len <= sizeof(buf) : in_buf(f, &v));
            (void)h1_node_addr(f.ptr, f.len, &a);
        }
    }
    if (h1_node_addr(v.ptr, v.len, &a) == 0)
        CHECK(a.ss_family == AF_INET || a.ss_family == AF_INET6);
}

/* Checks everything a H1_REQ_HEAD promises. */
static void check_head(const struct h1_req_parser *p)
{
    const struct h1_request *r = &p->req;
    size_t k;

    CHECK(r->head.ptr != NULL && r->head.len >= 4);
    CHECK(memcmp(r->head.ptr + r->head.len - 4, "\r\n\r\n", 4) == 0);
    CHECK(in_buf(r->method, &r->head) && r->method.len > 0);
    if (r->method_id == H1_METHOD_OTHER) {
        /* a token llhttp does not know */
        for (k = 0; k < r->method.len; k++)
            CHECK(r->method.ptr[k] > ' ' && r->method.ptr[k] < 0x7f &&
                  !strchr("\"(),/:;<=>?@[\\]{}", r->method.ptr[k]));
    } else {
        CHECK(strlen(llhttp_method_name(r->method_id)) == r->method.len);
        CHECK(memcmp(llhttp_method_name(r->method_id), r->method.ptr, r->method.len) == 0);
    }
    CHECK(r->version_major == 1 && r->version_minor <= 1);
    CHECK(in_buf(r->target, &r->head) && r->target.len > 0);
    CHECK(r->path != NULL && strlen(r->path) == r->path_len);
    switch (r->form) {
    case H1_TARGET_ORIGIN:
        CHECK(r->target.ptr[0] == '/');
        CHECK(r->path_len <= r->target.len);
        check_normalized(r->path, r->path_len, p->lim.merge_slashes ? H1_PATH_MERGE_SLASHES : 0);
        break;
    case H1_TARGET_ABSOLUTE:
        CHECK(r->path_len <= r->target.len);
        CHECK(r->host.ptr != NULL && in_buf(r->host, &r->target));
        check_normalized(r->path, r->path_len, p->lim.merge_slashes ? H1_PATH_MERGE_SLASHES : 0);
        break;
    case H1_TARGET_ASTERISK:
        CHECK(strcmp(r->path, "*") == 0 && r->method_id == HTTP_OPTIONS);
        break;
    case H1_TARGET_AUTHORITY:
        CHECK(r->path_len == 0 && r->method_id == HTTP_CONNECT);
        CHECK(!r->keep_alive && r->body_kind == H1_BODY_NONE);
        break;
    default:
        CHECK(0);
    }
    if (r->query.ptr != NULL) {
        CHECK(in_buf(r->query, &r->target));
        CHECK(r->query.ptr[-1] == '?');
    }
    if (r->version_minor == 1)
        CHECK(r->host.ptr != NULL);
    if (r->host.ptr != NULL) {
        CHECK(in_buf(r->host, &r->head) && r->host.len > 0);
        CHECK(r->host_name.ptr == r->host.ptr && r->host_name.len > 0 &&
              r->host_name.len <= r->host.len);
        CHECK(r->port <= 65535);
        for (k = 0; k < r->host.len; k++)
            CHECK(r->host.ptr[k] != '/' && r->host.ptr[k] != '@' && r->host.ptr[k] != ' ');
    }
    CHECK(r->nheaders <= p->lim.max_headers);
    for (k = 0; k < r->nheaders; k++) {
        struct h1_slice n = r->headers[k].name, v = r->headers[k].value;
        size_t i;

        CHECK(in_buf(n, &r->head) && n.len > 0);
        CHECK(in_buf(v, &r->head));
        for (i = 0; i < n.len; i++)
            CHECK(h1_is_tchar((unsigned char)n.ptr[i])); /* test_token.c checks the class */
        CHECK(n.ptr[n.len] == ':');
        check_forwarded(v);
        for (i = 0; i < v.len; i++) {
            unsigned char c = (unsigned char)v.ptr[i];

            CHECK(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
        if (v.len > 0) {
            CHECK(v.ptr[0] != ' ' && v.ptr[0] != '\t');
            CHECK(v.ptr[v.len - 1] != ' ' && v.ptr[v.len - 1] != '\t');
        }
    }
    CHECK(r->nconnection <= H1_REQ_MAX_CONN_TOKENS);
    for (k = 0; k < r->nconnection; k++)
        CHECK(in_buf(r->connection[k], &r->head) && r->connection[k].len > 0);
    CHECK(r->head.len <= p->lim.max_request_line + 2 + p->lim.max_header_bytes);
    if (r->body_kind != H1_BODY_LENGTH)
        CHECK(r->content_length == 0);
    if (r->body_kind == H1_BODY_CHUNKED)
        CHECK(r->version_minor == 1);
    if (r->body_kind == H1_BODY_LENGTH && p->lim.max_body_bytes != 0)
        CHECK(r->content_length <= p->lim.max_body_bytes);
    if (r->upgrade || r->expect_continue)
        CHECK(r->version_minor == 1);
}

static bool head_status_ok(int s)
{
    return s == 400 || s == 413 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505;
}

static bool body_status_ok(int s)
{
    return s == 400 || s == 413 || s == 431;
}

/* How many bytes the next feed gets: all of them (seed 0) or a random cut. */
static size_t next_len(uint64_t *seed, size_t left)
{
    uint64_t r;
    size_t n;

    if (*seed == 0 || left == 0)
        return left;
    r = rng_next(seed);
    switch (r & 3) {
    case 0:
        n = 1;
        break;
    case 1:
        n = 1 + (size_t)((r >> 8) % 8);
        break;
    case 2:
        n = 1 + (size_t)((r >> 8) % 64);
        break;
    default:
        n = 1 + (size_t)((r >> 8) % 1024);
        break;
    }
    return n < left ? n : left;
}

/* SY_FUZZ_TRACE=1 in the environment prints every event of every run. */
__attribute__((format(printf, 1, 2))) static void trace(const char *fmt, ...)
{
    static int on = -1;
    va_list ap;

    if (on < 0)
        on = getenv("SY_FUZZ_TRACE") != NULL;
    if (!on)
        return;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Runs the stream d[0..n) through a parser; returns the story's hash. */
static uint64_t drive(const char *d, size_t n, const struct h1_req_limits *lim, uint64_t seed)
{
    struct h1_req_parser p;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t off = 0, c, len, requests = 0;
    int rc;

    CHECK(h1_req_parser_init(&p, lim) == 0);
    for (;;) {
        struct body_sink body = {0xcbf29ce484222325ULL, 0};

        CHECK(requests++ <= n + 1);
        do {
            len = next_len(&seed, n - off);
            rc = h1_req_feed_head(&p, d + off, len, &c);
            CHECK(c <= len);
            if (rc == H1_REQ_AGAIN)
                CHECK(c == len);
            off += c;
        } while (rc == H1_REQ_AGAIN && off < n);
        if (rc == H1_REQ_AGAIN) {
            trace("  [%llu] head incomplete at %zu\n", (unsigned long long)seed, off);
            h = mix(h, 'A');
            break;
        }
        /* as the gateway does before a request goes upstream */
        if (rc == H1_REQ_HEAD && h1_req_confirm(&p) < 0)
            rc = H1_REQ_ERROR;
        if (rc == H1_REQ_ERROR) {
            trace("  [%llu] head error %d (%s) at %zu\n", (unsigned long long)seed, p.status,
                  p.reason, off);
            CHECK(head_status_ok(p.status));
            CHECK(p.reason != NULL && p.reason[0] != '\0');
            h = mix(mix(h, 'E'), (uint64_t)p.status);
            break;
        }
        CHECK(rc == H1_REQ_HEAD);
        trace("  [%llu] head ends at %zu: %.*s %s\n", (unsigned long long)seed, off,
              (int)p.req.method.len, p.req.method.ptr, p.req.path);
        check_head(&p);
        h = mix(mix(h, 'H'), off);
        h = mix_bytes(h, p.req.path, p.req.path_len);
        h = mix_bytes(h, p.req.head.ptr, p.req.head.len);
        h = mix(h, (uint64_t)p.req.body_kind << 8 | (uint64_t)p.req.keep_alive << 1 |
                       (uint64_t)p.req.upgrade << 2 | (uint64_t)p.req.expect_continue << 3);
        h = mix(h, p.req.content_length);
        if (p.req.host.ptr != NULL)
            h = mix_bytes(h, p.req.host.ptr, p.req.host.len);

        do {
            len = next_len(&seed, n - off);
            rc = h1_req_feed_body(&p, d + off, len, &c, sink, &body);
            CHECK(c <= len);
            if (rc == H1_REQ_AGAIN)
                CHECK(c == len);
            off += c;
        } while (rc == H1_REQ_AGAIN && off < n);
        if (rc == H1_REQ_AGAIN) {
            trace("  [%llu] body incomplete at %zu\n", (unsigned long long)seed, off);
            h = mix(h, 'a');
            break;
        }
        if (rc == H1_REQ_ERROR) {
            trace("  [%llu] body error %d (%s) at %zu\n", (unsigned long long)seed, p.status,
                  p.reason, off);
            CHECK(body_status_ok(p.status));
            CHECK(p.reason != NULL && p.reason[0] != '\0');
            h = mix(mix(h, 'e'), (uint64_t)p.status);
            break;
        }
        CHECK(rc == H1_REQ_DONE);
        trace("  [%llu] message ends at %zu, %llu body bytes\n", (unsigned long long)seed, off,
              (unsigned long long)body.len);
        if (p.req.body_kind == H1_BODY_LENGTH)
            CHECK(body.len == p.req.content_length);
        if (p.req.body_kind == H1_BODY_NONE)
            CHECK(body.len == 0);
        if (p.lim.max_body_bytes != 0)
            CHECK(body.len <= p.lim.max_body_bytes);
        h = mix(mix(mix(mix(h, 'D'), off), body.len), body.hash);
        h1_req_reset(&p);
    }
    h1_req_parser_free(&p);
    return h;
}

/* The bytes as a path: normalized with slashes kept and decoded, and
 * through each router.escaped_slashes mode. */
static void fuzz_normalize(const char *d, size_t n, bool merge)
{
    static const enum h1_escaped_slashes modes[] = {H1_SLASHES_REJECT, H1_SLASHES_DECODE,
                                                    H1_SLASHES_KEEP};
    unsigned opts = merge ? H1_PATH_MERGE_SLASHES : 0, found, kept_found = 0;
    char out[1 << 12];
    size_t outlen;
    int kept;

    if (n == 0 || d[0] != '/' || n + 2 > sizeof(out))
        return;
    kept = h1_path_normalize(d, n, out, sizeof(out), opts, &kept_found, &outlen);
    if (kept == 0) {
        CHECK(outlen <= n);
        check_normalized(out, outlen, opts);
    }
    if (h1_path_normalize(d, n, out, sizeof(out), opts | H1_PATH_DECODE_SLASHES, &found, &outlen) ==
        0) {
        CHECK(kept == 0); /* decoding refuses what keeping does, and no more */
        CHECK((found & H1_PATH_SLASH_ESCAPE) == (kept_found & H1_PATH_SLASH_ESCAPE));
        check_normalized(out, outlen, opts | H1_PATH_DECODE_SLASHES);
    } else {
        CHECK(kept < 0);
    }
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        int rc = h1_path_route(d, n, out, sizeof(out), opts, modes[m], &found, &outlen);
        CHECK(rc == 0 || rc == -2 || (rc == -1 && kept < 0));
        CHECK(rc != -1 || kept < 0);
        if (rc != 0)
            continue;
        if (modes[m] == H1_SLASHES_KEEP || kept_found == 0) {
            CHECK(found == kept_found);
            check_normalized(out, outlen, opts);
        } else {
            CHECK(modes[m] == H1_SLASHES_DECODE &&
                  !(found & (H1_PATH_DOT_PARAMS | H1_PATH_POPS_EMPTY)));
            check_normalized(out, outlen, opts | H1_PATH_DECODE_SLASHES);
        }
        if (modes[m] != H1_SLASHES_KEEP) /* nothing a backend could climb with */
            CHECK(!h1_path_climbs(out, outlen));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct h1_req_limits lim;
    uint64_t seed = 0, one, cut;
    const char *d = (const char *)data + 9;
    size_t n, k;

    if (size < 9)
        return 0;
    h1_req_limits_default(&lim);
    lim.merge_slashes = (data[0] & 1) != 0;
    switch ((data[0] >> 1) & 3) {
    case 1:
        lim.max_request_line = 32;
        lim.max_header_bytes = 64;
        lim.max_headers = 4;
        lim.max_body_bytes = 16;
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
        lim.max_body_bytes = 1;
        break;
    default:
        break;
    }
    for (k = 1; k < 9; k++)
        seed = seed << 8 | data[k];
    seed |= 1; /* 0 means "one shot" */
    n = size - 9;

    one = drive(d, n, &lim, 0);
    cut = drive(d, n, &lim, seed);
    CHECK(one == cut);
    fuzz_normalize(d, n, lim.merge_slashes);
    return 0;
}

/* the bytes before the client stream: limits and split seed */
const size_t fuzz_prefix = 9;
