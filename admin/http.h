/*
 * http.h - the admin API's HTTP/1.1 server: one request at a time per
 * connection, keep-alive and pipelining, Content-Length and chunked bodies
 * (decoded), and every answer it makes itself in the API's JSON error form
 * (400, 408, 413, 414, 417, 431, 500, 501, 505), which evhttp could not
 * do: its 413 and 400 pages are HTML, with no hook in libevent 2.1.
 * Requests are parsed by admin/http1's request parser, the gateway's, with
 * the same rules (admin/http1/request.h). Handlers answer synchronously,
 * exactly once.
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

/* Listens on <addr> (numeric) in <base>; <cb> gets every whole request.
 * Bodies over <max_body> bytes get a 413 before they are read. NULL with
 * <msg> filled on error. */
struct adm_http *adm_http_new(struct event_base *base, const struct adm_addr *addr, adm_http_cb cb,
                              void *arg, size_t max_body, char *msg, size_t cap);
void adm_http_free(struct adm_http *h);

enum adm_method adm_req_method(const struct adm_req *req);
const char *adm_req_method_name(const struct adm_req *req); /* "GET", as sent */
const char *adm_req_path(const struct adm_req *req);        /* as sent, never NULL */
const char *adm_req_query(const struct adm_req *req);       /* after '?', or NULL */
const char *adm_req_peer(const struct adm_req *req);        /* "IP:PORT" of the client */
struct evkeyvalq *adm_req_in(struct adm_req *req);          /* request fields */
struct evkeyvalq *adm_req_out(struct adm_req *req);         /* answer fields to send */
struct evbuffer *adm_req_body(struct adm_req *req);         /* the body, decoded */

/* Answers with <body> (its bytes are taken; NULL: none), adding
 * Content-Length, Date and Connection. To HEAD, the head only, with the
 * length a GET would have. */
void adm_req_reply(struct adm_req *req, int code, const char *reason, struct evbuffer *body);

#endif
