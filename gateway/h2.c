/*
 * h2.c - an HTTP/2 client connection (h2_int.h says how it is built): the
 * choice of HTTP/2 at the first read, the nghttp2 session over the
 * connection's io, its output, its timeouts, the floods it refuses, and
 * its ends (GOAWAY: at once, or gracefully for a drain).
 *
 * Defences, besides nghttp2's own (its SETTINGS, CONTINUATION, outbound
 * ACK and stream reset limits, and its HTTP messaging checks):
 * - frames that cost us and do no work (SETTINGS, PING, PRIORITY,
 *   WINDOW_UPDATE, RST_STREAM, empty DATA, unknown types) are counted per
 *   second; past GW_H2_FRAMES_PER_S, plus what the DATA we sent may
 *   legitimately draw (window updates), GOAWAY ENHANCE_YOUR_CALM;
 * - streams reset before their answer was whole, by the client (rapid
 *   reset, CVE-2023-44487) or by us for something the client did
 *   (MadeYouReset, CVE-2025-8671), are counted: past twice
 *   max_concurrent_streams (at least GW_H2_BAD_MIN) more than the
 *   requests answered, GOAWAY ENHANCE_YOUR_CALM. A reset stream's request
 *   is cancelled at once (its upstream connection closed, its slot given
 *   back), and a stream counts against max_concurrent_streams until then:
 *   a connection never holds more upstream connections than that;
 * - a fatal error of nghttp2 (a CONTINUATION flood, a flood of ACKs it
 *   would owe) gets a GOAWAY from us before the close, which nghttp2
 *   alone would not send;
 * - the timeouts keep their HTTP/1.1 meaning: client_header_ms for the
 *   first request from the accept and for each header block,
 *   client_body_ms between two reads of a body, client_idle_ms without a
 *   stream (then GOAWAY NO_ERROR) and for output that makes no progress:
 *   the connection's (a client that reads nothing) and each stream's (a
 *   client that never opens its window).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/h2_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/io_tls.h"

/* Frames that do no work, per connection and second, before GOAWAY. */
#define GW_H2_FRAMES_PER_S 1000
/* Streams reset before their answer, at least, before GOAWAY. */
#define GW_H2_BAD_MIN 100
/* The connection's receive window: what all its streams' request bodies
 * may hold together (each stream holds its window at most). */
#define GW_H2_CONN_WINDOW (1 << 20)
/* A drain's first GOAWAY is followed by a PING; the last GOAWAY goes when
 * its ACK comes (an RTT: requests in flight reached us), or after this. */
#define GW_H2_GOAWAY_MS 1000

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof(preface) - 1)

/* ---- nghttp2's memory: small blocks from the worker's free lists ---- */

/* A block's header: its class, GW_H2_CLASSES for one malloc'd to its own
 * size. Sixteen bytes keep the payload aligned as malloc's is. */
struct blk {
    size_t cls, pad;
};

static size_t class_of(size_t size)
{
    size_t c = 0;

    while (c < GW_H2_CLASSES && size > (size_t)64 << c)
        c++;
    return c;
}

static void *mem_malloc(size_t size, void *ud)
{
    struct gw_h2_cache *k = ud;
    size_t c = class_of(size);
    struct blk *b;
    void *p;

    if (c < GW_H2_CLASSES && (p = k->blocks[c])) {
        k->blocks[c] = *(void **)p;
        k->nblocks[c]--;
        return p;
    }
    if (!(b = malloc(sizeof(*b) + (c < GW_H2_CLASSES ? (size_t)64 << c : size))))
        return NULL;
    b->cls = c;
    return b + 1;
}

static void mem_free(void *p, void *ud)
{
    struct gw_h2_cache *k = ud;
    struct blk *b;

    if (!p)
        return;
    b = (struct blk *)p - 1;
    if (b->cls < GW_H2_CLASSES && k->nblocks[b->cls] < GW_H2_SPARE) {
        *(void **)p = k->blocks[b->cls];
        k->blocks[b->cls] = p;
        k->nblocks[b->cls]++;
        return;
    }
    free(b);
}

