/*
 * http.c - the admin API's HTTP/1.1 server (see http.h).
 *
 * Per connection: a bufferevent, the request parser of admin/http1/ (the
 * gateway's, as strict) fed straight from the input buffer, and at most one
 * request being read. When a request's head is whole, the head check sees
 * it (the API's token, Host, Origin and Content-Type checks): a request it
 * refuses is answered and its connection ends, the body never read. When a
 * request is whole, the handler answers it, and parsing goes on with what
 * the client pipelined behind it. A connection that ends (the client asked,
 * HTTP/1.0 without keep-alive, a refusal, or an error we answered) is closed
 * gracefully: the answer is flushed, the sending side shut, and what the
 * client still sends is read away and dropped, LINGER_MS after its last
 * byte and LINGER_MAX_MS in all at most, so that it reads our answer
 * instead of a reset.
 *
 * What a peer can make us hold is bounded: max_conns connections (one over
 * it gets a 503 and the close; REFUSING_MAX of those at once, then a plain
 * close), max_bodies bytes of bodies over all connections (a Content-Length
 * is counted whole before its first byte is read, a chunked body as it
 * comes; over it: 503), and time: a head must be whole HEAD_MS after its
 * first byte (a new connection's first head: after the accept), a body
 * must not pause for BODY_MS, a kept-alive connection may wait IDLE_MS for
 * its next request, and an answer must make progress every IDLE_MS.
 */
#define _POSIX_C_SOURCE 200809L /* strndup, gmtime_r, getnameinfo */
#include "admin/http.h"
#include "admin/clock.h"
#include "admin/http1/request.h"
#include "admin/http1/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/listener.h>

#define HEAD_MAX (64 * 1024) /* request line (414 beyond), and fields (431 beyond) */
#define HEAD_MS 10000        /* a whole head, from its first byte or the accept (then 408) */
#define BODY_MS 30000        /* between two reads of a body (then 408) */
#define IDLE_MS 60000        /* between requests; an answer without progress */
#define LINGER_MS 2000       /* reading away after our last answer: quiet for this long */
#define LINGER_MAX_MS 10000  /* reading away: at most this long in all */
#define REFUSING_MAX 16      /* connections over max_conns being answered 503 at once */

struct adm_conn;

struct adm_req {
    struct adm_conn *c;
    enum adm_method method;
    char *method_name; /* the token as sent */
    char *url;         /* as sent; split into path and query with the head */
    const char *path, *query;
    char *host;    /* adm_req_host(), NULL: none */
    unsigned port; /* its port, 0: none */
    struct evkeyvalq in, out;
    struct evbuffer *body;
    size_t held; /* body bytes counted in adm_http.bodies */
    int http10, keep, replied;
    int has_body;
    int at_head; /* the head check runs: an answer ends the connection */
    /* adm_req_defer(): answered later; <gone> is told if the connection
     * ends first */
    int deferred;
    void (*gone)(void *arg);
    void *gone_arg;
};

struct adm_http {
    struct event_base *base;
    struct evconnlistener *lev;
    adm_http_cb head, cb;
    void *arg;
    struct adm_http_limits lim;
    unsigned nconns;             /* connections served (lingering ones too) */
    unsigned nrefusing;          /* connections over lim.max_conns, answered 503 */
    size_t bodies;               /* body bytes held by requests, all connections */
    LIST_HEAD(, adm_conn) conns; /* every open connection */
};

struct adm_conn {
    struct adm_http *h;
    struct bufferevent *bev;
    struct h1_req_parser p;
    struct adm_req *req;     /* its head read, its body being read */
    int head_started;        /* some bytes of the next head arrived */
    int closing;             /* no more requests: flush, then linger */
    int shut;                /* our side is shut: reading away */
    int refusing;            /* over lim.max_conns: a 503, nothing read */
    int over;                /* a chunked body went over lim.max_bodies */
    struct adm_req *waiting; /* a deferred request: nothing more is read until it is answered */
    uint64_t deadline;       /* adm_clock_ms(): the head whole, or the linger over; 0: none */
    char peer[64];           /* the client's "IP:PORT" ("[v6]:PORT"), for the audit log */
    char local[48];          /* the address it reached, as a Host names it */
    unsigned local_port;
    LIST_ENTRY(adm_conn) link; /* in adm_http.conns */
};

