/*
 * diff.c - the replay of a sample of requests against two routing tables,
 * grouped by where they went from and to (router/diff.h). Groups are found
 * through an open-addressing index on (from, to, changes), so the cost is
 * two lookups per request whatever the number of groups.
 */
#define _POSIX_C_SOURCE 200809L
#include "router/diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_diff_label(const struct rt_match *m)
{
    const char *name;

    switch (m->status) {
    case RT_HIT:
        name = rt_route_name(m->route);
        return name ? name : rt_route_pattern(m->route);
    case RT_NOT_ALLOWED:
        return "405";
    case RT_REDIRECT_301:
        return "301";
    case RT_REDIRECT_308:
        return "308";
    case RT_OPTIONS_AUTO:
        return "options";
    case RT_NOT_FOUND:
        break;
    }
    return "404";
}

/* A growing list of groups and its index. */
struct glist {
    struct rt_diff_group *v;
    size_t n, cap;
    size_t *idx; /* slot -> group + 1; 0: empty */
    size_t icap; /* a power of two */
};

static uint64_t str_hash(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return (h ^ 0xff) * UINT64_C(1099511628211);
}

static uint64_t key_hash(const char *from, const char *to, unsigned changes)
{
    return str_hash(str_hash(UINT64_C(14695981039346656037) ^ changes, from), to);
}

static int glist_grow(struct glist *g)
{
    size_t icap = g->icap ? 2 * g->icap : 64;
    size_t *idx = calloc(icap, sizeof(*idx));

    if (!idx)
        return -1;
    for (size_t i = 0; i < g->n; i++) {
        const struct rt_diff_group *e = &g->v[i];
        size_t k = key_hash(e->from, e->to, e->changes) & (icap - 1);
        while (idx[k])
            k = (k + 1) & (icap - 1);
        idx[k] = i + 1;
    }
    free(g->idx);
    g->idx = idx;
    g->icap = icap;
    return 0;
}

/* Counts one request <q> in the group (from, to, changes) of <g>, made
 * when new with <q> as its example. -1 on out of memory. */
static int glist_add(struct glist *g, const char *from, const char *to, unsigned changes,
                     const struct rt_diff_req *q)
{
    size_t k;
    struct rt_diff_group *e;

    if (2 * (g->n + 1) > g->icap && glist_grow(g) < 0)
        return -1;
    for (k = key_hash(from, to, changes) & (g->icap - 1); g->idx[k]; k = (k + 1) & (g->icap - 1)) {
        e = &g->v[g->idx[k] - 1];
        if (e->changes == changes && strcmp(e->from, from) == 0 && strcmp(e->to, to) == 0) {
            e->count++;
            return 0;
        }
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct rt_diff_group *v = realloc(g->v, cap * sizeof(*v));
        if (!v)
            return -1;
        g->v = v;
        g->cap = cap;
    }
    e = &g->v[g->n];
    e->from = from;
    e->to = to;
    e->changes = changes;
    e->count = 1;
    if (!(e->example = malloc(q->mlen + q->plen + 2)))
        return -1;
    memcpy(e->example, q->method, q->mlen);
    e->example[q->mlen] = ' ';
    memcpy(e->example + q->mlen + 1, q->path, q->plen);
    e->example[q->mlen + 1 + q->plen] = '\0';
    g->idx[k] = ++g->n;
    return 0;
}

/* Largest first; then by labels, so that the answer does not depend on
 * the sample's order among equals. */
static int by_count(const void *pa, const void *pb)
{
    const struct rt_diff_group *a = pa, *b = pb;
    int c;

    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    if ((c = strcmp(a->from, b->from)) != 0)
        return c;
    if ((c = strcmp(a->to, b->to)) != 0)
        return c;
    return a->changes < b->changes ? -1 : a->changes > b->changes;
}

static void glist_free(struct glist *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i].example);
    free(g->v);
    free(g->idx);
}

/* Hands the groups of <g> over as a sorted array. */
static struct rt_diff_group *glist_take(struct glist *g, size_t *n)
{
    free(g->idx);
    if (g->n)
        qsort(g->v, g->n, sizeof(*g->v), by_count);
    *n = g->n;
    return g->v;
}

int rt_diff_run(const rt_table *old, const rt_table *new_, rt_diff_next_fn next, void *arg,
                rt_diff_same_fn same, void *sarg, struct rt_diff *d)
{
    size_t cap = rt_table_max_params(old), cn = rt_table_max_params(new_);
    struct glist ch = {0}, sm = {0};
    struct rt_diff_req q;
    struct rt_param *params;
    struct rt_match a, b;
    rt_ctx *ctx;

    memset(d, 0, sizeof(*d));
    cap = (cap > cn ? cap : cn) + 1;
    if (!(params = malloc(cap * sizeof(*params))))
        return -1;
    if (!(ctx = rt_ctx_new()))
        goto fail_params;
    while (next(arg, &q) > 0) {
        const char *from, *to;
        d->sampled++;
        rt_lookup_ctx(old, ctx, q.method, q.mlen, q.host, q.hlen, q.path, q.plen, params, cap, &a);
        rt_lookup_ctx(new_, ctx, q.method, q.mlen, q.host, q.hlen, q.path, q.plen, params, cap, &b);
        from = rt_diff_label(&a);
        to = rt_diff_label(&b);
        if (strcmp(from, to) != 0 || a.status != b.status) {
            if (glist_add(&ch, from, to, 0, &q) < 0)
                goto fail;
            continue;
        }
        d->unchanged++;
        if (a.status == RT_HIT && same) {
            unsigned bits = same(sarg, from);
            if (bits && glist_add(&sm, from, to, bits, &q) < 0)
                goto fail;
        }
    }
    d->changed = glist_take(&ch, &d->nchanged);
    d->same = glist_take(&sm, &d->nsame);
    rt_ctx_free(ctx);
    free(params);
    return 0;
fail:
    glist_free(&ch);
    glist_free(&sm);
    rt_ctx_free(ctx);
    memset(d, 0, sizeof(*d));
fail_params:
    free(params);
    return -1;
}

void rt_diff_clear(struct rt_diff *d)
{
    for (size_t i = 0; i < d->nchanged; i++)
        free(d->changed[i].example);
    for (size_t i = 0; i < d->nsame; i++)
        free(d->same[i].example);
    free(d->changed);
    free(d->same);
    memset(d, 0, sizeof(*d));
}
