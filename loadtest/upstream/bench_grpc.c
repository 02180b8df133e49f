/*
 * bench_grpc.c - the gRPC upstream that loadtest/grpc puts behind a proxy.
 *
 * A unary gRPC echo server over HTTP/2 with prior knowledge (h2c), as lean
 * as bench_upstream is for HTTP/1.1: one thread, one libevent base without
 * locks, a plain read and write event per connection (no bufferevent), and
 * libnghttp2 for framing, HPACK and flow control (the shape of nghttp2's
 * examples/libevent-server.c, minus TLS). Every request, whatever its method
 * and path, is answered when its body has ended:
 *
 *   HEADERS  :status 200, content-type application/grpc
 *   DATA     the request's body, byte for byte (its gRPC messages echoed)
 *   HEADERS  grpc-status 0 (trailers, END_STREAM)
 *
 * A body over 64 KiB gets a trailers-only answer with grpc-status 8
 * (RESOURCE_EXHAUSTED) instead: this server is for small unary calls.
 *
 * It counts what a proxy did to it, so that a benchmark can say how many
 * streams a proxy put on each upstream connection:
 *
 *   SIGUSR1  writes the counts of the interval since the previous SIGUSR1
 *            (or the start) to --stats-file, atomically, and starts a new
 *            interval;
 *   SIGTERM  (and SIGINT) prints the totals on stderr and ends.
 *
 * The stats line is "key=value" pairs: interval (its number, from 1),
 * accepted (connections accepted), closed, open (now), streams (answered,
 * in the interval), conns_used (connections that carried at least one of
 * those streams), peak_streams (the most streams open at once on one
 * connection), total_accepted, total_streams.
 *
 *   bench_grpc --listen 127.0.0.1:PORT [--port-file FILE] [--stats-file FILE]
 *              [--max-streams N]
 *
 * PORT 0 asks the kernel for a free port; --port-file then tells which one.
 * --max-streams is the SETTINGS_MAX_CONCURRENT_STREAMS offered (default 128).
 * Only 127.0.0.1 is accepted: this server is for loopback benchmarks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "loadtest/upstream/bench_common.h"

#define BG_READ_SIZE (64 * 1024)          /* one recv() */
#define BG_OUT_HIGH (64 * 1024)           /* stop asking nghttp2 for frames above this */
#define BG_MAX_BODY (64 * 1024)           /* the largest request body echoed */
#define BG_INLINE_BODY 256                /* a body this small needs no allocation */
#define BG_WINDOW (1024 * 1024)           /* the receive window offered per stream */
#define BG_CONN_WINDOW (16 * 1024 * 1024) /* and per connection */

/* The counts of one interval; <peak_streams> is a maximum, the rest sums. */
struct bg_counts {
    unsigned long accepted, closed, streams, conns_used, peak_streams;
};

/* The whole server: one of these, owned by main(). */
struct bg_server {
    struct event_base *base;
    struct evconnlistener *listener;
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
    struct bg_conn *conns; /* every open connection, for cleanup */
    const char *stats_file;
    unsigned max_streams;
    unsigned long interval; /* the number of the interval being counted */
    unsigned long open;     /* connections open now */
    unsigned long total_accepted, total_streams;
    struct bg_counts now; /* the interval being counted */
};

/* One client connection. <out> holds bytes nghttp2 made and the socket has
 * not taken yet. */
struct bg_conn {
    struct bg_server *srv;
    int fd;
    struct event *rev, *wev;
    int writing; /* <wev> is added */
    nghttp2_session *h2;
    struct evbuffer *out;
    struct bg_stream *streams; /* begun and not closed: nghttp2_session_del does not
                                * close them through our callback */
    unsigned open_streams;     /* how many */
    unsigned long interval;    /* the last interval this connection carried a stream in */
    struct bg_conn *prev, *next;
};

/* One request: its body, kept for the echo. */
struct bg_stream {
    size_t len;  /* body bytes received */
    size_t sent; /* body bytes given to nghttp2 */
    int too_big; /* the body passed BG_MAX_BODY: answer RESOURCE_EXHAUSTED */
    char *body;  /* <inline_body> or a malloc'ed block of BG_MAX_BODY */
    struct bg_stream *prev, *next;
    char inline_body[BG_INLINE_BODY];
};

#define BG_NV(n, v)                                                                                \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,                              \
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                           \
    }

