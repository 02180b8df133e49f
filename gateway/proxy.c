/*
 * proxy.c - one client connection's life: parse a request head, route it
 * through the pinned snapshot, answer locally or stream it to an upstream
 * and the response back, then the next request on the same connection.
 *
 * Client connection states (one set_state-like field, c->st):
 *   CS_HEAD    waiting for / reading a request head
 *   CS_LOCAL   a local answer is queued; the request body is being discarded
 *   CS_PROXY   the request is upstream: body streaming up, response down
 *   CS_TUNNEL  after 101 Switching Protocols: bytes both ways until a close
 *   CS_CLOSING flushing the last response, then close
 *
 * Bodies stream with backpressure: when the far side's output buffer passes
 * GW_HWM, reading the near side stops until that buffer drains below GW_LWM
 * (the write callback fires at the low watermark). Nothing is buffered
 * whole. Upstream connections that end a response cleanly are parked in the
 * pool's per-worker idle stack for the next request to the same server.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"
#include "gateway/io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define GW_HWM (256 * 1024)
#define GW_LWM (64 * 1024)
#define GW_UP_HEAD_MAX (64 * 1024)
#define GW_UP_MAX_HEADERS 256

/* A connection's timeouts. Timeouts kept as libevent events re-arm an event
 * on every read and write; ours are two stores, and the worker sweeps its
 * connections every GW_SWEEP_MS (gw_timeout_sweep). <rd>: the read side may
 * be idle that long; <wr>: queued output may make no progress that long. */
struct tmo {
    unsigned rd, wr; /* ms, 0: none */
    long long last_rd, last_wr;
    size_t wr_len; /* queued output at the last sweep */
};

enum cstate { CS_HEAD, CS_LOCAL, CS_PROXY, CS_TUNNEL, CS_CLOSING };

struct gw_conn {
    struct gw_conn *prev, *next;
    struct gw_worker *w;
    struct gw_io io;
    struct sockaddr_storage peer;
    char peer_ip[INET6_ADDRSTRLEN];
    unsigned peer_port;
    enum cstate st;
    struct gw_req_parser rp;
    int head_started; /* some bytes of the current head arrived */
    int parked;       /* accepted over the connection limit: not read yet */
    int eof;          /* the client half-closed */

    /* the current request */
    struct adm_snapshot *snap;
    const struct adm_sroute *sr;
    struct rt_param *params;
    size_t params_cap, nparams;
    struct gw_upconn *up;
    int body_done, resp_started, keep, is_head, http10, retried, read_paused;
    int status;
    uint64_t bytes_in, bytes_out;
    struct timespec t0;
    char reqid[64];
    size_t reqid_len;
    const char *upstream_addr;
    struct timespec t_up; /* when the request went upstream */
    struct tmo tmo;
};

struct gw_upconn {
    struct gw_upconn *prev, *next;
    struct gw_worker *w;
    struct gw_io io;
    up_pool *pool;
    size_t server;
    struct gw_conn *c; /* NULL while idle in the pool */
    llhttp_t hp;
    int connected, reused, got_bytes, head_done, msg_done, raw, keep, read_paused;
    int eof; /* the upstream closed: what is buffered is all that comes */
    int status;
    struct tmo tmo;
    long long idle_until; /* parked: CLOCK_MONOTONIC ms when it is closed */
    struct gw_header hdr[GW_UP_MAX_HEADERS];
    size_t nhdr;
    int in_value, too_many;
    struct gw_slice status_text;
};

static void conn_free(struct gw_conn *c);
static void conn_process(struct gw_conn *c);
static void up_free(struct gw_upconn *u);
static void up_read_cb(struct gw_io *io, void *arg);
static void up_write_cb(struct gw_io *io, void *arg);
static void up_event_cb(struct gw_io *io, short what, void *arg);
static void conn_read_cb(struct gw_io *io, void *arg);
static void conn_write_cb(struct gw_io *io, void *arg);
static void conn_event_cb(struct gw_io *io, short what, void *arg);

/* ---- small helpers ---- */

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_tmo(struct tmo *t, unsigned rd_ms, unsigned wr_ms)
{
    t->rd = rd_ms;
    t->wr = wr_ms;
    t->last_rd = t->last_wr = now_ms();
}

/* Which timeout of <t> has run out, as GW_IO_TIMEOUT event flags, or 0.
 * <reading>: the read side is enabled. */
static short tmo_expired(struct tmo *t, struct evbuffer *out, int reading, long long now)
{
    if (t->rd && reading && now - t->last_rd >= t->rd) {
        t->last_rd = now;
        return GW_IO_TIMEOUT | GW_IO_READING;
    }
    if (t->wr) {
        size_t len = evbuffer_get_length(out);
        if (len == 0 || len != t->wr_len) {
            t->wr_len = len;
            t->last_wr = now;
        } else if (now - t->last_wr >= t->wr) {
            t->last_wr = now;
            return GW_IO_TIMEOUT | GW_IO_WRITING;
        }
    }
    return 0;
}

/* Output assembled on the stack and handed to the evbuffer in one add: each
 * evbuffer_add on a connection's output runs its callbacks (and may arm the
 * write event), so a head written field by field costs that many times. */
struct obuf {
    struct evbuffer *out;
    struct gw_io *io; /* NULL: never write directly */
    size_t n, total;
    char b[3072];
};

static void ob_init(struct obuf *o, struct evbuffer *out)
{
    o->out = out;
    o->io = NULL;
    o->n = 0;
    o->total = 0;
}

/* Output for <io>: with nothing queued, bytes go straight to the
 * transport (gw_io_send), so a response that fits costs no write event. */
static void ob_init_io(struct obuf *o, struct gw_io *io)
{
    ob_init(o, io->out);
    o->io = io;
}

static void ob_flush(struct obuf *o)
{
    if (!o->n)
        return;
    if (o->io)
        gw_io_send(o->io, o->b, o->n);
    else
        evbuffer_add(o->out, o->b, o->n);
    o->n = 0;
}

static inline void ob_add(struct obuf *o, const void *p, size_t n)
{
    o->total += n;
    if (o->n + n > sizeof(o->b)) {
        ob_flush(o);
        if (n > sizeof(o->b)) {
            evbuffer_add(o->out, p, n);
            return;
        }
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

#define ob_lit(o, s) ob_add((o), (s), sizeof(s) - 1)

static void ob_str(struct obuf *o, const char *s)
{
    ob_add(o, s, strlen(s));
}

static void ob_slice(struct obuf *o, const struct gw_slice *s)
{
    ob_add(o, s->ptr, s->len);
}

static void ob_u64(struct obuf *o, uint64_t v)
{
    char d[24];
    size_t i = sizeof(d);

    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    ob_add(o, d + i, sizeof(d) - i);
}

/* "Name: value\r\n" */
static void ob_field(struct obuf *o, const char *name, size_t nlen, const char *v, size_t vlen)
{
    ob_add(o, name, nlen);
    ob_lit(o, ": ");
    ob_add(o, v, vlen);
    ob_lit(o, "\r\n");
}

static const struct adm_config *cur_cfg(struct gw_conn *c)
{
    return c->snap ? c->snap->cfg
                   : atomic_load_explicit(&c->w->proc->swap.current, memory_order_acquire)->cfg;
}

static int name_is(const struct gw_slice *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->len == n && strncasecmp(s->ptr, lit, n) == 0;
}

/* Hop-by-hop fields (RFC 9110 7.6.1), dropped in both directions. */
static int is_hop(const struct gw_slice *n)
{
    switch (n->len) {
    case 2:
        return name_is(n, "te");
    case 7:
        return name_is(n, "trailer") || name_is(n, "upgrade");
    case 10:
        return name_is(n, "connection") || name_is(n, "keep-alive");
    case 16:
        return name_is(n, "proxy-connection");
    default:
        return 0;
    }
}

/* A field named by a Connection token; framing fields are never dropped
 * that way (a "Connection: content-length" must not change the framing). */
static int named_in(const struct gw_slice *n, const struct gw_slice *tok, size_t ntok)
{
    if (name_is(n, "content-length") || name_is(n, "transfer-encoding") || name_is(n, "host"))
        return 0;
    for (size_t i = 0; i < ntok; i++)
        if (tok[i].len == n->len && strncasecmp(tok[i].ptr, n->ptr, n->len) == 0)
            return 1;
    return 0;
}

/* The first contiguous run of <in>'s bytes in <v>; 0 when <in> is empty. An
 * empty buffer may still hold an empty chain (left by a read that found EOF
 * or EAGAIN), for which evbuffer_peek() reports one zero-length vector: a
 * loop that fed that to a parser would never end. */
static int peek_first(struct evbuffer *in, struct evbuffer_iovec *v)
{
    return evbuffer_get_length(in) > 0 && evbuffer_peek(in, -1, NULL, v, 1) >= 1 && v->iov_len > 0;
}

static double elapsed_ms(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static void json_esc(struct gw_worker *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n && w->log_len + 8 < w->log_cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            w->log[w->log_len++] = '\\';
            w->log[w->log_len++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            w->log_len += (size_t)snprintf(w->log + w->log_len, 7, "\\u%04x", ch);
        } else {
            w->log[w->log_len++] = (char)ch;
        }
    }
}

/* One JSON line per request into the worker's buffer. */
static void access_log(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    const struct gw_request *rq = &c->rp.req;
    struct timespec ts;
    struct tm tm;
    char tbuf[32];

    if (w->proc->access_fd < 0)
        return;
    if (w->log_cap - w->log_len < 8192 + rq->path_len * 6)
        gw_access_flush(w);
    if (w->log_cap - w->log_len < 8192 + rq->path_len * 6)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len,
                                   "{\"time\":\"%s.%03ldZ\",\"client\":\"%s:%u\",\"method\":\"",
                                   tbuf, ts.tv_nsec / 1000000, c->peer_ip, c->peer_port);
    json_esc(w, rq->method.ptr ? rq->method.ptr : "", rq->method.ptr ? rq->method.len : 0);
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len, "\",\"path\":\"");
    json_esc(w, rq->path ? rq->path : "", rq->path ? rq->path_len : 0);
    w->log_len += (size_t)snprintf(
        w->log + w->log_len, w->log_cap - w->log_len,
        "\",\"status\":%d,\"bytes_in\":%llu,\"bytes_out\":%llu,\"duration_ms\":%.3f,"
        "\"route\":%s%s%s,\"upstream\":%s%s%s,\"request_id\":\"%.*s\"}\n",
        c->status, (unsigned long long)c->bytes_in, (unsigned long long)c->bytes_out,
        elapsed_ms(&c->t0), c->sr ? "\"" : "", c->sr ? c->sr->id : "null", c->sr ? "\"" : "",
        c->upstream_addr ? "\"" : "", c->upstream_addr ? c->upstream_addr : "null",
        c->upstream_addr ? "\"" : "", (int)c->reqid_len, c->reqid);
    if (w->log_len > w->log_cap / 2)
        gw_access_flush(w);
}

