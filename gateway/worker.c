/*
 * worker.c - worker threads: one event_base each (no locks), their own
 * SO_REUSEPORT listening sockets (opened and closed as the admin thread's
 * queue of listener changes says: listeners are live), a notify pipe
 * through which the admin thread announces swaps, listener changes and
 * drains, a one-second tick for the cached Date
 * field and the access-log flush; and admission, all of it: the
 * connection cap (limits.max_connections, for all workers together),
 * pausing and resuming the listeners, and admitting connections that were
 * accepted over the cap. A freed connection only counts itself and calls
 * the worker's conn_freed.
 *
 * At the cap a new connection takes the place of the worker's oldest idle
 * keep-alive connection (nginx's reusable connections), or of another
 * worker's, which is asked through its notify pipe. Connections part-way
 * to a whole request head (their first, or a later one begun) have a
 * budget of their own,
 * limits.max_pending_connections, divided over the workers: at its share a
 * worker closes its oldest such connection for the new one. A failed
 * accept (EMFILE...) pauses accepting for ACCEPT_PAUSE_MS.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gateway/conn.h"
#include "gateway/h2up.h"
#include "gateway/limits.h"
#include "gateway/tunnel.h"

/* The transport of a connection accepted on <l>: plain, or TLS from the
 * listener's context in the current snapshot (the accept runs between
 * requests, when the worker cannot be holding an older one): whether a
 * listener speaks TLS is live too, and so are its protocols: <h2> says
 * whether the connection may turn out HTTP/2 (TLS with "h2", whose ALPN
 * decides; plain with "h2c", whose first bytes do). A listener the config
 * no longer has is closing: -1, refused. */
static int listener_transport(const struct gw_listener *l, evutil_socket_t fd,
                              const struct gw_io_ops **ops, void **xprt, int *h2)
{
    struct gw_worker *w = l->w;
    const struct adm_snapshot *s =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);
    size_t i = gw_conn_listener_index(s->cfg, l);

    *ops = &gw_io_plain;
    *xprt = NULL;
    if (i == s->cfg->nlisteners)
        return -1;
    *h2 = (s->cfg->listeners[i].protocols &
           (s->cfg->listeners[i].tls ? ADM_PROTO_H2 : ADM_PROTO_H2C)) != 0;
    if (!s->cfg->listeners[i].tls)
        return 0;
    if (!s->tls[i] || !(*xprt = gw_tls_server_new(adm_tls_ctx_ssl(s->tls[i]), fd, &w->tls_ctr)))
        return -1;
    *ops = &gw_io_tls;
    return 0;
}

/* Wakes worker <w> with the notify byte <b>; any thread. A worker not
 * started yet has nothing to hear. */
static void poke(struct gw_worker *w, char b)
{
    if (w->base && write(w->notify_fd[1], &b, 1) < 0 && errno != EAGAIN)
        gw_log(GW_LOG_ERROR, "notify worker %u: %s", w->id, strerror(errno));
}

/* Closes the oldest connection of <w>'s queue <q> for a new one; 0, or -1
 * when there is none. conn_freed leaves the place to the caller. */
static int reclaim(struct gw_worker *w, enum gw_conn_q q)
{
    int rc;

    w->admitting = 1;
    rc = gw_conn_reclaim(w, q);
    w->admitting = 0;
    return rc;
}

/* Makes room for the connection being accepted on <w>, with <open> open
 * before it: the oldest connection part-way to a whole request head goes
 * when the worker holds its share of max_pending_connections of them, and
 * at max_connections the oldest idle keep-alive one. How many it closed. */
static unsigned make_room(struct gw_worker *w, const struct adm_config *cfg, unsigned open)
{
    unsigned freed = 0;

    /* The oldest goes, not the new one: a client that sends its head at
     * once is served unless max_pending_connections more connections come
     * in before its head does, while refusing new ones at the budget would
     * let whoever holds the budget with silent connections lock everyone
     * out until the header timeout, and again right after. */
    if (w->ncq[GW_CONN_Q_PENDING] >= gw_worker_share(w, cfg->limits.max_pending_connections) &&
        reclaim(w, GW_CONN_Q_PENDING) == 0)
        freed++;
    if (open - freed >= cfg->limits.max_connections && reclaim(w, GW_CONN_Q_IDLE) == 0)
        freed++;
    return freed;
}

