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
    uint32_t *prob;  /* out of total_weight: keep slot i, else take alias[i] */
    uint32_t *alias; /* Vose's alias method: one draw is O(1) */
};

/* Vose's alias table in integers: every slot holds n * weight / total of
 * one server and the rest of another, so a uniform slot and a uniform coin
 * draw a server exactly in proportion to its weight. */
static int r2_init(up_pool *p)
{
    struct r2 *r = calloc(1, sizeof(*r));
    size_t n = p->n, nsmall = 0, nlarge = 0;
    uint64_t total = (uint64_t)p->total_weight, *scaled = NULL;
    size_t *small = NULL, *large = NULL;
    int rc = -1;

    if (!(p->lb = r) || total > UINT32_MAX || n > UINT32_MAX)
        return -1;
    r->prob = malloc(n * sizeof(*r->prob));
    r->alias = malloc(n * sizeof(*r->alias));
    scaled = malloc(n * sizeof(*scaled));
    small = malloc(n * sizeof(*small));
    large = malloc(n * sizeof(*large));
    if (!r->prob || !r->alias || !scaled || !small || !large)
        goto out;
    for (size_t i = 0; i < n; i++) {
        scaled[i] = (uint64_t)p->weight[i] * n;
        if (scaled[i] < total)
            small[nsmall++] = i;
        else
            large[nlarge++] = i;
    }
    while (nsmall && nlarge) {
        size_t l = small[--nsmall], g = large[--nlarge];
        r->prob[l] = (uint32_t)scaled[l];
        r->alias[l] = (uint32_t)g;
        scaled[g] -= total - scaled[l];
        if (scaled[g] < total)
            small[nsmall++] = g;
        else
            large[nlarge++] = g;
    }
    while (nlarge)
        r->prob[large[--nlarge]] = (uint32_t)total;
    while (nsmall) /* only by rounding; cannot happen in integers, kept safe */
        r->prob[small[--nsmall]] = (uint32_t)total;
    rc = 0;
out:
    free(scaled);
    free(small);
    free(large);
    return rc;
}

/* A server drawn in proportion to its weight: the high half of one random
 * number picks the slot, the low half tosses the coin. */
static size_t draw(up_pool *p, unsigned w, const struct r2 *r)
{
    uint64_t x = up_rand(p, w);
    uint32_t slot = up_below(x, (uint32_t)p->n);
    uint32_t coin = (uint32_t)(((x & 0xffffffffu) * (uint64_t)p->total_weight) >> 32);

    return coin < r->prob[slot] ? slot : r->alias[slot];
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

    if (r) {
        free(r->prob);
        free(r->alias);
    }
    free(r);
}

const struct up_lb_ops up_lb_random_two = {
    .name = "random_two",
    .init = r2_init,
    .select = r2_select,
    .destroy = r2_destroy,
};