/* ---- requests ---- */

static void req_free(struct adm_req *r)
{
    if (!r)
        return;
    r->c->h->bodies -= r->held;
    evhttp_clear_headers(&r->in);
    evhttp_clear_headers(&r->out);
    if (r->body)
        evbuffer_free(r->body);
    free(r->method_name);
    free(r->url);
    free(r->host);
    free(r);
}

enum adm_method adm_req_method(const struct adm_req *r)
{
    return r->method;
}

const char *adm_req_method_name(const struct adm_req *r)
{
    return r->method_name;
}

const char *adm_req_path(const struct adm_req *r)
{
    return r->path;
}

const char *adm_req_query(const struct adm_req *r)
{
    return r->query;
}

const char *adm_req_peer(const struct adm_req *r)
{
    return r->c->peer;
}

const char *adm_req_host(const struct adm_req *r, unsigned *port)
{
    *port = r->port;
    return r->host;
}

const char *adm_req_local(const struct adm_req *r, unsigned *port)
{
    *port = r->c->local_port;
    return r->c->local;
}

int adm_req_has_body(const struct adm_req *r)
{
    return r->has_body;
}

struct evkeyvalq *adm_req_in(struct adm_req *r)
{
    return &r->in;
}

struct evkeyvalq *adm_req_out(struct adm_req *r)
{
    return &r->out;
}

struct evbuffer *adm_req_body(struct adm_req *r)
{
    return r->body;
}

/* ---- answers ---- */

static void add_date(struct evbuffer *out)
{
    char d[64];
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(d, sizeof(d), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    evbuffer_add_printf(out, "Date: %s\r\n", d);
}

static void request_done(struct adm_conn *c, int keep);
static void conn_timeout(struct adm_conn *c, uint64_t ms);
static void conn_read(struct bufferevent *bev, void *arg);

/* No more requests on <c>: what is queued goes out, then the close. */
static void conn_end(struct adm_conn *c)
{
    c->closing = 1;
    bufferevent_enable(c->bev, EV_WRITE);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS);
}

void adm_req_reply(struct adm_req *r, int code, const char *reason, struct evbuffer *body)
{
    struct adm_conn *c = r->c;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    const char *conn = evhttp_find_header(&r->out, "Connection");
    struct evkeyval *kv;

    if (r->replied)
        return;
    r->replied = 1;
    if ((conn && strcasecmp(conn, "close") == 0) || r->at_head)
        r->keep = 0;
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", code, reason ? reason : "");
    TAILQ_FOREACH(kv, &r->out, next)
    {
        if (strcasecmp(kv->key, "Content-Length") != 0 && strcasecmp(kv->key, "Connection") != 0)
            evbuffer_add_printf(out, "%s: %s\r\n", kv->key, kv->value);
    }
    add_date(out);
    if (!r->keep)
        evbuffer_add(out, "Connection: close\r\n", 19);
    else if (r->http10)
        evbuffer_add(out, "Connection: keep-alive\r\n", 24);
    evbuffer_add_printf(out, "Content-Length: %zu\r\n\r\n", body ? evbuffer_get_length(body) : 0);
    if (body) {
        if (r->method == ADM_M_HEAD)
            evbuffer_drain(body, evbuffer_get_length(body));
        else
            evbuffer_add_buffer(out, body);
    }
    if (!r->keep)
        conn_end(c);
    if (c->waiting == r) { /* a deferred answer: the connection goes on */
        int keep = r->keep;
        c->waiting = NULL;
        req_free(r);
        conn_timeout(c, IDLE_MS); /* its answer's write has its time, closing or not */
        request_done(c, keep);
        if (!c->closing) {
            bufferevent_enable(c->bev, EV_READ);
            conn_read(c->bev, c); /* a request pipelined behind it */
        }
    }
}

/* The API's words for an error this layer answers itself. */
static const char *error_words(int code)
{
    switch (code) {
    case 400:
        return "malformed request";
    case 408:
        return "request timeout";
    case 413:
        return "request body too large";
    case 414:
        return "request line too long";
    case 417:
        return "expectation not supported";
    case 431:
        return "request head too large";
    case 503:
        return "admin API busy";
    case 501:
        return "not implemented";
    case 505:
        return "HTTP version not supported";
    default:
        return "internal error";
    }
}