/* <w> parked a connection at the cap with no idle one of its own to close:
 * the worker with the most idle ones closes one ('R'), then has the parked
 * ones admitted ('P'). */
static void reclaim_elsewhere(struct gw_worker *w)
{
    struct gw_process *p = w->proc;
    struct gw_worker *best = NULL;
    unsigned most = 0;

    for (unsigned i = 0; i < p->nworkers; i++) {
        unsigned n = atomic_load_explicit(&p->workers[i].nidle, memory_order_relaxed);
        if (&p->workers[i] != w && n > most) {
            most = n;
            best = &p->workers[i];
        }
    }
    if (best)
        poke(best, 'R');
}

static void accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct gw_listener *l = arg;
    struct gw_worker *w = l->w;
    const struct adm_config *cfg =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    unsigned open = atomic_fetch_add_explicit(&w->proc->conns, 1, memory_order_relaxed);
    const struct gw_io_ops *ops;
    void *xprt;
    int parked, h2 = 0;

    (void)lev;
    if (listener_transport(l, fd, &ops, &xprt, &h2) < 0) {
        evutil_closesocket(fd);
        gw_count(&w->ctr.conns_dropped, 1);
        atomic_fetch_sub_explicit(&w->proc->conns, 1, memory_order_relaxed);
        gw_worker_listen_update(w);
        return;
    }
    /* with no room made, another worker may have taken the last place
     * before this worker's listener paused: then this connection waits,
     * unread, for a place */
    parked = open - make_room(w, cfg, open) >= cfg->limits.max_connections;
    if (!gw_http1_accept(w, l, fd, sa, salen, parked, ops, xprt, h2))
        atomic_fetch_sub_explicit(&w->proc->conns, 1, memory_order_relaxed);
    else if (parked)
        reclaim_elsewhere(w);
    gw_worker_listen_update(w);
}

/* Admits connections accepted over limits.max_connections while there is
 * room (after a close, and every sweep). */
static void admit_parked(struct gw_worker *w)
{
    const struct adm_config *cfg;
    struct gw_conn *c;

    if (w->draining)
        return;
    cfg = atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    while ((c = TAILQ_FIRST(&w->cq[GW_CONN_Q_PARKED]))) {
        unsigned open = atomic_load_explicit(&w->proc->conns, memory_order_relaxed);
        unsigned parked = atomic_load_explicit(&w->proc->parked, memory_order_relaxed);

        if (open - parked >= cfg->limits.max_connections)
            return;
        gw_conn_admit(c);
    }
}

/* admit_parked(), closing idle connections of <w> for its parked ones
 * while there is no room; from the loop, outside every connection's
 * callback. */
static void admit_reclaiming(struct gw_worker *w)
{
    admit_parked(w);
    while (w->ncq[GW_CONN_Q_PARKED] && !w->draining && reclaim(w, GW_CONN_Q_IDLE) == 0)
        admit_parked(w);
}

/* A client connection of <w> accepted on <l> was freed: a closed <l> goes
 * with its last connection, the place may go to a parked one, the
 * listeners may resume, and a drain may be over. A reclaim's close leaves
 * the place to the connection it was made for. */
