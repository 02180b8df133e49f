/*
 * policy_api_key.c - the "api_key" type on a worker: the key from its
 * header or query parameter (as sent, not percent-decoded), checked
 * against the stored hashes in constant time (admin/policy_types.h); 401
 * with WWW-Authenticate: ApiKey realm="..." without a known one. A known
 * key's consumer name goes upstream in consumer_header; the client's own
 * copies of that header, and the key's header, stay here, and so does
 * every copy of the key's query parameter, which the access log leaves
 * out too (r->up_q, set aside by policy.c before the chain runs; the
 * log leaves every api_key query name out of every request: serve.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "gateway/local.h"
#include "gateway/policy.h"

#include <string.h>

/* The value of the first parameter <name> (as sent) in query <q>. */
static int query_param(const struct h1_slice *q, const char *name, size_t nlen,
                       struct h1_slice *val)
{
    const char *p = q->ptr, *end = q->ptr + q->len;

    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p)), *e = amp ? amp : end;
        if ((size_t)(e - p) > nlen && p[nlen] == '=' && !memcmp(p, name, nlen)) {
            val->ptr = p + nlen + 1;
            val->len = (size_t)(e - val->ptr);
            return 1;
        }
        p = e + 1;
    }
    return 0;
}

static int ak_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    const struct adm_ak_conf *c = p->conf;
    const struct h1_request *rq = &r->rp->req;
    struct h1_slice key = {NULL, 0}, qv;
    int found = -1;

    for (size_t i = 0; c->header && i < rq->nheaders; i++) {
        const struct h1_slice *n = &rq->headers[i].name;
        if (n->len == c->header_len && h1_name_is(n, c->header)) {
            key = rq->headers[i].value;
            break;
        }
    }
    if (!key.ptr && c->query && rq->query.ptr &&
        query_param(&rq->query, c->query, c->query_len, &qv))
        key = qv;
    if (key.ptr && key.len && key.len <= 4096)
        found = adm_ak_find(c, p->state, r->c->w->id, key.ptr, key.len);
    if (found < 0) {
        gw_local_simple(r, 401, c->challenge, c->challenge_len);
        gw_local_finish(r);
        return GW_POL_ANSWERED;
    }
    *val = (uint64_t)found;
    return GW_POL_NEXT;
}

static void ak_upstream(const struct adm_spolicy *p, const struct h1_request *rq, uint64_t val,
                        struct gw_obuf *o)
{
    const struct adm_ak_conf *c = p->conf;
    const char *name = c->keys[val].name;

    (void)rq;
    if (c->consumer)
        gw_ob_field(o, c->consumer, c->consumer_len, name, strlen(name));
}

static int ak_drops(const struct adm_spolicy *p, const struct h1_slice *name)
{
    const struct adm_ak_conf *c = p->conf;

    return (c->consumer && gw_policy_field_is(name, c->consumer, c->consumer_len)) ||
           (c->header && gw_policy_field_is(name, c->header, c->header_len));
}

const struct gw_policy_ops gw_policy_api_key = {
    .request = ak_request,
    .upstream = ak_upstream,
    .drops = ak_drops,
};
