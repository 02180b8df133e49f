/*
 * match.c - looking a request up in one routing table version.
 *
 * One depth-first walk decides hit, 404 and 405 together: at every node the
 * static child is tried first, then the regexp children (in registration
 * order, held by the {param} child), then the {param} child, then the
 * catch-all,
 * so the first leaf that takes the method is the most specific route; the
 * leaves passed on the way add their methods to the allow set, which is the
 * 405's answer when no leaf takes the method. Nothing here allocates, locks
 * or writes memory other than the caller's result and params.
 */
#include "router/router_int.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The index of the child whose label starts with <ch>, or -1. Up to 16
 * children a plain loop: its branches are predicted, so the CPU walks on to
 * the child before the compare is done, where a vector compare's result
 * must come back through a mask first (and choosing between the two by
 * fan-out is itself a branch that mispredicts along mixed paths: measured,
 * GitHub-all 7.9 -> 7.2 us, 100k/200 hot 1.65x -> 1.1-1.4x). Wider nodes use
 * SSE2 on the first bytes, padded to 16 (table.c). */
static inline int kid_index(const struct rt_node *n, unsigned char ch)
{
    const unsigned char *f = rt_node_firsts(n);
    unsigned nk = n->nkids;
    if (nk <= 16) {
        for (unsigned i = 0; i < nk; i++)
            if (f[i] == ch)
                return (int)i;
        return -1;
    }
#ifdef __SSE2__
    const __m128i needle = _mm_set1_epi8((char)ch);
    for (unsigned base = 0; base < nk; base += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(f + base));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, needle));
        if (nk - base < 16)
            mask &= (1u << (nk - base)) - 1;
        if (mask)
            return (int)(base + (unsigned)__builtin_ctz(mask));
    }
    return -1;
#else
    for (unsigned i = 0; i < nk; i++)
        if (f[i] == ch)
            return (int)i;
    return -1;
#endif
}

