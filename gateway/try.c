/*
 * try.c - the try machine (try.h): pick, slot, budget, queue, and the one
 * "next server" decision.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/try.h"

#include <stdarg.h>
#include <stdio.h>

#include "gateway/h2up.h"
#include "gateway/hashkey.h"
#include "gateway/policy.h"

/* One error-log line about <c>'s upstream request, in the one form every
 * upstream warning takes: "upstream POOL server ADDR route ID request
 * REQID: " and the reason (<fmt>). <u> NULL: no server picked yet ("-"). */
static void up_vlog(int level, const struct gw_req *r, const up_pool *pool, size_t server,
                    const char *fmt, va_list ap)
{
    char why[512];

    if (!pool)
        pool = r->snap->pools[r->sr->upstream];
    vsnprintf(why, sizeof(why), fmt, ap);
    gw_log(level, "upstream %s server %s route %s request %.*s: %s", up_pool_name(pool),
           server != UP_NONE ? up_server_address(pool, server) : "-", r->sr->id, (int)r->reqid_len,
           r->reqid, why);
}

void gw_up_log(int level, const struct gw_req *r, const struct gw_upconn *u, const char *fmt, ...)
{
    va_list ap;

    if (!gw_log_enabled(level))
        return;
    va_start(ap, fmt);
    up_vlog(level, r, u ? u->pool : NULL, u ? u->server : UP_NONE, fmt, ap);
    va_end(ap);
}

void gw_up_log_at(int level, const struct gw_req *r, const struct gw_try_at *at, const char *fmt,
                  ...)
{
    va_list ap;

    if (!gw_log_enabled(level))
        return;
    va_start(ap, fmt);
    up_vlog(level, r, at->pool, at->server, fmt, ap);
    va_end(ap);
}

void gw_try_at_of(const struct gw_upconn *u, struct gw_try_at *at)
{
    *at = (struct gw_try_at){
        .pool = u->pool,
        .server = u->server,
        .connecting = u->st == GW_UP_CONNECTING,
        .reached = (unsigned char)gw_try_reached(u),
        .waiting = u->st == GW_UP_WAITING,
        .got_bytes = (unsigned char)u->got_bytes,
        .grpc = -1,
    };
}

int gw_try_no_body(const struct h1_request *rq)
{
    return rq->body_kind == H1_BODY_NONE ||
           (rq->body_kind == H1_BODY_LENGTH && rq->content_length == 0);
}

int gw_try_idempotent(const struct h1_request *rq)
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

int gw_try_reached(const struct gw_upconn *u)
{
    return u->io.established;
}

/* Whether <c>'s request can be sent again whole: it has no body, or its
 * body was buffered, or none of it went to a server yet. */
int gw_try_resendable(const struct gw_req *r)
{
    return r->body || gw_try_no_body(&r->rp->req) || !r->body_fed || (r->replay && !r->replay_over);
}

/* What a pick for <c>'s next try depends on: r->tried, its hash key, the
 * time for slow start. */
static void pick_of(struct gw_req *r, struct up_pick *pk)
{
    const struct adm_upstream *def = &r->snap->cfg->upstreams[r->sr->upstream];

    *pk = (struct up_pick){
        .tried = r->tried.n ? &r->tried : NULL,
        .hash = def->balance == ADM_BALANCE_HASH ? gw_hashkey(r, def) : 0,
        .now_ms = def->slow_start_ms ? (uint64_t)gw_now_ms() : 0,
    };
}

/* A server for <c>'s next try, not in r->tried: the balancer's pick among
 * those with a slot free on this worker (gw_plim_pick). UP_NONE when no
 * server is usable, GW_PICK_FULL when every usable one is at its
 * max_connections (the request waits). */
size_t gw_try_pick(struct gw_req *r)
{
    struct up_pick pk;

    pick_of(r, &pk);
    return gw_plim_pick(r->plim, r->snap->pools[r->sr->upstream], r->c->w->id, &pk);
}

/* The try starts on <server>: it takes a slot there, and counts in the
 * retry budget (as the retry admitted for it, or as a first try). Its wait
 * for a slot, if it waited, is over: should this try fail and its retry
 * wait again, that is a new wait with a deadline of its own. */
