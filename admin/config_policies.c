/*
 * config_policies.c - the "policies" section: named policies, each read by
 * its type's configure op (the kinds table below), a route's "policies"
 * list, and the references from routes checked once everything is read
 * (an unknown name at /routes/N/policies/K with the nearest real one, at
 * most one authentication policy a route). Also the snapshot's shared
 * policy objects (struct adm_spolicy), which keep their state across
 * pushes while their definition stays the same.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/policy.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

_Static_assert(ADM_POL_MAX == sizeof(((struct adm_route *)0)->policy_idx), "policy_idx");
_Static_assert(ADM_POL_MAX_ALL <= (unsigned char)-1, "a policy's index fits a route's byte");

const struct adm_pol_kind adm_pol_kinds[ADM_POL_NTYPES] = {
    [ADM_POL_RATE_LIMIT] = {.name = "rate_limit",
                            .configure = adm_rl_configure,
                            .free = adm_rl_conf_free,
                            .state_new = adm_rl_table_new,
                            .state_free = adm_rl_table_free},
    [ADM_POL_CORS] = {.name = "cors", .configure = adm_cors_configure, .free = adm_cors_conf_free},
    [ADM_POL_API_KEY] = {.name = "api_key",
                         .auth = 1,
                         .configure = adm_ak_configure,
                         .free = adm_ak_conf_free,
                         .state_new = adm_ak_state_new,
                         .state_free = adm_ak_state_free},
    [ADM_POL_BASIC] = {.name = "basic",
                       .auth = 1,
                       .configure = adm_basic_configure,
                       .free = adm_basic_conf_free,
                       .state_new = adm_basic_cache_new,
                       .state_free = adm_basic_cache_free},
    [ADM_POL_JWT] = {.name = "jwt",
                     .auth = 1,
                     .configure = adm_jwtp_configure,
                     .free = adm_jwtp_conf_free,
                     .state_new = adm_jwtp_state_new,
                     .state_free = adm_jwtp_state_free},
    [ADM_POL_COMPRESS] = {.name = "compress",
                          .body = 1,
                          .configure = adm_cz_configure,
                          .free = adm_cz_conf_free},
    [ADM_POL_FORWARD_AUTH] = {.name = "forward_auth",
                              .auth = 1,
                              .configure = adm_fa_configure,
                              .free = adm_fa_conf_free,
                              .state_new = adm_fa_state_new,
                              .state_free = adm_fa_state_free,
                              .check = adm_fa_check},
};

/* The "type" values, as the errors list them. */
#define TYPE_NAMES                                                                                 \
    "\"rate_limit\", \"cors\", \"api_key\", \"basic\", \"jwt\", \"compress\", \"forward_auth\""

void adm_pol_hash_add(struct adm_policy *p, const void *s, size_t n)
{
    const unsigned char *b = s;
    uint64_t h = p->hash;

    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    p->hash = h;
}

/* The type of policy object <v>: its "type" member, reported at its path
 * when missing or unknown (with the nearest type's name). */
static int policy_type(struct adm_cf *x, const json_t *v)
{
    const json_t *t = json_object_get(v, "type");
    const char *s, *near = NULL;
    size_t best = 3;
    struct adm_cf_qbuf q;

    if (!t) {
        adm_cf_err_key(x, "type", "missing (required): one of " TYPE_NAMES);
        return -1;
    }
    size_t mark = adm_cf_push_key(x, "type");
    s = adm_cf_str(x, t, 1);
    for (int i = 0; s && i < ADM_POL_NTYPES; i++) {
        size_t d;
        if (!strcmp(s, adm_pol_kinds[i].name)) {
            adm_cf_pop(x, mark);
            return i;
        }
        if ((d = adm_cf_edit_distance(s, adm_pol_kinds[i].name)) < best) {
            best = d;
            near = adm_pol_kinds[i].name;
        }
    }
    if (s && near)
        adm_cf_err(x, "unknown policy type %s (did you mean \"%s\"?)", adm_cf_quote(&q, s), near);
    else if (s)
        adm_cf_err(x, "unknown policy type %s (one of " TYPE_NAMES ")", adm_cf_quote(&q, s));
    adm_cf_pop(x, mark);
    return -1;
}

