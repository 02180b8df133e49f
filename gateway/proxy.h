/*
 * proxy.h - a request that goes upstream, both ways (proxy.c).
 */
#ifndef SY_GATEWAY_PROXY_H
#define SY_GATEWAY_PROXY_H

#include "gateway/conn.h"
#include "gateway/forward.h"
#include "gateway/try.h"

struct gw_upconn;

/* A response head for the client (gw_proxy_head): an upstream's, whatever
 * protocol it came in. */
struct gw_resp_head {
    int status;
    const struct h1_slice *reason; /* NULL: none sent, or (reason_std) the standard one */
    const struct h1_header *hdr;   /* its fields */
    size_t nhdr;
    const char *extra; /* lines of ours to add ("Name: value\r\n"), or NULL */
    size_t extra_len;
    unsigned char raw;        /* its body passes framed as it came (HTTP/1) */
    unsigned char upgrade;    /* a 101 that becomes a tunnel */
    unsigned char nobody;     /* the answer ends with its head */
    unsigned char reason_std; /* without <reason>: the standard one (HTTP/2 has none) */
};

/* Writes <rh> to the client, dropping hop-by-hop fields (and those the
 * route's response_headers remove or set), adding X-Request-Id, Date and
 * the route's fields; <pend>: as the codec's head_end leaves it. */
void gw_proxy_head(struct gw_req *r, const struct gw_resp_head *rh, struct gw_obuf *pend);
/* Everything the upstream head of <r> is a function of (gw_forward_head),
 * with room for the client certificate's subject and digest. */
void gw_proxy_forward_of(struct gw_req *r, struct gw_forward *f, char subject[512],
                         char sha256[65]);
/* Acts on the "next server" decision <n> (gw_try_next) for <r>; 1 when
 * the request went on (or waits, or was answered), 0 when the caller
 * answers as without retries. */
int gw_proxy_next(struct gw_req *r, enum gw_next n, size_t server);
/* gw_proxy_fail, a gRPC client hearing <code> and <msg> (-1, NULL: what
 * <status> maps to). */
void gw_proxy_fail_grpc(struct gw_req *r, int status, int code, const char *msg);

/* proxy_h2.c: the same over an HTTP/2 stream (an h2c or h2 pool). The try
 * on <server> starts (its slot and budget taken): 0, or -1 when no stream
 * could be opened. <fresh>: on a new connection. */
int gw_proxy_h2_send(struct gw_req *r, size_t server, int fresh);
void gw_proxy_h2_body_up(struct gw_req *r);
void gw_proxy_h2_drained(struct gw_req *r);

/* The request in <c> (routed to r->sr, an upstream route) goes upstream:
 * GW_CONN_PROXY, its head sent or queued, its body pumped. */
void gw_proxy_start(struct gw_req *r);
/* Moves request body bytes from the client to the upstream, as far as the
 * upstream's output allows (the client's read callback). */
void gw_proxy_body_up(struct gw_req *r);
/* <c>'s output drained to the low watermark while it has an upstream
 * connection: reading the upstream goes on (a response paused for the
 * client, or a tunnel); <c> may be gone after it. */
void gw_proxy_drained(struct gw_req *r);
/* Fails the proxied request: a <status> answer when nothing was sent yet,
 * else the client connection closes (it cannot be told otherwise). */
void gw_proxy_fail(struct gw_req *r, int status);
/* The worker's wake event (gw_plim_get's <wake>): each pool's queue goes
 * on while a slot is free. */
void gw_proxy_dispatch(evutil_socket_t fd, short what, void *arg);
/* Frees <c>'s upstream connection, if any. */
void gw_proxy_detach(struct gw_req *r);

#endif
