/*
 * proxy.c - a request that goes upstream: an upstream connection for it
 * (upconn.c) and its head (forward.c), the request body streamed up
 * (re-framed), the response head checked and passed down without
 * hop-by-hop fields, 1xx interim responses, the body streamed down
 * (decoded for an HTTP/1.0 client; decoded and compressed when the
 * route's compress policy takes it, gateway/policy.h's body phase), the
 * response's end (the upstream connection parked or closed), the
 * failures (502, 504, or a cut connection once the response started);
 * after a 101, tunnel.c.
 *
 * Bodies stream with backpressure (GW_HWM, GW_LWM in conn.h): nothing is
 * buffered whole, unless the route says request_buffering: then the body
 * is read whole first and goes up with a Content-Length (and can be sent
 * again).
 *
 * Upstream limits (limits.h): a try holds a slot on its server while the
 * pool has max_connections; a request that finds every slot taken waits in
 * the worker's queue (or is answered 503 with Retry-After), and goes on when
 * a slot frees. Retries to other servers (connect failures, resets before a
 * response, retry_on_status) count in the pool's retry budget.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/proxy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gateway/clientip.h"
#include "gateway/forward.h"
#include "gateway/grpc.h"
#include "gateway/hashkey.h"
#include "gateway/health.h"
#include "gateway/limits.h"
#include "gateway/local.h"
#include "gateway/policy.h"
#include "gateway/try.h"
#include "gateway/h2up.h"
#include "gateway/tunnel.h"
#include "gateway/upconn.h"

static int send_to(struct gw_req *r, size_t server, int fresh);
static void fail_with(struct gw_req *r, int status, int code, const char *msg, const char *extra,
                      size_t extra_len);

/* Answers Expect: 100-continue, once per request: the body may come now.
 * We answer it ourselves (the field does not go upstream, as with nginx
 * and Envoy) when the body is wanted: before it is buffered, or once the
 * first try has a server. From then on the client sends its body, so a
 * final answer of ours reads it away and keeps the connection. */
static void send_continue(struct gw_req *r)
{
    if (r->rp->req.expect_continue && !r->continued && !gw_try_no_body(&r->rp->req)) {
        struct gw_obuf ob;
        r->codec->head_begin(r, &ob, 100, NULL);
        r->codec->head_end(r, &ob, GW_HEAD_INTERIM | GW_HEAD_CONTINUE);
        r->continued = 1;
    }
}

/* An overflow or a timeout of the queue, or no server up: 503 at once,
 * come back soon. A gRPC client hears <code> with <msg>: the pool's
 * limits are RESOURCE_EXHAUSTED, no server UNAVAILABLE. */
static void fail_busy(struct gw_req *r, int code, const char *msg)
{
    static const char ra[] = "Retry-After: 1\r\n";
    fail_with(r, 503, code, msg, ra, sizeof(ra) - 1);
}

/* The queue was full, or its wait ran out: the pool's limits. */
static void fail_full(struct gw_req *r)
{
    fail_busy(r, GW_GRPC_RESOURCE_EXHAUSTED,
              "upstream overloaded: every server at its max_connections, and the queue full or "
              "its wait over");
}

/* No server left to pick for <c>'s try, first or retry. Every server down
 * (and no panic) is answered as a full queue is: 503 with Retry-After: 1,
 * so that a client or a CDN backs off a moment rather than hammer a pool
 * that health checks may bring back any second (Envoy sends its "no
 * healthy upstream" 503 without one; we keep our two 503s alike). So is a
 * first try that has no server while others are up: the hash's server for
 * this key is down and the pool has no fallback; nothing failed, the
 * server is unavailable. Servers left that were all tried already (a
 * retry that waited for a slot): 502, the try's failure; a retry that
 * finds no server at once is answered as without retries (gw_try_next). */
static void fail_none_left(struct gw_req *r)
{
    if (up_pool_all_down(r->snap->pools[r->sr->upstream])) {
        fail_busy(r, GW_GRPC_UNAVAILABLE, "no healthy upstream");
    } else if (!r->tried.n) {
        gw_up_log(GW_LOG_INFO, r, NULL, "%s",
                  r->snap->cfg->upstreams[r->sr->upstream].balance == ADM_BALANCE_HASH
                      ? "the server for this request's hash key is down (no fallback)"
                      : "no server can take this request");
        fail_busy(r, GW_GRPC_UNAVAILABLE, "no healthy upstream for this request");
    } else {
        gw_proxy_fail(r, 502);
    }
}

void gw_proxy_detach(struct gw_req *r)
{
    gw_try_detach(r);
    gw_try_finish(r);
}

/* Decoded response body bytes (chunked to an HTTP/1.0 client) go on to
 * the client; raw ones are moved whole by pump_body_down. */
static void body_down_cb(void *ctx, const char *data, size_t len)
{
    struct gw_req *r = ctx;

    if (r->enc) { /* through the body policy: it counts what it sends */
        gw_policy_body(r, data, len, 0);
        return;
    }
    r->codec->data(r, data, len);
    r->bytes_out += len;
}