static void *mem_calloc(size_t n, size_t size, void *ud)
{
    void *p;

    if (size && n > (size_t)-1 / size)
        return NULL;
    if ((p = mem_malloc(n * size, ud)))
        memset(p, 0, n * size);
    return p;
}

static void *mem_realloc(void *p, size_t size, void *ud)
{
    struct blk *b;
    void *q;

    if (!p)
        return mem_malloc(size, ud);
    b = (struct blk *)p - 1;
    if (b->cls == GW_H2_CLASSES) { /* its own block: as malloc's */
        if (!(b = realloc(b, sizeof(*b) + size)))
            return NULL;
        return b + 1;
    }
    if (size <= (size_t)64 << b->cls)
        return p;
    if (!(q = mem_malloc(size, ud)))
        return NULL;
    memcpy(q, p, (size_t)64 << b->cls);
    mem_free(p, ud);
    return q;
}

struct gw_h2_cache *h2_cache(struct gw_worker *w)
{
    if (!w->h2cache)
        w->h2cache = calloc(1, sizeof(*w->h2cache));
    return w->h2cache;
}

int gw_h2_mem(struct gw_worker *w, nghttp2_mem *mem)
{
    struct gw_h2_cache *k = h2_cache(w);

    if (!k)
        return -1;
    *mem = (nghttp2_mem){k, mem_malloc, mem_free, mem_calloc, mem_realloc};
    return 0;
}

void gw_h2_cache_free(struct gw_worker *w)
{
    struct gw_h2_cache *k = w->h2cache;

    if (!k)
        return;
    h2_streams_spare_free(k);
    for (int c = 0; c < GW_H2_CLASSES; c++)
        while (k->blocks[c]) {
            void *p = k->blocks[c];
            k->blocks[c] = *(void **)p;
            free((struct blk *)p - 1);
        }
    free(k);
    w->h2cache = NULL;
}

static nghttp2_session_callbacks *cbs;
static nghttp2_option *opt;
static pthread_once_t cbs_once = PTHREAD_ONCE_INIT;

/* ---- output ---- */

int h2_out_flush(struct gw_h2 *h)
{
    struct gw_h2_cache *k = h->cache;
    int rc = 0;

    if (k->glen)
        rc = evbuffer_add(h->c->io.out, k->gather, k->glen);
    k->glen = 0;
    return rc;
}

size_t h2_out_room(const struct gw_h2 *h)
{
    return sizeof(h->cache->gather) - h->cache->glen;
}

size_t h2_out_len(const struct gw_h2 *h)
{
    return evbuffer_get_length(h->c->io.out) + h->cache->glen;
}

