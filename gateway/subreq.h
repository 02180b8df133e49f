/*
 * subreq.h - a subrequest (subreq.c): one HTTP/1.1 request of the
 * gateway's own to an upstream pool of a snapshot, on the worker's loop,
 * for a policy that asks a service before a request may go on
 * (forward_auth). It goes the way a proxied try goes, through the same
 * pieces: the balancer's pick among the servers up, the pool's
 * max_connections on this worker (a full pool is a failure at once: a
 * subrequest never queues), the worker's idle connections (upconn.c),
 * reused when the answer was read whole, with the same-server retry of a
 * pooled connection that died idle; the pool's counters and outlier
 * detection see it as a request. Everything it can be made to hold is
 * bounded: the answer's head (GW_SUB_HEAD_MAX), its body (the caller's
 * <body_max>), and the whole of it in time (<timeout_ms>).
 */
#ifndef SY_GATEWAY_SUBREQ_H
#define SY_GATEWAY_SUBREQ_H

#include <stddef.h>
#include <stdint.h>

#include "admin/http1/response.h"

#define GW_SUB_HEAD_MAX (16 * 1024) /* each head of an answer, a 1xx's too */

struct gw_worker;
struct gw_obuf;
struct adm_snapshot;
struct gw_subreq;

/* How a subrequest ended. */
enum gw_sub_outcome {
    GW_SUB_ANSWERED,  /* a final answer, read whole: status, fields, body */
    GW_SUB_BIG,       /* a final answer whose body is over <body_max>: status, fields */
    GW_SUB_MALFORMED, /* no valid answer: a head invalid or too long, bad body framing */
    GW_SUB_FAILED,    /* a connect failed, or the server closed or reset before the end */
    GW_SUB_TIMEOUT,   /* <timeout_ms> ran out */
};

/* What the caller's <done> gets; every pointer valid during the call only. */
struct gw_sub_answer {
    enum gw_sub_outcome outcome;
    int status; /* ANSWERED and BIG: the final status */
    const struct h1_header *hdr;
    size_t nhdr;
    const char *body; /* ANSWERED: the decoded body */
    size_t body_len;
    const char *server; /* the address of the server asked; NULL: none was */
    const char *why;    /* FAILED: what failed ("Connection refused"); else NULL */
};

typedef void (*gw_sub_done_fn)(void *arg, const struct gw_sub_answer *a);
/* Writes the request line and fields into <o>, each line ending in CRLF:
 * Host (the server's address, as nginx's $proxy_host) and the blank line
 * are added. Called once a try, from gw_subreq_start() or the loop. */
typedef void (*gw_sub_head_fn)(void *arg, struct gw_obuf *o);

struct gw_sub_spec {
    gw_sub_head_fn head; /* with the <arg> of gw_subreq_start() */
    int no_body;         /* the answer has no body whatever it says: a HEAD's */
    uint64_t hash;       /* the key of a hash balancer */
    unsigned timeout_ms; /* the whole subrequest, from its start */
    size_t body_max;     /* the most of an answer's body kept */
};

/* Starts a subrequest to pool <up> of snapshot <s> (which must outlive
 * it), by worker <w>; <done>(<arg>, answer) is called once, from the
 * loop, unless it is cancelled first. NULL when it cannot start: no
 * server is up, every one is at its max_connections, or no connection
 * could be opened (or out of memory); <done> is never called then. */
struct gw_subreq *gw_subreq_start(struct gw_worker *w, const struct adm_snapshot *s, size_t up,
                                  const struct gw_sub_spec *spec, gw_sub_done_fn done, void *arg);
/* Ends <q> at once: its connection closed (never reused: its answer may
 * still come), its slot given back, <done> never called. */
void gw_subreq_cancel(struct gw_subreq *q);

#endif
