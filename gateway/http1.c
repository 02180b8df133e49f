/*
 * http1.c - the HTTP/1.1 codec on top of a client connection: reads
 * request heads (pipelined ones too), parses them, and hands each to the
 * request entry (gw_req_start, serve.c) in the connection's one request;
 * writes that request's answer as HTTP/1.1 bytes and reads its body
 * through the parser (struct gw_codec); the connection's read, write and
 * event callbacks, which go on with whatever its state says is under way
 * (a head, a body read away, a body going up, a tunnel, the last flush,
 * the lingering close).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/conn.h"
#include "gateway/forward.h"
#include "gateway/h2.h"
#include "gateway/local.h"
#include "gateway/proxy.h"
#include "gateway/tunnel.h"
#include "admin/http1/status.h"

/* Detaches the upstream connection, if any, then frees <c>. */
static void conn_close(struct gw_conn *c)
{
    gw_proxy_detach(&c->req);
    gw_conn_free(c);
}

/* ---- the codec: a request's answer as HTTP/1.1 bytes, its body read
 * through the parser ---- */

static void h1_head_begin(struct gw_req *r, struct gw_obuf *o, int status,
                          const struct h1_slice *reason)
{
    char line[13] = {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', '0', '0', '0', ' '};

    gw_ob_init_io(o, &r->c->io);
    /* a status is three digits (the parsers and the config see to it) */
    line[9] = (char)('0' + status / 100 % 10);
    line[10] = (char)('0' + status / 10 % 10);
    line[11] = (char)('0' + status % 10);
    gw_ob_add(o, line, sizeof(line));
    if (!reason)
        gw_ob_str(o, h1_status_reason(status));
    else if (reason->len)
        gw_ob_slice(o, reason);
    gw_ob_lit(o, "\r\n");
}

static void h1_head_end(struct gw_req *r, struct gw_obuf *o, unsigned flags)
{
    /* an upgrade's Connection field came with its fields; an interim
     * head says only a close the connection will see whatever the
     * request asked (a drain, or its listener gone) */
    struct gw_conn *c = r->c;

    if (flags & GW_HEAD_INTERIM) {
        if (!(flags & GW_HEAD_CONTINUE) && (c->w->draining || (c->l && c->l->closed)))
            gw_ob_lit(o, "Connection: close\r\n");
    } else if (!(flags & GW_HEAD_UPGRADE)) {
        gw_conn_ob_connection(o, c);
        if (r->chunk_out && !(flags & GW_HEAD_NOBODY))
            gw_ob_lit(o, "Transfer-Encoding: chunked\r\n");
    }
    gw_ob_lit(o, "\r\n");
    if (flags & (GW_HEAD_INTERIM | GW_HEAD_NOBODY))
        gw_ob_flush(o);
}

/* A body the codec frames (r->chunk_out): a chunk's size line before
 * its <n> bytes; h1_chunk_end after them. */
static void h1_chunk_begin(struct gw_req *r, size_t n)
{
    char sz[24];
    int k = snprintf(sz, sizeof(sz), "%zx\r\n", n);

    evbuffer_add(r->c->io.out, sz, (size_t)k);
}

static void h1_chunk_end(struct gw_req *r)
{
    evbuffer_add(r->c->io.out, "\r\n", 2);
}

static void h1_data_move(struct gw_req *r, struct evbuffer *src, size_t n, struct gw_obuf *pend)
{
    struct evbuffer *out = r->c->io.out;

    if (r->chunk_out) { /* never with a head pending: the head went first */
        if (!n)
            return;
        if (pend)
            gw_ob_flush(pend);
        h1_chunk_begin(r, n);
        evbuffer_remove_buffer(src, out, n);
        h1_chunk_end(r);
        return;
    }

    if (pend) {
        if (!pend->out) /* nothing in it yet this time */
            gw_ob_init_io(pend, &r->c->io);
        if (evbuffer_get_length(out) == 0 && pend->n + n <= sizeof(pend->b)) {
            /* small bodies leave with the head in one write */
            evbuffer_remove(src, pend->b + pend->n, n);
            pend->n += n;
            pend->total += n;
            return;
        }
        gw_ob_flush(pend);
    }
    evbuffer_remove_buffer(src, out, n);
}

static void h1_data(struct gw_req *r, const char *p, size_t n)
{
    if (r->chunk_out && !n)
        return;
    if (r->chunk_out)
        h1_chunk_begin(r, n);
    evbuffer_add(r->c->io.out, p, n);
    if (r->chunk_out)
        h1_chunk_end(r);
}

static void h1_end(struct gw_req *r, const char *trailers, size_t trailers_len)
{
    /* a body passed framed carried its trailers; a decoded one to an
     * HTTP/1.0 client has nowhere to put them; one the codec frames ends
     * with its last chunk and them */
    if (!r->chunk_out)
        return;
    evbuffer_add(r->c->io.out, "0\r\n", 3);
    if (trailers_len)
        evbuffer_add(r->c->io.out, trailers, trailers_len);
    evbuffer_add(r->c->io.out, "\r\n", 2);
    r->chunk_out = 0;
}

static void h1_abort(struct gw_req *r)
{
    r->keep = 0; /* the close tells the client the answer was cut short */
}

static size_t h1_out_pending(const struct gw_req *r)
{
    return evbuffer_get_length(r->c->io.out);
}

/* Passes the first run of the client's buffered bytes through the body
 * parser, its decoded bytes to <cb>. A client that half-closed before the
 * end of its body is answered 400. */
static int h1_body_feed(struct gw_req *r, h1_req_body_cb cb, void *ctx)
{
    struct gw_conn *c = r->c;
    struct evbuffer *in = c->io.in;
    struct evbuffer_iovec v;
    size_t used = 0;
    int rc;

    if (!gw_peek_first(in, &v)) {
        v.iov_base = (void *)"";
        v.iov_len = 0;
    }
    rc = h1_req_feed_body(&c->rp, v.iov_base, v.iov_len, &used, cb, ctx);
    evbuffer_drain(in, used);
    r->bytes_in += used;
    if (rc == H1_REQ_ERROR) {
        gw_proxy_fail(r, c->rp.status);
        return GW_FEED_FAILED;
    }
    if (rc == H1_REQ_DONE) {
        r->body_done = 1;
        return GW_FEED_DONE;
    }
    if (v.iov_len)
        return GW_FEED_MORE;
    if (c->eof) { /* half-closed before the end of its body */
        gw_proxy_fail(r, 400);
        return GW_FEED_FAILED;
    }
    /* need more bytes from the client */
    gw_tmo_set(&c->tmo, gw_conn_cfg(c)->timeouts.client_body_ms,
               gw_conn_cfg(c)->timeouts.client_idle_ms);
    gw_io_read(&c->io, 1);
    return GW_FEED_WAIT;
}

static void h1_body_read(struct gw_req *r, int on)
{
    if (on && r->c->read_paused) /* not read meanwhile by our choice: the body
                                  * timeout counts from now, not from the head */
        r->c->tmo.last_rd = gw_now_ms();
    gw_io_read(&r->c->io, on);
    r->c->read_paused = !on;
}

static void h1_phase(struct gw_req *r, enum gw_req_phase ph)
{
    if (ph == GW_REQ_HEAD && !r->body_done) { /* the pinned snapshot's body timeout */
        const struct adm_config *cfg = r->snap->cfg;
        gw_tmo_set(&r->c->tmo, cfg->timeouts.client_body_ms, cfg->timeouts.client_idle_ms);
    } else if ((ph == GW_REQ_PROXY || ph == GW_REQ_WAIT) && r->c->st != GW_CONN_PROXY) {
        /* a policy's wait is spent there too, its reading stopped: no
         * next head is parsed from the body's bytes, and the request then
         * proxies (or answers) from where it is */
        gw_conn_set_state(r->c, GW_CONN_PROXY);
    } else if (ph == GW_REQ_LOCAL)
        gw_conn_set_state(r->c, GW_CONN_LOCAL);
}

static void h1_done(struct gw_req *r)
{
    gw_conn_request_done(r->c);
}

const struct gw_codec gw_http1_codec = {
    .proto = "HTTP/1.1",
    .http1 = 1,
    .head_begin = h1_head_begin,
    .head_end = h1_head_end,
    .data_move = h1_data_move,
    .data = h1_data,
    .end = h1_end,
    .abort = h1_abort,
    .out_pending = h1_out_pending,
    .body_feed = h1_body_feed,
    .body_read = h1_body_read,
    .phase = h1_phase,
    .done = h1_done,
};

/* Reads request heads from the input while the connection is between
 * requests; stops at the first request that cannot finish right away. */
static void conn_process(struct gw_conn *c)
{
    struct evbuffer *in = c->io.in;

    while (c->st == GW_CONN_IDLE || c->st == GW_CONN_HEAD) {
        struct evbuffer_iovec v;
        size_t used = 0;
        int rc;

        if (evbuffer_get_length(c->io.out) > GW_HWM) {
            /* a client that pipelines faster than it reads: wait */
            gw_io_read(&c->io, 0);
            c->read_paused = 1;
            return;
        }
        if (!gw_peek_first(in, &v)) {
            if (c->eof) /* half-closed: nothing more will come */
                gw_conn_close_when_flushed(c);
            return;
        }
        if (c->st == GW_CONN_IDLE) {
            if (!c->rp.mem && gw_conn_parser_mem(c) < 0) {
                gw_conn_close_when_flushed(c);
                return;
            }
            /* the header deadline is armed only if the head is partial */
            gw_conn_set_state(c, GW_CONN_HEAD);
            c->req.bytes_in = 0;
            c->req.bytes_out = 0;
            c->req.head_out = 0;
            c->req.reqid_len = 0;
            c->req.cip_state = GW_CIP_UNKNOWN;
            clock_gettime(CLOCK_MONOTONIC, &c->req.t0);
        }
        rc = h1_req_feed_head(&c->rp, v.iov_base, v.iov_len, &used);
        evbuffer_drain(in, used);
        c->req.bytes_in += used;
        if (rc == H1_REQ_AGAIN) {
            /* client_header_ms bounds the whole head, not each read (as
             * nginx), and a first head from the accept on: a client
             * trickling bytes must not hold the connection */
            const struct adm_config *cfg = gw_conn_cfg(c);
            double left = (double)cfg->timeouts.client_header_ms -
                          (c->admitted_ms ? (double)(gw_now_ms() - c->admitted_ms)
                                          : gw_elapsed_ms(&c->req.t0));
            if (left < 1) {
                c->req.is_head = 0;
                c->req.http10 = 0;
                gw_local_error_close(&c->req, 408);
                return;
            }
            gw_tmo_set(&c->tmo, (unsigned)left, cfg->timeouts.client_idle_ms);
            gw_conn_pending_check(c); /* reclaimable as a first head is */
            continue;
        }
        if (rc == H1_REQ_ERROR) {
            c->req.is_head = 0;
            c->req.http10 = 0;
            gw_local_error_close(&c->req, c->rp.status);
            return;
        }
        c->read_paused = 0;
        gw_req_start(&c->req);
        if (c->st == GW_CONN_CLOSING)
            return; /* may already be freed: request_done frees at once */
    }
}

static void conn_read_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    c->tmo.last_rd = gw_now_ms();
    switch (c->st) {
    case GW_CONN_PARKED: /* not read */
        break;
    case GW_CONN_IDLE:
    case GW_CONN_HEAD:
        conn_process(c);
        break;
    case GW_CONN_LOCAL:
        gw_local_discard(&c->req);
        break;
    case GW_CONN_PROXY:
        if (!c->req.body_done)
            gw_proxy_body_up(&c->req);
        break;
    case GW_CONN_TUNNEL:
        gw_tunnel_up(&c->req);
        break;
    case GW_CONN_CLOSING:
        evbuffer_drain(c->io.in, evbuffer_get_length(c->io.in));
        break;
    case GW_CONN_LINGER: /* never served: read and dropped */
        if (gw_conn_linger_read(c, c->tmo.last_rd) < 0)
            conn_close(c);
        break;
    }
}