static void count_status(struct gw_conn *c)
{
    struct gw_counters *k = &c->w->ctr;
    int cls = c->status / 100;
    double secs = elapsed_ms(&c->t0) / 1e3;

    gw_count(&k->requests, 1);
    if (cls >= 1 && cls <= 5) {
        gw_count(&k->status[cls], 1);
        if (c->sr)
            gw_count(&c->sr->ctr[c->w->id].status[cls], 1);
    }
    gw_count(&k->dur[gw_hist_bucket(secs)], 1);
    gw_count(&k->dur_sum_us, (uint64_t)(secs * 1e6));
    gw_count(&k->bytes_in, c->bytes_in);
    gw_count(&k->bytes_out, c->bytes_out);
}

static void unpin(struct gw_conn *c)
{
    if (c->snap) {
        adm_swap_unpin(c->snap, c->w->id);
        c->snap = NULL;
    }
}

static void make_reqid(struct gw_conn *c)
{
    struct gw_worker *w = c->w;

    static const char hex[] = "0123456789abcdef";
    uint64_t hi = ((uint64_t)w->reqid_prefix << 8) | (w->id & 0xff), lo = ++w->reqid_seq;

    /* 24 hex digits: process prefix, worker, sequence */
    for (int i = 9; i >= 0; i--, hi >>= 4)
        c->reqid[i] = hex[hi & 15];
    for (int i = 23; i >= 10; i--, lo >>= 4)
        c->reqid[i] = hex[lo & 15];
    c->reqid_len = 24;
}

/* ---- local answers ---- */

/* No more requests: the connection closes once its output is flushed. */
static void close_when_flushed(struct gw_conn *c)
{
    c->st = CS_CLOSING;
    gw_io_read(&c->io, 0);
    /* never free here: callers still hold <c>; the write callback closes
     * once the output is flushed (at once when it is) */
    if (evbuffer_get_length(c->io.out) == 0)
        gw_io_kick_write(&c->io);
}

/* Ends the current request: log, count, release the snapshot, and either
 * go on with the next request or close once the output is flushed. A
 * client that half-closed still gets answers to the requests it sent
 * before (pipelined, already buffered). */
static void request_done(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    size_t pending = evbuffer_get_length(c->io.in);

    access_log(c);
    count_status(c);
    unpin(c);
    c->sr = NULL;
    c->upstream_addr = NULL;
    if (!c->keep || w->draining || (c->eof && !pending)) {
        close_when_flushed(c);
        return;
    }
    c->st = CS_HEAD;
    c->head_started = 0;
    gw_req_reset(&c->rp);
    set_tmo(&c->tmo, cur_cfg(c)->timeouts.client_idle_ms, cur_cfg(c)->timeouts.client_idle_ms);
    if (!c->eof)
        gw_io_read(&c->io, 1);
    if (pending)
        gw_io_kick_read(&c->io);
}

static void discard_body(struct gw_conn *c);

static int discard_cb(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return 0;
}

/* After a local answer is queued: read the request's body away so the
 * connection stays in step, then finish. */
static void local_finish(struct gw_conn *c)
{
    c->st = CS_LOCAL;
    if (c->body_done) {
        request_done(c);
        return;
    }
    if (c->rp.req.expect_continue) {
        /* we never sent 100 Continue: the client may or may not send the
         * body now, so this connection cannot be trusted to stay in step */
        c->keep = 0;
        request_done(c);
        return;
    }
    discard_body(c);
}

static void discard_body(struct gw_conn *c)
{
    struct evbuffer *in = c->io.in;

    while (!c->body_done) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (!peek_first(in, &v)) {
            /* empty input: ask for more */
            rc = gw_req_feed_body(&c->rp, "", 0, &used, discard_cb, c);
            if (rc == GW_REQ_DONE) {
                c->body_done = 1;
                break;
            }
            if (rc == GW_REQ_ERROR || c->eof) { /* no more bytes will come */
                c->keep = 0;
                break;
            }
            set_tmo(&c->tmo, cur_cfg(c)->timeouts.client_body_ms,
                    cur_cfg(c)->timeouts.client_idle_ms);
            gw_io_read(&c->io, 1);
            return;
        }
        rc = gw_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, discard_cb, c);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == GW_REQ_DONE)
            c->body_done = 1;
        else if (rc == GW_REQ_ERROR) {
            c->keep = 0;
            break;
        }
    }
    request_done(c);
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
        const char *reason = gw_status_reason(status);
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

void gw_proxy_init(void)
{
    pthread_once(&simple_once, simple_encode_all);
}

static const struct simple_enc *simple_enc(int status)
{
    if (status < 100 || status > 599)
        status = 500;
    return &simple_encs[status - 100];
}

/* The Connection field of a response to <c>'s client: close when the
 * connection ends after it, keep-alive for an HTTP/1.0 client that keeps it. */
static void ob_connection(struct obuf *o, const struct gw_conn *c)
{
    if (!c->keep || c->w->draining)
        ob_lit(o, "Connection: close\r\n");
    else if (c->http10)
        ob_lit(o, "Connection: keep-alive\r\n");
}

/* A short local answer in two halves, so callers can add fields between
 * them: simple_head writes the status line, Server and Date; simple_tail
 * the request id, framing, Connection and a one-line body. */
static void simple_head(struct obuf *o, struct gw_conn *c, int status)
{
    const struct simple_enc *e = simple_enc(status);

    ob_init_io(o, &c->io);
    ob_add(o, e->line, e->line_len);
    ob_add(o, c->w->date, c->w->date_len);
}

/* Ends a local answer: its standard body, or none when <body> is 0 (then
 * framed "Content-Length: 0" unless the status has no content at all). */
static void simple_tail_body(struct obuf *o, struct gw_conn *c, int status, int body)
{
    const struct simple_enc *e = simple_enc(status);

    if (c->reqid_len)
        ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    if (body)
        ob_add(o, e->framing, e->framing_len);
    else if (status != 204 && status != 304)
        ob_lit(o, "Content-Length: 0\r\n");
    ob_connection(o, c);
    ob_lit(o, "\r\n");
    if (body && !c->is_head)
        ob_add(o, e->body, e->body_len);
    ob_flush(o);
    c->bytes_out += o->total;
    c->status = status;
    c->resp_started = 1;
}

static void simple_tail(struct obuf *o, struct gw_conn *c, int status)
{
    simple_tail_body(o, c, status, status != 204 && status != 304);
}

/* A short local answer with <extra> fields (each ending in CRLF). */
static void send_simple(struct gw_conn *c, int status, const char *extra, size_t extra_len)
{
    struct obuf ob;

    simple_head(&ob, c, status);
    if (extra_len)
        ob_add(&ob, extra, extra_len);
    simple_tail(&ob, c, status);
}

/* A bad request head: answer and close. */
static void send_error_close(struct gw_conn *c, int status)
{
    c->keep = 0;
    send_simple(c, status, NULL, 0);
    request_done(c);
}

