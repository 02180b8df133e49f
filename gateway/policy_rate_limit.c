/*
 * policy_rate_limit.c - the "rate_limit" type on a worker: the request's
 * key hashed from its parts (client address, a header, a route parameter,
 * the route), one GCRA step in the policy's shared table
 * (admin/policy_types.h), and the answer: 429 with Retry-After and the
 * RateLimit-Policy and RateLimit fields of
 * draft-ietf-httpapi-ratelimit-headers-11, which allowed answers carry
 * too.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "admin/snapshot.h"
#include "gateway/clientip.h"
#include "gateway/local.h"
#include "gateway/policy.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t mix(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    h ^= 0xff; /* a separator: ("ab", "c") is not ("a", "bc") */
    return h * 1099511628211ULL;
}

static const struct h1_slice *header_value(const struct h1_request *rq, const char *name,
                                           size_t len)
{
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_slice *n = &rq->headers[i].name;
        if (n->len == len && h1_name_is(n, name))
            return &rq->headers[i].value;
    }
    return NULL;
}

/* The hash of <r>'s key under <c>. */
static uint64_t key_hash(const struct adm_rl_conf *c, struct gw_req *r)
{
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < c->nkey; i++) {
        const struct adm_rl_part *p = &c->key[i];
        const struct h1_slice *v;
        const char *s = "";
        size_t n = 0;
        switch (p->kind) {
        case ADM_RLK_CLIENT_IP:
            s = gw_client_ip_text(r, &n);
            break;
        case ADM_RLK_HEADER:
            if ((v = header_value(&r->rp->req, p->name, p->len))) {
                s = v->ptr;
                n = v->len;
            }
            break;
        case ADM_RLK_PARAM:
            for (size_t k = 0; k < r->nparams && k < r->params_cap; k++)
                if (!strcmp(r->params[k].name, p->name)) {
                    s = r->params[k].value;
                    n = r->params[k].len;
                    break;
                }
            break;
        case ADM_RLK_ROUTE:
            s = r->sr->id;
            n = strlen(s);
            break;
        }
        h = mix(h, s, n);
    }
    /* FNV's low bits are weak where the table takes its place from */
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int rl_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    const struct adm_rl_conf *c = p->conf;
    struct adm_rl_verdict v;
    char extra[512];
    int n;

    adm_rl_take(p->state, c, key_hash(c, r), now_ns(), r->c->w->id, &v);
    if (v.allowed) {
        uint64_t rem = v.remaining > 0xffffffffu ? 0xffffffffu : v.remaining;
        uint64_t t = v.reset_s > 0xffffffffu ? 0xffffffffu : v.reset_s;
        *val = rem << 32 | t;
        return GW_POL_NEXT;
    }
    n = snprintf(extra, sizeof(extra), "Retry-After: %llu\r\n%sRateLimit: \"%s\";r=0;t=%llu\r\n",
                 (unsigned long long)v.retry_s, c->policy, c->name,
                 (unsigned long long)(v.retry_s > v.reset_s ? v.retry_s : v.reset_s));
    gw_local_simple(r, 429, extra, n > 0 && (size_t)n < sizeof(extra) ? (size_t)n : 0);
    gw_local_finish(r);
    return GW_POL_ANSWERED;
}

static void rl_response(const struct adm_spolicy *p, struct gw_req *r, uint64_t val,
                        struct gw_obuf *o)
{
    const struct adm_rl_conf *c = p->conf;

    (void)r;
    gw_ob_add(o, c->policy, c->policy_len);
    gw_ob_lit(o, "RateLimit: \"");
    gw_ob_str(o, c->name);
    gw_ob_lit(o, "\";r=");
    gw_ob_u64(o, val >> 32);
    gw_ob_lit(o, ";t=");
    gw_ob_u64(o, val & 0xffffffffu);
    gw_ob_lit(o, "\r\n");
}

const struct gw_policy_ops gw_policy_rate_limit = {
    .request = rl_request,
    .response = rl_response,
};
