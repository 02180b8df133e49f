/*
 * policy.h - route policies, the worker side: the chain a route's policies
 * run in (policy.c) and each type's ops (gateway/policy_<type>.c), the
 * config side being admin/policy.h.
 *
 * The phases (Envoy's HTTP filters, nginx's phases, kept small):
 * - request: once the route is decided (an upstream, a direct response
 *   or a redirect alike; both HTTP/1.1 and HTTP/2 clients), each policy in
 *   the route's order either lets the request go on, leaving a word in
 *   *<val> for its later phases, or answers it here (through
 *   gateway/local.h) and stops the chain, or waits on a subrequest
 *   (forward_auth): the chain is suspended, the request's body not read
 *   meanwhile (HTTP/1.1: the connection is not read; HTTP/2: the
 *   stream's window stays shut), and its answer resumes it
 *   (gw_policy_resume) where it stopped; before the chain, the query
 *   parameter an api_key policy reads is set aside (r->up_q): it never
 *   goes upstream, whatever the chain does (nor into the access log, on
 *   any request: serve.c);
 * - upstream: the fields it adds to the upstream request head, and the
 *   client fields it keeps from going up (drops);
 * - response: the fields it adds to the client's answer head, proxied or
 *   local, for every policy that let the request through;
 * - body: a response body filter (compress): gw_policy_body_begin decides
 *   on the answer's head whether the body goes through it, and edits the
 *   head's fields; gw_policy_body then takes the body's pieces, a flush
 *   when the upstream has nothing more for now, and the end.
 * A route without policies costs one branch at the request, and one at
 * each head.
 */
#ifndef SY_GATEWAY_POLICY_H
#define SY_GATEWAY_POLICY_H

#include <stdint.h>

#include "admin/http1/response.h"
#include "admin/policy.h"
#include "gateway/conn.h"

enum { GW_POL_NEXT = 0, GW_POL_ANSWERED = 1, GW_POL_PENDING = 2 };

struct gw_subreq;

struct gw_policy_ops {
    /* The request head of <r> (its route, parameters and client address
     * known): GW_POL_NEXT, or GW_POL_ANSWERED once <r> is answered and
     * finished (gw_local_finish), or GW_POL_PENDING with r->sub started,
     * whose answer comes to gw_policy_resume(). */
    int (*request)(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val);
    /* After GW_POL_PENDING: what the subrequest's <answer> means, as
     * request says (but GW_POL_PENDING); NULL: the type never waits. */
    int (*resume)(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val, const void *answer);
    /* "Name: value\r\n" lines for the upstream head of request <rq> (the
     * head the request phase saw); NULL: none. */
    void (*upstream)(const struct adm_spolicy *p, const struct h1_request *rq, uint64_t val,
                     struct gw_obuf *o);
    /* Whether the client's field <name> stays here; NULL: none does. */
    int (*drops)(const struct adm_spolicy *p, const struct h1_slice *name);
    /* Lines for the client's answer head; NULL: none. */
    void (*response)(const struct adm_spolicy *p, struct gw_req *r, uint64_t val,
                     struct gw_obuf *o);
    /* The response body slot: <n> bytes at <in> (<last>: the end) into
     * <out>; 0, or -1 to abort the answer. NULL: the body passes as it is. */
    int (*body)(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val, const char *in,
                size_t n, int last, struct evbuffer *out);
};

/* Indexed by enum adm_pol_type. */
extern const struct gw_policy_ops gw_policy_rate_limit, gw_policy_cors, gw_policy_api_key,
    gw_policy_basic, gw_policy_jwt, gw_policy_compress, gw_policy_forward_auth;

/* Runs r->sr's policies on <r> (r->sr->npol > 0): 1 when one answered it
 * (it is finished then) or waits on a subrequest, 0 to go on. <go>: where
 * the caller sends <r> when every policy let it through after one waited
 * (the caller's own continuation: policy.c never calls up). */
int gw_policy_request(struct gw_req *r, void (*go)(struct gw_req *r));
/* The subrequest r->sub of the policy that waits came back with <answer>
 * (r->sub is NULL again): the body may be read again, and the chain goes
 * on from that policy; when every policy let <r> through, r->pol_go(r). */