static int body_up_cb(void *ctx, const char *data, size_t len)
{
    struct gw_req *r = ctx;
    struct evbuffer *out;

    if (!r->up || !len)
        return 0;
    out = r->up->io.out;
    if (r->rp->req.body_kind == H1_BODY_CHUNKED) {
        char sz[24];
        int n = snprintf(sz, sizeof(sz), "%zx\r\n", len);
        evbuffer_add(out, sz, (size_t)n);
        evbuffer_add(out, data, len);
        evbuffer_add(out, "\r\n", 2);
    } else {
        evbuffer_add(out, data, len);
    }
    return 0;
}

static void buffer_body(struct gw_req *r);

/* Moves request body bytes from the client to the upstream, as far as the
 * upstream's output buffer allows. A streamed body waits for the upstream
 * connection to be open (up_event_cb goes on then): until then it stays in
 * the client's buffer, so that a connect that fails took none of it and
 * the request can go to another server whole (resendable), as nginx does
 * without request buffering. */
void gw_proxy_body_up(struct gw_req *r)
{
    if (r->body && !r->body_done) {
        buffer_body(r);
        return;
    }
    if (r->ups) {
        gw_proxy_h2_body_up(r);
        return;
    }
    if (r->up && r->up->st == GW_UP_CONNECTING) {
        /* not read meanwhile: the client's read timeout (client_body_ms)
         * must not blame it for a slow connect */
        r->codec->body_read(r, 0);
        r->body_paused = 1;
        return;
    }
    while (!r->body_done && r->up) {
        int rc;

        if (evbuffer_get_length(r->up->io.out) > GW_HWM) {
            r->codec->body_read(r, 0);
            r->body_paused = 1;
            return;
        }
        r->body_fed = 1;
        if ((rc = r->codec->body_feed(r, body_up_cb, r)) < GW_FEED_MORE)
            return;
        if (rc == GW_FEED_DONE && r->rp->req.body_kind == H1_BODY_CHUNKED) {
            const char *t = NULL;
            size_t tn = r->codec->body_trailers ? r->codec->body_trailers(r, &t) : 0;

            if (!tn) {
                evbuffer_add(r->up->io.out, "0\r\n\r\n", 5);
            } else { /* the client's trailers (HTTP/2) */
                evbuffer_add(r->up->io.out, "0\r\n", 3);
                evbuffer_add(r->up->io.out, t, tn);
                evbuffer_add(r->up->io.out, "\r\n", 2);
            }
        }
    }
    /* After the body, reading goes on: a pipelined next request waits in
     * the input buffer (bounded by the read watermark) and a client that
     * goes away is noticed. */
}

/* Parses the response head from the start of <in> with http1's response
 * parser, which refuses what llhttp lets through but a client must never
 * see. 1: complete, with *head_len bytes; 0: need more; -1: invalid. */
static int up_parse_head(struct gw_upconn *u, struct evbuffer *in, size_t *head_len)
{
    size_t n = evbuffer_get_length(in);
    const char *p;

    if (n > GW_UP_HEAD_MAX)
        n = GW_UP_HEAD_MAX;
    p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
    if (!p)
        return n ? -1 : 0;
    return h1_resp_parse_head(&u->resp, p, n, GW_UP_HEAD_MAX, head_len);
}

/* The route's response_headers <rs> set and added, for <c>'s request. */
static void emit_resp_headers(struct gw_req *r, const struct adm_shdrs *rs, struct gw_obuf *o)
{
    struct gw_hdr_vals v = {
        .params = r->params,
        .nparams = r->nparams < r->params_cap ? r->nparams : r->params_cap,
        .reqid = r->reqid,
        .reqid_len = r->reqid_len,
        .host = r->rp->req.host_name.ptr,
        .host_len = r->rp->req.host_name.len,
    };

    v.client_ip = gw_client_ip_text(r, &v.client_ip_len);
    gw_hdrs_emit(o, rs, &v);
}

/* A field of the response head: to the codec apart when it takes fields
 * so, else as a line. */
static inline void put_field(struct gw_req *r, struct gw_obuf *o, const char *name, size_t nlen,
                             const char *v, size_t vlen)
{
    if (r->codec->field)
        r->codec->field(r, o, name, nlen, v, vlen);
    else
        gw_ob_field(o, name, nlen, v, vlen);
}

/* The upstream's response to a gRPC request named grpc-status <code>
 * (-1: it did not): the access log and /metrics say it. */
static void grpc_status_of(struct gw_req *r, int code)
{
    if (code >= 0)
        r->grpc_status = (unsigned char)(code + 1);
}

