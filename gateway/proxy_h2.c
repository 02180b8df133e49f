/*
 * proxy_h2.c - a request that goes to an HTTP/2 pool ("h2c" or "h2"): its
 * head as an HTTP/2 stream's (the same upstream head as HTTP/1's,
 * gw_forward_head, read back into fields), its body streamed into DATA
 * frames under the stream's flow control, the response head and body
 * passed to the client's codec (framed chunked for an HTTP/1.1 client;
 * through the route's compress policy when it takes the answer),
 * trailers end to end (to an HTTP/1.1 client only when it sent TE:
 * trailers), gRPC's grpc-timeout, and the failures: the same try machine
 * as HTTP/1 (try.c), plus a stream the server never processed, which goes
 * again whatever its method (RFC 9113 8.7).
 *
 * Backpressure both ways: a request body waits in the stream's buffer up
 * to GW_HWM (then the client is not read); response DATA is given back
 * to the server as window only once the client's output is under GW_HWM
 * (gw_h2us_consume), so a slow client holds at most one window per stream.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admin/http1/h2head.h"
#include "gateway/grpc.h"
#include "gateway/h2up.h"
#include "gateway/health.h"
#include "gateway/local.h"
#include "gateway/policy.h"

/* A streamed body's bytes kept for a second try (req.h: replay). */
#define GW_REPLAY_MAX (64 * 1024)
/* Tries of a request that servers refused unprocessed, at most: a
 * server at its stream limit (a burst before its SETTINGS came) refuses
 * what it cannot take, and a GOAWAY refuses what was in flight. */
#define GW_REFUSED_MAX 4
/* The fields of a request head or a response head, at most. */
#define GW_PH2_NV 256

/* ---- the request ---- */

/* grpc-timeout (gRPC's PROTOCOL-HTTP2: 1*8DIGIT and a unit) in ms, rounded
 * up; 0 when the request has none or it is malformed. */
static long long grpc_timeout_ms(const struct h1_request *rq)
{
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        const char *v = h->value.ptr;
        size_t n = h->value.len;
        unsigned long long x = 0;
        long double ms;

        if (!h1_name_is(&h->name, "grpc-timeout"))
            continue;
        if (n < 2 || n > 9)
            return 0;
        for (size_t k = 0; k + 1 < n; k++) {
            if (v[k] < '0' || v[k] > '9')
                return 0;
            x = x * 10 + (unsigned)(v[k] - '0');
        }
        switch (v[n - 1]) {
        case 'H':
            ms = (long double)x * 3600000;
            break;
        case 'M':
            ms = (long double)x * 60000;
            break;
        case 'S':
            ms = (long double)x * 1000;
            break;
        case 'm':
            ms = (long double)x;
            break;
        case 'u':
            ms = (long double)x / 1000;
            break;
        case 'n':
            ms = (long double)x / 1000000;
            break;
        default:
            return 0;
        }
        return ms < 1 ? 1 : (long long)(ms + 0.999L);
    }
    return 0;
}

/* Whether the client's TE names "trailers" (HTTP/1.1: it takes trailers in
 * a chunked answer; RFC 9110 10.1.4). */
static int te_trailers(const struct h1_request *rq)
{
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (h1_name_is(&h->name, "te") && h->value.len >= 8) {
            for (size_t k = 0; k + 8 <= h->value.len; k++)
                if (!strncasecmp(h->value.ptr + k, "trailers", 8))
                    return 1;
        }
    }
    return 0;
}

static nghttp2_nv nv_of(const char *name, size_t nlen, const char *value, size_t vlen)
{
    /* a request id is new each time: never in HPACK's table, where it
     * would only push out the fields that do repeat */
    uint8_t flags = nlen == 12 && !memcmp(name, "x-request-id", 12) ? NGHTTP2_NV_FLAG_NO_INDEX
                                                                    : NGHTTP2_NV_FLAG_NONE;
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, nlen, vlen, flags};
}