/* A configured direct response or redirect, encoded once in the snapshot. */
static void send_encoded(struct gw_conn *c, const struct adm_sroute *sr)
{
    struct obuf ob, *o = &ob;

    ob_init_io(o, &c->io);
    ob_add(o, sr->head, sr->head_len);
    ob_add(o, c->w->date, c->w->date_len);
    ob_connection(o, c);
    ob_add(o, sr->tail, sr->tail_len);
    if (!c->is_head && sr->body_len)
        ob_add(o, sr->body, sr->body_len);
    ob_flush(o);
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
        struct obuf ob;
        simple_head(&ob, c, status);
        ob_add(&ob, hdr, n + 2);
        simple_tail_body(&ob, c, status, 0);
        return;
    }
    send_simple(c, status, hdr, n + 2);
}

/* ---- Max-Forwards (RFC 9110 7.6.2) ---- */

/* The Max-Forwards of an OPTIONS or TRACE request, or -1: another method,
 * no such field, or none usable (repeated, or not a number). */
static int64_t max_forwards(const struct gw_request *rq)
{
    int64_t v = -1;

    if (rq->method_id != HTTP_OPTIONS && rq->method_id != HTTP_TRACE)
        return -1;
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct gw_slice *val = &rq->headers[i].value;
        int64_t x = 0;

        if (!name_is(&rq->headers[i].name, "max-forwards"))
            continue;
        if (v >= 0 || val->len == 0)
            return -1;
        for (size_t k = 0; k < val->len; k++) {
            if (val->ptr[k] < '0' || val->ptr[k] > '9')
                return -1;
            if (x < 1000000000)
                x = x * 10 + (val->ptr[k] - '0');
        }
        v = x;
    }
    return v;
}

static int sensitive(const struct gw_slice *n)
{
    return name_is(n, "authorization") || name_is(n, "proxy-authorization") || name_is(n, "cookie");
}

/* TRACE with Max-Forwards: 0 stops here: the request head as received is
 * the content of a 200 (RFC 9110 9.3.8), without the fields that carry
 * credentials. */
static void send_trace_reflection(struct gw_conn *c)
{
    const struct gw_request *rq = &c->rp.req;
    struct obuf ob, *o = &ob;
    uint64_t len = rq->method.len + 1 + rq->target.len + 1 + 8 + 2 + 2;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct gw_header *h = &rq->headers[i];
        if (!sensitive(&h->name))
            len += h->name.len + 2 + h->value.len + 2;
    }
    simple_head(o, c, 200);
    if (c->reqid_len)
        ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    ob_lit(o, "Content-Type: message/http\r\nContent-Length: ");
    ob_u64(o, len);
    ob_lit(o, "\r\n");
    ob_connection(o, c);
    ob_lit(o, "\r\n");
    ob_slice(o, &rq->method);
    ob_lit(o, " ");
    ob_slice(o, &rq->target);
    ob_add(o, rq->version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct gw_header *h = &rq->headers[i];
        if (!sensitive(&h->name))
            ob_field(o, h->name.ptr, h->name.len, h->value.ptr, h->value.len);
    }
    ob_lit(o, "\r\n");
    ob_flush(o);
    c->bytes_out += o->total;
    c->status = 200;
    c->resp_started = 1;
}

/* An OPTIONS or TRACE whose Max-Forwards is 0 is answered here, as its final
 * recipient would: OPTIONS with the methods of the path. */
static void answer_max_forwards_0(struct gw_conn *c)
{
    const struct gw_request *rq = &c->rp.req;
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

/* ---- upstream connections ---- */

/* RFC 9110 tchar, as a table: this runs for every byte of every upstream
 * field name. */
static int is_tchar(unsigned char ch)
{
    static const uint64_t lo = 0x03ff6cfa00000000ULL; /* ! # $ % & ' * + - . 0-9 */
    static const uint64_t hi = 0x57ffffffc7fffffeULL; /* A-Z ^ _ ` a-z | ~ */
    return ch < 64 ? (int)((lo >> ch) & 1) : ch < 128 ? (int)((hi >> (ch - 64)) & 1) : 0;
}

static int hp_on_status(llhttp_t *hp, const char *at, size_t len)
{
    struct gw_upconn *u = hp->data;
    if (!u->status_text.ptr)
        u->status_text.ptr = at;
    u->status_text.len += len;
    return 0;
}

static int hp_on_field(llhttp_t *hp, const char *at, size_t len)
{
    struct gw_upconn *u = hp->data;

    if (u->in_value || u->nhdr == 0) {
        if (u->nhdr == GW_UP_MAX_HEADERS) {
            u->too_many = 1;
            return -1;
        }
        u->hdr[u->nhdr].name.ptr = at;
        u->hdr[u->nhdr].name.len = 0;
        u->hdr[u->nhdr].value.ptr = NULL;
        u->hdr[u->nhdr].value.len = 0;
        u->nhdr++;
        u->in_value = 0;
    }
    for (size_t i = 0; i < len; i++) {
        /* a name is a token: llhttp (not strict) lets "Name :" through,
         * which must never reach the client (RFC 9112 5.1) */
        if (!is_tchar((unsigned char)at[i]))
            return -1;
    }
    u->hdr[u->nhdr - 1].name.len += len;
    return 0;
}

static int hp_on_value(llhttp_t *hp, const char *at, size_t len)
{
    struct gw_upconn *u = hp->data;
    struct gw_header *h;

    if (!u->nhdr)
        return -1;
    h = &u->hdr[u->nhdr - 1];
    if (!h->value.ptr)
        h->value.ptr = at;
    else if (at != h->value.ptr + h->value.len)
        return -1; /* obs-fold: the value is not one run of bytes (RFC 9112 5.2: 502) */
    h->value.len += len;
    u->in_value = 1;
    return 0;
}

static int hp_on_headers_complete(llhttp_t *hp)
{
    (void)hp;
    return HPE_PAUSED;
}

static int hp_on_body(llhttp_t *hp, const char *at, size_t len)
{
    struct gw_upconn *u = hp->data;

    if (!u->raw && u->c) {
        evbuffer_add(u->c->io.out, at, len);
        u->c->bytes_out += len;
    }
    return 0;
}

static int hp_on_message_complete(llhttp_t *hp)
{
    struct gw_upconn *u = hp->data;
    u->msg_done = 1;
    return HPE_PAUSED;
}

static const llhttp_settings_t hp_settings = {
    .on_status = hp_on_status,
    .on_header_field = hp_on_field,
    .on_header_value = hp_on_value,
    .on_headers_complete = hp_on_headers_complete,
    .on_body = hp_on_body,
    .on_message_complete = hp_on_message_complete,
};

static void up_unlink(struct gw_upconn *u)
{
    if (u->prev)
        u->prev->next = u->next;
    else
        u->w->upconns = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
}

static void up_free(struct gw_upconn *u)
{
    if (!u)
        return;
    if (!u->c && u->pool)
        up_idle_remove(u->pool, u->w->id, u->server, u);
    if (u->c && u->c->up == u)
        u->c->up = NULL;
    up_unlink(u);
    gw_io_close(&u->io);
    up_pool_release(u->pool);
    free(u);
}

static struct gw_upconn *up_connect(struct gw_worker *w, up_pool *pool, size_t server)
{
    struct gw_upconn *u = calloc(1, sizeof(*u));
    const struct sockaddr *sa;
    socklen_t salen;
    evutil_socket_t fd;
    int one = 1;

    if (!u)
        return NULL;
    u->w = w;
    u->pool = pool;
    u->server = server;
    up_pool_retain(pool);
    sa = up_server_sockaddr(pool, server, &salen);
    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (gw_io_init(&u->io, w->base, fd, 0, &gw_io_plain, NULL) < 0) {
        gw_io_close(&u->io); /* closes fd */
        goto fail;
    }
    u->next = w->upconns;
    if (w->upconns)
        w->upconns->prev = u;
    w->upconns = u;
    gw_io_setcb(&u->io, up_read_cb, up_write_cb, up_event_cb, u);
    u->io.lowat = GW_LWM;
    u->io.hiwat = GW_HWM;
    if (gw_io_connect(&u->io, sa, salen) < 0) {
        up_free(u);
        return NULL;
    }
    up_count_connect(pool, w->id, server);
    return u;
fail:
    up_pool_release(pool);
    free(u);
    return NULL;
}

/* ---- building the upstream request ---- */

static void add_path(struct gw_conn *c, struct obuf *o)
{
    const struct gw_request *rq = &c->rp.req;
    const struct adm_sroute *sr = c->sr;
    const char *p = rq->path;
    size_t n = rq->path_len;

    if (sr->rewrite) {
        for (size_t i = 0; i < sr->nrewrite; i++) {
            const struct adm_rw_part *part = &sr->rewrite[i];
            if (part->param < 0)
                ob_add(o, part->s, part->len);
            else if ((size_t)part->param < c->nparams && (size_t)part->param < c->params_cap)
                ob_add(o, c->params[part->param].value, c->params[part->param].len);
        }
        return;
    }
    if (sr->strip_len && n >= sr->strip_len && memcmp(p, sr->strip_prefix, sr->strip_len) == 0 &&
        (n == sr->strip_len || p[sr->strip_len] == '/' ||
         sr->strip_prefix[sr->strip_len - 1] == '/')) {
        p += sr->strip_len;
        n -= sr->strip_len;
        if (n == 0 || p[0] != '/') {
            ob_add(o, "/", 1);
        }
    }
    ob_add(o, p, n);
}

/* Writes the request head for the upstream into <out>. */
static void build_up_head(struct gw_conn *c, struct evbuffer *out)
{
    struct obuf ob, *o = &ob;
    const struct gw_request *rq = &c->rp.req;
    const struct adm_config *cfg = c->snap->cfg;
    int trusted =
        cfg->ntrusted_proxies && adm_cidr_match(cfg->trusted_proxies, cfg->ntrusted_proxies,
                                                (const struct sockaddr *)&c->peer);
    int have_xff = 0, have_proto = 0, have_xfh = 0, have_id = 0;
    int64_t mf = max_forwards(rq);

    ob_init(o, out);
    /* Sent at once only without a body (Content-Length: 0 is none): with
     * one, the head waits in the output until the body bytes already here
     * have passed the parser, so a request refused for its framing puts no
     * byte on the upstream. */
    if (c->up && (rq->body_kind == GW_BODY_NONE ||
                  (rq->body_kind == GW_BODY_LENGTH && rq->content_length == 0)))
        o->io = &c->up->io;

    ob_add(o, rq->method.ptr, rq->method.len);
    ob_add(o, " ", 1);
    if (rq->form == GW_TARGET_ASTERISK)
        ob_add(o, "*", 1);
    else
        add_path(c, o);
    if (rq->query.ptr) {
        ob_add(o, "?", 1);
        ob_add(o, rq->query.ptr, rq->query.len);
    }
    ob_add(o, " HTTP/1.1\r\n", 11);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct gw_header *h = &rq->headers[i];
        const struct gw_slice *n = &h->name;
        if (is_hop(n) || named_in(n, rq->connection, rq->nconnection))
            continue;
        switch (n->len) {
        case 4:
            if (name_is(n, "host") && rq->form == GW_TARGET_ABSOLUTE)
                continue;
            break;
        case 6:
            if (name_is(n, "expect"))
                continue;
            break;
        case 9:
            if (name_is(n, "forwarded") && !trusted)
                continue;
            break;
        case 12:
            if (name_is(n, "x-request-id")) {
                /* the client's id, unless empty, too long to echo whole or
                 * a repeat: the upstream and the client see the same one */
                if (have_id || !h->value.len || h->value.len >= sizeof(c->reqid))
                    continue;
                have_id = 1;
                c->reqid_len = h->value.len;
                memcpy(c->reqid, h->value.ptr, c->reqid_len);
            } else if (mf > 0 && name_is(n, "max-forwards")) {
                /* one hop less (RFC 9110 7.6.2) */
                ob_lit(o, "Max-Forwards: ");
                ob_u64(o, (uint64_t)mf - 1);
                ob_lit(o, "\r\n");
                continue;
            }
            break;
        case 14:
            if (name_is(n, "content-length"))
                continue;
            break;
        case 15:
            if (name_is(n, "x-forwarded-for")) {
                have_xff |= trusted;
                continue;
            }
            break;
        case 16:
            if (name_is(n, "x-forwarded-host")) {
                if (!trusted)
                    continue;
                have_xfh = 1;
            }
            break;
        case 17:
            if (name_is(n, "transfer-encoding"))
                continue;
            if (name_is(n, "x-forwarded-proto")) {
                if (!trusted)
                    continue;
                have_proto = 1;
            }
            break;
        default:
            break;
        }
        ob_add(o, n->ptr, n->len);
        ob_add(o, ": ", 2);
        ob_add(o, h->value.ptr, h->value.len);
        ob_add(o, "\r\n", 2);
    }
    if (rq->form == GW_TARGET_ABSOLUTE && rq->host.ptr)
        ob_field(o, "Host", 4, rq->host.ptr, rq->host.len);
    else if (!rq->host.ptr) /* HTTP/1.0 without Host: HTTP/1.1 needs one (as nginx) */
        ob_field(o, "Host", 4, c->upstream_addr, strlen(c->upstream_addr));
    /* a trusted proxy's list, every field of it in order (one list, RFC 9110
     * 5.3), then the peer */
    ob_add(o, "X-Forwarded-For: ", 17);
    for (size_t i = 0; have_xff && i < rq->nheaders; i++) {
        const struct gw_header *h = &rq->headers[i];
        if (h->value.len && name_is(&h->name, "x-forwarded-for")) {
            ob_add(o, h->value.ptr, h->value.len);
            ob_add(o, ", ", 2);
        }
    }
    ob_str(o, c->peer_ip);
    ob_lit(o, "\r\n");
    if (!have_proto)
        ob_lit(o, "X-Forwarded-Proto: http\r\n");
    if (!have_xfh && rq->host.ptr)
        ob_field(o, "X-Forwarded-Host", 16, rq->host.ptr, rq->host.len);
    if (!have_id) {
        if (!c->reqid_len)
            make_reqid(c);
        ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    }
    /* RFC 9110 7.6.3: a gateway MUST send Via in each request it forwards,
     * after those of earlier hops, with the protocol it received */
    ob_add(o, rq->version_minor ? "Via: 1.1 switchyard\r\n" : "Via: 1.0 switchyard\r\n", 21);
    if (rq->body_kind == GW_BODY_LENGTH) {
        ob_lit(o, "Content-Length: ");
        ob_u64(o, rq->content_length);
        ob_lit(o, "\r\n");
    } else if (rq->body_kind == GW_BODY_CHUNKED) {
        ob_lit(o, "Transfer-Encoding: chunked\r\n");
    }
    if (rq->upgrade) {
        const struct gw_header *up = gw_request_header(rq, "upgrade");
        ob_lit(o, "Connection: upgrade\r\n");
        if (up)
            ob_field(o, "Upgrade", 7, up->value.ptr, up->value.len);
    }
    ob_lit(o, "\r\n");
    ob_flush(o);
}