void gw_proxy_head(struct gw_req *r, const struct gw_resp_head *rh, struct gw_obuf *pend)
{
    /* a final response gets the route's response_headers, an interim one not */
    const struct adm_shdrs *rs = rh->status >= 200 ? r->sr->resph : NULL;
    const struct h1_header *hdr = rh->hdr;
    size_t nhdr = rh->nhdr;
    int upgrade = rh->upgrade, nobody = rh->nobody, raw = rh->raw;
    struct gw_obuf ob, *o = pend ? pend : &ob;
    struct h1_slice conn_tok[32];
    size_t ntok = 0;
    int have_id = 0, have_date = 0;

    size_t before;
    unsigned flags = upgrade ? GW_HEAD_UPGRADE : 0;

    for (size_t i = 0; i < nhdr; i++) {
        const struct h1_header *h = &hdr[i];
        if (h1_name_is(&h->name, "connection")) {
            const char *s = h->value.ptr, *e = s + h->value.len;
            while (s < e && ntok < 32) {
                const char *t;
                while (s < e && (*s == ' ' || *s == '\t' || *s == ','))
                    s++;
                t = s;
                while (s < e && *s != ',' && *s != ' ' && *s != '\t')
                    s++;
                if (s > t) {
                    conn_tok[ntok].ptr = t;
                    conn_tok[ntok].len = (size_t)(s - t);
                    ntok++;
                }
            }
        }
    }
    static const struct h1_slice none = {"", 0};

    /* the upstream's reason as it came, none when it sent none (NULL
     * would have the codec write the standard one: our own heads) */
    r->codec->head_begin(r, o, rh->status, rh->reason ? rh->reason : rh->reason_std ? NULL : &none);
    before = 0;
    for (size_t i = 0; i < nhdr; i++) {
        const struct h1_header *h = &hdr[i];
        const char *v = h->value.ptr ? h->value.ptr : "";
        size_t vl = h->value.len;
        if (h1_is_hop_field(&h->name) || gw_forward_named_in(&h->name, conn_tok, ntok))
            continue;
        if (rs && gw_hdrs_drops(rs, &h->name)) /* the route's response_headers */
            continue;
        if (r->pol_n && gw_policy_resp_drops(r, &h->name)) /* a cors policy's own */
            continue;
        if ((!raw || !r->codec->http1) && h1_name_is(&h->name, "transfer-encoding"))
            continue;
        if (h1_name_is(&h->name, "x-request-id"))
            have_id = 1;
        else if (h1_name_is(&h->name, "date"))
            have_date = 1;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        put_field(r, o, h->name.ptr, h->name.len, v, vl);
    }
    if (rs)
        emit_resp_headers(r, rs, o);
    if (r->pol_n && rh->status >= 200) /* the route's policies' fields */
        gw_policy_response(r, o);
    if (!have_id && r->reqid_len)
        put_field(r, o, "X-Request-Id", 12, r->reqid, r->reqid_len);
    if (!have_date && rh->status >= 200) { /* RFC 9110 6.6.1: a forwarder adds it */
        const struct gw_worker *w = r->c->w;
        if (r->codec->field) /* "Date: " value CRLF */
            r->codec->field(r, o, "Date", 4, w->date + 6, w->date_len - 8);
        else
            gw_ob_add(o, w->date, w->date_len);
    }
    if (upgrade) {
        const struct h1_header *up = NULL;
        for (size_t i = 0; i < nhdr; i++)
            if (h1_name_is(&hdr[i].name, "upgrade"))
                up = &hdr[i];
        gw_ob_lit(o, "Connection: upgrade\r\n");
        if (up)
            gw_ob_field(o, "Upgrade", 7, up->value.ptr, up->value.len);
    }
    if (rh->extra_len)
        gw_ob_add(o, rh->extra, rh->extra_len);
    if (rh->status < 200 && !upgrade)
        flags |= GW_HEAD_INTERIM;
    else if (nobody)
        flags |= GW_HEAD_NOBODY;
    r->codec->head_end(r, o, flags);
    if (!pend)
        gw_ob_flush(o);
    r->bytes_out += o->total - before;
    r->head_out += o->total - before;
    r->resp_started = 1;
    r->status = rh->status;
    if (r->rp->req.grpc && rh->status >= 200) /* Trailers-Only: the status in the head */
        grpc_status_of(r, gw_grpc_status_in(hdr, nhdr));
}

/* Writes <u>'s response head to the client (gw_proxy_head), with the
 * fields of <bh> (a body policy's edits) when not NULL. */
static void write_resp_head(struct gw_req *r, struct gw_upconn *u, int upgrade, int nobody,
                            struct gw_obuf *pend, const struct gw_pol_head *bh)
{
    struct gw_resp_head rh = {
        .status = u->resp.status,
        .reason = u->resp.status_text.ptr ? &u->resp.status_text : NULL,
        .hdr = bh ? bh->hdr : u->resp.hdr,
        .nhdr = bh ? bh->nhdr : u->resp.nhdr,
        .raw = u->raw,
        .upgrade = upgrade,
        .nobody = nobody,
    };

    gw_proxy_head(r, &rh, pend);
}

/* The response is complete: park or close the upstream connection and go
 * on with the client. A body decoded for it (HTTP/2) ends with the
 * chunked body's trailers, copied before the connection goes. */
static void resp_done(struct gw_req *r)
{
    struct gw_upconn *u = r->up;
    char tr[H1_RESP_TRAILERS_MAX];
    size_t trn = 0;

    if (r->enc && gw_policy_body(r, NULL, 0, 1) < 0) { /* the encoder's last bytes */
        gw_up_log(GW_LOG_WARN, r, u, "compressing failed (out of memory); closing client %s:%u",
                  r->c->peer_ip, r->c->peer_port);
        gw_proxy_fail(r, 502);
        return;
    }
    if (u) {
        int reuse = u->keep && r->body_done && evbuffer_get_length(u->io.in) == 0 &&
                    evbuffer_get_length(u->io.out) == 0 && !r->c->w->draining;
        struct h1_slice t = h1_resp_trailers(&u->resp);

        if (!u->raw) {
            memcpy(tr, t.ptr, t.len);
            trn = t.len;
        }
        if (r->rp->req.grpc && t.len) /* a gRPC status in the trailers, where it belongs */
            grpc_status_of(r, gw_grpc_status_in_lines(t.ptr, t.len));
        gw_upconn_release(u, reuse, r->snap->cfg->upstreams[r->sr->upstream].idle_timeout_ms);
    }
    gw_try_finish(r);
    r->codec->end(r, trn ? tr : NULL, trn);
    if (r->body_done) {
        gw_req_done(r);
        return;
    }
    /* The upstream answered before taking the whole body (a 413, a 401, a
     * 417 after the head): the answer is whole, so the rest of the body is
     * read away and the connection goes on, as nginx does, rather than
     * closed under a client still sending (its answer said nothing of a
     * close, and a reset could take the answer with it). */
    gw_local_finish(r);
}

