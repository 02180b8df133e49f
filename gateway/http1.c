/*
 * http1.c - the HTTP/1.1 handler on top of a client connection: reads
 * request heads (pipelined ones too), parses them, has gw_forward_decide()
 * say where each goes, and dispatches it to proxy.c or local.c; the
 * connection's read, write and event callbacks, which go on with whatever
 * its state says is under way (a head, a body read away, a body going up,
 * a tunnel, the last flush, the lingering close).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/conn.h"
#include "gateway/forward.h"
#include "gateway/local.h"
#include "gateway/proxy.h"

/* Detaches the upstream connection, if any, then frees <c>. */
static void conn_close(struct gw_conn *c)
{
    gw_proxy_detach(c);
    gw_conn_free(c);
}

/* What the connection decides before the route does: a redirect_https
 * listener sends every request to https; on a listener that verifies
 * clients, a request must be for a name of the certificate its handshake
 * picked, since another one would skip that name's client check (421, RFC
 * 9110 15.5.20; nginx's CVE-2025-23419). GW_V_UPSTREAM: neither. */
static enum gw_verdict tls_verdict(struct gw_conn *c)
{
    const struct h1_request *rq = &c->rp.req;
    const struct adm_listener *al = gw_conn_listener(c);
    const struct adm_tls_ctx *t = gw_tls_ctx(&c->io);

    if (al && al->redirect_https && !gw_io_is_tls(&c->io))
        return GW_V_HTTPS;
    if (t && adm_tls_ctx_client_auth(t) && rq->host_name.ptr &&
        adm_tls_ctx_group(t, rq->host_name.ptr, rq->host_name.len) != gw_tls_group(&c->io))
        return GW_V_MISDIRECTED;
    return GW_V_UPSTREAM;
}

static void request_start(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    const struct h1_request *rq = &c->rp.req;
    struct rt_match m;
    enum gw_verdict v;
    struct adm_snapshot *s;
    size_t need;

    c->snap = s = adm_swap_pin(&w->proc->swap, w->id);
    c->sr = NULL;
    c->up = NULL;
    c->body_done = rq->body_kind == H1_BODY_NONE;
    c->resp_started = 0;
    c->body_fed = 0;
    c->continued = 0;
    c->retried = 0;
    c->tries = 0;
    c->tried.n = 0;
    c->read_paused = 0;
    c->keep = rq->keep_alive;
    c->http10 = rq->version_minor == 0;
    c->is_head = rq->method_id == HTTP_HEAD;
    c->status = 0;
    c->reqid_len = 0;
    c->up_ms = -1;
    if (!c->body_done)
        gw_tmo_set(&c->tmo, s->cfg->timeouts.client_body_ms, s->cfg->timeouts.client_idle_ms);

    need = rt_table_max_params(s->rt);
    if (need > c->params_cap) {
        struct rt_param *p = realloc(c->params, need * sizeof(*p));
        if (p) {
            c->params = p;
            c->params_cap = need;
        }
    }
    v = tls_verdict(c);
    if (v == GW_V_UPSTREAM) /* nothing to say about the connection itself */
        v = gw_forward_decide(&c->rp, s, w->rtctx, c->params, c->params_cap, &m, &c->sr);
    c->nparams = v == GW_V_CONNECT || v == GW_V_ASTERISK || v == GW_V_NOMEM || v == GW_V_HTTPS ||
                         v == GW_V_MISDIRECTED || v == GW_V_BAD_PATH
                     ? 0
                     : m.nparams;
    if (v != GW_V_UPSTREAM && rq->expect_continue && !c->body_done)
        c->keep = 0; /* no 100 Continue from us: the body may come or not, so the
                      * answer says the connection closes (RFC 9110 10.1.1) */
    if (v == GW_V_UPSTREAM)
        gw_proxy_start(c);
    else
        gw_local_answer(c, v, &m);
}

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
            c->bytes_in = 0;
            c->bytes_out = 0;
            c->head_out = 0;
            c->reqid_len = 0;
            c->cip_state = GW_CIP_UNKNOWN;
            clock_gettime(CLOCK_MONOTONIC, &c->t0);
        }
        rc = h1_req_feed_head(&c->rp, v.iov_base, v.iov_len, &used);
        evbuffer_drain(in, used);
        c->bytes_in += used;
        if (rc == H1_REQ_AGAIN) {
            /* client_header_ms bounds the whole head, not each read (as
             * nginx), and a first head from the accept on: a client
             * trickling bytes must not hold the connection */
            const struct adm_config *cfg = gw_conn_cfg(c);
            double left =
                (double)cfg->timeouts.client_header_ms -
                (c->admitted_ms ? (double)(gw_now_ms() - c->admitted_ms) : gw_elapsed_ms(&c->t0));
            if (left < 1) {
                c->is_head = 0;
                c->http10 = 0;
                gw_local_error_close(c, 408);
                return;
            }
            gw_tmo_set(&c->tmo, (unsigned)left, cfg->timeouts.client_idle_ms);
            gw_conn_pending_check(c); /* reclaimable as a first head is */
            continue;
        }
        if (rc == H1_REQ_ERROR) {
            c->is_head = 0;
            c->http10 = 0;
            gw_local_error_close(c, c->rp.status);
            return;
        }
        request_start(c);
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
        gw_local_discard(c);
        break;
    case GW_CONN_PROXY:
        if (!c->body_done)
            gw_proxy_body_up(c);
        break;
    case GW_CONN_TUNNEL:
        gw_proxy_tunnel_up(c);
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
        gw_proxy_detach(c);
        if (!c->linger || gw_conn_linger(c) < 0)
            gw_conn_free(c);
        return;
    }
    if (c->up) { /* the response (or a tunnel) waits for this output to drain */
        gw_proxy_drained(c);
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
            c->is_head = 0;
            gw_local_error_close(c, 408);
            return;
        }
        if ((what & GW_IO_READING) && c->st == GW_CONN_PROXY && !c->resp_started && !c->body_done) {
            gw_proxy_fail(c, 408);
            return;
        }
        if ((what & GW_IO_READING) && (c->st == GW_CONN_PROXY || c->st == GW_CONN_LOCAL) &&
            c->body_done) {
            /* only waiting for our own answer: the upstream's timeout rules */
            gw_io_read(&c->io, 1);
            return;
        }
        if (c->snap) {
            c->status = c->status ? c->status : 408;
            gw_conn_account(c);
        }
        conn_close(c);
        return;
    }
    if ((what & GW_IO_EOF) && c->st != GW_CONN_CLOSING && c->st != GW_CONN_TUNNEL &&
        (evbuffer_get_length(c->io.in) > 0 || (c->st == GW_CONN_PROXY && c->body_done))) {
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
    if (c->snap && c->st != GW_CONN_CLOSING) {
        c->status = c->status ? c->status : 499;
        gw_conn_account(c);
    }
    conn_close(c);
}

struct gw_conn *gw_http1_accept(struct gw_worker *w, struct gw_listener *l, evutil_socket_t fd,
                                const struct sockaddr *sa, int salen, int parked,
                                const struct gw_io_ops *ops, void *xprt)
{
    return gw_conn_new(w, l, fd, sa, salen, parked, ops, xprt, conn_read_cb, conn_write_cb,
                       conn_event_cb);
}
