/*
 * etcd_http.c - one HTTP/1.1 POST to an etcd endpoint on a connection of
 * its own, plain or TLS, read with admin/http1/response.h (etcd_int.h
 * says why a connection per request). The JWKS fetch (jwks_fetch.c) uses
 * it for a GET.
 */
#include "admin/etcd_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "admin/addr.h"
#include "admin/http1/response.h"
#include "admin/snapshot.h" /* adm_now_ms */

/* The most bytes of a response head. */
#define HEAD_MAX 16384
/* The least time an address is given before the next one is tried. */
#define NEXT_MIN_MS 250

enum phase { PH_DIAL, PH_HEAD, PH_BODY };

/* A host name's lookup: its answer comes through here, even after the
 * request it was for ended (then <h> is NULL and the answer is dropped). */
struct lookup {
    struct etcd_http *h;
    struct evdns_getaddrinfo_request *req;
    int done, result;
    struct evutil_addrinfo *res;
};

struct etcd_http {
    struct bufferevent *bev;
    struct event *timer;
    struct event *kick; /* dials from the loop, after a lookup's answer too */
    struct event_base *base;
    SSL_CTX *ssl_ctx;
    struct evdns_base *dns;
    struct evbuffer *req;       /* the request's bytes, for each address tried */
    struct lookup *lookup;      /* the host name's, under way; or NULL */
    struct evutil_addrinfo *ai; /* the addresses, once known */
    struct evutil_addrinfo *at; /* the one being tried */
    char first_err[400];        /* why the first address failed, named */
    struct event *next_timer;   /* an address's share of the dial timeout */
    double dial_end_ms;         /* when the dial timeout ends (monotonic) */
    unsigned failed;            /* addresses that failed */
    struct h1_resp *resp;
    struct evbuffer *buf; /* a unary body, or a stream's partial line */
    enum phase phase;
    int stream; /* lines go to <line> (a 200 answer to a stream request) */
    int overflow;
    size_t body_max;
    const struct etcd_ep *ep;
    unsigned request_ms;
    etcd_http_line line;
    etcd_http_done done;
    void *arg;
};

/* ---- endpoints ---- */

int etcd_ep_parse(struct etcd_ep *ep, const char *url, char *why, size_t cap)
{
    const char *p, *hs, *he, *colon;
    char *end;
    unsigned long port;

    memset(ep, 0, sizeof(*ep));
    if (!strncasecmp(url, "http://", 7)) {
        p = url + 7;
    } else if (!strncasecmp(url, "https://", 8)) {
        p = url + 8;
        ep->tls = 1;
    } else {
        snprintf(why, cap, "endpoint \"%s\": not http:// or https://", url);
        return -1;
    }
    if (*p == '[') { /* an IPv6 literal */
        hs = p + 1;
        if (!(he = strchr(hs, ']')))
            goto bad;
        colon = he + 1;
    } else {
        hs = p;
        he = colon = p + strcspn(p, ":/");
    }
    if (he == hs || *colon != ':')
        goto bad;
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || port == 0 || port > 65535 || (*end && strcmp(end, "/")))
        goto bad;
    ep->url = strdup(url);
    ep->host = strndup(hs, (size_t)(he - hs));
    ep->port = (unsigned)port;
    if (!ep->url || !ep->host) {
        etcd_ep_clear(ep);
        snprintf(why, cap, "out of memory");
        return -1;
    }
    return 0;
bad:
    snprintf(why, cap, "endpoint \"%s\": expected scheme://host:port", url);
    return -1;
}

void etcd_ep_clear(struct etcd_ep *ep)
{
    free(ep->url);
    free(ep->host);
    memset(ep, 0, sizeof(*ep));
}

/* ---- a request ---- */

static void http_free(struct etcd_http *h)
{
    struct lookup *l = h->lookup;

    if (l && l->done) {
        if (l->res)
            evutil_freeaddrinfo(l->res);
        free(l);
    } else if (l) { /* its answer frees it */
        l->h = NULL;
        evdns_getaddrinfo_cancel(l->req);
    }
    if (h->ai)
        evutil_freeaddrinfo(h->ai);
    if (h->bev)
        bufferevent_free(h->bev);
    if (h->timer)
        event_free(h->timer);
    if (h->kick)
        event_free(h->kick);
    if (h->next_timer)
        event_free(h->next_timer);
    if (h->req)
        evbuffer_free(h->req);
    if (h->buf)
        evbuffer_free(h->buf);
    free(h->resp);
    free(h);
}

