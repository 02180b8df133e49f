/*
 * h2up.c - HTTP/2 connections to upstream servers (h2up.h): connect
 * (TLS with ALPN h2, or prior knowledge), the libnghttp2 client session
 * over the transport seam, frames in and out, the streams' lifetimes,
 * GOAWAY, failures handed to each stream's request, and the worker's
 * sweeps (connect timeouts, idle sessions, pools that left).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/h2up.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "admin/http1/h2head.h"
#include "gateway/h2.h"
#include "gateway/io_tls.h"
#include "gateway/upconn.h"

/* Streams a session takes before the server's SETTINGS say how many it
 * allows (RFC 9113 6.5.2 recommends no fewer than 100). */
#define GW_H2UP_STREAMS 100
/* The window we give each response stream: what one stream can make us
 * hold beyond the client's own output (GW_HWM); DATA is given back as
 * window only once the client took it (gw_h2us_consume). */
#define GW_H2UP_WINDOW (256 * 1024)
/* Streams one connection takes at most, whatever the server allows. */
#define GW_H2UP_MAX_STREAMS 128
/* The connection's window: every stream's window at once, so that clients
 * that do not read (each holding its stream's window) never starve the
 * others on the connection. */
#define GW_H2UP_CONN_WINDOW (GW_H2UP_MAX_STREAMS * GW_H2UP_WINDOW)

static nghttp2_session_callbacks *cbs;
static nghttp2_option *opt;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void h2up_free(struct gw_h2up *h);
static void fail(struct gw_h2up *h, short what);

/* ---- re-entry: nothing is freed inside a session's callbacks ---- */

static void stream_free(struct gw_h2us *st)
{
    if (st->lent) { /* the balancer hears of its end once */
        st->lent = 0;
        up_request_end(st->pool, st->wid, st->server);
    }
    if (st->body)
        evbuffer_free(st->body);
    free(st->rtr);
    if (st->f != st->fin)
        free(st->f);
    free(st);
}

static void enter(struct gw_h2up *h)
{
    h->depth++;
}

/* Frees what waited for the outermost callback to return: detached
 * streams nghttp2 closed, and the session itself when it failed. */
static void reap(struct gw_h2up *h)
{
    struct gw_h2us *st, *next;

    for (st = TAILQ_FIRST(&h->streams); st; st = next) {
        next = TAILQ_NEXT(st, link);
        if (!st->r && (st->closed || h->dead)) {
            TAILQ_REMOVE(&h->streams, st, link);
            stream_free(st);
        }
    }
}

static void idle_check(struct gw_h2up *h)
{
    if (!h->nst && !h->idle_until)
        h->idle_until = gw_now_ms() + h->idle_ms;
}

static void leave(struct gw_h2up *h)
{
    if (--h->depth)
        return;
    reap(h);
    if (h->dead)
        h2up_free(h);
    else
        idle_check(h);
}

/* ---- output ---- */

/* Sends what nghttp2 has queued into the connection's output, up to
 * GW_HWM; the write callback goes on when it drained. Then the requests
 * whose bodies found room are read again. */
static void flush(struct gw_h2up *h)
{
    /* nothing before the connection is open: a stream given up meanwhile
     * (its timeout, its client gone) is then cancelled inside nghttp2 and
     * never reaches the server, so its retry elsewhere cannot run twice */
    if (!h->open)
        return;
    for (int round = 0; round < 4 && !h->dead; round++) {
        int again = 0;
        struct gw_h2us *st;

        while (evbuffer_get_length(h->io.out) < GW_HWM) {
            const uint8_t *p;
            ssize_t n = nghttp2_session_mem_send(h->s, &p);
            if (n < 0) {
                fail(h, GW_IO_ERR);
                return;
            }
            if (!n)
                break;
            evbuffer_add(h->io.out, p, (size_t)n);
        }
        TAILQ_FOREACH(st, &h->streams, link)
        {
            if (h->dead)
                return;
            if (st->r && st->room) { /* the provider took bytes: room */
                st->room = 0;
                gw_ph2_body_room(st);
                again = 1;
            }
        }
        if (!again || !nghttp2_session_want_write(h->s))
            break;
    }
    if (!h->dead && !nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s) &&
        !evbuffer_get_length(h->io.out))
        fail(h, GW_IO_EOF); /* both sides sent GOAWAY and every stream is done */
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_h2up *h = arg;

    (void)fd;
    (void)what;
    h->kicked = 0;
    enter(h);
    flush(h);
    leave(h);
}