static void conn_write_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    if (c->st == GW_CONN_CLOSING) {
        if (evbuffer_get_length(c->io.out) > 0)
            return;
        gw_proxy_detach(&c->req);
        if (!c->linger || gw_conn_linger(c) < 0)
            gw_conn_free(c);
        return;
    }
    if (c->req.up || c->req.ups) { /* the response (or a tunnel) waits for this output to drain */
        gw_proxy_drained(&c->req);
        return;
    }
    if (c->st == GW_CONN_IDLE && c->queue == GW_CONN_Q_NONE)
        gw_conn_idle_check(c); /* the last response drained: idle now */
    else if (c->st == GW_CONN_HEAD && c->queue == GW_CONN_Q_NONE)
        gw_conn_pending_check(c); /* or part-way through its next head */
    if ((c->st == GW_CONN_IDLE || c->st == GW_CONN_HEAD) && c->read_paused) {
        c->read_paused = 0;
        gw_io_read(&c->io, 1);
        conn_process(c);
    }
}

static void conn_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_conn *c = arg;

    (void)io;
    if (c->st == GW_CONN_LINGER) { /* its EOF, an error, or GW_LINGER_IDLE_MS of quiet */
        conn_close(c);
        return;
    }
    if ((what & GW_IO_TIMEOUT) && !gw_io_open(&c->io))
        gw_tls_count_timeout(&c->io); /* in its handshake */
    if (what & GW_IO_TIMEOUT) {
        if ((what & GW_IO_READING) && c->st == GW_CONN_HEAD) {
            c->req.is_head = 0;
            gw_local_error_close(&c->req, 408);
            return;
        }
        if ((what & GW_IO_READING) && c->st == GW_CONN_PROXY && !c->req.resp_started &&
            !c->req.body_done) {
            gw_proxy_fail(&c->req, 408);
            return;
        }
        if ((what & GW_IO_READING) && (c->st == GW_CONN_PROXY || c->st == GW_CONN_LOCAL) &&
            c->req.body_done) {
            /* only waiting for our own answer: the upstream's timeout rules */
            gw_io_read(&c->io, 1);
            return;
        }
        if (c->req.snap) {
            c->req.status = c->req.status ? c->req.status : 408;
            gw_req_account(&c->req);
        }
        conn_close(c);
        return;
    }
    if ((what & GW_IO_EOF) && c->st != GW_CONN_CLOSING && c->st != GW_CONN_TUNNEL &&
        (evbuffer_get_length(c->io.in) > 0 || (c->st == GW_CONN_PROXY && c->req.body_done))) {
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
    if ((what & GW_IO_EOF) &&
        (c->st == GW_CONN_CLOSING || c->st == GW_CONN_IDLE || c->st == GW_CONN_HEAD) &&
        evbuffer_get_length(c->io.out) > 0) {
        /* the client is done sending (a half-close): it still gets the
         * responses already queued, then the connection closes */
        c->eof = 1;
        gw_conn_set_state(c, GW_CONN_CLOSING);
        gw_io_read(&c->io, 0);
        return;
    }
    if (c->req.snap && c->st != GW_CONN_CLOSING) {
        c->req.status = c->req.status ? c->req.status : 499;
        gw_req_account(&c->req);
    }
    conn_close(c);
}

/* The first read of a connection that may speak HTTP/2: HTTP/2 takes it
 * (and its bytes), or it is ours from now on; the HTTP/2 preface begun
 * waits for more bytes. */
static void first_read_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;

    switch (gw_h2_sniff(c)) {
    case GW_H2_YES: /* <c> is HTTP/2's, and may be gone */
    case GW_H2_WAIT:
        return;
    case GW_H2_NO:
        break;
    }
    gw_io_setcb(io, conn_read_cb, conn_write_cb, conn_event_cb, c);
    conn_read_cb(io, c);
}

struct gw_conn *gw_http1_accept(struct gw_worker *w, struct gw_listener *l, evutil_socket_t fd,
                                const struct sockaddr *sa, int salen, int parked,
                                const struct gw_io_ops *ops, void *xprt, int h2)
{
    struct gw_conn *c =
        gw_conn_new(w, l, fd, sa, salen, parked, ops, xprt, h2 ? first_read_cb : conn_read_cb,
                    conn_write_cb, conn_event_cb);

    if (c)
        gw_req_init(&c->req, c, &gw_http1_codec, NULL, &c->rp);
    return c;
}
