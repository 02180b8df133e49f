/*
 * proxy.h - a request that goes upstream, both ways (proxy.c).
 */
#ifndef SY_GATEWAY_PROXY_H
#define SY_GATEWAY_PROXY_H

#include "gateway/conn.h"

struct gw_upconn;

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
/* Frees <c>'s upstream connection, if any. */
void gw_proxy_detach(struct gw_req *r);

#endif