void gw_policy_resume(struct gw_req *r, const void *answer);
/* A local answer of <status> is made for <r> (its status as meant: a
 * gRPC client gets it as a 200 with a grpc-status), or begins to finish:
 * counted under the policy that gave it, if one did and once
 * (switchyard_policy_requests_total). */
void gw_policy_count_answer(struct gw_req *r, int status);
/* <r> ends while a policy waits: its subrequest is cancelled (its
 * connection closed, its slot given back), r->sub NULL after. */
void gw_policy_cancel(struct gw_req *r);
/* gw_policy_cancel when a policy waits: one branch when none does. */
static inline void gw_policy_abandon(struct gw_req *r)
{
    if (r->sub)
        gw_policy_cancel(r);
}
/* The upstream fields of the <n> policies that let request <rq> through,
 * their words <val>, of route <sr> in <snap>. */
void gw_policy_upstream(const struct adm_snapshot *snap, const struct adm_sroute *sr,
                        const struct h1_request *rq, const uint64_t *val, unsigned n,
                        struct gw_obuf *o);
int gw_policy_drops(const struct adm_snapshot *snap, const struct adm_sroute *sr, unsigned n,
                    const struct h1_slice *name);
/* The answer head's fields of the policies that let <r> through
 * (r->pol_n > 0). */
void gw_policy_response(struct gw_req *r, struct gw_obuf *o);
/* Removes from the "Name: value\r\n" lines at <lines> (<n> bytes; a
 * request's trailers) those the policies that let <r> through keep from
 * the upstream (r->pol_n > 0), in place: the length left. */
size_t gw_policy_drop_lines(const struct gw_req *r, char *lines, size_t n);

/* Whether the upstream's response field <name> stays here: its
 * Access-Control-* fields when a cors policy let <r> through (ours are
 * the truth: a second Allow-Origin makes browsers refuse the answer, and
 * a disallowed origin gets none), its RateLimit* fields when a rate_limit
 * did. */
int gw_policy_resp_drops(const struct gw_req *r, const struct h1_slice *name);

/* Whether field <name> is <lc> (<n> bytes, lower case) in any case, an
 * '_' and a '-' the same either way (CGI, WSGI, PHP and nginx's underscores fold
 * X_User into the same variable as X-User): a client's copy of a field a
 * policy sets never gets past in another spelling. */
int gw_policy_field_is(const struct h1_slice *name, const char *lc, size_t n);

/* Writes query <q> (<n> bytes, without its '?') through <add> without
 * any parameter named <name> (<nlen> bytes, or several names joined by
 * '&'; every occurrence, in any case or percent-encoding of its name);
 * the parameters kept are joined
 * by '&'. Returns how many bytes it wrote: <n> when none was named. */
size_t gw_policy_strip_query(const char *q, size_t n, const char *name, size_t nlen,
                             void (*add)(void *ctx, const char *p, size_t n), void *ctx);

/* An answer head's fields as a body policy edits them. */
#define GW_POL_HEAD_MAX (H1_RESP_MAX_HEADERS + 2)
struct gw_pol_head {
    struct h1_header hdr[GW_POL_HEAD_MAX];
    size_t nhdr;
    char scratch[2048]; /* the new values the fields point into */
};

/* Whether the answer of <r> (r->pol_n > 0) with <status> and fields
 * <hdr>[0..<n>) goes through its route's body policy: 1 with r->enc and
 * r->enc_out set up and the fields to send in <bh> (which must outlive
 * the head's writing), 0 to send it as it is (also when out of memory). */
int gw_policy_body_begin(struct gw_req *r, int status, const struct h1_header *hdr, size_t n,
                         struct gw_pol_head *bh);
/* <n> bytes at <in> of the body through the policy to the client's codec
 * (data_move); <n> 0: a flush; <last>: the end. 0, or -1 (r->body_failed
 * set): the answer cannot be completed. */
int gw_policy_body(struct gw_req *r, const char *in, size_t n, int last);
/* Frees r->enc and r->enc_out; fine when there are none. */
void gw_policy_body_free(struct gw_req *r);

#endif
