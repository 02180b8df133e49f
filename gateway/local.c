/*
 * local.c - the answers Switchyard gives itself: 404, 405 with Allow,
 * trailing-slash redirects, automatic OPTIONS and OPTIONS *, configured
 * direct responses and redirects (encoded once in the snapshot), TRACE and
 * OPTIONS with Max-Forwards: 0, the 4xx/5xx of a request that cannot be
 * served (to a gRPC request over HTTP/2: its gRPC status, grpc.h); and
 * reading away the body of a request answered here so that
 * the connection stays in step.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/local.h"
#include "admin/http1/status.h"
#include "gateway/grpc.h"
#include "gateway/policy.h"

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
 * connection stays in step, then finish. A codec that frames its bodies
 * (HTTP/2) needs no reading away: its gw_req_done ends the stream. */
void gw_local_finish(struct gw_req *r)
{
    gw_policy_count_answer(r, r->status);
    gw_req_phase(r, GW_REQ_LOCAL);
    if (r->body_done || !r->codec->http1) {
        gw_req_done(r);
        return;
    }
    if (r->rp->req.expect_continue && !r->continued) {
        /* we never sent 100 Continue: the client may or may not send the
         * body now, so this connection cannot be trusted to stay in step.
         * After a 100 the body comes (RFC 9110 10.1.1) and is read away. */
        r->keep = 0;
        gw_req_done(r);
        return;
    }
    /* read away for timeouts.lingering_ms in all (nginx's lingering_time),
     * its reads at most client_body_ms apart, then closed */
    r->c->linger_end = gw_now_ms() + gw_req_cfg(r)->timeouts.lingering_ms;
    gw_local_discard(r);
}

/* HTTP/1: goes on reading the body away (the client's read callback). */
void gw_local_discard(struct gw_req *r)
{
    struct gw_conn *c = r->c;
    struct evbuffer *in = c->io.in;
    const struct adm_config *cfg;

    while (!r->body_done) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (!gw_peek_first(in, &v)) {
            /* empty input: ask for more */
            rc = h1_req_feed_body(r->rp, "", 0, &used, discard_cb, r);
            if (rc == H1_REQ_DONE) {
                r->body_done = 1;
                break;
            }
            if (rc == H1_REQ_ERROR || c->eof) { /* no more bytes will come */
                r->keep = 0;
                break;
            }
            cfg = gw_req_cfg(r);
            gw_tmo_set(&c->tmo, cfg->timeouts.client_body_ms, cfg->timeouts.client_idle_ms);
            if (gw_conn_linger_gap(c, c->tmo.last_rd, cfg->timeouts.client_body_ms) < 0) {
                r->keep = 0; /* read away long enough: closed, without lingering */
                break;
            }
            gw_io_read(&c->io, 1);
            return;
        }
        rc = h1_req_feed_body(r->rp, v.iov_base, v.iov_len, &used, discard_cb, r);
        evbuffer_drain(in, used);
        r->bytes_in += used;
        if (rc == H1_REQ_DONE)
            r->body_done = 1;
        else if (rc == H1_REQ_ERROR) {
            r->keep = 0;
            break;
        }
    }
    gw_req_done(r);
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
 * the request id, framing, Connection and a one-line body. HTTP/1 writes
 * the encoded lines as they are; another codec gets the same fields
 * through its head_begin and head_end. */
static void simple_head(struct gw_obuf *o, struct gw_req *r, int status)
{
    const struct simple_enc *e = simple_enc(status);

    if (r->codec->http1) {
        gw_ob_init_io(o, &r->c->io);
        gw_ob_add(o, e->line, e->line_len);
    } else {
        r->codec->head_begin(r, o, status, NULL);
        gw_ob_lit(o, "Server: switchyard\r\n");
    }
    gw_ob_add(o, r->c->w->date, r->c->w->date_len);
}

/* Ends a local answer's head (its fields are in <o>) and sends <body>
 * (<blen> bytes, NULL: none) unless the request is a HEAD. The head's
 * bytes count as head_out. */