/* The upstream head of <r> as HTTP/2 fields into <nv>: gw_forward_head's
 * HTTP/1.1 head read back, so that forwarding (X-Forwarded-*, Via, the
 * route's request_headers, rewrite, strip_prefix) is one code for both
 * protocols. The request line gives :method and :path, Host :authority;
 * connection-specific fields go (RFC 9113 8.2.2), and TE goes up only as
 * "trailers" (gRPC needs it, 8.2.2 allows nothing else). Returns the count,
 * 0 when the head does not fit. The fields point into the worker's
 * scratch buffer (h2up_head) and <hv>, until the next request's head. */
static size_t request_nv(struct gw_req *r, int tls, long long left, nghttp2_nv *nv,
                         struct h1_header *hv)
{
    const struct h1_request *rq = &r->rp->req;
    struct gw_forward f;
    struct gw_obuf ob;
    char subject[512], sha256[65];
    char *p, *sp1, *sp2, *eol, *end;
    size_t n = 0, nf;
    int te = rq->grpc || te_trailers(rq);
    struct evbuffer *scratch = r->c->w->h2up_head;

    if (!scratch && !(scratch = r->c->w->h2up_head = evbuffer_new()))
        return 0;
    evbuffer_drain(scratch, evbuffer_get_length(scratch));
    gw_proxy_forward_of(r, &f, subject, sha256);
    gw_ob_init(&ob, scratch);
    gw_forward_head(&f, &ob);
    gw_ob_flush(&ob);
    if (!(p = (char *)evbuffer_pullup(scratch, -1)))
        return 0;
    end = p + evbuffer_get_length(scratch);
    /* "METHOD SP target SP HTTP/1.1 CRLF" */
    if (!(eol = memchr(p, '\n', (size_t)(end - p))) || !(sp1 = memchr(p, ' ', (size_t)(eol - p))) ||
        !(sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1))))
        return 0;
    nv[n++] = nv_of(":method", 7, p, (size_t)(sp1 - p));
    nv[n++] = nv_of(":scheme", 7, tls ? "https" : "http", tls ? 5 : 4);
    nv[n++] = nv_of(":path", 5, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    nf = h2h_fields(eol + 1, (size_t)(end - eol - 1), hv, GW_PH2_NV - 6);
    if (nf > GW_PH2_NV - 6)
        return 0;
    /* every pseudo-field before the others (RFC 9113 8.3): the Host line
     * may come anywhere in the head (a client's order, a route's set) */
    for (size_t i = 0; i < nf; i++) {
        const struct h1_header *h = &hv[i];
        if (h->name.len == 4 && !memcmp(h->name.ptr, "host", 4)) {
            nv[n++] = nv_of(":authority", 10, h->value.ptr, h->value.len);
            break;
        }
    }
    for (size_t i = 0; i < nf; i++) {
        const struct h1_header *h = &hv[i];
        if ((h->name.len == 4 && !memcmp(h->name.ptr, "host", 4)) ||
            (h->name.len == 2 && !memcmp(h->name.ptr, "te", 2)))
            continue;
        if (left && h->name.len == 12 && !memcmp(h->name.ptr, "grpc-timeout", 12)) {
            int k = snprintf(r->c->w->h2up_timeout, sizeof(r->c->w->h2up_timeout), "%lldm",
                             left > 99999999 ? 99999999 : left);
            nv[n++] = nv_of(h->name.ptr, h->name.len, r->c->w->h2up_timeout, (size_t)k);
            continue;
        }
        nv[n++] = nv_of(h->name.ptr, h->name.len, h->value.ptr, h->value.len);
    }
    if (te)
        nv[n++] = nv_of("te", 2, "trailers", 8);
    return n;
}

/* Body bytes of the client's for the stream (and the replay copy). */
static int body_cb(void *ctx, const char *data, size_t len)
{
    struct gw_req *r = ctx;

    if (!r->ups)
        return 0;
    if (evbuffer_add(r->ups->body, data, len) < 0)
        return -1;
    if (r->replay && !r->replay_over) {
        if (evbuffer_get_length(r->replay) + len > GW_REPLAY_MAX) {
            evbuffer_free(r->replay);
            r->replay = NULL;
            r->replay_over = 1;
        } else if (evbuffer_add(r->replay, data, len) < 0) { /* a replay cut short: none */
            evbuffer_free(r->replay);
            r->replay = NULL;
            r->replay_over = 1;
        }
    }
    return 0;
}

