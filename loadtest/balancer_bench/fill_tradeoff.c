/*
 * fill_tradeoff.c - candidate fills of the hash balancer's table, measured
 * for what issue 12 asks of one: keys moved when a server is removed, and
 * how evenly the servers share the slots.
 *
 * Usage: fill_tradeoff [N]      (N: only that pool size; default 3, 10, 100, 1000)
 *
 * Every candidate walks the servers' permutations of upstream/maglev.c
 * ((offset + j * skip) mod M from the address hash) in weighted time
 * E(j) / weight, in one global time order (a heap of the servers; the
 * slot-order rows apart), and differs only in when a server may take a
 * slot:
 *   - rendezvous: a free slot to the first server that reaches it, no
 *     limit (today's fill; the program checks that its table is the
 *     pool's, slot for slot);
 *   - bounded c: consistent hashing with bounded loads (Mirrokni, Thorup,
 *     Zadimoghaddam, SODA 2018; HAProxy's hash-balance-factor): a server
 *     stops walking at ceil(c x M x w / W) slots;
 *   - bounded c, slot order: the same limits, in MTZ's own order: the
 *     slots one by one in a fixed order, each to the first server in time
 *     that is under its limit;
 *   - two-phase c/lo: the bounded fill, then a rebalancing pass in which
 *     every server under floor(lo x M x w / W) walks on (in time order)
 *     and takes each slot it reaches whose owner holds more than its share,
 *     until it has its floor: slots move only from over-full servers to
 *     under-full ones, in an order that depends on the set of servers.
 * For each, at N servers of weights 1..4 (or all 1): the slots that change
 * owner when one server is removed, over its weight's share of the slots
 * (balancer_bench's measure, target <= 1.2) and over the slots it had
 * (1.00: only its own moved), averaged over several removed servers; each
 * server's slots over its weight's share (min, max, rms), the full pool's;
 * and the servers the bounded fill held at their limit, the full pool's.
 * Prints one Markdown table. Not a timing: no clock is read.
 */
#include "upstream/up_int.h"

#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FT_M UP_MAGLEV_SIZE
#define FT_REMOVALS 8

struct ft_set {
    size_t n;
    uint64_t *hash; /* each server's address hash */
    unsigned *w;
    double total;
};

struct ft_cand {
    const char *name;
    double cap; /* 0: none */
    double lo;  /* 0: no rebalancing pass */
    int slots;  /* bounded in a fixed order of the slots, not of time */
};

struct ft_ev {
    double at;
    uint32_t s;
};

static void *ft_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (!p) {
        fprintf(stderr, "fill_tradeoff: out of memory\n");
        exit(1);
    }
    return p;
}

static unsigned ft_weight(size_t i, int equal)
{
    return equal ? 1 : 1 + (unsigned)(i % 4);
}

/* The servers 10.0.x.y:80 of balancer_bench, without <skip> (SIZE_MAX: none). */
static struct ft_set ft_set_new(size_t n, size_t skip, int equal)
{
    struct ft_set s = {0, ft_xcalloc(n, sizeof(uint64_t)), ft_xcalloc(n, sizeof(unsigned)), 0};

    for (size_t i = 0; i < n; i++) {
        char a[32];
        if (i == skip)
            continue;
        snprintf(a, sizeof(a), "10.0.%zu.%zu:80", i / 256, i % 256);
        s.hash[s.n] = up_hash(a, strlen(a));
        s.w[s.n] = ft_weight(i, equal);
        s.total += s.w[s.n];
        s.n++;
    }
    return s;
}

/* A binary heap of servers by the time of their next visit; ties to the
 * lower address hash, as in maglev.c. */
struct ft_heap {
    struct ft_ev *e;
    size_t n;
    const uint64_t *hash;
};

static int ft_before(const struct ft_heap *h, struct ft_ev a, struct ft_ev b)
{
    return a.at < b.at || (a.at == b.at && h->hash[a.s] < h->hash[b.s]);
}

static void ft_swap(struct ft_ev *a, struct ft_ev *b)
{
    struct ft_ev t = *a;

    *a = *b;
    *b = t;
}

