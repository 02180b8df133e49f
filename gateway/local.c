/*
 * local.c - the answers Switchyard gives itself: 404, 405 with Allow,
 * trailing-slash redirects, automatic OPTIONS and OPTIONS *, configured
 * direct responses and redirects (encoded once in the snapshot), TRACE and
 * OPTIONS with Max-Forwards: 0, the 4xx/5xx of a request that cannot be
 * served; and reading away the body of a request answered here so that
 * the connection stays in step.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/local.h"
#include "admin/http1/status.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int discard_cb(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return 0;
}

/* After a local answer is queued: read the request's body away so the
 * connection stays in step, then finish. */
void gw_local_finish(struct gw_conn *c)
{
    gw_conn_set_state(c, GW_CONN_LOCAL);
    if (c->body_done) {
        gw_conn_request_done(c);
        return;
    }
    if (c->rp.req.expect_continue && !c->continued) {
        /* we never sent 100 Continue: the client may or may not send the
         * body now, so this connection cannot be trusted to stay in step.
         * After a 100 the body comes (RFC 9110 10.1.1) and is read away. */
        c->keep = 0;
        gw_conn_request_done(c);
        return;
    }
    /* read away for timeouts.lingering_ms in all (nginx's lingering_time),
     * its reads at most client_body_ms apart, then closed */
    c->linger_end = gw_now_ms() + gw_conn_cfg(c)->timeouts.lingering_ms;
    gw_local_discard(c);
}

void gw_local_discard(struct gw_conn *c)
{
    struct evbuffer *in = c->io.in;
    const struct adm_config *cfg;

    while (!c->body_done) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (!gw_peek_first(in, &v)) {
            /* empty input: ask for more */
            rc = h1_req_feed_body(&c->rp, "", 0, &used, discard_cb, c);
            if (rc == H1_REQ_DONE) {
                c->body_done = 1;
                break;
            }
            if (rc == H1_REQ_ERROR || c->eof) { /* no more bytes will come */
                c->keep = 0;
                break;
            }
            cfg = gw_conn_cfg(c);
            gw_tmo_set(&c->tmo, cfg->timeouts.client_body_ms, cfg->timeouts.client_idle_ms);
            if (gw_conn_linger_gap(c, c->tmo.last_rd, cfg->timeouts.client_body_ms) < 0) {
                c->keep = 0; /* read away long enough: closed, without lingering */
                break;
            }
            gw_io_read(&c->io, 1);
            return;
        }
        rc = h1_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, discard_cb, c);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == H1_REQ_DONE)
            c->body_done = 1;
        else if (rc == H1_REQ_ERROR) {
            c->keep = 0;
            break;
        }
    }
    gw_conn_request_done(c);
}

/* Local answers, encoded once per status (100..599) on first use by any
 * worker: the status line with Server, the framing fields, and the one-line
 * body "<status> <reason>\n". Only Date, the request id and Connection are
 * written per request. */
struct simple_enc {
    char line[80], framing[80], body[48];
    unsigned char line_len, framing_len, body_len;
};

static struct simple_enc simple_encs[500];

static pthread_once_t simple_once = PTHREAD_ONCE_INIT;

static void simple_encode_all(void)
{
    for (int status = 100; status < 600; status++) {
        struct simple_enc *e = &simple_encs[status - 100];
        const char *reason = h1_status_reason(status);
        int n = snprintf(e->line, sizeof(e->line), "HTTP/1.1 %d %s\r\nServer: switchyard\r\n",
                         status, reason);
        int b = snprintf(e->body, sizeof(e->body), "%d %s\n", status, reason);
        int f = snprintf(e->framing, sizeof(e->framing),
                         "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", b);
        /* the reasons are short, fixed strings: nothing is ever cut */
        e->line_len = (unsigned char)n;
        e->body_len = (unsigned char)b;
        e->framing_len = (unsigned char)f;
    }
}

void gw_local_init(void)
{
    pthread_once(&simple_once, simple_encode_all);
}

static const struct simple_enc *simple_enc(int status)
{
    if (status < 100 || status > 599)
        status = 500;
    return &simple_encs[status - 100];
}

/* A short local answer in two halves, so callers can add fields between
 * them: simple_head writes the status line, Server and Date; simple_tail
 * the request id, framing, Connection and a one-line body. */
static void simple_head(struct gw_obuf *o, struct gw_conn *c, int status)
{
    const struct simple_enc *e = simple_enc(status);

    gw_ob_init_io(o, &c->io);
    gw_ob_add(o, e->line, e->line_len);
    gw_ob_add(o, c->w->date, c->w->date_len);
}

/* Ends a local answer: its standard body, or none when <body> is 0 (then
 * framed "Content-Length: 0" unless the status has no content at all). */