/* A body of none (Content-Length: 0): read to its end, nothing kept. */
static int no_body_cb(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return 0;
}

void gw_proxy_h2_body_up(struct gw_req *r)
{
    if (r->ups && !r->ups->body) { /* its HEADERS ended the stream */
        while (!r->body_done && r->codec->body_feed(r, no_body_cb, r) == GW_FEED_MORE)
            ;
        return;
    }
    while (!r->body_done && r->ups) {
        struct gw_h2us *st = r->ups;
        int rc;

        if (!st->h || !st->h->open || evbuffer_get_length(st->body) > GW_HWM) {
            /* the server's window is shut, or the connection not open yet
             * (a connect that fails then took none of the body: the try
             * can go elsewhere whole): the client waits */
            r->codec->body_read(r, 0);
            r->body_paused = 1;
            return;
        }
        if (!r->body_fed && !r->replay && !r->replay_over)
            r->replay = evbuffer_new(); /* NULL: none kept, the body only streams */
        r->body_fed = 1;
        rc = r->codec->body_feed(r, body_cb, r);
        if (rc == GW_FEED_FAILED)
            return;
        if (rc == GW_FEED_DONE) {
            const char *t = NULL;
            size_t tn = r->codec->body_trailers ? r->codec->body_trailers(r, &t) : 0;
            if (tn && gw_h2us_trailers(st, t, tn) < 0) {
                gw_proxy_fail(r, 502);
                return;
            }
            st->body_eof = 1;
            if (r->replay && !r->body) { /* whole: it can be sent again */
                r->body = r->replay;
                r->replay = NULL;
            }
        }
        st->until = gw_now_ms() + r->sr->timeout_ms; /* the client is sending */
        gw_h2us_resume(st);
        if (rc == GW_FEED_WAIT)
            return;
    }
}

/* The stream's body is under its low mark, or its connection opened: the
 * client is read again. */
void gw_ph2_body_room(struct gw_h2us *st)
{
    struct gw_req *r = st->r;

    if (!r->body_paused || r->body_done)
        return;
    r->body_paused = 0;
    r->codec->body_read(r, 1);
    gw_proxy_h2_body_up(r);
}

int gw_proxy_h2_send(struct gw_req *r, size_t server, int fresh)
{
    struct adm_snapshot *s = r->snap;
    const struct adm_upstream *def = &s->cfg->upstreams[r->sr->upstream];
    up_pool *pool = s->pools[r->sr->upstream];
    struct gw_worker *w = r->c->w;
    nghttp2_nv nv[GW_PH2_NV];
    struct h1_header hv[GW_PH2_NV];
    struct gw_h2up *h;
    struct gw_h2us *st;
    size_t n;
    long long now = gw_now_ms(), left = 0;
    int body = !gw_try_no_body(&r->rp->req);

    if (r->rp->req.grpc && (left = grpc_timeout_ms(&r->rp->req))) {
        /* the call's deadline runs from its start, through queues and
         * earlier tries: what is left of it goes up */
        left -= (long long)gw_elapsed_ms(&r->t0);
        if (left < 1)
            left = 1;
    }
    gw_try_start(r, server);
    r->upstream_addr = up_server_address(pool, server);
    h = fresh ? NULL : gw_h2up_get(w, pool, server);
    if (!h && !(h = gw_h2up_connect(w, s, r->sr->upstream, server)))
        return -1;
    if (!(n = request_nv(r, def->protocol == ADM_UP_H2, left, nv, hv))) {
        gw_up_log(GW_LOG_WARN, r, NULL, "the request head does not fit an HTTP/2 stream");
        return -1;
    }
    if (!(st = gw_h2us_open(h, r, nv, n, body)))
        return -1;
    r->ups = st;
    up_count_request(pool, w->id, server);
    clock_gettime(CLOCK_MONOTONIC, &r->t_up);
    /* timeout_ms from the request to the final head, then between reads;
     * a gRPC call's grpc-timeout caps the whole call */
    st->until = now + r->sr->timeout_ms;
    if (left)
        st->deadline = now + left;
    gw_h2us_due(st);
    if (!st->body) {
        /* no body: its HEADERS end the stream */
    } else if (r->body) { /* whole (request_buffering, or a retry's): shared, not copied */
        evbuffer_add_buffer_reference(st->body, r->body);
        st->body_eof = 1;
        gw_h2us_resume(st);
    } else if (r->replay) { /* what went to the try before, then the rest streams */
        size_t len = evbuffer_get_length(r->replay);
        evbuffer_add(st->body, evbuffer_pullup(r->replay, (ev_ssize_t)len), len);
        gw_h2us_resume(st);
    }
    return 0;
}