/* ---- streaming the request body up ---- */

static int body_up_cb(void *ctx, const char *data, size_t len)
{
    struct gw_conn *c = ctx;
    struct evbuffer *out;

    if (!c->up || !len)
        return 0;
    out = c->up->io.out;
    if (c->rp.req.body_kind == GW_BODY_CHUNKED) {
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

static void proxy_fail(struct gw_conn *c, int status);

/* Moves request body bytes from the client to the upstream, as far as the
 * upstream's output buffer allows. */
static void pump_body_up(struct gw_conn *c)
{
    struct evbuffer *in = c->io.in;

    while (!c->body_done && c->up) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (evbuffer_get_length(c->up->io.out) > GW_HWM) {
            gw_io_read(&c->io, 0);
            c->read_paused = 1;
            return;
        }
        if (!peek_first(in, &v)) {
            v.iov_base = (void *)"";
            v.iov_len = 0;
        }
        rc = gw_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, body_up_cb, c);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == GW_REQ_ERROR) {
            proxy_fail(c, c->rp.status);
            return;
        }
        if (rc == GW_REQ_DONE) {
            c->body_done = 1;
            if (c->rp.req.body_kind == GW_BODY_CHUNKED)
                evbuffer_add(c->up->io.out, "0\r\n\r\n", 5);
            break;
        }
        if (v.iov_len == 0) {
            if (c->eof) { /* half-closed before the end of its body */
                proxy_fail(c, 400);
                return;
            }
            /* need more bytes from the client */
            set_tmo(&c->tmo, cur_cfg(c)->timeouts.client_body_ms,
                    cur_cfg(c)->timeouts.client_idle_ms);
            gw_io_read(&c->io, 1);
            return;
        }
    }
    /* After the body, reading goes on: a pipelined next request waits in
     * the input buffer (bounded by the read watermark) and a client that
     * goes away is noticed. */
}

/* ---- the upstream response ---- */

/* At most one Transfer-Encoding, and only "chunked" (nginx's rule for
 * upstream responses): the client must frame the body exactly as llhttp
 * did, and "chunked, chunked" or "gzip, chunked" leave room for doubt. */
static int resp_framing_ok(const struct gw_upconn *u)
{
    int nte = 0;

    for (size_t i = 0; i < u->nhdr; i++) {
        const struct gw_header *h = &u->hdr[i];
        size_t vl = h->value.len;
        if (!name_is(&h->name, "transfer-encoding"))
            continue;
        while (vl && (h->value.ptr[vl - 1] == ' ' || h->value.ptr[vl - 1] == '\t'))
            vl--;
        if (++nte > 1 || vl != 7 || strncasecmp(h->value.ptr, "chunked", 7) != 0)
            return 0;
    }
    return 1;
}

/* RFC 9112 4: "HTTP/1.x" SP 3DIGIT SP; llhttp takes "HTTP/1.1 20 OK",
 * "HTTP/1.1 0200" and versions other than 1.x, none of which the client
 * must see. */
static int status_line_ok(const char *p, size_t n)
{
    return n >= 13 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1') && p[8] == ' ' &&
           p[9] >= '1' && p[9] <= '9' && p[10] >= '0' && p[10] <= '9' && p[11] >= '0' &&
           p[11] <= '9' && (p[12] == ' ' || p[12] == '\r');
}

/* Parses the response head from the start of <in>. 1: complete, with
 * *head_len bytes; 0: need more; -1: invalid. */
