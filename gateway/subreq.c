/*
 * subreq.c - a subrequest to a pool (subreq.h): the pick and the slot,
 * a pooled or new connection, the head sent, the answer read (interim
 * heads skipped, the final head copied out of the input, the body decoded
 * into a bounded buffer), the one timer over the whole of it, and the
 * connection parked again only when its answer was read whole and the
 * server keeps it.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/subreq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/health.h"
#include "gateway/io_tls.h"
#include "gateway/limits.h"
#include "gateway/proxy.h"
#include "gateway/try.h"

#define INTERIM_MAX 8 /* 1xx heads skipped before a final one */

struct gw_subreq {
    struct gw_worker *w;
    const struct adm_snapshot *s;
    size_t up, server;
    up_pool *pool;
    struct gw_plim *plim; /* the pool's limits here, NULL: it has none */
    int slot;             /* it holds a slot on <server> */
    struct gw_upconn *u;  /* NULL once freed (its holder) */
    struct event *timer;
    gw_sub_done_fn done;
    void *arg;
    struct gw_sub_spec spec;
    unsigned char retried; /* once on a fresh connection (a pooled one died idle) */
    unsigned char interim; /* 1xx heads skipped */
    unsigned char big;     /* the body passed body_max */
    char *ahead;           /* the final head's bytes, the parser's slices rebased there */
    struct evbuffer *body; /* decoded, at most spec.body_max; NULL until a byte comes */
    char why[160];         /* why it failed, for the caller's log; "" when unknown */
};

/* Gives back what <q> holds but its connection, and frees it. */
static void sub_free(struct gw_subreq *q)
{
    if (q->slot)
        gw_plim_release(q->w, q->plim, q->server);
    if (q->plim)
        gw_plim_put(q->plim);
    if (q->timer)
        event_free(q->timer);
    if (q->body)
        evbuffer_free(q->body);
    free(q->ahead);
    free(q);
}

/* Ends <q> with <outcome>: <done> called (the answer still in the
 * connection's parser and <q>), then the connection parked when its
 * answer was read whole and the server keeps it, else closed, and <q>
 * freed. */
static void finish(struct gw_subreq *q, enum gw_sub_outcome outcome)
{
    struct gw_upconn *u = q->u;
    struct gw_sub_answer a = {.outcome = outcome,
                              .server = up_server_address(q->pool, q->server),
                              .why = outcome == GW_SUB_FAILED && q->why[0] ? q->why : NULL};
    int reuse = 0;
    unsigned idle_ms;

    if (u && (outcome == GW_SUB_ANSWERED || outcome == GW_SUB_BIG)) {
        a.status = u->resp.status;
        a.hdr = u->resp.hdr;
        a.nhdr = u->resp.nhdr;
        reuse = outcome == GW_SUB_ANSWERED && u->resp.msg_done && !u->eof &&
                h1_resp_keep_alive(&u->resp) && !evbuffer_get_length(u->io.in);
        /* an answer, as a proxied one: a failure only when outlier.statuses has it */
        gw_health_status(q->w->id, q->s, q->up, q->server, (unsigned)a.status);
    }
    if (outcome == GW_SUB_ANSWERED && q->body && evbuffer_get_length(q->body)) {
        a.body_len = evbuffer_get_length(q->body);
        if (!(a.body = (const char *)evbuffer_pullup(q->body, -1))) {
            a.outcome = GW_SUB_FAILED; /* out of memory gathering it */
            a.why = "out of memory";
        }
    }
    /* read before done(): it may end the request, unpinning q->s */
    idle_ms = q->s->cfg->upstreams[q->up].idle_timeout_ms;
    q->done(q->arg, &a);
    if (u) {
        u->holder = NULL;
        gw_upconn_release(u, reuse, idle_ms);
    }
    sub_free(q);
}

static void fail(struct gw_subreq *q, enum up_failure kind, enum gw_sub_outcome outcome)
{
    up_count_failure(q->pool, q->w->id, q->server, kind);
    gw_health_outcome(q->w->id, q->s, q->up, q->server, 1);
    finish(q, outcome);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    fail(arg, UP_F_TIMEOUT, GW_SUB_TIMEOUT);
}

