/*
 * conn.h - the client connection (conn.c): its one state, its timeouts, its
 * output, and the end of each request; plus the stack-assembled output
 * buffer every answer is written through.
 *
 * The data plane is a one-way stack of files:
 *   http1.c     the HTTP/1.1 codec: reads, parses, hands each request on
 *   h2.c h2_stream.c  the HTTP/2 codec (nghttp2): a connection's streams,
 *               each a request handed on the same way (h2.h)
 *   serve.c     the one request entry (gw_req_start): decide, then proxy or answer
 *   policy.c    the route's policies (policy_<type>.c): their request phase, run by
 *               serve.c, may answer through local.c, or wait on a subrequest and go
 *               on through the continuation serve.c gave; proxy.c, local.c and
 *               forward.c reach only the head phases (fields added or dropped)
 *   subreq.c    a policy's own request to a pool (forward_auth), on upconn.c
 *   proxy.c     streams a request upstream and its response back
 *   local.c     answers a request here (grpc.c: a gRPC call's status, pure)
 *   tunnel.c    bytes both ways after a 101
 *   try.c       the try machine: pick, slot, budget, queue, next server
 *   forward.c   where a request goes, and its upstream head (pure)
 *   hashkey.c   the key a hash-balanced pool hashes (pure)
 *   encoding.c  response compression: Accept-Encoding, the compressed head,
 *               the gzip, br and zstd encoders (pure; the compress policy's)
 *   upconn.c    upstream connections
 *   req.c       a request's own bookkeeping: id, log, counters, its end
 *   conn.c      the client connection object
 *   clientip.c  its client address, by client_ip (for log, forward, hash)
 *   log.c io.c  the access log; the transport
 * A file calls only files below it. Where a lower one must wake a higher
 * one, it calls through a callback the higher one registered: the io's
 * callbacks (set by http1.c, h2.c, proxy.c and tunnel.c), a request's
 * codec (struct gw_codec, req.h), a connection's protocol (struct
 * gw_conn_proto), the worker's conn_freed.
 */
#ifndef SY_GATEWAY_CONN_H
#define SY_GATEWAY_CONN_H

#include <arpa/inet.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "admin/clock.h"
#include "gateway/gateway.h"
#include "gateway/io.h"
#include "gateway/req.h"

/* Bodies stream with backpressure: when the far side's output passes
 * GW_HWM, reading the near side stops until that output drains to GW_LWM
 * (the write callback fires at the low watermark). Nothing is buffered
 * whole. */
#define GW_HWM (256 * 1024)
#define GW_LWM (64 * 1024)

/* A connection's timeouts. Timeouts kept as libevent events re-arm an event
 * on every read and write; ours are two stores, and the worker sweeps its
 * connections every GW_SWEEP_MS (gw_conn_sweep, gw_upconn_sweep). <rd>: the
 * read side may be idle that long; <wr>: queued output may make no progress
 * that long; <idle>: a tunnel's client connection may pass no byte either
 * way that long (timeouts.tunnel_idle_ms; the tunnel moves <last_rd> on
 * every byte it reads on either side and on every drained output), whether
 * reading is on or not. gw_tmo_set() turns <idle> off. */
struct gw_tmo {
    unsigned rd, wr, idle; /* ms, 0: none */
    long long last_rd, last_wr;
    size_t wr_len; /* queued output at the last sweep */
};

/* A client connection's state; only gw_conn_set_state() changes it. */
enum gw_conn_state {
    GW_CONN_PARKED,  /* accepted over limits.max_connections: not read until admitted */
    GW_CONN_IDLE,    /* between requests: no byte of the next head yet */
    GW_CONN_HEAD,    /* a request head is arriving */
    GW_CONN_LOCAL,   /* a local answer is queued; the request body is read away */
    GW_CONN_PROXY,   /* the request is upstream: body streaming up, response down */
    GW_CONN_TUNNEL,  /* after 101 Switching Protocols: bytes both ways until a close */
    GW_CONN_CLOSING, /* flushing the last response, then close */
    GW_CONN_LINGER,  /* the last response is out, our write side shut: what the
                      * client still sends is read and dropped, then close */
};

/* The lingering close (RFC 9112 9.6; nginx's lingering_close on, with its
 * lingering_timeout and lingering_time): a connection that closes while its
 * client may still be sending reads and drops that input until the
 * client's EOF, GW_LINGER_IDLE_MS without a byte, or timeouts.lingering_ms
 * in all. Closed with unread input, the socket would send a reset, which
 * can take the answer with it before the client read it. A request body
 * read away after an early answer (local.c) has the same total, as in
 * nginx. */
