/*
 * etcd_int.h - the private half of the etcd client (etcd.c): one HTTP/1.1
 * request to one endpoint on a connection of its own (etcd_http.c).
 *
 * Each request dials (each address of the endpoint's host in turn, as
 * curl does, until one connects and, over TLS, completes its handshake:
 * a name with an IPv4 and an IPv6 address whose server listens on one),
 * sends one POST with "Connection: close", and reads
 * the answer with the project's response parser (admin/http1/response.h).
 * A unary request (a range, a txn, auth) collects its body, bounded, and
 * ends once; a stream (the watch) hands each line of its body over as it
 * arrives and ends only with an error. Dial, handshake and head (and, for
 * a unary request, the body) are under timers; a stream's silence is the
 * watchdog's business. A connection per request keeps the client simple:
 * nothing waits behind a slow answer, and a failed request takes nothing
 * else down with it.
 */
#ifndef SY_ADMIN_ETCD_INT_H
#define SY_ADMIN_ETCD_INT_H

#include <stddef.h>

#include <event2/event.h>
#include <openssl/ssl.h>

/* The most bytes of an answer's body (a range of the whole prefix) or of
 * one line of a watch stream. */
#define ETCD_BODY_MAX ((size_t)64 << 20)

/* An endpoint, parsed from "http://host:port" or "https://host:port". */
struct etcd_ep {
    char *url; /* as given */
    char *host;
    unsigned port;
    int tls;
};

/* Parses <url> into <ep> (strings owned by <ep>); -1 with the reason in
 * <why>. */
int etcd_ep_parse(struct etcd_ep *ep, const char *url, char *why, size_t cap);
void etcd_ep_clear(struct etcd_ep *ep);

struct etcd_http;

/* How a request ends. <status> is the HTTP status and <body> the whole
 * body (NUL-terminated, <len> bytes) when <err> is NULL; otherwise <err>
 * says what failed (status 0). Called once; the request is freed after
 * it returns. */
typedef void (*etcd_http_done)(void *arg, int status, const char *body, size_t len,
                               const char *err);
/* One line of a stream's body (without its '\n'); return -1 to end the
 * stream (then done is not called: the caller knows why). */
typedef int (*etcd_http_line)(void *arg, const char *line, size_t len);

struct evdns_base;

struct etcd_http_req {
    struct event_base *base;
    SSL_CTX *ssl_ctx; /* for a TLS endpoint */
    /* resolves a host name without blocking the loop (NULL: the endpoints
     * are addresses) */
    struct evdns_base *dns;
    const struct etcd_ep *ep;
    const char *path;  /* "/v3/kv/range" */
    const char *body;  /* JSON; NULL: a GET (the JWKS fetch, jwks_fetch.c) */
    size_t body_max;   /* the most bytes of the answer's body; 0: ETCD_BODY_MAX */
    const char *token; /* the Authorization header, or NULL */
    unsigned dial_ms, request_ms;
    etcd_http_line line; /* non-NULL: a stream */
    etcd_http_done done;
    void *arg;
};

/* Starts a request (the strings are copied). NULL when out of memory or
 * the TLS session cannot be set up (<why> says which); done is then not
 * called. */
struct etcd_http *etcd_http_start(const struct etcd_http_req *r, char *why, size_t cap);
/* Ends a request without calling its done. NULL is a no-op. */
void etcd_http_cancel(struct etcd_http *h);

/* A resolver for the requests' host names on <base>: getaddrinfo() would
 * hold the admin thread (the API, every swap) for as long as a dead DNS
 * server takes to time out, at every request. The nameservers of
 * /etc/resolv.conf and the names of /etc/hosts, as the system's resolver
 * has them. NULL when out of memory. */
struct evdns_base *etcd_http_dns_new(struct event_base *base);
/* Frees <dns> once the lookups cancelled with their requests have been
 * answered; never from inside the loop of <base>. */
void etcd_http_dns_free(struct event_base *base, struct evdns_base *dns);

#endif /* SY_ADMIN_ETCD_INT_H */
