/*
 * least_conn.c - least connections, weighted: the usable server with the
 * fewest requests in flight per unit of weight, in O(1) a pick, start and
 * end (HAProxy's leastconn key, kept in a bucket queue, not a tree).
 *
 * The key. Server s's key is floor(inflight * S / w), where w is its weight
 * divided by the gcd of the pool's weights and S the pool's scale (see
 * scale()): the lcm of the reduced weights or the square of the largest,
 * whichever is smaller, as long as that is at most LC_SCAP. Either makes
 * the key exact: two servers' keys compare as their inflight / weight do
 * (with S = W^2, two different ratios differ by at least 1 / W^2, one key
 * step). Equal weights give S = 1, the key is the count itself. A pool
 * whose exact scale would pass LC_SCAP (weights 1..1000 at random) uses
 * S = LC_SCAP (or W if larger): then two servers whose ratios differ by
 * less than 1 / S may share a key, and take turns as ties do.
 *
 * The buckets. Each worker keeps its servers in LC_NB buckets by key:
 * circular doubly linked lists, each with a sentinel link of its own (so
 * that a move tests nothing), and a two-level bitmap of
 * the non-empty ones (64 words, one word over them), so the lowest is two
 * __builtin_ctzll away. Keys from LC_OVF up share the last, overflow
 * bucket, where a pick compares the true ratios (inflight * weight cross
 * products): exact there too, but a scan of that bucket. A request's start
 * and end (the balancer's hooks) move the server to its new key's bucket:
 * O(1), plus a bit set and maybe one cleared.
 *
 * A pick walks the lowest bucket's list past tried, down and not-admitted
 * (slow start) servers, then the next non-empty bucket's; after LC_VISIT
 * servers without one it falls back to a linear scan of the pool.
 *
 * Ties take turns, weighted. Servers that share a key are picked in list
 * order, and a picked server keeps its place for <w> picks in a row at that
 * key (its turn), then goes to the tail of the bucket. A server entering a
 * bucket goes to its tail, unless it is in the middle of its turn at that
 * very key: then it goes back to the head to finish it. So an idle pool
 * (every key 0, each request ending before the next pick) follows the
 * weights exactly, w picks of each server in turn, as weighted round robin
 * does: HAProxy's leastconn is not weighted at zero load, the tests and
 * operators here expect it to be. With equal weights a turn is one pick:
 * round robin among equals, in order.
 *
 * Memory. A worker's buckets and nodes live in its own cache-line-separated
 * block (up_slab_new): 32 KB of sentinels, the bitmap, 20 bytes a server. The
 * per-server constants (the key's multiplier, where the overflow starts,
 * the turn's length) are shared and read-only. The counts are this worker's
 * own (struct up_worker.inflight): a shared count would put two
 * read-modify-writes on a contended line into every request, which the
 * design forbids. Connections spread evenly over the workers (SO_REUSEPORT),
 * so each worker's view of a slow server is the whole picture in
 * proportion: a server that holds requests longer holds more of every
 * worker's.
 */
#include "upstream/up_int.h"

#include <stdlib.h>

#define LC_NB 4096            /* buckets by key */
#define LC_OVF (LC_NB - 1)    /* the overflow bucket: keys >= LC_OVF */
#define LC_WORDS (LC_NB / 64) /* the bitmap's lower level; one word over it */
#define LC_VISIT 64           /* servers a pick may walk past before a linear scan */
#define LC_SCAP 1024          /* the largest exact scale */
#define LC_SMAX (1ull << 20)  /* the largest scale at all */

/* One link of a bucket's ring. Links 0..n-1 are the servers, link n + k is
 * bucket k's sentinel: every ring holds its sentinel, so unlinking and
 * inserting never test for an empty ring or for the head (those tests
 * were most of a pick's branch mispredicts). */
struct lc_link {
    uint32_t next, prev;
};

/* A server's bucket and its turn (one per worker). */
struct lc_node {
    uint32_t bkt;  /* the bucket it is in */
    uint32_t turn; /* the bucket its turn is at, when <left> */
    uint32_t left; /* picks left in its turn; 0: none under way */
};