static void pump_body_down(struct gw_req *r, struct gw_upconn *u, struct gw_obuf *pend)
{
    struct evbuffer *in = u->io.in;

    if (pend && !u->raw) { /* decoded bodies go through the output: head first */
        gw_ob_flush(pend);
        pend = NULL;
    }
#define PEND_FLUSH()                                                                               \
    do {                                                                                           \
        if (pend)                                                                                  \
            gw_ob_flush(pend);                                                                     \
    } while (0)
    while (!u->resp.msg_done) {
        struct evbuffer_iovec v;
        size_t used;

        if (r->codec->out_pending(r) > GW_HWM) {
            gw_io_read(&u->io, 0);
            u->read_paused = 1;
            PEND_FLUSH();
            return;
        }
        if (!gw_peek_first(in, &v)) {
            if (u->eof)
                break;
            PEND_FLUSH();
            /* nothing more for now: what the encoder holds goes (a slow
             * stream, SSE, is not held back for its next piece) */
            if (r->enc && !u->resp.msg_done && gw_policy_body(r, NULL, 0, 0) < 0)
                break;
            return;
        }
        if (h1_resp_feed_body(&u->resp, v.iov_base, v.iov_len, &used, u->raw ? NULL : body_down_cb,
                              r) < 0) {
            gw_up_log(GW_LOG_WARN, r, u, "invalid response body (%s); closing client %s:%u",
                      h1_resp_error(&u->resp), r->c->peer_ip, r->c->peer_port);
            PEND_FLUSH();
            gw_proxy_fail(r, 502);
            return;
        }
        if (r->body_failed)
            break;
        if (u->raw) {
            r->codec->data_move(r, in, used, pend);
            r->bytes_out += used;
        } else {
            evbuffer_drain(in, used);
        }
    }
    PEND_FLUSH();
#undef PEND_FLUSH
    if (r->body_failed) {
        gw_up_log(GW_LOG_WARN, r, u, "compressing failed (out of memory); closing client %s:%u",
                  r->c->peer_ip, r->c->peer_port);
        gw_proxy_fail(r, 502);
        return;
    }
    if (!u->resp.msg_done) {
        /* the upstream closed and every byte it sent has gone on */
        if (h1_resp_needs_eof(&u->resp)) {
            resp_done(r); /* a close-delimited body ends here */
            return;
        }
        up_count_failure(u->pool, r->c->w->id, u->server, UP_F_RESET);
        gw_up_log(GW_LOG_WARN, r, u, "closed mid-body; closing client %s:%u", r->c->peer_ip,
                  r->c->peer_port);
        gw_proxy_fail(r, 502);
        return;
    }
    if (evbuffer_get_length(in))
        u->keep = 0; /* bytes after the response: never reuse */
    resp_done(r);
}

static void wait_for_slot(struct gw_req *r);

int gw_proxy_next(struct gw_req *r, enum gw_next n, size_t server)
{
    switch (n) {
    case GW_NEXT_GIVE_UP:
        return 0;
    case GW_NEXT_NONE_LEFT:
        fail_none_left(r);
        return 1;
    case GW_NEXT_WAIT:
        wait_for_slot(r);
        return 1;
    case GW_NEXT_SERVER:
        break;
    }
    if (send_to(r, server, 0) < 0)
        gw_proxy_fail(r, 502);
    else if (!r->body_done) /* a streamed body none of which went out yet */
        gw_proxy_body_up(r);
    return 1;
}

/* retry_on_status: 1 when the request went on to another server; the
 * response is dropped with its connection. */
static int status_retry(struct gw_req *r, struct gw_upconn *u)
{
    size_t server = 0;
    enum gw_next n;

    if (!r->plim || !adm_statuses_has(&r->snap->cfg->upstreams[r->sr->upstream].retry_on_status,
                                      (unsigned)u->resp.status))
        return 0; /* the common case, decided here */
    n = gw_try_next(r, u, 0, u->resp.status, &server);
    return gw_proxy_next(r, n, server);
}

/* An interim response of <u> (1xx but 101): 100 is ours to send (we
 * answered Expect); the others (102, 103 Early Hints) go to an HTTP/1.1
 * client, the first GW_UP_INTERIM_MAX of its request. Later ones are
 * dropped, as nginx drops early hints past proxy_buffer_size: a 1xx is
 * advisory (a client may ignore it, RFC 9110 15.2), so the final response
 * still goes through, and it comes within the response timeout, which a
 * 1xx does not restart (up_read_cb). */