void gw_h2up_want_send(struct gw_h2up *h)
{
    if (h->depth || h->kicked || h->dead)
        return; /* inside its callbacks, flush() runs before they return */
    h->kicked = 1;
    event_active(h->kick, EV_WRITE, 0);
}

/* ---- nghttp2's callbacks ---- */

static struct gw_h2us *stream_of(struct gw_h2up *h, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h->s, id);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2us *st = stream_of(ud, f->hd.stream_id);

    (void)s;
    if (!st)
        return 0;
    st->got = 1;
    if (st->head) { /* after the final head: trailers */
        st->in_trailers = 1;
        st->ftrail = st->flen;
    } else { /* a (new) head: an interim one's fields are forgotten */
        st->flen = 0;
        st->status = 0;
    }
    return 0;
}

static int fields_add(struct gw_h2us *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                      size_t vlen)
{
    size_t need = st->flen + nlen + vlen + 4;

    if (need > GW_UP_HEAD_MAX)
        return -1;
    if (!st->f) {
        st->f = st->fin;
        st->fcap = sizeof(st->fin);
    }
    if (need > st->fcap) {
        size_t cap = st->fcap * 2;
        char *p;
        while (cap < need)
            cap *= 2;
        if (st->f == st->fin) {
            if (!(p = malloc(cap)))
                return -1;
            memcpy(p, st->f, st->flen);
        } else if (!(p = realloc(st->f, cap))) {
            return -1;
        }
        st->f = p;
        st->fcap = cap;
    }
    memcpy(st->f + st->flen, name, nlen);
    memcpy(st->f + st->flen + nlen, ": ", 2);
    memcpy(st->f + st->flen + nlen + 2, value, vlen);
    memcpy(st->f + st->flen + nlen + 2 + vlen, "\r\n", 2);
    st->flen = need;
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    struct gw_h2us *st = stream_of(ud, f->hd.stream_id);

    (void)flags;
    if (!st || st->bad)
        return 0;
    if (nlen && name[0] == ':') {
        if (!st->in_trailers && nlen == 7 && !memcmp(name, ":status", 7) && vlen == 3)
            st->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        return 0; /* nghttp2 checked the pseudo-fields (RFC 9113 8.3.2) */
    }
    if (fields_add(st, name, nlen, value, vlen) < 0) {
        st->bad = 1; /* over GW_UP_HEAD_MAX: the stream is reset (502) */
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                         NGHTTP2_INTERNAL_ERROR)
                   ? NGHTTP2_ERR_CALLBACK_FAILURE
                   : 0;
    }
    return 0;
}

static struct gw_h2up_seen *seen_slot(struct gw_worker *w, const up_pool *pool, size_t server)
{
    uintptr_t k = ((uintptr_t)pool >> 4) * 31 + server;
    return &w->h2up_seen[k % GW_H2UP_SEEN];
}

/* Remembers the stream limit <h>'s server just said. */
static void seen_put(struct gw_h2up *h)
{
    struct gw_h2up_seen *e = seen_slot(h->w, h->pool, h->server);

    *e = (struct gw_h2up_seen){
        h->pool, h->server,
        nghttp2_session_get_remote_settings(h->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)};
}

/* The stream limit to assume for a new connection to <server> of <pool>:
 * what the server said last on this worker, else GW_H2UP_STREAMS. A
 * burst to a server whose limit is low thus does not fill a new
 * connection past it only to have the rest refused. */
static uint32_t seen_get(struct gw_worker *w, const up_pool *pool, size_t server)
{
    const struct gw_h2up_seen *e = seen_slot(w, pool, server);

    return e->pool == pool && e->server == server ? e->max : GW_H2UP_STREAMS;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2up *h = ud;
    struct gw_h2us *st;
    int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

    (void)s;
    switch (f->hd.type) {
    case NGHTTP2_GOAWAY:
        h->goaway = 1; /* streams above its last id are closed REFUSED_STREAM by nghttp2 */
        return 0;
    case NGHTTP2_SETTINGS:
        if (!(f->hd.flags & NGHTTP2_FLAG_ACK)) {
            h->settings = 1;
            seen_put(h);
        }
        return 0;
    case NGHTTP2_HEADERS:
        if (!(st = stream_of(h, f->hd.stream_id)) || !st->r || st->bad)
            return 0;
        if (st->in_trailers) {
            if (end) { /* nghttp2 refuses trailers without END_STREAM */
                st->ended = 1;
                gw_ph2_end(st);
            }
            return 0;
        }
        if (st->status < 200) /* interim: dropped (its fields forgotten) */
            return 0;
        st->head = 1;
        st->ended = (unsigned char)end;
        gw_ph2_head(st, end);
        return 0;
    case NGHTTP2_DATA:
        if (end && (st = stream_of(h, f->hd.stream_id)) && st->r && st->head && !st->ended) {
            st->ended = 1;
            gw_ph2_end(st);
        }
        return 0;
    default:
        return 0;
    }
}

