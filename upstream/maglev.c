/*
 * maglev.c - the hash balancer: a lookup table of a prime size M (65,537 by
 * default) in the shape of Maglev's (Eisenbud et al., NSDI 2016): each
 * server walks its own permutation of the slots, (offset + j * skip) mod M,
 * offset and skip taken from the hash of its address, and a key goes to
 * table[hash mod M].
 *
 * The fill is not Maglev's. Maglev's servers take turns claiming their next
 * free slot, which balances the table to one slot but makes a removal
 * cascade: a freed slot is claimed earlier by someone else, whose later
 * claims shift, and so on. Measured (65,537 slots), removing one of N
 * servers moved 1.6/N of the keys at N = 100 and 6.7/N at N = 1,000, a
 * textbook implementation the same. Here each slot goes to the server whose
 * walk reaches it first in weighted time (rendezvous hashing over the
 * permutations, see fill()): a slot depends on the servers alone, not on
 * an order of claims, so removing a server moves its keys and no other,
 * exactly 1/N of them at equal weights. The price is balance: a server's
 * count of slots is a sum of independent wins, one a slot it reaches, and
 * varies by about sqrt(N / 2M) (docs/benchmarks.md derives it; measured 2.5 % rms
 * at 100 servers, 9 % at 1,000; Maglev's: 0.1 % and 0.8 %). A fill that
 * holds each server nearer its share makes a slot's owner depend on the
 * others' counts, and then a removal cascades again: bounded loads and a
 * rebalancing pass were measured (loadtest/balancer_bench/fill_tradeoff),
 * and none held 1,000 servers within 5 % of their share while moving at
 * most 1.2 x the removed server's.
 *
 * An unusable server (down, or tried): without fallback the pick fails;
 * with fallback it walks on through the table to the next slot owned by a
 * usable server, which spreads a dead server's keys over the others in
 * proportion to their slots, and gives each key the same next candidate
 * every time. No slow start here: it would move keys around.
 */
#include "upstream/up_int.h"

#include <math.h>
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

int up_maglev_size_ok(size_t m, size_t n)
{
    return m > n && m <= UINT32_MAX && is_prime(m);
}

/* The permutation of server <s>: where it starts and how far it steps. */
static void permutation(const up_pool *p, size_t s, size_t m, size_t *offset, size_t *skip)
{
    const char *a = p->servers[s].address;
    uint64_t h = up_hash(a, strlen(a));

    *offset = (size_t)(h % m);
    *skip = (size_t)(up_mix64(h ^ 0x9e3779b97f4a7c15ULL) % (m - 1)) + 1;
}

/* A slot being filled: its owner so far and when the owner reached it. One
 * 8-byte cell, so that a visit touches one cache line. */
struct mg_cell {
    float at;
    uint32_t owner;
};

/* Every slot to the server that reaches it first in weighted time: server
 * s reaches its permutation's j-th slot at E(j) / weight(s), where E(j) =
 * -ln(1 - (j + 1) / (M + 1)) turns the rank into an exponential variable,
 * so that a server owns slots in proportion to its weight (an exponential
 * race). Ties go to the lower address hash, never to the lower index:
 * indices shift when a server is removed. The walks advance in rounds of
 * one expected visit per slot, each server as far as time <t>, until every
 * slot has an owner: a visit in a later round comes later than every visit
 * before it, so once the table is full every owner is final, whatever the
 * order of the walks. About ln(M) visits per slot, so ~0.8M at 65,537.
 * E(j) is computed as far as the walks get: a heavy server walks far, but
 * at 1,000 servers none gets past a few percent of the ranks. */
static int fill(const up_pool *p, struct mg *g)
{
    size_t n = p->n, m = g->m, filled = 0, ne = 0;
    size_t *next = malloc(n * sizeof(*next)), *skip = malloc(n * sizeof(*skip));
    size_t *rank = calloc(n, sizeof(*rank));
    uint64_t *tie = malloc(n * sizeof(*tie));
    float *inv = malloc(n * sizeof(*inv)), *e = malloc(m * sizeof(*e));
    struct mg_cell *cell = malloc(m * sizeof(*cell));
    double step = 1.0 / (double)p->total_weight, t = 0;
    int rc = -1;

    if (!next || !skip || !rank || !tie || !inv || !e || !cell)
        goto out;
    for (size_t s = 0; s < n; s++) {
        const char *a = p->servers[s].address;
        permutation(p, s, m, &next[s], &skip[s]);
        tie[s] = up_hash(a, strlen(a));
        inv[s] = 1.0f / (float)p->weight[s];
    }
    for (size_t x = 0; x < m; x++)
        cell[x] = (struct mg_cell){0, UINT32_MAX};
    while (filled < m) {
        t += step;
        for (size_t s = 0; s < n; s++) {
            size_t x = next[s], j = rank[s], sk = skip[s];
            const float w1 = inv[s], lim = (float)t;
            const uint64_t ts = tie[s];
            /* E as far as this walk goes: past <lim>, or to the end */
            while (ne < m && (ne == 0 || e[ne - 1] * w1 < lim)) {
                e[ne] = (float)-log1p(-(double)(ne + 1) / (double)(m + 1));
                ne++;
            }
            for (; j < ne; j++) {
                const float at = e[j] * w1;
                if (at >= lim)
                    break;
                struct mg_cell *c = &cell[x];
                const uint32_t o = c->owner;
                if (o == UINT32_MAX) {
                    filled++;
                    *c = (struct mg_cell){at, (uint32_t)s};
                } else if (at < c->at || (at == c->at && ts < tie[o])) {
                    *c = (struct mg_cell){at, (uint32_t)s};
                }
                if ((x += sk) >= m)
                    x -= m;
            }
            next[s] = x;
            rank[s] = j;
        }
    }
    for (size_t x = 0; x < m; x++)
        g->table[x] = cell[x].owner;
    rc = 0;
out:
    free(next);
    free(skip);
    free(rank);
    free(tie);
    free(inv);
    free(e);
    free(cell);
    return rc;
}

static int mg_init(up_pool *p)
{
    struct mg *g = calloc(1, sizeof(*g));

    if (!(p->lb = g))
        return -1;
    g->m = p->opts.table_size ? p->opts.table_size : UP_MAGLEV_SIZE;
    if (!up_maglev_size_ok(g->m, p->n))
        return -1;
    if (!(g->table = malloc(g->m * sizeof(*g->table))))
        return -1;
    return fill(p, g);
}

static size_t mg_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const struct mg *g = p->lb;
    size_t slot = (size_t)((rq ? rq->hash : 0) % g->m);

    if (up_usable(p, g->table[slot], rq, ignore_health))
        return g->table[slot];
    if (!p->opts.fallback)
        return up_fallback(p, w, rq, ignore_health);
    for (size_t i = 1; i < g->m; i++) {
        if (++slot == g->m)
            slot = 0;
        if (up_usable(p, g->table[slot], rq, ignore_health))
            return g->table[slot];
    }
    return up_fallback(p, w, rq, ignore_health);
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
