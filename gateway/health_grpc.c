/*
 * health_grpc.c - the gRPC health check (health_grpc.h): the request and
 * answer messages by hand, the verdict, and a one-shot nghttp2 client
 * session that sends one call of grpc.health.v1.Health/Check on a probe's
 * connection and reads its answer. nghttp2 owns the framing, HPACK and
 * flow control; this file feeds it the bytes the io read and queues on
 * the io's output what it sends, as the server side (h2.c) does.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/health_grpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "gateway/grpc.h"
#include "gateway/io_tls.h"

#define GRPC_HDR 5 /* a message's flag byte and 4-byte length */

/* ---- protobuf, the little of it a health check needs ---- */

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };

static size_t varint_len(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *varint_put(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Reads a varint at *<p> (before <end>) into *<v> and moves *<p> past it.
 * -1 for one cut short or longer than 64 bits. */
static int varint_get(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p == end)
            return -1;
        unsigned char b = *(*p)++;
        if (shift == 63 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

size_t gw_hgrpc_request(const char *service, unsigned char *out, size_t cap)
{
    size_t slen = service ? strlen(service) : 0;
    size_t mlen = slen ? 1 + varint_len(slen) + slen : 0;
    unsigned char *p = out;

    if (mlen > UINT32_MAX || slen > mlen)
        return 0;
    if (cap < GRPC_HDR + mlen)
        return GRPC_HDR + mlen;
    *p++ = 0; /* not compressed */
    for (int shift = 24; shift >= 0; shift -= 8)
        *p++ = (unsigned char)(mlen >> shift);
    if (slen) {
        *p++ = 1 << 3 | PB_LEN; /* field 1, service */
        p = varint_put(p, slen);
        memcpy(p, service, slen);
    }
    return GRPC_HDR + mlen;
}

int gw_hgrpc_frame(const unsigned char *p, size_t n, const unsigned char **msg, size_t *len)
{
    uint32_t mlen;

    if (n >= 1 && p[0] != 0) /* 1: compressed, though we accepted no encoding */
        return -1;
    if (n < GRPC_HDR)
        return 0;
    mlen = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (n - GRPC_HDR < mlen)
        return 0;
    if (n - GRPC_HDR > mlen) /* a second message: not a unary answer */
        return -1;
    *msg = p + GRPC_HDR;
    *len = mlen;
    return 1;
}

int gw_hgrpc_response(const unsigned char *p, size_t n, int32_t *status)
{
    const unsigned char *end = p + n;
    uint64_t key, v;

    *status = GW_HGRPC_UNKNOWN;
    while (p < end) {
        if (varint_get(&p, end, &key) < 0 || key >> 3 == 0 || key >> 3 > 0x1fffffff)
            return -1;
        switch (key & 7) {
        case PB_VARINT:
            if (varint_get(&p, end, &v) < 0)
                return -1;
            if (key >> 3 == 1)
                *status = (int32_t)(uint32_t)v; /* an int32 enum: its low 32 bits */
            break;
        case PB_FIXED64:
        case PB_FIXED32: {
            size_t k = (key & 7) == PB_FIXED64 ? 8 : 4;
            if ((size_t)(end - p) < k)
                return -1;
            p += k;
            break;
        }
        case PB_LEN:
            if (varint_get(&p, end, &v) < 0 || v > (uint64_t)(end - p))
                return -1;
            p += v;
            break;
        default: /* groups (3, 4) are not proto3; 6 and 7 are nothing */
            return -1;
        }
    }
    return 0;
}

static const char *serving_name(int32_t s)
{
    switch (s) {
    case GW_HGRPC_UNKNOWN:
        return "UNKNOWN";
    case GW_HGRPC_SERVING:
        return "SERVING";
    case GW_HGRPC_NOT_SERVING:
        return "NOT_SERVING";
    case GW_HGRPC_SERVICE_UNKNOWN:
        return "SERVICE_UNKNOWN";
    default:
        return NULL;
    }
}

int gw_hgrpc_verdict(const struct gw_hgrpc_answer *a, char *why, size_t cap)
{
    const unsigned char *msg;
    size_t len;
    int32_t st;
    int f;

    if (a->reset)
        snprintf(why, cap, "stream reset (HTTP/2 error %u)", (unsigned)a->reset);
    else if (!a->http_status)
        snprintf(why, cap, "no response head");
    else if (a->http_status != 200)
        snprintf(why, cap, "HTTP status %d", a->http_status);
    else if (!a->grpc_type)
        snprintf(why, cap, "not a gRPC answer (content-type)");
    else if (a->grpc_status < 0)
        snprintf(why, cap, "no grpc-status");
    else if (a->grpc_status != GW_GRPC_OK)
        snprintf(why, cap, "grpc-status %d", a->grpc_status);
    else if (a->overflow)
        snprintf(why, cap, "answer over %d bytes", GW_HGRPC_BODY_MAX);
    else if ((f = gw_hgrpc_frame(a->body, a->len, &msg, &len)) <= 0)
        snprintf(why, cap, f ? "malformed gRPC message" : "answer cut short");
    else if (gw_hgrpc_response(msg, len, &st) < 0)
        snprintf(why, cap, "malformed HealthCheckResponse");
    else if (st == GW_HGRPC_SERVING)
        return 1;
    else if (serving_name(st))
        snprintf(why, cap, "%s", serving_name(st));
    else
        snprintf(why, cap, "serving status %ld", (long)st);
    return 0;
}

/* ---- the call ---- */

struct gw_hgrpc {
    nghttp2_session *s;
    struct gw_io *io;
    int tls;
    int32_t stream;
    int verdict; /* -1: none yet */
    char *authority;
    char *get;        /* an "http" check of an HTTP/2 pool: GET this path; NULL: the gRPC call */
    char timeout[24]; /* grpc-timeout: the server may stop when we do */
    unsigned char *req;
    size_t reqlen, reqoff;
    struct gw_hgrpc_answer a;
    char why[160];
    char h2err[128]; /* nghttp2's first complaint of the peer ("" none): a non-HTTP/2 server's */
};

static const char path[] = "/grpc.health.v1.Health/Check";

static void fail(struct gw_hgrpc *g, const char *why)
{
    g->verdict = 0;
    snprintf(g->why, sizeof(g->why), "%s", why);
}

/* Sends the request's one message, then END_STREAM. */
static ssize_t req_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    struct gw_hgrpc *g = ud;
    size_t n = g->reqlen - g->reqoff < len ? g->reqlen - g->reqoff : len;

    (void)s;
    (void)id;
    (void)src;
    memcpy(buf, g->req + g->reqoff, n);
    g->reqoff += n;
    if (g->reqoff == g->reqlen)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* "application/grpc", alone or with "+proto" or parameters after it. */
static int grpc_type(const uint8_t *v, size_t n)
{
    static const char t[] = "application/grpc";
    size_t k = sizeof(t) - 1;

    return n >= k && !strncasecmp((const char *)v, t, k) && (n == k || v[k] == '+' || v[k] == ';');
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    struct gw_hgrpc *g = ud;

    (void)s;
    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != g->stream)
        return 0;
    /* nghttp2 checked :status is three digits, and lower-cased names */
    if (nlen == 7 && !memcmp(name, ":status", 7))
        g->a.http_status = atoi((const char *)value); /* a 1xx is replaced by the final one */
    else if (nlen == 12 && !memcmp(name, "content-type", 12))
        g->a.grpc_type = grpc_type(value, vlen);
    else if (nlen == 11 && !memcmp(name, "grpc-status", 11))
        g->a.grpc_status = gw_grpc_status_value((const char *)value, vlen);
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    struct gw_hgrpc *g = ud;

    (void)s;
    (void)flags;
    if (id != g->stream || g->get) /* a GET's body is not read */
        return 0;
    if (len > sizeof(g->a.body) - g->a.len) {
        g->a.overflow = 1;
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* nothing good can follow */
    }
    memcpy(g->a.body + g->a.len, data, len);
    g->a.len += len;
    return 0;
}

static int on_error(nghttp2_session *s, int code, const char *msg, size_t len, void *ud)
{
    struct gw_hgrpc *g = ud;
    const char *dot = memchr(msg, '.', len);

    (void)s;
    (void)code;
    /* its first sentence: the rest guesses ("Perhaps, peer does not ...") */
    if (!g->h2err[0])
        snprintf(g->h2err, sizeof(g->h2err), "%.*s", (int)(dot ? (size_t)(dot - msg) : len), msg);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    struct gw_hgrpc *g = ud;

    (void)s;
    if (id == g->stream && g->verdict < 0) {
        g->a.reset = code;
        if (!g->get)
            g->verdict = gw_hgrpc_verdict(&g->a, g->why, sizeof(g->why));
        else if (g->a.http_status && !code) /* its status is the caller's to judge */
            g->verdict = 1;
        else
            fail(g, code ? "the stream was reset" : "no answer");
    }
    return 0;
}

/* Queues what nghttp2 has to send on the io's output. -1 on an error. */
static int flush(struct gw_hgrpc *g)
{
    const uint8_t *p;
    ssize_t n;

    while ((n = nghttp2_session_mem_send(g->s, &p)) > 0)
        if (evbuffer_add(g->io->out, p, (size_t)n) < 0)
            return -1;
    return n < 0 ? -1 : 0;
}

/* A check over <io> to <authority>, nothing sent yet; NULL when out of
 * memory. */
static struct gw_hgrpc *hgrpc_alloc(struct gw_io *io, const char *authority, int tls)
{
    struct gw_hgrpc *g = calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    g->io = io;
    g->tls = tls;
    g->stream = -1;
    g->verdict = -1;
    g->a.grpc_status = -1;
    if (!(g->authority = strdup(authority))) {
        free(g);
        return NULL;
    }
    return g;
}

struct gw_hgrpc *gw_hgrpc_new(struct gw_io *io, const char *authority, const char *service, int tls,
                              unsigned timeout_ms)
{
    struct gw_hgrpc *g = hgrpc_alloc(io, authority, tls);

    if (!g)
        return NULL;
    snprintf(g->timeout, sizeof(g->timeout), "%um", timeout_ms ? timeout_ms : 1);
    g->reqlen = gw_hgrpc_request(service, NULL, 0);
    if (!g->reqlen || !(g->req = malloc(g->reqlen))) {
        gw_hgrpc_free(g);
        return NULL;
    }
    gw_hgrpc_request(service, g->req, g->reqlen);
    return g;
}

struct gw_hgrpc *gw_hgrpc_new_get(struct gw_io *io, const char *authority, const char *target,
                                  int tls)
{
    struct gw_hgrpc *g = hgrpc_alloc(io, authority, tls);

    if (g && !(g->get = strdup(target))) {
        gw_hgrpc_free(g);
        return NULL;
    }
    return g;
}

void gw_hgrpc_free(struct gw_hgrpc *g)
{
    if (!g)
        return;
    nghttp2_session_del(g->s);
    free(g->get);
    free(g->req);
    free(g->authority);
    free(g);
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME     \
    }

/* The session, its SETTINGS and the call. -1 on out of memory. */
static int call(struct gw_hgrpc *g)
{
    nghttp2_session_callbacks *cbs;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_data_provider prd = {.read_callback = req_read};
    const nghttp2_nv get[] = {
        NV(":method", "GET"),
        NV(":scheme", g->tls ? "https" : "http"),
        NV(":path", g->get ? g->get : "/"),
        NV(":authority", g->authority),
        NV("user-agent", "switchyard-health-check"),
    };
    const nghttp2_nv nva[] = {
        NV(":method", "POST"),
        NV(":scheme", g->tls ? "https" : "http"),
        NV(":path", path),
        NV(":authority", g->authority),
        NV("content-type", "application/grpc"),
        NV("te", "trailers"),
        NV("grpc-timeout", g->timeout),
        NV("user-agent", "switchyard-health-check"),
    };
    int rc;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    nghttp2_session_callbacks_set_error_callback2(cbs, on_error);
    rc = nghttp2_session_client_new(&g->s, cbs, g);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0)
        return -1;
    if (nghttp2_submit_settings(g->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
        return -1;
    if (g->get)
        g->stream =
            nghttp2_submit_request(g->s, NULL, get, sizeof(get) / sizeof(get[0]), NULL, NULL);
    else
        g->stream =
            nghttp2_submit_request(g->s, NULL, nva, sizeof(nva) / sizeof(nva[0]), &prd, NULL);
    return g->stream < 0 ? -1 : flush(g);
}

int gw_hgrpc_start(struct gw_hgrpc *g)
{
    /* a server that did not choose h2 would read our preface as HTTP/1 */
    if (g->tls && !gw_tls_h2(g->io)) {
        fail(g, "the server did not choose h2 by ALPN");
        return -1;
    }
    if (call(g) < 0) {
        fail(g, "out of memory");
        return -1;
    }
    gw_io_read(g->io, 1);
    return 0;
}

int gw_hgrpc_read(struct gw_hgrpc *g)
{
    struct evbuffer *in = g->io->in;
    struct evbuffer_iovec v;

    while (g->verdict < 0 && evbuffer_peek(in, -1, NULL, &v, 1) > 0) {
        ssize_t n = nghttp2_session_mem_recv(g->s, v.iov_base, v.iov_len);
        if (n < 0) {
            if (g->a.overflow)
                snprintf(g->why, sizeof(g->why), "answer over %d bytes", GW_HGRPC_BODY_MAX);
            else
                snprintf(g->why, sizeof(g->why), "HTTP/2: %s",
                         g->h2err[0] ? g->h2err : nghttp2_strerror((int)n));
            g->verdict = 0;
            break;
        }
        evbuffer_drain(in, (size_t)n);
    }
    if (g->verdict < 0 && flush(g) < 0)
        fail(g, "out of memory");
    /* GOAWAY, ours (the peer broke HTTP/2: nghttp2 said how) or its */
    if (g->verdict < 0 && !nghttp2_session_want_read(g->s) && !nghttp2_session_want_write(g->s)) {
        if (g->h2err[0])
            snprintf(g->why, sizeof(g->why), "HTTP/2: %s", g->h2err);
        else
            snprintf(g->why, sizeof(g->why), "the connection ended before the answer");
        g->verdict = 0;
    }
    return g->verdict;
}

const char *gw_hgrpc_why(const struct gw_hgrpc *g)
{
    return g->verdict == 0 ? g->why : NULL;
}

int gw_hgrpc_http_status(const struct gw_hgrpc *g)
{
    return g->a.http_status;
}
