/*
 * h2_stream.c - the streams of an HTTP/2 connection (h2_int.h says how
 * they fit): each one's head, decoded field by field into an HTTP/1.1
 * head for its own request parser (admin/http1/h2head.h), so that the
 * request layer routes, normalizes and limits it as it does HTTP/1.1; its
 * body, passed to the request as the window allows; and the codec the
 * request layer answers through (struct gw_codec): heads as nghttp2 field
 * lists, bodies as DATA from a data provider, trailers, resets.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/h2_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/local.h"
#include "gateway/policy.h"
#include "gateway/proxy.h"

/* Fields of a response head or trailers held on the stack; more are
 * allocated (an upstream's head is bounded by its parser's limits). */
#define GW_H2_NV 64

/* ---- a stream's life ---- */

static void ready(struct gw_h2s *st)
{
    if (st->in_ready)
        return;
    st->in_ready = 1;
    TAILQ_INSERT_TAIL(&st->h->ready, st, rlink);
}

/* A stream <id> whose head begins: its parser's block from the worker's
 * pool (as an HTTP/1.1 connection's between requests), and the
 * connection's side buffer for h2head if it has none. NULL when out of
 * memory. */
/* A stream object: a spare of the worker's (its params array and output
 * buffer kept), else a new one. */
static struct gw_h2s *stream_get(struct gw_worker *w)
{
    struct gw_h2_cache *k = w->h2cache;
    struct gw_h2s *st;
    struct rt_param *params;
    size_t cap;
    struct evbuffer *out;

    if (!k || !(st = k->streams))
        return calloc(1, sizeof(struct gw_h2s));
    k->streams = st->next_spare;
    k->nstreams--;
    params = st->req.params;
    cap = st->req.params_cap;
    out = st->out;
    memset(st, 0, sizeof(*st));
    st->req.params = params;
    st->req.params_cap = cap;
    st->out = out;
    return st;
}

/* <st>'s memory: kept by the worker while it has room, else freed. What
 * its request still holds goes (gw_req_release), but for its params array
 * when it is kept. */
static void stream_put(struct gw_worker *w, struct gw_h2s *st)
{
    struct gw_h2_cache *k = w->h2cache;
    struct rt_param *params = st->req.params;
    size_t cap = st->req.params_cap;

    if (st->in)
        evbuffer_free(st->in);
    free(st->trailers);
    free(st->rtr);
    if (k && k->nstreams < GW_H2_SPARE) {
        st->req.params = NULL;
        gw_req_release(&st->req);
        st->req.params = params;
        st->req.params_cap = cap;
        if (st->out)
            evbuffer_drain(st->out, evbuffer_get_length(st->out));
        st->next_spare = k->streams;
        k->streams = st;
        k->nstreams++;
        return;
    }
    gw_req_release(&st->req);
    if (st->out)
        evbuffer_free(st->out);
    free(st);
}

void h2_streams_spare_free(struct gw_h2_cache *k)
{
    struct gw_h2s *st;

    while ((st = k->streams)) {
        k->streams = st->next_spare;
        free(st->req.params);
        if (st->out)
            evbuffer_free(st->out);
        free(st);
    }
    k->nstreams = 0;
}

static struct gw_h2s *stream_new(struct gw_h2 *h, int32_t id)
{
    struct gw_conn *c = h->c;
    struct gw_h2s *st = stream_get(c->w);
    size_t size;
    void *mem;

    if (!st || h1_req_parser_setup(&st->rp, &h->lim) < 0)
        goto fail;
    size = h1_req_mem_size(&st->rp);
    if (!(mem = gw_pmem_get(c->w, size)))
        goto fail;
    h1_req_give_mem(&st->rp, mem);
    h1_req_reset(&st->rp);
    if (!h->side) { /* kept while the connection has streams */
        if (!(h->side = gw_pmem_get(c->w, size)))
            goto fail_mem;
        h->side_size = size;
    }
    h2h_begin(&st->hb, &st->rp, h->side, size);
    h2h_checked(&st->hb); /* nghttp2's HTTP messaging checks are on (h2.c) */
    st->h = h;
    st->id = id;
    gw_req_init(&st->req, c, &gw_h2_codec, st, &st->rp);
    clock_gettime(CLOCK_MONOTONIC, &st->req.t0);
    st->req.up_ms = -1;
    st->t_open = gw_now_ms();
    TAILQ_INSERT_TAIL(&h->streams, st, link);
    if (h->nstreams++ == 0 && c->st == GW_CONN_IDLE)
        gw_conn_set_state(c, GW_CONN_HEAD);
    h2_arm(h, st->t_open + gw_conn_cfg(c)->timeouts.client_header_ms);
    return st;
fail_mem:
    gw_pmem_put(c->w, h1_req_take_mem(&st->rp), size);
fail:
    if (st)
        stream_put(c->w, st);
    return NULL;
}

