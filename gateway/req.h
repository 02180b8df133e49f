/*
 * req.h - a request, apart from the connection it came on (req.c), and the
 * codec that reads its body and writes its answer.
 *
 * An HTTP/1 connection embeds one request (struct gw_conn's req: one at a
 * time, no allocation); an HTTP/2 stream owns one each. Everything below
 * the codec (routing, proxying, local answers, the try machine, the access
 * log, the client address) works on a struct gw_req and reaches the client
 * only through its codec's operations, so it does not know which protocol
 * the request came in on (h2o's h2o_req_t, nginx's ngx_http_request_t).
 */
#ifndef SY_GATEWAY_REQ_H
#define SY_GATEWAY_REQ_H

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "admin/http1/request.h"
#include "upstream/upstream.h"

struct gw_conn;
struct gw_obuf;
struct gw_upconn;
struct gw_h2us;
struct gw_plim;
struct gw_log_later;
struct adm_snapshot;
struct adm_sroute;
struct rt_param;
struct evbuffer;
struct gw_encoder;

/* Whether the request's client address is derived yet (clientip.c). */
enum gw_cip_state {
    GW_CIP_UNKNOWN = 0, /* not asked yet this request */
    GW_CIP_PEER,        /* it is the peer's */
    GW_CIP_DERIVED,     /* it is r->cip, from the request's fields */
};

/* Where a request is: the codec may follow it (HTTP/1's connection state). */
enum gw_req_phase {
    GW_REQ_HEAD = 0, /* its head is being read or decided on */
    GW_REQ_WAIT,     /* a policy waits on a subrequest: its body is not read */
    GW_REQ_PROXY,    /* it went upstream */
    GW_REQ_LOCAL,    /* answered here; its body is read away */
};

/* What a codec's body_feed did. */
enum { GW_FEED_FAILED = -1, GW_FEED_WAIT, GW_FEED_MORE, GW_FEED_DONE };

/* head_end's flags */
#define GW_HEAD_INTERIM 1u  /* a 1xx other than 101: a final head follows */
#define GW_HEAD_NOBODY 2u   /* no body follows: the answer ends with its head */
#define GW_HEAD_UPGRADE 4u  /* a 101 that turns the connection into a tunnel (HTTP/1) */
#define GW_HEAD_CONTINUE 8u /* with GW_HEAD_INTERIM: our own 100 Continue */

