/*
 * try.h - the try machine of a proxied request (try.c): which server a try
 * goes to (the balancer's pick under the pool's limits), the slot it holds
 * there and its place in the retry budget, the wait in the worker's queue
 * for a slot, and the one "next server" decision after a try failed
 * (nginx's ngx_http_upstream_next). It decides; proxy.c acts (sends,
 * answers).
 */
#ifndef SY_GATEWAY_TRY_H
#define SY_GATEWAY_TRY_H

#include "gateway/conn.h"
#include "gateway/limits.h"
#include "gateway/upconn.h"

/* One error-log line about <r>'s upstream request, in the one form every
 * upstream warning takes: "upstream POOL server ADDR route ID request
 * REQID: " and the reason (<fmt>). <u> NULL: no server picked yet ("-"). */
void gw_up_log(int level, const struct gw_req *r, const struct gw_upconn *u, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether <rq>'s framing says it has no body (Content-Length: 0 is none). */
int gw_try_no_body(const struct h1_request *rq);
/* Whether <r> can be sent again whole: it has no body, or its body was
 * buffered, or none of it went to a server yet. */
int gw_try_resendable(const struct gw_req *r);
/* Whether <rq>'s method is idempotent (RFC 9110 9.2.2): safe to send twice. */
int gw_try_idempotent(const struct h1_request *rq);
/* Whether the try on <u> reached a server: 0 while its TCP connect had not
 * completed (refused, unreachable, timed out), when no byte of the request
 * (nor a TLS handshake) cost any server anything. */
int gw_try_reached(const struct gw_upconn *u);

/* A server for <r>'s next try, not in r->tried: the balancer's pick among
 * those with a slot free on this worker (gw_plim_pick). UP_NONE when no
 * server is usable, GW_PICK_FULL when every usable one is at its
 * max_connections (the request waits). */
size_t gw_try_pick(struct gw_req *r);
/* The try starts on <server>: it takes a slot there, and counts in the
 * retry budget (as the retry admitted for it, or as a first try). Its wait
 * for a slot, if it waited, is over. */
void gw_try_start(struct gw_req *r, size_t server);
/* The try is over and its upstream connection freed (a retry follows):
 * its slot and its place in the budget given back. */
void gw_try_detach(struct gw_req *r);
/* The proxied request is over: out of the queue, its try ended, its
 * buffered body freed; every per-request field of the limits back to 0. */
void gw_try_finish(struct gw_req *r);
/* Every usable server is at its max_connections: <r> waits in the
 * worker's queue for the pool; -1 when that is full (it is answered 503).
 * A request queued again keeps the deadline of its first wait. */
int gw_try_wait(struct gw_req *r);
/* The oldest request waiting in <l>'s queue, out of it; NULL: none. */
struct gw_req *gw_try_dequeue(struct gw_plim *l);
/* A request of <l>'s queue whose wait ran out at <now>, out of it
 * (counted as a queue timeout); NULL: none. */
struct gw_req *gw_try_expired(struct gw_plim *l, uint64_t now);

/* Where a try stood when it failed, whatever its protocol: an HTTP/1
 * connection (gw_try_at_of) or an HTTP/2 stream (proxy_h2.c). */
struct gw_try_at {
    const up_pool *pool;
    size_t server;
    unsigned char connecting;  /* its connection was not open yet */
    unsigned char reached;     /* its TCP connect completed (gw_try_reached) */
    unsigned char waiting;     /* the request went up; no response head yet */
    unsigned char got_bytes;   /* some of a response came */
    unsigned char unprocessed; /* HTTP/2: the server says it never processed it */
    int grpc;                  /* a gRPC status to retry (retry_on_grpc_status), -1: none */
};
/* <u>'s try as a struct gw_try_at. */
void gw_try_at_of(const struct gw_upconn *u, struct gw_try_at *at);
/* gw_up_log for a try described by <at>. */
void gw_up_log_at(int level, const struct gw_req *r, const struct gw_try_at *at, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));

/* What a request does after its try on a server failed. */
enum gw_next {
    GW_NEXT_GIVE_UP,   /* no other try: answered as without retries */
    GW_NEXT_SERVER,    /* a retry, admitted, to the server given */
    GW_NEXT_WAIT,      /* a retry, admitted, that waits for a slot */
    GW_NEXT_NONE_LEFT, /* no server is left to try and every one is down */
};

/* Whether the try of <r> on <u>, which failed with <what> before any byte
 * of an answer, goes once more on a fresh connection to the same server:
 * <u> was pooled (the server closed it while idle), the request is
 * idempotent and has no body, and it was not retried so yet (then it is
 * marked so). The server did not fail and keeps its turn. */
int gw_try_same(struct gw_req *r, const struct gw_upconn *u, short what);
/* The one "next server" decision. The try of <r> on <u> failed before any
 * answer with <what> (GW_IO_* flags; <status> 0), or answered a final
 * <status> (<what> 0) that the pool may retry (retry_on_status, before any
 * byte went to the client). It asks the pool's retries and its retry
 * budget (first, so that a retry it refuses does not move the balancer);
 * a retry is counted and logged. <u> is detached for every answer but
 * GW_NEXT_GIVE_UP. */
enum gw_next gw_try_next(struct gw_req *r, struct gw_upconn *u, short what, int status,
                         size_t *server);
/* gw_try_next for a try described by <at>; with at->grpc >= 0 (and <what>
 * and <status> 0) the answer was that gRPC status, trailers-only. */
enum gw_next gw_try_next_at(struct gw_req *r, const struct gw_try_at *at, short what, int status,
                            size_t *server);

#endif