static int up_parse_head(struct gw_upconn *u, struct evbuffer *in, size_t *head_len)
{
    size_t n = evbuffer_get_length(in);
    const char *p;
    llhttp_errno_t err;

    if (n > GW_UP_HEAD_MAX)
        n = GW_UP_HEAD_MAX;
    p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
    if (!p)
        return n ? -1 : 0;
    llhttp_init(&u->hp, HTTP_RESPONSE, &hp_settings);
    u->hp.data = u;
    u->nhdr = 0;
    u->in_value = 0;
    u->too_many = 0;
    u->msg_done = 0;
    u->status_text.ptr = NULL;
    u->status_text.len = 0;
    err = llhttp_execute(&u->hp, p, n);
    if (err == HPE_PAUSED) {
        *head_len = (size_t)(llhttp_get_error_pos(&u->hp) - p);
        return status_line_ok(p, *head_len) && resp_framing_ok(u) ? 1 : -1;
    }
    if (err == HPE_OK)
        return n == GW_UP_HEAD_MAX ? -1 : 0;
    return -1;
}

static int resp_keepalive(const struct gw_upconn *u)
{
    if (u->hp.flags & F_CONNECTION_CLOSE)
        return 0;
    if (u->hp.http_major == 1 && u->hp.http_minor == 0)
        return (u->hp.flags & F_CONNECTION_KEEP_ALIVE) != 0;
    return 1;
}

