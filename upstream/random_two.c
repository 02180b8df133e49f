/*
 * random_two.c - the power of two choices (Envoy's default least-request):
 * two candidates drawn at random in proportion to their weights, and the one
 * with fewer requests in flight per unit of weight wins (the first drawn on a
 * tie, so a pool with no load follows its weights). Slow start scales the
 * weights in both: a candidate is drawn in proportion to its ramped weight
 * (a ramping server drawn is kept with its ramp's probability, else drawn
 * again), and the comparison divides by the ramped weights, so a server
 * back up gets its ramp's share of an idle pool, not the share of every
 * pair it is drawn in. Drawing is one slot of an alias table: O(1).
 *
 * The counts are this worker's own, as in least_conn.c and for the same
 * reason; the generator is the worker's too (struct up_wfix.rng).
 */
#include "upstream/up_int.h"

#include <stdlib.h>

/* Draws before falling back to a linear scan (many servers unusable). */
#define R2_DRAWS 8

/* One slot of Vose's alias table: a draw is O(1), and reads one 8-byte
 * slot (one cache line) rather than two arrays. */
struct r2_slot {
    uint32_t prob; /* out of total_weight: keep this slot's server, else take alias */
    uint32_t alias;
};

struct r2 {
    struct r2_slot *slot; /* n of them */
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
    r->slot = malloc(n * sizeof(*r->slot));
    scaled = malloc(n * sizeof(*scaled));
    small = malloc(n * sizeof(*small));
    large = malloc(n * sizeof(*large));
    if (!r->slot || !scaled || !small || !large)
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
        r->slot[l] = (struct r2_slot){(uint32_t)scaled[l], (uint32_t)g};
        scaled[g] -= total - scaled[l];
        if (scaled[g] < total)
            small[nsmall++] = g;
        else
            large[nlarge++] = g;
    }
    while (nlarge)
        r->slot[large[--nlarge]] = (struct r2_slot){(uint32_t)total, 0};
    while (nsmall) /* only by rounding; cannot happen in integers, kept safe */
        r->slot[small[--nsmall]] = (struct r2_slot){(uint32_t)total, 0};
    rc = 0;
out:
    free(scaled);
    free(small);
    free(large);
    return rc;
}

/* A server drawn in proportion to its weight from the random number <x>:
 * its high half picks the slot, its low half tosses the coin. */
static inline size_t draw(const up_pool *p, const struct r2 *r, uint64_t x)
{
    uint32_t i = up_below(x, (uint32_t)p->n);
    uint32_t coin = (uint32_t)(((x & 0xffffffffu) * (uint64_t)p->total_weight) >> 32);
    struct r2_slot sl = r->slot[i];

    return up_sel(coin < sl.prob, i, sl.alias); /* the coin is random: no branch */
}

/* A server drawn in proportion to its weight scaled by slow start at
 * <now>: rejection sampling, a ramping server drawn being kept with its
 * ramp's probability; after R2_DRAWS rejections the last one drawn. Its
 * ramp, in thousandths, goes to <*share> (for the comparison). */
static size_t draw_ramped(up_pool *p, unsigned w, const struct r2 *r, uint64_t now, unsigned *share)
{
    size_t s = 0;

    for (int i = 0; i < R2_DRAWS; i++) {
        s = draw(p, r, up_rand(p, w));
        if ((*share = up_ramp(p, s, now)) >= 1000 || up_below(up_rand(p, w), 1000) < *share)
            break;
    }
    return s;
}

static size_t r2_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const struct r2 *r = p->lb;
    uint64_t now = p->opts.slow_start_ms && rq ? rq->now_ms : 0;
    unsigned sa = 1, sb = 1; /* the ramps, when slow start is on */
    size_t a = 0;

    for (int i = 0; i < R2_DRAWS; i++) {
        size_t b;
        if (now) {
            a = draw_ramped(p, w, r, now, &sa);
            b = draw_ramped(p, w, r, now, &sb);
        } else {
            a = draw(p, r, up_rand(p, w));
            b = draw(p, r, up_rand(p, w));
        }
        int ua = up_usable(p, a, rq, ignore_health), ub = up_usable(p, b, rq, ignore_health);
        if (ua && ub) {
            uint64_t la = up_load(p, w, a), lb = up_load(p, w, b);
            return up_sel(lb * p->weight[a] * sa < la * p->weight[b] * sb, b, a); /* no branch */
        }
        if (ua || ub)
            return ua ? a : b;
    }
    return up_found(p, w, rq, ignore_health, up_scan(p, a, rq, ignore_health));
}

static void r2_destroy(up_pool *p)
{
    struct r2 *r = p->lb;

    if (r)
        free(r->slot);
    free(r);
}

const struct up_lb_ops up_lb_random_two = {
    .name = "random_two",
    .init = r2_init,
    .select = r2_select,
    .destroy = r2_destroy,
};