static void pass_interim(struct gw_req *r, struct gw_upconn *u)
{
    if (u->resp.status == 100 || r->http10)
        return;
    if (r->interim >= GW_UP_INTERIM_MAX) {
        if (r->interim == GW_UP_INTERIM_MAX) { /* said once per request */
            gw_up_log(GW_LOG_INFO, r, u, "over %d interim responses; the rest are dropped",
                      GW_UP_INTERIM_MAX);
            r->interim++;
        }
        return;
    }
    r->interim++;
    u->raw = 1;
    write_resp_head(r, u, 0, 0, NULL, NULL); /* an interim head says nothing of the connection */
    r->resp_started = 0;
}

/* Whether the response head <rp> says its body is empty (Content-Length:
 * 0). A gRPC answer so is Trailers-Only (its status in the head): over
 * HTTP/2 it must end with its HEADERS, not an empty DATA frame after
 * them, or a gRPC client reads no status (UNKNOWN). */
static int empty_body(const struct h1_resp *rp)
{
    for (size_t i = 0; i < rp->nhdr; i++)
        if (h1_name_is(&rp->hdr[i].name, "content-length"))
            return rp->hdr[i].value.len == 1 && rp->hdr[i].value.ptr[0] == '0';
    return 0;
}

/* Handles what the upstream sent; returns after the client may be gone. */
static void up_handle(struct gw_req *r, struct gw_upconn *u)
{
    struct evbuffer *in = u->io.in;
    struct gw_obuf pend;
    struct gw_pol_head bh;

    gw_ob_init(&pend, NULL); /* the codec's head_begin sets it up */

    while (u->st == GW_UP_WAITING) {
        size_t hl = 0;
        int rc = up_parse_head(u, in, &hl);
        if (rc == 0)
            return;
        if (rc < 0) {
            gw_up_log(GW_LOG_WARN, r, u, "invalid response head%s",
                      u->resp.too_many ? " (too many fields)" : "");
            gw_proxy_fail(r, 502);
            return;
        }
        if (u->resp.status == 101) {
            /* we sent no Upgrade, or the client's protocol has no tunnels */
            if (!r->codec->http1 || !gw_forward_upgrade(&r->rp->req, r->sr)) {
                gw_proxy_fail(r, 502);
                return;
            }
            u->raw = 1;
            write_resp_head(r, u, 1, 0, NULL, NULL);
            evbuffer_drain(in, hl);
            gw_tunnel_start(r);
            return;
        }
        if (u->resp.status >= 100 && u->resp.status < 200) {
            pass_interim(r, u);
            evbuffer_drain(in, hl);
            if (r->codec->out_pending(r) > GW_HWM) {
                /* the client is behind: the next head waits upstream, as
                 * body bytes do (gw_proxy_drained goes on) */
                gw_io_read(&u->io, 0);
                u->read_paused = 1;
                return;
            }
            continue;
        }
        /* a status retried elsewhere still counts against its server */
        gw_health_status(r->c->w->id, r->snap, r->sr->upstream, u->server,
                         (unsigned)u->resp.status);
        if (u->resp.status >= 500)
            up_count_failure(u->pool, r->c->w->id, u->server, UP_F_5XX);
        if (status_retry(r, u))
            return;
        gw_upconn_set_state(u, GW_UP_BODY);
        u->tmo.last_rd = gw_now_ms(); /* from now on timeout_ms is between two reads */
        u->keep = h1_resp_keep_alive(&u->resp);
        {
            double secs = gw_elapsed_ms(&r->t_up) / 1e3;
            r->up_ms = secs * 1e3; /* the access log's upstream time */
            gw_count(&r->c->w->ctr.up[gw_hist_bucket(secs)], 1);
            gw_count(&r->c->w->ctr.up_sum_us, (uint64_t)(secs * 1e6));
        }
        if (r->is_head || u->resp.status == 204 || u->resp.status == 304 ||
            (r->rp->req.grpc && !r->codec->http1 && empty_body(&u->resp))) {
            write_resp_head(r, u, 0, 1, NULL, NULL);
            evbuffer_drain(in, hl);
            if (evbuffer_get_length(in))
                u->keep = 0;
            resp_done(r);
            return;
        }
        if (h1_resp_needs_eof(&u->resp)) {
            u->keep = 0;
            r->keep = 0; /* close-delimited: the client learns the end by the close */
        }
        /* bytes pass as they came unless chunked framing is to come off:
         * for an HTTP/1.0 client, and for HTTP/2, which frames by itself */
        u->raw = !h1_resp_chunked(&u->resp) || (r->codec->http1 && !r->http10);
        /* a compressed body is decoded, compressed, and framed anew:
         * chunked by the HTTP/1.1 codec, by the close for HTTP/1.0 */
        int edited =
            r->pol_n && gw_policy_body_begin(r, u->resp.status, u->resp.hdr, u->resp.nhdr, &bh);
        if (edited) {
            u->raw = 0;
            r->chunk_out = r->codec->http1 && !r->http10;
        }
        if (r->codec->http1 && !u->raw && !r->chunk_out)
            r->keep = 0; /* decoded to an HTTP/1.0 client: end by close */
        write_resp_head(r, u, 0, 0, &pend, edited ? &bh : NULL);
        evbuffer_drain(in, hl);
        h1_resp_begin_body(&u->resp);
    }
    pump_body_down(r, u, &pend);
}

