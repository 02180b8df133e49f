/*
 * admin/http1/request.h - the client-side HTTP/1.1 request parser.
 *
 * One h1_req_parser lives in each downstream connection and parses the
 * requests that arrive on it, one after the other. It is pure: no I/O, no
 * libevent, no logging; the connection code hands it bytes and acts on what it
 * returns. All memory is allocated once, by h1_req_parser_init(); parsing a
 * request allocates nothing.
 *
 * Two phases per request:
 *
 *   head  h1_req_feed_head() copies bytes into the parser's head buffer until
 *         the empty line that ends the header section. It returns H1_REQ_HEAD
 *         with p->req filled in and says how many of the given bytes belonged
 *         to the head; the rest are body (or the next pipelined request).
 *   body  h1_req_feed_body() decodes the body (Content-Length or chunked) and
 *         hands the decoded bytes to a callback, until H1_REQ_DONE, which says
 *         where the next request starts. Then h1_req_reset() and head again.
 *
 * On H1_REQ_ERROR, p->status holds the status to answer with (400, 413, 414,
 * 417, 431, 501 or 505) and p->reason a short static text; the connection
 * should send that response and close. Errors are sticky until reset.
 *
 * How it is built: llhttp (Debian's 8.1, compiled without its strict mode and
 * lenient in ways a proxy cannot afford: it accepts obs-fold, a space before
 * the colon, control characters in values, a missing CRLF after chunk data,
 * HTTP/0.9 and '#' in targets) does the parsing and the body decoding, and a
 * strict validator of ours runs over the same bytes first and rejects
 * everything that RFC 9112/9110 (and nginx/HAProxy/Envoy) reject. llhttp only
 * ever sees bytes that the validator has accepted, and the two must agree on
 * every framing decision (method, version, body length, message end) or the
 * request is refused with 400: a disagreement between two parsers is exactly
 * what request smuggling is made of. A head with a body is cross-checked
 * when it ends (llhttp then decodes the body). A head without one (or with
 * Content-Length: 0) is cross-checked by h1_req_confirm(), which the caller
 * runs before the
 * request goes upstream: a request answered locally (404, 405, a redirect)
 * needs only the validator, and no byte of it reaches an upstream either
 * way.
 *
 * Behaviour decisions (RFC 9112 unless said otherwise):
 *
 * - Line endings in the head: CRLF, or a bare LF as nginx and HAProxy accept
 *   (RFC 9112 2.2 allows a recipient to take LF as the terminator). The head
 *   buffer always holds CRLF (a CR is inserted for a bare LF), so p->req.head
 *   and every slice in it look as if the client had sent CRLF. A CR not
 *   followed by LF is 400. Inside chunked framing (size lines, the CRLF after
 *   chunk data, trailers) only CRLF is accepted: bare LF there is 400.
 * - Empty lines (CRLF or LF) before the request line are skipped (2.2).
 * - Request line: method SP request-target SP HTTP-version, single spaces,
 *   no other whitespace, bytes 0x21-0x7E only in the target (no '#', no
 *   obs-text: non-ASCII must be percent-encoded).
 * - Versions: "HTTP/" DIGIT "." DIGIT, case-sensitive. 1.0 and 1.1 are
 *   accepted. A well-formed version with major != 1 (HTTP/0.9, HTTP/2.0,
 *   HTTP/3.0) is 505, and so is HTTP/1.2-9 because llhttp rejects minors
 *   above 1 and we never let it be lenient. No version at all (HTTP/0.9
 *   simple request) or a malformed version is 400.
 * - Methods: any method llhttp knows for HTTP/1.x (its HTTP_METHOD_MAP: GET,
 *   HEAD, POST, ..., M-SEARCH, SOURCE) is accepted. A syntactically valid
 *   token that llhttp does not know (e.g. "FOO", lower-case "get", PRI, RTSP
 *   methods) is 501, as RFC 9110 9.1 asks; a non-token is 400.
 * - Targets: origin-form; absolute-form with scheme http or https (its
 *   authority becomes req.host, overriding Host, 3.2.2); asterisk-form "*"
 *   only with OPTIONS (path "*"); authority-form "host:port" only with
 *   CONNECT (path "", keep_alive off, no body allowed; the caller refuses
 *   CONNECT). Anything else, a fragment, or userinfo is 400.
 * - Host: required for HTTP/1.1 and at most one; value must be
 *   reg-name / IPv4 / "[" IPv6 "]" with an optional port of 1-5 digits
 *   <= 65535. Empty Host, userinfo, '/', spaces, a zone id, IPvFuture and
 *   ".." (as nginx) are 400.
 * - Header fields: name is 1*tchar immediately followed by ':'; value is
 *   trimmed of SP/HTAB and may hold VCHAR, obs-text, SP and HTAB only. Lines
 *   starting with SP/HTAB (obs-fold) are 400.
 * - Framing: exactly one Content-Length of 1*DIGIT (<= 2^63-1); any
 *   repetition, even of an equal value, and lists like "1, 1" are 400.
 *   Transfer-Encoding must be exactly "chunked" (case-insensitive, one
 *   element): a final chunked that follows other codings ("gzip, chunked") is
 *   501 (a coding we do not implement, RFC 9112 6.1); anything else - chunked
 *   not last, repeated, with parameters, empty elements, HTTP/1.0 - is 400.
 *   Both Content-Length and Transfer-Encoding is 400.
 * - Expect: only "100-continue" (case-insensitive); anything else is 417.
 *   An HTTP/1.0 100-continue is ignored (RFC 9110 10.1.1).
 * - Connection: a list of tokens (empty elements skipped); every token is
 *   reported in req.connection so the proxy can drop the fields they name.
 *   At most H1_REQ_MAX_CONN_TOKENS tokens, else 400.
 * - Limits: request line longer than max_request_line (excluding CRLF) is
 *   414 as soon as the byte past the limit arrives; the header section (every
 *   field line plus its CRLF, plus the final CRLF) longer than
 *   max_header_bytes, or more than max_headers fields, is 431. Trailers are
 *   held to the same two limits. Content-Length above max_body_bytes is 413
 *   at head time; a chunked body is 413 as soon as the chunk size that takes
 *   the total above max_body_bytes has been read.
 * - Chunked: chunk-size is 1*HEXDIG (< 2^63); extensions are
 *   ';' token [ '=' ( token / quoted-string ) ] with no whitespace and no
 *   quoted-pair (llhttp has none); an extension with a token value must be
 *   the last one on its line (llhttp 8.1 misparses ";a=b;c", so we refuse
 *   it rather than disagree); a size line (CRLF included) longer than 4096
 *   bytes is 400.
 *   Trailer fields are validated like header fields (by us alone: llhttp
 *   would give trailer fields named Content-Length or Connection header
 *   semantics) and then dropped.
 */