static void body_cb(void *ctx, const char *data, size_t len)
{
    struct gw_subreq *q = ctx;

    if (q->big || (q->body ? evbuffer_get_length(q->body) : 0) + len > q->spec.body_max)
        q->big = 1;
    else if ((!q->body && !(q->body = evbuffer_new())) || evbuffer_add(q->body, data, len) < 0)
        q->big = 1; /* out of memory: as good as too big, the connection closes */
}

/* Keeps the final head (<n> bytes at <p>, parsed into u->resp) apart from
 * the input, the parser's slices moved onto the copy: the input is
 * drained as the body is read. -1 when out of memory. */
static int keep_head(struct gw_subreq *q, const char *p, size_t n)
{
    struct h1_resp *rp = &q->u->resp;

    if (!(q->ahead = malloc(n)))
        return -1;
    memcpy(q->ahead, p, n);
    for (size_t i = 0; i < rp->nhdr; i++) {
        rp->hdr[i].name.ptr = q->ahead + (rp->hdr[i].name.ptr - p);
        rp->hdr[i].value.ptr = q->ahead + (rp->hdr[i].value.ptr - p);
    }
    rp->status_text.ptr = NULL; /* not used */
    return 0;
}

/* The answer's head: 1 when the final one is here (the body phase
 * begun), 0 for more bytes, -1 when there is none to be had (finished). */
static int read_head(struct gw_subreq *q)
{
    struct gw_upconn *u = q->u;
    struct evbuffer *in = u->io.in;

    for (;;) {
        size_t n = evbuffer_get_length(in), hl = 0;
        const char *p;
        int rc;

        if (n > GW_SUB_HEAD_MAX)
            n = GW_SUB_HEAD_MAX;
        if (!(p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n)))
            return 0;
        rc = h1_resp_parse_head(&u->resp, p, n, GW_SUB_HEAD_MAX, &hl);
        if (rc == 0)
            return 0;
        if (rc < 0 || u->resp.status == 101 ||
            (u->resp.status < 200 && ++q->interim > INTERIM_MAX)) {
            finish(q, GW_SUB_MALFORMED);
            return -1;
        }
        if (u->resp.status < 200) { /* 100 Continue, 103 Early Hints: not ours */
            evbuffer_drain(in, hl);
            continue;
        }
        if (keep_head(q, p, hl) < 0) {
            snprintf(q->why, sizeof(q->why), "out of memory");
            finish(q, GW_SUB_FAILED);
            return -1;
        }
        evbuffer_drain(in, hl);
        gw_upconn_set_state(u, GW_UP_BODY);
        if (q->spec.no_body || u->resp.status == 204 || u->resp.status == 304)
            u->resp.msg_done = 1;
        else
            h1_resp_begin_body(&u->resp);
        return 1;
    }
}

static void read_cb(struct gw_io *io, void *arg)
{
    struct gw_subreq *q = arg;
    struct gw_upconn *u = q->u;
    struct evbuffer_iovec v;

    (void)io;
    u->got_bytes = 1;
    if (u->st == GW_UP_WAITING && read_head(q) <= 0)
        return;
    while (!u->resp.msg_done && !q->big && gw_peek_first(io->in, &v)) {
        size_t used = 0;
        if (h1_resp_feed_body(&u->resp, v.iov_base, v.iov_len, &used, body_cb, q) < 0) {
            finish(q, GW_SUB_MALFORMED);
            return;
        }
        evbuffer_drain(io->in, used);
        if (used < v.iov_len && !u->resp.msg_done)
            break; /* cannot happen: the parser takes all it is given until the end */
    }
    if (q->big)
        finish(q, GW_SUB_BIG);
    else if (u->resp.msg_done)
        finish(q, GW_SUB_ANSWERED);
}

static void write_cb(struct gw_io *io, void *arg)
{
    (void)io, (void)arg;
}

static int send_head(struct gw_subreq *q, int fresh);

