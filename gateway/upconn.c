/*
 * upconn.c - upstream connections: connect, lend to a request (its start
 * and end, for the balancer), park in the pool's per-worker idle stack and
 * take back, the same-server retry of a pooled connection that died idle,
 * pruning after a swap (a connection whose server stays in a changed pool
 * moves to that pool), the idle and timeout sweeps. The request on a
 * connection is proxy.c's: it sets the connection's callbacks while it uses
 * it; a parked one gets these.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/upconn.h"

#include <assert.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The moves each state may make (bit i: to state i). */
static const unsigned char moves[] = {
    [GW_UP_CONNECTING] = 1 << GW_UP_WAITING,
    [GW_UP_IDLE] = 1 << GW_UP_WAITING,
    [GW_UP_WAITING] = 1 << GW_UP_BODY | 1 << GW_UP_TUNNEL,
    [GW_UP_BODY] = 1 << GW_UP_IDLE,
    [GW_UP_TUNNEL] = 0,
};

void gw_upconn_set_state(struct gw_upconn *u, enum gw_upconn_state st)
{
    assert(moves[u->st] & (1u << st));
    (void)moves; /* used by the assert alone, which NDEBUG removes */
    u->st = st;
}

/* Parked: an upstream must not speak unasked, and a close or an error
 * ends it. */
static void idle_read(struct gw_io *io, void *arg)
{
    (void)io;
    gw_upconn_free(arg);
}

static void idle_write(struct gw_io *io, void *arg)
{
    (void)io;
    (void)arg;
}

static void idle_event(struct gw_io *io, short what, void *arg)
{
    (void)io;
    (void)what;
    gw_upconn_free(arg);
}

/* The request lent <u> ended (an answer, a failure, a retry elsewhere, its
 * client gone, a tunnel closed): the balancer hears of it once. */
static void request_end(struct gw_upconn *u)
{
    if (u->lent) {
        u->lent = 0;
        up_request_end(u->pool, u->w->id, u->server);
    }
}

void gw_upconn_lend(struct gw_upconn *u, struct gw_req *r)
{
    u->r = r;
    u->lent = 1;
    up_request_start(u->pool, u->w->id, u->server);
}

/* <u>, idle, now belongs to server <server> of <pool>, which shares the
 * idle stack it is parked in (its old pool left with a swap). */
static void rehome(struct gw_upconn *u, up_pool *pool, size_t server)
{
    up_pool_retain(pool);
    up_pool_release(u->pool);
    u->pool = pool;
    u->server = server;
}

void gw_upconn_free(struct gw_upconn *u)
{
    if (!u)
        return;
    request_end(u);
    if (u->st == GW_UP_IDLE)
        up_idle_remove(u->pool, u->w->id, u->server, u);
    gw_upconn_session_keep(u);
    if (u->r && u->r->up == u)
        u->r->up = NULL;
    if (u->holder)
        *u->holder = NULL;
    LIST_REMOVE(u, link);
    gw_io_close(&u->io);
    up_pool_release(u->pool);
    free(u);
}

/* ---- TLS sessions, one per worker and server ---- */

static struct gw_up_session *session_slot(struct gw_worker *w, const SSL_CTX *ctx,
                                          const up_pool *pool, size_t server)
{
    uintptr_t h = ((uintptr_t)ctx >> 4) * 31 + ((uintptr_t)pool >> 4) * 17 + server;
    return &w->up_sessions[h % GW_UP_SESSIONS];
}

/* The session to resume for <server> of <pool> through <ctx>, borrowed. */
static SSL_SESSION *session_get(struct gw_worker *w, const SSL_CTX *ctx, const up_pool *pool,
                                size_t server)
{
    struct gw_up_session *e = session_slot(w, ctx, pool, server);
    return e->s && e->ctx == ctx && e->pool == pool && e->server == server ? e->s : NULL;
}

/* Makes <s> (owned from now on; NULL: none) the session of <u>'s server. */
static void session_set(struct gw_upconn *u, SSL_SESSION *s)
{
    struct gw_up_session *e = session_slot(u->w, u->tls, u->pool, u->server);
    SSL_SESSION_free(e->s);
    *e = (struct gw_up_session){u->tls, u->pool, u->server, s};
}

void gw_upconn_session_keep(struct gw_upconn *u)
{
    SSL_SESSION *s = u->tls && u->st != GW_UP_CONNECTING ? gw_tls_session(&u->io) : NULL;
    if (s)
        session_set(u, s);
}

void gw_upconn_session_forget(struct gw_upconn *u)
{
    if (u->tls)
        session_set(u, NULL);
}

/* The transport of a new connection to <u>'s server of the snapshot's
 * upstream <up> on <fd>: TLS when the upstream has it, with its SNI
 * (server_name, else the server's host name; never an IP literal), the
 * certificate verified for server_name or the host, and the worker's last
 * session with that server. */
void *gw_up_tls_new(const struct adm_snapshot *s, size_t up, const up_pool *pool, size_t server,
                    evutil_socket_t fd, SSL_SESSION *resume)
{
    const struct adm_upstream *ud = &s->cfg->upstreams[up];
    const struct adm_addr *a = &ud->servers[up_server_tag(pool, server)].addr;
    const char *name = ud->tls ? ud->tls->server_name : NULL;

    return gw_tls_client_new(s->uptls[up], fd,
                             name         ? name
                             : a->numeric ? NULL
                                          : a->host,
                             name ? name : a->host, resume);
}