#ifndef SY_ADMIN_HTTP1_REQUEST_H
#define SY_ADMIN_HTTP1_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "admin/http1/path.h"
#include "admin/http1/token.h"

/* What h1_req_feed_head() and h1_req_feed_body() return. */
enum h1_req_result {
    H1_REQ_ERROR = -1, /* p->status and p->reason say why */
    H1_REQ_AGAIN = 0,  /* every byte taken; feed more */
    H1_REQ_HEAD = 1,   /* head complete, p->req is valid */
    H1_REQ_DONE = 2,   /* message (body included) complete */
};

/* Most Connection tokens one request may carry. */
#define H1_REQ_MAX_CONN_TOKENS 32

/*
 * Per-listener limits. A zero in max_request_line, max_header_bytes or
 * max_headers means "the default"; max_body_bytes 0 means unlimited.
 */
struct h1_req_limits {
    size_t max_request_line; /* default 8192; over it: 414 */
    size_t max_header_bytes; /* default 32768; over it: 431 */
    size_t max_headers;      /* default 100; over it: 431 */
    uint64_t max_body_bytes; /* default 0 (unlimited); over it: 413 */
    bool merge_slashes;      /* default true: "/a//b" routes as "/a/b" */
};

enum h1_body_kind {
    H1_BODY_NONE,    /* no body: the message ends with the head */
    H1_BODY_LENGTH,  /* Content-Length: req.content_length bytes (may be 0) */
    H1_BODY_CHUNKED, /* Transfer-Encoding: chunked */
};

enum h1_target_form {
    H1_TARGET_ORIGIN,    /* /path?query */
    H1_TARGET_ABSOLUTE,  /* http://host:port/path?query */
    H1_TARGET_AUTHORITY, /* host:port, CONNECT only */
    H1_TARGET_ASTERISK,  /* *, OPTIONS only */
};

/*
 * A parsed request head. Every slice points into the parser's head buffer
 * and every pointer into the parser's own memory: all stay valid until
 * h1_req_reset() or h1_req_parser_free().
 */
/* method_id of a method token llhttp does not know ("PURGEALL", "get") */
#define H1_METHOD_OTHER ((llhttp_method_t)255)

struct h1_request {
    struct h1_slice method;    /* the token as sent */
    llhttp_method_t method_id; /* H1_METHOD_OTHER: see method */
    unsigned version_major;    /* always 1 */
    unsigned version_minor;    /* 0 or 1 */

    enum h1_target_form form;
    struct h1_slice target; /* raw request-target */
    /* Normalized path (see h1_path_normalize(), path.h), NUL-terminated. Starts with
     * '/' except for asterisk-form ("*") and authority-form (""). */
    const char *path;
    size_t path_len;
    /* H1_PATH_* flags (path.h): what the path holds that a backend may read
     * differently from the router; h1_req_route_path() acts on them */
    unsigned path_found;
    struct h1_slice query; /* after '?', unchanged; ptr NULL when no '?' */