struct gw_req {
    struct gw_conn *c;            /* the client connection it came on */
    const struct gw_codec *codec; /* writes its answer, reads its body */
    void *stream;                 /* the codec's own state for it; HTTP/1: NULL */
    struct h1_req_parser *rp;     /* its head (HTTP/1: the connection's parser) */
    enum gw_req_phase phase;      /* only gw_req_phase() changes it */
    struct adm_snapshot *snap;    /* pinned from its head to its end */
    const struct adm_sroute *sr;  /* its route, NULL: none */
    struct rt_param *params;      /* the route's parameters */
    size_t params_cap, nparams;
    struct gw_upconn *up; /* the try's upstream connection */
    struct gw_h2us *ups;  /* the try's HTTP/2 stream (an h2c or h2 pool), NULL: none */
    /* An HTTP/2 pool's streamed body: its first GW_REPLAY_MAX bytes kept,
     * so that a try the server never processed (REFUSED_STREAM, above a
     * GOAWAY's last stream) or a retried gRPC status can be sent again,
     * as Envoy keeps a request for its retries; replay_over: the body
     * passed that, and no copy is kept. */
    struct evbuffer *replay;
    unsigned char replay_over;
    unsigned char refused; /* tries an HTTP/2 server never processed (proxy_h2.c) */
    int body_done, resp_started, keep, is_head, http10, retried;
    int body_paused; /* reading its body stopped: the upstream's output is full, or connecting */
    int body_fed;    /* the streamed body began to go to an upstream: a retry cannot resend it */
    int continued;   /* we sent 100 Continue: the client sends its body, which is read whole */
    int interim;     /* 1xx responses passed on so far (proxy.c: GW_UP_INTERIM_MAX) */
    unsigned tries;  /* retries on other servers so far (upstreams.NAME.retries) */
    struct up_tried tried; /* the servers those failed on */
    /* the pool's limits (limits.h), NULL: it has none. All zero between
     * requests: try.c clears them when a proxied request ends. */
    struct gw_plim *plim;
    size_t slot;          /* 1 + the server whose slot this try holds; 0: none */
    unsigned char budget; /* this try counts in the retry budget: 1 a first try, 2 a retry */
    unsigned char next_retry, queued; /* the next try is an admitted retry; waiting for a slot */
    uint64_t queue_deadline;          /* set when it first queued: requeues keep it; 0: never */
    struct evbuffer *body;            /* request_buffering: the whole body, NULL: it streams */
    unsigned char retry_refused;      /* the retry budget refused a retry (a gRPC client hears
                                       * RESOURCE_EXHAUSTED rather than the failure's status) */
    /* 1 + the grpc-status the client got, from us or in the upstream's
     * response head or trailers (grpc.h); 0: none known, or not gRPC. The
     * access log and /metrics read it; reset when the request is counted. */
    unsigned char grpc_status;
    int status;
    uint64_t bytes_in, bytes_out;
    uint64_t head_out; /* of bytes_out, the response heads' (the access log's body bytes) */
    struct timespec t0;
    char reqid[64];
    size_t reqid_len;
    enum gw_cip_state cip_state; /* reset with each request head (clientip.c) */
    struct sockaddr_storage cip_addr;
    char cip[INET6_ADDRSTRLEN]; /* GW_CIP_DERIVED: the client_ip address */
    size_t cip_len;
    const char *upstream_addr;
    struct timespec t_up;           /* when the request went upstream */
    double up_ms;                   /* upstream time to the response head; -1: none */
    struct gw_log_later *log_later; /* a tunnel's access-log line, kept for its close (log.c) */
    /* a rollout's arm it pinned (serve.c): 0 none ran, 1 the baseline, 2
     * the canary; and that rollout's number, counted under it only */
    unsigned char arm;
    uint64_t ro;
    /* route policies (policy.h): how many let it through (0: none ran,
     * the only field read when the route has none), the word each left,
     * and the name of the query parameter kept from the upstream (up_q,
     * in the pinned snapshot; up_qlen 0: none; policy.c) */
    unsigned char pol_n;
    uint64_t pol_val[8];
    /* the worker's counts of the policy running (policy.c; in the pinned
     * snapshot): a local answer it gives is counted by its status as it
     * finishes (gw_local_finish), since the request may be gone after */
    struct adm_pol_wctr *pol_ctr;
    /* The response body through a route's body policy (compress): its
     * encoder and what it produced not yet given to the codec, both NULL
     * when the body passes as it is (gw_policy_body_begin); freed when
     * the request's try finishes, whole or cancelled (gw_try_finish).
     * chunk_out: the HTTP/1.1 codec frames the body chunked itself
     * (Transfer-Encoding: chunked; reset by codec->end). */
    struct gw_encoder *enc;
    struct evbuffer *enc_out;
    unsigned char pol_body, body_failed, chunk_out;
    unsigned char up_qlen;
    const char *up_q;
    /* the query parameters kept out of the access log: the snapshot's
     * log_q, copied for a line written after it is released (a tunnel's);
     * pol_q_whole: every query is */
    unsigned char pol_qlen, pol_q_whole;
    char pol_q[128];
    /* A policy waiting on a subrequest (policy.h): the subrequest, NULL
     * when none runs; the policy's index (set as each policy runs); where
     * the request goes once its policies let it through after one waited
     * (serve.c's continuation: upstream, or the route's own answer). And
     * the fields a forward_auth answer sends upstream, "Name: value\r\n"
     * lines NUL-ended (the policy's word points at them): kept between
     * requests, freed with the request (gw_req_release). */
    struct gw_subreq *sub;
    unsigned char pol_wait;
    void (*pol_go)(struct gw_req *r);
    char *pol_fields;
    size_t pol_fields_cap;
};

/* How a request's answer is written and its body read: one per protocol
 * (http1.c, h2.c). */
