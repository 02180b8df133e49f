/*
 * least_conn.c - least connections, weighted (nginx's least_conn): the
 * usable server with the fewest requests in flight per unit of weight, and
 * among equals smooth weighted round robin, so that a pool with no load
 * still follows its weights. Slow start scales the weight (HAProxy's
 * eweight).
 *
 * The counts are this worker's own (struct up_worker.inflight): a shared
 * count would put two read-modify-writes on a contended line into every
 * request, which the design forbids. Connections spread evenly over the
 * workers (SO_REUSEPORT), so each worker's view of a slow server is the
 * whole picture in proportion: a server that holds requests longer holds
 * more of every worker's. Two linear passes over the servers per pick.
 */
#include "upstream/up_int.h"

/* a/wa < b/wb, without division */
static inline int lighter(uint64_t a, uint64_t wa, uint64_t b, uint64_t wb)
{
    return a * wb < b * wa;
}

/* Server <s>'s weight for the comparison: its own, or in thousandths and
 * scaled by slow start when a ramp may be running. */
static inline uint64_t lc_weight(const up_pool *p, size_t s, uint64_t now, int ramping)
{
    return ramping ? up_eweight(p, s, now) : p->weight[s];
}

static size_t lc_select(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health)
{
    const _Atomic uint32_t *inflight = p->ws[w].inflight;
    uint64_t now = rq ? rq->now_ms : 0, bl = 0, bw = 1;
    int ramping = p->opts.slow_start_ms && now;
    long long *cw = p->ws[w].cw, total = 0;
    size_t n = p->n, best = UP_NONE, ties = 0, pick = UP_NONE;

    for (size_t s = 0; s < n; s++) {
        if (!up_usable(p, s, rq, ignore_health))
            continue;
        uint64_t l = atomic_load_explicit(&inflight[s], memory_order_relaxed);
        uint64_t ew = lc_weight(p, s, now, ramping);
        if (best == UP_NONE || lighter(l, ew, bl, bw)) {
            best = s;
            bl = l;
            bw = ew;
            ties = 1;
        } else if (!lighter(bl, bw, l, ew)) {
            ties++;
        }
    }
    if (ties <= 1)
        return best;
    /* smooth weighted round robin among the ties, from the first one */
    for (size_t s = best; s < n; s++) {
        if (!up_usable(p, s, rq, ignore_health))
            continue;
        uint64_t l = atomic_load_explicit(&inflight[s], memory_order_relaxed);
        uint64_t ew = lc_weight(p, s, now, ramping);
        if (lighter(l, ew, bl, bw) || lighter(bl, bw, l, ew))
            continue;
        cw[s] += (long long)ew;
        total += (long long)ew;
        if (pick == UP_NONE || cw[s] > cw[pick])
            pick = s;
    }
    cw[pick] -= total;
    return pick;
}

static int lc_init(up_pool *p)
{
    p->lb = NULL;
    return 0;
}

static void lc_destroy(up_pool *p)
{
    (void)p;
}

const struct up_lb_ops up_lb_least_conn = {
    .name = "least_conn",
    .init = lc_init,
    .select = lc_select,
    .destroy = lc_destroy,
};