#define GW_LINGER_IDLE_MS 5000

/* A tunnel's sockets, both, probe a peer that went silent (TCP keepalive):
 * after GW_KEEPALIVE_IDLE_S without a byte, then every
 * GW_KEEPALIVE_INTVL_S, giving up after GW_KEEPALIVE_CNT unanswered probes.
 * A peer gone without a FIN or a reset (a host powered off, a NAT or
 * firewall that forgot the flow) is found within two minutes of its last
 * byte, long before timeouts.tunnel_idle_ms; and the probes keep such
 * middleboxes from forgetting a live but quiet tunnel. */
#define GW_KEEPALIVE_IDLE_S 60
#define GW_KEEPALIVE_INTVL_S 10
#define GW_KEEPALIVE_CNT 6

struct gw_upconn;
struct gw_log_later;
struct gw_conn;

/* A connection of another protocol than HTTP/1.x (HTTP/2: h2.c) keeps
 * its own state in c->pstate, and conn.c tells it of its end through
 * these. */
struct gw_conn_proto {
    /* The worker drains, or the listener went: take no new request, and
     * close once those under way are done (HTTP/2: GOAWAY). May free <c>. */
    void (*shutdown)(struct gw_conn *c);
    /* <c> is being freed: release the state (its requests cancelled). */
    void (*release)(struct gw_conn *c);
};

/* Where the server's WebSocket frames on a tunnel end, followed as the
 * bytes go by (tunnel.c), so that an upgrade's drain puts its close frame
 * between two frames: the payload bytes <left> of the current frame, or
 * the <hlen> bytes of a header begun; <going>: the drain's deadline came,
 * the close frame follows the current frame. */
struct gw_ws_track {
    uint64_t left;
    unsigned char hdr[14];
    unsigned char hlen;
    unsigned char going;
};

struct gw_conn {
    LIST_ENTRY(gw_conn) link;   /* the worker's conns */
    TAILQ_ENTRY(gw_conn) qlink; /* in the worker's admission queue <queue> */
    enum gw_conn_q queue;       /* only conn.c's queue_move() changes it */
    struct gw_worker *w;
    struct gw_io io;
    struct gw_listener *l;         /* accepted on it (it counts us) */
    const struct adm_listener *al; /* its definition in snapshot <al_gen>, NULL: none */
    uint64_t al_gen;
    struct sockaddr_storage peer;
    char peer_ip[INET6_ADDRSTRLEN];
    unsigned peer_port;
    enum gw_conn_state st;
    struct h1_req_parser rp;
    int eof;              /* the client half-closed */
    int linger;           /* at the close the client may still send: linger (conn.c) */
    long long linger_end; /* LINGER, or LOCAL reading a body away: closes then; 0: neither */

    int read_paused;   /* reading stopped: its output is full, or its request's body waits */
    struct gw_req req; /* the current request (HTTP/1: one at a time) */
    struct gw_tmo tmo;
    /* gw_now_ms() at its admission, 0 once its first head was whole:
     * client_header_ms counts from it for the first head, from their first
     * byte (t0) for the later ones */
    long long admitted_ms;
    const struct gw_conn_proto *proto; /* NULL: HTTP/1.x, its request in <req> */
    void *pstate;
    int tunnel_ws; /* its tunnel is a WebSocket's (an upgrade's drain says 1001 on it) */
    struct gw_ws_track ws;
};

/* ---- the output buffer ---- */

/* Output assembled on the stack and handed to the evbuffer in one add: each
 * evbuffer_add on a connection's output runs its callbacks (and may arm the
 * write event), so a head written field by field costs that many times. */
struct gw_obuf {
    struct evbuffer *out;
    struct gw_io *io; /* NULL: never write directly */
    size_t n, total;
    char b[3072];
};

static inline void gw_ob_init(struct gw_obuf *o, struct evbuffer *out)
{
    o->out = out;
    o->io = NULL;
    o->n = 0;
    o->total = 0;
}

/* Output for <io>: with nothing queued, bytes go straight to the
 * transport (gw_io_send), so a response that fits costs no write event. */
static inline void gw_ob_init_io(struct gw_obuf *o, struct gw_io *io)
{
    gw_ob_init(o, io->out);
    o->io = io;
}

static inline void gw_ob_flush(struct gw_obuf *o)
{
    if (!o->n)
        return;
    if (o->io)
        gw_io_send(o->io, o->b, o->n);
    else
        evbuffer_add(o->out, o->b, o->n);
    o->n = 0;
}

