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
 * circular doubly linked lists, one head each, and a two-level bitmap of
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
 * order; a picked server goes to the tail of its bucket with <w> - 1 picks
 * of its turn at that key left (a new turn unless one was under way
 * there), and a server that comes back to the key of its turn with picks
 * left (its request started or ended) goes to the head, to take the next;
 * any other entry into a bucket is at its tail. So an idle pool (every key
 * 0, each request ending before the next pick) follows the weights
 * exactly, w picks of each server in turn, as weighted round robin does,
 * and so do loaded ties (weights 1 and 3 holding 1 and 3 requests): the
 * key carries the weight between ties, the turns at them. HAProxy's
 * leastconn is not weighted at ties, nginx's is (weighted round robin
 * among the tied). With equal weights there are no turns: round robin
 * among equals, in order. The turn's bookkeeping takes selects, not
 * branches (whether a server comes back in its turn is a coin toss with
 * unequal weights, and a mispredict costs more than the selects).
 *
 * Memory. A worker's buckets and nodes live in its own cache-line-separated
 * block (up_slab_new): 16 KB of heads, the bitmap, 16 bytes a server. The
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
#include <string.h>

#define LC_NB 4096            /* buckets by key */
#define LC_OVF (LC_NB - 1)    /* the overflow bucket: keys >= LC_OVF */
#define LC_WORDS (LC_NB / 64) /* the bitmap's lower level; one word over it */
#define LC_NIL UINT32_MAX     /* an empty bucket's head */
#define LC_NOKEY UINT16_MAX   /* no turn under way: above every bucket */
#define LC_VISIT 64           /* servers a pick may walk past before a linear scan */
#define LC_SCAP 1024          /* the largest exact scale */
#define LC_SMAX (1ull << 20)  /* the largest scale at all */
_Static_assert(LC_NB <= LC_NOKEY, "LC_NOKEY must be above every bucket");

/* A server's place in its bucket's ring, and its turn (one per worker). */
struct lc_node {
    uint32_t next, prev;
    uint16_t bkt;  /* the bucket it is in */
    uint16_t rkey; /* the bucket of its turn while it has picks left there, else LC_NOKEY */
    uint32_t left; /* picks left in its turn */
};

/* A worker's buckets, at the start of its block; its nodes follow. */
struct lc_buckets {
    uint64_t top;            /* bit i: word[i] is not 0 */
    uint64_t word[LC_WORDS]; /* bit k % 64 of word k / 64: bucket k not empty */
    uint32_t head[LC_NB];    /* the ring's first server, LC_NIL when empty */
};

/* A server's constants, shared by the workers. */
struct lc_srv {
    uint64_t mul;  /* ceil(2^32 * S / w): key = (inflight * mul) >> 32 */
    uint32_t ovf;  /* the least inflight whose key is LC_OVF or more */
    uint32_t turn; /* picks in a turn: the reduced weight */
};

struct lc {
    void *slab; /* per-worker buckets and nodes, up_slab_new */
    size_t stride;
    struct lc_srv *srv; /* n of them */
    int turns;          /* unequal weights: turns of more than one pick */
};

static inline struct lc_buckets *lc_bk(const struct lc *l, unsigned w)
{
    return (struct lc_buckets *)((char *)l->slab + (size_t)w * l->stride);
}

static inline struct lc_node *lc_nodes(struct lc_buckets *b)
{
    return (struct lc_node *)(b + 1);
}

/* The key of server <s> holding <c> requests, capped at the overflow
 * bucket. */
static inline uint32_t key_of(const struct lc *l, size_t s, uint32_t c)
{
    return c >= l->srv[s].ovf ? LC_OVF : (uint32_t)((c * l->srv[s].mul) >> 32);
}

static inline void bm_set(struct lc_buckets *b, uint32_t k)
{
    b->word[k / 64] |= 1ull << (k % 64);
    b->top |= 1ull << (k / 64);
}

static inline void bm_clear(struct lc_buckets *b, uint32_t k)
{
    if (!(b->word[k / 64] &= ~(1ull << (k % 64))))
        b->top &= ~(1ull << (k / 64));
}

