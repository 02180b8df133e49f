/*
 * least_conn.c - least connections, weighted: the usable server with the
 * fewest requests in flight per unit of weight.
 *
 * Equal weights (the common pool) take an O(1) path. Each worker keeps its
 * servers in buckets by its own in-flight count on them: an array of
 * doubly linked lists indexed by count (counts from LC_NB - 1 up share the
 * last, overflow bucket), and the lowest non-empty bucket. A pick takes the
 * first usable server of the lowest bucket (walking past tried, down and
 * not-admitted ones, then on to the next bucket) and moves it to its
 * bucket's tail; a request's start and end (the balancer's hooks) move the
 * server to the tail of its new count's bucket. So servers that tie take
 * turns in order, round robin among equals. The walk visits each server
 * once at most, so at worst (nothing usable in the low buckets) it costs
 * what a linear scan does; in the overflow bucket it looks for the lowest
 * count. Start, end and the pick's move are O(1).
 *
 * Unequal weights keep a binary heap per worker ordered by (load / weight,
 * virtual time, index): among equals the one with the earliest virtual
 * finish time wins (weighted fair queueing: a pick moves a server's time on
 * by 1/weight), so a pool with no load still follows its weights. A pick
 * reads the top, start and end move one server up or down, O(log n) each.
 * When the top cannot be used (tried, down, or ramping up under slow start
 * and not admitted) the pick searches the heap below it, visiting at most
 * LC_VISIT nodes before falling back to a linear scan. Weighted pools of up
 * to LC_SCAN servers are always scanned, in the same order: there a scan
 * costs less than keeping the heap.
 *
 * Either way a worker's structure lives in its own cache-line-separated
 * block (up_slab_new). The counts are this worker's own (struct
 * up_worker.inflight): a shared count would put two read-modify-writes on a
 * contended line into every request, which the design forbids. Connections
 * spread evenly over the workers (SO_REUSEPORT), so each worker's view of a
 * slow server is the whole picture in proportion: a server that holds
 * requests longer holds more of every worker's.
 */
#include "upstream/up_int.h"

#include <stdlib.h>

#define LC_STEP (1ull << 20)   /* virtual time of one pick at weight 1 */
#define LC_RENORM (1ull << 60) /* virtual times are shifted down past this */
#define LC_VISIT 64            /* heap nodes a pick may look at */
#define LC_SCAN 8              /* weighted pools this small are scanned, not kept in a heap */
#define LC_NB 256              /* buckets by count; the last holds counts >= LC_NB - 1 */
#define LC_NIL UINT32_MAX      /* the end of a bucket's list */

/* A server's place in its bucket's list (equal weights). */
struct lc_node {
    uint32_t next, prev, bkt;
};

/* A worker's buckets (equal weights), at the start of its block. */
struct lc_buckets {
    uint32_t min; /* the lowest non-empty bucket */
    uint32_t head[LC_NB], tail[LC_NB];
};

struct lc_worker {
    /* equal weights */
    struct lc_buckets *b;
    struct lc_node *node; /* node[s]: server s's links */
    /* unequal weights */
    uint32_t *heap; /* server indices in heap order */
    uint32_t *pos;  /* pos[s]: where server s is in heap */
    uint64_t *vt;   /* virtual finish times */
    uint64_t now;   /* the last pick's start time */
};

struct lc {
    void *slab; /* per-worker buckets or heaps, up_slab_new */
    size_t stride;
    int equal;           /* every server has the same weight: buckets */
    struct lc_worker *w; /* nworkers of them, pointers into the slab */
};

/* <a> comes before <b> in worker <w>'s heap. */
static inline int before(const up_pool *p, unsigned w, const struct lc_worker *lw, uint32_t a,
                         uint32_t b)
{
    uint64_t la = up_load(p, w, a), lb = up_load(p, w, b);
    uint64_t x = la * p->weight[b], y = lb * p->weight[a];

    if (x != y)
        return x < y;
    if (lw->vt[a] != lw->vt[b])
        return lw->vt[a] < lw->vt[b];
    return a < b;
}

static inline void place(struct lc_worker *lw, size_t i, uint32_t s)
{
    lw->heap[i] = s;
    lw->pos[s] = (uint32_t)i;
}

static void sift_up(const up_pool *p, unsigned w, struct lc_worker *lw, size_t i)
{
    uint32_t s = lw->heap[i];

    while (i > 0 && before(p, w, lw, s, lw->heap[(i - 1) / 2])) {
        place(lw, i, lw->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    place(lw, i, s);
}

static void sift_down(const up_pool *p, unsigned w, struct lc_worker *lw, size_t i)
{
    uint32_t s = lw->heap[i];
    size_t n = p->n;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(p, w, lw, lw->heap[c + 1], lw->heap[c]))
            c++;
        if (!before(p, w, lw, lw->heap[c], s))
            break;
        place(lw, i, lw->heap[c]);
        i = c;
    }
    place(lw, i, s);
}

