/*
 * maglev.c - the hash balancer: a Maglev lookup table (Eisenbud et al.,
 * NSDI 2016) of a prime size M (65,537 by default). Each server walks its
 * own permutation of the slots, (offset + j * skip) mod M, offset and skip
 * taken from the hash of its address, and the servers take turns claiming
 * their next free slot until the table is full; a server takes a turn in
 * proportion to its weight (weight / max weight of the rounds). A key goes
 * to table[hash mod M]. Since a server's permutation depends on its address
 * alone, removing one of N servers moves about 1/N of the keys.
 *
 * An unusable server (down, or tried): without fallback the pick fails;
 * with fallback it walks on through the table to the next slot owned by a
 * usable server, which spreads a dead server's keys over the others in
 * proportion to their slots, and gives each key the same next candidate
 * every time. No slow start here: it would move keys around.
 */
#include "upstream/up_int.h"

#include <stdlib.h>
#include <string.h>

struct mg {
    uint32_t *table;
    size_t m;
};

static int is_prime(size_t m)
{
    if (m < 2)
        return 0;
    for (size_t d = 2; d <= m / d; d++)
        if (m % d == 0)
            return 0;
    return 1;
}

/* The permutation of server <s>: where it starts and how far it steps. */
static void permutation(const up_pool *p, size_t s, size_t m, size_t *offset, size_t *skip)
{
    const char *a = p->servers[s].address;
    uint64_t h = up_hash(a, strlen(a));

    *offset = (size_t)(h % m);
    *skip = (size_t)(up_mix64(h ^ 0x9e3779b97f4a7c15ULL) % (m - 1)) + 1;
}

static int fill(const up_pool *p, struct mg *g)
{
    size_t n = p->n, m = g->m, filled = 0;
    size_t *next = malloc(n * sizeof(*next)), *skip = malloc(n * sizeof(*skip));
    uint64_t *credit = calloc(n, sizeof(*credit));
    uint64_t wmax = 0;

    if (!next || !skip || !credit) {
        free(next);
        free(skip);
        free(credit);
        return -1;
    }
    for (size_t s = 0; s < n; s++) {
        permutation(p, s, m, &next[s], &skip[s]);
        if ((uint64_t)p->weight[s] > wmax)
            wmax = (uint64_t)p->weight[s];
    }
    memset(g->table, 0xff, m * sizeof(*g->table));
    while (filled < m) {
        for (size_t s = 0; s < n && filled < m; s++) {
            credit[s] += (uint64_t)p->weight[s];
            if (credit[s] < wmax)
                continue;
            credit[s] -= wmax;
            while (g->table[next[s]] != UINT32_MAX)
                if ((next[s] += skip[s]) >= m)
                    next[s] -= m;
            g->table[next[s]] = (uint32_t)s;
            filled++;
        }
    }
    free(next);
    free(skip);
    free(credit);
    return 0;
}

static int mg_init(up_pool *p)
{
    struct mg *g = calloc(1, sizeof(*g));

    if (!(p->lb = g))
        return -1;
    g->m = p->opts.table_size ? p->opts.table_size : UP_MAGLEV_SIZE;
    if (g->m <= p->n || g->m > UINT32_MAX || !is_prime(g->m))
        return -1;
    if (!(g->table = malloc(g->m * sizeof(*g->table))))
        return -1;
    return fill(p, g);
}

static size_t mg_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const struct mg *g = p->lb;
    size_t slot = (size_t)((rq ? rq->hash : 0) % g->m);

    (void)w;
    if (up_usable(p, g->table[slot], rq, ignore_health))
        return g->table[slot];
    if (!p->opts.fallback)
        return UP_NONE;
    for (size_t i = 1; i < g->m; i++) {
        if (++slot == g->m)
            slot = 0;
        if (up_usable(p, g->table[slot], rq, ignore_health))
            return g->table[slot];
    }
    return UP_NONE;
}

static void mg_destroy(up_pool *p)
{
    struct mg *g = p->lb;

    if (g)
        free(g->table);
    free(g);
}

const struct up_lb_ops up_lb_hash = {
    .name = "hash",
    .init = mg_init,
    .select = mg_select,
    .destroy = mg_destroy,
};