void gw_try_start(struct gw_req *r, size_t server)
{
    struct gw_plim *l = r->plim;

    r->queue_deadline = 0;
    if (!l)
        return;
    if (l->share) {
        gw_plim_take(l, server);
        r->slot = server + 1;
    }
    if (l->budget_on) {
        if (!r->next_retry)
            up_budget_start(&l->name->budget);
        r->budget = r->next_retry ? 2 : 1;
    }
    r->next_retry = 0;
}

/* The try on <c>'s current server is over: its slot and its place in the
 * retry budget are given back. */
static void try_end(struct gw_req *r)
{
    struct gw_plim *l = r->plim;

    if (!l)
        return;
    if (r->slot) {
        gw_plim_release(r->c->w, l, r->slot - 1);
        r->slot = 0;
    }
    if (r->budget) {
        up_budget_end(&l->name->budget, r->budget == 2);
        r->budget = 0;
    }
}

/* The try is over and its upstream connection freed (a retry follows). */
void gw_try_detach(struct gw_req *r)
{
    struct gw_upconn *u = r->up;

    try_end(r);
    if (r->ups) {
        struct gw_h2us *st = r->ups;
        r->ups = NULL;
        gw_h2us_detach(st);
    }
    if (u) {
        r->up = NULL;
        u->r = NULL;
        gw_upconn_free(u);
    }
}

/* The proxied request is over: out of the queue, its try ended, its
 * buffered body freed; every per-request field of the limits back to 0. */
void gw_try_finish(struct gw_req *r)
{
    struct gw_plim *l = r->plim;

    if (r->body) {
        evbuffer_free(r->body);
        r->body = NULL;
    }
    if (r->replay) {
        evbuffer_free(r->replay);
        r->replay = NULL;
    }
    r->replay_over = 0;
    gw_policy_body_free(r); /* whole or cancelled mid-body */
    if (!l)
        return;
    if (r->queued) {
        up_queue_remove(l->queue, r);
        r->queued = 0;
        up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUED, -1);
    }
    r->queue_deadline = 0;
    try_end(r);
    if (r->next_retry) { /* admitted, but never sent */
        up_budget_end(&l->name->budget, 1);
        r->next_retry = 0;
    }
    gw_plim_put(l);
    r->plim = NULL;
}

/* A request queued again before it got a slot (woken, it found none it
 * may use) keeps the deadline of its first wait: queue_timeout_ms bounds
 * its whole wait for a slot. */
int gw_try_wait(struct gw_req *r)
{
    struct gw_plim *l = r->plim;

    if (!r->queue_deadline)
        r->queue_deadline = (uint64_t)gw_now_ms() + l->queue_timeout_ms;
    if (!l->queue || up_queue_push(l->queue, r, r->queue_deadline) < 0) {
        up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUE_OVERFLOWS, 1);
        return -1;
    }
    r->queued = 1;
    up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUED, 1);
    return 0;
}

struct gw_req *gw_try_dequeue(struct gw_plim *l)
{
    struct gw_req *r;

    if (!l->queue || !up_queue_len(l->queue))
        return NULL;
    r = up_queue_pop(l->queue);
    r->queued = 0;
    up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUED, -1);
    return r;
}

struct gw_req *gw_try_expired(struct gw_plim *l, uint64_t now)
{
    struct gw_req *r;

    if (!l->queue || !(r = up_queue_expired(l->queue, now)))
        return NULL;
    r->queued = 0;
    up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUED, -1);
    up_pool_count(l->pool, r->c->w->id, UP_PC_QUEUE_TIMEOUTS, 1);
    return r;
}

/* retry_on_status: the final response of <u> has a status the pool
 * retries, no byte of it went to the client yet (not even a 103), and the
 * request, which reached the server, may go again (idempotent, sent
 * whole). */
static int status_may_retry(const struct gw_req *r, const struct adm_upstream *def, int status)
{
    return r->plim /* a pool without retries (nor limits) has none */ &&
           adm_statuses_has(&def->retry_on_status, (unsigned)status) && !r->bytes_out &&
           r->body_done && gw_try_resendable(r) && gw_try_idempotent(&r->rp->req);
}

/* retry_on_grpc_status: a gRPC call answered trailers-only with a status
 * the pool retries (UNAVAILABLE by default: the server says it did not
 * act on the call), nothing of it sent to the client yet, and the call
 * can be sent again whole. gRPC calls are all POSTs: the status, not the
 * method, says that a second try is safe. */
