/*
 * tests/admin/http1/fuzz_response.c - fuzz target of admin/http1/response.c.
 *
 * Input layout: bytes 0-7 seed the split points, the rest is what an
 * upstream sends. It is read twice, as the proxy reads it: once with every
 * byte buffered, once arriving in pseudo-random pieces (the head parsed
 * again over all that is buffered each time, the body fed piece by piece).
 * Both reads must tell the same story: the same interim and final heads at
 * the same offsets, the same decoded body, the same end or error. Along the
 * way every promise of response.h is checked: slices inside the input,
 * field names tokens, a status line of "HTTP/1.x" and three digits, at most
 * one Transfer-Encoding and only "chunked", a body that ends where it says.
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * fuzz_replay.c as a plain program that replays fuzz_response_corpus/ plus
 * mutations of it (run by ctest).
 */
#include "admin/http1/response.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* bytes 0-7 are the split seed, not upstream bytes */
const size_t fuzz_prefix = 8;

#define HEAD_MAX 4096 /* small, so that the limit is reached too */
#define MAX_HEADS 8

/* What one read of the stream saw. */
struct story {
    int nheads;
    int status[MAX_HEADS];
    size_t head_end[MAX_HEADS]; /* offset where each head ended */
    int head_rc;                /* of the last head parse: 1, 0 (incomplete), -1 */
    bool body_started, done, failed;
    size_t end; /* offset where the message ended (done) */
    char body[1 << 16];
    size_t body_len;
    char trailers[H1_RESP_TRAILERS_MAX]; /* h1_resp_trailers() once done */
    size_t trailers_len;
};

static struct h1_resp r;
static struct story one, cut;

static void collect(void *ctx, const char *d, size_t n)
{
    struct story *s = ctx;

    CHECK(s->body_len + n <= sizeof(s->body));
    memcpy(s->body + s->body_len, d, n);
    s->body_len += n;
}

/* The promises of a complete head over <d>[0..<hl>). */
static void check_head(const char *d, size_t hl)
{
    int nte = 0;

    CHECK(hl >= 13 && hl <= HEAD_MAX);
    CHECK(memcmp(d, "HTTP/1.", 7) == 0 && (d[7] == '0' || d[7] == '1'));
    CHECK(r.status >= 100 && r.status <= 999);
    CHECK(r.status == (d[9] - '0') * 100 + (d[10] - '0') * 10 + (d[11] - '0'));
    CHECK(r.nhdr <= H1_RESP_MAX_HEADERS);
    for (size_t i = 0; i < r.nhdr; i++) {
        const struct h1_header *h = &r.hdr[i];

        CHECK(h->name.ptr >= d && h->name.ptr + h->name.len <= d + hl);
        CHECK(h1_is_token(h->name.ptr, h->name.len));
        if (h->value.ptr)
            CHECK(h->value.ptr >= d && h->value.ptr + h->value.len <= d + hl);
        if (h1_name_is(&h->name, "transfer-encoding"))
            nte++;
    }
    CHECK(nte <= 1);
    CHECK(h1_resp_chunked(&r) == (nte == 1));
}

/* Reads <d>[0..<n>), made available <step> bytes more at a time (0: all at
 * once); the body is fed in the same pieces. */
static void read_stream(const char *d, size_t n, struct story *s, uint64_t *rng)
{
    size_t avail = 0, at = 0; /* bytes buffered; bytes used */

    memset(s, 0, offsetof(struct story, body));
    s->body_len = 0;
    s->trailers_len = 0;
    for (;;) {
        size_t more = rng ? 1 + (size_t)(rng_next(rng) % 64) : n;

        avail = avail + more > n ? n : avail + more;
        while (!s->body_started) {
            size_t hl = 0;
            int rc = h1_resp_parse_head(&r, d + at, avail - at, HEAD_MAX, &hl);

            s->head_rc = rc;
            if (rc <= 0)
                break;
            check_head(d + at, hl);
            CHECK(s->nheads < MAX_HEADS);
            s->status[s->nheads] = r.status;
            s->head_end[s->nheads++] = at + hl;
            at += hl;
            if (r.status >= 200 || s->nheads == MAX_HEADS) {
                s->body_started = true;
                h1_resp_begin_body(&r);
            }
        }
        if (s->head_rc < 0)
            return;
        while (s->body_started && !r.msg_done && at < avail) {
            size_t used = 0;

            if (h1_resp_feed_body(&r, d + at, avail - at, &used, collect, s) < 0) {
                s->failed = true;
                return;
            }
            CHECK(used <= avail - at);
            CHECK(used == avail - at || r.msg_done);
            at += used;
        }
        if (r.msg_done) {
            struct h1_slice t = h1_resp_trailers(&r);

            /* whole lines of a name and a value, never over the bound */
            CHECK(t.len <= sizeof(s->trailers));
            CHECK(t.len == 0 || (t.len >= 4 && memcmp(t.ptr + t.len - 2, "\r\n", 2) == 0));
            memcpy(s->trailers, t.ptr, t.len);
            s->trailers_len = t.len;
            s->done = true;
            s->end = at;
            return;
        }
        if (avail == n)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = 0x9e3779b97f4a7c15u;
    const char *d = (const char *)data + fuzz_prefix;
    size_t n;

    if (size < fuzz_prefix)
        return 0;
    for (size_t i = 0; i < fuzz_prefix; i++)
        seed = seed * 31 + data[i];
    seed |= 1;
    n = size - fuzz_prefix;

    read_stream(d, n, &one, NULL);
    read_stream(d, n, &cut, &seed);

    CHECK(one.nheads == cut.nheads);
    for (int i = 0; i < one.nheads; i++)
        CHECK(one.status[i] == cut.status[i] && one.head_end[i] == cut.head_end[i]);
    CHECK(one.body_started == cut.body_started);
    /* a head refused whole is refused in pieces; one still incomplete at
     * the end of the input is so in pieces too */
    if (!one.body_started)
        CHECK(one.head_rc == cut.head_rc);
    CHECK(one.done == cut.done && one.failed == cut.failed);
    if (one.done) {
        CHECK(one.end == cut.end && one.end <= n);
        CHECK(one.trailers_len == cut.trailers_len);
        CHECK(memcmp(one.trailers, cut.trailers, one.trailers_len) == 0);
    }
    if (!one.failed) {
        CHECK(one.body_len == cut.body_len);
        CHECK(memcmp(one.body, cut.body, one.body_len) == 0);
    }
    return 0;
}