static void ft_push(struct ft_heap *h, struct ft_ev e)
{
    size_t i = h->n++;

    h->e[i] = e;
    while (i && ft_before(h, h->e[i], h->e[(i - 1) / 2])) {
        ft_swap(&h->e[i], &h->e[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

static struct ft_ev ft_pop(struct ft_heap *h)
{
    struct ft_ev top = h->e[0];
    size_t i = 0;

    h->e[0] = h->e[--h->n];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < h->n && ft_before(h, h->e[l], h->e[m]))
            m = l;
        if (l + 1 < h->n && ft_before(h, h->e[l + 1], h->e[m]))
            m = l + 1;
        if (m == i)
            return top;
        ft_swap(&h->e[i], &h->e[m]);
        i = m;
    }
}

/* The exponential time of rank <j>, as maglev.c's E(j). */
static double ft_time(size_t j)
{
    return -log1p(-(double)(j + 1) / (double)(FT_M + 1));
}

/* Server <hash>'s permutation of the slots, as maglev.c's. */
static void ft_permutation(uint64_t hash, size_t *off, size_t *skip)
{
    *off = (size_t)(hash % FT_M);
    *skip = (size_t)(up_mix64(hash ^ 0x9e3779b97f4a7c15ULL) % (FT_M - 1)) + 1;
}

static uint64_t ft_powmod(uint64_t b, uint64_t e)
{
    uint64_t r = 1;

    for (b %= FT_M; e; e >>= 1, b = b * b % FT_M)
        if (e & 1)
            r = r * b % FT_M;
    return r;
}

/* Bounded loads in Mirrokni, Thorup and Zadimoghaddam's own order: the
 * slots one by one in a fixed order (x = k * 40,503 mod M), each to the
 * server that reaches it first in weighted time among those under their
 * limit. A server reaches slot x at rank (x - offset) / skip mod M. */
static uint32_t *ft_fill_slots(const struct ft_set *s, const struct ft_cand *c, size_t *held)
{
    uint32_t *t = ft_xcalloc(FT_M, sizeof(*t));
    size_t n = s->n, *off = ft_xcalloc(n, sizeof(size_t)), *inv = ft_xcalloc(n, sizeof(size_t));
    size_t *count = ft_xcalloc(n, sizeof(size_t)), *limit = ft_xcalloc(n, sizeof(size_t));

    for (size_t i = 0; i < n; i++) {
        size_t skip;
        ft_permutation(s->hash[i], &off[i], &skip);
        inv[i] = (size_t)ft_powmod(skip, FT_M - 2); /* M is prime */
        limit[i] = (size_t)ceil(c->cap * FT_M * s->w[i] / s->total);
    }
    for (uint64_t k = 0; k < FT_M; k++) {
        size_t x = (size_t)(k * 40503 % FT_M), best = SIZE_MAX;
        double first = INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (count[i] >= limit[i])
                continue;
            uint64_t rank = (uint64_t)(x + FT_M - off[i]) % FT_M * inv[i] % FT_M;
            double at = ft_time((size_t)rank) / s->w[i];
            if (at < first || (at == first && s->hash[i] < s->hash[best])) {
                first = at;
                best = i;
            }
        }
        t[x] = (uint32_t)best;
        count[best]++;
    }
    *held = 0;
    for (size_t i = 0; i < n; i++)
        *held += count[i] >= limit[i];
    free(off);
    free(inv);
    free(count);
    free(limit);
    return t;
}

/* The table of candidate <c> for the servers <s>; the caller frees it.
 * <*held> is set to how many servers the bounded fill stopped at their
 * limit. */
static uint32_t *ft_fill(const struct ft_set *s, const struct ft_cand *c, size_t *held)
{
    if (c->slots)
        return ft_fill_slots(s, c, held);

    uint32_t *t = ft_xcalloc(FT_M, sizeof(*t));
    size_t n = s->n, filled = 0, *off = ft_xcalloc(n, sizeof(size_t));
    size_t *skip = ft_xcalloc(n, sizeof(size_t)), *j = ft_xcalloc(n, sizeof(size_t));
    size_t *count = ft_xcalloc(n, sizeof(size_t)), *limit = ft_xcalloc(n, sizeof(size_t));
    struct ft_heap h = {ft_xcalloc(n, sizeof(struct ft_ev)), 0, s->hash};

    for (size_t x = 0; x < FT_M; x++)
        t[x] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        double share = (double)FT_M * s->w[i] / s->total;
        ft_permutation(s->hash[i], &off[i], &skip[i]);
        limit[i] = c->cap > 0 ? (size_t)ceil(c->cap * share) : FT_M;
        ft_push(&h, (struct ft_ev){ft_time(0) / s->w[i], (uint32_t)i});
    }
    while (filled < FT_M) {
        struct ft_ev e = ft_pop(&h);
        size_t x = (off[e.s] + j[e.s] * skip[e.s]) % FT_M;
        if (t[x] == UINT32_MAX) {
            t[x] = e.s;
            filled++;
            count[e.s]++;
        }
        if (++j[e.s] < FT_M && count[e.s] < limit[e.s])
            ft_push(&h, (struct ft_ev){ft_time(j[e.s]) / s->w[e.s], e.s});
    }
    *held = 0;
    for (size_t i = 0; i < n; i++)
        *held += c->cap > 0 && count[i] >= limit[i];
    /* the rebalancing pass: the under-full walk on, from where they stopped */
    h.n = 0;
    for (size_t i = 0; c->lo > 0 && i < n; i++) {
        limit[i] = (size_t)floor(c->lo * FT_M * s->w[i] / s->total);
        if (count[i] < limit[i] && j[i] < FT_M)
            ft_push(&h, (struct ft_ev){ft_time(j[i]) / s->w[i], (uint32_t)i});
    }
    while (h.n) {
        struct ft_ev e = ft_pop(&h);
        size_t x = (off[e.s] + j[e.s] * skip[e.s]) % FT_M, o = t[x];
        if (o != e.s && (double)count[o] > (double)FT_M * s->w[o] / s->total) {
            t[x] = e.s;
            count[o]--;
            count[e.s]++;
        }
        if (++j[e.s] < FT_M && count[e.s] < limit[e.s])
            ft_push(&h, (struct ft_ev){ft_time(j[e.s]) / s->w[e.s], e.s});
    }
    free(off);
    free(skip);
    free(j);
    free(count);
    free(limit);
    free(h.e);
    return t;
}

