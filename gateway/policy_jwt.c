/*
 * policy_jwt.c - the "jwt" type on a worker: the token of the
 * Authorization field ("Bearer <token>", adm_jwt_bearer) verified against
 * the policy's key set (admin/policy_jwt.c) with this worker's cache of
 * verified signatures (adm_jwt_verify_cached). RFC 6750 3's answers: no
 * Bearer credentials at all is a 401 with WWW-Authenticate: Bearer
 * realm="..."; a refused token is a 401 with error="invalid_token" and an
 * error_description saying why (the library's static sentence, never the
 * token); OpenSSL out of memory is a 503. The token itself is never
 * written anywhere but to the upstream, in the Authorization field it came
 * in.
 *
 * The key set is the policy state's <keys> (admin/policy_types.h), one
 * acquire load per verification: with a jwks_url the admin thread swaps
 * in each new set the URL brings. Until the URL's first good set arrives
 * (<keys> is still the policy's own set), a token that no key of ours
 * fits or verifies is answered 503 with Retry-After: a key the gateway
 * has not loaded yet is our fault, not the client's. Once the set is
 * there, a token whose kid it lacks is a 401, and asks the admin thread
 * for an early fetch (a flag, written only when not yet set: the rate
 * limit is the admin thread's, jwks_remote.h).
 *
 * The claims named in claims_to_headers go up as fields: the upstream
 * phase decodes the claims of the same token again (adm_jwt_claims_read,
 * no signature: the request phase verified these very bytes of the head,
 * and left where the token lies in the Authorization value in its word),
 * so that nothing of a request but that word is kept between the phases. The client's
 * own fields of those names never go up, token or not.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "gateway/local.h"
#include "gateway/policy.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The Authorization field of <rq> in *<out>: 1 with one, 0 without, -1
 * when there are several (which value would the upstream believe?). */
static int authorization(const struct h1_request *rq, struct h1_slice *out)
{
    int found = 0;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_slice *n = &rq->headers[i].name;
        if (n->len == 13 && h1_name_is(n, "authorization")) {
            if (found)
                return -1;
            *out = rq->headers[i].value;
            found = 1;
        }
    }
    return found;
}

/* Answers <r> with a 401 whose challenge carries <why> as invalid_token's
 * description (NULL: credentials were missing, the bare challenge). RFC
 * 6750 3 allows neither '"' nor a backslash there: they become ' and /. */
static int refuse(struct gw_req *r, const struct adm_jwt_conf *c, const char *why)
{
    char buf[512], desc[160];
    size_t i;
    int n;

    for (i = 0; why && why[i] && i < sizeof(desc) - 1; i++)
        desc[i] = why[i] == '"' ? '\'' : why[i] == '\\' ? '/' : why[i];
    desc[i] = '\0';
    if (why)
        n = snprintf(buf, sizeof(buf),
                     "WWW-Authenticate: Bearer realm=\"%s\", error=\"invalid_token\", "
                     "error_description=\"%s\"\r\n",
                     c->realm, desc);
    else
        n = snprintf(buf, sizeof(buf), "WWW-Authenticate: Bearer realm=\"%s\"\r\n", c->realm);
    if (n < 0 || (size_t)n >= sizeof(buf))
        n = 0; /* a realm is at most 128 bytes, a why a short sentence */
    gw_local_simple(r, 401, buf, (size_t)n);
    gw_local_finish(r);
    return GW_POL_ANSWERED;
}

/* Worker <w>'s cache of verified tokens, made on first use; NULL (no
 * cache, every signature checked) when out of memory. */
static struct adm_jwt_cache *worker_cache(struct adm_jwt_state *s, unsigned w)
{
    if (w >= s->nworkers)
        return NULL;
    if (!s->cache[w])
        s->cache[w] = adm_jwt_cache_new(ADM_JWT_CACHE_SLOTS);
    return s->cache[w];
}

/* Whether <res> under <set> says the URL's keys are missing rather than
 * the token being bad: <c> has a jwks_url whose first set has not come
 * (the state still holds the policy's own set), and no key fitted or
 * none verified. Else, on a kid the set lacks, asks for an early fetch. */
