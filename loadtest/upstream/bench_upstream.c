/*
 * bench_upstream.c - the upstream that benchmarks put behind a proxy.
 *
 * It has to be faster than any proxy in front of it, so it does as little as
 * an HTTP/1.1 keep-alive server can: one thread, raw level-triggered epoll,
 * one fixed input and output buffer per connection (nothing is allocated per
 * request), canned responses built once at start, and a request scanner that
 * only finds request boundaries. It understands requests without a body and
 * requests with a Content-Length body; chunked request bodies are refused
 * with 501. Pipelined requests are answered in order, in as few writes as the
 * output buffer allows.
 *
 * Every path answers 200 "Hello, World!" (13 bytes, text/plain). A path that
 * ends with "/json", or a query that contains "json", answers a ~5 KB JSON
 * array of 50 items instead. HEAD gets the same headers without the body.
 *
 *   bench_upstream --listen 127.0.0.1:PORT [--port-file FILE]
 *
 * PORT 0 asks the kernel for a free port; --port-file then tells which one
 * (written atomically once the socket listens). Only 127.0.0.1 is accepted:
 * this server is for loopback benchmarks and nothing else. SIGINT and SIGTERM
 * end it cleanly. (Linux only: EAGAIN is EWOULDBLOCK there.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "loadtest/upstream/bench_common.h"

#define BU_IN_SIZE (16 * 1024)  /* request head + pipelined requests */
#define BU_OUT_SIZE (64 * 1024) /* responses waiting for the socket */
#define BU_MAX_EVENTS 256
#define BU_JSON_ITEMS 50

/* One client connection. <in> holds unparsed bytes, <out> unsent ones. */
struct bu_conn {
    int fd;
    unsigned events;  /* the epoll mask currently registered */
    int closing;      /* close once <out> is flushed */
    size_t in_len;    /* bytes in <in> */
    size_t body_left; /* request body bytes still to discard */
    size_t out_off;   /* first unsent byte of <out> */
    size_t out_len;   /* end of the bytes in <out> */
    struct bu_conn *prev, *next;
    char in[BU_IN_SIZE];
    char out[BU_OUT_SIZE];
};

/* A canned response: full (GET) and headers-only (HEAD). */
struct bu_resp {
    char *full;
    size_t full_len;
    size_t head_len; /* the first head_len bytes of <full> */
};

/* The whole server: one of these, owned by main(). */
struct bu_server {
    int epfd;
    int lfd;
    struct bu_conn *conns; /* every open connection, for cleanup */
    struct bu_resp hello;
    struct bu_resp json;
    size_t max_resp; /* the longest canned response */
};

static const char bu_400[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n";
static const char bu_431[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                             "Content-Length: 0\r\nConnection: close\r\n\r\n";
static const char bu_501[] = "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n";

static volatile sig_atomic_t bu_stop;

static void bu_on_signal(int sig)
{
    (void)sig;
    bu_stop = 1;
}

/* Builds a canned 200 response with <body> of <body_len> bytes into <r>.
 * Returns 0, or -1 when out of memory. */
static int bu_resp_build(struct bu_resp *r, const char *ctype, const char *body, size_t body_len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nServer: bench_upstream\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     ctype, body_len);

    if (n < 0 || (size_t)n >= sizeof(head))
        return -1;
    r->full = malloc((size_t)n + body_len);
    if (!r->full)
        return -1;
    memcpy(r->full, head, (size_t)n);
    memcpy(r->full + n, body, body_len);
    r->head_len = (size_t)n;
    r->full_len = (size_t)n + body_len;
    return 0;
}

/* Encodes the JSON document once: 50 items with id, name, price and tags.
 * Returns a malloc'ed string (the caller frees it) and its length in <len>,
 * or NULL when out of memory. */
static char *bu_json_encode(size_t *len)
{
    static const char *const tags[] = {"red", "green", "blue", "small", "large", "sale"};
    size_t cap = 8192, used = 0;
    char *buf = malloc(cap);

    if (!buf)
        return NULL;
    buf[used++] = '[';
    for (int i = 0; i < BU_JSON_ITEMS; i++) {
        int n = snprintf(buf + used, cap - used,
                         "%s{\"id\":%d,\"name\":\"Item number %d of the catalogue\","
                         "\"price\":%d.%02d,\"tags\":[\"%s\",\"%s\",\"%s\"]}",
                         i ? "," : "", i + 1, i + 1, 5 + (i * 37) % 200, (i * 13) % 100,
                         tags[i % 6], tags[(i + 2) % 6], tags[(i + 4) % 6]);
        if (n < 0 || (size_t)n >= cap - used - 2) {
            free(buf);
            return NULL; /* cap is sized for 50 items; never reached */
        }
        used += (size_t)n;
    }
    buf[used++] = ']';
    buf[used++] = '\n';
    *len = used;
    return buf;
}

/* Updates the epoll mask of <c> to <events> if it changed. */
static int bu_conn_watch(struct bu_server *s, struct bu_conn *c, unsigned events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};

    if (c->events == events)
        return 0;
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        return -1;
    c->events = events;
    return 0;
}

