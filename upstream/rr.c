/*
 * rr.c - round robin: nginx's smooth weighted round robin, each worker on
 * its own. The sequence it produces repeats every (sum of weights / their
 * gcd) picks, so init runs it once for that period into a shared, read-only
 * schedule, and a pick is one load of the worker's cursor and one of the
 * schedule: O(1) at any pool size, and the same sequence as running the
 * algorithm live. A pool whose period would make the schedule too big
 * (weights up to 1000 on many servers) runs it live instead, O(n) a pick.
 *
 * A server that cannot be used (tried, down, ramping up and not admitted)
 * is skipped by moving on in the sequence, so the others keep their
 * proportions; after one whole period without a usable server, a linear
 * scan settles it.
 */
#include "upstream/up_int.h"

#include <stdlib.h>

/* Schedules up to this many entries, and init work up to period * n. */
#define RR_MAX_PERIOD (1u << 16)
#define RR_MAX_WORK (1ull << 26)

/* One step of smooth weighted round robin on current weights <cw>. */
static size_t swrr_step(const up_pool *p, long long *cw)
{
    size_t best = 0;

    if (p->n == 1)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        cw[i] += p->weight[i];
        if (cw[i] > cw[best])
            best = i;
    }
    cw[best] -= p->total_weight;
    return best;
}

static int rr_init(up_pool *p)
{
    struct up_rr *r = calloc(1, sizeof(*r));
    unsigned long long g = 0;
    long long *cw;

    if (!(p->lb = r))
        return -1;
    for (size_t i = 0; i < p->n; i++)
        g = up_gcd(p->weight[i], g);
    r->period = (size_t)((unsigned long long)p->total_weight / g);
    if (r->period > RR_MAX_PERIOD || (unsigned long long)r->period * p->n > RR_MAX_WORK)
        return 0; /* live */
    if (!(r->sched = malloc(r->period * sizeof(*r->sched))) || !(cw = calloc(p->n, sizeof(*cw)))) {
        free(r->sched);
        r->sched = NULL;
        return -1;
    }
    for (size_t i = 0; i < r->period; i++)
        r->sched[i] = (uint32_t)swrr_step(p, cw);
    free(cw);
    return 0;
}

static size_t rr_next(up_pool *p, unsigned w, const struct up_rr *r)
{
    struct up_wfix *fx = p->ws[w].fx;
    size_t s;

    if (!r->sched)
        return swrr_step(p, p->ws[w].cw);
    s = r->sched[fx->cursor];
    if (++fx->cursor == r->period)
        fx->cursor = 0;
    return s;
}

static size_t rr_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const struct up_rr *r = p->lb;
    uint64_t now = rq ? rq->now_ms : 0;
    size_t s = 0, tries = r->sched ? r->period : p->n;

    for (size_t i = 0; i < tries; i++) {
        s = rr_next(p, w, r);
        if (up_usable(p, s, rq, ignore_health) && up_slow_admit(p, w, s, now))
            return s;
    }
    return up_found(p, w, rq, ignore_health, up_scan(p, s, rq, ignore_health));
}

static void rr_destroy(up_pool *p)
{
    struct up_rr *r = p->lb;

    if (r)
        free(r->sched);
    free(r);
}

const struct up_lb_ops up_lb_round_robin = {
    .name = "round_robin",
    .init = rr_init,
    .select = rr_select,
    .destroy = rr_destroy,
};