static int keys_missing(const struct adm_jwt_conf *c, struct adm_jwt_state *s,
                        const struct adm_jwks *set, enum adm_jwt_result res)
{
    if (!c->url || (res != ADM_JWT_NO_KEY && res != ADM_JWT_BAD_SIGNATURE))
        return 0;
    if (set == c->set)
        return 1;
    if (res == ADM_JWT_NO_KEY && !atomic_load_explicit(&s->want_fetch, memory_order_relaxed))
        atomic_store_explicit(&s->want_fetch, 1, memory_order_relaxed);
    return 0;
}

static int jwt_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    /* the fetcher's first retry comes within 5 s (admin/jwks_fetch.c) */
    static const char retry[] = "Retry-After: 5\r\n";
    const struct adm_jwt_conf *c = p->conf;
    struct adm_jwt_state *s = p->state;
    const struct adm_jwks *set;
    struct h1_slice auth;
    enum adm_jwt_result res;
    const char *tok, *why = NULL;
    size_t n;
    int have = authorization(&r->rp->req, &auth);

    if (have < 0)
        return refuse(r, c, "more than one Authorization field");
    if (!have)
        return refuse(r, c, NULL);
    if (!(tok = adm_jwt_bearer(auth.ptr, auth.len, &n))) {
        /* another scheme carries no Bearer credentials (RFC 6750 3.1) */
        if (auth.len < 7 || !h1_ci_eq(auth.ptr, 7, "bearer "))
            return refuse(r, c, NULL);
        return refuse(r, c, "the Authorization field is not one Bearer token");
    }
    set = atomic_load_explicit(&s->keys, memory_order_acquire);
    /* no claims wanted back (jwt_upstream reads its own): a remembered
     * token is checked against the clock only */
    res = adm_jwt_verify_cached(worker_cache(s, r->c->w->id), set, &c->opts, tok, n, time(NULL),
                                NULL, &why);
    if (res == ADM_JWT_OK) {
        /* the token's offset in the value and its length (at most
         * ADM_JWT_TOKEN_MAX) */
        *val = (uint64_t)(tok - auth.ptr) << 32 | n;
        return GW_POL_NEXT;
    }
    if (res == ADM_JWT_NOMEM || keys_missing(c, s, set, res)) {
        gw_local_simple(r, 503, res == ADM_JWT_NOMEM ? NULL : retry,
                        res == ADM_JWT_NOMEM ? 0 : sizeof(retry) - 1);
        gw_local_finish(r);
        return GW_POL_ANSWERED;
    }
    return refuse(r, c, why);
}

static void jwt_upstream(const struct adm_spolicy *p, const struct h1_request *rq, uint64_t val,
                         struct gw_obuf *o)
{
    const struct adm_jwt_conf *c = p->conf;
    struct adm_jwt_claims claims;
    struct h1_slice auth;
    size_t off = (size_t)(val >> 32), n = (size_t)(val & 0xffffffffu);

    if (!c->nhdrs || authorization(rq, &auth) != 1 || off + n > auth.len ||
        adm_jwt_claims_read(auth.ptr + off, n, &claims) < 0)
        return;
    for (size_t i = 0; i < c->nhdrs; i++) {
        size_t vlen;
        const char *v = adm_jwt_claim_str(&claims, c->hdrs[i].claim, &vlen);
        if (v)
            gw_ob_field(o, c->hdrs[i].header, c->hdrs[i].header_len, v, vlen);
    }
}

static int jwt_drops(const struct adm_spolicy *p, const struct h1_slice *name)
{
    const struct adm_jwt_conf *c = p->conf;

    if (c->drop_token && name->len == 13 && h1_name_is(name, "authorization"))
        return 1; /* the verified token, and any other copy */
    for (size_t i = 0; i < c->nhdrs; i++) {
        const struct h1_slice h = {c->hdrs[i].header, c->hdrs[i].header_len};
        if (h1_names_eq(name, &h))
            return 1;
    }
    return 0;
}

const struct gw_policy_ops gw_policy_jwt = {
    .request = jwt_request,
    .upstream = jwt_upstream,
    .drops = jwt_drops,
};
