/*
 * least_conn.c - least connections, weighted: the usable server with the
 * fewest requests in flight per unit of weight. Among equals the one with
 * the earliest virtual finish time wins (weighted fair queueing: a pick
 * moves a server's time on by 1/weight), so a pool with no load still
 * follows its weights, and servers that tie take turns.
 *
 * Each worker keeps its servers in a binary heap ordered by (load / weight,
 * virtual time, index), in a cache-line-separated block of its own: a pick
 * reads the top, and a request's start and end (the balancer's hooks) move
 * one server up or down, O(log n) each. When the top cannot be used (tried,
 * down, or ramping up under slow start and not admitted) the pick searches
 * the heap below it, visiting at most LC_VISIT nodes before falling back to
 * a linear scan. Pools of up to LC_SCAN servers are always scanned, in the
 * same order: there a scan costs less than keeping the heap.
 *
 * The counts are this worker's own (struct up_worker.inflight): a shared
 * count would put two read-modify-writes on a contended line into every
 * request, which the design forbids. Connections spread evenly over the
 * workers (SO_REUSEPORT), so each worker's view of a slow server is the
 * whole picture in proportion: a server that holds requests longer holds
 * more of every worker's.
 */
#include "upstream/up_int.h"

#include <stdlib.h>

#define LC_STEP (1ull << 20)   /* virtual time of one pick at weight 1 */
#define LC_RENORM (1ull << 60) /* virtual times are shifted down past this */
#define LC_VISIT 64            /* heap nodes a pick may look at */
#define LC_SCAN 8              /* pools this small are scanned, not kept in a heap */

struct lc_worker {
    uint32_t *heap; /* server indices in heap order */
    uint32_t *pos;  /* pos[s]: where server s is in heap */
    uint64_t *vt;   /* virtual finish times */
    uint64_t now;   /* the last pick's start time */
};

struct lc {
    void *slab; /* per-worker heaps, up_slab_new */
    size_t stride;
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

static int lc_init(up_pool *p)
{
    struct lc *l = calloc(1, sizeof(*l));
    size_t n = p->n, bytes = n * (2 * sizeof(uint32_t) + sizeof(uint64_t));

    if (!(p->lb = l) || n > UINT32_MAX)
        return -1;
    if (!(l->w = calloc(p->nworkers, sizeof(*l->w))) ||
        !(l->slab = up_slab_new(p->nworkers, bytes, &l->stride)))
        return -1;
    for (unsigned w = 0; w < p->nworkers; w++) {
        struct lc_worker *lw = &l->w[w];
        char *b = (char *)l->slab + (size_t)w * l->stride;
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
    struct lc_worker *lw = &((struct lc *)p->lb)->w[w];
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

/* A request started on <s>: its load went up, it moves down. */
static void lc_start(up_pool *p, unsigned w, size_t s)
{
    struct lc_worker *lw = &((struct lc *)p->lb)->w[w];

    if (p->n > LC_SCAN)
        sift_down(p, w, lw, lw->pos[s]);
}

/* A request ended on <s>: its load went down, it moves up. */
static void lc_end(up_pool *p, unsigned w, size_t s)
{
    struct lc_worker *lw = &((struct lc *)p->lb)->w[w];

    if (p->n > LC_SCAN)
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
