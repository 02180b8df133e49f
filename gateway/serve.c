/*
 * serve.c - the one request entry both codecs call: a request whose head
 * is whole is pinned to the current snapshot, decided on (the
 * connection's own checks, then the route), and proxied or answered here;
 * and the request's ends that reach into the proxy (a drained output, a
 * cancel).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"

#include <stdlib.h>

#include "gateway/clientip.h"
#include "gateway/conn.h"
#include "gateway/forward.h"
#include "gateway/local.h"
#include "gateway/policy.h"
#include "gateway/proxy.h"

/* What the connection decides before the route does: a redirect_https
 * listener sends every request to https; on a listener that verifies
 * clients, a request must be for a name of the certificate its handshake
 * picked, since another one would skip that name's client check (421, RFC
 * 9110 15.5.20; nginx's CVE-2025-23419). GW_V_UPSTREAM: neither. */
static enum gw_verdict conn_verdict(struct gw_req *r)
{
    struct gw_conn *c = r->c;
    const struct h1_request *rq = &r->rp->req;
    const struct adm_listener *al = gw_conn_listener(c, r->snap);
    const struct adm_tls_ctx *t = gw_tls_ctx(&c->io);

    if (c->io.ops == &gw_io_plain_on_tls)
        return GW_V_PLAIN_ON_TLS;
    if (al && al->redirect_https && !gw_io_is_tls(&c->io))
        return GW_V_HTTPS;
    if (t && adm_tls_ctx_client_auth(t) && rq->host_name.ptr &&
        adm_tls_ctx_group(t, rq->host_name.ptr, rq->host_name.len) != gw_tls_group(&c->io))
        return GW_V_MISDIRECTED;
    return GW_V_UPSTREAM;
}

/* The verdicts of a request the router answered: the ones the live
 * sample records. */
#define SAMPLED_VERDICTS                                                                           \
    (1u << GW_V_ROUTER | 1u << GW_V_LOCAL | 1u << GW_V_UPSTREAM | 1u << GW_V_MF0 |                 \
     1u << GW_V_INVALID)

/* Adds request <r>, which the router of <s> answered with <m> (and the
 * route r->sr on a hit), to the worker's ring of the live sample
 * (admin/sample.h). The method goes by its id (the token only when llhttp
 * does not know it: H1_METHOD_OTHER is the sample's METHOD_OTHER). */
static void sample(const struct gw_req *r, const struct adm_snapshot *s, unsigned w,
                   const struct rt_match *m)
{
    /* r->sr is set on a hit only (gw_forward_decide) */
    static const struct adm_sroute none = {.id = (char *)adm_sample_noroute};
    const struct h1_request *rq = &r->rp->req;
    const struct adm_sroute *sr = r->sr ? r->sr : &none;

    adm_sample_put(s->samples->rings[w], rq->method_id, rq->method.ptr, rq->method.len,
                   rq->host_name.ptr, rq->host_name.len, rq->path, rq->path_len, sr->id, sr->id_len,
                   (unsigned)m->status);
}

/* A rollout runs: the request takes the canary's arm or the current one's
 * (r->arm 2 or 1). By the client address hashed with the rollout's salt,
 * so that a client (and a keep-alive connection) stays on one arm, or by
 * the worker's own generator for each request. On the canary, the client
 * address is derived again under its config. */