static inline void gw_ob_add(struct gw_obuf *o, const void *p, size_t n)
{
    o->total += n;
    if (o->n + n > sizeof(o->b)) {
        gw_ob_flush(o);
        if (n > sizeof(o->b)) {
            evbuffer_add(o->out, p, n);
            return;
        }
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

#define gw_ob_lit(o, s) gw_ob_add((o), (s), sizeof(s) - 1)

static inline void gw_ob_str(struct gw_obuf *o, const char *s)
{
    gw_ob_add(o, s, strlen(s));
}

static inline void gw_ob_slice(struct gw_obuf *o, const struct h1_slice *s)
{
    gw_ob_add(o, s->ptr, s->len);
}

static inline void gw_ob_u64(struct gw_obuf *o, uint64_t v)
{
    char d[24];
    size_t i = sizeof(d);

    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    gw_ob_add(o, d + i, sizeof(d) - i);
}

/* "Name: value\r\n" */
static inline void gw_ob_field(struct gw_obuf *o, const char *name, size_t nlen, const char *v,
                               size_t vlen)
{
    gw_ob_add(o, name, nlen);
    gw_ob_lit(o, ": ");
    gw_ob_add(o, v, vlen);
    gw_ob_lit(o, "\r\n");
}

/* ---- time ---- */

/* adm_clock_ms (admin/clock.h), the health words' clock, as the signed
 * milliseconds timeouts are measured in; slow start's now. */
static inline long long gw_now_ms(void)
{
    return (long long)adm_clock_ms();
}

/* Milliseconds since <t0> (CLOCK_MONOTONIC). */
static inline double gw_elapsed_ms(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

void gw_tmo_set(struct gw_tmo *t, unsigned rd_ms, unsigned wr_ms);
/* When a timeout of <t> has run out at <now>: that side of <io> stops and
 * its event callback gets GW_IO_TIMEOUT with GW_IO_READING or
 * GW_IO_WRITING, or GW_IO_TIMEOUT alone for <idle> (and may free the
 * connection). */
void gw_tmo_check(struct gw_tmo *t, struct gw_io *io, long long now);

/* The first contiguous run of <in>'s bytes in <v>; 0 when <in> is empty. */
int gw_peek_first(struct evbuffer *in, struct evbuffer_iovec *v);

/* ---- the client connection ---- */

/* A new connection on the accepted socket <fd> (owned from now on, closed
 * on failure, with <xprt>) on listener <l> from <sa>, read and written
 * through transport <ops> with its state <xprt> (the listener's:
 * gw_io_plain and NULL, or TLS), in state GW_CONN_PARKED when <parked>, else
 * GW_CONN_IDLE and reading; its io calls <on_read>, <on_write> and
 * <on_event> with it. NULL when out of memory (counted as dropped). */
struct gw_conn *gw_conn_new(struct gw_worker *w, struct gw_listener *l, evutil_socket_t fd,
                            const struct sockaddr *sa, int salen, int parked,
                            const struct gw_io_ops *ops, void *xprt, gw_io_cb on_read,
                            gw_io_cb on_write, gw_io_event_cb on_event);
/* Where listener <l> is in <cfg>: at the index it had in the config that
 * added it, else found by its address; cfg->nlisteners when the config
 * lost it (it is closing). */
size_t gw_conn_listener_index(const struct adm_config *cfg, const struct gw_listener *l);
/* The definition of <c>'s listener in snapshot <s> (a request's): the one with
 * its address (nearly always at the index it was added at), looked up once
 * per snapshot. NULL when the config lost it. */
const struct adm_listener *gw_conn_listener(struct gw_conn *c, const struct adm_snapshot *s);
/* Closes and frees <c>; its upstream connection must be detached first.
 * Then the worker's conn_freed callback runs (admission). */
void gw_conn_free(struct gw_conn *c);
/* Moves <c> to <st>, asserting that the move is one the state machine has;
 * its admission queue follows: it leaves the idle queue with the first
 * byte of its next head (or its close), and the pending one once a head is
 * whole. */
void gw_conn_set_state(struct gw_conn *c, enum gw_conn_state st);
/* GW_CONN_PARKED -> GW_CONN_IDLE, in the pending queue: reading starts,
 * its first head due within timeouts.client_header_ms. */
void gw_conn_admit(struct gw_conn *c);
/* <c>, between requests, joins the idle queue once nothing is buffered
 * either way: after its request ended, or its output drained. */
void gw_conn_idle_check(struct gw_conn *c);
/* <c>, part-way through a later request head, joins the pending queue once
 * nothing of its responses is left to send: after a partial head, or its
 * output drained. Its header deadline stays as it is. */
void gw_conn_pending_check(struct gw_conn *c);
/* Closes the oldest connection of <w>'s queue <q> (GW_CONN_Q_IDLE or
 * GW_CONN_Q_PENDING) to make room for a new one, and counts it; 0, or -1
 * when the queue is empty. From the loop only, never inside a connection's
 * callback: it frees another connection. */
int gw_conn_reclaim(struct gw_worker *w, enum gw_conn_q q);
/* The config of <c>'s request, or the current one between requests. */
const struct adm_config *gw_conn_cfg(const struct gw_conn *c);
/* Whether <c>'s current request is its last: the client or the response
 * does not keep the connection, the worker drains, or the listener it came
 * in on was removed from the config. */
static inline int gw_conn_last(const struct gw_conn *c)
{
    return !c->req.keep || c->w->draining || (c->l && c->l->closed);
}
/* The Connection field of a response to <c>'s client: close when the
 * connection ends after it, keep-alive for an HTTP/1.0 client that keeps it. */
void gw_conn_ob_connection(struct gw_obuf *o, const struct gw_conn *c);
/* TCP keepalive on the socket <fd> (GW_KEEPALIVE_*); best effort. */
void gw_conn_keepalive(evutil_socket_t fd);
/* No more requests: the connection closes once its output is flushed (by
 * the write callback, which GW_CONN_CLOSING tells to free it, or to call
 * gw_conn_linger() first when c->linger is set). c->linger is set when the
 * client may still send: a request head or body not wholly read, or input
 * already buffered, and its read side not ended. Only fields are looked at,
 * no system call: a close after a request read whole costs what it did. */
void gw_conn_close_when_flushed(struct gw_conn *c);
/* <c>'s output is flushed, it closes, and c->linger says its client may
 * still send: shuts the write side (a TLS connection sends close_notify,
 * then its FIN) and moves to GW_CONN_LINGER, reading on. 0; -1 when it
 * must close now instead (a drain, its listener removed, the shutdown
 * failed). Its upstream connection must be detached first. */
int gw_conn_linger(struct gw_conn *c);
/* GW_CONN_LINGER: drops what was read at <now>; 0, or -1 when
 * timeouts.lingering_ms have passed and <c> must close. */
int gw_conn_linger_read(struct gw_conn *c, long long now);
/* What the client still sends after its answer is read until c->linger_end:
 * sets the read timeout to <gap_ms> from <now>, but never past that end;
 * -1 when the end has come (<c> closes). */
int gw_conn_linger_gap(struct gw_conn *c, long long now, unsigned gap_ms);
/* HTTP/1's end of a request, after gw_req_done logged and counted it and
 * released its snapshot: either wait for the next request (GW_CONN_IDLE, reading on, buffered bytes
 * kicked to the read callback) or close once the output is flushed. */
void gw_conn_request_done(struct gw_conn *c);

/* Gives the connection's request parser a block of memory before its first
 * feed of a request (an idle connection has none: conn.c); -1: out of
 * memory. gw_conn_pmem_free() frees the blocks a worker keeps. */
int gw_conn_parser_mem(struct gw_conn *c);
void gw_conn_pmem_free(struct gw_worker *w);
/* A block of <size> bytes from <w>'s pool of parser blocks (an HTTP/2
 * stream's parser, h2head's side buffer), or malloc'd; NULL when out of
 * memory. gw_pmem_put() gives it back (NULL: nothing). */
void *gw_pmem_get(struct gw_worker *w, size_t size);
void gw_pmem_put(struct gw_worker *w, void *mem, size_t size);
/* The request parser's limits of a connection accepted under <cfg>. */
void gw_conn_limits(const struct adm_config *cfg, struct h1_req_limits *lim);

/* log.c: the access-log line of <c>'s request, which took <duration_ms>, into the
 * worker's buffer (JSON or combined, as its snapshot says). */
void gw_log_access(struct gw_req *r, double duration_ms);
/* log.c: keeps the line of <c>'s request for later in c->req.log_later, with
 * copies of what it takes from the snapshot (the format, the route's id,
 * the server's address); the request's own fields stay in <c>. Keeps
 * nothing when the access log is off. 0, or -1 when out of memory. */
int gw_log_access_later(struct gw_req *r);
/* log.c: writes the line gw_log_access_later() kept, with <c>'s fields as
 * they are now and <duration_ms>, unless the access log is off now; frees
 * it. A no-op when nothing is kept. */
void gw_log_access_kept(struct gw_req *r, double duration_ms);

#endif