static int on_data_chunk_recv(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                              size_t len, void *ud)
{
    struct gw_h2us *st = stream_of(ud, id);

    (void)flags;
    if (!st || !st->r || !st->head) {
        /* nobody reads it: its window is given back at once */
        return nghttp2_session_consume(s, id, len) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
    }
    gw_ph2_data(st, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    struct gw_h2up *h = ud;
    struct gw_h2us *st = stream_of(h, id);

    (void)s;
    if (!st)
        return 0;
    st->closed = 1;
    st->code = code;
    if (h->nst)
        h->nst--;
    if (st->r && !st->ended)
        gw_ph2_fail(st, 0);
    return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2us *st;

    (void)s;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST &&
        (st = stream_of(ud, f->hd.stream_id)))
        st->sent = 1;
    return 0;
}

/* The request's trailers as HEADERS that end the stream, after its
 * last DATA (which then did not end it). */
static int submit_trailers(nghttp2_session *s, struct gw_h2us *st)
{
    struct h1_header hv[64];
    nghttp2_nv nv[64];
    size_t n = h2h_fields(st->rtr, st->rtr_len, hv, 64);

    if (n > 64)
        n = 64;
    for (size_t i = 0; i < n; i++)
        nv[i] = (nghttp2_nv){(uint8_t *)hv[i].name.ptr, (uint8_t *)hv[i].value.ptr, hv[i].name.len,
                             hv[i].value.len, NGHTTP2_NV_FLAG_NONE};
    return nghttp2_submit_trailer(s, st->id, nv, n);
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    struct gw_h2us *st = src->ptr;
    size_t have;
    int n;

    (void)id;
    (void)ud;
    if (!st->r) /* detached: its RST_STREAM follows */
        return NGHTTP2_ERR_DEFERRED;
    have = evbuffer_get_length(st->body);
    if (!have && !st->body_eof) {
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    n = evbuffer_remove(st->body, buf, len < have ? len : have);
    if (n < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (st->body_eof && have == (size_t)n) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        st->out_done = 1;
        if (st->rtr_len) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            if (submit_trailers(s, st) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    } else if (have > GW_LWM && have - (size_t)n <= GW_LWM) {
        st->room = 1; /* flush() reads the client's body on */
    }
    return n;
}

static void callbacks_init(void)
{
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0)
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    /* windows open as the client takes the bytes */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_peer_max_concurrent_streams(opt, GW_H2UP_STREAMS);
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* a server that floods us is as bounded as a client would be */
    nghttp2_option_set_max_continuations(opt, 8);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
}

void gw_h2up_init(void)
{
    pthread_once(&once, callbacks_init);
}

/* ---- the connection ---- */

/* Every stream still with a request fails with <what>; the session is
 * freed once its callbacks returned. */
static void fail(struct gw_h2up *h, short what)
{
    struct gw_h2us *st;

    if (h->dead)
        return;
    h->dead = 1;
    h->goaway = 1;
    enter(h);
    gw_io_read(&h->io, 0);
    TAILQ_FOREACH(st, &h->streams, link)
    {
        if (st->r && !st->ended)
            gw_ph2_fail(st, what);
    }
    leave(h);
}

static void h2up_free(struct gw_h2up *h)
{
    struct gw_h2us *st;

    /* streams still held by a request (none should be) lose their session */
    while ((st = TAILQ_FIRST(&h->streams))) {
        TAILQ_REMOVE(&h->streams, st, link);
        if (st->r) {
            st->h = NULL;
            continue;
        }
        stream_free(st);
    }
    LIST_REMOVE(h, link);
    nghttp2_session_del(h->s);
    event_free(h->kick);
    gw_io_close(&h->io);
    up_pool_release(h->pool);
    free(h);
}

static void read_cb(struct gw_io *io, void *arg)
{
    struct gw_h2up *h = arg;
    struct evbuffer_iovec v;

    enter(h);
    while (!h->dead && gw_peek_first(io->in, &v)) {
        ssize_t n = nghttp2_session_mem_recv(h->s, v.iov_base, v.iov_len);
        if (n < 0) {
            gw_log(GW_LOG_WARN, "upstream %s server %s: HTTP/2 from the server failed: %s",
                   up_pool_name(h->pool), up_server_address(h->pool, h->server),
                   nghttp2_strerror((int)n));
            fail(h, GW_IO_ERR);
            break;
        }
        evbuffer_drain(io->in, (size_t)n);
    }
    if (!h->dead)
        flush(h);
    leave(h);
}

static void write_cb(struct gw_io *io, void *arg)
{
    struct gw_h2up *h = arg;

    (void)io;
    enter(h);
    flush(h);
    leave(h);
}

static void event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_h2up *h = arg;

    enter(h);
    if (what & GW_IO_CONNECTED) {
        if (h->tls && !gw_tls_h2(io)) {
            gw_log(GW_LOG_WARN,
                   "upstream %s server %s: the server did not choose h2 by ALPN (protocol "
                   "\"h2\" needs a server that speaks HTTP/2 over TLS)",
                   up_pool_name(h->pool), up_server_address(h->pool, h->server));
            fail(h, GW_IO_ERR);
        } else {
            struct gw_h2us *st;
            h->open = 1;
            h->connect_until = 0;
            TAILQ_FOREACH(st, &h->streams, link)
            st->room = 1; /* a streamed body waited for the connection */
            flush(h);
        }
    } else {
        h->eof = 1;
        fail(h, what);
    }
    leave(h);
}