static void simple_tail_body(struct gw_obuf *o, struct gw_conn *c, int status, int body)
{
    const struct simple_enc *e = simple_enc(status);

    if (c->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    if (body)
        gw_ob_add(o, e->framing, e->framing_len);
    else if (status != 204 && status != 304)
        gw_ob_lit(o, "Content-Length: 0\r\n");
    gw_conn_ob_connection(o, c);
    gw_ob_lit(o, "\r\n");
    c->head_out += o->total;
    if (body && !c->is_head)
        gw_ob_add(o, e->body, e->body_len);
    gw_ob_flush(o);
    c->bytes_out += o->total;
    c->status = status;
    c->resp_started = 1;
}

static void simple_tail(struct gw_obuf *o, struct gw_conn *c, int status)
{
    simple_tail_body(o, c, status, status != 204 && status != 304);
}

/* A short local answer with <extra> fields (each ending in CRLF). */
void gw_local_simple(struct gw_conn *c, int status, const char *extra, size_t extra_len)
{
    struct gw_obuf ob;

    if (!c->reqid_len) /* a local answer has an id too: the client's and the log's */
        gw_conn_make_reqid(c);
    simple_head(&ob, c, status);
    if (extra_len)
        gw_ob_add(&ob, extra, extra_len);
    simple_tail(&ob, c, status);
}

/* A bad request head: answer and close. */
void gw_local_error_close(struct gw_conn *c, int status)
{
    c->keep = 0;
    gw_local_simple(c, status, NULL, 0);
    gw_conn_request_done(c);
}

/* A configured direct response or redirect, encoded once in the snapshot. */
static void send_encoded(struct gw_conn *c, const struct adm_sroute *sr)
{
    struct gw_obuf ob, *o = &ob;

    gw_ob_init_io(o, &c->io);
    gw_ob_add(o, sr->head, sr->head_len);
    gw_ob_add(o, c->w->date, c->w->date_len);
    if (c->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    gw_conn_ob_connection(o, c);
    gw_ob_add(o, sr->tail, sr->tail_len);
    c->head_out += o->total;
    if (!c->is_head && sr->body_len)
        gw_ob_add(o, sr->body, sr->body_len);
    gw_ob_flush(o);
    c->bytes_out += o->total;
    c->status = (int)sr->status;
    c->resp_started = 1;
}

static void send_allow(struct gw_conn *c, int status, uint64_t mask)
{
    char hdr[600];
    size_t n = 7;

    memcpy(hdr, "Allow: ", 7);
    n += rt_methods_format(c->snap->rt, mask, hdr + n, sizeof(hdr) - n - 3);
    if (n > sizeof(hdr) - 3)
        n = sizeof(hdr) - 3;
    memcpy(hdr + n, "\r\n", 2);
    if (status == 200) { /* an OPTIONS answer: the Allow field is all of it (fox) */
        struct gw_obuf ob;
        simple_head(&ob, c, status);
        gw_ob_add(&ob, hdr, n + 2);
        simple_tail_body(&ob, c, status, 0);
        return;
    }
    gw_local_simple(c, status, hdr, n + 2);
}

static int sensitive(const struct h1_slice *n)
{
    return h1_name_is(n, "authorization") || h1_name_is(n, "proxy-authorization") ||
           h1_name_is(n, "cookie");
}

/* TRACE with Max-Forwards: 0 stops here: the request head as received is
 * the content of a 200 (RFC 9110 9.3.8), without the fields that carry
 * credentials. */
static void send_trace_reflection(struct gw_conn *c)
{
    const struct h1_request *rq = &c->rp.req;
    struct gw_obuf ob, *o = &ob;
    uint64_t len = rq->method.len + 1 + rq->target.len + 1 + 8 + 2 + 2;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (!sensitive(&h->name))
            len += h->name.len + 2 + h->value.len + 2;
    }
    simple_head(o, c, 200);
    if (c->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    gw_ob_lit(o, "Content-Type: message/http\r\nContent-Length: ");
    gw_ob_u64(o, len);
    gw_ob_lit(o, "\r\n");
    gw_conn_ob_connection(o, c);
    gw_ob_lit(o, "\r\n");
    c->head_out += o->total;
    gw_ob_slice(o, &rq->method);
    gw_ob_lit(o, " ");
    gw_ob_slice(o, &rq->target);
    gw_ob_add(o, rq->version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (!sensitive(&h->name))
            gw_ob_field(o, h->name.ptr, h->name.len, h->value.ptr, h->value.len);
    }
    gw_ob_lit(o, "\r\n");
    gw_ob_flush(o);
    c->bytes_out += o->total;
    c->status = 200;
    c->resp_started = 1;
}

/* An OPTIONS or TRACE whose Max-Forwards is 0 is answered here, as its final
 * recipient would: OPTIONS with the methods of the path. */
static void answer_max_forwards_0(struct gw_conn *c)
{
    const struct h1_request *rq = &c->rp.req;
    struct rt_match m;
    uint64_t allow;

    if (rq->method_id == HTTP_TRACE) {
        send_trace_reflection(c);
        return;
    }
    /* a method no route can name: the walk collects every method of the path */
    rt_lookup_ctx(c->snap->rt, c->w->rtctx, " ", 1, rq->host_name.ptr, rq->host_name.len, rq->path,
                  rq->path_len, c->params, c->params_cap, &m);
    allow = m.status == RT_NOT_ALLOWED
                ? m.allow
                : RT_M_GET | RT_M_HEAD | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_PATCH;
    send_allow(c, 200, allow | RT_M_OPTIONS);
}

/* 308 to the same URL over https on <port>: the host in lower case (as
 * nginx's $host), the port unless 443, the target as received; 400 without
 * a host to send the client to. */
static void send_to_https(struct gw_conn *c, unsigned port)
{
    const struct h1_request *rq = &c->rp.req;
    struct gw_obuf ob;

    if (!rq->host_name.ptr) {
        gw_local_simple(c, 400, NULL, 0);
        return;
    }
    simple_head(&ob, c, 308);
    gw_ob_lit(&ob, "Location: https://");
    for (size_t i = 0; i < rq->host_name.len; i++) {
        char ch = rq->host_name.ptr[i];
        ch = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        gw_ob_add(&ob, &ch, 1);
    }
    if (port != 443) {
        gw_ob_lit(&ob, ":");
        gw_ob_u64(&ob, port);
    }
    if (rq->form == H1_TARGET_ORIGIN) {
        gw_ob_slice(&ob, &rq->target);
    } else {
        gw_ob_add(&ob, rq->path, rq->path_len);
        if (rq->query.ptr) {
            gw_ob_lit(&ob, "?");
            gw_ob_slice(&ob, &rq->query);
        }
    }
    gw_ob_lit(&ob, "\r\n");
    simple_tail(&ob, c, 308);
}

void gw_local_answer(struct gw_conn *c, enum gw_verdict v, const struct rt_match *m)
{
    const struct h1_request *rq = &c->rp.req;

    if (!c->reqid_len)
        gw_conn_make_reqid(c);
    switch (v) {
    case GW_V_CONNECT:
        c->keep = 0;
        gw_local_simple(c, 501, NULL, 0);
        gw_conn_request_done(c);
        return;
    case GW_V_ASTERISK: {
        uint64_t all = rt_table_methods(c->snap->rt);
        if (all == RT_ANY_METHOD)
            all = RT_M_GET | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_PATCH;
        send_allow(c, 200, all | RT_M_OPTIONS);
        gw_local_finish(c);
        return;
    }
    case GW_V_NOMEM:
        gw_count(&c->w->ctr.conns_dropped, 1);
        gw_local_error_close(c, 503);
        return;
    case GW_V_LOCAL:
        send_encoded(c, c->sr);
        gw_local_finish(c);
        return;
    case GW_V_MF0:
        answer_max_forwards_0(c);
        gw_local_finish(c);
        return;
    case GW_V_INVALID:
        c->is_head = 0;
        c->http10 = 0;
        gw_local_error_close(c, c->rp.status);
        return;
    case GW_V_BAD_PATH: /* as a bad escape in the path is: 400, and close */
        gw_local_error_close(c, 400);
        return;
    case GW_V_HTTPS:
        send_to_https(c, c->al->redirect_https);
        gw_local_finish(c);
        return;
    case GW_V_MISDIRECTED:
        gw_local_simple(c, 421, NULL, 0);
        gw_local_finish(c);
        return;
    case GW_V_UPSTREAM: /* not ours */
    case GW_V_ROUTER:
        break;
    }
    switch (m->status) {
    case RT_OPTIONS_AUTO: /* 200 with Allow, OPTIONS included (fox) */
        send_allow(c, 200, m->allow);
        gw_local_finish(c);
        return;
    case RT_NOT_ALLOWED:
        send_allow(c, 405, m->allow);
        gw_local_finish(c);
        return;
    case RT_REDIRECT_301:
    case RT_REDIRECT_308: {
        /* Location: the twin path and the query as it came */
        struct gw_obuf ob;
        simple_head(&ob, c, (int)m->status);
        gw_ob_lit(&ob, "Location: ");
        gw_ob_add(&ob, rq->path, m->slash > 0 ? rq->path_len : rq->path_len - 1);
        if (m->slash > 0)
            gw_ob_lit(&ob, "/");
        if (rq->query.ptr) {
            gw_ob_lit(&ob, "?");
            gw_ob_slice(&ob, &rq->query);
        }
        gw_ob_lit(&ob, "\r\n");
        simple_tail(&ob, c, (int)m->status);
        gw_local_finish(c);
        return;
    }
    default:
        gw_local_simple(c, 404, NULL, 0);
        gw_local_finish(c);
        return;
    }
}