/* Frees <st>, whose stream nghttp2 closed (or whose connection goes): its
 * request cancelled first if it is still under way. The last stream gone,
 * the connection is idle (client_idle_ms runs). */
static void stream_free(struct gw_h2s *st)
{
    struct gw_h2 *h = st->h;
    struct gw_conn *c = h->c;

    if (st->live) {
        st->live = 0;
        gw_req_cancel(&st->req);
    }
    if (st->in_ready)
        TAILQ_REMOVE(&h->ready, st, rlink);
    if (st->in_drain)
        TAILQ_REMOVE(&h->drained, st, dlink);
    gw_pmem_put(c->w, h1_req_take_mem(&st->rp), h1_req_mem_size(&st->rp));
    TAILQ_REMOVE(&h->streams, st, link);
    stream_put(c->w, st);
    if (--h->nstreams || h->closing)
        return;
    /* no header block under way: the side buffer goes back */
    gw_pmem_put(c->w, h->side, h->side_size);
    h->side = NULL;
    h->idle_since = gw_now_ms();
    if (c->st == GW_CONN_HEAD || c->st == GW_CONN_PROXY)
        gw_conn_set_state(c, GW_CONN_IDLE);
    h2_arm(h, h->idle_since + gw_conn_cfg(c)->timeouts.client_idle_ms);
}

void h2_streams_free(struct gw_h2 *h)
{
    struct gw_h2s *st;

    while ((st = TAILQ_FIRST(&h->streams)))
        stream_free(st);
}

/* Resets <st> with <code>; <ours>: for no fault of the client's. */
static void reset(struct gw_h2s *st, uint32_t code, int ours)
{
    st->aborted |= (unsigned char)ours;
    nghttp2_submit_rst_stream(st->h->s, NGHTTP2_FLAG_NONE, st->id, code);
    h2_want_send(st->h);
}

/* ---- the head ---- */

int h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2 *h = ud;
    int32_t id = f->hd.stream_id;
    struct gw_h2s *st;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* a stream reset while its request is still being cancelled counts:
     * streams, requests and upstream connections stay within the limit */
    if (h->nstreams >= h->max_streams) {
        h2_count_bad(h);
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (!(st = stream_new(h, id))) {
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    nghttp2_session_set_stream_user_data(s, id, st);
    return 0;
}

/* A trailer field of <st>'s request, kept as a line for a body that goes
 * upstream chunked (nghttp2 checked it as a field; the fields that belong
 * to a hop or frame a message are not passed on). Past
 * limits.max_header_bytes the request fails (431) when its body ends. */
static void take_trailer(struct gw_h2s *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                         size_t vlen)
{
    struct h1_slice n = {(const char *)name, nlen};
    size_t need = nlen + 2 + vlen + 2, max = st->h->lim.max_header_bytes;

    if (!st->live || st->rtr_over || h1_trailer_forbidden(&n))
        return;
    if (st->rtr_len + need > max) {
        st->rtr_over = 1;
        return;
    }
    if (st->rtr_len + need > st->rtr_cap) {
        size_t cap = 2 * st->rtr_cap > st->rtr_len + need ? 2 * st->rtr_cap : st->rtr_len + need;
        char *p = realloc(st->rtr, cap < max ? cap : max);
        if (!p) {
            st->rtr_over = 1;
            return;
        }
        st->rtr = p;
        st->rtr_cap = cap < max ? cap : max;
    }
    memcpy(st->rtr + st->rtr_len, name, nlen);
    memcpy(st->rtr + st->rtr_len + nlen, ": ", 2);
    memcpy(st->rtr + st->rtr_len + nlen + 2, value, vlen);
    memcpy(st->rtr + st->rtr_len + nlen + 2 + vlen, "\r\n", 2);
    st->rtr_len += need;
}

int h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                 const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    struct gw_h2s *st;

    (void)flags;
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st && f->headers.cat == NGHTTP2_HCAT_HEADERS) {
        take_trailer(st, name, nlen, value, vlen);
        return 0;
    }
    if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (!st || st->hb.rc) /* past a limit: the rest is not kept */
        return 0;
    if (h2h_field(&st->hb, &st->rp, (const char *)name, nlen, (const char *)value, vlen) !=
        H2H_MALFORMED)
        return 0;
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_PROTOCOL_ERROR);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