static void bu_conn_close(struct bu_server *s, struct bu_conn *c)
{
    close(c->fd); /* also drops it from the epoll set */
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c);
}

/* Appends <len> bytes to the output of <c>; the caller checked the room. */
static void bu_conn_put(struct bu_conn *c, const char *data, size_t len)
{
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

/* Ends the connection after an error response <msg>. */
static void bu_conn_fail(struct bu_conn *c, const char *msg, size_t len)
{
    bu_conn_put(c, msg, len);
    c->closing = 1;
}

/* Does the header line [<p>, <end>) named <name> (lower case, with ':')
 * start the line? */
static int bu_header_is(const char *p, const char *end, const char *name, size_t name_len)
{
    return (size_t)(end - p) > name_len && strncasecmp(p, name, name_len) == 0;
}

/* Scans one request head [<p>, <end>) (<end> points at the final CRLFCRLF)
 * and appends its response to <c>. Sets c->body_left and c->closing.
 * Returns 0, or -1 when the request is refused (an error response is
 * queued and the connection will close). */
static int bu_request(struct bu_server *s, struct bu_conn *c, const char *p, const char *end)
{
    const char *line_end = memchr(p, '\r', (size_t)(end - p) + 1);
    const char *sp1 = memchr(p, ' ', (size_t)(line_end - p));
    const char *target, *sp2, *q, *path_end;
    const struct bu_resp *r;
    int head, json, http10, keep_alive = 0;
    size_t clen = 0;

    if (!sp1)
        goto fail_bad;
    target = sp1 + 1;
    sp2 = memchr(target, ' ', (size_t)(line_end - target));
    if (!sp2 || line_end - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
        goto fail_bad;
    head = sp1 - p == 4 && memcmp(p, "HEAD", 4) == 0;
    http10 = sp2[8] == '0';

    q = memchr(target, '?', (size_t)(sp2 - target));
    path_end = q ? q : sp2;
    json = (path_end - target >= 5 && memcmp(path_end - 5, "/json", 5) == 0) ||
           (q && memmem(q, (size_t)(sp2 - q), "json", 4));

    /* Headers: only Content-Length, Transfer-Encoding and Connection
     * matter, and only their first letters are looked at before the rest. */
    for (p = line_end + 2; p < end; p = line_end + 2) {
        line_end = memchr(p, '\r', (size_t)(end - p) + 1);
        switch (*p) {
        case 'c':
        case 'C':
            if (bu_header_is(p, line_end, "content-length:", 15)) {
                const char *v = p + 15;
                while (v < line_end && (*v == ' ' || *v == '\t'))
                    v++;
                if (v == line_end)
                    goto fail_bad;
                for (clen = 0; v < line_end && *v >= '0' && *v <= '9'; v++)
                    clen = clen * 10 + (size_t)(*v - '0');
            } else if (bu_header_is(p, line_end, "connection:", 11)) {
                const char *v = p + 11;
                size_t n = (size_t)(line_end - v);
                if (memmem(v, n, "close", 5) || memmem(v, n, "Close", 5))
                    c->closing = 1;
                else if (memmem(v, n, "eep-alive", 9))
                    keep_alive = 1;
            }
            break;
        case 't':
        case 'T':
            if (bu_header_is(p, line_end, "transfer-encoding:", 18)) {
                bu_conn_fail(c, bu_501, sizeof(bu_501) - 1);
                return -1;
            }
            break;
        default:
            break;
        }
    }
    if (http10 && !keep_alive)
        c->closing = 1;

    r = json ? &s->json : &s->hello;
    bu_conn_put(c, r->full, head ? r->head_len : r->full_len);
    c->body_left = clen;
    return 0;

fail_bad:
    bu_conn_fail(c, bu_400, sizeof(bu_400) - 1);
    return -1;
}

/* Answers every complete request buffered in <c>, as far as the output
 * buffer has room, and keeps the unparsed rest at the start of <in>. */
static void bu_conn_parse(struct bu_server *s, struct bu_conn *c)
{
    size_t pos = 0;

    while (pos < c->in_len && !c->closing) {
        const char *start = c->in + pos, *end;

        if (c->body_left) {
            size_t n = c->in_len - pos;
            if (n > c->body_left)
                n = c->body_left;
            pos += n;
            c->body_left -= n;
            continue;
        }
        if (BU_OUT_SIZE - c->out_len < s->max_resp)
            break; /* backpressure: wait until the output drains */
        end = memmem(start, c->in_len - pos, "\r\n\r\n", 4);
        if (!end) {
            if (pos == 0 && c->in_len == BU_IN_SIZE)
                bu_conn_fail(c, bu_431, sizeof(bu_431) - 1);
            break;
        }
        if (bu_request(s, c, start, end) < 0)
            break;
        pos = (size_t)(end + 4 - c->in);
    }
    if (pos == c->in_len) {
        c->in_len = 0;
    } else if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
}

/* Writes what <c> has queued, answers input that waited for room in the
 * output, and sets the epoll mask for what comes next. Returns 0, or -1 when
 * the connection was closed. */
static int bu_conn_flush(struct bu_server *s, struct bu_conn *c)
{
    unsigned want = 0;

    for (;;) {
        while (c->out_off < c->out_len) {
            ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN)
                    break;
                goto fail_close;
            }
            c->out_off += (size_t)n;
        }
        if (c->out_off < c->out_len)
            break; /* the socket is full */
        c->out_off = c->out_len = 0;
        if (c->closing)
            goto fail_close;
        if (!c->in_len)
            break;
        bu_conn_parse(s, c);
        if (!c->out_len)
            break; /* only a partial request is buffered */
    }
    /* Read only while there is room for input and for another response, so
     * that a pipelining client cannot grow our buffers (nor make us spin). */
    if (c->out_off < c->out_len)
        want |= EPOLLOUT;
    if (!c->closing && c->in_len < BU_IN_SIZE && BU_OUT_SIZE - c->out_len >= s->max_resp)
        want |= EPOLLIN;
    if (bu_conn_watch(s, c, want ? want : EPOLLIN) < 0)
        goto fail_close;
    return 0;

fail_close:
    bu_conn_close(s, c);
    return -1;
}