static void local_end(struct gw_obuf *o, struct gw_req *r, int status, const char *body,
                      size_t blen)
{
    int send_body = body && blen && !r->is_head;

    if (r->codec->http1) {
        gw_conn_ob_connection(o, r->c);
        gw_ob_lit(o, "\r\n");
        r->head_out += o->total;
        if (send_body)
            gw_ob_add(o, body, blen);
        gw_ob_flush(o);
        r->bytes_out += o->total;
    } else {
        r->codec->head_end(r, o, send_body ? 0 : GW_HEAD_NOBODY);
        r->head_out += o->total;
        r->bytes_out += o->total;
        if (send_body) {
            r->codec->data(r, body, blen);
            r->bytes_out += blen;
        }
        r->codec->end(r, NULL, 0);
    }
    r->status = status;
    r->resp_started = 1;
}

/* Ends a local answer: its standard body, or none when <body> is 0 (then
 * framed "Content-Length: 0" unless the status has no content at all). */
static void simple_tail_body(struct gw_obuf *o, struct gw_req *r, int status, int body)
{
    const struct simple_enc *e = simple_enc(status);

    if (r->pol_n) /* the fields of the route's policies that let it through */
        gw_policy_response(r, o);
    if (r->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, r->reqid, r->reqid_len);
    if (body)
        gw_ob_add(o, e->framing, e->framing_len);
    else if (status != 204 && status != 304)
        gw_ob_lit(o, "Content-Length: 0\r\n");
    local_end(o, r, status, body ? e->body : NULL, e->body_len);
}

static void simple_tail(struct gw_obuf *o, struct gw_req *r, int status)
{
    simple_tail_body(o, r, status, status != 204 && status != 304);
}

/* The answer with HTTP <status> to a gRPC request over HTTP/2 (grpc.h):
 * 200, Content-Type application/grpc, grpc-status <code> and grpc-message
 * <msg> (NULL: gw_grpc_message's for <status>, with the path for a 404
 * or a 405), in one HEADERS frame that ends the stream. The access log
 * and the counters see the 200 the client saw, and <code> beside it. */
static void send_grpc(struct gw_req *r, int status, int code, const char *msg)
{
    const struct h1_request *rq = &r->rp->req;
    char text[512], enc[3 * sizeof(text)];
    size_t n;
    struct gw_obuf ob;

    if (!msg && (status == 404 || status == 405) && rq->path_len) {
        int k = snprintf(text, sizeof(text), "%s %.*s",
                         status == 404 ? "no route for" : "method not allowed for",
                         (int)(rq->path_len < 256 ? rq->path_len : 256), rq->path);
        n = k < 0 ? 0 : (size_t)k < sizeof(text) ? (size_t)k : sizeof(text) - 1;
        msg = text;
    } else {
        msg = msg ? msg : gw_grpc_message(status);
        n = strlen(msg);
    }
    n = gw_grpc_pct_encode(enc, sizeof(enc), msg, n);
    simple_head(&ob, r, 200);
    if (r->reqid_len)
        gw_ob_field(&ob, "X-Request-Id", 12, r->reqid, r->reqid_len);
    gw_ob_lit(&ob, "Content-Type: application/grpc\r\ngrpc-status: ");
    gw_ob_u64(&ob, (uint64_t)code);
    gw_ob_lit(&ob, "\r\n");
    gw_ob_field(&ob, "grpc-message", 12, enc, n);
    local_end(&ob, r, 200, NULL, 0);
    r->grpc_status = (unsigned char)(code + 1);
}

/* A short local answer with <extra> fields (each ending in CRLF). */
void gw_local_simple(struct gw_req *r, int status, const char *extra, size_t extra_len)
{
    gw_local_simple_grpc(r, status, -1, NULL, extra, extra_len);
}

