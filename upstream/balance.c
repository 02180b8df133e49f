/*
 * balance.c - the balancer interface's front (up_select, up_pick, request
 * start and end with the per-worker in-flight counts), the tried set and
 * the fallback scan. The per-server tests every balancer runs (health,
 * tried, slow start, the generator) are inline in up_int.h; the balancers
 * themselves are rr.c, least_conn.c, random_two.c and maglev.c.
 */
#include "upstream/up_int.h"

void up_tried_add(struct up_tried *t, size_t s)
{
    if (t->n < UP_TRIED_MAX) {
        t->s[t->n++] = (uint32_t)s;
        return;
    }
    for (unsigned i = 1; i < UP_TRIED_MAX; i++)
        t->s[i - 1] = t->s[i];
    t->s[UP_TRIED_MAX - 1] = (uint32_t)s;
}

int up_tried_has(const struct up_tried *t, size_t s)
{
    for (unsigned i = 0; t && i < t->n; i++)
        if (t->s[i] == s)
            return 1;
    return 0;
}

size_t up_scan(const up_pool *p, size_t from, const struct up_pick *rq, int ignore_health)
{
    for (size_t i = 0; i < p->n; i++) {
        size_t s = (from + i) % p->n;
        if (up_usable(p, s, rq, ignore_health))
            return s;
    }
    return UP_NONE;
}

/* What a balancer's select returns when it found no server. After a pick
 * that respected health (<ignore_health> 0) there are two more tries, both
 * rare:
 * - slow start may have refused every usable server (each admits with its
 *   ramp's probability: a lone server up, or every server back at once),
 *   and a server that is up must not make the request fail: the pick is
 *   made again without the ramp (the hash balancer has none); should that
 *   find none either, its own fallback comes here again, without a ramp;
 * - every server may be down: a panicking pool picks again ignoring
 *   health, and that pick's fallback is UP_NONE. "Every server down" is
 *   found by looking at the health words (health.c), which stops at the
 *   first server up. */
size_t up_fallback(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    struct up_pick flat;

    if (ignore_health)
        return UP_NONE;
    if (rq && rq->now_ms && p->opts.slow_start_ms && p->lb_ops != &up_lb_hash) {
        flat = *rq;
        flat.now_ms = 0;
        rq = &flat;
        if (!up_pool_all_down(p))
            return p->lb_ops->select(p, w, rq, 0);
    }
    return up_pool_panicking(p) ? p->lb_ops->select(p, w, rq, 1) : UP_NONE;
}

/* The balancer's call and nothing else (a tail jump): its select settles a
 * pick that finds no server through up_fallback, so that this frame need
 * not keep the arguments for it. */
size_t up_select(up_pool *p, unsigned w, const struct up_pick *rq)
{
    return p->lb_ops->select(p, w, rq, 0);
}

size_t up_pick(up_pool *p, unsigned w)
{
    return up_select(p, w, NULL);
}

/* Single-writer counts: a relaxed load and store, no read-modify-write.
 * Returns the new count. */
static uint32_t add_load(up_pool *p, unsigned w, size_t s, int d)
{
    _Atomic uint32_t *c = &p->ws[w].inflight[s];
    uint32_t n = atomic_load_explicit(c, memory_order_relaxed) + (uint32_t)d;

    atomic_store_explicit(c, n, memory_order_relaxed);
    return n;
}

void up_request_start(up_pool *p, unsigned w, size_t s)
{
    uint32_t n = add_load(p, w, s, 1);

    if (p->lb_ops->start)
        p->lb_ops->start(p, w, s, n);
}

void up_request_end(up_pool *p, unsigned w, size_t s)
{
    uint32_t n = add_load(p, w, s, -1);

    if (p->lb_ops->end)
        p->lb_ops->end(p, w, s, n);
}

uint64_t up_inflight(const up_pool *p, size_t s)
{
    uint64_t n = 0;

    for (unsigned w = 0; w < p->nworkers; w++)
        n += up_load(p, w, s);
    return n;
}
