/*
 * tunnel.c - after 101 Switching Protocols (HTTP/1 only): bytes both ways
 * between the client and the upstream connection, with backpressure, until
 * either side ends or timeouts.tunnel_idle_ms pass without a byte.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/tunnel.h"

#include <stdlib.h>
#include <strings.h>

#include "gateway/try.h"
#include "gateway/upconn.h"

static void ws_close(struct gw_req *r);

/* Follows <n> bytes at <p> of the server's frames in <t> (RFC 6455 5.2: two
 * bytes, two or eight of length, four of mask when masked, the payload).
 * With <stop>, stops at the first end of a frame. The bytes followed. */
static size_t ws_advance(struct gw_ws_track *t, const unsigned char *p, size_t n, int stop)
{
    size_t i = 0;

    while (i < n) {
        if (t->left) {
            size_t k = n - i < t->left ? n - i : (size_t)t->left;
            t->left -= k;
            i += k;
        } else {
            unsigned l7, need;
            t->hdr[t->hlen++] = p[i++];
            l7 = t->hlen >= 2 ? t->hdr[1] & 0x7fu : 0;
            need = t->hlen < 2 ? 2
                               : 2 +
                                     (l7 == 126   ? 2
                                      : l7 == 127 ? 8
                                                  : 0) +
                                     (t->hdr[1] & 0x80 ? 4 : 0);
            if (t->hlen < need)
                continue;
            t->left = l7 < 126 ? l7 : 0;
            for (unsigned k = 0; l7 >= 126 && k < (l7 == 126 ? 2u : 8u); k++)
                t->left = t->left << 8 | t->hdr[2 + k];
            t->hlen = 0;
        }
        if (stop && !t->left && !t->hlen)
            break;
    }
    return i;
}

/* The bytes of <in> that may go to the client: all of them, or after the
 * drain's deadline those up to the end of the current frame. */
static size_t ws_movable(struct gw_conn *c, struct evbuffer *in)
{
    struct evbuffer_iovec stack[8], *v = stack;
    int n = evbuffer_peek(in, -1, NULL, NULL, 0);
    size_t total = 0;

    if (n > 8 && !(v = malloc((size_t)n * sizeof(*v)))) {
        c->tunnel_ws = 0; /* not followed from here on: no close frame then */
        return evbuffer_get_length(in);
    }
    n = evbuffer_peek(in, -1, NULL, v, n);
    for (int i = 0; i < n; i++) {
        size_t k = ws_advance(&c->ws, v[i].iov_base, v[i].iov_len, c->ws.going);
        total += k;
        if (k < v[i].iov_len)
            break;
    }
    if (v != stack)
        free(v);
    return total;
}

/* A tunnel's bytes are counted as they move: the access log's line (at
 * the close) and /metrics' bytes both ways take them. Each move, and each
 * output drained, is activity for timeouts.tunnel_idle_ms (r->c->tmo.idle).
 * A WebSocket's frames from the server are followed (ws_advance). */
static void tunnel_move(struct gw_req *r, struct gw_io *from, struct gw_io *to)
{
    struct gw_conn *c = r->c;
    size_t len = evbuffer_get_length(from->in), n = len;

    if (from == &c->io) {
        r->bytes_in += n;
        gw_count(&c->w->ctr.bytes_in, n);
    } else {
        if (c->tunnel_ws)
            n = ws_movable(c, from->in);
        r->bytes_out += n;
        gw_count(&c->w->ctr.bytes_out, n);
    }
    c->tmo.last_rd = gw_now_ms();
    if (n == len)
        evbuffer_add_buffer(to->out, from->in);
    else
        evbuffer_remove_buffer(from->in, to->out, n);
    if (from != &c->io && c->tunnel_ws && c->ws.going && !c->ws.left && !c->ws.hlen) {
        ws_close(r); /* the frame under way went whole: now the close */
        return;
    }
    if (evbuffer_get_length(to->out) > GW_HWM)
        gw_io_read(from, 0);
}

static void tunnel_up_read(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    tunnel_move(u->r, io, &u->r->c->io);
}

static void tunnel_up_write(struct gw_io *io, void *arg)
{
    struct gw_upconn *u = arg;
    (void)io;
    u->r->c->tmo.last_rd = gw_now_ms();
    gw_io_read(&u->r->c->io, 1);
}

/* The upstream side ends: what the client still has to get is flushed,
 * as long as that flush goes on (no tunnel_idle_ms without progress), then
 * the connection closes. */