void adm_cf_policies(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    const char *name;
    size_t nlen;
    json_t *pv;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_object(x, v))
        return;
    if (json_object_size(v) > ADM_POL_MAX_ALL) { /* never an index cut to its byte */
        adm_cf_err(x, "at most %d policies (this config has %zu)", ADM_POL_MAX_ALL,
                   json_object_size(v));
        return;
    }
    c->policies = adm_cf_calloc(x, json_object_size(v), sizeof(*c->policies));
    if (!c->policies)
        return;
    json_object_keylen_foreach((json_t *)v, name, nlen, pv)
    {
        size_t mark = adm_cf_push_key(x, name);
        struct adm_policy *p = &c->policies[c->npolicies++];
        char *text;

        p->type = -1;
        p->hash = 14695981039346656037ULL;
        if (strlen(name) != nlen || !adm_cf_is_name(name, "_.-", ADM_POL_MAX_NAME))
            adm_cf_err(x, "invalid policy name %s (use 1..%d letters, digits, '_', '.', '-')",
                       adm_cf_quote(&q, name), ADM_POL_MAX_NAME);
        else
            p->name = adm_cf_strdup(x, name);
        if (adm_cf_want_object(x, pv) && (p->type = policy_type(x, pv)) >= 0) {
            p->conf = adm_pol_kinds[p->type].configure(x, pv, p);
            /* the identity: the type and the definition as written */
            if ((text = json_dumps(pv, JSON_SORT_KEYS | JSON_COMPACT))) {
                adm_pol_hash_add(p, text, strlen(text));
                free(text);
            } else {
                x->nomem = 1;
            }
        }
        adm_cf_pop(x, mark);
    }
}

/* A route's "policies": names, checked against the section later
 * (adm_cf_policies_check), since it may come after the routes. */
void adm_cf_route_policies(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    size_t n;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if ((n = json_array_size(v)) > ADM_POL_MAX) {
        adm_cf_err(x, "at most %d policies a route (this one has %zu)", ADM_POL_MAX, n);
        return;
    }
    if (!(r->policies = adm_cf_calloc(x, n ? n : 1, sizeof(*r->policies))))
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        for (size_t k = 0; s && k < r->npolicies; k++)
            if (!strcmp(r->policies[k], s)) {
                adm_cf_err(x, "policy %s named twice (also at %zu)", adm_cf_quote(&q, s), k);
                s = NULL;
            }
        if (s && (r->policies[r->npolicies] = adm_cf_strdup(x, s)))
            r->npolicies++;
        adm_cf_pop(x, mark);
    }
}

static int policy_index(const struct adm_config *c, const char *name, const char **near)
{
    size_t best = 3;

    *near = NULL;
    for (size_t k = 0; k < c->npolicies; k++) {
        size_t d;
        if (!c->policies[k].name)
            continue;
        if (!strcmp(c->policies[k].name, name))
            return (int)k;
        if ((d = adm_cf_edit_distance(name, c->policies[k].name)) < best) {
            best = d;
            *near = c->policies[k].name;
        }
    }
    return -1;
}

/* The names of <c>'s policies, joined by ", " into <buf> (<cap> bytes; "..."
 * ends a list cut short); "" when it has none. */
static void policy_names(const struct adm_config *c, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < c->npolicies; k++) {
        const char *n = c->policies[k].name;
        if (!n)
            continue;
        if (o + 2 + strlen(n) + 6 > cap) { /* room left for ", ..." */
            snprintf(buf + o, cap - o, "%s...", o ? ", " : "");
            return;
        }
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", n);
    }
}

/* What each policy names in other sections (its kind's check op), at
 * /policies/NAME. */
