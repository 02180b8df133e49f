/*
 * upconn.h - upstream connections (upconn.c): connected, lent to one
 * request at a time, parked in their pool's per-worker idle stack between
 * requests, pruned when their pool leaves the config, closed after their
 * idle timeout; one state each, changed only by gw_upconn_set_state().
 */
#ifndef SY_GATEWAY_UPCONN_H
#define SY_GATEWAY_UPCONN_H

#include "admin/http1/response.h"
#include "gateway/conn.h"

#define GW_UP_HEAD_MAX (64 * 1024) /* an upstream response head is at most this long */
#define GW_UP_INTERIM_MAX 32       /* 1xx responses of a request passed on; later ones dropped */

enum gw_upconn_state {
    GW_UP_CONNECTING, /* connect (and handshake) under way; the request head waits */
    GW_UP_IDLE,       /* parked in the pool, serving no client */
    GW_UP_WAITING,    /* the request went up: no final response head yet */
    GW_UP_BODY,       /* the response head passed on: its body flows */
    GW_UP_TUNNEL,     /* after 101: bytes both ways */
};

struct gw_upconn {
    LIST_ENTRY(gw_upconn) link; /* the worker's upconns */
    struct gw_worker *w;
    struct gw_io io;
    up_pool *pool;
    size_t server;
    SSL_CTX *tls; /* a TLS upstream's client context (its snapshot's), NULL: plain */
    enum gw_upconn_state st;
    struct gw_req *r; /* the request served; NULL while idle */
    /* a subrequest's pointer to it (subreq.c), set to NULL when <u> is
     * freed under it (the worker's shutdown frees its connections before
     * its clients); NULL: none */
    struct gw_upconn **holder;
    int reused, got_bytes, raw, keep, read_paused;
    int lent; /* a request started on it (up_request_start) and has not ended */
    int eof;  /* the upstream closed: what is buffered is all that comes */
    struct gw_tmo tmo;
    long long idle_until; /* parked: CLOCK_MONOTONIC ms when it is closed */
    /* the response parser: status, fields, msg_done. Last, because it is
     * most of the struct: a new connection zeroes what comes before it and
     * sets it up with h1_resp_init(), its arrays left as they are */
    struct h1_resp resp;
};

void gw_upconn_set_state(struct gw_upconn *u, enum gw_upconn_state st);
/* Where <server> of <pool> is in snapshot <s>: its index in s->pools[*up],
 * which is <pool> itself or the changed pool of the same name that took
 * over the server's state; UP_NONE when the server left the config. */
size_t gw_up_where(const struct adm_snapshot *s, const up_pool *pool, size_t server, size_t *up);
/* The TLS transport state of a new connection on <fd> to <server> of the
 * snapshot's upstream <up> (its pool <pool>): the pool's client context,
 * SNI its server_name, else the server's host name (never an IP literal),
 * the certificate verified for server_name or the host, resuming <resume>
 * (NULL: none). NULL when out of memory. */
void *gw_up_tls_new(const struct adm_snapshot *s, size_t up, const up_pool *pool, size_t server,
                    evutil_socket_t fd, SSL_SESSION *resume);
/* A new connection to <server> of <pool> (retained), connecting; NULL on
 * failure with errno set. The caller sets its callbacks before returning
 * to the loop. */
struct gw_upconn *gw_upconn_connect(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                    size_t server);
/* Keeps the session of <u>'s completed TLS handshake for the worker's next
 * connection to the same server, once it can be resumed (TLS 1.3 tickets
 * come after the handshake); gw_upconn_free() and parking call it too. */
void gw_upconn_session_keep(struct gw_upconn *u);
/* Forgets the session kept for <u>'s server (its handshake failed). */
void gw_upconn_session_forget(struct gw_upconn *u);
/* Lends <u> to client <c>'s request: the request starts on <u>'s server
 * (up_request_start); it ends (up_request_end) when <u> is released or
 * freed, whatever ended it. */
void gw_upconn_lend(struct gw_upconn *u, struct gw_req *r);
/* A parked connection to <server> of <pool>, now GW_UP_WAITING, or NULL.
 * One parked through another pool that shares the server's state (the pool
 * <pool> took over from in a swap) now holds <pool>. */
struct gw_upconn *gw_upconn_take(struct gw_worker *w, up_pool *pool, size_t server);
/* The response ended: when <reuse>, parks <u> for <idle_ms> (its client
 * detached), else frees it. */
void gw_upconn_release(struct gw_upconn *u, int reuse, unsigned idle_ms);
/* Detaches <u> from its client and frees it; gw_upconn_free(NULL) is a no-op. */
void gw_upconn_free(struct gw_upconn *u);
#endif
