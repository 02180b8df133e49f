/*
 * snapshot.c - building, publishing and reclaiming routing snapshots; the
 * pools' servers from their config entries, a host name giving one server
 * per address it resolves to now (admin/resolve.h), and the re-derived
 * snapshot that follows a changed answer under the same generation.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/snapshot.h"
#include "admin/clock.h"
#include "admin/state.h"
#include "admin/http1/status.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

void adm_sroute_free(void *udata)
{
    struct adm_sroute *r = udata;

    if (!r)
        return;
    free(r->id);
    free(r->pattern);
    free(r->upstream_name);
    free(r->strip_prefix);
    free(r->rewrite_src);
    free(r->rewrite);
    for (size_t i = 0; i < r->nupgrades; i++)
        free(r->upgrades[i]);
    free(r->upgrades);
    adm_shdrs_free(r->reqh);
    adm_shdrs_free(r->resph);
    free(r->head);
    free(r->tail);
    free(r->body);
    if (r->ctrs && --r->ctrs->refs == 0)
        free(r->ctrs);
    free(r);
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *dups(const char *s)
{
    return s ? dupn(s, strlen(s)) : NULL;
}

/* A copy of route id <id> with ADM_SAMPLE_ROUTE_PAD bytes at least
 * (zeros past it), which the live sample's writer reads whole. */
static char *dup_id(const char *id)
{
    size_t n = strlen(id);
    char *d = calloc(n + 1 > ADM_SAMPLE_ROUTE_PAD ? n + 1 : ADM_SAMPLE_ROUTE_PAD, 1);

    if (d)
        memcpy(d, id, n);
    return d;
}

/* Splits the rewrite template (already copied to r->rewrite_src) into
 * literal parts and parameter references. */
static int build_rewrite(struct adm_sroute *r)
{
    const char *t = r->rewrite_src;
    size_t n = 1;

    for (const char *p = t; *p; p++)
        n += *p == '{';
    if (!(r->rewrite = calloc(2 * n + 1, sizeof(*r->rewrite))))
        return -1;
    while (*t) {
        const char *b = strchr(t, '{'), *e;
        struct adm_rw_part *part = &r->rewrite[r->nrewrite];
        if (b != t) {
            part->param = -1;
            part->s = t;
            part->len = b ? (size_t)(b - t) : strlen(t);
            r->nrewrite++;
            t += part->len;
            continue;
        }
        e = strchr(b, '}');
        if (!e)
            return -1; /* the validator refuses this */
        part->param = adm_pattern_param_index(r->pattern, b + 1, (size_t)(e - b - 1));
        if (part->param < 0)
            return -1;
        r->nrewrite++;
        t = e + 1;
    }
    return 0;
}

static int encode_local(struct adm_sroute *r, const struct adm_route *c)
{
    char tail[64];
    size_t cap = 256, len;
    int has_ctype = 0;
    char *h;

    if (c->action == ADM_ACTION_RESPONSE) {
        r->status = c->response.status;
        for (size_t i = 0; i < c->response.nheaders; i++)
            cap += strlen(c->response.headers[i].name) + strlen(c->response.headers[i].value) + 4;
        r->body = dupn(c->response.body, c->response.body_len);
        r->body_len = c->response.body_len;
    } else {
        r->status = c->redirect.status;
        cap += strlen(c->redirect.location) + 16;
        r->body = dupn("", 0);
        r->body_len = 0;
    }
    if (!r->body || !(h = malloc(cap)))
        return -1;
    len =
        (size_t)snprintf(h, cap, "HTTP/1.1 %u %s\r\n", r->status, h1_status_reason((int)r->status));
    if (c->action == ADM_ACTION_RESPONSE) {
        for (size_t i = 0; i < c->response.nheaders; i++) {
            const struct adm_header *f = &c->response.headers[i];
            len += (size_t)snprintf(h + len, cap - len, "%s: %s\r\n", f->name, f->value);
            if (strcasecmp(f->name, "content-type") == 0)
                has_ctype = 1;
        }
        if (!has_ctype && r->body_len)
            len +=
                (size_t)snprintf(h + len, cap - len, "Content-Type: text/plain; charset=utf-8\r\n");
    } else {
        len += (size_t)snprintf(h + len, cap - len, "Location: %s\r\n", c->redirect.location);
    }
    r->head = h;
    r->head_len = len;
    snprintf(tail, sizeof(tail), "Content-Length: %zu\r\n\r\n", r->body_len);
    if (!(r->tail = dups(tail)))
        return -1;
    r->tail_len = strlen(tail);
    return 0;
}

/* The counters of a route: <prev>'s when it has them for as many workers
 * (a route of the same id in the config being replaced), else new ones. */
static struct adm_rctrs *rctrs_for(const struct adm_sroute *prev, unsigned nworkers)
{
    struct adm_rctrs *k;
    size_t size = sizeof(*k) + sizeof(k->w[0]) * nworkers;

    if (prev && prev->ctrs && prev->ctrs->nworkers == nworkers) {
        prev->ctrs->refs++;
        return prev->ctrs;
    }
    if (!(k = aligned_alloc(64, (size + 63) & ~(size_t)63)))
        return NULL;
    memset(k, 0, size);
    k->refs = 1;
    k->nworkers = nworkers;
    return k;
}