static void conn_freed(struct gw_worker *w, struct gw_listener *l)
{
    if (l && l->closed && l->nconns == 0)
        free(l);
    if (w->admitting)
        return;
    admit_parked(w);
    if (!w->listening && !w->draining)
        gw_worker_listen_update(w);
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/* A connection became idle while <w> does not accept: at the cap, a new
 * connection can take its place now. */
static void conn_idle(struct gw_worker *w)
{
    gw_worker_listen_update(w);
}

/* nginx waits 500 ms after an accept fails with EMFILE or ENFILE: at once
 * it would fail again, the listening socket staying readable */
#define ACCEPT_PAUSE_MS 500
/* and the error log gets a line at most this often, for all workers */
#define ACCEPT_LOG_MS 1000

/* Accepting failed with <e>: EMFILE, ENFILE, ENOBUFS, ENOMEM (libevent
 * retries EAGAIN, EINTR and ECONNABORTED itself). */
static void accept_error_cb(struct evconnlistener *lev, void *arg)
{
    struct gw_listener *l = arg;
    struct gw_worker *w = l->w;
    struct gw_process *p = w->proc;
    int e = EVUTIL_SOCKET_ERROR();
    long long now = gw_now_ms(), next = atomic_load(&p->accept_log_next);
    unsigned n;
    struct rlimit rl;

    (void)lev;
    atomic_fetch_add(&p->accept_failures, 1);
    w->accept_resume = now + ACCEPT_PAUSE_MS;
    gw_worker_listen_update(w);
    if (now < next ||
        !atomic_compare_exchange_strong(&p->accept_log_next, &next, now + ACCEPT_LOG_MS))
        return;
    n = atomic_exchange(&p->accept_failures, 0);
    if ((e == EMFILE || e == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
        gw_log(GW_LOG_ERROR,
               "worker %u: accept: %s (descriptor limit %llu): accepting pauses %d ms; %u such "
               "failure%s since the last line",
               w->id, evutil_socket_error_to_string(e), (unsigned long long)rl.rlim_cur,
               ACCEPT_PAUSE_MS, n, n == 1 ? "" : "s");
    else
        gw_log(GW_LOG_ERROR,
               "worker %u: accept: %s: accepting pauses %d ms; %u such failure%s since the last "
               "line",
               w->id, evutil_socket_error_to_string(e), ACCEPT_PAUSE_MS, n, n == 1 ? "" : "s");
}

/* Whether a connection accepted by <w> at the cap finds a place: an idle
 * connection of its own to close, its share of pending ones reached (the
 * oldest goes), or idle ones of other workers beyond what the parked
 * connections already wait for. */
static int room_at_cap(const struct gw_worker *w, const struct adm_config *cfg)
{
    const struct gw_process *p = w->proc;
    unsigned idle = 0;

    if (w->ncq[GW_CONN_Q_IDLE] ||
        w->ncq[GW_CONN_Q_PENDING] >= gw_worker_share(w, cfg->limits.max_pending_connections))
        return 1;
    for (unsigned i = 0; i < p->nworkers; i++)
        idle += atomic_load_explicit(&p->workers[i].nidle, memory_order_relaxed);
    return idle > atomic_load_explicit(&p->parked, memory_order_relaxed);
}

/* Accepting while the process is under limits.max_connections (of the live
 * config), or at it with a place to make: one count for all workers, so the
 * limit holds however the kernel spreads connections over the workers'
 * sockets. A worker that paused at the limit resumes when one of its own
 * connections closes or turns idle, or at its next sweep when another
 * worker's did. */
void gw_worker_listen_update(struct gw_worker *w)
{
    const struct adm_config *cfg =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire)->cfg;
    unsigned open = atomic_load_explicit(&w->proc->conns, memory_order_relaxed);
    int want = !w->draining && !w->accept_resume && !w->handing &&
               (open < cfg->limits.max_connections || room_at_cap(w, cfg));

    if (want == w->listening)
        return;
    for (size_t i = 0; i < w->nlisteners; i++) {
        if (!w->listeners[i]->lev)
            continue;
        if (want)
            evconnlistener_enable(w->listeners[i]->lev);
        else
            evconnlistener_disable(w->listeners[i]->lev);
    }
    w->listening = want;
}

/* Starts accepting on <l> (taken, its socket bound): a listener the
 * config added. While the worker pauses at the connection cap it waits,
 * disabled; in a drain it is closed at once. */
static void listener_open(struct gw_worker *w, struct gw_listener *l)
{
    struct gw_listener **more;

    l->w = w;
    if (w->draining ||
        !(more = realloc(w->listeners, (w->nlisteners + 1) * sizeof(*w->listeners))) ||
        !(l->lev = evconnlistener_new(w->base, accept_cb, l, LEV_OPT_CLOSE_ON_FREE, -1, l->fd))) {
        if (!w->draining)
            gw_log(GW_LOG_ERROR, "worker %u: listener %s: out of memory", w->id, l->addr);
        evutil_closesocket(l->fd);
        free(l);
        return;
    }
    w->listeners = more;
    l->fd = -1;
    evconnlistener_set_error_cb(l->lev, accept_error_cb);
    if (!w->listening)
        evconnlistener_disable(l->lev);
    w->listeners[w->nlisteners++] = l;
}

/* Stops accepting on the listener at <addr>, a listener the config
 * removed: its idle connections close now, the others after their current
 * request (Connection: close), and it is freed with the last of them. */
static void listener_close(struct gw_worker *w, const char *addr)
{
    struct gw_listener *l = NULL;
    size_t i;

    for (i = 0; i < w->nlisteners && !l; i++)
        if (strcmp(w->listeners[i]->addr, addr) == 0)
            l = w->listeners[i];
    if (!l)
        return;
    w->listeners[i - 1] = w->listeners[--w->nlisteners];
    if (l->lev)
        evconnlistener_free(l->lev);
    l->lev = NULL;
    gw_conn_close_idle(w, l);
    l->closed = 1;
    if (l->nconns == 0)
        free(l);
}

void gw_worker_lchange(struct gw_worker *w, struct gw_lchange *ch)
{
    struct gw_lchange **tail;

    pthread_mutex_lock(&w->lq_mu);
    for (tail = &w->lq; *tail; tail = &(*tail)->next)
        ;
    *tail = ch;
    pthread_mutex_unlock(&w->lq_mu);
    poke(w, 'L');
}

/* Applies the listener changes queued for <w>, in their order. */
static void listeners_apply(struct gw_worker *w)
{
    struct gw_lchange *ch, *next;

    pthread_mutex_lock(&w->lq_mu);
    ch = w->lq;
    w->lq = NULL;
    pthread_mutex_unlock(&w->lq_mu);
    for (; ch; ch = next) {
        next = ch->next;
        if (ch->add)
            listener_open(w, ch->add);
        else
            listener_close(w, ch->remove);
        if (ch->left)
            atomic_fetch_sub(ch->left, 1);
        free(ch);
    }
}

/* A drain's start: <w> accepts no more, for good. */
static void drain_listeners(struct gw_worker *w)
{
    w->draining = 1;
    for (size_t i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i]->lev)
            evconnlistener_free(w->listeners[i]->lev);
        w->listeners[i]->lev = NULL;
    }
    w->listening = 0;
}