int h2_out(struct gw_h2 *h, const void *p, size_t n)
{
    struct gw_h2_cache *k = h->cache;

    if (n > h2_out_room(h) && h2_out_flush(h) < 0)
        return -1;
    if (n > h2_out_room(h))
        return evbuffer_add(h->c->io.out, p, n);
    memcpy(k->gather + k->glen, p, n);
    k->glen += n;
    return 0;
}

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud)
{
    struct gw_h2 *h = ud;

    (void)s;
    (void)flags;
    if (h2_out_len(h) > GW_HWM)
        return NGHTTP2_ERR_WOULDBLOCK; /* the write callback goes on at GW_LWM */
    if (h2_out(h, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

void h2_want_send(struct gw_h2 *h)
{
    if (h->busy) {
        h->dirty = 1;
        return;
    }
    if (!h->kicked) {
        h->kicked = 1;
        event_active(h->kick, EV_TIMEOUT, 1);
    }
}

void h2_fail(struct gw_h2 *h, uint32_t code)
{
    if (h->closing)
        return;
    h->closing = 1;
    nghttp2_session_terminate_session(h->s, code);
    gw_io_read(&h->c->io, 0);
    h2_want_send(h);
}

void h2_count_bad(struct gw_h2 *h)
{
    unsigned max = 2 * h->max_streams < GW_H2_BAD_MIN ? GW_H2_BAD_MIN : 2 * h->max_streams;

    if (++h->bad > max + h->answered)
        h2_fail(h, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* The frame budget of this second (h2_send_data credits DATA sent). */
static void frames_second(struct gw_h2 *h)
{
    long long sec = gw_now_ms() / 1000;

    if (sec != h->sec) {
        h->sec = sec;
        h->frames = 0;
        h->credit = 0;
    }
}

void h2_credit(struct gw_h2 *h, unsigned n)
{
    frames_second(h);
    h->credit += n;
}

/* The connection is over: its streams' requests cancelled, then a
 * lingering close (the client may still be sending: closed at once, its
 * unread bytes would reset the connection, GOAWAY and all), or a close. */
static void finish(struct gw_h2 *h)
{
    struct gw_conn *c = h->c;

    h2_streams_free(h);
    if (c->st != GW_CONN_CLOSING)
        gw_conn_set_state(c, GW_CONN_CLOSING);
    c->linger = !c->io.rd_eof;
    if (!c->linger || gw_conn_linger(c) < 0)
        gw_conn_free(c);
}

/* What the connection's callbacks end with: body bytes and drained
 * outputs passed on, frames sent (until the output passes GW_HWM), and
 * the close once nghttp2 wants neither to read nor to write. -1 when <h>
 * is gone. */
static int run(struct gw_h2 *h)
{
    struct gw_conn *c = h->c;

    for (int i = 0; i < 16; i++) {
        h->busy = 1;
        h->dirty = 0;
        h2_streams_pass(h);
        if (nghttp2_session_send(h->s) < 0 || h2_out_flush(h) < 0) {
            h->closing = 1; /* out of memory, or a callback failed: nothing to say */
            nghttp2_session_terminate_session(h->s, NGHTTP2_INTERNAL_ERROR);
            h2_out_flush(h);
        }
        h->busy = 0;
        if (!h->dirty && TAILQ_EMPTY(&h->ready) && TAILQ_EMPTY(&h->drained))
            break;
        if (evbuffer_get_length(c->io.out) > GW_HWM)
            break;
    }
    if (!h->closing && !nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s))
        h->closing = 1; /* GOAWAY both ways, or sent, and no stream left */
    if (!h->closing)
        return 0;
    gw_io_read(&c->io, 0);
    if (c->st != GW_CONN_CLOSING)
        gw_conn_set_state(c, GW_CONN_CLOSING);
    if (evbuffer_get_length(c->io.out) == 0 && !nghttp2_session_want_write(h->s)) {
        finish(h);
        return -1;
    }
    return 0;
}

/* ---- timeouts ---- */

void h2_arm(struct gw_h2 *h, long long when)
{
    struct gw_tmo *t = &h->c->tmo;
    long long now;

    if (h->armed && h->armed <= when)
        return;
    now = gw_now_ms();
    h->armed = when;
    t->rd = when > now ? (unsigned)(when - now) : 1;
    t->last_rd = now;
}

/* The last GOAWAY of a drain: the streams the client started before it
 * are served, later ones are not (it may retry them elsewhere). */
static void goaway_last(struct gw_h2 *h)
{
    h->draining = 2;
    nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->s),
                          NGHTTP2_NO_ERROR, NULL, 0);
    h2_want_send(h);
}

/* The earliest deadline of <h> came (or may have): what is past it is
 * acted on, and the next one armed. */
static void timeouts(struct gw_h2 *h)
{
    struct gw_conn *c = h->c;
    const struct adm_config *cfg = gw_conn_cfg(c);
    long long now = gw_now_ms(), next = 0, d;
    struct gw_h2s *st;
    int fail = 0;

    h->armed = 0;
    if (h->draining == 1 && now >= h->goaway_at)
        goaway_last(h);
    else if (h->draining == 1)
        next = h->goaway_at;
    TAILQ_FOREACH(st, &h->streams, link)
    {
        d = h2_stream_timeouts(st, now, &fail);
        if (fail)
            break;
        if (d && (!next || d < next))
            next = d;
    }
    if (fail) { /* a header block cut short: the connection is stuck in it */
        h2_fail(h, NGHTTP2_NO_ERROR);
        return;
    }
    if (!h->nstreams) {
        /* the first request from the admission on, as for HTTP/1.1; then
         * client_idle_ms without a stream */
        d = c->admitted_ms ? c->admitted_ms + cfg->timeouts.client_header_ms
                           : h->idle_since + cfg->timeouts.client_idle_ms;
        if (now >= d) {
            h2_fail(h, NGHTTP2_NO_ERROR);
            return;
        }
        if (!next || d < next)
            next = d;
    }
    if (next)
        h2_arm(h, next);
}

/* ---- the connection's callbacks ---- */

static void h2_read_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;
    struct gw_h2 *h = c->pstate;
    struct evbuffer_iovec v;

    if (c->st == GW_CONN_LINGER) {
        if (gw_conn_linger_read(c, gw_now_ms()) < 0)
            gw_conn_free(c);
        return;
    }
    h->busy = 1;
    while (!h->closing && gw_peek_first(io->in, &v)) {
        ssize_t n = nghttp2_session_mem_recv(h->s, v.iov_base, v.iov_len);
        if (n < 0) {
            /* fatal: a flood of CONTINUATION or of ACKs owed, a bad
             * preface, a callback that failed. nghttp2 would just drop
             * the connection: it gets a GOAWAY first. */
            h->busy = 0;
            h2_fail(h, n == NGHTTP2_ERR_BAD_CLIENT_MAGIC   ? NGHTTP2_PROTOCOL_ERROR
                       : n == NGHTTP2_ERR_NOMEM            ? NGHTTP2_INTERNAL_ERROR
                       : n == NGHTTP2_ERR_CALLBACK_FAILURE ? NGHTTP2_INTERNAL_ERROR
                                                           : NGHTTP2_ENHANCE_YOUR_CALM);
            break;
        }
        evbuffer_drain(io->in, (size_t)n);
    }
    if (h->closing)
        evbuffer_drain(io->in, evbuffer_get_length(io->in));
    h->busy = 0;
    run(h);
}

static void h2_write_cb(struct gw_io *io, void *arg)
{
    struct gw_conn *c = arg;
    struct gw_h2 *h = c->pstate;

    (void)io;
    if (c->st == GW_CONN_LINGER)
        return;
    if (run(h) < 0)
        return;
    if (c->st == GW_CONN_IDLE && c->queue == GW_CONN_Q_NONE)
        gw_conn_idle_check(c); /* the last answer drained: reclaimable */
}

/* What the request layer queued (h2_want_send), from the loop. */
static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_h2 *h = arg;

    (void)fd;
    (void)what;
    h->kicked = 0;
    h2_write_cb(&h->c->io, h->c);
}