/* ---- the response ---- */

/* The try of <st> as the try machine sees it. */
static void at_of(const struct gw_h2us *st, struct gw_try_at *at)
{
    const struct gw_h2up *h = st->h;

    *at = (struct gw_try_at){
        .pool = st->pool,
        .server = st->server,
        .connecting = h && !h->open,
        .reached = h ? h->io.established : 1,
        .waiting = !st->head,
        .got_bytes = st->got,
        /* its HEADERS never left us, or the server says it did not act */
        .unprocessed = !st->sent || (!st->got && st->code == NGHTTP2_REFUSED_STREAM),
        .grpc = -1,
    };
}

/* The stream is done with: the try's slot and budget back. */
static void finish(struct gw_req *r)
{
    gw_try_detach(r);
    gw_try_finish(r);
}

/* The answer is whole: <trailers> for the client's codec. */
static void answer_end(struct gw_req *r, const char *trailers, size_t tlen, int chunk)
{
    if (r->rp->req.grpc && tlen)
        r->grpc_status = (unsigned char)(gw_grpc_status_in_lines(trailers, tlen) + 1);
    if (chunk) { /* the last chunk, with the trailers when the client takes them */
        int te = te_trailers(&r->rp->req);
        r->codec->data(r, "0\r\n", 3);
        if (te && tlen)
            r->codec->data(r, trailers, tlen);
        r->codec->data(r, "\r\n", 2);
        r->codec->end(r, NULL, 0);
    } else {
        r->codec->end(r, r->codec->http1 ? NULL : trailers, r->codec->http1 ? 0 : tlen);
    }
    if (r->body_done)
        gw_req_done(r);
    else /* answered before its body was whole: the rest is read away */
        gw_local_finish(r);
}

/* From the session's callbacks only: <st> outlives its detach until they
 * return (h2up.h), so its trailers are read in place. */
static void fail_started(struct gw_req *r, int chunk, short what, int deadline);

/* The body policy could not go on (out of memory): the answer is cut. */
static void body_failed(struct gw_req *r)
{
    gw_up_log(GW_LOG_WARN, r, NULL, "compressing failed (out of memory); ending the answer");
    fail_started(r, 0, GW_IO_ERR, 0);
}

void gw_ph2_end(struct gw_h2us *st)
{
    struct gw_req *r = st->r;
    size_t tlen = st->in_trailers ? st->flen - st->ftrail : 0;

    if (r->enc && gw_policy_body(r, NULL, 0, 1) < 0) { /* the encoder's last bytes */
        body_failed(r);
        return;
    }
    finish(r);
    answer_end(r, st->f + st->ftrail, tlen, st->chunk);
}

/* retry_on_status or retry_on_grpc_status for a final answer that is its
 * whole response (no body, or trailers-only): 1 when the request went on
 * to another server. */
static int answer_retried(struct gw_h2us *st, struct h1_header *hv, size_t nh, int end)
{
    struct gw_req *r = st->r;
    const struct adm_upstream *def = &r->snap->cfg->upstreams[r->sr->upstream];
    struct gw_try_at at;
    enum gw_next n;
    size_t server = 0;
    int code = -1;

    if (!r->plim)
        return 0;
    at_of(st, &at);
    if (r->rp->req.grpc && end && st->status == 200 && (code = gw_grpc_status_in(hv, nh)) > 0 &&
        adm_statuses_has(&def->retry_on_grpc_status, (unsigned)code))
        at.grpc = code;
    else if (!adm_statuses_has(&def->retry_on_status, (unsigned)st->status))
        return 0;
    n = gw_try_next_at(r, &at, 0, at.grpc >= 0 ? 0 : st->status, &server);
    return gw_proxy_next(r, n, server); /* <server> is set by then: two statements */
}