static void bu_conn_on_readable(struct bu_server *s, struct bu_conn *c)
{
    for (;;) {
        size_t room = BU_IN_SIZE - c->in_len;
        ssize_t n;

        if (room == 0)
            break; /* full of pipelined requests; the output must drain first */
        n = recv(c->fd, c->in + c->in_len, room, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            bu_conn_close(s, c);
            return;
        }
        if (n == 0) {
            /* Peer closed: answer what it sent, then close. */
            c->closing = 1;
            bu_conn_flush(s, c);
            return;
        }
        c->in_len += (size_t)n;
        bu_conn_parse(s, c);
        if ((size_t)n < room)
            break; /* level-triggered: no need for a read that says EAGAIN */
    }
    bu_conn_flush(s, c);
}

static void bu_accept(struct bu_server *s)
{
    for (;;) {
        int one = 1;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct epoll_event ev;
        struct bu_conn *c;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                perror("bench_upstream: accept4");
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = malloc(sizeof(*c));
        if (!c)
            goto fail_close;
        c->fd = fd;
        c->events = EPOLLIN;
        c->closing = 0;
        c->in_len = c->body_left = c->out_off = c->out_len = 0;
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            goto fail_free;
        c->prev = NULL;
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        continue;

    fail_free:
        free(c);
    fail_close:
        close(fd);
    }
}

