/*
 * admin/http1/response.h - the upstream side's HTTP/1.1 response parser:
 * the status line and fields of a response head into an array the caller
 * embeds, then the body decoded (Content-Length, chunked, or up to the
 * close) through a callback. Pure: no I/O, no libevent, no logging, no
 * allocation; the caller hands it bytes and acts on what it returns.
 *
 * llhttp (Debian's 8.1, not strict) parses, and what it lets through but a
 * client must never see is refused here (RFC 9112; nginx's rules for
 * upstream responses):
 * - a status line other than "HTTP/1.0" or "HTTP/1.1", SP, three digits
 *   (first 1-9), then SP or the line end ("HTTP/1.1 20 OK", "HTTP/1.1 0200"
 *   and "HTTP/2.0 200" are invalid);
 * - a field name that is not a token ("Name :" and ": v" pass llhttp);
 * - obs-fold (a value that is not one run of bytes, RFC 9112 5.2);
 * - more than H1_RESP_MAX_HEADERS fields (too_many says so);
 * - Transfer-Encoding other than one field saying exactly "chunked": the
 *   client must frame the body as llhttp did, and "chunked, chunked" or
 *   "gzip, chunked" leave room for doubt;
 * - Transfer-Encoding with Content-Length, and Content-Lengths that differ
 *   (llhttp refuses these itself, outside its lenient flags; the unit test
 *   holds it to that).
 *
 * Use, per response: h1_resp_parse_head() over the buffered bytes until it
 * returns 1 (again after each 1xx interim head: it starts over every time),
 * then h1_resp_begin_body() once, then h1_resp_feed_body() until msg_done;
 * at the upstream's close, h1_resp_needs_eof() says whether that ended the
 * body or cut it.
 *
 * A chunked body's trailer fields (names checked as the head's) are kept,
 * as "Name: value\r\n" lines, in a buffer of H1_RESP_TRAILERS_MAX bytes
 * (h1_resp_trailers()) for a client the body is decoded for (HTTP/2):
 * whole fields that do not fit are dropped (trailers_dropped).
 */
#ifndef SY_ADMIN_HTTP1_RESPONSE_H
#define SY_ADMIN_HTTP1_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "admin/http1/token.h"

/* Most fields one response head may carry. */
#define H1_RESP_MAX_HEADERS 256
/* Most bytes of trailer lines kept. */
#define H1_RESP_TRAILERS_MAX 4096

/* Receives decoded body bytes; <data> is only valid during the call. */
typedef void (*h1_resp_body_cb)(void *ctx, const char *data, size_t len);

/*
 * The parser. Embed it in the upstream connection; the public part is
 * status to msg_done. The slices point into the bytes given to
 * h1_resp_parse_head(), which must stay put while they are used.
 */
struct h1_resp {
    int status;                                /* after a head: 100-999 */
    struct h1_slice status_text;               /* the reason phrase as sent; ptr NULL if none */
    struct h1_header hdr[H1_RESP_MAX_HEADERS]; /* in arrival order; values untrimmed */
    size_t nhdr;
    bool too_many;         /* the last head failed for having too many fields */
    bool msg_done;         /* the body (the whole message) has ended */
    bool trailers_dropped; /* trailer fields past H1_RESP_TRAILERS_MAX were dropped */

    /* private */
    llhttp_t hp;
    bool in_value;
    bool in_body;   /* fields now are trailers */
    size_t tr_len;  /* of tr, the lines so far */
    size_t tr_mark; /* where the field being read began, in tr */
    bool tr_open;   /* a trailer field is being read */
    bool tr_over;   /* it does not fit: dropped */
    char tr[H1_RESP_TRAILERS_MAX];
    h1_resp_body_cb cb;
    void *cb_ctx;
};

/* Sets <r> up before its first head without touching its field and
 * trailer arrays (kilobytes that are read only up to what a head fills):
 * the state of a parser that has read nothing. */
void h1_resp_init(struct h1_resp *r);

/*
 * Parses a response head from the start of <data>[0..<len>), where <len> is
 * what is buffered, at most <max> bytes (the head limit). 1: complete, with
 * *head_len bytes of head, the rest belongs to the body; 0: incomplete, feed
 * more (only while <len> < <max>); -1: invalid or over <max>.
 */
int h1_resp_parse_head(struct h1_resp *r, const char *data, size_t len, size_t max,
                       size_t *head_len);

/* After a complete head: may the connection carry another response? */
bool h1_resp_keep_alive(const struct h1_resp *r);
/* After a complete head: is the body chunked? */
bool h1_resp_chunked(const struct h1_resp *r);
/* Does the body end only with the connection (no length, not chunked)? */
bool h1_resp_needs_eof(const struct h1_resp *r);

/* Starts the body phase of a final (non-1xx) head. A body of
 * Content-Length: 0 is complete at once: msg_done is then set. */
void h1_resp_begin_body(struct h1_resp *r);

/*
 * Body phase. Decodes up to <len> bytes of <data>, calling <cb>(<ctx>, ...)
 * with the decoded body bytes (none of the chunked framing; <cb> may be NULL
 * when the caller forwards the raw bytes itself). *used gets how many bytes
 * belonged to this response. 0: all taken, or the message ended (msg_done;
 * data[*used..len) is not this response's); -1: invalid body framing
 * (h1_resp_error() names it).
 */
int h1_resp_feed_body(struct h1_resp *r, const char *data, size_t len, size_t *used,
                      h1_resp_body_cb cb, void *ctx);

/* The trailer fields of the body, once msg_done, as "Name: value\r\n"
 * lines (len 0: none). Valid until the next h1_resp_parse_head(). */
struct h1_slice h1_resp_trailers(const struct h1_resp *r);

/* llhttp's name for the last error ("HPE_INVALID_CHUNK_SIZE"). */
const char *h1_resp_error(const struct h1_resp *r);

#endif /* SY_ADMIN_HTTP1_RESPONSE_H */