/* gw_proxy_fail, the answer with <extra> fields, and for a gRPC client
 * <code> and <msg> (gw_local_simple_grpc's). */
static void fail_with(struct gw_req *r, int status, int code, const char *msg, const char *extra,
                      size_t extra_len)
{
    gw_proxy_detach(r);
    if (status >= 500)
        gw_count(&r->c->w->ctr.upstream_errors, 1);
    if (r->resp_started) {
        /* what the client already has goes out, then the close (HTTP/1)
         * or the stream's reset (HTTP/2) tells it the response was cut
         * short */
        r->codec->abort(r);
        gw_req_done(r);
        return;
    }
    /* The rest of the body (all of it when it waited for a connection that
     * failed, the rest when the upstream failed under it) is read and
     * dropped after the answer, as for any local answer and as nginx does:
     * the parser knows where it ends, and a close under a client still
     * sending could reset the answer away. So also after our 100 Continue:
     * the client sends its body then (RFC 9110 10.1.1). With Expect:
     * 100-continue and no 100 sent yet (its queue was full or timed out,
     * or no server could take it) the connection closes instead, as
     * gw_local_finish does: whether the client sends the body now is not
     * known for sure. */
    if (status < 500 || (!r->body_done && r->rp->req.expect_continue && !r->continued))
        r->keep = 0;
    if (code < 0 && r->retry_refused && status >= 500) {
        code = GW_GRPC_RESOURCE_EXHAUSTED; /* the failure's retry was what a limit refused */
        msg = "upstream failed, and the retry budget allows no retry now";
    }
    gw_local_simple_grpc(r, status, code, msg, extra, extra_len);
    if (!r->keep) {
        gw_req_done(r);
        return;
    }
    gw_local_finish(r);
}

/* Fails the proxied request: an error answer when nothing was sent yet,
 * else the client connection is closed (it cannot be told otherwise). */
void gw_proxy_fail(struct gw_req *r, int status)
{
    fail_with(r, status, -1, NULL, NULL, 0);
}

void gw_proxy_fail_grpc(struct gw_req *r, int status, int code, const char *msg)
{
    fail_with(r, status, code, msg, NULL, 0);
}

static void up_read_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;

    (void)io;
    /* timeout_ms runs from the request to the final head: neither 1xx
     * heads nor a head that trickles in restart it */
    if (u->st != GW_UP_WAITING)
        u->tmo.last_rd = gw_now_ms();
    u->got_bytes = 1;
    up_handle(u->r, u);
}

/* The client is read again and its body goes on to the upstream: it was
 * paused (the upstream's buffer was full, or it was connecting). */
static void body_resume(struct gw_req *r)
{
    if (r->body_paused) {
        r->body_paused = 0;
        r->codec->body_read(r, 1);
    }
    gw_proxy_body_up(r);
}

static void up_write_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_req *r = u->r;

    (void)io;
    if (r && r->body_paused && !r->body_done)
        body_resume(r);
}

/* Counts the failure (<what>) of the try on <u> against its server, by
 * kind: a connect that never completed; a TLS handshake (connected, not
 * yet open); a timeout; a close or reset. */
static void count_failure(const struct gw_req *r, const struct gw_upconn *u, short what)
{
    enum up_failure kind = UP_F_RESET;

    if (u->st == GW_UP_CONNECTING)
        kind = gw_try_reached(u) ? UP_F_TLS : UP_F_CONNECT;
    else if (what & GW_IO_TIMEOUT)
        kind = UP_F_TIMEOUT;
    up_count_failure(u->pool, r->c->w->id, u->server, kind);
}

static void up_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_req *r = u->r;
    char why[256];

    (void)io;
    if (what & GW_IO_CONNECTED) {
        gw_upconn_set_state(u, GW_UP_WAITING);
        gw_upconn_session_keep(u);
        /* from now on writes are held to the response timeout too */
        gw_tmo_set(&u->tmo, r->sr->timeout_ms, r->sr->timeout_ms);
        if (!r->body_done) /* a streamed body waited for the connection */
            body_resume(r);
        return;
    }
    if ((what & GW_IO_EOF) && u->st == GW_UP_BODY && !u->resp.msg_done) {
        /* The body bytes still buffered go to the client first (it may be
         * slower than the upstream): then a close-delimited body ends, and
         * any other died mid-body (pump_body_down decides). */
        u->eof = 1;
        u->keep = 0;
        if (!u->read_paused)
            pump_body_down(r, u, NULL);
        return;
    }
    if (gw_try_same(r, u, what)) {
        /* a pooled connection that died before answering (the server
         * closed it while idle): once more, on a fresh connection to the
         * same server, which did not fail and keeps its turn in the
         * balancing */
        size_t server = u->server;
        gw_try_detach(r);
        if (send_to(r, server, 1) < 0)
            gw_proxy_fail(r, 502);
        return;
    }
    count_failure(r, u, what);
    if (u->st == GW_UP_CONNECTING || u->st == GW_UP_WAITING) /* no answer: outlier food */
        gw_health_outcome(r->c->w->id, r->snap, r->sr->upstream, u->server, 1);
    {
        size_t server = 0;
        enum gw_next n = gw_try_next(r, u, what, 0, &server);
        if (gw_proxy_next(r, n, server))
            return;
    }
    if (what & GW_IO_TIMEOUT) {
        if (u->st == GW_UP_CONNECTING) {
            gw_up_log(GW_LOG_WARN, r, u, "connect timed out");
            gw_proxy_fail(r, 504);
        } else if (u->st == GW_UP_WAITING) {
            gw_up_log(GW_LOG_WARN, r, u, "no response within %u ms", r->sr->timeout_ms);
            gw_proxy_fail(r, 504);
        } else {
            gw_proxy_fail(r, 504);
        }
        return;
    }
    if (u->st == GW_UP_BODY) {
        gw_up_log(GW_LOG_WARN, r, u, "failed mid-response; closing client %s:%u", r->c->peer_ip,
                  r->c->peer_port);
    } else if (gw_tls_error(&u->io, why, sizeof(why))) {
        gw_up_log(GW_LOG_WARN, r, u, "TLS handshake failed: %s", why);
        gw_upconn_session_forget(u); /* never resume a failed server's old session */
    } else {
        int e = EVUTIL_SOCKET_ERROR();
        gw_up_log(GW_LOG_WARN, r, u, "%s",
                  (what & GW_IO_EOF) ? "closed before responding"
                                     : evutil_socket_error_to_string(e));
    }
    gw_proxy_fail(r, 502);
}