/* The head of <st> is whole; <es>: the client ended the stream with it.
 * Its request starts (or its error is answered) at once. */
static void head_done(struct gw_h2s *st, int es)
{
    struct gw_h2 *h = st->h;
    struct gw_conn *c = h->c;
    int rc = h2h_end(&st->hb, &st->rp, !es);

    st->in_eof = (unsigned char)es;
    st->started = 1;
    if (rc == H2H_MALFORMED) {
        reset(st, NGHTTP2_PROTOCOL_ERROR, 0);
        return;
    }
    if (c->st == GW_CONN_HEAD)
        gw_conn_set_state(c, GW_CONN_PROXY);
    st->live = 1;
    st->t_in = gw_now_ms();
    if (rc == H2H_ERROR) {
        gw_local_error_close(&st->req, st->hb.status);
        return;
    }
    if (c->w->draining || (c->l && c->l->closed))
        h2_drain(h); /* this request is served; the client hears of the end */
    gw_req_start(&st->req);
}

int h2_stream_frame_recv(struct gw_h2 *h, const nghttp2_frame *f)
{
    struct gw_h2s *st = nghttp2_session_get_stream_user_data(h->s, f->hd.stream_id);

    if (!st)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        st->req.bytes_in += f->hd.length;
        head_done(st, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
        return 0;
    }
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) { /* the last DATA, or trailers */
        st->in_eof = 1;
        if (st->live)
            ready(st);
    }
    return 0;
}

/* ---- the request body ---- */

int h2_on_data_chunk_recv(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                          size_t len, void *ud)
{
    struct gw_h2s *st = nghttp2_session_get_stream_user_data(s, id);

    (void)flags;
    (void)ud;
    if (!st || !st->live) { /* nobody will read it: the window opens at once */
        nghttp2_session_consume(s, id, len);
        return 0;
    }
    if ((!st->in && !(st->in = evbuffer_new())) || evbuffer_add(st->in, data, len) < 0) {
        nghttp2_session_consume(s, id, len);
        st->aborted = 1;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* reset, INTERNAL_ERROR */
    }
    st->req.bytes_in += len;
    st->t_in = gw_now_ms();
    ready(st);
    return 0;
}

void h2_streams_pass(struct gw_h2 *h)
{
    struct gw_h2s *st;
    unsigned n = 0;

    /* the streams ready now: one the request layer makes ready again
     * waits for the next round */
    TAILQ_FOREACH(st, &h->ready, rlink)
    n++;
    while (n-- && (st = TAILQ_FIRST(&h->ready))) {
        TAILQ_REMOVE(&h->ready, st, rlink);
        st->in_ready = 0;
        if (st->live && st->req.phase == GW_REQ_PROXY && !st->req.body_done && !st->rd_paused)
            gw_proxy_body_up(&st->req);
    }
    while ((st = TAILQ_FIRST(&h->drained))) {
        TAILQ_REMOVE(&h->drained, st, dlink);
        st->in_drain = 0;
        if (st->live)
            gw_req_drained(&st->req);
    }
}

/* ---- timeouts ---- */

/* The client sent no byte of <st>'s body for client_body_ms: 408 while
 * nothing was answered, else the stream is reset (its request cancelled
 * at the close). */
