/*
 * conn.c - the client connection: created, admitted, freed; its one state
 * and the moves between states, which its admission queue follows (parked,
 * pending a whole request head, idle between requests: worker.c closes the
 * oldest of a queue to make room); its timeouts, swept every GW_SWEEP_MS;
 * the end of each request (access log, counters, snapshot unpin, then the
 * next request or the close, lingering while the client may still send).
 * It reads and writes only through its gw_io, and wakes the layers above
 * only through the callbacks they registered.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/conn.h"

#include <assert.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>

void gw_tmo_set(struct gw_tmo *t, unsigned rd_ms, unsigned wr_ms)
{
    t->rd = rd_ms;
    t->wr = wr_ms;
    t->idle = 0;
    t->last_rd = t->last_wr = gw_now_ms();
}

/* Which timeout of <t> has run out, as GW_IO_TIMEOUT event flags, or 0.
 * <out>: the connection's output; <reading>: its read side is on. A
 * tunnel gone idle is GW_IO_TIMEOUT alone: neither side is to blame. */
static short tmo_expired(struct gw_tmo *t, struct evbuffer *out, int reading, long long now)
{
    if (t->idle && now - t->last_rd >= t->idle)
        return GW_IO_TIMEOUT;
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

void gw_tmo_check(struct gw_tmo *t, struct gw_io *io, long long now)
{
    short what = tmo_expired(t, io->out, gw_io_reading(io), now);

    if (!what)
        return;
    if (what & GW_IO_READING)
        gw_io_read(io, 0);
    else if (what & GW_IO_WRITING)
        gw_io_write(io, 0);
    io->on_event(io, what, io->arg);
}

const struct adm_config *gw_conn_cfg(const struct gw_conn *c)
{
    return c->req.snap ? c->req.snap->cfg
                       : atomic_load_explicit(&c->w->proc->swap.current, memory_order_acquire)->cfg;
}

/* An
 * empty buffer may still hold an empty chain (left by a read that found EOF
 * or EAGAIN), for which evbuffer_peek() reports one zero-length vector: a
 * loop that fed that to a parser would never end. */
int gw_peek_first(struct evbuffer *in, struct evbuffer_iovec *v)
{
    return evbuffer_get_length(in) > 0 && evbuffer_peek(in, -1, NULL, v, 1) >= 1 && v->iov_len > 0;
}

void gw_conn_keepalive(evutil_socket_t fd)
{
    static const int opts[][2] = {
        {SOL_SOCKET, SO_KEEPALIVE},
        {IPPROTO_TCP, TCP_KEEPIDLE},
        {IPPROTO_TCP, TCP_KEEPINTVL},
        {IPPROTO_TCP, TCP_KEEPCNT},
    };
    const int v[] = {1, GW_KEEPALIVE_IDLE_S, GW_KEEPALIVE_INTVL_S, GW_KEEPALIVE_CNT};

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        setsockopt(fd, opts[i][0], opts[i][1], &v[i], sizeof(v[i]));
}

/* Whether <c>'s client may still send when it closes (nginx: a body not
 * wholly read, input already buffered): a request head or body not wholly
 * read, or bytes buffered, while its read side has not ended. Not after a
 * 408: a client too slow for its own timeouts is not waited for longer
 * (nginx terminates such a request, without lingering); nor after a body
 * was read away until its end (linger_end, local.c): nginx closes then too. */
static int may_still_send(const struct gw_conn *c)
{
    if (c->io.rd_eof || c->req.status == 408)
        return 0;
    if (c->st == GW_CONN_HEAD ||
        ((c->st == GW_CONN_LOCAL || c->st == GW_CONN_PROXY) && !c->req.body_done))
        return !c->linger_end || gw_now_ms() < c->linger_end;
    return evbuffer_get_length(c->io.in) > 0;
}

void gw_conn_close_when_flushed(struct gw_conn *c)
{
    c->linger = c->linger || may_still_send(c);
    gw_conn_set_state(c, GW_CONN_CLOSING);
    gw_io_read(&c->io, 0);
    /* never free here: callers still hold <c>; the write callback closes
     * once the output is flushed (at once when it is) */
    if (evbuffer_get_length(c->io.out) == 0)
        gw_io_kick_write(&c->io);
}

/* ---- request-parser memory ----
 * A connection holds its parser's block (some 50 KB with the default
 * limits, of which a request touches three pages) only while a request is
 * under way, from its first byte to gw_conn_request_done(): an idle
 * keep-alive connection holds none. The worker keeps the blocks given back,
 * newest first, so that the next request takes a warm one and the memory
 * grows with the requests in flight, not with the connections open. */
#define PMEM_KEEP 64 /* blocks a worker keeps; more are freed */

void gw_pmem_put(struct gw_worker *w, void *mem, size_t size)
{
    if (!mem)
        return;
    if (size != w->pmem_size) { /* the limits changed: the old size is done */
        gw_conn_pmem_free(w);
        w->pmem_size = size;
    }
    if (w->pmem_n >= PMEM_KEEP) {
        free(mem);
        return;
    }
    *(void **)mem = w->pmem;
    w->pmem = mem;
    w->pmem_n++;
}

void gw_conn_pmem_free(struct gw_worker *w)
{
    while (w->pmem) {
        void *next = *(void **)w->pmem;
        free(w->pmem);
        w->pmem = next;
    }
    w->pmem_n = 0;
}

void *gw_pmem_get(struct gw_worker *w, size_t size)
{
    void *mem;

    if (!w->pmem || w->pmem_size != size)
        return malloc(size);
    mem = w->pmem;
    w->pmem = *(void **)mem;
    w->pmem_n--;
    return mem;
}

int gw_conn_parser_mem(struct gw_conn *c)
{
    void *mem = gw_pmem_get(c->w, h1_req_mem_size(&c->rp));

    if (!mem)
        return -1;
    h1_req_give_mem(&c->rp, mem);
    return 0;
}

/* The client's bytes are read on, through the transport: for TLS too, as
 * nginx's lingering close reads through SSL after its close_notify. The
 * HTTP side never reads the raw socket (io.h), and a client that answers
 * our close_notify with its own ends the linger at once, as an EOF,
 * without waiting for its FIN. */
int gw_conn_linger(struct gw_conn *c)
{
    if (c->w->draining || (c->l && c->l->closed) || !gw_io_open(&c->io) ||
        c->io.ops->shutdown(&c->io) < 0)
        return -1;
    gw_conn_set_state(c, GW_CONN_LINGER);
    /* it parses nothing more: its parser's block goes back to the worker
     * now, not after the linger's seconds */
    h1_req_reset(&c->rp);
    gw_pmem_put(c->w, h1_req_take_mem(&c->rp), h1_req_mem_size(&c->rp));
    evbuffer_drain(c->io.in, evbuffer_get_length(c->io.in));
    gw_io_write(&c->io, 0);
    gw_tmo_set(&c->tmo, 0, 0);
    c->linger_end = c->tmo.last_rd + gw_conn_cfg(c)->timeouts.lingering_ms;
    gw_conn_linger_gap(c, c->tmo.last_rd, GW_LINGER_IDLE_MS);
    gw_io_read(&c->io, 1);
    return 0;
}

int gw_conn_linger_gap(struct gw_conn *c, long long now, unsigned gap_ms)
{
    long long left = c->linger_end - now;

    if (left <= 0)
        return -1;
    /* the read timeout (from this read on) never runs past the end */
    c->tmo.rd = left < gap_ms ? (unsigned)left : gap_ms;
    return 0;
}

int gw_conn_linger_read(struct gw_conn *c, long long now)
{
    evbuffer_drain(c->io.in, evbuffer_get_length(c->io.in));
    return gw_conn_linger_gap(c, now, GW_LINGER_IDLE_MS);
}

/* ---- admission's queues ---- */

/* Moves <c> out of its queue and to the tail (the newest end) of <q>. */
static void queue_move(struct gw_conn *c, enum gw_conn_q q)
{
    struct gw_worker *w = c->w;
    enum gw_conn_q from = c->queue;

    if (from == q)
        return;
    if (from != GW_CONN_Q_NONE) {
        TAILQ_REMOVE(&w->cq[from], c, qlink);
        w->ncq[from]--;
    }
    if (q != GW_CONN_Q_NONE) {
        TAILQ_INSERT_TAIL(&w->cq[q], c, qlink);
        w->ncq[q]++;
    }
    c->queue = q;
    if (from == GW_CONN_Q_IDLE || q == GW_CONN_Q_IDLE)
        atomic_store_explicit(&w->nidle, w->ncq[GW_CONN_Q_IDLE], memory_order_relaxed);
}

/* <c>, in no queue, between requests with nothing buffered either way,
 * joins the idle queue. Idle means that closing it loses no byte of a
 * response and finds no request begun (nginx's reusable connections).
 * This and idle_leave() run once a request: queue_move() without its
 * branches. */
static void idle_join(struct gw_conn *c)
{
    struct gw_worker *w = c->w;

    TAILQ_INSERT_TAIL(&w->cq[GW_CONN_Q_IDLE], c, qlink);
    c->queue = GW_CONN_Q_IDLE;
    atomic_store_explicit(&w->nidle, ++w->ncq[GW_CONN_Q_IDLE], memory_order_relaxed);
    if (!w->listening && w->conn_idle)
        w->conn_idle(w);
}

static inline void idle_leave(struct gw_conn *c)
{
    struct gw_worker *w = c->w;

    TAILQ_REMOVE(&w->cq[GW_CONN_Q_IDLE], c, qlink);
    c->queue = GW_CONN_Q_NONE;
    atomic_store_explicit(&w->nidle, --w->ncq[GW_CONN_Q_IDLE], memory_order_relaxed);
}

/* A response still draining joins once its output is out. */
void gw_conn_idle_check(struct gw_conn *c)
{
    if (c->st == GW_CONN_IDLE && c->queue == GW_CONN_Q_NONE &&
        evbuffer_get_length(c->io.out) == 0 && evbuffer_get_length(c->io.in) == 0)
        idle_join(c);
}

/* A later head that does not come whole at once would otherwise hold its
 * place for client_header_ms, out of every budget: a client could make one
 * cheap request, then start the next and wait. Joining here, and not with
 * the head's first byte, keeps the queue's moves off the path of a head
 * that comes whole. */
void gw_conn_pending_check(struct gw_conn *c)
{
    if (c->st == GW_CONN_HEAD && c->queue == GW_CONN_Q_NONE && evbuffer_get_length(c->io.out) == 0)
        queue_move(c, GW_CONN_Q_PENDING);
}

int gw_conn_reclaim(struct gw_worker *w, enum gw_conn_q q)
{
    struct gw_conn *c = TAILQ_FIRST(&w->cq[q]);

    if (!c)
        return -1;
    /* idle: between requests; pending: before a request started, its head
     * not whole. Neither has an upstream connection, a snapshot in use or
     * an answer under way, and a plain close is what nginx does to
     * either. */
    gw_count(&w->ctr.conns_reclaimed[q == GW_CONN_Q_IDLE ? 0 : 1], 1);
    gw_conn_free(c);
    return 0;
}

/* A client that half-closed still gets answers to the requests it sent
 * before (pipelined, already buffered). */
void gw_conn_request_done(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    size_t pending = evbuffer_get_length(c->io.in);
    const struct adm_config *cfg;

    if (gw_conn_last(c) || (c->eof && !pending)) {
        gw_conn_close_when_flushed(c);
        return;
    }
    gw_conn_set_state(c, GW_CONN_IDLE);
    c->linger_end = 0; /* the next request's body has an end of its own */
    h1_req_reset(&c->rp);
    gw_pmem_put(w, h1_req_take_mem(&c->rp), h1_req_mem_size(&c->rp));
    cfg = gw_conn_cfg(c);
    gw_tmo_set(&c->tmo, cfg->timeouts.client_idle_ms, cfg->timeouts.client_idle_ms);
    if (!c->eof)
        gw_io_read(&c->io, 1);
    if (pending)
        gw_io_kick_read(&c->io);
    else if (evbuffer_get_length(c->io.out) == 0)
        idle_join(c); /* else once its output drained (the write callback) */
}

void gw_conn_ob_connection(struct gw_obuf *o, const struct gw_conn *c)
{
    if (gw_conn_last(c))
        gw_ob_lit(o, "Connection: close\r\n");
    else if (c->req.http10)
        gw_ob_lit(o, "Connection: keep-alive\r\n");
}

/* The client's address, as text too. */
static void set_peer(struct gw_conn *c, const struct sockaddr *sa, size_t salen)
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

void gw_conn_limits(const struct adm_config *cfg, struct h1_req_limits *lim)
{
    h1_req_limits_default(lim);
    lim->max_request_line = cfg->limits.max_request_line;
    lim->max_header_bytes = cfg->limits.max_header_bytes;
    lim->max_headers = cfg->limits.max_headers;
    lim->max_body_bytes = cfg->limits.max_body_bytes;
    lim->merge_slashes = cfg->router.merge_slashes;
}

/* The moves each state may make (bit i: to state i). */
static const unsigned char moves[] = {
    [GW_CONN_PARKED] = 1 << GW_CONN_IDLE,
    [GW_CONN_IDLE] = 1 << GW_CONN_HEAD | 1 << GW_CONN_CLOSING,
    [GW_CONN_HEAD] =
        1 << GW_CONN_LOCAL | 1 << GW_CONN_PROXY | 1 << GW_CONN_IDLE | 1 << GW_CONN_CLOSING,
    [GW_CONN_LOCAL] = 1 << GW_CONN_LOCAL | 1 << GW_CONN_IDLE | 1 << GW_CONN_CLOSING,
    [GW_CONN_PROXY] =
        1 << GW_CONN_LOCAL | 1 << GW_CONN_TUNNEL | 1 << GW_CONN_IDLE | 1 << GW_CONN_CLOSING,
    [GW_CONN_TUNNEL] = 1 << GW_CONN_CLOSING,
    [GW_CONN_CLOSING] = 1 << GW_CONN_CLOSING | 1 << GW_CONN_LINGER,
    [GW_CONN_LINGER] = 0, /* freed from here */
};

void gw_conn_set_state(struct gw_conn *c, enum gw_conn_state st)
{
    assert(moves[c->st] & (1u << st));
    (void)moves; /* used by the assert alone, which NDEBUG removes */
    if (c->queue == GW_CONN_Q_IDLE && st != GW_CONN_IDLE)
        idle_leave(c);
    else if (c->queue == GW_CONN_Q_PENDING && c->st == GW_CONN_HEAD && st != GW_CONN_CLOSING) {
        queue_move(c, GW_CONN_Q_NONE);
        c->admitted_ms = 0; /* a head was whole: the later ones are timed from their first byte */
    }
    c->st = st;
}

size_t gw_conn_listener_index(const struct adm_config *cfg, const struct gw_listener *l)
{
    size_t i = l->index;

    if (i < cfg->nlisteners && !strcmp(cfg->listeners[i].addr.text, l->addr))
        return i;
    for (i = 0; i < cfg->nlisteners && strcmp(cfg->listeners[i].addr.text, l->addr); i++)
        ;
    return i;
}

const struct adm_listener *gw_conn_listener(struct gw_conn *c, const struct adm_snapshot *s)
{
    const struct adm_config *cfg = s->cfg;
    size_t i;

    if (!c->l || c->al_gen == s->gen)
        return c->al;
    i = gw_conn_listener_index(cfg, c->l);
    c->al = i < cfg->nlisteners ? &cfg->listeners[i] : NULL;
    c->al_gen = s->gen;
    return c->al;
}

/* Closes <fd> and frees <xprt> through <ops> when the connection cannot be
 * made: the transport's close does both. */
static void drop_transport(const struct gw_io_ops *ops, void *xprt, evutil_socket_t fd)
{
    struct gw_io io;

    memset(&io, 0, sizeof(io));
    io.ops = ops;
    io.xprt = xprt;
    io.fd = fd;
    ops->close(&io);
}

struct gw_conn *gw_conn_new(struct gw_worker *w, struct gw_listener *l, evutil_socket_t fd,
                            const struct sockaddr *sa, int salen, int parked,
                            const struct gw_io_ops *ops, void *xprt, gw_io_cb on_read,
                            gw_io_cb on_write, gw_io_event_cb on_event)
{
    struct gw_conn *c = calloc(1, sizeof(*c));
    const struct adm_config *cfg =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    struct h1_req_limits lim;
    int one = 1;

    if (!c) {
        drop_transport(ops, xprt, fd);
        goto fail;
    }
    c->w = w;
    c->l = l;
    set_peer(c, sa, (size_t)salen);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    gw_conn_limits(cfg, &lim);
    if (h1_req_parser_init(&c->rp, &lim) < 0) {
        drop_transport(ops, xprt, fd);
        goto fail_parser;
    }
    /* idle until its first byte: the block waits in the worker's pool */
    gw_pmem_put(w, h1_req_take_mem(&c->rp), h1_req_mem_size(&c->rp));
    if (gw_io_init(&c->io, w->base, fd, 1, ops, xprt) < 0)
        goto fail_io; /* closes fd */
    LIST_INSERT_HEAD(&w->conns, c, link);
    w->nconns++;
    if (l)
        l->nconns++;
    gw_count(&w->ctr.conns_open, 1);
    gw_count(&w->ctr.conns_total, 1);
    gw_io_setcb(&c->io, on_read, on_write, on_event, c);
    c->io.lowat = GW_LWM;
    c->io.hiwat = GW_HWM;
    c->st = GW_CONN_PARKED; /* every connection starts here */
    if (parked) {
        queue_move(c, GW_CONN_Q_PARKED);
        atomic_fetch_add_explicit(&w->proc->parked, 1, memory_order_relaxed);
    } else {
        gw_conn_admit(c);
    }
    return c;
fail_io:
    gw_io_close(&c->io);
fail_parser:
    h1_req_parser_free(&c->rp);
    free(c);
fail:
    gw_count(&w->ctr.conns_dropped, 1);
    return NULL;
}

void gw_conn_admit(struct gw_conn *c)
{
    const struct adm_config *cfg = gw_conn_cfg(c);

    if (c->queue == GW_CONN_Q_PARKED)
        atomic_fetch_sub_explicit(&c->w->proc->parked, 1, memory_order_relaxed);
    queue_move(c, GW_CONN_Q_PENDING);
    gw_conn_set_state(c, GW_CONN_IDLE);
    /* nginx's client_header_timeout from the accept on: a connection that
     * sends nothing (its TLS handshake included) is not kept as long as a
     * client that made requests */
    gw_tmo_set(&c->tmo, cfg->timeouts.client_header_ms, cfg->timeouts.client_idle_ms);
    c->admitted_ms = c->tmo.last_rd;
    gw_io_read(&c->io, 1);
}

void gw_conn_free(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    struct gw_listener *l = c->l;

    assert(c->req.up == NULL && c->req.ups == NULL);
    if (c->proto)
        c->proto->release(c);
    gw_req_release(&c->req); /* before the io closes: a tunnel's line reads it */
    if (c->queue == GW_CONN_Q_PARKED)
        atomic_fetch_sub_explicit(&w->proc->parked, 1, memory_order_relaxed);
    queue_move(c, GW_CONN_Q_NONE);
    LIST_REMOVE(c, link);
    gw_io_close(&c->io);
    gw_pmem_put(w, h1_req_take_mem(&c->rp), h1_req_mem_size(&c->rp));
    h1_req_parser_free(&c->rp);
    free(c);
    w->nconns--;
    atomic_fetch_sub_explicit(&w->proc->conns, 1, memory_order_relaxed);
    gw_count(&w->ctr.conns_open, (uint64_t)-1);
    if (l)
        l->nconns--;
    if (w->conn_freed)
        w->conn_freed(w, l);
}

void gw_conn_close_idle(struct gw_worker *w, const struct gw_listener *l)
{
    struct gw_conn *c, *next;

    for (c = LIST_FIRST(&w->conns); c; c = next) {
        next = LIST_NEXT(c, link);
        if (l && c->l != l)
            continue;
        if (c->proto && c->st != GW_CONN_LINGER)
            c->proto->shutdown(c); /* HTTP/2: GOAWAY, then the close */
        else if (c->st == GW_CONN_IDLE || c->st == GW_CONN_PARKED || c->st == GW_CONN_LINGER)
            gw_conn_free(c);
    }
}

void gw_conn_sweep(struct gw_worker *w)
{
    long long now = gw_now_ms();
    struct gw_conn *c, *cn;

    /* a client's handler frees at most that client and its own upstream
     * connection (not in this list): the saved next stays valid */
    for (c = LIST_FIRST(&w->conns); c; c = cn) {
        cn = LIST_NEXT(c, link);
        gw_tmo_check(&c->tmo, &c->io, now);
    }
}

void gw_conn_free_all(struct gw_worker *w)
{
    while (!LIST_EMPTY(&w->conns))
        gw_conn_free(LIST_FIRST(&w->conns));
}