static int grpc_may_retry(const struct gw_req *r, const struct adm_upstream *def, int code)
{
    return r->plim && adm_statuses_has(&def->retry_on_grpc_status, (unsigned)code) &&
           !r->bytes_out && r->body_done && gw_try_resendable(r);
}

/* A try that failed with <what> before any answer may go to another
 * server: no server answered it (a connect failure or timeout, or a reset
 * or close before any response byte), it can be sent again whole, and when
 * its head may have reached the server, it is idempotent. */
static int failure_may_retry(const struct gw_req *r, const struct gw_try_at *at, short what)
{
    if (!gw_try_resendable(r))
        return 0;
    if (at->connecting || at->unprocessed) /* nothing reached a server, or it says so */
        return (what & (GW_IO_EOF | GW_IO_ERR | GW_IO_TIMEOUT)) != 0;
    return at->waiting && !at->got_bytes && (what & (GW_IO_EOF | GW_IO_ERR)) &&
           gw_try_idempotent(&r->rp->req);
}

int gw_try_same(struct gw_req *r, const struct gw_upconn *u, short what)
{
    const struct h1_request *rq = &r->rp->req;

    if (u->st == GW_UP_WAITING && !u->got_bytes && u->reused && !r->retried &&
        (what & (GW_IO_EOF | GW_IO_ERR)) && gw_try_idempotent(rq) &&
        rq->body_kind == H1_BODY_NONE) {
        r->retried = 1;
        return 1;
    }
    return 0;
}

enum gw_next gw_try_next(struct gw_req *r, struct gw_upconn *u, short what, int status,
                         size_t *server)
{
    struct gw_try_at at;

    gw_try_at_of(u, &at);
    return gw_try_next_at(r, &at, what, status, server);
}

enum gw_next gw_try_next_at(struct gw_req *r, const struct gw_try_at *at, short what, int status,
                            size_t *server)
{
    const struct adm_upstream *def = &r->snap->cfg->upstreams[r->sr->upstream];
    up_pool *pool = r->snap->pools[r->sr->upstream];
    struct up_pick pk;
    char why[64];
    int counted;
    size_t s;

    if (r->tries >= def->retries)
        return GW_NEXT_GIVE_UP;
    if (at->grpc >= 0 ? !grpc_may_retry(r, def, at->grpc)
        : status      ? !status_may_retry(r, def, status)
                      : !failure_may_retry(r, at, what))
        return GW_NEXT_GIVE_UP;
    if (at->grpc >= 0)
        snprintf(why, sizeof(why), "answered grpc-status %d", at->grpc);
    else if (status)
        snprintf(why, sizeof(why), "answered %d", status);
    else if (at->unprocessed)
        snprintf(why, sizeof(why), "refused the stream unprocessed");
    else
        snprintf(why, sizeof(why), "%s",
                 (what & GW_IO_TIMEOUT) ? "connect timed out"
                 : (what & GW_IO_EOF)   ? "closed before responding"
                                        : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    up_tried_add(&r->tried, at->server);
    pick_of(r, &pk);
    s = gw_plim_retry(r->plim, pool, r->c->w->id, &pk, at->reached, &counted);
    if (s == GW_PICK_REFUSED) {
        up_pool_count(pool, r->c->w->id, UP_PC_BUDGET_EXHAUSTED, 1);
        r->retry_refused = 1;
        return GW_NEXT_GIVE_UP;
    }
    if (s == UP_NONE) {
        /* the answer we have is the best one; a failure with no server
         * left to try is answered as without retries (502, 504 for a
         * timeout, the reason logged), as nginx answers its last try's
         * failure: a lone server's pool retries by default and must
         * answer as it did; only a pool whose every server is down now
         * gets its 503 */
        if (status || at->grpc >= 0 || !up_pool_all_down(pool))
            return GW_NEXT_GIVE_UP;
        gw_try_detach(r);
        return GW_NEXT_NONE_LEFT;
    }
    r->next_retry = (unsigned char)counted; /* 0: admitted as the first attempt it still is */
    gw_up_log_at(GW_LOG_WARN, r, at, "%s; retrying on another server", why);
    up_pool_count(pool, r->c->w->id, UP_PC_RETRIES, 1);
    r->tries++;
    gw_try_detach(r);
    *server = s;
    return s == GW_PICK_FULL ? GW_NEXT_WAIT : GW_NEXT_SERVER;
}