void etcd_http_cancel(struct etcd_http *h)
{
    if (h)
        http_free(h);
}

/* Ends <h> with the error <msg>, prefixed by the endpoint. */
static void http_fail(struct etcd_http *h, const char *msg)
{
    char why[512];

    snprintf(why, sizeof(why), "%s: %s", h->ep->url, msg);
    h->done(h->arg, 0, NULL, 0, why);
    http_free(h);
}

static void http_finish(struct etcd_http *h)
{
    unsigned char *body;
    size_t len = evbuffer_get_length(h->buf);

    if (evbuffer_add(h->buf, "", 1) < 0 || !(body = evbuffer_pullup(h->buf, -1))) {
        http_fail(h, "out of memory");
        return;
    }
    h->done(h->arg, h->resp->status, (const char *)body, len, NULL);
    http_free(h);
}

static void on_body(void *ctx, const char *data, size_t len)
{
    struct etcd_http *h = ctx;

    if (h->overflow || evbuffer_get_length(h->buf) + len > h->body_max ||
        evbuffer_add(h->buf, data, len) < 0)
        h->overflow = 1;
}

/* Hands the complete lines of a stream over; -1 when <h> is gone. */
static int stream_lines(struct etcd_http *h)
{
    struct evbuffer_ptr at;

    for (;;) {
        size_t n;
        char *line;

        at = evbuffer_search(h->buf, "\n", 1, NULL);
        if (at.pos < 0)
            return 0;
        n = (size_t)at.pos;
        if (!(line = malloc(n + 1))) {
            http_fail(h, "out of memory");
            return -1;
        }
        evbuffer_remove(h->buf, line, n);
        evbuffer_drain(h->buf, 1);
        line[n] = '\0';
        if (h->line(h->arg, line, n) < 0) {
            free(line);
            http_free(h);
            return -1;
        }
        free(line);
    }
}

/* Feeds what is buffered to the body decoder; -1 when <h> is gone. */
static int read_body(struct etcd_http *h, struct evbuffer *in)
{
    while (evbuffer_get_length(in) > 0 && !h->resp->msg_done) {
        size_t len = evbuffer_get_length(in), used = 0;
        const char *data = (const char *)evbuffer_pullup(in, -1);

        if (!data) {
            http_fail(h, "out of memory");
            return -1;
        }
        if (h1_resp_feed_body(h->resp, data, len, &used, on_body, h) < 0) {
            http_fail(h, "invalid body framing");
            return -1;
        }
        evbuffer_drain(in, used);
        if (h->overflow) {
            http_fail(h, "answer too large");
            return -1;
        }
        if (h->stream && stream_lines(h) < 0)
            return -1;
        if (used == 0)
            break;
    }
    if (h->resp->msg_done) {
        if (h->stream)
            http_fail(h, "the watch stream ended");
        else
            http_finish(h);
        return -1;
    }
    return 0;
}

/* Parses the head once it is all there; -1 when <h> is gone. */
static int read_head(struct etcd_http *h, struct evbuffer *in)
{
    for (;;) {
        size_t len = evbuffer_get_length(in), n = len < HEAD_MAX ? len : HEAD_MAX, hl;
        const char *data = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
        int rc = data ? h1_resp_parse_head(h->resp, data, n, HEAD_MAX, &hl) : -1;

        if (rc == 0 && len < HEAD_MAX)
            return 0;
        if (rc <= 0) {
            http_fail(h, "invalid response head");
            return -1;
        }
        evbuffer_drain(in, hl);
        if (h->resp->status >= 200)
            break;
        h1_resp_init(h->resp); /* a 1xx: the real head follows */
    }
    h1_resp_begin_body(h->resp);
    h->phase = PH_BODY;
    if (h->line && h->resp->status == 200) {
        h->stream = 1; /* a stream's silence is the watchdog's business */
        event_del(h->timer);
    }
    return 0;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct etcd_http *h = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (h->phase == PH_HEAD && read_head(h, in) < 0)
        return;
    if (h->phase == PH_BODY)
        read_body(h, in);
}

