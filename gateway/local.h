/*
 * local.h - the answers Switchyard gives itself (local.c).
 */
#ifndef SY_GATEWAY_LOCAL_H
#define SY_GATEWAY_LOCAL_H

#include "gateway/conn.h"
#include "gateway/forward.h"

/* Encodes the short answers once; every worker calls it before serving. */
void gw_local_init(void);
/* Answers the request in <c> that gw_forward_decide() gave verdict <v>
 * other than GW_V_UPSTREAM (<m>: the router's match), then finishes it. */
void gw_local_answer(struct gw_req *r, enum gw_verdict v, const struct rt_match *m);
/* A short "<status> <reason>" answer with <extra> fields (each ending in
 * CRLF, <extra_len> bytes in all). */
void gw_local_simple(struct gw_req *r, int status, const char *extra, size_t extra_len);
/* gw_local_simple, but a gRPC request over HTTP/2 hears gRPC status
 * <code> (-1: gw_grpc_code(<status>)) with message <msg> (NULL: the one
 * for <status>) in a Trailers-Only answer (grpc.h), where <status> alone
 * does not say which fits: a 503 is UNAVAILABLE when no server is up,
 * RESOURCE_EXHAUSTED when the pool's queue is full. */
void gw_local_simple_grpc(struct gw_req *r, int status, int code, const char *msg,
                          const char *extra, size_t extra_len);
/* An answer another service decided (a forward_auth refusal): <status>
 * with its <extra> fields ("Name: value\r\n" lines) and <body> (<blen>
 * bytes, framed by Content-Length here), the route's policy fields and
 * X-Request-Id added. A gRPC request over HTTP/2 hears the status alone
 * (gw_local_simple). */
void gw_local_body(struct gw_req *r, int status, const char *extra, size_t extra_len,
                   const char *body, size_t blen);
/* A bad request: answer <status> and close. */
void gw_local_error_close(struct gw_req *r, int status);
/* After a local answer is queued (GW_CONN_LOCAL): read the request's body
 * away so the connection stays in step, then end the request. A body the
 * client may or may not send (Expect: 100-continue, and no 100 sent) is
 * not waited for: the connection closes. */
void gw_local_finish(struct gw_req *r);
/* Goes on reading the body away (the client's read callback). */
void gw_local_discard(struct gw_req *r);

#endif