    /* The authority the request is for: the absolute-form or authority-form
     * target's authority, else the Host field; ptr NULL when neither (only
     * possible for HTTP/1.0). host_name is host without the port (brackets
     * kept for IPv6); port is 0 when none was given. */
    struct h1_slice host;
    struct h1_slice host_name;
    unsigned port;

    const struct h1_header *headers; /* in arrival order */
    size_t nheaders;
    const struct h1_slice *connection; /* tokens named in Connection */
    size_t nconnection;

    bool keep_alive;      /* the connection may carry another request */
    bool expect_continue; /* HTTP/1.1 Expect: 100-continue */
    bool upgrade;         /* HTTP/1.1, Connection: upgrade and an Upgrade field */
    bool grpc;            /* a Content-Type of gRPC's (h1_content_type_is_grpc) */

    enum h1_body_kind body_kind;
    uint64_t content_length; /* H1_BODY_LENGTH only */

    struct h1_slice head; /* the whole head as buffered (CRLF line ends) */
};

/* Receives decoded body bytes; returns 0, or -1 to stop (the feed then fails
 * with status 500). <data> is only valid during the call. */
typedef int (*h1_req_body_cb)(void *ctx, const char *data, size_t len);

/*
 * The parser. Embed it in the connection; the public part is req, status and
 * reason. Everything from `lim` on is private to request.c.
 */
struct h1_req_parser {
    struct h1_request req; /* valid after H1_REQ_HEAD until reset */
    int status;            /* after H1_REQ_ERROR: the HTTP status to send */
    const char *reason;    /* after H1_REQ_ERROR: static text, never NULL */

    /* private */
    struct h1_req_limits lim;
    llhttp_t http;
    void *mem; /* the one allocation everything below points into */
    size_t mem_size;
    char *head;
    size_t head_cap, head_len;
    char *path;
    size_t path_cap;
    struct h1_slice raw_path; /* the target's path as sent, for h1_req_route_path() */
    struct h1_header *hdrs;
    struct h1_slice *conn;
    int phase, hs, cs;
    size_t line_off;      /* head offset of the field line being read */
    size_t rl_len;        /* request-line bytes so far */
    size_t hdr_bytes;     /* header-section bytes so far */
    bool in_method;       /* request line: no SP seen yet */
    bool confirm_pending; /* a body-less head not yet cross-checked by llhttp */
    bool made;            /* the head is the caller's, not a client's bytes */
    uint64_t body_left;   /* CL bytes or current chunk bytes still to come */
    uint64_t body_total;  /* chunked: sum of chunk sizes so far */
    uint64_t chunk_size;
    size_t cline; /* bytes of the current chunk-size line */
    size_t tr_bytes, tr_count;
    h1_req_body_cb cb;
    void *cb_ctx;
    uint64_t cb_bytes; /* bytes llhttp delivered in the current feed */
    bool cb_failed, msg_complete, head_paused;
};

/* Fills <lim> with the defaults listed in struct h1_req_limits. */
void h1_req_limits_default(struct h1_req_limits *lim);

/* Whether the Content-Type value <v> (<n> bytes, OWS trimmed) names gRPC:
 * "application/grpc" alone, or followed by '+' and a message encoding
 * ("+proto") or ';' and parameters (gRPC's PROTOCOL-HTTP2), in any case
 * as media types are compared (RFC 9110 8.3.1). grpc-web's
 * "application/grpc-web" is not: it is answered as any other request. */
bool h1_content_type_is_grpc(const char *v, size_t n);

/*
 * Prepares <p> for the first request with limits <lim> (copied; NULL for the
 * defaults) and allocates its buffers. Returns 0, or -1 if out of memory or a
 * limit is absurd (request line > 1 MiB, header bytes > 16 MiB, headers >
 * 65536). On -1 every feed fails with status 500, and h1_req_parser_free(p)
 * is still safe.
 */
int h1_req_parser_init(struct h1_req_parser *p, const struct h1_req_limits *lim);

/*
 * As h1_req_parser_init(), without the block: the parser is sized for <lim>
 * (h1_req_mem_size()) but holds no memory, and must be given a block
 * (h1_req_give_mem()) and reset (h1_req_reset()) before its first feed. For
 * parsers whose blocks come from a pool (an HTTP/2 stream's). 0, or -1 for
 * absurd limits.
 */
int h1_req_parser_setup(struct h1_req_parser *p, const struct h1_req_limits *lim);

/* Forgets the current request (its slices die) and expects a new one. */
void h1_req_reset(struct h1_req_parser *p);

/* Releases <p>'s buffers. NULL and a parser whose init failed are fine. */
void h1_req_parser_free(struct h1_req_parser *p);

