/*
 * http.h - the admin API's HTTP/1.1 server: one request at a time per
 * connection, keep-alive and pipelining, Content-Length and chunked bodies
 * (decoded), and every answer it makes itself in the API's JSON error form
 * (400, 408, 413, 414, 417, 431, 500, 501, 503, 505), which evhttp could
 * not do: its 413 and 400 pages are HTML, with no hook in libevent 2.1.
 * Requests are parsed by admin/http1's request parser, the gateway's, with
 * the same rules (admin/http1/request.h). A request's head is shown to a
 * check before a byte of its body is read; handlers answer exactly once,
 * at once or, deferred (adm_req_defer), later from the loop. Connections, the bodies buffered at
 * once and the time a head, a body and an idle connection may take are bounded (http.c).
 */
#ifndef SY_ADMIN_HTTP_H
#define SY_ADMIN_HTTP_H

#include <stddef.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>

#include "admin/config.h"

enum adm_method {
    ADM_M_GET,
    ADM_M_HEAD,
    ADM_M_PUT,
    ADM_M_POST,
    ADM_M_DELETE,
    ADM_M_PATCH,
    ADM_M_OPTIONS,
    ADM_M_OTHER,
};

struct adm_http;
struct adm_req;

typedef void (*adm_http_cb)(struct adm_req *req, void *arg);

/* What a peer may make the server hold. */
struct adm_http_limits {
    size_t max_body;    /* one request's body; over it: 413, before it is read */
    size_t max_bodies;  /* the bodies being read and handled, all connections
                         * together (>= max_body); over it: 503 */
    unsigned max_conns; /* connections at once, lingering ones too; over it:
                         * 503, then the close */
};

/* Listens on <addr> (numeric) in <base>. <head> (NULL: none) gets every
 * request whose head is whole, before its body is read and before any 100
 * Continue: if it answers, the request goes no further, its body is never
 * read and the connection closes once the answer is out. <cb> gets every
 * whole request <head> let through. Both get <arg>. <lim> is copied. NULL
 * with <msg> filled on error. */
struct adm_http *adm_http_new(struct event_base *base, const struct adm_addr *addr,
                              adm_http_cb head, adm_http_cb cb, void *arg,
                              const struct adm_http_limits *lim, char *msg, size_t cap);
/* The same on <fd>, a socket listening on <addr> already (an upgrade's,
 * taken; -1: bind <addr>). */
struct adm_http *adm_http_new_on(struct event_base *base, const struct adm_addr *addr, int fd,
                                 adm_http_cb head, adm_http_cb cb, void *arg,
                                 const struct adm_http_limits *lim, char *msg, size_t cap);
/* Its listening socket; and whether it accepts (an upgrade's pause). */
evutil_socket_t adm_http_listen_fd(const struct adm_http *h);
void adm_http_accepting(struct adm_http *h, int on);
void adm_http_free(struct adm_http *h);

enum adm_method adm_req_method(const struct adm_req *req);
const char *adm_req_method_name(const struct adm_req *req); /* "GET", as sent */
const char *adm_req_path(const struct adm_req *req);        /* as sent, never NULL */
const char *adm_req_query(const struct adm_req *req);       /* after '?', or NULL */
const char *adm_req_peer(const struct adm_req *req);        /* "IP:PORT" of the client */
/* The host the request names (its Host, or an absolute-form target's
 * authority) in lower case, without the port, an IPv6 literal in brackets;
 * NULL when it names none (HTTP/1.0). *<port>: the port given, 0 if none. */
const char *adm_req_host(const struct adm_req *req, unsigned *port);
/* The address the client connected to, as the host of a Host field
 * ("127.0.0.1", "[::1]"; an IPv4-mapped IPv6 one as IPv4), and its port. */
const char *adm_req_local(const struct adm_req *req, unsigned *port);
/* 1 when the request has a body (chunked, or a Content-Length above 0). */
int adm_req_has_body(const struct adm_req *req);
struct evkeyvalq *adm_req_in(struct adm_req *req);  /* request fields */
struct evkeyvalq *adm_req_out(struct adm_req *req); /* answer fields to send */
struct evbuffer *adm_req_body(struct adm_req *req); /* the body, decoded */

/* Answers with <body> (its bytes are taken; NULL: none), adding
 * Content-Length, Date and Connection. To HEAD, the head only, with the
 * length a GET would have. */
void adm_req_reply(struct adm_req *req, int code, const char *reason, struct evbuffer *body);
/* Called in the handler: the answer comes later, from the loop, by
 * adm_req_reply() (which then frees <req>). The connection reads nothing
 * more meanwhile. If it ends first, <gone>(<arg>) is called (NULL: not)
 * and <req> is freed: it must not be answered then. */
void adm_req_defer(struct adm_req *req, void (*gone)(void *arg), void *arg);

#endif