/* What went wrong on <bev>, in words. */
static void bev_error(struct bufferevent *bev, char *out, size_t cap)
{
    unsigned long e;
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    if (ssl && SSL_get_verify_result(ssl) != X509_V_OK) {
        snprintf(out, cap, "TLS: certificate verify failed: %s",
                 X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
    } else if (ssl && (e = bufferevent_get_openssl_error(bev)) != 0) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        snprintf(out, cap, "TLS: %s", buf);
        while (bufferevent_get_openssl_error(bev))
            ;
    } else {
        int err = EVUTIL_SOCKET_ERROR();
        snprintf(out, cap, "%s", err ? evutil_socket_error_to_string(err) : "connection closed");
    }
}

static int dial_next(struct etcd_http *h);

/* The address being tried failed for <why>: noted (the first one's
 * reason is what the request's error says), and the next one tried. */
static void next_address(struct etcd_http *h, const char *why)
{
    char at[80];

    if (!h->first_err[0]) {
        adm_sockaddr_text(h->at->ai_addr, at, sizeof(at));
        snprintf(h->first_err, sizeof(h->first_err), "%s: %s", at, why);
    }
    h->failed++;
    event_del(h->next_timer);
    bufferevent_free(h->bev);
    h->bev = NULL;
    h->at = h->at->ai_next;
    dial_next(h);
}

/* An address had its share of the dial timeout: the next one's turn,
 * unless its TCP connection is up (a TLS handshake under way: a slow
 * server, not a dead address; the whole dial timeout bounds it). */
static void on_next_timer(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_http *h = arg;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    evutil_socket_t s = bufferevent_getfd(h->bev);

    (void)fd;
    (void)what;
    if (s >= 0 && getpeername(s, (struct sockaddr *)&ss, &sl) == 0)
        return;
    next_address(h, "timed out connecting");
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct etcd_http *h = arg;
    char msg[300];

    if (h->phase == PH_DIAL && !(what & BEV_EVENT_CONNECTED)) {
        /* this address failed (no connection, or no handshake): the next */
        if (what & BEV_EVENT_EOF)
            snprintf(msg, sizeof(msg), "connection closed early");
        else
            bev_error(bev, msg, sizeof(msg));
        next_address(h, msg);
        return;
    }
    if (what & BEV_EVENT_CONNECTED) {
        event_del(h->next_timer);
        struct timeval tv = {h->request_ms / 1000, (h->request_ms % 1000) * 1000};
        h->phase = PH_HEAD;
        event_add(h->timer, &tv);
        return;
    }
    if ((what & BEV_EVENT_EOF) && h->phase == PH_BODY && !h->stream && h1_resp_needs_eof(h->resp)) {
        http_finish(h);
        return;
    }
    if (what & BEV_EVENT_EOF)
        snprintf(msg, sizeof(msg), "%s",
                 h->stream ? "the watch stream was closed" : "connection closed early");
    else
        bev_error(bev, msg, sizeof(msg));
    http_fail(h, msg);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_http *h = arg;

    char msg[600], at[80];

    (void)fd;
    (void)what;
    if (h->phase != PH_DIAL) {
        http_fail(h, "timed out waiting for the answer");
        return;
    }
    if (!h->at) { /* still looking the name up */
        snprintf(msg, sizeof(msg), "timed out resolving %s", h->ep->host);
    } else {
        adm_sockaddr_text(h->at->ai_addr, at, sizeof(at));
        snprintf(msg, sizeof(msg), "timed out connecting to %s%s%s%s", at,
                 h->first_err[0] ? " (before it, " : "", h->first_err, h->first_err[0] ? ")" : "");
    }
    http_fail(h, msg);
}

/* A TLS session for <ep> that checks the server's name (or IP). */
static SSL *tls_session(SSL_CTX *ctx, const struct etcd_ep *ep)
{
    unsigned char ip[16];
    SSL *ssl = SSL_new(ctx);

    if (!ssl)
        return NULL;
    if (inet_pton(AF_INET, ep->host, ip) == 1 || inet_pton(AF_INET6, ep->host, ip) == 1) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep->host) != 1)
            goto fail;
    } else if (SSL_set_tlsext_host_name(ssl, ep->host) != 1 || SSL_set1_host(ssl, ep->host) != 1) {
        goto fail;
    }
    return ssl;
fail:
    SSL_free(ssl);
    return NULL;
}

/* Dials h->at, then each address after it, until one takes the connect:
 * 0; or, once none is left, ends <h> with the first address's error: -1. */