static int bu_listen(struct bu_server *s, const struct sockaddr_in *sin, const char *port_file)
{
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    char line[32];
    int one = 1;

    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->lfd < 0)
        goto fail;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s->lfd, (const struct sockaddr *)sin, sizeof(*sin)) < 0)
        goto fail_close;
    if (listen(s->lfd, 4096) < 0)
        goto fail_close;
    if (getsockname(s->lfd, (struct sockaddr *)&bound, &len) < 0)
        goto fail_close;
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) < 0)
        goto fail_close;
    snprintf(line, sizeof(line), "%u\n", (unsigned)ntohs(bound.sin_port));
    if (port_file && bench_write_file(port_file, line) < 0) {
        fprintf(stderr, "bench_upstream: cannot write %s: %s\n", port_file, strerror(errno));
        goto fail_close_quiet;
    }
    return 0;

fail_close:
    perror("bench_upstream: listen");
fail_close_quiet:
    close(s->lfd);
    return -1;
fail:
    perror("bench_upstream: socket");
    return -1;
}

static void bu_usage(void)
{
    fprintf(stderr, "usage: bench_upstream --listen 127.0.0.1:PORT [--port-file FILE]\n");
}

int main(int argc, char **argv)
{
    static const char hello[] = "Hello, World!";
    struct bu_server s = {.epfd = -1, .lfd = -1};
    struct epoll_event events[BU_MAX_EVENTS];
    struct sigaction sa;
    struct sockaddr_in sin;
    const char *listen_arg = NULL, *port_file = NULL;
    char *json;
    size_t json_len;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen_arg = argv[++i];
        } else if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc) {
            port_file = argv[++i];
        } else {
            bu_usage();
            return 2;
        }
    }
    if (!listen_arg || bench_parse_listen(listen_arg, &sin) < 0) {
        bu_usage();
        return 2;
    }

    json = bu_json_encode(&json_len);
    if (!json)
        goto fail_oom;
    if (bu_resp_build(&s.hello, "text/plain", hello, sizeof(hello) - 1) < 0 ||
        bu_resp_build(&s.json, "application/json", json, json_len) < 0) {
        free(json);
        goto fail_resp;
    }
    free(json);
    s.max_resp = s.json.full_len > sizeof(bu_431) ? s.json.full_len : sizeof(bu_431);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = bu_on_signal; /* no SA_RESTART: epoll_wait returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    s.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s.epfd < 0) {
        perror("bench_upstream: epoll_create1");
        goto fail_resp;
    }
    if (bu_listen(&s, &sin, port_file) < 0)
        goto fail_epoll;

    while (!bu_stop) {
        int n = epoll_wait(s.epfd, events, BU_MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("bench_upstream: epoll_wait");
            goto fail_conns;
        }
        for (int i = 0; i < n; i++) {
            struct bu_conn *c = events[i].data.ptr;
            if (!c) {
                bu_accept(&s);
            } else if (events[i].events & (EPOLLERR | EPOLLHUP) && !(events[i].events & EPOLLIN)) {
                bu_conn_close(&s, c);
            } else if (events[i].events & EPOLLIN) {
                bu_conn_on_readable(&s, c);
            } else {
                bu_conn_flush(&s, c);
            }
        }
    }
    rc = 0;

fail_conns:
    while (s.conns)
        bu_conn_close(&s, s.conns);
    close(s.lfd);
fail_epoll:
    close(s.epfd);
fail_resp:
    free(s.hello.full);
    free(s.json.full);
    return rc;
fail_oom:
    fprintf(stderr, "bench_upstream: out of memory\n");
    return 1;
}