void gw_local_simple_grpc(struct gw_req *r, int status, int code, const char *msg,
                          const char *extra, size_t extra_len)
{
    struct gw_obuf ob;

    gw_policy_count_answer(r, status); /* before a gRPC client's 200 */
    if (!r->reqid_len) /* a local answer has an id too: the client's and the log's */
        gw_req_make_reqid(r);
    if (r->rp->req.grpc && !r->codec->http1) {
        /* the extra fields (Allow, Retry-After) say nothing to a gRPC client */
        send_grpc(r, status, code < 0 ? gw_grpc_code(status) : code, msg);
        return;
    }
    simple_head(&ob, r, status);
    if (extra_len)
        gw_ob_add(&ob, extra, extra_len);
    simple_tail(&ob, r, status);
}

void gw_local_body(struct gw_req *r, int status, const char *extra, size_t extra_len,
                   const char *body, size_t blen)
{
    struct gw_obuf ob;

    gw_policy_count_answer(r, status);
    if (r->rp->req.grpc && !r->codec->http1) {
        gw_local_simple(r, status, NULL, 0);
        return;
    }
    if (!r->reqid_len)
        gw_req_make_reqid(r);
    simple_head(&ob, r, status);
    gw_ob_add(&ob, extra, extra_len);
    if (r->pol_n)
        gw_policy_response(r, &ob);
    gw_ob_field(&ob, "X-Request-Id", 12, r->reqid, r->reqid_len);
    gw_ob_lit(&ob, "Content-Length: ");
    gw_ob_u64(&ob, blen);
    gw_ob_lit(&ob, "\r\n");
    local_end(&ob, r, status, body, blen);
}

/* A bad request head: answer and close. */
void gw_local_error_close(struct gw_req *r, int status)
{
    r->keep = 0;
    gw_local_simple(r, status, NULL, 0);
    gw_req_done(r);
}

/* A configured direct response or redirect, encoded once in the snapshot
 * as HTTP/1.1: its status line, fields, Content-Length and body. Another
 * codec gets the fields after the status line. */
static void send_encoded(struct gw_req *r, const struct adm_sroute *sr)
{
    struct gw_obuf ob, *o = &ob;

    if (r->codec->http1) {
        gw_ob_init_io(o, &r->c->io);
        gw_ob_add(o, sr->head, sr->head_len);
    } else {
        const char *eol = memchr(sr->head, '\n', sr->head_len);
        size_t skip = eol ? (size_t)(eol - sr->head) + 1 : sr->head_len;
        r->codec->head_begin(r, o, (int)sr->status, NULL);
        gw_ob_add(o, sr->head + skip, sr->head_len - skip);
    }
    gw_ob_add(o, r->c->w->date, r->c->w->date_len);
    if (r->pol_n)
        gw_policy_response(r, o);
    if (r->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, r->reqid, r->reqid_len);
    if (r->codec->http1) {
        gw_conn_ob_connection(o, r->c);
        gw_ob_add(o, sr->tail, sr->tail_len);
        r->head_out += o->total;
        if (!r->is_head && sr->body_len)
            gw_ob_add(o, sr->body, sr->body_len);
        gw_ob_flush(o);
        r->bytes_out += o->total;
        r->status = (int)sr->status;
        r->resp_started = 1;
        return;
    }
    gw_ob_add(o, sr->tail, sr->tail_len - 2); /* its Content-Length, not the blank line */
    local_end(o, r, (int)sr->status, sr->body, sr->body_len);
}

static void send_allow(struct gw_req *r, int status, uint64_t mask)
{
    char hdr[600];
    size_t n = 7;

    memcpy(hdr, "Allow: ", 7);
    n += rt_methods_format(r->snap->rt, mask, hdr + n, sizeof(hdr) - n - 3);
    if (n > sizeof(hdr) - 3)
        n = sizeof(hdr) - 3;
    memcpy(hdr + n, "\r\n", 2);
    if (status == 200) { /* an OPTIONS answer: the Allow field is all of it (fox) */
        struct gw_obuf ob;
        simple_head(&ob, r, status);
        gw_ob_add(&ob, hdr, n + 2);
        simple_tail_body(&ob, r, status, 0);
        return;
    }
    gw_local_simple(r, status, hdr, n + 2);
}

