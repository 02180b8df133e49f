/*
 * h2up.h - HTTP/2 to upstream servers: a pool whose protocol is "h2c"
 * (prior knowledge) or "h2" (TLS, ALPN h2) sends its requests as streams
 * of a few connections per worker and server (h2up.c), each request's
 * stream driven by proxy_h2.c.
 *
 * A connection (struct gw_h2up) is a libnghttp2 client session over the
 * transport seam (io.h), TLS included. Streams share it up to the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS (100 assumed until its
 * SETTINGS come); a new connection opens only when every one to the
 * server is full or going away, as Envoy and HAProxy multiplex. The
 * connections are per worker, like HTTP/1's idle stacks: no lock, no
 * cross-thread hand-over. One with no stream left is closed after the
 * pool's idle_timeout_ms (at once when its keepalive is 0).
 *
 * A request's stream (struct gw_h2us) belongs to its request until the
 * request lets go of it (gw_h2us_detach); the session keeps counting it
 * until nghttp2 closed it, so that a server's stream limit is never
 * passed by streams we reset but it has not seen end yet.
 *
 * Re-entry: nghttp2 must never be asked to send, nor a session freed,
 * inside its own callbacks. Everything a request does to a session
 * (submit, reset, resume) only queues, and gw_h2up_want_send() sends from
 * the session's own callbacks or, from outside, from a kick event of the
 * session's. A session that fails inside a callback is freed when the
 * outermost callback returns.
 */
#ifndef SY_GATEWAY_H2UP_H
#define SY_GATEWAY_H2UP_H

#include <sys/queue.h>

#include <nghttp2/nghttp2.h>

#include "gateway/conn.h"

struct gw_h2us;

/* An HTTP/2 connection to one server of a pool, on one worker. */
struct gw_h2up {
    LIST_ENTRY(gw_h2up) link; /* the worker's h2ups */
    struct gw_worker *w;
    struct gw_io io;
    up_pool *pool; /* retained */
    size_t server;
    SSL_CTX *tls; /* the pool's client context (its snapshot's), NULL: h2c */
    nghttp2_session *s;
    TAILQ_HEAD(gw_h2us_list, gw_h2us) streams; /* requests' streams on it */
    unsigned nst;                              /* streams nghttp2 still holds open for us */
    unsigned char open;                        /* connected (TLS: ALPN chose h2); frames flow */
    unsigned char goaway;    /* takes no new stream: a GOAWAY either way, or its pool left */
    unsigned char dead;      /* failed or closing: freed once <depth> is 0 */
    unsigned char kicked;    /* the kick event is active */
    unsigned char eof;       /* the server closed: streams left fail */
    unsigned depth;          /* inside its own callbacks */
    struct event *kick;      /* sends from the loop (gw_h2up_want_send) */
    long long connect_until; /* connecting: the connect timeout (gw_now_ms) */
    long long idle_until;    /* no stream: closed then (gw_now_ms), 0: busy */
    long long check_at;      /* no stream's timeout is due before then (gw_now_ms) */
    unsigned idle_ms;        /* the pool's idle_timeout_ms (0: close when idle) */
    uint32_t assumed;        /* streams it takes before the server's SETTINGS came */
    unsigned char settings;  /* the server's SETTINGS came */
};