/* Copies the route's upgrades into <r>; freed with <r> on failure. */
static int copy_upgrades(struct adm_sroute *r, const struct adm_route *c)
{
    if (!(r->upgrades = calloc(c->nupgrades ? c->nupgrades : 1, sizeof(*r->upgrades))))
        return -1;
    for (; r->nupgrades < c->nupgrades; r->nupgrades++)
        if (!(r->upgrades[r->nupgrades] = dups(c->upgrades[r->nupgrades])))
            return -1;
    return 0;
}

static struct adm_sroute *sroute_make(const struct adm_route *c, unsigned nworkers, size_t upstream,
                                      const struct adm_sroute *prev)
{
    struct adm_sroute *r = calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    r->action = c->action;
    r->nworkers = nworkers;
    r->npol = (unsigned char)c->npolicies;
    memcpy(r->pol, c->policy_idx, sizeof(r->pol));
    if (!(r->id = dup_id(c->id)) || !(r->pattern = dups(c->pattern)))
        goto fail;
    r->id_len = strlen(r->id);
    if (!(r->ctrs = rctrs_for(prev, nworkers)))
        goto fail;
    r->ctr = r->ctrs->w;
    if (c->action == ADM_ACTION_UPSTREAM) {
        r->upstream = upstream;
        r->timeout_ms = c->timeout_ms;
        r->request_buffering = c->request_buffering > 0;
        r->max_buffered_body_bytes = c->max_buffered_body_bytes;
        if (!(r->upstream_name = dups(c->upstream)))
            goto fail;
        if (c->strip_prefix) {
            if (!(r->strip_prefix = dups(c->strip_prefix)))
                goto fail;
            r->strip_len = strlen(c->strip_prefix);
            /* "/api/" strips like "/api" */
            while (r->strip_len > 1 && r->strip_prefix[r->strip_len - 1] == '/')
                r->strip_len--;
        }
        if (c->rewrite && (!(r->rewrite_src = dups(c->rewrite)) || build_rewrite(r) < 0))
            goto fail;
        if (c->upgrades && copy_upgrades(r, c) < 0)
            goto fail;
        if (c->request_headers && !(r->reqh = adm_shdrs_new(c->request_headers, c->pattern)))
            goto fail;
        if (c->response_headers && !(r->resph = adm_shdrs_new(c->response_headers, c->pattern)))
            goto fail;
    } else if (encode_local(r, c) < 0) {
        goto fail;
    }
    return r;
fail:
    adm_sroute_free(r);
    return NULL;
}

static size_t id_hash(const char *id)
{
    uint64_t h = adm_hash(id, strlen(id));

    return (size_t)(h ^ (h >> 29));
}

static void index_route(const rt_route *rr, void *arg)
{
    struct adm_bind_ctx *ctx = arg;
    const struct adm_sroute *sr = rt_route_udata(rr);
    size_t i = id_hash(sr->id) & (ctx->cap - 1);

    while (ctx->byid[i])
        i = (i + 1) & (ctx->cap - 1);
    ctx->byid[i] = sr;
}

void adm_bind_ctx_init(struct adm_bind_ctx *ctx, unsigned nworkers, const struct adm_snapshot *prev)
{
    size_t n = prev ? rt_table_count(prev->rt) : 0;

    ctx->nworkers = nworkers;
    ctx->byid = NULL;
    ctx->cap = 0;
    if (!n)
        return;
    for (ctx->cap = 16; ctx->cap < 2 * n; ctx->cap *= 2)
        ;
    if (!(ctx->byid = calloc(ctx->cap, sizeof(*ctx->byid)))) {
        ctx->cap = 0;
        return;
    }
    rt_table_foreach(prev->rt, index_route, ctx);
}

void adm_bind_ctx_clear(struct adm_bind_ctx *ctx)
{
    free(ctx->byid);
    ctx->byid = NULL;
    ctx->cap = 0;
}

static const struct adm_sroute *by_id(const struct adm_bind_ctx *ctx, const char *id)
{
    size_t i;

    if (!ctx->cap)
        return NULL;
    for (i = id_hash(id) & (ctx->cap - 1); ctx->byid[i]; i = (i + 1) & (ctx->cap - 1))
        if (strcmp(ctx->byid[i]->id, id) == 0)
            return ctx->byid[i];
    return NULL;
}

/* <arg> is a struct adm_bind_ctx */
static void *make_sroute(const struct adm_route *c, void *arg)
{
    const struct adm_bind_ctx *ctx = arg;

    return sroute_make(c, ctx->nworkers, c->upstream_index, by_id(ctx, c->id));
}

struct adm_route_binder adm_snapshot_binder(const struct adm_bind_ctx *ctx)
{
    return (struct adm_route_binder){make_sroute, adm_sroute_free, (void *)(uintptr_t)ctx};
}

struct adm_sroute *adm_sroute_new(const struct adm_route *r, const struct adm_snapshot *s,
                                  const struct adm_sroute *prev)
{
    size_t up = 0;

    if (r->action == ADM_ACTION_UPSTREAM) {
        for (up = 0; up < s->npools; up++)
            if (strcmp(up_pool_name(s->pools[up]), r->upstream) == 0)
                break;
        if (up == s->npools)
            return NULL;
    }
    /* its policies by name: the route was validated against a copy of the
     * live document, whose policies may be in another order */
    struct adm_route rr = *r;
    for (size_t k = 0; k < r->npolicies; k++) {
        size_t i = 0;
        while (i < s->npolicies && strcmp(s->policies[i]->name, r->policies[k]))
            i++;
        if (i == s->npolicies)
            return NULL;
        rr.policy_idx[k] = (unsigned char)i;
    }
    return sroute_make(&rr, s->nworkers, up, prev);
}

