/*
 * admin/http1/h2head.h - an HTTP/2 request's header list as the HTTP/1.1
 * head the request parser (request.h) takes, so that an HTTP/2 stream is
 * routed, normalized and limited by the same code as an HTTP/1.1 request
 * (nginx's and h2o's HTTP/2 requests are ordinary requests the same way).
 *
 * The fields arrive one at a time, as HPACK decodes them (the HTTP/2 codec
 * calls h2h_field() from its header callback), and go into the stream's
 * parser as they come: the request line "METHOD PATH HTTP/1.1" once the
 * pseudo-header fields are known (RFC 9113 8.3.1: they come first), then
 * "Host: <:authority>", then each field as "name: value", and at the end
 * the cookie crumbs joined into one Cookie field with "; " (RFC 9113
 * 8.2.3) and, for a request with a body but no content-length,
 * "Transfer-Encoding: chunked" (the upstream request is HTTP/1.1). The
 * parser's limits (max_request_line, max_header_bytes, max_headers) hold
 * as the head grows: a header list past them (an HPACK bomb: a few bytes
 * on the wire, megabytes decoded) holds no more memory than an HTTP/1.1
 * head may, and is answered 414 or 431 like one.
 *
 * Only what cannot go straight into the parser is kept aside, in a buffer
 * the caller gives (<side>, at least the parser's head: max_request_line +
 * 2 + max_header_bytes): the pseudo-header values until the request line
 * is written, then the cookie crumbs.
 *
 * What HTTP/2 forbids is refused as malformed (RFC 9113 8.1.1: the stream
 * is reset with PROTOCOL_ERROR), even where nghttp2 checks it as well
 * (unless the caller says it did: h2h_checked()):
 * names with upper case or bytes outside tchar, values with NUL, CR or LF
 * or with leading or trailing SP/HTAB (8.2.1), connection-specific fields
 * (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade)
 * and TE other than "trailers" (8.2.2), unknown, repeated, missing or late
 * pseudo-header fields, a :path neither origin-form nor "*" for OPTIONS,
 * a :scheme other than http and https, a Host that differs from
 * :authority (8.3.1), and CONNECT (Switchyard tunnels nothing over
 * HTTP/2). What HTTP/1.1 refuses too (an unknown method, a bad target or
 * Host, a control byte in a value) is the parser's answer, as for
 * HTTP/1.1.
 *
 * Pure: no allocation, no I/O.
 */
#ifndef SY_ADMIN_HTTP1_H2HEAD_H
#define SY_ADMIN_HTTP1_H2HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "admin/http1/request.h"

/* What h2h_field() and h2h_end() return; the first failure sticks. */
enum h2h_result {
    H2H_OK = 0,
    H2H_MALFORMED = -1, /* a malformed request: reset the stream (PROTOCOL_ERROR) */
    H2H_ERROR = -2,     /* answer with h->status (400, 414, 431, 501, ...); h->reason says why */
};

/* A head being built. Private but for status and reason. */
struct h2h {
    int status;         /* after H2H_ERROR */
    const char *reason; /* after H2H_MALFORMED or H2H_ERROR: static text */

    char *side; /* the caller's: pseudo-header values, then cookie crumbs */
    size_t cap, len;
    size_t off[3], vlen[3]; /* :method, :path, :authority in <side> */
    unsigned seen;          /* pseudo-header fields received (bits) */
    bool line;              /* the request line (and Host) went into the parser */
    bool cl;                /* a content-length field */
    size_t crumbs;          /* cookie crumbs in <side> (from 0 once <line>) */
    int rc;                 /* the sticky result */
    bool checked;           /* h2h_checked(): the codec validated each field */
};

/* Starts the head of a new request in parser <p>, fresh (h1_req_reset()),
 * which is told the head is made (h1_req_made_head()), with
 * <side>[0..<cap>) aside (see above). */
void h2h_begin(struct h2h *h, struct h1_req_parser *p, char *side, size_t cap);

/* Tells <h> (after h2h_begin()) that the codec has validated every field
 * it passes as RFC 9113 8.2.1 and 8.3.1 require: names lower-case tokens,
 * values without NUL, CR, LF, other control bytes or surrounding SP/HTAB,
 * :method a token. nghttp2 does so for
 * a server session with its HTTP messaging on (the default): a field that
 * fails is never passed on (the stream is reset, or a regular field
 * ignored). Those checks are then skipped, here and in the parser; every
 * other rule stays. The answers are the same for such fields
 * (fuzz_h2head.c holds the two to each other). */
void h2h_checked(struct h2h *h);

/* The field <name>: <value> of the request's header list (as HPACK gave
 * it: names in lower case), into parser <p>. H2H_OK; H2H_MALFORMED or
 * H2H_ERROR (every later call returns it again and takes nothing). */
int h2h_field(struct h2h *h, struct h1_req_parser *p, const char *name, size_t nlen,
              const char *value, size_t vlen);

/* The header list is whole; <body>: DATA may follow (the HEADERS frame did
 * not end the stream). H2H_OK with p->req the request's head (the parser
 * returned H1_REQ_HEAD), or as h2h_field(). */
int h2h_end(struct h2h *h, struct h1_req_parser *p, bool body);

/* The other way, a response: its fields <lines>[0..<len>) ("Name:
 * value\r\n" each, as the gateway writes heads and trailers) as an HTTP/2
 * field list into <out> (its first <cap> entries): names lowered in place
 * (RFC 9113 8.2), values trimmed of SP/HTAB, connection-specific fields
 * dropped (8.2.2), and lines without a colon or with a CR or NUL in their
 * value (which no field of ours has) skipped. Every slice points into
 * <lines>. Returns how many fields there are, also when more than <cap>
 * (then only <cap> were stored: call again with room for all). */
size_t h2h_fields(char *lines, size_t len, struct h1_header *out, size_t cap);

#endif /* SY_ADMIN_HTTP1_H2HEAD_H */