/* A worker's buckets, at the start of its block; n + LC_NB links and n
 * nodes follow. */
struct lc_buckets {
    uint64_t top;            /* bit i: word[i] may not be 0; set if it is not */
    uint64_t word[LC_WORDS]; /* bit k % 64 of word k / 64: bucket k not empty */
};

/* A server's constants, shared by the workers. */
struct lc_srv {
    uint64_t mul;  /* ceil(2^32 * S / w): key = (inflight * mul) >> 32 */
    uint32_t ovf;  /* the least inflight whose key is LC_OVF or more */
    uint32_t turn; /* picks in a turn: the reduced weight */
};

struct lc {
    void *slab; /* per-worker buckets, links and nodes, up_slab_new */
    size_t stride;
    struct lc_srv *srv; /* n of them */
};

/* Worker <w>'s buckets, links and nodes in one view. */
struct lc_view {
    struct lc_buckets *b;
    struct lc_link *link;
    struct lc_node *node;
    uint32_t n; /* the servers: bucket k's sentinel is link n + k */
};

static inline struct lc_view lc_view(const up_pool *p, const struct lc *l, unsigned w)
{
    struct lc_buckets *b = (struct lc_buckets *)((char *)l->slab + (size_t)w * l->stride);
    struct lc_link *link = (struct lc_link *)(b + 1);

    return (struct lc_view){b, link, (struct lc_node *)(link + p->n + LC_NB), (uint32_t)p->n};
}

/* Server <s>'s key on worker <w>, capped at the overflow bucket. */
static inline uint32_t key_of(const up_pool *p, const struct lc *l, unsigned w, size_t s)
{
    uint32_t c = up_load(p, w, s);

    return c >= l->srv[s].ovf ? LC_OVF : (uint32_t)((c * l->srv[s].mul) >> 32);
}

/* The lowest non-empty bucket from <k> on, LC_NB when there is none. A
 * top bit may outlive its word's last bucket (bk_unlink leaves it, saving
 * every move a test): it is cleared here when found. */
static inline uint32_t bm_next(struct lc_buckets *b, uint32_t k)
{
    uint32_t i = k / 64;
    uint64_t m, t;

    if (k >= LC_NB)
        return LC_NB;
    if ((m = b->word[i] & (~0ull << (k % 64))))
        return i * 64 + (uint32_t)__builtin_ctzll(m);
    for (t = i + 1 < LC_WORDS ? b->top & (~0ull << (i + 1)) : 0; t; t &= t - 1) {
        i = (uint32_t)__builtin_ctzll(t);
        if (b->word[i])
            return i * 64 + (uint32_t)__builtin_ctzll(b->word[i]);
        b->top &= ~(1ull << i);
    }
    return LC_NB;
}

/* Takes link <s> out of its ring. */
static inline void ring_unlink(struct lc_link *link, uint32_t s)
{
    link[link[s].prev].next = link[s].next;
    link[link[s].next].prev = link[s].prev;
}

/* Puts link <s> (in no ring) just before link <at>. */
static inline void ring_insert(struct lc_link *link, uint32_t s, uint32_t at)
{
    link[s].prev = link[at].prev;
    link[s].next = at;
    link[link[at].prev].next = s;
    link[at].prev = s;
}

/* Takes <s> out of its bucket, clearing the bucket's bit if it empties
 * (with a mask: whether it empties is as good as random; the top bit is
 * left for bm_next). */
static inline void bk_unlink(struct lc_view v, uint32_t s)
{
    uint32_t k = v.node[s].bkt, sent = v.n + k;
    uint64_t empty;

    ring_unlink(v.link, s);
    empty = v.link[sent].next == sent;
    v.b->word[k / 64] &= ~(empty << (k % 64));
}

/* Puts <s> (in no ring) into bucket <k>: at its head when <head>, else at
 * its tail (just before the sentinel). */
static inline void bk_insert(struct lc_view v, uint32_t s, uint32_t k, int head)
{
    uint32_t sent = v.n + k;

    v.node[s].bkt = k;
    ring_insert(v.link, s, (uint32_t)up_sel(head, v.link[sent].next, sent));
    v.b->word[k / 64] |= 1ull << (k % 64);
    v.b->top |= 1ull << (k / 64);
}