/* The servers of an upstream as its pool gets them: one per numeric
 * address, one per address its host name resolves to now (in the
 * resolver's order), and one that stays down for a name without any yet. */
struct srv_list {
    struct up_server_def *defs;
    struct sockaddr_storage *ss;
    char **names;         /* the defs' addresses when made here, else NULL */
    size_t *tags;         /* the config server of each */
    unsigned char *unres; /* 1: a name not resolved yet */
    size_t n, cap;
    char *resolved; /* "|addr,addr" per host name, for the pool's key */
    size_t rlen, rcap;
};

static void srv_list_clear(struct srv_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->defs);
    free(l->ss);
    free(l->names);
    free(l->tags);
    free(l->unres);
    free(l->resolved);
    memset(l, 0, sizeof(*l));
}

static int srv_grow(struct srv_list *l)
{
    size_t cap = l->cap ? 2 * l->cap : 8;
    void *a, *b, *c, *d, *e;

    if (l->n < l->cap)
        return 0;
    a = realloc(l->defs, cap * sizeof(*l->defs));
    if (a)
        l->defs = a;
    b = realloc(l->ss, cap * sizeof(*l->ss));
    if (b)
        l->ss = b;
    c = realloc(l->names, cap * sizeof(*l->names));
    if (c)
        l->names = c;
    d = realloc(l->tags, cap * sizeof(*l->tags));
    if (d)
        l->tags = d;
    e = realloc(l->unres, cap);
    if (e)
        l->unres = e;
    if (!a || !b || !c || !d || !e)
        return -1;
    l->cap = cap;
    return 0;
}

/* Appends to the key's record of what names resolve to. */
static int srv_note(struct srv_list *l, const char *text)
{
    size_t n = strlen(text);

    if (l->rlen + n + 1 > l->rcap) {
        size_t cap = (l->rlen + n + 1) * 2;
        char *r = realloc(l->resolved, cap);
        if (!r)
            return -1;
        l->resolved = r;
        l->rcap = cap;
    }
    memcpy(l->resolved + l->rlen, text, n + 1);
    l->rlen += n;
    return 0;
}

/* One server: <sa> (copied; NULL: the down placeholder of a name) of config
 * server <tag> named <name> (copied; NULL: its address as written). */
static int srv_add(struct srv_list *l, const struct adm_server *sv, size_t tag,
                   const struct sockaddr_storage *sa, socklen_t salen, const char *name)
{
    struct up_server_def *d;

    if (srv_grow(l) < 0)
        return -1;
    d = &l->defs[l->n];
    l->names[l->n] = name ? dups(name) : NULL;
    if (name && !l->names[l->n])
        return -1;
    memset(&l->ss[l->n], 0, sizeof(l->ss[l->n]));
    if (sa)
        memcpy(&l->ss[l->n], sa, salen);
    else
        salen = sizeof(struct sockaddr); /* AF_UNSPEC: a connect fails at once */
    *d = (struct up_server_def){name ? l->names[l->n] : sv->addr.text,
                                (const struct sockaddr *)&l->ss[l->n], salen, sv->weight};
    l->tags[l->n] = tag;
    l->unres[l->n] = !sa;
    l->n++;
    return 0;
}

/* The servers of config server <sv> named by host: one per address. */
static int srv_add_host(struct srv_list *l, const struct adm_upstream *u, size_t tag,
                        struct adm_resolver *res)
{
    const struct adm_server *sv = &u->servers[tag];
    const struct sockaddr_storage *addrs = NULL;
    int n = res ? adm_resolver_lookup(res, sv->addr.host, u->resolve_interval_ms, &addrs) : -1;
    char ip[INET6_ADDRSTRLEN], name[600];

    if (n <= 0)
        return srv_note(l, "|?") < 0 ? -1 : srv_add(l, sv, tag, NULL, 0, NULL);
    if (srv_note(l, "|") < 0)
        return -1;
    for (int k = 0; k < n; k++) {
        struct sockaddr_storage ss = addrs[k];
        socklen_t len;
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_port = htons(sv->addr.port);
            inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
            len = sizeof(*s6);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_port = htons(sv->addr.port);
            inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
            len = sizeof(*s4);
        }
        /* logs name it "host:port (address)" */
        snprintf(name, sizeof(name), "%s (%s)", sv->addr.text, ip);
        if (srv_note(l, ip) < 0 || srv_note(l, ",") < 0 || srv_add(l, sv, tag, &ss, len, name) < 0)
            return -1;
    }
    return 0;
}

static int srv_list_make(struct srv_list *l, const struct adm_upstream *u, struct adm_resolver *res)
{
    memset(l, 0, sizeof(*l));
    if (srv_note(l, "") < 0)
        goto fail;
    for (size_t i = 0; i < u->nservers; i++) {
        const struct adm_addr *a = &u->servers[i].addr;
        if (a->numeric ? srv_add(l, &u->servers[i], i, &a->ss, a->sslen, NULL) < 0
                       : srv_add_host(l, u, i, res) < 0)
            goto fail;
    }
    return 0;
fail:
    srv_list_clear(l);
    return -1;
}