/* An answer of our own, then the close: {"error": ..., "errors": [...]}. */
static void conn_error(struct adm_conn *c, int code, const char *msg)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    const char *error = error_words(code);
    char body[400];
    int n;

    /* the messages are the parser's or llhttp's: no quote or backslash to escape */
    n = snprintf(body, sizeof(body),
                 "{\"error\":\"%s\",\"errors\":[{\"path\":\"\",\"message\":\"%s\"}]}\n", error,
                 msg);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", error);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n", code,
                        h1_status_reason(code));
    if (code == 503)
        evbuffer_add_printf(out, "Retry-After: 1\r\n");
    add_date(out);
    evbuffer_add_printf(out, "Connection: close\r\nContent-Length: %d\r\n\r\n%s", n, body);
    conn_end(c);
}

/* ---- reading a request ---- */

static enum adm_method method_of(llhttp_method_t m)
{
    switch (m) {
    case HTTP_GET:
        return ADM_M_GET;
    case HTTP_HEAD:
        return ADM_M_HEAD;
    case HTTP_PUT:
        return ADM_M_PUT;
    case HTTP_POST:
        return ADM_M_POST;
    case HTTP_DELETE:
        return ADM_M_DELETE;
    case HTTP_PATCH:
        return ADM_M_PATCH;
    case HTTP_OPTIONS:
        return ADM_M_OPTIONS;
    default:
        return ADM_M_OTHER;
    }
}

/* The words of a refusal the parser made: its own, but with the limit
 * named for a body too large. <m> has <cap> bytes. */
static const char *refusal(const struct adm_conn *c, char *m, size_t cap)
{
    const struct h1_req_parser *p = &c->p;
    const struct h1_header *cl;

    if (p->status != 413)
        return p->reason;
    cl = h1_request_header(&p->req, "content-length");
    if (cl && c->req == NULL)
        snprintf(m, cap, "Content-Length %.*s is over the limit of %zu bytes",
                 (int)(cl->value.len > 20 ? 20 : cl->value.len), cl->value.ptr, c->h->lim.max_body);
    else
        snprintf(m, cap, "the body is over the limit of %zu bytes", c->h->lim.max_body);
    return m;
}

/* The head is parsed: the request the handler will see, without its body.
 * 0, or -1 out of memory. */