static void h2_event_cb(struct gw_io *io, short what, void *arg)
{
    struct gw_conn *c = arg;
    struct gw_h2 *h = c->pstate;

    if (c->st == GW_CONN_LINGER) { /* its EOF, an error, or GW_LINGER_IDLE_MS of quiet */
        gw_conn_free(c);
        return;
    }
    if ((what & GW_IO_TIMEOUT) && (what & GW_IO_READING) && !h->closing) {
        gw_io_read(io, 1); /* the sweep turned it off: ours are deadlines, not idleness */
        timeouts(h);
        run(h);
        return;
    }
    if ((what & GW_IO_EOF) && !(what & GW_IO_WRITING) && !h->closing) {
        /* the client sends nothing more: what it has under way cannot
         * end well (a body, a WINDOW_UPDATE), so it ends here */
        h2_fail(h, NGHTTP2_NO_ERROR);
        run(h);
        return;
    }
    /* an error, output that made no progress (a client that reads
     * nothing), or a closing connection's own timeout */
    gw_conn_free(c);
}

/* ---- nghttp2's callbacks of the connection ---- */

/* Whether the client's HEADERS on stream <id> opens no stream and belongs
 * to none: an id that does not increase (RFC 9113 5.1.1) or a closed
 * stream's (5.1), which nghttp2, forgetting closed streams, would ignore.
 * Trailers that crossed our RST_STREAM (the last ones we sent) are
 * ignored, as 5.1 asks. */