static int up_transport(struct gw_upconn *u, const struct adm_snapshot *s, size_t up,
                        evutil_socket_t fd, const struct gw_io_ops **ops, void **xprt)
{
    *ops = &gw_io_plain;
    *xprt = NULL;
    if (!(u->tls = s->uptls[up]))
        return 0;
    *xprt =
        gw_up_tls_new(s, up, u->pool, u->server, fd, session_get(u->w, u->tls, u->pool, u->server));
    *ops = &gw_io_tls;
    return *xprt ? 0 : -1;
}

struct gw_upconn *gw_upconn_connect(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                    size_t server)
{
    struct gw_upconn *u = malloc(sizeof(*u));
    up_pool *pool = s->pools[up];
    const struct gw_io_ops *ops;
    void *xprt;
    const struct sockaddr *sa;
    socklen_t salen;
    evutil_socket_t fd;
    int one = 1;

    if (!u)
        return NULL;
    memset(u, 0, offsetof(struct gw_upconn, resp));
    h1_resp_init(&u->resp);
    u->w = w;
    u->st = GW_UP_CONNECTING;
    u->pool = pool;
    u->server = server;
    up_pool_retain(pool);
    sa = up_server_sockaddr(pool, server, &salen);
    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (up_transport(u, s, up, fd, &ops, &xprt) < 0) {
        evutil_closesocket(fd);
        goto fail;
    }
    if (gw_io_init(&u->io, w->base, fd, 0, ops, xprt) < 0) {
        gw_io_close(&u->io); /* closes fd */
        goto fail;
    }
    LIST_INSERT_HEAD(&w->upconns, u, link);
    u->io.lowat = GW_LWM;
    u->io.hiwat = GW_HWM;
    if (gw_io_connect(&u->io, sa, salen) < 0) {
        gw_upconn_free(u);
        return NULL;
    }
    up_count_connect(pool, w->id, server);
    return u;
fail:
    up_pool_release(pool);
    free(u);
    return NULL;
}

/* 1 when idle <u> still belongs to a pool of snapshot <s>: its own, or the
 * changed pool of the same name that took over its server's state (then
 * <u> moves to that pool now). */
size_t gw_up_where(const struct adm_snapshot *s, const up_pool *pool, size_t server, size_t *up)
{
    for (size_t i = 0; i < s->npools; i++) {
        *up = i;
        if (s->pools[i] == pool)
            return server;
        if (strcmp(up_pool_name(s->pools[i]), up_pool_name(pool)) == 0)
            return up_pool_same_server(s->pools[i], pool, server);
    }
    return UP_NONE;
}

static int still_pooled(struct gw_upconn *u, const struct adm_snapshot *s)
{
    size_t up, server = gw_up_where(s, u->pool, u->server, &up);

    if (server == UP_NONE)
        return 0;
    if (s->pools[up] != u->pool)
        rehome(u, s->pools[up], server);
    return 1;
}

void gw_upconn_prune(struct gw_worker *w)
{
    struct adm_snapshot *s = atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);
    struct gw_upconn *u, *next;

    for (u = LIST_FIRST(&w->upconns); u; u = next) {
        next = LIST_NEXT(u, link);
        if (u->st == GW_UP_IDLE && !still_pooled(u, s)) /* its server left the config */
            gw_upconn_free(u);
    }
}

void gw_upconn_sweep_idle(struct gw_worker *w)
{
    struct gw_upconn *u, *next;
    struct timespec now;
    long long ms;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    ms = now.tv_sec * 1000 + now.tv_nsec / 1000000;
    for (u = LIST_FIRST(&w->upconns); u; u = next) {
        next = LIST_NEXT(u, link);
        if (u->st == GW_UP_IDLE && u->idle_until && u->idle_until <= ms)
            gw_upconn_free(u);
    }
}

void gw_upconn_sweep(struct gw_worker *w)
{
    long long now = gw_now_ms();
    struct gw_upconn *u, *un;

    /* an upstream's handler frees at most itself and its client (not in
     * this list): the saved next stays valid */
    for (u = LIST_FIRST(&w->upconns); u; u = un) {
        un = LIST_NEXT(u, link);
        if (u->st != GW_UP_IDLE)
            gw_tmo_check(&u->tmo, &u->io, now);
    }
}

void gw_upconn_free_all(struct gw_worker *w)
{
    while (!LIST_EMPTY(&w->upconns))
        gw_upconn_free(LIST_FIRST(&w->upconns));
    for (size_t i = 0; i < GW_UP_SESSIONS; i++) {
        SSL_SESSION_free(w->up_sessions[i].s);
        w->up_sessions[i].s = NULL;
    }
}

struct gw_upconn *gw_upconn_take(struct gw_worker *w, up_pool *pool, size_t server)
{
    struct gw_upconn *u = up_idle_get(pool, w->id, server);

    if (!u)
        return NULL;
    if (u->pool != pool) /* parked through the pool <pool> took over from */
        rehome(u, pool, server);
    gw_upconn_set_state(u, GW_UP_WAITING);
    return u;
}

void gw_upconn_release(struct gw_upconn *u, int reuse, unsigned idle_ms)
{
    request_end(u);
    if (u->r && u->r->up == u)
        u->r->up = NULL;
    u->r = NULL;
    if (reuse && u->st == GW_UP_BODY && up_idle_put(u->pool, u->w->id, u->server, u) == 0) {
        /* parked as it is (reading on, timeouts unchanged, so parking
         * re-arms nothing); the worker's tick closes it after the idle
         * timeout */
        gw_upconn_session_keep(u); /* by now a TLS 1.3 ticket is in */
        gw_upconn_set_state(u, GW_UP_IDLE);
        u->idle_until = gw_now_ms() + idle_ms;
        u->reused = 1;
        gw_io_setcb(&u->io, idle_read, idle_write, idle_event, u);
        return;
    }
    gw_upconn_free(u);
}
