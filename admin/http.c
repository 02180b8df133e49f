/*
 * http.c - the admin API's HTTP/1.1 server (see http.h).
 *
 * Per connection: a bufferevent, an llhttp request parser fed straight from
 * the input buffer, and at most one request being read. When a request is
 * whole, the parser pauses, the handler answers it, and parsing goes on
 * with what the client pipelined behind it. A connection that ends (the
 * client asked, HTTP/1.0 without keep-alive, or an error we answered) is
 * closed gracefully: the answer is flushed, the sending side shut, and what
 * the client still sends is read away for a short while, so that it reads
 * our answer instead of a reset.
 */
#include "admin/http.h"
#include "admin/http1/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <llhttp.h>

#define HEAD_MAX (64 * 1024) /* request line and fields (431 beyond) */
#define IDLE_S 60            /* a request's wait, and a keep-alive connection's */
#define LINGER_S 2           /* reading away after our last answer */

struct adm_conn;

struct adm_req {
    struct adm_conn *c;
    enum adm_method method;
    const char *method_name; /* llhttp's static name of the method */
    char *url;               /* as sent; split into path and query at dispatch */
    const char *path, *query;
    struct evkeyvalq in, out;
    struct evbuffer *body;
    int http10, keep, replied;
};

struct adm_http {
    struct event_base *base;
    struct evconnlistener *lev;
    adm_http_cb cb;
    void *arg;
    size_t max_body;
    struct adm_conn *conns;
};

struct adm_conn {
    struct adm_http *h;
    struct bufferevent *bev;
    llhttp_t p;
    struct adm_req *req; /* being read */
    char *url, *field, *value;
    size_t url_len, field_len, value_len, head_bytes;
    int in_value;
    int err; /* status of a refusal found in a callback */
    char errmsg[160];
    int closing; /* no more requests: flush, then linger */
    int shut;    /* our side is shut: reading away */
    struct adm_conn *prev, *next;
};

/* ---- small growable strings ---- */

static int append(char **s, size_t *n, const char *at, size_t len)
{
    char *p = realloc(*s, *n + len + 1);

    if (!p)
        return -1;
    memcpy(p + *n, at, len);
    *n += len;
    p[*n] = '\0';
    *s = p;
    return 0;
}

static void reset_str(char **s, size_t *n)
{
    free(*s);
    *s = NULL;
    *n = 0;
}

/* ---- requests ---- */

static void req_free(struct adm_req *r)
{
    if (!r)
        return;
    evhttp_clear_headers(&r->in);
    evhttp_clear_headers(&r->out);
    if (r->body)
        evbuffer_free(r->body);
    free(r->url);
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
    if (conn && strcasecmp(conn, "close") == 0)
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
    case 417:
        return "expectation not supported";
    case 431:
        return "request head too large";
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

    /* the messages are ours or llhttp's: no quote or backslash to escape */
    n = snprintf(body, sizeof(body),
                 "{\"error\":\"%s\",\"errors\":[{\"path\":\"\",\"message\":\"%s\"}]}\n", error,
                 msg);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", error);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n", code,
                        h1_status_reason(code));
    add_date(out);
    evbuffer_add_printf(out, "Connection: close\r\nContent-Length: %d\r\n\r\n%s", n, body);
    conn_end(c);
}

/* ---- the parser's callbacks ---- */

static int refuse(struct adm_conn *c, int code, const char *msg)
{
    c->err = code;
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", msg);
    return -1;
}

static int head_bytes(struct adm_conn *c, size_t len)
{
    c->head_bytes += len;
    return c->head_bytes > HEAD_MAX ? refuse(c, 431, "the request head is over 65536 bytes") : 0;
}

static int commit_field(struct adm_conn *c)
{
    int rc = 0;

    if (c->field && evhttp_add_header(&c->req->in, c->field, c->value ? c->value : "") < 0)
        rc = refuse(c, 400, "invalid header field");
    reset_str(&c->field, &c->field_len);
    reset_str(&c->value, &c->value_len);
    c->in_value = 0;
    return rc;
}