static void drain_start(struct gw_worker *w)
{
    if (w->draining)
        return;
    drain_listeners(w);
    gw_conn_close_idle(w, NULL);
    if (w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/* An upgrade's drain ('G'): no more accepting (the new process has the
 * sockets: closing ours resets nothing queued), HTTP/2 says GOAWAY, and an
 * idle HTTP/1 keep-alive connection stays open, as a client may be sending
 * on it at this moment: its next request is answered with Connection:
 * close. The idle ones left close at the deadline ('W'). */
static void drain_soft(struct gw_worker *w)
{
    struct gw_conn *c, *next;

    if (w->draining)
        return;
    drain_listeners(w);
    for (c = LIST_FIRST(&w->conns); c; c = next) {
        next = LIST_NEXT(c, link);
        if (c->proto && c->st != GW_CONN_LINGER)
            c->proto->shutdown(c); /* HTTP/2: GOAWAY, then the close */
        else if (c->st == GW_CONN_PARKED)
            gw_conn_admit(c); /* its client sent a request: answered (Connection: close),
                               * over the cap for once, rather than reset */
    }
    if (w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/* The upgrade drain's deadline ('W'): idle connections close, tunnels get
 * a WebSocket close frame (1001, going away) and close once it is out. */
static void drain_deadline(struct gw_worker *w)
{
    struct gw_conn *c, *next;

    gw_conn_close_idle(w, NULL);
    for (c = LIST_FIRST(&w->conns); c; c = next) {
        next = LIST_NEXT(c, link);
        if (c->st == GW_CONN_TUNNEL)
            gw_tunnel_going_away(&c->req);
    }
    if (w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/* An upgrade's pause ('U'): no more accepting, and a duplicate of every
 * listening socket for the admin thread to send. */
static void hand_over(struct gw_worker *w)
{
    struct gw_process *p = w->proc;

    w->handing = 1;
    gw_worker_listen_update(w);
    pthread_mutex_lock(&p->hand_mu);
    for (size_t i = 0; i < w->nlisteners; i++) {
        struct gw_listener *l = w->listeners[i];
        struct gw_handed *more;
        int fd;

        if (!l->lev)
            continue;
        fd = fcntl(evconnlistener_get_fd(l->lev), F_DUPFD_CLOEXEC, 3);
        more = fd >= 0 ? realloc(p->handed, (p->nhanded + 1) * sizeof(*p->handed)) : NULL;
        if (!more) {
            if (fd >= 0)
                close(fd);
            p->hand_failed = 1;
            continue;
        }
        p->handed = more;
        more[p->nhanded] =
            (struct gw_handed){.fd = fd, .kind = GW_HANDED_LISTENER, .worker = w->id};
        snprintf(more[p->nhanded].addr, sizeof(more->addr), "%s", l->addr);
        p->nhanded++;
    }
    pthread_mutex_unlock(&p->hand_mu);
    atomic_fetch_add(&p->handed_workers, 1);
}

/* Another worker parked a connection at the cap ('R'): the oldest idle
 * connection here makes room for it, and the workers with parked
 * connections hear of the place ('P'). */
static void reclaim_for_other(struct gw_worker *w)
{
    struct gw_process *p = w->proc;
    const struct adm_config *cfg =
        atomic_load_explicit(&p->swap.current, memory_order_acquire)->cfg;
    unsigned parked = atomic_load_explicit(&p->parked, memory_order_relaxed);
    unsigned open = atomic_load_explicit(&p->conns, memory_order_relaxed);

    if (!parked) /* admitted meanwhile: a place came free */
        return;
    if (open - parked >= cfg->limits.max_connections && reclaim(w, GW_CONN_Q_IDLE) < 0)
        return;
    admit_parked(w);
    for (unsigned i = 0; i < p->nworkers && atomic_load(&p->parked); i++)
        if (&p->workers[i] != w)
            poke(&p->workers[i], 'P');
}

static void notify_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_worker *w = arg;
    char buf[64];
    ssize_t n;

    (void)what;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == 'D')
                drain_start(w);
            else if (buf[i] == 'X')
                event_base_loopbreak(w->base);
            else if (buf[i] == 'R' && !w->draining)
                reclaim_for_other(w);
            else if (buf[i] == 'P')
                admit_reclaiming(w);
            else if (buf[i] == 'U')
                hand_over(w);
            else if (buf[i] == 'u') {
                w->handing = 0;
                gw_worker_listen_update(w);
            } else if (buf[i] == 'G')
                drain_soft(w);
            else if (buf[i] == 'W')
                drain_deadline(w);
        }
    }
    listeners_apply(w);
    /* outside every request step: from now on only the current snapshot */
    adm_swap_ack(&w->proc->swap, w->id);
    gw_upconn_prune(w);
    gw_h2up_prune(w);
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_worker *w = arg;

    (void)fd;
    (void)what;
    /* every GW_SWEEP_MS, not on the 1 s tick: a tick that fell just before
     * a second's end left Date that second for 1 s more, up to 2 s behind */
    gw_date_update(w);
    gw_conn_sweep(w);
    gw_upconn_sweep(w);
    gw_h2up_sweep(w);
    gw_proxy_sweep(w);
    if (w->accept_resume && gw_now_ms() >= w->accept_resume)
        w->accept_resume = 0;
    /* other workers' connections may have closed, or the limit grown, or
     * turned idle since this worker's request for one */
    admit_reclaiming(w);
    if (w->ncq[GW_CONN_Q_PARKED])
        reclaim_elsewhere(w);
    gw_worker_listen_update(w);
    /* an access-log line reaches its file within GW_SWEEP_MS: one write(2)
     * per worker at most this often, none per request */
    if (w->log_len)
        gw_access_flush(w);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_worker *w = arg;

    (void)fd;
    (void)what;
    gw_upconn_sweep_idle(w);
    gw_h2up_sweep_idle(w);
}

void gw_worker_notify(void *proc, unsigned id)
{
    struct gw_process *p = proc;

    poke(&p->workers[id], 'S');
}

static void *worker_main(void *arg)
{
    struct gw_worker *w = arg;

    event_base_dispatch(w->base);
    gw_h2up_free_all(w);
    gw_upconn_free_all(w);
    gw_conn_free_all(w);
    if (w->log_len)
        gw_access_flush(w);
    atomic_fetch_sub(&w->proc->running, 1);
    return NULL;
}

int gw_worker_init(struct gw_worker *w, struct gw_process *proc, unsigned id)
{
    w->id = id;
    w->proc = proc;
    w->reqid_prefix = (uint32_t)(getpid() * 2654435761u) ^ (uint32_t)time(NULL);
    for (int q = 0; q < GW_CONN_NQ; q++)
        TAILQ_INIT(&w->cq[q]);
    if (pthread_mutex_init(&w->lq_mu, NULL) != 0)
        return -1;
    w->lq_ready = 1;
    return 0;
}

/* Frees what gw_worker_init() and gw_worker_start() made; after the thread
 * was joined. */
void gw_worker_destroy(struct gw_worker *w)
{
    struct gw_lchange *ch, *next;

    for (size_t i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i]->lev)
            evconnlistener_free(w->listeners[i]->lev);
        free(w->listeners[i]);
    }
    free(w->listeners);
    for (ch = w->lq; ch; ch = next) { /* changes it never applied */
        next = ch->next;
        if (ch->add)
            evutil_closesocket(ch->add->fd);
        free(ch->add);
        free(ch);
    }
    if (w->lq_ready)
        pthread_mutex_destroy(&w->lq_mu);
    if (w->notify_ev)
        event_free(w->notify_ev);
    if (w->tick_ev)
        event_free(w->tick_ev);
    if (w->sweep_ev)
        event_free(w->sweep_ev);
    gw_plim_free_all(w);
    if (w->base)
        event_base_free(w->base);
    if (w->notify_fd[0] > 0) {
        close(w->notify_fd[0]);
        close(w->notify_fd[1]);
    }
    free(w->log);
    gw_conn_pmem_free(w);
    gw_h2_cache_free(w);
    rt_ctx_free(w->rtctx);
}