/* Writes the response head to the client, dropping hop-by-hop fields. */
static void write_resp_head(struct gw_conn *c, struct gw_upconn *u, int upgrade, struct obuf *pend)
{
    struct obuf ob, *o = pend ? pend : &ob;
    struct gw_slice conn_tok[32];
    size_t ntok = 0;
    int have_id = 0, have_date = 0;

    size_t before;

    if (!pend)
        ob_init_io(o, &c->io);
    before = o->total;
    for (size_t i = 0; i < u->nhdr; i++) {
        const struct gw_header *h = &u->hdr[i];
        if (name_is(&h->name, "connection")) {
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
    ob_lit(o, "HTTP/1.1 ");
    ob_u64(o, (uint64_t)u->status);
    ob_lit(o, " ");
    if (u->status_text.ptr)
        ob_slice(o, &u->status_text);
    ob_lit(o, "\r\n");
    for (size_t i = 0; i < u->nhdr; i++) {
        const struct gw_header *h = &u->hdr[i];
        const char *v = h->value.ptr ? h->value.ptr : "";
        size_t vl = h->value.len;
        if (is_hop(&h->name) || named_in(&h->name, conn_tok, ntok))
            continue;
        if (!u->raw && name_is(&h->name, "transfer-encoding"))
            continue;
        if (name_is(&h->name, "x-request-id"))
            have_id = 1;
        else if (name_is(&h->name, "date"))
            have_date = 1;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        ob_field(o, h->name.ptr, h->name.len, v, vl);
    }
    if (!have_id && c->reqid_len)
        ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    if (!have_date && u->status >= 200) /* RFC 9110 6.6.1: a forwarder adds it */
        ob_add(o, c->w->date, c->w->date_len);
    if (upgrade) {
        const struct gw_header *up = NULL;
        for (size_t i = 0; i < u->nhdr; i++)
            if (name_is(&u->hdr[i].name, "upgrade"))
                up = &u->hdr[i];
        ob_lit(o, "Connection: upgrade\r\n");
        if (up)
            ob_field(o, "Upgrade", 7, up->value.ptr, up->value.len);
    } else {
        ob_connection(o, c);
    }
    ob_lit(o, "\r\n");
    if (!pend)
        ob_flush(o);
    c->bytes_out += o->total - before;
    c->resp_started = 1;
    c->status = u->status;
}

/* The response is complete: park or close the upstream connection and go
 * on with the client. */
static void resp_done(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;
    const struct adm_config *cfg = c->snap->cfg;

    if (u) {
        int reuse = u->keep && c->body_done && evbuffer_get_length(u->io.in) == 0 &&
                    evbuffer_get_length(u->io.out) == 0 && !c->w->draining;
        c->up = NULL;
        u->c = NULL;
        if (reuse && up_idle_put(u->pool, c->w->id, u->server, u) == 0) {
            const struct adm_upstream *ud = &cfg->upstreams[c->sr->upstream];
            struct timespec now;
            /* parked as it is (reading on, timeouts unchanged, so parking
             * re-arms nothing); the worker's tick closes it after the idle
             * timeout */
            clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
            u->idle_until = now.tv_sec * 1000 + now.tv_nsec / 1000000 + ud->idle_timeout_ms;
            u->reused = 1;
        } else {
            up_free(u);
        }
    }
    if (!c->body_done) /* the upstream answered before taking the whole body */
        c->keep = 0;
    request_done(c);
}

static void tunnel_start(struct gw_conn *c);

/* Feeds response body bytes through llhttp and on to the client. */
static void pump_body_down(struct gw_conn *c, struct gw_upconn *u, struct obuf *pend)
{
    struct evbuffer *in = u->io.in;
    struct evbuffer *out = c->io.out;

    if (pend && !u->raw) { /* decoded bodies go through the output: head first */
        ob_flush(pend);
        pend = NULL;
    }
#define PEND_FLUSH()                                                                               \
    do {                                                                                           \
        if (pend)                                                                                  \
            ob_flush(pend);                                                                        \
    } while (0)
    while (!u->msg_done) {
        struct evbuffer_iovec v;
        llhttp_errno_t err;
        size_t used;

        if (evbuffer_get_length(out) > GW_HWM) {
            gw_io_read(&u->io, 0);
            u->read_paused = 1;
            PEND_FLUSH();
            return;
        }
        if (!peek_first(in, &v)) {
            if (u->eof)
                break;
            PEND_FLUSH();
            return;
        }
        err = llhttp_execute(&u->hp, v.iov_base, v.iov_len);
        if (err == HPE_OK) {
            used = v.iov_len;
        } else if (err == HPE_PAUSED && u->msg_done) {
            used = (size_t)(llhttp_get_error_pos(&u->hp) - (const char *)v.iov_base);
        } else {
            gw_log(GW_LOG_WARN, "upstream %s: invalid response body (%s); closing client %s:%u",
                   up_server_address(u->pool, u->server), llhttp_errno_name(err), c->peer_ip,
                   c->peer_port);
            PEND_FLUSH();
            proxy_fail(c, 502);
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
    if (!u->msg_done) {
        /* the upstream closed and every byte it sent has gone on */
        if (llhttp_message_needs_eof(&u->hp)) {
            resp_done(c); /* a close-delimited body ends here */
            return;
        }
        gw_log(GW_LOG_WARN, "upstream %s closed mid-body; closing client %s:%u",
               up_server_address(u->pool, u->server), c->peer_ip, c->peer_port);
        proxy_fail(c, 502);
        return;
    }
    if (evbuffer_get_length(in))
        u->keep = 0; /* bytes after the response: never reuse */
    resp_done(c);
}

/* Handles what the upstream sent; returns after the client may be gone. */
static void up_handle(struct gw_conn *c, struct gw_upconn *u)
{
    struct evbuffer *in = u->io.in;
    struct obuf pend;

    ob_init_io(&pend, &c->io);

    while (!u->head_done) {
        size_t hl = 0;
        int rc = up_parse_head(u, in, &hl);
        if (rc == 0)
            return;
        if (rc < 0) {
            gw_log(GW_LOG_WARN, "upstream %s: invalid response head%s",
                   up_server_address(u->pool, u->server), u->too_many ? " (too many fields)" : "");
            proxy_fail(c, 502);
            return;
        }
        u->status = llhttp_get_status_code(&u->hp);
        if (u->status == 101) {
            if (!c->rp.req.upgrade) {
                proxy_fail(c, 502);
                return;
            }
            u->raw = 1;
            write_resp_head(c, u, 1, NULL);
            evbuffer_drain(in, hl);
            tunnel_start(c);
            return;
        }
        if (u->status >= 100 && u->status < 200) {
            /* interim: 100 is ours to send (we answered Expect), others
             * (103 Early Hints) go to HTTP/1.1 clients */
            if (u->status != 100 && !c->http10) {
                int keep = c->keep;
                u->raw = 1;
                c->keep = 1;
                write_resp_head(c, u, 0, NULL);
                c->keep = keep;
                c->resp_started = 0;
            }
            evbuffer_drain(in, hl);
            continue;
        }
        u->head_done = 1;
        u->keep = resp_keepalive(u);
        {
            double secs = elapsed_ms(&c->t_up) / 1e3;
            gw_count(&c->w->ctr.up[gw_hist_bucket(secs)], 1);
            gw_count(&c->w->ctr.up_sum_us, (uint64_t)(secs * 1e6));
        }
        if (c->is_head || u->status == 204 || u->status == 304) {
            write_resp_head(c, u, 0, NULL);
            evbuffer_drain(in, hl);
            if (evbuffer_get_length(in))
                u->keep = 0;
            resp_done(c);
            return;
        }
        if (llhttp_message_needs_eof(&u->hp)) {
            u->keep = 0;
            c->keep = 0; /* close-delimited: the client learns the end by the close */
        }
        u->raw = !(c->http10 && (u->hp.flags & F_CHUNKED));
        if (!u->raw)
            c->keep = 0; /* chunked to an HTTP/1.0 client: decode, end by close */
        write_resp_head(c, u, 0, &pend);
        evbuffer_drain(in, hl);
        llhttp_resume(&u->hp);
        /* llhttp ends an empty body (Content-Length: 0) only when it next
         * runs, and the next bytes may never come: run it on no input */
        if ((u->hp.flags & F_CONTENT_LENGTH) && u->hp.content_length == 0)
            llhttp_execute(&u->hp, "", 0);
    }
    pump_body_down(c, u, &pend);
}

/* Fails the proxied request: an error answer when nothing was sent yet,
 * else the client connection is closed (it cannot be told otherwise). */
static void proxy_fail(struct gw_conn *c, int status)
{
    struct gw_upconn *u = c->up;

    if (u) {
        c->up = NULL;
        u->c = NULL;
        up_free(u);
    }
    if (status >= 500)
        gw_count(&c->w->ctr.upstream_errors, 1);
    if (c->resp_started) {
        /* what the client already has goes out, then the close tells it
         * the response was cut short */
        c->keep = 0;
        request_done(c);
        return;
    }
    if (!c->body_done || status < 500)
        c->keep = 0;
    send_simple(c, status, NULL, 0);
    if (!c->keep) {
        request_done(c);
        return;
    }
    local_finish(c);
}

static int idempotent(const struct gw_request *rq)
{
    switch (rq->method_id) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_PUT:
    case HTTP_DELETE:
    case HTTP_OPTIONS:
    case HTTP_TRACE:
        return 1;
    default:
        return 0;
    }
}

static int proxy_send(struct gw_conn *c, size_t fresh_to);

static void up_read_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;

    (void)io;
    u->tmo.last_rd = now_ms();
    if (!u->c) { /* idle: an upstream must not speak unasked */
        up_free(u);
        return;
    }
    u->got_bytes = 1;
    up_handle(u->c, u);
}

static void up_write_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    if (c && c->read_paused && !c->body_done) {
        c->read_paused = 0;
        gw_io_read(&c->io, 1);
        pump_body_up(c);
    }
}

static void up_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    if (what & GW_IO_CONNECTED) {
        u->connected = 1;
        if (c) /* from now on writes are held to the response timeout too */
            set_tmo(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
        return;
    }
    if (!c) { /* idle connection closed or timed out */
        up_free(u);
        return;
    }
    if ((what & GW_IO_EOF) && u->head_done && !u->msg_done) {
        /* The body bytes still buffered go to the client first (it may be
         * slower than the upstream): then a close-delimited body ends, and
         * any other died mid-body (pump_body_down decides). */
        u->eof = 1;
        u->keep = 0;
        if (!u->read_paused)
            pump_body_down(c, u, NULL);
        return;
    }
    if (!u->head_done && !u->got_bytes && u->reused && !c->retried &&
        (what & (GW_IO_EOF | GW_IO_ERR)) && idempotent(&c->rp.req) &&
        c->rp.req.body_kind == GW_BODY_NONE) {
        /* a pooled connection that died before answering (the server
         * closed it while idle): once more, on a fresh connection to the
         * same server, which did not fail and keeps its turn in the
         * balancing */
        size_t server = u->server;
        c->retried = 1;
        c->up = NULL;
        u->c = NULL;
        up_free(u);
        if (proxy_send(c, server) < 0)
            proxy_fail(c, 502);
        return;
    }
    if (what & GW_IO_TIMEOUT) {
        if (!u->connected) {
            gw_log(GW_LOG_WARN, "upstream %s: connect timed out",
                   up_server_address(u->pool, u->server));
            proxy_fail(c, 504);
        } else if (!u->head_done) {
            gw_log(GW_LOG_WARN, "upstream %s: no response within %u ms",
                   up_server_address(u->pool, u->server), c->sr->timeout_ms);
            proxy_fail(c, 504);
        } else {
            proxy_fail(c, 504);
        }
        return;
    }
    if (u->head_done) {
        gw_log(GW_LOG_WARN, "upstream %s failed mid-response; closing client %s:%u",
               up_server_address(u->pool, u->server), c->peer_ip, c->peer_port);
    } else {
        int e = EVUTIL_SOCKET_ERROR();
        gw_log(GW_LOG_WARN, "upstream %s: %s", up_server_address(u->pool, u->server),
               (what & GW_IO_EOF) ? "closed before responding" : evutil_socket_error_to_string(e));
    }
    proxy_fail(c, 502);
}

/* Sends the request head on an idle or new connection to a balanced
 * server, or on a new connection to server <fresh_to> (SIZE_MAX: balance).
 * 0, or -1 when no connection could be started. */
static int proxy_send(struct gw_conn *c, size_t fresh_to)
{
    struct adm_snapshot *s = c->snap;
    up_pool *pool = s->pools[c->sr->upstream];
    const struct adm_config *cfg = s->cfg;
    size_t server = fresh_to != SIZE_MAX ? fresh_to : up_pick(pool, c->w->id);
    struct gw_upconn *u = fresh_to != SIZE_MAX ? NULL : up_idle_get(pool, c->w->id, server);

    if (!u) {
        u = up_connect(c->w, pool, server);
        if (!u)
            return -1;
        set_tmo(&u->tmo, c->sr->timeout_ms, cfg->timeouts.upstream_connect_ms);
    } else {
        set_tmo(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
    }
    up_count_request(pool, c->w->id, server);
    u->c = c;
    u->head_done = 0;
    u->msg_done = 0;
    u->got_bytes = 0;
    u->raw = 1;
    c->up = u;
    c->upstream_addr = up_server_address(pool, server);
    clock_gettime(CLOCK_MONOTONIC, &c->t_up);
    build_up_head(c, u->io.out);
    if (!u->reused)            /* a parked connection reads already */
        gw_io_read(&u->io, 1); /* from the moment it is connected */
    return 0;
}

static void proxy_start(struct gw_conn *c)
{
    c->st = CS_PROXY;
    if (proxy_send(c, SIZE_MAX) < 0) {
        gw_log(GW_LOG_ERROR, "cannot open an upstream connection: %s", strerror(errno));
        proxy_fail(c, 502);
        return;
    }
    if (c->rp.req.expect_continue && c->rp.req.body_kind != GW_BODY_NONE) {
        evbuffer_add(c->io.out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    pump_body_up(c);
}

/* ---- tunnels (101 Switching Protocols) ---- */

static void tunnel_move(struct gw_conn *c, struct gw_io *from, struct gw_io *to)
{
    size_t n = evbuffer_get_length(from->in);

    if (from == &c->io)
        c->bytes_in += n;
    else
        c->bytes_out += n;
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
    gw_io_read(&u->c->io, 1);
}

static void tunnel_up_event(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    (void)what;
    /* the upstream side ended: flush what the client still has to get */
    c->up = NULL;
    u->c = NULL;
    up_free(u);
    c->st = CS_CLOSING;
    if (evbuffer_get_length(c->io.out) == 0)
        conn_free(c);
}

static void tunnel_start(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    c->st = CS_TUNNEL;
    access_log(c);
    count_status(c);
    unpin(c); /* a tunnel needs no snapshot: swaps go on freely */
    gw_io_setcb(&u->io, tunnel_up_read, tunnel_up_write, tunnel_up_event, u);
    set_tmo(&u->tmo, 0, 0);
    set_tmo(&c->tmo, 0, 0);
    /* bytes already read on either side go first */
    tunnel_move(c, &u->io, &c->io);
    tunnel_move(c, &c->io, &u->io);
    gw_io_read(&u->io, 1);
    gw_io_read(&c->io, 1);
}

/* ---- requests ---- */

/* The head is complete: route it and act. */
/* What becomes of the request in c->rp under snapshot c->snap: routed
 * (c->sr, c->params), and the checks that decide whether it goes upstream.
 * request_start() acts on the verdict; the upstream-head fuzz probe too. */
enum verdict {
    V_CONNECT,  /* 501 */
    V_ASTERISK, /* OPTIONS *: every method */
    V_NOMEM,    /* no room for the parameters */
    V_ROUTER,   /* the router answers: m->status (404, 405, redirect, OPTIONS) */
    V_LOCAL,    /* a configured response or redirect: c->sr */
    V_MF0,      /* OPTIONS or TRACE with Max-Forwards 0: answered here */
    V_INVALID,  /* llhttp disagrees: c->rp.status */
    V_UPSTREAM, /* to c->sr's upstream */
};

static enum verdict decide(struct gw_conn *c, struct rt_match *m)
{
    const struct gw_request *rq = &c->rp.req;
    const struct adm_snapshot *s = c->snap;
    size_t need;

    if (rq->method_id == HTTP_CONNECT)
        return V_CONNECT;
    if (rq->form == GW_TARGET_ASTERISK)
        return V_ASTERISK;
    need = rt_table_max_params(s->rt);
    if (need > c->params_cap) {
        struct rt_param *p = realloc(c->params, need * sizeof(*p));
        if (!p)
            return V_NOMEM;
        c->params = p;
        c->params_cap = need;
    }
    rt_lookup_ctx(s->rt, c->w->rtctx, rq->method.ptr, rq->method.len, rq->host_name.ptr,
                  rq->host_name.len, rq->path, rq->path_len, c->params, c->params_cap, m);
    c->nparams = m->nparams;
    if (m->status != RT_HIT)
        return V_ROUTER;
    c->sr = rt_route_udata(m->route);
    if (c->sr->action != ADM_ACTION_UPSTREAM)
        return V_LOCAL;
    if (max_forwards(rq) == 0)
        return V_MF0;
    /* the second parser agrees before a byte goes upstream */
    return gw_req_confirm(&c->rp) < 0 ? V_INVALID : V_UPSTREAM;
}

static void request_start(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    const struct gw_request *rq = &c->rp.req;
    struct rt_match m;
    enum verdict v;
    struct adm_snapshot *s;

    c->snap = s = adm_swap_pin(&w->proc->swap, w->id);
    c->sr = NULL;
    c->up = NULL;
    c->body_done = rq->body_kind == GW_BODY_NONE;
    c->resp_started = 0;
    c->retried = 0;
    c->read_paused = 0;
    c->keep = rq->keep_alive;
    c->http10 = rq->version_minor == 0;
    c->is_head = rq->method_id == HTTP_HEAD;
    c->status = 0;
    c->reqid_len = 0;
    if (!c->body_done)
        set_tmo(&c->tmo, s->cfg->timeouts.client_body_ms, s->cfg->timeouts.client_idle_ms);

    v = decide(c, &m);
    if (v != V_UPSTREAM && rq->expect_continue && !c->body_done)
        c->keep = 0; /* no 100 Continue from us: the body may come or not, so the
                      * answer says the connection closes (RFC 9110 10.1.1) */
    switch (v) {
    case V_CONNECT:
        c->keep = 0;
        send_simple(c, 501, NULL, 0);
        request_done(c);
        return;
    case V_ASTERISK: {
        uint64_t all = rt_table_methods(s->rt);
        if (all == RT_ANY_METHOD)
            all = RT_M_GET | RT_M_POST | RT_M_PUT | RT_M_DELETE | RT_M_PATCH;
        send_allow(c, 200, all | RT_M_OPTIONS);
        local_finish(c);
        return;
    }
    case V_NOMEM:
        gw_count(&w->ctr.conns_dropped, 1);
        send_error_close(c, 503);
        return;
    case V_LOCAL:
        send_encoded(c, c->sr);
        local_finish(c);
        return;
    case V_MF0:
        answer_max_forwards_0(c);
        local_finish(c);
        return;
    case V_INVALID:
        c->is_head = 0;
        c->http10 = 0;
        send_error_close(c, c->rp.status);
        return;
    case V_UPSTREAM:
        proxy_start(c);
        return;
    case V_ROUTER:
        break;
    }
    switch (m.status) {
    case RT_OPTIONS_AUTO: /* 200 with Allow, OPTIONS included (fox) */
        send_allow(c, 200, m.allow);
        local_finish(c);
        return;
    case RT_NOT_ALLOWED:
        send_allow(c, 405, m.allow);
        local_finish(c);
        return;
    case RT_REDIRECT_301:
    case RT_REDIRECT_308: {
        /* Location: the twin path and the query as it came */
        struct obuf ob;
        simple_head(&ob, c, (int)m.status);
        ob_lit(&ob, "Location: ");
        ob_add(&ob, rq->path, m.slash > 0 ? rq->path_len : rq->path_len - 1);
        if (m.slash > 0)
            ob_lit(&ob, "/");
        if (rq->query.ptr) {
            ob_lit(&ob, "?");
            ob_slice(&ob, &rq->query);
        }
        ob_lit(&ob, "\r\n");
        simple_tail(&ob, c, (int)m.status);
        local_finish(c);
        return;
    }
    default:
        send_simple(c, 404, NULL, 0);
        local_finish(c);
        return;
    }
}

/* Reads request heads from the input while the connection is between
 * requests; stops at the first request that cannot finish right away. */
static void conn_process(struct gw_conn *c)
{
    struct evbuffer *in = c->io.in;

    while (c->st == CS_HEAD) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (evbuffer_get_length(c->io.out) > GW_HWM) {
            /* a client that pipelines faster than it reads: wait */
            gw_io_read(&c->io, 0);
            c->read_paused = 1;
            return;
        }
        if (!peek_first(in, &v)) {
            if (c->eof) /* half-closed: nothing more will come */
                close_when_flushed(c);
            return;
        }
        if (!c->head_started) {
            const struct adm_config *cfg = cur_cfg(c);
            c->head_started = 1;
            c->bytes_in = 0;
            c->bytes_out = 0;
            c->reqid_len = 0;
            clock_gettime(CLOCK_MONOTONIC, &c->t0);
            (void)cfg; /* the header deadline is armed only if the head is partial */
        }
        rc = gw_req_feed_head(&c->rp, v.iov_base, v.iov_len, &used);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == GW_REQ_AGAIN) {
            /* client_header_ms bounds the whole head, not each read (as
             * nginx): a client trickling bytes must not hold the connection */
            const struct adm_config *cfg = cur_cfg(c);
            double left = (double)cfg->timeouts.client_header_ms - elapsed_ms(&c->t0);
            if (left < 1) {
                c->is_head = 0;
                c->http10 = 0;
                send_error_close(c, 408);
                return;
            }
            set_tmo(&c->tmo, (unsigned)left, cfg->timeouts.client_idle_ms);
            continue;
        }
        if (rc == GW_REQ_ERROR) {
            c->is_head = 0;
            c->http10 = 0;
            send_error_close(c, c->rp.status);
            return;
        }
        request_start(c);
        if (c->st == CS_CLOSING)
            return; /* may already be freed: request_done frees at once */
    }
}

static void conn_read_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    c->tmo.last_rd = now_ms();
    switch (c->st) {
    case CS_HEAD:
        conn_process(c);
        break;
    case CS_LOCAL:
        discard_body(c);
        break;
    case CS_PROXY:
        if (!c->body_done)
            pump_body_up(c);
        break;
    case CS_TUNNEL:
        if (c->up)
            tunnel_move(c, &c->io, &c->up->io);
        break;
    case CS_CLOSING:
        evbuffer_drain(c->io.in, evbuffer_get_length(c->io.in));
        break;
    }
}

static void conn_write_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    if (c->st == CS_CLOSING) {
        if (evbuffer_get_length(c->io.out) == 0)
            conn_free(c);
        return;
    }
    if (c->st == CS_TUNNEL) {
        if (c->up)
            gw_io_read(&c->up->io, 1);
        return;
    }
    if (c->up && c->up->read_paused) {
        c->up->read_paused = 0;
        gw_io_read(&c->up->io, 1);
        up_handle(c, c->up);
        return;
    }
    if (c->st == CS_HEAD && c->read_paused) {
        c->read_paused = 0;
        gw_io_read(&c->io, 1);
        conn_process(c);
    }
}