static void body_timeout(struct gw_h2s *st)
{
    struct gw_req *r = &st->req;

    if (!r->resp_started) {
        gw_proxy_fail(r, 408);
        return;
    }
    r->status = r->status ? r->status : 408;
    reset(st, NGHTTP2_CANCEL, 0);
}

long long h2_stream_timeouts(struct gw_h2s *st, long long now, int *fail)
{
    const struct adm_timeouts *t = &gw_req_cfg(&st->req)->timeouts;
    long long d = 0, at;

    if (!st->started) { /* its header block: nothing else can come meanwhile */
        at = st->t_open + t->client_header_ms;
        if (now >= at)
            *fail = 1;
        return at;
    }
    if (st->live && st->waiting && !st->rd_paused && !st->in_eof) {
        at = st->t_in + t->client_body_ms;
        if (now >= at) {
            st->waiting = 0;
            body_timeout(st);
        } else {
            d = at;
        }
    }
    if (st->out && evbuffer_get_length(st->out) && !st->aborted) {
        /* output that made no progress: a window never opened */
        at = st->t_out + t->client_idle_ms;
        if (now >= at) {
            evbuffer_drain(st->out, evbuffer_get_length(st->out));
            reset(st, NGHTTP2_CANCEL, 0);
        } else if (!d || at < d) {
            d = at;
        }
    }
    return d;
}

/* ---- the end of a stream ---- */

int h2_on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    struct gw_h2 *h = ud;
    struct gw_h2s *st = nghttp2_session_get_stream_user_data(s, id);

    if (!st)
        return 0;
    /* reset before its answer was whole, by the client or for what it did */
    if (code != NGHTTP2_NO_ERROR && !st->es_sent && !st->aborted)
        h2_count_bad(h);
    stream_free(st);
    return 0;
}

int h2_on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct gw_h2 *h = ud;
    struct gw_h2s *st;

    if (f->hd.type == NGHTTP2_RST_STREAM) {
        h->reset_ids[h->reset_n++ % (sizeof(h->reset_ids) / sizeof(h->reset_ids[0]))] =
            f->hd.stream_id;
        return 0;
    }
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    st->es_sent = 1;
    /* the answer is whole and its request over: the client need not send
     * the rest of its body (RFC 9113 8.1) */
    if (!st->in_eof && !st->live)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    return 0;
}

/* ---- the answer ---- */

/* How nghttp2 encodes <name>'s field: an X-Request-Id, new each time,
 * never goes into HPACK's dynamic table, where it would only push out
 * the fields that repeat. */
static uint8_t nv_flags(const char *name, size_t nlen)
{
    return nlen == 12 && h1_ci_eq(name, nlen, "x-request-id") ? NGHTTP2_NV_FLAG_NO_INDEX
                                                              : NGHTTP2_NV_FLAG_NONE;
}

/* <pre>[0..<npre>) then <text>'s field lines (h2h_fields) as nghttp2's
 * list, into <stack> (GW_H2_NV entries) or, when more, into *<nv>
 * allocated (the caller frees it unless it is <stack>); <trailers> drops
 * what may not be a trailer. How many, or -1 when out of memory. */
static ssize_t to_nv(char *text, size_t len, const nghttp2_nv *pre, size_t npre, bool trailers,
                     nghttp2_nv *stack, nghttp2_nv **nv)
{
    struct h1_header fs[GW_H2_NV], *f = fs;
    size_t n = h2h_fields(text, len, fs, GW_H2_NV - npre);

    *nv = stack;
    if (n + npre > GW_H2_NV) {
        if (!(f = malloc(n * sizeof(*f))) || !(*nv = malloc((n + npre) * sizeof(**nv)))) {
            free(f);
            *nv = stack;
            return -1;
        }
        h2h_fields(text, len, f, n);
    }
    if (npre) /* trailers have none, and memcpy takes no NULL even for 0 bytes */
        memcpy(*nv, pre, npre * sizeof(*pre));
    size_t m = npre;
    for (size_t i = 0; i < n; i++) {
        if (trailers && h1_trailer_forbidden(&f[i].name))
            continue; /* trailers: what may not be one is not passed on */
        (*nv)[m++] =
            (nghttp2_nv){(uint8_t *)f[i].name.ptr, (uint8_t *)f[i].value.ptr, f[i].name.len,
                         f[i].value.len, nv_flags(f[i].name.ptr, f[i].name.len)};
    }
    if (f != fs)
        free(f);
    return (ssize_t)m;
}