struct gw_codec {
    const char *proto; /* as the access log writes it: "HTTP/1.1", "HTTP/2.0" */
    /* 1: HTTP/1.x on the wire (http1.c): pre-encoded HTTP/1.1 answers go
     * out as they are, response bodies pass framed as the upstream framed
     * them, and a body not wanted is read away to keep the connection in
     * step. 0: the codec frames bodies itself (HTTP/2): they reach it
     * decoded. */
    unsigned char http1;
    /* The response head: head_begin sets <o> up (HTTP/1: on the
     * connection's output, the status line written), the caller appends
     * its fields as "Name: value\r\n" lines (hop-by-hop ones already
     * dropped), head_end finishes and sends it. With a body to follow
     * (no GW_HEAD_NOBODY nor GW_HEAD_INTERIM) head_end may leave <o>
     * unflushed, so that data_move can pack a small body behind it; the
     * caller flushes <o> (gw_ob_flush) before it returns to the loop.
     * <reason>: NULL for the standard one. */
    void (*head_begin)(struct gw_req *r, struct gw_obuf *o, int status,
                       const struct h1_slice *reason);
    void (*head_end)(struct gw_req *r, struct gw_obuf *o, unsigned flags);
    /* One field of the head between head_begin and head_end, given apart
     * rather than as a line in <o>, for a codec that would only read the
     * line back (HTTP/2); NULL: the caller writes the line (gw_ob_field).
     * <name> and <value> stay put until head_end. */
    void (*field)(struct gw_req *r, struct gw_obuf *o, const char *name, size_t nlen,
                  const char *value, size_t vlen);
    /* Response body bytes: <n> moved out of <src>, or <n> at <p> copied.
     * <pend>: the head's obuf while it is unflushed, else NULL. */
    void (*data_move)(struct gw_req *r, struct evbuffer *src, size_t n, struct gw_obuf *pend);
    void (*data)(struct gw_req *r, const char *p, size_t n);
    /* The answer is whole; <trailers>: "Name: value\r\n" lines, NULL: none. */
    void (*end)(struct gw_req *r, const char *trailers, size_t trailers_len);
    /* The answer cannot be completed after it started: HTTP/1 closes the
     * connection once what was sent is out; HTTP/2 resets the stream. */
    void (*abort)(struct gw_req *r);
    /* Bytes of this answer queued toward the client: over GW_HWM the
     * upstream is not read; the codec calls gw_req_drained() at GW_LWM. */
    size_t (*out_pending)(const struct gw_req *r);
    /* Passes the request body bytes that arrived to <cb> (decoded):
     * GW_FEED_*. GW_FEED_WAIT: none are here, reading is armed (with the
     * body timeout); GW_FEED_FAILED: <r> was answered (and may be gone). */
    int (*body_feed)(struct gw_req *r, h1_req_body_cb cb, void *ctx);
    /* Stops (0) or resumes (1) reading the request body: backpressure. */
    void (*body_read)(struct gw_req *r, int on);
    /* The request's trailer fields, once body_feed said GW_FEED_DONE, as
     * "Name: value\r\n" lines at *<lines>: their length, 0 for none. A
     * body that goes upstream chunked ends with them. NULL: none kept
     * (HTTP/1's parser drops them). */
    size_t (*body_trailers)(struct gw_req *r, const char **lines);
    /* Follows r->phase (HTTP/1: the connection's state; GW_REQ_HEAD comes
     * once the snapshot is pinned, before the request is decided on);
     * NULL: nothing to do. */
    void (*phase)(struct gw_req *r, enum gw_req_phase ph);
    /* The request ended (gw_req_done logged and counted it, its snapshot
     * is released): HTTP/1 reads the next one or closes; HTTP/2 forgets
     * the stream's request. */
    void (*done)(struct gw_req *r);
};

/* A request on <c> with codec <codec> and its state <stream>, head in
 * <rp>: every per-request field to its start. */
void gw_req_init(struct gw_req *r, struct gw_conn *c, const struct gw_codec *codec, void *stream,
                 struct h1_req_parser *rp);
/* The one request entry both codecs call once r->rp holds a whole head:
 * pins the snapshot, decides (the connection's checks first: a
 * redirect_https listener; 421 for a name of another client-auth group;
 * then gw_forward_decide), and proxies or answers it. */
void gw_req_start(struct gw_req *r);
static inline void gw_req_phase(struct gw_req *r, enum gw_req_phase ph)
{
    r->phase = ph;
    if (r->codec->phase)
        r->codec->phase(r, ph);
}
/* The request ends: logged and counted, its snapshot released, then
 * codec->done. */
void gw_req_done(struct gw_req *r);
/* Logs and counts it (gw_req_done does; so does a request cut off). */
void gw_req_account(struct gw_req *r);
/* Counts a request that turns into a tunnel (its status, and its time
 * to the 101 in the duration histogram), and keeps its access-log line
 * for the close (gw_conn_free() writes it), when the tunnel's bytes both
 * ways and its whole duration are known. Its snapshot must still be
 * pinned. */
void gw_req_account_tunnel(struct gw_req *r);
/* Releases its snapshot. */
void gw_req_unpin(struct gw_req *r);
/* A fresh request id (process prefix, worker, sequence) in r->reqid. */
void gw_req_make_reqid(struct gw_req *r);
/* The config of <r>, or the current one before its snapshot is pinned. */
const struct adm_config *gw_req_cfg(const struct gw_req *r);
/* Frees what <r> holds between requests (its parameters' array) and a
 * kept access-log line, written first: the request is gone for good (its
 * connection, or its stream, is freed). Its upstream must be detached. */
void gw_req_release(struct gw_req *r);
/* The codec's output for <r> fell to GW_LWM: the upstream is read again. */
void gw_req_drained(struct gw_req *r);
/* Ends <r> at once (its stream was reset, or its connection goes): its
 * upstream try is detached, its slot and budget given back, and it is
 * counted (499 when it had no status). The codec frees it after. */
void gw_req_cancel(struct gw_req *r);

#endif