/* The lowest non-empty bucket from <k> on, LC_NB when there is none. */
static inline uint32_t bm_next(const struct lc_buckets *b, uint32_t k)
{
    uint32_t i = k / 64;
    uint64_t m, t;

    if (k >= LC_NB)
        return LC_NB;
    if ((m = b->word[i] & (~0ull << (k % 64))))
        return i * 64 + (uint32_t)__builtin_ctzll(m);
    t = i + 1 < LC_WORDS ? b->top & (~0ull << (i + 1)) : 0;
    if (!t)
        return LC_NB;
    i = (uint32_t)__builtin_ctzll(t);
    return i * 64 + (uint32_t)__builtin_ctzll(b->word[i]);
}

/* Takes <s> out of its bucket's ring. */
static inline void bk_unlink(struct lc_buckets *b, struct lc_node *node, uint32_t s)
{
    struct lc_node *x = &node[s];

    if (x->next == s) {
        b->head[x->bkt] = LC_NIL;
        bm_clear(b, x->bkt);
        return;
    }
    node[x->prev].next = x->next;
    node[x->next].prev = x->prev;
    /* a select (gcc makes this one a cmov): whether <s> heads its bucket
     * is a coin toss where keys are sparse */
    b->head[x->bkt] = b->head[x->bkt] == s ? x->next : b->head[x->bkt];
}

/* Puts <s> (in no ring) at the tail of bucket <k>: just before its head. */
static inline void bk_append(struct lc_buckets *b, struct lc_node *node, uint32_t s, uint32_t k)
{
    struct lc_node *x = &node[s];
    uint32_t h = b->head[k];

    x->bkt = (uint16_t)k;
    if (h == LC_NIL) {
        x->next = x->prev = s;
        b->head[k] = s;
        bm_set(b, k);
        return;
    }
    x->prev = node[h].prev;
    x->next = h;
    node[x->prev].next = s;
    node[h].prev = s;
}

/* Moves <s>, now holding <c> requests, to the bucket of its key on worker
 * <w>: to the tail, or, when it comes back to the key of its turn with
 * picks left (never, with equal weights), to the head (the ring's tail is
 * its head's predecessor). */
static inline void bk_move(const struct lc *l, unsigned w, uint32_t s, uint32_t c)
{
    struct lc_buckets *b = lc_bk(l, w);
    struct lc_node *node = lc_nodes(b), *x = &node[s];
    uint32_t k = key_of(l, s, c);

    bk_unlink(b, node, s);
    bk_append(b, node, s, k);
    b->head[k] = x->rkey == k ? s : b->head[k];
}

/* <s> (picked past the head of bucket <k>) goes to the tail. Out of line:
 * rare, and the common pick is leaner without it. */
__attribute__((noinline)) static void requeue(struct lc_buckets *b, struct lc_node *node,
                                              uint32_t s, uint32_t k)
{
    bk_unlink(b, node, s);
    bk_append(b, node, s, k);
}

/* <s> (in bucket <k>) was picked: one pick of its turn at <k> is used (a
 * new turn when none was under way there), and it goes to the tail of its
 * bucket; its next move brings it back to the head if it returns to <k>
 * with picks left. */
static inline size_t took(const struct lc *l, struct lc_buckets *b, uint32_t s, uint32_t k)
{
    struct lc_node *node = lc_nodes(b), *x = &node[s];

    if (l->turns) {
        /* both operands loaded first: gcc then makes the selects cmovs */
        uint32_t left = x->left, turn = l->srv[s].turn;

        left = (x->rkey == k ? left : turn) - 1;
        x->left = left;
        x->rkey = (uint16_t)(left ? k : LC_NOKEY);
    }
    if (b->head[k] == s)
        b->head[k] = x->next; /* a ring: the head turned into the tail */
    else
        requeue(b, node, s, k);
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

/* The pick when the lowest bucket's head will not do (down, tried, held
 * back by slow start) or is the overflow bucket: a walk from bucket <k>.
 * Out of line, so that the common pick needs no frame of its own. */
__attribute__((noinline)) static size_t walk(up_pool *p, unsigned w, const struct up_pick *rq,
                                             int ignore_health, uint32_t k)
{
    struct lc *l = p->lb;
    struct lc_buckets *b = lc_bk(l, w);
    struct lc_node *node = lc_nodes(b);
    uint64_t now = rq ? rq->now_ms : 0;
    unsigned visits = 0;
    uint32_t s;
    size_t best = UP_NONE;

    /* below the overflow, every server of a bucket has the lowest key */
    for (; k < LC_OVF; k = bm_next(b, k + 1)) {
        s = b->head[k];
        do {
            if (++visits > LC_VISIT)
                goto scan;
            if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now)) {
                best = s;
                goto take;
            }
            s = node[s].next;
        } while (s != b->head[k]);
    }
    if (k == LC_NB)
        return up_fallback(p, w, rq, ignore_health);
    /* the overflow bucket: its lightest, the first of them */
    s = b->head[LC_OVF];
    do {
        if (++visits > LC_VISIT)
            goto scan;
        if ((best == UP_NONE || lighter(p, w, s, best)) && up_usable(p, s, rq, ignore_health) &&
            up_slow_admit(p, w, s, now))
            best = s;
        s = node[s].next;
    } while (s != b->head[LC_OVF]);
    if (best == UP_NONE)
        return up_fallback(p, w, rq, ignore_health);