static int has_field(const struct h1_header *hv, size_t nh, const char *name)
{
    for (size_t i = 0; i < nh; i++)
        if (h1_name_is(&hv[i].name, name))
            return 1;
    return 0;
}

void gw_ph2_head(struct gw_h2us *st, int end)
{
    struct gw_req *r = st->r;
    struct h1_header hv[GW_PH2_NV];
    size_t nh = h2h_fields(st->f, st->flen, hv, GW_PH2_NV);
    struct gw_resp_head rh = {.status = st->status, .hdr = hv, .nhdr = nh, .reason_std = 1};
    int nobody = end || r->is_head || st->status == 204 || st->status == 304;
    double secs;
    struct gw_pol_head bh;

    if (nh > GW_PH2_NV) {
        gw_up_log(GW_LOG_WARN, r, NULL, "a response head of over %d fields", GW_PH2_NV);
        gw_proxy_fail(r, 502);
        return;
    }
    st->ftrail = st->flen;
    gw_health_status(r->c->w->id, r->snap, r->sr->upstream, st->server, (unsigned)st->status);
    if (st->status >= 500)
        up_count_failure(st->pool, r->c->w->id, st->server, UP_F_5XX);
    if (answer_retried(st, hv, nh, end))
        return;
    secs = gw_elapsed_ms(&r->t_up) / 1e3;
    r->up_ms = secs * 1e3;
    gw_count(&r->c->w->ctr.up[gw_hist_bucket(secs)], 1);
    gw_count(&r->c->w->ctr.up_sum_us, (uint64_t)(secs * 1e6));
    st->until = gw_now_ms() + r->sr->timeout_ms; /* from now on between reads */
    if (!nobody && r->pol_n && gw_policy_body_begin(r, st->status, hv, nh, &bh)) {
        /* compressed: framed chunked by the HTTP/1.1 codec, by the close
         * for HTTP/1.0, by DATA frames for HTTP/2 */
        rh.hdr = bh.hdr;
        rh.nhdr = bh.nhdr;
        if (r->codec->http1 && r->http10)
            r->keep = 0;
        r->chunk_out = r->codec->http1 && !r->http10;
    } else if (r->codec->http1 && !nobody && !has_field(hv, nh, "content-length")) {
        if (r->http10) {
            r->keep = 0; /* HTTP/1.0: the close ends it */
        } else {
            rh.extra = "Transfer-Encoding: chunked\r\n";
            rh.extra_len = 28;
            st->chunk = 1;
        }
    } else if (r->codec->http1 && end && !r->is_head && st->status != 204 && st->status != 304 &&
               !has_field(hv, nh, "content-length")) {
        rh.extra = "Content-Length: 0\r\n"; /* trailers-only to HTTP/1.1: the head is all */
        rh.extra_len = 19;
    }
    rh.nobody = (unsigned char)nobody;
    gw_proxy_head(r, &rh, NULL);
    if (end) {
        finish(r);
        answer_end(r, NULL, 0, 0);
    } else if (nobody) {
        /* HEAD, 204, 304: whatever DATA comes is not the client's; the
         * stream is done with */
        finish(r);
        answer_end(r, NULL, 0, 0);
    }
}

void gw_ph2_data(struct gw_h2us *st, const uint8_t *p, size_t n)
{
    struct gw_req *r = st->r;

    if (r->enc) { /* through the body policy, flushed: DATA says nothing of what follows */
        if (gw_policy_body(r, (const char *)p, n, 0) < 0 || gw_policy_body(r, NULL, 0, 0) < 0) {
            body_failed(r);
            return;
        }
    } else if (st->chunk) {
        char sz[24];
        int k = snprintf(sz, sizeof(sz), "%zx\r\n", n);
        r->codec->data(r, sz, (size_t)k);
        r->codec->data(r, (const char *)p, n);
        r->codec->data(r, "\r\n", 2);
    } else {
        r->codec->data(r, (const char *)p, n);
    }
    if (!r->enc)
        r->bytes_out += n;
    st->until = gw_now_ms() + r->sr->timeout_ms;
    if (r->codec->out_pending(r) > GW_HWM)
        st->unconsumed += n; /* given back when the client drained (gw_proxy_h2_drained) */
    else
        gw_h2us_consume(st, n);
}

