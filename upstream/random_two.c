/*
 * random_two.c - the power of two choices (Envoy's default least-request):
 * two candidates drawn at random in proportion to their weights, and the one
 * with fewer requests in flight per unit of weight wins (the first drawn on a
 * tie, so a pool with no load follows its weights). Slow start scales the
 * weight in the comparison and admits a ramping winner with its ramp's
 * probability (else the other candidate wins). Drawing is a binary
 * search in the cumulative weights: O(log n) a pick.
 *
 * The counts are this worker's own, as in least_conn.c and for the same
 * reason; the generator is the worker's too (struct up_wfix.rng).
 */
#include "upstream/up_int.h"

#include <stdlib.h>

/* Draws before falling back to a linear scan (many servers unusable). */
#define R2_DRAWS 8

struct r2 {
    uint64_t *cum; /* cum[i]: weights of servers 0..i */
};

static int r2_init(up_pool *p)
{
    struct r2 *r = calloc(1, sizeof(*r));
    uint64_t sum = 0;

    if (!(p->lb = r) || !(r->cum = malloc(p->n * sizeof(*r->cum))))
        return -1;
    for (size_t i = 0; i < p->n; i++)
        r->cum[i] = sum += (uint64_t)p->servers[i].weight;
    return 0;
}

/* A server drawn in proportion to its weight. */
static size_t draw(up_pool *p, unsigned w, const struct r2 *r)
{
    uint64_t x = up_rand(p, w) % (uint64_t)p->total_weight;
    size_t lo = 0, hi = p->n - 1;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->cum[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static size_t r2_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const struct r2 *r = p->lb;
    uint64_t now = rq ? rq->now_ms : 0;
    size_t a = 0;

    for (int i = 0; i < R2_DRAWS; i++) {
        a = draw(p, w, r);
        size_t b = draw(p, w, r);
        int ua = up_usable(p, a, rq, ignore_health), ub = up_usable(p, b, rq, ignore_health);
        if (ua && ub) {
            uint64_t la = up_load(p, w, a), lb = up_load(p, w, b);
            uint64_t wa = up_eweight(p, a, now), wb = up_eweight(p, b, now);
            size_t win = lb * wa < la * wb ? b : a;
            /* a ramping winner gets its share only; with no load the
             * comparison alone would not hold it back */
            return up_slow_admit(p, w, win, now) ? win : (win == a ? b : a);
        }
        if (ua || ub)
            return ua ? a : b;
    }
    return up_scan(p, a, rq, ignore_health);
}

static void r2_destroy(up_pool *p)
{
    struct r2 *r = p->lb;

    if (r)
        free(r->cum);
    free(r);
}

const struct up_lb_ops up_lb_random_two = {
    .name = "random_two",
    .init = r2_init,
    .select = r2_select,
    .destroy = r2_destroy,
};