static void check_references(struct adm_cf *x)
{
    const struct adm_config *c = x->c;

    for (size_t k = 0; k < c->npolicies; k++) {
        struct adm_policy *p = &c->policies[k];
        if (p->type < 0 || !p->name || !p->conf || !adm_pol_kinds[p->type].check)
            continue;
        size_t mark = adm_cf_push_key(x, "policies");
        adm_cf_push_key(x, p->name);
        adm_pol_kinds[p->type].check(x, p);
        adm_cf_pop(x, mark);
    }
}

void adm_cf_policies_check(struct adm_cf *x)
{
    const struct adm_config *c = x->c;
    char path[96];
    struct adm_cf_qbuf q, qn;

    check_references(x);

    for (size_t i = 0; i < c->nroutes; i++) {
        struct adm_route *r = &c->routes[i];
        const char *auth = NULL, *body = NULL;
        for (size_t k = 0; k < r->npolicies; k++) {
            const char *near;
            int idx = policy_index(c, r->policies[k], &near);
            snprintf(path, sizeof(path), "/routes/%zu/policies/%zu", i, k);
            if (idx < 0 && near) {
                adm_cf_err_at(x, path, "unknown policy %s (did you mean %s?)",
                              adm_cf_quote(&q, r->policies[k]), adm_cf_quote(&qn, near));
                continue;
            }
            if (idx < 0) {
                char have[256];
                policy_names(c, have, sizeof(have));
                if (have[0])
                    adm_cf_err_at(x, path, "unknown policy %s (the config defines: %s)",
                                  adm_cf_quote(&q, r->policies[k]), have);
                else
                    adm_cf_err_at(x, path,
                                  "unknown policy %s (the config defines none: a route names "
                                  "policies of the top-level \"policies\" object)",
                                  adm_cf_quote(&q, r->policies[k]));
                continue;
            }
            r->policy_idx[k] = (unsigned char)idx;
            if (c->policies[idx].type < 0)
                continue;
            if (adm_pol_kinds[c->policies[idx].type].body) {
                if (body)
                    adm_cf_err_at(x, path,
                                  "a route takes at most one compress policy (it has %s already)",
                                  adm_cf_quote(&q, body));
                body = r->policies[k];
            }
            if (!adm_pol_kinds[c->policies[idx].type].auth)
                continue;
            if (auth)
                adm_cf_err_at(x, path,
                              "a route takes at most one authentication policy (it has %s "
                              "already)",
                              adm_cf_quote(&q, auth));
            else
                auth = r->policies[k];
        }
    }
}

int adm_policies_same(const struct adm_config *a, const struct adm_config *b)
{
    if (a->npolicies != b->npolicies)
        return 0;
    for (size_t i = 0; i < a->npolicies; i++) {
        const struct adm_policy *x = &a->policies[i], *y = &b->policies[i];
        if (x->type != y->type || x->hash != y->hash || !x->name || !y->name ||
            strcmp(x->name, y->name))
            return 0;
    }
    return 1;
}

static void policy_free(struct adm_policy *p)
{
    free(p->name);
    if (p->conf && p->type >= 0)
        adm_pol_kinds[p->type].free(p->conf);
}

void adm_cf_policies_free(struct adm_config *c)
{
    for (size_t i = 0; i < c->npolicies; i++)
        policy_free(&c->policies[i]);
    free(c->policies);
}

/* ---- the snapshot's policies ---- */