/* Moves <s> to the bucket of its key on worker <w>: to the tail, or to the
 * head if its turn at that key is under way. */
static void bk_move(const up_pool *p, const struct lc *l, unsigned w, uint32_t s)
{
    struct lc_view v = lc_view(p, l, w);
    struct lc_node *x = &v.node[s];
    uint32_t k = key_of(p, l, w, s);

    bk_unlink(v, s);
    bk_insert(v, s, k, (x->left != 0) & (x->turn == k));
}

/* <s> (in bucket <k>) was picked: one pick of its turn is used (a new turn
 * of <turn> picks starts unless one is under way at <k>), and when the
 * turn is over it goes to the tail of its bucket. Branch-free: <s> is
 * taken out and put back before <at>, its own successor while the turn
 * lasts (the same place), the sentinel when it is over (the tail). */
static inline size_t took(const struct lc *l, struct lc_view v, uint32_t s, uint32_t k)
{
    struct lc_node *x = &v.node[s];
    int fresh = (x->left == 0) | (x->turn != k);
    uint32_t at;

    x->left = (uint32_t)up_sel(fresh, l->srv[s].turn, x->left) - 1;
    x->turn = k;
    at = (uint32_t)up_sel(x->left != 0, v.link[s].next, v.n + k);
    ring_unlink(v.link, s);
    ring_insert(v.link, s, at);
    return s;
}

/* <a>'s load per weight is below <b>'s (exact, whatever the scale). */
static inline int lighter(const up_pool *p, unsigned w, size_t a, size_t b)
{
    return (uint64_t)up_load(p, w, a) * p->weight[b] < (uint64_t)up_load(p, w, b) * p->weight[a];
}

/* The walk's fallback: every usable server that slow start admits (one
 * roll each) compared; the first of the lightest. */
static size_t linear(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    uint64_t now = rq ? rq->now_ms : 0;
    size_t best = UP_NONE;

    for (size_t s = 0; s < p->n; s++)
        if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now) &&
            (best == UP_NONE || lighter(p, w, s, best)))
            best = s;
    return best;
}

/* The walk from server <s>, the first of bucket <k>, on. Out of line, so
 * that lc_select's common case saves no registers. */
__attribute__((noinline)) static size_t lc_walk(up_pool *p, unsigned w, const struct up_pick *rq,
                                                int ignore_health, uint32_t k, uint32_t s)
{
    struct lc *l = p->lb;
    struct lc_view v = lc_view(p, l, w);
    uint64_t now = rq ? rq->now_ms : 0;
    unsigned visits = 0;
    size_t best = UP_NONE;

    /* below the overflow, every server of a bucket has the lowest key */
    while (k < LC_OVF) {
        for (; s != v.n + k; s = v.link[s].next) {
            if (++visits > LC_VISIT)
                goto scan;
            if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now)) {
                best = s;
                goto take;
            }
        }
        if ((k = bm_next(v.b, k + 1)) < LC_NB)
            s = v.link[v.n + k].next;
    }
    if (k == LC_NB)
        return UP_NONE;
    /* the overflow bucket: its lightest, the first of them */
    for (s = v.link[v.n + LC_OVF].next; s != v.n + LC_OVF; s = v.link[s].next) {
        if (++visits > LC_VISIT)
            goto scan;
        if ((best == UP_NONE || lighter(p, w, s, best)) && up_usable(p, s, rq, ignore_health) &&
            up_slow_admit(p, w, s, now))
            best = s;
    }
    if (best == UP_NONE)
        return UP_NONE;
take:
    return took(l, v, (uint32_t)best, k);
scan:
    if ((best = linear(p, w, rq, ignore_health)) == UP_NONE)
        return UP_NONE;
    k = v.node[best].bkt;
    goto take;
}

/* The common case here, the rest in lc_walk: the lowest bucket's first
 * server when it is up and nothing else is asked (no tried set, no slow
 * start: no call, so no registers to save). Else the walk starts there. */