/* The transport of <h> on <fd>: TLS when the pool has it (SNI and
 * verification as for HTTP/1, upconn.c), else plain. */
static int transport(struct gw_h2up *h, const struct adm_snapshot *s, size_t up, evutil_socket_t fd,
                     const struct gw_io_ops **ops, void **xprt)
{
    *ops = &gw_io_plain;
    *xprt = NULL;
    if (!(h->tls = s->uptls[up]))
        return 0;
    *xprt = gw_up_tls_new(s, up, h->pool, h->server, fd, NULL);
    *ops = &gw_io_tls;
    return *xprt ? 0 : -1;
}

struct gw_h2up *gw_h2up_connect(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                size_t server)
{
    const struct adm_upstream *def = &s->cfg->upstreams[up];
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, GW_H2UP_WINDOW},
    };
    struct gw_h2up *h;
    nghttp2_mem mem;
    const struct gw_io_ops *ops;
    void *xprt;
    const struct sockaddr *sa;
    socklen_t salen;
    evutil_socket_t fd;
    int one = 1;

    gw_h2up_init();
    if (!cbs || !(h = calloc(1, sizeof(*h)))) {
        errno = ENOMEM;
        return NULL;
    }
    h->w = w;
    h->pool = s->pools[up];
    h->server = server;
    h->idle_ms = def->keepalive ? def->idle_timeout_ms : 0;
    h->assumed = seen_get(w, s->pools[up], server);
    TAILQ_INIT(&h->streams);
    up_pool_retain(h->pool);
    sa = up_server_sockaddr(h->pool, server, &salen);
    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (transport(h, s, up, fd, &ops, &xprt) < 0) {
        evutil_closesocket(fd);
        goto fail;
    }
    if (gw_io_init(&h->io, w->base, fd, 0, ops, xprt) < 0) {
        gw_io_close(&h->io);
        goto fail;
    }
    if (!(h->kick = event_new(w->base, -1, 0, kick_cb, h)) || gw_h2_mem(w, &mem) < 0 ||
        nghttp2_session_client_new3(&h->s, cbs, h, opt, &mem) != 0 ||
        nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, GW_H2UP_CONN_WINDOW) !=
            0) {
        if (h->s)
            nghttp2_session_del(h->s);
        if (h->kick)
            event_free(h->kick);
        gw_io_close(&h->io);
        errno = ENOMEM;
        goto fail;
    }
    LIST_INSERT_HEAD(&w->h2ups, h, link);
    h->io.lowat = GW_LWM;
    h->io.hiwat = GW_HWM;
    gw_io_setcb(&h->io, read_cb, write_cb, event_cb, h);
    if (gw_io_connect(&h->io, sa, salen) < 0) {
        int e = errno;
        h2up_free(h);
        errno = e;
        return NULL;
    }
    gw_io_read(&h->io, 1);
    h->connect_until = gw_now_ms() + def->connect_timeout_ms;
    up_count_connect(h->pool, w->id, server);
    return h;