static int stale_headers(struct gw_h2 *h, int32_t id)
{
    if (!(id & 1))
        return 0; /* nghttp2's to refuse */
    if (id > h->max_id) {
        h->max_id = id;
        return 0;
    }
    if (nghttp2_session_get_stream_user_data(h->s, id))
        return 0; /* trailers */
    for (unsigned i = 0; i < sizeof(h->reset_ids) / sizeof(h->reset_ids[0]); i++)
        if (h->reset_ids[i] == id)
            return 0;
    return 1;
}

/* Counts the frames that do no work (see the top of the file); refuses a
 * HEADERS that belongs to no stream. */
static int on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd, void *ud)
{
    struct gw_h2 *h = ud;

    (void)s;
    if (hd->type == NGHTTP2_HEADERS && stale_headers(h, hd->stream_id)) {
        h2_fail(h, NGHTTP2_PROTOCOL_ERROR);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    switch (hd->type) {
    case NGHTTP2_DATA:
        if (hd->length || (hd->flags & NGHTTP2_FLAG_END_STREAM))
            return 0;
        break;
    case NGHTTP2_HEADERS:      /* bounded by max_concurrent_streams */
    case NGHTTP2_CONTINUATION: /* by nghttp2's max_continuations */
    case NGHTTP2_GOAWAY:
        return 0;
    default:
        break;
    }
    frames_second(h);
    if (++h->frames <= GW_H2_FRAMES_PER_S + h->credit)
        return 0;
    h2_fail(h, NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2 *h = ud;

    (void)s;
    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        return h2_stream_frame_recv(h, f);
    case NGHTTP2_PING:
        if ((f->hd.flags & NGHTTP2_FLAG_ACK) && h->draining == 1)
            goaway_last(h); /* an RTT after the first GOAWAY */
        return 0;
    default:
        return 0;
    }
}

static int on_error(nghttp2_session *s, int code, const char *msg, size_t len, void *ud)
{
    struct gw_h2 *h = ud;

    (void)s;
    if (gw_log_enabled(GW_LOG_DEBUG))
        gw_log(GW_LOG_DEBUG, "http2 %s:%u: %.*s (%d)", h->c->peer_ip, h->c->peer_port, (int)len,
               msg, code);
    return 0;
}

static void callbacks_init(void)
{
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0)
        return;
    nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
    nghttp2_session_callbacks_set_send_data_callback(cbs, h2_send_data);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, h2_on_frame_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, h2_on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, h2_on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(cbs, on_error);
    /* windows open as the request layer takes the bytes */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* no priority tree: closed streams are not kept */
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* nghttp2's defaults, said here: they are defences (CVE-2024-28182,
     * CVE-2023-44487, SETTINGS and ACK floods) */
    nghttp2_option_set_max_continuations(opt, 8);
    nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    /* response heads use HPACK's dynamic table (4 KiB, the default, said
     * here): Server, Content-Type and Date repeat and go as one byte each
     * instead of Huffman-coded anew; what is new each time (X-Request-Id)
     * is never indexed (h2_stream.c, nv_flags) */
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
}

/* ---- the connection ---- */

static void h2_release(struct gw_conn *c);
static void h2_shutdown(struct gw_conn *c);

static const struct gw_conn_proto h2_proto = {
    .shutdown = h2_shutdown,
    .release = h2_release,
};

void h2_drain(struct gw_h2 *h)
{
    if (h->closing || h->draining)
        return;
    if (!h->nstreams) {
        h2_fail(h, NGHTTP2_NO_ERROR);
        return;
    }
    nghttp2_submit_shutdown_notice(h->s);
    nghttp2_submit_ping(h->s, NGHTTP2_FLAG_NONE, NULL);
    h->draining = 1;
    h->goaway_at = gw_now_ms() + GW_H2_GOAWAY_MS;
    h2_arm(h, h->goaway_at);
    h2_want_send(h);
}

static void h2_shutdown(struct gw_conn *c)
{
    struct gw_h2 *h = c->pstate;

    h2_drain(h);
    run(h);
}