void gw_proxy_h2_drained(struct gw_req *r)
{
    struct gw_h2us *st = r->ups;
    size_t n = st->unconsumed;

    st->unconsumed = 0;
    gw_h2us_consume(st, n);
}

/* The failure of <st> with <what> (or its reset, st->code) after its
 * response began: a gRPC client gets the failure as a status in trailers
 * (UNAVAILABLE, or DEADLINE_EXCEEDED for a timeout), as gRPC's own
 * transports report a lost stream; any other client a cut answer. */
static void fail_started(struct gw_req *r, int chunk, short what, int deadline)
{
    char tr[160];
    int code = (what & GW_IO_TIMEOUT) || deadline ? GW_GRPC_DEADLINE_EXCEEDED : GW_GRPC_UNAVAILABLE;
    int n;

    gw_count(&r->c->w->ctr.upstream_errors, 1);
    if (!r->rp->req.grpc || (r->codec->http1 && !(chunk && te_trailers(&r->rp->req)))) {
        finish(r);
        r->codec->abort(r);
        gw_req_done(r);
        return;
    }
    n = snprintf(tr, sizeof(tr), "grpc-status: %d\r\ngrpc-message: %s\r\n", code,
                 code == GW_GRPC_UNAVAILABLE ? "upstream%20failed%20mid-stream"
                                             : "upstream%20deadline%20exceeded");
    finish(r);
    answer_end(r, tr, (size_t)n, chunk);
}

void gw_ph2_fail(struct gw_h2us *st, short what)
{
    struct gw_req *r = st->r;
    struct gw_try_at at;
    enum gw_next n;
    size_t server = 0;
    long long now = gw_now_ms();
    int deadline = st->deadline && now >= st->deadline;
    enum up_failure kind;

    at_of(st, &at);
    if (!what)
        what = GW_IO_ERR;
    if (st->head) {
        gw_up_log_at(GW_LOG_WARN, r, &at, "%s mid-response; ending the client's answer",
                     (what & GW_IO_TIMEOUT) ? "timed out" : "failed");
        fail_started(r, st->chunk, what, deadline);
        return;
    }
    if (deadline) { /* the client's own time is up: no retry would be in time */
        gw_up_log_at(GW_LOG_INFO, r, &at, "grpc-timeout passed before a response");
        gw_proxy_fail_grpc(r, 504, GW_GRPC_DEADLINE_EXCEEDED, "grpc-timeout passed upstream");
        return;
    }
    if (at.unprocessed && gw_try_resendable(r) && r->refused < GW_REFUSED_MAX) {
        /* the server never processed it (REFUSED_STREAM, or above its
         * GOAWAY's last stream): again on a connection that takes it,
         * whatever the method; the server did not fail, and this costs
         * none of the pool's retries */
        r->refused++;
        gw_try_detach(r);
        if (gw_proxy_h2_send(r, at.server, 0) < 0)
            gw_proxy_fail(r, 502);
        else if (!r->body_done)
            gw_proxy_h2_body_up(r);
        return;
    }
    if (!at.unprocessed) {
        kind = at.connecting            ? (at.reached ? UP_F_TLS : UP_F_CONNECT)
               : (what & GW_IO_TIMEOUT) ? UP_F_TIMEOUT
                                        : UP_F_RESET;
        up_count_failure(st->pool, r->c->w->id, st->server, kind);
        gw_health_outcome(r->c->w->id, r->snap, r->sr->upstream, st->server, 1);
    }
    n = gw_try_next_at(r, &at, what, 0, &server);
    if (gw_proxy_next(r, n, server)) /* <server> is set by then: two statements */
        return;
    if (what & GW_IO_TIMEOUT) {
        gw_up_log_at(GW_LOG_WARN, r, &at, "%s",
                     at.connecting ? "connect timed out" : "no response in time");
        gw_proxy_fail(r, 504);
        return;
    }
    gw_up_log_at(GW_LOG_WARN, r, &at, "%s",
                 at.connecting        ? "connect failed"
                 : st->code           ? nghttp2_http2_strerror(st->code)
                 : (what & GW_IO_EOF) ? "closed before responding"
                                      : "failed before responding");
    gw_proxy_fail(r, 502);
}