static int dial_next(struct etcd_http *h)
{
    /* deferred callbacks: none runs inside bufferevent_socket_connect() */
    const int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;
    char msg[600], err[256];

    for (; h->at; h->at = h->at->ai_next) {
        struct evbuffer *out;
        if (h->ep->tls) {
            SSL *ssl = tls_session(h->ssl_ctx, h->ep);
            if (!ssl) {
                http_fail(h, "cannot set up a TLS session");
                return -1;
            }
            h->bev =
                bufferevent_openssl_socket_new(h->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, opts);
            if (!h->bev) {
                SSL_free(ssl);
                break;
            }
            bufferevent_openssl_set_allow_dirty_shutdown(h->bev, 1);
        } else if (!(h->bev = bufferevent_socket_new(h->base, -1, opts))) {
            break;
        }
        bufferevent_setcb(h->bev, on_read, NULL, on_event, h);
        out = bufferevent_get_output(h->bev);
        if (evbuffer_add(out, evbuffer_pullup(h->req, -1), evbuffer_get_length(h->req)) < 0 ||
            bufferevent_enable(h->bev, EV_READ | EV_WRITE) < 0)
            break;
        if (bufferevent_socket_connect(h->bev, h->at->ai_addr, (int)h->at->ai_addrlen) == 0) {
            /* with addresses after it, this one gets an equal share of the
             * time left (at least NEXT_MIN_MS): one that drops the SYN
             * must not spend the others' time */
            unsigned left = 0;
            for (const struct evutil_addrinfo *a = h->at; a; a = a->ai_next)
                left++;
            if (left > 1) {
                double share = (h->dial_end_ms - adm_now_ms()) / left;
                unsigned ms = share < NEXT_MIN_MS ? NEXT_MIN_MS : (unsigned)share;
                struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
                event_add(h->next_timer, &tv);
            }
            return 0;
        }
        bev_error(h->bev, err, sizeof(err));
        if (!h->first_err[0]) {
            char at[80];
            adm_sockaddr_text(h->at->ai_addr, at, sizeof(at));
            snprintf(h->first_err, sizeof(h->first_err), "%s: %s", at, err);
        }
        h->failed++;
        bufferevent_free(h->bev);
        h->bev = NULL;
    }
    if (h->at) {
        http_fail(h, "out of memory");
        return -1;
    }
    if (h->failed > 1) {
        snprintf(msg, sizeof(msg), "%s (and %u more address%s)", h->first_err, h->failed - 1,
                 h->failed == 2 ? "" : "es");
        http_fail(h, msg);
    } else {
        http_fail(h, h->first_err[0] ? h->first_err : "no address to connect to");
    }
    return -1;
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct lookup *l = arg;

    if (!l->h) { /* the request ended meanwhile */
        if (res)
            evutil_freeaddrinfo(res);
        free(l);
        return;
    }
    l->done = 1;
    l->result = result;
    l->res = res;
    event_active(l->h->kick, EV_TIMEOUT, 1); /* maybe inside evdns_getaddrinfo() */
}

/* From the loop: the addresses (a literal's, /etc/hosts' or DNS's), then
 * the first dial. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_http *h = arg;
    struct evutil_addrinfo hints, *res = NULL;
    struct lookup *l = h->lookup;
    char port[8], msg[300];
    unsigned char ip[16];
    int rc;

    (void)fd;
    (void)what;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%u", h->ep->port);
    if (l && !l->done)
        return; /* not answered yet: nothing else activates the kick */
    if (l) {    /* the lookup's answer */
        h->lookup = NULL;
        rc = l->result;
        res = l->res;
        free(l);
    } else if (h->dns && inet_pton(AF_INET, h->ep->host, ip) != 1 &&
               inet_pton(AF_INET6, h->ep->host, ip) != 1) {
        if (!(l = calloc(1, sizeof(*l)))) {
            http_fail(h, "out of memory");
            return;
        }
        l->h = h;
        h->lookup = l;
        l->req = evdns_getaddrinfo(h->dns, h->ep->host, port, &hints, on_resolved, l);
        if (!l->req && !l->done) { /* cannot happen: a NULL means answered */
            h->lookup = NULL;
            free(l);
            http_fail(h, "cannot resolve: out of memory");
        }
        return;
    } else {
        /* an address; or a name without evdns (a caller's choice: it blocks) */
        rc = evutil_getaddrinfo(h->ep->host, port, &hints, &res);
    }
    if (rc != 0 || !res) {
        snprintf(msg, sizeof(msg), "cannot resolve: %s",
                 rc ? evutil_gai_strerror(rc) : "no address");
        if (res)
            evutil_freeaddrinfo(res);
        http_fail(h, msg);
        return;
    }
    h->ai = h->at = res;
    dial_next(h);
}