static int start_request(struct adm_conn *c)
{
    const struct h1_request *rq = &c->p.req;
    struct adm_req *r = calloc(1, sizeof(*r));
    char *q;

    if (!r)
        return -1;
    r->c = c;
    TAILQ_INIT(&r->in);
    TAILQ_INIT(&r->out);
    c->req = r;
    r->method = method_of(rq->method_id);
    r->http10 = rq->version_minor == 0;
    /* an Upgrade (or CONNECT) is answered, then the connection closed */
    r->keep = rq->keep_alive && !rq->upgrade;
    r->has_body = rq->body_kind == H1_BODY_CHUNKED ||
                  (rq->body_kind == H1_BODY_LENGTH && rq->content_length > 0);
    if (!(r->body = evbuffer_new()) ||
        !(r->method_name = strndup(rq->method.ptr, rq->method.len)) ||
        !(r->url = strndup(rq->target.ptr, rq->target.len)))
        return -1;
    if ((q = strchr(r->url, '?'))) {
        *q = '\0';
        r->query = q + 1;
    }
    r->path = r->url;
    if (rq->host_name.ptr) {
        if (!(r->host = strndup(rq->host_name.ptr, rq->host_name.len)))
            return -1;
        for (char *p = r->host; *p; p++)
            *p = (char)h1_lower((unsigned char)*p);
        r->port = rq->port;
    }
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        char *name = strndup(h->name.ptr, h->name.len),
             *value = strndup(h->value.ptr, h->value.len);
        int rc = name && value ? evhttp_add_header(&r->in, name, value) : -1;

        free(name);
        free(value);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Body bytes <r> is to hold, up to <total>, counted against max_bodies.
 * 0, or -1 when they would go over it. */
static int hold(struct adm_req *r, size_t total)
{
    struct adm_http *h = r->c->h;

    if (total <= r->held)
        return 0;
    if (total - r->held > h->lim.max_bodies - h->bodies)
        return -1;
    h->bodies += total - r->held;
    r->held = total;
    return 0;
}

static int body_cb(void *ctx, const char *data, size_t len)
{
    struct adm_conn *c = ctx;
    struct adm_req *r = c->req;

    /* a chunked body is counted as it comes */
    if (hold(r, evbuffer_get_length(r->body) + len) < 0) {
        c->over = 1;
        return -1;
    }
    return evbuffer_add(r->body, data, len);
}

/* ---- connections ---- */

static void conn_free(struct adm_conn *c)
{
    if (c->waiting) { /* the handler must not answer it any more */
        struct adm_req *r = c->waiting;
        c->waiting = NULL;
        if (r->gone)
            r->gone(r->gone_arg);
        req_free(r);
    }
    LIST_REMOVE(c, link);
    if (c->refusing)
        c->h->nrefusing--;
    else
        c->h->nconns--;
    bufferevent_free(c->bev);
    req_free(c->req);
    h1_req_parser_free(&c->p);
    free(c);
}

/* The read timeout of <c> from now: <ms>; writes get IDLE_MS each. */
static void conn_timeout(struct adm_conn *c, uint64_t ms)
{
    struct timeval rd = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    struct timeval wr = {IDLE_MS / 1000, 0};

    bufferevent_set_timeouts(c->bev, &rd, &wr);
}

/* 1 when the handler deferred its answer: the connection then waits. */
static int dispatch(struct adm_conn *c)
{
    struct adm_req *r = c->req;

    c->req = NULL;
    c->h->cb(r, c->h->arg);
    if (r->deferred && !r->replied) {
        struct timeval wr = {IDLE_MS / 1000, 0};
        c->waiting = r;
        bufferevent_disable(c->bev, EV_READ);
        /* nothing read meanwhile; what is already being sent still has
         * its time */
        bufferevent_set_timeouts(c->bev, NULL, &wr);
        return 1;
    }
    if (!r->replied) {
        struct evbuffer *b = evbuffer_new();
        if (b)
            evbuffer_add_printf(b, "{\"error\":\"no answer\"}\n");
        evhttp_add_header(&r->out, "Content-Type", "application/json");
        adm_req_reply(r, 500, "Internal Server Error", b);
        if (b)
            evbuffer_free(b);
    }
    req_free(r);
    return 0;
}

/* A request is whole and answered: the connection goes on to the next. */
static void request_done(struct adm_conn *c, int keep)
{
    h1_req_reset(&c->p);
    c->head_started = 0;
    if (!keep && !c->closing)
        conn_end(c); /* then reads away the rest */
    if (!c->closing)
        conn_timeout(c, IDLE_MS);
}

static void conn_read(struct bufferevent *bev, void *arg);

void adm_req_defer(struct adm_req *r, void (*gone)(void *arg), void *arg)
{
    r->deferred = 1;
    r->gone = gone;
    r->gone_arg = arg;
}

/* What the handler is not to see: the error answered, the connection
 * ended, the request begun (if any) dropped. */
static void conn_refuse(struct adm_conn *c, int status, const char *why)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    evbuffer_drain(in, evbuffer_get_length(in));
    req_free(c->req);
    c->req = NULL;
    conn_error(c, status, why);
}

/* The 503 of a body that max_bodies has no room for. */
static void refuse_body(struct adm_conn *c)
{
    char m[160];

    snprintf(m, sizeof(m), "request bodies over %zu bytes in all are being read: try again",
             c->h->lim.max_bodies);
    conn_refuse(c, 503, m);
}

/* The head of c->req is whole: the head check, the body counted, the 100
 * Continue, the body's timeout. A request refused is answered, dropped,
 * and its connection ends (c->closing). */
