/*
 * policy_forward_auth.c - the "forward_auth" policy type (nginx's
 * auth_request, Traefik's ForwardAuth, Envoy's ext_authz over HTTP): the
 * pool a worker asks whether a request may pass, the path it asks at, the
 * client fields the question carries (request_headers), the answer's
 * fields that go upstream after a yes (response_headers), and how long
 * the whole question may take (timeout_ms). The pool is named here and
 * resolved once every section is read (adm_fa_check): a policy may come
 * before the upstreams. The subrequest itself is the worker's:
 * gateway/policy_forward_auth.c and gateway/subreq.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fields the subrequest sets itself: a client's copy named in
 * request_headers would go up twice. */
static const char *const ours[] = {"x-forwarded-method", "x-forwarded-uri", "x-forwarded-host",
                                   "x-forwarded-proto", "x-forwarded-for"};

static void fa_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

static void fa_upstream(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fa_conf *c = target;
    const char *s = adm_cf_str(x, v, 1);

    if (s)
        c->upstream = adm_cf_strdup(x, s);
}

static void fa_path(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fa_conf *c = target;
    const char *s = adm_cf_str(x, v, 1);
    size_t n = s ? strlen(s) : 0;

    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f || s[i] == '#') {
            n = 0;
            break;
        }
    if (s[0] != '/' || !n || n > ADM_FA_PATH_MAX) {
        adm_cf_err(x,
                   "an origin-form path: '/' then at most %d visible ASCII characters, no '#' "
                   "(a query may follow '?')",
                   ADM_FA_PATH_MAX - 1);
        return;
    }
    if ((c->path = adm_cf_strdup(x, s)))
        c->path_len = n;
}

/* Whether <name> (lower case) is one the subrequest sets itself. */
static int is_ours(const char *name)
{
    for (size_t k = 0; k < sizeof(ours) / sizeof(*ours); k++)
        if (!strcmp(name, ours[k]))
            return 1;
    return 0;
}

/* A list of field names into <out> (lower case, each once), none of the
 * subrequest's own fields; <upstream>: they go upstream, so none the
 * gateway writes or that names credentials either (adm_pol_header_owned). */
static void name_list(struct adm_cf *x, const json_t *v, struct adm_fa_name *out, size_t *n,
                      int upstream)
{
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if (json_array_size(v) > ADM_FA_MAX_FIELDS) {
        adm_cf_err(x, "at most %d names", ADM_FA_MAX_FIELDS);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        struct adm_fa_name f = {NULL, 0};
        adm_pol_header_name(x, json_array_get(v, i), &f.name, &f.len);
        if (f.name && (is_ours(f.name) || (upstream && adm_pol_header_owned(f.name)))) {
            adm_cf_err(x,
                       "%s is written by the gateway itself, or names credentials: not for a "
                       "forward_auth policy",
                       adm_cf_quote(&q, f.name));
            free(f.name);
            f.name = NULL;
        }
        for (size_t k = 0; f.name && k < *n; k++)
            if (!strcmp(f.name, out[k].name)) {
                adm_cf_err(x, "%s named twice", adm_cf_quote(&q, f.name));
                free(f.name);
                f.name = NULL;
            }
        if (f.name)
            out[(*n)++] = f;
        adm_cf_pop(x, mark);
    }
}

static void fa_request_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fa_conf *c = target;
    name_list(x, v, c->req, &c->nreq, 0);
}

static void fa_response_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fa_conf *c = target;
    name_list(x, v, c->resp, &c->nresp, 1);
}

static void fa_timeout(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fa_conf *c = target;
    long long n;

    if (adm_cf_int(x, v, 1, ADM_FA_TIMEOUT_MAX, &n) == 0)
        c->timeout_ms = (unsigned)n;
}