/*
 * The parser's one block of memory (h1_req_mem_size() bytes, from malloc),
 * taken away between requests (after h1_req_reset(), before any feed) so that
 * an idle connection holds none of it, and given back, or another block of
 * the same size, before the next feed. A parser without its block must not
 * be fed; h1_req_parser_free() on it frees nothing.
 */
void *h1_req_take_mem(struct h1_req_parser *p);
void h1_req_give_mem(struct h1_req_parser *p, void *mem);
static inline size_t h1_req_mem_size(const struct h1_req_parser *p)
{
    return p->mem_size;
}

/*
 * Head phase. Takes up to <len> bytes of <data>; sets *consumed to how many
 * it took. H1_REQ_AGAIN: all taken, head incomplete. H1_REQ_HEAD: head
 * complete, data[*consumed..len) is not the head's (body or next request).
 * H1_REQ_ERROR: see p->status; *consumed is where parsing stopped.
 */
int h1_req_feed_head(struct h1_req_parser *p, const char *data, size_t len, size_t *consumed);
/*
 * The same head phase for a caller that has the head in lines already (an
 * HTTP/2 request, h2head.c): h1_req_put_line() takes the pieces
 * <v>[0..<n>) of one line, which hold no CR or LF, as h1_req_feed_head()
 * takes them followed by CRLF, and h1_req_put_end() the empty line that
 * ends the head; the same head, limits, errors and reasons, without the
 * byte-at-a-time state machine. H1_REQ_AGAIN, H1_REQ_HEAD (put_end, or an
 * empty line after the request line) or H1_REQ_ERROR.
 */
int h1_req_put_line(struct h1_req_parser *p, const struct h1_slice *v, size_t n);
/* h1_req_put_line() of a line whose bytes are known to be ones a field
 * line may hold when it is one ("name: value" with a token name and a value
 * of VCHAR, obs-text, SP and HTAB: the fields of an HTTP/2 header list
 * nghttp2 has validated): a field line's bytes are then only measured; the
 * request line is checked as ever. For such lines it answers exactly as
 * h1_req_put_line() (fuzz_h2head.c holds the two to each other). */
int h1_req_put_checked_line(struct h1_req_parser *p, const struct h1_slice *v, size_t n);
int h1_req_put_end(struct h1_req_parser *p);
/* The llhttp cross-check of a body-less head (see above): 0, or H1_REQ_ERROR
 * with p->status 400. Runs once; 0 at once for a head checked already. */
int h1_req_confirm(struct h1_req_parser *p);

/*
 * The head about to be fed (after h1_req_reset()) is no client's bytes but
 * made by the caller from fields already checked, an HTTP/2 request's
 * (h2head.h): our validator still parses and limits it, but llhttp does not
 * cross-check it, there being no second reading of client bytes to
 * disagree with (h1_req_confirm() returns 0), and its body is never fed
 * here (the caller has it decoded).
 */
void h1_req_made_head(struct h1_req_parser *p);

/*
 * Applies router.escaped_slashes <mode> to the path of the request head just
 * parsed (h1_path_route(), path.h): under H1_SLASHES_DECODE a path with an
 * escaped slash is normalized again, decoded, into req.path (req.path_found
 * then says what the decoded path held). Returns 0, or -1 for a path <mode>
 * refuses (to be answered with 400). Nothing to do, and 0, for a path with
 * req.path_found 0.
 */
int h1_req_route_path(struct h1_req_parser *p, enum h1_escaped_slashes mode);

/*
 * Body phase, after H1_REQ_HEAD. Decodes up to <len> bytes of <data>, calling
 * <cb>(<ctx>, ...) with decoded body bytes (none of the chunked framing).
 * H1_REQ_AGAIN: all taken, body incomplete. H1_REQ_DONE: message complete,
 * data[*consumed..len) starts the next request (call h1_req_reset() first);
 * a request without body is DONE at once with *consumed 0. H1_REQ_ERROR: 400
 * for bad chunked framing, 413 over max_body_bytes, 431 for oversized
 * trailers, 500 if <cb> failed.
 */
int h1_req_feed_body(struct h1_req_parser *p, const char *data, size_t len, size_t *consumed,
                     h1_req_body_cb cb, void *ctx);

/* The first header named <name> (case-insensitive), or NULL. */
const struct h1_header *h1_request_header(const struct h1_request *req, const char *name);

/*
 * The Max-Forwards of an OPTIONS or TRACE request (RFC 9110 7.6.2; other
 * methods ignore the field), or -1: another method, no such field, or none
 * usable (repeated, empty, or not 1*DIGIT). Digits past 10^9 are ignored:
 * the value only ever counts down.
 */
int64_t h1_max_forwards(const struct h1_request *req);

#endif /* SY_ADMIN_HTTP1_REQUEST_H */