/* Equal weights: the bucket of server <s>'s count on worker <w>. */
static inline uint32_t bucket_of(const up_pool *p, unsigned w, size_t s)
{
    uint32_t c = up_load(p, w, s);

    return c < LC_NB - 1 ? c : LC_NB - 1;
}

/* Takes <s> out of its bucket's list. */
static inline void bk_unlink(struct lc_worker *lw, uint32_t s)
{
    struct lc_node *x = &lw->node[s];

    if (x->prev != LC_NIL)
        lw->node[x->prev].next = x->next;
    else
        lw->b->head[x->bkt] = x->next;
    if (x->next != LC_NIL)
        lw->node[x->next].prev = x->prev;
    else
        lw->b->tail[x->bkt] = x->prev;
}

/* Puts <s> (in no list) at the tail of bucket <k>. */
static inline void bk_append(struct lc_worker *lw, uint32_t s, uint32_t k)
{
    struct lc_node *x = &lw->node[s];

    x->bkt = k;
    x->next = LC_NIL;
    x->prev = lw->b->tail[k];
    if (x->prev != LC_NIL)
        lw->node[x->prev].next = s;
    else
        lw->b->head[k] = s;
    lw->b->tail[k] = s;
}

/* Moves <s> to the tail of the bucket of its count on worker <w> (the same
 * bucket after a pick: its turn is over), and keeps the lowest non-empty
 * bucket. The search for it stops at <s>'s bucket at the latest. */
static void bk_move(const up_pool *p, unsigned w, struct lc_worker *lw, uint32_t s)
{
    struct lc_buckets *b = lw->b;
    uint32_t k = bucket_of(p, w, s);

    bk_unlink(lw, s);
    bk_append(lw, s, k);
    if (k < b->min)
        b->min = k;
    while (b->head[b->min] == LC_NIL)
        b->min++;
}

/* Equal weights: the first usable server that slow start admits, from the
 * lowest bucket up, in list order (all of a bucket below the overflow have
 * the same count, so the first is the best; the overflow bucket is searched
 * for its lowest count). Each server is visited once at most, so the walk
 * is bounded by a linear scan's n (plus LC_NB empty buckets); it costs that
 * much only when the low buckets hold nothing usable. */
static size_t bk_select(up_pool *p, unsigned w, const struct lc_worker *lw,
                        const struct up_pick *rq, int ignore_health)
{
    uint64_t now = rq ? rq->now_ms : 0;
    size_t best = UP_NONE;
    uint32_t least = 0;

    for (uint32_t k = lw->b->min; k < LC_NB - 1; k++)
        for (uint32_t s = lw->b->head[k]; s != LC_NIL; s = lw->node[s].next)
            if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now))
                return s;
    for (uint32_t s = lw->b->head[LC_NB - 1]; s != LC_NIL; s = lw->node[s].next)
        if ((best == UP_NONE || up_load(p, w, s) < least) && up_usable(p, s, rq, ignore_health) &&
            up_slow_admit(p, w, s, now)) {
            best = s;
            least = up_load(p, w, s);
        }
    return best;
}

/* Equal weights: worker <lw>'s buckets in block <blk>, every server in the
 * bucket of its count, in index order. */
static void bk_init(const up_pool *p, unsigned w, struct lc_worker *lw, char *blk)
{
    lw->b = (struct lc_buckets *)blk;
    lw->node = (struct lc_node *)(blk + sizeof(struct lc_buckets));
    for (uint32_t k = 0; k < LC_NB; k++)
        lw->b->head[k] = lw->b->tail[k] = LC_NIL;
    lw->b->min = LC_NB - 1;
    for (size_t s = 0; s < p->n; s++) {
        uint32_t k = bucket_of(p, w, s);
        bk_append(lw, (uint32_t)s, k);
        if (k < lw->b->min)
            lw->b->min = k;
    }
}

/* Every server has the same weight. */
static int equal_weights(const up_pool *p)
{
    for (size_t s = 1; s < p->n; s++)
        if (p->weight[s] != p->weight[0])
            return 0;
    return 1;
}

static int lc_init(up_pool *p)
{
    struct lc *l = calloc(1, sizeof(*l));
    size_t n = p->n, bytes = n * (2 * sizeof(uint32_t) + sizeof(uint64_t));

    if (!(p->lb = l) || n >= UINT32_MAX)
        return -1;
    if ((l->equal = equal_weights(p)))
        bytes = sizeof(struct lc_buckets) + n * sizeof(struct lc_node);
    if (!(l->w = calloc(p->nworkers, sizeof(*l->w))) ||
        !(l->slab = up_slab_new(p->nworkers, bytes, &l->stride)))
        return -1;
    for (unsigned w = 0; w < p->nworkers; w++) {
        struct lc_worker *lw = &l->w[w];
        char *b = (char *)l->slab + (size_t)w * l->stride;
        if (l->equal) {
            bk_init(p, w, lw, b);
            continue;
        }
        lw->vt = (uint64_t *)b;
        lw->heap = (uint32_t *)(b + n * sizeof(uint64_t));
        lw->pos = lw->heap + n;
        /* no load, equal times: index order is already a heap */
        for (size_t s = 0; s < n; s++)
            place(lw, s, (uint32_t)s);
    }
    return 0;
}