void gw_proxy_forward_of(struct gw_req *r, struct gw_forward *f, char subject[512], char sha256[65])
{
    const struct h1_request *rq = &r->rp->req;

    f->rq = rq;
    f->snap = r->snap;
    f->sr = r->sr;
    f->params = r->params;
    f->nparams = r->nparams < r->params_cap ? r->nparams : r->params_cap;
    f->peer = (const struct sockaddr *)&r->c->peer;
    f->peer_ip = r->c->peer_ip;
    f->client_ip = gw_client_ip_config(r) ? gw_client_ip_text(r, &f->client_ip_len) : NULL;
    f->upstream_addr = r->upstream_addr;
    f->client_id = gw_forward_client_id(rq, sizeof(r->reqid));
    if (f->client_id) {
        r->reqid_len = f->client_id->value.len;
        memcpy(r->reqid, f->client_id->value.ptr, r->reqid_len);
    } else if (!r->reqid_len) {
        gw_req_make_reqid(r);
    }
    f->reqid = r->reqid;
    f->reqid_len = r->reqid_len;
    f->tls = gw_io_is_tls(&r->c->io);
    f->buffered = r->body != NULL;
    f->pol_n = r->pol_n;
    f->pol_val = r->pol_val;
    f->pol_q = r->up_q;
    f->pol_qlen = r->up_qlen;
    f->buffered_len = r->body ? evbuffer_get_length(r->body) : 0;
    f->client_subject = f->client_sha256 = NULL;
    if (gw_tls_client_cert(&r->c->io, subject, 512, sha256)) {
        f->client_subject = subject;
        f->client_sha256 = sha256;
    }
}

/* Sends the request head (and a buffered body) to <server>, on one of the
 * worker's idle connections to it, or on a new one (always when <fresh>).
 * 0; -1 when no connection could be started. */
static int send_to(struct gw_req *r, size_t server, int fresh)
{
    struct adm_snapshot *s = r->snap;
    const struct h1_request *rq = &r->rp->req;
    up_pool *pool = s->pools[r->sr->upstream];
    const struct adm_config *cfg = s->cfg;
    struct gw_upconn *u;
    struct gw_forward f;
    struct gw_obuf ob;
    char subject[512], sha256[65];

    if (cfg->upstreams[r->sr->upstream].protocol != ADM_UP_H1)
        return gw_proxy_h2_send(r, server, fresh);
    gw_try_start(r, server);
    u = fresh ? NULL : gw_upconn_take(r->c->w, pool, server);
    if (!u) {
        u = gw_upconn_connect(r->c->w, s, r->sr->upstream, server);
        if (!u)
            return -1;
        /* the pool's, which falls back to timeouts.upstream_connect_ms */
        gw_tmo_set(&u->tmo, r->sr->timeout_ms, cfg->upstreams[r->sr->upstream].connect_timeout_ms);
    } else {
        gw_tmo_set(&u->tmo, r->sr->timeout_ms, r->sr->timeout_ms);
    }
    gw_io_setcb(&u->io, up_read_cb, up_write_cb, up_event_cb, u);
    up_count_request(pool, r->c->w->id, server);
    gw_upconn_lend(u, r);
    u->resp.msg_done = 0;
    u->got_bytes = 0;
    u->raw = 1;
    r->up = u;
    r->upstream_addr = up_server_address(pool, server);
    clock_gettime(CLOCK_MONOTONIC, &r->t_up);

    gw_proxy_forward_of(r, &f, subject, sha256);
    /* Sent at once only without a body (Content-Length: 0 is none): with
     * one, the head waits in the output until the body bytes already here
     * have passed the parser, so a request refused for its framing puts no
     * byte on the upstream. */
    if (gw_try_no_body(rq))
        gw_ob_init_io(&ob, &u->io);
    else
        gw_ob_init(&ob, u->io.out);
    gw_forward_head(&f, &ob);
    gw_ob_flush(&ob);
    if (r->body) /* shared, not copied: a retry sends it again */
        evbuffer_add_buffer_reference(u->io.out, r->body);
    if (!u->reused)            /* a parked connection reads already */
        gw_io_read(&u->io, 1); /* from the moment it is connected */
    return 0;
}