fail:
    up_pool_release(h->pool);
    free(h);
    return NULL;
}

/* Whether <h> takes one more stream. */
static int has_room(struct gw_h2up *h)
{
    uint32_t max =
        h->settings
            ? nghttp2_session_get_remote_settings(h->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            : h->assumed;

    if (max > GW_H2UP_MAX_STREAMS)
        max = GW_H2UP_MAX_STREAMS;
    return !h->dead && !h->goaway && h->nst < max && nghttp2_session_check_request_allowed(h->s);
}

struct gw_h2up *gw_h2up_get(struct gw_worker *w, up_pool *pool, size_t server)
{
    struct gw_h2up *h;

    LIST_FOREACH(h, &w->h2ups, link)
    {
        if (h->pool == pool && h->server == server && has_room(h))
            return h;
    }
    return NULL;
}

struct gw_h2us *gw_h2us_open(struct gw_h2up *h, struct gw_req *r, const nghttp2_nv *nv, size_t n,
                             int body)
{
    struct gw_h2us *st = calloc(1, sizeof(*st));
    nghttp2_data_provider prd;

    if (!st || (body && !(st->body = evbuffer_new()))) {
        free(st);
        return NULL;
    }
    st->h = h;
    st->r = r;
    st->pool = h->pool;
    st->server = h->server;
    st->wid = h->w->id;
    st->out_done = (unsigned char)!body; /* its HEADERS end the stream */
    prd.source.ptr = st;
    prd.read_callback = body_read;
    st->id = nghttp2_submit_request(h->s, NULL, nv, n, body ? &prd : NULL, st);
    if (st->id < 0) {
        if (st->body)
            evbuffer_free(st->body);
        free(st);
        return NULL;
    }
    TAILQ_INSERT_TAIL(&h->streams, st, link);
    h->nst++;
    st->lent = 1;
    up_request_start(st->pool, st->wid, st->server);
    h->idle_until = 0;
    gw_h2up_want_send(h);
    return st;
}

void gw_h2us_detach(struct gw_h2us *st)
{
    struct gw_h2up *h = st->h;

    st->r = NULL;
    if (st->lent) {
        st->lent = 0;
        up_request_end(st->pool, st->wid, st->server);
    }
    if (!h) { /* its session went first */
        stream_free(st);
        return;
    }
    if (!h->dead && st->unconsumed) /* the connection's share, even once the stream closed */
        nghttp2_session_consume(h->s, st->id, st->unconsumed);
    st->unconsumed = 0;
    if (!st->closed && !h->dead) {
        /* a response that ended while our body was still going: the rest
         * is not wanted (RFC 9113 8.1); else the request gave up */
        if (!st->ended || !st->out_done) {
            nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id,
                                      st->ended ? NGHTTP2_NO_ERROR : NGHTTP2_CANCEL);
            gw_h2up_want_send(h);
        }
    }
    if (!h->depth) {
        enter(h);
        leave(h);
    }
}

void gw_h2us_resume(struct gw_h2us *st)
{
    struct gw_h2up *h = st->h;

    if (!h || h->dead || st->closed)
        return;
    if (st->deferred == 1) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->s, st->id);
    }
    gw_h2up_want_send(h);
}

void gw_h2us_consume(struct gw_h2us *st, size_t n)
{
    struct gw_h2up *h = st->h;

    if (!h || h->dead || !n)
        return;
    /* a closed stream's bytes still count against the connection's window:
     * nghttp2 gives the connection its share back all the same */
    nghttp2_session_consume(h->s, st->id, n);
    gw_h2up_want_send(h);
}

int gw_h2us_trailers(struct gw_h2us *st, const char *lines, size_t len)
{
    if (!len)
        return 0;
    free(st->rtr);
    if (!(st->rtr = malloc(len)))
        return -1;
    memcpy(st->rtr, lines, len);
    st->rtr_len = len;
    return 0;
}

/* ---- the worker's sweeps ---- */

/* Whether <h>'s server is still in a pool of the current snapshot: its
 * own, or the changed pool of the same name that took over the server's
 * state (then <h> moves to it, as parked HTTP/1 connections do). Sessions
 * of a server that left take no new stream and close when their streams
 * are done. */