static void event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_subreq *q = arg;
    struct gw_upconn *u = q->u;
    int e = EVUTIL_SOCKET_ERROR(); /* before any other call sets it */
    char tls[128];

    (void)io;
    if (what & GW_IO_CONNECTED) {
        gw_upconn_set_state(u, GW_UP_WAITING);
        gw_upconn_session_keep(u);
        return;
    }
    if ((what & GW_IO_EOF) && u->st == GW_UP_BODY && h1_resp_needs_eof(&u->resp)) {
        u->eof = 1; /* a body delimited by the close: it is whole */
        u->resp.msg_done = 1;
        finish(q, GW_SUB_ANSWERED);
        return;
    }
    if (u->reused && !u->got_bytes && !q->retried) {
        /* a pooled connection the server closed while idle: once more on
         * a fresh one to the same server, which did not fail */
        q->retried = 1;
        u->holder = NULL;
        q->u = NULL;
        gw_upconn_free(u);
        if (send_head(q, 1) < 0) {
            snprintf(q->why, sizeof(q->why), "cannot open a connection: %s", strerror(errno));
            fail(q, UP_F_CONNECT, GW_SUB_FAILED);
        }
        return;
    }
    /* as a proxied try's failure is logged (proxy.c) */
    if (gw_tls_error(&u->io, tls, sizeof(tls)))
        snprintf(q->why, sizeof(q->why), "TLS handshake failed: %s", tls);
    else
        snprintf(q->why, sizeof(q->why), "%s",
                 (what & GW_IO_EOF) ? (u->st == GW_UP_CONNECTING || u->st == GW_UP_WAITING
                                           ? "closed before answering"
                                           : "closed before the answer ended")
                 : e                ? evutil_socket_error_to_string(e)
                                    : "the connection failed");
    if (u->st == GW_UP_CONNECTING)
        fail(q, gw_try_reached(u) ? UP_F_TLS : UP_F_CONNECT, GW_SUB_FAILED);
    else
        fail(q, UP_F_RESET, GW_SUB_FAILED);
}

/* Sends the head on a pooled connection to q->server, or a new one (always
 * when <fresh>). 0, or -1 when none could be opened. */
static int send_head(struct gw_subreq *q, int fresh)
{
    struct gw_upconn *u = fresh ? NULL : gw_upconn_take(q->w, q->pool, q->server);
    const char *addr = up_server_address(q->pool, q->server);
    struct gw_obuf ob;

    if (!u && !(u = gw_upconn_connect(q->w, q->s, q->up, q->server)))
        return -1;
    gw_tmo_set(&u->tmo, 0, 0); /* ours is the one timer over the whole subrequest */
    gw_io_setcb(&u->io, read_cb, write_cb, event_cb, q);
    up_count_request(q->pool, q->w->id, q->server);
    gw_upconn_lend(u, NULL);
    u->resp.msg_done = 0;
    u->got_bytes = 0;
    u->holder = &q->u;
    q->u = u;
    gw_ob_init_io(&ob, &u->io);
    q->spec.head(q->arg, &ob);
    gw_ob_field(&ob, "Host", 4, addr, strlen(addr));
    gw_ob_lit(&ob, "\r\n");
    gw_ob_flush(&ob);
    if (!u->reused) /* a parked connection reads already */
        gw_io_read(&u->io, 1);
    return 0;
}

struct gw_subreq *gw_subreq_start(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                  const struct gw_sub_spec *spec, gw_sub_done_fn done, void *arg)
{
    const struct adm_upstream *def = &s->cfg->upstreams[up];
    struct gw_subreq *q = calloc(1, sizeof(*q));
    struct timeval tv = {spec->timeout_ms / 1000, (spec->timeout_ms % 1000) * 1000};
    struct up_pick pk = {.hash = spec->hash,
                         .now_ms = def->slow_start_ms ? (uint64_t)gw_now_ms() : 0};

    if (!q)
        return NULL;
    *q = (struct gw_subreq){
        .w = w, .s = s, .up = up, .pool = s->pools[up], .done = done, .arg = arg, .spec = *spec};
    if (def->max_connections && !(q->plim = gw_plim_get(w, q->pool, def, gw_proxy_dispatch)))
        goto fail;
    q->server = gw_plim_pick(q->plim, q->pool, w->id, &pk);
    if (q->server == UP_NONE || q->server == GW_PICK_FULL)
        goto fail;
    if (q->plim && q->plim->share) {
        gw_plim_take(q->plim, q->server);
        q->slot = 1;
    }
    if (!(q->timer = evtimer_new(w->base, timer_cb, q)) || evtimer_add(q->timer, &tv) < 0 ||
        send_head(q, 0) < 0)
        goto fail;
    return q;
fail:
    sub_free(q);
    return NULL;
}

void gw_subreq_cancel(struct gw_subreq *q)
{
    if (q->u) {
        q->u->holder = NULL;
        gw_upconn_free(q->u);
    }
    sub_free(q);
}