static size_t lc_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    struct lc *l = p->lb;
    struct lc_view v = lc_view(p, l, w);
    uint32_t k = bm_next(v.b, 0), s;
    int plain;

    if (k >= LC_NB)
        return UP_NONE;
    s = v.link[v.n + k].next;
    /* nothing to check but health: no server tried yet, no slow-start roll */
    plain = !rq || ((!rq->tried || !rq->tried->n) && (!rq->now_ms || !p->opts.slow_start_ms));
    if (k < LC_OVF && plain && (ignore_health || !up_hflags(p, s)))
        return took(l, v, s, k);
    return lc_walk(p, w, rq, ignore_health, k, s);
}

/* A request started or ended on <s>: its key moved. */
static void lc_moved(up_pool *p, unsigned w, size_t s)
{
    bk_move(p, p->lb, w, (uint32_t)s);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The pool's scale S for weights divided by <g>, the largest <top>: the
 * smaller of their lcm and top^2 when that is at most LC_SCAP (exact keys),
 * else LC_SCAP or <top> (up to LC_SMAX), whichever is larger. */
static uint64_t scale(const up_pool *p, uint64_t g, uint64_t top)
{
    uint64_t lcm = 1, sq = top <= LC_SCAP ? top * top : LC_SCAP + 1;

    for (size_t s = 0; s < p->n && lcm <= LC_SCAP; s++) {
        uint64_t w = p->weight[s] / g;
        lcm = lcm / gcd(lcm, w) * w;
    }
    if (lcm <= LC_SCAP || sq <= LC_SCAP)
        return lcm < sq ? lcm : sq;
    if (top < LC_SCAP)
        return LC_SCAP;
    return top < LC_SMAX ? top : LC_SMAX;
}

/* The servers' constants at scale <S>, weights divided by <g>. */
static void constants(const up_pool *p, struct lc *l, uint64_t S, uint64_t g)
{
    for (size_t s = 0; s < p->n; s++) {
        uint64_t w = p->weight[s] / g, ovf = (LC_OVF * w + S - 1) / S;
        l->srv[s].mul = ((S << 32) + w - 1) / w;
        l->srv[s].ovf = ovf < UINT32_MAX ? (uint32_t)ovf : UINT32_MAX;
        l->srv[s].turn = (uint32_t)w;
    }
}

static int lc_init(up_pool *p)
{
    struct lc *l = calloc(1, sizeof(*l));
    size_t n = p->n;
    uint64_t g = 0, top = 0;

    if (!(p->lb = l) || n >= UINT32_MAX - LC_NB)
        return -1;
    if (!(l->srv = calloc(n ? n : 1, sizeof(*l->srv))) ||
        !(l->slab = up_slab_new(p->nworkers,
                                sizeof(struct lc_buckets) + (n + LC_NB) * sizeof(struct lc_link) +
                                    n * sizeof(struct lc_node),
                                &l->stride)))
        return -1;
    for (size_t s = 0; s < n; s++) {
        g = gcd(p->weight[s], g);
        top = p->weight[s] > top ? p->weight[s] : top;
    }
    top = g ? top / g : 1;
    constants(p, l, scale(p, g ? g : 1, top), g ? g : 1);
    for (unsigned w = 0; w < p->nworkers; w++) {
        struct lc_view v = lc_view(p, l, w);
        for (uint32_t k = 0; k < LC_NB; k++) /* every ring empty: its sentinel alone */
            v.link[n + k].next = v.link[n + k].prev = (uint32_t)n + k;
        for (size_t s = 0; s < n; s++)
            bk_insert(v, (uint32_t)s, key_of(p, l, w, s), 0);
    }
    return 0;
}

static void lc_destroy(up_pool *p)
{
    struct lc *l = p->lb;

    if (l) {
        free(l->slab);
        free(l->srv);
    }
    free(l);
}

const struct up_lb_ops up_lb_least_conn = {
    .name = "least_conn",
    .init = lc_init,
    .select = lc_select,
    .start = lc_moved,
    .end = lc_moved,
    .destroy = lc_destroy,
};