static const nghttp2_nv bg_head[] = {BG_NV(":status", "200"),
                                     BG_NV("content-type", "application/grpc")};
static const nghttp2_nv bg_trailers[] = {BG_NV("grpc-status", "0")};
static const nghttp2_nv bg_too_big[] = {
    BG_NV(":status", "200"), BG_NV("content-type", "application/grpc"), BG_NV("grpc-status", "8"),
    BG_NV("grpc-message", "bench_grpc: request over 64 KiB")};

static void bg_conn_flush(struct bg_conn *c);

/* Unlinks <st> from <c> and frees it. */
static void bg_stream_free(struct bg_conn *c, struct bg_stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    c->open_streams--;
    if (st->body != st->inline_body)
        free(st->body);
    free(st);
}

/* Frees <c>: its events, session, streams and socket; unlinks it from its
 * server. */
static void bg_conn_free(struct bg_conn *c)
{
    struct bg_server *s = c->srv;

    nghttp2_session_del(c->h2);
    while (c->streams)
        bg_stream_free(c, c->streams);
    event_free(c->rev);
    event_free(c->wev);
    evbuffer_free(c->out);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->open--;
    s->now.closed++;
    free(c);
}

/* nghttp2 asks for the echoed body of <stream_id>: the bytes not sent yet,
 * then EOF without END_STREAM, since the trailers end the stream. */
static ssize_t bg_body_read(nghttp2_session *h2, int32_t stream_id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    struct bg_stream *st = source->ptr;
    size_t n = st->len - st->sent;

    (void)user_data;
    if (n > length)
        n = length;
    memcpy(buf, st->body + st->sent, n);
    st->sent += n;
    if (st->sent == st->len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (nghttp2_submit_trailer(h2, stream_id, bg_trailers,
                                   sizeof(bg_trailers) / sizeof(bg_trailers[0])) != 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

/* The request on <stream_id> has ended: answers it. */
static int bg_respond(nghttp2_session *h2, int32_t stream_id)
{
    struct bg_stream *st = nghttp2_session_get_stream_user_data(h2, stream_id);
    nghttp2_data_provider prd;

    if (!st)
        return 0; /* a stream we did not begin (cannot happen with a server session) */
    if (st->too_big)
        return nghttp2_submit_response(h2, stream_id, bg_too_big,
                                       sizeof(bg_too_big) / sizeof(bg_too_big[0]), NULL);
    prd.source.ptr = st;
    prd.read_callback = bg_body_read;
    return nghttp2_submit_response(h2, stream_id, bg_head, sizeof(bg_head) / sizeof(bg_head[0]),
                                   &prd);
}

static int bg_on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user_data)
{
    struct bg_conn *c = user_data;
    struct bg_stream *st;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = malloc(sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    st->len = st->sent = 0;
    st->too_big = 0;
    st->body = st->inline_body;
    st->prev = NULL;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(h2, frame->hd.stream_id, st);
    if (++c->open_streams > c->srv->now.peak_streams)
        c->srv->now.peak_streams = c->open_streams;
    return 0;
}

static int bg_on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user_data)
{
    struct bg_stream *st = nghttp2_session_get_stream_user_data(h2, stream_id);

    (void)flags;
    (void)user_data;
    if (!st || st->too_big)
        return 0;
    if (len > BG_MAX_BODY - st->len) {
        st->too_big = 1; /* the rest is read and dropped; flow control still moves */
        return 0;
    }
    if (st->body == st->inline_body && st->len + len > BG_INLINE_BODY) {
        char *big = malloc(BG_MAX_BODY);
        if (!big)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        memcpy(big, st->inline_body, st->len);
        st->body = big;
    }
    memcpy(st->body + st->len, data, len);
    st->len += len;
    return 0;
}

static int bg_on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user_data)
{
    (void)user_data;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return bg_respond(h2, frame->hd.stream_id) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
    return 0;
}

/* A stream ended: counts it when it was answered in full, frees its body. */
static int bg_on_stream_close(nghttp2_session *h2, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    struct bg_conn *c = user_data;
    struct bg_server *s = c->srv;
    struct bg_stream *st = nghttp2_session_get_stream_user_data(h2, stream_id);

    if (!st)
        return 0;
    if (error_code == NGHTTP2_NO_ERROR) {
        s->now.streams++;
        s->total_streams++;
        if (c->interval != s->interval) {
            c->interval = s->interval;
            s->now.conns_used++;
        }
    }
    bg_stream_free(c, st);
    return 0;
}

/* Reads what the socket has and feeds it to nghttp2, then writes what
 * nghttp2 answers. */
static void bg_on_readable(evutil_socket_t fd, short what, void *arg)
{
    static uint8_t buf[BG_READ_SIZE]; /* one thread: one buffer serves every connection */
    struct bg_conn *c = arg;

    (void)what;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            goto fail_close;
        }
        if (n == 0)
            goto fail_close; /* the peer is gone: what it asked cannot be answered */
        if (nghttp2_session_mem_recv(c->h2, buf, (size_t)n) < 0)
            goto fail_close;
        if ((size_t)n < sizeof(buf))
            break; /* level-triggered: no need for a read that says EAGAIN */
    }
    bg_conn_flush(c);
    return;