/* Sets up the worker's base and events, opens the listeners queued for it
 * (gw_listen_commit at start) and starts its thread. */
int gw_worker_start(struct gw_worker *w)
{
    struct event_config *ec = event_config_new();
    struct timeval sec = {1, 0};

    if (!ec)
        return -1;
    gw_local_init();
    w->conn_freed = conn_freed;
    w->conn_idle = conn_idle;
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    w->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (!w->base)
        return -1;
    if (pipe(w->notify_fd) < 0)
        return -1;
    fcntl(w->notify_fd[0], F_SETFL, O_NONBLOCK);
    fcntl(w->notify_fd[1], F_SETFL, O_NONBLOCK);
    w->notify_ev = event_new(w->base, w->notify_fd[0], EV_READ | EV_PERSIST, notify_cb, w);
    w->tick_ev = event_new(w->base, -1, EV_PERSIST, tick_cb, w);
    w->sweep_ev = event_new(w->base, -1, EV_PERSIST, sweep_cb, w);
    if (!w->notify_ev || !w->tick_ev || !w->sweep_ev)
        return -1;
    event_add(w->notify_ev, NULL);
    event_add(w->tick_ev, &sec);
    {
        struct timeval sw = {0, GW_SWEEP_MS * 1000};
        event_add(w->sweep_ev, &sw);
    }
    gw_date_update(w);
    w->log_cap = 256 * 1024;
    if (!(w->log = malloc(w->log_cap)))
        return -1;
    if (!(w->rtctx = rt_ctx_new())) /* regexp routes match without allocating */
        return -1;
    w->listening = 1;
    listeners_apply(w);
    atomic_fetch_add(&w->proc->running, 1);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        atomic_fetch_sub(&w->proc->running, 1);
        return -1;
    }
    return 0;
}

