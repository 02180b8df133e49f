/*
 * h2_int.h - what the HTTP/2 codec's two files share: the connection
 * (h2.c: the nghttp2 session over the connection's io, its output, its
 * timeouts, the floods it counts, its GOAWAYs) and its streams
 * (h2_stream.c: each request's head, body and answer, the codec the
 * request layer writes through).
 *
 * nghttp2 does the framing, HPACK and flow control (nghttp2's
 * examples/libevent-server.c is the pattern): the read callback hands the
 * client's bytes to nghttp2_session_mem_recv(), whose callbacks build each
 * stream's request; nghttp2_session_send() writes frames into the
 * connection's output until it passes GW_HWM, and goes on when the output
 * drained. Response bodies wait in each stream's <out> for a data provider
 * that moves them into DATA frames without a copy (NGHTTP2_DATA_FLAG_NO_COPY)
 * and defers while <out> is empty. Request bodies wait in <in> until the
 * request layer takes them; only then does the window open again
 * (nghttp2_option_set_no_auto_window_update, nghttp2_session_consume()),
 * so a client can never make a stream hold more than the window it was
 * given.
 *
 * Output is sent from the connection's own callbacks only: a codec
 * operation the request layer calls (an upstream's bytes, an answer's end)
 * queues its frames and kicks the write callback (h2_want_send), so that
 * nghttp2 never closes a stream, nor the request layer sees its request
 * freed, in the middle of a request-layer call. A stream is freed when
 * nghttp2 closed it: its request first cancelled (gw_req_cancel) if it was
 * still under way.
 */
#ifndef SY_GATEWAY_H2_INT_H
#define SY_GATEWAY_H2_INT_H

#include <sys/queue.h>

#include <nghttp2/nghttp2.h>

#include "admin/http1/h2head.h"
#include "gateway/conn.h"
#include "gateway/h2.h"

struct gw_h2;

/* A worker's spare memory for HTTP/2 (gw_worker.h2cache): stream objects
 * (each with its params array and output buffer) and nghttp2's small
 * blocks (its allocator, h2.c), in free lists of at most GW_H2_SPARE
 * each: once a worker has served as many streams at once, a stream costs
 * no malloc (nginx and h2o pool their stream memory the same way). */
#define GW_H2_SPARE 128
#define GW_H2_CLASSES 6 /* blocks of 64, 128, 256, 512, 1024 and 2048 bytes */
/* The frames one nghttp2_session_send() writes are gathered here and go
 * to the connection's output in one add (h2_out_*): an evbuffer_add per
 * frame cost a chain, a callback and a drain each. */
#define GW_H2_GATHER (16 * 1024)
#define GW_H2_HEAD_NV 32      /* fields given apart a head; more go as lines */
#define GW_H2_HEAD_NAMES 1024 /* bytes of their names */
struct gw_h2_cache {
    struct gw_h2s *streams;
    unsigned nstreams;
    void *blocks[GW_H2_CLASSES];
    unsigned nblocks[GW_H2_CLASSES];
    size_t glen;
    char gather[GW_H2_GATHER];
    /* the response head being written (c_field): a worker writes one head
     * at a time, from head_begin to head_end */
    nghttp2_nv nv[GW_H2_HEAD_NV];
    size_t nnv, names_len;
    char names[GW_H2_HEAD_NAMES]; /* their names, in lower case */
};

/* A stream of a client's, from its HEADERS to its close. */
struct gw_h2s {
    TAILQ_ENTRY(gw_h2s) link;  /* the connection's streams */
    struct gw_h2s *next_spare; /* in the worker's cache, when spare */
    TAILQ_ENTRY(gw_h2s) rlink; /* in h->ready */
    TAILQ_ENTRY(gw_h2s) dlink; /* in h->drained */
    struct gw_h2 *h;
    int32_t id;
    unsigned char live;      /* its request started (gw_req_start) and is not done */
    unsigned char started;   /* gw_req_start ran */
    unsigned char in_ready;  /* in h->ready: body bytes or its end for the request */
    unsigned char in_drain;  /* in h->drained: its output fell to GW_LWM */
    unsigned char in_eof;    /* the client ended the stream (END_STREAM) */
    unsigned char out_eof;   /* the answer is whole in <out> (codec end) */
    unsigned char head_sent; /* a final response head was submitted */
    unsigned char provider;  /* with a body to come from <out> (its data provider) */
    unsigned char es_sent;   /* our END_STREAM went out */
    unsigned char deferred;  /* the data provider waits for <out> */
    unsigned char rd_paused; /* the request layer takes no body bytes now */
    unsigned char waiting;   /* the request layer waits for body bytes (client_body_ms) */
    unsigned char aborted;   /* we reset it (codec abort, a stall): not the client's doing */
    int status;              /* of the response head being written */
    struct evbuffer *in;     /* request body bytes not yet taken, NULL: none yet */
    struct evbuffer *out;    /* response body bytes not yet framed, NULL: none yet */
    char *trailers;          /* the answer's trailer lines, NULL: none */
    size_t trailers_len;
    char *rtr; /* the request's trailer lines, NULL: none */
    size_t rtr_len, rtr_cap;
    unsigned char rtr_over; /* they passed limits.max_header_bytes */
    uint64_t body_in;       /* request body bytes taken by the request layer */
    long long t_open;       /* gw_now_ms(): its HEADERS came */
    long long t_in;         /* its body was last waited for, or received */
    long long t_out;        /* its output last moved (or began) */
    struct h2h hb;          /* its head, while its header block is decoded */
    struct h1_req_parser rp;
    struct gw_req req;
};