/* The request's bytes into h->req, sent on each address tried. */
static int write_request(struct etcd_http *h, const struct etcd_http_req *r)
{
    struct evbuffer *out = h->req;
    size_t blen = r->body ? strlen(r->body) : 0;
    int v6 = strchr(r->ep->host, ':') != NULL;

    if (evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: %s%s%s:%u\r\nConnection: close\r\n",
                            r->body ? "POST" : "GET", r->path, v6 ? "[" : "", r->ep->host,
                            v6 ? "]" : "", r->ep->port) < 0)
        return -1;
    if (!r->body)
        return evbuffer_add_printf(out, "Accept: application/json\r\n\r\n") < 0 ? -1 : 0;
    if (evbuffer_add_printf(out, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                            blen) < 0)
        return -1;
    if (r->token && evbuffer_add_printf(out, "Authorization: %s\r\n", r->token) < 0)
        return -1;
    return evbuffer_add(out, "\r\n", 2) < 0 || evbuffer_add(out, r->body, blen) < 0 ? -1 : 0;
}

struct etcd_http *etcd_http_start(const struct etcd_http_req *r, char *why, size_t cap)
{
    struct etcd_http *h = calloc(1, sizeof(*h));
    struct timeval tv = {r->dial_ms / 1000, (r->dial_ms % 1000) * 1000};

    if (!h || !(h->resp = malloc(sizeof(*h->resp))) || !(h->buf = evbuffer_new()) ||
        !(h->req = evbuffer_new()) || !(h->timer = evtimer_new(r->base, on_timer, h)) ||
        !(h->kick = evtimer_new(r->base, on_kick, h)) ||
        !(h->next_timer = evtimer_new(r->base, on_next_timer, h)))
        goto fail_oom;
    h->dial_end_ms = adm_now_ms() + r->dial_ms;
    h1_resp_init(h->resp);
    h->ep = r->ep;
    h->base = r->base;
    h->ssl_ctx = r->ssl_ctx;
    h->dns = r->dns;
    h->request_ms = r->request_ms;
    h->body_max = r->body_max ? r->body_max : ETCD_BODY_MAX;
    h->line = r->line;
    h->done = r->done;
    h->arg = r->arg;
    if (r->ep->tls) { /* each address gets a session of its own: try one now */
        SSL *ssl = r->ssl_ctx ? tls_session(r->ssl_ctx, r->ep) : NULL;
        if (!ssl) {
            snprintf(why, cap, "%s: cannot set up a TLS session", r->ep->url);
            goto fail;
        }
        SSL_free(ssl);
    }
    if (write_request(h, r) < 0)
        goto fail_oom;
    /* the lookup (evdns for a host name) and every address tried are
     * under the dial timeout; none of it runs inside this call */
    event_add(h->timer, &tv);
    event_active(h->kick, EV_TIMEOUT, 1);
    return h;
fail_oom:
    snprintf(why, cap, "out of memory");
fail:
    if (h)
        http_free(h);
    ERR_clear_error();
    return NULL;
}

struct evdns_base *etcd_http_dns_new(struct event_base *base)
{
    struct evdns_base *dns = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);

    if (!dns)
        return NULL;
    /* a missing resolv.conf leaves evdns its default (127.0.0.1), as the
     * system's resolver does */
    evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL, "/etc/resolv.conf");
    if (evdns_base_load_hosts(dns, NULL) < 0)
        evdns_base_load_hosts(dns, "/dev/null"); /* localhost, at least */
    return dns;
}

/* evdns answers a cancelled lookup later, from the loop, through <dns>:
 * the loop runs those answers first, then <dns> is freed, as
 * adm_resolver_free() does. */
void etcd_http_dns_free(struct event_base *base, struct evdns_base *dns)
{
    for (int i = 0; i < 10; i++)
        event_base_loop(base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
    evdns_base_free(dns, 1);
}
