/*
 * tunnel.c - after 101 Switching Protocols (HTTP/1 only): bytes both ways
 * between the client and the upstream connection, with backpressure, until
 * either side ends or timeouts.tunnel_idle_ms pass without a byte.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/tunnel.h"

#include <strings.h>

#include "gateway/try.h"
#include "gateway/upconn.h"

/* A tunnel's bytes are counted as they move: the access log's line (at
 * the close) and /metrics' bytes both ways take them. Each move, and each
 * output drained, is activity for timeouts.tunnel_idle_ms (r->c->tmo.idle). */
static void tunnel_move(struct gw_req *r, struct gw_io *from, struct gw_io *to)
{
    size_t n = evbuffer_get_length(from->in);

    if (from == &r->c->io) {
        r->bytes_in += n;
        gw_count(&r->c->w->ctr.bytes_in, n);
    } else {
        r->bytes_out += n;
        gw_count(&r->c->w->ctr.bytes_out, n);
    }
    r->c->tmo.last_rd = gw_now_ms();
    evbuffer_add_buffer(to->out, from->in);
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

void gw_tunnel_going_away(struct gw_req *r)
{
    /* FIN, close; status 1001 (RFC 6455 5.5.1, 7.4.1): unmasked, from the
     * server's side */
    static const unsigned char close_frame[] = {0x88, 0x02, 0x03, 0xe9};

    if (!r->up)
        return;
    gw_io_read(&r->c->io, 0);
    if (r->c->tunnel_ws) {
        gw_io_read(&r->up->io, 0);
        evbuffer_add(r->c->io.out, close_frame, sizeof(close_frame));
        gw_io_write(&r->c->io, 1);
    }
    tunnel_end(r);
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