static void tunnel_end(struct gw_req *r)
{
    gw_try_detach(r);
    gw_try_finish(r);
    gw_conn_set_state(r->c, GW_CONN_CLOSING);
    gw_tmo_set(&r->c->tmo, 0, r->c->tmo.idle);
    if (evbuffer_get_length(r->c->io.out) == 0)
        gw_conn_free(r->c);
}

static void tunnel_up_event(struct gw_io *io, short what, void *arg)
{
    struct gw_upconn *u = arg;

    (void)io;
    (void)what;
    tunnel_end(u->r);
}

/* The close frame after the last whole frame, then the end. */
static void ws_close(struct gw_req *r)
{
    /* FIN, close; status 1001 (RFC 6455 5.5.1, 7.4.1): unmasked, from the
     * server's side */
    static const unsigned char close_frame[] = {0x88, 0x02, 0x03, 0xe9};

    gw_io_read(&r->up->io, 0);
    evbuffer_add(r->c->io.out, close_frame, sizeof(close_frame));
    gw_io_write(&r->c->io, 1);
    tunnel_end(r);
}

void gw_tunnel_going_away(struct gw_req *r)
{
    struct gw_conn *c = r->c;

    if (!r->up)
        return;
    if (!c->tunnel_ws) {
        gw_io_read(&c->io, 0); /* nothing more from the client */
        tunnel_end(r);
        return;
    }
    /* the client's bytes still go up meanwhile: the server's frame under
     * way may wait for them (an echo) */
    c->ws.going = 1;
    if (!c->ws.left && !c->ws.hlen) {
        ws_close(r);
        return;
    }
    /* a frame is under way: its rest first, then the close (tunnel_move);
     * a server that never sends it meets the drain's last close */
    gw_io_read(&r->up->io, evbuffer_get_length(c->io.out) <= GW_HWM);
}

/* Whether the request of <r> asked for a WebSocket (Upgrade: websocket). */
static int asked_websocket(const struct gw_req *r)
{
    const struct h1_request *rq = r->rp ? &r->rp->req : NULL;

    for (size_t i = 0; rq && i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        struct h1_slice e;
        size_t pos = 0;

        if (!h1_name_is(&h->name, "upgrade"))
            continue;
        while (h1_list_next(h->value, &pos, &e))
            if (e.len >= 9 && !strncasecmp(e.ptr, "websocket", 9))
                return 1;
    }
    return 0;
}

/* After the 101: the request is counted (its line waits for the close),
 * the snapshot released, both sockets keep alive (GW_KEEPALIVE_*), and
 * the tunnel closes when no byte went either way for the snapshot's
 * timeouts.tunnel_idle_ms: a tunnel takes the value it started with. */
void gw_tunnel_start(struct gw_req *r)
{
    struct gw_upconn *u = r->up;
    unsigned idle_ms = r->snap->cfg->timeouts.tunnel_idle_ms;

    r->c->tunnel_ws = asked_websocket(r);
    gw_conn_set_state(r->c, GW_CONN_TUNNEL);
    gw_upconn_set_state(u, GW_UP_TUNNEL);
    gw_req_account_tunnel(r);
    gw_req_unpin(r);         /* a tunnel needs no snapshot: swaps go on freely */
    r->sr = NULL;            /* nor its route, which the snapshot held */
    r->upstream_addr = NULL; /* nor the pool's server name: the log took its copy */
    gw_conn_keepalive(r->c->io.fd);
    gw_conn_keepalive(u->io.fd);
    gw_io_setcb(&u->io, tunnel_up_read, tunnel_up_write, tunnel_up_event, u);
    gw_tmo_set(&u->tmo, 0, 0);
    gw_tmo_set(&r->c->tmo, 0, 0);
    r->c->tmo.idle = idle_ms;
    /* bytes already read on either side go first */
    tunnel_move(r, &u->io, &r->c->io);
    tunnel_move(r, &r->c->io, &u->io);
    gw_io_read(&u->io, 1);
    gw_io_read(&r->c->io, 1);
}

void gw_tunnel_up(struct gw_req *r)
{
    if (r->up)
        tunnel_move(r, &r->c->io, &r->up->io);
}

void gw_tunnel_drained(struct gw_req *r)
{
    r->c->tmo.last_rd = gw_now_ms();
    gw_io_read(&r->up->io, 1);
}