/* 1 when <t> is, slot for slot, the table of a hash pool of the servers of
 * ft_set_new(n, SIZE_MAX, equal). */
static int ft_same_as_pool(const uint32_t *t, size_t n, int equal)
{
    struct up_server_def *defs = ft_xcalloc(n, sizeof(*defs));
    char(*names)[32] = ft_xcalloc(n, sizeof(*names));
    struct up_pool_opts o = {.balance = UP_HASH};
    struct sockaddr_in sin = {.sin_family = AF_INET};
    up_pool *p;
    int same = 1;

    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "10.0.%zu.%zu:80", i / 256, i % 256);
        defs[i] = (struct up_server_def){names[i], (const struct sockaddr *)&sin, sizeof(sin),
                                         ft_weight(i, equal)};
    }
    if (!(p = up_pool_new_opts("t", "", defs, n, 1, 1, &o))) {
        fprintf(stderr, "fill_tradeoff: pool of %zu servers failed\n", n);
        exit(1);
    }
    for (uint64_t x = 0; x < FT_M && same; x++) {
        struct up_pick rq = {.hash = x};
        same = up_select(p, 0, &rq) == t[x];
    }
    up_pool_release(p);
    free(defs);
    free(names);
    return same;
}

static void ft_measure(const struct ft_cand *c, size_t n, int equal)
{
    struct ft_set all = ft_set_new(n, SIZE_MAX, equal);
    size_t held, unused;
    uint32_t *t = ft_fill(&all, c, &held);
    size_t *count = ft_xcalloc(n, sizeof(size_t)), removals = n < FT_REMOVALS ? n : FT_REMOVALS;
    double lo = 1e9, hi = 0, sq = 0, own = 0, share = 0, worst = 0;

    for (size_t x = 0; x < FT_M; x++)
        count[t[x]]++;
    for (size_t i = 0; i < n; i++) {
        double r = count[i] / (FT_M * all.w[i] / all.total);
        lo = r < lo ? r : lo;
        hi = r > hi ? r : hi;
        sq += (r - 1) * (r - 1);
    }
    for (size_t k = 0; k < removals; k++) {
        size_t gone = k * n / removals + n / (2 * removals), moved = 0;
        struct ft_set less = ft_set_new(n, gone, equal);
        uint32_t *u = ft_fill(&less, c, &unused);
        for (size_t x = 0; x < FT_M; x++)
            moved += t[x] != u[x] + (u[x] >= gone); /* indices past it shift down */
        double r = (double)moved / (FT_M * all.w[gone] / all.total);
        share += r / (double)removals;
        worst = r > worst ? r : worst;
        own += (double)moved / (double)count[gone] / (double)removals;
        free(u);
        free(less.hash);
        free(less.w);
    }
    const char *check = "";
    if (c->cap == 0 && c->lo == 0)
        check = ft_same_as_pool(t, n, equal) ? " (= the pool's table)" : " (NOT the pool's table)";
    printf("| %s%s | %s | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f%% | %.0f%% |\n", c->name,
           check, equal ? "equal" : "1..4", n, share, worst, own, lo, hi,
           100 * sqrt(sq / (double)n), 100.0 * (double)held / (double)n);
    free(t);
    free(count);
    free(all.hash);
    free(all.w);
}

int main(int argc, char **argv)
{
    static const struct ft_cand cands[] = {
        {"rendezvous (today)", 0, 0, 0},
        {"bounded 1.20", 1.20, 0, 0},
        {"bounded 1.15", 1.15, 0, 0},
        {"bounded 1.10", 1.10, 0, 0},
        {"bounded 1.05", 1.05, 0, 0},
        {"bounded 1.02", 1.02, 0, 0},
        {"two-phase 1.20/0.80", 1.20, 0.80, 0},
        {"two-phase 1.10/0.90", 1.10, 0.90, 0},
        {"two-phase 1.05/0.95", 1.05, 0.95, 0},
        {"bounded 1.10, slot order", 1.10, 0, 1},
        {"bounded 1.05, slot order", 1.05, 0, 1},
    };
    static const size_t ns[] = {3, 10, 100, 1000};
    size_t only = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;

    printf(
        "Slots moved when one server is removed, over its weight's share of the slots "
        "(the bench's measure: mean and worst of up to %d removals) and over the slots it "
        "had (1.00: only its own moved), and slots per server over its weight's share, %d "
        "slots:\n\n"
        "| fill | weights | N | moved / its share | worst | moved / its slots | min | max | rms |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        FT_REMOVALS, FT_M);
    for (size_t c = 0; c < sizeof(cands) / sizeof(cands[0]); c++)
        for (int equal = 1; equal >= 0; equal--)
            for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
                if (!only || ns[a] == only)
                    ft_measure(&cands[c], ns[a], equal);
    return 0;
}