/* 1 when a[0..n) == b[0..n); words at a time for the short labels here. */
static inline int same(const char *a, const char *b, size_t n)
{
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    while (n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

struct walk {
    uint64_t mbit; /* the request's method bit (0: a token no route names) */
    int head;      /* HEAD: GET routes take it too */
    const char *s; /* the key being walked: host, then path */
    size_t len;
    struct rt_param *params;
    size_t cap, np;
    uint64_t allow;
    const struct rt_route *hit;
    unsigned infix_budget; /* infix catch-all values left to try in this walk */
    rt_ctx *ctx;           /* for regexps: the caller's, or made for this lookup */
    int own_ctx;           /* ctx was made here: rt_lookup frees it */
};

static inline void push(struct walk *w, const char *v, size_t len)
{
    if (w->np < w->cap) {
        w->params[w->np].value = v;
        w->params[w->np].len = len;
    }
    w->np++;
}

/* Picks the route of leaf <n> that takes the method: the route naming it,
 * then (HEAD) the GET route, then the any-method route. */
static int leaf_take(struct walk *w, const struct rt_node *n)
{
    const struct rt_route *get = NULL, *any = NULL;

    for (size_t i = 0; i < n->nroutes; i++) {
        const struct rt_route *r = n->routes[i];
        if (r->methods & w->mbit) {
            w->hit = r;
            return 1;
        }
        if (r->any)
            any = r;
        else if (w->head && (r->methods & RT_M_GET))
            get = r;
        w->allow |= r->methods;
    }
    if (get || any) {
        w->hit = get ? get : any;
        return 1;
    }
    return 0;
}

/* Whether the regexp of <x> matches the whole of v[0..len). Out of line:
 * only routes with regexps come here. */
static __attribute__((noinline)) int rx_matches(struct walk *w, const struct rt_rx *x,
                                                const char *v, size_t len)
{
    if (!w->ctx) {
        if (!(w->ctx = rt_ctx_new()))
            return 0;
        w->own_ctx = 1;
    }
    return rt_regex_match(x->re, w->ctx, v, len);
}

/* Tries the regexp children held by {param} node <n> on the segment
 * s[off..end): 1 on a hit below one of them. Out of line, so that walk_path
 * compiles as it would without regexps. */
static __attribute__((noinline)) int walk_rx(struct walk *w, const struct rt_node *n, size_t off,
                                             size_t end);

static __attribute__((noinline)) int walk_infix(struct walk *w, const struct rt_node *c,
                                                size_t off);

/* Walks the path tree below <n>, whose own token ended at <off>. */
static int walk_path(struct walk *w, const struct rt_node *n, size_t off)
{
    const size_t np = w->np;
    const char *s = w->s;
    const size_t len = w->len;

    for (;;) {
        const struct rt_node *k = NULL, *p = n->param, *c = n->catchall;
        /* params pushed by earlier iterations of this frame stay; a failed
         * branch of this iteration must only undo its own */
        const size_t mark = w->np;

        if (off == len) {
            if (n->nroutes && leaf_take(w, n))
                return 1;
            if (c && c->nroutes) {
                push(w, s + off, 0);
                if (leaf_take(w, c))
                    return 1;
            }
            w->np = np;
            return 0;
        }
        if (n->nkids) {
            int i = kid_index(n, (unsigned char)s[off]);
            if (i >= 0) {
                k = n->kids[i];
                if (k->label_len > len - off || !same(k->label + 1, s + off + 1, k->label_len - 1u))
                    k = NULL;
            }
        }
        if (k) {
            if (!p && !c) { /* nothing to backtrack to: no recursion */
                n = k;
                off += k->label_len;
                continue;
            }
            if (walk_path(w, k, off + k->label_len))
                return 1;
        }
        if (p) {
            const char *slash = memchr(s + off, '/', len - off);
            size_t end = slash ? (size_t)(slash - s) : len;
            if (end > off) {
                /* the regexps of this position hang off the {param} child
                 * (table.c), so the walk above pays nothing for them */
                if (p->nrx && walk_rx(w, p, off, end))
                    return 1;
                push(w, s + off, end - off);
                if (!c) {
                    n = p;
                    off = end;
                    continue;
                }
                if (walk_path(w, p, end))
                    return 1;
                w->np = mark;
            }
        }
        if (c) {
            /* the catch-all node's static children continue infix
             * catch-alls (a '/' after their '}'), its routes are suffix
             * ones (nothing after it) */
            if (c->nkids && walk_infix(w, c, off))
                return 1;
            if (c->nroutes) {
                push(w, s + off, len - off);
                if (leaf_take(w, c))
                    return 1;
            }
        }
        w->np = np;
        return 0;
    }
}

/* An infix catch-all at s[off..]: at least one byte, slashes included, up
 * to a '/' where the rest of its pattern matches; shortest first. A walk
 * tries at most RT_INFIX_BUDGET values in all: with k infix catch-alls in
 * one pattern the choices grow as segments^k, and a client picks the path. */
static int walk_infix(struct walk *w, const struct rt_node *c, size_t off)
{
    const char *s = w->s, *end = s + w->len, *e = s + off + 1;
    const size_t mark = w->np;

    for (; e < end && (e = memchr(e, '/', (size_t)(end - e))) != NULL; e++) {
        if (w->infix_budget == 0)
            return 0;
        w->infix_budget--;
        push(w, s + off, (size_t)(e - s) - off);
        if (walk_path(w, c, (size_t)(e - s)))
            return 1;
        w->np = mark;
    }
    return 0;
}

static __attribute__((noinline)) int walk_rx(struct walk *w, const struct rt_node *n, size_t off,
                                             size_t end)
{
    const size_t mark = w->np;

    for (size_t i = 0; i < n->nrx; i++) {
        if (!rx_matches(w, &n->rx[i], w->s + off, end - off))
            continue;
        push(w, w->s + off, end - off);
        if (walk_path(w, n->rx[i].node, end))
            return 1;
        w->np = mark;
    }
    return 0;
}

static inline unsigned char lc(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Walks the host tree below <n>; at the end of the host, the path tree of
 * the host node found. <path> and <plen> are the request's path. */
static int walk_host(struct walk *w, const struct rt_node *n, const char *host, size_t hlen,
                     size_t off, const char *path, size_t plen)
{
    const size_t np = w->np;

    if (off == hlen) {
        if (n->paths) {
            w->s = path;
            w->len = plen;
            if (walk_path(w, n->paths, 0))
                return 1;
        }
        w->np = np;
        return 0;
    }
    if (n->nkids) {
        const unsigned char *f = rt_node_firsts(n);
        const unsigned char *hit = memchr(f, lc((unsigned char)host[off]), n->nkids);
        if (hit) {
            const struct rt_node *k = n->kids[hit - f];
            size_t i = 0;
            if (k->label_len <= hlen - off) {
                while (i < k->label_len &&
                       lc((unsigned char)host[off + i]) == (unsigned char)k->label[i])
                    i++;
            }
            if (i == k->label_len && k->label_len &&
                walk_host(w, k, host, hlen, off + k->label_len, path, plen))
                return 1;
        }
    }
    if (n->param) {
        const char *e = memchr(host + off, '.', hlen - off);
        size_t end = e ? (size_t)(e - host) : hlen;
        if (end > off) {
            push(w, host + off, end - off);
            if (walk_host(w, n->param, host, hlen, end, path, plen))
                return 1;
            w->np = np;
        }
    }
    if (n->catchall) {
        /* the catch-all label: one or more whole labels, shortest first;
         * a value with an empty label in it is none */
        for (size_t e = off; e < hlen; e++) {
            if (host[e] != '.')
                continue;
            if (e == off || host[e - 1] == '.')
                break;
            push(w, host + off, e - off);
            if (walk_host(w, n->catchall, host, hlen, e, path, plen))
                return 1;
            w->np = np;
        }
    }
    w->np = np;
    return 0;
}

/* The host without port and final dot. */
static inline __attribute__((always_inline)) size_t host_name(const char *host, size_t hlen)
{
    if (!host || !hlen)
        return 0;
    if (host[0] == '[') {
        const char *e = memchr(host, ']', hlen);
        return e ? (size_t)(e - host) + 1 : hlen;
    }
    {
        /* a name has no ':': the first one starts the port */
        const char *colon = memchr(host, ':', hlen);
        if (colon)
            hlen = (size_t)(colon - host);
    }
    if (hlen && host[hlen - 1] == '.')
        hlen--;
    return hlen;
}

/* One full walk: host routes, then host-less ones. */
static int walk_all(const rt_table *t, struct walk *w, const char *host, size_t hlen,
                    const char *path, size_t plen)
{
    w->np = 0;
    w->allow = 0;
    w->hit = NULL;
    w->infix_budget = RT_INFIX_BUDGET;
    if (hlen && (t->hroot->nkids || t->hroot->param || t->hroot->catchall) &&
        walk_host(w, t->hroot, host, hlen, 0, path, plen))
        return 1;
    w->np = 0;
    w->s = path;
    w->len = plen;
    return walk_path(w, t->root, 0);
}

static void name_params(const struct rt_route *r, struct rt_match *m, struct rt_param *params,
                        size_t cap)
{
    m->route = r;
    m->nparams = r->nparams;
    for (size_t i = 0; i < r->nparams && i < cap; i++)
        params[i].name = (const char *)(r->poff + r->nparams) + r->poff[i];
}

/* Walks the trailing-slash twin of <path> (P without its final '/', or P +
 * '/'): 1 when the twin is a hit (params then point into <path>, m->slash
 * set), else 0 with w->allow the twin's methods. Kept out of line so the
 * common path's frame stays small. */
static __attribute__((noinline)) int twin_walk(const rt_table *t, struct walk *w, const char *host,
                                               size_t hlen, const char *path, size_t plen,
                                               struct rt_param *params, size_t cap,
                                               struct rt_match *m)
{
    char buf[8192];
    const char *twin = path;
    size_t tlen;
    int slash;

    if (plen >= 2 && path[plen - 1] == '/') {
        tlen = plen - 1;
        slash = -1;
    } else {
        if (plen + 1 > sizeof(buf)) {
            w->allow = 0;
            return 0;
        }
        memcpy(buf, path, plen);
        buf[plen] = '/';
        twin = buf;
        tlen = plen + 1;
        slash = +1;
    }
    if (!walk_all(t, w, host, hlen, twin, tlen))
        return 0;
    if (twin == buf) {
        /* params must point into the caller's path, not our buffer */
        for (size_t i = 0; i < w->np && i < cap; i++) {
            const char *v = params[i].value;
            if (v >= buf && v <= buf + tlen) {
                size_t o = (size_t)(v - buf);
                params[i].value = path + (o > plen ? plen : o);
                if (o + params[i].len > plen)
                    params[i].len = plen - (o > plen ? plen : o);
            }
        }
    }
    name_params(w->hit, m, params, cap);
    m->slash = slash;
    return 1;
}

/* No route takes the method: 405, or the automatic OPTIONS answer, with
 * <allow> (plus OPTIONS when automatic OPTIONS is on, since the router
 * would answer one), or 404 when no route matches at all. */
static enum rt_status not_taken(const rt_table *t, const struct walk *w, uint64_t allow,
                                struct rt_match *m)
{
    if (!allow)
        return m->status = RT_NOT_FOUND;
    if (t->opts.auto_options)
        allow |= RT_M_OPTIONS;
    m->allow = allow;
    if (w->mbit == RT_M_OPTIONS && t->opts.auto_options)
        return m->status = RT_OPTIONS_AUTO;
    return m->status = RT_NOT_ALLOWED;
}

/* The path matched no route that takes the method: "OPTIONS *", the
 * trailing-slash twin, 405 or 404. Out of line: a hit never comes here. */
static __attribute__((noinline)) enum rt_status
no_hit(const rt_table *t, struct walk *w, const char *host, size_t hlen, const char *path,
       size_t plen, struct rt_param *params, size_t cap, struct rt_match *m)
{
    uint64_t allow = w->allow;

    if (plen == 1 && path[0] == '*') { /* "OPTIONS *": every method of the table */
        /* a table without routes has no method to list: 404, as fox */
        if (w->mbit != RT_M_OPTIONS || !t->opts.auto_options || !rt_table_methods(t))
            return m->status = RT_NOT_FOUND;
        m->allow = rt_table_methods(t) | RT_M_OPTIONS;
        return m->status = RT_OPTIONS_AUTO;
    }
    if (t->opts.trailing_slash == RT_TS_STRICT || plen == 0 || (plen == 1 && path[0] == '/'))
        return not_taken(t, w, allow, m);
    if (t->opts.trailing_slash == RT_TS_RELAXED) {
        /* the twin is served as if the slash matched, so it counts for
         * the 405 too: a twin hit wins over the path's other methods */
        if (twin_walk(t, w, host, hlen, path, plen, params, cap, m))
            return m->status = RT_HIT;
        return not_taken(t, w, allow | w->allow, m);
    }
    /* redirect: only a path that matches nothing is redirected */
    if (allow || !twin_walk(t, w, host, hlen, path, plen, params, cap, m))
        return not_taken(t, w, allow, m);
    m->nparams = 0;
    return m->status = (w->mbit & (RT_M_GET | RT_M_HEAD)) ? RT_REDIRECT_301 : RT_REDIRECT_308;
}

/* The body of rt_lookup_ctx: <w> comes with its context set. Inlined into
 * both entry points so that neither pays a call with eleven arguments. */
static inline __attribute__((always_inline)) enum rt_status
lookup(const rt_table *t, struct walk *w, const char *method, size_t mlen, const char *host,
       size_t hlen, const char *path, size_t plen, struct rt_param *params, size_t cap,
       struct rt_match *m)
{
    w->mbit = rt_known_method_bit(method, mlen);
    if (!w->mbit) /* a custom token: the table's own list */
        w->mbit = rt_method_bit(t, method, mlen);
    w->head = w->mbit == RT_M_HEAD;
    w->params = params;
    w->cap = cap;
    hlen = host_name(host, hlen);
    m->route = NULL;
    m->allow = 0;
    m->nparams = 0;
    m->slash = 0;
    if (walk_all(t, w, host, hlen, path, plen)) {
        name_params(w->hit, m, params, cap);
        return m->status = RT_HIT;
    }
    return no_hit(t, w, host, hlen, path, plen, params, cap, m);
}

enum rt_status rt_lookup_ctx(const rt_table *t, rt_ctx *ctx, const char *method, size_t mlen,
                             const char *host, size_t hlen, const char *path, size_t plen,
                             struct rt_param *params, size_t cap, struct rt_match *m)
{
    struct walk w;
    enum rt_status st;

    w.ctx = ctx;
    w.own_ctx = 0;
    st = lookup(t, &w, method, mlen, host, hlen, path, plen, params, cap, m);
    if (w.own_ctx)
        rt_ctx_free(w.ctx);
    return st;
}

enum rt_status rt_lookup(const rt_table *t, const char *method, size_t mlen, const char *host,
                         size_t hlen, const char *path, size_t plen, struct rt_param *params,
                         size_t cap, struct rt_match *m)
{
    struct walk w;
    enum rt_status st;

    w.ctx = NULL;
    w.own_ctx = 0;
    st = lookup(t, &w, method, mlen, host, hlen, path, plen, params, cap, m);
    if (w.own_ctx)
        rt_ctx_free(w.ctx);
    return st;
}