struct adm_spolicy *adm_spolicy_for(struct adm_policy *p, struct adm_spolicy *const *prev,
                                    size_t nprev, unsigned nworkers)
{
    const struct adm_pol_kind *k = &adm_pol_kinds[p->type];
    struct adm_spolicy *sp;

    for (size_t i = 0; i < nprev; i++)
        if (prev[i]->type == p->type && prev[i]->hash == p->hash &&
            !strcmp(prev[i]->name, p->name)) {
            prev[i]->refs++;
            return prev[i];
        }
    if (!(sp = calloc(1, sizeof(*sp))))
        return NULL;
    sp->refs = 1;
    sp->type = p->type;
    sp->hash = p->hash;
    if (!(sp->name = strdup(p->name)))
        goto fail;
    if (k->state_new && !(sp->state = k->state_new(p->conf, nworkers)))
        goto fail;
    sp->nworkers = nworkers;
    if (nworkers &&
        !(sp->ctr = aligned_alloc(_Alignof(struct adm_pol_wctr), nworkers * sizeof(*sp->ctr))))
        goto fail_state;
    if (nworkers)
        memset(sp->ctr, 0, nworkers * sizeof(*sp->ctr));
    sp->conf = p->conf;
    p->conf = NULL;
    return sp;
fail_state:
    if (sp->state)
        k->state_free(sp->state);
fail:
    free(sp->name);
    free(sp);
    return NULL;
}

const char *const adm_pol_result_names[ADM_POLR_N] = {
    "passed", "200", "204", "401", "403", "429", "500", "503", "other",
};

enum adm_pol_result adm_pol_result_of(int status)
{
    switch (status) {
    case 200:
        return ADM_POLR_200;
    case 204:
        return ADM_POLR_204;
    case 401:
        return ADM_POLR_401;
    case 403:
        return ADM_POLR_403;
    case 429:
        return ADM_POLR_429;
    case 500:
        return ADM_POLR_500;
    case 503:
        return ADM_POLR_503;
    default:
        return ADM_POLR_OTHER;
    }
}

void adm_spolicy_coded(const struct adm_spolicy *sp, uint64_t coded[H1_CODING_COUNT], uint64_t *in,
                       uint64_t *out)
{
    memset(coded, 0, H1_CODING_COUNT * sizeof(*coded));
    *in = *out = 0;
    for (unsigned w = 0; sp->ctr && w < sp->nworkers; w++) {
        for (int i = 0; i < H1_CODING_COUNT; i++)
            coded[i] += atomic_load_explicit(&sp->ctr[w].coded[i], memory_order_relaxed);
        *in += atomic_load_explicit(&sp->ctr[w].bytes_in, memory_order_relaxed);
        *out += atomic_load_explicit(&sp->ctr[w].bytes_out, memory_order_relaxed);
    }
}

void adm_spolicy_counts(const struct adm_spolicy *sp, uint64_t *v)
{
    memset(v, 0, ADM_POLR_N * sizeof(*v));
    for (unsigned w = 0; sp->ctr && w < sp->nworkers; w++)
        for (int i = 0; i < ADM_POLR_N; i++)
            v[i] += atomic_load_explicit(&sp->ctr[w].n[i], memory_order_relaxed);
}

void adm_spolicy_release(struct adm_spolicy *sp)
{
    if (!sp || --sp->refs)
        return;
    if (sp->state)
        adm_pol_kinds[sp->type].state_free(sp->state);
    if (sp->conf)
        adm_pol_kinds[sp->type].free(sp->conf);
    free(sp->ctr);
    free(sp->name);
    free(sp);
}

size_t adm_policies_log_query(struct adm_spolicy *const *p, size_t n, char *out, size_t cap,
                              int *whole)
{
    size_t len = 0;

    *whole = 0;
    for (size_t i = 0; i < n; i++) {
        const struct adm_ak_conf *c = p[i]->conf;
        if (p[i]->type != ADM_POL_API_KEY || !c->query)
            continue;
        int seen = 0;
        for (const char *q = out, *e = out + len; q < e && !seen;) {
            const char *amp = memchr(q, '&', (size_t)(e - q)), *qe = amp ? amp : e;
            seen = (size_t)(qe - q) == c->query_len && !strncasecmp(q, c->query, c->query_len);
            q = qe + 1;
        }
        if (seen)
            continue;
        if (len + (len > 0) + c->query_len > cap) {
            *whole = 1;
            return 0;
        }
        if (len)
            out[len++] = '&';
        memcpy(out + len, c->query, c->query_len);
        len += c->query_len;
    }
    return len;
}