/* The trailers kept for <st> go after its last DATA: 0, or -1 (then the
 * stream just ends). */
static int submit_trailers(struct gw_h2s *st)
{
    nghttp2_nv stack[GW_H2_NV], *nv;
    ssize_t n = to_nv(st->trailers, st->trailers_len, NULL, 0, true, stack, &nv);
    int rv = n > 0 ? nghttp2_submit_trailer(st->h->s, st->id, nv, (size_t)n) : -1;

    if (nv != stack)
        free(nv);
    free(st->trailers);
    st->trailers = NULL;
    return rv == 0 ? 0 : -1;
}

/* The data provider of a response: what <out> holds, framed by
 * h2_send_data without a copy; deferred while it is empty and the answer
 * goes on (resumed when bytes come). */
static ssize_t data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    struct gw_h2s *st = src->ptr;
    size_t have = evbuffer_get_length(st->out), n = have < len ? have : len;

    (void)s;
    (void)id;
    (void)buf;
    (void)ud;
    if (!have && !st->out_eof) {
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == have && st->out_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->trailers && submit_trailers(st) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

int h2_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t len,
                 nghttp2_data_source *src, void *ud)
{
    static const char zeros[256];
    struct gw_h2 *h = ud;
    struct gw_h2s *st = src->ptr;
    struct evbuffer *out = h->c->io.out;
    size_t before = evbuffer_get_length(st->out), pad = f->data.padlen;
    unsigned char padlen = (unsigned char)(pad ? pad - 1 : 0);

    (void)s;
    if (h2_out_len(h) > GW_HWM)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (h2_out(h, framehd, 9) < 0 || (pad && h2_out(h, &padlen, 1) < 0))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (len <= h2_out_room(h)) { /* small: copied with the frames around it */
        evbuffer_remove(st->out, h->cache->gather + h->cache->glen, len);
        h->cache->glen += len;
    } else if (h2_out_flush(h) < 0 || evbuffer_remove_buffer(st->out, out, len) != (int)len) {
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* large: its chains moved, not copied */
    }
    if (padlen && h2_out(h, zeros, padlen) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->t_out = gw_now_ms();
    h2_credit(h, 2); /* a WINDOW_UPDATE for the stream and one for the connection */
    if (st->live && !st->in_drain && before > GW_LWM && before - len <= GW_LWM) {
        st->in_drain = 1;
        TAILQ_INSERT_TAIL(&h->drained, st, dlink);
    }
    return 0;
}

static void c_head_begin(struct gw_req *r, struct gw_obuf *o, int status,
                         const struct h1_slice *reason)
{
    struct gw_h2s *st = r->stream;

    (void)reason; /* HTTP/2 has none */
    evbuffer_drain(st->h->heads, evbuffer_get_length(st->h->heads));
    gw_ob_init(o, st->h->heads);
    st->status = status;
    st->h->cache->nnv = 1; /* :status, filled in at the end */
    st->h->cache->names_len = 0;
}

/* A field of the head: straight into the worker's list for nghttp2, its
 * name in lower case, rather than through a line read back; a line once
 * the list is full. */
static void c_field(struct gw_req *r, struct gw_obuf *o, const char *name, size_t nlen,
                    const char *value, size_t vlen)
{
    struct gw_h2_cache *k = ((struct gw_h2s *)r->stream)->h->cache;
    char *d = k->names + k->names_len;

    if (k->nnv == GW_H2_HEAD_NV || nlen > sizeof(k->names) - k->names_len) {
        gw_ob_field(o, name, nlen, value, vlen);
        return;
    }
    h1_lower_copy(d, name, nlen);
    k->names_len += nlen;
    o->total += nlen + vlen + 4; /* counted as its line would be: bytes_out (a 103 sent
                                  * forbids a retry), the access log */
    k->nv[k->nnv++] =
        (nghttp2_nv){(uint8_t *)d, (uint8_t *)value, nlen, vlen,
                     nlen == 12 && !memcmp(d, "x-request-id", 12) ? NGHTTP2_NV_FLAG_NO_INDEX
                                                                  : NGHTTP2_NV_FLAG_NONE};
}

static void c_head_end(struct gw_req *r, struct gw_obuf *o, unsigned flags)
{
    struct gw_h2s *st = r->stream;
    struct gw_h2 *h = st->h;
    struct gw_h2_cache *k = h->cache;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read};
    nghttp2_nv stack[GW_H2_NV], *nv;
    char *text = o->b, status[3];
    size_t len = o->n;
    ssize_t n;
    int rv;

    if (evbuffer_get_length(h->heads)) { /* it outgrew the obuf */
        gw_ob_flush(o);
        len = evbuffer_get_length(h->heads);
        text = (char *)evbuffer_pullup(h->heads, -1);
    }
    o->n = 0;
    status[0] = (char)('0' + st->status / 100 % 10);
    status[1] = (char)('0' + st->status / 10 % 10);
    status[2] = (char)('0' + st->status % 10);
    k->nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE};
    n = to_nv(text, len, k->nv, k->nnv, false, stack, &nv);
    if (n < 0 || (!(flags & (GW_HEAD_INTERIM | GW_HEAD_NOBODY)) && !st->out &&
                  !(st->out = evbuffer_new()))) {
        reset(st, NGHTTP2_INTERNAL_ERROR, 1);
        rv = 0;
    } else if (flags & GW_HEAD_INTERIM) {
        rv = nghttp2_submit_headers(h->s, NGHTTP2_FLAG_NONE, st->id, NULL, nv, (size_t)n, NULL);
    } else {
        st->head_sent = 1;
        st->out_eof = (flags & GW_HEAD_NOBODY) != 0;
        st->t_out = gw_now_ms();
        st->provider = !(flags & GW_HEAD_NOBODY);
        rv = nghttp2_submit_response(h->s, st->id, nv, (size_t)n, st->provider ? &prd : NULL);
    }
    if (rv != 0)
        reset(st, NGHTTP2_INTERNAL_ERROR, 1);
    if (nv != stack)
        free(nv);
    evbuffer_drain(h->heads, evbuffer_get_length(h->heads));
    h2_want_send(h);
}

