/*
 * grpc.h - what the gateway knows of gRPC (grpc.c, pure): the status an
 * answer of ours carries to a gRPC client instead of an HTTP error, its
 * message as grpc-message encodes it, and the grpc-status an upstream's
 * response names.
 *
 * A gRPC request (h1_request.grpc: its Content-Type is gRPC's) that
 * Switchyard answers itself over HTTP/2 gets what Envoy sends: HTTP 200,
 * Content-Type application/grpc, grpc-status and grpc-message, in one
 * HEADERS frame that ends the stream ("Trailers-Only", gRPC's
 * PROTOCOL-HTTP2), never an HTML or text 502 that a gRPC client could
 * only report as "Received http2 header with status: 502".
 */
#ifndef SY_GATEWAY_GRPC_H
#define SY_GATEWAY_GRPC_H

#include <stddef.h>

#include "admin/http1/token.h"

/* gRPC's status codes (grpc/doc/statuscodes.md): those we answer with or
 * count. GW_GRPC_NCODES: 0..16, the codes /metrics counts one by one. */
enum gw_grpc_code {
    GW_GRPC_OK = 0,
    GW_GRPC_UNKNOWN = 2,
    GW_GRPC_DEADLINE_EXCEEDED = 4,
    GW_GRPC_PERMISSION_DENIED = 7,
    GW_GRPC_RESOURCE_EXHAUSTED = 8,
    GW_GRPC_UNIMPLEMENTED = 12,
    GW_GRPC_INTERNAL = 13,
    GW_GRPC_UNAVAILABLE = 14,
    GW_GRPC_UNAUTHENTICATED = 16,
};
#define GW_GRPC_NCODES 17

/* The gRPC status an answer of ours with HTTP <status> gives a gRPC
 * client. gRPC's own HTTP-to-gRPC map (doc/http-grpc-status-mapping.md,
 * as Envoy's Grpc::Utility::httpToGrpcStatus), but where that says
 * UNAVAILABLE for every 5xx and 429 we name what went wrong (an upstream
 * timeout: 4; a limit: 8), and the nearest code for the statuses only a
 * gateway sends:
 *   404 405 501  UNIMPLEMENTED       no route, no such method, CONNECT
 *   502 503 421  UNAVAILABLE         no server up, a connection failed,
 *                                    the wrong connection (retry elsewhere)
 *   504 408      DEADLINE_EXCEEDED   the upstream's or the client's time ran out
 *   413 431 429  RESOURCE_EXHAUSTED  a message or head over a limit
 *   400 500      INTERNAL            a request we could not read; our fault
 *   401 403      UNAUTHENTICATED, PERMISSION_DENIED
 *   any other    UNKNOWN
 * A 503 of a full queue is RESOURCE_EXHAUSTED: its caller says so. */
int gw_grpc_code(int status);

/* The grpc-message of our answer with HTTP <status> when its caller has
 * none of its own: a short sentence of what went wrong. */
const char *gw_grpc_message(int status);

/* <n> bytes of <s> as grpc-message's Percent-Encoded at <out> (<cap>
 * bytes): space and visible ASCII but '%' as they are, every other byte
 * as "%XX" (upper-case hex). A message longer than <cap> is cut at a
 * whole byte's encoding. Returns the bytes written. */
size_t gw_grpc_pct_encode(char *out, size_t cap, const char *s, size_t n);

/* The code a grpc-status value <v> (<n> bytes) says: its decimal number
 * when it is one of 0..16, else UNKNOWN, as a gRPC client reads a status
 * it does not know. */
int gw_grpc_status_value(const char *v, size_t n);

/* The grpc-status among <n> fields <h> (a response head), or -1 when
 * none is. */
int gw_grpc_status_in(const struct h1_header *h, size_t n);

/* The grpc-status among trailer lines <lines> ("Name: value\r\n", <len>
 * bytes), or -1 when none is. */
int gw_grpc_status_in_lines(const char *lines, size_t len);

#endif