static const struct adm_cf_field fa_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = fa_type},
    {.key = "upstream", .kind = FK_FN, .flags = F_REQUIRED, .fn = fa_upstream},
    {.key = "path", .kind = FK_FN, .fn = fa_path},
    {.key = "request_headers", .kind = FK_FN, .fn = fa_request_headers},
    {.key = "response_headers", .kind = FK_FN, .fn = fa_response_headers},
    {.key = "timeout_ms", .kind = FK_FN, .fn = fa_timeout},
};

void *adm_fa_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct adm_fa_conf *c = adm_cf_calloc(x, 1, sizeof(*c));
    size_t nerr = x->nerr;

    (void)p;
    if (!c)
        return NULL;
    c->timeout_ms = ADM_FA_TIMEOUT_MS;
    c->up = (size_t)-1;
    adm_cf_fields(x, v, fa_fields, NFIELDS(fa_fields), c);
    /* as nginx's auth_request and Traefik's ForwardAuth: without a list,
     * the service sees the client's fields (an empty list: none) */
    c->all_req = !json_object_get(v, "request_headers");
    if (!c->path && !x->nomem && (c->path = adm_cf_strdup(x, "/")))
        c->path_len = 1;
    if (x->nerr != nerr || x->nomem) {
        adm_fa_conf_free(c);
        return NULL;
    }
    return c;
}

void adm_fa_conf_free(void *conf)
{
    struct adm_fa_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < c->nreq; i++)
        free(c->req[i].name);
    for (size_t i = 0; i < c->nresp; i++)
        free(c->resp[i].name);
    free(c->upstream);
    free(c->path);
    free(c);
}

void adm_fa_check(struct adm_cf *x, struct adm_policy *p)
{
    struct adm_fa_conf *c = p->conf;
    const json_t *u = json_object_get(x->upstream_index, c->upstream);
    const char *near;
    size_t mark = adm_cf_push_key(x, "upstream");
    struct adm_cf_qbuf q, qn;

    if (u)
        c->up = (size_t)json_integer_value(u);
    if (!u && (near = adm_cf_nearest_upstream(x->c, c->upstream)))
        adm_cf_err(x, "unknown upstream %s (did you mean %s?)", adm_cf_quote(&q, c->upstream),
                   adm_cf_quote(&qn, near));
    else if (!u)
        adm_cf_err(x, "unknown upstream %s", adm_cf_quote(&q, c->upstream));
    else if (x->c->upstreams[c->up].protocol != ADM_UP_H1)
        adm_cf_err(x,
                   "upstream %s speaks HTTP/2: a forward_auth subrequest is HTTP/1.1 "
                   "(plain or TLS)",
                   adm_cf_quote(&q, c->upstream));
    else /* the snapshot's pools are indexed as the config's upstreams */
        adm_pol_hash_add(p, &c->up, sizeof(c->up));
    adm_cf_pop(x, mark);
}

void *adm_fa_state_new(const void *conf, unsigned nworkers)
{
    struct adm_fa_state *s = calloc(1, sizeof(*s));
    size_t n = nworkers ? nworkers : 1;

    (void)conf;
    if (!s)
        return NULL;
    s->nworkers = (unsigned)n;
    if (!(s->ctr = aligned_alloc(64, sizeof(*s->ctr) * n))) {
        free(s);
        return NULL;
    }
    memset(s->ctr, 0, sizeof(*s->ctr) * n);
    return s;
}

void adm_fa_state_free(void *state)
{
    struct adm_fa_state *s = state;

    if (!s)
        return;
    free(s->ctr);
    free(s);
}

void adm_fa_counts(const struct adm_fa_state *s, uint64_t v[4])
{
    v[0] = v[1] = v[2] = v[3] = 0;
    for (unsigned w = 0; w < s->nworkers; w++) {
        v[0] += atomic_load_explicit(&s->ctr[w].allowed, memory_order_relaxed);
        v[1] += atomic_load_explicit(&s->ctr[w].denied, memory_order_relaxed);
        v[2] += atomic_load_explicit(&s->ctr[w].errors, memory_order_relaxed);
        v[3] += atomic_load_explicit(&s->ctr[w].timeouts, memory_order_relaxed);
    }
}