/* <st>'s output grew from <before> bytes: a deferred provider goes on,
 * and output that begins is watched for a stall (client_idle_ms). */
static void out_grew(struct gw_h2s *st, size_t before)
{
    struct gw_h2 *h = st->h;

    if (!before) {
        st->t_out = gw_now_ms();
        h2_arm(h, st->t_out + gw_req_cfg(&st->req)->timeouts.client_idle_ms);
    }
    if (st->deferred) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->s, st->id);
    }
    h2_want_send(h);
}

static void c_data_move(struct gw_req *r, struct evbuffer *src, size_t n, struct gw_obuf *pend)
{
    struct gw_h2s *st = r->stream;
    size_t before;

    (void)pend; /* the head went to nghttp2 whole */
    if (!st->provider || st->out_eof) {
        evbuffer_drain(src, n);
        return;
    }
    before = evbuffer_get_length(st->out);
    evbuffer_remove_buffer(src, st->out, n);
    out_grew(st, before);
}

static void c_data(struct gw_req *r, const char *p, size_t n)
{
    struct gw_h2s *st = r->stream;
    size_t before;

    if (!st->provider || st->out_eof)
        return;
    before = evbuffer_get_length(st->out);
    evbuffer_add(st->out, p, n);
    out_grew(st, before);
}

static void c_end(struct gw_req *r, const char *trailers, size_t trailers_len)
{
    struct gw_h2s *st = r->stream;

    if (!st->provider || st->out_eof)
        return;
    if (trailers_len && (st->trailers = malloc(trailers_len))) {
        memcpy(st->trailers, trailers, trailers_len);
        st->trailers_len = trailers_len;
    }
    st->out_eof = 1;
    out_grew(st, 1);
}

static void c_abort(struct gw_req *r)
{
    reset(r->stream, NGHTTP2_INTERNAL_ERROR, 1);
}