static int still_pooled(struct gw_h2up *h, const struct adm_snapshot *s)
{
    size_t up, server = gw_up_where(s, h->pool, h->server, &up);

    if (server == UP_NONE || s->cfg->upstreams[up].protocol == ADM_UP_H1)
        return 0;
    if (s->pools[up] != h->pool) {
        up_pool_retain(s->pools[up]);
        up_pool_release(h->pool);
        h->pool = s->pools[up];
        h->server = server;
    }
    return 1;
}

void gw_h2up_prune(struct gw_worker *w)
{
    struct adm_snapshot *s = atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);
    struct gw_h2up *h, *next;

    for (h = LIST_FIRST(&w->h2ups); h; h = next) {
        next = LIST_NEXT(h, link);
        if (h->dead || still_pooled(h, s))
            continue;
        h->goaway = 1;
        if (!h->nst) {
            enter(h);
            fail(h, GW_IO_EOF);
            leave(h);
        }
    }
}

/* When <st>'s response timeout or its grpc-timeout is due, 0: never. */
static long long stream_due(const struct gw_h2us *st)
{
    long long due = st->until;

    if (st->deadline && (!due || st->deadline < due))
        due = st->deadline;
    return st->r && !st->ended ? due : 0;
}

void gw_h2us_due(struct gw_h2us *st)
{
    long long due = stream_due(st);

    if (st->h && due && (!st->h->check_at || due < st->h->check_at))
        st->h->check_at = due;
}

void gw_h2up_sweep(struct gw_worker *w)
{
    long long now = gw_now_ms();
    struct gw_h2up *h, *next;

    for (h = LIST_FIRST(&w->h2ups); h; h = next) {
        struct gw_h2us *st;

        next = LIST_NEXT(h, link);
        if (h->dead)
            continue;
        if (h->check_at > now && !(h->connect_until && now >= h->connect_until))
            continue; /* nothing due yet: its streams are not walked */
        enter(h);
        if (h->connect_until && now >= h->connect_until) {
            fail(h, GW_IO_TIMEOUT);
        } else {
            /* a stream's timeouts move only later (activity), and a new
             * stream lowers check_at (gw_h2us_due): the earliest due one
             * found here is when to look again */
            int late = 0, held = 0;
            h->check_at = 0;
            TAILQ_FOREACH(st, &h->streams, link)
            {
                long long due;
                if (h->dead)
                    break;
                if (!(due = stream_due(st))) {
                    held |= st->r != NULL;
                    continue;
                }
                if (now >= due) {
                    gw_ph2_fail(st, GW_IO_TIMEOUT);
                    late = 1;
                } else if (!h->check_at || due < h->check_at) {
                    h->check_at = due;
                }
                held |= st->r != NULL;
            }
            if (!h->dead)
                flush(h);
            /* A server that stopped reading: its output never drains, so
             * the resets of streams given up are never sent and they stay
             * counted. It takes no new stream, and goes once no request
             * is left on it. */
            if (!h->dead && h->open && evbuffer_get_length(h->io.out)) {
                if (late)
                    h->goaway = 1;
                if (h->goaway && !held)
                    fail(h, GW_IO_TIMEOUT);
            }
        }
        leave(h);
    }
}

void gw_h2up_sweep_idle(struct gw_worker *w)
{
    long long now = gw_now_ms();
    struct gw_h2up *h, *next;

    for (h = LIST_FIRST(&w->h2ups); h; h = next) {
        next = LIST_NEXT(h, link);
        if (!h->dead && !h->nst && h->idle_until && h->idle_until <= now) {
            enter(h);
            nghttp2_session_terminate_session(h->s, NGHTTP2_NO_ERROR);
            flush(h);
            fail(h, GW_IO_EOF);
            leave(h);
        }
    }
}

void gw_h2up_free_all(struct gw_worker *w)
{
    while (!LIST_EMPTY(&w->h2ups)) {
        struct gw_h2up *h = LIST_FIRST(&w->h2ups);
        struct gw_h2us *st;

        /* the worker ends: its requests are cancelled after, each without
         * an upstream (no retry, no answer) */
        TAILQ_FOREACH(st, &h->streams, link)
        {
            if (st->r) {
                st->r->ups = NULL;
                st->r = NULL;
            }
        }
        h->dead = 1;
        h2up_free(h);
    }
    if (w->h2up_head) {
        evbuffer_free(w->h2up_head);
        w->h2up_head = NULL;
    }
}