static void admit(struct adm_conn *c)
{
    struct adm_req *r = c->req;
    const struct h1_request *rq = &c->p.req;

    if (c->h->head) {
        r->at_head = 1;
        c->h->head(r, c->h->arg);
        r->at_head = 0;
        if (r->replied) {
            c->req = NULL;
            req_free(r);
            return;
        }
    }
    /* a Content-Length is counted whole before its first byte is read */
    if (rq->body_kind == H1_BODY_LENGTH && hold(r, (size_t)rq->content_length) < 0) {
        refuse_body(c);
        return;
    }
    if (rq->expect_continue && r->has_body)
        evbuffer_add(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n", 25);
    conn_timeout(c, BODY_MS);
}

static void conn_read(struct bufferevent *bev, void *arg)
{
    struct adm_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    uint64_t now;
    char m[160];

    for (;;) {
        struct evbuffer_iovec v = {NULL, 0};
        size_t used = 0;
        int rc;

        if (c->closing) { /* no more requests: read away */
            evbuffer_drain(in, evbuffer_get_length(in));
            if (c->shut && adm_clock_ms() >= c->deadline)
                conn_free(c); /* a client that never stops sending */
            return;
        }
        if (evbuffer_get_length(in) > 0)
            evbuffer_peek(in, -1, NULL, &v, 1);
        if (!c->req) {
            if (v.iov_len == 0)
                break;
            if (!c->deadline) /* the first byte of a kept-alive connection's next head */
                c->deadline = adm_clock_ms() + HEAD_MS;
            rc = h1_req_feed_head(&c->p, v.iov_base, v.iov_len, &used);
            evbuffer_drain(in, used);
            c->head_started |= used > 0;
            if (rc == H1_REQ_AGAIN)
                continue;
            /* the handler acts on what it reads: llhttp checks every head */
            if (rc == H1_REQ_ERROR || h1_req_confirm(&c->p) == H1_REQ_ERROR) {
                conn_refuse(c, c->p.status, refusal(c, m, sizeof(m)));
                return;
            }
            if (start_request(c) < 0) {
                conn_refuse(c, 500, "out of memory");
                return;
            }
            c->deadline = 0;
            admit(c);
            continue; /* the body, if any, even with no byte buffered; or read away */
        }
        rc = h1_req_feed_body(&c->p, v.iov_base, v.iov_len, &used, body_cb, c);
        evbuffer_drain(in, used);
        if (rc == H1_REQ_AGAIN) {
            if (evbuffer_get_length(in) == 0)
                return;
            continue;
        }
        if (rc == H1_REQ_ERROR) {
            if (c->over)
                refuse_body(c);
            else
                conn_refuse(c, c->p.status,
                            c->p.status == 500 ? "out of memory" : refusal(c, m, sizeof(m)));
            return;
        }
        /* the request is whole */
        {
            int keep = c->req->keep;

            if (dispatch(c))
                return; /* answered later: adm_req_reply() goes on from there */
            request_done(c, keep);
        }
    }
    /* waiting for more of a head: what is left of its time */
    if (c->deadline) {
        now = adm_clock_ms();
        conn_timeout(c, c->deadline > now ? c->deadline - now : 1);
    }
}

static void conn_write(struct bufferevent *bev, void *arg)
{
    struct adm_conn *c = arg;
    struct timeval tv = {LINGER_MS / 1000, (LINGER_MS % 1000) * 1000};

    if (!c->closing || evbuffer_get_length(bufferevent_get_output(bev)))
        return;
    if (!c->shut) {
        /* all sent: shut our side, read away what still comes */
        c->shut = 1;
        c->deadline = adm_clock_ms() + LINGER_MAX_MS;
        shutdown(bufferevent_getfd(bev), SHUT_WR);
        bufferevent_set_timeouts(bev, &tv, NULL);
        bufferevent_enable(bev, EV_READ);
    }
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct adm_conn *c = arg;

    (void)bev;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && !c->closing &&
        (c->req || c->head_started)) {
        /* a request begun and not finished in time */
        conn_error(c, 408, "the request did not arrive in time");
        return;
    }
    conn_free(c);
}

/* "IP:PORT", or "[v6]:PORT", of <sa> into <buf>; "-" when unknown. */
static void peer_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN], port[8];

    if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(buf, cap, "-");
    else if (sa->sa_family == AF_INET6)
        snprintf(buf, cap, "[%s]:%s", host, port);
    else
        snprintf(buf, cap, "%s:%s", host, port);
}

