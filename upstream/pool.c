/*
 * pool.c - an upstream pool's life: creation (servers, their states and
 * the per-worker slab laid out, see up_int.h), the atomic reference count
 * and the names. Balancing is in balance.c and one file per balancer,
 * health in health.c, idle connections in idle.c, counters in counters.c,
 * the per-server state and its carry-over across swaps in state.c.
 */
#include "upstream/up_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void pool_free(up_pool *p)
{
    if (!p)
        return;
    if (p->lb_ops)
        p->lb_ops->destroy(p);
    for (size_t i = 0; p->st && i < p->n; i++)
        up_sstate_release(p->st[i]);
    free(p->st);
    up_pcounts_release(p->pc);
    free(p->slab);
    free(p->ws);
    up_servers_free(p->servers, p->n);
    free(p->tags);
    free(p->weight);
    free(p->name);
    free(p->key);
    free(p);
}

/* Bytes of one worker's block, the 8-byte arrays first so each stays
 * aligned. 0 when the sizes overflow. */
static size_t worker_bytes(size_t n)
{
    if (n > SIZE_MAX / 64)
        return 0;
    return sizeof(struct up_wfix) +
           n * (sizeof(long long) + sizeof(struct up_sworker *) + sizeof(uint32_t));
}

/* Points worker <w>'s arrays into its block of the slab. */
static void worker_layout(up_pool *p, unsigned w)
{
    char *b = (char *)p->slab + (size_t)w * p->stride;
    struct up_worker *st = &p->ws[w];
    size_t n = p->n;

    st->fx = (struct up_wfix *)b;
    st->fx->rng = up_mix64(p->opts.seed + w + 1) | 1; /* xorshift needs a non-zero state */
    st->fx->slot = NULL;
    b += sizeof(*st->fx);
    st->cw = (long long *)b;
    b += n * sizeof(*st->cw);
    st->sw = (struct up_sworker **)b;
    b += n * sizeof(*st->sw);
    st->inflight = (_Atomic uint32_t *)b;
    for (size_t i = 0; i < n; i++) {
        st->sw[i] = up_sstate_worker(p->st[i], w);
        atomic_init(&st->inflight[i], 0);
    }
}

static const struct up_lb_ops *const balancers[] = {
    [UP_ROUND_ROBIN] = &up_lb_round_robin,
    [UP_LEAST_CONN] = &up_lb_least_conn,
    [UP_RANDOM_TWO] = &up_lb_random_two,
    [UP_HASH] = &up_lb_hash,
};

up_pool *up_pool_new(const char *name, const char *key, const struct up_server_def *servers,
                     size_t n, unsigned nworkers, unsigned keepalive)
{
    return up_pool_new_opts(name, key, servers, n, nworkers, keepalive, NULL);
}

up_pool *up_pool_new_opts(const char *name, const char *key, const struct up_server_def *servers,
                          size_t n, unsigned nworkers, unsigned keepalive,
                          const struct up_pool_opts *opts)
{
    /* sizeof is a whole number of lines: refs is aligned to one */
    up_pool *p = aligned_alloc(UP_CACHE_LINE, sizeof(*p));
    size_t bytes = worker_bytes(n);

    if (p)
        memset(p, 0, sizeof(*p));
    if (!p || n == 0 || nworkers == 0 || bytes == 0)
        goto fail;
    if (opts)
        p->opts = *opts;
    if ((unsigned)p->opts.balance >= sizeof(balancers) / sizeof(balancers[0]))
        goto fail;
    atomic_init(&p->refs, 1);
    p->n = n;
    p->nworkers = nworkers;
    p->keepalive = keepalive;
    if (!(p->name = up_strdup(name)) || !(p->key = up_strdup(key ? key : "")))
        goto fail;
    if (!(p->servers = up_servers_new(servers, n)))
        goto fail;
    if (!(p->weight = calloc(n, sizeof(*p->weight))))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        p->weight[i] = servers[i].weight ? servers[i].weight : 1;
        p->total_weight += p->weight[i];
    }
    if (!(p->st = calloc(n, sizeof(*p->st))))
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (!(p->st[i] = up_sstate_new((const struct sockaddr *)&p->servers[i].ss,
                                       p->servers[i].salen, nworkers, keepalive)))
            goto fail;
    if (!(p->pc = up_pcounts_new(nworkers)))
        goto fail;
    if (!(p->ws = calloc(nworkers, sizeof(*p->ws))))
        goto fail;
    if (!(p->slab = up_slab_new(nworkers, bytes, &p->stride)))
        goto fail;
    for (unsigned w = 0; w < nworkers; w++)
        worker_layout(p, w);
    p->lb_ops = balancers[p->opts.balance];
    if (p->lb_ops->init(p) < 0)
        goto fail;
    return p;
fail:
    pool_free(p);
    return NULL;
}

void up_pool_retain(up_pool *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void up_pool_release(up_pool *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        pool_free(p);
}

unsigned up_pool_refs(const up_pool *p)
{
    return atomic_load_explicit(&p->refs, memory_order_acquire);
}

const char *up_pool_name(const up_pool *p)
{
    return p->name;
}

void **up_pool_worker_slot(up_pool *p, unsigned w)
{
    return &p->ws[w].fx->slot;
}

const char *up_pool_key(const up_pool *p)
{
    return p->key;
}