static int on_message_begin(llhttp_t *p)
{
    struct adm_conn *c = p->data;

    req_free(c->req);
    c->req = calloc(1, sizeof(*c->req));
    if (!c->req || !(c->req->body = evbuffer_new()))
        return refuse(c, 500, "out of memory");
    c->req->c = c;
    TAILQ_INIT(&c->req->in);
    TAILQ_INIT(&c->req->out);
    c->head_bytes = 0;
    reset_str(&c->url, &c->url_len);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    struct adm_conn *c = p->data;

    if (head_bytes(c, len) < 0)
        return -1;
    return append(&c->url, &c->url_len, at, len) < 0 ? refuse(c, 500, "out of memory") : 0;
}

static int on_field(llhttp_t *p, const char *at, size_t len)
{
    struct adm_conn *c = p->data;

    if (head_bytes(c, len) < 0 || (c->in_value && commit_field(c) < 0))
        return -1;
    return append(&c->field, &c->field_len, at, len) < 0 ? refuse(c, 500, "out of memory") : 0;
}

static int on_value(llhttp_t *p, const char *at, size_t len)
{
    struct adm_conn *c = p->data;

    if (head_bytes(c, len) < 0)
        return -1;
    c->in_value = 1;
    return append(&c->value, &c->value_len, at, len) < 0 ? refuse(c, 500, "out of memory") : 0;
}

static enum adm_method method_of(uint8_t m)
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