static void conn_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    if (what & GW_IO_TIMEOUT) {
        if ((what & GW_IO_READING) && c->st == CS_HEAD && c->head_started) {
            c->is_head = 0;
            send_error_close(c, 408);
            return;
        }
        if ((what & GW_IO_READING) && c->st == CS_PROXY && !c->resp_started && !c->body_done) {
            proxy_fail(c, 408);
            return;
        }
        if ((what & GW_IO_READING) && (c->st == CS_PROXY || c->st == CS_LOCAL) && c->body_done) {
            /* only waiting for our own answer: the upstream's timeout rules */
            gw_io_read(&c->io, 1);
            return;
        }
        if (c->snap) {
            c->status = c->status ? c->status : 408;
            access_log(c);
            count_status(c);
        }
        conn_free(c);
        return;
    }
    if ((what & GW_IO_EOF) && c->st != CS_CLOSING && c->st != CS_TUNNEL &&
        (evbuffer_get_length(c->io.in) > 0 || (c->st == CS_PROXY && c->body_done))) {
        /* A half-close: the client sends nothing more, but what it sent
         * before is still answered, in order, then the connection closes
         * (request_done). Bytes still in the input buffer (pipelined
         * requests, a body not yet passed on because the upstream is not
         * connected or is slow to take it) are used up first: the read
         * callback runs on them, unless it waits for the output to drain
         * (conn_write_cb goes on then). A head or body that ends short
         * meets c->eof in conn_process(), the body pump or discard_body(). */
        c->eof = 1;
        gw_io_read(&c->io, 0);
        if (evbuffer_get_length(c->io.in) > 0 && !c->read_paused)
            gw_io_kick_read(&c->io);
        return;
    }
    if ((what & GW_IO_EOF) && (c->st == CS_CLOSING || c->st == CS_HEAD) &&
        evbuffer_get_length(c->io.out) > 0) {
        /* the client is done sending (a half-close): it still gets the
         * responses already queued, then the connection closes */
        c->eof = 1;
        c->st = CS_CLOSING;
        gw_io_read(&c->io, 0);
        return;
    }
    if (c->snap && c->st != CS_CLOSING) {
        c->status = c->status ? c->status : 499;
        access_log(c);
        count_status(c);
    }
    conn_free(c);
}

