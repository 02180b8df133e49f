/*
 * pool.c - upstream pools: server list, smooth weighted round robin and
 * per-worker idle connection stacks. Each worker's state sits in its own
 * cache-line-aligned block so workers never write the same line.
 */
#include "upstream/upstream.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct up_server {
    char *address;
    struct sockaddr_storage ss;
    socklen_t salen;
    int weight;
};

/* One worker's view of one pool. */
struct up_wstate {
    long long *cw;           /* smooth WRR current weights, per server */
    void **idle;             /* nservers stacks of <keepalive> slots */
    unsigned *nidle;         /* per server */
    _Atomic uint64_t *reqs;  /* per server, written by this worker only */
    _Atomic uint64_t *conns; /* per server */
} __attribute__((aligned(64)));

struct up_pool {
    _Atomic unsigned refs;
    char *name, *key;
    size_t n;
    unsigned nworkers, keepalive;
    long long total_weight;
    struct up_server *servers;
    struct up_wstate *ws; /* nworkers of them */
};

static void pool_free(up_pool *p)
{
    if (!p)
        return;
    if (p->ws) {
        for (unsigned w = 0; w < p->nworkers; w++) {
            free(p->ws[w].cw);
            free(p->ws[w].idle);
            free(p->ws[w].nidle);
            free(p->ws[w].reqs);
            free(p->ws[w].conns);
        }
        free(p->ws);
    }
    for (size_t i = 0; p->servers && i < p->n; i++)
        free(p->servers[i].address);
    free(p->servers);
    free(p->name);
    free(p->key);
    free(p);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d)
        memcpy(d, s, n);
    return d;
}

up_pool *up_pool_new(const char *name, const char *key, const struct up_server_def *servers,
                     size_t n, unsigned nworkers, unsigned keepalive)
{
    up_pool *p = calloc(1, sizeof(*p));

    if (!p || n == 0 || nworkers == 0)
        goto fail;
    atomic_init(&p->refs, 1);
    p->n = n;
    p->nworkers = nworkers;
    p->keepalive = keepalive;
    if (!(p->name = dup_str(name)) || !(p->key = dup_str(key ? key : "")))
        goto fail;
    if (!(p->servers = calloc(n, sizeof(*p->servers))))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        struct up_server *s = &p->servers[i];
        if (!(s->address = dup_str(servers[i].address)))
            goto fail;
        if (servers[i].salen > sizeof(s->ss))
            goto fail;
        memcpy(&s->ss, servers[i].sa, servers[i].salen);
        s->salen = servers[i].salen;
        s->weight = servers[i].weight ? (int)servers[i].weight : 1;
        p->total_weight += s->weight;
    }
    if (!(p->ws = aligned_alloc(64, sizeof(*p->ws) * nworkers)))
        goto fail;
    memset(p->ws, 0, sizeof(*p->ws) * nworkers);
    for (unsigned w = 0; w < nworkers; w++) {
        struct up_wstate *st = &p->ws[w];
        st->cw = calloc(n, sizeof(*st->cw));
        st->idle = calloc(n * (keepalive ? keepalive : 1), sizeof(*st->idle));
        st->nidle = calloc(n, sizeof(*st->nidle));
        st->reqs = calloc(n, sizeof(*st->reqs));
        st->conns = calloc(n, sizeof(*st->conns));
        if (!st->cw || !st->idle || !st->nidle || !st->reqs || !st->conns)
            goto fail;
    }
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

const char *up_pool_name(const up_pool *p)
{
    return p->name;
}

const char *up_pool_key(const up_pool *p)
{
    return p->key;
}

size_t up_pool_nservers(const up_pool *p)
{
    return p->n;
}

const char *up_server_address(const up_pool *p, size_t i)
{
    return p->servers[i].address;
}

const struct sockaddr *up_server_sockaddr(const up_pool *p, size_t i, socklen_t *len)
{
    *len = p->servers[i].salen;
    return (const struct sockaddr *)&p->servers[i].ss;
}

size_t up_pick(up_pool *p, unsigned w)
{
    struct up_wstate *st = &p->ws[w];
    size_t best = 0;

    if (p->n == 1)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        st->cw[i] += p->servers[i].weight;
        if (st->cw[i] > st->cw[best])
            best = i;
    }
    st->cw[best] -= p->total_weight;
    return best;
}

int up_idle_put(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_wstate *st = &p->ws[w];

    if (st->nidle[s] >= p->keepalive)
        return -1;
    st->idle[s * p->keepalive + st->nidle[s]++] = conn;
    return 0;
}

void *up_idle_get(up_pool *p, unsigned w, size_t s)
{
    struct up_wstate *st = &p->ws[w];

    if (!st->nidle[s])
        return NULL;
    return st->idle[s * p->keepalive + --st->nidle[s]];
}

int up_idle_remove(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_wstate *st = &p->ws[w];
    void **stack = st->idle + s * p->keepalive;

    for (unsigned i = 0; i < st->nidle[s]; i++) {
        if (stack[i] == conn) {
            memmove(stack + i, stack + i + 1, (st->nidle[s] - i - 1) * sizeof(*stack));
            st->nidle[s]--;
            return 0;
        }
    }
    return -1;
}

size_t up_idle_count(const up_pool *p, unsigned w, size_t s)
{
    return p->ws[w].nidle[s];
}

/* Single-writer counters: a relaxed load and store, no read-modify-write. */
static void bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

void up_count_request(up_pool *p, unsigned w, size_t s)
{
    bump(&p->ws[w].reqs[s]);
}

void up_count_connect(up_pool *p, unsigned w, size_t s)
{
    bump(&p->ws[w].conns[s]);
}

uint64_t up_requests(const up_pool *p, size_t s)
{
    uint64_t n = 0;

    for (unsigned w = 0; w < p->nworkers; w++)
        n += atomic_load_explicit(&p->ws[w].reqs[s], memory_order_relaxed);
    return n;
}

uint64_t up_connects(const up_pool *p, size_t s)
{
    uint64_t n = 0;

    for (unsigned w = 0; w < p->nworkers; w++)
        n += atomic_load_explicit(&p->ws[w].conns[s], memory_order_relaxed);
    return n;
}