/* The definition key of an upstream: its JSON with sorted keys plus the
 * resolved defaults that shape a pool, and what its host names resolve
 * to (<l>). */
static char *upstream_key(const struct adm_config *cfg, const struct adm_upstream *u,
                          unsigned nworkers, const struct srv_list *l)
{
    json_t *ups = json_object_get(cfg->json, "upstreams");
    json_t *def = ups ? json_object_get(ups, u->name) : NULL;
    char *js = def ? json_dumps(def, JSON_SORT_KEYS | JSON_COMPACT) : NULL, *key;
    size_t n;

    if (!js)
        return NULL;
    n = strlen(js) + l->rlen + 64;
    key = malloc(n);
    if (key)
        snprintf(key, n, "%s|%u|%u|%u%s", js, u->keepalive, u->idle_timeout_ms, nworkers,
                 l->resolved);
    free(js);
    return key;
}

/* The context of <prev> built from a definition with identity <id>, for
 * <protocols> when one was, else for other protocols; NULL when none was. */
static struct adm_tls_ctx *tls_reusable(const struct adm_snapshot *prev, const unsigned char *id,
                                        unsigned protocols)
{
    struct adm_tls_ctx *other = NULL;

    for (size_t i = 0; prev && i < prev->cfg->nlisteners; i++) {
        if (!prev->tls[i] || memcmp(adm_tls_ctx_id(prev->tls[i]), id, ADM_TLS_ID_LEN))
            continue;
        if (adm_tls_ctx_protocols(prev->tls[i]) == protocols)
            return prev->tls[i];
        other = prev->tls[i];
    }
    return other;
}

/* The client context of <prev>'s upstream of <nu>'s name when its TLS
 * identity is <nu>'s and its ALPN offer too (protocol "h2" or not), or
 * NULL. */
static SSL_CTX *uptls_reusable(const struct adm_snapshot *prev, const struct adm_upstream *nu)
{
    for (size_t i = 0; prev && i < prev->cfg->nupstreams; i++) {
        const struct adm_upstream *u = &prev->cfg->upstreams[i];
        if (prev->uptls[i] && !strcmp(u->name, nu->name) &&
            !memcmp(u->tls->id, nu->tls->id, ADM_TLS_ID_LEN) &&
            (u->protocol == ADM_UP_H2) == (nu->protocol == ADM_UP_H2))
            return prev->uptls[i];
    }
    return NULL;
}

/* The TLS contexts of <b>'s config, reused from <prev> where unchanged. A
 * listener whose protocols alone changed gets a new context (what its ALPN
 * selects is the context's) with the old one's ticket keys. */
static int build_tls(struct adm_cfgref *b, const struct adm_snapshot *prev, struct adm_errors *errs)
{
    const struct adm_config *cfg = b->cfg;
    char why[256], path[300];

    b->tls = calloc(cfg->nlisteners ? cfg->nlisteners : 1, sizeof(*b->tls));
    b->uptls = calloc(cfg->nupstreams ? cfg->nupstreams : 1, sizeof(*b->uptls));
    if (!b->tls || !b->uptls) {
        adm_errors_add(errs, "", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        const struct adm_tls_listener *t = cfg->listeners[i].tls;
        unsigned protocols = cfg->listeners[i].protocols;
        struct adm_tls_ctx *old;
        if (!t)
            continue;
        old = tls_reusable(prev, t->id, protocols);
        if (old && adm_tls_ctx_protocols(old) == protocols) {
            b->tls[i] = adm_tls_ctx_ref(old);
        } else if ((b->tls[i] = adm_tls_ctx_new(t, protocols, why, sizeof(why))) && old) {
            adm_tls_ctx_share_tickets(b->tls[i], old);
        }
        if (!b->tls[i]) {
            snprintf(path, sizeof(path), "/listeners/%zu/tls", i);
            adm_errors_add(errs, path, "%s", why);
            return -1;
        }
    }
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        const struct adm_upstream *u = &cfg->upstreams[i];
        SSL_CTX *old;
        if (!u->tls)
            continue;
        if ((old = uptls_reusable(prev, u)) && SSL_CTX_up_ref(old))
            b->uptls[i] = old;
        else
            b->uptls[i] =
                adm_tls_client_ctx_new(u->tls, u->protocol == ADM_UP_H2, why, sizeof(why));
        if (!b->uptls[i]) {
            snprintf(path, sizeof(path), "/upstreams/%s/tls", u->name);
            adm_errors_add(errs, path, "%s", why);
            return -1;
        }
    }
    return 0;
}

static void cfgref_free(struct adm_cfgref *b)
{
    for (size_t i = 0; b->tls && i < b->cfg->nlisteners; i++)
        adm_tls_ctx_unref(b->tls[i]);
    for (size_t i = 0; b->uptls && i < b->cfg->nupstreams; i++)
        SSL_CTX_free(b->uptls[i]);
    free(b->tls);
    free(b->uptls);
    adm_config_free(b->cfg);
    free(b);
}