static int sensitive(const struct h1_slice *n)
{
    return h1_name_is(n, "authorization") || h1_name_is(n, "proxy-authorization") ||
           h1_name_is(n, "cookie");
}

/* TRACE with Max-Forwards: 0 stops here: the request head as received is
 * the content of a 200 (RFC 9110 9.3.8), without the fields that carry
 * credentials. */
/* A piece of the reflected head: behind the head in <o> (HTTP/1), or as
 * body bytes through the codec. */
static void trace_put(struct gw_req *r, struct gw_obuf *o, const char *p, size_t n)
{
    if (!n)
        return;
    if (r->codec->http1)
        gw_ob_add(o, p, n);
    else
        r->codec->data(r, p, n);
}

static void send_trace_reflection(struct gw_req *r)
{
    const struct h1_request *rq = &r->rp->req;
    struct gw_obuf ob, *o = &ob;
    uint64_t len = rq->method.len + 1 + rq->target.len + 1 + 8 + 2 + 2;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (!sensitive(&h->name))
            len += h->name.len + 2 + h->value.len + 2;
    }
    simple_head(o, r, 200);
    if (r->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, r->reqid, r->reqid_len);
    gw_ob_lit(o, "Content-Type: message/http\r\nContent-Length: ");
    gw_ob_u64(o, len);
    gw_ob_lit(o, "\r\n");
    if (r->codec->http1) {
        gw_conn_ob_connection(o, r->c);
        gw_ob_lit(o, "\r\n");
    } else {
        r->codec->head_end(r, o, 0);
        r->bytes_out += o->total + len;
    }
    r->head_out += o->total;
    trace_put(r, o, rq->method.ptr, rq->method.len);
    trace_put(r, o, " ", 1);
    trace_put(r, o, rq->target.ptr, rq->target.len);
    trace_put(r, o, rq->version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (sensitive(&h->name))
            continue;
        trace_put(r, o, h->name.ptr, h->name.len);
        trace_put(r, o, ": ", 2);
        trace_put(r, o, h->value.ptr, h->value.len);
        trace_put(r, o, "\r\n", 2);
    }
    trace_put(r, o, "\r\n", 2);
    if (r->codec->http1) {
        gw_ob_flush(o);
        r->bytes_out += o->total;
    } else {
        r->codec->end(r, NULL, 0);
    }
    r->status = 200;
    r->resp_started = 1;
}

/* An OPTIONS or TRACE whose Max-Forwards is 0 is answered here, as its final
 * recipient would: OPTIONS with the methods of the path. */
static void answer_max_forwards_0(struct gw_req *r)
{
    const struct h1_request *rq = &r->rp->req;
    struct rt_match m;
    uint64_t allow;

    if (rq->method_id == HTTP_TRACE) {
        send_trace_reflection(r);
        return;
    }
    /* a method no route can name: the walk collects every method of the path */
    rt_lookup_ctx(r->snap->rt, r->c->w->rtctx, " ", 1, rq->host_name.ptr, rq->host_name.len,
                  rq->path, rq->path_len, r->params, r->params_cap, &m);
    allow = m.status == RT_NOT_ALLOWED
                ? m.allow
                : RT_M_GET | RT_M_HEAD | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_PATCH;
    send_allow(r, 200, allow | RT_M_OPTIONS);
}

/* A plain HTTP request on a TLS listener (io_tls.c let it through to be
 * answered): 400 saying so, as nginx's "The plain HTTP request was sent to
 * HTTPS port", instead of a close the client cannot make sense of. */
