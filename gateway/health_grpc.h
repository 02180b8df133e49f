/*
 * health_grpc.h - the gRPC health check (health_grpc.c): one call of
 * grpc.health.v1.Health/Check over a one-shot HTTP/2 client session that
 * libnghttp2 drives on a probe's connection (health.c owns the
 * connection, its timeout and the counting), and the pure pieces under
 * it: the request message, the length-prefixed gRPC message of the
 * answer, the HealthCheckResponse, and the verdict.
 *
 * Only SERVING passes. NOT_SERVING, SERVICE_UNKNOWN, UNKNOWN, any
 * non-zero grpc-status, an HTTP status other than 200, an answer that is
 * not gRPC or not well formed, a reset stream and (health.c's part) a
 * failed connect or handshake, an h2 connection whose server did not
 * choose h2 by ALPN, or the timeout all fail, as gRPC's own health
 * clients count them (grpc/doc/health-checking.md).
 *
 * The protobuf is written and read by hand: HealthCheckRequest is
 * { string service = 1; }, HealthCheckResponse is { ServingStatus status
 * = 1; }. The reader skips fields it does not know, as any protobuf
 * reader does, and refuses a message cut short.
 */
#ifndef SY_GATEWAY_HEALTH_GRPC_H
#define SY_GATEWAY_HEALTH_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/io.h"

/* HealthCheckResponse.ServingStatus (grpc/health/v1/health.proto). */
enum gw_hgrpc_serving {
    GW_HGRPC_UNKNOWN = 0,
    GW_HGRPC_SERVING = 1,
    GW_HGRPC_NOT_SERVING = 2,
    GW_HGRPC_SERVICE_UNKNOWN = 3, /* only ever from Watch, but said here all the same */
};

/* The most response body bytes a check keeps: a HealthCheckResponse is
 * seven bytes; the rest is room for fields we do not know. */
#define GW_HGRPC_BODY_MAX 512

/* ---- pure ---- */

/* The request's body: the gRPC message (flag byte 0, 4-byte big-endian
 * length) holding HealthCheckRequest{service: <service>} (NULL or "": the
 * field left out, as proto3 leaves a default out). Writes it at <out>
 * when it fits in <cap> bytes; returns its length either way (0 for a
 * service too long for one gRPC message). */
size_t gw_hgrpc_request(const char *service, unsigned char *out, size_t cap);

/* <n> bytes <p> of a response body as one unary answer: 1 when they are
 * exactly one whole uncompressed message (*<msg>, *<len>: its payload
 * inside <p>), 0 when they are the start of one (more may come), -1 when
 * they cannot be one (compressed, which we never accept, an unknown flag,
 * or bytes after the message). */
int gw_hgrpc_frame(const unsigned char *p, size_t n, const unsigned char **msg, size_t *len);

/* The HealthCheckResponse in <p> (<n> bytes): its status into *<status>
 * (the last one given; UNKNOWN when none is, proto3's default). Fields
 * other than status, and a status written with another wire type, are
 * skipped. 0, or -1 for a message cut short or not protobuf at all. */
int gw_hgrpc_response(const unsigned char *p, size_t n, int32_t *status);

/* What came back on the check's stream. */
struct gw_hgrpc_answer {
    int http_status; /* the final :status, 0: no head */
    int grpc_type;   /* its content-type is application/grpc (or a subtype) */
    int grpc_status; /* -1: none in the head or trailers */
    uint32_t reset;  /* the stream closed with this HTTP/2 error code, 0: in order */
    int overflow;    /* the body passed GW_HGRPC_BODY_MAX */
    size_t len;      /* of body */
    unsigned char body[GW_HGRPC_BODY_MAX];
};

/* The verdict on a whole answer <a>: 1 when it says SERVING, else 0 with
 * why in <why> (<cap> bytes: "NOT_SERVING", "grpc-status 12", "HTTP
 * status 503", ...). */
int gw_hgrpc_verdict(const struct gw_hgrpc_answer *a, char *why, size_t cap);

/* ---- the call ---- */

struct gw_hgrpc;

/* A check of <service> (NULL: "") over <io> (borrowed: it outlives the
 * check), sent to <authority> with :scheme https when <tls>. NULL on out
 * of memory. Nothing is sent before gw_hgrpc_start(). */
struct gw_hgrpc *gw_hgrpc_new(struct gw_io *io, const char *authority, const char *service, int tls,
                              unsigned timeout_ms);
/* The same session for an "http" check of an HTTP/2 pool (h2c, h2): a
 * GET of <target>, its answer's status judged by the caller (expect_status)
 * once gw_hgrpc_read() says 1; a reset or a lost connection fails it. */
struct gw_hgrpc *gw_hgrpc_new_get(struct gw_io *io, const char *authority, const char *target,
                                  int tls);
/* NULL is a no-op. */
void gw_hgrpc_free(struct gw_hgrpc *g);

/* <io> is connected (its TLS handshake done): the call starts (the
 * connection preface, SETTINGS, HEADERS and the request's DATA queued on
 * the io's output). 0, or -1 when it cannot (a TLS server that did not
 * choose h2 by ALPN, out of memory), the check failed (gw_hgrpc_why). */
int gw_hgrpc_start(struct gw_hgrpc *g);

/* Bytes came into the io's input: nghttp2 takes them all and queues what
 * it owes (SETTINGS ACK, WINDOW_UPDATE, PING ACK). 1 once the answer is
 * whole and says SERVING, 0 once the check failed (gw_hgrpc_why), -1
 * while it waits for more. */
int gw_hgrpc_read(struct gw_hgrpc *g);

/* Why the check failed, NULL while it has not (or when no answer
 * came: a connect failure or the timeout are the caller's to name). */
const char *gw_hgrpc_why(const struct gw_hgrpc *g);
/* The HTTP status of the answer, 0 when none came. */
int gw_hgrpc_http_status(const struct gw_hgrpc *g);

#endif
