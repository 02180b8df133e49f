/*
 * h2.h - HTTP/2 to clients (h2.c, h2_stream.c; h2_int.h says how): a
 * client connection that chose HTTP/2 is served by it from its first
 * byte on, each stream a request of its own (struct gw_req) that the
 * request layer routes, proxies or answers as it does an HTTP/1.1 one.
 *
 * The choice is made at a connection's first read, on listeners whose
 * protocols allow it (http1.c asks): over TLS, ALPN selected "h2"; on a
 * plain listener with "h2c", the connection opens with the HTTP/2
 * preface ("prior knowledge", RFC 9113 3.3). Anything else is HTTP/1.x,
 * the bytes read so far its own.
 */
#ifndef SY_GATEWAY_H2_H
#define SY_GATEWAY_H2_H

#include <nghttp2/nghttp2.h>

struct gw_conn;
struct gw_worker;

/* nghttp2's allocator over <w>'s spare blocks (h2_int.h: gw_h2_cache), for
 * another session of the worker's (an upstream's, h2up.c): 0, or -1 when
 * out of memory. */
int gw_h2_mem(struct gw_worker *w, nghttp2_mem *mem);

/* What gw_h2_sniff() says. */
enum gw_h2_sniff {
    GW_H2_NO,   /* HTTP/1.x: the bytes read so far are its */
    GW_H2_YES,  /* HTTP/2: the connection is h2.c's now, and may already be gone */
    GW_H2_WAIT, /* the preface so far: more bytes decide (the header timeout runs) */
};

/* At the first read of <c>, on a listener that may speak HTTP/2 (TLS with
 * "h2", plain with "h2c"): whether it does; with GW_H2_YES, its
 * callbacks are HTTP/2's and the bytes already read were handed to it. */
enum gw_h2_sniff gw_h2_sniff(struct gw_conn *c);

#endif