fail_close:
    bg_conn_free(c);
}

static void bg_on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    bg_conn_flush(arg);
}

/* Moves nghttp2's frames into <out> and <out> into the socket; watches for
 * room when the socket is full. Closes <c> when the session is done (a
 * GOAWAY sent and received) or the socket fails. */
static void bg_conn_flush(struct bg_conn *c)
{
    for (;;) {
        while (evbuffer_get_length(c->out) < BG_OUT_HIGH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->h2, &data);
            if (n < 0)
                goto fail_close;
            if (n == 0)
                break;
            if (evbuffer_add(c->out, data, (size_t)n) < 0)
                goto fail_close;
        }
        if (evbuffer_get_length(c->out) == 0)
            break;
        if (evbuffer_write(c->out, c->fd) < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                goto fail_close;
        }
        if (evbuffer_get_length(c->out) != 0)
            break; /* the socket is full */
    }
    if (evbuffer_get_length(c->out) != 0) {
        if (!c->writing && event_add(c->wev, NULL) < 0)
            goto fail_close;
        c->writing = 1;
        return;
    }
    if (c->writing)
        event_del(c->wev);
    c->writing = 0;
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        goto fail_close;
    return;

fail_close:
    bg_conn_free(c);
}

/* A new connection: its session, with our SETTINGS queued. */
static void bg_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                         int salen, void *arg)
{
    struct bg_server *s = arg;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, BG_WINDOW},
    };
    struct bg_conn *c;
    int one = 1;

    (void)l;
    (void)sa;
    (void)salen;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c = calloc(1, sizeof(*c));
    if (!c)
        goto fail_close;
    c->srv = s;
    c->fd = fd;
    c->out = evbuffer_new();
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, bg_on_readable, c);
    c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, bg_on_writable, c);
    if (!c->out || !c->rev || !c->wev)
        goto fail_free;
    if (nghttp2_session_server_new2(&c->h2, s->callbacks, c, s->option) != 0)
        goto fail_free;
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, BG_CONN_WINDOW) != 0)
        goto fail_session;
    if (event_add(c->rev, NULL) < 0)
        goto fail_session;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->open++;
    s->now.accepted++;
    s->total_accepted++;
    bg_conn_flush(c); /* our SETTINGS go first; may free c */
    return;

fail_session:
    nghttp2_session_del(c->h2);
fail_free:
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->out)
        evbuffer_free(c->out);
    free(c);
fail_close:
    close(fd);
}

/* SIGUSR1: the interval's counts to the stats file; a new interval. */
static void bg_on_usr1(evutil_socket_t sig, short what, void *arg)
{
    struct bg_server *s = arg;
    const struct bg_counts *n = &s->now;
    char line[512];

    (void)sig;
    (void)what;
    snprintf(line, sizeof(line),
             "interval=%lu accepted=%lu closed=%lu open=%lu streams=%lu conns_used=%lu "
             "peak_streams=%lu total_accepted=%lu total_streams=%lu\n",
             s->interval, n->accepted, n->closed, s->open, n->streams, n->conns_used,
             n->peak_streams, s->total_accepted, s->total_streams);
    if (s->stats_file && bench_write_file(s->stats_file, line) < 0)
        fprintf(stderr, "bench_grpc: cannot write %s: %s\n", s->stats_file, strerror(errno));
    memset(&s->now, 0, sizeof(s->now));
    s->interval++;
}