/* A request's stream on a session. */
struct gw_h2us {
    TAILQ_ENTRY(gw_h2us) link; /* the session's streams */
    struct gw_h2up *h;
    struct gw_req *r; /* NULL once detached (the session still counts it) */
    int32_t id;       /* nghttp2's stream id; <= 0 before it has one */
    up_pool *pool;    /* the balancer's accounting (up_request_start/end) */
    size_t server;
    unsigned wid;              /* the worker's id */
    unsigned char lent;        /* up_request_start counted it */
    unsigned char room;        /* the provider took body bytes: the client's body is read on */
    unsigned char out_done;    /* our side of it ended (END_STREAM sent or queued) */
    unsigned char chunk;       /* its response goes to an HTTP/1.1 client chunked (proxy_h2.c) */
    unsigned char closed;      /* nghttp2 closed it: the session no longer counts it */
    unsigned char sent;        /* its HEADERS went out */
    unsigned char deferred;    /* the data provider waits for body bytes */
    unsigned char body_eof;    /* the request body is whole in <body> */
    unsigned char head;        /* the final response head came */
    unsigned char got;         /* any response frame came (got_bytes) */
    unsigned char ended;       /* the response ended (END_STREAM) */
    unsigned char refused;     /* never processed: REFUSED_STREAM, or above a GOAWAY's last id */
    unsigned char in_trailers; /* the response's fields now are trailers */
    unsigned char bad;         /* the response head or trailers broke a limit */
    uint32_t code;             /* the RST_STREAM / close error code */
    int status;                /* the final response status */
    struct evbuffer *body;     /* request body bytes not yet framed */
    char *rtr;                 /* the request's trailer lines, NULL: none */
    size_t rtr_len;
    char *f;                   /* response fields as "name: value\r\n" lines */
    size_t flen, fcap, ftrail; /* ...their length, room, where the trailers begin */
    size_t unconsumed;         /* DATA bytes passed on but not yet given back as window */
    long long until;           /* the response timeout (gw_now_ms) */
    long long deadline;        /* grpc-timeout's end (gw_now_ms), 0: none */
    char fin[512];             /* <f> while the fields fit: most heads cost no malloc */
};

/* Options and callbacks, once per process, before the workers start. */
void gw_h2up_init(void);
/* A session to <server> of <pool> with room for a stream, not going away;
 * NULL: none (open one with gw_h2up_connect). */
struct gw_h2up *gw_h2up_get(struct gw_worker *w, up_pool *pool, size_t server);
/* A new session to <server> of the snapshot's upstream <up>, connecting;
 * NULL with errno set. */
struct gw_h2up *gw_h2up_connect(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                size_t server);
/* A stream on <h> for request <r>, submitted with the head <nv>[0..<n>)
 * and a body when <body>; NULL when nghttp2 refused it. */
struct gw_h2us *gw_h2us_open(struct gw_h2up *h, struct gw_req *r, const nghttp2_nv *nv, size_t n,
                             int body);
/* The request lets go of <st>: reset (CANCEL) unless it ended cleanly, and
 * freed; the session counts it until nghttp2 closed it. */
void gw_h2us_detach(struct gw_h2us *st);
/* Body bytes (or its end) were added to st->body: its DATA goes on. */
void gw_h2us_resume(struct gw_h2us *st);
/* <n> DATA bytes of <st> were passed on: its window opens by as much. */
void gw_h2us_consume(struct gw_h2us *st, size_t n);
/* Trailer fields for the end of the request body, as lines; then the
 * stream ends with them (after body_eof). */
int gw_h2us_trailers(struct gw_h2us *st, const char *lines, size_t len);
/* <st>'s response timeout or grpc-timeout was set: the sweep looks at it
 * by then. */
void gw_h2us_due(struct gw_h2us *st);
/* Frames were queued on <h>: sent now inside its callbacks, else from the
 * loop. */
void gw_h2up_want_send(struct gw_h2up *h);

/* The worker's hooks: its pools changed (sessions of a pool that left go
 * away), every GW_SWEEP_MS (connect and response timeouts), once a second
 * (idle sessions closed), and its end. */
void gw_h2up_prune(struct gw_worker *w);
void gw_h2up_sweep(struct gw_worker *w);
void gw_h2up_sweep_idle(struct gw_worker *w);
void gw_h2up_free_all(struct gw_worker *w);

/* proxy_h2.c: what a session tells its streams' requests. */
/* The response head of <st> is whole (st->status, fields in st->f). */
void gw_ph2_head(struct gw_h2us *st, int end);
/* Response body bytes of <st>. */
void gw_ph2_data(struct gw_h2us *st, const uint8_t *p, size_t n);
/* The response of <st> ended (trailers, if any, in st->f from ftrail). */
void gw_ph2_end(struct gw_h2us *st);
/* <st> failed before its response ended: <what> GW_IO_* (the session
 * failed, timed out, or closed), or 0 with st->code (reset). */
void gw_ph2_fail(struct gw_h2us *st, short what);
/* The data provider took body bytes from <st>: the client's body may be
 * read again. */
void gw_ph2_body_room(struct gw_h2us *st);

#endif