/* The request's first try goes to a server; then its body follows (after
 * a 100 Continue when the client waits for one and its body streams).
 * Without a server usable it is answered, without a slot it waits. */
static void go_upstream(struct gw_req *r)
{
    size_t s = gw_try_pick(r);

    if (s == GW_PICK_FULL) {
        wait_for_slot(r);
        return;
    }
    if (s == UP_NONE) {
        fail_none_left(r);
        return;
    }
    if (send_to(r, s, 0) < 0) {
        gw_up_log(GW_LOG_ERROR, r, NULL, "cannot open a connection: %s", strerror(errno));
        gw_proxy_fail(r, 502);
        return;
    }
    send_continue(r);
    gw_proxy_body_up(r);
}

/* Every usable server is at its max_connections: <r> waits in the
 * worker's queue for the pool, or is answered 503 at once when that is
 * full. */
static void wait_for_slot(struct gw_req *r)
{
    if (gw_try_wait(r) < 0)
        fail_full(r);
}

/* The worker's wake event: slots freed while requests wait. Each pool's
 * queue goes on, oldest first, while a usable server has a slot free; the
 * queues of a pool's older versions (a push changed it) go first, as the
 * list is kept: their requests queued before any of the new one's, and a
 * slot they share must not go to a newcomer while they wait. Each
 * request queued now gets one go: a retry whose free server is the one it
 * failed on finds its untried ones still full and is queued again, behind,
 * until the next slot frees (looping on it would never return). */
void gw_proxy_dispatch(evutil_socket_t fd, short what, void *arg)
{
    struct gw_worker *w = arg;

    (void)fd;
    (void)what;
    for (struct gw_plim *l = w->plims; l; l = l->next) {
        unsigned n = l->queue ? up_queue_len(l->queue) : 0;

        struct gw_req *r;

        while (n-- && gw_plim_any(l) && (r = gw_try_dequeue(l)))
            go_upstream(r);
    }
}

/* Requests that wait are woken by a slot given back (gw_plim_release),
 * and also here: a server that was down may be up again (its check
 * passed, its ejection ended) with slots free, and nothing on this worker
 * gives those back. Without this its queue would wait for the busy
 * servers, or time out, while a server sits idle. */
void gw_proxy_sweep(struct gw_worker *w)
{
    uint64_t now = (uint64_t)gw_now_ms();
    int wake = 0;

    for (struct gw_plim *l = w->plims; l; l = l->next) {
        struct gw_req *r;
        while ((r = gw_try_expired(l, now)))
            fail_full(r);
        if (l->queue && up_queue_len(l->queue) && gw_plim_any(l))
            wake = 1;
    }
    if (wake)
        event_active(w->plim_ev, EV_TIMEOUT, 0);
    gw_plim_prune(w);
}

/* request_buffering: decoded body bytes are kept whole. */
static int buffer_cb(void *ctx, const char *data, size_t len)
{
    struct gw_req *r = ctx;

    return evbuffer_add(r->body, data, len);
}

/* Reads the body into r->body until it is whole (then it goes upstream),
 * answering 413 past max_buffered_body_bytes. */
static void buffer_body(struct gw_req *r)
{
    int rc;

    do {
        if ((rc = r->codec->body_feed(r, buffer_cb, r)) == GW_FEED_FAILED)
            return;
        if (evbuffer_get_length(r->body) > r->sr->max_buffered_body_bytes) {
            gw_proxy_fail(r, 413);
            return;
        }
    } while (rc == GW_FEED_MORE);
    if (rc == GW_FEED_DONE)
        go_upstream(r);
}

/* request_buffering on the route and a body: it is read whole first (413
 * at once when its Content-Length is over the limit). */
static int buffer_start(struct gw_req *r)
{
    const struct h1_request *rq = &r->rp->req;

    if (!r->sr->request_buffering || r->body_done || gw_try_no_body(rq))
        return 0;
    if (rq->body_kind == H1_BODY_LENGTH && rq->content_length > r->sr->max_buffered_body_bytes) {
        gw_proxy_fail(r, 413);
        return 1;
    }
    if (!(r->body = evbuffer_new())) {
        gw_proxy_fail(r, 503);
        return 1;
    }
    send_continue(r);
    buffer_body(r);
    return 1;
}

void gw_proxy_start(struct gw_req *r)
{
    const struct adm_upstream *def = &r->snap->cfg->upstreams[r->sr->upstream];

    gw_req_phase(r, GW_REQ_PROXY);
    r->interim = 0;
    if ((def->retries || def->max_connections) &&
        !(r->plim =
              gw_plim_get(r->c->w, r->snap->pools[r->sr->upstream], def, gw_proxy_dispatch))) {
        gw_proxy_fail(r, 503); /* out of memory */
        return;
    }
    if (buffer_start(r))
        return;
    go_upstream(r);
}

void gw_proxy_drained(struct gw_req *r)
{
    struct gw_upconn *u = r->up;

    if (r->ups) {
        gw_proxy_h2_drained(r);
        return;
    }
    if (r->codec->http1 && r->c->st == GW_CONN_TUNNEL) {
        gw_tunnel_drained(r);
        return;
    }
    if (u->read_paused) {
        u->read_paused = 0;
        gw_io_read(&u->io, 1);
        up_handle(r, u);
    }
}