static void pick_arm(struct gw_req *r)
{
    struct gw_worker *w = r->c->w;
    struct adm_snapshot *c = atomic_load_explicit(&w->proc->swap.canary, memory_order_acquire);
    uint64_t h;

    if (!c)
        return;
    if (c->canary_by_request) {
        /* xorshift64*: the worker's own state, no shared line */
        uint64_t x = w->ro_rand ? w->ro_rand : 0x9e3779b97f4a7c15ull ^ (w->id + 1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        w->ro_rand = x;
        h = x * 0x2545f4914f6cdd1dull;
    } else {
        size_t len;
        const unsigned char *ip = gw_client_ip(r, &len);
        h = 1469598103934665603ull ^ c->canary_salt;
        for (size_t i = 0; i < len; i++)
            h = (h ^ ip[i]) * 1099511628211ull;
        h ^= h >> 33; /* FNV's low bits are weak: mix them (murmur3's finalizer) */
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    r->ro = c->rollout;
    if ((h >> 11) % 100 >= c->canary_pct) {
        r->arm = 1;
        return;
    }
    adm_swap_pin_snap(c, w->id);
    adm_swap_unpin(r->snap, w->id);
    r->snap = c;
    r->cip_state = GW_CIP_UNKNOWN;
    r->arm = 2;
}

_Static_assert(H1_METHOD_OTHER == ADM_SAMPLE_METHOD_OTHER, "the sample names methods by id");

/* The route's direct response or redirect, once its policies let <r>
 * through after one of them waited (no router match is read for it). */
static void answer_route(struct gw_req *r)
{
    gw_local_answer(r, GW_V_LOCAL, NULL);
}

void gw_req_start(struct gw_req *r)
{
    struct gw_worker *w = r->c->w;
    const struct h1_request *rq = &r->rp->req;
    struct rt_match m;
    enum gw_verdict v;
    struct adm_snapshot *s;
    size_t need;

    r->snap = adm_swap_pin(&w->proc->swap, w->id);
    r->arm = 0;
    if (atomic_load_explicit(&w->proc->swap.canary, memory_order_relaxed))
        pick_arm(r);
    s = r->snap;
    r->sr = NULL;
    r->up = NULL;
    r->ups = NULL;
    r->refused = 0;
    r->body_done = rq->body_kind == H1_BODY_NONE;
    r->resp_started = 0;
    r->body_fed = 0;
    r->body_paused = 0;
    r->continued = 0;
    r->retried = 0;
    r->tries = 0;
    r->tried.n = 0;
    r->retry_refused = 0;
    r->grpc_status = 0;
    r->keep = rq->keep_alive;
    r->http10 = rq->version_minor == 0;
    r->is_head = rq->method_id == HTTP_HEAD;
    r->status = 0;
    r->reqid_len = 0;
    r->up_ms = -1;
    r->pol_n = 0;
    r->pol_ctr = NULL;
    r->chunk_out = 0;
    r->up_qlen = 0;
    r->pol_qlen = s->log_qlen;
    r->pol_q_whole = s->log_q_whole;
    if (s->log_qlen) /* the config has an api_key reading a query parameter */
        memcpy(r->pol_q, s->log_q, s->log_qlen);
    gw_req_phase(r, GW_REQ_HEAD);

    need = rt_table_max_params(s->rt);
    if (need > r->params_cap) {
        struct rt_param *p = realloc(r->params, need * sizeof(*p));
        if (p) {
            r->params = p;
            r->params_cap = need;
        }
    }
    v = conn_verdict(r);
    if (v == GW_V_UPSTREAM) /* nothing to say about the connection itself */
        v = gw_forward_decide(r->rp, s, w->rtctx, r->params, r->params_cap, &m, &r->sr);
    if (s->samples && (SAMPLED_VERDICTS >> v & 1)) /* the router answered */
        sample(r, s, w->id, &m);
    r->nparams = v == GW_V_CONNECT || v == GW_V_ASTERISK || v == GW_V_NOMEM || v == GW_V_HTTPS ||
                         v == GW_V_MISDIRECTED || v == GW_V_BAD_PATH || v == GW_V_PLAIN_ON_TLS
                     ? 0
                     : m.nparams;
    if (v != GW_V_UPSTREAM && rq->expect_continue && !r->body_done)
        r->keep = 0; /* no 100 Continue from us: the body may come or not, so the
                      * answer says the connection closes (RFC 9110 10.1.1) */
    /* the route's policies, whatever it does (one branch without any) */
    if (r->sr && r->sr->npol && (v == GW_V_UPSTREAM || v == GW_V_LOCAL) &&
        gw_policy_request(r, v == GW_V_UPSTREAM ? gw_proxy_start : answer_route))
        return;
    if (v == GW_V_UPSTREAM)
        gw_proxy_start(r);
    else
        gw_local_answer(r, v, &m);
}

void gw_req_drained(struct gw_req *r)
{
    if (r->up || r->ups)
        gw_proxy_drained(r);
}

void gw_req_cancel(struct gw_req *r)
{
    gw_policy_abandon(r);
    gw_proxy_detach(r);
    if (r->snap) {
        r->status = r->status ? r->status : 499;
        gw_req_account(r);
        gw_req_unpin(r);
    }
    r->sr = NULL;
    r->upstream_addr = NULL;
}
