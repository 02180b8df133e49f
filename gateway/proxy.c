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
 * buffered whole.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/proxy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gateway/forward.h"
#include "gateway/local.h"
#include "gateway/upconn.h"

static int proxy_send(struct gw_conn *c, size_t fresh_to);
static void tunnel_start(struct gw_conn *c);

void gw_proxy_detach(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    if (u) {
        c->up = NULL;
        u->c = NULL;
        gw_upconn_free(u);
    }
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
        if (!h1_is_tchar((unsigned char)at[i]))
            return -1;
    }
    u->hdr[u->nhdr - 1].name.len += len;
    return 0;
}

static int hp_on_value(llhttp_t *hp, const char *at, size_t len)
{
    struct gw_upconn *u = hp->data;
    struct h1_header *h;

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

/* Moves request body bytes from the client to the upstream, as far as the
 * upstream's output buffer allows. */
void gw_proxy_body_up(struct gw_conn *c)
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
        if (!gw_peek_first(in, &v)) {
            v.iov_base = (void *)"";
            v.iov_len = 0;
        }
        rc = h1_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, body_up_cb, c);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == H1_REQ_ERROR) {
            gw_proxy_fail(c, c->rp.status);
            return;
        }
        if (rc == H1_REQ_DONE) {
            c->body_done = 1;
            if (c->rp.req.body_kind == H1_BODY_CHUNKED)
                evbuffer_add(c->up->io.out, "0\r\n\r\n", 5);
            break;
        }
        if (v.iov_len == 0) {
            if (c->eof) { /* half-closed before the end of its body */
                gw_proxy_fail(c, 400);
                return;
            }
            /* need more bytes from the client */
            gw_tmo_set(&c->tmo, gw_conn_cfg(c)->timeouts.client_body_ms,
                       gw_conn_cfg(c)->timeouts.client_idle_ms);
            gw_io_read(&c->io, 1);
            return;
        }
    }
    /* After the body, reading goes on: a pipelined next request waits in
     * the input buffer (bounded by the read watermark) and a client that
     * goes away is noticed. */
}

/* At most one Transfer-Encoding, and only "chunked" (nginx's rule for
 * upstream responses): the client must frame the body exactly as llhttp
 * did, and "chunked, chunked" or "gzip, chunked" leave room for doubt. */
