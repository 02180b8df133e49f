/*
 * policy.c - the chain of a route's policies: the request phase in the
 * route's order, stopping at the first that answers; the upstream and
 * response phases for those that let the request through. Each type's
 * ops are gateway/policy_<type>.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/policy.h"
#include "admin/snapshot.h"
#include "gateway/encoding.h"

#include <event2/buffer.h>

#include <string.h>

static const struct gw_policy_ops *const ops[ADM_POL_NTYPES] = {
    [ADM_POL_RATE_LIMIT] = &gw_policy_rate_limit,
    [ADM_POL_CORS] = &gw_policy_cors,
    [ADM_POL_API_KEY] = &gw_policy_api_key,
    [ADM_POL_BASIC] = &gw_policy_basic,
    [ADM_POL_JWT] = &gw_policy_jwt,
    [ADM_POL_COMPRESS] = &gw_policy_compress,
};

int gw_policy_request(struct gw_req *r)
{
    const struct adm_sroute *sr = r->sr;

    r->pol_strip.ptr = NULL;
    r->pol_strip.len = 0;
    for (unsigned i = 0; i < sr->npol; i++) {
        const struct adm_spolicy *p = r->snap->policies[sr->pol[i]];
        r->pol_val[i] = 0;
        if (ops[p->type]->request(p, r, &r->pol_val[i]) == GW_POL_ANSWERED)
            return 1;
        r->pol_n = (unsigned char)(i + 1);
    }
    return 0;
}

void gw_policy_upstream(const struct adm_snapshot *snap, const struct adm_sroute *sr,
                        const struct h1_request *rq, const uint64_t *val, unsigned n,
                        struct gw_obuf *o)
{
    for (unsigned i = 0; i < n; i++) {
        const struct adm_spolicy *p = snap->policies[sr->pol[i]];
        if (ops[p->type]->upstream)
            ops[p->type]->upstream(p, rq, val[i], o);
    }
}

int gw_policy_drops(const struct adm_snapshot *snap, const struct adm_sroute *sr, unsigned n,
                    const struct h1_slice *name)
{
    for (unsigned i = 0; i < n; i++) {
        const struct adm_spolicy *p = snap->policies[sr->pol[i]];
        if (ops[p->type]->drops && ops[p->type]->drops(p, name))
            return 1;
    }
    return 0;
}

void gw_policy_response(struct gw_req *r, struct gw_obuf *o)
{
    for (unsigned i = 0; i < r->pol_n; i++) {
        const struct adm_spolicy *p = r->snap->policies[r->sr->pol[i]];
        if (ops[p->type]->response)
            ops[p->type]->response(p, r, r->pol_val[i], o);
    }
}

void gw_policy_add_stripped(struct gw_obuf *o, const char *p, size_t n, const struct h1_slice *s)
{
    if (!s->len || s->ptr < p || s->ptr + s->len > p + n) {
        gw_ob_add(o, p, n);
        return;
    }
    gw_ob_add(o, p, (size_t)(s->ptr - p));
    gw_ob_add(o, s->ptr + s->len, (size_t)(p + n - (s->ptr + s->len)));
}

int gw_policy_body(struct gw_req *r, const char *in, size_t n, int last)
{
    const struct adm_spolicy *p = r->snap->policies[r->sr->pol[r->pol_body]];
    size_t len;

    if (r->body_failed ||
        ops[p->type]->body(p, r, &r->pol_val[r->pol_body], in, n, last, r->enc_out) < 0) {
        r->body_failed = 1;
        return -1;
    }
    if ((len = evbuffer_get_length(r->enc_out))) {
        r->codec->data_move(r, r->enc_out, len, NULL);
        r->bytes_out += len;
    }
    return 0;
}

void gw_policy_body_free(struct gw_req *r)
{
    gw_encoder_free(r->enc);
    r->enc = NULL;
    if (r->enc_out) {
        evbuffer_free(r->enc_out);
        r->enc_out = NULL;
    }
}