static int on_headers_complete(llhttp_t *p)
{
    struct adm_conn *c = p->data;
    struct adm_req *r = c->req;
    const char *expect;

    if (c->in_value && commit_field(c) < 0)
        return -1;
    r->method = method_of(llhttp_get_method(p));
    r->method_name = llhttp_method_name((llhttp_method_t)llhttp_get_method(p));
    r->http10 = llhttp_get_http_major(p) == 1 && llhttp_get_http_minor(p) == 0;
    r->keep = llhttp_should_keep_alive(p);
    r->url = c->url;
    c->url = NULL;
    c->url_len = 0;
    if (!r->url)
        return refuse(c, 400, "no request target");
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->h->max_body) {
        char m[sizeof(c->errmsg)];
        snprintf(m, sizeof(m), "Content-Length %llu is over the limit of %zu bytes",
                 (unsigned long long)p->content_length, c->h->max_body);
        return refuse(c, 413, m);
    }
    expect = evhttp_find_header(&r->in, "Expect");
    if (expect && !r->http10) {
        if (strcasecmp(expect, "100-continue") != 0)
            return refuse(c, 417, "only 100-continue is expected here");
        if ((p->flags & (F_CONTENT_LENGTH | F_CHUNKED)) &&
            !((p->flags & F_CONTENT_LENGTH) && p->content_length == 0))
            evbuffer_add(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct adm_conn *c = p->data;

    if (evbuffer_get_length(c->req->body) + len > c->h->max_body) {
        char m[sizeof(c->errmsg)];
        snprintf(m, sizeof(m), "the body is over the limit of %zu bytes", c->h->max_body);
        return refuse(c, 413, m);
    }
    return evbuffer_add(c->req->body, at, len) < 0 ? refuse(c, 500, "out of memory") : 0;
}

/* A chunk's size is known before its bytes: refuse it then. */
static int on_chunk_header(llhttp_t *p)
{
    struct adm_conn *c = p->data;

    if (p->content_length > c->h->max_body - evbuffer_get_length(c->req->body)) {
        char m[sizeof(c->errmsg)];
        snprintf(m, sizeof(m), "the body is over the limit of %zu bytes", c->h->max_body);
        return refuse(c, 413, m);
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    (void)p;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

/* ---- connections ---- */

static void conn_free(struct adm_conn *c)
{
    struct adm_http *h = c->h;

    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    bufferevent_free(c->bev);
    req_free(c->req);
    free(c->url);
    free(c->field);
    free(c->value);
    free(c);
}

static void dispatch(struct adm_conn *c)
{
    struct adm_req *r = c->req;
    char *q;

    c->req = NULL;
    q = strchr(r->url, '?');
    if (q) {
        *q = '\0';
        r->query = q + 1;
    }
    r->path = r->url;
    c->h->cb(r, c->h->arg);
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
}

static void conn_read(struct bufferevent *bev, void *arg)
{
    struct adm_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    while (evbuffer_get_length(in)) {
        struct evbuffer_iovec v;
        llhttp_errno_t e;
        size_t used;

        if (c->closing) { /* no more requests: read away */
            evbuffer_drain(in, evbuffer_get_length(in));
            return;
        }
        evbuffer_peek(in, -1, NULL, &v, 1);
        e = llhttp_execute(&c->p, v.iov_base, v.iov_len);
        if (e == HPE_OK) {
            used = v.iov_len;
        } else if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
            /* a whole request (an Upgrade one is answered, then closed) */
            used = (size_t)(llhttp_get_error_pos(&c->p) - (const char *)v.iov_base);
            if (e == HPE_PAUSED_UPGRADE)
                c->req->keep = 0;
        } else {
            int code = c->err ? c->err : 400;
            const char *why = c->err ? c->errmsg : llhttp_get_error_reason(&c->p);
            evbuffer_drain(in, evbuffer_get_length(in));
            conn_error(c, code, why ? why : "malformed request");
            return;
        }
        evbuffer_drain(in, used);
        if (e != HPE_OK) {
            int keep = c->req->keep;
            dispatch(c);
            if (!keep || c->closing) {
                if (!c->closing)
                    conn_end(c);
                continue; /* reads away the rest */
            }
            llhttp_resume(&c->p);
        }
    }
}

static void conn_write(struct bufferevent *bev, void *arg)
{
    struct adm_conn *c = arg;
    struct timeval tv = {LINGER_S, 0};

    if (!c->closing || evbuffer_get_length(bufferevent_get_output(bev)))
        return;
    if (!c->shut) {
        /* all sent: shut our side, read away what still comes */
        c->shut = 1;
        shutdown(bufferevent_getfd(bev), SHUT_WR);
        bufferevent_set_timeouts(bev, &tv, NULL);
        bufferevent_enable(bev, EV_READ);
    }
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct adm_conn *c = arg;

    (void)bev;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && !c->closing && c->req &&
        c->head_bytes) {
        /* a request begun and not finished in time */
        conn_error(c, 408, "the request did not arrive in time");
        return;
    }
    conn_free(c);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct adm_http *h = arg;
    struct adm_conn *c = calloc(1, sizeof(*c));
    struct timeval tv = {IDLE_S, 0};

    (void)lev;
    (void)sa;
    (void)salen;
    if (!c || !(c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
        free(c);
        evutil_closesocket(fd);
        return;
    }
    c->h = h;
    llhttp_init(&c->p, HTTP_REQUEST, &settings);
    c->p.data = c;
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
    bufferevent_set_timeouts(c->bev, &tv, &tv);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

struct adm_http *adm_http_new(struct event_base *base, const struct adm_addr *addr, adm_http_cb cb,
                              void *arg, size_t max_body, char *msg, size_t cap)
{
    struct adm_http *h = calloc(1, sizeof(*h));

    if (!h) {
        snprintf(msg, cap, "admin API: out of memory");
        return NULL;
    }
    h->base = base;
    h->cb = cb;
    h->arg = arg;
    h->max_body = max_body;
    if (!addr->numeric) {
        snprintf(msg, cap, "admin API: %s is not a numeric address", addr->text);
        free(h);
        return NULL;
    }
    h->lev = evconnlistener_new_bind(base, on_accept, h, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                     128, (const struct sockaddr *)&addr->ss, (int)addr->sslen);
    if (!h->lev) {
        snprintf(msg, cap, "admin API: cannot listen on %s: %s", addr->text, strerror(errno));
        free(h);
        return NULL;
    }
    return h;
}

void adm_http_free(struct adm_http *h)
{
    if (!h)
        return;
    while (h->conns)
        conn_free(h->conns);
    evconnlistener_free(h->lev);
    free(h);
}