/* <c> is freed: its streams' requests cancelled, and a GOAWAY said if
 * none was (an idle connection reclaimed or closed by a drain), as far
 * as the transport takes it at once. */
static void h2_release(struct gw_conn *c)
{
    struct gw_h2 *h = c->pstate;
    const uint8_t *p;
    ssize_t n;

    h2_streams_free(h);
    if (!h->closing && gw_io_open(&c->io) && c->io.wr_on &&
        nghttp2_session_terminate_session(h->s, NGHTTP2_NO_ERROR) == 0)
        while ((n = nghttp2_session_mem_send(h->s, &p)) > 0)
            gw_io_send(&c->io, p, (size_t)n);
    nghttp2_session_del(h->s);
    event_free(h->kick);
    if (h->side)
        gw_pmem_put(c->w, h->side, h->side_size);
    if (h->heads)
        evbuffer_free(h->heads);
    free(h);
    c->pstate = NULL;
    c->proto = NULL;
}

/* <c> speaks HTTP/2 from now on, with the settings of the current config:
 * its callbacks are ours and its bytes read so far go to nghttp2. -1 when
 * out of memory (<c> untouched). */
static int start(struct gw_conn *c)
{
    const struct adm_config *cfg = gw_conn_cfg(c);
    unsigned window = cfg->http2.initial_window_bytes;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->http2.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    struct gw_h2_cache *k = h2_cache(c->w);
    nghttp2_mem mem = {k, mem_malloc, mem_free, mem_calloc, mem_realloc};
    struct gw_h2 *h;

    pthread_once(&cbs_once, callbacks_init);
    if (!cbs || !opt || !k || !(h = calloc(1, sizeof(*h))))
        goto fail;
    h->c = c;
    h->cache = k;
    TAILQ_INIT(&h->streams);
    TAILQ_INIT(&h->ready);
    TAILQ_INIT(&h->drained);
    h->max_streams = cfg->http2.max_concurrent_streams;
    gw_conn_limits(cfg, &h->lim);
    if (!(h->heads = evbuffer_new()))
        goto fail_h;
    if (!(h->kick = event_new(c->w->base, -1, 0, kick_cb, h)))
        goto fail_heads;
    if (nghttp2_session_server_new3(&h->s, cbs, h, opt, &mem) != 0)
        goto fail_kick;
    if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0,
                                              window > GW_H2_CONN_WINDOW ? (int32_t)window
                                                                         : GW_H2_CONN_WINDOW) != 0)
        goto fail_session;
    c->proto = &h2_proto;
    c->pstate = h;
    gw_io_setcb(&c->io, h2_read_cb, h2_write_cb, h2_event_cb, c);
    /* the write stall of HTTP/1.1; the read side is our deadlines' */
    c->tmo.wr = cfg->timeouts.client_idle_ms;
    h->idle_since = gw_now_ms();
    h2_arm(h, c->admitted_ms ? c->admitted_ms + cfg->timeouts.client_header_ms
                             : h->idle_since + cfg->timeouts.client_idle_ms);
    return 0;
fail_session:
    nghttp2_session_del(h->s);
fail_kick:
    event_free(h->kick);
fail_heads:
    evbuffer_free(h->heads);
fail_h:
    free(h);
fail:
    return -1;
}

enum gw_h2_sniff gw_h2_sniff(struct gw_conn *c)
{
    char head[PREFACE_LEN];
    size_t n;

    if (c->io.ops != &gw_io_plain) { /* TLS: ALPN decides; plain bytes on a TLS port: no */
        if (!gw_tls_h2(&c->io))
            return GW_H2_NO;
    } else {
        n = evbuffer_copyout(c->io.in, head, sizeof(head));
        if (memcmp(head, preface, n) != 0)
            return GW_H2_NO;
        if (n < PREFACE_LEN)
            return GW_H2_WAIT;
    }
    if (start(c) < 0) {
        gw_count(&c->w->ctr.conns_dropped, 1);
        gw_conn_free(c);
        return GW_H2_YES; /* gone */
    }
    h2_read_cb(&c->io, c);
    return GW_H2_YES;
}