TAILQ_HEAD(gw_h2s_list, gw_h2s);

/* An HTTP/2 client connection: c->pstate. */
struct gw_h2 {
    struct gw_conn *c;
    nghttp2_session *s;
    struct gw_h2s_list streams;
    unsigned nstreams;          /* streams held: open, or closing with a request under way */
    unsigned max_streams;       /* SETTINGS_MAX_CONCURRENT_STREAMS advertised */
    struct gw_h2s_list ready;   /* streams with body bytes or an end to pass on */
    struct gw_h2s_list drained; /* streams whose output fell to GW_LWM */
    struct h1_req_limits lim;   /* the streams' request parsers', from the accept */
    char *side;                 /* h2head's side buffer while streams are open */
    size_t side_size;           /* its size (a parser block's, at the accept) */
    struct evbuffer *heads;     /* a response head that outgrew its gw_obuf */
    struct gw_h2_cache *cache;  /* the worker's (c->w->h2cache) */
    struct event *kick;         /* runs the connection from the loop (h2_want_send) */
    long long sec;              /* the second <frames> counts in (gw_now_ms / 1000) */
    unsigned frames;            /* frames that cost us and do no work, this second */
    unsigned credit;            /* of which DATA sent this second excuses */
    unsigned bad;               /* streams reset before their answer was whole */
    int32_t max_id;             /* the highest stream id of a client HEADERS */
    int32_t reset_ids[8];       /* streams we reset last (their trailers may cross) */
    unsigned reset_n;
    unsigned answered;      /* requests done */
    long long armed;        /* when c->tmo fires for the earliest deadline; 0: none */
    long long idle_since;   /* no stream since then */
    long long goaway_at;    /* draining: the final GOAWAY then at the latest */
    unsigned char busy;     /* inside nghttp2: output waits for the end of it */
    unsigned char dirty;    /* output queued while busy */
    unsigned char kicked;   /* the write callback is due from the loop */
    unsigned char draining; /* 1: the first GOAWAY and a PING sent; 2: the last one */
    unsigned char closing;  /* no more frames read: close once the output is out */
};

/* h2.c */
/* Output was queued (frames, a resumed stream, a window opened): sent at
 * the end of the current callback, or from the loop (an event of the
 * connection's own: gw_io_kick_write's would be lost when output is added
 * before it runs, libevent not adding an active event) when the request
 * layer queued it. */
void h2_want_send(struct gw_h2 *h);
/* The earliest deadline of <h> may be <when> (gw_now_ms): its timeouts
 * run then at the latest. */
void h2_arm(struct gw_h2 *h, long long when);
/* Ends the connection: GOAWAY with <code>, nothing more read, closed once
 * the output is out. */
void h2_fail(struct gw_h2 *h, uint32_t code);
/* A drain, or the listener went (gw_conn_proto's shutdown): a first
 * GOAWAY with the largest stream id and a PING; the last one at the
 * PING's ACK (or GW_H2_GOAWAY_MS). No output is sent here. */
void h2_drain(struct gw_h2 *h);
/* <n> more frames that do no work are excused this second: DATA went
 * out, which window updates answer. */
void h2_credit(struct gw_h2 *h, unsigned n);
/* A stream was reset before its answer was whole, by the client (rapid
 * reset) or by us for something the client did (MadeYouReset): too many
 * end the connection (ENHANCE_YOUR_CALM). */
void h2_count_bad(struct gw_h2 *h);

/* <w>'s spare memory, made at its first HTTP/2 connection; NULL when out
 * of memory (then nothing is kept). */
struct gw_h2_cache *h2_cache(struct gw_worker *w);
/* Frame bytes for the connection's output, gathered while nghttp2 sends:
 * 0, or -1 when out of memory. h2_out_room() is what the gather buffer
 * still takes; h2_out_flush() moves it to the output. */
int h2_out(struct gw_h2 *h, const void *p, size_t n);
size_t h2_out_room(const struct gw_h2 *h);
int h2_out_flush(struct gw_h2 *h);
/* Bytes queued toward the client: the output's and the gathered ones. */
size_t h2_out_len(const struct gw_h2 *h);

/* h2_stream.c */
extern const struct gw_codec gw_h2_codec;
/* Frees the stream objects <k> keeps. */
void h2_streams_spare_free(struct gw_h2_cache *k);
int h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud);
int h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                 const uint8_t *value, size_t vlen, uint8_t flags, void *ud);
/* the streams' part of on_frame_recv: HEADERS and DATA */
int h2_stream_frame_recv(struct gw_h2 *h, const nghttp2_frame *f);
int h2_on_data_chunk_recv(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                          size_t len, void *ud);
int h2_on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud);
int h2_on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud);
int h2_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t len,
                 nghttp2_data_source *src, void *ud);
/* Passes body bytes and ends to the requests of h->ready, and drained
 * outputs to the requests of h->drained; from the connection's callbacks. */
void h2_streams_pass(struct gw_h2 *h);
/* The deadline of <st> (a header block, a body, an output stalled) as
 * gw_now_ms, or 0; at <now> past it, it was acted on (and -1 says the
 * connection must end). */
long long h2_stream_timeouts(struct gw_h2s *st, long long now, int *fail);
/* Frees every stream of <h>, their requests cancelled. */
void h2_streams_free(struct gw_h2 *h);

#endif