static size_t c_out_pending(const struct gw_req *r)
{
    const struct gw_h2s *st = r->stream;

    return st->out ? evbuffer_get_length(st->out) : 0;
}

/* The body bytes <st> holds, a run at a time, to <cb>; each run taken
 * opens the windows by as much. */
static int c_body_feed(struct gw_req *r, h1_req_body_cb cb, void *ctx)
{
    struct gw_h2s *st = r->stream;
    struct gw_h2 *h = st->h;
    uint64_t max = h->lim.max_body_bytes;
    struct evbuffer_iovec v;

    if (st->in && gw_peek_first(st->in, &v)) {
        st->waiting = 0;
        if (max && st->body_in + v.iov_len > max) { /* no content-length said it */
            gw_proxy_fail(r, 413);
            return GW_FEED_FAILED;
        }
        if (cb(ctx, v.iov_base, v.iov_len) < 0) {
            gw_proxy_fail(r, 500);
            return GW_FEED_FAILED;
        }
        st->body_in += v.iov_len;
        nghttp2_session_consume(h->s, st->id, v.iov_len);
        evbuffer_drain(st->in, v.iov_len);
        h2_want_send(h);
        return GW_FEED_MORE;
    }
    if (st->in_eof) {
        st->waiting = 0;
        if (st->rtr_over) { /* its trailers passed the limit, as HTTP/1.1's may */
            gw_proxy_fail(r, 431);
            return GW_FEED_FAILED;
        }
        r->body_done = 1;
        return GW_FEED_DONE;
    }
    if (h->closing) { /* the client went before the end of its body */
        gw_proxy_fail(r, 400);
        return GW_FEED_FAILED;
    }
    st->waiting = 1;
    st->t_in = gw_now_ms();
    h2_arm(h, st->t_in + gw_req_cfg(r)->timeouts.client_body_ms);
    return GW_FEED_WAIT;
}

static size_t c_body_trailers(struct gw_req *r, const char **lines)
{
    struct gw_h2s *st = r->stream;

    if (r->pol_n && st->rtr_len) /* a forged X-Consumer as a trailer stays here too */
        st->rtr_len = gw_policy_drop_lines(r, st->rtr, st->rtr_len);
    *lines = st->rtr;
    return st->rtr_len;
}

static void c_body_read(struct gw_req *r, int on)
{
    struct gw_h2s *st = r->stream;

    st->rd_paused = !on;
    if (on && ((st->in && evbuffer_get_length(st->in)) || st->in_eof)) {
        ready(st);
        h2_want_send(st->h);
    }
}

/* The request is over (logged and counted): its parser's block goes back
 * to the pool, and the stream ends once its answer is out (an answer that
 * never began is a reset; a body the client still sends is cut short with
 * RST_STREAM NO_ERROR, RFC 9113 8.1). */
static void c_done(struct gw_req *r)
{
    struct gw_h2s *st = r->stream;
    struct gw_h2 *h = st->h;
    size_t n;

    st->live = 0;
    st->waiting = 0;
    h->answered++;
    h1_req_reset(&st->rp);
    gw_pmem_put(h->c->w, h1_req_take_mem(&st->rp), h1_req_mem_size(&st->rp));
    if (st->in && (n = evbuffer_get_length(st->in))) {
        evbuffer_drain(st->in, n);
        nghttp2_session_consume(h->s, st->id, n);
    }
    if (!st->head_sent && !st->aborted)
        reset(st, NGHTTP2_INTERNAL_ERROR, 1);
    else if (st->es_sent && !st->in_eof)
        reset(st, NGHTTP2_NO_ERROR, 1);
    h2_want_send(h);
}

const struct gw_codec gw_h2_codec = {
    .proto = "HTTP/2.0",
    .http1 = 0,
    .head_begin = c_head_begin,
    .head_end = c_head_end,
    .field = c_field,
    .data_move = c_data_move,
    .data = c_data,
    .end = c_end,
    .abort = c_abort,
    .out_pending = c_out_pending,
    .body_feed = c_body_feed,
    .body_read = c_body_read,
    .body_trailers = c_body_trailers,
    .done = c_done,
};