take:
    return took(l, b, (uint32_t)best, k);
scan:
    if ((best = linear(p, w, rq, ignore_health)) == UP_NONE)
        return up_fallback(p, w, rq, ignore_health);
    k = node[best].bkt;
    goto take;
}

/* The common pick: the lowest bucket's head, when it is up, nothing is
 * tried and no server ramps; else the walk. Written out, not through
 * up_usable: its tried test is a call, which would give this leaf a frame. */
static size_t lc_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    struct lc *l = p->lb;
    struct lc_buckets *b = lc_bk(l, w);
    uint32_t k = bm_next(b, 0);

    if (k < LC_OVF && (ignore_health || !up_hflags(p, b->head[k])) && !(rq && rq->tried) &&
        !(rq && rq->now_ms && p->opts.slow_start_ms))
        return took(l, b, b->head[k], k);
    return walk(p, w, rq, ignore_health, k);
}

/* A request started or ended on <s>: its key moved, maybe back to the key
 * of its turn (a start after an end of its own, or an end after a start).
 * The same move, twice: each hook has its own copy of bk_move's branches,
 * and their odds differ (a start takes the server it leaves out of the
 * lowest bucket, where it is often alone; an end brings one into a bucket
 * that is often empty), so that a branch predictor learns each copy's
 * apart. One function for both hooks ran 3-10 ns a pick slower here with
 * equal weights, the same instructions (loadtest/balancer_bench). */
static void lc_started(up_pool *p, unsigned w, size_t s, uint32_t load)
{
    bk_move(p->lb, w, (uint32_t)s, load);
}

static void lc_ended(up_pool *p, unsigned w, size_t s, uint32_t load)
{
    bk_move(p->lb, w, (uint32_t)s, load);
}

/* The pool's scale S for weights divided by <g>, the largest <top>: the
 * smaller of their lcm and top^2 when that is at most LC_SCAP (exact keys),
 * else LC_SCAP or <top> (up to LC_SMAX), whichever is larger. */
static uint64_t scale(const up_pool *p, uint64_t g, uint64_t top)
{
    uint64_t lcm = 1, sq = top <= LC_SCAP ? top * top : LC_SCAP + 1;

    for (size_t s = 0; s < p->n && lcm <= LC_SCAP; s++) {
        uint64_t w = p->weight[s] / g;
        lcm = lcm / up_gcd(lcm, w) * w;
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
        l->turns |= w > 1;
    }
}

static int lc_init(up_pool *p)
{
    struct lc *l = calloc(1, sizeof(*l));
    size_t n = p->n;
    uint64_t g = 0, top = 0;

    if (!(p->lb = l) || n >= UINT32_MAX)
        return -1;
    if (!(l->srv = calloc(n ? n : 1, sizeof(*l->srv))) ||
        !(l->slab = up_slab_new(p->nworkers, sizeof(struct lc_buckets) + n * sizeof(struct lc_node),
                                &l->stride)))
        return -1;
    for (size_t s = 0; s < n; s++) {
        g = up_gcd(p->weight[s], g);
        top = p->weight[s] > top ? p->weight[s] : top;
    }
    top = g ? top / g : 1;
    constants(p, l, scale(p, g ? g : 1, top), g ? g : 1);
    for (unsigned w = 0; w < p->nworkers; w++) {
        struct lc_buckets *b = lc_bk(l, w);
        memset(b->head, 0xff, sizeof(b->head)); /* LC_NIL */
        for (size_t s = 0; s < n; s++) {
            lc_nodes(b)[s].rkey = LC_NOKEY;
            bk_append(b, lc_nodes(b), (uint32_t)s, key_of(l, s, up_load(p, w, s)));
        }
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
    .start = lc_started,
    .end = lc_ended,
    .destroy = lc_destroy,
};
