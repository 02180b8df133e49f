/*
 * proxy.c - a request that goes upstream: an upstream connection for it
 * (upconn.c) and its head (forward.c), the request body streamed up
 * (re-framed), the response head checked and passed down without
 * hop-by-hop fields, 1xx interim responses, the body streamed down
 * (decoded for an HTTP/1.0 client), the response's end (the upstream
 * connection parked or closed), the failures (502, 504, or a cut
 * connection once the response started), and tunnels after 101.
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
#include "gateway/hashkey.h"
#include "gateway/health.h"
#include "gateway/limits.h"
#include "gateway/local.h"
#include "gateway/upconn.h"

static int send_to(struct gw_conn *c, size_t server, int fresh);
static void tunnel_start(struct gw_conn *c);
static void fail_with(struct gw_conn *c, int status, const char *extra, size_t extra_len);

/* One error-log line about <c>'s upstream request, in the one form every
 * upstream warning takes: "upstream POOL server ADDR route ID request
 * REQID: " and the reason (<fmt>). <u> NULL: no server picked yet ("-"). */
static void up_log(int level, const struct gw_conn *c, const struct gw_upconn *u, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static void up_log(int level, const struct gw_conn *c, const struct gw_upconn *u, const char *fmt,
                   ...)
{
    const up_pool *pool = u ? u->pool : c->snap->pools[c->sr->upstream];
    char why[512];
    va_list ap;

    if (!gw_log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    gw_log(level, "upstream %s server %s route %s request %.*s: %s", up_pool_name(pool),
           u ? up_server_address(pool, u->server) : "-", c->sr->id, (int)c->reqid_len, c->reqid,
           why);
}

/* Whether <rq>'s framing says it has no body (Content-Length: 0 is none). */
static int no_body(const struct h1_request *rq)
{
    return rq->body_kind == H1_BODY_NONE ||
           (rq->body_kind == H1_BODY_LENGTH && rq->content_length == 0);
}

/* Answers Expect: 100-continue, once per request: the body may come now.
 * We answer it ourselves (the field does not go upstream, as with nginx
 * and Envoy) when the body is wanted: before it is buffered, or once the
 * first try has a server. From then on the client sends its body, so a
 * final answer of ours reads it away and keeps the connection. */
static void send_continue(struct gw_conn *c)
{
    if (c->rp.req.expect_continue && !c->continued && !no_body(&c->rp.req)) {
        evbuffer_add(c->io.out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        c->continued = 1;
    }
}

/* An overflow or a timeout of the queue: 503 at once, come back soon. */
static void fail_busy(struct gw_conn *c)
{
    static const char ra[] = "Retry-After: 1\r\n";
    fail_with(c, 503, ra, sizeof(ra) - 1);
}

/* No server left to pick for <c>'s try, first or retry. Every server down
 * (and no panic) is answered as a full queue is: 503 with Retry-After: 1,
 * so that a client or a CDN backs off a moment rather than hammer a pool
 * that health checks may bring back any second (Envoy sends its "no
 * healthy upstream" 503 without one; we keep our two 503s alike). So is a
 * first try that has no server while others are up: the hash's server for
 * this key is down and the pool has no fallback; nothing failed, the
 * server is unavailable. Servers left that were all tried already: 502,
 * the try's failure. */
static void fail_none_left(struct gw_conn *c)
{
    if (up_pool_all_down(c->snap->pools[c->sr->upstream])) {
        fail_busy(c);
    } else if (!c->tried.n) {
        up_log(GW_LOG_INFO, c, NULL, "%s",
               c->snap->cfg->upstreams[c->sr->upstream].balance == ADM_BALANCE_HASH
                   ? "the server for this request's hash key is down (no fallback)"
                   : "no server can take this request");
        fail_busy(c);
    } else {
        gw_proxy_fail(c, 502);
    }
}

/* The try on <c>'s current server is over: its slot and its place in the
 * retry budget are given back. */
static void try_end(struct gw_conn *c)
{
    struct gw_plim *l = c->plim;

    if (!l)
        return;
    if (c->slot) {
        gw_plim_release(c->w, l, c->slot - 1);
        c->slot = 0;
    }
    if (c->budget) {
        up_budget_end(&l->name->budget, c->budget == 2);
        c->budget = 0;
    }
}

/* The try is over and its upstream connection freed (a retry follows). */
static void detach_try(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    try_end(c);
    if (u) {
        c->up = NULL;
        u->c = NULL;
        gw_upconn_free(u);
    }
}

/* The proxied request is over: out of the queue, its try ended, its
 * buffered body freed; every per-request field of the limits back to 0. */
static void req_end(struct gw_conn *c)
{
    struct gw_plim *l = c->plim;

    if (c->body) {
        evbuffer_free(c->body);
        c->body = NULL;
    }
    if (!l)
        return;
    if (c->queued) {
        up_queue_remove(l->queue, c);
        c->queued = 0;
        up_pool_count(l->pool, c->w->id, UP_PC_QUEUED, -1);
    }
    c->queue_deadline = 0;
    try_end(c);
    if (c->next_retry) { /* admitted, but never sent */
        up_budget_end(&l->name->budget, 1);
        c->next_retry = 0;
    }
    gw_plim_put(l);
    c->plim = NULL;
}

void gw_proxy_detach(struct gw_conn *c)
{
    detach_try(c);
    req_end(c);
}

/* Decoded response body bytes (chunked to an HTTP/1.0 client) go on to
 * the client; raw ones are moved whole by pump_body_down. */
static void body_down_cb(void *ctx, const char *data, size_t len)
{
    struct gw_conn *c = ctx;

    evbuffer_add(c->io.out, data, len);
    c->bytes_out += len;
}

static int body_up_cb(void *ctx, const char *data, size_t len)
{
    struct gw_conn *c = ctx;
    struct evbuffer *out;

    if (!c->up || !len)
        return 0;
    out = c->up->io.out;
    if (c->rp.req.body_kind == H1_BODY_CHUNKED) {
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

/* What feed_body() did. */
enum { FEED_FAILED = -1, FEED_WAIT, FEED_MORE, FEED_DONE };

/* Passes the first run of the client's buffered bytes through the body
 * parser, its decoded bytes to <cb>. FEED_DONE: the body is whole; FEED_MORE:
 * bytes were taken, go on; FEED_WAIT: none are here (reading is armed, with
 * the body timeout); FEED_FAILED: the request was answered (400 for a
 * client that half-closed before the end), <c> may be gone. */
static int feed_body(struct gw_conn *c, h1_req_body_cb cb)
{
    struct evbuffer *in = c->io.in;
    struct evbuffer_iovec v;
    size_t used = 0;
    int rc;

    if (!gw_peek_first(in, &v)) {
        v.iov_base = (void *)"";
        v.iov_len = 0;
    }
    rc = h1_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, cb, c);
    evbuffer_drain(in, used);
    c->bytes_in += used;
    if (rc == H1_REQ_ERROR) {
        gw_proxy_fail(c, c->rp.status);
        return FEED_FAILED;
    }
    if (rc == H1_REQ_DONE) {
        c->body_done = 1;
        return FEED_DONE;
    }
    if (v.iov_len)
        return FEED_MORE;
    if (c->eof) { /* half-closed before the end of its body */
        gw_proxy_fail(c, 400);
        return FEED_FAILED;
    }
    /* need more bytes from the client */
    gw_tmo_set(&c->tmo, gw_conn_cfg(c)->timeouts.client_body_ms,
               gw_conn_cfg(c)->timeouts.client_idle_ms);
    gw_io_read(&c->io, 1);
    return FEED_WAIT;
}

static void buffer_body(struct gw_conn *c);

/* Moves request body bytes from the client to the upstream, as far as the
 * upstream's output buffer allows. A streamed body waits for the upstream
 * connection to be open (up_event_cb goes on then): until then it stays in
 * the client's buffer, so that a connect that fails took none of it and
 * the request can go to another server whole (resendable), as nginx does
 * without request buffering. */
void gw_proxy_body_up(struct gw_conn *c)
{
    if (c->body && !c->body_done) {
        buffer_body(c);
        return;
    }
    if (c->up && c->up->st == GW_UP_CONNECTING) {
        /* not read meanwhile: the client's read timeout (client_body_ms)
         * must not blame it for a slow connect */
        gw_io_read(&c->io, 0);
        c->read_paused = 1;
        return;
    }
    while (!c->body_done && c->up) {
        int rc;

        if (evbuffer_get_length(c->up->io.out) > GW_HWM) {
            gw_io_read(&c->io, 0);
            c->read_paused = 1;
            return;
        }
        c->body_fed = 1;
        if ((rc = feed_body(c, body_up_cb)) < FEED_MORE)
            return;
        if (rc == FEED_DONE && c->rp.req.body_kind == H1_BODY_CHUNKED)
            evbuffer_add(c->up->io.out, "0\r\n\r\n", 5);
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
static void emit_resp_headers(struct gw_conn *c, const struct adm_shdrs *rs, struct gw_obuf *o)
{
    struct gw_hdr_vals v = {
        .params = c->params,
        .nparams = c->nparams < c->params_cap ? c->nparams : c->params_cap,
        .reqid = c->reqid,
        .reqid_len = c->reqid_len,
        .host = c->rp.req.host_name.ptr,
        .host_len = c->rp.req.host_name.len,
    };

    v.client_ip = gw_client_ip_text(c, &v.client_ip_len);
    gw_hdrs_emit(o, rs, &v);
}

/* Writes the response head to the client, dropping hop-by-hop fields (and
 * those the route's response_headers remove or set). */
static void write_resp_head(struct gw_conn *c, struct gw_upconn *u, int upgrade,
                            struct gw_obuf *pend)
{
    /* a final response gets the route's response_headers, an interim one not */
    const struct adm_shdrs *rs = u->resp.status >= 200 ? c->sr->resph : NULL;
    struct gw_obuf ob, *o = pend ? pend : &ob;
    struct h1_slice conn_tok[32];
    size_t ntok = 0;
    int have_id = 0, have_date = 0;

    size_t before;

    if (!pend)
        gw_ob_init_io(o, &c->io);
    before = o->total;
    for (size_t i = 0; i < u->resp.nhdr; i++) {
        const struct h1_header *h = &u->resp.hdr[i];
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
    gw_ob_lit(o, "HTTP/1.1 ");
    gw_ob_u64(o, (uint64_t)u->resp.status);
    gw_ob_lit(o, " ");
    if (u->resp.status_text.ptr)
        gw_ob_slice(o, &u->resp.status_text);
    gw_ob_lit(o, "\r\n");
    for (size_t i = 0; i < u->resp.nhdr; i++) {
        const struct h1_header *h = &u->resp.hdr[i];
        const char *v = h->value.ptr ? h->value.ptr : "";
        size_t vl = h->value.len;
        if (h1_is_hop_field(&h->name) || gw_forward_named_in(&h->name, conn_tok, ntok))
            continue;
        if (rs && gw_hdrs_drops(rs, &h->name)) /* the route's response_headers */
            continue;
        if (!u->raw && h1_name_is(&h->name, "transfer-encoding"))
            continue;
        if (h1_name_is(&h->name, "x-request-id"))
            have_id = 1;
        else if (h1_name_is(&h->name, "date"))
            have_date = 1;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        gw_ob_field(o, h->name.ptr, h->name.len, v, vl);
    }
    if (rs)
        emit_resp_headers(c, rs, o);
    if (!have_id && c->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    if (!have_date && u->resp.status >= 200) /* RFC 9110 6.6.1: a forwarder adds it */
        gw_ob_add(o, c->w->date, c->w->date_len);
    if (upgrade) {
        const struct h1_header *up = NULL;
        for (size_t i = 0; i < u->resp.nhdr; i++)
            if (h1_name_is(&u->resp.hdr[i].name, "upgrade"))
                up = &u->resp.hdr[i];
        gw_ob_lit(o, "Connection: upgrade\r\n");
        if (up)
            gw_ob_field(o, "Upgrade", 7, up->value.ptr, up->value.len);
    } else {
        gw_conn_ob_connection(o, c);
    }
    gw_ob_lit(o, "\r\n");
    if (!pend)
        gw_ob_flush(o);
    c->bytes_out += o->total - before;
    c->head_out += o->total - before;
    c->resp_started = 1;
    c->status = u->resp.status;
}

/* The response is complete: park or close the upstream connection and go
 * on with the client. */
static void resp_done(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    if (u) {
        int reuse = u->keep && c->body_done && evbuffer_get_length(u->io.in) == 0 &&
                    evbuffer_get_length(u->io.out) == 0 && !c->w->draining;
        gw_upconn_release(u, reuse, c->snap->cfg->upstreams[c->sr->upstream].idle_timeout_ms);
    }
    req_end(c);
    if (c->body_done) {
        gw_conn_request_done(c);
        return;
    }
    /* The upstream answered before taking the whole body (a 413, a 401, a
     * 417 after the head): the answer is whole, so the rest of the body is
     * read away and the connection goes on, as nginx does, rather than
     * closed under a client still sending (its answer said nothing of a
     * close, and a reset could take the answer with it). */
    gw_local_finish(c);
}

static void pump_body_down(struct gw_conn *c, struct gw_upconn *u, struct gw_obuf *pend)
{
    struct evbuffer *in = u->io.in;
    struct evbuffer *out = c->io.out;

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

        if (evbuffer_get_length(out) > GW_HWM) {
            gw_io_read(&u->io, 0);
            u->read_paused = 1;
            PEND_FLUSH();
            return;
        }
        if (!gw_peek_first(in, &v)) {
            if (u->eof)
                break;
            PEND_FLUSH();
            return;
        }
        if (h1_resp_feed_body(&u->resp, v.iov_base, v.iov_len, &used, u->raw ? NULL : body_down_cb,
                              c) < 0) {
            up_log(GW_LOG_WARN, c, u, "invalid response body (%s); closing client %s:%u",
                   h1_resp_error(&u->resp), c->peer_ip, c->peer_port);
            PEND_FLUSH();
            gw_proxy_fail(c, 502);
            return;
        }
        if (u->raw) {
            if (pend && evbuffer_get_length(out) == 0 && pend->n + used <= sizeof(pend->b)) {
                /* small bodies leave with the head in one write */
                evbuffer_remove(in, pend->b + pend->n, used);
                pend->n += used;
                pend->total += used;
            } else {
                PEND_FLUSH();
                evbuffer_remove_buffer(in, out, used);
            }
            c->bytes_out += used;
        } else {
            evbuffer_drain(in, used);
        }
    }
    PEND_FLUSH();
#undef PEND_FLUSH
    if (!u->resp.msg_done) {
        /* the upstream closed and every byte it sent has gone on */
        if (h1_resp_needs_eof(&u->resp)) {
            resp_done(c); /* a close-delimited body ends here */
            return;
        }
        up_count_failure(u->pool, c->w->id, u->server, UP_F_RESET);
        up_log(GW_LOG_WARN, c, u, "closed mid-body; closing client %s:%u", c->peer_ip,
               c->peer_port);
        gw_proxy_fail(c, 502);
        return;
    }
    if (evbuffer_get_length(in))
        u->keep = 0; /* bytes after the response: never reuse */
    resp_done(c);
}

static int retry(struct gw_conn *c, struct gw_upconn *u, const char *why, int answered);

/* Whether <c>'s request can be sent again whole: it has no body, or its
 * body was buffered, or none of it went to a server yet. */
static int resendable(const struct gw_conn *c)
{
    return c->body || no_body(&c->rp.req) || !c->body_fed;
}

/* retry_on_status: the final response of <u> has a status the pool
 * retries, no byte of it went to the client yet (not even a 103), and the
 * request, which reached the server, may go again (idempotent, sent
 * whole). 1 when it went on to another server; the response is dropped
 * with its connection. */
static int status_retry(struct gw_conn *c, struct gw_upconn *u)
{
    const struct adm_upstream *def;
    char why[32];

    if (!c->plim) /* a pool without retries (nor limits) */
        return 0;
    def = &c->snap->cfg->upstreams[c->sr->upstream];
    if (c->tries >= def->retries || !adm_statuses_has(&def->retry_on_status, u->resp.status) ||
        c->bytes_out || !c->body_done || !resendable(c) || !gw_upconn_idempotent(&c->rp.req))
        return 0;
    snprintf(why, sizeof(why), "answered %d", u->resp.status);
    return retry(c, u, why, 1);
}

/* An interim response of <u> (1xx but 101): 100 is ours to send (we
 * answered Expect); the others (102, 103 Early Hints) go to an HTTP/1.1
 * client, the first GW_UP_INTERIM_MAX of its request. Later ones are
 * dropped, as nginx drops early hints past proxy_buffer_size: a 1xx is
 * advisory (a client may ignore it, RFC 9110 15.2), so the final response
 * still goes through, and it comes within the response timeout, which a
 * 1xx does not restart (up_read_cb). */
static void pass_interim(struct gw_conn *c, struct gw_upconn *u)
{
    int keep = c->keep;

    if (u->resp.status == 100 || c->http10)
        return;
    if (c->interim >= GW_UP_INTERIM_MAX) {
        if (c->interim == GW_UP_INTERIM_MAX) { /* said once per request */
            up_log(GW_LOG_INFO, c, u, "over %d interim responses; the rest are dropped",
                   GW_UP_INTERIM_MAX);
            c->interim++;
        }
        return;
    }
    c->interim++;
    u->raw = 1;
    c->keep = 1; /* an interim head says nothing of the connection */
    write_resp_head(c, u, 0, NULL);
    c->keep = keep;
    c->resp_started = 0;
}

/* Handles what the upstream sent; returns after the client may be gone. */
static void up_handle(struct gw_conn *c, struct gw_upconn *u)
{
    struct evbuffer *in = u->io.in;
    struct gw_obuf pend;

    gw_ob_init_io(&pend, &c->io);

    while (u->st == GW_UP_WAITING) {
        size_t hl = 0;
        int rc = up_parse_head(u, in, &hl);
        if (rc == 0)
            return;
        if (rc < 0) {
            up_log(GW_LOG_WARN, c, u, "invalid response head%s",
                   u->resp.too_many ? " (too many fields)" : "");
            gw_proxy_fail(c, 502);
            return;
        }
        if (u->resp.status == 101) {
            if (!gw_forward_upgrade(&c->rp.req, c->sr)) { /* we sent no Upgrade */
                gw_proxy_fail(c, 502);
                return;
            }
            u->raw = 1;
            write_resp_head(c, u, 1, NULL);
            evbuffer_drain(in, hl);
            tunnel_start(c);
            return;
        }
        if (u->resp.status >= 100 && u->resp.status < 200) {
            pass_interim(c, u);
            evbuffer_drain(in, hl);
            if (evbuffer_get_length(c->io.out) > GW_HWM) {
                /* the client is behind: the next head waits upstream, as
                 * body bytes do (gw_proxy_drained goes on) */
                gw_io_read(&u->io, 0);
                u->read_paused = 1;
                return;
            }
            continue;
        }
        /* a status retried elsewhere still counts against its server */
        gw_health_status(c->w->id, c->snap, c->sr->upstream, u->server, (unsigned)u->resp.status);
        if (u->resp.status >= 500)
            up_count_failure(u->pool, c->w->id, u->server, UP_F_5XX);
        if (status_retry(c, u))
            return;
        gw_upconn_set_state(u, GW_UP_BODY);
        u->tmo.last_rd = gw_now_ms(); /* from now on timeout_ms is between two reads */
        u->keep = h1_resp_keep_alive(&u->resp);
        {
            double secs = gw_elapsed_ms(&c->t_up) / 1e3;
            c->up_ms = secs * 1e3; /* the access log's upstream time */
            gw_count(&c->w->ctr.up[gw_hist_bucket(secs)], 1);
            gw_count(&c->w->ctr.up_sum_us, (uint64_t)(secs * 1e6));
        }
        if (c->is_head || u->resp.status == 204 || u->resp.status == 304) {
            write_resp_head(c, u, 0, NULL);
            evbuffer_drain(in, hl);
            if (evbuffer_get_length(in))
                u->keep = 0;
            resp_done(c);
            return;
        }
        if (h1_resp_needs_eof(&u->resp)) {
            u->keep = 0;
            c->keep = 0; /* close-delimited: the client learns the end by the close */
        }
        u->raw = !(c->http10 && h1_resp_chunked(&u->resp));
        if (!u->raw)
            c->keep = 0; /* chunked to an HTTP/1.0 client: decode, end by close */
        write_resp_head(c, u, 0, &pend);
        evbuffer_drain(in, hl);
        h1_resp_begin_body(&u->resp);
    }
    pump_body_down(c, u, &pend);
}

/* gw_proxy_fail, the answer with <extra> fields (gw_local_simple's). */
static void fail_with(struct gw_conn *c, int status, const char *extra, size_t extra_len)
{
    gw_proxy_detach(c);
    if (status >= 500)
        gw_count(&c->w->ctr.upstream_errors, 1);
    if (c->resp_started) {
        /* what the client already has goes out, then the close tells it
         * the response was cut short */
        c->keep = 0;
        gw_conn_request_done(c);
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
    if (status < 500 || (!c->body_done && c->rp.req.expect_continue && !c->continued))
        c->keep = 0;
    gw_local_simple(c, status, extra, extra_len);
    if (!c->keep) {
        gw_conn_request_done(c);
        return;
    }
    gw_local_finish(c);
}

/* Fails the proxied request: an error answer when nothing was sent yet,
 * else the client connection is closed (it cannot be told otherwise). */
void gw_proxy_fail(struct gw_conn *c, int status)
{
    fail_with(c, status, NULL, 0);
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
    up_handle(u->c, u);
}

/* The client is read again and its body goes on to the upstream: it was
 * paused (the upstream's buffer was full, or it was connecting). */
static void body_resume(struct gw_conn *c)
{
    if (c->read_paused) {
        c->read_paused = 0;
        gw_io_read(&c->io, 1);
    }
    gw_proxy_body_up(c);
}

static void up_write_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    if (c && c->read_paused && !c->body_done)
        body_resume(c);
}

static void pick_of(struct gw_conn *c, struct up_pick *pk);
static void wait_for_slot(struct gw_conn *c);

/* The try of <c> on <u> failed (<why>; <answered>: with a response that
 * can still be dropped): the request goes to a server not tried yet, when
 * the pool's retry budget admits one more retry and one is left (the
 * budget is asked first, so that a retry it refuses does not move the
 * balancer: gw_plim_retry). 1 when it went on (or waits for a slot, or
 * was answered); 0 when the caller answers as without retries. */
static int retry(struct gw_conn *c, struct gw_upconn *u, const char *why, int answered)
{
    up_pool *pool = c->snap->pools[c->sr->upstream];
    struct up_pick pk;
    int counted;
    size_t s;

    up_tried_add(&c->tried, u->server);
    pick_of(c, &pk);
    s = gw_plim_retry(c->plim, pool, c->w->id, &pk, gw_upconn_reached(u), &counted);
    if (s == GW_PICK_REFUSED) {
        up_pool_count(pool, c->w->id, UP_PC_BUDGET_EXHAUSTED, 1);
        return 0;
    }
    if (s == UP_NONE) {
        if (answered) /* the answer we have is the best one */
            return 0;
        detach_try(c);
        fail_none_left(c);
        return 1;
    }
    c->next_retry = (unsigned char)counted; /* 0: admitted as the first attempt it still is */
    up_log(GW_LOG_WARN, c, u, "%s; retrying on another server", why);
    up_pool_count(pool, c->w->id, UP_PC_RETRIES, 1);
    c->tries++;
    detach_try(c);
    if (s == GW_PICK_FULL)
        wait_for_slot(c);
    else if (send_to(c, s, 0) < 0)
        gw_proxy_fail(c, 502);
    else if (!c->body_done) /* a streamed body none of which went out yet */
        gw_proxy_body_up(c);
    return 1;
}

/* A try that failed before any answer goes to another server while the
 * pool's retries last (gw_upconn_retry_elsewhere says which may). 1 when
 * the request went on (or was answered: no server was left). */
static int retry_elsewhere(struct gw_conn *c, struct gw_upconn *u, short what)
{
    const struct adm_upstream *def = &c->snap->cfg->upstreams[c->sr->upstream];

    if (c->tries >= def->retries || !gw_upconn_retry_elsewhere(u, what, &c->rp.req, resendable(c)))
        return 0;
    return retry(c, u,
                 (what & GW_IO_TIMEOUT) ? "connect timed out"
                 : (what & GW_IO_EOF)   ? "closed before responding"
                                        : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()),
                 0);
}

/* Counts the failure (<what>) of the try on <u> against its server, by
 * kind: a connect that never completed; a TLS handshake (connected, not
 * yet open); a timeout; a close or reset. */
static void count_failure(const struct gw_conn *c, const struct gw_upconn *u, short what)
{
    enum up_failure kind = UP_F_RESET;

    if (u->st == GW_UP_CONNECTING)
        kind = gw_upconn_reached(u) ? UP_F_TLS : UP_F_CONNECT;
    else if (what & GW_IO_TIMEOUT)
        kind = UP_F_TIMEOUT;
    up_count_failure(u->pool, c->w->id, u->server, kind);
}

static void up_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;
    char why[256];

    (void)io;
    if (what & GW_IO_CONNECTED) {
        gw_upconn_set_state(u, GW_UP_WAITING);
        gw_upconn_session_keep(u);
        /* from now on writes are held to the response timeout too */
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
        if (!c->body_done) /* a streamed body waited for the connection */
            body_resume(c);
        return;
    }
    if ((what & GW_IO_EOF) && u->st == GW_UP_BODY && !u->resp.msg_done) {
        /* The body bytes still buffered go to the client first (it may be
         * slower than the upstream): then a close-delimited body ends, and
         * any other died mid-body (pump_body_down decides). */
        u->eof = 1;
        u->keep = 0;
        if (!u->read_paused)
            pump_body_down(c, u, NULL);
        return;
    }
    if (gw_upconn_retryable(u, what, &c->rp.req, c->retried)) {
        /* a pooled connection that died before answering (the server
         * closed it while idle): once more, on a fresh connection to the
         * same server, which did not fail and keeps its turn in the
         * balancing */
        size_t server = u->server;
        c->retried = 1;
        detach_try(c);
        if (send_to(c, server, 1) < 0)
            gw_proxy_fail(c, 502);
        return;
    }
    count_failure(c, u, what);
    if (u->st == GW_UP_CONNECTING || u->st == GW_UP_WAITING) /* no answer: outlier food */
        gw_health_outcome(c->w->id, c->snap, c->sr->upstream, u->server, 1);
    if (retry_elsewhere(c, u, what))
        return;
    if (what & GW_IO_TIMEOUT) {
        if (u->st == GW_UP_CONNECTING) {
            up_log(GW_LOG_WARN, c, u, "connect timed out");
            gw_proxy_fail(c, 504);
        } else if (u->st == GW_UP_WAITING) {
            up_log(GW_LOG_WARN, c, u, "no response within %u ms", c->sr->timeout_ms);
            gw_proxy_fail(c, 504);
        } else {
            gw_proxy_fail(c, 504);
        }
        return;
    }
    if (u->st == GW_UP_BODY) {
        up_log(GW_LOG_WARN, c, u, "failed mid-response; closing client %s:%u", c->peer_ip,
               c->peer_port);
    } else if (gw_tls_error(&u->io, why, sizeof(why))) {
        up_log(GW_LOG_WARN, c, u, "TLS handshake failed: %s", why);
        gw_upconn_session_forget(u); /* never resume a failed server's old session */
    } else {
        int e = EVUTIL_SOCKET_ERROR();
        up_log(GW_LOG_WARN, c, u, "%s",
               (what & GW_IO_EOF) ? "closed before responding" : evutil_socket_error_to_string(e));
    }
    gw_proxy_fail(c, 502);
}

/* What a pick for <c>'s next try depends on: c->tried, its hash key, the
 * time for slow start. */
static void pick_of(struct gw_conn *c, struct up_pick *pk)
{
    const struct adm_upstream *def = &c->snap->cfg->upstreams[c->sr->upstream];

    *pk = (struct up_pick){
        .tried = c->tried.n ? &c->tried : NULL,
        .hash = def->balance == ADM_BALANCE_HASH ? gw_hashkey(c, def) : 0,
        .now_ms = def->slow_start_ms ? (uint64_t)gw_now_ms() : 0,
    };
}

/* A server for <c>'s next try, not in c->tried: the balancer's pick among
 * those with a slot free on this worker (gw_plim_pick). UP_NONE when no
 * server is usable, GW_PICK_FULL when every usable one is at its
 * max_connections (the request waits). */
static size_t pick(struct gw_conn *c, up_pool *pool)
{
    struct up_pick pk;

    pick_of(c, &pk);
    return gw_plim_pick(c->plim, pool, c->w->id, &pk);
}

/* The try starts on <server>: it takes a slot there, and counts in the
 * retry budget (as the retry admitted for it, or as a first try). Its wait
 * for a slot, if it waited, is over: should this try fail and its retry
 * wait again, that is a new wait with a deadline of its own. */
static void try_start(struct gw_conn *c, size_t server)
{
    struct gw_plim *l = c->plim;

    c->queue_deadline = 0;
    if (!l)
        return;
    if (l->share) {
        gw_plim_take(l, server);
        c->slot = server + 1;
    }
    if (l->budget_on) {
        if (!c->next_retry)
            up_budget_start(&l->name->budget);
        c->budget = c->next_retry ? 2 : 1;
    }
    c->next_retry = 0;
}

/* Sends the request head (and a buffered body) to <server>, on one of the
 * worker's idle connections to it, or on a new one (always when <fresh>).
 * 0; -1 when no connection could be started. */
static int send_to(struct gw_conn *c, size_t server, int fresh)
{
    struct adm_snapshot *s = c->snap;
    const struct h1_request *rq = &c->rp.req;
    up_pool *pool = s->pools[c->sr->upstream];
    const struct adm_config *cfg = s->cfg;
    struct gw_upconn *u;
    struct gw_forward f;
    struct gw_obuf ob;
    char subject[512], sha256[65];

    try_start(c, server);
    u = fresh ? NULL : gw_upconn_take(c->w, pool, server);
    if (!u) {
        u = gw_upconn_connect(c->w, s, c->sr->upstream, server);
        if (!u)
            return -1;
        /* the pool's, which falls back to timeouts.upstream_connect_ms */
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, cfg->upstreams[c->sr->upstream].connect_timeout_ms);
    } else {
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
    }
    gw_io_setcb(&u->io, up_read_cb, up_write_cb, up_event_cb, u);
    up_count_request(pool, c->w->id, server);
    gw_upconn_lend(u, c);
    u->resp.msg_done = 0;
    u->got_bytes = 0;
    u->raw = 1;
    c->up = u;
    c->upstream_addr = up_server_address(pool, server);
    clock_gettime(CLOCK_MONOTONIC, &c->t_up);

    f.rq = rq;
    f.snap = s;
    f.sr = c->sr;
    f.params = c->params;
    f.nparams = c->nparams < c->params_cap ? c->nparams : c->params_cap;
    f.peer = (const struct sockaddr *)&c->peer;
    f.peer_ip = c->peer_ip;
    f.client_ip = gw_client_ip_config(c) ? gw_client_ip_text(c, &f.client_ip_len) : NULL;
    f.upstream_addr = c->upstream_addr;
    f.client_id = gw_forward_client_id(rq, sizeof(c->reqid));
    if (f.client_id) {
        c->reqid_len = f.client_id->value.len;
        memcpy(c->reqid, f.client_id->value.ptr, c->reqid_len);
    } else if (!c->reqid_len) {
        gw_conn_make_reqid(c);
    }
    f.reqid = c->reqid;
    f.reqid_len = c->reqid_len;
    f.tls = gw_io_is_tls(&c->io);
    f.buffered = c->body != NULL;
    f.buffered_len = c->body ? evbuffer_get_length(c->body) : 0;
    f.client_subject = f.client_sha256 = NULL;
    if (gw_tls_client_cert(&c->io, subject, sizeof(subject), sha256)) {
        f.client_subject = subject;
        f.client_sha256 = sha256;
    }
    /* Sent at once only without a body (Content-Length: 0 is none): with
     * one, the head waits in the output until the body bytes already here
     * have passed the parser, so a request refused for its framing puts no
     * byte on the upstream. */
    if (no_body(rq))
        gw_ob_init_io(&ob, &u->io);
    else
        gw_ob_init(&ob, u->io.out);
    gw_forward_head(&f, &ob);
    gw_ob_flush(&ob);
    if (c->body) /* shared, not copied: a retry sends it again */
        evbuffer_add_buffer_reference(u->io.out, c->body);
    if (!u->reused)            /* a parked connection reads already */
        gw_io_read(&u->io, 1); /* from the moment it is connected */
    return 0;
}

/* The request's first try goes to a server; then its body follows (after
 * a 100 Continue when the client waits for one and its body streams).
 * Without a server usable it is answered, without a slot it waits. */
static void go_upstream(struct gw_conn *c)
{
    size_t s = pick(c, c->snap->pools[c->sr->upstream]);

    if (s == GW_PICK_FULL) {
        wait_for_slot(c);
        return;
    }
    if (s == UP_NONE) {
        fail_none_left(c);
        return;
    }
    if (send_to(c, s, 0) < 0) {
        up_log(GW_LOG_ERROR, c, NULL, "cannot open a connection: %s", strerror(errno));
        gw_proxy_fail(c, 502);
        return;
    }
    send_continue(c);
    gw_proxy_body_up(c);
}

/* Every usable server is at its max_connections: <c> waits in the worker's
 * queue for the pool, or is answered 503 at once when that is full. A
 * request queued again before it got a slot (woken, it found none it may
 * use) keeps the deadline of its first wait: queue_timeout_ms bounds its
 * whole wait for a slot. */
static void wait_for_slot(struct gw_conn *c)
{
    struct gw_plim *l = c->plim;

    if (!c->queue_deadline)
        c->queue_deadline = (uint64_t)gw_now_ms() + l->queue_timeout_ms;
    if (!l->queue || up_queue_push(l->queue, c, c->queue_deadline) < 0) {
        up_pool_count(l->pool, c->w->id, UP_PC_QUEUE_OVERFLOWS, 1);
        fail_busy(c);
        return;
    }
    c->queued = 1;
    up_pool_count(l->pool, c->w->id, UP_PC_QUEUED, 1);
}

/* The worker's wake event: slots freed while requests wait. Each pool's
 * queue goes on, oldest first, while a usable server has a slot free; the
 * queues of a pool's older versions (a push changed it) go first, as the
 * list is kept: their requests queued before any of the new one's, and a
 * slot they share must not go to a newcomer while they wait. Each
 * request queued now gets one go: a retry whose free server is the one it
 * failed on finds its untried ones still full and is queued again, behind,
 * until the next slot frees (looping on it would never return). */
static void dispatch_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_worker *w = arg;

    (void)fd;
    (void)what;
    for (struct gw_plim *l = w->plims; l; l = l->next) {
        unsigned n = l->queue ? up_queue_len(l->queue) : 0;

        while (n-- && up_queue_len(l->queue) && gw_plim_any(l)) {
            struct gw_conn *c = up_queue_pop(l->queue);
            c->queued = 0;
            up_pool_count(l->pool, w->id, UP_PC_QUEUED, -1);
            go_upstream(c);
        }
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
        struct gw_conn *c;
        while (l->queue && (c = up_queue_expired(l->queue, now))) {
            c->queued = 0;
            up_pool_count(l->pool, w->id, UP_PC_QUEUED, -1);
            up_pool_count(l->pool, w->id, UP_PC_QUEUE_TIMEOUTS, 1);
            fail_busy(c);
        }
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
    struct gw_conn *c = ctx;

    return evbuffer_add(c->body, data, len);
}

/* Reads the body into c->body until it is whole (then it goes upstream),
 * answering 413 past max_buffered_body_bytes. */
static void buffer_body(struct gw_conn *c)
{
    int rc;

    do {
        if ((rc = feed_body(c, buffer_cb)) == FEED_FAILED)
            return;
        if (evbuffer_get_length(c->body) > c->sr->max_buffered_body_bytes) {
            gw_proxy_fail(c, 413);
            return;
        }
    } while (rc == FEED_MORE);
    if (rc == FEED_DONE)
        go_upstream(c);
}

/* request_buffering on the route and a body: it is read whole first (413
 * at once when its Content-Length is over the limit). */
static int buffer_start(struct gw_conn *c)
{
    const struct h1_request *rq = &c->rp.req;

    if (!c->sr->request_buffering || c->body_done || no_body(rq))
        return 0;
    if (rq->body_kind == H1_BODY_LENGTH && rq->content_length > c->sr->max_buffered_body_bytes) {
        gw_proxy_fail(c, 413);
        return 1;
    }
    if (!(c->body = evbuffer_new())) {
        gw_proxy_fail(c, 503);
        return 1;
    }
    send_continue(c);
    buffer_body(c);
    return 1;
}

void gw_proxy_start(struct gw_conn *c)
{
    const struct adm_upstream *def = &c->snap->cfg->upstreams[c->sr->upstream];

    gw_conn_set_state(c, GW_CONN_PROXY);
    c->interim = 0;
    if ((def->retries || def->max_connections) &&
        !(c->plim = gw_plim_get(c->w, c->snap->pools[c->sr->upstream], def, dispatch_cb))) {
        gw_proxy_fail(c, 503); /* out of memory */
        return;
    }
    if (buffer_start(c))
        return;
    go_upstream(c);
}

/* A tunnel's bytes are counted as they move: the access log's line (at
 * the close) and /metrics' bytes both ways take them. Each move, and each
 * output drained, is activity for timeouts.tunnel_idle_ms (c->tmo.idle). */
static void tunnel_move(struct gw_conn *c, struct gw_io *from, struct gw_io *to)
{
    size_t n = evbuffer_get_length(from->in);

    if (from == &c->io) {
        c->bytes_in += n;
        gw_count(&c->w->ctr.bytes_in, n);
    } else {
        c->bytes_out += n;
        gw_count(&c->w->ctr.bytes_out, n);
    }
    c->tmo.last_rd = gw_now_ms();
    evbuffer_add_buffer(to->out, from->in);
    if (evbuffer_get_length(to->out) > GW_HWM)
        gw_io_read(from, 0);
}

static void tunnel_up_read(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    tunnel_move(u->c, io, &u->c->io);
}

static void tunnel_up_write(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    (void)io;
    u->c->tmo.last_rd = gw_now_ms();
    gw_io_read(&u->c->io, 1);
}

static void tunnel_up_event(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    (void)what;
    /* the upstream side ended: flush what the client still has to get,
     * as long as that flush goes on (no tunnel_idle_ms without progress) */
    gw_proxy_detach(c);
    gw_conn_set_state(c, GW_CONN_CLOSING);
    gw_tmo_set(&c->tmo, 0, c->tmo.idle);
    if (evbuffer_get_length(c->io.out) == 0)
        gw_conn_free(c);
}

/* After the 101: the request is counted (its line waits for the close),
 * the snapshot released, both sockets keep alive (GW_KEEPALIVE_*), and
 * the tunnel closes when no byte went either way for the snapshot's
 * timeouts.tunnel_idle_ms: a tunnel takes the value it started with. */
static void tunnel_start(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;
    unsigned idle_ms = c->snap->cfg->timeouts.tunnel_idle_ms;

    gw_conn_set_state(c, GW_CONN_TUNNEL);
    gw_upconn_set_state(u, GW_UP_TUNNEL);
    gw_conn_account_tunnel(c);
    gw_conn_unpin(c);        /* a tunnel needs no snapshot: swaps go on freely */
    c->sr = NULL;            /* nor its route, which the snapshot held */
    c->upstream_addr = NULL; /* nor the pool's server name: the log took its copy */
    gw_conn_keepalive(c->io.fd);
    gw_conn_keepalive(u->io.fd);
    gw_io_setcb(&u->io, tunnel_up_read, tunnel_up_write, tunnel_up_event, u);
    gw_tmo_set(&u->tmo, 0, 0);
    gw_tmo_set(&c->tmo, 0, 0);
    c->tmo.idle = idle_ms;
    /* bytes already read on either side go first */
    tunnel_move(c, &u->io, &c->io);
    tunnel_move(c, &c->io, &u->io);
    gw_io_read(&u->io, 1);
    gw_io_read(&c->io, 1);
}

void gw_proxy_tunnel_up(struct gw_conn *c)
{
    if (c->up)
        tunnel_move(c, &c->io, &c->up->io);
}

void gw_proxy_drained(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    if (c->st == GW_CONN_TUNNEL) {
        c->tmo.last_rd = gw_now_ms();
        gw_io_read(&u->io, 1);
        return;
    }
    if (u->read_paused) {
        u->read_paused = 0;
        gw_io_read(&u->io, 1);
        up_handle(c, u);
    }
}