static int resp_framing_ok(const struct gw_upconn *u)
{
    int nte = 0;

    for (size_t i = 0; i < u->nhdr; i++) {
        const struct h1_header *h = &u->hdr[i];
        size_t vl = h->value.len;
        if (!h1_name_is(&h->name, "transfer-encoding"))
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
static void write_resp_head(struct gw_conn *c, struct gw_upconn *u, int upgrade,
                            struct gw_obuf *pend)
{
    struct gw_obuf ob, *o = pend ? pend : &ob;
    struct h1_slice conn_tok[32];
    size_t ntok = 0;
    int have_id = 0, have_date = 0;

    size_t before;

    if (!pend)
        gw_ob_init_io(o, &c->io);
    before = o->total;
    for (size_t i = 0; i < u->nhdr; i++) {
        const struct h1_header *h = &u->hdr[i];
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
    gw_ob_u64(o, (uint64_t)u->status);
    gw_ob_lit(o, " ");
    if (u->status_text.ptr)
        gw_ob_slice(o, &u->status_text);
    gw_ob_lit(o, "\r\n");
    for (size_t i = 0; i < u->nhdr; i++) {
        const struct h1_header *h = &u->hdr[i];
        const char *v = h->value.ptr ? h->value.ptr : "";
        size_t vl = h->value.len;
        if (h1_is_hop_field(&h->name) || gw_forward_named_in(&h->name, conn_tok, ntok))
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
    if (!have_id && c->reqid_len)
        gw_ob_field(o, "X-Request-Id", 12, c->reqid, c->reqid_len);
    if (!have_date && u->status >= 200) /* RFC 9110 6.6.1: a forwarder adds it */
        gw_ob_add(o, c->w->date, c->w->date_len);
    if (upgrade) {
        const struct h1_header *up = NULL;
        for (size_t i = 0; i < u->nhdr; i++)
            if (h1_name_is(&u->hdr[i].name, "upgrade"))
                up = &u->hdr[i];
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
    c->resp_started = 1;
    c->status = u->status;
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
    if (!c->body_done) /* the upstream answered before taking the whole body */
        c->keep = 0;
    gw_conn_request_done(c);
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
        if (!gw_peek_first(in, &v)) {
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
    if (!u->msg_done) {
        /* the upstream closed and every byte it sent has gone on */
        if (llhttp_message_needs_eof(&u->hp)) {
            resp_done(c); /* a close-delimited body ends here */
            return;
        }
        gw_log(GW_LOG_WARN, "upstream %s closed mid-body; closing client %s:%u",
               up_server_address(u->pool, u->server), c->peer_ip, c->peer_port);
        gw_proxy_fail(c, 502);
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
    struct gw_obuf pend;

    gw_ob_init_io(&pend, &c->io);

    while (u->st == GW_UP_WAITING) {
        size_t hl = 0;
        int rc = up_parse_head(u, in, &hl);
        if (rc == 0)
            return;
        if (rc < 0) {
            gw_log(GW_LOG_WARN, "upstream %s: invalid response head%s",
                   up_server_address(u->pool, u->server), u->too_many ? " (too many fields)" : "");
            gw_proxy_fail(c, 502);
            return;
        }
        u->status = llhttp_get_status_code(&u->hp);
        if (u->status == 101) {
            if (!c->rp.req.upgrade) {
                gw_proxy_fail(c, 502);
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
        gw_upconn_set_state(u, GW_UP_BODY);
        u->keep = resp_keepalive(u);
        {
            double secs = gw_elapsed_ms(&c->t_up) / 1e3;
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
void gw_proxy_fail(struct gw_conn *c, int status)
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
    if (!c->body_done || status < 500)
        c->keep = 0;
    gw_local_simple(c, status, NULL, 0);
    if (!c->keep) {
        gw_conn_request_done(c);
        return;
    }
    gw_local_finish(c);
}

static void up_read_cb(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;

    (void)io;
    u->tmo.last_rd = gw_now_ms();
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
        gw_proxy_body_up(c);
    }
}

static void up_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;
    struct gw_conn *c = u->c;

    (void)io;
    if (what & GW_IO_CONNECTED) {
        gw_upconn_set_state(u, GW_UP_WAITING);
        /* from now on writes are held to the response timeout too */
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
        return;
    }
    if ((what & GW_IO_EOF) && u->st == GW_UP_BODY && !u->msg_done) {
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
        gw_proxy_detach(c);
        if (proxy_send(c, server) < 0)
            gw_proxy_fail(c, 502);
        return;
    }
    if (what & GW_IO_TIMEOUT) {
        if (u->st == GW_UP_CONNECTING) {
            gw_log(GW_LOG_WARN, "upstream %s: connect timed out",
                   up_server_address(u->pool, u->server));
            gw_proxy_fail(c, 504);
        } else if (u->st == GW_UP_WAITING) {
            gw_log(GW_LOG_WARN, "upstream %s: no response within %u ms",
                   up_server_address(u->pool, u->server), c->sr->timeout_ms);
            gw_proxy_fail(c, 504);
        } else {
            gw_proxy_fail(c, 504);
        }
        return;
    }
    if (u->st == GW_UP_BODY) {
        gw_log(GW_LOG_WARN, "upstream %s failed mid-response; closing client %s:%u",
               up_server_address(u->pool, u->server), c->peer_ip, c->peer_port);
    } else {
        int e = EVUTIL_SOCKET_ERROR();
        gw_log(GW_LOG_WARN, "upstream %s: %s", up_server_address(u->pool, u->server),
               (what & GW_IO_EOF) ? "closed before responding" : evutil_socket_error_to_string(e));
    }
    gw_proxy_fail(c, 502);
}

/* Sends the request head on an idle or new connection to a balanced
 * server, or on a new connection to server <fresh_to> (SIZE_MAX: balance).
 * 0, or -1 when no connection could be started. */
static int proxy_send(struct gw_conn *c, size_t fresh_to)
{
    struct adm_snapshot *s = c->snap;
    const struct h1_request *rq = &c->rp.req;
    up_pool *pool = s->pools[c->sr->upstream];
    const struct adm_config *cfg = s->cfg;
    size_t server = fresh_to != SIZE_MAX ? fresh_to : up_pick(pool, c->w->id);
    struct gw_upconn *u = fresh_to != SIZE_MAX ? NULL : gw_upconn_take(c->w, pool, server);
    struct gw_forward f;
    struct gw_obuf ob;

    if (!u) {
        u = gw_upconn_connect(c->w, pool, server);
        if (!u)
            return -1;
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, cfg->timeouts.upstream_connect_ms);
    } else {
        gw_tmo_set(&u->tmo, c->sr->timeout_ms, c->sr->timeout_ms);
    }
    gw_io_setcb(&u->io, up_read_cb, up_write_cb, up_event_cb, u);
    up_count_request(pool, c->w->id, server);
    u->c = c;
    u->msg_done = 0;
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
    /* Sent at once only without a body (Content-Length: 0 is none): with
     * one, the head waits in the output until the body bytes already here
     * have passed the parser, so a request refused for its framing puts no
     * byte on the upstream. */
    if (rq->body_kind == H1_BODY_NONE ||
        (rq->body_kind == H1_BODY_LENGTH && rq->content_length == 0))
        gw_ob_init_io(&ob, &u->io);
    else
        gw_ob_init(&ob, u->io.out);
    gw_forward_head(&f, &ob);
    gw_ob_flush(&ob);
    if (!u->reused)            /* a parked connection reads already */
        gw_io_read(&u->io, 1); /* from the moment it is connected */
    return 0;
}

void gw_proxy_start(struct gw_conn *c)
{
    gw_conn_set_state(c, GW_CONN_PROXY);
    if (proxy_send(c, SIZE_MAX) < 0) {
        gw_log(GW_LOG_ERROR, "cannot open an upstream connection: %s", strerror(errno));
        gw_proxy_fail(c, 502);
        return;
    }
    if (c->rp.req.expect_continue && c->rp.req.body_kind != H1_BODY_NONE) {
        evbuffer_add(c->io.out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    gw_proxy_body_up(c);
}

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
    gw_proxy_detach(c);
    gw_conn_set_state(c, GW_CONN_CLOSING);
    if (evbuffer_get_length(c->io.out) == 0)
        gw_conn_free(c);
}

static void tunnel_start(struct gw_conn *c)
{
    struct gw_upconn *u = c->up;

    gw_conn_set_state(c, GW_CONN_TUNNEL);
    gw_upconn_set_state(u, GW_UP_TUNNEL);
    gw_conn_account(c);
    gw_conn_unpin(c); /* a tunnel needs no snapshot: swaps go on freely */
    gw_io_setcb(&u->io, tunnel_up_read, tunnel_up_write, tunnel_up_event, u);
    gw_tmo_set(&u->tmo, 0, 0);
    gw_tmo_set(&c->tmo, 0, 0);
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
        gw_io_read(&u->io, 1);
        return;
    }
    if (u->read_paused) {
        u->read_paused = 0;
        gw_io_read(&u->io, 1);
        up_handle(c, u);
    }
}