static void bg_on_term(evutil_socket_t sig, short what, void *arg)
{
    struct bg_server *s = arg;

    (void)sig;
    (void)what;
    fprintf(stderr, "bench_grpc: connections accepted %lu, streams answered %lu\n",
            s->total_accepted, s->total_streams);
    event_base_loopbreak(s->base);
}

/* The callbacks and options every session shares. Returns 0 or -1. */
static int bg_h2_setup(struct bg_server *s)
{
    nghttp2_session_callbacks *cb;

    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, bg_on_begin_headers);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, bg_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, bg_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, bg_on_stream_close);
    s->callbacks = cb;
    if (nghttp2_option_new(&s->option) != 0)
        return -1;
    /* A proxy may open many streams over a run: keep no closed ones. */
    nghttp2_option_set_no_closed_streams(s->option, 1);
    return 0;
}

static void bg_usage(void)
{
    fprintf(stderr, "usage: bench_grpc --listen 127.0.0.1:PORT [--port-file FILE] "
                    "[--stats-file FILE] [--max-streams N]\n");
}

/* Listens on <sin> and tells the port in <port_file>. Returns 0 or -1. */
static int bg_listen(struct bg_server *s, const struct sockaddr_in *sin, const char *port_file)
{
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);
    char line[32];

    s->listener = evconnlistener_new_bind(
        s->base, bg_on_accept, s, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
        4096, (const struct sockaddr *)sin, sizeof(*sin));
    if (!s->listener) {
        perror("bench_grpc: listen");
        return -1;
    }
    if (getsockname(evconnlistener_get_fd(s->listener), (struct sockaddr *)&bound, &len) < 0)
        return -1;
    snprintf(line, sizeof(line), "%u\n", (unsigned)ntohs(bound.sin_port));
    if (port_file && bench_write_file(port_file, line) < 0) {
        fprintf(stderr, "bench_grpc: cannot write %s: %s\n", port_file, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bg_server s = {.max_streams = 128, .interval = 1};
    struct event *sig_term = NULL, *sig_int = NULL, *sig_usr1 = NULL;
    struct event_config *cfg;
    struct sockaddr_in sin;
    const char *listen_arg = NULL, *port_file = NULL;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen_arg = argv[++i];
        } else if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc) {
            port_file = argv[++i];
        } else if (strcmp(argv[i], "--stats-file") == 0 && i + 1 < argc) {
            s.stats_file = argv[++i];
        } else if (strcmp(argv[i], "--max-streams") == 0 && i + 1 < argc) {
            long v = strtol(argv[++i], NULL, 10);
            if (v < 1 || v > 100000)
                goto fail_usage;
            s.max_streams = (unsigned)v;
        } else {
            goto fail_usage;
        }
    }
    if (!listen_arg || bench_parse_listen(listen_arg, &sin) < 0)
        goto fail_usage;
    signal(SIGPIPE, SIG_IGN);

    cfg = event_config_new();
    if (!cfg)
        goto fail;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
    s.base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!s.base)
        goto fail;
    if (bg_h2_setup(&s) < 0)
        goto fail_h2;
    sig_term = evsignal_new(s.base, SIGTERM, bg_on_term, &s);
    sig_int = evsignal_new(s.base, SIGINT, bg_on_term, &s);
    sig_usr1 = evsignal_new(s.base, SIGUSR1, bg_on_usr1, &s);
    if (!sig_term || !sig_int || !sig_usr1 || event_add(sig_term, NULL) < 0 ||
        event_add(sig_int, NULL) < 0 || event_add(sig_usr1, NULL) < 0)
        goto fail_signals;
    if (bg_listen(&s, &sin, port_file) < 0)
        goto fail_signals;

    if (event_base_dispatch(s.base) == 0)
        rc = 0;

    while (s.conns)
        bg_conn_free(s.conns);
    evconnlistener_free(s.listener);
fail_signals:
    if (sig_term)
        event_free(sig_term);
    if (sig_int)
        event_free(sig_int);
    if (sig_usr1)
        event_free(sig_usr1);
fail_h2:
    nghttp2_session_callbacks_del(s.callbacks); /* both accept NULL */
    nghttp2_option_del(s.option);
    event_base_free(s.base);
    return rc;
fail:
    fprintf(stderr, "bench_grpc: cannot start libevent\n");
    return 1;
fail_usage:
    bg_usage();
    return 2;
}