/* Descriptors that <cfg> may need: a client connection and its upstream
 * one each at limits.max_connections, a listening socket per listener and
 * worker, a worker's epoll instance and notify pipe, and some for the
 * admin API, the logs, the state, health checks and the resolver. */
static rlim_t fds_needed(const struct adm_config *cfg)
{
    return 2 * (rlim_t)cfg->limits.max_connections +
           adm_config_workers(cfg) * (rlim_t)(cfg->nlisteners + 3) + 64;
}

void gw_worker_fd_limit(const struct adm_config *cfg, int start)
{
    static rlim_t warned; /* the need last warned about (admin thread only) */
    rlim_t need = fds_needed(cfg);
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    /* the soft limit is there for programs that select(2) on descriptors
     * below 1024; epoll has no such bound, and the hard limit is what the
     * operator allows (systemd's LimitNOFILE sets both) */
    if (start && rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            gw_log(GW_LOG_INFO,
                   "descriptor limit (RLIMIT_NOFILE) raised from %llu to %llu, the "
                   "hard limit",
                   (unsigned long long)was, (unsigned long long)rl.rlim_cur);
        else
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need || need == warned)
        return;
    warned = need;
    gw_log(GW_LOG_WARN,
           "descriptor limit (RLIMIT_NOFILE) %llu, hard %llu: limits.max_connections %u needs "
           "about %llu (a client and an upstream connection each); at the limit accepting "
           "pauses and new connections wait (raise LimitNOFILE or ulimit -n, or lower "
           "max_connections)",
           (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
           cfg->limits.max_connections, (unsigned long long)need);
}