static void send_plain_on_tls(struct gw_req *r)
{
    static const char body[] = "400 Bad Request: a plain HTTP request was sent to an HTTPS port "
                               "(this port speaks TLS: use https://)\n";
    struct gw_obuf ob;

    r->keep = 0;
    simple_head(&ob, r, 400);
    if (r->reqid_len)
        gw_ob_field(&ob, "X-Request-Id", 12, r->reqid, r->reqid_len);
    gw_ob_lit(&ob, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
    gw_ob_u64(&ob, sizeof(body) - 1);
    gw_ob_lit(&ob, "\r\n");
    local_end(&ob, r, 400, body, sizeof(body) - 1);
}

/* 308 to the same URL over https on <port>: the host in lower case (as
 * nginx's $host), the port unless 443, the target as received; 400 without
 * a host to send the client to. */
static void send_to_https(struct gw_req *r, unsigned port)
{
    const struct h1_request *rq = &r->rp->req;
    struct gw_obuf ob;

    if (!rq->host_name.ptr) {
        gw_local_simple(r, 400, NULL, 0);
        return;
    }
    simple_head(&ob, r, 308);
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
    simple_tail(&ob, r, 308);
}

void gw_local_answer(struct gw_req *r, enum gw_verdict v, const struct rt_match *m)
{
    const struct h1_request *rq = &r->rp->req;

    if (!r->reqid_len)
        gw_req_make_reqid(r);
    switch (v) {
    case GW_V_CONNECT:
        r->keep = 0;
        gw_local_simple(r, 501, NULL, 0);
        gw_req_done(r);
        return;
    case GW_V_ASTERISK: {
        uint64_t all = rt_table_methods(r->snap->rt);
        if (!all) { /* no route, no method to list: 404, as fox */
            gw_local_simple(r, 404, NULL, 0);
            gw_local_finish(r);
            return;
        }
        if (all == RT_ANY_METHOD)
            all = RT_M_GET | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_PATCH;
        send_allow(r, 200, all | RT_M_OPTIONS);
        gw_local_finish(r);
        return;
    }
    case GW_V_NOMEM:
        gw_count(&r->c->w->ctr.conns_dropped, 1);
        gw_local_error_close(r, 503);
        return;
    case GW_V_LOCAL:
        send_encoded(r, r->sr);
        gw_local_finish(r);
        return;
    case GW_V_MF0:
        answer_max_forwards_0(r);
        gw_local_finish(r);
        return;
    case GW_V_INVALID:
        r->is_head = 0;
        r->http10 = 0;
        gw_local_error_close(r, r->rp->status);
        return;
    case GW_V_BAD_PATH: /* as a bad escape in the path is: 400, and close */
        gw_local_error_close(r, 400);
        return;
    case GW_V_HTTPS:
        send_to_https(r, r->c->al->redirect_https);
        gw_local_finish(r);
        return;
    case GW_V_MISDIRECTED:
        gw_local_simple(r, 421, NULL, 0);
        gw_local_finish(r);
        return;
    case GW_V_PLAIN_ON_TLS:
        send_plain_on_tls(r);
        gw_local_finish(r);
        return;
    case GW_V_UPSTREAM: /* not ours */
    case GW_V_ROUTER:
        break;
    }
    switch (m->status) {
    case RT_OPTIONS_AUTO: /* 200 with Allow, OPTIONS included (fox) */
        send_allow(r, 200, m->allow);
        gw_local_finish(r);
        return;
    case RT_NOT_ALLOWED:
        send_allow(r, 405, m->allow);
        gw_local_finish(r);
        return;
    case RT_REDIRECT_301:
    case RT_REDIRECT_308: {
        /* Location: the twin path and the query as it came */
        struct gw_obuf ob;
        simple_head(&ob, r, (int)m->status);
        gw_ob_lit(&ob, "Location: ");
        gw_ob_add(&ob, rq->path, m->slash > 0 ? rq->path_len : rq->path_len - 1);
        if (m->slash > 0)
            gw_ob_lit(&ob, "/");
        if (rq->query.ptr) {
            gw_ob_lit(&ob, "?");
            gw_ob_slice(&ob, &rq->query);
        }
        gw_ob_lit(&ob, "\r\n");
        simple_tail(&ob, r, (int)m->status);
        gw_local_finish(r);
        return;
    }
    default:
        gw_local_simple(r, 404, NULL, 0);
        gw_local_finish(r);
        return;
    }
}