/* Shifts worker <w>'s virtual times down so they never overflow, and
 * rebuilds the heap (times clamped at zero may reorder). */
static void renormalize(const up_pool *p, unsigned w, struct lc_worker *lw)
{
    uint64_t base = lw->now;

    for (size_t s = 0; s < p->n; s++)
        lw->vt[s] = lw->vt[s] > base ? lw->vt[s] - base : 0;
    lw->now = 0;
    for (size_t i = p->n / 2; p->n > LC_SCAN && i-- > 0;)
        sift_down(p, w, lw, i);
}

/* The best usable server below heap node 0 (which the caller found
 * unusable: it is not asked again, so slow start rolls its dice once),
 * looking at LC_VISIT nodes at most: a usable node ends its subtree's
 * search, since nothing below it comes first. UP_NONE when none was found
 * (or the budget ran out: <*out> is set then). */
static size_t search(up_pool *p, unsigned w, struct lc_worker *lw, const struct up_pick *rq,
                     int ignore_health, int *out)
{
    size_t stack[LC_VISIT], top = 0, best = UP_NONE, visited = 0;
    uint64_t now = rq ? rq->now_ms : 0;

    *out = 0;
    if (p->n > 2)
        stack[top++] = 2;
    if (p->n > 1)
        stack[top++] = 1;
    while (top) {
        size_t i = stack[--top];
        uint32_t s = lw->heap[i];
        if (++visited > LC_VISIT) {
            *out = 1;
            return UP_NONE;
        }
        if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now)) {
            if (best == UP_NONE || before(p, w, lw, s, (uint32_t)best))
                best = s;
            continue;
        }
        for (size_t c = 2 * i + 1; c <= 2 * i + 2 && c < p->n; c++) {
            if (top == LC_VISIT) {
                *out = 1;
                return UP_NONE;
            }
            stack[top++] = c;
        }
    }
    return best;
}

/* Small pools, and the heap search's fallback: every usable server that
 * slow start admits (one roll each) compared. */
static size_t linear(up_pool *p, unsigned w, const struct lc_worker *lw, const struct up_pick *rq,
                     int ignore_health)
{
    uint64_t now = rq ? rq->now_ms : 0;
    size_t best = UP_NONE;

    for (size_t s = 0; s < p->n; s++)
        if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now) &&
            (best == UP_NONE || before(p, w, lw, (uint32_t)s, (uint32_t)best)))
            best = s;
    return best;
}

static size_t lc_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    struct lc *l = p->lb;
    struct lc_worker *lw = &l->w[w];

    if (l->equal) {
        size_t got = bk_select(p, w, lw, rq, ignore_health);
        if (got != UP_NONE)
            bk_move(p, w, lw, (uint32_t)got);
        return got;
    }

    uint32_t s = lw->heap[0];
    size_t pick = s;
    int out, heap = p->n > LC_SCAN;

    if (!heap) {
        pick = linear(p, w, lw, rq, ignore_health);
    } else if (!up_usable(p, s, rq, ignore_health) ||
               !up_slow_admit(p, w, s, rq ? rq->now_ms : 0)) {
        pick = search(p, w, lw, rq, ignore_health, &out);
        if (out)
            pick = linear(p, w, lw, rq, ignore_health);
    }
    if (pick == UP_NONE)
        return UP_NONE;
    /* weighted fair queueing: start no earlier than the last pick */
    if (lw->vt[pick] > lw->now)
        lw->now = lw->vt[pick];
    lw->vt[pick] = lw->now + LC_STEP / p->weight[pick];
    if (heap)
        sift_down(p, w, lw, lw->pos[pick]);
    if (lw->now > LC_RENORM)
        renormalize(p, w, lw);
    return pick;
}

/* A request started on <s>: its load went up, it moves down (to the tail
 * of the next bucket). */
static void lc_start(up_pool *p, unsigned w, size_t s)
{
    struct lc *l = p->lb;
    struct lc_worker *lw = &l->w[w];

    if (l->equal)
        bk_move(p, w, lw, (uint32_t)s);
    else if (p->n > LC_SCAN)
        sift_down(p, w, lw, lw->pos[s]);
}

/* A request ended on <s>: its load went down, it moves up (to the tail of
 * the bucket below). */
static void lc_end(up_pool *p, unsigned w, size_t s)
{
    struct lc *l = p->lb;
    struct lc_worker *lw = &l->w[w];

    if (l->equal)
        bk_move(p, w, lw, (uint32_t)s);
    else if (p->n > LC_SCAN)
        sift_up(p, w, lw, lw->pos[s]);
}

static void lc_destroy(up_pool *p)
{
    struct lc *l = p->lb;

    if (l) {
        free(l->slab);
        free(l->w);
    }
    free(l);
}

const struct up_lb_ops up_lb_least_conn = {
    .name = "least_conn",
    .init = lc_init,
    .select = lc_select,
    .start = lc_start,
    .end = lc_end,
    .destroy = lc_destroy,
};
