/*
 * forward.h - where a request goes and the head it goes upstream with
 * (forward.c). Pure functions: tests/gateway/test_forward.c and the
 * fuzz_uphead target call them directly.
 */
#ifndef SY_GATEWAY_FORWARD_H
#define SY_GATEWAY_FORWARD_H

#include "gateway/conn.h"

/* What becomes of a request: gw_forward_decide's verdict. */
enum gw_verdict {
    GW_V_CONNECT,  /* 501 */
    GW_V_ASTERISK, /* OPTIONS *: every method */
    GW_V_NOMEM,    /* no room for the parameters */
    GW_V_ROUTER,   /* the router answers: m->status (404, 405, redirect, OPTIONS) */
    GW_V_LOCAL,    /* a configured response or redirect: *sr */
    GW_V_MF0,      /* OPTIONS or TRACE with Max-Forwards 0: answered here */
    GW_V_INVALID,  /* llhttp disagrees: rp->status */
    GW_V_BAD_PATH, /* 400: a path router.escaped_slashes refuses, or whose
                    * strip_prefix result climbs above its root */
    GW_V_UPSTREAM, /* to (*sr)'s upstream */
    /* decided by the connection, before the route (http1.c) */
    GW_V_HTTPS,        /* a redirect_https listener: 308 to the https URL */
    GW_V_MISDIRECTED,  /* Host names another certificate than SNI picked: 421 */
    GW_V_PLAIN_ON_TLS, /* plain HTTP on a TLS listener: 400 saying so, and close */
};

/* Routes the complete request head in <rp> through snapshot <s> (with the
 * router scratch <ctx>), the route's parameters into <params>[0..<cap>)
 * (GW_V_NOMEM when <cap> is below the table's rt_table_max_params), and
 * the route into *sr. The path is first what <s>'s router.escaped_slashes
 * makes of it (h1_req_route_path: decoded into rp's path, or refused), and
 * before GW_V_UPSTREAM the second parser confirms the head
 * (h1_req_confirm), which is why <rp> is not const. */
enum gw_verdict gw_forward_decide(struct h1_req_parser *rp, const struct adm_snapshot *s,
                                  rt_ctx *ctx, struct rt_param *params, size_t cap,
                                  struct rt_match *m, const struct adm_sroute **sr);

/* Whether field <n> is named by one of the Connection tokens <tok>[0..ntok)
 * (so hop-by-hop); framing fields and Host never are (a "Connection:
 * content-length" must not change the framing). */
int gw_forward_named_in(const struct h1_slice *n, const struct h1_slice *tok, size_t ntok);

/* The client's X-Request-Id that the upstream and the client see: the
 * first one forwarded that is not empty and shorter than <max>; NULL when
 * there is none (then ours goes up). */
const struct h1_header *gw_forward_client_id(const struct h1_request *rq, size_t max);

/* Whether the Upgrade of <rq> goes upstream under route <sr> (so a 101 may
 * become a tunnel): every protocol its Upgrade fields name is one the route
 * tunnels (its "upgrades", by default only "websocket"), and none is "h2c".
 * Otherwise Upgrade and its Connection token are dropped and the request
 * goes up as a plain one (as nginx). */
int gw_forward_upgrade(const struct h1_request *rq, const struct adm_sroute *sr);

/* What a request fills into a route's encoded header actions (slots of
 * struct adm_shdrs); every pointer borrowed. */
struct gw_hdr_vals {
    const struct rt_param *params; /* the route's parameters */
    size_t nparams;
    const char *client_ip, *reqid, *host; /* {client_ip}, {request_id}, {host} */
    size_t client_ip_len, reqid_len, host_len;
};

/* Whether <h> drops field <name> (removed, or replaced by a set). */
int gw_hdrs_drops(const struct adm_shdrs *h, const struct h1_slice *name);
/* Appends <h>'s set and add fields to <o>, their slots filled from <v>. */
void gw_hdrs_emit(struct gw_obuf *o, const struct adm_shdrs *h, const struct gw_hdr_vals *v);

/* Everything the upstream head is a function of; every pointer borrowed. */
struct gw_forward {
    const struct h1_request *rq;     /* complete, confirmed */
    const struct adm_snapshot *snap; /* the request's: trusted_proxies */
    const struct adm_sroute *sr;     /* the route: strip_prefix, rewrite */
    const struct rt_param *params;   /* the route's parameters, for rewrite */
    size_t nparams;
    const struct sockaddr *peer; /* the client */
    const char *peer_ip;         /* its address as text: X-Forwarded-For */
    const char *client_ip;       /* client_ip's address: X-Real-IP; NULL: none */
    size_t client_ip_len;
    const char *upstream_addr;         /* the server: the Host of a request without one */
    const struct h1_header *client_id; /* gw_forward_client_id(rq), or NULL */
    const char *reqid;                 /* without client_id: the X-Request-Id sent */
    size_t reqid_len;
    int tls;                    /* the request came over TLS: X-Forwarded-Proto: https */
    const char *client_subject; /* the verified client certificate, NULL: none */
    const char *client_sha256;  /* its SHA-256 in hex */
    int buffered;               /* the body was read whole (request_buffering): */
    uint64_t buffered_len;      /* it goes with this Content-Length, never chunked */
    /* the route's policies that let the request through (policy.h): how
     * many, their words, and the name of a query parameter that never
     * goes up (pol_qlen 0: none) */
    unsigned pol_n;
    const uint64_t *pol_val;
    const char *pol_q;
    size_t pol_qlen;
};

/* Appends the path and query of <rq>'s target as received (an
 * absolute-form target's, after its authority) to <o>. */
void gw_forward_target(const struct h1_request *rq, struct gw_obuf *o);

/* Appends the upstream request head of <f> to <o>, up to its blank line,
 * without flushing <o>. */
void gw_forward_head(const struct gw_forward *f, struct gw_obuf *o);

#endif