/* The balancer and its options of <u>. */
static struct up_pool_opts pool_opts(const struct adm_upstream *u)
{
    static const enum up_balance balance[] = {
        [ADM_BALANCE_ROUND_ROBIN] = UP_ROUND_ROBIN,
        [ADM_BALANCE_LEAST_CONN] = UP_LEAST_CONN,
        [ADM_BALANCE_RANDOM_TWO] = UP_RANDOM_TWO,
        [ADM_BALANCE_HASH] = UP_HASH,
    };

    return (struct up_pool_opts){.balance = balance[u->balance],
                                 .table_size = u->table_size,
                                 .fallback = u->fallback,
                                 .panic = u->panic,
                                 .slow_start_ms = u->slow_start_ms,
                                 .seed = adm_hash(u->name, strlen(u->name))};
}

static up_pool *make_pool(const struct adm_upstream *u, const char *key, unsigned nworkers,
                          const struct srv_list *l, struct adm_errors *errs, size_t index)
{
    struct up_pool_opts opts = pool_opts(u);
    up_pool *p = up_pool_new_opts(u->name, key, l->defs, l->n, nworkers, u->keepalive, &opts);
    uint64_t now = adm_clock_ms();

    if (p && up_pool_set_tags(p, l->tags) < 0) {
        up_pool_release(p);
        p = NULL;
    }
    if (!p) {
        adm_errors_add(errs, "", "out of memory building upstream %zu", index);
        return NULL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (l->unres[i])
            up_health_set(p, i, UP_H_RESOLVING, 1, now);
    return p;
}

/* The connections of pools <a> and <b> are alike: the same protocol (an
 * HTTP/1.1 connection is no HTTP/2 session) and the same transport (no TLS
 * in either, or the same TLS definition). */
static int same_transport(const struct adm_upstream *a, const struct adm_upstream *b)
{
    if (a->protocol != b->protocol)
        return 0;
    if (!a->tls || !b->tls)
        return !a->tls && !b->tls;
    return !memcmp(a->tls->id, b->tls->id, ADM_TLS_ID_LEN);
}

/* <prev>'s pool of an upstream's name and its config there: what a new
 * snapshot's pool of that name is compared with and takes state from. */
struct prev_pool {
    up_pool *pool; /* NULL: <prev> has no pool of that name */
    const struct adm_upstream *u;
};

static struct prev_pool prev_pool_of(const struct adm_snapshot *prev, const char *name)
{
    for (size_t j = 0; prev && j < prev->npools; j++)
        if (strcmp(up_pool_name(prev->pools[j]), name) == 0)
            return (struct prev_pool){prev->pools[j], &prev->cfg->upstreams[j]};
    return (struct prev_pool){NULL, NULL};
}

/* The health flags the health thread sets on <u>'s servers. */
static unsigned marks(const struct adm_upstream *u)
{
    return (u->health_check ? UP_H_CHECK : 0) | (u->outlier.on ? UP_H_EJECTED : 0);
}

/* The health flags a new pool <p> of upstream <u> starts with, before any
 * worker can pick from it. <map> (up_pool_match's of <p> against
 * old->pool; NULL without an old pool) says which servers it keeps: those
 * have their old health word already (up_pool_carry_map), and lose only
 * the flags of checks or ejection <u> dropped. A new one starts down when
 * <u> has health_check and initially_unhealthy, or, up, starts its slow
 * start now when the pool was there before. The health thread
 * (gateway/health.c), which owns these flags, then goes on from there,
 * matching its servers by the same map; it sets the new words right after
 * it learns of the snapshot. */
static void health_start(up_pool *p, const struct adm_upstream *u, const struct prev_pool *old,
                         const size_t *map)
{
    uint64_t now = adm_clock_ms();
    /* carried over but no longer this pool's to mark */
    unsigned drop = old->pool ? marks(old->u) & ~marks(u) : 0;

    for (size_t k = 0; k < up_pool_nservers(p); k++) {
        if (!map || map[k] == UP_NONE) {
            if (u->health_check && u->initially_unhealthy)
                up_health_set(p, k, UP_H_CHECK, 1, now);
            else if (old->pool && u->slow_start_ms)
                up_health_added(p, k, now); /* new to a pool under load: ramp it */
            continue;
        }
        for (unsigned flag = UP_H_CHECK; flag <= UP_H_EJECTED; flag <<= 1)
            if ((drop & flag) && (up_health_flags(p, k) & flag))
                up_health_set(p, k, flag, 0, now);
    }
}

/* A changed pool <p> of upstream <u> takes over, from <old>, the state of
 * the servers it keeps at the same socket addresses (up_pool_match, each
 * old server to one new one): health, counters and, when the connections
 * are alike, idle connections; then its health flags start (health_start).
 * -1 on out of memory. */
static int carry_over(up_pool *p, const struct adm_upstream *u, const struct prev_pool *old)
{
    size_t *map = NULL;

    if (old->pool) {
        if (!(map = up_pool_match_new(p, old->pool, NULL)))
            return -1;
        up_pool_carry_map(p, old->pool, map, same_transport(old->u, u));
    }
    health_start(p, u, old, map);
    free(map);
    return 0;
}

double adm_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct adm_snapshot *adm_snapshot_build(struct adm_config *cfg, const struct adm_snapshot *prev,
                                        unsigned nworkers, struct adm_errors *errs)
{
    return adm_snapshot_build_res(cfg, prev, nworkers, NULL, errs);
}

/* The pool of upstream <i> of <cfg>: <prev>'s when its key is the same,
 * else a new one that takes over the state of the servers <prev>'s pool of
 * that name had at the same socket addresses (carry_over). NULL after
 * adding an error to <errs>. */
static up_pool *pool_for(const struct adm_config *cfg, size_t i, const struct adm_snapshot *prev,
                         unsigned nworkers, struct adm_resolver *res, struct adm_errors *errs)
{
    const struct adm_upstream *u = &cfg->upstreams[i];
    struct prev_pool old;
    struct srv_list l;
    up_pool *p = NULL;
    char *key;

    if (srv_list_make(&l, u, res) < 0) {
        adm_errors_add(errs, "", "out of memory");
        return NULL;
    }
    if (!(key = upstream_key(cfg, u, nworkers, &l))) {
        adm_errors_add(errs, "", "out of memory");
        srv_list_clear(&l);
        return NULL;
    }
    old = prev_pool_of(prev, u->name);
    if (old.pool && strcmp(up_pool_key(old.pool), key) == 0) {
        up_pool_retain(old.pool);
        p = old.pool;
    } else if ((p = make_pool(u, key, nworkers, &l, errs, i)) && carry_over(p, u, &old) < 0) {
        adm_errors_add(errs, "", "out of memory building upstream %zu", i);
        up_pool_release(p);
        p = NULL;
    }
    free(key);
    srv_list_clear(&l);
    return p;
}

/* What the access log leaves out of every request's query. */
static void set_log_query(struct adm_snapshot *s)
{
    int whole;

    s->log_qlen = (unsigned char)adm_policies_log_query(s->policies, s->npolicies, s->log_q,
                                                        sizeof(s->log_q), &whole);
    s->log_q_whole = (unsigned char)whole;
}

/* The policies of s->cfg: those of <prev> whose name and definition stay
 * carried over, state and all (a push resets no rate limit); the others
 * new, taking their compiled definitions from the config. */
static int build_policies(struct adm_snapshot *s, const struct adm_snapshot *prev,
                          struct adm_errors *errs)
{
    struct adm_config *cfg = s->cfg;

    if (!cfg->npolicies)
        return 0;
    if (!(s->policies = calloc(cfg->npolicies, sizeof(*s->policies))))
        goto nomem;
    for (; s->npolicies < cfg->npolicies; s->npolicies++) {
        struct adm_spolicy *sp =
            adm_spolicy_for(&cfg->policies[s->npolicies], prev ? prev->policies : NULL,
                            prev ? prev->npolicies : 0, s->nworkers);
        if (!sp)
            goto nomem;
        s->policies[s->npolicies] = sp;
    }
    set_log_query(s);
    return 0;
nomem:
    adm_errors_add(errs, "", "out of memory building the policies");
    return -1;
}

struct adm_snapshot *adm_snapshot_build_res(struct adm_config *cfg, const struct adm_snapshot *prev,
                                            unsigned nworkers, struct adm_resolver *res,
                                            struct adm_errors *errs)
{
    double t0 = adm_now_ms();
    struct adm_snapshot *s;

    if (res && adm_resolver_configure(res, cfg, errs) < 0) {
        adm_config_free(cfg);
        return NULL;
    }
    if (!(s = calloc(1, sizeof(*s))))
        goto fail_cfg;
    if (!(s->base = calloc(1, sizeof(*s->base)))) {
        free(s);
        goto fail_cfg;
    }
    s->base->cfg = s->cfg = cfg;
    s->base->refs = 1;
    s->nworkers = nworkers;
    s->pins = aligned_alloc(64, sizeof(*s->pins) * nworkers);
    if (!s->pins)
        goto fail;
    for (unsigned w = 0; w < nworkers; w++)
        atomic_init(&s->pins[w].n, 0);
    s->npools = cfg->nupstreams;
    if (s->npools && !(s->pools = calloc(s->npools, sizeof(*s->pools))))
        goto fail;
    for (size_t i = 0; i < cfg->nupstreams; i++)
        if (!(s->pools[i] = pool_for(cfg, i, prev, nworkers, res, errs)))
            goto fail;
    if (build_policies(s, prev, errs) < 0)
        goto fail;
    if (build_tls(s->base, prev, errs) < 0)
        goto fail;
    s->samples = adm_sample_set_for(prev ? prev->samples : NULL, nworkers, cfg->sampling);
    if (cfg->sampling && !s->samples) {
        adm_errors_add(errs, "", "out of memory for the sampling rings");
        goto fail;
    }
    s->tls = s->base->tls;
    s->uptls = s->base->uptls;
    if (cfg->table) { /* validated and bound already */
        s->rt = cfg->table;
        cfg->table = NULL;
    } else {
        struct adm_bind_ctx ctx;

        adm_bind_ctx_init(&ctx, nworkers, prev);
        s->rt = adm_config_build_routes(cfg, make_sroute, adm_sroute_free, &ctx, errs);
        adm_bind_ctx_clear(&ctx);
    }
    if (!s->rt)
        goto fail;
    s->build_ms = adm_now_ms() - t0;
    return s;
fail:
    adm_snapshot_free(s);
    return NULL;
fail_cfg:
    adm_config_free(cfg);
    adm_errors_add(errs, "", "out of memory");
    return NULL;
}

void adm_snapshot_free(struct adm_snapshot *s)
{
    if (!s)
        return;
    rt_table_free(s->rt);
    for (size_t i = 0; i < s->npools; i++)
        up_pool_release(s->pools[i]);
    free(s->pools);
    for (size_t i = 0; i < s->npolicies; i++)
        adm_spolicy_release(s->policies[i]);
    free(s->policies);
    free(s->pins);
    adm_sample_set_release(s->samples);
    if (s->base && --s->base->refs == 0)
        cfgref_free(s->base);
    free(s);
}

struct adm_snapshot *adm_snapshot_derive(const struct adm_snapshot *cur, rt_table *rt)
{
    double t0 = adm_now_ms();
    struct adm_snapshot *s = calloc(1, sizeof(*s));

    if (!s)
        goto fail;
    s->base = cur->base;
    s->base->refs++;
    s->cfg = cur->cfg;
    s->tls = cur->tls;
    s->uptls = cur->uptls;
    s->nworkers = cur->nworkers;
    s->rt = rt;
    if ((s->samples = cur->samples))
        s->samples->refs++;
    s->pins = aligned_alloc(64, sizeof(*s->pins) * s->nworkers);
    if (!s->pins)
        goto fail_s;
    for (unsigned w = 0; w < s->nworkers; w++)
        atomic_init(&s->pins[w].n, 0);
    s->npools = cur->npools;
    if (s->npools) {
        if (!(s->pools = calloc(s->npools, sizeof(*s->pools))))
            goto fail_s;
        for (size_t i = 0; i < s->npools; i++) {
            s->pools[i] = cur->pools[i];
            up_pool_retain(s->pools[i]);
        }
    }
    if (cur->npolicies) {
        if (!(s->policies = calloc(cur->npolicies, sizeof(*s->policies))))
            goto fail_s;
        for (; s->npolicies < cur->npolicies; s->npolicies++) {
            s->policies[s->npolicies] = cur->policies[s->npolicies];
            s->policies[s->npolicies]->refs++;
        }
        set_log_query(s);
    }
    s->build_ms = adm_now_ms() - t0;
    return s;
fail_s:
    adm_snapshot_free(s);
    return NULL;
fail:
    rt_table_free(rt);
    return NULL;
}

static int has_names(const struct adm_upstream *u)
{
    for (size_t i = 0; i < u->nservers; i++)
        if (!u->servers[i].addr.numeric)
            return 1;
    return 0;
}

int adm_snapshot_reresolve(const struct adm_snapshot *cur, struct adm_resolver *res,
                           struct adm_snapshot **out)
{
    up_pool **pools = calloc(cur->npools ? cur->npools : 1, sizeof(*pools));
    struct adm_errors errs;
    size_t changed = 0;
    int rc = -1;
    rt_txn *tx;
    rt_table *rt;
    struct adm_snapshot *s = NULL;

    *out = NULL;
    adm_errors_init(&errs);
    if (!pools)
        return -1;
    for (size_t i = 0; i < cur->npools; i++) {
        if (!has_names(&cur->cfg->upstreams[i])) {
            pools[i] = cur->pools[i];
            up_pool_retain(pools[i]);
            continue;
        }
        if (!(pools[i] = pool_for(cur->cfg, i, cur, cur->nworkers, res, &errs)))
            goto done;
        if (pools[i] != cur->pools[i]) /* it carried over what stays (pool_for) */
            changed++;
    }
    rc = 0;
    if (!changed)
        goto done;
    rc = -1;
    /* the same routes in a table of its own: tables are not shared */
    if (!(tx = rt_txn_begin(cur->rt)) || !(rt = rt_txn_commit(tx)) ||
        !(s = adm_snapshot_derive(cur, rt)))
        goto done;
    for (size_t i = 0; i < cur->npools; i++) {
        up_pool_release(s->pools[i]);
        s->pools[i] = pools[i];
        pools[i] = NULL;
    }
    *out = s;
    rc = 0;
done:
    for (size_t i = 0; i < cur->npools; i++)
        up_pool_release(pools[i]);
    free(pools);
    adm_errors_clear(&errs);
    return rc;
}

int adm_swap_init(struct adm_swap *sw, unsigned nworkers, void (*notify)(void *arg, unsigned w),
                  void *arg)
{
    memset(sw, 0, sizeof(*sw));
    sw->nworkers = nworkers;
    sw->notify = notify;
    sw->notify_arg = arg;
    atomic_init(&sw->current, NULL);
    atomic_init(&sw->canary, NULL);
    atomic_init(&sw->epoch, 0);
    atomic_init(&sw->rollout, 0);
    sw->acks = aligned_alloc(64, sizeof(*sw->acks) * (nworkers ? nworkers : 1));
    sw->roctr = aligned_alloc(64, sizeof(*sw->roctr) * (nworkers ? nworkers : 1));
    if (!sw->acks || !sw->roctr) {
        free(sw->acks);
        free(sw->roctr);
        return -1;
    }
    memset(sw->roctr, 0, sizeof(*sw->roctr) * (nworkers ? nworkers : 1));
    for (unsigned w = 0; w < nworkers; w++)
        atomic_init(&sw->acks[w].seq, 0);
    return 0;
}

void adm_swap_destroy(struct adm_swap *sw)
{
    struct adm_snapshot *s = sw->retired, *next;

    for (; s; s = next) {
        next = s->next_retired;
        adm_snapshot_free(s);
    }
    adm_snapshot_free(atomic_load(&sw->current));
    adm_snapshot_free(atomic_load(&sw->canary));
    free(sw->acks);
    free(sw->roctr);
    memset(sw, 0, sizeof(*sw));
}

/* <s> goes to the retired list, freed once every worker acknowledged
 * publication <by> and nothing pins it. */
static void retire(struct adm_swap *sw, struct adm_snapshot *s, uint64_t by)
{
    s->replaced_by = by;
    s->next_retired = sw->retired;
    sw->retired = s;
    sw->nretired++;
}

static void notify_all(struct adm_swap *sw)
{
    for (unsigned w = 0; sw->notify && w < sw->nworkers; w++)
        sw->notify(sw->notify_arg, w);
}

/* <s>, its generation set, becomes current. */
static void publish(struct adm_swap *sw, struct adm_snapshot *s)
{
    struct adm_snapshot *old = atomic_load_explicit(&sw->current, memory_order_relaxed);

    s->seq = ++sw->seq; /* the admin's own: workers acknowledge the epoch */
    atomic_store_explicit(&sw->current, s, memory_order_seq_cst);
    /* after the store: a worker that acknowledges this number loads <s> */
    atomic_store_explicit(&sw->epoch, s->seq, memory_order_release);
    if (old) {
        retire(sw, old, s->seq);
        sw->swaps++;
    }
    notify_all(sw);
}

void adm_swap_canary_start(struct adm_swap *sw, struct adm_snapshot *c, unsigned pct,
                           int by_request, uint64_t salt, uint64_t rollout)
{
    c->canary_pct = pct;
    c->canary_by_request = by_request != 0;
    c->canary_salt = salt;
    c->rollout = rollout;
    /* its generation now, never written again while workers read it: the
     * one it keeps when promoted, and a number no other config gets even
     * when it is dropped (a connection caches its listener's definition
     * by generation: gw_conn_listener) */
    c->gen = ++sw->gen;
    atomic_store_explicit(&sw->rollout, rollout, memory_order_relaxed);
    /* release: a worker that loads <c> sees the fields above */
    atomic_store_explicit(&sw->canary, c, memory_order_seq_cst);
}

void adm_swap_canary_drop(struct adm_swap *sw)
{
    struct adm_snapshot *c = atomic_load_explicit(&sw->canary, memory_order_relaxed);

    if (!c)
        return;
    atomic_store_explicit(&sw->canary, NULL, memory_order_seq_cst);
    atomic_store_explicit(&sw->rollout, 0, memory_order_relaxed);
    /* a publication of its own: a worker that acknowledges it can no
     * longer load the canary, which is then freed once unpinned */
    atomic_store_explicit(&sw->epoch, ++sw->seq, memory_order_release);
    retire(sw, c, sw->seq);
    notify_all(sw);
}

void adm_swap_canary_promote(struct adm_swap *sw)
{
    struct adm_snapshot *c = atomic_load_explicit(&sw->canary, memory_order_relaxed);

    if (!c)
        return;
    /* current first: a request that still loads the canary pins the
     * snapshot that is current now, which is as good */
    publish(sw, c);
    atomic_store_explicit(&sw->canary, NULL, memory_order_seq_cst);
    atomic_store_explicit(&sw->rollout, 0, memory_order_relaxed);
}

void adm_swap_publish(struct adm_swap *sw, struct adm_snapshot *s)
{
    s->gen = ++sw->gen;
    publish(sw, s);
}

void adm_swap_republish(struct adm_swap *sw, struct adm_snapshot *s)
{
    struct adm_snapshot *cur = atomic_load_explicit(&sw->current, memory_order_relaxed);

    /* the live one's: during a rollout sw->gen is the canary's */
    s->gen = cur ? cur->gen : sw->gen;
    publish(sw, s);
}

uint64_t adm_swap_fence(struct adm_swap *sw)
{
    /* after the caller's stores: a worker that acknowledges this number
     * loads what they stored */
    atomic_store_explicit(&sw->epoch, ++sw->seq, memory_order_seq_cst);
    notify_all(sw);
    return sw->seq;
}

int adm_swap_fenced(const struct adm_swap *sw, uint64_t seq)
{
    for (unsigned w = 0; w < sw->nworkers; w++)
        if (atomic_load_explicit(&sw->acks[w].seq, memory_order_acquire) < seq)
            return 0;
    return 1;
}

static int can_free(const struct adm_swap *sw, const struct adm_snapshot *s)
{
    if (!adm_swap_fenced(sw, s->replaced_by))
        return 0;
    for (unsigned w = 0; w < s->nworkers; w++)
        if (atomic_load_explicit(&s->pins[w].n, memory_order_acquire) != 0)
            return 0;
    return 1;
}

size_t adm_swap_reclaim(struct adm_swap *sw)
{
    struct adm_snapshot **pp = &sw->retired;

    while (*pp) {
        struct adm_snapshot *s = *pp;
        if (can_free(sw, s)) {
            *pp = s->next_retired;
            sw->nretired--;
            adm_snapshot_free(s);
        } else {
            pp = &s->next_retired;
        }
    }
    return sw->nretired;
}