/* ---- connection life ---- */

/* The client's address, as text too. */
static void conn_set_peer(struct gw_conn *c, const struct sockaddr *sa, size_t salen)
{
    memcpy(&c->peer, sa, salen < sizeof(c->peer) ? salen : sizeof(c->peer));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, c->peer_ip, sizeof(c->peer_ip));
        c->peer_port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, c->peer_ip, sizeof(c->peer_ip));
        c->peer_port = ntohs(in6->sin6_port);
    }
}

/* The request parser's limits of a connection accepted under <cfg>. */
static void conn_limits(const struct adm_config *cfg, struct gw_req_limits *lim)
{
    gw_req_limits_default(lim);
    lim->max_request_line = cfg->limits.max_request_line;
    lim->max_header_bytes = cfg->limits.max_header_bytes;
    lim->max_headers = cfg->limits.max_headers;
    lim->max_body_bytes = cfg->limits.max_body_bytes;
    lim->merge_slashes = cfg->router.merge_slashes;
}

void gw_conn_accept(struct gw_worker *w, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    struct gw_conn *c = calloc(1, sizeof(*c));
    const struct adm_config *cfg =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    struct gw_req_limits lim;
    int one = 1;

    if (!c) {
        gw_count(&w->ctr.conns_dropped, 1);
        evutil_closesocket(fd);
        return;
    }
    c->w = w;
    conn_set_peer(c, sa, (size_t)salen);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn_limits(cfg, &lim);
    if (gw_req_parser_init(&c->rp, &lim) < 0) {
        evutil_closesocket(fd);
        goto fail;
    }
    if (gw_io_init(&c->io, w->base, fd, 1, &gw_io_plain, NULL) < 0)
        goto fail_io; /* closes fd */
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    gw_count(&w->ctr.conns_open, 1);
    gw_count(&w->ctr.conns_total, 1);
    c->st = CS_HEAD;
    gw_io_setcb(&c->io, conn_read_cb, conn_write_cb, conn_event_cb, c);
    c->io.lowat = GW_LWM;
    c->io.hiwat = GW_HWM;
    if (atomic_fetch_add_explicit(&w->proc->conns, 1, memory_order_relaxed) >=
        cfg->limits.max_connections) {
        /* another worker accepted the last place before this worker's
         * listener paused: this one waits, unread, for a place */
        c->parked = 1;
        w->nparked++;
        atomic_fetch_add_explicit(&w->proc->parked, 1, memory_order_relaxed);
    } else {
        set_tmo(&c->tmo, cfg->timeouts.client_idle_ms, cfg->timeouts.client_idle_ms);
        gw_io_read(&c->io, 1);
    }
    gw_worker_listen_update(w);
    return;
fail_io:
    gw_io_close(&c->io);
fail:
    gw_count(&w->ctr.conns_dropped, 1);
    gw_req_parser_free(&c->rp);
    free(c);
}

static void conn_free(struct gw_conn *c)
{
    struct gw_worker *w = c->w;

    if (c->parked) {
        w->nparked--;
        atomic_fetch_sub_explicit(&w->proc->parked, 1, memory_order_relaxed);
    }
    if (c->up) {
        struct gw_upconn *u = c->up;
        c->up = NULL;
        u->c = NULL;
        up_free(u);
    }
    unpin(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    gw_io_close(&c->io);
    gw_req_parser_free(&c->rp);
    free(c->params);
    free(c);
    w->nconns--;
    atomic_fetch_sub_explicit(&w->proc->conns, 1, memory_order_relaxed);
    gw_count(&w->ctr.conns_open, (uint64_t)-1);
    gw_conn_unpark(w);
    if (!w->listening && !w->draining)
        gw_worker_listen_update(w);
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

void gw_conn_unpark(struct gw_worker *w)
{
    const struct adm_config *cfg;
    struct gw_conn *c;

    if (!w->nparked || w->draining)
        return;
    cfg = atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    for (c = w->conns; c && w->nparked; c = c->next) {
        unsigned open = atomic_load_explicit(&w->proc->conns, memory_order_relaxed);
        unsigned parked = atomic_load_explicit(&w->proc->parked, memory_order_relaxed);

        if (open - parked >= cfg->limits.max_connections)
            return;
        if (!c->parked)
            continue;
        c->parked = 0;
        w->nparked--;
        atomic_fetch_sub_explicit(&w->proc->parked, 1, memory_order_relaxed);
        set_tmo(&c->tmo, cfg->timeouts.client_idle_ms, cfg->timeouts.client_idle_ms);
        gw_io_read(&c->io, 1);
    }
}

void gw_conn_close_idle(struct gw_worker *w)
{
    struct gw_conn *c = w->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->st == CS_HEAD && !c->head_started)
            conn_free(c);
    }
}

void gw_up_prune(struct gw_worker *w)
{
    struct adm_snapshot *s = atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);
    struct gw_upconn *u = w->upconns, *next;

    for (; u; u = next) {
        size_t i;
        next = u->next;
        if (u->c)
            continue;
        for (i = 0; i < s->npools && s->pools[i] != u->pool; i++)
            ;
        if (i == s->npools) /* idle, and its pool left the config */
            up_free(u);
    }
}

void gw_timeout_sweep(struct gw_worker *w)
{
    long long now = now_ms();
    struct gw_conn *c, *cn;
    struct gw_upconn *u, *un;

    /* a client's handler frees at most that client and its own upstream
     * connection (not in this list); an upstream's handler at most itself
     * and its client: the saved next stays valid */
    for (c = w->conns; c; c = cn) {
        short what;
        cn = c->next;
        if ((what = tmo_expired(&c->tmo, c->io.out, gw_io_reading(&c->io), now))) {
            if (what & GW_IO_READING)
                gw_io_read(&c->io, 0);
            else
                gw_io_write(&c->io, 0);
            conn_event_cb(&c->io, what, c);
        }
    }
    for (u = w->upconns; u; u = un) {
        short what;
        un = u->next;
        if (u->c && (what = tmo_expired(&u->tmo, u->io.out, gw_io_reading(&u->io), now))) {
            if (what & GW_IO_READING)
                gw_io_read(&u->io, 0);
            else
                gw_io_write(&u->io, 0);
            up_event_cb(&u->io, what, u);
        }
    }
}

void gw_up_sweep(struct gw_worker *w)
{
    struct gw_upconn *u = w->upconns, *next;
    struct timespec now;
    long long ms;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    ms = now.tv_sec * 1000 + now.tv_nsec / 1000000;
    for (; u; u = next) {
        next = u->next;
        if (!u->c && u->idle_until && u->idle_until <= ms)
            up_free(u);
    }
}

void gw_conn_free_all(struct gw_worker *w)
{
    while (w->conns)
        conn_free(w->conns);
    while (w->upconns)
        up_free(w->upconns);
}

#ifdef SY_UPHEAD_PROBE
/* For the upstream-head fuzz target only (compiled in with SY_UPHEAD_PROBE,
 * never into the gateway): what the request path does with the complete
 * request head data[0..n) from a client at <peer>, up to the upstream head.
 * Returns 0 with that head in <out> when the request would go upstream,
 * else the status Switchyard would answer with itself (the router's for
 * 404, 405, redirects and automatic OPTIONS), or -1 for an incomplete head. */
int gw_uphead_probe(const char *data, size_t n, struct adm_snapshot *s, const struct sockaddr *peer,
                    struct evbuffer *out)
{
    struct gw_worker *w = calloc(1, sizeof(*w));
    struct gw_conn *c = calloc(1, sizeof(*c));
    const struct adm_config *cfg = s->cfg;
    struct gw_req_limits lim;
    struct rt_match m;
    size_t used = 0;
    int rc, ret = -1;

    if (!w || !c)
        abort();
    c->w = w;
    conn_set_peer(c, peer,
                  peer->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                             : sizeof(struct sockaddr_in6));
    conn_limits(cfg, &lim);
    if (gw_req_parser_init(&c->rp, &lim) < 0)
        abort();
    rc = gw_req_feed_head(&c->rp, data, n, &used);
    c->snap = s;
    if (rc == GW_REQ_ERROR) {
        ret = c->rp.status;
    } else if (rc == GW_REQ_AGAIN) {
        ret = -1;
    } else {
        switch (decide(c, &m)) {
        case V_CONNECT:
            ret = 501;
            break;
        case V_ASTERISK:
        case V_MF0:
            ret = 200;
            break;
        case V_NOMEM:
            ret = 503;
            break;
        case V_ROUTER:
            ret = (int)m.status;
            break;
        case V_LOCAL:
            ret = (int)c->sr->status;
            break;
        case V_INVALID:
            ret = c->rp.status;
            break;
        case V_UPSTREAM:
            c->upstream_addr = "127.0.0.1:1";
            build_up_head(c, out);
            ret = 0;
            break;
        }
    }
    free(c->params);
    gw_req_parser_free(&c->rp);
    free(c);
    free(w);
    return ret;
}
#endif