/* The address <fd> was reached at into <c>, as a Host field writes it. */
static void local_format(struct adm_conn *c, evutil_socket_t fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
    char ip[INET6_ADDRSTRLEN];

    snprintf(c->local, sizeof(c->local), "-");
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, c->local, sizeof(c->local));
        c->local_port = ntohs(s4->sin_port);
    } else if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
        inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], c->local, sizeof(c->local));
        c->local_port = ntohs(s6->sin6_port);
    } else if (ss.ss_family == AF_INET6 && inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip))) {
        snprintf(c->local, sizeof(c->local), "[%s]", ip);
        c->local_port = ntohs(s6->sin6_port);
    }
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct adm_http *h = arg;
    int refusing = h->nconns >= h->lim.max_conns;
    struct adm_conn *c;
    struct h1_req_limits lim;
    char m[80];

    (void)lev;
    if (refusing && h->nrefusing >= REFUSING_MAX) {
        evutil_closesocket(fd); /* not even a 503 for this one */
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c || !(c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
        free(c);
        evutil_closesocket(fd);
        return;
    }
    c->h = h;
    peer_format(sa, (socklen_t)salen, c->peer, sizeof(c->peer));
    local_format(c, fd);
    lim.max_request_line = HEAD_MAX;
    lim.max_header_bytes = HEAD_MAX;
    lim.max_headers = 0; /* the default, 100 */
    lim.max_body_bytes = h->lim.max_body;
    lim.merge_slashes = false; /* the path is the API's, as sent */
    /* a refused connection never parses: it keeps no parser's memory */
    if (!refusing && h1_req_parser_init(&c->p, &lim) < 0) {
        h1_req_parser_free(&c->p);
        bufferevent_free(c->bev);
        free(c);
        return;
    }
    c->refusing = refusing;
    if (refusing)
        h->nrefusing++;
    else
        h->nconns++;
    LIST_INSERT_HEAD(&h->conns, c, link);
    bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
    c->deadline = adm_clock_ms() + HEAD_MS;
    conn_timeout(c, HEAD_MS);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (refusing) {
        snprintf(m, sizeof(m), "too many admin connections (at most %u)", h->lim.max_conns);
        conn_error(c, 503, m);
    }
}

struct adm_http *adm_http_new_on(struct event_base *base, const struct adm_addr *addr, int fd,
                                 adm_http_cb head, adm_http_cb cb, void *arg,
                                 const struct adm_http_limits *lim, char *msg, size_t cap)
{
    struct adm_http *h = calloc(1, sizeof(*h));

    if (!h) {
        snprintf(msg, cap, "admin API: out of memory");
        return NULL;
    }
    h->base = base;
    h->head = head;
    h->cb = cb;
    h->arg = arg;
    h->lim = *lim;
    LIST_INIT(&h->conns);
    if (!addr->numeric) {
        snprintf(msg, cap, "admin API: %s is not a numeric address", addr->text);
        free(h);
        return NULL;
    }
    if (fd >= 0)
        h->lev = evconnlistener_new(base, on_accept, h, LEV_OPT_CLOSE_ON_FREE, -1, fd);
    else
        h->lev =
            evconnlistener_new_bind(base, on_accept, h, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                    128, (const struct sockaddr *)&addr->ss, (int)addr->sslen);
    if (!h->lev) {
        snprintf(msg, cap, "admin API: cannot listen on %s: %s", addr->text, strerror(errno));
        free(h);
        return NULL;
    }
    return h;
}

struct adm_http *adm_http_new(struct event_base *base, const struct adm_addr *addr,
                              adm_http_cb head, adm_http_cb cb, void *arg,
                              const struct adm_http_limits *lim, char *msg, size_t cap)
{
    return adm_http_new_on(base, addr, -1, head, cb, arg, lim, msg, cap);
}

evutil_socket_t adm_http_listen_fd(const struct adm_http *h)
{
    return evconnlistener_get_fd(h->lev);
}

void adm_http_accepting(struct adm_http *h, int on)
{
    if (on)
        evconnlistener_enable(h->lev);
    else
        evconnlistener_disable(h->lev);
}

void adm_http_free(struct adm_http *h)
{
    if (!h)
        return;
    while (!LIST_EMPTY(&h->conns))
        conn_free(LIST_FIRST(&h->conns));
    evconnlistener_free(h->lev);
    free(h);
}
